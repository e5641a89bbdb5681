// SPDX-License-Identifier: GPL-2.0
/*
 * sch_mercury.c	Mercury: layer-priority packet scheduling for DNN training.
 *
 * Data-parallel training sends one gradient tensor per layer and iteration.
 * Backward produces them last layer first, but the next forward pass needs
 * them first layer first. Mercury sends the most urgent queued packet
 * first, so the bytes the next iteration needs soonest leave soonest.
 *
 * Contract
 *  - Each packet carries a tag, read once at enqueue from skb->mark,
 *    skb->priority or the DSCP of its IPv4/IPv6 header as
 *    (value >> shift) & mask. Tag 1 is the most urgent; tags 1..levels
 *    are tagged levels, tags above levels count as levels (the least
 *    urgent tagged level). Tag 0 goes to the untagged class, placed
 *    before or after all tagged levels.
 *  - A flow is a socket (skb->sk, as sch_fq keys it); packets without a
 *    full, connected socket (forwarded traffic, SYN-ACKs of listeners,
 *    unconnected UDP) are keyed by their whole skb_get_hash(). No two
 *    connections share a FIFO, and a socket that re-picks its hash (TCP
 *    after a timeout) stays in its flow. With flow_order on, packets of a
 *    flow never overtake each other and the flow is served at the rank of
 *    its most urgent queued packet, or more urgently: its ranks are kept
 *    as at most MERCURY_RUNS runs of equal ranks, and a run beyond merges
 *    the two oldest at the more urgent rank, so a flow whose queued tags
 *    alternate more often than that may be served ahead of its own tags,
 *    never behind them. With flow_order off a flow is one socket at one
 *    rank. Flows at one level share it by bytes (deficit round robin).
 *  - Drops (limit packets, memory_limit bytes of truesize): the victim is
 *    the newest packet of the flow whose newest packet is least urgent,
 *    among equals the flow whose newest packet changed last (arrived, or
 *    became the newest by a drop); an arriving packet is dropped instead
 *    when it would itself be the victim. So a packet with others of its
 *    flow behind it is never dropped, with flow_order off the victim is
 *    a least urgent packet queued (of one socket, the newest), and a more
 *    urgent packet is never dropped to admit a less urgent one. Packets
 *    are evicted only if that makes room for the arrival; otherwise the
 *    arrival alone is dropped (a packet larger than memory_limit by
 *    itself, too). Evicting from the arrival's own flow returns
 *    NET_XMIT_CN.
 *  - flow_limit (0, none, by default): an arrival whose flow already
 *    holds flow_limit packets is dropped, before and instead of any
 *    eviction, whatever its urgency.
 *  - Untagged share: while untagged and tagged packets both wait, the
 *    untagged class gets untagged_share percent of the bytes (at least,
 *    when it is last; at most, when it is first, MERCURY_FIRST_SHARE by
 *    default), and a debt it ran up stays while tagged packets wait, so
 *    neither placement can starve the other class, not even a source
 *    that never has two packets queued. With untagged last, untagged
 *    GSO packets are queued as their segments, so a tagged packet waits
 *    behind at most one untagged segment.
 *  - peek returns the packet the next dequeue returns, and leaves it
 *    queued; share credit and counters move at dequeue only.
 *  - With bypass on (the default), a packet that finds the qdisc empty
 *    and the device free is sent by the core at once, as with pfifo_fast
 *    and fq_codel: counted in the qdisc's statistics, not in its level's.
 *  - Every level is a class with its own statistics: minor N for tag N
 *    (levels is at most 65534, so every tag has one), minor ffff for the
 *    untagged class.
 *
 * Data structures (Documentation/sch_mercury.md): enqueue, dequeue, peek
 * and each drop are O(1), but for the flow lookup, which walks one
 * bucket's tree, and no tree is written while a flow's key stays known.
 *  - Levels indexed by rank (0 first), with two sets of ranks, each a
 *    three-level bitmap: the ranks flows are served at (first and next in
 *    three word operations) and the ranks of flows' newest packets (last:
 *    the drop victim's).
 *  - A level lists the flows served at it (round robin) and the flows
 *    whose newest packet has its rank (most recently changed first).
 *  - A flow's packets are a list through skb->next and skb->prev: push
 *    at the tail, pop at the head, drop at the tail. Its served rank is
 *    the minimum over at most MERCURY_RUNS runs.
 *  - Flows come from a kmem_cache (GFP_ATOMIC; a packet whose flow cannot
 *    be allocated is dropped and counted) and are found by key in a table
 *    of 'flows' small red-black trees. An empty flow stays there, idle,
 *    until more than 'flows' are idle: then the oldest is reused or freed.
 *  - DRR with a quantum of at least the largest packet queued: the flow
 *    to serve is found in one step, whatever the configured quantum.
 *
 * Locking: enqueue, dequeue and reset run under the qdisc root lock.
 * change() validates and allocates first, then applies under
 * sch_tree_lock(); structural changes re-queue every packet in dequeue
 * order, so no packet is lost and no flow is reordered.
 */

#include <linux/bitops.h>
#include <linux/errno.h>
#include <linux/hash.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/rbtree.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/types.h>
#include <linux/if_vlan.h>
#include <net/netlink.h>
#include <net/pkt_sched.h>
#include <net/sch_generic.h>
#include <net/sock.h>
#include <net/tcp_states.h>
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

/* A flow's served rank is the most urgent of at most this many runs of
 * equal ranks, in arrival order (mercury_runs_push). Eight keep a
 * gradient stream exact: its ranks only ever grow more urgent within an
 * iteration, and merging the oldest runs never changes the minimum while
 * the more urgent of the two is queued.
 */
#define MERCURY_RUNS		8

/* Per-packet state, in the 20 bytes of skb->cb a qdisc owns. A flow's
 * packets are a list through skb->next and skb->prev; the oldest one's
 * prev is not kept (a dequeue then touches one packet, not two).
 */
struct mercury_skb_cb {
	u32	rank;		/* level index, 0 served first */
};

/* @count consecutive packets of a flow counted at @rank. */
struct mercury_run {
	u32	rank;
	u32	count;
};

/* A flow: one socket (or one hash value without a socket), and with flow
 * order off one rank of it. A flow that empties stays in the lookup table
 * on the idle list, so a flow that sends in bursts (one packet queued at
 * a time, under a batched dequeue) costs no allocation and no tree write.
 */
struct mercury_flow {
	/* packet path */
	struct sk_buff		*head;		/* oldest packet */
	struct sk_buff		*tail;		/* newest packet */
	struct list_head	node;		/* in levels[rank].flows, or idle */
	struct list_head	tnode;		/* in levels[tail rank].tails */
	int			deficit;	/* bytes */
	u32			rank;		/* level served at */
	u32			qlen;		/* packets */
	u8			first_run;	/* index of the oldest run */
	u8			nruns;		/* runs in use */
	struct mercury_run	runs[MERCURY_RUNS];	/* a ring, oldest first */

	/* lookup */
	unsigned long		key;		/* socket pointer, or hash << 1 | 1 */
	u32			key_rank;	/* flow order off: its packets' rank */
	u32			bucket;		/* index into t.buckets */
	struct rb_node		hnode;		/* in t.buckets[bucket], by key */
};

/* One level. @flows holds the flows served at this rank (round robin),
 * @tails the flows whose newest packet has this rank (the drop policy's
 * candidates, most recently changed first); the counters count packets
 * by their own tag.
 */
struct mercury_level {
	struct list_head	flows;		/* round-robin list of flows */
	struct list_head	tails;		/* flows by their newest packet */
	u32			nflows;		/* flows in @flows */
	u32			qlen;		/* packets queued */
	u32			backlog;	/* bytes queued */
	u32			drops;		/* packets dropped */
	struct gnet_stats_basic_sync bstats;	/* packets and bytes sent */
};

/* A set of ranks: one bit per rank in @leaf (one of the tables), one per
 * leaf word in @mid, one per mid word in @top. First, last, next and
 * previous member in three word operations.
 */
struct mercury_ranks {
	u64	top;
	u64	mid[MERCURY_MID_WORDS];
	u64	*leaf;
};

/* Everything whose size depends on the configuration. */
struct mercury_tables {
	struct mercury_level	*levels;	/* nlevels + 1 entries */
	u64			*served_leaf;	/* ranks holding flows */
	u64			*tails_leaf;	/* ranks of some flow's tail */
	struct rb_root		*buckets;	/* 1 << bucket_bits flow trees */
};

struct mercury_config {
	u32	levels;		/* tagged levels */
	u32	flows;		/* flow lookup buckets */
	u32	mask;		/* tag mask */
	u32	limit;		/* packets */
	u32	memory_limit;	/* bytes of truesize */
	u32	quantum;	/* bytes */
	u32	flow_limit;	/* packets a flow may hold, 0: no limit */
	u8	source;		/* TC_MERCURY_TAG_* */
	u8	shift;		/* bits */
	u8	untagged;	/* TC_MERCURY_UNTAGGED_* */
	u8	share;		/* percent */
	u8	flow_order;	/* bool */
	u8	bypass;		/* bool: TCQ_F_CAN_BYPASS */
};

