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
 *    its most urgent queued packet; with flow_order off a flow is one
 *    socket at one rank. Flows at one level share it by bytes (deficit
 *    round robin).
 *  - Drops (limit packets, memory_limit bytes of truesize): the victim is
 *    the newest packet of the flow whose newest packet is least urgent,
 *    the newest such among equals; an arriving packet is dropped instead
 *    when it would itself be that packet. So a packet with others of its
 *    flow behind it is never dropped, with flow_order off the victim is
 *    the least urgent packet queued (the newest among equals), and a more
 *    urgent packet is never dropped to admit a less urgent one. Packets
 *    are evicted only if that makes room for the arrival; otherwise the
 *    arrival alone is dropped (a packet larger than memory_limit by
 *    itself, too). Evicting from the arrival's own flow returns
 *    NET_XMIT_CN.
 *  - Untagged share: while untagged and tagged packets both wait, the
 *    untagged class gets untagged_share percent of the bytes (at least,
 *    when it is last; at most, when it is first, MERCURY_FIRST_SHARE by
 *    default), and a debt it ran up stays while tagged packets wait, so
 *    neither placement can starve the other class, not even a source
 *    that never has two packets queued.
 *  - peek returns the packet the next dequeue returns, and leaves it
 *    queued; share credit and counters move at dequeue only.
 *  - With bypass on (the default), a packet that finds the qdisc empty
 *    and the device free is sent by the core at once, as with pfifo_fast
 *    and fq_codel: counted in the qdisc's statistics, not in its level's.
 *
 * Data structures, every operation O(1) or O(log n) in the worst case
 * (mercury_core.h; Documentation/sch_mercury.md):
 *  - Levels indexed by rank (0 first) under a three-word bitmap:
 *    first, last and next non-empty level in three word operations.
 *  - Flows come from a kmem_cache (GFP_ATOMIC; a packet whose flow cannot
 *    be allocated is dropped and counted) and are freed when empty. They
 *    are found by key in a table of 'flows' small red-black trees.
 *  - A flow's packets are an augmented red-black tree by arrival, linked
 *    through skb->rbnode, each node keeping its subtree's most urgent
 *    rank: push at the tail, pop at the head and drop at the tail are
 *    O(log qlen), and the flow's rank is the root's minimum.
 *  - A tree of flows ordered by their newest packet (rank, then arrival)
 *    gives the drop victim in O(log flows).
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
#include <linux/rbtree_augmented.h>
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

struct mercury_flow;
static struct mercury_flow *mercury_flow_alloc(void);
static void mercury_flow_free(struct mercury_flow *f);

#include "mercury_core.h"

static struct kmem_cache *mercury_flow_cachep __read_mostly;

static struct mercury_flow *mercury_flow_alloc(void)
{
	return kmem_cache_alloc(mercury_flow_cachep, GFP_ATOMIC | __GFP_NOWARN);
}

static void mercury_flow_free(struct mercury_flow *f)
{
	kmem_cache_free(mercury_flow_cachep, f);
}

struct mercury_config {
	u32	levels;		/* tagged levels */
	u32	flows;		/* flow lookup buckets */
	u32	mask;		/* tag mask */
	u32	limit;		/* packets */
	u32	memory_limit;	/* bytes of truesize */
	u32	quantum;	/* bytes */
	u8	source;		/* TC_MERCURY_TAG_* */
	u8	shift;		/* bits */
	u8	untagged;	/* TC_MERCURY_UNTAGGED_* */
	u8	share;		/* percent */
	u8	flow_order;	/* bool */
	u8	bypass;		/* bool: TCQ_F_CAN_BYPASS */
};

struct mercury_sched_data {
	/* packet path */
	struct mercury_core	c;
	struct mercury_config	cfg;
	u32			untagged_rank;		/* rank of tag 0 */

	/* statistics */
	u32			stat_most_urgent;
	u64			stat_drops_limit;
	u64			stat_drops_memory;
	u64			stat_inversions_avoided;
	u64			stat_untagged_packets;
	u64			stat_untagged_bytes;
	u64			stat_drops_flows;	/* no memory for a flow */
};

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
 * holds a reference on its socket (sock_wfree and friends), and a flow
 * lives only while it holds packets, so a socket pointer cannot name a
 * new socket while its flow exists. Packets without a full, connected
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
	       (u64)q->c.memory_usage + truesize > q->cfg.memory_limit;
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
	u64 mem = (u64)q->c.memory_usage + skb->truesize;
	u32 pkts = 0;

	if (sch->q.qlen + 1 > q->cfg.limit)
		pkts = sch->q.qlen + 1 - q->cfg.limit;
	return mercury_can_evict(&q->c, rank, pkts,
				 mem > q->cfg.memory_limit ?
				 mem - q->cfg.memory_limit : 0);
}

