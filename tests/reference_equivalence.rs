//! Every packed algorithm makes exactly the decisions of its reference model, on random quotas
//! (extreme ones included) and random sequences of (time step, cost): forwards, backwards, jumps
//! to the ends of time; costs of 0, 1, the capacity, past the capacity and `u64::MAX`.
//!
//! Beyond the verdicts, every step checks the reported numbers against the model (remaining,
//! exact retry and reset times, the check path against the full decision): see
//! `tollgate::reference::Differential`, which the fuzz targets drive too.
//!
//! A direct limiter on a manual clock makes the same decisions through its compare-and-swap loop,
//! and after `reset` decides as a new limiter would.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::reference::{
    Differential, FixedWindowCounter, Model, SlidingWindowCounter, TokenBucket, VirtualScheduling,
};
use tollgate::{
    Algorithm, CheckError, FixedWindow, Gcra, ManualClock, Nanos, Quota, RateLimiter,
    SlidingWindow, Transition,
};

/// How the clock moves before a request.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A small step forwards, relative to the period.
    Forward(u64),
    /// A huge step forwards.
    Leap(u64),
    /// Backwards (an unsynchronised core, or a clock stepped back).
    Back(u64),
    /// Straight to an absolute time.
    To(u64),
}

/// The cost of a request, relative to the algorithm's capacity.
#[derive(Clone, Copy, Debug)]
enum Cost {
    Zero,
    One,
    Some(u64),
    Capacity,
    AboveCapacity,
    Max,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..4_000).prop_map(Step::Forward),
        1 => any::<u64>().prop_map(Step::Leap),
        2 => (0u64..4_000).prop_map(Step::Back),
        1 => prop_oneof![Just(0), Just(Nanos::MAX.as_nanos()), Just(u64::MAX), any::<u64>()]
            .prop_map(Step::To),
    ]
}

fn cost() -> impl Strategy<Value = Cost> {
    prop_oneof![
        1 => Just(Cost::Zero),
        6 => Just(Cost::One),
        4 => (2u64..64).prop_map(Cost::Some),
        1 => Just(Cost::Capacity),
        1 => Just(Cost::AboveCapacity),
        1 => Just(Cost::Max),
    ]
}

/// Everyday quotas most of the time; the edges of what validates some of the time.
fn quota() -> impl Strategy<Value = Quota> {
    let period = prop_oneof![
        4 => (1u64..=3_600_000).prop_map(Duration::from_millis),
        1 => (1u64..=1_000).prop_map(Duration::from_nanos),
        1 => Just(Quota::MAX_PERIOD),
        1 => (1u64..=1 << 61).prop_map(Duration::from_nanos),
    ];
    let limit = prop_oneof![
        6 => 1u64..=20,
        2 => 1u64..=10_000,
        1 => Just(1u64),
        1 => any::<u64>(),
    ];
    let burst = prop_oneof![
        3 => Just(None),
        3 => (1u64..=40).prop_map(Some),
        1 => any::<u64>().prop_map(Some),
    ];
    (limit, period, burst).prop_filter_map("valid quota", |(limit, period, burst)| {
        let quota = Quota::new(limit, period).ok()?;
        match burst {
            None => Some(quota),
            Some(burst) => quota.with_burst(burst).ok(),
        }
    })
}

fn ops() -> impl Strategy<Value = Vec<(Step, Cost)>> {
    prop::collection::vec((step(), cost()), 1..120)
}

/// The time after `step`, from `now`, in steps of `unit` (1/1000 of the period), kept within
/// what a clock can read.
fn advance(now: u64, step: Step, unit: u64) -> u64 {
    match step {
        Step::Forward(n) => now.saturating_add(n.saturating_mul(unit)),
        Step::Leap(n) => now.saturating_add(n),
        Step::Back(n) => now.saturating_sub(n.saturating_mul(unit)),
        Step::To(t) => t,
    }
    .min(Nanos::MAX.as_nanos())
}

