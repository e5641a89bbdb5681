/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mercury_core_v1.h	The first version of sch_mercury's packet-path core, kept
 *			unchanged as the benchmark's baseline (v1).
 *
 * Levels with a three-word bitmap over them, the flow table, each flow's
 * FIFO and min chain, and deficit round robin inside a level: everything
 * enqueue and dequeue touch, and nothing of netlink or the Qdisc. See the
 * header comment of sch_mercury.c for the design.
 *
 * Kept apart so that bench/ can compile these very functions in userspace
 * (bench/core/shim.h provides sk_buff, list_head and the bit helpers) and
 * measure their cost against other priority queues. The includer provides:
 * struct sk_buff (next, prev, truesize, cb), qdisc_skb_cb(), qdisc_pkt_len(),
 * qdisc_cb_private_validate(), skb_get_hash(), reciprocal_scale(), the
 * list_head helpers, BIT_ULL(), __ffs64(), fls64(), DIV_ROUND_UP(), U32_MAX
 * and struct gnet_stats_basic_sync.
 */
#ifndef _MERCURY_CORE_V1_H
#define _MERCURY_CORE_V1_H

#include <linux/mercury.h>

#define MERCURY_MAX_RANKS	(TC_MERCURY_MAX_LEVELS + 1)
#define MERCURY_LEAF_WORDS(n)	DIV_ROUND_UP(n, 64)
#define MERCURY_MID_WORDS	MERCURY_LEAF_WORDS(MERCURY_LEAF_WORDS(MERCURY_MAX_RANKS))
#define MERCURY_NO_RANK		U32_MAX

/* Per-packet state, in the 20 bytes of skb->cb a qdisc owns; packed since
 * two pointers and the rank fill it exactly.
 */
struct mercury_skb_cb {
	struct sk_buff	*chain_next;	/* next less urgent chain packet */
	struct sk_buff	*chain_prev;	/* previous more urgent chain packet */
	u32		rank : 31,	/* level index, 0 served first */
			pruned : 1;	/* unlinked packets from the chain */
} __packed;

/* A bucket of the flow table: one FIFO of packets. */
struct mercury_flow {
	struct sk_buff		*head;		/* oldest packet */
	struct sk_buff		*tail;		/* newest packet, chain tail */
	struct sk_buff		*chain_head;	/* most urgent packet */
	struct list_head	node;		/* in levels[rank].flows */
	int			deficit;	/* bytes */
	u32			rank;		/* level served at */
	u32			qlen;		/* packets */
};

/* One level. The lists hold flows by their served rank; the counters
 * count packets by their own tag.
 */
struct mercury_level {
	struct list_head	flows;		/* round-robin list of flows */
	u32			nflows;		/* flows in the list */
	u32			qlen;		/* packets queued */
	u32			backlog;	/* bytes queued */
	u32			drops;		/* packets dropped */
	struct gnet_stats_basic_sync bstats;	/* packets and bytes sent */
};

/* Everything whose size depends on the configuration. */
struct mercury_tables {
	struct mercury_level	*levels;	/* nlevels + 1 entries */
	struct mercury_flow	*flows;		/* nflows entries */
	u64			*leaf;		/* one bit per rank */
};

/* The packet-path state: levels, their bitmap, the flow table.
 *
 * A packet that arrives to an empty qdisc is held in @solo, outside the
 * flow table: alone, it is the next to leave whatever its flow or level,
 * so it needs no hash, bucket, list or bitmap. The next arrival first moves
 * it into the table. On a link that keeps up, most packets find the qdisc
 * empty and take only this path.
 */
struct mercury_core {
	struct mercury_tables	t;
	struct sk_buff		*solo;			/* only packet queued */
	u64			top;			/* bit per mid word */
	u64			mid[MERCURY_MID_WORDS];	/* bit per leaf word */
	u32			nflows;			/* buckets in t.flows */
	u32			quantum;		/* bytes per DRR round */
	bool			flow_order;		/* bucket by flow only */
	u32			memory_usage;		/* bytes of truesize */
	u32			stat_flows;		/* buckets with packets */
	u32			stat_levels;		/* ranks with flows */
	u64			stat_chain_rebuilds;	/* re-threaded tail drops */
};

static inline struct mercury_skb_cb *mercury_cb(const struct sk_buff *skb)
{
	qdisc_cb_private_validate(skb, sizeof(struct mercury_skb_cb));
	return (struct mercury_skb_cb *)qdisc_skb_cb(skb)->data;
}

static inline u32 mercury_rank_of(const struct sk_buff *skb)
{
	return mercury_cb(skb)->rank;
}

/* ---- the level bitmap ------------------------------------------------ */

static inline void mercury_bit_set(struct mercury_core *c, u32 rank)
{
	u32 w = rank / 64;

	c->t.leaf[w] |= BIT_ULL(rank % 64);
	c->mid[w / 64] |= BIT_ULL(w % 64);
	c->top |= BIT_ULL(w / 64);
}

