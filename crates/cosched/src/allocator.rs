//! The process's memory allocator: mimalloc.
//!
//! The simulator allocates small, short-lived lists on every event (plans and their changes, the
//! policies' working lists): glibc's allocator spent 15% of the bench's sweep on them, and mimalloc's
//! per-thread heaps take the sweep's CPU time down by about as much (`docs/simulation-model.md`,
//! session 25). mimalloc keeps freed memory for a second before it returns it to the system, which
//! suits a simulation but not a service that runs for months.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's option for how long freed memory is kept before it goes back to the system, in ms.
/// The bindings name only part of the options; this one's number is the same in mimalloc 2 and 3.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Gives freed memory back to the system at once from now on: what a long-running service needs,
/// so that its resident memory follows its work (the daemon's test of a thousand jobs bounds it).
pub fn return_freed_memory_at_once() {
    // SAFETY: setting an option only stores an integer; mimalloc reads it on each purge.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
}
