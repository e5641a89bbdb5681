/* SPDX-License-Identifier: GPL-2.0 */
/*
 * shim.h	Just enough of the kernel to compile kmod/sch_mercury.c, the
 *		module itself, in userspace.
 *
 * The module's file is included whole (pq.h), through the stub headers
 * in kernel/, which all lead here: so bench.c and test_core.c run the very
 * enqueue/dequeue code the module runs, and the module's file is written
 * for the kernel alone. The trees, lists and hash are the kernel's own
 * code (tools/include and tools/lib/rbtree.c of the kernel source, which
 * scripts/install-deps.sh puts under build/linux-src). Only the packet
 * path has kernel semantics here: the qdisc, netlink and statistics calls
 * the module makes around it compile, and the benchmark never reaches
 * them. Only the fields the module touches exist in struct sk_buff; the
 * qdisc control block has the kernel's layout (pkt_len, two u16, then the
 * 20 private bytes), so mercury_skb_cb is checked against the real limit.
 */
#ifndef MERCURY_BENCH_SHIM_H
#define MERCURY_BENCH_SHIM_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/bitops.h>
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/hash.h>
#include <linux/overflow.h>
#include <linux/rbtree_augmented.h>
#include <linux/if_ether.h>
#include <linux/gen_stats.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#ifndef U32_MAX
#define U32_MAX			((u32)~0U)
#endif

/* Undefined for 0 in the kernel too; the module never asks. */
static inline unsigned int __ffs64(u64 w)
{
	return (unsigned int)__builtin_ctzll(w);
}

/* a constant expression, as in the kernel: a case label */
#define htons(x)		((__be16)__builtin_bswap16(x))

#define __read_mostly
#define __init
#define __exit
#ifndef WARN_ON_ONCE
#define WARN_ON_ONCE(c)		(!!(c))
#endif

/* ---- memory ------------------------------------------------------------- */

#ifndef GFP_KERNEL
#define GFP_KERNEL		0
#endif
#ifndef GFP_ATOMIC
#define GFP_ATOMIC		0
#endif
#ifndef __GFP_NOWARN
#define __GFP_NOWARN		0
#endif
#define SLAB_HWCACHE_ALIGN	0
#define NUMA_NO_NODE		(-1)

/* The flow cache: the benchmark's allocator (pq.c), which counts live
 * flows and fails on demand.
 */
struct kmem_cache;
void *bench_flow_alloc(void);
void bench_flow_free(void *p);
#define kmem_cache_create(n, size, align, flags, ctor)	((struct kmem_cache *)NULL)
#define kmem_cache_destroy(c)				((void)(c))
#define kmem_cache_alloc(c, flags)			((void)(c), bench_flow_alloc())
#define kmem_cache_free(c, p)				((void)(c), bench_flow_free(p))

/* zeroed, as the module's kvzalloc_node */
#define kvzalloc_node(size, flags, node)	calloc(1, size)
#define kvfree(p)				free(p)

/* ---- the packet --------------------------------------------------------- */

struct sock {
	int		sk_state;
};

#define TCP_CLOSE	7

static inline bool sk_fullsock(const struct sock *sk)
{
	return true;
}

static inline bool sk_listener(const struct sock *sk)
{
	return false;
}

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
	struct sock	*sk;
	unsigned int	len;		/* bytes */
	unsigned int	truesize;	/* bytes */
	u32		hash;		/* flow hash, as skb->hash */
	u32		mark;
	u32		priority;
	__be16		protocol;
	char		cb[48] __attribute__((aligned(8)));
};

struct skb_shared_info {
	unsigned short	gso_segs;
};

static inline u32 skb_get_hash(struct sk_buff *skb)
{
	return skb->hash;
}

static inline bool skb_is_gso(const struct sk_buff *skb)
{
	return false;
}

#define skb_shinfo(skb)		(&(struct skb_shared_info){ .gso_segs = 1 })

/* The bench's packets are never GSO, so the segmenting path never runs. */
typedef u64 netdev_features_t;
#define NETIF_F_GSO_MASK	0
#define IS_ERR_OR_NULL(p)	((p) == NULL)
#define netif_skb_features(skb)	((netdev_features_t)0)
#define skb_gso_segment(skb, f)	((struct sk_buff *)NULL)
#define skb_mark_not_on_list(skb)	((void)(skb))
#define consume_skb(skb)		((void)(skb))
#define skb_list_walk_safe(first, skb, next_skb)			\
	for ((skb) = (first), (next_skb) = (skb) ? (skb)->next : NULL;	\
	     (skb);							\
	     (skb) = (next_skb), (next_skb) = (skb) ? (skb)->next : NULL)

