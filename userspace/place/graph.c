// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Model profiles as the operator-group DAG the placer moves. libmercury
 * reads the file (mercury_model_load(): h200 JSON or PipeDream graph.txt,
 * the one reader and ownership rule of every Mercury tool); this builds
 * members, nodes and edges from it:
 *  - h200: members are the leaf modules.  A call's forward time is the
 *    span from its start to the next call's start, so the functional work
 *    between leaf modules (residual adds, attention products) is charged to
 *    the module it follows and the spans add up to iteration_ms.fwd_ms.
 *    Backward time comes from grad_ready: walking the nodes in reverse
 *    forward order, the time between two consecutive "gradients ready"
 *    instants is shared among the nodes of that stretch in proportion to
 *    their forward time; the total is scaled to iteration_ms.bwd_ms.
 *    Edges are the torch.fx module edges, or a chain in call order when the
 *    profile has none.  Parameters whose module is null or never called
 *    (ViT's fused attention) go to the member of their first use.
 *  - PipeDream graph.txt: one member per node, its edges.
 *
 * What the placer needs beyond the reader's checks (times on every call,
 * edges between called modules, no cycle but a reused module's) is
 * checked here.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>
#include <mercury/mercury.h>

#include "place.h"

/* Name -> index maps ride on json-c's hash table. */
static int name_idx(struct json_object *map, const char *name)
{
	struct json_object *v;

	if (!name || !json_object_object_get_ex(map, name, &v))
		return -1;
	return json_object_get_int(v);
}

static void name_put(struct json_object *map, const char *name, int idx)
{
	json_object_object_add(map, name, json_object_new_int(idx));
}

double mp_node_mem(const struct mp_graph *g, int v)
{
	/* fp32 weights + gradients + one optimizer buffer (SGD momentum) */
	return 3.0 * g->nodes[v].param_bytes + g->nodes[v].act_bytes;
}

double mp_graph_mem(const struct mp_graph *g)
{
	double s = 0;

	for (int v = 0; v < g->n; v++)
		s += mp_node_mem(g, v);
	return s;
}

void mp_graph_free(struct mp_graph *g)
{
	if (!g)
		return;
	free(g->model);
	free(g->format);
	for (int i = 0; i < g->n; i++)
		free(g->nodes[i].name);
	for (int i = 0; i < g->nm; i++)
		free(g->members[i].name);
	for (int i = 0; i < g->np; i++) {
		free(g->params[i].name);
		free(g->params[i].shared);
	}
	free(g->nodes);
	free(g->members);
	free(g->params);
	free(g->edges);
	free(g->out_off);
	free(g->out_e);
	free(g->in_off);
	free(g->in_e);
	free(g->topo);
	memset(g, 0, sizeof(*g));
}

/* ---- member-level graph, strongly connected components ---------------- */

struct medge {
	int a, b;
	double bytes;
};

/*
 * Iterative Tarjan over the member graph (only members that are called).
 * comp[m] receives the component index; returns the component count.
 */
static int tarjan(int nm, const int *called, int ne, const struct medge *me,
		  int *comp)
{
	int *off = mp_calloc(nm + 1, sizeof(int));
	int *adj = mp_calloc(ne, sizeof(int));
	int *idx = mp_calloc(nm, sizeof(int));
	int *low = mp_calloc(nm, sizeof(int));
	int *on = mp_calloc(nm, sizeof(int));
	int *stk = mp_calloc(nm, sizeof(int));
	int *cs = mp_calloc(nm, sizeof(int));	/* call stack: node */
	int *ci = mp_calloc(nm, sizeof(int));	/* call stack: next edge */
	int sp = 0, csp, counter = 1, ncomp = 0;

	for (int i = 0; i < ne; i++)
		off[me[i].a + 1]++;
	for (int i = 0; i < nm; i++)
		off[i + 1] += off[i];
	{
		int *fill = mp_calloc(nm, sizeof(int));

		for (int i = 0; i < ne; i++)
			adj[off[me[i].a] + fill[me[i].a]++] = me[i].b;
		free(fill);
	}
	for (int i = 0; i < nm; i++)
		comp[i] = -1;
	for (int r = 0; r < nm; r++) {
		if (!called[r] || idx[r])
			continue;
		csp = 0;
		cs[csp] = r;
		ci[csp++] = off[r];
		idx[r] = low[r] = counter++;
		stk[sp++] = r;
		on[r] = 1;
		while (csp) {
			int v = cs[csp - 1];

			if (ci[csp - 1] < off[v + 1]) {
				int w = adj[ci[csp - 1]++];

				if (!idx[w]) {
					idx[w] = low[w] = counter++;
					stk[sp++] = w;
					on[w] = 1;
					cs[csp] = w;
					ci[csp++] = off[w];
				} else if (on[w] && idx[w] < low[v]) {
					low[v] = idx[w];
				}
				continue;
			}
			if (low[v] == idx[v]) {
				int w;

				do {
					w = stk[--sp];
					on[w] = 0;
					comp[w] = ncomp;
				} while (w != v);
				ncomp++;
			}
			csp--;
			if (csp) {
				int u = cs[csp - 1];

				if (low[v] < low[u])
					low[u] = low[v];
			}
		}
	}
	free(off);
	free(adj);
	free(idx);
	free(low);
	free(on);
	free(stk);
	free(cs);
	free(ci);
	return ncomp;
}

/*
 * Turn members + member edges into nodes + node edges.  allow_reuse[m] says
 * that member m is called more than once, which is the only legitimate
 * reason for a cycle in a module graph.
 */
static int build_nodes(struct mp_graph *g, int ne, const struct medge *me,
		       const int *allow_reuse, struct mp_err *err)
{
	int *called = mp_calloc(g->nm, sizeof(int));
	int *comp = mp_calloc(g->nm, sizeof(int));
	int *csize, *creuse, *cnode;
	int ncomp, ret = 0;

	for (int m = 0; m < g->nm; m++)
		called[m] = g->members[m].called;
	for (int i = 0; i < ne; i++)
		if (me[i].a == me[i].b && !allow_reuse[me[i].a]) {
			ret = mp_set_err(err, -EINVAL,
					 "cycle: edge %s -> %s",
					 g->members[me[i].a].name,
					 g->members[me[i].a].name);
			goto out;
		}
	ncomp = tarjan(g->nm, called, ne, me, comp);
	csize = mp_calloc(ncomp, sizeof(int));
	creuse = mp_calloc(ncomp, sizeof(int));
	cnode = mp_calloc(ncomp, sizeof(int));
	for (int m = 0; m < g->nm; m++) {
		if (comp[m] < 0)
			continue;
		csize[comp[m]]++;
		creuse[comp[m]] |= allow_reuse[m];
	}
	for (int m = 0; m < g->nm; m++) {
		int k = comp[m];

		if (k >= 0 && csize[k] > 1 && !creuse[k]) {
			ret = mp_set_err(err, -EINVAL,
					 "cycle through %s (%d members in the cycle)",
					 g->members[m].name, csize[k]);
			goto out2;
		}
	}
	/* Nodes numbered by the first member (in member order) of each comp. */
	for (int k = 0; k < ncomp; k++)
		cnode[k] = -1;
	g->nodes = mp_calloc(ncomp, sizeof(struct mp_node));
	g->n = 0;
	for (int m = 0; m < g->nm; m++) {
		int k = comp[m];
		struct mp_node *nd;

		if (k < 0)
			continue;
		if (cnode[k] < 0) {
			cnode[k] = g->n++;
			nd = &g->nodes[cnode[k]];
			nd->name = mp_strdup(g->members[m].name);
			nd->order = g->members[m].order;
		}
		nd = &g->nodes[cnode[k]];
		g->members[m].node = cnode[k];
		g->members[m].off_ms = nd->fwd_ms;
		nd->fwd_ms += g->members[m].fwd_ms;
		if (g->members[m].order < nd->order)
			nd->order = g->members[m].order;
	}
	/* Node edges: one per (producing member, consuming node). */
	g->edges = mp_calloc(ne, sizeof(struct mp_edge));
	g->ne = 0;
	{
		struct json_object *seen = json_object_new_object();
		char key[64];

		for (int i = 0; i < ne; i++) {
			int u = g->members[me[i].a].node;
			int v = g->members[me[i].b].node;
			int j;

			if (u == v)
				continue;
			snprintf(key, sizeof(key), "%d:%d", me[i].a, v);
			j = name_idx(seen, key);
			if (j >= 0) {
				/* keep the earliest consumer for the name */
				if (g->members[me[i].b].order <
				    g->members[g->edges[j].dst_member].order)
					g->edges[j].dst_member = me[i].b;
				continue;
			}
			name_put(seen, key, g->ne);
			g->edges[g->ne].src = u;
			g->edges[g->ne].dst = v;
			g->edges[g->ne].src_member = me[i].a;
			g->edges[g->ne].dst_member = me[i].b;
			g->edges[g->ne].bytes = me[i].bytes;
			g->ne++;
		}
		json_object_put(seen);
	}
out2:
	free(csize);
	free(creuse);
	free(cnode);
out:
	free(called);
	free(comp);
	return ret;
}

int mp_graph_finish(struct mp_graph *g, struct mp_err *err)
{
	int *deg, *q, qh = 0, qt = 0;

	if (g->n <= 0)
		return mp_set_err(err, -EINVAL, "profile has no nodes");
	for (int v = 0; v < g->n; v++) {
		const struct mp_node *nd = &g->nodes[v];

		if (!(nd->fwd_ms >= 0) || !(nd->bwd_ms >= 0) ||
		    !(nd->param_bytes >= 0) || !(nd->act_bytes >= 0) ||
		    !isfinite(nd->fwd_ms + nd->bwd_ms + nd->param_bytes +
			      nd->act_bytes))
			return mp_set_err(err, -EINVAL,
					  "node %s: negative or invalid time or size",
					  nd->name);
	}
	for (int i = 0; i < g->ne; i++) {
		if (g->edges[i].src < 0 || g->edges[i].src >= g->n ||
		    g->edges[i].dst < 0 || g->edges[i].dst >= g->n)
			return mp_set_err(err, -EINVAL, "edge %d: bad node", i);
		if (!(g->edges[i].bytes >= 0) || !isfinite(g->edges[i].bytes))
			return mp_set_err(err, -EINVAL,
					  "edge %s -> %s: negative size",
					  g->nodes[g->edges[i].src].name,
					  g->nodes[g->edges[i].dst].name);
	}
	g->out_off = mp_calloc(g->n + 1, sizeof(int));
	g->in_off = mp_calloc(g->n + 1, sizeof(int));
	g->out_e = mp_calloc(g->ne, sizeof(int));
	g->in_e = mp_calloc(g->ne, sizeof(int));
	for (int i = 0; i < g->ne; i++) {
		g->out_off[g->edges[i].src + 1]++;
		g->in_off[g->edges[i].dst + 1]++;
	}
	for (int v = 0; v < g->n; v++) {
		g->out_off[v + 1] += g->out_off[v];
		g->in_off[v + 1] += g->in_off[v];
	}
	deg = mp_calloc(g->n, sizeof(int));
	for (int i = 0; i < g->ne; i++)
		g->out_e[g->out_off[g->edges[i].src] + deg[g->edges[i].src]++] = i;
	memset(deg, 0, g->n * sizeof(int));
	for (int i = 0; i < g->ne; i++)
		g->in_e[g->in_off[g->edges[i].dst] + deg[g->edges[i].dst]++] = i;
	/* Kahn: FIFO seeded in node order gives a stable topological order. */
	for (int v = 0; v < g->n; v++)
		deg[v] = g->in_off[v + 1] - g->in_off[v];
	q = g->topo = mp_calloc(g->n, sizeof(int));
	for (int v = 0; v < g->n; v++)
		if (!deg[v])
			q[qt++] = v;
	while (qh < qt) {
		int u = q[qh++];

		for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
			int w = g->edges[g->out_e[k]].dst;

			if (--deg[w] == 0)
				q[qt++] = w;
		}
	}
	free(deg);
	if (qt != g->n) {
		for (int v = 0; v < g->n; v++) {
			int in_q = 0;

			for (int i = 0; i < qt && !in_q; i++)
				in_q = q[i] == v;
			if (!in_q)
				return mp_set_err(err, -EINVAL,
						  "cycle through node %s",
						  g->nodes[v].name);
		}
	}
	g->is_chain = g->ne == g->n - 1;
	for (int i = 0; g->is_chain && i + 1 < g->n; i++)
		g->is_chain = g->out_off[g->topo[i] + 1] -
			      g->out_off[g->topo[i]] == 1 &&
			      g->edges[g->out_e[g->out_off[g->topo[i]]]].dst ==
			      g->topo[i + 1];
	return 0;
}

