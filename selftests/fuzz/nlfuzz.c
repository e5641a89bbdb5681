// SPDX-License-Identifier: GPL-2.0
/*
 * mercury-nlfuzz: random TCA_OPTIONS for the mercury qdisc, checked
 * against a model of what the kernel must accept.
 *
 *   mercury-nlfuzz -d DEV [-p PARENT] [-H HANDLE] [-n SETS] [-s SEED] [-v]
 *
 * Each set is one request on DEV's qdisc HANDLE (default 10:) under PARENT
 * (default root), chosen at random among
 *   change         RTM_NEWQDISC, no flags: the options merge into the
 *                  current configuration;
 *   replace        NLM_F_CREATE | NLM_F_REPLACE on the live qdisc: the same;
 *   graft          a pfifo (handle HANDLE + 1:) first takes the qdisc's
 *                  place, then mercury replaces it with the random options
 *                  (init path);
 *   add            the qdisc is deleted, then created with NLM_F_EXCL and
 *                  the random options (init path).
 * The options are a byte string built attribute by attribute: known types
 * with values at, just inside and just beyond every bound of
 * include/uapi/linux/mercury.h (and 0, the type's maximum, random ones),
 * wrong payload lengths, unknown types (0 and above TCA_MERCURY_MAX),
 * stray NLA_F_NESTED, nested attributes, duplicates, then possibly
 * truncated, given a length beyond the end, followed by trailing bytes, or
 * repeated into one oversized nest. A model (nlf_model(), which reads the
 * final bytes as the kernel's strict parser does) predicts the verdict: every
 * malformed request must be rejected and change nothing; a well-formed
 * one must be accepted exactly when every value is in range and the
 * cross-option rules hold (levels <= mask; with tag dscp, shift and mask
 * leave a DSCP bit; untagged_share only with
 * untagged last), and the configuration read back must then be the
 * model's. Any disagreement, or a request without an answer, fails.
 *
 * A rejected graft or add leaves the pfifo, or nothing, in place: the
 * fuzzer then puts a default mercury back, so traffic keeps flowing
 * through mercury. Prints the seed first; the same seed replays the same
 * requests. Exits 0 when every set agreed with the model.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include <linux/mercury.h>

#include "fuzz.h"
#include "mctl.h"

/* The configuration as the kernel dumps it, one value per attribute. */
struct nlf_cfg {
	uint32_t v[TCA_MERCURY_MAX + 1];
	bool	 have;			/* a mercury qdisc is in place */
};

enum nlf_width { NLF_U8 = 1, NLF_U32 = 4 };

struct nlf_attr_def {
	enum nlf_width	width;
	uint32_t	min;
	uint32_t	max;
	const char	*name;
};

/* The ranges of the uapi header, as the module's policy enforces them. */
static const struct nlf_attr_def nlf_defs[TCA_MERCURY_MAX + 1] = {
	[TCA_MERCURY_LEVELS]	     = { NLF_U32, 1, TC_MERCURY_MAX_LEVELS, "levels" },
	[TCA_MERCURY_TAG_SOURCE]     = { NLF_U8, 0, __TC_MERCURY_TAG_MAX - 1, "tag" },
	[TCA_MERCURY_TAG_SHIFT]	     = { NLF_U8, 0, 31, "shift" },
	[TCA_MERCURY_TAG_MASK]	     = { NLF_U32, 1, UINT32_MAX, "mask" },
	[TCA_MERCURY_UNTAGGED]	     = { NLF_U8, 0, __TC_MERCURY_UNTAGGED_MAX - 1, "untagged" },
	[TCA_MERCURY_UNTAGGED_SHARE] = { NLF_U8, 0, TC_MERCURY_MAX_SHARE, "untagged_share" },
	[TCA_MERCURY_FLOW_ORDER]     = { NLF_U8, 0, 1, "flow_order" },
	[TCA_MERCURY_FLOWS]	     = { NLF_U32, 1, TC_MERCURY_MAX_FLOWS, "flows" },
	[TCA_MERCURY_LIMIT]	     = { NLF_U32, 1, UINT32_MAX, "limit" },
	[TCA_MERCURY_MEMORY_LIMIT]   = { NLF_U32, 1, TC_MERCURY_MAX_MEMORY_LIMIT, "memory_limit" },
	[TCA_MERCURY_QUANTUM]	     = { NLF_U32, 256, 1 << 20, "quantum" },
	[TCA_MERCURY_BYPASS]	     = { NLF_U8, 0, 1, "bypass" },
	[TCA_MERCURY_FLOW_LIMIT]     = { NLF_U32, 0, UINT32_MAX, "flow_limit" },
};

