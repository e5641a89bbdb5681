// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The plan: placement, predicted and simulated step time, memory, and the
 * priority plan for the tagger.
 *
 * Every tensor that crosses the network gets a deadline, the instant the
 * next computation needs it, and tags are the deadlines' ranks (1 = needed
 * soonest):
 *  - act:<producer>-><consumer>: an activation sent forward; needed when
 *    the first consumer on the receiving device starts;
 *  - actgrad:<consumer>-><producer>: its gradient sent back in backward;
 *    needed when the producer's backward starts;
 *  - a parameter gradient (h200: the parameter's name; pipedream:
 *    <node>.param): needed in the next step when its layer's forward starts,
 *    i.e. at step time + the layer's forward start in this schedule.  Every
 *    parameter gets one, on one device too (data-parallel replicas still
 *    exchange them); src and dst are both the device that owns the layer
 *    (the exchange is between that device and its replicas).
 * So all in-step activations come before the gradients, and gradients are
 * ordered by the next forward pass, first layer first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>
#include <mercury/mercury.h>

#include "place.h"

void mp_plan_free(struct mp_plan *p)
{
	for (int i = 0; i < p->nprio; i++)
		free(p->prio[i].tensor);
	free(p->prio);
	free(p->mem);
	free(p->xchg_bytes);
	free(p->op);
	free(p->op_off);
	memset(p, 0, sizeof(*p));
}

struct prio_key {
	struct mp_prio *p;
	int tie;		/* smaller first among equal deadlines */
};

static int cmp_prio(const void *a, const void *b)
{
	const struct prio_key *x = a, *y = b;

	if (x->p->deadline_ms != y->p->deadline_ms)
		return x->p->deadline_ms < y->p->deadline_ms ? -1 : 1;
	if (x->tie != y->tie)
		return x->tie < y->tie ? -1 : 1;
	return strcmp(x->p->tensor, y->p->tensor);
}

static char *fmt_name(const char *a, const char *sep, const char *b,
		      const char *pre)
{
	size_t len = strlen(pre) + strlen(a) + strlen(sep) + strlen(b) + 1;
	char *s = mp_calloc(len, 1);

	snprintf(s, len, "%s%s%s%s", pre, a, sep, b);
	return s;
}

static int one_device(const int *place, int n)
{
	for (int v = 1; v < n; v++)
		if (place[v] != place[0])
			return 0;
	return 1;
}

static int cmp_member_order(const void *a, const void *b, void *arg)
{
	const struct mp_graph *g = arg;
	int x = g->members[*(const int *)a].order;
	int y = g->members[*(const int *)b].order;

	return (x > y) - (x < y);
}

int mp_plan_build(const struct mp_graph *g, const struct mp_cluster *c,
		  int algo, const int *place, double solve_ms,
		  struct mp_plan *p, struct mp_err *err)
{
	double *xstart = NULL;
	struct mp_units U;
	struct mp_sched S;
	struct mp_sim sim;
	struct prio_key *keys;
	int ret, np = 0;

	memset(p, 0, sizeof(*p));
	p->g = g;
	p->c = c;
	p->algo = algo;
	p->place = place;
	p->solve_ms = solve_ms;
	ret = mp_units_build(g, c, place, &U);
	if (ret)
		return mp_set_err(err, ret, "invalid placement");
	ret = mp_sched_run(&U, &S);
	if (ret) {
		mp_units_free(&U);
		return mp_set_err(err, ret, "the schedule deadlocked");
	}
	ret = mp_sim_run(g, c, place, &U, &S, &sim, err);
	if (ret)
		goto out;
	p->step_ms = S.step_ms;
	p->sim_ms = sim.step_ms;
	if (fabs(p->sim_ms - p->step_ms) > 1e-9 * (1 + p->step_ms)) {
		ret = mp_set_err(err, -EPROTO,
				 "simulator (%.6f ms) and prediction (%.6f ms) disagree",
				 p->sim_ms, p->step_ms);
		goto out;
	}
	/* each device's task order, as the engine ran it */
	p->op_off = mp_calloc(c->d + 1, sizeof(int));
	p->op = mp_calloc(2 * g->n + 1, sizeof(int));
	for (int d = 0; d < c->d; d++) {
		p->op_off[d + 1] = p->op_off[d];
		for (int k = S.order_off[d]; k < S.order_off[d + 1]; k++) {
			const struct mp_unit *x = &U.u[S.order[k]];

			p->op[p->op_off[d + 1]++] = 2 * x->node +
						    (x->kind == MP_U_BWD);
		}
	}
	mp_lower_bound(g, c, &p->lb);
	p->mem = mp_calloc(c->d, sizeof(double));
	mp_mem_static(g, c, place, p->mem);