/* ---- from libmercury's model ------------------------------------------ */

/*
 * The member a module or parameter path belongs to when it is not itself
 * called: the module of the first forward call that needs it, libmercury's
 * one ownership rule (mercury_model_first_use()).
 */
static int owner_member(const struct mercury_model *mm, const char *name)
{
	size_t c = mercury_model_first_use(mm, name);

	return c == MERCURY_MODEL_NONE ? 0 :
	       (int)mercury_model_call(mm, c)->module_idx;
}

static int member_of(const struct mp_graph *g, const struct mercury_model *mm,
		     size_t module, const char *name)
{
	if (module != MERCURY_MODEL_NONE && g->members[module].called)
		return module;
	return owner_member(mm, name);
}

static int cmp_order_desc(const void *a, const void *b, void *arg)
{
	const struct mp_graph *g = arg;
	int x = g->nodes[*(const int *)a].order;
	int y = g->nodes[*(const int *)b].order;

	return (x < y) - (x > y);
}

/* Backward time per node from the grad_ready instants (see top comment). */
static void h200_bwd_from_ready(struct mp_graph *g, const double *ready,
				double bwd_total)
{
	int *ord = mp_calloc(g->n, sizeof(int));
	double *t = mp_calloc(g->n, sizeof(double));
	int *has = mp_calloc(g->n, sizeof(int));
	int *pend = mp_calloc(g->n, sizeof(int));
	int npend = 0;
	double prev = 0, sum = 0;

	for (int i = 0; i < g->np; i++) {
		int v = g->members[g->params[i].member].node;

		if (!has[v] || ready[i] > t[v])
			t[v] = ready[i];
		has[v] = 1;
	}
	for (int v = 0; v < g->n; v++)
		ord[v] = v;
	qsort_r(ord, g->n, sizeof(int), cmp_order_desc, g);
	for (int i = 0; i <= g->n; i++) {
		double seg, fw = 0;
		int last = i == g->n;

		if (!last) {
			pend[npend++] = ord[i];
			if (!has[ord[i]])
				continue;
			seg = t[ord[i]] - prev;
			if (t[ord[i]] > prev)
				prev = t[ord[i]];
		} else {
			if (!npend)
				break;
			seg = bwd_total - prev;
		}
		if (seg < 0)
			seg = 0;
		for (int k = 0; k < npend; k++)
			fw += g->nodes[pend[k]].fwd_ms;
		for (int k = 0; k < npend; k++)
			g->nodes[pend[k]].bwd_ms = fw > 0 ?
				seg * g->nodes[pend[k]].fwd_ms / fw :
				seg / npend;
		npend = 0;
	}
	for (int v = 0; v < g->n; v++)
		sum += g->nodes[v].bwd_ms;
	for (int v = 0; v < g->n; v++) {
		if (sum > 0) {
			g->nodes[v].bwd_ms *= bwd_total / sum;
		} else {
			double fw = 0;

			for (int u = 0; u < g->n; u++)
				fw += g->nodes[u].fwd_ms;
			g->nodes[v].bwd_ms = fw > 0 ?
				bwd_total * g->nodes[v].fwd_ms / fw :
				bwd_total / g->n;
		}
	}
	free(ord);
	free(t);
	free(has);
	free(pend);
}

