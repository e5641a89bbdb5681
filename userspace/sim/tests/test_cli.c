// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Command-line tests: run ../mercury-sim and check exit status, the
 * "mercury-sim: ..." message, the {"error": ...} form under -j, and the
 * JSON layout the emulated benchmark depends on.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#define SIM "../mercury-sim"
#define TINY "fixtures/tiny2.json"

struct out {
	int status;		/* exit code; the test fails on a signal */
	char so[65536];
	char se[8192];
};

static void slurp(int fd, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t r;

	while (n + 1 < len && (r = read(fd, buf + n, len - 1 - n)) > 0)
		n += r;
	buf[n] = '\0';
}

/* argv is NULL-terminated, without the program name. */
static void run(struct out *o, const char *const *args)
{
	const char *argv[64] = { SIM };
	int po[2], pe[2], st, i;
	pid_t pid;

	for (i = 0; args[i]; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	assert_int_equal(pipe(po), 0);
	assert_int_equal(pipe(pe), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(SIM, (char *const *)argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	/* outputs are small; stdout first, then stderr */
	slurp(po[0], o->so, sizeof(o->so));
	slurp(pe[0], o->se, sizeof(o->se));
	close(po[0]);
	close(pe[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));	/* never a crash */
	o->status = WEXITSTATUS(st);
}

#define RUN(o, ...) do {						\
	const char *const a_[] = { __VA_ARGS__, NULL };			\
	run(o, a_);							\
} while (0)

static void expect_usage_error(const char *const *args, const char *needle)
{
	struct out o;

	run(&o, args);
	assert_int_equal(o.status, 2);
	assert_int_equal(strncmp(o.se, "mercury-sim: ", 13), 0);
	if (needle && !strstr(o.se, needle))
		fail_msg("stderr '%s' lacks '%s'", o.se, needle);
	assert_string_equal(o.so, "");
}

static void test_bad_arguments(void **state)
{
	static const char *const cases[][8] = {
		{ "--profile", TINY, "--workers", "0" },
		{ "--profile", TINY, "--workers", "-3" },
		{ "--profile", TINY, "--workers", "8x" },
		{ "--profile", TINY, "--workers", "99999999999999999999" },
		{ "--profile", TINY, "--servers", "" },
		{ "--profile", TINY, "--bandwidth", "0" },
		{ "--profile", TINY, "--bandwidth", "fast" },
		{ "--profile", TINY, "--bandwidth", "-10gbit" },
		{ "--profile", TINY, "--bandwidth", "nan" },
		{ "--profile", TINY, "--latency", "-1ms" },
		{ "--profile", TINY, "--latency", "1 hour" },
		{ "--profile", TINY, "--scheme", "lifo" },
		{ "--profile", TINY, "--partition", "0" },
		{ "--profile", TINY, "--credit", "-4mb" },
		{ "--profile", TINY, "--msg-overhead", "x" },
		{ "--profile", TINY, "--mtu", "20" },
		{ "--profile", TINY, "--mtu", "70000" },
		{ "--profile", TINY, "--iterations", "1" },
		{ "--profile", TINY, "--time-scale", "0" },
		{ "--profile", TINY, "--time-scale", "inf" },
		{ "--profile", TINY, "--slice", "-1" },
		{ "--profile", TINY, "--chunk", "0" },
		{ "--profile", TINY, "--chunk", "-1" },
		{ "--profile", TINY, "--chunk", "1.5" },
		{ "--profile", TINY, "--chunk", "64kibi" },
		{ "--profile", TINY, "--chunk" },
		{ "--profile", TINY, "--sweep-range", "10gbit" },
		{ "--profile", TINY, "--sweep", "--sweep-range", "10g:1g" },
		{ "--profile", TINY, "--sweep-range", "1g:10g" },
		{ "--profile", TINY, "--plot", "x.png" },
		{ "--profile", TINY, "--sweep", "--bandwidth", "1g" },
		{ "--profile", TINY, "--frobnicate" },
		{ "--profile", TINY, "stray" },
		{ "--profile" },
		{ "--workers", "4" },
		{ "--bandwidth" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_usage_error(cases[i], NULL);
}

static void test_error_names_option(void **state)
{
	static const char *const a[] = { "--profile", TINY, "--bandwidth",
					 "10gbits", NULL };
	static const char *const b[] = { "--workers", "4", NULL };

	(void)state;
	expect_usage_error(a, "--bandwidth: '10gbits'");
	expect_usage_error(b, "--profile is required");
}

static void test_bad_profiles(void **state)
{
	static const char *const files[] = {
		"fixtures/bad_notjson.json", "fixtures/bad_numel.json",
		"fixtures/bad_nocalls.json", "fixtures/bad_cycle.graph.txt",
		"fixtures/empty.graph.txt", "fixtures/nonexistent.json",
		"fixtures",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		const char *args[] = { "--profile", files[i], NULL };
		struct out o;

		run(&o, args);
		assert_int_equal(o.status, 1);
		assert_int_equal(strncmp(o.se, "mercury-sim: ", 13), 0);
		assert_non_null(strstr(o.se, files[i]));
	}
}

static void test_json_errors(void **state)
{
	json_object *j, *e;
	struct out o;

	(void)state;
	RUN(&o, "-j", "--profile", TINY, "--scheme", "lifo");
	assert_int_equal(o.status, 2);
	j = json_tokener_parse(o.so);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "error", &e));
	assert_non_null(strstr(json_object_get_string(e), "--scheme"));
	json_object_put(j);

	RUN(&o, "--profile", "fixtures/bad_type.json", "--json");
	assert_int_equal(o.status, 1);
	j = json_tokener_parse(o.so);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "error", &e));
	assert_non_null(strstr(json_object_get_string(e), "numel"));
	json_object_put(j);
}

