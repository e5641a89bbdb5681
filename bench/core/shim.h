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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t s64;

#define __packed		__attribute__((packed))
#define U32_MAX			((u32)~0U)
#define BIT_ULL(n)		(1ULL << (n))
#define DIV_ROUND_UP(n, d)	(((n) + (d) - 1) / (d))

/* Both are undefined for 0 in the kernel too; the core never asks. */
static inline unsigned int __ffs64(u64 w)
{
	return (unsigned int)__builtin_ctzll(w);
}

static inline int fls64(u64 w)
{
	return w ? 64 - __builtin_clzll(w) : 0;
}

/* ---- list_head, as include/linux/list.h ---------------------------- */

struct list_head {
	struct list_head *next, *prev;
};

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define list_entry(ptr, type, member)	container_of(ptr, type, member)
#define list_first_entry(head, type, member) \
	list_entry((head)->next, type, member)
#define list_last_entry(head, type, member) \
	list_entry((head)->prev, type, member)

static inline void INIT_LIST_HEAD(struct list_head *l)
{
	l->next = l;
	l->prev = l;
}

static inline bool list_empty(const struct list_head *h)
{
	return h->next == h;
}

static inline void __list_add(struct list_head *n, struct list_head *prev,
			      struct list_head *next)
{
	next->prev = n;
	n->next = next;
	n->prev = prev;
	prev->next = n;
}

static inline void list_add_tail(struct list_head *n, struct list_head *h)
{
	__list_add(n, h->prev, h);
}

static inline void __list_del_entry(struct list_head *e)
{
	e->next->prev = e->prev;
	e->prev->next = e->next;
}

static inline void list_del_init(struct list_head *e)
{
	__list_del_entry(e);
	INIT_LIST_HEAD(e);
}

static inline void list_move_tail(struct list_head *e, struct list_head *h)
{
	__list_del_entry(e);
	list_add_tail(e, h);
}

/* ---- the packet -------------------------------------------------------- */

struct sk_buff {
	struct sk_buff	*next;
	struct sk_buff	*prev;
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

/* The packets are built with their hash set, as after flow dissection. */
static inline u32 skb_get_hash(struct sk_buff *skb)
{
	return skb->hash;
}

static inline u32 reciprocal_scale(u32 val, u32 ep_ro)
{
	return (u32)(((u64)val * ep_ro) >> 32);
}

/* Per-level byte/packet counters: only their size matters here. The
 * kernel's u64_stats_sync member is empty on 64-bit machines.
 */
struct gnet_stats_basic_sync {
	u64	bytes;
	u64	packets;
} __attribute__((aligned(16)));

#endif /* MERCURY_BENCH_SHIM_H */
