// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Priority plans: tensor name -> tag.
 *
 * One plan format, written only here (mercury_plan_save*) and read here:
 * {"mercury_plan": 1, "levels", "tag_source", "shift", "mask", ...,
 * "priorities": [{"tensor", "tag", "bytes", "src", "dst"}]}. Other
 * top-level keys (the solver's placement, lower bound, pipeline) are kept
 * as they are and written back, so a tool may add its own sections without
 * writing plans itself. Plans without "mercury_plan" are format 0, the
 * solver's plans before libmercury 0.2: they still load, with levels = the
 * highest tag and the tagger's default settings.
 *
 * Plans come from three places: a file, the builder (mercury_plan_new(),
 * mercury_plan_add()), and a default derived from an h200 profile. The
 * default follows the forward pass: the gradient
 * the next forward pass needs first is the most urgent. Tags are dense per
 * tensor (like the solver's), ordered by the first forward call of the
 * tensor's module, and inside one module by grad_ready order reversed (the
 * last gradient of a module to become ready belongs to its first
 * computation). Real profiles also hold tensors whose module is null
 * (vit_b_16's attention in_proj_weight, class_token) or never appears in
 * forward_calls (its out_proj, used through F.multi_head_attention_forward):
 * such a tensor takes the first call of the nearest enclosing module that
 * has called descendants (encoder_layer_0 for its attention weights, the
 * root for class_token). Only if forward_calls is empty does a tensor stay
 * unplaced; those come after all others, in reversed grad_ready order.
 *
 * Squeezing to N levels (at build, at load, or mercury_plan_set_levels())
 * is one rule everywhere: the distinct tags ranked 1..n in ascending order,
 * rank r becomes 1 + (r - 1) * N / n, so order is kept and ties stay ties.
 *
 * Lookup is an open-addressing hash table (FNV-1a, linear probing, load
 * factor <= 1/2) of indexes into the entry array, so the plan can also be
 * walked in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "internal.h"

/*
 * Bytes of one plan entry: at most 2^53, what any JSON reader holds
 * exactly (the builder and the loader both check it).
 */
#define MAX_PLAN_BYTES (1LL << 53)

struct plan_entry {
	char *tensor;
	char *src;
	char *dst;
	uint64_t bytes;
	unsigned int tag;
};

struct mercury_plan {
	struct plan_entry *e;		/* entries in file / tag order */
	size_t n;
	size_t cap;			/* entries allocated */
	uint32_t *slots;		/* hash slots: index + 1, 0 = empty */
	size_t nslots;			/* power of two */
	unsigned int max_tag;
	unsigned int levels;		/* declared; 0: max_tag */
	unsigned int format;		/* as read; MERCURY_PLAN_FORMAT if built */
	int source;			/* enum mercury_tag_source */
	unsigned int shift;		/* bits */
	uint32_t mask;
	struct json_object *extra;	/* other top-level keys, or NULL */
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static void plan_free_entries(struct mercury_plan *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->e[i].tensor);
		free(p->e[i].src);
		free(p->e[i].dst);
	}
	free(p->e);
}

MERCURY_API void mercury_plan_free(struct mercury_plan *p)
{
	if (!p)
		return;
	plan_free_entries(p);
	free(p->slots);
	json_object_put(p->extra);
	free(p);
}

static const struct plan_entry *plan_find(const struct mercury_plan *p,
					  const char *name)
{
	size_t m, i;

	if (!p->nslots)
		return NULL;
	m = p->nslots - 1;
	for (i = fnv1a(name) & m; p->slots[i]; i = (i + 1) & m)
		if (!strcmp(p->e[p->slots[i] - 1].tensor, name))
			return &p->e[p->slots[i] - 1];
	return NULL;
}

static void plan_slot_put(struct mercury_plan *p, size_t i)
{
	size_t m = p->nslots - 1, j;

	for (j = fnv1a(p->e[i].tensor) & m; p->slots[j]; j = (j + 1) & m)
		;
	p->slots[j] = i + 1;
}

/* An empty table of at least 2 * want slots; the old one is kept on error. */
static int plan_alloc_slots(struct mercury_plan *p, size_t want)
{
	size_t ns = 16;
	uint32_t *slots;

	while (ns < 2 * want)
		ns *= 2;
	slots = calloc(ns, sizeof(*slots));
	if (!slots)
		return mercury_err(ENOMEM, "plan: out of memory");
	free(p->slots);
	p->slots = slots;
	p->nslots = ns;
	return 0;
}

/* Room for want entries in the index, rehashing the ones it holds. */
static int plan_reserve_slots(struct mercury_plan *p, size_t want)
{
	size_t i;
	int err;

	if (p->nslots >= 2 * want)
		return 0;
	err = plan_alloc_slots(p, want);
	for (i = 0; !err && i < p->n; i++)
		plan_slot_put(p, i);
	return err;
}

/* Build the index; a name given twice is an error (which tag would win?). */
static int plan_index(struct mercury_plan *p, const char *what)
{
	size_t i;
	int err;

	err = plan_alloc_slots(p, p->n);
	if (err)
		return err;
	p->max_tag = 0;
	for (i = 0; i < p->n; i++) {
		if (plan_find(p, p->e[i].tensor))
			return mercury_err(EINVAL,
					   "%s: priorities[%zu]: tensor \"%s\" appears twice",
					   what, i, p->e[i].tensor);
		plan_slot_put(p, i);
		if (p->e[i].tag > p->max_tag)
			p->max_tag = p->e[i].tag;
	}
	return 0;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return (x > y) - (x < y);
}

/*
 * The tag rule's squeeze, the only one in Mercury (every tool sends a
 * plan through mercury_plan_set_levels() or the levels of the load and
 * profile opts, and reads tags with mercury_plan_wire_tag(); a builder of
 * more than MERCURY_MAX_TAG tensors calls it on its order first): tags
 * that fit go on the wire as they are; otherwise the distinct tags,
 * ranked 1..n in ascending order, become the ranks themselves when
 * n <= levels (dense tags), else rank r becomes 1 + (r - 1) * levels / n.
 */
MERCURY_API int mercury_plan_squeeze_tags(unsigned int *tags, size_t n,
					  unsigned int levels)
{
	unsigned int *t, *hit, top = 0, r;
	size_t i, d = 0;

	if (!tags && n)
		return mercury_err(EINVAL, "squeeze: NULL argument");
	if (levels < 1 || levels > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "squeeze: levels %u outside 1..%u",
				   levels, MERCURY_MAX_TAG);
	for (i = 0; i < n; i++) {
		if (!tags[i])
			return mercury_err(EINVAL,
					   "squeeze: tag 0 at %zu (tags count from 1)",
					   i);
		if (tags[i] > top)
			top = tags[i];
	}
	if (top <= levels)
		return 0;
	t = malloc(n * sizeof(*t));
	if (!t)
		return mercury_err(ENOMEM, "squeeze: out of memory");
	memcpy(t, tags, n * sizeof(*t));
	qsort(t, n, sizeof(*t), cmp_uint);
	for (i = 0; i < n; i++)
		if (!d || t[d - 1] != t[i])
			t[d++] = t[i];
	for (i = 0; i < n; i++) {
		hit = bsearch(&tags[i], t, d, sizeof(*t), cmp_uint);
		r = hit - t + 1;
		tags[i] = d <= levels ? r :
			1 + (unsigned int)((uint64_t)(r - 1) * levels / d);
	}
	free(t);
	return 0;
}

/* The squeeze above on a plan's tags (callers squeeze only above levels). */
static int plan_squeeze(struct mercury_plan *p, unsigned int levels)
{
	unsigned int *t;
	size_t i;
	int err;

	if (!p->n)
		return 0;
	t = malloc(p->n * sizeof(*t));
	if (!t)
		return mercury_err(ENOMEM, "plan: out of memory");
	for (i = 0; i < p->n; i++)
		t[i] = p->e[i].tag;
	err = mercury_plan_squeeze_tags(t, p->n, levels);
	if (!err) {
		p->max_tag = 0;
		for (i = 0; i < p->n; i++) {
			p->e[i].tag = t[i];
			if (t[i] > p->max_tag)
				p->max_tag = t[i];
		}
	}
	free(t);
	return err;
}

static char *xstrdup(const char *s)
{
	return strdup(s ? s : "");
}

/* Read a whole file; json-c's own reader cannot say where parsing failed. */
int mercury_read_file(const char *path, char **buf, size_t *len)
{
	size_t cap = 1 << 16, n = 0, r;
	char *b = NULL, *nb;
	FILE *f;

	errno = 0;
	f = fopen(path, "rb");
	if (!f)
		return mercury_err(errno, "%s: %s", path, strerror(errno));
	for (;;) {
		nb = realloc(b, cap + 1);
		if (!nb) {
			fclose(f);
			free(b);
			return mercury_err(ENOMEM, "%s: out of memory", path);
		}
		b = nb;
		r = fread(b + n, 1, cap - n, f);
		n += r;
		if (n < cap)
			break;
		if (cap >= MERCURY_MAX_INPUT) {
			fclose(f);
			free(b);
			return mercury_err(EFBIG, "%s: longer than %u MiB: not a plan or profile",
					   path, MERCURY_MAX_INPUT >> 20);
		}
		cap *= 2;
	}
	if (ferror(f)) {
		int err = errno ? errno : EIO;	/* EISDIR for a directory */

		fclose(f);
		free(b);
		return mercury_err(err, "%s: %s", path, strerror(err));
	}
	fclose(f);
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int mercury_parse_json(const char *what, const char *buf, size_t len,
		      struct json_object **out)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;
	size_t line = 1, i, off;

	if (len > INT32_MAX)
		return mercury_err(EFBIG, "%s: too large", what);
	/* json-c waits for more; say what it is, not "truncated" */
	for (i = 0; i < len && (buf[i] == ' ' || buf[i] == '\t' ||
				buf[i] == '\r' || buf[i] == '\n'); i++)
		;
	if (i == len)
		return mercury_err(EINVAL, "%s: empty: no JSON value", what);
	tok = json_tokener_new();
	if (!tok)
		return mercury_err(ENOMEM, "%s: out of memory", what);
	obj = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	off = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr == json_tokener_continue)
		return mercury_err(EINVAL, "%s: truncated JSON", what);
	if (jerr != json_tokener_success || !obj) {
		for (i = 0; i < off && i < len; i++)
			line += buf[i] == '\n';
		return mercury_err(EINVAL, "%s: line %zu: invalid JSON: %s", what,
				   line, json_tokener_error_desc(jerr));
	}
	for (i = off; i < len; i++) {
		if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\t' &&
		    buf[i] != '\r') {
			json_object_put(obj);
			return mercury_err(EINVAL,
					   "%s: trailing data after the JSON value",
					   what);
		}
	}
	*out = obj;
	return 0;
}

