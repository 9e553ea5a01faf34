//! The process's memory allocator: mimalloc while cosched computes, the C library's while it serves.
//!
//! The simulator allocates small, short-lived lists on every event (plans and their changes, the
//! policies' working lists): glibc's allocator spent 15% of the bench's sweep on them, and with
//! mimalloc's per-thread heaps the sweep runs about a fifth faster (`docs/simulation-validation.md`).
//! The daemon is the other way round: it serves each connection on a thread of its own, and
//! mimalloc gives each thread pages of its own, faulted in and given back again with every
//! connection; under mimalloc the daemon took a third fewer submissions a second at up to twice the
//! p99 latency (`cosched bench daemon`). So the daemon turns to the C library's allocator as it
//! starts; what was allocated before goes back to mimalloc when freed.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// Whether new blocks come from the C library's allocator ([`serve_from_the_system_allocator`]).
static SERVING: AtomicBool = AtomicBool::new(false);

/// From now on, new blocks come from the C library's allocator. For a process that serves for long
/// and forks often; call it before starting threads. Blocks that mimalloc gave still go back to it.
pub fn serve_from_the_system_allocator() {
    SERVING.store(true, Ordering::SeqCst);
}

/// mimalloc, asked for a plain block whenever every block of the size has the alignment asked for,
/// as its own C++ `operator new` does. (The `mimalloc` crate asks for an aligned block every time:
/// a longer path, and one that, when the size's free list is empty and the size is not a power of
/// two, over-allocates to align a block that would have been aligned anyway.) Once serving, the C
/// library's allocator, and a block goes back to whichever allocator it came from.
struct Allocator;

/// Every block of mimalloc of at least this many bytes is aligned to it (smaller ones to 8).
const PLAIN_ALIGN: usize = 16;

fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// Whether `block` came from the C library's allocator: only ever, once serving, a block outside
/// mimalloc's memory.
fn from_the_system(block: *mut u8) -> bool {
    // SAFETY: mimalloc looks the address up in its page map, whatever it points to.
    SERVING.load(Ordering::SeqCst) && !unsafe { mi::mi_is_in_heap_region(block.cast()) }
}

// SAFETY: mimalloc's functions return null or a block of at least `size` bytes with the alignment
// asked for (the plain ones: `PLAIN_ALIGN` from that size on), and free any block they returned;
// every block goes back to the allocator it came from.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if SERVING.load(Ordering::SeqCst) {
            return System.alloc(layout);
        }
        let block = if plain(align, size) {
            mi::mi_malloc(size)
        } else {
            mi::mi_malloc_aligned(size, align)
        };
        block.cast()
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if SERVING.load(Ordering::SeqCst) {
            return System.alloc_zeroed(layout);
        }
        let block = if plain(align, size) {
            mi::mi_zalloc(size)
        } else {
            mi::mi_zalloc_aligned(size, align)
        };
        block.cast()
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if from_the_system(block) {
            System.dealloc(block, layout);
        } else {
            mi::mi_free(block.cast::<c_void>());
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if from_the_system(block) {
            return System.realloc(block, layout, new_size);
        }
        let block = block.cast::<c_void>();
        let moved = if plain(layout.align(), new_size) {
            mi::mi_realloc(block, new_size)
        } else {
            mi::mi_realloc_aligned(block, new_size, layout.align())
        };
        moved.cast()
    }
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
                    let block = Allocator.alloc(layout);
                    assert_eq!(block as usize % align, 0, "size {size}, align {align}");
                    std::ptr::write_bytes(block, 0xa5, size);
                    let grown = Allocator.realloc(block, layout, 3 * size);
                    assert_eq!(grown as usize % align, 0, "grown {size}, align {align}");
                    assert!((0..size).all(|i| *grown.add(i) == 0xa5));
                    Allocator.dealloc(grown, Layout::from_size_align(3 * size, align).unwrap());
                    let zeroed = Allocator.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0, "zeroed {size}, align {align}");
                    assert!((0..size).all(|i| *zeroed.add(i) == 0));
                    Allocator.dealloc(zeroed, layout);
                }
            }
        }
    }
}
