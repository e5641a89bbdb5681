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
	struct ps_conn **cptr;
	struct mercury_chanset **cs;
	struct ps_msend *ms;		/* mercury: per server */
	struct ps_heap *heap;		/* bytesched: [0] */
	struct mercury_tagger *tagger;
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

static int wrk_dest(void *ctx, struct ps_conn *c)
{
	struct wrk *v = ctx;
	const struct mercury_frame *f = &c->fr;
	int s = c->peer, t = f->tensor_id;
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
	c->dst = (uint8_t *)v->param + v->L.t[t].off + v->L.lo[k] + f->offset;
	return 0;
}

static int wrk_done(void *ctx, struct ps_conn *c)
{
	struct wrk *v = ctx;
	int t = c->fr.tensor_id;

	if (v->cfg->scheme == PS_BYTESCHED) {
		v->inflight -= c->fr.chunk_len;	/* the partition is home */
		v->inflight_tag[t] -= c->fr.chunk_len;
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
			uint32_t len = ps_chunk_len(&v->L, t, s, c);
			struct ps_out *o;
			struct ps_conn *cn;

			if (!len)
				continue;
			o = ps_out_new(t, v->cfg->scheme == PS_MERCURY ? T->level : T->rank,
				       v->L.hi[k] - v->L.lo[k],
				       (uint64_t)c * v->L.chunk,
				       (uint8_t *)v->grad + T->off + v->L.lo[k] +
				       (uint64_t)c * v->L.chunk, len);
			if (!o)
				return -ENOMEM;
			o->server = s;
			o->key = (uint64_t)T->rank << 40 | (v->seq++ & ((1ull << 40) - 1));
			switch (v->cfg->scheme) {
			case PS_MERCURY:
				if (ps_heap_push(&v->ms[s].heap, o))
					goto nomem;
				continue;
			case PS_BYTESCHED:
				if (ps_heap_push(&v->heap[0], o))
					goto nomem;
				continue;
			case PS_PRIO:
				cn = &v->conns[s * v->C + T->band];
				break;
			default:
				cn = &v->conns[s * v->C];
			}
			ps_conn_queue(cn, o);
			continue;
nomem:
			free(o);
			return -ENOMEM;
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
	const struct msim_profile *P = &v->L.prof;
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
		int fds[PS_MAX_CHANNELS];

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
			struct ps_hello h = {
				.worker_id = v->w, .conn_idx = i, .nconns = v->C,
				.workers = v->cfg->workers, .server_id = s,
				.servers = v->S, .hash = v->L.hash,
			};
			struct ps_out *o;

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
			ps_hello_encode(c->hello, &h);
			o = ps_out_new(PS_HELLO_ID, 0, PS_HELLO_LEN, 0, c->hello, PS_HELLO_LEN);
			if (!o)
				return -1;
			ps_conn_queue(c, o);
			fds[i] = c->fd;
			v->cptr[s * v->C + i] = c;
		}
		if (v->cfg->scheme == PS_MERCURY) {
			unsigned int classes[PS_MAX_CHANNELS];
			MERCURY_OPTS(mercury_chanset_opts, co, .tag_opts = &to,
				     .chunk_size = v->L.chunk, .no_tag = true,
				     .classes = classes);

			ps_mercury_classes(classes, v->C, v->L.levels);
			if (mercury_chanset_new(fds, v->C, &co, &v->cs[s]) < 0) {
				ps_error(v->cfg, "channel set: %s", mercury_last_error());
				return -1;
			}
			for (i = 0; i < v->C; i++) {
				v->conns[s * v->C + i].cs = v->cs[s];
				v->conns[s * v->C + i].cs_idx = i;
			}
			ps_msend_init(&v->ms[s], v->cs[s], &v->cptr[s * v->C],
				      v->cfg->inflight);
		}
	}
	/* tag only after the hellos (untagged, a few bytes) went out */
	for (i = 0; i < v->S * v->C; i++) {
		if (ps_conn_flush(&v->conns[i]) < 0) {
			ps_error(v->cfg, "%s: %s", v->conns[i].addr, strerror(errno));
			return -1;
		}
		v->conns[i].tagger = v->tagger;
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

/* *wake: when a blocked Mercury sender looks again (0: none blocked). */
static int dispatch(struct wrk *v, int64_t now, int64_t *wake)
{
	int s, ret;

	*wake = 0;
	if (v->cfg->scheme == PS_MERCURY) {
		for (s = 0; s < v->S; s++) {
			struct ps_msend *m = &v->ms[s];
			struct ps_conn *bad = NULL;

			if (ps_msend_due(m, now)) {
				ret = ps_dispatch_mercury(m, now, &bad);
				if (ret < 0)
					return peer_failed(v, bad ? bad : &v->conns[s * v->C], ret);
			}
			if (m->wake_ns && (!*wake || m->wake_ns < *wake))
				*wake = m->wake_ns;
		}
	} else if (v->cfg->scheme == PS_BYTESCHED) {
		struct ps_out *o;

		/*
		 * ByteScheduler checks credit > 0: the last one may overshoot.
		 * A partition is summed only when every worker has pushed it,
		 * so workers whose windows hold different partitions (one
		 * released an urgent tensor a moment before the other) would
		 * wait for each other forever; a partition more urgent than
		 * all this worker has in flight therefore goes regardless.
		 */
		while ((o = ps_heap_top(&v->heap[0])) &&
		       (v->inflight < v->L.credit || o->tag < inflight_min_tag(v))) {
			struct ps_conn *c = &v->conns[o->server * v->C];

			v->partitions++;
			v->bypassed += v->inflight >= v->L.credit;
			ps_heap_pop(&v->heap[0]);
			v->inflight += o->len;
			v->inflight_tag[o->tensor] += o->len;
			ps_conn_queue(c, o);
			ret = ps_conn_flush(c);
			if (ret < 0)
				return peer_failed(v, c, ret);
		}
		/* how long partitions wait for the window: the latency-bound
		 * share of bytesched's time (Documentation/benchmark.md) */
		if (o && !v->credit_since) {
			v->credit_since = now;
		} else if (!o && v->credit_since) {
			v->credit_ns += now - v->credit_since;
			v->credit_since = 0;
		}
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
			ps_error(v->cfg, "out of memory");
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
		for (i = 0; i < n; i++) {
			struct ps_conn *c = &v->conns[i];

			if (c->head && (ret = ps_conn_flush(c)) < 0) {
				free(pfd);
				return peer_failed(v, c, ret);
			}
			if (ret > 0)
				v->last_net = now;
			pfd[i] = (struct pollfd){ .fd = c->fd, .events = POLLIN |
						  (c->head ? POLLOUT : 0) };
		}
		/* the flushes above may have finished the frame a Mercury
		 * sender stopped at: then it has work and nothing to wake it */
		for (i = 0; v->cfg->scheme == PS_MERCURY && i < v->S; i++)
			if (ps_msend_runnable(&v->ms[i], now))
				wake = now;
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
			r = ps_conn_read(c, wrk_dest, wrk_done, v);
			if (r < 0) {
				free(pfd);
				return peer_failed(v, c, r);
			}
			if (r)
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
	const struct msim_profile *P = &v->L.prof;
	double mean = 0, compute = (P->fwd_ms + P->bwd_ms) * v->X;
	uint64_t out = 0, in = 0;
	int i;

	for (i = 1; i < v->N; i++)
		mean += (v->bwd_ends[i] - v->bwd_ends[i - 1]) / 1e6;
	mean /= v->N - 1;
	for (i = 0; i < v->S * v->C; i++) {
		out += v->conns[i].bytes_out;
		in += v->conns[i].bytes_in;
	}
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
			ps_msend_report(o, v->ms, v->S);
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
	const struct msim_profile *P;
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
	v.cptr = calloc(v.S * v.C, sizeof(*v.cptr));
	v.cs = calloc(v.S, sizeof(*v.cs));
	v.heap = calloc(v.S, sizeof(*v.heap));
	v.ms = calloc(v.S, sizeof(*v.ms));
	v.bwd_ends = calloc(v.N, sizeof(*v.bwd_ends));
	v.inflight_tag = calloc(v.L.nt, sizeof(*v.inflight_tag));
	if (!v.grad || !v.param || !v.tchunks || !v.pulled_cnt || !v.pulled_iter ||
	    !v.pushed_iter || !v.home_ns || !v.rel_order || !v.gate_first ||
	    !v.gate_list || !v.conns || !v.cptr || !v.cs || !v.heap || !v.ms || !v.bwd_ends || !v.inflight_tag) {
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
	for (s = 0; v.cs && s < v.S; s++)
		mercury_chanset_free(v.cs[s]);
	for (s = 0; v.heap && s < v.S; s++)
		ps_heap_free(&v.heap[s]);
	for (s = 0; v.ms && s < v.S; s++)
		ps_heap_free(&v.ms[s].heap);
	mercury_tagger_free(v.tagger);
	free(v.grad); free(v.param); free(v.tchunks); free(v.pulled_cnt);
	free(v.pulled_iter); free(v.pushed_iter); free(v.home_ns); free(v.rel_order);
	free(v.gate_first); free(v.gate_list); free(v.conns); free(v.cptr);
	free(v.cs); free(v.heap); free(v.ms); free(v.bwd_ends); free(v.inflight_tag);
	ps_layout_free(&v.L);
	return rc;
}
