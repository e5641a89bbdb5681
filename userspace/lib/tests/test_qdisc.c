// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The qdisc's options: their grammar (the words tc and mercuryctl take),
 * the kernel's defaults, their printed form; does the tagging fit the
 * qdisc: the qdisc's TCA_OPTIONS both ways,
 * the one comparison rule (mercury_qdisc_fit) and the check a channel set
 * makes at creation, where it can run without a mercury qdisc (the host
 * has no sch_mercury; selftests/mercury_ctl.sh tests it against one).
 */
#include <linux/mercury.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "helpers.h"

/* ---- problems and log lines, collected -------------------------------- */

struct lines {
	int n;
	char msg[8][320];
	int level[8];
};

static void collect(const char *msg, void *ctx)
{
	struct lines *l = ctx;

	if (l->n < 8)
		snprintf(l->msg[l->n++], sizeof(l->msg[0]), "%s", msg);
}

static struct lines logged;

static void log_cb(enum mercury_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (logged.n < 8)
		logged.level[logged.n] = level;
	collect(msg, &logged);
}

/* Was a line containing s logged, at level? */
static bool logged_at(const char *s, enum mercury_log_level level)
{
	int i;

	for (i = 0; i < logged.n; i++)
		if (strstr(logged.msg[i], s) && logged.level[i] == (int)level)
			return true;
	return false;
}

static struct mercury_qdisc qdisc(unsigned int source, unsigned int shift,
				  uint32_t mask, unsigned int levels)
{
	struct mercury_qdisc q = {
		.dev = "veth0",
		.handle = 0x100000,
		.parent = 0xffffffffu,
		.opts = {
			.source = source, .shift = shift, .mask = mask,
			.levels = levels,
		},
	};

	return q;
}

static struct mercury_plan_info tags(enum mercury_tag_source source,
				     unsigned int shift, uint32_t mask,
				     unsigned int max_tag)
{
	struct mercury_plan_info pi = {
		.format = 1, .levels = max_tag, .max_tag = max_tag,
		.source = source, .shift = shift, .mask = mask,
	};

	return pi;
}

/* ---- the rule ----------------------------------------------------------- */

static void test_fit_match(void **state)
{
	struct mercury_qdisc q = qdisc(TC_MERCURY_TAG_DSCP, 0, 0x3f, 8);
	struct mercury_plan_info pi = tags(MERCURY_TAG_DSCP, 0, 0x3f, 8);
	struct lines l = { 0 };

	(void)state;
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 0);
	assert_int_equal(l.n, 0);
	/* fewer tags than levels, a wider qdisc mask: still fine */
	q = qdisc(TC_MERCURY_TAG_MARK, 4, 0xffff, 1024);
	pi = tags(MERCURY_TAG_MARK, 4, 0xff, 200);
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_PLAN, collect,
					   &l), 0);
	assert_int_equal(l.n, 0);
	/* unknown tags (a channel set without classes): no per-tag rule */
	q = qdisc(TC_MERCURY_TAG_DSCP, 0, 0x1, 1);
	pi = tags(MERCURY_TAG_DSCP, 0, 0x3f, 0);
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 0);
	assert_int_equal(mercury_qdisc_fit(NULL, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), -EINVAL);
}

