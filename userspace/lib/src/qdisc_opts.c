// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The qdisc's options in words and in a request: the one grammar of
 * "tc qdisc add ... mercury levels 64 memory_limit 1.5m ...", its
 * defaults, its printed form and the TCA_OPTIONS attributes it becomes,
 * from one table of the TCA_MERCURY_* attributes.
 *
 * tc's plugin (tc-plugin/q_mercury.c) links this file, parse.c and log.c
 * into q_mercury.so, and mercuryctl (options, the boot-time "apply")
 * calls it through libmercury, so the two read and send every word
 * alike. Hence nothing here but libc and the UAPI headers: no libnl
 * (that is qdisc.c, which decodes what the kernel reports), no json-c.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <linux/mercury.h>
#include <linux/netlink.h>

#include "internal.h"

static const char *const source_words[] = {
	[TC_MERCURY_TAG_MARK]		= "mark",
	[TC_MERCURY_TAG_PRIORITY]	= "priority",
	[TC_MERCURY_TAG_DSCP]		= "dscp",
	NULL
};

static const char *const untagged_words[] = {
	[TC_MERCURY_UNTAGGED_FIRST]	= "first",
	[TC_MERCURY_UNTAGGED_LAST]	= "last",
	NULL
};

static const char *const switch_words[] = { "off", "on", NULL };

/*
 * In attribute order. min and max are sch_mercury's netlink policy
 * (what MERCURY_QDISC_PARSE_RANGES checks); the kernel stays the judge.
 */
#define ROW(a, n, b, k, f, lo, hi, u, w)				\
	[(a) - 1] = { .name = n, .attr = a, .bits = b, .kind = k,	\
		      .off = offsetof(struct mercury_qdisc_opts, f),	\
		      .min = lo, .max = hi, .unit = u, .words = w }
const struct mercury_qdisc_attr mercury_qdisc_attrs[] = {
	ROW(TCA_MERCURY_LEVELS, "levels", 32, MERCURY_QDISC_NUM, levels,
	    1, TC_MERCURY_MAX_LEVELS, "", NULL),
	ROW(TCA_MERCURY_TAG_SOURCE, "tag", 8, MERCURY_QDISC_WORD, source,
	    0, __TC_MERCURY_TAG_MAX - 1, "", source_words),
	ROW(TCA_MERCURY_TAG_SHIFT, "shift", 8, MERCURY_QDISC_NUM, shift,
	    0, TC_MERCURY_MAX_SHIFT, " bits", NULL),
	ROW(TCA_MERCURY_TAG_MASK, "mask", 32, MERCURY_QDISC_HEX, mask,
	    1, UINT32_MAX, "", NULL),
	ROW(TCA_MERCURY_UNTAGGED, "untagged", 8, MERCURY_QDISC_WORD, untagged,
	    0, __TC_MERCURY_UNTAGGED_MAX - 1, "", untagged_words),
	ROW(TCA_MERCURY_UNTAGGED_SHARE, "untagged_share", 8, MERCURY_QDISC_NUM,
	    share, 0, TC_MERCURY_MAX_SHARE, " percent", NULL),
	ROW(TCA_MERCURY_FLOW_ORDER, "flow_order", 8, MERCURY_QDISC_WORD,
	    flow_order, 0, 1, "", switch_words),
	ROW(TCA_MERCURY_FLOWS, "flows", 32, MERCURY_QDISC_NUM, flows,
	    1, TC_MERCURY_MAX_FLOWS, "", NULL),
	ROW(TCA_MERCURY_LIMIT, "limit", 32, MERCURY_QDISC_NUM, limit,
	    1, UINT32_MAX, " packets", NULL),
	ROW(TCA_MERCURY_MEMORY_LIMIT, "memory_limit", 32, MERCURY_QDISC_SIZE,
	    memory_limit, 1, TC_MERCURY_MAX_MEMORY_LIMIT, " bytes", NULL),
	ROW(TCA_MERCURY_QUANTUM, "quantum", 32, MERCURY_QDISC_SIZE, quantum,
	    TC_MERCURY_MIN_QUANTUM, TC_MERCURY_MAX_QUANTUM, " bytes", NULL),
	ROW(TCA_MERCURY_BYPASS, "bypass", 8, MERCURY_QDISC_WORD, bypass,
	    0, 1, "", switch_words),
	ROW(TCA_MERCURY_FLOW_LIMIT, "flow_limit", 32, MERCURY_QDISC_NUM,
	    flow_limit, 0, UINT32_MAX, " packets", NULL),
};
#undef ROW

