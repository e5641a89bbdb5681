// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Reassembly: each connection is a byte stream of (header, payload) frames;
 * payload bytes go straight into the buffer of their tensor, which may be
 * filled by chunks from several connections in any order. Senders never
 * send a byte range twice: each header's range is checked against the
 * ranges announced before it (kept merged, sorted by offset), and one that
 * overlaps any of them is a protocol error. So when the received byte
 * count reaches the total, every byte of the tensor was written exactly
 * once, and no other connection is still writing into it.
 *
 * Memory: tensors in progress and completed ones not yet taken by
 * mercury_rx_next() count against a budget (max_pending_bytes); a header
 * that would exceed it is refused before anything is allocated.
 *
 * Completion order is the order in which this process reads the last byte
 * of each tensor. Within a connection that is stream order. Across
 * connections, mercury_rx_poll() serves the ready ones round-robin, one read
 * of at most READ_BUF bytes each per call, starting after the connection it
 * served first the time before. A connection with a backlog therefore
 * cannot hold back another ready one by more than one read per call, and
 * none is always served first (index order would let connection 0 finish
 * its tensors first after every stall, whatever arrived first).
 */
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>
#include <sys/socket.h>

#include "internal.h"

#define DEFAULT_MAX_TENSOR	(4ULL << 30)
#define DEFAULT_MAX_BYTES	(8ULL << 30)
#define DEFAULT_MAX_PENDING	65536
#define READ_BUF		(64 * 1024)

/* Bytes [lo, hi) of a tensor, announced by headers. */
struct span {
	uint64_t lo, hi;
};

struct pending {
	unsigned char *data;
	uint64_t total;			/* bytes */
	uint64_t got;			/* bytes received so far */
	struct span *spans;		/* announced, merged, by offset */
	size_t nspans, spans_cap;
	uint32_t id;
	uint16_t tag;
};

struct rx_conn {
	unsigned char hdr[MERCURY_FRAME_HDR_LEN];
	size_t hdr_got;			/* header bytes read so far */
	struct mercury_frame f;		/* the frame being received */
	struct pending *cur;		/* tensor the payload goes to */
	unsigned char *dst;		/* dest mode: the caller's place for it */
	uint64_t off;			/* next payload byte's tensor offset */
	uint64_t left;			/* payload bytes still to come */
	uint64_t bytes, frames;		/* for mercury_rx_conn_stats() */
	int fd;
	char peer[MERCURY_PEER_STRLEN];	/* of a socket, for errors */
	bool closed;
};

struct mercury_rx {
	struct rx_conn *conns;
	size_t nconns;
	struct pending **pend;		/* tensors in progress */
	size_t npend, pend_cap;
	struct mercury_tensor *done;	/* ring of completed tensors */
	size_t done_head, done_cnt, done_cap;
	uint64_t max_tensor;
	uint64_t max_bytes;		/* budget of held tensor bytes */
	uint64_t held;			/* pending + done, bytes */
	size_t max_pending;
	size_t rr;			/* rx_poll serves from here next time */
	size_t last_closed;		/* the connection that closed last */
	unsigned char *rbuf;		/* READ_BUF bytes */
	/* dest mode: the caller's buffers, see mercury_rx_opts */
	int (*dest)(void *ctx, size_t conn, const struct mercury_frame *f,
		    void **dst);
	int (*frame_done)(void *ctx, size_t conn, const struct mercury_frame *f,
			  void *data, bool tensor_done);
	void *ctx;
};

MERCURY_API int mercury_rx_new(const struct mercury_rx_opts *opts,
			       struct mercury_rx **out)
{
	struct mercury_rx *rx;

