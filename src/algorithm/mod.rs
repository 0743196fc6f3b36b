//! The algorithms: pure transitions over one packed `u64`.
//!
//! An algorithm is a function of `(state, now, cost)` that says whether the request is admitted
//! and, if so, which word to store. It touches no atomics, reads no clock and allocates nothing, so
//! it can be tested exhaustively, fuzzed and compared with obviously-correct models (the
//! `reference` module, behind the `reference` feature); the stores apply it with one
//! compare-and-swap loop. The same function is the specification that any other backend must
//! match bit for bit.
//!
//! Every algorithm shares three conventions:
//!
//! - **The all-zero word is the fresh state** (nothing admitted yet), so a zeroed table is a table
//!   of fresh limiters.
//! - **`u64::MAX` is never a state**: stores may use it as a marker.
//! - **A denial stores nothing**, and neither does a cost of 0.
//!
//! | algorithm | state | admits | choose it for |
//! |---|---|---|---|
//! | [`Gcra`] | theoretical arrival time | a burst of `burst`, then one per emission interval | almost everything: exact, smooth, cheapest (no division on the check path). It *is* the token bucket and the leaky bucket as a meter. |
//! | [`SlidingWindow`] | window index, previous and current count | `limit` per window, the previous window weighted by its overlap | "N per minute" semantics that clients can reason about, without the fixed window's boundary burst |
//! | [`FixedWindow`] | window index, count | `limit` per calendar-aligned window | comparison and compatibility only: it admits up to twice the limit across a boundary |
//!
//! For an exact sliding log (low-frequency limits such as "5 per day"), which does not fit in a
//! word, see [`KeyedSlidingLog`](crate::KeyedSlidingLog).
//!
//! Any store can hold the words. Here a plain map, on one thread, decides as a
//! [`KeyedRateLimiter`](crate::KeyedRateLimiter) would:
//!
//! ```
//! use std::collections::HashMap;
//! use tollgate::{Algorithm, Gcra, Nanos, Quota, Transition};
//!
//! let gcra = Gcra::from(Quota::per_second(1).unwrap());
//! let mut words: HashMap<&str, u64> = HashMap::new();
//! let mut check = |key, now| {
//!     let word = words.entry(key).or_insert(0); // the all-zero word is fresh
//!     match gcra.transition(*word, now, 1) {
//!         Transition::Allow { state } => *word = state,
//!         Transition::Deny { retry_after } => return Err(retry_after),
//!     }
//!     Ok(())
//! };
//! assert_eq!(check("a", Nanos::ZERO), Ok(()));
//! assert_eq!(check("a", Nanos::from_nanos(400_000_000)), Err(Nanos::from_nanos(600_000_000)));
//! assert_eq!(check("b", Nanos::ZERO), Ok(()));
//! assert_eq!(check("a", Nanos::from_nanos(1_000_000_000)), Ok(()));
//! ```

pub mod fixed_window;
pub mod gcra;
pub mod sliding_window;
mod window;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use sliding_window::SlidingWindow;

use crate::clock::Nanos;
use crate::decision::Decision;

/// What a request does to a state: the cheap answer, for
/// [`RateLimiter::check`](crate::RateLimiter::check).
///
/// ```
/// use tollgate::{Algorithm, Gcra, Nanos, Quota, Transition};
///
/// let gcra = Gcra::from(Quota::per_second(1).unwrap());
/// let fresh = 0;
/// let Transition::Allow { state } = gcra.transition(fresh, Nanos::ZERO, 1) else { panic!() };
/// assert_eq!(gcra.transition(state, Nanos::ZERO, 1),
///            Transition::Deny { retry_after: Nanos::from_nanos(1_000_000_000) });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Admit, and store `state` (the old word itself when the cost is 0: nothing to write).
    Allow {
        /// The word to store.
        state: u64,
    },
    /// Refuse, store nothing; the same request would be admitted after `retry_after`
    /// ([`Nanos::MAX`] for a cost above the capacity, which never fits).
    Deny {
        /// The wait, rounded up.
        retry_after: Nanos,
    },
}

