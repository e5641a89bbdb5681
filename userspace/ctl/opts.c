// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Options as tc spells them ("levels 64 tag dscp memory_limit 1.5m"),
 * parsed by libmercury's grammar of them and checked against the same
 * ranges the kernel's netlink policy enforces, and the kernel's rules
 * across options, so a bad value is named here before anything is sent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mercury/mercury.h>

#include "mctl.h"

/* The kernel's defaults, from <linux/mercury.h> through libmercury. */
void mctl_opts_defaults(struct mercury_qdisc_opts *o)
{
	mercury_qdisc_opts_defaults(o, sizeof(*o));
}

static int mctl_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Tag sources as tc spells them, by TC_MERCURY_TAG_* value. */
static const char *const mctl_sources[] = {
	[TC_MERCURY_TAG_MARK]		= "mark",
	[TC_MERCURY_TAG_PRIORITY]	= "priority",
	[TC_MERCURY_TAG_DSCP]		= "dscp",
};

const char *mctl_source_name(uint8_t v)
{
	if (v < sizeof(mctl_sources) / sizeof(mctl_sources[0]))
		return mctl_sources[v];
	return "unknown";
}

/*
 * The options' grammar is libmercury's, the one tc's plugin links: the
 * words read alike in both. mercuryctl also checks each value against
 * the kernel's ranges, so a bad one is named before anything is sent.
 */
int mctl_parse_opts(int argc, char **argv, struct mercury_qdisc_opts *o,
		    char *err, size_t errlen)
{
	if (mercury_qdisc_opts_parse(argc, argv, MERCURY_QDISC_PARSE_RANGES,
				     o, sizeof(*o)))
		return mctl_err(err, errlen, "%s", mercury_last_error());
	return 0;
}

/* Copy the options set in @o over @base (what the kernel does in change). */
void mctl_opts_merge(struct mercury_qdisc_opts *base,
		     const struct mercury_qdisc_opts *o)
{
#define MCTL_TAKE(attr, field) \
	do { if (o->set & MCTL_BIT(attr)) base->field = o->field; } while (0)
	MCTL_TAKE(TCA_MERCURY_LEVELS, levels);
	MCTL_TAKE(TCA_MERCURY_TAG_SOURCE, source);
	MCTL_TAKE(TCA_MERCURY_TAG_SHIFT, shift);
	MCTL_TAKE(TCA_MERCURY_TAG_MASK, mask);
	MCTL_TAKE(TCA_MERCURY_UNTAGGED, untagged);
	MCTL_TAKE(TCA_MERCURY_UNTAGGED_SHARE, share);
	MCTL_TAKE(TCA_MERCURY_FLOW_ORDER, flow_order);
	MCTL_TAKE(TCA_MERCURY_FLOWS, flows);
	MCTL_TAKE(TCA_MERCURY_LIMIT, limit);
	MCTL_TAKE(TCA_MERCURY_MEMORY_LIMIT, memory_limit);
	MCTL_TAKE(TCA_MERCURY_QUANTUM, quantum);
	MCTL_TAKE(TCA_MERCURY_BYPASS, bypass);
	MCTL_TAKE(TCA_MERCURY_FLOW_LIMIT, flow_limit);
#undef MCTL_TAKE
	base->set |= o->set;
}

/* The kernel's checks across options, on a complete configuration. */
int mctl_check_opts(const struct mercury_qdisc_opts *o, char *err,
		    size_t errlen)
{
	if (o->levels > o->mask)
		return mctl_err(err, errlen,
				"levels %" PRIu32 " exceeds the largest tag mask 0x%" PRIx32 " can give",
				o->levels, o->mask);
	if (o->source == TC_MERCURY_TAG_DSCP && !((0x3f >> o->shift) & o->mask))
		return mctl_err(err, errlen,
				"shift and mask leave no DSCP bit for the tag");
	if (o->share && o->untagged != TC_MERCURY_UNTAGGED_LAST)
		return mctl_err(err, errlen,
				"untagged_share needs untagged last");
	return 0;
}

/* The options of @which (MCTL_BIT()s) in tc's words, as libmercury
 * formats them, so that they parse back: "levels 64 memory_limit 32Mb".
 */
void mctl_sprint_opts(char *buf, size_t len,
		      const struct mercury_qdisc_opts *o, uint32_t which)
{
	size_t used = 0;
	unsigned int a;
	int k;

	buf[0] = '\0';
	for (a = 1; a <= TCA_MERCURY_MAX && used < len; a++) {
		if (!(which & MCTL_BIT(a)))
			continue;
		if (used)
			buf[used++] = ' ';
		k = mercury_qdisc_opt_format(o, a, buf + used, len - used);
		if (k < 0)
			break;
		used += k;
	}
	if (used >= len)
		buf[len - 1] = '\0';
}

/* As tc prints handles: "1:", "1:a", "root". */
void mctl_sprint_handle(char *buf, size_t len, uint32_t handle)
{
	if (handle == 0xffffffffu)
		snprintf(buf, len, "root");
	else if (!(handle & 0xffff))
		snprintf(buf, len, "%" PRIx32 ":", handle >> 16);
	else
		snprintf(buf, len, "%" PRIx32 ":%" PRIx32, handle >> 16,
			 handle & 0xffff);
}
