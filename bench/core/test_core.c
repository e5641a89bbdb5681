// SPDX-License-Identifier: GPL-2.0
/*
 * test_core.c	The contract of mercury's core (kmod/sch_mercury.c), and
 *		the defects of its first version that issue 13 reproduced.
 *
 * Each test drives a small model of the qdisc's packet path: enqueue with
 * a packet limit and the drop policy, peek as a parent (tbf) does while it
 * waits for tokens, dequeue. The model runs on the module's core, or with
 * MERCURY_CORE=v1 on the first one, whose peek was qdisc_peek_dequeued
 * (the packet is taken out and held): `make test-v1` shows which of these
 * tests the first core fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pq.h"

#define NPKT	70000

static struct pq_pkt pkts[NPKT];
static bool use_v1;

struct qd {
	struct pq	*pq;
	u32		limit;		/* packets */
	u32		qlen;		/* packets, held one included */
	struct sk_buff	*held;		/* v1: the packet peek took out */
	u32		ndropped;	/* victims and refused arrivals */
	struct pq_pkt	*dropped[NPKT];
};

static struct qd qd;

static void qd_init(u32 levels, bool flow_order, u32 limit, u32 quantum)
{
	struct pq_cfg cfg = { .kind = use_v1 ? PQ_V1 : PQ_MERCURY,
			      .levels = levels, .buckets = 1024,
			      .flow_order = flow_order, .quantum = quantum };

	memset(&qd, 0, sizeof(qd));
	memset(pkts, 0, sizeof(pkts));
	qd.limit = limit;
	assert_int_equal(pq_create(&qd.pq, &cfg), 0);
}

static void qd_fini(void)
{
	pq_destroy(qd.pq);
	qd.pq = NULL;
	assert_int_equal(pq_live_flows, 0);
}

/* Packet @i of flow hash @hash, @len bytes. */
static struct pq_pkt *pkt(u32 i, u32 hash, u32 len)
{
	struct pq_pkt *p = &pkts[i];

	p->skb.hash = hash;
	p->skb.len = len;
	p->skb.truesize = len + 512;
	qdisc_skb_cb(&p->skb)->pkt_len = len;
	return p;
}

static struct sk_buff *qd_victim(s64 rank)
{
	if (use_v1)
		return v1_victim(qd.pq->v1, rank);
	return mercury_victim(&qd.pq->core, rank);
}

/* sch_mercury's enqueue: evict while full, or refuse the arrival. */
static bool qd_enqueue(struct pq_pkt *p, u32 rank)
{
	struct sk_buff *victim;

	while (qd.qlen >= qd.limit) {
		victim = qd_victim(rank);
		if (!victim) {
			qd.dropped[qd.ndropped++] = p;
			return false;
		}
		qd.pq->len--;
		qd.qlen--;
		qd.dropped[qd.ndropped++] = (struct pq_pkt *)victim;
	}
	assert_int_equal(pq_push(qd.pq, p, rank), 0);
	qd.qlen++;
	return true;
}

static struct pq_pkt *qd_peek(void)
{
	u32 rank;

	if (use_v1) {
		if (!qd.held)
			qd.held = (struct sk_buff *)pq_pop(qd.pq);
		return (struct pq_pkt *)qd.held;
	}
	rank = mercury_next_rank(&qd.pq->core);
	if (rank == MERCURY_NO_RANK)
		return NULL;
	return (struct pq_pkt *)mercury_flow_head(mercury_select(&qd.pq->core, rank));
}

static struct pq_pkt *qd_dequeue(void)
{
	struct pq_pkt *p;

	if (qd.held) {
		p = (struct pq_pkt *)qd.held;
		qd.held = NULL;
	} else {
		p = pq_pop(qd.pq);
	}
	if (p)
		qd.qlen--;
	return p;
}

static u32 rank_of(struct pq_pkt *p)
{
	return pq_rank_of(qd.pq, p);
}

