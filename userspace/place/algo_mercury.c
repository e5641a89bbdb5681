// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Mercury's placer: coarsen, list-schedule, refine.
 *
 * 1. Coarsening (rounds of matching on the quotient graph).  An edge U -> V
 *    is contracted when it cannot cost parallelism or when communication
 *    dominates: U's only successor is V and V's only predecessor is U (a
 *    chain link), or U has one successor / V one predecessor and sending
 *    the activation there and its gradient back costs more than the
 *    smaller side's compute.  Contracting an edge whose tail has one
 *    successor (or head one predecessor) can never close a cycle, and
 *    matching (each group merged once per round, heaviest edges first)
 *    keeps that true for all merges of a round.  Groups stay under a
 *    quarter of the smallest device memory and 1/(2D) of the total work so
 *    the later stages keep room to balance.
 * 2. List scheduling by critical path (HEFT's upward rank with mean
 *    compute and communication, forward plus backward), each group going to
 *    the device where it finishes earliest, plus the cost of sending the
 *    gradients of remote inputs back in backward; memory is checked with
 *    the same accounting as every other algorithm.
 * 3. Refinement: moves of one group to a device of one of its neighbours
 *    (or the emptiest device), each measured with the full engine, kept
 *    when the step time drops; a fixed evaluation budget keeps it fast.
 * Candidates: the refined list schedule, the exact chain programme when
 * the coarse graph is a chain, and one device when the model fits; the
 * best by the engine on the original graph wins.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"

static int uf_find(int *p, int x)
{
	while (p[x] != x) {
		p[x] = p[p[x]];
		x = p[x];
	}
	return x;
}

struct qedge {
	int a, b;
	double bytes;
};

static int cmp_qedge(const void *x, const void *y)
{
	const struct qedge *a = x, *b = y;

	if (a->a != b->a)
		return a->a - b->a;
	return a->b - b->b;
}

static int cmp_qedge_heavy(const void *x, const void *y)
{
	const struct qedge *a = x, *b = y;

	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return cmp_qedge(x, y);
}

/* Mean transfer time over all device pairs is linear in the bytes. */
struct mxfer {
	double lat_ms, ms_per_byte;
};

static struct mxfer mean_xfer(const struct mp_cluster *c)
{
	struct mxfer m = { 0, 0 };
	int k = 0;

	for (int a = 0; a < c->d; a++)
		for (int b = 0; b < c->d; b++)
			if (a != b) {
				m.lat_ms += 1e3 * c->lat[a * c->d + b];
				m.ms_per_byte += 1e3 / c->bw[a * c->d + b];
				k++;
			}
	if (k) {
		m.lat_ms /= k;
		m.ms_per_byte /= k;
	}
	return m;
}

static double mean_xfer_ms(const struct mxfer *m, double bytes)
{
	return m->lat_ms + bytes * m->ms_per_byte;
}

