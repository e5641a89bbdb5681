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

static inline u64 pq_key(u32 rank, u64 seq)
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
	default:
		return "?";
	}
}

size_t pq_mercury_table_bytes(u32 levels, u32 buckets)
{
	return (size_t)(levels + 1) * sizeof(struct mercury_level) +
	       (size_t)buckets * sizeof(struct mercury_flow) +
	       MERCURY_LEAF_WORDS((size_t)levels + 1) * sizeof(u64);
}

static int pq_mercury_init(struct pq *pq, const struct pq_cfg *cfg)
{
	struct mercury_tables *t = &pq->core.t;
	u32 nranks = cfg->levels + 1, i;

	if (!cfg->levels || cfg->levels > TC_MERCURY_MAX_LEVELS ||
	    !cfg->buckets || cfg->buckets > TC_MERCURY_MAX_FLOWS)
		return -EINVAL;
	/* calloc, as the module's kvcalloc: zeroed tables */
	t->levels = calloc(nranks, sizeof(*t->levels));
	t->flows = calloc(cfg->buckets, sizeof(*t->flows));
	t->leaf = calloc(MERCURY_LEAF_WORDS(nranks), sizeof(*t->leaf));
	if (!t->levels || !t->flows || !t->leaf)
		return -ENOMEM;
	for (i = 0; i < nranks; i++)
		INIT_LIST_HEAD(&t->levels[i].flows);
	for (i = 0; i < cfg->buckets; i++)
		INIT_LIST_HEAD(&t->flows[i].node);
	pq->core.nflows = cfg->buckets;
	pq->core.quantum = cfg->quantum ? cfg->quantum : 2 * 1514;
	pq->core.flow_order = cfg->flow_order;
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
	free(pq->core.t.levels);
	free(pq->core.t.flows);
	free(pq->core.t.leaf);
	free(pq->heap);
	free(pq);
}

/* ---- mercury ------------------------------------------------------------ */

void pq_mercury_push(struct pq *pq, struct pq_pkt *pkt, u32 rank)
{
	mercury_cb(&pkt->skb)->rank = rank;
	mercury_insert(&pq->core, &pkt->skb);
	pq->len++;
}

struct pq_pkt *pq_mercury_pop(struct pq *pq)
{
	u32 rank = mercury_first_rank(&pq->core);

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
	u64 key = pq_key(rank, pq->seq++);
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
	pkt->key = pq_key(rank, pq->seq++);
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

/* ---- by kind ------------------------------------------------------------ */

u32 pq_rank_of(const struct pq *pq, const struct pq_pkt *pkt)
{
	if (pq->kind == PQ_MERCURY)
		return mercury_rank_of(&pkt->skb);
	return (u32)(pkt->key >> PQ_SEQ_BITS);
}

void pq_push(struct pq *pq, struct pq_pkt *pkt, u32 rank)
{
	switch (pq->kind) {
	case PQ_MERCURY:
		pq_mercury_push(pq, pkt, rank);
		break;
	case PQ_HEAP:
		pq_heap_push(pq, pkt, rank);
		break;
	default:
		pq_rbtree_push(pq, pkt, rank);
		break;
	}
}

struct pq_pkt *pq_pop(struct pq *pq)
{
	switch (pq->kind) {
	case PQ_MERCURY:
		return pq_mercury_pop(pq);
	case PQ_HEAP:
		return pq_heap_pop(pq);
	default:
		return pq_rbtree_pop(pq);
	}
}
