// SPDX-License-Identifier: GPL-2.0
/*
 * mercury-opfuzz: random operation sequences on sch_mercury under traffic,
 * each ended by an accounting check (run in the guest, as root).
 *
 *   mercury-opfuzz --ns-s NS --ns-r NS --dst ADDR --src ADDR --lladdr MAC
 *                  --lladdr-s MAC --ko SCH_MERCURY_KO --blast MERCURY_BLAST
 *                  --seed N [--seqs N] [--count N] [--skb-slack N]
 *
 * The sender's veth0 is in NS (--ns-s), the receiver's veth1 in --ns-r,
 * whose mercury-blast sink takes the traffic on port 9000. Each sequence
 * (seed --seed + i) picks a placement (mercury as root, as the child of
 * tbf, of htb, or one mercury per tx queue under mq), starts tagged TCP
 * and UDP traffic (mercury-blast send) and applies 4..10 random
 * operations: change, replace (same kind: a change), graft (a pfifo takes
 * the place, mercury replaces it), delete + add, class dump, qdisc dump,
 * link down/up and rmmod/insmod (after deleting every mercury). A valid
 * request must succeed and an invalid one must fail (mercuryctl's
 * mctl_check_opts(), the kernel's rules across options: levels <= mask;
 * tag dscp needs shift and mask to keep one of the six DSCP bits;
 * untagged_share only with untagged last). After every delete, a tbf or
 * htb parent must drain to qlen 0 backlog 0 within 60 s with the sender
 * stopped (SIGSTOP); under htb a pfifo that admits nothing first takes
 * the place of the default pfifo htb grafts, which the traffic would fill.
 *
 * Each sequence ends, traffic stopped, with the accounting check: a
 * structural change (fresh level counters, no bypass, room for
 * everything), then --count datagrams at tags 1, 2 and 0 through the
 * drained queues:
 *   - sent + dropped + queued = enqueued (--count), nothing dropped;
 *   - the receiver got what the qdiscs sent;
 *   - the levels' deltas: --count / 3 at each tag, their drops the qdiscs';
 *   - every mercury: qlen, backlog, memory_usage and flows 0; the parent
 *     drains to empty;
 * and, after the qdiscs are deleted, the skb-leak check: the active
 * objects of skbuff_head_cache plus skbuff_fclone_cache, after a slab
 * flush, within --skb-slack (default 64; mercury_fuzz_ops.sh passes
 * selftests/lib.sh's skb_slack, which counts the per-CPU skb caches) of
 * the run's starting value.
 *
 * Why C: the Python version ran tc or ip for every step, about 40 a
 * sequence, and in the emulated guest under the debug kernel each spawn
 * cost ~0.7 s (27 s a sequence). Here every request is a netlink message
 * from this process: mercury through mercuryctl's own code
 * (userspace/ctl/nl.c, libmercury's options encoder and decoder; the
 * options are spelled and parsed as tc spells them, by mctl_parse_opts()),
 * everything else (tbf, htb and its class, mq, pfifo, deletes, link,
 * neighbours, the parent's counters) through libnl-route-3, rmmod and
 * insmod through delete_module(2) and finit_module(2), and mercury-blast
 * is started by fork, setns and execv.
 *
 * Prints KTAP-style "# opfuzz: " progress and one summary line; exits 1
 * at the first failing sequence, naming the seed that replays it and the
 * last operations with the kernel's answers, 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/pkt_sched.h>

#include <netlink/addr.h>
#include <netlink/netlink.h>
#include <netlink/route/class.h>
#include <netlink/route/link.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/fifo.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>

#include "fuzz.h"
#include "mctl.h"

#define OPF_DEV		"veth0"
#define OPF_DEV_R	"veth1"
#define OPF_PARENT	0x10000u	/* tbf, htb and mq are 1: */
#define OPF_PORT	"9000"		/* the traffic; its sink is the caller's */
#define OPF_PROBE_PORT	"9100"
#define OPF_PROBE_TAGS	"1,2,0"
#define OPF_MAX_INST	4
#define OPF_LOG_LINES	40

struct opf_args {
	const char	*ns_s, *ns_r, *dst, *src, *lladdr, *lladdr_s, *ko, *blast;
	uint64_t	seed, seqs, count, skb_slack;
	bool		have_seed;
};

/* One mercury and where it sits. */
struct opf_inst {
	uint32_t	parent;		/* TC_H_ROOT, or a class of 1: */
	uint32_t	handle;
};

enum opf_placement { OPF_ROOT, OPF_TBF, OPF_HTB, OPF_MQ, OPF_NPLACEMENTS };
static const char *const opf_placement_names[] = { "root", "tbf", "htb", "mq" };

enum opf_op {
	OPF_CHANGE, OPF_REPLACE, OPF_GRAFT, OPF_DELETE_ADD, OPF_CLASS_DUMP,
	OPF_QDISC_DUMP, OPF_LINK, OPF_RMMOD, OPF_NOPS
};
static const char *const opf_op_names[] = {
	"change", "replace", "graft", "delete_add", "class_dump", "qdisc_dump",
	"link", "rmmod",
};
/* out of 100, in opf_op order (opfuzz.py's weights) */
static const unsigned int opf_op_weights[] = { 35, 10, 8, 12, 12, 8, 8, 7 };

static struct opf_args opf_a = { .seqs = 20, .count = 150, .skb_slack = 64 };
static struct mctl_nl *opf_nl;		/* in --ns-s */
static struct mctl_nl *opf_nl_r;	/* in --ns-r: its neighbour entry */
static int opf_ifindex, opf_ifindex_r;
static enum opf_placement opf_placement;
static struct opf_inst opf_inst[OPF_MAX_INST];
static unsigned int opf_ninst;
static pid_t opf_send_pid, opf_sink_pid;	/* 0: not running */

/* The last operations and the kernel's answers, printed on failure. */
static char opf_log[OPF_LOG_LINES][512];
static unsigned long opf_nlog;
static long opf_seq = -1;		/* the sequence running, -1: none */
static uint64_t opf_seq_seed;

static __attribute__((format(printf, 1, 2)))
void opf_logf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(opf_log[opf_nlog++ % OPF_LOG_LINES], sizeof(opf_log[0]),
		  fmt, ap);
	va_end(ap);
}

static void opf_reap(pid_t *pid)
{
	if (!*pid)
		return;
	kill(*pid, SIGTERM);
	kill(*pid, SIGCONT);		/* it may be stopped */
	while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
		;
	*pid = 0;
}

/* A failed check: the sequence, its replay seed, the last operations. */
static __attribute__((format(printf, 1, 2), noreturn))
void opf_fail(const char *fmt, ...)
{
	unsigned long i, first;
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	opf_reap(&opf_send_pid);
	opf_reap(&opf_sink_pid);
	if (opf_seq < 0) {
		printf("# opfuzz: %s\n", msg);
		exit(1);
	}
	printf("# opfuzz: sequence %ld FAILED (replay: --seed %" PRIu64
	       " --seqs 1): %s\n", opf_seq, opf_seq_seed, msg);
	first = opf_nlog > OPF_LOG_LINES ? opf_nlog - OPF_LOG_LINES : 0;
	for (i = first; i < opf_nlog; i++)
		printf("#   %s\n", opf_log[i % OPF_LOG_LINES]);
	fflush(stdout);
	exit(1);
}

