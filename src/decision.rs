//! What a limiter tells its caller: a [`Decision`], or why a request was refused.

use core::fmt;
use core::time::Duration;

use crate::clock::Nanos;

/// The full answer to one request: whether it was admitted, and the numbers a server puts in its
/// `RateLimit-*` and `Retry-After` headers.
///
/// A decision also comes from a peek ([`RateLimiter::peek_n`](crate::RateLimiter::peek_n)),
/// which says whether a request would be admitted now, and when it would be if not, without
/// changing anything.
///
/// # HTTP headers
///
/// HTTP carries these times in whole seconds. Take them from
/// [`retry_after_secs`](Decision::retry_after_secs) and
/// [`reset_after_secs`](Decision::reset_after_secs), which round up, not from
/// `retry_after().as_secs()`, which rounds down: a wait of 0.4 s would go out as
/// `Retry-After: 0`, and a client that obeys it comes straight back to be refused again.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // 2 per minute per client: a burst of 2, then one every 30 s.
/// let clock = ManualClock::new();
/// let per_client = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_minute(2)?))
///     .clock(&clock)
///     .build()?;
/// let mut responses = Vec::new();
/// for _ in 0..3 {
///     let d = per_client.decide_key("203.0.113.7", 1)?;
///     let mut headers = vec![
///         ("RateLimit-Limit", d.limit()),
///         ("RateLimit-Remaining", d.remaining()),
///         ("RateLimit-Reset", d.reset_after_secs()),
///     ];
///     if !d.is_allowed() {
///         // With 429 Too Many Requests.
///         headers.push(("Retry-After", d.retry_after_secs()));
///     }
///     responses.push(headers);
///     clock.advance(Duration::from_millis(400));
/// }
/// let common = [("RateLimit-Limit", 2), ("RateLimit-Remaining", 0)];
/// assert_eq!(responses[0], [("RateLimit-Limit", 2), ("RateLimit-Remaining", 1), ("RateLimit-Reset", 30)]);
/// assert_eq!(responses[1], [common[0], common[1], ("RateLimit-Reset", 60)]); // 59.6 s
/// // Denied at 0.8 s: one more fits in 29.2 s, and the state is fresh in 59.2 s.
/// assert_eq!(responses[2], [common[0], common[1], ("RateLimit-Reset", 60), ("Retry-After", 30)]);
/// # Ok(())
/// # }
/// ```
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(2)?), &clock);
///
/// let first = limiter.decide(1)?;
/// assert!(first.is_allowed());
/// assert_eq!(first.remaining(), 1);
/// assert_eq!(first.reset_after(), Duration::from_millis(500));
///
/// limiter.decide(1)?;
/// let third = limiter.decide(1)?;
/// assert!(!third.is_allowed());
/// assert_eq!(third.retry_after(), Duration::from_millis(500));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "a decision does nothing by itself: act on `is_allowed()`"]
pub struct Decision {
    /// [`ALLOWED`] and [`OVERFLOW`]. A whole word rather than two `bool`s: with `bool`s, a
    /// `Decision` has padding, and the copies that carry it out of the compare-and-swap loop (in
    /// tuples and `Result`s) moved it with overlapping loads and stores, which defeat
    /// store-to-load forwarding (a stall of a dozen cycles or more): `decide_key` took about a
    /// fifth longer (`cargo bench --bench paired -- "keyed 100k uniform: decide_key"`).
    flags: u64,
    remaining: u64,
    retry_after: Nanos,
    reset_after: Nanos,
    limit: u64,
}

/// [`Decision::flags`]: the request was admitted.
const ALLOWED: u64 = 1;
/// [`Decision::flags`]: the key found no room in its table, and the overflow policy decided.
const OVERFLOW: u64 = 2;

impl Decision {
    /// Assembles a decision; algorithms are the only callers.
    pub(crate) const fn new(
        allowed: bool,
        remaining: u64,
        retry_after: Nanos,
        reset_after: Nanos,
        limit: u64,
    ) -> Decision {
        Decision {
            flags: allowed as u64 * ALLOWED,
            remaining,
            retry_after,
            reset_after,
            limit,
        }
    }

