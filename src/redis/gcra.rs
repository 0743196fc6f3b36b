//! GCRA on Redis, in microseconds.

use core::fmt;
use core::time::Duration;

use super::script::in_units;
use crate::algorithm::{Algorithm, Gcra};
use crate::clock::Nanos;
use crate::decision::Decision;
use crate::error::BuildError;
use crate::quota::Quota;

/// GCRA as a Redis limiter runs it: the emission interval and the tolerance in whole
/// **microseconds**, the unit of Redis's `TIME`, so that the times since the Unix epoch that the
/// script computes (about 1.8 × 10^15 µs) stay exact in Lua's doubles, which hold integers up to
/// 2^53. The interval is the quota's rounded up to a whole microsecond: a quota of more than a
/// million per second is enforced at a million per second, never faster.
///
/// [`decide`](RedisGcra::decide) is the transition the script applies, computed by the crate's
/// own [`Gcra`] in microseconds: the specification the script is tested against, bit for bit.
///
/// ```
/// use std::time::Duration;
/// use tollgate::redis::RedisGcra;
/// use tollgate::Quota;
///
/// let gcra = RedisGcra::new(&Quota::per_second(3).unwrap()).unwrap();
/// // 1 s / 3 = 333 333.3 µs, rounded up.
/// assert_eq!(gcra.emission_interval(), Duration::from_micros(333_334));
/// let (decision, state) = gcra.decide(0, 1_000_000, 3);
/// assert!(decision.is_allowed());
/// assert_eq!(state, 1_000_000 + 3 * 333_334);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RedisGcra {
    /// Microseconds, at least 1.
    interval: u64,
    burst: u64,
}

impl RedisGcra {
    /// The longest tolerance (`burst × emission interval`) a Redis limiter takes: 2^52 µs, about
    /// 142 years, so that a time and a tolerance added up stay exact in the script.
    pub const MAX_TOLERANCE: Duration = Duration::from_micros(1 << 52);

    /// GCRA for `quota`, in microseconds.
    ///
    /// # Errors
    ///
    /// [`BuildError::ToleranceTooLong`] if the burst's tolerance, in whole microseconds, exceeds
    /// [`RedisGcra::MAX_TOLERANCE`].
    ///
    /// ```
    /// use tollgate::redis::RedisGcra;
    /// use tollgate::{BuildError, Quota};
    ///
    /// assert!(RedisGcra::new(&Quota::per_day(3).unwrap()).is_ok());
    /// // A billion per second, in bursts of a billion: a microsecond each, 11.6 days in all.
    /// let fast = Quota::per_second(1_000_000_000).unwrap();
    /// assert!(RedisGcra::new(&fast).is_ok());
    /// let huge = fast.with_burst(1 << 62).unwrap();
    /// assert!(matches!(RedisGcra::new(&huge), Err(BuildError::ToleranceTooLong { .. })));
    /// ```
    pub const fn new(quota: &Quota) -> Result<RedisGcra, BuildError> {
        let interval = quota.emission_interval_nanos().div_ceil(1_000);
        let burst = quota.burst();
        match interval.checked_mul(burst) {
            Some(tolerance) if tolerance <= 1 << 52 => Ok(RedisGcra { interval, burst }),
            _ => Err(BuildError::ToleranceTooLong {
                tolerance: Duration::from_micros(interval.saturating_mul(burst)),
                max: RedisGcra::MAX_TOLERANCE,
            }),
        }
    }

    /// The spacing of requests at the sustained rate, a whole number of microseconds.
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// let gcra = RedisGcra::new(&Quota::per_minute(2).unwrap()).unwrap();
    /// assert_eq!(gcra.emission_interval().as_secs(), 30);
    /// ```
    #[must_use]
    pub const fn emission_interval(&self) -> Duration {
        Duration::from_micros(self.interval)
    }

    /// How far ahead of the clock the schedule may run: `burst × emission_interval`.
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// let gcra = RedisGcra::new(&Quota::per_minute(2).unwrap()).unwrap();
    /// assert_eq!(gcra.tolerance().as_secs(), 60);
    /// ```
    #[must_use]
    pub const fn tolerance(&self) -> Duration {
        Duration::from_micros(self.interval * self.burst)
    }

    /// The largest cost one request can have.
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// let gcra = RedisGcra::new(&Quota::per_minute(2).unwrap().with_burst(5).unwrap()).unwrap();
    /// assert_eq!(gcra.burst(), 5);
    /// ```
    #[must_use]
    pub const fn burst(&self) -> u64 {
        self.burst
    }

