// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Priority channels.
 *
 * The qdisc never reorders packets of one flow, so an urgent tensor written
 * to a connection that still holds less urgent bytes waits for them. A
 * channel set keeps several connections to one peer and, for every chunk,
 * picks one whose queued bytes are all at least as urgent as the chunk.
 *
 * What is "queued": each connection keeps a list of segments
 * (end offset in the stream, tag) for the bytes handed to the kernel, with
 * neighbours of equal tag merged. Bytes below `drained` have left: in
 * MERCURY_OUTQ_KERNEL mode drained = written - SIOCOUTQ (for TCP, bytes the
 * peer has not acknowledged yet, i.e. still able to delay the next byte);
 * in MERCURY_OUTQ_MANUAL mode the caller reports it (e.g. from
 * application-level acks).
 *
 * Linux copies sk_mark and sk_priority into each skb when TCP transmits
 * it (ip_queue_xmit, ip6_xmit), not when the program writes. Bytes still in
 * the socket's send queue therefore take whatever tag the socket carries
 * when they finally go out, so tagging a connection for a new chunk re-tags
 * its unsent bytes: a less urgent chunk would demote urgent bytes queued
 * there, a more urgent one would promote old bytes past others. Each
 * connection therefore also tracks `sent`, the stream offset below which
 * bytes have left the socket (written - SIOCOUTQNSD; where that ioctl is
 * missing, and in manual mode, sent = drained, i.e. every byte not known to
 * be consumed counts as unsent).
 *
 * A connection is eligible for a chunk of tag t when
 *  (a) no queued byte on it is less urgent than t (the chunk would wait
 *      behind it: the qdisc keeps a flow in order), and
 *  (b) it holds no unsent byte of another tag (the chunk's setsockopt
 *      would re-tag it).
 * Choice among eligible connections is best fit: the one whose least
 * urgent queued byte is the least urgent still <= the chunk's urgency, so
 * a big tensor's chunks stay on one connection and idle connections remain
 * free for a more urgent tensor arriving next. Ties: class == tag, then the
 * socket already carrying tag (no setsockopt), then fewer queued bytes,
 * then the lower index.
 *
 * With none eligible, the least loaded connection that satisfies (b) is
 * the least bad (an inversion: the chunk waits behind less urgent bytes
 * already sent). When even (b) holds nowhere, every choice would re-tag
 * someone else's bytes: try_pick() says -EAGAIN and send() waits for a
 * connection's unsent bytes to leave (kernel mode) or returns -EAGAIN
 * before writing anything (manual mode). Only the old pick() still answers
 * with an index there, for callers built against it.
 */
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h>

#include "internal.h"

#define DEFAULT_CHUNK	(256 * 1024)

struct seg {
	uint64_t end;			/* stream offset just past the segment */
	unsigned int tag;
};

/* A frame queued by mercury_chanset_queue() or mercury_chanset_send(). */
struct txf {
	struct txf *next;		/* in its connection's FIFO */
	unsigned char hdr[MERCURY_FRAME_HDR_LEN];
	const unsigned char *data;	/* the caller's payload */
	uint32_t len;			/* payload bytes */
	uint32_t done;			/* of header + payload written */
	unsigned int tag;
	bool no_tag;			/* leave the socket's tag alone */
	uint64_t order, seq;		/* heap key: order, then queue order */
	uint64_t batch;			/* the send() that queued it, 0: none */
};

struct chan {
	struct txf *out, *out_tail;	/* frames given to this connection */
	struct seg *segs;		/* ring of queued segments, oldest first */
	size_t head, cnt, cap;		/* ring state, cap a power of two */
	uint64_t written;		/* bytes handed to the kernel */
	uint64_t drained;		/* bytes known to have left */
	uint64_t sent;			/* bytes out of the send queue, tag fixed */
	unsigned int cur_tag;		/* tag the socket carries, ~0: unknown */
	unsigned int class;		/* preferred tag */
	int fd;
	char peer[MERCURY_PEER_STRLEN];	/* for errors, taken at creation:
					 * a reset socket has no peer name */
	bool no_nsd;			/* SIOCOUTQNSD unsupported on fd */
	bool broken;			/* a frame was cut short here */
};

struct mercury_chanset {
	struct chan *c;
	size_t n;
	size_t chunk;			/* payload bytes per frame */
	struct mercury_tagger *tagger;	/* NULL with no_tag */
	enum mercury_outq_mode outq;
	bool own_fds;
	enum mercury_qdisc_check qdisc_check;
	int timeout_ms;			/* every wait's bound */
	struct mercury_chanset_stats stats;
	/* the sender: frames the set places, most urgent first */
	struct txf **heap;
	size_t nheap, heap_cap;
	uint64_t seq;
	size_t pending;			/* frames not completely written */
	uint64_t inflight;		/* cap per connection, 0: none */
	/*
	 * The last placement: connection `last` took tag `last_tag` without
	 * an inversion. Until another tag is placed, only frames of that
	 * tag went there, so it stays eligible (nothing less urgent queued,
	 * no unsent bytes of another tag) and the best fit: later frames of
	 * the tag reuse it without a pick. last_queued bounds its SIOCOUTQ
	 * from above: the last reading plus the bytes written since.
	 */
	int last;			/* -1: none */
	int failed;			/* connection of the last write error */
	unsigned int last_tag;
	uint64_t last_queued;
	bool fresh;			/* last_queued read in this dispatch */
	/* blocked: the frame at the top and when to look again */
	const struct txf *blocked_top;
	uint64_t wake_ns;		/* 0: not blocked */
	bool blocked_retag;		/* by try_pick's -EAGAIN, not the cap */
	uint64_t cap_wait_ns;		/* the last cap wait, 0 once a frame is placed */
	/* the running send(): its batch, frames left, frames started */
	uint64_t batch;
	size_t batch_left, batch_started;
};

