// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercuryctl apply: the boot-time applier (mercury@.service runs it, as
 * scripts/mercury-apply). It makes mercury the root qdisc of the network
 * interfaces a configuration file names, with the options it gives:
 *
 *   # IFACE  OPTIONS (the words "tc qdisc add ... mercury" takes)
 *   eth0     levels 4096 untagged last untagged_share 5
 *
 * Idempotent: the options a line names are compared with what the kernel
 * reports and only those that differ are sent, as a change in place (the
 * handle stays); a root qdisc of another kind is replaced by mercury with
 * every option of the line. Options the line does not name keep the
 * kernel's default when mercury is created and are left alone when it is
 * changed. After a request the options are read back: one the kernel
 * silently ignored is an error. Every action is one line on stdout (the
 * journal, under systemd), every error one line on stderr.
 *
 * The words are read by libmercury's grammar of the options, the one
 * tc's plugin links, and compared in the form it prints: there is no
 * grammar here.
 *
 * Exit status: 0 everything is in place; 1 a device, the module, the
 * configuration or the kernel failed (each named); 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>

#include <linux/pkt_sched.h>

#include <mercury/mercury.h>

#include "../common/tools.h"
#include "mctl.h"

#define APPLY_PROG	"mercuryctl apply"
#define APPLY_CONF	"/etc/mercury/mercury.conf"
#define APPLY_MODULE	"sch_mercury"

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", APPLY_PROG);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	/* under systemd stdout is a pipe: keep the journal in order */
	fflush(stdout);
}

