/* BARRIER: the synchronisation microbenchmark of Peter et al. ("Gang scheduling isn't worth it...
 * yet", ETH TR 745, Fig. 1): threads repeat `work(interval + random(variance)); barrier;` and the
 * program reports loop iterations per second. Three barrier kinds show how waiting interacts with
 * scheduling: pure spinning, spin-then-block (the competitive barrier of Kontothanassis et al. that
 * the paper uses, spinning 50 us by default) and blocking at once. Pthreads, so the barrier is
 * exactly the one named, not the OpenMP runtime's.
 *
 * Output (last line): barrier kind=... threads=... interval_us=... variance_us=... spin_us=...
 *                     iterations=... seconds=... iterations_per_s=... */
#include "bench_util.h"
#include "cosched.h"

#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

enum barrier_kind { SPIN, SPIN_BLOCK, BLOCK };
static const char *kind_names[] = {"spin", "spin-block", "block"};

struct barrier {
    enum barrier_kind kind;
    unsigned threads;
    double spin_seconds;
    _Atomic unsigned arrived;
    _Atomic uint32_t generation; /* futex word: bumped to release a round */
    _Atomic unsigned sleepers;
    /* Decided by the last thread to arrive, before it releases the round. */
    _Atomic int stop;
    long rounds;
};

struct config {
    unsigned threads;
    /* interval_us is each thread's work per iteration; work_us, when set, is the iteration's total
     * work split among the threads (a fixed problem, so fewer threads take longer). */
    double interval_us, work_us, variance_us, spin_us, duration;
    long iterations;
    enum barrier_kind kind;
};

static struct config config = {2, 0, 0, 0, 50, 5, 0, SPIN};
static double work_per_us;
static double start_time;

