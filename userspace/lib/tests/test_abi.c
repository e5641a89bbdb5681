// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * ABI: the version script, the header and the shared object agree; only
 * mercury_* API symbols are exported, internals are hidden.
 */
#include <ctype.h>
#include <dlfcn.h>

#include "helpers.h"

#define LIBDIR	TESTDATA "/../.."

static size_t read_names(const char *path, const char *after, char names[][64],
			 size_t max)
{
	char line[512], *p, *q;
	size_t n = 0;
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) && n < max) {
		p = strstr(line, "mercury_");
		if (!p || (after && !strstr(line, after)))
			continue;
		if (after) {
			/* header: the name right before '(' */
			q = strchr(p, '(');
			if (!q)
				continue;
			for (p = q; p > line && (isalnum((unsigned char)p[-1]) ||
						 p[-1] == '_'); p--)
				;
		} else {
			q = strchr(p, ';');
			if (!q)
				continue;
		}
		for (; q > p && !isalnum((unsigned char)q[-1]) &&
		       q[-1] != '_'; q--)
			;
		snprintf(names[n], 64, "%.*s", (int)(q - p), p);
		n++;
	}
	fclose(f);
	return n;
}

static int in(char names[][64], size_t n, const char *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return 1;
	return 0;
}

static void test_exports(void **state)
{
	static char map[128][64], hdr[128][64];
	static const char *const hidden[] = {
		"mercury_err", "mercury_quiet", "mercury_pr",
		"mercury_opts_check",
	};
	size_t nm, nh, i;
	void *h;

	(void)state;
	nm = read_names(LIBDIR "/libmercury.map", NULL, map, 128);
	nh = read_names(LIBDIR "/include/mercury/mercury.h", "MERCURY_API ",
			hdr, 128);
	assert_true(nm > 30);
	assert_int_equal(nm, nh);
	for (i = 0; i < nh; i++)
		if (!in(map, nm, hdr[i]))
			fail_msg("%s is in the header, not in the map", hdr[i]);
	h = dlopen(LIBDIR "/libmercury.so.0", RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	for (i = 0; i < nm; i++)
		if (!dlsym(h, map[i]))
			fail_msg("%s not exported", map[i]);
	for (i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
		if (dlsym(h, hidden[i]))
			fail_msg("internal %s is exported", hidden[i]);
	assert_string_equal(((const char *(*)(void))dlsym(h,
			    "mercury_version"))(), MERCURY_VERSION_STRING);
	dlclose(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exports),
	};

	return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
