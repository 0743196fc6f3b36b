//! The scenarios of the seed articles, through the public API on a `ManualClock`, with exact
//! counts derived in the comments.

use std::time::Duration;

use tollgate::reference::{Model, SlidingWindowLog};
use tollgate::{
    Algorithm, FixedWindow, Gcra, ManualClock, Nanos, Quota, RateLimiter, SlidingWindow,
};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;

/// Offers one request at each time (ns) to a limiter running `algorithm`; returns how many were
/// admitted.
fn admitted<A: Algorithm>(algorithm: A, times: &[u64]) -> usize {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(algorithm, &clock);
    times
        .iter()
        .filter(|&&t| {
            clock.set(Duration::from_nanos(t));
            limiter.check().is_ok()
        })
        .count()
}

fn admitted_by_log(quota: &Quota, times: &[u64]) -> usize {
    let mut log = SlidingWindowLog::new(quota);
    times
        .iter()
        .filter(|&&t| log.decide(Nanos::from_nanos(t), 1).allowed)
        .count()
}

/// 3 per minute. Three requests in the last second of minute 0 (59.0, 59.3, 59.6 s) and three in
/// the first second of minute 1 (60.0, 60.3, 60.6 s).
#[test]
fn three_per_minute_across_a_boundary() {
    let quota = Quota::per_minute(3).unwrap();
    let times = [59_000, 59_300, 59_600, 60_000, 60_300, 60_600].map(|ms| ms * MS);

    // Fixed window: the count resets at 60 s, so all six pass: 6 in 1.6 s, twice the limit.
    assert_eq!(admitted(FixedWindow::new(&quota).unwrap(), &times), 6);

    // Sliding log: at 60.0 s the window (0 s, 60 s] still holds all three: only 3 pass.
    assert_eq!(admitted_by_log(&quota, &times), 3);

    // GCRA with burst 3 (T = 20 s, τ = 60 s): the burst of 3 at 59.x s pushes the TAT to
    // 59 + 60 = 119 s; at 60.0 s the next needs 119 + 20 ≤ 60 + 60: no. Only 3 pass.
    assert_eq!(
        admitted(Gcra::from(quota.with_burst(3).unwrap()), &times),
        3
    );

    // Sliding-window counter: 3 counted in window 0; at 60.0 s they weigh fully (3 + 1 > 3), at
    // 60.3 s 3 × 59.7/60 = 2.985 (3.985 > 3), at 60.6 s 2.97 (3.97 > 3): only 3 pass.
    assert_eq!(admitted(SlidingWindow::new(&quota).unwrap(), &times), 3);
}

/// 100 per minute. 100 requests spread over seconds 55-60 of minute 0 (every 50 ms from 55.00 s
/// to 59.95 s) and 100 over seconds 0-5 of minute 1 (60.00 s to 64.95 s).
#[test]
fn hundred_per_minute_across_a_boundary() {
    let quota = Quota::per_minute(100).unwrap();
    let times: Vec<u64> = (0..100)
        .map(|i| 55 * SEC + i * 50 * MS)
        .chain((0..100).map(|i| 60 * SEC + i * 50 * MS))
        .collect();

    // Fixed window: 100 in window 0, 100 in window 1: all 200 pass, in 10 seconds.
    assert_eq!(admitted(FixedWindow::new(&quota).unwrap(), &times), 200);

    // Sliding log: from 60 s the last minute always holds the first 100 (the oldest is 55 s,
    // which leaves the window only at 115 s): exactly 100 pass.
    assert_eq!(admitted_by_log(&quota, &times), 100);

    // Sliding-window counter: window 0 has no previous count, so its 100 pass. In window 1 the
    // previous 100 weigh 100 × (60 − e)/60, and request j (at e = 0.05 j s) passes iff
    // 100 − j/12 + cur + 1 ≤ 100, i.e. cur + 1 ≤ j/12: j = 12, 24, ..., 96 pass (one per 0.6 s,
    // as the previous window's weight drains): 8. Total 108.
    assert_eq!(admitted(SlidingWindow::new(&quota).unwrap(), &times), 108);

    // GCRA, burst 100 (T = 0.6 s, τ = 60 s): the k-th request of the first batch needs
    // 55 + 0.6 k ≤ 55 + 0.05 (k − 1) + 60, true for every k ≤ 100: all 100 pass and the TAT
    // ends at 55 + 60 = 115 s. In the second batch the (m+1)-th admission at 60 + 0.05 j needs
    // 115 + 0.6 (m + 1) ≤ 120 + 0.05 j: j = 0..8 pass (9, the refill of the first batch's 5 s),
    // then one every 0.6 s at j = 20, 32, 44, 56, 68, 80, 92 (7). Total 100 + 16 = 116.
    assert_eq!(admitted(Gcra::from(quota), &times), 116);
}