static int from_h200(const char *path, const struct mercury_model *mm,
		     const struct mercury_model_info *info, struct mp_graph *g,
		     struct mp_err *err)
{
	int nmod = info->nmodules, ncall = info->ncalls, ngrad = info->nparams;
	double *ready = NULL;
	int *ncalls = NULL, *call_m = NULL;
	struct medge *me = NULL;
	int ne = 0, ret = 0;

	g->model = mp_strdup(info->model ? info->model : "unknown");
	g->format = mp_strdup("h200");
	if (info->fwd_ms < 0 || info->bwd_ms < 0)
		return mp_set_err(err, -EINVAL,
				  "%s: iteration_ms.fwd_ms/bwd_ms missing or negative",
				  path);
	if (!ncall)
		return mp_set_err(err, -EINVAL, "%s: no forward_calls", path);
	g->members = mp_calloc(nmod, sizeof(struct mp_member));
	for (int m = 0; m < nmod; m++) {
		g->members[m].name = mp_strdup(mercury_model_module(mm, m)->name);
		g->members[m].order = -1;
		g->members[m].node = -1;
		g->nm++;
	}
	ncalls = mp_calloc(nmod, sizeof(int));
	call_m = mp_calloc(ncall, sizeof(int));
	for (int i = 0; i < ncall; i++) {
		const struct mercury_model_call *c = mercury_model_call(mm, i);
		const struct mercury_model_call *n = mercury_model_call(mm, i + 1);
		double span, next_st;
		int m = c->module_idx;

		if (c->start_ms < 0 || c->fwd_ms < 0 || c->out_bytes < 0) {
			ret = mp_set_err(err, -EINVAL,
					 "%s: forward_calls[%d] (%s): start_ms, fwd_ms, out_bytes must be numbers >= 0",
					 path, i, c->module);
			goto out;
		}
		next_st = n ? (n->start_ms >= 0 ? n->start_ms :
			       c->start_ms + c->fwd_ms) : info->fwd_ms;
		/* span covers the functional ops until the next leaf call */
		span = next_st - c->start_ms > c->fwd_ms ?
		       next_st - c->start_ms : c->fwd_ms;
		if (i == 0)
			span += c->start_ms;
		call_m[i] = m;
		ncalls[m]++;
		if (!g->members[m].called) {
			g->members[m].called = 1;
			g->members[m].order = i;
		}
		g->members[m].fwd_ms += span;
		g->members[m].out_bytes = c->out_bytes;
	}
	if (info->has_edges) {
		me = mp_calloc(info->nedges, sizeof(struct medge));
		for (size_t i = 0; i < info->nedges; i++) {
			const struct mercury_model_edge *e = mercury_model_edge(mm, i);

			if (!g->members[e->src].called ||
			    !g->members[e->dst].called) {
				ret = mp_set_err(err, -EINVAL,
						 "%s: edges[%zu] %s -> %s names a module that is never called",
						 path, i, g->members[e->src].name,
						 g->members[e->dst].name);
				goto out;
			}
			me[ne].a = e->src;
			me[ne].b = e->dst;
			me[ne].bytes = g->members[e->src].out_bytes;
			ne++;
		}
	} else {
		/* no traced edges (the transformers): the call order is the chain */
		me = mp_calloc(ncall, sizeof(struct medge));
		for (int i = 0; i + 1 < ncall; i++) {
			if (call_m[i] == call_m[i + 1])
				continue;
			me[ne].a = call_m[i];
			me[ne].b = call_m[i + 1];
			me[ne].bytes = mercury_model_call(mm, i)->out_bytes;
			ne++;
		}
	}
	for (int m = 0; m < g->nm; m++)
		ncalls[m] = ncalls[m] > 1;
	ret = build_nodes(g, ne, me, ncalls, err);
	if (ret)
		goto out;
	/* node activations: every call's output */
	for (int i = 0; i < ncall; i++)
		g->nodes[g->members[call_m[i]].node].act_bytes +=
			mercury_model_call(mm, i)->out_bytes;
	/* uncalled modules belong where their first use is */
	for (int m = 0; m < g->nm; m++) {
		if (g->members[m].called)
			continue;
		g->members[m].node =
			g->members[owner_member(mm, g->members[m].name)].node;
	}
	g->params = mp_calloc(ngrad, sizeof(struct mp_param));
	ready = mp_calloc(ngrad, sizeof(double));
	for (int i = 0; i < ngrad; i++) {
		const struct mercury_model_param *p = mercury_model_param(mm, i);
		struct mp_param *q = &g->params[i];
		int m;

		if (p->ready_ms < 0) {
			ret = mp_set_err(err, -EINVAL,
					 "%s: grad_ready[%d] (%s): needs ready_ms >= 0",
					 path, i, p->name);
			goto out;
		}
		m = member_of(g, mm, p->module_idx, p->owner);
		q->name = mp_strdup(p->name);
		q->member = m;
		/*
		 * A tied tensor is listed once, under its first user; the
		 * other owners only need a copy where they run (sched.c).
		 */
		q->shared = mp_calloc(p->nshared + 1, sizeof(int));
		for (size_t k = 0; k < p->nshared; k++)
			q->shared[q->nshared++] =
				member_of(g, mm, p->shared[k],
					  g->members[p->shared[k]].name);
		/* libmercury's bytes: numel times the gradient's dtype */
		q->bytes = (double)p->bytes;
		q->ready_idx = i;
		ready[i] = p->ready_ms;
		g->np++;
		/* memory: fp32 parameters (and their copies), whatever the wire */
		g->nodes[g->members[m].node].param_bytes += 4.0 * p->numel;
	}
	h200_bwd_from_ready(g, ready, info->bwd_ms);
	ret = mp_graph_finish(g, err);
out:
	free(ready);
	free(ncalls);
	free(call_m);
	free(me);
	return ret;
}

