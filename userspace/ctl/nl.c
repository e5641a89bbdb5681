// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The kernel side of mercuryctl, all through libnl-route-3.
 *
 * libnl 3.7 knows only its built-in qdisc kinds and keeps the interface
 * for registering new ones (struct rtnl_tc_ops) in private headers, so we
 * do not register "mercury" with it. Instead:
 *  - requests are built by rtnl_qdisc_build_add_request() /
 *    rtnl_qdisc_build_delete_request(), and our TCA_OPTIONS nest, laid
 *    out by libmercury's mercury_qdisc_opts_encode(), is appended with
 *    nla_put() (with NLA_F_NESTED, which the kernel requires for mercury);
 *  - dumps are requested with nl_send_simple(); each message is handed to
 *    nl_msg_parse() for the standard counters (rtnl_tc_get_stat()) and
 *    parsed with nlmsg_parse() for our options (decoded by libmercury's
 *    mercury_qdisc_opts_decode(), the one reader of them) and xstats,
 *    which libnl would otherwise keep opaque.
 * The kernel's extended ACK message is read in the error callback, so a
 * rejection is reported in the kernel's own words; mctl_nl_send() gives
 * the same to any other request built by libnl (the selftests' fuzzer
 * sends tbf, htb, mq, pfifo, link and neighbour requests through it).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <linux/gen_stats.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <netlink/netlink.h>
#include <netlink/msg.h>
#include <netlink/attr.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>

#include "mctl.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

struct mctl_nl {
	struct nl_sock	*sk;
	struct nl_cache	*links;		/* for names <-> ifindex */
	int		err;		/* last NLMSG_ERROR, negative errno */
	char		extack[256];	/* the kernel's message for it */
};

/*
 * libnl hands the error callback the struct nlmsgerr inside the message;
 * the extended ACK attributes follow it (after the echoed request unless
 * the kernel capped it, which we ask for).
 */
static int mctl_nl_error_cb(struct sockaddr_nl *who, struct nlmsgerr *e,
			    void *arg)
{
	const struct nlmsghdr *hdr = (const void *)((const char *)e -
						     NLMSG_HDRLEN);
	struct nlattr *tb[NLMSGERR_ATTR_MAX + 1];
	struct mctl_nl *nl = arg;
	size_t off;
	int len;

	(void)who;
	nl->err = e->error;
	nl->extack[0] = '\0';
	if (!(hdr->nlmsg_flags & NLM_F_ACK_TLVS))
		return NL_STOP;
	off = sizeof(*e);
	if (!(hdr->nlmsg_flags & NLM_F_CAPPED))
		off += e->msg.nlmsg_len - NLMSG_HDRLEN;
	len = (int)hdr->nlmsg_len - NLMSG_HDRLEN - (int)off;
	if (len <= 0)
		return NL_STOP;
	if (nla_parse(tb, NLMSGERR_ATTR_MAX,
		      (struct nlattr *)((char *)e + off), len, NULL) < 0)
		return NL_STOP;
	if (tb[NLMSGERR_ATTR_MSG])
		snprintf(nl->extack, sizeof(nl->extack), "%s",
			 nla_get_string(tb[NLMSGERR_ATTR_MSG]));
	return NL_STOP;
}

/* Enter network namespace @netns (a name under /run/netns, or a path);
 * 0 or a negative errno.
 */
int mctl_nl_setns(const char *netns)
{
	char path[256];
	int fd, err = 0;

	if (strchr(netns, '/'))
		snprintf(path, sizeof(path), "%s", netns);
	else
		snprintf(path, sizeof(path), "/run/netns/%s", netns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET))
		err = -errno;
	close(fd);
	return err;
}

int mctl_nl_open(struct mctl_nl **out, const char *netns)
{
	struct mctl_nl *nl;
	struct nl_cb *cb;
	int one = 1, err;

	if (netns) {
		err = mctl_nl_setns(netns);
		if (err)
			return err;
	}
	nl = calloc(1, sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	nl->sk = nl_socket_alloc();
	if (!nl->sk) {
		free(nl);
		return -ENOMEM;
	}
	if (nl_connect(nl->sk, NETLINK_ROUTE) < 0) {
		err = -EIO;
		goto fail;
	}
	/* best effort: older kernels just give no message */
	setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_EXT_ACK,
		   &one, sizeof(one));
	setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_CAP_ACK,
		   &one, sizeof(one));
	cb = nl_socket_get_cb(nl->sk);
	nl_cb_err(cb, NL_CB_CUSTOM, mctl_nl_error_cb, nl);
	nl_cb_put(cb);
	if (rtnl_link_alloc_cache(nl->sk, AF_UNSPEC, &nl->links) < 0) {
		err = -EIO;
		goto fail;
	}
	*out = nl;
	return 0;

