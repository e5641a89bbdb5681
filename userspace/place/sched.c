// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The time model and the scheduling engine every algorithm is judged by.
 *
 * One training step of a model-parallel placement (Baechi's setting, no
 * pipelining, no data-parallel gradient exchange):
 *  - F(v) runs on place[v] for fwd_ms / speed, B(v) on the same device for
 *    bwd_ms / speed.  A device runs one task at a time, in a stream order.
 *  - Edge u -> v across devices: the activation of u's producing member is
 *    sent once per (member, destination device) after F(u), and its
 *    gradient goes back once, after every consumer's B on that device has
 *    finished (the consumers' contributions are summed locally first).
 *  - A transfer takes latency + bytes / rate and holds what the network
 *    rule (mt_net_route(), userspace/common/net.c) says: the sender's NIC
 *    egress and the receiver's NIC ingress together (one NIC per device
 *    or host, full duplex), or the pair's own link where the cluster
 *    declares one.  Each of them carries one transfer at a time.
 *  - The loss joins the forward sinks to their backward tasks at no cost.
 * The engine is a work-conserving list scheduler: whenever a device, link
 * or NIC is idle it starts the ready unit with the longest remaining
 * critical path (bottom level, without communication) among those whose
 * other resource (a transfer's ingress) is idle too.  It records the order each
 * resource ran its units in; sim.c replays exactly those orders.
 */
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"

/* ---- a binary min-heap of unit ids keyed by (key, id) ------------------ */

struct heap {
	int n, cap;
	int *id;
	double *key;
};

static int heap_less(const struct heap *h, int i, int j)
{
	if (h->key[i] != h->key[j])
		return h->key[i] < h->key[j];
	return h->id[i] < h->id[j];
}

static void heap_swap(struct heap *h, int i, int j)
{
	int ti = h->id[i];
	double tk = h->key[i];

	h->id[i] = h->id[j];
	h->key[i] = h->key[j];
	h->id[j] = ti;
	h->key[j] = tk;
}

static void heap_push(struct heap *h, int id, double key)
{
	int i;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 8;
		h->id = realloc(h->id, h->cap * sizeof(int));
		h->key = realloc(h->key, h->cap * sizeof(double));
		if (!h->id || !h->key)
			abort();
	}
	i = h->n++;
	h->id[i] = id;
	h->key[i] = key;
	while (i && heap_less(h, i, (i - 1) / 2)) {
		heap_swap(h, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static int heap_pop(struct heap *h)
{
	int top = h->id[0], i = 0;

	h->n--;
	h->id[0] = h->id[h->n];
	h->key[0] = h->key[h->n];
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;

		if (l < h->n && heap_less(h, l, m))
			m = l;
		if (r < h->n && heap_less(h, r, m))
			m = r;
		if (m == i)
			break;
		heap_swap(h, i, m);
		i = m;
	}
	return top;
}

static void heap_free(struct heap *h)
{
	free(h->id);
	free(h->key);
}

/* ---- building the unit DAG for one placement --------------------------- */

struct pairs {
	int n, cap;
	int *a, *b;
};

static void pair_add(struct pairs *p, int a, int b)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 1024;
		p->a = realloc(p->a, p->cap * sizeof(int));
		p->b = realloc(p->b, p->cap * sizeof(int));
		if (!p->a || !p->b)
			abort();
	}
	p->a[p->n] = a;
	p->b[p->n++] = b;
}

static int unit_add(struct mp_units *U, int *cap)
{
	if (U->nu == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		U->u = realloc(U->u, *cap * sizeof(*U->u));
		if (!U->u)
			abort();
	}
	memset(&U->u[U->nu], 0, sizeof(U->u[0]));
	return U->nu++;
}

