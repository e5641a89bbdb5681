// SPDX-License-Identifier: GPL-2.0
/*
 * mercury-blast: sustained tagged TCP and UDP traffic for the fuzz and
 * soak runs (the selftests' mercury_traffic.py sends counted bursts; this
 * keeps a queue busy for minutes at little CPU).
 *
 *   mercury-blast sink -p PORT [-t SECONDS] [-c COUNT]
 *   mercury-blast send -a ADDR -p PORT [-T TCP] [-U UDP] [-g TAGS] [-S SHIFT]
 *                      [-r PPS] [-l BYTES] [-t SECONDS] [-c COUNT]
 *                      [-b BYTES/S] [-i SECONDS] [-s SEED]
 *
 * sink: accepts TCP connections and reads them, counts UDP datagrams, all
 * on PORT, until SIGTERM, SECONDS or COUNT datagrams.
 * send: TCP flows (connected to ADDR:PORT, written to whenever they can
 * take more, each paced to -b bytes per second if given, reconnected when
 * the kernel resets them) and UDP flows (one
 * socket each, together PPS datagrams per second of BYTES, 0: as fast as
 * they go), until SIGTERM, SECONDS, or COUNT datagrams (sent round-robin
 * over the UDP flows: COUNT / UDP each). Flow i carries tag TAGS[i % n] (TAGS: a comma list, or LO-HI
 * for tags drawn at random from that range), as SO_MARK and SO_PRIORITY
 * both (tag << SHIFT) and as the DSCP (its low six bits), so that every
 * tag source of the qdisc sees it.
 * -i prints a line of rates every SECONDS. Both print their totals on
 * exit as "key value" lines.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define BLAST_MAX_FLOWS	4096

static volatile sig_atomic_t blast_stop;

static void blast_on_signal(int sig)
{
	(void)sig;
	blast_stop = 1;
}

static double blast_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int blast_nonblock(int fd)
{
	return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

struct blast_flow {
	int		fd;
	uint32_t	tag;
	bool		tcp;
	bool		connected;
	double		retry_at;	/* TCP: reconnect not before */
	unsigned int	rate;		/* TCP: bytes per second, 0: no limit */
};

struct blast_args {
	const char	*addr;
	int		port;
	int		tcp, udp;
	unsigned int	tcp_rate;	/* bytes per second per TCP flow */
	uint32_t	tags[BLAST_MAX_FLOWS];
	int		ntags;
	uint32_t	tag_lo, tag_hi;	/* random range when ntags == 0 */
	int		shift;
	double		pps;
	int		len;
	double		seconds;
	double		interval;
	uint64_t	count;		/* UDP datagrams: stop after so many */
};

/* The tag in every source a qdisc may read: the DSCP (its low six bits),
 * the mark and the priority.
 */
static void blast_tag(int fd, uint32_t tag, int shift)
{
	uint32_t v = tag << shift;
	int tos = (v & 0x3f) << 2;

	/* IP_TOS first: it also sets the socket's priority (to what the
	 * old TOS bits map to), which SO_PRIORITY then overrides. Root in
	 * the guest: any mark and priority are allowed.
	 */
	setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	setsockopt(fd, SOL_SOCKET, SO_MARK, &v, sizeof(v));
	setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &v, sizeof(v));
}

