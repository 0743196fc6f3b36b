//! Shaping: a request that its limits would refuse waits for its turn instead, when that comes
//! within the layer's maximum wait ([`RateLimitLayer::max_wait`](super::RateLimitLayer::max_wait)).
//!
//! The request is decided as without shaping first; only a refusal whose wait is short enough
//! takes a place in the schedule of every limit (a GCRA reservation, all or nothing), so that
//! waiting requests go on in the order they came, each at its own turn, with no polling. A
//! request whose client goes away before its turn gives its place back.

use core::time::Duration;
use std::net::IpAddr;
use std::sync::Arc;

use http::request::Parts;

use super::limit::sealed::{Limit, Limits, Outcome};
use super::limit::{layers, verdict, Skippable, Verdict};
use crate::clock::Nanos;
use crate::decision::Denied;
use crate::layers::sealed::Hold;
use crate::layers::{Layers, ReserveAll, Turn};

/// Limits that a [`RateLimitLayer`](super::RateLimitLayer) can shape
/// ([`max_wait`](super::RateLimitLayer::max_wait)): a tuple of GCRA limits, or (with the
/// `redis` feature) a `RedisLimits`. The trait is sealed.
pub trait ShapeLimits: sealed::Shape {}

impl<T: sealed::Shape> ShapeLimits for T {}

pub(crate) mod sealed {
    use super::{Arc, Duration, IpAddr, Limits, Outcome, Parts};

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

/// How long a refused request would wait, if it is refused.
pub(super) fn refused_for(verdict: &Verdict) -> Option<Duration> {
    match verdict {
        Verdict::Decided(_, decision) if !decision.is_allowed() => Some(decision.retry_after()),
        _ => None,
    }
}

macro_rules! shape {
    ($($limit:ident $i:tt),+) => {
        impl<$($limit),+> sealed::Shape for ($($limit,)+)
        where
            $(
                $limit: Limit,
                $limit::Key: Send + Sync,
                for<'a> $limit::Layer<'a>: Turn + Send,
            )+
        {
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
                let decided = verdict(layers!(this, keys, $($i)+).decide_all(cost));
                if refused_for(&decided).map_or(true, |wait| wait > max_wait) {
                    return Outcome::Now(decided);
                }
                // Its turn comes within `max_wait`: a place in every layer's schedule, or the
                // refusal if it is gone. The future owns the keys and the limits; dropped before
                // its turn (the client went away), it gives the place back.
                let this = Arc::clone(this);
                Outcome::Later(Box::pin(async move {
                    let cost = match layers!(this, keys, $($i)+).reserve_all(cost, max_wait) {
                        // At its turn, the fields: the state as the request goes on.
                        Ok(reservation) => {
                            reservation.ready().await;
                            0
                        }
                        // Its turn was taken: decided again, refused with the wait it has now.
                        Err(_) => cost,
                    };
                    verdict(layers!(this, keys, $($i)+).decide_all(cost))
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
