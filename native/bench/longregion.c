/* longregion: an OpenMP program that does almost all of its work inside one long parallel region,
 * whose threads meet at a spinning barrier after every round. Labelled malleable, it is not: advice
 * reaches an OpenMP program only when a parallel region starts, and this one starts its last region
 * early. A policy that shrinks it then leaves its whole team time-sharing fewer CPUs, where the spinning
 * barrier stalls every round. A few short regions come first, as a program's set-up would.
 *
 * The work is fixed: --rounds rounds of --work microseconds each, split among the team, so fewer
 * threads take longer. Thread 0 counts one heartbeat per round (cosched.h) as progress.
 *
 * Output (last line): longregion threads=... rounds=... work_us=... seconds=... rounds_per_s=... */
#include "bench_util.h"
#include "cosched.h"

#include <omp.h>
#include <stdatomic.h>

static void usage(void)
{
    printf("usage: longregion [--rounds N] [--work US] [--setup-regions K]\n"
           "One long OpenMP parallel region of N rounds (default 3000) of US microseconds of work\n"
           "(default 1000) split among the threads, with a spinning barrier after each round; K short\n"
           "regions (default 3) before it. Threads: OMP_NUM_THREADS.\n");
}

/* Sense-reversing barrier that only spins: a thread waiting here keeps its CPU busy. */
struct spin_barrier {
    _Atomic int arrived;
    _Atomic int sense;
};

static void spin_barrier_wait(struct spin_barrier *b, int team, int *local_sense)
{
    *local_sense = !*local_sense;
    if (atomic_fetch_add(&b->arrived, 1) + 1 == team) {
        atomic_store(&b->arrived, 0);
        atomic_store(&b->sense, *local_sense);
    } else {
        while (atomic_load_explicit(&b->sense, memory_order_acquire) != *local_sense)
            __builtin_ia32_pause();
    }
}

int main(int argc, char **argv)
{
    bench_name = "longregion";
    long rounds = 3000, setup_regions = 3;
    double work_us = 1000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else if (!strcmp(argv[i], "--rounds"))
            rounds = (long)parse_number("--rounds", option_value(argc, argv, &i), 1);
        else if (!strcmp(argv[i], "--work"))
            work_us = parse_number("--work", option_value(argc, argv, &i), 1);
        else if (!strcmp(argv[i], "--setup-regions"))
            setup_regions = (long)parse_number("--setup-regions", option_value(argc, argv, &i), 0);
        else
            usage_error("unknown option '%s'", argv[i]);
    }
    double per_us = calibrate_work();
    volatile uint64_t sink = 0;
    double start = now_seconds();
    for (long r = 0; r < setup_regions; r++) {
#pragma omp parallel
        {
            uint64_t units = (uint64_t)(per_us * work_us / omp_get_num_threads());
            uint64_t v = spin_work(units, (uint64_t)omp_get_thread_num());
#pragma omp atomic
            sink += v;
        }
    }
    struct spin_barrier barrier = {0, 0};
    int threads = 0;
#pragma omp parallel
    {
        int team = omp_get_num_threads();
        int me = omp_get_thread_num();
        int local_sense = 0;
        uint64_t units = (uint64_t)(per_us * work_us / team);
        uint64_t v = (uint64_t)me;
        if (me == 0)
            threads = team;
        for (long r = 0; r < rounds; r++) {
            v = spin_work(units, v);
            spin_barrier_wait(&barrier, team, &local_sense);
            if (me == 0 && cosched_heartbeat)
                cosched_heartbeat();
        }
#pragma omp atomic
        sink += v;
    }
    double seconds = now_seconds() - start;
    (void)sink;
    printf("longregion threads=%d rounds=%ld work_us=%g seconds=%.3f rounds_per_s=%.1f\n", threads,
           rounds, work_us, seconds, rounds / seconds);
    return 0;
}
