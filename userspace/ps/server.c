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
	struct ps_conn **cptr;
	struct mercury_chanset **cs;	/* mercury: per worker */
	struct ps_msend *ms;		/* mercury: per worker */
	struct mercury_tagger *tagger;
	int lfd;
	char why[160];			/* what was wrong with a frame */
};

static int iteration_of(const struct srv *v, int w)
{
	uint32_t n = v->L.srv_chunks[v->s];

	return n ? (int)(v->pushed[w] / n) : 0;
}

static int srv_dest(void *ctx, struct ps_conn *c)
{
	struct srv *v = ctx;
	const struct mercury_frame *f = &c->fr;
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
	c->dst = c->stage;
	return 0;
}

static int send_pull(struct srv *v, int t, uint64_t off, uint32_t len)
{
	const struct ps_tensor *T = &v->L.t[t];
	size_t k = ps_idx(&v->L, t, v->s);
	int w;

	for (w = 0; w < v->W; w++) {
		struct ps_out *o = ps_out_new(t, v->cfg->scheme == PS_MERCURY ? T->level : T->rank,
					      v->L.hi[k] - v->L.lo[k],
					      off, (uint8_t *)v->param + v->poff[t] + off,
					      len);
		struct ps_conn *c;

		if (!o)
			return -ENOMEM;
		switch (v->cfg->scheme) {
		case PS_MERCURY:
			o->key = (uint64_t)T->rank << 40 | (v->seq++ & ((1ull << 40) - 1));
			if (ps_heap_push(&v->ms[w].heap, o)) {
				free(o);
				return -ENOMEM;
			}
			continue;
		case PS_PRIO:
			c = &v->conns[w * v->C + T->band];
			break;
		default:
			c = &v->conns[w * v->C];
		}
		ps_conn_queue(c, o);
	}
	return 0;
}

static int srv_done(void *ctx, struct ps_conn *c)
{
	struct srv *v = ctx;
	const struct mercury_frame *f = &c->fr;
	int t = f->tensor_id;
	size_t k = ps_idx(&v->L, t, v->s);
	uint32_t ch = f->offset / v->L.chunk + v->L.base[k];
	float *sum = (float *)((uint8_t *)v->sum + v->poff[t] + f->offset);
	float *p = (float *)((uint8_t *)v->param + v->poff[t] + f->offset);
	const float *g = (const float *)c->stage;
	uint32_t i, n = f->chunk_len / 4;

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

/* Hello frames: payload into the conn's hello buffer. */
static int hello_dest(void *ctx, struct ps_conn *c)
{
	(void)ctx;
	if (c->fr.tensor_id != PS_HELLO_ID || c->fr.chunk_len != PS_HELLO_LEN)
		return -EPROTO;
	c->dst = c->hello;
	return 0;
}

static int hello_done(void *ctx, struct ps_conn *c)
{
	(void)ctx;
	c->peer = -2;			/* hello complete, not yet placed */
	return 1;			/* stop: the next frame is data */
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
				npend++;
			}
		}
		for (i = 0; i < npend; i++) {
			struct ps_conn *c = &pend[i], *dst;
			struct ps_hello h;

			ret = ps_conn_read(c, hello_dest, hello_done, v);
			if (ret < 0 && c->peer != -2) {
				/* a stranger or a worker that gave up: drop it,
				 * and remember why, for the timeout's message
				 */
				const char *why = rx_err(ret);

				snprintf(dropped, sizeof(dropped), "%s %s before its hello",
					 c->addr, why ? why : "closed the connection");
				close(c->fd);
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
			*dst = *c;
			dst->peer = h.worker_id;
			dst->idx = h.conn_idx;
			placed++;
			pend[i--] = pend[--npend];
		}
	}
	for (i = 0; i < npend; i++)
		close(pend[i].fd);
	return 0;
fail_pend:
fail:
	for (i = 0; i < npend; i++)
		close(pend[i].fd);
	return -1;
}