static void test_fit_each(void **state)
{
	struct mercury_qdisc q = qdisc(TC_MERCURY_TAG_DSCP, 0, 0x3f, 8);
	struct mercury_plan_info pi = tags(MERCURY_TAG_MARK, 0, 0xffff, 8);
	struct lines l = { 0 };

	(void)state;
	/* the tagger writes SO_MARK, the qdisc reads DSCP */
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 1);
	assert_string_equal(l.msg[0], "mercury 10: on veth0: the channel set tags by mark, the qdisc reads dscp: every packet is untagged there (tc qdisc change ... tag mark, or tag_opts.source dscp (MERCURY_TAG_SOURCE=dscp))");

	/* the same for a plan names the plan's key */
	l.n = 0;
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_PLAN, collect,
					   &l), 1);
	assert_string_equal(l.msg[0], "mercury 10: on veth0: the plan tags by mark, the qdisc reads dscp: every packet is untagged there (tc qdisc change ... tag mark, or a plan with \"tag_source\": \"dscp\")");

	/* shifts differ */
	l.n = 0;
	q = qdisc(TC_MERCURY_TAG_MARK, 8, 0xff, 8);
	pi = tags(MERCURY_TAG_MARK, 0, 0xff, 8);
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 1);
	assert_string_equal(l.msg[0], "mercury 10: on veth0: the channel set shifts tags by 0 bits, the qdisc by 8: tags arrive scaled");

	/* the qdisc's mask cuts tag 4 to 0: the first such tag is named */
	l.n = 0;
	q = qdisc(TC_MERCURY_TAG_MARK, 0, 0x3, 8);
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 1);
	assert_string_equal(l.msg[0], "mercury 10: on veth0: tag 4 does not survive the masks (tagger 0xff, qdisc 0x3): it arrives as tag 0");

	/* DSCP tag 8 << 3 = 64 does not fit six bits */
	l.n = 0;
	q = qdisc(TC_MERCURY_TAG_DSCP, 3, 0x3f, 8);
	pi = tags(MERCURY_TAG_DSCP, 3, 0x3f, 8);
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 1);
	assert_string_equal(l.msg[0], "mercury 10: on veth0: tag 8 shifted by 3 does not fit the six DSCP bits");

	/* classes above the qdisc's levels */
	l.n = 0;
	q = qdisc(TC_MERCURY_TAG_PRIORITY, 0, 0xffff, 4);
	pi = tags(MERCURY_TAG_PRIORITY, 0, 0xffff, 6);
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 1);
	assert_string_equal(l.msg[0], "mercury 10: on veth0: the channel set uses tags up to 6, the qdisc has 4 levels: tags 4..6 all share level 4 (squeeze the plan and the classes to 4 levels)");

	/* everything wrong at once: each problem once, in the rule's order */
	l.n = 0;
	q = qdisc(TC_MERCURY_TAG_PRIORITY, 4, 0x3, 2);
	pi = tags(MERCURY_TAG_DSCP, 0, 0x3f, 8);
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET,
					   collect, &l), 4);
	assert_non_null(strstr(l.msg[0], "tags by dscp, the qdisc reads priority"));
	assert_non_null(strstr(l.msg[1], "shifts tags by 0 bits, the qdisc by 4"));
	assert_non_null(strstr(l.msg[2], "tag 4 does not survive the masks"));
	assert_non_null(strstr(l.msg[3], "uses tags up to 8, the qdisc has 2 levels"));
	/* no callback: still counted */
	assert_int_equal(mercury_qdisc_fit(&q, &pi, MERCURY_FIT_CHANSET, NULL,
					   NULL), 4);
}

/* ---- the decoder -------------------------------------------------------- */

static void test_decode(void **state)
{
	struct mercury_qdisc_opts o = { .levels = 1024, .mask = 0xffff,
					.flows = 77 };
	struct nl_msg *msg = nlmsg_alloc();
	struct nlattr *nest;

	(void)state;
	assert_non_null(msg);
	nest = nla_nest_start(msg, TCA_OPTIONS);
	assert_int_equal(nla_put_u32(msg, TCA_MERCURY_LEVELS, 8), 0);
	assert_int_equal(nla_put_u8(msg, TCA_MERCURY_TAG_SOURCE,
				    TC_MERCURY_TAG_DSCP), 0);
	assert_int_equal(nla_put_u8(msg, TCA_MERCURY_TAG_SHIFT, 2), 0);
	assert_int_equal(nla_put_u32(msg, TCA_MERCURY_TAG_MASK, 0xf), 0);
	assert_int_equal(nla_put_u8(msg, TCA_MERCURY_BYPASS, 1), 0);
	nla_nest_end(msg, nest);
	assert_int_equal(mercury_qdisc_opts_decode(nla_data(nest),
						   nla_len(nest), &o,
						   sizeof(o)), 0);
	assert_int_equal(o.levels, 8);
	assert_int_equal(o.source, TC_MERCURY_TAG_DSCP);
	assert_int_equal(o.shift, 2);
	assert_int_equal(o.mask, 0xf);
	assert_int_equal(o.bypass, 1);
	assert_int_equal(o.flows, 77);	/* absent: left alone */
	assert_int_equal(o.set, (1u << TCA_MERCURY_LEVELS) |
			 (1u << TCA_MERCURY_TAG_SOURCE) |
			 (1u << TCA_MERCURY_TAG_SHIFT) |
			 (1u << TCA_MERCURY_TAG_MASK) |
			 (1u << TCA_MERCURY_BYPASS));

	/* a caller that knows only the first fields gets only those */
	memset(&o, 0, sizeof(o));
	assert_int_equal(mercury_qdisc_opts_decode(nla_data(nest),
						   nla_len(nest), &o,
						   offsetof(struct mercury_qdisc_opts,
							    mask)), 0);
	assert_int_equal(o.levels, 8);
	assert_int_equal(o.mask, 0);
	assert_int_equal(o.source, 0);

	/* a u32 attribute two bytes short is refused */
	nlmsg_free(msg);
	msg = nlmsg_alloc();
	nest = nla_nest_start(msg, TCA_OPTIONS);
	assert_int_equal(nla_put_u16(msg, TCA_MERCURY_LEVELS, 8), 0);
	nla_nest_end(msg, nest);
	assert_int_equal(mercury_qdisc_opts_decode(nla_data(nest),
						   nla_len(nest), &o,
						   sizeof(o)), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "malformed"));
	nlmsg_free(msg);
	assert_int_equal(mercury_qdisc_opts_decode(NULL, 4, &o, sizeof(o)),
			 -EINVAL);
}