static u32 rnd(u64 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (u32)*s;
}

/* The served-rank rule of kmod/sch_mercury.c, stated on its own: a
 * flow's ranks as runs of equal ranks in arrival order, at most
 * MERCURY_RUNS of them; a new run beyond that first merges the two
 * oldest into one at the more urgent of their ranks. The flow is served
 * at the most urgent run.
 */
struct model_runs {
	u32	rank[MERCURY_RUNS];
	u32	count[MERCURY_RUNS];
	u32	n;
};

static void mr_shift(struct model_runs *m)
{
	memmove(m->rank, m->rank + 1, (m->n - 1) * sizeof(u32));
	memmove(m->count, m->count + 1, (m->n - 1) * sizeof(u32));
	m->n--;
}

static void mr_push(struct model_runs *m, u32 rank)
{
	if (m->n && m->rank[m->n - 1] == rank) {
		m->count[m->n - 1]++;
		return;
	}
	if (m->n == MERCURY_RUNS) {
		m->rank[1] = m->rank[0] < m->rank[1] ? m->rank[0] : m->rank[1];
		m->count[1] += m->count[0];
		mr_shift(m);
	}
	m->rank[m->n] = rank;
	m->count[m->n++] = 1;
}

static void mr_pop(struct model_runs *m, bool head)
{
	u32 i = head ? 0 : m->n - 1;

	assert_true(m->n > 0);
	if (--m->count[i])
		return;
	if (head)
		mr_shift(m);
	else
		m->n--;
}

static u32 mr_min(const struct model_runs *m)
{
	u32 i, r = MERCURY_NO_RANK;

	for (i = 0; i < m->n; i++)
		r = m->rank[i] < r ? m->rank[i] : r;
	return r;
}

/* Defect 2, flow_order off: the queue 10 10 9 9 8 8 (limit 6) receives
 * 7 7 7 6 6 6 while the parent waits: the six arrivals stay and leave in
 * rank order; the six old packets are the ones dropped.
 */
static void test_victim_flow_order_off(void **state)
{
	static const u32 old[] = { 10, 10, 9, 9, 8, 8 }, arr[] = { 7, 7, 7, 6, 6, 6 };
	static const u32 out[] = { 9, 10, 11, 6, 7, 8 };	/* packet numbers */
	u32 i;

	(void)state;
	qd_init(64, false, 6, 0);
	for (i = 0; i < 6; i++)
		qd_enqueue(pkt(i, 0x1000, 1000), old[i]);
	assert_non_null(qd_peek());	/* tbf waits for tokens */
	for (i = 0; i < 6; i++)
		assert_true(qd_enqueue(pkt(6 + i, 0x2000, 1000), arr[i]));
	for (i = 0; i < 6; i++) {
		struct pq_pkt *p = qd_dequeue();

		assert_non_null(p);
		assert_int_equal(p - pkts, out[i]);
	}
	assert_null(qd_dequeue());
	/* victims: the least urgent present, the newest among equals */
	assert_int_equal(qd.ndropped, 6);
	for (i = 0; i < 6; i++)
		assert_int_equal(qd.dropped[i] - pkts, i % 2 ? i - 1 : i + 1);
	qd_fini();
}

/* Defect 2, flow_order on: flow a queues 5 x tag 5 then 5 x tag 60
 * (limit 10), flow b sends 10 x tag 10. a's tag-60 tail is dropped for b's
 * first five; then b's own newest packet is the least urgent tail, so the
 * rest of b's arrivals are refused. Never a packet with others of its flow
 * queued behind it.
 */
