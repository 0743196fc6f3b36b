//! Live reconfiguration against its definition.
//!
//! First the conversion itself, [`Algorithm::carry_over`], for every algorithm and random
//! quotas, states and times: the room carries over capped at the new capacity, GCRA's room
//! refills at the new rate from there, and a schedule running ahead (reservations waiting)
//! keeps its backlog, rescaled. Then a direct limiter reconfigured many times among random
//! decisions, reservations, cancels and resets, against a plain word on one thread: the same
//! decisions, whatever generation the limiter is in. Then threads deciding while another
//! reconfigures, at frozen time: exact counts. Then the documented cases, one by one. Then the
//! same for keyed limiters: a word per key, threads inserting and deciding many keys while the
//! quota flips, and the keyed cases (idle keys, tiers, snapshots, cancels, layers).

use std::collections::HashMap;
use std::sync::Barrier;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, BuildError, CheckError, Clock, FixedWindow, Gcra, KeyedRateLimiter, ManualClock,
    Nanos, Quota, QuotaError, RateLimiter, SlidingWindow, Transition,
};

const MS: u64 = 1_000_000;

fn quota() -> impl Strategy<Value = Quota> {
    (1u64..50, 1u64..5_000, 1u64..50).prop_map(|(limit, ms, burst)| {
        Quota::new(limit, Duration::from_millis(ms))
            .unwrap()
            .with_burst(burst)
            .unwrap()
    })
}

/// A state of `algorithm` after requests of these costs at these times (milliseconds).
fn history<A: Algorithm>(algorithm: &A, requests: &[(u64, u64)]) -> u64 {
    let mut state = 0;
    let mut now = 0;
    for &(cost, ms) in requests {
        now += ms * MS;
        if let Transition::Allow { state: next } =
            algorithm.transition(state, Nanos::from_nanos(now), cost)
        {
            state = next;
        }
    }
    state
}

fn requests() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..20, 0u64..400), 0..40)
}

fn remaining<A: Algorithm>(algorithm: &A, state: u64, ms: u64) -> u64 {
    algorithm
        .decide(state, Nanos::from_nanos(ms * MS), 0)
        .0
        .remaining()
}

