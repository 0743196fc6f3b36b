//! The fixed-window counter on Redis, in milliseconds.

use core::fmt;
use core::time::Duration;

use super::script::in_units;
use super::window::in_millis;
use crate::algorithm::FixedWindow;
use crate::clock::Nanos;
use crate::decision::Decision;
use crate::error::BuildError;
use crate::quota::Quota;

/// The fixed-window counter as a Redis limiter runs it: windows of whole **milliseconds**
/// since the Unix epoch (the quota's period rounded up), each key's state the index of the
/// window it was last written in and its count, stored as `window:count`. Prefer
/// [`RedisGcra`](super::RedisGcra) or [`RedisSlidingWindow`](super::RedisSlidingWindow): a fixed
/// window admits twice its limit across a boundary.
///
/// [`decide`](RedisFixedWindow::decide) is the transition the script applies, computed by the
/// crate's own [`FixedWindow`] in milliseconds. `limit × window` is at most 2^52 milliseconds.
///
/// ```
/// use tollgate::redis::RedisFixedWindow;
/// use tollgate::Quota;
///
/// let window = RedisFixedWindow::new(&Quota::per_minute(3).unwrap()).unwrap();
/// let (decision, state) = window.decide([0, 0], 59_000_000, 3);
/// assert_eq!((decision.remaining(), state), (0, [0, 3]));
/// // A second later, a new window: 3 more.
/// let (decision, state) = window.decide(state, 60_000_000, 3);
/// assert_eq!((decision.is_allowed(), state), (true, [1, 3]));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RedisFixedWindow {
    /// Milliseconds, at least 1.
    period: u64,
    limit: u64,
}

impl RedisFixedWindow {
    const NAME: &'static str = "fixed-window counter on Redis";

    /// The fixed-window counter for `quota`, in milliseconds.
    ///
    /// # Errors
    ///
    /// As for [`RedisSlidingWindow::new`](super::RedisSlidingWindow::new).
    ///
    /// ```
    /// use tollgate::redis::RedisFixedWindow;
    /// use tollgate::Quota;
    ///
    /// assert!(RedisFixedWindow::new(&Quota::per_hour(1_000_000).unwrap()).is_ok());
    /// ```
    pub const fn new(quota: &Quota) -> Result<RedisFixedWindow, BuildError> {
        match in_millis(RedisFixedWindow::NAME, quota) {
            Ok((period, limit)) => Ok(RedisFixedWindow { period, limit }),
            Err(err) => Err(err),
        }
    }

    /// The window's length, a whole number of milliseconds.
    ///
    /// ```
    /// # use tollgate::{redis::RedisFixedWindow, Quota};
    /// let window = RedisFixedWindow::new(&Quota::per_minute(3).unwrap()).unwrap();
    /// assert_eq!(window.window().as_secs(), 60);
    /// ```
    #[must_use]
    pub const fn window(&self) -> Duration {
        Duration::from_millis(self.period)
    }

    /// The limit per window: the largest cost one request can have.
    ///
    /// ```
    /// # use tollgate::{redis::RedisFixedWindow, Quota};
    /// let window = RedisFixedWindow::new(&Quota::per_minute(3).unwrap()).unwrap();
    /// assert_eq!(window.limit(), 3);
    /// ```
    #[must_use]
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The decision on a request of `cost` at `now` (microseconds since the Unix epoch, counted
    /// in whole milliseconds) for a key whose stored state is `state` (`[window, count]`; both
    /// 0 for an absent key), and the state to store: what the script replies and writes,
    /// computed by [`FixedWindow`].
    ///
    /// ```
    /// # use tollgate::{redis::RedisFixedWindow, Quota};
    /// let window = RedisFixedWindow::new(&Quota::per_second(2).unwrap()).unwrap();
    /// let (decision, state) = window.decide([0, 0], 5_250_000, 1);
    /// assert_eq!(state, [5, 1]);
    /// assert_eq!(decision.reset_after().as_millis(), 750);
    /// ```
    pub fn decide(&self, state: [u64; 2], now: u64, cost: u64) -> (Decision, [u64; 2]) {
        let millis = FixedWindow::from_parts(self.period, self.limit);
        let (decision, next) = millis.decide_fields(state, Nanos::from_nanos(now / 1_000), cost);
        (in_units(decision, RedisFixedWindow::UNIT), next)
    }

    /// The state a script stores for a key written under `self` and read at `now` by a limiter
    /// whose quota is now `to`'s ([`set_quota`](super::RedisKeyedRateLimiter::set_quota)):
    /// [`Algorithm::carry_over`](crate::Algorithm::carry_over) on the fields. All 0 (the key
    /// removed) when nothing is charged.
    ///
    /// ```
    /// # use tollgate::{redis::RedisFixedWindow, Quota};
    /// let ten = RedisFixedWindow::new(&Quota::per_second(10).unwrap()).unwrap();
    /// let five = RedisFixedWindow::new(&Quota::per_second(5).unwrap()).unwrap();
    /// let (_, state) = ten.decide([0, 0], 5_000_000, 7); // 3 left
    /// assert_eq!(ten.carry_over(state, 5_000_000, &five), [5, 2]);
    /// ```
    #[must_use]
    pub fn carry_over(&self, state: [u64; 2], now: u64, to: &RedisFixedWindow) -> [u64; 2] {
        let left = self.decide(state, now, 0).0.remaining().min(to.limit);
        to.decide([0; 2], now, to.limit - left).1
    }

    /// Nanoseconds in the unit of time the script computes in.
    pub(super) const UNIT: u64 = 1_000_000;

    /// The algorithm with the parameters [`args`](Self::args) named, as a validated one had.
    pub(super) const fn from_parts(period: u64, limit: u64) -> RedisFixedWindow {
        RedisFixedWindow { period, limit }
    }

    /// The script's parameters (`lua/fixed_window.lua`): the window and the limit.
    pub(super) const fn args(&self) -> [u64; 3] {
        [self.period, self.limit, 0]
    }
}

/// The limit per window, and the window as a duration.
///
/// ```
/// # use tollgate::{redis::RedisFixedWindow, Quota};
/// let window = RedisFixedWindow::new(&Quota::per_minute(3).unwrap()).unwrap();
/// assert_eq!(format!("{window:?}"), "RedisFixedWindow { limit: 3, window: 60s }");
/// ```
impl fmt::Debug for RedisFixedWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFixedWindow")
            .field("limit", &self.limit)
            .field("window", &self.window())
            .finish()
    }
}
