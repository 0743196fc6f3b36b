//! The sliding-window counter on Redis, in milliseconds.

use core::fmt;
use core::time::Duration;

use super::script::in_units;
use super::window::in_millis;
use crate::algorithm::SlidingWindow;
use crate::clock::Nanos;
use crate::decision::Decision;
use crate::error::BuildError;
use crate::quota::Quota;

/// The sliding-window counter as a Redis limiter runs it: windows of whole **milliseconds**
/// since the Unix epoch (the quota's period rounded up, never shorter), each key's state the
/// index of the window it was last written in and the previous and current counts, stored as
/// `window:previous:current`.
///
/// [`decide`](RedisSlidingWindow::decide) is the transition the script applies, computed by the
/// crate's own [`SlidingWindow`] in milliseconds: the specification the script is tested
/// against, bit for bit. Unlike the local counter, whose three fields share one 64-bit word,
/// the limit is bounded only by the script's exact arithmetic: `limit × window` at most 2^52
/// milliseconds (a million per hour, 52 million per day).
///
/// ```
/// use std::time::Duration;
/// use tollgate::redis::RedisSlidingWindow;
/// use tollgate::Quota;
///
/// let window = RedisSlidingWindow::new(&Quota::per_minute(10).unwrap()).unwrap();
/// assert_eq!(window.window(), Duration::from_secs(60));
/// // All 10 in the first minute (the times are microseconds since the Unix epoch) ...
/// let (full, state) = window.decide([0, 0, 0], 30_000_000, 10);
/// assert_eq!((full.remaining(), state), (0, [0, 0, 10]));
/// // ... and halfway through the next, half of them still weigh: 5 fit, not 6.
/// assert!(!window.decide(state, 90_000_000, 6).0.is_allowed());
/// let (half, state) = window.decide(state, 90_000_000, 5);
/// assert_eq!((half.is_allowed(), state), (true, [1, 10, 5]));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RedisSlidingWindow {
    /// Milliseconds, at least 1.
    period: u64,
    limit: u64,
}

impl RedisSlidingWindow {
    const NAME: &'static str = "sliding-window counter on Redis";

    /// The sliding-window counter for `quota`, in milliseconds.
    ///
    /// # Errors
    ///
    /// [`BuildError::Quota`] ([`QuotaError::WindowLimitTooLarge`](crate::QuotaError)) if
    /// `limit × window` exceeds 2^52 milliseconds; the error names the largest limit that fits.
    ///
    /// ```
    /// use tollgate::redis::RedisSlidingWindow;
    /// use tollgate::Quota;
    ///
    /// assert!(RedisSlidingWindow::new(&Quota::per_day(50_000_000).unwrap()).is_ok());
    /// assert!(RedisSlidingWindow::new(&Quota::per_day(60_000_000).unwrap()).is_err());
    /// ```
    pub const fn new(quota: &Quota) -> Result<RedisSlidingWindow, BuildError> {
        match in_millis(RedisSlidingWindow::NAME, quota) {
            Ok((period, limit)) => Ok(RedisSlidingWindow { period, limit }),
            Err(err) => Err(err),
        }
    }

    /// The window's length, a whole number of milliseconds.
    ///
    /// ```
    /// # use tollgate::{redis::RedisSlidingWindow, Quota};
    /// let window = RedisSlidingWindow::new(&Quota::per_second(3).unwrap()).unwrap();
    /// assert_eq!(window.window().as_millis(), 1_000);
    /// ```
    #[must_use]
    pub const fn window(&self) -> Duration {
        Duration::from_millis(self.period)
    }

    /// The limit per window: the largest cost one request can have.
    ///
    /// ```
    /// # use tollgate::{redis::RedisSlidingWindow, Quota};
    /// let window = RedisSlidingWindow::new(&Quota::per_second(3).unwrap()).unwrap();
    /// assert_eq!(window.limit(), 3);
    /// ```
    #[must_use]
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The decision on a request of `cost` at `now` (microseconds since the Unix epoch, counted
    /// in whole milliseconds) for a key whose stored state is `state` (`[window, previous,
    /// current]`; all 0 for an absent key), and the state to store: what the script replies and
    /// writes, computed by [`SlidingWindow`]. A cost above the limit is denied and writes
    /// nothing; the limiters refuse it before they ask Redis.
    ///
    /// ```
    /// # use tollgate::{redis::RedisSlidingWindow, Quota};
    /// let window = RedisSlidingWindow::new(&Quota::per_second(2).unwrap()).unwrap();
    /// let (decision, state) = window.decide([0, 0, 0], 5_250_000, 1);
    /// assert_eq!(state, [5, 0, 1]);
    /// assert_eq!(decision.reset_after().as_millis(), 1_750);
    /// ```
    pub fn decide(&self, state: [u64; 3], now: u64, cost: u64) -> (Decision, [u64; 3]) {
        let millis = SlidingWindow::from_parts(self.period, self.limit);
        let (decision, next) = millis.decide_fields(state, Nanos::from_nanos(now / 1_000), cost);
        (in_units(decision, RedisSlidingWindow::UNIT), next)
    }

    /// The state a script stores for a key written under `self` and read at `now` by a limiter
    /// whose quota is now `to`'s ([`set_quota`](super::RedisKeyedRateLimiter::set_quota)):
    /// [`Algorithm::carry_over`](crate::Algorithm::carry_over) on the fields. All 0 (the key
    /// removed) when nothing is charged.
    ///
    /// ```
    /// # use tollgate::{redis::RedisSlidingWindow, Quota};
    /// let ten = RedisSlidingWindow::new(&Quota::per_second(10).unwrap()).unwrap();
    /// let twenty = RedisSlidingWindow::new(&Quota::per_minute(20).unwrap()).unwrap();
    /// let (_, state) = ten.decide([0, 0, 0], 5_000_000, 7); // 3 left
    /// // 17 of the new 20 count as used in the minute that holds now.
    /// assert_eq!(ten.carry_over(state, 5_000_000, &twenty), [0, 0, 17]);
    /// ```
    #[must_use]
    pub fn carry_over(&self, state: [u64; 3], now: u64, to: &RedisSlidingWindow) -> [u64; 3] {
        let left = self.decide(state, now, 0).0.remaining().min(to.limit);
        to.decide([0; 3], now, to.limit - left).1
    }

    /// Nanoseconds in the unit of time the script computes in.
    pub(super) const UNIT: u64 = 1_000_000;

    /// The algorithm with the parameters [`args`](Self::args) named, as a validated one had.
    pub(super) const fn from_parts(period: u64, limit: u64) -> RedisSlidingWindow {
        RedisSlidingWindow { period, limit }
    }

    /// The script's parameters (`lua/sliding_window.lua`): the window and the limit.
    pub(super) const fn args(&self) -> [u64; 3] {
        [self.period, self.limit, 0]
    }
}

/// The limit per window, and the window as a duration.
///
/// ```
/// # use tollgate::{redis::RedisSlidingWindow, Quota};
/// let window = RedisSlidingWindow::new(&Quota::per_minute(10).unwrap()).unwrap();
/// assert_eq!(format!("{window:?}"), "RedisSlidingWindow { limit: 10, window: 60s }");
/// ```
impl fmt::Debug for RedisSlidingWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSlidingWindow")
            .field("limit", &self.limit)
            .field("window", &self.window())
            .finish()
    }
}
