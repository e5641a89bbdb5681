// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The one sender (mercury_chanset_queue/progress) and the receiver's
 * caller destinations (mercury_rx_opts.dest): priority order, the
 * in-flight cap, no re-tag, partial writes resumed, a closed peer, a
 * bounded wait; payload where the callback says, coverage kept.
 *
 * The sender tests use AF_UNIX pairs whose peers read only when told:
 * everything written stays queued (and, without SIOCOUTQNSD, counts as
 * unsent), so the channel set's view is exact.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "helpers.h"

#define FR	(MERCURY_FRAME_HDR_LEN + 1000)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static int readable(int fd)
{
	int n = -1;

	assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

struct fix {
	int sv[4][2];
	int n;
	struct mercury_chanset *cs;
	unsigned char payload[1000];
};

/* n socketpairs; classes 1..n (connection i prefers tag i + 1). */
static void setup(struct fix *f, int n, uint64_t cap)
{
	unsigned int classes[4] = { 1, 2, 3, 4 };
	int fds[4], i;
	MERCURY_OPTS(mercury_chanset_opts, co, .no_tag = true,
		     .classes = classes, .inflight = cap);

	memset(f, 0, sizeof(*f));
	f->n = n;
	for (i = 0; i < n; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, f->sv[i]), 0);
		fds[i] = f->sv[i][0];
	}
	assert_int_equal(mercury_chanset_new(fds, n, &co, &f->cs), 0);
}

static void teardown(struct fix *f)
{
	int i;

	mercury_chanset_free(f->cs);
	for (i = 0; i < f->n; i++) {
		close(f->sv[i][0]);
		close(f->sv[i][1]);
	}
}

/* k frames of tag, tensor id, ordered by the tag (the ps rank). */
static void push(struct fix *f, unsigned int tag, uint32_t id, int k)
{
	MERCURY_OPTS(mercury_tx_frame, tf, .tensor_id = id, .tag = tag,
		     .total_len = sizeof(f->payload), .data = f->payload,
		     .chunk_len = sizeof(f->payload), .order = tag);
	int i;

	for (i = 0; i < k; i++)
		assert_int_equal(mercury_chanset_queue(f->cs, &tf), 0);
}

static struct mercury_chanset_stats stats(const struct fix *f)
{
	struct mercury_chanset_stats st;

	assert_int_equal(mercury_chanset_get_stats(f->cs, &st, sizeof(st)), 0);
	return st;
}

/* The tensor ids of the frames waiting on socket fd, in stream order. */
static int frame_ids(int fd, uint32_t *ids, int max)
{
	unsigned char buf[MERCURY_FRAME_HDR_LEN];
	struct mercury_frame fr;
	char sink[4096];
	int n = 0;

	while (n < max && readable(fd) > 0) {
		assert_int_equal(read(fd, buf, sizeof(buf)), sizeof(buf));
		assert_int_equal(mercury_frame_decode(buf, sizeof(buf), &fr),
				 MERCURY_FRAME_HDR_LEN);
		assert_true(fr.chunk_len <= sizeof(sink));
		assert_int_equal(read(fd, sink, fr.chunk_len), fr.chunk_len);
		ids[n++] = fr.tensor_id;
	}
	return n;
}

/*
 * Frames queued before the sender runs leave in priority order (ties in
 * queue order), after the frame pinned to the connection first.
 */