	p->prio = mp_calloc(U.nu + g->np + 1, sizeof(struct mp_prio));
	keys = mp_calloc(U.nu + g->np + 1, sizeof(*keys));
	for (int i = 0; i < U.nu; i++) {
		const struct mp_unit *x = &U.u[i];
		struct mp_prio *q = &p->prio[np];
		const char *prod, *cons;
		double dl = -1;

		if (x->kind != MP_U_XFWD && x->kind != MP_U_XBWD)
			continue;
		prod = g->members[x->member].name;
		cons = g->members[x->first_dst].name;
		for (int k = U.succ_off[i]; k < U.succ_off[i + 1]; k++)
			if (dl < 0 || U.u[U.succ[k]].start < dl)
				dl = U.u[U.succ[k]].start;
		q->bytes = x->bytes;
		q->deadline_ms = dl;
		if (x->kind == MP_U_XFWD) {
			q->tensor = fmt_name(prod, "->", cons, "act:");
			q->src = place[x->node];
			q->dst = x->dst;
		} else {
			q->tensor = fmt_name(cons, "->", prod, "actgrad:");
			q->src = x->src;
			q->dst = place[x->node];
		}
		keys[np].p = q;
		keys[np].tie = 0;
		np++;
	}
	/*
	 * On one device the next forward runs in the profile's execution
	 * order, whatever order the list scheduler found for this step (it
	 * may run a ResNet downsample before bn3: same step time, but 97
	 * gradient pairs inverted against libmercury's order, issue 15):
	 * there a member's forward starts after every member called before
	 * it.  Across devices the schedule's start times decide.
	 */
	if (one_device(place, g->n)) {
		int *mo = mp_calloc(g->nm + 1, sizeof(int)), k = 0;
		double t = 0;

		xstart = mp_calloc(g->nm + 1, sizeof(double));
		for (int m = 0; m < g->nm; m++)
			if (g->members[m].called)
				mo[k++] = m;
		qsort_r(mo, k, sizeof(int), cmp_member_order, (void *)g);
		for (int i = 0; i < k; i++) {
			xstart[mo[i]] = t;
			t += g->members[mo[i]].fwd_ms / c->dev[place[0]].speed;
		}
		free(mo);
	}
	for (int i = 0; i < g->np; i++) {
		const struct mp_param *pa = &g->params[i];
		const struct mp_member *m = &g->members[pa->member];
		int v = m->node, d = place[v];
		struct mp_prio *q = &p->prio[np];

		q->tensor = mp_strdup(pa->name);
		q->bytes = pa->bytes;
		q->src = q->dst = d;
		if (xstart)
			q->deadline_ms = S.step_ms + xstart[pa->member];
		else
			q->deadline_ms = S.step_ms + U.u[v].start +
					 m->off_ms / c->dev[d].speed;
		keys[np].p = q;
		/* same layer: the one whose gradient came last is first */
		keys[np].tie = pa->ready_idx >= 0 ? -pa->ready_idx : 0;
		np++;
	}
	qsort(keys, np, sizeof(*keys), cmp_prio);
	{
		struct mp_prio *sorted = mp_calloc(np + 1, sizeof(*sorted));

		for (int i = 0; i < np; i++) {
			sorted[i] = *keys[i].p;
			sorted[i].tag = i + 1;
		}
		free(p->prio);
		p->prio = sorted;
		p->nprio = np;
	}
	free(keys);
out:
	free(xstart);
	mp_sim_free(&sim);
	mp_sched_free(&S);
	mp_units_free(&U);
	if (ret)
		mp_plan_free(p);
	return ret;
}

