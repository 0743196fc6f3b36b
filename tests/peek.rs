//! Peeking: `peek_n(cost)` answers whether a request of that cost would be admitted now and, if
//! not, when it would be, for direct limiters of every algorithm, keyed limiters and the keyed
//! sliding log. It writes nothing and inserts nothing.
//!
//! Each property drives two limiters on one clock with the same requests; one of them is also
//! peeked at before each request, with the request's cost. The peek must report the request's
//! own outcome and wait (its decision, made right after at the same time), beside the state as it
//! stands (the decision for a cost of 0); waiting the peek's `retry_after` must make the request
//! admissible; and the peeked limiter must go on deciding exactly as the other one.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, Decision, FixedWindow, Gcra, InsufficientCapacity, KeyedRateLimiter,
    KeyedSlidingLog, ManualClock, Quota, RateLimiter, SlidingWindow,
};

/// A request: milliseconds since the last one, its key (for the keyed limiters), its cost.
fn requests() -> impl Strategy<Value = Vec<(u16, u8, u64)>> {
    prop::collection::vec((0u16..300, 0u8..6, 0u64..8), 1..300)
}

/// Checks one peek against what it must report. `peek` and `decide` run on the peeked limiter,
/// `twin` on the other, each at the clock's time; `capacity` is the most one request may cost.
fn check(
    clock: &ManualClock,
    cost: u64,
    capacity: u64,
    peek: impl Fn(u64) -> Result<Decision, InsufficientCapacity>,
    decide: impl FnOnce() -> Result<Decision, InsufficientCapacity>,
    twin: impl Fn(u64) -> Result<Decision, InsufficientCapacity>,
) -> Result<(), TestCaseError> {
    let now = twin(0).unwrap();
    let peeked = peek(cost);
    if cost > capacity {
        let refused = peeked.unwrap_err();
        prop_assert_eq!((refused.cost(), refused.capacity()), (cost, capacity));
        prop_assert_eq!(decide(), twin(cost));
        return Ok(());
    }
    let peeked = peeked.unwrap();
    // What remains and when the state is fresh: the state as it stands.
    prop_assert_eq!(
        (peeked.remaining(), peeked.reset_after(), peeked.limit()),
        (now.remaining(), now.reset_after(), now.limit())
    );
    if !peeked.is_allowed() {
        // Waiting the peek's wait is enough; the clock goes back after, and a peek wrote
        // nothing that a time in between could have changed.
        let wait = peeked.retry_after();
        prop_assert!(!wait.is_zero());
        clock.advance(wait);
        let later = peek(cost).unwrap();
        clock.rewind(wait);
        prop_assert!(
            later.is_allowed(),
            "denied {:?} after waiting {:?}",
            later,
            wait
        );
    } else {
        prop_assert!(peeked.retry_after().is_zero());
    }
    // The request itself, on both limiters: the peeked one decides as the other (the peek
    // wrote nothing), and as the peek said.
    let decided = decide().unwrap();
    prop_assert_eq!(Ok(decided), twin(cost));
    prop_assert_eq!(
        (peeked.is_allowed(), peeked.retry_after()),
        (decided.is_allowed(), decided.retry_after())
    );
    Ok(())
}

fn direct<A: Algorithm + Clone>(algorithm: A, ops: &[(u16, u8, u64)]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let peeked = RateLimiter::with_clock(algorithm, &clock);
    let twin = RateLimiter::with_clock(algorithm, &clock);
    for &(ms, _, cost) in ops {
        clock.advance(Duration::from_millis(u64::from(ms)));
        check(
            &clock,
            cost,
            algorithm.capacity(),
            |c| peeked.peek_n(c),
            || peeked.decide(cost),
            |c| twin.decide(c),
        )?;
        // `peek` is the peek of one request.
        prop_assert_eq!(Ok(peeked.peek()), peeked.peek_n(1));
    }
    Ok(())
}

