/* raw_stream.c: kernel baselines for scripts/hostbench.sh: UDP with GSO/GRO and TCP, streaming and ping-pong.
 *
 * Usage: raw_stream udp|tcp recv PORT [opts]          stream receiver (counts bytes until the sender stops)
 *        raw_stream udp|tcp send ADDR PORT [opts]     stream sender (sends for -d ms as fast as it can)
 *        raw_stream udp|tcp pong PORT [opts]          ping-pong server (echoes -x + -n messages)
 *        raw_stream udp|tcp ping ADDR PORT [opts]     ping-pong client (prints the latency)
 * Options: -s SIZE  message bytes (default 1048576)      -d MS      stream duration (default 1000)
 *          -n ITERS ping-pong iterations (default 1000)  -x WARMUP  untimed ping-pongs (default 10)
 *          -g SEG   UDP payload per packet (default: the path MTU - 28, from IP_MTU of the connected socket)
 *          -t SEC   hard bound on the whole run (default 60; exit 3 when hit)
 *
 * UDP: a message of SIZE bytes goes as datagrams of at most SEG bytes; a run of them to the peer is
 * one send entry with UDP_SEGMENT=SEG (GSO, up to 64 segments and 65507 bytes per entry), entries
 * batched by sendmmsg (up to 64). The receiver turns UDP_GRO on and takes coalesced datagrams with
 * recvmmsg; a datagram of L bytes with GRO size G counts as ceil(L/G) packets. If the kernel refuses
 * GSO (EIO/EINVAL: no checksum offload) the sender falls back to one datagram per entry (gso=0).
 * There is no retransmission: the stream receiver reports what arrived (the sender what it sent),
 * a lost ping-pong datagram ends the run with an error after 5 s without progress.
 * TCP: stream = send() of SIZE bytes in a loop (Nagle on, buffers autotuned), ping-pong = TCP_NODELAY.
 *
 * Output, one line of key=value:
 *   recv: bytes= datagrams= pkts= secs= mb_per_sec= cpu_s=   (secs: first to last arrival; the rate
 *         leaves out the first receive call's bytes; cpu_s: user+system time of the process once its
 *         socket is ready; it blocks in recv while nothing comes, which costs no CPU)
 *   send: bytes= msgs= pkts= secs= cpu_s= seg= gso=          (pkts: datagrams handed to the kernel)
 *   ping: usec_per_xfer= mb_per_sec= seg=                    (fi_pingpong's definitions: half a round
 *         trip; 2 * SIZE * ITERS bytes over the elapsed us). Ping-pong sides busy-poll (MSG_DONTWAIT).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

enum { BATCH = 64, MAX_SEGS = 64, MAX_UDP = 65507, RX_BUF = 65536, SOCKBUF = 16 << 20 };

static int is_udp;
static size_t size = 1 << 20, seg;
static long duration_ms = 1000, iters = 1000, warmup = 10;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + (double)r.ru_stime.tv_sec +
	       r.ru_stime.tv_usec / 1e6;
}

static void die(const char *what)
{
	fprintf(stderr, "raw_stream: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(1);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "raw_stream: timeout (-t)\n";
	ssize_t rc = write(2, msg, sizeof msg - 1);
	(void)rc;
	_exit(3);
}

/* Large socket buffers: forced when root (as spray does), else as much as rmem_max allows. */
static void big_buffers(int fd)
{
	int v = SOCKBUF;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof v) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof v) != 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
}

static int udp_socket(int port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	if (fd < 0)
		die("socket");
	big_buffers(fd);
	if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) != 0)
		fprintf(stderr, "raw_stream: UDP_GRO unavailable: %s\n", strerror(errno));
	if (port >= 0) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
			die("bind");
	}
	return fd;
}

static void parse_addr(struct sockaddr_in *a, const char *ip, const char *port)
{
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, ip, &a->sin_addr) != 1) {
		fprintf(stderr, "raw_stream: bad address %s\n", ip);
		exit(2);
	}
}

/* Connects a UDP socket (so sends need no address) and sets seg from the path MTU unless -g gave it. */
static void udp_connect(int fd, const struct sockaddr_in *peer)
{
	if (connect(fd, (const struct sockaddr *)peer, sizeof *peer) != 0)
		die("connect");
	if (!seg) {
		int mtu = 0;
		socklen_t l = sizeof mtu;
		if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l) != 0 || mtu < 576)
			mtu = 1500;
		seg = (size_t)mtu - 28;
	}
}

