// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Profile readers.  Two formats (see profiles/README.md):
 *
 *  - h200 *.json: forward_calls give the forward timeline, grad_ready the
 *    backward release times.  Each call is charged the time from its own
 *    start to the next call's start (at least its own fwd_ms), so gaps
 *    between leaf modules (functional ops, residual adds, the loss) stay
 *    in the forward pass and a stall-free forward lasts what was measured.
 *  - pipedream *.graph.txt: an operator graph; forward runs in topological
 *    order, backward in the reverse order, and each operator with
 *    parameters releases one tensor when its backward ends.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "msim.h"

static int perr(char *err, size_t len, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int perr(char *err, size_t len, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return ret;
}

void msim_profile_free(struct msim_profile *prof)
{
	int i;

	if (!prof)
		return;
	for (i = 0; i < prof->ntensors; i++)
		free(prof->tensors[i].name);
	free(prof->tensors);
	free(prof->call_ms);
	free(prof->model);
	memset(prof, 0, sizeof(*prof));
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* A finite, non-negative number held by key in obj. */
static int get_num(json_object *obj, const char *key, double *out)
{
	json_object *v;
	double d;

	if (!json_object_object_get_ex(obj, key, &v))
		return -ENOENT;
	if (!json_object_is_type(v, json_type_double) &&
	    !json_object_is_type(v, json_type_int))
		return -EINVAL;
	d = json_object_get_double(v);
	if (!isfinite(d) || d < 0)
		return -ERANGE;
	*out = d;
	return 0;
}

static const char *get_str(json_object *obj, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static json_object *get_array(json_object *obj, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) ||
	    !json_object_is_type(v, json_type_array))
		return NULL;
	return v;
}

/*
 * The forward call that first needs module's parameters.  A module that is
 * never called as a leaf (torch's MultiheadAttention reads its out_proj
 * weight functionally) is gated at the first call inside its closest
 * called ancestor; failing everything, at call 0 (the most urgent).
 */
static int find_gate(const char **mods, int ncalls, const char *module)
{
	char prefix[512];
	size_t plen;
	int i;

	for (i = 0; i < ncalls; i++)
		if (!strcmp(mods[i], module))
			return i;
	snprintf(prefix, sizeof(prefix), "%s", module);
	for (;;) {
		char *dot = strrchr(prefix, '.');

		if (!dot)
			return 0;
		*dot = '\0';
		plen = strlen(prefix);
		for (i = 0; i < ncalls; i++)
			if (!strncmp(mods[i], prefix, plen) &&
			    (mods[i][plen] == '.' || mods[i][plen] == '\0'))
				return i;
	}
}

static int load_h200(const char *path, struct msim_profile *prof,
		     char *err, size_t errlen)
{
	json_object *root, *iter, *calls, *grads;
	const char **mods = NULL;
	double *start = NULL, *dur = NULL;
	const char *model;
	double fwd, bwd;
	int i, n, ret;

	root = json_object_from_file(path);
	if (!root)
		return perr(err, errlen, -EINVAL, "%s: not readable JSON: %s",
			    path, json_util_get_last_err());
	ret = -EINVAL;
	if (!json_object_is_type(root, json_type_object)) {
		perr(err, errlen, ret, "%s: top level is not an object", path);
		goto out;
	}
	model = get_str(root, "model");
	if (!model || !*model) {
		perr(err, errlen, ret, "%s: missing string \"model\"", path);
		goto out;
	}
	if (!json_object_object_get_ex(root, "iteration_ms", &iter) ||
	    get_num(iter, "fwd_ms", &fwd) || get_num(iter, "bwd_ms", &bwd)) {
		perr(err, errlen, ret,
		     "%s: \"iteration_ms\" needs non-negative fwd_ms and bwd_ms",
		     path);
		goto out;
	}
	calls = get_array(root, "forward_calls");
	grads = get_array(root, "grad_ready");
	if (!calls || !json_object_array_length(calls)) {
		perr(err, errlen, ret, "%s: \"forward_calls\" missing or empty",
		     path);
		goto out;
	}
	if (!grads || !json_object_array_length(grads)) {
		perr(err, errlen, ret, "%s: \"grad_ready\" missing or empty",
		     path);
		goto out;
	}

	n = json_object_array_length(calls);
	mods = calloc(n, sizeof(*mods));
	start = calloc(n, sizeof(*start));
	dur = calloc(n, sizeof(*dur));
	prof->call_ms = calloc(n, sizeof(*prof->call_ms));
	prof->model = strdup(model);
	if (!mods || !start || !dur || !prof->call_ms || !prof->model) {
		ret = perr(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	prof->ncalls = n;
	for (i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(calls, i);

		mods[i] = c ? get_str(c, "module") : NULL;
		if (!mods[i] || get_num(c, "start_ms", &start[i]) ||
		    get_num(c, "fwd_ms", &dur[i])) {
			perr(err, errlen, ret,
			     "%s: forward_calls[%d] needs module, start_ms, fwd_ms (non-negative numbers)",
			     path, i);
			goto out;
		}
		if (i && start[i] < start[i - 1]) {
			perr(err, errlen, ret,
			     "%s: forward_calls[%d] starts before the previous call",
			     path, i);
			goto out;
		}
	}
	/* Timeline attribution: see the header comment. */
	prof->prelude_ms = start[0];
	prof->fwd_ms = start[0];
	for (i = 0; i < n; i++) {
		double until = i + 1 < n ? start[i + 1] : fwd;
		double d = until - start[i];

		prof->call_ms[i] = d > dur[i] ? d : dur[i];
		prof->fwd_ms += prof->call_ms[i];
	}

	n = json_object_array_length(grads);
	prof->tensors = calloc(n, sizeof(*prof->tensors));
	if (!prof->tensors) {
		ret = perr(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	prof->bwd_ms = bwd;
	for (i = 0; i < n; i++) {
		json_object *g = json_object_array_get_idx(grads, i);
		struct msim_tensor *t = &prof->tensors[i];
		const char *name = g ? get_str(g, "param") : NULL;
		const char *mod = g ? get_str(g, "module") : NULL;
		char owner[512];
		json_object *nv;
		int64_t numel;

		/* vit_b_16's attention in_proj has "module": null: the owner
		 * is then the parameter name without its last component. */
		if (name && !mod) {
			char *dot;

			snprintf(owner, sizeof(owner), "%s", name);
			dot = strrchr(owner, '.');
			if (dot)
				*dot = '\0';
			mod = owner;
		}
		if (!name || get_num(g, "ready_ms", &t->ready_ms) ||
		    !json_object_object_get_ex(g, "numel", &nv) ||
		    !json_object_is_type(nv, json_type_int)) {
			perr(err, errlen, ret,
			     "%s: grad_ready[%d] needs param, integer numel, ready_ms",
			     path, i);
			goto out;
		}
		numel = json_object_get_int64(nv);
		if (numel <= 0 || numel > (int64_t)1 << 40) {
			perr(err, errlen, ret,
			     "%s: grad_ready[%d] numel %lld out of range",
			     path, i, (long long)numel);
			goto out;
		}
		t->name = strdup(name);
		if (!t->name) {
			ret = perr(err, errlen, -ENOMEM, "out of memory");
			goto out;
		}
		prof->ntensors = i + 1;
		t->bytes = 4 * (uint64_t)numel;
		t->gate = find_gate(mods, prof->ncalls, mod);
		t->prio = t->gate;
		prof->total_bytes += t->bytes;
		/* A release after the measured end stretches backward. */
		if (t->ready_ms > prof->bwd_ms)
			prof->bwd_ms = t->ready_ms;
	}
	ret = 0;
out:
	free(mods);
	free(start);
	free(dur);
	json_object_put(root);
	return ret;
}

struct pd_node {
	char id[32];
	double fwd, bwd, params;
	int nin;		/* unsatisfied predecessors (topo sort) */
	long num;		/* numeric part of the id, for tie breaks */
	int done;
};

static int pd_find(struct pd_node *v, int n, const char *id)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(v[i].id, id))
			return i;
	return -1;
}

/* "key=value" inside s; -1 if missing or malformed. */
static int pd_field(const char *s, const char *key, double *out)
{
	const char *p = strstr(s, key);
	char *end;

	if (!p)
		return -1;
	p += strlen(key);
	errno = 0;
	*out = strtod(p, &end);
	if (end == p || errno || !isfinite(*out) || *out < 0)
		return -1;
	return 0;
}

static int load_pipedream(const char *path, struct msim_profile *prof,
			  char *err, size_t errlen)
{
	struct pd_node *v = NULL;
	int (*edge)[2] = NULL;
	int n = 0, cap = 0, ne = 0, ecap = 0, lineno = 0, i, k, ret;
	int *order = NULL, *pos = NULL;
	char *line = NULL;
	size_t lcap = 0;
	const char *base;
	double t;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return perr(err, errlen, -errno, "%s: %s", path,
			    strerror(errno));
	ret = -EINVAL;
	while (getline(&line, &lcap, f) > 0) {
		char a[32], b[32];

		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (!*line)
			continue;
		if (line[0] == '\t') {
			if (sscanf(line, " %31s -- %31s", a, b) != 2) {
				perr(err, errlen, ret, "%s:%d: bad edge line",
				     path, lineno);
				goto out;
			}
			if (ne == ecap) {
				void *p;

				ecap = ecap ? 2 * ecap : 64;
				p = realloc(edge, ecap * sizeof(*edge));
				if (!p)
					goto nomem;
				edge = p;
			}
			/* Endpoints are resolved after all nodes are read. */
			edge[ne][0] = -1;
			edge[ne][1] = -1;
			i = pd_find(v, n, a);
			k = pd_find(v, n, b);
			if (i < 0 || k < 0) {
				perr(err, errlen, ret,
				     "%s:%d: edge names an unknown node",
				     path, lineno);
				goto out;
			}
			edge[ne][0] = i;
			edge[ne][1] = k;
			ne++;
			continue;
		}
		if (n == cap) {
			void *p;

			cap = cap ? 2 * cap : 64;
			p = realloc(v, cap * sizeof(*v));
			if (!p)
				goto nomem;
			v = p;
		}
		memset(&v[n], 0, sizeof(v[n]));
		if (sscanf(line, "%31s --", v[n].id) != 1 ||
		    pd_find(v, n, v[n].id) >= 0 ||
		    pd_field(line, "forward_compute_time=", &v[n].fwd) ||
		    pd_field(line, "backward_compute_time=", &v[n].bwd) ||
		    pd_field(line, "parameter_size=", &v[n].params)) {
			perr(err, errlen, ret,
			     "%s:%d: bad or duplicate node line", path, lineno);
			goto out;
		}
		for (k = 0; v[n].id[k] && !isdigit((unsigned char)v[n].id[k]);
		     k++)
			;
		v[n].num = strtol(v[n].id + k, NULL, 10);
		n++;
	}
	if (!n) {
		perr(err, errlen, ret, "%s: no nodes", path);
		goto out;
	}

	/* Kahn's topological sort, lowest node number first on ties. */
	order = calloc(n, sizeof(*order));
	pos = calloc(n, sizeof(*pos));
	if (!order || !pos)
		goto nomem;
	for (i = 0; i < ne; i++)
		v[edge[i][1]].nin++;
	for (k = 0; k < n; k++) {
		int best = -1;

		for (i = 0; i < n; i++)
			if (!v[i].done && !v[i].nin &&
			    (best < 0 || v[i].num < v[best].num))
				best = i;
		if (best < 0) {
			perr(err, errlen, ret, "%s: graph has a cycle", path);
			goto out;
		}
		v[best].done = 1;
		order[k] = best;
		pos[best] = k;
		for (i = 0; i < ne; i++)
			if (edge[i][0] == best)
				v[edge[i][1]].nin--;
	}

	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	prof->model = strndup(base, strlen(base) - strlen(".graph.txt"));
	prof->call_ms = calloc(n, sizeof(*prof->call_ms));
	prof->tensors = calloc(n, sizeof(*prof->tensors));
	if (!prof->model || !prof->call_ms || !prof->tensors)
		goto nomem;
	prof->ncalls = n;
	for (k = 0; k < n; k++) {
		prof->call_ms[k] = v[order[k]].fwd;
		prof->fwd_ms += v[order[k]].fwd;
	}
	t = 0;
	for (k = n - 1; k >= 0; k--) {
		struct pd_node *nd = &v[order[k]];
		struct msim_tensor *tn;

		t += nd->bwd;
		if (nd->params < 1)
			continue;
		tn = &prof->tensors[prof->ntensors];
		tn->name = strdup(nd->id);
		if (!tn->name)
			goto nomem;
		prof->ntensors++;
		tn->bytes = (uint64_t)llround(nd->params);
		tn->ready_ms = t;
		tn->gate = k;
		tn->prio = k;
		prof->total_bytes += tn->bytes;
	}
	prof->bwd_ms = t;
	if (!prof->ntensors) {
		perr(err, errlen, ret, "%s: no node has parameters", path);
		goto out;
	}
	ret = 0;
	goto out;
nomem:
	ret = perr(err, errlen, -ENOMEM, "out of memory");
out:
	free(order);
	free(pos);
	free(edge);
	free(v);
	free(line);
	fclose(f);
	return ret;
}

int msim_profile_load(const char *path, struct msim_profile *prof,
		      char *err, size_t errlen)
{
	int ret;

	memset(prof, 0, sizeof(*prof));
	if (!path || !*path)
		return perr(err, errlen, -EINVAL, "no profile given");
	if (ends_with(path, ".graph.txt"))
		ret = load_pipedream(path, prof, err, errlen);
	else
		ret = load_h200(path, prof, err, errlen);
	if (ret)
		msim_profile_free(prof);
	return ret;
}