static void test_encode(void **state)
{
	struct mercury_qdisc_opts o = {
		.set = (1u << TCA_MERCURY_LEVELS) |
		       (1u << TCA_MERCURY_TAG_SOURCE) |
		       (1u << TCA_MERCURY_QUANTUM),
		.levels = 64, .source = TC_MERCURY_TAG_PRIORITY,
		.quantum = 9000, .flows = 5,	/* not in set: not sent */
	};
	struct mercury_qdisc_opts back = { 0 };
	char buf[128];
	int len;

	(void)state;
	/* three attributes of 8 bytes each (4 header, value padded to 4) */
	len = mercury_qdisc_opts_encode(&o, buf, sizeof(buf));
	assert_int_equal(len, 24);
	assert_int_equal(mercury_qdisc_opts_decode(buf, len, &back,
						   sizeof(back)), 0);
	assert_int_equal(back.set, o.set);
	assert_int_equal(back.levels, 64);
	assert_int_equal(back.source, TC_MERCURY_TAG_PRIORITY);
	assert_int_equal(back.quantum, 9000);
	assert_int_equal(back.flows, 0);
	assert_int_equal(mercury_qdisc_opts_encode(&o, buf, 23), -ENOSPC);
	o.set = 0;
	assert_int_equal(mercury_qdisc_opts_encode(&o, buf, sizeof(buf)), 0);
}

/* The same options, laid out by libnl's nla_put_*() as the encoder was. */
static void test_encode_as_libnl(void **state)
{
	struct mercury_qdisc_opts o;
	struct nl_msg *msg = nlmsg_alloc();
	char buf[256];
	int len;

	(void)state;
	mercury_qdisc_opts_defaults(&o, sizeof(o));
	o.set = (1u << (TCA_MERCURY_MAX + 1)) - 2;
	o.levels = 4096;
	o.source = TC_MERCURY_TAG_DSCP;
	o.shift = 3;
	o.memory_limit = 1572864;
	assert_non_null(msg);
	nla_put_u32(msg, TCA_MERCURY_LEVELS, o.levels);
	nla_put_u8(msg, TCA_MERCURY_TAG_SOURCE, o.source);
	nla_put_u8(msg, TCA_MERCURY_TAG_SHIFT, o.shift);
	nla_put_u32(msg, TCA_MERCURY_TAG_MASK, o.mask);
	nla_put_u8(msg, TCA_MERCURY_UNTAGGED, o.untagged);
	nla_put_u8(msg, TCA_MERCURY_UNTAGGED_SHARE, o.share);
	nla_put_u8(msg, TCA_MERCURY_FLOW_ORDER, o.flow_order);
	nla_put_u32(msg, TCA_MERCURY_FLOWS, o.flows);
	nla_put_u32(msg, TCA_MERCURY_LIMIT, o.limit);
	nla_put_u32(msg, TCA_MERCURY_MEMORY_LIMIT, o.memory_limit);
	nla_put_u32(msg, TCA_MERCURY_QUANTUM, o.quantum);
	nla_put_u8(msg, TCA_MERCURY_BYPASS, o.bypass);
	nla_put_u32(msg, TCA_MERCURY_FLOW_LIMIT, o.flow_limit);
	len = mercury_qdisc_opts_encode(&o, buf, sizeof(buf));
	assert_int_equal(len, nlmsg_datalen(nlmsg_hdr(msg)));
	assert_memory_equal(buf, nlmsg_data(nlmsg_hdr(msg)), len);
	nlmsg_free(msg);
}

