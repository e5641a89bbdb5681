// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-run: rule parsing, and real programs (tests/probe) run under the
 * launcher and shim on 127.0.0.1, checked with getsockopt on their sockets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rules.h"

#define RUN	RUNDIR "/mercury-run"
#define SHIM	RUNDIR "/libmercury-preload.so"
#define PROBE	RUNDIR "/tests/probe"

static struct sockaddr *sin4(const char *ip, uint16_t port,
			     struct sockaddr_storage *ss)
{
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	inet_pton(AF_INET, ip, &a->sin_addr);
	return (struct sockaddr *)ss;
}

static struct sockaddr *sin6(const char *ip, struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	a->sin6_family = AF_INET6;
	inet_pton(AF_INET6, ip, &a->sin6_addr);
	return (struct sockaddr *)ss;
}

static void test_rules_match(void **state)
{
	struct sockaddr_storage ss;
	struct mrun_rule *r;
	char err[256];
	size_t n;

	(void)state;
	assert_int_equal(mrun_rules_parse("port=5000-5100:tag=3,addr=10.0.0.2:tag=1,"
					  "addr=[fe80::]/16:port=22:tag=9,"
					  "addr=192.168.4.0/22:tag=4,default:tag=7",
					  &r, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 5);
	assert_int_equal(mrun_rules_match(r, n, sin4("10.0.0.2", 5050, &ss), 5050), 3);
	assert_int_equal(mrun_rules_match(r, n, sin4("10.0.0.2", 80, &ss), 80), 1);
	assert_int_equal(mrun_rules_match(r, n, sin4("10.0.0.3", 5100, &ss), 5100), 3);
	assert_int_equal(mrun_rules_match(r, n, sin4("10.0.0.3", 5101, &ss), 5101), 7);
	assert_int_equal(mrun_rules_match(r, n, sin4("192.168.7.255", 1, &ss), 1), 4);
	assert_int_equal(mrun_rules_match(r, n, sin4("192.168.8.0", 1, &ss), 1), 7);
	assert_int_equal(mrun_rules_match(r, n, sin6("fe80::1", &ss), 22), 9);
	assert_int_equal(mrun_rules_match(r, n, sin6("fe80::1", &ss), 23), 7);
	assert_int_equal(mrun_rules_match(r, n, sin6("fe81::1", &ss), 22), 7);
	/* An IPv4-mapped peer matches the IPv4 rule. */
	assert_int_equal(mrun_rules_match(r, n, sin6("::ffff:10.0.0.2", &ss), 1), 1);
	assert_int_equal(mrun_rules_max_tag(r, n), 9);
	free(r);

	assert_int_equal(mrun_rules_parse("port=80:tag=2", &r, &n, err,
					  sizeof(err)), 0);
	assert_int_equal(mrun_rules_match(r, n, sin4("1.2.3.4", 81, &ss), 81), -1);
	free(r);
}

static void test_rules_bad(void **state)
{
	static const struct {
		const char *s, *msg;
	} bad[] = {
		{ "port=5000", "needs one tag=N" },
		{ "tag=3", "needs one tag=N and a match" },
		{ "default:port=1:tag=3", "default alone" },
		{ "port=70000:tag=1", "bad port range" },
		{ "port=10-5:tag=1", "bad port range" },
		{ "port=a:tag=1", "bad port range" },
		{ "addr=10.0.0.300:tag=1", "bad address" },
		{ "addr=10.0.0.0/33:tag=1", "bad address" },
		{ "addr=[fe80::1:tag=1", "bad address" },
		{ "addr=fe80::1:tag=1", "bad address" },
		{ "port=1:tag=1:tag=2", "bad term \"tag=2\"" },
		{ "port=1:tag=", "bad term" },
		{ "port=1:tag=-1", "bad term" },
		{ "prot=1:tag=1", "bad term \"prot=1\"" },
		{ "port=1:tag=1,,default:tag=2", "needs one tag=N" },
	};
	struct mrun_rule *r;
	char err[256];
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		if (mrun_rules_parse(bad[i].s, &r, &n, err, sizeof(err)) != -EINVAL ||
		    !strstr(err, bad[i].msg))
			fail_msg("\"%s\": got \"%s\"", bad[i].s, err);
	}
}

