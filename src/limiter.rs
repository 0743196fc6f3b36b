//! The direct limiter: one state for everything that passes through it.

use core::fmt;
use core::time::Duration;

use crate::algorithm::{Algorithm, FixedWindow, Gcra, SlidingWindow, Transition};
use crate::clock::{Clock, Nanos, TscClock};
use crate::decision::{CheckError, Decision, Denied, InsufficientCapacity};
use crate::error::BuildError;
use crate::layers::Turn;
use crate::quota::Quota;
use crate::reservation::Reservation;
use crate::store::StateCell;

/// A lock-free rate limiter with one state: a whole service, one upstream, one queue.
///
/// The state is a single cache-padded `AtomicU64`; a decision reads the clock once and applies
/// the algorithm's pure transition with one compare-and-swap loop. A denial writes nothing.
/// `RateLimiter` is `Send + Sync`: share it by reference, in an `Arc`, or in a `static`.
///
/// It is generic over the [`Algorithm`] (default [`Gcra`]) and the [`Clock`] (default
/// [`TscClock`]).
///
/// ```
/// use std::sync::{Arc, LazyLock};
/// use tollgate::{Quota, RateLimiter};
///
/// static OUTBOUND: LazyLock<RateLimiter> =
///     LazyLock::new(|| RateLimiter::gcra(Quota::per_second(1000).unwrap()));
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// OUTBOUND.check()?;
///
/// let shared = Arc::new(RateLimiter::sliding_window(Quota::per_minute(600)?)?);
/// let worker = {
///     let shared = Arc::clone(&shared);
///     std::thread::spawn(move || shared.check().is_ok())
/// };
/// assert!(worker.join().unwrap());
/// # Ok(())
/// # }
/// ```
pub struct RateLimiter<A = Gcra, C = TscClock> {
    state: StateCell<A>,
    clock: C,
}

impl RateLimiter<Gcra, TscClock> {
    /// A GCRA limiter for `quota` on the default clock: the usual choice.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(100).unwrap().with_burst(10).unwrap());
    /// for _ in 0..10 {
    ///     assert!(limiter.check().is_ok());
    /// }
    /// assert!(limiter.check().is_err());
    /// ```
    #[must_use]
    pub fn gcra(quota: Quota) -> RateLimiter<Gcra, TscClock> {
        RateLimiter::new(Gcra::new(&quota))
    }
}

impl RateLimiter<SlidingWindow, TscClock> {
    /// A sliding-window counter for `quota` on the default clock.
    ///
    /// # Errors
    ///
    /// [`BuildError::Quota`] if the limit does not fit the packed word with this window (see
    /// [`SlidingWindow::new`]).
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::sliding_window(Quota::per_minute(60).unwrap()).unwrap();
    /// assert!(limiter.check_n(60).is_ok());
    /// assert!(limiter.check().is_err());
    /// ```
    pub fn sliding_window(
        quota: Quota,
    ) -> Result<RateLimiter<SlidingWindow, TscClock>, BuildError> {
        Ok(RateLimiter::new(SlidingWindow::new(&quota)?))
    }
}

impl RateLimiter<FixedWindow, TscClock> {
    /// A fixed-window counter for `quota` on the default clock.
    ///
    /// # Errors
    ///
    /// [`BuildError::Quota`] if the limit does not fit the packed word with this window (see
    /// [`FixedWindow::new`]).
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::fixed_window(Quota::per_second(3).unwrap()).unwrap();
    /// assert!(limiter.check_n(3).is_ok());
    /// ```
    pub fn fixed_window(quota: Quota) -> Result<RateLimiter<FixedWindow, TscClock>, BuildError> {
        Ok(RateLimiter::new(FixedWindow::new(&quota)?))
    }
}

impl<A: Algorithm> RateLimiter<A, TscClock> {
    /// A limiter running `algorithm` on the default clock.
    ///
    /// ```
    /// use tollgate::{Gcra, Quota, RateLimiter};
    /// let limiter = RateLimiter::new(Gcra::from(Quota::per_hour(10).unwrap()));
    /// assert_eq!(limiter.peek().remaining(), 10);
    /// ```
    pub fn new(algorithm: A) -> RateLimiter<A, TscClock> {
        RateLimiter::with_clock(algorithm, TscClock::new())
    }
}

