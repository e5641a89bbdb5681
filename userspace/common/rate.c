// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * --bandwidth in every tool: libmercury's rate grammar (tc's units) with
 * one meaning of a bare number, bit/s as in tc(8). mercury-place once read
 * a bare number as bytes/s; it refuses one instead, so that an old command
 * line fails with the fix in the message rather than running 8x off.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
