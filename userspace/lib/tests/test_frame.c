// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Framing header and reassembly under partial reads and writes. */
#include <fcntl.h>
#include <pthread.h>

#include "helpers.h"

static void test_encode_layout(void **state)
{
	struct mercury_frame f = {
		.tensor_id = 0x01020304, .tag = 0x0506,
		.total_len = 0x1112131415161718ULL,
		.offset = 0x0000000000000100ULL, .chunk_len = 0x21222324,
	}, g;
	static const unsigned char want[MERCURY_FRAME_HDR_LEN] = {
		'M', 'R', 'C', 'Y', 1, 0, 0x05, 0x06,
		0x01, 0x02, 0x03, 0x04, 0x21, 0x22, 0x23, 0x24,
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0, 0, 0, 0, 0, 0, 0x01, 0x00,
	};
	unsigned char buf[MERCURY_FRAME_HDR_LEN + 1];

	(void)state;
	assert_int_equal(mercury_frame_encode(&f, buf, sizeof(buf)),
			 MERCURY_FRAME_HDR_LEN);
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(mercury_frame_decode(buf, MERCURY_FRAME_HDR_LEN, &g),
			 MERCURY_FRAME_HDR_LEN);
	assert_int_equal(g.tensor_id, f.tensor_id);
	assert_int_equal(g.tag, f.tag);
	assert_int_equal(g.total_len, f.total_len);
	assert_int_equal(g.offset, f.offset);
	assert_int_equal(g.chunk_len, f.chunk_len);
	assert_int_equal(mercury_frame_encode(&f, buf, 31), -ENOSPC);
	f.offset = f.total_len - 3;
	f.chunk_len = 4;
	assert_int_equal(mercury_frame_encode(&f, buf, sizeof(buf)), -EINVAL);
}

static void test_decode_errors(void **state)
{
	struct mercury_frame f = { .tensor_id = 9, .total_len = 100,
				   .offset = 90, .chunk_len = 10 }, g;
	unsigned char buf[MERCURY_FRAME_HDR_LEN];

	(void)state;
	mercury_frame_encode(&f, buf, sizeof(buf));
	assert_int_equal(mercury_frame_decode(buf, 31, &g), -EAGAIN);
	buf[4] = 2;
	assert_int_equal(mercury_frame_decode(buf, 32, &g), -EPROTONOSUPPORT);
	buf[4] = 1;
	buf[5] = 1;
	assert_int_equal(mercury_frame_decode(buf, 32, &g), -EBADMSG);
	buf[5] = 0;
	buf[0] = 'X';
	assert_int_equal(mercury_frame_decode(buf, 32, &g), -EBADMSG);
	buf[0] = 'M';
	buf[31] = 91;	/* offset 91 + 10 > 100 */
	assert_int_equal(mercury_frame_decode(buf, 32, &g), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "outside tensor 9"));
}

/* Build frames for tensor id/tag from data, chunks of csz, into out. */
static size_t frames(unsigned char *out, uint32_t id, uint16_t tag,
		     const unsigned char *data, uint64_t len, uint64_t from,
		     uint64_t to, uint32_t csz)
{
	struct mercury_frame f = { .tensor_id = id, .tag = tag,
				   .total_len = len };
	size_t n = 0;
	uint64_t off;

	for (off = from; off < to || (!len && off == 0 && !n); off += csz) {
		f.offset = off;
		f.chunk_len = to - off < csz ? to - off : csz;
		n += mercury_frame_encode(&f, out + n, MERCURY_FRAME_HDR_LEN);
		memcpy(out + n, data + off, f.chunk_len);
		n += f.chunk_len;
		if (!len)
			break;
	}
	return n;
}

/*
 * Three tensors, each split across two connections, streams fed in
 * pseudo-random slices down to one byte: every tensor comes out whole,
 * once, in the order it completed.
 */