/*
 * One iteration of the hybrid: this step's units, then every parameter's
 * all-reduce among the replicas (ring: 2 (N-1)/N of its bytes each way)
 * on its device's port to the other nodes (the self link, which no
 * in-step transfer uses), after its layer's backward; then the next
 * forward, each layer waiting for its parameters' exchange, over the same
 * devices and links.  The iteration time is the end of that next forward
 * minus this step's forward (the loss).  The port serves the highest
 * priority first: the plan's tag (Mercury) or the gradient's arrival
 * (FIFO: the order backward produces them).
 */
static double hybrid_run(const struct mp_plan *p, const struct mp_units *U,
			 int fifo)
{
	const struct mp_graph *g = p->g;
	const struct mp_cluster *c = p->c;
	const int *place = p->place;
	int n = g->n, nu0 = U->nu, nu, np = 0, cap, *pa, *pb, loss = -1;
	int *fnext = mp_calloc(n, sizeof(int)), *tag = mp_calloc(g->np, sizeof(int));
	struct mp_units V = { 0 };
	struct mp_sched S;
	double t = -1;

	for (int i = 0; i < g->np; i++)
		for (int k = 0; k < p->nprio; k++)
			if (!strcmp(p->prio[k].tensor, g->params[i].name))
				tag[i] = p->prio[k].tag;
	cap = nu0 + g->np + 2 * n + 8;
	V.u = mp_calloc(cap, sizeof(*V.u));
	memcpy(V.u, U->u, nu0 * sizeof(*V.u));
	V.nres = U->nres;
	V.ndev = U->ndev;
	pa = mp_calloc(U->succ_off[nu0] + 4 * (size_t)cap + 4 * g->ne, sizeof(int));
	pb = mp_calloc(U->succ_off[nu0] + 4 * (size_t)cap + 4 * g->ne, sizeof(int));
	for (int x = 0; x < nu0; x++) {
		V.u[x].ndeps = 0;
		if (V.u[x].kind == MP_U_LOSS)
			loss = x;
		for (int k = U->succ_off[x]; k < U->succ_off[x + 1]; k++) {
			pa[np] = x;
			pb[np++] = U->succ[k];
		}
	}
	nu = nu0;
	/* the next forward */
	for (int v = 0; v < n; v++) {
		fnext[v] = nu;
		V.u[nu] = U->u[v];
		V.u[nu].ndeps = 0;
		nu++;
	}
	for (int x = 0; x < nu0; x++) {
		const struct mp_unit *u = &U->u[x];

		if (u->kind != MP_U_XFWD)
			continue;
		V.u[nu] = *u;
		V.u[nu].ndeps = 0;
		pa[np] = fnext[u->node];
		pb[np++] = nu;
		for (int k = U->succ_off[x]; k < U->succ_off[x + 1]; k++) {
			pa[np] = nu;
			pb[np++] = fnext[U->succ[k]];
		}
		nu++;
		if (nu >= cap)
			abort();
	}
	for (int e = 0; e < g->ne; e++)
		if (place[g->edges[e].src] == place[g->edges[e].dst]) {
			pa[np] = fnext[g->edges[e].src];
			pb[np++] = fnext[g->edges[e].dst];
		}
	/* the exchange */
	for (int i = 0; i < g->np; i++) {
		const struct mp_param *pr = &g->params[i];
		int v = g->members[pr->member].node, d = place[v];
		struct mp_unit *x = &V.u[nu];

		memset(x, 0, sizeof(*x));
		x->kind = MP_U_XTIE;
		x->node = v;
		x->member = pr->member;
		/* the port to the other nodes (--bandwidth): the self link,
		 * apart from the cluster's NICs */
		x->res = MP_LINK(c, d, d);
		x->res2 = -1;
		x->bytes = 2.0 * (p->replicas - 1) / p->replicas * pr->bytes;
		x->dur = x->bytes / p->dp_bw_Bps * 1e3;
		/* arrival: backward runs last layers first; ties by readiness */
		x->prio = fifo ? U->u[n + v].prio * 1e3 -
				 (pr->ready_idx >= 0 ? pr->ready_idx : 0) :
				 -(double)tag[i];
		pa[np] = n + v;
		pb[np++] = nu;
		pa[np] = nu;
		pb[np++] = fnext[v];
		nu++;
	}
	V.nu = nu;
	V.succ_off = mp_calloc(nu + 1, sizeof(int));
	V.succ = mp_calloc(np + 1, sizeof(int));
	for (int i = 0; i < np; i++) {
		V.succ_off[pa[i] + 1]++;
		V.u[pb[i]].ndeps++;
	}
	for (int i = 0; i < nu; i++)
		V.succ_off[i + 1] += V.succ_off[i];
	{
		int *fill = mp_calloc(nu + 1, sizeof(int));

		for (int i = 0; i < np; i++)
			V.succ[V.succ_off[pa[i]] + fill[pa[i]]++] = pb[i];
		free(fill);
	}
	if (!mp_sched_run(&V, &S)) {
		t = S.step_ms - V.u[loss].finish;
		mp_sched_free(&S);
	}
	free(pa);
	free(pb);
	free(fnext);
	free(tag);
	mp_units_free(&V);
	return t;
}

