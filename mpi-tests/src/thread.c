/* thread.c - MPI_THREAD_MULTIPLE smoke test: NT threads per rank exchange messages
 * with the partner rank concurrently, half the threads on their own duplicated
 * communicator, half sharing one communicator with distinct tags. Exits 77 (skip)
 * when the library does not provide MPI_THREAD_MULTIPLE. */
#include "common.h"
#include <pthread.h>
#include <sys/types.h>

enum { NT = 4, ROUNDS = 300, BIG = 100000 };

static int g_size, g_partner;
static MPI_Comm g_shared;
static MPI_Comm g_own[NT];
static long g_thread_fail[NT];

struct targ {
    int t;
};

static void *worker(void *p)
{
    int t = ((struct targ *)p)->t;
    MPI_Comm comm = (t % 2 == 0) ? g_own[t] : g_shared;
    int tag = 10 + t; /* distinct per thread on the shared communicator */
    uint8_t *sb = malloc(BIG), *rb = malloc(BIG);
    long fails = 0;
    for (int k = 0; k < ROUNDS && fails < 5; k++) {
        /* mostly small, every 50th round a rendezvous-sized message */
        int sz = (k % 50 == 49) ? BIG : 8 + (k * 37 + t) % 2000;
        uint32_t my_seed = (uint32_t)(g_rank * 1000000 + t * 10000 + k);
        uint32_t peer_seed = (uint32_t)(g_partner * 1000000 + t * 10000 + k);
        pat_fill(sb, (size_t)sz, my_seed);
        MPI_Request rq[2];
        MPI_Status st;
        int rc = MPI_Irecv(rb, BIG, MPI_BYTE, g_partner, tag, comm, &rq[0]);
        rc |= MPI_Isend(sb, sz, MPI_BYTE, g_partner, tag, comm, &rq[1]);
        rc |= MPI_Wait(&rq[0], &st);
        rc |= MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        size_t bad = count == sz ? pat_check(rb, (size_t)sz, peer_seed) : 0;
        if (rc != MPI_SUCCESS || count != sz || bad != (size_t)-1) {
            fails++;
            fprintf(stderr, "FAIL rank %d thread %d round %d: rc %d count %d/%d bad byte %zd\n",
                    g_rank, t, k, rc, count, sz, (ssize_t)bad);
        }
    }
    g_thread_fail[t] = fails;
    free(sb);
    free(rb);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (g_rank == 0)
            printf("thread: SKIP: library provides thread level %d, not MPI_THREAD_MULTIPLE\n",
                   provided);
        MPI_Finalize();
        return 77;
    }
    if (g_size % 2 != 0) {
        if (g_rank == 0)
            fprintf(stderr, "thread needs an even number of ranks\n");
        MPI_Finalize();
        return 2;
    }
    g_partner = g_rank ^ 1;
    MPI_Comm_dup(MPI_COMM_WORLD, &g_shared);
    MPI_Comm_set_errhandler(g_shared, MPI_ERRORS_RETURN);
    for (int t = 0; t < NT; t++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &g_own[t]);
        MPI_Comm_set_errhandler(g_own[t], MPI_ERRORS_RETURN);
    }
    phase("threads");
    pthread_t th[NT];
    struct targ a[NT];
    int started[NT] = {0};
    for (int t = 0; t < NT; t++) {
        a[t].t = t;
        started[t] = pthread_create(&th[t], NULL, worker, &a[t]) == 0;
        if (!started[t])
            failf("pthread_create %d failed", t);
    }
    for (int t = 0; t < NT; t++)
        if (started[t])
            pthread_join(th[t], NULL);
    for (int t = 0; t < NT; t++) {
        g_failures += g_thread_fail[t];
        MPI_Comm_free(&g_own[t]);
    }
    MPI_Comm_free(&g_shared);
    return finish("thread");
}
