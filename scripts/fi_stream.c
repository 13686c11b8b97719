/* fi_stream.c: one-way stream of tagged RDM messages over a libfabric provider (scripts/hostbench.sh):
 * bandwidth, and the CPU time of sender and receiver over the timed phase.
 *
 * Usage: fi_stream recv -p PROV -s SIZE [-w WINDOW] [-i IDLE_US] [-t TIMEOUT_S] [-T TICK_MS]
 *          prints "name=HEX" (its endpoint address) as its first line, then receives until the
 *          sender's end message (which carries the number of data messages sent) and all data;
 *          with -T, also a line "tick t=SECONDS bytes=N msgs=N" on stderr every TICK_MS
 *          milliseconds from the first data message on (t from then; bytes and msgs so far), for
 *          a rate over time (scripts/railbench.sh);
 *        fi_stream send -p PROV -a HEX -s SIZE -d MS [-w WINDOW] [-i IDLE_US] [-t TIMEOUT_S]
 *          sends SIZE-byte messages with WINDOW outstanding for MS milliseconds, then an end message.
 * The sender first sends one warm-up message (connection set-up is not timed). The endpoint binds
 * where the provider's own variables say (FI_SPRAY_IFACE, FI_TCP_IFACE). When a completion queue
 * read finds nothing, the process sleeps IDLE_US microseconds (default 20; 0 = busy-poll), so
 * the CPU time counts work rather than waiting.
 *
 * Output, one line of key=value:
 *   send: bytes= msgs= secs= cpu_s=              (from the first data send to the end message's completion)
 *   recv: bytes= msgs= secs= mb_per_sec= cpu_s=  (secs: first to last data completion; the rate leaves
 *         out the first message; cpu_s: user+system time of the whole process, all threads, from
 *         the first data completion to the end message)
 * Exit status: 0, 1 on a libfabric error, 2 on usage, 3 on timeout.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

enum { MAX_WINDOW = 256 };
#define TAG_DATA 1ULL
#define TAG_WARM 2ULL
#define TAG_END 3ULL

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static long idle_us = 20;
static long tick_ms = 0;

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

static void fail(const char *what, long rc)
{
	fprintf(stderr, "fi_stream: %s: %s (%ld)\n", what, fi_strerror((int)-rc), rc);
	exit(1);
}

#define CHECK(call)                                                                                  \
	do {                                                                                         \
		long rc_ = (long)(call);                                                             \
		if (rc_ != 0)                                                                        \
			fail(#call, rc_);                                                            \
	} while (0)

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "fi_stream: timeout (-t)\n";
	ssize_t rc = write(2, msg, sizeof msg - 1);
	(void)rc;
	_exit(3);
}

static void open_all(const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		fail("fi_allocinfo", -FI_ENOMEM);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = 0;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup(prov);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_cq_attr cqa = {.size = 4096, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 4};
	CHECK(fi_cq_open(domain, &cqa, &cq, NULL));
	CHECK(fi_av_open(domain, &ava, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_enable(ep));
}

static void close_all(void)
{
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
}

static void idle(void)
{
	if (idle_us > 0) {
		struct timespec t = {.tv_sec = 0, .tv_nsec = idle_us * 1000};
		nanosleep(&t, NULL);
	}
}

/* One completion queue read: the entries found (0 if none); an error completion is fatal. */
static int poll_cq(struct fi_cq_tagged_entry *e, size_t n)
{
	ssize_t got = fi_cq_read(cq, e, n);
	if (got > 0)
		return (int)got;
	if (got == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof err);
		fi_cq_readerr(cq, &err, 0);
		fail("error completion", -(long)err.err);
	}
	if (got != -FI_EAGAIN)
		fail("fi_cq_read", (long)got);
	return 0;
}

/* A context per operation: its slot, so a completion tells which buffer it used. */
struct op {
	struct fi_context2 ctx; /* first: the provider hands &ctx back as op_context */
	int slot;
};

static struct op ops[MAX_WINDOW + 2];

