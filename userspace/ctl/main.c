// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercuryctl: set up, change, delete and watch Mercury qdiscs without tc.
 *
 *   mercuryctl [-j] [--pretty] [-n NETNS] add DEV [root|parent X:Y] [handle H:] [OPTIONS]
 *   mercuryctl [-j|-p] show [DEV]
 *   mercuryctl stats [--prometheus] [DEV]
 *   mercuryctl apply [-c FILE] [-n] [IFACE...] | --remove IFACE...
 *
 * Commands are found by unique prefix, as in bpftool. Exit codes: 0 done,
 * 1 the system said no (no device, no module, no permission, rejected),
 * 2 the command line is wrong. With -j every error is {"error": "..."}.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <linux/pkt_sched.h>
#include <netlink/route/tc.h>

#include <mercury/mercury.h>

#include "mctl.h"


enum mctl_out { MCTL_OUT_TEXT, MCTL_OUT_JSON, MCTL_OUT_PROM };

static const char *prog = "mercuryctl";
static enum mctl_out out_mode = MCTL_OUT_TEXT;
static bool pretty;
static const char *netns;

/* All errors go through here: text on stderr, or one JSON object. */
static int __attribute__((format(printf, 2, 3)))
mctl_fail(int code, const char *fmt, ...)
{
	struct json_object *o;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (out_mode == MCTL_OUT_JSON) {
		o = json_object_new_object();
		json_object_object_add(o, "error", json_object_new_string(msg));
		printf("%s\n", json_object_to_json_string_ext(o,
			JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		fprintf(stderr, "%s: %s\n", prog, msg);
	}
	return code;
}

static void mctl_usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [-j] [--pretty] [-p] [-n NETNS] COMMAND ...\n"
		"  add     DEV [root | parent X:Y] [handle H:] [OPTIONS]\n"
		"  change  DEV [root | parent X:Y] [handle H:] [OPTIONS]\n"
		"  replace DEV [root | parent X:Y] [handle H:] [OPTIONS]\n"
		"  delete  DEV [root | parent X:Y] [handle H:]\n"
		"  show    [DEV]\n"
		"  stats   [--prometheus] [DEV]\n"
		"  check   DEV [parent X:Y | handle H:] plan FILE\n"
		"  apply   [-c|--config FILE] [-n|--dry-run] [IFACE...]\n"
		"  apply   [-c|--config FILE] [-n|--dry-run] --remove IFACE...\n"
		"  help\n"
		"OPTIONS: [levels N] [tag mark|priority|dscp] [shift BITS] [mask MASK]\n"
		"         [untagged first|last] [untagged_share PERCENT]\n"
		"         [flow_order on|off] [flows N] [limit PACKETS]\n"
		"         [memory_limit BYTES] [quantum BYTES] [bypass on|off]\n"
		"         [flow_limit PACKETS]\n"
		"  -j, --json        JSON output; errors as {\"error\": \"...\"}\n"
		"      --pretty      indented JSON\n"
		"  -p, --prometheus  Prometheus text format (show, stats)\n"
		"  -n, --netns NAME  work in network namespace NAME\n"
		"  -V, --version     print the version\n"
		"  -h, --help        this text (also after a command)\n"
		"Commands may be abbreviated to any unique prefix.\n"
		"Exit status: 0 ok, 1 failure, 2 usage error\n", prog);
}

static struct mctl_nl *mctl_connect(int *rc)
{
	struct mctl_nl *nl;
	int err;

	err = mctl_nl_open(&nl, netns);
	if (!err)
		return nl;
	if (netns && (err == -ENOENT))
		*rc = mctl_fail(1, "no such network namespace: %s", netns);
	else if (err == -EPERM)
		*rc = mctl_fail(1, "permission denied: entering a network namespace needs CAP_SYS_ADMIN");
	else
		*rc = mctl_fail(1, "cannot talk to the kernel: %s", strerror(-err));
	return NULL;
}

static bool mctl_module_loaded(void)
{
	return access("/sys/module/sch_mercury", F_OK) == 0;
}

