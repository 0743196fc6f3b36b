//! The direct limiter's public behaviour: errors for bad input, peeks, clocks that jump around.

use std::sync::Arc;
use std::time::Duration;

use tollgate::{
    Algorithm, CheckError, Clock, CoarseClock, FixedWindow, Gcra, ManualClock, Nanos, Quota,
    QuotaError, RateLimiter, SlidingWindow, TscClock,
};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn limiters_are_send_and_sync() {
    assert_send_sync::<RateLimiter>();
    assert_send_sync::<RateLimiter<SlidingWindow, CoarseClock>>();
    assert_send_sync::<RateLimiter<FixedWindow, Arc<ManualClock>>>();
    assert_send_sync::<RateLimiter<Gcra, &ManualClock>>();
}

/// How many of `attempts` checks at one instant an algorithm built from `quota` by `TryFrom`
/// admits: the conversion every algorithm offers to code generic over it.
fn admitted_at_once<A>(quota: Quota, attempts: u32) -> Result<u32, A::Error>
where
    A: Algorithm + TryFrom<Quota>,
{
    let limiter = RateLimiter::with_clock(A::try_from(quota)?, ManualClock::new());
    Ok((0..attempts).filter(|_| limiter.check().is_ok()).count() as u32)
}

#[test]
fn every_algorithm_converts_from_a_quota() {
    let quota = Quota::per_second(3).unwrap();
    assert_eq!(admitted_at_once::<Gcra>(quota, 5), Ok(3));
    assert_eq!(admitted_at_once::<SlidingWindow>(quota, 5), Ok(3));
    assert_eq!(admitted_at_once::<FixedWindow>(quota, 5), Ok(3));

    // A limit the sliding window's word cannot hold is the error its `new` gives.
    let too_many = Quota::per_second(32_768).unwrap();
    let refused: Result<u32, QuotaError> = admitted_at_once::<SlidingWindow>(too_many, 1);
    assert_eq!(refused, Err(SlidingWindow::new(&too_many).unwrap_err()));
}

#[test]
fn zero_and_huge_costs() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    // A cost of 0 is admitted and changes nothing, even when nothing is left.
    limiter.check_n(10).unwrap();
    assert_eq!(limiter.check_n(0), Ok(()));
    let nothing = limiter.decide(0).unwrap();
    assert!(nothing.is_allowed());
    assert_eq!(nothing.remaining(), 0);
    assert_eq!(limiter.peek_n(0), Ok(nothing));
    // A peek of one request says it would be denied, and for how long.
    let peek = limiter.peek();
    assert!(!peek.is_allowed());
    assert_eq!(peek.retry_after(), Duration::from_millis(100));
    assert_eq!(peek.remaining(), 0);
    // A cost above the burst is its own error, before and after the limiter is drained.
    for cost in [11, 1_000, u64::MAX] {
        match limiter.check_n(cost) {
            Err(CheckError::InsufficientCapacity(err)) => {
                assert_eq!((err.cost(), err.capacity()), (cost, 10));
            }
            other => panic!("cost {cost}: {other:?}"),
        }
        assert_eq!(limiter.decide(cost).unwrap_err().capacity(), 10);
    }
    // The burst itself fits once the limiter has recovered.
    clock.advance(Duration::from_secs(1));
    assert_eq!(limiter.check_n(10), Ok(()));
}

#[test]
fn peek_reports_without_consuming() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(
        SlidingWindow::new(&Quota::per_minute(6).unwrap()).unwrap(),
        &clock,
    );
    limiter.check_n(4).unwrap();
    for _ in 0..3 {
        let peek = limiter.peek();
        assert!(peek.is_allowed());
        assert_eq!((peek.remaining(), peek.limit()), (2, 6));
        // Four counted in window 0 weigh until the end of window 1.
        assert_eq!(peek.reset_after(), Duration::from_secs(120));
    }
}

#[test]
fn clock_that_goes_backwards_never_admits_more() {
    // GCRA 1 per second, burst 1. Admit at 10 s; then the clock jumps back to 0 s. Nothing may
    // pass before the schedule allows it at the *later* time (11 s), however far back we go.
    let clock = ManualClock::starting_at(Duration::from_secs(10));
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(1).unwrap()), &clock);
    limiter.check().unwrap();
    for back in [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_secs(10),
    ] {
        clock.set(Duration::from_secs(10) - back);
        let denied = limiter.check().unwrap_err();
        // The wait is measured from the (earlier) clock: until 11 s − back... plus back.
        assert_eq!(denied.retry_after(), Duration::from_secs(1) + back);
    }
    clock.set(Duration::from_secs(11));
    assert!(limiter.check().is_ok());

    // Window counters read an earlier window as the start of the stored one.
    let clock = ManualClock::starting_at(Duration::from_secs(65));
    let limiter = RateLimiter::with_clock(
        FixedWindow::new(&Quota::per_minute(2).unwrap()).unwrap(),
        &clock,
    );
    limiter.check_n(2).unwrap();
    clock.set(Duration::from_secs(5)); // window 0, before the stored window 1
    assert!(limiter.check().is_err());
}

#[test]
fn time_at_the_ends_of_the_range() {
    for start in [Duration::ZERO, Nanos::MAX.as_duration(), Duration::MAX] {
        let clock = ManualClock::starting_at(start);
        let gcra = RateLimiter::with_clock(Gcra::from(Quota::per_hour(2).unwrap()), &clock);
        assert_eq!(gcra.check_n(2), Ok(()));
        assert!(gcra.check().is_err());
        let sw = RateLimiter::with_clock(
            SlidingWindow::new(&Quota::per_hour(2).unwrap()).unwrap(),
            &clock,
        );
        assert_eq!(sw.check_n(2), Ok(()));
        assert!(sw.check().is_err());
        let fw = RateLimiter::with_clock(
            FixedWindow::new(&Quota::per_hour(2).unwrap()).unwrap(),
            &clock,
        );
        assert_eq!(fw.check_n(2), Ok(()));
        assert!(fw.check().is_err());
    }
}

#[test]
fn every_clock_drives_a_limiter() {
    let quota = Quota::per_second(1_000).unwrap().with_burst(3).unwrap();
    let tsc = RateLimiter::with_clock(Gcra::from(quota), TscClock::new());
    let coarse = RateLimiter::with_clock(Gcra::from(quota), CoarseClock::new().unwrap());
    let manual = RateLimiter::with_clock(Gcra::from(quota), Arc::new(ManualClock::new()));
    let dynamic: RateLimiter<Gcra, Box<dyn Clock>> =
        RateLimiter::with_clock(Gcra::from(quota), Box::new(TscClock::new()));
    // Three requests at once always fit the burst of 3, on any clock.
    assert!(tsc.check_n(3).is_ok());
    assert!(coarse.check_n(3).is_ok());
    assert!(manual.check_n(3).is_ok());
    assert!(dynamic.check_n(3).is_ok());
    // On the frozen clock the fourth is denied, exactly one interval (1 ms) away.
    assert_eq!(
        manual.check().unwrap_err().retry_after(),
        Duration::from_millis(1)
    );
}

#[test]
fn debug_output_shows_the_state() {
    let limiter = RateLimiter::with_clock(
        Gcra::from(Quota::per_second(2).unwrap()),
        ManualClock::new(),
    );
    let text = format!("{limiter:?}");
    assert!(text.starts_with("RateLimiter { algorithm: Gcra"), "{text}");
    assert!(text.contains("remaining: 2"), "{text}");
}
