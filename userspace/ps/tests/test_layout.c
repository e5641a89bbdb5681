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
#include <sys/ioctl.h>
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
	/* Mercury's wire tags: 8 levels (= channels) over 5 ranks are the
	 * ranks themselves (never more levels than tensors) */
	assert_int_equal(L.levels, 5);
	assert_int_equal(L.t[4].level, 1);
	assert_int_equal(L.t[0].level, 5);
	ps_layout_free(&L);
	/* 2 levels: 1 + (rank - 1) * 2 / 5, the ranks in forward order */
	cfg.levels = 2;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(L.levels, 2);
	assert_int_equal(L.t[4].level, 1);
	assert_int_equal(L.t[3].level, 1);
	assert_int_equal(L.t[2].level, 1);
	assert_int_equal(L.t[1].level, 2);
	assert_int_equal(L.t[0].level, 2);
	ps_layout_free(&L);
}

/*
 * The tag in each frame's header: Mercury's wire tag; the other schemes'
 * the rank, which past the wire's 65,535 tags libmercury's squeeze shares
 * (mercury_plan_squeeze_tags()) rather than a cap of its own.
 */
static void test_frame_tags(void **state)
{
	enum { N = 70000 };
	char path[] = "/tmp/ps-many-XXXXXX", err[256];
	struct ps_cfg cfg = base_cfg();
	struct ps_layout L;
	FILE *f;
	int i, fd;

	(void)state;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	for (i = 0; i < L.nt; i++)
		assert_int_equal(L.t[i].tag, L.t[i].rank);
	ps_layout_free(&L);
	cfg.scheme = PS_MERCURY;
	cfg.levels = 2;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	for (i = 0; i < L.nt; i++)
		assert_int_equal(L.t[i].tag, L.t[i].level);
	ps_layout_free(&L);

	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fprintf(f, "{\"model\": \"many\", \"iteration_ms\": {\"fwd_ms\": 1, \"bwd_ms\": 2},\n\"modules\": [");
	for (i = 0; i < N; i++)
		fprintf(f, "%s{\"module\": \"m%d\", \"params\": 1}", i ? ", " : "", i);
	fprintf(f, "],\n\"forward_calls\": [");
	for (i = 0; i < N; i++)
		fprintf(f, "%s{\"call\": %d, \"module\": \"m%d\", \"start_ms\": 0, \"fwd_ms\": 0, \"out_bytes\": 4}",
			i ? ", " : "", i, i);
	fprintf(f, "],\n\"grad_ready\": [");
	for (i = N - 1; i >= 0; i--)
		fprintf(f, "%s{\"param\": \"m%d.w\", \"module\": \"m%d\", \"numel\": 1, \"ready_ms\": 1}",
			i < N - 1 ? ", " : "", i, i);
	fprintf(f, "],\n\"edges\": null}\n");
	assert_int_equal(fclose(f), 0);
	cfg = base_cfg();
	cfg.profile = path;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(L.nt, N);
	for (i = 0; i < L.nt; i++)
		assert_int_equal(L.t[i].tag, 1 + (unsigned int)(
			(uint64_t)(L.t[i].rank - 1) * MERCURY_MAX_TAG / N));
	ps_layout_free(&L);
}

static void test_classes(void **state)
{
	unsigned int c[8];

	(void)state;
	ps_mercury_classes(c, 8, 8);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[7], 8);
	ps_mercury_classes(c, 4, 2);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], 1);
	assert_int_equal(c[2], 2);
	assert_int_equal(c[3], 2);
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

/* Every size scales with the tensors, the chunk and the credit included. */
static void test_sizes_scale(void **state)
{
	struct ps_cfg cfg = base_cfg();
	struct ps_layout L;
	char err[256];

	(void)state;
	cfg.bytes_scale = 0.01;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(L.chunk, 4 * 164);	/* 16384 elements -> 163.84 */
	ps_layout_free(&L);
	cfg.scheme = PS_BYTESCHED;
	cfg.servers = 2;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(L.chunk, 20000);	/* 4 MB -> 40000 B, half each */
	assert_int_equal(L.credit, 160000);	/* 16 MB -> 160000 B */
	ps_layout_free(&L);
	/* at least one element */
	cfg.scheme = PS_FIFO;
	cfg.chunk = 8;
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	assert_int_equal(L.chunk, 4);
	ps_layout_free(&L);
	assert_int_equal(ps_scaled_bytes(65536, 1), 65536);
}

/* vanilla: one frame per non-empty shard; the chunk is the largest. */
static void test_vanilla_layout(void **state)
{
	struct ps_cfg cfg = base_cfg();
	struct ps_layout L;
	char err[256];
	int t;

	(void)state;
	cfg.scheme = PS_VANILLA;
	cfg.servers = 2;
	cfg.chunk = 1000;	/* ignored */
	assert_int_equal(ps_layout_init(&L, &cfg, err, sizeof(err)), 0);
	/* 65537 elements: shards of 32768 and 32769 */
	assert_int_equal(L.chunk, 4 * 32769);
	for (t = 0; t < L.nt; t++) {
		assert_int_equal(L.nchunks[ps_idx(&L, t, 1)], 1);
		/* the 1-element tensor has nothing on server 0 */
		assert_int_equal(L.nchunks[ps_idx(&L, t, 0)], t == 3 ? 0 : 1);
	}
	assert_int_equal(L.frames, 9);
	assert_int_equal(L.srv_chunks[0], 4);
	assert_int_equal(L.srv_chunks[1], 5);
	ps_layout_free(&L);
}

static void test_emit_profile_matches(void **state)
{
	struct ps_cfg cfg = base_cfg();
	struct mt_profile P;
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
	assert_int_equal(mt_profile_load(path, &P, err, sizeof(err)), 0);
	assert_int_equal(P.ntensors, L.nt);
	for (t = 0; t < L.nt; t++)
		assert_int_equal(P.tensors[t].bytes, L.t[t].bytes);
	assert_int_equal(P.total_bytes, L.total_bytes);
	mt_profile_free(&P);
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
	struct ps_part o = { 0 };
	uint64_t last = 0;
	int i;

	(void)state;
	srand(7);
	for (i = 0; i < 200; i++) {
		o.key = (uint64_t)(rand() % 50) << 40 | i;
		assert_int_equal(ps_heap_push(&h, &o), 0);
	}
	for (i = 0; i < 200; i++) {
		assert_non_null(ps_heap_top(&h));
		assert_true(ps_heap_top(&h)->key >= last);
		last = ps_heap_top(&h)->key;
		ps_heap_pop(&h);
	}
	assert_null(ps_heap_top(&h));
	ps_heap_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shards_cover),
		cmocka_unit_test(test_ranks_and_bands),
		cmocka_unit_test(test_bytes_scale),
		cmocka_unit_test(test_sizes_scale),
		cmocka_unit_test(test_vanilla_layout),
		cmocka_unit_test(test_emit_profile_matches),
		cmocka_unit_test(test_bytesched_piece),
		cmocka_unit_test(test_hash),
		cmocka_unit_test(test_expected_values),
		cmocka_unit_test(test_heap_order),
		cmocka_unit_test(test_classes),
		cmocka_unit_test(test_frame_tags),
	};

	return cmocka_run_group_tests_name("ps_layout", tests, NULL, NULL);
}