impl<A: Algorithm, C: Clock> RateLimiter<A, C> {
    /// A limiter running `algorithm` on `clock`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(1).unwrap()), &clock);
    /// assert!(limiter.check().is_ok());
    /// assert!(limiter.check().is_err());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.check().is_ok());
    /// ```
    pub fn with_clock(algorithm: A, clock: C) -> RateLimiter<A, C> {
        RateLimiter {
            state: StateCell::new(algorithm),
            clock,
        }
    }

    /// Admits one request, or says how long to wait. The fastest path: no division, no
    /// [`Decision`] to fill in, and nothing written on a denial.
    ///
    /// # Errors
    ///
    /// [`Denied`], with the time after which one request would be admitted.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_minute(1).unwrap());
    /// assert!(limiter.check().is_ok());
    /// let denied = limiter.check().unwrap_err();
    /// assert!(denied.retry_after().as_secs() >= 59);
    /// ```
    #[inline]
    pub fn check(&self) -> Result<(), Denied> {
        let now = self.clock.now();
        self.state
            .update(|word, algorithm| match algorithm.transition(word, now, 1) {
                Transition::Allow { state } => (Ok(()), state),
                Transition::Deny { retry_after } => (Err(Denied::new(retry_after)), word),
            })
    }

    /// Admits a request of `cost` units (bytes, tokens, rows...) all at once, or none of it.
    ///
    /// A cost of 0 is always admitted and changes nothing.
    ///
    /// # Errors
    ///
    /// [`CheckError::Denied`] if the cost does not fit now; [`CheckError::InsufficientCapacity`]
    /// if it exceeds the capacity (burst or limit) and can never fit.
    ///
    /// ```
    /// use tollgate::{CheckError, Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(1000).unwrap());
    /// assert!(limiter.check_n(600).is_ok());
    /// assert!(matches!(limiter.check_n(600), Err(CheckError::Denied(_))));
    /// assert!(matches!(limiter.check_n(1001), Err(CheckError::InsufficientCapacity(_))));
    /// ```
    #[inline]
    pub fn check_n(&self, cost: u64) -> Result<(), CheckError> {
        let now = self.clock.now();
        self.state.update(|word, algorithm| {
            if let Err(err) = InsufficientCapacity::check(cost, algorithm.capacity()) {
                return (Err(err.into()), word);
            }
            match algorithm.transition(word, now, cost) {
                Transition::Allow { state } => (Ok(()), state),
                Transition::Deny { retry_after } => (Err(Denied::new(retry_after).into()), word),
            }
        })
    }

