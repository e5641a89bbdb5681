// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The worker: replays the profile's compute with precise sleeps and moves
 * real gradients. Forward runs call by call; a call starts only when the
 * parameters it gates have been pulled back (iteration 0 starts with them
 * in place). Backward releases each gradient at its ready time, scaled;
 * the gradient is pushed at once, shard s to server s, chunk by chunk.
 * The iteration time is the distance between consecutive backward ends,
 * as in mercury-sim. Compute runs on a virtual GPU clock: an event noticed
 * late (the CPU was busy) still ends when it was due, so the replay does
 * not drift; only waits for the network delay it.
 *
 * Gradients are small integers (ps_grad_value), exact in fp32 whatever the
 * order of the sums, so after N iterations every parameter must equal
 * ps_expected_param() exactly; the worker checks every element.
 */
#include <errno.h>
#include <math.h>
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

enum phase { FWD, BWD, DRAIN, DONE };

struct wrk {
	struct ps_cfg *cfg;
	struct ps_layout L;
	int w, S, C, N;
	double X;
	float *grad, *param;
	/* per tensor */
	uint32_t *tchunks;		/* chunks over all servers */
	uint32_t *pulled_cnt;		/* this iteration */
	int *pulled_iter, *pushed_iter;
	int64_t *home_ns;		/* when the last pull came in */
	int *rel_order;			/* tensors by ready time */
	int *gate_first, *gate_list;	/* tensors gated by call c */
	/* connections [s * C + i] */
	struct ps_conn *conns;
	struct ps_peer *peers;		/* per server: sender and receiver */
	struct ps_heap heap;		/* bytesched: partitions awaiting credit */
	struct mercury_tagger *tagger;	/* mercury: the capability probe */
	uint64_t inflight, seq;		/* bytesched: bytes in flight */
	uint64_t *inflight_tag;		/* bytesched: per tensor */
	int64_t credit_since;		/* bytesched: window full since (0: not) */
	int64_t credit_ns;		/* bytesched: time partitions waited for
					 * credit with the window full */
	uint64_t partitions, bypassed;	/* bytesched: dispatched; of them
					 * past a full window (deadlock rule) */
	/* timeline */
	enum phase ph;
	int iter, call, next_rel;
	bool running;
	int64_t t0, prev_end, call_end, bwd_start, bwd_end;
	int64_t *bwd_ends;
	int64_t stall_ns;		/* forward waiting for pulls */
	int64_t last_net;
};

/* Milliseconds to the microsecond, printed as such. */
static json_object *jms(double v)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.3f", v);
	return json_object_new_double_s(v, buf);
}

static int64_t scaled_ns(const struct wrk *v, double ms)
{
	return (int64_t)llround(ms * v->X * 1e6);
}

/* A pull's header is in: check it against the layout, place it. */
static int wrk_dest(void *ctx, size_t conn, const struct mercury_frame *f,
		    void **dst)
{
	struct ps_peer *p = ctx;
	struct wrk *v = p->role;
	int s = p->id, t = f->tensor_id;
	size_t k;
	uint32_t ch;

	if (f->tensor_id >= (uint32_t)v->L.nt)
		return -EPROTO;
	k = ps_idx(&v->L, t, s);
	if (f->total_len != v->L.hi[k] - v->L.lo[k] || f->offset % v->L.chunk)
		return -EPROTO;
	ch = f->offset / v->L.chunk;
	if (ch >= v->L.nchunks[k] || f->chunk_len != ps_chunk_len(&v->L, t, s, ch))
		return -EPROTO;
	if (v->pushed_iter[t] <= v->pulled_iter[t])
		return -EPROTO;		/* a pull of something not pushed */
	(void)conn;
	*dst = (uint8_t *)v->param + v->L.t[t].off + v->L.lo[k] + f->offset;
	return 0;
}

static int wrk_done(void *ctx, size_t conn, const struct mercury_frame *f,
		    void *data, bool tensor_done)
{
	struct ps_peer *p = ctx;
	struct wrk *v = p->role;
	int t = f->tensor_id;

	(void)conn;
	(void)data;
	(void)tensor_done;
	if (v->cfg->scheme == PS_BYTESCHED) {
		v->inflight -= f->chunk_len;	/* the partition is home */
		v->inflight_tag[t] -= f->chunk_len;
	}
	if (++v->pulled_cnt[t] == v->tchunks[t]) {
		v->pulled_cnt[t] = 0;
		v->pulled_iter[t]++;
		v->home_ns[t] = ps_now_ns();
	}
	return 0;
}

