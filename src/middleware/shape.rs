//! Shaping: a request that its limits would refuse waits for its turn instead, when that comes
//! within the layer's maximum wait ([`RateLimitLayer::max_wait`](super::RateLimitLayer::max_wait)).
//!
//! The request is decided as without shaping first; only a refusal whose wait is short enough
//! takes a place in the schedule of every limit (a GCRA reservation, all or nothing), so that
//! waiting requests go on in the order they came, each at its own turn, with no polling. A
//! request whose client goes away before its turn gives its place back.

use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::net::IpAddr;
use std::sync::Arc;

use http::request::Parts;

use super::key::KeyExtractor;
use super::limit::sealed::{Limit, Limits, Outcome};
use super::limit::{verdict, Direct, Keyed, Skippable, Verdict};
use crate::clock::{Clock, Nanos};
use crate::decision::Denied;
use crate::layers::sealed::{Hold, Step};
use crate::layers::{Layers, ReserveAll, Turn};
use crate::limiter::RateLimiter;
use crate::Gcra;

/// Limits that a [`RateLimitLayer`](super::RateLimitLayer) can shape
/// ([`max_wait`](super::RateLimitLayer::max_wait)): a tuple of GCRA limits, or (with the
/// `redis` feature) a `RedisLimits`. The trait is sealed.
pub trait ShapeLimits: sealed::Shape {}

impl<T: sealed::Shape> ShapeLimits for T {}

impl<K, E, C, S> sealed::ShapeLimit for Keyed<K, E, Gcra, C, S>
where
    K: Hash + ?Sized + Send + Sync + 'static,
    E: KeyExtractor,
    E::Key: Borrow<K> + Send + Sync + 'static,
    C: Clock + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    type Key = E::Key;
    type Turn<'a> = crate::layers::KeyedLayer<'a, K, Gcra, C, S>;

    fn key(&self, parts: &Parts, peer: Option<IpAddr>) -> Result<Option<E::Key>, Verdict> {
        match self.key.extract(parts, peer) {
            Some(key) => Ok(Some(key)),
            None => self.missing.settle().map(|()| None),
        }
    }

    fn turn<'a>(&'a self, key: &'a E::Key) -> Self::Turn<'a> {
        self.limiter.layer::<K>(key.borrow())
    }
}

impl<C: Clock + 'static> sealed::ShapeLimit for Direct<Gcra, C> {
    type Key = ();
    type Turn<'a> = &'a RateLimiter<Gcra, C>;

    fn key(&self, _: &Parts, _: Option<IpAddr>) -> Result<Option<()>, Verdict> {
        Ok(Some(()))
    }

    fn turn<'a>(&'a self, (): &'a ()) -> Self::Turn<'a> {
        &self.limiter
    }
}

pub(crate) mod sealed {
    use super::{Arc, Duration, IpAddr, Limit, Limits, Outcome, Parts, Step, Verdict};

    /// A limit that can take reservations: a GCRA limiter's, whose layer for a request is made
    /// from a key that the request's future owns.
    pub trait ShapeLimit: Limit {
        /// The request's key, owned.
        type Key: Send + Sync + 'static;
        /// The layer of one key.
        type Turn<'a>: Step + crate::layers::Turn + Send
        where
            Self: 'a;
        /// The request's key (`None`: the limit is skipped); `Err` with the verdict if its key
        /// is missing and that settles the request.
        fn key(&self, parts: &Parts, peer: Option<IpAddr>) -> Result<Option<Self::Key>, Verdict>;
        /// The layer of `key`.
        fn turn<'a>(&'a self, key: &'a Self::Key) -> Self::Turn<'a>;
    }

    /// Limits that can delay a request instead of refusing it.
    pub trait Shape: Limits {
        /// The request's verdict, all limits together: a refusal whose wait is at most
        /// `max_wait` becomes a reservation, and the verdict comes when its turn has.
        fn shape(
            this: &Arc<Self>,
            parts: &Parts,
            peer: Option<IpAddr>,
            cost: u64,
            max_wait: Duration,
        ) -> Outcome;
    }
}

impl<L: Turn> Turn for Skippable<L> {
    fn now(&self) -> Nanos {
        match self {
            Skippable::Checked(layer) => layer.now(),
            Skippable::Skipped => Nanos::ZERO,
        }
    }

    fn capacity(&self) -> u64 {
        match self {
            Skippable::Checked(layer) => layer.capacity(),
            Skippable::Skipped => u64::MAX,
        }
    }

    fn look(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(), Denied> {
        match self {
            Skippable::Checked(layer) => layer.look(now, cost, max_wait),
            Skippable::Skipped => Ok(()),
        }
    }

    fn hold(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(Hold, Nanos), Denied> {
        match self {
            Skippable::Checked(layer) => layer.hold(now, cost, max_wait),
            Skippable::Skipped => Ok((Hold::NOTHING, now)),
        }
    }

    fn cancel(&self, hold: Hold) -> bool {
        match self {
            Skippable::Checked(layer) => layer.cancel(hold),
            Skippable::Skipped => true,
        }
    }
}

impl<L> From<Option<L>> for Skippable<L> {
    fn from(layer: Option<L>) -> Skippable<L> {
        layer.map_or(Skippable::Skipped, Skippable::Checked)
    }
}

/// How long a refused request would wait, if it is refused.
pub(super) fn refused_for(verdict: &Verdict) -> Option<Duration> {
    match verdict {
        Verdict::Decided(_, decision) if !decision.is_allowed() => Some(decision.retry_after()),
        _ => None,
    }
}

macro_rules! shape {
    ($($limit:ident $i:tt),+) => {
        impl<$($limit: sealed::ShapeLimit),+> sealed::Shape for ($($limit,)+) {
            fn shape(
                this: &Arc<Self>,
                parts: &Parts,
                peer: Option<IpAddr>,
                cost: u64,
                max_wait: Duration,
            ) -> Outcome {
                let keys = ($(match this.$i.key(parts, peer) {
                    Ok(key) => key,
                    Err(verdict) => return Outcome::Now(verdict),
                },)+);
                let decided = {
                    let layers = ($(Skippable::from(keys.$i.as_ref().map(|key| this.$i.turn(key))),)+);
                    verdict(layers.decide_all(cost))
                };
                if refused_for(&decided).map_or(true, |wait| wait > max_wait) {
                    return Outcome::Now(decided);
                }
                // Its turn comes within `max_wait`: a place in every layer's schedule, or the
                // refusal if it is gone. The future owns the keys and the limits; dropped before
                // its turn (the client went away), it gives the place back.
                let this = Arc::clone(this);
                Outcome::Later(Box::pin(async move {
                    let layers = ($(Skippable::from(keys.$i.as_ref().map(|key| this.$i.turn(key))),)+);
                    let cost = match layers.reserve_all(cost, max_wait) {
                        // At its turn, the fields: the state as the request goes on.
                        Ok(reservation) => {
                            reservation.ready().await;
                            0
                        }
                        // Its turn was taken: decided again, refused with the wait it has now.
                        Err(_) => cost,
                    };
                    let layers = ($(Skippable::from(keys.$i.as_ref().map(|key| this.$i.turn(key))),)+);
                    verdict(layers.decide_all(cost))
                }))
            }
        }
    };
}

shape!(A 0);
shape!(A 0, B 1);
shape!(A 0, B 1, C 2);
shape!(A 0, B 1, C 2, D 3);
shape!(A 0, B 1, C 2, D 3, E 4);
shape!(A 0, B 1, C 2, D 3, E 4, F 5);
shape!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
shape!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
