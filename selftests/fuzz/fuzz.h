/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by Mercury's fuzzers: a seeded generator (splitmix64, so that a
 * seed replays the same run on any machine) and fatal errors.
 */
#ifndef MERCURY_FUZZ_H
#define MERCURY_FUZZ_H

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t fuzz_state;

static inline void fuzz_srand(uint64_t seed)
{
	fuzz_state = seed;
}

static inline uint64_t fuzz_next(void)
{
	uint64_t z = (fuzz_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in 0..n-1 (n > 0); the bias of the modulo is irrelevant here. */
static inline uint32_t fuzz_below(uint64_t n)
{
	return n ? fuzz_next() % n : 0;
}

static inline uint64_t fuzz_seed_from_time(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^
	       (uint64_t)getpid() << 32;
}

/* "fuzz: " and the message on stderr, then exit(@code). */
static inline __attribute__((format(printf, 2, 0), noreturn))
void fuzz_vexit(int code, const char *fmt, va_list ap)
{
	fprintf(stderr, "fuzz: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	exit(code);
}

static inline __attribute__((format(printf, 1, 2), noreturn))
void fuzz_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fuzz_vexit(1, fmt, ap);
}

/* @s as a whole number from 0 to @max (decimal, or 0x hex) into *@v;
 * false when it is not one: a seed or count that does not parse must not
 * silently become 0 (a fixed seed, no sets).
 */
static inline bool fuzz_parse_uint(const char *s, uint64_t max, uint64_t *v)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || n > max)
		return false;
	*v = n;
	return true;
}

/* The number of option -@opt, or die naming it. */
static inline uint64_t fuzz_uint(char opt, const char *s, uint64_t max)
{
	uint64_t v;

	if (!fuzz_parse_uint(s, max, &v))
		fuzz_die("-%c: '%s' is not a number from 0 to %llu", opt, s,
			 (unsigned long long)max);
	return v;
}

static inline double fuzz_real(char opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0))
		fuzz_die("-%c: '%s' is not a non-negative number", opt, s);
	return v;
}

#endif