static void test_priority_order(void **state)
{
	static const unsigned int order[] = { 5, 3, 1, 4, 2, 3 };
	MERCURY_OPTS(mercury_tx_frame, tf, .total_len = 10, .chunk_len = 10,
		     .pin = true, .conn = 0, .no_tag = true, .tensor_id = 99,
		     .tag = 1);
	uint32_t ids[16];
	struct fix f;
	size_t i;

	(void)state;
	setup(&f, 1, 0);
	tf.data = f.payload;
	assert_int_equal(mercury_chanset_queue(f.cs, &tf), 0);
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		MERCURY_OPTS(mercury_tx_frame, q, .tensor_id = i, .tag = 1,
			     .total_len = 100, .data = f.payload,
			     .chunk_len = 100, .order = order[i]);

		assert_int_equal(mercury_chanset_queue(f.cs, &q), 0);
	}
	assert_int_equal(mercury_chanset_pending(f.cs), 7);
	assert_int_equal(mercury_chanset_progress(f.cs, 0, NULL), 1);
	assert_int_equal(mercury_chanset_pending(f.cs), 0);
	assert_int_equal(frame_ids(f.sv[0][1], ids, 16), 7);
	assert_int_equal(ids[0], 99);		/* pinned: first */
	assert_int_equal(ids[1], 2);		/* order 1 */
	assert_int_equal(ids[2], 4);		/* order 2 */
	assert_int_equal(ids[3], 1);		/* order 3, queued first */
	assert_int_equal(ids[4], 5);		/* order 3 */
	assert_int_equal(ids[5], 3);		/* order 4 */
	assert_int_equal(ids[6], 0);		/* order 5 */
	assert_int_equal(stats(&f).placed, 6);
	assert_int_equal(stats(&f).chunks, 7);
	teardown(&f);
}

/*
 * The cap: a connection takes frames while it holds less than the cap;
 * later frames of the same tag reuse it without a pick; a blocked sender
 * sleeps until its wake time or a new top; a more urgent frame goes
 * elsewhere at once.
 */
static void test_cap_and_reuse(void **state)
{
	uint64_t now = now_ns(), wake;
	char sink[65536];
	struct fix f;

	(void)state;
	setup(&f, 2, 3000);
	/* tag 2 prefers connection 1 (class 2); three frames reach the
	 * 3000-byte cap with one pick and one SIOCOUTQ reading */
	push(&f, 2, 7, 10);
	assert_int_equal(mercury_chanset_progress(f.cs, now, NULL), 1);
	assert_int_equal(readable(f.sv[1][1]), 3 * FR);
	assert_int_equal(readable(f.sv[0][1]), 0);
	assert_int_equal(stats(&f).placed, 3);
	assert_int_equal(stats(&f).picks, 1);
	assert_int_equal(stats(&f).queries, 1);
	assert_int_equal(stats(&f).cap_blocks, 1);
	wake = mercury_chanset_wake(f.cs);
	assert_true(wake > now);
	/* blocked: nothing happens before the wake time */
	assert_int_equal(mercury_chanset_progress(f.cs, now, NULL), 0);
	assert_int_equal(stats(&f).queries, 1);
	/* a more urgent frame goes to connection 0 at once: connection 1
	 * holds unsent tag-2 bytes, which tagging it would re-tag */
	push(&f, 1, 8, 1);
	assert_int_equal(mercury_chanset_progress(f.cs, now, NULL), 1);
	assert_int_equal(readable(f.sv[0][1]), FR);
	assert_int_equal(readable(f.sv[1][1]), 3 * FR);
	assert_int_equal(stats(&f).placed, 4);
	assert_int_equal(stats(&f).picks, 3);	/* tag 1, then tag 2 again */
	assert_int_equal(stats(&f).cap_blocks, 2);
	assert_int_equal(stats(&f).inversions, 0);
	/* the peer reads: one reading of connection 1, then three frames */
	assert_int_equal(read(f.sv[1][1], sink, sizeof(sink)), 3 * FR);
	wake = mercury_chanset_wake(f.cs);
	assert_int_equal(mercury_chanset_progress(f.cs, wake, NULL), 1);
	assert_int_equal(readable(f.sv[1][1]), 3 * FR);
	assert_int_equal(stats(&f).picks, 3);
	assert_int_equal(stats(&f).queries, 4);
	assert_int_equal(stats(&f).placed, 7);
	assert_int_equal(mercury_chanset_pending(f.cs), 4);
	teardown(&f);
}

