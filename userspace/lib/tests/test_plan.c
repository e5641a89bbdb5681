// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Plans: solver JSON, malformed input, default plan from profiles. */
#include <sys/stat.h>

#include <json.h>

#include "helpers.h"

static void test_load_ok(void **state)
{
	struct mercury_plan_entry e;
	struct mercury_plan *p;

	(void)state;
	assert_int_equal(mercury_plan_load(TESTDATA "/plan_ok.json", &p), 0);
	assert_int_equal(mercury_plan_size(p), 4);
	assert_int_equal(mercury_plan_max_tag(p), 65535);
	assert_int_equal(mercury_plan_lookup(p, "conv1.weight"), 1);
	assert_int_equal(mercury_plan_lookup(p, "bn1.bias"), 2);
	assert_int_equal(mercury_plan_lookup(p, "bn1.weight"), 3);
	assert_int_equal(mercury_plan_lookup(p, "fc.weight"), 65535);
	assert_int_equal(mercury_plan_lookup(p, "fc.bias"), -ENOENT);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(mercury_plan_lookup(p, "conv1.weigh"), -ENOENT);
	assert_int_equal(mercury_plan_entry(p, 3, &e), 0);
	assert_string_equal(e.tensor, "fc.weight");
	assert_int_equal(e.bytes, 8192000);
	assert_string_equal(e.src, "gpu1");
	assert_string_equal(e.dst, "ps1");
	assert_int_equal(mercury_plan_entry(p, 2, &e), 0);
	assert_string_equal(e.src, "");		/* absent: empty */
	assert_int_equal(mercury_plan_entry(p, 4, &e), -ENOENT);
	mercury_plan_free(p);
}

struct bad_case {
	const char *json;
	int err;
	const char *msg;		/* substring of mercury_last_error() */
};

static const struct bad_case bad[] = {
	{ "", EINVAL, "empty: no JSON value" },
	{ " \n", EINVAL, "empty: no JSON value" },
	{ "{\"priorities\": [", EINVAL, "truncated JSON" },
	{ "{\"priorities\": []}\n}", EINVAL, "trailing data" },
	{ "{\n\"priorities\": [,]}", EINVAL, "line 2: invalid JSON" },
	{ "[]", EINVAL, "top level must be an object" },
	{ "{\"model\": \"x\"}", EINVAL, "no \"priorities\" key" },
	{ "{\"priorities\": {}}", EINVAL, "\"priorities\" must be an array" },
	{ "{\"priorities\": [1]}", EINVAL, "priorities[0] must be an object" },
	{ "{\"priorities\": [{\"tag\": 1}]}", EINVAL,
	  "priorities[0]: \"tensor\" must be a non-empty string" },
	{ "{\"priorities\": [{\"tensor\": \"\", \"tag\": 1}]}", EINVAL,
	  "\"tensor\" must be a non-empty string" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 1},"
	  "{\"tensor\": \"b\", \"tag\": \"2\"}]}", EINVAL,
	  "priorities[1] (b): \"tag\" must be an integer" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 1.5}]}", EINVAL,
	  "\"tag\" must be an integer" },
	{ "{\"priorities\": [{\"tensor\": \"a\"}]}", EINVAL,
	  "\"tag\" must be an integer" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 0}]}", ERANGE,
	  "tag 0 outside 1..65535" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 65536}]}", ERANGE,
	  "tag 65536 outside" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": -3}]}", ERANGE,
	  "tag -3 outside" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 1, \"bytes\": -1}]}",
	  EINVAL, "\"bytes\" must be an integer in 0..2^53" },
	/* json-c reads 2^64 as INT64_MAX: refused, not taken */
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 1, \"bytes\": 18446744073709551616}]}",
	  EINVAL, "\"bytes\" must be an integer in 0..2^53" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 1, \"src\": 3}]}",
	  EINVAL, "\"src\" must be a string" },
	{ "{\"priorities\": [{\"tensor\": \"a\", \"tag\": 1},"
	  "{\"tensor\": \"a\", \"tag\": 2}]}", EINVAL,
	  "priorities[1]: tensor \"a\" appears twice" },
	/* format 1: the version, levels and tag settings are checked */
	{ "{\"mercury_plan\": 2, \"levels\": 1, \"priorities\": []}",
	  EPROTONOSUPPORT, "plan format 2 is not supported (this libmercury reads 0..1)" },
	{ "{\"mercury_plan\": 0, \"priorities\": []}", EPROTONOSUPPORT,
	  "plan format 0 is not supported" },
	{ "{\"mercury_plan\": \"1\", \"priorities\": []}", EINVAL,
	  "\"mercury_plan\" (the format version) must be an integer" },
	{ "{\"mercury_plan\": 1, \"priorities\": []}", EINVAL,
	  "format 1 needs \"levels\"" },
	{ "{\"mercury_plan\": 1, \"levels\": 65536, \"priorities\": []}",
	  ERANGE, "\"levels\" 65536 outside 0..65535" },
	{ "{\"mercury_plan\": 1, \"levels\": 2, \"priorities\": ["
	  "{\"tensor\": \"a\", \"tag\": 3}]}", ERANGE,
	  "priorities[0] (a): tag 3 above the plan's levels (2)" },
	{ "{\"mercury_plan\": 1, \"levels\": 1, \"tag_source\": \"tos\","
	  " \"priorities\": []}", EINVAL,
	  "\"tag_source\" must be \"mark\", \"priority\" or \"dscp\"" },
	{ "{\"mercury_plan\": 1, \"levels\": 1, \"shift\": 32,"
	  " \"priorities\": []}", ERANGE, "\"shift\" 32 outside 0..31" },
	{ "{\"mercury_plan\": 1, \"levels\": 1, \"mask\": 0,"
	  " \"priorities\": []}", ERANGE, "\"mask\" 0 outside" },
	{ "{\"mercury_plan\": 1, \"levels\": 64, \"tag_source\": \"dscp\","
	  " \"priorities\": []}", ERANGE,
	  "64 levels do not fit mask 0x3f; squeeze the plan to 63 levels" },
	/* every tag under these masks reads back as 0: all traffic untagged */
	{ "{\"mercury_plan\": 1, \"levels\": 8, \"mask\": 240,"
	  " \"priorities\": [{\"tensor\": \"a\", \"tag\": 8}]}", ERANGE,
	  "8 levels do not fit mask 0xf0: tag 1 would read back as 0" },
	{ "{\"mercury_plan\": 1, \"levels\": 8, \"mask\": 256,"
	  " \"priorities\": []}", ERANGE, "8 levels do not fit mask 0x100" },
	{ "{\"mercury_plan\": 1, \"levels\": 8, \"mask\": 4294901760,"
	  " \"priorities\": []}", ERANGE, "8 levels do not fit mask 0xffff0000" },
	{ "{\"mercury_plan\": 1, \"levels\": 8, \"mask\": 5,"
	  " \"priorities\": []}", ERANGE,
	  "8 levels do not fit mask 0x5; squeeze the plan to 1 levels" },
};

