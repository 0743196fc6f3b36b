//! The all-or-nothing check over a tuple of layers: look, then hold, releasing on a refusal.

use core::fmt;

use super::sealed::{Hold, Step};
use super::Layer;
use crate::clock::Nanos;
use crate::decision::{CheckError, Decision, Denied, InsufficientCapacity};

/// Several [`Layer`]s checked together, all or nothing: implemented for tuples of up to eight
/// layers (`&RateLimiter`s and [`KeyedLayer`](super::KeyedLayer)s, in any mix of algorithms and
/// clocks). See the [module docs](super) for the protocol and what concurrent requests see of
/// it.
///
/// ```
/// use tollgate::layers::Layers;
/// use tollgate::{FixedWindow, Gcra, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let per_second = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
/// let per_minute = RateLimiter::with_clock(FixedWindow::new(&Quota::per_minute(15).unwrap()).unwrap(), &clock);
/// let both = (&per_second, &per_minute);
/// assert!(both.check_all(10).is_ok());
/// let refused = both.check_all(1).unwrap_err();
/// assert_eq!(refused.layer(), 0); // the burst is spent
/// clock.advance(std::time::Duration::from_secs(1));
/// let decision = both.decide_all(5).unwrap();
/// assert!(decision.is_allowed());
/// assert_eq!((decision.layer(), decision.decision().remaining()), (1, 0)); // the minute binds
/// ```
pub trait Layers: sealed::Tuple {
    /// Admits a request of `cost` in every layer, or in none.
    ///
    /// # Errors
    ///
    /// A [`LayerError`] naming the layer that refused: of those that would refuse, the one with
    /// the longest wait; or the first whose capacity the cost exceeds.
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{Quota, RateLimiter};
    /// let (a, b) = (RateLimiter::gcra(Quota::per_hour(5).unwrap()), RateLimiter::gcra(Quota::per_hour(2).unwrap()));
    /// assert!((&a, &b).check_all(2).is_ok());
    /// let refused = (&a, &b).check_all(1).unwrap_err();
    /// assert_eq!(refused.layer(), 1);
    /// assert_eq!(a.peek().remaining(), 3);
    /// assert_eq!((&a, &b).check_all(6).unwrap_err().to_string(), "layer 0: a cost of 6 exceeds the capacity of 5 and can never be admitted");
    /// ```
    #[inline]
    fn check_all(&self, cost: u64) -> Result<(), LayerError> {
        let refused = |(layer, denied): (usize, Denied)| LayerError {
            layer,
            error: denied.into(),
        };
        let (now, refusal) = self.look_all(cost)?;
        if let Some(refusal) = refusal {
            return Err(refused(refusal));
        }
        self.hold_all(&now, cost).map(|_| ()).map_err(refused)
    }

    /// Decides a request of `cost` in every layer, all or nothing, and reports the layer that
    /// decided: the one that refused (of those that would, the one with the longest wait), or,
    /// when admitted, the one with the least remaining, whose decision is reported.
    ///
    /// # Errors
    ///
    /// A [`LayerError`] holding [`InsufficientCapacity`] for the first layer whose capacity the
    /// cost exceeds.
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{Quota, RateLimiter};
    /// let (a, b) = (RateLimiter::gcra(Quota::per_hour(5).unwrap()), RateLimiter::gcra(Quota::per_hour(3).unwrap()));
    /// let d = (&a, &b).decide_all(2).unwrap();
    /// assert!(d.is_allowed());
    /// assert_eq!((d.layer(), d.decision().remaining()), (1, 1));
    /// let d = (&a, &b).decide_all(2).unwrap();
    /// assert!(!d.is_allowed());
    /// assert_eq!(d.layer(), 1);
    /// assert_eq!(a.peek().remaining(), 3);
    /// ```
    fn decide_all(&self, cost: u64) -> Result<LayeredDecision, LayerError> {
        let (now, refusal) = self.look_all(cost)?;
        if let Some((layer, denied)) = refusal {
            return Ok(self.refusal(layer, denied, &now, cost));
        }
        Ok(match self.hold_all(&now, cost) {
            Ok(holds) => self.binding(&holds, &now, cost),
            Err((layer, denied)) => self.refusal(layer, denied, &now, cost),
        })
    }
}

pub(crate) mod sealed {
    use super::{LayerError, LayeredDecision};
    use crate::decision::Denied;

    /// Each layer's time, and the refusal with the longest wait, if any.
    pub type Look<T> = (T, Option<(usize, Denied)>);