static int from_pipedream(const struct mercury_model *mm,
			  const struct mercury_model_info *info,
			  struct mp_graph *g, struct mp_err *err)
{
	struct medge *me;
	int *reuse, ret;

	g->model = mp_strdup(info->model);
	g->format = mp_strdup("pipedream");
	g->members = mp_calloc(info->nnodes, sizeof(struct mp_member));
	for (size_t m = 0; m < info->nnodes; m++) {
		const struct mercury_model_node *nd = mercury_model_node(mm, m);
		struct mp_member *mb = &g->members[m];

		mb->name = mp_strdup(nd->name);
		mb->called = 1;
		if (!strncmp(nd->op, "Input", 5))
			mb->role = MP_ROLE_INPUT;
		else if (!strncmp(nd->op, "__getitem__", 11))
			mb->role = MP_ROLE_GETITEM;
		mb->order = m;
		mb->fwd_ms = nd->fwd_ms;
		mb->out_bytes = nd->act_bytes;
		g->nm++;
	}
	me = mp_calloc(info->nedges, sizeof(struct medge));
	for (size_t i = 0; i < info->nedges; i++) {
		const struct mercury_model_edge *e = mercury_model_edge(mm, i);

		me[i].a = e->src;
		me[i].b = e->dst;
		me[i].bytes = g->members[e->src].out_bytes;
	}
	reuse = mp_calloc(g->nm, sizeof(int));
	ret = build_nodes(g, info->nedges, me, reuse, err);
	free(me);
	free(reuse);
	if (ret)
		return ret;
	g->params = mp_calloc(g->nm, sizeof(struct mp_param));
	for (int m = 0; m < g->nm; m++) {
		const struct mercury_model_node *nd = mercury_model_node(mm, m);
		struct mp_node *v = &g->nodes[g->members[m].node];

		v->bwd_ms += nd->bwd_ms;
		v->act_bytes += nd->act_bytes;
		v->param_bytes += nd->param_bytes;
		if (nd->param == MERCURY_MODEL_NONE)
			continue;
		g->params[g->np].name =
			mp_strdup(mercury_model_param(mm, nd->param)->name);
		g->params[g->np].member = m;
		g->params[g->np].bytes = nd->param_bytes;
		g->params[g->np].ready_idx = -1;
		g->np++;
	}
	return mp_graph_finish(g, err);
}

