//! The sliding-window counter: a fixed-window count, smoothed by the previous window's count
//! weighted by how much of it the sliding window still covers.
//!
//! # The word
//!
//! With `k` = the bits needed for the limit (`⌈log2(limit + 1)⌉`):
//!
//! ```text
//!  63                        2k 2k-1          k k-1            0
//! ┌────────────────────────────┬────────────────┬────────────────┐
//! │ window index (64 − 2k bits)│ previous count │ current count  │
//! └────────────────────────────┴────────────────┴────────────────┘
//! ```
//!
//! The window index is `⌊t / period⌋` for the time `t` of the last write. The quota is refused at
//! construction unless the index of every representable time fits below the field's all-ones
//! pattern (see [`SlidingWindow::new`]): an index never wraps, and the word `u64::MAX` never occurs.
//! The all-zero word (window 0, no counts) is the fresh state.
//!
//! # The transition
//!
//! At time `now` in window `w`, `e` nanoseconds into it, with `prev` counted in window `w − 1` and
//! `cur` in window `w`, the sliding window `(now − P, now]` covers the fraction `(P − e) / P` of the
//! previous window, and the estimated count is
//!
//! ```text
//! rate = prev × (P − e) / P + cur
//! ```
//!
//! A request of cost `c` is admitted iff **`rate + c ≤ limit`**, compared exactly in integers
//! (`prev × (P − e) + (cur + c) × P ≤ limit × P`, in 128 bits). This is the strict form: with
//! requests spread evenly, the estimate never exceeds the limit, where the looser `rate < limit`
//! lets through up to one request more per window. On admission `cur += c`; when `now` has moved
//! into the next window the counts shift first (`prev = cur, cur = 0`), and after two or more
//! windows both are zero.
//!
//! `retry_after` is the first nanosecond at which the same request fits, found by solving the
//! inequality above for `e` (in this window, then the next), rounded up. `reset_after` is the end
//! of the last window whose count still weighs.
//!
//! # Time that goes backwards
//!
//! A `now` before the stored window is evaluated at the start of the stored window: both counts
//! as they stand, the previous one at full weight. That is the most the state can weigh, so an
//! early request is never admitted where a later one would not be.

use core::time::Duration;

use super::window::{position, Layout, Position};
use super::{Algorithm, Transition};
use crate::clock::Nanos;
use crate::decision::Decision;
use crate::quota::{Quota, QuotaError};

/// The sliding-window counter: "`limit` per `period`", with the previous window weighted by its
/// overlap with the sliding window. See the [module docs](self) for the layout and the formula.
///
/// ```
/// use tollgate::{Algorithm, Nanos, Quota, SlidingWindow};
///
/// // 10 per minute, all 10 used in the first minute.
/// let sw = SlidingWindow::new(&Quota::per_minute(10).unwrap()).unwrap();
/// let second = 1_000_000_000;
/// let (full, state) = sw.decide(0, Nanos::from_nanos(30 * second), 10);
/// assert_eq!(full.remaining(), 0);
///
/// // Halfway through the next minute, half of the previous 10 still weigh: 5 fit, not 6.
/// let halfway = Nanos::from_nanos(90 * second);
/// assert_eq!(sw.decide(state, halfway, 0).0.remaining(), 5);
/// assert!(!sw.decide(state, halfway, 6).0.is_allowed());
/// assert!(sw.decide(state, halfway, 5).0.is_allowed());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingWindow {
    period: u64,
    limit: u64,
    layout: Layout,
}

/// A word unpacked and moved to the window of the decision.
#[derive(Clone, Copy, Debug)]
struct View {
    at: Position,
    prev: u64,
    cur: u64,
}

/// The limit per window, and the window as a duration.
///
/// ```
/// use tollgate::{Quota, SlidingWindow};
/// let window = SlidingWindow::new(&Quota::per_minute(10).unwrap()).unwrap();
/// assert_eq!(format!("{window:?}"), "SlidingWindow { limit: 10, period: 60s }");
/// ```
impl core::fmt::Debug for SlidingWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SlidingWindow")
            .field("limit", &self.limit)
            .field("period", &core::time::Duration::from_nanos(self.period))
            .finish()
    }
}

