// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Logging, error messages and option checks for libmercury. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/*
 * The callback and its context change together: a thread logging while
 * another installs a new callback gets either the old pair or the new one,
 * never the new function with the old context.
 */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static mercury_log_fn log_fn;
static void *log_ctx;

/* One message per thread so concurrent failures do not mix their reasons. */
static __thread char last_error[256];

MERCURY_API const char *mercury_version(void)
{
	return MERCURY_VERSION_STRING;
}

MERCURY_API mercury_log_fn mercury_set_log(mercury_log_fn fn, void *ctx)
{
	mercury_log_fn old;

	pthread_mutex_lock(&log_lock);
	old = log_fn;
	log_fn = fn;
	log_ctx = ctx;
	pthread_mutex_unlock(&log_lock);
	return old;
}

static mercury_log_fn log_get(void **ctx)
{
	mercury_log_fn fn;

	pthread_mutex_lock(&log_lock);
	fn = log_fn;
	*ctx = log_ctx;
	pthread_mutex_unlock(&log_lock);
	return fn;
}

bool mercury_log_enabled(void)
{
	void *ctx;

	return log_get(&ctx) != NULL;
}

MERCURY_API const char *mercury_last_error(void)
{
	return last_error;
}

/* Format into buf; with a callback installed and log set, pass it on. */
static void vlog(enum mercury_log_level level, bool log, const char *fmt,
		 va_list ap, char *buf, size_t len)
{
	mercury_log_fn fn;
	void *ctx;

	vsnprintf(buf, len, fmt, ap);
	fn = log ? log_get(&ctx) : NULL;
	if (fn)
		fn(level, buf, ctx);
}

void mercury_pr(enum mercury_log_level level, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	void *ctx;

	if (!log_get(&ctx))
		return;
	va_start(ap, fmt);
	vlog(level, true, fmt, ap, buf, sizeof(buf));
	va_end(ap);
}

int mercury_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(MERCURY_LOG_WARN, true, fmt, ap, last_error, sizeof(last_error));
	va_end(ap);
	errno = err;
	return -err;
}

int mercury_quiet(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(MERCURY_LOG_DEBUG, false, fmt, ap, last_error, sizeof(last_error));
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