static double get_d(json_object *o, const char *k)
{
	json_object *v;

	assert_true(json_object_object_get_ex(o, k, &v));
	return json_object_get_double(v);
}

static void test_json_layout(void **state)
{
	static const char *const names[] = {
		"vanilla", "fifo-stream", "prio", "bytesched", "mercury",
		"ideal",
	};
	json_object *j, *res, *v;
	struct out o;
	size_t i;

	(void)state;
	RUN(&o, "--profile", TINY, "--workers", "1", "--bandwidth", "8mbit",
	    "--latency", "0", "--header", "0", "--mtu", "152",
	    "--msg-overhead", "0", "--frame-cost", "0", "--frame-header", "0",
	    "-j");
	assert_int_equal(o.status, 0);
	j = json_tokener_parse(o.so);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "model", &v));
	assert_string_equal(json_object_get_string(v), "tiny2");
	assert_int_equal((int)get_d(j, "workers"), 1);
	assert_int_equal((int)get_d(j, "servers"), 1);	/* = workers */
	assert_float_equal(get_d(j, "bandwidth_bps"), 8e6, 1e-6);
	assert_true(json_object_object_get_ex(j, "results", &res));
	assert_int_equal(json_object_array_length(res), 6);
	for (i = 0; i < 6; i++) {
		json_object *r = json_object_array_get_idx(res, i);

		assert_true(json_object_object_get_ex(r, "scheme", &v));
		assert_string_equal(json_object_get_string(v), names[i]);
	}
	/* the hand-computed values of test_sim, through the CLI: the
	 * default 64 KiB chunk holds a whole 1000-byte tensor, so these
	 * are its whole-tensor cases (test_tiny_mercury_whole), and
	 * vanilla equals fifo-stream */
	assert_float_equal(get_d(json_object_array_get_idx(res, 0),
				 "iteration_ms"), 5.45, 1e-9);
	assert_float_equal(get_d(json_object_array_get_idx(res, 1),
				 "iteration_ms"), 5.45, 1e-9);
	assert_float_equal(get_d(json_object_array_get_idx(res, 4),
				 "iteration_ms"), 5.05, 1e-9);
	assert_float_equal(get_d(json_object_array_get_idx(res, 5),
				 "iteration_ms"), 5.0, 1e-9);
	assert_float_equal(get_d(json_object_array_get_idx(res, 4),
				 "speedup_vs_fifo"), 5.45 / 5.05, 1e-9);
	assert_float_equal(get_d(json_object_array_get_idx(res, 4),
				 "speedup_vs_vanilla"), 5.45 / 5.05, 1e-9);
	assert_float_equal(get_d(json_object_array_get_idx(res, 4),
				 "ratio_to_ideal"), 5.05 / 5.0, 1e-9);
	json_object_put(j);
}

