// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Unit tests: sharding and chunking, priorities, byte scaling, the exact
 * checksum values, the heap, and frames written and read through tiny
 * socket buffers (partial writes and reads at every byte boundary).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "ps.h"

#define TINY "fixtures/tiny.json"

static struct ps_cfg base_cfg(void)
{
	return (struct ps_cfg){
		.profile = TINY, .scheme = PS_FIFO, .channels = 8,
		.chunk = 65536, .partition = 4000000, .credit = 16000000,
		.bytes_scale = 1, .time_scale = 1, .iterations = 5,
		.workers = 2, .servers = 1,
	};
}

static void test_shards_cover(void **state)
{
	int S, t, s;

	(void)state;
	for (S = 1; S <= 3; S++) {
		struct ps_cfg cfg = base_cfg();
		struct ps_layout L;
		char err[256];
		uint64_t total = 0;

		cfg.servers = S;
		cfg.chunk = 1000;
		assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
		assert_int_equal(L.nt, 5);
		for (t = 0; t < L.nt; t++) {
			assert_int_equal(L.lo[ps_idx(&L, t, 0)], 0);
			assert_int_equal(L.hi[ps_idx(&L, t, S - 1)], L.t[t].bytes);
			for (s = 0; s < S; s++) {
				size_t k = ps_idx(&L, t, s);
				uint64_t sum = 0;
				uint32_t c;

				if (s + 1 < S)
					assert_int_equal(L.hi[k], L.lo[ps_idx(&L, t, s + 1)]);
				/* even split: shards differ by at most one element */
				assert_true(L.hi[k] - L.lo[k] <= 4 * (L.t[t].bytes / 4 / S + 1));
				for (c = 0; c < L.nchunks[k]; c++) {
					uint32_t len = ps_chunk_len(&L, t, s, c);

					assert_true(len > 0 && len <= 1000 && len % 4 == 0);
					sum += len;
				}
				assert_int_equal(ps_chunk_len(&L, t, s, L.nchunks[k]), 0);
				assert_int_equal(sum, L.hi[k] - L.lo[k]);
			}
			total += L.t[t].bytes;
		}
		/* 40000 + 7 + 65537 + 1 + 30001 fp32 values */
		assert_int_equal(total, 4 * 135546);
		assert_int_equal(L.total_bytes, total);
		assert_int_equal(L.t[1].off, 4 * 40000);
		ps_layout_free(&L);
	}
}

static void test_ranks_and_bands(void **state)
{
	struct ps_cfg cfg = base_cfg();
	struct ps_layout L;
	char err[256];

	(void)state;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	/* gates: embed = call 0, block = 1, head = 2; inside a module the
	 * gradient that came last is the more urgent */
	assert_int_equal(L.t[4].rank, 1);	/* embed.weight */
	assert_int_equal(L.t[3].rank, 2);	/* block.bias */
	assert_int_equal(L.t[2].rank, 3);	/* block.weight */
	assert_int_equal(L.t[1].rank, 4);	/* head.bias */
	assert_int_equal(L.t[0].rank, 5);	/* head.weight */
	/* 16 bands over 5 ranks: (rank - 1) * 16 / 5 */
	assert_int_equal(L.t[4].band, 0);
	assert_int_equal(L.t[3].band, 3);
	assert_int_equal(L.t[2].band, 6);
	assert_int_equal(L.t[1].band, 9);
	assert_int_equal(L.t[0].band, 12);
	ps_layout_free(&L);
}

static void test_bytes_scale(void **state)
{
	struct ps_cfg cfg = base_cfg();
	struct ps_layout L;
	char err[256];

	(void)state;
	cfg.bytes_scale = 0.001;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(L.t[0].bytes, 4 * 40);	/* 40000 -> 40 */
	assert_int_equal(L.t[1].bytes, 4 * 1);	/* 7 -> 0, at least 1 */
	assert_int_equal(L.t[2].bytes, 4 * 66);	/* 65.537 -> 66 */
	assert_int_equal(L.t[4].bytes, 4 * 30);	/* 30.001 -> 30 */
	ps_layout_free(&L);
}