/* Optional string member: absent is "", present must be a string. */
static int opt_string(const char *what, size_t i, struct json_object *o,
		      const char *key, char **out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v) {
		*out = xstrdup("");
	} else {
		if (!json_object_is_type(v, json_type_string))
			return mercury_err(EINVAL,
					   "%s: priorities[%zu]: \"%s\" must be a string",
					   what, i, key);
		*out = xstrdup(json_object_get_string(v));
	}
	return *out ? 0 : mercury_err(ENOMEM, "plan: out of memory");
}

/* Keys of the format itself; every other top-level key is an extra. */
static const char *const plan_keys[] = {
	"mercury_plan", "levels", "tag_source", "shift", "mask", "priorities",
};

static bool plan_key_reserved(const char *key)
{
	size_t i;

	for (i = 0; i < sizeof(plan_keys) / sizeof(plan_keys[0]); i++)
		if (!strcmp(key, plan_keys[i]))
			return true;
	return false;
}

/* A tag source's name in plans, tc and messages; NULL: no such source. */
const char *mercury_source_name(int source)
{
	switch (source) {
	case MERCURY_TAG_MARK:
		return "mark";
	case MERCURY_TAG_PRIORITY:
		return "priority";
	case MERCURY_TAG_DSCP:
		return "dscp";
	}
	return NULL;
}