static inline void cpu_relax(void)
{
    __builtin_ia32_pause();
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static int should_stop(long rounds)
{
    if (config.iterations)
        return rounds >= config.iterations;
    return now_seconds() - start_time >= config.duration;
}

/* Returns whether the benchmark is over, identically in every thread of the round. */
static int barrier_wait(struct barrier *b)
{
    uint32_t generation = atomic_load(&b->generation);
    if (atomic_fetch_add(&b->arrived, 1) + 1 == b->threads) {
        b->rounds++;
        atomic_store(&b->stop, should_stop(b->rounds));
        atomic_store(&b->arrived, 0);
        atomic_store(&b->generation, generation + 1);
        /* A sleeper registers before it checks the generation, so one of the two sides sees the
         * other: either it finds the new generation or this thread finds it registered. */
        if (b->kind != SPIN && atomic_load(&b->sleepers) > 0)
            futex_wake_all(&b->generation);
        if (cosched_heartbeat)
            cosched_heartbeat();
        return atomic_load(&b->stop);
    }
    if (b->kind != BLOCK) {
        double give_up = b->kind == SPIN ? INFINITY : now_seconds() + b->spin_seconds;
        unsigned polls = 0;
        while (atomic_load_explicit(&b->generation, memory_order_acquire) == generation) {
            cpu_relax();
            if (++polls % 64 == 0 && now_seconds() >= give_up)
                break;
        }
    }
    while (atomic_load(&b->generation) == generation) {
        atomic_fetch_add(&b->sleepers, 1);
        futex_wait(&b->generation, generation);
        atomic_fetch_sub(&b->sleepers, 1);
    }
    return atomic_load(&b->stop);
}

static struct barrier barrier;

/* Extra work of one iteration: a half-normal draw clamped to [0, variance] (the paper's rand). */
static double random_extra_us(unsigned *state)
{
    if (config.variance_us <= 0)
        return 0;
    double u1 = (rand_r(state) + 1.0) / (RAND_MAX + 2.0), u2 = rand_r(state) / (RAND_MAX + 1.0);
    double normal = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    double extra = fabs(normal) * config.variance_us / 3;
    return extra > config.variance_us ? config.variance_us : extra;
}

static void *worker(void *arg)
{
    unsigned state = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    uint64_t sink = (uintptr_t)arg;
    do {
        double us = config.interval_us + random_extra_us(&state);
        sink = spin_work((uint64_t)(us * work_per_us), sink);
    } while (!barrier_wait(&barrier));
    return (void *)(uintptr_t)(sink & 1);
}

static void usage(void)
{
    printf("usage: barrier [--threads N] [--kind spin|spin-block|block]\n"
           "               [--interval US | --work US] [--variance US] [--spin-us US]\n"
           "               [--duration S | --iterations N]\n"
           "Threads repeat `work(interval + random(0..variance)); barrier` (Peter et al., Fig. 1)\n"
           "and the program prints iterations per second. --work US sets the iteration's total\n"
           "work, split among the threads (interval = work / threads). Defaults: 2 threads, spin,\n"
           "interval 0, variance 0, spin-us 50 (spin-block only), duration 5 s.\n"
           "Example: barrier --threads 2 --kind spin-block --interval 20 --duration 3\n");
}

int main(int argc, char **argv)
{
    bench_name = "barrier";
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage();
            return 0;
        } else if (!strcmp(arg, "--threads")) {
            config.threads = (unsigned)parse_number(arg, option_value(argc, argv, &i), 1);
        } else if (!strcmp(arg, "--interval")) {
            config.interval_us = parse_number(arg, option_value(argc, argv, &i), 0);
        } else if (!strcmp(arg, "--work")) {
            config.work_us = parse_number(arg, option_value(argc, argv, &i), 0);
        } else if (!strcmp(arg, "--variance")) {
            config.variance_us = parse_number(arg, option_value(argc, argv, &i), 0);
        } else if (!strcmp(arg, "--spin-us")) {
            config.spin_us = parse_number(arg, option_value(argc, argv, &i), 0);
        } else if (!strcmp(arg, "--duration")) {
            config.duration = parse_number(arg, option_value(argc, argv, &i), 0);
            config.iterations = 0;
        } else if (!strcmp(arg, "--iterations")) {
            config.iterations = (long)parse_number(arg, option_value(argc, argv, &i), 1);
        } else if (!strcmp(arg, "--kind")) {
            const char *kind = option_value(argc, argv, &i);
            int found = 0;
            for (int k = 0; k < 3; k++)
                if (!strcmp(kind, kind_names[k])) {
                    config.kind = (enum barrier_kind)k;
                    found = 1;
                }
            if (!found)
                usage_error("--kind must be spin, spin-block or block, not '%s'", kind);
        } else {
            usage_error("unknown option '%s'", arg);
        }
    }
    if (config.work_us > 0) {
        if (config.interval_us > 0)
            usage_error("give either --interval (per thread) or --work (split among threads)");
        config.interval_us = config.work_us / config.threads;
    }
    work_per_us = calibrate_work();
    barrier.kind = config.kind;
    barrier.threads = config.threads;
    barrier.spin_seconds = config.spin_us * 1e-6;

    pthread_t threads[config.threads];
    start_time = now_seconds();
    for (unsigned t = 1; t < config.threads; t++)
        if (pthread_create(&threads[t], NULL, worker, (void *)(uintptr_t)t)) {
            fprintf(stderr, "barrier: cannot create thread %u\n", t);
            return 1;
        }
    worker((void *)0);
    for (unsigned t = 1; t < config.threads; t++)
        pthread_join(threads[t], NULL);
    double seconds = now_seconds() - start_time;

    printf("barrier kind=%s threads=%u interval_us=%g variance_us=%g spin_us=%g iterations=%ld "
           "seconds=%.3f iterations_per_s=%.1f\n",
           kind_names[config.kind], config.threads, config.interval_us, config.variance_us,
           config.kind == SPIN_BLOCK ? config.spin_us : 0, barrier.rounds, seconds,
           barrier.rounds / seconds);
    return 0;
}