static void test_victim_flow_order_on(void **state)
{
	u32 i;

	(void)state;
	qd_init(1024, true, 10, 0);
	for (i = 0; i < 10; i++)
		qd_enqueue(pkt(i, 0xa000, 1000), i < 5 ? 5 : 60);
	for (i = 0; i < 10; i++)
		assert_int_equal(qd_enqueue(pkt(10 + i, 0xb000, 1000), 10), i < 5);
	assert_int_equal(qd.ndropped, 10);
	for (i = 0; i < 5; i++) {
		assert_int_equal(qd.dropped[i] - pkts, 9 - i);	/* a's tail */
		assert_int_equal(qd.dropped[5 + i] - pkts, 15 + i);
	}
	for (i = 0; i < 10; i++)
		assert_int_equal(qd_dequeue() - pkts, i < 5 ? i : 5 + i);
	assert_null(qd_dequeue());
	qd_fini();
}

/* Defect 3: two connections whose hashes share v1's bucket are two flows:
 * the urgent packet of one does not wait behind the other's bulk.
 */
static void test_flows_colliding(void **state)
{
	u32 i;

	(void)state;
	qd_init(64, true, 1000, 0);
	/* reciprocal_scale(h, 1024) is 0 for both */
	for (i = 0; i < 10; i++)
		qd_enqueue(pkt(i, 0x00100000, 1000), 50);
	qd_enqueue(pkt(10, 0x00200000, 1000), 1);
	assert_int_equal(qd_dequeue() - pkts, 10);
	for (i = 0; i < 10; i++)
		assert_int_equal(qd_dequeue() - pkts, i);
	qd_fini();
}

/* Defect 5: peek returns what the next dequeue returns, also after a more
 * urgent arrival; nothing is held outside the queue.
 */
static void test_peek_consistency(void **state)
{
	struct pq_pkt *p;
	u32 i;

	(void)state;
	qd_init(64, true, 1000, 0);
	for (i = 0; i < 3; i++)
		qd_enqueue(pkt(i, 0x1000, 1000), 10);
	assert_int_equal(qd_peek() - pkts, 0);
	assert_int_equal(qd_peek() - pkts, 0);
	qd_enqueue(pkt(3, 0x2000, 1000), 1);
	p = qd_peek();
	assert_int_equal(p - pkts, 3);
	assert_ptr_equal(qd_dequeue(), p);
	for (i = 0; i < 3; i++) {
		p = qd_peek();
		assert_ptr_equal(qd_dequeue(), p);
		assert_int_equal(p - pkts, i);
	}
	assert_null(qd_peek());
	qd_fini();
}

/* Defect 4: DRR at 65536 flows, 64 KB packets and a 256-byte quantum.
 * Every flow but a level's head keeps a positive deficit, so the flow to
 * serve is found in one step (no loop can run); and service stays
 * byte-fair: 1500-byte flows get as many bytes as 64 KB ones.
 */
static void test_drr_bounded_and_fair(void **state)
{
	u64 bytes[2] = { 0, 0 };
	struct mercury_flow *f, *head;
	struct mercury_level *l;
	u32 i, n = 0;

	(void)state;
	if (use_v1)
		skip();	/* the invariant is the module's; v1 loops */
	qd_init(8, true, NPKT, 256);
	for (i = 0; i < 65536; i++)
		qd_enqueue(pkt(n++, i + 1, i % 2 ? 1500 : 65536), 3);
	/* 1500-byte flows with more packets, to stay backlogged */
	for (i = 0; i < 4000; i++)
		qd_enqueue(pkt(n++, 2 * (i % 64) + 2, 1500), 3);
	l = &qd.pq->core.t.levels[3];
	for (i = 0; i < 20000; i++) {
		struct pq_pkt *p = qd_dequeue();

		assert_non_null(p);
		bytes[p->skb.len == 1500] += p->skb.len;
		if (i % 1000)
			continue;
		head = list_first_entry(&l->flows, struct mercury_flow, node);
		list_for_each_entry(f, &l->flows, node)
			assert_true(f == head || f->deficit > 0);
	}
	/* both kinds got bytes within a few quanta of each other per flow
	 * served: neither is starved by the other's packet size
	 */
	assert_true(bytes[0] > 0 && bytes[1] > 0);
	assert_true(qd.pq->core.drr_quantum == 65536);
	while (qd_dequeue())
		;
	qd_fini();
}

