// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The model core: the one profile reader (h200 JSON and PipeDream graphs)
 * against the figures profiles/README.md publishes, its ownership rule,
 * dtype-aware bytes, bounded and malformed input; and the one size and
 * rate parser.
 */
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "helpers.h"

static struct mercury_model *load(const char *rel)
{
	struct mercury_model *m = NULL;
	char path[512];

	snprintf(path, sizeof(path), PROFILES "/%s", rel);
	assert_int_equal(mercury_model_load(path, &m), 0);
	assert_non_null(m);
	return m;
}

static int load_text(const char *text, struct mercury_model **m)
{
	return mercury_model_load_buf(text, strlen(text), "t.json", m);
}

/* profiles/README.md, "Figures to check a reader against" (h200). */
static void test_h200_figures(void **state)
{
	static const struct {
		const char *file;
		size_t tensors;
		double mb, largest_mb, fwd, bwd;
	} t[] = {
		{ "h200/resnet50.json", 161, 102.2, 9.4, 22.15, 23.39 },
		{ "h200/vgg16.json", 32, 553.4, 411.0, 11.39, 18.20 },
		{ "h200/bert_large.json", 394, 1340.7, 125.0, 47.75, 41.38 },
		{ "h200/gpt2_xl.json", 580, 6230.4, 321.6, 80.41, 119.69 },
	};
	struct mercury_model_info info;
	size_t i, k;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct mercury_model *m = load(t[i].file);
		uint64_t largest = 0;

		assert_int_equal(mercury_model_get_info(m, &info, sizeof(info)), 0);
		assert_int_equal(info.format, MERCURY_MODEL_H200);
		assert_true(info.timed);
		assert_int_equal(info.nparams, t[i].tensors);
		assert_float_equal(info.total_bytes / 1e6, t[i].mb, 0.05);
		assert_float_equal(info.fwd_ms, t[i].fwd, 0.005);
		assert_float_equal(info.bwd_ms, t[i].bwd, 0.005);
		for (k = 0; k < info.nparams; k++) {
			const struct mercury_model_param *p = mercury_model_param(m, k);

			/* fp32 gradients: no dtype in the shipped profiles */
			assert_string_equal(p->dtype, "float32");
			assert_int_equal(p->bytes, 4 * p->numel);
			assert_true(p->gate < info.ncalls);
			if (p->bytes > largest)
				largest = p->bytes;
		}
		assert_float_equal(largest / 1e6, t[i].largest_mb, 0.05);
		assert_null(mercury_model_param(m, info.nparams));
		assert_int_equal(errno, ENOENT);
		mercury_model_free(m);
	}
}

/* README: a tied tensor is listed once, under its first user (call 0). */
static void test_tied(void **state)
{
	struct mercury_model *m;
	const struct mercury_model_param *p = NULL;
	struct mercury_model_info info;
	size_t k;

	(void)state;
	m = load("h200/gpt2.json");
	mercury_model_get_info(m, &info, sizeof(info));
	for (k = 0; k < info.nparams; k++) {
		const struct mercury_model_param *q = mercury_model_param(m, k);

		if (!strcmp(q->name, "transformer.wte.weight")) {
			assert_null(p);
			p = q;
		}
	}
	assert_non_null(p);
	assert_string_equal(p->module, "transformer.wte");
	assert_int_equal(p->gate, 0);
	assert_int_equal(p->nshared, 1);
	assert_string_equal(mercury_model_module(m, p->shared[0])->name,
			    "lm_head");
	/* bytes count once: 124439808 parameters (summary.txt) */
	assert_int_equal(info.total_bytes, 4ULL * 124439808);
	mercury_model_free(m);
}

