// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Model profiles: the one reader of h200 JSON and PipeDream graph.txt
 * files (profiles/README.md), and the rules every tool takes from it:
 * which forward call a parameter belongs to, how many bytes its gradient
 * is. mercury_plan_from_profile() (plan.c), mercury-place and
 * mercury-sim/mercury-ps all read profiles through here; what a tool makes
 * of the numbers (a timeline, an operator DAG) is its own.
 *
 * Only what is structural is required: forward_calls[].module and
 * grad_ready[].param/numel. Times and sizes are optional but, when given,
 * must be finite numbers >= 0 (a tool that needs them checks
 * mercury_model_info.timed). A "modules" list, when given, is the set of
 * names every other section may use; without it the modules are the names
 * the calls and gradients use, in the order they first appear.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "internal.h"

/* Larger tensors than 2^40 elements are not a profile: a typo or a fuzzer. */
#define MAX_NUMEL	(1ULL << 40)

struct mercury_model {
	enum mercury_model_format format;
	char *model;
	double fwd_ms, bwd_ms;
	bool has_edges;
	struct mercury_model_module *mods;
	size_t nmods, capmods;
	struct mercury_model_call *calls;
	size_t ncalls;
	struct mercury_model_param *params;
	size_t nparams;
	struct mercury_model_edge *edges;
	size_t nedges, capedges;
	struct mercury_model_node *nodes;
	size_t nnodes, capnodes;
	struct json_object *index;	/* module name -> index */
	struct json_object *uses;	/* dotted path -> its first call */
	struct json_object *root;	/* h200: the file, for mercury_model_save() */
	char **strs;			/* every string the model owns */
	size_t nstrs, capstrs;
};

/* ---- storage ----------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t n, size_t esz)
{
	size_t nc = *cap ? 2 * *cap : 64;
	void *p;

	if (n < *cap)
		return 0;
	if (nc > SIZE_MAX / esz)
		return mercury_err(ENOMEM, "profile: out of memory");
	p = realloc(*arr, nc * esz);
	if (!p)
		return mercury_err(ENOMEM, "profile: out of memory");
	memset((char *)p + *cap * esz, 0, (nc - *cap) * esz);
	*arr = p;
	*cap = nc;
	return 0;
}

/* A copy of s (its first n bytes) owned by m; NULL with the error set. */
static const char *own(struct mercury_model *m, const char *s, size_t n)
{
	char *c;

	if (grow((void **)&m->strs, &m->capstrs, m->nstrs, sizeof(*m->strs)))
		return NULL;
	c = strndup(s, n);
	if (!c) {
		mercury_err(ENOMEM, "profile: out of memory");
		return NULL;
	}
	m->strs[m->nstrs++] = c;
	return c;
}

MERCURY_API void mercury_model_free(struct mercury_model *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->nstrs; i++)
		free(m->strs[i]);
	for (i = 0; i < m->nparams; i++)
		free((void *)m->params[i].shared);
	free(m->strs);
	free(m->model);
	free(m->mods);
	free(m->calls);
	free(m->params);
	free(m->edges);
	free(m->nodes);
	json_object_put(m->index);
	json_object_put(m->uses);
	json_object_put(m->root);
	free(m);
}

MERCURY_API size_t mercury_model_find_module(const struct mercury_model *m,
					     const char *name)
{
	struct json_object *v;

	if (!m || !name || !json_object_object_get_ex(m->index, name, &v))
		return MERCURY_MODEL_NONE;
	return (size_t)json_object_get_int64(v);
}

static int add_module(struct mercury_model *m, const char *what,
		      const char *name, uint64_t params, size_t *idx)
{
	struct json_object *v;
	const char *n;

	if (mercury_model_find_module(m, name) != MERCURY_MODEL_NONE)
		return mercury_err(EINVAL, "%s: module %s listed twice", what,
				   name);
	if (grow((void **)&m->mods, &m->capmods, m->nmods, sizeof(*m->mods)))
		return -ENOMEM;
	n = own(m, name, strlen(name));
	v = json_object_new_int64(m->nmods);
	if (!n || !v || json_object_object_add(m->index, name, v)) {
		json_object_put(v);
		return mercury_err(ENOMEM, "profile: out of memory");
	}
	m->mods[m->nmods].name = n;
	m->mods[m->nmods].params = params;
	m->mods[m->nmods].first_call = MERCURY_MODEL_NONE;
	*idx = m->nmods++;
	return 0;
}

/*
 * The module called name: with a "modules" list it must be in it (listed);
 * without one, a name seen first here becomes a module.
 */
