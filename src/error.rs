//! Why a limiter could not be built: [`BuildError`], the one error of every limiter constructor
//! and builder. A [`Quota`](crate::Quota) that cannot be represented at all is a
//! [`QuotaError`] from the quota's own constructors; a decision's errors are in
//! [`Decision`](crate::Decision)'s module ([`CheckError`](crate::CheckError)).

use core::fmt;

use crate::quota::QuotaError;

/// Why a limiter could not be built: the error of every fallible limiter constructor
/// ([`RateLimiter::sliding_window`](crate::RateLimiter::sliding_window),
/// [`KeyedRateLimiter::gcra`](crate::KeyedRateLimiter::gcra),
/// [`KeyedSlidingLog::new`](crate::KeyedSlidingLog::new), ...) and of every builder's `build`.
///
/// Each message names the bad value. It displays as the [`QuotaError`] it wraps, if it wraps
/// one, and has no [`source`](std::error::Error::source) of its own, so a report that follows the
/// chain of sources says the reason once.
///
/// ```
/// use tollgate::{BuildError, KeyedRateLimiter, Quota, RateLimiter};
///
/// let quota = Quota::per_second(5).unwrap();
/// assert_eq!(KeyedRateLimiter::<u64>::gcra(quota, 0).unwrap_err(), BuildError::ZeroCapacity);
/// assert!(matches!(
///     KeyedRateLimiter::<u64>::gcra(quota, usize::MAX),
///     Err(BuildError::CapacityTooLarge { .. })
/// ));
/// // A million per second does not fit a sliding window's packed word.
/// let err = RateLimiter::sliding_window(Quota::per_second(1_000_000).unwrap()).unwrap_err();
/// assert!(matches!(err, BuildError::Quota(_)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The quota does not fit the algorithm's packed word.
    Quota(QuotaError),
    /// A capacity of 0 keys.
    ZeroCapacity,
    /// The table for this capacity does not fit in memory (or in the address space), or is over
    /// the limit of 2^32 probe groups (512 GiB of table, about 23 billion keys).
    CapacityTooLarge {
        /// The capacity asked for.
        capacity: usize,
        /// The bytes its table would need (for a [`KeyedSlidingLog`](crate::KeyedSlidingLog),
        /// its shards' maps).
        bytes: u128,
    },
    /// A quota whose tolerance is too long for a Redis limiter, whose script computes in
    /// microseconds that must stay exact in Lua's doubles
    /// (`tollgate::redis::RedisGcra::MAX_TOLERANCE`, about 142 years).
    ToleranceTooLong {
        /// The quota's tolerance, in whole microseconds.
        tolerance: core::time::Duration,
        /// The longest that fits.
        max: core::time::Duration,
    },
    /// More tiers than a keyed table can tell apart
    /// ([`KeyedBuilder::tier`](crate::KeyedBuilder::tier)).
    TooManyTiers {
        /// The distinct tiers declared, besides the limiter's own quota.
        tiers: usize,
    },
    /// A lease size of 0, or one larger than the quota's burst or than
    /// `tollgate::redis::Lease::MAX_SIZE`.
    LeaseSize {
        /// The size asked for.
        size: u64,
        /// The largest that fits.
        max: u64,
    },
}

impl BuildError {
    /// The tiers a keyed table can tell apart besides its own quota.
    pub(crate) const MAX_TIERS: usize = 6;

    /// A capacity whose table would take more than the address space (or 2^32 probe groups).
    pub(crate) const fn capacity_too_large(capacity: usize) -> BuildError {
        BuildError::CapacityTooLarge {
            capacity,
            bytes: crate::store::table_bytes(capacity),
        }
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BuildError::Quota(err) => err.fmt(f),
            BuildError::ZeroCapacity => f.write_str("a keyed limiter needs a capacity of at least 1 key"),
            BuildError::CapacityTooLarge { capacity, bytes } => write!(
                f,
                "a capacity of {capacity} keys needs {bytes} bytes of table, which cannot be allocated"
            ),
            BuildError::ToleranceTooLong { tolerance, max } => write!(
                f,
                "a tolerance of {tolerance:?} is longer than a Redis limiter takes, {max:?}"
            ),
            BuildError::TooManyTiers { tiers } => write!(
                f,
                "{tiers} tiers declared; a keyed table tells at most {} apart besides its own quota",
                BuildError::MAX_TIERS
            ),
            BuildError::LeaseSize { size, max } => {
                write!(f, "a lease of {size}; a lease takes from 1 up to {max}")
            }
        }
    }
}

// Transparent, as `thiserror`'s `#[error(transparent)]` is: the message of a wrapped quota error
// is that error's, so the source is its source (none), not the error itself. A reporter that
// walks the chain (anyhow's `{:#}`) would otherwise print the same sentence twice.
impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Quota(err) => err.source(),
            _ => None,
        }
    }
}

impl From<QuotaError> for BuildError {
    fn from(err: QuotaError) -> BuildError {
        BuildError::Quota(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant says what was wrong with which value, once.
    #[test]
    fn messages_name_the_bad_value_once() {
        let quota = QuotaError::ZeroLimit;
        for (error, text) in [
            (
                BuildError::from(quota),
                "invalid quota: the limit is 0; it must be at least 1",
            ),
            (
                BuildError::ZeroCapacity,
                "a keyed limiter needs a capacity of at least 1 key",
            ),
            (
                BuildError::CapacityTooLarge {
                    capacity: 7,
                    bytes: 9,
                },
                "a capacity of 7 keys needs 9 bytes of table, which cannot be allocated",
            ),
            (
                BuildError::TooManyTiers { tiers: 7 },
                "7 tiers declared; a keyed table tells at most 6 apart besides its own quota",
            ),
            (
                BuildError::LeaseSize { size: 0, max: 10 },
                "a lease of 0; a lease takes from 1 up to 10",
            ),
        ] {
            assert_eq!(error.to_string(), text);
            let first: &(dyn std::error::Error + 'static) = &error;
            let chain: Vec<String> = core::iter::successors(Some(first), |&e| e.source())
                .map(|e| e.to_string())
                .collect();
            assert_eq!(chain, [text]);
        }
    }
}
