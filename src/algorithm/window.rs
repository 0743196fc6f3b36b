//! What the two window counters share: where `now` falls among the windows, and how wide the
//! packed fields are.
//!
//! Windows are aligned on the clock's epoch: window `i` covers `[i·P, (i+1)·P)`. A packed word
//! holds the index of the last window it was written in, in the bits its counts leave free.
//! A quota is accepted only if the index of every representable time (up to [`Nanos::MAX`]) fits
//! in those bits **without wrapping** and below the all-ones pattern, so a stored index is never
//! ambiguous and the word `u64::MAX` never occurs.

use core::time::Duration;

use super::{count_bits, Algorithm, Transition};
use crate::clock::Nanos;
use crate::quota::{Quota, QuotaError};

/// The shape of a window counter's word: `[ index | counts × k bits ]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Layout {
    /// Bits per count.
    pub(super) count_bits: u32,
}

impl Layout {
    /// The layout for `counters` counts of `quota.limit()` each, or why there is none.
    pub(super) const fn new(
        algorithm: &'static str,
        quota: &Quota,
        counters: u32,
    ) -> Result<Layout, QuotaError> {
        let k = count_bits(quota.limit());
        if fits(quota.period_nanos(), k, counters) {
            return Ok(Layout { count_bits: k });
        }
        // The largest limit that would fit: the widest count field that leaves room.
        let mut k = 63 / counters;
        while k > 0 && !fits(quota.period_nanos(), k, counters) {
            k -= 1;
        }
        Err(QuotaError::WindowLimitTooLarge {
            algorithm,
            limit: quota.limit(),
            period: Duration::from_nanos(quota.period_nanos()),
            max_limit: if k == 0 { 0 } else { (1 << k) - 1 },
        })
    }

    /// The mask of one count field.
    #[inline]
    pub(super) const fn count_mask(&self) -> u64 {
        (1 << self.count_bits) - 1
    }
}

/// Whether the index of every time up to `Nanos::MAX` fits below the all-ones pattern of the
/// bits that `counters` fields of `k` bits leave.
const fn fits(period: u64, k: u32, counters: u32) -> bool {
    let used = k * counters;
    if used >= 64 {
        return false;
    }
    let index_bits = 64 - used;
    let max_index = Nanos::MAX.as_nanos() / period;
    index_bits == 64 || max_index < (1u64 << index_bits) - 1
}

/// Where a decision is evaluated, relative to the window a word was last written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Position {
    /// The window the decision falls in.
    pub(super) index: u64,
    /// How many windows after the stored one that is (0 when time went backwards).
    pub(super) ahead: u64,
    /// Nanoseconds from the start of `index` to the evaluation time.
    pub(super) elapsed: u64,
    /// The evaluation time minus `now`: positive only when `now` fell before the stored window.
    pub(super) delay: u64,
}

/// Places `now` relative to a word written in window `stored`.
///
/// A `now` before the stored window (time went backwards) is evaluated at the **start** of the
/// stored window: the counts are taken as they stand, with nothing yet expired — the most
/// conservative reading of the state, and never more permissive than at any later time.
#[inline]
pub(super) fn position(period: u64, stored: u64, now: Nanos) -> Position {
    let now = now.as_nanos();
    let index = now / period;
    if index >= stored {
        Position {
            index,
            ahead: index - stored,
            elapsed: now - index * period,
            delay: 0,
        }
    } else {
        // Only a corrupted word (from fuzzing, say) holds an index whose start is past
        // Nanos::MAX; clamping keeps every later sum of a delay and two periods below 2^64.
        let start = stored.saturating_mul(period).min(Nanos::MAX.as_nanos());
        Position {
            index: stored,
            ahead: 0,
            elapsed: 0,
            delay: start - now,
        }
    }
}