/* The only connection holds unsent tag-3 bytes: tag 1 waits, unsent. */
static void test_never_retags(void **state)
{
	uint64_t now = now_ns(), wake;
	char sink[65536];
	struct fix f;

	(void)state;
	setup(&f, 1, 1 << 20);
	push(&f, 3, 1, 1);
	assert_int_equal(mercury_chanset_progress(f.cs, now, NULL), 1);
	assert_int_equal(readable(f.sv[0][1]), FR);
	push(&f, 1, 2, 1);
	assert_int_equal(mercury_chanset_progress(f.cs, now, NULL), 0);
	assert_int_equal(readable(f.sv[0][1]), FR);
	assert_int_equal(stats(&f).eagain_blocks, 1);
	assert_int_equal(mercury_chanset_pending(f.cs), 1);
	wake = mercury_chanset_wake(f.cs);
	assert_true(wake > now);
	/* once they are gone, it goes */
	assert_int_equal(read(f.sv[0][1], sink, sizeof(sink)), FR);
	assert_int_equal(mercury_chanset_progress(f.cs, wake, NULL), 1);
	assert_int_equal(readable(f.sv[0][1]), FR);
	assert_int_equal(mercury_chanset_pending(f.cs), 0);
	assert_int_equal(mercury_chanset_wake(f.cs), 0);
	teardown(&f);
}

/* The receiver's side: everything into one buffer, at the frame's offset. */
struct dst {
	unsigned char *buf;
	uint64_t len;
	int frames, tensors, refuse, stop;
};

static int dest_cb(void *ctx, size_t conn, const struct mercury_frame *f,
		   void **dst)
{
	struct dst *d = ctx;

	(void)conn;
	if (d->refuse)
		return -EPROTO;
	if (f->total_len != d->len)
		return -EINVAL;
	*dst = d->buf + f->offset;
	return 0;
}

static int done_cb(void *ctx, size_t conn, const struct mercury_frame *f,
		   void *data, bool tensor_done)
{
	struct dst *d = ctx;

	(void)conn;
	assert_ptr_equal(data, d->buf + f->offset);
	d->frames++;
	d->tensors += tensor_done;
	return d->stop;
}

static struct mercury_rx *dest_rx(struct dst *d, int fd)
{
	MERCURY_OPTS(mercury_rx_opts, o, .dest = dest_cb, .frame_done = done_cb,
		     .ctx = d);
	struct mercury_rx *rx;

	assert_int_equal(mercury_rx_new(&o, &rx), 0);
	assert_int_equal(mercury_rx_add(rx, fd), 0);
	return rx;
}

/*
 * Socket buffers far smaller than a frame: every write is partial and
 * resumes where it stopped; the receiver reads each payload straight
 * into place. Then the peer closes between frames, and inside one.
 */
static void test_partial_writes(void **state)
{
	const uint32_t len = 300000, chunk = 70001;
	unsigned char *src = malloc(len), *dst = calloc(1, len);
	struct dst d = { .buf = dst, .len = len };
	struct mercury_rx_conn_stats rs;
	struct mercury_chanset *cs;
	struct mercury_tensor t;
	int sv[2], small = 1024, rounds = 0, nframes = 0, partial = 0, r;
	struct mercury_rx *rx;
	uint32_t off, i;
	MERCURY_OPTS(mercury_chanset_opts, co, .no_tag = true);

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	for (i = 0; i < len; i++)
		src[i] = (unsigned char)(i * 31 + 7);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(mercury_chanset_new(&sv[0], 1, &co, &cs), 0);
	rx = dest_rx(&d, sv[1]);
	for (off = 0; off < len; off += chunk) {
		MERCURY_OPTS(mercury_tx_frame, tf, .tensor_id = 1, .tag = 3,
			     .total_len = len, .offset = off, .data = src + off,
			     .chunk_len = len - off < chunk ? len - off : chunk);

		assert_int_equal(mercury_chanset_queue(cs, &tf), 0);
		nframes++;
	}
	while (mercury_chanset_pending(cs) || d.frames < nframes) {
		assert_true(mercury_chanset_progress(cs, 0, NULL) >= 0);
		partial += mercury_chanset_events(cs, 0) == POLLOUT;
		r = mercury_rx_read(rx, 0);
		assert_true(r >= 0 || r == -EAGAIN);
		assert_true(++rounds < 1000000);
	}
	assert_int_equal(d.frames, nframes);
	assert_int_equal(d.tensors, 1);
	assert_memory_equal(src, dst, len);
	assert_true(partial > 0);	/* the buffers really were too small */
	assert_int_equal(mercury_rx_conn_stats(rx, 0, &rs, sizeof(rs)), 0);
	assert_int_equal(rs.bytes, len + nframes * MERCURY_FRAME_HDR_LEN);
	assert_int_equal(rs.frames, nframes);
	{
		struct mercury_chanset_stats st;

		assert_int_equal(mercury_chanset_get_stats(cs, &st, sizeof(st)), 0);
		assert_int_equal(st.wire_bytes, rs.bytes);
		assert_int_equal(st.chunks, nframes);
		assert_int_equal(st.bytes, len);
	}
	/* the caller's tensors are never held for mercury_rx_next() */
	assert_int_equal(mercury_rx_next(rx, &t), -EAGAIN);
	/* a peer that closes between frames: EOF */
	mercury_chanset_free(cs);
	close(sv[0]);
	assert_int_equal(mercury_rx_read(rx, 0), -ENOTCONN);
	mercury_rx_free(rx);
	close(sv[1]);
	/* a peer that closes inside a frame: reset, and no frame done */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(mercury_chanset_new(&sv[0], 1, &co, &cs), 0);
	{
		MERCURY_OPTS(mercury_tx_frame, tf, .tensor_id = 1, .tag = 3,
			     .total_len = len, .data = src, .chunk_len = 1000);
		unsigned char part[MERCURY_FRAME_HDR_LEN + 10];

		assert_int_equal(mercury_chanset_queue(cs, &tf), 0);
		assert_int_equal(mercury_chanset_progress(cs, 0, NULL), 1);
		assert_int_equal(recv(sv[1], part, sizeof(part), 0), sizeof(part));
		mercury_chanset_free(cs);
		close(sv[0]);
		close(sv[1]);
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		assert_int_equal(write(sv[0], part, sizeof(part)), sizeof(part));
		close(sv[0]);
	}
	d.frames = 0;
	rx = dest_rx(&d, sv[1]);
	assert_int_equal(mercury_rx_read(rx, 0), -ECONNRESET);
	assert_int_equal(d.frames, 0);
	mercury_rx_free(rx);
	close(sv[1]);
	free(src);
	free(dst);
}

