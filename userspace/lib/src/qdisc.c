// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Does the tagging fit the qdisc it feeds?
 *
 * A tagger and a mercury qdisc that disagree fail silently: nothing on the
 * wire says that a mark went where the qdisc reads DSCP. This file owns
 * the two halves of the answer, once for every tool:
 *  - the qdisc's options on the wire: mercury_qdisc_opts_decode(), the
 *    one reader of its TCA_OPTIONS, from the attribute table that the
 *    options' grammar and encoder (qdisc_opts.c) own;
 *  - mercury_qdisc_fit(), the one comparison rule (mercuryctl check uses
 *    it for plans, the channel set for its tagger);
 * and the look a channel set takes at creation: the device each
 * connection leaves by, the mercury qdiscs on it, the rule.
 *
 * Everything that talks to the kernel goes through libnl-3 (the same
 * library mercuryctl uses); libnl knows no "mercury" kind, so the options
 * are parsed from the raw attributes, as nl.c explains for mercuryctl.
 */
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/mercury.h>
#include <linux/rtnetlink.h>

#include <netlink/netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "internal.h"

#ifndef SO_BINDTOIFINDEX
#define SO_BINDTOIFINDEX	62
#endif

/* The plan's tag source is the qdisc's, numbered alike. */
_Static_assert((int)MERCURY_TAG_MARK == TC_MERCURY_TAG_MARK &&
	       (int)MERCURY_TAG_PRIORITY == TC_MERCURY_TAG_PRIORITY &&
	       (int)MERCURY_TAG_DSCP == TC_MERCURY_TAG_DSCP,
	       "libmercury and the qdisc number tag sources alike");

/*
 * The qdisc's options on the wire come from the one table of them,
 * mercury_qdisc_attrs (qdisc_opts.c, with the grammar): which attribute
 * carries which field, and how wide it is. The decoder here and the
 * encoder there (mercuryctl's and tc's requests) both walk it.
 */
#define QDISC_ATTRS_END	(mercury_qdisc_attrs + mercury_qdisc_nattrs)

MERCURY_API int mercury_qdisc_opts_decode(const void *attrs, size_t len,
					  struct mercury_qdisc_opts *o,
					  size_t sz)
{
	struct nla_policy pol[TCA_MERCURY_MAX + 1] = { { 0 } };
	struct nlattr *tb[TCA_MERCURY_MAX + 1];
	struct mercury_qdisc_opts q = { 0 };
	const struct mercury_qdisc_attr *a;
	char *field;

	if (!o || (!attrs && len) || len > INT32_MAX)
		return mercury_err(EINVAL, "qdisc options: bad argument");
	/* a caller built against an older header knows fewer fields */
	if (sz > sizeof(q))
		sz = sizeof(q);
	memcpy(&q, o, sz);
	for (a = mercury_qdisc_attrs; a < QDISC_ATTRS_END; a++)
		pol[a->attr].type = a->bits == 32 ? NLA_U32 : NLA_U8;
	if (nla_parse(tb, TCA_MERCURY_MAX, (struct nlattr *)attrs, (int)len,
		      pol) < 0)
		return mercury_err(EINVAL, "qdisc options: malformed attributes");
	for (a = mercury_qdisc_attrs; a < QDISC_ATTRS_END; a++) {
		if (!tb[a->attr])
			continue;
		field = (char *)&q + a->off;
		if (a->bits == 32)
			*(uint32_t *)field = nla_get_u32(tb[a->attr]);
		else
			*(uint8_t *)field = nla_get_u8(tb[a->attr]);
		q.set |= 1u << a->attr;
	}
	memcpy(o, &q, sz);
	return 0;
}

/* ---- the rule ---------------------------------------------------------- */

/* libmercury's one table of source names, for a value the kernel sent */
static const char *source_name(unsigned int v)
{
	const char *name = v <= INT_MAX ? mercury_source_name((int)v) : NULL;

	return name ? name : "unknown";
}

struct fit {
	const struct mercury_qdisc *q;
	mercury_problem_fn fn;
	void *ctx;
	int n;
};

