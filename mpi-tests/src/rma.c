/* rma.c - self-checking one-sided communication: MPI_Put, MPI_Get, MPI_Accumulate
 * under active-target (MPI_Win_fence) and passive-target (MPI_Win_lock/unlock)
 * synchronisation, small and large transfers, on a window made with
 * MPI_Win_create over malloc'd memory (so no shared-memory window is used);
 * and MPI's default accumulate ordering (same origin, same target location:
 * rar, raw, war, waw), which an MPI may hand to the provider's atomics when
 * the provider grants FI_ORDER_ATOMIC_* with a size. */
#include "common.h"

static int g_size;

enum { WIN_INTS = 1 << 20 }; /* 4 MiB window per rank */

static inline int tval(int r, int i) { return r * 100003 + i; }

/* Read the local window under an exclusive self-lock (needed for the separate
 * memory model after passive-target updates by others). */
static void lock_self(MPI_Win win) { MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_rank, 0, win)); }
static void unlock_self(MPI_Win win) { MPI_OK(MPI_Win_unlock(g_rank, win)); }

static void test_fence(int *base, MPI_Win win)
{
    phase("fence");
    static const int counts[] = {1, 1000, 100000, WIN_INTS};
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    int *src = malloc(sizeof(int) * WIN_INTS), *dst = malloc(sizeof(int) * WIN_INTS);
    for (int c = 0; c < 4; c++) {
        int n = counts[c];
        /* Put my values into my right neighbour's window */
        for (int i = 0; i < n; i++)
            src[i] = tval(g_rank, i) + c;
        memset(base, 0, sizeof(int) * WIN_INTS);
        MPI_OK(MPI_Win_fence(0, win));
        MPI_OK(MPI_Put(src, n, MPI_INT, right, 0, n, MPI_INT, win));
        MPI_OK(MPI_Win_fence(0, win));
        int bad = 0;
        for (int i = 0; i < n; i++)
            bad += base[i] != tval(left, i) + c;
        for (int i = n; i < n + 8 && i < WIN_INTS; i++)
            bad += base[i] != 0;
        CHECK(bad == 0, "fence put %d ints: %d wrong", n, bad);
        /* Get the window of my left neighbour (it holds its left's values) */
        for (int i = 0; i < n; i++)
            base[i] = tval(g_rank, i) * 2 + c;
        memset(dst, 0, sizeof(int) * (size_t)n);
        MPI_OK(MPI_Win_fence(0, win));
        MPI_OK(MPI_Get(dst, n, MPI_INT, left, 0, n, MPI_INT, win));
        MPI_OK(MPI_Win_fence(0, win));
        bad = 0;
        for (int i = 0; i < n; i++)
            bad += dst[i] != tval(left, i) * 2 + c;
        CHECK(bad == 0, "fence get %d ints: %d wrong", n, bad);
    }
    /* Accumulate: everyone adds into every rank's window at a displaced offset */
    {
        int n = 5000, disp = 123;
        for (int i = 0; i < n; i++)
            src[i] = tval(g_rank, i);
        memset(base, 0, sizeof(int) * WIN_INTS);
        MPI_OK(MPI_Win_fence(0, win));
        for (int t = 0; t < g_size; t++)
            MPI_OK(MPI_Accumulate(src, n, MPI_INT, t, disp, n, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Win_fence(0, win));
        int bad = 0;
        for (int i = 0; i < n; i++) {
            int want = 0;
            for (int r = 0; r < g_size; r++)
                want += tval(r, i);
            bad += base[disp + i] != want;
        }
        bad += base[disp - 1] != 0 || base[disp + n] != 0;
        CHECK(bad == 0, "fence accumulate SUM %d ints from %d ranks: %d wrong", n, g_size, bad);
    }
    free(src);
    free(dst);
}

static void test_lock(int *base, MPI_Win win)
{
    phase("lock");
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    int n = 200000;
    int *src = malloc(sizeof(int) * (size_t)n), *dst = malloc(sizeof(int) * (size_t)n);
    lock_self(win);
    memset(base, 0, sizeof(int) * WIN_INTS);
    unlock_self(win);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* exclusive lock: put to the right neighbour */
    for (int i = 0; i < n; i++)
        src[i] = tval(g_rank, i) ^ 0x5a5a;
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    MPI_OK(MPI_Put(src, n, MPI_INT, right, 0, n, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(right, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    lock_self(win);
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += base[i] != (tval(left, i) ^ 0x5a5a);
    unlock_self(win);
    CHECK(bad == 0, "lock put %d ints: %d wrong", n, bad);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* shared lock: get from the left neighbour what its left neighbour put there */
    int ll = (left + g_size - 1) % g_size;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, left, 0, win));
    MPI_OK(MPI_Get(dst, n, MPI_INT, left, 0, n, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(left, win));
    bad = 0;
    for (int i = 0; i < n; i++)
        bad += dst[i] != (tval(ll, i) ^ 0x5a5a);
    CHECK(bad == 0, "lock get %d ints: %d wrong", n, bad);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* shared lock, many accumulates from every rank into rank 0 (atomic per element) */
    int m = 1000, reps = 20, off = n + 16;
    for (int i = 0; i < m; i++)
        src[i] = g_rank + 1 + i;
    for (int k = 0; k < reps; k++) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Accumulate(src, m, MPI_INT, 0, off, m, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
        lock_self(win);
        bad = 0;
        for (int i = 0; i < m; i++) {
            int want = 0;
            for (int r = 0; r < g_size; r++)
                want += (r + 1 + i) * reps;
            bad += base[off + i] != want;
        }
        unlock_self(win);
        CHECK(bad == 0, "lock accumulate %d x %d ints from %d ranks: %d wrong", reps, m, g_size,
              bad);
    }
    /* lock_all + flush: small puts to every rank, then read back with get */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int slot = off + m + 16;
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < g_size; t++) {
        int v = 7000 + g_rank * 10 + t;
        MPI_OK(MPI_Put(&v, 1, MPI_INT, t, slot + g_rank, 1, MPI_INT, win));
        MPI_OK(MPI_Win_flush(t, win));
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    bad = 0;
    for (int t = 0; t < g_size; t++) {
        int got[64];
        MPI_OK(MPI_Get(got, g_size, MPI_INT, t, slot, g_size, MPI_INT, win));
        MPI_OK(MPI_Win_flush(t, win));
        for (int r = 0; r < g_size; r++)
            bad += got[r] != 7000 + r * 10 + t;
    }
    MPI_OK(MPI_Win_unlock_all(win));
    CHECK(bad == 0, "lock_all put/flush/get: %d wrong", bad);
    free(src);
    free(dst);
}

/* Accumulate ordering: every rank, in one passive epoch to its right
 * neighbour, alternates MPI_Accumulate(REPLACE, v_i) and MPI_Fetch_and_op(NO_OP)
 * on one int, K pairs before a flush: fetch i must see v_i (read after write)
 * and not v_{i+1} (write after read), and after the flush the int is v_K
 * (write after write). Nothing but the ordering makes this hold: the ops are
 * all outstanding together. */
static void test_acc_order(int *base, MPI_Win win)
{
    phase("accumulate order");
    enum { K = 64, ROUNDS = 20 };
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Aint disp = WIN_INTS - 1; /* one origin per target: its left neighbour */
    int vals[K], got[K], bad = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < K; i++) {
            vals[i] = tval(g_rank, r * K + i);
            got[i] = -1;
            MPI_OK(MPI_Accumulate(&vals[i], 1, MPI_INT, right, disp, 1, MPI_INT, MPI_REPLACE, win));
            MPI_OK(MPI_Fetch_and_op(NULL, &got[i], MPI_INT, right, disp, MPI_NO_OP, win));
        }
        MPI_OK(MPI_Win_flush(right, win));
        for (int i = 0; i < K; i++)
            bad += got[i] != vals[i];
    }
    MPI_OK(MPI_Win_unlock(right, win));
    CHECK(bad == 0, "accumulate order: %d of %d fetches saw another value than the replace before them",
          bad, K * ROUNDS);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    lock_self(win);
    int last = base[disp];
    unlock_self(win);
    CHECK(last == tval(left, ROUNDS * K - 1), "accumulate order: the last replace from %d is %d, not %d",
          left, last, tval(left, ROUNDS * K - 1));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (g_size > 64) {
        if (g_rank == 0)
            fprintf(stderr, "rma supports at most 64 ranks\n");
        MPI_Finalize();
        return 2;
    }
    int *base = malloc(sizeof(int) * WIN_INTS);
    MPI_Win win;
    int rc = MPI_Win_create(base, sizeof(int) * WIN_INTS, sizeof(int), MPI_INFO_NULL,
                            MPI_COMM_WORLD, &win);
    if (rc != MPI_SUCCESS) {
        failf("MPI_Win_create returned %d: no one-sided support; nothing else is tested", rc);
        free(base);
        return finish("rma");
    }
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    test_fence(base, win);
    test_lock(base, win);
    test_acc_order(base, win);
    MPI_OK(MPI_Win_free(&win));
    free(base);
    return finish("rma");
}
