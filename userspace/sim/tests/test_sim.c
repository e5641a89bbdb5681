// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Unit tests of the simulator core.  The tiny2 fixture has two layers, a
 * then b, of 1000 bytes each; forward 1 ms per layer, backward 1 ms with
 * b's gradient ready at 0.45 ms and a's at 1.0 ms.  At 8 Mbit/s a link
 * moves 1000 bytes per ms; with 500-byte chunks each tensor is two chunks
 * (a0 a1, b0 b1) of 0.5 ms each.  Every expected time below is worked out
 * by hand in the comment above its assertion (times in ms from backward
 * start; the iteration is the next backward end minus this one: the
 * forward after backward end 1.0 runs a then b, 1 ms each, a no earlier
 * than a is home, b no earlier than b is home, then 1 ms of backward).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "msim.h"

#define EPS 1e-9
#define H200 "../../../profiles/h200/"

static struct mt_profile tiny;

static void hand_params(struct msim_params *p)
{
	msim_params_default(p);
	p->workers = 1;
	p->servers = 1;
	p->bandwidth_bps = 8e6;		/* 1000 bytes per ms */
	p->latency_s = 0;
	p->hdr = 0;
	p->mtu = 152;			/* 100-byte payload per packet */
	p->msg_overhead_s = 0;
	p->frame_cost_s = 0;		/* start-up costs: own tests */
	p->frame_hdr = 0;
	p->chunk = 500;			/* two chunks per tensor */
}

/* Chunk times from the trace hook, in ms since backward start. */
struct trace {
	int n;
	struct {
		int link, tensor, chunk;
		double start, end;
	} c[64];
};

static void trace_cb(void *ctx, int link, int tensor, int chunk,
		     double start, double end)
{
	struct trace *t = ctx;

	assert_true(t->n < 64);
	t->c[t->n].link = link;
	t->c[t->n].tensor = tensor;
	t->c[t->n].chunk = chunk;
	t->c[t->n].start = start * 1e3;
	t->c[t->n].end = end * 1e3;
	t->n++;
}

/* The n-th chunk to finish on a link: which one, and when. tensor 0 is b
 * (ready first), 1 is a. */
static void expect_chunk(const struct trace *t, int link, int nth,
			 int tensor, int chunk, double start, double end)
{
	int i, k = 0;

	for (i = 0; i < t->n; i++) {
		if (t->c[i].link != link || k++ != nth)
			continue;
		assert_int_equal(t->c[i].tensor, tensor);
		assert_int_equal(t->c[i].chunk, chunk);
		assert_float_equal(t->c[i].start, start, EPS);
		assert_float_equal(t->c[i].end, end, EPS);
		return;
	}
	fail_msg("link %d has no chunk #%d", link, nth);
}

static double run(const struct msim_params *p, enum msim_scheme s)
{
	struct msim_result r;

	assert_int_equal(msim_run(&tiny, p, s, &r), 0);
	return r.iteration_ms;
}

static int setup_tiny(void **state)
{
	char err[256];

	(void)state;
	return mt_profile_load("fixtures/tiny2.json", &tiny, err,
				 sizeof(err));
}

static int teardown_tiny(void **state)
{
	(void)state;
	mt_profile_free(&tiny);
	return 0;
}

static void test_tiny_fifo(void **state)
{
	struct msim_params p;
	struct msim_result r;

	(void)state;
	hand_params(&p);
	/* push b0 0.45-0.95, b1 -1.45, a0 -1.95, a1 -2.45; each chunk is
	 * summed when pushed and pulled at once: b0 0.95-1.45, b1 -1.95,
	 * a0 -2.45, a1 -2.95; forward from 1: a waits to 2.95, runs to
	 * 3.95, b to 4.95; backward ends 5.95: iteration 4.95, stall 1.95 */
	assert_int_equal(msim_run(&tiny, &p, MSIM_FIFO, &r), 0);
	assert_float_equal(r.iteration_ms, 4.95, EPS);
	assert_float_equal(r.stall_ms, 1.95, EPS);
	assert_float_equal(r.first_ms, 3.0, EPS);
	assert_float_equal(r.push_done_ms, 2.45, EPS);
}

static void test_tiny_prio(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	/* b1 is on the wire when a arrives and b is not preempted: as
	 * fifo */
	assert_float_equal(run(&p, MSIM_PRIO), 4.95, EPS);
}

static void test_tiny_ideal(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	/* push b0 0.45-0.95; a preempts b1 at 1.0 (50 B of it sent, a
	 * piece summed at once): a0 1.0-1.5, a1 -2.0, rest of b1
	 * 2.0-2.45.  pull b0 0.95-1.45, piece -1.5, a0 1.5-2.0, a1
	 * 2.0-2.5, rest of b1 (summed 2.45) 2.5-2.95; forward a 2.5-3.5,
	 * b 3.5-4.5 -> 4.5 */
	assert_float_equal(run(&p, MSIM_IDEAL), 4.5, EPS);
}

