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
 *    (value >> shift) & mask. Tag 1 is the most urgent;
 *    tags 1..levels are tagged levels, tags above levels count as
 *    levels (the least urgent tagged level). Tag 0 goes to the untagged
 *    class, placed before or after all tagged levels.
 *  - Packets of one flow (one skb_get_hash(), folded into a bucket) never
 *    overtake each other. A flow is served at the level of its most urgent
 *    queued packet. Flows at one level share it round-robin by bytes
 *    (deficit round robin, one quantum per round).
 *  - With flow_order off, the bucket is also chosen by level, so packets
 *    of one flow at different levels may overtake each other.
 *  - When full (limit packets or memory_limit bytes of truesize), the newest
 *    packet of a flow at the least urgent level is dropped, unless the
 *    arriving packet is not more urgent than it: then the arriving packet
 *    is dropped. A more urgent packet is never dropped to admit a less
 *    urgent one.
 *  - With the untagged class last and untagged_share > 0, untagged packets
 *    get at least that share of the bytes while tagged traffic saturates
 *    the link.
 *  - With bypass on (the default), a packet that finds the qdisc empty
 *    and the device free is sent by the core at once, as with pfifo_fast
 *    and fq_codel: counted in the qdisc's statistics, not in its level's.
 *
 * Data structures, all O(1) per packet:
 *  - Levels are indexed by rank: 0 is served first. A three-level bitmap
 *    (64 x 64 x 64 bits, enough for 65537 ranks) marks ranks holding
 *    flows; find-first-set gives the most urgent, find-last-set the least
 *    urgent level, in three word operations whatever the number of levels.
 *  - Flows live in a fixed hash table of buckets allocated at
 *    configuration time: no allocation on the packet path.
 *  - A flow is a FIFO of skbs (skb->next/prev). Its most urgent packet is
 *    tracked by a "min chain" threaded through the skbs' qdisc cb: the
 *    chain holds the packets that no later packet of the flow is more
 *    urgent than, in FIFO order, so its first element is the flow's most
 *    urgent packet. Appending a packet unlinks the chain's tail while it is
 *    less urgent (amortised O(1): each packet leaves the chain once).
 *    Dequeue takes the FIFO head, which is the chain head or not on it.
 *    Dropping the FIFO tail, which is always the chain tail, re-threads the
 *    packets it had unlinked; this slow path is counted in chain_rebuilds.
 *  - A packet that finds the qdisc empty is held alone outside the flow
 *    table, with no hash or list work; the next arrival moves it in.
 *  - No memory per queued packet beyond the skb itself.
 *  - The packet-path structure lives in mercury_core.h, so that bench/ can
 *    compile and measure the same code in userspace.
 *
 * Locking: enqueue, dequeue and reset run under the qdisc root lock.
 * change() validates and allocates first, then applies under
 * sch_tree_lock(); structural changes re-queue every packet in dequeue
 * order, so no packet is lost and no flow is reordered.
 */

#include <linux/bitops.h>
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/types.h>
#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/dsfield.h>
#include <net/netlink.h>
#include <net/pkt_sched.h>
#include <net/sch_generic.h>
#include <linux/mercury.h>

#include "mercury_core.h"

struct mercury_config {
	u32	levels;		/* tagged levels */
	u32	flows;		/* buckets */
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
	s64			share_credit;		/* bytes x 100 */

	/* statistics */
	u32			stat_most_urgent;
	u64			stat_drops_limit;
	u64			stat_drops_memory;
	u64			stat_inversions_avoided;
	u64			stat_untagged_packets;
	u64			stat_untagged_bytes;
	u64			stat_share_forced;
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
		return ipv4_get_dsfield((const struct iphdr *)h) >> 2;
	case htons(ETH_P_IPV6):
		h = skb_header_pointer(skb, skb_network_offset(skb),
				       sizeof(buf), buf);
		if (!h || h[0] >> 4 != 6)
			return 0;
		return ipv6_get_dsfield((const struct ipv6hdr *)h) >> 2;
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

static bool mercury_over_limit(const struct mercury_sched_data *q,
			       const struct Qdisc *sch, u32 truesize)
{
	return sch->q.qlen >= q->cfg.limit ||
	       q->c.memory_usage + truesize > q->cfg.memory_limit;
}

static void mercury_count_drop(struct mercury_sched_data *q,
			       const struct Qdisc *sch)
{
	if (sch->q.qlen >= q->cfg.limit)
		q->stat_drops_limit++;
	else
		q->stat_drops_memory++;
}

static int mercury_enqueue(struct sk_buff *skb, struct Qdisc *sch,
			   struct sk_buff **to_free)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	unsigned int dropped = 0, dropped_len = 0;
	struct sk_buff *victim;
	u32 rank, tag;

