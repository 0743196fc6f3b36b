//! Many threads, one limiter, frozen time: the number of admissions is exact, whatever the
//! interleaving. A lost update would admit too many; a spurious denial too few.

use std::sync::Barrier;
use std::time::Duration;

use tollgate::{Algorithm, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingWindow};

const THREADS: usize = 8;

/// Every thread offers `per_thread` requests of `cost` at once (released by a barrier) and counts
/// its admissions; returns the total.
fn hammer<A: Algorithm>(
    limiter: &RateLimiter<A, &ManualClock>,
    per_thread: usize,
    cost: u64,
) -> u64 {
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    (0..per_thread)
                        .filter(|_| limiter.check_n(cost).is_ok())
                        .count() as u64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn gcra_admits_exactly_the_burst_at_frozen_time() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(1_000).unwrap().with_burst(5_000).unwrap();
    let limiter = RateLimiter::with_clock(Gcra::from(quota), &clock);
    // 8 × 2000 = 16 000 offered, 5000 fit.
    assert_eq!(hammer(&limiter, 2_000, 1), 5_000);
    assert_eq!(limiter.peek().remaining(), 0);

    // Phases: advance exactly 700 emission intervals (700 ms at 1 ms each), hammer again:
    // exactly 700 more each time.
    for _ in 0..3 {
        clock.advance(Duration::from_millis(700));
        assert_eq!(hammer(&limiter, 2_000, 1), 700);
    }
}

#[test]
fn gcra_with_cost_admits_whole_requests_only() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(1_000).unwrap()), &clock);
    // Cost 3 against a burst of 1000: ⌊1000 / 3⌋ = 333 requests, 999 units, 1 left over.
    assert_eq!(hammer(&limiter, 500, 3), 333);
    assert_eq!(limiter.peek().remaining(), 1);
}

#[test]
fn sliding_window_admits_exactly_the_limit_at_frozen_time() {
    let clock = ManualClock::starting_at(Duration::from_secs(90));
    let quota = Quota::per_minute(4_000).unwrap();
    let limiter = RateLimiter::with_clock(SlidingWindow::new(&quota).unwrap(), &clock);
    assert_eq!(hammer(&limiter, 1_000, 1), 4_000);
    // Half a window later (150 s, halfway through window 2, whose previous window 1 holds 4000):
    // 4000 × 0.5 still weighs, 2000 fit.
    clock.advance(Duration::from_secs(60));
    assert_eq!(hammer(&limiter, 1_000, 1), 2_000);
}

#[test]
fn fixed_window_admits_exactly_the_limit_at_frozen_time() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        FixedWindow::new(&Quota::per_second(3_000).unwrap()).unwrap(),
        &clock,
    );
    assert_eq!(hammer(&limiter, 1_000, 1), 3_000);
    clock.advance(Duration::from_secs(1));
    assert_eq!(hammer(&limiter, 1_000, 2), 1_500);
}
