//! A global allocator that counts the current thread's allocations, for tests that prove a hot
//! path does not touch the heap. Only the `no_alloc` harness includes it, so that no other
//! harness pays for the counting.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts the allocations made by the current thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

/// Counts one allocation of `size` bytes.
fn count(size: usize) {
    ALLOCATIONS.with(|n| n.set(n.get() + 1));
    BYTES.with(|n| n.set(n.get() + size as u64));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by the current thread so far.
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Bytes the current thread's allocations so far asked for (a reallocation counts its new
/// size).
pub fn allocated_bytes() -> u64 {
    BYTES.with(Cell::get)
}

/// Guards the no-allocation tests against passing by not counting: the allocator is installed
/// and counts this thread's allocations and their sizes.
#[test]
fn counts_this_threads_allocations_and_bytes() {
    let (count, bytes) = (allocations(), allocated_bytes());
    let v = std::hint::black_box(vec![0_u8; 100]);
    assert_eq!(allocations(), count + 1);
    assert_eq!(allocated_bytes(), bytes + 100);
    drop(v);
}
