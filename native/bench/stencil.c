/* stencil: memory-bound kernel, Jacobi sweeps of a 5-point stencil over a size x size grid (two
 * arrays well beyond the caches at the default size), one parallel region per sweep. */
#define KERNEL_NAME "stencil"
#define KERNEL_DESCRIPTION "Memory-bound: 5-point Jacobi sweeps over a grid, one parallel region per sweep."
#define DEFAULT_SIZE 2048
#define DEFAULT_ITERATIONS 800
#define MIN_SIZE 3
#include "kernel_main.h"

static double *grid, *next;

static void kernel_setup(long n)
{
    grid = malloc(sizeof(double) * n * n);
    next = malloc(sizeof(double) * n * n);
    if (!grid || !next)
        usage_error("--size %ld needs more memory than is available", n);
    for (long i = 0; i < n * n; i++)
        grid[i] = next[i] = (i / n == 0) ? 1.0 : 0.0; /* a hot top edge */
}

static void kernel_iteration(long n)
{
#pragma omp parallel
    {
        log_team();
#pragma omp for schedule(static)
        for (long i = 1; i < n - 1; i++)
            for (long j = 1; j < n - 1; j++)
                next[i * n + j] = 0.25 * (grid[(i - 1) * n + j] + grid[(i + 1) * n + j] +
                                          grid[i * n + j - 1] + grid[i * n + j + 1]);
    }
    double *swap = grid;
    grid = next;
    next = swap;
}

static double kernel_checksum(long n)
{
    double sum = 0;
    for (long i = 0; i < n * n; i++)
        sum += grid[i];
    return sum;
}
