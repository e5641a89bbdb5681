// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Non-blocking connections: frames queued in order and written with
 * sendmsg as far as the socket takes them (partial writes resume where
 * they stopped); frames read header first, then the payload straight into
 * wherever the caller says it belongs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <json-c/json.h>

#include "ps.h"

int64_t ps_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool ps_err_malformed(int err)
{
	return err == -EPROTO || err == -EBADMSG || err == -EPROTONOSUPPORT ||
	       err == -EINVAL;
}

int ps_poll_ns(struct pollfd *pfd, unsigned int n, int64_t wait_ns)
{
	struct timespec ts;
	int ret;

	if (wait_ns < 0)
		wait_ns = 0;
	ts.tv_sec = wait_ns / 1000000000;
	ts.tv_nsec = wait_ns % 1000000000;
	ret = ppoll(pfd, n, &ts, NULL);
	if (ret < 0)
		return errno == EINTR ? 0 : -errno;
	return ret;
}

void ps_error(const struct ps_cfg *cfg, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (cfg && cfg->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "error", json_object_new_string(msg));
		printf("%s\n", json_object_to_json_string_ext(o,
			JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
		fflush(stdout);
		json_object_put(o);
	}
	fprintf(stderr, PS_PROG ": %s\n", msg);
}

int ps_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int ps_sock_opts(int fd, const struct ps_cfg *cfg)
{
	int one = 1;

	/* frames are written whole or resumed; no Nagle delay on the tail */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -errno;
	if (cfg->sndbuf > 0) {
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cfg->sndbuf,
			       sizeof(cfg->sndbuf)) < 0 ||
		    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cfg->sndbuf,
			       sizeof(cfg->sndbuf)) < 0)
			return -errno;
	}
	return 0;
}

/* sch_prio with "priomap 0 1 ... 15" puts priority p into band p. */
int ps_prio_band(int fd, unsigned int band)
{
	int v = band;

	if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &v, sizeof(v)) < 0)
		return -errno;
	return 0;
}

int ps_parse_hostport(const char *s, char *host, size_t hlen, char *port,
		      size_t plen)
{
	const char *colon = strrchr(s, ':');
	char *end;
	long p;

	if (!colon || colon == s || (size_t)(colon - s) >= hlen)
		return -EINVAL;
	p = strtol(colon + 1, &end, 10);
	if (*end || p <= 0 || p > 65535 || strlen(colon + 1) >= plen)
		return -EINVAL;
	memcpy(host, s, colon - s);
	host[colon - s] = '\0';
	snprintf(port, plen, "%ld", p);
	return 0;
}

struct ps_out *ps_out_new(uint32_t tensor_id, unsigned int tag,
			  uint64_t total, uint64_t offset,
			  const void *payload, uint32_t len)
{
	struct mercury_frame f = {
		.tensor_id = tensor_id,
		.tag = tag > MERCURY_MAX_TAG ? MERCURY_MAX_TAG : tag,
		.total_len = total,
		.offset = offset,
		.chunk_len = len,
	};
	struct ps_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	if (mercury_frame_encode(&f, o->hdr, sizeof(o->hdr)) < 0) {
		free(o);
		return NULL;
	}
	o->payload = payload;
	o->len = len;
	o->tag = tag;
	o->tensor = tensor_id;
	return o;
}

void ps_conn_queue(struct ps_conn *c, struct ps_out *o)
{
	o->next = NULL;
	if (c->tail)
		c->tail->next = o;
	else
		c->head = o;
	c->tail = o;
}