static int coarsen(const struct mp_graph *g, const struct mp_cluster *c,
		   double cfac, struct mp_graph *cg, int *map)
{
	int n = g->n, *par = mp_calloc(n, sizeof(int));
	double *work = mp_calloc(n, sizeof(double));
	double *mem = mp_calloc(n, sizeof(double));
	struct qedge *q = mp_calloc(g->ne + 1, sizeof(*q));
	int *outd = mp_calloc(n, sizeof(int)), *ind = mp_calloc(n, sizeof(int));
	int *matched = mp_calloc(n, sizeof(int));
	double total = 0, memcap = DBL_MAX, workcap, ssum = 0;
	struct mxfer mx = mean_xfer(c);
	struct mp_err err;
	int nc, ret;

	for (int d = 0; d < c->d; d++) {
		if (c->dev[d].memory_bytes < memcap)
			memcap = c->dev[d].memory_bytes;
		ssum += c->dev[d].speed;
	}
	memcap /= 4;
	for (int v = 0; v < n; v++) {
		par[v] = v;
		work[v] = (g->nodes[v].fwd_ms + g->nodes[v].bwd_ms) /
			  (ssum / c->d);
		mem[v] = mp_node_mem(g, v);
		total += work[v];
	}
	workcap = total / (2.0 * c->d);
	for (int round = 0, groups = n; round < 40; round++) {
		int nq = 0, merged = 0;

		for (int i = 0; i < g->ne; i++) {
			int a = uf_find(par, g->edges[i].src);
			int b = uf_find(par, g->edges[i].dst);

			if (a == b)
				continue;
			q[nq].a = a;
			q[nq].b = b;
			q[nq++].bytes = g->edges[i].bytes;
		}
		qsort(q, nq, sizeof(*q), cmp_qedge);
		{
			int w = 0;

			for (int i = 0; i < nq; i++) {
				if (w && q[w - 1].a == q[i].a &&
				    q[w - 1].b == q[i].b) {
					q[w - 1].bytes += q[i].bytes;
					continue;
				}
				q[w++] = q[i];
			}
			nq = w;
		}
		memset(outd, 0, n * sizeof(int));
		memset(ind, 0, n * sizeof(int));
		memset(matched, 0, n * sizeof(int));
		for (int i = 0; i < nq; i++) {
			outd[q[i].a]++;
			ind[q[i].b]++;
		}
		qsort(q, nq, sizeof(*q), cmp_qedge_heavy);
		for (int i = 0; i < nq; i++) {
			int a = q[i].a, b = q[i].b, ok;
			double comm = 2 * mean_xfer_ms(&mx, q[i].bytes);

			if (matched[a] || matched[b])
				continue;
			if (mem[a] + mem[b] > memcap ||
			    work[a] + work[b] > workcap)
				continue;
			ok = (outd[a] == 1 && ind[b] == 1) ||
			     (outd[a] == 1 && comm >= cfac * work[a]) ||
			     (ind[b] == 1 && comm >= cfac * work[b]);
			if (!ok)
				continue;
			matched[a] = matched[b] = 1;
			par[b] = a;
			work[a] += work[b];
			mem[a] += mem[b];
			merged++;
		}
		/* late rounds that merge little are not worth a sort */
		groups -= merged;
		if (merged <= groups / 100)
			break;
	}
	/* number the groups by first appearance in node order */
	for (int v = 0; v < n; v++)
		map[v] = -1;
	nc = 0;
	{
		int *id = mp_calloc(n, sizeof(int));

		for (int v = 0; v < n; v++)
			id[v] = -1;
		for (int v = 0; v < n; v++) {
			int r = uf_find(par, v);

			if (id[r] < 0)
				id[r] = nc++;
			map[v] = id[r];
		}
		free(id);
	}
	memset(cg, 0, sizeof(*cg));
	cg->model = mp_strdup(g->model);
	cg->format = mp_strdup(g->format);
	cg->n = nc;
	cg->nodes = mp_calloc(nc, sizeof(struct mp_node));
	for (int v = 0; v < nc; v++)
		cg->nodes[v].order = -1;
	for (int v = 0; v < n; v++) {
		struct mp_node *cn = &cg->nodes[map[v]];

		if (!cn->name) {
			cn->name = mp_strdup(g->nodes[v].name);
			cn->order = g->nodes[v].order;
		}
		cn->fwd_ms += g->nodes[v].fwd_ms;
		cn->bwd_ms += g->nodes[v].bwd_ms;
		cn->param_bytes += g->nodes[v].param_bytes;
		cn->act_bytes += g->nodes[v].act_bytes;
	}
	cg->nm = g->nm;
	cg->members = mp_calloc(g->nm, sizeof(struct mp_member));
	for (int m = 0; m < g->nm; m++) {
		cg->members[m] = g->members[m];
		cg->members[m].name = NULL;
		cg->members[m].node = map[g->members[m].node];
	}
	cg->edges = mp_calloc(g->ne + 1, sizeof(struct mp_edge));
	for (int i = 0; i < g->ne; i++) {
		struct mp_edge e = g->edges[i];

		e.src = map[e.src];
		e.dst = map[e.dst];
		if (e.src != e.dst)
			cg->edges[cg->ne++] = e;
	}
	ret = mp_graph_finish(cg, &err);
	free(par);
	free(work);
	free(mem);
	free(q);
	free(outd);
	free(ind);
	free(matched);
	return ret;
}

int mp_coarsen(const struct mp_graph *g, const struct mp_cluster *c,
	       struct mp_graph *cg, int *map)
{
	return coarsen(g, c, 4.0, cg, map);
}

/* ---- list scheduling by critical path ---------------------------------- */

/* Ready nodes: a max-heap on rank, ties to the lower node index. */
static int rheap_above(const double *rank, int a, int b)
{
	return rank[a] > rank[b] || (rank[a] == rank[b] && a < b);
}

