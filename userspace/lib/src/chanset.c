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

#include "internal.h"

#define DEFAULT_CHUNK	(256 * 1024)

struct seg {
	uint64_t end;			/* stream offset just past the segment */
	unsigned int tag;
};

struct chan {
	struct seg *segs;		/* ring of queued segments, oldest first */
	size_t head, cnt, cap;		/* ring state, cap a power of two */
	uint64_t written;		/* bytes handed to the kernel */
	uint64_t drained;		/* bytes known to have left */
	uint64_t sent;			/* bytes out of the send queue, tag fixed */
	unsigned int cur_tag;		/* tag the socket carries, ~0: unknown */
	unsigned int class;		/* preferred tag */
	int fd;
	bool no_nsd;			/* SIOCOUTQNSD unsupported on fd */
};

struct mercury_chanset {
	struct chan *c;
	size_t n;
	size_t chunk;			/* payload bytes per frame */
	struct mercury_tagger *tagger;	/* NULL with no_tag */
	enum mercury_outq_mode outq;
	bool own_fds;
	int timeout_ms;			/* every wait's bound */
	struct mercury_chanset_stats stats;
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
	size_t i;
	int err;

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
	cs->outq = OPTS_GET(opts, outq, MERCURY_OUTQ_KERNEL);
	if (cs->outq != MERCURY_OUTQ_KERNEL && cs->outq != MERCURY_OUTQ_MANUAL) {
		mercury_chanset_free(cs);
		return mercury_err(EINVAL, "chanset: unknown outq mode %d", cs->outq);
	}
	cs->own_fds = OPTS_GET(opts, own_fds, false);
	cs->timeout_ms = OPTS_GET(opts, timeout_ms, 0);
	if (cs->timeout_ms < 0) {
		mercury_chanset_free(cs);
		return mercury_err(EINVAL, "chanset: timeout_ms %d is negative",
				   cs->timeout_ms);
	}
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
	size_t i;
	int err, fd;

	if (!out || !host || !port)
		return mercury_err(EINVAL, "chanset: NULL argument");
	*out = NULL;
	err = chanset_alloc(n, opts, &cs);
	if (err)
		return err;
	cs->own_fds = true;
	for (i = 0; i < n; i++) {
		fd = tcp_connect(host, port, cs->timeout_ms);
		if (fd < 0) {
			mercury_chanset_free(cs);
			return mercury_ret(fd);
		}
		cs->c[i].fd = fd;
	}
	*out = cs;
	return 0;
}

MERCURY_API void mercury_chanset_free(struct mercury_chanset *cs)
{
	size_t i;

	if (!cs)
		return;
	for (i = 0; i < cs->n; i++) {
		if (cs->own_fds && cs->c[i].fd >= 0)
			close(cs->c[i].fd);
		free(cs->c[i].segs);
	}
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
			return mercury_err(errno, "chanset: SIOCOUTQ on fd %d: %s",
					   c->fd, strerror(errno));
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
						   "chanset: SIOCOUTQNSD on fd %d: %s",
						   c->fd, strerror(errno));
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
 * Write the whole iovec, resuming after partial writes and EAGAIN. With
 * MSG_NOSIGNAL: a peer that closed is -EPIPE for the caller, never a
 * SIGPIPE that kills its process. MSG_DONTWAIT even on a blocking socket,
 * so that every wait is our poll: no progress for timeout_ms is
 * -ETIMEDOUT.
 */
static int write_all(int fd, struct iovec *iov, int cnt, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	struct msghdr msg = { 0 };
	ssize_t r;
	int p;

	while (cnt) {
		msg.msg_iov = iov;
		msg.msg_iovlen = cnt;
		r = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				p = poll(&pfd, 1, timeout_ms);
				if (p < 0 && errno != EINTR)
					return mercury_err(errno, "chanset: poll: %s",
							   strerror(errno));
				if (!p)
					return mercury_err(ETIMEDOUT,
							   "chanset: fd %d took no bytes for %d ms",
							   fd, timeout_ms);
				continue;
			}
			return mercury_err(errno, "chanset: write on fd %d: %s",
					   fd, strerror(errno));
		}
		while (cnt && (size_t)r >= iov->iov_len) {
			r -= iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= r;
		}
	}
	return 0;
}

