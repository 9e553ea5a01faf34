/* The command line and result line shared by the malleable OpenMP kernels. A kernel defines
 * KERNEL_NAME, the defaults, and kernel_setup()/kernel_iteration()/kernel_checksum(); every
 * parallel region it starts logs its team size, which the result line reports so a caller can see
 * the kernel follow changing advice. */
#ifndef COSCHED_KERNEL_MAIN_H
#define COSCHED_KERNEL_MAIN_H

#include "bench_util.h"

#include <omp.h>

static struct team_log teams;

/* Call once inside every parallel region. */
static inline void log_team(void)
{
#pragma omp master
    team_log_add(&teams, omp_get_num_threads());
}

static void kernel_setup(long size);
static void kernel_iteration(long size);
static double kernel_checksum(long size);

int main(int argc, char **argv)
{
    bench_name = KERNEL_NAME;
    long size = DEFAULT_SIZE, iterations = DEFAULT_ITERATIONS;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            printf("usage: %s [--size N] [--iterations N] [--threads N]\n%s\n"
                   "Defaults: size %ld, %ld iterations, threads from OMP_NUM_THREADS. Prints the\n"
                   "wall time and the team sizes its parallel regions got (teams=SIZE:COUNT,...).\n",
                   KERNEL_NAME, KERNEL_DESCRIPTION, (long)DEFAULT_SIZE, (long)DEFAULT_ITERATIONS);
            return 0;
        } else if (!strcmp(arg, "--size")) {
            size = (long)parse_number(arg, option_value(argc, argv, &i), MIN_SIZE);
        } else if (!strcmp(arg, "--iterations")) {
            iterations = (long)parse_number(arg, option_value(argc, argv, &i), 1);
        } else if (!strcmp(arg, "--threads")) {
            omp_set_num_threads((int)parse_number(arg, option_value(argc, argv, &i), 1));
        } else {
            usage_error("unknown option '%s'", arg);
        }
    }
    kernel_setup(size);
    double start = now_seconds();
    for (long iteration = 0; iteration < iterations; iteration++)
        kernel_iteration(size);
    double seconds = now_seconds() - start;
    printf("%s size=%ld iterations=%ld seconds=%.3f per_iteration_ms=%.3f", KERNEL_NAME, size,
           iterations, seconds, seconds * 1e3 / iterations);
    team_log_print(&teams);
    printf(" checksum=%.6g\n", kernel_checksum(size));
    return 0;
}

#endif
