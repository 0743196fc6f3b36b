//! Live reconfiguration against its definition.
//!
//! First the conversion itself, [`Algorithm::carry_over`], for every algorithm and random
//! quotas, states and times: the room carries over capped at the new capacity, GCRA's room
//! refills at the new rate from there, and a schedule running ahead (reservations waiting)
//! keeps its backlog, rescaled. Then a direct limiter reconfigured many times among random
//! decisions, reservations, cancels and resets, against a plain word on one thread: the same
//! decisions, whatever generation the limiter is in. Then threads deciding while another
//! reconfigures, at frozen time: exact counts. Then the documented cases, one by one.

use std::sync::Barrier;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, BuildError, CheckError, Clock, FixedWindow, Gcra, ManualClock, Nanos, Quota,
    QuotaError, RateLimiter, SlidingWindow, Transition,
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