struct mercury_sched_data {
	/* packet path: enqueue, dequeue and peek */
	struct mercury_tables	t;
	struct mercury_ranks	served;		/* ranks holding flows */
	struct mercury_ranks	tails;		/* ranks of flows' newest packets */
	s64			share_credit;	/* bytes x 100 */
	u32			drr_quantum;	/* max(quantum, largest packet) */
	u32			bucket_bits;	/* log2 of the bucket count */
	u32			untagged_rank;	/* rank of tag 0 */
	u32			share;		/* untagged percent, 0: none */
	u32			active_levels;	/* ranks holding flows */
	u32			nflows;		/* flows holding packets */
	u32			memory_usage;	/* bytes of truesize */
	struct list_head	idle;		/* empty flows still in buckets */
	u32			nidle;		/* flows in idle */
	u32			keep_idle;	/* most idle flows kept */
	struct list_head	spares;		/* free flows, in no bucket */
	u32			nspares;	/* flows in spares */
	u32			keep_spares;	/* most free flows kept */

	/* configuration: written by change(), read by dump() */
	struct mercury_config	cfg;

	/* statistics */
	u32			stat_most_urgent;	/* smallest tag queued */
	u64			stat_drops_limit;	/* packets */
	u64			stat_drops_memory;	/* packets */
	u64			stat_drops_flows;	/* packets: no memory for a flow */
	u64			stat_drops_flow_limit;	/* packets */
	u64			stat_inversions_avoided;	/* packets */
	u64			stat_untagged_packets;	/* segments */
	u64			stat_untagged_bytes;	/* bytes */
	u64			stat_share_forced;	/* packets served out of rank order */
};

static struct kmem_cache *mercury_flow_cachep __read_mostly;

static struct mercury_skb_cb *mercury_cb(const struct sk_buff *skb)
{
	qdisc_cb_private_validate(skb, sizeof(struct mercury_skb_cb));
	return (struct mercury_skb_cb *)qdisc_skb_cb(skb)->data;
}

static u32 mercury_rank_of(const struct sk_buff *skb)
{
	return mercury_cb(skb)->rank;
}

/* The 'flows' option sizes the flow lookup table: @flows buckets, rounded
 * up to a power of two (at least two). Each bucket is a tree, so a crowded
 * bucket costs O(log flows), never a list walk, and the number of flows is
 * bounded by the queued packets plus the idle flows kept, not by the table.
 */
static u32 mercury_bucket_bits(u32 flows)
{
	return flows > 2 ? fls(flows - 1) : 1;
}

/* A new configured DRR quantum. drr_quantum must stay at least every
 * queued packet's length (mercury_select), or peek and dequeue could pick
 * different flows: it rises at once, and comes down only when the queue
 * is empty (mercury_flow_empty).
 */
static void mercury_set_quantum(struct mercury_sched_data *q, u32 quantum)
{
	WRITE_ONCE(q->cfg.quantum, quantum);
	if (!q->nflows || quantum > q->drr_quantum)
		q->drr_quantum = quantum;
}

/* ---- sets of ranks ----------------------------------------------------- */

static void mercury_ranks_add(struct mercury_ranks *s, u32 rank)
{
	u32 w = rank / 64;

	s->leaf[w] |= BIT_ULL(rank % 64);
	s->mid[w / 64] |= BIT_ULL(w % 64);
	s->top |= BIT_ULL(w / 64);
}

static void mercury_ranks_del(struct mercury_ranks *s, u32 rank)
{
	u32 w = rank / 64;

	s->leaf[w] &= ~BIT_ULL(rank % 64);
	if (s->leaf[w])
		return;
	s->mid[w / 64] &= ~BIT_ULL(w % 64);
	if (s->mid[w / 64])
		return;
	s->top &= ~BIT_ULL(w / 64);
}

/* Most urgent member, or MERCURY_NO_RANK. */
static u32 mercury_ranks_first(const struct mercury_ranks *s)
{
	u32 m, w;

	if (!s->top)
		return MERCURY_NO_RANK;
	m = __ffs64(s->top);
	w = m * 64 + __ffs64(s->mid[m]);
	return w * 64 + __ffs64(s->leaf[w]);
}

/* Least urgent member, or MERCURY_NO_RANK. */
static u32 mercury_ranks_last(const struct mercury_ranks *s)
{
	u32 m, w;

	if (!s->top)
		return MERCURY_NO_RANK;
	m = __fls(s->top);
	w = m * 64 + __fls(s->mid[m]);
	return w * 64 + __fls(s->leaf[w]);
}

/* Most urgent member after @rank, or MERCURY_NO_RANK: at most one masked
 * word at each of the three depths.
 */
static u32 mercury_ranks_next(const struct mercury_ranks *s, u32 rank)
{
	u32 r = rank + 1, w = r / 64, m = w / 64;
	u64 bits;

	if (r >= MERCURY_MAX_RANKS || !s->top)
		return MERCURY_NO_RANK;
	if (s->mid[m] & BIT_ULL(w % 64)) {
		bits = s->leaf[w] & (~0ULL << (r % 64));
		if (bits)
			return w * 64 + __ffs64(bits);
	}
	bits = (w % 64 == 63) ? 0 : s->mid[m] & (~0ULL << (w % 64 + 1));
	if (!bits) {
		bits = (m == 63) ? 0 : s->top & (~0ULL << (m + 1));
		if (!bits)
			return MERCURY_NO_RANK;
		m = __ffs64(bits);
		bits = s->mid[m];
	}
	w = m * 64 + __ffs64(bits);
	return w * 64 + __ffs64(s->leaf[w]);
}

/* Least urgent member before @rank, or MERCURY_NO_RANK. */
static u32 mercury_ranks_prev(const struct mercury_ranks *s, u32 rank)
{
	u32 w, m;
	u64 bits;

	if (!rank || !s->top)
		return MERCURY_NO_RANK;
	rank--;
	w = rank / 64;
	m = w / 64;
	if (s->mid[m] & BIT_ULL(w % 64)) {
		bits = s->leaf[w] & (~0ULL >> (63 - rank % 64));
		if (bits)
			return w * 64 + __fls(bits);
	}
	bits = (w % 64 == 0) ? 0 : s->mid[m] & (~0ULL >> (64 - w % 64));
	if (!bits) {
		bits = (m == 0) ? 0 : s->top & (~0ULL >> (64 - m));
		if (!bits)
			return MERCURY_NO_RANK;
		m = __fls(bits);
		bits = s->mid[m];
	}
	w = m * 64 + __fls(bits);
	return w * 64 + __fls(s->leaf[w]);
}

static void mercury_ranks_init(struct mercury_ranks *s, u64 *leaf)
{
	s->top = 0;
	memset(s->mid, 0, sizeof(s->mid));
	s->leaf = leaf;
}

/* ---- flows on levels ------------------------------------------------- */

/* Only the flow at the head of a level sends, so every other flow on the
 * list has a positive deficit; a flow keeps that promise when it moves:
 * its deficit is above -drr_quantum (it was positive before its last
 * packet, no longer than drr_quantum), so one quantum makes it positive.
 */
static void mercury_flow_attach(struct mercury_sched_data *q,
				struct mercury_flow *f, u32 rank)
{
	struct mercury_level *l = &q->t.levels[rank];

	if (list_empty(&l->flows)) {
		mercury_ranks_add(&q->served, rank);
		q->active_levels++;
	}
	if (f->deficit <= 0)
		f->deficit += q->drr_quantum;
	list_add_tail(&f->node, &l->flows);
	l->nflows++;
	f->rank = rank;
}

static void mercury_flow_detach(struct mercury_sched_data *q,
				struct mercury_flow *f)
{
	struct mercury_level *l = &q->t.levels[f->rank];

	list_del(&f->node);
	l->nflows--;
	if (list_empty(&l->flows)) {
		mercury_ranks_del(&q->served, f->rank);
		q->active_levels--;
	}
}

/* Serve @f at @rank, keeping its place in the round if it stays. */
static void mercury_flow_move(struct mercury_sched_data *q,
			      struct mercury_flow *f, u32 rank)
{
	if (rank == f->rank)
		return;
	mercury_flow_detach(q, f);
	mercury_flow_attach(q, f, rank);
}

/* ---- flows by their newest packet, for the drop policy ---------------- */

/* @f, whose newest packet had rank @old, no longer has one. */
static void mercury_tail_clear(struct mercury_sched_data *q,
			       struct mercury_flow *f, u32 old)
{
	list_del(&f->tnode);
	if (list_empty(&q->t.levels[old].tails))
		mercury_ranks_del(&q->tails, old);
}

/* @f's newest packet changed from one of rank @old (MERCURY_NO_RANK: it
 * had none): it goes first among the flows whose newest packet has the
 * same rank.
 */
static void mercury_tail_set(struct mercury_sched_data *q,
			     struct mercury_flow *f, u32 old)
{
	u32 rank = mercury_rank_of(f->tail);
	struct mercury_level *l = &q->t.levels[rank];

	if (old == rank) {
		list_move(&f->tnode, &l->tails);
		return;
	}
	if (old != MERCURY_NO_RANK)
		mercury_tail_clear(q, f, old);
	if (list_empty(&l->tails))
		mercury_ranks_add(&q->tails, rank);
	list_add(&f->tnode, &l->tails);
}

/* ---- a flow's packets: a list, and its ranks in runs ------------------ */

static struct mercury_run *mercury_run(struct mercury_flow *f, u32 i)
{
	return &f->runs[(f->first_run + i) % MERCURY_RUNS];
}

