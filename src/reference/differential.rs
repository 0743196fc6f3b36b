//! [`Differential`]: a packed algorithm and a reference model, driven side by side.

use super::Model;
use crate::algorithm::{Algorithm, Transition};
use crate::clock::Nanos;
use crate::decision::Decision;

/// Replays requests through a packed [`Algorithm`] and a [`Model`] side by side, and checks after
/// every step that they agree on everything the algorithm reports.
///
/// Each [`step`](Differential::step) checks that:
/// - the verdict and `remaining` are the model's, and `limit` is the algorithm's capacity;
/// - [`Algorithm::transition`] (the check path) agrees with [`Algorithm::decide`] on the verdict
///   and the stored word, a denial stores nothing, and no write stores the reserved `u64::MAX`;
/// - `retry_after` is exact: the model and the algorithm admit the same request at
///   `now + retry_after`, and the model denies it one nanosecond earlier (a cost above the
///   capacity must report `Nanos::MAX`);
/// - `reset_after` is exact: the model has its whole capacity back at `now + reset_after`, and
///   not one nanosecond earlier; a `reset_after` that reaches past [`Nanos::MAX`] means that the
///   model is not full by then.
///
/// The property tests and the fuzz targets both drive this type.
///
/// ```
/// use tollgate::reference::{Differential, TokenBucket};
/// use tollgate::{Gcra, Nanos, Quota};
///
/// let quota = Quota::per_second(10).unwrap();
/// let mut diff = Differential::new(Gcra::from(quota), TokenBucket::new(&quota));
/// for t in 0..100 {
///     diff.step(Nanos::from_nanos(t * 37_000_000), 1 + t % 3).unwrap();
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Differential<A, M> {
    algorithm: A,
    model: M,
    state: u64,
    steps: u64,
}

/// A disagreement found by [`Differential::step`].
///
/// ```
/// use tollgate::reference::{Differential, FixedWindowCounter};
/// use tollgate::{Gcra, Nanos, Quota};
///
/// // GCRA is not a fixed window: after one request just before the window ends, the window is
/// // fresh again 1 ns later, GCRA only a second later.
/// let quota = Quota::per_second(1).unwrap();
/// let mut diff = Differential::new(Gcra::from(quota), FixedWindowCounter::new(&quota));
/// let mismatch = diff.step(Nanos::from_nanos(999_999_999), 1).unwrap_err();
/// assert!(mismatch.to_string().starts_with("step 0: reset_after"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch(pub(super) String);

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Mismatch {}

impl<A: Algorithm, M: Model + Clone> Differential<A, M> {
    /// Starts both from the fresh state.
    ///
    /// ```
    /// use tollgate::reference::{Differential, VirtualScheduling};
    /// use tollgate::{Gcra, Quota};
    /// let quota = Quota::per_minute(5).unwrap();
    /// let diff = Differential::new(Gcra::from(quota), VirtualScheduling::new(&quota));
    /// assert_eq!(diff.state(), 0);
    /// ```
    pub fn new(algorithm: A, model: M) -> Differential<A, M> {
        Differential {
            algorithm,
            model,
            state: 0,
            steps: 0,
        }
    }

    /// The algorithm's current word.
    ///
    /// ```
    /// use tollgate::reference::{Differential, VirtualScheduling};
    /// use tollgate::{Gcra, Nanos, Quota};
    /// let quota = Quota::per_second(1).unwrap();
    /// let mut diff = Differential::new(Gcra::from(quota), VirtualScheduling::new(&quota));
    /// diff.step(Nanos::ZERO, 1).unwrap();
    /// assert_eq!(diff.state(), 1_000_000_000); // the TAT
    /// ```
    pub fn state(&self) -> u64 {
        self.state
    }

