// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Pipelined placement: stages over devices, 1F1B micro-batches, replicated
 * stages (PipeDream's setting).  The objective is throughput: the time
 * between two micro-batches leaving the pipeline in steady state (the
 * period), which is the slowest of the stages and of the links.
 *
 * Stages are contiguous stretches of one topological order of the nodes
 * (every prefix of a topological order is closed under predecessors, so
 * every cut sends forward only).  A dynamic programme over (prefix, machines
 * used, replicas of the last stage) finds the best partition exactly, for
 * that order, under one of two cost models.  Mercury's prices a cut by X,
 * every tensor that crosses it: the output of each member in the prefix
 * with a consumer after it, counted once however many consumers it has
 * there (a residual block's skip tensor, a concatenated feature map, not
 * only the prefix's last outputs).  PipeDream's prices it as its
 * optimizer's code does (augment_antichain, pcum_pipedream() below): every
 * crossing tensor and also one that feeds two of the prefix's last nodes
 * along different paths.  On PipeDream graphs both models zero the Input
 * sources (data loading, not the device's) and drop the __getitem__ sinks,
 * as its optimizer does; their edges carry nothing.
 *
 *  - PipeDream's (optimizer_graph_hierarchical.py, as published): a stage
 *    of compute C and parameters P on r replicas takes
 *    (C + 4 (r-1) P / (r B)) / r per micro-batch (the weight exchange does
 *    not overlap compute); a cut between r1 and r2 replicas costs
 *    2 X / (B r) on either side, r being that side's replicas, so
 *    2 X / (B min(r1, r2)) in all; memory is not constrained.
 *  - Mercury's (the default): the exchange between replicas is a ring
 *    all-reduce, 2 (r-1) P / (r B), on the device's own port, overlapping
 *    compute (gradients leave as they become ready, in the plan's order),
 *    so a stage takes max(C, AR) / r; micro-batch i runs on replica i mod r
 *    of every stage.  The network is the tools' rule (mt_net_route(),
 *    userspace/common/net.c): one full-duplex NIC per device.  A replica's
 *    NIC egress sends, per micro-batch it runs, the activations of the cut
 *    after it and the gradient of the cut before it, and its ingress
 *    receives as much; the all-reduce (AR) shares them.  So a stage takes
 *    max(C, AR + N) / r with N = (latency + X_in / B) + (latency +
 *    X_out / B) (each term where that cut exists), and a cut alone costs
 *    (latency + X / B) / min(r1, r2).  Under a per-pair cluster
 *    (network.per_pair) each directed pair has its own link instead: a
 *    cut carries X forward on one and its gradient back on the other,
 *    spread over lcm(r1, r2) links, (latency + X / B) / lcm(r1, r2), and
 *    a stage takes max(C, AR) / r.  Every device's memory is checked
 *    (below).
 *
 * Memory of a stage replica with w micro-batches in flight (1F1B: w =
 * ceil(machines from this stage to the end / r)): 3 P (weights, gradients,
 * momentum) + (w - 1) P (PipeDream's stashed weight versions) + w x (its
 * stashed activations + the activations it received); a tied tensor whose
 * first owner is in another stage adds its weights and gradient (x2, and
 * its stashed versions).  Its gradient's trip to the first owner's stage
 * is not in the period (nor in PipeDream's model).
 *
 * mp_pipe_sim() runs the plan through the timing engine (sched.c): F and B
 * units per micro-batch and replica in strict 1F1B order (w forwards, then
 * one backward and one forward in turn), transfers on the NICs (or the
 * directed links of a per-pair cluster), all-reduces on each replica's NIC
 * (per-pair: on the self link, which no transfer uses).  With
 * enough stash the steady-state period it measures agrees with the
 * prediction.  Where memory keeps a stage's stash below what covers its
 * loop (Little's law), the period depends on the schedule: the solver then
 * simulates strict 1F1B and a backward-first work-conserving order (the
 * w-th next forward still waits for a backward) and reports the faster
 * one's simulated period (stash_limited in the output).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"

static int ignored(const struct mp_graph *g, int v)
{
	/* single-member nodes only: PipeDream graphs */
	for (int m = 0; m < g->nm; m++) {
		if (g->members[m].node != v)
			continue;
		if (g->members[m].role == MP_ROLE_INPUT &&
		    g->in_off[v] == g->in_off[v + 1])
			return 1;
		if (g->members[m].role == MP_ROLE_GETITEM &&
		    g->out_off[v] == g->out_off[v + 1])
			return 1;
	}
	return 0;
}

static int gcd(int a, int b)
{
	while (b) {
		int t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static int lcm(int a, int b)
{
	return a / gcd(a, b) * b;
}

/* Prefix sums and cut sizes along one order. */
struct pcum {
	int n;
	double *C, *P, *A;	/* compute (ms), params, stashed activations */
	double *X;		/* bytes crossing the cut after k nodes */
	int nt;			/* tied tensors with an owner elsewhere */
	int *thome, *tother;	/* positions of the first and another owner */
	double *tbytes;
};

/*
 * What PipeDream's optimizer charges for the cut after k nodes, as its
 * code computes it (augment_antichain in graph/graph.py): the outputs of
 * the prefix's maximal nodes (its antichain) and of every node p in the
 * prefix that is an ancestor of one of them, a, and has a consumer that is
 * neither a nor an ancestor of a.  That is every tensor that crosses, and
 * more: a tensor that feeds two maximal nodes along different paths (one
 * reaches a, the other does not) is charged although it stays in the
 * prefix.  With R(v) the set of maximal nodes v reaches (itself included),
 * p is charged when it is maximal, has a consumer after the cut, or has a
 * consumer q in the prefix with R(q) missing part of R(p).  Each prefix is
 * one pass in reverse order over bitsets of its maximal nodes: O(n (n + e))
 * words in all, in --pipedream-model only.  A node's bytes are its
 * outputs' (on PipeDream's graphs its activation_size, as the optimizer
 * sums them).
 */
static int pipedream_graph(const struct mp_graph *g)
{
	return g->format && !strcmp(g->format, "pipedream");
}

static void pcum_pipedream(const struct mp_graph *g, const int *order,
			   const int *skip, const double *mb, double *X)
{
	int n = g->n, pd = pipedream_graph(g);
	int *pos = mp_calloc(n, sizeof(int)), *amax = mp_calloc(n, sizeof(int));
	double *bytes = mp_calloc(n, sizeof(double));
	int *seen = mp_calloc(g->nm, sizeof(int));
	uint64_t *R = NULL;

	for (int i = 0; i < n; i++)
		pos[order[i]] = i;
	for (int v = 0; v < n; v++) {
		if (pd) {
			bytes[v] = g->nodes[v].act_bytes;
			continue;
		}
		for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++) {
			const struct mp_edge *e = &g->edges[g->out_e[k]];

			if (!skip[e->dst] && seen[e->src_member] != v + 1) {
				seen[e->src_member] = v + 1;
				bytes[v] += mb[e->src_member];
			}
		}
	}
	for (int k = 1; k < n; k++) {
		int na = 0, words;
		double x = 0;

		for (int i = 0; i < k; i++) {
			int v = order[i], top = 1;

			for (int j = g->out_off[v]; top && j < g->out_off[v + 1];
			     j++) {
				int w = g->edges[g->out_e[j]].dst;

				top = skip[w] || pos[w] >= k;
			}
			amax[v] = skip[v] || !top ? -1 : na++;
		}
		words = (na + 63) / 64;
		/* R(v) of the node at position i: row i, zeroed */
		free(R);
		R = mp_calloc((size_t)k * words, sizeof(*R));
		for (int i = k - 1; i >= 0; i--) {
			int v = order[i], charged = amax[v] >= 0;
			uint64_t *r = R + (size_t)i * words;

			if (skip[v])
				continue;
			if (charged)
				r[amax[v] / 64] |= 1ULL << (amax[v] % 64);
			for (int j = g->out_off[v]; j < g->out_off[v + 1]; j++) {
				int w = g->edges[g->out_e[j]].dst;

				if (skip[w])
					continue;
				if (pos[w] >= k) {
					charged = 1;
					continue;
				}
				for (int b = 0; b < words; b++)
					r[b] |= R[(size_t)pos[w] * words + b];
			}
			for (int j = g->out_off[v]; !charged &&
			     j < g->out_off[v + 1]; j++) {
				int w = g->edges[g->out_e[j]].dst;
				const uint64_t *q = R + (size_t)pos[w] * words;

				for (int b = 0; !skip[w] && !charged && b < words;
				     b++)
					charged = (r[b] & ~q[b]) != 0;
			}
			if (charged)
				x += bytes[v];
		}
		X[k] = x;
	}
	free(R);
	free(seen);
	free(bytes);
	free(amax);
	free(pos);
}

/*
 * X[k]: every tensor that crosses the cut after the first k nodes of the
 * order, i.e. the output of each member with a consumer on both sides
 * counted once (its bytes are its edges'), whichever node consumes it: a
 * skip tensor or a concatenated feature map as much as the last node's
 * output.  Edges from and to skipped nodes carry nothing.  Under
 * PipeDream's model pcum_pipedream() then replaces X[1..n-1] by its price.
 */
static void pcum_build(const struct mp_graph *g, const int *order,
		       const int *skip, double speed, int pipedream,
		       struct pcum *pc)
{
	int n = g->n;
	int *left = mp_calloc(g->nm, sizeof(int));	/* consumers after */
	double *mb = mp_calloc(g->nm, sizeof(double));	/* tensor bytes */
	double x = 0;

	pc->n = n;
	pc->C = mp_calloc(n + 1, sizeof(double));
	pc->P = mp_calloc(n + 1, sizeof(double));
	pc->A = mp_calloc(n + 1, sizeof(double));
	pc->X = mp_calloc(n + 1, sizeof(double));
	for (int i = 0; i < g->ne; i++)
		if (g->edges[i].bytes > mb[g->edges[i].src_member])
			mb[g->edges[i].src_member] = g->edges[i].bytes;
	for (int i = 0; i < n; i++) {
		int v = order[i];
		const struct mp_node *nd = &g->nodes[v];

		pc->C[i + 1] = pc->C[i] +
			(skip[v] ? 0 : (nd->fwd_ms + nd->bwd_ms) / speed);
		pc->P[i + 1] = pc->P[i] + (skip[v] ? 0 : nd->param_bytes);
		pc->A[i + 1] = pc->A[i] + (skip[v] ? 0 : nd->act_bytes);
		for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
			const struct mp_edge *e = &g->edges[g->in_e[k]];

			if (!skip[e->src] && !skip[v] &&
			    --left[e->src_member] == 0)
				x -= mb[e->src_member];
		}
		for (int k = g->out_off[v]; k < g->out_off[v + 1]; k++) {
			const struct mp_edge *e = &g->edges[g->out_e[k]];

			if (!skip[v] && !skip[e->dst] &&
			    left[e->src_member]++ == 0)
				x += mb[e->src_member];
		}
		pc->X[i + 1] = x > 0 ? x : 0;
	}
	/* the last prefix has nothing after it */
	pc->X[n] = 0;
	if (pipedream)
		pcum_pipedream(g, order, skip, mb, pc->X);
	/* tied tensors: where their owners sit in this order */
	{
		int *pos = mp_calloc(n, sizeof(int)), cnt = 0;

		pc->nt = 0;

		for (int i = 0; i < n; i++)
			pos[order[i]] = i;
		for (int i = 0; i < g->np; i++)
			cnt += g->params[i].nshared;
		pc->thome = mp_calloc(cnt + 1, sizeof(int));
		pc->tother = mp_calloc(cnt + 1, sizeof(int));
		pc->tbytes = mp_calloc(cnt + 1, sizeof(double));
		for (int i = 0; i < g->np; i++)
			for (int k = 0; k < g->params[i].nshared; k++) {
				pc->thome[pc->nt] =
					pos[g->members[g->params[i].member].node];
				pc->tother[pc->nt] =
					pos[g->members[g->params[i].shared[k]].node];
				pc->tbytes[pc->nt++] = g->params[i].bytes;
			}
		free(pos);
	}
	free(left);
	free(mb);
}

static void pcum_free(struct pcum *pc)
{
	free(pc->C);
	free(pc->P);
	free(pc->A);
	free(pc->X);
	free(pc->thome);
	free(pc->tother);
	free(pc->tbytes);
}

struct pctx {
	const struct mp_pipe_opts *o;
	const struct pcum *pc;
	double B;		/* bytes per ms */
	double lat;		/* ms */
	double mem;		/* bytes per device */
	int M;
	int nic;		/* Mercury's model through one NIC per device */
	int order;		/* which of the two orders, for progress */
};

/* Time per micro-batch of the stretch [k, j) on r replicas. */
static double stage_t(const struct pctx *x, int k, int j, int r)
{
	double C = x->pc->C[j] - x->pc->C[k], P = x->pc->P[j] - x->pc->P[k];

	if (x->o->pipedream)
		return (C + 4.0 * (r - 1) * P / (r * x->B)) / r;
	{
		double ar = 2.0 * (r - 1) * P / (r * x->B);

		/* the NIC: both cuts' tensors, each way, and the all-reduce */
		if (x->nic) {
			if (k > 0)
				ar += x->lat + x->pc->X[k] / x->B;
			if (j < x->pc->n)
				ar += x->lat + x->pc->X[j] / x->B;
		}
		return (C > ar ? C : ar) / r;
	}
}

static double link_t(const struct pctx *x, int k, int rp, int r)
{
	if (x->o->pipedream)
		return 2.0 * x->pc->X[k] / (x->B * (rp < r ? rp : r));
	if (x->nic)
		return (x->lat + x->pc->X[k] / x->B) / (rp < r ? rp : r);
	return (x->lat + x->pc->X[k] / x->B) / lcm(rp, r);
}

int mp_pipe_inflight(int machines_from_here, int r)
{
	return (machines_from_here + r - 1) / r;
}

static double stage_mem(const struct pctx *x, int k, int j, int w)
{
	const struct pcum *pc = x->pc;
	double P = pc->P[j] - pc->P[k], A = pc->A[j] - pc->A[k];

	/* another owner of a tied tensor here: a copy of weights and gradient */
	for (int t = 0; t < pc->nt; t++)
		if (pc->tother[t] >= k && pc->tother[t] < j &&
		    (pc->thome[t] < k || pc->thome[t] >= j))
			P += pc->tbytes[t] * 2.0 / 3.0;
	return 3 * P + (w - 1) * P + w * (A + pc->X[k]);
}

static int stage_fits(const struct pctx *x, int k, int j, int r, int m)
{
	if (x->o->pipedream || !x->o->memory)
		return 1;
	return stage_mem(x, k, j, mp_pipe_inflight(x->M - m + r, r)) <=
	       x->mem;
}

/* The programme for one order; fills p (stages) and returns the period. */
static double pipe_dp(const struct pctx *x, struct mp_pipe *p)
{
	int n = x->pc->n, M = x->M;
	size_t ns = (size_t)(n + 1) * (M + 1) * (M + 1);
	double *A = mp_calloc(ns, sizeof(double));
	int *ck = mp_calloc(ns, sizeof(int)), *cr = mp_calloc(ns, sizeof(int));
	double best = DBL_MAX;
	int bm = -1, br = -1;

#define IX(j, m, r) (((size_t)(j) * (M + 1) + (m)) * (M + 1) + (r))
	for (size_t i = 0; i < ns; i++)
		A[i] = DBL_MAX;
	for (int j = 1; j <= n; j++) {
		if (x->o->progress && !(j & 1023))
			x->o->progress(x->o->progress_ctx, x->order,
				       (double)j / n);
		for (int m = 1; m <= M; m++)
			for (int r = 1; r <= m; r++) {
				double bv = DBL_MAX, st;
				int bk = 0, brp = 0;

				if (!stage_fits(x, 0, j, r, m) && r == m)
					continue;
				if (r == m && stage_fits(x, 0, j, r, m))
					bv = stage_t(x, 0, j, r);
				for (int k = 1; k < j && m > r; k++) {
					if (!stage_fits(x, k, j, r, m))
						continue;
					st = stage_t(x, k, j, r);
					if (st >= bv)
						continue;
					for (int rp = 1; rp <= m - r; rp++) {
						double a = A[IX(k, m - r, rp)], t;

						if (a >= bv)
							continue;
						t = a > st ? a : st;
						if (t < bv) {
							double l = link_t(x, k, rp, r);

							if (l > t)
								t = l;
						}
						if (t < bv) {
							bv = t;
							bk = k;
							brp = rp;
						}
					}
				}
				A[IX(j, m, r)] = bv;
				ck[IX(j, m, r)] = bk;
				cr[IX(j, m, r)] = brp;
			}
	}
	for (int m = 1; m <= M; m++) {
		if (!x->o->fewer && m != M)
			continue;
		for (int r = 1; r <= m; r++)
			if (A[IX(n, m, r)] < best * (1 - 1e-12)) {
				best = A[IX(n, m, r)];
				bm = m;
				br = r;
			}
	}
	if (bm > 0) {
		int j = n, m = bm, r = br, s = 0, cnt = 0;

		/* count, then fill back to front */
		for (int jj = j, mm = m, rr = r; jj > 0;) {
			int k = ck[IX(jj, mm, rr)], rp = cr[IX(jj, mm, rr)];

			cnt++;
			mm -= rr;
			jj = k;
			rr = rp;
		}
		p->nstages = cnt;
		p->st = mp_calloc(cnt, sizeof(*p->st));
		s = cnt - 1;
		while (j > 0) {
			int k = ck[IX(j, m, r)], rp = cr[IX(j, m, r)];

			p->st[s].first = k;
			p->st[s].end = j;
			p->st[s].replicas = r;
			s--;
			m -= r;
			j = k;
			r = rp;
		}
	}
#undef IX
	free(A);
	free(ck);
	free(cr);
	return best;
}

/* Topological orders tried: the graph's, and a depth-first one that
 * finishes a branch before starting its sibling (Kahn with a stack). */
static void order_dfs(const struct mp_graph *g, int *out)
{
	int *deg = mp_calloc(g->n, sizeof(int));
	int *stk = mp_calloc(g->n + 1, sizeof(int));
	int top = 0, k = 0;

	for (int v = 0; v < g->n; v++)
		deg[v] = g->in_off[v + 1] - g->in_off[v];
	for (int i = g->n - 1; i >= 0; i--)
		if (!deg[g->topo[i]])
			stk[top++] = g->topo[i];
	while (top) {
		int v = stk[--top];

		out[k++] = v;
		for (int e = g->out_off[v + 1] - 1; e >= g->out_off[v]; e--) {
			int w = g->edges[g->out_e[e]].dst;

			if (--deg[w] == 0)
				stk[top++] = w;
		}
	}
	free(deg);
	free(stk);
}

void mp_pipe_free(struct mp_pipe *p)
{
	free(p->st);
	free(p->order);
	free(p->stage_of);
	memset(p, 0, sizeof(*p));
}

static void fill_stages(const struct pctx *x, struct mp_pipe *p)
{
	int base = 0, used = 0;

	for (int s = 0; s < p->nstages; s++)
		used += p->st[s].replicas;
	p->machines_used = used;
	p->period_ms = 0;
	for (int s = 0; s < p->nstages; s++) {
		struct mp_pipe_stage *st = &p->st[s];
		int k = st->first, j = st->end, r = st->replicas;

		st->device0 = base;
		st->compute_ms = x->pc->C[j] - x->pc->C[k];
		st->param_bytes = x->pc->P[j] - x->pc->P[k];
		st->act_bytes = x->pc->A[j] - x->pc->A[k];
		st->in_bytes = s ? x->pc->X[k] : 0;
		st->time_ms = stage_t(x, k, j, r);
		st->in_flight = mp_pipe_inflight(used - base, r);
		st->mem_bytes = stage_mem(x, k, j, st->in_flight);
		st->link_ms = s ? link_t(x, k, p->st[s - 1].replicas, r) : 0;
		if (st->time_ms > p->period_ms)
			p->period_ms = st->time_ms;
		if (st->link_ms > p->period_ms)
			p->period_ms = st->link_ms;
		base += r;
	}
	if (!x->o->pipedream) {
		/*
		 * A replica keeps at most w micro-batches in flight and each
		 * spends rt (its forward, everything downstream and back, its
		 * backward) in the loop, so it completes at most w / rt per
		 * ms (Little's law).  1F1B's w ignores the links' latency;
		 * stash more where that would throttle the pipeline and memory
		 * allows, and predict what the rest costs.
		 */
		double base_period = p->period_ms;

		for (int s = 0; s < p->nstages; s++) {
			struct mp_pipe_stage *st = &p->st[s];
			double rt = 0, wait = 0;
			int need, w;

			for (int t = s; t < p->nstages; t++) {
				rt += p->st[t].compute_ms;
				if (t > s) {
					rt += 2 * (x->lat + p->st[t].in_bytes / x->B);
					/* a busy device: one task's wait each way */
					wait += p->st[t].compute_ms;
					/* a busy NIC: one transfer's each way */
					if (x->nic)
						wait += 2 * (x->lat +
							     p->st[t].in_bytes / x->B);
				}
			}
			st->loop_ms = rt;
			need = (int)ceil((rt + wait) /
					 (st->replicas * base_period) - 1e-9);
			for (w = st->in_flight; w < need; w++)
				if (x->o->memory &&
				    stage_mem(x, st->first, st->end, w + 1) > x->mem)
					break;
			st->in_flight = w;
			st->need = need;
		}
		/*
		 * Strict 1F1B cannot deadlock when no stage keeps more
		 * micro-batches in flight than the one feeding it lets through
		 * (w r non-increasing) or keeps one; lowering w only saves
		 * memory.
		 */
		for (int s = 0; s + 1 < p->nstages; s++) {
			struct mp_pipe_stage *a = &p->st[s], *b = &p->st[s + 1];
			int cap = a->in_flight * a->replicas / b->replicas;

			if (b->in_flight > cap)
				b->in_flight = cap > 1 ? cap : 1;
		}
		p->stash_limited = 0;
		for (int s = 0; s < p->nstages; s++) {
			struct mp_pipe_stage *st = &p->st[s];

			st->mem_bytes = stage_mem(x, st->first, st->end,
						  st->in_flight);
			/* short of that, the stash bounds the rate */
			if (st->in_flight < st->need) {
				double lim = st->loop_ms /
					     (st->replicas * st->in_flight);

				p->stash_limited = 1;
				if (lim > p->period_ms)
					p->period_ms = lim;
			}
		}
	}
	p->microbatches = p->nstages ? p->st[0].in_flight : 0;
}

/*
 * The simulated period the solver reports: 256 micro-batches; on NICs the
 * larger of 256 and 512, since big transfers on a busy NIC keep the
 * measured rate moving with the run's length (PipeDream's VGG-16 on 4 x
 * 16 GB at 1.25 GB/s: 404 to 438 ms between 256 and 2048): an upper
 * bound rather than one sample.
 */
static int sim_period(const struct mp_graph *g, const struct mp_cluster *c,
		      const struct mp_pipe_opts *o, const struct mp_pipe *p,
		      int nic, double *t)
{
	double t2;
	int ret = mp_pipe_sim(g, c, o, p, 256, t, NULL);

	if (ret || !nic)
		return ret;
	ret = mp_pipe_sim(g, c, o, p, 512, &t2, NULL);
	if (!ret && t2 > *t)
		*t = t2;
	return ret;
}

/* The faster of strict 1F1B and backward-first: its period, *bg which. */
static double best_schedule(const struct mp_graph *g,
			    const struct mp_cluster *c,
			    const struct mp_pipe_opts *o, struct mp_pipe *p,
			    int nic, int *bg)
{
	double best = DBL_MAX, t;

	*bg = 0;
	for (int gr = 0; gr < 2; gr++) {
		p->greedy = gr;
		if (!sim_period(g, c, o, p, nic, &t) && t < best) {
			best = t;
			*bg = gr;
		}
	}
	return best;
}

int mp_pipe_solve(const struct mp_graph *g, const struct mp_cluster *c,
		  const struct mp_pipe_opts *o, struct mp_pipe *p,
		  struct mp_err *err)
{
	int *skip = mp_calloc(g->n, sizeof(int));
	int *ord[2];
	double best = DBL_MAX;
	int bo = -1, ret = 0;
	struct pctx x = { 0 };

	memset(p, 0, sizeof(*p));
	if (c->d < 1 || c->d > MP_MAX_DEV) {
		free(skip);
		return mp_set_err(err, -EINVAL, "pipeline: 1..%d devices",
				  MP_MAX_DEV);
	}
	if (!c->uniform && c->d > 1) {
		free(skip);
		return mp_set_err(err, -EINVAL,
				  "pipeline: needs identical devices and links");
	}
	x.o = o;
	x.M = c->d;
	x.mem = c->dev[0].memory_bytes;
	x.B = (c->d > 1 ? c->bw[1] : 1.25e9) / 1e3;
	x.lat = (c->d > 1 ? c->lat[1] : 0) * 1e3;
	x.nic = !c->per_pair;
	if (o->bandwidth_Bps > 0)
		x.B = o->bandwidth_Bps / 1e3;
	for (int v = 0; v < g->n; v++)
		skip[v] = pipedream_graph(g) && ignored(g, v);
	ord[0] = mp_calloc(g->n, sizeof(int));
	ord[1] = mp_calloc(g->n, sizeof(int));
	memcpy(ord[0], g->topo, g->n * sizeof(int));
	order_dfs(g, ord[1]);
	for (int t = 0; t < 2; t++) {
		struct pcum pc;
		struct mp_pipe q = { 0 };
		double per;

		pcum_build(g, ord[t], skip, c->dev[0].speed, o->pipedream,
			   &pc);
		x.pc = &pc;
		x.order = t;
		per = pipe_dp(&x, &q);
		if (per < best * (1 - 1e-12)) {
			best = per;
			bo = t;
			mp_pipe_free(p);
			*p = q;
			p->single_ms = pc.C[g->n];
			{
				double W = 2.0 * (c->d - 1) * pc.P[g->n] /
					   (c->d * x.B);
				double Wpd = 4.0 * (c->d - 1) * pc.P[g->n] /
					     (c->d * x.B);

				/* data parallelism over all devices */
				p->dp_ms = o->pipedream ?
					(pc.C[g->n] + Wpd) / c->d :
					(pc.C[g->n] > W ? pc.C[g->n] : W) / c->d;
				p->dp_fits = !o->memory ||
					stage_mem(&x, 0, g->n, 1) <= x.mem;
			}
			fill_stages(&x, p);
		} else {
			mp_pipe_free(&q);
		}
		pcum_free(&pc);
	}
	if (bo < 0) {
		ret = mp_set_err(err, -ENOSPC,
				 "pipeline: no partition fits %.0f bytes per device",
				 x.mem);
		mp_pipe_free(p);
	} else {
		p->order = ord[bo];
		ord[bo] = NULL;
		p->stage_of = mp_calloc(g->n, sizeof(int));
		for (int s = 0; s < p->nstages; s++)
			for (int i = p->st[s].first; i < p->st[s].end; i++)
				p->stage_of[p->order[i]] = s;
		p->formula_ms = p->period_ms;
		if (p->stash_limited && !o->pipedream) {
			/*
			 * Short of stash the rate depends on how the devices
			 * order their work: measure both schedules in the
			 * engine and keep the faster; the period is then the
			 * simulated one.
			 */
			int bg;
			double best_sim = best_schedule(g, c, o, p, x.nic, &bg);

			p->greedy = bg;
			if (best_sim < DBL_MAX)
				p->period_ms = best_sim;
		} else if (!o->pipedream && x.nic && p->nstages > 1) {
			/*
			 * On NICs the formula is the fluid bound: each NIC
			 * direction carries its stage's cuts.  A transfer
			 * holds the sender's egress and the receiver's
			 * ingress together, so where neighbouring stages'
			 * NICs are busy they wait for each other and the
			 * engine's schedules fall short of it.  Measure
			 * both; where the faster is more than 1% slower,
			 * the period is the simulated one.
			 */
			int bg;
			double best_sim = best_schedule(g, c, o, p, 1, &bg);

			p->greedy = 0;
			if (best_sim < DBL_MAX && best_sim > 1.01 * p->period_ms) {
				p->greedy = bg;
				p->period_ms = best_sim;
				p->nic_limited = 1;
			}
		}
		p->speedup = p->single_ms / p->period_ms;
	}
	free(ord[0]);
	free(ord[1]);
	free(skip);
	return ret;
}

/* ---- the simulation --------------------------------------------------- */

/*
 * Units for nmb micro-batches.  Per micro-batch i and stage s (replica
 * i mod r_s, on device device0_s + i mod r_s): F, then the activation to
 * the next stage's replica, ..., the last stage's B, the gradient back, B.
 * A replicated stage all-reduces once per round of r_s micro-batches on each
 * replica's port, after all r_s backwards of the round.
 */
/* An all-reduce on a NIC in pieces of about AR_PIECE_MS. */
#define AR_PIECE_MS 0.25
#define AR_MAX_PIECES 32
#define AR_PIECES(ms) ((ms) / AR_PIECE_MS >= AR_MAX_PIECES ? AR_MAX_PIECES : \
		       (int)ceil((ms) / AR_PIECE_MS) > 1 ?			\
		       (int)ceil((ms) / AR_PIECE_MS) : 1)

int mp_pipe_sim(const struct mp_graph *g, const struct mp_cluster *c,
		const struct mp_pipe_opts *o, const struct mp_pipe *p,
		int nmb, double *period_ms, struct mp_err *err)
{
	int S = p->nstages, D = c->d, nu = 0, cap, np = 0, pcap;
	double B = (o->bandwidth_Bps > 0 ? o->bandwidth_Bps :
		    (D > 1 ? c->bw[1] : 1.25e9)) / 1e3;
	double lat = (D > 1 ? c->lat[1] : 0) * 1e3, t0, t1;
	int *F, *Bw, *XF, *XB, *pa, *pb, *arlast, ret = 0, half, L = 1;
	struct mp_units U = { 0 };
	struct mp_sched Sd;

	(void)g;
	if (o->pipedream)
		return mp_set_err(err, -EINVAL,
				  "pipeline: the simulation runs Mercury's model");
	for (int s = 0; s < S; s++)
		L = lcm(L, p->st[s].replicas);
	/* whole rounds, at least eight */
	nmb = (nmb + L - 1) / L * L;
	if (nmb < 8 * L)
		nmb = 8 * L;
	cap = nmb * S * 4 + nmb * S * (c->per_pair ? 1 : 2 * AR_MAX_PIECES + 1) + 8;
	pcap = cap * 6;
	U.u = mp_calloc(cap, sizeof(*U.u));
	pa = mp_calloc(pcap, sizeof(int));
	arlast = mp_calloc(cap, sizeof(int));	/* an all-reduce's last piece */
	pb = mp_calloc(pcap, sizeof(int));
	F = mp_calloc(nmb * S, sizeof(int));
	Bw = mp_calloc(nmb * S, sizeof(int));
	XF = mp_calloc(nmb * S, sizeof(int));
	XB = mp_calloc(nmb * S, sizeof(int));
	U.ndev = D;
	U.nres = MP_NRES(c);
#define ADD(kind_, res_, dur_, prio_) ({				\
		struct mp_unit *_u = &U.u[nu];				\
		_u->kind = (kind_);					\
		_u->res = (res_);					\
		_u->res2 = -1;						\
		_u->dur = (dur_);					\
		_u->prio = (prio_);					\
		_u->node = -1;						\
		_u->member = -1;					\
		nu++; })
#define DEP(a, b) do { pa[np] = (a); pb[np++] = (b); } while (0)
	for (int i = 0; i < nmb; i++)
		for (int s = 0; s < S; s++) {
			const struct mp_pipe_stage *st = &p->st[s];
			int dev = st->device0 + i % st->replicas;
			double fshare, fwd = 0;

			/* forward share of the stage's compute */
			for (int k = st->first; k < st->end; k++) {
				const struct mp_node *nd =
					&g->nodes[p->order[k]];

				fwd += nd->fwd_ms + nd->bwd_ms > 0 ?
				       nd->fwd_ms : 0;
			}
			fwd /= c->dev[0].speed;
			fshare = fwd < st->compute_ms ? fwd : st->compute_ms;
			/* B first, older micro-batches first: 1F1B */
			F[i * S + s] = nu;
			ADD(MP_U_FWD, dev, fshare, -(double)i);
			Bw[i * S + s] = nu;
			ADD(MP_U_BWD, dev, st->compute_ms - fshare,
			    1e12 - (double)i);
		}
	for (int i = 0; i < nmb; i++)
		for (int s = 0; s < S; s++) {
			const struct mp_pipe_stage *st = &p->st[s];
			int dev = st->device0 + i % st->replicas;

			if (s + 1 < S) {
				const struct mp_pipe_stage *nx = &p->st[s + 1];
				int d2 = nx->device0 + i % nx->replicas;
				double ms = lat + nx->in_bytes / B;

				XF[i * S + s] = nu;
				ADD(MP_U_XFWD, -1, ms, -(double)i);
				mp_xfer_res(c, &U.u[nu - 1], dev, d2);
				XB[i * S + s] = nu;
				ADD(MP_U_XBWD, -1, ms, 1e12 - (double)i);
				mp_xfer_res(c, &U.u[nu - 1], d2, dev);
				DEP(F[i * S + s], XF[i * S + s]);
				DEP(XF[i * S + s], F[i * S + s + 1]);
				DEP(Bw[i * S + s + 1], XB[i * S + s]);
				DEP(XB[i * S + s], Bw[i * S + s]);
			} else {
				DEP(F[i * S + s], Bw[i * S + s]);
			}
			/* the stash: at most w in flight on this replica */
			if (i >= st->in_flight * st->replicas)
				DEP(Bw[(i - st->in_flight * st->replicas) * S + s],
				    F[i * S + s]);
			/* one all-reduce per round, on every replica's port */
			if (st->replicas > 1 && i % st->replicas ==
			    st->replicas - 1) {
				double ar = 2.0 * (st->replicas - 1) *
					    st->param_bytes /
					    (st->replicas * B);

				/*
				 * On a NIC the exchange shares the port with
				 * the activations and gradients: a ring
				 * all-reduce sends ar on the egress and
				 * receives ar on the ingress, independently
				 * (full duplex), in pieces, after every tensor
				 * of the pipeline (the lowest priority, as
				 * Mercury's exchange yields to what is needed
				 * sooner), so that it fills the NIC's idle
				 * time rather than hold back the next
				 * micro-batch.  A join unit marks its end.
				 */
				int pcs = AR_PIECES(ar);

				for (int q = 0; q < st->replicas; q++) {
					int d = st->device0 + q;
					int x = nu, first[2], last[2];

					if (c->per_pair) {
						ADD(MP_U_XTIE, MP_LINK(c, d, d), ar,
						    -(double)i);
						arlast[x] = x;
						for (int z = 0; z < st->replicas; z++)
							DEP(Bw[(i - z) * S + s], x);
						continue;
					}
					for (int way = 0; way < 2; way++) {
						first[way] = nu;
						for (int z = 0; z < pcs; z++) {
							ADD(MP_U_XTIE, -1, ar / pcs,
							    -1e9 - (double)i);
							mp_port_res(c, &U.u[nu - 1], d,
								    way);
							if (z)
								DEP(nu - 2, nu - 1);
						}
						last[way] = nu - 1;
						for (int z = 0; z < st->replicas; z++)
							DEP(Bw[(i - z) * S + s],
							    first[way]);
					}
					x = nu;
					ADD(MP_U_XTIE, -1, 0, 0);	/* the join */
					DEP(last[0], x);
					DEP(last[1], x);
					arlast[first[0]] = arlast[first[1]] = x;
				}
			}
			if (nu + 8 >= cap || np + 8 * st->replicas >= pcap)
				abort();
		}
	/*
	 * Strict 1F1B on every replica, as PipeDream's runtime runs it: w
	 * forwards, then one backward and one forward in turn, then the
	 * remaining backwards.  A device waits for the next unit of its
	 * order rather than run another that happens to be ready.
	 */
	for (int s = 0; s < S && !p->greedy; s++) {
		const struct mp_pipe_stage *st = &p->st[s];

		for (int q = 0; q < st->replicas; q++) {
			int cnt = 0, prev = -1, w = st->in_flight, r = st->replicas;
			int n = 0, *seq;

			for (int i = q; i < nmb; i += r)
				cnt++;
			seq = mp_calloc(2 * cnt + 1, sizeof(int));
			for (int k = 0; k < w && k < cnt; k++)
				seq[n++] = F[(q + k * r) * S + s];
			for (int k = 0; k < cnt; k++) {
				seq[n++] = Bw[(q + k * r) * S + s];
				if (k + w < cnt)
					seq[n++] = F[(q + (k + w) * r) * S + s];
			}
			for (int k = 0; k < n; k++) {
				if (prev >= 0)
					DEP(prev, seq[k]);
				prev = seq[k];
			}
			free(seq);
			if (np + 4 >= pcap)
				abort();
		}
	}
#undef ADD
#undef DEP
	U.nu = nu;
	U.succ_off = mp_calloc(nu + 1, sizeof(int));
	U.succ = mp_calloc(np + 1, sizeof(int));
	for (int i = 0; i < np; i++) {
		U.succ_off[pa[i] + 1]++;
		U.u[pb[i]].ndeps++;
	}
	for (int i = 0; i < nu; i++)
		U.succ_off[i + 1] += U.succ_off[i];
	{
		int *fill = mp_calloc(nu + 1, sizeof(int));

		for (int i = 0; i < np; i++)
			U.succ[U.succ_off[pa[i]] + fill[pa[i]]++] = pb[i];
		free(fill);
	}
	ret = mp_sched_run(&U, &Sd);
	if (ret) {
		ret = mp_set_err(err, ret, "pipeline: the schedule deadlocked");
		goto out;
	}
	/*
	 * Steady state: a micro-batch is done when stage 0's backward and
	 * the all-reduces after it end.  The period is the slope between
	 * the ends of two rounds (L micro-batches) a quarter and three
	 * quarters in, clear of the fill and of the drain (which runs faster,
	 * nothing new competing).
	 */
	{
		int K = nmb / L, k1 = K / 4, k2 = 3 * K / 4;

		t0 = t1 = 0;
		for (int i = 0; i < nmb; i++) {
			double f = U.u[Bw[i * S]].finish;
			int k = i / L;

			for (int s = 0; s < S; s++)
				for (int q = U.succ_off[Bw[i * S + s]];
				     q < U.succ_off[Bw[i * S + s] + 1]; q++)
					if (U.u[U.succ[q]].kind == MP_U_XTIE &&
					    U.u[arlast[U.succ[q]]].finish > f)
						f = U.u[arlast[U.succ[q]]].finish;
			if (k == k1 && f > t0)
				t0 = f;
			if (k == k2 && f > t1)
				t1 = f;
		}
		half = (k2 - k1) * L;
	}
	*period_ms = (t1 - t0) / half;
	mp_sched_free(&Sd);
out:
	free(F);
	free(Bw);
	free(XF);
	free(XB);
	free(pa);
	free(pb);
	free(arlast);
	mp_units_free(&U);
	return ret;
}
