// SPDX-License-Identifier: GPL-2.0
/*
 * q_mercury.c	tc support for the Mercury layer-priority qdisc.
 *
 * Loaded by tc as $TC_LIB_DIR/q_mercury.so. Parses the options into nested
 * TCA_MERCURY_* attributes (only the options the user gave, so "change"
 * keeps the rest), prints them back in the same syntax, and prints the
 * qdisc's and each level's statistics. Ranges are the kernel's to check:
 * its extack message names the option that was wrong.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utils.h"
#include "tc_util.h"

#include <linux/mercury.h>

static void mercury_explain(void)
{
	fprintf(stderr,
		"Usage: ... mercury [ levels NUMBER ] [ tag { mark | priority | dscp } ]\n"
		"                   [ shift BITS ] [ mask MASK ]\n"
		"                   [ untagged { first | last } ] [ untagged_share PERCENT ]\n"
		"                   [ flow_order { on | off } ] [ flows NUMBER ]\n"
		"                   [ limit PACKETS ] [ memory_limit BYTES ] [ quantum BYTES ]\n"
		"                   [ bypass { on | off } ]\n"
		"Tag = (mark, priority or DSCP >> shift) & mask; tag 1 is the most urgent,\n"
		"tags above levels count as levels, tag 0 is untagged.\n");
}

static int mercury_bad(const char *opt, const char *val)
{
	fprintf(stderr, "mercury: illegal \"%s\" value \"%s\"\n", opt, val);
	mercury_explain();
	return -1;
}

/* Tag sources by their TC_MERCURY_TAG_* value. */
static const char * const mercury_sources[] = {
	[TC_MERCURY_TAG_MARK]		= "mark",
	[TC_MERCURY_TAG_PRIORITY]	= "priority",
	[TC_MERCURY_TAG_DSCP]		= "dscp",
};

static int mercury_get_source(__u8 *v, const char *arg)
{
	__u8 i;

	for (i = 0; i < ARRAY_SIZE(mercury_sources); i++) {
		if (strcmp(arg, mercury_sources[i]) == 0) {
			*v = i;
			return 0;
		}
	}
	return -1;
}

/* A keyword option: one of two words, sent as 0 or 1. */
static int mercury_get_choice(__u8 *v, const char *arg, const char *w0,
			      const char *w1)
{
	if (strcmp(arg, w0) == 0)
		*v = 0;
	else if (strcmp(arg, w1) == 0)
		*v = 1;
	else
		return -1;
	return 0;
}

static int mercury_parse_opt(struct qdisc_util *qu, int argc, char **argv,
			     struct nlmsghdr *n, const char *dev)
{
	__u32 levels, mask, flows, limit, memory_limit, quantum;
	bool set_levels = false, set_mask = false, set_flows = false;
	bool set_limit = false, set_memory = false, set_quantum = false;
	bool set_source = false, set_shift = false, set_untagged = false;
	bool set_share = false, set_order = false, set_bypass = false;
	__u8 source, shift, untagged, share, order, bypass;
	struct rtattr *tail;