static int __attribute__((format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", APPLY_PROG);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static void apply_usage(FILE *f)
{
	fprintf(f,
		"Usage: mercuryctl apply [-c FILE] [-n] [IFACE...]\n"
		"       mercuryctl apply [-c FILE] [-n] --remove IFACE...\n"
		"Make mercury the root qdisc of each IFACE (default: every interface\n"
		"FILE names) with FILE's options for it; change only what differs.\n"
		"  -c, --config FILE  one interface per line: IFACE OPTIONS (as tc takes\n"
		"                     them); default $MERCURY_CONF or " APPLY_CONF "\n"
		"  -n, --dry-run      say what would change, change nothing\n"
		"      --remove       delete mercury from each IFACE (the kernel's\n"
		"                     default qdisc comes back)\n"
		"  -V, --version      print the version\n"
		"  -h, --help         this text\n"
		"Exit status: 0 ok, 1 failure, 2 usage error\n");
}

/* ---- the configuration file: pure, for the unit tests ----------------- */

/*
 * Split @text in place into lines of words: '#' starts a comment, lines
 * with no word are skipped. *lines (malloc'd, the caller frees it) points
 * into @text. 0, or -E2BIG naming the line in @err.
 */
int mctl_conf_parse(char *text, struct mctl_conf_line **lines, size_t *n,
		    char *err, size_t errlen)
{
	struct mctl_conf_line *l = NULL, *grown, cur;
	char *line, *next, *w, *save;
	unsigned int lineno = 0;
	size_t cap = 0;

	*lines = NULL;
	*n = 0;
	for (line = text; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		w = strchr(line, '#');
		if (w)
			*w = '\0';
		memset(&cur, 0, sizeof(cur));
		for (w = strtok_r(line, " \t\r\v\f", &save); w;
		     w = strtok_r(NULL, " \t\r\v\f", &save)) {
			if (!cur.dev) {
				cur.dev = w;
				continue;
			}
			if (cur.argc == MCTL_CONF_MAX_WORDS) {
				free(l);
				snprintf(err, errlen,
					 "line %u: more than %d option words",
					 lineno, MCTL_CONF_MAX_WORDS);
				return -E2BIG;
			}
			cur.argv[cur.argc++] = w;
		}
		if (!cur.dev)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 8;
			grown = realloc(l, cap * sizeof(*l));
			if (!grown) {
				free(l);
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			l = grown;
		}
		l[(*n)++] = cur;
	}
	*lines = l;
	return 0;
}

/* The words of a line, space-separated, for messages. */
static void sprint_words(char *buf, size_t len, int argc, char *const *argv)
{
	size_t used = 0;
	int i, k;

	buf[0] = '\0';
	for (i = 0; i < argc && used < len; i++) {
		k = snprintf(buf + used, len - used, "%s%s", i ? " " : "",
			     argv[i]);
		if (k < 0)
			break;
		used += k;
	}
}

/*
 * The options of @want that @have (what the kernel reports) does not
 * hold, as "levels 4096 -> 64; flow_order on -> off" in @buf: compared
 * in the form libmercury prints, so 1M and 1048576 are one value.
 * Returns the MCTL_BIT()s that differ.
 */
uint32_t mctl_apply_diff(const struct mercury_qdisc_opts *want,
			 const struct mercury_qdisc_opts *have, char *buf,
			 size_t len)
{
	char w[64], h[64];
	uint32_t diff = 0;
	size_t used = 0;
	unsigned int a;
	int k;

	if (len)
		buf[0] = '\0';
	for (a = 1; a <= TCA_MERCURY_MAX; a++) {
		if (!(want->set & MCTL_BIT(a)))
			continue;
		mercury_qdisc_opt_format(want, a, w, sizeof(w));
		if (have->set & MCTL_BIT(a)) {
			mercury_qdisc_opt_format(have, a, h, sizeof(h));
			if (!strcmp(w, h))
				continue;
		} else {
			/* an older module that does not report it */
			snprintf(h, sizeof(h), "%.*s unset",
				 (int)strcspn(w, " "), w);
		}
		diff |= MCTL_BIT(a);
		if (used < len) {
			k = snprintf(buf + used, len - used, "%s%s -> %s",
				     used ? "; " : "", h, strchr(w, ' ') + 1);
			if (k > 0)
				used += k;
		}
	}
	return diff;
}

/* ---- the system ------------------------------------------------------- */

/*
 * Is the module loaded, or one that modprobe (and so the kernel's request
 * for "mercury") finds: depmod's table for the running kernel, or built in?
 */
static bool module_present(const char *release)
{
	static const char *const tables[] = { "modules.dep", "modules.builtin" };
	char path[512], line[1024], *colon, *base;
	bool hit = false;
	size_t i;
	FILE *f;

	if (!access("/sys/module/" APPLY_MODULE, F_OK))
		return true;
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]) && !hit; i++) {
		snprintf(path, sizeof(path), "/lib/modules/%s/%s", release,
			 tables[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (!hit && fgets(line, sizeof(line), f)) {
			colon = strpbrk(line, ":\n");
			if (colon)
				*colon = '\0';
			base = strrchr(line, '/');
			base = base ? base + 1 : line;
			/* sch_mercury.ko, or compressed: .ko.xz, .ko.zst */
			hit = !strncmp(base, APPLY_MODULE ".ko",
				       sizeof(APPLY_MODULE ".ko") - 1);
		}
		fclose(f);
	}
	return hit;
}

struct apply {
	struct mctl_nl	*nl;
	const char	*conf;
	bool		dry;
	const char	*release;	/* uname -r */
};

/* The words of @o's options, as a line would give them. */
/* Parse a line's words one pair at a time, to name the bad pair. */
static int apply_parse(const struct apply *ap,
		       const struct mctl_conf_line *l,
		       struct mercury_qdisc_opts *want)
{
	struct mercury_qdisc_opts one;
	char words[512], msg[256];
	int i;

	if (l->argc % 2) {
		sprint_words(words, sizeof(words), l->argc, l->argv);
		return fail("%s: options must be KEY VALUE pairs in %s: '%s'",
			    l->dev, ap->conf, words);
	}
	memset(want, 0, sizeof(*want));
	for (i = 0; i < l->argc; i += 2) {
		if (mctl_parse_opts(2, (char **)l->argv + i, &one, msg,
				    sizeof(msg)))
			return fail("%s: bad option '%s %s' in %s: %s", l->dev,
				    l->argv[i], l->argv[i + 1], ap->conf, msg);
		mctl_opts_merge(want, &one);
	}
	return 0;
}

static int apply_one(const struct apply *ap, const struct mctl_conf_line *l)
{
	struct mercury_qdisc_opts want, have, send, full;
	char kind[IFNAMSIZ], words[512], opts[512], diff[512], msg[256];
	int ifindex, err;
	uint32_t delta;

	if (apply_parse(ap, l, &want))
		return 1;
	sprint_words(words, sizeof(words), l->argc, l->argv);
	ifindex = mctl_nl_ifindex(ap->nl, l->dev);
	if (ifindex < 0)
		return fail("%s: no such network device", l->dev);
	if (!module_present(ap->release))
		return fail("%s: kernel module " APPLY_MODULE " is not installed for kernel %s (install the mercury-dkms package or run 'make install', then depmod)",
			    l->dev, ap->release);
	err = mctl_nl_root(ap->nl, ifindex, kind, sizeof(kind), &have);
	if (err)
		return fail("%s: cannot read its root qdisc: %s", l->dev,
			    strerror(-err));

	/* the kernel checks options together, on the qdisc as it would be */
	if (strcmp(kind, "mercury"))
		mctl_opts_defaults(&full);
	else
		full = have;
	mctl_opts_merge(&full, &want);
	if (mctl_check_opts(&full, msg, sizeof(msg)))
		return fail("%s: %s (options '%s' in %s)", l->dev, msg, words,
			    ap->conf);

	send = want;
	if (!strcmp(kind, "mercury")) {
		delta = mctl_apply_diff(&want, &have, diff, sizeof(diff));
		if (!delta) {
			say("%s: mercury already in place%s%s%s, nothing to do",
			    l->dev, *words ? " (" : "", words,
			    *words ? ")" : "");
			return 0;
		}
		say("%s: changing mercury options: %s", l->dev, diff);
		/* only what differs: the rest is already so */
		send.set = delta;
	} else {
		say("%s: replacing root qdisc %s with mercury%s%s", l->dev,
		    *kind ? kind : "none", *words ? " " : "", words);
	}
	mctl_sprint_opts(opts, sizeof(opts), &send, send.set);
	if (ap->dry) {
		say("%s: dry run: mercuryctl replace %s root%s%s", l->dev,
		    l->dev, *opts ? " " : "", opts);
		return 0;
	}
	err = mctl_nl_modify(ap->nl, MCTL_OP_REPLACE, ifindex, TC_H_ROOT, 0,
			     &send);
	if (err)
		return fail("%s: 'mercuryctl replace %s root%s%s' failed: %s%s%s",
			    l->dev, l->dev, *opts ? " " : "", opts,
			    *mctl_nl_extack(ap->nl) ? mctl_nl_extack(ap->nl) : "",
			    *mctl_nl_extack(ap->nl) ? ": " : "", strerror(-err));

	/* read back what the kernel holds: an option it ignored is an error */
	err = mctl_nl_root(ap->nl, ifindex, kind, sizeof(kind), &have);
	if (err)
		return fail("%s: cannot read its root qdisc back: %s", l->dev,
			    strerror(-err));
	if (strcmp(kind, "mercury"))
		return fail("%s: after the request the root qdisc is %s, not mercury",
			    l->dev, *kind ? kind : "none");
	if (mctl_apply_diff(&want, &have, diff, sizeof(diff)))
		return fail("%s: after the request the kernel holds %s", l->dev,
			    diff);
	say("%s: mercury applied", l->dev);
	return 0;
}

static int remove_one(const struct apply *ap, const char *dev)
{
	struct mercury_qdisc_opts have;
	char kind[IFNAMSIZ];
	int ifindex, err;

	ifindex = mctl_nl_ifindex(ap->nl, dev);
	if (ifindex < 0) {
		say("%s: device gone, nothing to remove", dev);
		return 0;
	}
	err = mctl_nl_root(ap->nl, ifindex, kind, sizeof(kind), &have);
	if (err)
		return fail("%s: cannot read its root qdisc: %s", dev,
			    strerror(-err));
	if (strcmp(kind, "mercury")) {
		say("%s: root qdisc is %s, not mercury, left alone", dev,
		    *kind ? kind : "none");
		return 0;
	}
	if (ap->dry) {
		say("%s: dry run: mercuryctl delete %s root", dev, dev);
		return 0;
	}
	err = mctl_nl_delete(ap->nl, ifindex, TC_H_ROOT, 0);
	if (err)
		return fail("%s: cannot delete the root qdisc: %s%s%s", dev,
			    mctl_nl_extack(ap->nl),
			    *mctl_nl_extack(ap->nl) ? ": " : "",
			    strerror(-err));
	say("%s: mercury removed, kernel default qdisc restored", dev);
	return 0;
}

/* The first line for @dev, as the file is read top to bottom. */
static const struct mctl_conf_line *conf_find(const struct mctl_conf_line *l,
					      size_t n, const char *dev)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(l[i].dev, dev))
			return &l[i];
	return NULL;
}

