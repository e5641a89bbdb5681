// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Private helpers shared by the libmercury sources. */
#ifndef __MERCURY_INTERNAL_H
#define __MERCURY_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>

#include "mercury/mercury.h"

#define __printf(a, b)	__attribute__((format(printf, a, b)))

/* Log at level; never prints unless a callback is installed. */
void mercury_pr(enum mercury_log_level level, const char *fmt, ...)
	__printf(2, 3);

/* Is a log callback installed (would mercury_pr() say anything)? */
bool mercury_log_enabled(void);

/*
 * parse.c, for the qdisc's option grammar: a size as tc's get_size()
 * reads it, mercury_parse_size() plus a decimal fraction whose product
 * is whole bytes (1.5m); a number as tc's get_u32(.., 0) reads it
 * (decimal, 0x hex, 0 octal). -EINVAL / -ERANGE with the message set.
 */
int mercury_parse_tc_size(const char *s, uint64_t max, uint64_t *bytes);
int mercury_parse_tc_uint(const char *s, uint64_t max, uint64_t *v);

/*
 * qdisc_opts.c: the qdisc's options, one row per TCA_MERCURY_*
 * attribute (index attr - 1): the field it fills, tc's word for it, how
 * its value is spelled, the kernel policy's range. The grammar, the
 * netlink encoder and decoder (qdisc.c) all walk it.
 */
enum mercury_qdisc_kind {
	MERCURY_QDISC_NUM,		/* a number, printed in decimal */
	MERCURY_QDISC_HEX,		/* a number, printed 0x... */
	MERCURY_QDISC_SIZE,		/* bytes, with tc's size units */
	MERCURY_QDISC_WORD,		/* value i is words[i] */
};

struct mercury_qdisc_attr {
	const char *name;		/* tc's word */
	uint16_t attr;			/* TCA_MERCURY_* */
	uint8_t bits;			/* 8 or 32 */
	uint8_t kind;			/* enum mercury_qdisc_kind */
	size_t off;			/* in struct mercury_qdisc_opts */
	uint32_t min, max;		/* the kernel policy's range */
	const char *unit;		/* after the range in messages */
	const char *const *words;	/* MERCURY_QDISC_WORD */
};

extern const struct mercury_qdisc_attr mercury_qdisc_attrs[];
extern const size_t mercury_qdisc_nattrs;

/* plan.c: "mark", "priority", "dscp"; NULL for any other value */
const char *mercury_source_name(int source);

/*
 * tag.c: can a tagger with these settings carry tags 1..levels (0: just
 * the settings) through the qdisc's (value >> shift) & mask? mask is the
 * resolved one (never 0 for a valid setting). The one check behind
 * mercury_tag_check(), mercury_tagger_new() and the plan's loader.
 */
int mercury_tag_settings_check(const char *what, int source,
			       unsigned int shift, uint32_t mask,
			       unsigned int levels);

/*
 * Fail with -err: remember the message for mercury_last_error(), pass it to
 * the log callback, set errno. Returns -err so callers can
 * `return mercury_err(EINVAL, ...)`.
 */
int mercury_err(int err, const char *fmt, ...) __printf(2, 3);

/*
 * An expected outcome, not a failure (-EAGAIN: retry later, -ENOTCONN:
 * the peer finished): like mercury_err(), the message for
 * mercury_last_error() is this call's, but the log callback is not told.
 */
int mercury_quiet(int err, const char *fmt, ...) __printf(2, 3);

/*
 * tag.c: how an error names the other end of fd: "ADDR:PORT (fd N)" for a
 * connected IP socket, else "fd N". Returns buf.
 */
#define MERCURY_PEER_STRLEN 80
const char *mercury_peer_str(int fd, char *buf, size_t len);

/* Keep errno == -ret for negative ret (the libbpf convention). */
static inline int mercury_ret(int ret)
{
	if (ret < 0)
		errno = -ret;
	return ret;
}

/*
 * Options structs grow at the end: accept a caller built against an older
 * header (smaller sz), and a newer one only if every field we don't know
 * is zero.
 */
int mercury_opts_check(const void *opts, size_t user_sz, size_t our_sz,
		       const char *name);

#define OPTS_VALID(opts, type)						\
	(!(opts) || mercury_opts_check(opts, (opts)->sz,			\
		offsetofend(struct type, type##__last_field), #type) == 0)
#define offsetofend(TYPE, FIELD)					\
	(offsetof(TYPE, FIELD) + sizeof(((TYPE *)0)->FIELD))
#define OPTS_HAS(opts, field)						\
	((opts) && (opts)->sz >= offsetofend(typeof(*(opts)), field))
#define OPTS_GET(opts, field, fallback)					\
	(OPTS_HAS(opts, field) ? (opts)->field : (fallback))

/*
 * The largest plan or profile we read: the biggest shipped profile
 * (gpt2_xl) is 158 KB, a plan of a million tensors about 64 MiB. A longer
 * input (a device, a pipe that never ends) is refused with -EFBIG, not
 * read until memory runs out.
 */
#define MERCURY_MAX_INPUT	(64U << 20)

/* A whole file, NUL-terminated, at most MERCURY_MAX_INPUT bytes. */
int mercury_read_file(const char *path, char **buf, size_t *len);
/*
 * An output file written whole or not at all (src/file.c): open writes a
 * temporary beside path (or path itself where it exists and is no regular
 * file: a terminal, /dev/null, a FIFO), commit renames it over path,
 * abort removes it. Each returns 0 or -errno with a message naming path;
 * commit and abort release o either way.
 */
struct mercury_out {
	int fd;
	char *path;		/* the target, symlinks resolved */
	char *tmp;		/* the file being written; NULL: path itself */
	unsigned int mode;	/* permissions the finished file gets */
};

int mercury_out_open(struct mercury_out *o, const char *path);
int mercury_out_commit(struct mercury_out *o);
void mercury_out_abort(struct mercury_out *o);
/* Write len bytes of buf as the file path, through a mercury_out. */
int mercury_write_file(const char *path, const char *buf, size_t len);

struct json_object;
/* One JSON value (and nothing after it); messages say "what: line N: ...". */
int mercury_parse_json(const char *what, const char *buf, size_t len,
		       struct json_object **out);

/* The settings t writes, as a plan records them (DSCP: the DSCP shift). */
void mercury_tagger_plan_info(const struct mercury_tagger *t,
			      struct mercury_plan_info *pi);

/*
 * qdisc.c: compare pi with the mercury qdiscs on the devices the TCP
 * sockets among fds leave by (opts.qdisc_check). 0, or in strict mode
 * -EINVAL naming the first problem.
 */
int mercury_chanset_check_qdiscs(const int *fds, size_t n,
				 const struct mercury_plan_info *pi,
				 enum mercury_qdisc_check mode);

/* Less urgent is larger; untagged (0) is the least urgent of all. */
static inline unsigned long long mercury_urgency_key(unsigned int tag)
{
	return tag ? tag : ~0ULL;
}

#endif /* __MERCURY_INTERNAL_H */
