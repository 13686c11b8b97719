/* p2p.c - self-checking point-to-point test: ordering, wildcards, probe, matched
 * probe, truncation, many outstanding requests, sizes 0 B..64 MiB, derived datatypes.
 * Ranks work in pairs (r, r^1); with 4 ranks rank 0 also receives from everyone.
 * Options: -m MAX_BYTES (largest message, default 64 MiB), -n N (outstanding receives
 * and sends per rank in the many-outstanding test, default 4096), -s trunc-rndv (skip the
 * truncation of rendezvous-sized messages), -s trunc (skip all truncation) or -s mprobe
 * (skip the matched probe), for providers known to break there. */
#include "common.h"

static int g_size, g_partner;

/* Busy-wait without calling into MPI. */
static void spin(double seconds)
{
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < seconds) {
    }
}
static MPI_Comm g_comm; /* dup of WORLD with MPI_ERRORS_RETURN */

/* Same tag, many messages, sizes mixed across eager/rendezvous: arrival order must
 * equal send order (MPI non-overtaking). Half the receives are posted before the
 * sends, half after a pause (unexpected queue); buffers are max-size so no
 * receive can truncate. */
static void test_ordering_checked(void)
{
    phase("ordering");
    enum { N = 1000, TAG = 7 };
    static const int sizes[] = {4, 100, 9000, 70000, 300000, 1024, 65536};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const int maxsz = 300000;
    if (g_partner < 0)
        return;
    int sender = (g_rank & 1) == 0;
    MPI_Request *req = malloc(sizeof(MPI_Request) * N);
    MPI_Status *st = malloc(sizeof(MPI_Status) * N);
    uint8_t **slot = malloc(sizeof(uint8_t *) * N);
    int *szs = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) {
        szs[i] = (i % 25 == 24) ? sizes[(i / 25) % nsizes] : 4;
        slot[i] = malloc(sender ? (size_t)szs[i] : (size_t)maxsz);
    }
    if (sender) {
        for (int i = 0; i < N; i++) {
            pat_fill(slot[i], (size_t)szs[i], (uint32_t)i);
            memcpy(slot[i], &i, 4);
            MPI_OK(MPI_Isend(slot[i], szs[i], MPI_BYTE, g_partner, TAG, g_comm, &req[i]));
        }
        MPI_OK(MPI_Waitall(N, req, MPI_STATUSES_IGNORE));
    } else {
        for (int i = 0; i < N / 2; i++)
            MPI_OK(MPI_Irecv(slot[i], maxsz, MPI_BYTE, g_partner, TAG, g_comm, &req[i]));
        /* let the sends arrive first so the rest are mostly unexpected messages (no
         * barrier: the sender must not depend on a flood of unexpected messages
         * being absorbed before it can go on) */
        spin(0.05);
        for (int i = N / 2; i < N; i++)
            MPI_OK(MPI_Irecv(slot[i], maxsz, MPI_BYTE, g_partner, TAG, g_comm, &req[i]));
        MPI_OK(MPI_Waitall(N, req, st));
        for (int i = 0; i < N; i++) {
            int got = -1, count = -1;
            memcpy(&got, slot[i], 4);
            MPI_Get_count(&st[i], MPI_BYTE, &count);
            CHECK(got == i, "receive %d got message %d (same-tag order broken)", i, got);
            CHECK(count == szs[i], "receive %d: count %d, expected %d", i, count, szs[i]);
            if (got == i && count == szs[i] && szs[i] > 4) {
                uint8_t hdr[4]; /* restore the pattern bytes the sequence number replaced */
                pat_fill(hdr, 4, (uint32_t)i);
                memcpy(slot[i], hdr, 4);
                size_t bad = pat_check(slot[i], (size_t)szs[i], (uint32_t)i);
                CHECK(bad == (size_t)-1, "receive %d (%d B): byte %zu corrupt", i, szs[i], bad);
            }
        }
    }
    for (int i = 0; i < N; i++)
        free(slot[i]);
    free(slot);
    free(szs);
    free(st);
    free(req);
}

/* Every rank except 0 sends K messages with varying tags; rank 0 receives them all
 * with MPI_ANY_SOURCE/MPI_ANY_TAG and checks status fields and per-source order. */
