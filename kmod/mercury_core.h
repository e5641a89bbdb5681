/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mercury_core.h	The packet-path data structure of sch_mercury.
 *
 * Levels with a three-word bitmap over them; flows found by key in a table
 * of small red-black trees; each flow's packets in an augmented red-black
 * tree by arrival with the subtree's most urgent rank; a tree of flows by
 * their newest packet for the drop policy; deficit round robin inside a
 * level; the untagged share. Everything enqueue, dequeue, peek and drop
 * touch, and nothing of netlink or the Qdisc. See the header comment of
 * sch_mercury.c and Documentation/sch_mercury.md for the design.
 *
 * Kept apart so that bench/ can compile these very functions in userspace
 * (bench/core/shim.h provides sk_buff and the kernel's own rbtree code)
 * and measure their cost against other priority queues. The includer
 * provides: struct sk_buff (rbnode, next, prev, truesize, cb),
 * qdisc_skb_cb(), qdisc_pkt_len(), qdisc_cb_private_validate(), the
 * rbtree and rbtree_augmented API, the list_head helpers, hash_64(),
 * fls(), BIT_ULL(), __ffs64(), fls64(), DIV_ROUND_UP(), U32_MAX, ENOMEM,
 * struct gnet_stats_basic_sync, and, declared before this file:
 *
 *	struct mercury_flow *mercury_flow_alloc(void);	(must not sleep)
 *	void mercury_flow_free(struct mercury_flow *f);
 */
#ifndef _MERCURY_CORE_H
#define _MERCURY_CORE_H

#include <linux/mercury.h>

#define MERCURY_MAX_RANKS	(TC_MERCURY_MAX_LEVELS + 1)
#define MERCURY_LEAF_WORDS(n)	DIV_ROUND_UP(n, 64)
#define MERCURY_MID_WORDS	MERCURY_LEAF_WORDS(MERCURY_LEAF_WORDS(MERCURY_MAX_RANKS))
#define MERCURY_NO_RANK		U32_MAX

/* With the untagged class first and no untagged_share given, untagged
 * packets get at most this percentage of the bytes while tagged packets
 * wait (Documentation/sch_mercury.md, "Untagged share").
 */
#define MERCURY_FIRST_SHARE	50

/* Per-packet state, in the 20 bytes of skb->cb a qdisc owns. The packet
 * itself is a node of its flow's tree through skb->rbnode (which overlays
 * next, prev and dev: the includer restores skb->dev when a packet leaves).
 */
struct mercury_skb_cb {
	u64	seq;		/* arrival order, qdisc-wide */
	u32	rank;		/* level index, 0 served first */
	u32	min_rank;	/* most urgent rank in this subtree of the flow */
};

/* A flow: one socket (or one hash value without a socket), and with flow
 * order off one rank of it. Allocated when its first packet arrives and
 * freed when its last one leaves.
 */
struct mercury_flow {
	struct rb_root_cached	pkts;		/* by arrival; leftmost: oldest */
	struct sk_buff		*tail;		/* newest packet */
	struct list_head	node;		/* in levels[rank].flows, or spares */
	int			deficit;	/* bytes */
	u32			rank;		/* level served at: its most urgent */
	u32			qlen;		/* packets */
	u32			frank;		/* flow order off: its packets' rank */
	unsigned long		key;		/* socket pointer, or hash << 1 | 1 */
	struct rb_node		hnode;		/* in t.buckets[bucket], by key */
	struct rb_node		tnode;		/* in c->tails, by its newest packet */
	u32			bucket;		/* index into t.buckets */
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
	u64			*leaf;		/* one bit per rank */
	struct rb_root		*buckets;	/* 1 << bucket_bits flow trees */
};

/* The packet-path state. */
struct mercury_core {
	struct mercury_tables	t;
	struct rb_root_cached	tails;			/* flows; leftmost: victim */
	u64			top;			/* bit per mid word */
	u64			mid[MERCURY_MID_WORDS];	/* bit per leaf word */
	u64			seq;			/* packets ever queued */
	s64			share_credit;		/* bytes x 100 */
	u32			quantum;		/* configured DRR bytes */
	u32			drr_quantum;		/* max(quantum, largest packet) */
	u32			bucket_bits;		/* log2 of the bucket count */
	u32			urank;			/* rank of the untagged class */
	u32			share;			/* untagged percent, 0: none */
	bool			flow_order;		/* a flow spans ranks */
	u32			memory_usage;		/* bytes of truesize */
	u32			nflows;			/* flows holding packets */
	u32			stat_levels;		/* ranks with flows */
	struct list_head	spares;			/* free flows kept */
	u32			nspares;		/* flows in spares */
	u32			keep_spares;		/* most flows kept free */
	u64			stat_share_forced;	/* served out of rank order */
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

static inline struct sk_buff *mercury_skb(struct rb_node *n)
{
	return rb_entry(n, struct sk_buff, rbnode);
}

/* The 'flows' option sizes the flow lookup table: @flows buckets, rounded
 * up to a power of two (at least two). Each bucket is a tree, so a crowded
 * bucket costs O(log flows), never a list walk, and the number of flows is
 * bounded by the queued packets, not by the table.
 */
static inline u32 mercury_bucket_bits(u32 flows)
{
	return flows > 2 ? fls(flows - 1) : 1;
}

static inline void mercury_core_init(struct mercury_core *c)
{
	c->tails = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&c->spares);
	c->keep_spares = 1;
}

/* A new configured DRR quantum. drr_quantum must stay at least every
 * queued packet's length (mercury_select), or peek and dequeue could pick
 * different flows: it rises at once, and comes down only when the queue
 * is empty (mercury_flow_requeue).
 */
static inline void mercury_set_quantum(struct mercury_core *c, u32 quantum)
{
	c->quantum = quantum;
	if (!c->nflows || quantum > c->drr_quantum)
		c->drr_quantum = quantum;
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

/* Most urgent rank holding a flow, or MERCURY_NO_RANK. */
static inline u32 mercury_first_rank(const struct mercury_core *c)
{
	u32 m, w;

	if (!c->top)
		return MERCURY_NO_RANK;
	m = __ffs64(c->top);
	w = m * 64 + __ffs64(c->mid[m]);
	return w * 64 + __ffs64(c->t.leaf[w]);
}

/* Most urgent rank above @rank holding a flow, or MERCURY_NO_RANK: at
 * most one masked word at each of the three depths.
 */
static inline u32 mercury_next_rank_after(const struct mercury_core *c,
					  u32 rank)
{
	u32 r = rank + 1, w = r / 64, m = w / 64;
	u64 bits;

	if (r >= MERCURY_MAX_RANKS || !c->top)
		return MERCURY_NO_RANK;
	if (c->mid[m] & BIT_ULL(w % 64)) {
		bits = c->t.leaf[w] & (~0ULL << (r % 64));
		if (bits)
			return w * 64 + __ffs64(bits);
	}
	bits = (w % 64 == 63) ? 0 : c->mid[m] & (~0ULL << (w % 64 + 1));
	if (!bits) {
		bits = (m == 63) ? 0 : c->top & (~0ULL << (m + 1));
		if (!bits)
			return MERCURY_NO_RANK;
		m = __ffs64(bits);
		bits = c->mid[m];
	}
	w = m * 64 + __ffs64(bits);
	return w * 64 + __ffs64(c->t.leaf[w]);
}

/* ---- flows on levels ------------------------------------------------- */

/* Only the flow at the head of a level sends, so every other flow on the
 * list has a positive deficit; a flow keeps that promise when it moves:
 * its deficit is above -drr_quantum (it was positive before its last
 * packet, no longer than drr_quantum), so one quantum makes it positive.
 */
static inline void mercury_flow_attach(struct mercury_core *c,
				       struct mercury_flow *f, u32 rank)
{
	struct mercury_level *l = &c->t.levels[rank];

	if (list_empty(&l->flows)) {
		mercury_bit_set(c, rank);
		c->stat_levels++;
	}
	if (f->deficit <= 0)
		f->deficit += c->drr_quantum;
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

/* ---- a flow's packets: augmented tree by arrival ---------------------- */

static inline u32 mercury_subtree_min(const struct rb_node *n)
{
	return n ? mercury_cb(rb_entry(n, struct sk_buff, rbnode))->min_rank :
		   MERCURY_NO_RANK;
}

/* Recompute @skb's subtree minimum; true if @exit and it did not change. */
static inline bool mercury_min_compute(struct sk_buff *skb, bool exit)
{
	struct mercury_skb_cb *cb = mercury_cb(skb);
	u32 m = cb->rank, s;

	s = mercury_subtree_min(skb->rbnode.rb_left);
	if (s < m)
		m = s;
	s = mercury_subtree_min(skb->rbnode.rb_right);
	if (s < m)
		m = s;
	if (exit && cb->min_rank == m)
		return true;
	cb->min_rank = m;
	return false;
}

static inline void mercury_min_propagate(struct rb_node *rb,
					 struct rb_node *stop)
{
	while (rb != stop) {
		if (mercury_min_compute(mercury_skb(rb), true))
			break;
		rb = rb_parent(rb);
	}
}

static inline void mercury_min_copy(struct rb_node *old, struct rb_node *new)
{
	mercury_cb(mercury_skb(new))->min_rank =
		mercury_cb(mercury_skb(old))->min_rank;
}

static inline void mercury_min_rotate(struct rb_node *old, struct rb_node *new)
{
	mercury_min_copy(old, new);
	mercury_min_compute(mercury_skb(old), false);
}

static const struct rb_augment_callbacks mercury_min_callbacks = {
	.propagate	= mercury_min_propagate,
	.copy		= mercury_min_copy,
	.rotate		= mercury_min_rotate,
};

/* Most urgent rank among the flow's packets: the root's subtree minimum. */
static inline u32 mercury_flow_min(const struct mercury_flow *f)
{
	return mercury_subtree_min(f->pkts.rb_root.rb_node);
}

/* Append @skb as the newest packet: the right child of the rightmost
 * node, then rebalance. O(log qlen) whatever the ranks.
 */
static inline void mercury_pkts_push(struct mercury_flow *f,
				     struct sk_buff *skb)
{
	struct rb_node *parent = f->tail ? &f->tail->rbnode : NULL;
	struct rb_node **link = parent ? &parent->rb_right :
					 &f->pkts.rb_root.rb_node;

	mercury_cb(skb)->min_rank = mercury_rank_of(skb);
	rb_link_node(&skb->rbnode, parent, link);
	if (parent)
		mercury_min_propagate(parent, NULL);
	rb_insert_augmented_cached(&skb->rbnode, &f->pkts, !parent,
				   &mercury_min_callbacks);
	f->tail = skb;
	f->qlen++;
}

static inline void mercury_pkts_erase(struct mercury_flow *f,
				      struct sk_buff *skb)
{
	if (skb == f->tail)
		f->tail = f->qlen > 1 ? mercury_skb(rb_prev(&skb->rbnode)) :
					NULL;
	rb_erase_augmented_cached(&skb->rbnode, &f->pkts,
				  &mercury_min_callbacks);
	f->qlen--;
	skb->next = NULL;
	skb->prev = NULL;
}

static inline struct sk_buff *mercury_flow_head(const struct mercury_flow *f)
{
	return mercury_skb(rb_first_cached(&f->pkts));
}

/* ---- flows by their newest packet, for the drop policy ---------------- */

/* Leftmost first: the least urgent newest packet, the newest among equals. */
static inline bool mercury_tail_before(struct rb_node *a,
				       const struct rb_node *b)
{
	const struct mercury_skb_cb *x, *y;

	x = mercury_cb(rb_entry(a, struct mercury_flow, tnode)->tail);
	y = mercury_cb(rb_entry(b, struct mercury_flow, tnode)->tail);
	return x->rank > y->rank || (x->rank == y->rank && x->seq > y->seq);
}

/* ---- flow lookup and life ---------------------------------------------- */

static inline u32 mercury_bucket_of(const struct mercury_core *c,
				    unsigned long key, u32 frank)
{
	return (u32)hash_64((u64)key + frank, c->bucket_bits);
}

static inline int mercury_key_cmp(unsigned long key, u32 frank,
				  const struct mercury_flow *f)
{
	if (key != f->key)
		return key < f->key ? -1 : 1;
	if (frank != f->frank)
		return frank < f->frank ? -1 : 1;
	return 0;
}

/* The flow of @key (and @rank without flow order), or NULL. */
static inline struct mercury_flow *mercury_flow_find(const struct mercury_core *c,
						     unsigned long key, u32 rank)
{
	u32 frank = c->flow_order ? 0 : rank;
	struct rb_node *n = c->t.buckets[mercury_bucket_of(c, key, frank)].rb_node;
	struct mercury_flow *f;
	int d;

	while (n) {
		f = rb_entry(n, struct mercury_flow, hnode);
		d = mercury_key_cmp(key, frank, f);
		if (!d)
			return f;
		n = d < 0 ? n->rb_left : n->rb_right;
	}
	return NULL;
}

/* A free flow, from the spares or the allocator; NULL without memory. */
static inline struct mercury_flow *mercury_flow_get(struct mercury_core *c)
{
	struct mercury_flow *f;

	if (!list_empty(&c->spares)) {
		f = list_first_entry(&c->spares, struct mercury_flow, node);
		list_del(&f->node);
		c->nspares--;
		return f;
	}
	return mercury_flow_alloc();
}

static inline void mercury_flow_put(struct mercury_core *c,
				    struct mercury_flow *f)
{
	if (c->nspares < c->keep_spares) {
		list_add(&f->node, &c->spares);
		c->nspares++;
	} else {
		mercury_flow_free(f);
	}
}

/* Keep at most @keep free flows from now on. */
static inline void mercury_spares_trim(struct mercury_core *c, u32 keep)
{
	struct mercury_flow *f;

	c->keep_spares = keep;
	while (c->nspares > keep) {
		f = list_first_entry(&c->spares, struct mercury_flow, node);
		list_del(&f->node);
		c->nspares--;
		mercury_flow_free(f);
	}
}

/* Make sure the packet of @key and @rank can be queued: its flow exists,
 * or there is memory for a new one (kept as a spare). Called before the
 * drop policy evicts anything for it.
 */
static inline int mercury_flow_reserve(struct mercury_core *c,
				       unsigned long key, u32 rank)
{
	struct mercury_flow *f;

	if (mercury_flow_find(c, key, rank))
		return 0;
	if (!list_empty(&c->spares))
		return 0;
	f = mercury_flow_alloc();
	if (!f)
		return -ENOMEM;
	list_add(&f->node, &c->spares);
	c->nspares++;
	return 0;
}

static inline struct mercury_flow *mercury_flow_create(struct mercury_core *c,
						       unsigned long key, u32 rank)
{
	u32 frank = c->flow_order ? 0 : rank;
	u32 b = mercury_bucket_of(c, key, frank);
	struct rb_node **link = &c->t.buckets[b].rb_node, *parent = NULL;
	struct mercury_flow *f;

	while (*link) {
		parent = *link;
		f = rb_entry(parent, struct mercury_flow, hnode);
		link = mercury_key_cmp(key, frank, f) < 0 ? &parent->rb_left :
							    &parent->rb_right;
	}
	f = mercury_flow_get(c);
	if (!f)
		return NULL;
	f->pkts = RB_ROOT_CACHED;
	f->tail = NULL;
	f->qlen = 0;
	f->key = key;
	f->frank = frank;
	f->bucket = b;
	f->deficit = c->drr_quantum;
	rb_link_node(&f->hnode, parent, link);
	rb_insert_color(&f->hnode, &c->t.buckets[b]);
	c->nflows++;
	return f;
}

/* After the flow lost a packet: move it to the level of its most urgent
 * remaining packet, or free it when it is empty.
 */
static inline void mercury_flow_requeue(struct mercury_core *c,
					struct mercury_flow *f)
{
	u32 rank;

	if (!f->qlen) {
		mercury_flow_detach(c, f);
		rb_erase(&f->hnode, &c->t.buckets[f->bucket]);
		/* an empty queue is the one moment drr_quantum may come back
		 * down to the configured quantum (mercury_select)
		 */
		if (!--c->nflows)
			c->drr_quantum = c->quantum;
		mercury_flow_put(c, f);
		return;
	}
	/* a flow that keeps its level keeps its place in the round */
	rank = mercury_flow_min(f);
	if (rank != f->rank) {
		mercury_flow_detach(c, f);
		mercury_flow_attach(c, f, rank);
	}
}

/* ---- queueing --------------------------------------------------------- */

/* Queue @skb, already classified into cb->rank, in the flow of @key.
 * No limits, no sch stats. -ENOMEM: no memory for a new flow, nothing
 * changed.
 */
static __always_inline int mercury_insert(struct mercury_core *c,
					  struct sk_buff *skb,
					  unsigned long key)
{
	u32 rank = mercury_rank_of(skb), len = qdisc_pkt_len(skb);
	struct mercury_level *l = &c->t.levels[rank];
	struct mercury_flow *f;

	f = mercury_flow_find(c, key, rank);
	if (!f) {
		f = mercury_flow_create(c, key, rank);
		if (!f)
			return -ENOMEM;
	}
	if (len > c->drr_quantum)
		c->drr_quantum = len;
	mercury_cb(skb)->seq = c->seq++;
	if (f->qlen)
		rb_erase_cached(&f->tnode, &c->tails);
	mercury_pkts_push(f, skb);
	rb_add_cached(&f->tnode, &c->tails, mercury_tail_before);
	if (f->qlen == 1) {
		mercury_flow_attach(c, f, rank);
	} else if (rank < f->rank) {
		/* the flow inherits the urgency of its new packet */
		mercury_flow_detach(c, f);
		mercury_flow_attach(c, f, rank);
	}
	l->qlen++;
	l->backlog += len;
	c->memory_usage += skb->truesize;
	return 0;
}

/* Take a packet off its level's counters. No sch stats. */
static inline void mercury_account_out(struct mercury_core *c,
				       struct sk_buff *skb)
{
	struct mercury_level *l = &c->t.levels[mercury_rank_of(skb)];

	l->qlen--;
	l->backlog -= qdisc_pkt_len(skb);
	c->memory_usage -= skb->truesize;
}

/* ---- service order ----------------------------------------------------- */

/* Does the untagged class wait, and does tagged traffic? */
static inline bool mercury_both_wait(const struct mercury_core *c)
{
	bool u = !list_empty(&c->t.levels[c->urank].flows);

	return u && c->stat_levels > 1;
}

/* After a packet left: a debt stays, a credit only while both wait. */
static inline void mercury_share_settle(struct mercury_core *c)
{
	if (c->share_credit > 0 && !mercury_both_wait(c))
		c->share_credit = 0;
}

/* The untagged share is a token bucket one packet deep, counted in
 * share_credit (bytes x 100): while tagged packets wait, serving the
 * untagged class costs (100 - share) per byte and serving tagged packets
 * earns share per byte, also while the untagged class is empty; the
 * untagged class is served when the credit is not negative. So over any
 * time during which tagged packets wait, the untagged class gets at most
 * its share of the bytes plus one packet, however its packets arrive (a
 * source that never has two packets queued included), and at least its
 * share when it is backlogged. The credit never stays positive while
 * either class is empty: a class cannot bank service for later.
 */
static inline void mercury_share_charge(struct mercury_core *c, bool both,
					bool untagged, u32 len)
{
	if (!untagged)
		c->share_credit += (s64)len * c->share;
	else if (both)
		c->share_credit -= (s64)len * (100 - c->share);
	mercury_share_settle(c);
}

/* The rank the next packet comes from, or MERCURY_NO_RANK; no side
 * effects, so peek and dequeue agree. With a share, while both the
 * untagged class and tagged traffic wait, the untagged class is served
 * exactly when its credit is not negative, whether it is placed first or
 * last (mercury_share_charge): it gets the share of the bytes, no more
 * (first) and no less (last).
 */
static inline u32 mercury_next_rank(const struct mercury_core *c)
{
	u32 first = mercury_first_rank(c);

	if (!c->share || first == MERCURY_NO_RANK || !mercury_both_wait(c))
		return first;
	if (c->share_credit >= 0)
		return c->urank;
	return first != c->urank ? first :
	       mercury_next_rank_after(c, c->urank);
}

/* The flow the next packet of @rank comes from. Deficit round robin: the
 * head flow sends while its deficit is positive; then it gets a quantum
 * and goes to the tail. Since every flow but the head has a positive
 * deficit (mercury_flow_attach), the new head can send: one step, never a
 * loop, whatever the quantum and packet sizes. drr_quantum is at least
 * the largest packet queued, the condition under which DRR is byte-fair
 * (each backlogged flow of a level gets drr_quantum bytes per round, give
 * or take one packet) and O(1) (Shreedhar and Varghese, 1996).
 */
static inline struct mercury_flow *mercury_select(struct mercury_core *c,
						  u32 rank)
{
	struct mercury_level *l = &c->t.levels[rank];
	struct mercury_flow *f;

	f = list_first_entry(&l->flows, struct mercury_flow, node);
	if (f->deficit > 0)
		return f;
	f->deficit += c->drr_quantum;
	list_move_tail(&f->node, &l->flows);
	return list_first_entry(&l->flows, struct mercury_flow, node);
}

/* The packet the next mercury_pick(c, @rank) returns, left queued. The
 * round-robin step it may take is the one that dequeue would take; no
 * counter moves.
 */
static inline struct sk_buff *mercury_core_peek(struct mercury_core *c, u32 rank)
{
	return mercury_flow_head(mercury_select(c, rank));
}

/* Unlink the next packet of @rank (from mercury_next_rank()), charging
 * the DRR deficit and the untagged share.
 */
static __always_inline struct sk_buff *mercury_pick(struct mercury_core *c,
						    u32 rank)
{
	struct mercury_flow *f = mercury_select(c, rank);
	struct sk_buff *skb = mercury_flow_head(f);
	bool both = c->share && mercury_both_wait(c);
	u32 len = qdisc_pkt_len(skb);

	if (both && rank != mercury_first_rank(c))
		c->stat_share_forced++;
	mercury_pkts_erase(f, skb);
	f->deficit -= len;
	/* the newest packet changes only when the flow empties */
	if (!f->qlen)
		rb_erase_cached(&f->tnode, &c->tails);
	mercury_flow_requeue(c, f);
	mercury_account_out(c, skb);
	if (c->share)
		mercury_share_charge(c, both, rank == c->urank, len);
	return skb;
}

/* The victim for an arriving packet of @rank (-1: for any): the newest
 * packet of the flow whose newest packet is least urgent, the newest such
 * among equals, unlinked and counted in its level's drops, if it is less
 * urgent than @rank; NULL when the arriving packet should go instead.
 * Only a flow's newest packet is ever dropped, so no packet that has
 * others of its flow behind it is. O(log flows + log qlen).
 */
static inline struct sk_buff *mercury_victim(struct mercury_core *c, s64 rank)
{
	struct rb_node *n = rb_first_cached(&c->tails);
	struct mercury_flow *f;
	struct sk_buff *skb;

	if (!n)
		return NULL;
	f = rb_entry(n, struct mercury_flow, tnode);
	skb = f->tail;
	if (mercury_rank_of(skb) <= rank)
		return NULL;
	rb_erase_cached(&f->tnode, &c->tails);
	mercury_pkts_erase(f, skb);
	if (f->qlen)
		rb_add_cached(&f->tnode, &c->tails, mercury_tail_before);
	mercury_flow_requeue(c, f);
	mercury_account_out(c, skb);
	c->t.levels[mercury_rank_of(skb)].drops++;
	mercury_share_settle(c);
	return skb;
}

/* Would mercury_victim(c, @rank), called until it has freed @pkts packets
 * and @bytes of truesize, get there? Nothing changes. mercury_victim takes
 * a flow's newest packet while some flow's newest is less urgent than
 * @rank, so it can take exactly the newest packets of each flow that are
 * all less urgent than @rank; their order does not matter here. Looks at
 * no more packets than it counts, and at flows by their newest packet,
 * least urgent first.
 */
static inline bool mercury_can_evict(const struct mercury_core *c, s64 rank,
				     u32 pkts, u64 bytes)
{
	struct rb_node *n, *p;
	struct mercury_flow *f;
	struct sk_buff *skb;

	for (n = rb_first_cached(&c->tails); n; n = rb_next(n)) {
		f = rb_entry(n, struct mercury_flow, tnode);
		for (p = &f->tail->rbnode; p; p = rb_prev(p)) {
			skb = mercury_skb(p);
			if (mercury_rank_of(skb) <= rank)
				break;
			pkts -= pkts ? 1 : 0;
			bytes -= min_t(u64, bytes, skb->truesize);
			if (!pkts && !bytes)
				return true;
		}
		/* the next flows' newest packets are as urgent or more */
		if (p == &f->tail->rbnode)
			break;
	}
	return !pkts && !bytes;
}

#endif /* _MERCURY_CORE_H */