static int use_module(struct mercury_model *m, const char *what, bool listed,
		      const char *where, const char *name, size_t *idx)
{
	*idx = mercury_model_find_module(m, name);
	if (*idx != MERCURY_MODEL_NONE)
		return 0;
	if (listed)
		return mercury_err(EINVAL, "%s: %s names unknown module %s",
				   what, where, name);
	return add_module(m, what, name, 0, idx);
}

/* ---- the ownership rule --------------------------------------------------- */

/*
 * First call of the nearest enclosing path of name ("a.b.c" -> "a.b" ->
 * "a" -> "") with a called module at or below it. torch's
 * MultiheadAttention reads its out_proj weight functionally (never a leaf
 * call) and ViT's class_token belongs to no leaf: both still have a call
 * that needs them first.
 *
 * index_uses() maps every dotted prefix of every called module to the
 * first call at or below it, so a lookup costs the depth of the name, not
 * a scan of the calls (a 64 MiB profile has hundreds of thousands).
 */
static int index_uses(struct mercury_model *m)
{
	struct json_object *v;
	char *path;
	size_t i, n;

	m->uses = json_object_new_object();
	if (!m->uses)
		return mercury_err(ENOMEM, "profile: out of memory");
	for (i = 0; i < m->ncalls; i++) {
		path = strdup(m->calls[i].module);
		if (!path)
			return mercury_err(ENOMEM, "profile: out of memory");
		for (n = strlen(path);;) {
			path[n] = 0;
			/* calls are in order: the first one seen is the earliest */
			if (json_object_object_get_ex(m->uses, path, NULL))
				break;
			v = json_object_new_int64(i);
			if (!v || json_object_object_add(m->uses, path, v)) {
				json_object_put(v);
				free(path);
				return mercury_err(ENOMEM, "profile: out of memory");
			}
			while (n && path[n - 1] != '.')
				n--;
			if (n-- <= 1)	/* never "": the root is call 0 */
				break;
		}
		free(path);
	}
	return 0;
}

MERCURY_API size_t mercury_model_first_use(const struct mercury_model *m,
					   const char *name)
{
	struct json_object *v;
	size_t n, idx;
	char *path;

	if (!m || !name || !m->ncalls)
		return MERCURY_MODEL_NONE;
	idx = mercury_model_find_module(m, name);
	if (idx != MERCURY_MODEL_NONE &&
	    m->mods[idx].first_call != MERCURY_MODEL_NONE)
		return m->mods[idx].first_call;
	path = strdup(name);
	if (!path)
		return 0;	/* out of memory: the most urgent call */
	for (n = strlen(path);;) {
		path[n] = 0;
		if (json_object_object_get_ex(m->uses, path, &v)) {
			free(path);
			return (size_t)json_object_get_int64(v);
		}
		while (n && path[n - 1] != '.')
			n--;
		if (n-- <= 1)
			break;
	}
	free(path);
	return 0;	/* "" is a prefix of every call: call 0 */
}

/* ---- dtypes ---------------------------------------------------------------- */

static const struct {
	const char *name;
	int size;
} dtypes[] = {
	{ "float32", 4 }, { "float", 4 }, { "fp32", 4 },
	{ "bfloat16", 2 }, { "bf16", 2 },
	{ "float16", 2 }, { "half", 2 }, { "fp16", 2 },
	{ "float64", 8 }, { "double", 8 }, { "fp64", 8 },
	{ "float8_e4m3fn", 1 }, { "float8_e5m2", 1 },
	{ "int8", 1 }, { "uint8", 1 }, { "int16", 2 }, { "int32", 4 },
	{ "int64", 8 },
};

/* The profiles were measured with fp32 gradients (profiles/README.md). */
#define DEFAULT_DTYPE	"float32"
#define DTYPE_HINT	"float32, bfloat16, float16, float64, ..."

/* 0 if unknown */
static int dtype_lookup(const char *dtype)
{
	const char *n = dtype;
	size_t i;

	if (!strncmp(n, "torch.", 6))
		n += 6;
	for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(n, dtypes[i].name))
			return dtypes[i].size;
	return 0;
}

MERCURY_API int mercury_dtype_size(const char *dtype)
{
	int r;

	if (!dtype)
		return mercury_err(EINVAL, "dtype: NULL argument");
	r = dtype_lookup(dtype);
	return r ? r : mercury_err(EINVAL, "dtype \"%s\" unknown (" DTYPE_HINT ")",
				   dtype);
}

/* ---- h200 JSON --------------------------------------------------------------- */

static const char *get_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* Optional number >= 0: absent is -1; 0 or -EINVAL. */
static int opt_num(struct json_object *o, const char *key, double *out)
{
	struct json_object *v;
	double d;

	*out = -1;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_double) &&
	    !json_object_is_type(v, json_type_int))
		return -EINVAL;
	d = json_object_get_double(v);
	if (!isfinite(d) || d < 0)
		return -EINVAL;
	*out = d;
	return 0;
}

