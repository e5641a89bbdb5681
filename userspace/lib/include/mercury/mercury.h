// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libmercury: put each tensor's layer priority on its packets.
 *
 * The mercury qdisc orders packets by a tag it reads from skb->mark (or
 * skb->priority): tag = (value >> shift) & mask, tag 1 most urgent, 0
 * untagged. This library writes that value on sockets (SO_MARK or
 * SO_PRIORITY), keeps the tensor name -> tag plan, spreads tensors over a
 * set of connections so an urgent tensor never queues behind less urgent
 * bytes, and frames/reassembles tensors on the way.
 *
 * Conventions (libbpf style):
 *  - every function that can fail returns a negative errno value and also
 *    sets errno; mercury_last_error() gives a one-line reason;
 *  - the library never prints: install a callback with mercury_set_log();
 *  - options structs start with `size_t sz` and may grow; declare them with
 *    MERCURY_OPTS() so fields added later read as zero;
 *  - objects are not thread-safe: use one per thread or lock around them.
 */
#ifndef __MERCURY_MERCURY_H
#define __MERCURY_MERCURY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MERCURY_API
#define MERCURY_API __attribute__((visibility("default")))
#endif

#define MERCURY_VERSION_MAJOR	0
#define MERCURY_VERSION_MINOR	3

/*
 * Declare and zero an options struct, setting sz and the given fields:
 *   MERCURY_OPTS(mercury_tag_opts, o, .source = MERCURY_TAG_PRIORITY);
 */
#define MERCURY_OPTS(TYPE, NAME, ...)					\
	struct TYPE NAME = ({						\
		memset(&NAME, 0, sizeof(struct TYPE));			\
		(struct TYPE) {						\
			.sz = sizeof(struct TYPE),			\
			__VA_ARGS__					\
		};							\
	})

/* ---- version, errors and logging -------------------------------------- */

MERCURY_API const char *mercury_version(void);

enum mercury_log_level {
	MERCURY_LOG_WARN,
	MERCURY_LOG_INFO,
	MERCURY_LOG_DEBUG,
};

/* msg is one line without a trailing newline; valid during the call only. */
typedef void (*mercury_log_fn)(enum mercury_log_level level, const char *msg,
			       void *ctx);

/*
 * Install (or with fn == NULL remove) the log callback; returns the one it
 * replaces. Thread-safe: fn and ctx change together. Default: silent.
 */
MERCURY_API mercury_log_fn mercury_set_log(mercury_log_fn fn, void *ctx);

/*
 * Reason for the last negative return in this thread ("" if none yet),
 * including the expected ones (-EAGAIN, -ENOTCONN): it always belongs to
 * the call that returned last with an error.
 */
MERCURY_API const char *mercury_last_error(void);

/* ---- socket tagging ---------------------------------------------------- */

enum mercury_tag_source {
	MERCURY_TAG_MARK = 0,		/* SO_MARK -> skb->mark (qdisc default) */
	MERCURY_TAG_PRIORITY = 1,	/* SO_PRIORITY -> skb->priority */
	/*
	 * IP_TOS (IPv4) / IPV6_TCLASS (IPv6) -> the DSCP field of every
	 * packet: byte = ((tag & mask) << shift) << 2, mask default 0x3f,
	 * (mask << shift) must fit 6 bits. Needs no capability and, unlike
	 * mark and priority, crosses namespaces and links.
	 */
	MERCURY_TAG_DSCP = 2,
};

#define MERCURY_DEFAULT_MASK	0xffffu
#define MERCURY_DSCP_MASK	0x3fu	/* the six DSCP bits */

struct mercury_tag_opts {
	size_t sz;			/* sizeof(struct mercury_tag_opts) */
	enum mercury_tag_source source;	/* must match the qdisc's source */
	unsigned int shift;		/* bits; must match the qdisc */
	uint32_t mask;			/* must match the qdisc; 0: 0xffff (DSCP: 0x3f) */
	/*
	 * Keep the bits of the socket's existing value outside
	 * (mask << shift), e.g. marks an nft ruleset also uses. Costs one
	 * getsockopt per socket the first time it is tagged.
	 */
	bool keep_other_bits;
	size_t :0;
};
#define mercury_tag_opts__last_field keep_other_bits

struct mercury_tagger;

/* opts may be NULL: mark, shift 0, mask 0xffff. */
MERCURY_API int mercury_tagger_new(const struct mercury_tag_opts *opts,
				   struct mercury_tagger **out);
MERCURY_API void mercury_tagger_free(struct mercury_tagger *t);

/*
 * Fill opts from MERCURY_TAG_SOURCE (mark|priority|dscp), MERCURY_SHIFT and
 * MERCURY_MASK (C integer syntax); unset variables leave a field alone.
 */
MERCURY_API int mercury_tag_opts_from_env(struct mercury_tag_opts *opts);

/*
 * LIBMERCURY_0.3: can a tagger with opts (NULL: the defaults) carry tags
 * 1..levels? The qdisc reads tag = (value >> shift) & mask, so every tag
 * must survive the mask ((tag & mask) == tag: the mask's low bits must
 * be set up to levels' top bit) and mask << shift must fit the field
 * (32 bits; DSCP: 6). levels 0 checks the settings alone. -ERANGE or
 * -EINVAL with one line naming mask and levels. The one check: the
 * tagger, the plan loader and mercury-place's options use it.
 */
MERCURY_API int mercury_tag_check(const struct mercury_tag_opts *opts,
				  unsigned int levels);

/*
 * The value written for tag: (tag & mask) << shift (DSCP: the TOS/TCLASS
 * byte, that shifted left by 2); -ERANGE if it doesn't fit.
 */
MERCURY_API int mercury_tagger_value(const struct mercury_tagger *t,
				     unsigned int tag, uint32_t *value);