/* Backward produced tensor t: queue every chunk of every shard. */
static int release(struct wrk *v, int t)
{
	const struct ps_tensor *T = &v->L.t[t];
	uint32_t c, maxc = 0;
	int s;

	v->pushed_iter[t]++;
	for (s = 0; s < v->S; s++)
		if (v->L.nchunks[ps_idx(&v->L, t, s)] > maxc)
			maxc = v->L.nchunks[ps_idx(&v->L, t, s)];
	/* partition k of a tensor is the k-th piece of every shard */
	for (c = 0; c < maxc; c++) {
		for (s = 0; s < v->S; s++) {
			size_t k = ps_idx(&v->L, t, s);
			struct ps_part o = {
				.key = (uint64_t)T->rank << 40 |
				       (v->seq++ & ((1ull << 40) - 1)),
				.tensor = t, .server = s, .rank = T->rank,
				.total = v->L.hi[k] - v->L.lo[k],
				.offset = (uint64_t)c * v->L.chunk,
				.payload = (uint8_t *)v->grad + T->off + v->L.lo[k] +
					   (uint64_t)c * v->L.chunk,
				.len = ps_chunk_len(&v->L, t, s, c),
			};
			int ret, conn = 0;

			if (!o.len)
				continue;
			switch (v->cfg->scheme) {
			case PS_MERCURY:	/* the set picks, by rank */
				conn = -1;
				break;
			case PS_BYTESCHED:	/* waits for credit */
				if (ps_heap_push(&v->heap, &o))
					return -ENOMEM;
				continue;
			case PS_PRIO:
				conn = T->band;
				break;
			default:
				break;
			}
			ret = ps_send(&v->peers[s], t, T->tag, o.total,
				      o.offset, o.payload, o.len, o.key, conn);
			if (ret < 0)
				return ret;
		}
	}
	return 0;
}

static bool gate_open(const struct wrk *v, int call, int64_t *ready)
{
	int i;

	*ready = 0;
	if (v->iter == 0)
		return true;
	for (i = v->gate_first[call]; i < v->gate_first[call + 1]; i++) {
		int t = v->gate_list[i];

		if (v->pulled_iter[t] < v->iter)
			return false;
		if (v->home_ns[t] > *ready)
			*ready = v->home_ns[t];
	}
	return true;
}

/* Run the timeline up to now; returns the next compute deadline (or 0). */
static int advance(struct wrk *v, int64_t now, int64_t *deadline)
{
	const struct mt_profile *P = &v->L.prof;
	int ret;

	*deadline = 0;
	for (;;) {
		if (v->ph == FWD) {
			if (v->running) {
				if (now < v->call_end) {
					*deadline = v->call_end;
					return 0;
				}
				v->prev_end = v->call_end;
				v->running = false;
				v->call++;
				v->last_net = now;	/* compute is progress too */
				if (v->call == P->ncalls) {
					v->ph = BWD;
					v->bwd_start = v->prev_end;
					v->bwd_end = v->bwd_start + scaled_ns(v, P->bwd_ms);
					v->next_rel = 0;
					continue;
				}
			}
			if (v->call < 0) {	/* the prelude before call 0 */
				v->running = true;
				v->call_end = v->prev_end + scaled_ns(v, P->prelude_ms);
				v->call = -1;
				/* call++ after the prelude makes it call 0 */
				continue;
			}
			{
				int64_t ready, start;

				if (!gate_open(v, v->call, &ready))
					return 0;
				start = ready > v->prev_end ? ready : v->prev_end;
				v->stall_ns += start - v->prev_end;
				v->running = true;
				v->call_end = start + scaled_ns(v, P->call_ms[v->call]);
			}
			continue;
		}
		if (v->ph == BWD) {
			while (v->next_rel < v->L.nt) {
				int t = v->rel_order[v->next_rel];
				int64_t due = v->bwd_start + scaled_ns(v, v->L.t[t].ready_ms);

				if (due > now) {
					*deadline = due;
					break;
				}
				ret = release(v, t);
				if (ret)
					return ret;
				v->next_rel++;
				v->last_net = now;
			}
			if (v->next_rel < v->L.nt)
				return 0;
			if (now < v->bwd_end) {
				*deadline = v->bwd_end;
				return 0;
			}
			v->bwd_ends[v->iter] = v->bwd_end;
			v->prev_end = v->bwd_end;
			if (++v->iter == v->N) {
				v->ph = DRAIN;
				continue;
			}
			v->ph = FWD;
			v->call = -1;
			v->running = false;
			continue;
		}
		if (v->ph == DRAIN) {
			int t;

			for (t = 0; t < v->L.nt; t++)
				if (v->pulled_iter[t] < v->N)
					return 0;
			v->ph = DONE;
		}
		return 0;
	}
}