/* The flags the emulated benchmark drives, all at once, under -j. */
static void test_simple_flags_json(void **state)
{
	json_object *j, *res, *r, *v;
	struct out o;

	(void)state;
	/* 2 workers, 1 server: 500 B/ms per worker; time-scale 2: b ready
	 * 0.9, a 2.0, backward 2 ms, calls 2 ms; 500-byte chunks of 1 ms,
	 * 100-byte packets of 0.2 ms.  push b0 0.9-1.9; a at 2.0 finds
	 * b1 50 B in, its packet ends 2.1; a0 2.1-3.1, a1 -4.1, rest of b1
	 * 4.1-4.9.  At the server 0.1 later: pull b0 2.0-3.0, b1's first
	 * 100 B (ended by the preemption, summed 2.2) 3.0-3.2, a0 3.2-4.2,
	 * a1 4.2-5.2 (home 5.3), rest of b1 (summed 5.0, behind a1)
	 * 5.2-6.0 (home 6.1).  Forward a 5.3-7.3, b 7.3-9.3, backward
	 * -11.3: iteration
	 * 9.3 ms after the previous backward end (2.0), stall 7.3 - 4.0 */
	RUN(&o, "--profile", TINY, "--workers", "2", "--servers", "1",
	    "--bandwidth", "8mbit", "--latency", "100us", "--time-scale", "2",
	    "--iterations", "3", "--scheme", "mercury", "--chunk", "500",
	    "--header", "0", "--mtu", "152", "--frame-cost", "0",
	    "--frame-header", "0", "-j");
	assert_int_equal(o.status, 0);
	j = json_tokener_parse(o.so);
	assert_non_null(j);
	assert_int_equal((int)get_d(j, "workers"), 2);
	assert_int_equal((int)get_d(j, "servers"), 1);
	assert_float_equal(get_d(j, "bandwidth_bps"), 8e6, 1e-6);
	assert_float_equal(get_d(j, "latency_s"), 1e-4, 1e-15);
	assert_float_equal(get_d(j, "time_scale"), 2, 1e-12);
	assert_float_equal(get_d(j, "compute_ms"), 6, 1e-12);
	assert_true(json_object_object_get_ex(j, "results", &res));
	assert_int_equal(json_object_array_length(res), 1);
	r = json_object_array_get_idx(res, 0);
	assert_true(json_object_object_get_ex(r, "scheme", &v));
	assert_string_equal(json_object_get_string(v), "mercury");
	assert_float_equal(get_d(r, "iteration_ms"), 9.3, 1e-9);
	assert_float_equal(get_d(r, "stall_ms"), 3.3, 1e-9);
	json_object_put(j);

	/* balanced under the same flags: 8 * 2000 B / 6 ms, doubled
	 * because a worker gets half of its link (2 workers, 1 server) */
	RUN(&o, "--profile", TINY, "--workers", "2", "--servers", "1",
	    "--bandwidth", "balanced", "--time-scale", "2", "--chunk", "1kib",
	    "--scheme", "fifo", "--iterations", "2", "--latency", "0", "-j");
	assert_int_equal(o.status, 0);
	j = json_tokener_parse(o.so);
	assert_non_null(j);
	assert_float_equal(get_d(j, "bandwidth_bps"), 16000 / 6e-3 * 2, 1e-3);
	json_object_put(j);

	/* too fine a chunk is refused, as JSON under -j: 4.4 MB in 1-byte
	 * chunks is past the 4 Mi-chunk limit */
	RUN(&o, "--profile", "fixtures/big.json", "--chunk", "1", "-j");
	assert_int_equal(o.status, 2);
	j = json_tokener_parse(o.so);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "error", &v));
	assert_non_null(strstr(json_object_get_string(v), "--chunk"));
	json_object_put(j);
	RUN(&o, "--profile", "fixtures/big.json", "--scheme", "bytesched",
	    "--partition", "1");
	assert_int_equal(o.status, 2);
	assert_non_null(strstr(o.se, "--partition"));
	/* the same file at the default chunk is fine */
	RUN(&o, "--profile", "fixtures/big.json", "-j");
	assert_int_equal(o.status, 0);
	/* auto is the default chunk and may be named; both scheme names of
	 * streaming FIFO give the same result */
	RUN(&o, "--profile", TINY, "--chunk", "auto", "--scheme", "fifo-stream", "-j");
	assert_int_equal(o.status, 0);
	j = json_tokener_parse(o.so);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "results", &res));
	assert_true(json_object_object_get_ex(json_object_array_get_idx(res, 0),
					      "scheme", &v));
	assert_string_equal(json_object_get_string(v), "fifo-stream");
	{
		double t = get_d(json_object_array_get_idx(res, 0), "iteration_ms");

		json_object_put(j);
		RUN(&o, "--profile", TINY, "--scheme", "fifo", "-j");
		assert_int_equal(o.status, 0);
		j = json_tokener_parse(o.so);
		assert_true(json_object_object_get_ex(j, "results", &res));
		assert_float_equal(get_d(json_object_array_get_idx(res, 0),
					 "iteration_ms"), t, 1e-12);
		json_object_put(j);
	}
	RUN(&o, "--profile", TINY, "--chunk", "bogus");
	assert_int_equal(o.status, 2);
	assert_non_null(strstr(o.se, "--chunk"));
}