/// The room carries over, capped at the new capacity: for each algorithm, exactly.
fn room_carries_over<A: Algorithm>(from: A, to: A, requests: &[(u64, u64)], later: u64) {
    let state = history(&from, requests);
    let at: u64 = requests.iter().map(|r| r.1).sum::<u64>() + later;
    let carried = from.carry_over(state, Nanos::from_nanos(at * MS), &to);
    assert_ne!(carried, u64::MAX);
    let left = remaining(&from, state, at).min(to.capacity());
    assert_eq!(remaining(&to, carried, at), left);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn gcra_room_carries_over(from in quota(), to in quota(), requests in requests(), later in 0u64..3_000) {
        room_carries_over(Gcra::from(from), Gcra::from(to), &requests, later);
    }

    #[test]
    fn sliding_window_room_carries_over(from in quota(), to in quota(), requests in requests(), later in 0u64..3_000) {
        let window = |q: Quota| SlidingWindow::new(&q).unwrap();
        room_carries_over(window(from), window(to), &requests, later);
    }

    #[test]
    fn fixed_window_room_carries_over(from in quota(), to in quota(), requests in requests(), later in 0u64..3_000) {
        let window = |q: Quota| FixedWindow::new(&q).unwrap();
        room_carries_over(window(from), window(to), &requests, later);
    }

    /// GCRA's room refills at the new rate from where it was: one request per new emission
    /// interval, up to the new burst.
    #[test]
    fn gcra_refills_at_the_new_rate(from in quota(), to in quota(), requests in requests(), later in 0u64..3_000) {
        let (from, to) = (Gcra::from(from), Gcra::from(to));
        let state = history(&from, &requests);
        let at = (requests.iter().map(|r| r.1).sum::<u64>() + later) * MS;
        let carried = from.carry_over(state, Nanos::from_nanos(at), &to);
        let left = remaining(&from, state, at / MS).min(to.capacity());
        let interval = to.emission_interval().as_nanos() as u64;
        for k in 0..=to.capacity() {
            let then = Nanos::from_nanos(at + k * interval);
            prop_assert_eq!(to.decide(carried, then, 0).0.remaining(), (left + k).min(to.capacity()));
        }
    }

    /// A schedule running ahead of its tolerance (reservations waiting their turn) keeps its
    /// backlog, rescaled to the new interval and rounded up: the next request waits for it.
    #[test]
    fn gcra_backlog_is_rescaled(from in quota(), to in quota(), waits in prop::collection::vec(1u64..20, 1..20)) {
        let (from, to) = (Gcra::from(from), Gcra::from(to));
        let mut state = 0;
        for cost in waits {
            if let Transition::Allow { state: next } = from.reserve(state, Nanos::ZERO, cost.min(from.capacity()), Gcra::MAX_WAIT) {
                state = next;
            }
        }
        let (t_from, t_to) = (from.emission_interval().as_nanos(), to.emission_interval().as_nanos());
        let (tau_from, tau_to) = (from.tolerance().as_nanos(), to.tolerance().as_nanos());
        let carried = from.carry_over(state, Nanos::ZERO, &to);
        let backlog = u128::from(state).saturating_sub(tau_from);
        let expected = if backlog == 0 {
            // Within the tolerance: the room carries over instead.
            return Ok(());
        } else {
            tau_to + (backlog * t_to).div_ceil(t_from)
        };
        prop_assert_eq!(u128::from(carried), expected);
        // The next request waits out the backlog and its own interval.
        let retry = to.decide(carried, Nanos::ZERO, 1).0.retry_after().as_nanos();
        prop_assert_eq!(retry, expected - tau_to + t_to);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Check(u64),
    Reserve(u64, u64),
    Cancel(usize),
    Reset,
    Reconfigure(Quota),
    Clock(u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            4 => (0u64..12).prop_map(Op::Check),
            2 => (0u64..12, 0u64..2_000).prop_map(|(c, w)| Op::Reserve(c, w)),
            1 => (0usize..16).prop_map(Op::Cancel),
            1 => Just(Op::Reset),
            2 => quota().prop_map(Op::Reconfigure),
            2 => (0u64..500).prop_map(Op::Clock),
        ],
        1..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A direct limiter reconfigured among its decisions decides as a plain word would, with
    /// the state converted by `carry_over` at each change: whatever generation it is in, the
    /// first (64-bit word) or a later one (128-bit, the quota in a slot by parity). A
    /// reservation's cancel gives back only in the generation it was made in.
    #[test]
    fn a_reconfigured_limiter_decides_as_a_plain_word(first in quota(), ops in ops()) {
        let clock = ManualClock::new();
        let limiter = RateLimiter::with_clock(Gcra::from(first), &clock);
        let (mut gcra, mut word) = (Gcra::from(first), 0u64);
        // Live reservations: the limiter's, and the model's words (generation, before, after).
        let mut reservations = Vec::new();
        let mut generation = 0;
        for op in ops {
            let now = clock.now();
            match op {
                Op::Check(cost) => {
                    let got = limiter.check_n(cost);
                    if cost > gcra.capacity() {
                        prop_assert!(matches!(got, Err(CheckError::InsufficientCapacity(_))));
                        continue;
                    }
                    match gcra.transition(word, now, cost) {
                        Transition::Allow { state } => {
                            prop_assert!(got.is_ok());
                            word = state;
                        }
                        Transition::Deny { retry_after } => {
                            let Err(CheckError::Denied(denied)) = got else {
                                return Err(TestCaseError::fail(format!("{got:?}, expected a denial")));
                            };
                            prop_assert_eq!(denied.retry_after(), Duration::from_nanos(retry_after.as_nanos()));
                        }
                    }
                }
                Op::Reserve(cost, ms) => {
                    let max_wait = Duration::from_millis(ms);
                    let got = limiter.reserve(cost, max_wait);
                    if cost > gcra.capacity() {
                        prop_assert!(got.is_err());
                        continue;
                    }
                    match gcra.reserve(word, now, cost, Nanos::from_duration(max_wait)) {
                        Transition::Allow { state } => {
                            let reservation = got.unwrap();
                            let ready_at = if state == word { now } else { gcra.ready_at(state, now) };
                            prop_assert_eq!(reservation.ready_at(), ready_at);
                            reservations.push((reservation, generation, word, state));
                            word = state;
                        }
                        Transition::Deny { .. } => prop_assert!(got.is_err()),
                    }
                }
                Op::Cancel(i) => {
                    if reservations.is_empty() {
                        continue;
                    }
                    let (reservation, made_in, before, after) = reservations.remove(i % reservations.len());
                    let expected = made_in == generation && before != after && word == after;
                    prop_assert_eq!(reservation.cancel(), expected);
                    if expected {
                        word = before;
                    }
                }
                Op::Reset => {
                    limiter.reset();
                    word = 0;
                }
                Op::Reconfigure(quota) => {
                    limiter.set_quota(quota).unwrap();
                    let to = Gcra::from(quota);
                    if to != gcra {
                        word = gcra.carry_over(word, now, &to);
                        gcra = to;
                        generation += 1;
                    }
                    prop_assert_eq!(limiter.algorithm(), gcra);
                }
                Op::Clock(ms) => clock.advance(Duration::from_millis(ms)),
            }
            let (peek, now) = (limiter.peek(), clock.now());
            let (request, state) = (gcra.decide(word, now, 1).0, gcra.decide(word, now, 0).0);
            prop_assert_eq!(peek.remaining(), state.remaining());
            prop_assert_eq!(peek.is_allowed(), request.is_allowed());
            prop_assert_eq!(peek.retry_after(), request.retry_after());
        }
    }
}

/// Threads check one at a time from a limiter at frozen time while another thread switches its
/// quota back and forth between two of the same burst: each conversion keeps every token, so
/// exactly the burst is admitted, whichever quota each check met.
fn flips_keep_every_token<A: Algorithm + 'static>(a: A, b: A, burst: u64) {
    const THREADS: usize = 4;
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(a, &clock);
    let start = Barrier::new(THREADS + 1);
    let admitted: u64 = std::thread::scope(|s| {
        let checkers: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    (0..burst).filter(|_| limiter.check().is_ok()).count() as u64
                })
            })
            .collect();
        s.spawn(|| {
            start.wait();
            for i in 0..200 {
                limiter.reconfigure(if i % 2 == 0 { b } else { a });
            }
        });
        checkers.into_iter().map(|c| c.join().unwrap()).sum()
    });
    assert_eq!(admitted, burst);
    assert_eq!(limiter.peek().remaining(), 0);
    assert_eq!(
        limiter.algorithm().to_string_for_test(),
        a.to_string_for_test()
    );
}

