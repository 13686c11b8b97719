/* osu.c - OSU-style point-to-point benchmark between ranks 0 and 1 (written here,
 * following the OSU micro-benchmarks' method): latency (ping-pong, half round
 * trip, us), bandwidth (window of W Isends then a 4-byte ack, MB/s = 1e6 B/s),
 * bidirectional bandwidth (both sides send a window), message rate (messages/s of
 * the bandwidth loop). Warm-up iterations are not timed. Every received message's
 * first and last byte are checked (cheap) so a broken transport cannot post numbers.
 *
 * usage: osu [-t latency|bw|bibw|mr|all] [-m MIN:MAX] [-i ITERS] [-x WARMUP]
 *            [-I LARGE_ITERS] [-W WINDOW]
 * output: lines "test size value unit", preceded by '#' comments. */
#include "common.h"
#include <unistd.h>

static int g_size;
static size_t g_min = 1, g_max = 4 << 20;
static int g_iters = 1000, g_iters_large = 100, g_warm = 100, g_window = 64;
enum { LARGE = 8192 };

static int iters_for(size_t sz) { return sz > LARGE ? g_iters_large : g_iters; }
static int warm_for(size_t sz) { return sz > LARGE ? (g_warm + 9) / 10 : g_warm; }

static void mark(uint8_t *b, size_t sz, uint8_t v)
{
    if (sz) {
        b[0] = v;
        b[sz - 1] = v;
    }
}
static void expect(const uint8_t *b, size_t sz, uint8_t v, const char *what)
{
    if (sz && (b[0] != v || b[sz - 1] != v))
        failf("%s %zu B: payload marker 0x%02x/0x%02x, expected 0x%02x", what, sz, b[0],
              b[sz - 1], v);
}

static double latency(size_t sz, uint8_t *sb, uint8_t *rb)
{
    int n = iters_for(sz), w = warm_for(sz);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n + w; i++) {
        if (i == w)
            t0 = MPI_Wtime();
        if (g_rank == 0) {
            mark(sb, sz, (uint8_t)i);
            MPI_Send(sb, (int)sz, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rb, (int)sz, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            expect(rb, sz, (uint8_t)(i + 1), "latency");
        } else if (g_rank == 1) {
            MPI_Recv(rb, (int)sz, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            expect(rb, sz, (uint8_t)i, "latency");
            mark(sb, sz, (uint8_t)(i + 1));
            MPI_Send(sb, (int)sz, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * n);
}

/* returns elapsed seconds of the timed part; bidir: both ranks send windows */
static double window_loop(size_t sz, uint8_t *sb, uint8_t *rb, int bidir, int *out_iters)
{
    int n = iters_for(sz), w = warm_for(sz), W = g_window;
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t)W);
    int ack = 0;
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n + w; i++) {
        if (i == w)
            t0 = MPI_Wtime();
        int nr = 0;
        if (g_rank == 0 || (bidir && g_rank == 1)) {
            int peer = 1 - g_rank;
            if (bidir)
                for (int k = 0; k < W; k++)
                    MPI_Irecv(rb + (size_t)k * sz, (int)sz, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                              &rq[nr++]);
            mark(sb, sz, (uint8_t)(i * 3));
            for (int k = 0; k < W; k++)
                MPI_Isend(sb, (int)sz, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[nr++]);
            MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE);
            if (bidir)
                expect(rb + (size_t)(W - 1) * sz, sz, (uint8_t)(i * 3), "bibw");
            else
                MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (g_rank == 1) {
            for (int k = 0; k < W; k++)
                MPI_Irecv(rb + (size_t)k * sz, (int)sz, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &rq[nr++]);
            MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE);
            expect(rb + (size_t)(W - 1) * sz, sz, (uint8_t)(i * 3), "bw");
            MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        }
    }
    double dt = MPI_Wtime() - t0;
    free(rq);
    *out_iters = n;
    return dt;
}

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr, "usage: osu [-t latency|bw|bibw|mr|all] [-m MIN:MAX] [-i ITERS] "
                        "[-I LARGE_ITERS] [-x WARMUP] [-W WINDOW]\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const char *test = "all";
    int opt;
    while ((opt = getopt(argc, argv, "t:m:i:I:x:W:h")) != -1) {
        switch (opt) {
        case 't': test = optarg; break;
        case 'm': {
            char *colon = strchr(optarg, ':');
            if (colon) {
                if (colon != optarg)
                    g_min = strtoull(optarg, NULL, 0);
                g_max = strtoull(colon + 1, NULL, 0);
            } else {
                g_max = strtoull(optarg, NULL, 0);
            }
            break;
        }
        case 'i': g_iters = atoi(optarg); break;
        case 'I': g_iters_large = atoi(optarg); break;
        case 'x': g_warm = atoi(optarg); break;
        case 'W': g_window = atoi(optarg); break;
        default: usage(); MPI_Finalize(); return 2;
        }
    }
    if (g_size < 2 || g_iters < 1 || g_iters_large < 1 || g_window < 1 || g_warm < 0 ||
        g_min > g_max || g_max > (1u << 30)) {
        usage();
        MPI_Finalize();
        return 2;
    }
    int all = strcmp(test, "all") == 0;
    int do_lat = all || !strcmp(test, "latency"), do_bw = all || !strcmp(test, "bw");
    int do_bibw = all || !strcmp(test, "bibw"), do_mr = all || !strcmp(test, "mr");
    if (!(do_lat || do_bw || do_bibw || do_mr)) {
        usage();
        MPI_Finalize();
        return 2;
    }
    uint8_t *sb = malloc(g_max ? g_max : 1);
    uint8_t *rb = malloc((size_t)g_window * (g_max ? g_max : 1));
    memset(sb, 1, g_max ? g_max : 1);
    if (g_rank == 0) {
        printf("# OSU-style benchmark, %d ranks (0 and 1 measure), window %d, iters %d/%d, "
               "warmup %d\n# test size value unit\n",
               g_size, g_window, g_iters, g_iters_large, g_warm);
        fflush(stdout);
    }
    size_t start = g_min ? g_min : 1;
    if (do_lat) {
        phase("latency");
        for (size_t s = start; s <= g_max; s *= 2) {
            double us = latency(s, sb, rb);
            if (g_rank == 0)
                printf("latency %zu %.2f us\n", s, us);
            fflush(stdout);
        }
    }
    for (int kind = 0; kind < 3; kind++) {
        int on = kind == 0 ? do_bw : kind == 1 ? do_bibw : do_mr;
        const char *name = kind == 0 ? "bw" : kind == 1 ? "bibw" : "mr";
        if (!on)
            continue;
        phase(name);
        for (size_t s = start; s <= g_max; s *= 2) {
            int n = 0;
            double dt = window_loop(s, sb, rb, kind == 1, &n);
            double msgs = (double)n * g_window * (kind == 1 ? 2 : 1);
            if (g_rank == 0) {
                if (kind == 2)
                    printf("mr %zu %.0f msg/s\n", s, msgs / dt);
                else
                    printf("%s %zu %.2f MB/s\n", name, s, msgs * (double)s / dt / 1e6);
                fflush(stdout);
            }
        }
    }
    free(sb);
    free(rb);
    return finish("osu");
}
