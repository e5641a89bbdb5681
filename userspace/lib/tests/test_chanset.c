// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Channel sets: the no-inversion and no-re-tag invariants against a
 * reference model, SIOCOUTQ / SIOCOUTQNSD on real TCP, end to end.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <linux/sockios.h>

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

/* Bytes of other tags than tag queued on c; *demote: one is more urgent. */
static uint64_t model_foreign(const struct model *m, int c, unsigned int tag,
			      bool *demote)
{
	uint64_t f = 0;
	size_t i, k;

	*demote = false;
	for (i = 0; i < m->cnt[c]; i++) {
		k = m->head[c] + i;
		if (m->tag[c][k] == tag)
			continue;
		f += m->bytes[c][k];
		*demote |= key(m->tag[c][k]) < key(tag);
	}
	return f;
}

/*
 * What the library must answer, from the model alone (manual mode: every
 * unconsumed byte counts as unsent). *retag gets pick()'s fallback when no
 * connection can take tag without re-tagging another tag's bytes.
 */
static int model_pick(const struct model *m, unsigned int tag, int *retag)
{
	int j, best = -1, least = -1, r = -1;
	unsigned long long w, bw = 0;
	uint64_t f, rf = 0;
	bool dem, rdem = false;

	for (j = 0; j < NC; j++) {
		f = model_foreign(m, j, tag, &dem);
		if (f) {
			if (r < 0 || dem < rdem || (dem == rdem && f < rf)) {
				r = j;
				rf = f;
				rdem = dem;
			}
			continue;
		}
		if (least < 0 || model_queued(m, j) < model_queued(m, least))
			least = j;
		w = model_worst(m, j);
		if (w > key(tag))
			continue;
		if (best < 0 || w > bw ||
		    (w == bw && model_queued(m, j) < model_queued(m, best))) {
			best = j;
			bw = w;
		}
	}
	*retag = r;
	if (best >= 0)
		return best;
	return least >= 0 ? least : -EAGAIN;
}

static void model_commit(struct model *m, int c, unsigned int tag, uint64_t q)
{
	size_t last = m->head[c] + m->cnt[c] - 1;

	if (m->cnt[c] && m->tag[c][last] == tag) {
		m->bytes[c][last] += q;
		return;
	}
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

/*
 * 20 000 random picks, commits and drains against the reference model.
 * Commits go only where try_pick() says. After every step:
 *  - try_pick() and pick() give exactly the model's answer: an eligible
 *    connection (nothing less urgent queued, no unsent byte of another
 *    tag), the best fit among them; -EAGAIN for try_pick() only when every
 *    connection holds bytes of another tag, and then pick()'s documented
 *    least bad index;
 *  - no connection ever carries queued (here: unsent) bytes of two
 *    different tags, so no commit could have re-tagged anything;
 *  - the library's queued bytes and least urgent tag equal the model's.
 */
static void test_invariant_random(void **state)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .outq = MERCURY_OUTQ_MANUAL,
		     .no_tag = true);
	struct mercury_chanset *cs;
	int fds[NC], sp[NC][2], c, e, r, i, j, fit = 0, eagain = 0;
	int promote = 0, demote = 0;
	struct model *m = calloc(1, sizeof(*m));
	uint64_t seed = 12345, q;
	unsigned long long w;
	unsigned int tag, worst;
	size_t k;
	bool dem;

	(void)state;
	for (i = 0; i < NC; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
		fds[i] = sp[i][0];
	}
	assert_int_equal(mercury_chanset_new(fds, NC, &o, &cs), 0);
	for (i = 0; i < 20000; i++) {
		if (rnd(&seed) % 10 < 6) {
			tag = rnd(&seed) % 9;		/* 0 = untagged */
			e = model_pick(m, tag, &r);
			c = mercury_chanset_try_pick(cs, tag);
			if (c != e)
				fail_msg("step %d: try_pick(%u) = %d, model says %d",
					 i, tag, c, e);
			if (c == -EAGAIN) {
				assert_int_equal(errno, EAGAIN);
				/* The old call still names a connection. */
				assert_int_equal(mercury_chanset_pick(cs, tag), r);
				model_foreign(m, r, tag, &dem);
				demote += dem;
				promote += !dem;
				eagain++;
				continue;
			}
			assert_int_equal(mercury_chanset_pick(cs, tag), c);
			/* Manual mode: an eligible one always exists here. */
			assert_true(model_worst(m, c) <= key(tag));
			fit++;
			q = 1 + rnd(&seed) % 1000;
			assert_int_equal(mercury_chanset_commit(cs, c, tag, q), 0);
			model_commit(m, c, tag, q);
		} else {
			c = rnd(&seed) % NC;
			q = model_queued(m, c);
			q = q ? rnd(&seed) % (q + 1) : 0;
			assert_int_equal(mercury_chanset_drained(cs, c, q), 0);
			model_drain(m, c, q);
		}
		for (j = 0; j < NC; j++) {
			for (k = 1; k < m->cnt[j]; k++)
				if (m->tag[j][m->head[j] + k] !=
				    m->tag[j][m->head[j]])
					fail_msg("step %d: connection %d holds tags %u and %u",
						 i, j, m->tag[j][m->head[j]],
						 m->tag[j][m->head[j] + k]);
			assert_int_equal(mercury_chanset_queued(cs, j, &q, &worst), 0);
			assert_int_equal(q, model_queued(m, j));
			w = model_worst(m, j);
			assert_int_equal(worst, w == ~0ULL ? 0 : w);
		}
	}
	/* Every branch was exercised. */
	assert_true(fit > 1000);
	assert_true(eagain > 100);
	assert_true(promote > 10 && demote > 10);
	assert_int_equal(mercury_chanset_drained(cs, 0, model_queued(m, 0) + 1),
			 -ERANGE);
	mercury_chanset_free(cs);
	for (i = 0; i < NC; i++) {
		close(sp[i][0]);
		close(sp[i][1]);
	}
	free(m);
}