trait Named {
    fn to_string_for_test(&self) -> String;
}

impl<A: Algorithm> Named for A {
    fn to_string_for_test(&self) -> String {
        format!("{self:?}")
    }
}

#[test]
fn gcra_flips_under_threads_keep_every_token() {
    let burst = 2_000;
    let per = |period| Gcra::from(Quota::new(burst, period).unwrap());
    flips_keep_every_token(
        per(Duration::from_secs(1)),
        per(Duration::from_secs(3_600)),
        burst,
    );
}

#[test]
fn window_flips_under_threads_keep_every_token() {
    let limit = 2_000;
    let per = |period| SlidingWindow::new(&Quota::new(limit, period).unwrap()).unwrap();
    flips_keep_every_token(
        per(Duration::from_secs(1)),
        per(Duration::from_secs(60)),
        limit,
    );
}

#[test]
fn tightening_takes_effect_at_once_and_loosening_grants_no_burst() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(100).unwrap()), &clock);
    limiter.check_n(40).unwrap();
    limiter.set_quota(Quota::per_second(10).unwrap()).unwrap();
    // 60 left, capped at the new burst.
    assert_eq!(limiter.peek().remaining(), 10);
    assert!(limiter.check_n(10).is_ok());
    assert!(limiter.check().is_err());
    // Back to 100 per second: nothing left is nothing left; the new rate refills it.
    limiter.set_quota(Quota::per_second(100).unwrap()).unwrap();
    assert_eq!(limiter.peek().remaining(), 0);
    clock.advance(Duration::from_millis(10));
    assert_eq!(limiter.peek().remaining(), 1);
    clock.advance(Duration::from_millis(990));
    assert_eq!(limiter.peek().remaining(), 100);
}