static void test_wildcards(void)
{
    phase("wildcards");
    enum { K = 200 };
    if (g_rank == 0) {
        int total = (g_size - 1) * K;
        int *next = calloc((size_t)g_size, sizeof(int));
        for (int n = 0; n < total; n++) {
            int msg[3];
            MPI_Status st;
            MPI_OK(MPI_Recv(msg, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, g_comm, &st));
            int src = msg[0], seq = msg[1], tag = msg[2];
            CHECK(st.MPI_SOURCE == src, "status source %d, payload says %d", st.MPI_SOURCE, src);
            CHECK(st.MPI_TAG == tag, "status tag %d, payload says %d", st.MPI_TAG, tag);
            if (src > 0 && src < g_size) {
                CHECK(seq == next[src], "from %d: got seq %d expected %d", src, seq, next[src]);
                next[src] = seq + 1;
            } else {
                failf("bad source in payload: %d", src);
            }
        }
        free(next);
    } else {
        for (int k = 0; k < K; k++) {
            int msg[3] = {g_rank, k, (k * 7 + g_rank) % 1000};
            MPI_OK(MPI_Send(msg, 3, MPI_INT, 0, msg[2], g_comm));
        }
    }
    MPI_OK(MPI_Barrier(g_comm));
}

/* MPI_Probe / MPI_Iprobe for a message whose size the receiver does not know. */
static void test_probe(void)
{
    phase("probe");
    if (g_partner < 0)
        return;
    static const int sizes[] = {0, 1, 1000, 70000, 1 << 20};
    for (int k = 0; k < 5; k++) {
        int sz = sizes[k], tag = 100 + k;
        if ((g_rank & 1) == 0) {
            uint8_t *b = malloc((size_t)sz + 1);
            pat_fill(b, (size_t)sz, (uint32_t)(tag * 3));
            MPI_OK(MPI_Send(b, sz, MPI_BYTE, g_partner, tag, g_comm));
            free(b);
        } else {
            MPI_Status st;
            int count = -1;
            if (k % 2 == 0) {
                MPI_OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, g_comm, &st));
            } else {
                int flag = 0;
                double t0 = MPI_Wtime();
                while (!flag && MPI_Wtime() - t0 < 30.0)
                    MPI_OK(MPI_Iprobe(g_partner, tag, g_comm, &flag, &st));
                CHECK(flag, "Iprobe never saw tag %d within 30 s", tag);
                if (!flag)
                    continue;
            }
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK(st.MPI_SOURCE == g_partner && st.MPI_TAG == tag,
                  "probe status src %d tag %d, expected %d %d", st.MPI_SOURCE, st.MPI_TAG,
                  g_partner, tag);
            CHECK(count == sz, "probe count %d expected %d", count, sz);
            if (count < 0 || count > sz)
                count = sz;
            uint8_t *b = malloc((size_t)count + 1);
            MPI_OK(MPI_Recv(b, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, g_comm, &st));
            size_t bad = pat_check(b, (size_t)count, (uint32_t)(tag * 3));
            CHECK(bad == (size_t)-1, "probed message %d B corrupt at %zu", sz, bad);
            free(b);
        }
    }
    MPI_OK(MPI_Barrier(g_comm));
}

/* MPI_Mprobe/MPI_Improbe + MPI_Mrecv: a matched message leaves the queue, so the
 * next plain receive with the same tag must get the second message. */