/* Byte fairness, exactly: two flows at one level, 64 KB and 1500-byte
 * packets, quantum 256: over a long run their bytes differ by at most one
 * drr_quantum plus one packet.
 */
static void test_drr_byte_fair(void **state)
{
	s64 diff;
	u64 b[2] = { 0, 0 };
	u32 i, n = 0;

	(void)state;
	qd_init(8, true, NPKT, 256);
	/* hashes in different v1 buckets: this is about fairness only */
	for (i = 0; i < 400; i++)
		qd_enqueue(pkt(n++, 0x10000000, 65536), 2);
	for (i = 0; i < 20000; i++)
		qd_enqueue(pkt(n++, 0x20000000, 1500), 2);
	for (i = 0; i < 10000; i++) {
		struct pq_pkt *p = qd_dequeue();

		b[p->skb.hash == 0x20000000] += p->skb.len;
		diff = (s64)b[0] - (s64)b[1];
		assert_true(diff < 2 * 65536 + 1500 && diff > -(2 * 65536 + 1500));
	}
	while (qd_dequeue())
		;
	qd_fini();
}

/* Defect 6: untagged traffic placed first is capped at
 * MERCURY_FIRST_SHARE percent of the bytes while tagged packets wait; a
 * lone untagged packet (control traffic) still goes next.
 */
static void test_untagged_first_bounded(void **state)
{
	u64 ub = 0, tb = 0;
	struct pq_pkt *p;
	u32 i, n = 0;

	(void)state;
	qd_init(64, true, NPKT, 0);
	if (!use_v1)
		qd.pq->core.share = MERCURY_FIRST_SHARE;	/* as sch_mercury */
	for (i = 0; i < 2000; i++) {
		qd_enqueue(pkt(n++, 0x10000000, 1000), 0);	/* untagged bulk */
		qd_enqueue(pkt(n++, 0x20000000, 1000), 5);	/* a gradient */
	}
	for (i = 0; i < 2000; i++) {
		p = qd_dequeue();
		*(rank_of(p) ? &tb : &ub) += p->skb.len;
	}
	printf("# untagged first: %llu%% of the bytes to untagged\n",
	       (unsigned long long)(100 * ub / (ub + tb)));
	assert_true(ub * 100 <= (ub + tb) * (MERCURY_FIRST_SHARE + 1));
	assert_true(tb > 0);
	while (qd_dequeue())
		;
	/* control traffic: one untagged packet among backlogged gradients */
	for (i = 0; i < 100; i++)
		qd_enqueue(pkt(n++, 0x20000000, 1000), 5);
	for (i = 0; i < 50; i++)
		qd_dequeue();
	qd_enqueue(pkt(n, 0x30000000, 100), 0);
	assert_int_equal(qd_dequeue() - pkts, n);
	while (qd_dequeue())
		;
	qd_fini();
}

/* Untagged last with a share: at least that share, and peek charges
 * nothing (the credit and share_forced move at dequeue only).
 */
static void test_untagged_last_share(void **state)
{
	struct mercury_sched_data *c;
	u64 ub = 0, tb = 0;
	struct pq_pkt *p;
	s64 credit;
	u64 forced;
	u32 i, n = 0;

	(void)state;
	if (use_v1)
		skip();	/* v1's share lived in sch_mercury.c */
	qd_init(64, true, NPKT, 0);
	c = &qd.pq->core;
	c->untagged_rank = 64;
	c->share = 20;
	for (i = 0; i < 2000; i++) {
		qd_enqueue(pkt(n++, 0x1000, 1000), 64);
		qd_enqueue(pkt(n++, 0x2000, 1000), 3);
	}
	for (i = 0; i < 2000; i++) {
		credit = c->share_credit;
		forced = c->stat_share_forced;
		p = qd_peek();
		assert_int_equal(c->share_credit, credit);
		assert_int_equal(c->stat_share_forced, forced);
		assert_ptr_equal(qd_dequeue(), p);
		*(rank_of(p) == 64 ? &ub : &tb) += p->skb.len;
	}
	assert_true(ub * 100 >= (ub + tb) * 19 && ub * 100 <= (ub + tb) * 21);
	assert_true(c->stat_share_forced > 0);
	while (qd_dequeue())
		;
	qd_fini();
}

