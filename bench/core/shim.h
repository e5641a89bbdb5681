/* SPDX-License-Identifier: GPL-2.0 */
/*
 * shim.h	Just enough of the kernel for kmod/mercury_core.h in userspace.
 *
 * mercury_core.h's header comment lists what its includer must provide;
 * this file provides exactly that, with the kernel's semantics, so that
 * bench.c measures the very enqueue/dequeue code the module runs. Only
 * the fields the core touches exist in struct sk_buff; the qdisc control
 * block has the kernel's layout (pkt_len, two u16, then the 20 private
 * bytes), so the packed mercury_skb_cb is checked against the real limit.
 */
#ifndef MERCURY_BENCH_SHIM_H
#define MERCURY_BENCH_SHIM_H

/*
 * The kernel's own list, rbtree and hash code, from tools/include and
 * tools/lib/rbtree.c of the kernel source (scripts/install-deps.sh puts
 * them under build/linux-src): the core's trees in userspace are the
 * kernel's trees, not a re-implementation.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/bitops.h>
#include <linux/list.h>
#include <linux/hash.h>
#include <linux/rbtree_augmented.h>

#ifndef U32_MAX
#define U32_MAX			((u32)~0U)
#endif

/* Undefined for 0 in the kernel too; the core never asks. */
static inline unsigned int __ffs64(u64 w)
{
	return (unsigned int)__builtin_ctzll(w);
}

/* ---- the packet -------------------------------------------------------- */

/* next, prev and dev overlay rbnode, as in the kernel's sk_buff. */
struct sk_buff {
	union {
		struct {
			struct sk_buff	*next;
			struct sk_buff	*prev;
			void		*dev;
		};
		struct rb_node	rbnode;
	};
	unsigned int	len;		/* bytes */
	unsigned int	truesize;	/* bytes */
	u32		hash;		/* flow hash, as skb->hash */
	char		cb[48] __attribute__((aligned(8)));
};

#define QDISC_CB_PRIV_LEN 20

struct qdisc_skb_cb {
	unsigned int	pkt_len;
	u16		slave_dev_queue_mapping;
	u16		tc_classid;
	unsigned char	data[QDISC_CB_PRIV_LEN];
};

_Static_assert(sizeof(struct qdisc_skb_cb) <= 48, "qdisc cb exceeds skb->cb");

static inline struct qdisc_skb_cb *qdisc_skb_cb(const struct sk_buff *skb)
{
	return (struct qdisc_skb_cb *)skb->cb;
}

static inline unsigned int qdisc_pkt_len(const struct sk_buff *skb)
{
	return qdisc_skb_cb(skb)->pkt_len;
}

/* The kernel's version is a compile-time size check; mercury_core.h is
 * checked by the _Static_assert in bench.c instead.
 */
static inline void qdisc_cb_private_validate(const struct sk_buff *skb, int sz)
{
	(void)skb;
	(void)sz;
}

/* Per-level byte/packet counters: only their size matters here. The
 * kernel's u64_stats_sync member is empty on 64-bit machines.
 */
struct gnet_stats_basic_sync {
	u64	bytes;
	u64	packets;
} __attribute__((aligned(16)));

#endif /* MERCURY_BENCH_SHIM_H */