static inline __be16 skb_protocol(const struct sk_buff *skb, bool vlan)
{
	return skb->protocol;
}

static inline int skb_network_offset(const struct sk_buff *skb)
{
	return 0;
}

/* No packet here has headers: every DSCP reads as untagged. */
static inline void *skb_header_pointer(const struct sk_buff *skb, int off,
				       int len, void *buf)
{
	return NULL;
}

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

/* The kernel's version is a compile-time size check; pq.h checks
 * mercury_skb_cb with a _Static_assert instead.
 */
static inline void qdisc_cb_private_validate(const struct sk_buff *skb, int sz)
{
}

/* ---- statistics --------------------------------------------------------- */

typedef struct {
	u64	v;
} u64_stats_t;

static inline u64 u64_stats_read(const u64_stats_t *p)
{
	return p->v;
}

static inline void u64_stats_add(u64_stats_t *p, unsigned long val)
{
	p->v += val;
}

/* The kernel's u64_stats_sync member is empty on 64-bit machines. */
struct gnet_stats_basic_sync {
	u64_stats_t	bytes;
	u64_stats_t	packets;
} __attribute__((aligned(16)));

static inline void gnet_stats_basic_sync_init(struct gnet_stats_basic_sync *b)
{
	memset(b, 0, sizeof(*b));
}

static inline void bstats_update(struct gnet_stats_basic_sync *b,
				 const struct sk_buff *skb)
{
	u64_stats_add(&b->bytes, qdisc_pkt_len(skb));
	u64_stats_add(&b->packets, 1);
}

struct gnet_dump;

static inline int gnet_stats_copy_app(struct gnet_dump *d, void *st, int len)
{
	return 0;
}

static inline int gnet_stats_copy_basic(struct gnet_dump *d, void *cpu,
					struct gnet_stats_basic_sync *b,
					bool running)
{
	return 0;
}

static inline int gnet_stats_copy_queue(struct gnet_dump *d, void *cpu,
					struct gnet_stats_queue *q, u32 qlen)
{
	return 0;
}

/* ---- the qdisc ---------------------------------------------------------- */

#define NET_XMIT_SUCCESS	0x00
#define NET_XMIT_DROP		0x01
#define NET_XMIT_CN		0x02
#define TCQ_F_CAN_BYPASS	4

struct net_device {
	unsigned int	mtu;
};

struct netdev_queue;

static inline int netdev_queue_numa_node_read(const struct netdev_queue *q)
{
	return NUMA_NO_NODE;
}

struct Qdisc {
	struct {
		u32	qlen;
	} q;
	unsigned int			flags;
	struct gnet_stats_queue		qstats;
	struct gnet_stats_basic_sync	bstats;
	struct net_device		*dev;
	struct netdev_queue		*dev_queue;
	unsigned long			privdata[] __attribute__((aligned(64)));
};

static inline void *qdisc_priv(struct Qdisc *sch)
{
	return sch->privdata;
}

static inline struct net_device *qdisc_dev(const struct Qdisc *sch)
{
	return sch->dev;
}

static inline unsigned int psched_mtu(const struct net_device *dev)
{
	return dev->mtu + 14;
}

#define sch_tree_lock(sch)			((void)(sch))
#define sch_tree_unlock(sch)			((void)(sch))
#define qdisc_tree_reduce_backlog(sch, n, len)	((void)(sch))

static inline void qdisc_qstats_backlog_inc(struct Qdisc *sch,
					    const struct sk_buff *skb)
{
	sch->qstats.backlog += qdisc_pkt_len(skb);
}

static inline void qdisc_qstats_backlog_dec(struct Qdisc *sch,
					    const struct sk_buff *skb)
{
	sch->qstats.backlog -= qdisc_pkt_len(skb);
}

static inline void qdisc_qstats_drop(struct Qdisc *sch)
{
	sch->qstats.drops++;
}

static inline void qdisc_bstats_update(struct Qdisc *sch,
				       const struct sk_buff *skb)
{
	bstats_update(&sch->bstats, skb);
}

static inline int qdisc_drop(struct sk_buff *skb, struct Qdisc *sch,
			     struct sk_buff **to_free)
{
	skb->next = *to_free;
	*to_free = skb;
	qdisc_qstats_drop(sch);
	return NET_XMIT_DROP;
}

enum qdisc_drop_reason {
	QDISC_DROP_GENERIC,
	QDISC_DROP_OVERLIMIT,
};