#[test]
fn a_fraction_of_a_token_carries_over() {
    // Half a token refilled at 1 per second (500 ms) is half a token at 1 per minute (30 s).
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(1).unwrap()), &clock);
    limiter.check().unwrap();
    clock.advance(Duration::from_millis(500));
    limiter.set_quota(Quota::per_minute(1).unwrap()).unwrap();
    assert_eq!(limiter.peek().retry_after(), Duration::from_secs(30));
}

#[test]
fn waiting_reservations_keep_their_turns_and_the_backlog_moves_to_the_new_rate() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    let forever = Duration::from_secs(3_600);
    let first = limiter.reserve(10, forever).unwrap();
    let second = limiter.reserve(10, forever).unwrap();
    assert_eq!(second.delay(), Duration::from_secs(1));
    // Twice as slow: the backlog of 10 behind the burst takes 2 s instead of 1, and the third
    // reservation's own turn 200 ms.
    limiter
        .set_quota(Quota::per_second(5).unwrap().with_burst(10).unwrap())
        .unwrap();
    let third = limiter.reserve(1, forever).unwrap();
    assert_eq!(third.delay(), Duration::from_millis(2_200));
    // The reservations made before keep their times, and cancel nothing.
    assert_eq!(first.delay(), Duration::ZERO);
    assert_eq!(second.delay(), Duration::from_secs(1));
    assert!(!second.cancel());
    assert!(third.cancel());
    let _ = first;
}

#[test]
fn windows_carry_what_is_left_into_the_new_window() {
    let clock = ManualClock::new();
    let window = SlidingWindow::new(&Quota::per_second(10).unwrap()).unwrap();
    let limiter = RateLimiter::with_clock(window, &clock);
    limiter.check_n(7).unwrap();
    limiter.set_quota(Quota::per_minute(20).unwrap()).unwrap();
    // 3 left, capped at nothing: 17 of the new 20 count as used in the minute that holds now.
    assert_eq!(limiter.peek().remaining(), 3);
    clock.advance(Duration::from_secs(59));
    assert_eq!(limiter.peek().remaining(), 3);
    // The next minute weighs the last one's 17 by its overlap, rounded up: all 17 a second in,
    // 9 half a minute in.
    clock.advance(Duration::from_secs(2));
    assert_eq!(limiter.peek().remaining(), 3);
    clock.advance(Duration::from_secs(29));
    assert_eq!(limiter.peek().remaining(), 11);
}

#[test]
fn a_quota_the_algorithm_cannot_take_is_refused_and_changes_nothing() {
    let window = SlidingWindow::new(&Quota::per_second(10).unwrap()).unwrap();
    let limiter = RateLimiter::with_clock(window, ManualClock::new());
    limiter.check_n(4).unwrap();
    let too_many = Quota::per_second(32_768).unwrap();
    assert!(matches!(
        limiter.set_quota(too_many),
        Err(BuildError::Quota(QuotaError::WindowLimitTooLarge { .. }))
    ));
    assert_eq!(limiter.algorithm(), window);
    assert_eq!(limiter.peek().remaining(), 6);
}

#[test]
fn setting_the_quota_in_force_changes_nothing() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(3).unwrap();
    let limiter = RateLimiter::with_clock(Gcra::from(quota), &clock);
    let reservation = limiter.reserve(1, Duration::ZERO).unwrap();
    limiter.set_quota(quota).unwrap();
    // Still the same generation: the reservation can be cancelled.
    assert!(reservation.cancel());
    assert_eq!(limiter.peek().remaining(), 3);
}

