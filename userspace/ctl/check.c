// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercuryctl check: does a priority plan fit the qdisc it is deployed on?
 *
 * A plan and a qdisc that disagree fail silently: a tag above the qdisc's
 * levels lands on its least urgent tagged level, a tag the masks cut off
 * becomes another tag, and a tagger writing SO_MARK into a qdisc reading
 * DSCP leaves every packet untagged. Nothing on the wire says so, so this
 * compares the two before traffic does.
 */
#include <stdarg.h>
#include <stdio.h>

#include <mercury/mercury.h>

#include "mctl.h"

/* The plan's tag source is the qdisc's, numbered alike. */
_Static_assert((int)MERCURY_TAG_MARK == TC_MERCURY_TAG_MARK &&
	       (int)MERCURY_TAG_PRIORITY == TC_MERCURY_TAG_PRIORITY &&
	       (int)MERCURY_TAG_DSCP == TC_MERCURY_TAG_DSCP,
	       "libmercury and the qdisc number tag sources alike");

static void __attribute__((format(printf, 4, 5)))
mctl_problem(struct mctl_problems *pr, const struct mctl_qdisc *q,
	     const char *dev, const char *fmt, ...)
{
	char handle[16];
	va_list ap;
	int len;

	if (pr->n >= MCTL_MAX_PROBLEMS)
		return;
	mctl_sprint_handle(handle, sizeof(handle), q->handle);
	len = snprintf(pr->msg[pr->n], sizeof(pr->msg[0]), "mercury %s on %s: ",
		       handle, dev);
	va_start(ap, fmt);
	vsnprintf(pr->msg[pr->n] + len, sizeof(pr->msg[0]) - len, fmt, ap);
	va_end(ap);
	pr->n++;
}

int mctl_check_plan(const struct mctl_qdisc *q, const char *dev,
		    const struct mercury_plan_info *pi,
		    struct mctl_problems *pr)
{
	const struct mctl_opts *o = &q->opts;
	unsigned int t, before = pr->n;

	if ((unsigned int)pi->source != o->source)
		mctl_problem(pr, q, dev,
			     "the plan tags by %s, the qdisc reads %s: every packet is untagged there (tc qdisc change ... tag %s, or a plan with \"tag_source\": \"%s\")",
			     mctl_source_name(pi->source),
			     mctl_source_name(o->source),
			     mctl_source_name(pi->source),
			     mctl_source_name(o->source));
	if (pi->shift != o->shift)
		mctl_problem(pr, q, dev,
			     "the plan shifts tags by %u bits, the qdisc by %u: tags arrive scaled",
			     pi->shift, (unsigned int)o->shift);
	/* The tagger writes (tag & plan mask) << shift; the qdisc reads
	 * (field >> shift) & its mask: a tag survives if both masks keep it.
	 */
	for (t = 1; t <= pi->max_tag; t++) {
		if ((t & pi->mask & o->mask) != t) {
			mctl_problem(pr, q, dev,
				     "tag %u does not survive the masks (plan 0x%x, qdisc 0x%x): it arrives as tag %u",
				     t, pi->mask, o->mask, t & pi->mask & o->mask);
			break;
		}
	}
	if (pi->source == MERCURY_TAG_DSCP &&
	    ((unsigned long)pi->max_tag << pi->shift) > MERCURY_DSCP_MASK)
		mctl_problem(pr, q, dev,
			     "tag %u shifted by %u does not fit the six DSCP bits",
			     pi->max_tag, pi->shift);
	if (pi->max_tag > o->levels)
		mctl_problem(pr, q, dev,
			     "the plan uses tags up to %u, the qdisc has %u levels: tags %u..%u all share level %u (squeeze the plan: mercury-place --levels %u)",
			     pi->max_tag, o->levels, o->levels, pi->max_tag,
			     o->levels, o->levels);
	return (int)(pr->n - before);
}