static void test_tiny_mercury(void **state)
{
	struct msim_params p;
	struct trace t = { 0 };

	(void)state;
	hand_params(&p);
	p.trace = trace_cb;
	p.trace_ctx = &t;
	/* b0 pushed 0.45-0.95; at 1.0 b1 has 50 B out, its packet (b's
	 * 6th) ends at 1.05, then a0 1.05-1.55, a1 -2.05, rest of b1
	 * 2.05-2.45.  The preemption ends b1's first piece (100 B), summed
	 * at 1.05.  pull b0 0.95-1.45, piece 1.45-1.55, a0 1.55-2.05, a1
	 * -2.55, rest of b1 (summed 2.45) 2.55-2.95; forward a 2.55-3.55,
	 * b 3.55-4.55 */
	assert_float_equal(run(&p, MSIM_MERCURY), 4.55, EPS);
	assert_int_equal(t.n, 9);
	expect_chunk(&t, 0, 0, 0, 0, 0.45, 0.95);
	expect_chunk(&t, 0, 1, 1, 0, 1.05, 1.55);
	expect_chunk(&t, 0, 2, 1, 1, 1.55, 2.05);
	expect_chunk(&t, 0, 3, 0, 1, 0.95, 2.45);	/* preempted */
	expect_chunk(&t, 1, 0, 0, 0, 0.95, 1.45);
	expect_chunk(&t, 1, 1, 0, 1, 1.45, 1.55);	/* b1's piece */
	expect_chunk(&t, 1, 2, 1, 0, 1.55, 2.05);
	expect_chunk(&t, 1, 3, 1, 1, 2.05, 2.55);
	expect_chunk(&t, 1, 4, 0, 1, 2.55, 2.95);
}

static void test_tiny_mercury_whole(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	p.chunk = 1000;	/* one chunk per tensor: per-tensor aggregation */
	/* 550 B sent at 1.0: b's 6th packet ends at 1.05, then a
	 * 1.05-2.05, b 2.05-2.45; pull b's first 600 B 1.05-1.65, a
	 * 2.05-3.05, the other 400 B of b 3.05-3.45; forward a
	 * 3.05-4.05, b 4.05-5.05 -> 5.05 */
	assert_float_equal(run(&p, MSIM_MERCURY), 5.05, EPS);
	/* 450-byte chunks (450, 450, 100): b1 starts mid-packet at stream
	 * byte 450 and at 1.0 has 100 B out; the packet is stream bytes
	 * 500-600, so it ends at 1.05 (150 B into b1), not at 1.0.  push
	 * b0 0.45-0.9, a0 1.05-1.5, a1 -1.95, a2 -2.05, rest of b1
	 * 2.05-2.35, b2 -2.45; pull b0 0.9-1.35, b1's first 150 B -1.5,
	 * a0 1.5-1.95, a1 -2.4, a2 (more urgent than b1, summed 2.35)
	 * -2.5, rest of b1 -2.8, b2 -2.9; forward a 2.5-3.5, b 3.5-4.5 */
	p.chunk = 450;
	assert_float_equal(run(&p, MSIM_MERCURY), 4.5, EPS);
}

static void test_tiny_chunk_pipelining(void **state)
{
	struct msim_params p;
	struct trace t = { 0 };

	(void)state;
	hand_params(&p);
	p.trace = trace_cb;
	p.trace_ctx = &t;
	/* fifo, b alone on the links until 1.45: b's chunk 0 is summed
	 * when pushed (0.95) and its pull starts then, while chunk 1 is
	 * still being pushed (0.95-1.45) */
	assert_float_equal(run(&p, MSIM_FIFO), 4.95, EPS);
	expect_chunk(&t, 0, 0, 0, 0, 0.45, 0.95);
	expect_chunk(&t, 0, 1, 0, 1, 0.95, 1.45);
	expect_chunk(&t, 1, 0, 0, 0, 0.95, 1.45);
	expect_chunk(&t, 1, 1, 0, 1, 1.45, 1.95);
	expect_chunk(&t, 1, 3, 1, 1, 2.45, 2.95);
	/* whole-tensor aggregation (one chunk per tensor) serialises push
	 * and pull: pull b 1.45-2.45, a 2.45-3.45 -> 5.45 */
	p.chunk = 1000;
	t.n = 0;
	assert_float_equal(run(&p, MSIM_FIFO), 5.45, EPS);
	expect_chunk(&t, 1, 0, 0, 0, 1.45, 2.45);
	/* many small chunks tend to pipelining at byte level: pull ends
	 * one 1-byte chunk after push, so a is home at 2.45 + 0.001 */
	p.chunk = 1;
	p.trace = NULL;
	assert_float_equal(run(&p, MSIM_FIFO), 4.451, 1e-6);
}

