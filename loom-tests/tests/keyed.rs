//! Loom models of the keyed slot table, through the public API: a one-group table (two slots
//! under loom), an identity hasher that puts every key in it, and a `ManualClock`.
//!
//! The races of the slot protocol:
//! - two new keys claiming the one empty slot;
//! - a decision for key X racing the reuse of X's idle slot by key Y;
//! - a decision for key X racing the reuse of X's idle slot by key Y and then by an inserter of X
//!   (the decision's compare-and-swap finds X's tag again, but on a reservation);
//! - a decision for key X racing the eviction of X's live slot by key Y;
//! - a key's request under a declared tier racing a new key that needs room (the evictor must
//!   judge the entry by the tier its word carries);
//! - two threads inserting the same new key;
//! - two threads inserting the same new key into *different* slots, because they read the clock
//!   on either side of a tick (the race the fence after a reservation exists for), also under
//!   two tiers, whose reservations are different words;
//! - three threads inserting the same new key, so that one inserter can be overtaken: its
//!   reservation killed, the key published elsewhere, and its slot wanted by the third.
//! - a reset of key X racing a decision on X's slot, the insert of X, or the reuse of X's idle
//!   slot by key Y;
//! - a reset of every key racing a decision on a live key, or the reuse of an idle slot by a new
//!   key;
//! - the cancel of X's reservation racing another reservation of X, or the reuse of X's idle
//!   slot by key Y;
//! - a layered check holding X's slot, refused by a later layer, racing another request of X.
//!
//! Each asserts the exact outcome every interleaving must produce: one slot per key, every
//! decision counted in it, and no decision about one key touching another's state.
//! `loom-tests/mutants.sh` breaks the protocol one step at a time and checks that the models it
//! names for each break fail.
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use tollgate::layers::Layers;
use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Overflow, Quota, RateLimiter};
use tollgate_loom_tests::Identity;

type Limiter = KeyedRateLimiter<u64, Gcra, ManualClock, Identity>;

/// A table of `capacity` keys for `quota` under `overflow`: capacity 1 is one group of two
/// slots, capacity 2 two groups of two (every key with a hash below 2^31 probes group 0, then
/// group 1).
fn sized(quota: Quota, capacity: usize, overflow: Overflow) -> Arc<Limiter> {
    let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
        .capacity(capacity)
        .threads(1)
        .overflow(overflow)
        .clock(ManualClock::new())
        .hasher(Identity)
        .build()
        .unwrap();
    Arc::new(limiter)
}

/// A one-group table (capacity 1: two slots) for `quota` under `overflow`.
fn table_with(quota: Quota, overflow: Overflow) -> Arc<Limiter> {
    let limiter = sized(quota, 1, overflow);
    assert_eq!(limiter.stats().slots, 2, "one group of two slots");
    limiter
}

/// A one-group table for `quota` that denies new keys when it is full.
fn table(quota: Quota) -> Arc<Limiter> {
    table_with(quota, Overflow::Deny)
}

fn spawn_check(limiter: &Arc<Limiter>, key: u64) -> thread::JoinHandle<bool> {
    let limiter = Arc::clone(limiter);
    thread::spawn(move || limiter.check_key(&key).is_ok())
}

fn spawn_reset(limiter: &Arc<Limiter>, key: u64) -> thread::JoinHandle<()> {
    let limiter = Arc::clone(limiter);
    thread::spawn(move || limiter.reset_key(&key))
}

const C: u64 = 10;
const A: u64 = 20;
const B: u64 = 30;