/* ---------------- UDP send side: a message as GSO entries ---------------- */

struct entries {
	struct mmsghdr m[BATCH];
	struct iovec iov[BATCH];
	char cm[BATCH][CMSG_SPACE(sizeof(uint16_t))];
	int n;           /* entries in one batch */
	int per_msg;     /* entries per message */
	long msgs;       /* whole messages per batch (1 when a message needs more than BATCH entries) */
};

static int gso_on = 1;
static char *txbuf;

/* Entry e of a message: its length (bytes) at offset off; GSO when longer than one segment. */
static void fill(struct entries *E, int i, size_t len)
{
	struct msghdr *h = &E->m[i].msg_hdr;
	memset(h, 0, sizeof *h);
	E->iov[i].iov_base = txbuf;
	E->iov[i].iov_len = len;
	h->msg_iov = &E->iov[i];
	h->msg_iovlen = 1;
	if (gso_on && len > seg) {
		h->msg_control = E->cm[i];
		h->msg_controllen = sizeof E->cm[i];
		struct cmsghdr *c = CMSG_FIRSTHDR(h);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		uint16_t s = (uint16_t)seg;
		memcpy(CMSG_DATA(c), &s, sizeof s);
	}
}

/* Largest entry: whole segments, at most MAX_SEGS of them and MAX_UDP bytes (one datagram without GSO). */
static size_t entry_max(void)
{
	if (!gso_on)
		return seg;
	size_t n = MAX_UDP / seg;
	return (n > MAX_SEGS ? MAX_SEGS : n) * seg;
}

/* The entries of one message, repeated for as many whole messages as fit in a batch. */
static void plan(struct entries *E)
{
	size_t emax = entry_max();
	E->per_msg = (int)((size + emax - 1) / emax);
	E->msgs = E->per_msg >= BATCH ? 1 : BATCH / E->per_msg;
	E->n = 0;
	for (long k = 0; k < E->msgs && E->n < BATCH; k++)
		for (size_t off = 0; off < size && E->n < BATCH; off += emax)
			fill(E, E->n++, size - off < emax ? size - off : emax);
}

static long pkts_of(size_t len) { return (long)((len + seg - 1) / seg); }

/* Sends entries [from, to) of E (they may end mid-message for a large one); falls back from GSO. */
static int send_entries(int fd, struct entries *E, int from, int to, long *pkts, uint64_t *bytes)
{
	while (from < to) {
		int n = sendmmsg(fd, &E->m[from], (unsigned)(to - from), 0);
		if (n < 0) {
			if (errno == EINTR || errno == ENOBUFS)
				continue;
			if (gso_on && (errno == EIO || errno == EINVAL)) {
				fprintf(stderr, "raw_stream: UDP GSO refused (%s): one datagram per entry\n", strerror(errno));
				gso_on = 0;
				return -2; /* replan */
			}
			if (errno == ECONNREFUSED)
				continue; /* an ICMP port-unreachable from before the receiver bound */
			return -1;
		}
		for (int i = from; i < from + n; i++) {
			*pkts += pkts_of(E->iov[i].iov_len);
			*bytes += E->iov[i].iov_len;
		}
		from += n;
	}
	return 0;
}

/* One message of `size` bytes (ping-pong), in batches of at most BATCH entries. */
static int udp_send_msg(int fd, long *pkts)
{
	struct entries E;
	uint64_t b = 0;
	for (;;) {
		size_t emax = entry_max(), off = 0;
		int rc = 0;
		while (off < size && rc == 0) {
			E.n = 0;
			for (; off < size && E.n < BATCH; off += emax)
				fill(&E, E.n++, size - off < emax ? size - off : emax);
			rc = send_entries(fd, &E, 0, E.n, pkts, &b);
		}
		if (rc != -2)
			return rc;
		/* GSO turned off: send the whole message again (the receiver of a ping-pong sees
		 * the refused entries never arrive, so nothing is counted twice) */
	}
}