int mp_plan_hybrid(struct mp_plan *p, int replicas, double bandwidth_Bps,
		   struct mp_err *err)
{
	const struct mp_graph *g = p->g;
	const struct mp_cluster *c = p->c;
	struct mp_units U;
	int ret;

	if (replicas < 1)
		return mp_set_err(err, -EINVAL, "replicas must be >= 1");
	p->replicas = replicas;
	p->dp_bw_Bps = bandwidth_Bps > 0 ? bandwidth_Bps : c->bw[0];
	free(p->xchg_bytes);
	p->xchg_bytes = mp_calloc(c->d, sizeof(double));
	for (int i = 0; i < g->np; i++)
		p->xchg_bytes[p->place[g->members[g->params[i].member].node]] +=
			2.0 * (replicas - 1) / replicas * g->params[i].bytes;
	ret = mp_units_build(g, c, p->place, &U);
	if (ret)
		return mp_set_err(err, ret, "invalid placement");
	p->hybrid_ms = hybrid_run(p, &U, 0);
	p->hybrid_fifo_ms = hybrid_run(p, &U, 1);
	mp_units_free(&U);
	if (p->hybrid_ms < 0 || p->hybrid_fifo_ms < 0)
		return mp_set_err(err, -EDEADLK, "hybrid: the schedule deadlocked");
	return 0;
}

static struct json_object *jbytes(double b)
{
	/* a NaN stays one, for mp_json_finite() to refuse */
	if (!isfinite(b) || fabs(b) > 9e18)
		return json_object_new_double(NAN);
	return json_object_new_int64((int64_t)llround(b));
}

static struct json_object *jms(double ms)
{
	/* microsecond resolution is plenty and keeps the file readable */
	return json_object_new_double(round(ms * 1e6) / 1e6);
}

int mp_plan_squeeze(struct mp_plan *p, unsigned int levels,
		    struct mp_err *err)
{
	unsigned int *t = mp_calloc(p->nprio + 1, sizeof(*t));
	int ret;

