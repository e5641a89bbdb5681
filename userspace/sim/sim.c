// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The discrete-event core.  Per iteration one representative worker is
 * simulated: by symmetry (identical workers, every tensor sharded evenly
 * over all servers) each worker's push path and pull path behave like one
 * link of rate bandwidth * min(1, servers/workers): the tools' network
 * rule (one full-duplex NIC per host, mt_net_spread_Bps() in
 * userspace/common/net.c, the rule mercury-place schedules by); see
 * Documentation/simulator.md for why.
 *
 * The data plane aggregates immediately: a stream (a tensor; a slice with
 * --slice; a ByteScheduler partition) is pushed in order as a run of
 * chunks, and a chunk is summed and queued for the pull as soon as it has
 * arrived from every worker.  So the link queues hold chunks.  The scheme
 * decides the chunk size (--chunk, or the whole partition for bytesched),
 * the key (readiness order or forward position) and when a more urgent
 * chunk may take a link:
 *
 *   MESSAGE  when the current chunk is done; on the push link only when
 *            its whole stream is done (fifo, prio, bytesched: a framework
 *            hands whole messages to the transport)
 *   PACKET   at the next packet boundary of the stream (mercury)
 *   FLUID    at once (ideal)
 *
 * Every tensor gates some forward call, so the communication of one
 * iteration is over before the next backward starts and every iteration's
 * network is the same relative to its backward start: it is simulated
 * once and replayed.
 *
 * Times are seconds, sizes bytes, rates bytes per second.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msim.h"
#include "tools.h"

/* The share of its NIC one worker's push (or pull) path gets: every
 * worker's NIC sends to every server's at once, and the other way. */
static double path_share(const struct msim_params *p)
{
	return mt_net_spread_Bps(1.0, p->workers, p->servers);
}

#define MSIM_IP_TCP_HDR	52	/* IPv4 20 + TCP 20 + timestamps 12 */
#define MSIM_ETH_HDR	14	/* counted on the wire like tc does */

enum { MODE_MESSAGE, MODE_PACKET, MODE_FLUID };
enum { EV_RELEASE, EV_LINK, EV_PUSH_ARRIVED, EV_PULL_ARRIVED };
enum { LINK_PUSH, LINK_PULL };

/* One chunk on one link.  Push chunk i has pull twin nmsg + i; the chunks
 * of a stream are consecutive.  Pieces (a preempted push chunk's sent
 * part, aggregated at once) are pull messages from 2 * nmsg on. */
struct msim_msg {
	int tensor;
	int stream;		/* framework message it is part of */
	int idx;		/* chunk number within its tensor */
	uint64_t payload;	/* bytes of tensor data */
	double wire;		/* bytes the link must carry */
	double phase;		/* packet ends at phase + k * pkt (wire
				 * bytes from this chunk's start) */
	double sent;		/* wire bytes already carried */
	double split;		/* push: wire bytes already sent as pieces */
	double start;		/* first byte on the link, s; < 0 before */
	long key;		/* smaller is served first */
	long seq;		/* FIFO among equal keys */
};

struct msim_ev {
	double t;
	long seq;
	int type;
	int a, b;
};

struct msim_link {
	double rate;
	int mode;
	int sticky;		/* a stream keeps the link until it ends */
	int *q;			/* heap of message indices */
	int nq;
	int cur;		/* message on the wire, -1 if idle */
	double seg_start;	/* when cur (re)started */
	double seg_target;	/* cur's sent at the pending link event */
	unsigned int version;	/* stale-event filter */
	int preempting;		/* a packet-boundary stop is scheduled */
};

struct msim_state {
	const struct mt_profile *prof;
	const struct msim_params *par;
	enum msim_scheme scheme;
	uint64_t chunk;		/* streaming-aggregation unit in force */
	double pkt;		/* wire bytes of a full packet */
	double mss;		/* payload bytes of a full packet */
	struct msim_msg *msg;	/* push chunks, pull chunks, pieces */
	int nmsg;		/* chunks per direction */
	int npiece, maxpiece;	/* pieces made, room for them */
	int *first_msg;		/* tensor -> its first push chunk */
	int *nmsgs;		/* tensor -> its chunks */
	int *left;		/* tensor -> pull chunks not yet home */
	double *arrival;	/* tensor -> parameter back at worker */
	struct msim_link link[2];
	struct msim_ev *ev;
	int nev, evcap;
	long evseq, msgseq;
	/* bytesched */
	int *pend;		/* heap of push chunks awaiting credit */
	int npend;
	double inflight;	/* payload bytes holding credit */
	double push_done;
	long events;
};