/* What the model expects of one request. */
enum nlf_verdict {
	NLF_VALID,		/* must be accepted, config = model */
	NLF_INVALID,		/* must be rejected, nothing changes */
	NLF_EITHER,		/* the netlink core decides (e.g. byte-order
				 * flag); checked only for "nothing changes"
				 * when rejected
				 */
};

struct nlf_opts {
	uint8_t		buf[65000];
	size_t		len;
	bool		omit;		/* no TCA_OPTIONS at all */
	bool		no_nested_flag;	/* TCA_OPTIONS without NLA_F_NESTED */
	enum nlf_verdict verdict;
	bool		set[TCA_MERCURY_MAX + 1];
	uint32_t	val[TCA_MERCURY_MAX + 1];
};

static struct nl_sock *nlf_sk;
static int nlf_ifindex;
static uint32_t nlf_parent = TC_H_ROOT;
static uint32_t nlf_handle = 0x100000;
static int nlf_verbose;
static struct nlf_cfg nlf_defaults;	/* what an add without options gives */

static uint32_t nlf_pick_value(const struct nlf_attr_def *d)
{
	uint32_t top = d->width == NLF_U8 ? 0xff : UINT32_MAX;
	uint32_t c[] = {
		d->min, d->max, d->min + 1, d->max - 1,
		d->min - 1, d->max + 1, 0, top, 1,
		d->min + fuzz_below(d->max - d->min + 1),
		(uint32_t)fuzz_next(),
	};
	uint32_t v = c[fuzz_below(sizeof(c) / sizeof(c[0]))];

	return d->width == NLF_U8 ? v & 0xff : v;
}

/* Append one attribute header and payload; returns its offset. */
static size_t nlf_put(struct nlf_opts *o, uint16_t type, const void *data,
		      uint16_t len)
{
	size_t at = o->len, alen = NLA_ALIGN(NLA_HDRLEN + len);
	struct nlattr *a;

	if (at + alen > sizeof(o->buf))
		return SIZE_MAX;
	a = (struct nlattr *)(o->buf + at);
	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy(o->buf + at + NLA_HDRLEN, data, len);
	memset(o->buf + at + NLA_HDRLEN + len, 0, alen - NLA_HDRLEN - len);
	o->len += alen;
	return at;
}

static void nlf_mark(struct nlf_opts *o, enum nlf_verdict v)
{
	if (v == NLF_INVALID || (v == NLF_EITHER && o->verdict == NLF_VALID))
		o->verdict = v;
}

/* One random attribute into @o, updating the model; @clean: a
 * well-formed one with a value in range.
 */
