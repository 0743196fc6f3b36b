//! Loom models of the direct limiter's compare-and-swap loop, its reset, and reservations and
//! their cancel, through the public API.
//!
//! Each model runs a few threads against one limiter on a `ManualClock` and asserts exact
//! outcomes under every interleaving loom explores: no admission lost, none double-counted, and
//! a denial never writes. Run with `loom-tests/run.sh` (it sets `--cfg tollgate_loom`).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use tollgate::{Algorithm, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingWindow};

fn limiter<A: Algorithm>(algorithm: A) -> Arc<RateLimiter<A, ManualClock>> {
    Arc::new(RateLimiter::with_clock(algorithm, ManualClock::new()))
}

/// Runs `cost`s concurrently, one thread each, and returns which were admitted.
fn race<A: Algorithm + 'static>(
    limiter: &Arc<RateLimiter<A, ManualClock>>,
    costs: &[u64],
) -> Vec<bool> {
    let handles: Vec<_> = costs
        .iter()
        .map(|&cost| {
            let limiter = Arc::clone(limiter);
            thread::spawn(move || limiter.check_n(cost).is_ok())
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn one_slot_two_threads() {
    loom::model(|| {
        let l = limiter(Gcra::from(Quota::per_second(1).unwrap()));
        let admitted = race(&l, &[1, 1]);
        assert_eq!(admitted.iter().filter(|&&a| a).count(), 1);
        assert_eq!(l.peek().remaining(), 0);
    });
}

#[test]
fn no_lost_update() {
    loom::model(|| {
        let l = limiter(Gcra::from(Quota::per_second(3).unwrap()));
        // Two threads race while the main thread also takes one: all three fit, and every one
        // of them is counted.
        let spawn = || {
            let l = Arc::clone(&l);
            thread::spawn(move || l.check().is_ok())
        };
        let (a, b) = (spawn(), spawn());
        let mine = l.check().is_ok();
        assert!(a.join().unwrap() && b.join().unwrap() && mine);
        assert_eq!(l.peek().remaining(), 0);
        assert!(l.check().is_err());
    });
}

#[test]
fn costs_are_all_or_nothing() {
    loom::model(|| {
        // Burst 3, two requests of 2: exactly one fits, and 1 unit is left.
        let l = limiter(Gcra::from(Quota::per_second(3).unwrap()));
        let admitted = race(&l, &[2, 2]);
        assert_eq!(admitted.iter().filter(|&&a| a).count(), 1);
        assert_eq!(l.peek().remaining(), 1);
    });
}

#[test]
fn decide_races_check() {
    loom::model(|| {
        // `decide` and `check` go through the same loop: both counted, the third denied.
        let l = limiter(SlidingWindow::new(&Quota::per_minute(2).unwrap()).unwrap());
        let decided = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.decide(1).unwrap())
        };
        let checked = l.check().is_ok();
        let decision = decided.join().unwrap();
        assert!(checked && decision.is_allowed());
        // Whichever went second saw the first: the two `remaining` values are 1 and 0, so the
        // decide thread saw 1 or 0.
        assert!(decision.remaining() <= 1);
        assert_eq!(l.peek().remaining(), 0);
        assert!(l.check().is_err());
    });
}

#[test]
fn denial_writes_nothing() {
    loom::model(|| {
        // Fixed window of 1: one thread takes it, the other is denied; a denial racing an
        // admission must not overwrite it (the peek afterwards still shows it).
        let l = limiter(FixedWindow::new(&Quota::per_second(1).unwrap()).unwrap());
        let admitted = race(&l, &[1, 1]);
        assert_eq!(admitted.iter().filter(|&&a| a).count(), 1);
        let peek = l.peek();
        assert_eq!(peek.remaining(), 0);
        assert!(!peek.reset_after().is_zero());
    });
}

#[test]
fn reset_races_a_decision() {
    loom::model(|| {
        let l = limiter(Gcra::from(Quota::per_hour(3).unwrap()));
        l.check().unwrap();
        let decider = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.decide(1).unwrap())
        };
        let resetter = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.reset())
        };
        let decision = decider.join().unwrap();
        resetter.join().unwrap();
        // The reset takes its place among the decisions: either the request came first (it saw
        // the earlier admission, and the reset then forgot both) or the reset did (the request
        // was decided on the fresh state). Never a decision computed before the reset and
        // written after it.
        assert!(decision.is_allowed());
        let after = l.peek().remaining();
        match decision.remaining() {
            1 => assert_eq!(after, 3, "the request, then the reset"),
            2 => assert_eq!(after, 2, "the reset, then the request"),
            other => panic!("remaining {other} after the request"),
        }
    });
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn reservations_race_for_consecutive_turns() {
    loom::model(|| {
        // 1 per second, bursts of 1: two reservations and a check race at frozen time. The
        // check is admitted only if it comes first; the reservations take the next turns, one
        // each, none shared and none skipped.
        let l = limiter(Gcra::from(Quota::per_second(1).unwrap()));
        let reserve = || {
            let l = Arc::clone(&l);
            thread::spawn(move || l.reserve(1, 10 * SECOND).unwrap().ready_at().as_nanos())
        };
        let (a, b) = (reserve(), reserve());
        let checked = l.check().is_ok();
        let mut turns = [a.join().unwrap(), b.join().unwrap()];
        turns.sort_unstable();
        let first = u64::from(checked) * 1_000_000_000;
        assert_eq!(turns, [first, first + 1_000_000_000]);
        let next = l.reserve(1, 10 * SECOND).unwrap().ready_at().as_nanos();
        assert_eq!(next, first + 2_000_000_000);
    });
}

#[test]
fn a_cancel_races_a_reservation_behind_it() {
    loom::model(|| {
        // The burst is spent; `first` waits a second. A second reservation races its cancel:
        // either the cancel comes first (given back, and the second takes the first's turn) or
        // the second does (it queues behind the first, which then gives back nothing).
        let l = limiter(Gcra::from(Quota::per_second(1).unwrap()));
        l.check().unwrap();
        let first = l.reserve(1, 10 * SECOND).unwrap();
        assert_eq!(first.ready_at().as_nanos(), 1_000_000_000);
        let second = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.reserve(1, 10 * SECOND).unwrap().ready_at().as_nanos())
        };
        let cancelled = first.cancel();
        let second = second.join().unwrap();
        let expected = if cancelled { 1 } else { 2 };
        assert_eq!(second, expected * 1_000_000_000, "cancelled: {cancelled}");
        // The schedule ends right after the second, either way.
        let next = l.reserve(1, 10 * SECOND).unwrap().ready_at().as_nanos();
        assert_eq!(next, second + 1_000_000_000);
    });
}
