//! The sliding log's parameters and one key's log: the decision itself, on a log held under its
//! shard's lock.

use std::collections::VecDeque;

use crate::clock::Nanos;
use crate::decision::Decision;
use crate::quota::Quota;

/// The sliding log's parameters: `limit` units per `period`. A
/// [`KeyedSlidingLog`](super::KeyedSlidingLog) takes them from the quota it is built for
/// ([`KeyedSlidingLog::new`](super::KeyedSlidingLog::new) or
/// [`builder`](super::KeyedSlidingLog::builder)) and reports them with
/// [`KeyedSlidingLog::algorithm`](super::KeyedSlidingLog::algorithm).
///
/// ```
/// use tollgate::{Quota, SlidingLog};
/// let log = SlidingLog::new(&Quota::per_hour(5).unwrap());
/// assert_eq!(log.limit(), 5);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    pub(super) limit: u64,
    /// In nanoseconds.
    pub(super) period: u64,
}

/// The limit, and the period as a duration.
///
/// ```
/// use tollgate::{Quota, SlidingLog};
/// let log = SlidingLog::new(&Quota::per_day(3).unwrap());
/// assert_eq!(format!("{log:?}"), "SlidingLog { limit: 3, period: 86400s }");
/// ```
impl core::fmt::Debug for SlidingLog {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SlidingLog")
            .field("limit", &self.limit)
            .field("period", &self.period())
            .finish()
    }
}

impl SlidingLog {
    /// `quota.limit()` per `quota.period()` (the burst is not used: the log allows the whole
    /// limit at once, as the definition does).
    ///
    /// ```
    /// use tollgate::{Quota, SlidingLog};
    /// let log = SlidingLog::new(&Quota::per_minute(3).unwrap());
    /// assert_eq!(log.period(), std::time::Duration::from_secs(60));
    /// ```
    #[must_use]
    pub const fn new(quota: &Quota) -> SlidingLog {
        SlidingLog {
            limit: quota.limit(),
            period: quota.period_nanos(),
        }
    }

    /// Units admitted per period.
    ///
    /// ```
    /// # use tollgate::{Quota, SlidingLog};
    /// assert_eq!(SlidingLog::new(&Quota::per_hour(2).unwrap()).limit(), 2);
    /// ```
    #[must_use]
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The period.
    ///
    /// ```
    /// # use tollgate::{Quota, SlidingLog};
    /// assert_eq!(SlidingLog::new(&Quota::per_hour(2).unwrap()).period().as_secs(), 3600);
    /// ```
    #[must_use]
    pub const fn period(&self) -> core::time::Duration {
        core::time::Duration::from_nanos(self.period)
    }

    /// Whether the log holds nothing that still counts at `now` (and at any later time).
    pub(super) fn is_idle(&self, log: &Log, now: Nanos) -> bool {
        log.newest()
            .map_or(true, |newest| newest + self.period <= now.as_nanos())
    }

    /// The time a decision on `log` is made at: `now`, or the newest logged stamp if that is
    /// later (a request stamped before it is logged with it, as in the reference model).
    pub(super) fn time(&self, log: &Log, now: Nanos) -> u64 {
        now.as_nanos().max(log.newest().unwrap_or(0))
    }

    /// Units still in the window `(t − P, t]`, and the index of the first entry in it.
    pub(super) fn used(&self, log: &Log, t: u64) -> (u64, usize) {
        let mut expired = 0;
        let mut first = 0;
        for &(stamp, units) in &log.entries {
            if stamp + self.period > t {
                break;
            }
            expired += units;
            first += 1;
        }
        (log.units - expired, first)
    }

    /// Decides a request of `cost` at `now` on `log`, recording it if admitted. Entries are
    /// dropped only on an admission: then `t` becomes the newest stamp and no later decision on
    /// this log is made at an earlier time, so what left the window stays out of it.
    pub(super) fn decide(&self, log: &mut Log, now: Nanos, cost: u64) -> Decision {
        let (decision, admit) = self.judge(log, now, cost);
        if let Some((t, first)) = admit {
            log.drop_front(first);
            log.push(t, cost, self.limit);
        }
        decision
    }

    /// What [`decide`](SlidingLog::decide) would answer, without recording anything: whether a
    /// request of `cost` would be admitted now and when it would be, beside what remains now
    /// (see [`Decision::peeked`]).
    pub(super) fn peek(&self, log: &Log, now: Nanos, cost: u64) -> Decision {
        Decision::peeked(self.judge(log, now, cost).0, self.judge(log, now, 0).0)
    }