static void udp_send(const struct sockaddr_in *peer)
{
	int fd = udp_socket(-1);
	udp_connect(fd, peer);
	struct entries E;
	plan(&E);
	long pkts = 0, msgs = 0;
	uint64_t bytes = 0;
	double t0 = now_s(), c0 = cpu_s(), end = t0 + duration_ms / 1e3, t = t0;
	while (t < end) {
		int rc;
		if (E.per_msg >= BATCH) {
			/* a message longer than one batch: its entries in batch-sized pieces */
			size_t emax = entry_max(), off = 0;
			rc = 0;
			while (off < size && rc == 0) {
				int n = 0;
				for (; off < size && n < BATCH; off += emax)
					fill(&E, n++, size - off < emax ? size - off : emax);
				rc = send_entries(fd, &E, 0, n, &pkts, &bytes);
			}
			if (rc == 0)
				msgs++;
		} else {
			rc = send_entries(fd, &E, 0, E.n, &pkts, &bytes);
			if (rc == 0)
				msgs += E.msgs;
		}
		if (rc == -2) {
			plan(&E);
			continue;
		}
		if (rc < 0)
			die("sendmmsg");
		t = now_s();
	}
	printf("bytes=%llu msgs=%ld pkts=%ld secs=%.6f cpu_s=%.6f seg=%zu gso=%d\n",
	       (unsigned long long)bytes, msgs, pkts, t - t0, cpu_s() - c0, seg, gso_on);
}

/* ---------------- UDP receive side: GRO + recvmmsg ---------------- */

struct rxring {
	struct mmsghdr m[BATCH];
	struct iovec iov[BATCH];
	char cm[BATCH][CMSG_SPACE(sizeof(int))];
	char *buf;
};

static void rx_init(struct rxring *R)
{
	R->buf = malloc((size_t)BATCH * RX_BUF);
	if (!R->buf)
		die("malloc");
	for (int i = 0; i < BATCH; i++) {
		R->iov[i].iov_base = R->buf + (size_t)i * RX_BUF;
		R->iov[i].iov_len = RX_BUF;
	}
}

/* One recvmmsg; adds the bytes and packets (GRO segments) received; returns datagrams or -1 (errno). */
static int rx_batch(int fd, struct rxring *R, int flags, uint64_t *bytes, long *pkts)
{
	for (int i = 0; i < BATCH; i++) {
		struct msghdr *h = &R->m[i].msg_hdr;
		memset(h, 0, sizeof *h);
		h->msg_iov = &R->iov[i];
		h->msg_iovlen = 1;
		h->msg_control = R->cm[i];
		h->msg_controllen = sizeof R->cm[i];
	}
	int n = recvmmsg(fd, R->m, BATCH, flags, NULL);
	for (int i = 0; i < n; i++) {
		size_t len = R->m[i].msg_len, g = 0;
		struct msghdr *h = &R->m[i].msg_hdr;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
			if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
				int v;
				memcpy(&v, CMSG_DATA(c), sizeof v);
				g = (size_t)v;
			}
		}
		*bytes += len;
		*pkts += g ? (long)((len + g - 1) / g) : 1;
	}
	return n;
}

static void set_rcvtimeo(int fd, double s)
{
	struct timeval tv = {.tv_sec = (time_t)s, .tv_usec = (suseconds_t)((s - (time_t)s) * 1e6)};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* Stream receiver: blocks until the first datagram, then counts until 0.5 s pass without one. */
static void udp_recv(int port, int timeout_s)
{
	int fd = udp_socket(port);
	struct rxring R;
	rx_init(&R);
	uint64_t bytes = 0, first_bytes = 0;
	long pkts = 0, dgrams = 0;
	double t_first = 0, t_last = 0;
	set_rcvtimeo(fd, timeout_s);
	/* CPU from here: the receiver blocks until data comes, which costs no CPU */
	double c0 = cpu_s();
	for (;;) {
		uint64_t b0 = bytes;
		int n = rx_batch(fd, &R, MSG_WAITFORONE, &bytes, &pkts);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			die("recvmmsg");
		}
		t_last = now_s();
		dgrams += n;
		if (t_first == 0) {
			t_first = t_last;
			first_bytes = bytes - b0;
			set_rcvtimeo(fd, 0.5);
		}
	}
	if (t_first == 0) {
		fprintf(stderr, "raw_stream: nothing received in %d s\n", timeout_s);
		exit(1);
	}
	double secs = t_last - t_first;
	printf("bytes=%llu datagrams=%ld pkts=%ld secs=%.6f mb_per_sec=%.2f cpu_s=%.6f\n",
	       (unsigned long long)bytes, dgrams, pkts, secs,
	       secs > 0 ? (double)(bytes - first_bytes) / secs / 1e6 : 0.0, cpu_s() - c0);
}

