// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libFuzzer target: the plan reader. Any bytes either load as a plan whose
 * every entry looks up to its own tag, or fail with a negative errno and a
 * message; nothing crashes, leaks or reads out of bounds. A plan that
 * loads also loads squeezed (into 1..1 + size % 8 levels: tags in range,
 * order kept, ties kept) and survives save -> load unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mercury/mercury.h"

static void check_same(const struct mercury_plan *p,
		       const struct mercury_plan *q)
{
	struct mercury_plan_entry a, b;
	size_t i;

	if (mercury_plan_size(p) != mercury_plan_size(q) ||
	    mercury_plan_max_tag(p) != mercury_plan_max_tag(q))
		abort();
	for (i = 0; i < mercury_plan_size(p); i++) {
		if (mercury_plan_entry(p, i, &a) || mercury_plan_entry(q, i, &b))
			abort();
		if (strcmp(a.tensor, b.tensor) || a.tag != b.tag ||
		    a.bytes != b.bytes || strcmp(a.src, b.src) ||
		    strcmp(a.dst, b.dst))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	MERCURY_OPTS(mercury_plan_load_opts, lo, .levels = 1 + size % 8,
		     .squeeze = true);
	struct mercury_plan_entry e, f, g, h;
	struct mercury_plan *p, *s, *q;
	size_t i, j, len;
	char *text;

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
	if (mercury_plan_load_buf_opts((const char *)data, size, &lo, &s))
		abort();
	if (mercury_plan_max_tag(s) > lo.levels)
		abort();
	/* pairs: order and ties kept (bounded: inputs are <= 4 KB) */
	for (i = 0; i < mercury_plan_size(p); i++) {
		mercury_plan_entry(p, i, &e);
		mercury_plan_entry(s, i, &f);
		for (j = 0; j < i; j++) {
			mercury_plan_entry(p, j, &g);
			mercury_plan_entry(s, j, &h);
			if ((e.tag < g.tag && f.tag > h.tag) ||
			    (e.tag > g.tag && f.tag < h.tag) ||
			    (e.tag == g.tag && f.tag != h.tag))
				abort();
		}
	}
	if (mercury_plan_save_buf(s, &text, &len) ||
	    mercury_plan_load_buf(text, len, &q))
		abort();
	check_same(s, q);
	free(text);
	mercury_plan_free(q);
	mercury_plan_free(s);
	mercury_plan_free(p);
	return 0;
}