/* Defect 1's pattern, for correctness: one flow whose tags grow more
 * urgent, tail drops from it, and its served level the runs rule's
 * (mr_min), never less urgent than its most urgent packet (checked by
 * brute force). The cost is the benchmark's.
 */
static void test_growing_urgency(void **state)
{
	static struct model_runs m;
	struct mercury_flow *f;
	u32 i, j, n = 0, min;

	(void)state;
	if (use_v1)
		skip();	/* checks the current core's runs */
	memset(&m, 0, sizeof(m));
	qd_init(4096, true, 2000, 0);
	for (i = 0; i < 2000; i++) {
		qd_enqueue(pkt(n++, 0x1000, 1000), 4000 - i);
		mr_push(&m, 4000 - i);
	}
	/* each arrival of another flow evicts the flow's newest packet */
	for (i = 0; i < 1500; i++) {
		assert_true(qd_enqueue(pkt(n++, 0x2000, 1000), 1));
		f = mercury_flow_find(&qd.pq->core, pq_key(&pkts[0]), 0);
		assert_non_null(f);
		min = MERCURY_NO_RANK;
		for (j = 0; j < 2000 - 1 - i; j++)
			min = rank_of(&pkts[j]) < min ? rank_of(&pkts[j]) : min;
		mr_pop(&m, false);
		assert_int_equal(f->rank, mr_min(&m));
		assert_true(f->rank <= min);
		/* exact while no run that mattered was merged */
		if (i < MERCURY_RUNS - 1)
			assert_int_equal(f->rank, min);
		assert_int_equal(f->qlen, 2000 - 1 - i);
		assert_ptr_equal(qd.dropped[i], &pkts[1999 - i]);
	}
	for (i = 0; i < 1500; i++)
		assert_int_equal(qd_dequeue() - pkts, 2000 + i);
	for (i = 0; i < 500; i++)
		assert_int_equal(qd_dequeue() - pkts, i);
	qd_fini();
}

/* Random traffic against a brute-force statement of the contract: every
 * dequeue is its flow's oldest packet, from a flow at the most urgent
 * served rank (the runs rule, mr_min, never less urgent than the flow's
 * most urgent packet); every victim is the least urgent newest packet,
 * among equals of the flow whose newest packet changed last; an arrival
 * is refused only if it would be that packet itself; flows leave the
 * queue when empty.
 */