/* ---- the grammar -------------------------------------------------------- */

#define WORDS(...)	((char *[]){ __VA_ARGS__ })
#define NWORDS(...)	((int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)))
#define ALL_SET		((1u << (TCA_MERCURY_MAX + 1)) - 2)

/* The kernel's defaults are <linux/mercury.h>'s, none other. */
static void test_defaults(void **state)
{
	struct mercury_qdisc_opts o;

	(void)state;
	memset(&o, 0xa5, sizeof(o));
	mercury_qdisc_opts_defaults(&o, sizeof(o));
	assert_int_equal(o.set, 0);
	assert_int_equal(o.levels, TC_MERCURY_DEF_LEVELS);
	assert_int_equal(o.levels, 1024);
	assert_int_equal(o.flows, TC_MERCURY_DEF_FLOWS);
	assert_int_equal(o.flows, 1024);
	assert_int_equal(o.mask, TC_MERCURY_DEF_MASK);
	assert_int_equal(o.mask, 0xffff);
	assert_int_equal(o.limit, TC_MERCURY_DEF_LIMIT);
	assert_int_equal(o.limit, 10000);
	assert_int_equal(o.memory_limit, TC_MERCURY_DEF_MEMORY_LIMIT);
	assert_int_equal(o.memory_limit, 32u << 20);
	assert_int_equal(o.quantum, TC_MERCURY_DEF_QUANTUM);
	assert_int_equal(o.quantum, 2 * 1514);
	assert_int_equal(o.source, TC_MERCURY_DEF_TAG_SOURCE);
	assert_int_equal(o.source, TC_MERCURY_TAG_MARK);
	assert_int_equal(o.shift, TC_MERCURY_DEF_SHIFT);
	assert_int_equal(o.untagged, TC_MERCURY_DEF_UNTAGGED);
	assert_int_equal(o.untagged, TC_MERCURY_UNTAGGED_FIRST);
	assert_int_equal(o.share, TC_MERCURY_DEF_SHARE);
	assert_int_equal(o.flow_order, TC_MERCURY_DEF_FLOW_ORDER);
	assert_int_equal(o.flow_order, 1);
	assert_int_equal(o.bypass, TC_MERCURY_DEF_BYPASS);
	assert_int_equal(o.bypass, 1);
	assert_int_equal(o.flow_limit, TC_MERCURY_DEF_FLOW_LIMIT);
	assert_int_equal(o.flow_limit, 0);
	/* the tagger's default mask is the qdisc's */
	assert_int_equal(MERCURY_DEFAULT_MASK, TC_MERCURY_DEF_MASK);

	/* a caller that knows only the first fields gets only those */
	memset(&o, 0xa5, sizeof(o));
	mercury_qdisc_opts_defaults(&o, offsetof(struct mercury_qdisc_opts,
						 mask));
	assert_int_equal(o.levels, TC_MERCURY_DEF_LEVELS);
	assert_int_equal(o.mask, 0xa5a5a5a5);
}

static void test_parse_every_option(void **state)
{
	char **argv = WORDS("levels", "4096", "tag", "priority", "shift", "4",
			    "mask", "0x1fff", "untagged", "last",
			    "untagged_share", "15", "flow_order", "off",
			    "flows", "2048", "limit", "777", "memory_limit",
			    "1.5m", "quantum", "9000", "bypass", "off",
			    "flow_limit", "9");
	struct mercury_qdisc_opts o;
	unsigned int flags;

	(void)state;
	for (flags = 0; flags <= MERCURY_QDISC_PARSE_RANGES;
	     flags += MERCURY_QDISC_PARSE_RANGES) {
		memset(&o, 0xa5, sizeof(o));
		assert_int_equal(mercury_qdisc_opts_parse(26, argv, flags, &o,
							  sizeof(o)), 0);
		assert_int_equal(o.set, ALL_SET);
		assert_int_equal(o.flow_limit, 9);
		assert_int_equal(o.levels, 4096);
		assert_int_equal(o.source, TC_MERCURY_TAG_PRIORITY);
		assert_int_equal(o.shift, 4);
		assert_int_equal(o.mask, 0x1fff);
		assert_int_equal(o.untagged, TC_MERCURY_UNTAGGED_LAST);
		assert_int_equal(o.share, 15);
		assert_int_equal(o.flow_order, 0);
		assert_int_equal(o.flows, 2048);
		assert_int_equal(o.limit, 777);
		assert_int_equal(o.memory_limit, 1572864);
		assert_int_equal(o.quantum, 9000);
		assert_int_equal(o.bypass, 0);
	}

	/* only what is given is set, the rest is zero; a later word wins */
	assert_int_equal(mercury_qdisc_opts_parse(NWORDS("limit", "5", "limit", "42"),
						  WORDS("limit", "5", "limit", "42"),
						  0, &o, sizeof(o)), 0);
	assert_int_equal(o.set, 1u << TCA_MERCURY_LIMIT);
	assert_int_equal(o.limit, 42);
	assert_int_equal(o.levels, 0);
	assert_int_equal(mercury_qdisc_opts_parse(0, NULL, 0, &o, sizeof(o)), 0);
	assert_int_equal(o.set, 0);
}

