// SPDX-License-Identifier: GPL-2.0
/*
 * adv.c	Adversarial worst cases of mercury's core (issue 13), against
 *		the first core (v1), skbprio's algorithm, a binary heap and a
 *		red-black tree, at 1k, 10k and 100k queued packets.
 *
 * Patterns (each operation is timed on its own):
 *  growing   one flow whose tags grow more urgent holds the queue; each
 *            operation is an urgent arrival of another flow (evicting
 *            the first flow's newest packet) plus a dequeue;
 *  collide   1024 flows all in one lookup bucket (v1: one bucket, hence
 *            one FIFO); hold: dequeue, then enqueue to the same flow;
 *  drr       min(queued, 65536) flows of 64 KB packets at one level,
 *            quantum 256; hold as above;
 *  storm     a full queue; each operation is one arrival of a random rank
 *            and flow, and one drop (a victim or the arrival itself);
 *  lower     the 'growing' queue, then the limit lowered to 0: one drop
 *            per operation (tc qdisc change).
 *
 * Worst case without the machine's noise: every pattern is run REPS times
 * from the same state; for each operation the fastest of its REPS
 * timings is kept (a preemption rarely hits the same operation in every
 * run), then the median, the 99.9th percentile and the maximum over
 * operations are reported.
 * The heap has no O(log n) access to its least urgent packet: it takes
 * no part in the patterns that drop.
 *
 *   adv [-r REPS] [-q]      -q: 1k and 10k only (for tests)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pq.h"

#define MAXQ		100000
#define LEVELS		TC_MERCURY_MAX_LEVELS
#define BUDGET_NS	20e9	/* skip larger sizes once a run took this long */

/* ---- skbprio's algorithm: a FIFO per priority, highest and lowest ---- */

struct sp {
	struct list_head	*q;		/* one list per rank */
	u32			nranks;
	u32			hi, lo;		/* most and least urgent non-empty */
	u32			len;
};

static struct sp *sp_create(u32 nranks)
{
	struct sp *s = calloc(1, sizeof(*s));
	u32 i;

	s->q = calloc(nranks, sizeof(*s->q));
	for (i = 0; i < nranks; i++)
		INIT_LIST_HEAD(&s->q[i]);
	s->nranks = nranks;
	return s;
}

/* The packet's list node overlays skb->next/prev, as skbprio's skb lists. */
static struct list_head *sp_node(struct pq_pkt *p)
{
	return (struct list_head *)&p->skb.next;
}

static struct pq_pkt *sp_entry(struct list_head *l)
{
	return container_of((void *)l, struct pq_pkt, skb.next);
}

static void sp_push(struct sp *s, struct pq_pkt *p, u32 rank)
{
	p->key = rank;
	list_add_tail(sp_node(p), &s->q[rank]);
	if (!s->len || rank < s->hi)
		s->hi = rank;
	if (!s->len || rank > s->lo)
		s->lo = rank;
	s->len++;
}

/* as skbprio: when a list empties, scan for the next non-empty one */
static void sp_fix(struct sp *s)
{
	if (!s->len)
		return;
	while (list_empty(&s->q[s->hi]))
		s->hi++;
	while (list_empty(&s->q[s->lo]))
		s->lo--;
}

static struct pq_pkt *sp_pop(struct sp *s)
{
	struct pq_pkt *p;

	if (!s->len)
		return NULL;
	p = sp_entry(s->q[s->hi].next);
	list_del(sp_node(p));
	s->len--;
	sp_fix(s);
	return p;
}

static struct pq_pkt *sp_drop(struct sp *s, s64 rank)
{
	struct pq_pkt *p;

	if (!s->len || (s64)s->lo <= rank)
		return NULL;
	p = sp_entry(s->q[s->lo].prev);
	list_del(sp_node(p));
	s->len--;
	sp_fix(s);
	return p;
}

/* ---- one interface over every queue ----------------------------------- */

enum impl { I_MERCURY, I_V1, I_SKBPRIO, I_HEAP, I_RBTREE, I_N };
static const char * const impl_names[I_N] = {
	"mercury", "v1", "skbprio", "heap", "rbtree",
};

struct q {
	enum impl	impl;
	struct pq	*pq;
	struct sp	*sp;
};