    /// The denial of a new key that found no room in a keyed store: nothing can be admitted
    /// until room frees up, in `wait`, and then the whole `limit` can, so `wait` is both the
    /// retry and the reset time (a reset time of 0 beside nothing remaining would tell a client
    /// to come straight back).
    pub(crate) const fn no_room(wait: Nanos, limit: u64) -> Decision {
        Decision::new(false, 0, wait, wait, limit).overflowed()
    }

    /// This decision with other times: for a backend that computed them in another unit.
    #[cfg(feature = "redis")]
    pub(crate) const fn with_times(mut self, retry_after: Nanos, reset_after: Nanos) -> Decision {
        self.retry_after = retry_after;
        self.reset_after = reset_after;
        self
    }

    /// This decision, marked as the overflow policy's: the key found no room.
    pub(crate) const fn overflowed(mut self) -> Decision {
        self.flags |= OVERFLOW;
        self
    }

    /// What a peek reports: whether the request of `request` (a decision that was not applied)
    /// would be admitted and when it would be, beside the state as it stands (`now`, the same
    /// state's decision for a cost of 0): what remains and when it is fresh, nothing consumed.
    pub(crate) const fn peeked(request: Decision, now: Decision) -> Decision {
        Decision {
            flags: request.flags,
            remaining: now.remaining,
            retry_after: request.retry_after,
            reset_after: now.reset_after,
            limit: now.limit,
        }
    }

    /// This decision's numbers for a request that `denied` refused: its wait and its kind.
    pub(crate) const fn refused_by(self, denied: Denied) -> Decision {
        let refused = Decision::new(
            false,
            self.remaining,
            denied.wait(),
            self.reset_after,
            self.limit,
        );
        if denied.is_overflow() {
            refused.overflowed()
        } else {
            refused
        }
    }

    /// The decision as a `check` result: `Ok`, or the denial with its wait.
    pub(crate) const fn into_check(self) -> Result<(), Denied> {
        if self.is_allowed() {
            Ok(())
        } else {
            Err(if self.is_overflow() {
                Denied::no_room(self.retry_after)
            } else {
                Denied::new(self.retry_after)
            })
        }
    }

