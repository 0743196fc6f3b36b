//! What the two window counters on Redis share: their window in whole milliseconds, and the
//! bound that keeps the script's products exact.

use core::time::Duration;

use crate::error::BuildError;
use crate::quota::{Quota, QuotaError};

/// The largest `limit × window` (in milliseconds) a window counter on Redis takes: the script
/// compares products of a count and a part of the window, which must stay exact in Lua's
/// doubles (integers below 2^53).
pub(super) const MAX_PRODUCT: u64 = 1 << 52;

/// The window of `quota` in whole milliseconds (rounded up, so that a window is never shorter
/// than asked), with its limit; or why the script cannot count it exactly.
pub(super) const fn in_millis(
    algorithm: &'static str,
    quota: &Quota,
) -> Result<(u64, u64), BuildError> {
    let period = quota.period_nanos().div_ceil(1_000_000);
    let limit = quota.limit();
    match period.checked_mul(limit) {
        Some(product) if product <= MAX_PRODUCT => Ok((period, limit)),
        _ => Err(BuildError::Quota(QuotaError::WindowLimitTooLarge {
            algorithm,
            limit,
            period: Duration::from_millis(period),
            max_limit: MAX_PRODUCT / period,
        })),
    }
}