fail:
	nl_socket_free(nl->sk);
	free(nl);
	return err;
}

void mctl_nl_close(struct mctl_nl *nl)
{
	if (!nl)
		return;
	if (nl->links)
		nl_cache_free(nl->links);
	nl_socket_free(nl->sk);
	free(nl);
}

const char *mctl_nl_extack(const struct mctl_nl *nl)
{
	return nl->extack;
}

int mctl_nl_ifindex(struct mctl_nl *nl, const char *dev)
{
	int ifindex = rtnl_link_name2i(nl->links, dev);

	return ifindex > 0 ? ifindex : -ENODEV;
}

/* The kernel's errno when it sent one, else a generic one for libnl's. */
static int mctl_nl_result(struct mctl_nl *nl, int nlerr)
{
	if (nlerr >= 0)
		return 0;
	if (nl->err)
		return nl->err;
	snprintf(nl->extack, sizeof(nl->extack), "%s", nl_geterror(nlerr));
	return nlerr == -NLE_NOMEM ? -ENOMEM : -EIO;
}

static void mctl_nl_reset(struct mctl_nl *nl)
{
	nl->err = 0;
	nl->extack[0] = '\0';
}

int mctl_nl_send(struct mctl_nl *nl, struct nl_msg *msg)
{
	mctl_nl_reset(nl);
	return mctl_nl_result(nl, nl_send_sync(nl->sk, msg));	/* frees msg */
}

struct nl_sock *mctl_nl_sock(struct mctl_nl *nl)
{
	return nl->sk;
}

/* The options given, as libmercury lays them out, nested (as mercury needs). */
static int mctl_put_opts(struct nl_msg *msg,
			 const struct mercury_qdisc_opts *o)
{
	char buf[256];
	int len;

	len = mercury_qdisc_opts_encode(o, buf, sizeof(buf));
	if (len < 0)
		return -NLE_NOMEM;
	return nla_put(msg, TCA_OPTIONS | NLA_F_NESTED, len, buf);
}

int mctl_nl_modify(struct mctl_nl *nl, enum mctl_op op, int ifindex,
		   uint32_t parent, uint32_t handle,
		   const struct mercury_qdisc_opts *o)
{
	/* the flags tc uses for "add", "change" and "replace" */
	static const int flags[] = {
		[MCTL_OP_ADD]		= NLM_F_CREATE | NLM_F_EXCL,
		[MCTL_OP_CHANGE]	= 0,
		[MCTL_OP_REPLACE]	= NLM_F_CREATE | NLM_F_REPLACE,
	};
	struct rtnl_qdisc *q;
	struct nl_msg *msg = NULL;
	int err;

	mctl_nl_reset(nl);
	q = rtnl_qdisc_alloc();
	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), parent);
	rtnl_tc_set_handle(TC_CAST(q), handle);
	err = rtnl_tc_set_kind(TC_CAST(q), "mercury");
	if (!err)
		err = rtnl_qdisc_build_add_request(q, flags[op], &msg);
	rtnl_qdisc_put(q);
	if (!err)
		err = mctl_put_opts(msg, o);
	if (!err)
		return mctl_nl_send(nl, msg);
	nlmsg_free(msg);
	return mctl_nl_result(nl, err);
}

int mctl_nl_delete(struct mctl_nl *nl, int ifindex, uint32_t parent,
		   uint32_t handle)
{
	struct rtnl_qdisc *q;
	struct nl_msg *msg = NULL;
	int err;

	mctl_nl_reset(nl);
	q = rtnl_qdisc_alloc();
	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), parent);
	if (handle)
		rtnl_tc_set_handle(TC_CAST(q), handle);
	/* the kernel refuses to delete a qdisc of another kind */
	err = rtnl_tc_set_kind(TC_CAST(q), "mercury");
	if (!err)
		err = rtnl_qdisc_build_delete_request(q, &msg);
	rtnl_qdisc_put(q);
	if (!err)
		return mctl_nl_send(nl, msg);
	return mctl_nl_result(nl, err);
}

/* ---- dumps ------------------------------------------------------------ */

struct mctl_dump {
	struct mctl_nl		*nl;
	int			ifindex;	/* 0: every device */
	struct mctl_qdisc	*q;		/* qdisc dump: the list */
	size_t			n;
	struct mctl_qdisc	*cur;		/* class dump: the qdisc */
	int			err;
};