static uint32_t default_mask(int source)
{
	return source == MERCURY_TAG_DSCP ? MERCURY_DSCP_MASK : MERCURY_DEFAULT_MASK;
}

/* Optional integer member in lo..hi; absent leaves *out alone. */
static int opt_uint(const char *what, struct json_object *root,
		    const char *key, int64_t lo, int64_t hi, int64_t *out)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(root, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return mercury_err(EINVAL, "%s: \"%s\" must be an integer", what,
				   key);
	x = json_object_get_int64(v);
	if (x < lo || x > hi)
		return mercury_err(ERANGE, "%s: \"%s\" %lld outside %lld..%lld",
				   what, key, (long long)x, (long long)lo,
				   (long long)hi);
	*out = x;
	return 0;
}

/* Format 1 header: levels and the tagger's settings. */
static int plan_header_from_json(const char *what, struct json_object *root,
				 struct mercury_plan *p, int64_t *levels)
{
	struct json_object *v;
	int64_t shift = 0, mask = -1;
	const char *src;
	int err;

	*levels = -1;
	err = opt_uint(what, root, "levels", 0, MERCURY_MAX_TAG, levels);
	if (!err && *levels < 0)
		err = mercury_err(EINVAL, "%s: format %u needs \"levels\"", what,
				  p->format);
	if (err)
		return err;
	p->source = MERCURY_TAG_MARK;
	if (json_object_object_get_ex(root, "tag_source", &v)) {
		src = json_object_is_type(v, json_type_string) ?
		      json_object_get_string(v) : "";
		if (!strcmp(src, "mark"))
			p->source = MERCURY_TAG_MARK;
		else if (!strcmp(src, "priority"))
			p->source = MERCURY_TAG_PRIORITY;
		else if (!strcmp(src, "dscp"))
			p->source = MERCURY_TAG_DSCP;
		else
			return mercury_err(EINVAL,
					   "%s: \"tag_source\" must be \"mark\", \"priority\" or \"dscp\"",
					   what);
	}
	err = opt_uint(what, root, "shift", 0, 31, &shift);
	if (!err)
		err = opt_uint(what, root, "mask", 1, UINT32_MAX, &mask);
	if (err)
		return err;
	p->shift = shift;
	p->mask = mask < 0 ? default_mask(p->source) : (uint32_t)mask;
	return 0;
}