    /// Decides a request of `cost` and reports everything about it: admitted or not, what
    /// remains, when to retry, when the state resets. A cost of 0 is always admitted and
    /// changes nothing.
    ///
    /// Slightly more expensive than [`check_n`](RateLimiter::check_n), which skips computing the
    /// numbers (a division or two).
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] if the cost exceeds the capacity and can never fit.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(10).unwrap());
    /// let d = limiter.decide(4).unwrap();
    /// assert!(d.is_allowed());
    /// assert_eq!((d.remaining(), d.limit()), (6, 10));
    /// ```
    pub fn decide(&self, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let now = self.clock.now();
        self.state.update(|word, algorithm| {
            match InsufficientCapacity::check(cost, algorithm.capacity()) {
                Ok(()) => {
                    let (decision, next) = algorithm.decide(word, now, cost);
                    (Ok(decision), next)
                }
                Err(err) => (Err(err), word),
            }
        })
    }

    /// Whether one request would be admitted now, and if not, when it would be, without
    /// changing anything: [`peek_n`](RateLimiter::peek_n) for a cost of 1.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(5).unwrap()), &clock);
    /// limiter.check_n(2).unwrap();
    /// assert_eq!(limiter.peek().remaining(), 3);
    /// assert_eq!(limiter.peek().remaining(), 3); // a peek consumes nothing
    /// limiter.check_n(3).unwrap();
    /// let peek = limiter.peek();
    /// assert!(!peek.is_allowed());
    /// assert_eq!(peek.retry_after(), Duration::from_millis(200));
    /// ```
    pub fn peek(&self) -> Decision {
        self.peek_at(1)
    }

    /// Whether a request of `cost` would be admitted now, and if not, when it would be, without
    /// changing anything. The decision's [`is_allowed`](Decision::is_allowed) and
    /// [`retry_after`](Decision::retry_after) are the request's; [`remaining`](Decision::remaining)
    /// and [`reset_after`](Decision::reset_after) describe the state as it stands, since nothing
    /// is consumed.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] if the cost exceeds the capacity and can never fit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    /// limiter.check_n(8).unwrap();
    /// assert!(limiter.peek_n(2).unwrap().is_allowed());
    /// let peek = limiter.peek_n(5).unwrap();
    /// assert!(!peek.is_allowed());
    /// assert_eq!(peek.remaining(), 2);
    /// assert_eq!(peek.retry_after(), Duration::from_millis(300)); // 3 more to come back
    /// assert!(limiter.peek_n(11).is_err());
    /// ```
    pub fn peek_n(&self, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let now = self.clock.now();
        let loaded = self.state.load();
        InsufficientCapacity::check(cost, loaded.algorithm.capacity())?;
        Ok(crate::algorithm::peek(
            &loaded.algorithm,
            loaded.word,
            now,
            cost,
        ))
    }

    fn peek_at(&self, cost: u64) -> Decision {
        let now = self.clock.now();
        let loaded = self.state.load();
        crate::algorithm::peek(&loaded.algorithm, loaded.word, now, cost)
    }

    /// Forgets everything admitted so far: the next request is decided as a new limiter's. For a
    /// limiter shared by reference, in an `Arc` or a `static`, which cannot be replaced: a quota
    /// window that an operator reopens, or a limit that belongs to a session that has ended.
    ///
    /// The reset is ordered with the limiter's decisions: a request racing it is decided either
    /// before it (and then forgotten) or after it (on the fresh state), never on a mix.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_hour(3).unwrap());
    /// limiter.check_n(3).unwrap();
    /// assert!(limiter.check().is_err());
    /// limiter.reset();
    /// assert_eq!(limiter.peek().remaining(), 3);
    /// ```
    pub fn reset(&self) {
        self.state.reset();
    }

    /// Changes the quota while the limiter runs, without a lock on the decision path and
    /// without losing what has been admitted.
    ///
    /// What carries over is the room: the requests the limiter would still admit now, capped
    /// at the new burst (or limit). So tightening takes effect at once, and loosening grants no
    /// burst by itself: the new rate fills the room from where it was. For GCRA, reservations
    /// waiting their turn keep their place (the backlog is rescaled to the new rate); the
    /// windows count what they had used as used in the window that holds now. The exact rules
    /// are [`Algorithm::carry_over`]'s.
    ///
    /// Decisions racing the change are made either before it, with the old quota, and then
    /// converted with the rest of the state, or after it, with the new quota: never with one
    /// quota on the other's state. A [`Reservation`] made before the change still proceeds at
    /// its time, but its cancel gives nothing back (its hold was converted with the rest). A
    /// limiter that has been reconfigured decides with a 128-bit compare-and-swap (one that
    /// never was keeps the 64-bit one); setting the quota in force changes nothing.
    ///
    /// # Errors
    ///
    /// [`BuildError::Quota`] if the algorithm cannot take `quota` (a window's limit that does
    /// not fit its packed word); the limiter is unchanged.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(100).unwrap()), &clock);
    /// limiter.check_n(40).unwrap(); // 60 left
    ///
    /// // Tightening: at most the new burst is left.
    /// limiter.set_quota(Quota::per_second(10).unwrap()).unwrap();
    /// assert_eq!(limiter.peek().remaining(), 10);
    ///
    /// // Loosening: what was left stays, and the new rate refills it.
    /// limiter.check_n(10).unwrap();
    /// limiter.set_quota(Quota::per_second(100).unwrap()).unwrap();
    /// assert_eq!(limiter.peek().remaining(), 0);
    /// clock.advance(Duration::from_millis(50));
    /// assert_eq!(limiter.peek().remaining(), 5);
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), BuildError> {
        self.reconfigure(A::for_quota(&quota)?);
        Ok(())
    }

    /// Changes the algorithm's parameters while the limiter runs: [`set_quota`] with an
    /// algorithm built already.
    ///
    /// [`set_quota`]: RateLimiter::set_quota
    ///
    /// ```
    /// use tollgate::{Algorithm, Gcra, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::gcra(Quota::per_second(5).unwrap());
    /// limiter.reconfigure(Gcra::from(Quota::per_second(50).unwrap()));
    /// assert_eq!(limiter.algorithm().capacity(), 50);
    /// ```
    pub fn reconfigure(&self, algorithm: A) {
        self.state.reconfigure(algorithm, || self.clock.now());
    }

    /// The algorithm this limiter runs: the one it was built with, or the last
    /// [`set_quota`](RateLimiter::set_quota) gave it.
    ///
    /// ```
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(5).unwrap());
    /// assert_eq!(limiter.algorithm().capacity(), 5);
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> A {
        self.state.algorithm()
    }

    /// The clock this limiter reads.
    ///
    /// ```
    /// # use tollgate::{Clock, Gcra, ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(5).unwrap()), ManualClock::new());
    /// limiter.clock().advance(std::time::Duration::from_secs(1));
    /// assert_eq!(limiter.clock().now().as_nanos(), 1_000_000_000);
    /// ```
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The state's cell, for the layers of an all-or-nothing check.
    #[inline]
    pub(crate) fn cell(&self) -> &StateCell<A> {
        &self.state
    }
}

