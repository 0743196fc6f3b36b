//! Quotas: how much, over what period, with what burst. Validated once, integers only.
//!
//! A [`Quota`] says "`limit` requests per `period`", plus a `burst`: how many requests a fresh
//! limiter admits at once (by default, `limit`). It is validated when it is built, so a limiter
//! never meets a zero rate, a zero period or a value that would overflow its nanosecond
//! arithmetic on the decision path.
//!
//! # Rounding
//!
//! Every algorithm works in whole nanoseconds. GCRA spaces requests by the *emission interval*
//! `T = period / limit`, which is rounded **up** to a whole nanosecond: the sustained rate that is
//! enforced, `1 / T`, is never more than `limit / period`, and falls short of it by less than one
//! part in `T` (less than 0.1% for any interval of a microsecond or more). The burst tolerance is
//! `burst × T`, exactly. Window algorithms count requests per `period` and do not round at all.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::Quota;
//!
//! // 3 per second: one request every 333 333 333.3 ns, rounded up, so that no second ever holds
//! // more than 3.
//! let quota = Quota::per_second(3).unwrap();
//! assert_eq!(quota.emission_interval(), Duration::from_nanos(333_333_334));
//! assert_eq!(quota.tolerance(), Duration::from_nanos(3 * 333_333_334));
//! ```

use core::fmt;
use core::time::Duration;

/// The longest supported period: 2^61 ns, about 73 years.
///
/// Together with [`Quota::MAX_TOLERANCE`] and [`Nanos::MAX`](crate::Nanos::MAX) this bounds every
/// sum on the decision path below `u64::MAX`.
const MAX_PERIOD_NANOS: u64 = 1 << 61;
/// The largest burst tolerance (`burst × emission interval`): 2^62 ns, about 146 years.
const MAX_TOLERANCE_NANOS: u64 = 1 << 62;

/// A rate limit: `limit` requests per `period`, admitting bursts of up to `burst` at once.
///
/// Build one with [`Quota::per_second`], [`Quota::per_minute`], [`Quota::per_hour`] or
/// [`Quota::new`], then optionally set the burst with [`Quota::with_burst`]. All of them are
/// `const fn`, so a quota can be a constant.
///
/// ```
/// use std::time::Duration;
/// use tollgate::Quota;
///
/// # fn main() -> Result<(), tollgate::QuotaError> {
/// // 100 requests per second on average, at most 20 at once.
/// let api = Quota::per_second(100)?.with_burst(20)?;
/// assert_eq!(api.emission_interval(), Duration::from_millis(10));
///
/// // 5 logins per 15 minutes.
/// let login = Quota::new(5, Duration::from_secs(15 * 60))?;
/// assert_eq!(login.burst(), 5);
///
/// // Bad input is an error that names the bad value, never a panic.
/// let err = Quota::per_second(0).unwrap_err();
/// assert_eq!(err.to_string(), "invalid quota: the limit is 0; it must be at least 1");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u64,
    period: u64,
    burst: u64,
    emission_interval: u64,
}

impl Quota {
    /// The largest burst tolerance a quota may have (`burst × emission_interval`), about 146 years.
    ///
    /// ```
    /// use tollgate::{Quota, QuotaError};
    ///
    /// // One request per second: the burst may reach 2^62 ns / 1 s, a little over 4.6 billion.
    /// let quota = Quota::per_second(1).unwrap();
    /// let largest = (Quota::MAX_TOLERANCE.as_nanos() / quota.emission_interval().as_nanos()) as u64;
    /// assert_eq!(largest, 4_611_686_018);
    /// assert_eq!(quota.with_burst(largest).unwrap().burst(), largest);
    /// assert!(matches!(
    ///     quota.with_burst(largest + 1),
    ///     Err(QuotaError::BurstTooLarge { burst, .. }) if burst == largest + 1
    /// ));
    /// ```
    pub const MAX_TOLERANCE: Duration = Duration::from_nanos(MAX_TOLERANCE_NANOS);
    /// The longest period a quota may have, 2^61 ns: about 73 years.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Quota, QuotaError};
    ///
    /// assert_eq!(Quota::new(1, Quota::MAX_PERIOD).unwrap().period(), Quota::MAX_PERIOD);
    /// let longer = Quota::MAX_PERIOD + Duration::from_nanos(1);
    /// assert_eq!(Quota::new(1, longer), Err(QuotaError::PeriodTooLong { period: longer }));
    /// ```
    pub const MAX_PERIOD: Duration = Duration::from_nanos(MAX_PERIOD_NANOS);

