/* Small helpers shared by the benchmark programs: option parsing, clocks, calibrated busy work and
 * the one-line `key=value` result every program prints last. Header-only: each benchmark is one
 * translation unit. */
#ifndef COSCHED_BENCH_UTIL_H
#define COSCHED_BENCH_UTIL_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *bench_name = "bench";

__attribute__((noreturn, format(printf, 1, 2))) static void usage_error(const char *fmt, ...);
#include <stdarg.h>
static void usage_error(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%s: ", bench_name);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, " (try --help)\n");
    va_end(args);
    exit(2);
}

static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The value of option argv[*i] (which must have one); advances *i past it. */
static inline const char *option_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        usage_error("%s needs a value", argv[*i]);
    return argv[++*i];
}

static inline double parse_number(const char *option, const char *text, double min)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || value < min)
        usage_error("%s must be a number >= %g, not '%s'", option, min, text);
    return value;
}

/* Busy work that cannot be optimised away; its cost per unit is measured by calibrate_work(). */
static inline uint64_t spin_work(uint64_t units, uint64_t seed)
{
    for (uint64_t i = 0; i < units; i++)
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed;
}

/* Work units per microsecond on an idle core: the fastest of several short trials, so a trial
 * that was preempted does not count. */
static inline double calibrate_work(void)
{
    const uint64_t units = 200000;
    double best = 1e30;
    volatile uint64_t sink = 0;
    for (int trial = 0; trial < 20; trial++) {
        double start = now_seconds();
        sink += spin_work(units, (uint64_t)trial);
        double elapsed = now_seconds() - start;
        if (elapsed < best)
            best = elapsed;
    }
    (void)sink;
    return (double)units / (best * 1e6);
}

/* Team sizes seen by the parallel regions of a malleable kernel, printed as `teams=SIZE:COUNT,...`. */
#define MAX_TEAM 1024
struct team_log {
    long count[MAX_TEAM + 1];
};

static inline void team_log_add(struct team_log *log, int team)
{
    log->count[team > MAX_TEAM ? MAX_TEAM : team]++;
}

static inline void team_log_print(const struct team_log *log)
{
    printf(" teams=");
    const char *separator = "";
    for (int team = MAX_TEAM; team > 0; team--)
        if (log->count[team]) {
            printf("%s%d:%ld", separator, team, log->count[team]);
            separator = ",";
        }
}

#endif