const char *msim_scheme_name(enum msim_scheme s)
{
	static const char *const names[] = {
		[MSIM_VANILLA] = "vanilla",
		[MSIM_FIFO] = "fifo-stream",
		[MSIM_PRIO] = "prio",
		[MSIM_BYTESCHED] = "bytesched",
		[MSIM_MERCURY] = "mercury",
		[MSIM_IDEAL] = "ideal",
	};

	return (unsigned int)s < MSIM_NSCHEMES ? names[s] : "?";
}

int msim_scheme_parse(const char *s)
{
	int i;

	for (i = 0; i < MSIM_NSCHEMES; i++)
		if (!strcmp(s, msim_scheme_name(i)))
			return i;
	/* the name streaming FIFO had before vanilla existed */
	return strcmp(s, "fifo") ? -1 : MSIM_FIFO;
}

void msim_params_default(struct msim_params *p)
{
	p->workers = 8;
	p->servers = 8;
	p->bandwidth_bps = 10e9;
	p->latency_s = 10e-6;
	/* ByteScheduler's own defaults: 1M fp32 parameters per partition,
	 * credit of 4M parameters. */
	p->partition = 4000000;
	p->credit = 16000000;
	/* One start-up rule for every scheme, ideal included, measured on
	 * mercury-ps (Documentation/simulator.md, "Start-up cost"): a frame
	 * holds its sender's path for at least MSIM_FRAME_COST and carries a
	 * 32-byte frame header; a message costs nothing beyond its frames. */
	p->msg_overhead_s = 0;
	p->frame_cost_s = MSIM_FRAME_COST;
	p->frame_hdr = 32;
	p->slice = 0;
	/* The unit Linux TCP moves in at both ends: GSO/TSO builds at most
	 * 64 KiB per send, GRO hands up at most 64 KiB per receive. */
	p->chunk = 0;		/* auto: msim_auto_chunk() */
	p->mtu = 1500;
	p->hdr = MSIM_IP_TCP_HDR + MSIM_ETH_HDR;
	p->iterations = 5;
	p->time_scale = 1.0;
	p->trace = NULL;
	p->trace_ctx = NULL;
}

#define CHECK(cond, ...) do {						\
	if (!(cond)) {							\
		if (err && errlen)					\
			snprintf(err, errlen, __VA_ARGS__);		\
		return -EINVAL;						\
	}								\
} while (0)

int msim_params_check(const struct msim_params *p, char *err, size_t errlen)
{
	CHECK(p->workers >= 1 && p->workers <= 65536,
	      "workers must be 1..65536");
	CHECK(p->servers >= 1 && p->servers <= 65536,
	      "servers must be 1..65536");
	CHECK(isfinite(p->bandwidth_bps) && p->bandwidth_bps >= 1e3 &&
	      p->bandwidth_bps <= 1e15, "bandwidth must be 1kbit..1000tbit");
	CHECK(isfinite(p->latency_s) && p->latency_s >= 0 &&
	      p->latency_s <= 10, "latency must be 0..10 s");
	CHECK(p->partition >= 1 && p->partition <= (1ULL << 40),
	      "partition must be 1 B..1 TiB");
	CHECK(p->slice <= (1ULL << 40), "slice must be 0 (off) .. 1 TiB");
	CHECK(p->chunk <= (1ULL << 40), "chunk must be 0 (auto) .. 1 TiB");
	CHECK(p->credit >= 1 && p->credit <= (1ULL << 50),
	      "credit must be at least 1 byte");
	CHECK(isfinite(p->msg_overhead_s) && p->msg_overhead_s >= 0 &&
	      p->msg_overhead_s <= 1, "msg-overhead must be 0..1 s");
	CHECK(isfinite(p->frame_cost_s) && p->frame_cost_s >= 0 &&
	      p->frame_cost_s <= 1, "frame-cost must be 0..1 s");
	CHECK(p->frame_hdr >= 0 && p->frame_hdr <= 65535,
	      "frame header bytes must be 0..65535");
	CHECK(p->mtu >= 68 && p->mtu <= 65535, "mtu must be 68..65535");
	CHECK(p->hdr >= 0 && p->hdr <= 65535, "header bytes must be 0..65535");
	CHECK(p->iterations >= 2 && p->iterations <= 100000,
	      "iterations must be 2..100000");
	CHECK(isfinite(p->time_scale) && p->time_scale > 0 &&
	      p->time_scale <= 1e6, "time-scale must be >0 and <=1e6");
	return 0;
}