static double opf_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void opf_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- randomness (fuzz.h's generator: a seed replays a sequence) -------- */

#define OPF_N(a)	(sizeof(a) / sizeof((a)[0]))
#define OPF_PICK(a)	((a)[fuzz_below(OPF_N(a))])

static unsigned int opf_int(unsigned int lo, unsigned int hi)
{
	return lo + fuzz_below(hi - lo + 1);
}

/* ---- requests ------------------------------------------------------------- */

enum opf_want { OPF_OK, OPF_FAIL, OPF_ANY };

/* Log request @what and the kernel's answer @err; fail when it is not
 * what the model expects.
 */
static void opf_done(struct mctl_nl *nl, enum opf_want want, int err,
		     const char *what)
{
	const char *ext = err ? mctl_nl_extack(nl) : "";
	char res[320];

	if (err)
		snprintf(res, sizeof(res), "%s%s%s", strerror(-err),
			 *ext ? ": " : "", ext);
	else
		snprintf(res, sizeof(res), "0");
	opf_logf("%s -> %s", what, res);
	if (want == OPF_OK && err)
		opf_fail("%s failed: %s", what, res);
	if (want == OPF_FAIL && !err)
		opf_fail("%s succeeded but must fail", what);
}

/* "root" or "parent 1:1", as tc spells the place. */
static const char *opf_where(char *buf, size_t len, uint32_t parent)
{
	char h[16];

	if (parent == TC_H_ROOT)
		return "root";
	mctl_sprint_handle(h, sizeof(h), parent);
	snprintf(buf, len, "parent %s", h);
	return buf;
}

/* Options as tc spells them, parsed by mercuryctl's parser. */
struct opf_opts {
	struct mercury_qdisc_opts o;
	char	text[256];		/* " levels 64 mask 0xff", or "" */
	char	why[160];		/* why the kernel must refuse them */
};

static const struct opf_opts opf_none;	/* no options: the defaults */

static void opf_opts_parse(struct opf_opts *out, int argc, char **argv)
{
	char err[256];
	size_t at = 0;
	int i;

	if (mctl_parse_opts(argc, argv, &out->o, err, sizeof(err)))
		opf_fail("options the fuzzer drew do not parse: %s", err);
	out->text[0] = out->why[0] = '\0';
	for (i = 0; i < argc && at < sizeof(out->text); i++)
		at += snprintf(out->text + at, sizeof(out->text) - at, " %s",
			       argv[i]);
}

static void opf_mercury(enum mctl_op op, const struct opf_inst *in,
			const struct opf_opts *o, enum opf_want want)
{
	static const char *const verbs[] = {
		[MCTL_OP_ADD] = "add", [MCTL_OP_CHANGE] = "change",
		[MCTL_OP_REPLACE] = "replace",
	};
	char what[600], where[32], h[16];

	mctl_sprint_handle(h, sizeof(h), in->handle);
	snprintf(what, sizeof(what), "qdisc %s dev " OPF_DEV " %s handle %s mercury%s%s%s%s",
		 verbs[op], opf_where(where, sizeof(where), in->parent), h,
		 o->text, want == OPF_FAIL ? " (must fail: " : "",
		 want == OPF_FAIL ? o->why : "", want == OPF_FAIL ? ")" : "");
	opf_done(opf_nl, want, mctl_nl_modify(opf_nl, op, opf_ifindex,
					      in->parent, in->handle, &o->o),
		 what);
}

static void opf_mercury_del(const struct opf_inst *in)
{
	char what[128], where[32], h[16];

	mctl_sprint_handle(h, sizeof(h), in->handle);
	snprintf(what, sizeof(what), "qdisc del dev " OPF_DEV " %s handle %s",
		 opf_where(where, sizeof(where), in->parent), h);
	opf_done(opf_nl, OPF_OK, mctl_nl_delete(opf_nl, opf_ifindex,
						in->parent, in->handle), what);
}

/* A qdisc object on veth0 for libnl-route; @kind NULL: any (a delete). */
static struct rtnl_qdisc *opf_qdisc(uint32_t parent, uint32_t handle,
				    const char *kind)
{
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();

	if (!q)
		opf_fail("out of memory");
	rtnl_tc_set_ifindex(TC_CAST(q), opf_ifindex);
	rtnl_tc_set_parent(TC_CAST(q), parent);
	if (handle)
		rtnl_tc_set_handle(TC_CAST(q), handle);
	if (kind && rtnl_tc_set_kind(TC_CAST(q), kind) < 0)
		opf_fail("libnl: cannot set qdisc kind %s", kind);
	return q;
}

/* Send a request libnl built (err: its build result) and check the answer. */
static void opf_send(struct mctl_nl *nl, int err, struct nl_msg *msg,
		     enum opf_want want, const char *what)
{
	if (err < 0) {
		nlmsg_free(msg);
		opf_fail("%s: libnl cannot build the request: %s", what,
			 nl_geterror(err));
	}
	opf_done(nl, want, mctl_nl_send(nl, msg), what);
}

/* Add or replace qdisc @q (NLM_F_* @flags); consumes @q. */
static void opf_qdisc_new(struct rtnl_qdisc *q, int flags, enum opf_want want,
			  const char *what)
{
	struct nl_msg *msg = NULL;
	int err = rtnl_qdisc_build_add_request(q, flags, &msg);

	rtnl_qdisc_put(q);
	opf_send(opf_nl, err, msg, want, what);
}

/* tc qdisc del: whatever kind sits at @parent (with @handle, if not 0). */
static void opf_qdisc_del(uint32_t parent, uint32_t handle, enum opf_want want)
{
	struct rtnl_qdisc *q = opf_qdisc(parent, handle, NULL);
	char what[128], where[32], h[16] = "";
	struct nl_msg *msg = NULL;
	int err;

	if (handle)
		mctl_sprint_handle(h, sizeof(h), handle);
	snprintf(what, sizeof(what), "qdisc del dev " OPF_DEV " %s%s%s",
		 opf_where(where, sizeof(where), parent), handle ? " handle " : "",
		 h);
	err = rtnl_qdisc_build_delete_request(q, &msg);
	rtnl_qdisc_put(q);
	opf_send(opf_nl, err, msg, want, what);
}

static void opf_pfifo(uint32_t parent, uint32_t handle, int limit)
{
	struct rtnl_qdisc *q = opf_qdisc(parent, handle, "pfifo");
	char what[128], where[32], h[16];

	mctl_sprint_handle(h, sizeof(h), handle);
	snprintf(what, sizeof(what),
		 "qdisc replace dev " OPF_DEV " %s handle %s pfifo limit %d",
		 opf_where(where, sizeof(where), parent), h, limit);
	if (rtnl_qdisc_fifo_set_limit(q, limit) < 0)
		opf_fail("libnl: cannot set the pfifo limit");
	opf_qdisc_new(q, NLM_F_CREATE | NLM_F_REPLACE, OPF_OK, what);
}

/* Kind, qlen and backlog of qdisc @handle on veth0, as libnl reads them;
 * false when there is none.
 */
static bool opf_tc_stats(uint32_t handle, char *kind, size_t len,
			 uint64_t *qlen, uint64_t *backlog)
{
	struct nl_cache *cache;
	struct rtnl_qdisc *q;
	int err;

	err = rtnl_qdisc_alloc_cache(mctl_nl_sock(opf_nl), &cache);
	if (err < 0)
		opf_fail("qdisc dump: %s", nl_geterror(err));
	q = rtnl_qdisc_get(cache, opf_ifindex, handle);
	if (q) {
		snprintf(kind, len, "%s", rtnl_tc_get_kind(TC_CAST(q)));
		*qlen = rtnl_tc_get_stat(TC_CAST(q), RTNL_TC_QLEN);
		*backlog = rtnl_tc_get_stat(TC_CAST(q), RTNL_TC_BACKLOG);
		rtnl_qdisc_put(q);
	}
	nl_cache_free(cache);
	return q != NULL;
}

/* ---- mercury dumps (mercuryctl's) ----------------------------------------- */

struct opf_dump {
	struct mctl_qdisc	*q;
	size_t			n;
};

static void opf_dump(struct opf_dump *d)
{
	int err = mctl_nl_dump(opf_nl, opf_ifindex, &d->q, &d->n);

	if (err)
		opf_fail("mercury dump: %s%s%s", strerror(-err),
			 *mctl_nl_extack(opf_nl) ? ": " : "",
			 mctl_nl_extack(opf_nl));
}

static void opf_dump_free(struct opf_dump *d)
{
	mctl_qdiscs_free(d->q, d->n);
	d->q = NULL;
	d->n = 0;
}

static const struct mctl_qdisc *opf_find(const struct opf_dump *d,
					 uint32_t handle)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (d->q[i].handle == handle)
			return &d->q[i];
	return NULL;
}

