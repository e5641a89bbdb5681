// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Host-side tests of mercuryctl: option parsing and checking, sizes and
 * handles, the text/JSON/Prometheus output of a canned qdisc, and the
 * command line up to the point where it would talk to the kernel (usage
 * errors, JSON errors, prefix dispatch). The netlink part runs in the VM
 * (selftests/mercury_ctl.sh).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <json-c/json.h>

#include <mercury/mercury.h>

#include "mctl.h"

int mctl_main(int argc, char **argv);

#define ARGV(...) ((char *[]){ __VA_ARGS__ })
#define ARGC(...) ((int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)))

/* ---- options --------------------------------------------------------- */

/*
 * mercuryctl's options are libmercury's grammar with the kernel's ranges
 * (the grammar itself is tested in userspace/lib/tests/test_qdisc.c).
 */
static void test_parse_every_option(void **state)
{
	char *argv[] = { "levels", "4096", "tag", "priority", "shift", "4",
			 "mask", "0x1fff", "untagged", "last",
			 "untagged_share", "15", "flow_order", "off",
			 "flows", "2048", "limit", "777", "memory_limit", "4Mb",
			 "quantum", "9000", "bypass", "off", "flow_limit", "9" };
	struct mercury_qdisc_opts o, lib;
	char err[128] = "";

	(void)state;
	assert_int_equal(mctl_parse_opts(26, argv, &o, err, sizeof(err)), 0);
	assert_int_equal(o.set, MCTL_ALL_OPTS);
	assert_int_equal(o.flow_limit, 9);
	assert_int_equal(mercury_qdisc_opts_parse(26, argv,
						  MERCURY_QDISC_PARSE_RANGES,
						  &lib, sizeof(lib)), 0);
	assert_memory_equal(&o, &lib, sizeof(o));
	assert_int_equal(o.memory_limit, 4u << 20);
}

static void test_parse_only_given(void **state)
{
	char *argv[] = { "limit", "42" };
	struct mercury_qdisc_opts o;
	char err[128];

	(void)state;
	assert_int_equal(mctl_parse_opts(2, argv, &o, err, sizeof(err)), 0);
	assert_int_equal(o.set, MCTL_BIT(TCA_MERCURY_LIMIT));
	assert_int_equal(o.limit, 42);
	assert_int_equal(mctl_parse_opts(0, NULL, &o, err, sizeof(err)), 0);
	assert_int_equal(o.set, 0);
}

/*
 * Every bad value is refused with the option's name and rule: one
 * message, libmercury's (the grammar tc's plugin links), with the
 * kernel's ranges checked before anything is sent.
 */
static void test_parse_bad_values(void **state)
{
	static const struct {
		const char *name, *val, *msg;
	} bad[] = {
		{ "levels", "0", "levels must be 1..65534, not '0'" },
		{ "levels", "65535", "levels must be 1..65534, not '65535'" },
		{ "levels", "-1", "levels must be 1..65534, not '-1'" },
		{ "levels", "abc", "levels must be 1..65534, not 'abc'" },
		{ "levels", "", "levels must be 1..65534, not ''" },
		{ "tag", "foo", "tag must be mark, priority or dscp, not 'foo'" },
		{ "tag", "DSCP", "tag must be mark, priority or dscp, not 'DSCP'" },
		{ "shift", "32", "shift must be 0..31 bits, not '32'" },
		{ "mask", "0", "mask must be 0x1..0xffffffff, not '0'" },
		{ "mask", "0x100000000", "mask must be 0x1..0xffffffff, not '0x100000000'" },
		{ "untagged", "middle", "untagged must be first or last, not 'middle'" },
		{ "untagged_share", "91", "untagged_share must be 0..90 percent, not '91'" },
		{ "flow_order", "maybe", "flow_order must be off or on, not 'maybe'" },
		{ "flows", "0", "flows must be 1..65536, not '0'" },
		{ "flows", "65537", "flows must be 1..65536, not '65537'" },
		{ "limit", "0", "limit must be 1..4294967295 packets, not '0'" },
		{ "limit", "4294967296", "limit must be 1..4294967295 packets, not '4294967296'" },
		{ "memory_limit", "0", "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '0'" },
		{ "memory_limit", "2147483649", "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '2147483649'" },
		{ "memory_limit", "3gb", "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '3gb'" },
		{ "memory_limit", "4parsecs", "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '4parsecs'" },
		{ "memory_limit", "1.3m", "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '1.3m'" },
		{ "quantum", "255", "quantum must be 256..1048576 bytes (a size: 512kb, 1.5m), not '255'" },
		{ "quantum", "1048577", "quantum must be 256..1048576 bytes (a size: 512kb, 1.5m), not '1048577'" },
		{ "bypass", "sometimes", "bypass must be off or on, not 'sometimes'" },
	};
	struct mercury_qdisc_opts o;
	char err[160];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { (char *)bad[i].name, (char *)bad[i].val };

		err[0] = '\0';
		assert_int_equal(mctl_parse_opts(2, argv, &o, err, sizeof(err)),
				 -EINVAL);
		assert_string_equal(err, bad[i].msg);
	}
}

