// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Option values with units, one reading for every tool:
 *  - rates (--bandwidth): libmercury's rate grammar (tc's units) with one
 *    meaning of a bare number, bit/s as in tc(8). mercury-place once read
 *    a bare number as bytes/s; it refuses one instead, so that an old
 *    command line fails with the fix in the message rather than running
 *    8x off;
 *  - sizes: libmercury's (mercury_parse_size(): "64k" is 65536 bytes here
 *    as in tc and mercuryctl);
 *  - durations: a number of seconds with s, ms, us or ns, which no
 *    library grammar has.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mercury/mercury.h>

#include "tools.h"

int mt_parse_rate(const char *s, int bare_ok, double *bps, char *err,
		  size_t errlen)
{
	char *end;

	if (s && !bare_ok) {
		strtod(s, &end);
		if (end != s && !*end) {
			snprintf(err, errlen,
				 "'%s' needs a unit: 10gbit is bit/s, 1.25gbps bytes/s",
				 s);
			return -EINVAL;
		}
	}
	if (mercury_parse_rate(s, 1, bps)) {
		snprintf(err, errlen,
			 "'%s' is not a rate > 0 (e.g. 10gbit, 100mbit, 1.25gbps)",
			 s);
		return -EINVAL;
	}
	return 0;
}

/* A finite number >= 0 followed by s, ms, us, ns or nothing (seconds). */
int mt_parse_seconds(const char *s, double *sec)
{
	static const struct {
		const char *name;
		double mult;
	} u[] = {
		{ "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "us", 1e-6 },
		{ "ns", 1e-9 },
	};
	char *end;
	double v;
	size_t i;

	/* strtod would take "0x10", "inf", "nan" and a leading space */
	if (!s || !(isdigit((unsigned char)*s) || *s == '.') ||
	    strpbrk(s, "xX"))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v))
		return -EINVAL;
	for (i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		if (!strcasecmp(end, u[i].name)) {
			*sec = v * u[i].mult;
			return 0;
		}
	}
	return -EINVAL;
}

/* Sizes 1..2^60 bytes; 0 is an error (callers that allow it say so). */
int mt_parse_bytes(const char *s, uint64_t *bytes)
{
	uint64_t v;

	if (mercury_parse_size(s, 1ULL << 60, &v) || !v)
		return -EINVAL;
	*bytes = v;
	return 0;
}
