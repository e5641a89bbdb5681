// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libFuzzer target: the profile reader behind mercury_plan_from_profile().
 * The input's first byte picks the options (grouping, levels); the rest is
 * the profile, handed over as a file (a memfd) as users do. A plan that
 * loads has tags in 1..max_tag and every entry looks up to its tag.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mercury/mercury.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	struct mercury_plan_entry e;
	struct mercury_plan *p;
	size_t i;

	if (!size)
		return 0;
	if (fd < 0) {
		fd = memfd_create("profile", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || pwrite(fd, data + 1, size - 1, 0) !=
	    (ssize_t)(size - 1))
		abort();
	MERCURY_OPTS(mercury_plan_opts, o,
		     .group = data[0] & 1 ? MERCURY_PLAN_PER_MODULE :
					    MERCURY_PLAN_PER_TENSOR,
		     .levels = data[0] >> 1);
	if (mercury_plan_from_profile(path, &o, &p)) {
		if (p || !*mercury_last_error())
			abort();
		return 0;
	}
	for (i = 0; i < mercury_plan_size(p); i++) {
		if (mercury_plan_entry(p, i, &e) || !e.tag ||
		    e.tag > mercury_plan_max_tag(p) ||
		    (o.levels && e.tag > o.levels))
			abort();
		if (mercury_plan_lookup(p, e.tensor) != (int)e.tag)
			abort();
	}
	mercury_plan_free(p);
	return 0;
}