static int dtype_of(const char *what, const char *key, struct json_object *v,
		    const char **name)
{
	int r;

	if (!json_object_is_type(v, json_type_string))
		return mercury_err(EINVAL, "%s: %s must be a string", what, key);
	*name = json_object_get_string(v);
	r = dtype_lookup(*name);
	return r ? r : mercury_err(EINVAL, "%s: %s \"%s\" unknown (" DTYPE_HINT ")",
				   what, key, *name);
}

static int h200_modules(struct mercury_model *m, const char *what,
			struct json_object *mods)
{
	struct json_object *o, *v;
	const char *name;
	size_t i, n, idx;
	int err;

	n = json_object_array_length(mods);
	for (i = 0; i < n; i++) {
		o = json_object_array_get_idx(mods, i);
		name = get_str(o, "module");
		if (!name || !*name || !json_object_object_get_ex(o, "params", &v) ||
		    !json_object_is_type(v, json_type_int) ||
		    json_object_get_int64(v) < 0)
			return mercury_err(EINVAL,
					   "%s: modules[%zu]: needs a module name and integer params >= 0",
					   what, i);
		err = add_module(m, what, name, json_object_get_int64(v), &idx);
		if (err)
			return err;
	}
	return 0;
}

static int h200_calls(struct mercury_model *m, const char *what, bool listed,
		      struct json_object *calls)
{
	struct mercury_model_call *c;
	struct json_object *o;
	const char *name;
	char where[48];
	size_t i, n;
	int err;

	n = json_object_array_length(calls);
	m->calls = calloc(n ? n : 1, sizeof(*m->calls));
	if (!m->calls)
		return mercury_err(ENOMEM, "profile: out of memory");
	for (i = 0; i < n; i++) {
		o = json_object_array_get_idx(calls, i);
		c = &m->calls[i];
		name = get_str(o, "module");
		if (!name || !*name)
			return mercury_err(EINVAL,
					   "%s: forward_calls[%zu]: \"module\" must be a string",
					   what, i);
		snprintf(where, sizeof(where), "forward_calls[%zu]", i);
		err = use_module(m, what, listed, where, name, &c->module_idx);
		if (err)
			return err;
		c->module = m->mods[c->module_idx].name;
		if (opt_num(o, "start_ms", &c->start_ms) ||
		    opt_num(o, "fwd_ms", &c->fwd_ms) ||
		    opt_num(o, "out_bytes", &c->out_bytes))
			return mercury_err(EINVAL,
					   "%s: forward_calls[%zu] (%s): start_ms, fwd_ms, out_bytes must be numbers >= 0",
					   what, i, name);
		if (i && c->start_ms >= 0 && c->start_ms < c[-1].start_ms)
			return mercury_err(EINVAL,
					   "%s: forward_calls[%zu] (%s) starts before the previous call",
					   what, i, name);
		if (m->mods[c->module_idx].first_call == MERCURY_MODEL_NONE)
			m->mods[c->module_idx].first_call = i;
		m->ncalls = i + 1;
	}
	return 0;
}

static int h200_shared(struct mercury_model *m, const char *what, bool listed,
		       size_t i, struct json_object *o,
		       struct mercury_model_param *p)
{
	struct json_object *sv, *e;
	size_t k, ns, *sh;
	char where[64];
	int err;

	if (!json_object_object_get_ex(o, "shared_with", &sv) || !sv)
		return 0;
	if (!json_object_is_type(sv, json_type_array))
		return mercury_err(EINVAL,
				   "%s: grad_ready[%zu] (%s): shared_with must be an array of module names",
				   what, i, p->name);
	ns = json_object_array_length(sv);
	sh = calloc(ns ? ns : 1, sizeof(*sh));
	if (!sh)
		return mercury_err(ENOMEM, "profile: out of memory");
	p->shared = sh;
	for (k = 0; k < ns; k++) {
		e = json_object_array_get_idx(sv, k);
		if (!json_object_is_type(e, json_type_string) ||
		    !*json_object_get_string(e))
			return mercury_err(EINVAL,
					   "%s: grad_ready[%zu] (%s): shared_with must be an array of module names",
					   what, i, p->name);
		snprintf(where, sizeof(where), "grad_ready[%zu]: shared_with", i);
		err = use_module(m, what, listed, where,
				 json_object_get_string(e), &sh[k]);
		if (err)
			return err;
		p->nshared = k + 1;
	}
	return 0;
}

static int h200_params(struct mercury_model *m, const char *what, bool listed,
		       struct json_object *root, struct json_object *grads)
{
	const char *gdtype = DEFAULT_DTYPE, *mod, *dot;
	struct mercury_model_param *p;
	struct json_object *o, *v;
	int gsize = 4, esz, err;
	char where[256];
	size_t i, n;
	int64_t numel;

