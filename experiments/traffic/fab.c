/* fab.c: the libfabric transport of sprx-traffic: FI_EP_RDM, tagged messages, tag = flow id. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "traffic.h"

/* One operation's context: the provider hands it back in the completion. */
struct op {
	struct fi_context2 ctx; /* first: libfabric sees &op->ctx == op */
	int flow;               /* index in this process */
	int warm;
};

/* An endpoint with its own CQ and AV (one per flow on the sender, one on the receiver). */
struct fep {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t peer;
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static char *buf;         /* send: one shared buffer; receive: a pool */
static size_t pool_bufs;  /* receive pool size in buffers */
static size_t pool_next;

#define CHECK(call)                                                                 \
	do {                                                                            \
		int rc_ = (int)(call);                                                  \
		if (rc_ != 0)                                                           \
			die("%s: %s (%d)", #call, fi_strerror(-rc_), rc_);              \
	} while (0)

static void open_common(const struct opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		die("fi_allocinfo");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = 0;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup(o->prov);
	/* Bind to the namespace's address; a provider that ignores node still works. */
	int rc = fi_getinfo(FI_VERSION(1, 17), o->bind_ip, NULL, FI_SOURCE, hints, &info);
	if (rc != 0) {
		warnx_("fi_getinfo(%s, node %s): %s; retrying without node", o->prov, o->bind_ip,
		       fi_strerror(-rc));
		rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	}
	if (rc != 0)
		die("fi_getinfo(%s): %s", o->prov, fi_strerror(-rc));
	fi_freeinfo(hints);
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
}

static void open_ep(struct fep *f)
{
	struct fi_cq_attr cqa = {.size = 4096, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr ava = {.type = info->domain_attr->av_type == FI_AV_UNSPEC
					      ? FI_AV_TABLE
					      : info->domain_attr->av_type,
				 .count = 64};
	CHECK(fi_cq_open(domain, &cqa, &f->cq, NULL));
	CHECK(fi_av_open(domain, &ava, &f->av, NULL));
	CHECK(fi_endpoint(domain, info, &f->ep, NULL));
	CHECK(fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(f->ep, &f->av->fid, 0));
	CHECK(fi_enable(f->ep));
}

static void name_of(struct fep *f, char *hex, size_t cap)
{
	char name[256];
	size_t len = sizeof name;
	CHECK(fi_getname(&f->ep->fid, name, &len));
	if (2 * len + 1 > cap)
		die("address too long (%zu bytes)", len);
	hex_encode(name, len, hex);
}

static int insert(struct fep *f, const char *hex, fi_addr_t *out)
{
	char addr[256];
	size_t n = hex_decode(hex, addr, sizeof addr);
	int rc = fi_av_insert(f->av, addr, 1, out, 0, NULL);
	if (rc != 1) {
		warnx_("fi_av_insert: %d", rc);
		return -1;
	}
	(void)n;
	return 0;
}

/* Reads one batch of completions; calls on_comp for each; returns how many. */
static int drain(struct fep *f, struct rx_stats *st, void (*on_comp)(struct fi_cq_tagged_entry *))
{
	struct fi_cq_tagged_entry e[64];
	ssize_t n = fi_cq_read(f->cq, e, 64);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			on_comp(&e[i]);
		return (int)n;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof err);
		if (fi_cq_readerr(f->cq, &err, 0) > 0) {
			warnx_("completion error: %s (prov %d)", fi_strerror(err.err), err.prov_errno);
			if (st)
				st->errors++;
			struct fi_cq_tagged_entry fake = {.op_context = err.op_context, .len = 0,
							  .flags = err.flags, .tag = err.tag};
			on_comp(&fake);
		}
		return 1;
	}
	if (n < 0 && n != -FI_EAGAIN)
		warnx_("fi_cq_read: %s", fi_strerror((int)-n));
	return 0;
}

/* ---------------- receiver ---------------- */

static struct fep rx;
static struct op *rx_ops;      /* [flows * (window + 1)]: data slots then the warm-up slot */
static uint64_t *rx_posted;    /* data messages posted per flow */
static uint64_t rx_need_msgs;  /* burst: messages per flow (0 = unbounded) */
static int rx_warm;            /* warm-ups received */
static struct rx_stats *rx_st;
static const struct opts *rx_o;

static char *pool_buf(void)
{
	char *p = buf + (pool_next % pool_bufs) * rx_o->msg;
	pool_next++;
	return p;
}

static int post_recv(int flow, int slot)
{
	struct op *op = &rx_ops[flow * (rx_o->window + 1) + slot];
	op->flow = flow;
	op->warm = 0;
	for (int tries = 0; tries < 100000; tries++) {
		ssize_t rc = fi_trecv(rx.ep, pool_buf(), rx_o->msg, NULL, FI_ADDR_UNSPEC,
				      (uint64_t)flow, 0, &op->ctx);
		if (rc == 0) {
			rx_posted[flow]++;
			return 0;
		}
		if (rc != -FI_EAGAIN)
			die("fi_trecv: %s", fi_strerror((int)-rc));
		fi_cq_read(rx.cq, NULL, 0); /* progress */
	}
	die("fi_trecv: EAGAIN for too long");
}

static void rx_comp(struct fi_cq_tagged_entry *e)
{
	struct op *op = e->op_context;
	if (!op)
		return;
	if (op->warm) {
		rx_warm++;
		return;
	}
	int f = op->flow;
	uint64_t t = now_ns();
	if (!rx_st->first_ns[f])
		rx_st->first_ns[f] = t;
	rx_st->bytes[f] += e->len;
	if (rx_need_msgs && rx_st->bytes[f] >= rx_o->bytes && !rx_st->done_ns[f])
		rx_st->done_ns[f] = t;
	if (!rx_need_msgs || rx_posted[f] < rx_need_msgs)
		post_recv(f, (int)(op - &rx_ops[f * (rx_o->window + 1)]));
}

static int fab_rx_open(const struct opts *o, char *name_hex, size_t cap)
{
	rx_o = o;
	open_common(o);
	open_ep(&rx);
	name_of(&rx, name_hex, cap);
	rx_ops = calloc((size_t)o->flows * (size_t)(o->window + 1), sizeof *rx_ops);
	rx_posted = calloc((size_t)o->flows, sizeof *rx_posted);
	/* Receive data is not checked: flows share a bounded pool of buffers. */
	pool_bufs = (size_t)o->flows * (size_t)o->window;
	size_t cap_bufs = (256u << 20) / o->msg;
	if (pool_bufs > cap_bufs)
		pool_bufs = cap_bufs < 4 ? 4 : cap_bufs;
	buf = aligned_alloc(4096, ((pool_bufs * o->msg + 4095) / 4096) * 4096);
	if (!rx_ops || !rx_posted || !buf)
		die("out of memory");
	static char warm_buf[MAX_FLOWS][64];
	for (int f = 0; f < o->flows; f++) {
		struct op *op = &rx_ops[f * (o->window + 1) + o->window];
		op->flow = f;
		op->warm = 1;
		ssize_t rc;
		while ((rc = fi_trecv(rx.ep, warm_buf[f], sizeof warm_buf[f], NULL, FI_ADDR_UNSPEC,
				      WARM_BIT | (uint64_t)f, 0, &op->ctx)) == -FI_EAGAIN)
			fi_cq_read(rx.cq, NULL, 0);
		if (rc)
			die("fi_trecv warm: %s", fi_strerror((int)-rc));
	}
	return 0;
}

static int fab_rx_add_peer(const char *hex)
{
	fi_addr_t a;
	return insert(&rx, hex, &a);
}

static int fab_rx_ready_flows(void) { return rx_warm; }

static void fab_rx_start(const struct opts *o)
{
	rx_need_msgs = o->mode == MODE_BURST ? (o->bytes + o->msg - 1) / o->msg : 0;
	for (int f = 0; f < o->flows; f++)
		for (int s = 0; s < o->window && (!rx_need_msgs || (uint64_t)s < rx_need_msgs); s++)
			post_recv(f, s);
}

static int fab_rx_progress(const struct opts *o, struct rx_stats *st)
{
	(void)o;
	rx_st = st;
	int n = 0, k;
	while ((k = drain(&rx, st, rx_comp)) > 0 && n < 4096)
		n += k;
	return n;
}

/* ---------------- sender ---------------- */

static int tx_n;
static struct fep tx[MAX_PROC_FLOWS];
static struct op tx_ops[MAX_PROC_FLOWS][65];
static int tx_free[MAX_PROC_FLOWS][65]; /* stack of free op slots */
static int tx_nfree[MAX_PROC_FLOWS];
static uint64_t tx_posted_bytes[MAX_PROC_FLOWS];
static int tx_warm_left;

static void tx_comp(struct fi_cq_tagged_entry *e)
{
	struct op *op = e->op_context;
	if (!op)
		return;
	if (op->warm) {
		tx_warm_left--;
		return;
	}
	tx_free[op->flow][tx_nfree[op->flow]++] = (int)(op - tx_ops[op->flow]);
}

static int fab_tx_open(const struct opts *o, char names[][160])
{
	if (o->window > 64)
		die("--window at most 64");
	tx_n = o->flows;
	open_common(o);
	buf = aligned_alloc(4096, ((o->msg + 4095) / 4096) * 4096);
	if (!buf)
		die("out of memory");
	memset(buf, 0x5a, o->msg);
	for (int f = 0; f < tx_n; f++) {
		open_ep(&tx[f]);
		name_of(&tx[f], names[f], 160);
	}
	return 0;
}

static int fab_tx_connect(const char *server_hex)
{
	static char warm[8];
	tx_warm_left = tx_n;
	for (int f = 0; f < tx_n; f++) {
		if (insert(&tx[f], server_hex, &tx[f].peer))
			return -1;
		struct op *op = &tx_ops[f][64];
		op->flow = f;
		op->warm = 1;
		ssize_t rc;
		uint64_t tag = WARM_BIT | (uint64_t)(g_opts->flow_base + f);
		while ((rc = fi_tsend(tx[f].ep, warm, sizeof warm, NULL, tx[f].peer, tag, &op->ctx)) ==
		       -FI_EAGAIN)
			fi_cq_read(tx[f].cq, NULL, 0);
		if (rc)
			die("fi_tsend warm: %s", fi_strerror((int)-rc));
	}
	for (int f = 0; f < tx_n; f++) {
		tx_nfree[f] = 0;
		for (int s = 0; s < 64; s++) {
			tx_ops[f][s].flow = f;
			tx_ops[f][s].warm = 0;
		}
		for (int s = 0; s < g_opts->window; s++)
			tx_free[f][tx_nfree[f]++] = s;
	}
	return 0;
}

static int fab_tx_warm_done(void) { return tx_warm_left <= 0; }

static int fab_tx_progress(int sending, uint64_t deadline_ns)
{
	const struct opts *o = g_opts;
	int work = 0;
	for (int f = 0; f < tx_n; f++) {
		work += drain(&tx[f], NULL, tx_comp);
		while (sending && tx_nfree[f] > 0) {
			uint64_t len = o->msg;
			if (o->mode == MODE_BURST) {
				if (tx_posted_bytes[f] >= o->bytes)
					break;
				if (o->bytes - tx_posted_bytes[f] < len)
					len = o->bytes - tx_posted_bytes[f];
			} else if (now_ns() >= deadline_ns) {
				break;
			}
			int s = tx_free[f][tx_nfree[f] - 1];
			ssize_t rc = fi_tsend(tx[f].ep, buf, len, NULL, tx[f].peer,
					      (uint64_t)(o->flow_base + f), &tx_ops[f][s].ctx);
			if (rc == -FI_EAGAIN)
				break;
			if (rc)
				die("fi_tsend: %s", fi_strerror((int)-rc));
			tx_nfree[f]--;
			tx_posted_bytes[f] += len;
			work++;
		}
	}
	return work;
}

static int fab_tx_all_sent(void)
{
	for (int f = 0; f < tx_n; f++)
		if (tx_nfree[f] < g_opts->window || tx_posted_bytes[f] < g_opts->bytes)
			return 0;
	return 1;
}

static void fab_close(void)
{
	for (int f = 0; f < tx_n; f++) {
		fi_close(&tx[f].ep->fid);
		fi_close(&tx[f].av->fid);
		fi_close(&tx[f].cq->fid);
	}
	if (rx.ep) {
		fi_close(&rx.ep->fid);
		fi_close(&rx.av->fid);
		fi_close(&rx.cq->fid);
	}
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	if (info)
		fi_freeinfo(info);
}

struct transport fab_transport = {
	.rx_open = fab_rx_open,
	.rx_add_peer = fab_rx_add_peer,
	.rx_ready_flows = fab_rx_ready_flows,
	.rx_start = fab_rx_start,
	.rx_progress = fab_rx_progress,
	.tx_open = fab_tx_open,
	.tx_connect = fab_tx_connect,
	.tx_warm_done = fab_tx_warm_done,
	.tx_progress = fab_tx_progress,
	.tx_all_sent = fab_tx_all_sent,
	.close = fab_close,
};