/* Bottom levels without communication, at the placed devices' speeds. */
static void bottom_levels(const struct mp_graph *g, const struct mp_cluster *c,
			  const int *place, double *blf, double *blb)
{
	double maxb = 0;

	for (int i = 0; i < g->n; i++) {
		int v = g->topo[i];
		double m = 0;

		for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
			int u = g->edges[g->in_e[k]].src;

			if (blb[u] > m)
				m = blb[u];
		}
		blb[v] = g->nodes[v].bwd_ms / c->dev[place[v]].speed + m;
	}
	for (int v = 0; v < g->n; v++)
		if (g->out_off[v + 1] == g->out_off[v] && blb[v] > maxb)
			maxb = blb[v];
	for (int i = g->n - 1; i >= 0; i--) {
		int v = g->topo[i];
		double m = g->out_off[v + 1] == g->out_off[v] ? maxb : 0;

		for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++) {
			int w = g->edges[g->out_e[k]].dst;

			if (blf[w] > m)
				m = blf[w];
		}
		blf[v] = g->nodes[v].fwd_ms / c->dev[place[v]].speed + m;
	}
}

int mp_units_build(const struct mp_graph *g, const struct mp_cluster *c,
		   const int *place, struct mp_units *U)
{
	double *blf = mp_calloc(g->n, sizeof(double));
	double *blb = mp_calloc(g->n, sizeof(double));
	int *grp_m = mp_calloc(g->ne + 1, sizeof(int));
	int *grp_d = mp_calloc(g->ne + 1, sizeof(int));
	int *grp_x = mp_calloc(g->ne + 1, sizeof(int));
	struct pairs P = { 0 };
	int cap = 0, loss, n = g->n;

	memset(U, 0, sizeof(*U));
	for (int v = 0; v < n; v++)
		if (place[v] < 0 || place[v] >= c->d) {
			free(blf);
			free(blb);
			free(grp_m);
			free(grp_d);
			free(grp_x);
			return -EINVAL;
		}
	bottom_levels(g, c, place, blf, blb);
	U->ndev = c->d;
	U->nres = MP_NRES(c);
	for (int v = 0; v < n; v++) {
		int f = unit_add(U, &cap);

		U->u[f].res2 = -1;
		U->u[f].kind = MP_U_FWD;
		U->u[f].node = v;
		U->u[f].member = -1;
		U->u[f].res = place[v];
		U->u[f].dur = g->nodes[v].fwd_ms / c->dev[place[v]].speed;
		U->u[f].prio = blf[v];
	}
	for (int v = 0; v < n; v++) {
		int b = unit_add(U, &cap);

		U->u[b].res2 = -1;
		U->u[b].kind = MP_U_BWD;
		U->u[b].node = v;
		U->u[b].member = -1;
		U->u[b].res = place[v];
		U->u[b].dur = g->nodes[v].bwd_ms / c->dev[place[v]].speed;
		U->u[b].prio = blb[v];
		pair_add(&P, v, n + v);
	}
	loss = unit_add(U, &cap);
	U->u[loss].kind = MP_U_LOSS;
	U->u[loss].node = -1;
	U->u[loss].res = -1;
	U->u[loss].res2 = -1;
	U->u[loss].prio = DBL_MAX;
	for (int u = 0; u < n; u++) {
		int ng = 0;

		if (g->out_off[u + 1] == g->out_off[u]) {
			pair_add(&P, u, loss);
			pair_add(&P, loss, n + u);
		}
		for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
			const struct mp_edge *e = &g->edges[g->out_e[k]];
			int d = place[e->dst], j;

			if (d == place[u]) {
				pair_add(&P, u, e->dst);
				pair_add(&P, n + e->dst, n + u);
				continue;
			}
			for (j = 0; j < ng; j++)
				if (grp_m[j] == e->src_member && grp_d[j] == d)
					break;
			if (j == ng) {
				int xf = unit_add(U, &cap);
				int xb = unit_add(U, &cap);
				double ms = mp_xfer_ms(c, place[u], d, e->bytes);

				grp_m[ng] = e->src_member;
				grp_d[ng] = d;
				grp_x[ng++] = xf;
				U->u[xf].kind = MP_U_XFWD;
				mp_xfer_res(c, &U->u[xf], place[u], d);
				U->u[xb].kind = MP_U_XBWD;
				mp_xfer_res(c, &U->u[xb], d, place[u]);
				for (int x = xf; x <= xb; x++) {
					U->u[x].node = u;
					U->u[x].member = e->src_member;
					U->u[x].first_dst = e->dst_member;
					U->u[x].dur = ms;
					U->u[x].bytes = e->bytes;
				}
				U->u[xb].prio = blb[u] + ms;
				pair_add(&P, u, xf);
				pair_add(&P, xb, n + u);
			}
			/* consumers of one transfer: the earliest names it */
			if (g->members[e->dst_member].order <
			    g->members[U->u[grp_x[j]].first_dst].order) {
				U->u[grp_x[j]].first_dst = e->dst_member;
				U->u[grp_x[j] + 1].first_dst = e->dst_member;
			}
			if (blf[e->dst] + U->u[grp_x[j]].dur >
			    U->u[grp_x[j]].prio)
				U->u[grp_x[j]].prio = blf[e->dst] +
						      U->u[grp_x[j]].dur;
			pair_add(&P, grp_x[j], e->dst);
			pair_add(&P, n + e->dst, grp_x[j] + 1);
		}
	}
	/*
	 * A tied tensor whose other owner runs elsewhere: that device's
	 * gradient contribution goes to the first owner's device after its
	 * backward, before the step can end (the update needs the sum).
	 */
	for (int i = 0; i < g->np; i++) {
		const struct mp_param *pa = &g->params[i];
		int home = place[g->members[pa->member].node];

		for (int k = 0; k < pa->nshared; k++) {
			int v = g->members[pa->shared[k]].node;
			int x;

			if (place[v] == home)
				continue;
			x = unit_add(U, &cap);
			U->u[x].kind = MP_U_XTIE;
			U->u[x].node = v;
			U->u[x].member = pa->shared[k];
			U->u[x].first_dst = pa->member;
			mp_xfer_res(c, &U->u[x], place[v], home);
			U->u[x].bytes = pa->bytes;
			U->u[x].dur = mp_xfer_ms(c, place[v], home, pa->bytes);
			U->u[x].prio = U->u[x].dur;
			pair_add(&P, n + v, x);
		}
	}
	U->succ_off = mp_calloc(U->nu + 1, sizeof(int));
	U->succ = mp_calloc(P.n, sizeof(int));
	for (int i = 0; i < P.n; i++) {
		U->succ_off[P.a[i] + 1]++;
		U->u[P.b[i]].ndeps++;
	}
	for (int i = 0; i < U->nu; i++)
		U->succ_off[i + 1] += U->succ_off[i];
	{
		int *fill = mp_calloc(U->nu, sizeof(int));

		for (int i = 0; i < P.n; i++)
			U->succ[U->succ_off[P.a[i]] + fill[P.a[i]]++] = P.b[i];
		free(fill);
	}
	free(P.a);
	free(P.b);
	free(blf);
	free(blb);
	free(grp_m);
	free(grp_d);
	free(grp_x);
	return 0;
}