/* The decisions spelled out on a small case (manual mode: all unsent). */
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
	/*
	 * 7 would fit behind 5 (best fit), but tagging conn 0 for 7 would
	 * demote its unsent tag-5 bytes: an idle one, the lower index.
	 */
	assert_int_equal(mercury_chanset_try_pick(cs, 7), 1);
	assert_int_equal(mercury_chanset_pick(cs, 7), 1);
	/* Of the idle two, conn 1 has class 2. */
	assert_int_equal(mercury_chanset_pick(cs, 2), 1);
	mercury_chanset_commit(cs, 1, 2, 10);
	/* Neither behind 5 nor re-tagging 2: the idle one. */
	assert_int_equal(mercury_chanset_try_pick(cs, 3), 2);
	mercury_chanset_commit(cs, 2, 1, 10);
	assert_int_equal(mercury_chanset_try_pick(cs, 1), 2);	/* same tag */
	/* 5, 2 and 1 queued: any choice for 6 re-tags someone. */
	assert_int_equal(mercury_chanset_try_pick(cs, 6), -EAGAIN);
	assert_int_equal(errno, EAGAIN);
	/* pick() must still answer: all demote; fewest bytes (10), lower. */
	assert_int_equal(mercury_chanset_pick(cs, 6), 1);
	mercury_chanset_drained(cs, 1, 10);
	assert_int_equal(mercury_chanset_try_pick(cs, 6), 1);	/* idle now */
	mercury_chanset_commit(cs, 1, 6, 10);
	/* 5 (1000 B), 6 (10 B), 1 (10 B): for 3, promoting 5 or 6 beats
	 * demoting 1; of those, the fewest bytes. */
	assert_int_equal(mercury_chanset_try_pick(cs, 3), -EAGAIN);
	assert_int_equal(mercury_chanset_pick(cs, 3), 1);
	/* Untagged is least urgent: everything would be demoted. */
	assert_int_equal(mercury_chanset_pick(cs, 0), 1);
	mercury_chanset_drained(cs, 2, 10);
	mercury_chanset_drained(cs, 1, 10);
	/* Both idle: class decides (conn 1 prefers tag 2). */
	assert_int_equal(mercury_chanset_pick(cs, 2), 1);
	assert_int_equal(mercury_chanset_commit(cs, 0, 9, 0), 0); /* no-op */
	assert_int_equal(mercury_chanset_commit(cs, 3, 1, 1), -EINVAL);
	assert_int_equal(mercury_chanset_try_pick(NULL, 1), -EINVAL);
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
	/* The peer's window is closed: most of it has not even been sent. */
	assert_int_equal(ioctl(fds[c], SIOCOUTQNSD, &i), 0);
	assert_true(i > 0);
	/* 8 would fit behind 5 but its tag would re-tag those bytes. */
	assert_int_equal(mercury_chanset_try_pick(cs, 8), !c);
	assert_int_equal(mercury_chanset_try_pick(cs, 5), c);	/* same tag */
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
	assert_int_equal(mercury_chanset_try_pick(cs, 8), 0);	/* both idle */
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