	if (json_object_object_get_ex(root, "grad_dtype", &v)) {
		gsize = dtype_of(what, "grad_dtype", v, &gdtype);
		if (gsize < 0)
			return gsize;
		gdtype = own(m, gdtype, strlen(gdtype));
		if (!gdtype)
			return -ENOMEM;
	}
	n = json_object_array_length(grads);
	if (!n)
		return mercury_err(EINVAL, "%s: \"grad_ready\" is empty", what);
	m->params = calloc(n, sizeof(*m->params));
	if (!m->params)
		return mercury_err(ENOMEM, "profile: out of memory");
	for (i = 0; i < n; i++) {
		o = json_object_array_get_idx(grads, i);
		p = &m->params[i];
		m->nparams = i + 1;	/* freed from here on */
		p->name = get_str(o, "param");
		mod = get_str(o, "module");
		if (!p->name || !*p->name || (mod && !*mod) ||
		    (!mod && json_object_object_get_ex(o, "module", &v) && v) ||
		    !json_object_object_get_ex(o, "numel", &v) ||
		    !json_object_is_type(v, json_type_int) ||
		    (numel = json_object_get_int64(v)) < 0 ||
		    (uint64_t)numel > MAX_NUMEL || opt_num(o, "ready_ms", &p->ready_ms))
			return mercury_err(EINVAL,
					   "%s: grad_ready[%zu]: needs string \"param\", string or null \"module\", integer \"numel\" in 0..2^40 and ready_ms >= 0",
					   what, i);
		p->name = own(m, p->name, strlen(p->name));
		if (!p->name)
			return -ENOMEM;
		p->module_idx = MERCURY_MODEL_NONE;
		if (mod) {
			snprintf(where, sizeof(where), "grad_ready[%zu]", i);
			err = use_module(m, what, listed, where, mod,
					 &p->module_idx);
			if (err)
				return err;
			p->module = m->mods[p->module_idx].name;
			p->owner = p->module;
		} else {
			/* Owned by a non-leaf module: its parent path. */
			dot = strrchr(p->name, '.');
			p->owner = own(m, p->name, dot ? (size_t)(dot - p->name) : 0);
			if (!p->owner)
				return -ENOMEM;
		}
		err = h200_shared(m, what, listed, i, o, p);
		if (err)
			return err;
		esz = gsize;
		p->dtype = gdtype;
		if (json_object_object_get_ex(o, "dtype", &v)) {
			snprintf(where, sizeof(where), "grad_ready[%zu] (%.200s): dtype",
				 i, p->name);
			esz = dtype_of(what, where, v, &p->dtype);
			if (esz < 0)
				return esz;
			p->dtype = own(m, p->dtype, strlen(p->dtype));
			if (!p->dtype)
				return -ENOMEM;
		}
		p->numel = numel;
		p->elem_size = esz;
		p->bytes = (uint64_t)esz * numel;
	}
	return 0;
}

static int h200_edges(struct mercury_model *m, const char *what, bool listed,
		      struct json_object *root)
{
	struct json_object *edges, *e, *a, *b;
	char where[48];
	size_t i, n;
	int err;

	if (!json_object_object_get_ex(root, "edges", &edges) || !edges)
		return 0;
	if (!json_object_is_type(edges, json_type_array))
		return mercury_err(EINVAL, "%s: edges must be an array or null",
				   what);
	m->has_edges = true;
	n = json_object_array_length(edges);
	m->edges = calloc(n ? n : 1, sizeof(*m->edges));
	if (!m->edges)
		return mercury_err(ENOMEM, "profile: out of memory");
	for (i = 0; i < n; i++) {
		e = json_object_array_get_idx(edges, i);
		a = json_object_array_get_idx(e, 0);
		b = json_object_array_get_idx(e, 1);
		if (!json_object_is_type(e, json_type_array) ||
		    json_object_array_length(e) != 2 ||
		    !json_object_is_type(a, json_type_string) ||
		    !json_object_is_type(b, json_type_string))
			return mercury_err(EINVAL,
					   "%s: edges[%zu] is not a [src, dst] pair",
					   what, i);
		snprintf(where, sizeof(where), "edges[%zu]", i);
		err = use_module(m, what, listed, where, json_object_get_string(a),
				 &m->edges[i].src);
		if (!err)
			err = use_module(m, what, listed, where,
					 json_object_get_string(b),
					 &m->edges[i].dst);
		if (err)
			return err;
		m->nedges = i + 1;
	}
	return 0;
}

static int h200_load(struct mercury_model *m, const char *what,
		     struct json_object *root)
{
	struct json_object *calls, *grads, *mods = NULL, *it;
	const char *model;
	bool listed;
	size_t i;
	int err;