static void nlf_one_attr(struct nlf_opts *o, bool clean)
{
	uint8_t junk[64];
	unsigned int kind = clean ? 0 : fuzz_below(100), i;
	uint16_t type = 1 + fuzz_below(TCA_MERCURY_MAX);
	const struct nlf_attr_def *d = &nlf_defs[type];
	uint32_t v;

	for (i = 0; i < sizeof(junk); i++)
		junk[i] = fuzz_next();

	if (kind < 70) {		/* well-formed known attribute */
		do {
			v = nlf_pick_value(d);
		} while (clean && (v < d->min || v > d->max));
		if (nlf_put(o, type, &v, d->width) == SIZE_MAX)
			return;
		if (v < d->min || v > d->max)
			nlf_mark(o, NLF_INVALID);
		o->set[type] = true;
		o->val[type] = v;
	} else if (kind < 80) {	/* known type, wrong length */
		uint16_t len;

		do {
			len = fuzz_below(3) ? fuzz_below(9) : fuzz_below(64);
		} while (len == d->width);
		if (nlf_put(o, type, junk, len) == SIZE_MAX)
			return;
		nlf_mark(o, NLF_INVALID);
	} else if (kind < 88) {	/* unknown type */
		uint16_t t = fuzz_below(4) ? TCA_MERCURY_MAX + 1 + fuzz_below(8) :
			     (fuzz_below(2) ? 0 : fuzz_below(NLA_TYPE_MASK + 1));

		if (t >= 1 && t <= TCA_MERCURY_MAX)
			t = 0;
		if (nlf_put(o, t, junk, fuzz_below(16)) == SIZE_MAX)
			return;
		nlf_mark(o, NLF_INVALID);
	} else if (kind < 93) {	/* stray NLA_F_NESTED on a scalar */
		v = nlf_pick_value(d);
		if (nlf_put(o, type | NLA_F_NESTED, &v, d->width) == SIZE_MAX)
			return;
		nlf_mark(o, NLF_INVALID);
	} else if (kind < 96) {	/* a nest where a scalar belongs */
		struct nlf_opts *in = calloc(1, sizeof(*in));

		if (!in)
			return;
		v = nlf_pick_value(d);
		nlf_put(in, type, &v, d->width);
		nlf_put(in, 1 + fuzz_below(TCA_MERCURY_MAX), junk, 4);
		nlf_put(o, type | (fuzz_below(2) ? NLA_F_NESTED : 0), in->buf,
			in->len);
		free(in);
		nlf_mark(o, NLF_INVALID);
	} else {			/* byte-order flag on a valid value */
		v = nlf_pick_value(d);
		if (nlf_put(o, type | NLA_F_NET_BYTEORDER, &v, d->width) == SIZE_MAX)
			return;
		nlf_mark(o, NLF_EITHER);
		o->set[type] = true;
		o->val[type] = v;
		if (v < d->min || v > d->max)
			nlf_mark(o, NLF_INVALID);
	}
}

/* The verdict, read off the final bytes the way the kernel's strict
 * nla_parse_nested() reads them (the generator's intentions do not count:
 * a cut in the last attribute's padding, say, leaves a valid request):
 * attributes while at least a header remains and nla_len fits; any byte
 * left over, a type 0 or above TCA_MERCURY_MAX, NLA_F_NESTED on a scalar,
 * a payload not exactly the type's width or a value out of range rejects
 * it; NLA_F_NET_BYTEORDER is the netlink core's business; the last of
 * duplicate attributes wins.
 */
static void nlf_model(struct nlf_opts *o)
{
	size_t off = 0, rem = o->len;

	o->verdict = o->no_nested_flag ? NLF_INVALID : NLF_VALID;
	memset(o->set, 0, sizeof(o->set));
	if (o->omit)
		return;
	while (rem >= NLA_HDRLEN) {
		const struct nlattr *a = (const struct nlattr *)(o->buf + off);
		uint16_t type = a->nla_type & NLA_TYPE_MASK;
		const struct nlf_attr_def *d = &nlf_defs[type];
		uint32_t v = 0;

		if (a->nla_len < NLA_HDRLEN || a->nla_len > rem)
			break;
		if (type == 0 || type > TCA_MERCURY_MAX ||
		    (a->nla_type & NLA_F_NESTED) ||
		    (unsigned int)(a->nla_len - NLA_HDRLEN) != d->width) {
			nlf_mark(o, NLF_INVALID);
		} else {
			memcpy(&v, o->buf + off + NLA_HDRLEN, d->width);
			if (v < d->min || v > d->max)
				nlf_mark(o, NLF_INVALID);
			if (a->nla_type & NLA_F_NET_BYTEORDER)
				nlf_mark(o, NLF_EITHER);
			o->set[type] = true;
			o->val[type] = v;
		}
		if ((size_t)NLA_ALIGN(a->nla_len) >= rem) {
			rem = 0;
			break;
		}
		off += NLA_ALIGN(a->nla_len);
		rem -= NLA_ALIGN(a->nla_len);
	}
	if (rem > 0)
		nlf_mark(o, NLF_INVALID);	/* "bytes leftover" */
}

