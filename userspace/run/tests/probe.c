// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A plain program with no mercury code, run under the shim by the tests.
 * It does one socket operation and prints the SO_PRIORITY and SO_MARK its
 * socket ended up with:
 *   probe connect PORT        TCP connect to 127.0.0.1:PORT
 *   probe accept              listen on 127.0.0.1:0, print "port N",
 *                             accept one connection
 *   probe sendto PORT         UDP datagram to 127.0.0.1:PORT
 *   probe reuse PORT          connect, close, connect again (fd reused)
 *   probe tos PORT            TCP connect, print the IP_TOS byte instead
 *   probe dup2|dup3|dup|dupfd|closerange PORT
 *                             UDP datagram to PORT on a socket, then make
 *                             its fd number name a fresh socket that way
 *                             (dup and dupfd after a close the shim cannot
 *                             see) and send again: both must be tagged
 *   probe forkstorm PORT N    two threads send datagrams to PORT (the shim
 *                             tags each) while the program forks N children
 *                             that close an fd, send and exit; prints how
 *                             many children hung
 *   probe talk PORT SECONDS   a client of a tiny protocol, for the faults
 *                             suite's misbehaving peers: connect, read the
 *                             greeting "hello\n", send a 1 MiB request,
 *                             read the reply "done\n"; every wait ends after
 *                             SECONDS. Prints one line, the outcome ("done",
 *                             or the step and what went wrong), and exits 0
 *                             only on "done". No tag is printed: the output
 *                             must be the same with and without the shim.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void show(int fd)
{
	unsigned int prio = 0, mark = 0;
	socklen_t l1 = sizeof(prio), l2 = sizeof(mark);

	getsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, &l1);
	getsockopt(fd, SOL_SOCKET, SO_MARK, &mark, &l2);
	printf("priority %u mark %u\n", prio, mark);
	fflush(stdout);
}

static struct sockaddr_in peer = { .sin_family = AF_INET };
static volatile bool stop;

static int send_one(int fd)
{
	return sendto(fd, "x", 1, 0, (struct sockaddr *)&peer,
		      sizeof(peer)) == 1 ? 0 : -1;
}

/*
 * fd is a tagged socket; give its number to a fresh, untagged socket the
 * way mode says, then send on it. Prints the tag before and after.
 */
static int renumber(const char *mode, int fd)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0), r = -1;

	if (!strcmp(mode, "dup2")) {
		r = dup2(s, fd);
	} else if (!strcmp(mode, "dup3")) {
		r = dup3(s, fd, O_CLOEXEC);
	} else if (!strcmp(mode, "closerange")) {
		close_range(fd, fd, 0);
		r = dup(s);
	} else {
		/* freed behind the shim's back: only the dup itself tells */
		syscall(SYS_close, fd);
		r = !strcmp(mode, "dup") ? dup(s) : fcntl(s, F_DUPFD, fd);
	}
	close(s);
	printf("same fd %d\n", r == fd);
	if (send_one(fd))
		return perror("sendto"), 1;
	show(fd);
	return 0;
}

static void *sender(void *arg)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	(void)arg;
	while (!stop)
		send_one(fd);
	close(fd);
	return NULL;
}