#[test]
fn a_cancel_gives_nothing_back_once_the_quota_has_changed() {
    // There and back at frozen time: every token kept each way, so the state is the very word
    // the reservation left. A cancel still gives nothing back: its hold belongs to a generation
    // whose state was converted (twice) with everything else.
    let clock = ManualClock::new();
    let [a, b] = [Quota::per_second(4).unwrap(), Quota::per_minute(4).unwrap()];
    let limiter = RateLimiter::with_clock(Gcra::from(a), &clock);
    let made_first = limiter.reserve(1, Duration::ZERO).unwrap();
    limiter.set_quota(b).unwrap();
    let made_second = limiter.reserve(1, Duration::ZERO).unwrap();
    limiter.set_quota(a).unwrap();
    limiter.set_quota(b).unwrap();
    assert!(!made_second.cancel());
    limiter.set_quota(a).unwrap();
    assert!(!made_first.cancel());
    assert_eq!(limiter.peek().remaining(), 2);
}

// Keyed limiters: every key converted as a direct limiter's state is, but for an idle key, which
// is a new key under the new quota.

#[derive(Clone, Debug)]
enum KeyOp {
    Check(u8, u64),
    Reserve(u8, u64, u64),
    Cancel(usize),
    Reset(u8),
    ResetAll,
    Reconfigure(Quota),
    Clock(u64),
}

const KEYS: u8 = 6;

fn key_ops() -> impl Strategy<Value = Vec<KeyOp>> {
    prop::collection::vec(
        prop_oneof![
            6 => (0..KEYS, 0u64..12).prop_map(|(k, c)| KeyOp::Check(k, c)),
            2 => (0..KEYS, 0u64..12, 0u64..2_000).prop_map(|(k, c, w)| KeyOp::Reserve(k, c, w)),
            1 => (0usize..16).prop_map(KeyOp::Cancel),
            1 => (0..KEYS).prop_map(KeyOp::Reset),
            1 => Just(KeyOp::ResetAll),
            2 => quota().prop_map(KeyOp::Reconfigure),
            2 => (0u64..500).prop_map(KeyOp::Clock),
        ],
        1..150,
    )
}

/// A key's state carried into `to` at `now`, as a keyed limiter's change of quota documents it.
fn keyed_carry_over<A: Algorithm>(from: &A, state: u64, now: Nanos, to: &A) -> u64 {
    if from.is_idle(state, now) {
        0
    } else {
        from.carry_over(state, now, to)
    }
}

