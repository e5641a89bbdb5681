// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libFuzzer target: the one profile reader (mercury_model_load(), h200
 * JSON or PipeDream graph.txt by content) and the default plan built on it
 * (mercury_plan_from_profile()). The input's first byte picks the plan
 * options (grouping, levels); the rest is the profile, handed over as a
 * file (a memfd) as users do. A model that loads has every index in range,
 * gates on calls, bytes = numel * elem_size (h200); a plan that loads has
 * tags in 1..max_tag and every entry looks up to its tag.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mercury/mercury.h"

static void check_model(const char *path)
{
	struct mercury_model_info info;
	struct mercury_model *m;
	uint64_t total = 0;
	size_t i, k;

	if (mercury_model_load(path, &m)) {
		if (m || !*mercury_last_error())
			abort();
		return;
	}
	if (mercury_model_get_info(m, &info, sizeof(info)))
		abort();
	for (i = 0; i < info.ncalls; i++) {
		const struct mercury_model_call *c = mercury_model_call(m, i);

		if (!c || c->module_idx >= info.nmodules ||
		    strcmp(c->module, mercury_model_module(m, c->module_idx)->name) ||
		    mercury_model_module(m, c->module_idx)->first_call > i)
			abort();
	}
	for (i = 0; i < info.nparams; i++) {
		const struct mercury_model_param *p = mercury_model_param(m, i);

		if (!p || !p->name || !p->owner || !p->dtype ||
		    (info.ncalls && p->gate >= info.ncalls) ||
		    (!info.ncalls && p->gate != MERCURY_MODEL_NONE) ||
		    (p->module && p->module_idx >= info.nmodules) ||
		    (info.format == MERCURY_MODEL_H200 &&
		     p->bytes != p->numel * p->elem_size))
			abort();
		for (k = 0; k < p->nshared; k++)
			if (p->shared[k] >= info.nmodules)
				abort();
		if (mercury_model_first_use(m, p->owner) == MERCURY_MODEL_NONE &&
		    info.ncalls)
			abort();
		total += p->bytes;
	}
	for (i = 0; i < info.nedges; i++) {
		const struct mercury_model_edge *e = mercury_model_edge(m, i);

		if (e->src >= info.nmodules || e->dst >= info.nmodules)
			abort();
		/* PipeDream: the forward order is topological */
		if (info.format == MERCURY_MODEL_PIPEDREAM &&
		    mercury_model_module(m, e->src)->first_call >=
		    mercury_model_module(m, e->dst)->first_call)
			abort();
	}
	for (i = 0; i < info.nnodes; i++) {
		const struct mercury_model_node *nd = mercury_model_node(m, i);

		if (nd->param != MERCURY_MODEL_NONE && nd->param >= info.nparams)
			abort();
	}
	if (total != info.total_bytes || mercury_model_param(m, info.nparams))
		abort();
	mercury_model_free(m);
}

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
	check_model(path);
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