/* Wait up to 2 s for pid; 1 if it had to be killed. */
static int hung(pid_t pid)
{
	struct timespec t = { 0, 1000000 };
	int st;

	for (int i = 0; i < 2000; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return 0;
		nanosleep(&t, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return 1;
}

static int forkstorm(int n)
{
	pthread_t th[2];
	int nhung = 0;

	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, sender, NULL);
	for (int i = 0; i < n && nhung < 3; i++) {
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		pid_t pid = fork();

		if (!pid) {
			close(fd);
			fd = socket(AF_INET, SOCK_DGRAM, 0);
			_exit(send_one(fd) ? 1 : 0);
		}
		close(fd);
		if (pid > 0)
			nhung += hung(pid);
	}
	stop = true;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	printf("hung %d\n", nhung);
	return 0;
}

#define TALK_REQUEST	(1 << 20)

/*
 * Read exactly len bytes of a reply and compare them with want. Prints
 * the outcome and returns 0 only if they arrived and match.
 */
static int talk_read(int fd, const char *step, const char *want, size_t len)
{
	char got[16];
	size_t n = 0;
	ssize_t r = 0;

	while (n < len && (r = recv(fd, got + n, len - n, 0)) > 0)
		n += r;
	if (n < len) {
		printf("%s: %s after %zu of %zu bytes\n", step,
		       !r ? "end of stream" :
		       errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" :
		       strerror(errno), n, len);
		return 1;
	}
	if (memcmp(got, want, len)) {
		printf("%s: garbage:", step);
		for (n = 0; n < len; n++)
			printf(" %02x", (unsigned char)got[n]);
		printf("\n");
		return 1;
	}
	return 0;
}

static int talk(struct sockaddr_in *a, int seconds)
{
	struct timeval tv = { .tv_sec = seconds };
	/* whatever the host's tcp_wmem, a peer that stops reading blocks */
	int fd, sndbuf = 65536;
	static char req[65536];
	struct timespec now, end;
	size_t sent = 0;
	long left;
	ssize_t r;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)))
		return perror("setsockopt"), 2;
	if (connect(fd, (struct sockaddr *)a, sizeof(*a))) {
		printf("connect: %s\n", strerror(errno));
		return 1;
	}
	if (talk_read(fd, "greeting", "hello\n", 6))
		return 1;
	memset(req, 'q', sizeof(req));
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += seconds;
	while (sent < TALK_REQUEST) {
		/*
		 * The whole request within SECONDS: a send that timed out
		 * after a little progress returns it, and a stalled peer's
		 * kernel can keep making a little room.
		 */
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (end.tv_sec - now.tv_sec) * 1000000L +
		       (end.tv_nsec - now.tv_nsec) / 1000;
		if (left <= 0) {
			printf("request: timed out\n");
			return 1;
		}
		tv.tv_sec = left / 1000000;
		tv.tv_usec = left % 1000000;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		/* sendto without an address: through the shim's wrapper */
		r = sendto(fd, req, TALK_REQUEST - sent < sizeof(req) ?
			   TALK_REQUEST - sent : sizeof(req), MSG_NOSIGNAL,
			   NULL, 0);
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			printf("request: %s\n", strerror(errno));
			return 1;
		}
		if (r > 0)
			sent += r;
	}
	if (talk_read(fd, "reply", "done\n", 5))
		return 1;
	printf("done\n");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd, s;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (argc >= 3)
		a.sin_port = htons(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "connect")) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return perror("connect"), 1;
		show(fd);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "tos")) {
		unsigned int tos = 0;
		socklen_t tl = sizeof(tos);

		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return perror("connect"), 1;
		getsockopt(fd, IPPROTO_IP, IP_TOS, &tos, &tl);
		printf("tos %u\n", tos);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "reuse")) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return perror("connect"), 1;
		show(fd);
		close(fd);
		/* Same fd number, now to a port no rule names. */
		s = socket(AF_INET, SOCK_DGRAM, 0);
		a.sin_port = htons(9);
		if (sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)) != 1)
			return perror("sendto"), 1;
		printf("same fd %d\n", s == fd);
		show(s);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "sendto")) {
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		if (sendto(fd, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)) != 1)
			return perror("sendto"), 1;
		show(fd);
		return 0;
	}
	peer = a;
	if (argc == 3 && (!strcmp(argv[1], "dup2") || !strcmp(argv[1], "dup3") ||
			  !strcmp(argv[1], "dup") || !strcmp(argv[1], "dupfd") ||
			  !strcmp(argv[1], "closerange"))) {
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		if (send_one(fd))
			return perror("sendto"), 1;
		show(fd);
		return renumber(argv[1], fd);
	}
	if (argc == 4 && !strcmp(argv[1], "forkstorm"))
		return forkstorm(atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "talk"))
		return talk(&a, atoi(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "accept")) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 1) ||
		    getsockname(fd, (struct sockaddr *)&a, &len))
			return perror("listen"), 1;
		printf("port %u\n", ntohs(a.sin_port));
		fflush(stdout);
		s = accept(fd, NULL, NULL);
		if (s < 0)
			return perror("accept"), 1;
		show(s);
		return 0;
	}
	fprintf(stderr, "usage: probe connect|sendto|reuse|dup2|dup3|dup|dupfd|closerange PORT | probe forkstorm PORT N | probe talk PORT SECONDS | probe accept\n");
	return 2;
}
