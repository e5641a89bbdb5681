// SPDX-License-Identifier: GPL-2.0
/*
 * q_mercury.c	tc support for the Mercury layer-priority qdisc.
 *
 * Loaded by tc as $TC_LIB_DIR/q_mercury.so. Parses the options into nested
 * TCA_MERCURY_* attributes with libmercury's grammar of them (only the
 * options the user gave, so "change" keeps the rest), prints them back in
 * the same syntax, and prints the qdisc's and each level's statistics.
 * Ranges are the kernel's to check: its extack message names the option
 * that was wrong.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utils.h"
#include "tc_util.h"

#include <linux/mercury.h>
#include <mercury/mercury.h>

static void mercury_explain(void)
{
	fprintf(stderr,
		"Usage: ... mercury [ levels NUMBER ] [ tag { mark | priority | dscp } ]\n"
		"                   [ shift BITS ] [ mask MASK ]\n"
		"                   [ untagged { first | last } ] [ untagged_share PERCENT ]\n"
		"                   [ flow_order { on | off } ] [ flows NUMBER ]\n"
		"                   [ limit PACKETS ] [ memory_limit BYTES ] [ quantum BYTES ]\n"
		"                   [ bypass { on | off } ] [ flow_limit PACKETS ]\n"
		"Tag = (mark, priority or DSCP >> shift) & mask; tag 1 is the most urgent,\n"
		"tags above levels count as levels, tag 0 is untagged.\n");
}

/* Tag sources by their TC_MERCURY_TAG_* value, for printing. */
static const char * const mercury_sources[] = {
	[TC_MERCURY_TAG_MARK]		= "mark",
	[TC_MERCURY_TAG_PRIORITY]	= "priority",
	[TC_MERCURY_TAG_DSCP]		= "dscp",
};

/*
 * The words are read by libmercury's grammar of the options, linked into
 * this plugin (the Makefile), the one mercuryctl uses: "memory_limit
 * 1.5m" is one number in both. Only the syntax is checked here (a value
 * its field cannot hold, shift 300, is refused); ranges are the kernel's
 * to check, and its extack message names the option. Only the options
 * given are sent, so "change" keeps the rest.
 */
static int mercury_parse_opt(struct qdisc_util *qu, int argc, char **argv,
			     struct nlmsghdr *n, const char *dev)
{
	struct mercury_qdisc_opts o;
	int i, err, len = 0;
	char buf[256];

	/* tc's convention: "help" where an option may stand */
	for (i = 0; i < argc; i += 2) {
		if (strcmp(argv[i], "help") == 0) {
			mercury_explain();
			return -1;
		}
	}
	err = mercury_qdisc_opts_parse(argc, argv, 0, &o, sizeof(o));
	/* an option without its value: tc's own message and exit status */
	if (err == -ENODATA)
		incomplete_command();
	if (!err) {
		len = mercury_qdisc_opts_encode(&o, buf, sizeof(buf));
		if (len < 0)
			err = len;
	}
	if (err) {
		fprintf(stderr, "mercury: %s\n", mercury_last_error());
		mercury_explain();
		return -1;
	}
	return addattr_l(n, 1024, TCA_OPTIONS | NLA_F_NESTED, buf, len);
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
	if (tb[TCA_MERCURY_FLOW_LIMIT])
		print_uint(PRINT_ANY, "flow_limit", "flow_limit %u ",
			   mercury_rta_u32(tb, TCA_MERCURY_FLOW_LIMIT));
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
	print_u64(PRINT_ANY, "drops_flow_limit", " drops_flow_limit %llu",
		  st->drops_flow_limit);
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
