/* spmv: irregular kernel, power iteration x = A x / |A x| with a random sparse matrix in CSR form
 * whose rows hold 1 to 31 entries at random columns, so both the work per row and the accesses to
 * x are irregular. Two parallel regions per iteration (product, then normalisation). */
#define KERNEL_NAME "spmv"
#define KERNEL_DESCRIPTION "Irregular: sparse matrix-vector products on a random matrix (rows = size)."
#define DEFAULT_SIZE 400000
#define DEFAULT_ITERATIONS 400
#define MIN_SIZE 1
#include "kernel_main.h"

#include <math.h>

static long *row_start;
static int *column;
static double *value, *x, *y;

static void kernel_setup(long rows)
{
    row_start = malloc(sizeof(long) * (rows + 1));
    x = malloc(sizeof(double) * rows);
    y = malloc(sizeof(double) * rows);
    if (!row_start || !x || !y)
        usage_error("--size %ld needs more memory than is available", rows);
    uint64_t state = 0x9E3779B97F4A7C15ull;
#define NEXT_RANDOM() (state ^= state << 13, state ^= state >> 7, state ^= state << 17, state)
    row_start[0] = 0;
    for (long r = 0; r < rows; r++)
        row_start[r + 1] = row_start[r] + 1 + (long)(NEXT_RANDOM() % 31);
    long entries = row_start[rows];
    column = malloc(sizeof(int) * entries);
    value = malloc(sizeof(double) * entries);
    if (!column || !value)
        usage_error("--size %ld needs more memory than is available", rows);
    for (long e = 0; e < entries; e++) {
        column[e] = (int)(NEXT_RANDOM() % (uint64_t)rows);
        value[e] = (double)(NEXT_RANDOM() % 1000) / 1000.0;
    }
#undef NEXT_RANDOM
    for (long r = 0; r < rows; r++)
        x[r] = 1.0;
}

static void kernel_iteration(long rows)
{
    double norm = 0;
#pragma omp parallel
    {
        log_team();
#pragma omp for schedule(dynamic, 1024) reduction(+ : norm)
        for (long r = 0; r < rows; r++) {
            double sum = 0;
            for (long e = row_start[r]; e < row_start[r + 1]; e++)
                sum += value[e] * x[column[e]];
            y[r] = sum;
            norm += sum * sum;
        }
    }
    double scale = norm > 0 ? 1.0 / sqrt(norm) : 1.0;
#pragma omp parallel
    {
        log_team();
#pragma omp for schedule(static)
        for (long r = 0; r < rows; r++)
            x[r] = y[r] * scale;
    }
}

static double kernel_checksum(long rows)
{
    double sum = 0;
    for (long r = 0; r < rows; r++)
        sum += x[r];
    return sum;
}