static void rheap_push(int *h, int *n, const double *rank, int v)
{
	int i = (*n)++;

	h[i] = v;
	while (i && rheap_above(rank, h[i], h[(i - 1) / 2])) {
		int t = h[i];

		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static void rheap_pop(int *h, int *n, const double *rank)
{
	int i = 0;

	h[0] = h[--(*n)];
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i, t;

		if (l < *n && rheap_above(rank, h[l], h[m]))
			m = l;
		if (r < *n && rheap_above(rank, h[r], h[m]))
			m = r;
		if (m == i)
			break;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* Free memory kept for the unplaced nodes, as a multiple of their size. */
#define MP_RESERVE 1.1

static int list_schedule(const struct mp_graph *g, const struct mp_cluster *c,
			 double mirror_w, int *place, struct mp_err *err)
{
	int n = g->n, nready = 0, ret = 0, relaxed = 0;
	double *rank = mp_calloc(n, sizeof(double));
	double *fin = mp_calloc(n, sizeof(double));
	double *avail = mp_calloc(c->d, sizeof(double));
	int *deg = mp_calloc(n, sizeof(int));
	int *ready = mp_calloc(n, sizeof(int));
	double ssum = 0, left = mp_graph_mem(g), cap = 0;
	struct mxfer mx = mean_xfer(c);
	struct mp_mstate m;

	for (int d = 0; d < c->d; d++) {
		ssum += c->dev[d].speed;
		cap += c->dev[d].memory_bytes;
	}
	for (int i = n - 1; i >= 0; i--) {
		int v = g->topo[i];
		double best = 0;

		for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++) {
			const struct mp_edge *e = &g->edges[g->out_e[k]];
			double r = 2 * mean_xfer_ms(&mx, e->bytes) + rank[e->dst];

			if (r > best)
				best = r;
		}
		rank[v] = (g->nodes[v].fwd_ms + g->nodes[v].bwd_ms) /
			  (ssum / c->d) + best;
	}
	for (int v = 0; v < n; v++) {
		place[v] = -1;
		deg[v] = g->in_off[v + 1] - g->in_off[v];
		if (!deg[v])
			rheap_push(ready, &nready, rank, v);
	}
	mp_mstate_init(&m, g, c, place);
	for (int step = 0; step < n; step++) {
		int v = ready[0], bd = -1;
		double best = DBL_MAX, bfin = 0;

		for (int d = 0; d < c->d; d++) {
			double est = avail[d], mirror = 0, f, score;

			double total_add = 0, used = 0;

			if (!mp_mstate_fits(&m, v, d))
				continue;
			/*
			 * Keep the rest placeable: after this step the free
			 * memory on all devices must still hold the unplaced
			 * nodes, with a margin for received tensors.
			 */
			for (int k = 0; k < c->d; k++) {
				total_add += m.add[k];
				used += m.used[k];
			}
			if (!relaxed && cap - used - total_add <
			    (left - mp_node_mem(g, v)) * MP_RESERVE)
				continue;
			for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
				const struct mp_edge *e = &g->edges[g->in_e[k]];
				double x = mp_xfer_ms(c, place[e->src], d, e->bytes);

				if (fin[e->src] + x > est)
					est = fin[e->src] + x;
				mirror += x;
			}
			f = est + g->nodes[v].fwd_ms / c->dev[d].speed;
			score = f + mirror_w * mirror;
			if (score < best - 1e-12) {
				best = score;
				bd = d;
				bfin = f;
			}
		}
		if (bd < 0 && !relaxed) {
			/* nothing passes the reserve: plain fit, once */
			relaxed = 1;
			step--;
			continue;
		}
		relaxed = 0;
		if (bd < 0) {
			ret = mp_set_err(err, -ENOSPC,
					 "mercury: no device has memory left for %s",
					 g->nodes[v].name);
			break;
		}
		place[v] = bd;
		mp_mstate_commit(&m, v, bd);
		left -= mp_node_mem(g, v);
		fin[v] = bfin;
		avail[bd] = bfin;
		rheap_pop(ready, &nready, rank);
		for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++) {
			int w = g->edges[g->out_e[k]].dst;

			if (--deg[w] == 0)
				rheap_push(ready, &nready, rank, w);
		}
	}
	mp_mstate_free(&m);
	free(rank);
	free(fin);
	free(avail);
	free(deg);
	free(ready);
	return ret;
}

/* ---- refinement -------------------------------------------------------- */