/* @handle in @d, or fail naming what sits there instead. */
static const struct mctl_qdisc *opf_need(const struct opf_dump *d,
					 uint32_t handle)
{
	const struct mctl_qdisc *q = opf_find(d, handle);
	uint64_t qlen, backlog;
	char h[16], kind[32];

	if (q)
		return q;
	mctl_sprint_handle(h, sizeof(h), handle);
	if (!opf_tc_stats(handle, kind, sizeof(kind), &qlen, &backlog))
		snprintf(kind, sizeof(kind), "none");
	opf_fail("no mercury %s (found %s)", h, kind);
}

/* The configuration of mercury @handle, as the kernel reports it. */
static void opf_current(uint32_t handle, struct mercury_qdisc_opts *o)
{
	struct opf_dump d;

	opf_dump(&d);
	*o = opf_need(&d, handle)->opts;
	opf_dump_free(&d);
}

/* ---- options ---------------------------------------------------------------- */

struct opf_pool {
	const char	*name;
	const char	*vals[8];
	unsigned int	n;
};

/* By name, as opfuzz.py drew them; tag dscp is new here. */
enum {
	OPF_O_BYPASS, OPF_O_FLOW_LIMIT, OPF_O_FLOW_ORDER, OPF_O_FLOWS,
	OPF_O_LEVELS, OPF_O_LIMIT, OPF_O_MASK, OPF_O_MEMORY_LIMIT, OPF_O_QUANTUM, OPF_O_SHIFT, OPF_O_TAG,
	OPF_O_UNTAGGED, OPF_O_UNTAGGED_SHARE, OPF_O_N
};
static const struct opf_pool opf_pool[OPF_O_N] = {
	[OPF_O_BYPASS]	     = { "bypass", { "on", "off" }, 2 },
	[OPF_O_FLOW_LIMIT]   = { "flow_limit", { "0", "1", "3", "100" }, 4 },
	[OPF_O_FLOW_ORDER]   = { "flow_order", { "on", "off" }, 2 },
	[OPF_O_FLOWS]	     = { "flows", { "1", "2", "16", "1024", "65536" }, 5 },
	[OPF_O_LEVELS]	     = { "levels", { "1", "2", "3", "8", "64", "1024",
					     "65533", "65534" }, 8 },
	[OPF_O_LIMIT]	     = { "limit", { "1", "2", "10", "100", "1000",
					    "10000" }, 6 },
	[OPF_O_MASK]	     = { "mask", { "0x1", "0xf", "0xff", "0xffff",
					   "0xffffffff" }, 5 },
	[OPF_O_MEMORY_LIMIT] = { "memory_limit", { "3000", "100000",
						   "33554432" }, 3 },
	[OPF_O_QUANTUM]	     = { "quantum", { "256", "1514", "3028", "65536",
					      "1048576" }, 5 },
	[OPF_O_SHIFT]	     = { "shift", { "0", "1", "4", "8" }, 4 },
	[OPF_O_TAG]	     = { "tag", { "mark", "priority", "dscp" }, 3 },
	[OPF_O_UNTAGGED]     = { "untagged", { "first", "last" }, 2 },
	[OPF_O_UNTAGGED_SHARE] = { "untagged_share", { "0", "10", "50", "90" }, 4 },
};

/* A draw: the options in the order drawn, each a value index. */
struct opf_draw {
	unsigned int	key[OPF_O_N], val[OPF_O_N], n;
	int		pos[OPF_O_N];	/* index in key[], -1: not drawn */
};

static void opf_draw_set(struct opf_draw *d, unsigned int key, unsigned int val)
{
	if (d->pos[key] < 0) {
		d->pos[key] = d->n;
		d->key[d->n++] = key;
	}
	d->val[d->pos[key]] = val;
}

static const char *opf_draw_get(const struct opf_draw *d, unsigned int key)
{
	return d->pos[key] < 0 ? NULL :
	       opf_pool[key].vals[d->val[d->pos[key]]];
}

static unsigned long opf_num(const char *s)
{
	return strtoul(s, NULL, 0);
}

/* 0..6 options drawn from the pool, mostly valid: 85% of the draws pull
 * the rules across options right (on the options drawn; the base they
 * merge into may still break them), the rest are left to chance.
 */
static void opf_rand_opts(struct opf_opts *out)
{
	unsigned int idx[OPF_O_N], k = fuzz_below(7), i, j, t;
	struct opf_draw d = { .n = 0 };
	char *argv[2 * OPF_O_N];
	const char *v, *m, *sh;

	for (i = 0; i < OPF_O_N; i++) {
		idx[i] = i;
		d.pos[i] = -1;
	}
	for (i = 0; i < k; i++) {	/* a sample of k names, in draw order */
		j = i + fuzz_below(OPF_O_N - i);
		t = idx[i];
		idx[i] = idx[j];
		idx[j] = t;
	}
	for (i = 0; i < k; i++)
		opf_draw_set(&d, idx[i], fuzz_below(opf_pool[idx[i]].n));
	if (fuzz_below(100) < 85) {
		v = opf_draw_get(&d, OPF_O_UNTAGGED_SHARE);
		if (v && opf_num(v))
			opf_draw_set(&d, OPF_O_UNTAGGED, 1);		/* last */
		v = opf_draw_get(&d, OPF_O_LEVELS);
		m = opf_draw_get(&d, OPF_O_MASK);
		if (v && m && opf_num(v) > opf_num(m))
			opf_draw_set(&d, OPF_O_MASK, 4);		/* 0xffffffff */
		/* tag dscp: shift and mask keep one of the six DSCP bits */
		v = opf_draw_get(&d, OPF_O_TAG);
		sh = opf_draw_get(&d, OPF_O_SHIFT);
		m = opf_draw_get(&d, OPF_O_MASK);
		if (v && !strcmp(v, "dscp") && sh &&
		    !((0x3ful >> opf_num(sh)) & (m ? opf_num(m) : TC_MERCURY_DEF_MASK)))
			opf_draw_set(&d, OPF_O_SHIFT, 0);
	}
	for (i = 0; i < d.n; i++) {
		argv[2 * i] = (char *)opf_pool[d.key[i]].name;
		argv[2 * i + 1] = (char *)opf_pool[d.key[i]].vals[d.val[i]];
	}
	opf_opts_parse(out, 2 * d.n, argv);
}

/* Does the kernel take @o on a mercury configured as @base? Its rules
 * across options are mercuryctl's mctl_check_opts() (nlfuzz's too).
 */
static enum opf_want opf_valid(const struct mercury_qdisc_opts *base,
			       struct opf_opts *o)
{
	struct mercury_qdisc_opts c = *base;