const size_t mercury_qdisc_nattrs =
	sizeof(mercury_qdisc_attrs) / sizeof(mercury_qdisc_attrs[0]);

_Static_assert(sizeof(mercury_qdisc_attrs) / sizeof(mercury_qdisc_attrs[0]) ==
	       TCA_MERCURY_MAX,
	       "every TCA_MERCURY_* attribute has its row");

MERCURY_API void mercury_qdisc_opts_defaults(struct mercury_qdisc_opts *o,
					     size_t sz)
{
	const struct mercury_qdisc_opts d = {
		.levels		= TC_MERCURY_DEF_LEVELS,
		.mask		= TC_MERCURY_DEF_MASK,
		.flows		= TC_MERCURY_DEF_FLOWS,
		.limit		= TC_MERCURY_DEF_LIMIT,
		.memory_limit	= TC_MERCURY_DEF_MEMORY_LIMIT,
		.quantum	= TC_MERCURY_DEF_QUANTUM,
		.source		= TC_MERCURY_DEF_TAG_SOURCE,
		.shift		= TC_MERCURY_DEF_SHIFT,
		.untagged	= TC_MERCURY_DEF_UNTAGGED,
		.share		= TC_MERCURY_DEF_SHARE,
		.flow_order	= TC_MERCURY_DEF_FLOW_ORDER,
		.bypass		= TC_MERCURY_DEF_BYPASS,
		.flow_limit	= TC_MERCURY_DEF_FLOW_LIMIT,
	};

	if (!o)
		return;
	/* a caller built against an older header knows fewer fields */
	memset(o, 0, sz);
	memcpy(o, &d, sz < sizeof(d) ? sz : sizeof(d));
}

static const struct mercury_qdisc_attr *attr_by_name(const char *name)
{
	size_t i;

	for (i = 0; i < mercury_qdisc_nattrs; i++)
		if (!strcmp(mercury_qdisc_attrs[i].name, name))
			return &mercury_qdisc_attrs[i];
	return NULL;
}

/* "a, b or c" */
static void sprint_words(char *buf, size_t len, const char *const *w)
{
	size_t i, n = 0;
	int k;

	buf[0] = '\0';
	for (i = 0; w[i]; i++) {
		k = snprintf(buf + n, len - n, "%s%s",
			     !i ? "" : w[i + 1] ? ", " : " or ", w[i]);
		if (k < 0 || (size_t)k >= len - n)
			return;
		n += k;
	}
}

/* The one message for a bad value: the option, its rule, the word. */
static int bad_value(const struct mercury_qdisc_attr *a, const char *val)
{
	char rule[64];

	switch (a->kind) {
	case MERCURY_QDISC_WORD:
		sprint_words(rule, sizeof(rule), a->words);
		break;
	case MERCURY_QDISC_HEX:
		snprintf(rule, sizeof(rule), "0x%x..0x%x%s", a->min, a->max,
			 a->unit);
		break;
	case MERCURY_QDISC_SIZE:
		snprintf(rule, sizeof(rule), "%u..%u%s (a size: 512kb, 1.5m)",
			 a->min, a->max, a->unit);
		break;
	default:
		snprintf(rule, sizeof(rule), "%u..%u%s", a->min, a->max,
			 a->unit);
	}
	return mercury_err(EINVAL, "%s must be %s, not '%s'", a->name, rule,
			   val);
}