/* A failed request, explained in the user's terms. */
static int mctl_report(struct mctl_nl *nl, const char *what, const char *dev,
		       int err, bool creating)
{
	const char *ext = mctl_nl_extack(nl);

	if (err == -EPERM || err == -EACCES)
		return mctl_fail(1, "permission denied: %s on %s needs CAP_NET_ADMIN (run as root)",
				 what, dev);
	/* older kernels say "Specified qdisc not found" for an unknown kind */
	if (err == -ENOENT && creating && !mctl_module_loaded() &&
	    (!*ext || strstr(ext, "kind is unknown") ||
	     !strcmp(ext, "Specified qdisc not found")))
		return mctl_fail(1, "the kernel does not know the mercury qdisc: module sch_mercury is not loaded (modprobe sch_mercury, or insmod sch_mercury.ko)%s%s",
				 *ext ? "; kernel: " : "", ext);
	if (err == -EEXIST)
		return mctl_fail(1, "%s on %s failed: a qdisc is already there (use change or replace)%s%s",
				 what, dev, *ext ? "; kernel: " : "", ext);
	if (err == -ENOENT && !creating)
		return mctl_fail(1, "%s on %s failed: no such qdisc there%s%s",
				 what, dev, *ext ? "; kernel: " : "", ext);
	if (*ext)
		return mctl_fail(1, "%s on %s failed: %s (%s)", what, dev, ext,
				 strerror(-err));
	return mctl_fail(1, "%s on %s failed: %s", what, dev, strerror(-err));
}

/* Connect, and find @dev when one is named (*ifindex is 0 otherwise).
 * NULL, the error printed and *rc set, when either fails.
 */
static struct mctl_nl *mctl_open_dev(const char *dev, int *ifindex, int *rc)
{
	struct mctl_nl *nl = mctl_connect(rc);

	*ifindex = 0;
	if (!nl || !dev)
		return nl;
	*ifindex = mctl_nl_ifindex(nl, dev);
	if (*ifindex >= 0)
		return nl;
	*rc = mctl_fail(1, "no such device: %s", dev);
	mctl_nl_close(nl);
	return NULL;
}

/* "root" | "parent X:Y" | "handle H:", in any order, before the options. */
static int mctl_parse_place(int *argc, char ***argv, uint32_t *parent,
			    uint32_t *handle)
{
	uint32_t h;

	*parent = TC_H_ROOT;
	*handle = 0;
	while (*argc > 0) {
		const char *w = (*argv)[0];

		if (!strcmp(w, "root")) {
			*parent = TC_H_ROOT;
			(*argc)--;
			(*argv)++;
			continue;
		}
		if (strcmp(w, "parent") && strcmp(w, "handle"))
			break;
		if (*argc < 2)
			return mctl_fail(2, "%s needs a value", w);
		if (rtnl_tc_str2handle((*argv)[1], &h) < 0 ||
		    (!strcmp(w, "handle") && (h & 0xffff)))
			return mctl_fail(2, "bad %s '%s'%s", w, (*argv)[1],
					 !strcmp(w, "handle") ?
					 " (a qdisc handle is MAJOR:)" : "");
		if (!strcmp(w, "parent"))
			*parent = h;
		else
			*handle = h;
		*argc -= 2;
		*argv += 2;
	}
	return 0;
}

/* DEV, then where (root, parent, handle): what add, change, replace and
 * delete take first.
 */
static int mctl_parse_target(int *argc, char ***argv, const char *what,
			     const char **dev, uint32_t *parent,
			     uint32_t *handle)
{
	if (*argc < 1)
		return mctl_fail(2, "%s: which device?", what);
	*dev = (*argv)[0];
	(*argc)--;
	(*argv)++;
	return mctl_parse_place(argc, argv, parent, handle);
}

/* Is @q the qdisc named by @handle, or else the one at @parent? */
static bool mctl_at(const struct mctl_qdisc *q, uint32_t parent,
		    uint32_t handle)
{
	return handle ? q->handle == handle : q->parent == parent;
}

/* The mercury qdisc at @parent/@handle on @ifindex, if there is one. */
static bool mctl_find(struct mctl_nl *nl, int ifindex, uint32_t parent,
		      uint32_t handle, struct mercury_qdisc_opts *found)
{
	struct mctl_qdisc *q;
	bool hit = false;
	size_t n, i;

	if (mctl_nl_dump(nl, ifindex, &q, &n))
		return false;
	for (i = 0; i < n && !hit; i++) {
		if (mctl_at(&q[i], parent, handle)) {
			*found = q[i].opts;
			hit = true;
		}
	}
	mctl_qdiscs_free(q, n);
	return hit;
}