proptest! {
    #[test]
    fn direct_gcra_peeks(limit in 1u64..6, burst in 1u64..6, ops in requests()) {
        let quota = Quota::new(limit, Duration::from_secs(1)).unwrap().with_burst(burst).unwrap();
        direct(Gcra::from(quota), &ops)?;
    }

    #[test]
    fn direct_sliding_window_peeks(limit in 1u64..6, ops in requests()) {
        let quota = Quota::new(limit, Duration::from_secs(1)).unwrap();
        direct(SlidingWindow::new(&quota).unwrap(), &ops)?;
    }

    #[test]
    fn direct_fixed_window_peeks(limit in 1u64..6, ops in requests()) {
        let quota = Quota::new(limit, Duration::from_secs(1)).unwrap();
        direct(FixedWindow::new(&quota).unwrap(), &ops)?;
    }

    /// A keyed GCRA table: the same, key by key, and a peek never inserts its key.
    #[test]
    fn keyed_peeks_and_never_inserts(limit in 1u64..6, burst in 1u64..6, ops in requests()) {
        let quota = Quota::new(limit, Duration::from_secs(1)).unwrap().with_burst(burst).unwrap();
        let clock = ManualClock::new();
        let build = || {
            KeyedRateLimiter::<u8>::builder(Gcra::from(quota))
                .capacity(100)
                .clock(&clock)
                .build()
                .unwrap()
        };
        let (peeked, twin) = (build(), build());
        keyed(&clock, burst, &ops, Keyed {
            occupied: &|| peeked.stats().occupied,
            peek: &|key, cost| peeked.peek_key_n(key, cost),
            decide: &|key, cost| peeked.decide_key(key, cost),
            twin: &|key, cost| twin.decide_key(key, cost),
        })?;
    }

    /// The keyed sliding log: the same, key by key, and a peek never inserts its key.
    #[test]
    fn sliding_log_peeks_and_never_inserts(limit in 1u64..6, ops in requests()) {
        let quota = Quota::new(limit, Duration::from_secs(1)).unwrap();
        let clock = ManualClock::new();
        let build = || {
            KeyedSlidingLog::<u8>::builder(&quota)
                .capacity(100)
                .clock(&clock)
                .build()
                .unwrap()
        };
        let (peeked, twin) = (build(), build());
        keyed(&clock, limit, &ops, Keyed {
            occupied: &|| peeked.stats().occupied,
            peek: &|key, cost| peeked.peek_key_n(key, cost),
            decide: &|key, cost| peeked.decide_key(key, cost),
            twin: &|key, cost| twin.decide_key(key, cost),
        })?;
    }
}

type Answer = Result<Decision, InsufficientCapacity>;

/// A keyed limiter's calls, for [`keyed`]: its count of keys held, a peek and a decision on it,
/// and a decision on its twin.
struct Keyed<'a> {
    occupied: &'a dyn Fn() -> usize,
    peek: &'a dyn Fn(&u8, u64) -> Answer,
    decide: &'a dyn Fn(&u8, u64) -> Answer,
    twin: &'a dyn Fn(&u8, u64) -> Answer,
}

/// [`check`] for each request of a keyed limiter, and that no peek inserts its key.
fn keyed(
    clock: &ManualClock,
    capacity: u64,
    ops: &[(u16, u8, u64)],
    limiter: Keyed<'_>,
) -> Result<(), TestCaseError> {
    for &(ms, key, cost) in ops {
        clock.advance(Duration::from_millis(u64::from(ms)));
        let occupied = (limiter.occupied)();
        let _ = (limiter.peek)(&key, 1);
        prop_assert_eq!((limiter.occupied)(), occupied);
        check(
            clock,
            cost,
            capacity,
            |c| (limiter.peek)(&key, c),
            || (limiter.decide)(&key, cost),
            |c| (limiter.twin)(&key, c),
        )?;
    }
    Ok(())
}

/// The question the issue asks, on an exhausted limiter of each kind: would one more request
/// pass, and if not, when. Before, a peek was the decision for a cost of 0, always "allowed".
#[test]
fn an_exhausted_limiter_peeks_as_denied_with_its_wait() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(4).unwrap();
    let direct = RateLimiter::with_clock(Gcra::from(quota), &clock);
    direct.check_n(4).unwrap();
    let keyed = KeyedRateLimiter::<str>::builder(Gcra::from(quota))
        .clock(&clock)
        .build()
        .unwrap();
    keyed.check_key_n("a", 4).unwrap();
    let log = KeyedSlidingLog::<str>::builder(&quota)
        .clock(&clock)
        .build()
        .unwrap();
    log.check_key_n("a", 4).unwrap();
    clock.advance(Duration::from_millis(100));
    // GCRA: one more every 250 ms; the log: all four leave the window at 1 s.
    for (peek, wait) in [
        (direct.peek(), 150),
        (keyed.peek_key("a"), 150),
        (log.peek_key("a"), 900),
    ] {
        assert!(!peek.is_allowed());
        assert_eq!(peek.retry_after(), Duration::from_millis(wait));
        assert_eq!(peek.remaining(), 0);
    }
}
