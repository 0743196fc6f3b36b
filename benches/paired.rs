//! Paired ratios: tollgate against governor and against the floor, measured in alternating
//! rounds so that the drift of a shared, noisy machine cancels out.
//!
//! Criterion (`benches/direct.rs`) measures one function after another; on a VM whose speed
//! drifts by ±10% over a minute, two medians taken a minute apart cannot settle a 5% question.
//! Here each round times A and then B (the order alternates between rounds) over the same number
//! of calls, and the figure reported is the **median of the per-round ratios**, with the spread
//! of the middle half.
//!
//!     cargo bench --bench paired
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use tollgate::{Clock, Quota, RateLimiter, TscClock};

const ROUNDS: usize = 41;
const CALLS: u64 = 2_000_000;

/// Nanoseconds per call of `f`, over `CALLS` calls.
fn time<F: FnMut() -> bool>(f: &mut F) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(f());
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Prints `name`: the median times of A and B and the median A/B ratio, with its interquartile
/// range. `a` and `b` each run one measurement and return nanoseconds per call.
fn paired(name: &str, mut a: impl FnMut() -> f64, mut b: impl FnMut() -> f64) {
    // Warm both up (caches, branch predictors, CPU frequency).
    a();
    b();
    let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = a();
            (x, b())
        } else {
            let y = b();
            (a(), y)
        };
        ta.push(x);
        tb.push(y);
        ratios.push(x / y);
    }
    let (ma, mb) = (median(&mut ta), median(&mut tb));
    let r = median(&mut ratios);
    let (q1, q3) = (ratios[ROUNDS / 4], ratios[3 * ROUNDS / 4]);
    println!("{name:44} {ma:7.2} ns vs {mb:7.2} ns   ratio {r:5.3}  (IQR {q1:5.3} .. {q3:5.3})");
}

/// Nanoseconds per call per thread, with `threads` threads each making `CALLS / threads` calls
/// at once (the slowest thread's time).
fn time_threads<F: Fn() -> bool + Sync>(threads: usize, f: &F) -> f64 {
    let calls = CALLS / threads as u64;
    let barrier = std::sync::Barrier::new(threads);
    let slowest = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..calls {
                        black_box(f());
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    });
    slowest.as_nanos() as f64 / calls as f64
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would pass nothing: run either way.
    println!(
        "paired rounds: {ROUNDS} x {CALLS} calls each; {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let unlimited = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000_000)
        .unwrap();
    let gov_unlimited = governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap());

    let tollgate = RateLimiter::gcra(unlimited);
    let governor = governor::RateLimiter::direct(gov_unlimited);
    paired(
        "allow: tollgate gcra / governor",
        || time(&mut || tollgate.check().is_ok()),
        || time(&mut || governor.check().is_ok()),
    );

    let clock = TscClock::new();
    let word = CachePadded::new(AtomicU64::new(0));
    let mut floor = || {
        let now = clock.now().as_nanos();
        let current = word.load(Ordering::Relaxed);
        word.compare_exchange(current, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    };
    paired(
        "allow: tollgate gcra / floor (clock + CAS)",
        || time(&mut || tollgate.check().is_ok()),
        || time(&mut floor),
    );

    let drained = RateLimiter::gcra(Quota::per_hour(1).unwrap());
    drained.check().unwrap();
    let governor_drained =
        governor::RateLimiter::direct(governor::Quota::per_hour(NonZeroU32::new(1).unwrap()));
    let _ = governor_drained.check();
    paired(
        "deny:  tollgate gcra / governor",
        || time(&mut || drained.check().is_ok()),
        || time(&mut || governor_drained.check().is_ok()),
    );
    paired(
        "deny / allow: tollgate gcra",
        || time(&mut || drained.check().is_ok()),
        || time(&mut || tollgate.check().is_ok()),
    );

    // Under contention the deny path's missing write is what matters: a denial only reads the
    // word, so every core keeps the line shared, where every admission must own it.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let allow = || tollgate.check().is_ok();
    let deny = || drained.check().is_ok();
    paired(
        &format!("deny / allow, {threads} threads: tollgate gcra"),
        || time_threads(threads, &deny),
        || time_threads(threads, &allow),
    );
    let gov_allow = || governor.check().is_ok();
    paired(
        &format!("allow, {threads} threads: tollgate / governor"),
        || time_threads(threads, &allow),
        || time_threads(threads, &gov_allow),
    );
}
