//! GCRA, the generic cell rate algorithm: a token bucket kept as one timestamp.
//!
//! # The word
//!
//! ```text
//!  63                                                              0
//! ┌─────────────────────────────────────────────────────────────────┐
//! │  TAT: theoretical arrival time, in ns since the clock's epoch   │
//! └─────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The TAT is the time at which the schedule of admitted requests is fully paid off: the moment the
//! equivalent token bucket is full again. A TAT at or before `now` is a fresh state; the all-zero
//! word (TAT = epoch) is fresh at every time. A stored TAT never exceeds
//! `Nanos::MAX + Quota::MAX_TOLERANCE < u64::MAX`, so the word `u64::MAX` never occurs.
//!
//! # The transition
//!
//! With emission interval `T` and tolerance `τ = burst × T` (see [`Quota`]), a request of cost `c`
//! at time `now` is admitted iff
//!
//! ```text
//! new_tat = max(TAT, now) + c·T  ≤  now + τ
//! ```
//!
//! and then `new_tat` is stored. A fresh limiter therefore admits `burst` at once and one request
//! per `T` after that. Seen from the other side, `(now + τ − max(TAT, now)) / T` is the number of
//! tokens in a bucket of capacity `burst` refilled continuously at one token per `T`: the token
//! bucket and the leaky bucket as a meter are this same algorithm.
//!
//! The reported numbers follow the GCRA formulas (`remaining = ⌊(now + τ − new_tat) / T⌋`,
//! `reset_after = new_tat − now`, `retry_after = new_tat − τ − now`), all in whole nanoseconds and
//! therefore exact: a client that waits `retry_after` is admitted.
//!
//! # Time that goes backwards
//!
//! A `now` before the TAT's last writer's `now` needs no special case: `max(TAT, now)` keeps the
//! schedule, and the bound `now + τ` is only tighter for an earlier `now`. An early request is
//! decided as the bucket stood at its own time stamp; it can never be admitted where a later one
//! would not be.

use core::time::Duration;

use super::{Algorithm, Transition};
use crate::clock::Nanos;
use crate::decision::Decision;
use crate::quota::Quota;

/// GCRA (equivalently: a token bucket with lazy continuous refill, or a leaky bucket as a meter).
///
/// The default algorithm: exact, smooth, and the cheapest to decide (an addition and a comparison;
/// no division on the check path). See the [module docs](self) for the formulas.
///
/// ```
/// use tollgate::{Algorithm, Gcra, Nanos, Quota};
///
/// // 5 per second, bursts of 10: a fresh state admits 10 at once.
/// let gcra = Gcra::from(Quota::per_second(5).unwrap().with_burst(10).unwrap());
/// let (decision, tat) = gcra.decide(0, Nanos::ZERO, 10);
/// assert!(decision.is_allowed());
/// assert_eq!(tat, 2_000_000_000); // the schedule runs 10 × 200 ms ahead
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gcra {
    emission_interval: u64,
    tolerance: u64,
    burst: u64,
}

impl Gcra {
    /// GCRA for `quota`. Every valid quota fits, so this cannot fail.
    ///
    /// ```
    /// use tollgate::{Algorithm, Gcra, Quota};
    /// const GCRA: Gcra = Gcra::new(&match Quota::per_second(10) { Ok(q) => q, Err(_) => panic!() });
    /// assert_eq!(GCRA.capacity(), 10);
    /// ```
    #[must_use]
    pub const fn new(quota: &Quota) -> Gcra {
        Gcra {
            emission_interval: quota.emission_interval_nanos(),
            tolerance: quota.tolerance_nanos(),
            burst: quota.burst(),
        }
    }

    /// GCRA with an emission interval and a tolerance in some other unit of time than the
    /// nanosecond (the Redis backend's microseconds): the transition is the same arithmetic in
    /// any unit. `interval` is at least 1 and `tolerance` a multiple of it, `burst` times.
    #[cfg(feature = "redis")]
    pub(crate) const fn in_units(interval: u64, burst: u64) -> Gcra {
        Gcra {
            emission_interval: interval,
            tolerance: interval * burst,
            burst,
        }
    }