/*
 * The tag rule: tags that fit the levels go as they are; wider plans are
 * squeezed by the rank of their distinct tags, not by tag value (tags
 * 1, 5, 100 on 8 levels are 1, 2, 3); the value carries the shift.
 */
static void test_wire_tag(void **state)
{
	static const char json[] =
		"{\"mercury_plan\": 1, \"levels\": 100, \"shift\": 4,"
		" \"mask\": 255, \"priorities\": ["
		"{\"tensor\": \"a\", \"tag\": 1}, {\"tensor\": \"b\", \"tag\": 5},"
		"{\"tensor\": \"c\", \"tag\": 100}, {\"tensor\": \"d\", \"tag\": 5}]}";
	MERCURY_OPTS(mercury_plan_load_opts, o, .levels = 8, .squeeze = true);
	static const char *const names[] = { "a", "b", "c", "d" };
	static const unsigned int fits[] = { 1, 5, 100, 5 };
	static const unsigned int squeezed[] = { 1, 2, 3, 2 };
	struct mercury_plan *p;
	uint32_t v;
	size_t i;

	(void)state;
	assert_int_equal(mercury_plan_load_buf(json, strlen(json), &p), 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(mercury_plan_wire_tag(p, names[i], &v), fits[i]);
		assert_int_equal(v, fits[i] << 4);
	}
	assert_int_equal(mercury_plan_wire_tag(p, "e", &v), -ENOENT);
	mercury_plan_free(p);

	assert_int_equal(mercury_plan_load_buf_opts(json, strlen(json), &o, &p), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(mercury_plan_wire_tag(p, names[i], NULL),
				 squeezed[i]);
	mercury_plan_free(p);
}

/*
 * The same squeeze on the caller's own order (mercury_plan_squeeze_tags()):
 * what fits stays; ranks of more tensors than the wire has tags share
 * them evenly, the order kept, and a plan built from them loads.
 */
static void test_squeeze_tags(void **state)
{
	enum { N = 70000 };
	unsigned int fit[] = { 3, 1, 3 }, wide[] = { 100, 1, 5, 5 };
	static const unsigned int wide8[] = { 3, 1, 2, 2 };
	unsigned int *rank = calloc(N, sizeof(*rank)), zero = 0;
	struct mercury_plan *p;
	size_t i;

	(void)state;
	assert_non_null(rank);
	assert_int_equal(mercury_plan_squeeze_tags(fit, 3, 3), 0);
	assert_int_equal(fit[0], 3);
	assert_int_equal(fit[1], 1);
	assert_int_equal(mercury_plan_squeeze_tags(wide, 4, 8), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(wide[i], wide8[i]);
	assert_int_equal(mercury_plan_squeeze_tags(&zero, 1, 8), -EINVAL);
	assert_int_equal(mercury_plan_squeeze_tags(fit, 3, 0), -ERANGE);
	assert_int_equal(mercury_plan_squeeze_tags(fit, 3, 65536), -ERANGE);
	assert_int_equal(mercury_plan_squeeze_tags(NULL, 0, 8), 0);

	for (i = 0; i < N; i++)
		rank[i] = N - i;	/* most urgent last */
	assert_int_equal(mercury_plan_squeeze_tags(rank, N, MERCURY_MAX_TAG),
			 0);
	assert_int_equal(rank[N - 1], 1);
	assert_int_equal(rank[0], MERCURY_MAX_TAG);
	for (i = 1; i < N; i++)
		assert_true(rank[i] <= rank[i - 1] &&
			    rank[i - 1] - rank[i] <= 1);
	assert_int_equal(mercury_plan_new(&p), 0);
	for (i = 0; i < N; i++) {
		char name[32];
		struct mercury_plan_entry e = {
			.tensor = name, .tag = rank[i],
		};

		snprintf(name, sizeof(name), "t%zu", i);
		assert_int_equal(mercury_plan_add(p, &e), 0);
	}
	assert_int_equal(mercury_plan_max_tag(p), MERCURY_MAX_TAG);
	mercury_plan_free(p);
	free(rank);
}

static void test_load_bad(void **state)
{
	char dir[] = "/tmp/mercury-plan-XXXXXX", path[64];
	struct mercury_plan *p = (void *)1;
	size_t i;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/plan.json", dir);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(bad[i].json, f);
		fclose(f);
		errno = 0;
		p = (void *)1;
		if (mercury_plan_load(path, &p) != -bad[i].err ||
		    errno != bad[i].err || p ||
		    !strstr(mercury_last_error(), bad[i].msg) ||
		    !strstr(mercury_last_error(), path))
			fail_msg("case %zu (%s): got \"%s\", errno %d", i,
				 bad[i].json, mercury_last_error(), errno);
		/* The buffer variant gives the same verdict. */
		assert_int_equal(mercury_plan_load_buf(bad[i].json,
						       strlen(bad[i].json), &p),
				 -bad[i].err);
	}
	unlink(path);
	rmdir(dir);
	assert_int_equal(mercury_plan_load("/nonexistent/plan.json", &p),
			 -ENOENT);
	assert_non_null(strstr(mercury_last_error(), "/nonexistent/plan.json"));
	assert_int_equal(mercury_plan_load(TESTDATA, &p), -EISDIR);
	/* An endless input is refused after a bound, not read until memory
	 * runs out; the profile reader shares the bound.
	 */
	assert_int_equal(mercury_plan_load("/dev/zero", &p), -EFBIG);
	assert_null(p);
	assert_non_null(strstr(mercury_last_error(), "/dev/zero: longer than"));
	assert_int_equal(mercury_plan_from_profile("/dev/zero", NULL, &p),
			 -EFBIG);
	assert_null(p);
}

/* ---- default plan from profiles ----------------------------------------- */

/*
 * Check a per-tensor default plan against the rule, recomputed here from
 * the profile: tags are a permutation of 1..n; a module called earlier in
 * forward_calls gets smaller tags; inside a module, later grad_ready means
 * smaller tag; modules never called come after all called ones (reversed
 * grad_ready among themselves); bytes = 4 * numel.
 */
static void check_profile_plan(const char *model)
{
	struct json_object *root, *calls, *grads, *g, *fc, *v;
	char path[512];
	struct mercury_plan *p;
	size_t i, j, n, nc, nuncalled = 0;
	long *call, *tag;
	char owner[256];
	char *seen;

	snprintf(path, sizeof(path), PROFILES "/h200/%s.json", model);
	assert_int_equal(mercury_plan_from_profile(path, NULL, &p), 0);
	root = json_object_from_file(path);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "forward_calls", &calls));
	assert_true(json_object_object_get_ex(root, "grad_ready", &grads));
	n = json_object_array_length(grads);
	nc = json_object_array_length(calls);
	assert_int_equal(mercury_plan_size(p), n);
	assert_int_equal(mercury_plan_max_tag(p), n);
	call = calloc(n, sizeof(*call));
	tag = calloc(n, sizeof(*tag));
	seen = calloc(n + 1, 1);
	for (i = 0; i < n; i++) {
		const char *mod;

		(void)mod;
		g = json_object_array_get_idx(grads, i);
		json_object_object_get_ex(g, "module", &v);
		call[i] = -1;
		if (v) {
			mod = json_object_get_string(v);
			for (j = 0; j < nc && call[i] < 0; j++) {
				fc = json_object_array_get_idx(calls, j);
				json_object_object_get_ex(fc, "module", &v);
				if (!strcmp(json_object_get_string(v), mod))
					call[i] = j;
			}
			snprintf(owner, sizeof(owner), "%s", mod);
		} else {
			json_object_object_get_ex(g, "param", &v);
			snprintf(owner, sizeof(owner), "%s",
				 json_object_get_string(v));
			*(strrchr(owner, '.') ? strrchr(owner, '.') : owner) = 0;
		}
		/* Null or never-called module: nearest ancestor with calls. */
		while (call[i] < 0) {
			size_t pl = strlen(owner);

			for (j = 0; j < nc && call[i] < 0; j++) {
				const char *m;

				fc = json_object_array_get_idx(calls, j);
				json_object_object_get_ex(fc, "module", &v);
				m = json_object_get_string(v);
				if (!pl || (!strncmp(m, owner, pl) &&
					    (m[pl] == '.' || !m[pl])))
					call[i] = j;	/* calls are in order */
			}
			if (!pl)
				break;
			*(strrchr(owner, '.') ? strrchr(owner, '.') : owner) = 0;
		}
		nuncalled += call[i] < 0;
		json_object_object_get_ex(g, "param", &v);
		tag[i] = mercury_plan_lookup(p, json_object_get_string(v));
		assert_in_range(tag[i], 1, n);
		assert_false(seen[tag[i]]);
		seen[tag[i]] = 1;
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < n; j++) {
			long ci = call[i] < 0 ? (long)nc : call[i];
			long cj = call[j] < 0 ? (long)nc : call[j];

			if (ci < cj || (ci == cj && i > j))
				if (tag[i] >= tag[j])
					fail_msg("%s: grad_ready[%zu] (call %ld) tag %ld >= grad_ready[%zu] (call %ld) tag %ld",
						 model, i, call[i], tag[i], j,
						 call[j], tag[j]);
		}
	}
	assert_int_equal(nuncalled, 0);	/* forward_calls is never empty */
	/* bytes = 4 * numel for every entry, found through its tag order. */
	for (i = 0; i < n; i++) {
		struct mercury_plan_entry e;
		int64_t numel;

		g = json_object_array_get_idx(grads, i);
		json_object_object_get_ex(g, "numel", &v);
		numel = json_object_get_int64(v);
		assert_int_equal(mercury_plan_entry(p, tag[i] - 1, &e), 0);
		assert_int_equal(e.tag, tag[i]);
		assert_int_equal(e.bytes, 4 * numel);
	}
	free(call);
	free(tag);
	free(seen);
	json_object_put(root);
	mercury_plan_free(p);
}