/*
 * Sizes as tc's get_size() reads them: k, m, g are 1024, bit units
 * binary, a decimal fraction when the product is whole bytes. Every tool
 * reads the same word as the same number of bytes.
 */
static void test_parse_sizes(void **state)
{
	static const struct {
		const char *s;
		uint32_t v;		/* 0: refused */
	} t[] = {
		{ "1.5m", 1572864 }, { "1.5M", 1572864 }, { "1.5mb", 1572864 },
		{ "1.5kb", 1536 }, { "0.5k", 512 }, { "1.25g", 1342177280 },
		{ "1.50m", 1572864 }, { "1.0", 1 }, { "32kb", 32768 },
		{ "32Kb", 32768 }, { "1M", 1048576 }, { "4Mb", 4194304 },
		{ "3028", 3028 }, { "3028b", 3028 }, { "8kbit", 1024 },
		{ "1mbit", 131072 }, { "1gbit", 134217728 }, { "2gb", 2u << 30 },
		{ "3gb", 3u << 30 }, { "4294967295", 4294967295u },
		{ "1.5kbit", 192 },
		/* not whole bytes, more than the field holds, not a size */
		{ "1.3m", 0 }, { "1.5", 0 }, { "1.5b", 0 }, { "4gb", 0 },
		{ "4294967296", 0 }, { "1.0000000001g", 0 }, { "1.", 0 },
		{ ".5m", 0 }, { "-1", 0 }, { "+1", 0 }, { "0x400", 0 },
		{ "1e3", 0 }, { "12zz", 0 }, { "", 0 }, { "kb", 0 },
		{ "1bit", 0 }, { "12 kb", 0 },
	};
	struct mercury_qdisc_opts o;
	char *argv[2] = { "memory_limit" };
	size_t i;
	int rc;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		argv[1] = (char *)t[i].s;
		rc = mercury_qdisc_opts_parse(2, argv, 0, &o, sizeof(o));
		if (t[i].v && (rc || o.memory_limit != t[i].v))
			fail_msg("memory_limit %s: rc %d, %u bytes, not %u (%s)",
				 t[i].s, rc, o.memory_limit, t[i].v,
				 mercury_last_error());
		if (!t[i].v && rc != -EINVAL)
			fail_msg("memory_limit %s: rc %d, %u bytes, not refused",
				 t[i].s, rc, o.memory_limit);
	}
	/* the library's own size parser stays whole numbers only */
	assert_int_equal(mercury_parse_size("1.5m", UINT64_MAX, &(uint64_t){ 0 }),
			 -EINVAL);
}

/* Numbers as tc's get_u32(.., 0): decimal, 0x hex, leading 0 octal. */
static void test_parse_numbers(void **state)
{
	static const struct {
		const char *s;
		int rc;
		uint32_t v;
	} t[] = {
		{ "64", 0, 64 }, { "0x40", 0, 64 }, { "0X40", 0, 64 },
		{ "010", 0, 8 }, { "4294967295", 0, 4294967295u },
		{ "4294967296", -EINVAL, 0 }, { "-1", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 }, { " 1", -EINVAL, 0 }, { "1k", -EINVAL, 0 },
		{ "", -EINVAL, 0 }, { "many", -EINVAL, 0 }, { "08", -EINVAL, 0 },
	};
	struct mercury_qdisc_opts o;
	char *argv[2] = { "limit" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		argv[1] = (char *)t[i].s;
		assert_int_equal(mercury_qdisc_opts_parse(2, argv, 0, &o,
							  sizeof(o)), t[i].rc);
		if (!t[i].rc)
			assert_int_equal(o.limit, t[i].v);
	}
}

