//! The process's memory allocator: mimalloc.
//!
//! The simulator allocates small, short-lived lists on every event (plans and their changes, the
//! policies' working lists): glibc's allocator spent 15% of the bench's sweep on them, and mimalloc's
//! per-thread heaps take the sweep's CPU time down by about as much (`docs/simulation-model.md`,
//! session 25). mimalloc keeps freed memory for a second before it returns it to the system, which
//! suits a simulation but not a service that runs for months.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

/// mimalloc, asked for a plain block whenever every block of the size has the alignment asked for,
/// as its own C++ `operator new` does. (The `mimalloc` crate asks for an aligned block every time:
/// a longer path, and one that, when the size's free list is empty and the size is not a power of
/// two, over-allocates to align a block that would have been aligned anyway.)
struct Mimalloc;

/// Every block of mimalloc of at least this many bytes is aligned to it (smaller ones to 8).
const PLAIN_ALIGN: usize = 16;

fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: mimalloc's functions return null or a block of at least `size` bytes with the alignment
// asked for (the plain ones: `PLAIN_ALIGN` from that size on), and free any block they returned.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        let block = if plain(align, size) {
            mi::mi_malloc(size)
        } else {
            mi::mi_malloc_aligned(size, align)
        };
        block.cast()
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        let block = if plain(align, size) {
            mi::mi_zalloc(size)
        } else {
            mi::mi_zalloc_aligned(size, align)
        };
        block.cast()
    }

    unsafe fn dealloc(&self, block: *mut u8, _layout: Layout) {
        mi::mi_free(block.cast::<c_void>());
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let block = block.cast::<c_void>();
        let moved = if plain(layout.align(), new_size) {
            mi::mi_realloc(block, new_size)
        } else {
            mi::mi_realloc_aligned(block, new_size, layout.align())
        };
        moved.cast()
    }
}

/// mimalloc's option for how long freed memory is kept before it goes back to the system, in ms.
/// The bindings name only part of the options; this one's number is the same in mimalloc 2 and 3.
const PURGE_DELAY: mi::mi_option_t = 15;

/// Gives freed memory back to the system at once from now on: what a long-running service needs,
/// so that its resident memory follows its work (the daemon's test of a thousand jobs bounds it).
pub fn return_freed_memory_at_once() {
    // SAFETY: setting an option only stores an integer; mimalloc reads it on each purge.
    unsafe { mi::mi_option_set(PURGE_DELAY, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_asked_for_and_keep_their_bytes_when_they_grow() {
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 7, 8, 15, 16, 24, 40, 48, 100, 1000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: the layouts have non-zero sizes; each block is written within its size,
                // then freed once with the layout it has.
                unsafe {
                    let block = Mimalloc.alloc(layout);
                    assert_eq!(block as usize % align, 0, "size {size}, align {align}");
                    std::ptr::write_bytes(block, 0xa5, size);
                    let grown = Mimalloc.realloc(block, layout, 3 * size);
                    assert_eq!(grown as usize % align, 0, "grown {size}, align {align}");
                    assert!((0..size).all(|i| *grown.add(i) == 0xa5));
                    Mimalloc.dealloc(grown, Layout::from_size_align(3 * size, align).unwrap());
                    let zeroed = Mimalloc.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0, "zeroed {size}, align {align}");
                    assert!((0..size).all(|i| *zeroed.add(i) == 0));
                    Mimalloc.dealloc(zeroed, layout);
                }
            }
        }
    }
}