static int plan_extra_from_json(struct json_object *root,
				struct mercury_plan *p)
{
	json_object_object_foreach(root, key, val) {
		if (plan_key_reserved(key))
			continue;
		if (!p->extra) {
			p->extra = json_object_new_object();
			if (!p->extra)
				return mercury_err(ENOMEM, "plan: out of memory");
		}
		if (json_object_object_add(p->extra, key, json_object_get(val))) {
			json_object_put(val);
			return mercury_err(ENOMEM, "plan: out of memory");
		}
	}
	return 0;
}

static int plan_from_json(const char *what, struct json_object *root,
			  struct mercury_plan *p)
{
	struct json_object *arr, *o, *v;
	int64_t x, levels = -1;
	struct plan_entry *e;
	const char *name;
	size_t i, n;
	int err;

	if (!json_object_is_type(root, json_type_object))
		return mercury_err(EINVAL, "%s: top level must be an object", what);
	p->format = 0;
	if (json_object_object_get_ex(root, "mercury_plan", &v)) {
		if (!json_object_is_type(v, json_type_int))
			return mercury_err(EINVAL,
					   "%s: \"mercury_plan\" (the format version) must be an integer",
					   what);
		x = json_object_get_int64(v);
		if (x < 1 || x > MERCURY_PLAN_FORMAT)
			return mercury_err(EPROTONOSUPPORT,
					   "%s: plan format %lld is not supported (this libmercury reads 0..%u)",
					   what, (long long)x, MERCURY_PLAN_FORMAT);
		p->format = x;
		err = plan_header_from_json(what, root, p, &levels);
		if (err)
			return err;
	}
	if (!json_object_object_get_ex(root, "priorities", &arr))
		return mercury_err(EINVAL, "%s: no \"priorities\" key", what);
	if (!json_object_is_type(arr, json_type_array))
		return mercury_err(EINVAL, "%s: \"priorities\" must be an array",
				   what);
	n = json_object_array_length(arr);
	if (n > UINT32_MAX - 1)
		return mercury_err(EFBIG, "%s: too many entries", what);
	p->e = calloc(n ? n : 1, sizeof(*p->e));
	if (!p->e)
		return mercury_err(ENOMEM, "plan: out of memory");
	p->cap = n ? n : 1;
	for (i = 0; i < n; i++) {
		o = json_object_array_get_idx(arr, i);
		e = &p->e[i];
		if (!json_object_is_type(o, json_type_object))
			return mercury_err(EINVAL,
					   "%s: priorities[%zu] must be an object",
					   what, i);
		if (!json_object_object_get_ex(o, "tensor", &v) ||
		    !json_object_is_type(v, json_type_string) ||
		    !*(name = json_object_get_string(v)))
			return mercury_err(EINVAL,
					   "%s: priorities[%zu]: \"tensor\" must be a non-empty string",
					   what, i);
		e->tensor = strdup(name);
		p->n = i + 1;	/* entries [0, i] are freed on error */
		if (!e->tensor)
			return mercury_err(ENOMEM, "plan: out of memory");
		if (!json_object_object_get_ex(o, "tag", &v) ||
		    !json_object_is_type(v, json_type_int))
			return mercury_err(EINVAL,
					   "%s: priorities[%zu] (%s): \"tag\" must be an integer",
					   what, i, name);
		x = json_object_get_int64(v);
		if (x < 1 || x > MERCURY_MAX_TAG)
			return mercury_err(ERANGE,
					   "%s: priorities[%zu] (%s): tag %lld outside 1..%u",
					   what, i, name, (long long)x,
					   MERCURY_MAX_TAG);
		if (levels >= 0 && x > levels)
			return mercury_err(ERANGE,
					   "%s: priorities[%zu] (%s): tag %lld above the plan's levels (%lld)",
					   what, i, name, (long long)x,
					   (long long)levels);
		e->tag = x;
		/*
		 * json-c turns 2^64 into INT64_MAX without a word: the bound
		 * refuses it instead of taking it.
		 */
		if (json_object_object_get_ex(o, "bytes", &v) && v) {
			if (!json_object_is_type(v, json_type_int) ||
			    json_object_get_int64(v) < 0 ||
			    json_object_get_int64(v) > MAX_PLAN_BYTES)
				return mercury_err(EINVAL,
						   "%s: priorities[%zu] (%s): \"bytes\" must be an integer in 0..2^53",
						   what, i, name);
			e->bytes = json_object_get_int64(v);
		}
		err = opt_string(what, i, o, "src", &e->src);
		if (!err)
			err = opt_string(what, i, o, "dst", &e->dst);
		if (err)
			return err;
	}
	err = plan_index(p, what);
	if (err)
		return err;
	p->levels = levels >= 0 ? (unsigned int)levels : p->max_tag;
	if (p->format) {
		err = mercury_tag_settings_check(what, p->source, p->shift,
						 p->mask, p->levels);
		if (err)
			return err;
	} else {
		p->source = MERCURY_TAG_MARK;
		p->mask = MERCURY_DEFAULT_MASK;
	}
	return plan_extra_from_json(root, p);
}

