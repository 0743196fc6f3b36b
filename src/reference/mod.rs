//! Reference models: single-threaded, allocation-happy, obviously correct.
//!
//! Each model is written straight from the definition of its algorithm, with unbounded integers
//! (`i128`/`u128`) and unbounded history where the definition keeps history. They exist to be
//! compared with: the property tests, the fuzz targets and the scenario tests replay the same
//! requests through a model and through the packed, lock-free algorithm and demand identical
//! decisions. They are public so that other backends and downstream tests can do the same.
//!
//! All models share the crate's conventions: a cost of 0 is always admitted (nothing
//! recorded), a cost above the capacity is denied, and a denial records nothing. Where time goes
//! backwards, each model says what it does; the packed algorithms must do exactly the same.
//!
//! | model | definition | its packed counterpart |
//! |---|---|---|
//! | [`VirtualScheduling`] | GCRA as the ITU-T I.371 virtual scheduling algorithm | [`Gcra`](crate::Gcra) |
//! | [`TokenBucket`] | a bucket of `burst` tokens refilled continuously, one per emission interval | [`Gcra`](crate::Gcra) |
//! | [`SlidingWindowCounter`] | per-window counts, previous window weighted by overlap | [`SlidingWindow`](crate::SlidingWindow) |
//! | [`FixedWindowCounter`] | per-window counts | [`FixedWindow`](crate::FixedWindow) |
//! | [`SlidingWindowLog`] | the timestamps of every admitted unit in the last period | (exact; no packed form) |
//! | [`LendingBucket`] | a token bucket that lends: reservations, waits and cancels | [`Gcra::reserve`](crate::Gcra::reserve) |
//! | [`all_or_nothing`] | several models, each asked alone; all record or none does | [`Layers`](crate::layers::Layers) |
//!
//! [`Differential`] drives a packed algorithm and a model side by side and reports the first
//! [`Mismatch`]. [`KeyedDifferential`] does the same for a keyed limiter, beside one direct
//! limiter per key it should hold, through reuse, overflow and eviction.
//!
//! ```
//! use tollgate::reference::{Model, TokenBucket, VirtualScheduling};
//! use tollgate::{Nanos, Quota};
//!
//! // GCRA and the token bucket are one limiter: fed the same requests, they decide alike.
//! let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap();
//! let (mut gcra, mut bucket) = (VirtualScheduling::new(&quota), TokenBucket::new(&quota));
//! for i in 0..1_000 {
//!     let (now, cost) = (Nanos::from_nanos(i * 41_000_000), 1 + i % 3);
//!     assert_eq!(gcra.decide(now, cost), bucket.decide(now, cost));
//! }
//! ```

mod differential;
mod keyed;
mod layers;
mod lending;

/// `body` as a snapshot whose checksum matches: for fuzzing what a restore reads past the
/// checksum, which random bytes almost never pass. The last 8 bytes of `body` are replaced.
///
/// ```
/// use tollgate::{Gcra, KeyedRateLimiter, Quota, SnapshotError};
/// let builder = || KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_hour(1).unwrap()));
/// let mut snapshot = builder().build().unwrap().snapshot();
/// snapshot[20] ^= 1; // a parameter of the quota
/// assert_eq!(builder().restore(&snapshot).unwrap_err(), SnapshotError::Checksum);
/// tollgate::reference::seal_snapshot(&mut snapshot);
/// assert_eq!(builder().restore(&snapshot).unwrap_err(), SnapshotError::Mismatch { what: "quota" });
/// ```
pub fn seal_snapshot(body: &mut Vec<u8>) {
    crate::snapshot::seal(body);
}

pub use differential::{Differential, Mismatch};
pub use keyed::KeyedDifferential;
pub use layers::{all_or_nothing, LayeredVerdict, Look};
pub use lending::{Booking, LendingBucket};

use std::collections::{BTreeMap, VecDeque};

use crate::clock::Nanos;
use crate::quota::Quota;

/// A model's answer: admitted or not, and the cost still admissible right after.
///
/// ```
/// use tollgate::reference::{Model, TokenBucket, Verdict};
/// use tollgate::{Nanos, Quota};
///
/// let mut bucket = TokenBucket::new(&Quota::per_second(2).unwrap());
/// assert_eq!(bucket.decide(Nanos::ZERO, 1), Verdict { allowed: true, remaining: 1 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Verdict {
    /// Whether the request was admitted.
    pub allowed: bool,
    /// The cost that could still be admitted at the same instant.
    pub remaining: u64,
}

