// SPDX-License-Identifier: GPL-2.0
/*
 * pq.c	Mercury's core, a binary heap and a red-black tree behind one
 *	set of direct calls, so each costs the same call overhead.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pq.h"

#define PQ_SEQ_BITS	40	/* low key bits; ranks take the 24 above */

u32 pq_fail_allocs;
u64 pq_live_flows;

void *bench_flow_alloc(void)
{
	struct mercury_flow *f;

	if (pq_fail_allocs) {
		pq_fail_allocs--;
		return NULL;
	}
	f = malloc(sizeof(*f));
	if (f)
		pq_live_flows++;
	return f;
}

void bench_flow_free(void *f)
{
	pq_live_flows--;
	free(f);
}

static inline u64 pq_heap_key(u32 rank, u64 seq)
{
	return (u64)rank << PQ_SEQ_BITS | (seq & (BIT_ULL(PQ_SEQ_BITS) - 1));
}

static int pq_rb_cmp(const struct pq_pkt *a, const struct pq_pkt *b)
{
	return a->key < b->key ? -1 : a->key > b->key;
}

/* RB_GENERATE_STATIC wants a __unused that libbsd defines only in its
 * overlay mode; spell the attribute out.
 */
RB_GENERATE_INTERNAL(pq_rb, pq_pkt, rb, pq_rb_cmp, __attribute__((unused)) static)

const char *pq_kind_name(enum pq_kind kind)
{
	switch (kind) {
	case PQ_MERCURY:
		return "mercury";
	case PQ_HEAP:
		return "heap";
	case PQ_RBTREE:
		return "rbtree";
	case PQ_V1:
		return "v1";
	default:
		return "?";
	}
}

size_t pq_mercury_table_bytes(u32 levels, u32 buckets)
{
	return (size_t)(levels + 1) * sizeof(struct mercury_level) +
	       (sizeof(struct rb_root) << mercury_bucket_bits(buckets)) +
	       2 * MERCURY_LEAF_WORDS((size_t)levels + 1) * sizeof(u64);
}

static int pq_mercury_init(struct pq *pq, const struct pq_cfg *cfg)
{
	struct mercury_sched_data *q = &pq->core;
	struct mercury_config mc = mercury_defaults;

	if (!cfg->levels || cfg->levels > TC_MERCURY_MAX_LEVELS ||
	    !cfg->buckets || cfg->buckets > TC_MERCURY_MAX_FLOWS)
		return -EINVAL;
	/* as mercury_init() and mercury_change() set it up */
	INIT_LIST_HEAD(&q->idle);
	INIT_LIST_HEAD(&q->spares);
	q->keep_spares = 1;
	mc.levels = cfg->levels;
	mc.flows = cfg->buckets;
	mc.flow_order = cfg->flow_order;
	mc.quantum = cfg->quantum ? cfg->quantum : 2 * 1514;
	if (mercury_tables_alloc(&q->t, &mc, NUMA_NO_NODE))
		return -ENOMEM;
	mercury_ranks_init(&q->served, q->t.served_leaf);
	mercury_ranks_init(&q->tails, q->t.tails_leaf);
	mercury_apply_cfg(q, &mc);
	/* untagged first with no cap: one priority queue, nothing else */
	q->share = 0;
	return 0;
}

int pq_create(struct pq **out, const struct pq_cfg *cfg)
{
	struct pq *pq;
	int err = 0;

	if (cfg->kind >= PQ_NKINDS)
		return -EINVAL;
	pq = calloc(1, sizeof(*pq));
	if (!pq)
		return -ENOMEM;
	pq->kind = cfg->kind;
	switch (cfg->kind) {
	case PQ_MERCURY:
		err = pq_mercury_init(pq, cfg);
		break;
	case PQ_HEAP:
		pq->cap = cfg->capacity;
		pq->heap = calloc(cfg->capacity ? cfg->capacity : 1,
				  sizeof(*pq->heap));
		if (!pq->heap)
			err = -ENOMEM;
		break;
	case PQ_V1:
		err = v1_create(&pq->v1, cfg->levels, cfg->buckets,
				cfg->flow_order, cfg->quantum);
		break;
	default:
		RB_INIT(&pq->rb);
		break;
	}
	if (err) {
		pq_destroy(pq);
		return err;
	}
	*out = pq;
	return 0;
}

void pq_destroy(struct pq *pq)
{
	if (!pq)
		return;
	if (pq->kind == PQ_MERCURY && pq->core.t.levels) {
		while (pq_mercury_pop(pq))
			;
		mercury_idle_trim(&pq->core, 0);
		mercury_spares_trim(&pq->core, 0);
	}
	mercury_tables_free(&pq->core.t);
	v1_destroy(pq->v1);
	free(pq->heap);
	free(pq);
}

