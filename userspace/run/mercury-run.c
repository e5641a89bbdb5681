// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-run: run an unmodified program with its connections tagged.
 *
 * Turns its options into the environment libmercury-preload.so reads
 * (MERCURY_RULES, MERCURY_TAG_SOURCE, MERCURY_SHIFT, MERCURY_MASK,
 * MERCURY_DEBUG), prepends the shim to LD_PRELOAD (behind an ASan runtime
 * preloaded first, which must stay first) and execs the command.
 * Rules and the privilege they need are checked here, before the program
 * starts, so mistakes surface as an error instead of silently untagged
 * traffic.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
		"  -h, --help          this text\n"
		"  -V, --version       print the version\n"
		"Rules already in $MERCURY_RULES come first.\n"
		"Exit status: the command's own, once it runs; before that 0 ok (--dry-run,\n"
		"--help), 1 failure, 2 usage error; 126 the command cannot run, 127 not found\n");
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

/*
 * Can ld.so preload PATH? It silently skips an entry it cannot load (a
 * directory, a text file) and runs the program untagged, so anything but
 * a readable ELF file is refused here. A ':' or blank would split the
 * entry in LD_PRELOAD. 0 if usable, else a reason.
 */
static const char *shim_unusable(const char *path)
{
	unsigned char magic[4];
	struct stat st;
	ssize_t n;
	int fd;

	if (path[strcspn(path, ": \t")])
		return "contains ':' or a blank, which LD_PRELOAD cannot hold";
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strerror(errno);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return "not a regular file";
	}
	n = read(fd, magic, sizeof(magic));
	close(fd);
	if (n != sizeof(magic) || memcmp(magic, "\x7f" "ELF", 4))
		return "not an ELF shared object";
	return NULL;
}

/* The shim's path in OUT; NULL, or why the last candidate is unusable. */
static const char *find_shim(const char *opt, char *out, size_t len)
{
	char exe[PATH_MAX];
	const char *env = getenv("MERCURY_PRELOAD");
	ssize_t n;

	if (opt) {
		snprintf(out, len, "%s", opt);
		return shim_unusable(out);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		snprintf(out, len, "%s/" SHIM, dirname(exe));
		if (!shim_unusable(out))
			return NULL;
	}
	if (env && *env) {
		snprintf(out, len, "%s", env);
		if (!shim_unusable(out))
			return NULL;
	}
	snprintf(out, len, MERCURY_PRELOAD_DIR "/" SHIM);
	return shim_unusable(out);
}

/* Is the LD_PRELOAD entry path[0..len) an AddressSanitizer runtime? */
static bool asan_runtime(const char *path, size_t len)
{
	const char *slash = memrchr(path, '/', len);
	size_t skip = slash ? (size_t)(slash + 1 - path) : 0;

	path += skip;
	len -= skip;
	return (len > 8 && !strncmp(path, "libasan.", 8)) ||
	       (len > 16 && !strncmp(path, "libclang_rt.asan", 16));
}

/*
 * The program's LD_PRELOAD: the shim in front of what was there, so its
 * wrappers see each call first. The one exception is an ASan runtime at
 * the head of the list, which must stay there: ASan refuses to start
 * unless it is the first library after the program (its malloc has to
 * interpose before any other), so without it no sanitized program, nor a
 * sanitized shim, could run under mercury-run. Entries are separated by
 * ':' or blanks, as ld.so reads them. NULL if out of memory.
 */
static char *preload_list(const char *shim, const char *old)
{
	size_t skip, head;
	char *lp;

	if (!old || !*old)
		return strdup(shim);
	skip = strspn(old, ": ");
	head = skip + strcspn(old + skip, ": ");
	if (!asan_runtime(old + skip, head - skip))
		head = 0;
	lp = malloc(strlen(shim) + strlen(old) + 2);
	if (!lp)
		return NULL;
	if (head)
		sprintf(lp, "%.*s:%s%s", (int)head, old, shim, old + head);
	else
		sprintf(lp, "%s:%s", shim, old);
	return lp;
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
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	MERCURY_OPTS(mercury_tag_opts, to);
	const char *preload_opt = NULL, *env, *why;
	char *rules = NULL, *fixed = NULL, *lp;
	char shim[PATH_MAX], err[256], buf[64];
	bool force = false, dry = false, verbose = false;
	struct mercury_tagger *t = NULL;
	struct mrun_rule *rv = NULL;
	size_t nr;
	int opt, i, ret = 1;

	env = getenv("MERCURY_RULES");
	if (env && *env && append(&rules, env))
		return 1;
	while ((opt = getopt_long(argc, argv, "+r:t:s:p:fnvhV", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (append(&rules, optarg))
				goto out;
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
				ret = 2;
				goto out;
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
			ret = 0;
			goto out;
		case 'V':
			/* libmercury is linked in statically: its version is ours */
			printf("mercury-run %s\n", mercury_version());
			ret = 0;
			goto out;
		default:
			usage(stderr);
			ret = 2;
			goto out;
		}
	}
	ret = 2;
	if (optind >= argc) {
		fprintf(stderr, "mercury-run: no command (mercury-run [options] -- CMD)\n");
		goto out;
	}
	if (fixed && append(&rules, fixed)) {
		ret = 1;
		goto out;
	}
	if (!rules) {
		fprintf(stderr, "mercury-run: no rules: give --rule, --tag or MERCURY_RULES\n");
		goto out;
	}
	if (mrun_rules_parse(rules, &rv, &nr, err, sizeof(err))) {
		fprintf(stderr, "mercury-run: rules: %s\n", err);
		goto out;
	}
	/* The same checks the shim will do, but loudly and before the job. */
	if (mercury_tag_opts_from_env(&to) || mercury_tagger_new(&to, &t)) {
		fprintf(stderr, "mercury-run: %s\n", mercury_last_error());
		goto out;
	}
	for (i = 0; i < (int)nr; i++) {
		uint32_t v;

		if (mercury_tagger_value(t, rv[i].tag, &v)) {
			fprintf(stderr, "mercury-run: rule %d: %s\n", i + 1,
				mercury_last_error());
			goto out;
		}
	}
	ret = 1;
	if (mercury_tagger_probe(t, mrun_rules_max_tag(rv, nr)) && !force) {
		fprintf(stderr, "mercury-run: %s\n", mercury_last_error());
		goto out;
	}
	why = find_shim(preload_opt, shim, sizeof(shim));
	if (why && preload_opt) {
		fprintf(stderr, "mercury-run: --preload %s: %s\n", shim, why);
		goto out;
	}
	if (why) {
		fprintf(stderr, "mercury-run: cannot use %s (tried %s: %s); use --preload\n",
			SHIM, shim, why);
		goto out;
	}
	setenv("MERCURY_RULES", rules, 1);
	if (verbose)
		setenv("MERCURY_DEBUG", "1", 1);
	lp = preload_list(shim, getenv("LD_PRELOAD"));
	if (!lp)
		goto out;
	setenv("LD_PRELOAD", lp, 1);
	free(lp);
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
		ret = 0;
		goto out;
	}
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "mercury-run: %s: %s\n", argv[optind], strerror(errno));
	ret = errno == ENOENT ? 127 : 126;
	/*
	 * Everything freed on the way out, though the process ends here: a
	 * sanitized mercury-run (the faults suite) fails on any leak.
	 */
out:
	mercury_tagger_free(t);
	free(rv);
	free(fixed);
	free(rules);
	return ret;
}
