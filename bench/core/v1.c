// SPDX-License-Identifier: GPL-2.0
/*
 * v1.c	The first version of mercury's core (mercury_core_v1.h) behind a
 *	small opaque interface, in its own translation unit: its structs
 *	share their names with the module's.
 */
#include <stdlib.h>

#include "shim.h"

/* What v1 wanted of its includer beyond the shim. */
static inline u32 reciprocal_scale(u32 val, u32 ep_ro)
{
	return (u32)(((u64)val * ep_ro) >> 32);
}

#include "mercury_core_v1.h"

struct v1 {
	struct mercury_core	core;
};

void v1_destroy(struct v1 *v)
{
	if (!v)
		return;
	free(v->core.t.levels);
	free(v->core.t.flows);
	free(v->core.t.leaf);
	free(v);
}

int v1_create(struct v1 **out, u32 levels, u32 buckets, bool flow_order,
	      u32 quantum)
{
	struct mercury_tables *t;
	struct v1 *v;
	u32 i;

	if (!levels || levels > TC_MERCURY_MAX_LEVELS || !buckets ||
	    buckets > TC_MERCURY_MAX_FLOWS)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	t = &v->core.t;
	t->levels = calloc(levels + 1, sizeof(*t->levels));
	t->flows = calloc(buckets, sizeof(*t->flows));
	t->leaf = calloc(MERCURY_LEAF_WORDS(levels + 1), sizeof(*t->leaf));
	if (!t->levels || !t->flows || !t->leaf) {
		v1_destroy(v);
		return -ENOMEM;
	}
	for (i = 0; i <= levels; i++)
		INIT_LIST_HEAD(&t->levels[i].flows);
	for (i = 0; i < buckets; i++)
		INIT_LIST_HEAD(&t->flows[i].node);
	v->core.nflows = buckets;
	v->core.quantum = quantum ? quantum : 2 * 1514;
	v->core.flow_order = flow_order;
	*out = v;
	return 0;
}

void v1_push(struct v1 *v, struct sk_buff *skb, u32 rank)
{
	mercury_cb(skb)->rank = rank;
	mercury_insert(&v->core, skb);
}

struct sk_buff *v1_pop(struct v1 *v)
{
	u32 rank = mercury_first_rank(&v->core);

	if (rank == MERCURY_NO_RANK)
		return NULL;
	return mercury_pick(&v->core, rank);
}

struct sk_buff *v1_victim(struct v1 *v, s64 rank)
{
	return mercury_victim(&v->core, rank);
}

u32 v1_rank_of(const struct sk_buff *skb)
{
	return mercury_rank_of(skb);
}
