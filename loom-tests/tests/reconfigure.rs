//! Loom models of live reconfiguration: a direct limiter's quota, and a keyed limiter's,
//! changed while other threads decide, insert keys, reserve and cancel.
//!
//! Every model runs at frozen time on a `ManualClock`, so the conversion of the state is exact
//! (the room carries over token for token) and each outcome has one right answer, whichever
//! quota a racing decision was made under. A decision made with one quota on the state of the
//! other leaves a schedule that refills at the wrong rate: the models advance the clock and
//! check the refill. Run with `loom-tests/run.sh` (it sets `--cfg tollgate_loom`).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use tollgate::{
    Algorithm, CheckError, Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter, SlidingWindow,
};
use tollgate_loom_tests::Identity;

fn gcra(quota: Quota) -> Arc<RateLimiter<Gcra, ManualClock>> {
    Arc::new(RateLimiter::with_clock(
        Gcra::from(quota),
        ManualClock::new(),
    ))
}

/// Two per second, per minute and per hour: the same burst, so at frozen time a conversion
/// keeps every token, and intervals far enough apart that a schedule left by the wrong quota
/// shows within a second.
fn quotas() -> [Quota; 3] {
    [
        Quota::per_second(2).unwrap(),
        Quota::per_minute(2).unwrap(),
        Quota::per_hour(2).unwrap(),
    ]
}

#[test]
fn a_check_races_the_first_reconfiguration() {
    loom::model(|| {
        let [second, minute, _] = quotas();
        let l = gcra(second);
        let checker = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.check().is_ok())
        };
        l.set_quota(minute).unwrap();
        assert!(checker.join().unwrap());
        // One token used, under either quota, and counted once.
        assert_eq!(l.peek().remaining(), 1);
        assert_eq!(l.algorithm(), Gcra::from(minute));
        // The used token comes back at the new rate only: not after half a second.
        l.clock().advance(Duration::from_secs(1));
        assert_eq!(l.peek().remaining(), 1);
        l.clock().advance(Duration::from_secs(29));
        assert_eq!(l.peek().remaining(), 2);
    });
}

#[test]
fn a_check_races_two_reconfigurations() {
    loom::model(|| {
        // The second reconfiguration rewrites the slot that holds the first generation's quota
        // (a decider that loaded generation 1 and read its quota late reads another's, and must
        // not use it), and the third generation is the 128-bit word's second.
        let [second, minute, hour] = quotas();
        let l = gcra(second);
        let checker = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.check().is_ok())
        };
        l.set_quota(minute).unwrap();
        l.set_quota(hour).unwrap();
        assert!(checker.join().unwrap());
        assert_eq!(l.peek().remaining(), 1);
        assert_eq!(l.algorithm(), Gcra::from(hour));
        l.clock().advance(Duration::from_secs(1_799));
        assert_eq!(l.peek().remaining(), 1);
        l.clock().advance(Duration::from_secs(1));
        assert_eq!(l.peek().remaining(), 2);
    });
}

#[test]
fn checks_race_a_reconfiguration_of_a_moved_limiter() {
    loom::model(|| {
        // Already in generation 1: two checks on the 128-bit word race the move to generation 2.
        let [second, minute, hour] = quotas();
        let l = gcra(second);
        l.set_quota(minute).unwrap();
        let checkers: Vec<_> = (0..2)
            .map(|_| {
                let l = Arc::clone(&l);
                thread::spawn(move || l.check().is_ok())
            })
            .collect();
        l.set_quota(hour).unwrap();
        for checker in checkers {
            assert!(checker.join().unwrap());
        }
        assert_eq!(l.peek().remaining(), 0);
        assert!(l.check().is_err());
        l.clock().advance(Duration::from_secs(1_799));
        assert_eq!(l.peek().remaining(), 0);
        l.clock().advance(Duration::from_secs(1));
        assert_eq!(l.peek().remaining(), 1);
    });
}

#[test]
fn a_tightening_races_a_check_of_the_old_burst() {
    loom::model(|| {
        // A cost of 2 fits the old burst and exceeds the new one: admitted before the change
        // (and then nothing is left), or refused as beyond the capacity after it (and the room
        // carries over, capped at the new burst of 1): never admitted on the new quota.
        let l = gcra(Quota::per_second(2).unwrap());
        let tight = Quota::per_minute(1).unwrap();
        let checker = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.check_n(2))
        };
        l.set_quota(tight).unwrap();
        match checker.join().unwrap() {
            Ok(()) => {
                assert_eq!(l.peek().remaining(), 0);
                // Nothing left when the change came: the token comes back a minute later.
                l.clock().advance(Duration::from_secs(59));
                assert_eq!(l.peek().remaining(), 0);
                l.clock().advance(Duration::from_secs(1));
                assert_eq!(l.peek().remaining(), 1);
            }
            Err(CheckError::InsufficientCapacity(_)) => assert_eq!(l.peek().remaining(), 1),
            Err(denied) => panic!("refused as {denied:?}"),
        }
    });
}

