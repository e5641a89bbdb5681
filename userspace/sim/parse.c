// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Option value parsers: a number with an optional unit suffix. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "msim.h"

struct unit {
	const char *name;
	double mult;
};

/* A finite number followed by one of units (case-insensitive) or none
 * (when the "" unit is listed).  Rejects empty, trailing garbage, hex. */
static int parse_with_unit(const char *s, const struct unit *units,
			   double *out)
{
	char *end;
	double v;
	int i;

	if (!s || !*s || isspace((unsigned char)*s))
		return -EINVAL;
	/* strtod would take "0x10", "inf" and "nan"; none is a rate. */
	if (strpbrk(s, "xX") || !(isdigit((unsigned char)*s) || *s == '.' ||
				  *s == '-' || *s == '+'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v))
		return -EINVAL;
	for (i = 0; units[i].name; i++) {
		if (!strcasecmp(end, units[i].name)) {
			*out = v * units[i].mult;
			return isfinite(*out) ? 0 : -EINVAL;
		}
	}
	return -EINVAL;
}

int msim_parse_rate(const char *s, double *bps)
{
	static const struct unit u[] = {
		{ "", 1 }, { "bit", 1 }, { "bps", 1 },
		{ "k", 1e3 }, { "kbit", 1e3 }, { "kbps", 1e3 },
		{ "m", 1e6 }, { "mbit", 1e6 }, { "mbps", 1e6 },
		{ "g", 1e9 }, { "gbit", 1e9 }, { "gbps", 1e9 },
		{ "t", 1e12 }, { "tbit", 1e12 }, { "tbps", 1e12 },
		{ NULL, 0 },
	};
	double v;

	if (parse_with_unit(s, u, &v) || v <= 0)
		return -EINVAL;
	*bps = v;
	return 0;
}

int msim_parse_seconds(const char *s, double *sec)
{
	static const struct unit u[] = {
		{ "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "us", 1e-6 },
		{ "ns", 1e-9 }, { NULL, 0 },
	};
	double v;

	if (parse_with_unit(s, u, &v) || v < 0)
		return -EINVAL;
	*sec = v;
	return 0;
}

int msim_parse_bytes(const char *s, uint64_t *bytes)
{
	static const struct unit u[] = {
		{ "", 1 }, { "b", 1 },
		{ "k", 1e3 }, { "kb", 1e3 }, { "kib", 1024.0 },
		{ "m", 1e6 }, { "mb", 1e6 }, { "mib", 1048576.0 },
		{ "g", 1e9 }, { "gb", 1e9 }, { "gib", 1073741824.0 },
		{ NULL, 0 },
	};
	double v;

	if (parse_with_unit(s, u, &v) || v < 1 || v > 1e18 ||
	    v != floor(v))
		return -EINVAL;
	*bytes = (uint64_t)v;
	return 0;
}
