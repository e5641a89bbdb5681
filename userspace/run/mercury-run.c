// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-run: run an unmodified program with its connections tagged.
 *
 * Turns its options into the environment libmercury-preload.so reads
 * (MERCURY_RULES, MERCURY_TAG_SOURCE, MERCURY_SHIFT, MERCURY_MASK,
 * MERCURY_DEBUG), prepends the shim to LD_PRELOAD and execs the command.
 * Rules and the privilege they need are checked here, before the program
 * starts, so mistakes surface as an error instead of silently untagged
 * traffic.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mercury/mercury.h"
#include "rules.h"

#ifndef MERCURY_PRELOAD_DIR
#define MERCURY_PRELOAD_DIR "/usr/local/lib/mercury"
#endif
#define SHIM "libmercury-preload.so"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mercury-run [options] -- CMD [ARGS...]\n"
		"  -r, --rule RULE     add a rule, tried in order (repeatable):\n"
		"                      port=LO[-HI] | addr=A[/LEN] | default, joined by ':',\n"
		"                      with tag=N, e.g. port=5000-5100:tag=3\n"
		"  -t, --tag N         fixed tag for the whole job (rule default:tag=N, last)\n"
		"  -s, --source SRC    mark (SO_MARK, default), priority (SO_PRIORITY) or\n"
		"                      dscp (IP_TOS / IPV6_TCLASS: crosses into other network\n"
		"                      namespaces and needs no privilege)\n"
		"      --shift N       tag bit offset in the value (must match the qdisc)\n"
		"      --mask M        tag mask (must match the qdisc; default 0xffff)\n"
		"  -p, --preload PATH  the shim (default: next to mercury-run, then\n"
		"                      $MERCURY_PRELOAD, then " MERCURY_PRELOAD_DIR ")\n"
		"  -f, --force         run even if this process may not set the tags\n"
		"  -n, --dry-run       print the environment and command, do not run\n"
		"  -v, --verbose       the shim logs each tag it sets (MERCURY_DEBUG=1)\n"
		"  -h, --help\n"
		"Rules already in $MERCURY_RULES come first.\n");
}

static int append(char **s, const char *add)
{
	size_t a = *s ? strlen(*s) : 0, b = strlen(add);
	char *n = realloc(*s, a + b + 2);

	if (!n)
		return -1;
	if (a)
		n[a++] = ',';
	memcpy(n + a, add, b + 1);
	*s = n;
	return 0;
}

static int find_shim(const char *opt, char *out, size_t len)
{
	char exe[PATH_MAX];
	const char *env = getenv("MERCURY_PRELOAD");
	ssize_t n;

	if (opt) {
		snprintf(out, len, "%s", opt);
		return access(out, R_OK);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		snprintf(out, len, "%s/" SHIM, dirname(exe));
		if (!access(out, R_OK))
			return 0;
	}
	if (env && *env) {
		snprintf(out, len, "%s", env);
		if (!access(out, R_OK))
			return 0;
	}
	snprintf(out, len, MERCURY_PRELOAD_DIR "/" SHIM);
	return access(out, R_OK);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rule", required_argument, NULL, 'r' },
		{ "tag", required_argument, NULL, 't' },
		{ "source", required_argument, NULL, 's' },
		{ "shift", required_argument, NULL, 'S' },
		{ "mask", required_argument, NULL, 'M' },
		{ "preload", required_argument, NULL, 'p' },
		{ "force", no_argument, NULL, 'f' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	MERCURY_OPTS(mercury_tag_opts, to);
	const char *preload_opt = NULL, *env;
	char *rules = NULL, *fixed = NULL, *lp;
	char shim[PATH_MAX], err[256], buf[64];
	bool force = false, dry = false, verbose = false;
	struct mercury_tagger *t;
	struct mrun_rule *rv;
	size_t nr;
	int opt, i, ret;

	env = getenv("MERCURY_RULES");
	if (env && *env && append(&rules, env))
		return 1;
	while ((opt = getopt_long(argc, argv, "+r:t:s:p:fnvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (append(&rules, optarg))
				return 1;
			break;
		case 't':
			snprintf(buf, sizeof(buf), "default:tag=%s", optarg);
			free(fixed);
			fixed = strdup(buf);
			break;
		case 's':
			if (strcmp(optarg, "mark") && strcmp(optarg, "priority") &&
			    strcmp(optarg, "dscp")) {
				fprintf(stderr, "mercury-run: --source %s: expected mark, priority or dscp\n",
					optarg);
				return 2;
			}
			setenv("MERCURY_TAG_SOURCE", optarg, 1);
			break;
		case 'S':
			setenv("MERCURY_SHIFT", optarg, 1);
			break;
		case 'M':
			setenv("MERCURY_MASK", optarg, 1);
			break;
		case 'p':
			preload_opt = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'n':
			dry = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "mercury-run: no command (mercury-run [options] -- CMD)\n");
		return 2;
	}
	if (fixed && append(&rules, fixed))
		return 1;
	if (!rules) {
		fprintf(stderr, "mercury-run: no rules: give --rule, --tag or MERCURY_RULES\n");
		return 2;
	}
	if (mrun_rules_parse(rules, &rv, &nr, err, sizeof(err))) {
		fprintf(stderr, "mercury-run: rules: %s\n", err);
		return 2;
	}
	/* The same checks the shim will do, but loudly and before the job. */
	if (mercury_tag_opts_from_env(&to) || mercury_tagger_new(&to, &t)) {
		fprintf(stderr, "mercury-run: %s\n", mercury_last_error());
		return 2;
	}
	for (i = 0; i < (int)nr; i++) {
		uint32_t v;

		if (mercury_tagger_value(t, rv[i].tag, &v)) {
			fprintf(stderr, "mercury-run: rule %d: %s\n", i + 1,
				mercury_last_error());
			return 2;
		}
	}
	ret = mercury_tagger_probe(t, mrun_rules_max_tag(rv, nr));
	if (ret && !force) {
		fprintf(stderr, "mercury-run: %s\n", mercury_last_error());
		return 1;
	}
	mercury_tagger_free(t);
	free(rv);

	if (find_shim(preload_opt, shim, sizeof(shim))) {
		fprintf(stderr, "mercury-run: cannot find %s (tried %s); use --preload\n",
			SHIM, shim);
		return 1;
	}
	setenv("MERCURY_RULES", rules, 1);
	if (verbose)
		setenv("MERCURY_DEBUG", "1", 1);
	env = getenv("LD_PRELOAD");
	if (env && *env) {
		lp = malloc(strlen(shim) + strlen(env) + 2);
		if (!lp)
			return 1;
		sprintf(lp, "%s:%s", shim, env);
	} else {
		lp = strdup(shim);
	}
	setenv("LD_PRELOAD", lp, 1);
	if (dry) {
		static const char *const vars[] = {
			"LD_PRELOAD", "MERCURY_RULES", "MERCURY_TAG_SOURCE",
			"MERCURY_SHIFT", "MERCURY_MASK", "MERCURY_DEBUG",
		};

		for (i = 0; i < (int)(sizeof(vars) / sizeof(vars[0])); i++)
			if (getenv(vars[i]))
				printf("%s=%s\n", vars[i], getenv(vars[i]));
		for (i = optind; i < argc; i++)
			printf("%s%s", argv[i], i + 1 < argc ? " " : "\n");
		return 0;
	}
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "mercury-run: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