/// Sliding-window counter, 10 per minute: 9 requests in the previous window, 5 in the current,
/// and a request 25% into the current window. The weighted count is 9 × 0.75 + 5 = 11.75 > 10:
/// denied.
///
/// Under the algorithm itself that state is unreachable going forwards (at 25% the previous 9
/// weigh 6.75, so the 5 could not have passed); it is reached here the way a skewed clock would:
/// the 5 are admitted at 90% of the window (9 × 0.1 + 5 = 5.9 ≤ 10), then the clock steps back
/// to 25%.
#[test]
fn weighted_previous_window_denies() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        SlidingWindow::new(&Quota::per_minute(10).unwrap()).unwrap(),
        &clock,
    );
    clock.set(Duration::from_secs(30));
    limiter.check_n(9).unwrap();
    clock.set(Duration::from_secs(60 + 54)); // 90% into window 1
    limiter.check_n(5).unwrap();
    clock.set(Duration::from_secs(60 + 15)); // 25% into window 1
    let d = limiter.decide(1).unwrap();
    assert!(!d.is_allowed());
    // Nothing remains: ⌈9 × 0.75⌉ + 5 = 12 > 10.
    assert_eq!(d.remaining(), 0);
    // It fits once 9 × (60 − e)/60 + 5 + 1 ≤ 10, i.e. e ≥ 60 − 240/9 s = 33.333333334 s
    // (rounded up to the nanosecond): 18.333333334 s after 75 s.
    assert_eq!(d.retry_after(), Duration::from_nanos(18_333_333_334));
    clock.set(Duration::from_nanos(75 * SEC + 18_333_333_334 - 1));
    assert!(limiter.check().is_err());
    clock.set(Duration::from_nanos(75 * SEC + 18_333_333_334));
    assert!(limiter.check().is_ok());
}