static void test_reassembly_random_splits(void **state)
{
	enum { A = 100000, B = 777, C = 4096 };
	unsigned char *da = malloc(A), db[B], dc[C];
	unsigned char *s0 = malloc(A + B + C + 4096), *s1 = malloc(A + 4096);
	size_t n0 = 0, n1 = 0, p0 = 0, p1 = 0, i, k;
	struct mercury_tensor t;
	struct mercury_rx *rx;
	uint64_t seed = 42;
	int done = 0, r, round;

	(void)state;
	for (i = 0; i < A; i++)
		da[i] = rnd(&seed);
	for (i = 0; i < B; i++)
		db[i] = rnd(&seed);
	for (i = 0; i < C; i++)
		dc[i] = rnd(&seed);
	/* conn 0: A[0, 60000) in 7000-byte chunks, all of B, C[2048, 4096) */
	n0 += frames(s0 + n0, 1, 3, da, A, 0, 60000, 7000);
	n0 += frames(s0 + n0, 2, 1, db, B, 0, B, 7000);
	n0 += frames(s0 + n0, 3, 2, dc, C, 2048, C, 1000);
	/* conn 1: C[0, 2048), A[60000, A) */
	n1 += frames(s1 + n1, 3, 2, dc, C, 0, 2048, 2048);
	n1 += frames(s1 + n1, 1, 3, da, A, 60000, A, 13000);

	for (round = 0; round < 3; round++) {
		assert_int_equal(mercury_rx_new(NULL, &rx), 0);
		assert_int_equal(mercury_rx_add(rx, -1), 0);
		assert_int_equal(mercury_rx_add(rx, -1), 1);
		done = 0;
		p0 = p1 = 0;
		while (p0 < n0 || p1 < n1) {
			/* round 0: 1-byte slices; others: random up to 3000 */
			k = round ? 1 + rnd(&seed) % 3000 : 1;
			if (p0 < n0 && (p1 == n1 || rnd(&seed) & 1)) {
				k = k < n0 - p0 ? k : n0 - p0;
				r = mercury_rx_feed(rx, 0, s0 + p0, k);
				p0 += k;
			} else {
				k = k < n1 - p1 ? k : n1 - p1;
				r = mercury_rx_feed(rx, 1, s1 + p1, k);
				p1 += k;
			}
			assert_true(r >= 0);
			done += r;
		}
		assert_int_equal(done, 3);
		for (i = 0; i < 3; i++) {
			assert_int_equal(mercury_rx_next(rx, &t), 0);
			if (t.id == 1) {
				assert_int_equal(t.len, A);
				assert_int_equal(t.tag, 3);
				assert_memory_equal(t.data, da, A);
			} else if (t.id == 2) {
				assert_int_equal(t.len, B);
				assert_int_equal(t.tag, 1);
				assert_memory_equal(t.data, db, B);
			} else {
				assert_int_equal(t.id, 3);
				assert_int_equal(t.len, C);
				assert_int_equal(t.tag, 2);
				assert_memory_equal(t.data, dc, C);
			}
			mercury_tensor_release(&t);
		}
		assert_int_equal(mercury_rx_next(rx, &t), -EAGAIN);
		mercury_rx_free(rx);
	}
	free(da);
	free(s0);
	free(s1);
}