/*
 * Tag socket fd for the data about to be sent. The tagger remembers the
 * value last written on each fd and skips the system call when it does not
 * change, so calling this once per tensor is cheap. Call
 * mercury_tagger_forget() when fd is closed (its number may be reused).
 * -EPERM: the capability is missing (see mercury_tagger_probe()).
 */
MERCURY_API int mercury_tag_socket(struct mercury_tagger *t, int fd,
				   unsigned int tag);
MERCURY_API void mercury_tagger_forget(struct mercury_tagger *t, int fd);

/* Read the tag back from the socket (getsockopt); >= 0 on success. */
MERCURY_API int mercury_socket_tag(const struct mercury_tagger *t, int fd);

/*
 * May this process write the value of tag? Tries it on a scratch UDP
 * socket. 0 yes; -EPERM with a message saying which capability is missing
 * and what the unprivileged alternatives are.
 */
MERCURY_API int mercury_tagger_probe(const struct mercury_tagger *t,
				     unsigned int tag);

struct mercury_tagger_stats {
	uint64_t calls;			/* mercury_tag_socket() calls */
	uint64_t syscalls;		/* setsockopt() calls made */
};
MERCURY_API int mercury_tagger_get_stats(const struct mercury_tagger *t,
					 struct mercury_tagger_stats *st,
					 size_t sz);

/* ---- priority plans ----------------------------------------------------- */

#define MERCURY_MAX_TAG		65535u	/* tags are u16 on the wire */

struct mercury_plan;
struct mercury_model;

struct mercury_plan_entry {
	const char *tensor;		/* parameter name */
	unsigned int tag;		/* 1 = most urgent */
	uint64_t bytes;			/* bytes on the wire, 0 if unknown */
	const char *src;		/* device, "" if unknown */
	const char *dst;		/* device, "" if unknown */
};

enum mercury_plan_group {
	MERCURY_PLAN_PER_TENSOR = 0,	/* dense tags 1..n, one per tensor */
	MERCURY_PLAN_PER_MODULE = 1,	/* dense tags, one per module */
};

struct mercury_plan_opts {
	size_t sz;
	enum mercury_plan_group group;
	/*
	 * If non-zero, squeeze the dense tags into 1..levels keeping their
	 * order (tag = 1 + rank * levels / n), e.g. to fit a small mask.
	 * For a plan sent through a channel set, use at most the number of
	 * connections (see mercury_chanset_new()).
	 */
	unsigned int levels;
	size_t :0;
};
#define mercury_plan_opts__last_field levels

/*
 * The plan file (Documentation/tagger.md, "Plan format"): an object with
 * "mercury_plan": MERCURY_PLAN_FORMAT, "levels" (every tag is in
 * 1..levels), "tag_source" ("mark" | "priority" | "dscp"), "shift",
 * "mask" and "priorities": [{"tensor", "tag", "bytes", "src", "dst"}].
 * Other top-level keys are kept as they are and saved again. A file
 * without "mercury_plan" is format 0 (solver plans before 0.2): it loads
 * with levels = its highest tag and the tagger's defaults; a format this
 * version does not know is -EPROTONOSUPPORT.
 */
#define MERCURY_PLAN_FORMAT	1

struct mercury_plan_load_opts {
	size_t sz;
	/*
	 * If non-zero, the most levels the caller can use (the qdisc's
	 * levels, the connections of a channel set): a plan with a tag above
	 * it is -ERANGE with a message, unless squeeze is set.
	 */
	unsigned int levels;
	/* Squeeze such a plan into 1..levels (the mercury_plan_opts rule). */
	bool squeeze;
	size_t :0;
};
#define mercury_plan_load_opts__last_field squeeze

/* opts may be NULL: no limit. */
MERCURY_API int mercury_plan_load_opts(const char *path,
				       const struct mercury_plan_load_opts *opts,
				       struct mercury_plan **out);
MERCURY_API int mercury_plan_load_buf_opts(const char *json, size_t len,
					   const struct mercury_plan_load_opts *opts,
					   struct mercury_plan **out);
/* The same with no options. */
MERCURY_API int mercury_plan_load(const char *path, struct mercury_plan **out);
MERCURY_API int mercury_plan_load_buf(const char *json, size_t len,
				      struct mercury_plan **out);
/*
 * Default plan from an h200 profile (profiles/h200/<model>.json in the source tree):
 * the module that runs first in the forward pass is the most urgent.
 * Bytes are numel times the size of the entry's "dtype" (or the profile's
 * "grad_dtype"); 4 (fp32) when neither is given.
 */
MERCURY_API int mercury_plan_from_profile(const char *path,
					  const struct mercury_plan_opts *opts,
					  struct mercury_plan **out);
MERCURY_API void mercury_plan_free(struct mercury_plan *p);

/*
 * The builder: an empty plan (format MERCURY_PLAN_FORMAT, tag source mark,
 * shift 0, mask 0xffff), filled in order by mercury_plan_add() (e->src and
 * e->dst may be NULL; a name added twice is -EEXIST).
 */
MERCURY_API int mercury_plan_new(struct mercury_plan **out);
MERCURY_API int mercury_plan_add(struct mercury_plan *p,
				 const struct mercury_plan_entry *e);
/*
 * Record levels; if tags go above it, squeeze them into 1..levels keeping
 * their order. Tags added later must be <= levels. -ERANGE if levels does
 * not fit the plan's mask.
 */
MERCURY_API int mercury_plan_set_levels(struct mercury_plan *p,
					unsigned int levels);
/* Record the tagger settings the plan is meant for (opts NULL: defaults). */
MERCURY_API int mercury_plan_set_tag_opts(struct mercury_plan *p,
					  const struct mercury_tag_opts *opts);
/*
 * A top-level section of the caller's own (e.g. the solver's "placement"),
 * given as JSON text, saved with the plan; json == NULL removes it. The
 * format's keys are -EINVAL.
 */
MERCURY_API int mercury_plan_set_extra(struct mercury_plan *p, const char *key,
				       const char *json);
