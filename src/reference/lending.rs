//! The model of reservations: a token bucket that lends.

use crate::clock::Nanos;
use crate::quota::Quota;
use crate::Gcra;

/// GCRA's reservations from their definition: a token bucket whose level may go below zero.
///
/// The bucket is [`TokenBucket`](super::TokenBucket)'s, in nanoseconds' worth of refill, but a
/// request may take more than the bucket holds: the level goes negative (a debt, repaid by the
/// refill), and the request may proceed when the level is back to zero. A reservation of cost `c`
/// at `t` takes `level(t) = min(level + (t − last), τ)`, then `level = level(t) − c × T`,
/// `last = t`; it waits `max(0, −level)`, and is admitted iff that is at most `max_wait` (capped
/// at [`Gcra::MAX_WAIT`]). A denial records nothing, and says how much longer than `max_wait` the
/// wait is.
///
/// Every admission is recorded on a stack with the state before it. Cancelling the admission on
/// top puts that state back and pops it; cancelling any other changes nothing. A cost of 0 is
/// admitted at once and recorded nowhere.
///
/// ```
/// use tollgate::reference::{Booking, LendingBucket};
/// use tollgate::{Nanos, Quota};
///
/// let mut bucket = LendingBucket::new(&Quota::per_second(1).unwrap());
/// let Booking::Ready { at, id: first } = bucket.reserve(Nanos::ZERO, 1, Nanos::ZERO) else { panic!() };
/// assert_eq!(at, Nanos::ZERO);
/// let second = Nanos::from_nanos(1_000_000_000);
/// let Booking::Ready { at, id } = bucket.reserve(Nanos::ZERO, 1, second) else { panic!() };
/// assert_eq!(at, second);
/// assert!(!bucket.cancel(first)); // the second is behind it
/// assert!(bucket.cancel(id));
/// assert!(bucket.cancel(first));
/// assert_eq!(bucket.available(Nanos::ZERO), 1);
/// ```
#[derive(Clone, Debug)]
pub struct LendingBucket {
    level: i128,
    last: i128,
    capacity: i128,
    token: i128,
    burst: u64,
    /// The admissions that can still be cancelled, oldest first: id, level and last before it.
    stack: Vec<(u64, i128, i128)>,
    next_id: u64,
}

/// What [`LendingBucket::reserve`] decided.
///
/// ```
/// use tollgate::reference::{Booking, LendingBucket};
/// use tollgate::{Nanos, Quota};
/// let mut bucket = LendingBucket::new(&Quota::per_second(1).unwrap());
/// assert_eq!(bucket.reserve(Nanos::ZERO, 2, Nanos::MAX), Booking::TooLarge);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Booking {
    /// Admitted, to proceed at `at`; `id` names it for [`LendingBucket::cancel`] (0 for a cost of
    /// 0, which nothing can cancel).
    Ready {
        /// When the request may proceed.
        at: Nanos,
        /// The admission's name.
        id: u64,
    },
    /// Not admitted: the wait exceeds `max_wait` by `retry_after`.
    Denied {
        /// The excess wait.
        retry_after: Nanos,
    },
    /// Not admitted, ever: the cost exceeds the burst.
    TooLarge,
}

impl LendingBucket {
    /// A full bucket for `quota`.
    ///
    /// ```
    /// use tollgate::reference::LendingBucket;
    /// use tollgate::{Nanos, Quota};
    /// let bucket = LendingBucket::new(&Quota::per_minute(3).unwrap());
    /// assert_eq!(bucket.available(Nanos::ZERO), 3);
    /// ```
    #[must_use]
    pub fn new(quota: &Quota) -> LendingBucket {
        LendingBucket {
            level: quota.tolerance_nanos() as i128,
            last: 0,
            capacity: quota.tolerance_nanos() as i128,
            token: quota.emission_interval_nanos() as i128,
            burst: quota.burst(),
            stack: Vec::new(),
            next_id: 1,
        }
    }

    fn level_at(&self, t: i128) -> i128 {
        (self.level + (t - self.last)).min(self.capacity)
    }

    /// Reserves `cost` at `now`, waiting at most `max_wait`.
    pub fn reserve(&mut self, now: Nanos, cost: u64, max_wait: Nanos) -> Booking {
        if cost > self.burst {
            return Booking::TooLarge;
        }
        if cost == 0 {
            return Booking::Ready { at: now, id: 0 };
        }
        let t = now.as_nanos() as i128;
        let level = self.level_at(t) - cost as i128 * self.token;
        let wait = (-level).max(0);
        let max_wait = max_wait.min(Gcra::MAX_WAIT).as_nanos() as i128;
        if wait > max_wait {
            return Booking::Denied {
                retry_after: Nanos::from_nanos((wait - max_wait) as u64),
            };
        }
        let id = self.next_id;
        self.next_id += 1;
        self.stack.push((id, self.level, self.last));
        (self.level, self.last) = (level, t);
        Booking::Ready {
            at: Nanos::from_nanos((t + wait) as u64),
            id,
        }
    }

    /// Cancels admission `id`: `true` if it was the latest admission still standing, whose state
    /// before is then put back.
    pub fn cancel(&mut self, id: u64) -> bool {
        match self.stack.last() {
            Some(&(top, level, last)) if top == id => {
                self.stack.pop();
                (self.level, self.last) = (level, last);
                true
            }
            _ => false,
        }
    }

    /// The whole tokens in the bucket at `now` (none while it is in debt).
    #[must_use]
    pub fn available(&self, now: Nanos) -> u64 {
        (self.level_at(now.as_nanos() as i128).max(0) / self.token) as u64
    }
}