#[test]
fn two_new_keys_race_for_the_last_empty_slot() {
    loom::model(|| {
        // One per hour: every admitted key stays live for the whole model.
        let limiter = table(Quota::per_hour(1).unwrap());
        limiter.check_key(&C).unwrap();
        let (a, b) = (spawn_check(&limiter, A), spawn_check(&limiter, B));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        // Exactly one gets the slot; the other overflows and is denied (and not recorded).
        assert!(a ^ b, "a {a}, b {b}");
        let (winner, loser) = if a { (A, B) } else { (B, A) };
        assert_eq!(limiter.peek_key(&winner).remaining(), 0);
        assert_eq!(limiter.peek_key(&loser).remaining(), 1);
        assert_eq!(limiter.peek_key(&C).remaining(), 0);
        let stats = limiter.stats();
        assert_eq!((stats.occupied, stats.overflows, stats.reuses), (2, 1, 0));
    });
}

/// The keys of the reuse models: X's slot goes idle, and Y wants it.
const X: u64 = A;
const Y: u64 = B;

/// A one-group table, both slots taken: C's, live for an hour, and `x`'s, idle. Keys run 1 per
/// second; C is checked under a premium tier of 1 per hour in the same table. One second after
/// its request `x`'s schedule is paid off; C's is not.
fn full_table_with_idle(x: u64) -> Arc<Limiter> {
    let limiter = table(Quota::per_second(1).unwrap());
    let hourly = Quota::per_hour(1).unwrap();
    limiter.check_key_with(&C, &hourly, 1).unwrap();
    limiter.check_key(&x).unwrap();
    limiter.clock().advance(Duration::from_secs(1));
    limiter
}

#[test]
fn decision_races_the_reuse_of_its_idle_slot() {
    loom::model(|| {
        let limiter = full_table_with_idle(X);
        let (x, y) = (spawn_check(&limiter, X), spawn_check(&limiter, Y));
        let (x, y) = (x.join().unwrap(), y.join().unwrap());
        // Either X decided on its own slot first (admitted; then Y finds no room), or Y took
        // X's idle slot first (admitted; then X, forgotten, finds no room). Never both, never
        // neither, and neither decision lands on the other key's state.
        assert!(x ^ y, "x {x}, y {y}");
        let (admitted, refused) = if x { (X, Y) } else { (Y, X) };
        assert_eq!(limiter.peek_key(&admitted).remaining(), 0);
        assert_eq!(limiter.peek_key(&refused).remaining(), 1, "a fresh state");
        assert_eq!(limiter.peek_key(&C).remaining(), 0, "C untouched");
        let stats = limiter.stats();
        assert_eq!(stats.reuses, y as u64);
        assert_eq!((stats.occupied, stats.overflows), (2, 1));
    });
}

/// X's slot goes idle, then to Y, then back to an inserter of X, all between the load and the
/// compare-and-swap of a decision about X: the decision's compare-and-swap fails on a word with
/// X's tag again, but one that is a reservation, with no state in it yet. The decision must give
/// up that word and look again (then decide on the state that insert publishes, or, tired of
/// waiting for it, find no room), not decide on the reservation: GCRA would read its marker as a
/// schedule far ahead and deny.
#[test]
fn decision_races_its_idle_slot_going_to_another_key_and_back() {
    loom::model(|| {
        // One per second with bursts of 3: X's and Y's single requests are paid off a second
        // later, and two requests of X a second apart always fit. A full table fails open, so
        // a request of X is admitted whether or not it finds room: only a decision made on a
        // reservation can deny it.
        let burst_of_3 = Quota::per_second(1).unwrap().with_burst(3).unwrap();
        let limiter = table_with(burst_of_3, Overflow::Allow);
        let hourly = Quota::per_hour(1).unwrap();
        limiter.check_key_with(&C, &hourly, 1).unwrap();
        limiter.check_key(&X).unwrap();
        limiter.clock().advance(Duration::from_secs(1));
        // At 1 s: C live for an hour, X idle.
        let x = spawn_check(&limiter, X);
        let y_then_x = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                // Y takes X's idle slot (or finds X live again and overflows), goes idle itself
                // a second later, and X's insert takes the slot back.
                let y = limiter.check_key(&Y).is_ok();
                limiter.clock().advance(Duration::from_secs(1));
                (y, limiter.check_key(&X).is_ok())
            })
        };
        let x = x.join().unwrap();
        let (y, x_again) = y_then_x.join().unwrap();
        assert!(x && y && x_again, "x {x}, y {y}, x again {x_again}");
        let remaining = |key| limiter.peek_key(&key).remaining();
        assert_eq!(remaining(Y), 3, "Y's slot went back to X: Y is fresh");
        assert_eq!(remaining(C), 0, "C untouched");
        let stats = limiter.stats();
        assert_eq!(stats.occupied, 2);
        // At 2 s the slot is X's again. Which requests it holds depends on the order.
        match (stats.overflows, stats.reuses, remaining(X)) {
            // X's first request decided on its idle slot, so Y found the table full (admitted,
            // not recorded); at 2 s the first request is paid off and the second is recorded.
            (1, 0, 2) => {}
            // Y reused X's slot first and X's first request, a new key again, found no room;
            // at 2 s Y was idle and X's second request reused its slot.
            (1, 2, 2) => {}
            // Y reused X's slot, then X's slot came back (reused from idle Y) and both of X's
            // requests were recorded in it, whichever was decided first.
            (0, 2, 1) => {}
            (overflows, reuses, x_left) => {
                panic!("{overflows} overflows, {reuses} reuses, X has {x_left} left")
            }
        }
    });
}