static int mctl_do_modify(int argc, char **argv, enum mctl_op op,
			  const char *what)
{
	struct mercury_qdisc_opts o, full;
	uint32_t parent, handle;
	struct mctl_nl *nl;
	const char *dev = NULL;
	int ifindex, err, rc = 0;
	char msg[256];

	rc = mctl_parse_target(&argc, &argv, what, &dev, &parent, &handle);
	if (rc)
		return rc;
	if (mctl_parse_opts(argc, argv, &o, msg, sizeof(msg)))
		return mctl_fail(2, "%s", msg);

	nl = mctl_open_dev(dev, &ifindex, &rc);
	if (!nl)
		return rc;
	/*
	 * The kernel checks options against each other on the configuration
	 * as it would be: defaults for a new qdisc, the current one for a
	 * change (and for a replace of a mercury qdisc, which is a change).
	 */
	mctl_opts_defaults(&full);
	if (op != MCTL_OP_ADD)
		mctl_find(nl, ifindex, parent, handle, &full);
	mctl_opts_merge(&full, &o);
	if (mctl_check_opts(&full, msg, sizeof(msg))) {
		rc = mctl_fail(2, "%s", msg);
		goto out;
	}
	err = mctl_nl_modify(nl, op, ifindex, parent, handle, &o);
	if (err)
		rc = mctl_report(nl, what, dev, err, op != MCTL_OP_CHANGE);
	else if (out_mode == MCTL_OUT_JSON)
		printf("{\"ok\":true}\n");
out:
	mctl_nl_close(nl);
	return rc;
}

static int do_add(int argc, char **argv)
{
	return mctl_do_modify(argc, argv, MCTL_OP_ADD, "adding a qdisc");
}

static int do_change(int argc, char **argv)
{
	return mctl_do_modify(argc, argv, MCTL_OP_CHANGE, "changing a qdisc");
}

static int do_replace(int argc, char **argv)
{
	return mctl_do_modify(argc, argv, MCTL_OP_REPLACE, "replacing a qdisc");
}

static int do_delete(int argc, char **argv)
{
	uint32_t parent, handle;
	struct mctl_nl *nl;
	const char *dev = NULL;
	int ifindex, err, rc = 0;

	rc = mctl_parse_target(&argc, &argv, "delete", &dev, &parent, &handle);
	if (rc)
		return rc;
	if (argc)
		return mctl_fail(2, "delete takes no options ('%s')", argv[0]);
	nl = mctl_open_dev(dev, &ifindex, &rc);
	if (!nl)
		return rc;
	err = mctl_nl_delete(nl, ifindex, parent, handle);
	if (err == -EINVAL && strstr(mctl_nl_extack(nl), "qdisc name"))
		rc = mctl_fail(1, "the qdisc there on %s is not mercury", dev);
	else if (err)
		rc = mctl_report(nl, "deleting a qdisc", dev, err, false);
	else if (out_mode == MCTL_OUT_JSON)
		printf("{\"ok\":true}\n");
	mctl_nl_close(nl);
	return rc;
}

static int mctl_show(int argc, char **argv, enum mctl_what what)
{
	struct mctl_qdisc *q = NULL;
	struct mctl_nl *nl;
	const char *dev = NULL;
	int ifindex, err, rc = 0;
	size_t n = 0;

	if (argc > 1)
		return mctl_fail(2, "show: one device at most ('%s')", argv[1]);
	if (argc == 1)
		dev = argv[0];
	nl = mctl_open_dev(dev, &ifindex, &rc);
	if (!nl)
		return rc;
	err = mctl_nl_dump(nl, ifindex, &q, &n);
	if (err) {
		rc = mctl_report(nl, "reading qdiscs", dev ? dev : "all devices",
				 err, false);
		goto out;
	}
	/* An empty answer is an error only when a device was named. */
	if (!n && dev) {
		rc = mctl_fail(1, "no mercury qdisc on %s%s", dev,
			       mctl_module_loaded() ? "" :
			       " (module sch_mercury is not loaded)");
		goto out;
	}
	switch (out_mode) {
	case MCTL_OUT_JSON:
		mctl_print_json(stdout, q, n, what, pretty);
		break;
	case MCTL_OUT_PROM:
		mctl_print_prometheus(stdout, q, n);
		break;
	default:
		mctl_print_text(stdout, q, n, what);
	}
	mctl_qdiscs_free(q, n);
out:
	mctl_nl_close(nl);
	return rc;
}