static void blast_connect(struct blast_flow *f, const struct sockaddr_in *to,
			  int shift)
{
	int one = 1;

	f->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (f->fd < 0)
		fuzz_die("socket: %m");
	blast_tag(f->fd, f->tag, shift);
	setsockopt(f->fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
	/* TCP paces itself to this rate (internal pacing, any qdisc) */
	if (f->rate)
		setsockopt(f->fd, SOL_SOCKET, SO_MAX_PACING_RATE, &f->rate,
			   sizeof(f->rate));
	blast_nonblock(f->fd);
	f->connected = false;
	if (connect(f->fd, (const struct sockaddr *)to, sizeof(*to)) == 0)
		f->connected = true;
	else if (errno != EINPROGRESS)
		f->retry_at = blast_now() + 0.5;
}

static int blast_send(struct blast_args *a)
{
	static char buf[65536];
	struct blast_flow *fl;
	struct pollfd *pfd;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(a->port) };
	int n = a->tcp + a->udp, i;
	uint64_t udp_sent = 0, udp_failed = 0, tcp_bytes = 0, tcp_resets = 0;
	uint64_t last_udp = 0, last_tcp = 0;
	double start = blast_now(), next_udp = start, next_report = start + a->interval;
	int udp_rr = 0, big = 16 << 20;

	if (inet_pton(AF_INET, a->addr, &to.sin_addr) != 1)
		fuzz_die("bad address %s", a->addr);
	if (n <= 0 || n > BLAST_MAX_FLOWS)
		fuzz_die("1..%d flows, not %d", BLAST_MAX_FLOWS, n);
	fl = calloc(n, sizeof(*fl));
	pfd = calloc(n, sizeof(*pfd));
	if (!fl || !pfd)
		fuzz_die("out of memory");
	memset(buf, 'm', sizeof(buf));

	for (i = 0; i < n; i++) {
		fl[i].tag = a->ntags ? a->tags[i % a->ntags] :
			    a->tag_lo + fuzz_below((uint64_t)a->tag_hi - a->tag_lo + 1);
		fl[i].tcp = i < a->tcp;
		fl[i].rate = a->tcp_rate;
		if (fl[i].tcp) {
			blast_connect(&fl[i], &to, a->shift);
		} else {
			fl[i].fd = socket(AF_INET, SOCK_DGRAM, 0);
			if (fl[i].fd < 0 || connect(fl[i].fd, (struct sockaddr *)&to, sizeof(to)))
				fuzz_die("udp socket: %m");
			blast_tag(fl[i].fd, fl[i].tag, a->shift);
			setsockopt(fl[i].fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
			blast_nonblock(fl[i].fd);
		}
	}

	while (!blast_stop) {
		double now = blast_now();
		int timeout = 100;

		if ((a->seconds > 0 && now - start >= a->seconds) ||
		    (a->count && udp_sent + udp_failed >= a->count))
			break;
		if (a->interval > 0 && now >= next_report) {
			printf("# blast t=%.0fs udp_pps=%.0f tcp_kbit_s=%.0f\n", now - start,
			       (udp_sent - last_udp) / a->interval,
			       (tcp_bytes - last_tcp) * 8 / 1000.0 / a->interval);
			fflush(stdout);
			last_udp = udp_sent;
			last_tcp = tcp_bytes;
			next_report += a->interval;
		}
		/* UDP: as many datagrams as the rate allows by now */
		for (int burst = 0; a->udp && now >= next_udp && burst < 64 &&
		     !(a->count && udp_sent + udp_failed >= a->count); burst++) {
			struct blast_flow *f = &fl[a->tcp + udp_rr];

			udp_rr = (udp_rr + 1) % a->udp;
			if (send(f->fd, buf, a->len, 0) == a->len)
				udp_sent++;
			else
				udp_failed++;
			if (a->pps > 0)
				next_udp += 1.0 / a->pps;
			if (now - next_udp > 1)
				next_udp = now;	/* we fell behind: do not burst */
		}
		if (a->udp) {
			double wait = (next_udp - now) * 1000;

			timeout = wait < timeout ? (wait > 0 ? (int)wait : 0) : timeout;
		}
		for (i = 0; i < a->tcp; i++) {
			struct blast_flow *f = &fl[i];

			pfd[i].fd = f->fd;
			pfd[i].events = POLLOUT;
			pfd[i].revents = 0;
			if (f->fd < 0) {
				pfd[i].fd = -1;
				if (now >= f->retry_at)
					blast_connect(f, &to, a->shift);
			}
		}
		if (poll(pfd, a->tcp, timeout) < 0 && errno != EINTR)
			fuzz_die("poll: %m");
		for (i = 0; i < a->tcp; i++) {
			struct blast_flow *f = &fl[i];
			ssize_t w;

			if (!(pfd[i].revents & (POLLOUT | POLLERR | POLLHUP)))
				continue;
			w = send(f->fd, buf, sizeof(buf), MSG_NOSIGNAL);
			if (w > 0) {
				f->connected = true;
				tcp_bytes += w;
			} else if (w < 0 && errno != EAGAIN && errno != EINPROGRESS) {
				/* reset (e.g. the link went down): start over */
				tcp_resets++;
				close(f->fd);
				f->fd = -1;
				f->retry_at = blast_now() + 0.5;
			}
		}
	}
	/* Reset, not close: a closed socket would keep sending what its
	 * buffer holds for seconds, and the caller wants a quiet link now.
	 */
	for (i = 0; i < a->tcp; i++) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		if (fl[i].fd < 0)
			continue;
		setsockopt(fl[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fl[i].fd);
	}
	printf("udp_sent %llu\nudp_failed %llu\ntcp_bytes %llu\ntcp_resets %llu\n",
	       (unsigned long long)udp_sent, (unsigned long long)udp_failed,
	       (unsigned long long)tcp_bytes, (unsigned long long)tcp_resets);
	return 0;
}

static int blast_sink(struct blast_args *a)
{
	static char buf[65536];
	struct sockaddr_in me = {
		.sin_family = AF_INET, .sin_port = htons(a->port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct pollfd pfd[BLAST_MAX_FLOWS + 2];
	uint64_t udp_packets = 0, tcp_bytes = 0;
	int n = 2, i, one = 1, big = 64 << 20, lfd, ufd;
	double start = blast_now();

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	ufd = socket(AF_INET, SOCK_DGRAM, 0);
	if (lfd < 0 || ufd < 0)
		fuzz_die("socket: %m");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&me, sizeof(me)) || listen(lfd, 1024) ||
	    bind(ufd, (struct sockaddr *)&me, sizeof(me)))
		fuzz_die("bind port %d: %m", a->port);
	/* room for every datagram of a burst: a count must not lose any */
	setsockopt(ufd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	blast_nonblock(lfd);
	blast_nonblock(ufd);
	pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = ufd, .events = POLLIN };
	printf("# sink ready on port %d\n", a->port);
	fflush(stdout);

	while (!blast_stop && (a->seconds <= 0 || blast_now() - start < a->seconds) &&
	       !(a->count && udp_packets >= a->count)) {
		if (poll(pfd, n, 200) < 0 && errno != EINTR)
			fuzz_die("poll: %m");
		if (pfd[0].revents & POLLIN) {
			int c = accept(lfd, NULL, NULL);

			if (c >= 0 && n < BLAST_MAX_FLOWS + 2) {
				blast_nonblock(c);
				pfd[n++] = (struct pollfd){ .fd = c, .events = POLLIN };
			} else if (c >= 0) {
				close(c);
			}
		}
		if (pfd[1].revents & POLLIN)
			while (recv(ufd, buf, sizeof(buf), 0) >= 0)
				udp_packets++;
		for (i = 2; i < n; i++) {
			ssize_t r;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = recv(pfd[i].fd, buf, sizeof(buf), 0);
			if (r > 0) {
				tcp_bytes += r;
			} else if (r == 0 || errno != EAGAIN) {
				close(pfd[i].fd);
				pfd[i--] = pfd[--n];
			}
		}
	}
	printf("udp_packets %llu\ntcp_bytes %llu\n",
	       (unsigned long long)udp_packets, (unsigned long long)tcp_bytes);
	return 0;
}

static void blast_parse_tags(struct blast_args *a, char *s)
{
	char *tok, *save = NULL;
	unsigned long lo, hi;

	if (sscanf(s, "%lu-%lu", &lo, &hi) == 2) {
		if (lo > hi || hi > UINT32_MAX)
			fuzz_die("bad tag range %s", s);
		a->ntags = 0;
		a->tag_lo = lo;
		a->tag_hi = hi;
		return;
	}
	a->ntags = 0;
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (a->ntags == BLAST_MAX_FLOWS)
			fuzz_die("at most %d tags", BLAST_MAX_FLOWS);
		a->tags[a->ntags++] = fuzz_uint('g', tok, UINT32_MAX);
	}
	if (!a->ntags)
		fuzz_die("no tags in '%s'", s);
}