#[test]
fn decision_races_the_eviction_of_its_slot() {
    loom::model(|| {
        // Two per hour, under eviction: a key with a request left is evictable, one with none
        // (being limited) is not, and nothing goes idle while the model runs.
        let limiter = table_with(Quota::per_hour(2).unwrap(), Overflow::EvictLeastConstrained);
        limiter.check_key_n(&C, 2).unwrap();
        limiter.check_key(&X).unwrap();
        // The table is full: C is being limited, X has one request left.
        let (x, y) = (spawn_check(&limiter, X), spawn_check(&limiter, Y));
        let (x, y) = (x.join().unwrap(), y.join().unwrap());
        let stats = limiter.stats();
        let remaining = |key| limiter.peek_key(&key).remaining();
        assert_eq!(
            remaining(C),
            0,
            "C untouched: never evicted, never decided on"
        );
        assert_eq!(stats.occupied, 2);
        match (x, y) {
            // X decided first, on its own slot: now it is being limited too, and Y finds
            // nothing to evict.
            (true, false) => {
                assert_eq!((remaining(X), remaining(Y)), (0, 2));
                assert_eq!((stats.evictions, stats.overflows), (0, 1));
            }
            // Y evicted X first (X's pending decision failed on the tag, not landing on Y's
            // state); X, forgotten, came back as a new key and evicted Y in turn: each holds
            // one request, and the last one evicted is fresh again.
            (true, true) => {
                assert_eq!((remaining(X), remaining(Y)), (1, 2));
                assert_eq!((stats.evictions, stats.overflows), (2, 0));
            }
            // Y evicted X, and X came back while Y's slot was still reserved: a slot being
            // claimed is never evicted, so X found no room.
            (false, true) => {
                assert_eq!((remaining(X), remaining(Y)), (2, 1));
                assert_eq!((stats.evictions, stats.overflows), (1, 1));
            }
            (false, false) => panic!("both denied: one of them had room"),
        }
    });
}

