// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Dynamic programme over contiguous stretches of the topological order
 * (PipeDream's partitioner, with the step-time objective of this tool).
 *
 * For a chain the step time of a placement that gives each device one
 * contiguous stretch is exactly
 *     sum of compute / speed + sum over cuts of 2 x transfer time
 * (the activation forward, its gradient backward, never overlapping), so
 * the programme below is the optimum over such placements.  On other DAGs
 * it runs on the topological order with the bytes crossing each cut, which
 * is a heuristic; the engine then measures the real step time.
 *
 * Identical devices and links: dp[m][k] = best cost of the first k nodes on
 * m devices, O(n^2 D).  Otherwise the state also holds the set of devices
 * used and the last one, O(n^2 2^D D^2), refused when too large.
 */
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"

struct dpin {
	int n;
	double *w;	/* prefix work (ms at speed 1) */
	double *mem;	/* prefix node memory */
	double *cut;	/* bytes crossing the cut before position k */
};

static void dp_prepare(const struct mp_graph *g, struct dpin *in)
{
	int n = g->n;
	int *pos = mp_calloc(n, sizeof(int));
	int *last = mp_calloc(g->nm, sizeof(int));
	int *first = mp_calloc(g->nm, sizeof(int));
	double *diff = mp_calloc(n + 2, sizeof(double));
	double *mb = mp_calloc(g->nm, sizeof(double));

	in->n = n;
	in->w = mp_calloc(n + 1, sizeof(double));
	in->mem = mp_calloc(n + 1, sizeof(double));
	in->cut = mp_calloc(n + 1, sizeof(double));
	for (int i = 0; i < n; i++) {
		int v = g->topo[i];

		pos[v] = i;
		in->w[i + 1] = in->w[i] + g->nodes[v].fwd_ms + g->nodes[v].bwd_ms;
		in->mem[i + 1] = in->mem[i] + mp_node_mem(g, v);
	}
	for (int m = 0; m < g->nm; m++)
		last[m] = -1;
	for (int i = 0; i < g->ne; i++) {
		const struct mp_edge *e = &g->edges[i];

		first[e->src_member] = pos[e->src];
		if (pos[e->dst] > last[e->src_member])
			last[e->src_member] = pos[e->dst];
		mb[e->src_member] = e->bytes;
	}
	/* a member's tensor crosses the cuts first+1 .. last */
	for (int m = 0; m < g->nm; m++)
		if (last[m] > first[m]) {
			diff[first[m] + 1] += mb[m];
			diff[last[m] + 1] -= mb[m];
		}
	for (int k = 1; k <= n; k++)
		in->cut[k] = in->cut[k - 1] + diff[k];
	in->cut[0] = 0;
	in->cut[n] = 0;
	free(pos);
	free(last);
	free(first);
	free(diff);
	free(mb);
}

static void dp_release(struct dpin *in)
{
	free(in->w);
	free(in->mem);
	free(in->cut);
}

static int seg_fits(const struct dpin *in, int j, int k, double cap)
{
	return in->mem[k] - in->mem[j] + in->cut[j] + in->cut[k] <= cap;
}

static int dp_uniform(const struct mp_graph *g, const struct mp_cluster *c,
		      const struct dpin *in, int *place, struct mp_err *err)
{
	int n = in->n, D = c->d, bm = -1, ret = 0;
	double *dp = mp_calloc((size_t)(D + 1) * (n + 1), sizeof(double));
	int *par = mp_calloc((size_t)(D + 1) * (n + 1), sizeof(int));
	double cap = c->dev[0].memory_bytes, sp = c->dev[0].speed, best = DBL_MAX;

#define DP(m, k) dp[(size_t)(m) * (n + 1) + (k)]
#define PAR(m, k) par[(size_t)(m) * (n + 1) + (k)]
	for (size_t i = 0; i < (size_t)(D + 1) * (n + 1); i++)
		dp[i] = DBL_MAX;
	DP(0, 0) = 0;
	for (int m = 1; m <= D; m++)
		for (int k = 1; k <= n; k++)
			for (int j = k - 1; j >= 0; j--) {
				double cost;

				if (in->mem[k] - in->mem[j] > cap)
					break;
				if (DP(m - 1, j) == DBL_MAX ||
				    !seg_fits(in, j, k, cap))
					continue;
				cost = DP(m - 1, j) + (in->w[k] - in->w[j]) / sp +
				       (j ? 2 * mp_xfer_ms(c, 0, 1, in->cut[j]) : 0);
				if (cost < DP(m, k)) {
					DP(m, k) = cost;
					PAR(m, k) = j;
				}
			}
	for (int m = 1; m <= D; m++)
		if (DP(m, n) < best) {
			best = DP(m, n);
			bm = m;
		}
	if (bm < 0) {
		ret = mp_set_err(err, -ENOSPC,
				 "dp: no split into contiguous stretches fits the devices' memory");
	} else {
		for (int m = bm, k = n; m > 0; m--) {
			int j = PAR(m, k);

			for (int i = j; i < k; i++)
				place[g->topo[i]] = m - 1;
			k = j;
		}
	}
#undef DP
#undef PAR
	free(dp);
	free(par);
	return ret;
}

static int dp_general(const struct mp_graph *g, const struct mp_cluster *c,
		      const struct dpin *in, int *place, struct mp_err *err)
{
	int n = in->n, D = c->d, ret = 0, bs = -1;
	size_t S = (size_t)1 << D, nst = (size_t)(n + 1) * S * D;
	double work = (double)n * n / 2 * S * D * D, best = DBL_MAX;
	double *dp;
	int *par;

	if (work > 4e8)
		return mp_set_err(err, -E2BIG,
				  "dp: %d nodes on %d different devices is too large for the exact programme",
				  n, D);
	dp = mp_calloc(nst, sizeof(double));
	par = mp_calloc(nst, sizeof(int));
#define ST(k, s, l) (((size_t)(k) * S + (s)) * D + (l))
	for (size_t i = 0; i < nst; i++)
		dp[i] = DBL_MAX;
	/* first stretch: from position 0 on any device */
	for (int d = 0; d < D; d++)
		for (int k = 1; k <= n; k++) {
			if (!seg_fits(in, 0, k, c->dev[d].memory_bytes))
				continue;
			dp[ST(k, 1u << d, d)] = in->w[k] / c->dev[d].speed;
			par[ST(k, 1u << d, d)] = -1;
		}
	for (int j = 1; j < n; j++)
		for (size_t s = 1; s < S; s++)
			for (int l = 0; l < D; l++) {
				double base = dp[ST(j, s, l)];

				if (base == DBL_MAX)
					continue;
				for (int d = 0; d < D; d++) {
					double x;

					if (s >> d & 1)
						continue;
					x = 2 * mp_xfer_ms(c, l, d, in->cut[j]);
					for (int k = j + 1; k <= n; k++) {
						size_t t = ST(k, s | 1u << d, d);
						double cost;

						if (in->mem[k] - in->mem[j] >
						    c->dev[d].memory_bytes)
							break;
						if (!seg_fits(in, j, k,
							      c->dev[d].memory_bytes))
							continue;
						cost = base + x + (in->w[k] - in->w[j]) /
							c->dev[d].speed;
						if (cost < dp[t]) {
							dp[t] = cost;
							par[t] = (int)(j * D + l);
						}
					}
				}
			}
	for (size_t s = 1; s < S; s++)
		for (int l = 0; l < D; l++)
			if (dp[ST(n, s, l)] < best) {
				best = dp[ST(n, s, l)];
				bs = (int)(s * D + l);
			}
	if (bs < 0) {
		ret = mp_set_err(err, -ENOSPC,
				 "dp: no split into contiguous stretches fits the devices' memory");
	} else {
		size_t s = bs / D;
		int l = bs % D, k = n;

		while (k > 0) {
			int p = par[ST(k, s, l)];
			int j = p < 0 ? 0 : p / D;

			for (int i = j; i < k; i++)
				place[g->topo[i]] = l;
			s &= ~((size_t)1 << l);
			k = j;
			if (p >= 0)
				l = p % D;
		}
	}
#undef ST
	free(dp);
	free(par);
	return ret;
}

int mp_place_dp(const struct mp_graph *g, const struct mp_cluster *c,
		int *place, struct mp_err *err)
{
	struct dpin in;
	int ret;

	dp_prepare(g, &in);
	if (c->uniform || c->d == 1)
		ret = dp_uniform(g, c, &in, place, err);
	else
		ret = dp_general(g, c, &in, place, err);
	dp_release(&in);
	if (!ret) {
		struct mp_err e2;

		if (mp_mem_ok(g, c, place, &e2))
			ret = mp_set_err(err, -ENOSPC, "dp: %s", e2.msg);
	}
	return ret;
}