/* The ownership rule for what no leaf call runs (vit_b_16). */
static void test_first_use(void **state)
{
	const char *l0 = "encoder.layers.encoder_layer_0";
	struct mercury_model *m;
	size_t ln1, c;

	(void)state;
	m = load("h200/vit_b_16.json");
	ln1 = mercury_model_find_module(m, "encoder.layers.encoder_layer_0.ln_1");
	assert_int_not_equal(ln1, MERCURY_MODEL_NONE);
	c = mercury_model_module(m, ln1)->first_call;
	/* out_proj is read functionally: its layer's first call needs it */
	assert_int_equal(mercury_model_first_use(m,
		"encoder.layers.encoder_layer_0.self_attention.out_proj"), c);
	assert_string_equal(mercury_model_call(m, c)->module,
			    "encoder.layers.encoder_layer_0.ln_1");
	assert_true(!strncmp(mercury_model_call(m, mercury_model_first_use(m, l0))->module,
			     l0, strlen(l0)));
	/* pos_embedding belongs to encoder: its first call, not call 0 */
	assert_int_equal(mercury_model_first_use(m, "encoder"), 1);
	assert_int_equal(mercury_model_first_use(m, ""), 0);
	assert_int_equal(mercury_model_first_use(m, "nowhere.at.all"), 0);
	mercury_model_free(m);
}

/* README: PipeDream nodes, sums of forward and backward, parameter MB. */
static void test_pipedream_figures(void **state)
{
	static const struct {
		const char *file;
		size_t nodes;
		double fwd, bwd, mb;
	} t[] = {
		{ "pipedream/vgg16.graph.txt", 41, 251.9, 438.6, 553.4 },
		{ "pipedream/resnet50.graph.txt", 177, 201.5, 260.9, 102.2 },
		{ "pipedream/inception_v3.graph.txt", 326, 311.0, 399.8, 108.6 },
	};
	struct mercury_model_info info;
	size_t i, k;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct mercury_model *m = load(t[i].file);
		double last = -1;

		mercury_model_get_info(m, &info, sizeof(info));
		assert_int_equal(info.format, MERCURY_MODEL_PIPEDREAM);
		assert_int_equal(info.nnodes, t[i].nodes);
		assert_int_equal(info.ncalls, t[i].nodes);
		/* the README rounds to 0.1 */
		assert_float_equal(info.fwd_ms, t[i].fwd, 0.051);
		assert_float_equal(info.bwd_ms, t[i].bwd, 0.051);
		assert_float_equal(info.total_bytes / 1e6, t[i].mb, 0.051);
		assert_true(info.timed);
		/* grad_ready order: backward, the latest-gated first */
		for (k = 0; k < info.nparams; k++) {
			const struct mercury_model_param *p = mercury_model_param(m, k);
			const struct mercury_model_node *nd =
				mercury_model_node(m, p->module_idx);

			assert_true(p->ready_ms >= last);
			last = p->ready_ms;
			assert_int_equal(nd->param, k);
			assert_string_equal(mercury_model_call(m, p->gate)->module,
					    nd->name);
			assert_true(k == 0 || p->gate < mercury_model_param(m, k - 1)->gate);
		}
		/* forward order is topological */
		for (k = 0; k < info.nedges; k++) {
			const struct mercury_model_edge *e = mercury_model_edge(m, k);

			assert_true(mercury_model_module(m, e->src)->first_call <
				    mercury_model_module(m, e->dst)->first_call);
		}
		mercury_model_free(m);
	}
}

static void test_dtype(void **state)
{
	struct mercury_model *m;

	(void)state;
	assert_int_equal(load_text("{\"grad_dtype\": \"bf16\", \"forward_calls\": [{\"module\": \"a\"}],"
				   " \"grad_ready\": [{\"param\": \"a.w\", \"module\": \"a\", \"numel\": 10},"
				   " {\"param\": \"a.b\", \"module\": \"a\", \"numel\": 3, \"dtype\": \"torch.float64\"}]}",
				   &m), 0);
	assert_int_equal(mercury_model_param(m, 0)->bytes, 20);
	assert_string_equal(mercury_model_param(m, 0)->dtype, "bf16");
	assert_int_equal(mercury_model_param(m, 1)->bytes, 24);
	assert_int_equal(mercury_model_param(m, 1)->elem_size, 8);
	mercury_model_free(m);
}

