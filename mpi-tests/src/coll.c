/* coll.c - self-checking collectives: barrier, bcast, reduce, allreduce, alltoall,
 * allgather at several sizes (small/eager to rendezvous), every root, verified. */
#include "common.h"

static int g_size;

/* Value rank r contributes at index i: integers only, so sums are exact. */
static inline int val(int r, int i) { return (r + 1) * 1000 + (i % 997) - (i % 3) * r; }

static void test_barrier(void)
{
    phase("barrier");
    /* a barrier must not let anyone pass before everybody arrived: rank 0 is
     * late on purpose; others must not leave the barrier before it entered */
    for (int k = 0; k < 20; k++)
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* after a common starting point, rank 0 spins 0.3 s before entering; the
     * others must wait in the barrier for most of that (slack for scheduling) */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    double t1 = MPI_Wtime();
    if (g_rank == 0) {
        while (MPI_Wtime() - t1 < 0.3) {
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    double waited = MPI_Wtime() - t1;
    CHECK(waited >= 0.1, "left the barrier after %.3f s although rank 0 arrived 0.3 s late",
          waited);
}

static void test_bcast(void)
{
    phase("bcast");
    static const int sizes[] = {1, 100, 8192, 65537, 1 << 20, 4 << 20};
    for (int s = 0; s < 6; s++) {
        int n = sizes[s];
        uint8_t *b = malloc((size_t)n);
        for (int root = 0; root < g_size; root++) {
            uint32_t seed = (uint32_t)(s * 16 + root);
            if (g_rank == root)
                pat_fill(b, (size_t)n, seed);
            else
                memset(b, 0, (size_t)n);
            MPI_OK(MPI_Bcast(b, n, MPI_BYTE, root, MPI_COMM_WORLD));
            size_t bad = pat_check(b, (size_t)n, seed);
            CHECK(bad == (size_t)-1, "bcast %d B root %d: byte %zu wrong", n, root, bad);
        }
        free(b);
    }
}

static void test_reduce(void)
{
    phase("reduce");
    static const int counts[] = {1, 7, 1024, 65536, 262144};
    for (int c = 0; c < 5; c++) {
        int n = counts[c];
        int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
        double *din = malloc(sizeof(double) * (size_t)n), *dout = malloc(sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) {
            in[i] = val(g_rank, i);
            din[i] = (double)val(g_rank, i) * 0.5;
        }
        for (int root = 0; root < g_size; root++) {
            memset(out, 0, sizeof(int) * (size_t)n);
            MPI_OK(MPI_Reduce(in, out, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
            if (g_rank == root) {
                int bad = 0;
                for (int i = 0; i < n; i++) {
                    int want = 0;
                    for (int r = 0; r < g_size; r++)
                        want += val(r, i);
                    bad += out[i] != want;
                }
                CHECK(bad == 0, "reduce sum int count %d root %d: %d wrong", n, root, bad);
            }
        }
        MPI_OK(MPI_Reduce(din, dout, n, MPI_DOUBLE, MPI_MAX, g_size - 1, MPI_COMM_WORLD));
        if (g_rank == g_size - 1) {
            int bad = 0;
            for (int i = 0; i < n; i++) {
                double want = -1e300;
                for (int r = 0; r < g_size; r++)
                    want = want > val(r, i) * 0.5 ? want : val(r, i) * 0.5;
                bad += dout[i] != want;
            }
            CHECK(bad == 0, "reduce max double count %d: %d wrong", n, bad);
        }
        free(in);
        free(out);
        free(din);
        free(dout);
    }
}

static void test_allreduce(void)
{
    phase("allreduce");
    static const int counts[] = {1, 7, 1024, 65536, 262144, 1 << 20};
    for (int c = 0; c < 6; c++) {
        int n = counts[c];
        long *in = malloc(sizeof(long) * (size_t)n), *out = malloc(sizeof(long) * (size_t)n);
        for (int i = 0; i < n; i++)
            in[i] = val(g_rank, i);
        MPI_OK(MPI_Allreduce(in, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        int bad = 0;
        for (int i = 0; i < n; i++) {
            long want = 0;
            for (int r = 0; r < g_size; r++)
                want += val(r, i);
            bad += out[i] != want;
        }
        CHECK(bad == 0, "allreduce sum count %d: %d wrong", n, bad);
        /* in place, MIN */
        for (int i = 0; i < n; i++)
            out[i] = val(g_rank, i);
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_LONG, MPI_MIN, MPI_COMM_WORLD));
        bad = 0;
        for (int i = 0; i < n; i++) {
            long want = val(0, i);
            for (int r = 1; r < g_size; r++)
                want = want < val(r, i) ? want : val(r, i);
            bad += out[i] != want;
        }
        CHECK(bad == 0, "allreduce in-place min count %d: %d wrong", n, bad);
        free(in);
        free(out);
    }
}

static void test_alltoall(void)
{
    phase("alltoall");
    static const int per[] = {1, 100, 2048, 16384, 262144}; /* ints per peer */
    for (int c = 0; c < 5; c++) {
        int n = per[c];
        size_t tot = (size_t)n * (size_t)g_size;
        int *s = malloc(sizeof(int) * tot), *r = malloc(sizeof(int) * tot);
        for (int d = 0; d < g_size; d++)
            for (int i = 0; i < n; i++)
                s[(size_t)d * n + i] = g_rank * 1000003 + d * 10007 + i;
        memset(r, 0xff, sizeof(int) * tot);
        MPI_OK(MPI_Alltoall(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD));
        int bad = 0;
        for (int src = 0; src < g_size; src++)
            for (int i = 0; i < n; i++)
                bad += r[(size_t)src * n + i] != src * 1000003 + g_rank * 10007 + i;
        CHECK(bad == 0, "alltoall %d ints per peer: %d wrong", n, bad);
        free(s);
        free(r);
    }
}

static void test_allgather(void)
{
    phase("allgather");
    static const int per[] = {1, 100, 2048, 16384, 262144};
    for (int c = 0; c < 5; c++) {
        int n = per[c];
        size_t tot = (size_t)n * (size_t)g_size;
        int *s = malloc(sizeof(int) * (size_t)n), *r = malloc(sizeof(int) * tot);
        for (int i = 0; i < n; i++)
            s[i] = g_rank * 1000003 + i;
        memset(r, 0xff, sizeof(int) * tot);
        MPI_OK(MPI_Allgather(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD));
        int bad = 0;
        for (int src = 0; src < g_size; src++)
            for (int i = 0; i < n; i++)
                bad += r[(size_t)src * n + i] != src * 1000003 + i;
        CHECK(bad == 0, "allgather %d ints per rank: %d wrong", n, bad);
        free(s);
        free(r);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    test_barrier();
    test_bcast();
    test_reduce();
    test_allreduce();
    test_alltoall();
    test_allgather();
    return finish("coll");
}