	if (!out)
		return mercury_err(EINVAL, "rx: out is NULL");
	*out = NULL;
	if (!OPTS_VALID(opts, mercury_rx_opts))
		return -errno;
	rx = calloc(1, sizeof(*rx));
	if (!rx || !(rx->rbuf = malloc(READ_BUF))) {
		free(rx);
		return mercury_err(ENOMEM, "rx: out of memory");
	}
	rx->max_tensor = OPTS_GET(opts, max_tensor_bytes, 0);
	if (!rx->max_tensor)
		rx->max_tensor = DEFAULT_MAX_TENSOR;
	rx->max_bytes = OPTS_GET(opts, max_pending_bytes, 0);
	if (!rx->max_bytes)
		rx->max_bytes = DEFAULT_MAX_BYTES;
	rx->max_pending = OPTS_GET(opts, max_pending, 0);
	if (!rx->max_pending)
		rx->max_pending = DEFAULT_MAX_PENDING;
	rx->dest = OPTS_GET(opts, dest, NULL);
	rx->frame_done = OPTS_GET(opts, frame_done, NULL);
	rx->ctx = OPTS_GET(opts, ctx, NULL);
	*out = rx;
	return 0;
}

MERCURY_API void mercury_tensor_release(struct mercury_tensor *t)
{
	if (!t)
		return;
	free(t->data);
	t->data = NULL;
	t->len = 0;
}

MERCURY_API void mercury_rx_free(struct mercury_rx *rx)
{
	size_t i;

	if (!rx)
		return;
	for (i = 0; i < rx->npend; i++) {
		free(rx->pend[i]->data);
		free(rx->pend[i]->spans);
		free(rx->pend[i]);
	}
	for (i = 0; i < rx->done_cnt; i++)
		free(rx->done[(rx->done_head + i) % rx->done_cap].data);
	free(rx->pend);
	free(rx->done);
	free(rx->conns);
	free(rx->rbuf);
	free(rx);
}

MERCURY_API int mercury_rx_add(struct mercury_rx *rx, int fd)
{
	struct rx_conn *c;

	if (!rx)
		return mercury_err(EINVAL, "rx: NULL");
	if (rx->nconns >= 4096)
		return mercury_err(EMFILE, "rx: too many connections");
	c = realloc(rx->conns, (rx->nconns + 1) * sizeof(*c));
	if (!c)
		return mercury_err(ENOMEM, "rx: out of memory");
	rx->conns = c;
	memset(&c[rx->nconns], 0, sizeof(*c));
	c[rx->nconns].fd = fd;
	if (fd >= 0)
		mercury_peer_str(fd, c[rx->nconns].peer,
				 sizeof(c[rx->nconns].peer));
	return rx->nconns++;
}

static struct pending *pend_find(struct mercury_rx *rx, uint32_t id,
				 size_t *idx)
{
	size_t i;

	/* Linear: a handful of tensors are in flight, each chunk is large. */
	for (i = 0; i < rx->npend; i++) {
		if (rx->pend[i]->id == id) {
			*idx = i;
			return rx->pend[i];
		}
	}
	return NULL;
}

static int pend_get(struct mercury_rx *rx, const struct mercury_frame *f,
		    struct pending **out)
{
	struct pending *p, **np;
	size_t i;