static unsigned int nsd(int fd)
{
	int v = -1;

	assert_int_equal(ioctl(fd, SIOCOUTQNSD, &v), 0);
	assert_true(v >= 0);
	return v;
}

/* Tagger options: SO_MARK if this process may set it, else SO_PRIORITY. */
static bool may_mark(void)
{
	struct mercury_tagger *t;
	bool ok;

	if (mercury_tagger_new(NULL, &t))
		return false;
	ok = !mercury_tagger_probe(t, 7);
	mercury_tagger_free(t);
	return ok;
}

#define NT	3		/* connections */
#define SEGS	4096		/* per connection, plenty for the test */

struct slow_reader {
	int fds[NT];
	volatile int stop;
	uint64_t got;
};

/* Reads a little from each connection in turn, so queues build up. */
static void *slow_read(void *arg)
{
	struct slow_reader *r = arg;
	char buf[4096];
	ssize_t n;
	int i;

	for (;;) {
		for (i = 0; i < NT; i++) {
			n = recv(r->fds[i], buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0)
				r->got += n;
		}
		if (r->stop)
			break;
		usleep(300);
	}
	for (i = 0; i < NT; i++)	/* the rest, up to the sender's FIN */
		while ((n = recv(r->fds[i], buf, sizeof(buf), 0)) > 0)
			r->got += n;
	return NULL;
}

/*
 * Real TCP over loopback, a reader slower than the sender, tags changing
 * at random: the caller's own write loop (pick, tag, write, commit, like
 * userspace/ps) using try_pick(). Before every tag, SIOCOUTQNSD on the
 * chosen socket and the test's own record of what it wrote must show that
 * every unsent byte there already has this chunk's tag, so the
 * setsockopt re-tags nothing. The socket is read back after tagging.
 * "hazards" counts picks where some connection held only more urgent
 * unsent bytes, i.e. where the best fit alone would have demoted them.
 */
