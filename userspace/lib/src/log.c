// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Logging, error messages and option checks for libmercury. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static mercury_log_fn log_fn;
static void *log_ctx;

/* One message per thread so concurrent failures do not mix their reasons. */
static __thread char last_error[256];

MERCURY_API const char *mercury_version(void)
{
	return "0.1";
}

MERCURY_API void mercury_set_log(mercury_log_fn fn, void *ctx)
{
	log_ctx = ctx;
	log_fn = fn;
}

MERCURY_API const char *mercury_last_error(void)
{
	return last_error;
}

static void vlog(enum mercury_log_level level, const char *fmt, va_list ap,
		 char *buf, size_t len)
{
	vsnprintf(buf, len, fmt, ap);
	if (log_fn)
		log_fn(level, buf, log_ctx);
}

void mercury_pr(enum mercury_log_level level, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap, buf, sizeof(buf));
	va_end(ap);
}

int mercury_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(MERCURY_LOG_WARN, fmt, ap, last_error, sizeof(last_error));
	va_end(ap);
	errno = err;
	return -err;
}

int mercury_opts_check(const void *opts, size_t user_sz, size_t our_sz,
		       const char *name)
{
	const char *p = opts;
	size_t i;

	if (user_sz < sizeof(size_t))
		return mercury_err(EINVAL, "%s: sz %zu is too small", name,
				   user_sz);
	for (i = our_sz; i < user_sz; i++)
		if (p[i])
			return mercury_err(EINVAL,
					   "%s: unknown non-zero field at byte %zu",
					   name, i);
	return 0;
}