/* Write p as a plan file of the current format. */
MERCURY_API int mercury_plan_save(const struct mercury_plan *p,
				  const char *path);
/* The same text in a malloc()ed, NUL-terminated buffer (*len without NUL). */
MERCURY_API int mercury_plan_save_buf(const struct mercury_plan *p,
				      char **json, size_t *len);

struct mercury_plan_info {
	unsigned int format;		/* as read: 0 = no "mercury_plan" key */
	unsigned int levels;		/* every tag is in 1..levels */
	unsigned int max_tag;		/* highest tag used */
	enum mercury_tag_source source;	/* format 0: the defaults */
	unsigned int shift;
	uint32_t mask;
};
MERCURY_API int mercury_plan_get_info(const struct mercury_plan *p,
				      struct mercury_plan_info *info, size_t sz);


/*
 * Tag of tensor (>= 1) in O(1); -ENOENT if the plan does not name it
 * (mercury_last_error() names the tensor; not logged).
 */
MERCURY_API int mercury_plan_lookup(const struct mercury_plan *p,
				    const char *tensor);
/*
 * LIBMERCURY_0.3: the tag rule's answer, the tag tensor goes out with
 * (>= 1), and in *value (may be NULL) the field the qdisc reads it back
 * from: tag << the plan's shift (the tagger writes that; DSCP: << 2 more).
 * The rule (Documentation/tagger.md, "One tag rule"): a plan's tags, 1
 * most urgent, go on the wire as they are when they fit the levels the
 * plan was loaded or set to (mercury_plan_set_levels(), the levels of
 * mercury_plan_load_opts and mercury_plan_opts); otherwise the plan's
 * distinct tags, ranked 1..n, are squeezed: rank r becomes r when
 * n <= levels, else 1 + (r - 1) * levels / n. A tensor without a plan
 * gets the default plan's tag (mercury_plan_from_profile()), or for a
 * caller with its own order, rank r of a plan built from the ranks.
 * -ENOENT as mercury_plan_lookup(); -ERANGE if the tag does not fit the
 * plan's mask.
 */
MERCURY_API int mercury_plan_wire_tag(const struct mercury_plan *p,
				      const char *tensor, uint32_t *value);
/*
 * LIBMERCURY_0.3: the squeeze of the tag rule on n tags in place: unchanged
 * when every tag fits 1..levels, else the distinct tags ranked 1..d
 * become rank r when d <= levels, else 1 + (r - 1) * levels / d. The
 * plan's own squeeze (mercury_plan_set_levels(), the levels of the load
 * and profile opts) is this one. Tags are order keys >= 1 (1 most urgent)
 * of any size, so a plan of more than MERCURY_MAX_TAG tensors is built
 * from its ranks squeezed here, then mercury_plan_add(). 0, -EINVAL (a
 * tag 0), -ERANGE (levels outside 1..MERCURY_MAX_TAG) or -ENOMEM.
 */
MERCURY_API int mercury_plan_squeeze_tags(unsigned int *tags, size_t n,
					  unsigned int levels);
MERCURY_API size_t mercury_plan_size(const struct mercury_plan *p);
MERCURY_API unsigned int mercury_plan_max_tag(const struct mercury_plan *p);
/* Entry i in file order (profile plans: ascending tag). */
MERCURY_API int mercury_plan_entry(const struct mercury_plan *p, size_t i,
				   struct mercury_plan_entry *e);

/* ---- model profiles ------------------------------------------------------ */

/*
 * The one reader of model profiles (profiles/README.md): an h200 JSON
 * profile or a PipeDream graph.txt, told apart by content (JSON starts
 * with '{' or '['). Every tool (the plan builder, mercury-place,
 * mercury-sim, mercury-ps) reads profiles here, so they agree on what a
 * file says:
 *  - ownership: a parameter's gate is the first forward call that needs
 *    it: the first call of its module, else the first call of the nearest
 *    enclosing path that has called modules at or below it ("a.b.c" ->
 *    "a.b" -> "a" -> the whole model; mercury_model_first_use()). A tied
 *    tensor is listed once, under its first user, with shared_with naming
 *    the other owners;
 *  - bytes: numel times the size of the entry's "dtype", else of the
 *    profile's "grad_dtype", else 4 (the shipped profiles' fp32 gradients);
 *  - PipeDream: the forward order is topological, the lowest node number
 *    first among ready nodes; backward runs it reversed, and each node with
 *    parameter_size > 0 has one tensor "<node>.param" whose gradient is
 *    ready when that node's backward ends.
 * Input above 64 MiB is -EFBIG; anything malformed is -EINVAL with a
 * message naming the file and the entry.
 */
enum mercury_model_format {
	MERCURY_MODEL_H200 = 1,		/* h200 *.json */
	MERCURY_MODEL_PIPEDREAM = 2,	/* PipeDream *.graph.txt */
};

#define MERCURY_MODEL_NONE	((size_t)-1)	/* no such index */

/* h200: a leaf module; PipeDream: a node. */
struct mercury_model_module {
	const char *name;
	uint64_t params;		/* modules[].params; 0 if not listed */
	size_t first_call;		/* MERCURY_MODEL_NONE: never called */
};

/* One forward call, in execution order; times < 0 when not given. */
struct mercury_model_call {
	const char *module;
	size_t module_idx;
	double start_ms;
	double fwd_ms;
	double out_bytes;		/* PipeDream: activation_size */
};

/* One parameter tensor, in grad_ready (backward) order. */
struct mercury_model_param {
	const char *name;
	const char *module;		/* NULL: the profile says null */
	size_t module_idx;		/* MERCURY_MODEL_NONE if module is NULL */
	const char *owner;		/* module, or the name's parent path */
	uint64_t numel;			/* PipeDream: bytes / elem_size */
	const char *dtype;		/* gradient dtype, "float32" by default */
	unsigned int elem_size;		/* bytes per element of dtype */
	uint64_t bytes;			/* gradient bytes: numel * elem_size */
	double ready_ms;		/* since backward start; < 0 not given */
	size_t gate;			/* first forward call that needs it */
	size_t nshared;			/* tied tensor: the other owners */
	const size_t *shared;		/* their module indices */
};