static void contract_random(bool flow_order)
{
	static u32 fid_of[NPKT];
	static bool queued[NPKT];
	enum { FLOWS = 16, RANKS = 200, FIDS = FLOWS * (RANKS + 1) };
	static u32 fmin[FIDS], ftail[FIDS];
	static u64 tchg[FIDS];
	static struct model_runs runs[FIDS];
	u32 i, j, n = 0, live;
	u64 s = flow_order ? 11 : 12, clock = 0;

	if (use_v1)
		skip();
	qd_init(RANKS, flow_order, 300, 0);
	memset(queued, 0, sizeof(queued));
	memset(runs, 0, sizeof(runs));
	memset(tchg, 0, sizeof(tchg));
	for (i = 0; i < 3000 && n < NPKT; i++) {
		u32 op = rnd(&s) % 10;

		/* the flows now: each one's most urgent rank and newest packet */
		for (j = 0; j < FIDS; j++) {
			fmin[j] = MERCURY_NO_RANK;
			ftail[j] = U32_MAX;
		}
		for (j = 0; j < n; j++) {
			if (!queued[j])
				continue;
			if (rank_of(&pkts[j]) < fmin[fid_of[j]])
				fmin[fid_of[j]] = rank_of(&pkts[j]);
			ftail[fid_of[j]] = j;
		}
		for (j = 0; j < FIDS; j++)
			assert_true(mr_min(&runs[j]) <= fmin[j]);
		if (op < 6) {
			u32 fl = rnd(&s) % FLOWS, r = 1 + rnd(&s) % RANKS;
			struct pq_pkt *p = pkt(n, 0x100 * (fl + 1), 100 + rnd(&s) % 1400);
			u32 before = qd.ndropped, best = U32_MAX;
			bool ok;

			/* expected victim: max (rank, last change) over tails */
			for (j = 0; j < FIDS; j++) {
				u32 t = ftail[j];

				if (t == U32_MAX)
					continue;
				if (best == U32_MAX || rank_of(&pkts[t]) > rank_of(&pkts[best]) ||
				    (rank_of(&pkts[t]) == rank_of(&pkts[best]) &&
				     tchg[j] > tchg[fid_of[best]]))
					best = t;
			}
			fid_of[n] = flow_order ? fl : fl * (RANKS + 1) + r;
			ok = qd_enqueue(p, r);
			/* the victim goes before the arrival is queued */
			if (qd.ndropped > before) {
				struct pq_pkt *d = qd.dropped[before];

				assert_int_equal(qd.ndropped, before + 1);
				assert_true(best != U32_MAX);
				if (d == p) {
					assert_true(rank_of(&pkts[best]) <= r);
				} else {
					assert_ptr_equal(d, &pkts[best]);
					assert_true(rank_of(d) > r);
					queued[best] = false;
					mr_pop(&runs[fid_of[best]], false);
					tchg[fid_of[best]] = ++clock;
				}
			}
			if (ok) {
				queued[n] = true;
				mr_push(&runs[fid_of[n]], r);
				tchg[fid_of[n]] = ++clock;
			}
			n++;
		} else {
			struct pq_pkt *p = qd_peek();
			u32 best = MERCURY_NO_RANK;

			if (!p) {
				assert_null(qd_dequeue());
				continue;
			}
			assert_ptr_equal(qd_dequeue(), p);
			/* the flow's oldest packet */
			for (j = 0; j < (u32)(p - pkts); j++)
				assert_true(!queued[j] || fid_of[j] != fid_of[p - pkts]);
			/* from a flow at the most urgent served rank */
			for (j = 0; j < FIDS; j++)
				best = mr_min(&runs[j]) < best ? mr_min(&runs[j]) : best;
			assert_int_equal(mr_min(&runs[fid_of[p - pkts]]), best);
			queued[p - pkts] = false;
			mr_pop(&runs[fid_of[p - pkts]], true);
		}
		live = 0;
		for (j = 0; j < n; j++)
			live += queued[j];
		assert_int_equal(live, qd.qlen);
	}
	while (qd_dequeue())
		;
	assert_int_equal(qd.pq->core.nflows, 0);
	assert_int_equal(qd.pq->core.memory_usage, 0);
	assert_int_equal(qd.pq->core.active_levels, 0);
	assert_int_equal(mercury_ranks_last(&qd.pq->core.tails), MERCURY_NO_RANK);
	qd_fini();
}

static void test_contract_random_flow_order(void **state)
{
	(void)state;
	contract_random(true);
}

static void test_contract_random_no_flow_order(void **state)
{
	(void)state;
	contract_random(false);
}

/* A flow that cannot be allocated: the packet is refused, nothing else
 * changes; reserve() before evicting keeps the victims for such a packet.
 */
