// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Channel sets: the no-inversion invariant, SIOCOUTQ, end to end. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include "helpers.h"

#define NC	4
#define MAXQ	4096

/* Reference model: the tags and sizes of bytes queued per connection. */
struct model {
	unsigned int tag[NC][MAXQ];
	uint64_t bytes[NC][MAXQ];
	size_t head[NC], cnt[NC];
};

static unsigned long long key(unsigned int tag)
{
	return tag ? tag : ~0ULL;
}

static unsigned long long model_worst(const struct model *m, int c)
{
	unsigned long long w = 0;
	size_t i;

	for (i = 0; i < m->cnt[c]; i++)
		if (key(m->tag[c][m->head[c] + i]) > w)
			w = key(m->tag[c][m->head[c] + i]);
	return w;
}

static uint64_t model_queued(const struct model *m, int c)
{
	uint64_t q = 0;
	size_t i;

	for (i = 0; i < m->cnt[c]; i++)
		q += m->bytes[c][m->head[c] + i];
	return q;
}

static void model_drain(struct model *m, int c, uint64_t n)
{
	while (n) {
		uint64_t *b = &m->bytes[c][m->head[c]];
		uint64_t k = *b < n ? *b : n;

		*b -= k;
		n -= k;
		if (!*b) {
			m->head[c]++;
			m->cnt[c]--;
		}
	}
}

/*
 * Random commits and drains; after every pick, check against the model:
 * if some connection holds only bytes at least as urgent as the tag, the
 * pick is such a connection, and the best fit among them; only if none
 * exists may it be another, and then the least loaded.
 */
static void test_invariant_random(void **state)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .outq = MERCURY_OUTQ_MANUAL,
		     .no_tag = true);
	struct mercury_chanset *cs;
	int fds[NC], sp[NC][2], c, i, j, forced = 0, fit = 0;
	unsigned long long best, w;
	struct model *m = calloc(1, sizeof(*m));
	uint64_t seed = 12345, q, least;
	unsigned int tag, worst;
	bool any;

	(void)state;
	for (i = 0; i < NC; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
		fds[i] = sp[i][0];
	}
	assert_int_equal(mercury_chanset_new(fds, NC, &o, &cs), 0);
	for (i = 0; i < 20000; i++) {
		if (rnd(&seed) % 10 < 6) {
			tag = rnd(&seed) % 9;		/* 0 = untagged */
			c = mercury_chanset_pick(cs, tag);
			assert_in_range(c, 0, NC - 1);
			any = false;
			best = 0;
			least = UINT64_MAX;
			for (j = 0; j < NC; j++) {
				w = model_worst(m, j);
				if (w <= key(tag)) {
					best = !any || w > best ? w : best;
					any = true;
				}
				q = model_queued(m, j);
				least = q < least ? q : least;
			}
			if (any) {
				if (model_worst(m, c) > key(tag))
					fail_msg("step %d: tag %u put behind tag %llu on %d although a fit existed",
						 i, tag, model_worst(m, c), c);
				assert_int_equal(model_worst(m, c), best);
				fit++;
			} else {
				assert_int_equal(model_queued(m, c), least);
				forced++;
			}
			q = 1 + rnd(&seed) % 1000;
			assert_int_equal(mercury_chanset_commit(cs, c, tag, q), 0);
			if (m->cnt[c] && m->tag[c][m->head[c] + m->cnt[c] - 1] == tag) {
				m->bytes[c][m->head[c] + m->cnt[c] - 1] += q;
			} else {
				if (m->head[c] + m->cnt[c] == MAXQ) {
					memmove(m->tag[c], m->tag[c] + m->head[c],
						m->cnt[c] * sizeof(unsigned int));
					memmove(m->bytes[c], m->bytes[c] + m->head[c],
						m->cnt[c] * sizeof(uint64_t));
					m->head[c] = 0;
				}
				m->tag[c][m->head[c] + m->cnt[c]] = tag;
				m->bytes[c][m->head[c] + m->cnt[c]] = q;
				m->cnt[c]++;
			}
		} else {
			c = rnd(&seed) % NC;
			q = model_queued(m, c);
			q = q ? rnd(&seed) % (q + 1) : 0;
			assert_int_equal(mercury_chanset_drained(cs, c, q), 0);
			model_drain(m, c, q);
		}
		for (j = 0; j < NC; j++) {
			assert_int_equal(mercury_chanset_queued(cs, j, &q, &worst), 0);
			assert_int_equal(q, model_queued(m, j));
			w = model_worst(m, j);
			assert_int_equal(worst, w == ~0ULL ? 0 : w);
		}
	}
	/* Both branches were exercised. */
	assert_true(fit > 1000);
	assert_true(forced > 100);
	assert_int_equal(mercury_chanset_drained(cs, 0, model_queued(m, 0) + 1),
			 -ERANGE);
	mercury_chanset_free(cs);
	for (i = 0; i < NC; i++) {
		close(sp[i][0]);
		close(sp[i][1]);
	}
	free(m);
}