/* ---- running programs ---------------------------------------------------- */

struct result {
	int status;			/* exit code, or 128 + signal */
	char out[1024];
	char err[1024];
};

static void slurp(int fd, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t r;

	while (n + 1 < len && (r = read(fd, buf + n, len - n - 1)) > 0)
		n += r;
	buf[n] = 0;
}

/*
 * Run argv (NULL-terminated) with extra env "K=V" entries; unprivileged
 * drops to nobody first (setuid clears every capability).
 */
static void run(struct result *res, bool unprivileged, const char *const *env,
		const char *const *argv)
{
	int out[2], err[2], st;
	pid_t pid;

	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]);
		close(err[0]);
		for (; env && *env; env++)
			putenv((char *)*env);
		if (unprivileged && geteuid() == 0 &&
		    (setgid(65534) || setuid(65534)))
			_exit(99);
		execv(argv[0], (char *const *)argv);
		_exit(98);
	}
	close(out[1]);
	close(err[1]);
	slurp(out[0], res->out, sizeof(res->out));
	slurp(err[0], res->err, sizeof(res->err));
	close(out[0]);
	close(err[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int listen_lo(int type, unsigned short *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, type, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/*
 * mercury-run OPTS... -- probe MODE PORT [N]; stdout must be want. MODE
 * may carry the probe's count after a blank ("forkstorm 1500"). Only the
 * modes that connect get a TCP listener.
 */
static void expect_probe(const char *mode, const char *want, ...)
{
	const char *argv[32] = { RUN };
	char portstr[8], rules[4][64], modebuf[32], *count, *a;
	struct result res;
	unsigned short port;
	int l, i = 1, nr = 0;
	va_list ap;

	snprintf(modebuf, sizeof(modebuf), "%s", mode);
	count = strchr(modebuf, ' ');
	if (count)
		*count++ = 0;
	mode = modebuf;
	l = listen_lo(strcmp(mode, "connect") && strcmp(mode, "reuse") &&
		      strcmp(mode, "tos") ?
		      SOCK_DGRAM : SOCK_STREAM, &port);
	snprintf(portstr, sizeof(portstr), "%u", port);
	va_start(ap, want);
	while ((a = va_arg(ap, char *))) {
		/* "%P" in an option stands for the listener's port */
		if (strstr(a, "%P")) {
			char *p = strstr(a, "%P");

			assert_true(nr < 4);
			snprintf(rules[nr], sizeof(rules[nr]), "%.*s%u%s",
				 (int)(p - a), a, port, p + 2);
			a = rules[nr++];
		}
		argv[i++] = a;
	}
	va_end(ap);
	argv[i++] = "--";
	argv[i++] = PROBE;
	argv[i++] = mode;
	argv[i++] = portstr;
	if (count)
		argv[i++] = count;
	argv[i] = NULL;
	run(&res, false, NULL, argv);
	if (res.status || strcmp(res.out, want))
		fail_msg("%s: exit %d, out \"%s\", err \"%s\", wanted \"%s\"",
			 mode, res.status, res.out, res.err, want);
	close(l);
}

static void test_connect_priority(void **state)
{
	(void)state;
	expect_probe("connect", "priority 5 mark 0\n", "-s", "priority",
		     "-r", "port=%P:tag=5", NULL);
	/* No rule matches: untouched. */
	expect_probe("connect", "priority 0 mark 0\n", "-s", "priority",
		     "-r", "port=1-2:tag=5", NULL);
	expect_probe("connect", "priority 4 mark 0\n", "-s", "priority",
		     "-r", "addr=127.0.0.0/8:tag=4", NULL);
	/* A fixed tag for the job; an earlier rule still wins. */
	expect_probe("connect", "priority 6 mark 0\n", "-s", "priority",
		     "-t", "6", NULL);
	expect_probe("connect", "priority 2 mark 0\n", "-s", "priority",
		     "-t", "6", "-r", "port=%P:tag=2", NULL);
	/* DSCP: the TOS byte carries the tag in its top six bits */
	expect_probe("tos", "tos 20\n", "-s", "dscp", "-r", "port=%P:tag=5",
		     NULL);
	/* shift 1: tag 3 is priority 6 */
	expect_probe("connect", "priority 6 mark 0\n", "-s", "priority",
		     "--shift", "1", "--mask", "3", "-r", "port=%P:tag=3", NULL);
}

static void test_sendto_and_reuse(void **state)
{
	(void)state;
	expect_probe("sendto", "priority 3 mark 0\n", "-s", "priority",
		     "-r", "port=%P:tag=3", NULL);
	/*
	 * Close, then the same fd number for a new socket with the same
	 * tag: the shim must not trust its cache for the new socket.
	 */
	expect_probe("reuse", "priority 5 mark 0\nsame fd 1\npriority 5 mark 0\n",
		     "-s", "priority", "-r", "port=%P:tag=5,port=9:tag=5", NULL);
}

/*
 * Every way an fd number comes to name another socket: the shim's cached
 * tag for the number must not keep the new socket untagged.
 */
static void test_fd_renumbered(void **state)
{
	static const char * const modes[] = { "dup2", "dup3", "dup", "dupfd",
					       "closerange" };

	(void)state;
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		expect_probe(modes[m],
			     "priority 3 mark 0\nsame fd 1\npriority 3 mark 0\n",
			     "-s", "priority", "-r", "port=%P:tag=3", NULL);
}

/*
 * A child forked while another thread tags (what a PyTorch DataLoader
 * does) must not inherit the shim's lock held: none of 1500 may hang.
 */
static void test_fork_while_tagging(void **state)
{
	(void)state;
	expect_probe("forkstorm 1500", "hung 0\n", "-s", "priority", "-r",
		     "port=%P:tag=3", NULL);
}

/*
 * The same at start-up, 20 times: the first fork races the threads' first
 * calls into the shim. Under ASan, while the shim still set itself up in
 * its first call, 29 of 150 such runs had a child hang (it set the shim
 * up again and waited on a lock of the allocator for ever).
 */
static void test_fork_at_start(void **state)
{
	(void)state;
	for (int i = 0; i < 20; i++)
		expect_probe("forkstorm 3", "hung 0\n", "-s", "priority", "-r",
			     "port=%P:tag=3", NULL);
}

static void test_accept(void **state)
{
	const char *argv[] = { RUN, "-s", "priority", "-r",
			       "port=1024-65535:tag=3", "--", PROBE, "accept",
			       NULL };
	struct sockaddr_in a = { .sin_family = AF_INET };
	char line[128] = "", *nl;
	int out[2], st, fd;
	unsigned int port;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		dup2(out[1], 1);
		close(out[0]);
		execv(argv[0], (char *const *)argv);
		_exit(98);
	}
	close(out[1]);
	while (!(nl = strchr(line, '\n')) &&
	       (r = read(out[0], line + n, sizeof(line) - n - 1)) > 0) {
		n += r;
		line[n] = 0;
	}
	assert_int_equal(sscanf(line, "port %u", &port), 1);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	while ((r = read(out[0], line + n, sizeof(line) - n - 1)) > 0) {
		n += r;
		line[n] = 0;
	}
	assert_string_equal(nl + 1, "priority 3 mark 0\n");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fd);
	close(out[0]);
}

static void test_mark(void **state)
{
	(void)state;
	expect_probe("connect", "priority 0 mark 2304\n", "-s", "mark",
		     "--shift", "8", "--mask", "0xff", "-r", "port=%P:tag=9",
		     NULL);
	expect_probe("connect", "priority 0 mark 65535\n", "-t", "65535", NULL);
}

/*
 * Copies of the launcher, the shim and the probe in a fresh directory
 * everyone may read: nobody must be able to run them even when the tree
 * sits under a directory only root may enter (a clone in /root).
 */
struct nobody_dir {
	char dir[64];
	char run[96], probe[96], shim[96];
};

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t r;

	assert_true(in >= 0);
	out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0700);
	assert_true(out >= 0);
	assert_int_equal(fchmod(out, 0755), 0);	/* whatever the umask */
	while ((r = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, r), r);
	assert_int_equal(r, 0);
	close(in);
	close(out);
}