/* Most urgent rank over the runs: the rank the flow is served at. */
static u32 mercury_runs_min(struct mercury_flow *f)
{
	u32 i, m = MERCURY_NO_RANK;

	for (i = 0; i < f->nruns; i++)
		m = min(m, mercury_run(f, i)->rank);
	return m;
}

/* Count a newest packet of @rank. A new run beyond MERCURY_RUNS merges
 * the two oldest into one at the more urgent of their ranks: the minimum
 * does not change, and afterwards the flow may be served more urgently
 * than its own packets' tags, never less.
 */
static void mercury_runs_push(struct mercury_flow *f, u32 rank)
{
	struct mercury_run *r, *o;

	if (f->nruns) {
		r = mercury_run(f, f->nruns - 1);
		if (r->rank == rank) {
			r->count++;
			return;
		}
	}
	if (f->nruns == MERCURY_RUNS) {
		o = mercury_run(f, 0);
		r = mercury_run(f, 1);
		r->rank = min(r->rank, o->rank);
		r->count += o->count;
		f->first_run = (f->first_run + 1) % MERCURY_RUNS;
		f->nruns--;
	}
	r = mercury_run(f, f->nruns++);
	r->rank = rank;
	r->count = 1;
}

/* Uncount the oldest (@head) or the newest packet; true if a run ended. */
static bool mercury_runs_pop(struct mercury_flow *f, bool head)
{
	struct mercury_run *r = mercury_run(f, head ? 0 : f->nruns - 1);

	if (--r->count)
		return false;
	if (head)
		f->first_run = (f->first_run + 1) % MERCURY_RUNS;
	f->nruns--;
	return true;
}

static void mercury_pkts_push(struct mercury_flow *f, struct sk_buff *skb)
{
	skb->next = NULL;
	skb->prev = f->tail;
	if (f->qlen)
		f->tail->next = skb;
	else
		f->head = skb;
	f->tail = skb;
	f->qlen++;
	mercury_runs_push(f, mercury_rank_of(skb));
}

/* Unlink the oldest packet; true if the flow's ranks may have changed. */
static bool mercury_pkts_pop_head(struct mercury_flow *f)
{
	struct sk_buff *skb = f->head;

	f->head = skb->next;
	if (!f->head)
		f->tail = NULL;
	f->qlen--;
	skb_mark_not_on_list(skb);
	skb->prev = NULL;
	return mercury_runs_pop(f, true);
}

static bool mercury_pkts_pop_tail(struct mercury_flow *f)
{
	struct sk_buff *skb = f->tail;

	if (--f->qlen) {
		f->tail = skb->prev;
		f->tail->next = NULL;
	} else {
		f->head = NULL;
		f->tail = NULL;
	}
	skb->prev = NULL;
	return mercury_runs_pop(f, false);
}

static struct sk_buff *mercury_flow_head(const struct mercury_flow *f)
{
	return f->head;
}

/* ---- flow lookup and life ---------------------------------------------- */

static u32 mercury_bucket_of(const struct mercury_sched_data *q,
			     unsigned long key, u32 key_rank)
{
	return (u32)hash_64((u64)key + key_rank, q->bucket_bits);
}

static int mercury_key_cmp(unsigned long key, u32 key_rank,
			   const struct mercury_flow *f)
{
	if (key != f->key)
		return key < f->key ? -1 : 1;
	if (key_rank != f->key_rank)
		return key_rank < f->key_rank ? -1 : 1;
	return 0;
}

/* The flow of @key (and @rank without flow order), or NULL; an idle
 * flow (qlen 0) included.
 */
static struct mercury_flow *mercury_flow_find(const struct mercury_sched_data *q,
					      unsigned long key, u32 rank)
{
	u32 key_rank = q->cfg.flow_order ? 0 : rank;
	struct rb_node *n = q->t.buckets[mercury_bucket_of(q, key, key_rank)].rb_node;
	struct mercury_flow *f;
	int d;

	while (n) {
		f = rb_entry(n, struct mercury_flow, hnode);
		d = mercury_key_cmp(key, key_rank, f);
		if (!d)
			return f;
		n = d < 0 ? n->rb_left : n->rb_right;
	}
	return NULL;
}

/* Take the oldest idle flow out of the lookup table. */
static struct mercury_flow *mercury_idle_take(struct mercury_sched_data *q)
{
	struct mercury_flow *f;

	f = list_first_entry(&q->idle, struct mercury_flow, node);
	list_del(&f->node);
	rb_erase(&f->hnode, &q->t.buckets[f->bucket]);
	q->nidle--;
	return f;
}

/* A free flow: a spare, the oldest idle flow when as many are kept as
 * allowed, or a new one; NULL without memory.
 */
static struct mercury_flow *mercury_flow_get(struct mercury_sched_data *q)
{
	struct mercury_flow *f;

	if (!list_empty(&q->spares)) {
		f = list_first_entry(&q->spares, struct mercury_flow, node);
		list_del(&f->node);
		q->nspares--;
		return f;
	}
	if (q->nidle && q->nidle >= q->keep_idle)
		return mercury_idle_take(q);
	return kmem_cache_alloc(mercury_flow_cachep, GFP_ATOMIC | __GFP_NOWARN);
}

static void mercury_flow_put(struct mercury_sched_data *q,
			     struct mercury_flow *f)
{
	if (q->nspares < q->keep_spares) {
		list_add(&f->node, &q->spares);
		q->nspares++;
	} else {
		kmem_cache_free(mercury_flow_cachep, f);
	}
}

/* Keep at most @keep free flows from now on. */
static void mercury_spares_trim(struct mercury_sched_data *q, u32 keep)
{
	struct mercury_flow *f;

	q->keep_spares = keep;
	while (q->nspares > keep) {
		f = list_first_entry(&q->spares, struct mercury_flow, node);
		list_del(&f->node);
		q->nspares--;
		kmem_cache_free(mercury_flow_cachep, f);
	}
}

/* Keep at most @keep idle flows from now on. */
static void mercury_idle_trim(struct mercury_sched_data *q, u32 keep)
{
	q->keep_idle = keep;
	while (q->nidle > keep)
		mercury_flow_put(q, mercury_idle_take(q));
}

/* Make sure the packet of @key and @rank can be queued: its flow exists,
 * or a free flow can be had (kept as a spare). Called before the drop
 * policy evicts anything for it.
 */
static int mercury_flow_reserve(struct mercury_sched_data *q,
				unsigned long key, u32 rank)
{
	struct mercury_flow *f;

	if (mercury_flow_find(q, key, rank) || !list_empty(&q->spares))
		return 0;
	f = mercury_flow_get(q);
	if (!f)
		return -ENOMEM;
	list_add(&f->node, &q->spares);
	q->nspares++;
	return 0;
}

/* A flow for @key, in its bucket, not yet on any list. */
static struct mercury_flow *mercury_flow_create(struct mercury_sched_data *q,
						unsigned long key, u32 rank)
{
	u32 key_rank = q->cfg.flow_order ? 0 : rank;
	u32 b = mercury_bucket_of(q, key, key_rank);
	struct rb_node **link, *parent = NULL;
	struct mercury_flow *f, *n;

	/* before the walk: taking an idle flow may rebalance this bucket */
	f = mercury_flow_get(q);
	if (!f)
		return NULL;
	link = &q->t.buckets[b].rb_node;
	while (*link) {
		parent = *link;
		n = rb_entry(parent, struct mercury_flow, hnode);
		link = mercury_key_cmp(key, key_rank, n) < 0 ? &parent->rb_left :
							    &parent->rb_right;
	}
	f->key = key;
	f->key_rank = key_rank;
	f->bucket = b;
	f->qlen = 0;
	rb_link_node(&f->hnode, parent, link);
	rb_insert_color(&f->hnode, &q->t.buckets[b]);
	INIT_LIST_HEAD(&f->node);
	return f;
}

/* @f, empty, gets its first packet: out of the idle list if it was on
 * it, with a fresh deficit and no runs.
 */
static void mercury_flow_start(struct mercury_sched_data *q,
			       struct mercury_flow *f)
{
	if (!list_empty(&f->node)) {
		list_del(&f->node);
		q->nidle--;
	}
	f->head = NULL;
	f->tail = NULL;
	f->first_run = 0;
	f->nruns = 0;
	f->deficit = q->drr_quantum;
	q->nflows++;
}

/* @f lost its last packet: off its level and the tails, onto the idle
 * list; the oldest idle flow is freed when more are idle than kept.
 */
static void mercury_flow_empty(struct mercury_sched_data *q,
			       struct mercury_flow *f)
{
	mercury_flow_detach(q, f);
	list_add_tail(&f->node, &q->idle);
	q->nidle++;
	if (q->nidle > q->keep_idle)
		mercury_flow_put(q, mercury_idle_take(q));
	/* an empty queue is the one moment drr_quantum may come back down
	 * to the configured quantum (mercury_select)
	 */
	if (!--q->nflows)
		q->drr_quantum = q->cfg.quantum;
}

/* ---- queueing --------------------------------------------------------- */

/* Queue @skb, already classified into cb->rank, in the flow of @key.
 * No limits, no sch stats. -ENOMEM: no memory for a new flow, nothing
 * changed.
 */
static int mercury_insert(struct mercury_sched_data *q,
			  struct sk_buff *skb, unsigned long key)
{
	u32 rank = mercury_rank_of(skb), len = qdisc_pkt_len(skb), old;
	struct mercury_level *l = &q->t.levels[rank];
	struct mercury_flow *f;

