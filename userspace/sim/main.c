// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-sim: iteration time of parameter-server data-parallel training
 * under a stock PS (vanilla), FIFO with streaming aggregation, per-tensor
 * priority, ByteScheduler-style partitioning with
 * credit, Mercury's per-packet priority and the ideal preemptive bound.
 * Model and options: Documentation/simulator.md.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <mercury/mercury.h>

#include "msim.h"
#include "tools.h"

#define PROG "mercury-sim"
#define EXIT_USAGE 2
#define EXIT_DATA 1
#define MAX_POINTS 64

static int json_mode;

static void die(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void die(int code, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (json_mode) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "error", json_object_new_string(buf));
		printf("%s\n", json_object_to_json_string_ext(o,
					JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	} else {
		/* one line, as every tool: the problem, not a hint to --help */
		fprintf(stderr, PROG ": %s\n", buf);
	}
	exit(code);
}

static void usage(void)
{
	printf(
"Usage: " PROG " --profile PATH [options]\n"
"\n"
"  --profile PATH       h200 *.json or pipedream *.graph.txt profile\n"
"  --workers N          data-parallel workers (default 8)\n"
"  --servers N          parameter servers (default: = workers)\n"
"  --bandwidth RATE     per-host link rate, e.g. 10gbit, 100mbit, 2.5e9,\n"
"                       or 'balanced' (default 10gbit)\n"
"  --latency TIME       one-way latency, e.g. 10us, 0.5ms, 1e-5 (default 10us)\n"
"  --scheme S           vanilla|fifo-stream|prio|bytesched|mercury|ideal|all\n"
"                       (default all; fifo = fifo-stream)\n"
"  --partition BYTES    bytesched partition (default 4000000 = 1M fp32)\n"
"  --credit BYTES       bytesched credit window (default 16000000)\n"
"  --msg-overhead TIME  start-up cost per message: tensor, partition or slice,\n"
"                       every scheme (default 0)\n"
"  --frame-cost TIME    least time a data-plane frame holds its sender, every\n"
"                       scheme (default %gus, measured)\n"
"  --frame-header BYTES data-plane header per frame (default 32)\n"
"  --slice BYTES        cut tensors into separate framework messages for\n"
"                       fifo/prio/mercury/ideal too (default 0: whole)\n"
"  --chunk BYTES        streaming-aggregation unit of fifo-stream/prio/mercury/\n"
"                       ideal, or auto (default: 64 KiB, doubled until a\n"
"                       frame's wire time covers --frame-cost); vanilla\n"
"                       aggregates whole tensors, bytesched partitions\n"
"  --mtu BYTES          IP MTU: Mercury's preemption unit (default 1500)\n"
"  --header BYTES       wire header bytes per packet (default 66)\n"
"  --iterations N       simulated iterations, the first is warm-up (default 5)\n"
"  --time-scale X       multiply every compute time by X (default 1)\n"
"  --plan FILE          send priorities from this plan's tags (the plan the\n"
"                       tagger deploys); default: the forward call gating it\n"
"  --print-priorities   print each tensor's send priority and gate, then exit\n"
"  --sweep              sweep bandwidth over a 1-2-5 series\n"
"  --sweep-range LO:HI  sweep limits (default 1gbit:500gbit)\n"
"  --plot FILE.png      with --sweep: plot iteration times and speedups\n"
"  -j, --json           JSON output\n"
"  -h, --help           this text\n"
"  -V, --version        print the version\n"
"BYTES: a whole number with an optional unit as tc reads sizes (b, k, m, g\n"
"are powers of 1024: 64k = 65536); RATE: decimal as tc's rates (10gbit =\n"
"1e10 bit/s, 1.25gbps = 1.25e9 bytes/s; a bare number is bit/s, as in tc;\n"
"mercury-place refuses one). Both parsed by libmercury.\n"
"--plot FILE needs gnuplot and replaces FILE only once complete.\n"
"Exit status: 0 ok, 1 failure, 2 usage error.\n",
MSIM_FRAME_COST * 1e6);
}

static long parse_int(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi)
		die(EXIT_USAGE, "%s: '%s' is not an integer in %ld..%ld", opt,
		    s, lo, hi);
	return v;
}

static double parse_real(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v <= 0 ||
	    strpbrk(s, "xX"))
		die(EXIT_USAGE, "%s: '%s' is not a positive number", opt, s);
	return v;
}