static int nobody_setup(void **state)
{
	struct nobody_dir *d = calloc(1, sizeof(*d));

	if (!d)
		return -1;
	strcpy(d->dir, "/tmp/mercury-run-test.XXXXXX");
	if (!mkdtemp(d->dir) || chmod(d->dir, 0755)) {
		free(d);
		return -1;
	}
	snprintf(d->run, sizeof(d->run), "%s/mercury-run", d->dir);
	snprintf(d->probe, sizeof(d->probe), "%s/probe", d->dir);
	snprintf(d->shim, sizeof(d->shim), "%s/libmercury-preload.so", d->dir);
	copy_file(RUN, d->run);
	copy_file(PROBE, d->probe);
	copy_file(SHIM, d->shim);
	*state = d;
	return 0;
}

static int nobody_teardown(void **state)
{
	struct nobody_dir *d = *state;

	unlink(d->run);
	unlink(d->probe);
	unlink(d->shim);
	rmdir(d->dir);
	free(d);
	return 0;
}

/* Without CAP_NET_ADMIN the launcher refuses, naming what is missing. */
static void test_unprivileged(void **state)
{
	struct nobody_dir *d = *state;
	const char *const mark[] = { d->run, "-t", "1", "--", d->probe,
				     "connect", "9", NULL };
	const char *const prio7[] = { d->run, "-s", "priority", "-t", "7",
				      "--", d->probe, "connect", "9", NULL };
	const char *const prio6[] = { d->run, "-s", "priority", "-t", "6",
				      "-n", "--", d->probe, NULL };
	/* the shim alone, whatever runtime the harness preloads */
	static const char *const nopreload[] = { "LD_PRELOAD=", NULL };
	char preload[128];
	struct result res;

	run(&res, true, NULL, mark);
	assert_int_equal(res.status, 1);
	assert_non_null(strstr(res.err, "mercury-run: SO_MARK needs CAP_NET_ADMIN"));
	assert_non_null(strstr(res.err, "source priority with tags 0..6"));
	run(&res, true, NULL, prio7);
	assert_int_equal(res.status, 1);
	assert_non_null(strstr(res.err, "SO_PRIORITY 7 needs CAP_NET_ADMIN"));
	run(&res, true, nopreload, prio6);
	assert_int_equal(res.status, 0);
	assert_non_null(strstr(res.out, "MERCURY_RULES=default:tag=6\n"));
	assert_non_null(strstr(res.out, "MERCURY_TAG_SOURCE=priority\n"));
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s\n", d->shim);
	assert_non_null(strstr(res.out, preload));
}