	f = mercury_flow_find(q, key, rank);
	if (!f) {
		f = mercury_flow_create(q, key, rank);
		if (!f)
			return -ENOMEM;
	}
	if (!f->qlen)
		mercury_flow_start(q, f);
	if (len > q->drr_quantum)
		q->drr_quantum = len;
	old = f->qlen ? mercury_rank_of(f->tail) : MERCURY_NO_RANK;
	mercury_pkts_push(f, skb);
	mercury_tail_set(q, f, old);
	if (f->qlen == 1)
		mercury_flow_attach(q, f, rank);
	else if (rank < f->rank)
		/* the flow inherits the urgency of its new packet */
		mercury_flow_move(q, f, rank);
	l->qlen++;
	l->backlog += len;
	q->memory_usage += skb->truesize;
	return 0;
}

/* Take a packet off its level's counters. No sch stats. */
static void mercury_account_out(struct mercury_sched_data *q,
				struct sk_buff *skb)
{
	struct mercury_level *l = &q->t.levels[mercury_rank_of(skb)];

	l->qlen--;
	l->backlog -= qdisc_pkt_len(skb);
	q->memory_usage -= skb->truesize;
}

/* ---- service order ----------------------------------------------------- */

/* Does the untagged class wait, and does tagged traffic? */
static bool mercury_both_wait(const struct mercury_sched_data *q)
{
	bool u = !list_empty(&q->t.levels[q->untagged_rank].flows);

	return u && q->active_levels > 1;
}

