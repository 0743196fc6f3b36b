//! A simulated gateway: every core hammers shared limiters as fast as it can, and the output says
//! how many decisions per second they made, how many were allowed and denied, and whether the
//! admissions stayed within the quota.
//!
//!     cargo run --release --example simulate            # 2 s per scenario
//!     cargo run --release --example simulate -- 5       # 5 s per scenario
//!
//! The offered load is far above every limit (each thread asks again the moment it has an
//! answer), which is the worst case for a limiter: most decisions are denials, contended on one
//! word, and the admitted count must still match the quota exactly.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate::{Algorithm, Clock, FixedWindow, Gcra, Quota, RateLimiter, SlidingWindow, TscClock};

struct Outcome {
    decisions: u64,
    allowed: u64,
    elapsed: Duration,
}

/// Runs `threads` threads calling `check()` on one limiter for `duration`.
fn hammer<A: Algorithm>(limiter: &RateLimiter<A>, threads: usize, duration: Duration) -> Outcome {
    let stop = AtomicBool::new(false);
    let decisions = AtomicU64::new(0);
    let allowed = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let (mut n, mut ok) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    // Check in batches so the stop flag costs nothing measurable.
                    for _ in 0..1024 {
                        ok += limiter.check().is_ok() as u64;
                    }
                    n += 1024;
                }
                decisions.fetch_add(n, Ordering::Relaxed);
                allowed.fetch_add(ok, Ordering::Relaxed);
            });
        }
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
    });
    Outcome {
        decisions: decisions.into_inner(),
        allowed: allowed.into_inner(),
        elapsed: start.elapsed(),
    }
}

/// Prints one scenario's line; `most` is the most its quota allows over the run.
fn report(name: &str, o: &Outcome, most: f64) {
    let secs = o.elapsed.as_secs_f64();
    println!(
        "{name:34} {:>14} {:>12} {:>12} {:>17} / {:>10}",
        millions(o.decisions as f64 / secs),
        millions(o.allowed as f64 / secs),
        millions((o.decisions - o.allowed) as f64 / secs),
        o.allowed,
        most as u64,
    );
    assert!(
        o.allowed as f64 <= most,
        "{name}: admitted more than the quota allows"
    );
}

fn millions(n: f64) -> String {
    format!("{:.2} M", n / 1e6)
}

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let duration = Duration::from_secs(seconds);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!(
        "tollgate: {threads} threads hammering one shared limiter, {seconds} s per scenario\n"
    );
    println!(
        "{:34} {:>14} {:>12} {:>12} {:>28}",
        "scenario", "decisions/s", "allowed/s", "denied/s", "allowed / quota bound"
    );

    // GCRA admits at most its burst plus one request per emission interval elapsed.
    let gcra = Quota::per_second(5_000_000)
        .and_then(|q| q.with_burst(50_000))
        .expect("valid quota");
    let o = hammer(&RateLimiter::new(Gcra::from(gcra)), threads, duration);
    report(
        "GCRA 5M/s, burst 50k",
        &o,
        50_000.0 + o.elapsed.as_secs_f64() * 5e6,
    );

    // Window counters admit at most the limit in each window the run touched.
    let windows = |o: &Outcome| o.elapsed.as_secs_f64().ceil() + 1.0;
    let sliding =
        SlidingWindow::new(&Quota::per_second(30_000).expect("valid quota")).expect("fits");
    let o = hammer(&RateLimiter::new(sliding), threads, duration);
    report("sliding window 30k/s", &o, windows(&o) * 30_000.0);

    let fixed =
        FixedWindow::new(&Quota::per_second(5_000_000).expect("valid quota")).expect("fits");
    let o = hammer(&RateLimiter::new(fixed), threads, duration);
    report("fixed window 5M/s", &o, windows(&o) * 5e6);

    // One clock read, for scale.
    let clock = TscClock::new();
    let start = Instant::now();
    let mut last = clock.now();
    for _ in 0..10_000_000 {
        last = std::hint::black_box(clock.now());
    }
    let per_read = start.elapsed().as_nanos() as f64 / 10_000_000.0;
    println!("\n(one TscClock read costs {per_read:.1} ns here; last reading {last:?})");
}