/*
 * Each option's bad value: one error that names the option, its rule and
 * the word. Without the ranges flag (tc's plugin) only what the field
 * cannot hold is refused: the kernel judges the rest.
 */
static void test_parse_bad_values(void **state)
{
	static const struct {
		const char *name, *val;
		bool syntax;		/* refused without the ranges too */
		const char *msg;
	} bad[] = {
		{ "levels", "0", false, "levels must be 1..65534, not '0'" },
		{ "levels", "65535", false, "levels must be 1..65534, not '65535'" },
		{ "levels", "abc", true, "levels must be 1..65534, not 'abc'" },
		{ "levels", "", true, "levels must be 1..65534, not ''" },
		{ "tag", "foo", true, "tag must be mark, priority or dscp, not 'foo'" },
		{ "tag", "DSCP", true, "tag must be mark, priority or dscp, not 'DSCP'" },
		{ "shift", "32", false, "shift must be 0..31 bits, not '32'" },
		{ "shift", "256", true, "shift must be 0..31 bits, not '256'" },
		{ "mask", "0", false, "mask must be 0x1..0xffffffff, not '0'" },
		{ "mask", "0x100000000", true, "mask must be 0x1..0xffffffff, not '0x100000000'" },
		{ "untagged", "middle", true, "untagged must be first or last, not 'middle'" },
		{ "untagged_share", "91", false, "untagged_share must be 0..90 percent, not '91'" },
		{ "untagged_share", "256", true, "untagged_share must be 0..90 percent, not '256'" },
		{ "flow_order", "maybe", true, "flow_order must be off or on, not 'maybe'" },
		{ "flows", "0", false, "flows must be 1..65536, not '0'" },
		{ "flows", "65537", false, "flows must be 1..65536, not '65537'" },
		{ "limit", "0", false, "limit must be 1..4294967295 packets, not '0'" },
		{ "limit", "4294967296", true, "limit must be 1..4294967295 packets, not '4294967296'" },
		{ "memory_limit", "0", false, "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '0'" },
		{ "memory_limit", "3gb", false, "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '3gb'" },
		{ "memory_limit", "1.3m", true, "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '1.3m'" },
		{ "memory_limit", "4parsecs", true, "memory_limit must be 1..2147483648 bytes (a size: 512kb, 1.5m), not '4parsecs'" },
		{ "quantum", "255", false, "quantum must be 256..1048576 bytes (a size: 512kb, 1.5m), not '255'" },
		{ "quantum", "1.5mb", false, "quantum must be 256..1048576 bytes (a size: 512kb, 1.5m), not '1.5mb'" },
		{ "bypass", "sometimes", true, "bypass must be off or on, not 'sometimes'" },
	};
	struct mercury_qdisc_opts o;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { (char *)bad[i].name, (char *)bad[i].val };

		if (mercury_qdisc_opts_parse(2, argv, MERCURY_QDISC_PARSE_RANGES,
					     &o, sizeof(o)) != -EINVAL)
			fail_msg("%s %s: not refused", bad[i].name, bad[i].val);
		assert_string_equal(mercury_last_error(), bad[i].msg);
		assert_int_equal(mercury_qdisc_opts_parse(2, argv, 0, &o,
							  sizeof(o)),
				 bad[i].syntax ? -EINVAL : 0);
		if (bad[i].syntax)
			assert_string_equal(mercury_last_error(), bad[i].msg);
	}
}

