/* ktcp.c: the kernel TCP baseline of sprx-traffic: one TCP connection per flow, non-blocking. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "traffic.h"

/* Each connection starts with a 4-byte little-endian flow id; then only payload. */

/* ---------------- receiver ---------------- */

struct rconn {
	int fd;
	int flow; /* -1 until the id arrived */
	unsigned char hdr[4];
	int hdr_len;
};

static int lfd = -1, ep = -1;
static struct rconn rconns[MAX_FLOWS];
static int n_rconns, n_identified;
static char scratch[1 << 18];

static int k_rx_open(const struct opts *o, char *name_hex, size_t cap)
{
	lfd = ctrl_listen(o->bind_ip, o->ctrl_port + 1);
	ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0xffffffffu};
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	snprintf(name_hex, cap, "-");
	return 0;
}

static int k_rx_add_peer(const char *hex)
{
	(void)hex;
	return 0;
}

static int k_rx_ready_flows(void) { return n_identified; }

static void k_rx_start(const struct opts *o) { (void)o; }

static int k_rx_progress(const struct opts *o, struct rx_stats *st)
{
	struct epoll_event evs[64];
	int n = epoll_wait(ep, evs, 64, 0), work = 0;
	for (int i = 0; i < n; i++) {
		uint32_t id = evs[i].data.u32;
		if (id == 0xffffffffu) {
			int fd;
			while ((fd = ctrl_accept(lfd)) >= 0) {
				if (n_rconns == MAX_FLOWS) {
					close(fd);
					continue;
				}
				rconns[n_rconns] = (struct rconn){.fd = fd, .flow = -1};
				struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)n_rconns};
				epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
				n_rconns++;
				work++;
			}
			continue;
		}
		struct rconn *c = &rconns[id];
		/* Bounded reads per event so one flow cannot starve the others. */
		for (int k = 0; k < 8; k++) {
			ssize_t r;
			if (c->flow < 0)
				r = recv(c->fd, c->hdr + c->hdr_len, (size_t)(4 - c->hdr_len), 0);
			else
				r = recv(c->fd, scratch, sizeof scratch, 0);
			if (r <= 0) {
				if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
					epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
					close(c->fd);
				}
				break;
			}
			work++;
			if (c->flow < 0) {
				c->hdr_len += (int)r;
				if (c->hdr_len == 4) {
					uint32_t f = (uint32_t)c->hdr[0] | (uint32_t)c->hdr[1] << 8 |
						     (uint32_t)c->hdr[2] << 16 | (uint32_t)c->hdr[3] << 24;
					if (f >= (uint32_t)o->flows) {
						warnx_("kernel tcp: bad flow id %u", f);
						st->errors++;
						epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
						close(c->fd);
						break;
					}
					c->flow = (int)f;
					n_identified++;
				}
				continue;
			}
			uint64_t t = now_ns();
			if (!st->first_ns[c->flow])
				st->first_ns[c->flow] = t;
			st->bytes[c->flow] += (uint64_t)r;
			if (o->mode == MODE_BURST && st->bytes[c->flow] >= o->bytes && !st->done_ns[c->flow])
				st->done_ns[c->flow] = t;
		}
	}
	return work;
}

/* ---------------- sender ---------------- */

static int tx_n;
static int tx_fd[MAX_PROC_FLOWS];
static uint64_t tx_sent[MAX_PROC_FLOWS];
static char *tx_buf;

static int k_tx_open(const struct opts *o, char names[][160])
{
	tx_n = o->flows;
	tx_buf = malloc(o->msg);
	if (!tx_buf)
		die("out of memory");
	memset(tx_buf, 0x5a, o->msg);
	for (int f = 0; f < tx_n; f++)
		snprintf(names[f], 160, "-");
	return 0;
}

static int k_tx_connect(const char *server_hex)
{
	(void)server_hex;
	const struct opts *o = g_opts;
	for (int f = 0; f < tx_n; f++) {
		int fd = ctrl_connect_from(o->server_ip, o->ctrl_port + 1, o->sport ? o->sport + f : 0, 10000);
		/* The source address follows the route (a host namespace has one interface). */
		uint32_t id = (uint32_t)(o->flow_base + f);
		unsigned char h[4] = {id & 0xff, (id >> 8) & 0xff, (id >> 16) & 0xff, id >> 24};
		int off = 0;
		uint64_t end = now_ns() + 5000000000ULL;
		while (off < 4) {
			ssize_t w = send(fd, h + off, (size_t)(4 - off), MSG_NOSIGNAL);
			if (w > 0)
				off += (int)w;
			else if (now_ns() > end)
				die("kernel tcp: header send failed");
		}
		tx_fd[f] = fd;
	}
	return 0;
}

static int k_tx_warm_done(void) { return 1; }

static int k_tx_progress(int sending, uint64_t deadline_ns)
{
	const struct opts *o = g_opts;
	int work = 0;
	if (!sending)
		return 0;
	uint64_t now = now_ns();
	for (int f = 0; f < tx_n; f++) {
		if (tx_fd[f] < 0)
			continue;
		/* A few writes per pass and flow, in message-sized chunks. */
		for (int k = 0; k < 4; k++) {
			uint64_t len = o->msg;
			if (o->mode == MODE_BURST) {
				if (tx_sent[f] >= o->bytes)
					break;
				if (o->bytes - tx_sent[f] < len)
					len = o->bytes - tx_sent[f];
			} else if (now >= deadline_ns) {
				break;
			}
			ssize_t w = send(tx_fd[f], tx_buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w <= 0) {
				if (w < 0 && errno != EAGAIN && errno != EINTR) {
					warnx_("kernel tcp send: %s", strerror(errno));
					close(tx_fd[f]);
					tx_fd[f] = -1;
				}
				break;
			}
			tx_sent[f] += (uint64_t)w;
			work++;
		}
	}
	return work;
}

static int k_tx_all_sent(void)
{
	for (int f = 0; f < tx_n; f++)
		if (tx_fd[f] >= 0 && tx_sent[f] < g_opts->bytes)
			return 0;
	return 1;
}

static void k_close(void)
{
	for (int f = 0; f < tx_n; f++)
		if (tx_fd[f] >= 0)
			close(tx_fd[f]);
	for (int i = 0; i < n_rconns; i++)
		close(rconns[i].fd);
}

struct transport ktcp_transport = {
	.rx_open = k_rx_open,
	.rx_add_peer = k_rx_add_peer,
	.rx_ready_flows = k_rx_ready_flows,
	.rx_start = k_rx_start,
	.rx_progress = k_rx_progress,
	.tx_open = k_tx_open,
	.tx_connect = k_tx_connect,
	.tx_warm_done = k_tx_warm_done,
	.tx_progress = k_tx_progress,
	.tx_all_sent = k_tx_all_sent,
	.close = k_close,
};