struct point {
	double bps;
	int have[MSIM_NSCHEMES];
	struct msim_result r[MSIM_NSCHEMES];
};

static const char *fmt_rate(double bps, char *buf, size_t len)
{
	if (bps >= 1e12)
		snprintf(buf, len, "%gTbit", bps / 1e12);
	else if (bps >= 1e9)
		snprintf(buf, len, "%gGbit", bps / 1e9);
	else if (bps >= 1e6)
		snprintf(buf, len, "%gMbit", bps / 1e6);
	else
		snprintf(buf, len, "%gkbit", bps / 1e3);
	return buf;
}

static double ratio(const struct point *pt, int num, int den)
{
	if (!pt->have[num] || !pt->have[den] ||
	    pt->r[den].iteration_ms <= 0)
		return NAN;
	return pt->r[num].iteration_ms / pt->r[den].iteration_ms;
}

static void add_ratio(json_object *o, const char *key, double v)
{
	if (isfinite(v))
		json_object_object_add(o, key, json_object_new_double(v));
}

static json_object *point_json(const struct mt_profile *prof,
			       const struct msim_params *p,
			       const struct point *pt)
{
	json_object *o = json_object_new_object();
	json_object *arr = json_object_new_array();
	int s;

	json_object_object_add(o, "model", json_object_new_string(prof->model));
	json_object_object_add(o, "workers", json_object_new_int(p->workers));
	json_object_object_add(o, "servers", json_object_new_int(p->servers));
	json_object_object_add(o, "bandwidth_bps",
			       json_object_new_double(pt->bps));
	json_object_object_add(o, "latency_s",
			       json_object_new_double(p->latency_s));
	json_object_object_add(o, "time_scale",
			       json_object_new_double(p->time_scale));
	json_object_object_add(o, "compute_ms",
			       json_object_new_double((prof->fwd_ms +
						       prof->bwd_ms) *
						      p->time_scale));
	json_object_object_add(o, "gradient_bytes",
			       json_object_new_int64(prof->total_bytes));
	for (s = 0; s < MSIM_NSCHEMES; s++) {
		json_object *r;

		if (!pt->have[s])
			continue;
		r = json_object_new_object();
		json_object_object_add(r, "scheme",
				       json_object_new_string(msim_scheme_name(s)));
		json_object_object_add(r, "iteration_ms",
				       json_object_new_double(pt->r[s].iteration_ms));
		json_object_object_add(r, "stall_ms",
				       json_object_new_double(pt->r[s].stall_ms));
		add_ratio(r, "speedup_vs_vanilla", ratio(pt, MSIM_VANILLA, s));
		add_ratio(r, "speedup_vs_fifo", ratio(pt, MSIM_FIFO, s));
		add_ratio(r, "speedup_vs_bytesched",
			  ratio(pt, MSIM_BYTESCHED, s));
		add_ratio(r, "ratio_to_ideal", ratio(pt, s, MSIM_IDEAL));
		json_object_array_add(arr, r);
	}
	json_object_object_add(o, "results", arr);
	return o;
}

static void print_num(double v, const char *fmt)
{
	if (isfinite(v))
		printf(fmt, v);
	else
		printf("%*s", atoi(fmt + 1), "-");
}

static void print_header(const struct mt_profile *prof,
			 const struct msim_params *p)
{
	char b1[32], b2[32];
	double bal = msim_balanced_bps(prof, p);

	printf("model %s: %d workers, %d servers, latency %gus, compute %.2f ms (fwd %.2f + bwd %.2f), gradients %.1f MB in %d tensors, balanced bandwidth %s\n",
	       prof->model, p->workers, p->servers, p->latency_s * 1e6,
	       (prof->fwd_ms + prof->bwd_ms) * p->time_scale,
	       prof->fwd_ms * p->time_scale, prof->bwd_ms * p->time_scale,
	       prof->total_bytes / 1e6, prof->ntensors,
	       fmt_rate(bal, b1, sizeof(b1)));
	(void)b2;
	printf("%-10s %-11s %12s %10s %8s %10s %9s\n", "bandwidth", "scheme",
	       "iteration_ms", "vs_vanilla", "vs_fifo", "vs_bytesch",
	       "vs_ideal");
}

