/* Test program for the preload library: reads one command per line from stdin, runs the parallel
 * construct it names and prints the team size that construct got, so a test can change the advice
 * between regions and check each region's team.
 *
 * Commands: parallel, one (num_threads(1)), three (num_threads(3)), static, dynamic,
 * monotonic_dynamic, guided, runtime, sections, task_reduction, legacy, nested, teams, heartbeat. */
#include "cosched.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

/* The legacy start/end pair GCC < 4.9 emitted; still exported by libgomp. */
void GOMP_parallel_start(void (*fn)(void *), void *data, unsigned num_threads);
void GOMP_parallel_end(void);

/* Any member of the team may record: all of them see the same team size. */
static void record_team(void *team)
{
    __atomic_store_n((int *)team, omp_get_num_threads(), __ATOMIC_RELAXED);
}

static int team_of_legacy_region(void)
{
    int team = 0;
    GOMP_parallel_start(record_team, &team, 0);
    record_team(&team);
    GOMP_parallel_end();
    return team;
}

static int run(const char *command)
{
    int team = -1;
    long sum = 0;
    if (!strcmp(command, "parallel")) {
#pragma omp parallel
        record_team(&team);
    } else if (!strcmp(command, "one")) {
#pragma omp parallel num_threads(1)
        record_team(&team);
    } else if (!strcmp(command, "three")) {
#pragma omp parallel num_threads(3)
        record_team(&team);
    } else if (!strcmp(command, "static")) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < 64; i++)
            record_team(&team);
    } else if (!strcmp(command, "dynamic")) {
#pragma omp parallel for schedule(dynamic, 4)
        for (int i = 0; i < 64; i++)
            record_team(&team);
    } else if (!strcmp(command, "monotonic_dynamic")) {
#pragma omp parallel for schedule(monotonic : dynamic, 4)
        for (int i = 0; i < 64; i++)
            record_team(&team);
    } else if (!strcmp(command, "guided")) {
#pragma omp parallel for schedule(guided)
        for (int i = 0; i < 64; i++)
            record_team(&team);
    } else if (!strcmp(command, "runtime")) {
#pragma omp parallel for schedule(runtime)
        for (int i = 0; i < 64; i++)
            record_team(&team);
    } else if (!strcmp(command, "sections")) {
#pragma omp parallel sections
        {
#pragma omp section
            record_team(&team);
#pragma omp section
            sum += 1;
        }
    } else if (!strcmp(command, "task_reduction")) {
#pragma omp parallel reduction(task, + : sum)
        {
            record_team(&team);
#pragma omp task in_reduction(+ : sum)
            sum += 1;
        }
    } else if (!strcmp(command, "legacy")) {
        team = team_of_legacy_region();
    } else if (!strcmp(command, "nested")) {
        /* The inner region's team; only the outer one is capped. */
        omp_set_max_active_levels(2);
#pragma omp parallel num_threads(1)
        {
#pragma omp parallel num_threads(2)
            record_team(&team);
        }
    } else if (!strcmp(command, "teams")) {
#pragma omp teams num_teams(2)
        {
#pragma omp parallel
            record_team(&team);
        }
    } else if (!strcmp(command, "heartbeat")) {
        if (cosched_heartbeat)
            cosched_heartbeat();
        team = 0;
    }
    (void)sum;
    return team;
}

int main(void)
{
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line)
            continue;
        printf("%s team=%d\n", line, run(line));
        fflush(stdout);
    }
    return 0;
}