static void test_profiles(void **state)
{
	static const char *const models[] = {
		"resnet50", "vgg16", "inception_v3", "vit_b_16",
		"bert_large", "gpt2", "gpt2_xl",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		check_profile_plan(models[i]);
}

static void test_profile_anchors(void **state)
{
	struct mercury_plan *p;

	(void)state;
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/resnet50.json",
						   NULL, &p), 0);
	/* conv1 is forward_calls[0] and owns one tensor; fc runs last. */
	assert_int_equal(mercury_plan_lookup(p, "conv1.weight"), 1);
	assert_int_equal(mercury_plan_lookup(p, "bn1.bias"), 2);
	assert_int_equal(mercury_plan_lookup(p, "bn1.weight"), 3);
	assert_int_equal(mercury_plan_lookup(p, "fc.bias"), 160);
	assert_int_equal(mercury_plan_lookup(p, "fc.weight"), 161);
	assert_int_equal(mercury_plan_lookup(p, "layer9.weight"), -ENOENT);
	mercury_plan_free(p);
}

/* vit_b_16: attention weights owned by non-leaf or uncalled modules. */
static void test_profile_vit(void **state)
{
	const char *l0 = "encoder.layers.encoder_layer_0.";
	struct mercury_plan *p;
	char a[128];
	int t[6];

	(void)state;
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/vit_b_16.json",
						   NULL, &p), 0);
	snprintf(a, sizeof(a), "%sln_1.weight", l0);
	t[0] = mercury_plan_lookup(p, a);
	snprintf(a, sizeof(a), "%sself_attention.in_proj_weight", l0);
	t[1] = mercury_plan_lookup(p, a);
	snprintf(a, sizeof(a), "%sself_attention.out_proj.weight", l0);
	t[2] = mercury_plan_lookup(p, a);
	snprintf(a, sizeof(a), "%sln_2.weight", l0);
	t[3] = mercury_plan_lookup(p, a);
	t[4] = mercury_plan_lookup(p,
		"encoder.layers.encoder_layer_1.self_attention.in_proj_weight");
	t[5] = mercury_plan_lookup(p, "heads.head.weight");
	assert_true(t[0] > 0 && t[0] < t[1] && t[1] < t[2] && t[2] < t[3] &&
		    t[3] < t[4] && t[4] < t[5]);
	assert_int_equal(t[5], 152);		/* the head runs last */
	/* class_token and pos_embedding: used at the very start. */
	assert_true(mercury_plan_lookup(p, "class_token") <= 3);
	assert_true(mercury_plan_lookup(p, "encoder.pos_embedding") < t[0]);
	mercury_plan_free(p);
}