static void refine(const struct mp_graph *g, const struct mp_cluster *c,
		   int *place, long budget)
{
	double cur, *mem;
	int *cand;

	if (budget <= 0)
		return;
	cur = mp_eval(g, c, place);
	mem = mp_calloc(c->d, sizeof(double));
	cand = mp_calloc(c->d, sizeof(int));
	long evals = 0;

	for (int pass = 0; pass < 8 && evals < budget; pass++) {
		int improved = 0;

		for (int i = 0; i < g->n && evals < budget; i++) {
			int v = g->topo[i], old = place[v], emptiest = 0;

			memset(cand, 0, c->d * sizeof(int));
			for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++)
				cand[place[g->edges[g->in_e[k]].src]] = 1;
			for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++)
				cand[place[g->edges[g->out_e[k]].dst]] = 1;
			mp_mem_static(g, c, place, mem);
			for (int d = 1; d < c->d; d++)
				if (mem[d] / c->dev[d].memory_bytes <
				    mem[emptiest] / c->dev[emptiest].memory_bytes)
					emptiest = d;
			cand[emptiest] = 1;
			for (int d = 0; d < c->d && evals < budget; d++) {
				double t;

				if (!cand[d] || d == old)
					continue;
				place[v] = d;
				if (mp_mem_ok(g, c, place, NULL)) {
					place[v] = old;
					continue;
				}
				t = mp_eval(g, c, place);
				evals++;
				if (t >= 0 && t < cur * (1 - 1e-9)) {
					cur = t;
					old = d;
					improved = 1;
				} else {
					place[v] = old;
				}
			}
			place[v] = old;
		}
		if (!improved)
			break;
	}
	free(mem);
	free(cand);
}

/* Expand a coarse placement, measure it, keep it if it is the best yet. */
static void consider(const struct mp_graph *g, const struct mp_cluster *c,
		     const int *map, const int *cp, int *tmp, int *place,
		     double *best)
{
	double t;

	for (int v = 0; v < g->n; v++)
		tmp[v] = cp[map[v]];
	if (mp_mem_ok(g, c, tmp, NULL))
		return;
	t = mp_eval(g, c, tmp);
	if (t >= 0 && t < *best) {
		*best = t;
		memcpy(place, tmp, g->n * sizeof(int));
	}
}

/* Engine evaluations allowed for refinement, in units evaluated. */
#define MP_REFINE_UNITS 4e5
/* The programme is O(n^2 D): beyond this it is skipped. */
#define MP_DP_MAX_NODES 3000
/* Above this many nodes only the cheapest path is taken (see below). */
#define MP_LARGE 20000

int mp_place_mercury(const struct mp_graph *g, const struct mp_cluster *c,
		     int *place, struct mp_err *err)
{
	static const double cfacs[2] = { 4.0, 8.0 };
	static const double mirrors[2] = { 1.0, 0.0 };
	struct mp_graph cg[2];
	int *map[2], *cp[2], *tmp = mp_calloc(g->n, sizeof(int));
	double best = DBL_MAX, lbest[2] = { DBL_MAX, DBL_MAX };
	struct mp_err e1 = { "" };
	int ret = 0, bk = -1;

	/*
	 * Two coarsenings (communication-dominant merges at 4x and 8x the
	 * compute) times two device choices (with and without the backward
	 * mirror cost): list scheduling is cheap, so run all four and refine
	 * only the best.
	 */
	/* very large graphs: one coarsening, one variant, no refinement */
	int nk = g->n > MP_LARGE ? 1 : 2, nmi = nk;
	long rbudget = g->n > MP_LARGE ? 0 : (long)(MP_REFINE_UNITS / 2);

	for (int k = 0; k < 2; k++) {
		map[k] = mp_calloc(k < nk ? g->n : 1, sizeof(int));
		cp[k] = NULL;
		memset(&cg[k], 0, sizeof(cg[k]));
		if (k >= nk)
			continue;
		ret = coarsen(g, c, cfacs[k], &cg[k], map[k]);
		if (ret) {
			for (int j = 0; j < k; j++) {
				mp_graph_free(&cg[j]);
				free(cp[j]);
			}
			for (int j = 0; j <= k; j++)
				free(map[j]);
			free(tmp);
			return mp_set_err(err, ret, "mercury: coarsening failed");
		}
		cp[k] = mp_calloc(cg[k].n, sizeof(int));
		for (int mi = 0; mi < nmi; mi++) {
			int *p = mp_calloc(cg[k].n, sizeof(int));
			double t = DBL_MAX;

			if (!list_schedule(&cg[k], c, mirrors[mi], p, &e1))
				consider(g, c, map[k], p, tmp, place, &t);
			if (t < lbest[k]) {
				lbest[k] = t;
				memcpy(cp[k], p, cg[k].n * sizeof(int));
			}
			free(p);
		}
		if (lbest[k] < DBL_MAX && (bk < 0 || lbest[k] < lbest[bk]))
			bk = k;
	}
	/* candidate 1: the best list schedule, refined */
	if (bk >= 0) {
		long units = 2L * cg[bk].n + 2L * cg[bk].ne + 1;

		refine(&cg[bk], c, cp[bk], rbudget / units);
		consider(g, c, map[bk], cp[bk], tmp, place, &best);
	}
	/*
	 * candidate 2: the contiguous programme on the topological order
	 * (exact for chains), on the full graph when it is small enough for
	 * the quadratic programme, else on the groups; refined on the groups
	 * when they are not a chain
	 */
	if (g->n <= MP_DP_MAX_NODES) {
		int *p = mp_calloc(g->n, sizeof(int));

		if (!mp_place_dp(g, c, p, NULL)) {
			double t;

			if (!g->is_chain)
				refine(g, c, p, rbudget /
				       (2L * g->n + 2L * g->ne + 1));
			t = mp_eval(g, c, p);

			if (t >= 0 && t < best) {
				best = t;
				memcpy(place, p, g->n * sizeof(int));
			}
		}
		free(p);
	}
	if (cg[0].n <= MP_DP_MAX_NODES && !mp_place_dp(&cg[0], c, cp[0], NULL)) {
		long units = 2L * cg[0].n + 2L * cg[0].ne + 1;

		if (!cg[0].is_chain)
			refine(&cg[0], c, cp[0], rbudget / units);
		consider(g, c, map[0], cp[0], tmp, place, &best);
	}
	/* candidate 3: everything on the fastest device that holds it */
	if (!mp_place_single(g, c, tmp, NULL)) {
		double t = mp_eval(g, c, tmp);

		if (t >= 0 && t < best) {
			best = t;
			memcpy(place, tmp, g->n * sizeof(int));
		}
	}
	for (int k = 0; k < 2; k++) {
		mp_graph_free(&cg[k]);
		free(map[k]);
		free(cp[k]);
	}
	free(tmp);
	if (best == DBL_MAX)
		return mp_set_err(err, -ENOSPC, "%s",
				  e1.msg[0] ? e1.msg :
				  "mercury: no placement fits the devices' memory");
	return 0;
}