/* h200: module-level data flow; PipeDream: node edges (module indices). */
struct mercury_model_edge {
	size_t src, dst;
};

/* PipeDream only: one operator node, in file order. */
struct mercury_model_node {
	const char *name;
	const char *op;			/* "Conv2d(...)", "Input0", ... */
	double fwd_ms, bwd_ms;
	double act_bytes;		/* a [a; b] list is summed */
	double param_bytes;
	size_t param;			/* its tensor, or MERCURY_MODEL_NONE */
};

struct mercury_model_info {
	enum mercury_model_format format;
	const char *model;		/* "model", the graph's base name; or NULL */
	double fwd_ms, bwd_ms;		/* iteration_ms; PipeDream: sums; < 0 absent */
	size_t nmodules, ncalls, nparams, nedges, nnodes;
	bool has_edges;			/* h200: "edges" is an array, not null */
	/* every call has start_ms and fwd_ms, every param ready_ms, and
	 * iteration_ms is given: what a timing model needs */
	bool timed;
	uint64_t total_bytes;		/* sum of param bytes: tied ones once */
};

MERCURY_API int mercury_model_load(const char *path,
				   struct mercury_model **out);
/* The same from memory; name stands for the file in messages and names
 * the PipeDream model. */
MERCURY_API int mercury_model_load_buf(const char *buf, size_t len,
				       const char *name,
				       struct mercury_model **out);
MERCURY_API void mercury_model_free(struct mercury_model *m);
MERCURY_API int mercury_model_get_info(const struct mercury_model *m,
				       struct mercury_model_info *info,
				       size_t sz);
/* Element i, or NULL (errno ENOENT) when i is out of range. */
MERCURY_API const struct mercury_model_module *mercury_model_module(
	const struct mercury_model *m, size_t i);
MERCURY_API const struct mercury_model_call *mercury_model_call(
	const struct mercury_model *m, size_t i);
MERCURY_API const struct mercury_model_param *mercury_model_param(
	const struct mercury_model *m, size_t i);
MERCURY_API const struct mercury_model_edge *mercury_model_edge(
	const struct mercury_model *m, size_t i);
MERCURY_API const struct mercury_model_node *mercury_model_node(
	const struct mercury_model *m, size_t i);
/* Index of the module called name, or MERCURY_MODEL_NONE. */
MERCURY_API size_t mercury_model_find_module(const struct mercury_model *m,
					     const char *name);
/*
 * The ownership rule for any module or dotted path: the first forward
 * call that needs it (see above); MERCURY_MODEL_NONE only without calls.
 */
MERCURY_API size_t mercury_model_first_use(const struct mercury_model *m,
					   const char *name);

/*
 * Change parameter i's numel (and so its bytes) in an h200 model, and
 * write the file back with that change, every other key as it was read
 * (mercury-ps scales a profile to what its data plane sends). PipeDream
 * models: -EOPNOTSUPP.
 */
MERCURY_API int mercury_model_set_numel(struct mercury_model *m, size_t i,
					uint64_t numel);
MERCURY_API int mercury_model_save(const struct mercury_model *m,
				   const char *path);

/* Bytes per element of a torch dtype name ("float32", "torch.bfloat16"). */
MERCURY_API int mercury_dtype_size(const char *dtype);

/* ---- sizes and rates ------------------------------------------------------ */

/*
 * Sizes, as tc reads them (iproute2's get_size()): a whole number and an
 * optional unit, case-insensitive: b; k/kb, m/mb, g/gb are binary (1024)
 * multiples of bytes; kbit, mbit, gbit binary multiples of bits. 64k is
 * 65536 bytes everywhere in Mercury. Unlike tc, fractions, a sign, values
 * above max and sizes that are not whole bytes are -EINVAL / -ERANGE
 * instead of rounded or truncated.
 */
MERCURY_API int mercury_parse_size(const char *s, uint64_t max,
				   uint64_t *bytes);
/*
 * Rates are another unit, decimal like tc's rates: kbit, mbit, gbit, tbit
 * (and k, m, g, t alone) are powers of 1000 bits per second, kibit, mibit,
 * gibit, tibit powers of 1024; bps, kbps, mbps, gbps, tbps are bytes per
 * second (tc's meaning). A number without a unit is bare_bits bits per
 * second: 1 where a tool documents bit/s (mercury-sim), 8 for bytes per
 * second (tc's own default, mercury-place's --bandwidth). A number may have
 * a fraction or an exponent (2.5gbit, 1e9). Result in bits per second,
 * > 0 and finite.
 */
MERCURY_API int mercury_parse_rate(const char *s, double bare_bits,
				   double *bps);

/* ---- framing ------------------------------------------------------------ */

#define MERCURY_FRAME_MAGIC	0x4d524359u	/* "MRCY" */
#define MERCURY_FRAME_VERSION	1
#define MERCURY_FRAME_HDR_LEN	32

/*
 * Wire layout, network byte order, 32 bytes:
 *   0 magic u32 | 4 version u8 | 5 flags u8 (0) | 6 tag u16 |
 *   8 tensor_id u32 | 12 chunk_len u32 | 16 total_len u64 | 24 offset u64
 * followed by chunk_len bytes of tensor[offset, offset + chunk_len).
 */
struct mercury_frame {
	uint32_t tensor_id;
	uint16_t tag;
	uint64_t total_len;		/* bytes of the whole tensor */
	uint64_t offset;		/* of this chunk in the tensor */
	uint32_t chunk_len;		/* payload bytes after the header */
};

/* Returns MERCURY_FRAME_HDR_LEN; -ENOSPC if len is too small. */
MERCURY_API int mercury_frame_encode(const struct mercury_frame *f, void *buf,
				     size_t len);
