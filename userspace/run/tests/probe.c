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
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd, s;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (argc == 3)
		a.sin_port = htons(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "connect")) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return perror("connect"), 1;
		show(fd);
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
	fprintf(stderr, "usage: probe connect|sendto|reuse PORT | probe accept\n");
	return 2;
}