void mp_units_free(struct mp_units *U)
{
	free(U->u);
	free(U->succ_off);
	free(U->succ);
	memset(U, 0, sizeof(*U));
}

void mp_xfer_res(const struct mp_cluster *c, struct mp_unit *u, int a, int b)
{
	struct mt_route r;

	mt_net_route(&c->net, a, b, &r);
	u->src = a;
	u->dst = b;
	u->res2 = -1;
	if (r.kind == MT_ROUTE_NIC) {
		u->res = MP_EGRESS(c, r.egress);
		u->res2 = MP_INGRESS(c, r.ingress);
	} else {
		u->res = MP_LINK(c, a, b);
	}
}

void mp_port_res(const struct mp_cluster *c, struct mp_unit *u, int d,
		 int way)
{
	u->src = u->dst = d;
	u->res2 = -1;
	if (c->per_pair)
		u->res = MP_LINK(c, d, d);
	else if (!way)
		u->res = MP_EGRESS(c, c->net.nic[d]);
	else
		u->res = MP_INGRESS(c, c->net.nic[d]);
}

/* ---- the engine -------------------------------------------------------- */

int mp_sched_run(struct mp_units *U, struct mp_sched *S)
{
	struct heap *ready = mp_calloc(U->nres, sizeof(struct heap));
	struct heap ev = { 0 }, skip = { 0 };
	int *deps = mp_calloc(U->nu, sizeof(int));
	int *busy = mp_calloc(U->nres, sizeof(int));
	int *cnt = mp_calloc(U->nres + 1, sizeof(int));
	int *touched = mp_calloc(U->nres, sizeof(int));
	char *intouch = mp_calloc(U->nres, 1);
	int *seq = mp_calloc(U->nu, sizeof(int));
	int *twos = mp_calloc(U->nres, sizeof(int));	/* resources that
							 * queue 2-resource units */
	char *istwo = mp_calloc(U->nres, 1);
	char *isin = mp_calloc(U->nres, 1);	/* some unit's res2 */
	int nseq = 0, ntouch = 0, ntwos = 0, done = 0, ret = 0, nord = 0;
	double step = 0;

	memset(S, 0, sizeof(*S));
	for (int i = 0; i < U->nu; i++) {
		deps[i] = U->u[i].ndeps;
		U->u[i].start = U->u[i].finish = -1;
		if (U->u[i].res >= 0 && U->u[i].res2 >= 0 &&
		    !istwo[U->u[i].res]) {
			istwo[U->u[i].res] = 1;
			twos[ntwos++] = U->u[i].res;
		}
		if (U->u[i].res2 >= 0)
			isin[U->u[i].res2] = 1;
	}

#define TOUCH(r) do {							\
		int _r = (r);						\
		if (!intouch[_r]) {					\
			intouch[_r] = 1;				\
			touched[ntouch++] = _r;				\
		}							\
	} while (0)