	p = pend_find(rx, f->tensor_id, &i);
	if (p) {
		if (p->total != f->total_len || p->tag != f->tag)
			return mercury_err(EPROTO,
					   "rx: tensor %u: chunk says %llu bytes tag %u, earlier %llu bytes tag %u",
					   f->tensor_id,
					   (unsigned long long)f->total_len, f->tag,
					   (unsigned long long)p->total, p->tag);
		*out = p;
		return 0;
	}
	if (f->total_len > rx->max_tensor)
		return mercury_err(EMSGSIZE, "rx: tensor %u of %llu bytes > limit %llu",
				   f->tensor_id, (unsigned long long)f->total_len,
				   (unsigned long long)rx->max_tensor);
	if (rx->npend >= rx->max_pending)
		return mercury_err(ENOBUFS, "rx: %zu tensors already in progress",
				   rx->npend);
	if (!rx->dest && f->total_len > rx->max_bytes - rx->held)
		return mercury_err(ENOBUFS,
				   "rx: tensor %u (%llu bytes) would exceed the budget of %llu bytes held (%llu held)",
				   f->tensor_id, (unsigned long long)f->total_len,
				   (unsigned long long)rx->max_bytes,
				   (unsigned long long)rx->held);
	if (rx->npend == rx->pend_cap) {
		size_t cap = rx->pend_cap ? 2 * rx->pend_cap : 16;

		np = realloc(rx->pend, cap * sizeof(*np));
		if (!np)
			return mercury_err(ENOMEM, "rx: out of memory");
		rx->pend = np;
		rx->pend_cap = cap;
	}
	p = calloc(1, sizeof(*p));
	/* malloc(0) may return NULL: keep one byte for empty tensors. */
	if (!p || (!rx->dest &&
		   !(p->data = malloc(f->total_len ? f->total_len : 1)))) {
		free(p);
		return mercury_err(ENOMEM, "rx: no memory for tensor %u (%llu bytes)",
				   f->tensor_id, (unsigned long long)f->total_len);
	}
	p->id = f->tensor_id;
	p->tag = f->tag;
	p->total = f->total_len;
	if (!rx->dest)
		rx->held += p->total;
	rx->pend[rx->npend++] = p;
	*out = p;
	return 0;
}

/*
 * Record that bytes [lo, hi) of p are on their way; -EPROTO if any of them
 * was announced before. O(log n) to find the place, a memmove to insert.
 */
static int span_claim(struct pending *p, uint64_t lo, uint64_t hi)
{
	size_t a = 0, b = p->nspans, i;
	struct span *s;

	if (lo == hi)
		return 0;
	while (a < b) {			/* first span ending after lo */
		size_t m = a + (b - a) / 2;

		if (p->spans[m].hi <= lo)
			a = m + 1;
		else
			b = m;
	}
	i = a;
	if (i < p->nspans && p->spans[i].lo < hi)
		return mercury_err(EPROTO,
				   "rx: tensor %u: bytes %llu..%llu announced twice",
				   p->id, (unsigned long long)lo,
				   (unsigned long long)hi);
	if (i && p->spans[i - 1].hi == lo) {
		p->spans[i - 1].hi = hi;
		if (i < p->nspans && p->spans[i].lo == hi) {
			p->spans[i - 1].hi = p->spans[i].hi;
			memmove(&p->spans[i], &p->spans[i + 1],
				(p->nspans - i - 1) * sizeof(*s));
			p->nspans--;
		}
		return 0;
	}
	if (i < p->nspans && p->spans[i].lo == hi) {
		p->spans[i].lo = lo;
		return 0;
	}
	if (p->nspans == p->spans_cap) {
		size_t cap = p->spans_cap ? 2 * p->spans_cap : 4;

		s = realloc(p->spans, cap * sizeof(*s));
		if (!s)
			return mercury_err(ENOMEM, "rx: out of memory");
		p->spans = s;
		p->spans_cap = cap;
	}
	memmove(&p->spans[i + 1], &p->spans[i],
		(p->nspans - i) * sizeof(*p->spans));
	p->spans[i] = (struct span){ lo, hi };
	p->nspans++;
	return 0;
}

/* Account n bytes to p; move it to the done ring when complete. */
static int pend_account(struct mercury_rx *rx, struct pending *p, uint64_t n)
{
	struct mercury_tensor *nd;
	size_t i = 0, j;

	p->got += n;
	if (p->got < p->total)
		return 0;
	if (rx->dest)			/* the caller's tensor: nothing to hold */
		goto forget;
	if (rx->done_cnt == rx->done_cap) {
		size_t cap = rx->done_cap ? 2 * rx->done_cap : 16;

		nd = malloc(cap * sizeof(*nd));
		if (!nd)
			return mercury_err(ENOMEM, "rx: out of memory");
		for (j = 0; j < rx->done_cnt; j++)
			nd[j] = rx->done[(rx->done_head + j) % rx->done_cap];
		free(rx->done);
		rx->done = nd;
		rx->done_cap = cap;
		rx->done_head = 0;
	}
	rx->done[(rx->done_head + rx->done_cnt) % rx->done_cap] =
		(struct mercury_tensor){
			.id = p->id, .tag = p->tag, .len = p->total,
			.data = p->data,
		};
	rx->done_cnt++;
forget:
	pend_find(rx, p->id, &i);
	rx->pend[i] = rx->pend[--rx->npend];
	free(p->spans);
	free(p);
	return 1;
}

