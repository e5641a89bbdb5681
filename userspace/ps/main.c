// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-ps: one binary, three commands.
 *   mercury-ps server  --server-id I --servers H:P,... --workers W ...
 *   mercury-ps worker  --worker-id I --servers H:P,... --workers W ...
 *   mercury-ps profile --profile P --bytes-scale F --out FILE
 * Both roles must be given the same profile, scheme and sizes; the hello
 * of every connection carries a hash of them and a mismatch is an error.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.h"

void ps_usage(FILE *f)
{
	fprintf(f,
"usage: " PS_PROG " server --server-id I --servers H:P[,H:P...] --workers W --profile P [options]\n"
"       " PS_PROG " worker --worker-id I --servers H:P[,H:P...] --workers W --profile P [options]\n"
"       " PS_PROG " profile --profile P --bytes-scale F --out FILE\n"
"       " PS_PROG " help | -h | --help | -V | --version\n"
"  server   serve its share of every tensor to the workers: sum their pushes\n"
"           and answer their pulls, for --iterations\n"
"  worker   train: push each gradient to the servers, pull the sums and check\n"
"           them against the exact values; prints the iteration times\n"
"  profile  write the --profile with every tensor's size scaled by\n"
"           --bytes-scale to --out FILE (the profile a scaled run simulates)\n"
"options (the same on every worker and server):\n"
"  --scheme vanilla|fifo-stream|prio|bytesched|mercury   how tensors share the\n"
"                        links (mercury; fifo = fifo-stream)\n"
"  --iterations N        training iterations, 2..10000 (5)\n"
"  --time-scale X        compute times x X (1)\n"
"  --bytes-scale F       tensor sizes x F, 0 < F <= 1 (1)\n"
"  --chunk BYTES         streaming-aggregation unit, multiple of 4 (65536)\n"
"  --partition BYTES     bytesched partition (4000000)\n"
"  --credit BYTES        bytesched bytes in flight (16000000)\n"
"                        (chunk, partition and credit are full-size bytes:\n"
"                        --bytes-scale scales them with the tensors)\n"
"  --channels N          mercury: connections per peer, 1..%d (8)\n"
"  --levels N            mercury: distinct tags on the wire, 1..%d (--channels)\n"
"  --plan FILE           send order (and mercury's tags) from this plan, the\n"
"                        one the tagger deploys (default: forward order)\n"
"  --print-priorities    print tensor, priority, rank, tag, prio band; exit\n"
"  --tag-source mark|priority   mercury: SO_MARK or SO_PRIORITY (mark)\n"
"  --inflight BYTES      mercury: bytes queued in the kernel per connection (2 chunks)\n"
"  --sndbuf BYTES        SO_SNDBUF and SO_RCVBUF of every connection\n"
"  --timeout SECONDS     longest wait without progress (30)\n"
"  --listen ADDR         server: address to bind (the host of its --servers entry)\n"
"  --out FILE            profile: the file to write\n"
"  -j, --json            JSON report; errors as {\"error\": \"...\"}\n"
"  -h, --help            this text\n"
"  -V, --version         print the version\n"
"Exit status: 0 ok, 1 failure, 2 usage error\n", PS_MAX_CHANNELS, MERCURY_MAX_TAG);
}

enum {
	OPT_PROFILE = 256, OPT_SERVERS, OPT_WORKERS, OPT_WORKER_ID,
	OPT_SERVER_ID, OPT_ITER, OPT_TSCALE, OPT_BSCALE, OPT_SCHEME,
	OPT_CHUNK, OPT_PART, OPT_CREDIT, OPT_CHANNELS, OPT_TAGSRC,
	OPT_TIMEOUT, OPT_SNDBUF, OPT_INFLIGHT, OPT_LISTEN, OPT_OUT, OPT_LEVELS,
	OPT_PLAN, OPT_PRINT_PRIO,
};

static const struct option opts[] = {
	{ "profile", required_argument, NULL, OPT_PROFILE },
	{ "servers", required_argument, NULL, OPT_SERVERS },
	{ "workers", required_argument, NULL, OPT_WORKERS },
	{ "worker-id", required_argument, NULL, OPT_WORKER_ID },
	{ "server-id", required_argument, NULL, OPT_SERVER_ID },
	{ "iterations", required_argument, NULL, OPT_ITER },
	{ "time-scale", required_argument, NULL, OPT_TSCALE },
	{ "bytes-scale", required_argument, NULL, OPT_BSCALE },
	{ "scheme", required_argument, NULL, OPT_SCHEME },
	{ "chunk", required_argument, NULL, OPT_CHUNK },
	{ "partition", required_argument, NULL, OPT_PART },
	{ "credit", required_argument, NULL, OPT_CREDIT },
	{ "channels", required_argument, NULL, OPT_CHANNELS },
	{ "levels", required_argument, NULL, OPT_LEVELS },
	{ "tag-source", required_argument, NULL, OPT_TAGSRC },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "sndbuf", required_argument, NULL, OPT_SNDBUF },
	{ "inflight", required_argument, NULL, OPT_INFLIGHT },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "out", required_argument, NULL, OPT_OUT },
	{ "plan", required_argument, NULL, OPT_PLAN },
	{ "print-priorities", no_argument, NULL, OPT_PRINT_PRIO },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ 0 }
};