static void nlf_gen(struct nlf_opts *o)
{
	unsigned int n, i, mode;
	/* half the sets are well-formed and in range, so that accepted
	 * changes (and the cross-option rules) get their share
	 */
	bool clean = fuzz_below(2);

	memset(o, 0, offsetof(struct nlf_opts, verdict));
	o->verdict = NLF_VALID;
	memset(o->set, 0, sizeof(o->set));
	if (!fuzz_below(40)) {
		o->omit = true;
		nlf_model(o);
		return;
	}
	if (!clean && !fuzz_below(60)) {
		o->no_nested_flag = true;
		nlf_mark(o, NLF_INVALID);
	}
	n = fuzz_below(4) ? fuzz_below(5) : fuzz_below(16);
	for (i = 0; i < n; i++)
		nlf_one_attr(o, clean);

	mode = clean ? 14 + fuzz_below(86) : fuzz_below(100);
	if (mode < 6 && o->len > 0) {		/* truncated: cut inside */
		size_t cut = fuzz_below(o->len);
		size_t off = 0;
		struct nlattr *a;

		/* a cut at an attribute boundary is just fewer attributes */
		while (off < o->len) {
			a = (struct nlattr *)(o->buf + off);
			if (off == cut)
				break;
			if (cut < off + NLA_ALIGN(a->nla_len))
				break;
			off += NLA_ALIGN(a->nla_len);
		}
		if (off != cut) {
			o->len = cut;
			nlf_mark(o, NLF_INVALID);
		}
	} else if (mode < 10 && o->len > 0) {	/* a length beyond the end */
		struct nlattr *a = (struct nlattr *)o->buf;
		size_t off = 0;

		while (off + NLA_ALIGN(a->nla_len) < o->len) {
			off += NLA_ALIGN(a->nla_len);
			a = (struct nlattr *)(o->buf + off);
		}
		a->nla_len += 4 + fuzz_below(200);
		nlf_mark(o, NLF_INVALID);
	} else if (mode < 14) {			/* 1-3 trailing bytes */
		unsigned int t = 1 + fuzz_below(3);

		memset(o->buf + o->len, 0xa5, t);
		o->len += t;
		nlf_mark(o, NLF_INVALID);
	} else if (mode < 17 && o->len > 0) {	/* oversized: repeated */
		size_t one = o->len;

		while (o->len + one <= 60000) {
			memcpy(o->buf + o->len, o->buf, one);
			o->len += one;
		}
	}
	nlf_model(o);
}

/* ---- netlink ---------------------------------------------------------- */

static int nlf_ack_err;

static int nlf_err_cb(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
	(void)who;
	(void)arg;
	nlf_ack_err = e->error;
	return NL_STOP;
}

static int nlf_ack_cb(struct nl_msg *msg, void *arg)
{
	(void)msg;
	(void)arg;
	nlf_ack_err = 0;
	return NL_STOP;
}

/* Send @msg and wait for its answer: 0 or a negative errno. */
static int nlf_talk(struct nl_msg *msg)
{
	int err;

	nlf_ack_err = 1;
	err = nl_send_auto(nlf_sk, msg);
	nlmsg_free(msg);
	if (err < 0)
		fuzz_die("send: %s", nl_geterror(err));
	while (nlf_ack_err == 1) {
		err = nl_recvmsgs_default(nlf_sk);
		if (err < 0 && nlf_ack_err == 1)
			fuzz_die("no answer from the kernel: %s",
				 nl_geterror(err));
	}
	return nlf_ack_err;
}

static struct nl_msg *nlf_qdisc_msg(int cmd, int flags, const char *kind,
				    uint32_t handle)
{
	struct tcmsg tcm = {
		.tcm_family = AF_UNSPEC,
		.tcm_ifindex = nlf_ifindex,
		.tcm_handle = handle,
		.tcm_parent = nlf_parent,
	};
	struct nl_msg *msg = nlmsg_alloc_simple(cmd, flags | NLM_F_ACK);

	if (!msg)
		fuzz_die("out of memory");
	if (nlmsg_append(msg, &tcm, sizeof(tcm), NLMSG_ALIGNTO) < 0 ||
	    (kind && nla_put_string(msg, TCA_KIND, kind) < 0))
		fuzz_die("message too small");
	return msg;
}

static int nlf_send_opts(int flags, const struct nlf_opts *o)
{
	struct nl_msg *msg = nlmsg_alloc_size(NLMSG_HDRLEN + 128 + o->len);
	struct tcmsg tcm = {
		.tcm_family = AF_UNSPEC,
		.tcm_ifindex = nlf_ifindex,
		.tcm_handle = nlf_handle,
		.tcm_parent = nlf_parent,
	};

	if (!msg || !nlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, RTM_NEWQDISC, 0,
			       flags | NLM_F_ACK))
		fuzz_die("out of memory");
	if (nlmsg_append(msg, &tcm, sizeof(tcm), NLMSG_ALIGNTO) < 0 ||
	    nla_put_string(msg, TCA_KIND, "mercury") < 0)
		fuzz_die("message too small");
	if (!o->omit) {
		int type = TCA_OPTIONS | (o->no_nested_flag ? 0 : NLA_F_NESTED);

		if (nla_put(msg, type, o->len, o->buf) < 0)
			fuzz_die("message too small for %zu option bytes", o->len);
	}
	return nlf_talk(msg);
}