/* A packet leaving the core: skb->rbnode overlaid skb->dev. */
static struct sk_buff *mercury_out(struct Qdisc *sch, struct sk_buff *skb)
{
	skb->dev = qdisc_dev(sch);
	return skb;
}

static int mercury_drop_arrival(struct sk_buff *skb, struct Qdisc *sch,
				struct sk_buff **to_free, unsigned int dropped,
				unsigned int dropped_len)
{
	struct mercury_sched_data *q = qdisc_priv(sch);

	q->c.t.levels[mercury_rank_of(skb)].drops++;
	if (dropped)
		qdisc_tree_reduce_backlog(sch, dropped, dropped_len);
	return qdisc_drop(skb, sch, to_free);
}

static int mercury_enqueue(struct sk_buff *skb, struct Qdisc *sch,
			   struct sk_buff **to_free)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	unsigned int dropped = 0, dropped_len = 0;
	struct sk_buff *victim;
	bool own = false;
	unsigned long key;
	u32 rank, tag;

	rank = mercury_classify(q, skb);
	mercury_cb(skb)->rank = rank;
	key = mercury_flow_key(skb);

	/* Too big for memory_limit on its own: evicting others cannot help. */
	if (unlikely(skb->truesize > q->cfg.memory_limit)) {
		q->stat_drops_memory++;
		return mercury_drop_arrival(skb, sch, to_free, 0, 0);
	}
	if (mercury_over_limit(q, sch, 1, skb->truesize)) {
		/* Never evict for a packet that then cannot be queued: decide
		 * first whether the victims make room and the flow exists or
		 * can be allocated.
		 */
		if (!mercury_room_for(q, sch, skb, rank)) {
			mercury_count_drop(q, sch, 1);
			return mercury_drop_arrival(skb, sch, to_free, 0, 0);
		}
		if (mercury_flow_reserve(&q->c, key, rank)) {
			q->stat_drops_flows++;
			return mercury_drop_arrival(skb, sch, to_free, 0, 0);
		}
		do {
			victim = mercury_victim(&q->c, rank);
			if (WARN_ON_ONCE(!victim))
				return mercury_drop_arrival(skb, sch, to_free,
							    dropped,
							    dropped_len);
			mercury_count_drop(q, sch, 1);
			/* with flow order off a victim is less urgent than
			 * the arrival, so of another flow
			 */
			if (q->c.flow_order && mercury_flow_key(victim) == key)
				own = true;
			dropped++;
			dropped_len += qdisc_pkt_len(victim);
			qdisc_qstats_backlog_dec(sch, victim);
			sch->q.qlen--;
			qdisc_drop(mercury_out(sch, victim), sch, to_free);
		} while (mercury_over_limit(q, sch, 1, skb->truesize));
	}

	if (unlikely(mercury_insert(&q->c, skb, key))) {
		q->stat_drops_flows++;
		return mercury_drop_arrival(skb, sch, to_free, dropped,
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

static struct sk_buff *mercury_dequeue(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u32 rank = mercury_next_rank(&q->c);
	struct mercury_level *l;
	struct sk_buff *skb;

	if (rank == MERCURY_NO_RANK)
		return NULL;
	/* the level served first now is more urgent than every other one
	 * (or the share chose the untagged class: counted there instead)
	 */
	if (q->c.stat_levels > 1 && rank == mercury_first_rank(&q->c))
		q->stat_inversions_avoided++;

	skb = mercury_out(sch, mercury_pick(&q->c, rank));
	l = &q->c.t.levels[mercury_rank_of(skb)];
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
	u32 rank = mercury_next_rank(&q->c);

	if (rank == MERCURY_NO_RANK)
		return NULL;
	return mercury_core_peek(&q->c, rank);
}

/* ---- configuration --------------------------------------------------- */

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
	.min = 256,
	.max = 1 << 20,
};

static const struct nla_policy mercury_policy[TCA_MERCURY_MAX + 1] = {
	[TCA_MERCURY_UNSPEC]	     = { .strict_start_type = TCA_MERCURY_LEVELS },
	[TCA_MERCURY_LEVELS]	     = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_levels_range),
	[TCA_MERCURY_TAG_SOURCE]     = NLA_POLICY_MAX(NLA_U8, __TC_MERCURY_TAG_MAX - 1),
	[TCA_MERCURY_TAG_SHIFT]	     = NLA_POLICY_MAX(NLA_U8, 31),
	[TCA_MERCURY_TAG_MASK]	     = NLA_POLICY_MIN(NLA_U32, 1),
	[TCA_MERCURY_UNTAGGED]	     = NLA_POLICY_MAX(NLA_U8, __TC_MERCURY_UNTAGGED_MAX - 1),
	[TCA_MERCURY_UNTAGGED_SHARE] = NLA_POLICY_MAX(NLA_U8, TC_MERCURY_MAX_SHARE),
	[TCA_MERCURY_FLOW_ORDER]     = NLA_POLICY_MAX(NLA_U8, 1),
	[TCA_MERCURY_FLOWS]	     = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_flows_range),
	[TCA_MERCURY_LIMIT]	     = NLA_POLICY_MIN(NLA_U32, 1),
	[TCA_MERCURY_MEMORY_LIMIT]   = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_memory_range),
	[TCA_MERCURY_QUANTUM]	     = NLA_POLICY_FULL_RANGE(NLA_U32, &mercury_quantum_range),
	[TCA_MERCURY_BYPASS]	     = NLA_POLICY_MAX(NLA_U8, 1),
};