/* After a packet left: a debt stays, a credit only while both wait. */
static void mercury_share_settle(struct mercury_sched_data *q)
{
	if (q->share_credit > 0 && !mercury_both_wait(q))
		q->share_credit = 0;
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
static void mercury_share_charge(struct mercury_sched_data *q, bool both,
				 bool untagged, u32 len)
{
	if (!untagged)
		q->share_credit += (s64)len * q->share;
	else if (both)
		q->share_credit -= (s64)len * (100 - q->share);
	mercury_share_settle(q);
}

/* The rank the next packet comes from, or MERCURY_NO_RANK; no side
 * effects, so peek and dequeue agree. With a share, while both the
 * untagged class and tagged traffic wait, the untagged class is served
 * exactly when its credit is not negative, whether it is placed first or
 * last (mercury_share_charge): it gets the share of the bytes, no more
 * (first) and no less (last).
 */
static u32 mercury_next_rank(const struct mercury_sched_data *q)
{
	u32 first = mercury_ranks_first(&q->served);

	if (!q->share || first == MERCURY_NO_RANK || !mercury_both_wait(q))
		return first;
	if (q->share_credit >= 0)
		return q->untagged_rank;
	return first != q->untagged_rank ? first :
	       mercury_ranks_next(&q->served, q->untagged_rank);
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
static struct mercury_flow *mercury_select(struct mercury_sched_data *q,
					   u32 rank)
{
	struct mercury_level *l = &q->t.levels[rank];
	struct mercury_flow *f;

	f = list_first_entry(&l->flows, struct mercury_flow, node);
	if (f->deficit > 0)
		return f;
	f->deficit += q->drr_quantum;
	list_move_tail(&f->node, &l->flows);
	return list_first_entry(&l->flows, struct mercury_flow, node);
}

/* Unlink the next packet of @rank (from mercury_next_rank()), charging
 * the DRR deficit and the untagged share.
 */
static struct sk_buff *mercury_pick(struct mercury_sched_data *q,
				    u32 rank)
{
	struct mercury_flow *f = mercury_select(q, rank);
	bool both = q->share && mercury_both_wait(q);
	struct sk_buff *skb = f->head;
	u32 len = qdisc_pkt_len(skb);
	bool ran_out;

	if (both && rank != mercury_ranks_first(&q->served))
		q->stat_share_forced++;
	ran_out = mercury_pkts_pop_head(f);
	f->deficit -= len;
	if (!f->qlen) {
		mercury_tail_clear(q, f, mercury_rank_of(skb));
		mercury_flow_empty(q, f);
	} else if (ran_out) {
		/* a flow that keeps its level keeps its place in the round */
		mercury_flow_move(q, f, mercury_runs_min(f));
	}
	mercury_account_out(q, skb);
	if (q->share)
		mercury_share_charge(q, both, rank == q->untagged_rank, len);
	return skb;
}

/* The victim for an arriving packet of @rank (-1: for any): the newest
 * packet of the flow whose newest packet is least urgent, among equals
 * of the flow whose newest packet changed last, unlinked and counted in
 * its level's drops, if it is less urgent than @rank; NULL when the
 * arriving packet should go instead. Only a flow's newest packet is ever
 * dropped, so no packet that has others of its flow behind it is. O(1).
 */
static struct sk_buff *mercury_victim(struct mercury_sched_data *q, s64 rank)
{
	u32 last = mercury_ranks_last(&q->tails);
	struct mercury_flow *f;
	struct sk_buff *skb;
	bool ran_out;

	if (last == MERCURY_NO_RANK || last <= rank)
		return NULL;
	f = list_first_entry(&q->t.levels[last].tails, struct mercury_flow,
			     tnode);
	skb = f->tail;
	ran_out = mercury_pkts_pop_tail(f);
	if (!f->qlen) {
		mercury_tail_clear(q, f, last);
		mercury_flow_empty(q, f);
	} else {
		mercury_tail_set(q, f, last);
		if (ran_out)
			mercury_flow_move(q, f, mercury_runs_min(f));
	}
	mercury_account_out(q, skb);
	q->t.levels[last].drops++;
	mercury_share_settle(q);
	return skb;
}

/* Would mercury_victim(q, @rank), called until it has freed @pkts packets
 * and @bytes of truesize, get there? Nothing changes. mercury_victim takes
 * a flow's newest packet while some flow's newest is less urgent than
 * @rank, so it can take exactly the newest packets of each flow that are
 * all less urgent than @rank; their order does not matter here. Looks at
 * no more packets than it counts, and at flows by their newest packet,
 * least urgent first.
 */
static bool mercury_can_evict(const struct mercury_sched_data *q, s64 rank,
			      u32 pkts, u64 bytes)
{
	struct mercury_flow *f;
	struct sk_buff *skb;
	u32 r;

	for (r = mercury_ranks_last(&q->tails);
	     r != MERCURY_NO_RANK && r > rank;
	     r = mercury_ranks_prev(&q->tails, r)) {
		list_for_each_entry(f, &q->t.levels[r].tails, tnode) {
			for (skb = f->tail; skb && mercury_rank_of(skb) > rank;
			     skb = skb == f->head ? NULL : skb->prev) {
				pkts -= pkts ? 1 : 0;
				bytes -= min_t(u64, bytes, skb->truesize);
				if (!pkts && !bytes)
					return true;
			}
		}
	}
	return !pkts && !bytes;
}

/* ---- classification and admission ------------------------------------ */

static u32 mercury_tag_of_rank(const struct mercury_sched_data *q, u32 rank)
{
	if (rank == q->untagged_rank)
		return 0;
	return q->cfg.untagged == TC_MERCURY_UNTAGGED_FIRST ? rank : rank + 1;
}

/* The DSCP (top six bits of the IPv4 TOS or IPv6 traffic class) of @skb;
 * 0 (untagged) for anything that is not an IPv4 or IPv6 packet or is too
 * short to hold the field. Unlike the mark and the priority, it survives a
 * veth crossing into another network namespace, which scrubs both, so
 * tags set in a container (IP_TOS, IPV6_TCLASS: no privilege needed) reach
 * the host's qdisc. VLAN headers are looked through, as in sch_cake.
 */
static u32 mercury_dscp(const struct sk_buff *skb)
{
	const u8 *h;
	u8 buf[2];

	switch (skb_protocol(skb, true)) {
	case htons(ETH_P_IP):
		h = skb_header_pointer(skb, skb_network_offset(skb),
				       sizeof(buf), buf);
		if (!h || h[0] >> 4 != 4)
			return 0;
		/* the TOS byte follows version and header length */
		return h[1] >> 2;
	case htons(ETH_P_IPV6):
		h = skb_header_pointer(skb, skb_network_offset(skb),
				       sizeof(buf), buf);
		if (!h || h[0] >> 4 != 6)
			return 0;
		/* the traffic class straddles the first two bytes, which
		 * need not be 16-bit aligned: read it byte by byte
		 */
		return (h[0] & 0x0f) << 2 | h[1] >> 6;
	default:
		return 0;
	}
}

static u32 mercury_tag_value(const struct mercury_sched_data *q,
			     const struct sk_buff *skb)
{
	switch (q->cfg.source) {
	case TC_MERCURY_TAG_PRIORITY:
		return skb->priority;
	case TC_MERCURY_TAG_DSCP:
		return mercury_dscp(skb);
	default:
		return skb->mark;
	}
}

static u32 mercury_classify(const struct mercury_sched_data *q,
			    const struct sk_buff *skb)
{
	u32 tag = (mercury_tag_value(q, skb) >> q->cfg.shift) & q->cfg.mask;

	if (!tag)
		return q->untagged_rank;
	/* A plan wider than the qdisc: its least urgent layers share the
	 * least urgent tagged level rather than join the untagged class,
	 * which may be served before every gradient.
	 */
	tag = min(tag, q->cfg.levels);
	return q->cfg.untagged == TC_MERCURY_UNTAGGED_FIRST ? tag : tag - 1;
}

/* The flow of a packet: its socket, as sch_fq keys flows. A queued skb
 * holds a reference on its socket (sock_wfree and friends), so a socket
 * pointer cannot name a new socket while its flow holds packets; an idle
 * flow whose socket is gone may be found by a new socket at the same
 * address, which then starts it afresh (mercury_flow_start), as if it
 * were new. Packets without a full, connected
 * socket are keyed by their whole flow hash, with the low bit set so that
 * they never meet a (word-aligned) socket pointer: forwarded traffic (no
 * socket), SYN-ACKs (a request socket or a listener), and unconnected UDP
 * (TCP_CLOSE: one socket, many destinations). A TCP socket that re-picks
 * its txhash after a timeout keeps its key, so it keeps its flow.
 */
static unsigned long mercury_flow_key(struct sk_buff *skb)
{
	struct sock *sk = skb->sk;

	if (!sk || !sk_fullsock(sk) || sk_listener(sk) ||
	    sk->sk_state == TCP_CLOSE)
		return (unsigned long)skb_get_hash(skb) << 1 | 1UL;
	return (unsigned long)sk;
}

/* Would @extra more packets of @truesize bytes exceed a limit? */
static bool mercury_over_limit(const struct mercury_sched_data *q,
			       const struct Qdisc *sch, u32 extra, u32 truesize)
{
	return sch->q.qlen + extra > q->cfg.limit ||
	       (u64)q->memory_usage + truesize > q->cfg.memory_limit;
}

/* Count a drop for the limit that is exceeded, the packet limit first. */
static void mercury_count_drop(struct mercury_sched_data *q,
			       const struct Qdisc *sch, u32 extra)
{
	if (sch->q.qlen + extra > q->cfg.limit)
		q->stat_drops_limit++;
	else
		q->stat_drops_memory++;
}

/* Can evicting less urgent packets than @rank make room for @skb? */
static bool mercury_room_for(const struct mercury_sched_data *q,
			     const struct Qdisc *sch, const struct sk_buff *skb,
			     u32 rank)
{
	u64 mem = (u64)q->memory_usage + skb->truesize;
	u32 pkts = 0;

	if (sch->q.qlen + 1 > q->cfg.limit)
		pkts = sch->q.qlen + 1 - q->cfg.limit;
	return mercury_can_evict(q, rank, pkts,
				 mem > q->cfg.memory_limit ?
				 mem - q->cfg.memory_limit : 0);
}

/* ---- enqueue, dequeue, peek ------------------------------------------- */

/* Drop the arriving packet, after @dropped victims of @dropped_len bytes. */
static int mercury_drop_arrival(struct sk_buff *skb, struct Qdisc *sch,
				struct sk_buff **to_free,
				enum qdisc_drop_reason reason,
				unsigned int dropped, unsigned int dropped_len)
{
	struct mercury_sched_data *q = qdisc_priv(sch);

	q->t.levels[mercury_rank_of(skb)].drops++;
	if (dropped)
		qdisc_tree_reduce_backlog(sch, dropped, dropped_len);
	return qdisc_drop_reason(skb, sch, to_free, reason);
}

/* Queue @skb at @rank, evicting less urgent packets if it needs room. */
static int mercury_enqueue_one(struct sk_buff *skb, struct Qdisc *sch,
			       struct sk_buff **to_free, u32 rank)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	unsigned int dropped = 0, dropped_len = 0;
	struct sk_buff *victim;
	bool own = false;
	unsigned long key;
	u32 tag;

	mercury_cb(skb)->rank = rank;
	key = mercury_flow_key(skb);

	/* A flow at its flow_limit loses its own arrival and evicts
	 * nothing: a long transfer feels its loss (fast retransmit repairs
	 * it) instead of filling the shared buffer, so shorter flows keep
	 * room there whatever their urgency.
	 */
	if (q->cfg.flow_limit) {
		struct mercury_flow *f = mercury_flow_find(q, key, rank);

		if (f && f->qlen >= q->cfg.flow_limit) {
			q->stat_drops_flow_limit++;
			return mercury_drop_arrival(skb, sch, to_free,
						    QDISC_DROP_OVERLIMIT, 0, 0);
		}
	}

	/* Too big for memory_limit on its own: evicting others cannot help. */
	if (unlikely(skb->truesize > q->cfg.memory_limit)) {
		q->stat_drops_memory++;
		return mercury_drop_arrival(skb, sch, to_free,
					    QDISC_DROP_OVERLIMIT, 0, 0);
	}
	if (mercury_over_limit(q, sch, 1, skb->truesize)) {
		/* Never evict for a packet that then cannot be queued: decide
		 * first whether the victims make room and the flow exists or
		 * can be allocated.
		 */
		if (!mercury_room_for(q, sch, skb, rank)) {
			mercury_count_drop(q, sch, 1);
			return mercury_drop_arrival(skb, sch, to_free,
						    QDISC_DROP_OVERLIMIT, 0, 0);
		}
		if (mercury_flow_reserve(q, key, rank)) {
			q->stat_drops_flows++;
			return mercury_drop_arrival(skb, sch, to_free,
						    QDISC_DROP_GENERIC, 0, 0);
		}
		do {
			victim = mercury_victim(q, rank);
			if (WARN_ON_ONCE(!victim))
				return mercury_drop_arrival(skb, sch, to_free,
							    QDISC_DROP_GENERIC,
							    dropped,
							    dropped_len);
			mercury_count_drop(q, sch, 1);
			/* with flow order off a victim is less urgent than
			 * the arrival, so of another flow
			 */
			if (q->cfg.flow_order && mercury_flow_key(victim) == key)
				own = true;
			dropped++;
			dropped_len += qdisc_pkt_len(victim);
			qdisc_qstats_backlog_dec(sch, victim);
			sch->q.qlen--;
			qdisc_drop_reason(victim, sch, to_free,
					  QDISC_DROP_OVERLIMIT);
		} while (mercury_over_limit(q, sch, 1, skb->truesize));
	}

	if (unlikely(mercury_insert(q, skb, key))) {
		q->stat_drops_flows++;
		return mercury_drop_arrival(skb, sch, to_free,
					    QDISC_DROP_GENERIC, dropped,
					    dropped_len);
	}
	tag = mercury_tag_of_rank(q, rank);
	if (tag && (!q->stat_most_urgent || tag < q->stat_most_urgent))
		q->stat_most_urgent = tag;
	qdisc_qstats_backlog_inc(sch, skb);
	sch->q.qlen++;
	/* The arrival's own flow lost a packet ahead of it: tell the sender,
	 * as fq_codel does. Our parents then do not count the arrival, so
	 * they lose one packet fewer than we dropped.
	 */
	if (own) {
		qdisc_tree_reduce_backlog(sch, dropped - 1,
					  dropped_len - qdisc_pkt_len(skb));
		return NET_XMIT_CN;
	}
	/* Our parents count the arriving packet but not the victims. */
	if (dropped)
		qdisc_tree_reduce_backlog(sch, dropped, dropped_len);
	return NET_XMIT_SUCCESS;
}

/* Should @skb, of @rank, be queued as its segments? With untagged
 * traffic last, an untagged GSO packet holds the link for its whole
 * length once it starts (64 KB is 17 ms at 30 Mbit/s), and every gradient
 * packet arriving meanwhile waits behind it. Queued as MTU-sized segments,
 * the untagged class is served, and charged for its share, a segment at
 * a time, so a tagged arrival waits for at most one segment. With
 * untagged first (the default) its packets go ahead anyway, and tagged
 * GSO packets belong to the job being ordered: both stay whole, and the
 * default path pays no software segmentation.
 */
static bool mercury_split(const struct mercury_sched_data *q,
			  const struct sk_buff *skb, u32 rank)
{
	return rank == q->untagged_rank && skb_is_gso(skb) &&
	       q->cfg.untagged == TC_MERCURY_UNTAGGED_LAST;
}

/* Queue a GSO packet's segments; our parents counted one packet of the
 * aggregate's length, so they are told what was queued instead. If the
 * packet cannot be segmented it is queued whole: nothing is lost.
 */
static int mercury_enqueue_segs(struct sk_buff *skb, struct Qdisc *sch,
				struct sk_buff **to_free, u32 rank)
{
	netdev_features_t features = netif_skb_features(skb);
	unsigned int len = qdisc_pkt_len(skb), queued_len = 0;
	struct sk_buff *segs, *seg, *next;
	int queued = 0, ret;
	bool any = false;

	segs = skb_gso_segment(skb, features & ~NETIF_F_GSO_MASK);
	if (IS_ERR_OR_NULL(segs))
		return mercury_enqueue_one(skb, sch, to_free, rank);

	skb_list_walk_safe(segs, seg, next) {
		unsigned int seg_len = seg->len;

		skb_mark_not_on_list(seg);
		qdisc_skb_cb(seg)->pkt_len = seg_len;
		ret = mercury_enqueue_one(seg, sch, to_free, rank);
		/* NET_XMIT_CN: queued, and already told to our parents as
		 * an arrival they do not count (mercury_enqueue_one)
		 */
		if (ret == NET_XMIT_SUCCESS) {
			queued++;
			queued_len += seg_len;
		}
		if (ret == NET_XMIT_SUCCESS || ret == NET_XMIT_CN)
			any = true;
	}
	consume_skb(skb);
	if (!any)
		return NET_XMIT_DROP;
	if (queued != 1 || queued_len != len)
		qdisc_tree_reduce_backlog(sch, 1 - queued,
					  (int)len - (int)queued_len);
	return NET_XMIT_SUCCESS;
}

static int mercury_enqueue(struct sk_buff *skb, struct Qdisc *sch,
			   struct sk_buff **to_free)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u32 rank = mercury_classify(q, skb);

	if (mercury_split(q, skb, rank))
		return mercury_enqueue_segs(skb, sch, to_free, rank);
	return mercury_enqueue_one(skb, sch, to_free, rank);
}