static int parse_value(const struct mercury_qdisc_attr *a, const char *val,
		       unsigned int flags, uint32_t *out)
{
	/* what the field holds; tc's plugin sends anything that fits */
	uint64_t max = a->bits == 8 ? UINT8_MAX : UINT32_MAX, v;
	size_t i;

	switch (a->kind) {
	case MERCURY_QDISC_WORD:
		/* tc's words are lower case: "DSCP" is not one */
		for (i = 0; a->words[i] && strcmp(a->words[i], val); i++)
			;
		if (!a->words[i])
			return -EINVAL;
		v = i;
		break;
	case MERCURY_QDISC_SIZE:
		if (mercury_parse_tc_size(val, max, &v))
			return -EINVAL;
		break;
	default:
		if (mercury_parse_tc_uint(val, max, &v))
			return -EINVAL;
	}
	if ((flags & MERCURY_QDISC_PARSE_RANGES) && (v < a->min || v > a->max))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

MERCURY_API int mercury_qdisc_opts_parse(int argc, char *const argv[],
					 unsigned int flags,
					 struct mercury_qdisc_opts *o,
					 size_t sz)
{
	struct mercury_qdisc_opts q = { 0 };
	const struct mercury_qdisc_attr *a;
	char *field;
	uint32_t v;
	int i;

	if (!o || argc < 0 || (argc && !argv) ||
	    sz < offsetof(struct mercury_qdisc_opts, levels) ||
	    (flags & ~(unsigned int)MERCURY_QDISC_PARSE_RANGES))
		return mercury_err(EINVAL, "qdisc options: bad argument");
	for (i = 0; i < argc; i += 2) {
		if (!argv[i])
			return mercury_err(EINVAL, "qdisc options: NULL word");
		a = attr_by_name(argv[i]);
		if (!a)
			return mercury_err(ENOENT, "unknown option '%s'",
					   argv[i]);
		if (i + 1 >= argc || !argv[i + 1])
			return mercury_err(ENODATA, "option %s needs a value",
					   argv[i]);
		if (parse_value(a, argv[i + 1], flags, &v))
			return bad_value(a, argv[i + 1]);
		field = (char *)&q + a->off;
		if (a->bits == 32)
			*(uint32_t *)field = v;
		else
			*(uint8_t *)field = (uint8_t)v;
		q.set |= 1u << a->attr;
	}
	/* a caller built against an older header knows fewer fields */
	memset(o, 0, sz);
	memcpy(o, &q, sz < sizeof(q) ? sz : sizeof(q));
	return 0;
}

MERCURY_API int mercury_qdisc_opt_format(const struct mercury_qdisc_opts *o,
					 unsigned int attr, char *buf,
					 size_t len)
{
	const struct mercury_qdisc_attr *a;
	const char *field;
	uint32_t v;
	size_t n;

	if (!o || (!buf && len) || attr < 1 || attr > mercury_qdisc_nattrs)
		return mercury_err(EINVAL, "qdisc option %u: unknown", attr);
	a = &mercury_qdisc_attrs[attr - 1];
	field = (const char *)o + a->off;
	v = a->bits == 32 ? *(const uint32_t *)field : *(const uint8_t *)field;
	switch (a->kind) {
	case MERCURY_QDISC_WORD:
		for (n = 0; a->words[n] && n < v; n++)
			;
		/* a value from a newer kernel prints as its number */
		if (a->words[n])
			return snprintf(buf, len, "%s %s", a->name, a->words[n]);
		return snprintf(buf, len, "%s %u", a->name, v);
	case MERCURY_QDISC_HEX:
		return snprintf(buf, len, "%s 0x%x", a->name, v);
	case MERCURY_QDISC_SIZE:
		/* the largest unit that is exact, so it parses back alike */
		if (v && !(v % (1u << 20)))
			return snprintf(buf, len, "%s %uMb", a->name, v >> 20);
		if (v && !(v % 1024))
			return snprintf(buf, len, "%s %uKb", a->name, v >> 10);
		return snprintf(buf, len, "%s %ub", a->name, v);
	default:
		return snprintf(buf, len, "%s %u", a->name, v);
	}
}

MERCURY_API int mercury_qdisc_opts_encode(const struct mercury_qdisc_opts *o,
					  void *buf, size_t len)
{
	const struct mercury_qdisc_attr *a;
	struct nlattr nla;
	size_t n = 0, need;
	const char *field;
	char *p = buf;

	if (!o || (!buf && len))
		return mercury_err(EINVAL, "qdisc options: bad argument");
	/* laid out as nla_put() and tc's addattr*() lay them: padded to 4 */
	for (a = mercury_qdisc_attrs;
	     a < mercury_qdisc_attrs + mercury_qdisc_nattrs; a++) {
		if (!(o->set & (1u << a->attr)))
			continue;
		nla.nla_len = NLA_HDRLEN + a->bits / 8;
		nla.nla_type = a->attr;
		need = NLA_ALIGN(nla.nla_len);
		if (n + need <= len) {
			field = (const char *)o + a->off;
			memset(p + n, 0, need);
			memcpy(p + n, &nla, sizeof(nla));
			memcpy(p + n + NLA_HDRLEN, field, a->bits / 8);
		}
		n += need;
	}
	if (n > len)
		return mercury_err(ENOSPC, "qdisc options: %zu bytes, %zu given",
				   n, len);
	return (int)n;
}