    /// The decision on `log` for a request of `cost` at `now`, and for an admission that
    /// records something, the stamp to log it at and how many old entries to drop first.
    fn judge(&self, log: &Log, now: Nanos, cost: u64) -> (Decision, Option<(u64, usize)>) {
        let t = self.time(log, now);
        let (used, first) = self.used(log, t);
        // Zero once everything has left the window.
        let until = |end: u64| Nanos::from_nanos(end.saturating_sub(now.as_nanos()));
        let reset = until(log.newest().map_or(0, |newest| newest + self.period));
        if cost == 0 || (cost <= self.limit && used + cost <= self.limit) {
            let remaining = self.limit - used - cost;
            return if cost == 0 {
                (
                    Decision::new(true, remaining, Nanos::ZERO, reset, self.limit),
                    None,
                )
            } else {
                // Logged at `t`, which becomes the newest stamp.
                let reset = until(t + self.period);
                let decision = Decision::new(true, remaining, Nanos::ZERO, reset, self.limit);
                (decision, Some((t, first)))
            };
        }
        let retry_after = if cost > self.limit {
            Nanos::MAX
        } else {
            // The oldest units must leave until `used − left + cost ≤ limit`: the request fits
            // one period after the entry that takes the count low enough.
            let mut need = used + cost - self.limit;
            let mut at = t;
            for &(stamp, units) in log.entries.iter().skip(first) {
                at = stamp + self.period;
                if units >= need {
                    break;
                }
                need -= units;
            }
            Nanos::from_nanos(at - now.as_nanos())
        };
        let decision = Decision::new(false, self.limit - used, retry_after, reset, self.limit);
        (decision, None)
    }
}

/// One key's log: admitted units, oldest first, run-length encoded by timestamp.
#[derive(Debug, Default)]
pub(super) struct Log {
    entries: VecDeque<(u64, u64)>,
    pub(super) units: u64,
}

impl Log {
    pub(super) fn newest(&self) -> Option<u64> {
        self.entries.back().map(|&(stamp, _)| stamp)
    }

    /// The entries, oldest first: each stamp and the units admitted at it.
    pub(super) fn entries(&self) -> impl ExactSizeIterator<Item = (u64, u64)> + '_ {
        self.entries.iter().copied()
    }

    /// Drops the `n` oldest entries.
    pub(super) fn drop_front(&mut self, n: usize) {
        for (_, units) in self.entries.drain(..n) {
            self.units -= units;
        }
    }

    /// Logs `units` admitted at `stamp`, in a log that holds at most `limit` units.
    pub(super) fn push(&mut self, stamp: u64, units: u64, limit: u64) {
        match self.entries.back_mut() {
            Some((last, n)) if *last == stamp => *n += units,
            _ => {
                let len = self.entries.len();
                if len == self.entries.capacity() {
                    // Grow by doubling (from 4), as a `VecDeque` would, but never past `limit`
                    // entries: each entry holds at least one unit, so a log never needs more,
                    // and its memory stays within `16 × limit` bytes.
                    let most = usize::try_from(limit).unwrap_or(usize::MAX);
                    let room = (2 * len).max(4).min(most).max(len + 1);
                    self.entries.reserve_exact(room - len);
                }
                self.entries.push_back((stamp, units));
            }
        }
        self.units += units;
    }

    /// Bytes of the log's entries (the log itself is in its shard's map).
    pub(super) fn bytes(&self) -> usize {
        self.entries.capacity() * core::mem::size_of::<(u64, u64)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_length_encoding_merges_equal_stamps() {
        let mut log = Log::default();
        log.push(5, 1, 10);
        log.push(5, 2, 10);
        log.push(7, 1, 10);
        assert_eq!(log.entries, VecDeque::from([(5, 3), (7, 1)]));
        assert_eq!(log.units, 4);
        log.drop_front(1);
        assert_eq!((log.entries.len(), log.units), (1, 1));
    }

    #[test]
    fn entries_never_take_more_room_than_the_limit() {
        // Capacities as entries arrive one unit at a time: doubling from 4, capped at the limit.
        for (limit, capacities) in [
            (1, vec![1]),
            (3, vec![3, 3, 3]),
            (5, vec![4, 4, 4, 4, 5]),
            (9, vec![4, 4, 4, 4, 8, 8, 8, 8, 9]),
            (
                16,
                [[4; 4], [8; 4]]
                    .concat()
                    .into_iter()
                    .chain([16; 8])
                    .collect(),
            ),
        ] {
            let mut log = Log::default();
            let mut seen = Vec::new();
            for stamp in 0..limit {
                log.push(stamp, 1, limit);
                seen.push(log.entries.capacity());
            }
            assert_eq!(seen, capacities, "limit {limit}");
            assert_eq!(log.bytes(), 16 * limit as usize);
        }
    }

    #[test]
    fn a_huge_limit_grows_by_doubling() {
        let mut log = Log::default();
        for stamp in 0..5 {
            log.push(stamp, 1, u64::MAX);
        }
        assert_eq!(log.entries.capacity(), 8);
    }
}