static int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}

/* libmercury is linked in statically: its version is ours */
static void ps_version(void)
{
	printf(PS_PROG " %s\n", mercury_version());
}

#define BAD(...) do { ps_error(cfg, __VA_ARGS__); return -EINVAL; } while (0)

int ps_parse_args(int argc, char **argv, struct ps_cfg *cfg)
{
	bool have_inflight = false;
	double sec;
	int c;

	*cfg = (struct ps_cfg){
		.scheme = PS_MERCURY,
		.channels = 8,
		.chunk = 65536,
		.partition = 4000000,
		.credit = 16000000,
		.bytes_scale = 1,
		.time_scale = 1,
		.iterations = 5,
		.worker_id = -1,
		.server_id = -1,
		.tag_source = MERCURY_TAG_MARK,
		.timeout_ms = 30000,
	};
	optind = 1;
	opterr = 0;
	/* -j first, so every error below comes out as JSON when asked */
	for (c = 1; c < argc; c++)
		if (!strcmp(argv[c], "-j") || !strcmp(argv[c], "--json"))
			cfg->json = true;
	while ((c = getopt_long(argc, argv, "jhV", opts, NULL)) != -1) {
		const char *a = optarg;
		uint64_t b;

		switch (c) {
		case OPT_PROFILE: cfg->profile = a; break;
		case OPT_SERVERS: cfg->server_list = a; break;
		case OPT_WORKERS:
			if (parse_int(a, 1, PS_MAX_PEERS, &cfg->workers))
				BAD("--workers %s: expected 1..%d", a, PS_MAX_PEERS);
			break;
		case OPT_WORKER_ID:
			if (parse_int(a, 0, PS_MAX_PEERS - 1, &cfg->worker_id))
				BAD("--worker-id %s: expected 0..%d", a, PS_MAX_PEERS - 1);
			break;
		case OPT_SERVER_ID:
			if (parse_int(a, 0, PS_MAX_PEERS - 1, &cfg->server_id))
				BAD("--server-id %s: expected 0..%d", a, PS_MAX_PEERS - 1);
			break;
		case OPT_ITER:
			if (parse_int(a, 2, 10000, &cfg->iterations))
				BAD("--iterations %s: expected 2..10000", a);
			break;
		case OPT_TSCALE:
			if (parse_double(a, &cfg->time_scale) || cfg->time_scale < 0 ||
			    cfg->time_scale > 1e6)
				BAD("--time-scale %s: expected a number 0..1e6", a);
			break;
		case OPT_BSCALE:
			if (parse_double(a, &cfg->bytes_scale) || cfg->bytes_scale <= 0 ||
			    cfg->bytes_scale > 1)
				BAD("--bytes-scale %s: expected 0 < F <= 1", a);
			break;
		case OPT_SCHEME:
			for (b = 0; b < PS_NSCHEMES; b++)
				if (!strcmp(a, ps_scheme_name(b)))
					break;
			/* the name streaming FIFO had before vanilla existed */
			if (b == PS_NSCHEMES && !strcmp(a, "fifo"))
				b = PS_FIFO;
			if (b == PS_NSCHEMES)
				BAD("--scheme %s: expected vanilla, fifo-stream, prio, bytesched or mercury", a);
			cfg->scheme = b;
			break;
		case OPT_CHUNK:
			if (mt_parse_bytes(a, &b) || b < 4 || b % 4 || b > (1u << 30))
				BAD("--chunk %s: expected a multiple of 4 from 4 to 1 GiB", a);
			cfg->chunk = b;
			break;
		case OPT_PART:
			if (mt_parse_bytes(a, &b) || b < 4 || b > (1u << 30))
				BAD("--partition %s: expected 4 bytes to 1 GiB", a);
			cfg->partition = b;
			break;
		case OPT_CREDIT:
			if (mt_parse_bytes(a, &b) || b < 1 || b > (1ull << 40))
				BAD("--credit %s: expected 1 byte to 1 TiB", a);
			cfg->credit = b;
			break;
		case OPT_CHANNELS:
			if (parse_int(a, 1, PS_MAX_CHANNELS, &cfg->channels))
				BAD("--channels %s: expected 1..%d", a, PS_MAX_CHANNELS);
			break;
		case OPT_LEVELS:
			if (parse_int(a, 1, MERCURY_MAX_TAG, &cfg->levels))
				BAD("--levels %s: expected 1..%d", a, MERCURY_MAX_TAG);
			break;
		case OPT_TAGSRC:
			if (!strcmp(a, "mark"))
				cfg->tag_source = MERCURY_TAG_MARK;
			else if (!strcmp(a, "priority"))
				cfg->tag_source = MERCURY_TAG_PRIORITY;
			else
				BAD("--tag-source %s: expected mark or priority", a);
			break;
		case OPT_TIMEOUT:
			if (mt_parse_seconds(a, &sec) || sec < 0.05 || sec > 86400)
				BAD("--timeout %s: expected 0.05 s to 1 day", a);
			cfg->timeout_ms = (int)(sec * 1000);
			break;
		case OPT_SNDBUF:
			if (mt_parse_bytes(a, &b) || b < 1 || b > (1u << 30))
				BAD("--sndbuf %s: expected 1 byte to 1 GiB", a);
			cfg->sndbuf = b;
			break;
		case OPT_INFLIGHT:
			if (mt_parse_bytes(a, &b) || b < 1 || b > (1u << 30))
				BAD("--inflight %s: expected 1 byte to 1 GiB", a);
			cfg->inflight = b;
			have_inflight = true;
			break;
		case OPT_LISTEN: cfg->listen = a; break;
		case OPT_OUT: cfg->emit = a; break;
		case OPT_PLAN: cfg->plan = a; break;
		case OPT_PRINT_PRIO: cfg->print_priorities = true; break;
		case 'j': break;
		case 'h':
			ps_usage(stdout);
			exit(0);
		case 'V':
			ps_version();
			exit(0);
		case ':':
			BAD("%s needs a value", argv[optind - 1]);
		default:
			BAD("unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		BAD("unexpected argument %s", argv[optind]);
	if (!have_inflight)
		cfg->inflight = 2 * ps_scaled_bytes(cfg->chunk, cfg->bytes_scale);
	/* one level per connection: see the layout and Documentation/tagger.md */
	if (!cfg->levels)
		cfg->levels = cfg->channels;
	if (!cfg->profile)
		BAD("--profile is required");
	return 0;
}

/* Split --servers into S entries and check the role's ids. */
static int check_roles(struct ps_cfg *cfg, bool server)
{
	const char *p;
	int n = 1;

	if (!cfg->server_list || !*cfg->server_list)
		BAD("--servers host:port[,host:port...] is required");
	for (p = cfg->server_list; *p; p++)
		n += *p == ',';
	if (n > PS_MAX_PEERS)
		BAD("--servers: at most %d servers", PS_MAX_PEERS);
	cfg->servers = n;
	if (!cfg->workers)
		BAD("--workers is required");
	if (server && cfg->server_id < 0)
		BAD("server: --server-id is required");
	if (server && cfg->server_id >= n)
		BAD("--server-id %d: only %d servers in --servers", cfg->server_id, n);
	if (!server && cfg->worker_id < 0)
		BAD("worker: --worker-id is required");
	if (!server && cfg->worker_id >= cfg->workers)
		BAD("--worker-id %d: only %d workers", cfg->worker_id, cfg->workers);
	/* the checked parameters are integers below 2^24: exact in fp32 */
	if ((double)cfg->iterations * cfg->workers * (cfg->workers + 13) >= (1 << 24))
		BAD("--iterations x --workers too large for exact fp32 checks");
	return 0;
}

int main(int argc, char **argv)
{
	struct ps_cfg cfg;
	const char *cmd;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		ps_usage(stderr);
		return 2;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		ps_usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
		ps_version();
		return 0;
	}
	if (strcmp(cmd, "server") && strcmp(cmd, "worker") && strcmp(cmd, "profile")) {
		ps_error(NULL, "unknown command '%s' (server, worker or profile)", cmd);
		return 2;
	}
	if (ps_parse_args(argc - 1, argv + 1, &cfg))
		return 2;
	if (!strcmp(cmd, "profile")) {
		char err[512];

		if (!cfg.emit) {
			ps_error(&cfg, "profile: --out FILE is required");
			return 2;
		}
		if (ps_emit_profile(&cfg, err, sizeof(err))) {
			ps_error(&cfg, "%s", err);
			return 1;
		}
		return 0;
	}
	if (cfg.print_priorities) {
		char err[512];

		/* The order does not depend on the peers: one server will do. */
		if (!cfg.servers)
			cfg.servers = 1;
		if (ps_print_priorities(&cfg, err, sizeof(err))) {
			ps_error(&cfg, "%s", err);
			return 1;
		}
		return 0;
	}
	if (check_roles(&cfg, cmd[0] == 's'))
		return 2;
	return cmd[0] == 's' ? ps_server_main(&cfg) : ps_worker_main(&cfg);
}