    /// Whether the request was admitted (and, for a cost above 0, recorded).
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(1).unwrap());
    /// assert!(limiter.decide(1).unwrap().is_allowed());
    /// ```
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        self.flags & ALLOWED != 0
    }

    /// Whether the key found no room in its table (a [`KeyedRateLimiter`](crate::KeyedRateLimiter)
    /// or [`KeyedSlidingLog`](crate::KeyedSlidingLog) full of live keys), so that the table's
    /// [`Overflow`](crate::Overflow) policy decided, not the key's quota: a denial for want of
    /// room, or, under [`Overflow::Allow`](crate::Overflow::Allow), an admission that was not
    /// recorded. A server logs and alerts on these apart from rate-limit denials: they say the
    /// table is too small for the keys it is asked to hold, or that someone is flooding it.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Overflow, Quota};
    ///
    /// // One group of slots, full of keys that are being limited.
    /// let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_hour(1).unwrap()))
    ///     .capacity(1)
    ///     .overflow(Overflow::Deny)
    ///     .build()
    ///     .unwrap();
    /// let slots = limiter.stats().slots as u64;
    /// for key in 0..slots {
    ///     assert!(limiter.check_key(&key).is_ok());
    /// }
    /// let limited = limiter.decide_key(&0, 1).unwrap();
    /// assert!(!limited.is_allowed() && !limited.is_overflow()); // its own quota
    /// let no_room = limiter.decide_key(&slots, 1).unwrap();
    /// assert!(!no_room.is_allowed() && no_room.is_overflow()); // the table is full
    /// ```
    #[must_use]
    pub const fn is_overflow(&self) -> bool {
        self.flags & OVERFLOW != 0
    }

    /// The cost that could still be admitted right now, after this decision took effect.
    ///
    /// After an admission of the last units, `remaining` is 0; after a denial it is what is still
    /// available (less than the cost that was refused).
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_minute(10).unwrap());
    /// assert_eq!(limiter.decide(4).unwrap().remaining(), 6);
    /// ```
    #[must_use]
    pub const fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How long to wait before the same request would be admitted, if nothing else is admitted
    /// in between: rounded up, so a client that waits exactly this long then succeeds.
    /// Zero when the request was admitted.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_hour(1).unwrap());
    /// assert!(limiter.decide(1).unwrap().retry_after().is_zero());
    /// assert!(!limiter.decide(1).unwrap().retry_after().is_zero());
    /// ```
    #[must_use]
    pub const fn retry_after(&self) -> Duration {
        self.retry_after.as_duration()
    }

    /// [`retry_after`](Decision::retry_after) in whole seconds, rounded up: the value of an
    /// HTTP `Retry-After` header (see [HTTP headers](Decision#http-headers)). 0 when the
    /// request was admitted.
    ///
    /// ```
    /// # use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(4).unwrap()), &clock);
    /// assert_eq!(limiter.decide(4).unwrap().retry_after_secs(), 0);
    /// let denied = limiter.decide(1).unwrap();
    /// assert_eq!(denied.retry_after().as_millis(), 250);
    /// assert_eq!(denied.retry_after_secs(), 1); // `retry_after().as_secs()` would say 0
    /// ```
    #[must_use]
    pub const fn retry_after_secs(&self) -> u64 {
        whole_seconds_rounded_up(self.retry_after)
    }

    /// How long until the state is back to fresh, with its full capacity available, if nothing
    /// more is admitted.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{ManualClock, Gcra, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    /// assert_eq!(limiter.decide(3).unwrap().reset_after(), Duration::from_millis(300));
    /// ```
    #[must_use]
    pub const fn reset_after(&self) -> Duration {
        self.reset_after.as_duration()
    }

    /// [`reset_after`](Decision::reset_after) in whole seconds, rounded up: the value of a
    /// `RateLimit-Reset` header (see [HTTP headers](Decision#http-headers)).
    ///
    /// ```
    /// # use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    /// assert_eq!(limiter.peek().reset_after_secs(), 0); // fresh
    /// assert_eq!(limiter.decide(3).unwrap().reset_after_secs(), 1); // 300 ms
    /// ```
    #[must_use]
    pub const fn reset_after_secs(&self) -> u64 {
        whole_seconds_rounded_up(self.reset_after)
    }

    /// The capacity the decision was made against: the burst for GCRA, the per-window limit for
    /// window algorithms.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(5).unwrap().with_burst(10).unwrap());
    /// assert_eq!(limiter.peek().limit(), 10);
    /// ```
    #[must_use]
    pub const fn limit(&self) -> u64 {
        self.limit
    }
}

impl fmt::Debug for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decision")
            .field("allowed", &self.is_allowed())
            .field("overflow", &self.is_overflow())
            .field("remaining", &self.remaining)
            .field("retry_after", &self.retry_after())
            .field("reset_after", &self.reset_after())
            .field("limit", &self.limit)
            .finish()
    }
}

/// One line for a log: the outcome, what remains of the limit, and the times.
///
/// ```
/// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(2).unwrap()), &clock);
/// assert_eq!(limiter.decide(1).unwrap().to_string(), "allowed: 1 of 2 remaining, full in 500ms");
/// limiter.decide(1).unwrap();
/// assert_eq!(
///     limiter.decide(1).unwrap().to_string(),
///     "denied: retry after 500ms; 0 of 2 remaining, full in 1s"
/// );
/// ```
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.is_allowed(), self.is_overflow()) {
            (true, false) => f.write_str("allowed")?,
            (true, true) => f.write_str("allowed unrecorded (no room for the key)")?,
            (false, false) => write!(f, "denied: retry after {:?}", self.retry_after())?,
            (false, true) => write!(
                f,
                "denied: no room for the key; retry after {:?}",
                self.retry_after()
            )?,
        }
        f.write_str(if self.is_allowed() { ": " } else { "; " })?;
        write!(f, "{} of {} remaining", self.remaining, self.limit)?;
        if self.reset_after.as_nanos() > 0 {
            write!(f, ", full in {:?}", self.reset_after())?;
        }
        Ok(())
    }
}