static void test_usage_errors(void **state)
{
	static const char *const cases[][8] = {
		{ RUN, "-r", "port=99999:tag=1", "--", PROBE, NULL },
		{ RUN, "-t", "1", NULL },
		{ RUN, "--", PROBE, NULL },
		{ RUN, "--mask", "3", "-t", "5", "--", PROBE, NULL },
		{ RUN, "-s", "tos", "-t", "1", "--", PROBE, NULL },
		{ RUN, "--bogus", NULL },
	};
	static const char *const msgs[] = {
		"mercury-run: rules: bad port range",
		"mercury-run: no command",
		"mercury-run: no rules",
		"mercury-run: rule 1: tag 5 does not fit mask 0x3",
		"mercury-run: --source tos: expected mark, priority or dscp",
		"usage: mercury-run",
	};
	static const char *const env[] = { "MERCURY_RULES=", NULL };
	struct result res;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		run(&res, false, env, cases[i]);
		if (res.status != 2 || !strstr(res.err, msgs[i]))
			fail_msg("case %zu: exit %d, err \"%s\"", i, res.status,
				 res.err);
	}
}

/*
 * ld.so skips a preload entry it cannot load and runs the program
 * untagged: a shim that is not an ELF file is refused before the
 * program starts, and the program never runs.
 */
static void test_preload_unusable(void **state)
{
	static const char *const env[] = { "MERCURY_RULES=", NULL };
	static const char *const msgs[] = {
		"mercury-run: --preload " RUNDIR "/tests: not a regular file\n",
		"mercury-run: --preload " RUNDIR "/Makefile: not an ELF shared object\n",
		"mercury-run: --preload " RUNDIR "/no-such.so: No such file or directory\n",
		"mercury-run: --preload a:b.so: contains ':' or a blank, which LD_PRELOAD cannot hold\n",
	};
	static const char *const paths[] = {
		RUNDIR "/tests", RUNDIR "/Makefile", RUNDIR "/no-such.so", "a:b.so",
	};
	const char *argv[] = { RUN, "-f", "-t", "1", "--preload", NULL, "--",
			       "/bin/echo", "ran", NULL };
	struct result res;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		argv[5] = paths[i];
		run(&res, false, env, argv);
		if (res.status != 1 || strcmp(res.err, msgs[i]) || res.out[0])
			fail_msg("case %zu: exit %d, out \"%s\", err \"%s\"", i,
				 res.status, res.out, res.err);
	}
}

