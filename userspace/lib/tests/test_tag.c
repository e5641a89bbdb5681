// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Socket tagging: values, caching, privilege errors, env parsing. */
#include <sys/un.h>
#include <sys/wait.h>

#include "helpers.h"

static int get_opt(int fd, int name)
{
	uint32_t v = 0xdeadbeef;
	socklen_t len = sizeof(v);

	assert_int_equal(getsockopt(fd, SOL_SOCKET, name, &v, &len), 0);
	return v;
}

static void test_value_shift_mask(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .shift = 16, .mask = 0xff);
	struct mercury_tagger *t;
	uint32_t v = 0;

	(void)state;
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tagger_value(t, 5, &v), 0);
	assert_int_equal(v, 0x50000);
	assert_int_equal(mercury_tagger_value(t, 255, &v), 0);
	assert_int_equal(v, 0xff0000);
	errno = 0;
	assert_int_equal(mercury_tagger_value(t, 256, &v), -ERANGE);
	assert_int_equal(errno, ERANGE);
	assert_non_null(strstr(mercury_last_error(), "does not fit mask 0xff"));
	mercury_tagger_free(t);

	/* Default: mark, shift 0, mask 0xffff. */
	assert_int_equal(mercury_tagger_new(NULL, &t), 0);
	assert_int_equal(mercury_tagger_value(t, 65535, &v), 0);
	assert_int_equal(v, 65535);
	assert_int_equal(mercury_tagger_value(t, 65536, &v), -ERANGE);
	mercury_tagger_free(t);
}

/* One check for every tool: tags 1..levels must survive the mask. */
static void test_tag_check(void **state)
{
	static const struct {
		int source;
		unsigned int shift;
		uint32_t mask, levels;
		int err;
		const char *msg;
	} c[] = {
		{ MERCURY_TAG_MARK, 0, 0xf0, 8, -ERANGE,
		  "8 levels do not fit mask 0xf0: tag 1 would read back as 0" },
		{ MERCURY_TAG_MARK, 0, 0x100, 8, -ERANGE,
		  "8 levels do not fit mask 0x100" },
		{ MERCURY_TAG_MARK, 0, 0xffff0000, 8, -ERANGE,
		  "8 levels do not fit mask 0xffff0000" },
		{ MERCURY_TAG_MARK, 0, 0x5, 2, -ERANGE,
		  "2 levels do not fit mask 0x5; squeeze the plan to 1 levels" },
		{ MERCURY_TAG_DSCP, 0, 0, 64, -ERANGE,
		  "64 levels do not fit mask 0x3f" },
		{ MERCURY_TAG_DSCP, 3, 0xf, 8, -EINVAL, "6 DSCP bits" },
		{ MERCURY_TAG_MARK, 24, 0x1ff, 8, -EINVAL, "does not fit 32 bits" },
		{ MERCURY_TAG_MARK, 0, 0, 65535, 0, NULL },
		{ MERCURY_TAG_MARK, 8, 0xff, 255, 0, NULL },
		{ MERCURY_TAG_DSCP, 0, 0, 63, 0, NULL },
		{ MERCURY_TAG_MARK, 0, 0xf0, 0, 0, NULL },
	};
	struct mercury_tagger *t;
	uint32_t v;
	size_t i;
	unsigned int tag;

	(void)state;
	assert_int_equal(mercury_tag_check(NULL, MERCURY_MAX_TAG), 0);
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		MERCURY_OPTS(mercury_tag_opts, o, .source = c[i].source,
			     .shift = c[i].shift, .mask = c[i].mask);

		if (mercury_tag_check(&o, c[i].levels) != c[i].err ||
		    (c[i].msg && !strstr(mercury_last_error(), c[i].msg)))
			fail_msg("case %zu: got \"%s\"", i, mercury_last_error());
		/* the tagger agrees tag by tag: what passes, it can write */
		if (c[i].err || mercury_tagger_new(&o, &t))
			continue;
		for (tag = 1; tag <= c[i].levels; tag++)
			assert_int_equal(mercury_tagger_value(t, tag, &v), 0);
		mercury_tagger_free(t);
	}
}

