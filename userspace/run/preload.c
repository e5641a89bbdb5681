// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libmercury-preload.so: tag the sockets of an unmodified program.
 *
 * In the style of cwrap's socket_wrapper: each exported wrapper (connect,
 * accept, accept4, sendto, sendmsg, and the calls that retire or reuse an
 * fd number: close, close_range, dup, dup2, dup3, fcntl's F_DUPFD) runs the
 * mercury logic and then the real libc symbol, found with dlsym(RTLD_NEXT)
 * as the shim loads. Configuration comes only from the environment
 * (MERCURY_RULES, MERCURY_TAG_SOURCE, MERCURY_SHIFT, MERCURY_MASK,
 * MERCURY_DEBUG), read then, once. The shim never breaks the program: bad
 * configuration or a failed setsockopt is reported once on stderr and the
 * call goes through untagged.
 *
 * The tagger caches the tag it last wrote per fd number. Every call that
 * makes an fd number name another file marks the number stale in a plain
 * array of flags, with one atomic store: no lock, no allocation, so these
 * wrappers stay async-signal-safe as libc's own are, and a child forked
 * while another thread held the tagger's lock can still close its fds. The
 * next tagging of a stale fd drops its cached tag first. The lock itself
 * is taken around fork() (pthread_atfork), so a child never inherits it
 * held.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mercury/mercury.h"
#include "rules.h"

#define EXPORT __attribute__((visibility("default")))

static struct {
	pthread_once_t once;
	pthread_mutex_t lock;		/* the tagger's fd cache */
	struct mercury_tagger *tagger;	/* NULL: disabled */
	struct mrun_rule *rules;
	size_t nrules;
	unsigned char *stale;		/* per fd number: 1 = cached tag void */
	size_t nstale;			/* fds covered; others never cached */
	bool debug;
	bool warned_tag;		/* one warning per process */
} mrun = {
	.once = PTHREAD_ONCE_INIT,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static ssize_t (*real_sendto)(int, const void *, size_t, int,
			      const struct sockaddr *, socklen_t);
static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
static int (*real_close)(int);
static int (*real_close_range)(unsigned int, unsigned int, int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_fcntl)(int, int, ...);

/* Most fds a process can hold that get a stale flag (1 MiB of flags). */
#define MRUN_MAX_STALE	(1U << 20)

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* write(2), not stdio: safe whatever state the program's stdio is in */
	if (write(STDERR_FILENO, buf, n) < 0)
		return;
}

static void *bind_real(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p) {
		say("mercury-preload: no libc symbol %s", name);
		abort();
	}
	return p;
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&mrun.lock);
}

static void atfork_release(void)
{
	pthread_mutex_unlock(&mrun.lock);
}

/* Flags for every fd the process may open, sized by its hard limit. */
static void stale_init(void)
{
	struct rlimit rl;
	size_t n = MRUN_MAX_STALE;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_max < n)
		n = rl.rlim_max;
	mrun.stale = calloc(n, 1);
	mrun.nstale = mrun.stale ? n : 0;
}

static void mrun_init(void)
{
	MERCURY_OPTS(mercury_tag_opts, o);
	const char *rules = getenv("MERCURY_RULES");
	const char *dbg = getenv("MERCURY_DEBUG");
	char err[256];

	real_connect = bind_real("connect");
	real_accept = bind_real("accept");
	real_accept4 = bind_real("accept4");
	real_sendto = bind_real("sendto");
	real_sendmsg = bind_real("sendmsg");
	real_close = bind_real("close");
	real_close_range = bind_real("close_range");
	real_dup = bind_real("dup");
	real_dup2 = bind_real("dup2");
	real_dup3 = bind_real("dup3");
	real_fcntl = bind_real("fcntl");
	mrun.debug = dbg && *dbg && strcmp(dbg, "0");

	if (!rules || !*rules)
		return;
	if (mrun_rules_parse(rules, &mrun.rules, &mrun.nrules, err,
			     sizeof(err))) {
		say("mercury-preload: MERCURY_RULES: %s; not tagging", err);
		return;
	}
	if (mercury_tag_opts_from_env(&o) || mercury_tagger_new(&o, &mrun.tagger)) {
		say("mercury-preload: %s; not tagging", mercury_last_error());
		free(mrun.rules);
		mrun.rules = NULL;
		mrun.nrules = 0;
		return;
	}
	stale_init();
	if (pthread_atfork(atfork_prepare, atfork_release, atfork_release))
		say("mercury-preload: pthread_atfork failed; a child forked while tagging may hang");
	if (mrun.debug)
		say("mercury-preload: %zu rule(s) from \"%s\"", mrun.nrules,
		    rules);
}

static void init(void)
{
	pthread_once(&mrun.once, mrun_init);
}

/*
 * Set up as the shim loads, while the program has one thread. Left to the
 * first wrapped call, the setup could be under way in one thread while
 * another forks; the child, whose pthread_once restarts a setup that a
 * fork cut short, ran it again: under ASan (gcc 12's allocator is not
 * guarded across fork) its first malloc waited for ever on a lock the
 * parent's thread held, and without it the child could end up with the
 * atfork handler registered twice, so that its own next fork would take
 * the lock twice. The wrappers still call init(): another library's
 * constructor may call one before this runs.
 */