static void test_reassembly_errors(void **state)
{
	unsigned char s[4 * MERCURY_FRAME_HDR_LEN + 64], d[64] = { 1, 2, 3 };
	MERCURY_OPTS(mercury_rx_opts, o, .max_tensor_bytes = 1000,
		     .max_pending = 1);
	struct mercury_tensor t;
	struct mercury_rx *rx;
	size_t n;

	(void)state;
	/* The same bytes twice overflow the tensor: protocol error. */
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	mercury_rx_add(rx, -1);
	n = frames(s, 5, 1, d, 64, 0, 40, 40);
	n += frames(s + n, 5, 1, d, 64, 0, 40, 40);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), -EPROTO);
	mercury_rx_free(rx);

	/*
	 * Two frames over the same half add up to the total: by byte count
	 * the tensor would be complete with its other half never written.
	 * Coverage says no, on one connection or across two.
	 */
	for (int conns = 1; conns <= 2; conns++) {
		assert_int_equal(mercury_rx_new(NULL, &rx), 0);
		mercury_rx_add(rx, -1);
		mercury_rx_add(rx, -1);
		n = frames(s, 5, 1, d, 64, 0, 32, 32);
		assert_int_equal(mercury_rx_feed(rx, 0, s, n), 0);
		n = frames(s, 5, 1, d, 64, 16, 48, 32);
		assert_int_equal(mercury_rx_feed(rx, conns - 1, s, n), -EPROTO);
		assert_non_null(strstr(mercury_last_error(),
				       "bytes 16..48 announced twice"));
		assert_int_equal(mercury_rx_next(rx, &t), -EAGAIN);
		mercury_rx_free(rx);
	}

	/* Abutting ranges in any order merge and complete exactly once. */
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	mercury_rx_add(rx, -1);
	n = frames(s, 9, 1, d, 64, 48, 64, 16);
	n += frames(s + n, 9, 1, d, 64, 0, 16, 16);
	n += frames(s + n, 9, 1, d, 64, 32, 48, 16);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), 0);
	n = frames(s, 9, 1, d, 64, 16, 32, 16);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), 1);
	assert_int_equal(mercury_rx_next(rx, &t), 0);
	assert_int_equal(t.len, 64);
	assert_memory_equal(t.data, d, 64);
	mercury_tensor_release(&t);
	mercury_rx_free(rx);

	/* A second chunk disagreeing on the total. */
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	mercury_rx_add(rx, -1);
	n = frames(s, 5, 1, d, 64, 0, 10, 10);
	n += frames(s + n, 5, 1, d, 32, 10, 20, 10);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), -EPROTO);
	assert_non_null(strstr(mercury_last_error(), "tensor 5"));
	mercury_rx_free(rx);

	/* Limits: size and tensors in progress. */
	assert_int_equal(mercury_rx_new(&o, &rx), 0);
	mercury_rx_add(rx, -1);
	mercury_rx_add(rx, -1);
	n = frames(s, 6, 1, d, 64, 0, 10, 10);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), 0);
	n = frames(s, 7, 1, d, 64, 0, 10, 10);
	assert_int_equal(mercury_rx_feed(rx, 1, s, n), -ENOBUFS);
	mercury_rx_free(rx);
	assert_int_equal(mercury_rx_new(&o, &rx), 0);
	mercury_rx_add(rx, -1);
	memset(s, 0, MERCURY_FRAME_HDR_LEN);
	mercury_frame_encode(&(struct mercury_frame){ .tensor_id = 1,
		.total_len = 1001 }, s, MERCURY_FRAME_HDR_LEN);
	assert_int_equal(mercury_rx_feed(rx, 0, s, MERCURY_FRAME_HDR_LEN),
			 -EMSGSIZE);
	mercury_rx_free(rx);

	/*
	 * The memory budget counts tensors in progress and completed ones
	 * not yet taken; taking one frees its share.
	 */
	{
		MERCURY_OPTS(mercury_rx_opts, ob, .max_pending_bytes = 100);

		assert_int_equal(mercury_rx_new(&ob, &rx), 0);
		mercury_rx_add(rx, -1);
		n = frames(s, 10, 1, d, 64, 0, 64, 64);
		assert_int_equal(mercury_rx_feed(rx, 0, s, n), 1);
		n = frames(s, 11, 1, d, 64, 0, 64, 64);
		assert_int_equal(mercury_rx_feed(rx, 0, s, n), -ENOBUFS);
		assert_non_null(strstr(mercury_last_error(), "budget of 100"));
		mercury_rx_free(rx);
		assert_int_equal(mercury_rx_new(&ob, &rx), 0);
		mercury_rx_add(rx, -1);
		n = frames(s, 10, 1, d, 64, 0, 64, 64);
		assert_int_equal(mercury_rx_feed(rx, 0, s, n), 1);
		assert_int_equal(mercury_rx_next(rx, &t), 0);
		mercury_tensor_release(&t);
		n = frames(s, 11, 1, d, 64, 0, 64, 64);
		assert_int_equal(mercury_rx_feed(rx, 0, s, n), 1);
		mercury_rx_free(rx);
	}

	/* An empty tensor completes on its header alone. */
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	mercury_rx_add(rx, -1);
	n = frames(s, 8, 4, d, 0, 0, 0, 10);
	assert_int_equal(n, MERCURY_FRAME_HDR_LEN);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), 1);
	assert_int_equal(mercury_rx_next(rx, &t), 0);
	assert_int_equal(t.id, 8);
	assert_int_equal(t.len, 0);
	mercury_tensor_release(&t);
	/* Garbage is refused, not parsed. */
	memset(s, 'x', 40);
	assert_int_equal(mercury_rx_feed(rx, 0, s, 40), -EBADMSG);
	/* the message says which connection sent it */
	assert_non_null(strstr(mercury_last_error(), "rx: connection 0: frame: bad magic"));
	mercury_rx_free(rx);
}

/* Garbage, or a frame cut short, on a TCP connection: the error names the
 * peer's address, so that a user knows which host sent it.
 */
