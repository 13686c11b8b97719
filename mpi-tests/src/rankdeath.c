/* rankdeath.c - a rank that dies mid-job (mpi-tests/rankdeath.sh drives it).
 *
 * Every rank exchanges messages with every other rank in a loop, both ways, small
 * (64 B) and large (1 MiB by default), contents checked: even iterations post all
 * Isend/Irecv and block in MPI_Waitall, odd ones go round a ring of blocking
 * MPI_Sendrecv. So when a peer disappears, the survivors are blocked in operations
 * to and from it. The victim rank (-v, default the last) either SIGKILLs itself
 * (-k ITER: right after posting the operations of the first all-pairs iteration from ITER on, with messages to and from
 * it in flight; it first writes the CLOCK_REALTIME ns of its death to -t FILE) or keeps
 * going until its host's link is taken away by the driver (-k 0).
 *
 * The communicator has MPI_ERRORS_RETURN: a survivor whose operation completes with
 * an error prints one line
 *   RANKDEATH error rank R iter I op OP t_ns T: <MPI error string>
 * (T = CLOCK_REALTIME ns) and calls MPI_Abort(3): how long after the death the error
 * came is what the driver reports. A content mismatch aborts with 2.
 *
 * The loop ends when rank 0 says so: its small message of every iteration carries a
 * stop flag, set once -T SECONDS (default 60) have passed, so all ranks agree on the
 * last iteration. Reaching the end normally prints "RANKDEATH finished" and exits 0,
 * which the driver counts as a failure (the death went unnoticed). Rank 0 writes -r
 * FILE after 3 iterations (the driver takes the link down only once the job runs).
 * Options: -l LARGE_BYTES, -p PAUSE_US between iterations (default 2000), -e FILE (the
 * error line is also appended there). */
#include "common.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#define SMALL 64

static int g_size;
static int g_iter;
/* -e FILE: the error line also goes there (appended), for the driver: a line on
 * stdout passes through the launcher, which may be killed by the abort before it
 * forwards it. */
static const char *g_err_file;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Writes the current time (ns) to path, for the driver; ignored when path is NULL. */
static void stamp(const char *path)
{
    if (!path)
        return;
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "%lld\n", now_ns());
    fclose(f);
}

/* An MPI call that failed: report when (the driver compares with the death) and abort. */
static void died(const char *op, int rc)
{
    char es[MPI_MAX_ERROR_STRING];
    int el = 0;
    es[0] = 0;
    MPI_Error_string(rc, es, &el);
    long long t = now_ns();
    printf("RANKDEATH error rank %d iter %d op %s t_ns %lld: %s\n", g_rank, g_iter, op, t, es);
    fflush(stdout);
    if (g_err_file) {
        FILE *f = fopen(g_err_file, "a");
        if (f) {
            fprintf(f, "RANKDEATH error rank %d iter %d op %s t_ns %lld: %s\n", g_rank, g_iter, op,
                    t, es);
            fclose(f);
        }
    }
    MPI_Abort(MPI_COMM_WORLD, 3);
    _exit(3);
}

#define CALL(op, call)                                                                       \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (rc_ != MPI_SUCCESS)                                                              \
            died(op, rc_);                                                                   \
    } while (0)

static uint32_t seed_of(int iter, int src, int dst, int large)
{
    return (uint32_t)iter * 7919u + (uint32_t)src * 131u + (uint32_t)dst * 17u + (uint32_t)large;
}

