// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercuryctl: provision and monitor the Mercury qdisc through libnl-route.
 *
 * opts.c    option parsing and checking, as tc spells the options
 * format.c  text, JSON and Prometheus output of struct mctl_qdisc
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

/* One bit per option given: (1u << TCA_MERCURY_*). */
#define MCTL_BIT(attr)	(1u << (attr))
#define MCTL_ALL_OPTS	(((1u << (TCA_MERCURY_MAX + 1)) - 1) & ~1u)

/* The kernel's defaults (sch_mercury.c mercury_defaults). quantum is
 * raised to twice the device MTU at creation; 3028 is its floor.
 */
#define MCTL_DEF_LEVELS		1024
#define MCTL_DEF_MASK		0xffff
#define MCTL_DEF_FLOWS		1024
#define MCTL_DEF_LIMIT		10000
#define MCTL_DEF_MEMORY_LIMIT	(32u << 20)
#define MCTL_DEF_QUANTUM	3028
#define MCTL_MIN_QUANTUM	256
#define MCTL_MAX_QUANTUM	(1u << 20)

struct mctl_opts {
	uint32_t	set;		/* MCTL_BIT() of each option given */
	uint32_t	levels;		/* tagged levels */
	uint32_t	mask;		/* tag mask */
	uint32_t	flows;		/* flow buckets */
	uint32_t	limit;		/* packets */
	uint32_t	memory_limit;	/* bytes of truesize */
	uint32_t	quantum;	/* bytes per round */
	uint8_t		source;		/* TC_MERCURY_TAG_* */
	uint8_t		shift;		/* bits */
	uint8_t		untagged;	/* TC_MERCURY_UNTAGGED_* */
	uint8_t		share;		/* percent */
	uint8_t		flow_order;	/* 0 or 1 */
	uint8_t		bypass;		/* 0 or 1 */
};

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
	struct mctl_opts opts;		/* as the kernel reports them */
	struct mctl_counters c;
	bool		has_xstats;
	struct tc_mercury_xstats x;
	struct mctl_level *levels;	/* sorted by minor */
	size_t		nlevels;
};

/* opts.c */
void mctl_opts_defaults(struct mctl_opts *o);
int mctl_parse_size(const char *s, uint32_t *out);
int mctl_parse_opts(int argc, char **argv, struct mctl_opts *o,
		    char *err, size_t errlen);
void mctl_opts_merge(struct mctl_opts *base, const struct mctl_opts *o);
int mctl_check_opts(const struct mctl_opts *o, char *err, size_t errlen);
void mctl_sprint_size(char *buf, size_t len, uint32_t bytes);
const char *mctl_source_name(uint8_t v);
void mctl_sprint_handle(char *buf, size_t len, uint32_t handle);

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

/* nl.c */
struct mctl_nl;
enum mctl_op { MCTL_OP_ADD, MCTL_OP_CHANGE, MCTL_OP_REPLACE };
int mctl_nl_open(struct mctl_nl **nl, const char *netns);
void mctl_nl_close(struct mctl_nl *nl);
const char *mctl_nl_extack(const struct mctl_nl *nl);
int mctl_nl_ifindex(struct mctl_nl *nl, const char *dev);
int mctl_nl_modify(struct mctl_nl *nl, enum mctl_op op, int ifindex,
		   uint32_t parent, uint32_t handle,
		   const struct mctl_opts *o);
int mctl_nl_delete(struct mctl_nl *nl, int ifindex, uint32_t parent,
		   uint32_t handle);
int mctl_nl_dump(struct mctl_nl *nl, int ifindex, struct mctl_qdisc **out,
		 size_t *n);

#endif /* MCTL_H */