static int do_show(int argc, char **argv)
{
	return mctl_show(argc, argv, MCTL_SHOW_ALL);
}

static int do_stats(int argc, char **argv)
{
	if (argc > 0 && !strcmp(argv[0], "--prometheus")) {
		out_mode = MCTL_OUT_PROM;
		argc--;
		argv++;
	}
	return mctl_show(argc, argv, MCTL_SHOW_STATS);
}

/* Every mercury qdisc on DEV (or the one named) against a plan. */
static int do_check(int argc, char **argv)
{
	struct mercury_plan_info pi = { 0 };
	struct mercury_plan *plan = NULL;
	struct mctl_problems pr = { 0 };
	struct json_object *o, *arr;
	struct mctl_qdisc *q = NULL;
	const char *dev = NULL, *file;
	uint32_t parent, handle;
	struct mctl_nl *nl;
	int ifindex, err, rc;
	size_t n = 0, i, hit = 0;
	bool placed;

	rc = mctl_parse_target(&argc, &argv, "check", &dev, &parent, &handle);
	if (rc)
		return rc;
	placed = parent != TC_H_ROOT || handle;
	if (argc != 2 || strcmp(argv[0], "plan"))
		return mctl_fail(2, "check: want 'plan FILE' after the device");
	file = argv[1];
	err = mercury_plan_load(file, &plan);
	if (!err)
		err = mercury_plan_get_info(plan, &pi, sizeof(pi));
	if (err) {
		/* libmercury's message names the file */
		rc = mctl_fail(1, "%s", mercury_last_error());
		mercury_plan_free(plan);
		return rc;
	}
	nl = mctl_open_dev(dev, &ifindex, &rc);
	if (!nl)
		goto out_plan;
	err = mctl_nl_dump(nl, ifindex, &q, &n);
	if (err) {
		rc = mctl_report(nl, "reading qdiscs", dev, err, false);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (placed && !mctl_at(&q[i], parent, handle))
			continue;
		hit++;
		mctl_check_plan(&q[i], dev, &pi, &pr);
	}
	if (!hit) {
		rc = mctl_fail(1, "no mercury qdisc %son %s%s",
			       placed ? "there " : "", dev,
			       mctl_module_loaded() ? "" :
			       " (module sch_mercury is not loaded)");
		goto out;
	}
	rc = pr.n ? 1 : 0;
	if (out_mode == MCTL_OUT_JSON) {
		o = json_object_new_object();
		arr = json_object_new_array();
		for (i = 0; i < pr.n; i++)
			json_object_array_add(arr, json_object_new_string(pr.msg[i]));
		json_object_object_add(o, "ok", json_object_new_boolean(!pr.n));
		json_object_object_add(o, "qdiscs", json_object_new_int64(hit));
		json_object_object_add(o, "problems", arr);
		printf("%s\n", json_object_to_json_string_ext(o,
			JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else if (pr.n) {
		for (i = 0; i < pr.n; i++)
			fprintf(stderr, "%s: %s\n", prog, pr.msg[i]);
	} else {
		printf("%s: %zu tensors, tags 1..%u by %s, fit %zu mercury qdisc%s on %s\n",
		       file, mercury_plan_size(plan), pi.max_tag,
		       mctl_source_name(pi.source), hit, hit == 1 ? "" : "s",
		       dev);
	}
out:
	mctl_qdiscs_free(q, n);
	mctl_nl_close(nl);
out_plan:
	mercury_plan_free(plan);
	return rc;
}

/* The boot-time applier, apply.c; it reads its own options. */
static int do_apply(int argc, char **argv)
{
	/* getopt wants a program name first: the command word, before argv */
	return mctl_apply(argc + 1, argv - 1, netns);
}

static int do_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	mctl_usage(stdout);
	return 0;
}

struct mctl_cmd {
	const char	*name;
	int		(*fn)(int argc, char **argv);
};

static const struct mctl_cmd mctl_cmds[] = {
	{ "add",	do_add },
	{ "change",	do_change },
	{ "replace",	do_replace },
	{ "delete",	do_delete },
	{ "show",	do_show },
	{ "stats",	do_stats },
	{ "check",	do_check },
	{ "apply",	do_apply },
	/* change's documented abbreviation from before check existed */
	{ "ch",		do_change },
	/* and add's, from before apply existed */
	{ "a",		do_add },
	{ "help",	do_help },
};

/* The command @word is a unique prefix of; NULL and *ambiguous if many. */
const struct mctl_cmd *mctl_find_cmd(const char *word, bool *ambiguous);
const struct mctl_cmd *mctl_find_cmd(const char *word, bool *ambiguous)
{
	const struct mctl_cmd *hit = NULL;
	size_t i, len = strlen(word);

	*ambiguous = false;
	if (!len)
		return NULL;
	for (i = 0; i < sizeof(mctl_cmds) / sizeof(mctl_cmds[0]); i++) {
		if (strncmp(mctl_cmds[i].name, word, len))
			continue;
		if (!strcmp(mctl_cmds[i].name, word))
			return &mctl_cmds[i];
		if (hit)
			*ambiguous = true;
		hit = &mctl_cmds[i];
	}
	return *ambiguous ? NULL : hit;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json",	no_argument,		NULL, 'j' },
		{ "pretty",	no_argument,		NULL, 'P' },
		{ "prometheus",	no_argument,		NULL, 'p' },
		{ "netns",	required_argument,	NULL, 'n' },
		{ "version",	no_argument,		NULL, 'V' },
		{ "help",	no_argument,		NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const struct mctl_cmd *cmd;
	const char *first;
	bool ambiguous;
	int c;

	/* the unit tests call main() more than once */
	out_mode = MCTL_OUT_TEXT;
	pretty = false;
	netns = NULL;
	optind = 0;
	/* "+": stop at the command, its arguments are its own */
	while ((c = getopt_long(argc, argv, "+jpn:Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			out_mode = MCTL_OUT_JSON;
			break;
		case 'P':
			out_mode = MCTL_OUT_JSON;
			pretty = true;
			break;
		case 'p':
			out_mode = MCTL_OUT_PROM;
			break;
		case 'n':
			netns = optarg;
			break;
		case 'V':
			/* libmercury is linked in statically: its version is ours */
			printf("%s %s\n", prog, mercury_version());
			return 0;
		case 'h':
			mctl_usage(stdout);
			return 0;
		default:
			mctl_usage(stderr);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		mctl_usage(stderr);
		return 2;
	}
	cmd = mctl_find_cmd(argv[0], &ambiguous);
	if (!cmd)
		return mctl_fail(2, "%s command '%s' (try '%s help')",
				 ambiguous ? "ambiguous" : "unknown", argv[0],
				 prog);
	/*
	 * A command's first word is a device (after stats' --prometheus):
	 * one that starts with '-' is an option the command does not have,
	 * a usage error (2), not "no such device" (1); --help there is help.
	 */
	if (cmd->fn == do_apply) {
		if (out_mode != MCTL_OUT_TEXT) {
			out_mode = MCTL_OUT_TEXT;
			return mctl_fail(2, "apply writes text only (no -j or -p)");
		}
		return do_apply(argc - 1, argv + 1);
	}
	first = argc > 1 ? argv[1] : NULL;
	if (first && cmd->fn == do_stats && !strcmp(first, "--prometheus"))
		first = argc > 2 ? argv[2] : NULL;
	if (first && (!strcmp(first, "-h") || !strcmp(first, "--help")))
		return do_help(0, NULL);
	if (first && first[0] == '-')
		return mctl_fail(2, "%s: unknown option '%s' (try '%s help')",
				 cmd->name, first, prog);
	if (out_mode == MCTL_OUT_PROM && cmd->fn != do_show &&
	    cmd->fn != do_stats) {
		out_mode = MCTL_OUT_TEXT;
		return mctl_fail(2, "-p applies to show and stats only");
	}
	return cmd->fn(argc - 1, argv + 1);
}
