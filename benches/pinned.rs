//! One thread's time per call for a hot key's denial, run once per process, so that a lent
//! machine can pin one process to each CPU in turn, and then one to every CPU at once
//! (`benches/lent.sh pinned`). It asks whether a denial slows because other cores are busy, or
//! because of where one run happens to land, which the `paired` bench's thread rows cannot
//! tell apart: they time a group of threads by its slowest thread.
//!
//! Four figures, each the median of 11 runs of 1 000 000 calls, in nanoseconds per call:
//!
//! - `frozen deny`: `check_key` of a spent key in a table of 1 000 on a `ManualClock` that never
//!   moves (the lookup and the decision, no time-stamp counter);
//! - `tsc deny`: the same on the default `TscClock`;
//! - `clock`: the `TscClock` read alone;
//! - `arithmetic`: a chain of 16 dependent shifts, xors and multiplies (the core's own speed).
//!
//! `cargo bench --bench pinned` runs it once, wherever the scheduler puts it.

mod support;

use std::cell::Cell;
use std::hint::black_box;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use tollgate::{Clock, Gcra, KeyedRateLimiter, ManualClock, Quota, TscClock};

/// Nanoseconds per call of `f`: the median of 11 runs of a million calls.
fn median_ns<F: Fn() -> bool>(f: F) -> f64 {
    const CALLS: u32 = 1_000_000;
    let mut runs: Vec<f64> = (0..11)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..CALLS {
                black_box(f());
            }
            start.elapsed().as_nanos() as f64 / f64::from(CALLS)
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// A table of 1 000 keys at one request per hour on `clock`, each key checked once: every later
/// check of a key below 1 000 is denied while the clock stays within the hour (a hot key kept
/// over its limit).
fn spent_keys<C: Clock>(clock: C) -> KeyedRateLimiter<u64, Gcra, C> {
    let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_hour(1).unwrap()))
        .capacity(1_000)
        .clock(clock)
        .build()
        .unwrap();
    for key in 0..1_000u64 {
        let _ = limiter.check_key(&key);
    }
    limiter
}

fn main() {
    let frozen = Box::new(CachePadded::new(ManualClock::new()));
    let on_frozen = spent_keys(&**frozen);
    let on_tsc = spent_keys(TscClock::new());
    assert!(on_frozen.check_key(&42).is_err() && on_tsc.check_key(&42).is_err());
    let clock = TscClock::new();
    let multiplier = black_box(support::MIX_MULTIPLIER);
    let chain = Cell::new(1u64);
    let frozen_deny = median_ns(|| on_frozen.check_key(&42).is_ok());
    let tsc_deny = median_ns(|| on_tsc.check_key(&42).is_ok());
    let clock_read = median_ns(|| black_box(clock.now()).as_nanos() != 0);
    let arithmetic = median_ns(|| {
        let x = support::mix(chain.get(), multiplier);
        chain.set(x);
        x != 0
    });
    println!(
        "frozen deny {frozen_deny:.1}  tsc deny {tsc_deny:.1}  clock {clock_read:.1}  \
         arithmetic {arithmetic:.1}"
    );
}