static int connect_one(struct wrk *v, const char *host, const char *port,
		       int64_t deadline)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	int ret, fd;

	ret = getaddrinfo(host, port, &hints, &ai);
	if (ret) {
		ps_error(v->cfg, "cannot resolve %s: %s", host, gai_strerror(ret));
		return -1;
	}
	for (;;) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		/* small buffers must be set before the handshake */
		if (v->cfg->sndbuf && ps_sock_opts(fd, v->cfg) < 0) {
			close(fd);
			fd = -1;
			break;
		}
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		ret = errno;
		close(fd);
		fd = -1;
		/* the server may not be up yet: retry until the timeout */
		if ((ret != ECONNREFUSED && ret != ENETUNREACH && ret != EINTR) ||
		    ps_now_ns() > deadline) {
			errno = ret;
			break;
		}
		usleep(20000);
	}
	freeaddrinfo(ai);
	if (fd < 0)
		ps_error(v->cfg, "cannot connect to %s:%s: %s", host, port, strerror(errno));
	return fd;
}

static int connect_all(struct wrk *v)
{
	int64_t deadline = ps_now_ns() + (int64_t)v->cfg->timeout_ms * 1000000;
	const char *p = v->cfg->server_list;
	int s, i;

	MERCURY_OPTS(mercury_tag_opts, to, .source = v->cfg->tag_source);
	if (v->cfg->scheme == PS_MERCURY &&
	    (mercury_tagger_new(&to, &v->tagger) < 0 ||
	     mercury_tagger_probe(v->tagger, v->L.levels) < 0)) {
		ps_error(v->cfg, "tagger: %s", mercury_last_error());
		return -1;
	}
	for (s = 0; s < v->S; s++) {
		char entry[256], host[200], port[16];
		struct ps_peer *pr = &v->peers[s];

		snprintf(entry, sizeof(entry), "%.*s", (int)strcspn(p, ","), p);
		p += strcspn(p, ",");
		if (*p)
			p++;
		if (ps_parse_hostport(entry, host, sizeof(host), port, sizeof(port))) {
			ps_error(v->cfg, "--servers entry '%s' is not host:port", entry);
			return -2;
		}
		for (i = 0; i < v->C; i++) {
			struct ps_conn *c = &v->conns[s * v->C + i];
			c->fd = connect_one(v, host, port, deadline);
			if (c->fd < 0)
				return -1;
			snprintf(c->addr, sizeof(c->addr), "%.200s:%.15s", host, port);
			c->peer = s;
			c->idx = i;
			if (ps_sock_opts(c->fd, v->cfg) || ps_set_nonblock(c->fd)) {
				ps_error(v->cfg, "%s: socket options: %s", c->addr, strerror(errno));
				return -1;
			}
			if (v->cfg->scheme == PS_PRIO && ps_prio_band(c->fd, i)) {
				ps_error(v->cfg, "SO_PRIORITY %d: %s (priorities above 6 need CAP_NET_ADMIN)",
					 i, strerror(errno));
				return -1;
			}
		}
		*pr = (struct ps_peer){ .conns = &v->conns[s * v->C], .n = v->C,
					.id = s, .role = v };
		if (ps_peer_open(pr, v->cfg, v->L.levels, v->L.chunk, wrk_dest,
				 wrk_done) < 0) {
			ps_error(v->cfg, "server %d: %s", s, mercury_last_error());
			return -1;
		}
		/* the hellos go first, untagged (a few bytes) */
		for (i = 0; i < v->C; i++) {
			struct ps_hello h = {
				.worker_id = v->w, .conn_idx = i, .nconns = v->C,
				.workers = v->cfg->workers, .server_id = s,
				.servers = v->S, .hash = v->L.hash,
			};

			if (ps_send_hello(pr, i, &h) < 0) {
				ps_error(v->cfg, "hello: %s", mercury_last_error());
				return -1;
			}
		}
	}
	return 0;
}