	for (int i = 0; i < p->nprio; i++)
		t[i] = p->prio[i].tag;
	/* no --levels: only as far as the wire's tags reach */
	ret = mercury_plan_squeeze_tags(t, p->nprio,
					levels ? levels : MERCURY_MAX_TAG);
	for (int i = 0; !ret && i < p->nprio; i++)
		p->prio[i].tag = t[i];
	free(t);
	if (ret)
		mp_set_err(err, ret, "--levels %u: %s", levels,
			   mercury_last_error());
	return ret;
}

/*
 * No NaN or Infinity in a plan: json-c would write them as the bare
 * words NaN and Infinity, which no JSON reader accepts, and they only
 * come from inputs too large to compute with.
 */
int mp_json_finite(struct json_object *o)
{
	struct json_object_iter it;

	switch (json_object_get_type(o)) {
	case json_type_double:
		return isfinite(json_object_get_double(o));
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(o); i++)
			if (!mp_json_finite(json_object_array_get_idx(o, i)))
				return 0;
		return 1;
	case json_type_object:
		json_object_object_foreachC(o, it)
			if (!mp_json_finite(it.val))
				return 0;
		return 1;
	default:
		return 1;
	}
}

/* Hand a json-c section to the plan as an extra key (unless *ret); takes o. */
static void add_extra(struct mercury_plan *mp, int *ret, const char *key,
		      struct json_object *o, struct mp_err *err)
{
	if (!*ret && o && !mp_json_finite(o))
		*ret = mp_set_err(err, -EDOM,
				  "plan: %s is not a finite number (inputs too large?)",
				  key);
	if (!*ret)
		*ret = o ? mercury_plan_set_extra(mp, key,
				json_object_to_json_string_ext(o,
					JSON_C_TO_STRING_PLAIN |
					JSON_C_TO_STRING_NOSLASHESCAPE)) :
			   -ENOMEM;
	json_object_put(o);
}

int mp_plan_mercury(const struct mp_plan *p, const struct mp_plan_fmt *f,
		    struct json_object *pipeline, struct mercury_plan **out,
		    struct mp_err *err)
{
	const struct mp_graph *g = p->g;
	const struct mp_cluster *c = p->c;
	struct mercury_tag_opts to = {
		.sz = sizeof(to), .source = f->tag_source, .shift = f->shift,
		.mask = f->mask,
	};
	struct json_object *pl, *mem, *lb, *dl;
	struct mercury_plan *mp;
	unsigned int top = 0;
	int used = 0, ret;

	*out = NULL;
	ret = mercury_plan_new(&mp);
	for (int i = 0; !ret && i < p->nprio; i++) {
		const struct mp_prio *q = &p->prio[i];
		struct mercury_plan_entry e = {
			.tensor = q->tensor, .tag = q->tag,
			.bytes = (uint64_t)llround(q->bytes),
			.src = c->dev[q->src].name, .dst = c->dev[q->dst].name,
		};

		ret = mercury_plan_add(mp, &e);
		if (q->tag > (int)top)
			top = q->tag;
	}
	/* --levels squeezes, by the same rule as mp_plan_squeeze() */
	if (!ret && (f->levels || top))
		ret = mercury_plan_set_levels(mp, f->levels ? f->levels : top);
	if (!ret)
		ret = mercury_plan_set_tag_opts(mp, &to);
	if (ret)
		goto fail;