    /// `limit` requests per `period`, with a burst of `limit`.
    ///
    /// # Errors
    ///
    /// A zero `limit` or `period`, a period longer than [`Quota::MAX_PERIOD`], or more than one
    /// request per nanosecond.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Quota;
    ///
    /// let q = Quota::new(3, Duration::from_secs(60)).unwrap();
    /// assert_eq!(q.emission_interval(), Duration::from_secs(20));
    /// assert!(Quota::new(3, Duration::ZERO).is_err());
    /// ```
    pub const fn new(limit: u64, period: Duration) -> Result<Quota, QuotaError> {
        if limit == 0 {
            return Err(QuotaError::ZeroLimit);
        }
        let period_nanos = period.as_nanos();
        if period_nanos == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        if period_nanos > MAX_PERIOD_NANOS as u128 {
            return Err(QuotaError::PeriodTooLong { period });
        }
        let period_nanos = period_nanos as u64;
        if limit > period_nanos {
            return Err(QuotaError::RateTooHigh { limit, period });
        }
        let quota = Quota {
            limit,
            period: period_nanos,
            burst: limit,
            emission_interval: period_nanos.div_ceil(limit),
        };
        // The default burst is `limit`: its tolerance is below `period + limit <= 2 × MAX_PERIOD`,
        // which is MAX_TOLERANCE, so this cannot fail; checking keeps the invariant local.
        quota.with_burst(limit)
    }

    /// `limit` requests per second, with a burst of `limit`.
    ///
    /// ```
    /// # fn main() -> Result<(), tollgate::QuotaError> {
    /// let q = tollgate::Quota::per_second(50)?;
    /// assert_eq!(q.limit(), 50);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// A zero `limit`, or more than 10^9 per second.
    pub const fn per_second(limit: u64) -> Result<Quota, QuotaError> {
        Quota::new(limit, Duration::from_secs(1))
    }

    /// `limit` requests per minute, with a burst of `limit`.
    ///
    /// ```
    /// # fn main() -> Result<(), tollgate::QuotaError> {
    /// let q = tollgate::Quota::per_minute(600)?;
    /// assert_eq!(q.emission_interval(), std::time::Duration::from_millis(100));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// A zero `limit`, or more than one per nanosecond.
    pub const fn per_minute(limit: u64) -> Result<Quota, QuotaError> {
        Quota::new(limit, Duration::from_secs(60))
    }

    /// `limit` requests per hour, with a burst of `limit`.
    ///
    /// ```
    /// # fn main() -> Result<(), tollgate::QuotaError> {
    /// let q = tollgate::Quota::per_hour(3600)?;
    /// assert_eq!(q.emission_interval(), std::time::Duration::from_secs(1));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// A zero `limit`, or more than one per nanosecond.
    pub const fn per_hour(limit: u64) -> Result<Quota, QuotaError> {
        Quota::new(limit, Duration::from_secs(3600))
    }

    /// `limit` requests per day (86 400 seconds, not a calendar day), with a burst of `limit`:
    /// for low-frequency limits, such as password resets, usually with
    /// [`KeyedSlidingLog`](crate::KeyedSlidingLog), which admits at most `limit` in any 86 400
    /// seconds.
    ///
    /// ```
    /// # fn main() -> Result<(), tollgate::QuotaError> {
    /// let q = tollgate::Quota::per_day(24)?;
    /// assert_eq!(q.emission_interval(), std::time::Duration::from_secs(3600));
    /// assert_eq!(q.period(), std::time::Duration::from_secs(86_400));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// A zero `limit`, or more than one per nanosecond.
    pub const fn per_day(limit: u64) -> Result<Quota, QuotaError> {
        Quota::new(limit, Duration::from_secs(86_400))
    }