static void print_point(const struct point *pt)
{
	char buf[32];
	int s;

	for (s = 0; s < MSIM_NSCHEMES; s++) {
		if (!pt->have[s])
			continue;
		printf("%-10s %-11s %12.3f ", fmt_rate(pt->bps, buf, sizeof(buf)),
		       msim_scheme_name(s), pt->r[s].iteration_ms);
		print_num(ratio(pt, MSIM_VANILLA, s), "%10.3f");
		printf(" ");
		print_num(ratio(pt, MSIM_FIFO, s), "%8.3f");
		printf(" ");
		print_num(ratio(pt, MSIM_BYTESCHED, s), "%10.3f");
		printf(" ");
		print_num(ratio(pt, s, MSIM_IDEAL), "%9.3f");
		printf("\n");
	}
}

/*
 * --plot: iteration time per scheme over bandwidth, and Mercury's speedups.
 * ARG1: rows "Gbit/s t_scheme... vs_vanilla vs_fifo vs_bytesched" (nan
 * where not simulated); ARG2: the title; ARG3: the columns of the schemes
 * simulated, ARG4 their names, ARG5 their colours; ARG6: the speedup
 * columns that hold a number, ARG7 the schemes they compare with.
 */
static const char plot_gp[] =
	"set terminal pngcairo size 900,900 font ',10' noenhanced\n"
	"set datafile missing 'nan'\n"
	"set multiplot layout 2,1 title ARG2\n"
	"set logscale xy\nset grid\nset key top right\n"
	"set xlabel 'link bandwidth (Gbit/s)'\n"
	"set ylabel 'iteration time (ms)'\n"
	"plot for [k=1:words(ARG3)] ARG1 using 1:(column(int(word(ARG3, k)))) "
	"with linespoints lc rgb word(ARG5, k) title word(ARG4, k)\n"
	"unset logscale y\nset ylabel 'Mercury speedup'\n"
	"if (words(ARG6) > 0) {\n"
	"  plot for [k=1:words(ARG6)] ARG1 using 1:(column(int(word(ARG6, k)))) "
	"with linespoints title 'vs '.word(ARG7, k), "
	"1 with lines lc rgb 'black' notitle\n"
	"}\n"
	"unset multiplot\n";

static void plot(const char *file, const struct mt_profile *prof,
		 const struct msim_params *p, const struct point *pts, int n)
{
	static const char *const color[MSIM_NSCHEMES] = {
		"#8c564b", "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4",
		"#7f7f7f",
	};
	static const int vs[3] = { MSIM_VANILLA, MSIM_FIFO, MSIM_BYTESCHED };
	char title[512], cols[64] = "", names[256] = "", colors[128] = "";
	char speedups[32] = "", against[64] = "", msg[MT_ERRLEN];
	const char *args[] = { title, cols, names, colors, speedups, against,
			       NULL };
	struct mt_plot pl = { .script = plot_gp, .args = args, .out = file };
	char *buf = NULL;
	size_t len = 0, l;
	FILE *f;
	int i, s, ret;

	f = open_memstream(&buf, &len);
	if (!f)
		die(EXIT_DATA, "--plot: out of memory");
	for (i = 0; i < n; i++) {
		fprintf(f, "%g", pts[i].bps / 1e9);
		for (s = 0; s < MSIM_NSCHEMES; s++)
			fprintf(f, " %g", pts[i].have[s] ?
				pts[i].r[s].iteration_ms : NAN);
		for (s = 0; s < 3; s++)
			fprintf(f, " %g", ratio(&pts[i], vs[s], MSIM_MERCURY));
		fprintf(f, "\n");
	}
	fclose(f);
	for (s = 0; s < MSIM_NSCHEMES; s++) {
		if (!pts[0].have[s])
			continue;
		l = strlen(cols);
		snprintf(cols + l, sizeof(cols) - l, " %d", s + 2);
		l = strlen(names);
		snprintf(names + l, sizeof(names) - l, " %s",
			 msim_scheme_name(s));
		l = strlen(colors);
		snprintf(colors + l, sizeof(colors) - l, " %s", color[s]);
	}
	for (s = 0; s < 3; s++) {
		if (!isfinite(ratio(&pts[0], vs[s], MSIM_MERCURY)))
			continue;
		l = strlen(speedups);
		snprintf(speedups + l, sizeof(speedups) - l, " %d",
			 MSIM_NSCHEMES + 2 + s);
		l = strlen(against);
		snprintf(against + l, sizeof(against) - l, " %s",
			 msim_scheme_name(vs[s]));
	}
	snprintf(title, sizeof(title), "%s: %d workers, %d servers (mercury-sim)",
		 prof->model, p->workers, p->servers);
	pl.data = buf;
	pl.len = len;
	ret = mt_plot_png(&pl, msg, sizeof(msg));
	free(buf);
	if (ret)
		die(EXIT_DATA, "--plot: %s", msg);
}