/*
 * Returns MERCURY_FRAME_HDR_LEN; -EAGAIN if len is too small, -EBADMSG bad
 * magic or flags, -EPROTONOSUPPORT other version, -EINVAL chunk outside
 * the tensor.
 */
MERCURY_API int mercury_frame_decode(const void *buf, size_t len,
				     struct mercury_frame *f);

/* ---- does the tagging fit the qdisc? (LIBMERCURY_0.3) ------------------ */

/*
 * A plan or a tagger and the mercury qdisc it feeds that disagree fail
 * silently: a tagger writing SO_MARK into a qdisc reading DSCP leaves
 * every packet untagged, a tag the masks cut off becomes another tag, a
 * tag above the qdisc's levels lands on its least urgent tagged level.
 * The comparison below is the one rule, used by mercury_chanset_new()
 * (see qdisc_check) and by mercuryctl check.
 */

/*
 * A mercury qdisc's options, as the kernel reports them in TCA_OPTIONS
 * (the attributes of <linux/mercury.h>, numbered and typed alike). set
 * has bit (1u << TCA_MERCURY_x) of each attribute read.
 */
struct mercury_qdisc_opts {
	uint32_t set;			/* 1u << TCA_MERCURY_* of each read */
	uint32_t levels;		/* tagged levels: tags 1..levels */
	uint32_t mask;			/* tag = (field >> shift) & mask */
	uint32_t flows;			/* flow buckets */
	uint32_t limit;			/* packets */
	uint32_t memory_limit;		/* bytes of skb truesize */
	uint32_t quantum;		/* bytes per round */
	uint8_t source;			/* enum mercury_tag_source */
	uint8_t shift;			/* bits */
	uint8_t untagged;		/* 0 first, 1 last */
	uint8_t share;			/* untagged share, percent */
	uint8_t flow_order;		/* 0 or 1 */
	uint8_t bypass;			/* 0 or 1 */
	uint32_t flow_limit;		/* packets per flow, 0: no limit */
};

/*
 * The one decoder of a mercury qdisc's TCA_OPTIONS: attrs and len are
 * the attribute's payload (the nested attributes). Each attribute
 * present overwrites its field and sets its bit in o->set; absent ones
 * leave o as it was (start from the kernel's defaults). sz is
 * sizeof(*o) as the caller knows it. -EINVAL for malformed attributes.
 */
MERCURY_API int mercury_qdisc_opts_decode(const void *attrs, size_t len,
					  struct mercury_qdisc_opts *o,
					  size_t sz);

/*
 * The attributes of o->set's options, for a TCA_OPTIONS nest (what
 * mercuryctl sends). Returns the bytes written; -ENOSPC if len is short.
 */
MERCURY_API int mercury_qdisc_opts_encode(const struct mercury_qdisc_opts *o,
					  void *buf, size_t len);

/*
 * The options a new qdisc has when none is given: the kernel's defaults
 * (<linux/mercury.h>, TC_MERCURY_DEF_*), o->set 0. sz as for decode.
 */
MERCURY_API void mercury_qdisc_opts_defaults(struct mercury_qdisc_opts *o,
					     size_t sz);

/* What mercury_qdisc_opts_parse() checks besides each word's syntax. */
enum {
	/*
	 * Each value within the range the kernel's netlink policy allows
	 * (levels 1..65534, quantum 256..1M, ...), so a bad value is named
	 * before anything is sent. Without it, a value is refused only when
	 * its field cannot hold it (shift 300) and the kernel judges the
	 * rest, as tc leaves it to the kernel.
	 */
	MERCURY_QDISC_PARSE_RANGES = 1u << 0,
};

/*
 * The one grammar of the qdisc's options: the words "tc qdisc add ...
 * mercury" takes (levels N, tag mark|priority|dscp, shift, mask,
 * untagged first|last, untagged_share, flow_order on|off, flows, limit,
 * memory_limit SIZE, quantum SIZE, bypass on|off), spelled and read as
 * tc reads them: numbers decimal, 0x hex or 0 octal; sizes with tc's
 * units (b; k/kb, m/mb, g/gb: 1024; kbit, mbit, gbit) and a decimal
 * fraction when the product is whole bytes (1.5m). argv holds argc
 * words, NAME VALUE pairs. o is cleared, then each option given is set
 * with its bit in o->set (a later word wins). Errors: -EINVAL naming the
 * option and the value; -ENOENT an unknown option; -ENODATA the last
 * option has no value. tc's plugin and mercuryctl both parse with it.
 */
MERCURY_API int mercury_qdisc_opts_parse(int argc, char *const argv[],
					 unsigned int flags,
					 struct mercury_qdisc_opts *o,
					 size_t sz);

/*
 * "NAME VALUE" of one option (attr: TCA_MERCURY_*) as tc prints it and
 * mercury_qdisc_opts_parse() reads it back ("memory_limit 32Mb", "tag
 * dscp", "mask 0xffff"). Returns the length snprintf() would write;
 * -EINVAL for an unknown attr.
 */
MERCURY_API int mercury_qdisc_opt_format(const struct mercury_qdisc_opts *o,
					 unsigned int attr, char *buf,
					 size_t len);

/* One mercury qdisc: where it sits and its options. */
struct mercury_qdisc {
	char dev[16];			/* device name (IFNAMSIZ) */
	int ifindex;
	uint32_t handle;		/* major:0 */
	uint32_t parent;		/* 0xffffffff: root */
	struct mercury_qdisc_opts opts;
};

/* What is compared with the qdisc, for the messages' words and hints. */
enum mercury_fit_subject {
	MERCURY_FIT_PLAN = 0,		/* a plan file (mercuryctl check) */
	MERCURY_FIT_CHANSET = 1,	/* a channel set's tagger and classes */
};

typedef void (*mercury_problem_fn)(const char *msg, void *ctx);

