// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Option values. Sizes and rates are libmercury's (mercury_parse_size(),
 * mercury_parse_rate()): "64k" is 65536 bytes here as in tc, mercuryctl
 * and mercury-apply, and "10gbit" 10^10 bit/s as in tc. Only durations
 * are the simulator's own.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mercury/mercury.h>

#include "msim.h"

int msim_parse_rate(const char *s, double *bps)
{
	/*
	 * a bare number is bit/s, as mt_parse_rate() reads --bandwidth; this
	 * copy stays only while mercury-ps compiles this file without the
	 * tools' archive
	 */
	return mercury_parse_rate(s, 1, bps) ? -EINVAL : 0;
}

/* A finite number >= 0 followed by s, ms, us, ns or nothing (seconds). */
int msim_parse_seconds(const char *s, double *sec)
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
int msim_parse_bytes(const char *s, uint64_t *bytes)
{
	uint64_t v;

	if (mercury_parse_size(s, 1ULL << 60, &v) || !v)
		return -EINVAL;
	*bytes = v;
	return 0;
}
