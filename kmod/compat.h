/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels sch_mercury builds against, probed by
 * feature, never by version number: a test of what the headers provide,
 * as wireguard-linux-compat does. Force-included by Kbuild, so each probe
 * first includes the header that would provide the feature.
 *
 * Tested on Debian 12's 6.1 and 6.12 (Documentation/install.md). Between
 * the two, every other kernel interface the module uses has the same
 * declaration: Qdisc_ops and Qdisc_class_ops (reset, peek, walk with
 * tc_qdisc_stats_dump), qdisc_drop and __qdisc_drop with a to_free list,
 * qdisc_tree_reduce_backlog(sch, n, len), gnet_stats_basic_sync with
 * gnet_stats_copy_basic(d, NULL, b, true), nla_parse_nested with
 * NLA_POLICY_FULL_RANGE/MAX/MIN (6.1 points at a writable range, so the
 * module's ranges are not const), kmem_cache_create with five arguments
 * (6.12 turned it into a macro that still takes them), skb_protocol,
 * skb_get_hash, rtnl_kfree_skbs, kvzalloc_node, netdev_queue_numa_node_read.
 */
#ifndef _MERCURY_COMPAT_H
#define _MERCURY_COMPAT_H

#include <linux/module.h>
#include <net/pkt_sched.h>

/*
 * MODULE_ALIAS_NET_SCH: from 6.9 on, pkt_sched.h defines it and the
 * kernel requests "net-sch-<kind>" when a qdisc kind is unknown; before,
 * it requests "sch_<kind>", which the module's file name answers. Define
 * the same alias where the header has none, so that one module answers
 * both requests (Documentation/install.md, "Module auto-loading").
 */
#ifndef MODULE_ALIAS_NET_SCH
#define MODULE_ALIAS_NET_SCH(id)	MODULE_ALIAS("net-sch-" id)
#endif

/*
 * Qdisc drop reasons: where sch_generic.h brings in dropreason-qdisc.h
 * (its DEFINE_QDISC_DROP_REASON list), a qdisc tells why it dropped a
 * packet (tracepoint qdisc:qdisc_drop) through qdisc_drop_reason() with a
 * QDISC_DROP_* reason. Where it does not, every qdisc drop carries the
 * same generic reason, and the argument is unused.
 */
#ifndef DEFINE_QDISC_DROP_REASON
enum qdisc_drop_reason {
	QDISC_DROP_GENERIC,
	QDISC_DROP_OVERLIMIT,
};

#define qdisc_drop_reason(skb, sch, to_free, reason) \
	qdisc_drop(skb, sch, to_free)
#endif

/*
 * skb_gso_segment(): declared in net/gso.h where the kernel has that
 * header (6.5 on; Kbuild defines MERCURY_HAVE_NET_GSO_H when it finds
 * it), in linux/netdevice.h before.
 */
#ifdef MERCURY_HAVE_NET_GSO_H
#include <net/gso.h>
#endif

#endif /* _MERCURY_COMPAT_H */