static int peer_failed(struct wrk *v, struct ps_conn *c, int err)
{
	if (ps_err_malformed(err))
		ps_error(v->cfg, "peer %s (server %d) sent a malformed frame during iteration %d",
			 c->addr, c->peer, v->iter);
	else if (err == -ENOTCONN || err == -ECONNRESET || err == -EPIPE)
		ps_error(v->cfg, "peer %s closed the connection during iteration %d",
			 c->addr, v->iter);
	else
		ps_error(v->cfg, "peer %s: %s during iteration %d", c->addr,
			 strerror(-err), v->iter);
	return 1;
}

/* "server S at ADDR, ..." for every server none of whose connections
 * brought a byte since @since: whom a stalled iteration waits for.
 */
static void silent_servers(const struct wrk *v, int64_t since, char *buf,
			   size_t len)
{
	size_t off = 0;
	int s, i;

	buf[0] = '\0';
	for (s = 0; s < v->S && off < len; s++) {
		const struct ps_conn *c = &v->conns[s * v->C];
		bool heard = false;

		for (i = 0; i < v->C; i++)
			heard |= c[i].last_in_ns > since;
		if (!heard)
			off += snprintf(buf + off, len - off, "%sserver %d at %s",
					off ? ", " : "", s, c->addr);
	}
	if (!off)
		snprintf(buf, len, "none for the whole time");
}

/* Most urgent tag (rank) with bytes in flight; UINT_MAX if none. */
static unsigned int inflight_min_tag(const struct wrk *v)
{
	unsigned int best = ~0u;
	int t;

	for (t = 0; t < v->L.nt; t++)
		if (v->inflight_tag[t] && v->L.t[t].rank < best)
			best = v->L.t[t].rank;
	return best;
}

/*
 * ByteScheduler's window: hand partitions to the sender while credit
 * lasts. Then drive every server's sender; *wake: when one waits for
 * something no poll event reports (0: none).
 */
static int dispatch(struct wrk *v, int64_t now, int64_t *wake)
{
	const struct ps_part *o;
	struct ps_conn *bad;
	int s, ret;

	*wake = 0;
	/*
	 * ByteScheduler checks credit > 0: the last one may overshoot.
	 * A partition is summed only when every worker has pushed it,
	 * so workers whose windows hold different partitions (one
	 * released an urgent tensor a moment before the other) would
	 * wait for each other forever; a partition more urgent than
	 * all this worker has in flight therefore goes regardless.
	 */
	while (v->cfg->scheme == PS_BYTESCHED && (o = ps_heap_top(&v->heap)) &&
	       (v->inflight < v->L.credit || o->rank < inflight_min_tag(v))) {
		v->partitions++;
		v->bypassed += v->inflight >= v->L.credit;
		v->inflight += o->len;
		v->inflight_tag[o->tensor] += o->len;
		ret = ps_send(&v->peers[o->server], o->tensor,
			      v->L.t[o->tensor].tag, o->total,
			      o->offset, o->payload, o->len, o->key, 0);
		if (ret < 0) {
			ps_error(v->cfg, "%s", mercury_last_error());
			return 1;
		}
		ps_heap_pop(&v->heap);
	}
	if (v->cfg->scheme == PS_BYTESCHED) {
		/* how long partitions wait for the window: the latency-bound
		 * share of bytesched's time (Documentation/benchmark.md) */
		o = ps_heap_top(&v->heap);
		if (o && !v->credit_since) {
			v->credit_since = now;
		} else if (!o && v->credit_since) {
			v->credit_ns += now - v->credit_since;
			v->credit_since = 0;
		}
	}
	for (s = 0; s < v->S; s++) {
		int64_t w;

		bad = NULL;
		ret = ps_peer_progress(&v->peers[s], now, &bad);
		if (ret < 0)
			return peer_failed(v, bad, ret);
		if (ret > 0)
			v->last_net = now;
		w = (int64_t)mercury_chanset_wake(v->peers[s].cs);
		if (w && (!*wake || w < *wake))
			*wake = w;
	}
	return 0;
}

