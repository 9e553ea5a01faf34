/* cosched.h: the calls a program can make to cooperate with the cosched executor.
 *
 * They are exported by libcosched-omp.so. A program that must also run without the library loaded
 * declares them weak (as below) and checks the address before calling:
 *
 *     #include "cosched.h"
 *     if (cosched_heartbeat) cosched_heartbeat();
 *
 * Both calls are cheap (one atomic operation) and safe from any thread. Without a control page
 * (COSCHED_CONTROL unset, or the file missing or not a version-1 page) they do nothing / return 0.
 */
#ifndef COSCHED_H
#define COSCHED_H

#ifdef __cplusplus
extern "C" {
#endif

/* Counts one unit of progress (an iteration, a time step, ...) in the job's control page. */
void cosched_heartbeat(void) __attribute__((weak));

/* The thread count the executor advises for this job now, or 0 when there is no advice. */
int cosched_threads(void) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif
