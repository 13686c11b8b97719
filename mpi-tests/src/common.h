/* common.h - shared helpers for the self-checking MPI test programs:
 * failure counting, deterministic byte patterns, wall-clock phase timing. */
#ifndef SPRAY_MPI_COMMON_H
#define SPRAY_MPI_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Failures seen by this rank; summed over ranks at the end. */
static long g_failures = 0;
static int g_rank = -1;
static const char *g_phase = "init";

/* Report one failed check with rank and phase; keeps going so one run shows
 * every broken case, but caps the printout so a flood does not hide the cause. */
static void failf(const char *fmt, ...)
{
    g_failures++;
    if (g_failures > 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL rank %d [%s]: ", g_rank, g_phase);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
}

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond))                                                                        \
            failf(__VA_ARGS__);                                                             \
    } while (0)

/* Call an MPI function that must succeed (with MPI_ERRORS_RETURN set it returns codes). */
#define MPI_OK(call)                                                                        \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        if (rc_ != MPI_SUCCESS) {                                                           \
            char es_[MPI_MAX_ERROR_STRING];                                                 \
            int el_ = 0;                                                                    \
            MPI_Error_string(rc_, es_, &el_);                                               \
            failf("%s returned %d (%s) at %s:%d", #call, rc_, es_, __FILE__, __LINE__);     \
        }                                                                                   \
    } while (0)

/* Byte i of the pattern for (seed): depends on the position at several scales so a
 * shifted, duplicated or swapped block of any size from 1 B to MiBs is detected. */
static inline uint8_t pat_byte(size_t i, uint32_t seed)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 11) * 40503u ^ seed * 97u;
    return (uint8_t)(x ^ (x >> 13) ^ (x >> 24));
}

static void pat_fill(void *buf, size_t n, uint32_t seed)
{
    uint8_t *b = (uint8_t *)buf;
    for (size_t i = 0; i < n; i++)
        b[i] = pat_byte(i, seed);
}

/* Returns the index of the first wrong byte, or (size_t)-1 when all match. */
static size_t pat_check(const void *buf, size_t n, uint32_t seed)
{
    const uint8_t *b = (const uint8_t *)buf;
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat_byte(i, seed))
            return i;
    return (size_t)-1;
}

static void phase(const char *name)
{
    g_phase = name;
    if (g_rank == 0 && getenv("MPI_TEST_VERBOSE")) {
        printf("phase %s\n", name);
        fflush(stdout);
    }
}

/* Sums failures over all ranks, prints one summary line on rank 0, finalizes.
 * Returns the process exit code (0 only if every rank passed). */
static int finish(const char *prog)
{
    long total = 0;
    g_phase = "finish";
    MPI_Allreduce(&g_failures, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (total == 0)
            printf("%s: all checks passed\n", prog);
        else
            printf("%s: %ld checks FAILED\n", prog, total);
        fflush(stdout);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}

#endif