static void run_no_retag_tcp(bool mark)
{
	MERCURY_OPTS(mercury_tag_opts, to, .source = mark ? MERCURY_TAG_MARK :
		     MERCURY_TAG_PRIORITY);
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true);
	static uint64_t end[NT][SEGS];
	static unsigned int stag[NT][SEGS];
	struct slow_reader rd = { .stop = 0 };
	int fds[NT], l, i, j, c, n, big = 128 * 1024;
	int hazards = 0, same = 0, eagain = 0, chunks = 0;
	size_t ns[NT] = { 0 };
	uint64_t w[NT] = { 0 }, sent = 0, seed = 4242, un;
	struct mercury_tagger *tg;
	struct mercury_chanset *cs;
	static char buf[16384];
	unsigned short port;
	unsigned int tag;
	bool all_more, any;
	pthread_t th;
	size_t k;

	l = listen_lo(8192, &port);
	for (i = 0; i < NT; i++) {
		fds[i] = connect_lo(port);
		setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
		rd.fds[i] = accept(l, NULL, NULL);
		assert_true(rd.fds[i] >= 0);
	}
	assert_int_equal(mercury_tagger_new(&to, &tg), 0);
	assert_int_equal(mercury_chanset_new(fds, NT, &o, &cs), 0);
	assert_int_equal(pthread_create(&th, NULL, slow_read, &rd), 0);
	while (chunks < 600) {
		/* Mostly backward order (more urgent over time), some noise. */
		tag = 1 + (rnd(&seed) % 4 ? 5 - (unsigned int)(chunks / 20) % 6 :
				   (unsigned int)(rnd(&seed) % 6));
		c = mercury_chanset_try_pick(cs, tag);
		if (c == -EAGAIN) {
			eagain++;
			usleep(200);
			continue;
		}
		assert_in_range(c, 0, NT - 1);
		/* Any connection holding only more urgent unsent bytes? */
		for (j = 0; j < NT; j++) {
			un = nsd(fds[j]);
			all_more = un > 0;
			for (k = 0; k < ns[j] && all_more; k++)
				if (end[j][k] > w[j] - un && stag[j][k] >= tag)
					all_more = false;
			hazards += all_more;
		}
		/* The chosen one: unsent bytes, if any, all carry tag. */
		un = nsd(fds[c]);
		any = false;
		for (k = 0; k < ns[c]; k++) {
			if (end[c][k] <= w[c] - un)
				continue;
			if (stag[c][k] != tag)
				fail_msg("chunk %d, tag %u: fd %d still holds %llu unsent bytes, some of tag %u",
					 chunks, tag, fds[c],
					 (unsigned long long)un, stag[c][k]);
			any = true;
		}
		same += any;
		assert_int_equal(mercury_tag_socket(tg, fds[c], tag), 0);
		assert_int_equal(mercury_socket_tag(tg, fds[c]), tag);
		n = 2048 + rnd(&seed) % (sizeof(buf) - 2048);
		assert_int_equal(write(fds[c], buf, n), n);	/* blocking */
		assert_int_equal(mercury_chanset_commit(cs, c, tag, n), 0);
		w[c] += n;
		sent += n;
		if (ns[c] && stag[c][ns[c] - 1] == tag) {
			end[c][ns[c] - 1] = w[c];
		} else {
			assert_true(ns[c] < SEGS);
			end[c][ns[c]] = w[c];
			stag[c][ns[c]++] = tag;
		}
		chunks++;
	}
	print_message("# %s: %d chunks, %d onto unsent bytes of the same tag, %d waits, %d hazards avoided\n",
		      mark ? "SO_MARK" : "SO_PRIORITY", chunks, same, eagain,
		      hazards);
	/* The situations under test did occur. */
	assert_true(same > 10);
	assert_true(eagain > 0);
	assert_true(hazards > 10);
	for (i = 0; i < NT; i++)
		shutdown(fds[i], SHUT_WR);
	rd.stop = 1;
	pthread_join(th, NULL);
	assert_int_equal(rd.got, sent);
	mercury_chanset_free(cs);
	mercury_tagger_free(tg);
	for (i = 0; i < NT; i++) {
		close(fds[i]);
		close(rd.fds[i]);
	}
	close(l);
}

static void test_no_retag_tcp_mark(void **state)
{
	(void)state;
	run_no_retag_tcp(true);
}

static void test_no_retag_tcp_priority(void **state)
{
	(void)state;
	run_no_retag_tcp(false);
}

struct bg_send {
	struct mercury_chanset *cs;
	unsigned int tag;
	const void *buf;
	uint64_t len;
	volatile int started, done;
	int ret;
};

static void *bg_send(void *arg)
{
	struct bg_send *b = arg;

	b->started = 1;
	b->ret = mercury_chanset_send(b->cs, 99, b->tag, b->buf, b->len);
	b->done = 1;
	return NULL;
}

/*
 * mercury_chanset_send() with a receiver that is not reading: tensors of
 * tags 6, 3, 5 each take their own connection and stay unsent there (the
 * window is closed). Another tag-6 tensor joins its own tag. A tag-1
 * tensor finds unsent bytes of another tag everywhere: send() waits, and
 * while it waits every socket still carries its old tag. Once the reader
 * empties the tag-3 connection, the tensor goes there.
 */