/* Each range's ends, from the UAPI header, with the ranges flag. */
static void test_parse_ranges(void **state)
{
	static const struct {
		const char *name;
		unsigned long long lo, hi;
	} r[] = {
		{ "levels", 1, TC_MERCURY_MAX_LEVELS },
		{ "shift", 0, TC_MERCURY_MAX_SHIFT },
		{ "untagged_share", 0, TC_MERCURY_MAX_SHARE },
		{ "flows", 1, TC_MERCURY_MAX_FLOWS },
		{ "memory_limit", 1, TC_MERCURY_MAX_MEMORY_LIMIT },
		{ "quantum", TC_MERCURY_MIN_QUANTUM, TC_MERCURY_MAX_QUANTUM },
	};
	struct mercury_qdisc_opts o;
	char lo[32], hi[32], below[32], above[32];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		char *argv[2] = { (char *)r[i].name };

		snprintf(lo, sizeof(lo), "%llu", r[i].lo);
		snprintf(hi, sizeof(hi), "%llu", r[i].hi);
		snprintf(below, sizeof(below), "%llu", r[i].lo - 1);
		snprintf(above, sizeof(above), "%llu", r[i].hi + 1);
		argv[1] = lo;
		assert_int_equal(mercury_qdisc_opts_parse(2, argv,
				 MERCURY_QDISC_PARSE_RANGES, &o, sizeof(o)), 0);
		argv[1] = hi;
		assert_int_equal(mercury_qdisc_opts_parse(2, argv,
				 MERCURY_QDISC_PARSE_RANGES, &o, sizeof(o)), 0);
		argv[1] = above;
		assert_int_equal(mercury_qdisc_opts_parse(2, argv,
				 MERCURY_QDISC_PARSE_RANGES, &o, sizeof(o)),
				 -EINVAL);
		assert_non_null(strstr(mercury_last_error(), r[i].name));
		if (!r[i].lo)
			continue;
		argv[1] = below;
		assert_int_equal(mercury_qdisc_opts_parse(2, argv,
				 MERCURY_QDISC_PARSE_RANGES, &o, sizeof(o)),
				 -EINVAL);
	}
}

static void test_parse_structure(void **state)
{
	struct mercury_qdisc_opts o;

	(void)state;
	assert_int_equal(mercury_qdisc_opts_parse(2, WORDS("colour", "blue"), 0,
						  &o, sizeof(o)), -ENOENT);
	assert_string_equal(mercury_last_error(), "unknown option 'colour'");
	assert_int_equal(mercury_qdisc_opts_parse(1, WORDS("colour"), 0, &o,
						  sizeof(o)), -ENOENT);
	assert_int_equal(mercury_qdisc_opts_parse(3, WORDS("limit", "5", "levels"),
						  0, &o, sizeof(o)), -ENODATA);
	assert_string_equal(mercury_last_error(), "option levels needs a value");
	/* option names are tc's, whole and in lower case */
	assert_int_equal(mercury_qdisc_opts_parse(2, WORDS("Levels", "5"), 0,
						  &o, sizeof(o)), -ENOENT);
	assert_int_equal(mercury_qdisc_opts_parse(2, WORDS("level", "5"), 0,
						  &o, sizeof(o)), -ENOENT);
	assert_int_equal(mercury_qdisc_opts_parse(2, WORDS("limit", "5"), 2,
						  &o, sizeof(o)), -EINVAL);
	assert_int_equal(mercury_qdisc_opts_parse(-1, NULL, 0, &o, sizeof(o)),
			 -EINVAL);
	assert_int_equal(mercury_qdisc_opts_parse(2, WORDS("limit", "5"), 0,
						  NULL, sizeof(o)), -EINVAL);
}