/*
 * A frame's payload is in (n = its last bytes, already stored): account
 * them, tell the caller. Tensors (copy mode) or frames (dest mode)
 * completed, or a negative errno; *stop: frame_done() asked to stop.
 */
static int rx_frame_end(struct mercury_rx *rx, size_t conn, uint64_t n,
			bool *stop)
{
	struct rx_conn *c = &rx->conns[conn];
	int done, r;

	done = pend_account(rx, c->cur, n);
	c->cur = NULL;
	if (done < 0)
		return done;
	c->frames++;
	if (!rx->dest)
		return done;
	if (rx->frame_done) {
		r = rx->frame_done(rx->ctx, conn, &c->f, c->dst, done);
		if (r < 0)
			return mercury_err(-r,
					   "rx: connection %zu: tensor %u: the caller refused the frame at offset %llu: %s",
					   conn, c->f.tensor_id,
					   (unsigned long long)c->f.offset,
					   strerror(-r));
		*stop = r > 0;
	}
	return 1;
}

/*
 * The error just set (a bad header, a chunk that contradicts the tensor),
 * again with the connection, and the peer of a socket, in front: a
 * malformed frame's message says where it came from.
 */
static int rx_conn_err(struct mercury_rx *rx, size_t conn, int err)
{
	struct rx_conn *c = &rx->conns[conn];
	char why[256];

	snprintf(why, sizeof(why), "%s", mercury_last_error());
	if (c->fd < 0)
		return mercury_err(-err, "rx: connection %zu: %s", conn, why);
	return mercury_err(-err, "rx: connection %zu (%s): %s", conn, c->peer,
			   why);
}

/* The header in c->hdr is complete: check it, find the payload's place. */
static int rx_header(struct mercury_rx *rx, size_t conn, bool *stop)
{
	struct rx_conn *c = &rx->conns[conn];
	void *dst = NULL;
	int err;

	c->hdr_got = 0;
	err = mercury_frame_decode(c->hdr, sizeof(c->hdr), &c->f);
	if (err < 0)
		return rx_conn_err(rx, conn, err);
	err = pend_get(rx, &c->f, &c->cur);
	if (err)
		return rx_conn_err(rx, conn, err);
	err = span_claim(c->cur, c->f.offset, c->f.offset + c->f.chunk_len);
	if (err) {
		c->cur = NULL;
		return rx_conn_err(rx, conn, err);
	}
	c->dst = NULL;
	if (rx->dest) {
		err = rx->dest(rx->ctx, conn, &c->f, &dst);
		if (!err && !dst && c->f.chunk_len)
			err = -EFAULT;
		if (err < 0) {
			c->cur = NULL;
			return mercury_err(-err,
					   "rx: connection %zu: tensor %u: no destination for %u bytes at offset %llu: %s",
					   conn, c->f.tensor_id, c->f.chunk_len,
					   (unsigned long long)c->f.offset,
					   strerror(-err));
		}
		c->dst = dst;
	}
	c->off = c->f.offset;
	c->left = c->f.chunk_len;
	/* Only an empty tensor has an empty chunk. */
	return c->left ? 0 : rx_frame_end(rx, conn, 0, stop);
}

/* Where the next payload byte of connection c goes. */
static unsigned char *rx_target(const struct rx_conn *c)
{
	return c->dst ? c->dst + (c->off - c->f.offset) : c->cur->data + c->off;
}