    /// The protocol's passes over a tuple's layers, in order.
    pub trait Tuple {
        /// A time per layer, and what each look saw.
        type Times;
        /// A hold per layer.
        type Holds;
        /// The capacities, then the look: each layer's time, and the refusal with the longest
        /// wait, if any.
        fn look_all(&self, cost: u64) -> Result<Look<Self::Times>, LayerError>;
        /// The holds, in order; on a refusal, the holds so far released in reverse order.
        fn hold_all(&self, now: &Self::Times, cost: u64) -> Result<Self::Holds, (usize, Denied)>;
        /// Releases the hold of the layer at `index`.
        fn release_at(&self, index: usize, holds: &Self::Holds, cost: u64);
        /// The decision of the layer at `index`, which `denied` refused.
        fn refusal(
            &self,
            index: usize,
            denied: Denied,
            now: &Self::Times,
            cost: u64,
        ) -> LayeredDecision;
        /// The decision of the admission: the layer with the least remaining.
        fn binding(&self, holds: &Self::Holds, now: &Self::Times, cost: u64) -> LayeredDecision;
    }
}

/// Why an all-or-nothing check refused a request, and which layer refused it (its index in the
/// tuple).
///
/// ```
/// use tollgate::layers::Layers;
/// use tollgate::{CheckError, Gcra, ManualClock, Quota, RateLimiter};
/// let clock = ManualClock::new();
/// let per_second = Gcra::from(Quota::per_second(1).unwrap());
/// let (a, b) = (RateLimiter::with_clock(per_second, &clock), RateLimiter::with_clock(per_second, &clock));
/// b.check().unwrap();
/// let refused = (&a, &b).check_all(1).unwrap_err();
/// assert_eq!(refused.layer(), 1);
/// assert!(matches!(refused.error(), CheckError::Denied(_)));
/// assert_eq!(refused.to_string(), "layer 1: rate limited: retry after 1s");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayerError {
    layer: usize,
    error: CheckError,
}

impl LayerError {
    /// The refusal `error` by the layer at `layer`.
    pub(crate) const fn new(layer: usize, error: CheckError) -> LayerError {
        LayerError { layer, error }
    }

    /// The index, in the tuple, of the layer that refused.
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{Quota, RateLimiter};
    /// let a = RateLimiter::gcra(Quota::per_second(1).unwrap());
    /// assert_eq!((&a, &a).check_all(1).unwrap_err().layer(), 1);
    /// ```
    #[must_use]
    pub const fn layer(&self) -> usize {
        self.layer
    }

    /// The refusal: [`CheckError::Denied`] (with its wait, and whether a full table caused it)
    /// or [`CheckError::InsufficientCapacity`].
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{CheckError, Quota, RateLimiter};
    /// let a = RateLimiter::gcra(Quota::per_second(1).unwrap());
    /// assert!(matches!((&a,).check_all(2).unwrap_err().error(), CheckError::InsufficientCapacity(_)));
    /// ```
    #[must_use]
    pub const fn error(&self) -> &CheckError {
        &self.error
    }
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "layer {}: {}", self.layer, self.error)
    }
}

impl std::error::Error for LayerError {}

/// What an all-or-nothing decision decided, and which layer decided it: the one that refused,
/// or, for an admission, the one left with the least remaining.
///
/// ```
/// use tollgate::layers::Layers;
/// use tollgate::{Quota, RateLimiter};
/// let (a, b) = (RateLimiter::gcra(Quota::per_second(4).unwrap()), RateLimiter::gcra(Quota::per_second(8).unwrap()));
/// let d = (&a, &b).decide_all(1).unwrap();
/// assert_eq!(d.to_string(), "layer 0: allowed: 3 of 4 remaining, full in 250ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayeredDecision {
    layer: usize,
    decision: Decision,
}

impl LayeredDecision {
    /// The decision of the layer at `layer`.
    pub(crate) const fn new(layer: usize, decision: Decision) -> LayeredDecision {
        LayeredDecision { layer, decision }
    }