/// A request that was refused for now: retry after [`Denied::retry_after`].
///
/// ```
/// # use tollgate::{Quota, RateLimiter};
/// let limiter = RateLimiter::gcra(Quota::per_hour(1).unwrap());
/// limiter.check().unwrap();
/// let denied = limiter.check().unwrap_err();
/// assert!(denied.retry_after() > std::time::Duration::from_secs(3599));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Denied {
    /// The wait in nanoseconds, at most [`Nanos::MAX`], and in the top bit, which that leaves
    /// free, whether the denial was for want of room. One word, as the wait alone was: a wider
    /// `Denied` made every check's `Result` wider, and a keyed check a few percent slower
    /// (`benches/ab.sh`).
    word: u64,
}

/// [`Denied::word`]: the key found no room.
const NO_ROOM: u64 = 1 << 63;

impl Denied {
    /// A denial by the key's quota.
    pub(crate) const fn new(retry_after: Nanos) -> Denied {
        Denied {
            word: retry_after.as_nanos(),
        }
    }

    /// A denial for want of room in a keyed table (see [`Decision::is_overflow`]).
    pub(crate) const fn no_room(retry_after: Nanos) -> Denied {
        Denied {
            word: retry_after.as_nanos() | NO_ROOM,
        }
    }

    /// The wait.
    pub(crate) const fn wait(&self) -> Nanos {
        Nanos::from_nanos(self.word & !NO_ROOM)
    }

    /// Whether the key was denied because it found no room in its table, not by its quota (see
    /// [`Decision::is_overflow`]).
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Overflow, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_hour(1).unwrap()))
    ///     .capacity(1)
    ///     .overflow(Overflow::Deny)
    ///     .build()
    ///     .unwrap();
    /// let slots = limiter.stats().slots as u64;
    /// (0..slots).for_each(|key| limiter.check_key(&key).unwrap());
    /// assert!(!limiter.check_key(&0).unwrap_err().is_overflow());
    /// assert!(limiter.check_key(&slots).unwrap_err().is_overflow());
    /// ```
    #[must_use]
    pub const fn is_overflow(&self) -> bool {
        self.word & NO_ROOM != 0
    }

    /// How long until the same request would be admitted, if nothing else is admitted in
    /// between; rounded up.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(4).unwrap().with_burst(1).unwrap()), &clock);
    /// limiter.check().unwrap();
    /// assert_eq!(limiter.check().unwrap_err().retry_after(), Duration::from_millis(250));
    /// ```
    #[must_use]
    pub const fn retry_after(&self) -> Duration {
        self.wait().as_duration()
    }

    /// [`retry_after`](Denied::retry_after) in whole seconds, rounded up: the value of an HTTP
    /// `Retry-After` header (see [HTTP headers](Decision#http-headers)).
    ///
    /// ```
    /// # use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(4).unwrap().with_burst(1).unwrap()), &clock);
    /// limiter.check().unwrap();
    /// let denied = limiter.check().unwrap_err();
    /// assert_eq!(denied.retry_after_secs(), 1); // 250 ms; `retry_after().as_secs()` would say 0
    /// ```
    #[must_use]
    pub const fn retry_after_secs(&self) -> u64 {
        whole_seconds_rounded_up(self.wait())
    }
}

/// A time in the whole seconds that HTTP headers carry, rounded up, so that a client waiting that
/// long has waited at least the time itself.
const fn whole_seconds_rounded_up(time: Nanos) -> u64 {
    time.as_nanos().div_ceil(1_000_000_000)
}

impl fmt::Debug for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Denied")
            .field("retry_after", &self.retry_after())
            .field("overflow", &self.is_overflow())
            .finish()
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_overflow() {
            f.write_str("no room for the key in its table: ")?;
        } else {
            f.write_str("rate limited: ")?;
        }
        write!(f, "retry after {:?}", self.retry_after())
    }
}

impl std::error::Error for Denied {}