#define DEFAULT_TIMEOUT_MS	60000

/* Milliseconds left until deadline (CLOCK_MONOTONIC), 0 if past. */
static int ms_left(const struct timespec *deadline)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (deadline->tv_sec - now.tv_sec) * 1000LL +
	     (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? (int)ms : 0;
}

static void deadline_in(struct timespec *d, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, d);
	d->tv_sec += ms / 1000;
	d->tv_nsec += (long)(ms % 1000) * 1000000;
	if (d->tv_nsec >= 1000000000) {
		d->tv_sec++;
		d->tv_nsec -= 1000000000;
	}
}

static int chanset_alloc(size_t n, const struct mercury_chanset_opts *opts,
			 struct mercury_chanset **out)
{
	const struct mercury_tag_opts *topts;
	const unsigned int *classes;
	struct mercury_chanset *cs;
	int err, outq, timeout_ms;
	size_t i;

	if (!OPTS_VALID(opts, mercury_chanset_opts))
		return -errno;
	if (!n || n > 1024)
		return mercury_err(EINVAL, "chanset: %zu connections (1..1024)", n);
	cs = calloc(1, sizeof(*cs));
	if (!cs)
		return mercury_err(ENOMEM, "chanset: out of memory");
	cs->c = calloc(n, sizeof(*cs->c));
	if (!cs->c) {
		free(cs);
		return mercury_err(ENOMEM, "chanset: out of memory");
	}
	cs->n = n;
	cs->last = -1;
	cs->inflight = OPTS_GET(opts, inflight, 0);
	classes = OPTS_GET(opts, classes, NULL);
	for (i = 0; i < n; i++) {
		cs->c[i].fd = -1;
		cs->c[i].cur_tag = ~0u;
		cs->c[i].class = classes ? classes[i] : ~0u;
	}
	cs->chunk = OPTS_GET(opts, chunk_size, 0);
	if (!cs->chunk)
		cs->chunk = DEFAULT_CHUNK;
	if (cs->chunk > UINT32_MAX) {
		mercury_chanset_free(cs);
		return mercury_err(EINVAL, "chanset: chunk_size above 4 GiB - 1");
	}
	/* the values are checked before they are stored: cs is freed */
	outq = OPTS_GET(opts, outq, MERCURY_OUTQ_KERNEL);
	if (outq != MERCURY_OUTQ_KERNEL && outq != MERCURY_OUTQ_MANUAL) {
		mercury_chanset_free(cs);
		return mercury_err(EINVAL, "chanset: unknown outq mode %d", outq);
	}
	cs->outq = outq;
	cs->own_fds = OPTS_GET(opts, own_fds, false);
	cs->qdisc_check = OPTS_GET(opts, qdisc_check, MERCURY_QDISC_CHECK_WARN);
	if (cs->qdisc_check != MERCURY_QDISC_CHECK_WARN &&
	    cs->qdisc_check != MERCURY_QDISC_CHECK_OFF &&
	    cs->qdisc_check != MERCURY_QDISC_CHECK_STRICT) {
		err = cs->qdisc_check;
		mercury_chanset_free(cs);
		return mercury_err(EINVAL, "chanset: unknown qdisc_check %d", err);
	}
	timeout_ms = OPTS_GET(opts, timeout_ms, 0);
	if (timeout_ms < 0) {
		mercury_chanset_free(cs);
		return mercury_err(EINVAL, "chanset: timeout_ms %d is negative",
				   timeout_ms);
	}
	cs->timeout_ms = timeout_ms;
	if (!cs->timeout_ms)
		cs->timeout_ms = DEFAULT_TIMEOUT_MS;
	if (!OPTS_GET(opts, no_tag, false)) {
		topts = OPTS_GET(opts, tag_opts, NULL);
		err = mercury_tagger_new(topts, &cs->tagger);
		if (err) {
			mercury_chanset_free(cs);
			return mercury_ret(err);
		}
	}
	*out = cs;
	return 0;
}

/*
 * Does the tagger fit the qdiscs the connections feed? Checked once, at
 * creation: the set knows its tagger and classes (the tags it will send)
 * only here, and a mismatch found before the first byte is worth more
 * than silently untagged traffic (see qdisc.c). Without classes the tags
 * are unknown: only the source and the shift are compared.
 */
static int chanset_check(const struct mercury_chanset *cs, const int *fds)
{
	struct mercury_plan_info pi = { 0 };
	size_t i;

	if (!cs->tagger || cs->qdisc_check == MERCURY_QDISC_CHECK_OFF)
		return 0;
	mercury_tagger_plan_info(cs->tagger, &pi);
	for (i = 0; i < cs->n; i++)
		if (cs->c[i].class != ~0u && cs->c[i].class > pi.max_tag)
			pi.max_tag = cs->c[i].class;
	pi.levels = pi.max_tag;
	return mercury_chanset_check_qdiscs(fds, cs->n, &pi, cs->qdisc_check);
}

MERCURY_API int mercury_chanset_new(const int *fds, size_t n,
				    const struct mercury_chanset_opts *opts,
				    struct mercury_chanset **out)
{
	struct mercury_chanset *cs;
	size_t i;
	int err;