static void test_parse_structure_errors(void **state)
{
	char *unknown[] = { "bogus", "1" };
	char *missing[] = { "limit", "5", "levels" };
	struct mercury_qdisc_opts o;
	char err[128];

	(void)state;
	assert_int_equal(mctl_parse_opts(2, unknown, &o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "unknown option 'bogus'");
	assert_int_equal(mctl_parse_opts(3, missing, &o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "option levels needs a value");
}

/*
 * Sizes as tc reads them, by the one grammar: "memory_limit 1.5m" is the
 * 1572864 bytes tc sends, here as in tc's plugin (it was refused here
 * while tc and mercury-apply took it).
 */
static void test_tc_sizes(void **state)
{
	static const struct {
		const char *s;
		uint32_t v;		/* 0: refused */
	} t[] = {
		{ "1.5m", 1572864 }, { "1.5M", 1572864 }, { "1.5mb", 1572864 },
		{ "1.5kb", 1536 }, { "0.25g", 1u << 28 }, { "3028", 3028 },
		{ "3028b", 3028 }, { "4kb", 4096 }, { "4K", 4096 },
		{ "32Mb", 32u << 20 }, { "1m", 1u << 20 }, { "2gb", 2u << 30 },
		{ "8kbit", 1024 }, { "1mbit", 131072 },
		/* a fraction of a byte, above the kernel's 2 GiB, not sizes */
		{ "1.3m", 0 }, { "1.5", 0 }, { "3gb", 0 }, { "-1", 0 },
		{ "kb", 0 }, { "", 0 }, { "12 kb", 0 }, { "1bit", 0 },
	};
	struct mercury_qdisc_opts o;
	char *argv[2] = { "memory_limit" }, err[160];
	size_t i;
	int rc;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		argv[1] = (char *)t[i].s;
		rc = mctl_parse_opts(2, argv, &o, err, sizeof(err));
		if (t[i].v && (rc || o.memory_limit != t[i].v))
			fail_msg("memory_limit %s: %s (%u bytes), not %u",
				 t[i].s, rc ? err : "ok", o.memory_limit,
				 t[i].v);
		if (!t[i].v && rc != -EINVAL)
			fail_msg("memory_limit %s: taken as %u bytes", t[i].s,
				 o.memory_limit);
	}
}

/* The kernel's defaults are <linux/mercury.h>'s: mercuryctl has no copy. */
static void test_defaults(void **state)
{
	struct mercury_qdisc_opts o;

	(void)state;
	mctl_opts_defaults(&o);
	assert_int_equal(o.set, 0);
	assert_int_equal(o.levels, TC_MERCURY_DEF_LEVELS);
	assert_int_equal(o.flows, TC_MERCURY_DEF_FLOWS);
	assert_int_equal(o.mask, TC_MERCURY_DEF_MASK);
	assert_int_equal(o.limit, TC_MERCURY_DEF_LIMIT);
	assert_int_equal(o.memory_limit, TC_MERCURY_DEF_MEMORY_LIMIT);
	assert_int_equal(o.quantum, TC_MERCURY_DEF_QUANTUM);
	assert_int_equal(o.source, TC_MERCURY_DEF_TAG_SOURCE);
	assert_int_equal(o.shift, TC_MERCURY_DEF_SHIFT);
	assert_int_equal(o.untagged, TC_MERCURY_DEF_UNTAGGED);
	assert_int_equal(o.share, TC_MERCURY_DEF_SHARE);
	assert_int_equal(o.flow_order, TC_MERCURY_DEF_FLOW_ORDER);
	assert_int_equal(o.bypass, TC_MERCURY_DEF_BYPASS);
}

static void test_merge_and_check(void **state)
{
	char *argv[] = { "levels", "300", "mask", "0xff" };
	char *share[] = { "untagged_share", "10" };
	char *fix[] = { "untagged", "last" };
	struct mercury_qdisc_opts base, o;
	char err[160];

	(void)state;
	mctl_opts_defaults(&base);
	assert_int_equal(mctl_check_opts(&base, err, sizeof(err)), 0);
	assert_int_equal(mctl_parse_opts(4, argv, &o, err, sizeof(err)), 0);
	mctl_opts_merge(&base, &o);
	assert_int_equal(base.levels, 300);
	assert_int_equal(base.flows, TC_MERCURY_DEF_FLOWS);	/* kept */
	assert_int_equal(mctl_check_opts(&base, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "levels 300 exceeds the largest tag mask 0xff can give");

	mctl_opts_defaults(&base);
	assert_int_equal(mctl_parse_opts(2, share, &o, err, sizeof(err)), 0);
	mctl_opts_merge(&base, &o);
	assert_int_equal(mctl_check_opts(&base, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "untagged_share needs untagged last");
	assert_int_equal(mctl_parse_opts(2, fix, &o, err, sizeof(err)), 0);
	mctl_opts_merge(&base, &o);
	assert_int_equal(mctl_check_opts(&base, err, sizeof(err)), 0);
}

static void test_sprint(void **state)
{
	struct mercury_qdisc_opts o;
	char b[64];

	(void)state;
	mercury_qdisc_opts_defaults(&o, sizeof(o));
	o.quantum = 3028;
	mctl_sprint_opts(b, sizeof(b), &o, MCTL_BIT(TCA_MERCURY_MEMORY_LIMIT) |
			 MCTL_BIT(TCA_MERCURY_QUANTUM));
	assert_string_equal(b, "memory_limit 32Mb quantum 3028b");
	o.memory_limit = 512 * 1024;
	o.flow_limit = 9;
	mctl_sprint_opts(b, sizeof(b), &o, MCTL_BIT(TCA_MERCURY_MEMORY_LIMIT) |
			 MCTL_BIT(TCA_MERCURY_FLOW_LIMIT));
	assert_string_equal(b, "memory_limit 512Kb flow_limit 9");
	o.memory_limit = 0;
	mctl_sprint_opts(b, sizeof(b), &o, MCTL_BIT(TCA_MERCURY_MEMORY_LIMIT));
	assert_string_equal(b, "memory_limit 0b");
	mctl_sprint_opts(b, sizeof(b), &o, 0);
	assert_string_equal(b, "");
	/* cut short, still a string */
	mctl_sprint_opts(b, 8, &o, MCTL_ALL_OPTS);
	assert_int_equal(strlen(b), 7);
	mctl_sprint_handle(b, sizeof(b), 0x10000);
	assert_string_equal(b, "1:");
	mctl_sprint_handle(b, sizeof(b), 0x1000a);
	assert_string_equal(b, "1:a");
	mctl_sprint_handle(b, sizeof(b), 0xffffffffu);
	assert_string_equal(b, "root");
}

/* ---- output of a canned qdisc ------------------------------------------ */

static struct mctl_level canned_levels[] = {
	{ .minor = 3, .tag = 3, .flows = 2,
	  .c = { .packets = 10, .bytes = 15140, .drops = 1, .backlog = 3028,
		 .qlen = 2 } },
	{ .minor = 0xffff, .tag = 0, .flows = 1,
	  .c = { .packets = 4, .bytes = 168, .drops = 0, .backlog = 0,
		 .qlen = 0 } },
};

static void canned(struct mctl_qdisc *q)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->dev, sizeof(q->dev), "eth0");
	q->ifindex = 2;
	q->handle = 0x10000;
	q->parent = 0xffffffffu;
	mctl_opts_defaults(&q->opts);
	q->opts.levels = 64;
	q->opts.untagged = TC_MERCURY_UNTAGGED_LAST;
	q->opts.share = 10;
	q->c.packets = 14;
	q->c.bytes = 15308;
	q->c.drops = 1;
	q->c.backlog = 3028;
	q->c.qlen = 2;
	q->has_xstats = true;
	q->x.flows = 3;
	q->x.levels_active = 1;
	q->x.most_urgent = 3;
	q->x.memory_usage = 4608;
	q->x.drops_limit = 1;
	q->x.inversions_avoided = 7;
	q->x.untagged_packets = 4;
	q->x.untagged_bytes = 168;
	q->x.share_forced = 2;
	q->x.drops_flow_limit = 5;
	q->levels = canned_levels;
	q->nlevels = 2;
}

/* Run @fn into a heap buffer; the caller frees the result. */
static char *capture(void (*fn)(FILE *f, const struct mctl_qdisc *q, size_t n,
				int arg), const struct mctl_qdisc *q, size_t n,
		     int arg)
{
	FILE *f = tmpfile();
	char *buf;
	long len;

	assert_non_null(f);
	fn(f, q, n, arg);
	len = ftell(f);
	rewind(f);
	buf = malloc(len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, len, f), len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static void text_all(FILE *f, const struct mctl_qdisc *q, size_t n, int a)
{
	(void)a;
	mctl_print_text(f, q, n, MCTL_SHOW_ALL);
}

static void prom(FILE *f, const struct mctl_qdisc *q, size_t n, int a)
{
	(void)a;
	mctl_print_prometheus(f, q, n);
}

static void json(FILE *f, const struct mctl_qdisc *q, size_t n, int what)
{
	mctl_print_json(f, q, n, what, false);
}

static void test_text(void **state)
{
	struct mctl_qdisc q;
	char *out;

	(void)state;
	canned(&q);
	out = capture(text_all, &q, 1, 0);
	assert_string_equal(out,
		"qdisc mercury 1: dev eth0 root\n"
		" levels 64 tag mark shift 0 mask 0xffff untagged last untagged_share 10 flow_order on flows 1024 limit 10000 memory_limit 32Mb quantum 3028b bypass on flow_limit 0\n"
		" sent 15308 bytes 14 pkt (dropped 1, overlimits 0 requeues 0)\n"
		" backlog 3028b 2p\n"
		" flows 3 levels_active 1 most_urgent 3 memory_usage 4608b\n"
		" drops_limit 1 drops_memory 0 inversions_avoided 7\n"
		" untagged_packets 4 untagged_bytes 168 share_forced 2\n"
		" drops_flows 0 drops_flow_limit 5\n"
		" level 3 (class 1:3): sent 15140 bytes 10 pkt dropped 1 backlog 3028b 2p flows 2\n"
		" level untagged (class 1:ffff): sent 168 bytes 4 pkt dropped 0 backlog 0b 0p flows 1\n");
	free(out);
}

/* The options line of the text output parses back to the same options. */
static void test_text_round_trip(void **state)
{
	char *argv[32], *line, *out, *tok, *save = NULL;
	struct mercury_qdisc_opts o, again;
	struct mctl_qdisc q;
	char err[128];
	int argc = 0;

	(void)state;
	canned(&q);
	q.opts.memory_limit = 512 * 1024;
	q.opts.quantum = 9000;
	q.opts.mask = 0x1fff;
	q.opts.flow_limit = 12;
	out = capture(text_all, &q, 1, 0);
	line = strchr(out, '\n') + 1;
	*strchr(line, '\n') = '\0';
	for (tok = strtok_r(line, " ", &save); tok && argc < 32;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	assert_int_equal(argc, 26);
	assert_int_equal(mctl_parse_opts(argc, argv, &again, err, sizeof(err)), 0);
	o = q.opts;
	o.set = MCTL_ALL_OPTS;
	assert_memory_equal(&o, &again, sizeof(o));
	free(out);
}

/* Each tag source parses, prints in text and JSON as tc spells it. */
static void test_tag_sources(void **state)
{
	static const struct {
		const char *word;
		uint8_t source;
	} t[] = {
		{ "mark", TC_MERCURY_TAG_MARK },
		{ "priority", TC_MERCURY_TAG_PRIORITY },
		{ "dscp", TC_MERCURY_TAG_DSCP },
	};
	struct json_object *j, *opt, *v;
	struct mctl_qdisc q;
	char want[64], *out;
	struct mercury_qdisc_opts o;
	char err[128];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *argv[] = { "tag", (char *)t[i].word };

		assert_int_equal(mctl_parse_opts(2, argv, &o, err, sizeof(err)), 0);
		assert_int_equal(o.set, MCTL_BIT(TCA_MERCURY_TAG_SOURCE));
		assert_int_equal(o.source, t[i].source);
		assert_string_equal(mctl_source_name(t[i].source), t[i].word);

		canned(&q);
		q.opts.source = o.source;
		out = capture(text_all, &q, 1, 0);
		snprintf(want, sizeof(want), " tag %s shift ", t[i].word);
		assert_non_null(strstr(out, want));
		free(out);
		out = capture(json, &q, 1, MCTL_SHOW_ALL);
		j = json_tokener_parse(out);
		assert_non_null(j);
		assert_true(json_object_object_get_ex(json_object_array_get_idx(j, 0),
						      "options", &opt));
		assert_true(json_object_object_get_ex(opt, "tag", &v));
		assert_string_equal(json_object_get_string(v), t[i].word);
		json_object_put(j);
		free(out);
	}
	/* a source from a newer kernel still prints */
	assert_string_equal(mctl_source_name(__TC_MERCURY_TAG_MAX), "unknown");
}

static void test_json(void **state)
{
	struct json_object *j, *q0, *v, *lv;
	struct mctl_qdisc q;
	char *out;

	(void)state;
	canned(&q);
	out = capture(json, &q, 1, MCTL_SHOW_ALL);
	j = json_tokener_parse(out);
	assert_non_null(j);
	assert_int_equal(json_object_array_length(j), 1);
	q0 = json_object_array_get_idx(j, 0);
	assert_true(json_object_object_get_ex(q0, "handle", &v));
	assert_string_equal(json_object_get_string(v), "1:");
	assert_true(json_object_object_get_ex(q0, "parent", &v));
	assert_string_equal(json_object_get_string(v), "root");
	/* the option keys and raw values of tc -j */
	assert_true(json_object_object_get_ex(q0, "options", &v));
	assert_string_equal(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
		"{\"levels\":64,\"tag\":\"mark\",\"shift\":0,\"mask\":65535,"
		"\"untagged\":\"last\",\"untagged_share\":10,\"flow_order\":true,"
		"\"flows\":1024,\"limit\":10000,\"memory_limit\":33554432,"
		"\"quantum\":3028,\"bypass\":true,\"flow_limit\":0}");
	assert_true(json_object_object_get_ex(q0, "stats", &v));
	assert_string_equal(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
		"{\"bytes\":15308,\"packets\":14,\"drops\":1,\"overlimits\":0,"
		"\"requeues\":0,\"backlog\":3028,\"qlen\":2}");
	assert_true(json_object_object_get_ex(q0, "xstats", &v));
	assert_string_equal(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
		"{\"flows\":3,\"levels_active\":1,\"most_urgent\":3,"
		"\"memory_usage\":4608,\"drops_limit\":1,\"drops_memory\":0,"
		"\"inversions_avoided\":7,"
		"\"untagged_packets\":4,\"untagged_bytes\":168,\"share_forced\":2,"
		"\"drops_flows\":0,\"drops_flow_limit\":5}");
	assert_true(json_object_object_get_ex(q0, "levels", &v));
	assert_int_equal(json_object_array_length(v), 2);
	lv = json_object_array_get_idx(v, 1);
	assert_string_equal(json_object_to_json_string_ext(lv, JSON_C_TO_STRING_PLAIN),
		"{\"tag\":0,\"class\":\"1:ffff\",\"bytes\":168,\"packets\":4,"
		"\"drops\":0,\"backlog\":0,\"qlen\":0,\"flows\":1}");
	json_object_put(j);
	free(out);

	/* stats only: no options */
	out = capture(json, &q, 1, MCTL_SHOW_STATS);
	j = json_tokener_parse(out);
	q0 = json_object_array_get_idx(j, 0);
	assert_false(json_object_object_get_ex(q0, "options", &v));
	assert_true(json_object_object_get_ex(q0, "xstats", &v));
	json_object_put(j);
	free(out);
}

static void test_prometheus(void **state)
{
	struct mctl_qdisc q[2];
	char *out, *p;

	(void)state;
	canned(&q[0]);
	canned(&q[1]);
	snprintf(q[1].dev, sizeof(q[1].dev), "we\"ird");
	q[1].handle = 0x20000;
	q[1].nlevels = 0;
	q[1].c.packets = 99;
	out = capture(prom, q, 2, 0);

	/* one HELP/TYPE per family, samples of both qdiscs under it */
	assert_non_null(strstr(out,
		"# HELP mercury_packets_total Packets sent by the qdisc.\n"
		"# TYPE mercury_packets_total counter\n"
		"mercury_packets_total{dev=\"eth0\",handle=\"1:\"} 14\n"
		"mercury_packets_total{dev=\"we\\\"ird\",handle=\"2:\"} 99\n"));
	assert_non_null(strstr(out,
		"# TYPE mercury_drops_total counter\n"
		"mercury_drops_total{dev=\"eth0\",handle=\"1:\",reason=\"limit\"} 1\n"
		"mercury_drops_total{dev=\"we\\\"ird\",handle=\"2:\",reason=\"limit\"} 1\n"
		"mercury_drops_total{dev=\"eth0\",handle=\"1:\",reason=\"memory\"} 0\n"));
	assert_non_null(strstr(out,
		"# TYPE mercury_level_backlog_bytes gauge\n"
		"mercury_level_backlog_bytes{dev=\"eth0\",handle=\"1:\",tag=\"3\"} 3028\n"
		"mercury_level_backlog_bytes{dev=\"eth0\",handle=\"1:\",tag=\"untagged\"} 0\n"
		"# HELP"));
	assert_non_null(strstr(out,
		"mercury_level_drops_total{dev=\"eth0\",handle=\"1:\",tag=\"3\"} 1\n"));
	assert_non_null(strstr(out,
		"mercury_backlog_packets{dev=\"eth0\",handle=\"1:\"} 2\n"));
	/* a family's TYPE line appears exactly once */
	p = strstr(out, "# TYPE mercury_drops_total");
	assert_null(strstr(p + 1, "# TYPE mercury_drops_total"));
	/* every sample line is NAME{LABELS} INTEGER */
	for (p = out; *p; p = strchr(p, '\n') + 1) {
		if (*p == '#')
			continue;
		assert_true(!strncmp(p, "mercury_", 8));
		assert_non_null(strstr(p, "} "));
	}
	free(out);

	/* no xstats: only the standard counters are exported */
	q[0].has_xstats = false;
	out = capture(prom, q, 1, 0);
	assert_null(strstr(out, "mercury_drops_total{"));
	assert_non_null(strstr(out, "mercury_packets_total{"));
	free(out);
}

/* ---- the command line, as far as it goes without the kernel ------------ */

/* Run mctl_main with stdout and stderr in files; returns the exit code. */
static int run_cli(int argc, char **argv, char *out, size_t outlen,
		   char *err, size_t errlen)
{
	FILE *fo = tmpfile(), *fe = tmpfile();
	int so = dup(1), se = dup(2), rc;
	size_t n;

	fflush(stdout);
	fflush(stderr);
	dup2(fileno(fo), 1);
	dup2(fileno(fe), 2);
	rc = mctl_main(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	rewind(fo);
	rewind(fe);
	n = fread(out, 1, outlen - 1, fo);
	out[n] = '\0';
	n = fread(err, 1, errlen - 1, fe);
	err[n] = '\0';
	fclose(fo);
	fclose(fe);
	return rc;
}

static void test_cli_errors(void **state)
{
	char out[1024], err[1024];

	(void)state;
	assert_int_equal(run_cli(ARGC("mercuryctl", "frob"),
				 ARGV("mercuryctl", "frob"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: unknown command 'frob' (try 'mercuryctl help')\n");

	/* "s" is show and stats: ambiguous; "sh" is show */
	assert_int_equal(run_cli(ARGC("mercuryctl", "s"), ARGV("mercuryctl", "s"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: ambiguous command 's' (try 'mercuryctl help')\n");

	assert_int_equal(run_cli(ARGC("mercuryctl", "-j", "a", "eth0", "levels", "0"),
				 ARGV("mercuryctl", "-j", "a", "eth0", "levels", "0"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(out, "{\"error\":\"levels must be 1..65534, not '0'\"}\n");
	assert_string_equal(err, "");

	assert_int_equal(run_cli(ARGC("mercuryctl", "add", "eth0", "handle", "1:2"),
				 ARGV("mercuryctl", "add", "eth0", "handle", "1:2"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: bad handle '1:2' (a qdisc handle is MAJOR:)\n");

	assert_int_equal(run_cli(ARGC("mercuryctl", "add"), ARGV("mercuryctl", "add"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli(ARGC("mercuryctl", "del", "eth0", "limit", "5"),
				 ARGV("mercuryctl", "del", "eth0", "limit", "5"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: delete takes no options ('limit')\n");
	assert_int_equal(run_cli(ARGC("mercuryctl", "-p", "add", "eth0"),
				 ARGV("mercuryctl", "-p", "add", "eth0"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: -p applies to show and stats only\n");
	assert_int_equal(run_cli(ARGC("mercuryctl"), ARGV("mercuryctl"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_non_null(strstr(err, "Usage: mercuryctl"));
	assert_int_equal(run_cli(ARGC("mercuryctl", "--bogus"), ARGV("mercuryctl", "--bogus"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli(ARGC("mercuryctl", "h"), ARGV("mercuryctl", "h"),
				 out, sizeof(out), err, sizeof(err)), 0);
	assert_non_null(strstr(out, "stats   [--prometheus] [DEV]"));
}

/* ---- check: a plan against a qdisc ---------------------------------- */

static struct mctl_qdisc check_qdisc(uint8_t source, uint8_t shift,
				     uint32_t mask, uint32_t levels)
{
	struct mctl_qdisc q = { .handle = 0x100000 };

	mctl_opts_defaults(&q.opts);
	q.opts.source = source;
	q.opts.shift = shift;
	q.opts.mask = mask;
	q.opts.levels = levels;
	return q;
}

static void test_check_plan(void **state)
{
	struct mercury_plan_info pi = {
		.format = 1, .levels = 8, .max_tag = 8,
		.source = MERCURY_TAG_MARK, .shift = 0, .mask = 0xffff,
	};
	struct mctl_qdisc q = check_qdisc(TC_MERCURY_TAG_MARK, 0, 0xffff, 8);
	struct mctl_problems pr = { 0 };

	(void)state;
	/* the plan mercury-place --levels 8 writes, on "levels 8" */
	assert_int_equal(mctl_check_plan(&q, "eth0", &pi, &pr), 0);
	assert_int_equal(pr.n, 0);

	/* wider than the qdisc: the tags above share its last level */
	pi.max_tag = 161;
	assert_int_equal(mctl_check_plan(&q, "eth0", &pi, &pr), 1);
	assert_string_equal(pr.msg[0], "mercury 10: on eth0: the plan uses tags up to 161, the qdisc has 8 levels: tags 8..161 all share level 8 (squeeze the plan: mercury-place --levels 8)");

	/* a tagger writing DSCP into a qdisc reading the mark */
	pr.n = 0;
	pi.max_tag = 8;
	pi.source = MERCURY_TAG_DSCP;
	pi.mask = 0x3f;
	q.opts.mask = 0x3f;
	assert_int_equal(mctl_check_plan(&q, "eth0", &pi, &pr), 1);
	assert_non_null(strstr(pr.msg[0], "the plan tags by dscp, the qdisc reads mark: every packet is untagged there"));

	/* the masks cut tag 8 to 0 */
	pr.n = 0;
	q = check_qdisc(TC_MERCURY_TAG_DSCP, 0, 0x7, 8);
	assert_int_equal(mctl_check_plan(&q, "eth0", &pi, &pr), 1);
	assert_string_equal(pr.msg[0], "mercury 10: on eth0: tag 8 does not survive the masks (plan 0x3f, qdisc 0x7): it arrives as tag 0");

	/* shifts differ, and tag 8 << 3 is wider than DSCP's six bits */
	pr.n = 0;
	q = check_qdisc(TC_MERCURY_TAG_DSCP, 3, 0x3f, 8);
	pi.shift = 3;
	assert_int_equal(mctl_check_plan(&q, "eth0", &pi, &pr), 1);
	assert_string_equal(pr.msg[0], "mercury 10: on eth0: tag 8 shifted by 3 does not fit the six DSCP bits");
	pi.shift = 0;
	pr.n = 0;
	assert_int_equal(mctl_check_plan(&q, "eth0", &pi, &pr), 1);
	assert_string_equal(pr.msg[0], "mercury 10: on eth0: the plan shifts tags by 0 bits, the qdisc by 3: tags arrive scaled");

	/* everything wrong at once: every problem is listed, none lost */
	pr.n = 0;
	q = check_qdisc(TC_MERCURY_TAG_PRIORITY, 4, 0x3, 2);
	assert_int_equal(mctl_check_plan(&q, "eth0", &pi, &pr), 4);
}

static void test_check_cli(void **state)
{
	char out[1024], err[1024];
	char path[] = "/tmp/mctl-plan-XXXXXX";
	int fd;

	(void)state;
	assert_int_equal(run_cli(ARGC("mercuryctl", "check", "eth0"),
				 ARGV("mercuryctl", "check", "eth0"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: check: want 'plan FILE' after the device\n");
	/* "ch" stays change's abbreviation, "che" is check */
	assert_int_equal(run_cli(ARGC("mercuryctl", "ch"), ARGV("mercuryctl", "ch"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: changing a qdisc: which device?\n");
	assert_int_equal(run_cli(ARGC("mercuryctl", "che"), ARGV("mercuryctl", "che"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_string_equal(err, "mercuryctl: check: which device?\n");
	/* a broken plan is reported before the kernel is asked anything */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\"mercury_plan\": 1, \"priorities\": [", 35), 35);
	close(fd);
	assert_int_equal(run_cli(ARGC("mercuryctl", "check", "eth0", "plan", path),
				 ARGV("mercuryctl", "check", "eth0", "plan", path),
				 out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, path));
	unlink(path);
}

/* ---- apply: the configuration file and what differs ------------------ */

static void test_conf_parse(void **state)
{
	char text[] = "# IFACE OPTIONS\n"
		      "eth0  levels 4096 untagged last   # the uplink\n"
		      "\n   \t\n"
		      "\teth1\tlevels\t64\r\n"
		      "eth2\n"
		      "#eth3 levels 8\n"
		      "eth0 levels 8";
	struct mctl_conf_line *l;
	char err[128], big[4096];
	size_t n, used;
	int i;

	(void)state;
	assert_int_equal(mctl_conf_parse(text, &l, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 4);
	assert_string_equal(l[0].dev, "eth0");
	assert_int_equal(l[0].argc, 4);
	assert_string_equal(l[0].argv[3], "last");
	assert_string_equal(l[1].dev, "eth1");
	assert_int_equal(l[1].argc, 2);
	assert_string_equal(l[1].argv[1], "64");
	assert_string_equal(l[2].dev, "eth2");
	assert_int_equal(l[2].argc, 0);
	assert_string_equal(l[3].dev, "eth0");
	free(l);

	/* an empty file is no line, not an error */
	text[0] = '\0';
	assert_int_equal(mctl_conf_parse(text, &l, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free(l);

	/* more words than a line holds */
	used = snprintf(big, sizeof(big), "\neth0");
	for (i = 0; i <= MCTL_CONF_MAX_WORDS; i++)
		used += snprintf(big + used, sizeof(big) - used, " w");
	assert_int_equal(mctl_conf_parse(big, &l, &n, err, sizeof(err)), -E2BIG);
	assert_string_equal(err, "line 2: more than 64 option words");
}

/* Compared in the printed form: 1M is 1048576, off is 0. */
static void test_apply_diff(void **state)
{
	char *line[] = { "levels", "64", "memory_limit", "1M", "flow_order",
			 "off", "untagged", "last" };
	struct mercury_qdisc_opts want, have;
	char diff[256], err[128];

	(void)state;
	assert_int_equal(mctl_parse_opts(8, line, &want, err, sizeof(err)), 0);
	mctl_opts_defaults(&have);
	have.set = MCTL_ALL_OPTS & ~MCTL_BIT(TCA_MERCURY_UNTAGGED);
	have.levels = 4096;
	assert_int_equal(mctl_apply_diff(&want, &have, diff, sizeof(diff)),
			 MCTL_BIT(TCA_MERCURY_LEVELS) |
			 MCTL_BIT(TCA_MERCURY_UNTAGGED) |
			 MCTL_BIT(TCA_MERCURY_FLOW_ORDER) |
			 MCTL_BIT(TCA_MERCURY_MEMORY_LIMIT));
	assert_string_equal(diff, "levels 4096 -> 64; untagged unset -> last; flow_order on -> off; memory_limit 32Mb -> 1Mb");

	/* what the kernel holds after the change: nothing differs */
	mctl_opts_merge(&have, &want);
	assert_int_equal(mctl_apply_diff(&want, &have, diff, sizeof(diff)), 0);
	assert_string_equal(diff, "");
	/* an option the line does not name is never compared */
	have.limit = 5;
	assert_int_equal(mctl_apply_diff(&want, &have, diff, sizeof(diff)), 0);
}

/*
 * The applier's command line and file, as far as they go without the
 * module (selftests/mercury_install.sh runs it against the kernel).
 */
static void test_apply_cli(void **state)
{
	char out[4096], err[4096], conf[] = "/tmp/mctl-conf-XXXXXX";
	FILE *f;
	int fd;

	(void)state;
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "--bogus"),
				 ARGV("mercuryctl", "apply", "--bogus"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_non_null(strstr(err, "mercuryctl apply: unknown option '--bogus'\n"));
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "-c"),
				 ARGV("mercuryctl", "apply", "-c"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "--remove"),
				 ARGV("mercuryctl", "apply", "--remove"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli(ARGC("mercuryctl", "-j", "apply"),
				 ARGV("mercuryctl", "-j", "apply"),
				 out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "--help"),
				 ARGV("mercuryctl", "apply", "--help"),
				 out, sizeof(out), err, sizeof(err)), 0);
	assert_non_null(strstr(out, "--dry-run"));
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "--version"),
				 ARGV("mercuryctl", "apply", "--version"),
				 out, sizeof(out), err, sizeof(err)), 0);
	assert_int_equal(strncmp(out, "mercuryctl ", 11), 0);
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "-c", "/nonexistent/m.conf"),
				 ARGV("mercuryctl", "apply", "-c", "/nonexistent/m.conf"),
				 out, sizeof(out), err, sizeof(err)), 1);
	assert_string_equal(err, "mercuryctl apply: cannot read /nonexistent/m.conf: No such file or directory\n");

	fd = mkstemp(conf);
	assert_true(fd >= 0);
	close(fd);
	/* nothing configured: nothing to do */
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "-c", conf),
				 ARGV("mercuryctl", "apply", "-c", conf),
				 out, sizeof(out), err, sizeof(err)), 0);
	assert_non_null(strstr(out, "no interface configured in"));

	/* each line's error names the interface and the words; the file
	 * is read before anything is asked of the kernel
	 */
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "lo levels\nlo2 levels 8 colour blue\nlo3 levels 0\n"
		   "lo4 memory_limit 1.3m\nlo5 levels 300 mask 0xff\n");
	fclose(f);
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "-n", "-c", conf),
				 ARGV("mercuryctl", "apply", "-n", "-c", conf),
				 out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "mercuryctl apply: lo: options must be KEY VALUE pairs in "));
	assert_non_null(strstr(err, ": 'levels'\n"));
	assert_non_null(strstr(err, "mercuryctl apply: lo2: bad option 'colour blue' in "));
	assert_non_null(strstr(err, ": unknown option 'colour'\n"));
	assert_non_null(strstr(err, "mercuryctl apply: lo3: bad option 'levels 0' in "));
	assert_non_null(strstr(err, ": levels must be 1..65534, not '0'\n"));
	assert_non_null(strstr(err, "lo4: bad option 'memory_limit 1.3m'"));
	assert_string_equal(out, "");
	/* one interface named: only its line */
	assert_int_equal(run_cli(ARGC("mercuryctl", "apply", "-c", conf, "lo9"),
				 ARGV("mercuryctl", "apply", "-c", conf, "lo9"),
				 out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "mercuryctl apply: lo9: not configured in "));
	unlink(conf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_every_option),
		cmocka_unit_test(test_parse_only_given),
		cmocka_unit_test(test_parse_bad_values),
		cmocka_unit_test(test_parse_structure_errors),
		cmocka_unit_test(test_tc_sizes),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_merge_and_check),
		cmocka_unit_test(test_sprint),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_text_round_trip),
		cmocka_unit_test(test_tag_sources),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_prometheus),
		cmocka_unit_test(test_cli_errors),
		cmocka_unit_test(test_check_plan),
		cmocka_unit_test(test_check_cli),
		cmocka_unit_test(test_conf_parse),
		cmocka_unit_test(test_apply_diff),
		cmocka_unit_test(test_apply_cli),
	};

	return cmocka_run_group_tests_name("mercuryctl", tests, NULL, NULL);
}