static struct sk_buff *mercury_dequeue(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u32 rank = mercury_next_rank(q);
	struct mercury_level *l;
	struct sk_buff *skb;

	if (rank == MERCURY_NO_RANK)
		return NULL;
	/* the level served first now is more urgent than every other one
	 * (or the share chose the untagged class: counted there instead)
	 */
	if (q->active_levels > 1 && rank == mercury_ranks_first(&q->served))
		q->stat_inversions_avoided++;

	skb = mercury_pick(q, rank);
	l = &q->t.levels[mercury_rank_of(skb)];
	/* per segment, as the qdisc's own counters */
	bstats_update(&l->bstats, skb);
	if (mercury_rank_of(skb) == q->untagged_rank) {
		q->stat_untagged_packets += skb_is_gso(skb) ?
					    skb_shinfo(skb)->gso_segs : 1;
		q->stat_untagged_bytes += qdisc_pkt_len(skb);
	}
	qdisc_qstats_backlog_dec(sch, skb);
	sch->q.qlen--;
	qdisc_bstats_update(sch, skb);
	return skb;
}

/* The packet the next dequeue returns, left in place (no held packet, so
 * a more urgent arrival overtakes it while a parent waits for tokens).
 */
static struct sk_buff *mercury_peek(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u32 rank = mercury_next_rank(q);

	if (rank == MERCURY_NO_RANK)
		return NULL;
	return mercury_flow_head(mercury_select(q, rank));
}

/* ---- configuration --------------------------------------------------- */

/* Not const: 6.1's nla_policy points at a writable range. */
static struct netlink_range_validation mercury_levels_range = {
	.min = 1,
	.max = TC_MERCURY_MAX_LEVELS,
};

static struct netlink_range_validation mercury_flows_range = {
	.min = 1,
	.max = TC_MERCURY_MAX_FLOWS,
};

/* A memory_limit at most 2 GiB keeps memory_usage + one skb's truesize
 * (well under 2 GiB) inside a u32: the admission check cannot wrap.
 */
static struct netlink_range_validation mercury_memory_range = {
	.min = 1,
	.max = TC_MERCURY_MAX_MEMORY_LIMIT,
};

static struct netlink_range_validation mercury_quantum_range = {
	.min = TC_MERCURY_MIN_QUANTUM,
	.max = TC_MERCURY_MAX_QUANTUM,
};

static const struct nla_policy mercury_policy[TCA_MERCURY_MAX + 1] = {
	[TCA_MERCURY_LEVELS]	     = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_levels_range),
	[TCA_MERCURY_TAG_SOURCE]     = NLA_POLICY_MAX(NLA_U8, __TC_MERCURY_TAG_MAX - 1),
	[TCA_MERCURY_TAG_SHIFT]	     = NLA_POLICY_MAX(NLA_U8, TC_MERCURY_MAX_SHIFT),
	[TCA_MERCURY_TAG_MASK]	     = NLA_POLICY_MIN(NLA_U32, 1),
	[TCA_MERCURY_UNTAGGED]	     = NLA_POLICY_MAX(NLA_U8, __TC_MERCURY_UNTAGGED_MAX - 1),
	[TCA_MERCURY_UNTAGGED_SHARE] = NLA_POLICY_MAX(NLA_U8, TC_MERCURY_MAX_SHARE),
	[TCA_MERCURY_FLOW_ORDER]     = NLA_POLICY_MAX(NLA_U8, 1),
	[TCA_MERCURY_FLOWS]	     = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_flows_range),
	[TCA_MERCURY_LIMIT]	     = NLA_POLICY_MIN(NLA_U32, 1),
	[TCA_MERCURY_MEMORY_LIMIT]   = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_memory_range),
	[TCA_MERCURY_QUANTUM]	     = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_quantum_range),
	[TCA_MERCURY_BYPASS]	     = NLA_POLICY_MAX(NLA_U8, 1),
	[TCA_MERCURY_FLOW_LIMIT]     = { .type = NLA_U32 },
};

/* The defaults are the UAPI header's, which userspace reads too. */
static const struct mercury_config mercury_defaults = {
	.levels		= TC_MERCURY_DEF_LEVELS,
	.flows		= TC_MERCURY_DEF_FLOWS,
	.mask		= TC_MERCURY_DEF_MASK,
	.limit		= TC_MERCURY_DEF_LIMIT,
	.memory_limit	= TC_MERCURY_DEF_MEMORY_LIMIT,
	.quantum	= TC_MERCURY_DEF_QUANTUM,
	.source		= TC_MERCURY_DEF_TAG_SOURCE,
	.shift		= TC_MERCURY_DEF_SHIFT,
	.untagged	= TC_MERCURY_DEF_UNTAGGED,
	.share		= TC_MERCURY_DEF_SHARE,
	.flow_order	= TC_MERCURY_DEF_FLOW_ORDER,
	.bypass		= TC_MERCURY_DEF_BYPASS,
	.flow_limit	= TC_MERCURY_DEF_FLOW_LIMIT,
};

static void mercury_tables_free(struct mercury_tables *t)
{
	kvfree(t->levels);
	kvfree(t->served_leaf);
	kvfree(t->tails_leaf);
	kvfree(t->buckets);
	memset(t, 0, sizeof(*t));
}

/* The tables for @cfg, zeroed, on NUMA node @node (the tx queue's, as
 * sch_fq places its flow table).
 */
static int mercury_tables_alloc(struct mercury_tables *t,
				const struct mercury_config *cfg, int node)
{
	u32 nranks = cfg->levels + 1;
	u32 i;

	t->levels = kvzalloc_node(array_size(nranks, sizeof(*t->levels)),
				  GFP_KERNEL, node);
	t->served_leaf = kvzalloc_node(array_size(MERCURY_LEAF_WORDS(nranks),
						  sizeof(u64)), GFP_KERNEL, node);
	t->tails_leaf = kvzalloc_node(array_size(MERCURY_LEAF_WORDS(nranks),
						 sizeof(u64)), GFP_KERNEL, node);
	t->buckets = kvzalloc_node(array_size(1U << mercury_bucket_bits(cfg->flows),
					      sizeof(*t->buckets)),
				   GFP_KERNEL, node);
	if (!t->levels || !t->served_leaf || !t->tails_leaf || !t->buckets) {
		mercury_tables_free(t);
		return -ENOMEM;
	}
	for (i = 0; i < nranks; i++) {
		INIT_LIST_HEAD(&t->levels[i].flows);
		INIT_LIST_HEAD(&t->levels[i].tails);
		gnet_stats_basic_sync_init(&t->levels[i].bstats);
	}
	return 0;
}

/* Does @cfg need new tables or a new rank for queued packets? */
static bool mercury_structural(const struct mercury_config *a,
			       const struct mercury_config *b)
{
	return a->levels != b->levels || a->flows != b->flows ||
	       a->mask != b->mask || a->shift != b->shift ||
	       a->source != b->source || a->untagged != b->untagged ||
	       a->flow_order != b->flow_order;
}

static int mercury_parse(struct mercury_config *cfg, struct nlattr *opt,
			 struct netlink_ext_ack *extack)
{
	struct nlattr *tb[TCA_MERCURY_MAX + 1];
	int err;

	if (!opt)
		return 0;
	err = nla_parse_nested(tb, TCA_MERCURY_MAX, opt, mercury_policy,
			       extack);
	if (err < 0)
		return err;

	if (tb[TCA_MERCURY_LEVELS])
		cfg->levels = nla_get_u32(tb[TCA_MERCURY_LEVELS]);
	if (tb[TCA_MERCURY_TAG_SOURCE])
		cfg->source = nla_get_u8(tb[TCA_MERCURY_TAG_SOURCE]);
	if (tb[TCA_MERCURY_TAG_SHIFT])
		cfg->shift = nla_get_u8(tb[TCA_MERCURY_TAG_SHIFT]);
	if (tb[TCA_MERCURY_TAG_MASK])
		cfg->mask = nla_get_u32(tb[TCA_MERCURY_TAG_MASK]);
	if (tb[TCA_MERCURY_UNTAGGED])
		cfg->untagged = nla_get_u8(tb[TCA_MERCURY_UNTAGGED]);
	if (tb[TCA_MERCURY_UNTAGGED_SHARE])
		cfg->share = nla_get_u8(tb[TCA_MERCURY_UNTAGGED_SHARE]);
	if (tb[TCA_MERCURY_FLOW_ORDER])
		cfg->flow_order = nla_get_u8(tb[TCA_MERCURY_FLOW_ORDER]);
	if (tb[TCA_MERCURY_FLOWS])
		cfg->flows = nla_get_u32(tb[TCA_MERCURY_FLOWS]);
	if (tb[TCA_MERCURY_LIMIT])
		cfg->limit = nla_get_u32(tb[TCA_MERCURY_LIMIT]);
	if (tb[TCA_MERCURY_MEMORY_LIMIT])
		cfg->memory_limit = nla_get_u32(tb[TCA_MERCURY_MEMORY_LIMIT]);
	if (tb[TCA_MERCURY_QUANTUM])
		cfg->quantum = nla_get_u32(tb[TCA_MERCURY_QUANTUM]);
	if (tb[TCA_MERCURY_BYPASS])
		cfg->bypass = nla_get_u8(tb[TCA_MERCURY_BYPASS]);
	if (tb[TCA_MERCURY_FLOW_LIMIT])
		cfg->flow_limit = nla_get_u32(tb[TCA_MERCURY_FLOW_LIMIT]);

