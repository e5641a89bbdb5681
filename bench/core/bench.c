// SPDX-License-Identifier: GPL-2.0
/*
 * bench.c	Enqueue+dequeue cost of mercury's core against a binary heap
 *		and a red-black tree, in userspace.
 *
 * The "hold" model: Q packets are queued, then each operation dequeues the
 * next packet in service order and enqueues it again with a fresh random
 * rank, so occupancy stays at Q. One operation is one enqueue plus one
 * dequeue: the work a qdisc does per forwarded packet. Ranks are uniform
 * over the levels (the spread the pktgen part uses too); each packet keeps
 * its flow for life, flows are spread evenly over the buckets.
 *
 * Grid: levels x queued x flows for mercury (flow order on and off; and
 * on with only 16 levels in use, spread over the range), levels
 * x queued for the heap and the tree (they know no flows). For each cell
 * the median of REPS timed runs of OPS operations, after a warm-up. Runs
 * are short (about a millisecond) and start on a fresh time slice, so
 * that on a shared machine most of them see no preemption.
 *
 *   bench [-o DIR] [-r REPS] [-n OPS] [-q]
 *
 * Writes DIR/core.json (every cell, struct sizes, machine) and the gnuplot
 * inputs DIR/core-queued.dat, core-levels.dat, core-flows.dat.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "pq.h"

#define RANKS		65536		/* precomputed ranks, a power of two */
#define PKT_LEN		1500		/* bytes: full-size gradient packets */
#define PKT_TRUESIZE	2304		/* bytes: what such an skb occupies */
#define MIN_BUCKETS	4096		/* mercury buckets, as in the VM part */

/* Series of the plots, fixed when the others vary. */
#define FIX_LEVELS	1024
#define FIX_QUEUED	10000
#define FIX_FLOWS	64

static const u32 levels_set[] = { 64, 256, 1024, 4096, 16384,
				   TC_MERCURY_MAX_LEVELS };
static const u32 queued_set[] = { 10, 100, 1000, 10000, 100000, 1000000 };
static const u32 flows_set[] = { 1, 64, 4096 };
#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* quick mode (-q, for the tests): a corner of the grid */
static const u32 q_levels_set[] = { 64, TC_MERCURY_MAX_LEVELS };
static const u32 q_queued_set[] = { 10, 1000 };
static const u32 q_flows_set[] = { 1, 64 };

/* V_MERCURY_16: flow order on, but the packets use only 16 of the levels,
 * spread over the whole range, as gradient traffic uses a few layers at a
 * time (and as the pktgen part does): the same instructions as V_MERCURY_FO
 * with the cache footprint of 16 levels.
 */
enum variant { V_MERCURY_FO, V_MERCURY_NOFO, V_HEAP, V_RBTREE, V_MERCURY_16, V_N };

static const char * const variant_names[V_N] = {
	"mercury", "mercury-noflow", "heap", "rbtree", "mercury-16levels",
};

struct cell {
	enum variant	v;
	u32		levels;
	u32		queued;
	u32		flows;
	double		ns;		/* median ns per enqueue+dequeue */
	double		ns_min;
	double		ns_max;
};

struct bench {
	u32		reps;
	u32		ops;
	bool		quick;
	const u32	*levels_set, *queued_set, *flows_set;
	size_t		nlevels, nqueued, nflows;
	struct pq_pkt	*pkts;		/* largest queued count */
	u32		*ranks;		/* RANKS precomputed ranks */
	struct cell	*cells;
	size_t		ncells;
};