/* The caller's limit on levels: refuse, or squeeze when asked to. */
static int plan_apply_load_opts(const char *what, struct mercury_plan *p,
				const struct mercury_plan_load_opts *opts)
{
	unsigned int limit = OPTS_GET(opts, levels, 0);
	bool squeeze = OPTS_GET(opts, squeeze, false);
	int err;

	if (!limit)
		return squeeze ? mercury_err(EINVAL,
					     "%s: squeeze needs levels (load opts)",
					     what) : 0;
	if (p->max_tag > limit) {
		if (!squeeze)
			return mercury_err(ERANGE,
					   "%s: tags go up to %u, more than the %u levels allowed; squeeze it at load or write it with mercury-place --levels %u",
					   what, p->max_tag, limit, limit);
		err = plan_squeeze(p, limit);
		if (err)
			return err;
	}
	if (p->levels > limit)
		p->levels = limit;
	return 0;
}

static int plan_load_buf(const char *what, const char *buf, size_t len,
			 const struct mercury_plan_load_opts *opts,
			 struct mercury_plan **out)
{
	struct json_object *root;
	struct mercury_plan *p;
	int err;

	err = mercury_parse_json(what, buf, len, &root);
	if (err)
		return err;
	p = calloc(1, sizeof(*p));
	if (!p) {
		json_object_put(root);
		return mercury_err(ENOMEM, "plan: out of memory");
	}
	err = plan_from_json(what, root, p);
	json_object_put(root);
	if (!err)
		err = plan_apply_load_opts(what, p, opts);
	if (err) {
		mercury_plan_free(p);
		return mercury_ret(err);
	}
	*out = p;
	return 0;
}

static int load_opts_check(const struct mercury_plan_load_opts *opts)
{
	if (!OPTS_VALID(opts, mercury_plan_load_opts))
		return -errno;
	if (OPTS_GET(opts, levels, 0) > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "plan load opts: levels %u above %u",
				   opts->levels, MERCURY_MAX_TAG);
	return 0;
}

MERCURY_API int mercury_plan_load_buf_opts(const char *json, size_t len,
					   const struct mercury_plan_load_opts *opts,
					   struct mercury_plan **out)
{
	int err;

	if (!out || !json)
		return mercury_err(EINVAL, "plan: NULL argument");
	*out = NULL;
	err = load_opts_check(opts);
	if (err)
		return err;
	return plan_load_buf("plan", json, len, opts, out);
}

MERCURY_API int mercury_plan_load_buf(const char *json, size_t len,
				      struct mercury_plan **out)
{
	return mercury_plan_load_buf_opts(json, len, NULL, out);
}

MERCURY_API int mercury_plan_load_opts(const char *path,
				       const struct mercury_plan_load_opts *opts,
				       struct mercury_plan **out)
{
	size_t len;
	char *buf;
	int err;

	if (!out || !path)
		return mercury_err(EINVAL, "plan: NULL argument");
	*out = NULL;
	err = load_opts_check(opts);
	if (err)
		return err;
	err = mercury_read_file(path, &buf, &len);
	if (err)
		return err;
	err = plan_load_buf(path, buf, len, opts, out);
	free(buf);
	return mercury_ret(err);
}

MERCURY_API int mercury_plan_load(const char *path, struct mercury_plan **out)
{
	return mercury_plan_load_opts(path, NULL, out);
}

/* ---- the builder -------------------------------------------------------- */

MERCURY_API int mercury_plan_new(struct mercury_plan **out)
{
	struct mercury_plan *p;

	if (!out)
		return mercury_err(EINVAL, "plan new: NULL argument");
	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return mercury_err(ENOMEM, "plan: out of memory");
	p->format = MERCURY_PLAN_FORMAT;
	p->source = MERCURY_TAG_MARK;
	p->mask = MERCURY_DEFAULT_MASK;
	*out = p;
	return 0;
}