/// The cost in units, for an algorithm of this capacity.
fn units(cost: Cost, capacity: u64) -> u64 {
    match cost {
        Cost::Zero => 0,
        Cost::One => 1,
        Cost::Some(n) => n.min(capacity),
        Cost::Capacity => capacity,
        Cost::AboveCapacity => capacity.saturating_add(1),
        Cost::Max => u64::MAX,
    }
}

/// Replays `ops` through the algorithm and the model, checking every step with
/// [`Differential`].
fn replay<A: Algorithm, M: Model + Clone>(
    algorithm: A,
    model: M,
    period: u64,
    ops: &[(Step, Cost)],
) -> Result<(), TestCaseError> {
    let capacity = algorithm.capacity();
    let mut diff = Differential::new(algorithm, model);
    // Steps are measured in 1/1000 of the period, so every quota sees every regime.
    let unit = (period / 1000).max(1);
    let mut now = 0u64;
    for &(step, cost) in ops {
        now = advance(now, step, unit);
        if let Err(mismatch) = diff.step(Nanos::from_nanos(now), units(cost, capacity)) {
            return Err(TestCaseError::fail(mismatch.to_string()));
        }
    }
    Ok(())
}

/// What a direct limiter is asked to do: decide a request, or forget everything.
#[derive(Clone, Copy, Debug)]
enum Op {
    Request(Step, Cost),
    Reset,
}

fn limiter_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        12 => (step(), cost()).prop_map(|(step, cost)| Op::Request(step, cost)),
        1 => Just(Op::Reset),
    ];
    prop::collection::vec(op, 1..120)
}