/*
 * An ASan runtime preloaded first stays first: ASan will not start
 * otherwise, so a sanitized program or shim could not run. Anything else
 * comes after the shim. (ld.so only warns that these paths do not exist.)
 */
static void test_preload_order(void **state)
{
	static const char *const cases[][2] = {
		{ "/x/libasan.so.8", "/x/libasan.so.8:" SHIM "\n" },
		{ "/x/libasan.so.8:/y/liba.so",
		  "/x/libasan.so.8:" SHIM ":/y/liba.so\n" },
		{ "libclang_rt.asan-x86_64.so /y/liba.so",
		  "libclang_rt.asan-x86_64.so:" SHIM " /y/liba.so\n" },
		{ "/y/liba.so:/x/libasan.so.8", SHIM ":/y/liba.so:/x/libasan.so.8\n" },
		{ "/libasan.so/liba.so", SHIM ":/libasan.so/liba.so\n" },
		{ "", SHIM "\n" },
	};
	const char *argv[] = { RUN, "-s", "priority", "-t", "1", "-n", "--",
			       PROBE, NULL };
	char env0[128], want[256];
	const char *env[] = { env0, NULL };
	struct result res;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(env0, sizeof(env0), "LD_PRELOAD=%s", cases[i][0]);
		snprintf(want, sizeof(want), "LD_PRELOAD=%s", cases[i][1]);
		run(&res, false, env, argv);
		if (res.status || strncmp(res.out, want, strlen(want)))
			fail_msg("LD_PRELOAD=\"%s\": exit %d, out \"%s\"",
				 cases[i][0], res.status, res.out);
	}
}

/* The shim alone with broken config: warns once, program runs untagged. */
static void test_shim_bad_env(void **state)
{
	const char *old = getenv("LD_PRELOAD");
	char preload[PATH_MAX + 256];
	const char *env[] = { preload, "MERCURY_RULES=port=x:tag=1", NULL };
	const char *argv[] = { PROBE, "connect", NULL, NULL };
	struct result res;
	unsigned short port;
	char portstr[8];
	int l;

	(void)state;
	/* behind what the harness preloads: the faults suite's ASan, first */
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s%s" SHIM,
		 old ? old : "", old && *old ? ":" : "");
	l = listen_lo(SOCK_STREAM, &port);
	snprintf(portstr, sizeof(portstr), "%u", port);
	argv[2] = portstr;
	run(&res, false, env, argv);
	assert_int_equal(res.status, 0);
	assert_string_equal(res.out, "priority 0 mark 0\n");
	assert_string_equal(res.err,
			    "mercury-preload: MERCURY_RULES: bad port range \"x\" (0..65535, LO <= HI); not tagging\n");
	close(l);
}

static void skipped(void **state)
{
	(void)state;
}

int main(void)
{
	bool root = geteuid() == 0;
	/* cmocka 1.1.5 prints skip() as "not ok"; decide up front instead. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules_match),
		cmocka_unit_test(test_rules_bad),
		cmocka_unit_test(test_connect_priority),
		cmocka_unit_test(test_sendto_and_reuse),
		cmocka_unit_test(test_fd_renumbered),
		cmocka_unit_test(test_fork_while_tagging),
		cmocka_unit_test(test_fork_at_start),
		cmocka_unit_test(test_accept),
		{ .name = root ? "test_mark" : "test_mark # SKIP SO_MARK needs root",
		  .test_func = root ? test_mark : skipped },
		cmocka_unit_test_setup_teardown(test_unprivileged, nobody_setup,
						nobody_teardown),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_preload_unusable),
		cmocka_unit_test(test_preload_order),
		cmocka_unit_test(test_shim_bad_env),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("mercury-run", tests, NULL, NULL);
}
