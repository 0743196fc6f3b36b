//! Direct (single-state) limiters, side by side in one run: tollgate, governor, and the floor.
//!
//! - `floor`: the least a lock-free check can do: one clock read (the same `TscClock`) and one
//!   uncontended compare-and-swap on a cache-padded word.
//! - `tollgate/*`: `RateLimiter::check()` for each algorithm, on the allow path (a quota so large
//!   that every request passes) and on the deny path (a drained quota).
//! - `governor/*`: governor's `RateLimiter::direct(..).check()` with its default quanta clock.
//! - `contended/*`: every core hammering one limiter; the time is per check, per thread.
//!
//! Compare ratios within one run (`benches/report.py` prints them): these machines are noisy.

mod support;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use crossbeam_utils::CachePadded;
use support::contended;
use tollgate::{Clock, FixedWindow, Quota, RateLimiter, SlidingWindow, TscClock};

/// A quota that never runs out at benchmark speeds: 10^9 per second with a burst of a billion.
fn unlimited() -> Quota {
    Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000_000)
        .unwrap()
}

fn governor_unlimited() -> governor::DefaultDirectRateLimiter {
    let n = NonZeroU32::new(1_000_000_000).unwrap();
    governor::RateLimiter::direct(governor::Quota::per_second(n))
}

fn direct(c: &mut Criterion) {
    let mut g = c.benchmark_group("direct");
    g.throughput(Throughput::Elements(1));

    // The floor: one clock read and one uncontended CAS.
    let clock = TscClock::new();
    let word = CachePadded::new(AtomicU64::new(0));
    g.bench_function("floor/clock+cas", |b| {
        b.iter(|| {
            let now = clock.now().as_nanos();
            let current = word.load(Ordering::Relaxed);
            black_box(word.compare_exchange(current, now, Ordering::Relaxed, Ordering::Relaxed))
        })
    });
    g.bench_function("floor/clock", |b| b.iter(|| black_box(clock.now())));

    // Allow path.
    let gcra = RateLimiter::gcra(unlimited());
    g.bench_function("tollgate/gcra/allow", |b| {
        b.iter(|| black_box(gcra.check()))
    });
    let governor = governor_unlimited();
    g.bench_function("governor/allow", |b| b.iter(|| black_box(governor.check())));
    // 2^30 per hour lasts about 20 s at benchmark speed, longer than this measurement. (A
    // sliding window cannot pack a limit that large; it is measured on its deny path below.)
    let fixed = RateLimiter::new(FixedWindow::new(&Quota::per_hour(1 << 30).unwrap()).unwrap());
    g.bench_function("tollgate/fixed_window/allow", |b| {
        b.iter(|| black_box(fixed.check()))
    });

    // Deny path: drained limiters.
    let drained = RateLimiter::gcra(Quota::per_hour(1).unwrap());
    drained.check().unwrap();
    g.bench_function("tollgate/gcra/deny", |b| {
        b.iter(|| black_box(drained.check()))
    });
    let governor_drained =
        governor::RateLimiter::direct(governor::Quota::per_hour(NonZeroU32::new(1).unwrap()));
    let _ = governor_drained.check();
    g.bench_function("governor/deny", |b| {
        b.iter(|| black_box(governor_drained.check()))
    });
    let sliding = RateLimiter::new(SlidingWindow::new(&Quota::per_hour(30_000).unwrap()).unwrap());
    sliding.check_n(30_000).unwrap();
    g.bench_function("tollgate/sliding_window/deny", |b| {
        b.iter(|| black_box(sliding.check()))
    });

    // The full decision (remaining, retry, reset): one division more.
    g.bench_function("tollgate/gcra/decide", |b| {
        b.iter(|| black_box(gcra.decide(1)))
    });
    g.finish();
}

fn contention(c: &mut Criterion) {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut g = c.benchmark_group("contended");
    for threads in [1, cores] {
        g.throughput(Throughput::Elements(threads as u64));
        let gcra = RateLimiter::gcra(unlimited());
        g.bench_function(format!("tollgate/gcra/{threads}t"), |b| {
            b.iter_custom(|iters| contended(threads, iters, || gcra.check().is_ok()))
        });
        let governor = governor_unlimited();
        g.bench_function(format!("governor/{threads}t"), |b| {
            b.iter_custom(|iters| contended(threads, iters, || governor.check().is_ok()))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40);
    targets = direct, contention
}
criterion_main!(benches);