	while (argc > 0) {
		if (strcmp(*argv, "levels") == 0) {
			NEXT_ARG();
			if (get_u32(&levels, *argv, 0))
				return mercury_bad("levels", *argv);
			set_levels = true;
		} else if (strcmp(*argv, "tag") == 0) {
			NEXT_ARG();
			if (mercury_get_source(&source, *argv))
				return mercury_bad("tag", *argv);
			set_source = true;
		} else if (strcmp(*argv, "shift") == 0) {
			NEXT_ARG();
			if (get_u8(&shift, *argv, 0))
				return mercury_bad("shift", *argv);
			set_shift = true;
		} else if (strcmp(*argv, "mask") == 0) {
			NEXT_ARG();
			if (get_u32(&mask, *argv, 0))
				return mercury_bad("mask", *argv);
			set_mask = true;
		} else if (strcmp(*argv, "untagged") == 0) {
			NEXT_ARG();
			if (mercury_get_choice(&untagged, *argv, "first",
					       "last"))
				return mercury_bad("untagged", *argv);
			set_untagged = true;
		} else if (strcmp(*argv, "untagged_share") == 0) {
			NEXT_ARG();
			if (get_u8(&share, *argv, 0))
				return mercury_bad("untagged_share", *argv);
			set_share = true;
		} else if (strcmp(*argv, "flow_order") == 0) {
			NEXT_ARG();
			if (mercury_get_choice(&order, *argv, "off", "on"))
				return mercury_bad("flow_order", *argv);
			set_order = true;
		} else if (strcmp(*argv, "flows") == 0) {
			NEXT_ARG();
			if (get_u32(&flows, *argv, 0))
				return mercury_bad("flows", *argv);
			set_flows = true;
		} else if (strcmp(*argv, "limit") == 0) {
			NEXT_ARG();
			if (get_u32(&limit, *argv, 0))
				return mercury_bad("limit", *argv);
			set_limit = true;
		} else if (strcmp(*argv, "memory_limit") == 0) {
			NEXT_ARG();
			if (get_size(&memory_limit, *argv))
				return mercury_bad("memory_limit", *argv);
			set_memory = true;
		} else if (strcmp(*argv, "quantum") == 0) {
			NEXT_ARG();
			if (get_size(&quantum, *argv))
				return mercury_bad("quantum", *argv);
			set_quantum = true;
		} else if (strcmp(*argv, "bypass") == 0) {
			NEXT_ARG();
			if (mercury_get_choice(&bypass, *argv, "off", "on"))
				return mercury_bad("bypass", *argv);
			set_bypass = true;
		} else {
			if (strcmp(*argv, "help") != 0)
				fprintf(stderr,
					"mercury: unknown parameter \"%s\"\n",
					*argv);
			mercury_explain();
			return -1;
		}
		argc--;
		argv++;
	}

	tail = addattr_nest(n, 1024, TCA_OPTIONS | NLA_F_NESTED);
	if (set_levels)
		addattr32(n, 1024, TCA_MERCURY_LEVELS, levels);
	if (set_source)
		addattr8(n, 1024, TCA_MERCURY_TAG_SOURCE, source);
	if (set_shift)
		addattr8(n, 1024, TCA_MERCURY_TAG_SHIFT, shift);
	if (set_mask)
		addattr32(n, 1024, TCA_MERCURY_TAG_MASK, mask);
	if (set_untagged)
		addattr8(n, 1024, TCA_MERCURY_UNTAGGED, untagged);
	if (set_share)
		addattr8(n, 1024, TCA_MERCURY_UNTAGGED_SHARE, share);
	if (set_order)
		addattr8(n, 1024, TCA_MERCURY_FLOW_ORDER, order);
	if (set_flows)
		addattr32(n, 1024, TCA_MERCURY_FLOWS, flows);
	if (set_limit)
		addattr32(n, 1024, TCA_MERCURY_LIMIT, limit);
	if (set_memory)
		addattr32(n, 1024, TCA_MERCURY_MEMORY_LIMIT, memory_limit);
	if (set_quantum)
		addattr32(n, 1024, TCA_MERCURY_QUANTUM, quantum);
	if (set_bypass)
		addattr8(n, 1024, TCA_MERCURY_BYPASS, bypass);
	addattr_nest_end(n, tail);
	return 0;
}

static __u32 mercury_rta_u32(struct rtattr *tb[], int type)
{
	if (tb[type] && RTA_PAYLOAD(tb[type]) >= sizeof(__u32))
		return rta_getattr_u32(tb[type]);
	return 0;
}

static __u8 mercury_rta_u8(struct rtattr *tb[], int type)
{
	if (tb[type] && RTA_PAYLOAD(tb[type]) >= sizeof(__u8))
		return rta_getattr_u8(tb[type]);
	return 0;
}

