// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The baselines: Baechi's m-TOPO, m-ETF and m-SCT, a single device and an
 * even split.  All of them decide the forward placement; every backward
 * task follows its forward task (see sched.c).  Memory is charged with the
 * same model as mp_mem_static, so a placement they return always fits.
 */
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"

/* ---- incremental memory ------------------------------------------------ */

void mp_mstate_init(struct mp_mstate *m, const struct mp_graph *g,
		    const struct mp_cluster *c, const int *place)
{
	m->g = g;
	m->c = c;
	m->place = place;
	m->used = mp_calloc(c->d, sizeof(double));
	m->add = mp_calloc(c->d, sizeof(double));
	m->recv = mp_calloc(g->nm, sizeof(uint64_t));
	m->tied = mp_calloc(g->np + 1, sizeof(uint64_t));
}

void mp_mstate_free(struct mp_mstate *m)
{
	free(m->used);
	free(m->add);
	free(m->recv);
	free(m->tied);
	memset(m, 0, sizeof(*m));
}

/*
 * Placing node v on device d: the device that needs a copy of tied
 * tensor pa for its k-th other owner (v is that owner or pa's home, both
 * placed, on different devices), or -1.
 */
static int tied_copy_dev(const struct mp_mstate *m, const struct mp_param *pa,
			 int k, int v, int d)
{
	const struct mp_graph *g = m->g;
	int home = g->members[pa->member].node;
	int o = g->members[pa->shared[k]].node;
	int hd = home == v ? d : m->place[home];
	int od = o == v ? d : m->place[o];

	if ((home != v && o != v) || hd < 0 || od < 0 || hd == od)
		return -1;
	return od;
}

static int mstate_compute(struct mp_mstate *m, int v, int d)
{
	const struct mp_graph *g = m->g;
	int ok = 1;

	for (int k = 0; k < m->c->d; k++)
		m->add[k] = 0;
	m->add[d] = mp_node_mem(g, v);
	for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
		const struct mp_edge *e = &g->edges[g->in_e[k]];
		int p = m->place[e->src];
		int dup = 0;

		if (p == d || (m->recv[e->src_member] >> d & 1))
			continue;
		/* two in-edges carrying one member's tensor: charge once */
		for (int j = g->in_off[v]; j < k && !dup; j++)
			dup = g->edges[g->in_e[j]].src_member == e->src_member;
		if (dup)
			continue;
		m->add[d] += e->bytes;
	}
	/* tied tensors: a copy on each device of an owner but the first */
	for (int i = 0; i < g->np; i++)
		for (int k = 0; k < g->params[i].nshared; k++) {
			int od = tied_copy_dev(m, &g->params[i], k, v, d);

			if (od >= 0 && !(m->tied[i] >> od & 1))
				m->add[od] += 2.0 * g->params[i].bytes;
		}
	for (int k = 0; k < m->c->d; k++)
		if (m->add[k] > 0 &&
		    m->used[k] + m->add[k] > m->c->dev[k].memory_bytes)
			ok = 0;
	return ok;
}

int mp_mstate_fits(struct mp_mstate *m, int v, int d)
{
	return mstate_compute(m, v, d);
}

void mp_mstate_commit(struct mp_mstate *m, int v, int d)
{
	const struct mp_graph *g = m->g;

	mstate_compute(m, v, d);
	for (int k = 0; k < m->c->d; k++)
		m->used[k] += m->add[k];
	for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
		const struct mp_edge *e = &g->edges[g->in_e[k]];

		if (m->place[e->src] != d)
			m->recv[e->src_member] |= 1ull << d;
	}
	for (int i = 0; i < g->np; i++)
		for (int k = 0; k < g->params[i].nshared; k++) {
			int od = tied_copy_dev(m, &g->params[i], k, v, d);

			if (od >= 0)
				m->tied[i] |= 1ull << od;
		}
}

/* ---- m-TOPO ------------------------------------------------------------ */

/*
 * Baechi's m-TOPO: walk a topological order and fill one device up to its
 * share of the model's memory (total / devices) before the next; a device
 * that cannot hold a node is skipped.
 */
int mp_place_topo(const struct mp_graph *g, const struct mp_cluster *c,
		  int *place, struct mp_err *err)
{
	double share = mp_graph_mem(g) / c->d;
	struct mp_mstate m;
	int k = 0, ret = 0;

	for (int v = 0; v < g->n; v++)
		place[v] = -1;
	mp_mstate_init(&m, g, c, place);
	for (int i = 0; i < g->n; i++) {
		int v = g->topo[i];

		while (k < c->d - 1 && m.used[k] > 0 &&
		       (m.used[k] + mp_node_mem(g, v) > share * 1.0001 ||
			!mp_mstate_fits(&m, v, k)))
			k++;
		if (!mp_mstate_fits(&m, v, k)) {
			ret = mp_set_err(err, -ENOSPC,
					 "m-topo: node %s does not fit on any remaining device",
					 g->nodes[v].name);
			break;
		}
		place[v] = k;
		mp_mstate_commit(&m, v, k);
	}
	mp_mstate_free(&m);
	return ret;
}

/* ---- m-ETF and m-SCT ---------------------------------------------------- */

