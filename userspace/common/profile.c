// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A profile as a timeline, for the tools that replay or simulate a
 * training step (mercury-sim simulates it, mercury-ps sends it): one owner,
 * so that the step mercury-ps measures is the step mercury-sim predicts.
 * libmercury reads the file (h200 JSON or PipeDream graph.txt:
 * mercury_model_load(), one reader and one ownership rule for every
 * tool); this turns it into a timeline:
 *
 *  - h200: each call is charged the time from its own start to the next
 *    call's start (at least its own fwd_ms), so gaps between leaf modules
 *    (functional ops, residual adds, the loss) stay in the forward pass
 *    and a stall-free forward lasts what was measured.
 *  - pipedream: forward runs in libmercury's topological order, backward
 *    in the reverse order, and each operator with parameters releases one
 *    tensor when its backward ends.
 *
 * --plan then takes every tensor's send priority from a deployed plan,
 * read by libmercury exactly as the tagger reads it, so the plan that is
 * simulated and benchmarked is the plan that tags packets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mercury/mercury.h>

#include "tools.h"

void mt_profile_free(struct mt_profile *prof)
{
	int i;

	if (!prof)
		return;
	for (i = 0; i < prof->ntensors; i++)
		free(prof->tensors[i].name);
	free(prof->tensors);
	free(prof->call_ms);
	free(prof->model);
	memset(prof, 0, sizeof(*prof));
}

/* Timeline attribution: see the header comment. */
static void h200_timeline(const struct mercury_model *m,
			  const struct mercury_model_info *info,
			  struct mt_profile *prof)
{
	const struct mercury_model_call *c, *next;
	int i, n = prof->ncalls;

	c = mercury_model_call(m, 0);
	prof->prelude_ms = c->start_ms;
	prof->fwd_ms = c->start_ms;
	for (i = 0; i < n; i++) {
		double until, d;

		c = mercury_model_call(m, i);
		next = mercury_model_call(m, i + 1);
		until = next ? next->start_ms : info->fwd_ms;
		d = until - c->start_ms;
		prof->call_ms[i] = d > c->fwd_ms ? d : c->fwd_ms;
		prof->fwd_ms += prof->call_ms[i];
	}
}

static int from_model(const char *path, const struct mercury_model *m,
		      struct mt_profile *prof, char *err, size_t errlen)
{
	struct mercury_model_info info;
	size_t i;

	mercury_model_get_info(m, &info, sizeof(info));
	if (!info.model)
		return mt_set_err(err, errlen, -EINVAL, "%s: missing string \"model\"",
				  path);
	if (!info.timed)
		return mt_set_err(err, errlen, -EINVAL,
				  "%s: needs iteration_ms, and start_ms and fwd_ms for every forward call and ready_ms for every gradient",
				  path);
	if (!info.ncalls)
		return mt_set_err(err, errlen, -EINVAL,
				  "%s: \"forward_calls\" missing or empty", path);
	if (!info.nparams)
		return mt_set_err(err, errlen, -EINVAL, "%s: no node has parameters",
				  path);
	if (info.ncalls > MT_PROFILE_MAX || info.nparams > MT_PROFILE_MAX)
		return mt_set_err(err, errlen, -E2BIG,
				  "%s: %zu calls and %zu tensors: more than %u",
				  path, info.ncalls, info.nparams,
				  MT_PROFILE_MAX);
	prof->model = strdup(info.model);
	prof->call_ms = calloc(info.ncalls, sizeof(*prof->call_ms));
	prof->tensors = calloc(info.nparams, sizeof(*prof->tensors));
	if (!prof->model || !prof->call_ms || !prof->tensors)
		return mt_set_err(err, errlen, -ENOMEM, "out of memory");
	prof->ncalls = info.ncalls;
	if (info.format == MERCURY_MODEL_H200) {
		h200_timeline(m, &info, prof);
	} else {
		for (i = 0; i < info.ncalls; i++) {
			prof->call_ms[i] = mercury_model_call(m, i)->fwd_ms;
			prof->fwd_ms += prof->call_ms[i];
		}
	}
	prof->bwd_ms = info.bwd_ms;
	for (i = 0; i < info.nparams; i++) {
		const struct mercury_model_param *p = mercury_model_param(m, i);
		struct mt_tensor *t = &prof->tensors[i];

		/* the reader allows it; a tensor without bytes never arrives */
		if (!p->bytes)
			return mt_set_err(err, errlen, -EINVAL,
					  "%s: tensor %s has 0 bytes: nothing to send",
					  path, p->name);
		t->name = strdup(p->name);
		if (!t->name)
			return mt_set_err(err, errlen, -ENOMEM, "out of memory");
		prof->ntensors = i + 1;
		t->bytes = p->bytes;
		t->ready_ms = p->ready_ms;
		t->gate = p->gate;
		t->prio = t->gate;
		prof->total_bytes += t->bytes;
		/* A release after the measured end stretches backward. */
		if (t->ready_ms > prof->bwd_ms)
			prof->bwd_ms = t->ready_ms;
	}
	return 0;
}

int mt_profile_load(const char *path, struct mt_profile *prof, char *err,
		    size_t errlen)
{
	struct mercury_model *m;
	int ret;

	memset(prof, 0, sizeof(*prof));
	if (!path || !*path)
		return mt_set_err(err, errlen, -EINVAL, "no profile given");
	ret = mercury_model_load(path, &m);
	if (ret)
		/* libmercury's reason names the file */
		return mt_set_err(err, errlen, ret, "%s", mercury_last_error());
	ret = from_model(path, m, prof, err, errlen);
	mercury_model_free(m);
	if (ret)
		mt_profile_free(prof);
	return ret;
}

int mt_profile_apply_plan(struct mt_profile *prof, const char *path,
			  unsigned int *max_tag, char *err, size_t errlen)
{
	struct mercury_plan *plan;
	unsigned int top = 0;
	int i, tag, ret;

	ret = mercury_plan_load(path, &plan);
	if (ret)
		/* libmercury's reason names the file */
		return mt_set_err(err, errlen, ret, "--plan: %s",
				  mercury_last_error());
	/* Check every name before changing anything. */
	for (i = 0; i < prof->ntensors; i++) {
		tag = mercury_plan_lookup(plan, prof->tensors[i].name);
		if (tag < 0) {
			mt_set_err(err, errlen, -ENOENT,
				   "--plan %s: no tag for tensor %s of %s", path,
				   prof->tensors[i].name, prof->model);
			mercury_plan_free(plan);
			return -ENOENT;
		}
		if ((unsigned int)tag > top)
			top = tag;
	}
	for (i = 0; i < prof->ntensors; i++)
		prof->tensors[i].prio = mercury_plan_lookup(plan,
							prof->tensors[i].name);
	mercury_plan_free(plan);
	if (max_tag)
		*max_tag = top;
	return 0;
}
