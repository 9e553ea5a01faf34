/* dense: compute-bound kernel, a cache-blocked product C = A * B of size x size matrices, one
 * parallel region per iteration over blocks of rows. */
#define KERNEL_NAME "dense"
#define KERNEL_DESCRIPTION "Compute-bound: blocked dense matrix product, one parallel region per iteration."
#define DEFAULT_SIZE 384
#define DEFAULT_ITERATIONS 120
#define MIN_SIZE 8
#include "kernel_main.h"

#define BLOCK 48

static double *a, *b, *c;

static void kernel_setup(long n)
{
    a = malloc(sizeof(double) * n * n);
    b = malloc(sizeof(double) * n * n);
    c = malloc(sizeof(double) * n * n);
    if (!a || !b || !c)
        usage_error("--size %ld needs more memory than is available", n);
    for (long i = 0; i < n * n; i++) {
        a[i] = (double)(i % 17) / 17.0;
        b[i] = (double)(i % 13) / 13.0;
    }
}

static void kernel_iteration(long n)
{
#pragma omp parallel
    {
        log_team();
#pragma omp for schedule(static)
        for (long ii = 0; ii < n; ii += BLOCK) {
            long i_end = ii + BLOCK < n ? ii + BLOCK : n;
            for (long i = ii; i < i_end; i++)
                for (long j = 0; j < n; j++)
                    c[i * n + j] = 0;
            for (long kk = 0; kk < n; kk += BLOCK) {
                long k_end = kk + BLOCK < n ? kk + BLOCK : n;
                for (long i = ii; i < i_end; i++)
                    for (long k = kk; k < k_end; k++) {
                        double aik = a[i * n + k];
                        for (long j = 0; j < n; j++)
                            c[i * n + j] += aik * b[k * n + j];
                    }
            }
        }
    }
}

static double kernel_checksum(long n)
{
    double sum = 0;
    for (long i = 0; i < n * n; i++)
        sum += c[i];
    return sum;
}
