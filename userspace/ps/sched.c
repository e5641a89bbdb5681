// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * What both roles share beyond the byte pipes: the hello that opens every
 * connection, and Mercury's sender, which keeps the frames of one peer in
 * a priority queue and hands the most urgent one to the connection the
 * channel set picks, as long as that connection holds little in the
 * kernel. The qdisc orders what the kernel holds across connections; the
 * cap keeps a connection's FIFO short so an urgent frame that finds every
 * connection busy (an inversion) waits behind at most --inflight bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/tcp.h>

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

void ps_msend_init(struct ps_msend *m, struct mercury_chanset *cs,
		   struct ps_conn **conns, uint64_t cap)
{
	m->cs = cs;
	m->conns = conns;
	m->cap = cap;
	m->conn = -1;
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

void ps_msend_report(struct json_object *o, const struct ps_msend *m, int n)
{
	struct ps_msend sum = { 0 };
	json_object *j = json_object_new_object();
	int i;

	for (i = 0; i < n; i++) {
		sum.frames += m[i].frames;
		sum.picks += m[i].picks;
		sum.queries += m[i].queries;
		sum.cap_blocks += m[i].cap_blocks;
		sum.eagain_blocks += m[i].eagain_blocks;
		sum.inversions += m[i].inversions;
	}
	json_object_object_add(j, "frames", json_object_new_int64(sum.frames));
	json_object_object_add(j, "picks", json_object_new_int64(sum.picks));
	json_object_object_add(j, "queries", json_object_new_int64(sum.queries));
	json_object_object_add(j, "cap_blocks", json_object_new_int64(sum.cap_blocks));
	json_object_object_add(j, "eagain_blocks", json_object_new_int64(sum.eagain_blocks));
	json_object_object_add(o, "sender", j);
	json_object_object_add(o, "inversions", json_object_new_int64(sum.inversions));
}

bool ps_msend_due(const struct ps_msend *m, int64_t now)
{
	if (!m->wake_ns)
		return ps_heap_top(&m->heap) != NULL;
	/* blocked: only time, or a new frame at the top, can change that */
	return now >= m->wake_ns || ps_heap_top(&m->heap) != m->blocked_top;
}

bool ps_msend_runnable(const struct ps_msend *m, int64_t now)
{
	return ps_msend_due(m, now) && !(m->waiting && m->waiting->head);
}

/*
 * When connection c may hold `excess` fewer bytes. SIOCOUTQ falls only
 * when ACKs come back, which no poll event reports (POLLOUT means buffer
 * space). TCP's own delivery rate for the connection (bytes/s over its
 * recent ACKs; when the qdisc serves the connection it gets the link, so
 * this is the rate it drains at) gives the time; without a sample yet,
 * 1 ms.
 */
static int64_t drain_ns(const struct ps_conn *c, uint64_t excess)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_delivery_rate) +
		  sizeof(ti.tcpi_delivery_rate) || !ti.tcpi_delivery_rate)
		return 1000000;
	return (int64_t)((double)excess * 1e9 / (double)ti.tcpi_delivery_rate) + 1;
}

/* SIOCOUTQ and the least urgent tag queued on i, through the set. */
static int query(struct ps_msend *m, int i, unsigned int *worst)
{
	uint64_t q;
	int ret;

	ret = mercury_chanset_queued(m->cs, i, &q, worst);
	if (ret < 0)
		return ret;
	m->queries++;
	m->queued = q;
	m->fresh = true;
	return 0;
}

static void block(struct ps_msend *m, const struct ps_out *o, int64_t when)
{
	m->blocked_top = o;
	m->wake_ns = when;
}

int ps_dispatch_mercury(struct ps_msend *m, int64_t now, struct ps_conn **bad)
{
	struct ps_out *o;
	int ret;

	m->wake_ns = 0;
	m->blocked_top = NULL;
	m->waiting = NULL;
	m->fresh = false;
	while ((o = ps_heap_top(&m->heap))) {
		struct ps_conn *c;
		uint64_t before;
		int i;

		if (m->conn < 0 || o->tag != m->tag) {
			unsigned int worst;

			i = mercury_chanset_try_pick(m->cs, o->tag);
			m->picks++;
			if (i == -EAGAIN) {
				/*
				 * Every connection holds unsent bytes of
				 * another tag: tagging any would re-tag them.
				 * Wait, as when capped, until some have left
				 * (no event reports that either).
				 */
				m->eagain_blocks++;
				m->conn = -1;
				block(m, o, now + 1000000);
				return 0;
			}
			if (i < 0)
				return i;
			ret = query(m, i, &worst);
			if (ret < 0)
				return ret;
			/* an inversion (no connection held only as urgent
			 * bytes) is not a connection to keep for the tag */
			if (worst && worst > o->tag) {
				m->inversions++;
				m->conn = -1;
			} else {
				m->conn = i;
				m->tag = o->tag;
			}
		} else {
			i = m->conn;
		}
		c = m->conns[i];
		/* a frame of ours is still half written there (frames never
		 * interleave on one connection): POLLOUT resumes it */
		if (c->head) {
			m->waiting = c;
			return 0;
		}
		if (m->queued >= m->cap && !m->fresh) {
			ret = query(m, i, NULL);	/* the bound is stale */
			if (ret < 0)
				return ret;
		}
		if (m->queued >= m->cap) {
			m->cap_blocks++;
			block(m, o, now + drain_ns(c, m->queued - m->cap + 1));
			return 0;
		}
		ps_heap_pop(&m->heap);
		ps_conn_queue(c, o);
		before = c->bytes_out;
		m->frames++;
		ret = ps_conn_flush(c);
		if (ret < 0) {
			*bad = c;
			return ret;
		}
		if (m->conn == i)
			m->queued += c->bytes_out - before;
		else
			m->fresh = false;	/* the reading was for i */
	}
	return 0;
}