uint64_t msim_auto_chunk(const struct msim_params *p)
{
	double need = p->frame_cost_s * p->bandwidth_bps / 8 * path_share(p);
	uint64_t c = 65536;

	/* 64 KiB, doubled until a frame's wire time covers its cost */
	while (c < need && c < (1ULL << 40))
		c *= 2;
	return c;
}

double msim_balanced_bps(const struct mt_profile *prof,
			 const struct msim_params *p)
{
	double share = path_share(p);
	double compute = (prof->fwd_ms + prof->bwd_ms) * p->time_scale / 1e3;

	if (compute <= 0)
		return 0;
	return prof->total_bytes * 8.0 / compute / share;
}

/* ---- heaps ---------------------------------------------------------- */

static int ev_less(const struct msim_ev *x, const struct msim_ev *y)
{
	return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static int ev_push(struct msim_state *s, double t, int type, int a, int b)
{
	struct msim_ev e = { t, s->evseq++, type, a, b };
	int i;

	if (s->nev == s->evcap) {
		int cap = s->evcap ? 2 * s->evcap : 256;
		void *p = realloc(s->ev, cap * sizeof(*s->ev));

		if (!p)
			return -ENOMEM;
		s->ev = p;
		s->evcap = cap;
	}
	i = s->nev++;
	while (i && ev_less(&e, &s->ev[(i - 1) / 2])) {
		s->ev[i] = s->ev[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	s->ev[i] = e;
	return 0;
}

static struct msim_ev ev_pop(struct msim_state *s)
{
	struct msim_ev top = s->ev[0], last = s->ev[--s->nev];
	int i = 0;

	for (;;) {
		int c = 2 * i + 1;

		if (c >= s->nev)
			break;
		if (c + 1 < s->nev && ev_less(&s->ev[c + 1], &s->ev[c]))
			c++;
		if (!ev_less(&s->ev[c], &last))
			break;
		s->ev[i] = s->ev[c];
		i = c;
	}
	if (s->nev)
		s->ev[i] = last;
	return top;
}

static int msg_less(const struct msim_state *s, int x, int y)
{
	const struct msim_msg *a = &s->msg[x], *b = &s->msg[y];

	return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

/* Message heaps never outgrow nmsg entries, allocated up front. */
static void mh_push(const struct msim_state *s, int *h, int *n, int m)
{
	int i = (*n)++;

	while (i && msg_less(s, m, h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = m;
}

static int mh_pop(const struct msim_state *s, int *h, int *n)
{
	int top = h[0], last = h[--(*n)], i = 0;

	for (;;) {
		int c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && msg_less(s, h[c + 1], h[c]))
			c++;
		if (!msg_less(s, h[c], last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = last;
	return top;
}

/* ---- links ---------------------------------------------------------- */

/* Put chunk mi on the wire of link l, from where it stopped. */
static int link_serve(struct msim_state *s, int l, int mi, double now)
{
	struct msim_link *k = &s->link[l];
	struct msim_msg *m = &s->msg[mi];

	k->cur = mi;
	if (m->start < 0)
		m->start = now;
	k->seg_start = now;
	k->seg_target = m->wire;
	k->preempting = 0;
	k->version++;
	return ev_push(s, now + (m->wire - m->sent) / k->rate, EV_LINK, l,
		       k->version);
}

static int link_start(struct msim_state *s, int l, double now)
{
	struct msim_link *k = &s->link[l];

	if (k->cur >= 0 || !k->nq)
		return 0;
	return link_serve(s, l, mh_pop(s, k->q, &k->nq), now);
}

/* A push chunk stopped by preemption ends there: what it has sent (whole
 * packets under Mercury) is summed like a chunk of its own, as a server
 * aggregating per packet would; the pull twin keeps the rest.  Only
 * releases preempt, at most one per stream, so maxpiece = streams. */
static int push_split(struct msim_state *s, int mi, double now)
{
	struct msim_msg *m = &s->msg[mi], *twin = &s->msg[s->nmsg + mi], *pc;
	double w = m->sent - m->split;
	int pi;

	if (w <= 1e-6 || s->npiece == s->maxpiece)
		return 0;
	pi = 2 * s->nmsg + s->npiece++;
	pc = &s->msg[pi];
	*pc = *twin;
	pc->wire = w;
	pc->payload = 0;	/* only bytesched's credit reads it */
	twin->wire -= w;
	twin->phase -= w;
	m->split = m->sent;
	s->left[m->tensor]++;
	return ev_push(s, now + s->par->latency_s, EV_PUSH_ARRIVED, pi, 0);
}

/* Queue chunk mi (key and seq already set) and preempt if the mode says. */
static int link_enqueue(struct msim_state *s, int l, int mi, double now)
{
	struct msim_link *k = &s->link[l];
	struct msim_msg *cur;
	double sent, stop;

	mh_push(s, k->q, &k->nq, mi);
	if (k->cur < 0)
		return link_start(s, l, now);
	if (k->mode == MODE_MESSAGE || !msg_less(s, mi, k->cur) ||
	    k->preempting)
		return 0;

	cur = &s->msg[k->cur];
	sent = cur->sent + (now - k->seg_start) * k->rate;
	if (k->mode == MODE_FLUID) {
		int ret = 0;

		cur->sent = sent < cur->wire ? sent : cur->wire;
		mh_push(s, k->q, &k->nq, k->cur);
		if (l == LINK_PUSH)
			ret = push_split(s, k->cur, now);
		k->cur = -1;
		return ret ? ret : link_start(s, l, now);
	}
	/* The packet on the wire is finished first; packets are cut from
	 * the stream, so their ends sit at phase + k * pkt in this chunk.
	 * A relative tolerance keeps a boundary we sit on from costing
	 * another packet. */
	stop = cur->phase + ceil((sent - cur->phase) / s->pkt - 1e-9) * s->pkt;
	if (stop >= cur->wire)
		return 0;	/* the chunk ends first; the switch happens then */
	k->preempting = 1;
	k->seg_target = stop;
	k->version++;
	return ev_push(s, k->seg_start + (stop - cur->sent) / k->rate, EV_LINK,
		       l, k->version);
}

/* The link event: cur finished or reached its preemption point. */
static int link_event(struct msim_state *s, int l, unsigned int version,
		      double now)
{
	struct msim_link *k = &s->link[l];
	int mi = k->cur, next, ret;
	struct msim_msg *m;

	if (version != k->version || mi < 0)
		return 0;	/* superseded by a preemption */
	m = &s->msg[mi];
	m->sent = k->seg_target;
	k->cur = -1;
	if (m->sent < m->wire) {
		mh_push(s, k->q, &k->nq, mi);	/* keeps its old seq */
		ret = l == LINK_PUSH ? push_split(s, mi, now) : 0;
		return ret ? ret : link_start(s, l, now);
	}
	if (s->par->trace)
		s->par->trace(s->par->trace_ctx, l, m->tensor, m->idx,
			      m->start, now);
	/* a push chunk arrives as its pull twin; a pull chunk as itself */
	ret = ev_push(s, now + s->par->latency_s,
		      l == LINK_PUSH ? EV_PUSH_ARRIVED : EV_PULL_ARRIVED,
		      l == LINK_PUSH ? s->nmsg + mi : mi, 0);
	if (ret || l == LINK_PULL)
		return ret ? ret : link_start(s, l, now);

	if (now > s->push_done)
		s->push_done = now;
	/* The stream goes on with its next chunk, in the stream's place. */
	next = mi + 1;
	if (next < s->nmsg && s->msg[next].stream == m->stream) {
		s->msg[next].key = m->key;
		s->msg[next].seq = m->seq;
		if (k->sticky)
			return link_serve(s, l, next, now);
		mh_push(s, k->q, &k->nq, next);
	}
	return link_start(s, l, now);
}

/* ---- schemes -------------------------------------------------------- */

/* Wire bytes of the first x TCP payload bytes of a stream (x is
 * fractional once frame headers are spread over a stream's chunks). */
static double stream_wire(const struct msim_state *s, double x)
{
	return x + ceil(x / s->mss - 1e-9) * s->par->hdr;
}

static long msg_key(const struct msim_state *s, int tensor)
{
	switch (s->scheme) {
	case MSIM_VANILLA:
	case MSIM_FIFO:
		return 0;
	case MSIM_BYTESCHED:
		/* Once ByteScheduler hands a partition to the transport its
		 * order is fixed: links are FIFO, priority acts at dispatch. */
		return 0;
	default:
		/* Equal priorities (a squeezed plan) keep arrival order:
		 * the heap breaks ties by seq. */
		return s->prof->tensors[tensor].prio;
	}
}

static uint64_t cdiv(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

/* mercury-ps shards a stream by elements (server j: elements
 * n*j/S .. n*(j+1)/S) and cuts each shard into frames of `unit` bytes
 * (0: one frame per shard). */
double msim_stream_frames(uint64_t bytes, int servers, uint64_t unit)
{
	uint64_t n = cdiv(bytes, 4), q = n / servers, r = n % servers;

	if (!unit || !q)
		return n < (uint64_t)servers ? (double)n : servers;
	return (double)r * cdiv(4 * (q + 1), unit) +
	       (double)(servers - r) * cdiv(4 * q, unit);
}

/* Cut tensors into streams (partitions, slices or whole tensors) and
 * streams into chunks; -E2BIG past MSIM_MAX_CHUNKS.  The start-up rule,
 * the same for every scheme, ideal included (a bound on what any order
 * achieves under the same costs): a stream's first chunk holds the
 * sender's path for --msg-overhead before its bytes; each chunk carries
 * the 32-byte headers of the data-plane frames it stands for and holds
 * the path for at least frames * --frame-cost (the sender handles a
 * frame while the one before is on the wire, so only what exceeds the
 * wire time is lost).  Costs are extra wire bytes at link rate (both
 * paths have the same rate); the pull twin pays the same. */
static int build_messages(struct msim_state *s)
{
	const struct mt_profile *prof = s->prof;
	const struct msim_params *par = s->par;
	int bs = s->scheme == MSIM_BYTESCHED;
	int whole = bs || s->scheme == MSIM_VANILLA;
	uint64_t cut = bs ? par->partition : par->slice;
	double rate = s->link[LINK_PUSH].rate;
	double ovh = par->msg_overhead_s * rate;
	double fcost = par->frame_cost_s * rate;
	double fhdr = par->frame_hdr;
	/* the frame of mercury-ps: a server's piece of a partition, a whole
	 * shard, or a chunk of it */
	uint64_t unit = bs ? (cdiv(par->partition, par->servers) + 3) / 4 * 4 :
			whole ? 0 : s->chunk;
	uint64_t total = 0, streams = 0;
	int i, n = 0, stream = 0;

	for (i = 0; i < prof->ntensors; i++) {
		uint64_t b = prof->tensors[i].bytes, sc = cut ? cut : b, off;

		for (off = 0; off < b; off += sc) {
			uint64_t sb = b - off < sc ? b - off : sc;

			total += whole ? 1 : cdiv(sb, s->chunk);
			streams++;
		}
		if (total > MSIM_MAX_CHUNKS)
			return -E2BIG;
	}
	s->nmsg = total;
	/* pieces only where a push chunk can be preempted */
	s->maxpiece = s->link[LINK_PUSH].mode == MODE_MESSAGE ? 0 : streams;
	s->msg = calloc(2 * (size_t)total + s->maxpiece, sizeof(*s->msg));
	if (!s->msg)
		return -ENOMEM;
	for (i = 0; i < prof->ntensors; i++) {
		uint64_t b = prof->tensors[i].bytes, sc = cut ? cut : b, off;
		int idx = 0;

		s->first_msg[i] = n;
		for (off = 0; off < b; off += sc, stream++) {
			uint64_t sb = b - off < sc ? b - off : sc;
			uint64_t ch = whole ? sb : s->chunk, x;
			double nf = msim_stream_frames(sb, par->servers, unit);
			double hb = nf * fhdr / sb;	/* header per byte */

			for (x = 0; x < sb; x += ch, n++, idx++) {
				uint64_t pl = sb - x < ch ? sb - x : ch;
				struct msim_msg *push = &s->msg[n];
				double w0 = stream_wire(s, x * (1 + hb));
				double w1 = stream_wire(s, (x + pl) * (1 + hb));
				double lead = nf * pl / sb * fcost - (w1 - w0);

				if (lead < 0)
					lead = 0;
				if (!x)
					lead += ovh;
				push->tensor = i;
				push->stream = stream;
				push->idx = idx;
				push->payload = pl;
				push->wire = lead + w1 - w0;
				/* packets of the stream end at k * pkt of its
				 * wire bytes; this chunk's start at w0 - lead */
				push->phase = lead - w0;
				s->msg[total + n] = *push;
			}
		}
		s->nmsgs[i] = n - s->first_msg[i];
	}
	return 0;
}

/* ByteScheduler: most urgent partition first while credit remains; the
 * last one may overshoot (its core checks credit > 0, not >= size). */
static int dispatch_credit(struct msim_state *s, double now)
{
	while (s->npend && s->inflight < (double)s->par->credit) {
		int mi = mh_pop(s, s->pend, &s->npend);
		int ret;

		s->inflight += s->msg[mi].payload;
		s->msg[mi].key = 0;	/* FIFO from here on */
		s->msg[mi].seq = s->msgseq++;
		ret = link_enqueue(s, LINK_PUSH, mi, now);
		if (ret)
			return ret;
	}
	return 0;
}

static int on_release(struct msim_state *s, int tensor, double now)
{
	int mi = s->first_msg[tensor], end = mi + s->nmsgs[tensor], j;

	if (s->scheme != MSIM_BYTESCHED) {
		/* Each stream queues its first chunk; the next follows when
		 * it is done (link_event). */
		for (j = mi; j < end; j++) {
			int ret;

			if (j > mi && s->msg[j].stream == s->msg[j - 1].stream)
				continue;
			s->msg[j].key = msg_key(s, tensor);
			s->msg[j].seq = s->msgseq++;
			ret = link_enqueue(s, LINK_PUSH, j, now);
			if (ret)
				return ret;
		}
		return 0;
	}
	for (j = mi; j < end; j++) {
		struct msim_msg *m = &s->msg[j];

		/* Pending order: forward position, then partition order. */
		m->key = s->prof->tensors[tensor].gate;
		m->seq = s->msgseq++;
		mh_push(s, s->pend, &s->npend, j);
	}
	return dispatch_credit(s, now);
}

/* All workers' copies of a chunk land together (symmetry): it is summed
 * now and its pull (pi) queued in aggregation order. */
static int on_push_arrived(struct msim_state *s, int pi, double now)
{
	struct msim_msg *m = &s->msg[pi];

	m->key = msg_key(s, m->tensor);
	m->seq = s->msgseq++;
	return link_enqueue(s, LINK_PULL, pi, now);
}

static int on_pull_arrived(struct msim_state *s, int mi, double now)
{
	struct msim_msg *m = &s->msg[mi];

	if (!--s->left[m->tensor])
		s->arrival[m->tensor] = now;
	if (s->scheme != MSIM_BYTESCHED)
		return 0;
	s->inflight -= m->payload;
	return dispatch_credit(s, now);
}

/* One iteration's communication, gradients released from time 0 (the
 * backward start). */
static int run_network(struct msim_state *s)
{
	const struct mt_profile *prof = s->prof;
	double scale = s->par->time_scale / 1e3;
	int i, ret = 0;

	for (i = 0; i < 2 * s->nmsg; i++) {
		s->msg[i].sent = 0;
		s->msg[i].split = 0;
		s->msg[i].start = -1;
	}
	s->npiece = 0;
	for (i = 0; i < 2; i++)
		s->link[i].cur = -1;
	s->push_done = 0;
	for (i = 0; i < prof->ntensors; i++) {
		s->left[i] = s->nmsgs[i];
		s->arrival[i] = 0;
		ret = ev_push(s, prof->tensors[i].ready_ms * scale,
			      EV_RELEASE, i, 0);
		if (ret)
			return ret;
	}
	while (s->nev && !ret) {
		struct msim_ev e = ev_pop(s);

		s->events++;
		switch (e.type) {
		case EV_RELEASE:
			ret = on_release(s, e.a, e.t);
			break;
		case EV_LINK:
			ret = link_event(s, e.a, (unsigned int)e.b, e.t);
			break;
		case EV_PUSH_ARRIVED:
			ret = on_push_arrived(s, e.a, e.t);
			break;
		case EV_PULL_ARRIVED:
			ret = on_pull_arrived(s, e.a, e.t);
			break;
		}
	}
	if (!ret) {
		for (i = 0; i < prof->ntensors; i++)
			if (s->left[i])
				return -EPROTO;	/* a chunk got lost */
	}
	return ret;
}

int msim_run(const struct mt_profile *prof, const struct msim_params *p,
	     enum msim_scheme scheme, struct msim_result *res)
{
	double scale = p->time_scale / 1e3, share, t, prev_end = 0, sum = 0;
	struct msim_state s = { .prof = prof, .par = p, .scheme = scheme };
	double prev_bwd = 0, *gate = NULL;
	int it, i, c, ret;

	if ((unsigned int)scheme >= MSIM_NSCHEMES || !prof || !res ||
	    prof->ncalls < 1 || prof->ntensors < 1)
		return -EINVAL;
	ret = msim_params_check(p, NULL, 0);
	if (ret)
		return ret;
	for (i = 0; i < prof->ntensors; i++)
		if (prof->tensors[i].gate < 0 ||
		    prof->tensors[i].gate >= prof->ncalls ||
		    prof->tensors[i].bytes < 1)
			return -EINVAL;
	memset(res, 0, sizeof(*res));

	share = path_share(p);
	for (i = 0; i < 2; i++) {
		s.link[i].rate = p->bandwidth_bps / 8 * share;
		s.link[i].mode = scheme == MSIM_IDEAL ? MODE_FLUID :
				 scheme == MSIM_MERCURY ? MODE_PACKET :
				 MODE_MESSAGE;
	}
	/* A framework hands whole messages to the transport: on the worker
	 * a stream, once started, is sent to its end.  A server sends each
	 * aggregated chunk as its own message. */
	s.link[LINK_PUSH].sticky = s.link[LINK_PUSH].mode == MODE_MESSAGE;
	s.chunk = p->chunk ? p->chunk : msim_auto_chunk(p);
	s.mss = p->mtu > MSIM_IP_TCP_HDR ? p->mtu - MSIM_IP_TCP_HDR : 1;
	s.pkt = s.mss + p->hdr;

	ret = -ENOMEM;
	s.first_msg = calloc(prof->ntensors, sizeof(int));
	s.nmsgs = calloc(prof->ntensors, sizeof(int));
	s.left = calloc(prof->ntensors, sizeof(int));
	s.arrival = calloc(prof->ntensors, sizeof(double));
	gate = calloc(prof->ncalls, sizeof(double));
	if (!s.first_msg || !s.nmsgs || !s.left || !s.arrival || !gate)
		goto out;
	ret = build_messages(&s);
	if (ret)
		goto out;
	ret = -ENOMEM;
	s.link[0].q = calloc(s.nmsg, sizeof(int));
	s.link[1].q = calloc(s.nmsg + s.maxpiece, sizeof(int));
	s.pend = calloc(s.nmsg, sizeof(int));
	if (!s.link[0].q || !s.link[1].q || !s.pend)
		goto out;

	ret = run_network(&s);
	if (ret)
		goto out;
	res->push_done_ms = s.push_done * 1e3;
	res->events = s.events;
	/* gate[c]: when call c's parameters are all home, since backward
	 * start */
	for (i = 0; i < prof->ntensors; i++) {
		c = prof->tensors[i].gate;
		if (s.arrival[i] > gate[c])
			gate[c] = s.arrival[i];
	}

	t = 0;
	for (it = 0; it < p->iterations; it++) {
		double fwd_start = t, bwd_start, bwd_end;

		t += prof->prelude_ms * scale;
		for (c = 0; c < prof->ncalls; c++) {
			/* iteration 0 starts with the parameters in place */
			if (it && prev_bwd + gate[c] > t)
				t = prev_bwd + gate[c];
			t += prof->call_ms[c] * scale;
		}
		bwd_start = t;
		bwd_end = bwd_start + prof->bwd_ms * scale;
		res->stall_ms = (bwd_start - fwd_start - prof->fwd_ms * scale)
				* 1e3;
		if (it)
			sum += bwd_end - prev_end;
		else
			res->first_ms = bwd_end * 1e3;
		prev_end = bwd_end;
		prev_bwd = bwd_start;
		t = bwd_end;
	}
	res->iteration_ms = sum / (p->iterations - 1) * 1e3;
	ret = 0;
out:
	free(s.msg);
	free(s.first_msg);
	free(s.nmsgs);
	free(s.left);
	free(s.arrival);
	free(s.link[0].q);
	free(s.link[1].q);
	free(s.pend);
	free(s.ev);
	free(gate);
	return ret;
}