int mp_graph_load(const char *path, struct mp_graph *g, struct mp_err *err)
{
	struct mercury_model_info info;
	struct mercury_model *mm;
	int ret;

	memset(g, 0, sizeof(*g));
	ret = mercury_model_load(path, &mm);
	if (ret)
		/* libmercury's reason names the file */
		return mp_set_err(err, ret, "%s", mercury_last_error());
	mercury_model_get_info(mm, &info, sizeof(info));
	if (info.format == MERCURY_MODEL_H200)
		ret = from_h200(path, mm, &info, g, err);
	else
		ret = from_pipedream(mm, &info, g, err);
	mercury_model_free(mm);
	if (ret)
		mp_graph_free(g);
	return ret;
}

/* ---- synthetic DAG ------------------------------------------------------ */

static unsigned int lcg(unsigned int *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 8) & 0xffffff;
}

/*
 * Layers of up to 16 nodes; each node takes 1-3 inputs from the previous
 * two layers.  Times and sizes are drawn in the ranges of the CNN profiles
 * (0.01-2 ms forward, 10-500 KB activations, up to 400 KB of parameters):
 * an operator-level graph, whose tensors are smaller than layer outputs.
 */
int mp_graph_synthetic(struct mp_graph *g, int n, unsigned int seed)
{
	int cap = n * 3, layer_start = 0, prev_start = 0, prev2_start = 0;
	struct mp_err err;

	memset(g, 0, sizeof(*g));
	g->model = mp_strdup("synthetic");
	g->format = mp_strdup("synthetic");
	g->n = g->nm = n;
	g->nodes = mp_calloc(n, sizeof(struct mp_node));
	g->members = mp_calloc(n, sizeof(struct mp_member));
	g->edges = mp_calloc(cap, sizeof(struct mp_edge));
	g->params = mp_calloc(n, sizeof(struct mp_param));
	for (int v = 0; v < n; v++) {
		char buf[32];
		int width;

		if (v == layer_start + 16 || (v > layer_start &&
					      lcg(&seed) % 4 == 0)) {
			prev2_start = prev_start;
			prev_start = layer_start;
			layer_start = v;
		}
		width = layer_start - prev2_start;
		snprintf(buf, sizeof(buf), "n%d", v);
		g->nodes[v].name = mp_strdup(buf);
		g->members[v].name = mp_strdup(buf);
		g->members[v].node = v;
		g->members[v].called = 1;
		g->members[v].order = v;
		g->nodes[v].order = v;
		g->nodes[v].fwd_ms = 0.01 + (lcg(&seed) % 2000) / 1000.0;
		g->members[v].fwd_ms = g->nodes[v].fwd_ms;
		g->nodes[v].bwd_ms = g->nodes[v].fwd_ms *
				     (1.0 + (lcg(&seed) % 100) / 100.0);
		g->members[v].out_bytes = 1e4 + (lcg(&seed) % 49) * 1e4;
		g->nodes[v].act_bytes = g->members[v].out_bytes;
		if (lcg(&seed) % 2) {
			g->nodes[v].param_bytes = 4.0 * (lcg(&seed) % 100000);
			snprintf(buf, sizeof(buf), "n%d.param", v);
			g->params[g->np].name = mp_strdup(buf);
			g->params[g->np].member = v;
			g->params[g->np].bytes = g->nodes[v].param_bytes;
			g->params[g->np].ready_idx = -1;
			g->np++;
		}
		if (v == 0 || width <= 0 || layer_start == 0)
			continue;
		for (int k = 0, deg = 1 + lcg(&seed) % 3; k < deg; k++) {
			int u = prev2_start + lcg(&seed) % width;
			int dup = 0;

			if (u >= layer_start)
				continue;
			for (int j = g->ne - 1; j >= 0 && g->edges[j].dst == v; j--)
				dup |= g->edges[j].src == u;
			if (dup)
				continue;
			g->edges[g->ne].src = u;
			g->edges[g->ne].dst = v;
			g->edges[g->ne].src_member = u;
			g->edges[g->ne].dst_member = v;
			g->edges[g->ne].bytes = g->members[u].out_bytes;
			g->ne++;
		}
	}
	return mp_graph_finish(g, &err);
}