static void q_create(struct q *q, enum impl impl, u32 buckets, u32 quantum)
{
	struct pq_cfg cfg = { .levels = LEVELS, .buckets = buckets,
			      .flow_order = true, .capacity = MAXQ + 1,
			      .quantum = quantum };

	q->impl = impl;
	q->sp = NULL;
	q->pq = NULL;
	if (impl == I_SKBPRIO) {
		q->sp = sp_create(LEVELS + 1);
		return;
	}
	cfg.kind = impl == I_MERCURY ? PQ_MERCURY : impl == I_V1 ? PQ_V1 :
		   impl == I_HEAP ? PQ_HEAP : PQ_RBTREE;
	if (pq_create(&q->pq, &cfg)) {
		fprintf(stderr, "adv: cannot create %s\n", impl_names[impl]);
		exit(1);
	}
}

static void q_destroy(struct q *q)
{
	if (q->sp) {
		free(q->sp->q);
		free(q->sp);
	}
	if (q->pq) {
		if (q->impl == I_V1)
			while (pq_pop(q->pq))
				;
		pq_destroy(q->pq);
	}
}

static void q_push(struct q *q, struct pq_pkt *p, u32 rank)
{
	if (q->sp)
		sp_push(q->sp, p, rank);
	else if (pq_push(q->pq, p, rank))
		abort();
}

static struct pq_pkt *q_pop(struct q *q)
{
	return q->sp ? sp_pop(q->sp) : pq_pop(q->pq);
}

static u32 q_len(const struct q *q)
{
	return q->sp ? q->sp->len : q->pq->len;
}

/* The drop policy's victim for an arrival of @rank (-1: any), unlinked. */
static struct pq_pkt *q_drop(struct q *q, s64 rank)
{
	struct pq_pkt *p = NULL;

	switch (q->impl) {
	case I_MERCURY:
		p = (struct pq_pkt *)mercury_victim(&q->pq->core, rank);
		break;
	case I_V1:
		p = (struct pq_pkt *)v1_victim(q->pq->v1, rank);
		break;
	case I_SKBPRIO:
		return sp_drop(q->sp, rank);
	case I_RBTREE:
		p = pq_rbtree_drop(q->pq, rank);
		break;
	default:
		abort();
	}
	if (p && q->impl != I_RBTREE)
		q->pq->len--;
	return p;
}

/* Enqueue with the limit: drop until there is room, or drop the arrival. */
static void q_admit(struct q *q, struct pq_pkt *p, u32 rank, u32 limit)
{
	while (q_len(q) >= limit)
		if (!q_drop(q, rank))
			return;
	q_push(q, p, rank);
}

/* ---- the patterns ------------------------------------------------------ */

enum pattern { P_GROWING, P_COLLIDE, P_DRR, P_STORM, P_LOWER, P_N };
static const char * const pattern_names[P_N] = {
	"growing", "collide", "drr", "storm", "lower",
};