int main(int argc, char **argv)
{
	static struct blast_args a = {
		.port = 9000, .tcp = 0, .udp = 1, .ntags = 1, .tags = { 1 },
		.pps = 1000, .len = 1000,
	};
	uint64_t seed = 1;
	int c;

	if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "sink"))) {
		fprintf(stderr, "usage: %s send|sink [options] (see the source's header)\n", argv[0]);
		return 2;
	}
	optind = 2;
	while ((c = getopt(argc, argv, "a:p:T:U:g:S:r:l:t:i:s:c:b:")) != -1) {
		switch (c) {
		case 'a': a.addr = optarg; break;
		case 'p': a.port = fuzz_uint('p', optarg, 65535); break;
		case 'T': a.tcp = fuzz_uint('T', optarg, BLAST_MAX_FLOWS); break;
		case 'U': a.udp = fuzz_uint('U', optarg, BLAST_MAX_FLOWS); break;
		case 'g': blast_parse_tags(&a, optarg); break;
		case 'S': a.shift = fuzz_uint('S', optarg, 31); break;
		case 'r': a.pps = fuzz_real('r', optarg); break;
		case 'l': a.len = fuzz_uint('l', optarg, 65000); break;
		case 't': a.seconds = fuzz_real('t', optarg); break;
		case 'i': a.interval = fuzz_real('i', optarg); break;
		case 's': seed = fuzz_uint('s', optarg, UINT64_MAX); break;
		case 'c': a.count = fuzz_uint('c', optarg, UINT64_MAX); break;
		case 'b': a.tcp_rate = fuzz_uint('b', optarg, UINT32_MAX); break;
		default: return 2;
		}
	}
	if (a.len < 1 || a.len > 65000 || a.shift < 0 || a.shift > 31 ||
	    a.tcp < 0 || a.udp < 0)
		fuzz_die("bad length, shift or flow count");
	fuzz_srand(seed);
	signal(SIGTERM, blast_on_signal);
	signal(SIGINT, blast_on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "sink"))
		return blast_sink(&a);
	if (!a.addr)
		fuzz_die("send needs -a ADDR");
	return blast_send(&a);
}
