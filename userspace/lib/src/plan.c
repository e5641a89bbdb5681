// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Priority plans: tensor name -> tag.
 *
 * Two sources: the placement solver's plan JSON, and a default plan derived
 * from an h200 profile. The default follows the forward pass: the gradient
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
 * Lookup is an open-addressing hash table (FNV-1a, linear probing, load
 * factor <= 1/2) of indexes into the entry array, so the plan can also be
 * walked in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "internal.h"

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
	uint32_t *slots;		/* hash slots: index + 1, 0 = empty */
	size_t nslots;			/* power of two */
	unsigned int max_tag;
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
	free(p);
}

static const struct plan_entry *plan_find(const struct mercury_plan *p,
					  const char *name)
{
	size_t m = p->nslots - 1, i = fnv1a(name) & m;

	for (; p->slots[i]; i = (i + 1) & m)
		if (!strcmp(p->e[p->slots[i] - 1].tensor, name))
			return &p->e[p->slots[i] - 1];
	return NULL;
}

/* Build the index; a name given twice is an error (which tag would win?). */
static int plan_index(struct mercury_plan *p, const char *what)
{
	size_t i, j, m;

	p->nslots = 16;
	while (p->nslots < 2 * p->n)
		p->nslots *= 2;
	p->slots = calloc(p->nslots, sizeof(*p->slots));
	if (!p->slots)
		return mercury_err(ENOMEM, "plan: out of memory");
	m = p->nslots - 1;
	for (i = 0; i < p->n; i++) {
		if (plan_find(p, p->e[i].tensor))
			return mercury_err(EINVAL,
					   "%s: priorities[%zu]: tensor \"%s\" appears twice",
					   what, i, p->e[i].tensor);
		for (j = fnv1a(p->e[i].tensor) & m; p->slots[j]; j = (j + 1) & m)
			;
		p->slots[j] = i + 1;
		if (p->e[i].tag > p->max_tag)
			p->max_tag = p->e[i].tag;
	}
	return 0;
}

static char *xstrdup(const char *s)
{
	return strdup(s ? s : "");
}

/* Read a whole file; json-c's own reader cannot say where parsing failed. */
/*
 * The largest plan or profile we read: the biggest shipped profile
 * (gpt2_xl) is 158 KB, a plan of a million tensors about 64 MiB. A longer
 * input (a device, a pipe that never ends) is refused, not read until
 * memory runs out.
 */
#define MAX_INPUT	(64U << 20)

static int read_file(const char *path, char **buf, size_t *len)
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
		if (cap >= MAX_INPUT) {
			fclose(f);
			free(b);
			return mercury_err(EFBIG, "%s: longer than %u MiB: not a plan or profile",
					   path, MAX_INPUT >> 20);
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

static int parse_json(const char *what, const char *buf, size_t len,
		      struct json_object **out)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;
	size_t line = 1, i, off;

	if (len > INT32_MAX)
		return mercury_err(EFBIG, "%s: too large", what);
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

static int plan_from_json(const char *what, struct json_object *root,
			  struct mercury_plan *p)
{
	struct json_object *arr, *o, *v;
	struct plan_entry *e;
	const char *name;
	int64_t x;
	size_t i, n;
	int err;

	if (!json_object_is_type(root, json_type_object))
		return mercury_err(EINVAL, "%s: top level must be an object", what);
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
		e->tag = x;
		if (json_object_object_get_ex(o, "bytes", &v) && v) {
			if (!json_object_is_type(v, json_type_int) ||
			    json_object_get_int64(v) < 0)
				return mercury_err(EINVAL,
						   "%s: priorities[%zu] (%s): \"bytes\" must be an integer >= 0",
						   what, i, name);
			e->bytes = json_object_get_int64(v);
		}
		err = opt_string(what, i, o, "src", &e->src);
		if (!err)
			err = opt_string(what, i, o, "dst", &e->dst);
		if (err)
			return err;
	}
	return plan_index(p, what);
}

static int plan_load_buf(const char *what, const char *buf, size_t len,
			 struct mercury_plan **out)
{
	struct json_object *root;
	struct mercury_plan *p;
	int err;

	err = parse_json(what, buf, len, &root);
	if (err)
		return err;
	p = calloc(1, sizeof(*p));
	if (!p) {
		json_object_put(root);
		return mercury_err(ENOMEM, "plan: out of memory");
	}
	err = plan_from_json(what, root, p);
	json_object_put(root);
	if (err) {
		mercury_plan_free(p);
		return mercury_ret(err);
	}
	*out = p;
	return 0;
}

MERCURY_API int mercury_plan_load_buf(const char *json, size_t len,
				      struct mercury_plan **out)
{
	if (!out || !json)
		return mercury_err(EINVAL, "plan: NULL argument");
	*out = NULL;
	return plan_load_buf("plan", json, len, out);
}

MERCURY_API int mercury_plan_load(const char *path, struct mercury_plan **out)
{
	size_t len;
	char *buf;
	int err;

	if (!out || !path)
		return mercury_err(EINVAL, "plan: NULL argument");
	*out = NULL;
	err = read_file(path, &buf, &len);
	if (err)
		return err;
	err = plan_load_buf(path, buf, len, out);
	free(buf);
	return mercury_ret(err);
}