/*
 * Earliest-time-first: repeatedly start the (ready node, device) pair that
 * can start soonest, counting the transfer of every input from another
 * device; memory decides which devices are candidates.  With sct set, the
 * small-communication-time variant: each node's favourite child (the
 * successor it sends the most bytes to) is kept on its parent's device
 * whenever memory allows, which is what Baechi's LP relaxation picks when
 * communication dominates; no LP solver is needed.
 */
int mp_place_etf(const struct mp_graph *g, const struct mp_cluster *c,
		 int sct, int *place, struct mp_err *err)
{
	int n = g->n, nready = 0, ret = 0;
	int *deg = mp_calloc(n, sizeof(int));
	int *ready = mp_calloc(n, sizeof(int));
	int *favp = mp_calloc(n, sizeof(int));
	double *fin = mp_calloc(n, sizeof(double));
	double *avail = mp_calloc(c->d, sizeof(double));
	double *favb = mp_calloc(n, sizeof(double));
	struct mp_mstate m;

	for (int v = 0; v < n; v++) {
		place[v] = -1;
		favp[v] = -1;
		deg[v] = g->in_off[v + 1] - g->in_off[v];
	}
	if (sct) {
		for (int u = 0; u < n; u++) {
			int best = -1;
			double bb = -1;

			for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
				const struct mp_edge *e = &g->edges[g->out_e[k]];

				if (e->bytes > bb) {
					bb = e->bytes;
					best = e->dst;
				}
			}
			if (best >= 0 && bb > favb[best]) {
				favb[best] = bb;
				favp[best] = u;
			}
		}
	}
	mp_mstate_init(&m, g, c, place);
	for (int v = 0; v < n; v++)
		if (!deg[v])
			ready[nready++] = v;
	for (int step = 0; step < n; step++) {
		double best = DBL_MAX;
		int bi = -1, bd = -1;

		for (int i = 0; i < nready; i++) {
			int v = ready[i];
			int only = -1;

			if (sct && favp[v] >= 0 &&
			    mp_mstate_fits(&m, v, place[favp[v]]))
				only = place[favp[v]];
			for (int d = 0; d < c->d; d++) {
				double est = avail[d];

				if ((only >= 0 && d != only) ||
				    (only < 0 && !mp_mstate_fits(&m, v, d)))
					continue;
				for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
					const struct mp_edge *e = &g->edges[g->in_e[k]];
					double a = fin[e->src] +
						   mp_xfer_ms(c, place[e->src], d,
							      e->bytes);

					if (a > est)
						est = a;
				}
				if (est < best - 1e-12) {
					best = est;
					bi = i;
					bd = d;
				}
			}
		}
		if (bi < 0) {
			ret = mp_set_err(err, -ENOSPC,
					 "%s: no device has memory left for node %s",
					 sct ? "m-sct" : "m-etf",
					 g->nodes[ready[0]].name);
			break;
		}
		{
			int v = ready[bi];

			place[v] = bd;
			mp_mstate_commit(&m, v, bd);
			fin[v] = best + g->nodes[v].fwd_ms / c->dev[bd].speed;
			avail[bd] = fin[v];
			ready[bi] = ready[--nready];
			for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++) {
				int w = g->edges[g->out_e[k]].dst;

				if (--deg[w] == 0)
					ready[nready++] = w;
			}
		}
	}
	mp_mstate_free(&m);
	free(deg);
	free(ready);
	free(favp);
	free(fin);
	free(avail);
	free(favb);
	return ret;
}

/* ---- single device ----------------------------------------------------- */

int mp_place_single(const struct mp_graph *g, const struct mp_cluster *c,
		    int *place, struct mp_err *err)
{
	double need = mp_graph_mem(g);
	int best = -1;

	for (int d = 0; d < c->d; d++)
		if (need <= c->dev[d].memory_bytes &&
		    (best < 0 || c->dev[d].speed > c->dev[best].speed))
			best = d;
	if (best < 0)
		return mp_set_err(err, -ENOSPC,
				  "single: the model needs %.0f bytes, no device has that much",
				  need);
	for (int v = 0; v < g->n; v++)
		place[v] = best;
	return 0;
}

/* ---- even split -------------------------------------------------------- */

/*
 * Contiguous stretches of the topological order with compute proportional
 * to each device's speed (PipeDream's naive split); fails when a stretch
 * does not fit its device.
 */
int mp_place_even(const struct mp_graph *g, const struct mp_cluster *c,
		  int *place, struct mp_err *err)
{
	double work = 0, ssum = 0, acc = 0, bound;
	int d = 0;

	for (int v = 0; v < g->n; v++)
		work += g->nodes[v].fwd_ms + g->nodes[v].bwd_ms;
	for (int k = 0; k < c->d; k++)
		ssum += c->dev[k].speed;
	bound = work * c->dev[0].speed / ssum;
	for (int i = 0; i < g->n; i++) {
		int v = g->topo[i];
		double w = g->nodes[v].fwd_ms + g->nodes[v].bwd_ms;

		/* move on once the midpoint of v passes this device's share */
		while (d < c->d - 1 && acc + w / 2 > bound) {
			d++;
			bound += work * c->dev[d].speed / ssum;
		}
		place[v] = d;
		acc += w;
	}
	{
		struct mp_err e2;

		if (mp_mem_ok(g, c, place, &e2))
			return mp_set_err(err, -ENOSPC, "even: %s", e2.msg);
	}
	return 0;
}