/// A rate-limiting algorithm: pure transitions over one packed `u64` (see [the module docs](self)).
///
/// The trait is sealed: the stores rely on its conventions (fresh is zero, `u64::MAX` is never a
/// state, idle states are equivalent to fresh), which the implementations in this crate prove in
/// their tests. Calling its methods directly is how another backend replays a decision.
///
/// ```
/// use tollgate::{Algorithm, FixedWindow, Nanos, Quota};
///
/// let fixed = FixedWindow::new(&Quota::per_second(2).unwrap()).unwrap();
/// let (decision, state) = fixed.decide(0, Nanos::ZERO, 2);
/// assert!(decision.is_allowed() && decision.remaining() == 0);
/// assert!(!fixed.decide(state, Nanos::ZERO, 1).0.is_allowed());
/// assert!(fixed.is_idle(state, Nanos::from_nanos(1_000_000_000)));
/// ```
// Every implementation marks each of its methods `#[inline]`: the limiters are generic, so their
// code is generated in the caller's crate, where a non-generic function without the attribute can
// be called but not inlined. Out of line, `decide` alone made `decide_key` about a tenth slower
// (`cargo bench --bench paired -- "keyed 100k uniform: decide_key"`).
pub trait Algorithm: sealed::Sealed + Send + Sync + core::fmt::Debug {
    /// The largest cost one request can have: the burst (GCRA) or the per-window limit.
    ///
    /// ```
    /// use tollgate::{Algorithm, Gcra, Quota, SlidingWindow};
    ///
    /// let gcra = Gcra::from(Quota::per_second(100).unwrap().with_burst(20).unwrap());
    /// assert_eq!(gcra.capacity(), 20);
    /// let window = SlidingWindow::new(&Quota::per_minute(600).unwrap()).unwrap();
    /// assert_eq!(window.capacity(), 600);
    /// ```
    fn capacity(&self) -> u64;

    /// Applies a request of `cost` at `now` to `state`: admitted (and the word to store) or denied
    /// (and how long to wait). A `cost` above [`capacity`](Algorithm::capacity) is denied with a
    /// `retry_after` of [`Nanos::MAX`]; limiters report it as an error before they get here.
    ///
    /// ```
    /// use tollgate::{Algorithm, Gcra, Nanos, Quota, Transition};
    ///
    /// // 10 per second, bursts of 2: one request every 100 ms, two at once.
    /// let gcra = Gcra::from(Quota::per_second(10).unwrap().with_burst(2).unwrap());
    /// let Transition::Allow { state } = gcra.transition(0, Nanos::ZERO, 2) else { panic!() };
    /// assert_eq!(
    ///     gcra.transition(state, Nanos::ZERO, 1),
    ///     Transition::Deny { retry_after: Nanos::from_nanos(100_000_000) }
    /// );
    /// assert_eq!(
    ///     gcra.transition(state, Nanos::ZERO, 3),
    ///     Transition::Deny { retry_after: Nanos::MAX }
    /// );
    /// ```
    fn transition(&self, state: u64, now: Nanos, cost: u64) -> Transition;

    /// The same decision as [`transition`](Algorithm::transition) with everything a caller may
    /// report (remaining, retry after, reset after), and the word to store (`state` itself when
    /// nothing changes).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, Gcra, Nanos, Quota};
    ///
    /// let gcra = Gcra::from(Quota::per_second(10).unwrap());
    /// let (decision, state) = gcra.decide(0, Nanos::ZERO, 3);
    /// assert!(decision.is_allowed());
    /// assert_eq!(decision.remaining(), 7);
    /// assert_eq!(decision.reset_after(), Duration::from_millis(300));
    /// // A peek (cost 0) decides without changing the word.
    /// assert_eq!(gcra.decide(state, Nanos::ZERO, 0).1, state);
    /// ```
    fn decide(&self, state: u64, now: Nanos, cost: u64) -> (Decision, u64);

    /// Whether `state` is equivalent to the fresh state at `now` (and at any later time): every
    /// decision from now on would be the same as for a fresh state. Idle slots can be reused.
    ///
    /// ```
    /// use tollgate::{Algorithm, Gcra, Nanos, Quota, Transition};
    ///
    /// let gcra = Gcra::from(Quota::per_second(10).unwrap());
    /// let Transition::Allow { state } = gcra.transition(0, Nanos::ZERO, 1) else { panic!() };
    /// // The request's 100 ms have not passed: the key is not back to fresh.
    /// assert!(!gcra.is_idle(state, Nanos::from_nanos(99_999_999)));
    /// assert!(gcra.is_idle(state, Nanos::from_nanos(100_000_000)));
    /// ```
    fn is_idle(&self, state: u64, now: Nanos) -> bool;

