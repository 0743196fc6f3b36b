//! The fixed-window counter: `limit` per window, windows aligned on the clock's epoch.
//!
//! Kept for completeness and comparison. Its flaw is the boundary: `limit` requests at the end of
//! one window and `limit` more at the start of the next are all admitted, twice the limit within a
//! moment. Prefer [`Gcra`](super::Gcra) or [`SlidingWindow`](super::SlidingWindow).
//!
//! # The word
//!
//! With `k` = the bits needed for the limit (`⌈log2(limit + 1)⌉`):
//!
//! ```text
//!  63                                         k k-1            0
//! ┌─────────────────────────────────────────────┬────────────────┐
//! │        window index (64 − k bits)           │     count      │
//! └─────────────────────────────────────────────┴────────────────┘
//! ```
//!
//! As for the sliding window, the quota is refused unless every representable time's window index
//! fits below the field's all-ones pattern; the all-zero word is fresh.
//!
//! # The transition
//!
//! At `now` in window `w`: if the word is from an earlier window its count is 0. A request of cost
//! `c` is admitted iff `count + c ≤ limit`; then the word becomes `(w, count + c)`. A denied request
//! fits again at the start of the next window: `retry_after` is the time until then.
//!
//! # Time that goes backwards
//!
//! A `now` before the stored window is counted in the stored window, whose count stands.

use core::time::Duration;

use super::window::{position, Layout, Position};
use super::{Algorithm, Transition};
use crate::clock::Nanos;
use crate::decision::Decision;
use crate::quota::{Quota, QuotaError};

/// The fixed-window counter. See the [module docs](self).
///
/// ```
/// use tollgate::{Algorithm, FixedWindow, Nanos, Quota};
///
/// // 3 per minute: 3 in the last second of one minute and 3 in the first second of the next
/// // are all admitted: 6 in two seconds, the boundary burst.
/// let fw = FixedWindow::new(&Quota::per_minute(3).unwrap()).unwrap();
/// let s = 1_000_000_000;
/// let mut state = 0;
/// let mut admitted = 0;
/// for t in [59 * s, 59 * s, 59 * s, 60 * s, 60 * s, 60 * s] {
///     let (d, next) = fw.decide(state, Nanos::from_nanos(t), 1);
///     admitted += d.is_allowed() as u32;
///     state = next;
/// }
/// assert_eq!(admitted, 6);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedWindow {
    period: u64,
    limit: u64,
    layout: Layout,
}

/// The limit per window, and the window as a duration.
///
/// ```
/// use tollgate::{Quota, FixedWindow};
/// let window = FixedWindow::new(&Quota::per_minute(10).unwrap()).unwrap();
/// assert_eq!(format!("{window:?}"), "FixedWindow { limit: 10, period: 60s }");
/// ```
impl core::fmt::Debug for FixedWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FixedWindow")
            .field("limit", &self.limit)
            .field("period", &core::time::Duration::from_nanos(self.period))
            .finish()
    }
}

impl FixedWindow {
    const NAME: &'static str = "fixed-window counter";

    /// A fixed-window counter admitting `quota.limit()` per `quota.period()`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::WindowLimitTooLarge`] if the count and a non-wrapping window index do not fit
    /// in 64 bits together. The count field always has room for at least `period / 1 ns − 1`, so
    /// this only refuses limits of one request per nanosecond.
    ///
    /// `FixedWindow::try_from(quota)` is the same, for code generic over `TryFrom<Quota>`.
    ///
    /// ```
    /// use tollgate::{FixedWindow, Quota};
    /// let quota = Quota::per_second(1_000_000).unwrap();
    /// assert!(FixedWindow::new(&quota).is_ok());
    /// assert_eq!(FixedWindow::try_from(quota), FixedWindow::new(&quota));
    /// ```
    pub const fn new(quota: &Quota) -> Result<FixedWindow, QuotaError> {
        match Layout::new(FixedWindow::NAME, quota, 1) {
            Ok(layout) => Ok(FixedWindow {
                period: quota.period_nanos(),
                limit: quota.limit(),
                layout,
            }),
            Err(err) => Err(err),
        }
    }

