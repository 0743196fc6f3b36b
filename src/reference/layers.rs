//! The model of an all-or-nothing check over several limits.

use super::{Model, Verdict};
use crate::clock::Nanos;

/// A [`Model`] that can say what it would decide without recording it: every model that is
/// `Clone`, by deciding on a copy.
///
/// ```
/// use tollgate::reference::{Look, Model, TokenBucket};
/// use tollgate::{Nanos, Quota};
/// let mut bucket = TokenBucket::new(&Quota::per_second(1).unwrap());
/// assert!(bucket.look(Nanos::ZERO, 1).allowed);
/// assert!(bucket.decide(Nanos::ZERO, 1).allowed); // the look recorded nothing
/// ```
pub trait Look: Model {
    /// What [`decide`](Model::decide) would answer now, recording nothing.
    fn look(&self, now: Nanos, cost: u64) -> Verdict;
}

impl<M: Model + Clone> Look for M {
    fn look(&self, now: Nanos, cost: u64) -> Verdict {
        self.clone().decide(now, cost)
    }
}

/// What [`all_or_nothing`] decided.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayeredVerdict {
    /// Whether every layer admitted the request (and each recorded it).
    pub allowed: bool,
    /// The layers that would have refused it, in order (empty when admitted).
    pub refused_by: Vec<usize>,
    /// Each layer's cost still admissible afterwards.
    pub remaining: Vec<u64>,
}

/// An all-or-nothing check from its definition: the request is admitted iff every layer, asked
/// on its own at `now`, would admit it, and then every layer records it; otherwise no layer
/// records anything.
///
/// ```
/// use tollgate::reference::{all_or_nothing, FixedWindowCounter, Look, VirtualScheduling};
/// use tollgate::{Nanos, Quota};
///
/// let mut per_second = VirtualScheduling::new(&Quota::per_second(10).unwrap());
/// let mut per_minute = FixedWindowCounter::new(&Quota::per_minute(15).unwrap());
/// let verdict = all_or_nothing(&mut [&mut per_second, &mut per_minute], Nanos::ZERO, 12);
/// assert_eq!((verdict.allowed, verdict.refused_by), (false, vec![0]));
/// let verdict = all_or_nothing(&mut [&mut per_second, &mut per_minute], Nanos::ZERO, 10);
/// assert_eq!(verdict.remaining, vec![0, 5]);
/// ```
pub fn all_or_nothing(layers: &mut [&mut dyn Look], now: Nanos, cost: u64) -> LayeredVerdict {
    let refused_by: Vec<usize> = layers
        .iter()
        .enumerate()
        .filter(|(_, layer)| !layer.look(now, cost).allowed)
        .map(|(i, _)| i)
        .collect();
    let allowed = refused_by.is_empty();
    let remaining = layers
        .iter_mut()
        .map(|layer| {
            if allowed {
                layer.decide(now, cost).remaining
            } else {
                layer.look(now, 0).remaining
            }
        })
        .collect();
    LayeredVerdict {
        allowed,
        refused_by,
        remaining,
    }
}