static int run(struct wrk *v)
{
	int n = v->S * v->C, i, ret;
	struct pollfd *pfd = calloc(n, sizeof(*pfd));
	int64_t tmo = (int64_t)v->cfg->timeout_ms * 1000000;

	if (!pfd)
		return 1;
	v->t0 = v->prev_end = ps_now_ns();
	v->last_net = v->t0;
	v->ph = FWD;
	v->call = -1;
	for (;;) {
		int64_t now = ps_now_ns(), deadline, wait_ns, wake;

		ret = advance(v, now, &deadline);
		if (ret) {
			ps_error(v->cfg, "%s", ret == -ENOMEM ? "out of memory" :
				 mercury_last_error());
			free(pfd);
			return 1;
		}
		if (v->ph == DONE)
			break;
		ret = dispatch(v, now, &wake);
		if (ret) {
			free(pfd);
			return ret;
		}
		for (i = 0; i < n; i++)
			pfd[i] = (struct pollfd){ .fd = v->conns[i].fd, .events = POLLIN |
				mercury_chanset_events(v->peers[i / v->C].cs, i % v->C) };
		now = ps_now_ns();
		if (now - v->last_net > tmo) {
			char silent[512];

			silent_servers(v, now - tmo, silent, sizeof(silent));
			ps_error(v->cfg, "no data from the servers for %d s during iteration %d (silent: %s)",
				 v->cfg->timeout_ms / 1000, v->iter, silent);
			free(pfd);
			return 1;
		}
		wait_ns = v->last_net + tmo - now;
		if (deadline && deadline - now < wait_ns)
			wait_ns = deadline - now;
		/* a blocked sender has no event to wait for: its own time */
		if (wake && wake - now < wait_ns)
			wait_ns = wake - now;
		ret = ps_poll_ns(pfd, n, wait_ns);
		if (ret < 0) {
			ps_error(v->cfg, "poll: %s", strerror(-ret));
			free(pfd);
			return 1;
		}
		for (i = 0; i < n && ret > 0; i++) {
			struct ps_conn *c = &v->conns[i];
			int r;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = ps_peer_read(&v->peers[i / v->C], i % v->C, ps_now_ns());
			if (r < 0 && r != -EAGAIN) {
				free(pfd);
				return peer_failed(v, c, r);
			}
			if (r > 0)
				v->last_net = ps_now_ns();
		}
	}
	free(pfd);
	return 0;
}

static uint64_t verify(const struct wrk *v, char *first, size_t len)
{
	uint64_t bad = 0, i;
	int t;

	for (t = 0; t < v->L.nt; t++) {
		const struct ps_tensor *T = &v->L.t[t];
		const float *p = v->param + T->off / 4;

		for (i = 0; i < T->bytes / 4; i++) {
			float want = ps_expected_param(v->cfg->workers, v->N, t, i);

			if (p[i] != want && !bad++)
				snprintf(first, len, "%s[%llu] = %g, expected %g", T->name,
					 (unsigned long long)i, p[i], want);
		}
	}
	return bad;
}

