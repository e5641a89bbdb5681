// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The server: holds one shard of every tensor's parameters. A chunk that
 * every worker has pushed is summed at once (fp32), applied (p -= sum) and
 * sent back to every worker with the tensor's tag; nothing waits for the
 * rest of the tensor. A chunk is summed only once all W copies are in, so
 * a worker's next push of it (which needs this pull first) never mixes
 * with the current iteration.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <json-c/json.h>

#include "ps.h"

struct srv {
	struct ps_cfg *cfg;
	struct ps_layout L;
	int s, W, C;
	uint64_t *poff;			/* tensor's shard in param/sum, bytes */
	float *param, *sum;
	uint32_t *count;		/* copies in, per chunk */
	uint8_t *seen;			/* [chunk * W + worker] */
	uint64_t *pushed;		/* chunks in, per worker */
	uint64_t aggregated, target, seq;
	struct ps_conn *conns;		/* [worker * C + idx] */
	struct ps_peer *peers;		/* per worker: sender and receiver */
	struct mercury_tagger *tagger;	/* mercury: the capability probe */
	int lfd;
	char why[160];			/* what was wrong with a frame */
};

static int iteration_of(const struct srv *v, int w)
{
	uint32_t n = v->L.srv_chunks[v->s];

	return n ? (int)(v->pushed[w] / n) : 0;
}

/* A push's header is in: check it against the layout, stage it. */
static int srv_dest(void *ctx, size_t conn, const struct mercury_frame *f,
		    void **dst)
{
	struct ps_peer *pr = ctx;
	struct srv *v = pr->role;
	struct ps_conn *c = &pr->conns[conn];
	size_t k;
	uint32_t ch;

	snprintf(v->why, sizeof(v->why), "tensor %u, offset %llu, length %u",
		 f->tensor_id, (unsigned long long)f->offset, f->chunk_len);
	if (f->tensor_id >= (uint32_t)v->L.nt)
		return -EPROTO;
	k = ps_idx(&v->L, f->tensor_id, v->s);
	if (f->total_len != v->L.hi[k] - v->L.lo[k] || f->offset % v->L.chunk)
		return -EPROTO;
	ch = f->offset / v->L.chunk;
	if (ch >= v->L.nchunks[k] ||
	    f->chunk_len != ps_chunk_len(&v->L, f->tensor_id, v->s, ch))
		return -EPROTO;
	ch += v->L.base[k];
	if (v->seen[(size_t)ch * v->W + c->peer]) {
		strncat(v->why, ": pushed twice", sizeof(v->why) - strlen(v->why) - 1);
		return -EPROTO;
	}
	v->why[0] = '\0';
	*dst = c->stage;
	return 0;
}

