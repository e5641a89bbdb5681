// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * End-to-end tests of mercury-ps on 127.0.0.1: real processes, real
 * sockets. Exact sums for every scheme and several worker/server counts,
 * tiny socket buffers (partial writes everywhere), a worker or a server
 * killed mid-run, a stopped worker (timeout), a configuration mismatch,
 * and bad arguments. Every run has a deadline: a hang fails the test.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#define BIN "../mercury-ps"
#define TINY "fixtures/tiny.json"
#define MAXP 12

struct proc {
	pid_t pid;
	char out[64];		/* stdout file */
	char err[64];		/* stderr file */
	int status;		/* exit code, or 128 + signal, -1 running */
};

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void spawn(struct proc *p, char *const argv[])
{
	static int seq;

	snprintf(p->out, sizeof(p->out), "/tmp/ps-e2e-%d-%d.out", getpid(), seq);
	snprintf(p->err, sizeof(p->err), "/tmp/ps-e2e-%d-%d.err", getpid(), seq++);
	p->status = -1;
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (!p->pid) {
		int o = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(p->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(o, 1);
		dup2(e, 2);
		execv(BIN, argv);
		_exit(127);
	}
}

/* Wait for p up to seconds; a process still running then is killed and
 * reported as 999 (a hang). */
static int reap(struct proc *p, double seconds)
{
	struct timespec t0, t;
	int st;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pid_t r = waitpid(p->pid, &st, WNOHANG);

		if (r == p->pid) {
			p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			return p->status;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 > seconds) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			p->status = 999;
			return 999;
		}
		usleep(5000);
	}
}

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	buf[0] = '\0';
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static void cleanup(struct proc *p, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		unlink(p[i].out);
		unlink(p[i].err);
	}
}

/* Arguments shared by every process of one run. */
struct run {
	int W, S;
	const char *scheme;
	const char *extra[12];		/* NULL-terminated */
	const char *srv_want[4];	/* in server i's report, if set */
	const char *wrk_want;		/* in every worker's report, if set */
	char list[256];
	struct proc srv[4], wrk[8];
};

static void build_argv(struct run *r, char **argv, char *idbuf, bool server, int id)
{
	char wbuf[16];
	int n = 0, i;

	snprintf(idbuf, 16, "%d", id);
	snprintf(wbuf, sizeof(wbuf), "%d", r->W);
	argv[n++] = BIN;
	argv[n++] = server ? "server" : "worker";
	argv[n++] = server ? "--server-id" : "--worker-id";
	argv[n++] = idbuf;
	argv[n++] = "--servers";
	argv[n++] = r->list;
	argv[n++] = "--workers";
	argv[n++] = strdup(wbuf);
	argv[n++] = "--profile";
	argv[n++] = TINY;
	argv[n++] = "--scheme";
	argv[n++] = (char *)r->scheme;
	for (i = 0; r->extra[i]; i++)
		argv[n++] = (char *)r->extra[i];
	argv[n++] = server ? "--timeout" : "-j";
	argv[n++] = server ? "10" : "--timeout";
	if (!server)
		argv[n++] = "10";
	argv[n] = NULL;
}

static void start_run(struct run *r)
{
	char *argv[40], id[16];
	int i, len = 0;

	for (i = 0; i < r->S; i++)
		len += snprintf(r->list + len, sizeof(r->list) - len, "%s127.0.0.1:%d",
				i ? "," : "", free_port());
	for (i = 0; i < r->S; i++) {
		build_argv(r, argv, id, true, i);
		spawn(&r->srv[i], argv);
		free(argv[7]);
	}
	for (i = 0; i < r->W; i++) {
		build_argv(r, argv, id, false, i);
		spawn(&r->wrk[i], argv);
		free(argv[7]);
	}
}

/* Every process exits 0 and every worker reports exact sums. All exits
 * are collected first, so a failure shows what every peer said. */
