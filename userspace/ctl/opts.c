// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Options as tc spells them ("levels 64 tag dscp memory_limit 4Mb"),
 * checked against the same ranges the kernel's netlink policy enforces,
 * so a bad value is named here before anything is sent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mercury/mercury.h>

#include "mctl.h"

void mctl_opts_defaults(struct mercury_qdisc_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->levels = MCTL_DEF_LEVELS;
	o->mask = MCTL_DEF_MASK;
	o->flows = MCTL_DEF_FLOWS;
	o->limit = MCTL_DEF_LIMIT;
	o->memory_limit = MCTL_DEF_MEMORY_LIMIT;
	o->quantum = MCTL_DEF_QUANTUM;
	o->source = TC_MERCURY_TAG_MARK;
	o->untagged = TC_MERCURY_UNTAGGED_FIRST;
	o->flow_order = 1;
	o->bypass = 1;
}

static int mctl_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A whole unsigned number, decimal or 0x hex, that fits in 32 bits. */
static int mctl_parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > UINT32_MAX)
		return -EINVAL;
	*out = v;
	return 0;
}

/*
 * Sizes as tc reads them, by libmercury's one size parser (k, m, g are
 * 1024 as in tc; kbit, mbit, gbit bits), so "64k" is one number in every
 * Mercury tool. The qdisc takes u32 sizes: larger ones are refused, not
 * truncated.
 */
int mctl_parse_size(const char *s, uint32_t *out)
{
	uint64_t v;

	if (mercury_parse_size(s, UINT32_MAX, &v))
		return -EINVAL;
	*out = v;
	return 0;
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

static int mctl_parse_source(const char *s, uint8_t *out)
{
	uint8_t i;

	for (i = 0; i < sizeof(mctl_sources) / sizeof(mctl_sources[0]); i++) {
		if (!strcmp(s, mctl_sources[i])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* A keyword option: w0 gives 0, w1 gives 1. */
static int mctl_parse_choice(const char *s, const char *w0, const char *w1,
			     uint8_t *out)
{
	if (!strcmp(s, w0))
		*out = 0;
	else if (!strcmp(s, w1))
		*out = 1;
	else
		return -EINVAL;
	return 0;
}

int mctl_parse_opts(int argc, char **argv, struct mercury_qdisc_opts *o,
		    char *err, size_t errlen)
{
	const char *name, *val;
	uint32_t v;
	int i;

	memset(o, 0, sizeof(*o));
	for (i = 0; i < argc; i += 2) {
		name = argv[i];
		if (i + 1 >= argc)
			return mctl_err(err, errlen, "option %s needs a value",
					name);
		val = argv[i + 1];
		if (!strcmp(name, "levels")) {
			if (mctl_parse_u32(val, &v) || v < 1 ||
			    v > TC_MERCURY_MAX_LEVELS)
				goto bad_range;
			o->levels = v;
			o->set |= MCTL_BIT(TCA_MERCURY_LEVELS);
		} else if (!strcmp(name, "tag")) {
			if (mctl_parse_source(val, &o->source))
				goto bad_range;
			o->set |= MCTL_BIT(TCA_MERCURY_TAG_SOURCE);
		} else if (!strcmp(name, "shift")) {
			if (mctl_parse_u32(val, &v) || v > 31)
				goto bad_range;
			o->shift = v;
			o->set |= MCTL_BIT(TCA_MERCURY_TAG_SHIFT);
		} else if (!strcmp(name, "mask")) {
			if (mctl_parse_u32(val, &v) || !v)
				goto bad_range;
			o->mask = v;
			o->set |= MCTL_BIT(TCA_MERCURY_TAG_MASK);
		} else if (!strcmp(name, "untagged")) {
			if (mctl_parse_choice(val, "first", "last",
					      &o->untagged))
				goto bad_range;
			o->set |= MCTL_BIT(TCA_MERCURY_UNTAGGED);
		} else if (!strcmp(name, "untagged_share")) {
			if (mctl_parse_u32(val, &v) ||
			    v > TC_MERCURY_MAX_SHARE)
				goto bad_range;
			o->share = v;
			o->set |= MCTL_BIT(TCA_MERCURY_UNTAGGED_SHARE);
		} else if (!strcmp(name, "flow_order")) {
			if (mctl_parse_choice(val, "off", "on",
					      &o->flow_order))
				goto bad_range;
			o->set |= MCTL_BIT(TCA_MERCURY_FLOW_ORDER);
		} else if (!strcmp(name, "flows")) {
			if (mctl_parse_u32(val, &v) || v < 1 ||
			    v > TC_MERCURY_MAX_FLOWS)
				goto bad_range;
			o->flows = v;
			o->set |= MCTL_BIT(TCA_MERCURY_FLOWS);
		} else if (!strcmp(name, "limit")) {
			if (mctl_parse_u32(val, &v) || !v)
				goto bad_range;
			o->limit = v;
			o->set |= MCTL_BIT(TCA_MERCURY_LIMIT);
		} else if (!strcmp(name, "memory_limit")) {
			if (mctl_parse_size(val, &v) || !v ||
			    v > TC_MERCURY_MAX_MEMORY_LIMIT)
				goto bad_range;
			o->memory_limit = v;
			o->set |= MCTL_BIT(TCA_MERCURY_MEMORY_LIMIT);
		} else if (!strcmp(name, "quantum")) {
			if (mctl_parse_size(val, &v) || v < MCTL_MIN_QUANTUM ||
			    v > MCTL_MAX_QUANTUM)
				goto bad_range;
			o->quantum = v;
			o->set |= MCTL_BIT(TCA_MERCURY_QUANTUM);
		} else if (!strcmp(name, "bypass")) {
			if (mctl_parse_choice(val, "off", "on", &o->bypass))
				goto bad_range;
			o->set |= MCTL_BIT(TCA_MERCURY_BYPASS);
		} else {
			return mctl_err(err, errlen, "unknown option '%s'",
					name);
		}
	}
	return 0;

bad_range:
	{
		/* each option's range, as tc-mercury(8) gives it */
		static const struct {
			const char *name, *rule;
		} rules[] = {
			{ "levels", "1..65534" },
			{ "tag", "mark, priority or dscp" },
			{ "shift", "0..31" },
			{ "mask", "a non-zero u32" },
			{ "untagged", "first or last" },
			{ "untagged_share", "0..90 percent" },
			{ "flow_order", "on or off" },
			{ "flows", "1..65536" },
			{ "limit", "at least 1 packet" },
			{ "memory_limit", "1 byte..2 GiB (a size: 4Mb, 512kb)" },
			{ "quantum", "256..1048576 bytes" },
			{ "bypass", "on or off" },
		};
		size_t k;

		for (k = 0; k < sizeof(rules) / sizeof(rules[0]); k++)
			if (!strcmp(rules[k].name, name))
				break;
		return mctl_err(err, errlen, "%s must be %s, not '%s'", name,
				rules[k].rule, val);
	}
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

/* Exact sizes that parse back: 32Mb, 64Kb, 3028b. */
void mctl_sprint_size(char *buf, size_t len, uint32_t bytes)
{
	if (bytes && !(bytes % (1u << 20)))
		snprintf(buf, len, "%" PRIu32 "Mb", bytes >> 20);
	else if (bytes && !(bytes % 1024))
		snprintf(buf, len, "%" PRIu32 "Kb", bytes >> 10);
	else
		snprintf(buf, len, "%" PRIu32 "b", bytes);
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