	if (!json_object_is_type(root, json_type_object))
		return mercury_err(EINVAL, "%s: top level must be an object", what);
	if (!json_object_object_get_ex(root, "forward_calls", &calls) ||
	    !json_object_is_type(calls, json_type_array) ||
	    !json_object_object_get_ex(root, "grad_ready", &grads) ||
	    !json_object_is_type(grads, json_type_array))
		return mercury_err(EINVAL,
				   "%s: not a profile (needs arrays \"forward_calls\" and \"grad_ready\")",
				   what);
	m->format = MERCURY_MODEL_H200;
	model = get_str(root, "model");
	if (model && *model && !(m->model = strdup(model)))
		return mercury_err(ENOMEM, "profile: out of memory");
	m->fwd_ms = m->bwd_ms = -1;
	if (json_object_object_get_ex(root, "iteration_ms", &it) &&
	    (opt_num(it, "fwd_ms", &m->fwd_ms) ||
	     opt_num(it, "bwd_ms", &m->bwd_ms) || m->fwd_ms < 0 ||
	     m->bwd_ms < 0))
		return mercury_err(EINVAL,
				   "%s: iteration_ms.fwd_ms/bwd_ms missing or not numbers >= 0",
				   what);
	if (json_object_object_get_ex(root, "modules", &mods) && mods &&
	    !json_object_is_type(mods, json_type_array))
		return mercury_err(EINVAL, "%s: modules must be an array", what);
	listed = mods;
	err = mods ? h200_modules(m, what, mods) : 0;
	err = err ?: h200_calls(m, what, listed, calls);
	err = err ?: index_uses(m);
	err = err ?: h200_params(m, what, listed, root, grads);
	err = err ?: h200_edges(m, what, listed, root);
	if (err)
		return err;
	for (i = 0; i < m->nparams; i++) {
		struct mercury_model_param *p = &m->params[i];

		p->gate = p->module_idx != MERCURY_MODEL_NONE &&
			  m->mods[p->module_idx].first_call != MERCURY_MODEL_NONE ?
			  m->mods[p->module_idx].first_call :
			  mercury_model_first_use(m, p->owner);
	}
	return 0;
}

/* ---- PipeDream graph.txt ------------------------------------------------------- */