static u64 xorshift64(u64 *s)
{
	u64 x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Fresh packets: zeroed skb, flow hash of flow i % flows spread evenly
 * over the 32-bit hash space, so reciprocal_scale() puts distinct flows
 * into distinct buckets whenever buckets >= flows.
 */
static void build_pkts(struct pq_pkt *pkts, u32 n, u32 flows)
{
	u32 i;

	memset(pkts, 0, (size_t)n * sizeof(*pkts));
	for (i = 0; i < n; i++) {
		pkts[i].skb.len = PKT_LEN;
		pkts[i].skb.truesize = PKT_TRUESIZE;
		pkts[i].skb.hash = (u32)(((u64)(i % flows) << 32) / flows);
		qdisc_skb_cb(&pkts[i].skb)->pkt_len = PKT_LEN;
	}
}

/* Ranks 1..levels (0 is mercury's untagged rank), same seed each cell;
 * with @in_use, only that many levels spread evenly over the range.
 */
static void build_ranks(u32 *ranks, u32 levels, u32 in_use)
{
	u64 s = 0x9e3779b97f4a7c15ULL;
	u32 i;

	for (i = 0; i < RANKS; i++) {
		if (in_use && in_use < levels)
			ranks[i] = 1 + (u32)(xorshift64(&s) % in_use) *
				   (levels / in_use);
		else
			ranks[i] = 1 + (u32)(xorshift64(&s) % levels);
	}
}

#define HOLD_LOOP(push, pop)						\
	do {								\
		for (i = 0; i < n; i++) {				\
			p = pop(pq);					\
			push(pq, p, ranks[k++ & (RANKS - 1)]);		\
		}							\
	} while (0)

/* @n hold operations; returns the index of the next rank to use. */
static u32 hold(struct pq *pq, const u32 *ranks, u32 k, u32 n)
{
	struct pq_pkt *p;
	u32 i;

	switch (pq->kind) {
	case PQ_MERCURY:
		HOLD_LOOP(pq_mercury_push, pq_mercury_pop);
		break;
	case PQ_HEAP:
		HOLD_LOOP(pq_heap_push, pq_heap_pop);
		break;
	default:
		HOLD_LOOP(pq_rbtree_push, pq_rbtree_pop);
		break;
	}
	return k;
}

static int measure(struct bench *b, struct cell *c)
{
	struct pq_cfg cfg = {
		.levels = c->levels,
		.buckets = c->flows > MIN_BUCKETS ? c->flows : MIN_BUCKETS,
		.flow_order = c->v == V_MERCURY_FO || c->v == V_MERCURY_16,
		.capacity = c->queued,
	};
	double *t, t0;
	struct pq *pq;
	u32 i, k = 0;
	int err;

	cfg.kind = c->v == V_HEAP ? PQ_HEAP :
		   c->v == V_RBTREE ? PQ_RBTREE : PQ_MERCURY;
	err = pq_create(&pq, &cfg);
	if (err)
		return err;
	t = calloc(b->reps, sizeof(*t));
	if (!t) {
		pq_destroy(pq);
		return -ENOMEM;
	}
	build_pkts(b->pkts, c->queued, c->flows);
	build_ranks(b->ranks, c->levels, c->v == V_MERCURY_16 ? 16 : 0);
	for (i = 0; i < c->queued; i++)
		pq_push(pq, &b->pkts[i], b->ranks[k++ & (RANKS - 1)]);
	/* warm-up: caches, branch predictors, the queue's rank mix */
	k = hold(pq, b->ranks, k, 2 * b->ops);
	for (i = 0; i < b->reps; i++) {
		/* Start each short run on a fresh time slice: on a shared
		 * machine the median then rarely includes a preemption.
		 */
		sched_yield();
		t0 = now_ns();
		k = hold(pq, b->ranks, k, b->ops);
		t[i] = (now_ns() - t0) / b->ops;
	}
	err = pq->len == c->queued ? 0 : -EIO;
	qsort(t, b->reps, sizeof(*t), cmp_double);
	c->ns = b->reps % 2 ? t[b->reps / 2] :
		(t[b->reps / 2 - 1] + t[b->reps / 2]) / 2;
	c->ns_min = t[0];
	c->ns_max = t[b->reps - 1];
	free(t);
	pq_destroy(pq);
	return err;
}

static const struct cell *find(const struct bench *b, enum variant v,
			       u32 levels, u32 queued, u32 flows)
{
	/* the heap and the tree know no flows: measured once per cell */
	bool any_flows = v == V_HEAP || v == V_RBTREE;
	size_t i;

	for (i = 0; i < b->ncells; i++) {
		const struct cell *c = &b->cells[i];

		if (c->v == v && c->levels == levels && c->queued == queued &&
		    (any_flows || c->flows == flows))
			return c;
	}
	return NULL;
}

static double ns_of(const struct bench *b, enum variant v, u32 levels,
		    u32 queued, u32 flows)
{
	const struct cell *c = find(b, v, levels, queued, flows);

	return c ? c->ns : -1;
}

static int add_cell(struct bench *b, enum variant v, u32 levels, u32 queued,
		    u32 flows, size_t cap)
{
	struct cell *c;
	int err;

	if (b->ncells == cap)
		return -ENOSPC;
	c = &b->cells[b->ncells];
	*c = (struct cell){ .v = v, .levels = levels, .queued = queued,
			    .flows = flows };
	err = measure(b, c);
	if (err)
		return err;
	b->ncells++;
	printf("%-15s levels %6u queued %8u flows %5u  %8.1f ns/pkt\n",
	       variant_names[v], levels, queued, flows, c->ns);
	fflush(stdout);
	return 0;
}

static int run_one(struct bench *b, const char *spec)
{
	char name[32];
	u32 l, q, f;
	int v;

	if (sscanf(spec, "%31[a-z0-9-]:%u:%u:%u", name, &l, &q, &f) != 4)
		return -EINVAL;
	for (v = 0; v < V_N; v++)
		if (!strcmp(name, variant_names[v]))
			break;
	if (v == V_N || !l || l > TC_MERCURY_MAX_LEVELS || !q ||
	    q > 10000000 || !f || f > TC_MERCURY_MAX_FLOWS)
		return -EINVAL;
	b->cells = calloc(1, sizeof(*b->cells));
	b->pkts = calloc(q, sizeof(*b->pkts));
	if (!b->cells || !b->pkts)
		return -ENOMEM;
	return add_cell(b, v, l, q, f, 1);
}

static int run_grid(struct bench *b)
{
	size_t cap = b->nlevels * b->nqueued * (3 * b->nflows + 2);
	size_t li, qi, fi;
	int err;

	b->cells = calloc(cap, sizeof(*b->cells));
	if (!b->cells)
		return -ENOMEM;
	for (qi = 0; qi < b->nqueued; qi++) {
		for (li = 0; li < b->nlevels; li++) {
			u32 l = b->levels_set[li], q = b->queued_set[qi];

			for (fi = 0; fi < b->nflows; fi++) {
				u32 f = b->flows_set[fi];

				err = add_cell(b, V_MERCURY_FO, l, q, f, cap);
				if (!err)
					err = add_cell(b, V_MERCURY_NOFO, l, q,
						       f, cap);
				if (!err)
					err = add_cell(b, V_MERCURY_16, l, q,
						       f, cap);
				if (err)
					return err;
			}
			err = add_cell(b, V_HEAP, l, q, FIX_FLOWS, cap);
			if (!err)
				err = add_cell(b, V_RBTREE, l, q, FIX_FLOWS, cap);
			if (err)
				return err;
		}
	}
	return 0;
}

/* ---- output ----------------------------------------------------------- */

static u32 pick_fixed(const u32 *set, size_t n, u32 want)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i] == want)
			return want;
	return set[n - 1];
}