	add_extra(mp, &ret, "model", json_object_new_string(g->model), err);
	add_extra(mp, &ret, "format", json_object_new_string(g->format), err);
	add_extra(mp, &ret, "algorithm",
		  json_object_new_string(mp_algo_name(p->algo)), err);
	add_extra(mp, &ret, "solve_ms", jms(p->solve_ms), err);
	add_extra(mp, &ret, "step_time_ms", jms(p->step_ms), err);
	add_extra(mp, &ret, "simulated_step_time_ms", jms(p->sim_ms), err);
	add_extra(mp, &ret, "lower_bound_ms", jms(p->lb.lb_ms), err);
	lb = json_object_new_object();
	json_object_object_add(lb, "critical_path_ms", jms(p->lb.cp_ms));
	json_object_object_add(lb, "work_ms", jms(p->lb.work_ms));
	json_object_object_add(lb, "memory_ms", jms(p->lb.mem_ms));
	json_object_object_add(lb, "comm_path_ms", jms(p->lb.comm_ms));
	add_extra(mp, &ret, "lower_bound_parts", lb, err);
	add_extra(mp, &ret, "ratio_to_lower_bound",
			       json_object_new_double(round(p->step_ms /
					p->lb.lb_ms * 1e4) / 1e4), err);
	for (int d = 0; d < c->d; d++)
		if (p->mem[d] > 0)
			used++;
	add_extra(mp, &ret, "devices_used", json_object_new_int(used), err);
	add_extra(mp, &ret, "nodes", json_object_new_int(g->n), err);
	pl = json_object_new_object();
	for (int m = 0; m < g->nm; m++)
		json_object_object_add(pl, g->members[m].name,
				       json_object_new_string(
					       c->dev[p->place[g->members[m].node]].name));
	add_extra(mp, &ret, "placement", pl, err);
	if (p->replicas > 1) {
		struct json_object *h = json_object_new_object();
		struct json_object *xb = json_object_new_object();

		json_object_object_add(h, "replicas",
				       json_object_new_int(p->replicas));
		json_object_object_add(h, "bandwidth_Bps",
				       json_object_new_double(p->dp_bw_Bps));
		json_object_object_add(h, "iteration_ms", jms(p->hybrid_ms));
		json_object_object_add(h, "iteration_fifo_ms",
				       jms(p->hybrid_fifo_ms));
		for (int d = 0; d < c->d; d++)
			json_object_object_add(xb, c->dev[d].name,
					       jbytes(p->xchg_bytes[d]));
		json_object_object_add(h, "exchange_bytes", xb);
		add_extra(mp, &ret, "data_parallel", h, err);
	}
	mem = json_object_new_object();
	for (int d = 0; d < c->d; d++)
		json_object_object_add(mem, c->dev[d].name, jbytes(p->mem[d]));
	add_extra(mp, &ret, "memory_bytes", mem, err);
	/*
	 * What the step time assumes: the network it was priced on and,
	 * per device, the order its tasks ran in ("F:" / "B:" and the
	 * node's first member).  A runtime that runs each device's tasks
	 * in this order (and each NIC's transfers by the tags) reproduces
	 * the step; one that runs whatever is ready may do better or
	 * worse, one in program order can be slower.
	 */
	add_extra(mp, &ret, "network",
		  json_object_new_string(c->per_pair ? "per_pair" : "nic"), err);
	if (p->op_off) {
		struct json_object *oo = json_object_new_object();

		for (int d = 0; d < c->d; d++) {
			struct json_object *a = json_object_new_array();

			for (int k = p->op_off[d]; k < p->op_off[d + 1]; k++) {
				int v = p->op[k] / 2;
				char *nm = fmt_name(p->op[k] % 2 ? "B" : "F", ":",
						    g->nodes[v].name, "");

				json_object_array_add(a,
						      json_object_new_string(nm));
				free(nm);
			}
			json_object_object_add(oo, c->dev[d].name, a);
		}
		add_extra(mp, &ret, "op_order", oo, err);
	}
	if (pipeline)
		add_extra(mp, &ret, "pipeline", json_object_get(pipeline), err);
	/* when each tensor is needed, in the priorities' order */
	dl = json_object_new_object();
	for (int i = 0; i < p->nprio; i++)
		json_object_object_add(dl, p->prio[i].tensor,
				       jms(p->prio[i].deadline_ms));
	add_extra(mp, &ret, "deadline_ms", dl, err);
	if (ret)
		goto fail;
	*out = mp;
	return 0;
fail:
	if (ret != -EDOM)
		mp_set_err(err, ret, "%s%s", mercury_last_error(),
			   ret == -ERANGE ? " (--levels)" : "");
	mercury_plan_free(mp);
	return ret;
}