	mctl_opts_merge(&c, &o->o);
	return mctl_check_opts(&c, o->why, sizeof(o->why)) ? OPF_FAIL : OPF_OK;
}

/* A new mercury at @in (@op add, or replace over another kind: the init
 * path) with random options on the defaults; when those must fail, one
 * without options, so that the traffic goes through mercury again.
 */
static void opf_create(enum mctl_op op, const struct opf_inst *in)
{
	struct mercury_qdisc_opts defaults;
	struct opf_opts o;
	enum opf_want want;

	opf_rand_opts(&o);
	mctl_opts_defaults(&defaults);
	want = opf_valid(&defaults, &o);
	opf_mercury(op, in, &o, want);
	if (want == OPF_FAIL)
		opf_mercury(op, in, &opf_none, OPF_OK);
}

static void opf_add(const struct opf_inst *in)
{
	opf_create(MCTL_OP_ADD, in);
}

/* ---- processes ---------------------------------------------------------------- */

/* Run @argv in network namespace @ns (fork, setns, execv): stdout and
 * stderr to *@out, a pipe, when @out, else to /dev/null.
 */
static pid_t opf_spawn(const char *ns, char *const argv[], int *out)
{
	int p[2] = { -1, -1 }, err, olderr;
	pid_t pid;

	if (out && pipe2(p, O_CLOEXEC))
		opf_fail("pipe: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		opf_fail("fork: %s", strerror(errno));
	if (!pid) {
		int null = open("/dev/null", O_RDWR);

		olderr = fcntl(2, F_DUPFD_CLOEXEC, 3);
		err = mctl_nl_setns(ns);
		if (err) {
			dprintf(olderr, "opfuzz: cannot enter netns %s: %s\n",
				ns, strerror(-err));
			_exit(126);
		}
		dup2(out ? p[1] : null, 1);
		dup2(out ? p[1] : null, 2);
		execv(argv[0], argv);
		dprintf(olderr, "opfuzz: cannot run %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	if (out) {
		close(p[1]);
		*out = p[0];
	}
	return pid;
}

/* The exit status of @pid (-1: killed by a signal). */
static int opf_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			opf_fail("waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What is left to read on @fd, up to @len - 1 bytes (the rest is read
 * and dropped, so that the writer never blocks); closes @fd.
 */
static void opf_read_all(int fd, char *buf, size_t len)
{
	size_t at = 0;
	char drop[512];
	ssize_t r;

	for (;;) {
		if (at + 1 < len)
			r = read(fd, buf + at, len - 1 - at);
		else
			r = read(fd, drop, sizeof(drop));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (at + 1 < len)
			at += r;
	}
	buf[at] = '\0';
	close(fd);
}

/* One line from @fd, read a byte at a time (nothing after it is taken);
 * false at the end of the output.
 */
static bool opf_read_line(int fd, char *buf, size_t len)
{
	size_t at = 0;
	ssize_t r;
	char c;

	while ((r = read(fd, &c, 1)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return false;
		if (c == '\n')
			break;
		if (at + 1 < len)
			buf[at++] = c;
	}
	buf[at] = '\0';
	return r != 0;
}

/* opfuzz.py's draws, in its order: tags, TCP flows, pacing, UDP flows,
 * datagram rate and size.
 */
static void opf_start_traffic(void)
{
	static const uint32_t tags[] = { 0, 1, 2, 3, 5, 8, 63, 64, 65, 1000,
					 1024, 1025, 65535, 65536, 70000 };
	static const char *const bytes[] = { "20000", "100000" };
	static const char *const pps[] = { "100", "300", "1000" };
	static const char *const size[] = { "64", "600", "1400" };
	unsigned int idx[OPF_N(tags)], k = opf_int(1, 6), i, j, t;
	char g[128], tcp[8], udp[8];
	const char *b, *r, *l;
	size_t at = 0;

	for (i = 0; i < OPF_N(tags); i++)
		idx[i] = i;
	for (i = 0; i < k; i++) {		/* a sample of k tags */
		j = i + fuzz_below(OPF_N(tags) - i);
		t = idx[i];
		idx[i] = idx[j];
		idx[j] = t;
		at += snprintf(g + at, sizeof(g) - at, "%s%" PRIu32,
			       i ? "," : "", tags[idx[i]]);
	}
	snprintf(tcp, sizeof(tcp), "%u", opf_int(1, 4));
	b = OPF_PICK(bytes);
	snprintf(udp, sizeof(udp), "%u", opf_int(1, 4));
	r = OPF_PICK(pps);
	l = OPF_PICK(size);
	{
		char *argv[] = {
			(char *)opf_a.blast, "send", "-a", (char *)opf_a.dst,
			"-p", OPF_PORT, "-T", tcp, "-b", (char *)b, "-U", udp,
			"-g", g, "-r", (char *)r, "-l", (char *)l, NULL,
		};

		opf_send_pid = opf_spawn(opf_a.ns_s, argv, NULL);
	}
	opf_logf("traffic in %s: mercury-blast send -a %s -p " OPF_PORT
		 " -T %s -b %s -U %s -g %s -r %s -l %s", opf_a.ns_s, opf_a.dst,
		 tcp, b, udp, g, r, l);
}

static void opf_stop_traffic(void)
{
	if (opf_send_pid)
		opf_logf("traffic stopped");
	opf_reap(&opf_send_pid);
}

/* ---- links, neighbours, the module ------------------------------------------ */

static __attribute__((format(printf, 1, 2), noreturn))
void opf_usage(const char *fmt, ...);

static struct nl_addr *opf_addr(const char *s, int family, const char *opt)
{
	struct nl_addr *a;

	if (nl_addr_parse(s, family, &a) < 0)
		opf_usage("%s: '%s' is not %s", opt, s,
			  family == AF_INET ? "an IPv4 address" : "a MAC address");
	return a;
}

/* Permanent neighbours both ways: no ARP request, and no ARP reply (an
 * untagged packet at any moment) through the queue. A link down flushes
 * even permanent entries.
 */
static void opf_pin_one(struct mctl_nl *nl, const char *ns, int ifindex,
			const char *dev, const char *dst, const char *lladdr)
{
	struct nl_addr *a = opf_addr(dst, AF_INET, "address");
	struct nl_addr *l = opf_addr(lladdr, AF_LLC, "lladdr");
	struct rtnl_neigh *n = rtnl_neigh_alloc();
	struct nl_msg *msg = NULL;
	char what[200];
	int err;

	if (!n)
		opf_fail("out of memory");
	rtnl_neigh_set_ifindex(n, ifindex);
	rtnl_neigh_set_family(n, AF_INET);
	err = rtnl_neigh_set_dst(n, a);
	rtnl_neigh_set_lladdr(n, l);
	rtnl_neigh_set_state(n, NUD_PERMANENT);
	if (!err)
		err = rtnl_neigh_build_add_request(n, NLM_F_CREATE | NLM_F_REPLACE,
						   &msg);
	rtnl_neigh_put(n);
	nl_addr_put(a);
	nl_addr_put(l);
	snprintf(what, sizeof(what), "ip -n %s neigh replace %s lladdr %s dev %s nud permanent",
		 ns, dst, lladdr, dev);
	opf_send(nl, err, msg, OPF_OK, what);
}

static void opf_pin_neighbours(void)
{
	opf_pin_one(opf_nl, opf_a.ns_s, opf_ifindex, OPF_DEV, opf_a.dst,
		    opf_a.lladdr);
	opf_pin_one(opf_nl_r, opf_a.ns_r, opf_ifindex_r, OPF_DEV_R, opf_a.src,
		    opf_a.lladdr_s);
}

static void opf_link(bool up)
{
	struct rtnl_link *orig = rtnl_link_alloc(), *ch = rtnl_link_alloc();
	struct nl_msg *msg = NULL;
	char what[128];
	int err;

	if (!orig || !ch)
		opf_fail("out of memory");
	rtnl_link_set_ifindex(orig, opf_ifindex);
	if (up)
		rtnl_link_set_flags(ch, IFF_UP);
	else
		rtnl_link_unset_flags(ch, IFF_UP);
	err = rtnl_link_build_change_request(orig, ch, 0, &msg);
	rtnl_link_put(orig);
	rtnl_link_put(ch);
	snprintf(what, sizeof(what), "ip -n %s link set " OPF_DEV " %s",
		 opf_a.ns_s, up ? "up" : "down");
	opf_send(opf_nl, err, msg, OPF_OK, what);
}

static void opf_rmmod(void)
{
	if (syscall(SYS_delete_module, "sch_mercury", O_NONBLOCK)) {
		int e = errno;

		opf_logf("rmmod sch_mercury -> %s", strerror(e));
		opf_fail("rmmod sch_mercury with no mercury qdisc left failed: %s",
			 strerror(e));
	}
	opf_logf("rmmod sch_mercury -> 0");
}

static void opf_insmod(void)
{
	int fd = open(opf_a.ko, O_RDONLY | O_CLOEXEC), e;

	if (fd < 0)
		opf_fail("insmod: cannot open %s: %s", opf_a.ko, strerror(errno));
	if (syscall(SYS_finit_module, fd, "", 0)) {
		e = errno;
		close(fd);
		opf_logf("insmod %s -> %s", opf_a.ko, strerror(e));
		opf_fail("insmod %s failed: %s", opf_a.ko, strerror(e));
	}
	close(fd);
	opf_logf("insmod %s -> 0", opf_a.ko);
}

/* ---- placements and emptiness ------------------------------------------------ */

static void opf_setup(enum opf_placement p)
{
	static const uint32_t rates[] = { 625000, 6250000 };	/* 5, 50 mbit */
	char what[160];
	unsigned int i;
	uint32_t rate;

	opf_placement = p;
	opf_qdisc_del(TC_H_ROOT, 0, OPF_ANY);
	opf_ninst = 1;
	opf_inst[0] = (struct opf_inst){ OPF_PARENT | 1, 0x100000 };
	if (p == OPF_ROOT) {
		opf_inst[0].parent = TC_H_ROOT;
	} else if (p == OPF_TBF) {
		struct rtnl_qdisc *q = opf_qdisc(TC_H_ROOT, OPF_PARENT, "tbf");

		rate = OPF_PICK(rates);
		rtnl_qdisc_tbf_set_rate(q, rate, 20 * 1024, 0);
		rtnl_qdisc_tbf_set_limit(q, 2000000);
		snprintf(what, sizeof(what), "qdisc add dev " OPF_DEV
			 " root handle 1: tbf rate %umbit burst 20k limit 2000000",
			 rate / 125000);
		opf_qdisc_new(q, NLM_F_CREATE | NLM_F_EXCL, OPF_OK, what);
	} else if (p == OPF_HTB) {
		struct rtnl_qdisc *q = opf_qdisc(TC_H_ROOT, OPF_PARENT, "htb");
		struct rtnl_class *cl = rtnl_class_alloc();
		struct nl_msg *msg = NULL;
		int err;

		rate = OPF_PICK(rates);
		if (!cl || rtnl_htb_set_defcls(q, 1) < 0)
			opf_fail("libnl: cannot make htb");
		opf_qdisc_new(q, NLM_F_CREATE | NLM_F_EXCL, OPF_OK,
			      "qdisc add dev " OPF_DEV " root handle 1: htb default 1");
		rtnl_tc_set_ifindex(TC_CAST(cl), opf_ifindex);
		rtnl_tc_set_parent(TC_CAST(cl), OPF_PARENT);
		rtnl_tc_set_handle(TC_CAST(cl), OPF_PARENT | 1);
		/* cbuffer: tc's default cburst, ceil / psched's 1e9 Hz +
		 * an mtu of 1600 (libnl would take the device's MTU)
		 */
		if (rtnl_tc_set_kind(TC_CAST(cl), "htb") < 0 ||
		    rtnl_htb_set_rate(cl, rate) < 0 ||
		    rtnl_htb_set_rbuffer(cl, 20 * 1024) < 0 ||
		    rtnl_htb_set_cbuffer(cl, 1600) < 0)
			opf_fail("libnl: cannot make the htb class");
		err = rtnl_class_build_add_request(cl, NLM_F_CREATE | NLM_F_EXCL,
						   &msg);
		rtnl_class_put(cl);
		snprintf(what, sizeof(what), "class add dev " OPF_DEV
			 " parent 1: classid 1:1 htb rate %umbit burst 20k",
			 rate / 125000);
		opf_send(opf_nl, err, msg, OPF_OK, what);
	} else {
		opf_qdisc_new(opf_qdisc(TC_H_ROOT, OPF_PARENT, "mq"),
			      NLM_F_CREATE | NLM_F_EXCL, OPF_OK,
			      "qdisc add dev " OPF_DEV " root handle 1: mq");
		opf_ninst = OPF_MAX_INST;
		for (i = 0; i < OPF_MAX_INST; i++)
			opf_inst[i] = (struct opf_inst){ OPF_PARENT | (i + 1),
							 (0x11 + i) << 16 };
	}
	for (i = 0; i < opf_ninst; i++)
		opf_add(&opf_inst[i]);
}

/*
 * After mercury is deleted, its parent must not count a packet that no
 * child holds. Under traffic a reading proves nothing: htb grafts a
 * default pfifo into the class and keeps queueing (tbf grafts noop). So
 * the sender is stopped, and the parent must drain to empty while the
 * packets its sockets already hold go out.
 */
static void opf_parent_empty(const char *what)
{
	uint64_t qlen = 0, backlog = 0;
	double deadline;
	char kind[32];

	if (opf_placement != OPF_TBF && opf_placement != OPF_HTB)
		return;
	if (opf_send_pid)
		kill(opf_send_pid, SIGSTOP);
	deadline = opf_now() + 60;
	for (;;) {
		if (!opf_tc_stats(OPF_PARENT, kind, sizeof(kind), &qlen, &backlog))
			opf_fail("%s: the %s parent 1: is gone", what,
				 opf_placement_names[opf_placement]);
		if (!qlen && !backlog)
			break;
		if (opf_now() > deadline)
			opf_fail("%s: %s parent holds qlen %" PRIu64 " backlog %"
				 PRIu64 " 60 s after the sender stopped", what,
				 opf_placement_names[opf_placement], qlen, backlog);
		opf_sleep_ms(200);
	}
	if (opf_send_pid)
		kill(opf_send_pid, SIGCONT);
}

/*
 * The parent holds nothing once mercury was deleted. tbf puts noop in its
 * place, but htb a default pfifo, which the traffic still flowing fills
 * at once: what htb counts then is that pfifo's. So under htb a pfifo
 * that admits nothing replaces it first (the purge reports exactly what
 * the default pfifo held), and is deleted again after the check (back to
 * htb's default child, which add replaces). No random draw: a seed
 * replays the same operations.
 */
static void opf_deleted(const struct opf_inst *in, unsigned int n,
			const char *what)
{
	unsigned int i;

	if (opf_placement == OPF_HTB)
		for (i = 0; i < n; i++)
			opf_pfifo(in[i].parent, (0x1f0 + i) << 16, 0);
	opf_parent_empty(what);
	if (opf_placement == OPF_HTB)
		for (i = 0; i < n; i++)
			opf_qdisc_del(in[i].parent, (0x1f0 + i) << 16, OPF_OK);
}

static void opf_delete_all(void)
{
	unsigned int i;

	if (opf_placement == OPF_ROOT) {
		opf_qdisc_del(TC_H_ROOT, 0, OPF_OK);
		return;
	}
	for (i = 0; i < opf_ninst; i++)
		opf_mercury_del(&opf_inst[i]);
	opf_deleted(opf_inst, opf_ninst, "after deleting mercury");
}

/* ---- operations ---------------------------------------------------------------- */

static const struct opf_inst *opf_pick_inst(void)
{
	return &opf_inst[fuzz_below(opf_ninst)];
}

static const unsigned int opf_pauses_ms[] = { 0, 50, 200 };

static void opf_op_change(enum mctl_op verb)
{
	const struct opf_inst *in = opf_pick_inst();
	struct mercury_qdisc_opts cur;
	struct opf_opts o;

	opf_rand_opts(&o);
	opf_current(in->handle, &cur);
	opf_mercury(verb, in, &o, opf_valid(&cur, &o));
}

static void opf_op_graft(void)
{
	const struct opf_inst *in = opf_pick_inst();

	opf_pfifo(in->parent, in->handle + (0x100 << 16), 100);
	opf_create(MCTL_OP_REPLACE, in);
}

static void opf_op_delete_add(void)
{
	const struct opf_inst *in = opf_pick_inst();
	char what[64], h[16];

	opf_mercury_del(in);
	mctl_sprint_handle(h, sizeof(h), in->handle);
	snprintf(what, sizeof(what), "after deleting mercury %s", h);
	opf_deleted(in, 1, what);
	opf_sleep_ms(OPF_PICK(opf_pauses_ms));
	opf_add(in);
}

static void opf_op_link(void)
{
	static const unsigned int down_ms[] = { 0, 100, 300 };

	opf_link(false);
	opf_sleep_ms(OPF_PICK(down_ms));
	opf_link(true);
	opf_pin_neighbours();
}

static void opf_op_rmmod(void)
{
	unsigned int i;

	opf_delete_all();
	opf_rmmod();
	opf_insmod();
	for (i = 0; i < opf_ninst; i++)
		opf_add(&opf_inst[i]);
}

/* A counter the kernel keeps unsigned, read back as a huge number, was
 * negative (a u32 qlen or backlog, a u64 packet or drop count).
 */
#define OPF_NEG32(v)	((v) > INT32_MAX)
#define OPF_NEG64(v)	((v) > INT64_MAX)

static void opf_op_class_dump(void)
{
	const struct mctl_level *l;
	struct opf_dump d;
	char h[16];
	size_t i, k;

	opf_dump(&d);
	for (i = 0; i < d.n; i++) {
		for (k = 0; k < d.q[i].nlevels; k++) {
			l = &d.q[i].levels[k];
			if (OPF_NEG64(l->c.packets) || OPF_NEG64(l->c.drops) ||
			    OPF_NEG32(l->c.qlen) || OPF_NEG32(l->c.backlog)) {
				mctl_sprint_handle(h, sizeof(h),
						   d.q[i].handle | l->minor);
				opf_fail("class %s: negative counter", h);
			}
		}
	}
	opf_logf("class show dev " OPF_DEV " -> 0 (%zu mercury)", d.n);
	opf_dump_free(&d);
}

static void opf_op_qdisc_dump(void)
{
	const struct mctl_qdisc *q;
	struct opf_dump d;
	unsigned int i;
	char h[16];

	opf_dump(&d);
	for (i = 0; i < opf_ninst; i++) {
		q = opf_need(&d, opf_inst[i].handle);
		if (OPF_NEG32(q->c.qlen) || OPF_NEG32(q->c.backlog)) {
			mctl_sprint_handle(h, sizeof(h), q->handle);
			opf_fail("%s: negative qlen/backlog", h);
		}
	}
	opf_logf("qdisc show dev " OPF_DEV " -> 0");
	opf_dump_free(&d);
}

/* ---- the accounting check ------------------------------------------------------ */

/* Wait until no mercury holds a packet; the last dump into @keep. */
static void opf_wait_drained(struct opf_dump *keep)
{
	double deadline = opf_now() + 60;
	const struct mctl_qdisc *q;
	struct opf_dump d;
	unsigned int i;
	bool empty;

	for (;;) {
		opf_dump(&d);
		empty = true;
		for (i = 0; i < opf_ninst; i++) {
			q = opf_find(&d, opf_inst[i].handle);
			empty &= !q || !q->c.qlen;
		}
		if (empty) {
			if (keep)
				*keep = d;
			else
				opf_dump_free(&d);
			return;
		}
		opf_dump_free(&d);
		if (opf_now() > deadline)
			opf_fail("queues did not drain in 60s");
		opf_sleep_ms(200);
	}
}

struct opf_tag_sum {
	uint32_t	tag;
	int64_t		packets;
};

/* Add @sign times each level's packets of @d to its tag in @s (room for
 * @max tags), and its drops to *@drops.
 */
static void opf_sum_levels(const struct opf_dump *d, int sign,
			   struct opf_tag_sum *s, size_t *n, size_t max,
			   int64_t *drops)
{
	const struct mctl_level *l;
	size_t i, k, j;

	for (i = 0; i < d->n; i++) {
		for (k = 0; k < d->q[i].nlevels; k++) {
			l = &d->q[i].levels[k];
			for (j = 0; j < *n && s[j].tag != l->tag; j++)
				;
			if (j == max)
				opf_fail("more than %zu tags in the class dumps", max);
			if (j == *n)
				s[(*n)++] = (struct opf_tag_sum){ l->tag, 0 };
			s[j].packets += sign * (int64_t)l->c.packets;
			*drops += sign * (int64_t)l->c.drops;
		}
	}
}

/* The sink's count, after the probe sender sent --count datagrams. */
static uint64_t opf_probe(void)
{
	char count[24], sink_out[4096], send_out[4096], line[256];
	const char *at;
	int fd, sink_fd, rc;
	char *sink[] = {
		(char *)opf_a.blast, "sink", "-p", OPF_PROBE_PORT, "-c", count,
		"-t", "30", NULL,
	};
	char *send[] = {
		(char *)opf_a.blast, "send", "-a", (char *)opf_a.dst, "-p",
		OPF_PROBE_PORT, "-U", "3", "-g", OPF_PROBE_TAGS, "-c", count,
		"-r", "0", "-l", "200", NULL,
	};
	pid_t pid;

	snprintf(count, sizeof(count), "%" PRIu64, opf_a.count);
	opf_sink_pid = opf_spawn(opf_a.ns_r, sink, &sink_fd);
	if (!opf_read_line(sink_fd, line, sizeof(line)))	/* "# sink ready" */
		opf_fail("the probe sink in %s did not start", opf_a.ns_r);
	pid = opf_spawn(opf_a.ns_s, send, &fd);
	opf_read_all(fd, send_out, sizeof(send_out));
	rc = opf_wait(pid);
	opf_logf("probe: mercury-blast send -a %s -p " OPF_PROBE_PORT " -U 3 -g "
		 OPF_PROBE_TAGS " -c %s -r 0 -l 200 -> %d", opf_a.dst, count, rc);
	if (rc)
		opf_fail("the probe sender exited %d: %s", rc, send_out);
	opf_read_all(sink_fd, sink_out, sizeof(sink_out));
	rc = opf_wait(opf_sink_pid);
	opf_sink_pid = 0;
	at = strstr(sink_out, "udp_packets ");
	if (rc || !at)
		opf_fail("the probe sink exited %d without its count: %s", rc,
			 sink_out);
	return strtoull(at + strlen("udp_packets "), NULL, 10);
}

static void opf_final_check(void)
{
	char levels[16], h[16], got_s[512] = "";
	struct opf_tag_sum sums[2048];
	const struct mctl_qdisc *a, *b;
	struct mercury_qdisc_opts cur;
	int64_t sent = 0, dropped = 0, queued = 0, cl_drops = 0;
	struct opf_dump q0, q1;
	uint64_t n = opf_a.count, got;
	size_t nsums = 0, i, at, moved = 0;
	struct opf_opts o;
	bool same = true;
	char *argv[] = {
		"levels", levels, "mask", "0xffff", "shift", "0", "tag", "mark",
		"untagged", "first", "untagged_share", "0", "limit", "10000",
		"memory_limit", "33554432", "bypass", "off", "flows", "1024",
		"quantum", "3028", "flow_order", "on", "flow_limit", "0",
	};

	opf_stop_traffic();
	opf_wait_drained(NULL);
	opf_sleep_ms(500);		/* late TCP resets and their answers */
	opf_wait_drained(NULL);
	for (i = 0; i < opf_ninst; i++) {
		opf_current(opf_inst[i].handle, &cur);
		snprintf(levels, sizeof(levels), "%u", cur.levels != 100 ? 100 : 101);
		opf_opts_parse(&o, OPF_N(argv), argv);
		opf_mercury(MCTL_OP_CHANGE, &opf_inst[i], &o, OPF_OK);
	}
	opf_dump(&q0);
	got = opf_probe();
	opf_wait_drained(&q1);
	for (i = 0; i < opf_ninst; i++) {
		a = opf_need(&q0, opf_inst[i].handle);
		b = opf_need(&q1, opf_inst[i].handle);
		sent += (int64_t)(b->c.packets - a->c.packets);
		dropped += (int64_t)(b->c.drops - a->c.drops);
		queued += (int64_t)b->c.qlen;
	}
	if (sent + dropped + queued != (int64_t)n || dropped)
		opf_fail("accounting: sent %" PRId64 " + dropped %" PRId64
			 " + queued %" PRId64 " != enqueued %" PRIu64
			 " (no drop expected)", sent, dropped, queued, n);
	if ((int64_t)got != sent)
		opf_fail("receiver got %" PRIu64 ", the qdiscs sent %" PRId64,
			 got, sent);
	/* deltas: a level may have counted a stray packet between the
	 * change and q0 (the qdisc's delta does not see it either). Want:
	 * exactly the three probe tags moved, by --count / 3 each.
	 */
	opf_sum_levels(&q0, -1, sums, &nsums, OPF_N(sums), &cl_drops);
	opf_sum_levels(&q1, 1, sums, &nsums, OPF_N(sums), &cl_drops);
	for (i = 0, at = 0; i < nsums; i++) {
		if (!sums[i].packets)
			continue;
		moved++;
		if (sums[i].tag > 2 || sums[i].packets != (int64_t)(n / 3))
			same = false;
		if (at < sizeof(got_s))
			at += snprintf(got_s + at, sizeof(got_s) - at,
				       "%stag %" PRIu32 ": %" PRId64,
				       at ? ", " : "", sums[i].tag,
				       sums[i].packets);
	}
	if (!same || moved != 3 || cl_drops != dropped)
		opf_fail("levels do not sum to the qdisc: {%s} (drops %" PRId64
			 "), want {tag 1: %" PRIu64 ", tag 2: %" PRIu64 ", tag 0: %"
			 PRIu64 "}", got_s, cl_drops, n / 3, n / 3, n / 3);
	for (i = 0; i < opf_ninst; i++) {
		b = opf_need(&q1, opf_inst[i].handle);
		if (b->c.qlen || b->c.backlog ||
		    (b->has_xstats && (b->x.memory_usage || b->x.flows))) {
			mctl_sprint_handle(h, sizeof(h), b->handle);
			opf_fail("%s not empty: qlen %" PRIu64 " backlog %" PRIu64
				 " memory %" PRIu32 " flows %" PRIu32, h,
				 b->c.qlen, b->c.backlog,
				 b->has_xstats ? b->x.memory_usage : 0,
				 b->has_xstats ? b->x.flows : 0);
		}
	}
	opf_dump_free(&q0);
	opf_dump_free(&q1);
	opf_parent_empty("after the probe");
}

/* ---- the skb-leak check ------------------------------------------------------------ */

/*
 * Active objects of skbuff_head_cache + skbuff_fclone_cache, after asking
 * SLUB to flush its per-CPU slabs (whose free objects count as active).
 */
static uint64_t opf_skb_objects(void)
{
	static const char *const caches[] = {
		"skbuff_head_cache", "skbuff_fclone_cache",
	};
	unsigned long long active;
	char path[128], name[64];
	uint64_t total = 0;
	bool found = false;
	char *line = NULL;
	size_t len = 0, i;
	FILE *f;
	int fd;

	for (i = 0; i < OPF_N(caches); i++) {
		snprintf(path, sizeof(path), "/sys/kernel/slab/%s/shrink",
			 caches[i]);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (write(fd, "1", 1) < 0) {
				/* best effort: unflushed, the count is coarser */
			}
			close(fd);
		}
	}
	f = fopen("/proc/slabinfo", "re");
	if (!f)
		opf_fail("cannot read /proc/slabinfo: %s", strerror(errno));
	while (getline(&line, &len, f) > 0) {
		if (sscanf(line, "%63s %llu", name, &active) != 2)
			continue;
		for (i = 0; i < OPF_N(caches); i++) {
			if (!strcmp(name, caches[i])) {
				total += active;
				found |= i == 0;
			}
		}
	}
	free(line);
	fclose(f);
	if (!found)
		opf_fail("no skbuff_head_cache in /proc/slabinfo");
	return total;
}

/* ---- one sequence ---------------------------------------------------------------------- */

static enum opf_op opf_pick_op(void)
{
	unsigned int r = fuzz_below(100), op;

	for (op = 0; op < OPF_NOPS - 1 && r >= opf_op_weights[op]; op++)
		r -= opf_op_weights[op];
	return op;
}

static void opf_sequence(uint64_t seed, unsigned long *counts)
{
	unsigned int n, i;
	enum opf_placement p;
	enum opf_op op;

	fuzz_srand(seed);
	opf_nlog = 0;
	p = fuzz_below(OPF_NPLACEMENTS);
	counts[OPF_NOPS + p]++;
	opf_setup(p);
	opf_start_traffic();
	n = opf_int(4, 10);
	for (i = 0; i < n; i++) {
		op = opf_pick_op();
		counts[op]++;
		switch (op) {
		case OPF_CHANGE:	opf_op_change(MCTL_OP_CHANGE); break;
		case OPF_REPLACE:	opf_op_change(MCTL_OP_REPLACE); break;
		case OPF_GRAFT:		opf_op_graft(); break;
		case OPF_DELETE_ADD:	opf_op_delete_add(); break;
		case OPF_CLASS_DUMP:	opf_op_class_dump(); break;
		case OPF_QDISC_DUMP:	opf_op_qdisc_dump(); break;
		case OPF_LINK:		opf_op_link(); break;
		default:		opf_op_rmmod(); break;
		}
		opf_sleep_ms(OPF_PICK(opf_pauses_ms));
	}
	opf_final_check();
	opf_qdisc_del(TC_H_ROOT, 0, OPF_OK);
}

/* ---- main ------------------------------------------------------------------------------ */

/* Bad usage: the usage, then what was wrong; exit 2. */
static __attribute__((format(printf, 1, 2), noreturn))
void opf_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "usage: mercury-opfuzz --ns-s NS --ns-r NS --dst ADDR --src ADDR\n"
		"         --lladdr MAC --lladdr-s MAC --ko SCH_MERCURY_KO --blast MERCURY_BLAST\n"
		"         --seed N [--seqs N] [--count N] [--skb-slack N]\n");
	va_start(ap, fmt);
	fuzz_vexit(2, fmt, ap);
}