/// The limiter's peek of every key against the model's words.
fn peeks_match<A: Algorithm, C: Clock>(
    limiter: &KeyedRateLimiter<u8, A, C>,
    algorithm: &A,
    words: &HashMap<u8, u64>,
    now: Nanos,
) -> Result<(), TestCaseError> {
    for key in 0..KEYS {
        let word = words.get(&key).copied().unwrap_or(0);
        let peek = limiter.peek_key(&key);
        let (request, state) = (
            algorithm.decide(word, now, 1).0,
            algorithm.decide(word, now, 0).0,
        );
        prop_assert_eq!(peek.remaining(), state.remaining(), "key {}", key);
        prop_assert_eq!(peek.is_allowed(), request.is_allowed(), "key {}", key);
        prop_assert_eq!(peek.retry_after(), request.retry_after(), "key {}", key);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A keyed limiter whose quota changes among its keys' decisions decides as one plain word
    /// per key would, each converted at every change (an idle one to fresh, any other by
    /// `carry_over`); a reservation's cancel gives back only in the generation it was made in,
    /// however many changes later it comes (more than the four that the slots' generation bits
    /// count).
    #[test]
    fn a_reconfigured_keyed_limiter_decides_as_a_word_per_key(first in quota(), ops in key_ops()) {
        let clock = ManualClock::new();
        let limiter = KeyedRateLimiter::<u8>::builder(Gcra::from(first))
            .capacity(64)
            .clock(&clock)
            .build()
            .unwrap();
        let mut gcra = Gcra::from(first);
        let mut words: HashMap<u8, u64> = HashMap::new();
        let mut reservations = Vec::new();
        let mut generation = 0;
        for op in ops {
            let now = clock.now();
            match op {
                KeyOp::Check(key, cost) => {
                    let got = limiter.decide_key(&key, cost);
                    if cost > gcra.capacity() {
                        prop_assert!(got.is_err());
                        continue;
                    }
                    let word = words.entry(key).or_insert(0);
                    let (expected, next) = gcra.decide(*word, now, cost);
                    prop_assert_eq!(got.unwrap(), expected);
                    *word = next;
                }
                KeyOp::Reserve(key, cost, ms) => {
                    let max_wait = Duration::from_millis(ms);
                    let got = limiter.reserve_key(&key, cost, max_wait);
                    if cost > gcra.capacity() {
                        prop_assert!(got.is_err());
                        continue;
                    }
                    let word = words.entry(key).or_insert(0);
                    match gcra.reserve(*word, now, cost, Nanos::from_duration(max_wait)) {
                        Transition::Allow { state } => {
                            let reservation = got.unwrap();
                            let ready_at = if state == *word { now } else { gcra.ready_at(state, now) };
                            prop_assert_eq!(reservation.ready_at(), ready_at);
                            reservations.push((reservation, key, generation, *word, state));
                            *word = state;
                        }
                        Transition::Deny { .. } => prop_assert!(got.is_err()),
                    }
                }
                KeyOp::Cancel(i) => {
                    if reservations.is_empty() {
                        continue;
                    }
                    let (reservation, key, made_in, before, after) =
                        reservations.remove(i % reservations.len());
                    let word = words.entry(key).or_insert(0);
                    let expected = made_in == generation && before != after && *word == after;
                    prop_assert_eq!(reservation.cancel(), expected);
                    if expected {
                        *word = before;
                    }
                }
                KeyOp::Reset(key) => {
                    limiter.reset_key(&key);
                    words.insert(key, 0);
                }
                KeyOp::ResetAll => {
                    limiter.reset();
                    words.clear();
                }
                KeyOp::Reconfigure(quota) => {
                    limiter.set_quota(quota).unwrap();
                    let to = Gcra::from(quota);
                    if to != gcra {
                        for word in words.values_mut() {
                            *word = keyed_carry_over(&gcra, *word, now, &to);
                        }
                        gcra = to;
                        generation += 1;
                    }
                    prop_assert_eq!(limiter.algorithm(), gcra);
                }
                KeyOp::Clock(ms) => clock.advance(Duration::from_millis(ms)),
            }
            peeks_match(&limiter, &gcra, &words, clock.now())?;
        }
    }

    /// The same for sliding-window counters (no reservations): what a key has left carries
    /// over into the window that holds the change, under the new period.
    #[test]
    fn a_reconfigured_keyed_window_decides_as_a_word_per_key(first in quota(), ops in key_ops()) {
        let window = |q: Quota| SlidingWindow::new(&q).unwrap();
        let clock = ManualClock::new();
        let limiter = KeyedRateLimiter::<u8>::builder(window(first))
            .capacity(64)
            .clock(&clock)
            .build()
            .unwrap();
        let mut algorithm = window(first);
        let mut words: HashMap<u8, u64> = HashMap::new();
        for op in ops {
            let now = clock.now();
            match op {
                KeyOp::Check(key, cost) | KeyOp::Reserve(key, cost, _) => {
                    let got = limiter.decide_key(&key, cost);
                    if cost > algorithm.capacity() {
                        prop_assert!(got.is_err());
                        continue;
                    }
                    let word = words.entry(key).or_insert(0);
                    let (expected, next) = algorithm.decide(*word, now, cost);
                    prop_assert_eq!(got.unwrap(), expected);
                    *word = next;
                }
                KeyOp::Reset(key) => {
                    limiter.reset_key(&key);
                    words.insert(key, 0);
                }
                KeyOp::ResetAll | KeyOp::Cancel(_) => {
                    limiter.reset();
                    words.clear();
                }
                KeyOp::Reconfigure(quota) => {
                    limiter.set_quota(quota).unwrap();
                    let to = window(quota);
                    if to != algorithm {
                        for word in words.values_mut() {
                            *word = keyed_carry_over(&algorithm, *word, now, &to);
                        }
                        algorithm = to;
                    }
                }
                KeyOp::Clock(ms) => clock.advance(Duration::from_millis(ms)),
            }
            peeks_match(&limiter, &algorithm, &words, clock.now())?;
        }
    }
}

/// Threads check many keys, most of them new, from a keyed limiter at frozen time while another
/// thread switches its quota back and forth between two of the same burst: each conversion
/// keeps every token of every key, and each insert lands in the generation it was decided in,
/// so exactly the burst is admitted for every key, whichever quota each check met.
fn keyed_flips_keep_every_token<A: Algorithm + PartialEq + 'static>(a: A, b: A, burst: u64) {
    const THREADS: usize = 4;
    const KEYS: u64 = 64;
    let clock = ManualClock::new();
    let limiter: KeyedRateLimiter<u64, A, _> = KeyedRateLimiter::builder(a)
        .capacity(1_000)
        .clock(&clock)
        .build()
        .unwrap();
    let start = Barrier::new(THREADS + 1);
    let admitted: Vec<u64> = std::thread::scope(|s| {
        let checkers: Vec<_> = (0..THREADS as u64)
            .map(|t| {
                let (limiter, start) = (&limiter, &start);
                s.spawn(move || {
                    start.wait();
                    let mut admitted = vec![0u64; KEYS as usize];
                    // Each thread walks the keys in its own order, a burst's worth of rounds.
                    for _ in 0..burst {
                        for k in 0..KEYS {
                            let key = (k * (2 * t + 1)) % KEYS;
                            admitted[key as usize] += u64::from(limiter.check_key(&key).is_ok());
                        }
                    }
                    admitted
                })
            })
            .collect();
        s.spawn(|| {
            start.wait();
            for i in 0..400 {
                limiter.reconfigure(if i % 2 == 0 { b } else { a });
            }
        });
        let per_thread: Vec<Vec<u64>> = checkers.into_iter().map(|c| c.join().unwrap()).collect();
        (0..KEYS as usize)
            .map(|k| per_thread.iter().map(|p| p[k]).sum())
            .collect()
    });
    assert_eq!(admitted, vec![burst; KEYS as usize]);
    for key in 0..KEYS {
        assert_eq!(limiter.peek_key(&key).remaining(), 0);
    }
    assert!(limiter.algorithm() == a);
    assert_eq!(limiter.stats().occupied, KEYS as usize);
}