/* ---- dispatch ---------------------------------------------------------- */

static const char *const algo_names[MP_ALGO_COUNT] = {
	[MP_ALGO_MERCURY] = "mercury",
	[MP_ALGO_TOPO] = "m-topo",
	[MP_ALGO_ETF] = "m-etf",
	[MP_ALGO_SCT] = "m-sct",
	[MP_ALGO_DP] = "dp",
	[MP_ALGO_SINGLE] = "single",
	[MP_ALGO_EVEN] = "even",
};

const char *mp_algo_name(int algo)
{
	return algo >= 0 && algo < MP_ALGO_COUNT ? algo_names[algo] : "?";
}

int mp_algo_parse(const char *name)
{
	for (int i = 0; i < MP_ALGO_COUNT; i++)
		if (!strcmp(name, algo_names[i]))
			return i;
	return -EINVAL;
}

int mp_place(const struct mp_graph *g, const struct mp_cluster *c, int algo,
	     int *place, struct mp_err *err)
{
	double need = mp_graph_mem(g), have = 0;

	for (int d = 0; d < c->d; d++)
		have += c->dev[d].memory_bytes;
	if (need > have)
		return mp_set_err(err, -ENOSPC,
				  "the model needs %.0f bytes, the devices have %.0f in total",
				  need, have);
	for (int v = 0; v < g->n; v++) {
		double big = 0;

		for (int d = 0; d < c->d; d++)
			if (c->dev[d].memory_bytes > big)
				big = c->dev[d].memory_bytes;
		if (mp_node_mem(g, v) > big)
			return mp_set_err(err, -ENOSPC,
					  "node %s needs %.0f bytes, more than any device has",
					  g->nodes[v].name, mp_node_mem(g, v));
	}
	switch (algo) {
	case MP_ALGO_MERCURY:
		return mp_place_mercury(g, c, place, err);
	case MP_ALGO_TOPO:
		return mp_place_topo(g, c, place, err);
	case MP_ALGO_ETF:
		return mp_place_etf(g, c, 0, place, err);
	case MP_ALGO_SCT:
		return mp_place_etf(g, c, 1, place, err);
	case MP_ALGO_DP:
		return mp_place_dp(g, c, place, err);
	case MP_ALGO_SINGLE:
		return mp_place_single(g, c, place, err);
	case MP_ALGO_EVEN:
		return mp_place_even(g, c, place, err);
	}
	return mp_set_err(err, -EINVAL, "unknown algorithm %d", algo);
}