static void verify(const uint8_t *b, size_t n, int src, int large)
{
    /* the first byte of a small message is rank 0's stop flag, not pattern */
    size_t off = large ? 0 : 1;
    size_t bad = pat_check(b + off, n - off, seed_of(g_iter, src, g_rank, large));
    if (bad != (size_t)-1) {
        fprintf(stderr, "RANKDEATH FAIL rank %d iter %d: %s message from %d wrong at byte %zu\n",
                g_rank, g_iter, large ? "large" : "small", src, bad + off);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void fill(uint8_t *b, size_t n, int dst, int large, int stop)
{
    if (large) {
        pat_fill(b, n, seed_of(g_iter, g_rank, dst, 1));
    } else {
        b[0] = (uint8_t)stop;
        pat_fill(b + 1, n - 1, seed_of(g_iter, g_rank, dst, 0));
    }
}

int main(int argc, char **argv)
{
    int victim = -1, kill_iter = 10, pause_us = 2000;
    double max_s = 60;
    size_t large = 1 << 20;
    const char *kill_file = NULL, *ready_file = NULL;
    int c;
    while ((c = getopt(argc, argv, "v:k:T:l:p:t:r:e:")) != -1) {
        switch (c) {
        case 'v': victim = atoi(optarg); break;
        case 'k': kill_iter = atoi(optarg); break;
        case 'T': max_s = atof(optarg); break;
        case 'l': large = (size_t)atol(optarg); break;
        case 'p': pause_us = atoi(optarg); break;
        case 't': kill_file = optarg; break;
        case 'r': ready_file = optarg; break;
        case 'e': g_err_file = optarg; break;
        default:
            fprintf(stderr, "usage: rankdeath [-v VICTIM] [-k ITER|0] [-T S] [-l BYTES] "
                            "[-p US] [-t KILL_FILE] [-r READY_FILE]\n");
            return 64;
        }
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (victim < 0)
        victim = g_size - 1;
    if (g_size < 2 || victim >= g_size || large < 2) {
        if (g_rank == 0)
            fprintf(stderr, "rankdeath: needs 2+ ranks, a victim below %d, -l >= 2\n", g_size);
        MPI_Finalize();
        return 64;
    }
    int n = g_size;
    uint8_t *sbuf = malloc((size_t)n * (large + SMALL));
    uint8_t *rbuf = malloc((size_t)n * (large + SMALL));
    MPI_Request *req = malloc(sizeof(MPI_Request) * 4 * (size_t)n);
    if (!sbuf || !rbuf || !req) {
        fprintf(stderr, "rankdeath: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double t0 = MPI_Wtime();
    int stop = 0;
    for (g_iter = 0; !stop; g_iter++) {
        int my_stop = g_rank == 0 && MPI_Wtime() - t0 > max_s;
        if (g_iter % 2 == 0) {
            /* all pairs at once: Irecv and Isend, small and large, then one Waitall */
            int k = 0;
            for (int p = 0; p < n; p++) {
                if (p == g_rank)
                    continue;
                uint8_t *rs = rbuf + (size_t)p * (large + SMALL), *ss = sbuf + (size_t)p * (large + SMALL);
                CALL("Irecv", MPI_Irecv(rs, SMALL, MPI_BYTE, p, 1, MPI_COMM_WORLD, &req[k++]));
                CALL("Irecv", MPI_Irecv(rs + SMALL, (int)large, MPI_BYTE, p, 2, MPI_COMM_WORLD, &req[k++]));
                fill(ss, SMALL, p, 0, my_stop);
                fill(ss + SMALL, large, p, 1, 0);
                CALL("Isend", MPI_Isend(ss, SMALL, MPI_BYTE, p, 1, MPI_COMM_WORLD, &req[k++]));
                CALL("Isend", MPI_Isend(ss + SMALL, (int)large, MPI_BYTE, p, 2, MPI_COMM_WORLD, &req[k++]));
            }
            if (g_rank == victim && kill_iter > 0 && g_iter >= kill_iter) {
                /* die with our own messages and the peers' in flight */
                stamp(kill_file);
                raise(SIGKILL);
            }
            CALL("Waitall", MPI_Waitall(k, req, MPI_STATUSES_IGNORE));
            for (int p = 0; p < n; p++) {
                if (p == g_rank)
                    continue;
                uint8_t *rs = rbuf + (size_t)p * (large + SMALL);
                verify(rs, SMALL, p, 0);
                verify(rs + SMALL, large, p, 1);
                if (p == 0)
                    stop = rs[0];
            }
            if (g_rank == 0)
                stop = my_stop;
        } else {
            /* blocking ring: shift s sends to me+s and receives from me-s */
            for (int s = 1; s < n; s++) {
                int dst = (g_rank + s) % n, src = (g_rank - s + n) % n;
                uint8_t *rs = rbuf + (size_t)src * (large + SMALL), *ss = sbuf + (size_t)dst * (large + SMALL);
                fill(ss + SMALL, large, dst, 1, 0);
                CALL("Sendrecv", MPI_Sendrecv(ss + SMALL, (int)large, MPI_BYTE, dst, 3,
                                              rs + SMALL, (int)large, MPI_BYTE, src, 3,
                                              MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                verify(rs + SMALL, large, src, 1);
            }
        }
        if (g_iter == 3 && g_rank == 0)
            stamp(ready_file);
        if (pause_us > 0)
            usleep((useconds_t)pause_us);
    }
    printf("RANKDEATH finished rank %d after %d iterations (no rank died)\n", g_rank, g_iter);
    free(sbuf);
    free(rbuf);
    free(req);
    MPI_Finalize();
    return 0;
}