/*
 * Compare the tags of pi (source, shift, mask; max_tag: the highest tag
 * sent, 0 if unknown, which skips the per-tag rules) with qdisc q. For
 * each problem, fn gets one line starting "mercury H: on DEV: ", in this
 * order: the tag source differs (everything untagged), the shift differs,
 * the first tag that the two masks cut off, a DSCP tag shifted past the
 * six DSCP bits, tags above the qdisc's levels. Returns the number of
 * problems (0: the tags arrive as sent), -EINVAL for a NULL argument.
 * Pure: no system call, and nothing logged but that -EINVAL.
 */
MERCURY_API int mercury_qdisc_fit(const struct mercury_qdisc *q,
				  const struct mercury_plan_info *pi,
				  enum mercury_fit_subject who,
				  mercury_problem_fn fn, void *ctx);

/* ---- priority channels (sender) ----------------------------------------- */

enum mercury_outq_mode {
	/* bytes still queued = SIOCOUTQ (TCP: not yet acked by the peer) */
	MERCURY_OUTQ_KERNEL = 0,
	/* the caller reports consumed bytes with mercury_chanset_drained() */
	MERCURY_OUTQ_MANUAL = 1,
};

/* How mercury_chanset_new() and _connect() check the qdiscs they feed. */
enum mercury_qdisc_check {
	/*
	 * Each problem logged at MERCURY_LOG_WARN; the set is made. With no
	 * log callback installed, each goes to stderr as one line
	 * ("libmercury: chanset: ..."); the notes (MERCURY_LOG_INFO) only
	 * to a callback.
	 */
	MERCURY_QDISC_CHECK_WARN = 0,
	MERCURY_QDISC_CHECK_OFF = 1,	/* no look at the qdiscs */
	/*
	 * A problem found is -EINVAL naming the first (the others are
	 * logged): no set is made, the caller's fds are left alone.
	 */
	MERCURY_QDISC_CHECK_STRICT = 2,
};

struct mercury_chanset_opts {
	size_t sz;
	const struct mercury_tag_opts *tag_opts; /* NULL: tagger defaults */
	/* n preferred tags, one per connection (ties go to class == tag) */
	const unsigned int *classes;
	size_t chunk_size;		/* payload bytes per frame; 0: 256 KiB */
	enum mercury_outq_mode outq;
	bool own_fds;			/* close the fds in mercury_chanset_free */
	bool no_tag;			/* frame and pick, but never tag sockets */
	/*
	 * Longest wait, ms, for connect, for a connection to take more bytes,
	 * and for one to become eligible; then -ETIMEDOUT. 0: 60000.
	 */
	int timeout_ms;
	/*
	 * The sender's in-flight cap (LIBMERCURY_0.3): a frame the set
	 * places goes to a connection only while that connection holds
	 * fewer bytes in the kernel (see outq). An urgent frame that finds
	 * every connection busy then waits behind at most this many bytes.
	 * 0: no cap (frames go as fast as the sockets take them).
	 */
	uint64_t inflight;
	/*
	 * LIBMERCURY_0.3: compare the tagger (tag_opts, and classes as the
	 * tags sent) with the mercury qdisc(s) on the device each TCP
	 * connection leaves by, in this process's network namespace (see
	 * mercury_qdisc_fit()). Never with no_tag, which tags nothing.
	 */
	enum mercury_qdisc_check qdisc_check;
	size_t :0;
};
#define mercury_chanset_opts__last_field qdisc_check

struct mercury_chanset;

/*
 * A channel set of n connections keeps an urgent tensor from queueing
 * behind less urgent bytes only while at most n distinct tags are in
 * flight: give it a plan with no more levels than connections
 * (mercury_plan_opts.levels = n; with SO_PRIORITY, min(n, 6)). In
 * backward order every tensor is more urgent than those queued; with more
 * levels than connections the chunks find no suitable connection and wait
 * or queue behind less urgent bytes (a 161-tag plan over 8 connections
 * ordered worse than pfifo). See Documentation/tagger.md.
 */
MERCURY_API int mercury_chanset_new(const int *fds, size_t n,
				    const struct mercury_chanset_opts *opts,
				    struct mercury_chanset **out);
/*
 * The qdisc check (opts.qdisc_check) looks at every connected TCP socket
 * of the set: a device with no mercury qdisc (loopback; a container whose
 * qdisc sits on the host's NIC) is one MERCURY_LOG_INFO line, and so is a
 * check that cannot run (no netlink socket, no permission): neither is an
 * error, in strict mode either. Other sockets (AF_UNIX) are not checked.
 */
/* Open n TCP connections to host:port (the set owns them). */
MERCURY_API int mercury_chanset_connect(const char *host, const char *port,
					size_t n,
					const struct mercury_chanset_opts *opts,
					struct mercury_chanset **out);
MERCURY_API void mercury_chanset_free(struct mercury_chanset *cs);
MERCURY_API size_t mercury_chanset_count(const struct mercury_chanset *cs);
MERCURY_API int mercury_chanset_fd(const struct mercury_chanset *cs, size_t i);

/*
 * Linux takes SO_MARK / SO_PRIORITY when TCP *transmits* a segment, not
 * when the program writes: tagging a socket re-tags the bytes still unsent
 * in its queue. A connection is therefore eligible for the next bytes of
 * tag only if (a) none of its queued (unacknowledged) bytes is less urgent
 * than tag and (b) none of its unsent bytes (SIOCOUTQNSD; in manual mode:
 * all unconsumed bytes) has another tag. Among eligible ones the pick is
 * the best fit (the least urgent such queue, so idle connections stay free
 * for urgent tensors). With none eligible: the least loaded connection that
 * satisfies (b) (an inversion: the bytes wait behind less urgent ones).
 * Returns the index. Does not send.
 *
 * A channel set works best with at least as many connections as distinct
 * tags in flight: squeeze plans to the connection count
 * (mercury_plan_opts.levels).
 *
 * mercury_chanset_try_pick(): as above, but -EAGAIN (errno EAGAIN, no
 * error message) when every connection holds unsent bytes of another tag,
 * i.e. any choice would re-tag them; retry once bytes have left (kernel
 * mode) or after mercury_chanset_drained() (manual mode). Callers that tag
 * and write themselves should use this one.
 *
 * mercury_chanset_pick() keeps its original contract of always returning
 * an index: in that case it returns the least bad connection (one whose
 * foreign unsent bytes are all less urgent than tag, so tagging would
 * promote rather than demote them; then the fewest such bytes; then the
 * lower index), and tagging it DOES re-tag those bytes.
 */