static void test_emit_profile_matches(void **state)
{
	struct ps_cfg cfg = base_cfg();
	struct msim_profile P;
	struct ps_layout L;
	char err[256], path[] = "/tmp/ps-emit-XXXXXX";
	int fd = mkstemp(path), t;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	cfg.bytes_scale = 0.01;
	cfg.emit = path;
	assert_int_equal(ps_emit_profile(&cfg, err, sizeof(err)), 0);
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(msim_profile_load(path, &P, err, sizeof(err)), 0);
	assert_int_equal(P.ntensors, L.nt);
	for (t = 0; t < L.nt; t++)
		assert_int_equal(P.tensors[t].bytes, L.t[t].bytes);
	assert_int_equal(P.total_bytes, L.total_bytes);
	msim_profile_free(&P);
	ps_layout_free(&L);
	unlink(path);
	cfg.profile = "fixtures/missing.json";
	assert_true(ps_emit_profile(&cfg, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "missing.json"));
}

static void test_bytesched_piece(void **state)
{
	struct ps_cfg cfg = base_cfg();
	struct ps_layout L;
	char err[256];

	(void)state;
	cfg.scheme = PS_BYTESCHED;
	cfg.partition = 100000;
	cfg.servers = 2;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(L.chunk, 50000);	/* a server's half of a partition */
	ps_layout_free(&L);
	cfg.partition = 10;
	cfg.servers = 3;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(L.chunk, 4);		/* ceil(10 / 3) = 4, fp32 aligned */
	ps_layout_free(&L);
}

static void test_hash(void **state)
{
	struct ps_cfg a = base_cfg(), b = base_cfg();
	struct ps_layout La, Lb;
	char err[256];

	(void)state;
	assert_int_equal(ps_layout_init(&La, &a, err, sizeof(err)), 0);
	assert_int_equal(ps_layout_init(&Lb, &b, err, sizeof(err)), 0);
	assert_true(La.hash == Lb.hash);
	ps_layout_free(&Lb);
	b.chunk = 32768;
	assert_int_equal(ps_layout_init(&Lb, &b, err, sizeof(err)), 0);
	assert_true(La.hash != Lb.hash);
	ps_layout_free(&Lb);
	b = base_cfg();
	b.bytes_scale = 0.5;
	assert_int_equal(ps_layout_init(&Lb, &b, err, sizeof(err)), 0);
	assert_true(La.hash != Lb.hash);
	ps_layout_free(&Lb);
	ps_layout_free(&La);
}

static void test_expected_values(void **state)
{
	int W, N, t, w;
	uint64_t i;

	(void)state;
	for (W = 1; W <= 4; W++)
		for (N = 1; N <= 3; N++)
			for (t = 0; t < 3; t++)
				for (i = 0; i < 30; i++) {
					float p = 0;
					int n;

					for (n = 0; n < N; n++) {
						float sum = 0;

						for (w = W - 1; w >= 0; w--)
							sum += ps_grad_value(w, t, i);
						p -= sum;
					}
					assert_true(p == ps_expected_param(W, N, t, i));
				}
	/* distinct per worker, so a lost or doubled copy shows */
	assert_true(ps_grad_value(0, 0, 0) != ps_grad_value(1, 0, 0));
}

static void test_heap_order(void **state)
{
	struct ps_heap h = { 0 };
	struct ps_out o[200], *p;
	uint64_t last = 0;
	int i;

	(void)state;
	srand(7);
	for (i = 0; i < 200; i++) {
		o[i].key = (uint64_t)(rand() % 50) << 40 | i;
		assert_int_equal(ps_heap_push(&h, &o[i]), 0);
	}
	for (i = 0; i < 200; i++) {
		p = ps_heap_pop(&h);
		assert_non_null(p);
		assert_true(p->key >= last);
		last = p->key;
	}
	assert_null(ps_heap_pop(&h));
	free(h.v);
}