static struct pq_pkt *pkts;	/* MAXQ + op packets */
static double *t_best;		/* per operation: fastest over the runs */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static u64 rnd(u64 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static struct pq_pkt *mk(u32 i, u32 hash, u32 len)
{
	struct pq_pkt *p = &pkts[i];

	memset(p, 0, sizeof(*p));
	p->skb.hash = hash;
	p->skb.len = len;
	p->skb.truesize = len + 768;
	qdisc_skb_cb(&p->skb)->pkt_len = len;
	return p;
}

static bool applies(enum pattern pt, enum impl im)
{
	/* the heap cannot drop; only the flow queues know flows */
	if (im == I_HEAP)
		return pt == P_COLLIDE || pt == P_DRR;
	return true;
}

static u32 ops_of(enum pattern pt, u32 queued)
{
	switch (pt) {
	case P_GROWING:
		return 2000;
	case P_LOWER:
		return queued;
	default:
		return 20000;
	}
}

/* Fill @q for @pt with @queued packets; returns the next packet index. */
static u32 setup(struct q *q, enum pattern pt, u32 queued)
{
	u32 i, flows;
	u64 s = 5;

	switch (pt) {
	case P_GROWING:
	case P_LOWER:
		/* ranks LEVELS .. 2, ever more urgent: one flow */
		for (i = 0; i < queued; i++)
			q_push(q, mk(i, 0x10000000, 1000),
			       LEVELS - (u32)((u64)i * (LEVELS - 2) / queued));
		return queued;
	case P_COLLIDE:
		/* 1024 flows, hashes all in v1's bucket 0 of 1 */
		for (i = 0; i < queued; i++)
			q_push(q, mk(i, 1 + i % 1024, 1000), 1 + rnd(&s) % 1024);
		return queued;
	case P_DRR:
		flows = queued < 65536 ? queued : 65536;
		for (i = 0; i < queued; i++)
			q_push(q, mk(i, (u32)(((u64)(i % flows) << 32) / flows),
				     65536), 7);
		return queued;
	default:
		for (i = 0; i < queued; i++)
			q_push(q, mk(i, (u32)(rnd(&s) % 1024) << 22, 1000),
			       1 + rnd(&s) % 1024);
		return queued;
	}
}

/* One timed run: per-operation times folded into t_best; total ns. */
static double run(enum pattern pt, enum impl im, u32 queued, bool first)
{
	u32 buckets = pt == P_COLLIDE ? 1 : 4096, n, i, ops = ops_of(pt, queued);
	u32 quantum = pt == P_DRR ? 256 : 0;
	double t0, dt, total = 0;
	struct pq_pkt *p;
	struct q q;
	u64 s = 9;

	q_create(&q, im, buckets, quantum);
	n = setup(&q, pt, queued);
	for (i = 0; i < ops; i++) {
		u32 r = 1 + rnd(&s) % 1024, h = (u32)(rnd(&s) % 1024) << 22;

		/* the arrival is built outside the timing */
		if (pt == P_GROWING || pt == P_STORM)
			mk(n, pt == P_GROWING ? 0x20000000 : h, 1000);
		t0 = now_ns();
		switch (pt) {
		case P_GROWING:
			q_admit(&q, &pkts[n], 1, queued);
			q_pop(&q);
			break;
		case P_COLLIDE:
		case P_DRR:
			p = q_pop(&q);
			q_push(&q, p, pt == P_DRR ? 7 : r);
			break;
		case P_STORM:
			q_admit(&q, &pkts[n], r, queued);
			break;
		default:
			q_drop(&q, -1);
			break;
		}
		dt = now_ns() - t0;
		total += dt;
		n++;
		if (first || dt < t_best[i])
			t_best[i] = dt;
	}
	q_destroy(&q);
	return total;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const u32 sizes[] = { 1000, 10000, 100000 };
	u32 reps = 3, nsizes = 3, si, r, ops;
	bool skip[P_N][I_N] = {};
	int opt, pt, im;

	while ((opt = getopt(argc, argv, "r:qh")) != -1) {
		switch (opt) {
		case 'r':
			reps = (u32)atoi(optarg);
			if (reps < 1 || reps > 100) {
				fprintf(stderr, "adv: -r must be 1..100\n");
				return 2;
			}
			break;
		case 'q':
			nsizes = 2;
			break;
		default:
			fprintf(stderr, "usage: adv [-r REPS] [-q]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	pkts = calloc(2 * MAXQ + 1, sizeof(*pkts));
	t_best = calloc(MAXQ, sizeof(*t_best));
	if (!pkts || !t_best) {
		fprintf(stderr, "adv: out of memory\n");
		return 1;
	}
	printf("| pattern | queued | queue | median ns/op | 99.9%% ns/op | worst ns/op | worst / mercury's |\n");
	printf("| --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
	for (pt = 0; pt < P_N; pt++) {
		for (si = 0; si < nsizes; si++) {
			double merc_worst = 0;

			for (im = 0; im < I_N; im++) {
				double total = 0, med, p999, worst;

				if (!applies(pt, im))
					continue;
				if (skip[pt][im]) {
					printf("| %s | %u | %s | - | - | - | not run: the run at the size before took over %.0f s |\n",
					       pattern_names[pt], sizes[si],
					       impl_names[im], BUDGET_NS / 1e9);
					continue;
				}
				ops = ops_of(pt, sizes[si]);
				for (r = 0; r < reps; r++)
					total += run(pt, im, sizes[si], !r);
				if (total / reps > BUDGET_NS)
					skip[pt][im] = true;
				worst = t_best[0];
				for (r = 0; r < ops; r++)
					worst = t_best[r] > worst ? t_best[r] : worst;
				qsort(t_best, ops, sizeof(*t_best), cmp_double);
				med = t_best[ops / 2];
				p999 = t_best[ops - 1 - ops / 1000];
				if (im == I_MERCURY)
					merc_worst = worst;
				printf("| %s | %u | %s | %.0f | %.0f | %.0f | %.1f |\n",
				       pattern_names[pt], sizes[si], impl_names[im],
				       med, p999, worst, worst / merc_worst);
				fflush(stdout);
			}
		}
	}
	free(pkts);
	free(t_best);
	return 0;
}