static void expect_clean(struct run *r)
{
	int wst[8], sst[8], i;

	for (i = 0; i < r->W; i++) {
		wst[i] = reap(&r->wrk[i], 30);
		if (wst[i])
			fprintf(stderr, "# worker %d exit %d: %s\n", i, wst[i], slurp(r->wrk[i].err));
	}
	for (i = 0; i < r->S; i++) {
		sst[i] = reap(&r->srv[i], 30);
		if (sst[i])
			fprintf(stderr, "# server %d exit %d: %s\n", i, sst[i], slurp(r->srv[i].err));
	}
	for (i = 0; i < r->W; i++) {
		assert_int_equal(wst[i], 0);
		assert_non_null(strstr(slurp(r->wrk[i].out), "\"verified\":true"));
		assert_non_null(strstr(slurp(r->wrk[i].out), "\"mismatches\":0"));
	}
	for (i = 0; i < r->S; i++) {
		assert_int_equal(sst[i], 0);
		assert_non_null(strstr(slurp(r->srv[i].out), "chunks aggregated"));
		if (r->srv_want[i] && !strstr(slurp(r->srv[i].out), r->srv_want[i]))
			fail_msg("server %d said '%s', expected '%s'", i,
				 slurp(r->srv[i].out), r->srv_want[i]);
	}
	for (i = 0; i < r->W && r->wrk_want; i++)
		if (!strstr(slurp(r->wrk[i].out), r->wrk_want))
			fail_msg("worker %d said '%s', expected '%s'", i,
				 slurp(r->wrk[i].out), r->wrk_want);
	cleanup(r->wrk, r->W);
	cleanup(r->srv, r->S);
}

static void test_sums_fifo_2w1s(void **state)
{
	struct run r = { .W = 2, .S = 1, .scheme = "fifo" };

	(void)state;
	start_run(&r);
	expect_clean(&r);
}

/*
 * vanilla sums a server's shard of a tensor only when all of it is in:
 * one frame per shard. The tiny fixture's tensors (40000, 7, 65537, 1,
 * 30001 elements) over 2 servers: server 0 holds elements [0, n/2) and
 * gets nothing of the 1-element tensor, so it sums 4 shards an
 * iteration, server 1 all 5; over 5 iterations 20 and 25 aggregations.
 * The frame is the largest shard, 65537 - 32768 = 32769 elements, and a
 * worker pushes 9 frames an iteration.
 */
static void test_sums_vanilla_2w2s(void **state)
{
	struct run r = { .W = 2, .S = 2, .scheme = "vanilla",
			 .srv_want = { "server 0: vanilla, 20 chunks aggregated",
				       "server 1: vanilla, 25 chunks aggregated" },
			 .wrk_want = "\"chunk_bytes\":131076,\"frames\":9," };

	(void)state;
	start_run(&r);
	expect_clean(&r);
}

/* The same through --chunk 1000 (which vanilla ignores) and the old
 * name of fifo-stream: 1000-byte frames, every shard cut into them. */
static void test_sums_fifo_stream_chunks(void **state)
{
	/* shards of server 0: 20000, 3, 32768, 0, 15000 elements = 80000,
	 * 12, 131072, 0, 60000 B -> 80 + 1 + 132 + 0 + 60 = 273 frames;
	 * server 1: 80000, 16, 131076, 4, 60004 B -> 80 + 1 + 132 + 1 + 61
	 * = 275; 5 iterations: 1365 and 1375 aggregations */
	struct run r = { .W = 2, .S = 2, .scheme = "fifo",
			 .extra = { "--chunk", "1000", NULL },
			 .srv_want = { "server 0: fifo-stream, 1365 chunks aggregated",
				       "server 1: fifo-stream, 1375 chunks aggregated" },
			 .wrk_want = "\"chunk_bytes\":1000,\"frames\":548," };
	struct run v = { .W = 2, .S = 2, .scheme = "vanilla",
			 .extra = { "--chunk", "1000", NULL },
			 .srv_want = { "server 0: vanilla, 20 chunks aggregated" } };

	(void)state;
	start_run(&r);
	expect_clean(&r);
	start_run(&v);
	expect_clean(&v);
}