/* Receiver side of test_partial_io: everything into one buffer. */
struct rxbuf {
	uint8_t *buf;
	int frames;
};

static int rx_dest(void *ctx, struct ps_conn *c)
{
	struct rxbuf *r = ctx;

	c->dst = r->buf + c->fr.offset;
	return 0;
}

static int rx_done(void *ctx, struct ps_conn *c)
{
	struct rxbuf *r = ctx;

	(void)c;
	r->frames++;
	return 0;
}

static void test_partial_io(void **state)
{
	const uint32_t len = 300000, chunk = 70001;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct ps_conn tx = { 0 }, rx = { 0 };
	struct rxbuf r = { .buf = dst };
	int sv[2], small = 1024, rounds = 0, nframes = 0, partial = 0;
	uint32_t off, i;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	for (i = 0; i < len; i++)
		src[i] = (uint8_t)(i * 31 + 7);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	assert_int_equal(ps_set_nonblock(sv[0]), 0);
	assert_int_equal(ps_set_nonblock(sv[1]), 0);
	tx.fd = sv[0];
	rx.fd = sv[1];
	for (off = 0; off < len; off += chunk) {
		uint32_t n = len - off < chunk ? len - off : chunk;

		ps_conn_queue(&tx, ps_out_new(1, 3, len, off, src + off, n));
		nframes++;
	}
	while (tx.head || r.frames < nframes) {
		assert_true(ps_conn_flush(&tx) >= 0);
		if (tx.head && tx.head->sent)
			partial++;
		assert_true(ps_conn_read(&rx, rx_dest, rx_done, &r) >= 0);
		assert_true(++rounds < 1000000);
	}
	assert_int_equal(r.frames, nframes);
	assert_memory_equal(src, dst, len);
	assert_true(partial > 0);	/* the buffers really were too small */
	assert_int_equal(tx.bytes_out, len + nframes * MERCURY_FRAME_HDR_LEN);
	assert_int_equal(rx.bytes_in, tx.bytes_out);
	/* a peer that closes between frames: EOF */
	close(sv[0]);
	assert_int_equal(ps_conn_read(&rx, rx_dest, rx_done, &r), -ENOTCONN);
	close(sv[1]);
	/* a peer that closes inside a frame: reset */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(&rx, 0, sizeof(rx));
	rx.fd = sv[1];
	tx = (struct ps_conn){ .fd = sv[0] };
	ps_conn_queue(&tx, ps_out_new(1, 3, len, 0, src, 1000));
	assert_true(ps_conn_flush(&tx) > 0);
	{
		uint8_t part[MERCURY_FRAME_HDR_LEN + 10];

		assert_int_equal(recv(sv[1], part, sizeof(part), 0), (ssize_t)sizeof(part));
		/* hand the first bytes back: header and 10 payload bytes */
		assert_int_equal(ps_set_nonblock(sv[1]), 0);
		close(sv[0]);
		r.frames = 0;
		/* feed what was taken through a fresh pair, then the reset */
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		assert_int_equal(write(sv[0], part, sizeof(part)), (ssize_t)sizeof(part));
		close(sv[0]);
		close(rx.fd);
		rx.fd = sv[1];
		assert_int_equal(ps_conn_read(&rx, rx_dest, rx_done, &r), -ECONNRESET);
		assert_int_equal(r.frames, 0);
	}
	close(sv[1]);
	free(src);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shards_cover),
		cmocka_unit_test(test_ranks_and_bands),
		cmocka_unit_test(test_bytes_scale),
		cmocka_unit_test(test_emit_profile_matches),
		cmocka_unit_test(test_bytesched_piece),
		cmocka_unit_test(test_hash),
		cmocka_unit_test(test_expected_values),
		cmocka_unit_test(test_heap_order),
		cmocka_unit_test(test_partial_io),
	};

	return cmocka_run_group_tests_name("ps_layout", tests, NULL, NULL);
}