static void test_mprobe(void)
{
    phase("mprobe");
    if (g_partner < 0)
        return;
    enum { TAG = 55 };
    for (int round = 0; round < 2; round++) {
        int sz_a = round ? 200000 : 16, sz_b = round ? 33 : 100000;
        if ((g_rank & 1) == 0) {
            uint8_t *a = malloc((size_t)sz_a), *b = malloc((size_t)sz_b);
            pat_fill(a, (size_t)sz_a, 1000u + (uint32_t)round);
            pat_fill(b, (size_t)sz_b, 2000u + (uint32_t)round);
            /* nonblocking: the receiver takes b before a, and a standard-mode send
             * of a may legally wait for a's receive */
            MPI_Request rq[2];
            MPI_OK(MPI_Isend(a, sz_a, MPI_BYTE, g_partner, TAG, g_comm, &rq[0]));
            MPI_OK(MPI_Isend(b, sz_b, MPI_BYTE, g_partner, TAG, g_comm, &rq[1]));
            MPI_OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            free(a);
            free(b);
        } else {
            MPI_Message m = MPI_MESSAGE_NULL;
            MPI_Status st;
            int count = -1;
            if (round == 0) {
                MPI_OK(MPI_Mprobe(g_partner, TAG, g_comm, &m, &st));
            } else {
                int flag = 0;
                double t0 = MPI_Wtime();
                while (!flag && MPI_Wtime() - t0 < 30.0)
                    MPI_OK(MPI_Improbe(MPI_ANY_SOURCE, TAG, g_comm, &flag, &m, &st));
                CHECK(flag, "Improbe never matched within 30 s");
                if (!flag)
                    return;
            }
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK(count == sz_a, "mprobe count %d expected %d", count, sz_a);
            /* receive the second message first: it must not be the probed one */
            uint8_t *b = malloc((size_t)sz_b);
            MPI_Status st2;
            int c2 = -1;
            MPI_OK(MPI_Recv(b, sz_b, MPI_BYTE, g_partner, TAG, g_comm, &st2));
            MPI_Get_count(&st2, MPI_BYTE, &c2);
            CHECK(c2 == sz_b, "recv after mprobe got %d B, expected the second message (%d B)",
                  c2, sz_b);
            size_t bad = pat_check(b, (size_t)sz_b, 2000u + (uint32_t)round);
            CHECK(bad == (size_t)-1, "second message corrupt at %zu", bad);
            uint8_t *a = malloc((size_t)sz_a);
            MPI_OK(MPI_Mrecv(a, sz_a, MPI_BYTE, &m, &st));
            CHECK(m == MPI_MESSAGE_NULL, "Mrecv did not reset the message handle");
            bad = pat_check(a, (size_t)sz_a, 1000u + (uint32_t)round);
            CHECK(bad == (size_t)-1, "mrecv'd message corrupt at %zu", bad);
            free(a);
            free(b);
        }
    }
    MPI_OK(MPI_Barrier(g_comm));
}

/* A receive buffer smaller than the message gives MPI_ERR_TRUNCATE (eager and
 * rendezvous sizes), the sender's request still completes (bounded wait, so a
 * provider that never finishes it fails here instead of hanging), and the pair
 * keeps working afterwards. rndv=0 limits it to eager-sized messages. */
static void test_truncation(int rndv)
{
    if (g_partner < 0)
        return;
    static const int sizes[] = {100, 20000, 1 << 20};
    static const char *names[] = {"truncation-100B", "truncation-20000B", "truncation-1MiB"};
    for (int k = 0; k < (rndv ? 3 : 1); k++) {
        int sz = sizes[k], tag = 300 + k;
        phase(names[k]);
        if ((g_rank & 1) == 0) {
            uint8_t *b = malloc((size_t)sz);
            pat_fill(b, (size_t)sz, 77);
            MPI_Request rq;
            MPI_OK(MPI_Isend(b, sz, MPI_BYTE, g_partner, tag, g_comm, &rq));
            /* follow-up message must arrive intact */
            MPI_OK(MPI_Send(b, 64, MPI_BYTE, g_partner, tag + 50, g_comm));
            int done = 0;
            double t0 = MPI_Wtime();
            MPI_Status st;
            /* the sender may also see an error status on truncation; accept either */
            while (!done && MPI_Wtime() - t0 < 20.0)
                MPI_Test(&rq, &done, &st);
            CHECK(done, "a send of %d B truncated by the receiver did not complete in 20 s", sz);
            if (!done) {
                fprintf(stderr, "p2p: the stuck request makes MPI_Finalize unsafe; aborting\n");
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            free(b);
        } else {
            uint8_t *b = malloc((size_t)sz);
            memset(b, 0xEE, (size_t)sz);
            MPI_Status st;
            st.MPI_ERROR = MPI_SUCCESS;
            int small = sz / 10;
            int rc = MPI_Recv(b, small, MPI_BYTE, g_partner, tag, g_comm, &st);
            int cls = MPI_SUCCESS;
            if (rc != MPI_SUCCESS)
                MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_TRUNCATE,
                  "%d B into %d B: error class %d, expected MPI_ERR_TRUNCATE (%d)", sz, small, cls,
                  MPI_ERR_TRUNCATE);
            /* nothing may be written past the posted length */
            int over = 0;
            for (int i = small; i < sz; i++)
                over |= b[i] != 0xEE;
            CHECK(!over, "%d B into %d B: bytes written past the receive buffer", sz, small);
            memset(b, 0, 64);
            MPI_OK(MPI_Recv(b, 64, MPI_BYTE, g_partner, tag + 50, g_comm, MPI_STATUS_IGNORE));
            CHECK(pat_check(b, 64, 77) == (size_t)-1, "message after truncation corrupt");
            free(b);
        }
    }
    MPI_OK(MPI_Barrier(g_comm));
}