/// A reference model of a rate limiter.
///
/// ```
/// use tollgate::reference::{FixedWindowCounter, Model};
/// use tollgate::{Nanos, Quota};
///
/// let mut model = FixedWindowCounter::new(&Quota::per_second(1).unwrap());
/// assert!(model.decide(Nanos::ZERO, 1).allowed);
/// assert!(!model.decide(Nanos::ZERO, 1).allowed);
/// ```
pub trait Model {
    /// Decides a request of `cost` at `now`, recording it if admitted.
    ///
    /// ```
    /// use tollgate::reference::{Model, TokenBucket, Verdict};
    /// use tollgate::{Nanos, Quota};
    ///
    /// let mut bucket = TokenBucket::new(&Quota::per_second(2).unwrap());
    /// assert_eq!(bucket.decide(Nanos::ZERO, 2), Verdict { allowed: true, remaining: 0 });
    /// assert_eq!(bucket.decide(Nanos::ZERO, 1), Verdict { allowed: false, remaining: 0 });
    /// // Half a second refills one token.
    /// let half = Nanos::from_nanos(500_000_000);
    /// assert_eq!(bucket.decide(half, 1), Verdict { allowed: true, remaining: 0 });
    /// ```
    fn decide(&mut self, now: Nanos, cost: u64) -> Verdict;
}

/// GCRA as the virtual scheduling algorithm of ITU-T I.371, section 4.4.2.
///
/// The state is the theoretical arrival time `TAT`; the parameters are the increment `I` (the
/// emission interval) and the limit `L = τ − I` (the tolerance beyond one interval). A cell
/// arriving at `t` is **non-conforming** if `TAT > t + L`; otherwise it conforms and
/// `TAT = max(TAT, t) + I`.
///
/// A request of cost `c` is `c` cells arriving together, admitted only if all conform (nothing is
/// recorded otherwise). The k-th cell sees `TAT_k = max(TAT, t) + (k − 1)·I`, which grows with `k`,
/// so all conform iff the last does: `max(TAT, t) + (c − 1)·I ≤ t + L`. The unit tests check this
/// closed form against the cell-by-cell loop.
///
/// Time that goes backwards needs nothing special: the definition already takes `max(TAT, t)`.
///
/// ```
/// use tollgate::reference::{Model, VirtualScheduling};
/// use tollgate::{Nanos, Quota};
///
/// let mut vsa = VirtualScheduling::new(&Quota::per_second(1).unwrap().with_burst(2).unwrap());
/// assert!(vsa.decide(Nanos::ZERO, 2).allowed);
/// assert!(!vsa.decide(Nanos::ZERO, 1).allowed);
/// ```
#[derive(Clone, Debug)]
pub struct VirtualScheduling {
    tat: i128,
    increment: i128,
    limit: i128,
    burst: u64,
}

impl VirtualScheduling {
    /// The model for `quota`, fresh (`TAT` at the epoch).
    ///
    /// ```
    /// let vsa = tollgate::reference::VirtualScheduling::new(&tollgate::Quota::per_second(3).unwrap());
    /// # let _ = vsa;
    /// ```
    #[must_use]
    pub fn new(quota: &Quota) -> VirtualScheduling {
        let increment = quota.emission_interval_nanos() as i128;
        VirtualScheduling {
            tat: 0,
            increment,
            limit: quota.tolerance_nanos() as i128 - increment,
            burst: quota.burst(),
        }
    }

    /// How many cells would conform at `t`: the largest `k` with `max(TAT, t) + (k − 1)·I ≤ t + L`.
    fn conforming(&self, t: i128) -> u64 {
        let slack = t + self.limit - self.tat.max(t);
        if slack < 0 {
            0
        } else {
            (slack / self.increment + 1) as u64
        }
    }
}

impl Model for VirtualScheduling {
    fn decide(&mut self, now: Nanos, cost: u64) -> Verdict {
        let t = now.as_nanos() as i128;
        let available = self.conforming(t);
        if cost == 0 {
            return Verdict {
                allowed: true,
                remaining: available,
            };
        }
        if cost > self.burst
            || self.tat.max(t) + (cost as i128 - 1) * self.increment > t + self.limit
        {
            return Verdict {
                allowed: false,
                remaining: available,
            };
        }
        self.tat = self.tat.max(t) + cost as i128 * self.increment;
        Verdict {
            allowed: true,
            remaining: available - cost,
        }
    }
}

