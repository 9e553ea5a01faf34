/* LLVM libomp support: an OMPT tool, found by libomp through the ompt_start_tool symbol this library
 * exports, that makes each top-level parallel region follow the advice. libomp gives a tool no way
 * to change a region's team directly; but it reads the encountering task's nthreads-var after the
 * parallel_begin callback, so setting that ICV with omp_set_num_threads() from the callback sizes
 * the team being formed (the approach of BSC's DLB). The program's own value is remembered and put
 * back when the advice rises, so the team grows back.
 *
 * A num_threads clause wins over the ICV in libomp and cannot be lowered from here: such a region
 * runs at its clause's size, and the page records that size. Built only where omp-tools.h exists
 * (crates/cosched-native/build.rs); libgomp never calls ompt_start_tool. */
#define _GNU_SOURCE
#include "control_page.h"

#include <omp-tools.h>
#include <stddef.h>

/* libomp's API, resolved when libomp initializes the tool (this library links no OpenMP runtime). */
static int (*omp_get_max_threads_fn)(void);
static void (*omp_set_num_threads_fn)(int);

/* The nthreads-var this tool last set, and the program's own value it stands in for. Only the
 * initial thread encounters top-level regions, so plain statics suffice. */
static int applied_threads;
static int program_threads;

static void on_parallel_begin(ompt_data_t *encountering_task_data,
                              const ompt_frame_t *encountering_task_frame,
                              ompt_data_t *parallel_data, unsigned int requested_parallelism,
                              int flags, const void *codeptr_ra)
{
    (void)encountering_task_data, (void)encountering_task_frame, (void)codeptr_ra;
    parallel_data->value = 0;
    if ((flags & ompt_parallel_league) || !cosched_at_top_level())
        return;
    int icv = omp_get_max_threads_fn();
    if (icv != applied_threads)
        program_threads = icv; /* first region, or the program called omp_set_num_threads() */
    unsigned team;
    if ((int)requested_parallelism != icv) {
        /* A num_threads clause: recorded at the size it gets. */
        team = cosched_region_start(requested_parallelism, 0);
    } else {
        team = cosched_region_start((unsigned)program_threads, 1);
        if ((int)team != icv)
            omp_set_num_threads_fn((int)team);
        applied_threads = (int)team;
    }
    parallel_data->value = 1;
}

static void on_parallel_end(ompt_data_t *parallel_data, ompt_data_t *encountering_task_data,
                            int flags, const void *codeptr_ra)
{
    (void)encountering_task_data, (void)flags, (void)codeptr_ra;
    if (parallel_data->value == 1)
        cosched_region_end();
}

static int initialize(ompt_function_lookup_t lookup, int initial_device_num,
                      ompt_data_t *tool_data)
{
    (void)initial_device_num, (void)tool_data;
    ompt_set_callback_t set_callback = (ompt_set_callback_t)lookup("ompt_set_callback");
    if (!set_callback)
        return 0;
    omp_get_max_threads_fn = (int (*)(void))cosched_next_symbol("omp_get_max_threads");
    omp_set_num_threads_fn = (void (*)(int))cosched_next_symbol("omp_set_num_threads");
    int begin = set_callback(ompt_callback_parallel_begin, (ompt_callback_t)on_parallel_begin);
    int end = set_callback(ompt_callback_parallel_end, (ompt_callback_t)on_parallel_end);
    if (begin != ompt_set_always || end != ompt_set_always)
        return 0; /* a tool that cannot see every region would count wrongly: stay inactive */
    cosched_ompt_active = 1;
    return 1;
}

static void finalize(ompt_data_t *tool_data)
{
    (void)tool_data;
}

ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *runtime_version)
{
    (void)omp_version, (void)runtime_version;
    static ompt_start_tool_result_t result = {initialize, finalize, {0}};
    /* Without a control page there is nothing to follow: libomp then runs without a tool. */
    return cosched_page ? &result : NULL;
}