    /// The same rate with a different burst: how many requests a fresh limiter admits at once.
    ///
    /// The burst only matters to GCRA (and the token and leaky buckets it stands for); window
    /// algorithms admit `limit` per window whatever the burst.
    ///
    /// ```
    /// # fn main() -> Result<(), tollgate::QuotaError> {
    /// let q = tollgate::Quota::per_second(5)?.with_burst(10)?;
    /// assert_eq!((q.limit(), q.burst()), (5, 10));
    /// assert!(tollgate::Quota::per_second(5)?.with_burst(0).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// A zero burst, or one whose tolerance `burst × emission_interval` exceeds
    /// [`Quota::MAX_TOLERANCE`].
    pub const fn with_burst(self, burst: u64) -> Result<Quota, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        match burst.checked_mul(self.emission_interval) {
            Some(tolerance) if tolerance <= MAX_TOLERANCE_NANOS => Ok(Quota { burst, ..self }),
            _ => Err(QuotaError::BurstTooLarge {
                burst,
                emission_interval: Duration::from_nanos(self.emission_interval),
            }),
        }
    }

    /// Requests admitted per period.
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_hour(7).unwrap().limit(), 7);
    /// ```
    #[must_use]
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The period that `limit` applies to.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(tollgate::Quota::per_minute(7).unwrap().period(), Duration::from_secs(60));
    /// ```
    #[must_use]
    pub const fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// Requests a fresh limiter admits at once.
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_minute(7).unwrap().burst(), 7);
    /// ```
    #[must_use]
    pub const fn burst(&self) -> u64 {
        self.burst
    }

    /// The spacing of requests at the sustained rate, `period / limit` rounded up to a whole
    /// nanosecond (see [Rounding](self#rounding)).
    ///
    /// ```
    /// use std::time::Duration;
    /// // 1 s / 3 = 333_333_333.3 ns, rounded up: never faster than 3 per second.
    /// let q = tollgate::Quota::per_second(3).unwrap();
    /// assert_eq!(q.emission_interval(), Duration::from_nanos(333_333_334));
    /// ```
    #[must_use]
    pub const fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.emission_interval)
    }

    /// `burst × emission_interval`: how far ahead of real time a GCRA schedule may run.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = tollgate::Quota::per_second(5).unwrap().with_burst(10).unwrap();
    /// assert_eq!(q.tolerance(), Duration::from_secs(2));
    /// ```
    #[must_use]
    pub const fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.tolerance_nanos())
    }

    pub(crate) const fn period_nanos(&self) -> u64 {
        self.period
    }

    pub(crate) const fn emission_interval_nanos(&self) -> u64 {
        self.emission_interval
    }

    pub(crate) const fn tolerance_nanos(&self) -> u64 {
        // Checked against MAX_TOLERANCE in `with_burst`, the only place a burst is set.
        self.burst * self.emission_interval
    }
}

/// The limit and burst as counts, the times as durations.
///
/// ```
/// let quota = tollgate::Quota::per_second(4).unwrap().with_burst(2).unwrap();
/// assert_eq!(
///     format!("{quota:?}"),
///     "Quota { limit: 4, period: 1s, burst: 2, emission_interval: 250ms }"
/// );
/// ```
impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("limit", &self.limit)
            .field("period", &self.period())
            .field("burst", &self.burst)
            .field("emission_interval", &self.emission_interval())
            .finish()
    }
}