	rank = mercury_classify(q, skb);
	mercury_cb(skb)->rank = rank;

	while (mercury_over_limit(q, sch, skb->truesize)) {
		mercury_count_drop(q, sch);
		victim = mercury_victim(&q->c, rank);
		if (!victim) {
			q->c.t.levels[rank].drops++;
			if (dropped)
				qdisc_tree_reduce_backlog(sch, dropped,
							  dropped_len);
			return qdisc_drop(skb, sch, to_free);
		}
		dropped++;
		dropped_len += qdisc_pkt_len(victim);
		qdisc_qstats_backlog_dec(sch, victim);
		sch->q.qlen--;
		qdisc_drop(victim, sch, to_free);
	}

	mercury_insert(&q->c, skb);
	tag = mercury_tag_of_rank(q, rank);
	if (tag && (!q->stat_most_urgent || tag < q->stat_most_urgent))
		q->stat_most_urgent = tag;
	qdisc_qstats_backlog_inc(sch, skb);
	sch->q.qlen++;
	/* Our parents count the arriving packet but not the victims. */
	if (dropped)
		qdisc_tree_reduce_backlog(sch, dropped, dropped_len);
	return NET_XMIT_SUCCESS;
}

static struct sk_buff *mercury_dequeue(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	u32 rank = mercury_first_rank(&q->c);
	u32 urank = q->untagged_rank;
	struct mercury_level *l;
	struct sk_buff *skb;
	unsigned int len;
	bool untagged_waits;

	if (rank == MERCURY_NO_RANK)
		return NULL;

	untagged_waits = q->cfg.share && rank != urank &&
			 !list_empty(&q->c.t.levels[urank].flows);
	if (untagged_waits && q->share_credit >= 0) {
		/* the untagged class is last: nothing queued is less urgent */
		rank = urank;
		q->stat_share_forced++;
	} else if (q->c.stat_levels > 1) {
		/* @rank is the first level, so every other is less urgent */
		q->stat_inversions_avoided++;
	}

	skb = mercury_pick(&q->c, rank);
	len = qdisc_pkt_len(skb);

	/* Minimum share: tagged bytes earn the untagged class credit while
	 * it waits; each untagged byte spends it. (change() resets the
	 * credit when the share changes.)
	 */
	if (q->cfg.share) {
		if (rank == urank)
			q->share_credit -= (s64)len * (100 - q->cfg.share);
		else if (untagged_waits)
			q->share_credit += (s64)len * q->cfg.share;
		if (list_empty(&q->c.t.levels[urank].flows))
			q->share_credit = 0;
	}

	l = &q->c.t.levels[mercury_rank_of(skb)];
	_bstats_update(&l->bstats, len, 1);
	if (mercury_rank_of(skb) == urank) {
		q->stat_untagged_packets++;
		q->stat_untagged_bytes += len;
	}
	qdisc_qstats_backlog_dec(sch, skb);
	sch->q.qlen--;
	qdisc_bstats_update(sch, skb);
	return skb;
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
	kvfree(t->flows);
	kvfree(t->leaf);
	memset(t, 0, sizeof(*t));
}

static int mercury_tables_alloc(struct mercury_tables *t,
				const struct mercury_config *cfg)
{
	u32 nranks = cfg->levels + 1;
	u32 i;

	t->levels = kvcalloc(nranks, sizeof(*t->levels), GFP_KERNEL);
	t->flows = kvcalloc(cfg->flows, sizeof(*t->flows), GFP_KERNEL);
	t->leaf = kvcalloc(MERCURY_LEAF_WORDS(nranks), sizeof(*t->leaf),
			   GFP_KERNEL);
	if (!t->levels || !t->flows || !t->leaf) {
		mercury_tables_free(t);
		return -ENOMEM;
	}
	for (i = 0; i < nranks; i++) {
		INIT_LIST_HEAD(&t->levels[i].flows);
		gnet_stats_basic_sync_init(&t->levels[i].bstats);
	}
	for (i = 0; i < cfg->flows; i++)
		INIT_LIST_HEAD(&t->flows[i].node);
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
	q->untagged_rank = cfg->untagged == TC_MERCURY_UNTAGGED_FIRST ?
			   0 : cfg->levels;
	q->c.nflows = cfg->flows;
	q->c.quantum = cfg->quantum;
	q->c.flow_order = cfg->flow_order;
}

/* Unlink every queued packet, in service order. */
static struct sk_buff *mercury_drain(struct mercury_sched_data *q)
{
	struct sk_buff *head = NULL, **tail = &head;
	u32 rank;

	while ((rank = mercury_first_rank(&q->c)) != MERCURY_NO_RANK) {
		*tail = mercury_pick(&q->c, rank);
		tail = &(*tail)->next;
	}
	return head;
}