/// GCRA, 5 per second, burst 10 (T = 200 ms, τ = 2 s), against the formulas of the GCRA article:
///
/// ```text
/// new_tat = max(tat, now) + T;  allow_at = new_tat − τ;  diff = now − allow_at
/// allowed iff diff ≥ 0:  remaining = ⌊diff / T⌋, reset_after = new_tat − now, retry_after = −1
/// otherwise:             remaining = 0, retry_after = −diff, reset_after = tat − now
/// ```
#[test]
fn gcra_reports_match_the_article() {
    struct Article {
        tat: i64,
    }
    impl Article {
        const T: i64 = 200 * MS as i64;
        const TAU: i64 = 10 * Self::T;
        /// (allowed, remaining, retry_after, reset_after) in ns, as the article computes them.
        fn decide(&mut self, now: i64) -> (bool, u64, u64, u64) {
            let new_tat = self.tat.max(now) + Self::T;
            let diff = now - (new_tat - Self::TAU);
            if diff >= 0 {
                self.tat = new_tat;
                (true, (diff / Self::T) as u64, 0, (new_tat - now) as u64)
            } else {
                (false, 0, (-diff) as u64, (self.tat - now) as u64)
            }
        }
    }

    let clock = ManualClock::new();
    let quota = Quota::per_second(5).unwrap().with_burst(10).unwrap();
    let limiter = RateLimiter::with_clock(Gcra::from(quota), &clock);
    let mut article = Article { tat: 0 };

    // A burst of 12 at t = 1 s, then a request every 50 ms for 3 s (recovery under load), then
    // silence until 6 s and another burst of 12.
    let times: Vec<i64> = std::iter::repeat(1_000)
        .take(12)
        .chain((0..60).map(|i| 1_000 + i * 50))
        .chain(std::iter::repeat(6_000).take(12))
        .map(|ms| ms * MS as i64)
        .collect();
    let mut expected_admitted = 0;
    for (i, &t) in times.iter().enumerate() {
        clock.set(Duration::from_nanos(t as u64));
        let (allowed, remaining, retry, reset) = article.decide(t);
        let d = limiter.decide(1).unwrap();
        let got = (
            d.is_allowed(),
            d.remaining(),
            d.retry_after().as_nanos() as u64,
            d.reset_after().as_nanos() as u64,
        );
        assert_eq!(
            got,
            (allowed, remaining, retry, reset),
            "request {i} at {t} ns"
        );
        expected_admitted += allowed as u32;
    }
    // The first burst: 10 of 12 (remaining 9, 8, ..., 0; then retry 200 ms, reset 2 s), and
    // the TAT stands at 1 + 10 × 0.2 = 3 s. A request at t then passes iff TAT + 0.2 ≤ t + 2,
    // i.e. t ≥ TAT − 1.8 s: the stream passes at 1.2 s, 1.4 s, ..., 3.8 s, one in four of its
    // requests: 14, and the TAT ends at 3 + 14 × 0.2 = 5.8 s. By 6 s it is paid off: the second
    // burst passes 10 of 12 again. Total 10 + 14 + 10 = 34.
    assert_eq!(expected_admitted, 34);

    // Spot values straight from the formulas: the first request of a fresh burst.
    clock.set(Duration::from_secs(100));
    let fresh = limiter.decide(1).unwrap();
    assert_eq!(
        (fresh.remaining(), fresh.reset_after()),
        (9, Duration::from_millis(200))
    );
}

/// A driver offering 1, 2, 5, 10, 20, 50 and 100 requests per second, evenly spaced, for 10
/// simulated seconds, to a 10 per second limiter. The admitted count is min(offered, 10) × 10
/// within one request per one-second window (±10), and exactly:
///
/// - offered ≤ 10 per second: every request passes for GCRA (spacing ≥ T = 100 ms) and the fixed
///   window (≤ 10 per window); the sliding window too below 10.
/// - offered ≥ 10: the fixed window passes 10 per window, 100. The sliding window passes 10 in
///   window 0, then 9 in each later window (with a previous count p > 0 the estimate
///   p × (1 − e) + cur + 1 ≤ 10 caps cur at 9), 10 + 9 × 9 = 91.
/// - offered > 10: GCRA passes its burst of 10 plus one per 100 ms of refill up to the last
///   request (9.9x s): 10 + 99 = 109.
#[test]
fn offered_load_driver() {
    let quota = Quota::per_second(10).unwrap();
    //                 offered: GCRA, sliding, fixed
    let expected: [(u64, [usize; 3]); 7] = [
        (1, [10, 10, 10]),
        (2, [20, 20, 20]),
        (5, [50, 50, 50]),
        (10, [100, 91, 100]),
        (20, [109, 91, 100]),
        (50, [109, 91, 100]),
        (100, [109, 91, 100]),
    ];
    for (offered, [gcra, sliding, fixed]) in expected {
        let times: Vec<u64> = (0..10 * offered).map(|k| k * SEC / offered).collect();
        let got = [
            admitted(Gcra::from(quota), &times),
            admitted(SlidingWindow::new(&quota).unwrap(), &times),
            admitted(FixedWindow::new(&quota).unwrap(), &times),
        ];
        assert_eq!(got, [gcra, sliding, fixed], "offered {offered}/s");
        let ideal = 10 * offered.min(10) as usize;
        for count in got {
            assert!(
                count.abs_diff(ideal) <= 10,
                "offered {offered}/s: {count} vs {ideal}"
            );
        }
    }
}