/* Malformed input: negative errno, a message naming the place, no model. */
static void test_bad(void **state)
{
	static const struct {
		const char *text;
		int err;
		const char *needle;
	} t[] = {
		{ "{\"forward_calls\": [", EINVAL, "not valid JSON" },
		{ "[1, 2]", EINVAL, "top level must be an object" },
		{ "{\"grad_ready\": []}", EINVAL, "not a profile" },
		{ "{\"forward_calls\": [], \"grad_ready\": []}", EINVAL, "is empty" },
		{ "{\"forward_calls\": [{\"module\": 3}], \"grad_ready\": []}", EINVAL,
		  "forward_calls[0]: \"module\" must be a string" },
		{ "{\"forward_calls\": [], \"grad_ready\": [{\"param\": \"w\", \"numel\": -1}]}",
		  EINVAL, "grad_ready[0]" },
		{ "{\"forward_calls\": [], \"grad_ready\": [{\"param\": \"w\", \"numel\": 1099511627777}]}",
		  EINVAL, "0..2^40" },
		{ "{\"modules\": [{\"module\": \"a\", \"params\": 1}], \"forward_calls\": [{\"module\": \"zzz\"}],"
		  " \"grad_ready\": [{\"param\": \"w\", \"numel\": 1}]}", EINVAL,
		  "forward_calls[0] names unknown module zzz" },
		{ "{\"forward_calls\": [{\"module\": \"a\", \"start_ms\": 2}, {\"module\": \"b\", \"start_ms\": 1}],"
		  " \"grad_ready\": [{\"param\": \"w\", \"numel\": 1}]}", EINVAL,
		  "starts before the previous call" },
		{ "{\"forward_calls\": [], \"grad_ready\": [{\"param\": \"w\", \"numel\": 1,"
		  " \"shared_with\": 7}]}", EINVAL, "shared_with must be an array" },
		{ "{\"forward_calls\": [], \"grad_ready\": [{\"param\": \"w\", \"numel\": 1}], \"edges\": 1}",
		  EINVAL, "edges must be an array or null" },
		{ "   \n", EINVAL, "empty" },
		{ "n1 -- Conv -- forward_compute_time=abc, backward_compute_time=1,"
		  " activation_size=1, parameter_size=1\n", EINVAL, "is not a number" },
		{ "n1 -- Conv -- forward_compute_time=1, backward_compute_time=-1,"
		  " activation_size=1, parameter_size=1\n", EINVAL, "is negative" },
		{ "n1 -- Conv -- forward_compute_time=1, backward_compute_time=1,"
		  " parameter_size=1\n", EINVAL, "activation_size is missing" },
		{ "n1 -- A -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1\n"
		  "\tn1 -- n9\n", EINVAL, "names a missing node" },
		{ "n1 -- A -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1\n"
		  "n2 -- B -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1\n"
		  "\tn1 -- n2\n\tn2 -- n1\n", EINVAL, "cycle" },
		{ "n1 -- A -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1\n"
		  "n1 -- A -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1\n",
		  EINVAL, "defined twice" },
		{ "just words\n", EINVAL, "t.json:1: expected" },
	};
	struct mercury_model *m;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		m = (void *)1;
		assert_int_equal(load_text(t[i].text, &m), -t[i].err);
		assert_null(m);
		assert_int_equal(errno, t[i].err);
		if (!strstr(mercury_last_error(), t[i].needle))
			fail_msg("case %zu: '%s' lacks '%s'", i, mercury_last_error(),
				 t[i].needle);
	}
	/* a device that never ends is refused, not read until memory runs out */
	assert_int_equal(mercury_model_load("/dev/zero", &m), -EFBIG);
	assert_non_null(strstr(mercury_last_error(), "64 MiB"));
	assert_int_equal(mercury_model_load("/nonexistent/p.json", &m), -ENOENT);
	assert_non_null(strstr(mercury_last_error(), "No such file"));
	assert_int_equal(mercury_model_load(NULL, &m), -EINVAL);
}