static struct nlf_cfg *nlf_dump_into;
static char nlf_dump_kind[32];

static int nlf_dump_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct tcmsg *tcm = nlmsg_data(nlh);
	struct nlattr *tb[TCA_MAX + 1], *ob[TCA_MERCURY_MAX + 1];
	int t;

	(void)arg;
	if (nlh->nlmsg_type != RTM_NEWQDISC || tcm->tcm_ifindex != nlf_ifindex ||
	    tcm->tcm_handle != nlf_handle)
		return NL_OK;
	if (nlmsg_parse(nlh, sizeof(*tcm), tb, TCA_MAX, NULL) < 0 || !tb[TCA_KIND])
		return NL_OK;
	snprintf(nlf_dump_kind, sizeof(nlf_dump_kind), "%s",
		 nla_get_string(tb[TCA_KIND]));
	if (strcmp(nlf_dump_kind, "mercury") || !tb[TCA_OPTIONS])
		return NL_OK;
	if (nla_parse_nested(ob, TCA_MERCURY_MAX, tb[TCA_OPTIONS], NULL) < 0)
		return NL_OK;
	nlf_dump_into->have = true;
	for (t = 1; t <= TCA_MERCURY_MAX; t++) {
		if (!ob[t])
			fuzz_die("the dump lacks %s", nlf_defs[t].name);
		nlf_dump_into->v[t] = nlf_defs[t].width == NLF_U8 ?
				      nla_get_u8(ob[t]) : nla_get_u32(ob[t]);
	}
	return NL_OK;
}

/* Read our qdisc's configuration back; kind "" when there is none. */
static void nlf_read(struct nlf_cfg *c)
{
	struct tcmsg tcm = { .tcm_family = AF_UNSPEC, .tcm_ifindex = nlf_ifindex };
	static struct nl_sock *sk;
	int err;

	memset(c, 0, sizeof(*c));
	nlf_dump_kind[0] = 0;
	nlf_dump_into = c;
	if (!sk) {
		sk = nl_socket_alloc();
		if (!sk || nl_connect(sk, NETLINK_ROUTE) < 0)
			fuzz_die("cannot open a netlink socket");
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, nlf_dump_cb, NULL);
	}
	err = nl_send_simple(sk, RTM_GETQDISC, NLM_F_DUMP, &tcm, sizeof(tcm));
	if (err < 0 || (err = nl_recvmsgs_default(sk)) < 0)
		fuzz_die("qdisc dump: %s", nl_geterror(err));
}

static void nlf_print_cfg(const char *what, const struct nlf_cfg *c)
{
	int t;

	fprintf(stderr, "#   %s:", what);
	if (!c->have) {
		fprintf(stderr, " (no mercury qdisc; kind '%s')\n", nlf_dump_kind);
		return;
	}
	for (t = 1; t <= TCA_MERCURY_MAX; t++)
		fprintf(stderr, " %s %" PRIu32, nlf_defs[t].name, c->v[t]);
	fprintf(stderr, "\n");
}

static void nlf_print_opts(const struct nlf_opts *o)
{
	size_t i;

	fprintf(stderr, "#   options (%s%s%zu bytes):", o->omit ? "omitted, " : "",
		o->no_nested_flag ? "no NLA_F_NESTED, " : "", o->len);
	for (i = 0; i < o->len && i < 96; i++)
		fprintf(stderr, "%s%02x", i % 4 ? "" : " ", o->buf[i]);
	fprintf(stderr, "%s\n", o->len > 96 ? " ..." : "");
}

/* The configuration the model expects: @base with @o applied, or false
 * when a rule across options rejects it: mercuryctl's mctl_check_opts()
 * (levels <= mask; with tag dscp, shift and mask keep a DSCP bit;
 * untagged_share only with untagged last), which mercury-opfuzz uses too.
 * A value out of range makes the request invalid anyway: the rules are
 * not asked then.
 */