static void opf_parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ns-s", required_argument, NULL, 'S' },
		{ "ns-r", required_argument, NULL, 'R' },
		{ "dst", required_argument, NULL, 'd' },
		{ "src", required_argument, NULL, 's' },
		{ "lladdr", required_argument, NULL, 'l' },
		{ "lladdr-s", required_argument, NULL, 'L' },
		{ "ko", required_argument, NULL, 'k' },
		{ "blast", required_argument, NULL, 'b' },
		{ "seqs", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 'e' },
		{ "count", required_argument, NULL, 'c' },
		{ "skb-slack", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	const struct {
		const char	*name;
		const char	**val;
	} need[] = {
		{ "--ns-s", &opf_a.ns_s }, { "--ns-r", &opf_a.ns_r },
		{ "--dst", &opf_a.dst }, { "--src", &opf_a.src },
		{ "--lladdr", &opf_a.lladdr }, { "--lladdr-s", &opf_a.lladdr_s },
		{ "--ko", &opf_a.ko }, { "--blast", &opf_a.blast },
	};
	uint64_t *num;
	size_t i;
	int c, li;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", longopts, &li)) != -1) {
		switch (c) {
		case 'S': opf_a.ns_s = optarg; continue;
		case 'R': opf_a.ns_r = optarg; continue;
		case 'd': opf_a.dst = optarg; continue;
		case 's': opf_a.src = optarg; continue;
		case 'l': opf_a.lladdr = optarg; continue;
		case 'L': opf_a.lladdr_s = optarg; continue;
		case 'k': opf_a.ko = optarg; continue;
		case 'b': opf_a.blast = optarg; continue;
		case 'n': num = &opf_a.seqs; break;
		case 'e': num = &opf_a.seed; opf_a.have_seed = true; break;
		case 'c': num = &opf_a.count; break;
		case 'K': num = &opf_a.skb_slack; break;
		case ':':
			opf_usage("%s needs a value", argv[optind - 1]);
		default:
			opf_usage("unknown option %s", argv[optind - 1]);
		}
		if (!fuzz_parse_uint(optarg, c == 'e' ? UINT64_MAX : UINT32_MAX,
				     num))
			opf_usage("--%s: '%s' is not a number from 0 to %llu",
				  longopts[li].name, optarg,
				  c == 'e' ? (unsigned long long)UINT64_MAX :
				  (unsigned long long)UINT32_MAX);
	}
	if (optind < argc)
		opf_usage("unexpected argument '%s'", argv[optind]);
	for (i = 0; i < OPF_N(need); i++)
		if (!*need[i].val)
			opf_usage("%s is required", need[i].name);
	if (!opf_a.have_seed)
		opf_usage("--seed is required");
	if (!opf_a.count || opf_a.count % 3)
		opf_usage("--count: %" PRIu64 " datagrams cannot be split evenly over tags 1, 2 and 0",
			  opf_a.count);
	nl_addr_put(opf_addr(opf_a.dst, AF_INET, "--dst"));
	nl_addr_put(opf_addr(opf_a.src, AF_INET, "--src"));
	nl_addr_put(opf_addr(opf_a.lladdr, AF_LLC, "--lladdr"));
	nl_addr_put(opf_addr(opf_a.lladdr_s, AF_LLC, "--lladdr-s"));
	if (access(opf_a.ko, R_OK))
		opf_usage("--ko: cannot read %s: %s", opf_a.ko, strerror(errno));
	if (access(opf_a.blast, X_OK))
		opf_usage("--blast: cannot run %s: %s", opf_a.blast, strerror(errno));
}