static void test_flow_alloc_failure(void **state)
{
	struct mercury_sched_data *c;
	u32 i;

	(void)state;
	if (use_v1)
		skip();	/* v1 had a fixed table */
	qd_init(64, true, 100, 0);
	c = &qd.pq->core;
	qd_enqueue(pkt(0, 0x1000, 1000), 5);
	assert_true(qd_dequeue() == &pkts[0]);	/* its flow is now idle */
	assert_int_equal(c->nidle, 1);
	qd_enqueue(pkt(1, 0x1000, 1000), 5);
	pq_fail_allocs = 1;
	assert_int_equal(mercury_flow_reserve(c, pq_key(&pkts[1]), 5), 0);	/* its flow exists */
	pkt(2, 0x2000, 1000);
	assert_int_equal(mercury_flow_reserve(c, pq_key(&pkts[2]), 5), -ENOMEM);
	mercury_cb(&pkts[2].skb)->rank = 5;
	pq_fail_allocs = 1;
	assert_int_equal(mercury_insert(c, &pkts[2].skb, pq_key(&pkts[2])), -ENOMEM);
	pq_fail_allocs = 0;
	assert_int_equal(c->nflows, 1);
	assert_int_equal(c->t.levels[5].qlen, 1);
	for (i = 0; i < 1; i++)
		assert_true(qd_dequeue() == &pkts[1]);
	assert_null(qd_dequeue());
	qd_fini();
}

/* Untagged last with a share, against a source that never has two packets
 * queued (it sends the next one when the last has left): while tagged
 * packets wait, it gets its share of the bytes and no more.
 */
static void test_untagged_sparse_share(void **state)
{
	struct mercury_sched_data *c;
	u32 i, n = 0, ub = 0, tb = 0, gap = 0, min_gap = U32_MAX;
	struct pq_pkt *p;

	(void)state;
	if (use_v1)
		skip();
	qd_init(64, true, NPKT, 0);
	c = &qd.pq->core;
	c->untagged_rank = 64;
	c->share = 10;
	for (i = 0; i < 2000; i++)
		qd_enqueue(pkt(n++, 0x2000, 1000), 3);
	for (i = 0; i < 1000; i++) {
		if (list_empty(&c->t.levels[64].flows))
			qd_enqueue(pkt(n++, 0x1000, 1000), 64);
		p = qd_peek();
		assert_ptr_equal(qd_dequeue(), p);
		if (rank_of(p) == 64) {
			ub += p->skb.len;
			if (ub > 1000 && gap < min_gap)
				min_gap = gap;
			gap = 0;
		} else {
			tb += p->skb.len;
			gap++;
		}
	}
	printf("# sparse untagged source: %u%% of the bytes, %u tagged packets between\n",
	       100 * ub / (ub + tb), min_gap);
	/* one packet in ten, and at least nine tagged ones between */
	assert_true(ub * 100 <= (ub + tb) * 10 + 1000 * 100);
	assert_true(ub * 100 >= (ub + tb) * 9);
	assert_true(min_gap >= 9);
	/* and a tagged trickle against an untagged bulk, placed first with
	 * the default cap: each tagged packet waits for at most one untagged
	 */
	while (qd_dequeue())
		;
	c->untagged_rank = 0;
	c->share = MERCURY_FIRST_SHARE;
	c->share_credit = 0;
	for (i = 0; i < 2000; i++)
		qd_enqueue(pkt(n++, 0x1000, 1000), 0);
	for (i = 0, gap = 0; i < 1000; i++) {
		if (c->active_levels < 2) {
			qd_enqueue(pkt(n++, 0x2000, 1000), 3);
			gap = 0;
		}
		p = qd_dequeue();
		if (rank_of(p) == 0)
			assert_true(++gap <= 1);
	}
	while (qd_dequeue())
		;
	qd_fini();
}

/* A lower quantum while large packets are queued: peek and dequeue still
 * agree, and the lower quantum applies once the queue is empty.
 */