static void test_tiny_headers(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	p.hdr = 10;	/* 5 packets of 110 wire bytes: 550 per chunk */
	/* fifo: push b0 0.45-1.0, b1 -1.55, a0 -2.1, a1 -2.65; pull
	 * b0 1.0-1.55, b1 -2.1, a0 -2.65, a1 -3.2; forward 3.2-4.2-5.2 */
	assert_float_equal(run(&p, MSIM_FIFO), 5.2, EPS);
	/* mercury: b0 ends at 1.0 on a packet boundary, so a goes at
	 * once: a0 1.0-1.55, a1 -2.1, b1 2.1-2.65; pull b0 1.0-1.55,
	 * a0 1.55-2.1, a1 -2.65, b1 -3.2; forward a 2.65-3.65, b (home
	 * 3.2) 3.65-4.65 */
	assert_float_equal(run(&p, MSIM_MERCURY), 4.65, EPS);
	/* ideal pays the headers too: the same schedule as mercury here */
	assert_float_equal(run(&p, MSIM_IDEAL), 4.65, EPS);
	/* one chunk per tensor: the preemption at 1.0 (550 of 1100 wire
	 * bytes) still ends a piece that is summed and pulled 1.0-1.55;
	 * a 1.0-2.1, rest of b 2.1-2.65; pull a 2.1-3.2, rest of b
	 * 3.2-3.75: forward a 3.2-4.2, b 4.2-5.2 (5.3 if b were summed
	 * only when whole: b home 4.3) */
	p.chunk = 1000;
	assert_float_equal(run(&p, MSIM_MERCURY), 5.2, EPS);
	p.chunk = 500;
	/* packets are cut from the stream, not from each chunk: with
	 * 450-byte chunks (450, 450, 100) the headers fall 5, 4, 1 per
	 * chunk (packet 400-500 straddles chunks 0 and 1), so chunks are
	 * 500, 490, 110 wire bytes.  fifo: push b0 0.45-0.95, b1 -1.44,
	 * b2 -1.55, a0 -2.05, a1 -2.54, a2 -2.65; pull b0 0.95-1.45,
	 * b1 -1.94, b2 -2.05, a0 -2.55, a1 -3.04, a2 -3.15; forward
	 * 3.15-4.15-5.15 (a header per chunk would give 5.17) */
	p.chunk = 450;
	assert_float_equal(run(&p, MSIM_FIFO), 5.15, EPS);
}

static void test_tiny_bytesched_credit(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	p.partition = 500;
	p.credit = 500;
	/* one partition in flight: b0 push 0.45-0.95 pull -1.45; a0
	 * 1.45-1.95-2.45; a1 2.45-2.95-3.45; b1 3.45-3.95-4.45;
	 * forward a 3.45-4.45, b 4.45-5.45 */
	assert_float_equal(run(&p, MSIM_BYTESCHED), 5.45, EPS);
	p.credit = 1000;
	/* two in flight: b0,b1 pushed 0.45-1.45, b pulled by 1.95; a0
	 * dispatched 1.45 push -1.95 pull -2.45, a1 dispatched 1.95
	 * push -2.45 pull -2.95; forward a 2.95-3.95, b -4.95: the
	 * partitions pipeline like fifo's chunks */
	assert_float_equal(run(&p, MSIM_BYTESCHED), 4.95, EPS);
}

static void test_tiny_bytesched_overhead(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	p.partition = 1000;
	p.credit = 1000000;
	p.msg_overhead_s = 100e-6;	/* 0.1 ms = 100 bytes of link time */
	/* as fifo with 1100-byte messages: 5.75 */
	assert_float_equal(run(&p, MSIM_BYTESCHED), 5.75, EPS);
	/* every scheme pays it per message: fifo-stream's b0 and a0 (each
	 * tensor's first chunk) take 600 B.  push b0 0.45-1.05, b1 -1.55,
	 * a0 -2.15, a1 -2.65; pull b0 1.05-1.65, b1 -2.15, a0 -2.75, a1
	 * -3.25; forward a 3.25-4.25, b -5.25 */
	assert_float_equal(run(&p, MSIM_FIFO), 5.25, EPS);
}

