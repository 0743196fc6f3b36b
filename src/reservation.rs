//! Reservations: a request admitted now into a GCRA schedule, to proceed at its turn.
//!
//! [`RateLimiter::reserve`](crate::RateLimiter::reserve) and
//! [`KeyedRateLimiter::reserve_key`](crate::KeyedRateLimiter::reserve_key) shape traffic instead
//! of rejecting it: a request that does not fit now takes the next place in the schedule (the
//! GCRA's theoretical arrival time moves past it, exactly as for an admission), and gets the time
//! at which it may proceed. Later requests queue behind it, so places are handed out in arrival
//! order and a large request is never starved by a stream of small ones. Each waiter sleeps until
//! its own time: there is no polling and no herd.
//!
//! # Cancelling
//!
//! [`Reservation::cancel`] gives back what no later request depends on. A reservation that is
//! still the end of the schedule (nothing admitted or reserved after it, or everything after it
//! cancelled too) is removed entirely: the state is put back to what it was before it, and the
//! next request is decided as if it had never been made. A reservation with others behind it
//! gives back nothing: they were promised their times on the assumption that it would run, and
//! the schedule, one timestamp, cannot hold a gap. Cancelling several reservations in the
//! reverse order of their making therefore gives all of them back. Dropping a reservation keeps
//! it; the futures of `Reservation::ready` and of the limiters' `until_ready` (the `tokio`
//! feature) cancel theirs when they are dropped before their time.
//!
//! A reservation made before a [`reset`](crate::RateLimiter::reset) should not be cancelled
//! after it: the reset forgot it already, and a cancel that finds the schedule ending, by
//! coincidence, where it ended would put back the state from before the reset.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
//!
//! let clock = ManualClock::new();
//! let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
//! limiter.check_n(10).unwrap(); // the burst is spent
//! let first = limiter.reserve(1, Duration::from_secs(1)).unwrap();
//! let second = limiter.reserve(1, Duration::from_secs(1)).unwrap();
//! assert_eq!(first.delay(), Duration::from_millis(100));
//! assert_eq!(second.delay(), Duration::from_millis(200));
//! assert!(!first.cancel()); // `second` is behind it: nothing to give back
//! assert!(second.cancel()); // the end of the schedule: given back
//! assert_eq!(limiter.reserve(1, Duration::ZERO).unwrap_err().to_string(),
//!            "rate limited: retry after 200ms");
//! ```

use core::fmt;
use core::time::Duration;

use crate::algorithm::Gcra;
use crate::clock::{Clock, Nanos};
use crate::layers::{give_back, Hold};
use crate::store::{Probe, StateCell, Table};
use crate::sync::AtomicU64;

/// A request admitted into a limiter's schedule, to proceed at
/// [`ready_at`](Reservation::ready_at): made by
/// [`RateLimiter::reserve`](crate::RateLimiter::reserve) and
/// [`KeyedRateLimiter::reserve_key`](crate::KeyedRateLimiter::reserve_key).
///
/// Dropping it keeps the place (the request was admitted); [`cancel`](Reservation::cancel) gives
/// it back if nothing depends on it (see the [module docs](self)). Wait for it with
/// [`wait`](Reservation::wait) (blocking) or `ready` (async, with the
/// `tokio` feature).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Quota, RateLimiter};
///
/// let limiter = RateLimiter::gcra(Quota::per_second(1000).unwrap().with_burst(1).unwrap());
/// for _ in 0..3 {
///     // At most 1 ms apart: the second and third wait about 1 ms each for their turn.
///     limiter.reserve(1, Duration::from_millis(10)).unwrap().wait();
/// }
/// ```
#[must_use = "a reservation holds a place in the schedule: wait for it, or cancel it"]
pub struct Reservation<'a, C> {
    schedule: Option<Schedule<'a>>,
    clock: &'a C,
    /// The state the reservation replaced, and the one it stored: a cancel puts back `before`
    /// if the state is still `after`.
    before: u64,
    after: u64,
    ready_at: Nanos,
    jitter: Duration,
}