static int write_dat(const struct bench *b, const char *dir)
{
	u32 fl = pick_fixed(b->levels_set, b->nlevels, FIX_LEVELS);
	u32 fq = pick_fixed(b->queued_set, b->nqueued, FIX_QUEUED);
	u32 ff = pick_fixed(b->flows_set, b->nflows, FIX_FLOWS);
	char path[4096];
	FILE *f;
	size_t i;
	int v;

	snprintf(path, sizeof(path), "%s/core-queued.dat", dir);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "# levels %u flows %u: queued", fl, ff);
	for (v = 0; v < V_N; v++)
		fprintf(f, " %s", variant_names[v]);
	fprintf(f, " mercury@%ulevels,4096flows mercury-16levels@%ulevels,4096flows\n",
		TC_MERCURY_MAX_LEVELS, TC_MERCURY_MAX_LEVELS);
	for (i = 0; i < b->nqueued; i++) {
		u32 q = b->queued_set[i];

		fprintf(f, "%u", q);
		for (v = 0; v < V_N; v++)
			fprintf(f, " %.2f", ns_of(b, v, fl, q, ff));
		fprintf(f, " %.2f", ns_of(b, V_MERCURY_FO,
					   b->levels_set[b->nlevels - 1], q,
					   b->flows_set[b->nflows - 1]));
		fprintf(f, " %.2f\n", ns_of(b, V_MERCURY_16,
					     b->levels_set[b->nlevels - 1], q,
					     b->flows_set[b->nflows - 1]));
	}
	fclose(f);

	snprintf(path, sizeof(path), "%s/core-levels.dat", dir);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "# queued %u flows %u: levels", fq, ff);
	for (v = 0; v < V_N; v++)
		fprintf(f, " %s", variant_names[v]);
	fprintf(f, "\n");
	for (i = 0; i < b->nlevels; i++) {
		u32 l = b->levels_set[i];

		fprintf(f, "%u", l);
		for (v = 0; v < V_N; v++)
			fprintf(f, " %.2f", ns_of(b, v, l, fq, ff));
		fprintf(f, "\n");
	}
	fclose(f);

	snprintf(path, sizeof(path), "%s/core-flows.dat", dir);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "# levels %u queued %u: flows mercury mercury-noflow\n",
		fl, fq);
	for (i = 0; i < b->nflows; i++) {
		u32 fw = b->flows_set[i];

		fprintf(f, "%u %.2f %.2f\n", fw,
			ns_of(b, V_MERCURY_FO, fl, fq, fw),
			ns_of(b, V_MERCURY_NOFO, fl, fq, fw));
	}
	fclose(f);
	return 0;
}