int ps_conn_flush(struct ps_conn *c)
{
	int progress = 0;

	while (c->head) {
		struct ps_out *o = c->head;
		struct iovec iov[2];
		struct msghdr msg = { .msg_iov = iov };
		ssize_t n;
		int k = 0;

		if (o->sent < MERCURY_FRAME_HDR_LEN) {
			iov[k].iov_base = o->hdr + o->sent;
			iov[k++].iov_len = MERCURY_FRAME_HDR_LEN - o->sent;
			iov[k].iov_base = (void *)o->payload;
			iov[k++].iov_len = o->len;
		} else {
			iov[k].iov_base = (void *)(o->payload + o->sent -
						   MERCURY_FRAME_HDR_LEN);
			iov[k++].iov_len = MERCURY_FRAME_HDR_LEN + o->len - o->sent;
		}
		msg.msg_iovlen = k;
		/* the tag is read when TCP builds the segments, so it is set
		 * just before the frame's first byte goes into the socket */
		if (c->tagger && !o->sent) {
			int err = mercury_tag_socket(c->tagger, c->fd, o->tag);

			if (err < 0)
				return err;
		}
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return progress;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		progress = 1;
		c->bytes_out += n;
		/* the channel set counts what the kernel holds, so it is
		 * told exactly what the kernel took */
		if (c->cs && mercury_chanset_commit(c->cs, c->cs_idx, o->tag, n) < 0)
			return -errno;
		o->sent += n;
		if (o->sent < MERCURY_FRAME_HDR_LEN + o->len)
			continue;
		c->head = o->next;
		if (!c->head)
			c->tail = NULL;
		free(o);
	}
	return progress;
}

int ps_conn_read(struct ps_conn *c, ps_dest_fn dest, ps_frame_fn done,
		 void *ctx)
{
	int progress = 0, reads = 0, ret;

	/* bounded, so one busy peer cannot starve the others or the clock */
	while (reads++ < 64) {
		ssize_t n;

		if (!c->in_payload) {
			n = recv(c->fd, c->hdr + c->hdr_got,
				 MERCURY_FRAME_HDR_LEN - c->hdr_got, MSG_DONTWAIT);
		} else {
			n = recv(c->fd, c->dst + c->got, c->fr.chunk_len - c->got,
				 MSG_DONTWAIT);
		}
		if (n == 0) {
			c->eof = true;
			return (c->in_payload || c->hdr_got) ? -ECONNRESET : -ENOTCONN;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return progress;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		progress = 1;
		c->bytes_in += n;
		c->last_in_ns = ps_now_ns();
		if (!c->in_payload) {
			c->hdr_got += n;
			if (c->hdr_got < MERCURY_FRAME_HDR_LEN)
				continue;
			ret = mercury_frame_decode(c->hdr, sizeof(c->hdr), &c->fr);
			if (ret < 0)
				return ret;
			c->hdr_got = 0;
			c->got = 0;
			ret = dest(ctx, c);	/* sets c->dst, validates */
			if (ret < 0)
				return ret;
			c->in_payload = true;
			if (c->fr.chunk_len)
				continue;
		} else {
			c->got += n;
			if (c->got < c->fr.chunk_len)
				continue;
		}
		c->in_payload = false;
		ret = done(ctx, c);
		if (ret)
			return ret;	/* error, or the caller wants to stop here */
	}
	return progress;
}

void ps_conn_close(struct ps_conn *c)
{
	struct ps_out *o, *next;

	for (o = c->head; o; o = next) {
		next = o->next;
		free(o);
	}
	c->head = c->tail = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->stage);
	c->stage = NULL;
}

static bool heap_less(const struct ps_out *a, const struct ps_out *b)
{
	return a->key < b->key;
}

int ps_heap_push(struct ps_heap *h, struct ps_out *o)
{
	size_t i;

	if (h->n == h->cap) {
		size_t ncap = h->cap ? 2 * h->cap : 64;
		struct ps_out **v = realloc(h->v, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = ncap;
	}
	i = h->n++;
	while (i && heap_less(o, h->v[(i - 1) / 2])) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = o;
	return 0;
}

struct ps_out *ps_heap_top(const struct ps_heap *h)
{
	return h->n ? h->v[0] : NULL;
}

void ps_heap_free(struct ps_heap *h)
{
	struct ps_out *o;

	while ((o = ps_heap_pop(h)))
		free(o);
	free(h->v);
	h->v = NULL;
	h->cap = 0;
}

struct ps_out *ps_heap_pop(struct ps_heap *h)
{
	struct ps_out *top, *last;
	size_t i = 0;

	if (!h->n)
		return NULL;
	top = h->v[0];
	last = h->v[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < h->n && heap_less(h->v[l], last))
			m = l;
		if (l + 1 < h->n && heap_less(h->v[l + 1], m == i ? last : h->v[l]))
			m = l + 1;
		if (m == i)
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}