/* The decisions spelled out on a small case. */
static void test_pick_rules(void **state)
{
	unsigned int classes[3] = { 9, 2, 9 };
	MERCURY_OPTS(mercury_chanset_opts, o, .outq = MERCURY_OUTQ_MANUAL,
		     .no_tag = true, .classes = classes);
	struct mercury_chanset *cs;
	int sp[3][2], fds[3], i;

	(void)state;
	for (i = 0; i < 3; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
		fds[i] = sp[i][0];
	}
	assert_int_equal(mercury_chanset_new(fds, 3, &o, &cs), 0);
	assert_int_equal(mercury_chanset_pick(cs, 5), 0);	/* all idle */
	mercury_chanset_commit(cs, 0, 5, 1000);
	assert_int_equal(mercury_chanset_pick(cs, 5), 0);	/* same tag */
	assert_int_equal(mercury_chanset_pick(cs, 7), 0);	/* best fit */
	/* Not behind 5; of the idle two, conn 1 has class 2. */
	assert_int_equal(mercury_chanset_pick(cs, 2), 1);
	mercury_chanset_commit(cs, 1, 2, 10);
	assert_int_equal(mercury_chanset_pick(cs, 3), 1);	/* behind 2 */
	assert_int_equal(mercury_chanset_pick(cs, 1), 2);	/* idle one */
	mercury_chanset_commit(cs, 2, 1, 10);
	/* 6 fits behind 5, 2 and 1: best fit is the least urgent, 5. */
	assert_int_equal(mercury_chanset_pick(cs, 6), 0);
	mercury_chanset_commit(cs, 0, 6, 10);
	assert_int_equal(mercury_chanset_pick(cs, 0), 0);	/* untagged last */
	i = mercury_chanset_pick(cs, 1);
	assert_int_equal(i, 2);					/* behind 1 */
	mercury_chanset_drained(cs, 2, 10);
	mercury_chanset_drained(cs, 1, 10);
	/* Both idle: class decides (conn 1 prefers tag 2). */
	assert_int_equal(mercury_chanset_pick(cs, 2), 1);
	mercury_chanset_commit(cs, 1, 4, 10);
	mercury_chanset_commit(cs, 2, 4, 10);
	assert_int_equal(mercury_chanset_commit(cs, 0, 9, 0), 0); /* no-op */
	/* Every queue is less urgent than 3: the least loaded (1 or 2). */
	i = mercury_chanset_pick(cs, 3);
	assert_true(i == 1 || i == 2);
	assert_int_equal(mercury_chanset_commit(cs, 3, 1, 1), -EINVAL);
	mercury_chanset_free(cs);
	for (i = 0; i < 3; i++) {
		close(sp[i][0]);
		close(sp[i][1]);
	}
}

/*
 * Kernel accounting: bytes the peer has not acknowledged (SIOCOUTQ) keep a
 * connection busy; once the receiver reads them, it is idle again.
 */
static void test_outq_kernel(void **state)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true);
	struct mercury_chanset *cs;
	unsigned short port;
	unsigned int worst;
	char buf[65536] = { 0 };
	int l, a[2], fds[2], i, c, tries;
	ssize_t r, total = 0;
	uint64_t q;

	(void)state;
	l = listen_lo(4096, &port);
	for (i = 0; i < 2; i++) {
		fds[i] = connect_lo(port);
		a[i] = accept(l, NULL, NULL);
		assert_true(a[i] >= 0);
	}
	assert_int_equal(mercury_chanset_new(fds, 2, &o, &cs), 0);
	c = mercury_chanset_pick(cs, 5);
	/* Fill the peer's small window and our send buffer. */
	fcntl(fds[c], F_SETFL, O_NONBLOCK);
	while ((r = write(fds[c], buf, sizeof(buf))) > 0)
		total += r;
	assert_true(errno == EAGAIN);
	assert_int_equal(mercury_chanset_commit(cs, c, 5, total), 0);
	assert_int_equal(mercury_chanset_queued(cs, c, &q, &worst), 0);
	assert_true(q > 0 && q <= (uint64_t)total);
	assert_int_equal(worst, 5);
	assert_int_equal(mercury_chanset_pick(cs, 2), !c);	/* not behind 5 */
	assert_int_equal(mercury_chanset_pick(cs, 8), c);	/* fits behind 5 */
	/* Drain at the receiver; the kernel's count falls to 0. */
	fcntl(a[c], F_SETFL, O_NONBLOCK);
	for (tries = 0; tries < 2000; tries++) {
		while ((r = read(a[c], buf, sizeof(buf))) > 0)
			total -= r;
		assert_int_equal(mercury_chanset_queued(cs, c, &q, &worst), 0);
		if (!total && !q)
			break;
		poll(NULL, 0, 1);
	}
	assert_int_equal(total, 0);
	assert_int_equal(q, 0);
	assert_int_equal(worst, 0);
	mercury_chanset_free(cs);
	for (i = 0; i < 2; i++) {
		close(fds[i]);
		close(a[i]);
	}
	close(l);
}

struct receiver {
	int fds[3];
	int n;
	int done;
	struct mercury_tensor t[16];
};

