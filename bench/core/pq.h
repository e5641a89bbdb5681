/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pq.h	The three priority queues the core benchmark compares.
 *
 *  - mercury: kmod/sch_mercury.c itself, compiled through shim.h;
 *  - v1:      the first version of that core (mercury_core_v1.h, v1.c),
 *             kept as the baseline the second is measured against;
 *  - heap:    a binary min-heap of (rank, seq) keys, written here;
 *  - rbtree:  libbsd's red-black tree (<bsd/sys/tree.h>) of (rank, seq),
 *             with a cached minimum as the kernel's rb_root_cached keeps.
 *
 * The sequence number makes the heap and the tree FIFO within a rank, the
 * order mercury gives one flow at one level. Every queue stores the very
 * packets it is given: the heap's array slot and the tree's node are the
 * only per-packet extra state, as an skb's rbnode would be in the kernel.
 */
#ifndef MERCURY_BENCH_PQ_H
#define MERCURY_BENCH_PQ_H

#include "shim.h"
#include <bsd/sys/cdefs.h>
#include <bsd/sys/tree.h>

/* The module's flow cache here: malloc, with failures injected on demand
 * (bench_flow_alloc(), shim.h).
 */
extern u32 pq_fail_allocs;	/* the next this many allocations fail */
extern u64 pq_live_flows;	/* allocated and not freed */

/* The module, whole: every translation unit that includes this gets its
 * own copy of its static functions, and uses some of them.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-const-variable"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "../../kmod/sch_mercury.c"
#pragma GCC diagnostic pop

_Static_assert(sizeof(struct mercury_skb_cb) <= QDISC_CB_PRIV_LEN,
	       "mercury_skb_cb does not fit the qdisc's 20 bytes of skb->cb");

/* A packet: the skb the qdisc sees plus the node a tree would embed. */
struct pq_pkt {
	struct sk_buff		skb;		/* first: mercury's packet */
	RB_ENTRY(pq_pkt)	rb;		/* rbtree only */
	u64			key;		/* heap and rbtree: rank, seq */
};

enum pq_kind {
	PQ_MERCURY,
	PQ_HEAP,
	PQ_RBTREE,
	PQ_V1,
	PQ_NKINDS,
};

struct pq_cfg {
	enum pq_kind	kind;
	u32		levels;		/* tagged levels: ranks 1..levels */
	u32		buckets;	/* mercury: lookup buckets; v1: flow buckets */
	bool		flow_order;	/* mercury flow_order */
	u32		capacity;	/* heap: most packets queued at once */
	u32		quantum;	/* mercury DRR quantum, bytes */
};

struct pq_heap_slot {
	u64		key;
	struct pq_pkt	*pkt;
};

RB_HEAD(pq_rb, pq_pkt);

struct pq {
	enum pq_kind		kind;
	u64			seq;		/* insertions so far */
	u32			len;		/* packets queued */
	/* mercury: the qdisc's private data */
	struct mercury_sched_data core;
	/* v1 */
	struct v1		*v1;
	/* heap */
	struct pq_heap_slot	*heap;
	u32			cap;
	/* rbtree */
	struct pq_rb		rb;
	struct pq_pkt		*rb_min;
};

const char *pq_kind_name(enum pq_kind kind);
int pq_create(struct pq **pq, const struct pq_cfg *cfg);
void pq_destroy(struct pq *pq);

struct v1;
int v1_create(struct v1 **v, u32 levels, u32 buckets, bool flow_order,
	      u32 quantum);
void v1_destroy(struct v1 *v);
void v1_push(struct v1 *v, struct sk_buff *skb, u32 rank);
struct sk_buff *v1_pop(struct v1 *v);
/* v1's drop policy: its victim for an arrival of @rank, or NULL. */
struct sk_buff *v1_victim(struct v1 *v, s64 rank);
u32 v1_rank_of(const struct sk_buff *skb);

/* The key mercury's core gets for a packet: the hash fallback's. */
static inline unsigned long pq_key(const struct pq_pkt *pkt)
{
	return (unsigned long)pkt->skb.hash << 1 | 1;
}

/* Bytes of configuration-sized state mercury allocates for @cfg. */
size_t pq_mercury_table_bytes(u32 levels, u32 buckets);

/* Queue @pkt at @rank (0 is served first); hash and len must be set.
 * mercury's push fails (and queues nothing) without a flow for it.
 */
int pq_mercury_push(struct pq *pq, struct pq_pkt *pkt, u32 rank);
void pq_heap_push(struct pq *pq, struct pq_pkt *pkt, u32 rank);
void pq_rbtree_push(struct pq *pq, struct pq_pkt *pkt, u32 rank);

/* The next packet in service order, unlinked; NULL when empty. */
struct pq_pkt *pq_mercury_pop(struct pq *pq);
struct pq_pkt *pq_heap_pop(struct pq *pq);
struct pq_pkt *pq_rbtree_pop(struct pq *pq);

struct pq_pkt *pq_rbtree_drop(struct pq *pq, s64 rank);

/* Rank of a queued or just popped packet. */
u32 pq_rank_of(const struct pq *pq, const struct pq_pkt *pkt);

int pq_push(struct pq *pq, struct pq_pkt *pkt, u32 rank);
struct pq_pkt *pq_pop(struct pq *pq);

#endif /* MERCURY_BENCH_PQ_H */