static int mercury_change(struct Qdisc *sch, struct nlattr *opt,
			  struct netlink_ext_ack *extack)
{
	struct mercury_sched_data *q = qdisc_priv(sch);
	struct mercury_tables old = {}, fresh = {};
	unsigned int dropped = 0, dropped_len = 0;
	struct mercury_config cfg = q->cfg;
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
		skb = q->c.t.levels ? mercury_drain(q) : NULL;
		old = q->c.t;
		q->c.t = fresh;
		q->c.top = 0;
		memset(q->c.mid, 0, sizeof(q->c.mid));
		q->c.stat_flows = 0;
		q->c.stat_levels = 0;
		q->share_credit = 0;
		mercury_apply_cfg(q, &cfg);
		for (; skb; skb = next) {
			next = skb->next;
			mercury_cb(skb)->rank = mercury_classify(q, skb);
			mercury_insert(&q->c, skb);
		}
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

	/* A lower limit drops the least urgent packets now. */
	while (sch->q.qlen > q->cfg.limit ||
	       q->c.memory_usage > q->cfg.memory_limit) {
		mercury_count_drop(q, sch);
		skb = mercury_victim(&q->c, -1);
		if (!skb)
			break;
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

	q->cfg = mercury_defaults;
	q->cfg.quantum = max_t(u32, q->cfg.quantum, 2 * psched_mtu(qdisc_dev(sch)));
	mercury_apply_cfg(q, &q->cfg);
	return mercury_change(sch, opt, extack);
}

static void mercury_purge(struct mercury_sched_data *q)
{
	struct mercury_flow *f;
	u32 i;

	if (!q->c.t.levels)
		return;
	if (q->c.solo)
		rtnl_kfree_skbs(q->c.solo, q->c.solo);
	q->c.solo = NULL;
	for (i = 0; i < q->cfg.flows; i++) {
		f = &q->c.t.flows[i];
		if (f->head)
			rtnl_kfree_skbs(f->head, f->tail);
		f->head = NULL;
		f->tail = NULL;
		f->chain_head = NULL;
		f->qlen = 0;
		INIT_LIST_HEAD(&f->node);
	}
	for (i = 0; i <= q->cfg.levels; i++) {
		INIT_LIST_HEAD(&q->c.t.levels[i].flows);
		q->c.t.levels[i].nflows = 0;
		q->c.t.levels[i].qlen = 0;
		q->c.t.levels[i].backlog = 0;
	}
	memset(q->c.t.leaf, 0, MERCURY_LEAF_WORDS(q->cfg.levels + 1) * sizeof(u64));
	memset(q->c.mid, 0, sizeof(q->c.mid));
	q->c.top = 0;
	q->c.memory_usage = 0;
	q->share_credit = 0;
	q->c.stat_flows = 0;
	q->c.stat_levels = 0;
}

static void mercury_reset(struct Qdisc *sch)
{
	mercury_purge(qdisc_priv(sch));
	sch->q.qlen = 0;
	sch->qstats.backlog = 0;
}

static void mercury_destroy(struct Qdisc *sch)
{
	struct mercury_sched_data *q = qdisc_priv(sch);

	mercury_purge(q);
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
	/* the lone packet is one flow at one level, outside the table */
	st.flows = q->c.stat_flows + !!q->c.solo;
	st.levels_active = q->c.stat_levels + !!q->c.solo;
	st.most_urgent = q->stat_most_urgent;
	st.memory_usage = q->c.memory_usage;
	st.drops_limit = q->stat_drops_limit;
	st.drops_memory = q->stat_drops_memory;
	st.inversions_avoided = q->stat_inversions_avoided;
	st.untagged_packets = q->stat_untagged_packets;
	st.untagged_bytes = q->stat_untagged_bytes;
	st.share_forced = q->stat_share_forced;
	st.chain_rebuilds = q->c.stat_chain_rebuilds;
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
	if (q->c.solo && mercury_rank_of(q->c.solo) == rank)
		st.flows++;
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
	.peek		= qdisc_peek_dequeued,
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
	BUILD_BUG_ON(sizeof(struct mercury_skb_cb) > QDISC_CB_PRIV_LEN);
	return register_qdisc(&mercury_qdisc_ops);
}

static void __exit mercury_module_exit(void)
{
	unregister_qdisc(&mercury_qdisc_ops);
}

module_init(mercury_module_init);
module_exit(mercury_module_exit);
MODULE_ALIAS_NET_SCH("mercury");
MODULE_DESCRIPTION("Mercury: layer-priority packet scheduler for DNN training");
MODULE_AUTHOR("The Mercury developers");
MODULE_LICENSE("GPL");