static void test_profile_group_levels(void **state)
{
	MERCURY_OPTS(mercury_plan_opts, o, .group = MERCURY_PLAN_PER_MODULE);
	struct mercury_plan *pt, *pm;
	struct mercury_plan_entry e, f;
	size_t i;

	(void)state;
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/vgg16.json",
						   NULL, &pt), 0);
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/vgg16.json",
						   &o, &pm), 0);
	/* vgg16: 16 weight layers with weight + bias each. */
	assert_int_equal(mercury_plan_size(pt), 32);
	assert_int_equal(mercury_plan_max_tag(pt), 32);
	assert_int_equal(mercury_plan_max_tag(pm), 16);
	assert_int_equal(mercury_plan_lookup(pm, "features.0.weight"), 1);
	assert_int_equal(mercury_plan_lookup(pm, "features.0.bias"), 1);
	assert_int_equal(mercury_plan_lookup(pm, "features.2.weight"), 2);
	/* Same order either way; per module is per tensor with ties. */
	for (i = 1; i < 32; i++) {
		mercury_plan_entry(pt, i - 1, &e);
		mercury_plan_entry(pt, i, &f);
		assert_true(mercury_plan_lookup(pm, e.tensor) <=
			    mercury_plan_lookup(pm, f.tensor));
	}
	mercury_plan_free(pm);

	/* Squeeze 32 tags into 4 levels: 8 tensors each, order kept. */
	o.group = MERCURY_PLAN_PER_TENSOR;
	o.levels = 4;
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/vgg16.json",
						   &o, &pm), 0);
	assert_int_equal(mercury_plan_max_tag(pm), 4);
	for (i = 0; i < 32; i++) {
		mercury_plan_entry(pt, i, &e);
		assert_int_equal(mercury_plan_lookup(pm, e.tensor), 1 + i / 8);
	}
	mercury_plan_free(pm);
	mercury_plan_free(pt);

	o.group = 5;
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/vgg16.json",
						   &o, &pm), -EINVAL);
	/* A plan file is not a profile, and says so. */
	assert_int_equal(mercury_plan_from_profile(TESTDATA "/plan_ok.json",
						   NULL, &pm), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "not a profile"));
}