static void test_tiny_vanilla(void **state)
{
	struct msim_params p;
	struct trace t = { 0 };

	(void)state;
	hand_params(&p);
	p.trace = trace_cb;
	p.trace_ctx = &t;
	/* a stock PS: whole tensors in backward order, each summed only
	 * when all of it is in (the 500-byte chunk is ignored).  push b
	 * 0.45-1.45, a (ready 1.0, waits) 1.45-2.45; b summed 1.45, pulled
	 * 1.45-2.45; a summed 2.45, pulled 2.45-3.45; forward a 3.45-4.45,
	 * b 4.45-5.45, backward -6.45: iteration 5.45, stall 5.45 - 1 - 2 */
	assert_float_equal(run(&p, MSIM_VANILLA), 5.45, EPS);
	assert_int_equal(t.n, 4);
	expect_chunk(&t, 0, 0, 0, 0, 0.45, 1.45);
	expect_chunk(&t, 0, 1, 1, 0, 1.45, 2.45);
	expect_chunk(&t, 1, 0, 0, 0, 1.45, 2.45);
	expect_chunk(&t, 1, 1, 1, 0, 2.45, 3.45);
	p.trace = NULL;
	{
		struct msim_result r;

		assert_int_equal(msim_run(&tiny, &p, MSIM_VANILLA, &r), 0);
		assert_float_equal(r.stall_ms, 2.45, EPS);
	}
	/* streaming FIFO with whole-tensor chunks is the same schedule */
	p.chunk = 1000;
	assert_float_equal(run(&p, MSIM_FIFO), 5.45, EPS);
	/* the chunk never matters to vanilla */
	p.chunk = 1;
	assert_float_equal(run(&p, MSIM_VANILLA), 5.45, EPS);
	/* latency 0.1 ms: b summed 1.55, pulled 1.55-2.55; a pushed
	 * 1.45-2.45, summed 2.55, pulled 2.55-3.55, home 3.65; forward a
	 * 3.65-4.65, b -5.65 */
	p.latency_s = 100e-6;
	assert_float_equal(run(&p, MSIM_VANILLA), 5.65, EPS);
}

static void test_tiny_frame_rule(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	/* 50-byte frame headers (no packet headers).  fifo-stream: 2
	 * frames per tensor, 550 B per chunk: push b0 0.45-1.0, b1 -1.55,
	 * a0 -2.1, a1 -2.65; pull b0 1.0-1.55, b1 -2.1, a0 -2.65, a1 -3.2;
	 * forward a 3.2-4.2, b -5.2 */
	p.frame_hdr = 50;
	assert_float_equal(run(&p, MSIM_FIFO), 5.2, EPS);
	/* vanilla: one frame per tensor, 1050 B: push b 0.45-1.5, a
	 * -2.55; pull b 1.5-2.55, a 2.55-3.6; forward a 3.6-4.6, b -5.6 */
	assert_float_equal(run(&p, MSIM_VANILLA), 5.6, EPS);
	/* ideal pays the same rule, with its preemptive schedule: push b0
	 * 0.45-1.0; a, ready at 1.0, goes first: a0 -1.55, a1 -2.1, b1
	 * -2.65; pull b0 1.0-1.55, a0 -2.1, a1 -2.65, b1 -3.2; forward a
	 * 2.65-3.65, b -4.65 */
	assert_float_equal(run(&p, MSIM_IDEAL), 4.65, EPS);
	/* and Mercury, whose packets cannot be preempted, no better */
	assert_true(run(&p, MSIM_MERCURY) >= 4.65 - EPS);

	/* a frame holds its sender for at least 0.75 ms.  fifo-stream's
	 * 500-byte frames take 0.75 ms each: push b0 0.45-1.2, b1 -1.95,
	 * a0 -2.7, a1 -3.45; pull b0 1.2-1.95, b1 -2.7, a0 -3.45, a1 -4.2;
	 * forward a 4.2-5.2, b -6.2 */
	p.frame_hdr = 0;
	p.frame_cost_s = 750e-6;
	assert_float_equal(run(&p, MSIM_FIFO), 6.2, EPS);
	/* vanilla's 1000-byte frames take 1 ms on the wire anyway: 5.45 */
	assert_float_equal(run(&p, MSIM_VANILLA), 5.45, EPS);
	/* bytesched, 500-byte partitions and a credit covering both: the
	 * same frames as fifo-stream, the same times (each partition is
	 * summed whole, like a chunk) */
	p.partition = 500;
	p.credit = 1000000;
	assert_float_equal(run(&p, MSIM_BYTESCHED), 6.2, EPS);
	/* ideal pays the frames too but preempts inside one: b0 0.45-1.0
	 * (0.55 of its 0.75 ms), a0 1.0-1.75, a1 -2.5, rest of b0 -2.7, b1
	 * -3.45; pull a0 1.75-2.5, a1 -3.25, b1 3.45-4.2; forward a
	 * 3.25-4.25, b -5.25 */
	assert_float_equal(run(&p, MSIM_IDEAL), 5.25, EPS);
	/* two servers: every tensor is two 500-byte shards, so vanilla
	 * sends two frames per tensor (a worker's path: 2000 B/ms, a frame
	 * 0.75 ms, a tensor 1.5 ms, wire 0.5 ms): push b 0.45-1.95, a
	 * -3.45; pull b 1.95-3.45, a -4.95; forward a 4.95-5.95, b -6.95 */
	p.servers = 2;
	p.workers = 2;
	p.bandwidth_bps = 16e6;
	assert_float_equal(run(&p, MSIM_VANILLA), 6.95, EPS);
	assert_float_equal(msim_stream_frames(1000, 2, 0), 2, EPS);
	/* shards of 500 B in 100-byte frames: 5 each */
	assert_float_equal(msim_stream_frames(1000, 2, 100), 10, EPS);
	/* 251 elements: shards of 504 and 500 B, 2 frames of 256 each */
	assert_float_equal(msim_stream_frames(1004, 2, 256), 4, EPS);
	/* 2 elements on 4 servers: two one-element shards */
	assert_float_equal(msim_stream_frames(8, 4, 0), 2, EPS);

	/* the default chunk: 64 KiB, doubled until a frame's wire time on
	 * a worker's path covers a 4 us frame cost: 100 Gbit/s needs 50 kB
	 * (64 KiB), 400 Gbit/s 200 kB (256 KiB), and 400 Gbit/s shared by
	 * 16 workers over 8 servers 100 kB (128 KiB) */
	msim_params_default(&p);
	p.frame_cost_s = 4e-6;
	p.bandwidth_bps = 100e9;
	assert_int_equal(msim_auto_chunk(&p), 65536);
	p.bandwidth_bps = 400e9;
	assert_int_equal(msim_auto_chunk(&p), 262144);
	p.workers = 16;
	assert_int_equal(msim_auto_chunk(&p), 131072);
}