    /// Decides one request in both and checks every reported number (see the type's docs).
    ///
    /// # Errors
    ///
    /// The first disagreement, described with the step number, time, cost and word.
    ///
    /// ```
    /// use tollgate::reference::{Differential, SlidingWindowCounter};
    /// use tollgate::{Nanos, Quota, SlidingWindow};
    /// let quota = Quota::per_minute(3).unwrap();
    /// let mut diff = Differential::new(SlidingWindow::new(&quota).unwrap(), SlidingWindowCounter::new(&quota));
    /// assert!(diff.step(Nanos::ZERO, 3).unwrap().is_allowed());
    /// assert!(!diff.step(Nanos::ZERO, 1).unwrap().is_allowed());
    /// ```
    pub fn step(&mut self, now: Nanos, cost: u64) -> Result<Decision, Mismatch> {
        let (algorithm, state) = (&self.algorithm, self.state);
        let capacity = algorithm.capacity();
        let at = |t: u64| Nanos::from_nanos(t);
        let t = now.as_nanos();
        let fail = |what: &str| {
            Err(Mismatch(format!(
                "step {}: {what} (now {t} ns, cost {cost}, word {state:#x}, {algorithm:?})",
                self.steps
            )))
        };
        let before = self.model.clone();
        let verdict = self.model.decide(now, cost);
        let (decision, next) = algorithm.decide(state, now, cost);
        if decision.is_allowed() != verdict.allowed {
            return fail(&format!(
                "allowed {} vs model {}",
                decision.is_allowed(),
                verdict.allowed
            ));
        }
        if decision.remaining() != verdict.remaining {
            return fail(&format!(
                "remaining {} vs model {}",
                decision.remaining(),
                verdict.remaining
            ));
        }
        if decision.limit() != capacity {
            return fail("limit is not the capacity");
        }
        match algorithm.transition(state, now, cost) {
            Transition::Allow { state: word } if !decision.is_allowed() || word != next => {
                return fail("transition admitted what decide did not, or stored another word");
            }
            Transition::Deny { retry_after }
                if decision.is_allowed() || retry_after.as_duration() != decision.retry_after() =>
            {
                return fail("transition denied what decide admitted, or with another wait");
            }
            _ => {}
        }
        if !decision.is_allowed() && next != state {
            return fail("a denial stored a word");
        }
        if cost > 0 && decision.is_allowed() && next == u64::MAX {
            return fail("stored the reserved word u64::MAX");
        }
        let retry = decision.retry_after().as_nanos() as u64;
        if decision.is_allowed() {
            if retry != 0 {
                return fail("an admission with a retry_after");
            }
        } else if cost > capacity {
            if decision.retry_after() != Nanos::MAX.as_duration() {
                return fail("a cost above the capacity without retry_after = Nanos::MAX");
            }
        } else if retry == 0 {
            return fail("a denial with a zero retry_after");
        } else if retry < Nanos::MAX.as_nanos() && t + retry <= Nanos::MAX.as_nanos() {
            // A wait that saturated at Nanos::MAX cannot be probed.
            if !before.clone().decide(at(t + retry), cost).allowed
                || !algorithm.decide(state, at(t + retry), cost).0.is_allowed()
            {
                return fail(&format!("retry_after {retry} ns is too short"));
            }
            if before.clone().decide(at(t + retry - 1), cost).allowed {
                return fail(&format!("retry_after {retry} ns is too long"));
            }
        }
        let reset = decision.reset_after().as_nanos() as u64;
        if reset < Nanos::MAX.as_nanos() && t + reset <= Nanos::MAX.as_nanos() {
            if self.model.clone().decide(at(t + reset), 0).remaining != capacity {
                return fail(&format!("reset_after {reset} ns is too short"));
            }
            if reset > 0 && self.model.clone().decide(at(t + reset - 1), 0).remaining == capacity {
                return fail(&format!("reset_after {reset} ns is too long"));
            }
        } else if self.model.clone().decide(Nanos::MAX, 0).remaining == capacity {
            // The capacity comes back past the last time a clock can read, so it cannot be
            // probed there; but the model must not have it back by then.
            return fail(&format!(
                "reset_after {reset} ns is too long: the model is full by Nanos::MAX"
            ));
        }
        self.state = next;
        self.steps += 1;
        Ok(decision)
    }
}