/* mercury-ps scales a profile: change numel, write back, read again. */
static void test_save(void **state)
{
	char path[] = "/tmp/mercury-model-XXXXXX";
	struct mercury_model *m, *r;
	struct mercury_model_info a, b;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	m = load("h200/resnet50.json");
	assert_int_equal(mercury_model_set_numel(m, 0, 7), 0);
	assert_int_equal(mercury_model_param(m, 0)->bytes, 28);
	assert_int_equal(mercury_model_set_numel(m, 0, (1ULL << 40) + 1), -ERANGE);
	assert_int_equal(mercury_model_set_numel(m, 100000, 1), -EINVAL);
	assert_int_equal(mercury_model_save(m, path), 0);
	assert_int_equal(mercury_model_load(path, &r), 0);
	mercury_model_get_info(m, &a, sizeof(a));
	mercury_model_get_info(r, &b, sizeof(b));
	assert_int_equal(a.nparams, b.nparams);
	assert_int_equal(a.total_bytes, b.total_bytes);
	assert_int_equal(mercury_model_param(r, 0)->numel, 7);
	assert_string_equal(mercury_model_param(r, 1)->name,
			    mercury_model_param(m, 1)->name);
	assert_int_equal(mercury_model_save(m, "/nonexistent/x.json"), -ENOENT);
	assert_non_null(strstr(mercury_last_error(), "cannot write"));
	mercury_model_free(r);
	mercury_model_free(m);
	m = load("pipedream/alexnet.graph.txt");
	assert_int_equal(mercury_model_set_numel(m, 0, 1), -EOPNOTSUPP);
	assert_int_equal(mercury_model_save(m, path), -EOPNOTSUPP);
	mercury_model_free(m);
	unlink(path);
}

/*
 * A save that fails half way (here: the file size limit) leaves the file
 * that was there as it was, and no temporary beside it.
 */
static void test_save_keeps_old(void **state)
{
	char dir[] = "/tmp/mercury-save-XXXXXX", path[64], before[64];
	struct mercury_model *m;
	struct dirent *de;
	struct stat st;
	int status, n = 0;
	pid_t pid;
	DIR *d;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.json", dir);
	m = load("h200/resnet50.json");
	assert_int_equal(mercury_model_save(m, path), 0);
	assert_int_equal(stat(path, &st), 0);
	snprintf(before, sizeof(before), "%lld", (long long)st.st_size);
	assert_int_equal(mercury_model_set_numel(m, 0, 7), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct rlimit rl = { 4096, 4096 };

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		_exit(mercury_model_save(m, path) == -EFBIG &&
		      strstr(mercury_last_error(), "cannot write") ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	mercury_model_free(m);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, atoll(before));
	m = NULL;
	assert_int_equal(mercury_model_load(path, &m), 0);
	assert_int_not_equal(mercury_model_param(m, 0)->numel, 7);
	mercury_model_free(m);
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' || (strcmp(de->d_name, ".") &&
					     strcmp(de->d_name, "..")))
			n++;
	closedir(d);
	assert_int_equal(n, 1);		/* p.json alone */
	unlink(path);
	rmdir(dir);
}