#define qdisc_drop_reason(skb, sch, to_free, reason) \
	qdisc_drop(skb, sch, to_free)

#define rtnl_kfree_skbs(head, tail)		((void)(head))

struct qdisc_walker {
	int	stop;
	int	skip;
	int	count;
};

static inline bool tc_qdisc_stats_dump(struct Qdisc *sch, unsigned long cl,
				       struct qdisc_walker *arg)
{
	arg->count++;
	return true;
}

struct module;
#define THIS_MODULE		((struct module *)NULL)

struct nlattr;
struct netlink_ext_ack;

struct Qdisc_class_ops {
	struct Qdisc	*(*leaf)(struct Qdisc *sch, unsigned long cl);
	unsigned long	(*find)(struct Qdisc *sch, u32 classid);
	void		(*walk)(struct Qdisc *sch, struct qdisc_walker *arg);
	int		(*dump)(struct Qdisc *sch, unsigned long cl,
				struct sk_buff *skb, struct tcmsg *tcm);
	int		(*dump_stats)(struct Qdisc *sch, unsigned long cl,
				      struct gnet_dump *d);
};

struct Qdisc_ops {
	const struct Qdisc_class_ops	*cl_ops;
	char				id[16];
	int				priv_size;
	int		(*enqueue)(struct sk_buff *skb, struct Qdisc *sch,
				   struct sk_buff **to_free);
	struct sk_buff	*(*dequeue)(struct Qdisc *sch);
	struct sk_buff	*(*peek)(struct Qdisc *sch);
	int		(*init)(struct Qdisc *sch, struct nlattr *arg,
				struct netlink_ext_ack *extack);
	void		(*reset)(struct Qdisc *sch);
	void		(*destroy)(struct Qdisc *sch);
	int		(*change)(struct Qdisc *sch, struct nlattr *arg,
				  struct netlink_ext_ack *extack);
	int		(*dump)(struct Qdisc *sch, struct sk_buff *skb);
	int		(*dump_stats)(struct Qdisc *sch, struct gnet_dump *d);
	struct module	*owner;
};

#define register_qdisc(ops)	((void)(ops), 0)
#define unregister_qdisc(ops)	((void)(ops))

/* ---- netlink: compiled, never called ------------------------------------ */

enum {
	NLA_UNSPEC,
	NLA_U8,
	NLA_U16,
	NLA_U32,
};

struct netlink_range_validation {
	u64	min, max;
};

struct nla_policy {
	u8		type;
	u64		min, max;
	const struct netlink_range_validation *range;
};

#define NLA_POLICY_FULL_RANGE(tp, r)	{ .type = (tp), .range = (r) }
#define NLA_POLICY_MAX(tp, n)		{ .type = (tp), .max = (n) }
#define NLA_POLICY_MIN(tp, n)		{ .type = (tp), .min = (n) }

struct netlink_ext_ack {
	const char		*_msg;
	const struct nlattr	*bad_attr;
};

#define NL_SET_ERR_MSG_MOD(extack, msg)	\
	do { if (extack) (extack)->_msg = (msg); } while (0)
#define NL_SET_BAD_ATTR(extack, attr)	\
	do { if (extack) (extack)->bad_attr = (attr); } while (0)

static inline int nla_parse_nested(struct nlattr **tb, int max,
				   const struct nlattr *nla,
				   const struct nla_policy *policy,
				   struct netlink_ext_ack *extack)
{
	return -EOPNOTSUPP;
}

#define nla_get_u32(nla)			((void)(nla), 0U)
#define nla_get_u8(nla)				((void)(nla), (u8)0)
#define nla_nest_start_noflag(skb, type)	((void)(skb), (struct nlattr *)NULL)
#define nla_nest_end(skb, nest)			((void)(nest), 0)
#define nla_nest_cancel(skb, nest)		((void)(nest))
#define nla_put_u32(skb, type, v)		((void)(v), 0)
#define nla_put_u8(skb, type, v)		((void)(v), 0)

/* ---- the module's own boilerplate ---------------------------------------- */

#define module_init(fn)				\
	static inline int bench_unused_init(void) { return fn(); }
#define module_exit(fn)				\
	static inline void bench_unused_exit(void) { fn(); }
#define MODULE_ALIAS_NET_SCH(id)	struct bench_unused
#define MODULE_DESCRIPTION(s)		struct bench_unused
#define MODULE_AUTHOR(s)		struct bench_unused
#define MODULE_LICENSE(s)		struct bench_unused

#endif /* MERCURY_BENCH_SHIM_H */