/* A unit whose inputs are all there joins its resource's ready queue;
 * resource-free units (the loss) complete on the spot.
 */
#define MAKE_READY(x, t) do {						\
		int _x = (x);						\
		if (U->u[_x].res < 0) {					\
			U->u[_x].start = U->u[_x].finish = (t);		\
			heap_push(&ev, _x, (t));			\
		} else {						\
			heap_push(&ready[U->u[_x].res], _x,		\
				  -U->u[_x].prio);			\
			if (!busy[U->u[_x].res])			\
				TOUCH(U->u[_x].res);			\
		}							\
	} while (0)

	for (int i = 0; i < U->nu; i++)
		if (!deps[i])
			MAKE_READY(i, 0.0);
	for (double t = 0;;) {
		/* start idle resources first, then advance time */
		for (int k = 0; k < ntouch; k++) {
			int r = touched[k], x = -1;

			intouch[r] = 0;
			if (busy[r] || !ready[r].n)
				continue;
			/* the most urgent unit whose second resource is idle */
			while (ready[r].n) {
				double key = ready[r].key[0];

				x = heap_pop(&ready[r]);
				if (U->u[x].res2 < 0 || !busy[U->u[x].res2])
					break;
				heap_push(&skip, x, key);
				x = -1;
			}
			while (skip.n) {
				double key = skip.key[0];
				int y = heap_pop(&skip);

				heap_push(&ready[r], y, key);
			}
			if (x < 0)
				continue;
			busy[r] = 1;
			cnt[r + 1]++;
			nord++;
			if (U->u[x].res2 >= 0) {
				busy[U->u[x].res2] = 1;
				cnt[U->u[x].res2 + 1]++;
				nord++;
			}
			U->u[x].start = t;
			U->u[x].finish = t + U->u[x].dur;
			seq[nseq++] = x;
			heap_push(&ev, x, U->u[x].finish);
		}
		ntouch = 0;
		if (!ev.n)
			break;
		t = ev.key[0];
		while (ev.n && ev.key[0] == t) {
			int x = heap_pop(&ev);
			int r = U->u[x].res;

			done++;
			if (t > step)
				step = t;
			if (r >= 0) {
				busy[r] = 0;
				TOUCH(r);
			}
			if (U->u[x].res2 >= 0) {
				busy[U->u[x].res2] = 0;
				TOUCH(U->u[x].res2);
			}
			/* a freed ingress may unblock a transfer queued on
			 * any egress: retry those (at most one per NIC) */
			if (U->u[x].res2 >= 0 || (r >= 0 && isin[r]))
				for (int k = 0; k < ntwos; k++)
					if (!busy[twos[k]] && ready[twos[k]].n)
						TOUCH(twos[k]);
			for (int k = U->succ_off[x]; k < U->succ_off[x + 1]; k++) {
				int s = U->succ[k];

				if (--deps[s] == 0)
					MAKE_READY(s, t);
			}
		}
	}