static void __printf(2, 3) fit_problem(struct fit *f, const char *fmt, ...)
{
	char msg[320];
	va_list ap;
	int len;

	/* dev may fill its 16 bytes without a NUL */
	len = snprintf(msg, sizeof(msg), "mercury %x: on %.*s: ",
		       f->q->handle >> 16, (int)sizeof(f->q->dev), f->q->dev);
	va_start(ap, fmt);
	vsnprintf(msg + len, sizeof(msg) - len, fmt, ap);
	va_end(ap);
	f->n++;
	if (f->fn)
		f->fn(msg, f->ctx);
}

MERCURY_API int mercury_qdisc_fit(const struct mercury_qdisc *q,
				  const struct mercury_plan_info *pi,
				  enum mercury_fit_subject who,
				  mercury_problem_fn fn, void *ctx)
{
	const struct mercury_qdisc_opts *o;
	struct fit f = { q, fn, ctx, 0 };
	bool plan = who == MERCURY_FIT_PLAN;
	const char *subj = plan ? "the plan" : "the channel set";
	char fix[96];
	unsigned int t;

	if (!q || !pi)
		return mercury_err(EINVAL, "qdisc fit: NULL argument");
	o = &q->opts;
	if ((unsigned int)pi->source != o->source) {
		/* the fix on the tagger's side, in the words its user knows */
		if (plan)
			snprintf(fix, sizeof(fix), "a plan with \"tag_source\": \"%s\"",
				 source_name(o->source));
		else
			snprintf(fix, sizeof(fix), "tag_opts.source %s (MERCURY_TAG_SOURCE=%s)",
				 source_name(o->source), source_name(o->source));
		fit_problem(&f, "%s tags by %s, the qdisc reads %s: every packet is untagged there (tc qdisc change ... tag %s, or %s)",
			    subj, source_name(pi->source),
			    source_name(o->source), source_name(pi->source),
			    fix);
	}
	if (pi->shift != o->shift)
		fit_problem(&f, "%s shifts tags by %u bits, the qdisc by %u: tags arrive scaled",
			    subj, pi->shift, (unsigned int)o->shift);
	/*
	 * The tagger writes (tag & its mask) << shift; the qdisc reads
	 * (field >> shift) & its mask: a tag survives if both masks keep it.
	 */
	for (t = 1; t <= pi->max_tag; t++) {
		if ((t & pi->mask & o->mask) != t) {
			fit_problem(&f, "tag %u does not survive the masks (%s 0x%x, qdisc 0x%x): it arrives as tag %u",
				    t, plan ? "plan" : "tagger", pi->mask,
				    o->mask, t & pi->mask & o->mask);
			break;
		}
	}
	if (pi->source == MERCURY_TAG_DSCP &&
	    ((unsigned long)pi->max_tag << pi->shift) > MERCURY_DSCP_MASK)
		fit_problem(&f, "tag %u shifted by %u does not fit the six DSCP bits",
			    pi->max_tag, pi->shift);
	if (pi->max_tag > o->levels) {
		if (plan)
			snprintf(fix, sizeof(fix), "squeeze the plan: mercury-place --levels %u",
				 o->levels);
		else
			snprintf(fix, sizeof(fix), "squeeze the plan and the classes to %u levels",
				 o->levels);
		fit_problem(&f, "%s uses tags up to %u, the qdisc has %u levels: tags %u..%u all share level %u (%s)",
			    subj, pi->max_tag, o->levels, o->levels,
			    pi->max_tag, o->levels, fix);
	}
	return f.n;
}

/* ---- the look a channel set takes at creation -------------------------- */

/*
 * Distinct egress devices looked at. A set's connections go to one peer,
 * so one device is the rule; devices past this many are not checked.
 */
#define CHECK_MAX_DEVS	16

struct check {
	const struct mercury_plan_info *pi;
	enum mercury_qdisc_check mode;
	int devs[CHECK_MAX_DEVS];	/* ifindex */
	int found[CHECK_MAX_DEVS];	/* mercury qdiscs on each */
	size_t ndevs;
	int problems;
	char first[256];		/* strict: the problem to fail with */
};