/*
 * tc's print_size() rounds (33554500 bytes prints as "32Mb"), so a printed
 * line would not configure the same qdisc again. Print the largest unit
 * that is exact, in the units tc's get_size() reads back; JSON gets bytes.
 */
static void mercury_print_exact_size(const char *key, __u32 v)
{
	char buf[32], fmt[32];

	if (v && v % (1024 * 1024) == 0)
		snprintf(buf, sizeof(buf), "%uMb", v / (1024 * 1024));
	else if (v && v % 1024 == 0)
		snprintf(buf, sizeof(buf), "%uKb", v / 1024);
	else
		snprintf(buf, sizeof(buf), "%ub", v);
	snprintf(fmt, sizeof(fmt), "%s %%s ", key);
	print_string(PRINT_FP, NULL, fmt, buf);
	print_uint(PRINT_JSON, key, NULL, v);
}

/* An on/off option: a word in text, a boolean in JSON. */
static void mercury_print_switch(struct rtattr *tb[], int type,
				 const char *key)
{
	char fmt[32];

	if (!tb[type])
		return;
	snprintf(fmt, sizeof(fmt), "%s %%s ", key);
	print_string(PRINT_FP, NULL, fmt,
		     mercury_rta_u8(tb, type) ? "on" : "off");
	print_bool(PRINT_JSON, key, NULL, mercury_rta_u8(tb, type));
}

static int mercury_print_opt(struct qdisc_util *qu, FILE *f,
			     struct rtattr *opt)
{
	struct rtattr *tb[TCA_MERCURY_MAX + 1];
	char hex[16];
	__u8 source;

	if (!opt)
		return 0;
	parse_rtattr_nested(tb, TCA_MERCURY_MAX, opt);

	if (tb[TCA_MERCURY_LEVELS])
		print_uint(PRINT_ANY, "levels", "levels %u ",
			   mercury_rta_u32(tb, TCA_MERCURY_LEVELS));
	if (tb[TCA_MERCURY_TAG_SOURCE]) {
		source = mercury_rta_u8(tb, TCA_MERCURY_TAG_SOURCE);
		if (source < ARRAY_SIZE(mercury_sources))
			print_string(PRINT_ANY, "tag", "tag %s ",
				     mercury_sources[source]);
		else
			print_uint(PRINT_ANY, "tag", "tag %u ", source);
	}
	if (tb[TCA_MERCURY_TAG_SHIFT])
		print_uint(PRINT_ANY, "shift", "shift %u ",
			   mercury_rta_u8(tb, TCA_MERCURY_TAG_SHIFT));
	if (tb[TCA_MERCURY_TAG_MASK]) {
		/* hex in text, the raw number in JSON */
		snprintf(hex, sizeof(hex), "0x%x",
			 mercury_rta_u32(tb, TCA_MERCURY_TAG_MASK));
		print_string(PRINT_FP, NULL, "mask %s ", hex);
		print_uint(PRINT_JSON, "mask", NULL,
			   mercury_rta_u32(tb, TCA_MERCURY_TAG_MASK));
	}
	if (tb[TCA_MERCURY_UNTAGGED])
		print_string(PRINT_ANY, "untagged", "untagged %s ",
			     mercury_rta_u8(tb, TCA_MERCURY_UNTAGGED) ==
			     TC_MERCURY_UNTAGGED_LAST ? "last" : "first");
	if (tb[TCA_MERCURY_UNTAGGED_SHARE])
		print_uint(PRINT_ANY, "untagged_share", "untagged_share %u ",
			   mercury_rta_u8(tb, TCA_MERCURY_UNTAGGED_SHARE));
	mercury_print_switch(tb, TCA_MERCURY_FLOW_ORDER, "flow_order");
	if (tb[TCA_MERCURY_FLOWS])
		print_uint(PRINT_ANY, "flows", "flows %u ",
			   mercury_rta_u32(tb, TCA_MERCURY_FLOWS));
	if (tb[TCA_MERCURY_LIMIT])
		print_uint(PRINT_ANY, "limit", "limit %u ",
			   mercury_rta_u32(tb, TCA_MERCURY_LIMIT));
	if (tb[TCA_MERCURY_MEMORY_LIMIT])
		mercury_print_exact_size("memory_limit",
					 mercury_rta_u32(tb, TCA_MERCURY_MEMORY_LIMIT));
	if (tb[TCA_MERCURY_QUANTUM])
		mercury_print_exact_size("quantum",
					 mercury_rta_u32(tb, TCA_MERCURY_QUANTUM));
	mercury_print_switch(tb, TCA_MERCURY_BYPASS, "bypass");
	return 0;
}