	if (!out || !fds)
		return mercury_err(EINVAL, "chanset: NULL argument");
	*out = NULL;
	err = chanset_alloc(n, opts, &cs);
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		if (fds[i] < 0) {
			cs->own_fds = false;
			mercury_chanset_free(cs);
			return mercury_err(EBADF, "chanset: fds[%zu] = %d", i,
					   fds[i]);
		}
		cs->c[i].fd = fds[i];
		mercury_peer_str(fds[i], cs->c[i].peer, sizeof(cs->c[i].peer));
	}
	err = chanset_check(cs, fds);
	if (err) {
		/* the caller's fds stay open, as on any failure */
		cs->own_fds = false;
		mercury_chanset_free(cs);
		return err;
	}
	*out = cs;
	return 0;
}

/* connect(), but give up after timeout_ms; 0 or -errno. */
static int connect_within(int fd, const struct addrinfo *ai, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int fl = fcntl(fd, F_GETFL), err = 0, r;
	socklen_t len = sizeof(err);
	struct timespec deadline;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		return -errno;
	if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
		goto done;
	if (errno != EINPROGRESS) {
		err = errno;
		goto done;
	}
	deadline_in(&deadline, timeout_ms);
	do
		r = poll(&pfd, 1, ms_left(&deadline));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		err = errno;
	else if (!r)
		err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
done:
	if (fcntl(fd, F_SETFL, fl) && !err)
		err = errno;
	return -err;
}

static int tcp_connect(const char *host, const char *port, int timeout_ms)
{
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_ADDRCONFIG,
	};
	struct addrinfo *res, *ai;
	int fd = -1, err, saved = ECONNREFUSED;

	err = getaddrinfo(host, port, &hints, &res);
	if (err)
		return mercury_err(err == EAI_SYSTEM ? errno : EHOSTUNREACH,
				   "chanset: %s:%s: %s", host, port,
				   gai_strerror(err));
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		err = connect_within(fd, ai, timeout_ms);
		if (!err)
			break;
		saved = -err;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return mercury_err(saved, "chanset: connect %s:%s: %s", host,
				   port, strerror(saved));
	return fd;
}

MERCURY_API int mercury_chanset_connect(const char *host, const char *port,
					size_t n,
					const struct mercury_chanset_opts *opts,
					struct mercury_chanset **out)
{
	struct mercury_chanset *cs;
	int err, fd, *fds;
	size_t i;

	if (!out || !host || !port)
		return mercury_err(EINVAL, "chanset: NULL argument");
	*out = NULL;
	err = chanset_alloc(n, opts, &cs);
	if (err)
		return err;
	cs->own_fds = true;
	fds = calloc(n, sizeof(*fds));
	if (!fds) {
		mercury_chanset_free(cs);
		return mercury_err(ENOMEM, "chanset: out of memory");
	}
	for (i = 0; i < n; i++) {
		fd = tcp_connect(host, port, cs->timeout_ms);
		if (fd < 0) {
			free(fds);
			mercury_chanset_free(cs);
			return mercury_ret(fd);
		}
		cs->c[i].fd = fd;
		mercury_peer_str(fd, cs->c[i].peer, sizeof(cs->c[i].peer));
		fds[i] = fd;
	}
	err = chanset_check(cs, fds);
	free(fds);
	if (err) {
		mercury_chanset_free(cs);	/* closes what it opened */
		return err;
	}
	*out = cs;
	return 0;
}

MERCURY_API void mercury_chanset_free(struct mercury_chanset *cs)
{
	struct txf *f, *next;
	size_t i;

	if (!cs)
		return;
	for (i = 0; i < cs->n; i++) {
		if (cs->own_fds && cs->c[i].fd >= 0)
			close(cs->c[i].fd);
		free(cs->c[i].segs);
		for (f = cs->c[i].out; f; f = next) {
			next = f->next;
			free(f);
		}
	}
	for (i = 0; i < cs->nheap; i++)
		free(cs->heap[i]);
	free(cs->heap);
	mercury_tagger_free(cs->tagger);
	free(cs->c);
	free(cs);
}

MERCURY_API size_t mercury_chanset_count(const struct mercury_chanset *cs)
{
	return cs ? cs->n : 0;
}

MERCURY_API int mercury_chanset_fd(const struct mercury_chanset *cs, size_t i)
{
	if (!cs || i >= cs->n)
		return mercury_err(EINVAL, "chanset: no connection %zu", i);
	return cs->c[i].fd;
}

/*
 * Drop segments that have fully left; refresh `drained` and `sent` from
 * the kernel.
 */
static int chan_refresh(struct chan *c, enum mercury_outq_mode mode)
{
	int outq, nsd;

	if (!c->cnt)
		return 0;
	if (mode == MERCURY_OUTQ_KERNEL) {
		if (ioctl(c->fd, SIOCOUTQ, &outq) < 0)
			return mercury_err(errno, "chanset: SIOCOUTQ on %s: %s",
					   c->peer,
					   strerror(errno));
		if ((uint64_t)outq > c->written)
			outq = c->written;	/* bytes written behind our back */
		c->drained = c->written - outq;
		/*
		 * TCP (since 2.6.38) tells the unsent part. Elsewhere (AF_UNIX,
		 * UDP) take all of outq as unsent: that only ever forbids a
		 * re-tag that would have been harmless.
		 */
		nsd = outq;
		if (!c->no_nsd && ioctl(c->fd, SIOCOUTQNSD, &nsd) < 0) {
			if (errno != ENOTTY && errno != EOPNOTSUPP &&
			    errno != EINVAL)
				return mercury_err(errno,
						   "chanset: SIOCOUTQNSD on %s: %s",
						   c->peer,
						   strerror(errno));
			c->no_nsd = true;
			nsd = outq;
		}
		if (nsd < 0 || nsd > outq)
			nsd = outq;
		c->sent = c->written - nsd;
	} else {
		c->sent = c->drained;
	}
	while (c->cnt && c->segs[c->head].end <= c->drained) {
		c->head = (c->head + 1) & (c->cap - 1);
		c->cnt--;
	}
	return 0;
}