static void test_bad_opts(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .shift = 24, .mask = 0x1ff);
	struct {
		struct mercury_tag_opts o;
		uint64_t future;
	} big;
	struct mercury_tagger *t = (void *)1;

	(void)state;
	assert_int_equal(mercury_tagger_new(&o, &t), -EINVAL);
	assert_null(t);
	assert_non_null(strstr(mercury_last_error(), "does not fit 32 bits"));
	o.shift = 32;
	o.mask = 1;
	assert_int_equal(mercury_tagger_new(&o, &t), -EINVAL);
	o.shift = 0;
	o.source = 7;
	assert_int_equal(mercury_tagger_new(&o, &t), -EINVAL);

	/* A newer caller's struct: accepted only if the unknown tail is 0. */
	memset(&big, 0, sizeof(big));
	big.o.sz = sizeof(big);
	assert_int_equal(mercury_tagger_new(&big.o, &t), 0);
	mercury_tagger_free(t);
	big.future = 1;
	assert_int_equal(mercury_tagger_new(&big.o, &t), -EINVAL);
	big.o.sz = 4;
	assert_int_equal(mercury_tagger_new(&big.o, &t), -EINVAL);
}

/* Unprivileged path: SO_PRIORITY 0..6 lands on a connected TCP socket. */
static void test_priority_lands(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .source = MERCURY_TAG_PRIORITY);
	struct mercury_tagger *t;
	unsigned int tag;
	int c[2];

	(void)state;
	tcp_pair(c);
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	for (tag = 0; tag <= 6; tag++) {
		assert_int_equal(mercury_tag_socket(t, c[0], tag), 0);
		assert_int_equal(get_opt(c[0], SO_PRIORITY), tag);
		assert_int_equal(mercury_socket_tag(t, c[0]), tag);
	}
	mercury_tagger_free(t);

	/* shift 1, mask 3: tag 3 -> priority 6 (still unprivileged). */
	o.shift = 1;
	o.mask = 3;
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tag_socket(t, c[1], 3), 0);
	assert_int_equal(get_opt(c[1], SO_PRIORITY), 6);
	assert_int_equal(mercury_socket_tag(t, c[1]), 3);
	assert_int_equal(mercury_tag_socket(t, c[1], 4), -ERANGE);
	assert_int_equal(get_opt(c[1], SO_PRIORITY), 6);
	mercury_tagger_free(t);
	close(c[0]);
	close(c[1]);
}

/* The per-fd cache skips setsockopt when the tag does not change. */
static void test_cache(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .source = MERCURY_TAG_PRIORITY);
	struct mercury_tagger_stats st;
	struct mercury_tagger *t;
	int c[2];

	(void)state;
	tcp_pair(c);
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tag_socket(t, c[0], 3), 0);
	assert_int_equal(mercury_tag_socket(t, c[0], 3), 0);
	assert_int_equal(mercury_tag_socket(t, c[0], 3), 0);
	mercury_tagger_get_stats(t, &st, sizeof(st));
	assert_int_equal(st.calls, 3);
	assert_int_equal(st.syscalls, 1);
	assert_int_equal(mercury_tag_socket(t, c[1], 3), 0);	/* other fd */
	assert_int_equal(mercury_tag_socket(t, c[0], 4), 0);
	mercury_tagger_get_stats(t, &st, sizeof(st));
	assert_int_equal(st.syscalls, 3);
	assert_int_equal(get_opt(c[0], SO_PRIORITY), 4);

	/* Someone else changed it: forget() makes the next call write. */
	setsockopt(c[0], SOL_SOCKET, SO_PRIORITY, &(int){ 1 }, sizeof(int));
	assert_int_equal(mercury_tag_socket(t, c[0], 4), 0);
	assert_int_equal(get_opt(c[0], SO_PRIORITY), 1);	/* cached */
	mercury_tagger_forget(t, c[0]);
	assert_int_equal(mercury_tag_socket(t, c[0], 4), 0);
	assert_int_equal(get_opt(c[0], SO_PRIORITY), 4);
	mercury_tagger_get_stats(t, &st, sizeof(st));
	assert_int_equal(st.syscalls, 4);
	assert_int_equal(mercury_tag_socket(t, -1, 1), -EINVAL);
	mercury_tagger_free(t);
	close(c[0]);
	close(c[1]);
}

static int get_ip_opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	assert_int_equal(getsockopt(fd, level, name, &v, &len), 0);
	return v;
}

