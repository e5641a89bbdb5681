// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Small helpers shared by every file of mercury-place. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "place.h"

int mp_set_err(struct mp_err *err, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	errno = -ret;
	return ret;
}

double mp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

char *mp_strdup(const char *s)
{
	char *r = strdup(s ? s : "");

	if (!r) {
		fprintf(stderr, "mercury-place: out of memory\n");
		exit(1);
	}
	return r;
}

/* Allocation failure is not a data error: stop cleanly instead of
 * threading ENOMEM through every loop of the solver.
 */
void *mp_calloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (!p) {
		fprintf(stderr, "mercury-place: out of memory\n");
		exit(1);
	}
	return p;
}