/* ---- default plan from a profile ---------------------------------------- */

struct prof_tensor {
	const char *param;
	const char *module;		/* as in the profile, or NULL */
	char *owner;			/* module, or the param's parent path */
	uint64_t bytes;
	size_t grad_idx;		/* position in grad_ready */
	size_t call_idx;		/* first forward call of module, or SIZE_MAX */
};

static void prof_free(struct prof_tensor *t, size_t n)
{
	size_t i;

	for (i = 0; t && i < n; i++)
		free(t[i].owner);
	free(t);
}

static int prof_cmp(const void *a, const void *b)
{
	const struct prof_tensor *x = a, *y = b;

	if (x->call_idx != y->call_idx)
		return x->call_idx < y->call_idx ? -1 : 1;
	/* Reversed grad_ready order: the later-ready gradient first. */
	return x->grad_idx < y->grad_idx ? 1 : -1;
}

static const char *get_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/*
 * First call of the nearest ancestor of name ("a.b.c" -> "a.b" -> "a" ->
 * "") with a called module at or below it; SIZE_MAX if none.
 */
static size_t ancestor_call(const struct mercury_plan *fc, const char *name)
{
	size_t best, i, plen = strlen(name);
	const char *m;

	for (;;) {
		best = SIZE_MAX;
		for (i = 0; i < fc->n; i++) {
			m = fc->e[i].tensor;
			if (!plen || (!strncmp(m, name, plen) &&
				      (m[plen] == '.' || !m[plen])))
				if (fc->e[i].tag < best)
					best = fc->e[i].tag;
		}
		if (best != SIZE_MAX || !plen)
			return best;
		while (plen && name[plen - 1] != '.')
			plen--;
		if (plen)
			plen--;		/* drop the dot too */
	}
}

static int profile_tensors(const char *what, struct json_object *root,
			   struct prof_tensor **out, size_t *nout)
{
	struct json_object *calls, *grads, *o, *v;
	struct mercury_plan first_call = { 0 }, first_unique = { 0 };
	const struct plan_entry *pe;
	struct prof_tensor *t;
	size_t i, n, nc;
	int64_t numel;
	int err = 0;

	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "forward_calls", &calls) ||
	    !json_object_is_type(calls, json_type_array) ||
	    !json_object_object_get_ex(root, "grad_ready", &grads) ||
	    !json_object_is_type(grads, json_type_array))
		return mercury_err(EINVAL,
				   "%s: not a profile (needs arrays \"forward_calls\" and \"grad_ready\")",
				   what);

	/* Module -> index of its first call, reusing the plan hash table. */
	nc = json_object_array_length(calls);
	first_call.e = calloc(nc ? nc : 1, sizeof(*first_call.e));
	if (!first_call.e)
		return mercury_err(ENOMEM, "plan: out of memory");
	for (i = 0; i < nc; i++) {
		const char *m = get_str(json_object_array_get_idx(calls, i),
					"module");

		if (!m) {
			err = mercury_err(EINVAL,
					  "%s: forward_calls[%zu]: \"module\" must be a string",
					  what, i);
			goto out;
		}
		first_call.e[first_call.n].tensor = (char *)m;
		first_call.e[first_call.n].tag = i;
		first_call.n++;
	}
	/* Keep the first call of each module only: build the index by hand. */
	first_call.nslots = 16;
	while (first_call.nslots < 2 * nc)
		first_call.nslots *= 2;
	first_call.slots = calloc(first_call.nslots, sizeof(uint32_t));
	first_unique.e = calloc(nc ? nc : 1, sizeof(*first_unique.e));
	if (!first_call.slots || !first_unique.e) {
		err = mercury_err(ENOMEM, "plan: out of memory");
		goto out;
	}
	for (i = 0; i < first_call.n; i++) {
		size_t m = first_call.nslots - 1, j;

		if (plan_find(&first_call, first_call.e[i].tensor))
			continue;
		for (j = fnv1a(first_call.e[i].tensor) & m; first_call.slots[j];
		     j = (j + 1) & m)
			;
		first_call.slots[j] = i + 1;
		first_unique.e[first_unique.n++] = first_call.e[i];
	}

	n = json_object_array_length(grads);
	if (!n) {
		err = mercury_err(EINVAL, "%s: \"grad_ready\" is empty", what);
		goto out;
	}
	t = calloc(n, sizeof(*t));
	if (!t) {
		err = mercury_err(ENOMEM, "plan: out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		o = json_object_array_get_idx(grads, i);
		t[i].param = get_str(o, "param");
		t[i].module = get_str(o, "module");
		if (!t[i].param || !*t[i].param ||
		    (!t[i].module && json_object_object_get_ex(o, "module", &v) &&
		     v) ||
		    !json_object_object_get_ex(o, "numel", &v) ||
		    !json_object_is_type(v, json_type_int) ||
		    (numel = json_object_get_int64(v)) < 0) {
			err = mercury_err(EINVAL,
					  "%s: grad_ready[%zu]: needs string \"param\", string or null \"module\" and integer \"numel\" >= 0",
					  what, i);
			prof_free(t, i);
			goto out;
		}
		if (t[i].module) {
			t[i].owner = strdup(t[i].module);
		} else {
			/* Owned by a non-leaf module: its parent path. */
			const char *dot = strrchr(t[i].param, '.');

			t[i].owner = strndup(t[i].param,
					     dot ? (size_t)(dot - t[i].param) : 0);
		}
		if (!t[i].owner) {
			err = mercury_err(ENOMEM, "plan: out of memory");
			prof_free(t, i);
			goto out;
		}
		t[i].bytes = 4 * (uint64_t)numel;	/* fp32 gradients */
		t[i].grad_idx = i;
		pe = t[i].module ? plan_find(&first_call, t[i].module) : NULL;
		t[i].call_idx = pe ? pe->tag :
			ancestor_call(&first_unique, t[i].owner);
	}
	*out = t;
	*nout = n;
out:
	free(first_call.e);
	free(first_call.slots);
	free(first_unique.e);
	return err;
}