static void mctl_counters_cb(struct nl_object *obj, void *arg)
{
	struct rtnl_tc *tc = (struct rtnl_tc *)obj;
	struct mctl_counters *c = arg;

	c->packets = rtnl_tc_get_stat(tc, RTNL_TC_PACKETS);
	c->bytes = rtnl_tc_get_stat(tc, RTNL_TC_BYTES);
	c->drops = rtnl_tc_get_stat(tc, RTNL_TC_DROPS);
	c->overlimits = rtnl_tc_get_stat(tc, RTNL_TC_OVERLIMITS);
	c->requeues = rtnl_tc_get_stat(tc, RTNL_TC_REQUEUES);
	c->backlog = rtnl_tc_get_stat(tc, RTNL_TC_BACKLOG);
	c->qlen = rtnl_tc_get_stat(tc, RTNL_TC_QLEN);
}

/* TCA_STATS_APP into @buf; a shorter or longer kernel struct is fine. */
static bool mctl_get_app(struct nlattr *stats2, void *buf, size_t size)
{
	struct nlattr *st[TCA_STATS_MAX + 1];
	int len;

	if (!stats2 || nla_parse_nested(st, TCA_STATS_MAX, stats2, NULL) < 0 ||
	    !st[TCA_STATS_APP])
		return false;
	len = nla_len(st[TCA_STATS_APP]);
	memset(buf, 0, size);
	memcpy(buf, nla_data(st[TCA_STATS_APP]),
	       (size_t)len < size ? (size_t)len : size);
	return true;
}

/* The kernel's defaults, then what it reports: libmercury decodes it. */
static void mctl_get_opts(struct nlattr *opt,
			  struct mercury_qdisc_opts *o)
{
	mctl_opts_defaults(o);
	if (opt)
		mercury_qdisc_opts_decode(nla_data(opt), nla_len(opt), o,
					  sizeof(*o));
}

/* Common part of both dumps: ours? then the counters. */
static bool mctl_parse_tc(struct nl_msg *msg, struct nlattr **tb,
			  struct mctl_counters *c)
{
	struct nlmsghdr *hdr = nlmsg_hdr(msg);

	if (nlmsg_parse(hdr, sizeof(struct tcmsg), tb, TCA_MAX, NULL) < 0 ||
	    !tb[TCA_KIND] || strcmp(nla_get_string(tb[TCA_KIND]), "mercury"))
		return false;
	memset(c, 0, sizeof(*c));
	nl_msg_parse(msg, mctl_counters_cb, c);
	return true;
}

static int mctl_qdisc_cb(struct nl_msg *msg, void *arg)
{
	struct tcmsg *tcm = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[TCA_MAX + 1];
	struct mctl_dump *d = arg;
	struct mctl_counters c;
	struct mctl_qdisc *q;

	if (d->ifindex && tcm->tcm_ifindex != d->ifindex)
		return NL_OK;
	if (!mctl_parse_tc(msg, tb, &c))
		return NL_OK;
	q = realloc(d->q, (d->n + 1) * sizeof(*q));
	if (!q) {
		d->err = -ENOMEM;
		return NL_STOP;
	}
	d->q = q;
	q = &d->q[d->n++];
	memset(q, 0, sizeof(*q));
	q->ifindex = tcm->tcm_ifindex;
	if (!rtnl_link_i2name(d->nl->links, q->ifindex, q->dev,
			      sizeof(q->dev)))
		snprintf(q->dev, sizeof(q->dev), "if%d", q->ifindex);
	q->handle = tcm->tcm_handle;
	q->parent = tcm->tcm_parent;
	mctl_get_opts(tb[TCA_OPTIONS], &q->opts);
	q->c = c;
	q->has_xstats = mctl_get_app(tb[TCA_STATS2], &q->x, sizeof(q->x)) &&
			q->x.type == TC_MERCURY_XSTATS_QDISC;
	return NL_OK;
}

