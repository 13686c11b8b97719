/* osu.c - OSU-style point-to-point benchmark between ranks 0 and 1 (written here,
 * following the OSU micro-benchmarks' method): latency (ping-pong, half round
 * trip, us), bandwidth (window of W Isends then a 4-byte ack, MB/s = 1e6 B/s),
 * bidirectional bandwidth (both sides send a window), message rate (messages/s of
 * the bandwidth loop). Warm-up iterations are not timed. Every received message's
 * first and last byte are checked (cheap) so a broken transport cannot post numbers.
 *
 * usage: osu [-t latency|bw|bibw|mr|all] [-m MIN:MAX] [-s SIZE,...] [-i ITERS] [-x WARMUP]
 *            [-I LARGE_ITERS] [-j WINDOW_ITERS] [-J LARGE_WINDOW_ITERS] [-W WINDOW] [-B BYTES]
 *   -t  one test, a comma list of them (latency,bw,bibw) or all
 *   -m  the powers of two from MIN to MAX; -s instead: exactly these sizes (bytes)
 *   -i/-I  iterations up to / above 8 KiB; -j/-J the same for the window tests (bw, bibw,
 *       mr; default -i/-I), whose iterations each move WINDOW messages
 *   -B  a size's timed iterations move at most about BYTES (at least one iteration; a
 *       latency iteration moves 2 x size, a bw one WINDOW x size, a bibw one twice that),
 *       with a tenth of them (at least one) as warm-up: bounds the time of large sizes
 * output: lines "test size value unit", preceded by '#' comments. */
#include "common.h"
#include <unistd.h>

static int g_size;
static size_t g_min = 1, g_max = 4 << 20;
static int g_iters = 1000, g_iters_large = 100, g_warm = 100, g_window = 64;
static int g_witers, g_witers_large; /* -j/-J: iterations of the window tests (0 = -i/-I) */
static int g_windowed;               /* the test running is a window test */
static double g_budget; /* -B: bytes a size's timed iterations may move (0 = no bound) */
enum { LARGE = 8192, MAX_SIZES = 64 };

/* Timed iterations of the running test before -B bounds them. */
static int full_iters(size_t sz)
{
    if (g_windowed && (sz > LARGE ? g_witers_large : g_witers) > 0)
        return sz > LARGE ? g_witers_large : g_witers;
    return sz > LARGE ? g_iters_large : g_iters;
}

/* Timed iterations for a size whose iterations move per_iter bytes each. */
static int iters_for(size_t sz, double per_iter)
{
    int n = full_iters(sz);
    if (g_budget > 0 && per_iter * n > g_budget) {
        n = (int)(g_budget / per_iter);
        n = n < 1 ? 1 : n;
    }
    return n;
}
static int warm_for(size_t sz, double per_iter)
{
    int w = sz > LARGE ? (g_warm + 9) / 10 : g_warm, n = iters_for(sz, per_iter);
    int full = full_iters(sz);
    if (n < full) { /* bounded by -B: a tenth of the timed iterations, at least one */
        int b = n / 10 < 1 ? 1 : n / 10;
        w = w < b ? w : b;
    }
    return w;
}

/* 1 if the comma-separated list has the word w (or is "all") */
static int has_test(const char *list, const char *w)
{
    size_t n = strlen(w);
    if (!strcmp(list, "all"))
        return 1;
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, w, n) && (p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

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
    int n = iters_for(sz, 2.0 * sz), w = warm_for(sz, 2.0 * sz);
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
    double per_iter = (double)g_window * sz * (bidir ? 2 : 1);
    int n = iters_for(sz, per_iter), w = warm_for(sz, per_iter), W = g_window;
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
        fprintf(stderr, "usage: osu [-t latency|bw|bibw|mr|all|LIST] [-m MIN:MAX] [-s SIZE,...] "
                        "[-i ITERS] [-I LARGE_ITERS] [-j WINDOW_ITERS] [-J LARGE_WINDOW_ITERS] [-x WARMUP] "
                        "[-W WINDOW] [-B BYTES]\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const char *test = "all";
    size_t sizes[MAX_SIZES];
    int nsizes = 0, bad = 0;
    int opt;
    while ((opt = getopt(argc, argv, "t:m:s:i:I:j:J:x:W:B:h")) != -1) {
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
        case 's':
            for (char *p = optarg; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
                if (nsizes == MAX_SIZES) {
                    bad = 1;
                    break;
                }
                sizes[nsizes++] = strtoull(p, NULL, 0);
            }
            break;
        case 'B': g_budget = strtod(optarg, NULL); break;
        case 'i': g_iters = atoi(optarg); break;
        case 'j': g_witers = atoi(optarg); bad |= g_witers < 1; break;
        case 'J': g_witers_large = atoi(optarg); bad |= g_witers_large < 1; break;
        case 'I': g_iters_large = atoi(optarg); break;
        case 'x': g_warm = atoi(optarg); break;
        case 'W': g_window = atoi(optarg); break;
        default: usage(); MPI_Finalize(); return 2;
        }
    }
    if (nsizes > 0) { /* -s: the buffers fit the largest listed size */
        g_min = g_max = sizes[0];
        for (int k = 0; k < nsizes; k++) {
            bad |= sizes[k] < 1;
            g_max = sizes[k] > g_max ? sizes[k] : g_max;
        }
    } else {
        for (size_t s = g_min ? g_min : 1; s <= g_max && nsizes < MAX_SIZES; s *= 2)
            sizes[nsizes++] = s;
    }
    if (bad || g_size < 2 || g_iters < 1 || g_iters_large < 1 || g_window < 1 || g_warm < 0 ||
        g_budget < 0 || g_min > g_max || g_max > (1u << 30)) {
        usage();
        MPI_Finalize();
        return 2;
    }
    int do_lat = has_test(test, "latency"), do_bw = has_test(test, "bw");
    int do_bibw = has_test(test, "bibw"), do_mr = has_test(test, "mr");
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
    if (do_lat) {
        phase("latency");
        for (int k = 0; k < nsizes; k++) {
            size_t s = sizes[k];
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
        g_windowed = 1;
        for (int k = 0; k < nsizes; k++) {
            size_t s = sizes[k];
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