    /// The parameters a snapshot records: a restore requires the same.
    /// GCRA with these parameters, as [`to_words`](super::sealed::Sealed::to_words) gave them.
    pub(crate) const fn from_parts(emission_interval: u64, tolerance: u64, burst: u64) -> Gcra {
        Gcra {
            emission_interval,
            tolerance,
            burst,
        }
    }

    pub(crate) const fn snapshot_params(&self) -> [u64; 3] {
        [self.emission_interval, self.tolerance, self.burst]
    }

    /// The spacing of requests at the sustained rate.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, Quota};
    /// let gcra = Gcra::from(Quota::per_second(4).unwrap());
    /// assert_eq!(gcra.emission_interval(), Duration::from_millis(250));
    /// ```
    #[must_use]
    pub const fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.emission_interval)
    }

    /// How far ahead of real time the schedule may run: `burst × emission_interval`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, Quota};
    /// let gcra = Gcra::from(Quota::per_second(4).unwrap().with_burst(2).unwrap());
    /// assert_eq!(gcra.tolerance(), Duration::from_millis(500));
    /// ```
    #[must_use]
    pub const fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.tolerance)
    }

    /// The time a schedule may run ahead of the clock and still admit a request of cost 1:
    /// `tolerance − emission_interval` (0 for a burst of 1). A TAT further ahead than that is
    /// being limited: `available` is then 0.
    #[inline]
    pub(crate) const fn room(&self) -> u64 {
        // tolerance = burst × interval with burst >= 1.
        self.tolerance - self.emission_interval
    }

    /// The longest wait a reservation can take: a reserved TAT runs at most
    /// `τ + MAX_WAIT` ahead of a `now` of at most [`Nanos::MAX`], which keeps it below
    /// `u64::MAX` (`2^63 − 1 + 2^62 + 2^62 − 1`), the word no state may be.
    pub const MAX_WAIT: Nanos = Nanos::from_nanos(Quota::MAX_TOLERANCE.as_nanos() as u64 - 1);

    /// A reservation: admits a request of `cost` at `now` into the schedule even if it must wait
    /// for its turn, as long as the wait is at most `max_wait` (capped at [`Gcra::MAX_WAIT`]).
    ///
    /// `Allow { state }` stores the new TAT, `max(TAT, now) + c·T` as for an admission; the
    /// request may proceed at [`ready_at`](Gcra::ready_at)`(state, now)`, the moment the schedule
    /// is back within the tolerance. Later requests queue behind it: a reservation is never
    /// overtaken. `Deny { retry_after }` stores nothing; the same reservation would be admitted
    /// after `retry_after` (the wait beyond `max_wait`). With a `max_wait` of zero this is
    /// [`transition`](Algorithm::transition) exactly, and a cost above the burst is denied with
    /// [`Nanos::MAX`] as there.
    ///
    /// ```
    /// use tollgate::{Gcra, Nanos, Quota, Transition};
    ///
    /// // 1 per second, bursts of 1: the second request at t = 0 waits a second.
    /// let gcra = Gcra::from(Quota::per_second(1).unwrap());
    /// let second = Nanos::from_nanos(1_000_000_000);
    /// let Transition::Allow { state } = gcra.reserve(0, Nanos::ZERO, 1, Nanos::ZERO) else { panic!() };
    /// assert_eq!(gcra.reserve(state, Nanos::ZERO, 1, Nanos::ZERO), Transition::Deny { retry_after: second });
    /// let Transition::Allow { state } = gcra.reserve(state, Nanos::ZERO, 1, second) else { panic!() };
    /// assert_eq!(gcra.ready_at(state, Nanos::ZERO), second);
    /// ```
    #[inline]
    #[must_use]
    pub fn reserve(&self, state: u64, now: Nanos, cost: u64, max_wait: Nanos) -> Transition {
        if cost == 0 || cost > self.burst {
            return self.transition(state, now, cost);
        }
        // As in `transition`: the latest TAT with room for `cost` now.
        let latest = now.as_nanos() + (self.tolerance - cost * self.emission_interval);
        let Some(wait) = state.checked_sub(latest).filter(|&wait| wait > 0) else {
            return Transition::Allow {
                state: state.max(now.as_nanos()) + cost * self.emission_interval,
            };
        };
        let max_wait = max_wait.as_nanos().min(Self::MAX_WAIT.as_nanos());
        if wait <= max_wait {
            // The TAT is ahead of `now`: `TAT + c·T = now + τ + wait`, below `u64::MAX` by the
            // bound on `MAX_WAIT`, whatever the word.
            Transition::Allow {
                state: now.as_nanos() + self.tolerance + wait,
            }
        } else {
            Transition::Deny {
                retry_after: Nanos::from_nanos(wait - max_wait),
            }
        }
    }

    /// When a request of cost at least 1 that [`reserve`](Gcra::reserve) admitted at `now` may
    /// proceed, from the state it stored: at once if the schedule is within the tolerance, else
    /// when it is back within it. (A cost of 0 always goes at once.)
    ///
    /// ```
    /// use tollgate::{Gcra, Nanos, Quota};
    /// let gcra = Gcra::from(Quota::per_second(2).unwrap()); // τ = 1 s
    /// let now = Nanos::from_nanos(5_000_000_000);
    /// assert_eq!(gcra.ready_at(5_500_000_000, now), now);
    /// assert_eq!(gcra.ready_at(6_250_000_000, now), Nanos::from_nanos(5_250_000_000));
    /// ```
    #[inline]
    #[must_use]
    pub fn ready_at(&self, state: u64, now: Nanos) -> Nanos {
        Nanos::from_nanos(state.saturating_sub(self.tolerance).max(now.as_nanos()))
    }

    /// Gives back a hold of `cost` that moved the TAT from `before` to `after`, from the TAT as
    /// it is now, `state`, at `now` (read when the release starts): exact when nothing was
    /// admitted since, and otherwise never less constraining than the TAT would be without the
    /// hold.
    ///
    /// With admissions of total cost `D` since the hold, each at a time no later than `now`,
    /// each step `max(TAT, t) + d·T` moves a difference in its input by at most as much, so the
    /// TAT without the hold is at least `state − c·T`; it is also at most `max(before, now) + D`,
    /// and `state` at least `after + D`. Giving back `c·T` less the time the clock has run past
    /// the hold's start (`after − c·T`) therefore never gives back too much, and gives back all
    /// of it while the schedule stays ahead of the clock.
    ///
    /// A reservation admitted since with a turn still to come (the TAT more than `τ` ahead of
    /// the clock) was given that turn behind the hold, and keeps it: the hold then stays spent,
    /// since a turn given back before it could be handed out again. A turn that has come is an
    /// admission at that time, which the bound above covers.
    #[inline]
    pub(crate) fn release(
        &self,
        state: u64,
        [before, after]: [u64; 2],
        cost: u64,
        now: Nanos,
    ) -> u64 {
        if state == after {
            return before;
        }
        if state > now.as_nanos() + self.tolerance {
            return state;
        }
        let hold = cost * self.emission_interval;
        let run_into = now.as_nanos().saturating_sub(after.saturating_sub(hold));
        state.saturating_sub(hold.saturating_sub(run_into))
    }

    /// Tokens available at `now` for a schedule that stands at `base = max(TAT, now)`.
    #[inline]
    fn available(&self, base: u64, now: u64) -> u64 {
        // `now + τ` cannot overflow: now <= Nanos::MAX and τ <= Quota::MAX_TOLERANCE.
        (now + self.tolerance).saturating_sub(base) / self.emission_interval
    }
}