static void simulate(const struct mt_profile *prof, struct msim_params *p,
		     int scheme, struct point *pt)
{
	int s, ret;

	p->bandwidth_bps = pt->bps;
	for (s = 0; s < MSIM_NSCHEMES; s++) {
		if (scheme >= 0 && s != scheme)
			continue;
		ret = msim_run(prof, p, s, &pt->r[s]);
		if (ret == -E2BIG)
			die(EXIT_USAGE,
			    "%s: %s cuts %s into more than %d chunks; use a larger value",
			    msim_scheme_name(s), s == MSIM_BYTESCHED ?
			    "--partition" : "--chunk", prof->model,
			    MSIM_MAX_CHUNKS);
		if (ret)
			die(EXIT_DATA, "simulating %s failed: %s",
			    msim_scheme_name(s), strerror(-ret));
		pt->have[s] = 1;
	}
}

enum {
	OPT_PROFILE = 256, OPT_WORKERS, OPT_SERVERS, OPT_BANDWIDTH,
	OPT_LATENCY, OPT_SCHEME, OPT_PARTITION, OPT_CREDIT, OPT_OVERHEAD,
	OPT_MTU, OPT_HEADER, OPT_ITER, OPT_SCALE, OPT_SWEEP, OPT_RANGE,
	OPT_PLOT, OPT_SLICE, OPT_CHUNK, OPT_FCOST, OPT_FHDR, OPT_PLAN,
	OPT_PRINT_PRIO,
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "profile", required_argument, NULL, OPT_PROFILE },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "servers", required_argument, NULL, OPT_SERVERS },
		{ "bandwidth", required_argument, NULL, OPT_BANDWIDTH },
		{ "latency", required_argument, NULL, OPT_LATENCY },
		{ "scheme", required_argument, NULL, OPT_SCHEME },
		{ "partition", required_argument, NULL, OPT_PARTITION },
		{ "credit", required_argument, NULL, OPT_CREDIT },
		{ "msg-overhead", required_argument, NULL, OPT_OVERHEAD },
		{ "mtu", required_argument, NULL, OPT_MTU },
		{ "header", required_argument, NULL, OPT_HEADER },
		{ "iterations", required_argument, NULL, OPT_ITER },
		{ "time-scale", required_argument, NULL, OPT_SCALE },
		{ "sweep", no_argument, NULL, OPT_SWEEP },
		{ "sweep-range", required_argument, NULL, OPT_RANGE },
		{ "plot", required_argument, NULL, OPT_PLOT },
		{ "slice", required_argument, NULL, OPT_SLICE },
		{ "chunk", required_argument, NULL, OPT_CHUNK },
		{ "frame-cost", required_argument, NULL, OPT_FCOST },
		{ "frame-header", required_argument, NULL, OPT_FHDR },
		{ "plan", required_argument, NULL, OPT_PLAN },
		{ "print-priorities", no_argument, NULL, OPT_PRINT_PRIO },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *profile = NULL, *plotfile = NULL, *bw_arg = NULL;
	const char *plan = NULL;
	unsigned int plan_max_tag = 0;
	int print_prio = 0;
	double lo = 1e9, hi = 500e9;
	int servers_set = 0, sweep = 0, range_set = 0, scheme = -1;
	struct point pts[MAX_POINTS];
	struct mt_profile prof;
	struct msim_params p;
	char err[512];
	int c, i, n = 0;

	/* Errors must come out as JSON whenever -j is anywhere. */
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-j") || !strcmp(argv[i], "--json"))
			json_mode = 1;

	msim_params_default(&p);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jhV", opts, NULL)) != -1) {
		switch (c) {
		case OPT_PROFILE:
			profile = optarg;
			break;
		case OPT_WORKERS:
			p.workers = parse_int("--workers", optarg, 1, 65536);
			break;
		case OPT_SERVERS:
			p.servers = parse_int("--servers", optarg, 1, 65536);
			servers_set = 1;
			break;
		case OPT_BANDWIDTH:
			bw_arg = optarg;
			if (strcmp(optarg, "balanced") &&
			    mt_parse_rate(optarg, 1, &p.bandwidth_bps, err,
					  sizeof(err)))
				die(EXIT_USAGE, "--bandwidth: %s", err);
			break;
		case OPT_LATENCY:
			if (mt_parse_seconds(optarg, &p.latency_s))
				die(EXIT_USAGE,
				    "--latency: '%s' is not a time (e.g. 10us, 0.5ms, 1e-5)",
				    optarg);
			break;
		case OPT_SCHEME:
			scheme = strcmp(optarg, "all") ?
				 msim_scheme_parse(optarg) : -1;
			if (scheme < 0 && strcmp(optarg, "all"))
				die(EXIT_USAGE,
				    "--scheme: '%s' is not vanilla, fifo-stream, prio, bytesched, mercury, ideal or all",
				    optarg);
			break;
		case OPT_PARTITION:
		case OPT_CREDIT:
			if (mt_parse_bytes(optarg, c == OPT_PARTITION ?
					   &p.partition : &p.credit))
				die(EXIT_USAGE,
				    "%s: '%s' is not a positive byte count (e.g. 4000000, 4mb, 4mib)",
				    c == OPT_PARTITION ? "--partition" :
				    "--credit", optarg);
			break;
		case OPT_OVERHEAD:
			if (mt_parse_seconds(optarg, &p.msg_overhead_s))
				die(EXIT_USAGE,
				    "--msg-overhead: '%s' is not a time (e.g. 50us)",
				    optarg);
			break;
		case OPT_FCOST:
			if (mt_parse_seconds(optarg, &p.frame_cost_s))
				die(EXIT_USAGE,
				    "--frame-cost: '%s' is not a time (e.g. 3us)",
				    optarg);
			break;
		case OPT_FHDR:
			p.frame_hdr = parse_int("--frame-header", optarg, 0,
						65535);
			break;
		case OPT_SLICE:
			if (!strcmp(optarg, "0")) {
				p.slice = 0;
			} else if (mt_parse_bytes(optarg, &p.slice)) {
				die(EXIT_USAGE,
				    "--slice: '%s' is not 0 or a positive byte count",
				    optarg);
			}
			break;
		case OPT_CHUNK:
			if (!strcmp(optarg, "auto"))
				p.chunk = 0;
			else if (mt_parse_bytes(optarg, &p.chunk))
				die(EXIT_USAGE,
				    "--chunk: '%s' is not a positive byte count (e.g. 65536, 64kib, 1448)",
				    optarg);
			break;
		case OPT_MTU:
			p.mtu = parse_int("--mtu", optarg, 68, 65535);
			break;
		case OPT_HEADER:
			p.hdr = parse_int("--header", optarg, 0, 65535);
			break;
		case OPT_ITER:
			p.iterations = parse_int("--iterations", optarg, 2,
						 100000);
			break;
		case OPT_SCALE:
			p.time_scale = parse_real("--time-scale", optarg);
			break;
		case OPT_SWEEP:
			sweep = 1;
			break;
		case OPT_RANGE: {
			char a[64], *colon;

			snprintf(a, sizeof(a), "%s", optarg);
			colon = strchr(a, ':');
			if (colon)
				*colon = '\0';
			if (!colon || mt_parse_rate(a, 1, &lo, err, sizeof(err)) ||
			    mt_parse_rate(colon + 1, 1, &hi, err, sizeof(err)) ||
			    lo > hi)
				die(EXIT_USAGE,
				    "--sweep-range: '%s' is not LO:HI rates with LO <= HI",
				    optarg);
			range_set = 1;
			break;
		}
		case OPT_PLAN:
			plan = optarg;
			break;
		case OPT_PRINT_PRIO:
			print_prio = 1;
			break;
		case OPT_PLOT:
			plotfile = optarg;
			break;
		case 'j':
			break;
		case 'h':
			usage();
			return 0;
		case 'V':
			/* libmercury is linked in statically: its version is ours */
			printf(PROG " %s\n", mercury_version());
			return 0;
		case ':':
			die(EXIT_USAGE, "option '%s' needs a value",
			    argv[optind - 1]);
		default:
			die(EXIT_USAGE, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!profile)
		die(EXIT_USAGE, "--profile is required");
	if (!servers_set)
		p.servers = p.workers;
	if (plotfile && !sweep)
		die(EXIT_USAGE, "--plot needs --sweep");
	if (range_set && !sweep)
		die(EXIT_USAGE, "--sweep-range needs --sweep");
	if (sweep && bw_arg)
		die(EXIT_USAGE, "--bandwidth and --sweep exclude each other");
	if (msim_params_check(&p, err, sizeof(err)))
		die(EXIT_USAGE, "%s", err);

	if (mt_profile_load(profile, &prof, err, sizeof(err)))
		die(EXIT_DATA, "%s", err);
	if (plan && mt_profile_apply_plan(&prof, plan, &plan_max_tag, err,
					  sizeof(err))) {
		mt_profile_free(&prof);
		die(EXIT_DATA, "%s", err);
	}
	if (print_prio) {
		/* tensor, send priority, gate; in gradient-ready order */
		for (i = 0; i < prof.ntensors; i++)
			printf("%s\t%ld\t%d\n", prof.tensors[i].name,
			       prof.tensors[i].prio, prof.tensors[i].gate);
		mt_profile_free(&prof);
		return 0;
	}

	if (sweep) {
		/* 1-2-5 series: about three points per decade. */
		static const double step[] = { 1, 2, 5 };
		double dec = pow(10, floor(log10(lo)) - 1);

		for (; n < MAX_POINTS; dec *= 10) {
			for (i = 0; i < 3 && n < MAX_POINTS; i++) {
				double v = dec * step[i];

				if (v >= lo * (1 - 1e-9) &&
				    v <= hi * (1 + 1e-9))
					pts[n++].bps = v;
			}
			if (dec * 10 > hi)
				break;
		}
		if (!n)
			die(EXIT_USAGE, "--sweep-range holds no 1-2-5 point");
	} else {
		pts[n++].bps = bw_arg && !strcmp(bw_arg, "balanced") ?
			       msim_balanced_bps(&prof, &p) : p.bandwidth_bps;
		p.bandwidth_bps = pts[0].bps;
		if (msim_params_check(&p, err, sizeof(err)))
			die(EXIT_DATA, "%s", err);
	}
	for (i = 0; i < n; i++) {
		memset(pts[i].have, 0, sizeof(pts[i].have));
		simulate(&prof, &p, scheme, &pts[i]);
	}

	/* -j: the results or an error, never both; text: the table stays */
	if (json_mode && plotfile)
		plot(plotfile, &prof, &p, pts, n);
	if (json_mode) {
		json_object *o;

		if (sweep) {
			json_object *arr = json_object_new_array();

			o = json_object_new_object();
			json_object_object_add(o, "model",
					       json_object_new_string(prof.model));
			json_object_object_add(o, "workers",
					       json_object_new_int(p.workers));
			json_object_object_add(o, "servers",
					       json_object_new_int(p.servers));
			json_object_object_add(o, "balanced_bps",
					       json_object_new_double(msim_balanced_bps(&prof, &p)));
			for (i = 0; i < n; i++)
				json_object_array_add(arr, point_json(&prof, &p,
								      &pts[i]));
			json_object_object_add(o, "sweep", arr);
		} else {
			o = point_json(&prof, &p, &pts[0]);
		}
		/* Which priorities were simulated: a plan's tags or the gates. */
		json_object_object_add(o, "plan", plan ?
				       json_object_new_string(plan) : NULL);
		json_object_object_add(o, "plan_max_tag", plan ?
				       json_object_new_int64(plan_max_tag) : NULL);
		printf("%s\n", json_object_to_json_string_ext(o,
				JSON_C_TO_STRING_PRETTY |
				JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		if (plan)
			printf("priorities: plan %s (tags 1..%u)\n", plan,
			       plan_max_tag);
		print_header(&prof, &p);
		for (i = 0; i < n; i++)
			print_point(&pts[i]);
	}
	if (plotfile && !json_mode)
		plot(plotfile, &prof, &p, pts, n);
	mt_profile_free(&prof);
	return 0;
}