static void test_sums_mercury_3w2s(void **state)
{
	/* SO_PRIORITY 1..5 needs no privilege: the tiny plan has 5 tags */
	struct run r = { .W = 3, .S = 2, .scheme = "mercury",
			 .extra = { "--tag-source", "priority", "--channels", "3",
				    "--iterations", "4", NULL } };

	(void)state;
	start_run(&r);
	expect_clean(&r);
}

static void test_sums_bytesched_2w2s(void **state)
{
	struct run r = { .W = 2, .S = 2, .scheme = "bytesched",
			 .extra = { "--partition", "100000", "--credit", "150000", NULL } };

	(void)state;
	start_run(&r);
	expect_clean(&r);
}

static void test_sums_prio_2w1s(void **state)
{
	struct run r = { .W = 2, .S = 1, .scheme = "prio" };

	(void)state;
	if (geteuid() != 0)
		skip();		/* bands above 6 need CAP_NET_ADMIN */
	start_run(&r);
	expect_clean(&r);
}

static void test_partial_writes(void **state)
{
	struct run a = { .W = 2, .S = 1, .scheme = "mercury",
			 .extra = { "--tag-source", "priority", "--channels", "2",
				    "--sndbuf", "4096", NULL } };
	struct run b = { .W = 3, .S = 2, .scheme = "fifo",
			 .extra = { "--sndbuf", "2048", "--chunk", "1000",
				    "--iterations", "3", NULL } };

	(void)state;
	start_run(&a);
	expect_clean(&a);
	start_run(&b);
	expect_clean(&b);
}

/* A long run (slow compute) for the failure tests. */
static void start_long(struct run *r)
{
	r->W = 2;
	r->S = 1;
	r->scheme = "fifo";
	r->extra[0] = "--iterations";
	r->extra[1] = "50";
	r->extra[2] = "--time-scale";
	r->extra[3] = "50";
	r->extra[4] = NULL;
	start_run(r);
	usleep(1500000);	/* a few iterations in */
}

static void test_killed_worker(void **state)
{
	struct run r = { 0 };
	char *e;

	(void)state;
	start_long(&r);
	kill(r.wrk[1].pid, SIGKILL);
	reap(&r.wrk[1], 5);
	/* the server notices at once, the other worker when the server goes */
	assert_int_equal(reap(&r.srv[0], 8), 1);
	e = slurp(r.srv[0].err);
	assert_non_null(strstr(e, "mercury-ps: peer 127.0.0.1:"));
	assert_non_null(strstr(e, "(worker 1) closed the connection during iteration"));
	assert_int_equal(reap(&r.wrk[0], 8), 1);
	assert_non_null(strstr(slurp(r.wrk[0].out), "{\"error\":\"peer 127.0.0.1:"));
	cleanup(r.wrk, 2);
	cleanup(r.srv, 1);
}

static void test_killed_server(void **state)
{
	struct run r = { 0 };
	char want[400];
	int i;

	(void)state;
	start_long(&r);
	kill(r.srv[0].pid, SIGKILL);
	reap(&r.srv[0], 5);
	snprintf(want, sizeof(want), "mercury-ps: peer %s closed the connection during iteration ",
		 r.list);
	for (i = 0; i < 2; i++) {
		assert_int_equal(reap(&r.wrk[i], 8), 1);
		assert_non_null(strstr(slurp(r.wrk[i].err), want));
	}
	cleanup(r.wrk, 2);
	cleanup(r.srv, 1);
}