/// The times as durations.
///
/// ```
/// use tollgate::{Gcra, Quota};
/// let gcra = Gcra::from(Quota::per_second(4).unwrap().with_burst(2).unwrap());
/// assert_eq!(
///     format!("{gcra:?}"),
///     "Gcra { emission_interval: 250ms, tolerance: 500ms, burst: 2 }"
/// );
/// ```
impl core::fmt::Debug for Gcra {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gcra")
            .field("emission_interval", &self.emission_interval())
            .field("tolerance", &self.tolerance())
            .field("burst", &self.burst)
            .finish()
    }
}

impl From<Quota> for Gcra {
    fn from(quota: Quota) -> Gcra {
        Gcra::new(&quota)
    }
}

impl From<&Quota> for Gcra {
    fn from(quota: &Quota) -> Gcra {
        Gcra::new(quota)
    }
}

impl Algorithm for Gcra {
    #[inline]
    fn capacity(&self) -> u64 {
        self.burst
    }

    #[inline]
    fn transition(&self, state: u64, now: Nanos, cost: u64) -> Transition {
        if cost == 0 {
            return Transition::Allow { state };
        }
        if cost > self.burst {
            return Transition::Deny {
                retry_after: Nanos::MAX,
            };
        }
        let now = now.as_nanos();
        let increment = cost * self.emission_interval;
        // The latest TAT that still has room for `cost`. `max(TAT, now) + c·T ≤ now + τ` holds
        // iff `TAT ≤ now + τ − c·T`, since `now` meets that bound itself (c·T ≤ τ, as
        // cost <= burst): the test reads the stored word alone, one comparison after the clock
        // read, and needs no saturation. `now + τ` cannot overflow: now <= Nanos::MAX and
        // τ <= Quota::MAX_TOLERANCE.
        let latest = now + (self.tolerance - increment);
        if state <= latest {
            // At most `now + τ`: no overflow.
            Transition::Allow {
                state: state.max(now) + increment,
            }
        } else {
            // `new_tat − (now + τ)`, with `new_tat = TAT + c·T` (the TAT is ahead of `now`),
            // computed without forming `new_tat`, which an arbitrary word could overflow.
            Transition::Deny {
                retry_after: Nanos::from_nanos(state - latest),
            }
        }
    }