/* Least urgent tag still queued; 0 and *empty when nothing is. */
static unsigned long long chan_worst(const struct chan *c)
{
	unsigned long long worst = 0, k;
	size_t i;

	for (i = 0; i < c->cnt; i++) {
		k = mercury_urgency_key(c->segs[(c->head + i) & (c->cap - 1)].tag);
		if (k > worst)
			worst = k;
	}
	return worst;
}

static uint64_t chan_queued(const struct chan *c)
{
	return c->cnt ? c->written - c->drained : 0;
}

/*
 * Unsent bytes whose tag is not tag: a setsockopt for tag would re-tag
 * them. *demote: some of them are more urgent than tag.
 */
static uint64_t chan_foreign_unsent(const struct chan *c, unsigned int tag,
				    bool *demote)
{
	unsigned long long key = mercury_urgency_key(tag);
	uint64_t start = c->drained, n = 0, from;
	const struct seg *s;
	size_t i;

	*demote = false;
	for (i = 0; i < c->cnt; i++) {
		s = &c->segs[(c->head + i) & (c->cap - 1)];
		from = start > c->sent ? start : c->sent;
		if (s->end > from && s->tag != tag) {
			n += s->end - from;
			if (mercury_urgency_key(s->tag) < key)
				*demote = true;
		}
		start = s->end;
	}
	return n;
}

static int chan_push(struct chan *c, unsigned int tag, uint64_t bytes)
{
	struct seg *s;
	size_t i, ncap;

	if (!bytes)
		return 0;
	c->written += bytes;
	if (c->cnt) {
		s = &c->segs[(c->head + c->cnt - 1) & (c->cap - 1)];
		if (s->tag == tag) {
			s->end = c->written;
			return 0;
		}
	}
	if (c->cnt == c->cap) {
		ncap = c->cap ? 2 * c->cap : 8;
		s = malloc(ncap * sizeof(*s));
		if (!s)
			return mercury_err(ENOMEM, "chanset: out of memory");
		for (i = 0; i < c->cnt; i++)
			s[i] = c->segs[(c->head + i) & (c->cap - 1)];
		free(c->segs);
		c->segs = s;
		c->cap = ncap;
		c->head = 0;
	}
	c->segs[(c->head + c->cnt) & (c->cap - 1)] =
		(struct seg){ .end = c->written, .tag = tag };
	c->cnt++;
	return 0;
}

/* Is a better than b for tag? Both eligible, w = their worst keys. */
static bool better(const struct chan *a, unsigned long long wa,
		   const struct chan *b, unsigned long long wb, unsigned int tag)
{
	if (wa != wb)
		return wa > wb;
	if ((a->class == tag) != (b->class == tag))
		return a->class == tag;
	if ((a->cur_tag == tag) != (b->cur_tag == tag))
		return a->cur_tag == tag;
	return chan_queued(a) < chan_queued(b);
}

/*
 * Connection for tag: an eligible one (best fit), else the least loaded
 * one whose unsent bytes all carry tag (*inversion). -EAGAIN if every
 * connection holds unsent bytes of another tag; *retag is then the least
 * bad of those for pick()'s old contract: one that would only promote
 * (its foreign unsent bytes are all less urgent), then the fewest such
 * bytes, then the lower index.
 */
static int pick(struct mercury_chanset *cs, unsigned int tag, bool *inversion,
		int *retag)
{
	unsigned long long key = mercury_urgency_key(tag), w, bw = 0;
	int best = -1, least = -1, r = -1;
	uint64_t f, rf = 0;
	bool dem, rdem = false;
	struct chan *c;
	size_t i;
	int err;

	for (i = 0; i < cs->n; i++) {
		c = &cs->c[i];
		err = chan_refresh(c, cs->outq);
		if (err)
			return err;
		f = chan_foreign_unsent(c, tag, &dem);
		if (f) {
			if (r < 0 || dem < rdem || (dem == rdem && f < rf)) {
				r = i;
				rf = f;
				rdem = dem;
			}
			continue;	/* tagging it would re-tag those bytes */
		}
		if (least < 0 || chan_queued(c) < chan_queued(&cs->c[least]))
			least = i;
		w = chan_worst(c);
		if (w > key)
			continue;	/* would wait behind less urgent bytes */
		if (best < 0 || better(c, w, &cs->c[best], bw, tag)) {
			best = i;
			bw = w;
		}
	}
	*inversion = best < 0;
	if (retag)
		*retag = r;
	if (best >= 0)
		return best;
	return least >= 0 ? least : -EAGAIN;
}

MERCURY_API int mercury_chanset_pick(struct mercury_chanset *cs,
				     unsigned int tag)
{
	int i, r;
	bool inv;

	if (!cs)
		return mercury_err(EINVAL, "chanset: NULL");
	i = pick(cs, tag, &inv, &r);
	return mercury_ret(i == -EAGAIN ? r : i);
}

MERCURY_API int mercury_chanset_try_pick(struct mercury_chanset *cs,
					 unsigned int tag)
{
	bool inv;
	int i;

	if (!cs)
		return mercury_err(EINVAL, "chanset: NULL");
	i = pick(cs, tag, &inv, NULL);
	/* Not a failure: not logged, but the message is this call's. */
	if (i == -EAGAIN)
		return mercury_quiet(EAGAIN,
				     "chanset: every connection holds unsent bytes of another tag than %u; retry when some have left",
				     tag);
	return i;
}