static void report(const struct wrk *v, uint64_t bad, const char *first)
{
	const struct mt_profile *P = &v->L.prof;
	double mean = 0, compute = (P->fwd_ms + P->bwd_ms) * v->X;
	uint64_t out = 0, in = 0;
	int i;

	for (i = 1; i < v->N; i++)
		mean += (v->bwd_ends[i] - v->bwd_ends[i - 1]) / 1e6;
	mean /= v->N - 1;
	for (i = 0; i < v->S; i++)
		ps_peer_bytes(&v->peers[i], &out, &in);
	if (v->cfg->json) {
		json_object *o = json_object_new_object(), *a = json_object_new_array();

		json_object_object_add(o, "role", json_object_new_string("worker"));
		json_object_object_add(o, "model", json_object_new_string(P->model));
		json_object_object_add(o, "scheme", json_object_new_string(ps_scheme_name(v->cfg->scheme)));
		json_object_object_add(o, "worker_id", json_object_new_int(v->w));
		json_object_object_add(o, "workers", json_object_new_int(v->cfg->workers));
		json_object_object_add(o, "servers", json_object_new_int(v->S));
		json_object_object_add(o, "time_scale", json_object_new_double(v->X));
		json_object_object_add(o, "bytes_scale", json_object_new_double(v->cfg->bytes_scale));
		json_object_object_add(o, "gradient_bytes", json_object_new_int64(v->L.total_bytes));
		json_object_object_add(o, "compute_ms", jms(compute));
		for (i = 1; i < v->N; i++)
			json_object_array_add(a, jms(
				(v->bwd_ends[i] - v->bwd_ends[i - 1]) / 1e6));
		json_object_object_add(o, "iteration_ms", a);
		json_object_object_add(o, "mean_ms", jms(mean));
		json_object_object_add(o, "stall_ms", jms(
			v->stall_ns / 1e6 / (v->N - 1)));
		json_object_object_add(o, "bytes_out", json_object_new_int64(out));
		json_object_object_add(o, "bytes_in", json_object_new_int64(in));
		json_object_object_add(o, "chunk_bytes", json_object_new_int64(v->L.chunk));
		json_object_object_add(o, "frames", json_object_new_int64(v->L.frames));
		/* the priorities benchmarked: a plan's tags, or forward order */
		json_object_object_add(o, "plan", v->cfg->plan ?
				       json_object_new_string(v->cfg->plan) : NULL);
		if (v->cfg->scheme == PS_BYTESCHED) {
			json_object *b = json_object_new_object();

			json_object_object_add(b, "credit_bytes", json_object_new_int64(v->L.credit));
			json_object_object_add(b, "partitions", json_object_new_int64(v->partitions));
			json_object_object_add(b, "past_full_window", json_object_new_int64(v->bypassed));
			json_object_object_add(b, "credit_wait_ms", jms(
				v->credit_ns / 1e6 / v->N));
			json_object_object_add(o, "bytesched", b);
		}
		if (v->cfg->scheme == PS_MERCURY)
			ps_sender_report(o, v->peers, v->S);
		json_object_object_add(o, "verified", json_object_new_boolean(!bad));
		json_object_object_add(o, "mismatches", json_object_new_int64(bad));
		if (bad)
			json_object_object_add(o, "first_mismatch", json_object_new_string(first));
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		printf("worker %d: %s %s, %d workers, %d servers, compute %.2f ms\n",
		       v->w, P->model, ps_scheme_name(v->cfg->scheme), v->cfg->workers,
		       v->S, compute);
		for (i = 1; i < v->N; i++)
			printf("  iteration %d: %.2f ms\n", i,
			       (v->bwd_ends[i] - v->bwd_ends[i - 1]) / 1e6);
		printf("  mean %.2f ms, stall %.2f ms/iteration, %llu bytes pushed\n", mean,
		       v->stall_ns / 1e6 / (v->N - 1), (unsigned long long)out);
		if (bad)
			printf("  sums WRONG: %llu mismatches, first %s\n",
			       (unsigned long long)bad, first);
		else
			printf("  sums verified: %llu parameters exact\n",
			       (unsigned long long)(v->L.total_bytes / 4));
	}
	fflush(stdout);
}