static void *recv_thread(void *arg)
{
	struct receiver *r = arg;
	struct mercury_rx *rx;
	int i, k;

	if (mercury_rx_new(NULL, &rx))
		return NULL;
	for (i = 0; i < r->n; i++)
		mercury_rx_add(rx, r->fds[i]);
	while ((k = mercury_rx_poll(rx, 5000)) >= 0)
		for (r->done += k; k > 0; k--)
			mercury_rx_next(rx, &r->t[r->done - k]);
	mercury_rx_free(rx);
	return NULL;
}

/*
 * End to end over TCP: mercury_chanset_connect, per-tensor SO_PRIORITY
 * tags (unprivileged 0..6), chunks spread over connections, every tensor
 * back whole at the receiver, the last tag readable on the socket.
 */
static void test_send_end_to_end(void **state)
{
	MERCURY_OPTS(mercury_tag_opts, to, .source = MERCURY_TAG_PRIORITY);
	MERCURY_OPTS(mercury_chanset_opts, o, .tag_opts = &to,
		     .chunk_size = 65536);
	struct mercury_chanset_stats st;
	struct receiver r = { .n = 3 };
	struct mercury_chanset *cs;
	unsigned char *data;
	unsigned short port;
	uint64_t seed = 99;
	char portstr[8];
	unsigned int tag;
	pthread_t th;
	int l, i, prio;
	socklen_t len;
	enum { N = 12, LEN = 1 << 20 };

	(void)state;
	data = malloc((size_t)N * LEN);
	for (i = 0; i < N * LEN; i++)
		data[i] = rnd(&seed);
	l = listen_lo(0, &port);
	snprintf(portstr, sizeof(portstr), "%u", port);
	assert_int_equal(mercury_chanset_connect("127.0.0.1", portstr, 3, &o,
						 &cs), 0);
	assert_int_equal(mercury_chanset_count(cs), 3);
	for (i = 0; i < 3; i++)
		r.fds[i] = accept(l, NULL, NULL);
	assert_int_equal(pthread_create(&th, NULL, recv_thread, &r), 0);
	/* Backward order: the last layers (least urgent) come first. */
	for (i = 0; i < N; i++) {
		tag = 6 - i / 2;
		assert_int_equal(mercury_chanset_send(cs, 100 + i, tag,
						      data + (size_t)i * LEN,
						      LEN), 0);
	}
	assert_int_equal(mercury_chanset_get_stats(cs, &st, sizeof(st)), 0);
	assert_int_equal(st.chunks, N * LEN / 65536);
	assert_int_equal(st.bytes, (uint64_t)N * LEN);
	assert_true(st.tag_syscalls >= 6);	/* six tags, at least once */
	assert_true(st.tag_syscalls <= st.chunks);
	/* Every connection's SO_PRIORITY is one of the tags sent. */
	for (i = 0; i < 3; i++) {
		len = sizeof(prio);
		assert_int_equal(getsockopt(mercury_chanset_fd(cs, i), SOL_SOCKET,
					    SO_PRIORITY, &prio, &len), 0);
		assert_in_range(prio, 0, 6);
	}
	mercury_chanset_free(cs);	/* closes: the receiver sees EOF */
	pthread_join(th, NULL);
	assert_int_equal(r.done, N);
	for (i = 0; i < N; i++) {
		uint32_t k = r.t[i].id - 100;

		assert_in_range(k, 0, N - 1);
		assert_int_equal(r.t[i].tag, 6 - k / 2);
		assert_int_equal(r.t[i].len, LEN);
		assert_memory_equal(r.t[i].data, data + (size_t)k * LEN, LEN);
		mercury_tensor_release(&r.t[i]);
	}
	for (i = 0; i < 3; i++)
		close(r.fds[i]);
	close(l);
	free(data);
}

static void test_errors(void **state)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true);
	struct mercury_chanset *cs = (void *)1;
	int fds[2] = { 0, -1 };
	unsigned short port;
	char portstr[8];
	int l;

	(void)state;
	assert_int_equal(mercury_chanset_new(fds, 0, &o, &cs), -EINVAL);
	assert_null(cs);
	assert_int_equal(mercury_chanset_new(fds, 2, &o, &cs), -EBADF);
	assert_int_equal(mercury_chanset_new(fds, 1, &o, &cs), 0);
	/* Kernel mode: drained() is not the caller's to say. */
	assert_int_equal(mercury_chanset_drained(cs, 0, 1), -EINVAL);
	assert_int_equal(mercury_chanset_fd(cs, 1), -EINVAL);
	assert_int_equal(mercury_chanset_send(cs, 1, 70000, "x", 1), -ERANGE);
	mercury_chanset_free(cs);
	/* A port nobody listens on. */
	l = listen_lo(0, &port);
	close(l);
	snprintf(portstr, sizeof(portstr), "%u", port);
	assert_int_equal(mercury_chanset_connect("127.0.0.1", portstr, 2, &o,
						 &cs), -ECONNREFUSED);
	assert_non_null(strstr(mercury_last_error(), portstr));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invariant_random),
		cmocka_unit_test(test_pick_rules),
		cmocka_unit_test(test_outq_kernel),
		cmocka_unit_test(test_send_end_to_end),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests_name("chanset", tests, NULL, NULL);
}