static inline void mercury_bit_clear(struct mercury_core *c, u32 rank)
{
	u32 w = rank / 64;

	c->t.leaf[w] &= ~BIT_ULL(rank % 64);
	if (c->t.leaf[w])
		return;
	c->mid[w / 64] &= ~BIT_ULL(w % 64);
	if (c->mid[w / 64])
		return;
	c->top &= ~BIT_ULL(w / 64);
}

/* Most urgent rank holding a packet, or MERCURY_NO_RANK. */
static inline u32 mercury_first_rank(const struct mercury_core *c)
{
	u32 m, w;

	if (c->solo)
		return mercury_rank_of(c->solo);
	if (!c->top)
		return MERCURY_NO_RANK;
	m = __ffs64(c->top);
	w = m * 64 + __ffs64(c->mid[m]);
	return w * 64 + __ffs64(c->t.leaf[w]);
}

/* Least urgent rank holding a flow, or MERCURY_NO_RANK. */
static inline u32 mercury_last_rank(const struct mercury_core *c)
{
	u32 m, w;

	if (!c->top)
		return MERCURY_NO_RANK;
	m = fls64(c->top) - 1;
	w = m * 64 + fls64(c->mid[m]) - 1;
	return w * 64 + fls64(c->t.leaf[w]) - 1;
}

/* ---- flows on levels ------------------------------------------------- */

static inline void mercury_flow_attach(struct mercury_core *c,
				       struct mercury_flow *f, u32 rank)
{
	struct mercury_level *l = &c->t.levels[rank];

	if (list_empty(&l->flows)) {
		mercury_bit_set(c, rank);
		c->stat_levels++;
	}
	list_add_tail(&f->node, &l->flows);
	l->nflows++;
	f->rank = rank;
}

static inline void mercury_flow_detach(struct mercury_core *c,
				       struct mercury_flow *f)
{
	struct mercury_level *l = &c->t.levels[f->rank];

	list_del_init(&f->node);
	l->nflows--;
	if (list_empty(&l->flows)) {
		mercury_bit_clear(c, f->rank);
		c->stat_levels--;
	}
}

/* After the flow lost a packet: move it to the level of its most urgent
 * remaining packet, or take it off the levels when it is empty.
 */
static inline void mercury_flow_requeue(struct mercury_core *c,
					struct mercury_flow *f)
{
	u32 rank;

	if (!f->qlen) {
		mercury_flow_detach(c, f);
		c->stat_flows--;
		return;
	}
	rank = mercury_rank_of(f->chain_head);
	if (rank != f->rank) {
		mercury_flow_detach(c, f);
		mercury_flow_attach(c, f, rank);
	}
}

/* ---- the min chain --------------------------------------------------- */

/* Thread @skb onto the chain after @last, the current chain tail. Packets
 * at the tail that are less urgent than @skb leave the chain: they leave
 * the flow before @skb, so they never decide its urgency again. Equally
 * urgent ones stay, so that dropping @skb rarely has anything to re-thread.
 */
static inline void mercury_chain_append(struct mercury_flow *f, struct sk_buff *last,
					struct sk_buff *skb)
{
	struct mercury_skb_cb *cb = mercury_cb(skb);

	cb->pruned = 0;
	while (last && mercury_rank_of(last) > cb->rank) {
		last = mercury_cb(last)->chain_prev;
		cb->pruned = 1;
	}
	cb->chain_prev = last;
	cb->chain_next = NULL;
	if (last)
		mercury_cb(last)->chain_next = skb;
	else
		f->chain_head = skb;
}

static inline void mercury_flow_push(struct mercury_flow *f, struct sk_buff *skb)
{
	struct sk_buff *last = f->tail;

	skb->next = NULL;
	skb->prev = last;
	if (last)
		last->next = skb;
	else
		f->head = skb;
	f->tail = skb;
	f->qlen++;
	mercury_chain_append(f, last, skb);
}

static inline struct sk_buff *mercury_flow_pop_head(struct mercury_flow *f)
{
	struct sk_buff *skb = f->head;

	f->head = skb->next;
	if (f->head)
		f->head->prev = NULL;
	else
		f->tail = NULL;
	f->qlen--;

	if (skb == f->chain_head) {
		f->chain_head = mercury_cb(skb)->chain_next;
		if (f->chain_head)
			mercury_cb(f->chain_head)->chain_prev = NULL;
	}
	skb->next = NULL;
	skb->prev = NULL;
	return skb;
}

static inline struct sk_buff *mercury_flow_pop_tail(struct mercury_core *c,
						    struct mercury_flow *f)
{
	struct sk_buff *skb = f->tail;
	struct mercury_skb_cb *cb = mercury_cb(skb);
	struct sk_buff *last = cb->chain_prev;
	struct sk_buff *p;

