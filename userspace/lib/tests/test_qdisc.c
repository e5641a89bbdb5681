// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Does the tagging fit the qdisc: the qdisc's TCA_OPTIONS both ways,
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
		cmocka_unit_test(test_chanset_no_qdisc),
	};

	return cmocka_run_group_tests_name("qdisc", tests, NULL, NULL);
}
