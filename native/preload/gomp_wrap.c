/* GNU libgomp entry points that start a parallel region (the combined constructs and the legacy
 * start/end pairs of GCC < 4.9), wrapped so a top-level region's team size follows the advice.
 * Each wrapper forwards to the next definition of the same symbol, normally libgomp's.
 *
 * GOMP_teams_reg (host teams) is deliberately not wrapped: libgomp runs the teams one after another
 * on the initial thread at level 0, so the parallel regions inside them are top-level regions and
 * are capped here; capping the teams' thread limit too would freeze the advice for the whole
 * construct and stop it from growing back. */
#define _GNU_SOURCE
#include "control_page.h"

#include <stdbool.h>

/* A region these wrappers manage: top-level, and not already seen by the OMPT tool (LLVM libomp
 * exports GOMP_* too, for GCC-built programs). */
static int managed_here(void)
{
    return !cosched_ompt_active && cosched_at_top_level();
}

typedef void (*region_fn)(void *);

/* The next definition of the wrapped function `name`, resolved once. */
#define NEXT(name)                                                                                \
    ({                                                                                            \
        static __typeof__(&name) cached;                                                          \
        __typeof__(&name) next = __atomic_load_n(&cached, __ATOMIC_RELAXED);                      \
        if (!next) {                                                                              \
            next = (__typeof__(&name))cosched_next_symbol(#name);                                 \
            __atomic_store_n(&cached, next, __ATOMIC_RELAXED);                                    \
        }                                                                                         \
        next;                                                                                     \
    })

/* A combined construct: the whole region runs inside the call. `threads` names the num_threads
 * argument; the remaining arguments are forwarded untouched. */
#define WRAP_REGION(ret, name, params, threads, args)                                             \
    ret name params;                                                                              \
    ret name params                                                                               \
    {                                                                                             \
        int top = managed_here();                                                                 \
        if (top)                                                                                  \
            threads = cosched_region_begin(threads);                                              \
        WRAP_CALL_##ret(name, args)                                                               \
    }
#define WRAP_CALL_void(name, args)                                                                \
    NEXT(name) args;                                                                              \
    if (top)                                                                                      \
        cosched_region_end();
#define WRAP_CALL_unsigned(name, args)                                                            \
    unsigned result = NEXT(name) args;                                                            \
    if (top)                                                                                      \
        cosched_region_end();                                                                     \
    return result;

/* A legacy start: the team is formed here, the region ends in GOMP_parallel_end(). */
#define WRAP_START(name, params, threads, args)                                                   \
    void name params;                                                                             \
    void name params                                                                              \
    {                                                                                             \
        if (managed_here())                                                                       \
            threads = cosched_region_begin(threads);                                              \
        NEXT(name) args;                                                                          \
    }

WRAP_REGION(void, GOMP_parallel, (region_fn fn, void *data, unsigned n, unsigned flags), n,
            (fn, data, n, flags))
WRAP_REGION(unsigned, GOMP_parallel_reductions,
            (region_fn fn, void *data, unsigned n, unsigned flags), n, (fn, data, n, flags))
WRAP_REGION(void, GOMP_parallel_sections,
            (region_fn fn, void *data, unsigned n, unsigned count, unsigned flags), n,
            (fn, data, n, count, flags))

#define WRAP_LOOP(name)                                                                           \
    WRAP_REGION(void, name,                                                                       \
                (region_fn fn, void *data, unsigned n, long start, long end, long incr,          \
                 long chunk, unsigned flags),                                                     \
                n, (fn, data, n, start, end, incr, chunk, flags))
#define WRAP_RUNTIME_LOOP(name)                                                                   \
    WRAP_REGION(void, name,                                                                       \
                (region_fn fn, void *data, unsigned n, long start, long end, long incr,          \
                 unsigned flags),                                                                 \
                n, (fn, data, n, start, end, incr, flags))

WRAP_LOOP(GOMP_parallel_loop_static)
WRAP_LOOP(GOMP_parallel_loop_dynamic)
WRAP_LOOP(GOMP_parallel_loop_guided)
WRAP_LOOP(GOMP_parallel_loop_nonmonotonic_dynamic)
WRAP_LOOP(GOMP_parallel_loop_nonmonotonic_guided)
WRAP_RUNTIME_LOOP(GOMP_parallel_loop_runtime)
WRAP_RUNTIME_LOOP(GOMP_parallel_loop_nonmonotonic_runtime)
WRAP_RUNTIME_LOOP(GOMP_parallel_loop_maybe_nonmonotonic_runtime)

WRAP_START(GOMP_parallel_start, (region_fn fn, void *data, unsigned n), n, (fn, data, n))
WRAP_START(GOMP_parallel_sections_start,
           (region_fn fn, void *data, unsigned n, unsigned count), n, (fn, data, n, count))
WRAP_START(GOMP_parallel_loop_static_start,
           (region_fn fn, void *data, unsigned n, long start, long end, long incr, long chunk), n,
           (fn, data, n, start, end, incr, chunk))
WRAP_START(GOMP_parallel_loop_dynamic_start,
           (region_fn fn, void *data, unsigned n, long start, long end, long incr, long chunk), n,
           (fn, data, n, start, end, incr, chunk))
WRAP_START(GOMP_parallel_loop_guided_start,
           (region_fn fn, void *data, unsigned n, long start, long end, long incr, long chunk), n,
           (fn, data, n, start, end, incr, chunk))
WRAP_START(GOMP_parallel_loop_runtime_start,
           (region_fn fn, void *data, unsigned n, long start, long end, long incr), n,
           (fn, data, n, start, end, incr))

void GOMP_parallel_end(void);
void GOMP_parallel_end(void)
{
    NEXT(GOMP_parallel_end)();
    /* Back at level 0 means the region that just ended was a top-level one, counted at its start. */
    if (managed_here())
        cosched_region_end();
}
