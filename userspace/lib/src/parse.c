// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Sizes and rates given on command lines and in configuration: the one
 * parser every Mercury tool uses, so that "64k" is one number everywhere.
 *
 * Sizes follow tc (iproute2's get_size()), the tool the qdisc's own
 * options go through: k, m, g are binary multiples of bytes. Rates follow
 * tc's get_rate(): decimal multiples of bits per second, "bps" bytes per
 * second. The two are different units on purpose and are never mixed.
 * The qdisc's option grammar (qdisc_opts.c) reads its numbers here too,
 * with tc's decimal fractions of a size and tc's 0x and 0 prefixes.
 */
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* 10^n for the digits of a fraction (at most SIZE_FRAC_DIGITS) */
#define SIZE_FRAC_DIGITS	9

/*
 * The one size reader. frac: tc's decimal fraction (1.5m), taken only
 * when the product is whole bytes, so no byte is rounded away.
 */
static int parse_size(const char *s, uint64_t max, bool frac,
		      uint64_t *bytes)
{
	static const struct {
		const char *unit;
		uint64_t mult;		/* bytes per unit */
	} units[] = {
		{ "", 1 }, { "b", 1 },
		{ "k", 1ULL << 10 }, { "kb", 1ULL << 10 }, { "kib", 1ULL << 10 },
		{ "m", 1ULL << 20 }, { "mb", 1ULL << 20 }, { "mib", 1ULL << 20 },
		{ "g", 1ULL << 30 }, { "gb", 1ULL << 30 }, { "gib", 1ULL << 30 },
		/* tc's bit units: binary too, so always whole bytes */
		{ "kbit", 1ULL << 7 }, { "mbit", 1ULL << 17 },
		{ "gbit", 1ULL << 27 },
	};
	uint64_t num = 0, den = 1, part;
	unsigned long long v;
	const char *p;
	size_t i, n;
	char *end;

	if (!s || !bytes)
		return mercury_err(EINVAL, "size: NULL argument");
	/* strtoull would take a sign, spaces and 0x; none is a size */
	if (!isdigit((unsigned char)*s))
		return mercury_err(EINVAL,
				   "size \"%s\": not a whole number of bytes with an optional unit (b, k, m, g, kbit, ...)",
				   s);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return mercury_err(ERANGE, "size \"%s\": too large", s);
	if (frac && *end == '.' && isdigit((unsigned char)end[1])) {
		/* the digits after the point, trailing zeros dropped */
		p = ++end;
		while (isdigit((unsigned char)*end))
			end++;
		for (n = end - p; n && p[n - 1] == '0'; n--)
			;
		if (n > SIZE_FRAC_DIGITS)
			return mercury_err(EINVAL,
					   "size \"%s\": more than %d decimals",
					   s, SIZE_FRAC_DIGITS);
		for (i = 0; i < n; i++) {
			num = num * 10 + (uint64_t)(p[i] - '0');
			den *= 10;
		}
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].unit))
			continue;
		if (v > UINT64_MAX / units[i].mult)
			return mercury_err(ERANGE, "size \"%s\": too large", s);
		v *= units[i].mult;
		/* num < 10^9 and mult <= 2^30: no overflow */
		part = num * units[i].mult;
		if (part % den)
			return mercury_err(EINVAL,
					   "size \"%s\": not a whole number of bytes",
					   s);
		if (v > UINT64_MAX - part / den)
			return mercury_err(ERANGE, "size \"%s\": too large", s);
		v += part / den;
		if (v > max)
			return mercury_err(ERANGE,
					   "size \"%s\": above %llu bytes", s,
					   (unsigned long long)max);
		*bytes = v;
		return 0;
	}
	return mercury_err(EINVAL,
			   "size \"%s\": unknown unit \"%s\" (b, k, m, g: 1024 bytes; kbit, mbit, gbit)",
			   s, end);
}

MERCURY_API int mercury_parse_size(const char *s, uint64_t max,
				   uint64_t *bytes)
{
	return parse_size(s, max, false, bytes);
}

int mercury_parse_tc_size(const char *s, uint64_t max, uint64_t *bytes)
{
	return parse_size(s, max, true, bytes);
}

int mercury_parse_tc_uint(const char *s, uint64_t max, uint64_t *v)
{
	unsigned long long n;
	char *end;

	if (!s || !v)
		return mercury_err(EINVAL, "number: NULL argument");
	/* strtoull would take a sign and spaces, which tc's words never are */
	if (!isdigit((unsigned char)*s))
		return mercury_err(EINVAL, "number \"%s\": not a whole number",
				   s);
	errno = 0;
	n = strtoull(s, &end, 0);
	if (*end)
		return mercury_err(EINVAL, "number \"%s\": not a whole number",
				   s);
	if (errno == ERANGE || n > max)
		return mercury_err(ERANGE, "number \"%s\": above %llu", s,
				   (unsigned long long)max);
	*v = n;
	return 0;
}

MERCURY_API int mercury_parse_rate(const char *s, double bare_bits,
				   double *bps)
{
	static const struct {
		const char *unit;
		double mult;		/* bits per second */
	} units[] = {
		{ "", 0 }, { "bit", 1 },
		{ "kbit", 1e3 }, { "mbit", 1e6 }, { "gbit", 1e9 },
		{ "tbit", 1e12 },
		{ "k", 1e3 }, { "m", 1e6 }, { "g", 1e9 }, { "t", 1e12 },
		{ "kibit", 1024.0 }, { "mibit", 1048576.0 },
		{ "gibit", 1073741824.0 }, { "tibit", 1099511627776.0 },
		{ "bps", 8 }, { "kbps", 8e3 }, { "mbps", 8e6 }, { "gbps", 8e9 },
		{ "tbps", 8e12 },
	};
	size_t i;
	char *end;
	double v;

	if (!s || !bps || !(bare_bits > 0))
		return mercury_err(EINVAL, "rate: NULL argument or bare_bits <= 0");
	/* strtod would take "0x10", "inf", "nan" and leading spaces */
	if (!(isdigit((unsigned char)*s) || *s == '.') || strpbrk(s, "xX"))
		return mercury_err(EINVAL,
				   "rate \"%s\": not a number with an optional unit (bit, kbit, mbit, gbit, tbit, bps, ...)",
				   s);
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v))
		return mercury_err(ERANGE, "rate \"%s\": out of range", s);
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].unit))
			continue;
		v *= i ? units[i].mult : bare_bits;
		if (!isfinite(v))
			return mercury_err(ERANGE, "rate \"%s\": out of range", s);
		if (v <= 0)
			return mercury_err(EINVAL,
					   "rate \"%s\": must be above 0 and finite", s);
		*bps = v;
		return 0;
	}
	return mercury_err(EINVAL,
			   "rate \"%s\": unknown unit \"%s\" (bit, kbit, mbit, gbit, tbit: 1000; bps: bytes/s)",
			   s, end);
}