	/* Checks across options, on the configuration as it would be; the
	 * error points at an option this request gave (the other one may
	 * be the qdisc's already).
	 */
	if (cfg->levels > cfg->mask) {
		NL_SET_ERR_MSG_MOD(extack,
				   "levels exceeds the largest tag mask can give");
		NL_SET_BAD_ATTR(extack, tb[TCA_MERCURY_LEVELS] ?:
					tb[TCA_MERCURY_TAG_MASK]);
		return -EINVAL;
	}
	if (cfg->source == TC_MERCURY_TAG_DSCP &&
	    !((0x3f >> cfg->shift) & cfg->mask)) {
		NL_SET_ERR_MSG_MOD(extack,
				   "shift and mask leave no DSCP bit for the tag");
		NL_SET_BAD_ATTR(extack, tb[TCA_MERCURY_TAG_SHIFT] ?:
					tb[TCA_MERCURY_TAG_MASK] ?:
					tb[TCA_MERCURY_TAG_SOURCE]);
		return -EINVAL;
	}
	if (cfg->share && cfg->untagged != TC_MERCURY_UNTAGGED_LAST) {
		NL_SET_ERR_MSG_MOD(extack,
				   "untagged_share needs untagged last");
		NL_SET_BAD_ATTR(extack, tb[TCA_MERCURY_UNTAGGED_SHARE] ?:
					tb[TCA_MERCURY_UNTAGGED]);
		return -EINVAL;
	}
	return 0;
}

static void mercury_apply_cfg(struct mercury_sched_data *q,
			      const struct mercury_config *cfg)
{
	bool first = cfg->untagged == TC_MERCURY_UNTAGGED_FIRST;

	WRITE_ONCE(q->cfg.levels, cfg->levels);
	WRITE_ONCE(q->cfg.flows, cfg->flows);
	WRITE_ONCE(q->cfg.mask, cfg->mask);
	WRITE_ONCE(q->cfg.limit, cfg->limit);
	WRITE_ONCE(q->cfg.memory_limit, cfg->memory_limit);
	WRITE_ONCE(q->cfg.source, cfg->source);
	WRITE_ONCE(q->cfg.shift, cfg->shift);
	WRITE_ONCE(q->cfg.untagged, cfg->untagged);
	WRITE_ONCE(q->cfg.share, cfg->share);
	WRITE_ONCE(q->cfg.flow_order, cfg->flow_order);
	WRITE_ONCE(q->cfg.bypass, cfg->bypass);
	WRITE_ONCE(q->cfg.flow_limit, cfg->flow_limit);
	q->untagged_rank = first ? 0 : cfg->levels;
	/* untagged first is capped too: it must not starve the gradients */
	q->share = cfg->share ? cfg->share : first ? MERCURY_FIRST_SHARE : 0;
	q->bucket_bits = mercury_bucket_bits(cfg->flows);
	q->keep_idle = cfg->flows;
	mercury_set_quantum(q, cfg->quantum);
}

/* Unlink every queued packet, in service order. Every flow, the idle
 * ones included, leaves the old tables as a spare, so that re-queueing
 * the packets needs no allocation.
 */
static struct sk_buff *mercury_drain(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u64 forced = q->stat_share_forced;
	struct sk_buff *head = NULL, **tail = &head;
	u32 rank;

	q->keep_spares = U32_MAX;
	while ((rank = mercury_next_rank(q)) != MERCURY_NO_RANK) {
		*tail = mercury_pick(q, rank);
		tail = &(*tail)->next;
	}
	list_splice_init(&q->idle, &q->spares);
	q->nspares += q->nidle;
	q->nidle = 0;
	/* nothing was sent */
	q->stat_share_forced = forced;
	return head;
}

/* Carry a level's counters over a structural change, to the level that
 * now has its tag; a tag that no longer has a level loses its class.
 */
static void mercury_carry_counters(struct mercury_sched_data *q,
				   const struct mercury_config *old_cfg,
				   const struct mercury_tables *old)
{
	u32 old_untagged_rank = old_cfg->untagged == TC_MERCURY_UNTAGGED_FIRST ?
				0 : old_cfg->levels;
	bool old_first = old_cfg->untagged == TC_MERCURY_UNTAGGED_FIRST;
	bool first = q->cfg.untagged == TC_MERCURY_UNTAGGED_FIRST;
	struct mercury_level *from, *to;
	u32 rank, tag, nrank;

	for (rank = 0; rank <= old_cfg->levels; rank++) {
		from = &old->levels[rank];
		tag = rank == old_untagged_rank ? 0 : old_first ? rank : rank + 1;
		if (!tag)
			nrank = q->untagged_rank;
		else if (tag <= q->cfg.levels)
			nrank = first ? tag : tag - 1;
		else
			continue;
		to = &q->t.levels[nrank];
		to->drops += from->drops;
		u64_stats_add(&to->bstats.bytes,
			      u64_stats_read(&from->bstats.bytes));
		u64_stats_add(&to->bstats.packets,
			      u64_stats_read(&from->bstats.packets));
	}
}

static int mercury_change(struct Qdisc *sch, struct nlattr *opt,
			  struct netlink_ext_ack *extack)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	struct mercury_tables old = {}, fresh = {};
	unsigned int dropped = 0, dropped_len = 0;
	struct mercury_config cfg = q->cfg, old_cfg = q->cfg;
	struct sk_buff *skb, *next;
	bool rebuild;
	int err;

	err = mercury_parse(&cfg, opt, extack);
	if (err)
		return err;
	rebuild = !q->t.levels || mercury_structural(&q->cfg, &cfg);
	if (rebuild) {
		err = mercury_tables_alloc(&fresh, &cfg,
					   netdev_queue_numa_node_read(sch->dev_queue));
		if (err) {
			NL_SET_ERR_MSG_MOD(extack, "no memory for levels and flows");
			return err;
		}
	}

	sch_tree_lock(sch);
	if (rebuild) {
		skb = q->t.levels ? mercury_drain(sch) : NULL;
		old = q->t;
		q->t = fresh;
		mercury_ranks_init(&q->served, q->t.served_leaf);
		mercury_ranks_init(&q->tails, q->t.tails_leaf);
		q->active_levels = 0;
		q->share_credit = 0;
		mercury_apply_cfg(q, &cfg);
		if (old.levels)
			mercury_carry_counters(q, &old_cfg, &old);
		for (; skb; skb = next) {
			next = skb->next;
			skb->next = NULL;
			mercury_cb(skb)->rank = mercury_classify(q, skb);
			if (mercury_insert(q, skb, mercury_flow_key(skb))) {
				/* flow_order off may need more flows than
				 * were kept: no memory, so drop and count
				 */
				q->stat_drops_flows++;
				q->t.levels[mercury_rank_of(skb)].drops++;
				dropped++;
				dropped_len += qdisc_pkt_len(skb);
				qdisc_qstats_backlog_dec(sch, skb);
				qdisc_qstats_drop(sch);
				sch->q.qlen--;
				rtnl_kfree_skbs(skb, skb);
			}
		}
		mercury_spares_trim(q, 1);
	} else {
		if (cfg.share != q->cfg.share)
			q->share_credit = 0;
		mercury_apply_cfg(q, &cfg);
	}
	/* Like pfifo_fast and fq_codel: with nothing queued there is nothing
	 * to order, so the core may hand the packet straight to the driver
	 * (when it is the root of its tx queue), skipping enqueue, dequeue
	 * and the per-level counters. Off, every packet is queued.
	 */
	if (cfg.bypass)
		sch->flags |= TCQ_F_CAN_BYPASS;
	else
		sch->flags &= ~TCQ_F_CAN_BYPASS;

	/* A lower limit drops the least urgent packets now: O(1) each. */
	while (mercury_over_limit(q, sch, 0, 0)) {
		skb = mercury_victim(q, -1);
		if (!skb)
			break;
		mercury_count_drop(q, sch, 0);
		dropped++;
		dropped_len += qdisc_pkt_len(skb);
		qdisc_qstats_backlog_dec(sch, skb);
		qdisc_qstats_drop(sch);
		sch->q.qlen--;
		rtnl_kfree_skbs(skb, skb);
	}
	if (dropped)
		qdisc_tree_reduce_backlog(sch, dropped, dropped_len);
	sch_tree_unlock(sch);

	mercury_tables_free(&old);
	return 0;
}

static int mercury_init(struct Qdisc *sch, struct nlattr *opt,
			struct netlink_ext_ack *extack)
{
	struct mercury_sched_data *q = qdisc_priv(sch);

	INIT_LIST_HEAD(&q->idle);
	INIT_LIST_HEAD(&q->spares);
	q->keep_spares = 1;
	q->cfg = mercury_defaults;
	q->cfg.quantum = max_t(u32, q->cfg.quantum, 2 * psched_mtu(qdisc_dev(sch)));
	mercury_apply_cfg(q, &q->cfg);
	return mercury_change(sch, opt, extack);
}