MERCURY_API int mercury_plan_add(struct mercury_plan *p,
				 const struct mercury_plan_entry *e)
{
	struct plan_entry *ne, *x;
	int err;

	if (!p || !e || !e->tensor)
		return mercury_err(EINVAL, "plan add: NULL argument");
	if (!*e->tensor)
		return mercury_err(EINVAL, "plan add: empty tensor name");
	if (e->tag < 1 || e->tag > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "plan add: %s: tag %u outside 1..%u",
				   e->tensor, e->tag, MERCURY_MAX_TAG);
	if (p->levels && e->tag > p->levels)
		return mercury_err(ERANGE,
				   "plan add: %s: tag %u above the plan's %u levels",
				   e->tensor, e->tag, p->levels);
	if (e->bytes > MAX_PLAN_BYTES)
		return mercury_err(ERANGE, "plan add: %s: %llu bytes above 2^53",
				   e->tensor, (unsigned long long)e->bytes);
	if (plan_find(p, e->tensor))
		return mercury_err(EEXIST, "plan add: tensor \"%s\" is already in the plan",
				   e->tensor);
	if (p->n >= UINT32_MAX - 1)
		return mercury_err(EFBIG, "plan add: too many entries");
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;

		ne = realloc(p->e, cap * sizeof(*ne));
		if (!ne)
			return mercury_err(ENOMEM, "plan: out of memory");
		p->e = ne;
		p->cap = cap;
	}
	err = plan_reserve_slots(p, p->n + 1);
	if (err)
		return err;
	x = &p->e[p->n];
	x->tensor = strdup(e->tensor);
	x->src = xstrdup(e->src);
	x->dst = xstrdup(e->dst);
	if (!x->tensor || !x->src || !x->dst) {
		free(x->tensor);
		free(x->src);
		free(x->dst);
		return mercury_err(ENOMEM, "plan: out of memory");
	}
	x->tag = e->tag;
	x->bytes = e->bytes;
	plan_slot_put(p, p->n);
	p->n++;
	if (x->tag > p->max_tag)
		p->max_tag = x->tag;
	return 0;
}

MERCURY_API int mercury_plan_set_levels(struct mercury_plan *p,
					unsigned int levels)
{
	int err;

	if (!p)
		return mercury_err(EINVAL, "plan set levels: NULL argument");
	if (levels < 1 || levels > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "plan set levels: %u outside 1..%u",
				   levels, MERCURY_MAX_TAG);
	err = mercury_tag_settings_check("plan", p->source, p->shift,
					 p->mask, levels);
	if (err)
		return err;
	if (p->max_tag > levels) {
		err = plan_squeeze(p, levels);
		if (err)
			return err;
	}
	p->levels = levels;
	return 0;
}

MERCURY_API int mercury_plan_set_tag_opts(struct mercury_plan *p,
					  const struct mercury_tag_opts *opts)
{
	unsigned int levels;
	uint32_t mask;
	int source, err;

	if (!p)
		return mercury_err(EINVAL, "plan set tag opts: NULL argument");
	if (!OPTS_VALID(opts, mercury_tag_opts))
		return -errno;
	source = OPTS_GET(opts, source, MERCURY_TAG_MARK);
	mask = OPTS_GET(opts, mask, 0);
	if (!mask)
		mask = default_mask(source);
	levels = p->levels ? p->levels : p->max_tag;
	err = mercury_tag_settings_check("plan", source,
					 OPTS_GET(opts, shift, 0), mask,
					 levels);
	if (err)
		return err;
	p->source = source;
	p->shift = OPTS_GET(opts, shift, 0);
	p->mask = mask;
	return 0;
}

MERCURY_API int mercury_plan_set_extra(struct mercury_plan *p, const char *key,
				       const char *json)
{
	struct json_object *v, *arr;
	size_t len;
	char *buf;
	int err;

	if (!p || !key)
		return mercury_err(EINVAL, "plan set extra: NULL argument");
	if (!*key || plan_key_reserved(key))
		return mercury_err(EINVAL,
				   "plan set extra: \"%s\" is not a free key (the format uses it)",
				   key);
	if (!json) {
		if (p->extra)
			json_object_object_del(p->extra, key);
		return 0;
	}
	/*
	 * Parsed inside [ ] so that a bare number ends: json-c waits for more
	 * digits at the end of a buffer.
	 */
	len = strlen(json);
	buf = malloc(len + 3);
	if (!buf)
		return mercury_err(ENOMEM, "plan: out of memory");
	buf[0] = '[';
	memcpy(buf + 1, json, len);
	buf[len + 1] = ']';
	buf[len + 2] = '\0';
	err = mercury_parse_json(key, buf, len + 2, &arr);
	free(buf);
	if (err)
		return err;
	if (json_object_array_length(arr) != 1) {
		json_object_put(arr);
		return mercury_err(EINVAL, "%s: not one JSON value", key);
	}
	v = json_object_get(json_object_array_get_idx(arr, 0));
	json_object_put(arr);
	if (!p->extra && !(p->extra = json_object_new_object())) {
		json_object_put(v);
		return mercury_err(ENOMEM, "plan: out of memory");
	}
	if (json_object_object_add(p->extra, key, v)) {
		json_object_put(v);
		return mercury_err(ENOMEM, "plan: out of memory");
	}
	return 0;
}

/* ---- default plan from a profile ---------------------------------------- */

struct prof_tensor {
	const struct mercury_model_param *p;
	size_t grad_idx;		/* position in grad_ready */
};

/*
 * The priority rule: by the forward call that needs the tensor first
 * (mercury_model_first_use(), model.c), then reversed grad_ready order
 * (the later-ready gradient first).
 */
static int prof_cmp(const void *a, const void *b)
{
	const struct prof_tensor *x = a, *y = b;

	if (x->p->gate != y->p->gate)
		return x->p->gate < y->p->gate ? -1 : 1;
	return x->grad_idx < y->grad_idx ? 1 : -1;
}