/* "key=value" or "key=[a; b]" (a sum) after a separator; 0 or -errno. */
static int pd_value(const char *s, const char *key, double *out)
{
	const char *p = s;
	size_t kl = strlen(key);
	char *end;
	double v, sum = 0;

	for (;;) {
		p = strstr(p, key);
		if (!p)
			return -ENOENT;
		if ((p == s || p[-1] == ' ' || p[-1] == ',') && p[kl] == '=')
			break;
		p++;
	}
	p += kl + 1;
	if (*p != '[') {
		*out = strtod(p, &end);
		if (end == p || !isfinite(*out))
			return -EINVAL;
		return *out < 0 ? -ERANGE : 0;
	}
	/* a multi-output node: the sum of its outputs */
	for (p++;; p = end) {
		v = strtod(p, &end);
		if (end == p || !isfinite(v))
			return -EINVAL;
		if (v < 0)
			return -ERANGE;
		sum += v;
		while (*end == ' ')
			end++;
		if (*end == ']')
			break;
		if (*end != ';')
			return -EINVAL;
		end++;
	}
	*out = sum;
	return isfinite(sum) ? 0 : -EINVAL;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

static int pd_edge(struct mercury_model *m, const char *what, size_t lineno,
		   char *s, char *sep)
{
	struct mercury_model_edge *e;
	char *a, *b = trim(sep + 4);

	*sep = 0;
	a = trim(s);
	if (grow((void **)&m->edges, &m->capedges, m->nedges, sizeof(*m->edges)))
		return -ENOMEM;
	e = &m->edges[m->nedges];
	e->src = mercury_model_find_module(m, a);
	e->dst = mercury_model_find_module(m, b);
	if (e->src == MERCURY_MODEL_NONE || e->dst == MERCURY_MODEL_NONE)
		return mercury_err(EINVAL, "%s:%zu: edge %s -- %s names a missing node",
				   what, lineno, a, b);
	m->nedges++;
	return 0;
}

static int pd_node(struct mercury_model *m, const char *what, size_t lineno,
		   char *s, char *sep)
{
	static const char *const keys[] = { "forward_compute_time",
		"backward_compute_time", "activation_size", "parameter_size" };
	struct mercury_model_node *nd;
	char *last = sep, *p, *name, *op;
	double v[4];
	size_t idx;
	int k, r;

	for (p = strstr(sep + 4, " -- "); p; p = strstr(p + 4, " -- "))
		last = p;
	if (last == sep)
		return mercury_err(EINVAL,
				   "%s:%zu: node line needs 'name -- op -- key=value,...'",
				   what, lineno);
	*sep = 0;
	*last = 0;
	name = trim(s);
	op = trim(sep + 4);
	for (k = 0; k < 4; k++) {
		r = pd_value(last + 4, keys[k], &v[k]);
		if (r)
			return mercury_err(EINVAL, "%s:%zu: node %s: %s %s", what,
					   lineno, name, keys[k],
					   r == -ERANGE ? "is negative" :
					   r == -ENOENT ? "is missing" :
					   "is not a number");
	}
	if (mercury_model_find_module(m, name) != MERCURY_MODEL_NONE)
		return mercury_err(EINVAL, "%s:%zu: node %s defined twice", what,
				   lineno, name);
	r = add_module(m, what, name, 0, &idx);
	if (r)
		return r;
	if (grow((void **)&m->nodes, &m->capnodes, m->nnodes, sizeof(*m->nodes)))
		return -ENOMEM;
	nd = &m->nodes[m->nnodes++];
	nd->name = m->mods[idx].name;
	nd->op = own(m, op, strlen(op));
	if (!nd->op)
		return -ENOMEM;
	nd->fwd_ms = v[0];
	nd->bwd_ms = v[1];
	nd->act_bytes = v[2];
	nd->param_bytes = v[3];
	nd->param = MERCURY_MODEL_NONE;
	return 0;
}

static int pd_lines(struct mercury_model *m, const char *what,
		    const char *buf, size_t len)
{
	size_t off = 0, lineno = 0, n;
	const char *nl;
	char *line, *s, *sep;
	int err = 0;

	while (!err && off < len) {
		nl = memchr(buf + off, '\n', len - off);
		n = nl ? (size_t)(nl - buf - off) : len - off;
		lineno++;
		line = strndup(buf + off, n);	/* stops at a NUL: no crash */
		off += n + 1;
		if (!line)
			return mercury_err(ENOMEM, "profile: out of memory");
		s = trim(line);
		sep = strstr(s, " -- ");
		if (!*s)
			;
		else if (!sep)
			err = mercury_err(EINVAL,
					  "%s:%zu: expected 'a -- b' or 'node -- op -- key=value,...'",
					  what, lineno);
		else if (line[0] == '\t' || line[0] == ' ')
			err = pd_edge(m, what, lineno, s, sep);
		else
			err = pd_node(m, what, lineno, s, sep);
		free(line);
	}
	if (!err && !m->nnodes)
		err = mercury_err(EINVAL, "%s: no nodes", what);
	return err;
}

/* Numeric part of a node id ("node12" -> 12), the tie break of the order. */
static long pd_num(const char *id)
{
	while (*id && !isdigit((unsigned char)*id))
		id++;
	return strtol(id, NULL, 10);
}

static bool heap_less(const long *num, size_t a, size_t b)
{
	return num[a] != num[b] ? num[a] < num[b] : a < b;
}

static void heap_push(size_t *h, size_t *n, const long *num, size_t v)
{
	size_t i = (*n)++, up;

	for (; i && heap_less(num, v, h[up = (i - 1) / 2]); i = up)
		h[i] = h[up];
	h[i] = v;
}

static size_t heap_pop(size_t *h, size_t *n, const long *num)
{
	size_t top = h[0], v = h[--*n], i = 0, c;

	for (; (c = 2 * i + 1) < *n; i = c) {
		if (c + 1 < *n && heap_less(num, h[c + 1], h[c]))
			c++;
		if (!heap_less(num, h[c], v))
			break;
		h[i] = h[c];
	}
	h[i] = v;
	return top;
}

/*
 * Forward order: Kahn's topological sort, the lowest node number first
 * among ready nodes (the earlier line on a tie); backward is the reverse, each node's gradient ready
 * when its backward ends.
 */
static int pd_order(struct mercury_model *m, const char *what)
{
	size_t n = m->nnodes, i, k, best, *nin, *off, *adj, *order, np = 0;
	size_t *heap, nheap = 0;
	long *num;
	double t = 0;
	int err = 0;

	nin = calloc(n, sizeof(*nin));
	off = calloc(n + 1, sizeof(*off));
	adj = calloc(m->nedges ? m->nedges : 1, sizeof(*adj));
	order = calloc(n, sizeof(*order));
	num = calloc(n, sizeof(*num));
	heap = calloc(n, sizeof(*heap));
	m->calls = calloc(n, sizeof(*m->calls));
	m->params = calloc(n, sizeof(*m->params));
	if (!nin || !off || !adj || !order || !num || !heap || !m->calls ||
	    !m->params) {
		err = mercury_err(ENOMEM, "profile: out of memory");
		goto out;
	}
	for (i = 0; i < m->nedges; i++) {
		nin[m->edges[i].dst]++;
		off[m->edges[i].src + 1]++;
	}
	for (i = 0; i < n; i++) {
		off[i + 1] += off[i];
		num[i] = pd_num(m->nodes[i].name);
	}
	{
		size_t *fill = order;	/* scratch until the sort */

		for (i = 0; i < m->nedges; i++)
			adj[off[m->edges[i].src] + fill[m->edges[i].src]++] =
				m->edges[i].dst;
		memset(order, 0, n * sizeof(*order));
	}
	/* ready nodes in a heap ordered by (number, file position) */
	for (i = 0; i < n; i++)
		if (!nin[i])
			heap_push(heap, &nheap, num, i);
	for (k = 0; k < n; k++) {
		if (!nheap) {
			err = mercury_err(EINVAL, "%s: graph has a cycle", what);
			goto out;
		}
		best = heap_pop(heap, &nheap, num);
		order[k] = best;
		for (i = off[best]; i < off[best + 1]; i++)
			if (!--nin[adj[i]])
				heap_push(heap, &nheap, num, adj[i]);
	}
	m->fwd_ms = 0;
	for (k = 0; k < n; k++) {
		const struct mercury_model_node *nd = &m->nodes[order[k]];

		m->calls[k].module = nd->name;
		m->calls[k].module_idx = order[k];
		m->calls[k].start_ms = m->fwd_ms;
		m->calls[k].fwd_ms = nd->fwd_ms;
		m->calls[k].out_bytes = nd->act_bytes;
		m->mods[order[k]].first_call = k;
		m->fwd_ms += nd->fwd_ms;
	}
	m->ncalls = n;
	err = index_uses(m);
	if (err)
		goto out;
	for (k = n; k-- > 0;) {
		struct mercury_model_node *nd = &m->nodes[order[k]];
		struct mercury_model_param *p = &m->params[np];
		char name[512];
		int len;

		t += nd->bwd_ms;
		if (!(nd->param_bytes > 0))
			continue;
		len = snprintf(name, sizeof(name), "%s.param", nd->name);
		p->name = own(m, name, len < 0 ? 0 : (size_t)len);
		if (!p->name) {
			err = -ENOMEM;
			goto out;
		}
		if (!(nd->param_bytes < 0x1p63)) {
			err = mercury_err(ERANGE, "%s: node %s: parameter_size too large",
					  what, nd->name);
			goto out;
		}
		p->module = p->owner = nd->name;
		p->module_idx = order[k];
		p->dtype = DEFAULT_DTYPE;
		p->elem_size = 4;
		/* PipeDream gives bytes, not elements */
		p->bytes = (uint64_t)(nd->param_bytes + 0.5);	/* rounded */
		p->numel = p->bytes / p->elem_size;
		p->ready_ms = t;
		p->gate = k;
		nd->param = np++;
		m->nparams = np;
	}
	m->bwd_ms = t;
out:
	free(nin);
	free(off);
	free(adj);
	free(order);
	free(num);
	free(heap);
	return err;
}

static int pd_load(struct mercury_model *m, const char *what, const char *buf,
		   size_t len)
{
	const char *base = strrchr(what, '/'), *dot;
	int err;

	m->format = MERCURY_MODEL_PIPEDREAM;
	base = base ? base + 1 : what;
	dot = strstr(base, ".graph");
	m->model = strndup(base, dot ? (size_t)(dot - base) : strlen(base));
	if (!m->model)
		return mercury_err(ENOMEM, "profile: out of memory");
	err = pd_lines(m, what, buf, len);
	return err ?: pd_order(m, what);
}

/* ---- entry points ---------------------------------------------------------------- */

MERCURY_API int mercury_model_load_buf(const char *buf, size_t len,
				       const char *name,
				       struct mercury_model **out)
{
	struct json_object *root = NULL;
	struct mercury_model *m;
	char why[256];
	size_t i;
	int err;

	if (!out || (!buf && len))
		return mercury_err(EINVAL, "profile: NULL argument");
	*out = NULL;
	if (!name)
		name = "profile";
	if (len > MERCURY_MAX_INPUT)
		return mercury_err(EFBIG, "%s: longer than %u MiB: not a profile",
				   name, MERCURY_MAX_INPUT >> 20);
	for (i = 0; i < len && isspace((unsigned char)buf[i]); i++)
		;
	if (i == len)
		return mercury_err(EINVAL, "%s: empty file", name);
	m = calloc(1, sizeof(*m));
	if (!m || !(m->index = json_object_new_object())) {
		free(m);
		return mercury_err(ENOMEM, "profile: out of memory");
	}
	if (buf[i] == '{' || buf[i] == '[') {
		err = mercury_parse_json("not valid JSON", buf, len, &root);
		if (err) {
			snprintf(why, sizeof(why), "%s", mercury_last_error());
			err = mercury_err(-err, "%s: %s", name, why);
		} else {
			err = h200_load(m, name, root);
			m->root = json_object_get(root);
		}
	} else {
		err = pd_load(m, name, buf, len);
	}
	json_object_put(root);
	if (err) {
		mercury_model_free(m);
		return mercury_ret(err);
	}
	*out = m;
	return 0;
}

MERCURY_API int mercury_model_load(const char *path, struct mercury_model **out)
{
	size_t len;
	char *buf;
	int err;

	if (!out || !path)
		return mercury_err(EINVAL, "profile: NULL argument");
	*out = NULL;
	err = mercury_read_file(path, &buf, &len);
	if (err)
		return err;
	err = mercury_model_load_buf(buf, len, path, out);
	free(buf);
	return err;
}

MERCURY_API int mercury_model_get_info(const struct mercury_model *m,
				       struct mercury_model_info *info,
				       size_t sz)
{
	struct mercury_model_info i = { 0 };
	size_t k;

	if (!m || !info)
		return mercury_err(EINVAL, "profile info: NULL argument");
	i.format = m->format;
	i.model = m->model;
	i.fwd_ms = m->fwd_ms;
	i.bwd_ms = m->bwd_ms;
	i.nmodules = m->nmods;
	i.ncalls = m->ncalls;
	i.nparams = m->nparams;
	i.nedges = m->nedges;
	i.nnodes = m->nnodes;
	i.has_edges = m->has_edges || m->format == MERCURY_MODEL_PIPEDREAM;
	i.timed = m->fwd_ms >= 0 && m->bwd_ms >= 0;
	for (k = 0; k < m->ncalls; k++)
		i.timed &= m->calls[k].start_ms >= 0 && m->calls[k].fwd_ms >= 0;
	for (k = 0; k < m->nparams; k++) {
		i.timed &= m->params[k].ready_ms >= 0;
		i.total_bytes += m->params[k].bytes;
	}
	/* A caller built against an older header gets the fields it knows. */
	memcpy(info, &i, sz < sizeof(i) ? sz : sizeof(i));
	return 0;
}

#define MODEL_GET(fn, type, arr, cnt)					\
MERCURY_API const struct type *fn(const struct mercury_model *m, size_t i)	\
{									\
	if (!m || i >= m->cnt) {					\
		errno = ENOENT;						\
		return NULL;						\
	}								\
	return &m->arr[i];						\
}

MODEL_GET(mercury_model_module, mercury_model_module, mods, nmods)
MODEL_GET(mercury_model_call, mercury_model_call, calls, ncalls)
MODEL_GET(mercury_model_param, mercury_model_param, params, nparams)
MODEL_GET(mercury_model_edge, mercury_model_edge, edges, nedges)
MODEL_GET(mercury_model_node, mercury_model_node, nodes, nnodes)

MERCURY_API int mercury_model_set_numel(struct mercury_model *m, size_t i,
					uint64_t numel)
{
	struct json_object *grads, *o, *v;
	struct mercury_model_param *p;

	if (!m || i >= m->nparams)
		return mercury_err(EINVAL, "profile: no parameter %zu", i);
	if (m->format != MERCURY_MODEL_H200)
		return mercury_err(EOPNOTSUPP,
				   "profile: only h200 JSON profiles can be changed");
	if (numel > MAX_NUMEL)
		return mercury_err(ERANGE, "profile: numel %llu above 2^40",
				   (unsigned long long)numel);
	p = &m->params[i];
	/* the reader checked the shape: grad_ready[i] is an object */
	json_object_object_get_ex(m->root, "grad_ready", &grads);
	o = json_object_array_get_idx(grads, i);
	v = json_object_new_int64(numel);
	if (!v || json_object_object_add(o, "numel", v)) {
		json_object_put(v);
		return mercury_err(ENOMEM, "profile: out of memory");
	}
	p->numel = numel;
	p->bytes = numel * p->elem_size;
	return 0;
}

MERCURY_API int mercury_model_save(const struct mercury_model *m,
				   const char *path)
{
	const char *s;
	size_t len;

	if (!m || !path)
		return mercury_err(EINVAL, "profile save: NULL argument");
	if (m->format != MERCURY_MODEL_H200)
		return mercury_err(EOPNOTSUPP,
				   "profile: only h200 JSON profiles can be saved");
	s = json_object_to_json_string_length(m->root, JSON_C_TO_STRING_PLAIN,
					      &len);
	if (!s)
		return mercury_err(ENOMEM, "profile: out of memory");
	return mercury_write_file(path, s, len);
}
