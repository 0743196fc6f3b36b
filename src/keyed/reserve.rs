//! Shaping for keyed GCRA limiters: reservations and waiting per key.

use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;

use super::KeyedRateLimiter;
use crate::algorithm::{Algorithm, Gcra};
use crate::clock::{Clock, Nanos};
use crate::decision::{CheckError, InsufficientCapacity};
use crate::layers::Turn;
use crate::reservation::Reservation;

/// Shaping per key: reservations and waiting, for GCRA, whose schedule can run ahead of the
/// clock. See the [`reservation`](crate::reservation) module for what a reservation promises and
/// what a cancel gives back.
impl<K: ?Sized, C: Clock, S: BuildHasher> KeyedRateLimiter<K, Gcra, C, S> {
    /// Admits a request of `cost` for `key` now into the key's schedule, to proceed at its turn:
    /// at once if it fits, else after the key's requests before it, as long as that wait is at
    /// most `max_wait`. A `max_wait` of zero is [`check_key_n`](Self::check_key_n). A key with a
    /// reservation ahead of the clock is being limited, so the table never evicts it.
    ///
    /// # Errors
    ///
    /// [`CheckError::Denied`] if the wait would exceed `max_wait` (nothing is reserved), or if
    /// the key is new and the table has no room for it ([`Denied::is_overflow`](crate::Denied::is_overflow));
    /// [`CheckError::InsufficientCapacity`] if the cost exceeds the burst.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let per_user = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(4).unwrap()))
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// per_user.check_key_n("alice", 4).unwrap();
    /// let turn = per_user.reserve_key("alice", 1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(turn.delay(), Duration::from_millis(250));
    /// assert_eq!(per_user.reserve_key("bob", 1, Duration::ZERO).unwrap().delay(), Duration::ZERO);
    /// ```
    #[inline]
    pub fn reserve_key<Q>(
        &self,
        key: &Q,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'_, C>, CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        let layer = self.layer(key);
        InsufficientCapacity::check(cost, self.algorithm().capacity())?;
        let now = self.clock.now();
        // A layer's reservation step: the reservation is built once, after the loop.
        let (hold, ready_at) = Turn::hold(&layer, now, cost, Nanos::from_duration(max_wait))?;
        let reservation = Reservation::keyed(
            &self.table,
            layer.probe(),
            // A cancel gives back only in the generation the hold was made in.
            (self.quotas.counter(), hold.generation),
            &self.clock,
            (hold.before, hold.after),
            ready_at,
        );
        Ok(if hold.recorded {
            reservation
        } else {
            reservation.unrecorded()
        })
    }

    /// Waits, blocking the thread, until a request of `cost` for `key` may proceed, if that is
    /// at most `max_wait` from now: [`reserve_key`](Self::reserve_key), then
    /// [`Reservation::wait`].
    ///
    /// # Errors
    ///
    /// As [`reserve_key`](Self::reserve_key), at once, without waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let per_host = KeyedRateLimiter::<str>::gcra(Quota::per_second(200).unwrap().with_burst(1).unwrap(), 100).unwrap();
    /// for _ in 0..3 {
    ///     per_host.wait_key("example.org", 1, Duration::from_secs(1)).unwrap(); // 5 ms apart
    /// }
    /// ```
    pub fn wait_key<Q>(&self, key: &Q, cost: u64, max_wait: Duration) -> Result<(), CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.reserve_key(key, cost, max_wait)?.wait();
        Ok(())
    }

    /// Waits on tokio's timer until a request of `cost` for `key` may proceed, if that is at
    /// most `max_wait` from now: [`reserve_key`](Self::reserve_key), then
    /// [`Reservation::ready`]. Dropped before it completes, the future gives its place back.
    ///
    /// # Errors
    ///
    /// As [`reserve_key`](Self::reserve_key), at once, without waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tollgate::CheckError> {
    /// let per_host = KeyedRateLimiter::<str>::gcra(Quota::per_second(200).unwrap().with_burst(1).unwrap(), 100).unwrap();
    /// for _ in 0..3 {
    ///     per_host.until_key_ready("example.org", 1, Duration::from_secs(1)).await?; // 5 ms apart
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn until_key_ready<Q>(
        &self,
        key: &Q,
        cost: u64,
        max_wait: Duration,
    ) -> Result<(), CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.reserve_key(key, cost, max_wait)?.ready().await;
        Ok(())
    }
}