MERCURY_API int mercury_chanset_commit(struct mercury_chanset *cs, size_t i,
				       unsigned int tag, uint64_t bytes)
{
	if (!cs || i >= cs->n)
		return mercury_err(EINVAL, "chanset: no connection %zu", i);
	/* bytes the sender did not write: its reuse bound no longer holds */
	if (cs->last == (int)i)
		cs->last = -1;
	return mercury_ret(chan_push(&cs->c[i], tag, bytes));
}

MERCURY_API int mercury_chanset_drained(struct mercury_chanset *cs, size_t i,
					uint64_t bytes)
{
	struct chan *c;

	if (!cs || i >= cs->n)
		return mercury_err(EINVAL, "chanset: no connection %zu", i);
	if (cs->outq != MERCURY_OUTQ_MANUAL)
		return mercury_err(EINVAL,
				   "chanset: drained() needs MERCURY_OUTQ_MANUAL");
	c = &cs->c[i];
	if (bytes > c->written - c->drained)
		return mercury_err(ERANGE,
				   "chanset: %llu bytes drained, only %llu queued",
				   (unsigned long long)bytes,
				   (unsigned long long)(c->written - c->drained));
	c->drained += bytes;
	return mercury_ret(chan_refresh(c, cs->outq));
}

MERCURY_API int mercury_chanset_queued(struct mercury_chanset *cs, size_t i,
				       uint64_t *bytes, unsigned int *worst)
{
	unsigned long long w;
	int err;

	if (!cs || i >= cs->n)
		return mercury_err(EINVAL, "chanset: no connection %zu", i);
	err = chan_refresh(&cs->c[i], cs->outq);
	if (err)
		return err;
	w = chan_worst(&cs->c[i]);
	if (bytes)
		*bytes = chan_queued(&cs->c[i]);
	if (worst)
		*worst = w == ~0ULL ? 0 : (unsigned int)w;
	return 0;
}

/*
 * The sender. Frames wait in a heap ordered by (order, queue order) until
 * the set places the top one on a connection: the one try_pick() names,
 * once that connection has no frame of ours half written (frames never
 * interleave on a stream) and holds less than the in-flight cap in the
 * kernel. The qdisc orders what the kernel holds across connections; the
 * cap keeps each connection's FIFO short, so an urgent frame that finds
 * every connection busy (an inversion) waits behind at most that many
 * bytes. Pinned frames skip the heap and go to their connection's FIFO at
 * once. A frame's socket is tagged right before its first byte enters it
 * (the kernel reads the tag when TCP builds the segments), and writes
 * resume where a partial one stopped. mercury_chanset_send() is the same
 * machinery driven until its frames are written.
 */
#define EAGAIN_RETRY_NS	1000000		/* nothing reports unsent bytes leaving */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static bool txf_before(const struct txf *a, const struct txf *b)
{
	return a->order != b->order ? a->order < b->order : a->seq < b->seq;
}

static int heap_push(struct mercury_chanset *cs, struct txf *f)
{
	struct txf **v;
	size_t i, cap;

	if (cs->nheap == cs->heap_cap) {
		cap = cs->heap_cap ? 2 * cs->heap_cap : 64;
		v = realloc(cs->heap, cap * sizeof(*v));
		if (!v)
			return mercury_err(ENOMEM, "chanset: out of memory");
		cs->heap = v;
		cs->heap_cap = cap;
	}
	for (i = cs->nheap++; i && txf_before(f, cs->heap[(i - 1) / 2]);
	     i = (i - 1) / 2)
		cs->heap[i] = cs->heap[(i - 1) / 2];
	cs->heap[i] = f;
	return 0;
}

/* Put f at slot i and sift it down. */
static void heap_sift(struct mercury_chanset *cs, size_t i, struct txf *f)
{
	size_t l, m;

	for (;;) {
		l = 2 * i + 1;
		m = i;
		if (l < cs->nheap && txf_before(cs->heap[l], f))
			m = l;
		if (l + 1 < cs->nheap &&
		    txf_before(cs->heap[l + 1], m == i ? f : cs->heap[l]))
			m = l + 1;
		if (m == i)
			break;
		cs->heap[i] = cs->heap[m];
		i = m;
	}
	cs->heap[i] = f;
}

static struct txf *heap_pop(struct mercury_chanset *cs)
{
	struct txf *top = cs->heap[0];

	if (--cs->nheap)
		heap_sift(cs, 0, cs->heap[cs->nheap]);
	return top;
}

static void chan_append(struct chan *c, struct txf *f)
{
	f->next = NULL;
	if (c->out_tail)
		c->out_tail->next = f;
	else
		c->out = f;
	c->out_tail = f;
}

static void frame_done(struct mercury_chanset *cs, struct txf *f)
{
	cs->stats.chunks++;
	cs->stats.bytes += f->len;
	cs->pending--;
	if (f->batch && f->batch == cs->batch)
		cs->batch_left--;
	free(f);
}

/*
 * Write what connection i takes of its FIFO. *wrote: some bytes went.
 * With MSG_NOSIGNAL a peer that closed is -EPIPE for the caller, never a
 * SIGPIPE that kills its process; MSG_DONTWAIT even on a blocking socket,
 * so that no call here ever waits.
 */