static int apply_open(struct apply *ap, const char *netns)
{
	if (!mctl_nl_open(&ap->nl, netns))
		return 0;
	if (netns)
		return fail("cannot enter network namespace %s", netns);
	return fail("cannot talk to the kernel");
}

static int apply_conf(struct apply *ap, int ndev, char **devs,
		      const char *netns)
{
	struct mctl_conf_line *lines = NULL;
	const struct mctl_conf_line *l;
	char err[MT_ERRLEN], *text = NULL;
	size_t n, len, i;
	int rc = 0, k;

	if (mt_read_file(ap->conf, &text, &len, err, sizeof(err)))
		return fail("cannot read %s", err);
	if (mctl_conf_parse(text, &lines, &n, err, sizeof(err))) {
		rc = fail("%s: %s", ap->conf, err);
		goto out;
	}
	if (n && apply_open(ap, netns)) {
		rc = 1;
		goto out;
	}
	if (!ndev) {
		if (!n)
			say("no interface configured in %s, nothing to do",
			    ap->conf);
		for (i = 0; i < n; i++)
			/* a device listed twice is its first line's */
			if (conf_find(lines, n, lines[i].dev) == &lines[i])
				rc |= apply_one(ap, &lines[i]);
		goto out;
	}
	for (k = 0; k < ndev; k++) {
		l = conf_find(lines, n, devs[k]);
		if (!l)
			rc |= fail("%s: not configured in %s", devs[k],
				   ap->conf);
		else
			rc |= apply_one(ap, l);
	}
out:
	free(lines);
	free(text);
	return rc;
}