/// Shaping: reservations and waiting, for GCRA, whose schedule can run ahead of the clock. See
/// the [`reservation`](crate::reservation) module for what a reservation promises and what a
/// cancel gives back.
impl<C: Clock> RateLimiter<Gcra, C> {
    /// Admits a request of `cost` now into the schedule, to proceed at its turn: at once if it
    /// fits, else after the requests before it, as long as that wait is at most `max_wait`.
    /// A `max_wait` of zero is [`check_n`](RateLimiter::check_n); waits are capped at
    /// [`Gcra::MAX_WAIT`] (146 years).
    ///
    /// # Errors
    ///
    /// [`CheckError::Denied`] if the wait would exceed `max_wait` (nothing is reserved; the same
    /// reservation would succeed after its `retry_after`), [`CheckError::InsufficientCapacity`]
    /// if the cost exceeds the burst.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    /// assert_eq!(limiter.reserve(10, Duration::ZERO).unwrap().delay(), Duration::ZERO);
    /// // The burst is spent: 5 more take their turn half a second from now.
    /// let later = limiter.reserve(5, Duration::from_secs(1)).unwrap();
    /// assert_eq!(later.delay(), Duration::from_millis(500));
    /// // 10 more would wait 1.5 s: more than the caller will.
    /// let denied = limiter.reserve(10, Duration::from_secs(1)).unwrap_err();
    /// assert_eq!(denied.to_string(), "rate limited: retry after 500ms");
    /// ```
    #[inline]
    pub fn reserve(&self, cost: u64, max_wait: Duration) -> Result<Reservation<'_, C>, CheckError> {
        InsufficientCapacity::check(cost, self.algorithm().capacity())?;
        let now = self.clock.now();
        // A layer's reservation step: the reservation is built once, after the loop.
        let (hold, ready_at) = Turn::hold(self, now, cost, Nanos::from_duration(max_wait))?;
        Ok(Reservation::direct(
            &self.state,
            hold.generation,
            &self.clock,
            (hold.before, hold.after),
            ready_at,
        ))
    }

    /// Waits, blocking the thread, until a request of `cost` may proceed, if that is at most
    /// `max_wait` from now: [`reserve`](RateLimiter::reserve), then
    /// [`Reservation::wait`].
    ///
    /// # Errors
    ///
    /// As [`reserve`](RateLimiter::reserve), at once, without waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(200).unwrap().with_burst(1).unwrap());
    /// for _ in 0..3 {
    ///     limiter.wait(1, Duration::from_secs(1)).unwrap(); // 5 ms apart
    /// }
    /// ```
    pub fn wait(&self, cost: u64, max_wait: Duration) -> Result<(), CheckError> {
        self.reserve(cost, max_wait)?.wait();
        Ok(())
    }

    /// Waits on tokio's timer until a request of `cost` may proceed, if that is at most
    /// `max_wait` from now: [`reserve`](RateLimiter::reserve), then [`Reservation::ready`].
    /// Dropped before it completes, the future gives its place back.
    ///
    /// # Errors
    ///
    /// As [`reserve`](RateLimiter::reserve), at once, without waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Quota, RateLimiter};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tollgate::CheckError> {
    /// let limiter = RateLimiter::gcra(Quota::per_second(200).unwrap().with_burst(1).unwrap());
    /// for _ in 0..3 {
    ///     limiter.until_ready(1, Duration::from_secs(1)).await?; // 5 ms apart
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn until_ready(&self, cost: u64, max_wait: Duration) -> Result<(), CheckError> {
        self.reserve(cost, max_wait)?.ready().await;
        Ok(())
    }
}

impl<A: Algorithm, C: Clock> fmt::Debug for RateLimiter<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("algorithm", &self.algorithm())
            .field("state", &self.peek())
            .finish_non_exhaustive()
    }
}