    /// The state under the algorithm `to` that carries over what `state` has left at `now`:
    /// what a limiter changing its quota from `self`'s to `to`'s stores.
    ///
    /// What carries over is the room: the requests the state would still admit at `now`, capped
    /// at what `to` admits from fresh. So tightening takes effect at once (never more than the
    /// new burst or limit is left), and loosening grants nothing by itself: the new rate fills
    /// the room from where it was. What has been used is never forgotten:
    ///
    /// - [`Gcra`]: the room (the schedule's distance below its tolerance, in the old emission
    ///   interval) is rescaled to the new one, rounded down, and capped at the new tolerance;
    ///   a schedule running ahead of its tolerance (reservations waiting their turn) carries
    ///   its backlog over the same way, rounded up. A state that had `n` requests left has
    ///   `min(n, burst)` left, and a schedule whose last reservation was due in `d` is due in
    ///   `d` rescaled by the ratio of the intervals.
    /// - [`SlidingWindow`] and [`FixedWindow`]: the requests left (the decision's
    ///   [`remaining`](Decision::remaining)), capped at the new limit, are what is left of the
    ///   window that holds `now` under the new period; the rest of the new limit is counted
    ///   as used in it, and the previous window as empty. A window that is shorter, or a new
    ///   one, is never given more than the old state had left.
    ///
    /// ```
    /// use tollgate::{Algorithm, Gcra, Nanos, Quota};
    ///
    /// let fast = Gcra::from(Quota::per_second(100).unwrap());
    /// let slow = Gcra::from(Quota::per_second(10).unwrap());
    /// let (_, state) = fast.decide(0, Nanos::ZERO, 40); // 60 left
    /// // Tightening: 60 left is more than the new burst, so the new burst is left.
    /// let tight = fast.carry_over(state, Nanos::ZERO, &slow);
    /// assert_eq!(slow.decide(tight, Nanos::ZERO, 0).0.remaining(), 10);
    /// // Loosening back: 10 left stays 10, and the rest refills at 100 per second.
    /// let loose = slow.carry_over(tight, Nanos::ZERO, &fast);
    /// assert_eq!(fast.decide(loose, Nanos::ZERO, 0).0.remaining(), 10);
    /// assert_eq!(fast.decide(loose, Nanos::from_nanos(100_000_000), 0).0.remaining(), 20);
    /// ```
    fn carry_over(&self, state: u64, now: Nanos, to: &Self) -> u64
    where
        Self: Sized;
}

/// What a peek at `state` reports for a request of `cost` at `now`: the request's outcome and
/// wait, beside the state as it stands (see [`Decision::peeked`]). Nothing is written.
#[inline]
pub(crate) fn peek<A: Algorithm>(algorithm: &A, state: u64, now: Nanos, cost: u64) -> Decision {
    let request = algorithm.decide(state, now, cost).0;
    Decision::peeked(request, algorithm.decide(state, now, 0).0)
}

/// Seals [`Algorithm`], and holds what the keyed table asks of an algorithm beyond it.
pub(crate) mod sealed {
    use super::Algorithm;
    use crate::clock::Nanos;
    use crate::quota::{Quota, QuotaError};

    pub trait Sealed: Copy {
        /// Gives back a hold of `cost` that moved a state from `before` to `after`, from the
        /// state as it is now, `state`, at `now`: what an all-or-nothing check does to the
        /// layers it held when a later layer refused. Never less constraining than the state
        /// would be had the hold never been made: exact when nothing else was admitted since
        /// (`state == after`), and for the windows always (their counts add up); for GCRA
        /// after other admissions, it keeps at most the part of the hold that the clock has
        /// run into since it was made.
        /// The default keeps the hold: never too much given back.
        fn release(&self, state: u64, held: [u64; 2], cost: u64, now: Nanos) -> u64 {
            let _ = (held, cost, now);
            state
        }

        /// How far the state may run ahead of the clock and still admit a request of cost 1:
        /// what [`is_limited`](Sealed::is_limited) judges this algorithm's own entries by.
        /// Only GCRA's state runs ahead of the clock; the windows judge by their state alone.
        #[inline]
        fn room(&self) -> u64 {
            0
        }

        /// Whether the entry with `state` is being limited at `now`: it cannot admit a request
        /// of cost 1 under the quota whose [`room`](Sealed::room) is `room`, which is this
        /// algorithm's own or, in a table of tiers, the entry's tier's. An entry that is being
        /// limited is never evicted.
        ///
        /// Only GCRA takes per-call quotas (tiers); the windows ignore `room`.
        #[inline]
        fn is_limited(&self, state: u64, now: Nanos, room: u64) -> bool
        where
            Self: Algorithm,
        {
            let _ = room;
            self.decide(state, now, 0).0.remaining() == 0
        }

        /// How a snapshot names this algorithm and its parameters (a restore requires the
        /// same); 0 for an algorithm whose states cannot be saved.
        fn snapshot_id(&self) -> (u8, [u64; 3]) {
            (0, [0; 3])
        }

