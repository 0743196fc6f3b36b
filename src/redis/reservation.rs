//! Reservations on Redis: a GCRA request admitted now into a key's shared schedule, to proceed
//! at its turn.

use core::fmt;
use core::time::Duration;

use ::redis::aio::ConnectionLike;
use tokio::time::Instant;

use super::limiter::Remote;
use super::Error;
use super::RedisGcra;

/// A key's turn: its TAT before and after the reservation, and the GCRA it was made under.
pub(super) type Turn = ([u64; 2], RedisGcra);

/// A request admitted into a Redis limiter's schedule (or into several, all or nothing), to
/// proceed after [`delay`](RedisReservation::delay): made by
/// [`RedisKeyedRateLimiter::reserve_key`](super::RedisKeyedRateLimiter::reserve_key),
/// [`RedisRateLimiter::reserve`](super::RedisRateLimiter::reserve) and
/// [`reserve_all`](super::reserve_all).
///
/// It is the local [`Reservation`](crate::Reservation) on the key's shared state: every server
/// that uses the key queues behind it, and [`cancel`](RedisReservation::cancel) gives it back
/// when nothing was admitted for the key since (the same rule, applied by a script). The turn is
/// measured on the Redis server's clock and waited for on this process's: the wait the script
/// computed, from the moment its reply arrived.
///
/// Dropping it keeps the place; the future of [`ready`](RedisReservation::ready) gives it back
/// when dropped before its time (with a task spawned on the current tokio runtime, since a
/// cancel is a round trip).
#[must_use = "a reservation holds a place in the schedule: wait for it, or cancel it"]
pub struct RedisReservation<C> {
    /// The connection of the first layer, where the cancel script runs.
    remote: Remote<C>,
    /// Each key's name and its TAT before and after, with the algorithm it was reserved under,
    /// if the reservation was recorded there (not by the fallback, nor for a cost of 0).
    held: Vec<(Vec<u8>, Option<Turn>)>,
    ready_at: Instant,
}

impl<C> RedisReservation<C> {
    pub(super) fn new(
        remote: Remote<C>,
        held: Vec<(Vec<u8>, Option<Turn>)>,
        wait: Duration,
    ) -> RedisReservation<C> {
        RedisReservation {
            remote,
            held,
            ready_at: Instant::now() + wait,
        }
    }

    /// Whether anything was recorded, to give back.
    fn recorded(&self) -> bool {
        self.held.iter().any(|(_, held)| held.is_some())
    }

    /// How long the request must still wait for its turn: zero once it may proceed.
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// use std::time::Duration;
    /// let turn = limiter.reserve_key("alice", 1, Duration::from_secs(1)).await?;
    /// if turn.delay() > Duration::from_millis(500) {
    ///     turn.cancel().await?; // too slow for this request after all
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn delay(&self) -> Duration {
        self.ready_at.saturating_duration_since(Instant::now())
    }

    /// The moment, on tokio's clock, at which the request may proceed.
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let turn = limiter.reserve_key("alice", 1, std::time::Duration::from_secs(1)).await?;
    /// tokio::time::sleep_until(turn.ready_at()).await; // or `turn.ready().await`
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn ready_at(&self) -> Instant {
        self.ready_at
    }
}

impl<C: ConnectionLike + Clone + Send + Sync> RedisReservation<C> {
    /// Gives the reservation back where nothing was admitted for its key since (see
    /// [`Reservation::cancel`](crate::Reservation::cancel)), each key in the reverse order of
    /// the reservation, in one round trip: `Ok(true)` if every key's was given back,
    /// `Ok(false)` if not or if it was never recorded (a cost of 0, or decided by the fallback).
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] if Redis cannot be asked or refuses the script; [`Error::Reply`] if it
    /// does not reply within the limiter's timeout (the place may then have been given back or
    /// not).
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let turn = limiter.reserve_key("alice", 1, std::time::Duration::from_secs(1)).await?;
    /// let given_back = turn.cancel().await?;
    /// # let _ = given_back;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(self) -> Result<bool, Error> {
        self.cancel_with(None).await
    }

    /// The cancel script on every recorded key, in reverse order: all given back?
    async fn cancel_with(self, now: Option<u64>) -> Result<bool, Error> {
        let held: Vec<(&[u8], Turn)> = self
            .held
            .iter()
            .rev()
            .filter_map(|(key, held)| held.map(|held| (&key[..], held)))
            .collect();
        if held.is_empty() {
            return Ok(false);
        }
        let given = self.remote.cancel(&held, now).await?;
        Ok(given.len() == self.held.len() && given.iter().all(|&g| g))
    }

    /// [`cancel`](RedisReservation::cancel) at the time `now` (microseconds since the Unix
    /// epoch), for tests that replay the scripts against [`RedisGcra::cancel`](super::RedisGcra::cancel).
    ///
    /// # Errors
    ///
    /// As for [`cancel`](RedisReservation::cancel).
    #[cfg(feature = "reference")]
    pub async fn cancel_at(self, now: u64) -> Result<bool, Error> {
        self.cancel_with(Some(now)).await
    }

    /// Each key's TAT before and after the reservation, where it was recorded: for tests.
    #[cfg(feature = "reference")]
    #[must_use]
    pub fn held(&self) -> Vec<Option<[u64; 2]>> {
        self.held
            .iter()
            .map(|(_, held)| held.map(|h| h.0))
            .collect()
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisReservation<C> {
    /// Waits on tokio's timer until the request's turn. Dropped before then, the future gives
    /// the place back (a cancel spawned on the current runtime).
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let turn = limiter.reserve_key("alice", 1, std::time::Duration::from_secs(1)).await?;
    /// turn.ready().await;
    /// // ... send the request ...
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ready(self) {
        let ready_at = self.ready_at;
        let mut pending = CancelOnDrop(Some(self));
        tokio::time::sleep_until(ready_at).await;
        pending.0 = None;
    }
}

/// A reservation that a dropped future gives back.
struct CancelOnDrop<C: ConnectionLike + Clone + Send + Sync + 'static>(Option<RedisReservation<C>>);

impl<C: ConnectionLike + Clone + Send + Sync + 'static> Drop for CancelOnDrop<C> {
    fn drop(&mut self) {
        if let Some(reservation) = self.0.take() {
            if reservation.recorded() {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        let _ = reservation.cancel().await;
                    });
                }
            }
        }
    }
}

/// The keys and the turn.
impl<C> fmt::Debug for RedisReservation<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<_> = self
            .held
            .iter()
            .map(|(key, _)| String::from_utf8_lossy(key))
            .collect();
        f.debug_struct("RedisReservation")
            .field("keys", &keys)
            .field("ready_at", &self.ready_at)
            .field("recorded", &self.recorded())
            .finish()
    }
}