static bool nlf_apply(struct nlf_cfg *out, const struct nlf_cfg *base,
		      const struct nlf_opts *o)
{
	struct mercury_qdisc_opts m = { 0 };
	char why[160];
	int t;

	*out = *base;
	if (o->omit)
		return true;
	for (t = 1; t <= TCA_MERCURY_MAX; t++)
		if (o->set[t])
			out->v[t] = o->val[t];
	if (o->verdict == NLF_INVALID)
		return true;
	m.levels = out->v[TCA_MERCURY_LEVELS];
	m.mask = out->v[TCA_MERCURY_TAG_MASK];
	m.source = out->v[TCA_MERCURY_TAG_SOURCE];
	m.shift = out->v[TCA_MERCURY_TAG_SHIFT];
	m.untagged = out->v[TCA_MERCURY_UNTAGGED];
	m.share = out->v[TCA_MERCURY_UNTAGGED_SHARE];
	return !mctl_check_opts(&m, why, sizeof(why));
}

static int nlf_restore(void)
{
	struct nlf_opts none = { .omit = true };

	return nlf_send_opts(NLM_F_CREATE | NLM_F_REPLACE, &none);
}

static const char * const nlf_op_names[] = { "change", "replace", "graft", "add" };

static struct nlf_opts nlf_o;

/* One random set; returns false when the kernel disagreed with the model.
 * *@errp: the kernel's answer to the random options.
 */
static bool nlf_one(unsigned long i, struct nlf_cfg *cur, int *errp)
{
	struct nlf_opts *o = &nlf_o;
	struct nlf_cfg want, got;
	enum nlf_verdict verdict;
	unsigned int op = fuzz_below(100);
	const struct nlf_cfg *base = cur;
	bool fresh = false, rules;
	int err;

	op = op < 55 ? 0 : op < 75 ? 1 : op < 88 ? 2 : 3;
	nlf_gen(o);
	if (op == 2) {
		struct nl_msg *m = nlf_qdisc_msg(RTM_NEWQDISC,
						 NLM_F_CREATE | NLM_F_REPLACE, "pfifo",
						 nlf_handle + 0x10000);

		if (nlf_talk(m))
			fuzz_die("set %lu: cannot replace mercury by pfifo", i);
		fresh = true;
	} else if (op == 3) {
		if (nlf_talk(nlf_qdisc_msg(RTM_DELQDISC, 0, NULL, nlf_handle)))
			fuzz_die("set %lu: cannot delete mercury", i);
		fresh = true;
	}
	if (fresh)
		base = &nlf_defaults;
	rules = nlf_apply(&want, base, o);
	verdict = o->verdict;
	if (verdict == NLF_VALID && !rules)
		verdict = NLF_INVALID;

	err = nlf_send_opts(op == 0 ? 0 : op == 3 ? NLM_F_CREATE | NLM_F_EXCL :
			    NLM_F_CREATE | NLM_F_REPLACE, o);
	*errp = err;
	nlf_read(&got);
	if (nlf_verbose)
		fprintf(stderr, "# set %lu: %s -> %d\n", i, nlf_op_names[op], err);

	if (err && fresh) {
		/* init failed: nothing has our handle (a graft leaves the
		 * pfifo in place, under its own handle)
		 */
		if (got.have || nlf_dump_kind[0]) {
			fprintf(stderr, "# set %lu: %s rejected (%s) but qdisc %x: is now '%s'\n",
				i, nlf_op_names[op], strerror(-err), nlf_handle >> 16,
				nlf_dump_kind);
			return false;
		}
	} else if (err && (got.have != cur->have ||
			   memcmp(got.v, cur->v, sizeof(got.v)))) {
		fprintf(stderr, "# set %lu: %s rejected (%s) but the configuration changed\n",
			i, nlf_op_names[op], strerror(-err));
		nlf_print_cfg("before", cur);
		nlf_print_cfg("after", &got);
		nlf_print_opts(o);
		return false;
	}
	if ((verdict == NLF_VALID && err) || (verdict == NLF_INVALID && !err) ||
	    (!err && verdict == NLF_VALID && memcmp(got.v, want.v, sizeof(got.v)))) {
		fprintf(stderr, "# set %lu: %s %s, the model says %s\n", i,
			nlf_op_names[op], err ? strerror(-err) : "accepted",
			verdict == NLF_VALID ? "valid" : "invalid");
		nlf_print_cfg("base", base);
		nlf_print_cfg("model", &want);
		nlf_print_cfg("kernel", &got);
		nlf_print_opts(o);
		return false;
	}
	if (err && fresh) {
		if (nlf_restore())
			fuzz_die("set %lu: cannot put mercury back", i);
		nlf_read(&got);
		if (memcmp(got.v, nlf_defaults.v, sizeof(got.v))) {
			fprintf(stderr, "# set %lu: mercury without options is not the default\n", i);
			return false;
		}
	}
	*cur = got;
	return true;
}