#undef MAKE_READY
#undef TOUCH
	if (done != U->nu) {
		ret = -EDEADLK;
		goto out;
	}
	/* per-resource orders, from the global start sequence; a transfer
	 * through the NICs is in its egress's order and its ingress's */
	for (int r = 0; r < U->nres; r++)
		cnt[r + 1] += cnt[r];
	S->order_off = mp_calloc(U->nres + 1, sizeof(int));
	memcpy(S->order_off, cnt, (U->nres + 1) * sizeof(int));
	S->order = mp_calloc(nord + 1, sizeof(int));
	for (int i = 0; i < nseq; i++) {
		int r = U->u[seq[i]].res;

		S->order[cnt[r]++] = seq[i];
		if (U->u[seq[i]].res2 >= 0)
			S->order[cnt[U->u[seq[i]].res2]++] = seq[i];
	}
	S->step_ms = step;
out:
	for (int r = 0; r < U->nres; r++)
		heap_free(&ready[r]);
	heap_free(&ev);
	heap_free(&skip);
	free(ready);
	free(deps);
	free(busy);
	free(cnt);
	free(touched);
	free(intouch);
	free(seq);
	free(twos);
	free(istwo);
	free(isin);
	return ret;
}

void mp_sched_free(struct mp_sched *S)
{
	free(S->order);
	free(S->order_off);
	memset(S, 0, sizeof(*S));
}

double mp_eval(const struct mp_graph *g, const struct mp_cluster *c,
	       const int *place)
{
	struct mp_units U;
	struct mp_sched S;
	double t;

	if (mp_units_build(g, c, place, &U))
		return -1;
	t = mp_sched_run(&U, &S) ? -1 : S.step_ms;
	mp_sched_free(&S);
	mp_units_free(&U);
	return t;
}

/* ---- memory ------------------------------------------------------------ */

/*
 * Static (peak-bounding) memory of a device: for each node placed there its
 * parameters x3 (weights, gradients, momentum) and its stashed activations;
 * plus one copy of each activation received from another device (kept for
 * backward).  The sender holds nothing extra: the tensor it sends is its
 * own stashed output, already counted once in its node's act_bytes.
 * Activation gradients are transient on one device and across devices
 * alike, so neither side counts them (charging the sender for the
 * gradient it gets back counted that tensor twice and made m-ETF give up
 * on a full device 0 while others were empty).  A tied tensor (shared_with)
 * whose owners sit on other devices costs each of them a copy of its
 * weights and gradient.  The simulator's time-varying peak never exceeds
 * this.
 */