/* Free every queued packet; the flows stay in the table, idle. */
static void mercury_purge(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u64 forced = q->stat_share_forced;
	struct sk_buff *skb;
	u32 rank;

	if (!q->t.levels)
		return;
	while ((rank = mercury_next_rank(q)) != MERCURY_NO_RANK) {
		skb = mercury_pick(q, rank);
		rtnl_kfree_skbs(skb, skb);
	}
	q->stat_share_forced = forced;
	q->share_credit = 0;
}

static void mercury_reset(struct Qdisc *sch)
{
	mercury_purge(sch);
	sch->q.qlen = 0;
	sch->qstats.backlog = 0;
}

static void mercury_destroy(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);

	mercury_purge(sch);
	if (q->spares.next) {
		mercury_idle_trim(q, 0);
		mercury_spares_trim(q, 0);
	}
	mercury_tables_free(&q->t);
}

static int mercury_dump(struct Qdisc *sch, struct sk_buff *skb)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	struct nlattr *opts;

	opts = nla_nest_start_noflag(skb, TCA_OPTIONS);
	if (!opts)
		return -EMSGSIZE;
	if (nla_put_u32(skb, TCA_MERCURY_LEVELS, READ_ONCE(q->cfg.levels)) ||
	    nla_put_u8(skb, TCA_MERCURY_TAG_SOURCE, READ_ONCE(q->cfg.source)) ||
	    nla_put_u8(skb, TCA_MERCURY_TAG_SHIFT, READ_ONCE(q->cfg.shift)) ||
	    nla_put_u32(skb, TCA_MERCURY_TAG_MASK, READ_ONCE(q->cfg.mask)) ||
	    nla_put_u8(skb, TCA_MERCURY_UNTAGGED, READ_ONCE(q->cfg.untagged)) ||
	    nla_put_u8(skb, TCA_MERCURY_UNTAGGED_SHARE,
		       READ_ONCE(q->cfg.share)) ||
	    nla_put_u8(skb, TCA_MERCURY_FLOW_ORDER,
		       READ_ONCE(q->cfg.flow_order)) ||
	    nla_put_u32(skb, TCA_MERCURY_FLOWS, READ_ONCE(q->cfg.flows)) ||
	    nla_put_u32(skb, TCA_MERCURY_LIMIT, READ_ONCE(q->cfg.limit)) ||
	    nla_put_u32(skb, TCA_MERCURY_MEMORY_LIMIT,
			READ_ONCE(q->cfg.memory_limit)) ||
	    nla_put_u32(skb, TCA_MERCURY_QUANTUM, READ_ONCE(q->cfg.quantum)) ||
	    nla_put_u8(skb, TCA_MERCURY_BYPASS, READ_ONCE(q->cfg.bypass)) ||
	    nla_put_u32(skb, TCA_MERCURY_FLOW_LIMIT,
			READ_ONCE(q->cfg.flow_limit)))
		goto nla_put_failure;
	return nla_nest_end(skb, opts);

nla_put_failure:
	nla_nest_cancel(skb, opts);
	return -EMSGSIZE;
}

static int mercury_dump_stats(struct Qdisc *sch, struct gnet_dump *d)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	struct tc_mercury_xstats st = {};

	st.type = TC_MERCURY_XSTATS_QDISC;
	sch_tree_lock(sch);
	st.flows = q->nflows;
	st.levels_active = q->active_levels;
	st.most_urgent = q->stat_most_urgent;
	st.memory_usage = q->memory_usage;
	st.drops_limit = q->stat_drops_limit;
	st.drops_memory = q->stat_drops_memory;
	st.inversions_avoided = q->stat_inversions_avoided;
	st.untagged_packets = q->stat_untagged_packets;
	st.untagged_bytes = q->stat_untagged_bytes;
	st.share_forced = q->stat_share_forced;
	st.drops_flows = q->stat_drops_flows;
	st.drops_flow_limit = q->stat_drops_flow_limit;
	sch_tree_unlock(sch);

	return gnet_stats_copy_app(d, &st, sizeof(st));
}

/* ---- classes: per-level statistics ----------------------------------- */

/* Every level is a class: minor N for tag N (1..levels, and levels is at
 * most TC_MERCURY_MAX_LEVELS, below TC_MERCURY_UNTAGGED_MINOR), minor
 * TC_MERCURY_UNTAGGED_MINOR for the untagged class. The internal handle
 * is rank + 1, so that 0 stays "no class".
 */
static unsigned long mercury_find(struct Qdisc *sch, u32 classid)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u32 minor = TC_H_MIN(classid);

	if (minor == TC_MERCURY_UNTAGGED_MINOR)
		return q->untagged_rank + 1;
	if (!minor || minor > q->cfg.levels)
		return 0;
	return (q->cfg.untagged == TC_MERCURY_UNTAGGED_FIRST ?
		minor : minor - 1) + 1;
}

static struct Qdisc *mercury_leaf(struct Qdisc *sch, unsigned long cl)
{
	return NULL;
}

static u32 mercury_minor(const struct mercury_sched_data *q, u32 rank)
{
	u32 tag = mercury_tag_of_rank(q, rank);

	return tag ? tag : TC_MERCURY_UNTAGGED_MINOR;
}

static void mercury_walk(struct Qdisc *sch, struct qdisc_walker *arg)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	const struct mercury_level *l;
	u32 rank;

	if (arg->stop || !q->t.levels)
		return;
	/* arg->count is the position in the walk, listed or not, as in
	 * sch_cake: a dump split over messages resumes at the rank it
	 * stopped at, even when a level gains or loses its class meanwhile.
	 */
	for (rank = 0; rank <= q->cfg.levels; rank++) {
		l = &q->t.levels[rank];
		if (!u64_stats_read(&l->bstats.packets) && !l->qlen &&
		    !l->drops) {
			arg->count++;
			continue;
		}
		if (!tc_qdisc_stats_dump(sch, rank + 1, arg))
			break;
	}
}

static int mercury_dump_class(struct Qdisc *sch, unsigned long cl,
			      struct sk_buff *skb, struct tcmsg *tcm)
{
	struct mercury_sched_data *q = qdisc_priv(sch);

	tcm->tcm_handle |= TC_H_MIN(mercury_minor(q, cl - 1));
	tcm->tcm_info = 0;
	return 0;
}

static int mercury_dump_class_stats(struct Qdisc *sch, unsigned long cl,
				    struct gnet_dump *d)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	struct tc_mercury_cl_xstats st = {};
	struct gnet_stats_queue qs = {};
	struct mercury_level *l;
	u32 rank = cl - 1, qlen;

	if (rank > q->cfg.levels)
		return -EINVAL;
	l = &q->t.levels[rank];
	st.type = TC_MERCURY_XSTATS_CLASS;
	sch_tree_lock(sch);
	st.tag = mercury_tag_of_rank(q, rank);
	st.flows = l->nflows;
	qs.backlog = l->backlog;
	qs.drops = l->drops;
	qlen = l->qlen;
	sch_tree_unlock(sch);

	if (gnet_stats_copy_basic(d, NULL, &l->bstats, true) < 0 ||
	    gnet_stats_copy_queue(d, NULL, &qs, qlen) < 0)
		return -1;
	return gnet_stats_copy_app(d, &st, sizeof(st));
}

static const struct Qdisc_class_ops mercury_class_ops = {
	.leaf		= mercury_leaf,
	.find		= mercury_find,
	.walk		= mercury_walk,
	.dump		= mercury_dump_class,
	.dump_stats	= mercury_dump_class_stats,
};

static struct Qdisc_ops mercury_qdisc_ops __read_mostly = {
	.cl_ops		= &mercury_class_ops,
	.id		= "mercury",
	.priv_size	= sizeof(struct mercury_sched_data),
	.enqueue	= mercury_enqueue,
	.dequeue	= mercury_dequeue,
	.peek		= mercury_peek,
	.init		= mercury_init,
	.reset		= mercury_reset,
	.destroy	= mercury_destroy,
	.change		= mercury_change,
	.dump		= mercury_dump,
	.dump_stats	= mercury_dump_stats,
	.owner		= THIS_MODULE,
};

static int __init mercury_module_init(void)
{
	int err;

	BUILD_BUG_ON(sizeof(struct mercury_skb_cb) > QDISC_CB_PRIV_LEN);
	BUILD_BUG_ON(TC_MERCURY_MAX_LEVELS >= TC_MERCURY_UNTAGGED_MINOR);
	mercury_flow_cachep = kmem_cache_create("mercury_flow",
						sizeof(struct mercury_flow),
						0, SLAB_HWCACHE_ALIGN, NULL);
	if (!mercury_flow_cachep)
		return -ENOMEM;
	err = register_qdisc(&mercury_qdisc_ops);
	if (err)
		goto err_cache;
	return 0;

err_cache:
	kmem_cache_destroy(mercury_flow_cachep);
	return err;
}

static void __exit mercury_module_exit(void)
{
	unregister_qdisc(&mercury_qdisc_ops);
	kmem_cache_destroy(mercury_flow_cachep);
}

module_init(mercury_module_init);
module_exit(mercury_module_exit);
MODULE_ALIAS_NET_SCH("mercury");
MODULE_DESCRIPTION("Mercury: layer-priority packet scheduler for DNN training");
MODULE_AUTHOR("The Mercury developers");
MODULE_LICENSE("GPL");