/* n payload bytes were stored at rx_target(c). */
static int rx_payload(struct mercury_rx *rx, size_t conn, uint64_t n,
		      bool *stop)
{
	struct rx_conn *c = &rx->conns[conn];

	c->off += n;
	c->left -= n;
	if (c->left)
		return pend_account(rx, c->cur, n);
	/* Completion frees the tensor: only possible once c->left == 0. */
	return rx_frame_end(rx, conn, n, stop);
}

MERCURY_API int mercury_rx_feed(struct mercury_rx *rx, size_t conn,
				const void *buf, size_t len)
{
	const unsigned char *b = buf;
	struct rx_conn *c;
	bool stop = false;
	int done = 0, r;
	size_t n;

	if (!rx || conn >= rx->nconns || (!buf && len))
		return mercury_err(EINVAL, "rx feed: bad argument");
	c = &rx->conns[conn];
	c->bytes += len;
	/* a stop matters to read(): the bytes here are already taken */
	while (len) {
		if (!c->cur) {
			n = MERCURY_FRAME_HDR_LEN - c->hdr_got;
			n = n < len ? n : len;
			memcpy(c->hdr + c->hdr_got, b, n);
			c->hdr_got += n;
			b += n;
			len -= n;
			if (c->hdr_got < MERCURY_FRAME_HDR_LEN)
				break;
			r = rx_header(rx, conn, &stop);
		} else {
			n = c->left < len ? c->left : len;
			memcpy(rx_target(c), b, n);
			b += n;
			len -= n;
			r = rx_payload(rx, conn, n, &stop);
		}
		if (r < 0)
			return r;
		done += r;
	}
	return done;
}

/* dest mode: bounded, so one busy peer cannot starve the others */
#define DIRECT_READS	64

/*
 * dest mode: read the header, then the payload into its destination,
 * each no further than its end, so no byte is copied or read ahead.
 * Frames completed or a negative errno; *eof: the peer closed; *none:
 * nothing was there.
 */
static int rx_read_direct(struct mercury_rx *rx, size_t conn, bool *eof,
			  bool *none)
{
	struct rx_conn *c = &rx->conns[conn];
	int reads, done = 0, r, err;
	bool stop = false;
	size_t want;
	ssize_t n;

	*eof = false;
	*none = true;
	for (reads = 0; reads < DIRECT_READS && !stop; reads++) {
		if (!c->cur) {
			n = recv(c->fd, c->hdr + c->hdr_got,
				 MERCURY_FRAME_HDR_LEN - c->hdr_got, MSG_DONTWAIT);
		} else {
			want = c->left < SSIZE_MAX ? c->left : SSIZE_MAX;
			n = recv(c->fd, rx_target(c), want, MSG_DONTWAIT);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			err = errno;
			return mercury_err(err, "rx: read from %s: %s",
					   c->peer,
					   strerror(err));
		}
		if (!n) {
			*eof = true;
			break;
		}
		*none = false;
		c->bytes += n;
		if (!c->cur) {
			c->hdr_got += n;
			if (c->hdr_got < MERCURY_FRAME_HDR_LEN)
				continue;
			r = rx_header(rx, conn, &stop);
		} else {
			r = rx_payload(rx, conn, n, &stop);
		}
		if (r < 0)
			return r;
		done += r;
	}
	return done;
}

MERCURY_API int mercury_rx_read(struct mercury_rx *rx, size_t conn)
{
	bool eof = false, none;
	struct rx_conn *c;
	ssize_t r;
	int err;

	if (!rx || conn >= rx->nconns || rx->conns[conn].fd < 0)
		return mercury_err(EINVAL, "rx read: bad connection %zu", conn);
	c = &rx->conns[conn];
	if (c->closed)
		return mercury_err(ENOTCONN, "rx: connection %zu closed", conn);
	if (rx->dest) {
		r = rx_read_direct(rx, conn, &eof, &none);
		if (r < 0 || (!eof && !none))
			return r;
	} else {
		do
			r = read(c->fd, rx->rbuf, READ_BUF);
		while (r < 0 && errno == EINTR);
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			err = errno;
			return mercury_err(err, "rx: read from %s: %s",
					   c->peer,
					   strerror(err));
		}
		if (r > 0)
			return mercury_rx_feed(rx, conn, rx->rbuf, r);
		eof = !r;
	}
	if (!eof)
		return mercury_quiet(EAGAIN, "rx: connection %zu has no bytes yet",
				     conn);
	c->closed = true;
	rx->last_closed = conn;
	if (c->cur || c->hdr_got)
		return mercury_err(ECONNRESET,
				   "rx: connection %zu (%s) closed inside a frame",
				   conn, c->peer);
	return mercury_quiet(ENOTCONN,
			     "rx: connection %zu (%s) closed by the peer between frames",
			     conn, c->peer);
}