void mp_mem_static(const struct mp_graph *g, const struct mp_cluster *c,
		   const int *place, double *mem)
{
	int *gm = mp_calloc(g->ne + 1, sizeof(int));
	int *gd = mp_calloc(g->ne + 1, sizeof(int));

	for (int d = 0; d < c->d; d++)
		mem[d] = 0;
	for (int u = 0; u < g->n; u++) {
		int ng = 0;

		mem[place[u]] += mp_node_mem(g, u);
		for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
			const struct mp_edge *e = &g->edges[g->out_e[k]];
			int d = place[e->dst], j;

			if (d == place[u])
				continue;
			for (j = 0; j < ng; j++)
				if (gm[j] == e->src_member && gd[j] == d)
					break;
			if (j < ng)
				continue;
			gm[ng] = e->src_member;
			gd[ng++] = d;
			mem[d] += e->bytes;
		}
	}
	for (int i = 0; i < g->np; i++) {
		const struct mp_param *pa = &g->params[i];
		int home = place[g->members[pa->member].node];
		uint64_t have = 1ull << home;

		for (int k = 0; k < pa->nshared; k++) {
			int d = place[g->members[pa->shared[k]].node];

			if (have >> d & 1)
				continue;
			have |= 1ull << d;
			mem[d] += 2.0 * pa->bytes;
		}
	}
	free(gm);
	free(gd);
}

int mp_mem_ok(const struct mp_graph *g, const struct mp_cluster *c,
	      const int *place, struct mp_err *err)
{
	double *mem = mp_calloc(c->d, sizeof(double));
	int ret = 0;

	mp_mem_static(g, c, place, mem);
	for (int d = 0; d < c->d && !ret; d++)
		if (mem[d] > c->dev[d].memory_bytes)
			ret = mp_set_err(err, -ENOSPC,
					 "device %s needs %.0f bytes, has %.0f",
					 c->dev[d].name, mem[d],
					 c->dev[d].memory_bytes);
	free(mem);
	return ret;
}

/* ---- lower bound ------------------------------------------------------- */

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x < y) - (x > y);
}

/*
 * The communication-aware path bound, one direction (forward over the
 * graph, or backward over its reverse).  est[v] is a lower bound on the
 * start of v's task in any placement.  For a node with predecessors
 * u_1..u_k (k >= 2), let X_i be the ancestors of u_i (u_i included) that
 * are ancestors of no other u_j: disjoint sets, and every path from X_i to
 * v passes through u_i.  In any placement each branch is either wholly on
 * v's device (then that device runs all of X_i, one task at a time, before
 * v) or has a node x off it (then some edge on the path x -> u_i -> v
 * crosses devices).  So, minimising over the set L of wholly local
 * branches:
 *   start(v) >= max( min_{x in X_L} est(x) + sum_{i in L} work(X_i),
 *                    max_{i not in L} R_i )
 *   R_i = min_{x in X_i} (est(x) + shortest path x..u_i) + min transfer of
 *         an edge inside X_i or from u_i to v (over any pair of devices)
 * and always start(v) >= max_i est(u_i) + t(u_i).  On one device there is no
 * remote option.  This is what the plain critical path misses on branchy
 * graphs: an Inception tower runs either on v's device, serially with its
 * siblings, or elsewhere at the price of a transfer.
 */
#define LB_MAX_PRED 14