/// A cost larger than the limiter's capacity (its burst, or its per-window limit): it can never
/// be admitted, however long the caller waits.
///
/// ```
/// # use tollgate::{Quota, RateLimiter};
/// let limiter = RateLimiter::gcra(Quota::per_second(5).unwrap());
/// let err = limiter.decide(6).unwrap_err();
/// assert_eq!((err.cost(), err.capacity()), (6, 5));
/// assert_eq!(err.to_string(), "a cost of 6 exceeds the capacity of 5 and can never be admitted");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InsufficientCapacity {
    cost: u64,
    capacity: u64,
}

impl InsufficientCapacity {
    pub(crate) const fn new(cost: u64, capacity: u64) -> InsufficientCapacity {
        InsufficientCapacity { cost, capacity }
    }

    /// `Ok` if a request of `cost` fits `capacity` (it can be admitted some day), and the error
    /// otherwise: what every check with a cost tests before it reads the clock or the state.
    #[inline]
    pub(crate) const fn check(cost: u64, capacity: u64) -> Result<(), InsufficientCapacity> {
        if cost > capacity {
            Err(InsufficientCapacity::new(cost, capacity))
        } else {
            Ok(())
        }
    }

    /// The cost that was asked for.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(5).unwrap());
    /// assert_eq!(limiter.decide(u64::MAX).unwrap_err().cost(), u64::MAX);
    /// ```
    #[must_use]
    pub const fn cost(&self) -> u64 {
        self.cost
    }

    /// The largest cost the limiter can ever admit at once.
    ///
    /// ```
    /// # use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::gcra(Quota::per_second(5).unwrap().with_burst(2).unwrap());
    /// assert_eq!(limiter.decide(3).unwrap_err().capacity(), 2);
    /// ```
    #[must_use]
    pub const fn capacity(&self) -> u64 {
        self.capacity
    }
}

impl fmt::Display for InsufficientCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a cost of {} exceeds the capacity of {} and can never be admitted",
            self.cost, self.capacity
        )
    }
}

impl std::error::Error for InsufficientCapacity {}

/// Why [`RateLimiter::check_n`](crate::RateLimiter::check_n) refused a request: denied for now,
/// or never admissible.
///
/// It displays as its variant does and has no [`source`](std::error::Error::source) of its own,
/// so a report that follows the chain of sources says the reason once.
///
/// ```
/// use tollgate::{CheckError, Quota, RateLimiter};
///
/// let limiter = RateLimiter::gcra(Quota::per_second(5).unwrap());
/// assert!(matches!(limiter.check_n(6), Err(CheckError::InsufficientCapacity(_))));
/// limiter.check_n(5).unwrap();
/// assert!(matches!(limiter.check_n(1), Err(CheckError::Denied(_))));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckError {
    /// Not now: retry later.
    Denied(Denied),
    /// Never: the cost exceeds the capacity.
    InsufficientCapacity(InsufficientCapacity),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Denied(denied) => denied.fmt(f),
            CheckError::InsufficientCapacity(err) => err.fmt(f),
        }
    }
}

// Transparent, as `thiserror`'s `#[error(transparent)]` is: the message is the variant's, so
// the source is the variant's source (none), not the variant itself. A reporter that walks the
// chain (anyhow's `{:#}`, `{:?}`) would otherwise print the same sentence twice.
impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Denied(denied) => denied.source(),
            CheckError::InsufficientCapacity(err) => err.source(),
        }
    }
}

impl From<Denied> for CheckError {
    fn from(denied: Denied) -> CheckError {
        CheckError::Denied(denied)
    }
}

