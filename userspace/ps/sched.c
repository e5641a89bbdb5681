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

int ps_dispatch_mercury(struct ps_heap *h, struct ps_conn **conns,
			struct mercury_chanset *cs, uint64_t cap,
			bool *blocked, struct ps_conn **bad)
{
	struct ps_out *o;

	*blocked = false;
	while ((o = ps_heap_top(h))) {
		unsigned int worst;
		uint64_t queued;
		int i, ret;

		i = mercury_chanset_pick(cs, o->tag);
		if (i < 0)
			return i;
		/* a frame of ours is still half written there: frames never
		 * interleave on one connection */
		if (conns[i]->head)
			return 0;
		ret = mercury_chanset_queued(cs, i, &queued, &worst);
		if (ret < 0)
			return ret;
		if (queued >= cap) {
			*blocked = true;	/* SIOCOUTQ has no wake-up */
			return 0;
		}
		ps_heap_pop(h);
		ps_conn_queue(conns[i], o);
		ret = ps_conn_flush(conns[i]);
		if (ret < 0) {
			*bad = conns[i];
			return ret;
		}
	}
	return 0;
}
