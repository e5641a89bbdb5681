// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercuryctl check: does a priority plan fit the qdisc it is deployed on?
 *
 * A plan and a qdisc that disagree fail silently: a tag above the qdisc's
 * levels lands on its least urgent tagged level, a tag the masks cut off
 * becomes another tag, and a tagger writing SO_MARK into a qdisc reading
 * DSCP leaves every packet untagged. Nothing on the wire says so, so this
 * compares the two before traffic does, by libmercury's rule
 * (mercury_qdisc_fit(), which channel sets apply at creation too).
 */
#include <stdio.h>

#include <mercury/mercury.h>

#include "mctl.h"

/* libmercury's rule says each problem once; keep the first few. */
static void mctl_problem(const char *msg, void *ctx)
{
	struct mctl_problems *pr = ctx;

	if (pr->n >= MCTL_MAX_PROBLEMS)
		return;
	snprintf(pr->msg[pr->n++], sizeof(pr->msg[0]), "%s", msg);
}

int mctl_check_plan(const struct mctl_qdisc *q, const char *dev,
		    const struct mercury_plan_info *pi,
		    struct mctl_problems *pr)
{
	struct mercury_qdisc mq = {
		.ifindex	= q->ifindex,
		.handle		= q->handle,
		.parent		= q->parent,
		.opts		= q->opts,
	};
	unsigned int before = pr->n;

	snprintf(mq.dev, sizeof(mq.dev), "%s", dev);
	mercury_qdisc_fit(&mq, pi, MERCURY_FIT_PLAN, mctl_problem, pr);
	return (int)(pr->n - before);
}