static void run_send_never_retags(bool mark)
{
	MERCURY_OPTS(mercury_tag_opts, to, .source = mark ? MERCURY_TAG_MARK :
		     MERCURY_TAG_PRIORITY);
	MERCURY_OPTS(mercury_chanset_opts, o, .tag_opts = &to,
		     .chunk_size = 16384);
	static const unsigned int tags[NT] = { 6, 3, 5 };
	struct bg_send b = { .tag = 1, .len = 40000 };
	struct mercury_chanset_stats st;
	struct mercury_tagger *tg;
	struct mercury_chanset *cs;
	static char buf[65536], sink[65536];
	int fds[NT], acc[NT], l, i, c, big = 256 * 1024, tries;
	uint64_t q[NT], q2;
	unsigned short port;
	unsigned int worst;
	pthread_t th;
	ssize_t r;

	l = listen_lo(4096, &port);
	for (i = 0; i < NT; i++) {
		fds[i] = connect_lo(port);
		setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
		acc[i] = accept(l, NULL, NULL);
		assert_true(acc[i] >= 0);
		fcntl(acc[i], F_SETFL, O_NONBLOCK);
	}
	assert_int_equal(mercury_tagger_new(&to, &tg), 0);
	assert_int_equal(mercury_chanset_new(fds, NT, &o, &cs), 0);
	for (i = 0; i < NT; i++)
		assert_int_equal(mercury_chanset_send(cs, i, tags[i], buf,
						      sizeof(buf)), 0);
	for (i = 0; i < NT; i++) {
		assert_int_equal(mercury_chanset_queued(cs, i, &q[i], &worst), 0);
		assert_int_equal(worst, tags[i]);	/* one connection each */
		assert_true(nsd(fds[i]) > 0);
		assert_int_equal(mercury_socket_tag(tg, fds[i]), tags[i]);
	}
	/* Same tag: joins connection 0 although 0 is not idle. */
	assert_int_equal(mercury_chanset_send(cs, 3, 6, buf, 1000), 0);
	assert_int_equal(mercury_chanset_queued(cs, 0, &q2, &worst), 0);
	assert_true(q2 > q[0]);
	/* Tag 1 must wait: re-tagging any of them is not allowed. */
	b.cs = cs;
	b.buf = buf;
	assert_int_equal(pthread_create(&th, NULL, bg_send, &b), 0);
	/* time the wait from the thread's start, not from its creation: on
	 * a loaded machine a new thread may first run much later
	 */
	while (!b.started)
		usleep(1000);
	usleep(200 * 1000);
	assert_false(b.done);
	for (i = 0; i < NT; i++) {
		assert_int_equal(mercury_socket_tag(tg, fds[i]), tags[i]);
		assert_true(nsd(fds[i]) > 0);
	}
	/* Empty the tag-3 connection. */
	/* until the send is done (it gives up after timeout_ms, 60 s) */
	for (tries = 0; tries < 120000 && !b.done; tries++) {
		while ((r = read(acc[1], sink, sizeof(sink))) > 0)
			;
		usleep(1000);
	}
	pthread_join(th, NULL);
	assert_int_equal(b.ret, 0);
	assert_int_equal(mercury_socket_tag(tg, fds[0]), 6);
	assert_int_equal(mercury_socket_tag(tg, fds[1]), 1);
	assert_int_equal(mercury_socket_tag(tg, fds[2]), 5);
	assert_int_equal(mercury_chanset_get_stats(cs, &st, sizeof(st)), 0);
	assert_int_equal(st.waits, 1);
	assert_true(st.wait_ns >= 150 * 1000000ull);
	c = mercury_chanset_try_pick(cs, 1);
	assert_true(c == 1 || c == -EAGAIN);	/* only 1 holds tag 1 */
	mercury_chanset_free(cs);
	mercury_tagger_free(tg);
	for (i = 0; i < NT; i++) {
		close(fds[i]);
		close(acc[i]);
	}
	close(l);
}

static void test_send_never_retags_mark(void **state)
{
	(void)state;
	run_send_never_retags(true);
}

static void test_send_never_retags_priority(void **state)
{
	(void)state;
	run_send_never_retags(false);
}