/// A key upgraded to a declared tier that limits it sooner than the table's quota would: the
/// tier's first request, on the key's idle slot, races a new key that needs room. The table's
/// quota is free, 1 per second with bursts of 10 (9 s of room after one request); premium, 100
/// per second with bursts of 2 (10 ms of room), is declared. The slot's word carries the class
/// its last admission was made under, and an evictor must judge the entry by it: P, two premium
/// requests in, is limited and must never be evicted, while C, one free request in, may be.
#[test]
fn an_evictor_judges_a_racing_tier_request_by_its_class() {
    const P: u64 = X;
    const Q: u64 = Y;
    loom::model(|| {
        let free = Quota::per_second(1).unwrap().with_burst(10).unwrap();
        let premium = Quota::per_second(100).unwrap().with_burst(2).unwrap();
        let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(free))
            .tier(premium)
            .capacity(1)
            .threads(1)
            .overflow(Overflow::EvictLeastConstrained)
            .clock(ManualClock::new())
            .hasher(Identity)
            .build()
            .unwrap();
        let limiter = Arc::new(limiter);
        // P's one free request at 0 s is paid off at 1 s, when C makes its own: at 1 s the
        // table holds C, 1 s ahead (9 left, evictable under free), and P, idle.
        limiter.check_key(&P).unwrap();
        limiter.clock().set(Duration::from_secs(1));
        limiter.check_key(&C).unwrap();
        let upgrade = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_key_with(&P, &premium, 2).is_ok())
        };
        let q = spawn_check(&limiter, Q);
        let (p, q) = (upgrade.join().unwrap(), q.join().unwrap());
        let stats = limiter.stats();
        let remaining = |key| limiter.peek_key(&key).remaining();
        // Both find room, and exactly one entry is evicted: never P, whose premium requests
        // are both still counted.
        assert!(p && q, "p {p}, q {q}");
        assert_eq!(stats.evictions, 1);
        assert_eq!(
            limiter.peek_key_with(&P, &premium, 1).unwrap().remaining(),
            0
        );
        match stats.reuses {
            // P decided on its idle slot first: Q evicted C, the only entry not limited.
            0 => assert_eq!((remaining(C), remaining(Q)), (10, 9)),
            // Q reused P's idle slot first; P, a new key again, evicted C or Q (both one free
            // request in, as close to their reset).
            1 => assert_eq!(remaining(C) + remaining(Q), 19),
            reuses => panic!("{reuses} reuses"),
        }
    });
}

#[test]
fn two_threads_insert_the_same_new_key() {
    loom::model(|| {
        // Burst 2: both requests fit, and both must be counted in one state.
        let limiter = table(Quota::per_hour(2).unwrap());
        let (a, b) = (spawn_check(&limiter, A), spawn_check(&limiter, A));
        assert!(a.join().unwrap() && b.join().unwrap());
        assert_eq!(
            limiter.peek_key(&A).remaining(),
            0,
            "both decisions in one state"
        );
        let stats = limiter.stats();
        assert_eq!(
            (stats.occupied, stats.overflows),
            (1, 0),
            "one slot for the key"
        );
        assert!(limiter.check_key(&A).is_err());
    });
}

/// Two threads insert the same new key under two tiers, into different slots (as in
/// `inserts_of_one_key_into_different_slots`): their reservations are different words, each
/// carrying its tier, and the validation must still see the other, or both would publish.
#[test]
fn inserts_of_one_key_under_two_tiers_into_different_slots() {
    loom::model(|| {
        // Two groups of two slots. C sits in group 0 and is live until 1 s.
        let hourly = Quota::per_hour(1).unwrap();
        let two_hourly = Quota::new(1, Duration::from_secs(7_200)).unwrap();
        let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
            .tier(hourly)
            .tier(two_hourly)
            .capacity(2)
            .threads(1)
            .overflow(Overflow::Deny)
            .clock(ManualClock::new())
            .hasher(Identity)
            .build()
            .unwrap();
        let limiter = Arc::new(limiter);
        limiter.check_key(&C).unwrap();
        let tick = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.clock().set(Duration::from_secs(1)))
        };
        // A, under either tier, is limited after one admission: one is all there can be.
        let spawn_under = |tier: Quota| {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_key_with(&A, &tier, 1).is_ok())
        };
        let (a, b) = (spawn_under(hourly), spawn_under(two_hourly));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        tick.join().unwrap();
        assert!(a ^ b, "a {a}, b {b}");
        assert_eq!(limiter.stats().occupied, 2, "C and one slot for A");
    });
}

#[test]
fn inserts_of_one_key_into_different_slots() {
    loom::model(|| {
        // Two groups of two slots. C sits in group 0 and is live until 1 s.
        let limiter = sized(Quota::per_second(1).unwrap(), 2, Overflow::Deny);
        assert_eq!(limiter.stats().slots, 4, "two groups of two slots");
        limiter.check_key(&C).unwrap();
        // The clock ticks to 1 s while two threads insert key A. A thread that reads 0 s sees
        // C live in group 0 and picks the emptier group 1; one that reads 1 s sees C idle, finds
        // the groups equally loaded and picks group 0's empty slot. Each reserves its own slot,
        // and only the fence-and-rescan keeps them from both publishing.
        let tick = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.clock().set(Duration::from_secs(1)))
        };
        // A is limited to 1 per hour (a tier in the same table), so one admission is all there
        // can be, whichever time each thread read.
        let spawn_hourly = || {
            let limiter = Arc::clone(&limiter);
            let hourly = Quota::per_hour(1).unwrap();
            thread::spawn(move || limiter.check_key_with(&A, &hourly, 1).is_ok())
        };
        let (a, b) = (spawn_hourly(), spawn_hourly());
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        tick.join().unwrap();
        // Exactly one of the two is admitted, in one slot.
        assert!(a ^ b, "a {a}, b {b}");
        assert_eq!(limiter.stats().occupied, 2, "C and one slot for A");
    });
}

#[test]
fn three_inserts_of_one_key() {
    // Three threads make a far larger state space than two: on two cores this model takes about
    // half a minute at two preemptions and most of half an hour at three. Two are enough for the
    // race below, which it finds within a second. So it is bounded at two, whatever
    // `LOOM_MAX_PREEMPTIONS` asks for, unless `TOLLGATE_LOOM_DEEP` is set (for a run by hand).
    let mut model = loom::model::Builder::new();
    if std::env::var_os("TOLLGATE_LOOM_DEEP").is_none() {
        model.preemption_bound = Some(model.preemption_bound.map_or(2, |bound| bound.min(2)));
    }
    model.check(|| {
        // Burst 3: every request fits, unless its insert finds no room in the two slots.
        //
        // The race this model finds when a kill empties the slot (instead of leaving a tombstone
        // that only its owner clears): inserter 1 reserves slot 0 and validates, then stalls;
        // inserter 2 runs out of patience, kills slot 0, reserves slot 1 and stalls before
        // publishing; inserter 3 runs out of patience too and reserves the empty slot 0 (the
        // same word as inserter 1's reservation); inserter 2 publishes; inserter 1 wakes and its
        // publish, comparing values, lands on inserter 3's reservation. Two live slots, each
        // admitting from fresh.
        let limiter = table(Quota::per_hour(3).unwrap());
        let threads = [A, A, A].map(|key| spawn_check(&limiter, key));
        let admitted = threads
            .map(|t| t.join().unwrap())
            .iter()
            .filter(|&&ok| ok)
            .count() as u64;
        let stats = limiter.stats();
        assert_eq!(
            limiter.peek_key(&A).remaining(),
            3 - admitted,
            "every admission counted in it: {stats:?}"
        );
        assert_eq!(stats.occupied, 1, "one slot for the key");
        assert_eq!(
            stats.overflows,
            3 - admitted,
            "only a request with no room is denied"
        );
    });
}