/// A token bucket with lazy, continuous refill, counted in nanoseconds of refill.
///
/// The bucket holds at most `τ = burst × T` nanoseconds' worth of refill (`burst` tokens of `T`
/// each) and gains one nanosecond's worth per nanosecond. Its level is a function of time:
/// `level(t) = clamp(level + (t − last), 0, τ)`, the level recorded at `last` plus the refill
/// since, capped at full and at empty. A request of cost `c` needs `c × T`; it is admitted iff the
/// level at its time covers that, and then `level = level(t) − c × T`, `last = t`.
///
/// Time that goes backwards reads the same formula at the earlier time: the bucket as it stood
/// then, before the refill that came after (the level can only be lower).
///
/// ```
/// use tollgate::reference::{Model, TokenBucket};
/// use tollgate::{Nanos, Quota};
///
/// let mut bucket = TokenBucket::new(&Quota::per_second(10).unwrap());
/// assert!(bucket.decide(Nanos::ZERO, 10).allowed);
/// assert!(!bucket.decide(Nanos::from_nanos(99_999_999), 1).allowed);
/// assert!(bucket.decide(Nanos::from_nanos(100_000_000), 1).allowed);
/// ```
#[derive(Clone, Debug)]
pub struct TokenBucket {
    level: i128,
    last: i128,
    capacity: i128,
    token: i128,
    burst: u64,
}

impl TokenBucket {
    /// A full bucket for `quota`.
    ///
    /// ```
    /// let bucket = tollgate::reference::TokenBucket::new(&tollgate::Quota::per_minute(3).unwrap());
    /// # let _ = bucket;
    /// ```
    #[must_use]
    pub fn new(quota: &Quota) -> TokenBucket {
        TokenBucket {
            level: quota.tolerance_nanos() as i128,
            last: 0,
            capacity: quota.tolerance_nanos() as i128,
            token: quota.emission_interval_nanos() as i128,
            burst: quota.burst(),
        }
    }

    fn level_at(&self, t: i128) -> i128 {
        (self.level + (t - self.last)).clamp(0, self.capacity)
    }
}

impl Model for TokenBucket {
    fn decide(&mut self, now: Nanos, cost: u64) -> Verdict {
        let t = now.as_nanos() as i128;
        let level = self.level_at(t);
        let available = (level / self.token) as u64;
        let need = cost as i128 * self.token;
        if cost == 0 || cost > self.burst || need > level {
            return Verdict {
                allowed: cost == 0,
                remaining: available,
            };
        }
        self.level = level - need;
        self.last = t;
        Verdict {
            allowed: true,
            remaining: ((level - need) / self.token) as u64,
        }
    }
}

/// The sliding-window counter, from its definition: a count per window, every window kept.
///
/// At time `t` in window `w` (`e` into it), the estimate is `count[w−1] × (P − e) / P + count[w]`;
/// a request of cost `c` is admitted iff `estimate + c ≤ limit` (exactly, in rationals), and then
/// `count[w] += c`.
///
/// Time that goes backwards: a time before the newest window with an admission is read at the
/// start of that window.
///
/// ```
/// use tollgate::reference::{Model, SlidingWindowCounter};
/// use tollgate::{Nanos, Quota};
///
/// let mut model = SlidingWindowCounter::new(&Quota::per_minute(10).unwrap());
/// assert!(model.decide(Nanos::ZERO, 10).allowed);
/// // 30 s into the next window, half of the previous 10 still weigh: 5 more fit.
/// assert_eq!(model.decide(Nanos::from_nanos(90_000_000_000), 0).remaining, 5);
/// ```
#[derive(Clone, Debug)]
pub struct SlidingWindowCounter {
    counts: BTreeMap<u64, u64>,
    newest: u64,
    limit: u64,
    period: u64,
}

impl SlidingWindowCounter {
    /// The model for `quota`, with no counts.
    ///
    /// ```
    /// let m = tollgate::reference::SlidingWindowCounter::new(&tollgate::Quota::per_minute(3).unwrap());
    /// # let _ = m;
    /// ```
    #[must_use]
    pub fn new(quota: &Quota) -> SlidingWindowCounter {
        SlidingWindowCounter {
            counts: BTreeMap::new(),
            newest: 0,
            limit: quota.limit(),
            period: quota.period_nanos(),
        }
    }

    fn count(&self, window: Option<u64>) -> u128 {
        window
            .and_then(|w| self.counts.get(&w))
            .map_or(0, |&c| c as u128)
    }
}

impl Model for SlidingWindowCounter {
    fn decide(&mut self, now: Nanos, cost: u64) -> Verdict {
        let p = self.period as u128;
        let mut t = now.as_nanos() as u128;
        if t / p < self.newest as u128 {
            t = self.newest as u128 * p;
        }
        let w = (t / p) as u64;
        let e = t % p;
        let prev = self.count(w.checked_sub(1));
        let cur = self.count(Some(w));
        // Everything scaled by P: estimate × P = prev × (P − e) + cur × P.
        let weighted = prev * (p - e);
        let limit = self.limit as u128 * p;
        let remaining = |cur: u128| -> u64 {
            let used = weighted.div_ceil(p) + cur;
            (self.limit as u128).saturating_sub(used) as u64
        };
        let allowed =
            cost == 0 || (cost <= self.limit && weighted + (cur + cost as u128) * p <= limit);
        if !allowed || cost == 0 {
            return Verdict {
                allowed,
                remaining: remaining(cur),
            };
        }
        *self.counts.entry(w).or_insert(0) += cost;
        self.newest = self.newest.max(w);
        Verdict {
            allowed: true,
            remaining: remaining(cur + cost as u128),
        }
    }
}

/// The fixed-window counter, from its definition: a count per window, every window kept.
///
/// A request of cost `c` in window `w` is admitted iff `count[w] + c ≤ limit`. Time that goes
/// backwards: a time before the newest window with an admission counts in that window.
///
/// ```
/// use tollgate::reference::{FixedWindowCounter, Model};
/// use tollgate::{Nanos, Quota};
///
/// let mut model = FixedWindowCounter::new(&Quota::per_second(2).unwrap());
/// assert_eq!(model.decide(Nanos::ZERO, 2).remaining, 0);
/// assert!(model.decide(Nanos::from_nanos(1_000_000_000), 2).allowed);
/// ```
#[derive(Clone, Debug)]
pub struct FixedWindowCounter {
    counts: BTreeMap<u64, u64>,
    newest: u64,
    limit: u64,
    period: u64,
}

impl FixedWindowCounter {
    /// The model for `quota`, with no counts.
    ///
    /// ```
    /// let m = tollgate::reference::FixedWindowCounter::new(&tollgate::Quota::per_minute(3).unwrap());
    /// # let _ = m;
    /// ```
    #[must_use]
    pub fn new(quota: &Quota) -> FixedWindowCounter {
        FixedWindowCounter {
            counts: BTreeMap::new(),
            newest: 0,
            limit: quota.limit(),
            period: quota.period_nanos(),
        }
    }
}

impl Model for FixedWindowCounter {
    fn decide(&mut self, now: Nanos, cost: u64) -> Verdict {
        let w = (now.as_nanos() / self.period).max(self.newest);
        let count = self.counts.get(&w).copied().unwrap_or(0);
        let allowed = cost == 0 || (cost <= self.limit && count + cost <= self.limit);
        if !allowed || cost == 0 {
            return Verdict {
                allowed,
                remaining: self.limit - count,
            };
        }
        self.counts.insert(w, count + cost);
        self.newest = w;
        Verdict {
            allowed: true,
            remaining: self.limit - count - cost,
        }
    }
}

/// The exact sliding log: the timestamp of every admitted unit within the last period.
///
/// A request of cost `c` at time `t` is admitted iff the units logged in `(t − P, t]` plus `c` are
/// at most the limit; then `c` timestamps `t` are logged. The log never holds more than `limit`
/// entries: older ones are dropped when they leave the window.
///
/// Time that goes backwards: a time before the newest logged timestamp is read as that timestamp
/// (the request is logged as arriving with the newest one), which keeps the log sorted and makes
/// "at most `limit` units in any window of length `P`" hold for the logged times.
///
/// ```
/// use tollgate::reference::{Model, SlidingWindowLog};
/// use tollgate::{Nanos, Quota};
///
/// let mut log = SlidingWindowLog::new(&Quota::per_minute(3).unwrap());
/// let s = 1_000_000_000;
/// for t in [59 * s, 59 * s, 59 * s] {
///     assert!(log.decide(Nanos::from_nanos(t), 1).allowed);
/// }
/// // A minute has not passed since any of them.
/// assert!(!log.decide(Nanos::from_nanos(60 * s), 1).allowed);
/// assert!(log.decide(Nanos::from_nanos(119 * s), 3).allowed);
/// ```
#[derive(Clone, Debug)]
pub struct SlidingWindowLog {
    log: VecDeque<u64>,
    limit: u64,
    period: u64,
}

impl SlidingWindowLog {
    /// An empty log for `quota`.
    ///
    /// ```
    /// let log = tollgate::reference::SlidingWindowLog::new(&tollgate::Quota::per_hour(5).unwrap());
    /// assert!(log.is_empty());
    /// ```
    #[must_use]
    pub fn new(quota: &Quota) -> SlidingWindowLog {
        SlidingWindowLog {
            log: VecDeque::new(),
            limit: quota.limit(),
            period: quota.period_nanos(),
        }
    }

    /// Whether nothing is logged.
    ///
    /// ```
    /// use tollgate::reference::{Model, SlidingWindowLog};
    /// use tollgate::{Nanos, Quota};
    ///
    /// let mut log = SlidingWindowLog::new(&Quota::per_hour(5).unwrap());
    /// assert!(log.is_empty());
    /// assert!(log.decide(Nanos::ZERO, 0).allowed); // a peek logs nothing
    /// assert!(log.is_empty());
    /// assert!(log.decide(Nanos::ZERO, 1).allowed);
    /// assert!(!log.is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }
}

impl Model for SlidingWindowLog {
    fn decide(&mut self, now: Nanos, cost: u64) -> Verdict {
        let newest = self.log.back().copied().unwrap_or(0);
        let t = now.as_nanos().max(newest);
        let in_window = self
            .log
            .iter()
            .filter(|&&stamp| stamp as u128 + self.period as u128 > t as u128)
            .count() as u64;
        let remaining = self.limit - in_window;
        if cost == 0 || cost > remaining {
            return Verdict {
                allowed: cost == 0,
                remaining,
            };
        }
        // The log is sorted and `t` is at least its newest entry, so the expired ones are at the
        // front and stay expired for every later request.
        while self
            .log
            .front()
            .is_some_and(|&stamp| stamp as u128 + self.period as u128 <= t as u128)
        {
            self.log.pop_front();
        }
        self.log.extend(std::iter::repeat(t).take(cost as usize));
        Verdict {
            allowed: true,
            remaining: remaining - cost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The virtual scheduling algorithm, one cell at a time, for small costs.
    fn cell_by_cell(vsa: &mut VirtualScheduling, t: i128, cost: u64) -> bool {
        let mut tat = vsa.tat;
        for _ in 0..cost {
            if tat > t + vsa.limit {
                return false;
            }
            tat = tat.max(t) + vsa.increment;
        }
        vsa.tat = tat;
        true
    }

    #[test]
    fn closed_form_matches_cell_by_cell() {
        let quota = Quota::per_second(7).unwrap().with_burst(5).unwrap();
        let mut closed = VirtualScheduling::new(&quota);
        let mut cells = VirtualScheduling::new(&quota);
        let mut t: i128 = 0;
        for step in 0..2000u64 {
            t += ((step * 7919) % 400_000_000) as i128 - 100_000_000;
            let t = t.max(0);
            let cost = step % 7;
            let a = closed.decide(Nanos::from_nanos(t as u64), cost).allowed;
            let b = cost <= closed.burst && cell_by_cell(&mut cells, t, cost);
            assert_eq!(a, b, "step {step}, t {t}, cost {cost}");
            assert_eq!(closed.tat, cells.tat);
        }
    }

    #[test]
    fn log_never_holds_more_than_the_limit() {
        let mut log = SlidingWindowLog::new(&Quota::per_second(3).unwrap());
        for i in 0..100u64 {
            log.decide(Nanos::from_nanos(i * 100_000_000), 1 + i % 3);
            assert!(log.log.len() <= 3);
        }
    }
}