/*
 * A tied tensor (profiles/README.md) is listed once, under the owner that
 * forward calls first, with shared_with naming the others: it is needed at
 * call 0 although backward completes it last, so it is the most urgent
 * tensor of its plan, and its bytes count once.
 */
static void test_profile_tied(void **state)
{
	static const char * const models[] = { "gpt2", "gpt2_xl", "bert_large" };
	struct json_object *root, *grads, *g, *v;
	struct mercury_plan_entry e;
	struct mercury_plan *p;
	char path[512];
	size_t m, i, n, ntied, hits;

	(void)state;
	for (m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		snprintf(path, sizeof(path), PROFILES "/h200/%s.json",
			 models[m]);
		assert_int_equal(mercury_plan_from_profile(path, NULL, &p), 0);
		root = json_object_from_file(path);
		assert_non_null(root);
		assert_true(json_object_object_get_ex(root, "grad_ready",
						      &grads));
		n = json_object_array_length(grads);
		ntied = 0;
		for (i = 0; i < n; i++) {
			const char *name;
			long long numel;

			g = json_object_array_get_idx(grads, i);
			if (!json_object_object_get_ex(g, "shared_with", &v))
				continue;
			ntied++;
			/* ready last in backward, yet the most urgent */
			assert_int_equal(i, n - 1);
			json_object_object_get_ex(g, "param", &v);
			name = json_object_get_string(v);
			assert_int_equal(mercury_plan_lookup(p, name), 1);
			json_object_object_get_ex(g, "numel", &v);
			numel = json_object_get_int64(v);
			hits = 0;
			for (size_t k = 0; k < mercury_plan_size(p); k++) {
				mercury_plan_entry(p, k, &e);
				if (strcmp(e.tensor, name))
					continue;
				hits++;
				assert_int_equal(e.bytes, 4 * numel);
			}
			assert_int_equal(hits, 1);
		}
		assert_int_equal(ntied, 1);
		json_object_put(root);
		mercury_plan_free(p);
	}
}

static void test_save_roundtrip(void **state)
{
	char path[] = "/tmp/mercury-plan-save-XXXXXX";
	struct mercury_plan_entry a, b;
	struct mercury_plan *p, *q;
	size_t i;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/gpt2_xl.json",
						   NULL, &p), 0);
	assert_int_equal(mercury_plan_save(p, path), 0);
	assert_int_equal(mercury_plan_load(path, &q), 0);
	assert_int_equal(mercury_plan_size(q), mercury_plan_size(p));
	for (i = 0; i < mercury_plan_size(p); i++) {
		mercury_plan_entry(p, i, &a);
		mercury_plan_entry(q, i, &b);
		assert_string_equal(a.tensor, b.tensor);
		assert_int_equal(a.tag, b.tag);
		assert_int_equal(a.bytes, b.bytes);
		assert_int_equal(mercury_plan_lookup(q, a.tensor), a.tag);
	}
	unlink(path);
	mercury_plan_free(p);
	mercury_plan_free(q);
}

/* ---- the plan format ---------------------------------------------------- */

static char *save_text(const struct mercury_plan *p)
{
	size_t len;
	char *s;

	assert_int_equal(mercury_plan_save_buf(p, &s, &len), 0);
	assert_int_equal(strlen(s), len);
	return s;
}

