// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Socket setup, time, errors: what the roles need around libmercury's
 * sender and receiver, which move every byte.
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
	       err == -EINVAL || err == -EMSGSIZE || err == -ENOBUFS;
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

void ps_conn_close(struct ps_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->stage);
	c->stage = NULL;
}
