//! Memory per key: bytes allocated per key held, tollgate against governor's keyed limiter
//! (DashMap, default features), for `u64`, `IpAddr` and `String` keys.
//!
//! Counts the bytes allocated (and not freed) by building each limiter and inserting a million
//! distinct keys, with a counting global allocator. For tollgate that is its table, sized once
//! for a capacity of one million keys; for governor it is whatever its map grows to.
//!
//!     cargo bench --bench memory

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicI64, Ordering};

use tollgate::{KeyedRateLimiter, Quota};

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter only observes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const KEYS: u64 = 1_000_000;

/// Bytes per key held after `build` (which returns the limiter, kept alive while measuring).
fn per_key<T>(build: impl FnOnce() -> T) -> f64 {
    let before = LIVE.load(Ordering::Relaxed);
    let limiter = build();
    let after = LIVE.load(Ordering::Relaxed);
    drop(limiter);
    (after - before) as f64 / KEYS as f64
}

fn ip(i: u64) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0A00_0000 + i as u32))
}

fn name(i: u64) -> String {
    format!("client-{i:08}")
}

fn main() {
    let quota = Quota::per_second(10).unwrap();
    let gquota = governor::Quota::per_second(NonZeroU32::new(10).unwrap());
    println!("bytes per key, {KEYS} keys held");
    println!(
        "{:12} {:>10} {:>10} {:>8}",
        "key type", "tollgate", "governor", "ratio"
    );
    let rows: [(&str, f64, f64); 3] = [
        (
            "u64",
            per_key(|| {
                let l = KeyedRateLimiter::<u64>::gcra(quota, KEYS as usize).unwrap();
                (0..KEYS).for_each(|k| {
                    let _ = l.check_key(&k);
                });
                l
            }),
            per_key(|| {
                let l = governor::RateLimiter::keyed(gquota);
                (0..KEYS).for_each(|k| l.check_key(&k).unwrap());
                l
            }),
        ),
        (
            "IpAddr",
            per_key(|| {
                let l = KeyedRateLimiter::<IpAddr>::gcra(quota, KEYS as usize).unwrap();
                (0..KEYS).for_each(|k| {
                    let _ = l.check_key(&ip(k));
                });
                l
            }),
            per_key(|| {
                let l = governor::RateLimiter::keyed(gquota);
                (0..KEYS).for_each(|k| l.check_key(&ip(k)).unwrap());
                l
            }),
        ),
        (
            "String",
            per_key(|| {
                let l = KeyedRateLimiter::<String>::gcra(quota, KEYS as usize).unwrap();
                (0..KEYS).for_each(|k| {
                    let _ = l.check_key(name(k).as_str());
                });
                l
            }),
            per_key(|| {
                let l = governor::RateLimiter::keyed(gquota);
                (0..KEYS).for_each(|k| l.check_key(&name(k)).unwrap());
                l
            }),
        ),
    ];
    for (kind, ours, theirs) in rows {
        println!("{kind:12} {ours:10.1} {theirs:10.1} {:7.2}x", ours / theirs);
    }
}
