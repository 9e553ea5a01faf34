/* Version-1 control page layout and the library's internal interface (docs/control-page.md). */
#ifndef COSCHED_CONTROL_PAGE_H
#define COSCHED_CONTROL_PAGE_H

#include <stdatomic.h>
#include <stdint.h>

#define COSCHED_MAGIC 0x48435343u /* "CSCH" little-endian */
#define COSCHED_VERSION 1u
#define COSCHED_PAGE_SIZE 4096

struct cosched_page {
    _Atomic uint32_t magic;
    _Atomic uint32_t version;
    _Atomic uint32_t advised_threads;
    _Atomic uint32_t generation;
    _Atomic uint64_t regions_completed;
    _Atomic uint64_t heartbeats;
    _Atomic uint32_t last_team_size;
    _Atomic uint32_t seen_generation;
    _Atomic uint64_t regions_started;
};

_Static_assert(sizeof(struct cosched_page) == 48, "control page layout v1 is 48 bytes");

/* The job's page, or NULL when there is none: then every wrapper passes its arguments through. */
extern struct cosched_page *cosched_page;

/* Looks up `name` in the libraries after this one; aborts with a message if it is missing, because
 * a wrapper without its target cannot do anything sensible. */
void *cosched_next_symbol(const char *name);

/* Whether a parallel region started now would be a top-level one the library manages: there is a
 * page and the calling thread is outside any parallel region. */
int cosched_at_top_level(void);

/* Set once the OMPT tool (ompt_tool.c) is registered with LLVM libomp: the runtime then reports
 * every region through OMPT, and the GOMP_* wrappers, which libomp also exports, stand aside so
 * that no region is counted twice. */
extern int cosched_ompt_active;

/* Records the start of a top-level region that wants `wanted` threads and returns the team size the
 * advice allows. `can_cap` is zero where the runtime cannot be told a smaller team: the region is
 * then recorded at the size it wants. */
unsigned cosched_region_start(unsigned wanted, int can_cap);

/* For a top-level libgomp region the program asked `requested` threads for (0 = the ICV default):
 * records it as started and returns the team size to ask the runtime for, never more than a
 * non-zero request. */
unsigned cosched_region_begin(unsigned requested);

/* Records the end of a region that cosched_region_begin() counted. */
void cosched_region_end(void);

#endif