#[test]
fn a_cancel_races_a_reconfiguration() {
    loom::model(|| {
        // A reservation's cancel gives back its hold if it comes before the change; after, the
        // hold was converted with the rest of the state and the cancel gives nothing back.
        let [second, minute, _] = quotas();
        let l = gcra(second);
        let canceller = {
            let l = Arc::clone(&l);
            thread::spawn(move || {
                let reservation = l.reserve(1, Duration::ZERO).unwrap();
                reservation.cancel()
            })
        };
        l.set_quota(minute).unwrap();
        let cancelled = canceller.join().unwrap();
        let expected = if cancelled { 2 } else { 1 };
        assert_eq!(l.peek().remaining(), expected, "cancelled: {cancelled}");
        l.clock().advance(Duration::from_secs(1));
        assert_eq!(l.peek().remaining(), expected, "cancelled: {cancelled}");
    });
}

#[test]
fn a_window_check_races_a_reconfiguration() {
    loom::model(|| {
        // A sliding window of 2 per second becomes 2 per minute: the used request is carried
        // into the new, longer window, and is not forgotten when the old second ends.
        let window = |q: Quota| SlidingWindow::new(&q).unwrap();
        let [second, minute, _] = quotas();
        let l = Arc::new(RateLimiter::with_clock(window(second), ManualClock::new()));
        let checker = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.check().is_ok())
        };
        l.set_quota(minute).unwrap();
        assert!(checker.join().unwrap());
        assert_eq!(l.algorithm().capacity(), 2);
        assert_eq!(l.peek().remaining(), 1);
        l.clock().advance(Duration::from_secs(2));
        assert_eq!(l.peek().remaining(), 1);
    });
}

type Keyed = KeyedRateLimiter<u64, Gcra, ManualClock, Identity>;

/// A keyed limiter of one group of two slots (under loom) for `quota`, whose keys are their own
/// hashes.
fn keyed(quota: Quota) -> Arc<Keyed> {
    let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
        .capacity(1)
        .threads(1)
        .clock(ManualClock::new())
        .hasher(Identity)
        .build()
        .unwrap();
    assert_eq!(limiter.stats().slots, 2);
    Arc::new(limiter)
}

const X: u64 = 10;
const Y: u64 = 20;

fn spawn_key_check(limiter: &Arc<Keyed>, key: u64) -> thread::JoinHandle<bool> {
    let limiter = Arc::clone(limiter);
    thread::spawn(move || limiter.check_key(&key).is_ok())
}

/// A check of a live key races a reconfiguration's walk: decided before the key's conversion
/// with the old quota, or after it with the new, or by converting the key itself when it meets
/// it before the walk does. One token used either way, refilled at the new rate only; the other
/// key, converted by the walk or by nobody else, the same.
#[test]
fn a_key_check_races_a_keyed_reconfiguration() {
    loom::model(|| {
        let [second, minute, _] = quotas();
        let l = keyed(second);
        l.check_key(&X).unwrap();
        l.check_key(&Y).unwrap();
        let checker = spawn_key_check(&l, X);
        l.set_quota(minute).unwrap();
        assert!(checker.join().unwrap());
        assert_eq!(l.peek_key(&X).remaining(), 0);
        assert_eq!(l.peek_key(&Y).remaining(), 1);
        l.clock().advance(Duration::from_secs(29));
        assert_eq!(l.peek_key(&X).remaining(), 0);
        assert_eq!(l.peek_key(&Y).remaining(), 1);
        l.clock().advance(Duration::from_secs(1));
        assert_eq!(l.peek_key(&X).remaining(), 1);
        assert_eq!(l.peek_key(&Y).remaining(), 2);
        assert_eq!(l.stats().occupied, 2);
    });
}

/// The insert of a new key races two reconfigurations: the inserter decides in the generation
/// it loaded, and must not publish that generation's state once a walk has passed its slot (it
/// checks the generation after its fence; the walk kills a reservation of an earlier
/// generation that it finds). An entry published a generation late would be taken by the
/// second walk for the first generation's and converted from the wrong quota: its one token
/// would come back within a minute instead of half an hour.
#[test]
fn an_insert_races_two_keyed_reconfigurations() {
    loom::model(|| {
        let [second, minute, hour] = quotas();
        let l = keyed(second);
        let inserter = spawn_key_check(&l, X);
        l.set_quota(minute).unwrap();
        l.set_quota(hour).unwrap();
        assert!(inserter.join().unwrap());
        assert_eq!(l.peek_key(&X).remaining(), 1);
        l.clock().advance(Duration::from_secs(60));
        assert_eq!(l.peek_key(&X).remaining(), 1);
        l.clock().advance(Duration::from_secs(1_740));
        assert_eq!(l.peek_key(&X).remaining(), 2);
        assert_eq!(l.stats().occupied, 1);
    });
}

/// A cancel of a key's reservation races a reconfiguration: it gives back before the key is
/// converted, or nothing after.
#[test]
fn a_key_cancel_races_a_keyed_reconfiguration() {
    loom::model(|| {
        let [second, minute, _] = quotas();
        let l = keyed(second);
        l.check_key(&X).unwrap();
        let canceller = {
            let l = Arc::clone(&l);
            thread::spawn(move || l.reserve_key(&X, 1, Duration::ZERO).unwrap().cancel())
        };
        l.set_quota(minute).unwrap();
        let cancelled = canceller.join().unwrap();
        let left = if cancelled { 1 } else { 0 };
        assert_eq!(l.peek_key(&X).remaining(), left);
        l.clock().advance(Duration::from_secs(30));
        assert_eq!(l.peek_key(&X).remaining(), left + 1);
    });
}