static void test_single_scheme_and_sweep(void **state)
{
	json_object *j, *sw, *res, *v;
	struct out o;

	(void)state;
	RUN(&o, "--profile", TINY, "--scheme", "mercury", "-j");
	assert_int_equal(o.status, 0);
	j = json_tokener_parse(o.so);
	assert_true(json_object_object_get_ex(j, "results", &res));
	assert_int_equal(json_object_array_length(res), 1);
	/* no fifo simulated: no ratio invented */
	assert_false(json_object_object_get_ex(json_object_array_get_idx(res, 0),
					       "speedup_vs_fifo", &v));
	json_object_put(j);

	/* 1-2-5 points from 1 to 10 Gbit/s */
	RUN(&o, "--profile", TINY, "--sweep", "--sweep-range", "1gbit:10gbit",
	    "-j");
	assert_int_equal(o.status, 0);
	j = json_tokener_parse(o.so);
	assert_true(json_object_object_get_ex(j, "sweep", &sw));
	assert_int_equal(json_object_array_length(sw), 4);
	assert_float_equal(get_d(json_object_array_get_idx(sw, 2),
				 "bandwidth_bps"), 5e9, 1e-3);
	assert_true(json_object_object_get_ex(json_object_array_get_idx(sw, 3),
					      "results", &res));
	assert_int_equal(json_object_array_length(res), 6);
	json_object_put(j);
}

static void test_text_and_plot(void **state)
{
	char png[] = "/tmp/msim-plot-XXXXXX";
	unsigned char magic[8];
	struct out o;
	int fd;

	(void)state;
	RUN(&o, "--profile", "fixtures/tiny.graph.txt");
	assert_int_equal(o.status, 0);
	assert_non_null(strstr(o.so, "model tiny:"));
	assert_non_null(strstr(o.so, "mercury"));

	fd = mkstemp(png);
	assert_true(fd >= 0);
	close(fd);
	RUN(&o, "--profile", TINY, "--sweep", "--sweep-range", "1g:100g",
	    "--plot", png);
	assert_int_equal(o.status, 0);
	fd = open(png, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, magic, 8), 8);
	close(fd);
	unlink(png);
	assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_error_names_option),
		cmocka_unit_test(test_bad_profiles),
		cmocka_unit_test(test_json_errors),
		cmocka_unit_test(test_json_layout),
		cmocka_unit_test(test_simple_flags_json),
		cmocka_unit_test(test_single_scheme_and_sweep),
		cmocka_unit_test(test_text_and_plot),
	};

	return cmocka_run_group_tests_name("mercury-sim cli", tests, NULL,
					   NULL);
}