MERCURY_API int mercury_rx_conn_stats(const struct mercury_rx *rx, size_t conn,
				      struct mercury_rx_conn_stats *st,
				      size_t sz)
{
	struct mercury_rx_conn_stats s;

	if (!rx || conn >= rx->nconns || !st)
		return mercury_err(EINVAL, "rx stats: bad argument");
	s = (struct mercury_rx_conn_stats){
		.bytes = rx->conns[conn].bytes,
		.frames = rx->conns[conn].frames,
		.closed = rx->conns[conn].closed,
	};
	memset(st, 0, sz);
	memcpy(st, &s, sz < sizeof(s) ? sz : sizeof(s));
	return 0;
}

MERCURY_API int mercury_rx_poll(struct mercury_rx *rx, int timeout_ms)
{
	size_t i, k, n = 0, first = SIZE_MAX;
	struct pollfd *pfd;
	int r, done = 0;

	if (!rx)
		return mercury_err(EINVAL, "rx poll: NULL");
	pfd = calloc(rx->nconns ? rx->nconns : 1, sizeof(*pfd));
	if (!pfd)
		return mercury_err(ENOMEM, "rx: out of memory");
	for (i = 0; i < rx->nconns; i++) {
		pfd[i].fd = rx->conns[i].closed ? -1 : rx->conns[i].fd;
		pfd[i].events = POLLIN;
		n += pfd[i].fd >= 0;
	}
	if (!n) {
		free(pfd);
		if (rx->nconns && rx->conns[rx->last_closed].closed)
			return mercury_quiet(ENOTCONN,
					     "rx poll: every connection is closed, the last by %s",
					     rx->conns[rx->last_closed].peer);
		return mercury_quiet(ENOTCONN, "rx poll: every connection is closed");
	}
	r = poll(pfd, rx->nconns, timeout_ms);
	if (r < 0) {
		r = errno == EINTR ? 0 :
			mercury_err(errno, "rx: poll: %s", strerror(errno));
		free(pfd);
		return mercury_ret(r);
	}
	/* One bounded read per ready connection, rotating the start. */
	for (k = 0; k < rx->nconns && r > 0; k++) {
		i = (rx->rr + k) % rx->nconns;
		if (!pfd[i].revents)
			continue;
		if (first == SIZE_MAX)
			first = i;
		r = mercury_rx_read(rx, i);
		if (r == -EAGAIN || r == -ENOTCONN)
			r = 0;
		if (r < 0) {
			free(pfd);
			return mercury_ret(r);
		}
		done += r;
		r = 1;
	}
	if (first != SIZE_MAX)
		rx->rr = (first + 1) % rx->nconns;
	free(pfd);
	return done;
}

MERCURY_API int mercury_rx_next(struct mercury_rx *rx, struct mercury_tensor *t)
{
	if (!rx || !t)
		return mercury_err(EINVAL, "rx next: NULL argument");
	if (!rx->done_cnt)
		return mercury_quiet(EAGAIN, "rx next: no complete tensor yet");
	*t = rx->done[rx->done_head];
	rx->done_head = (rx->done_head + 1) % rx->done_cap;
	rx->done_cnt--;
	rx->held -= t->len;		/* the caller's now */
	return 0;
}