int mctl_apply(int argc, char **argv, const char *netns)
{
	static const struct option longopts[] = {
		{ "config",	required_argument,	NULL, 'c' },
		{ "dry-run",	no_argument,		NULL, 'n' },
		{ "remove",	no_argument,		NULL, 'r' },
		{ "version",	no_argument,		NULL, 'V' },
		{ "help",	no_argument,		NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct apply ap = { .conf = getenv("MERCURY_CONF") };
	bool remove = false;
	struct utsname u;
	int c, rc = 0, i;

	if (!ap.conf || !*ap.conf)
		ap.conf = APPLY_CONF;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+c:nVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			ap.conf = optarg;
			break;
		case 'n':
			ap.dry = true;
			break;
		case 'r':
			remove = true;
			break;
		case 'V':
			printf("mercuryctl %s\n", mercury_version());
			return 0;
		case 'h':
			apply_usage(stdout);
			return 0;
		default:
			if (optopt == 'c' || !strcmp(argv[optind - 1], "--config"))
				fail("%s needs a file", argv[optind - 1]);
			else
				fail("unknown option '%s'", argv[optind - 1]);
			apply_usage(stderr);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (remove && !argc) {
		fail("--remove: which interfaces?");
		apply_usage(stderr);
		return 2;
	}
	ap.release = uname(&u) ? "(unknown)" : u.release;
	if (!remove) {
		rc = apply_conf(&ap, argc, argv, netns);
	} else if (!apply_open(&ap, netns)) {
		for (i = 0; i < argc; i++)
			rc |= remove_one(&ap, argv[i]);
	} else {
		rc = 1;
	}
	mctl_nl_close(ap.nl);
	return rc;
}