/* Each option printed parses back to the same value, in tc's words. */
static void test_format(void **state)
{
	struct mercury_qdisc_opts o, back;
	char line[512], *argv[32], *save = NULL, *w;
	unsigned int a;
	int argc = 0, n;
	size_t used = 0;

	(void)state;
	mercury_qdisc_opts_defaults(&o, sizeof(o));
	for (a = 1; a <= TCA_MERCURY_MAX; a++) {
		n = mercury_qdisc_opt_format(&o, a, line + used,
					     sizeof(line) - used);
		assert_true(n > 0);
		used += n;
		line[used++] = ' ';
	}
	line[used - 1] = '\0';
	assert_string_equal(line,
		"levels 1024 tag mark shift 0 mask 0xffff untagged first untagged_share 0 flow_order on flows 1024 limit 10000 memory_limit 32Mb quantum 3028b bypass on flow_limit 0");

	o.memory_limit = 1572864;
	o.quantum = 4096;
	o.source = TC_MERCURY_TAG_DSCP;
	o.untagged = TC_MERCURY_UNTAGGED_LAST;
	o.flow_order = 0;
	used = 0;
	for (a = 1; a <= TCA_MERCURY_MAX; a++) {
		used += mercury_qdisc_opt_format(&o, a, line + used,
						 sizeof(line) - used);
		line[used++] = ' ';
	}
	line[used - 1] = '\0';
	for (w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	assert_int_equal(argc, 2 * TCA_MERCURY_MAX);
	assert_int_equal(mercury_qdisc_opts_parse(argc, argv,
						  MERCURY_QDISC_PARSE_RANGES,
						  &back, sizeof(back)), 0);
	o.set = ALL_SET;
	assert_memory_equal(&o, &back, sizeof(o));

	/* a value from a newer kernel prints as its number */
	o.source = 7;
	mercury_qdisc_opt_format(&o, TCA_MERCURY_TAG_SOURCE, line, sizeof(line));
	assert_string_equal(line, "tag 7");
	assert_int_equal(mercury_qdisc_opt_format(&o, 0, line, sizeof(line)),
			 -EINVAL);
	assert_int_equal(mercury_qdisc_opt_format(&o, TCA_MERCURY_MAX + 1, line,
						  sizeof(line)), -EINVAL);
}

/* ---- at channel-set creation, without a mercury qdisc ------------------- */

static void test_chanset_no_qdisc(void **state)
{
	unsigned int classes[3] = { 3, 3, 3 };	/* one per connection */
	MERCURY_OPTS(mercury_tag_opts, to, .source = MERCURY_TAG_PRIORITY);
	MERCURY_OPTS(mercury_chanset_opts, o, .tag_opts = &to,
		     .classes = classes,
		     .qdisc_check = MERCURY_QDISC_CHECK_STRICT);
	struct mercury_chanset *cs;
	int c[2], sp[2];

	(void)state;
	mercury_set_log(log_cb, NULL);
	/* TCP over loopback: lo has no mercury qdisc, a note, no error */
	tcp_pair(c);
	logged.n = 0;
	assert_int_equal(mercury_chanset_new(c, 1, &o, &cs), 0);
	mercury_chanset_free(cs);
	assert_true(logged_at("chanset: no mercury qdisc on lo: its tags are not checked",
			      MERCURY_LOG_INFO));
	/* warn (the default) says the same */
	o.qdisc_check = MERCURY_QDISC_CHECK_WARN;
	logged.n = 0;
	assert_int_equal(mercury_chanset_new(c, 1, &o, &cs), 0);
	mercury_chanset_free(cs);
	assert_true(logged_at("no mercury qdisc on lo", MERCURY_LOG_INFO));
	/* one device, looked at once for several connections */
	{
		int fds[3] = { c[0], c[0], c[0] };

		logged.n = 0;
		assert_int_equal(mercury_chanset_new(fds, 3, &o, &cs), 0);
		mercury_chanset_free(cs);
		assert_int_equal(logged.n, 1);
	}
	/* off: no look, no line */
	o.qdisc_check = MERCURY_QDISC_CHECK_OFF;
	logged.n = 0;
	assert_int_equal(mercury_chanset_new(c, 1, &o, &cs), 0);
	mercury_chanset_free(cs);
	assert_int_equal(logged.n, 0);
	/* no_tag: the set tags nothing, so nothing to compare */
	o.qdisc_check = MERCURY_QDISC_CHECK_STRICT;
	o.no_tag = true;
	assert_int_equal(mercury_chanset_new(c, 1, &o, &cs), 0);
	mercury_chanset_free(cs);
	assert_int_equal(logged.n, 0);
	o.no_tag = false;
	/* AF_UNIX: no egress device, not checked, not an error */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(mercury_chanset_new(sp, 1, &o, &cs), 0);
	mercury_chanset_free(cs);
	assert_int_equal(logged.n, 0);
	/* an unknown mode is the caller's error */
	o.qdisc_check = 7;
	assert_int_equal(mercury_chanset_new(c, 1, &o, &cs), -EINVAL);
	assert_null(cs);
	assert_string_equal(mercury_last_error(), "chanset: unknown qdisc_check 7");
	/* the caller's fds are still open after every call above */
	assert_int_equal(write(c[0], "x", 1), 1);
	mercury_set_log(NULL, NULL);
	close(c[0]);
	close(c[1]);
	close(sp[0]);
	close(sp[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fit_match),
		cmocka_unit_test(test_fit_each),
		cmocka_unit_test(test_decode),
		cmocka_unit_test(test_encode),
		cmocka_unit_test(test_encode_as_libnl),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_parse_every_option),
		cmocka_unit_test(test_parse_sizes),
		cmocka_unit_test(test_parse_numbers),
		cmocka_unit_test(test_parse_bad_values),
		cmocka_unit_test(test_parse_ranges),
		cmocka_unit_test(test_parse_structure),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_chanset_no_qdisc),
	};

	return cmocka_run_group_tests_name("qdisc", tests, NULL, NULL);
}
