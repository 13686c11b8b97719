/* raw_pingpong.c: kernel UDP / TCP ping-pong baseline for scripts/bench.sh (busy-polling, like fi_pingpong).
 *
 * Usage: raw_pingpong udp|tcp PORT SIZE ITERS            (server, binds 0.0.0.0:PORT)
 *        raw_pingpong udp|tcp PORT SIZE ITERS SERVER_IP  (client)
 * The client prints "usec_per_xfer=U mb_per_sec=M" with fi_pingpong's
 * definitions: half a round trip; 2 * SIZE * ITERS bytes over the elapsed us.
 * Both sides give up after 20 s without progress, so a lost UDP datagram
 * (the baseline has no retransmission) ends the run with an error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Spins on a non-blocking receive until len bytes (TCP) or one datagram (UDP) arrived. */
static int recv_all(int fd, char *buf, size_t len, int stream, struct sockaddr_in *from)
{
	size_t got = 0;
	double start = now_us();
	socklen_t fl = sizeof(*from);
	while (got < len) {
		ssize_t n = stream ? recv(fd, buf + got, len - got, MSG_DONTWAIT)
				   : recvfrom(fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)from, &fl);
		if (n > 0) {
			if (!stream)
				return 0;
			got += (size_t)n;
			start = now_us();
		} else if (n == 0 && stream) {
			return -1;
		} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			return -1;
		} else if (now_us() - start > 20e6) {
			fprintf(stderr, "raw_pingpong: no data for 20 s\n");
			return -1;
		}
	}
	return 0;
}

static int send_all(int fd, const char *buf, size_t len, int stream, const struct sockaddr_in *to)
{
	size_t sent = 0;
	if (!stream)
		return sendto(fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to)) == (ssize_t)len ? 0 : -1;
	while (sent < len) {
		ssize_t n = send(fd, buf + sent, len - sent, 0);
		if (n < 0 && errno != EINTR)
			return -1;
		if (n > 0)
			sent += (size_t)n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: %s udp|tcp PORT SIZE ITERS [SERVER_IP]\n", argv[0]);
		return 2;
	}
	int stream = strcmp(argv[1], "tcp") == 0;
	int port = atoi(argv[2]);
	size_t size = (size_t)atol(argv[3]);
	long iters = atol(argv[4]);
	int client = argc == 6;
	if (size == 0 || iters <= 0 || (!stream && size > 65507)) {
		fprintf(stderr, "raw_pingpong: bad size or iterations (udp: 1..65507 bytes)\n");
		return 2;
	}
	char *buf = calloc(1, size);
	if (!buf)
		return 1;
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	struct sockaddr_in peer = addr;
	int one = 1, fd, s = socket(AF_INET, stream ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (s < 0)
		return 1;
	int big = 4 << 20;
	setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	setsockopt(s, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (client) {
		if (inet_pton(AF_INET, argv[5], &peer.sin_addr) != 1)
			return 2;
		if (stream && connect(s, (struct sockaddr *)&peer, sizeof(peer)) != 0) {
			perror("connect");
			return 1;
		}
		fd = s;
	} else {
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		addr.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(s, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
			perror("bind");
			return 1;
		}
		if (stream) {
			listen(s, 1);
			fd = accept(s, NULL, NULL);
			if (fd < 0)
				return 1;
		} else {
			fd = s;
		}
	}
	if (stream)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	double start = now_us();
	for (long i = 0; i < iters; i++) {
		if (client) {
			if (send_all(fd, buf, size, stream, &peer) || recv_all(fd, buf, size, stream, &peer))
				return 1;
		} else {
			if (recv_all(fd, buf, size, stream, &peer) || send_all(fd, buf, size, stream, &peer))
				return 1;
		}
	}
	double us = now_us() - start;
	if (client)
		printf("usec_per_xfer=%.2f mb_per_sec=%.2f\n", us / iters / 2, 2.0 * size * iters / us);
	close(fd);
	free(buf);
	return 0;
}