static void test_tiny_latency(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	p.latency_s = 100e-6;
	/* push b0 0.45-0.95, b1 -1.45, a0 -1.95, a1 -2.45; at the server
	 * 0.1 later: pull b0 1.05-1.55, b1 -2.05, a0 -2.55, a1 2.55-3.05,
	 * home 3.15; forward a 3.15-4.15, b -5.15 */
	assert_float_equal(run(&p, MSIM_FIFO), 5.15, EPS);
}

static void test_tiny_servers(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	p.workers = 2;
	p.servers = 1;	/* server links carry twice: half rate per worker */
	/* 1 ms per chunk: push b0 0.45-1.45, b1 -2.45, a0 -3.45, a1
	 * -4.45; pull one chunk later, a1 4.45-5.45; forward a 5.45-6.45,
	 * b -7.45 */
	assert_float_equal(run(&p, MSIM_FIFO), 7.45, EPS);
	p.workers = 1;
	p.servers = 2;	/* more servers than workers does not speed up */
	assert_float_equal(run(&p, MSIM_FIFO), 4.95, EPS);
}

static void test_tiny_time_scale(void **state)
{
	struct msim_params p;

	(void)state;
	hand_params(&p);
	p.time_scale = 2;
	/* b ready 0.9, a 2.0: push b0 0.9-1.4, b1 -1.9, a0 2.0-2.5, a1
	 * -3.0; pull b0 1.4-1.9, b1 -2.4, a0 2.5-3.0, a1 -3.5; backward
	 * ends 2; forward a 3.5-5.5, b -7.5; backward -9.5 -> 7.5 */
	assert_float_equal(run(&p, MSIM_FIFO), 7.5, EPS);
}

static void test_tiny_huge_bandwidth(void **state)
{
	struct msim_params p;
	int s;

	(void)state;
	hand_params(&p);
	p.bandwidth_bps = 1e15;
	/* communication vanishes: every scheme runs at compute speed */
	for (s = 0; s < MSIM_NSCHEMES; s++)
		assert_float_equal(run(&p, s), 3.0, 1e-6);
}