static int chan_flush(struct mercury_chanset *cs, size_t i, bool *wrote)
{
	struct chan *c = &cs->c[i];
	struct msghdr msg = { 0 };
	struct iovec iov[2];
	struct txf *f;
	ssize_t r;
	int err;

	while ((f = c->out)) {
		if (c->broken) {
			cs->failed = i;
			return mercury_err(EIO,
					   "chanset: connection %zu (%s) is unusable: an earlier error cut a frame short there",
					   i, c->peer);
		}
		if (!f->done && !f->no_tag) {
			if (cs->tagger) {
				err = mercury_tag_socket(cs->tagger, c->fd, f->tag);
				if (err) {
					cs->failed = i;
					return err;
				}
			}
			c->cur_tag = f->tag;
		}
		if (f->done < MERCURY_FRAME_HDR_LEN) {
			iov[0] = (struct iovec){ f->hdr + f->done,
						 MERCURY_FRAME_HDR_LEN - f->done };
			iov[1] = (struct iovec){ (void *)f->data, f->len };
			msg.msg_iovlen = f->len ? 2 : 1;
		} else {
			iov[0] = (struct iovec){
				(void *)(f->data + f->done - MERCURY_FRAME_HDR_LEN),
				MERCURY_FRAME_HDR_LEN + f->len - f->done };
			msg.msg_iovlen = 1;
		}
		msg.msg_iov = iov;
		r = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			cs->failed = i;
			err = errno;
			return mercury_err(err, "chanset: write to %s: %s",
					   c->peer,
					   strerror(err));
		}
		*wrote = true;
		if (f->batch && f->batch == cs->batch && !f->done)
			cs->batch_started++;
		/* the ring grows with every change of tag: drop what left */
		if (c->cnt == c->cap && c->cap >= 64) {
			err = chan_refresh(c, cs->outq);
			if (err)
				return err;
		}
		/* the set counts what the kernel holds: exactly what it took */
		err = chan_push(c, f->tag, r);
		if (err)
			return err;
		cs->stats.wire_bytes += r;
		if (cs->last == (int)i)
			cs->last_queued += r;
		f->done += r;
		if (f->done < MERCURY_FRAME_HDR_LEN + f->len)
			continue;
		c->out = f->next;
		if (!c->out)
			c->out_tail = NULL;
		frame_done(cs, f);
	}
	return 0;
}

/*
 * When connection c may hold `excess` fewer bytes. SIOCOUTQ falls only
 * when ACKs come back, which no poll event reports (POLLOUT means buffer
 * space). TCP's delivery rate for the connection (bytes/s over its recent
 * ACKs; when the qdisc serves the connection it gets the link, so this is
 * the rate it drains at) gives the time; without a sample yet, 1 ms.
 */
static uint64_t drain_ns(const struct chan *c, uint64_t excess)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_delivery_rate) +
		  sizeof(ti.tcpi_delivery_rate) || !ti.tcpi_delivery_rate)
		return 1000000;
	return (uint64_t)((double)excess * 1e9 / (double)ti.tcpi_delivery_rate) + 1;
}

/*
 * How long to wait at the cap before reading SIOCOUTQ again. drain_ns()
 * is right while the link drains the connection; a receiver slower than
 * that (one that reads in bursts, a busy peer) keeps its window shut, the
 * bytes stay, and each estimate would end in another reading that finds
 * them there. So a wait that found the connection still at the cap is
 * followed by one twice as long (up to CAP_WAIT_MAX_NS, or the estimate
 * if that is longer), until a frame is placed.
 */
#define CAP_WAIT_MAX_NS		(10 * 1000000ull)

static uint64_t cap_wait(struct mercury_chanset *cs, const struct chan *c)
{
	uint64_t ns = drain_ns(c, cs->last_queued - cs->inflight + 1);
	uint64_t again = 2 * cs->cap_wait_ns;

	if (again > CAP_WAIT_MAX_NS)
		again = CAP_WAIT_MAX_NS;
	if (ns < again)
		ns = again;
	cs->cap_wait_ns = ns;
	return ns;
}

/* Bytes connection i holds in the kernel, for the cap. */
static int cap_query(struct mercury_chanset *cs, size_t i)
{
	int err = chan_refresh(&cs->c[i], cs->outq);

	if (err)
		return err;
	cs->stats.queries++;
	cs->last_queued = chan_queued(&cs->c[i]);
	cs->fresh = true;
	return 0;
}

static void block(struct mercury_chanset *cs, const struct txf *f,
		  uint64_t when, bool retag)
{
	cs->blocked_top = f;
	cs->wake_ns = when;
	cs->blocked_retag = retag;
}

/* Place heap frames while they may go (see above). */
static int dispatch(struct mercury_chanset *cs, uint64_t now, bool *wrote)
{
	struct txf *f;
	struct chan *c;
	bool inv;
	int i, err;

	cs->wake_ns = 0;
	cs->blocked_top = NULL;
	cs->blocked_retag = false;
	cs->fresh = false;
	while (cs->nheap) {
		f = cs->heap[0];
		if (cs->last < 0 || f->tag != cs->last_tag) {
			i = pick(cs, f->tag, &inv, NULL);
			cs->stats.picks++;
			if (i == -EAGAIN) {
				/*
				 * Every connection holds unsent bytes of
				 * another tag: tagging any would re-tag them.
				 * Look again later (no event reports that
				 * they left either).
				 */
				cs->stats.eagain_blocks++;
				cs->last = -1;
				block(cs, f, now + EAGAIN_RETRY_NS, true);
				return 0;
			}
			if (i < 0)
				return i;
			/* an inversion is no connection to keep for the tag */
			cs->stats.inversions += inv;
			cs->last = inv ? -1 : i;
			cs->last_tag = f->tag;
			if (cs->inflight) {
				err = cap_query(cs, i);
				if (err)
					return err;
			}
		} else {
			i = cs->last;
		}
		c = &cs->c[i];
		/* POLLOUT resumes the frame there; this one follows it */
		if (c->out)
			return 0;
		if (cs->inflight && cs->last_queued >= cs->inflight) {
			if (!cs->fresh) {
				err = cap_query(cs, i);	/* the bound is stale */
				if (err)
					return err;
			}
			if (cs->last_queued >= cs->inflight) {
				cs->stats.cap_blocks++;
				block(cs, f, now + cap_wait(cs, c), false);
				return 0;
			}
		}
		cs->cap_wait_ns = 0;
		heap_pop(cs);
		chan_append(c, f);
		cs->stats.placed++;
		err = chan_flush(cs, i, wrote);
		if (err)
			return err;
		if (cs->last != i)
			cs->fresh = false;	/* the reading was for i */
	}
	return 0;
}

