// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-place: command line.
 *
 *   mercury-place [place] --profile P --cluster C [--algo NAME] [--levels N]
 *                 [--tag-source S] [-j] [-o F]
 *   mercury-place compare --profile P --cluster C [-j] [--png F]
 *   mercury-place bench --profiles DIR [--out DIR] [--synthetic N]
 *
 * Commands are matched by unique prefix, as bpftool does.  Usage errors
 * exit 2, bad data exits 1; with -j errors are {"error": "..."} on stdout.
 * Plans are serialized by libmercury (mercury_plan_save_buf()): this
 * program hands it the priorities and its own sections (plan.c). Output
 * files replace their target only when complete, and PNGs are drawn
 * without a script built from data (../common/tools.h).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json.h>
#include <mercury/mercury.h>

#include "place.h"
#include "tools.h"

#define PROG "mercury-place"

static int json_out;
/* the command being run, for messages */
static const char *cmd_name = "place";

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [place] --profile FILE --cluster FILE [--algo NAME] [--replicas N [--bandwidth RATE]] [PLAN] [-j] [-o FILE]\n"
		"       " PROG " compare --profile FILE --cluster FILE [-j] [--png FILE]\n"
		"       " PROG " pipe --profile FILE --cluster FILE [--pipedream-model] [--no-memory] [--bandwidth RATE] [--simulate N] [--replicas N] [PLAN] [-j] [-o FILE]\n"
		"       " PROG " pipedream --profiles DIR [--bandwidth RATE]\n"
		"       " PROG " bench --profiles DIR [--out DIR] [--synthetic N]\n"
		"       " PROG " help | -h | --help | -V | --version\n"
		"Commands (any unique prefix):\n"
		"  place      place the model's layers on the cluster's devices with --algo and\n"
		"             print the per-tensor priority plan the tagger reads (-o: write it)\n"
		"  compare    run every algorithm on the same model and cluster and print each\n"
		"             one's step time against the lower bound (--png: a bar chart)\n"
		"  pipe       cut the model into pipeline stages over the devices and print the\n"
		"             stages and the period (-o: a plan with a pipeline section)\n"
		"  pipedream  run pipe under PipeDream's cost model on DIR/pipedream/*.graph.txt\n"
		"             and set its speedups beside the ones PipeDream published\n"
		"  bench      run every algorithm on every profile in DIR/h200 and DIR/pipedream\n"
		"             on 2, 4 and 8 devices and time the planning; writes bench.dat and\n"
		"             bench.png to --out (default out)\n"
		"NAME: mercury (default), m-topo, m-etf, m-sct, dp, single, even\n"
		"FILE for --profile: an h200 *.json or a pipedream *.graph.txt\n"
		"PLAN: [--levels N] [--tag-source mark|priority|dscp] [--shift N] [--mask N]\n"
		"  --levels N squeezes the tags into 1..N keeping their order (the qdisc's levels)\n"
		"RATE: a number with a unit as tc reads rates: 10gbit (bit/s), 1.25gbps (bytes/s);\n"
		"  a bare number is refused: it meant bytes/s here, bit/s in tc and mercury-sim\n"
		"-o, --output FILE and --png FILE replace FILE only once complete; --png needs gnuplot\n"
		"-j, --json: JSON output, errors as {\"error\": \"...\"}\n"
		"Exit status: 0 ok, 1 failure, 2 usage error\n");
}