static void test_quantum_lowered_under_load(void **state)
{
	struct mercury_sched_data *c;
	struct pq_pkt *p;
	u32 i, n = 0;

	(void)state;
	if (use_v1)
		skip();
	qd_init(8, true, NPKT, 3028);
	c = &qd.pq->core;
	for (i = 0; i < 60; i++)
		qd_enqueue(pkt(n++, 0x1000 * (1 + i % 3), 60000), 2);
	for (i = 0; i < 3; i++)
		qd_dequeue();
	mercury_set_quantum(c, 256);
	assert_int_equal(c->drr_quantum, 60000);
	for (i = 0; i < 57; i++) {
		p = qd_peek();
		assert_non_null(p);
		assert_ptr_equal(qd_dequeue(), p);
		/* still one packet per flow and round */
		assert_int_equal(p->skb.hash, 0x1000 * (1 + i % 3));
	}
	assert_null(qd_peek());
	assert_int_equal(c->drr_quantum, 256);
	/* a large packet raises it again until the queue empties */
	qd_enqueue(pkt(n++, 0x1000, 60000), 2);
	assert_int_equal(c->drr_quantum, 60000);
	qd_dequeue();
	assert_int_equal(c->drr_quantum, 256);
	qd_fini();
}

/* mercury_can_evict says exactly whether mercury_victim, called until
 * enough is freed, gets there; random queues, both flow modes.
 */
static void test_can_evict_exact(void **state)
{
	u32 round, i, n, r, pkts, got_pkts;
	u64 s = 7, bytes, got_bytes;
	struct sk_buff *v;
	bool fo, can;

	(void)state;
	if (use_v1)
		skip();
	for (round = 0; round < 400; round++) {
		fo = round % 2;
		qd_init(50, fo, NPKT, 0);
		n = 1 + rnd(&s) % 60;
		for (i = 0; i < n; i++)
			qd_enqueue(pkt(i, 0x100 * (1 + rnd(&s) % 5),
				       100 + rnd(&s) % 3000), 1 + rnd(&s) % 50);
		r = 1 + rnd(&s) % 50;
		pkts = rnd(&s) % 3;
		bytes = rnd(&s) % 40000;
		can = mercury_can_evict(&qd.pq->core, r, pkts, bytes);
		got_pkts = 0;
		got_bytes = 0;
		while (got_pkts < pkts || got_bytes < bytes) {
			v = mercury_victim(&qd.pq->core, r);
			if (!v)
				break;
			got_pkts++;
			got_bytes += v->truesize;
			qd.qlen--;
			qd.pq->len--;
		}
		assert_int_equal(can, got_pkts >= pkts && got_bytes >= bytes);
		while (qd_dequeue())
			;
		qd_fini();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_victim_flow_order_off),
		cmocka_unit_test(test_victim_flow_order_on),
		cmocka_unit_test(test_flows_colliding),
		cmocka_unit_test(test_peek_consistency),
		cmocka_unit_test(test_drr_bounded_and_fair),
		cmocka_unit_test(test_drr_byte_fair),
		cmocka_unit_test(test_untagged_first_bounded),
		cmocka_unit_test(test_untagged_last_share),
		cmocka_unit_test(test_growing_urgency),
		cmocka_unit_test(test_contract_random_flow_order),
		cmocka_unit_test(test_contract_random_no_flow_order),
		cmocka_unit_test(test_flow_alloc_failure),
		cmocka_unit_test(test_untagged_sparse_share),
		cmocka_unit_test(test_quantum_lowered_under_load),
		cmocka_unit_test(test_can_evict_exact),
	};
	const char *core = getenv("MERCURY_CORE");

	use_v1 = core && !strcmp(core, "v1");
	return cmocka_run_group_tests_name(use_v1 ? "core-v1" : "core", tests,
					   NULL, NULL);
}