static int progress(struct mercury_chanset *cs, uint64_t now, size_t *failed)
{
	struct mercury_tagger_stats ts;
	bool wrote = false;
	size_t i;
	int err = 0;

	cs->failed = -1;
	for (i = 0; i < cs->n && !err; i++)
		if (cs->c[i].out)
			err = chan_flush(cs, i, &wrote);
	/* blocked: only time, or a new frame at the top, changes that */
	if (!err && cs->nheap && (!cs->wake_ns || now >= cs->wake_ns ||
				  cs->heap[0] != cs->blocked_top))
		err = dispatch(cs, now, &wrote);
	if (err) {
		if (failed && cs->failed >= 0)
			*failed = cs->failed;
		return err;
	}
	if (!cs->nheap)
		cs->wake_ns = 0;
	if (cs->tagger) {
		mercury_tagger_get_stats(cs->tagger, &ts, sizeof(ts));
		cs->stats.tag_syscalls = ts.syscalls;
	}
	return wrote;
}

static int queue_frame(struct mercury_chanset *cs,
		       const struct mercury_tx_frame *tf, uint64_t batch)
{
	struct mercury_frame fr = {
		.tensor_id = tf->tensor_id,
		.tag = tf->tag,
		.total_len = tf->total_len,
		.offset = tf->offset,
		.chunk_len = tf->chunk_len,
	};
	bool pin = OPTS_GET(tf, pin, false);
	size_t conn = OPTS_GET(tf, conn, 0);
	struct txf *f;
	int err;

	if (tf->tag > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "chanset: tag %u above %u", tf->tag,
				   MERCURY_MAX_TAG);
	if (!tf->data && tf->chunk_len)
		return mercury_err(EINVAL, "chanset queue: no payload");
	if (pin && conn >= cs->n)
		return mercury_err(EINVAL, "chanset queue: no connection %zu",
				   conn);
	f = calloc(1, sizeof(*f));
	if (!f)
		return mercury_err(ENOMEM, "chanset: out of memory");
	err = mercury_frame_encode(&fr, f->hdr, sizeof(f->hdr));
	if (err < 0) {
		free(f);
		return err;
	}
	f->data = tf->data;
	f->len = tf->chunk_len;
	f->tag = tf->tag;
	f->no_tag = OPTS_GET(tf, no_tag, false);
	f->order = OPTS_GET(tf, order, 0);
	f->seq = cs->seq++;
	f->batch = batch;
	if (pin) {
		/* another tag there breaks the reuse rule's premise */
		if (cs->last == (int)conn && f->tag != cs->last_tag)
			cs->last = -1;
		chan_append(&cs->c[conn], f);
	} else {
		err = heap_push(cs, f);
		if (err) {
			free(f);
			return err;
		}
	}
	cs->pending++;
	return 0;
}

MERCURY_API int mercury_chanset_queue(struct mercury_chanset *cs,
				      const struct mercury_tx_frame *f)
{
	if (!cs || !f)
		return mercury_err(EINVAL, "chanset queue: NULL argument");
	if (!OPTS_VALID(f, mercury_tx_frame))
		return -errno;
	/* the frame itself is no option: every 0.3 caller has it all */
	if (f->sz < offsetofend(struct mercury_tx_frame, chunk_len))
		return mercury_err(EINVAL, "chanset queue: sz %zu is too small",
				   f->sz);
	return queue_frame(cs, f, 0);
}

MERCURY_API int mercury_chanset_progress(struct mercury_chanset *cs,
					 uint64_t now_ns, size_t *failed)
{
	if (!cs)
		return mercury_err(EINVAL, "chanset progress: NULL");
	return mercury_ret(progress(cs, now_ns ? now_ns : mono_ns(), failed));
}

MERCURY_API int mercury_chanset_events(const struct mercury_chanset *cs,
				       size_t i)
{
	if (!cs || i >= cs->n)
		return mercury_err(EINVAL, "chanset: no connection %zu", i);
	return cs->c[i].out ? POLLOUT : 0;
}

MERCURY_API uint64_t mercury_chanset_wake(const struct mercury_chanset *cs)
{
	return cs && cs->nheap ? cs->wake_ns : 0;
}

MERCURY_API size_t mercury_chanset_pending(const struct mercury_chanset *cs)
{
	return cs ? cs->pending : 0;
}

/*
 * send() failed: drop its frames, so none points into the caller's buffer
 * after it returns. A connection that loses a half-written frame is out
 * of step with its peer for good.
 */
static void cancel_batch(struct mercury_chanset *cs)
{
	struct txf **pp, *f, *prev;
	size_t i, k;

	for (i = 0, k = 0; i < cs->nheap; i++) {
		if (cs->heap[i]->batch == cs->batch) {
			free(cs->heap[i]);
			cs->pending--;
		} else {
			cs->heap[k++] = cs->heap[i];
		}
	}
	cs->nheap = 0;
	for (i = 0; i < k; i++)		/* rebuild: push in place */
		heap_push(cs, cs->heap[i]);	/* cannot fail: fits */
	for (i = 0; i < cs->n; i++) {
		prev = NULL;
		for (pp = &cs->c[i].out; (f = *pp);) {
			if (f->batch != cs->batch) {
				prev = f;
				pp = &f->next;
				continue;
			}
			if (f->done)
				cs->c[i].broken = true;
			*pp = f->next;
			free(f);
			cs->pending--;
		}
		cs->c[i].out_tail = prev;
	}
	cs->blocked_top = NULL;
	cs->batch = 0;
}