/// Why a [`Quota`] (or an algorithm built from one) cannot be represented.
///
/// Each message names the offending value.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Quota, QuotaError};
///
/// let err = Quota::new(2_000_000_000, Duration::from_secs(1)).unwrap_err();
/// assert!(matches!(err, QuotaError::RateTooHigh { limit: 2_000_000_000, .. }));
/// println!("{err}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The limit is 0: nothing could ever be admitted.
    ZeroLimit,
    /// The period is zero.
    ZeroPeriod,
    /// The burst is 0: nothing could ever be admitted.
    ZeroBurst,
    /// The period is longer than [`Quota::MAX_PERIOD`].
    PeriodTooLong {
        /// The period asked for.
        period: Duration,
    },
    /// More than one request per nanosecond: the emission interval would be below the clock's
    /// resolution.
    RateTooHigh {
        /// The limit asked for.
        limit: u64,
        /// The period asked for.
        period: Duration,
    },
    /// `burst × emission_interval` exceeds [`Quota::MAX_TOLERANCE`].
    BurstTooLarge {
        /// The burst asked for.
        burst: u64,
        /// The quota's emission interval.
        emission_interval: Duration,
    },
    /// A window algorithm's packed word cannot hold this limit together with a window index
    /// that never wraps.
    WindowLimitTooLarge {
        /// The algorithm, for the message.
        algorithm: &'static str,
        /// The limit asked for.
        limit: u64,
        /// The window (the quota's period).
        period: Duration,
        /// The largest limit that fits with this period: 0 when none does (the sliding window's
        /// windows of 1 or 2 ns, the fixed window's of 1 ns).
        max_limit: u64,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid quota: ")?;
        match *self {
            QuotaError::ZeroLimit => f.write_str("the limit is 0; it must be at least 1"),
            QuotaError::ZeroPeriod => f.write_str("the period is zero; it must be at least 1ns"),
            QuotaError::ZeroBurst => f.write_str("the burst is 0; it must be at least 1"),
            QuotaError::PeriodTooLong { period } => write!(
                f,
                "the period of {period:?} is longer than the longest supported, {:?}",
                Quota::MAX_PERIOD
            ),
            QuotaError::RateTooHigh { limit, period } => write!(
                f,
                "a limit of {limit} per {period:?} is more than one request per nanosecond"
            ),
            QuotaError::BurstTooLarge {
                burst,
                emission_interval,
            } => write!(
                f,
                "a burst of {burst} at one request per {emission_interval:?} spans more than {:?}",
                Quota::MAX_TOLERANCE
            ),
            QuotaError::WindowLimitTooLarge {
                algorithm,
                limit,
                period,
                max_limit,
            } => {
                write!(
                    f,
                    "the {algorithm} cannot pack a limit of {limit} per {period:?} window; "
                )?;
                match max_limit {
                    0 => f.write_str("no limit fits with a window this short")?,
                    max => write!(f, "at most {max} fits with this window")?,
                }
                f.write_str(" (use GCRA, or a longer window)")
            }
        }
    }
}