static double lb_comm_dir(const struct mp_graph *g, const struct mp_cluster *c,
			  int fwd, const double *xmin)
{
	const int *poff = fwd ? g->in_off : g->out_off;
	const int *pe = fwd ? g->in_e : g->out_e;
	double smax = mp_max_speed(c), best = 0;
	double *est = mp_calloc(g->n, sizeof(double));
	double *sp = mp_calloc(g->n, sizeof(double));
	int *mark = mp_calloc(g->n, sizeof(int));
	int *stack = mp_calloc(g->n + 1, sizeof(int));
	int *seen = mp_calloc(g->n, sizeof(int));
	int *visj = mp_calloc(g->n, sizeof(int));
	int stamp = 0;

#define T(v) ((fwd ? g->nodes[v].fwd_ms : g->nodes[v].bwd_ms) / smax)
#define PRED(k) (fwd ? g->edges[pe[k]].src : g->edges[pe[k]].dst)
	for (int i = 0; i < g->n; i++) {
		int v = g->topo[fwd ? i : g->n - 1 - i];
		int pred[LB_MAX_PRED], np = 0, many = 0;
		double basic = 0, refined = DBL_MAX;
		double W[LB_MAX_PRED], R[LB_MAX_PRED], E[LB_MAX_PRED];
		double C[LB_MAX_PRED];
		int pos = fwd ? i : g->n - 1 - i;

		for (int k = poff[v]; k < poff[v + 1]; k++) {
			int u = PRED(k), dup = 0;

			if (est[u] + T(u) > basic)
				basic = est[u] + T(u);
			for (int j = 0; j < np; j++)
				dup |= pred[j] == u;
			if (dup)
				continue;
			if (np == LB_MAX_PRED)
				many = 1;
			else
				pred[np++] = u;
		}
		est[v] = basic;
		if (np < 2 || many || g->n > 20000)
			continue;
		/* mark[x] = 1 + index of the only pred x is an ancestor of, or -1 */
		stamp++;
		for (int j = 0; j < np; j++) {
			int id = stamp * (LB_MAX_PRED + 1) + j, top = 0;

			stack[top++] = pred[j];
			visj[pred[j]] = id;
			while (top) {
				int x = stack[--top];

				if (seen[x] != stamp) {
					seen[x] = stamp;
					mark[x] = j + 1;
				} else if (mark[x] != j + 1) {
					mark[x] = -1;
				}
				for (int k = poff[x]; k < poff[x + 1]; k++) {
					int y = PRED(k);

					if (visj[y] != id) {
						visj[y] = id;
						stack[top++] = y;
					}
				}
			}
		}
		for (int j = 0; j < np; j++) {
			W[j] = 0;
			E[j] = DBL_MAX;
			R[j] = DBL_MAX;
			C[j] = DBL_MAX;
		}
		/*
		 * Shortest paths to u_j inside X_j: visit the ancestors in
		 * reverse order of this direction, so that a node's successors
		 * towards v come first.
		 */
		for (int ii = fwd ? pos - 1 : pos + 1; fwd ? ii >= 0 : ii < g->n;
		     fwd ? ii-- : ii++) {
			int x = g->topo[ii], j;
			const int *soff = fwd ? g->out_off : g->in_off;
			const int *se = fwd ? g->out_e : g->in_e;
			double sh = DBL_MAX;

			if (seen[x] != stamp || mark[x] <= 0)
				continue;
			j = mark[x] - 1;
			W[j] += T(x);
			if (est[x] < E[j])
				E[j] = est[x];
			for (int k = soff[x]; k < soff[x + 1]; k++) {
				int y = fwd ? g->edges[se[k]].dst :
					      g->edges[se[k]].src;

				if (y == v && x == pred[j]) {
					if (xmin[se[k]] < C[j])
						C[j] = xmin[se[k]];
					continue;
				}
				if (seen[y] != stamp || mark[y] != j + 1)
					continue;
				if (xmin[se[k]] < C[j])
					C[j] = xmin[se[k]];
				if (sp[y] < sh)
					sh = sp[y];
			}
			sp[x] = (x == pred[j] ? 0 : sh) + T(x);
			if (sp[x] < DBL_MAX / 2 && est[x] + sp[x] < R[j])
				R[j] = est[x] + sp[x];
		}
		/* R_j: earliest path end plus the cheapest edge of the branch */
		for (int j = 0; j < np; j++)
			R[j] = c->d > 1 && C[j] < DBL_MAX && R[j] < DBL_MAX ?
			       R[j] + C[j] : DBL_MAX;
		for (int L = 0; L < 1 << np; L++) {
			double loc = 0, first = DBL_MAX, rem = 0, t;

			for (int j = 0; j < np; j++) {
				if (L >> j & 1) {
					loc += W[j];
					if (E[j] < first)
						first = E[j];
				} else if (R[j] > rem) {
					rem = R[j];
				}
			}
			t = L ? first + loc : 0;
			if (rem > t)
				t = rem;
			if (t < refined)
				refined = t;
		}
		if (refined < DBL_MAX && refined > est[v])
			est[v] = refined;
	}
	for (int v = 0; v < g->n; v++)
		if (est[v] + T(v) > best)
			best = est[v] + T(v);
#undef T
#undef PRED
	free(est);
	free(sp);
	free(mark);
	free(stack);
	free(seen);
	free(visj);
	return best;
}