    /// The decision on a request of `cost` at `now` (microseconds since the Unix epoch) for a key
    /// whose stored state is `state` (its TAT in microseconds; 0 for an absent key), and the state
    /// to store: what the script replies and writes, computed by [`Gcra`]. A cost above the burst
    /// is denied and writes nothing, as [`Algorithm::decide`] says; the limiters refuse it before
    /// they ask Redis.
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// let gcra = RedisGcra::new(&Quota::per_second(2).unwrap()).unwrap();
    /// let (first, state) = gcra.decide(0, 10_000_000, 2);
    /// assert_eq!((first.remaining(), state), (0, 11_000_000));
    /// let (second, same) = gcra.decide(state, 10_000_000, 1);
    /// assert!(!second.is_allowed());
    /// assert_eq!((second.retry_after().as_millis(), same), (500, state));
    /// ```
    pub fn decide(&self, state: u64, now: u64, cost: u64) -> (Decision, u64) {
        // The crate's GCRA, its nanoseconds read as microseconds: the same arithmetic.
        let micros = Gcra::in_units(self.interval, self.burst);
        let (decision, next) = micros.decide(state, Nanos::from_nanos(now), cost);
        (in_units(decision, RedisGcra::UNIT), next)
    }

    /// A reservation of `cost` at `now` (microseconds since the Unix epoch) for a key whose
    /// stored state is `state`, waiting at most `max_wait` microseconds (capped at 2^52 µs less
    /// the tolerance, which keeps every stored TAT exact in the script): `Ok(wait)` and the
    /// state to store, or `Err(retry_after)` (the wait beyond `max_wait`) and the state
    /// unchanged. What the reservation script replies and writes, computed by
    /// [`Gcra::reserve`](crate::Gcra::reserve).
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// let gcra = RedisGcra::new(&Quota::per_second(2).unwrap()).unwrap();
    /// let (first, state) = gcra.reserve(0, 10_000_000, 2, 0);
    /// assert_eq!((first, state), (Ok(0), 11_000_000));
    /// let (second, state) = gcra.reserve(state, 10_000_000, 1, 1_000_000);
    /// assert_eq!((second, state), (Ok(500_000), 11_500_000));
    /// assert_eq!(gcra.reserve(state, 10_000_000, 1, 0).0, Err(1_000_000));
    /// ```
    pub fn reserve(
        &self,
        state: u64,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> (Result<u64, u64>, u64) {
        use crate::algorithm::Transition;
        let micros = Gcra::in_units(self.interval, self.burst);
        let max_wait = max_wait.min((1 << 52) - self.interval * self.burst);
        let now = Nanos::from_nanos(now);
        match micros.reserve(state, now, cost, Nanos::from_nanos(max_wait)) {
            Transition::Allow { state: next } if cost > 0 => (
                Ok(micros.ready_at(next, now).as_nanos() - now.as_nanos()),
                next,
            ),
            Transition::Allow { .. } => (Ok(0), state),
            Transition::Deny { retry_after } => (Err(retry_after.as_nanos()), state),
        }
    }

    /// The cancel of a reservation that moved a key's state from `before` to `after`, for a key
    /// whose stored state is `state`: `(true, before)` if the state is still `after`, else
    /// `(false, state)`. What the cancel script replies and writes.
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// let gcra = RedisGcra::new(&Quota::per_second(2).unwrap()).unwrap();
    /// assert_eq!(gcra.cancel(11_500_000, [11_000_000, 11_500_000]), (true, 11_000_000));
    /// assert_eq!(gcra.cancel(12_000_000, [11_000_000, 11_500_000]), (false, 12_000_000));
    /// ```
    #[must_use]
    pub fn cancel(&self, state: u64, [before, after]: [u64; 2]) -> (bool, u64) {
        if state == after {
            (true, before)
        } else {
            (false, state)
        }
    }

    /// A lease of budget for a key whose stored state is `state`, at `now` (microseconds since
    /// the Unix epoch), and the state to store: what the lease script replies and writes, the
    /// specification it is tested against. First `give_back` (what the caller's last lease left
    /// unused) is undone, if the key's state is still exactly the `schedule` that lease left:
    /// then no lease or decision has been granted since, and the state becomes the one a
    /// smaller lease would have left. Then up to `want` is granted, as a decision of that cost;
    /// if less than `need` is, the grant says how long until the rest would be. Each of `want`,
    /// `need` and `give_back` is at most the burst, and `need` at most `want`.
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// // 10 per second: 100 ms apart; bursts of 10.
    /// let gcra = RedisGcra::new(&Quota::per_second(10).unwrap()).unwrap();
    /// let now = 1_000_000_000;
    /// let (first, state) = gcra.lease(0, now, 6, 1, 0, 0);
    /// assert_eq!((first.granted, first.schedule, state), (6, now + 600_000, now + 600_000));
    /// // Only 4 are left: a lease of 6 that needs 5 gets 4, and the fifth comes in 100 ms.
    /// let (second, state) = gcra.lease(state, now, 6, 5, 0, 0);
    /// assert_eq!((second.granted, second.retry_after.as_millis()), (4, 100));
    /// // 3 of those given back: nothing was granted since, so they are undone.
    /// let (back, state) = gcra.lease(state, now, 0, 0, 3, second.schedule);
    /// assert_eq!((back.returned, state), (3, now + 700_000));
    /// ```
    pub fn lease(
        &self,
        state: u64,
        now: u64,
        want: u64,
        need: u64,
        give_back: u64,
        schedule: u64,
    ) -> (LeaseGrant, u64) {
        let micros = Gcra::in_units(self.interval, self.burst);
        let mut tat = state;
        let mut returned = 0;
        if give_back > 0 && tat == schedule && tat >= give_back * self.interval {
            tat -= give_back * self.interval;
            returned = give_back;
        }
        let now = Nanos::from_nanos(now);
        let available = micros.decide(tat, now, 0).0.remaining();
        let granted = want.min(available);
        if granted > 0 {
            tat = micros.decide(tat, now, granted).1;
        }
        let retry_after = if granted < need {
            micros.decide(tat, now, need - granted).0.retry_after()
        } else {
            Duration::ZERO
        };
        let grant = LeaseGrant {
            granted,
            returned,
            retry_after: Duration::from_micros(retry_after.as_nanos() as u64),
            schedule: tat,
        };
        (grant, tat)
    }

    /// The TAT a script stores for a key written under `self` and read at `now` (microseconds
    /// since the Unix epoch) by a limiter whose quota is now `to`'s
    /// ([`set_quota`](super::RedisKeyedRateLimiter::set_quota)):
    /// [`Gcra::carry_over`](crate::Algorithm::carry_over) in microseconds, capped at 2^53 - 1
    /// (the script's exact range).
    ///
    /// ```
    /// # use tollgate::{redis::RedisGcra, Quota};
    /// let fast = RedisGcra::new(&Quota::per_second(100).unwrap()).unwrap();
    /// let slow = RedisGcra::new(&Quota::per_second(10).unwrap()).unwrap();
    /// let (_, state) = fast.decide(0, 10_000_000, 40); // 60 left
    /// let carried = fast.carry_over(state, 10_000_000, &slow);
    /// assert_eq!(slow.decide(carried, 10_000_000, 0).0.remaining(), 10);
    /// ```
    #[must_use]
    pub fn carry_over(&self, state: u64, now: u64, to: &RedisGcra) -> u64 {
        use crate::algorithm::Algorithm;
        let (from, to) = (
            Gcra::in_units(self.interval, self.burst),
            Gcra::in_units(to.interval, to.burst),
        );
        from.carry_over(state, Nanos::from_nanos(now), &to)
            .min((1 << 53) - 1)
    }

    /// Nanoseconds in the unit of time the script computes in.
    pub(super) const UNIT: u64 = 1_000;

    /// The algorithm with the parameters [`args`](Self::args) named, as a validated one had.
    pub(super) const fn from_parts(interval: u64, burst: u64) -> RedisGcra {
        RedisGcra { interval, burst }
    }

    /// The script's parameters (`lua/gcra.lua`): the emission interval, the tolerance and the
    /// burst.
    pub(super) const fn args(&self) -> [u64; 3] {
        [self.interval, self.interval * self.burst, self.burst]
    }
}

/// What a lease round trip did ([`RedisGcra::lease`]).
///
/// ```
/// # use tollgate::{redis::RedisGcra, Quota};
/// let gcra = RedisGcra::new(&Quota::per_second(10).unwrap()).unwrap();
/// let (grant, _) = gcra.lease(0, 5_000_000, 4, 4, 0, 0);
/// assert_eq!((grant.granted, grant.returned), (4, 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LeaseGrant {
    /// The budget granted, at most what was wanted.
    pub granted: u64,
    /// The budget given back: all that was offered, or none.
    pub returned: u64,
    /// When less than needed was granted, how long until the rest would be; else zero.
    pub retry_after: Duration,
    /// The key's state after the lease (its TAT, in microseconds since the Unix epoch): what a
    /// later give-back of this lease names.
    pub schedule: u64,
}

/// The times as durations.
///
/// ```
/// # use tollgate::{redis::RedisGcra, Quota};
/// let gcra = RedisGcra::new(&Quota::per_second(4).unwrap().with_burst(2).unwrap()).unwrap();
/// assert_eq!(
///     format!("{gcra:?}"),
///     "RedisGcra { emission_interval: 250ms, tolerance: 500ms, burst: 2 }"
/// );
/// ```
impl fmt::Debug for RedisGcra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisGcra")
            .field("emission_interval", &self.emission_interval())
            .field("tolerance", &self.tolerance())
            .field("burst", &self.burst())
            .finish()
    }
}