static void check_problem(const char *msg, void *ctx)
{
	struct check *c = ctx;

	/*
	 * strict fails with the first; every other one is logged, or with
	 * no callback installed (no tool installs one) written to stderr:
	 * a tagger the qdisc cannot read is never passed over in silence.
	 */
	if (c->mode == MERCURY_QDISC_CHECK_STRICT && !c->problems)
		snprintf(c->first, sizeof(c->first), "%s", msg);
	else if (mercury_log_enabled())
		mercury_pr(MERCURY_LOG_WARN, "chanset: %s", msg);
	else
		fprintf(stderr, "libmercury: chanset: %s\n", msg);
	c->problems++;
}

/* The answer to RTM_GETROUTE: the output interface. */
static int route_cb(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[RTA_MAX + 1];
	int *oif = arg;

	if (nlmsg_parse(nlmsg_hdr(msg), sizeof(struct rtmsg), tb, RTA_MAX,
			NULL) >= 0 && tb[RTA_OIF])
		*oif = (int)nla_get_u32(tb[RTA_OIF]);
	return NL_OK;
}

/* RTM_GETROUTE for one destination, as "ip route get" asks. */
static int route_oif(struct nl_sock *sk, int family, const void *addr,
		     size_t alen)
{
	struct rtmsg rtm = {
		.rtm_family	= family,
		.rtm_dst_len	= alen * 8,
	};
	struct nl_msg *msg;
	int err, oif = 0;

	msg = nlmsg_alloc_simple(RTM_GETROUTE, 0);
	if (!msg)
		return -ENOMEM;
	if (nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 ||
	    nla_put(msg, RTA_DST, alen, addr) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	err = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (err >= 0) {
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, route_cb,
				    &oif);
		err = nl_recvmsgs_default(sk);
	}
	if (err < 0)
		return err == -NLE_PERM ? -EPERM : -EHOSTUNREACH;
	return oif > 0 ? oif : -ENODEV;
}

/*
 * The device fd's packets leave by: a route lookup for its peer. Not the
 * device that holds the local address: a connection to one of this
 * host's own addresses leaves by loopback whichever device carries the
 * address, and with several devices the route, not the source address,
 * picks the way out. A socket bound to a device (SO_BINDTODEVICE) or
 * talking to a link-local IPv6 peer leaves by that device. 0: not a
 * connected TCP socket over IP; > 0: the ifindex; else -errno.
 */
static int egress_ifindex(struct nl_sock *sk, int fd)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *s6;
	socklen_t len;
	int type, bound;

	len = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) ||
	    type != SOCK_STREAM)
		return 0;
	len = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &len) ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
		return 0;
	len = sizeof(bound);
	if (!getsockopt(fd, SOL_SOCKET, SO_BINDTOIFINDEX, &bound, &len) &&
	    bound > 0)
		return bound;
	if (ss.ss_family == AF_INET)
		return route_oif(sk, AF_INET,
				 &((struct sockaddr_in *)&ss)->sin_addr, 4);
	s6 = (struct sockaddr_in6 *)&ss;
	if (s6->sin6_scope_id)
		return (int)s6->sin6_scope_id;
	/* an IPv6 socket talking to an IPv4 peer sends IPv4 packets */
	if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return route_oif(sk, AF_INET, &s6->sin6_addr.s6_addr[12], 4);
	return route_oif(sk, AF_INET6, &s6->sin6_addr, 16);
}