__attribute__((constructor)) static void mrun_load(void)
{
	init();
}

static bool is_inet(const struct sockaddr *sa)
{
	return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

static uint16_t port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
}

/* fd now names another file: its cached tag is void. Async-signal-safe. */
static void mark_stale(int fd)
{
	if (fd >= 0 && (size_t)fd < mrun.nstale)
		__atomic_store_n(&mrun.stale[fd], 1, __ATOMIC_RELEASE);
}

/* Under mrun.lock: may the cached tag of fd be trusted? */
static bool cache_valid(int fd)
{
	if ((size_t)fd >= mrun.nstale)
		return false;
	return !__atomic_exchange_n(&mrun.stale[fd], 0, __ATOMIC_ACQ_REL);
}

/* Tag fd for peer/port by the rules; errno is left as it was. */
static void tag_fd(int fd, const struct sockaddr *peer, uint16_t port,
		   bool fresh, const char *why)
{
	int saved = errno, tag, err;

	if (!mrun.tagger)
		return;
	tag = mrun_rules_match(mrun.rules, mrun.nrules, peer, port);
	if (tag < 0)
		goto out;
	pthread_mutex_lock(&mrun.lock);
	/* cache_valid() first: it also clears the flag for a fresh fd */
	if (!cache_valid(fd) || fresh)
		mercury_tagger_forget(mrun.tagger, fd);
	err = mercury_tag_socket(mrun.tagger, fd, tag);
	if (err && !mrun.warned_tag) {
		mrun.warned_tag = true;
		say("mercury-preload: %s: tag %d on fd %d: %s", why, tag, fd,
		    mercury_last_error());
	}
	pthread_mutex_unlock(&mrun.lock);
	if (mrun.debug && !err)
		say("mercury-preload: %s: fd %d port %u tag %d", why, fd, port,
		    tag);
out:
	errno = saved;
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	init();
	/* Before the handshake, so the SYN carries the tag too. */
	if (is_inet(addr) && len >= sizeof(struct sockaddr_in))
		tag_fd(fd, addr, port_of(addr), true, "connect");
	return real_connect(fd, addr, len);
}

static void tag_accepted(int fd)
{
	struct sockaddr_storage peer, local;
	socklen_t pl = sizeof(peer), ll = sizeof(local);

	if (getpeername(fd, (struct sockaddr *)&peer, &pl) ||
	    getsockname(fd, (struct sockaddr *)&local, &ll) ||
	    !is_inet((struct sockaddr *)&local))
		return;
	tag_fd(fd, (struct sockaddr *)&peer, port_of((struct sockaddr *)&local),
	       true, "accept");
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int s;

	init();
	s = real_accept(fd, addr, len);
	if (s >= 0 && mrun.tagger)
		tag_accepted(s);
	return s;
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int s;

	init();
	s = real_accept4(fd, addr, len, flags);
	if (s >= 0 && mrun.tagger)
		tag_accepted(s);
	return s;
}

/* UDP (or any send with an explicit inet destination): tag per datagram. */
EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
		      const struct sockaddr *addr, socklen_t len)
{
	init();
	if (is_inet(addr) && len >= sizeof(struct sockaddr_in))
		tag_fd(fd, addr, port_of(addr), false, "sendto");
	return real_sendto(fd, buf, n, flags, addr, len);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	init();
	if (msg && is_inet(msg->msg_name) &&
	    msg->msg_namelen >= sizeof(struct sockaddr_in))
		tag_fd(fd, msg->msg_name, port_of(msg->msg_name), false,
		       "sendmsg");
	return real_sendmsg(fd, msg, flags);
}

/*
 * The calls below retire an fd number or make it name another file. They
 * only mark the number stale: no lock, so they stay async-signal-safe.
 */
EXPORT int close(int fd)
{
	init();
	if (mrun.tagger)
		mark_stale(fd);
	return real_close(fd);
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	int r;

	init();
	r = real_close_range(first, last, flags);
	if (!r && mrun.tagger)
		for (size_t fd = first; fd <= last && fd < mrun.nstale; fd++)
			mark_stale(fd);
	return r;
}

EXPORT int dup(int old)
{
	int fd;

	init();
	fd = real_dup(old);
	if (mrun.tagger)
		mark_stale(fd);
	return fd;
}

EXPORT int dup2(int old, int new)
{
	int fd;

	init();
	fd = real_dup2(old, new);
	if (mrun.tagger)
		mark_stale(fd);
	return fd;
}

EXPORT int dup3(int old, int new, int flags)
{
	int fd;

	init();
	fd = real_dup3(old, new, flags);
	if (mrun.tagger)
		mark_stale(fd);
	return fd;
}

static int dupfd_checked(int fd, int cmd, void *arg)
{
	int r;

	init();
	r = real_fcntl(fd, cmd, arg);
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && mrun.tagger)
		mark_stale(r);
	return r;
}

/*
 * Every fcntl argument is an int or a pointer: pass one word through.
 * Programs built with 64-bit file offsets (Python among them) call
 * fcntl64, the same function in glibc on 64-bit targets.
 */
EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return dupfd_checked(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return dupfd_checked(fd, cmd, arg);
}