/* An IPv6 TCP pair to addr (::1 or ::ffff:127.0.0.1); false if unusable. */
static bool tcp6_pair(const char *addr, int c[2])
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6 };
	socklen_t len = sizeof(a);
	int l, zero = 0;

	l = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return false;
	setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		close(l);
		return false;
	}
	assert_int_equal(inet_pton(AF_INET6, addr, &a.sin6_addr), 1);
	c[0] = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c[0] >= 0);
	if (connect(c[0], (struct sockaddr *)&a, sizeof(a))) {
		close(c[0]);
		close(l);
		return false;
	}
	c[1] = accept(l, NULL, NULL);
	assert_true(c[1] >= 0);
	close(l);
	return true;
}

/*
 * DSCP on IPv4: the TOS byte is tag << 2 (the DSCP field is the tag), read
 * back with getsockopt(IP_TOS); tags above 63 are refused.
 */
static void test_dscp_ipv4(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .source = MERCURY_TAG_DSCP);
	struct mercury_tagger *t;
	unsigned int tag;
	uint32_t v;
	int c[2];

	(void)state;
	tcp_pair(c);
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tagger_probe(t, 63), 0);
	assert_int_equal(mercury_tagger_value(t, 5, &v), 0);
	assert_int_equal(v, 5 << 2);
	for (tag = 0; tag <= 63; tag += 7) {
		assert_int_equal(mercury_tag_socket(t, c[0], tag), 0);
		assert_int_equal(get_ip_opt(c[0], IPPROTO_IP, IP_TOS) & 0xfc,
				 tag << 2);
		assert_int_equal(mercury_socket_tag(t, c[0]), tag);
	}
	assert_int_equal(mercury_tag_socket(t, c[1], 1), 0);
	assert_int_equal(get_ip_opt(c[1], IPPROTO_IP, IP_TOS) & 0xfc, 1 << 2);
	assert_int_equal(mercury_tag_socket(t, c[0], 64), -ERANGE);
	assert_int_equal(mercury_socket_tag(t, c[0]), 63);
	mercury_tagger_free(t);

	/* shift and mask work inside the six DSCP bits. */
	o.shift = 3;
	o.mask = 7;
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tag_socket(t, c[0], 5), 0);
	assert_int_equal(get_ip_opt(c[0], IPPROTO_IP, IP_TOS) & 0xfc,
			 5 << 5);
	assert_int_equal(mercury_socket_tag(t, c[0]), 5);
	assert_int_equal(mercury_tag_socket(t, c[0], 8), -ERANGE);
	mercury_tagger_free(t);

	/* Wider than six bits: refused at creation, not truncated later. */
	o.shift = 0;
	o.mask = 0x7f;
	assert_int_equal(mercury_tagger_new(&o, &t), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "6 DSCP bits"));
	o.shift = 4;
	o.mask = 7;
	assert_int_equal(mercury_tagger_new(&o, &t), -EINVAL);
	close(c[0]);
	close(c[1]);
}

/* DSCP on IPv6 goes to IPV6_TCLASS; to a v4-mapped peer, to IP_TOS too. */
static void test_dscp_ipv6(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .source = MERCURY_TAG_DSCP);
	struct mercury_tagger *t;
	int c[2];

	(void)state;
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	if (!tcp6_pair("::1", c)) {
		mercury_tagger_free(t);
		skip();
	}
	assert_int_equal(mercury_tag_socket(t, c[0], 9), 0);
	assert_int_equal(get_ip_opt(c[0], IPPROTO_IPV6, IPV6_TCLASS) & 0xfc,
			 9 << 2);
	assert_int_equal(mercury_socket_tag(t, c[0]), 9);
	assert_int_equal(mercury_tag_socket(t, c[1], 40), 0);
	assert_int_equal(get_ip_opt(c[1], IPPROTO_IPV6, IPV6_TCLASS) & 0xfc,
			 40 << 2);
	close(c[0]);
	close(c[1]);

	assert_true(tcp6_pair("::ffff:127.0.0.1", c));
	assert_int_equal(mercury_tag_socket(t, c[0], 17), 0);
	assert_int_equal(get_ip_opt(c[0], IPPROTO_IPV6, IPV6_TCLASS) & 0xfc,
			 17 << 2);
	assert_int_equal(get_ip_opt(c[0], IPPROTO_IP, IP_TOS) & 0xfc, 17 << 2);
	mercury_tagger_free(t);
	close(c[0]);
	close(c[1]);
}

