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
 */
#include <arpa/inet.h>
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
	fprintf(stderr, "usage: probe connect|sendto|reuse|dup2|dup3|dup|dupfd|closerange PORT | probe forkstorm PORT N | probe accept\n");
	return 2;
}