/* Builder -> file -> load gives the same entries, levels, settings, extras. */
static void test_format_roundtrip(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, to, .source = MERCURY_TAG_PRIORITY,
		     .shift = 4, .mask = 0xff);
	static const struct mercury_plan_entry in[] = {
		{ "conv1.weight", 1, 37632, "gpu0", "ps0" },
		{ "bn1.weight", 2, 256, NULL, NULL },
		{ "fc.weight", 5, 8192000, "gpu1", "ps1" },
	};
	char path[] = "/tmp/mercury-plan-fmt-XXXXXX", *a, *b;
	struct mercury_plan_entry e, dup = in[1];
	struct mercury_plan_info info;
	struct mercury_plan *p, *q;
	struct json_object *j, *v;
	size_t i;
	int fd;

	(void)state;
	assert_int_equal(mercury_plan_new(&p), 0);
	assert_int_equal(mercury_plan_set_tag_opts(p, &to), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(mercury_plan_add(p, &in[i]), 0);
	/* a name twice, a tag out of range, a reserved key: refused */
	assert_int_equal(mercury_plan_add(p, &dup), -EEXIST);
	assert_non_null(strstr(mercury_last_error(), "\"bn1.weight\" is already"));
	dup.tensor = "x";
	dup.tag = 0;
	assert_int_equal(mercury_plan_add(p, &dup), -ERANGE);
	assert_int_equal(mercury_plan_set_extra(p, "levels", "3"), -EINVAL);
	assert_int_equal(mercury_plan_set_extra(p, "placement", "{"), -EINVAL);
	assert_int_equal(mercury_plan_set_extra(p, "placement",
			 "{\"conv1\": \"gpu0\", \"fc\": \"gpu1\"}"), 0);
	assert_int_equal(mercury_plan_set_extra(p, "step_time_ms", "45.5575"), 0);
	assert_int_equal(mercury_plan_set_levels(p, 6), 0);	/* no squeeze */
	assert_int_equal(mercury_plan_max_tag(p), 5);
	dup.tag = 7;
	assert_int_equal(mercury_plan_add(p, &dup), -ERANGE);
	assert_non_null(strstr(mercury_last_error(), "above the plan's 6 levels"));
	/* levels must fit the mask */
	assert_int_equal(mercury_plan_set_levels(p, 256), -ERANGE);

	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(mercury_plan_save(p, path), 0);
	j = json_object_from_file(path);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "mercury_plan", &v));
	assert_int_equal(json_object_get_int(v), MERCURY_PLAN_FORMAT);
	assert_true(json_object_object_get_ex(j, "levels", &v));
	assert_int_equal(json_object_get_int(v), 6);
	assert_true(json_object_object_get_ex(j, "tag_source", &v));
	assert_string_equal(json_object_get_string(v), "priority");
	assert_true(json_object_object_get_ex(j, "mask", &v));
	assert_int_equal(json_object_get_int(v), 0xff);
	json_object_put(j);

	assert_int_equal(mercury_plan_load(path, &q), 0);
	assert_int_equal(mercury_plan_get_info(q, &info, sizeof(info)), 0);
	assert_int_equal(info.format, 1);
	assert_int_equal(info.levels, 6);
	assert_int_equal(info.max_tag, 5);
	assert_int_equal(info.source, MERCURY_TAG_PRIORITY);
	assert_int_equal(info.shift, 4);
	assert_int_equal(info.mask, 0xff);
	assert_int_equal(mercury_plan_size(q), 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(mercury_plan_entry(q, i, &e), 0);
		assert_string_equal(e.tensor, in[i].tensor);
		assert_int_equal(e.tag, in[i].tag);
		assert_int_equal(e.bytes, in[i].bytes);
		assert_string_equal(e.src, in[i].src ? in[i].src : "");
		assert_string_equal(e.dst, in[i].dst ? in[i].dst : "");
		assert_int_equal(mercury_plan_lookup(q, e.tensor), e.tag);
	}
	/* the extras come back as written: saving again is the same text */
	a = save_text(p);
	b = save_text(q);
	assert_string_equal(a, b);
	assert_non_null(strstr(a, "\"step_time_ms\": 45.5575"));
	assert_non_null(strstr(a, "\"fc\": \"gpu1\""));
	free(a);
	free(b);
	unlink(path);
	mercury_plan_free(p);
	mercury_plan_free(q);
}

