// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-place: device placement for model-parallel training and the
 * per-tensor priority plan read by the Mercury tagger.
 *
 * Vocabulary used throughout:
 *  - member: one named thing of the profile (an h200 leaf module or a
 *    pipedream node).  The plan's "placement" object lists members.
 *  - node: an operator group, the unit the placer moves.  A node is one
 *    member, except in h200 profiles where a module called several times
 *    per forward pass (torchvision's shared ReLU) closes a cycle in the
 *    module graph; every such strongly connected component is one node.
 *  - task: the forward (F) or backward (B) computation of one node.  B of a
 *    node always runs on the device of its F (its stashed activations are
 *    there), as in Baechi's co-placement of an op and its gradient op.
 *  - xfer: one tensor sent over one directed device pair (a link).
 *
 * Every symbol carries the mp_ prefix; library-style functions return 0 or
 * a negative errno and leave a message in the caller's error buffer.
 */
#ifndef MP_PLACE_H
#define MP_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "tools.h"		/* struct mt_net: the network rule */

#define MP_ERRLEN 512

struct mp_err {
	char msg[MP_ERRLEN];
};

int mp_set_err(struct mp_err *err, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct mp_member {
	char *name;
	int node;		/* node index */
	int order;		/* first forward call index, -1 if never called */
	int called;		/* 1 if a forward call runs it */
	double fwd_ms;		/* forward time at speed 1 (ms) */
	double off_ms;		/* start offset inside its node's forward (ms) */
	double out_bytes;	/* bytes of its (last) output activation */
	int role;		/* MP_ROLE_*: what PipeDream's optimizer drops */
};

/* PipeDream's optimizer zeroes its Input sources (data loading, always in
 * the first stage) and removes its __getitem__ sinks; pipe.c does too. */
enum { MP_ROLE_OP, MP_ROLE_INPUT, MP_ROLE_GETITEM };

struct mp_param {
	char *name;		/* tensor name in the priority plan */
	int member;		/* owning member */
	double bytes;		/* gradient bytes on the wire */
	int ready_idx;		/* position in backward ready order, -1 unknown */
	int nshared;		/* other owners of a tied tensor (shared_with) */
	int *shared;		/* their member indices */
};

struct mp_node {
	char *name;		/* first member, for display */
	double fwd_ms;		/* forward at speed 1 (ms) */
	double bwd_ms;		/* backward at speed 1 (ms) */
	double param_bytes;	/* fp32 parameter bytes */
	double act_bytes;	/* activation bytes stashed until backward */
	int order;		/* smallest member order, for stable sorts */
};

struct mp_edge {
	int src, dst;		/* node indices */
	int src_member;		/* member whose output is carried */
	int dst_member;		/* first consuming member (for the name) */
	double bytes;		/* activation bytes */
};

struct mp_graph {
	char *model;
	char *format;		/* "h200", "pipedream" or "synthetic" */
	int n;			/* nodes */
	struct mp_node *nodes;
	int nm;			/* members */
	struct mp_member *members;
	int np;			/* parameter tensors */
	struct mp_param *params;
	int ne;
	struct mp_edge *edges;
	/* CSR adjacency over edge indices */
	int *out_off, *out_e;	/* out_e[out_off[v]..out_off[v+1]) */
	int *in_off, *in_e;
	int *topo;		/* a topological order of nodes */
	int is_chain;		/* topo[i] -> topo[i+1] are the only edges */
};

/* graph.c */
/* An h200 *.json or PipeDream *.graph.txt, read by libmercury. */
int mp_graph_load(const char *path, struct mp_graph *g, struct mp_err *err);
/* Builds CSR, topo order, validates; members/nodes/edges filled in. */
int mp_graph_finish(struct mp_graph *g, struct mp_err *err);
void mp_graph_free(struct mp_graph *g);
/* Layered random DAG of n nodes, deterministic in seed (for benchmarks). */
int mp_graph_synthetic(struct mp_graph *g, int n, unsigned int seed);
/* Static memory of one node when alone on a device (bytes). */
double mp_node_mem(const struct mp_graph *g, int v);
double mp_graph_mem(const struct mp_graph *g);

/* cluster.c */
struct mp_device {
	char *name;
	double memory_bytes;
	double speed;		/* compute time divisor */
};

struct mp_cluster {
	int d;
	struct mp_device *dev;
	double *bw;		/* d*d bytes per second, [from*d+to]: the rate
				 * of a transfer's route (mt_net_route) */
	double *lat;		/* d*d seconds */
	int uniform;		/* all devices and routes identical, one NIC
				 * per device (or every pair its own link) */
	int per_pair;		/* network.per_pair: every pair its own link */
	struct mt_net net;	/* who holds what: userspace/common/net.c */
};

int mp_cluster_load(const char *path, struct mp_cluster *c,
		    struct mp_err *err);
int mp_cluster_parse(const char *text, struct mp_cluster *c,
		     struct mp_err *err);
int mp_cluster_make(struct mp_cluster *c, int d, double mem, double speed,
		    double bw, double lat);
void mp_cluster_free(struct mp_cluster *c);
/* Rebuild bw/lat and the NICs after devices, rates or links change. */
void mp_cluster_routes(struct mp_cluster *c);
/* Transfer time of bytes from device a to b in ms (0 when a == b). */
double mp_xfer_ms(const struct mp_cluster *c, int a, int b, double bytes);
double mp_max_speed(const struct mp_cluster *c);

/* sched.c: the timing engine shared by every algorithm. */
/* MP_U_XTIE: a tied tensor's gradient from another owner's device to the
 * device of its first owner (where the optimizer updates it). */
enum mp_unit_kind { MP_U_FWD, MP_U_BWD, MP_U_XFWD, MP_U_XBWD, MP_U_LOSS,
		    MP_U_XTIE };

struct mp_unit {
	int kind;
	int node;		/* task: node; xfer: producing node */
	int member;		/* xfer: member whose tensor is carried */
	int first_dst;		/* xfer: first consuming member */
	int res;		/* device, MP_LINK(...), MP_EGRESS(...) or -1 */
	int res2;		/* a transfer through the NICs: MP_INGRESS(...)
				 * of the receiver, held with res; else -1 */
	int src, dst;		/* xfer: sending and receiving devices */
	double dur;		/* ms */
	double bytes;		/* xfer bytes */
	double prio;		/* larger runs first */
	int ndeps;		/* predecessor count */
	double start, finish;	/* ms, filled by a run */
};

struct mp_units {
	int nu;
	struct mp_unit *u;
	int *succ_off, *succ;	/* CSR successors */
	int nres;		/* devices + links */
	int ndev;
};

/* Resource id of the link from device a to b. */
#define MP_LINK(c, a, b) ((c)->d + (a) * (c)->d + (b))
/* Resource ids of NIC k's egress and ingress (k < d: mt_net.nic). */
#define MP_EGRESS(c, k) ((c)->d + (c)->d * (c)->d + (k))
#define MP_INGRESS(c, k) ((c)->d + (c)->d * (c)->d + (c)->d + (k))
#define MP_NRES(c) ((c)->d + (c)->d * (c)->d + 2 * (c)->d)

/*
 * The resources a transfer from device a to b holds, by the network rule
 * (mt_net_route(), userspace/common/net.c): a's NIC egress and b's NIC
 * ingress together, or the pair's own link.  Sets res, res2, src, dst.
 */
void mp_xfer_res(const struct mp_cluster *c, struct mp_unit *u, int a, int b);
/* The port a device exchanges with its data-parallel peers over: its NIC's
 * egress (way 0: what it sends) or ingress (way 1: what it receives), full
 * duplex; under per_pair the self link that no transfer uses. */
void mp_port_res(const struct mp_cluster *c, struct mp_unit *u, int d,
		 int way);

int mp_units_build(const struct mp_graph *g, const struct mp_cluster *c,
		   const int *place, struct mp_units *U);
void mp_units_free(struct mp_units *U);

struct mp_sched {
	double step_ms;
	int *order;		/* units in start order per resource */
	int *order_off;		/* order[order_off[r]..order_off[r+1]) */
};

/* Work-conserving list schedule by critical-path priority. */
int mp_sched_run(struct mp_units *U, struct mp_sched *S);
void mp_sched_free(struct mp_sched *S);
/* One call: build units, run, return the step time (ms) or < 0. */
double mp_eval(const struct mp_graph *g, const struct mp_cluster *c,
	       const int *place);

/* Static memory per device (bytes), the model every algorithm respects. */
void mp_mem_static(const struct mp_graph *g, const struct mp_cluster *c,
		   const int *place, double *mem);
int mp_mem_ok(const struct mp_graph *g, const struct mp_cluster *c,
	      const int *place, struct mp_err *err);

struct mp_bound {
	double cp_ms;		/* critical path at the fastest speed */
	double work_ms;		/* total work over the sum of speeds */
	double mem_ms;		/* extra lower bound from memory (chains) */
	double comm_ms;		/* critical path with branch communication */
	double lb_ms;		/* the maximum */
};

void mp_lower_bound(const struct mp_graph *g, const struct mp_cluster *c,
		    struct mp_bound *b);

/* sim.c: replay of a schedule's per-resource order. */
struct mp_sim {
	double step_ms;
	double *peak_mem;	/* per device, bytes */
	double *start, *finish;	/* per unit */
};

int mp_sim_run(const struct mp_graph *g, const struct mp_cluster *c,
	       const int *place, const struct mp_units *U,
	       const struct mp_sched *S, struct mp_sim *out,
	       struct mp_err *err);
void mp_sim_free(struct mp_sim *s);

/* algorithms */
enum mp_algo {
	MP_ALGO_MERCURY,
	MP_ALGO_TOPO,
	MP_ALGO_ETF,
	MP_ALGO_SCT,
	MP_ALGO_DP,
	MP_ALGO_SINGLE,
	MP_ALGO_EVEN,
	MP_ALGO_COUNT
};

const char *mp_algo_name(int algo);
int mp_algo_parse(const char *name);
/* Fills place[g->n] (device per node). */
int mp_place(const struct mp_graph *g, const struct mp_cluster *c, int algo,
	     int *place, struct mp_err *err);

int mp_place_topo(const struct mp_graph *g, const struct mp_cluster *c,
		  int *place, struct mp_err *err);
int mp_place_etf(const struct mp_graph *g, const struct mp_cluster *c,
		 int sct, int *place, struct mp_err *err);
int mp_place_single(const struct mp_graph *g, const struct mp_cluster *c,
		    int *place, struct mp_err *err);
int mp_place_even(const struct mp_graph *g, const struct mp_cluster *c,
		  int *place, struct mp_err *err);
int mp_place_dp(const struct mp_graph *g, const struct mp_cluster *c,
		int *place, struct mp_err *err);
int mp_place_mercury(const struct mp_graph *g, const struct mp_cluster *c,
		     int *place, struct mp_err *err);

/* Coarsening (algo_mercury.c), exposed for tests. */
int mp_coarsen(const struct mp_graph *g, const struct mp_cluster *c,
	       struct mp_graph *cg, int *map);

/* plan.c */
struct mp_prio {
	char *tensor;
	int tag;
	double bytes;
	int src, dst;		/* devices */
	double deadline_ms;	/* when the tensor is needed */
};

struct mp_plan {
	const struct mp_graph *g;
	const struct mp_cluster *c;
	int algo;
	const int *place;
	double solve_ms;
	double step_ms;
	double sim_ms;
	struct mp_bound lb;
	double *mem;		/* static memory per device */
	/* the order each device ran its tasks in the schedule the step time
	 * assumes: 2 v for F(v), 2 v + 1 for B(v), device d's in
	 * op[op_off[d]..op_off[d + 1]) */
	int *op, *op_off;
	int nprio;
	struct mp_prio *prio;
	/* hybrid: this placement replicated over data-parallel nodes */
	int replicas;		/* 1: none */
	double dp_bw_Bps;	/* between replicas, per device */
	double hybrid_ms;	/* iteration with the plan-ordered exchange */
	double hybrid_fifo_ms;	/* ... with gradients sent as they come */
	double *xchg_bytes;	/* per device, on the wire per iteration */
};

int mp_plan_build(const struct mp_graph *g, const struct mp_cluster *c,
		  int algo, const int *place, double solve_ms,
		  struct mp_plan *p, struct mp_err *err);
void mp_plan_free(struct mp_plan *p);
/*
 * Evaluates the plan's placement replicated over `replicas` data-parallel
 * nodes (bandwidth_Bps between them, <= 0: the cluster's network), with the
 * gradient exchange in the plan's priority order and in arrival order.
 */
int mp_plan_hybrid(struct mp_plan *p, int replicas, double bandwidth_Bps,
		   struct mp_err *err);
/* How the plan file is written: its levels and the tagger's settings. */
struct mp_plan_fmt {
	unsigned int levels;	/* squeeze to 1..levels; 0: one per tensor */
	int tag_source;		/* enum mercury_tag_source */
	unsigned int shift;	/* bits */
	uint32_t mask;		/* 0: the tag source's default */
};

/*
 * Squeeze the priorities into 1..levels keeping their order, by
 * libmercury's rule (so that the hybrid evaluation sees the written tags);
 * levels 0: into the wire's 1..MERCURY_MAX_TAG, a no-op unless the model
 * has more tensors than that.
 */
int mp_plan_squeeze(struct mp_plan *p, unsigned int levels,
		    struct mp_err *err);
/*
 * The plan as a libmercury plan (the one plan writer is libmercury's):
 * the priorities through its builder, the solver's own sections (model,
 * placement, step and lower bound, memory, deadlines, data_parallel and
 * pipeline if given: a json-c object, still the caller's) as extra keys.
 */
struct json_object;
struct mercury_plan;
int mp_plan_mercury(const struct mp_plan *p, const struct mp_plan_fmt *f,
		    struct json_object *pipeline, struct mercury_plan **out,
		    struct mp_err *err);
/*
 * Does o hold only finite numbers? json-c writes NaN and Infinity as bare
 * words no JSON reader accepts: such output is an error, never written.
 */
int mp_json_finite(struct json_object *o);

/*
 * Incremental memory accounting for algorithms that place nodes one by one
 * in a topological order (producers before consumers); it charges the
 * same bytes as mp_mem_static.
 */
struct mp_mstate {
	const struct mp_graph *g;
	const struct mp_cluster *c;
	double *used;		/* bytes per device */
	uint64_t *recv;		/* per member: devices holding a copy */
	double *add;		/* scratch: bytes a placement would add */
	uint64_t *tied;		/* per param: devices holding a tied copy */
	const int *place;
};

#define MP_MAX_DEV 64

void mp_mstate_init(struct mp_mstate *m, const struct mp_graph *g,
		    const struct mp_cluster *c, const int *place);
void mp_mstate_free(struct mp_mstate *m);
/* 1 if node v fits on device d given the placed producers. */
int mp_mstate_fits(struct mp_mstate *m, int v, int d);
void mp_mstate_commit(struct mp_mstate *m, int v, int d);

/* pipe.c: pipelined placement (stages, 1F1B micro-batches, replicas). */
struct mp_pipe_opts {
	int pipedream;		/* PipeDream's cost model instead of Mercury's */
	int memory;		/* check device memory (Mercury's model) */
	int fewer;		/* may leave devices unused */
	double bandwidth_Bps;	/* > 0: overrides the cluster's links */
	/*
	 * May be NULL: called now and then while the partition is searched
	 * (about n^2 steps: minutes past 10,000 nodes) with the order being
	 * tried (0 or 1 of 2) and the share of its prefixes done.
	 */
	void (*progress)(void *ctx, int order, double done);
	void *progress_ctx;
};

struct mp_pipe_stage {
	int first, end;		/* positions [first, end) in mp_pipe.order */
	int replicas;		/* devices running this stage */
	int device0;		/* first of them (consecutive) */
	int in_flight;		/* micro-batches stashed per replica (1F1B) */
	double compute_ms;	/* forward + backward of one micro-batch */
	double time_ms;		/* per micro-batch, over its replicas */
	double link_ms;		/* the cut before it, per micro-batch */
	double param_bytes;
	double act_bytes;	/* stashed activations per micro-batch */
	double in_bytes;	/* activations received per micro-batch */
	double mem_bytes;	/* per replica, with in_flight stashes */
	double loop_ms;		/* one micro-batch from its F here to its B */
	int need;		/* in flight that keeps it busy (Little's law) */
};

struct mp_pipe {
	int nstages;
	struct mp_pipe_stage *st;
	int *order;		/* the topological order the stages cut */
	int *stage_of;		/* per node */
	int machines_used;
	int microbatches;	/* in flight at the input stage (NOAM) */
	double period_ms;	/* predicted time per micro-batch */
	double formula_ms;	/* the cost model's period (period_ms before
				 * any simulation: stash or NIC limited) */
	double single_ms;	/* one device, no pipelining */
	double dp_ms;		/* data parallelism over all devices */
	int dp_fits;		/* ... and whether a whole replica fits */
	double speedup;		/* single_ms / period_ms */
	int stash_limited;	/* memory kept some stage below its need: the
				 * period is then simulated, not predicted */
	int nic_limited;	/* the NICs' queues keep the engine's schedules
				 * over 1% above the formula: the period is
				 * simulated */
	int greedy;		/* schedule: 0 strict 1F1B, 1 backward-first */
};

int mp_pipe_solve(const struct mp_graph *g, const struct mp_cluster *c,
		  const struct mp_pipe_opts *o, struct mp_pipe *p,
		  struct mp_err *err);
void mp_pipe_free(struct mp_pipe *p);
int mp_pipe_inflight(int machines_from_here, int r);
/* Runs nmb micro-batches through the engine; steady-state period (ms). */
int mp_pipe_sim(const struct mp_graph *g, const struct mp_cluster *c,
		const struct mp_pipe_opts *o, const struct mp_pipe *p,
		int nmb, double *period_ms, struct mp_err *err);

/* util */
double mp_now_ms(void);
char *mp_strdup(const char *s);
void *mp_calloc(size_t n, size_t sz);

#endif