static int send_pull(struct srv *v, int t, uint64_t off, uint32_t len)
{
	const struct ps_tensor *T = &v->L.t[t];
	size_t k = ps_idx(&v->L, t, v->s);
	int w;

	for (w = 0; w < v->W; w++) {
		bool mercury = v->cfg->scheme == PS_MERCURY;
		int ret, conn = 0;

		if (mercury)
			conn = -1;		/* the set picks, by rank */
		else if (v->cfg->scheme == PS_PRIO)
			conn = T->band;
		ret = ps_send(&v->peers[w], t, T->tag,
			      v->L.hi[k] - v->L.lo[k], off,
			      (uint8_t *)v->param + v->poff[t] + off, len,
			      (uint64_t)T->rank << 40 | (v->seq++ & ((1ull << 40) - 1)),
			      conn);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int srv_done(void *ctx, size_t conn, const struct mercury_frame *f,
		    void *data, bool tensor_done)
{
	struct ps_peer *pr = ctx;
	struct srv *v = pr->role;
	struct ps_conn *c = &pr->conns[conn];
	int t = f->tensor_id;
	size_t k = ps_idx(&v->L, t, v->s);
	uint32_t ch = f->offset / v->L.chunk + v->L.base[k];
	float *sum = (float *)((uint8_t *)v->sum + v->poff[t] + f->offset);
	float *p = (float *)((uint8_t *)v->param + v->poff[t] + f->offset);
	const float *g = data;
	uint32_t i, n = f->chunk_len / 4;

	(void)tensor_done;
	for (i = 0; i < n; i++)
		sum[i] += g[i];
	v->seen[(size_t)ch * v->W + c->peer] = 1;
	v->pushed[c->peer]++;
	if (++v->count[ch] < (uint32_t)v->W)
		return 0;
	for (i = 0; i < n; i++) {
		p[i] -= sum[i];
		sum[i] = 0;
	}
	v->count[ch] = 0;
	memset(&v->seen[(size_t)ch * v->W], 0, v->W);
	v->aggregated++;
	return send_pull(v, t, f->offset, f->chunk_len);
}

/*
 * A connection that has not said hello has a receiver of its own, which
 * reads that one frame. Its state is allocated apart: the pending
 * connections move in their array, the callbacks' context must not.
 */
struct ps_hello_rx {
	struct mercury_rx *rx;
	uint8_t buf[PS_HELLO_LEN];
	bool done;
};

static int hello_dest(void *ctx, size_t conn, const struct mercury_frame *f,
		      void **dst)
{
	struct ps_hello_rx *h = ctx;

	(void)conn;
	if (f->tensor_id != PS_HELLO_ID || f->chunk_len != PS_HELLO_LEN)
		return -EPROTO;
	*dst = h->buf;
	return 0;
}

static int hello_done(void *ctx, size_t conn, const struct mercury_frame *f,
		      void *data, bool tensor_done)
{
	struct ps_hello_rx *h = ctx;

	(void)conn;
	(void)f;
	(void)data;
	(void)tensor_done;
	h->done = true;
	return 1;			/* stop: the next frame is data */
}

static void hello_rx_free(struct ps_conn *c)
{
	if (!c->hello_rx)
		return;
	mercury_rx_free(c->hello_rx->rx);
	free(c->hello_rx);
	c->hello_rx = NULL;
}

static int hello_rx(struct ps_conn *c)
{
	struct ps_hello_rx *h = calloc(1, sizeof(*h));
	MERCURY_OPTS(mercury_rx_opts, o, .dest = hello_dest,
		     .frame_done = hello_done, .ctx = h, .max_pending = 1);

	if (!h)
		return -1;
	c->hello_rx = h;
	if (mercury_rx_new(&o, &h->rx) < 0 || mercury_rx_add(h->rx, c->fd) < 0) {
		hello_rx_free(c);
		return -1;
	}
	return 0;
}

/* Read what there is of c's hello; c->peer = -2 once it is complete. */
static int hello_read(struct ps_conn *c)
{
	int ret = mercury_rx_read(c->hello_rx->rx, 0);

	if (c->hello_rx->done) {
		memcpy(c->hello, c->hello_rx->buf, PS_HELLO_LEN);
		c->peer = -2;		/* hello complete, not yet placed */
	}
	return ret == -EAGAIN ? 0 : ret;
}

static int listen_on(struct srv *v)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *ai;
	char entry[256], host[200], port[16];
	const char *p = v->cfg->server_list;
	int i, one = 1, fd, ret;

	for (i = 0; i < v->s; i++)
		p = strchr(p, ',') + 1;
	snprintf(entry, sizeof(entry), "%.*s", (int)strcspn(p, ","), p);
	if (ps_parse_hostport(entry, host, sizeof(host), port, sizeof(port))) {
		ps_error(v->cfg, "--servers entry '%s' is not host:port", entry);
		return -EINVAL;
	}
	ret = getaddrinfo(v->cfg->listen ? v->cfg->listen : host, port, &hints, &ai);
	if (ret) {
		ps_error(v->cfg, "cannot resolve %s: %s",
			 v->cfg->listen ? v->cfg->listen : host, gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (v->cfg->sndbuf && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v->cfg->sndbuf,
					  sizeof(v->cfg->sndbuf))) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024) ||
	    ps_set_nonblock(fd)) {
		ps_error(v->cfg, "cannot listen on %s:%s: %s",
			 v->cfg->listen ? v->cfg->listen : host, port, strerror(errno));
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	freeaddrinfo(ai);
	v->lfd = fd;
	return 0;
}

static void addr_str(const struct sockaddr_in *a, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
}

static const char *rx_err(int err)
{
	return ps_err_malformed(err) ? "sent a malformed frame" : NULL;
}

/* Why accept_all() is still waiting: the workers with connections
 * missing, the connections that never finished their hello, and the last
 * one dropped.
 */
static void missing_workers(const struct srv *v, const struct ps_conn *pend,
			    int npend, const char *dropped, char *buf,
			    size_t len)
{
	size_t off = 0;
	int w, i, have;

	buf[0] = '\0';
	for (w = 0; w < v->W && off < len; w++) {
		for (have = 0, i = 0; i < v->C; i++)
			have += v->conns[w * v->C + i].fd >= 0;
		if (have < v->C)
			off += snprintf(buf + off, len - off, "%sworker %d has %d of %d",
					off ? ", " : "", w, have, v->C);
	}
	for (i = 0; i < npend && off < len; i++)
		off += snprintf(buf + off, len - off, "; %s connected but sent no hello",
				pend[i].addr);
	if (*dropped && off < len)
		snprintf(buf + off, len - off, "; %s", dropped);
}

/* Accept until every worker's every connection has said hello. */
static int accept_all(struct srv *v)
{
	int want = v->W * v->C, placed = 0, npend = 0, i;
	struct ps_conn pend[2 * PS_MAX_CHANNELS * 4];
	int64_t deadline = ps_now_ns() + (int64_t)v->cfg->timeout_ms * 1000000;
	char dropped[320] = "";

	memset(pend, 0, sizeof(pend));
	while (placed < want) {
		struct pollfd pfd[1 + sizeof(pend) / sizeof(pend[0])];
		int64_t now = ps_now_ns();
		int n = 0, ret;

		if (now >= deadline) {
			char why[768];

			missing_workers(v, pend, npend, dropped, why, sizeof(why));
			ps_error(v->cfg, "server %d: only %d of %d worker connections arrived in %d s: %s",
				 v->s, placed, want, v->cfg->timeout_ms / 1000, why);
			goto fail;
		}
		pfd[n++] = (struct pollfd){ .fd = v->lfd, .events = POLLIN };
		for (i = 0; i < npend; i++)
			pfd[n++] = (struct pollfd){ .fd = pend[i].fd, .events = POLLIN };
		ret = poll(pfd, n, (int)((deadline - now) / 1000000) + 1);
		if (ret < 0 && errno != EINTR)
			goto fail;
		if (pfd[0].revents & POLLIN) {
			struct sockaddr_in a;
			socklen_t alen = sizeof(a);
			int fd = accept4(v->lfd, (struct sockaddr *)&a, &alen,
					 SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd >= 0 && npend == (int)(sizeof(pend) / sizeof(pend[0]))) {
				close(fd);	/* a flood of strangers */
			} else if (fd >= 0) {
				pend[npend] = (struct ps_conn){ .fd = fd, .peer = -1 };
				addr_str(&a, pend[npend].addr, sizeof(pend[npend].addr));
				if (hello_rx(&pend[npend]))
					close(fd);
				else
					npend++;
			}
		}
		for (i = 0; i < npend; i++) {
			struct ps_conn *c = &pend[i], *dst;
			struct ps_hello h;

			ret = hello_read(c);
			if (ret < 0 && c->peer != -2) {
				/* a stranger or a worker that gave up: drop it,
				 * and remember why, for the timeout's message
				 */
				const char *why = rx_err(ret);

				snprintf(dropped, sizeof(dropped), "%s %s before its hello",
					 c->addr, why ? why : "closed the connection");
				hello_rx_free(c);
				ps_conn_close(c);
				pend[i--] = pend[--npend];
				continue;
			}
			if (c->peer != -2)
				continue;
			ps_hello_decode(c->hello, &h);
			if (h.hash != v->L.hash || h.workers != (uint32_t)v->W ||
			    h.servers != (uint32_t)v->cfg->servers ||
			    h.server_id != (uint32_t)v->s || h.nconns != (uint32_t)v->C) {
				ps_error(v->cfg, "worker %u (%s) runs a different configuration (profile, scheme, sizes, workers, servers or iterations differ)",
					 h.worker_id, c->addr);
				goto fail_pend;
			}
			if (h.worker_id >= (uint32_t)v->W || h.conn_idx >= (uint32_t)v->C ||
			    v->conns[h.worker_id * v->C + h.conn_idx].fd >= 0) {
				ps_error(v->cfg, "worker %u (%s): bad or duplicate connection %u",
					 h.worker_id, c->addr, h.conn_idx);
				goto fail_pend;
			}
			dst = &v->conns[h.worker_id * v->C + h.conn_idx];
			/* the hello read stopped at its frame's end: the
			 * worker's receiver starts at the next one */
			hello_rx_free(c);
			*dst = *c;
			dst->peer = h.worker_id;
			dst->idx = h.conn_idx;
			placed++;
			pend[i--] = pend[--npend];
		}
	}
	for (i = 0; i < npend; i++) {
		hello_rx_free(&pend[i]);
		ps_conn_close(&pend[i]);
	}
	return 0;
fail_pend:
fail:
	for (i = 0; i < npend; i++) {
		hello_rx_free(&pend[i]);
		ps_conn_close(&pend[i]);
	}
	return -1;
}

static int setup_conns(struct srv *v)
{
	int w, i;

	for (i = 0; i < v->W * v->C; i++) {
		struct ps_conn *c = &v->conns[i];

		c->stage = malloc(v->L.chunk);
		if (!c->stage || ps_sock_opts(c->fd, v->cfg)) {
			ps_error(v->cfg, "connection setup: %s", strerror(errno));
			return -1;
		}
		if (v->cfg->scheme == PS_PRIO && ps_prio_band(c->fd, c->idx)) {
			ps_error(v->cfg, "SO_PRIORITY %d: %s (priorities above 6 need CAP_NET_ADMIN)",
				 c->idx, strerror(errno));
			return -1;
		}
	}
	if (v->cfg->scheme == PS_MERCURY) {
		MERCURY_OPTS(mercury_tag_opts, to, .source = v->cfg->tag_source);

		if (mercury_tagger_new(&to, &v->tagger) < 0 ||
		    mercury_tagger_probe(v->tagger, v->L.levels) < 0) {
			ps_error(v->cfg, "tagger: %s", mercury_last_error());
			return -1;
		}
	}
	for (w = 0; w < v->W; w++) {
		struct ps_peer *pr = &v->peers[w];

		*pr = (struct ps_peer){ .conns = &v->conns[w * v->C], .n = v->C,
					.id = w, .role = v };
		if (ps_peer_open(pr, v->cfg, v->L.levels, v->L.chunk, srv_dest,
				 srv_done) < 0) {
			ps_error(v->cfg, "worker %d: %s", w, mercury_last_error());
			return -1;
		}
	}
	return 0;
}

static bool queues_empty(const struct srv *v)
{
	int w;

	for (w = 0; w < v->W; w++)
		if (mercury_chanset_pending(v->peers[w].cs))
			return false;
	return true;
}

/* Worker w pushed everything and was sent everything: it may hang up. */
static bool worker_done(const struct srv *v, int w)
{
	if (v->pushed[w] < (uint64_t)v->cfg->iterations * v->L.srv_chunks[v->s])
		return false;
	return !mercury_chanset_pending(v->peers[w].cs);
}

static int peer_failed(struct srv *v, struct ps_conn *c, int err)
{
	const char *why = rx_err(err);

	if (why)
		ps_error(v->cfg, "peer %s (worker %d) %s during iteration %d: %s",
			 c->addr, c->peer, why, iteration_of(v, c->peer),
			 v->why[0] ? v->why : mercury_last_error());
	else if (err == -ENOTCONN || err == -ECONNRESET || err == -EPIPE)
		ps_error(v->cfg, "peer %s (worker %d) closed the connection during iteration %d",
			 c->addr, c->peer, iteration_of(v, c->peer));
	else
		ps_error(v->cfg, "peer %s (worker %d): %s during iteration %d",
			 c->addr, c->peer, strerror(-err), iteration_of(v, c->peer));
	return 1;
}

static int serve(struct srv *v)
{
	int n = v->W * v->C, i, ret;
	struct pollfd *pfd = calloc(n, sizeof(*pfd));
	int64_t last = ps_now_ns(), tmo = (int64_t)v->cfg->timeout_ms * 1000000;
	bool finished = false;
	int open = n;

	if (!pfd)
		return 1;
	for (;;) {
		int64_t now = ps_now_ns(), wake = 0, wait_ns;

		for (i = 0; i < v->W; i++) {
			struct ps_conn *bad = NULL;
			int64_t w;

			ret = ps_peer_progress(&v->peers[i], now, &bad);
			if (ret < 0) {
				free(pfd);
				return peer_failed(v, bad, ret);
			}
			if (ret > 0)
				last = now;
			w = (int64_t)mercury_chanset_wake(v->peers[i].cs);
			if (w && (!wake || w < wake))
				wake = w;
		}
		if (!finished && v->aggregated == v->target && queues_empty(v))
			finished = true;	/* all sent: wait for the workers to hang up */
		if (finished && !open)
			break;
		for (i = 0; i < n; i++) {
			struct ps_conn *c = &v->conns[i];

			pfd[i].fd = c->eof ? -1 : c->fd;
			pfd[i].events = POLLIN |
				mercury_chanset_events(v->peers[i / v->C].cs, i % v->C);
			pfd[i].revents = 0;
		}
		now = ps_now_ns();
		if (now - last > tmo) {
			if (finished) {
				fprintf(stderr, PS_PROG ": server %d: all sent, %d connections still open after %d s; closing\n",
					v->s, open, v->cfg->timeout_ms / 1000);
				break;
			}
			/* name the worker that is furthest behind */
			int slow = 0;

			for (i = 1; i < v->W; i++)
				if (v->pushed[i] < v->pushed[slow])
					slow = i;
			ps_error(v->cfg, "no progress for %d s during iteration %d: waiting for worker %d (%s)",
				 v->cfg->timeout_ms / 1000, iteration_of(v, slow), slow,
				 v->conns[slow * v->C].addr);
			free(pfd);
			return 1;
		}
		wait_ns = last + tmo - now + 1000000;
		/* a blocked sender has no event to wait for: its own time */
		if (wake && wake - now < wait_ns)
			wait_ns = wake - now;
		ret = ps_poll_ns(pfd, n, wait_ns);
		if (ret < 0) {
			ps_error(v->cfg, "poll: %s", strerror(-ret));
			free(pfd);
			return 1;
		}
		for (i = 0; i < n; i++) {
			struct ps_conn *c = &v->conns[i];

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ret = ps_peer_read(&v->peers[i / v->C], i % v->C, ps_now_ns());
			if (ret == -ENOTCONN && worker_done(v, c->peer)) {
				open--;
				last = ps_now_ns();
				continue;
			}
			if (ret < 0 && ret != -EAGAIN) {
				free(pfd);
				return peer_failed(v, c, ret);
			}
			if (ret > 0)
				last = ps_now_ns();
		}
	}
	free(pfd);
	return 0;
}

static void report(const struct srv *v)
{
	uint64_t in = 0, out = 0;
	int i;

	for (i = 0; i < v->W; i++)
		ps_peer_bytes(&v->peers[i], &out, &in);
	if (v->cfg->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "role", json_object_new_string("server"));
		json_object_object_add(o, "server_id", json_object_new_int(v->s));
		json_object_object_add(o, "scheme", json_object_new_string(ps_scheme_name(v->cfg->scheme)));
		json_object_object_add(o, "chunks_aggregated", json_object_new_int64(v->aggregated));
		if (v->cfg->scheme == PS_MERCURY)
			ps_sender_report(o, v->peers, v->W);
		json_object_object_add(o, "bytes_in", json_object_new_int64(in));
		json_object_object_add(o, "bytes_out", json_object_new_int64(out));
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	} else {
		printf("server %d: %s, %llu chunks aggregated, %llu bytes in, %llu bytes out\n",
		       v->s, ps_scheme_name(v->cfg->scheme),
		       (unsigned long long)v->aggregated, (unsigned long long)in,
		       (unsigned long long)out);
	}
	fflush(stdout);
}

