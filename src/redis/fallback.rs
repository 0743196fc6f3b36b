//! When Redis cannot be asked: the [`Fallback`] policy, the local limiter it may decide with, and
//! the counters that report how often it did.

use core::time::Duration;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::clock::Nanos;
use crate::decision::Decision;
use crate::error::BuildError;
use crate::keyed::KeyedRateLimiter;
use crate::quota::Quota;

/// What a Redis limiter decides when Redis cannot be asked: it is down or unreachable, the
/// connection broke, or no reply came within the limiter's timeout. Every such decision is
/// counted in [`RedisStats::unavailable`].
///
/// ```
/// use tollgate::redis::Fallback;
/// use tollgate::Quota;
///
/// // Ten servers share 1 000 per second; while Redis is down, each allows itself a tenth.
/// let share = Fallback::Local { quota: Quota::per_second(100).unwrap(), capacity: 10_000 };
/// # let _ = share;
/// assert_eq!(Fallback::default(), Fallback::Deny);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// Deny every request (fail closed), with a `retry_after` of one second: nothing is admitted
    /// that the shared limit does not account for. The default.
    #[default]
    Deny,
    /// Admit every request (fail open): the limit is not enforced while Redis is away.
    Allow,
    /// Decide with a limiter of this process's own: `quota`, per key, for up to `capacity` keys
    /// at once (a table of 24 bytes a key; [`KeyedRateLimiter`]'s rules). Give it this process's
    /// share of the shared quota, so that the servers together stay near the limit. What it
    /// admitted is not known to Redis when Redis is back.
    Local {
        /// Each key's quota while Redis is away.
        quota: Quota,
        /// The keys the local table holds at once.
        capacity: usize,
    },
}

/// A [`Fallback`], ready to decide: the local table built.
pub(super) enum Policy {
    Deny,
    Allow,
    Local(Box<KeyedRateLimiter<[u8]>>),
}

impl Policy {
    pub(super) fn new(fallback: Fallback) -> Result<Policy, BuildError> {
        Ok(match fallback {
            Fallback::Deny => Policy::Deny,
            Fallback::Allow => Policy::Allow,
            Fallback::Local { quota, capacity } => {
                Policy::Local(Box::new(KeyedRateLimiter::gcra(quota, capacity)?))
            }
        })
    }

    /// The decision on a request of `cost` for `key` while Redis cannot be asked, for a limiter
    /// whose burst is `burst`.
    pub(super) fn decide(&self, key: &[u8], cost: u64, burst: u64) -> Decision {
        const SECOND: Nanos = Nanos::from_nanos(1_000_000_000);
        match self {
            Policy::Deny => Decision::new(false, 0, SECOND, SECOND, burst),
            Policy::Allow => Decision::new(true, burst - cost, Nanos::ZERO, Nanos::ZERO, burst),
            Policy::Local(local) => match local.decide_key(key, cost) {
                Ok(decision) => decision,
                // A cost above the local quota's burst (but within the shared one's): it can
                // never be admitted here, and there is no wait to give.
                Err(_) => Decision::new(false, 0, SECOND, SECOND, burst),
            },
        }
    }
}

impl Policy {
    /// [`decide`](Policy::decide) without writing: a local table is only looked at.
    pub(super) fn peek(&self, key: &[u8], cost: u64, burst: u64) -> Decision {
        match self {
            Policy::Local(local) => match local.peek_key_n(key, cost) {
                Ok(decision) => decision,
                Err(_) => self.decide(key, cost, burst),
            },
            _ => self.decide(key, cost, burst),
        }
    }
}

/// Counters of a Redis limiter (shared by its clones): decisions Redis made, and decisions the
/// [`Fallback`] made because Redis could not be asked.
///
/// ```
/// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) {
/// let stats = limiter.stats();
/// if stats.unavailable > 0 {
///     // alert: some decisions were not the shared limit's
/// }
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RedisStats {
    /// Decisions Redis made (peeks included).
    pub decisions: u64,
    /// Decisions the fallback made because Redis could not be asked.
    pub unavailable: u64,
    /// Of those, the ones whose round trip did not end within the limiter's timeout.
    pub timeouts: u64,
}

/// The counters behind [`RedisStats`].
#[derive(Default)]
pub(super) struct Counters {
    pub(super) decisions: AtomicU64,
    pub(super) unavailable: AtomicU64,
    pub(super) timeouts: AtomicU64,
}

impl Counters {
    pub(super) fn snapshot(&self) -> RedisStats {
        RedisStats {
            decisions: self.decisions.load(Relaxed),
            unavailable: self.unavailable.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
        }
    }
}

/// The time a Redis limiter waits for a reply before its [`Fallback`] decides, unless given
/// another: long enough for a loaded server across a data centre, short enough that a request
/// is not held up by a server that has gone.
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);