/* The peer closed: -EPIPE naming the connection, no SIGPIPE. */
static int queue_to_closed_peer(void)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true);
	static char buf[1000];
	MERCURY_OPTS(mercury_tx_frame, tf, .tensor_id = 1, .tag = 1,
		     .total_len = sizeof(buf), .data = buf,
		     .chunk_len = sizeof(buf), .pin = true, .conn = 1);
	struct mercury_chanset *cs;
	int sv[2][2], fds[2], i, err;
	size_t failed = 99;

	for (i = 0; i < 2; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]))
			return 2;
		fds[i] = sv[i][0];
	}
	close(sv[1][1]);
	if (mercury_chanset_new(fds, 2, &o, &cs) ||
	    mercury_chanset_queue(cs, &tf))
		return 3;
	err = mercury_chanset_progress(cs, 0, &failed);
	if (err != -EPIPE || errno != EPIPE)
		return 4;
	if (failed != 1)
		return 5;
	/* an AF_UNIX peer has no address: the fd names it */
	if (!strstr(mercury_last_error(), "write to fd "))
		return 6;
	mercury_chanset_free(cs);
	return 0;
}

/*
 * The blocking send() on the same sender: a peer that stops reading
 * holds the connection at the in-flight cap; the wait ends after
 * timeout_ms with a message that says so.
 */
static int send_at_cap(void)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true,
		     .timeout_ms = 300, .inflight = 4096, .chunk_size = 1024);
	static char buf[64 << 10];
	struct mercury_chanset_stats st;
	struct mercury_chanset *cs;
	uint64_t t0;
	int sv[2], err;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 2;
	if (mercury_chanset_new(&sv[0], 1, &o, &cs))
		return 3;
	t0 = now_ns();
	err = mercury_chanset_send(cs, 1, 1, buf, sizeof(buf));
	if (err != -ETIMEDOUT || errno != ETIMEDOUT)
		return 4;
	if (now_ns() - t0 < 250000000u || now_ns() - t0 > 5000000000u)
		return 5;
	if (!strstr(mercury_last_error(), "in-flight cap"))
		return 6;
	/* nothing of the failed tensor is left queued */
	if (mercury_chanset_pending(cs))
		return 7;
	if (mercury_chanset_get_stats(cs, &st, sizeof(st)) || !st.cap_blocks)
		return 8;
	/* the cap held: about 4 KiB in the kernel, not all 64 */
	if (readable(sv[1]) > 4096 + 2 * (1024 + MERCURY_FRAME_HDR_LEN))
		return 9;
	mercury_chanset_free(cs);
	return 0;
}