MERCURY_API int mercury_plan_from_profile(const char *path,
					  const struct mercury_plan_opts *opts,
					  struct mercury_plan **out)
{
	struct json_object *root = NULL;
	struct prof_tensor *t = NULL;
	struct mercury_plan *p = NULL;
	unsigned int levels, group, rank;
	size_t len, n = 0, i;
	char *buf;
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

	err = read_file(path, &buf, &len);
	if (err)
		return err;
	err = parse_json(path, buf, len, &root);
	free(buf);
	if (err)
		return err;
	err = profile_tensors(path, root, &t, &n);
	if (err)
		goto out;
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
		    strcmp(t[i].owner, t[i - 1].owner) ||
		    t[i].call_idx != t[i - 1].call_idx)
			rank++;
		p->e[i].tag = rank;
		p->e[i].bytes = t[i].bytes;
		p->e[i].tensor = strdup(t[i].param);
		p->e[i].src = xstrdup("");
		p->e[i].dst = xstrdup("");
		p->n = i + 1;
		if (!p->e[i].tensor || !p->e[i].src || !p->e[i].dst) {
			err = mercury_err(ENOMEM, "plan: out of memory");
			goto out;
		}
	}
	/* ...then squeeze ranks 1..rank into 1..levels, keeping the order. */
	if (levels && levels < rank)
		for (i = 0; i < n; i++)
			p->e[i].tag = 1 + (uint64_t)(p->e[i].tag - 1) * levels /
					  rank;
	if (rank > MERCURY_MAX_TAG && (!levels || levels >= rank)) {
		err = mercury_err(ERANGE,
				  "%s: %u tags do not fit 1..%u; set levels",
				  path, rank, MERCURY_MAX_TAG);
		goto out;
	}
	err = plan_index(p, path);
	if (err)
		goto out;
	*out = p;
	p = NULL;
out:
	prof_free(t, n);
	json_object_put(root);
	mercury_plan_free(p);
	return mercury_ret(err);
}

MERCURY_API int mercury_plan_save(const struct mercury_plan *p,
				  const char *path)
{
	struct json_object *root, *arr, *o;
	size_t i;
	int err = 0;

	if (!p || !path)
		return mercury_err(EINVAL, "plan save: NULL argument");
	root = json_object_new_object();
	arr = json_object_new_array();
	if (!root || !arr) {
		json_object_put(root);
		json_object_put(arr);
		return mercury_err(ENOMEM, "plan: out of memory");
	}
	json_object_object_add(root, "priorities", arr);
	for (i = 0; i < p->n; i++) {
		o = json_object_new_object();
		if (!o) {
			err = mercury_err(ENOMEM, "plan: out of memory");
			goto out;
		}
		json_object_object_add(o, "tensor",
				       json_object_new_string(p->e[i].tensor));
		json_object_object_add(o, "tag", json_object_new_int64(p->e[i].tag));
		json_object_object_add(o, "bytes",
				       json_object_new_int64(p->e[i].bytes));
		json_object_object_add(o, "src", json_object_new_string(p->e[i].src));
		json_object_object_add(o, "dst", json_object_new_string(p->e[i].dst));
		json_object_array_add(arr, o);
	}
	if (json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY |
				    JSON_C_TO_STRING_NOSLASHESCAPE) < 0)
		err = mercury_err(EIO, "%s: cannot write: %s", path,
				  json_util_get_last_err());
out:
	json_object_put(root);
	return mercury_ret(err);
}

MERCURY_API int mercury_plan_lookup(const struct mercury_plan *p,
				    const char *tensor)
{
	const struct plan_entry *e;

	if (!p || !tensor)
		return mercury_err(EINVAL, "plan lookup: NULL argument");
	e = plan_find(p, tensor);
	if (!e) {
		/* Not an error worth a log line: callers fall back to 0. */
		errno = ENOENT;
		return -ENOENT;
	}
	return e->tag;
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
