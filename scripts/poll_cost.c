/* poll_cost.c: what the calls on an MPI progress loop's path cost, per provider, in one process.
 *
 * Usage: poll_cost [ITERS]   (provider from FI_PROVIDER as usual)
 * Two RDM endpoints of one domain on loopback; prints one line
 *   prov=P idle_cq_read_ns=N trecv_ns=N tinject_ns=N tsend_ns=N recv_cq_ns=N
 * with medians over ITERS rounds: an fi_cq_read on an empty CQ (the idle
 * poll), posting an 8-byte tagged receive, an 8-byte fi_tinject and fi_tsend
 * (the kernel's loopback delivery included: the datagram or segment is in the
 * peer's socket when the call returns), and from there until the receive
 * completion is read. Used by scripts/bench-poll.sh.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                  \
	do {                                                                   \
		int r_ = (x);                                                  \
		if (r_) {                                                      \
			fprintf(stderr, "%s = %d (%s)\n", #x, r_,              \
				fi_strerror(-r_));                             \
			exit(2);                                               \
		}                                                              \
	} while (0)

static struct fid_cq *cq[2];
static struct fid_ep *ep[2];
static fi_addr_t peer[2];

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp);
	return v[n / 2];
}

/* Read one completion from cq[i], progressing the other endpoint too; bounded. */
static void wait_one(int i)
{
	struct fi_cq_tagged_entry e;
	double t0 = now_ns();
	for (;;) {
		ssize_t n = fi_cq_read(cq[i], &e, 1);
		if (n == 1)
			return;
		if (n != -FI_EAGAIN) {
			fprintf(stderr, "fi_cq_read: %zd\n", n);
			exit(2);
		}
		fi_cq_read(cq[1 - i], NULL, 0);
		if (now_ns() - t0 > 10e9) {
			fprintf(stderr, "no completion within 10 s\n");
			exit(2);
		}
	}
}

/* A post returned EAGAIN (e.g. a connection still being set up): progress
 * both endpoints; give up after 10 s from `since`. */
static void progress_both(double since)
{
	fi_cq_read(cq[0], NULL, 0);
	fi_cq_read(cq[1], NULL, 0);
	if (now_ns() - since > 10e9) {
		fprintf(stderr, "post still EAGAIN after 10 s\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20000, warm = 2000;
	if (iters < 100 || iters > 10000000)
		iters = 20000;
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG;
	hints->mode = ~0ULL;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av[2];
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	for (int i = 0; i < 2; i++) {
		struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .size = 1024};
		struct fi_av_attr aa = {.type = FI_AV_TABLE};
		CK(fi_cq_open(dom, &ca, &cq[i], NULL));
		CK(fi_av_open(dom, &aa, &av[i], NULL));
		CK(fi_endpoint(dom, info, &ep[i], NULL));
		CK(fi_ep_bind(ep[i], &av[i]->fid, 0));
		CK(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
		CK(fi_enable(ep[i]));
	}
	for (int i = 0; i < 2; i++) {
		char name[128];
		size_t len = sizeof name;
		CK(fi_getname(&ep[i]->fid, name, &len));
		if (fi_av_insert(av[1 - i], name, 1, &peer[1 - i], 0, NULL) != 1) {
			fprintf(stderr, "fi_av_insert failed\n");
			return 2;
		}
	}
	double *idle = malloc(iters * sizeof(double)), *trecv = malloc(iters * sizeof(double));
	double *tinj = malloc(iters * sizeof(double)), *tsend = malloc(iters * sizeof(double));
	double *rcq = malloc(iters * sizeof(double));
	char sbuf[8] = {1}, rbuf[8];
	struct fi_cq_tagged_entry e;
	for (int it = 0; it < warm + iters; it++) {
		int k = it - warm, inject = it & 1;
		double t0 = now_ns();
		fi_cq_read(cq[1], &e, 1); /* empty: everything was reaped */
		double t1 = now_ns();
		while (fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 7, 0, NULL) == -FI_EAGAIN)
			progress_both(t1);
		double t2 = now_ns();
		ssize_t r;
		do {
			r = inject ? fi_tinject(ep[0], sbuf, sizeof sbuf, peer[0], 7)
				   : fi_tsend(ep[0], sbuf, sizeof sbuf, NULL, peer[0], 7, NULL);
			if (r == -FI_EAGAIN)
				progress_both(t2);
		} while (r == -FI_EAGAIN);
		if (r) {
			fprintf(stderr, "send: %zd\n", r);
			return 2;
		}
		double t3 = now_ns();
		wait_one(1);
		double t4 = now_ns();
		if (!inject)
			wait_one(0);
		if (k >= 0) {
			idle[k] = t1 - t0;
			trecv[k] = t2 - t1;
			(inject ? tinj : tsend)[k / 2] = t3 - t2;
			rcq[k] = t4 - t3;
		}
	}
	printf("prov=%s idle_cq_read_ns=%.0f trecv_ns=%.0f tinject_ns=%.0f tsend_ns=%.0f recv_cq_ns=%.0f\n",
	       info->fabric_attr->prov_name, median(idle, iters), median(trecv, iters),
	       median(tinj, iters / 2), median(tsend, iters / 2), median(rcq, iters));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