static void test_rx_names_peer(void **state)
{
	struct mercury_rx *rx;
	char want[64];
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int c[2][2], i, k;

	(void)state;
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	for (i = 0; i < 2; i++) {
		tcp_pair(c[i]);
		assert_int_equal(mercury_rx_add(rx, c[i][1]), i);
	}
	assert_int_equal(write(c[0][0], "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 40), 40);
	assert_int_equal(getsockname(c[0][0], (struct sockaddr *)&a, &len), 0);
	snprintf(want, sizeof(want), "rx: connection 0 (127.0.0.1:%u (fd %d)): frame: bad magic",
		 ntohs(a.sin_port), c[0][1]);
	assert_int_equal(mercury_rx_poll(rx, 5000), -EBADMSG);
	assert_non_null(strstr(mercury_last_error(), want));

	assert_int_equal(write(c[1][0], "MRCY", 4), 4);
	len = sizeof(a);
	assert_int_equal(getsockname(c[1][0], (struct sockaddr *)&a, &len), 0);
	close(c[1][0]);
	snprintf(want, sizeof(want), "rx: connection 1 (127.0.0.1:%u (fd %d)) closed inside a frame",
		 ntohs(a.sin_port), c[1][1]);
	for (k = 0; k < 5000; k++) {
		i = mercury_rx_read(rx, 1);	/* 4 header bytes, then EOF */
		if (i != 0 && i != -EAGAIN)
			break;
		usleep(1000);
	}
	assert_int_equal(i, -ECONNRESET);
	assert_non_null(strstr(mercury_last_error(), want));
	mercury_rx_free(rx);
	close(c[0][0]);
	close(c[0][1]);
	close(c[1][1]);
}

/* Write one whole tensor (id, len bytes of id's low byte) as one frame. */
static void put_tensor(int fd, uint32_t id, size_t len)
{
	static unsigned char data[4 << 20], out[(4 << 20) + 64];
	size_t n;

	memset(data, (int)(id & 0xff), len);
	n = frames(out, id, 1, data, len, 0, len, len);
	assert_int_equal(write(fd, out, n), (ssize_t)n);
}

static void expect_next(struct mercury_rx *rx, uint32_t id, size_t len)
{
	struct mercury_tensor t;

	assert_int_equal(mercury_rx_next(rx, &t), 0);
	if (t.id != id)
		fail_msg("completed tensor %u, expected %u", t.id, id);
	assert_int_equal(t.len, len);
	assert_int_equal(((unsigned char *)t.data)[len - 1], id & 0xff);
	mercury_tensor_release(&t);
}

/*
 * After a stall every connection holds a whole tensor. mercury_rx_poll()
 * serves the ready connections round-robin, starting after the one it
 * served first last time, so the connection that completes first rotates
 * instead of always being connection 0. With only connections 1 and 3
 * ready, they alternate. A backlog on one connection (a tensor of four
 * reads) does not hold back a tensor on another connection that was
 * written after it: each call reads one bounded piece per connection.
 */
static void test_rx_poll_fair(void **state)
{
	enum { NCONN = 4, SMALL = 100, BIG = 3 * 65536 };
	int sp[NCONN][2], i, b, k, big = 1 << 20;
	struct mercury_rx *rx;

	(void)state;
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	for (i = 0; i < NCONN; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
		setsockopt(sp[i][0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
		assert_int_equal(mercury_rx_add(rx, sp[i][1]), i);
	}
	for (b = 0; b < 8; b++) {
		for (i = 0; i < NCONN; i++)
			put_tensor(sp[i][0], 100 * b + i, SMALL);
		assert_int_equal(mercury_rx_poll(rx, 1000), NCONN);
		for (k = 0; k < NCONN; k++)
			expect_next(rx, 100 * b + (b + k) % NCONN, SMALL);
		assert_int_equal(mercury_rx_next(rx, &(struct mercury_tensor){ 0 }),
				 -EAGAIN);
	}
	/* Only 1 and 3 ready: next start is 0, so 1 then 3, then 3 then 1. */
	for (b = 0; b < 6; b++) {
		put_tensor(sp[1][0], 1000 + 10 * b + 1, SMALL);
		put_tensor(sp[3][0], 1000 + 10 * b + 3, SMALL);
		assert_int_equal(mercury_rx_poll(rx, 1000), 2);
		expect_next(rx, 1000 + 10 * b + (b % 2 ? 3 : 1), SMALL);
		expect_next(rx, 1000 + 10 * b + (b % 2 ? 1 : 3), SMALL);
	}
	/* Start is 0 again. A big tensor on 0, then a small one on 1. */
	put_tensor(sp[0][0], 7000, BIG);
	put_tensor(sp[1][0], 7001, SMALL);
	assert_int_equal(mercury_rx_poll(rx, 1000), 1);
	expect_next(rx, 7001, SMALL);
	for (k = 0; k < 10 && mercury_rx_poll(rx, 1000) == 0; k++)
		;
	assert_true(k < 10);
	expect_next(rx, 7000, BIG);
	mercury_rx_free(rx);
	for (i = 0; i < NCONN; i++) {
		close(sp[i][0]);
		close(sp[i][1]);
	}
}

struct sender {
	int fds[2];
	unsigned char *buf;
	size_t len;
	int ret;
};

/*
 * Kernel accounting (SIOCOUTQ on AF_UNIX: bytes the peer has not read):
 * three tags over two connections make send() wait for the receiver to
 * empty one connection before it may carry another tag.
 */
static void *send_thread(void *arg)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .chunk_size = 50000,
		     .no_tag = true);
	struct sender *s = arg;
	struct mercury_chanset *cs;
	uint32_t id;

	s->ret = mercury_chanset_new(s->fds, 2, &o, &cs);
	for (id = 0; !s->ret && id < 8; id++)
		s->ret = mercury_chanset_send(cs, id, 1 + id % 3,
					      s->buf + id * (s->len / 8),
					      s->len / 8);
	mercury_chanset_free(cs);
	return NULL;
}

/*
 * Real partial writes and reads: non-blocking sockets with tiny buffers,
 * the sender resumes after EAGAIN, the receiver reads what is there.
 */
static void test_socket_partial_io(void **state)
{
	enum { LEN = 8 * 300000 };
	struct sender s = { .len = LEN };
	struct mercury_tensor t;
	int sp[2][2], i, r, done = 0, small = 4096;
	char msg[80];
	struct mercury_rx *rx;
	uint64_t seed = 7;
	pthread_t th;

	(void)state;
	s.buf = malloc(LEN);
	for (i = 0; i < LEN; i++)
		s.buf[i] = rnd(&seed);
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
		setsockopt(sp[i][0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		setsockopt(sp[i][1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		fcntl(sp[i][0], F_SETFL, O_NONBLOCK);
		fcntl(sp[i][1], F_SETFL, O_NONBLOCK);
		s.fds[i] = sp[i][0];
		assert_int_equal(mercury_rx_add(rx, sp[i][1]), i);
	}
	assert_int_equal(pthread_create(&th, NULL, send_thread, &s), 0);
	while (done < 8) {
		r = mercury_rx_poll(rx, 5000);
		assert_true(r >= 0);
		done += r;
	}
	pthread_join(th, NULL);
	assert_int_equal(s.ret, 0);
	for (i = 0; i < 8; i++) {
		assert_int_equal(mercury_rx_next(rx, &t), 0);
		assert_int_equal(t.len, LEN / 8);
		assert_int_equal(t.tag, 1 + t.id % 3);
		assert_memory_equal(t.data, s.buf + t.id * (LEN / 8), LEN / 8);
		mercury_tensor_release(&t);
	}
	/* Clean close between frames vs. inside a frame. */
	close(sp[0][0]);
	r = mercury_rx_poll(rx, 1000);
	assert_int_equal(r, 0);
	assert_int_equal(mercury_rx_read(rx, 0), -ENOTCONN);
	assert_int_equal(write(sp[1][0], "MRCY", 4), 4);
	close(sp[1][0]);
	assert_int_equal(mercury_rx_read(rx, 1), 0);	/* 4 bytes of header */
	assert_int_equal(mercury_rx_read(rx, 1), -ECONNRESET);
	assert_int_equal(mercury_rx_poll(rx, 0), -ENOTCONN);
	/* AF_UNIX: no address, the fd names the last to close */
	snprintf(msg, sizeof(msg), "every connection is closed, the last by fd %d", sp[1][1]);
	assert_non_null(strstr(mercury_last_error(), msg));
	mercury_rx_free(rx);
	close(sp[0][1]);
	close(sp[1][1]);
	free(s.buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_layout),
		cmocka_unit_test(test_decode_errors),
		cmocka_unit_test(test_reassembly_random_splits),
		cmocka_unit_test(test_reassembly_errors),
		cmocka_unit_test(test_socket_partial_io),
		cmocka_unit_test(test_rx_poll_fair),
		cmocka_unit_test(test_rx_names_peer),
	};

	return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