static int mctl_class_cb(struct nl_msg *msg, void *arg)
{
	struct tcmsg *tcm = nlmsg_data(nlmsg_hdr(msg));
	struct tc_mercury_cl_xstats cx = {};
	struct nlattr *tb[TCA_MAX + 1];
	struct mctl_dump *d = arg;
	struct mctl_qdisc *q = d->cur;
	struct mctl_counters c;
	struct mctl_level *l;

	if (tcm->tcm_ifindex != q->ifindex ||
	    TC_H_MAJ(tcm->tcm_handle) != q->handle)
		return NL_OK;
	if (!mctl_parse_tc(msg, tb, &c))
		return NL_OK;
	l = realloc(q->levels, (q->nlevels + 1) * sizeof(*l));
	if (!l) {
		d->err = -ENOMEM;
		return NL_STOP;
	}
	q->levels = l;
	l = &q->levels[q->nlevels++];
	memset(l, 0, sizeof(*l));
	l->minor = TC_H_MIN(tcm->tcm_handle);
	if (mctl_get_app(tb[TCA_STATS2], &cx, sizeof(cx)) &&
	    cx.type == TC_MERCURY_XSTATS_CLASS) {
		l->tag = cx.tag;
		l->flows = cx.flows;
	} else {
		l->tag = l->minor == TC_MERCURY_UNTAGGED_MINOR ? 0 : l->minor;
	}
	l->c = c;
	return NL_OK;
}

static int mctl_level_cmp(const void *a, const void *b)
{
	const struct mctl_level *x = a, *y = b;

	return x->minor < y->minor ? -1 : x->minor > y->minor;
}

static int mctl_nl_dump_one(struct mctl_nl *nl, int type, int ifindex,
			    uint32_t parent, nl_recvmsg_msg_cb_t fn,
			    struct mctl_dump *d)
{
	struct tcmsg tcm = {
		.tcm_family	= AF_UNSPEC,
		.tcm_ifindex	= ifindex,
		.tcm_parent	= parent,
	};
	int err;

	mctl_nl_reset(nl);
	err = nl_send_simple(nl->sk, type, NLM_F_DUMP, &tcm, sizeof(tcm));
	if (err < 0)
		return mctl_nl_result(nl, err);
	nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_CUSTOM, fn, d);
	err = nl_recvmsgs_default(nl->sk);
	nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_DEFAULT, NULL, NULL);
	if (d->err)
		return d->err;
	return mctl_nl_result(nl, err);
}

int mctl_nl_dump(struct mctl_nl *nl, int ifindex, struct mctl_qdisc **out,
		 size_t *n)
{
	struct mctl_dump d = { .nl = nl, .ifindex = ifindex };
	size_t i;
	int err;

	err = mctl_nl_dump_one(nl, RTM_GETQDISC, ifindex, 0, mctl_qdisc_cb,
			       &d);
	for (i = 0; !err && i < d.n; i++) {
		d.cur = &d.q[i];
		err = mctl_nl_dump_one(nl, RTM_GETTCLASS, d.q[i].ifindex,
				       d.q[i].handle, mctl_class_cb, &d);
		if (!err && d.q[i].nlevels)
			qsort(d.q[i].levels, d.q[i].nlevels,
			      sizeof(*d.q[i].levels), mctl_level_cmp);
	}
	if (err) {
		mctl_qdiscs_free(d.q, d.n);
		return err;
	}
	*out = d.q;
	*n = d.n;
	return 0;
}

/* A dump for one device's root qdisc: d first, the callback's argument. */
struct mctl_root {
	struct mctl_dump	d;
	int			ifindex;
	char			*kind;
	size_t			len;
	struct mercury_qdisc_opts *o;
};

static int mctl_root_cb(struct nl_msg *msg, void *arg)
{
	struct tcmsg *tcm = nlmsg_data(nlmsg_hdr(msg));
	struct mctl_root *r = arg;
	struct nlattr *tb[TCA_MAX + 1];

	if (tcm->tcm_ifindex != r->ifindex || tcm->tcm_parent != TC_H_ROOT ||
	    nlmsg_parse(nlmsg_hdr(msg), sizeof(*tcm), tb, TCA_MAX, NULL) < 0 ||
	    !tb[TCA_KIND])
		return NL_OK;
	snprintf(r->kind, r->len, "%s", nla_get_string(tb[TCA_KIND]));
	if (!strcmp(r->kind, "mercury"))
		mctl_get_opts(tb[TCA_OPTIONS], r->o);
	return NL_OK;
}

int mctl_nl_root(struct mctl_nl *nl, int ifindex, char *kind, size_t len,
		 struct mercury_qdisc_opts *o)
{
	struct mctl_root r = {
		.d = { .nl = nl },
		.ifindex = ifindex,
		.kind = kind,
		.len = len,
		.o = o,
	};

	kind[0] = '\0';
	mctl_opts_defaults(o);
	return mctl_nl_dump_one(nl, RTM_GETQDISC, ifindex, 0, mctl_root_cb,
				&r.d);
}