/* A socket without an IP header has no DSCP: a clear error. */
static void test_dscp_not_ip(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .source = MERCURY_TAG_DSCP);
	struct mercury_tagger *t;
	int u[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, u), 0);
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tag_socket(t, u[0], 1), -EAFNOSUPPORT);
	assert_non_null(strstr(mercury_last_error(),
			       "DSCP needs an IPv4 or IPv6 socket"));
	assert_int_equal(mercury_socket_tag(t, u[0]), -EAFNOSUPPORT);
	mercury_tagger_free(t);
	close(u[0]);
	close(u[1]);
}

/* SO_MARK needs CAP_NET_ADMIN: only meaningful as root. */
static void test_mark_lands(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o, .shift = 8, .mask = 0xff,
		     .keep_other_bits = true);
	struct mercury_tagger *t;
	int c[2];

	(void)state;
	tcp_pair(c);
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tagger_probe(t, 255), 0);
	/* Bits outside mask << shift belong to someone else: kept. */
	assert_int_equal(setsockopt(c[0], SOL_SOCKET, SO_MARK,
				    &(uint32_t){ 0xab0000cd }, 4), 0);
	assert_int_equal(mercury_tag_socket(t, c[0], 7), 0);
	assert_int_equal((uint32_t)get_opt(c[0], SO_MARK), 0xab0007cd);
	assert_int_equal(mercury_socket_tag(t, c[0]), 7);
	assert_int_equal(mercury_tag_socket(t, c[0], 0), 0);
	assert_int_equal((uint32_t)get_opt(c[0], SO_MARK), 0xab0000cd);
	mercury_tagger_free(t);

	/* Without keep_other_bits the whole mark is the tag value. */
	o.keep_other_bits = false;
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tag_socket(t, c[1], 200), 0);
	assert_int_equal((uint32_t)get_opt(c[1], SO_MARK), 200 << 8);
	mercury_tagger_free(t);
	close(c[0]);
	close(c[1]);
}

/*
 * Without CAP_NET_ADMIN: SO_MARK and SO_PRIORITY > 6 fail with -EPERM and
 * a message naming the capability; priorities 0..6 and DSCP still work. As root,
 * drop to nobody in a child (setuid clears the capability sets).
 */
static int unprivileged_checks(void)
{
	MERCURY_OPTS(mercury_tag_opts, o, .source = MERCURY_TAG_PRIORITY);
	struct mercury_tagger *t;
	int c[2], bad = 0;

	tcp_pair(c);
	if (mercury_tagger_new(&o, &t))
		return 10;
	bad |= mercury_tag_socket(t, c[0], 6) != 0;
	bad |= (mercury_tag_socket(t, c[0], 7) != -EPERM || errno != EPERM) << 1;
	bad |= !strstr(mercury_last_error(), "CAP_NET_ADMIN") << 2;
	bad |= (get_opt(c[0], SO_PRIORITY) != 6) << 3;
	bad |= (mercury_tagger_probe(t, 7) != -EPERM) << 4;
	bad |= (mercury_tagger_probe(t, 6) != 0) << 5;
	mercury_tagger_free(t);
	o.source = MERCURY_TAG_MARK;
	if (mercury_tagger_new(&o, &t))
		return 11;
	bad |= (mercury_tag_socket(t, c[0], 1) != -EPERM) << 6;
	bad |= !strstr(mercury_last_error(), "SO_MARK needs CAP_NET_ADMIN") << 7;
	bad |= (mercury_tagger_probe(t, 1) != -EPERM) << 8;
	mercury_tagger_free(t);
	/* DSCP needs no capability: every one of the 63 tags lands. */
	o.source = MERCURY_TAG_DSCP;
	if (mercury_tagger_new(&o, &t))
		return 12;
	bad |= (mercury_tag_socket(t, c[0], 63) != 0) << 9;
	bad |= (mercury_socket_tag(t, c[0]) != 63) << 10;
	bad |= (mercury_tagger_probe(t, 63) != 0) << 11;
	mercury_tagger_free(t);
	return bad;
}

