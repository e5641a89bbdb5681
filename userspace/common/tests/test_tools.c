// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The tools' internal helpers on their own: a label cannot break out of
 * its gnuplot data field, a rate's bare number means one thing, inputs
 * that are no file are refused before a byte is read, and a write is
 * whole or leaves the old file. (The tools' output.sh tests run them
 * through mercury-place and mercury-sim.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../tools.h"

static void test_label(void **state)
{
	static const char *const hostile[] = {
		"x'; system(\"touch PWNED\") #",
		"a\"b",
		"line\nEOD\nplot",
		"back\\slash `id` tab\there",
	};
	char buf[256];

	(void)state;
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		FILE *f = fmemopen(buf, sizeof(buf), "w");

		assert_non_null(f);
		mt_plot_label(f, hostile[i]);
		fclose(f);
		/* one double-quoted field: quotes at both ends only */
		assert_int_equal(buf[0], '"');
		assert_int_equal(buf[strlen(buf) - 1], '"');
		assert_null(memchr(buf + 1, '"', strlen(buf) - 2));
		assert_null(strpbrk(buf, "\n\t #\\'"));
	}
}

static void test_rate(void **state)
{
	char err[MT_ERRLEN];
	double bps;

	(void)state;
	assert_int_equal(mt_parse_rate("10gbit", 0, &bps, err, sizeof(err)), 0);
	assert_true(bps == 1e10);
	assert_int_equal(mt_parse_rate("1.25gbps", 0, &bps, err, sizeof(err)), 0);
	assert_true(bps == 1e10);
	/* bare: bit/s where allowed, else refused with the units to use */
	assert_int_equal(mt_parse_rate("1.25e9", 1, &bps, err, sizeof(err)), 0);
	assert_true(bps == 1.25e9);
	assert_int_equal(mt_parse_rate("1.25e9", 0, &bps, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "needs a unit"));
	assert_int_equal(mt_parse_rate("fast", 1, &bps, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(mt_parse_rate("-5mbit", 1, &bps, err, sizeof(err)),
			 -EINVAL);
}

static void test_read_refuses(void **state)
{
	char err[MT_ERRLEN], *buf = NULL;
	size_t len;

	(void)state;
	assert_int_equal(mt_read_file("/", &buf, &len, err, sizeof(err)),
			 -EISDIR);
	assert_non_null(strstr(err, "is a directory"));
	assert_int_equal(mt_read_file("/dev/zero", &buf, &len, err,
				      sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	assert_int_equal(mt_read_file("/nonexistent/x", &buf, &len, err,
				      sizeof(err)), -ENOENT);
	assert_null(buf);
}

static void test_write_whole(void **state)
{
	char dir[] = "/tmp/mt-write-XXXXXX", path[64], err[MT_ERRLEN];
	char back[16] = "";
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/out", dir);
	assert_int_equal(mt_write_file(path, "first", 5, err, sizeof(err)), 0);
	assert_int_equal(mt_write_file(path, "second", 6, err, sizeof(err)), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(back, sizeof(back), f));
	fclose(f);
	assert_string_equal(back, "second");
	/* a directory is no output file, and the old one stays */
	assert_int_equal(mt_write_file(dir, "x", 1, err, sizeof(err)), -EISDIR);
	unlink(path);
	assert_int_equal(rmdir(dir), 0);	/* no temporary left behind */
}

/* The network rule: NICs by default, a listed link its pair's own. */
static void test_net(void **state)
{
	struct mt_net n;
	struct mt_route r;

	(void)state;
	assert_int_equal(mt_net_init(&n, 3), 0);
	for (int i = 0; i < 3; i++) {
		n.nic_Bps[i] = 1e10;
		n.nic_lat_s[i] = 1e-5;
	}
	n.nic_Bps[2] = 5e9;
	n.nic[1] = 0;			/* devices 0 and 1: one host */
	n.link_Bps[0 * 3 + 1] = 4.5e11;	/* NVLink 0 -> 1 */
	n.link_lat_s[0 * 3 + 1] = 2e-6;
	assert_int_equal(mt_net_route(&n, 0, 0, &r), 0);
	assert_int_equal(r.kind, MT_ROUTE_NONE);
	assert_int_equal(mt_net_route(&n, 0, 1, &r), 0);
	assert_int_equal(r.kind, MT_ROUTE_LINK);
	assert_true(r.Bps == 4.5e11 && r.lat_s == 2e-6);
	/* 1 -> 0 has no link: through the host's NIC, egress and ingress */
	assert_int_equal(mt_net_route(&n, 1, 0, &r), 0);
	assert_int_equal(r.kind, MT_ROUTE_NIC);
	assert_int_equal(r.egress, 0);
	assert_int_equal(r.ingress, 0);
	/* the slower NIC sets the rate */
	assert_int_equal(mt_net_route(&n, 1, 2, &r), 0);
	assert_int_equal(r.egress, 0);
	assert_int_equal(r.ingress, 2);
	assert_true(r.Bps == 5e9);
	assert_int_equal(mt_net_route(&n, 3, 0, &r), -EINVAL);
	/* fluid: 8 senders over 2 receivers get a quarter each */
	assert_true(mt_net_spread_Bps(1e10, 8, 2) == 2.5e9);
	assert_true(mt_net_spread_Bps(1e10, 2, 8) == 1e10);
	assert_true(mt_net_spread_Bps(1e10, 0, 8) == 0);
	mt_net_free(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_read_refuses),
		cmocka_unit_test(test_write_whole),
		cmocka_unit_test(test_net),
	};

	return cmocka_run_group_tests_name("tools", tests, NULL, NULL);
}