static void test_bad_params(void **state)
{
	struct msim_params p;
	struct msim_result r;
	char err[128];

	(void)state;
	hand_params(&p);
	p.workers = 0;
	assert_int_equal(msim_params_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "workers"));
	assert_int_equal(msim_run(&tiny, &p, MSIM_FIFO, &r), -EINVAL);
	hand_params(&p);
	p.bandwidth_bps = NAN;
	assert_int_equal(msim_params_check(&p, err, sizeof(err)), -EINVAL);
	hand_params(&p);
	p.iterations = 1;
	assert_int_equal(msim_params_check(&p, err, sizeof(err)), -EINVAL);
	hand_params(&p);
	p.time_scale = 0;
	assert_int_equal(msim_params_check(&p, err, sizeof(err)), -EINVAL);
	hand_params(&p);
	assert_int_equal(msim_run(&tiny, &p, MSIM_NSCHEMES, &r), -EINVAL);
	assert_int_equal(msim_run(&tiny, &p, -1, &r), -EINVAL);
}

static void test_load_h200_timeline(void **state)
{
	struct mt_profile pr;
	char err[256];

	(void)state;
	assert_int_equal(mt_profile_load("fixtures/tiny3.json", &pr, err,
					   sizeof(err)), 0);
	assert_string_equal(pr.model, "tiny3");
	assert_int_equal(pr.ncalls, 3);
	/* each call runs until the next starts; the last until fwd_ms */
	assert_float_equal(pr.prelude_ms, 0.5, EPS);
	assert_float_equal(pr.call_ms[0], 0.5, EPS);
	assert_float_equal(pr.call_ms[1], 0.5, EPS);
	assert_float_equal(pr.call_ms[2], 1.5, EPS);
	assert_float_equal(pr.fwd_ms, 3.0, EPS);
	/* embed's gradient at 2.5 ms stretches the 2.0 ms backward */
	assert_float_equal(pr.bwd_ms, 2.5, EPS);
	assert_int_equal(pr.ntensors, 3);
	assert_int_equal(pr.tensors[0].gate, 2);	/* blk.lin */
	/* module null, blk.attn never called: first call under blk. */
	assert_int_equal(pr.tensors[1].gate, 1);
	assert_int_equal(pr.tensors[2].gate, 0);	/* embed */
	assert_int_equal(pr.tensors[1].bytes, 20);
	assert_int_equal(pr.total_bytes, 88);
	mt_profile_free(&pr);
}

static void test_load_pipedream(void **state)
{
	struct mt_profile pr;
	char err[256];

	(void)state;
	assert_int_equal(mt_profile_load("fixtures/tiny.graph.txt", &pr, err,
					   sizeof(err)), 0);
	assert_string_equal(pr.model, "tiny");
	/* topological order node1, node2, node3 despite file order */
	assert_int_equal(pr.ncalls, 3);
	assert_float_equal(pr.call_ms[0], 1.0, EPS);
	assert_float_equal(pr.call_ms[1], 2.0, EPS);
	assert_float_equal(pr.call_ms[2], 0.5, EPS);
	assert_float_equal(pr.fwd_ms, 3.5, EPS);
	assert_float_equal(pr.bwd_ms, 4.75, EPS);
	/* backward: node3 (no params), node2 ends 3.25, node1 ends 4.75 */
	assert_int_equal(pr.ntensors, 2);
	/* named as mercury-place's plans name them */
	assert_string_equal(pr.tensors[0].name, "node2.param");
	assert_float_equal(pr.tensors[0].ready_ms, 3.25, EPS);
	assert_int_equal(pr.tensors[0].gate, 1);
	assert_int_equal(pr.tensors[0].bytes, 400);
	assert_string_equal(pr.tensors[1].name, "node1.param");
	assert_float_equal(pr.tensors[1].ready_ms, 4.75, EPS);
	assert_int_equal(pr.tensors[1].gate, 0);
	mt_profile_free(&pr);
}

static void test_load_malformed(void **state)
{
	static const char *const bad[] = {
		"fixtures/bad_notjson.json", "fixtures/bad_nocalls.json",
		"fixtures/bad_numel.json", "fixtures/bad_type.json",
		"fixtures/bad_empty.json", "fixtures/bad_negative.json",
		"fixtures/bad_order.json", "fixtures/bad_noiter.json",
		"fixtures/bad_toplevel.json", "fixtures/bad_cycle.graph.txt",
		"fixtures/bad_line.graph.txt", "fixtures/bad_edge.graph.txt",
		"fixtures/bad_noparams.graph.txt", "fixtures/empty.graph.txt",
		"fixtures/missing.json", "fixtures/missing.graph.txt",
		"fixtures", "",
	};
	struct mt_profile pr;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_true(mt_profile_load(bad[i], &pr, err,
					      sizeof(err)) < 0);
		/* a reason was given, and the struct is left empty */
		assert_true(strlen(err) > 0);
		assert_int_equal(pr.ntensors, 0);
		assert_null(pr.tensors);
	}
}

