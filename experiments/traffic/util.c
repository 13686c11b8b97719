/* util.c: clock, idling, errors and the line-based TCP control connection of sprx-traffic. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "traffic.h"

/* CLOCK_REALTIME: every namespace on the machine shares it, so a start time sent in GO
 * means the same instant to the receiver and to every sender. */
uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void idle(int idle_us)
{
	if (idle_us <= 0) {
		sched_yield();
		return;
	}
	struct timespec ts = {0, (long)idle_us * 1000L};
	nanosleep(&ts, NULL);
}

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "sprx-traffic: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

void warnx_(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "sprx-traffic: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static struct sockaddr_in sin_of(const char *ip, int port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		die("bad IPv4 address %s", ip);
	return a;
}

int ctrl_listen(const char *ip, int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = sin_of(ip, port);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
		die("bind %s:%d: %s", ip, port, strerror(errno));
	if (listen(fd, 256) != 0)
		die("listen: %s", strerror(errno));
	nonblock(fd);
	return fd;
}

/* Retries (bounded by timeout_ms) while the receiver is not listening yet. */
int ctrl_connect(const char *ip, int port, int timeout_ms)
{
	return ctrl_connect_from(ip, port, 0, timeout_ms);
}

int ctrl_connect_from(const char *ip, int port, int sport, int timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	struct sockaddr_in a = sin_of(ip, port);
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		if (sport) {
			/* A chosen source port places a kernel TCP flow on a chosen ECMP link. */
			int one = 1;
			struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sport)};
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
			if (bind(fd, (struct sockaddr *)&s, sizeof s) != 0)
				die("bind source port %d: %s", sport, strerror(errno));
		}
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			nonblock(fd);
			return fd;
		}
		close(fd);
		if (now_ns() > end)
			die("connect %s:%d: %s", ip, port, strerror(errno));
		usleep(20000);
	}
}

int ctrl_accept(int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	}
	return fd;
}

void line_init(struct line_conn *c, int fd)
{
	c->fd = fd;
	c->len = 0;
	c->closed = 0;
}

char *line_next(struct line_conn *c)
{
	static char out[sizeof c->buf];
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			size_t n = (size_t)(nl - c->buf);
			memcpy(out, c->buf, n);
			out[n] = 0;
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			return out;
		}
		if (c->closed || c->len == sizeof c->buf)
			return NULL;
		ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
		if (r > 0) {
			c->len += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			c->closed = 1;
		return NULL;
	}
}

/* Control lines are short; a blocking poll until the whole line is written is fine. */
void send_line(int fd, const char *fmt, ...)
{
	char buf[65536];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof buf - 1)
		die("control line too long");
	buf[n++] = '\n';
	int off = 0;
	uint64_t end = now_ns() + 5000000000ULL;
	while (off < n) {
		ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w > 0) {
			off += (int)w;
		} else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = {fd, POLLOUT, 0};
			poll(&p, 1, 10);
			if (now_ns() > end)
				die("control send timed out");
		} else {
			warnx_("control send: %s", strerror(errno));
			return;
		}
	}
}

void hex_encode(const void *p, size_t n, char *out)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}

size_t hex_decode(const char *s, void *out, size_t cap)
{
	unsigned char *b = out;
	size_t n = 0;
	while (s[0] && s[1] && n < cap) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			break;
		b[n++] = (unsigned char)v;
		s += 2;
	}
	return n;
}