/* Thousands of outstanding requests, both directions at once, receives posted
 * with distinct tags in reverse order (and, second round, after the sends). */
static void test_many_outstanding(int N)
{
    phase("many-outstanding");
    if (g_partner < 0)
        return;
    int *sbuf = malloc(sizeof(int) * 2 * N), *rbuf = malloc(sizeof(int) * 2 * N);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * N);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            sbuf[2 * i] = g_rank;
            sbuf[2 * i + 1] = i * 3 + round;
            rbuf[2 * i] = rbuf[2 * i + 1] = -1;
        }
        int nr = 0;
        if (round == 0)
            for (int i = N - 1; i >= 0; i--)
                MPI_OK(MPI_Irecv(&rbuf[2 * i], 2, MPI_INT, g_partner, i, g_comm, &req[nr++]));
        for (int i = 0; i < N; i++)
            MPI_OK(MPI_Isend(&sbuf[2 * i], 2, MPI_INT, g_partner, i, g_comm, &req[nr++]));
        if (round == 1) {
            spin(0.05); /* most messages arrive before their receives are posted */
            for (int i = N - 1; i >= 0; i--)
                MPI_OK(MPI_Irecv(&rbuf[2 * i], 2, MPI_INT, g_partner, i, g_comm, &req[nr++]));
        }
        MPI_OK(MPI_Waitall(nr, req, MPI_STATUSES_IGNORE));
        int bad = 0, first = -1;
        for (int i = 0; i < N; i++)
            if (rbuf[2 * i] != g_partner || rbuf[2 * i + 1] != i * 3 + round) {
                if (first < 0)
                    first = i;
                bad++;
            }
        CHECK(bad == 0, "round %d: %d of %d messages wrong (first tag %d: got %d/%d)", round, bad,
              N, first, first >= 0 ? rbuf[2 * first] : 0, first >= 0 ? rbuf[2 * first + 1] : 0);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    MPI_OK(MPI_Barrier(g_comm));
}

/* Ping-pong each size; both directions carry distinct patterns; a guard zone
 * after the receive buffer must stay untouched. */
static void test_sizes(size_t maxsize)
{
    phase("sizes");
    enum { GUARD = 64 };
    size_t list[64];
    int n = 0;
    list[n++] = 0;
    for (size_t s = 1; s <= maxsize && n < 40; s *= 2)
        list[n++] = s;
    static const size_t extra[] = {1023, 1025, 8191, 8193, 65535, 65537};
    for (int i = 0; i < 6; i++)
        if (extra[i] <= maxsize)
            list[n++] = extra[i];
    if (g_partner < 0)
        return;
    uint8_t *buf = malloc(maxsize + GUARD);
    for (int k = 0; k < n; k++) {
        size_t sz = list[k];
        int tag = 1000 + k;
        uint32_t s1 = (uint32_t)(k * 2 + 1), s2 = (uint32_t)(k * 2 + 2);
        int first = (g_rank & 1) == 0;
        for (int dir = 0; dir < 2; dir++) {
            int i_send = (dir == 0) == first;
            uint32_t seed = dir == 0 ? s1 : s2;
            if (i_send) {
                pat_fill(buf, sz, seed);
                MPI_OK(MPI_Send(buf, (int)sz, MPI_BYTE, g_partner, tag, g_comm));
            } else {
                memset(buf, 0xA5, sz + GUARD);
                MPI_Status st;
                int count = -1;
                MPI_OK(MPI_Recv(buf, (int)sz, MPI_BYTE, g_partner, tag, g_comm, &st));
                MPI_Get_count(&st, MPI_BYTE, &count);
                CHECK((size_t)count == sz, "size %zu dir %d: count %d", sz, dir, count);
                size_t bad = pat_check(buf, sz, seed);
                CHECK(bad == (size_t)-1, "size %zu dir %d: byte %zu wrong (0x%02x, expected 0x%02x)",
                      sz, dir, bad, bad == (size_t)-1 ? 0 : buf[bad],
                      bad == (size_t)-1 ? 0 : pat_byte(bad, seed));
                int over = 0;
                for (int g = 0; g < GUARD; g++)
                    over |= buf[sz + g] != 0xA5;
                CHECK(!over, "size %zu dir %d: wrote past the end of the receive buffer", sz, dir);
            }
        }
    }
    free(buf);
    MPI_OK(MPI_Barrier(g_comm));
}

