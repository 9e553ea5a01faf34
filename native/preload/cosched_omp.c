/* Core of libcosched-omp.so: maps the job's control page and turns advice into team sizes.
 * The runtime-specific entry points live in gomp_wrap.c (GNU libgomp) and ompt_tool.c (LLVM). */
#define _GNU_SOURCE
#include "control_page.h"
#include "cosched.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct cosched_page *cosched_page;

void *cosched_next_symbol(const char *name)
{
    void *symbol = dlsym(RTLD_NEXT, name);
    if (!symbol) {
        fprintf(stderr, "libcosched-omp: cannot find %s in the OpenMP runtime: %s\n", name,
                dlerror());
        abort();
    }
    return symbol;
}

/* Resolves an OpenMP API function once; the cache is written with the same value by any racer. */
#define OMP_FUNCTION(type, name)                                                                  \
    static type name##_fn(void)                                                                   \
    {                                                                                             \
        static type (*cached)(void);                                                              \
        type (*fn)(void) = __atomic_load_n(&cached, __ATOMIC_RELAXED);                            \
        if (!fn) {                                                                                \
            fn = (type(*)(void))cosched_next_symbol(#name);                                       \
            __atomic_store_n(&cached, fn, __ATOMIC_RELAXED);                                      \
        }                                                                                         \
        return fn();                                                                              \
    }

OMP_FUNCTION(int, omp_get_level)
OMP_FUNCTION(int, omp_get_max_threads)

/* Maps the page named by COSCHED_CONTROL before main(); any problem leaves cosched_page NULL,
 * which turns the library into a pass-through. */
__attribute__((constructor)) static void map_control_page(void)
{
    const char *path = getenv("COSCHED_CONTROL");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size >= COSCHED_PAGE_SIZE)
        map = mmap(NULL, COSCHED_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    struct cosched_page *page = map;
    if (atomic_load_explicit(&page->magic, memory_order_acquire) != COSCHED_MAGIC ||
        atomic_load_explicit(&page->version, memory_order_relaxed) != COSCHED_VERSION) {
        munmap(map, COSCHED_PAGE_SIZE);
        return;
    }
    cosched_page = page;
}

int cosched_ompt_active;

int cosched_at_top_level(void)
{
    return cosched_page && omp_get_level_fn() == 0;
}

unsigned cosched_region_start(unsigned wanted, int can_cap)
{
    struct cosched_page *page = cosched_page;
    /* Generation before advice: a change racing with this read is reported as not yet seen. */
    uint32_t generation = atomic_load_explicit(&page->generation, memory_order_acquire);
    uint32_t advice = atomic_load_explicit(&page->advised_threads, memory_order_acquire);
    unsigned team = can_cap && advice != 0 && advice < wanted ? advice : wanted;
    atomic_fetch_add_explicit(&page->regions_started, 1, memory_order_relaxed);
    atomic_store_explicit(&page->last_team_size, team, memory_order_relaxed);
    atomic_store_explicit(&page->seen_generation, generation, memory_order_release);
    return team;
}

unsigned cosched_region_begin(unsigned requested)
{
    unsigned wanted = requested ? requested : (unsigned)omp_get_max_threads_fn();
    unsigned team = cosched_region_start(wanted, 1);
    /* Leave a default request alone when the advice does not lower it, so the runtime keeps its
     * own rules (dynamic adjustment, thread limits) exactly as without the library. */
    return requested == 0 && team == wanted ? 0 : team;
}

void cosched_region_end(void)
{
    atomic_fetch_add_explicit(&cosched_page->regions_completed, 1, memory_order_release);
}

void cosched_heartbeat(void)
{
    if (cosched_page)
        atomic_fetch_add_explicit(&cosched_page->heartbeats, 1, memory_order_release);
}

int cosched_threads(void)
{
    return cosched_page ? (int)atomic_load_explicit(&cosched_page->advised_threads,
                                                    memory_order_acquire)
                        : 0;
}