/* The policy's own messages ("integer out of range") do not say which
 * option was wrong; this replaces them, keeping the offending attribute.
 * Only attributes inside our nest: a bad TCA_OPTIONS itself keeps its
 * message (e.g. "NLA_F_NESTED is missing").
 */
static void mercury_name_bad_option(struct netlink_ext_ack *extack,
				    const struct nlattr *opt)
{
	const struct nlattr *bad = extack ? extack->bad_attr : NULL;

	if (!bad || (const void *)bad < nla_data(opt) ||
	    (const void *)bad >= nla_data(opt) + nla_len(opt))
		return;
	switch (nla_type(bad)) {
	case TCA_MERCURY_LEVELS:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": levels must be 1..65536");
		break;
	case TCA_MERCURY_TAG_SOURCE:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": tag must be mark, priority or dscp");
		break;
	case TCA_MERCURY_TAG_SHIFT:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": shift must be 0..31");
		break;
	case TCA_MERCURY_TAG_MASK:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": mask must be a non-zero u32");
		break;
	case TCA_MERCURY_UNTAGGED:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": untagged must be first or last");
		break;
	case TCA_MERCURY_UNTAGGED_SHARE:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": untagged_share must be 0..90 percent");
		break;
	case TCA_MERCURY_FLOW_ORDER:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": flow_order must be on or off");
		break;
	case TCA_MERCURY_FLOWS:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": flows must be 1..65536");
		break;
	case TCA_MERCURY_LIMIT:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": limit must be at least 1 packet");
		break;
	case TCA_MERCURY_MEMORY_LIMIT:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": memory_limit must be 1 byte..2 GiB");
		break;
	case TCA_MERCURY_QUANTUM:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": quantum must be 256..1048576 bytes");
		break;
	case TCA_MERCURY_BYPASS:
		NL_SET_ERR_MSG_ATTR(extack, bad,
				    KBUILD_MODNAME ": bypass must be on or off");
		break;
	}
}

static const struct mercury_config mercury_defaults = {
	.levels		= 1024,
	.flows		= 1024,
	.mask		= 0xffff,
	.limit		= 10000,
	.memory_limit	= 32 << 20,
	.quantum	= 2 * 1514,
	.source		= TC_MERCURY_TAG_MARK,
	.shift		= 0,
	.untagged	= TC_MERCURY_UNTAGGED_FIRST,
	.share		= 0,
	.flow_order	= 1,
	.bypass		= 1,
};

static void mercury_tables_free(struct mercury_tables *t)
{
	kvfree(t->levels);
	kvfree(t->leaf);
	kvfree(t->buckets);
	memset(t, 0, sizeof(*t));
}

