// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Tagging cost per tensor: send 1 MB tensors over loopback TCP, untagged
 * and tagged, and compare throughput. The tagged run changes the tag on
 * every tensor (the worst case: one setsockopt per tensor, as in a backward
 * pass where each tensor has its own tag); a third run goes through a
 * one-connection channel set (framing + pick + tag). Variants alternate
 * within each repetition so drift hits all alike; medians are reported,
 * with the median of per-repetition (paired) ratios.
 *
 * usage: bench_tag [-r reps] [-n tensors] [-s mark|priority]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mercury/mercury.h"

#define TENSOR	(1 << 20)

static void *drain(void *arg)
{
	int fd = *(int *)arg;
	static char buf[1 << 18];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_all(int fd, const char *p, size_t n)
{
	ssize_t r;

	while (n) {
		r = write(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= r;
	}
	return 0;
}

static int pair(int fds[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len))
		return -1;
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fds[0], (struct sockaddr *)&a, sizeof(a)))
		return -1;
	fds[1] = accept(l, NULL, NULL);
	close(l);
	return fds[1] < 0 ? -1 : 0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

enum { RAW, TAGGED, CHANSET, NVAR };
static const char *const names[NVAR] = { "untagged", "tagged", "chanset" };

/* One run: n tensors on a fresh connection; returns MB/s. */
static double run(int variant, int n, const char *buf,
		  const struct mercury_tag_opts *to)
{
	MERCURY_OPTS(mercury_chanset_opts, co, .tag_opts = to,
		     .chunk_size = TENSOR);
	struct mercury_chanset *cs = NULL;
	struct mercury_tagger *t = NULL;
	int fds[2], i, err = 0;
	pthread_t th;
	double t0, t1;

	if (pair(fds))
		return -1;
	pthread_create(&th, NULL, drain, &fds[1]);
	if (variant == TAGGED && mercury_tagger_new(to, &t))
		return -1;
	if (variant == CHANSET && mercury_chanset_new(&fds[0], 1, &co, &cs))
		return -1;
	t0 = now();
	for (i = 0; i < n && !err; i++) {
		/* Tags 1..6 cycling: a new value every tensor. */
		unsigned int tag = 1 + i % 6;

		if (variant == TAGGED)
			err = mercury_tag_socket(t, fds[0], tag) ||
			      write_all(fds[0], buf, TENSOR);
		else if (variant == CHANSET)
			err = mercury_chanset_send(cs, i, tag, buf, TENSOR);
		else
			err = write_all(fds[0], buf, TENSOR);
	}
	shutdown(fds[0], SHUT_WR);
	pthread_join(th, NULL);	/* all bytes read by the peer */
	t1 = now();
	mercury_chanset_free(cs);
	mercury_tagger_free(t);
	close(fds[0]);
	close(fds[1]);
	if (err) {
		fprintf(stderr, "bench_tag: %s: %s\n", names[variant],
			mercury_last_error());
		return -1;
	}
	return (double)n * TENSOR / (t1 - t0) / 1e6;
}

/* ns per mercury_tag_socket() call, changing the tag or not. */
static double call_ns(const struct mercury_tag_opts *to, bool change)
{
	struct mercury_tagger *t;
	int fds[2], i, n = 200000;
	double t0, t1;

	if (pair(fds) || mercury_tagger_new(to, &t))
		return -1;
	t0 = now();
	for (i = 0; i < n; i++)
		if (mercury_tag_socket(t, fds[0], change ? 1 + i % 6 : 3))
			return -1;
	t1 = now();
	mercury_tagger_free(t);
	close(fds[0]);
	close(fds[1]);
	return (t1 - t0) / n * 1e9;
}

int main(int argc, char **argv)
{
	MERCURY_OPTS(mercury_tag_opts, to, .source = MERCURY_TAG_PRIORITY);
	int reps = 21, n = 300, opt, r, v;
	double res[NVAR][64], med[NVAR], ratio[2][64];
	char *buf;

	while ((opt = getopt(argc, argv, "r:n:s:")) != -1) {
		switch (opt) {
		case 'r':
			reps = atoi(optarg);
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 's':
			if (!strcmp(optarg, "mark"))
				to.source = MERCURY_TAG_MARK;
			else if (strcmp(optarg, "priority"))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (reps < 1 || reps > 64 || n < 1)
		goto usage;
	buf = calloc(1, TENSOR);
	if (!buf)
		return 1;
	for (r = 0; r < reps; r++) {
		for (v = 0; v < NVAR; v++) {
			/* Rotate the order so no variant always goes first. */
			int w = (v + r) % NVAR;

			res[w][r] = run(w, n, buf, &to);
			if (res[w][r] < 0)
				return 1;
		}
		/* Paired ratios: both runs of a pair see the same load. */
		ratio[0][r] = res[TAGGED][r] / res[RAW][r];
		ratio[1][r] = res[CHANSET][r] / res[RAW][r];
	}
	printf("# %d x %d tensors of 1 MiB over 127.0.0.1 TCP, tag source %s\n",
	       reps, n, to.source == MERCURY_TAG_MARK ? "mark" : "priority");
	for (v = 0; v < NVAR; v++) {
		qsort(res[v], reps, sizeof(double), cmp);
		med[v] = reps % 2 ? res[v][reps / 2] :
			(res[v][reps / 2 - 1] + res[v][reps / 2]) / 2;
		printf("%-9s median %8.1f MB/s  (min %8.1f, max %8.1f)\n",
		       names[v], med[v], res[v][0], res[v][reps - 1]);
	}
	qsort(ratio[0], reps, sizeof(double), cmp);
	qsort(ratio[1], reps, sizeof(double), cmp);
	printf("tagged/untagged  ratio of medians %.4f, median paired ratio %.4f (loss %+.2f%%)\n",
	       med[TAGGED] / med[RAW], ratio[0][reps / 2],
	       100 * (1 - ratio[0][reps / 2]));
	printf("chanset/untagged ratio of medians %.4f, median paired ratio %.4f (loss %+.2f%%)\n",
	       med[CHANSET] / med[RAW], ratio[1][reps / 2],
	       100 * (1 - ratio[1][reps / 2]));
	/*
	 * Throughput medians are noisy at the 1% level on a shared host, so
	 * also give the direct cost: one tag call against the time one 1 MiB
	 * tensor takes at the untagged median.
	 */
	{
		double chg = call_ns(&to, true), same = call_ns(&to, false);
		double per = TENSOR / (med[RAW] * 1e6) * 1e9;

		if (chg < 0 || same < 0) {
			fprintf(stderr, "bench_tag: %s\n", mercury_last_error());
			return 1;
		}
		printf("tag call: %.0f ns when the tag changes (setsockopt), %.1f ns when cached\n",
		       chg, same);
		printf("per 1 MiB tensor (%.0f ns at the untagged median): %.4f%% changed, %.5f%% cached\n",
		       per, 100 * chg / per, 100 * same / per);
	}
	free(buf);
	return 0;
usage:
	fprintf(stderr, "usage: bench_tag [-r reps] [-n tensors] [-s mark|priority]\n");
	return 2;
}
