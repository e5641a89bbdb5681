// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * --plan: the send priority of every tensor from a deployed plan, read by
 * libmercury exactly as the tagger reads it, so the plan that is simulated
 * (mercury-sim) and benchmarked (mercury-ps) is the plan that tags packets.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <mercury/mercury.h>

#include "msim.h"

int msim_profile_apply_plan(struct msim_profile *prof, const char *path,
			    unsigned int *max_tag, char *err, size_t errlen)
{
	struct mercury_plan *plan;
	unsigned int top = 0;
	int i, tag, ret;

	ret = mercury_plan_load(path, &plan);
	if (ret) {
		/* libmercury's reason names the file */
		snprintf(err, errlen, "--plan: %s", mercury_last_error());
		return ret;
	}
	/* Check every name before changing anything. */
	for (i = 0; i < prof->ntensors; i++) {
		tag = mercury_plan_lookup(plan, prof->tensors[i].name);
		if (tag < 0) {
			snprintf(err, errlen, "--plan %s: no tag for tensor %s of %s",
				 path, prof->tensors[i].name, prof->model);
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