impl std::error::Error for QuotaError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FixedWindow, SlidingWindow};

    #[test]
    fn constructors_agree() {
        assert_eq!(
            Quota::per_second(10),
            Quota::new(10, Duration::from_secs(1))
        );
        assert_eq!(
            Quota::per_minute(10),
            Quota::new(10, Duration::from_secs(60))
        );
        assert_eq!(
            Quota::per_hour(10),
            Quota::new(10, Duration::from_secs(3600))
        );
        assert_eq!(
            Quota::per_day(10),
            Quota::new(10, Duration::from_secs(24 * 3600))
        );
    }

    #[test]
    fn emission_interval_rounds_up() {
        // 60 s / 7 = 8_571_428_571.43 ns: rounding up means never faster than 7 per minute.
        let q = Quota::per_minute(7).unwrap();
        assert_eq!(q.emission_interval_nanos(), 8_571_428_572);
        assert!(q.emission_interval_nanos() * 7 >= q.period_nanos());
        // Exact divisions are not rounded.
        assert_eq!(
            Quota::per_second(4).unwrap().emission_interval_nanos(),
            250_000_000
        );
        // One per nanosecond is the fastest representable rate.
        let fastest = Quota::per_second(1_000_000_000).unwrap();
        assert_eq!(fastest.emission_interval_nanos(), 1);
    }

    #[test]
    fn zero_values_are_errors() {
        assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroLimit));
        assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
        assert_eq!(
            Quota::per_second(1).unwrap().with_burst(0),
            Err(QuotaError::ZeroBurst)
        );
        // A sub-nanosecond period is zero nanoseconds.
        assert_eq!(
            Quota::new(1, Duration::from_nanos(0)),
            Err(QuotaError::ZeroPeriod)
        );
    }

    #[test]
    fn overflowing_values_are_errors() {
        assert_eq!(
            Quota::per_second(1_000_000_001),
            Err(QuotaError::RateTooHigh {
                limit: 1_000_000_001,
                period: Duration::from_secs(1)
            })
        );
        let long = Duration::from_nanos(MAX_PERIOD_NANOS + 1);
        assert_eq!(
            Quota::new(1, long),
            Err(QuotaError::PeriodTooLong { period: long })
        );
        assert_eq!(
            Quota::new(1, Duration::MAX),
            Err(QuotaError::PeriodTooLong {
                period: Duration::MAX
            })
        );
        // The longest period is accepted, and so is its default burst.
        let q = Quota::new(1, Quota::MAX_PERIOD).unwrap();
        assert_eq!(q.tolerance(), Quota::MAX_PERIOD);
        // A burst whose tolerance passes 2^62 ns is refused, also when the product overflows.
        let q = Quota::per_second(1).unwrap();
        let max_burst = MAX_TOLERANCE_NANOS / 1_000_000_000;
        assert_eq!(q.with_burst(max_burst).unwrap().burst(), max_burst);
        assert!(matches!(
            q.with_burst(max_burst + 1),
            Err(QuotaError::BurstTooLarge { burst, .. }) if burst == max_burst + 1
        ));
        assert!(matches!(
            q.with_burst(u64::MAX),
            Err(QuotaError::BurstTooLarge { .. })
        ));
    }

    #[test]
    fn messages_name_the_bad_value() {
        let cases = [
            (Quota::per_second(0).unwrap_err(), "the limit is 0"),
            (
                Quota::per_second(1_500_000_000).unwrap_err(),
                "a limit of 1500000000 per 1s",
            ),
            (
                Quota::per_second(1)
                    .unwrap()
                    .with_burst(u64::MAX)
                    .unwrap_err(),
                "a burst of 18446744073709551615 at one request per 1s",
            ),
            (
                Quota::new(1, Duration::from_secs(1 << 40)).unwrap_err(),
                "the period of 1099511627776s",
            ),
            (
                SlidingWindow::new(&Quota::per_second(32_768).unwrap()).unwrap_err(),
                "a limit of 32768 per 1s window; at most 32767 fits with this window",
            ),
            (
                SlidingWindow::new(&Quota::new(1, Duration::from_nanos(2)).unwrap()).unwrap_err(),
                "a limit of 1 per 2ns window; no limit fits with a window this short",
            ),
        ];
        for (err, needle) in cases {
            let msg = err.to_string();
            assert!(msg.contains(needle), "{msg:?} should contain {needle:?}");
        }
        // One message whole, for how its parts are put together (and the fixed window's refusal,
        // which the cases above leave out).
        assert_eq!(
            FixedWindow::new(&Quota::new(1, Duration::from_nanos(1)).unwrap())
                .unwrap_err()
                .to_string(),
            "invalid quota: the fixed-window counter cannot pack a limit of 1 per 1ns window; \
             no limit fits with a window this short (use GCRA, or a longer window)"
        );
    }

    #[test]
    fn quotas_can_be_constants() {
        const Q: Quota = match Quota::per_second(10) {
            Ok(q) => q,
            Err(_) => panic!("valid"),
        };
        assert_eq!(Q.limit(), 10);
    }
}