/*
 * Manual mode cannot wait (only the caller reports progress): with bytes
 * of other tags on every connection, send() fails with -EAGAIN before it
 * writes a byte, and succeeds once a connection is reported drained.
 */
static void test_send_manual_eagain(void **state)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .outq = MERCURY_OUTQ_MANUAL,
		     .no_tag = true, .chunk_size = 100);
	struct mercury_chanset_stats st;
	struct mercury_chanset *cs;
	int sp[2][2], fds[2], i, pend;
	char buf[300] = { 0 };
	uint64_t q;

	(void)state;
	for (i = 0; i < 2; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
		fds[i] = sp[i][0];
	}
	assert_int_equal(mercury_chanset_new(fds, 2, &o, &cs), 0);
	assert_int_equal(mercury_chanset_send(cs, 1, 1, buf, 300), 0);
	assert_int_equal(mercury_chanset_send(cs, 2, 2, buf, 300), 0);
	for (i = 0; i < 2; i++) {	/* one connection per tag */
		assert_int_equal(mercury_chanset_queued(cs, i, &q, NULL), 0);
		assert_int_equal(q, 3 * (100 + MERCURY_FRAME_HDR_LEN));
	}
	assert_int_equal(mercury_chanset_send(cs, 3, 3, buf, 300), -EAGAIN);
	assert_int_equal(errno, EAGAIN);
	assert_non_null(strstr(mercury_last_error(), "drained"));
	for (i = 0; i < 2; i++) {	/* nothing written */
		assert_int_equal(ioctl(sp[i][1], FIONREAD, &pend), 0);
		assert_int_equal(pend, 3 * (100 + MERCURY_FRAME_HDR_LEN));
	}
	assert_int_equal(mercury_chanset_get_stats(cs, &st, sizeof(st)), 0);
	assert_int_equal(st.waits, 1);
	assert_int_equal(st.chunks, 6);
	assert_int_equal(mercury_chanset_drained(cs, 1, 3 * 132), 0);
	assert_int_equal(mercury_chanset_send(cs, 3, 3, buf, 300), 0);
	assert_int_equal(ioctl(sp[1][1], FIONREAD, &pend), 0);
	assert_int_equal(pend, 6 * 132);
	/* An older caller's smaller stats struct still works. */
	assert_int_equal(mercury_chanset_get_stats(cs, &st,
			 offsetof(struct mercury_chanset_stats, waits)), 0);
	mercury_chanset_free(cs);
	for (i = 0; i < 2; i++) {
		close(sp[i][0]);
		close(sp[i][1]);
	}
}

/* A connection whose peer never reads: small window, large send buffer. */
static void stalled_pair(int c[2], int sndbuf)
{
	unsigned short port;
	int l = listen_lo(4096, &port);

	c[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c[0] >= 0);
	if (sndbuf)
		assert_int_equal(setsockopt(c[0], SOL_SOCKET, SO_SNDBUF,
					    &sndbuf, sizeof(sndbuf)), 0);
	close(c[0]);
	c[0] = connect_lo(port);
	if (sndbuf)
		assert_int_equal(setsockopt(c[0], SOL_SOCKET, SO_SNDBUF,
					    &sndbuf, sizeof(sndbuf)), 0);
	c[1] = accept(l, NULL, NULL);
	assert_true(c[1] >= 0);
	close(l);
}

/* The peer closed: -EPIPE or -ECONNRESET with a message, no SIGPIPE. */
static int send_to_closed_peer(void)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true);
	static char buf[1 << 20];
	struct mercury_chanset *cs;
	int c[2], err = 0, i;

	tcp_pair(c);
	close(c[1]);
	if (mercury_chanset_new(c, 1, &o, &cs))
		return 2;
	for (i = 0; i < 8 && !err; i++)
		err = mercury_chanset_send(cs, i, 1, buf, sizeof(buf));
	if (err != -EPIPE && err != -ECONNRESET)
		return 3;
	/* names the peer */
	if (!strstr(mercury_last_error(), "write to 127.0.0.1:"))
		return 4;
	mercury_chanset_free(cs);
	close(c[0]);
	return 0;
}