/// A window counter's [`carry_over`](Algorithm::carry_over): a fresh state under `to`, charged
/// at `now` with what `to` must not give: its limit less what `from` has left, capped at it.
pub(super) fn carry_over<A: Algorithm>(from: &A, state: u64, now: Nanos, to: &A) -> u64 {
    let limit = to.capacity();
    let left = from.decide(state, now, 0).0.remaining().min(limit);
    match to.transition(0, now, limit - left) {
        Transition::Allow { state } => state,
        // A fresh window admits any cost up to its limit.
        Transition::Deny { .. } => unreachable!("a fresh window refused a cost within its limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_follow_the_limit() {
        let q = Quota::per_minute(100).unwrap();
        assert_eq!(Layout::new("t", &q, 2).unwrap().count_bits, 7);
        assert_eq!(Layout::new("t", &q, 1).unwrap().count_bits, 7);
        // A limit that is a power of two needs one more bit than the power.
        let q = Quota::per_minute(128).unwrap();
        assert_eq!(Layout::new("t", &q, 2).unwrap().count_bits, 8);
    }

    #[test]
    fn refusals_name_the_largest_limit_that_fits() {
        // 1 s windows: the index needs 34 bits (2^63 / 10^9 = 9.2 × 10^9 < 2^34 − 1), so two
        // counts get (64 − 34) / 2 = 15 bits each: at most 32767 per second.
        let fits = Quota::per_second(32_767).unwrap();
        assert!(Layout::new("t", &fits, 2).is_ok());
        let too_many = Quota::per_second(32_768).unwrap();
        assert_eq!(
            Layout::new("sliding-window counter", &too_many, 2),
            Err(QuotaError::WindowLimitTooLarge {
                algorithm: "sliding-window counter",
                limit: 32_768,
                period: Duration::from_secs(1),
                max_limit: 32_767,
            })
        );
        // A single count: with 2^40 ns windows the index needs 24 bits (2^63 / 2^40 = 2^23,
        // just below 2^24 − 1), leaving 40 for the count. Only here, at one request per
        // nanosecond, does the layout bind before the quota's own rate check.
        let period = Duration::from_nanos(1 << 40);
        assert!(Layout::new("t", &Quota::new((1 << 40) - 1, period).unwrap(), 1).is_ok());
        assert!(matches!(
            Layout::new("t", &Quota::new(1 << 40, period).unwrap(), 1),
            Err(QuotaError::WindowLimitTooLarge { max_limit, .. }) if max_limit == (1 << 40) - 1
        ));
        // The shortest windows, where no limit fits (`QuotaError::WindowLimitTooLarge` says so).
        // The index of the last time, 2^63 − 1 ns, must lie below the all-ones pattern of the bits
        // the counts leave: in 1 ns windows it is 2^63 − 1 (so it needs 64 bits), in 2 ns windows
        // 2^62 − 1 (63 bits), in 3 ns windows 3.07 × 10^18 (62 bits). A limit of 1 takes one bit
        // a count: the fixed window's one count leaves 63 bits, the sliding window's two leave 62.
        let limit_of_1 = |nanos| Quota::new(1, Duration::from_nanos(nanos)).unwrap();
        for (counters, shortest) in [(1, 2), (2, 3)] {
            for nanos in 1..shortest {
                assert!(
                    matches!(
                        Layout::new("t", &limit_of_1(nanos), counters),
                        Err(QuotaError::WindowLimitTooLarge { max_limit: 0, .. })
                    ),
                    "{counters} counts, {nanos} ns"
                );
            }
            assert!(Layout::new("t", &limit_of_1(shortest), counters).is_ok());
        }
    }

    #[test]
    fn positions() {
        let p = 100;
        assert_eq!(
            position(p, 3, Nanos::from_nanos(350)),
            Position {
                index: 3,
                ahead: 0,
                elapsed: 50,
                delay: 0
            }
        );
        assert_eq!(
            position(p, 3, Nanos::from_nanos(420)),
            Position {
                index: 4,
                ahead: 1,
                elapsed: 20,
                delay: 0
            }
        );
        // Backwards: evaluated at the start of the stored window, 130 ns later than `now`.
        assert_eq!(
            position(p, 3, Nanos::from_nanos(170)),
            Position {
                index: 3,
                ahead: 0,
                elapsed: 0,
                delay: 130
            }
        );
    }
}
