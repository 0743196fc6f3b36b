//! What a limiter tells its caller: a [`Decision`], or why a request was refused.

use core::fmt;
use core::time::Duration;

use crate::clock::Nanos;

/// The full answer to one request: whether it was admitted, and the numbers a server puts in its
/// `RateLimit-*` and `Retry-After` headers.
///
/// A cost of 0 is a pure peek: it is always admitted, changes nothing, and reports the state as it
/// stands ([`RateLimiter::peek`](crate::RateLimiter::peek)).
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
    /// 1 if admitted, 0 if not. A whole word rather than a `bool`: with a `bool`, a `Decision`
    /// has seven bytes of padding, and the copies that carry it out of the compare-and-swap loop
    /// (in tuples and `Result`s) moved them with overlapping 4-byte loads and stores; a load that
    /// overlaps two earlier stores cannot take its data from them (store-to-load forwarding
    /// fails, a stall of a dozen cycles or more). In one paired run
    /// (`cargo bench --bench paired -- "keyed 100k uniform"`), `decide_key` took 1.39 times as
    /// long as `check_key` with the `bool` and 1.15 with the word.
    allowed: u64,
    remaining: u64,
    retry_after: Nanos,
    reset_after: Nanos,
    limit: u64,
}

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
            allowed: allowed as u64, // 0 or 1
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
        Decision::new(false, 0, wait, wait, limit)
    }

    /// The decision as a `check` result: `Ok`, or the denial with its wait.
    pub(crate) const fn into_check(self) -> Result<(), Denied> {
        if self.allowed != 0 {
            Ok(())
        } else {
            Err(Denied::new(self.retry_after))
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
        self.allowed != 0
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
            .field("remaining", &self.remaining)
            .field("retry_after", &self.retry_after)
            .field("reset_after", &self.reset_after)
            .field("limit", &self.limit)
            .finish()
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Denied {
    retry_after: Nanos,
}

impl Denied {
    pub(crate) const fn new(retry_after: Nanos) -> Denied {
        Denied { retry_after }
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
        self.retry_after.as_duration()
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
        whole_seconds_rounded_up(self.retry_after)
    }
}

/// A time in the whole seconds that HTTP headers carry, rounded up, so that a client waiting that
/// long has waited at least the time itself.
const fn whole_seconds_rounded_up(time: Nanos) -> u64 {
    time.as_nanos().div_ceil(1_000_000_000)
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limited: retry after {:?}", self.retry_after())
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
        // See the `allowed` field: no padding for copies to move piecemeal.
        assert_eq!(core::mem::size_of::<Decision>(), 5 * 8);
        let d = Decision::new(true, 3, Nanos::ZERO, Nanos::from_nanos(7), 10);
        assert!(d.is_allowed());
        assert!(!Decision::new(false, 3, Nanos::ZERO, Nanos::ZERO, 10).is_allowed());
        assert_eq!(
            format!("{d:?}"),
            "Decision { allowed: true, remaining: 3, retry_after: Nanos(0), \
             reset_after: Nanos(7), limit: 10 }"
        );
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
