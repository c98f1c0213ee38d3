//! The command's allocator: mimalloc for small blocks, the C library's
//! `malloc` for large ones.
//!
//! Compiling a library of many small definitions allocates and frees
//! millions of small IR, Cranelift and register-allocator objects on every
//! core. glibc's allocator spent about a fifth of such a build's time
//! (`bench/scaling.sh --shapes helpers`, 10,000 definitions), and
//! mimalloc's per-thread pages make those allocations cheap.
//!
//! Large blocks (the arguments, results and arena of a `run`, the
//! buffers of big compilations) stay with the C library, which usually
//! maps them on demand and unmaps them when freed (above its dynamic
//! `M_MMAP_THRESHOLD`): a large block that does not fit under `ulimit -v`
//! is the clean out-of-memory error of the code that asked for it
//! (`tests/limits.rs::json_arguments_beyond_the_memory_available_are_out_of_memory`).
//! mimalloc alone aborted on small allocations under limits where glibc
//! reported that error. mimalloc reserves address space ahead, 1 GiB at
//! its first allocation (128 MB when that does not fit), which `ulimit
//! -v` counts: the command needs about 100 MB more of it than with glibc
//! alone.
//!
//! A block is small or large by its size alone, which `dealloc` and
//! `realloc` are given again, so every block is freed by the allocator
//! that made it.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of this many bytes or more come from the C library.
const LARGE: usize = 256 << 10;

/// See the module docs.
pub struct SmallFast;

fn small(size: usize) -> bool {
    size < LARGE
}

// SAFETY: each method forwards to the allocator that owns the block, chosen
// by its size (the same size `dealloc` and `realloc` receive), and both
// allocators meet `GlobalAlloc`'s contract.
unsafe impl GlobalAlloc for SmallFast {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if small(layout.size()) {
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if small(layout.size()) {
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if small(layout.size()) {
            unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (small(layout.size()), small(new_size)) {
            (true, true) => unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) },
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            // Across the boundary: a new block from the other allocator.
            _ => {
                // SAFETY: the caller guarantees that `new_size`, rounded up
                // to `layout.align()`, does not overflow `isize`.
                let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}
