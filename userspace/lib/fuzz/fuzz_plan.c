// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libFuzzer target: the plan reader. Any bytes either load as a plan whose
 * every entry looks up to its own tag, or fail with a negative errno and a
 * message; nothing crashes, leaks or reads out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mercury/mercury.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mercury_plan_entry e;
	struct mercury_plan *p;
	size_t i;

	if (mercury_plan_load_buf((const char *)data, size, &p)) {
		if (p || !*mercury_last_error())
			abort();
		return 0;
	}
	for (i = 0; i < mercury_plan_size(p); i++) {
		if (mercury_plan_entry(p, i, &e))
			abort();
		/* duplicate names are refused at load: lookup finds this one */
		if (mercury_plan_lookup(p, e.tensor) != (int)e.tag)
			abort();
	}
	mercury_plan_free(p);
	return 0;
}