static void json_add_u32s(json_object *o, const char *key, const u32 *v,
			  size_t n)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_int64(v[i]));
	json_object_object_add(o, key, a);
}

static json_object *json_sizes(const struct bench *b)
{
	json_object *s = json_object_new_object();
	json_object *tables = json_object_new_array();
	size_t li, fi;

	json_object_object_add(s, "mercury_skb_cb",
			       json_object_new_int(sizeof(struct mercury_skb_cb)));
	json_object_object_add(s, "qdisc_cb_priv",
			       json_object_new_int(QDISC_CB_PRIV_LEN));
	json_object_object_add(s, "mercury_flow",
			       json_object_new_int(sizeof(struct mercury_flow)));
	json_object_object_add(s, "mercury_level",
			       json_object_new_int(sizeof(struct mercury_level)));
	/* the qdisc's private data (report.py's row "struct mercury_core") */
	json_object_object_add(s, "mercury_core",
			       json_object_new_int(sizeof(struct mercury_sched_data)));
	json_object_object_add(s, "leaf_word", json_object_new_int(sizeof(u64)));
	/* configuration-sized tables, as the module allocates them */
	for (li = 0; li < b->nlevels; li++) {
		for (fi = 0; fi < b->nflows; fi++) {
			u32 l = b->levels_set[li], f = b->flows_set[fi];
			u32 buckets = f > MIN_BUCKETS ? f : MIN_BUCKETS;
			json_object *t = json_object_new_object();

			json_object_object_add(t, "levels", json_object_new_int64(l));
			json_object_object_add(t, "buckets",
					       json_object_new_int64(buckets));
			json_object_object_add(t, "bytes",
					       json_object_new_int64(pq_mercury_table_bytes(l, buckets)));
			json_object_array_add(tables, t);
		}
	}
	json_object_object_add(s, "tables", tables);
	return s;
}

static char *cpu_model(void)
{
	char line[512], *p, *model = NULL;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10))
			continue;
		p = strchr(line, ':');
		if (!p)
			continue;
		p += 1 + (p[1] == ' ');
		p[strcspn(p, "\n")] = 0;
		model = strdup(p);
		break;
	}
	fclose(f);
	return model;
}

static int write_json(const struct bench *b, const char *dir)
{
	json_object *root = json_object_new_object();
	json_object *machine = json_object_new_object();
	json_object *cells = json_object_new_array();
	char path[4096], *model = cpu_model();
	struct utsname u;
	size_t i;
	int err = 0;

	uname(&u);
	json_object_object_add(machine, "cpu",
			       json_object_new_string(model ? model : "unknown"));
	json_object_object_add(machine, "cpus",
			       json_object_new_int64(sysconf(_SC_NPROCESSORS_ONLN)));
	json_object_object_add(machine, "kernel", json_object_new_string(u.release));
	json_object_object_add(machine, "compiler",
			       json_object_new_string("gcc " __VERSION__));
	free(model);
	json_object_object_add(root, "machine", machine);
	json_object_object_add(root, "reps", json_object_new_int64(b->reps));
	json_object_object_add(root, "ops", json_object_new_int64(b->ops));
	json_object_object_add(root, "min_buckets", json_object_new_int(MIN_BUCKETS));
	json_object_object_add(root, "pkt_len", json_object_new_int(PKT_LEN));
	json_add_u32s(root, "levels", b->levels_set, b->nlevels);
	json_add_u32s(root, "queued", b->queued_set, b->nqueued);
	json_add_u32s(root, "flows", b->flows_set, b->nflows);
	json_object_object_add(root, "sizes", json_sizes(b));
	for (i = 0; i < b->ncells; i++) {
		const struct cell *c = &b->cells[i];
		json_object *o = json_object_new_object();

		json_object_object_add(o, "variant",
				       json_object_new_string(variant_names[c->v]));
		json_object_object_add(o, "levels", json_object_new_int64(c->levels));
		json_object_object_add(o, "queued", json_object_new_int64(c->queued));
		if (c->v != V_HEAP && c->v != V_RBTREE)
			json_object_object_add(o, "flows",
					       json_object_new_int64(c->flows));
		json_object_object_add(o, "ns", json_object_new_double(c->ns));
		json_object_object_add(o, "ns_min", json_object_new_double(c->ns_min));
		json_object_object_add(o, "ns_max", json_object_new_double(c->ns_max));
		json_object_array_add(cells, o);
	}
	json_object_object_add(root, "cells", cells);
	snprintf(path, sizeof(path), "%s/core.json", dir);
	if (json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY |
				    JSON_C_TO_STRING_NOSLASHESCAPE))
		err = -EIO;
	json_object_put(root);
	return err;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench [-o DIR] [-r REPS] [-n OPS] [-q | -c CELL]\n"
		"  -o DIR   write core.json and the plot data there (default .)\n"
		"  -r REPS  timed runs per cell, median reported (default 21)\n"
		"  -n OPS   enqueue+dequeue operations per run (default 20000)\n"
		"  -q       quick: a corner of the grid (for tests)\n"
		"  -c CELL  one cell only, no files: VARIANT:LEVELS:QUEUED:FLOWS,\n"
		"           VARIANT mercury, mercury-noflow, heap, rbtree or\n"
		"           mercury-16levels (for perf)\n");
}