/*
 * A receiver slower than the link: TCP over loopback, whose delivery
 * rate says the connection drains in microseconds, to a peer that reads
 * in bursts (16 KiB every 20 ms) through a small receive buffer. The bytes stay at the
 * cap for as long as the peer takes; the sender must sleep through that,
 * not wake after each drain_ns() estimate to find them still there.
 */
static int slow_reader_at_cap(void)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true,
		     .timeout_ms = 10000, .inflight = 8192, .chunk_size = 1024);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static char buf[256 << 10], sink[16384];
	struct mercury_chanset_stats st;
	struct mercury_chanset *cs;
	socklen_t alen = sizeof(a);
	int l, s, r, small = 4096, frames, got = 0;
	pid_t pid;

	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &alen))
		return 2;
	pid = fork();
	if (pid < 0)
		return 3;
	if (!pid) {
		r = accept(l, NULL, NULL);
		while ((s = read(r, sink, sizeof(sink))) > 0) {
			got += s;
			usleep(20000);
		}
		_exit(got == (int)sizeof(buf) +
		      (int)(sizeof(buf) / 1024) * MERCURY_FRAME_HDR_LEN ? 0 : 1);
	}
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
		return 4;
	if (mercury_chanset_new(&s, 1, &o, &cs))
		return 5;
	if (mercury_chanset_send(cs, 1, 1, buf, sizeof(buf)))
		return 6;
	if (mercury_chanset_get_stats(cs, &st, sizeof(st)))
		return 7;
	frames = sizeof(buf) / 1024;
	printf("# slow reader: %d frames, %llu cap blocks, %llu queries\n",
	       frames, (unsigned long long)st.cap_blocks,
	       (unsigned long long)st.queries);
	fflush(stdout);
	mercury_chanset_free(cs);
	close(s);
	if (waitpid(pid, &r, 0) != pid || !WIFEXITED(r) || WEXITSTATUS(r))
		return 8;
	/* a reading per frame placed, and a few per wait: not dozens */
	if (st.queries > 4 * (uint64_t)frames)
		return 9;
	return 0;
}

static void test_peer_failures(void **state)
{
	(void)state;
	in_child(queue_to_closed_peer, "peer closed");
	in_child(send_at_cap, "send at the cap");
	in_child(slow_reader_at_cap, "a slow reader at the cap");
}

static void test_queue_errors(void **state)
{
	MERCURY_OPTS(mercury_tx_frame, tf, .tensor_id = 1, .tag = 70000,
		     .total_len = 10, .chunk_len = 10, .data = "0123456789");
	struct fix f;

	(void)state;
	setup(&f, 2, 0);
	assert_int_equal(mercury_chanset_queue(f.cs, &tf), -ERANGE);
	tf.tag = 1;
	tf.offset = 5;			/* outside the tensor */
	assert_int_equal(mercury_chanset_queue(f.cs, &tf), -EINVAL);
	tf.offset = 0;
	tf.pin = true;
	tf.conn = 2;
	assert_int_equal(mercury_chanset_queue(f.cs, &tf), -EINVAL);
	tf.pin = false;
	tf.data = NULL;
	assert_int_equal(mercury_chanset_queue(f.cs, &tf), -EINVAL);
	assert_int_equal(mercury_chanset_queue(NULL, &tf), -EINVAL);
	assert_int_equal(mercury_chanset_pending(f.cs), 0);
	assert_int_equal(mercury_chanset_events(f.cs, 2), -EINVAL);
	teardown(&f);
}

/* One frame of tensor id: [off, off + len) of a total-byte tensor. */
static size_t frame(unsigned char *p, uint32_t id, uint64_t total,
		    uint64_t off, uint32_t len)
{
	struct mercury_frame fr = { .tensor_id = id, .tag = 2,
				    .total_len = total, .offset = off,
				    .chunk_len = len };
	uint32_t i;

	assert_int_equal(mercury_frame_encode(&fr, p, MERCURY_FRAME_HDR_LEN),
			 MERCURY_FRAME_HDR_LEN);
	for (i = 0; i < len; i++)
		p[MERCURY_FRAME_HDR_LEN + i] = (unsigned char)(off + i);
	return MERCURY_FRAME_HDR_LEN + len;
}

