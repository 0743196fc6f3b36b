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
///   and the stored word, a denial and a cost of 0 store nothing, and no write stores
///   the reserved `u64::MAX`;
/// - `retry_after` is exact: the model and the algorithm admit the same request at
///   `now + retry_after`, and both deny it one nanosecond earlier (a cost above the capacity must
///   report `Nanos::MAX`); where `now + retry_after` cannot be probed, as for `reset_after` below,
///   both must deny it one nanosecond before, or at `Nanos::MAX`;
/// - `reset_after` is exact: the model and the algorithm have their whole capacity back at
///   `now + reset_after`, and neither one nanosecond earlier; where `now + reset_after` cannot be
///   probed (past [`Nanos::MAX`], or `reset_after` is `Nanos::MAX` itself, which a saturated wait
///   also reports), neither may be full one nanosecond before it, or by `Nanos::MAX`;
/// - the whole seconds of HTTP headers are enough: at `now +`
///   [`retry_after_secs`](Decision::retry_after_secs) seconds the model and the algorithm admit
///   the request they denied, and at `now +` [`reset_after_secs`](Decision::reset_after_secs)
///   seconds both have their whole capacity back (rounding a wait up must never make it too
///   short: no state gets worse while nothing is admitted).
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
        if cost == 0 && next != state {
            return fail("a cost of 0 stored a word");
        }
        // Any other word was stored by an admission (or is the fresh 0): checked once, when it
        // was stored.
        if next == u64::MAX && next != state {
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
        } else {
            // Whether the model and the algorithm, as they were before this step, admit the same
            // request at the reading `then`.
            let admitted = |then: u64| {
                (
                    before.clone().decide(at(then), cost).allowed,
                    algorithm.decide(state, at(then), cost).0.is_allowed(),
                )
            };
            let secs = decision.retry_after_secs();
            let says = ["denies", "admits"];
            if let Err(what) = check_wait("retry_after", says, t, retry, secs, admitted) {
                return fail(&what);
            }
        }
        // Whether the model and the algorithm, after this step, have their whole capacity back at
        // the reading `then`.
        let full = |then: u64| {
            (
                self.model.clone().decide(at(then), 0).remaining == capacity,
                algorithm.decide(next, at(then), 0).0.remaining() == capacity,
            )
        };
        let reset = decision.reset_after().as_nanos() as u64;
        let secs = decision.reset_after_secs();
        let says = ["is not full", "is full"];
        if let Err(what) = check_wait("reset_after", says, t, reset, secs, full) {
            return fail(&what);
        }
        self.state = next;
        self.steps += 1;
        Ok(decision)
    }
}

/// Checks that a wait that [`Differential::step`] reported, `wait` ns (and `secs` in whole
/// seconds) from the reading `t`, is exact for the goal that `reached` tells at any reading:
/// whether the model and the algorithm have reached it there. Both must have reached it where the
/// wait ends and where its whole seconds end, and neither a nanosecond before the end; where the
/// end cannot be probed ([`end_of_wait`]), neither at the last reading before it. The error names
/// the wait (`name`), the reading that shows it wrong, and what the model and the algorithm each
/// say there (`says`: not reached, reached), so that it tells which of them disagrees.
fn check_wait(
    name: &str,
    says: [&str; 2],
    t: u64,
    wait: u64,
    secs: u64,
    reached: impl Fn(u64) -> (bool, bool),
) -> Result<(), String> {
    // Whether at the reading `then` both have reached the goal (`both`) or neither has; if not,
    // what each says there.
    let expect = |then: u64, both: bool| match reached(then) {
        (model, algorithm) if model == both && algorithm == both => Ok(()),
        (model, algorithm) => Err(format!(
            "at {then} ns the model {}, the algorithm {}",
            says[usize::from(model)],
            says[usize::from(algorithm)]
        )),
    };
    match end_of_wait(t, wait) {
        Ok(end) => {
            expect(end, true).map_err(|why| format!("{name} {wait} ns is too short: {why}"))?;
            if wait > 0 {
                expect(end - 1, false)
                    .map_err(|why| format!("{name} {wait} ns is too long: {why}"))?;
            }
            // Rounding a wait up to whole seconds (HTTP's) must never make it too short: no
            // state gets worse while nothing is admitted. Past the last reading there is nothing
            // to probe.
            let then = secs
                .checked_mul(1_000_000_000)
                .and_then(|whole| t.checked_add(whole))
                .filter(|&then| then <= Nanos::MAX.as_nanos());
            match then {
                Some(then) => expect(then, true)
                    .map_err(|why| format!("{name}_secs {secs} s is too short: {why}")),
                None => Ok(()),
            }
        }
        Err(last) => {
            expect(last, false).map_err(|why| format!("{name} {wait} ns is too long: {why}"))
        }
    }
}