    /// Whether every layer admitted the request.
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{Quota, RateLimiter};
    /// let a = RateLimiter::gcra(Quota::per_second(1).unwrap());
    /// assert!((&a,).decide_all(1).unwrap().is_allowed());
    /// assert!(!(&a,).decide_all(1).unwrap().is_allowed());
    /// ```
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        self.decision.is_allowed()
    }

    /// The index, in the tuple, of the layer that decided.
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{Quota, RateLimiter};
    /// let (a, b) = (RateLimiter::gcra(Quota::per_second(9).unwrap()), RateLimiter::gcra(Quota::per_second(2).unwrap()));
    /// assert_eq!((&a, &b).decide_all(1).unwrap().layer(), 1);
    /// ```
    #[must_use]
    pub const fn layer(&self) -> usize {
        self.layer
    }

    /// That layer's decision: for an admission, its `remaining` is the least across the
    /// layers; for a refusal, its `retry_after` is the longest wait of those that refused.
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{Quota, RateLimiter};
    /// let (a, b) = (RateLimiter::gcra(Quota::per_second(9).unwrap()), RateLimiter::gcra(Quota::per_second(2).unwrap()));
    /// assert_eq!((&a, &b).decide_all(1).unwrap().decision().remaining(), 1);
    /// ```
    pub const fn decision(&self) -> &Decision {
        &self.decision
    }
}

impl fmt::Display for LayeredDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "layer {}: {}", self.layer, self.decision)
    }
}

/// Of two refusals, the one with the longer wait (the first on a tie).
#[inline]
fn longest(
    refused: Option<(usize, Denied)>,
    layer: usize,
    denied: Denied,
) -> Option<(usize, Denied)> {
    match refused {
        Some((_, worst)) if worst.wait() >= denied.wait() => refused,
        _ => Some((layer, denied)),
    }
}

macro_rules! tuple {
    ($n:literal; $($layer:ident $i:tt),+) => {
        impl<$($layer: Layer),+> Layers for ($($layer,)+) {}

        impl<$($layer: Layer),+> sealed::Tuple for ($($layer,)+) {
            type Times = ([Nanos; $n], ($(<$layer as Step>::Seen,)+));
            type Holds = [Hold; $n];

            #[inline]
            fn look_all(&self, cost: u64) -> Result<sealed::Look<Self::Times>, LayerError> {
                $(
                    let capacity = self.$i.capacity();
                    if cost > capacity {
                        return Err(LayerError {
                            layer: $i,
                            error: InsufficientCapacity::new(cost, capacity).into(),
                        });
                    }
                )+
                let now = [$(self.$i.now()),+];
                let looks = ($(self.$i.look(now[$i], cost),)+);
                let mut refused = None;
                $(
                    if let Err(denied) = looks.$i.1 {
                        refused = longest(refused, $i, denied);
                    }
                )+
                Ok(((now, ($(looks.$i.0,)+)), refused))
            }

            #[inline]
            fn hold_all(&self, (now, seen): &Self::Times, cost: u64) -> Result<[Hold; $n], (usize, Denied)> {
                let mut holds = [$({ let _ = $i; Hold::NOTHING }),+];
                $(
                    match self.$i.hold(seen.$i, now[$i], cost) {
                        Ok(hold) => holds[$i] = hold,
                        Err(denied) => {
                            for held in (0..$i).rev() {
                                self.release_at(held, &holds, cost);
                            }
                            return Err(($i, denied));
                        }
                    }
                )+
                Ok(holds)
            }

            fn release_at(&self, index: usize, holds: &[Hold; $n], cost: u64) {
                match index {
                    $($i => self.$i.release(holds[$i], cost),)+
                    _ => unreachable!(),
                }
            }

            fn refusal(&self, index: usize, denied: Denied, (now, _): &Self::Times, cost: u64) -> LayeredDecision {
                let decision = match index {
                    $($i => self.$i.decision(None, now[$i], cost),)+
                    _ => unreachable!(),
                };
                LayeredDecision::new(index, decision.refused_by(denied))
            }

            fn binding(&self, holds: &[Hold; $n], (now, _): &Self::Times, cost: u64) -> LayeredDecision {
                let mut binding: Option<LayeredDecision> = None;
                $(
                    let decision = self.$i.decision(Some(holds[$i]), now[$i], cost);
                    if binding.map_or(true, |b| decision.remaining() < b.decision.remaining()) {
                        binding = Some(LayeredDecision::new($i, decision));
                    }
                )+
                binding.expect("a tuple has a layer")
            }
        }
    };
}

tuple!(1; A 0);
tuple!(2; A 0, B 1);
tuple!(3; A 0, B 1, C 2);
tuple!(4; A 0, B 1, C 2, D 3);
tuple!(5; A 0, B 1, C 2, D 3, E 4);
tuple!(6; A 0, B 1, C 2, D 3, E 4, F 5);
tuple!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