static void run_recv(const char *prov, size_t size, int window)
{
	open_all(prov);
	char name[256], hex[520];
	size_t len = sizeof name;
	CHECK(fi_getname(&ep->fid, name, &len));
	for (size_t i = 0; i < len; i++)
		sprintf(hex + 2 * i, "%02x", (unsigned char)name[i]);
	printf("name=%s\n", hex);
	fflush(stdout);
	char *buf = malloc((size_t)window * size), small[2][64];
	if (!buf)
		fail("malloc", -FI_ENOMEM);
	for (int s = 0; s < window; s++) {
		ops[s].slot = s;
		CHECK(fi_trecv(ep, buf + (size_t)s * size, size, NULL, FI_ADDR_UNSPEC, TAG_DATA, 0, &ops[s].ctx));
	}
	ops[window].slot = window;
	ops[window + 1].slot = window + 1;
	CHECK(fi_trecv(ep, small[0], sizeof small[0], NULL, FI_ADDR_UNSPEC, TAG_WARM, 0, &ops[window].ctx));
	CHECK(fi_trecv(ep, small[1], sizeof small[1], NULL, FI_ADDR_UNSPEC, TAG_END, 0, &ops[window + 1].ctx));
	uint64_t bytes = 0, first_bytes = 0;
	long msgs = 0;
	double t_first = 0, t_last = 0, c0 = 0;
	int end_seen = 0;
	int64_t expect = 0;
	struct fi_cq_tagged_entry e[64];
	double t_tick = 0;
	while (!end_seen || msgs < expect) {
		int n = poll_cq(e, 64);
		if (tick_ms > 0 && t_first > 0) {
			double t = now_s();
			if (t - t_tick >= tick_ms / 1e3) {
				fprintf(stderr, "tick t=%.6f bytes=%llu msgs=%ld\n", t - t_first,
					(unsigned long long)bytes, msgs);
				t_tick = t;
			}
		}
		if (n == 0)
			idle();
		for (int i = 0; i < n; i++) {
			struct op *op = e[i].op_context;
			if (op->slot == window + 1) {
				/* the end message carries how many data messages were sent: those still
				 * on their way (unexpected, behind the posted receives) are waited for */
				memcpy(&expect, small[1], sizeof expect);
				end_seen = 1;
				continue;
			}
			if (op->slot == window)
				continue; /* warm-up */
			if (t_first == 0) {
				c0 = cpu_s();
				t_first = now_s();
				first_bytes = e[i].len;
			}
			t_last = now_s();
			bytes += e[i].len;
			msgs++;
			CHECK(fi_trecv(ep, buf + (size_t)op->slot * size, size, NULL, FI_ADDR_UNSPEC, TAG_DATA, 0,
				       &op->ctx));
		}
	}
	double cpu = t_first > 0 ? cpu_s() - c0 : 0, secs = t_last - t_first;
	printf("bytes=%llu msgs=%ld secs=%.6f mb_per_sec=%.2f cpu_s=%.6f\n", (unsigned long long)bytes, msgs,
	       secs, secs > 0 ? (double)(bytes - first_bytes) / secs / 1e6 : 0.0, cpu);
	close_all();
	free(buf);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Sends one 8-byte message (value v) with tag and waits for its completion (data sends may
 * complete meanwhile). */
static void send_small(fi_addr_t peer, uint64_t tag, int slot, int *outstanding, int64_t v)
{
	static char msg[8];
	memcpy(msg, &v, sizeof msg);
	ops[slot].slot = slot;
	ssize_t rc;
	while ((rc = fi_tsend(ep, msg, sizeof msg, NULL, peer, tag, &ops[slot].ctx)) == -FI_EAGAIN)
		poll_cq(NULL, 0);
	if (rc)
		fail("fi_tsend", (long)rc);
	struct fi_cq_tagged_entry e[64];
	for (int got = 0; !got;) {
		int n = poll_cq(e, 64);
		if (n == 0)
			idle();
		for (int i = 0; i < n; i++) {
			if (((struct op *)e[i].op_context)->slot == slot)
				got = 1;
			else
				(*outstanding)--;
		}
	}
}

static void run_send(const char *prov, const char *hex, size_t size, int window, long ms)
{
	open_all(prov);
	char name[256];
	size_t len = strlen(hex) / 2;
	if (len == 0 || len > sizeof name || strlen(hex) % 2) {
		fprintf(stderr, "fi_stream: bad address\n");
		exit(2);
	}
	for (size_t i = 0; i < len; i++) {
		int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
		if (a < 0 || b < 0) {
			fprintf(stderr, "fi_stream: bad address\n");
			exit(2);
		}
		name[i] = (char)(a << 4 | b);
	}
	fi_addr_t peer;
	if (fi_av_insert(av, name, 1, &peer, 0, NULL) != 1)
		fail("fi_av_insert", -FI_EINVAL);
	char *buf = malloc(size);
	if (!buf)
		fail("malloc", -FI_ENOMEM);
	memset(buf, 0x5a, size);
	int outstanding = 0;
	send_small(peer, TAG_WARM, window, &outstanding, 0);
	/* free operation slots (a stack): completions may come in any order */
	int free_slots[MAX_WINDOW], nfree = window;
	for (int s = 0; s < window; s++)
		free_slots[s] = window - 1 - s;
	uint64_t bytes = 0;
	long msgs = 0;
	double t0 = now_s(), c0 = cpu_s(), end = t0 + ms / 1e3;
	struct fi_cq_tagged_entry e[64];
	for (double t = t0; t < end || outstanding > 0; t = now_s()) {
		int posted = 0;
		while (t < end && nfree > 0) {
			int slot = free_slots[nfree - 1];
			ops[slot].slot = slot;
			ssize_t rc = fi_tsend(ep, buf, size, NULL, peer, TAG_DATA, &ops[slot].ctx);
			if (rc == -FI_EAGAIN)
				break;
			if (rc)
				fail("fi_tsend", (long)rc);
			nfree--;
			outstanding++;
			posted++;
			bytes += size;
			msgs++;
		}
		int n = poll_cq(e, 64);
		for (int i = 0; i < n; i++)
			free_slots[nfree++] = ((struct op *)e[i].op_context)->slot;
		outstanding -= n;
		if (n == 0 && posted == 0)
			idle();
	}
	send_small(peer, TAG_END, window + 1, &outstanding, msgs);
	double secs = now_s() - t0, cpu = cpu_s() - c0;
	printf("bytes=%llu msgs=%ld secs=%.6f cpu_s=%.6f\n", (unsigned long long)bytes, msgs, secs, cpu);
	close_all();
	free(buf);
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv"))) {
	usage:
		fprintf(stderr, "usage: fi_stream recv -p PROV -s SIZE [-w WINDOW] [-i IDLE_US] [-t TIMEOUT_S] [-T TICK_MS]\n"
				"       fi_stream send -p PROV -a HEX -s SIZE -d MS [-w WINDOW] [-i IDLE_US] [-t TIMEOUT_S]\n");
		return 2;
	}
	int sender = !strcmp(argv[1], "send"), opt, window = 16, timeout_s = 60;
	const char *prov = NULL, *addr = NULL;
	size_t size = 0;
	long ms = 1000;
	optind = 2;
	while ((opt = getopt(argc, argv, "p:a:s:d:w:i:t:T:")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'a': addr = optarg; break;
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'd': ms = atol(optarg); break;
		case 'w': window = atoi(optarg); break;
		case 'i': idle_us = atol(optarg); break;
		case 't': timeout_s = atoi(optarg); break;
		case 'T': tick_ms = atol(optarg); break;
		default: goto usage;
		}
	}
	if (!prov || size < 1 || size > (256u << 20) || window < 1 || window > MAX_WINDOW || ms < 1 ||
	    idle_us < 0 || idle_us > 100000 || timeout_s < 1 || (sender && !addr) || tick_ms < 0 || tick_ms > 60000)
		goto usage;
	signal(SIGALRM, on_alarm);
	alarm((unsigned)timeout_s);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (sender)
		run_send(prov, addr, size, window, ms);
	else
		run_recv(prov, size, window);
	return 0;
}