/* Each mercury qdisc of the dump on one of c->devs, against the rule. */
static int qdisc_cb(struct nl_msg *msg, void *arg)
{
	struct tcmsg *tcm = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[TCA_MAX + 1];
	struct mercury_qdisc q = { 0 };
	struct check *c = arg;
	size_t i;

	for (i = 0; i < c->ndevs && c->devs[i] != tcm->tcm_ifindex; i++)
		;
	if (i == c->ndevs ||
	    nlmsg_parse(nlmsg_hdr(msg), sizeof(*tcm), tb, TCA_MAX, NULL) < 0 ||
	    !tb[TCA_KIND] || strcmp(nla_get_string(tb[TCA_KIND]), "mercury"))
		return NL_OK;
	/* a kernel that leaves an option out has its default */
	mercury_qdisc_opts_defaults(&q.opts, sizeof(q.opts));
	if (tb[TCA_OPTIONS] &&
	    mercury_qdisc_opts_decode(nla_data(tb[TCA_OPTIONS]),
				      nla_len(tb[TCA_OPTIONS]), &q.opts,
				      sizeof(q.opts)))
		return NL_OK;
	q.ifindex = tcm->tcm_ifindex;
	q.handle = tcm->tcm_handle;
	q.parent = tcm->tcm_parent;
	if (!if_indextoname(q.ifindex, q.dev))
		snprintf(q.dev, sizeof(q.dev), "if%d", q.ifindex);
	c->found[i]++;
	mercury_qdisc_fit(&q, c->pi, MERCURY_FIT_CHANSET, check_problem, c);
	return NL_OK;
}

/* The egress device of each socket among fds, each listed once. */
static void check_devs(struct check *c, struct nl_sock *sk, const int *fds,
		       size_t n)
{
	size_t i, j;
	int ifindex;

	for (i = 0; i < n; i++) {
		ifindex = egress_ifindex(sk, fds[i]);
		if (ifindex < 0)
			mercury_pr(MERCURY_LOG_INFO,
				   "chanset: no route for fd %d's peer (%s): its qdisc is not checked",
				   fds[i], strerror(-ifindex));
		if (ifindex <= 0)
			continue;
		for (j = 0; j < c->ndevs && c->devs[j] != ifindex; j++)
			;
		if (j == c->ndevs && c->ndevs < CHECK_MAX_DEVS)
			c->devs[c->ndevs++] = ifindex;
	}
}

int mercury_chanset_check_qdiscs(const int *fds, size_t n,
				 const struct mercury_plan_info *pi,
				 enum mercury_qdisc_check mode)
{
	struct tcmsg tcm = { .tcm_family = AF_UNSPEC };
	struct check c = { .pi = pi, .mode = mode };
	char name[IF_NAMESIZE];
	struct nl_sock *sk;
	size_t i;
	int err;

	if (mode == MERCURY_QDISC_CHECK_OFF)
		return 0;
	sk = nl_socket_alloc();
	if (!sk || nl_connect(sk, NETLINK_ROUTE) < 0) {
		mercury_pr(MERCURY_LOG_INFO,
			   "chanset: no netlink socket: the qdiscs are not checked");
		nl_socket_free(sk);
		return 0;
	}
	/* a route lookup is one request, one answer: no ACK to wait for */
	nl_socket_disable_auto_ack(sk);
	check_devs(&c, sk, fds, n);
	/* one dump for every device (the kernel dumps them all anyway) */
	err = c.ndevs ? nl_send_simple(sk, RTM_GETQDISC, NLM_F_DUMP, &tcm,
				       sizeof(tcm)) : 0;
	if (c.ndevs && err >= 0) {
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, qdisc_cb,
				    &c);
		err = nl_recvmsgs_default(sk);
	}
	nl_socket_free(sk);
	if (err < 0) {
		mercury_pr(MERCURY_LOG_INFO,
			   "chanset: cannot read the qdiscs (%s): not checked",
			   nl_geterror(err));
		return 0;
	}
	for (i = 0; i < c.ndevs; i++) {
		if (c.found[i])
			continue;
		if (!if_indextoname(c.devs[i], name))
			snprintf(name, sizeof(name), "if%d", c.devs[i]);
		mercury_pr(MERCURY_LOG_INFO,
			   "chanset: no mercury qdisc on %s: its tags are not checked (the qdisc may sit on another host or namespace)",
			   name);
	}
	if (mode == MERCURY_QDISC_CHECK_STRICT && c.problems)
		return mercury_err(EINVAL, "chanset: %s%s", c.first,
				   c.problems > 1 ? " (and more: see the log)" : "");
	return 0;
}