/// A decision on key A racing `reset` (of A, or of every key), in a table that also holds C:
/// the reset is one more decision on A's slot, ordered with the other. Either the request came
/// first (it saw A's earlier admission, and the reset then forgot both), or the reset did (the
/// request was A's first since). C has `c_after` remaining afterwards.
fn reset_races_a_decision(reset: fn(&Arc<Limiter>) -> thread::JoinHandle<()>, c_after: u64) {
    loom::model(move || {
        // Three per hour: nothing goes idle while the model runs.
        let limiter = table(Quota::per_hour(3).unwrap());
        limiter.check_key(&C).unwrap();
        limiter.check_key(&A).unwrap();
        let decider = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.decide_key(&A, 1).unwrap())
        };
        let resetter = reset(&limiter);
        let decision = decider.join().unwrap();
        resetter.join().unwrap();
        assert!(decision.is_allowed());
        let after = limiter.peek_key(&A).remaining();
        match decision.remaining() {
            1 => assert_eq!(after, 3, "the request, then the reset"),
            2 => assert_eq!(after, 2, "the reset, then the request"),
            other => panic!("remaining {other} after the request"),
        }
        assert_eq!(limiter.peek_key(&C).remaining(), c_after, "C");
        let stats = limiter.stats();
        assert_eq!((stats.occupied, stats.reuses, stats.overflows), (2, 0, 0));
    });
}

#[test]
fn reset_races_a_decision_on_its_key() {
    // C untouched.
    reset_races_a_decision(|limiter| spawn_reset(limiter, A), 2);
}

#[test]
fn reset_races_the_insert_of_its_key() {
    loom::model(|| {
        let limiter = table(Quota::per_hour(3).unwrap());
        let (inserter, resetter) = (spawn_check(&limiter, A), spawn_reset(&limiter, A));
        assert!(inserter.join().unwrap());
        resetter.join().unwrap();
        // A reset that finds only the insert's reservation does not wait for it: it is ordered
        // before the insert, which decides on the fresh state. So A holds either the request
        // (the reset first) or nothing (the reset after the publish), always in one slot.
        let after = limiter.peek_key(&A).remaining();
        assert!(after == 2 || after == 3, "remaining {after}");
        let stats = limiter.stats();
        assert_eq!((stats.occupied, stats.reuses, stats.overflows), (1, 0, 0));
    });
}

#[test]
fn reset_races_the_reuse_of_its_idle_slot() {
    loom::model(|| {
        // The table is full, so Y needs X's idle slot.
        let limiter = full_table_with_idle(X);
        let (y, resetter) = (spawn_check(&limiter, Y), spawn_reset(&limiter, X));
        // Whether the reset puts X's idle state back to fresh first or finds the slot gone to
        // Y, Y gets the slot and keeps its admission: a reset compares the tag too.
        assert!(y.join().unwrap());
        resetter.join().unwrap();
        assert_eq!(limiter.peek_key(&Y).remaining(), 0, "Y's admission kept");
        assert_eq!(limiter.peek_key(&X).remaining(), 1, "X forgotten");
        assert_eq!(limiter.peek_key(&C).remaining(), 0, "C untouched");
        let stats = limiter.stats();
        assert_eq!((stats.occupied, stats.reuses, stats.overflows), (2, 1, 0));
    });
}

fn spawn_reset_all(limiter: &Arc<Limiter>) -> thread::JoinHandle<()> {
    let limiter = Arc::clone(limiter);
    thread::spawn(move || limiter.reset())
}

#[test]
fn reset_of_every_key_races_a_decision() {
    // C, which nothing else touched, forgotten too.
    reset_races_a_decision(spawn_reset_all, 3);
}

#[test]
fn reset_of_every_key_races_the_reuse_of_an_idle_slot() {
    loom::model(|| {
        // The table is full, so Y needs X's idle slot.
        let limiter = full_table_with_idle(X);
        let (y, resetter) = (spawn_check(&limiter, Y), spawn_reset_all(&limiter));
        assert!(y.join().unwrap());
        resetter.join().unwrap();
        // The walk finds X idle (and resets it), Y's reservation (and leaves it: its inserter
        // decides on the fresh state), or Y published (and resets it): Y's admission is kept or
        // forgotten, nothing else, and Y holds one slot either way.
        let y_after = limiter.peek_key(&Y).remaining();
        assert!(y_after == 0 || y_after == 1, "Y remaining {y_after}");
        assert_eq!(limiter.peek_key(&X).remaining(), 1, "X forgotten");
        assert_eq!(limiter.peek_key(&C).remaining(), 1, "C forgotten");
        let stats = limiter.stats();
        assert_eq!((stats.occupied, stats.reuses, stats.overflows), (2, 1, 0));
    });
}