/* Derived datatypes: send non-contiguous, receive contiguous, and back. */
struct rec {
    int id;
    double val;
    char tag[5];
};

static void test_datatypes(void)
{
    phase("datatypes");
    if (g_partner < 0)
        return;
    int sender = (g_rank & 1) == 0;
    /* vector: NB blocks of 3 doubles, stride 5 (big enough to go rendezvous) */
    {
        enum { NB = 20000, BL = 3, STRIDE = 5 };
        MPI_Datatype vec;
        MPI_Type_vector(NB, BL, STRIDE, MPI_DOUBLE, &vec);
        MPI_Type_commit(&vec);
        double *strided = malloc(sizeof(double) * NB * STRIDE);
        double *packed = malloc(sizeof(double) * NB * BL);
        if (sender) {
            for (int i = 0; i < NB * STRIDE; i++)
                strided[i] = (i % STRIDE < BL) ? (double)i : -1.0;
            MPI_OK(MPI_Send(strided, 1, vec, g_partner, 1, g_comm));
            MPI_OK(MPI_Recv(strided, 1, vec, g_partner, 2, g_comm, MPI_STATUS_IGNORE));
            int bad = 0;
            for (int i = 0; i < NB * STRIDE; i++) {
                double want = (i % STRIDE < BL) ? (double)(i * 2) : -1.0;
                bad += strided[i] != want;
            }
            CHECK(bad == 0, "vector receive: %d elements wrong (gaps must stay untouched)", bad);
        } else {
            MPI_OK(MPI_Recv(packed, NB * BL, MPI_DOUBLE, g_partner, 1, g_comm, MPI_STATUS_IGNORE));
            int bad = 0;
            for (int b = 0; b < NB; b++)
                for (int j = 0; j < BL; j++)
                    bad += packed[b * BL + j] != (double)(b * STRIDE + j);
            CHECK(bad == 0, "vector send: %d packed elements wrong", bad);
            for (int b = 0; b < NB; b++)
                for (int j = 0; j < BL; j++)
                    packed[b * BL + j] = (double)((b * STRIDE + j) * 2);
            MPI_OK(MPI_Send(packed, NB * BL, MPI_DOUBLE, g_partner, 2, g_comm));
        }
        free(strided);
        free(packed);
        MPI_Type_free(&vec);
    }
    /* indexed: irregular block lengths and displacements */
    {
        enum { NBLK = 500 };
        int bl[NBLK], disp[NBLK], total = 0, pos = 0;
        for (int i = 0; i < NBLK; i++) {
            bl[i] = 1 + (i * 7) % 13;
            pos += 1 + (i * 5) % 4; /* gap */
            disp[i] = pos;
            pos += bl[i];
            total += bl[i];
        }
        MPI_Datatype idx;
        MPI_Type_indexed(NBLK, bl, disp, MPI_INT, &idx);
        MPI_Type_commit(&idx);
        int *sparse = malloc(sizeof(int) * (size_t)pos);
        int *dense = malloc(sizeof(int) * (size_t)total);
        if (sender) {
            for (int i = 0; i < pos; i++)
                sparse[i] = -i;
            MPI_OK(MPI_Send(sparse, 1, idx, g_partner, 3, g_comm));
        } else {
            MPI_OK(MPI_Recv(dense, total, MPI_INT, g_partner, 3, g_comm, MPI_STATUS_IGNORE));
            int k = 0, bad = 0;
            for (int i = 0; i < NBLK; i++)
                for (int j = 0; j < bl[i]; j++)
                    bad += dense[k++] != -(disp[i] + j);
            CHECK(bad == 0, "indexed: %d elements wrong", bad);
        }
        free(sparse);
        free(dense);
        MPI_Type_free(&idx);
    }
    /* struct: int + double + char[5], resized to the C struct's extent */
    {
        enum { NR = 3000 };
        int bl[3] = {1, 1, 5};
        MPI_Aint disp[3] = {offsetof(struct rec, id), offsetof(struct rec, val),
                            offsetof(struct rec, tag)};
        MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, st0, stt;
        MPI_Type_create_struct(3, bl, disp, types, &st0);
        MPI_Type_create_resized(st0, 0, sizeof(struct rec), &stt);
        MPI_Type_commit(&stt);
        struct rec *r = calloc(NR, sizeof(struct rec));
        if (sender) {
            for (int i = 0; i < NR; i++) {
                r[i].id = i;
                r[i].val = i * 0.5;
                snprintf(r[i].tag, 5, "%04d", i % 10000);
            }
            MPI_OK(MPI_Send(r, NR, stt, g_partner, 4, g_comm));
        } else {
            MPI_OK(MPI_Recv(r, NR, stt, g_partner, 4, g_comm, MPI_STATUS_IGNORE));
            int bad = 0;
            for (int i = 0; i < NR; i++) {
                char want[5];
                snprintf(want, 5, "%04d", i % 10000);
                bad += r[i].id != i || r[i].val != i * 0.5 || memcmp(r[i].tag, want, 5) != 0;
            }
            CHECK(bad == 0, "struct: %d records wrong", bad);
        }
        free(r);
        MPI_Type_free(&stt);
        MPI_Type_free(&st0);
    }
    MPI_OK(MPI_Barrier(g_comm));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    g_partner = g_rank ^ 1;
    if (g_partner >= g_size)
        g_partner = -1;
    size_t maxsize = (size_t)64 << 20;
    int rndv_trunc = 1, n_outstanding = 4096, mprobe = 1;
    /* usage: p2p [-m MAX_BYTES] [-n OUTSTANDING] [-s trunc-rndv|trunc|mprobe] (see top of file) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc)
            maxsize = (size_t)strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n_outstanding = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc && !strcmp(argv[i + 1], "trunc-rndv")) {
            rndv_trunc = 0;
            i++;
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc && !strcmp(argv[i + 1], "trunc")) {
            rndv_trunc = -1;
            i++;
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc && !strcmp(argv[i + 1], "mprobe")) {
            mprobe = 0;
            i++;
        } else {
            if (g_rank == 0)
                fprintf(stderr, "usage: p2p [-m MAX_BYTES] [-n OUTSTANDING] [-s trunc-rndv|trunc|mprobe]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (g_rank == 0 && rndv_trunc == 0)
        printf("p2p: rendezvous-size truncation test skipped (-s trunc-rndv)\n");
    if (g_rank == 0 && rndv_trunc < 0)
        printf("p2p: truncation test skipped (-s trunc)\n");
    if (g_rank == 0 && !mprobe)
        printf("p2p: matched probe test skipped (-s mprobe)\n");
    if (g_size < 2 || g_size % 2 != 0) {
        if (g_rank == 0)
            fprintf(stderr, "p2p needs an even number of ranks (pairs r, r^1)\n");
        MPI_Finalize();
        return 2;
    }
    test_ordering_checked();
    test_wildcards();
    test_probe();
    if (mprobe)
        test_mprobe();
    if (rndv_trunc >= 0)
        test_truncation(rndv_trunc);
    test_many_outstanding(n_outstanding);
    test_sizes(maxsize);
    test_datatypes();
    MPI_Comm_free(&g_comm);
    return finish("p2p");
}
