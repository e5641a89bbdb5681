// SPDX-License-Identifier: GPL-2.0
/*
 * The built q_mercury.so, loaded as tc loads it, with tc's netlink helpers
 * stubbed: every word list must become exactly the attributes libmercury's
 * grammar and encoder give for it (the plugin links them: one grammar
 * with mercuryctl), with tc's conventions kept: "help" prints the usage,
 * a missing value is tc's incomplete command, a word the field cannot
 * hold is refused naming the option, ranges are left to the kernel.
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "utils.h"
#include "tc_util.h"

#include <linux/mercury.h>
#include <mercury/mercury.h>

/* ---- what tc gives a plugin: the parts parse_qopt uses ---------------- */

static jmp_buf incomplete;
static int incomplete_calls;

void incomplete_command(void)
{
	incomplete_calls++;
	longjmp(incomplete, 1);
}

int addattr_l(struct nlmsghdr *n, int maxlen, int type, const void *data,
	      int alen)
{
	int len = RTA_LENGTH(alen);
	struct rtattr *rta;

	if (NLMSG_ALIGN(n->nlmsg_len) + RTA_ALIGN(len) > (unsigned int)maxlen)
		return -1;
	rta = (struct rtattr *)((char *)n + NLMSG_ALIGN(n->nlmsg_len));
	rta->rta_type = type;
	rta->rta_len = len;
	if (alen)
		memcpy(RTA_DATA(rta), data, alen);
	n->nlmsg_len = NLMSG_ALIGN(n->nlmsg_len) + RTA_ALIGN(len);
	return 0;
}

/* ---- the plugin -------------------------------------------------------- */

static struct qdisc_util *qu;

struct req {
	struct nlmsghdr	n;
	char		buf[1024];
};

/* parse_qopt on @argc words, its stderr kept in @err */
static int parse(int argc, char **argv, struct req *r, char *err, size_t len)
{
	FILE *f = tmpfile();
	int fd = dup(2), rc;
	size_t got;

	memset(r, 0, sizeof(*r));
	r->n.nlmsg_len = NLMSG_LENGTH(0);
	fflush(stderr);
	dup2(fileno(f), 2);
	incomplete_calls = 0;
	if (setjmp(incomplete))
		rc = -ENODATA;
	else
		rc = qu->parse_qopt(qu, argc, argv, &r->n, "dummy0");
	fflush(stderr);
	dup2(fd, 2);
	close(fd);
	rewind(f);
	got = fread(err, 1, len - 1, f);
	err[got] = '\0';
	fclose(f);
	return rc;
}

/* The TCA_OPTIONS nest parse_qopt added: its payload and length. */
static const void *nest(const struct req *r, int *len)
{
	const struct rtattr *rta = (const void *)((const char *)r +
						  NLMSG_LENGTH(0));

	assert_int_equal(r->n.nlmsg_len, NLMSG_LENGTH(0) + RTA_ALIGN(rta->rta_len));
	assert_int_equal(rta->rta_type, TCA_OPTIONS | NLA_F_NESTED);
	*len = RTA_PAYLOAD(rta);
	return RTA_DATA(rta);
}

/* Exactly what libmercury's grammar (no ranges) and encoder give. */
static void same_as_lib(int argc, char **argv)
{
	struct mercury_qdisc_opts o;
	char lib[256], err[512];
	const void *got;
	struct req r;
	int len, n;

	assert_int_equal(parse(argc, argv, &r, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	got = nest(&r, &len);
	assert_int_equal(mercury_qdisc_opts_parse(argc, argv, 0, &o,
						  sizeof(o)), 0);
	n = mercury_qdisc_opts_encode(&o, lib, sizeof(lib));
	assert_int_equal(len, n);
	assert_memory_equal(got, lib, n);
}

#define WORDS(...)	((char *[]){ __VA_ARGS__ })
#define NWORDS(...)	((int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)))
#define SAME(...)	same_as_lib(NWORDS(__VA_ARGS__), WORDS(__VA_ARGS__))

static void test_words(void **state)
{
	(void)state;
	SAME("levels", "64");
	SAME("levels", "4096", "tag", "priority", "shift", "4", "mask",
	     "0x1fff", "untagged", "last", "untagged_share", "15",
	     "flow_order", "off", "flows", "2048", "limit", "777",
	     "memory_limit", "4Mb", "quantum", "9000", "bypass", "off");
	SAME("memory_limit", "1.5m", "quantum", "3028b");
	SAME("memory_limit", "32kb", "levels", "010", "limit", "0x40");
	/* ranges are the kernel's: it names the attribute (exit 2) */
	SAME("levels", "0", "shift", "32", "memory_limit", "3gb");
	SAME("tag", "dscp", "tag", "mark");
}

/* memory_limit 1.5m: the bytes mercuryctl sends for it, 1572864 */
static void test_fraction(void **state)
{
	const struct rtattr *a;
	char err[512];
	struct req r;
	int len;

	(void)state;
	assert_int_equal(parse(2, WORDS("memory_limit", "1.5m"), &r, err,
			       sizeof(err)), 0);
	a = nest(&r, &len);
	assert_int_equal(len, RTA_LENGTH(4));
	assert_int_equal(a->rta_type, TCA_MERCURY_MEMORY_LIMIT);
	assert_int_equal(*(const uint32_t *)RTA_DATA(a), 1572864);
}

static void test_refusals(void **state)
{
	char err[1024];
	struct req r;

	(void)state;
	assert_int_equal(parse(2, WORDS("shift", "300"), &r, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "mercury: shift must be 0..31 bits, not '300'\nUsage: "));
	assert_int_equal(parse(2, WORDS("memory_limit", "1.3m"), &r, err,
			       sizeof(err)), -1);
	assert_non_null(strstr(err, "memory_limit must be"));
	assert_int_equal(parse(2, WORDS("colour", "blue"), &r, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "mercury: unknown option 'colour'\n"));
	assert_int_equal(parse(2, WORDS("tag", "DSCP"), &r, err, sizeof(err)),
			 -1);
	/* tc's conventions: help, and a missing value */
	assert_int_equal(parse(1, WORDS("help"), &r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "Usage: ... mercury"));
	assert_null(strstr(err, "mercury: "));
	assert_int_equal(parse(3, WORDS("levels", "5", "help"), &r, err,
			       sizeof(err)), -1);
	assert_null(strstr(err, "mercury: "));
	assert_int_equal(parse(3, WORDS("limit", "5", "levels"), &r, err,
			       sizeof(err)), -ENODATA);
	assert_int_equal(incomplete_calls, 1);
	/* nothing added on a refusal */
	assert_int_equal(r.n.nlmsg_len, NLMSG_LENGTH(0));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_words),
		cmocka_unit_test(test_fraction),
		cmocka_unit_test(test_refusals),
	};
	void *h;

	/* lazily: the print helpers tc also gives are not called here */
	h = dlopen(argc > 1 ? argv[1] : "./q_mercury.so", RTLD_LAZY);
	if (!h) {
		fprintf(stderr, "test_parse: %s\n", dlerror());
		return 1;
	}
	qu = dlsym(h, "mercury_qdisc_util");
	if (!qu || strcmp(qu->id, "mercury")) {
		fprintf(stderr, "test_parse: no mercury_qdisc_util\n");
		return 1;
	}
	/* libmercury's own symbols stay inside the plugin */
	if (dlsym(h, "mercury_qdisc_opts_parse")) {
		fprintf(stderr, "test_parse: the plugin exports libmercury\n");
		return 1;
	}
	return cmocka_run_group_tests_name("q_mercury.so", tests, NULL, NULL);
}