/*
 * pick() for send(): when every connection holds unsent bytes of another
 * tag, wait until one has sent them (kernel mode). Nothing wakes a thread
 * when SIOCOUTQNSD reaches 0 (POLLOUT means buffer space, and
 * TCP_NOTSENT_LOWAT would throttle every write), so poll it with a
 * backoff from 20 us to about 1 ms. In manual mode only the caller can
 * report progress: fail with -EAGAIN. send() meets this only before its
 * first chunk: afterwards the connection that took the previous chunk holds
 * unsent bytes of this tag only. Bytes that never leave (a peer that stopped
 * reading) end the wait after timeout_ms with -ETIMEDOUT.
 */
static int pick_wait(struct mercury_chanset *cs, unsigned int tag, bool *inv)
{
	struct timespec d = { 0, 20000 }, t0, t1, deadline;
	int i;

	i = pick(cs, tag, inv, NULL);
	if (i != -EAGAIN)
		return i;
	cs->stats.waits++;
	if (cs->outq == MERCURY_OUTQ_MANUAL)
		return mercury_err(EAGAIN,
				   "chanset send: every connection holds unconsumed bytes of another tag than %u; report drained bytes and retry",
				   tag);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	deadline_in(&deadline, cs->timeout_ms);
	do {
		if (!ms_left(&deadline)) {
			i = mercury_err(ETIMEDOUT,
					"chanset send: no connection could take tag %u for %d ms: every one holds unsent bytes of another tag",
					tag, cs->timeout_ms);
			break;
		}
		nanosleep(&d, NULL);
		if (d.tv_nsec < 1000000)
			d.tv_nsec *= 2;
		i = pick(cs, tag, inv, NULL);
	} while (i == -EAGAIN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cs->stats.wait_ns += (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
			     t1.tv_nsec - t0.tv_nsec;
	return i;
}

MERCURY_API int mercury_chanset_send(struct mercury_chanset *cs,
				     uint32_t tensor_id, unsigned int tag,
				     const void *buf, uint64_t len)
{
	unsigned char hdr[MERCURY_FRAME_HDR_LEN];
	struct mercury_frame f = {
		.tensor_id = tensor_id,
		.tag = tag,
		.total_len = len,
	};
	struct mercury_tagger_stats ts;
	struct iovec iov[2];
	struct chan *c;
	uint64_t off = 0;
	bool inv;
	int i, err;

	if (!cs || (!buf && len))
		return mercury_err(EINVAL, "chanset send: NULL argument");
	if (tag > MERCURY_MAX_TAG)
		return mercury_err(ERANGE, "chanset send: tag %u above %u", tag,
				   MERCURY_MAX_TAG);
	do {
		f.offset = off;
		f.chunk_len = len - off < cs->chunk ? len - off : cs->chunk;
		i = pick_wait(cs, tag, &inv);
		if (i < 0)
			return i;
		c = &cs->c[i];
		if (cs->tagger) {
			err = mercury_tag_socket(cs->tagger, c->fd, tag);
			if (err)
				return err;
		}
		c->cur_tag = tag;
		mercury_frame_encode(&f, hdr, sizeof(hdr));
		iov[0] = (struct iovec){ hdr, sizeof(hdr) };
		iov[1] = (struct iovec){ (char *)buf + off, f.chunk_len };
		err = write_all(c->fd, iov, f.chunk_len ? 2 : 1, cs->timeout_ms);
		if (err)
			return err;
		err = chan_push(c, tag, sizeof(hdr) + f.chunk_len);
		if (err)
			return err;
		cs->stats.chunks++;
		cs->stats.bytes += f.chunk_len;
		cs->stats.inversions += inv;
		off += f.chunk_len;
	} while (off < len);
	if (cs->tagger) {
		mercury_tagger_get_stats(cs->tagger, &ts, sizeof(ts));
		cs->stats.tag_syscalls = ts.syscalls;
	}
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