	f->tail = skb->prev;
	if (f->tail)
		f->tail->next = NULL;
	else
		f->head = NULL;
	f->qlen--;

	if (last)
		mercury_cb(last)->chain_next = NULL;
	else
		f->chain_head = NULL;

	/* Re-thread the packets @skb had unlinked: those after @last. */
	if (cb->pruned && f->tail) {
		for (p = last ? last->next : f->head; p; p = p->next) {
			mercury_chain_append(f, last, p);
			last = p;
		}
		c->stat_chain_rebuilds++;
	}
	skb->next = NULL;
	skb->prev = NULL;
	return skb;
}

/* ---- queueing --------------------------------------------------------- */

static inline u32 mercury_bucket(const struct mercury_core *c,
				 struct sk_buff *skb, u32 rank)
{
	u32 b = reciprocal_scale(skb_get_hash(skb), c->nflows);

	/* Without flow order a flow's levels land in different buckets;
	 * consecutive ranks never collide for fewer than 'flows' levels.
	 */
	if (!c->flow_order)
		b = (b + rank) % c->nflows;
	return b;
}

/* Put @skb, already accounted to its level, into the flow table. */
static __always_inline void mercury_flow_insert(struct mercury_core *c,
						struct sk_buff *skb)
{
	u32 rank = mercury_rank_of(skb);
	struct mercury_flow *f = &c->t.flows[mercury_bucket(c, skb, rank)];

	mercury_flow_push(f, skb);
	if (f->qlen == 1) {
		f->deficit = c->quantum;
		mercury_flow_attach(c, f, rank);
		c->stat_flows++;
	} else if (rank < f->rank) {
		/* the flow inherits the urgency of its new packet */
		mercury_flow_detach(c, f);
		mercury_flow_attach(c, f, rank);
	}
}

/* Move the lone packet, if any, into the flow table. */
static inline void mercury_unsolo(struct mercury_core *c)
{
	struct sk_buff *skb = c->solo;

	if (skb) {
		c->solo = NULL;
		mercury_flow_insert(c, skb);
	}
}

/* Queue @skb, already classified into cb->rank. No limits, no sch stats. */
static __always_inline void mercury_insert(struct mercury_core *c,
					   struct sk_buff *skb)
{
	struct mercury_level *l = &c->t.levels[mercury_rank_of(skb)];

	l->qlen++;
	l->backlog += qdisc_pkt_len(skb);
	c->memory_usage += skb->truesize;
	if (!c->solo && !c->top) {
		c->solo = skb;
		return;
	}
	mercury_unsolo(c);
	mercury_flow_insert(c, skb);
}

/* Take a packet off its flow's level bookkeeping. No sch stats. */
static inline void mercury_account_out(struct mercury_core *c,
				       struct sk_buff *skb)
{
	struct mercury_level *l = &c->t.levels[mercury_rank_of(skb)];

	l->qlen--;
	l->backlog -= qdisc_pkt_len(skb);
	c->memory_usage -= skb->truesize;
}

/* Choose the next packet in service order and unlink it. @rank is
 * mercury_first_rank(), or the untagged rank when that holds a flow.
 */
static __always_inline struct sk_buff *mercury_pick(struct mercury_core *c, u32 rank)
{
	struct mercury_level *l = &c->t.levels[rank];
	struct mercury_flow *f;
	struct sk_buff *skb = c->solo;

	if (skb) {
		c->solo = NULL;
		mercury_account_out(c, skb);
		return skb;
	}
	for (;;) {
		f = list_first_entry(&l->flows, struct mercury_flow, node);
		if (f->deficit > 0)
			break;
		f->deficit += c->quantum;
		list_move_tail(&f->node, &l->flows);
	}
	skb = mercury_flow_pop_head(f);
	f->deficit -= qdisc_pkt_len(skb);
	mercury_flow_requeue(c, f);
	mercury_account_out(c, skb);
	return skb;
}

/* The newest packet of a flow at the least urgent level, unlinked, if it
 * is less urgent than @rank (-1: any); NULL when the arriving packet of
 * that rank should go instead.
 */
static inline struct sk_buff *mercury_victim(struct mercury_core *c, s64 rank)
{
	struct mercury_flow *f;
	struct sk_buff *skb;
	u32 last;

	mercury_unsolo(c);
	last = mercury_last_rank(c);
	if (last == MERCURY_NO_RANK)
		return NULL;
	f = list_last_entry(&c->t.levels[last].flows, struct mercury_flow,
			    node);
	if (mercury_rank_of(f->tail) <= rank)
		return NULL;
	skb = mercury_flow_pop_tail(c, f);
	mercury_flow_requeue(c, f);
	mercury_account_out(c, skb);
	c->t.levels[mercury_rank_of(skb)].drops++;
	return skb;
}

#endif /* _MERCURY_CORE_V1_H */
