// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Loading model profiles into the operator-group DAG.
 *
 * Two formats, told apart by content (a JSON object starts with '{'):
 *  - h200 JSON: members are the leaf modules.  A call's forward time is the
 *    span from its start to the next call's start, so the functional work
 *    between leaf modules (residual adds, attention products) is charged to
 *    the module it follows and the spans add up to iteration_ms.fwd_ms.
 *    Backward time comes from grad_ready: walking the nodes in reverse
 *    forward order, the time between two consecutive "gradients ready"
 *    instants is shared among the nodes of that stretch in proportion to
 *    their forward time; the total is scaled to iteration_ms.bwd_ms.
 *    Edges are the torch.fx module edges, or a chain in call order when the
 *    profile has none.  Parameters whose module is null or never called
 *    (ViT's fused attention) go to the first called module sharing the
 *    longest dotted prefix of their name.
 *  - PipeDream graph.txt: one member per node line, edges on tab lines.
 *
 * Everything that can be wrong in a file is reported, never trusted:
 * unknown names, negative or non-numeric sizes, duplicate names, cycles.
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

/* ---- h200 JSON -------------------------------------------------------- */

static int get_num(struct json_object *o, const char *key, double *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return -ENOENT;
	if (!json_object_is_type(v, json_type_double) &&
	    !json_object_is_type(v, json_type_int))
		return -EINVAL;
	*out = json_object_get_double(v);
	return isfinite(*out) ? 0 : -EINVAL;
}

static const char *get_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static struct json_object *get_arr(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_array))
		return NULL;
	return v;
}

/* Number of leading dotted components shared by a and b. */
/* Bytes per element of a dtype name, by libmercury; < 0 with its message. */
static int dtype_size(struct json_object *v)
{
	if (!json_object_is_type(v, json_type_string))
		return mercury_dtype_size("(not a string)");
	return mercury_dtype_size(json_object_get_string(v));
}

static int common_components(const char *a, const char *b)
{
	int n = 0, i = 0;

	for (;; i++) {
		if ((a[i] == '.' || !a[i]) && (b[i] == '.' || !b[i])) {
			n++;
			if (!a[i] || !b[i])
				break;
			continue;
		}
		if (a[i] != b[i])
			break;
	}
	return n;
}