    #[inline]
    fn decide(&self, state: u64, now: Nanos, cost: u64) -> (Decision, u64) {
        let base = state.max(now.as_nanos());
        let reset_after = Nanos::from_nanos(base - now.as_nanos());
        let available = self.available(base, now.as_nanos());
        match self.transition(state, now, cost) {
            Transition::Allow { state: new_tat } if cost > 0 => {
                let decision = Decision::new(
                    true,
                    available - cost,
                    Nanos::ZERO,
                    Nanos::from_nanos(new_tat - now.as_nanos()),
                    self.burst,
                );
                (decision, new_tat)
            }
            Transition::Allow { .. } => (
                Decision::new(true, available, Nanos::ZERO, reset_after, self.burst),
                state,
            ),
            Transition::Deny { retry_after } => (
                Decision::new(false, available, retry_after, reset_after, self.burst),
                state,
            ),
        }
    }

    #[inline]
    fn is_idle(&self, state: u64, now: Nanos) -> bool {
        // The schedule is paid off: max(TAT, now) = now, as for the fresh word, now and later.
        state <= now.as_nanos()
    }

    fn carry_over(&self, state: u64, now: Nanos, to: &Gcra) -> u64 {
        let now = now.as_nanos();
        // How far the schedule runs ahead of the clock, in the old interval's nanoseconds.
        let debt = state.max(now) - now;
        let (from_interval, to_interval) = (
            u128::from(self.emission_interval),
            u128::from(to.emission_interval),
        );
        let ahead = if let Some(room) = self.tolerance.checked_sub(debt) {
            // Rescaled and rounded down: never more room than the old state had.
            let room =
                (u128::from(room) * to_interval / from_interval).min(u128::from(to.tolerance));
            u128::from(to.tolerance) - room
        } else {
            // Reservations waiting their turn: the backlog, rounded up.
            let backlog = u128::from(debt - self.tolerance) * to_interval;
            u128::from(to.tolerance) + backlog.div_ceil(from_interval)
        };
        // `u64::MAX` is never a state.
        (u128::from(now) + ahead).min(u128::from(u64::MAX - 1)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gcra(limit: u64, period_ms: u64, burst: u64) -> Gcra {
        Gcra::from(
            Quota::new(limit, Duration::from_millis(period_ms))
                .unwrap()
                .with_burst(burst)
                .unwrap(),
        )
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn word_is_the_tat() {
        // The layout is the identity: the stored word is the new TAT in nanoseconds.
        let g = gcra(1, 1000, 1);
        let (_, word) = g.decide(0, Nanos::from_nanos(5 * MS), 1);
        assert_eq!(word, 5 * MS + 1000 * MS);
        // The largest TAT that can ever be stored: now = Nanos::MAX and the whole (largest)
        // tolerance used. It stays below u64::MAX, which is therefore never a state.
        let widest = Gcra::from(
            Quota::new(1, Quota::MAX_PERIOD)
                .unwrap()
                .with_burst(2)
                .unwrap(),
        );
        assert_eq!(widest.tolerance(), Quota::MAX_TOLERANCE);
        let (d, word) = widest.decide(0, Nanos::MAX, 2);
        assert!(d.is_allowed());
        assert_eq!(word, Nanos::MAX.as_nanos() + (1 << 62));
        assert!(word < u64::MAX);
    }

    #[test]
    fn fresh_state_admits_exactly_the_burst() {
        let g = gcra(5, 1000, 10);
        let now = Nanos::from_nanos(7 * MS);
        let mut state = 0;
        for i in 0..10 {
            match g.transition(state, now, 1) {
                Transition::Allow { state: s } => state = s,
                Transition::Deny { .. } => panic!("request {i} of the burst was denied"),
            }
        }
        // The eleventh waits exactly one emission interval (200 ms).
        assert_eq!(
            g.transition(state, now, 1),
            Transition::Deny {
                retry_after: Nanos::from_nanos(200 * MS)
            }
        );
    }

    #[test]
    fn cost_zero_and_cost_above_burst() {
        let g = gcra(5, 1000, 10);
        let state = 123 * MS;
        assert_eq!(
            g.transition(state, Nanos::ZERO, 0),
            Transition::Allow { state }
        );
        assert_eq!(
            g.transition(0, Nanos::ZERO, 11),
            Transition::Deny {
                retry_after: Nanos::MAX
            }
        );
        assert_eq!(
            g.transition(0, Nanos::ZERO, u64::MAX),
            Transition::Deny {
                retry_after: Nanos::MAX
            }
        );
        let (d, s) = g.decide(0, Nanos::ZERO, 11);
        assert!(!d.is_allowed());
        assert_eq!(
            (s, d.remaining(), d.retry_after()),
            (0, 10, Nanos::MAX.as_duration())
        );
    }

    #[test]
    fn backwards_time_is_never_more_permissive() {
        // One request at t = 1 s with 1 per second and burst 1: TAT = 2 s.
        let g = gcra(1, 1000, 1);
        let Transition::Allow { state } = g.transition(0, Nanos::from_nanos(1000 * MS), 1) else {
            panic!()
        };
        // At t = 1.5 s the next waits 500 ms; at t = 0.5 s (clock went back) it waits 1500 ms.
        assert_eq!(
            g.transition(state, Nanos::from_nanos(1500 * MS), 1),
            Transition::Deny {
                retry_after: Nanos::from_nanos(500 * MS)
            }
        );
        assert_eq!(
            g.transition(state, Nanos::from_nanos(500 * MS), 1),
            Transition::Deny {
                retry_after: Nanos::from_nanos(1500 * MS)
            }
        );
        // A peek far in the past reports nothing available and the full wait, without panicking.
        let (d, s) = g.decide(state, Nanos::ZERO, 0);
        assert!(d.is_allowed());
        assert_eq!(
            (s, d.remaining(), d.reset_after()),
            (state, 0, Duration::from_secs(2))
        );
    }

    #[test]
    fn extreme_words_and_times_do_not_overflow() {
        let g = Gcra::from(Quota::new(1, Quota::MAX_PERIOD).unwrap());
        for state in [0, 1, u64::MAX - 1, u64::MAX] {
            for now in [Nanos::ZERO, Nanos::MAX] {
                for cost in [0, 1, 2, u64::MAX] {
                    let t = g.transition(state, now, cost);
                    let (d, s) = g.decide(state, now, cost);
                    assert_eq!(d.is_allowed(), matches!(t, Transition::Allow { .. }));
                    if let Transition::Allow { state: new } = t {
                        assert_eq!(new, s);
                        // A write (cost > 0) never produces the reserved word; a peek hands back
                        // whatever word it was given.
                        assert!(cost == 0 || new < u64::MAX);
                    }
                }
            }
        }
    }

    #[test]
    fn idle_means_paid_off() {
        let g = gcra(1, 1000, 1);
        assert!(g.is_idle(0, Nanos::ZERO));
        assert!(!g.is_idle(10, Nanos::from_nanos(9)));
        assert!(g.is_idle(10, Nanos::from_nanos(10)));
        // An idle state decides like a fresh one.
        let now = Nanos::from_nanos(10);
        assert_eq!(g.decide(10, now, 1).0, g.decide(0, now, 1).0);
    }

    #[test]
    fn a_release_keeps_a_hold_that_a_pending_reservation_queued_behind() {
        // 1 per second, bursts of 1. A hold at t = 0 (TAT 1 s), then a reservation behind it
        // (turn at 1 s, TAT 2 s). Giving the hold back would let a new reservation take the
        // turn at 1 s again: the release keeps it while that turn is to come.
        let g = gcra(1, 1000, 1);
        let now = Nanos::ZERO;
        let Transition::Allow { state: held } = g.transition(0, now, 1) else {
            panic!()
        };
        let Transition::Allow { state: queued } = g.reserve(held, now, 1, Nanos::MAX) else {
            panic!()
        };
        assert_eq!(g.ready_at(queued, now), Nanos::from_nanos(1000 * MS));
        assert_eq!(g.release(queued, [0, held], 1, now), queued);
        // Once that turn has come, the hold's share the clock has not run into is given back.
        let later = Nanos::from_nanos(1000 * MS);
        assert_eq!(g.release(queued, [0, held], 1, later), queued);
        // With only immediate admissions since, all of it while the schedule is ahead.
        let wide = gcra(2, 1000, 2);
        let Transition::Allow { state: held } = wide.transition(0, now, 1) else {
            panic!()
        };
        let Transition::Allow { state: other } = wide.transition(held, now, 1) else {
            panic!()
        };
        assert_eq!(wide.release(other, [0, held], 1, now), 500 * MS);
        assert_eq!(wide.release(held, [0, held], 1, now), 0);
    }

    proptest::proptest! {
        /// The table's judgement of an entry by its own quota's room is exactly "limited under
        /// that quota" as a peek says it: nothing remaining. That is the arithmetic the
        /// judgement rests on: a state can admit a request exactly when its TAT is at most
        /// `tolerance − emission_interval` ahead of now.
        #[test]
        fn limited_by_its_room_is_nothing_remaining(
            quota in (1u64..1_000, 1u64..100_000, 1u64..1_000),
            now in 0u64..1 << 50,
            ahead in proptest::num::u64::ANY,
            edge in -3i64..=3,
        ) {
            use crate::algorithm::sealed::Sealed;
            let g = gcra(quota.0, quota.1, quota.2);
            let at = Nanos::from_nanos(now);
            // Any TAT up to one tolerance ahead, or one within 3 ns of the room.
            let state = if ahead % 3 == 0 {
                (now + g.room()).saturating_add_signed(edge)
            } else {
                now + ahead % (g.tolerance + 1)
            };
            let limited = g.decide(state, at, 0).0.remaining() == 0;
            proptest::prop_assert_eq!(Sealed::is_limited(&g, state, at, Sealed::room(&g)), limited, "TAT {} at {}", state, now);
        }

        /// The transition is the module's formula, `max(TAT, now) + c·T ≤ now + τ`, evaluated here
        /// in 128 bits, where nothing overflows, for every word and time: not only the states a
        /// limiter reaches (the reference tests cover those) but corrupted ones near `u64::MAX`,
        /// and words within 3 ns of the boundary `now + τ − c·T` that the check compares with. A
        /// denial's retry time is the exact excess, capped at `Nanos::MAX` like every duration.
        #[test]
        fn transition_is_the_formula_for_every_word(
            quota in (1u64..1_000, 1u64..100_000, 1u64..1_000),
            widest in proptest::bool::weighted(0.1),
            now in proptest::num::u64::ANY,
            word in proptest::num::u64::ANY,
            pick in 0u8..3,
            edge in -3i64..=3,
            cost in 0u64..1_002,
        ) {
            let g = if widest {
                // The largest tolerance there is, where `now + τ` comes closest to 2^64.
                Gcra::from(Quota::new(1, Quota::MAX_PERIOD).unwrap().with_burst(2).unwrap())
            } else {
                gcra(quota.0, quota.1, quota.2)
            };
            let now = Nanos::from_nanos(now);
            let t = u128::from(now.as_nanos());
            let (interval, tolerance) = (u128::from(g.emission_interval), u128::from(g.tolerance));
            let cost = cost % (g.burst + 2);
            let word = match pick {
                0 => word,
                1 => (t + tolerance).saturating_sub(u128::from(cost) * interval)
                    .min(u128::from(u64::MAX)) as u64,
                _ => now.as_nanos(),
            }
            .saturating_add_signed(if pick == 0 { 0 } else { edge });
            let expected = if cost == 0 {
                Transition::Allow { state: word }
            } else if cost > g.burst {
                Transition::Deny { retry_after: Nanos::MAX }
            } else {
                let new_tat = u128::from(word).max(t) + u128::from(cost) * interval;
                if new_tat <= t + tolerance {
                    Transition::Allow { state: u64::try_from(new_tat).unwrap() }
                } else {
                    let excess = new_tat - (t + tolerance);
                    Transition::Deny { retry_after: Nanos::from_nanos(u64::try_from(excess).unwrap_or(u64::MAX)) }
                }
            };
            proptest::prop_assert_eq!(g.transition(word, now, cost), expected, "word {} at {:?}, cost {}", word, now, cost);
        }

        /// A reservation is the formula with the bound moved by the wait allowed:
        /// `max(TAT, now) + c·T ≤ now + τ + min(max_wait, MAX_WAIT)`, in 128 bits, for every
        /// word and time; the stored word stays below `u64::MAX`, and a denial's retry time is
        /// the excess over the allowed wait.
        #[test]
        fn reserve_is_the_formula_for_every_word(
            quota in (1u64..1_000, 1u64..100_000, 1u64..1_000),
            now in proptest::num::u64::ANY,
            word in proptest::num::u64::ANY,
            cost in 0u64..1_002,
            max_wait in proptest::num::u64::ANY,
            edge in -2i64..=2,
            exact in proptest::bool::ANY,
        ) {
            let g = gcra(quota.0, quota.1, quota.2);
            let now = Nanos::from_nanos(now);
            let t = u128::from(now.as_nanos());
            let cost = cost % (g.burst + 2);
            let end = u128::from(word).max(t) + u128::from(cost) * u128::from(g.emission_interval);
            let need = end.saturating_sub(t + u128::from(g.tolerance));
            // Either any wait, or one within 2 ns of the need.
            let max_wait = if exact {
                Nanos::from_nanos(u64::try_from(need).unwrap_or(u64::MAX).saturating_add_signed(edge))
            } else {
                Nanos::from_nanos(max_wait)
            };
            let allowed = u128::from(max_wait.as_nanos().min(Gcra::MAX_WAIT.as_nanos()));
            let expected = if cost == 0 {
                Transition::Allow { state: word }
            } else if cost > g.burst {
                Transition::Deny { retry_after: Nanos::MAX }
            } else if need <= allowed {
                Transition::Allow { state: u64::try_from(end).unwrap() }
            } else {
                Transition::Deny { retry_after: Nanos::from_nanos(u64::try_from(need - allowed).unwrap_or(u64::MAX)) }
            };
            let got = g.reserve(word, now, cost, max_wait);
            proptest::prop_assert_eq!(got, expected, "word {} at {:?}, cost {}, max_wait {:?}", word, now, cost, max_wait);
            if let Transition::Allow { state } = got {
                proptest::prop_assert!(cost == 0 || state < u64::MAX);
            }
        }
    }
}