static int fail(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(int code, const char *fmt, ...)
{
	char buf[MP_ERRLEN + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (json_out) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "error", json_object_new_string(buf));
		printf("%s\n", json_object_to_json_string_ext(o,
					JSON_C_TO_STRING_PLAIN |
					JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		fprintf(stderr, PROG ": %s\n", buf);
	}
	return code;
}

/*
 * The options, one bit each: a command names those it uses, and any other
 * is a usage error rather than silently ignored (compare -o, pipe --png).
 */
enum {
	O_PROFILE = 1 << 0, O_CLUSTER = 1 << 1, O_ALGO = 1 << 2,
	O_OUTPUT = 1 << 3, O_JSON = 1 << 4, O_PNG = 1 << 5,
	O_PROFILES = 1 << 6, O_OUTDIR = 1 << 7, O_SYNTH = 1 << 8,
	O_PDMODEL = 1 << 9, O_NOMEM = 1 << 10, O_BW = 1 << 11,
	O_SIM = 1 << 12, O_REPL = 1 << 13, O_PLAN = 1 << 14, O_HELP = 1 << 15,
};

struct opts {
	const char *profile, *cluster, *algo, *out, *png, *profiles, *outdir;
	int synthetic, pipedream, nomem, sim, replicas;
	double bandwidth;
	struct mp_plan_fmt fmt;
};

static const struct optbit {
	int ch, bit;
} optbits[] = {
	{ 'p', O_PROFILE }, { 'c', O_CLUSTER }, { 'a', O_ALGO },
	{ 'o', O_OUTPUT }, { 'j', O_JSON }, { 'g', O_PNG },
	{ 'P', O_PROFILES }, { 'O', O_OUTDIR }, { 's', O_SYNTH },
	{ 'D', O_PDMODEL }, { 'M', O_NOMEM }, { 'b', O_BW }, { 'S', O_SIM },
	{ 'R', O_REPL }, { 'L', O_PLAN }, { 'T', O_PLAN }, { 'H', O_PLAN },
	{ 'K', O_PLAN }, { 'h', O_HELP }, { 'V', O_HELP },
};

static int opt_allowed(int ch, int allowed)
{
	for (size_t i = 0; i < sizeof(optbits) / sizeof(optbits[0]); i++)
		if (optbits[i].ch == ch)
			return !!(optbits[i].bit & allowed);
	return 1;	/* '?': getopt's own error, reported below */
}

/* C integer syntax (0x.. for masks), lo..hi; the whole string. */
static int parse_uint(const char *opt, const char *arg, unsigned long lo,
		      unsigned long hi, unsigned long *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 0);
	if (errno || end == arg || *end || arg[0] == '-' || v < lo || v > hi)
		return fail(2, "--%s: expected an integer %lu..%lu, got '%s'",
			    opt, lo, hi, arg);
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o, int allowed)
{
	static const struct option lo[] = {
		{ "profile", required_argument, NULL, 'p' },
		{ "cluster", required_argument, NULL, 'c' },
		{ "algo", required_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "png", required_argument, NULL, 'g' },
		{ "profiles", required_argument, NULL, 'P' },
		{ "out", required_argument, NULL, 'O' },
		{ "synthetic", required_argument, NULL, 's' },
		{ "pipedream-model", no_argument, NULL, 'D' },
		{ "no-memory", no_argument, NULL, 'M' },
		{ "bandwidth", required_argument, NULL, 'b' },
		{ "simulate", required_argument, NULL, 'S' },
		{ "replicas", required_argument, NULL, 'R' },
		{ "levels", required_argument, NULL, 'L' },
		{ "tag-source", required_argument, NULL, 'T' },
		{ "shift", required_argument, NULL, 'H' },
		{ "mask", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	unsigned long u;
	int ch;

	memset(o, 0, sizeof(*o));
	o->algo = "mercury";
	o->outdir = "out";
	o->synthetic = 100000;
	optind = 1;
	allowed |= O_HELP;
	while ((ch = getopt_long(argc, argv, "p:c:a:o:jhV", lo, NULL)) != -1) {
		if (!opt_allowed(ch, allowed)) {
			const struct option *l = lo;

			while (l->name && l->val != ch)
				l++;
			return fail(2, "%s: --%s is not an option of this command",
				    cmd_name, l->name);
		}
		switch (ch) {
		case 'p': o->profile = optarg; break;
		case 'c': o->cluster = optarg; break;
		case 'a': o->algo = optarg; break;
		case 'o': o->out = optarg; break;
		case 'j': json_out = 1; break;
		case 'g': o->png = optarg; break;
		case 'P': o->profiles = optarg; break;
		case 'O': o->outdir = optarg; break;
		case 's': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > 10000000)
				return fail(2, "--synthetic: expected a node count, got '%s'",
					    optarg);
			o->synthetic = (int)v;
			break;
		}
		case 'D': o->pipedream = 1; break;
		case 'M': o->nomem = 1; break;
		case 'b': {
			char msg[MT_ERRLEN];
			double bps;

			if (mt_parse_rate(optarg, 0, &bps, msg, sizeof(msg)))
				return fail(2, "--bandwidth: %s", msg);
			o->bandwidth = bps / 8;
			break;
		}
		case 'S':
		case 'R': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > 100000)
				return fail(2, "--%s: expected a count 1..100000, got '%s'",
					    ch == 'S' ? "simulate" : "replicas",
					    optarg);
			if (ch == 'S')
				o->sim = (int)v;
			else
				o->replicas = (int)v;
			break;
		}
		case 'L':
			if (parse_uint("levels", optarg, 1, MERCURY_MAX_TAG, &u))
				return 2;
			o->fmt.levels = u;
			break;
		case 'T':
			if (!strcmp(optarg, "mark"))
				o->fmt.tag_source = MERCURY_TAG_MARK;
			else if (!strcmp(optarg, "priority"))
				o->fmt.tag_source = MERCURY_TAG_PRIORITY;
			else if (!strcmp(optarg, "dscp"))
				o->fmt.tag_source = MERCURY_TAG_DSCP;
			else
				return fail(2, "--tag-source: expected mark, priority or dscp, got '%s'",
					    optarg);
			break;
		case 'H':
			if (parse_uint("shift", optarg, 0, 31, &u))
				return 2;
			o->fmt.shift = u;
			break;
		case 'K':
			if (parse_uint("mask", optarg, 1, UINT32_MAX, &u))
				return 2;
			o->fmt.mask = u;
			break;
		case 'h': usage(stdout); exit(0);
		/* the library is linked in statically: its version is ours */
		case 'V': printf(PROG " %s\n", mercury_version()); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		return fail(2, "unexpected argument '%s'", argv[optind]);
	/* every tag written must survive the qdisc's mask (mercury-run's check) */
	if (mercury_tag_check(&(struct mercury_tag_opts){
			.sz = sizeof(struct mercury_tag_opts),
			.source = o->fmt.tag_source, .shift = o->fmt.shift,
			.mask = o->fmt.mask }, o->fmt.levels ? o->fmt.levels : 1))
		return fail(2, "%s", mercury_last_error());
	return 0;
}

static int load_inputs(const struct opts *o, struct mp_graph *g,
		       struct mp_cluster *c)
{
	struct mp_err err;

	if (!o->profile || !o->cluster) {
		if (!json_out)
			usage(stderr);
		return fail(2, "--profile and --cluster are required");
	}
	if (mp_graph_load(o->profile, g, &err))
		return fail(1, "%s", err.msg);
	if (mp_cluster_load(o->cluster, c, &err)) {
		mp_graph_free(g);
		return fail(1, "%s", err.msg);
	}
	return 0;
}

/* Print and free j: valid JSON or, where a number is not finite, an error. */
static int print_json(struct json_object *j, int flags)
{
	int ret = 0;

	if (mp_json_finite(j))
		printf("%s\n", json_object_to_json_string_ext(j, flags |
					JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		ret = fail(1, "a result is not a finite number (inputs too large?)");
	json_object_put(j);
	return ret;
}

/*
 * The plan file replaces FILE only once it is complete: a failed write
 * (disk full, quota, a signal) leaves the previous plan as it was.
 */
static int save_plan(const struct mercury_plan *mp, const char *path)
{
	char msg[MT_ERRLEN];
	size_t len;
	char *s;
	int ret;

	if (mercury_plan_save_buf(mp, &s, &len))
		return fail(1, "%s", mercury_last_error());
	ret = mt_write_file(path, s, len, msg, sizeof(msg));
	free(s);
	return ret ? fail(1, "%s", msg) : 0;
}

/* Solve with one algorithm and build its plan (timed). */
static int solve(const struct mp_graph *g, const struct mp_cluster *c,
		 int algo, int *place, struct mp_plan *p, struct mp_err *err)
{
	double t0 = mp_now_ms();
	int ret = mp_place(g, c, algo, place, err);

	if (ret)
		return ret;
	return mp_plan_build(g, c, algo, place, mp_now_ms() - t0, p, err);
}

static int cmd_place(int argc, char **argv)
{
	struct mercury_plan *mp = NULL;
	struct mp_graph g;
	struct mp_cluster c;
	struct mp_plan p;
	struct mp_err err;
	struct opts o;
	int algo, ret, *place;

	ret = parse_opts(argc, argv, &o,
			 O_PROFILE | O_CLUSTER | O_ALGO | O_OUTPUT | O_JSON |
			 O_REPL | O_BW | O_PLAN);
	if (ret)
		return ret;
	algo = mp_algo_parse(o.algo);
	if (algo < 0)
		return fail(2, "--algo: unknown algorithm '%s'", o.algo);
	ret = load_inputs(&o, &g, &c);
	if (ret)
		return ret;
	place = mp_calloc(g.n, sizeof(int));
	ret = solve(&g, &c, algo, place, &p, &err);
	/*
	 * squeezed first: the hybrid evaluation sees the written tags (and
	 * a model of more tensors than tags shares them, without --levels)
	 */
	if (!ret) {
		ret = mp_plan_squeeze(&p, o.fmt.levels, &err);
		if (ret)
			mp_plan_free(&p);
	}
	if (!ret && o.replicas > 1) {
		ret = mp_plan_hybrid(&p, o.replicas, o.bandwidth, &err);
		if (ret)
			mp_plan_free(&p);
	}
	if (!ret) {
		ret = mp_plan_mercury(&p, &o.fmt, NULL, &mp, &err);
		if (ret)
			mp_plan_free(&p);
	}
	if (ret) {
		ret = fail(1, "%s", err.msg);
	} else {
		struct mercury_plan_info info;

		mercury_plan_get_info(mp, &info, sizeof(info));
		if (o.out) {
			if (save_plan(mp, o.out)) {
				ret = 1;
			} else if (json_out) {
				struct json_object *j = json_object_new_object();

				json_object_object_add(j, "written",
						       json_object_new_string(o.out));
				json_object_object_add(j, "step_time_ms",
						       json_object_new_double(p.step_ms));
				json_object_object_add(j, "lower_bound_ms",
						       json_object_new_double(p.lb.lb_ms));
				json_object_object_add(j, "levels",
						       json_object_new_int64(info.levels));
				ret = print_json(j, JSON_C_TO_STRING_SPACED);
			} else {
				printf("%s: %s on %d devices with %s: step %.3f ms (lower bound %.3f, x%.3f), solved in %.2f ms, %d tagged tensors in %u levels -> %s\n",
				       PROG, g.model, c.d, mp_algo_name(algo),
				       p.step_ms, p.lb.lb_ms,
				       p.step_ms / p.lb.lb_ms, p.solve_ms,
				       p.nprio, info.levels, o.out);
				if (p.replicas > 1)
					printf("%s: x %d data-parallel replicas at %.4g B/s: iteration %.3f ms with the plan's gradient order, %.3f ms in arrival order\n",
					       PROG, p.replicas, p.dp_bw_Bps,
					       p.hybrid_ms, p.hybrid_fifo_ms);
			}
		} else {
			char *s;

			if (mercury_plan_save_buf(mp, &s, NULL))
				ret = fail(1, "%s", mercury_last_error());
			else
				fputs(s, stdout);
			free(s);
		}
		mercury_plan_free(mp);
		mp_plan_free(&p);
	}
	free(place);
	mp_graph_free(&g);
	mp_cluster_free(&c);
	return ret;
}

/* ---- compare ------------------------------------------------------------ */

struct row {
	int ok;
	double solve_ms, step_ms, sim_ms, lb_ms, maxmem;
	int used;
	char msg[MP_ERRLEN];
};

/*
 * Past this many nodes the baselines take seconds to minutes each (70,000
 * nodes on 4 devices: 77 s for all seven, dp 30 s of it, on an idle
 * 2-core machine), so compare says on stderr which one it is running.
 */
#define PROGRESS_NODES 10000

static void run_all(const struct mp_graph *g, const struct mp_cluster *c,
		    struct row *rows)
{
	int *place = mp_calloc(g->n, sizeof(int));
	double t0 = mp_now_ms();

	for (int a = 0; a < MP_ALGO_COUNT; a++) {
		struct mp_err err;
		struct mp_plan p;
		struct row *r = &rows[a];

		memset(r, 0, sizeof(*r));
		if (g->n > PROGRESS_NODES)
			fprintf(stderr, "%s: compare: %s (%d of %d) on %d nodes, %.1f s so far\n",
				PROG, mp_algo_name(a), a + 1, MP_ALGO_COUNT,
				g->n, (mp_now_ms() - t0) / 1e3);
		if (solve(g, c, a, place, &p, &err)) {
			snprintf(r->msg, sizeof(r->msg), "%s", err.msg);
			continue;
		}
		if (!isfinite(p.step_ms) || !isfinite(p.sim_ms)) {
			snprintf(r->msg, sizeof(r->msg),
				 "step time is not a finite number");
			mp_plan_free(&p);
			continue;
		}
		r->ok = 1;
		r->solve_ms = p.solve_ms;
		r->step_ms = p.step_ms;
		r->sim_ms = p.sim_ms;
		r->lb_ms = p.lb.lb_ms;
		for (int d = 0; d < c->d; d++) {
			if (p.mem[d] > 0)
				r->used++;
			if (p.mem[d] > r->maxmem)
				r->maxmem = p.mem[d];
		}
		mp_plan_free(&p);
	}
	free(place);
}

/*
 * compare --png: a bar per algorithm. ARG1 the rows ("algo" ratio),
 * ARG2 the model's name, ARG3 the device count.
 */
static const char compare_gp[] =
	"set terminal pngcairo size 800,500 noenhanced\n"
	"set title sprintf('%s on %s devices: step time / lower bound (0 = failed)', ARG2, ARG3)\n"
	"set style fill solid 0.7\nset boxwidth 0.6\n"
	"set yrange [0:*]\nset grid y\nunset key\n"
	"plot ARG1 using 0:2:xtic(1) with boxes\n";

static int compare_png(const char *png, const struct mp_graph *g,
		       const struct mp_cluster *c, const struct row *rows,
		       double lb_ms)
{
	char devs[16], msg[MT_ERRLEN];
	const char *args[] = { g->model, devs, NULL };
	struct mt_plot p = {
		.script = compare_gp, .args = args, .out = png,
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int ret;

	f = open_memstream(&buf, &len);
	if (!f)
		return fail(1, "--png: out of memory");
	for (int a = 0; a < MP_ALGO_COUNT; a++) {
		mt_plot_label(f, mp_algo_name(a));
		fprintf(f, " %.6f\n", rows[a].ok && isfinite(rows[a].step_ms / lb_ms) ?
			rows[a].step_ms / lb_ms : 0);
	}
	fclose(f);
	snprintf(devs, sizeof(devs), "%d", c->d);
	p.data = buf;
	p.len = len;
	ret = mt_plot_png(&p, msg, sizeof(msg));
	free(buf);
	return ret ? fail(1, "--png: %s", msg) : 0;
}

static int cmd_compare(int argc, char **argv)
{
	struct row rows[MP_ALGO_COUNT];
	struct mp_graph g;
	struct mp_cluster c;
	struct mp_bound lb;
	struct opts o;
	int ret;

	ret = parse_opts(argc, argv, &o,
			 O_PROFILE | O_CLUSTER | O_JSON | O_PNG);
	if (ret)
		return ret;
	ret = load_inputs(&o, &g, &c);
	if (ret)
		return ret;
	mp_lower_bound(&g, &c, &lb);
	run_all(&g, &c, rows);
	/* -j: the results or an error, never both; text: the table stays */
	if (json_out && o.png && compare_png(o.png, &g, &c, rows, lb.lb_ms)) {
		ret = 1;
	} else if (json_out) {
		struct json_object *j = json_object_new_object();
		struct json_object *arr = json_object_new_array();

		json_object_object_add(j, "model", json_object_new_string(g.model));
		json_object_object_add(j, "devices", json_object_new_int(c.d));
		json_object_object_add(j, "lower_bound_ms",
				       json_object_new_double(lb.lb_ms));
		json_object_object_add(j, "critical_path_ms",
				       json_object_new_double(lb.cp_ms));
		json_object_object_add(j, "comm_path_ms",
				       json_object_new_double(lb.comm_ms));
		for (int a = 0; a < MP_ALGO_COUNT; a++) {
			struct json_object *e = json_object_new_object();

			json_object_object_add(e, "algorithm",
					       json_object_new_string(mp_algo_name(a)));
			if (!rows[a].ok) {
				json_object_object_add(e, "error",
						       json_object_new_string(rows[a].msg));
			} else {
				json_object_object_add(e, "solve_ms",
						       json_object_new_double(rows[a].solve_ms));
				json_object_object_add(e, "step_time_ms",
						       json_object_new_double(rows[a].step_ms));
				json_object_object_add(e, "simulated_step_time_ms",
						       json_object_new_double(rows[a].sim_ms));
				json_object_object_add(e, "ratio_to_lower_bound",
						       json_object_new_double(rows[a].step_ms / lb.lb_ms));
				json_object_object_add(e, "devices_used",
						       json_object_new_int(rows[a].used));
			}
			json_object_array_add(arr, e);
		}
		json_object_object_add(j, "results", arr);
		ret = print_json(j, JSON_C_TO_STRING_PRETTY |
				 JSON_C_TO_STRING_SPACED);
	} else {
		printf("%s (%s, %d nodes, %d edges) on %d devices; lower bound %.3f ms = max(critical path %.3f + memory %.3f, work %.3f, communication-aware path %.3f)\n",
		       g.model, g.format, g.n, g.ne, c.d, lb.lb_ms, lb.cp_ms,
		       lb.mem_ms, lb.work_ms, lb.comm_ms);
		printf("%-8s %10s %12s %12s %8s %5s %10s\n", "algo", "solve_ms",
		       "step_ms", "sim_ms", "x_lb", "devs", "max_mem_GB");
		for (int a = 0; a < MP_ALGO_COUNT; a++) {
			if (!rows[a].ok) {
				printf("%-8s failed: %s\n", mp_algo_name(a),
				       rows[a].msg);
				continue;
			}
			printf("%-8s %10.3f %12.3f %12.3f %8.4f %5d %10.2f\n",
			       mp_algo_name(a), rows[a].solve_ms, rows[a].step_ms,
			       rows[a].sim_ms, rows[a].step_ms / lb.lb_ms,
			       rows[a].used, rows[a].maxmem / 1e9);
		}
	}
	if (!json_out && o.png)
		ret = compare_png(o.png, &g, &c, rows, lb.lb_ms);
	mp_graph_free(&g);
	mp_cluster_free(&c);
	return ret;
}

/* ---- bench -------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_profiles(const char *dir, char ***out)
{
	static const char *const sub[] = { "h200", "pipedream" };
	char **v = NULL;
	int n = 0;

	for (int s = 0; s < 2; s++) {
		char path[4096];
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "%s/%s", dir, sub[s]);
		d = opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			size_t l = strlen(de->d_name);
			char full[8192];

			if (!((l > 5 && !strcmp(de->d_name + l - 5, ".json")) ||
			      (l > 10 && !strcmp(de->d_name + l - 10, ".graph.txt"))))
				continue;
			snprintf(full, sizeof(full), "%s/%s", path, de->d_name);
			v = realloc(v, (n + 1) * sizeof(*v));
			if (!v)
				exit(1);
			v[n++] = mp_strdup(full);
		}
		closedir(d);
	}
	qsort(v, n, sizeof(*v), cmp_str);
	*out = v;
	return n;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double time_solve(const struct mp_graph *g, const struct mp_cluster *c,
			 int reps)
{
	double *t = mp_calloc(reps, sizeof(double)), med;
	int *place = mp_calloc(g->n, sizeof(int));

	for (int i = 0; i < reps; i++) {
		double t0 = mp_now_ms();

		if (mp_place(g, c, MP_ALGO_MERCURY, place, NULL))
			t[i] = -1;
		else
			t[i] = mp_now_ms() - t0;
	}
	qsort(t, reps, sizeof(double), cmp_dbl);
	med = t[reps / 2];
	free(t);
	free(place);
	return med;
}

static int bench_regime(char **files, int nf, int small, FILE *dat,
			int *cases, int *wins, int *within5, int *ran)
{
	static const int devs[] = { 2, 4, 8 };
	double gb = small ? 16e9 : 80e9;

	printf("\n== %.0f GB per device, 12.5 GB/s, 10 us ==\n", gb / 1e9);
	printf("%-24s %2s %10s %10s", "model", "D", "lb_ms", "step_ms");
	for (int a = 0; a < MP_ALGO_COUNT; a++)
		printf(" %8s", mp_algo_name(a));
	printf(" %8s %-7s | %9s %8s %8s\n", "solve_ms", "verdict",
	       "pipe_ms", "xstep", "solve_ms");
	for (int i = 0; i < nf; i++) {
		struct mp_graph g;
		struct mp_err err;
		const char *base = strrchr(files[i], '/');
		char label[64], cas[80];

		if (mp_graph_load(files[i], &g, &err)) {
			printf("%s: %s\n", files[i], err.msg);
			continue;
		}
		snprintf(label, sizeof(label), "%s/%s",
			 strstr(files[i], "/h200/") ? "h200" : "pd", g.model);
		(void)base;
		for (int k = 0; k < 3; k++) {
			struct row rows[MP_ALGO_COUNT];
			struct mp_cluster c;
			struct mp_bound lb;
			double mem = 80e9, best_base = 0;
			int bb = -1;

			mem = gb;
			mp_cluster_make(&c, devs[k], mem, 1.0, 12.5e9, 1e-5);
			mp_lower_bound(&g, &c, &lb);
			run_all(&g, &c, rows);
			printf("%-24s %2d %10.3f %10.3f", label, devs[k], lb.lb_ms,
			       rows[0].ok ? rows[0].step_ms : 0.0);
			for (int a = 0; a < MP_ALGO_COUNT; a++) {
				if (rows[a].ok)
					printf(" %8.4f", rows[a].step_ms / lb.lb_ms);
				else
					printf(" %8s", "-");
				if (a != MP_ALGO_MERCURY && rows[a].ok &&
				    (bb < 0 || rows[a].step_ms < best_base)) {
					bb = a;
					best_base = rows[a].step_ms;
				}
			}
			(*cases)++;
			if (rows[0].ok) {
				int win = bb < 0 ||
					  rows[0].step_ms <= best_base * (1 + 1e-9);
				int w5 = rows[0].step_ms <= 1.05 * lb.lb_ms;

				(*ran)++;
				*wins += win;
				*within5 += w5;
				printf(" %8.2f %-7s", rows[0].solve_ms,
				       win ? (w5 ? "ok" : "ok>5%") : "WORSE");
			} else {
				printf(" %8s FAILED: %s", "-", rows[0].msg);
			}
			{
				struct mp_pipe_opts po = { .memory = 1,
							   .fewer = 1 };
				struct mp_pipe pp;
				struct mp_err perr;
				double t0 = mp_now_ms();

				if (mp_pipe_solve(&g, &c, &po, &pp, &perr)) {
					printf(" | %9s\n", "-");
				} else {
					printf(" | %9.3f %8.3f %8.2f%s\n",
					       pp.period_ms, rows[0].ok ?
					       rows[0].step_ms / pp.period_ms : 0,
					       mp_now_ms() - t0,
					       pp.stash_limited || pp.nic_limited ?
					       " *" : "");
					mp_pipe_free(&pp);
				}
			}
			snprintf(cas, sizeof(cas), "%s/%d", label, devs[k]);
			mt_plot_label(dat, cas);
			fprintf(dat, " %d", small);
			for (int a = 0; a < MP_ALGO_COUNT; a++)
				fprintf(dat, " %.6f", rows[a].ok ?
					rows[a].step_ms / lb.lb_ms : 0.0 / 0.0);
			fprintf(dat, "\n");
			mp_cluster_free(&c);
		}
		mp_graph_free(&g);
	}
	return 0;
}

/* bench's plot: ARG1 is bench.dat (a header line, then a row per case). */
static const char bench_gp[] =
	"set terminal pngcairo size 1400,700 noenhanced\n"
	"set title 'Simulated step time / lower bound (80 GB, then 16 GB devices)'\n"
	"set xtics rotate by 90 right font ',7'\n"
	"set ylabel 'step / lower bound'\nset grid y\nset key top left\n"
	"set datafile missing 'nan'\n"
	"set logscale y\nset yrange [0.95:*]\n"
	"plot for [i=9:4:-1] ARG1 using 0:i:xtic(1) with points pt 7 ps 0.7 title columnhead(i), "
	"'' using 0:3 with points pt 6 ps 1.6 lw 2 lc rgb 'black' title columnhead(3)\n";

static int cmd_bench(int argc, char **argv)
{
	int cases = 0, wins = 0, within5 = 0, ran = 0, nf, big = -1, bign = 0;
	char **files, datpath[4096], pngpath[4096], msg[MT_ERRLEN];
	struct mt_plot plot = { .script = bench_gp };
	struct mp_cluster c;
	struct mp_graph g;
	char *rows = NULL;
	size_t len = 0;
	struct opts o;
	FILE *dat;
	int ret;

	ret = parse_opts(argc, argv, &o,
			 O_PROFILES | O_OUTDIR | O_SYNTH);
	if (ret)
		return ret;
	if (!o.profiles)
		return fail(2, "bench needs --profiles DIR");
	nf = list_profiles(o.profiles, &files);
	if (!nf)
		return fail(1, "%s: no h200/*.json or pipedream/*.graph.txt",
			    o.profiles);
	snprintf(datpath, sizeof(datpath), "%s/bench.dat", o.outdir);
	snprintf(pngpath, sizeof(pngpath), "%s/bench.png", o.outdir);
	/* the table is kept as DIR/bench.dat and plotted from a private copy */
	dat = open_memstream(&rows, &len);
	if (!dat)
		return fail(1, "out of memory");
	fprintf(dat, "case 16GB");
	for (int a = 0; a < MP_ALGO_COUNT; a++)
		fprintf(dat, " %s", mp_algo_name(a));
	fprintf(dat, "\n");
	printf("Step time / lower bound per algorithm (1.0 = provably optimal); '-' = could not place.\n"
	       "verdict: mercury against the best baseline (ok>5%%: as good, more than 5%% above the bound).\n"
	       "pipe_ms: the pipelined period per batch (Mercury's model, same cluster), xstep: mercury's\n"
	       "unpipelined step / pipe_ms, * = period simulated (memory limits the stash, or the NICs' queues).\n");
	bench_regime(files, nf, 0, dat, &cases, &wins, &within5, &ran);
	bench_regime(files, nf, 1, dat, &cases, &wins, &within5, &ran);
	fclose(dat);
	printf("\nmercury placed %d of %d cases; as good as the best baseline in %d, within 5%% of the lower bound in %d\n",
	       ran, cases, wins, within5);
	/* nothing to time or to plot: no empty table, no gnuplot error */
	if (!ran) {
		ret = fail(1, "%s: no case could be placed (the table says why)",
			   o.profiles);
		goto out;
	}

	/* planning time: the largest profile (most nodes) and a synthetic DAG */
	for (int i = 0; i < nf; i++) {
		struct mp_err err;

		if (mp_graph_load(files[i], &g, &err))
			continue;
		if (g.n > bign) {
			bign = g.n;
			big = i;
		}
		mp_graph_free(&g);
	}
	if (big >= 0 && !mp_graph_load(files[big], &g, NULL)) {
		for (int d = 2; d <= 8; d *= 2) {
			mp_cluster_make(&c, d, 80e9, 1.0, 12.5e9, 1e-5);
			printf("planning time, %s (%d nodes, %d edges), %d devices: %.2f ms (median of 9)\n",
			       files[big], g.n, g.ne, d, time_solve(&g, &c, 9));
			mp_cluster_free(&c);
		}
		mp_graph_free(&g);
	}
	if (!mp_graph_synthetic(&g, o.synthetic, 42)) {
		mp_cluster_make(&c, 8, 80e9, 1.0, 12.5e9, 1e-5);
		printf("planning time, synthetic DAG (%d nodes, %d edges), 8 devices: %.1f ms (median of 3)\n",
		       g.n, g.ne, time_solve(&g, &c, 3));
		mp_cluster_free(&c);
		mp_graph_free(&g);
	}
	mkdir(o.outdir, 0755);
	ret = mt_write_file(datpath, rows, len, msg, sizeof(msg));
	if (ret) {
		ret = fail(1, "%s", msg);
	} else {
		plot.data = rows;
		plot.len = len;
		plot.out = pngpath;
		ret = mt_plot_png(&plot, msg, sizeof(msg));
		if (ret)
			ret = fail(1, "%s: %s", pngpath, msg);
	}
	if (!ret)
		printf("table data: %s, plot: %s\n", datpath, pngpath);
out:
	free(rows);
	for (int i = 0; i < nf; i++)
		free(files[i]);
	free(files);
	return ret;
}

/* ---- pipelined placement ------------------------------------------------ */

static void pipe_print(const struct mp_graph *g, const struct mp_pipe *p,
		       const struct mp_pipe_opts *po, double sim_ms, int nsim)
{
	printf("%s on %d devices, %s model: %d stages, %d micro-batches in flight at the input, period %.3f ms per micro-batch, %.3fx one device (%.3f ms), data parallel %.3fx%s\n",
	       g->model, p->machines_used, po->pipedream ? "PipeDream's" : "Mercury's",
	       p->nstages, p->microbatches, p->period_ms, p->speedup,
	       p->single_ms, p->single_ms / p->dp_ms,
	       p->dp_fits ? "" : " (a whole replica does not fit)");
	if (nsim)
		printf("simulated %d micro-batches: steady-state period %.3f ms (prediction x%.4f)\n",
		       nsim, sim_ms, sim_ms / p->period_ms);
	if (p->stash_limited)
		printf("memory keeps some stage below the micro-batches in flight that would keep it busy: period simulated (%s schedule)\n",
		       p->greedy ? "backward-first" : "strict 1F1B");
	if (p->nic_limited)
		printf("the NICs' queues keep the schedule above the formula's period: period simulated (%s schedule)\n",
		       p->greedy ? "backward-first" : "strict 1F1B");
	printf("%5s %6s %6s %8s %10s %10s %10s %10s %8s %6s %9s\n", "stage", "nodes",
	       "repl", "devices", "compute_ms", "time_ms", "link_ms",
	       "mem_GB", "stashed", "needs", "loop_ms");
	for (int s = 0; s < p->nstages; s++) {
		const struct mp_pipe_stage *st = &p->st[s];

		printf("%5d %6d %6d %4d-%-3d %10.3f %10.3f %10.3f %10.3f %8d %6d %9.3f\n",
		       s, st->end - st->first, st->replicas, st->device0,
		       st->device0 + st->replicas - 1, st->compute_ms,
		       st->time_ms, st->link_ms, st->mem_bytes / 1e9,
		       st->in_flight, st->need, st->loop_ms);
	}
}

static struct json_object *pipe_json(const struct mp_graph *g,
				     const struct mp_cluster *c,
				     const struct mp_pipe *p,
				     const struct mp_pipe_opts *po,
				     double sim_ms, int nsim)
{
	struct json_object *o = json_object_new_object();
	struct json_object *arr = json_object_new_array();

	json_object_object_add(o, "model", json_object_new_string(g->model));
	json_object_object_add(o, "cost_model",
			       json_object_new_string(po->pipedream ? "pipedream" : "mercury"));
	json_object_object_add(o, "devices_used",
			       json_object_new_int(p->machines_used));
	json_object_object_add(o, "stages", json_object_new_int(p->nstages));
	json_object_object_add(o, "microbatches_in_flight",
			       json_object_new_int(p->microbatches));
	json_object_object_add(o, "period_ms", json_object_new_double(p->period_ms));
	json_object_object_add(o, "stash_limited",
			       json_object_new_boolean(p->stash_limited));
	json_object_object_add(o, "nic_limited",
			       json_object_new_boolean(p->nic_limited));
	json_object_object_add(o, "schedule",
			       json_object_new_string(p->greedy ? "backward-first" : "1f1b"));
	json_object_object_add(o, "microbatches_per_s",
			       json_object_new_double(1e3 / p->period_ms));
	json_object_object_add(o, "single_device_ms",
			       json_object_new_double(p->single_ms));
	json_object_object_add(o, "speedup", json_object_new_double(p->speedup));
	json_object_object_add(o, "data_parallel_speedup",
			       json_object_new_double(p->single_ms / p->dp_ms));
	json_object_object_add(o, "data_parallel_fits",
			       json_object_new_boolean(p->dp_fits));
	if (nsim) {
		json_object_object_add(o, "simulated_microbatches",
				       json_object_new_int(nsim));
		json_object_object_add(o, "simulated_period_ms",
				       json_object_new_double(sim_ms));
	}
	for (int s = 0; s < p->nstages; s++) {
		const struct mp_pipe_stage *st = &p->st[s];
		struct json_object *e = json_object_new_object();
		struct json_object *dev = json_object_new_array();
		struct json_object *mem = json_object_new_array();

		for (int r = 0; r < st->replicas; r++)
			json_object_array_add(dev,
				json_object_new_string(c->dev[st->device0 + r].name));
		for (int i = st->first; i < st->end; i++) {
			int v = p->order[i];

			for (int m = 0; m < g->nm; m++)
				if (g->members[m].node == v)
					json_object_array_add(mem,
						json_object_new_string(g->members[m].name));
		}
		json_object_object_add(e, "devices", dev);
		json_object_object_add(e, "compute_ms",
				       json_object_new_double(st->compute_ms));
		json_object_object_add(e, "time_ms",
				       json_object_new_double(st->time_ms));
		json_object_object_add(e, "link_in_ms",
				       json_object_new_double(st->link_ms));
		json_object_object_add(e, "in_flight",
				       json_object_new_int(st->in_flight));
		json_object_object_add(e, "memory_bytes",
				       json_object_new_int64((int64_t)st->mem_bytes));
		json_object_object_add(e, "members", mem);
		json_object_array_add(arr, e);
	}
	json_object_object_add(o, "pipeline", arr);
	return o;
}

/*
 * pipe's search grows as the square of the nodes (70,000 nodes: minutes):
 * a line on stderr every 10 s says how far it is, so a long run is not
 * a silent one.
 */
struct pipe_progress {
	double t0, last;	/* ms */
	int n;
};

static void pipe_progress(void *ctx, int order, double done)
{
	struct pipe_progress *pp = ctx;
	double now = mp_now_ms();

	if (now - pp->last < 10e3)
		return;
	pp->last = now;
	fprintf(stderr, "%s: pipe: order %d of 2, %.0f%% of %d nodes, %.0f s so far\n",
		PROG, order + 1, 100 * done, pp->n, (now - pp->t0) / 1e3);
}

static int cmd_pipe(int argc, char **argv)
{
	struct pipe_progress pp;
	struct mp_pipe_opts po = { 0 };
	struct mp_graph g;
	struct mp_cluster c;
	struct mp_pipe p;
	struct mp_err err;
	struct opts o;
	double sim_ms = 0;
	int ret;

	ret = parse_opts(argc, argv, &o,
			 O_PROFILE | O_CLUSTER | O_PDMODEL | O_NOMEM |
			 O_BW | O_SIM | O_REPL | O_PLAN | O_JSON | O_OUTPUT);
	if (ret)
		return ret;
	ret = load_inputs(&o, &g, &c);
	if (ret)
		return ret;
	po.pipedream = o.pipedream;
	po.memory = !o.nomem && !o.pipedream;
	pp.t0 = pp.last = mp_now_ms();
	pp.n = g.n;
	po.progress = pipe_progress;
	po.progress_ctx = &pp;
	po.fewer = 1;
	po.bandwidth_Bps = o.bandwidth;
	ret = mp_pipe_solve(&g, &c, &po, &p, &err);
	if (ret) {
		ret = fail(1, "%s", err.msg);
		goto out;
	}
	if (o.sim && !po.pipedream &&
	    mp_pipe_sim(&g, &c, &po, &p, o.sim, &sim_ms, &err)) {
		ret = fail(1, "%s", err.msg);
		mp_pipe_free(&p);
		goto out;
	}
	if (o.out) {
		/*
		 * The plan writer: every node on its stage's first device
		 * (the other replicas run the same), priorities from that
		 * placement's schedule, the pipeline as an extra section.
		 */
		int *place = mp_calloc(g.n, sizeof(int));
		struct mercury_plan *mp = NULL;
		struct mp_plan pl;
		int built;

		for (int v = 0; v < g.n; v++)
			place[v] = p.st[p.stage_of[v]].device0;
		ret = mp_plan_build(&g, &c, MP_ALGO_MERCURY, place, 0, &pl, &err);
		built = !ret;
		if (!ret)
			ret = mp_plan_squeeze(&pl, o.fmt.levels, &err);
		if (!ret && o.replicas > 1)
			ret = mp_plan_hybrid(&pl, o.replicas, o.bandwidth, &err);
		if (!ret) {
			struct json_object *j = pipe_json(&g, &c, &p, &po, sim_ms,
							  po.pipedream ? 0 : o.sim);

			ret = mp_plan_mercury(&pl, &o.fmt, j, &mp, &err);
			json_object_put(j);
		}
		if (ret)
			ret = fail(1, "%s", err.msg);
		else if (save_plan(mp, o.out))
			ret = 1;
		mercury_plan_free(mp);
		if (built)
			mp_plan_free(&pl);
		free(place);
		if (ret) {
			mp_pipe_free(&p);
			goto out;
		}
	}
	if (json_out) {
		struct json_object *j = pipe_json(&g, &c, &p, &po, sim_ms,
						  po.pipedream ? 0 : o.sim);

		ret = print_json(j, JSON_C_TO_STRING_PRETTY |
				 JSON_C_TO_STRING_SPACED);
	} else {
		pipe_print(&g, &p, &po, sim_ms, po.pipedream ? 0 : o.sim);
	}
	mp_pipe_free(&p);
out:
	mp_graph_free(&g);
	mp_cluster_free(&c);
	return ret;
}

/*
 * PipeDream's published predictions (issue 17): its optimizer on its own
 * graph.txt at 1.25e9 B/s, no memory constraint: speedup over one machine
 * (stages) on 4 and 8 machines, and its data-parallel figures.  They are
 * the reference the table compares with, not a result of this program.
 */
static const struct pdref {
	const char *model;
	double s4, s8, dp4, dp8;
	int st4, st8;
} pdrefs[] = {
	{ "vgg16", 3.81, 6.67, 1.34, 2.42, 2, 2 },
	{ "resnet50", 2.92, 5.39, 2.58, 4.86, 2, 3 },
	{ "resnet18", 3.16, 5.96, 2.79, 5.32, 2, 3 },
	{ "resnet101", 3.60, 5.00, 1.96, 3.61, 3, 4 },
	{ "alexnet", 2.63, 5.65, 0.51, 0.89, 2, 2 },
	{ "resnext50", 3.59, 6.13, 2.84, 5.43, 2, 3 },
	{ "squeezenet1_0", 3.84, 7.63, 3.84, 7.63, 1, 1 },
	{ "gnmt", 3.46, 4.64, 0.18, 0.32, 4, 8 },
	{ "gnmt_large", 3.80, 6.28, 0.65, 1.15, 4, 8 },
};

static int cmd_pipedream(int argc, char **argv)
{
	int ret, worse = 0, unread = 0;
	char dir[4096];
	struct opts o;
	struct stat st;
	double bw;

	ret = parse_opts(argc, argv, &o,
			 O_PROFILES | O_BW);
	if (ret)
		return ret;
	if (!o.profiles)
		return fail(2, "pipedream needs --profiles DIR");
	snprintf(dir, sizeof(dir), "%s/pipedream", o.profiles);
	if (stat(dir, &st))
		return fail(1, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail(1, "%s: not a directory", dir);
	bw = o.bandwidth > 0 ? o.bandwidth : 1.25e9;
	printf("PipeDream's cost model, %.4g B/s, no memory constraint: speedup over one machine (stages)\n", bw);
	printf("%-14s | %-22s %6s | %-22s %6s | %-13s %-13s\n", "model",
	       "4 machines: ours / PD", "ratio", "8 machines: ours / PD",
	       "ratio", "DP 4: ours/PD", "DP 8: ours/PD");
	for (size_t i = 0; i < sizeof(pdrefs) / sizeof(pdrefs[0]); i++) {
		const struct pdref *r = &pdrefs[i];
		char path[4096];
		struct mp_graph g;
		struct mp_err err;
		double sp[2], dp[2];
		int st[2];

		snprintf(path, sizeof(path), "%s/pipedream/%s.graph.txt",
			 o.profiles, r->model);
		if (mp_graph_load(path, &g, &err)) {
			printf("%s: %s\n", r->model, err.msg);
			worse++;
			unread++;
			continue;
		}
		for (int k = 0; k < 2; k++) {
			struct mp_pipe_opts po = { .pipedream = 1,
						   .bandwidth_Bps = bw,
						   .fewer = 1 };
			struct mp_cluster c;
			struct mp_pipe p;

			mp_cluster_make(&c, k ? 8 : 4, 1e18, 1.0, bw, 0);
			if (mp_pipe_solve(&g, &c, &po, &p, &err)) {
				printf("%s: %s\n", r->model, err.msg);
				sp[k] = dp[k] = 0;
				st[k] = 0;
			} else {
				sp[k] = p.speedup;
				dp[k] = p.single_ms / p.dp_ms;
				st[k] = p.nstages;
				mp_pipe_free(&p);
			}
			mp_cluster_free(&c);
		}
		printf("%-14s | %5.2fx (%d) / %5.2fx (%d) %6.3f | %5.2fx (%d) / %5.2fx (%d) %6.3f | %5.2f / %5.2f  %5.2f / %5.2f\n",
		       r->model, sp[0], st[0], r->s4, r->st4, sp[0] / r->s4,
		       sp[1], st[1], r->s8, r->st8, sp[1] / r->s8, dp[0],
		       r->dp4, dp[1], r->dp8);
		worse += sp[0] < r->s4 * 0.995 || sp[1] < r->s8 * 0.995;
		mp_graph_free(&g);
	}
	printf("rows below PipeDream's figure (by more than 0.5%%): %d\n", worse);

	printf("\nThe same partitioner under Mercury's model (every crossing activation, one full-duplex NIC per device carrying the cuts and the overlapped ring all-reduce), %.4g B/s, 10 us:\n", bw);
	printf("%-14s %2s | %-13s | %-16s %-8s | %-16s %-8s %s\n", "model", "M",
	       "PD model", "no memory", "DP", "16 GB", "DP", "stages/in flight (16 GB)");
	for (size_t i = 0; i < sizeof(pdrefs) / sizeof(pdrefs[0]); i++) {
		const struct pdref *r = &pdrefs[i];
		char path[4096];
		struct mp_graph g;
		struct mp_err err;

		snprintf(path, sizeof(path), "%s/pipedream/%s.graph.txt",
			 o.profiles, r->model);
		if (mp_graph_load(path, &g, &err))
			continue;
		for (int M = 4; M <= 8; M *= 2) {
			struct mp_pipe_opts pd = { .pipedream = 1, .fewer = 1,
						   .bandwidth_Bps = bw };
			struct mp_pipe_opts nm = { .fewer = 1 };
			struct mp_pipe_opts wm = { .fewer = 1, .memory = 1 };
			struct mp_cluster c, c16;
			struct mp_pipe a, b, d;
			int ra, rb, rd;

			mp_cluster_make(&c, M, 1e18, 1.0, bw, 1e-5);
			mp_cluster_make(&c16, M, 16e9, 1.0, bw, 1e-5);
			ra = mp_pipe_solve(&g, &c, &pd, &a, &err);
			rb = mp_pipe_solve(&g, &c, &nm, &b, &err);
			rd = mp_pipe_solve(&g, &c16, &wm, &d, &err);
			printf("%-14s %2d | %5.2fx (%d)    | %5.2fx (%d)      %5.2fx   |",
			       r->model, M, ra ? 0 : a.speedup, ra ? 0 : a.nstages,
			       rb ? 0 : b.speedup, rb ? 0 : b.nstages,
			       rb ? 0 : b.single_ms / b.dp_ms);
			if (rd)
				printf(" does not fit\n");
			else
				printf(" %5.2fx (%d)%s     %5.2fx%s | %d/%d\n",
				       d.speedup, d.nstages,
				       d.stash_limited || d.nic_limited ?
				       "*" : " ",
				       d.single_ms / d.dp_ms,
				       d.dp_fits ? " " : "!", d.nstages,
				       d.microbatches);
			if (!ra)
				mp_pipe_free(&a);
			if (!rb)
				mp_pipe_free(&b);
			if (!rd)
				mp_pipe_free(&d);
			mp_cluster_free(&c);
			mp_cluster_free(&c16);
		}
		mp_graph_free(&g);
	}
	printf("* period simulated (memory limits the stash, or the NICs' queues); ! a whole replica does not fit in 16 GB\n");
	if (unread)
		return fail(1, "%d of %zu PipeDream graphs could not be read",
			    unread, sizeof(pdrefs) / sizeof(pdrefs[0]));
	return 0;
}

/* ---- dispatch ----------------------------------------------------------- */

static const struct cmd {
	const char *name;
	int (*fn)(int, char **);
} cmds[] = {
	{ "place", cmd_place },
	{ "compare", cmd_compare },
	{ "bench", cmd_bench },
	{ "pipe", cmd_pipe },
	{ "pipedream", cmd_pipedream },
};

int main(int argc, char **argv)
{
	const struct cmd *hit = NULL;
	size_t len;

	/* 10 significant digits: exact enough, and no 45.557499999999997 */
	json_c_set_serialization_double_format("%.10g", JSON_C_OPTION_GLOBAL);

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-j") || !strcmp(argv[i], "--json"))
			json_out = 1;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (argv[1][0] == '-') {
		if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
			usage(stdout);
			return 0;
		}
		return cmd_place(argc, argv);
	}
	if (!strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	len = strlen(argv[1]);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strncmp(argv[1], cmds[i].name, len))
			continue;
		/* an exact name wins over longer ones it prefixes */
		if (!cmds[i].name[len]) {
			hit = &cmds[i];
			break;
		}
		if (hit)
			return fail(2, "ambiguous command '%s'", argv[1]);
		hit = &cmds[i];
	}
	if (!hit)
		return fail(2, "unknown command '%s'", argv[1]);
	cmd_name = hit->name;
	return hit->fn(argc - 1, argv + 1);
}