    /// The window's length: the quota's period. With [`capacity`](Algorithm::capacity), the
    /// limit per window, it is the policy a server advertises in its `RateLimit-Policy` header
    /// (the limit and the window in seconds; the header's syntax differs between drafts).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, FixedWindow, Quota};
    /// let window = FixedWindow::new(&Quota::per_minute(3).unwrap()).unwrap();
    /// assert_eq!(window.window(), Duration::from_secs(60));
    /// assert_eq!(window.capacity(), 3);
    /// ```
    #[must_use]
    pub const fn window(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The counter with these parameters, which a validated quota gave
    /// ([`to_words`](super::sealed::Sealed::to_words)); or with its period in some other unit of
    /// time than the nanosecond (the Redis backend's), for
    /// [`decide_fields`](Self::decide_fields) alone: the transition is the same arithmetic in
    /// any unit, and the packed word's layout, which bounds nanoseconds, does not apply.
    /// `period` is at least 1.
    pub(crate) const fn from_parts(period: u64, limit: u64) -> FixedWindow {
        FixedWindow {
            period,
            limit,
            layout: Layout {
                count_bits: super::count_bits(limit),
            },
        }
    }

    /// [`Algorithm::decide`] on the unpacked fields `[window index, count]`: the
    /// specification of the packed word's transition, and of any other store's (the Redis
    /// script's). The fields returned are those to store, the same as given where nothing is
    /// recorded.
    #[inline]
    pub(crate) fn decide_fields(
        &self,
        fields: [u64; 2],
        now: Nanos,
        cost: u64,
    ) -> (Decision, [u64; 2]) {
        let (at, count) = self.view_fields(fields, now);
        let (allowed, retry_after, count) = if cost > self.limit {
            (false, Nanos::MAX, count)
        } else if cost == 0 || count + cost <= self.limit {
            (true, Nanos::ZERO, count + cost)
        } else {
            (false, self.until_next_window(&at), count)
        };
        let reset_after = if count > 0 {
            self.until_next_window(&at)
        } else {
            Nanos::ZERO
        };
        let decision = Decision::new(
            allowed,
            // A corrupted word's count may exceed the limit; nothing remains then.
            self.limit.saturating_sub(count),
            retry_after,
            reset_after,
            self.limit,
        );
        let stored = if allowed && cost > 0 {
            [at.index, count]
        } else {
            fields
        };
        (decision, stored)
    }

    /// The parameters a snapshot records: a restore requires the same.
    pub(crate) const fn snapshot_params(&self) -> [u64; 3] {
        [self.period, self.limit, 0]
    }

    /// A saved word moved onto a clock on which the saving clock's `t` reads `t + shift`: its
    /// count goes to the last of the new clock's windows that its old window overlaps (until
    /// that one starts, a later window's count stands, as for time that went backwards), so
    /// that it applies at least as long as it did. `None` when it no longer applies at `now`.
    pub(crate) fn rebase(&self, state: u64, shift: i128, now: Nanos) -> Option<u64> {
        let (stored, count) = self.unpack(state);
        let period = self.period as i128;
        let end = (stored as i128 + 1) * period + shift;
        let last = (end - 1).div_euclid(period);
        let index = (now.as_nanos() / self.period) as i128;
        if count == 0 || last < index {
            return None;
        }
        // Never past the window of the last representable time (the layout's bound).
        let last = (last as u64).min(Nanos::MAX.as_nanos() / self.period);
        Some(self.pack(last, count.min(self.limit)))
    }

    #[inline]
    fn pack(&self, index: u64, count: u64) -> u64 {
        (index << self.layout.count_bits) | count
    }

    #[inline]
    fn unpack(&self, word: u64) -> (u64, u64) {
        (
            word >> self.layout.count_bits,
            word & self.layout.count_mask(),
        )
    }

    /// Gives back a hold of `cost` that stored `after`, from the word as it is now: out of the
    /// count while its window is the stored one; a hold of an earlier window weighs nothing and
    /// stays. Exact: the counts add up.
    #[inline]
    pub(crate) fn release(&self, state: u64, after: u64, cost: u64) -> u64 {
        let (index, count) = self.unpack(state);
        if index == self.unpack(after).0 {
            self.pack(index, count.saturating_sub(cost))
        } else {
            state
        }
    }

    /// The window of the decision and the count that applies in it.
    #[inline]
    fn view(&self, word: u64, now: Nanos) -> (Position, u64) {
        let (stored, count) = self.unpack(word);
        self.view_fields([stored, count], now)
    }

    /// The fields `[window index, count]` seen from `now`.
    #[inline]
    fn view_fields(&self, [stored, count]: [u64; 2], now: Nanos) -> (Position, u64) {
        let at = position(self.period, stored, now);
        (at, if at.ahead == 0 { count } else { 0 })
    }

    /// Time from `now` to the start of the window after `at`.
    #[inline]
    fn until_next_window(&self, at: &Position) -> Nanos {
        Nanos::from_nanos(at.delay + (self.period - at.elapsed))
    }
}

impl TryFrom<Quota> for FixedWindow {
    type Error = QuotaError;