MERCURY_API int mercury_plan_from_profile(const char *path,
					  const struct mercury_plan_opts *opts,
					  struct mercury_plan **out)
{
	struct mercury_model_info info;
	struct mercury_model *m = NULL;
	struct prof_tensor *t = NULL;
	struct mercury_plan *p = NULL;
	unsigned int levels, group, rank;
	size_t n = 0, i;
	int err;

	if (!out || !path)
		return mercury_err(EINVAL, "plan: NULL argument");
	*out = NULL;
	if (!OPTS_VALID(opts, mercury_plan_opts))
		return -errno;
	group = OPTS_GET(opts, group, MERCURY_PLAN_PER_TENSOR);
	levels = OPTS_GET(opts, levels, 0);
	if (group != MERCURY_PLAN_PER_TENSOR && group != MERCURY_PLAN_PER_MODULE)
		return mercury_err(EINVAL, "plan opts: unknown group %u", group);
	if (levels > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "plan opts: levels %u above %u",
				   levels, MERCURY_MAX_TAG);

	err = mercury_model_load(path, &m);
	if (err)
		return err;
	mercury_model_get_info(m, &info, sizeof(info));
	n = info.nparams;
	if (!n) {
		err = mercury_err(EINVAL, "%s: no parameter tensors", path);
		goto out;
	}
	t = calloc(n, sizeof(*t));
	if (!t) {
		err = mercury_err(ENOMEM, "plan: out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		t[i].p = mercury_model_param(m, i);
		t[i].grad_idx = i;
	}
	qsort(t, n, sizeof(*t), prof_cmp);

	p = calloc(1, sizeof(*p));
	if (p)
		p->e = calloc(n, sizeof(*p->e));
	if (!p || !p->e) {
		err = mercury_err(ENOMEM, "plan: out of memory");
		goto out;
	}
	/* First the dense rank (per tensor or per module)... */
	for (i = 0, rank = 0; i < n; i++) {
		if (group == MERCURY_PLAN_PER_TENSOR || i == 0 ||
		    strcmp(t[i].p->owner, t[i - 1].p->owner) ||
		    t[i].p->gate != t[i - 1].p->gate)
			rank++;
		p->e[i].tag = rank;
		p->e[i].bytes = t[i].p->bytes;
		p->e[i].tensor = strdup(t[i].p->name);
		p->e[i].src = xstrdup("");
		p->e[i].dst = xstrdup("");
		p->n = i + 1;
		if (!p->e[i].tensor || !p->e[i].src || !p->e[i].dst) {
			err = mercury_err(ENOMEM, "plan: out of memory");
			goto out;
		}
	}
	/* ...then squeeze ranks 1..rank into 1..levels, keeping the order. */
	if (levels && levels < rank) {
		err = plan_squeeze(p, levels);
		if (err)
			goto out;
	}
	if (rank > MERCURY_MAX_TAG && (!levels || levels >= rank)) {
		err = mercury_err(ERANGE,
				  "%s: %u tags do not fit 1..%u; set levels",
				  path, rank, MERCURY_MAX_TAG);
		goto out;
	}
	p->cap = n;
	err = plan_index(p, path);
	if (err)
		goto out;
	p->format = MERCURY_PLAN_FORMAT;
	p->levels = levels ? levels : p->max_tag;
	p->source = MERCURY_TAG_MARK;
	p->mask = MERCURY_DEFAULT_MASK;
	*out = p;
	p = NULL;
out:
	free(t);
	mercury_model_free(m);
	mercury_plan_free(p);
	return mercury_ret(err);
}

static int jadd(struct json_object *o, const char *key, struct json_object *v)
{
	if (!v)
		return -ENOMEM;
	if (json_object_object_add(o, key, v)) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

/* The plan as a json-c tree: format keys, extras, then the entries. */
static int plan_to_json(const struct mercury_plan *p, struct json_object **out)
{
	struct json_object *root, *arr, *o;
	int err = 0;
	size_t i;

	root = json_object_new_object();
	if (!root)
		return mercury_err(ENOMEM, "plan: out of memory");
	err = jadd(root, "mercury_plan", json_object_new_int(MERCURY_PLAN_FORMAT));
	err = err ?: jadd(root, "levels",
			  json_object_new_int(p->levels ? p->levels : p->max_tag));
	err = err ?: jadd(root, "tag_source",
			  json_object_new_string(mercury_source_name(p->source)));
	err = err ?: jadd(root, "shift", json_object_new_int(p->shift));
	err = err ?: jadd(root, "mask", json_object_new_int64(p->mask));
	if (!err && p->extra) {
		json_object_object_foreach(p->extra, key, val) {
			err = jadd(root, key, json_object_get(val));
			if (err)
				break;
		}
	}
	arr = err ? NULL : json_object_new_array_ext(p->n);
	err = err ?: jadd(root, "priorities", arr);
	for (i = 0; !err && i < p->n; i++) {
		o = json_object_new_object();
		if (!o || json_object_array_add(arr, o)) {
			json_object_put(o);
			err = -ENOMEM;
			break;
		}
		err = jadd(o, "tensor", json_object_new_string(p->e[i].tensor));
		err = err ?: jadd(o, "tag", json_object_new_int64(p->e[i].tag));
		err = err ?: jadd(o, "bytes", json_object_new_int64(p->e[i].bytes));
		err = err ?: jadd(o, "src", json_object_new_string(p->e[i].src));
		err = err ?: jadd(o, "dst", json_object_new_string(p->e[i].dst));
	}
	if (err) {
		json_object_put(root);
		return mercury_err(ENOMEM, "plan: out of memory");
	}
	*out = root;
	return 0;
}

MERCURY_API int mercury_plan_save_buf(const struct mercury_plan *p,
				      char **json, size_t *len)
{
	struct json_object *root = NULL;
	const char *s;
	size_t n;
	int err;

	if (!p || !json)
		return mercury_err(EINVAL, "plan save: NULL argument");
	*json = NULL;
	err = plan_to_json(p, &root);
	if (err)
		return err;
	s = json_object_to_json_string_length(root, JSON_C_TO_STRING_PRETTY |
					      JSON_C_TO_STRING_SPACED |
					      JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	*json = s ? malloc(n + 2) : NULL;
	if (*json) {
		memcpy(*json, s, n);
		(*json)[n++] = '\n';
		(*json)[n] = '\0';
		if (len)
			*len = n;
	}
	json_object_put(root);
	return *json ? 0 : mercury_err(ENOMEM, "plan: out of memory");
}

MERCURY_API int mercury_plan_save(const struct mercury_plan *p,
				  const char *path)
{
	size_t len;
	char *buf;
	int err;

	if (!p || !path)
		return mercury_err(EINVAL, "plan save: NULL argument");
	err = mercury_plan_save_buf(p, &buf, &len);
	if (err)
		return err;
	err = mercury_write_file(path, buf, len);
	free(buf);
	return err;
}

MERCURY_API int mercury_plan_lookup(const struct mercury_plan *p,
				    const char *tensor)
{
	const struct plan_entry *e;

	if (!p || !tensor)
		return mercury_err(EINVAL, "plan lookup: NULL argument");
	e = plan_find(p, tensor);
	if (!e)
		/* Expected by callers that fall back: no log line. */
		return mercury_quiet(ENOENT, "plan: no tensor \"%s\"", tensor);
	return e->tag;
}

MERCURY_API int mercury_plan_wire_tag(const struct mercury_plan *p,
				      const char *tensor, uint32_t *value)
{
	const struct plan_entry *e;

	if (!p || !tensor)
		return mercury_err(EINVAL, "plan wire tag: NULL argument");
	e = plan_find(p, tensor);
	if (!e)
		return mercury_quiet(ENOENT, "plan: no tensor \"%s\"", tensor);
	/* every tag is in 1..levels, which the settings were checked to carry */
	if ((e->tag & p->mask) != e->tag)
		return mercury_err(ERANGE, "plan: %s: tag %u does not fit mask 0x%x",
				   tensor, e->tag, p->mask);
	if (value)
		*value = e->tag << p->shift;
	return e->tag;
}

MERCURY_API int mercury_plan_get_info(const struct mercury_plan *p,
				      struct mercury_plan_info *info, size_t sz)
{
	struct mercury_plan_info i = { 0 };

	if (!p || !info)
		return mercury_err(EINVAL, "plan info: NULL argument");
	i.format = p->format;
	i.levels = p->levels ? p->levels : p->max_tag;
	i.max_tag = p->max_tag;
	i.source = p->source;
	i.shift = p->shift;
	i.mask = p->mask;
	/* A caller built against an older header gets the fields it knows. */
	memcpy(info, &i, sz < sizeof(i) ? sz : sizeof(i));
	return 0;
}

MERCURY_API size_t mercury_plan_size(const struct mercury_plan *p)
{
	return p ? p->n : 0;
}

MERCURY_API unsigned int mercury_plan_max_tag(const struct mercury_plan *p)
{
	return p ? p->max_tag : 0;
}

MERCURY_API int mercury_plan_entry(const struct mercury_plan *p, size_t i,
				   struct mercury_plan_entry *e)
{
	if (!p || !e)
		return mercury_err(EINVAL, "plan entry: NULL argument");
	if (i >= p->n)
		return mercury_err(ENOENT, "plan entry %zu: plan has %zu", i, p->n);
	e->tensor = p->e[i].tensor;
	e->tag = p->e[i].tag;
	e->bytes = p->e[i].bytes;
	e->src = p->e[i].src;
	e->dst = p->e[i].dst;
	return 0;
}