static void test_parse_size(void **state)
{
	static const struct {
		const char *s;
		int ret;
		uint64_t v;
	} t[] = {
		{ "64k", 0, 65536 }, { "64K", 0, 65536 }, { "64kb", 0, 65536 },
		{ "64kib", 0, 65536 }, { "1m", 0, 1 << 20 }, { "1Mb", 0, 1 << 20 },
		{ "1g", 0, 1ULL << 30 }, { "3028", 0, 3028 }, { "3028b", 0, 3028 },
		{ "8kbit", 0, 1024 }, { "1mbit", 0, 131072 }, { "0", 0, 0 },
		/* bad suffixes, fractions, signs, spaces, hex, empty */
		{ "4q", -EINVAL, 0 }, { "1bit", -EINVAL, 0 }, { "10kbps", -EINVAL, 0 },
		{ "1.5k", -EINVAL, 0 }, { "-1", -EINVAL, 0 }, { "+1", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 }, { "1 k", -EINVAL, 0 }, { "0x10", -EINVAL, 0 },
		{ "", -EINVAL, 0 }, { "k", -EINVAL, 0 }, { "1kbitx", -EINVAL, 0 },
		{ "1kbit1", -EINVAL, 0 }, { "7bit", -EINVAL, 0 },
		/* overflow of the number, of the unit, of the caller's max */
		{ "18446744073709551616", -ERANGE, 0 },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "17179869184g", -ERANGE, 0 },
		{ "144115188075855872kbit", -ERANGE, 0 },
		{ "144115188075855871kbit", 0, 144115188075855871ULL << 7 },
	};
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v = 12345;
		if (mercury_parse_size(t[i].s, UINT64_MAX, &v) != t[i].ret)
			fail_msg("\"%s\": %d, not %d (%s)", t[i].s,
				 mercury_parse_size(t[i].s, UINT64_MAX, &v),
				 t[i].ret, mercury_last_error());
		if (!t[i].ret)
			assert_int_equal(v, t[i].v);
		else
			assert_int_equal(v, 12345);	/* untouched */
	}
	assert_int_equal(mercury_parse_size("4g", UINT32_MAX, &v), -ERANGE);
	assert_non_null(strstr(mercury_last_error(), "above 4294967295"));
	assert_int_equal(mercury_parse_size("4q", UINT32_MAX, &v), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "unknown unit \"q\""));
	assert_int_equal(mercury_parse_size(NULL, 1, &v), -EINVAL);
}

static void test_parse_rate(void **state)
{
	static const struct {
		const char *s;
		int ret;
		double v;
	} t[] = {
		/* decimal, as tc's rates: not the 1024 of sizes */
		{ "10gbit", 0, 1e10 }, { "1Gbit", 0, 1e9 }, { "100mbit", 0, 1e8 },
		{ "64kbit", 0, 64e3 }, { "2.5e9", 0, 2.5e9 }, { "1g", 0, 1e9 },
		{ "1kibit", 0, 1024 }, { "1gbps", 0, 8e9 }, { "1bps", 0, 8 },
		{ "0", -EINVAL, 0 }, { "-1gbit", -EINVAL, 0 }, { "", -EINVAL, 0 },
		{ "10gbits", -EINVAL, 0 }, { "fast", -EINVAL, 0 }, { "inf", -EINVAL, 0 },
		{ "nan", -EINVAL, 0 }, { "0x10", -EINVAL, 0 }, { "1e999", -ERANGE, 0 },
		{ "1e308tbit", -ERANGE, 0 },
	};
	double v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v = -1;
		if (mercury_parse_rate(t[i].s, 1, &v) != t[i].ret)
			fail_msg("\"%s\": %d, not %d (%s)", t[i].s,
				 mercury_parse_rate(t[i].s, 1, &v), t[i].ret,
				 mercury_last_error());
		if (!t[i].ret)
			assert_float_equal(v, t[i].v, t[i].v * 1e-12);
	}
	/* a bare number is the caller's documented unit: bytes/s here */
	assert_int_equal(mercury_parse_rate("1.25e9", 8, &v), 0);
	assert_float_equal(v, 1e10, 0);
	assert_int_equal(mercury_parse_rate("10gbit", 8, &v), 0);
	assert_float_equal(v, 1e10, 0);
	assert_int_equal(mercury_parse_rate("1", 0, &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_h200_figures),
		cmocka_unit_test(test_tied),
		cmocka_unit_test(test_first_use),
		cmocka_unit_test(test_pipedream_figures),
		cmocka_unit_test(test_dtype),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_save),
		cmocka_unit_test(test_save_keeps_old),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_rate),
	};

	return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