/* The peer stopped reading: the write gives up after timeout_ms. */
static int send_to_stalled_peer(void)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true,
		     .timeout_ms = 300);
	static char buf[64 << 20];
	struct mercury_chanset *cs;
	int c[2], err;

	stalled_pair(c, 0);
	if (mercury_chanset_new(c, 1, &o, &cs))
		return 2;
	err = mercury_chanset_send(cs, 1, 1, buf, sizeof(buf));
	if (err != -ETIMEDOUT || errno != ETIMEDOUT)
		return 3;
	if (!strstr(mercury_last_error(), "took no bytes for 300 ms") ||
	    !strstr(mercury_last_error(), "chanset: 127.0.0.1:"))
		return 4;
	mercury_chanset_free(cs);
	close(c[0]);
	close(c[1]);
	return 0;
}

/*
 * Tag 2's bytes sit unsent on the only connection (the peer's window is
 * shut): tag 3 can never go without re-tagging them. The wait ends.
 */
static int pick_behind_stuck_bytes(void)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true,
		     .timeout_ms = 300);
	static char buf[256 << 10];
	struct mercury_chanset *cs;
	int c[2], err;

	stalled_pair(c, 4 << 20);
	if (mercury_chanset_new(c, 1, &o, &cs))
		return 2;
	if (mercury_chanset_send(cs, 1, 2, buf, sizeof(buf)))
		return 3;
	err = mercury_chanset_send(cs, 2, 3, "x", 1);
	if (err != -ETIMEDOUT)
		return 4;
	if (!strstr(mercury_last_error(), "could take tag 3 for 300 ms"))
		return 5;
	mercury_chanset_free(cs);
	close(c[0]);
	close(c[1]);
	return 0;
}

/*
 * A listener that accepts nothing and whose accept queue is full drops
 * new SYNs: connect would retry for two minutes. It gives up in time.
 */
static int connect_to_full_listener(void)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true,
		     .timeout_ms = 300);
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct mercury_chanset *cs;
	unsigned short port;
	int l, fill[4], i;
	char portstr[8];

	l = listen_lo(0, &port);
	if (listen(l, 0))
		return 2;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < 4; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(fill[i], (struct sockaddr *)&a, sizeof(a));
	}
	usleep(100000);
	snprintf(portstr, sizeof(portstr), "%u", port);
	if (mercury_chanset_connect("127.0.0.1", portstr, 1, &o, &cs) !=
	    -ETIMEDOUT)
		return 3;
	if (!strstr(mercury_last_error(), portstr))
		return 4;
	for (i = 0; i < 4; i++)
		close(fill[i]);
	close(l);
	return 0;
}

static void test_peer_failures(void **state)
{
	MERCURY_OPTS(mercury_chanset_opts, o, .no_tag = true,
		     .timeout_ms = -1);
	struct mercury_chanset *cs = (void *)1;
	int fd = 0;

	(void)state;
	in_child(send_to_closed_peer, "peer closed");
	in_child(send_to_stalled_peer, "peer stalled");
	in_child(pick_behind_stuck_bytes, "bytes stuck");
	in_child(connect_to_full_listener, "connect");
	assert_int_equal(mercury_chanset_new(&fd, 1, &o, &cs), -EINVAL);
	assert_null(cs);
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
	bool mark = may_mark();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invariant_random),
		cmocka_unit_test(test_pick_rules),
		cmocka_unit_test(test_outq_kernel),
		unit_test_skip_if(!mark, test_no_retag_tcp_mark,
				  "SO_MARK needs CAP_NET_ADMIN"),
		cmocka_unit_test(test_no_retag_tcp_priority),
		unit_test_skip_if(!mark, test_send_never_retags_mark,
				  "SO_MARK needs CAP_NET_ADMIN"),
		cmocka_unit_test(test_send_never_retags_priority),
		cmocka_unit_test(test_send_manual_eagain),
		cmocka_unit_test(test_send_end_to_end),
		cmocka_unit_test(test_peer_failures),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests_name("chanset", tests, NULL, NULL);
}