static int parse_u32(const char *s, u32 min, u32 max, u32 *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		return -EINVAL;
	*out = (u32)v;
	return 0;
}

int main(int argc, char **argv)
{
	struct bench b = { .reps = 21, .ops = 20000 };
	const char *dir = ".", *one = NULL;
	u32 maxq = 0;
	size_t i;
	int opt, err;

	while ((opt = getopt(argc, argv, "o:r:n:qc:h")) != -1) {
		switch (opt) {
		case 'o':
			dir = optarg;
			break;
		case 'r':
			if (parse_u32(optarg, 1, 1000, &b.reps)) {
				fprintf(stderr, "bench: -r must be 1..1000, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'n':
			if (parse_u32(optarg, 1, 100000000, &b.ops)) {
				fprintf(stderr, "bench: -n must be 1..100000000, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'q':
			b.quick = true;
			break;
		case 'c':
			one = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "bench: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (one) {
		b.ranks = calloc(RANKS, sizeof(*b.ranks));
		err = b.ranks ? run_one(&b, one) : -ENOMEM;
		if (err == -EINVAL) {
			fprintf(stderr, "bench: -c wants VARIANT:LEVELS:QUEUED:FLOWS, not '%s'\n", one);
			return 2;
		}
		if (err) {
			fprintf(stderr, "bench: measurement failed: %s\n", strerror(-err));
			return 1;
		}
		return 0;
	}
	if (b.quick) {
		b.levels_set = q_levels_set; b.nlevels = NELEM(q_levels_set);
		b.queued_set = q_queued_set; b.nqueued = NELEM(q_queued_set);
		b.flows_set = q_flows_set; b.nflows = NELEM(q_flows_set);
	} else {
		b.levels_set = levels_set; b.nlevels = NELEM(levels_set);
		b.queued_set = queued_set; b.nqueued = NELEM(queued_set);
		b.flows_set = flows_set; b.nflows = NELEM(flows_set);
	}
	for (i = 0; i < b.nqueued; i++)
		maxq = b.queued_set[i] > maxq ? b.queued_set[i] : maxq;
	b.pkts = calloc(maxq, sizeof(*b.pkts));
	b.ranks = calloc(RANKS, sizeof(*b.ranks));
	if (!b.pkts || !b.ranks) {
		fprintf(stderr, "bench: out of memory for %u packets\n", maxq);
		return 1;
	}
	printf("# sizeof: mercury_skb_cb %zu (of %d), mercury_flow %zu, mercury_level %zu, pq_pkt %zu\n",
	       sizeof(struct mercury_skb_cb), QDISC_CB_PRIV_LEN,
	       sizeof(struct mercury_flow), sizeof(struct mercury_level),
	       sizeof(struct pq_pkt));
	err = run_grid(&b);
	if (err) {
		fprintf(stderr, "bench: measurement failed: %s\n", strerror(-err));
		return 1;
	}
	err = write_json(&b, dir);
	if (!err)
		err = write_dat(&b, dir);
	if (err) {
		fprintf(stderr, "bench: cannot write results to %s: %s\n", dir,
			strerror(-err));
		return 1;
	}
	free(b.cells);
	free(b.pkts);
	free(b.ranks);
	return 0;
}