/*
 * Destinations through mercury_rx_feed(): payload lands where the
 * callback said and nowhere else; the header checks and the coverage
 * check still run before the callback; its refusal is the caller's
 * to see.
 */
static void test_rx_dest(void **state)
{
	unsigned char s[4 * (MERCURY_FRAME_HDR_LEN + 100)], buf[300];
	struct dst d = { .buf = buf + 50, .len = 200 };
	struct mercury_rx *rx;
	size_t n = 0, m;
	int i;

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	n += frame(s + n, 4, 200, 100, 100);
	n += frame(s + n, 4, 200, 0, 100);
	rx = dest_rx(&d, -1);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), 2);
	assert_int_equal(d.frames, 2);
	assert_int_equal(d.tensors, 1);
	for (i = 0; i < 200; i++)
		assert_int_equal(buf[50 + i], (unsigned char)i);
	for (i = 0; i < 50; i++) {	/* nothing outside the destination */
		assert_int_equal(buf[i], 0xee);
		assert_int_equal(buf[250 + i], 0xee);
	}
	/* coverage: the same bytes twice in one tensor is a protocol error */
	n = frame(s, 5, 200, 0, 100);
	n += frame(s + n, 5, 200, 50, 100);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), -EPROTO);
	assert_non_null(strstr(mercury_last_error(), "announced twice"));
	mercury_rx_free(rx);
	/* a header that lies about the tensor never reaches the callback */
	rx = dest_rx(&d, -1);
	d.frames = 0;
	n = frame(s, 6, 200, 0, 100);
	m = frame(s + n, 6, 300, 100, 100);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n + m), -EPROTO);
	assert_int_equal(d.frames, 1);
	mercury_rx_free(rx);
	/* refused by the callback: its errno, with a message */
	rx = dest_rx(&d, -1);
	d.refuse = 1;
	assert_int_equal(mercury_rx_feed(rx, 0, s, n), -EPROTO);
	assert_non_null(strstr(mercury_last_error(), "tensor 6"));
	mercury_rx_free(rx);
	/* feed was given the bytes: a stop does not drop them */
	rx = dest_rx(&d, -1);
	d.refuse = 0;
	d.stop = 1;
	d.frames = 0;
	n = frame(s, 7, 200, 0, 100);
	m = frame(s + n, 7, 200, 100, 100);
	assert_int_equal(mercury_rx_feed(rx, 0, s, n + m), 2);
	assert_int_equal(d.frames, 2);
	mercury_rx_free(rx);
}

/* Through a socket: a hello-like first frame read alone, then the rest. */
static void test_rx_dest_stop_on_socket(void **state)
{
	unsigned char s[3 * (MERCURY_FRAME_HDR_LEN + 100)], buf[200];
	struct dst d = { .buf = buf, .len = 200, .stop = 1 };
	struct mercury_rx *rx;
	int sv[2];
	size_t n;

	(void)state;
	n = frame(s, 8, 200, 0, 100);
	n += frame(s + n, 8, 200, 100, 100);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[0], s, n), (ssize_t)n);
	rx = dest_rx(&d, sv[1]);
	assert_int_equal(mercury_rx_read(rx, 0), 1);
	/* it read no byte past the first frame */
	assert_int_equal(readable(sv[1]), MERCURY_FRAME_HDR_LEN + 100);
	d.stop = 0;
	assert_int_equal(mercury_rx_read(rx, 0), 1);
	assert_int_equal(d.tensors, 1);
	assert_int_equal(mercury_rx_read(rx, 0), -EAGAIN);
	mercury_rx_free(rx);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_priority_order),
		cmocka_unit_test(test_cap_and_reuse),
		cmocka_unit_test(test_never_retags),
		cmocka_unit_test(test_partial_writes),
		cmocka_unit_test(test_peer_failures),
		cmocka_unit_test(test_queue_errors),
		cmocka_unit_test(test_rx_dest),
		cmocka_unit_test(test_rx_dest_stop_on_socket),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("tx", tests, NULL, NULL);
}