/// Where a reservation's state lives.
#[derive(Clone, Copy)]
enum Schedule<'a> {
    Direct(&'a StateCell<Gcra>, u64),
    /// The table, the key, its generation's counter and the generation the hold was made in.
    Keyed(&'a Table, Probe, &'a AtomicU64, u64),
}

impl<'a, C: Clock> Reservation<'a, C> {
    /// A reservation of a direct limiter's state, from `before` to `after` in `generation`.
    pub(crate) fn direct(
        cell: &'a StateCell<Gcra>,
        generation: u64,
        clock: &'a C,
        (before, after): (u64, u64),
        ready_at: Nanos,
    ) -> Reservation<'a, C> {
        let schedule = Schedule::Direct(cell, generation);
        Reservation::new(Some(schedule), clock, before, after, ready_at)
    }

    /// A reservation of a key's state in `table`, from `before` to `after` in `generation`
    /// (whose number `counter` holds while it is current).
    pub(crate) fn keyed(
        table: &'a Table,
        probe: Probe,
        (counter, generation): (&'a AtomicU64, u64),
        clock: &'a C,
        (before, after): (u64, u64),
        ready_at: Nanos,
    ) -> Reservation<'a, C> {
        Reservation::new(
            Some(Schedule::Keyed(table, probe, counter, generation)),
            clock,
            before,
            after,
            ready_at,
        )
    }

    /// The same reservation, recorded nowhere (admitted by [`Overflow::Allow`](crate::Overflow)
    /// when the table had no room): there is nothing to cancel.
    pub(crate) fn unrecorded(self) -> Reservation<'a, C> {
        Reservation {
            schedule: None,
            ..self
        }
    }

    fn new(
        schedule: Option<Schedule<'a>>,
        clock: &'a C,
        before: u64,
        after: u64,
        ready_at: Nanos,
    ) -> Reservation<'a, C> {
        Reservation {
            // A cost of 0 stores nothing, and has nothing to give back.
            schedule: schedule.filter(|_| before != after),
            clock,
            before,
            after,
            ready_at,
            jitter: Duration::ZERO,
        }
    }

    /// The time, on the limiter's clock, at which the request may proceed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, ManualClock, Nanos, Quota, RateLimiter};
    /// let clock = ManualClock::starting_at(Duration::from_secs(5));
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(2).unwrap()), &clock);
    /// limiter.check_n(2).unwrap();
    /// let turn = limiter.reserve(1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(turn.ready_at(), Nanos::from_nanos(5_500_000_000));
    /// ```
    #[must_use]
    pub fn ready_at(&self) -> Nanos {
        self.ready_at
    }

    /// How long the request must still wait for its turn: zero once it may proceed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(2).unwrap()), &clock);
    /// limiter.check_n(2).unwrap();
    /// let turn = limiter.reserve(1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(turn.delay(), Duration::from_millis(500));
    /// clock.advance(Duration::from_millis(200));
    /// assert_eq!(turn.delay(), Duration::from_millis(300));
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(turn.delay(), Duration::ZERO);
    /// ```
    #[must_use]
    pub fn delay(&self) -> Duration {
        let now = self.clock.now().as_nanos();
        Duration::from_nanos(self.ready_at.as_nanos().saturating_sub(now))
    }

    /// Adds a random delay of up to `jitter` to the wait of [`wait`](Reservation::wait) and
    /// `ready`, for callers that must not all act at once (retries against
    /// a shared upstream). The reserved time itself does not move: the request only ever wakes
    /// later than its turn.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(100).unwrap());
    /// limiter.reserve(1, Duration::ZERO).unwrap().with_jitter(Duration::from_millis(2)).wait();
    /// ```
    pub fn with_jitter(self, jitter: Duration) -> Reservation<'a, C> {
        Reservation { jitter, ..self }
    }

    /// Gives the reservation back, if nothing depends on it: `true` if it was still the end of
    /// its schedule, which is then as it was before the reservation; `false` if later requests
    /// were admitted behind it (they keep their times, and this one's place stays spent), if
    /// the limiter's quota has changed since (the reservation was converted with the rest of the
    /// state), or if the reservation was never recorded (a cost of 0; a full table under
    /// [`Overflow::Allow`](crate::Overflow)). See the [module docs](self).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_hour(1).unwrap());
    /// let turn = limiter.reserve(1, Duration::ZERO).unwrap();
    /// assert!(turn.cancel()); // the request was not sent after all
    /// assert!(limiter.check().is_ok());
    /// ```
    pub fn cancel(self) -> bool {
        let hold = |generation| Hold {
            before: self.before,
            after: self.after,
            recorded: true,
            generation,
        };
        match self.schedule {
            None => false,
            Some(Schedule::Direct(cell, generation)) => {
                let mut step = give_back(hold(generation));
                cell.update_in(generation, |word, _| step(word)) == Some(true)
            }
            Some(Schedule::Keyed(table, probe, counter, generation)) => {
                let step = give_back(hold(generation));
                table.update_existing(&probe, counter, generation, step) == Some(true)
            }
        }
    }

    /// Blocks the thread until the request's turn (plus the jitter, if any), then returns: the
    /// request may proceed.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(50).unwrap().with_burst(1).unwrap());
    /// let start = Instant::now();
    /// for _ in 0..3 {
    ///     limiter.reserve(1, Duration::from_secs(1)).unwrap().wait();
    /// }
    /// assert!(start.elapsed() >= Duration::from_millis(40)); // two waits of 20 ms
    /// ```
    pub fn wait(self) {
        let sleep = self.sleep();
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
    }

    /// Waits for the request's turn (plus the jitter, if any) on tokio's timer: the request may
    /// proceed when the future completes. Dropped before then, the future
    /// [cancels](Reservation::cancel) the reservation.
    ///
    /// ```
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(100).unwrap().with_burst(1).unwrap()), &clock);
    /// limiter.check().unwrap();
    /// // Gives up after 1 ms: the place 10 ms ahead is given back.
    /// let turn = limiter.reserve(1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(turn.delay(), Duration::from_millis(10));
    /// let gave_up = tokio::time::timeout(Duration::from_millis(1), turn.ready()).await;
    /// assert!(gave_up.is_err());
    /// let next = limiter.reserve(1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(next.delay(), Duration::from_millis(10)); // not 20: the first one is gone
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn ready(self) {
        let sleep = self.sleep();
        let mut pending = CancelOnDrop(Some(self));
        if !sleep.is_zero() {
            tokio::time::sleep(sleep).await;
        }
        // Its time has come: keep it.
        pending.0 = None;
    }

    /// How long to sleep: the delay and the jitter's draw.
    fn sleep(&self) -> Duration {
        let delay = self.delay();
        if self.jitter.is_zero() {
            return delay;
        }
        // A fresh random state per draw: seeded from the process's random keys and a counter,
        // so waiters that reserved the same time draw different delays.
        let draw = ahash::RandomState::new().hash_one(self.ready_at.as_nanos());
        let jitter = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        delay + Duration::from_nanos(draw % jitter.saturating_add(1))
    }
}

/// A reservation that a dropped future gives back.
#[cfg(feature = "tokio")]
struct CancelOnDrop<'a, C: Clock>(Option<Reservation<'a, C>>);

#[cfg(feature = "tokio")]
impl<C: Clock> Drop for CancelOnDrop<'_, C> {
    fn drop(&mut self) {
        if let Some(reservation) = self.0.take() {
            reservation.cancel();
        }
    }
}

/// The reserved time and the state it ends, without the limiter.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
/// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(1).unwrap()), ManualClock::new());
/// let turn = limiter.reserve(1, Duration::ZERO).unwrap();
/// assert_eq!(format!("{turn:?}"), "Reservation { ready_at: 0ns, recorded: true }");
/// ```
impl<C> fmt::Debug for Reservation<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("ready_at", &self.ready_at)
            .field("recorded", &self.schedule.is_some())
            .finish()
    }
}