        /// A saved state moved onto a clock on which the saving clock's `t` reads `t + shift`,
        /// at that clock's `now`: `None` if it is idle there. Never less constraining than the
        /// state was.
        fn rebase(&self, state: u64, shift: i128, now: Nanos) -> Option<u64> {
            let _ = (state, shift, now);
            None
        }

        /// The time over which the capacity comes back in full: GCRA's tolerance (the burst
        /// times the emission interval), a window counter's window. What the `RateLimit-Policy`
        /// HTTP field states as the policy's window.
        fn window(&self) -> core::time::Duration {
            core::time::Duration::ZERO
        }

        /// The algorithm for `quota`, as its constructor builds it: what a limiter changing its
        /// quota switches to.
        fn for_quota(quota: &Quota) -> Result<Self, QuotaError>
        where
            Self: Sized;

        /// The parameters as three words, which [`from_words`](Sealed::from_words) turns back
        /// into the algorithm: how a reconfigurable store keeps the algorithm of each
        /// generation in atomics, read while another thread may be writing the next one.
        fn to_words(&self) -> [u64; 3];

        /// The algorithm whose [`to_words`](Sealed::to_words) are `words`.
        fn from_words(words: [u64; 3]) -> Self
        where
            Self: Sized;
    }

    impl Sealed for super::Gcra {
        fn release(&self, state: u64, held: [u64; 2], cost: u64, now: Nanos) -> u64 {
            self.release(state, held, cost, now)
        }
        #[inline]
        fn room(&self) -> u64 {
            self.room()
        }

        fn snapshot_id(&self) -> (u8, [u64; 3]) {
            (1, self.snapshot_params())
        }

        fn rebase(&self, state: u64, shift: i128, now: Nanos) -> Option<u64> {
            // The schedule moves with the clock; one that is paid off is idle.
            crate::snapshot::moved(state, shift).filter(|&tat| tat > now.as_nanos())
        }

        #[inline]
        fn is_limited(&self, state: u64, now: Nanos, room: u64) -> bool {
            // The schedule runs further ahead of the clock than a request's room.
            state.saturating_sub(now.as_nanos()) > room
        }

        fn for_quota(quota: &Quota) -> Result<Self, QuotaError> {
            Ok(Self::new(quota))
        }

        fn window(&self) -> core::time::Duration {
            self.tolerance()
        }

        #[inline]
        fn to_words(&self) -> [u64; 3] {
            self.snapshot_params()
        }

        #[inline]
        fn from_words([emission_interval, tolerance, burst]: [u64; 3]) -> Self {
            Self::from_parts(emission_interval, tolerance, burst)
        }
    }
    impl Sealed for super::SlidingWindow {
        fn release(&self, state: u64, [_, after]: [u64; 2], cost: u64, _: Nanos) -> u64 {
            self.release(state, after, cost)
        }

        fn snapshot_id(&self) -> (u8, [u64; 3]) {
            (2, self.snapshot_params())
        }

        fn rebase(&self, state: u64, shift: i128, now: Nanos) -> Option<u64> {
            self.rebase(state, shift, now)
        }

        fn for_quota(quota: &Quota) -> Result<Self, QuotaError> {
            Self::new(quota)
        }

        fn window(&self) -> core::time::Duration {
            Self::window(self)
        }

        #[inline]
        fn to_words(&self) -> [u64; 3] {
            self.snapshot_params()
        }

        #[inline]
        fn from_words([period, limit, _]: [u64; 3]) -> Self {
            Self::from_parts(period, limit)
        }
    }

    impl Sealed for super::FixedWindow {
        fn release(&self, state: u64, [_, after]: [u64; 2], cost: u64, _: Nanos) -> u64 {
            self.release(state, after, cost)
        }

        fn snapshot_id(&self) -> (u8, [u64; 3]) {
            (3, self.snapshot_params())
        }

        fn rebase(&self, state: u64, shift: i128, now: Nanos) -> Option<u64> {
            self.rebase(state, shift, now)
        }

        fn for_quota(quota: &Quota) -> Result<Self, QuotaError> {
            Self::new(quota)
        }

        fn window(&self) -> core::time::Duration {
            Self::window(self)
        }

        #[inline]
        fn to_words(&self) -> [u64; 3] {
            self.snapshot_params()
        }

        #[inline]
        fn from_words([period, limit, _]: [u64; 3]) -> Self {
            Self::from_parts(period, limit)
        }
    }
}

/// The number of bits needed to hold every count from 0 to `limit`.
const fn count_bits(limit: u64) -> u32 {
    u64::BITS - limit.leading_zeros()
}