    fn try_from(quota: Quota) -> Result<FixedWindow, QuotaError> {
        FixedWindow::new(&quota)
    }
}

impl TryFrom<&Quota> for FixedWindow {
    type Error = QuotaError;

    fn try_from(quota: &Quota) -> Result<FixedWindow, QuotaError> {
        FixedWindow::new(quota)
    }
}

impl Algorithm for FixedWindow {
    #[inline]
    fn capacity(&self) -> u64 {
        self.limit
    }

    #[inline]
    fn transition(&self, state: u64, now: Nanos, cost: u64) -> Transition {
        if cost == 0 {
            return Transition::Allow { state };
        }
        if cost > self.limit {
            return Transition::Deny {
                retry_after: Nanos::MAX,
            };
        }
        let (at, count) = self.view(state, now);
        if count + cost <= self.limit {
            Transition::Allow {
                state: self.pack(at.index, count + cost),
            }
        } else {
            Transition::Deny {
                retry_after: self.until_next_window(&at),
            }
        }
    }

    #[inline]
    fn decide(&self, state: u64, now: Nanos, cost: u64) -> (Decision, u64) {
        let (stored, count) = self.unpack(state);
        let (decision, [index, count]) = self.decide_fields([stored, count], now, cost);
        let admitted = decision.is_allowed() && cost > 0;
        let state = if admitted {
            self.pack(index, count)
        } else {
            state
        };
        (decision, state)
    }

    #[inline]
    fn is_idle(&self, state: u64, now: Nanos) -> bool {
        let (stored, count) = self.unpack(state);
        count == 0 || now.as_nanos() / self.period > stored
    }

    fn carry_over(&self, state: u64, now: Nanos, to: &FixedWindow) -> u64 {
        super::window::carry_over(self, state, now, to)
    }
}

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn per_minute(limit: u64) -> FixedWindow {
        FixedWindow::new(&Quota::per_minute(limit).unwrap()).unwrap()
    }

    #[test]
    fn pack_round_trips() {
        for limit in [1, 2, 3, 255, 256, (1 << 35) - 1] {
            let fw = per_minute(limit);
            let max_index = Nanos::MAX.as_nanos() / fw.period;
            for index in [0, 1, 987_654, max_index] {
                for count in [0, 1, limit / 2, limit] {
                    let word = fw.pack(index, count);
                    assert_eq!(fw.unpack(word), (index, count));
                    assert_ne!(word, u64::MAX, "u64::MAX is reserved");
                }
            }
        }
    }

    #[test]
    fn counts_reset_at_the_boundary() {
        let fw = per_minute(3);
        let (d, state) = fw.decide(0, Nanos::from_nanos(59 * SEC), 3);
        assert!(d.is_allowed());
        assert_eq!(d.reset_after(), Duration::from_secs(1));
        let (d, _) = fw.decide(state, Nanos::from_nanos(59 * SEC + SEC / 2), 1);
        assert!(!d.is_allowed());
        assert_eq!(d.retry_after(), Duration::from_millis(500));
        assert_eq!(d.remaining(), 0);
        let (d, _) = fw.decide(state, Nanos::from_nanos(60 * SEC), 3);
        assert!(d.is_allowed());
    }

    #[test]
    fn idle_and_fresh() {
        let fw = per_minute(3);
        assert!(fw.is_idle(0, Nanos::ZERO));
        let state = fw.pack(2, 1);
        assert!(!fw.is_idle(state, Nanos::from_nanos(179 * SEC)));
        assert!(fw.is_idle(state, Nanos::from_nanos(180 * SEC)));
        assert_eq!(
            fw.decide(state, Nanos::from_nanos(200 * SEC), 2),
            fw.decide(0, Nanos::from_nanos(200 * SEC), 2)
        );
    }

    #[test]
    fn backwards_time_counts_in_the_stored_window() {
        let fw = per_minute(3);
        let state = fw.pack(2, 3); // full in window 2 (120 s .. 180 s)
        let (d, _) = fw.decide(state, Nanos::from_nanos(100 * SEC), 1);
        assert!(!d.is_allowed());
        assert_eq!(d.retry_after(), Duration::from_secs(80)); // until 180 s
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let fw = per_minute((1 << 35) - 1);
        for state in [0, 1, u64::MAX - 1, u64::MAX] {
            for now in [Nanos::ZERO, Nanos::MAX] {
                for cost in [0, 1, fw.limit, fw.limit + 1, u64::MAX] {
                    let t = fw.transition(state, now, cost);
                    let (d, _) = fw.decide(state, now, cost);
                    assert_eq!(d.is_allowed(), matches!(t, Transition::Allow { .. }));
                }
            }
        }
    }
}