#[test]
fn keyed_gcra_flips_under_threads_keep_every_token() {
    let burst = 200;
    let per = |period| Gcra::from(Quota::new(burst, period).unwrap());
    keyed_flips_keep_every_token(
        per(Duration::from_secs(1)),
        per(Duration::from_secs(3_600)),
        burst,
    );
}

#[test]
fn keyed_window_flips_under_threads_keep_every_token() {
    let limit = 200;
    let per = |period| SlidingWindow::new(&Quota::new(limit, period).unwrap()).unwrap();
    keyed_flips_keep_every_token(
        per(Duration::from_secs(1)),
        per(Duration::from_secs(60)),
        limit,
    );
}

#[test]
fn a_keyed_change_converts_live_keys_and_leaves_idle_ones_fresh() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(10).unwrap()))
        .clock(&clock)
        .build()
        .unwrap();
    limiter.check_key_n("busy", 8).unwrap(); // 2 left
    limiter.check_key_n("idle", 10).unwrap();
    clock.advance(Duration::from_secs(1)); // "idle" is back to fresh, "busy" too...
    limiter.check_key_n("busy", 9).unwrap(); // ...and now has 1 left
    assert_eq!(limiter.stats().occupied, 2);
    limiter.set_quota(Quota::per_second(100).unwrap()).unwrap();
    // Loosening: the live key keeps what it had left; the idle one is a new key, with the new
    // burst, like a key the table has never seen.
    assert_eq!(limiter.peek_key("busy").remaining(), 1);
    assert_eq!(limiter.peek_key("idle").remaining(), 100);
    assert_eq!(limiter.peek_key("new").remaining(), 100);
    // Both keep their slots.
    assert_eq!(limiter.stats().occupied, 2);
    // The live key refills at the new rate: one more every 10 ms.
    clock.advance(Duration::from_millis(50));
    assert_eq!(limiter.peek_key("busy").remaining(), 6);
}