static void test_parsers(void **state)
{
	char err[MT_ERRLEN];
	double d;
	uint64_t b;

	(void)state;
	assert_int_equal(mt_parse_rate("10gbit", 1, &d, err, sizeof(err)), 0);
	assert_float_equal(d, 10e9, 1);
	assert_int_equal(mt_parse_rate("1Gbit", 1, &d, err, sizeof(err)), 0);
	assert_float_equal(d, 1e9, 1);
	assert_int_equal(mt_parse_rate("100mbit", 1, &d, err, sizeof(err)), 0);
	assert_float_equal(d, 100e6, 1);
	assert_int_equal(mt_parse_rate("2.5e9", 1, &d, err, sizeof(err)), 0);
	assert_float_equal(d, 2.5e9, 1);
	assert_int_equal(mt_parse_rate("0", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("-1gbit", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("10gbits", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("fast", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("inf", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("nan", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("0x10", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_rate("1e999", 1, &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(mt_parse_seconds("10us", &d), 0);
	assert_float_equal(d, 10e-6, 1e-15);
	assert_int_equal(mt_parse_seconds("0.5ms", &d), 0);
	assert_float_equal(d, 0.5e-3, 1e-15);
	assert_int_equal(mt_parse_seconds("0.00001", &d), 0);
	assert_float_equal(d, 1e-5, 1e-15);
	assert_int_equal(mt_parse_seconds("0", &d), 0);
	assert_int_equal(mt_parse_seconds("-1us", &d), -EINVAL);
	assert_int_equal(mt_parse_seconds("5 ms", &d), -EINVAL);
	/* libmercury's sizes: k, m, g are 1024 as in tc */
	assert_int_equal(mt_parse_bytes("4mb", &b), 0);
	assert_int_equal(b, 4194304);
	assert_int_equal(mt_parse_bytes("64k", &b), 0);
	assert_int_equal(b, 65536);
	assert_int_equal(mt_parse_bytes("4mib", &b), 0);
	assert_int_equal(b, 4194304);
	assert_int_equal(mt_parse_bytes("1500", &b), 0);
	assert_int_equal(b, 1500);
	assert_int_equal(mt_parse_bytes("0", &b), -EINVAL);
	assert_int_equal(mt_parse_bytes("1.5", &b), -EINVAL);
	assert_int_equal(mt_parse_bytes("4q", &b), -EINVAL);
}

/* ---- invariants on the real profiles -------------------------------- */

static const char *const models[] = {
	"resnet50", "vgg16", "inception_v3", "bert_large", "gpt2",
};

static int load_real(const char *model, struct mt_profile *pr)
{
	char path[256], err[256];

	snprintf(path, sizeof(path), H200 "%s.json", model);
	if (access(path, R_OK))
		return -1;
	assert_int_equal(mt_profile_load(path, pr, err, sizeof(err)), 0);
	return 0;
}

static void test_real_profiles_match_readme(void **state)
{
	struct mt_profile pr;

	(void)state;
	assert_int_equal(load_real("vgg16", &pr), 0);
	/* profiles/README.md: 553.4 MB in 32 tensors */
	assert_int_equal(pr.ntensors, 32);
	assert_int_equal(pr.total_bytes, 553430176);
	/* the timeline attribution keeps the measured forward length,
	 * give or take calls whose own fwd_ms exceeds the gap to the next
	 * call's start (11.4089 ms against 11.3898 measured) */
	assert_true(pr.fwd_ms >= 11.3898 && pr.fwd_ms <= 11.3898 * 1.005);
	mt_profile_free(&pr);
}

/*
 * Tied tensors (profiles/README.md): gpt2's wte and bert_large's word
 * embeddings are listed once, last ready in backward, under the embedding:
 * the simulator gates them at call 0, the first thing forward needs.
 */
static void test_real_profiles_tied_gate(void **state)
{
	static const struct {
		const char *model, *tensor;
		uint64_t numel;
	} tied[] = {
		{ "gpt2", "transformer.wte.weight", 38597376 },
		{ "gpt2_xl", "transformer.wte.weight", 80411200 },
		{ "bert_large", "bert.embeddings.word_embeddings.weight", 31254528 },
	};

	(void)state;
	for (size_t m = 0; m < sizeof(tied) / sizeof(tied[0]); m++) {
		struct mt_profile pr;
		int hits = 0;

		assert_int_equal(load_real(tied[m].model, &pr), 0);
		for (int i = 0; i < pr.ntensors; i++) {
			if (strcmp(pr.tensors[i].name, tied[m].tensor))
				continue;
			hits++;
			assert_int_equal(i, pr.ntensors - 1);
			assert_int_equal(pr.tensors[i].gate, 0);
			assert_int_equal(pr.tensors[i].bytes, 4 * tied[m].numel);
		}
		assert_int_equal(hits, 1);
		mt_profile_free(&pr);
	}
}

static void test_ordering_invariants(void **state)
{
	static const double gbit[] = { 1, 3, 10, 30, 100, 300 };
	size_t m, b;

	(void)state;
	for (m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		struct mt_profile pr;
		struct msim_params p;

		assert_int_equal(load_real(models[m], &pr), 0);
		msim_params_default(&p);
		for (b = 0; b < sizeof(gbit) / sizeof(gbit[0]); b++) {
			double t[MSIM_NSCHEMES];
			struct msim_result r;
			int s;

			p.bandwidth_bps = gbit[b] * 1e9;
			for (s = 0; s < MSIM_NSCHEMES; s++) {
				assert_int_equal(msim_run(&pr, &p, s, &r), 0);
				t[s] = r.iteration_ms;
				/* never faster than the compute alone */
				assert_true(t[s] >= (pr.fwd_ms + pr.bwd_ms) -
						    1e-6);
			}
			/* headers and packet granularity only cost */
			assert_true(t[MSIM_IDEAL] <= t[MSIM_MERCURY] + 1e-9);
			/* priority never loses to readiness order here */
			assert_true(t[MSIM_PRIO] <= t[MSIM_FIFO] + 1e-9);
		}
		mt_profile_free(&pr);
	}
}

static void test_bandwidth_monotonic(void **state)
{
	size_t m;

	(void)state;
	for (m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		double prev[MSIM_NSCHEMES];
		struct mt_profile pr;
		struct msim_params p;
		double g;
		int s;

		assert_int_equal(load_real(models[m], &pr), 0);
		msim_params_default(&p);
		for (s = 0; s < MSIM_NSCHEMES; s++)
			prev[s] = INFINITY;
		for (g = 0.5; g <= 1000; g *= 1.5) {
			p.bandwidth_bps = g * 1e9;
			for (s = 0; s < MSIM_NSCHEMES; s++) {
				struct msim_result r;

				assert_int_equal(msim_run(&pr, &p, s, &r), 0);
				assert_true(r.iteration_ms <= prev[s] + 1e-9);
				prev[s] = r.iteration_ms;
			}
		}
		mt_profile_free(&pr);
	}
}

static void test_mercury_tends_to_ideal(void **state)
{
	struct mt_profile pr;
	struct msim_params p;
	struct msim_result m, i;

	(void)state;
	assert_int_equal(load_real("resnet50", &pr), 0);
	msim_params_default(&p);
	p.bandwidth_bps = 20e9;
	p.hdr = 0;
	p.mtu = 68;	/* 16-byte packets: preemption almost immediate */
	p.frame_cost_s = 0;	/* and none of the costs ideal does not pay */
	p.frame_hdr = 0;
	assert_int_equal(msim_run(&pr, &p, MSIM_MERCURY, &m), 0);
	assert_int_equal(msim_run(&pr, &p, MSIM_IDEAL, &i), 0);
	assert_true(m.iteration_ms >= i.iteration_ms - 1e-9);
	assert_true(m.iteration_ms <= i.iteration_ms * 1.001);
	mt_profile_free(&pr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny_fifo),
		cmocka_unit_test(test_tiny_prio),
		cmocka_unit_test(test_tiny_ideal),
		cmocka_unit_test(test_tiny_mercury),
		cmocka_unit_test(test_tiny_mercury_whole),
		cmocka_unit_test(test_tiny_chunk_pipelining),
		cmocka_unit_test(test_tiny_headers),
		cmocka_unit_test(test_tiny_bytesched_credit),
		cmocka_unit_test(test_tiny_bytesched_overhead),
		cmocka_unit_test(test_tiny_vanilla),
		cmocka_unit_test(test_tiny_frame_rule),
		cmocka_unit_test(test_tiny_latency),
		cmocka_unit_test(test_tiny_servers),
		cmocka_unit_test(test_tiny_time_scale),
		cmocka_unit_test(test_tiny_huge_bandwidth),
		cmocka_unit_test(test_bad_params),
		cmocka_unit_test(test_load_h200_timeline),
		cmocka_unit_test(test_load_pipedream),
		cmocka_unit_test(test_load_malformed),
		cmocka_unit_test(test_parsers),
		cmocka_unit_test(test_real_profiles_match_readme),
		cmocka_unit_test(test_real_profiles_tied_gate),
		cmocka_unit_test(test_ordering_invariants),
		cmocka_unit_test(test_bandwidth_monotonic),
		cmocka_unit_test(test_mercury_tends_to_ideal),
	};

	return cmocka_run_group_tests_name("mercury-sim core", tests,
					   setup_tiny, teardown_tiny);
}