MERCURY_API int mercury_chanset_pick(struct mercury_chanset *cs,
				     unsigned int tag);
MERCURY_API int mercury_chanset_try_pick(struct mercury_chanset *cs,
					 unsigned int tag);
/* Record bytes of tag handed to the kernel on connection i by the caller. */
MERCURY_API int mercury_chanset_commit(struct mercury_chanset *cs, size_t i,
				       unsigned int tag, uint64_t bytes);
/* MERCURY_OUTQ_MANUAL: the peer consumed bytes from connection i. */
MERCURY_API int mercury_chanset_drained(struct mercury_chanset *cs, size_t i,
					uint64_t bytes);
/* Bytes still queued on i and the least urgent tag among them (0: none). */
MERCURY_API int mercury_chanset_queued(struct mercury_chanset *cs, size_t i,
				       uint64_t *bytes, unsigned int *worst);

/*
 * The sender (LIBMERCURY_0.3): the one frame writer of Mercury, for event
 * loops. mercury_chanset_queue() queues a frame and returns at once; the
 * set keeps frames it places in a priority queue (smallest order first,
 * ties in queue order) and hands the top one to the connection that
 * mercury_chanset_try_pick() names for its tag, once that connection has
 * no frame half written (frames never interleave on a stream) and holds
 * less than opts.inflight bytes in the kernel. A pinned frame skips the
 * queue and the cap: it goes to its connection after the frames given to
 * it before (FIFO: the caller chose the connection). Each frame's socket
 * is tagged (unless no_tag, or opts.no_tag) right before the frame's
 * first byte enters it, since the kernel reads the tag when TCP builds
 * segments, and the set records what the kernel took (as
 * mercury_chanset_commit()).
 * Writes never block (MSG_DONTWAIT) nor raise SIGPIPE (MSG_NOSIGNAL), and
 * a partial write resumes where it stopped. At the cap, the set looks
 * again after the time TCP's delivery rate gives for the excess to drain;
 * a look that finds the connection still at the cap (a receiver slower
 * than the link) doubles the next wait, up to 10 ms, so a slow peer does
 * not make the sender spin (stats.cap_blocks counts the waits).
 *
 * The caller drives it: mercury_chanset_progress() whenever a connection
 * polls writable for mercury_chanset_events(), when mercury_chanset_wake()
 * is due, and after queueing.
 */
struct mercury_tx_frame {
	size_t sz;			/* sizeof(struct mercury_tx_frame) */
	uint32_t tensor_id;
	unsigned int tag;		/* header tag, and the socket's (<= 65535) */
	uint64_t total_len;		/* bytes of the whole tensor */
	uint64_t offset;		/* of this chunk in the tensor */
	/* chunk_len payload bytes; the caller keeps them until written */
	const void *data;
	uint32_t chunk_len;
	uint64_t order;			/* queue position: smaller first */
	bool pin;			/* go to connection conn, not the pick */
	size_t conn;
	/*
	 * Leave the socket's tag as it is (a hello before any tagged byte);
	 * the set still counts the bytes as tag's when it picks.
	 */
	bool no_tag;
	size_t :0;
};
#define mercury_tx_frame__last_field no_tag

MERCURY_API int mercury_chanset_queue(struct mercury_chanset *cs,
				      const struct mercury_tx_frame *f);
/*
 * Write what may go now: resume half-written frames, then place queued
 * ones while they may go. now_ns: CLOCK_MONOTONIC nanoseconds, 0 to read
 * the clock. 1 if bytes were written, 0 if none could be, else a negative
 * errno (-EPIPE / -ECONNRESET: the peer closed; *failed, if failed is not
 * NULL, gets the connection whose write failed).
 */
MERCURY_API int mercury_chanset_progress(struct mercury_chanset *cs,
					 uint64_t now_ns, size_t *failed);
/* POLLOUT if connection i has frame bytes waiting for buffer space, else 0. */
MERCURY_API int mercury_chanset_events(const struct mercury_chanset *cs,
				       size_t i);
/*
 * When (CLOCK_MONOTONIC ns) queued frames wait for something no poll
 * event reports: bytes leaving a connection that is at the cap (estimated
 * from TCP's delivery rate) or unsent bytes of another tag leaving
 * (retried every millisecond). Call progress then; 0: nothing waits so.
 */
MERCURY_API uint64_t mercury_chanset_wake(const struct mercury_chanset *cs);
/* Frames queued or half written: not yet completely in the kernel. */
MERCURY_API size_t mercury_chanset_pending(const struct mercury_chanset *cs);

/*
 * Send a whole tensor and return when it is written: split into chunks of
 * opts.chunk_size, queued with order = tag (0: last), and the sender
 * driven (poll()ing the connections) until they are all in the kernel.
 * 0 or a negative errno; no progress for timeout_ms is -ETIMEDOUT. On an
 * error the tensor's chunks not yet written are dropped (a connection
 * where one was half written is unusable afterwards: -EIO).
 *
 * It never re-tags unsent bytes of another tag. When every connection holds
 * some (possible only for the first chunk), it waits in kernel mode until
 * one connection's unsent bytes have left (so the peer must keep reading),
 * counted in stats.waits and stats.wait_ns; in manual mode it returns
 * -EAGAIN having written nothing: report drained bytes and call it again.
 */
