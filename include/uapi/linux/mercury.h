/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Mercury layer-priority qdisc: netlink options and statistics.
 *
 * Shared by the module (kmod/), the tc plugin (tc-plugin/) and the
 * userspace tools. Append only: never reorder or remove an attribute or a
 * statistics field.
 */
#ifndef _UAPI_LINUX_MERCURY_H
#define _UAPI_LINUX_MERCURY_H

#include <linux/types.h>

/* Where the tag comes from (TCA_MERCURY_TAG_SOURCE). */
enum {
	TC_MERCURY_TAG_MARK,		/* skb->mark */
	TC_MERCURY_TAG_PRIORITY,	/* skb->priority */
	TC_MERCURY_TAG_DSCP,		/* DSCP of the IPv4 or IPv6 header */
	__TC_MERCURY_TAG_MAX,
};

/* Where tag 0 and out-of-range tags go (TCA_MERCURY_UNTAGGED). */
enum {
	TC_MERCURY_UNTAGGED_FIRST,	/* before every tagged level */
	TC_MERCURY_UNTAGGED_LAST,	/* after every tagged level */
	__TC_MERCURY_UNTAGGED_MAX,
};

/* Tagged levels: tags 1..levels. Each level is a class, minor N for tag
 * N, below TC_MERCURY_UNTAGGED_MINOR: 16-bit minors hold no more.
 */
#define TC_MERCURY_MAX_LEVELS	65534
#define TC_MERCURY_MAX_FLOWS	65536	/* flow lookup buckets */
#define TC_MERCURY_MAX_SHARE	90	/* untagged share, percent */
#define TC_MERCURY_MAX_MEMORY_LIMIT	(1U << 31)	/* bytes: 2 GiB */
#define TC_MERCURY_MAX_SHIFT	31	/* bits */
#define TC_MERCURY_MIN_QUANTUM	256		/* bytes */
#define TC_MERCURY_MAX_QUANTUM	(1U << 20)	/* bytes */

/*
 * The kernel's defaults: what a new qdisc has for each option not given.
 * The module configures itself from these, and userspace (mercuryctl,
 * libmercury) reads them here rather than keeping a copy. A new qdisc's
 * quantum is raised to twice the device's MTU when that is larger.
 */
#define TC_MERCURY_DEF_LEVELS		1024
#define TC_MERCURY_DEF_TAG_SOURCE	TC_MERCURY_TAG_MARK
#define TC_MERCURY_DEF_SHIFT		0
#define TC_MERCURY_DEF_MASK		0xffff
#define TC_MERCURY_DEF_UNTAGGED		TC_MERCURY_UNTAGGED_FIRST
#define TC_MERCURY_DEF_SHARE		0		/* percent */
#define TC_MERCURY_DEF_FLOW_ORDER	1		/* on */
#define TC_MERCURY_DEF_FLOWS		1024
#define TC_MERCURY_DEF_LIMIT		10000		/* packets */
#define TC_MERCURY_DEF_MEMORY_LIMIT	(32U << 20)	/* bytes */
#define TC_MERCURY_DEF_QUANTUM		(2 * 1514)	/* bytes */
#define TC_MERCURY_DEF_BYPASS		1		/* on */
#define TC_MERCURY_DEF_FLOW_LIMIT	0		/* packets, 0: none */

/* What a TCA_STATS_APP holds: its first field, in both structs below. */
enum {
	TC_MERCURY_XSTATS_QDISC = 1,	/* struct tc_mercury_xstats */
	TC_MERCURY_XSTATS_CLASS,	/* struct tc_mercury_cl_xstats */
};

enum {
	TCA_MERCURY_UNSPEC,
	TCA_MERCURY_LEVELS,		/* u32: number of tagged levels */
	TCA_MERCURY_TAG_SOURCE,		/* u8: TC_MERCURY_TAG_* */
	TCA_MERCURY_TAG_SHIFT,		/* u8: bits, tag = (v >> shift) & mask */
	TCA_MERCURY_TAG_MASK,		/* u32: non-zero bit mask */
	TCA_MERCURY_UNTAGGED,		/* u8: TC_MERCURY_UNTAGGED_* */
	TCA_MERCURY_UNTAGGED_SHARE,	/* u8: percent of bytes, 'last' only */
	TCA_MERCURY_FLOW_ORDER,		/* u8: 1 keeps each flow in order */
	TCA_MERCURY_FLOWS,		/* u32: flow lookup buckets */
	TCA_MERCURY_LIMIT,		/* u32: packets */
	TCA_MERCURY_MEMORY_LIMIT,	/* u32: bytes of skb truesize, at most
					 * TC_MERCURY_MAX_MEMORY_LIMIT
					 */
	TCA_MERCURY_QUANTUM,		/* u32: bytes per round within a level */
	TCA_MERCURY_BYPASS,		/* u8: 1 sends a packet that finds the
					 * qdisc empty straight to the device
					 */
	TCA_MERCURY_FLOW_LIMIT,		/* u32: most packets one flow holds
					 * queued, 0: no such limit
					 */
	__TCA_MERCURY_MAX
};

#define TCA_MERCURY_MAX	(__TCA_MERCURY_MAX - 1)

/* Qdisc statistics (TCA_STATS_APP of the qdisc). */
struct tc_mercury_xstats {
	__u32	type;			/* TC_MERCURY_XSTATS_QDISC */
	__u32	reserved;		/* 0 */
	__u32	flows;			/* flows holding packets now */
	__u32	levels_active;		/* levels holding flows now */
	__u32	most_urgent;		/* smallest tag ever queued, 0: none */
	__u32	memory_usage;		/* bytes of skb truesize queued */
	__u64	drops_limit;		/* packets dropped: limit reached */
	__u64	drops_memory;		/* packets dropped: memory_limit */
	__u64	inversions_avoided;	/* packets sent while a less urgent
					 * level also held packets
					 */
	__u64	untagged_packets;	/* packets sent from the untagged class */
	__u64	untagged_bytes;		/* bytes sent from the untagged class */
	__u64	share_forced;		/* untagged packets sent ahead of tagged
					 * ones to honour untagged_share
					 */
	__u64	drops_flows;		/* packets dropped: no memory for
					 * their flow
					 */
	__u64	drops_flow_limit;	/* packets dropped: their flow held
					 * flow_limit packets
					 */
};

/*
 * Class statistics (TCA_STATS_APP of a class). Class minor N is tag N
 * (1..TC_MERCURY_MAX_LEVELS); the untagged class is minor
 * TC_MERCURY_UNTAGGED_MINOR. Only levels that
 * ever saw a packet are listed. Packets, bytes, drops, backlog and qlen of
 * a level are in the class's standard statistics. Readers tell this
 * struct from the qdisc's by its type, never by its size.
 */
#define TC_MERCURY_UNTAGGED_MINOR	0xffff

struct tc_mercury_cl_xstats {
	__u32	type;			/* TC_MERCURY_XSTATS_CLASS */
	__u32	tag;			/* tag of this level, 0: untagged */
	__u32	flows;			/* flows served at this level now */
};

#endif /* _UAPI_LINUX_MERCURY_H */