/* ---- mercury ------------------------------------------------------------ */

int pq_mercury_push(struct pq *pq, struct pq_pkt *pkt, u32 rank)
{
	int err;

	mercury_cb(&pkt->skb)->rank = rank;
	err = mercury_insert(&pq->core, &pkt->skb, pq_key(pkt));
	if (!err)
		pq->len++;
	return err;
}

struct pq_pkt *pq_mercury_pop(struct pq *pq)
{
	u32 rank = mercury_next_rank(&pq->core);

	if (rank == MERCURY_NO_RANK)
		return NULL;
	pq->len--;
	/* skb is the first member of pq_pkt */
	return (struct pq_pkt *)mercury_pick(&pq->core, rank);
}

/* ---- binary heap -------------------------------------------------------- */

void pq_heap_push(struct pq *pq, struct pq_pkt *pkt, u32 rank)
{
	struct pq_heap_slot *h = pq->heap;
	u64 key = pq_heap_key(rank, pq->seq++);
	u32 i = pq->len++, parent;

	pkt->key = key;
	while (i) {
		parent = (i - 1) / 2;
		if (h[parent].key <= key)
			break;
		h[i] = h[parent];
		i = parent;
	}
	h[i].key = key;
	h[i].pkt = pkt;
}

struct pq_pkt *pq_heap_pop(struct pq *pq)
{
	struct pq_heap_slot *h = pq->heap, last;
	struct pq_pkt *top;
	u32 n, i = 0, child;

	if (!pq->len)
		return NULL;
	top = h[0].pkt;
	n = --pq->len;
	last = h[n];
	/* sift the last slot down from the root */
	for (;;) {
		child = 2 * i + 1;
		if (child >= n)
			break;
		if (child + 1 < n && h[child + 1].key < h[child].key)
			child++;
		if (last.key <= h[child].key)
			break;
		h[i] = h[child];
		i = child;
	}
	if (n)
		h[i] = last;
	return top;
}

/* ---- red-black tree ----------------------------------------------------- */

void pq_rbtree_push(struct pq *pq, struct pq_pkt *pkt, u32 rank)
{
	pkt->key = pq_heap_key(rank, pq->seq++);
	RB_INSERT(pq_rb, &pq->rb, pkt);
	if (!pq->rb_min || pkt->key < pq->rb_min->key)
		pq->rb_min = pkt;
	pq->len++;
}

struct pq_pkt *pq_rbtree_pop(struct pq *pq)
{
	struct pq_pkt *min = pq->rb_min;

	if (!min)
		return NULL;
	pq->rb_min = RB_NEXT(pq_rb, &pq->rb, min);
	RB_REMOVE(pq_rb, &pq->rb, min);
	pq->len--;
	return min;
}

/* The least urgent packet, the newest among equals, if less urgent than
 * @rank: the drop policy of a tree of packets.
 */
struct pq_pkt *pq_rbtree_drop(struct pq *pq, s64 rank)
{
	struct pq_pkt *max = RB_MAX(pq_rb, &pq->rb);

	if (!max || (s64)(max->key >> PQ_SEQ_BITS) <= rank)
		return NULL;
	if (max == pq->rb_min)
		pq->rb_min = NULL;	/* it was the only packet */
	RB_REMOVE(pq_rb, &pq->rb, max);
	pq->len--;
	return max;
}

/* ---- by kind ------------------------------------------------------------ */

u32 pq_rank_of(const struct pq *pq, const struct pq_pkt *pkt)
{
	if (pq->kind == PQ_MERCURY)
		return mercury_rank_of(&pkt->skb);
	if (pq->kind == PQ_V1)
		return v1_rank_of(&pkt->skb);
	return (u32)(pkt->key >> PQ_SEQ_BITS);
}

int pq_push(struct pq *pq, struct pq_pkt *pkt, u32 rank)
{
	switch (pq->kind) {
	case PQ_MERCURY:
		return pq_mercury_push(pq, pkt, rank);
	case PQ_V1:
		v1_push(pq->v1, &pkt->skb, rank);
		pq->len++;
		break;
	case PQ_HEAP:
		pq_heap_push(pq, pkt, rank);
		break;
	default:
		pq_rbtree_push(pq, pkt, rank);
		break;
	}
	return 0;
}

struct pq_pkt *pq_pop(struct pq *pq)
{
	switch (pq->kind) {
	case PQ_MERCURY:
		return pq_mercury_pop(pq);
	case PQ_V1: {
		struct sk_buff *skb = v1_pop(pq->v1);

		if (skb)
			pq->len--;
		return (struct pq_pkt *)skb;
	}
	case PQ_HEAP:
		return pq_heap_pop(pq);
	default:
		return pq_rbtree_pop(pq);
	}
}