/* Busy-polls until `size` bytes arrived (one ping-pong message); 5 s without progress is an error. */
static int udp_recv_msg(int fd, struct rxring *R, struct sockaddr_in *from)
{
	uint64_t got = 0;
	long pk = 0;
	double idle_since = now_s();
	while (got < size) {
		if (from) {
			/* the server learns the client's address from the first datagram */
			struct msghdr *h = &R->m[0].msg_hdr;
			memset(h, 0, sizeof *h);
			socklen_t fl = sizeof *from;
			ssize_t n = recvfrom(fd, R->buf, RX_BUF, MSG_DONTWAIT, (struct sockaddr *)from, &fl);
			if (n > 0) {
				got += (uint64_t)n;
				udp_connect(fd, from);
				from = NULL;
				idle_since = now_s();
				continue;
			}
		} else {
			uint64_t before = got;
			int n = rx_batch(fd, R, MSG_DONTWAIT, &got, &pk);
			if (n > 0 && got > before) {
				idle_since = now_s();
				continue;
			}
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				return -1;
		}
		if (now_s() - idle_since > 5) {
			fprintf(stderr, "raw_stream: ping-pong stalled (a datagram lost?) at %llu of %zu bytes\n",
				(unsigned long long)got, size);
			return -1;
		}
	}
	return 0;
}

static void udp_pingpong(const struct sockaddr_in *peer, int port)
{
	int fd = udp_socket(peer ? -1 : port);
	struct rxring R;
	rx_init(&R);
	long pk = 0;
	struct sockaddr_in from;
	if (peer)
		udp_connect(fd, peer);
	double t0 = 0;
	for (long i = 0; i < warmup + iters; i++) {
		if (i == warmup)
			t0 = now_s();
		if (peer) {
			if (udp_send_msg(fd, &pk) || udp_recv_msg(fd, &R, NULL))
				exit(1);
		} else {
			if (udp_recv_msg(fd, &R, i == 0 ? &from : NULL) || udp_send_msg(fd, &pk))
				exit(1);
		}
	}
	double us = (now_s() - t0) * 1e6;
	if (peer)
		printf("usec_per_xfer=%.2f mb_per_sec=%.2f seg=%zu gso=%d\n", us / iters / 2,
		       2.0 * (double)size * iters / us, seg, gso_on);
}

/* ---------------- TCP ---------------- */

static int tcp_listen_accept(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (s < 0)
		die("socket");
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 1) != 0)
		die("bind/listen");
	int fd = accept(s, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(s);
	return fd;
}

static int tcp_connect(const struct sockaddr_in *peer)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	/* the server may still be starting: retry for 5 s */
	for (int i = 0; connect(fd, (const struct sockaddr *)peer, sizeof *peer) != 0; i++) {
		if (i >= 100 || (errno != ECONNREFUSED && errno != EINTR))
			die("connect");
		close(fd);
		usleep(50000);
		fd = socket(AF_INET, SOCK_STREAM, 0);
	}
	return fd;
}

static void tcp_send(const struct sockaddr_in *peer)
{
	int fd = tcp_connect(peer);
	uint64_t bytes = 0;
	long msgs = 0;
	double t0 = now_s(), c0 = cpu_s(), end = t0 + duration_ms / 1e3, t = t0;
	while (t < end) {
		size_t off = 0;
		while (off < size) {
			ssize_t n = send(fd, txbuf + off, size - off, 0);
			if (n < 0 && errno != EINTR)
				die("send");
			if (n > 0)
				off += (size_t)n;
		}
		bytes += size;
		msgs++;
		t = now_s();
	}
	shutdown(fd, SHUT_WR);
	char c;
	while (recv(fd, &c, 1, 0) > 0) /* until the receiver closes: all bytes arrived */
		;
	printf("bytes=%llu msgs=%ld pkts=0 secs=%.6f cpu_s=%.6f seg=0 gso=0\n", (unsigned long long)bytes,
	       msgs, t - t0, cpu_s() - c0);
}

static void tcp_recv(int port)
{
	int fd = tcp_listen_accept(port);
	static char buf[1 << 18];
	uint64_t bytes = 0, first_bytes = 0;
	long calls = 0;
	double t_first = 0, t_last = 0, c0 = cpu_s();
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("recv");
		if (n == 0)
			break;
		t_last = now_s();
		if (t_first == 0) {
			t_first = t_last;
			first_bytes = (uint64_t)n;
		}
		bytes += (uint64_t)n;
		calls++;
	}
	double secs = t_last - t_first;
	printf("bytes=%llu datagrams=%ld pkts=0 secs=%.6f mb_per_sec=%.2f cpu_s=%.6f\n",
	       (unsigned long long)bytes, calls, secs,
	       secs > 0 ? (double)(bytes - first_bytes) / secs / 1e6 : 0.0, cpu_s() - c0);
	close(fd);
}