/* A socket in network namespace @ns (which this process enters), and
 * the ifindex of @dev there.
 */
static int opf_open(struct mctl_nl **nl, const char *ns, const char *dev)
{
	int err = mctl_nl_open(nl, ns), ifindex;

	if (err)
		opf_fail("netlink in network namespace %s: %s", ns,
			 strerror(-err));
	ifindex = mctl_nl_ifindex(*nl, dev);
	if (ifindex < 0)
		opf_fail("no %s in network namespace %s", dev, ns);
	return ifindex;
}

struct opf_count {
	const char	*name;
	unsigned long	n;
};

static int opf_cmp_count(const void *a, const void *b)
{
	return strcmp(((const struct opf_count *)a)->name,
		      ((const struct opf_count *)b)->name);
}

int main(int argc, char **argv)
{
	unsigned long counts[OPF_NOPS + OPF_NPLACEMENTS] = { 0 };
	struct opf_count c[OPF_NOPS + OPF_NPLACEMENTS];
	uint64_t base, now = 0, i;
	size_t k, at = 0;
	char summary[512];
	double t0;

	opf_parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	/* this process stays in --ns-s */
	opf_ifindex_r = opf_open(&opf_nl_r, opf_a.ns_r, OPF_DEV_R);
	opf_ifindex = opf_open(&opf_nl, opf_a.ns_s, OPF_DEV);
	base = opf_skb_objects();
	opf_pin_neighbours();
	printf("# opfuzz: seed %" PRIu64 ", %" PRIu64 " sequences, skb objects at start %" PRIu64 "\n",
	       opf_a.seed, opf_a.seqs, base);
	t0 = opf_now();
	for (i = 0; i < opf_a.seqs; i++) {
		opf_seq = i;
		opf_seq_seed = opf_a.seed + i;
		opf_sequence(opf_seq_seed, counts);
		now = opf_skb_objects();
		if (now >= base + opf_a.skb_slack)
			opf_fail("skb objects %" PRIu64 " at the end, %" PRIu64
				 " at the start", now, base);
		if (opf_a.seqs < 10 || (i + 1) % (opf_a.seqs / 10) == 0)
			printf("# opfuzz: %" PRIu64 " sequences in %.0fs, skb objects %"
			       PRIu64 " (start %" PRIu64 ")\n", i + 1,
			       opf_now() - t0, now, base);
	}
	/* placements and operations, by name */
	for (k = 0; k < OPF_N(c); k++)
		c[k] = (struct opf_count){
			k < OPF_NOPS ? opf_op_names[k] :
				       opf_placement_names[k - OPF_NOPS],
			counts[k] };
	qsort(c, OPF_N(c), sizeof(c[0]), opf_cmp_count);
	summary[0] = '\0';
	for (k = 0; k < OPF_N(c); k++)
		if (c[k].n && at < sizeof(summary))
			at += snprintf(summary + at, sizeof(summary) - at,
				       "%s%s %lu", at ? " " : "", c[k].name,
				       c[k].n);
	printf("# opfuzz: %" PRIu64 " sequences clean in %.0fs: %s\n", opf_a.seqs,
	       opf_now() - t0, summary);
	mctl_nl_close(opf_nl);
	mctl_nl_close(opf_nl_r);
	return 0;
}
