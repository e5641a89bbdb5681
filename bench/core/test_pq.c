// SPDX-License-Identifier: GPL-2.0
/*
 * test_pq.c	The three queues of the benchmark give the service order they
 *		claim, so the benchmark compares structures doing the same job.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pq.h"

#define N 2000

static struct pq_pkt pkts[N];

static u32 rnd(u64 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (u32)*s;
}

static void prep(u32 flows)
{
	u32 i;

	memset(pkts, 0, sizeof(pkts));
	for (i = 0; i < N; i++) {
		pkts[i].skb.len = 1000;
		pkts[i].skb.hash = (u32)(((u64)(i % flows) << 32) / flows);
		qdisc_skb_cb(&pkts[i].skb)->pkt_len = 1000;
	}
}

static struct pq *make(enum pq_kind kind, u32 levels, u32 buckets, bool fo)
{
	struct pq_cfg cfg = { .kind = kind, .levels = levels,
			      .buckets = buckets, .flow_order = fo,
			      .capacity = N };
	struct pq *pq = NULL;

	assert_int_equal(pq_create(&pq, &cfg), 0);
	return pq;
}

/* Heap and tree: drained in (rank, insertion) order exactly. */
static void sorted_drain(enum pq_kind kind)
{
	struct pq *pq = make(kind, TC_MERCURY_MAX_LEVELS, 1, false);
	u32 rank[N], i, last_rank = 0;
	size_t last_idx = 0;
	u64 s = 42;

	prep(1);
	for (i = 0; i < N; i++) {
		rank[i] = 1 + rnd(&s) % 50;	/* many equal ranks */
		pq_push(pq, &pkts[i], rank[i]);
	}
	for (i = 0; i < N; i++) {
		struct pq_pkt *p = pq_pop(pq);
		size_t idx;

		assert_non_null(p);
		idx = (size_t)(p - pkts);
		assert_int_equal(pq_rank_of(pq, p), rank[idx]);
		assert_true(rank[idx] >= last_rank);
		if (i && rank[idx] == last_rank)
			assert_true(idx > last_idx);	/* FIFO within a rank */
		last_rank = rank[idx];
		last_idx = idx;
	}
	assert_null(pq_pop(pq));
	pq_destroy(pq);
}

static void test_heap_order(void **state)
{
	(void)state;
	sorted_drain(PQ_HEAP);
}

static void test_rbtree_order(void **state)
{
	(void)state;
	sorted_drain(PQ_RBTREE);
}

/* Mercury without flow order, one flow: strict rank order while levels
 * do not exceed buckets (each rank its own bucket), across all three
 * bitmap words (4096 levels span 65 leaf words, two mid words).
 */
static void test_mercury_rank_order(void **state)
{
	static const u32 levels[] = { 64, 4096 };
	u32 rank[N], i, j;
	u64 s = 7;

	(void)state;
	for (j = 0; j < 2; j++) {
		struct pq *pq = make(PQ_MERCURY, levels[j], 4096, false);
		u32 last = 0;

		prep(1);
		for (i = 0; i < N; i++) {
			rank[i] = 1 + rnd(&s) % levels[j];
			pq_push(pq, &pkts[i], rank[i]);
		}
		for (i = 0; i < N; i++) {
			struct pq_pkt *p = pq_pop(pq);

			assert_non_null(p);
			assert_int_equal(pq_rank_of(pq, p), rank[p - pkts]);
			assert_true(rank[p - pkts] >= last);
			last = rank[p - pkts];
		}
		assert_null(pq_pop(pq));
		pq_destroy(pq);
	}
}

/* Mercury with flow order: each flow leaves in FIFO order, and the first
 * packet out belongs to the flow holding the most urgent packet.
 */
static void test_mercury_flow_order(void **state)
{
	struct pq *pq = make(PQ_MERCURY, 1024, 4096, true);
	size_t last[8], idx;
	u32 i, f, best = 0, best_flow = 0;
	u64 s = 99;

	(void)state;
	prep(8);
	for (i = 0; i < N; i++) {
		u32 r = 1 + rnd(&s) % 1024;

		if (!best || r < best) {
			best = r;
			best_flow = i % 8;
		}
		pq_push(pq, &pkts[i], r);
	}
	for (f = 0; f < 8; f++)
		last[f] = SIZE_MAX;
	for (i = 0; i < N; i++) {
		struct pq_pkt *p = pq_pop(pq);

		assert_non_null(p);
		idx = (size_t)(p - pkts);
		if (!i)
			assert_int_equal(idx % 8, best_flow);
		f = idx % 8;
		assert_true(last[f] == SIZE_MAX || idx > last[f]);
		last[f] = idx;
	}
	assert_null(pq_pop(pq));
	assert_int_equal(pq->core.nflows, 0);
	assert_int_equal(pq->core.active_levels, 0);
	pq_destroy(pq);
}

/* The hold model keeps occupancy and never loses a packet. */
static void test_hold_keeps_occupancy(void **state)
{
	enum pq_kind k;
	u64 s = 3;
	u32 i;

	(void)state;
	for (k = 0; k < PQ_NKINDS; k++) {
		struct pq *pq = make(k, 256, 4096, true);

		prep(64);
		for (i = 0; i < 100; i++)
			pq_push(pq, &pkts[i], 1 + rnd(&s) % 256);
		for (i = 0; i < 50000; i++)
			pq_push(pq, pq_pop(pq), 1 + rnd(&s) % 256);
		assert_int_equal(pq->len, 100);
		for (i = 0; i < 100; i++)
			assert_non_null(pq_pop(pq));
		assert_null(pq_pop(pq));
		pq_destroy(pq);
	}
}

static void test_bad_config(void **state)
{
	struct pq_cfg cfg = { .kind = PQ_MERCURY, .levels = 0, .buckets = 1 };
	struct pq *pq = NULL;

	(void)state;
	assert_int_equal(pq_create(&pq, &cfg), -EINVAL);
	cfg.levels = TC_MERCURY_MAX_LEVELS + 1;
	assert_int_equal(pq_create(&pq, &cfg), -EINVAL);
	cfg.levels = 64;
	cfg.buckets = 0;
	assert_int_equal(pq_create(&pq, &cfg), -EINVAL);
	cfg.kind = PQ_NKINDS;
	assert_int_equal(pq_create(&pq, &cfg), -EINVAL);
	assert_null(pq);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heap_order),
		cmocka_unit_test(test_rbtree_order),
		cmocka_unit_test(test_mercury_rank_order),
		cmocka_unit_test(test_mercury_flow_order),
		cmocka_unit_test(test_hold_keeps_occupancy),
		cmocka_unit_test(test_bad_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