/* A plan written by hand to the documented format (tagger.md) reads back. */
static void test_format_file(void **state)
{
	MERCURY_OPTS(mercury_plan_load_opts, lo, .levels = 2);
	struct mercury_plan_info info;
	struct mercury_plan *p;
	char *s;

	(void)state;
	assert_int_equal(mercury_plan_load(TESTDATA "/plan_v1.json", &p), 0);
	assert_int_equal(mercury_plan_get_info(p, &info, sizeof(info)), 0);
	assert_int_equal(info.format, 1);
	assert_int_equal(info.levels, 4);
	assert_int_equal(info.max_tag, 3);
	assert_int_equal(info.source, MERCURY_TAG_PRIORITY);
	assert_int_equal(info.mask, 7);
	assert_int_equal(mercury_plan_lookup(p, "bn1.bias"), 2);
	s = save_text(p);
	assert_non_null(strstr(s, "\"placement\": {"));
	assert_non_null(strstr(s, "\"levels\": 4,"));
	free(s);
	mercury_plan_free(p);
	/* 3 tags, 2 allowed: refused; squeezed, ties stay ties */
	assert_int_equal(mercury_plan_load_opts(TESTDATA "/plan_v1.json", &lo,
						&p), -ERANGE);
	lo.squeeze = true;
	assert_int_equal(mercury_plan_load_opts(TESTDATA "/plan_v1.json", &lo,
						&p), 0);
	assert_int_equal(mercury_plan_lookup(p, "conv1.weight"), 1);
	assert_int_equal(mercury_plan_lookup(p, "bn1.weight"), 1);
	assert_int_equal(mercury_plan_lookup(p, "bn1.bias"), 1);
	assert_int_equal(mercury_plan_lookup(p, "fc.weight"), 2);
	assert_int_equal(mercury_plan_get_info(p, &info, sizeof(info)), 0);
	assert_int_equal(info.levels, 2);
	mercury_plan_free(p);
}

/* A solver plan from before the format (no version key) still loads. */
static void test_format0(void **state)
{
	struct mercury_plan_info info;
	struct mercury_plan *p, *q;
	char *s;

	(void)state;
	assert_int_equal(mercury_plan_load(TESTDATA "/plan_ok.json", &p), 0);
	memset(&info, 0xff, sizeof(info));
	assert_int_equal(mercury_plan_get_info(p, &info, sizeof(info)), 0);
	assert_int_equal(info.format, 0);
	assert_int_equal(info.levels, 65535);
	assert_int_equal(info.source, MERCURY_TAG_MARK);
	assert_int_equal(info.shift, 0);
	assert_int_equal(info.mask, 0xffff);
	/* saved again, it is a format 1 plan that keeps the solver's keys */
	s = save_text(p);
	assert_int_equal(mercury_plan_load_buf(s, strlen(s), &q), 0);
	assert_int_equal(mercury_plan_get_info(q, &info, sizeof(info)), 0);
	assert_int_equal(info.format, 1);
	assert_int_equal(info.levels, 65535);
	assert_non_null(strstr(s, "\"model\": \"resnet50\""));
	assert_non_null(strstr(s, "\"placement\": {"));
	assert_int_equal(mercury_plan_lookup(q, "fc.weight"), 65535);
	free(s);
	mercury_plan_free(q);
	mercury_plan_free(p);
}

/*
 * A plan wider than the caller's limit is refused with a message, or
 * squeezed when asked, by the rank rule of mercury_plan_opts.levels.
 */
static void test_levels_limit(void **state)
{
	MERCURY_OPTS(mercury_plan_load_opts, lo, .levels = 8);
	MERCURY_OPTS(mercury_plan_opts, po, .levels = 8);
	char path[] = "/tmp/mercury-plan-lim-XXXXXX";
	struct mercury_plan *full, *p, *want;
	struct mercury_plan_entry e, f;
	struct mercury_plan_info info;
	size_t i, n;
	int fd;

	(void)state;
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/resnet50.json",
						   NULL, &full), 0);
	n = mercury_plan_size(full);
	assert_int_equal(mercury_plan_max_tag(full), 161);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(mercury_plan_save(full, path), 0);

	p = (void *)1;
	assert_int_equal(mercury_plan_load_opts(path, &lo, &p), -ERANGE);
	assert_null(p);
	assert_non_null(strstr(mercury_last_error(),
			       "tags go up to 161, more than the 8 levels allowed"));
	assert_non_null(strstr(mercury_last_error(), path));
	/* within the limit: loads as it is */
	lo.levels = 161;
	assert_int_equal(mercury_plan_load_opts(path, &lo, &p), 0);
	assert_int_equal(mercury_plan_max_tag(p), 161);
	mercury_plan_free(p);

	lo.levels = 8;
	lo.squeeze = true;
	assert_int_equal(mercury_plan_load_opts(path, &lo, &p), 0);
	assert_int_equal(mercury_plan_get_info(p, &info, sizeof(info)), 0);
	assert_int_equal(info.max_tag, 8);
	assert_int_equal(info.levels, 8);
	/* the same tags as squeezing at build time, the same order */
	assert_int_equal(mercury_plan_from_profile(PROFILES "/h200/resnet50.json",
						   &po, &want), 0);
	for (i = 0; i < n; i++) {
		mercury_plan_entry(full, i, &e);
		mercury_plan_entry(p, i, &f);
		assert_string_equal(e.tensor, f.tensor);
		assert_int_equal(f.tag, 1 + (e.tag - 1) * 8 / 161);
		assert_int_equal(f.tag, mercury_plan_lookup(want, f.tensor));
	}
	mercury_plan_free(want);
	mercury_plan_free(p);

	/* sparse tags: ranked first (1, 2, 3, 65535 -> 1, 2, 3, 4 or 1, 1, 2, 2) */
	assert_int_equal(mercury_plan_load_opts(TESTDATA "/plan_ok.json", &lo,
						&p), 0);
	assert_int_equal(mercury_plan_lookup(p, "fc.weight"), 4);
	assert_int_equal(mercury_plan_lookup(p, "bn1.weight"), 3);
	mercury_plan_free(p);
	lo.levels = 2;
	{
		static const char sparse[] = "{\"priorities\": ["
			"{\"tensor\": \"a\", \"tag\": 1}, {\"tensor\": \"b\", \"tag\": 2},"
			"{\"tensor\": \"c\", \"tag\": 3}, {\"tensor\": \"d\", \"tag\": 9}]}";

		assert_int_equal(mercury_plan_load_buf_opts(sparse,
				 sizeof(sparse) - 1, &lo, &p), 0);
	}
	assert_int_equal(mercury_plan_lookup(p, "a"), 1);
	assert_int_equal(mercury_plan_lookup(p, "b"), 1);
	assert_int_equal(mercury_plan_lookup(p, "c"), 2);
	assert_int_equal(mercury_plan_lookup(p, "d"), 2);
	mercury_plan_free(p);
	/* squeeze without a limit is a mistake, not a no-op */
	lo.levels = 0;
	assert_int_equal(mercury_plan_load_opts(path, &lo, &p), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "squeeze needs levels"));
	unlink(path);

	/* the builder squeezes by the same rule */
	assert_int_equal(mercury_plan_set_levels(full, 8), 0);
	assert_int_equal(mercury_plan_max_tag(full), 8);
	mercury_plan_free(full);
}