/// Where a wait of `wait` ns from the reading `t` ends, for probing the model and the algorithm
/// there: `Ok` with the reading `t + wait`, or, where that cannot be probed, `Err` with the last
/// reading before it, the only side that can be. It cannot be probed past the last reading a clock
/// makes, nor when `wait` is [`Nanos::MAX`]: a saturated wait reports that too, so from 0 it may
/// end exactly at `Nanos::MAX` or later (the decision is the same in both cases).
fn end_of_wait(t: u64, wait: u64) -> Result<u64, u64> {
    let last = Nanos::MAX.as_nanos();
    match t.checked_add(wait) {
        Some(end) if wait < last && end <= last => Ok(end),
        // `wait` is not 0 here (`t` is a reading, at most `last`).
        _ => Err(t.saturating_add(wait - 1).min(last)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{sealed, Gcra};
    use crate::quota::Quota;
    use crate::reference::VirtualScheduling;

    /// One way an algorithm can be wrong, for each check that [`Differential::step`] makes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Flaw {
        None,
        FlipsVerdict,
        RemainingOneMore,
        LimitOneMore,
        TransitionStoresAnother,
        TransitionAdmitsDenied,
        TransitionDeniesAdmitted,
        TransitionWaitsLonger,
        DenialWrites,
        PeekWrites,
        StoresReserved,
        AdmitsWithWait,
        FiniteNever,
        DeniesWithoutWait,
        RetryShort,
        StillDeniedAtRetry,
        RetryLong,
        AdmitsJustBeforeRetry,
        DeniedAtWholeSecond,
        NotFullAtWholeSecond,
        ResetShort,
        NotFullAtReset,
        ResetLong,
        FullJustBeforeReset,
        ResetNever,
        RetryNever,
        AdmitsAtTheLastReading,
        FullAtTheLastReading,
    }

    /// GCRA with one flaw. Its `transition` is its own `decide`'s, so that only the flaws of
    /// `transition` make the two disagree.
    #[derive(Clone, Copy, Debug)]
    struct Flawed {
        gcra: Gcra,
        flaw: Flaw,
    }

    // The flawed models are never reconfigured: the harness replays decisions only.
    impl sealed::Sealed for Flawed {
        fn for_quota(_: &Quota) -> Result<Flawed, crate::QuotaError> {
            unreachable!("a flawed model is never reconfigured")
        }

        fn to_words(&self) -> [u64; 3] {
            unreachable!("a flawed model is never reconfigured")
        }

        fn from_words(_: [u64; 3]) -> Flawed {
            unreachable!("a flawed model is never reconfigured")
        }
    }

    impl Algorithm for Flawed {
        fn capacity(&self) -> u64 {
            self.gcra.capacity()
        }

        fn transition(&self, state: u64, now: Nanos, cost: u64) -> Transition {
            let (decision, next) = self.decide(state, now, cost);
            let retry_after = Nanos::from_duration(decision.retry_after());
            match self.flaw {
                Flaw::TransitionAdmitsDenied if !decision.is_allowed() => {
                    Transition::Allow { state }
                }
                Flaw::TransitionDeniesAdmitted if decision.is_allowed() => Transition::Deny {
                    retry_after: Nanos::ZERO,
                },
                _ if !decision.is_allowed() => Transition::Deny {
                    retry_after: if self.flaw == Flaw::TransitionWaitsLonger {
                        Nanos::from_nanos(retry_after.as_nanos() + 1)
                    } else {
                        retry_after
                    },
                },
                Flaw::TransitionStoresAnother => Transition::Allow { state: next + 1 },
                _ => Transition::Allow { state: next },
            }
        }

        fn carry_over(&self, _: u64, _: Nanos, _: &Flawed) -> u64 {
            unreachable!("a flawed model is never reconfigured")
        }

        fn decide(&self, state: u64, now: Nanos, cost: u64) -> (Decision, u64) {
            let (decision, mut next) = self.gcra.decide(state, now, cost);
            let mut allowed = decision.is_allowed();
            let mut remaining = decision.remaining();
            let mut limit = decision.limit();
            let mut retry = decision.retry_after().as_nanos() as u64;
            let mut reset = decision.reset_after().as_nanos() as u64;
            match self.flaw {
                Flaw::FlipsVerdict => allowed = !allowed,
                Flaw::RemainingOneMore => remaining += 1,
                Flaw::LimitOneMore => limit += 1,
                Flaw::DenialWrites if !allowed => next += 1,
                Flaw::PeekWrites if cost == 0 => next += 1,
                Flaw::StoresReserved if allowed => next = u64::MAX,
                Flaw::AdmitsWithWait if allowed => retry = 1,
                Flaw::FiniteNever if cost > limit => retry = 1,
                Flaw::DeniesWithoutWait if !allowed => retry = 0,
                Flaw::RetryShort if !allowed => retry -= 1,
                // It denies the request that it said would be admitted after 100 ms.
                Flaw::StillDeniedAtRetry if now.as_nanos() == 100_000_000 && cost == 1 => {
                    (allowed, next, retry) = (false, state, 1);
                }
                Flaw::RetryLong if !allowed => retry += 1,
                // It admits, a nanosecond early, the request that it said must wait 100 ms.
                Flaw::AdmitsJustBeforeRetry if now.as_nanos() == 99_999_999 && cost == 1 => {
                    (allowed, retry) = (true, 0);
                }
                Flaw::RetryNever if !allowed && cost <= limit => retry = Nanos::MAX.as_nanos(),
                // Admitted after its 100 ms wait, but denied again at the whole second.
                Flaw::DeniedAtWholeSecond if now.as_nanos() == 1_000_000_000 && cost == 1 => {
                    (allowed, next, retry) = (false, state, 1);
                }
                // Full after its 300 ms, but not at the whole second.
                Flaw::NotFullAtWholeSecond if now.as_nanos() == 1_000_000_000 && cost == 0 => {
                    remaining -= 1;
                }
                Flaw::ResetShort => reset -= 1,
                // Not full when its 300 ms have passed.
                Flaw::NotFullAtReset if now.as_nanos() == 300_000_000 && cost == 0 => {
                    remaining -= 1;
                }
                Flaw::ResetLong => reset += 1,
                Flaw::FullJustBeforeReset if now.as_nanos() == 299_999_999 && cost == 0 => {
                    remaining = limit;
                }
                Flaw::ResetNever => reset = Nanos::MAX.as_nanos(),
                // At the last reading a clock makes, it admits and is full, whatever it said.
                Flaw::AdmitsAtTheLastReading if now == Nanos::MAX && cost == 1 => {
                    (allowed, retry) = (true, 0);
                }
                Flaw::FullAtTheLastReading if now == Nanos::MAX && cost == 0 => remaining = limit,
                _ => {}
            }
            let (retry, reset) = (Nanos::from_nanos(retry), Nanos::from_nanos(reset));
            let decision = Decision::new(allowed, remaining, retry, reset, limit);
            (decision, next)
        }

        fn is_idle(&self, state: u64, now: Nanos) -> bool {
            self.gcra.is_idle(state, now)
        }
    }

    /// Each check fails the first step whose decision has the flaw it looks for, with its own
    /// message; the same steps without a flaw pass. Steps, at 10 per second in bursts of 3 (the
    /// checks come in this order; each flaw trips the first check that it breaks):
    /// 0. at 0, cost 3: admitted, nothing remaining, full again after 300 ms;
    /// 1. at 0, cost 1: denied for 100 ms (full again after 300 ms);
    /// 2. at 0, cost 4: more than the burst, never admitted;
    /// 3. at 0, cost 0: nothing to store.
    #[test]
    fn every_check_catches_its_flaw() {
        let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap();
        let steps = [(0, 3), (0, 1), (0, 4), (0, 0)];
        let run = |flaw| -> Result<Vec<bool>, Mismatch> {
            let gcra = Gcra::from(quota);
            let mut diff = Differential::new(Flawed { gcra, flaw }, VirtualScheduling::new(&quota));
            steps
                .iter()
                .map(|&(t, cost)| Ok(diff.step(Nanos::from_nanos(t), cost)?.is_allowed()))
                .collect()
        };
        assert_eq!(run(Flaw::None), Ok(vec![true, false, false, true]));
        // The two ways each of `transition`'s checks can fail share its message.
        let admitted = "transition admitted what decide did not, or stored another word";
        let denied = "transition denied what decide admitted, or with another wait";
        let cases = [
            (Flaw::FlipsVerdict, 0, "allowed false vs model true"),
            (Flaw::RemainingOneMore, 0, "remaining 1 vs model 0"),
            (Flaw::LimitOneMore, 0, "limit is not the capacity"),
            (Flaw::TransitionStoresAnother, 0, admitted),
            (Flaw::TransitionAdmitsDenied, 1, admitted),
            (Flaw::TransitionDeniesAdmitted, 0, denied),
            (Flaw::TransitionWaitsLonger, 1, denied),
            (Flaw::DenialWrites, 1, "a denial stored a word"),
            (Flaw::PeekWrites, 3, "a cost of 0 stored a word"),
            (Flaw::StoresReserved, 0, "stored the reserved word u64::MAX"),
            (Flaw::AdmitsWithWait, 0, "an admission with a retry_after"),
            (
                Flaw::FiniteNever,
                2,
                "a cost above the capacity without retry_after = Nanos::MAX",
            ),
            (
                Flaw::DeniesWithoutWait,
                1,
                "a denial with a zero retry_after",
            ),
            (
                Flaw::RetryShort,
                1,
                "retry_after 99999999 ns is too short: at 99999999 ns the model denies, the \
                 algorithm denies",
            ),
            (
                Flaw::StillDeniedAtRetry,
                1,
                "retry_after 100000000 ns is too short: at 100000000 ns the model admits, the \
                 algorithm denies",
            ),
            (
                Flaw::RetryLong,
                1,
                "retry_after 100000001 ns is too long: at 100000000 ns the model admits, the \
                 algorithm admits",
            ),
            (
                Flaw::AdmitsJustBeforeRetry,
                1,
                "retry_after 100000000 ns is too long: at 99999999 ns the model denies, the \
                 algorithm admits",
            ),
            (
                Flaw::RetryNever,
                1,
                "retry_after 9223372036854775807 ns is too long: at 9223372036854775806 ns the \
                 model admits, the algorithm admits",
            ),
            (
                Flaw::DeniedAtWholeSecond,
                1,
                "retry_after_secs 1 s is too short: at 1000000000 ns the model admits, the \
                 algorithm denies",
            ),
            (
                Flaw::NotFullAtWholeSecond,
                0,
                "reset_after_secs 1 s is too short: at 1000000000 ns the model is full, the \
                 algorithm is not full",
            ),
            (
                Flaw::ResetShort,
                0,
                "reset_after 299999999 ns is too short: at 299999999 ns the model is not full, \
                 the algorithm is not full",
            ),
            (
                Flaw::NotFullAtReset,
                0,
                "reset_after 300000000 ns is too short: at 300000000 ns the model is full, the \
                 algorithm is not full",
            ),
            (
                Flaw::ResetLong,
                0,
                "reset_after 300000001 ns is too long: at 300000000 ns the model is full, the \
                 algorithm is full",
            ),
            (
                Flaw::FullJustBeforeReset,
                0,
                "reset_after 300000000 ns is too long: at 299999999 ns the model is not full, \
                 the algorithm is full",
            ),
            (
                Flaw::ResetNever,
                0,
                // Nanos::MAX, 2^63 - 1: from 0, the capacity back at Nanos::MAX exactly, so
                // neither may have it back a nanosecond earlier.
                "reset_after 9223372036854775807 ns is too long: at 9223372036854775806 ns the \
                 model is full, the algorithm is full",
            ),
        ];
        for (flaw, step, what) in cases {
            let (t, cost) = steps[step];
            let expected = format!("step {step}: {what} (now {t} ns, cost {cost}, word ");
            let mismatch = run(flaw).expect_err(&expected).to_string();
            assert!(mismatch.starts_with(&expected), "{flaw:?}: {mismatch}");
        }
    }

    /// A `reset_after` of `Nanos::MAX` from 0 may be exact: the capacity comes back at the last
    /// reading of a clock. A sliding window of 337 ns that admitted 1 at the start of the window
    /// that ends at `Nanos::MAX - 337` is full again at `Nanos::MAX`; a peek at 0 (the clock
    /// stepped back) is `Nanos::MAX` from then. (Found by `a_reset_limiter_decides_as_a_new_one`,
    /// whose checker took any `reset_after` of `Nanos::MAX` for a saturated one.)
    #[test]
    fn a_reset_after_that_ends_at_the_last_reading_is_exact() {
        use crate::algorithm::SlidingWindow;
        use crate::reference::SlidingWindowCounter;
        let quota = Quota::new(1, core::time::Duration::from_nanos(337)).unwrap();
        let start = Nanos::MAX.as_nanos() - 2 * 337;
        assert_eq!(start % 337, 0);
        let window = SlidingWindow::new(&quota).unwrap();
        let mut diff = Differential::new(window, SlidingWindowCounter::new(&quota));
        assert!(diff.step(Nanos::from_nanos(start), 1).unwrap().is_allowed());
        let peek = diff.step(Nanos::from_nanos(0), 0).unwrap();
        assert_eq!(peek.reset_after(), Nanos::MAX.as_duration());
        // One nanosecond later the same peek is Nanos::MAX - 1 from then, probed both ways.
        assert_eq!(
            diff.step(Nanos::from_nanos(1), 0).unwrap().reset_after(),
            Nanos::from_nanos(Nanos::MAX.as_nanos() - 1).as_duration()
        );
    }

    /// Past the last reading, a `reset_after` is checked against the model at `Nanos::MAX`.
    #[test]
    fn a_saturated_reset_after_is_checked_at_the_last_reading() {
        let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap();
        let gcra = Gcra::from(quota);
        let flawed = Flawed {
            gcra,
            flaw: Flaw::ResetNever,
        };
        let mut diff = Differential::new(flawed, VirtualScheduling::new(&quota));
        let mismatch = diff.step(Nanos::from_nanos(5), 3).unwrap_err().to_string();
        assert!(
            mismatch.starts_with(
                "step 0: reset_after 9223372036854775807 ns is too long: at \
                 9223372036854775807 ns the model is full, the algorithm is full (now 5 ns"
            ),
            "{mismatch}"
        );
    }

    /// Where a wait ends past the last reading a clock makes, the algorithm is checked at that
    /// reading as the model is: neither may admit the request it denied, nor be full, before the
    /// wait it reported has passed. At 10 per second in bursts of 3, 50 ms before `Nanos::MAX`:
    /// 0. cost 3: admitted, full again after 300 ms (250 ms past the last reading);
    /// 1. cost 1: denied for 100 ms (50 ms past it).
    #[test]
    fn the_checks_past_the_last_reading_catch_their_flaws() {
        let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap();
        let t = Nanos::MAX.as_nanos() - 50_000_000;
        let costs = [3, 1];
        let run = |flaw| -> Result<Vec<bool>, Mismatch> {
            let gcra = Gcra::from(quota);
            let mut diff = Differential::new(Flawed { gcra, flaw }, VirtualScheduling::new(&quota));
            costs
                .iter()
                .map(|&cost| Ok(diff.step(Nanos::from_nanos(t), cost)?.is_allowed()))
                .collect()
        };
        assert_eq!(run(Flaw::None), Ok(vec![true, false]));
        let cases = [
            (
                Flaw::FullAtTheLastReading,
                0,
                "reset_after 300000000 ns is too long: at 9223372036854775807 ns the model is \
                 not full, the algorithm is full",
            ),
            (
                Flaw::AdmitsAtTheLastReading,
                1,
                "retry_after 100000000 ns is too long: at 9223372036854775807 ns the model \
                 denies, the algorithm admits",
            ),
        ];
        for (flaw, step, what) in cases {
            let expected = format!(
                "step {step}: {what} (now {t} ns, cost {}, word ",
                costs[step]
            );
            let mismatch = run(flaw).expect_err(&expected).to_string();
            assert!(mismatch.starts_with(&expected), "{flaw:?}: {mismatch}");
        }
    }
}