static void test_unprivileged(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0) {
		assert_int_equal(unprivileged_checks(), 0);
		return;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		if (setgid(65534) || setuid(65534))
			_exit(99);
		_exit(unprivileged_checks());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_env(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, o);
	struct mercury_tagger *t;
	uint32_t v;

	(void)state;
	setenv("MERCURY_TAG_SOURCE", "priority", 1);
	setenv("MERCURY_SHIFT", "4", 1);
	setenv("MERCURY_MASK", "0x0f", 1);
	assert_int_equal(mercury_tag_opts_from_env(&o), 0);
	assert_int_equal(o.source, MERCURY_TAG_PRIORITY);
	assert_int_equal(o.shift, 4);
	assert_int_equal(o.mask, 0xf);
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tagger_value(t, 9, &v), 0);
	assert_int_equal(v, 0x90);
	mercury_tagger_free(t);

	setenv("MERCURY_TAG_SOURCE", "dscp", 1);
	setenv("MERCURY_SHIFT", "0", 1);
	unsetenv("MERCURY_MASK");
	o.mask = 0;
	assert_int_equal(mercury_tag_opts_from_env(&o), 0);
	assert_int_equal(o.source, MERCURY_TAG_DSCP);
	assert_int_equal(mercury_tagger_new(&o, &t), 0);
	assert_int_equal(mercury_tagger_value(t, 3, &v), 0);
	assert_int_equal(v, 3 << 2);
	mercury_tagger_free(t);
	setenv("MERCURY_TAG_SOURCE", "tos", 1);
	assert_int_equal(mercury_tag_opts_from_env(&o), -EINVAL);
	assert_non_null(strstr(mercury_last_error(), "MERCURY_TAG_SOURCE=tos"));
	setenv("MERCURY_TAG_SOURCE", "mark", 1);
	setenv("MERCURY_SHIFT", "40", 1);
	assert_int_equal(mercury_tag_opts_from_env(&o), -EINVAL);
	setenv("MERCURY_SHIFT", "3x", 1);
	assert_int_equal(mercury_tag_opts_from_env(&o), -EINVAL);
	setenv("MERCURY_SHIFT", "0", 1);
	setenv("MERCURY_MASK", "0", 1);
	assert_int_equal(mercury_tag_opts_from_env(&o), -EINVAL);
	setenv("MERCURY_MASK", "-1", 1);
	assert_int_equal(mercury_tag_opts_from_env(&o), -EINVAL);
	unsetenv("MERCURY_TAG_SOURCE");
	unsetenv("MERCURY_SHIFT");
	unsetenv("MERCURY_MASK");
}

static int log_calls;
static char log_last[256];

static void log_cb(enum mercury_log_level level, const char *msg, void *ctx)
{
	(void)level;
	*(int *)ctx += 1;
	snprintf(log_last, sizeof(log_last), "%s", msg);
}

static void test_log_callback(void **state)
{
	struct mercury_tensor tensor;
	struct mercury_tagger *t;
	struct mercury_rx *rx;
	uint32_t v;

	(void)state;
	assert_int_equal(mercury_tagger_new(NULL, &t), 0);
	assert_int_equal(mercury_rx_new(NULL, &rx), 0);
	/* set_log hands back what it replaces, like libbpf_set_print */
	assert_null(mercury_set_log(log_cb, &log_calls));
	assert_int_equal(mercury_tagger_value(t, 1 << 20, &v), -ERANGE);
	assert_int_equal(log_calls, 1);
	assert_string_equal(log_last, mercury_last_error());
	/*
	 * An expected -EAGAIN is not logged, but its message replaces the
	 * older failure's: the message always belongs to the last call.
	 */
	assert_int_equal(mercury_rx_next(rx, &tensor), -EAGAIN);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(log_calls, 1);
	assert_non_null(strstr(mercury_last_error(), "no complete tensor"));
	assert_ptr_equal(mercury_set_log(NULL, NULL), log_cb);
	assert_int_equal(mercury_tagger_value(t, 1 << 20, &v), -ERANGE);
	assert_int_equal(log_calls, 1);
	mercury_rx_free(rx);
	mercury_tagger_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_value_shift_mask),
		cmocka_unit_test(test_bad_opts),
		cmocka_unit_test(test_tag_check),
		cmocka_unit_test(test_priority_lands),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_dscp_ipv4),
		cmocka_unit_test(test_dscp_ipv6),
		cmocka_unit_test(test_dscp_not_ip),
		unit_test_skip_if(geteuid() != 0, test_mark_lands,
				  "SO_MARK needs root"),
		cmocka_unit_test(test_unprivileged),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_log_callback),
	};

	return cmocka_run_group_tests_name("tag", tests, NULL, NULL);
}
