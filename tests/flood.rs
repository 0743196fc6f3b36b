//! A flood of new keys: 10 million distinct keys streamed through a table sized for 1 million,
//! while one hot key is held over its limit. The hot key is never readmitted early, and the
//! flood allocates nothing: memory does not grow. And new legitimate clients under a flood that
//! holds twice the table's capacity: the default policy lets every one of them in.
//!
//! This file is its own test binary because it installs a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tollgate::{Clock, Gcra, KeyedRateLimiter, ManualClock, Overflow, Quota};

/// Counts the bytes allocated by threads that asked to be counted.
struct Counting;

static ALLOCATED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter only observes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATED.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CAPACITY: usize = 1_000_000;
const FLOOD: u64 = 10_000_000;
/// Simulated time between two flood keys: 1 µs, so that with a one-second quota about a million
/// flood keys are live at any moment, the table's full capacity.
const STEP: Duration = Duration::from_micros(1);
/// The hot key asks again after every 1000 flood keys: every simulated millisecond.
const HOT_EVERY: u64 = 1_000;
const HOT: u64 = u64::MAX;

/// Runs the flood under `policy`; returns the times (in ms) at which the hot key was admitted
/// and the bytes allocated during the flood.
fn flood(policy: Overflow) -> (Vec<u64>, u64) {
    let clock = ManualClock::new();
    // Flood keys: 1 per second, burst 1: each stays live for one simulated second.
    let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
        .capacity(CAPACITY)
        .overflow(policy)
        .clock(&clock)
        .hasher(ahash::RandomState::with_seeds(7, 11, 13, 17))
        .build()
        .unwrap();
    // The hot key: one request per 2.5 s (a quota of its own, which the table was not told of,
    // so its entry is never evicted while live), asked for every millisecond, so it is denied
    // almost always: always over its limit.
    let hot = Quota::new(1, Duration::from_millis(2_500)).unwrap();
    let mut admitted_at = Vec::with_capacity(16);

    ALLOCATED.store(0, Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    for key in 0..FLOOD {
        // The capacity check keeps `push` from allocating; the assertions below would see a
        // hot key admitted more often than expected as a full vector.
        if key % HOT_EVERY == 0
            && limiter.check_key_with(&HOT, &hot, 1).is_ok()
            && admitted_at.len() < admitted_at.capacity()
        {
            admitted_at.push(clock.now().as_nanos() / 1_000_000);
        }
        let _ = limiter.check_key(&key);
        clock.advance(STEP);
    }
    COUNTING.with(|c| c.set(false));
    let allocated = ALLOCATED.load(Ordering::Relaxed);

    let stats = limiter.stats();
    eprintln!("{policy:?}: {stats:?}");
    // Every flood key and the hot key's first request took an empty slot, reused an idle one,
    // evicted an entry, or overflowed: exactly one of the four, single-threaded.
    assert!(stats.occupied <= stats.slots);
    // About a million keys are live at every moment, the table's capacity: fewer than 0.1% of
    // the flood's insertions may overflow (the figure the crate docs give for full capacity).
    assert!(
        stats.overflows * 1_000 < FLOOD,
        "{} of {FLOOD} insertions overflowed",
        stats.overflows
    );
    assert_eq!(
        stats.occupied as u64 + stats.reuses + stats.evictions + stats.overflows,
        FLOOD + 1
    );
    (admitted_at, allocated)
}

/// The hot key (one per 2.5 s, burst 1) asks every millisecond of the 10 s flood: it is admitted
/// at 0 ms and then each time its schedule allows, 2 500 ms later: at 0, 2 500, 5 000 and
/// 7 500 ms, four times, never early.
fn check_hot(policy: Overflow) {
    let (admitted_at, allocated) = flood(policy);
    assert_eq!(admitted_at, vec![0, 2_500, 5_000, 7_500], "{policy:?}");
    assert_eq!(
        allocated, 0,
        "{policy:?}: the flood allocated {allocated} bytes"
    );
}

#[test]
fn hot_key_survives_a_flood_under_every_policy() {
    check_hot(Overflow::Deny);
    check_hot(Overflow::EvictLeastConstrained);
    check_hot(Overflow::Allow);
}

/// New legitimate clients under a flood of one-request keys, twice as many live as the table
/// holds (20 a millisecond, live 100 ms each, against a capacity of 1 000), for 2 s: a new client
/// arrives every millisecond and sends a request every 200 ms, within its quota of 10 a second;
/// an abuser sends one every millisecond. Under the default policy, which evicts flood keys
/// (none of them is being limited), every client request is admitted; under `Deny` every one
/// refused is refused for want of room. Under both the abuser, being limited, keeps its state:
/// its burst of 10 and one per 100 ms after, at 100, 200, ..., 1 900 ms: 29.
#[test]
fn new_clients_get_in_through_a_flood_under_the_default_policy() {
    for policy in [Overflow::default(), Overflow::Deny] {
        let clock = ManualClock::new();
        let quota = Quota::per_second(10).unwrap();
        let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
            .capacity(1_000)
            .overflow(policy)
            .clock(&clock)
            .build()
            .unwrap();
        const ABUSER: u64 = 0;
        let (mut sent, mut refused, mut by_quota, mut abuser) = (0, 0, 0, 0);
        let mut flood_key = 1 << 40;
        for ms in 0..2_000u64 {
            for _ in 0..20 {
                flood_key += 1;
                let _ = limiter.check_key(&flood_key);
            }
            for client in (1..=ms + 1).filter(|c| (ms + 1 - c) % 200 == 0) {
                sent += 1;
                if let Err(denied) = limiter.check_key(&client) {
                    refused += 1;
                    by_quota += u64::from(!denied.is_overflow());
                }
            }
            abuser += u64::from(limiter.check_key(&ABUSER).is_ok());
            clock.advance(Duration::from_millis(1));
        }
        assert_eq!(
            sent,
            (1..=2_000u64).map(|c| (2_000 - c) / 200 + 1).sum::<u64>()
        );
        assert_eq!(
            by_quota, 0,
            "{policy:?}: a client within its quota was limited"
        );
        if policy == Overflow::default() {
            assert_eq!(refused, 0, "{policy:?}");
        }
        assert_eq!(abuser, 29, "{policy:?}");
    }
}
