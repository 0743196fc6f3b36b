//! Which transition a Redis limiter's script applies.

use ::redis::Script;

use super::script::{FIXED_WINDOW, GCRA, SLIDING_WINDOW};
use super::{RedisFixedWindow, RedisGcra, RedisSlidingWindow};
use crate::error::BuildError;
use crate::quota::Quota;

/// The algorithm of a Redis limiter: the transition its script applies, with the quota in the
/// unit of time the script counts in. Each is the crate's own algorithm of the same name,
/// computed in that unit.
///
/// ```
/// use tollgate::redis::{RedisAlgorithm, RedisSlidingWindow};
/// use tollgate::Quota;
///
/// let window = RedisSlidingWindow::new(&Quota::per_minute(100).unwrap()).unwrap();
/// let algorithm = RedisAlgorithm::from(window);
/// assert_eq!(algorithm.capacity(), 100);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RedisAlgorithm {
    /// GCRA, in microseconds.
    Gcra(RedisGcra),
    /// The sliding-window counter, in milliseconds.
    SlidingWindow(RedisSlidingWindow),
    /// The fixed-window counter, in milliseconds.
    FixedWindow(RedisFixedWindow),
}

impl RedisAlgorithm {
    /// The largest cost one request can have: the burst (GCRA) or the limit per window.
    ///
    /// ```
    /// use tollgate::redis::{RedisAlgorithm, RedisGcra};
    /// use tollgate::Quota;
    ///
    /// let quota = Quota::per_second(10).unwrap().with_burst(20).unwrap();
    /// assert_eq!(RedisAlgorithm::from(RedisGcra::new(&quota).unwrap()).capacity(), 20);
    /// ```
    #[must_use]
    pub const fn capacity(&self) -> u64 {
        match self {
            RedisAlgorithm::Gcra(gcra) => gcra.burst(),
            RedisAlgorithm::SlidingWindow(window) => window.limit(),
            RedisAlgorithm::FixedWindow(window) => window.limit(),
        }
    }

    /// The time over which the capacity comes back in full: GCRA's tolerance (the burst times
    /// the emission interval), or the window.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::redis::{RedisAlgorithm, RedisFixedWindow};
    /// use tollgate::Quota;
    ///
    /// let window = RedisFixedWindow::new(&Quota::per_minute(100).unwrap()).unwrap();
    /// assert_eq!(RedisAlgorithm::from(window).window(), Duration::from_secs(60));
    /// ```
    #[must_use]
    pub const fn window(&self) -> core::time::Duration {
        match self {
            RedisAlgorithm::Gcra(gcra) => gcra.tolerance(),
            RedisAlgorithm::SlidingWindow(window) => window.window(),
            RedisAlgorithm::FixedWindow(window) => window.window(),
        }
    }

    /// The algorithm's number in the all-or-nothing script, with its parameters.
    /// The algorithm as four words: its number (as [`layer_args`](Self::layer_args)) and its
    /// arguments.
    pub(super) fn to_words(self) -> [u64; 4] {
        let (id, [a, b, c]) = self.layer_args();
        [u64::from(id), a, b, c]
    }

    /// The algorithm whose [`to_words`](Self::to_words) are `words`.
    pub(super) fn from_words([id, a, b, c]: [u64; 4]) -> RedisAlgorithm {
        match id {
            1 => RedisAlgorithm::Gcra(RedisGcra::from_parts(a, c)),
            2 => RedisAlgorithm::SlidingWindow(RedisSlidingWindow::from_parts(a, b)),
            _ => RedisAlgorithm::FixedWindow(RedisFixedWindow::from_parts(a, b)),
        }
    }

    /// The same algorithm for `quota`: what a limiter's `set_quota` switches to.
    pub(super) fn for_quota(self, quota: &Quota) -> Result<RedisAlgorithm, BuildError> {
        Ok(match self {
            RedisAlgorithm::Gcra(_) => RedisAlgorithm::Gcra(RedisGcra::new(quota)?),
            RedisAlgorithm::SlidingWindow(_) => {
                RedisAlgorithm::SlidingWindow(RedisSlidingWindow::new(quota)?)
            }
            RedisAlgorithm::FixedWindow(_) => {
                RedisAlgorithm::FixedWindow(RedisFixedWindow::new(quota)?)
            }
        })
    }

    pub(super) fn layer_args(&self) -> (u8, [u64; 3]) {
        match self {
            RedisAlgorithm::Gcra(gcra) => (1, gcra.args()),
            RedisAlgorithm::SlidingWindow(window) => (2, window.args()),
            RedisAlgorithm::FixedWindow(window) => (3, window.args()),
        }
    }

    /// The script, with its parameters and the nanoseconds in the unit of its replies' times.
    pub(super) fn script(&self) -> (&'static Script, [u64; 3], u64) {
        match self {
            RedisAlgorithm::Gcra(gcra) => (&GCRA, gcra.args(), RedisGcra::UNIT),
            RedisAlgorithm::SlidingWindow(window) => {
                (&SLIDING_WINDOW, window.args(), RedisSlidingWindow::UNIT)
            }
            RedisAlgorithm::FixedWindow(window) => {
                (&FIXED_WINDOW, window.args(), RedisFixedWindow::UNIT)
            }
        }
    }
}

impl From<RedisGcra> for RedisAlgorithm {
    fn from(gcra: RedisGcra) -> RedisAlgorithm {
        RedisAlgorithm::Gcra(gcra)
    }
}

impl From<RedisSlidingWindow> for RedisAlgorithm {
    fn from(window: RedisSlidingWindow) -> RedisAlgorithm {
        RedisAlgorithm::SlidingWindow(window)
    }
}

impl From<RedisFixedWindow> for RedisAlgorithm {
    fn from(window: RedisFixedWindow) -> RedisAlgorithm {
        RedisAlgorithm::FixedWindow(window)
    }
}