/* Why send() made no progress for timeout_ms. */
static int send_timeout(struct mercury_chanset *cs)
{
	size_t i;

	if (cs->wake_ns && cs->blocked_retag)
		return mercury_err(ETIMEDOUT,
				   "chanset send: no connection could take tag %u for %d ms: every one holds unsent bytes of another tag",
				   cs->blocked_top ? cs->blocked_top->tag : 0,
				   cs->timeout_ms);
	for (i = 0; i < cs->n; i++)
		if (cs->c[i].out)
			return mercury_err(ETIMEDOUT,
					   "chanset: %s took no bytes for %d ms",
					   cs->c[i].peer,
					   cs->timeout_ms);
	return mercury_err(ETIMEDOUT,
			   "chanset send: every connection held %llu bytes (the in-flight cap) or more for %d ms",
			   (unsigned long long)cs->inflight, cs->timeout_ms);
}

/*
 * Drive the sender until the running send()'s frames are written:
 * poll() the connections that wait for buffer space, up to the next wake
 * time and never longer than timeout_ms without progress.
 */
static int send_drive(struct mercury_chanset *cs)
{
	uint64_t now = mono_ns(), last = now, wait_from = 0, until;
	struct pollfd *pfd;
	struct timespec ts;
	size_t i, n;
	int r = 0;
	bool waited = false;

	pfd = calloc(cs->n, sizeof(*pfd));
	if (!pfd)
		return mercury_err(ENOMEM, "chanset: out of memory");
	for (;;) {
		r = progress(cs, now, NULL);
		if (r < 0)
			break;
		if (r)
			last = now;
		/* count the waits for a connection without foreign unsent bytes */
		if (cs->wake_ns && cs->blocked_retag) {
			if (!wait_from)
				wait_from = now;
			if (!waited) {
				waited = true;
				cs->stats.waits++;
			}
		} else if (wait_from) {
			cs->stats.wait_ns += now - wait_from;
			wait_from = 0;
		}
		if (!cs->batch_left) {
			r = 0;
			break;
		}
		/* only the caller can report progress in manual mode */
		if (cs->outq == MERCURY_OUTQ_MANUAL && cs->wake_ns &&
		    cs->blocked_retag && !cs->batch_started) {
			r = mercury_err(EAGAIN,
					"chanset send: every connection holds unconsumed bytes of another tag than %u; report drained bytes and retry",
					cs->blocked_top->tag);
			break;
		}
		if (now - last >= (uint64_t)cs->timeout_ms * 1000000) {
			r = send_timeout(cs);
			break;
		}
		until = last + (uint64_t)cs->timeout_ms * 1000000;
		if (cs->wake_ns && cs->wake_ns < until)
			until = cs->wake_ns;
		for (i = 0, n = 0; i < cs->n; i++)
			if (cs->c[i].out)
				pfd[n++] = (struct pollfd){ .fd = cs->c[i].fd,
							    .events = POLLOUT };
		if (until > now) {
			ts.tv_sec = (until - now) / 1000000000u;
			ts.tv_nsec = (until - now) % 1000000000u;
			if (ppoll(pfd, n, &ts, NULL) < 0 && errno != EINTR) {
				r = mercury_err(errno, "chanset: poll: %s",
						strerror(errno));
				break;
			}
		}
		now = mono_ns();
	}
	if (wait_from)
		cs->stats.wait_ns += mono_ns() - wait_from;
	free(pfd);
	return r;
}

MERCURY_API int mercury_chanset_send(struct mercury_chanset *cs,
				     uint32_t tensor_id, unsigned int tag,
				     const void *buf, uint64_t len)
{
	MERCURY_OPTS(mercury_tx_frame, f, .tensor_id = tensor_id, .tag = tag,
		     .total_len = len, .order = mercury_urgency_key(tag));
	uint64_t off = 0;
	int err;

	if (!cs || (!buf && len))
		return mercury_err(EINVAL, "chanset send: NULL argument");
	if (tag > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "chanset send: tag %u above %u", tag,
				   MERCURY_MAX_TAG);
	cs->batch = cs->seq + 1;	/* unique: above every seq so far */
	cs->batch_left = 0;
	cs->batch_started = 0;
	do {
		f.offset = off;
		f.chunk_len = len - off < cs->chunk ? len - off : cs->chunk;
		f.data = (const char *)buf + off;
		err = queue_frame(cs, &f, cs->batch);
		if (err) {
			cancel_batch(cs);
			return err;
		}
		cs->batch_left++;
		off += f.chunk_len;
	} while (off < len);
	err = send_drive(cs);
	if (err) {
		cancel_batch(cs);
		return mercury_ret(err);
	}
	cs->batch = 0;
	return 0;
}

MERCURY_API int mercury_chanset_get_stats(const struct mercury_chanset *cs,
					  struct mercury_chanset_stats *st,
					  size_t sz)
{
	if (!cs || !st)
		return mercury_err(EINVAL, "chanset stats: NULL argument");
	memset(st, 0, sz);
	memcpy(st, &cs->stats, sz < sizeof(cs->stats) ? sz : sizeof(cs->stats));
	return 0;
}
