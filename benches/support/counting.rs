//! A global allocator that counts the bytes allocated while counting is on: for the memory rows.
//! A bench that wants them declares `#[global_allocator] static A: Counting = Counting;`. Off, it
//! costs each allocation one relaxed load; the timed loops allocate nothing either way.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter only observes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Relaxed) {
            LIVE.fetch_add(layout.size() as i64, Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ON.load(Relaxed) {
            LIVE.fetch_sub(layout.size() as i64, Relaxed);
        }
        // SAFETY: `ptr` came from `System` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.load(Relaxed) {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Relaxed);
        }
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes that `build` allocated and had not freed when it returned, per one of `keys` keys. What
/// it returns (the limiter) is kept alive until then, and dropped after.
pub fn bytes_per_key<T>(keys: u64, build: impl FnOnce() -> T) -> f64 {
    LIVE.store(0, Relaxed);
    ON.store(true, Relaxed);
    let kept = build();
    ON.store(false, Relaxed);
    let bytes = LIVE.load(Relaxed);
    drop(kept);
    bytes as f64 / keys as f64
}
