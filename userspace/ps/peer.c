// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * What both roles share beyond the sockets: the hello that opens every
 * connection, and each peer's libmercury sender and receiver. Every
 * scheme writes through the same sender (libmercury's channel set):
 * Mercury lets the set place frames in priority order under the
 * in-flight cap (--inflight), the others pin each frame to the connection
 * their scheme names, in order. Every scheme reads through the same
 * receiver, payload straight into the role's buffers. ByteScheduler's
 * credit window is application-level flow control: its heap of
 * partitions stays here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ps.h"

struct hello {
	uint32_t worker_id, conn_idx, nconns, workers;
	uint32_t server_id, servers;
	uint32_t hash_hi, hash_lo;
};

void ps_hello_encode(uint8_t *buf, const struct ps_hello *h)
{
	struct hello w = {
		htonl(h->worker_id), htonl(h->conn_idx), htonl(h->nconns),
		htonl(h->workers), htonl(h->server_id), htonl(h->servers),
		htonl(h->hash >> 32), htonl((uint32_t)h->hash),
	};

	memcpy(buf, &w, sizeof(w));
}

void ps_hello_decode(const uint8_t *buf, struct ps_hello *h)
{
	struct hello w;

	memcpy(&w, buf, sizeof(w));
	h->worker_id = ntohl(w.worker_id);
	h->conn_idx = ntohl(w.conn_idx);
	h->nconns = ntohl(w.nconns);
	h->workers = ntohl(w.workers);
	h->server_id = ntohl(w.server_id);
	h->servers = ntohl(w.servers);
	h->hash = (uint64_t)ntohl(w.hash_hi) << 32 | ntohl(w.hash_lo);
}

/*
 * Connection i prefers tag 1 + i * levels / n: with one level per
 * connection, every level has a connection of its own to go to when
 * several are idle (the channel set's tie-break), so a level does not
 * take the connection the next, more urgent level would have used.
 */
void ps_mercury_classes(unsigned int *classes, int n, unsigned int levels)
{
	int i;

	for (i = 0; i < n; i++)
		classes[i] = 1 + (unsigned int)((uint64_t)i * levels / n);
}

int ps_peer_open(struct ps_peer *p, const struct ps_cfg *cfg,
		 unsigned int levels, uint64_t chunk,
		 int (*dest)(void *, size_t, const struct mercury_frame *, void **),
		 int (*done)(void *, size_t, const struct mercury_frame *, void *, bool))
{
	bool mercury = cfg->scheme == PS_MERCURY;
	unsigned int classes[PS_MAX_CHANNELS];
	int fds[PS_MAX_CHANNELS], i, ret;
	MERCURY_OPTS(mercury_tag_opts, to, .source = cfg->tag_source);
	MERCURY_OPTS(mercury_chanset_opts, co, .tag_opts = &to,
		     .chunk_size = chunk, .no_tag = !mercury,
		     .classes = mercury ? classes : NULL,
		     .inflight = mercury ? cfg->inflight : 0);
	MERCURY_OPTS(mercury_rx_opts, ro, .dest = dest, .frame_done = done,
		     .ctx = p);

	ps_mercury_classes(classes, p->n, levels);
	for (i = 0; i < p->n; i++)
		fds[i] = p->conns[i].fd;
	ret = mercury_chanset_new(fds, p->n, &co, &p->cs);
	if (ret < 0)
		return ret;
	ret = mercury_rx_new(&ro, &p->rx);
	if (ret < 0)
		return ret;
	for (i = 0; i < p->n; i++) {
		ret = mercury_rx_add(p->rx, fds[i]);
		if (ret < 0)
			return ret;
	}
	return 0;
}

void ps_peer_close(struct ps_peer *p)
{
	mercury_chanset_free(p->cs);
	mercury_rx_free(p->rx);
	p->cs = NULL;
	p->rx = NULL;
}

int ps_send(struct ps_peer *p, uint32_t tensor_id, unsigned int tag,
	    uint64_t total, uint64_t offset, const void *payload, uint32_t len,
	    uint64_t key, int conn)
{
	MERCURY_OPTS(mercury_tx_frame, f, .tensor_id = tensor_id,
		     .tag = tag,
		     .total_len = total, .offset = offset, .data = payload,
		     .chunk_len = len, .order = key, .pin = conn >= 0,
		     .conn = conn >= 0 ? (size_t)conn : 0);

	return mercury_chanset_queue(p->cs, &f);
}

int ps_send_hello(struct ps_peer *p, int i, const struct ps_hello *h)
{
	MERCURY_OPTS(mercury_tx_frame, f, .tensor_id = PS_HELLO_ID,
		     .total_len = PS_HELLO_LEN, .data = p->conns[i].hello,
		     .chunk_len = PS_HELLO_LEN, .pin = true, .conn = i,
		     .no_tag = true);

	ps_hello_encode(p->conns[i].hello, h);
	return mercury_chanset_queue(p->cs, &f);
}

int ps_peer_progress(struct ps_peer *p, int64_t now, struct ps_conn **bad)
{
	size_t failed = 0;
	int ret;

	ret = mercury_chanset_progress(p->cs, (uint64_t)now, &failed);
	if (ret < 0)
		*bad = &p->conns[failed < (size_t)p->n ? failed : 0];
	return ret;
}

int ps_peer_read(struct ps_peer *p, int i, int64_t now)
{
	struct mercury_rx_conn_stats st0, st1;
	int ret;

	mercury_rx_conn_stats(p->rx, i, &st0, sizeof(st0));
	ret = mercury_rx_read(p->rx, i);
	mercury_rx_conn_stats(p->rx, i, &st1, sizeof(st1));
	if (st1.bytes != st0.bytes)
		p->conns[i].last_in_ns = now;
	if (ret == -ENOTCONN || ret == -ECONNRESET)
		p->conns[i].eof = true;
	/* bytes without a whole frame are progress too */
	if (ret == 0 && st1.bytes != st0.bytes)
		ret = 1;
	return ret;
}

void ps_peer_bytes(const struct ps_peer *p, uint64_t *out, uint64_t *in)
{
	struct mercury_chanset_stats cst;
	struct mercury_rx_conn_stats rst;
	int i;

	if (p->cs && !mercury_chanset_get_stats(p->cs, &cst, sizeof(cst)))
		*out += cst.wire_bytes;
	for (i = 0; p->rx && i < p->n; i++)
		if (!mercury_rx_conn_stats(p->rx, i, &rst, sizeof(rst)))
			*in += rst.bytes;
}

void ps_sender_report(struct json_object *o, const struct ps_peer *p, int n)
{
	struct mercury_chanset_stats st, sum = { 0 };
	json_object *j = json_object_new_object();
	int i;

	for (i = 0; i < n; i++) {
		if (!p[i].cs || mercury_chanset_get_stats(p[i].cs, &st, sizeof(st)))
			continue;
		sum.placed += st.placed;
		sum.picks += st.picks;
		sum.queries += st.queries;
		sum.cap_blocks += st.cap_blocks;
		sum.eagain_blocks += st.eagain_blocks;
		sum.inversions += st.inversions;
	}
	json_object_object_add(j, "frames", json_object_new_int64(sum.placed));
	json_object_object_add(j, "picks", json_object_new_int64(sum.picks));
	json_object_object_add(j, "queries", json_object_new_int64(sum.queries));
	json_object_object_add(j, "cap_blocks", json_object_new_int64(sum.cap_blocks));
	json_object_object_add(j, "eagain_blocks", json_object_new_int64(sum.eagain_blocks));
	json_object_object_add(o, "sender", j);
	json_object_object_add(o, "inversions", json_object_new_int64(sum.inversions));
}

static bool heap_less(const struct ps_part *a, const struct ps_part *b)
{
	return a->key < b->key;
}

int ps_heap_push(struct ps_heap *h, const struct ps_part *o)
{
	size_t i;

	if (h->n == h->cap) {
		size_t ncap = h->cap ? 2 * h->cap : 64;
		struct ps_part *v = realloc(h->v, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = ncap;
	}
	i = h->n++;
	while (i && heap_less(o, &h->v[(i - 1) / 2])) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = *o;
	return 0;
}

const struct ps_part *ps_heap_top(const struct ps_heap *h)
{
	return h->n ? &h->v[0] : NULL;
}

void ps_heap_pop(struct ps_heap *h)
{
	struct ps_part last;
	size_t i = 0;

	if (!h->n)
		return;
	last = h->v[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < h->n && heap_less(&h->v[l], &last))
			m = l;
		if (l + 1 < h->n && heap_less(&h->v[l + 1], m == i ? &last : &h->v[l]))
			m = l + 1;
		if (m == i)
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	if (h->n)
		h->v[i] = last;
}

void ps_heap_free(struct ps_heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}