static void test_stopped_worker_times_out(void **state)
{
	struct run r = { .W = 2, .S = 1, .scheme = "fifo",
			 .extra = { "--iterations", "50", "--time-scale", "20", NULL } };
	char *argv[40], id[16];
	int i;

	(void)state;
	/* the server with a 1 s timeout, the workers with 10 s */
	snprintf(r.list, sizeof(r.list), "127.0.0.1:%d", free_port());
	build_argv(&r, argv, id, true, 0);
	for (i = 0; argv[i]; i++)
		if (!strcmp(argv[i], "--timeout"))
			argv[i + 1] = "1";
	spawn(&r.srv[0], argv);
	free(argv[7]);
	for (i = 0; i < 2; i++) {
		build_argv(&r, argv, id, false, i);
		spawn(&r.wrk[i], argv);
		free(argv[7]);
	}
	usleep(800000);
	kill(r.wrk[1].pid, SIGSTOP);
	assert_int_equal(reap(&r.srv[0], 6), 1);
	assert_non_null(strstr(slurp(r.srv[0].err),
			       "no progress for 1 s during iteration"));
	assert_non_null(strstr(slurp(r.srv[0].err), "waiting for worker 1"));
	kill(r.wrk[1].pid, SIGKILL);
	reap(&r.wrk[1], 5);
	assert_int_equal(reap(&r.wrk[0], 12), 1);
	cleanup(r.wrk, 2);
	cleanup(r.srv, 1);
}

static void test_config_mismatch(void **state)
{
	struct run r = { .W = 1, .S = 1, .scheme = "fifo" };
	char *argv[40], id[16];
	int i;

	(void)state;
	snprintf(r.list, sizeof(r.list), "127.0.0.1:%d", free_port());
	build_argv(&r, argv, id, true, 0);
	spawn(&r.srv[0], argv);
	free(argv[7]);
	r.extra[0] = "--chunk";
	r.extra[1] = "32768";
	build_argv(&r, argv, id, false, 0);
	spawn(&r.wrk[0], argv);
	free(argv[7]);
	assert_int_equal(reap(&r.srv[0], 12), 1);
	assert_non_null(strstr(slurp(r.srv[0].err), "runs a different configuration"));
	assert_int_equal(reap(&r.wrk[0], 12), 1);
	(void)i;
	cleanup(r.wrk, 1);
	cleanup(r.srv, 1);
}

/*
 * --plan (fixtures/tiny-plan.json: the reverse of forward order, squeezed
 * to 3 tags, so SO_PRIORITY needs no privilege) on every peer: exact sums.
 * On the workers only: the servers refuse them.
 */
static void test_plan(void **state)
{
	struct run r = { .W = 2, .S = 2, .scheme = "mercury",
			 .extra = { "--tag-source", "priority", "--channels", "3",
				    "--plan", "fixtures/tiny-plan.json", NULL },
			 .wrk_want = "\"plan\":\"fixtures/tiny-plan.json\"" };
	struct run m = { .W = 1, .S = 1, .scheme = "mercury",
			 .extra = { "--tag-source", "priority", "--channels", "3", NULL } };
	char *argv[40], id[16];

	(void)state;
	start_run(&r);
	expect_clean(&r);

	snprintf(m.list, sizeof(m.list), "127.0.0.1:%d", free_port());
	build_argv(&m, argv, id, true, 0);
	spawn(&m.srv[0], argv);
	free(argv[7]);
	m.extra[4] = "--plan";
	m.extra[5] = "fixtures/tiny-plan.json";
	build_argv(&m, argv, id, false, 0);
	spawn(&m.wrk[0], argv);
	free(argv[7]);
	assert_int_equal(reap(&m.srv[0], 12), 1);
	assert_non_null(strstr(slurp(m.srv[0].err), "runs a different configuration"));
	assert_int_equal(reap(&m.wrk[0], 12), 1);
	cleanup(m.wrk, 1);
	cleanup(m.srv, 1);
}