#[test]
fn a_tiers_entries_keep_their_schedules_through_a_change() {
    let clock = ManualClock::new();
    let premium = Quota::per_second(100).unwrap();
    let limiter = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(10).unwrap()))
        .tier(premium)
        .clock(&clock)
        .build()
        .unwrap();
    limiter.check_key_with("paying", &premium, 60).unwrap();
    limiter.check_key_n("free", 6).unwrap();
    limiter.set_quota(Quota::per_second(5).unwrap()).unwrap();
    assert_eq!(
        limiter
            .peek_key_with("paying", &premium, 1)
            .unwrap()
            .remaining(),
        40
    );
    assert_eq!(limiter.peek_key("free").remaining(), 4);
    assert!(limiter.check_key_with("paying", &premium, 40).is_ok());
    assert!(limiter.check_key_with("paying", &premium, 1).is_err());
}

#[test]
fn a_keyed_snapshot_is_taken_under_the_current_quota() {
    let seeded = || ahash::RandomState::with_seeds(5, 6, 7, 8);
    let [before, after] = [Quota::per_hour(10).unwrap(), Quota::per_hour(4).unwrap()];
    let builder = |quota: Quota| {
        KeyedRateLimiter::<str>::builder(Gcra::from(quota))
            .capacity(100)
            .threads(1)
            .hasher(seeded())
    };
    let limiter = builder(before).build().unwrap();
    limiter.check_key_n("alice", 7).unwrap();
    limiter.set_quota(after).unwrap();
    let saved = limiter.snapshot();
    assert_eq!(
        builder(before).restore(&saved).unwrap_err(),
        tollgate::SnapshotError::Mismatch { what: "quota" }
    );
    let restored = builder(after).restore(&saved).unwrap();
    assert_eq!(restored.peek_key("alice").remaining(), 3);
}

#[test]
fn a_keyed_cancel_gives_nothing_back_once_the_quota_has_changed() {
    // There and back at frozen time, four times: every token kept each way, so the key's
    // state is the very word the reservation left, and its slot's two generation bits are
    // those it had. A cancel still gives nothing back.
    let clock = ManualClock::new();
    let [a, b] = [Quota::per_second(4).unwrap(), Quota::per_minute(4).unwrap()];
    let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(a))
        .clock(&clock)
        .build()
        .unwrap();
    let reservation = limiter.reserve_key(&1, 1, Duration::ZERO).unwrap();
    for quota in [b, a, b, a] {
        limiter.set_quota(quota).unwrap();
    }
    assert!(!reservation.cancel());
    assert_eq!(limiter.peek_key(&1).remaining(), 3);
    // One made in the current generation gives back.
    let reservation = limiter.reserve_key(&1, 1, Duration::ZERO).unwrap();
    assert!(reservation.cancel());
    assert_eq!(limiter.peek_key(&1).remaining(), 3);
}

#[test]
fn layered_checks_decide_each_key_under_its_limiters_current_quota() {
    use tollgate::layers::Layers;
    let clock = ManualClock::new();
    let per_user = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(10).unwrap()))
        .clock(&clock)
        .build()
        .unwrap();
    let global = RateLimiter::with_clock(Gcra::from(Quota::per_second(100).unwrap()), &clock);
    (per_user.layer("alice"), &global).check_all(5).unwrap();
    per_user.set_quota(Quota::per_second(6).unwrap()).unwrap();
    let refused = (per_user.layer("alice"), &global).check_all(6).unwrap_err();
    assert_eq!(refused.layer(), 0);
    let decision = (per_user.layer("alice"), &global).decide_all(5).unwrap();
    assert!(decision.is_allowed());
    assert_eq!(per_user.peek_key("alice").remaining(), 0);
    assert_eq!(global.peek().remaining(), 90);
}