void mp_lower_bound(const struct mp_graph *g, const struct mp_cluster *c,
		    struct mp_bound *b)
{
	double *pf = mp_calloc(g->n, sizeof(double));
	double *pb = mp_calloc(g->n, sizeof(double));
	double mf = 0, mb = 0, work = 0, ssum = 0, smax = mp_max_speed(c);

	for (int i = 0; i < g->n; i++) {
		int v = g->topo[i];
		double a = 0, bb = 0;

		for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
			int u = g->edges[g->in_e[k]].src;

			if (pf[u] > a)
				a = pf[u];
			if (pb[u] > bb)
				bb = pb[u];
		}
		pf[v] = a + g->nodes[v].fwd_ms;
		pb[v] = bb + g->nodes[v].bwd_ms;
		if (pf[v] > mf)
			mf = pf[v];
		if (pb[v] > mb)
			mb = pb[v];
		work += g->nodes[v].fwd_ms + g->nodes[v].bwd_ms;
	}
	for (int d = 0; d < c->d; d++)
		ssum += c->dev[d].speed;
	memset(b, 0, sizeof(*b));
	/* all forwards end before the loss, all backwards start after it */
	b->cp_ms = (mf + mb) / smax;
	b->work_ms = work / ssum;
	if (g->is_chain && g->ne) {
		/*
		 * A chain is serial: every cut adds two transfers (activation
		 * and its gradient) to the critical path.  Cuts needed: one
		 * less than the fewest devices whose memory can hold it all.
		 */
		double *caps = mp_calloc(c->d, sizeof(double));
		double need = mp_graph_mem(g), have = 0, minx = DBL_MAX;
		int k = 0;

		for (int d = 0; d < c->d; d++)
			caps[d] = c->dev[d].memory_bytes;
		qsort(caps, c->d, sizeof(double), cmp_desc);
		while (k < c->d && have < need)
			have += caps[k++];
		for (int i = 0; i < g->ne; i++)
			for (int a = 0; a < c->d; a++)
				for (int z = 0; z < c->d; z++) {
					double x = a == z ? DBL_MAX :
						mp_xfer_ms(c, a, z,
							   g->edges[i].bytes);

					if (x < minx)
						minx = x;
				}
		if (k > 1 && minx < DBL_MAX)
			b->mem_ms = 2.0 * (k - 1) * minx;
		free(caps);
	}
	{
		double *xmin = mp_calloc(g->ne + 1, sizeof(double));

		for (int i = 0; i < g->ne; i++) {
			xmin[i] = DBL_MAX;
			for (int a = 0; a < c->d; a++)
				for (int z = 0; z < c->d; z++) {
					double x = a == z ? DBL_MAX :
						mp_xfer_ms(c, a, z,
							   g->edges[i].bytes);

					if (x < xmin[i])
						xmin[i] = x;
				}
		}
		/* forward ends before the loss, backward starts after it */
		b->comm_ms = lb_comm_dir(g, c, 1, xmin) +
			     lb_comm_dir(g, c, 0, xmin);
		free(xmin);
	}
	b->lb_ms = b->cp_ms + b->mem_ms;
	if (b->work_ms > b->lb_ms)
		b->lb_ms = b->work_ms;
	if (b->comm_ms > b->lb_ms)
		b->lb_ms = b->comm_ms;
	free(pf);
	free(pb);
}