proptest::proptest! {
    /// What the sliding window guarantees, on evenly spaced traffic at any rate and phase: at
    /// most the limit in every window of the calendar (`[kP, (k+1)P)`), and, once the traffic has
    /// run past two window boundaries, in every window of one period, `(t − P, t]`. Before that
    /// the admissions of the first, partial window can weigh too little: traffic that starts
    /// late in a window fills it, and the next window admits nearly its whole limit again
    /// (`the_first_windows_of_even_traffic_can_hold_nearly_twice_the_limit`). On bursty traffic
    /// it is an estimate: `cargo run --release --example accuracy` measures how far off.
    #[test]
    fn the_sliding_window_keeps_even_traffic_within_its_limit(
        limit in 1u64..200,
        gap_us in 1u64..3_000_000,
        phase_us in 0u64..1_000_000,
    ) {
        let quota = Quota::per_second(limit).unwrap();
        let clock = ManualClock::new();
        let limiter = RateLimiter::with_clock(SlidingWindow::new(&quota).unwrap(), &clock);
        let (start, gap) = (phase_us * 1_000, gap_us * 1_000);
        let settled = (start / SEC + 2) * SEC;
        let mut trailing = std::collections::VecDeque::new();
        let mut aligned = std::collections::HashMap::<u64, u64>::new();
        // Enough requests for 12 windows, at most 50 000.
        for i in 0..(12 * SEC / gap).clamp(2, 50_000) {
            let t = start + i * gap;
            clock.set(Duration::from_nanos(t));
            if limiter.check().is_err() {
                continue;
            }
            let in_window = aligned.entry(t / SEC).or_default();
            *in_window += 1;
            proptest::prop_assert!(*in_window <= limit, "window {}: {}", t / SEC, in_window);
            while trailing.front().is_some_and(|&s| s + SEC <= t) {
                trailing.pop_front();
            }
            trailing.push_back(t);
            if t >= settled + SEC {
                proptest::prop_assert!(
                    trailing.len() as u64 <= limit,
                    "{} admitted in the second up to {} ns",
                    trailing.len(),
                    t
                );
            }
        }
    }
}

/// The start of even traffic into an idle sliding window: a request every millisecond from
/// 0.95 s, against 100 per second. Window 0 admits its 50 requests (950 to 999 ms). In window 1,
/// e ms in, they weigh 50 × (1000 − e) / 1000, so a request is admitted while the count so far is
/// at most 49 + e / 20: every request up to e = 51 (52 of them), then one every 20 ms, at 60, 80,
/// ..., 940. Then window 1 has admitted 52 + 45 = 97, and the second up to 1.94 s still holds
/// all 50 of window 0: 147, 1.47 times the limit, the most of the run (from there window 0's
/// requests leave one a millisecond and window 1's come one per 20 ms). Once the traffic has
/// run past two window boundaries, no second holds more than the limit.
#[test]
fn the_first_windows_of_even_traffic_can_hold_nearly_twice_the_limit() {
    let quota = Quota::per_second(100).unwrap();
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(SlidingWindow::new(&quota).unwrap(), &clock);
    let mut admitted = Vec::new();
    for i in 0..3_000 {
        let t = 950 * MS + i * MS;
        clock.set(Duration::from_nanos(t));
        if limiter.check().is_ok() {
            admitted.push(t);
        }
    }
    let most_in_a_second = |from: u64| {
        admitted
            .iter()
            .filter(|&&t| t >= from)
            .map(|&t| admitted.iter().filter(|&&s| s <= t && s + SEC > t).count())
            .max()
            .unwrap()
    };
    assert_eq!(most_in_a_second(0), 147);
    let worst_at = admitted
        .iter()
        .max_by_key(|&&t| admitted.iter().filter(|&&s| s <= t && s + SEC > t).count())
        .unwrap();
    assert_eq!(*worst_at, 1_940 * MS);
    assert!(most_in_a_second(3 * SEC) <= 100);
}
