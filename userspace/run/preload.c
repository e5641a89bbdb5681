// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libmercury-preload.so: tag the sockets of an unmodified program.
 *
 * In the style of cwrap's socket_wrapper: each exported wrapper (connect,
 * accept, accept4, sendto, sendmsg, close) runs the mercury logic and then
 * the real libc symbol, bound lazily with dlsym(RTLD_NEXT). Configuration
 * comes only from the environment (MERCURY_RULES, MERCURY_TAG_SOURCE,
 * MERCURY_SHIFT, MERCURY_MASK, MERCURY_DEBUG), read once. The shim never
 * breaks the program: bad configuration or a failed setsockopt is reported
 * once on stderr and the call goes through untagged.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	if (mrun.debug)
		say("mercury-preload: %zu rule(s) from \"%s\"", mrun.nrules,
		    rules);
}

static void init(void)
{
	pthread_once(&mrun.once, mrun_init);
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
	if (fresh)
		mercury_tagger_forget(mrun.tagger, fd);	/* a new socket */
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

/* The fd number will be reused: its cached tag must go. */
EXPORT int close(int fd)
{
	init();
	if (mrun.tagger) {
		pthread_mutex_lock(&mrun.lock);
		mercury_tagger_forget(mrun.tagger, fd);
		pthread_mutex_unlock(&mrun.lock);
	}
	return real_close(fd);
}