int ps_server_main(struct ps_cfg *cfg)
{
	struct srv v = { .cfg = cfg, .s = cfg->server_id, .W = cfg->workers,
			 .C = ps_nconns(cfg), .lfd = -1 };
	char err[512];
	uint64_t bytes = 0;
	int t, i, rc = 1;

	if (ps_layout_init(&v.L, cfg, err, sizeof(err))) {
		ps_error(cfg, "%s", err);
		return 1;
	}
	v.poff = calloc(v.L.nt, sizeof(*v.poff));
	for (t = 0; t < v.L.nt && v.poff; t++) {
		size_t k = ps_idx(&v.L, t, v.s);

		v.poff[t] = bytes;
		bytes += v.L.hi[k] - v.L.lo[k];
	}
	v.param = calloc(1, bytes + 4);
	v.sum = calloc(1, bytes + 4);
	v.count = calloc(v.L.srv_chunks[v.s] + 1, sizeof(*v.count));
	v.seen = calloc(((size_t)v.L.srv_chunks[v.s] + 1) * v.W, 1);
	v.pushed = calloc(v.W, sizeof(*v.pushed));
	v.conns = calloc(v.W * v.C, sizeof(*v.conns));
	v.peers = calloc(v.W, sizeof(*v.peers));
	if (!v.poff || !v.param || !v.sum || !v.count || !v.seen || !v.pushed ||
	    !v.conns || !v.peers) {
		ps_error(cfg, "out of memory");
		goto out;
	}
	for (i = 0; i < v.W * v.C; i++)
		v.conns[i].fd = -1;
	v.target = (uint64_t)cfg->iterations * v.L.srv_chunks[v.s];
	if (listen_on(&v) || accept_all(&v) || setup_conns(&v))
		goto out;
	rc = serve(&v);
	if (!rc)
		report(&v);
out:
	if (v.conns)
		for (i = 0; i < v.W * v.C; i++)
			if (v.conns[i].fd >= 0)
				ps_conn_close(&v.conns[i]);
	for (i = 0; v.peers && i < v.W; i++)
		ps_peer_close(&v.peers[i]);
	mercury_tagger_free(v.tagger);
	if (v.lfd >= 0)
		close(v.lfd);
	free(v.poff); free(v.param); free(v.sum); free(v.count); free(v.seen);
	free(v.pushed); free(v.conns); free(v.peers);
	ps_layout_free(&v.L);
	return rc;
}
