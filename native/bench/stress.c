/* Stressors in the spirit of Frachtenberg & Etsion ("Hardware Parallelism: Are Operating Systems
 * Ready?"): `cpu` spins in an empty loop, `cache` chases pointers in a random cycle over a buffer
 * larger than the last-level cache so nearly every access misses. One thread per --threads.
 * With --batches the work is fixed instead of the duration: the threads take batches from a shared
 * counter until all are done, so the job is embarrassingly parallel and its run time measures how
 * much CPU it was given.
 *
 * Output (last line): stress kind=... threads=... buffer_mb=... seconds=... ops=... ops_per_s=... */
#include "bench_util.h"
#include "cosched.h"

#include <pthread.h>

enum stress_kind { CPU, CACHE };

static enum stress_kind kind = CPU;
static unsigned threads = 1;
static double duration = 5;
static uint64_t total_batches; /* 0: run for `duration` seconds */
static uint64_t batches_taken;
static size_t buffer_bytes;
static size_t *cycle; /* cycle[i] is the index visited after i */
static size_t cycle_length;
static double start_time;
/* Where each stressor leaves its result so the compiler cannot drop the work. */
static volatile uint64_t sink_out;

/* The last-level cache size from sysfs, or 0 when unknown. */
static size_t llc_bytes(void)
{
    size_t largest = 0;
    for (int index = 0; index < 8; index++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        FILE *file = fopen(path, "r");
        if (!file)
            break;
        size_t size;
        char unit = 0;
        if (fscanf(file, "%zu%c", &size, &unit) >= 1) {
            size *= unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
            if (size > largest)
                largest = size;
        }
        fclose(file);
    }
    return largest;
}

/* Sattolo's algorithm: a random permutation that is a single cycle through every slot. */
static void build_cycle(void)
{
    cycle_length = buffer_bytes / sizeof *cycle;
    cycle = malloc(cycle_length * sizeof *cycle);
    if (!cycle) {
        fprintf(stderr, "stress: cannot allocate %zu MiB\n", buffer_bytes >> 20);
        exit(1);
    }
    for (size_t i = 0; i < cycle_length; i++)
        cycle[i] = i;
    uint64_t state = 88172645463325252ull;
    for (size_t i = cycle_length - 1; i > 0; i--) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        size_t j = state % i;
        size_t swap = cycle[i];
        cycle[i] = cycle[j];
        cycle[j] = swap;
    }
}

static void *stressor(void *arg)
{
    uint64_t ops = 0, sink = (uintptr_t)arg;
    size_t position = (uintptr_t)arg * 7919 % (cycle_length ? cycle_length : 1);
    const uint64_t batch = 1 << 14;
    while (total_batches ? __atomic_fetch_add(&batches_taken, 1, __ATOMIC_RELAXED) < total_batches
                         : now_seconds() - start_time < duration) {
        if (kind == CPU) {
            sink = spin_work(batch, sink);
        } else {
            for (uint64_t i = 0; i < batch; i++)
                position = cycle[position];
        }
        ops += batch;
        if (cosched_heartbeat)
            cosched_heartbeat();
    }
    sink_out = sink ^ position;
    return (void *)(uintptr_t)ops;
}

static void usage(void)
{
    printf("usage: stress [--kind cpu|cache] [--threads N] [--duration S | --batches N] [--buffer-mb MB]\n"
           "cpu: an empty loop; cache: random pointer chasing over a buffer (default 4x the\n"
           "last-level cache, at least 64 MiB) so nearly every access misses. Runs for --duration\n"
           "seconds, or until the threads together have done --batches batches of 16384\n"
           "operations. Prints operations per second. Defaults: cpu, 1 thread, 5 s.\n");
}

int main(int argc, char **argv)
{
    bench_name = "stress";
    double buffer_mb = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage();
            return 0;
        } else if (!strcmp(arg, "--kind")) {
            const char *value = option_value(argc, argv, &i);
            if (!strcmp(value, "cpu"))
                kind = CPU;
            else if (!strcmp(value, "cache"))
                kind = CACHE;
            else
                usage_error("--kind must be cpu or cache, not '%s'", value);
        } else if (!strcmp(arg, "--threads")) {
            threads = (unsigned)parse_number(arg, option_value(argc, argv, &i), 1);
        } else if (!strcmp(arg, "--duration")) {
            duration = parse_number(arg, option_value(argc, argv, &i), 0);
        } else if (!strcmp(arg, "--batches")) {
            total_batches = (uint64_t)parse_number(arg, option_value(argc, argv, &i), 1);
        } else if (!strcmp(arg, "--buffer-mb")) {
            buffer_mb = parse_number(arg, option_value(argc, argv, &i), 1);
        } else {
            usage_error("unknown option '%s'", arg);
        }
    }
    if (kind == CACHE) {
        size_t llc = llc_bytes();
        buffer_bytes = buffer_mb > 0 ? (size_t)(buffer_mb * 1048576) : 4 * llc;
        if (buffer_mb <= 0 && buffer_bytes < (64u << 20))
            buffer_bytes = 64u << 20;
        build_cycle();
    }
    pthread_t ids[threads];
    start_time = now_seconds();
    for (unsigned t = 1; t < threads; t++)
        if (pthread_create(&ids[t], NULL, stressor, (void *)(uintptr_t)t)) {
            fprintf(stderr, "stress: cannot create thread %u\n", t);
            return 1;
        }
    uint64_t ops = (uintptr_t)stressor(0);
    for (unsigned t = 1; t < threads; t++) {
        void *result;
        pthread_join(ids[t], &result);
        ops += (uintptr_t)result;
    }
    double seconds = now_seconds() - start_time;
    printf("stress kind=%s threads=%u buffer_mb=%zu seconds=%.3f ops=%llu ops_per_s=%.0f\n",
           kind == CPU ? "cpu" : "cache", threads, buffer_bytes >> 20, seconds,
           (unsigned long long)ops, ops / seconds);
    return 0;
}