int ps_worker_main(struct ps_cfg *cfg)
{
	struct wrk v = { .cfg = cfg, .w = cfg->worker_id, .S = cfg->servers,
			 .C = ps_nconns(cfg), .N = cfg->iterations, .X = cfg->time_scale };
	const struct mt_profile *P;
	char err[512], first[512] = "";
	uint64_t i, bad;
	int t, s, rc = 1;

	if (ps_layout_init(&v.L, cfg, err, sizeof(err))) {
		ps_error(cfg, "%s", err);
		return 1;
	}
	P = &v.L.prof;
	v.grad = malloc(v.L.total_bytes);
	v.param = calloc(1, v.L.total_bytes);
	v.tchunks = calloc(v.L.nt, sizeof(*v.tchunks));
	v.pulled_cnt = calloc(v.L.nt, sizeof(*v.pulled_cnt));
	v.pulled_iter = calloc(v.L.nt, sizeof(*v.pulled_iter));
	v.pushed_iter = calloc(v.L.nt, sizeof(*v.pushed_iter));
	v.home_ns = calloc(v.L.nt, sizeof(*v.home_ns));
	v.rel_order = calloc(v.L.nt, sizeof(*v.rel_order));
	v.gate_first = calloc(P->ncalls + 1, sizeof(*v.gate_first));
	v.gate_list = calloc(v.L.nt, sizeof(*v.gate_list));
	v.conns = calloc(v.S * v.C, sizeof(*v.conns));
	v.peers = calloc(v.S, sizeof(*v.peers));
	v.bwd_ends = calloc(v.N, sizeof(*v.bwd_ends));
	v.inflight_tag = calloc(v.L.nt, sizeof(*v.inflight_tag));
	if (!v.grad || !v.param || !v.tchunks || !v.pulled_cnt || !v.pulled_iter ||
	    !v.pushed_iter || !v.home_ns || !v.rel_order || !v.gate_first ||
	    !v.gate_list || !v.conns || !v.peers || !v.bwd_ends || !v.inflight_tag) {
		ps_error(cfg, "out of memory");
		goto out;
	}
	for (i = 0; i < (uint64_t)v.S * v.C; i++)
		v.conns[i].fd = -1;
	for (t = 0; t < v.L.nt; t++) {
		const struct ps_tensor *T = &v.L.t[t];

		for (i = 0; i < T->bytes / 4; i++)
			v.grad[T->off / 4 + i] = ps_grad_value(v.w, t, i);
		for (s = 0; s < v.S; s++)
			v.tchunks[t] += v.L.nchunks[ps_idx(&v.L, t, s)];
		v.gate_first[T->gate + 1]++;
	}
	/* tensors grouped by gate (counting sort), released by ready time */
	for (t = 0; t < P->ncalls; t++)
		v.gate_first[t + 1] += v.gate_first[t];
	{
		int *fill = calloc(P->ncalls + 1, sizeof(*fill));

		if (!fill)
			goto out;
		for (t = 0; t < v.L.nt; t++)
			v.gate_list[v.gate_first[v.L.t[t].gate] + fill[v.L.t[t].gate]++] = t;
		free(fill);
	}
	for (t = 0; t < v.L.nt; t++) {
		int j = t;

		/* insertion sort: the profile is already in ready order */
		while (j > 0 && v.L.t[v.rel_order[j - 1]].ready_ms > v.L.t[t].ready_ms) {
			v.rel_order[j] = v.rel_order[j - 1];
			j--;
		}
		v.rel_order[j] = t;
	}
	if ((rc = connect_all(&v)) != 0) {
		rc = rc == -2 ? 2 : 1;
		goto out;
	}
	rc = run(&v);
	if (rc)
		goto out;
	bad = verify(&v, first, sizeof(first));
	report(&v, bad, first);
	if (bad) {
		ps_error(cfg, "worker %d: %llu parameters differ from the exact sums (first: %s)",
			 v.w, (unsigned long long)bad, first);
		rc = 1;
	}
out:
	if (v.conns)
		for (i = 0; i < (uint64_t)v.S * v.C; i++)
			if (v.conns[i].fd >= 0)
				ps_conn_close(&v.conns[i]);
	for (s = 0; v.peers && s < v.S; s++)
		ps_peer_close(&v.peers[s]);
	ps_heap_free(&v.heap);
	mercury_tagger_free(v.tagger);
	free(v.grad); free(v.param); free(v.tchunks); free(v.pulled_cnt);
	free(v.pulled_iter); free(v.pushed_iter); free(v.home_ns); free(v.rel_order);
	free(v.gate_first); free(v.gate_list); free(v.conns); free(v.peers);
	free(v.bwd_ends); free(v.inflight_tag);
	ps_layout_free(&v.L);
	return rc;
}