impl SlidingWindow {
    const NAME: &'static str = "sliding-window counter";

    /// A sliding-window counter admitting `quota.limit()` per `quota.period()`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::WindowLimitTooLarge`] if two counts of the limit and a non-wrapping window
    /// index do not fit in 64 bits together; the error names the largest limit that does. With
    /// one-second windows that is 32 767 per second, with one-minute windows 262 143 per minute.
    ///
    /// `SlidingWindow::try_from(quota)` is the same, for code generic over `TryFrom<Quota>`.
    ///
    /// ```
    /// use tollgate::{Quota, SlidingWindow};
    /// assert!(SlidingWindow::new(&Quota::per_second(32_767).unwrap()).is_ok());
    /// let too_many = Quota::per_second(32_768).unwrap();
    /// assert!(SlidingWindow::new(&too_many).is_err());
    /// assert_eq!(SlidingWindow::try_from(too_many), SlidingWindow::new(&too_many));
    /// ```
    pub const fn new(quota: &Quota) -> Result<SlidingWindow, QuotaError> {
        match Layout::new(SlidingWindow::NAME, quota, 2) {
            Ok(layout) => Ok(SlidingWindow {
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
    /// use tollgate::{Algorithm, SlidingWindow, Quota};
    /// let window = SlidingWindow::new(&Quota::per_minute(10).unwrap()).unwrap();
    /// assert_eq!(window.window(), Duration::from_secs(60));
    /// assert_eq!(window.capacity(), 10);
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
    pub(crate) const fn from_parts(period: u64, limit: u64) -> SlidingWindow {
        SlidingWindow {
            period,
            limit,
            layout: Layout {
                count_bits: super::count_bits(limit),
            },
        }
    }

    /// Packs a window index and two counts.
    #[inline]
    fn pack(&self, index: u64, prev: u64, cur: u64) -> u64 {
        let k = self.layout.count_bits;
        (index << (2 * k)) | (prev << k) | cur
    }

    /// Unpacks a word into (window index, previous count, current count).
    #[inline]
    fn unpack(&self, word: u64) -> (u64, u64, u64) {
        let k = self.layout.count_bits;
        let mask = self.layout.count_mask();
        (word >> (2 * k), (word >> k) & mask, word & mask)
    }

    /// Gives back a hold of `cost` that stored `after`, from the word as it is now: the cost
    /// leaves the count it went into, the current window's or, once the window has moved on,
    /// the previous one's; a hold two windows old weighs nothing and stays. Exact: the counts
    /// add up, whatever was admitted since.
    #[inline]
    pub(crate) fn release(&self, state: u64, after: u64, cost: u64) -> u64 {
        let (index, prev, cur) = self.unpack(state);
        let (held, _, _) = self.unpack(after);
        if index == held {
            self.pack(index, prev, cur.saturating_sub(cost))
        } else if index == held.wrapping_add(1) {
            self.pack(index, prev.saturating_sub(cost), cur)
        } else {
            state
        }
    }

    /// The word seen from `now`: counts shifted into the window of the decision.
    #[inline]
    fn view(&self, word: u64, now: Nanos) -> View {
        let (stored, prev, cur) = self.unpack(word);
        self.view_fields([stored, prev, cur], now)
    }

    /// The fields `[window index, previous count, current count]` seen from `now`.
    #[inline]
    fn view_fields(&self, [stored, prev, cur]: [u64; 3], now: Nanos) -> View {
        let at = position(self.period, stored, now);
        let (prev, cur) = match at.ahead {
            0 => (prev, cur),
            1 => (cur, 0),
            _ => (0, 0),
        };
        View { at, prev, cur }
    }

    /// `prev × (P − e)`: the previous window's weight, scaled by P.
    #[inline]
    fn weighted_prev(&self, view: &View) -> u128 {
        view.prev as u128 * (self.period - view.at.elapsed) as u128
    }

    #[inline]
    fn admits(&self, view: &View, cost: u64) -> bool {
        let p = self.period as u128;
        self.weighted_prev(view) + (view.cur + cost) as u128 * p <= self.limit as u128 * p
    }

    /// The cost that still fits at the view's instant: `limit − cur − ⌈prev × (P − e) / P⌉`.
    fn remaining(&self, view: &View) -> u64 {
        let weighted = self.weighted_prev(view).div_ceil(self.period as u128) as u64;
        self.limit.saturating_sub(view.cur).saturating_sub(weighted)
    }

    /// Time from `now` until a request of `cost` (at most the limit) fits, for a denied view.
    fn retry_after(&self, view: &View, cost: u64) -> Nanos {
        let p = self.period as u128;
        // Later in this window: prev × (P − e) ≤ (limit − cur − cost) × P.
        if view.prev > 0 && view.cur + cost <= self.limit {
            let room = (self.limit - view.cur - cost) as u128 * p / view.prev as u128;
            if room < p {
                let e = (p - room) as u64; // > elapsed, since the view was denied
                return Nanos::from_nanos(view.at.delay + (e - view.at.elapsed));
            }
        }
        // In the next window, where `cur` becomes the previous count:
        // cur × (P − e) ≤ (limit − cost) × P; at its end nothing weighs any more.
        let room = if view.cur == 0 {
            p
        } else {
            ((self.limit - cost) as u128 * p / view.cur as u128).min(p)
        };
        let e = (p - room) as u64;
        Nanos::from_nanos(view.at.delay + (self.period - view.at.elapsed) + e)
    }

    /// [`Algorithm::decide`] on the unpacked fields `[window index, previous count, current
    /// count]`: the specification of the packed word's transition, and of any other store's
    /// (the Redis script's). The fields returned are those to store, the same as given where
    /// nothing is recorded.
    #[inline]
    pub(crate) fn decide_fields(
        &self,
        fields: [u64; 3],
        now: Nanos,
        cost: u64,
    ) -> (Decision, [u64; 3]) {
        let view = self.view_fields(fields, now);
        let (allowed, retry_after, after) = if cost > self.limit {
            (false, Nanos::MAX, view)
        } else if cost == 0 || self.admits(&view, cost) {
            let after = View {
                cur: view.cur + cost,
                ..view
            };
            (true, Nanos::ZERO, after)
        } else {
            (false, self.retry_after(&view, cost), view)
        };
        let decision = Decision::new(
            allowed,
            self.remaining(&after),
            retry_after,
            self.reset_after(&after),
            self.limit,
        );
        let stored = if allowed && cost > 0 {
            [after.at.index, after.prev, after.cur]
        } else {
            fields
        };
        (decision, stored)
    }

    /// The parameters a snapshot records: a restore requires the same.
    pub(crate) const fn snapshot_params(&self) -> [u64; 3] {
        [self.period, self.limit, 0]
    }

    /// A saved word moved onto a clock on which the saving clock's `t` reads `t + shift`. An
    /// old window spans up to two of the new clock's windows: each count is put in both, and
    /// the word is of the later of the windows its counts reach, so that every count weighs at
    /// least as much, at every moment, as it did in its old window. `None` when nothing weighs
    /// at `now` any more.
    pub(crate) fn rebase(&self, state: u64, shift: i128, now: Nanos) -> Option<u64> {
        let (stored, prev, cur) = self.unpack(state);
        let period = self.period as i128;
        // The new windows each old one spans, first and last, with its count.
        let spans = [(stored as i128 - 1, prev), (stored as i128, cur)].map(|(window, count)| {
            let start = window * period + shift;
            let first = start.div_euclid(period);
            let last = (start + period - 1).div_euclid(period);
            (first, last, if window < 0 { 0 } else { count })
        });
        let latest = spans.iter().filter(|s| s.2 > 0).map(|s| s.1).max()?;
        let index = (now.as_nanos() / self.period) as i128;
        if latest < index - 1 {
            return None;
        }
        // A window before the new clock's first (when it started less than a window ago)
        // weighs as the previous count of its first.
        let latest = latest.max(0);
        let in_window = |w: i128| -> u64 {
            spans
                .iter()
                .filter(|&&(first, last, _)| first <= w && w <= last)
                .map(|s| s.2)
                .sum()
        };
        let (prev, cur) = (in_window(latest - 1), in_window(latest));
        // Never past the window of the last representable time (the layout's bound).
        let latest = (latest as u64).min(Nanos::MAX.as_nanos() / self.period);
        Some(self.pack(latest, prev.min(self.limit), cur.min(self.limit)))
    }

    /// Time from `now` until nothing weighs any more.
    fn reset_after(&self, view: &View) -> Nanos {
        let until_next = view.at.delay + (self.period - view.at.elapsed);
        Nanos::from_nanos(if view.cur > 0 {
            until_next + self.period
        } else if view.prev > 0 {
            until_next
        } else {
            0
        })
    }
}

impl TryFrom<Quota> for SlidingWindow {
    type Error = QuotaError;

    fn try_from(quota: Quota) -> Result<SlidingWindow, QuotaError> {
        SlidingWindow::new(&quota)
    }
}

impl TryFrom<&Quota> for SlidingWindow {
    type Error = QuotaError;

    fn try_from(quota: &Quota) -> Result<SlidingWindow, QuotaError> {
        SlidingWindow::new(quota)
    }
}

impl Algorithm for SlidingWindow {
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
        let view = self.view(state, now);
        if self.admits(&view, cost) {
            // cur + cost <= limit: it fits its field.
            Transition::Allow {
                state: self.pack(view.at.index, view.prev, view.cur + cost),
            }
        } else {
            Transition::Deny {
                retry_after: self.retry_after(&view, cost),
            }
        }
    }

    #[inline]
    fn decide(&self, state: u64, now: Nanos, cost: u64) -> (Decision, u64) {
        let (stored, prev, cur) = self.unpack(state);
        let (decision, [index, prev, cur]) = self.decide_fields([stored, prev, cur], now, cost);
        let admitted = decision.is_allowed() && cost > 0;
        (
            decision,
            if admitted {
                self.pack(index, prev, cur)
            } else {
                state
            },
        )
    }

    #[inline]
    fn is_idle(&self, state: u64, now: Nanos) -> bool {
        let (stored, prev, cur) = self.unpack(state);
        let index = now.as_nanos() / self.period;
        (prev == 0 && cur == 0)
            || index >= stored.saturating_add(2)
            || (index == stored.saturating_add(1) && cur == 0)
    }

    fn carry_over(&self, state: u64, now: Nanos, to: &SlidingWindow) -> u64 {
        super::window::carry_over(self, state, now, to)
    }
}

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn per_minute(limit: u64) -> SlidingWindow {
        SlidingWindow::new(&Quota::per_minute(limit).unwrap()).unwrap()
    }

    #[test]
    fn pack_round_trips() {
        for limit in [1, 2, 3, 100, 127, 128, 262_143] {
            let sw = per_minute(limit);
            let max_index = Nanos::MAX.as_nanos() / sw.period;
            for index in [0, 1, 12_345, max_index] {
                for prev in [0, 1, limit / 2, limit] {
                    for cur in [0, 1, limit / 3, limit] {
                        let word = sw.pack(index, prev, cur);
                        assert_eq!(sw.unpack(word), (index, prev, cur));
                        assert_ne!(word, u64::MAX, "u64::MAX is reserved");
                    }
                }
            }
        }
    }

    #[test]
    fn the_fresh_word_is_zero() {
        let sw = per_minute(10);
        assert_eq!(sw.unpack(0), (0, 0, 0));
        assert!(sw.is_idle(0, Nanos::ZERO));
        assert!(sw.is_idle(0, Nanos::MAX));
    }

    #[test]
    fn seed_scenario_weighted_count_denies() {
        // Limit 10 per minute; 9 in the previous window, 5 in the current, a request 25% into
        // the current window: 9 × 0.75 + 5 = 11.75, plus the request 12.75 > 10: denied.
        let sw = per_minute(10);
        let state = sw.pack(1, 9, 5);
        let now = Nanos::from_nanos(75 * SEC); // window 1 starts at 60 s; 15 s is 25%
        assert_eq!(sw.view(state, now).at.elapsed, 15 * SEC);
        let (d, s) = sw.decide(state, now, 1);
        assert!(!d.is_allowed());
        assert_eq!(s, state);
        // Nothing remains: ⌈6.75⌉ + 5 = 12 > 10.
        assert_eq!(d.remaining(), 0);
        // It fits once 9 × (60 − e) / 60 ≤ 10 − 5 − 1 = 4, i.e. e ≥ 60 − 240/9 = 33.33 s:
        // e = 60 s − ⌊240 s / 9⌋ = 33.333333334 s, 18.333333334 s from now.
        assert_eq!(d.retry_after(), Duration::from_nanos(18_333_333_334));
        // Reset: the current count weighs until the end of the next window (180 s).
        assert_eq!(d.reset_after(), Duration::from_secs(105));
    }

    #[test]
    fn a_costly_request_waits_within_the_window() {
        // Limit 10 per minute; 8 in the previous window, 4 in the current, a request of cost 3
        // 25% into the current window: 8 × 0.75 + 4 + 3 = 13 > 10, denied. It fits once
        // 8 × (60 − e) / 60 ≤ 10 − 4 − 3 = 3, i.e. e ≥ 60 − 180/8 = 37.5 s: 22.5 s from now,
        // still in this window. The wait depends on the whole cost: for a cost of 1 it would be
        // 7.5 s.
        let sw = per_minute(10);
        let state = sw.pack(1, 8, 4);
        let now = 75 * SEC;
        let (d, s) = sw.decide(state, Nanos::from_nanos(now), 3);
        assert!(!d.is_allowed());
        assert_eq!(s, state);
        // ⌈8 × 0.75⌉ = 6 and 4 counted: nothing remains.
        assert_eq!(d.remaining(), 0);
        assert_eq!(d.retry_after(), Duration::from_millis(22_500));
        let admits = |t: u64| sw.decide(state, Nanos::from_nanos(t), 3).0.is_allowed();
        let wait = 22 * SEC + SEC / 2;
        assert!(!admits(now + wait - 1));
        assert!(admits(now + wait));
    }

    #[test]
    fn uniform_traffic_at_the_limit() {
        // 10 per minute, one request every 6 s (exactly the limit) for ten minutes.
        // Window 0 (0-54 s): no previous count, all 10 admitted.
        // Window 1: at 60 s the previous 10 weigh fully: 10 + 1 > 10, denied. At 60 + 6j s
        // (j = 1..9) they weigh 10 - j, and j - 1 were admitted since: 10 - j + (j - 1) + 1 = 10,
        // admitted. 9 admitted.
        // Windows 2..9: 9 previous. At the start 9 + 1 = 10, admitted; at +6 s,
        // 8.1 + 1 + 1 = 10.1, denied; at +6i s (i = 2..9), 9 - 0.9i + (i - 1) + 1 = 9 + 0.1i,
        // admitted. 9 admitted in each.
        // Total 10 + 9 × 9 = 91: the strict check keeps every estimate at or below the limit,
        // so uniform traffic at the limit loses one request per window to the estimate's lag.
        let sw = per_minute(10);
        let mut state = 0;
        let mut admitted = 0;
        for i in 0..100u64 {
            if let Transition::Allow { state: s } =
                sw.transition(state, Nanos::from_nanos(i * 6 * SEC), 1)
            {
                state = s;
                admitted += 1;
            }
        }
        assert_eq!(admitted, 91);
    }

    #[test]
    fn idle_after_the_counts_expire() {
        let sw = per_minute(10);
        let state = sw.pack(3, 4, 2); // written in window 3 (180 s .. 240 s)
        assert!(!sw.is_idle(state, Nanos::from_nanos(200 * SEC)));
        assert!(!sw.is_idle(state, Nanos::from_nanos(250 * SEC))); // cur weighs as prev
        assert!(sw.is_idle(state, Nanos::from_nanos(300 * SEC)));
        let no_cur = sw.pack(3, 4, 0);
        assert!(sw.is_idle(no_cur, Nanos::from_nanos(240 * SEC)));
        // An idle word decides like the fresh one, now and later.
        for t in [300, 301, 400] {
            let now = Nanos::from_nanos(t * SEC);
            assert_eq!(sw.decide(state, now, 3), sw.decide(0, now, 3));
        }
    }

    #[test]
    fn backwards_time_counts_everything() {
        let sw = per_minute(10);
        let state = sw.pack(3, 6, 4);
        // 170 s is in window 2: evaluated at 180 s with the previous count at full weight:
        // 6 + 4 = 10, nothing fits, and the wait starts from 180 s.
        let (d, s) = sw.decide(state, Nanos::from_nanos(170 * SEC), 1);
        assert!(!d.is_allowed());
        assert_eq!((s, d.remaining()), (state, 0));
        // 6 × (60 − e) ≤ (10 − 4 − 1) × 60 ⟺ e ≥ 10 s: 190 s, 20 s from 170 s.
        assert_eq!(d.retry_after(), Duration::from_secs(20));
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let sw = per_minute(262_143);
        let tiny =
            SlidingWindow::new(&Quota::new(1, Duration::from_nanos(1 << 40)).unwrap()).unwrap();
        for alg in [sw, tiny] {
            for state in [0, 1, u64::MAX - 1, u64::MAX, 0x5555_5555_5555_5555] {
                for now in [Nanos::ZERO, Nanos::from_nanos(12345), Nanos::MAX] {
                    for cost in [0, 1, alg.limit, alg.limit + 1, u64::MAX] {
                        let t = alg.transition(state, now, cost);
                        let (d, _) = alg.decide(state, now, cost);
                        assert_eq!(d.is_allowed(), matches!(t, Transition::Allow { .. }));
                        alg.is_idle(state, now);
                    }
                }
            }
        }
    }

    #[test]
    fn rebased_counts_weigh_at_least_as_long() {
        let ms = 1_000_000;
        let window = SlidingWindow::new(&Quota::new(1, Duration::from_millis(1)).unwrap()).unwrap();
        // One request in window 0, seen 1.121 ms later on a clock that has just started: its
        // old window ended 0.121 ms before the new clock's epoch, but it still weighs for 0.879
        // ms, as the previous count of the new clock's first window.
        let (_, saved) = window.decide(0, Nanos::from_nanos(ms / 5), 1);
        let rebased = window.rebase(saved, -1_121_000, Nanos::ZERO).unwrap();
        assert_eq!(window.unpack(rebased), (0, 1, 0));
        assert!(!window.decide(rebased, Nanos::ZERO, 1).0.is_allowed());
        // Windows that line up move exactly; a shift of half a window puts the count in both
        // windows its old one overlaps.
        assert_eq!(
            window.unpack(
                window
                    .rebase(saved, 7 * ms as i128, Nanos::from_nanos(7 * ms))
                    .unwrap()
            ),
            (7, 0, 1)
        );
        let half = window
            .rebase(
                saved,
                7 * ms as i128 + ms as i128 / 2,
                Nanos::from_nanos(7 * ms),
            )
            .unwrap();
        assert_eq!(window.unpack(half), (8, 1, 1));
        // Two windows later nothing weighs.
        assert_eq!(window.rebase(saved, 0, Nanos::from_nanos(2 * ms)), None);
    }
}