static int setup_conns(struct srv *v)
{
	int w, i;

	for (i = 0; i < v->W * v->C; i++) {
		struct ps_conn *c = &v->conns[i];

		v->cptr[i] = c;
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
	if (v->cfg->scheme != PS_MERCURY)
		return 0;
	MERCURY_OPTS(mercury_tag_opts, to, .source = v->cfg->tag_source);
	if (mercury_tagger_new(&to, &v->tagger) < 0 ||
	    mercury_tagger_probe(v->tagger, v->L.levels) < 0) {
		ps_error(v->cfg, "tagger: %s", mercury_last_error());
		return -1;
	}
	for (w = 0; w < v->W; w++) {
		int fds[PS_MAX_CHANNELS];
		unsigned int classes[PS_MAX_CHANNELS];
		MERCURY_OPTS(mercury_chanset_opts, co, .tag_opts = &to,
			     .chunk_size = v->L.chunk, .no_tag = true,
			     .classes = classes);

		ps_mercury_classes(classes, v->C, v->L.levels);
		for (i = 0; i < v->C; i++) {
			fds[i] = v->conns[w * v->C + i].fd;
			v->conns[w * v->C + i].cs_idx = i;
			v->conns[w * v->C + i].tagger = v->tagger;
		}
		if (mercury_chanset_new(fds, v->C, &co, &v->cs[w]) < 0) {
			ps_error(v->cfg, "channel set: %s", mercury_last_error());
			return -1;
		}
		for (i = 0; i < v->C; i++)
			v->conns[w * v->C + i].cs = v->cs[w];
		ps_msend_init(&v->ms[w], v->cs[w], &v->cptr[w * v->C], v->cfg->inflight);
	}
	return 0;
}

static bool queues_empty(const struct srv *v)
{
	int i;

	for (i = 0; i < v->W * v->C; i++)
		if (v->conns[i].head)
			return false;
	if (v->ms)
		for (i = 0; i < v->W; i++)
			if (v->ms[i].heap.n)
				return false;
	return true;
}

/* Worker w pushed everything and was sent everything: it may hang up. */
static bool worker_done(const struct srv *v, int w)
{
	int i;

	if (v->pushed[w] < (uint64_t)v->cfg->iterations * v->L.srv_chunks[v->s])
		return false;
	for (i = 0; i < v->C; i++)
		if (v->conns[w * v->C + i].head)
			return false;
	return !v->ms || !v->ms[w].heap.n;
}

static int peer_failed(struct srv *v, struct ps_conn *c, int err)
{
	const char *why = rx_err(err);

	if (why)
		ps_error(v->cfg, "peer %s (worker %d) %s during iteration %d%s%s",
			 c->addr, c->peer, why, iteration_of(v, c->peer),
			 v->why[0] ? ": " : "", v->why);
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

		if (v->cfg->scheme == PS_MERCURY) {
			for (i = 0; i < v->W; i++) {
				struct ps_msend *m = &v->ms[i];
				struct ps_conn *bad = NULL;

				if (ps_msend_due(m, now)) {
					ret = ps_dispatch_mercury(m, now, &bad);
					if (ret < 0) {
						free(pfd);
						return peer_failed(v, bad ? bad : &v->conns[i * v->C], ret);
					}
				}
				if (m->wake_ns && (!wake || m->wake_ns < wake))
					wake = m->wake_ns;
			}
		}
		if (!finished && v->aggregated == v->target && queues_empty(v))
			finished = true;	/* all sent: wait for the workers to hang up */
		if (finished && !open)
			break;
		for (i = 0; i < n; i++) {
			struct ps_conn *c = &v->conns[i];

			pfd[i].fd = c->eof ? -1 : c->fd;
			pfd[i].events = POLLIN | (c->head ? POLLOUT : 0);
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

			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				ret = ps_conn_read(c, srv_dest, srv_done, v);
				if (ret == -ENOTCONN && worker_done(v, c->peer)) {
					open--;
					last = ps_now_ns();
					continue;
				}
				if (ret < 0) {
					free(pfd);
					return peer_failed(v, c, ret);
				}
				if (ret)
					last = ps_now_ns();
			}
			if (c->head && !c->eof) {
				ret = ps_conn_flush(c);
				if (ret < 0) {
					free(pfd);
					return peer_failed(v, c, ret);
				}
				if (ret)
					last = ps_now_ns();
			}
		}
	}
	free(pfd);
	return 0;
}

static void report(const struct srv *v)
{
	uint64_t in = 0, out = 0;
	int i;

	for (i = 0; i < v->W * v->C; i++) {
		in += v->conns[i].bytes_in;
		out += v->conns[i].bytes_out;
	}
	if (v->cfg->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "role", json_object_new_string("server"));
		json_object_object_add(o, "server_id", json_object_new_int(v->s));
		json_object_object_add(o, "scheme", json_object_new_string(ps_scheme_name(v->cfg->scheme)));
		json_object_object_add(o, "chunks_aggregated", json_object_new_int64(v->aggregated));
		if (v->cfg->scheme == PS_MERCURY)
			ps_msend_report(o, v->ms, v->W);
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
	v.cptr = calloc(v.W * v.C, sizeof(*v.cptr));
	v.cs = calloc(v.W, sizeof(*v.cs));
	if (cfg->scheme == PS_MERCURY)
		v.ms = calloc(v.W, sizeof(*v.ms));
	if (!v.poff || !v.param || !v.sum || !v.count || !v.seen || !v.pushed ||
	    !v.conns || !v.cptr || !v.cs || (cfg->scheme == PS_MERCURY && !v.ms)) {
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
	for (i = 0; v.cs && i < v.W; i++)
		mercury_chanset_free(v.cs[i]);
	for (i = 0; v.ms && i < v.W; i++)
		ps_heap_free(&v.ms[i].heap);
	mercury_tagger_free(v.tagger);
	if (v.lfd >= 0)
		close(v.lfd);
	free(v.poff); free(v.param); free(v.sum); free(v.count); free(v.seen);
	free(v.pushed); free(v.conns); free(v.cptr); free(v.cs); free(v.ms);
	ps_layout_free(&v.L);
	return rc;
}
