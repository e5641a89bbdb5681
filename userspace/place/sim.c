// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The simulator: executes a placement with fixed per-resource orders, the
 * way a GPU stream or a NIC queue runs what was issued to it in issue
 * order.  A unit starts when it heads its resource's queue and all its
 * inputs are there.  It then checks the result against the model graph
 * itself (every edge's data arrived before its consumer started, no two
 * units overlap on one resource) and tracks each device's live memory over
 * time.  Its step time must equal the engine's prediction to the bit: the
 * two are independent executions of the same semantics.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"

void mp_sim_free(struct mp_sim *s)
{
	free(s->peak_mem);
	free(s->start);
	free(s->finish);
	memset(s, 0, sizeof(*s));
}

struct memev {
	double t;
	int dev;
	double delta;
};

static int cmp_memev(const void *a, const void *b)
{
	const struct memev *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	/* allocations first at equal times: the conservative peak */
	return (x->delta < y->delta) - (x->delta > y->delta);
}

#define EPS 1e-9

int mp_sim_run(const struct mp_graph *g, const struct mp_cluster *c,
	       const int *place, const struct mp_units *U,
	       const struct mp_sched *S, struct mp_sim *out,
	       struct mp_err *err)
{
	int nu = U->nu, n = g->n, ret = 0, qh = 0, qt = 0, nev = 0;
	int *indeg = mp_calloc(nu, sizeof(int));
	int *rnext = mp_calloc(2 * nu, sizeof(int));	/* next on res, res2 */
	int *q = mp_calloc(nu, sizeof(int));
	double *st, *fin;
	struct memev *ev;

	memset(out, 0, sizeof(*out));
	st = out->start = mp_calloc(nu, sizeof(double));
	fin = out->finish = mp_calloc(nu, sizeof(double));
	out->peak_mem = mp_calloc(c->d, sizeof(double));
	for (int i = 0; i < nu; i++) {
		indeg[i] = U->u[i].ndeps;
		rnext[2 * i] = rnext[2 * i + 1] = -1;
	}
	for (int r = 0; r < U->nres; r++)
		for (int k = S->order_off[r]; k + 1 < S->order_off[r + 1]; k++) {
			int x = S->order[k];

			rnext[2 * x + (U->u[x].res != r)] = S->order[k + 1];
			indeg[S->order[k + 1]]++;
		}
	for (int i = 0; i < nu; i++)
		if (!indeg[i])
			q[qt++] = i;
	/* Kahn over data edges + queue order; start = latest predecessor. */
	while (qh < qt) {
		int x = q[qh++];

		fin[x] = st[x] + U->u[x].dur;
		if (fin[x] > out->step_ms)
			out->step_ms = fin[x];
		for (int k = U->succ_off[x]; k <= U->succ_off[x + 1] + 1; k++) {
			int s = k < U->succ_off[x + 1] ? U->succ[k] :
				rnext[2 * x + k - U->succ_off[x + 1]];

			if (s < 0)
				continue;
			if (fin[x] > st[s])
				st[s] = fin[x];
			if (--indeg[s] == 0)
				q[qt++] = s;
		}
	}
	if (qt != nu) {
		ret = mp_set_err(err, -EDEADLK,
				 "simulator: the resource orders deadlock (%d of %d units ran)",
				 qt, nu);
		goto out;
	}
	/* the schedule against the model graph, independently of the units */
	for (int i = 0; i < g->ne; i++) {
		const struct mp_edge *e = &g->edges[i];
		double x = mp_xfer_ms(c, place[e->src], place[e->dst], e->bytes);
		int u = e->src, v = e->dst;

		if (st[v] + EPS < fin[u] + x ||
		    st[n + u] + EPS < fin[n + v] + x) {
			ret = mp_set_err(err, -EPROTO,
					 "simulator: edge %s -> %s violated",
					 g->nodes[u].name, g->nodes[v].name);
			goto out;
		}
	}
	for (int v = 0; v < n; v++)
		if (st[n + v] + EPS < fin[v]) {
			ret = mp_set_err(err, -EPROTO,
					 "simulator: backward of %s before its forward",
					 g->nodes[v].name);
			goto out;
		}
	for (int r = 0; r < U->nres; r++)
		for (int k = S->order_off[r]; k + 1 < S->order_off[r + 1]; k++)
			if (st[S->order[k + 1]] + EPS < fin[S->order[k]]) {
				ret = mp_set_err(err, -EPROTO,
						 "simulator: overlap on resource %d", r);
				goto out;
			}
	/* memory over time */
	ev = mp_calloc(2 * nu + 2, sizeof(*ev));
	for (int i = 0; i < nu; i++) {
		const struct mp_unit *x = &U->u[i];

		if (x->kind == MP_U_FWD) {
			out->peak_mem[x->res] += 3.0 * g->nodes[x->node].param_bytes;
			ev[nev++] = (struct memev){ fin[i], x->res,
						    g->nodes[x->node].act_bytes };
			ev[nev++] = (struct memev){ fin[n + x->node], x->res,
						    -g->nodes[x->node].act_bytes };
		} else if (x->kind == MP_U_XFWD) {
			/* received copy lives until its gradient is sent back */
			int dst = x->dst;

			ev[nev++] = (struct memev){ st[i], dst, x->bytes };
			ev[nev++] = (struct memev){ st[i + 1], dst, -x->bytes };
		}
		/* activation gradients are transient, as on one device */
	}
	qsort(ev, nev, sizeof(*ev), cmp_memev);
	{
		double *live = mp_calloc(c->d, sizeof(double));
		double *base = mp_calloc(c->d, sizeof(double));

		memcpy(base, out->peak_mem, c->d * sizeof(double));
		memcpy(live, base, c->d * sizeof(double));
		for (int i = 0; i < nev; i++) {
			live[ev[i].dev] += ev[i].delta;
			if (live[ev[i].dev] > out->peak_mem[ev[i].dev])
				out->peak_mem[ev[i].dev] = live[ev[i].dev];
		}
		for (int d = 0; d < c->d && !ret; d++)
			if (out->peak_mem[d] > c->dev[d].memory_bytes)
				ret = mp_set_err(err, -ENOSPC,
						 "simulator: device %s peaks at %.0f bytes, has %.0f",
						 c->dev[d].name, out->peak_mem[d],
						 c->dev[d].memory_bytes);
		free(live);
		free(base);
	}
	free(ev);
out:
	free(indeg);
	free(rnext);
	free(q);
	return ret;
}