static uint32_t nlf_parse_handle(const char *s, bool parent)
{
	unsigned int maj, min = 0;

	if (parent && !strcmp(s, "root"))
		return TC_H_ROOT;
	if (sscanf(s, "%x:%x", &maj, &min) < 1 || maj > 0xffff || min > 0xffff)
		fuzz_die("bad handle '%s' (want MAJ: or MAJ:MIN, hexadecimal)", s);
	return maj << 16 | min;
}

int main(int argc, char **argv)
{
	unsigned long n = 1000, i, accepted = 0;
	uint64_t seed = fuzz_seed_from_time();
	struct nlf_cfg cur;
	const char *dev = NULL;
	int c;

	while ((c = getopt(argc, argv, "d:p:H:n:s:v")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'p': nlf_parent = nlf_parse_handle(optarg, true); break;
		case 'H': nlf_handle = nlf_parse_handle(optarg, false); break;
		case 'n': n = fuzz_uint('n', optarg, ULONG_MAX); break;
		case 's': seed = fuzz_uint('s', optarg, UINT64_MAX); break;
		case 'v': nlf_verbose = 1; break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-p PARENT] [-H HANDLE] [-n SETS] [-s SEED] [-v]\n",
				argv[0]);
			return 2;
		}
	}
	if (!dev)
		fuzz_die("no device (-d)");
	nlf_ifindex = if_nametoindex(dev);
	if (!nlf_ifindex)
		fuzz_die("no device %s", dev);
	printf("# mercury-nlfuzz: seed %" PRIu64 ", %lu sets on %s\n", seed, n, dev);
	fflush(stdout);
	fuzz_srand(seed);

	nlf_sk = nl_socket_alloc();
	if (!nlf_sk || nl_connect(nlf_sk, NETLINK_ROUTE) < 0)
		fuzz_die("cannot open a netlink socket");
	nl_socket_disable_auto_ack(nlf_sk);
	nl_socket_modify_err_cb(nlf_sk, NL_CB_CUSTOM, nlf_err_cb, NULL);
	nl_socket_modify_cb(nlf_sk, NL_CB_ACK, NL_CB_CUSTOM, nlf_ack_cb, NULL);

	/* The defaults, as the kernel gives them on this device. */
	/* a mercury left by an earlier run would keep its options */
	nlf_talk(nlf_qdisc_msg(RTM_DELQDISC, 0, NULL, nlf_handle));
	if (nlf_restore())
		fuzz_die("cannot create mercury %x: on %s", nlf_handle >> 16, dev);
	nlf_read(&nlf_defaults);
	if (!nlf_defaults.have)
		fuzz_die("no mercury qdisc after creating it");
	cur = nlf_defaults;

	for (i = 0; i < n; i++) {
		int err = 0;

		if (!nlf_one(i, &cur, &err)) {
			printf("# mercury-nlfuzz: FAILED at set %lu (replay: -s %" PRIu64 " -n %lu)\n",
			       i, seed, i + 1);
			return 1;
		}
		accepted += err == 0;
		if (n >= 10000 && (i + 1) % (n / 10) == 0) {
			printf("# mercury-nlfuzz: %lu sets, %lu accepted\n", i + 1, accepted);
			fflush(stdout);
		}
	}
	printf("# mercury-nlfuzz: %lu sets agreed with the model (%lu accepted, %lu rejected)\n",
	       n, accepted, n - accepted);
	/* leave a default mercury for the caller's traffic checks */
	nlf_restore();
	nl_socket_free(nlf_sk);
	return 0;
}