#[test]
fn a_cancel_races_a_reservation_of_its_key() {
    loom::model(|| {
        // X's burst is spent and its first reservation waits a second; a second reservation of
        // X races the first's cancel, as in the direct model, in X's slot.
        let limiter = table(Quota::per_second(1).unwrap());
        let wait = Duration::from_secs(10);
        limiter.check_key(&X).unwrap();
        let first = limiter.reserve_key(&X, 1, wait).unwrap();
        let second = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                limiter
                    .reserve_key(&X, 1, wait)
                    .unwrap()
                    .ready_at()
                    .as_nanos()
            })
        };
        let cancelled = first.cancel();
        let second = second.join().unwrap();
        let expected = if cancelled { 1 } else { 2 };
        assert_eq!(second, expected * 1_000_000_000, "cancelled: {cancelled}");
        let next = limiter
            .reserve_key(&X, 1, wait)
            .unwrap()
            .ready_at()
            .as_nanos();
        assert_eq!(next, second + 1_000_000_000);
        assert_eq!(limiter.stats().occupied, 1);
    });
}

#[test]
fn a_cancel_races_the_reuse_of_its_idle_slot() {
    loom::model(|| {
        // X reserved at once, and a second later its slot is idle; Y takes it while X's
        // reservation is cancelled. Either the cancel comes first (X's slot goes back to the
        // fresh state, and Y then takes it) or Y does (the cancel finds no slot of X, and gives
        // back nothing). Y's state is never touched by the cancel.
        let limiter = table(Quota::per_second(1).unwrap());
        let hourly = Quota::per_hour(1).unwrap();
        limiter.check_key_with(&C, &hourly, 1).unwrap();
        let turn = limiter.reserve_key(&X, 1, Duration::ZERO).unwrap();
        limiter.clock().advance(Duration::from_secs(1));
        let y = spawn_check(&limiter, Y);
        let _given_back = turn.cancel();
        assert!(y.join().unwrap());
        assert_eq!(limiter.peek_key(&Y).remaining(), 0);
        assert_eq!(limiter.peek_key(&X).remaining(), 1);
        assert_eq!(
            limiter.peek_key_with(&C, &hourly, 1).unwrap().remaining(),
            0
        );
        let stats = limiter.stats();
        assert_eq!((stats.occupied, stats.reuses), (2, 1));
    });
}

#[test]
fn a_refused_layered_check_releases_its_hold_on_a_key() {
    loom::model(|| {
        // X (3 per hour, 1 spent) and a global layer with room for 1, checked together, race a
        // check of the global layer alone and a check of X alone: the layered check holds X's
        // slot at most while it is admitted, and X ends with exactly the admissions made.
        let limiter = table(Quota::per_hour(3).unwrap());
        limiter.check_key(&X).unwrap();
        let global = Arc::new(RateLimiter::with_clock(
            Gcra::from(Quota::per_hour(1).unwrap()),
            ManualClock::new(),
        ));
        let layered = {
            let (limiter, global) = (Arc::clone(&limiter), Arc::clone(&global));
            thread::spawn(move || (limiter.layer(&X), &*global).check_all(1).is_ok())
        };
        let alone = {
            let global = Arc::clone(&global);
            thread::spawn(move || global.check().is_ok())
        };
        let other = spawn_check(&limiter, X);
        let (layered, alone, other) = (
            layered.join().unwrap(),
            alone.join().unwrap(),
            other.join().unwrap(),
        );
        assert!(layered ^ alone && other, "layered {layered}, alone {alone}");
        assert_eq!(limiter.peek_key(&X).remaining(), 1 - u64::from(layered));
        assert_eq!(limiter.stats().occupied, 1);
    });
}