static int run_args(const char *stdout_want, const char *stderr_want, ...)
{
	char *argv[32];
	struct proc p;
	va_list ap;
	int n = 0, st;

	argv[n++] = BIN;
	va_start(ap, stderr_want);
	while ((argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	spawn(&p, argv);
	st = reap(&p, 10);
	if (stdout_want && !strstr(slurp(p.out), stdout_want)) {
		fprintf(stderr, "# stdout: %s\n", slurp(p.out));
		st = 1000;
	}
	if (stderr_want && !strstr(slurp(p.err), stderr_want)) {
		fprintf(stderr, "# stderr: %s\n", slurp(p.err));
		st = 1000;
	}
	cleanup(&p, 1);
	return st;
}

#define W_ARGS "worker", "--worker-id", "0", "--workers", "1", "--servers", "127.0.0.1:1"

static void test_bad_arguments(void **state)
{
	(void)state;
	assert_int_equal(run_args(NULL, "usage:", NULL), 2);
	assert_int_equal(run_args(NULL, "unknown command 'serve'", "serve", NULL), 2);
	assert_int_equal(run_args(NULL, "--profile is required", W_ARGS, NULL), 2);
	assert_int_equal(run_args(NULL, "--scheme lifo", W_ARGS, "--profile", TINY,
				  "--scheme", "lifo", NULL), 2);
	assert_int_equal(run_args(NULL, "--workers 0", W_ARGS, "--profile", TINY,
				  "--workers", "0", NULL), 2);
	assert_int_equal(run_args(NULL, "--worker-id 2: only 2 workers", "worker",
				  "--worker-id", "2", "--workers", "2", "--servers",
				  "127.0.0.1:1", "--profile", TINY, NULL), 2);
	assert_int_equal(run_args(NULL, "--chunk 1001", W_ARGS, "--profile", TINY,
				  "--chunk", "1001", NULL), 2);
	assert_int_equal(run_args(NULL, "--bytes-scale 0", W_ARGS, "--profile", TINY,
				  "--bytes-scale", "0", NULL), 2);
	assert_int_equal(run_args(NULL, "--iterations 1", W_ARGS, "--profile", TINY,
				  "--iterations", "1", NULL), 2);
	assert_int_equal(run_args(NULL, "--time-scale abc", W_ARGS, "--profile", TINY,
				  "--time-scale", "abc", NULL), 2);
	assert_int_equal(run_args(NULL, "--tag-source skb", W_ARGS, "--profile", TINY,
				  "--tag-source", "skb", NULL), 2);
	assert_int_equal(run_args(NULL, "unknown option --fast", W_ARGS, "--profile", TINY,
				  "--fast", NULL), 2);
	assert_int_equal(run_args(NULL, "--servers host:port", "worker", "--worker-id", "0",
				  "--workers", "1", "--profile", TINY, NULL), 2);
	assert_int_equal(run_args(NULL, "not host:port", "worker", "--worker-id", "0",
				  "--workers", "1", "--servers", "localhost", "--profile",
				  TINY, NULL), 2);
	assert_int_equal(run_args(NULL, "--server-id 1: only 1 servers", "server",
				  "--server-id", "1", "--workers", "1", "--servers",
				  "127.0.0.1:1", "--profile", TINY, NULL), 2);
	/* -j: the error as JSON on stdout too */
	assert_int_equal(run_args("{\"error\":\"--chunk 3:", NULL, W_ARGS, "-j",
				  "--profile", TINY, "--chunk", "3", NULL), 2);
	/* bad data: exit 1 */
	assert_int_equal(run_args(NULL, "missing.json", W_ARGS, "--profile",
				  "fixtures/missing.json", NULL), 1);
	assert_int_equal(run_args(NULL, "grad_ready", W_ARGS, "--profile",
				  "fixtures/bad.json", NULL), 1);
	/* nobody listening: a clear error after the timeout, not a hang */
	assert_int_equal(run_args(NULL, "cannot connect to 127.0.0.1:1", W_ARGS,
				  "--profile", TINY, "--timeout", "0.3", NULL), 1);
	assert_int_equal(run_args(NULL, "--out FILE is required", "profile",
				  "--profile", TINY, NULL), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sums_fifo_2w1s),
		cmocka_unit_test(test_sums_vanilla_2w2s),
		cmocka_unit_test(test_sums_fifo_stream_chunks),
		cmocka_unit_test(test_sums_mercury_3w2s),
		cmocka_unit_test(test_sums_bytesched_2w2s),
		cmocka_unit_test(test_sums_prio_2w1s),
		cmocka_unit_test(test_partial_writes),
		cmocka_unit_test(test_killed_worker),
		cmocka_unit_test(test_killed_server),
		cmocka_unit_test(test_stopped_worker_times_out),
		cmocka_unit_test(test_config_mismatch),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_bad_arguments),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("ps_e2e", tests, NULL, NULL);
}