/* Busy-polls until len bytes arrived; 5 s without progress is an error. */
static int tcp_recv_all(int fd, char *buf, size_t len)
{
	size_t got = 0;
	double idle_since = now_s();
	while (got < len) {
		ssize_t n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		if (n > 0) {
			got += (size_t)n;
			idle_since = now_s();
		} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			return -1;
		} else if (now_s() - idle_since > 5) {
			fprintf(stderr, "raw_stream: tcp ping-pong stalled\n");
			return -1;
		}
	}
	return 0;
}

static int tcp_send_all(int fd, const char *buf, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = send(fd, buf + off, len - off, 0);
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -1;
		if (n > 0)
			off += (size_t)n;
	}
	return 0;
}

static void tcp_pingpong(const struct sockaddr_in *peer, int port)
{
	int fd = peer ? tcp_connect(peer) : tcp_listen_accept(port), one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	char *rb = malloc(size);
	if (!rb)
		die("malloc");
	double t0 = 0;
	for (long i = 0; i < warmup + iters; i++) {
		if (i == warmup)
			t0 = now_s();
		int bad = peer ? tcp_send_all(fd, txbuf, size) || tcp_recv_all(fd, rb, size)
			       : tcp_recv_all(fd, rb, size) || tcp_send_all(fd, txbuf, size);
		if (bad)
			exit(1);
	}
	double us = (now_s() - t0) * 1e6;
	if (peer)
		printf("usec_per_xfer=%.2f mb_per_sec=%.2f seg=0\n", us / iters / 2, 2.0 * (double)size * iters / us);
	close(fd);
}

static void usage(void)
{
	fprintf(stderr, "usage: raw_stream udp|tcp recv|pong PORT [opts]\n"
			"       raw_stream udp|tcp send|ping ADDR PORT [opts]\n"
			"opts: -s SIZE -d MS -n ITERS -x WARMUP -g SEG -t TIMEOUT_S\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 4)
		usage();
	is_udp = !strcmp(argv[1], "udp");
	if (!is_udp && strcmp(argv[1], "tcp"))
		usage();
	const char *role = argv[2];
	int client = !strcmp(role, "send") || !strcmp(role, "ping");
	if (!client && strcmp(role, "recv") && strcmp(role, "pong"))
		usage();
	if (client && argc < 5)
		usage();
	struct sockaddr_in peer;
	int port = 0, first_opt = client ? 5 : 4;
	if (client)
		parse_addr(&peer, argv[3], argv[4]);
	else
		port = atoi(argv[3]);
	int timeout_s = 60, opt;
	optind = first_opt;
	while ((opt = getopt(argc, argv, "s:d:n:x:g:t:")) != -1) {
		switch (opt) {
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'd': duration_ms = atol(optarg); break;
		case 'n': iters = atol(optarg); break;
		case 'x': warmup = atol(optarg); break;
		case 'g': seg = strtoull(optarg, NULL, 0); break;
		case 't': timeout_s = atoi(optarg); break;
		default: usage();
		}
	}
	if (size < 1 || size > (256u << 20) || duration_ms < 1 || iters < 1 || warmup < 0 || timeout_s < 1 ||
	    (seg && (seg < 64 || seg > 65000))) {
		fprintf(stderr, "raw_stream: size 1..256 MiB, -d/-n/-t >= 1, -g 64..65000\n");
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm((unsigned)timeout_s);
	signal(SIGPIPE, SIG_IGN);
	txbuf = malloc(size > MAX_UDP ? size : MAX_UDP);
	if (!txbuf)
		die("malloc");
	memset(txbuf, 0x5a, size > MAX_UDP ? size : MAX_UDP);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(role, "recv"))
		is_udp ? udp_recv(port, timeout_s) : tcp_recv(port);
	else if (!strcmp(role, "send"))
		is_udp ? udp_send(&peer) : tcp_send(&peer);
	else if (!strcmp(role, "pong"))
		is_udp ? udp_pingpong(NULL, port) : tcp_pingpong(NULL, port);
	else
		is_udp ? udp_pingpong(&peer, 0) : tcp_pingpong(&peer, 0);
	return 0;
}