MERCURY_API int mercury_chanset_send(struct mercury_chanset *cs,
				     uint32_t tensor_id, unsigned int tag,
				     const void *buf, uint64_t len);

struct mercury_chanset_stats {
	uint64_t chunks;		/* frames sent */
	uint64_t bytes;			/* payload bytes sent */
	uint64_t inversions;		/* chunks queued behind less urgent
					 * bytes because no connection fit
					 */
	uint64_t tag_syscalls;		/* setsockopt() calls */
	/*
	 * Tensors whose first chunk found unsent bytes of another tag on every
	 * connection (send() waited, or returned -EAGAIN in manual mode).
	 */
	uint64_t waits;
	uint64_t wait_ns;		/* time send() spent in those waits */
	/* LIBMERCURY_0.3: the sender */
	uint64_t placed;		/* frames the set chose a connection for */
	uint64_t picks;			/* try_pick() calls it made */
	uint64_t queries;		/* SIOCOUTQ readings for the cap */
	uint64_t cap_blocks;		/* stops: the connection was at the cap */
	uint64_t eagain_blocks;		/* stops: every connection held unsent
					 * bytes of another tag */
	uint64_t wire_bytes;		/* header and payload bytes written */
};
MERCURY_API int mercury_chanset_get_stats(const struct mercury_chanset *cs,
					  struct mercury_chanset_stats *st,
					  size_t sz);

/* ---- reassembly (receiver) ---------------------------------------------- */

struct mercury_rx_opts {
	size_t sz;
	uint64_t max_tensor_bytes;	/* larger totals are refused; 0: 4 GiB */
	size_t max_pending;		/* tensors in progress; 0: 65536 */
	/*
	 * Bytes of tensors in progress plus completed ones not yet taken by
	 * mercury_rx_next(); a header that would exceed it is -ENOBUFS.
	 * 0: 8 GiB.
	 */
	uint64_t max_pending_bytes;
	/*
	 * LIBMERCURY_0.3: the caller's destinations. With dest set, payload
	 * is never copied: once a frame's header has passed the checks
	 * below, dest() says where its chunk_len bytes go (*dst; ignored for
	 * an empty chunk), and mercury_rx_read() reads them straight there.
	 * A negative return refuses the frame: feed/read return it. When
	 * the payload is in, frame_done() (may be NULL) is told, with
	 * tensor_done when the tensor's every byte has now arrived; a
	 * negative return is returned by feed/read; a positive one stops
	 * mercury_rx_read() right there, the next frame's bytes still in
	 * the socket, so the caller may act before it is consumed (feed,
	 * which was given the bytes already, goes on). Tensors are
	 * the caller's: none is held for mercury_rx_next(), and
	 * max_pending_bytes counts none of their bytes.
	 */
	int (*dest)(void *ctx, size_t conn, const struct mercury_frame *f,
		    void **dst);
	int (*frame_done)(void *ctx, size_t conn, const struct mercury_frame *f,
			  void *data, bool tensor_done);
	void *ctx;
	size_t :0;
};
#define mercury_rx_opts__last_field ctx

struct mercury_tensor {
	uint32_t id;
	uint16_t tag;
	uint64_t len;
	void *data;			/* malloc()ed; mercury_tensor_release() */
};

struct mercury_rx;

MERCURY_API int mercury_rx_new(const struct mercury_rx_opts *opts,
			       struct mercury_rx **out);
/* Frees tensors not yet taken; does not close fds. */
MERCURY_API void mercury_rx_free(struct mercury_rx *rx);
/* Add a connection (fd may be -1 for mercury_rx_feed only). Returns index. */
MERCURY_API int mercury_rx_add(struct mercury_rx *rx, int fd);
/*
 * Give bytes received on connection conn, in stream order, split anyhow.
 * Returns the number of tensors this call completed.
 */
MERCURY_API int mercury_rx_feed(struct mercury_rx *rx, size_t conn,
				const void *buf, size_t len);
/*
 * One read() on connection conn, then feed. Tensors completed (>= 0);
 * -EAGAIN nothing to read, -ENOTCONN peer closed between frames,
 * -ECONNRESET peer closed inside a frame.
 *
 * With opts.dest it reads headers and payloads separately (each payload
 * into its destination, never a byte of the next frame), up to 64 reads
 * while bytes keep coming, and returns the frames completed.
 */
MERCURY_API int mercury_rx_read(struct mercury_rx *rx, size_t conn);
/*
 * poll() the open connections up to timeout_ms and read the ready ones:
 * one read of at most 64 KiB per ready connection, round-robin, starting
 * after the connection served first by the previous call (so none is
 * always first). Tensors completed (0 on timeout); -ENOTCONN once every
 * one is closed.
 *
 * Order guarantees: tensors complete in the order this process reads their
 * last byte. On one connection that is the sender's write order. Across
 * connections it is the read order, which follows arrival order only
 * while the receiver keeps up: after a stall, tensors waiting on several
 * connections complete interleaved, one piece per connection per call,
 * not by arrival time. For arrival order, timestamp reads yourself
 * (SO_TIMESTAMPNS) and use mercury_rx_feed().
 */
MERCURY_API int mercury_rx_poll(struct mercury_rx *rx, int timeout_ms);
/* Take the oldest completed tensor (completion order); -EAGAIN if none. */
MERCURY_API int mercury_rx_next(struct mercury_rx *rx,
				struct mercury_tensor *t);
MERCURY_API void mercury_tensor_release(struct mercury_tensor *t);

struct mercury_rx_conn_stats {
	uint64_t bytes;			/* received on the connection */
	uint64_t frames;		/* frames completed */
	bool closed;			/* the peer closed it */
};
/* LIBMERCURY_0.3: counters of connection conn. */
MERCURY_API int mercury_rx_conn_stats(const struct mercury_rx *rx, size_t conn,
				      struct mercury_rx_conn_stats *st,
				      size_t sz);

#ifdef __cplusplus
}
#endif

#endif /* __MERCURY_MERCURY_H */