/* First called member (in call order) sharing the longest prefix. */
static int attach_member(const struct mp_graph *g, const char *name)
{
	int best = -1, bestc = -1;

	for (int m = 0; m < g->nm; m++) {
		int c;

		if (!g->members[m].called)
			continue;
		c = common_components(name, g->members[m].name);
		if (c > bestc || (c == bestc &&
				  g->members[m].order < g->members[best].order)) {
			best = m;
			bestc = c;
		}
	}
	return best;
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

int mp_graph_load_h200(const char *path, struct mp_graph *g,
		       struct mp_err *err)
{
	struct json_object *root, *it, *mods, *calls, *grads, *edges, *map;
	double fwd_total, bwd_total, *ready = NULL, *span = NULL;
	int *ncalls = NULL, *call_m = NULL;
	struct medge *me = NULL;
	int nmod, ncall, ngrad, ne = 0, ret = 0, gsize;
	const char *s;

	memset(g, 0, sizeof(*g));
	root = json_object_from_file(path);
	if (!root)
		return mp_set_err(err, -EINVAL, "%s: not valid JSON: %s", path,
				  json_util_get_last_err() ?
				  json_util_get_last_err() : "?");
	map = json_object_new_object();
	if (!json_object_is_type(root, json_type_object)) {
		ret = mp_set_err(err, -EINVAL, "%s: top level is not an object",
				 path);
		goto out;
	}
	s = get_str(root, "model");
	g->model = mp_strdup(s ? s : "unknown");
	g->format = mp_strdup("h200");
	if (!json_object_object_get_ex(root, "iteration_ms", &it) ||
	    get_num(it, "fwd_ms", &fwd_total) ||
	    get_num(it, "bwd_ms", &bwd_total) || fwd_total < 0 ||
	    bwd_total < 0) {
		ret = mp_set_err(err, -EINVAL,
				 "%s: iteration_ms.fwd_ms/bwd_ms missing or negative",
				 path);
		goto out;
	}
	mods = get_arr(root, "modules");
	calls = get_arr(root, "forward_calls");
	grads = get_arr(root, "grad_ready");
	if (!mods || !calls || !grads) {
		ret = mp_set_err(err, -EINVAL,
				 "%s: modules, forward_calls and grad_ready must be arrays",
				 path);
		goto out;
	}
	nmod = json_object_array_length(mods);
	ncall = json_object_array_length(calls);
	ngrad = json_object_array_length(grads);
	if (!ncall) {
		ret = mp_set_err(err, -EINVAL, "%s: no forward_calls", path);
		goto out;
	}
	g->members = mp_calloc(nmod, sizeof(struct mp_member));
	for (int i = 0; i < nmod; i++) {
		struct json_object *o = json_object_array_get_idx(mods, i);
		const char *name = get_str(o, "module");
		double p;

		if (!name || get_num(o, "params", &p) || p < 0) {
			ret = mp_set_err(err, -EINVAL,
					 "%s: modules[%d]: needs a module name and params >= 0",
					 path, i);
			goto out;
		}
		if (name_idx(map, name) >= 0) {
			ret = mp_set_err(err, -EINVAL,
					 "%s: module %s listed twice", path, name);
			goto out;
		}
		name_put(map, name, g->nm);
		g->members[g->nm].name = mp_strdup(name);
		g->members[g->nm].order = -1;
		g->members[g->nm].node = -1;
		g->nm++;
	}
	ncalls = mp_calloc(g->nm, sizeof(int));
	call_m = mp_calloc(ncall, sizeof(int));
	span = mp_calloc(ncall, sizeof(double));
	for (int i = 0; i < ncall; i++) {
		struct json_object *o = json_object_array_get_idx(calls, i);
		const char *name = get_str(o, "module");
		double st, fw, ob, next_st;
		int m = name_idx(map, name);

		if (m < 0) {
			ret = mp_set_err(err, -EINVAL,
					 "%s: forward_calls[%d] names unknown module %s",
					 path, i, name ? name : "(none)");
			goto out;
		}
		if (get_num(o, "start_ms", &st) || get_num(o, "fwd_ms", &fw) ||
		    get_num(o, "out_bytes", &ob) || st < 0 || fw < 0 ||
		    ob < 0) {
			ret = mp_set_err(err, -EINVAL,
					 "%s: forward_calls[%d] (%s): start_ms, fwd_ms, out_bytes must be numbers >= 0",
					 path, i, name);
			goto out;
		}
		if (i + 1 < ncall) {
			struct json_object *n = json_object_array_get_idx(calls,
									  i + 1);

			if (get_num(n, "start_ms", &next_st))
				next_st = st + fw;
		} else {
			next_st = fwd_total;
		}
		/* span covers the functional ops until the next leaf call */
		span[i] = next_st - st > fw ? next_st - st : fw;
		if (i == 0)
			span[i] += st;
		call_m[i] = m;
		ncalls[m]++;
		if (!g->members[m].called) {
			g->members[m].called = 1;
			g->members[m].order = i;
		}
		g->members[m].fwd_ms += span[i];
		g->members[m].out_bytes = ob;
	}
	/* edges */
	if (json_object_object_get_ex(root, "edges", &edges) &&
	    json_object_is_type(edges, json_type_array)) {
		int n = json_object_array_length(edges);

		me = mp_calloc(n, sizeof(struct medge));
		for (int i = 0; i < n; i++) {
			struct json_object *e = json_object_array_get_idx(edges, i);
			struct json_object *a, *b;
			int ia, ib;

			if (!json_object_is_type(e, json_type_array) ||
			    json_object_array_length(e) != 2) {
				ret = mp_set_err(err, -EINVAL,
						 "%s: edges[%d] is not a [src, dst] pair",
						 path, i);
				goto out;
			}
			a = json_object_array_get_idx(e, 0);
			b = json_object_array_get_idx(e, 1);
			ia = name_idx(map, json_object_get_string(a));
			ib = name_idx(map, json_object_get_string(b));
			if (ia < 0 || ib < 0 || !g->members[ia].called ||
			    !g->members[ib].called) {
				ret = mp_set_err(err, -EINVAL,
						 "%s: edges[%d] %s -> %s names a module that is never called",
						 path, i, json_object_get_string(a),
						 json_object_get_string(b));
				goto out;
			}
			me[ne].a = ia;
			me[ne].b = ib;
			me[ne].bytes = g->members[ia].out_bytes;
			ne++;
		}
	} else if (json_object_object_get_ex(root, "edges", &edges) &&
		   edges) {
		ret = mp_set_err(err, -EINVAL, "%s: edges must be an array or null",
				 path);
		goto out;
	} else {
		me = mp_calloc(ncall, sizeof(struct medge));
		for (int i = 0; i + 1 < ncall; i++) {
			struct json_object *o = json_object_array_get_idx(calls, i);
			double ob = 0;

			if (call_m[i] == call_m[i + 1])
				continue;
			get_num(o, "out_bytes", &ob);
			me[ne].a = call_m[i];
			me[ne].b = call_m[i + 1];
			me[ne].bytes = ob;
			ne++;
		}
	}
	for (int m = 0; m < g->nm; m++)
		ncalls[m] = ncalls[m] > 1;
	ret = build_nodes(g, ne, me, ncalls, err);
	if (ret)
		goto out;
	/* node activations: every call's output */
	for (int i = 0; i < ncall; i++) {
		struct json_object *o = json_object_array_get_idx(calls, i);
		double ob = 0;

		get_num(o, "out_bytes", &ob);
		g->nodes[g->members[call_m[i]].node].act_bytes += ob;
	}
	/* uncalled modules follow the prefix rule */
	for (int m = 0; m < g->nm; m++) {
		if (g->members[m].called)
			continue;
		g->members[m].node =
			g->members[attach_member(g, g->members[m].name)].node;
	}
	/*
	 * parameters: gradient bytes are numel times the entry's "dtype" or
	 * the profile's "grad_dtype" (libmercury's table), fp32 if neither
	 */
	gsize = 4;
	if (json_object_object_get_ex(root, "grad_dtype", &it) &&
	    (gsize = dtype_size(it)) < 0) {
		ret = mp_set_err(err, -EINVAL, "%s: grad_dtype: %s", path,
				 mercury_last_error());
		goto out;
	}
	g->params = mp_calloc(ngrad, sizeof(struct mp_param));
	ready = mp_calloc(ngrad, sizeof(double));
	for (int i = 0; i < ngrad; i++) {
		struct json_object *o = json_object_array_get_idx(grads, i);
		struct json_object *mv;
		const char *pname = get_str(o, "param");
		const char *mname = NULL;
		double numel, r;
		int m = -1, esz = gsize;

		if (!pname || get_num(o, "numel", &numel) || numel < 0 ||
		    get_num(o, "ready_ms", &r) || r < 0) {
			ret = mp_set_err(err, -EINVAL,
					 "%s: grad_ready[%d]: needs param, numel >= 0, ready_ms >= 0",
					 path, i);
			goto out;
		}
		if (json_object_object_get_ex(o, "module", &mv) && mv) {
			mname = json_object_get_string(mv);
			m = name_idx(map, mname);
			if (m < 0) {
				ret = mp_set_err(err, -EINVAL,
						 "%s: grad_ready[%d] (%s) names unknown module %s",
						 path, i, pname, mname);
				goto out;
			}
		}
		if (m < 0 || !g->members[m].called)
			m = attach_member(g, pname);
		g->params[i].name = mp_strdup(pname);
		g->params[i].member = m;
		/*
		 * A tied tensor is listed once, under its first user; the
		 * other owners only need a copy where they run (sched.c).
		 */
		if (json_object_object_get_ex(o, "shared_with", &mv) && mv) {
			int ns;

			if (!json_object_is_type(mv, json_type_array)) {
				ret = mp_set_err(err, -EINVAL,
						 "%s: grad_ready[%d] (%s): shared_with must be an array of module names",
						 path, i, pname);
				g->np++;
				goto out;
			}
			ns = json_object_array_length(mv);
			g->params[i].shared = mp_calloc(ns + 1, sizeof(int));
			for (int k = 0; k < ns; k++) {
				const char *sn = json_object_get_string(
					json_object_array_get_idx(mv, k));
				int sm = sn ? name_idx(map, sn) : -1;

				if (sm < 0) {
					ret = mp_set_err(err, -EINVAL,
							 "%s: grad_ready[%d] (%s): shared_with names unknown module %s",
							 path, i, pname,
							 sn ? sn : "(none)");
					g->np++;
					goto out;
				}
				if (!g->members[sm].called)
					sm = attach_member(g, sn);
				g->params[i].shared[g->params[i].nshared++] = sm;
			}
		}
		if (json_object_object_get_ex(o, "dtype", &mv) &&
		    (esz = dtype_size(mv)) < 0) {
			ret = mp_set_err(err, -EINVAL, "%s: grad_ready[%d] (%s): %s",
					 path, i, pname, mercury_last_error());
			g->np++;
			goto out;
		}
		g->params[i].bytes = (double)esz * numel;
		g->params[i].ready_idx = i;
		ready[i] = r;
		g->np++;
		/* memory: fp32 parameters (and their copies), whatever the wire */
		g->nodes[g->members[m].node].param_bytes += 4.0 * numel;
	}
	h200_bwd_from_ready(g, ready, bwd_total);
	ret = mp_graph_finish(g, err);
out:
	free(ready);
	free(span);
	free(ncalls);
	free(call_m);
	free(me);
	json_object_put(map);
	json_object_put(root);
	if (ret)
		mp_graph_free(g);
	return ret;
}

/* ---- PipeDream graph.txt ---------------------------------------------- */

static int parse_kv(char *s, const char *key, double *out)
{
	char *p = strstr(s, key);
	char *end;

	if (!p || (p != s && p[-1] != ' ' && p[-1] != ','))
		return -ENOENT;
	p += strlen(key);
	if (*p != '=')
		return -ENOENT;
	p++;
	if (*p == '[') {
		/* multi-output node: [a; b; c] is the sum of its outputs */
		double sum = 0;

		p++;
		for (;;) {
			double v = strtod(p, &end);

			if (end == p || !isfinite(v))
				return -EINVAL;
			if (v < 0)
				return -ERANGE;
			sum += v;
			p = end;
			while (*p == ' ')
				p++;
			if (*p == ';') {
				p++;
				continue;
			}
			if (*p == ']')
				break;
			return -EINVAL;
		}
		*out = sum;
		return 0;
	}
	*out = strtod(p, &end);
	if (end == p || !isfinite(*out))
		return -EINVAL;
	if (*out < 0)
		return -ERANGE;
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int mp_graph_load_pipedream(const char *path, struct mp_graph *g,
			    struct mp_err *err)
{
	static const char *const keys[] = { "forward_compute_time",
		"backward_compute_time", "activation_size", "parameter_size" };
	struct json_object *map = json_object_new_object();
	struct medge *me = NULL;
	int ne = 0, cap_e = 0, cap_m = 0, lineno = 0, ret = 0;
	double (*vals)[4] = NULL;
	int *reuse = NULL;
	char *line = NULL;
	size_t lcap = 0;
	FILE *f;

	memset(g, 0, sizeof(*g));
	f = fopen(path, "r");
	if (!f) {
		json_object_put(map);
		return mp_set_err(err, -errno, "%s: %s", path, strerror(errno));
	}
	{
		const char *b = strrchr(path, '/');
		char *dot;

		g->model = mp_strdup(b ? b + 1 : path);
		dot = strstr(g->model, ".graph");
		if (dot)
			*dot = 0;
	}
	g->format = mp_strdup("pipedream");
	while (getline(&line, &lcap, f) > 0) {
		char *s, *sep, *last;

		lineno++;
		s = trim(line);
		if (!*s)
			continue;
		sep = strstr(s, " -- ");
		if (!sep) {
			ret = mp_set_err(err, -EINVAL,
					 "%s:%d: expected 'a -- b' or 'node -- op -- key=value,...'",
					 path, lineno);
			goto out;
		}
		if (line[0] == '\t' || line[0] == ' ') {
			char *a = s, *b = trim(sep + 4);
			int ia, ib;

			*sep = 0;
			a = trim(a);
			ia = name_idx(map, a);
			ib = name_idx(map, b);
			if (ia < 0 || ib < 0) {
				ret = mp_set_err(err, -EINVAL,
						 "%s:%d: edge %s -- %s names a missing node",
						 path, lineno, a, b);
				goto out;
			}
			if (ne == cap_e) {
				cap_e = cap_e ? 2 * cap_e : 256;
				me = realloc(me, cap_e * sizeof(*me));
				if (!me)
					exit(1);
			}
			me[ne].a = ia;
			me[ne].b = ib;
			me[ne].bytes = vals[ia][2];
			ne++;
			continue;
		}
		last = sep;
		for (char *p = strstr(sep + 4, " -- "); p; p = strstr(p + 4, " -- "))
			last = p;
		if (last == sep) {
			ret = mp_set_err(err, -EINVAL,
					 "%s:%d: node line needs 'name -- op -- key=value,...'",
					 path, lineno);
			goto out;
		}
		*sep = 0;
		s = trim(s);
		if (name_idx(map, s) >= 0) {
			ret = mp_set_err(err, -EINVAL, "%s:%d: node %s defined twice",
					 path, lineno, s);
			goto out;
		}
		if (g->nm == cap_m) {
			cap_m = cap_m ? 2 * cap_m : 256;
			g->members = realloc(g->members,
					     cap_m * sizeof(*g->members));
			vals = realloc(vals, cap_m * sizeof(*vals));
			if (!g->members || !vals)
				exit(1);
		}
		memset(&g->members[g->nm], 0, sizeof(g->members[0]));
		for (int k = 0; k < 4; k++) {
			int r = parse_kv(last + 4, keys[k], &vals[g->nm][k]);

			if (r) {
				ret = mp_set_err(err, -EINVAL,
						 "%s:%d: node %s: %s %s", path,
						 lineno, s, keys[k],
						 r == -ERANGE ? "is negative" :
						 r == -ENOENT ? "is missing" :
						 "is not a number");
				goto out;
			}
		}
		name_put(map, s, g->nm);
		g->members[g->nm].name = mp_strdup(s);
		g->members[g->nm].called = 1;
		if (!strncmp(sep + 4, "Input", 5))
			g->members[g->nm].role = MP_ROLE_INPUT;
		else if (!strncmp(sep + 4, "__getitem__", 11))
			g->members[g->nm].role = MP_ROLE_GETITEM;
		g->members[g->nm].order = g->nm;
		g->members[g->nm].fwd_ms = vals[g->nm][0];
		g->members[g->nm].out_bytes = vals[g->nm][2];
		g->nm++;
	}
	if (!g->nm) {
		ret = mp_set_err(err, -EINVAL, "%s: no nodes", path);
		goto out;
	}
	reuse = mp_calloc(g->nm, sizeof(int));
	ret = build_nodes(g, ne, me, reuse, err);
	if (ret)
		goto out;
	g->params = mp_calloc(g->nm, sizeof(struct mp_param));
	for (int m = 0; m < g->nm; m++) {
		struct mp_node *nd = &g->nodes[g->members[m].node];
		char buf[512];

		nd->bwd_ms += vals[m][1];
		nd->act_bytes += vals[m][2];
		nd->param_bytes += vals[m][3];
		if (vals[m][3] > 0) {
			snprintf(buf, sizeof(buf), "%s.param", g->members[m].name);
			g->params[g->np].name = mp_strdup(buf);
			g->params[g->np].member = m;
			g->params[g->np].bytes = vals[m][3];
			g->params[g->np].ready_idx = -1;
			g->np++;
		}
	}
	ret = mp_graph_finish(g, err);
out:
	fclose(f);
	free(line);
	free(me);
	free(vals);
	free(reuse);
	json_object_put(map);
	if (ret)
		mp_graph_free(g);
	return ret;
}

int mp_graph_load(const char *path, struct mp_graph *g, struct mp_err *err)
{
	FILE *f = fopen(path, "r");
	int c;

	if (!f)
		return mp_set_err(err, -errno, "%s: %s", path, strerror(errno));
	do {
		c = fgetc(f);
	} while (c != EOF && isspace(c));
	fclose(f);
	if (c == EOF)
		return mp_set_err(err, -EINVAL, "%s: empty file", path);
	if (c == '{' || c == '[')
		return mp_graph_load_h200(path, g, err);
	return mp_graph_load_pipedream(path, g, err);
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
