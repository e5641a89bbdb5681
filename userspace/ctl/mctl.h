// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercuryctl: provision and monitor the Mercury qdisc through libnl-route.
 *
 * opts.c    options as tc spells them (libmercury's grammar), checking
 * format.c  text, JSON and Prometheus output of struct mctl_qdisc
 * check.c   does a plan fit a qdisc (mercuryctl check; libmercury's rule)
 * apply.c   mercuryctl apply: the configuration file, applied idempotently
 * nl.c      everything that talks to the kernel (libnl-route-3)
 * main.c    the command table and error reporting
 *
 * Everything but nl.c is pure, so the unit tests run without privilege.
 */
#ifndef MCTL_H
#define MCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <net/if.h>

#include <linux/mercury.h>
#include <mercury/mercury.h>

/* One bit per option given: (1u << TCA_MERCURY_*). */
#define MCTL_BIT(attr)	(1u << (attr))
#define MCTL_ALL_OPTS	(((1u << (TCA_MERCURY_MAX + 1)) - 1) & ~1u)

/*
 * A qdisc's options are libmercury's struct mercury_qdisc_opts (its
 * mercury_qdisc_opts_decode() reads them from our dumps): set has
 * MCTL_BIT() of each option given or reported.
 */

/* The standard counters of a qdisc or class (tc -s), as libnl parses them. */
struct mctl_counters {
	uint64_t	packets, bytes;		/* sent */
	uint64_t	drops, overlimits, requeues;	/* packets */
	uint64_t	backlog, qlen;		/* bytes, packets queued */
};

/* One level (class) of a qdisc. */
struct mctl_level {
	uint32_t	minor;		/* class minor: tag, or 0xffff */
	uint32_t	tag;		/* 0: the untagged class */
	uint32_t	flows;		/* flows at this level now */
	struct mctl_counters c;
};

struct mctl_qdisc {
	char		dev[IF_NAMESIZE];
	int		ifindex;
	uint32_t	handle;
	uint32_t	parent;		/* TC_H_ROOT for root */
	struct mercury_qdisc_opts opts;	/* as the kernel reports them */
	struct mctl_counters c;
	bool		has_xstats;
	struct tc_mercury_xstats x;
	struct mctl_level *levels;	/* sorted by minor */
	size_t		nlevels;
};

/* opts.c */
void mctl_opts_defaults(struct mercury_qdisc_opts *o);
int mctl_parse_opts(int argc, char **argv, struct mercury_qdisc_opts *o,
		    char *err, size_t errlen);
void mctl_opts_merge(struct mercury_qdisc_opts *base,
		     const struct mercury_qdisc_opts *o);
int mctl_check_opts(const struct mercury_qdisc_opts *o, char *err,
		    size_t errlen);
void mctl_sprint_opts(char *buf, size_t len,
		      const struct mercury_qdisc_opts *o, uint32_t which);
const char *mctl_source_name(uint8_t v);
void mctl_sprint_handle(char *buf, size_t len, uint32_t handle);

/* apply.c: mercuryctl apply, the boot-time applier */
#define MCTL_CONF_MAX_WORDS	64
struct mctl_conf_line {
	const char	*dev;
	int		argc;			/* option words */
	char		*argv[MCTL_CONF_MAX_WORDS];
};
int mctl_conf_parse(char *text, struct mctl_conf_line **lines, size_t *n,
		    char *err, size_t errlen);
uint32_t mctl_apply_diff(const struct mercury_qdisc_opts *want,
			 const struct mercury_qdisc_opts *have, char *buf,
			 size_t len);
int mctl_apply(int argc, char **argv, const char *netns);

/* format.c */
enum mctl_what { MCTL_SHOW_ALL, MCTL_SHOW_STATS };
void mctl_print_text(FILE *f, const struct mctl_qdisc *q, size_t n,
		     enum mctl_what what);
struct json_object *mctl_qdisc_json(const struct mctl_qdisc *q,
				    enum mctl_what what);
void mctl_print_json(FILE *f, const struct mctl_qdisc *q, size_t n,
		     enum mctl_what what, bool pretty);
void mctl_print_prometheus(FILE *f, const struct mctl_qdisc *q, size_t n);
void mctl_qdiscs_free(struct mctl_qdisc *q, size_t n);

/* check.c */
#define MCTL_MAX_PROBLEMS	8
struct mctl_problems {
	unsigned int	n;
	char		msg[MCTL_MAX_PROBLEMS][320];
};
/* Adds to @pr what keeps @pi's tags from reaching @q's levels as planned;
 * returns how many it added.
 */
int mctl_check_plan(const struct mctl_qdisc *q, const char *dev,
		    const struct mercury_plan_info *pi,
		    struct mctl_problems *pr);

/* nl.c */
struct mctl_nl;
struct nl_msg;
struct nl_sock;
enum mctl_op { MCTL_OP_ADD, MCTL_OP_CHANGE, MCTL_OP_REPLACE };
int mctl_nl_setns(const char *netns);
int mctl_nl_open(struct mctl_nl **nl, const char *netns);
void mctl_nl_close(struct mctl_nl *nl);
const char *mctl_nl_extack(const struct mctl_nl *nl);
/* Send a request that libnl built (any kind, link, neighbour; freed here)
 * and wait for the answer: 0, or the kernel's negative errno with its
 * message in mctl_nl_extack(). The fuzzers use it for what mercuryctl
 * itself does not send.
 */
int mctl_nl_send(struct mctl_nl *nl, struct nl_msg *msg);
/* The socket, in @nl's namespace, for libnl's own caches (rtnl_*_alloc_cache). */
struct nl_sock *mctl_nl_sock(struct mctl_nl *nl);
int mctl_nl_ifindex(struct mctl_nl *nl, const char *dev);
int mctl_nl_modify(struct mctl_nl *nl, enum mctl_op op, int ifindex,
		   uint32_t parent, uint32_t handle,
		   const struct mercury_qdisc_opts *o);
int mctl_nl_delete(struct mctl_nl *nl, int ifindex, uint32_t parent,
		   uint32_t handle);
int mctl_nl_dump(struct mctl_nl *nl, int ifindex, struct mctl_qdisc **out,
		 size_t *n);
/* The kind of @ifindex's root qdisc ("" if none) and, for mercury, its
 * options (the kernel's defaults, then what it reports).
 */
int mctl_nl_root(struct mctl_nl *nl, int ifindex, char *kind, size_t len,
		 struct mercury_qdisc_opts *o);

#endif /* MCTL_H */