/// Replays `ops` through a [`RateLimiter`] on a manual clock and, beside it, a [`Differential`]
/// of the same algorithm and the model. Every decision of the limiter must be the one the
/// differential checked against the model; a reset starts the differential afresh, so after
/// `reset` the limiter must decide exactly as a new limiter would.
fn replay_limiter<A: Algorithm + Copy, M: Model + Clone>(
    algorithm: A,
    model: M,
    period: u64,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let capacity = algorithm.capacity();
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(algorithm, &clock);
    let new = Differential::new(algorithm, model);
    let mut diff = new.clone();
    let unit = (period / 1000).max(1);
    let mut now = 0u64;
    for (i, &op) in ops.iter().enumerate() {
        let (step, cost) = match op {
            Op::Reset => {
                limiter.reset();
                diff = new.clone();
                continue;
            }
            Op::Request(step, cost) => (step, units(cost, capacity)),
        };
        now = advance(now, step, unit);
        clock.set(Nanos::from_nanos(now).as_duration());
        let expected = diff
            .step(Nanos::from_nanos(now), cost)
            .map_err(|mismatch| TestCaseError::fail(mismatch.to_string()))?;
        // A cost above the capacity is refused as such on both paths, and only such a cost.
        let too_large = cost > capacity;
        let what = format!("op {i} at {now} ns, cost {cost} of {capacity}");
        // Every other request takes the check path, which reports the verdict and the wait.
        if i % 2 == 1 {
            match (limiter.check_n(cost), too_large) {
                (Ok(()), false) => prop_assert!(expected.is_allowed(), "{}: admitted", what),
                (Err(CheckError::Denied(denied)), false) => {
                    prop_assert!(!expected.is_allowed(), "{}: denied", what);
                    prop_assert_eq!(denied.retry_after(), expected.retry_after(), "{}", what);
                }
                (Err(CheckError::InsufficientCapacity(err)), true) => {
                    prop_assert_eq!((err.cost(), err.capacity()), (cost, capacity), "{}", what);
                }
                (other, _) => prop_assert!(false, "{}: {:?}", what, other),
            }
            continue;
        }
        match (limiter.decide(cost), too_large) {
            (Ok(decision), false) => prop_assert_eq!(decision, expected, "{}", what),
            (Err(err), true) => {
                prop_assert_eq!((err.cost(), err.capacity()), (cost, capacity), "{}", what);
            }
            (other, _) => prop_assert!(false, "{}: {:?}", what, other),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn gcra_is_the_virtual_scheduling_algorithm(quota in quota(), ops in ops()) {
        let gcra = Gcra::from(quota);
        replay(gcra, VirtualScheduling::new(&quota), quota.period().as_nanos() as u64, &ops)?;
    }

    #[test]
    fn gcra_is_the_token_bucket(quota in quota(), ops in ops()) {
        let gcra = Gcra::from(quota);
        replay(gcra, TokenBucket::new(&quota), quota.period().as_nanos() as u64, &ops)?;
    }

    #[test]
    fn sliding_window_is_its_definition(quota in quota(), ops in ops()) {
        // Quotas whose counts do not fit the word are refused at construction; check that the
        // refusal is the documented one and move on.
        match SlidingWindow::new(&quota) {
            Ok(sw) => replay(sw, SlidingWindowCounter::new(&quota), quota.period().as_nanos() as u64, &ops)?,
            Err(err) => { let refused = matches!(err, tollgate::QuotaError::WindowLimitTooLarge { .. }); prop_assert!(refused, "{:?}", err) }
        }
    }

    #[test]
    fn fixed_window_is_its_definition(quota in quota(), ops in ops()) {
        match FixedWindow::new(&quota) {
            Ok(fw) => replay(fw, FixedWindowCounter::new(&quota), quota.period().as_nanos() as u64, &ops)?,
            Err(err) => { let refused = matches!(err, tollgate::QuotaError::WindowLimitTooLarge { .. }); prop_assert!(refused, "{:?}", err) }
        }
    }

    /// A direct limiter makes the model's decisions through its clock and its compare-and-swap
    /// loop, and a reset leaves it deciding exactly as a new limiter would.
    #[test]
    fn a_reset_limiter_decides_as_a_new_one(quota in quota(), ops in limiter_ops()) {
        let period = quota.period().as_nanos() as u64;
        replay_limiter(Gcra::from(quota), VirtualScheduling::new(&quota), period, &ops)?;
        if let Ok(sw) = SlidingWindow::new(&quota) {
            replay_limiter(sw, SlidingWindowCounter::new(&quota), period, &ops)?;
        }
        if let Ok(fw) = FixedWindow::new(&quota) {
            replay_limiter(fw, FixedWindowCounter::new(&quota), period, &ops)?;
        }
    }

    /// The idle predicate the keyed store relies on: an idle word decides exactly like the fresh
    /// word, at the time it was found idle and at every later time, and stores the same word.
    #[test]
    fn idle_words_are_fresh(quota in quota(), ops in ops(), later in prop::collection::vec((0u64..4_000, cost()), 1..8)) {
        fn check<A: Algorithm>(a: &A, period: u64, ops: &[(Step, Cost)], later: &[(u64, Cost)]) -> Result<(), TestCaseError> {
            let unit = (period / 1000).max(1);
            let mut now = 0u64;
            let mut state = 0u64;
            for &(step, _) in ops {
                now = advance(now, step, unit);
                state = a.decide(state, Nanos::from_nanos(now), 1).1;
                if a.is_idle(state, Nanos::from_nanos(now)) {
                    let (mut idle, mut fresh, mut t) = (state, 0u64, now);
                    for &(dt, cost) in later {
                        t = t.saturating_add(dt * unit).min(Nanos::MAX.as_nanos());
                        let cost = match cost { Cost::Zero => 0, Cost::One => 1, _ => a.capacity() };
                        let (d1, s1) = a.decide(idle, Nanos::from_nanos(t), cost);
                        let (d2, s2) = a.decide(fresh, Nanos::from_nanos(t), cost);
                        prop_assert_eq!(d1, d2);
                        // The words may differ while both are unwritten (a peek); after a write
                        // they must be the same word.
                        if cost > 0 && d1.is_allowed() {
                            prop_assert_eq!(s1, s2);
                        }
                        idle = s1;
                        fresh = s2;
                    }
                }
            }
            Ok(())
        }
        let period = quota.period().as_nanos() as u64;
        check(&Gcra::from(quota), period, &ops, &later)?;
        if let Ok(sw) = SlidingWindow::new(&quota) {
            check(&sw, period, &ops, &later)?;
        }
        if let Ok(fw) = FixedWindow::new(&quota) {
            check(&fw, period, &ops, &later)?;
        }
    }
}

proptest! {
    /// A key holds its slot in a keyed table as long as its state is not idle, and the decision
    /// says how long that is: after every request (admitted, denied or a peek), the state is idle
    /// at `now + reset_after` and not a nanosecond sooner, wherever that time is one a clock can
    /// read. While time only moves forwards, `reset_after` is at most the quota's tolerance for
    /// GCRA, two periods for the sliding window and one for the fixed window: how long a key
    /// stays live after its last admission, which is what `KeyedRateLimiter`'s "Choosing the
    /// capacity" sizes tables by.
    #[test]
    fn reset_after_is_when_the_state_is_idle(quota in quota(), ops in ops()) {
        fn check<A: Algorithm>(a: &A, period: u64, bound: u64, ops: &[(Step, Cost)]) -> Result<(), TestCaseError> {
            let unit = (period / 1000).max(1);
            let (mut now, mut state, mut monotone) = (0u64, 0u64, true);
            for &(step, cost) in ops {
                let next = advance(now, step, unit);
                monotone &= next >= now;
                now = next;
                let (d, s) = a.decide(state, Nanos::from_nanos(now), units(cost, a.capacity()));
                state = s;
                let reset = u64::try_from(d.reset_after().as_nanos()).unwrap();
                // A state idle only past the end of time (a clock stepped back from it) reports
                // `Nanos::MAX`, the longest wait there is, as does one idle at `Nanos::MAX`
                // exactly, seen from 0: either way it is not idle a nanosecond before
                // `now + reset`, or at the end of time.
                let saturated = reset == Nanos::MAX.as_nanos();
                if let Some(idle_at) = now.checked_add(reset).filter(|&t| t <= Nanos::MAX.as_nanos() && !saturated) {
                    prop_assert!(a.is_idle(state, Nanos::from_nanos(idle_at)));
                    if reset > 0 {
                        prop_assert!(!a.is_idle(state, Nanos::from_nanos(idle_at - 1)));
                    }
                } else {
                    let before = now.saturating_add(reset - 1).min(Nanos::MAX.as_nanos());
                    prop_assert!(!a.is_idle(state, Nanos::from_nanos(before)));
                }
                if monotone {
                    prop_assert!(reset <= bound, "reset_after {} over {}", reset, bound);
                }
            }
            Ok(())
        }
        let period = quota.period().as_nanos() as u64;
        let tolerance = quota.tolerance().as_nanos() as u64;
        check(&Gcra::from(quota), period, tolerance, &ops)?;
        if let Ok(sw) = SlidingWindow::new(&quota) {
            check(&sw, period, 2 * period, &ops)?;
        }
        if let Ok(fw) = FixedWindow::new(&quota) {
            check(&fw, period, period, &ops)?;
        }
    }
}

proptest! {
    /// Arbitrary words (corrupted memory, a fuzzer) and arbitrary times never panic, and the
    /// check path always agrees with the full decision: the verdict, the word it stores, and a
    /// denial's wait.
    #[test]
    fn arbitrary_words_never_panic(quota in quota(), word in any::<u64>(), now in any::<u64>(), cost in any::<u64>()) {
        fn check<A: Algorithm>(a: &A, word: u64, now: Nanos, cost: u64) -> Result<(), TestCaseError> {
            let (d, s) = a.decide(word, now, cost);
            match a.transition(word, now, cost) {
                Transition::Allow { state } => { prop_assert!(d.is_allowed()); prop_assert_eq!(state, s); }
                Transition::Deny { retry_after } => {
                    prop_assert!(!d.is_allowed());
                    prop_assert_eq!(word, s);
                    prop_assert_eq!(retry_after.as_duration(), d.retry_after());
                }
            }
            a.is_idle(word, now);
            Ok(())
        }
        let now = Nanos::from_nanos(now);
        check(&Gcra::from(quota), word, now, cost)?;
        if let Ok(sw) = SlidingWindow::new(&quota) { check(&sw, word, now, cost)?; }
        if let Ok(fw) = FixedWindow::new(&quota) { check(&fw, word, now, cost)?; }
    }
}