impl From<InsufficientCapacity> for CheckError {
    fn from(err: InsufficientCapacity) -> CheckError {
        CheckError::InsufficientCapacity(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_five_words_without_padding() {
        // See the `flags` field: no padding for copies to move piecemeal.
        assert_eq!(core::mem::size_of::<Decision>(), 5 * 8);
        let d = Decision::new(true, 3, Nanos::ZERO, Nanos::from_nanos(7_000_000), 10);
        assert!(d.is_allowed() && !d.is_overflow());
        assert!(!Decision::new(false, 3, Nanos::ZERO, Nanos::ZERO, 10).is_allowed());
        assert_eq!(
            format!("{d:?}"),
            "Decision { allowed: true, overflow: false, remaining: 3, retry_after: 0ns, \
             reset_after: 7ms, limit: 10 }"
        );
        let no_room = Decision::no_room(Nanos::from_nanos(1_500), 4);
        assert!(!no_room.is_allowed() && no_room.is_overflow());
        assert_eq!(
            no_room.into_check(),
            Err(Denied::no_room(Nanos::from_nanos(1_500)))
        );
        assert_eq!(
            format!("{:?}", no_room.into_check().unwrap_err()),
            "Denied { retry_after: 1.5µs, overflow: true }"
        );
        let unrecorded = d.overflowed();
        assert!(unrecorded.is_allowed() && unrecorded.is_overflow());
    }

    /// One line for each kind of decision, with every number it carries.
    #[test]
    fn decisions_display_as_one_line() {
        let ms = |n: u64| Nanos::from_nanos(n * 1_000_000);
        for (decision, text) in [
            (
                Decision::new(true, 3, Nanos::ZERO, ms(700), 10),
                "allowed: 3 of 10 remaining, full in 700ms",
            ),
            (
                Decision::new(true, 10, Nanos::ZERO, Nanos::ZERO, 10),
                "allowed: 10 of 10 remaining",
            ),
            (
                Decision::new(false, 0, ms(250), ms(1_250), 5),
                "denied: retry after 250ms; 0 of 5 remaining, full in 1.25s",
            ),
            (
                Decision::no_room(ms(40), 5),
                "denied: no room for the key; retry after 40ms; 0 of 5 remaining, full in 40ms",
            ),
            (
                Decision::new(true, 4, Nanos::ZERO, ms(200), 5).overflowed(),
                "allowed unrecorded (no room for the key): 4 of 5 remaining, full in 200ms",
            ),
        ] {
            assert_eq!(decision.to_string(), text);
        }
    }

    /// A peek reports the request's outcome and wait beside the state as it stands.
    #[test]
    fn a_peek_is_the_request_beside_the_state() {
        let request = Decision::new(false, 1, Nanos::from_nanos(300), Nanos::from_nanos(900), 4);
        let now = Decision::new(true, 1, Nanos::ZERO, Nanos::from_nanos(900), 4);
        let peek = Decision::peeked(request, now);
        assert_eq!(
            (
                peek.is_allowed(),
                peek.remaining(),
                peek.retry_after().as_nanos()
            ),
            (false, 1, 300)
        );
        assert_eq!((peek.reset_after().as_nanos(), peek.limit()), (900, 4));
    }

    /// Whole seconds round up at every boundary: 0 stays 0, a nanosecond past a second is two.
    #[test]
    fn whole_seconds_round_up() {
        let second = 1_000_000_000;
        for (nanos, secs) in [
            (0, 0),
            (1, 1),
            (second - 1, 1),
            (second, 1),
            (second + 1, 2),
            (59 * second + 400_000_000, 60),
            // Nanos::MAX, 2^63 - 1 ns: 9 223 372 036.85 s.
            (u64::MAX, 9_223_372_037),
        ] {
            let time = Nanos::from_nanos(nanos);
            assert_eq!(whole_seconds_rounded_up(time), secs, "{nanos} ns");
            assert_eq!(Denied::new(time).retry_after_secs(), secs);
            let denial = Decision::new(false, 0, time, time, 1);
            assert_eq!(
                (denial.retry_after_secs(), denial.reset_after_secs()),
                (secs, secs)
            );
        }
    }

    /// The errors say why in words, and a `CheckError` says what its variant says, once: a
    /// report that walks the chain of sources holds each sentence one time.
    #[test]
    fn errors_say_why_once() {
        let denied = Denied::new(Nanos::from_nanos(1_500_000));
        assert_eq!(denied.to_string(), "rate limited: retry after 1.5ms");
        assert_eq!(
            Denied::no_room(Nanos::from_nanos(2_000)).to_string(),
            "no room for the key in its table: retry after 2µs"
        );
        let never = InsufficientCapacity::new(6, 5);
        let never_text = "a cost of 6 exceeds the capacity of 5 and can never be admitted";
        assert_eq!(never.to_string(), never_text);
        for (error, text) in [
            (CheckError::from(denied), "rate limited: retry after 1.5ms"),
            (CheckError::from(never), never_text),
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