static void mercury_print_qdisc_xstats(const struct tc_mercury_xstats *st)
{
	print_uint(PRINT_ANY, "flows", "  flows %u", st->flows);
	print_uint(PRINT_ANY, "levels_active", " levels_active %u",
		   st->levels_active);
	print_uint(PRINT_ANY, "most_urgent", " most_urgent %u",
		   st->most_urgent);
	print_size(PRINT_ANY, "memory_usage", " memory_usage %s",
		   st->memory_usage);
	print_nl();
	print_u64(PRINT_ANY, "drops_limit", "  drops_limit %llu",
		  st->drops_limit);
	print_u64(PRINT_ANY, "drops_memory", " drops_memory %llu",
		  st->drops_memory);
	print_u64(PRINT_ANY, "inversions_avoided", " inversions_avoided %llu",
		  st->inversions_avoided);
	print_nl();
	print_u64(PRINT_ANY, "untagged_packets", "  untagged_packets %llu",
		  st->untagged_packets);
	print_u64(PRINT_ANY, "untagged_bytes", " untagged_bytes %llu",
		  st->untagged_bytes);
	print_u64(PRINT_ANY, "share_forced", " share_forced %llu",
		  st->share_forced);
	print_u64(PRINT_ANY, "drops_flows", " drops_flows %llu",
		  st->drops_flows);
}

static void mercury_print_class_xstats(const struct tc_mercury_cl_xstats *st)
{
	print_uint(PRINT_ANY, "tag", "  tag %u", st->tag);
	print_uint(PRINT_ANY, "flows", " flows %u", st->flows);
}

/*
 * Qdisc and class statistics come through here alike, told apart by the
 * type both start with. A kernel with a longer or shorter struct than ours
 * still prints: we copy what both know, zero the rest.
 */
static int mercury_print_xstats(struct qdisc_util *qu, FILE *f,
				struct rtattr *xstats)
{
	struct tc_mercury_cl_xstats cl = {};
	struct tc_mercury_xstats st = {};
	unsigned int len;
	__u32 type;

	if (!xstats)
		return 0;
	len = RTA_PAYLOAD(xstats);
	if (len < sizeof(type)) {
		fprintf(stderr, "mercury: statistics too short (%u bytes)\n",
			len);
		return -1;
	}
	memcpy(&type, RTA_DATA(xstats), sizeof(type));
	switch (type) {
	case TC_MERCURY_XSTATS_QDISC:
		memcpy(&st, RTA_DATA(xstats), len < sizeof(st) ? len : sizeof(st));
		mercury_print_qdisc_xstats(&st);
		break;
	case TC_MERCURY_XSTATS_CLASS:
		memcpy(&cl, RTA_DATA(xstats), len < sizeof(cl) ? len : sizeof(cl));
		mercury_print_class_xstats(&cl);
		break;
	default:
		fprintf(stderr, "mercury: unknown statistics type %u\n", type);
		return -1;
	}
	return 0;
}

static int mercury_print_copt(struct qdisc_util *qu, FILE *f,
			      struct rtattr *opt)
{
	return 0;
}

struct qdisc_util mercury_qdisc_util = {
	.id		= "mercury",
	.parse_qopt	= mercury_parse_opt,
	.print_qopt	= mercury_print_opt,
	.print_xstats	= mercury_print_xstats,
	.print_copt	= mercury_print_copt,
};