static int mercury_tables_alloc(struct mercury_tables *t,
				const struct mercury_config *cfg)
{
	u32 nranks = cfg->levels + 1;
	u32 i;

	t->levels = kvcalloc(nranks, sizeof(*t->levels), GFP_KERNEL);
	t->leaf = kvcalloc(MERCURY_LEAF_WORDS(nranks), sizeof(*t->leaf),
			   GFP_KERNEL);
	t->buckets = kvcalloc(1U << mercury_bucket_bits(cfg->flows),
			      sizeof(*t->buckets), GFP_KERNEL);
	if (!t->levels || !t->leaf || !t->buckets) {
		mercury_tables_free(t);
		return -ENOMEM;
	}
	for (i = 0; i < nranks; i++) {
		INIT_LIST_HEAD(&t->levels[i].flows);
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
	if (err < 0) {
		mercury_name_bad_option(extack, opt);
		return err;
	}

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

	/* Checks across options, on the configuration as it would be. */
	if (cfg->levels > cfg->mask) {
		NL_SET_ERR_MSG_MOD(extack,
				   "levels exceeds the largest tag mask can give");
		return -EINVAL;
	}
	if (cfg->source == TC_MERCURY_TAG_DSCP &&
	    !((0x3f >> cfg->shift) & cfg->mask)) {
		NL_SET_ERR_MSG_MOD(extack,
				   "shift and mask leave no DSCP bit for the tag");
		return -EINVAL;
	}
	if (cfg->share && cfg->untagged != TC_MERCURY_UNTAGGED_LAST) {
		NL_SET_ERR_MSG_MOD(extack,
				   "untagged_share needs untagged last");
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
	WRITE_ONCE(q->cfg.quantum, cfg->quantum);
	WRITE_ONCE(q->cfg.source, cfg->source);
	WRITE_ONCE(q->cfg.shift, cfg->shift);
	WRITE_ONCE(q->cfg.untagged, cfg->untagged);
	WRITE_ONCE(q->cfg.share, cfg->share);
	WRITE_ONCE(q->cfg.flow_order, cfg->flow_order);
	WRITE_ONCE(q->cfg.bypass, cfg->bypass);
	q->untagged_rank = first ? 0 : cfg->levels;
	q->c.urank = q->untagged_rank;
	/* untagged first is capped too: it must not starve the gradients */
	q->c.share = cfg->share ? cfg->share : first ? MERCURY_FIRST_SHARE : 0;
	q->c.bucket_bits = mercury_bucket_bits(cfg->flows);
	mercury_set_quantum(&q->c, cfg->quantum);
	q->c.flow_order = cfg->flow_order;
}

/* Unlink every queued packet, in service order, keeping the flows they
 * leave as spares so that re-queueing them needs no allocation.
 */
static struct sk_buff *mercury_drain(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u64 forced = q->c.stat_share_forced;
	struct sk_buff *head = NULL, **tail = &head;
	u32 rank;

	q->c.keep_spares = U32_MAX;
	while ((rank = mercury_next_rank(&q->c)) != MERCURY_NO_RANK) {
		*tail = mercury_out(sch, mercury_pick(&q->c, rank));
		tail = &(*tail)->next;
	}
	/* nothing was sent */
	q->c.stat_share_forced = forced;
	return head;
}

/* Carry a level's counters over a structural change, to the level that
 * now has its tag; a tag that no longer has a level loses its class.
 */
static void mercury_carry_counters(struct mercury_sched_data *q,
				   const struct mercury_config *old_cfg,
				   const struct mercury_tables *old)
{
	u32 old_urank = old_cfg->untagged == TC_MERCURY_UNTAGGED_FIRST ?
			0 : old_cfg->levels;
	bool old_first = old_cfg->untagged == TC_MERCURY_UNTAGGED_FIRST;
	bool first = q->cfg.untagged == TC_MERCURY_UNTAGGED_FIRST;
	struct mercury_level *from, *to;
	u32 rank, tag, nrank;

	for (rank = 0; rank <= old_cfg->levels; rank++) {
		from = &old->levels[rank];
		tag = rank == old_urank ? 0 : old_first ? rank : rank + 1;
		if (!tag)
			nrank = q->untagged_rank;
		else if (tag <= q->cfg.levels)
			nrank = first ? tag : tag - 1;
		else
			continue;
		to = &q->c.t.levels[nrank];
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
	rebuild = !q->c.t.levels || mercury_structural(&q->cfg, &cfg);
	if (rebuild) {
		err = mercury_tables_alloc(&fresh, &cfg);
		if (err) {
			NL_SET_ERR_MSG_MOD(extack, "no memory for levels and flows");
			return err;
		}
	}

	sch_tree_lock(sch);
	if (rebuild) {
		skb = q->c.t.levels ? mercury_drain(sch) : NULL;
		old = q->c.t;
		q->c.t = fresh;
		q->c.top = 0;
		memset(q->c.mid, 0, sizeof(q->c.mid));
		q->c.stat_levels = 0;
		q->c.share_credit = 0;
		mercury_apply_cfg(q, &cfg);
		if (old.levels)
			mercury_carry_counters(q, &old_cfg, &old);
		for (; skb; skb = next) {
			next = skb->next;
			skb->next = NULL;
			mercury_cb(skb)->rank = mercury_classify(q, skb);
			if (mercury_insert(&q->c, skb, mercury_flow_key(skb))) {
				/* flow_order off may need more flows than
				 * were kept: no memory, so drop and count
				 */
				q->stat_drops_flows++;
				q->c.t.levels[mercury_rank_of(skb)].drops++;
				dropped++;
				dropped_len += qdisc_pkt_len(skb);
				qdisc_qstats_backlog_dec(sch, skb);
				qdisc_qstats_drop(sch);
				sch->q.qlen--;
				rtnl_kfree_skbs(skb, skb);
			}
		}
		mercury_spares_trim(&q->c, 1);
	} else {
		if (cfg.share != q->cfg.share)
			q->c.share_credit = 0;
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

	/* A lower limit drops the least urgent packets now: O(log n) each. */
	while (mercury_over_limit(q, sch, 0, 0)) {
		skb = mercury_victim(&q->c, -1);
		if (!skb)
			break;
		mercury_count_drop(q, sch, 0);
		dropped++;
		dropped_len += qdisc_pkt_len(skb);
		qdisc_qstats_backlog_dec(sch, skb);
		qdisc_qstats_drop(sch);
		sch->q.qlen--;
		rtnl_kfree_skbs(mercury_out(sch, skb), skb);
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

	mercury_core_init(&q->c);
	q->cfg = mercury_defaults;
	q->cfg.quantum = max_t(u32, q->cfg.quantum, 2 * psched_mtu(qdisc_dev(sch)));
	mercury_apply_cfg(q, &q->cfg);
	return mercury_change(sch, opt, extack);
}

/* Free every queued packet and every flow but the spare. */
static void mercury_purge(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u64 forced = q->c.stat_share_forced;
	struct sk_buff *skb;
	u32 rank;

	if (!q->c.t.levels)
		return;
	while ((rank = mercury_next_rank(&q->c)) != MERCURY_NO_RANK) {
		skb = mercury_out(sch, mercury_pick(&q->c, rank));
		rtnl_kfree_skbs(skb, skb);
	}
	q->c.stat_share_forced = forced;
	q->c.share_credit = 0;
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
	if (q->c.spares.next)
		mercury_spares_trim(&q->c, 0);
	mercury_tables_free(&q->c.t);
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
	    nla_put_u8(skb, TCA_MERCURY_BYPASS, READ_ONCE(q->cfg.bypass)))
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
	st.flows = q->c.nflows;
	st.levels_active = q->c.stat_levels;
	st.most_urgent = q->stat_most_urgent;
	st.memory_usage = q->c.memory_usage;
	st.drops_limit = q->stat_drops_limit;
	st.drops_memory = q->stat_drops_memory;
	st.inversions_avoided = q->stat_inversions_avoided;
	st.untagged_packets = q->stat_untagged_packets;
	st.untagged_bytes = q->stat_untagged_bytes;
	st.share_forced = q->c.stat_share_forced;
	st.drops_flows = q->stat_drops_flows;
	sch_tree_unlock(sch);

	return gnet_stats_copy_app(d, &st, sizeof(st));
}

/* ---- classes: per-level statistics ----------------------------------- */

/* Class handles are rank + 1, so that 0 stays "no class". */
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

	if (arg->stop || !q->c.t.levels)
		return;
	/* arg->count is the position in the walk, listed or not, as in
	 * sch_cake: a dump split over messages resumes at the rank it
	 * stopped at, even when a level gains or loses its class meanwhile.
	 */
	for (rank = 0; rank <= q->cfg.levels; rank++) {
		l = &q->c.t.levels[rank];
		/* tags 0xffff and up have no class handle of their own */
		if ((!u64_stats_read(&l->bstats.packets) && !l->qlen &&
		     !l->drops) ||
		    mercury_tag_of_rank(q, rank) >= TC_MERCURY_UNTAGGED_MINOR) {
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
	l = &q->c.t.levels[rank];
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