/* A missing name is -ENOENT and the message names it. */
static void test_lookup_missing(void **state)
{
	struct mercury_plan *p;

	(void)state;
	assert_int_equal(mercury_plan_load(TESTDATA "/plan_ok.json", &p), 0);
	assert_int_equal(mercury_plan_lookup(p, "layer9.weight"), -ENOENT);
	assert_int_equal(errno, ENOENT);
	assert_string_equal(mercury_last_error(),
			    "plan: no tensor \"layer9.weight\"");
	mercury_plan_free(p);
}

/* Gradient bytes follow the profile's dtype; fp32 when none is given. */
static void test_profile_dtype(void **state)
{
	char dir[] = "/tmp/mercury-dtype-XXXXXX", path[64];
	struct mercury_plan *p;
	FILE *f;

	(void)state;
	assert_int_equal(mercury_dtype_size("float32"), 4);
	assert_int_equal(mercury_dtype_size("torch.bfloat16"), 2);
	assert_int_equal(mercury_dtype_size("float16"), 2);
	assert_int_equal(mercury_dtype_size("float64"), 8);
	assert_int_equal(mercury_dtype_size("complex32"), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "\"complex32\" unknown"));

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"grad_dtype\": \"bfloat16\", \"forward_calls\": [{\"module\": \"a\"},"
	      " {\"module\": \"b\"}], \"grad_ready\": ["
	      "{\"param\": \"b.w\", \"module\": \"b\", \"numel\": 10},"
	      "{\"param\": \"a.w\", \"module\": \"a\", \"numel\": 10,"
	      " \"dtype\": \"torch.float32\"}]}", f);
	fclose(f);
	assert_int_equal(mercury_plan_from_profile(path, NULL, &p), 0);
	{
		struct mercury_plan_entry e;

		mercury_plan_entry(p, 0, &e);
		assert_string_equal(e.tensor, "a.w");
		assert_int_equal(e.bytes, 40);
		mercury_plan_entry(p, 1, &e);
		assert_string_equal(e.tensor, "b.w");
		assert_int_equal(e.bytes, 20);
	}
	mercury_plan_free(p);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"forward_calls\": [], \"grad_ready\": ["
	      "{\"param\": \"b.w\", \"module\": \"b\", \"numel\": 10, \"dtype\": \"fp8\"}]}",
	      f);
	fclose(f);
	assert_int_equal(mercury_plan_from_profile(path, NULL, &p), -EINVAL);
	assert_non_null(strstr(mercury_last_error(),
			       "grad_ready[0] (b.w): dtype \"fp8\" unknown"));
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_ok),
		cmocka_unit_test(test_load_bad),
		cmocka_unit_test(test_wire_tag),
		cmocka_unit_test(test_profiles),
		cmocka_unit_test(test_profile_anchors),
		cmocka_unit_test(test_profile_vit),
		cmocka_unit_test(test_profile_group_levels),
		cmocka_unit_test(test_profile_tied),
		cmocka_unit_test(test_save_roundtrip),
		cmocka_unit_test(test_format_roundtrip),
		cmocka_unit_test(test_format_file),
		cmocka_unit_test(test_format0),
		cmocka_unit_test(test_levels_limit),
		cmocka_unit_test(test_lookup_missing),
		cmocka_unit_test(test_profile_dtype),
		cmocka_unit_test(test_squeeze_tags),
	};

	return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
