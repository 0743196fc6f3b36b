//! The limits a request is checked against: one limiter each, all or nothing.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::net::IpAddr;
use std::sync::Arc;

use http::request::Parts;
use http::StatusCode;

use super::key::KeyExtractor;
use super::policy::PolicyName;
use crate::algorithm::Algorithm;
use crate::clock::{Clock, Nanos, TscClock};
use crate::decision::{Decision, Denied};
use crate::keyed::{DefaultKeyHasher, KeyedRateLimiter};
use crate::layers::sealed::{Hold, Step};
use crate::layers::{LayerError, Layers};
use crate::limiter::RateLimiter;
use crate::Gcra;

/// What a keyed limit does with a request whose key cannot be found (no peer address, no API
/// key header, a key the extractor refuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissingKey {
    /// Answer with this status, checking no limit: `401` for a missing API key, `400` for a
    /// malformed one. The default is `500`: a limit that cannot find the peer's address is a
    /// server that was not set up to record it.
    Reject(StatusCode),
    /// Pass the request on, checking no limit at all.
    Allow,
    /// Check the other limits, as if this one were not there.
    Skip,
}

impl MissingKey {
    /// What a request without a key comes to: `Ok` to check the other limits without this
    /// one, or the verdict that settles the request.
    pub(super) fn settle(self) -> Result<(), Verdict> {
        match self {
            MissingKey::Skip => Ok(()),
            MissingKey::Allow => Err(Verdict::Unchecked),
            MissingKey::Reject(status) => Err(Verdict::Rejected(status)),
        }
    }
}

impl Default for MissingKey {
    fn default() -> MissingKey {
        MissingKey::Reject(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// One limit of a [`RateLimitLayer`](super::RateLimitLayer): a named limiter, and for a keyed
/// one, how a request's key is found. Made by [`Keyed::new`] and [`Direct::new`]; the trait is
/// sealed.
pub trait Limit: sealed::Limit {}

impl<T: sealed::Limit> Limit for T {}

/// The limits of a [`RateLimitLayer`](super::RateLimitLayer): a tuple of one to eight
/// [`Limit`]s, checked all or nothing in this process, or (with the `redis` feature) a
/// `RedisLimits`, checked all or nothing in Redis. The trait is sealed.
pub trait Limits: sealed::Limits {}

impl<T: sealed::Limits> Limits for T {}

/// A keyed limiter as a limit: each request counted against its key's state.
///
/// ```
/// use std::net::IpAddr;
/// use std::sync::Arc;
/// use tollgate::middleware::{Keyed, PeerIp};
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// let per_ip = Arc::new(KeyedRateLimiter::<IpAddr>::gcra(Quota::per_second(10).unwrap(), 10_000).unwrap());
/// let limit = Keyed::new("per-ip", per_ip, PeerIp).unwrap();
/// # let _ = limit;
/// ```
pub struct Keyed<K: ?Sized, E, A = Gcra, C = TscClock, S = DefaultKeyHasher> {
    name: PolicyName,
    limiter: Arc<KeyedRateLimiter<K, A, C, S>>,
    key: E,
    missing: MissingKey,
}

impl<K: ?Sized, E, A, C, S> Keyed<K, E, A, C, S> {
    /// The limit `name` (the policy's name in the `RateLimit` fields) over `limiter`, with the
    /// key that `key` finds in each request.
    ///
    /// # Errors
    ///
    /// [`PolicyNameError`](super::PolicyNameError) if `name` is empty, longer than 64 bytes, or
    /// holds other than letters, digits and `-_.:/`.
    pub fn new(
        name: &str,
        limiter: Arc<KeyedRateLimiter<K, A, C, S>>,
        key: E,
    ) -> Result<Keyed<K, E, A, C, S>, super::PolicyNameError> {
        Ok(Keyed {
            name: PolicyName::new(name)?,
            limiter,
            key,
            missing: MissingKey::default(),
        })
    }

    /// What to do with a request whose key cannot be found: by default, answer
    /// `500 Internal Server Error` (see [`MissingKey`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use http::{HeaderName, StatusCode};
    /// use tollgate::middleware::{Header, Keyed, MissingKey};
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let per_key = Arc::new(KeyedRateLimiter::<[u8]>::gcra(Quota::per_minute(600).unwrap(), 1_000).unwrap());
    /// let limit = Keyed::new("per-api-key", per_key, Header::new(HeaderName::from_static("x-api-key")))
    ///     .unwrap()
    ///     .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED));
    /// # let _ = limit;
    /// ```
    #[must_use]
    pub fn on_missing_key(self, missing: MissingKey) -> Self {
        Keyed { missing, ..self }
    }
}

impl<K: ?Sized, E, A, C, S> fmt::Debug for Keyed<K, E, A, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("name", &self.name.as_str())
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

/// A direct limiter as a limit: every request counted against one state.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::middleware::Direct;
/// use tollgate::{Quota, RateLimiter};
/// let global = Direct::new("global", Arc::new(RateLimiter::gcra(Quota::per_second(5_000).unwrap()))).unwrap();
/// # let _ = global;
/// ```
pub struct Direct<A = Gcra, C = TscClock> {
    name: PolicyName,
    limiter: Arc<RateLimiter<A, C>>,
}

impl<A, C> Direct<A, C> {
    /// The limit `name` over `limiter`.
    ///
    /// # Errors
    ///
    /// As [`Keyed::new`].
    pub fn new(
        name: &str,
        limiter: Arc<RateLimiter<A, C>>,
    ) -> Result<Direct<A, C>, super::PolicyNameError> {
        Ok(Direct {
            name: PolicyName::new(name)?,
            limiter,
        })
    }
}

impl<A, C> fmt::Debug for Direct<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Direct")
            .field("name", &self.name.as_str())
            .finish_non_exhaustive()
    }
}

/// A limit's layer for one request, or none (its key was missing and it is skipped): a layer
/// that admits everything and never binds. Public, in a private module, for the sealed traits.
#[derive(Debug)]
pub enum Skippable<L> {
    Checked(L),
    Skipped,
}

impl<L: Step> Step for Skippable<L> {
    type Seen = Option<L::Seen>;

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

    fn look(&self, now: Nanos, cost: u64) -> (Self::Seen, Result<(), Denied>) {
        match self {
            Skippable::Checked(layer) => {
                let (seen, verdict) = layer.look(now, cost);
                (Some(seen), verdict)
            }
            Skippable::Skipped => (None, Ok(())),
        }
    }

    fn hold(&self, seen: Self::Seen, now: Nanos, cost: u64) -> Result<Hold, Denied> {
        match (self, seen) {
            (Skippable::Checked(layer), Some(seen)) => layer.hold(seen, now, cost),
            _ => Ok(Hold::NOTHING),
        }
    }

    fn release(&self, hold: Hold, cost: u64) {
        if let Skippable::Checked(layer) = self {
            layer.release(hold, cost);
        }
    }

    fn decision(&self, hold: Option<Hold>, now: Nanos, cost: u64) -> Decision {
        match self {
            Skippable::Checked(layer) => layer.decision(hold, now, cost),
            // Never the least remaining: a skipped limit never binds.
            Skippable::Skipped => Decision::new(true, u64::MAX, Nanos::ZERO, Nanos::ZERO, u64::MAX),
        }
    }
}

impl<L> From<Option<L>> for Skippable<L> {
    fn from(layer: Option<L>) -> Skippable<L> {
        layer.map_or(Skippable::Skipped, Skippable::Checked)
    }
}

/// What the limits made of a request. Public, in a private module, for the sealed traits.
#[derive(Clone, Copy, Debug)]
pub enum Verdict {
    /// A key was missing under [`MissingKey::Allow`]: no limit checked.
    Unchecked,
    /// A key was missing under [`MissingKey::Reject`]: this status, no limit checked.
    Rejected(StatusCode),
    /// Decided: the binding limit's index and its decision (see
    /// [`LayeredDecision`](crate::layers::LayeredDecision)).
    Decided(usize, Decision),
    /// The cost exceeds a limit's capacity: never admitted.
    TooLarge,
    /// The limits could not decide: Redis refused the script (a key holding something else, a
    /// request's keys in different slots of a cluster).
    Failed,
}

pub(crate) mod sealed {
    use super::Verdict;
    use crate::layers::sealed::Step;
    use core::future::Future;
    use core::pin::Pin;
    use core::time::Duration;
    use http::request::Parts;
    use std::net::IpAddr;
    use std::sync::Arc;

    /// A request's verdict: at once, or once a round trip is back.
    pub enum Outcome {
        Now(Verdict),
        Later(Pin<Box<dyn Future<Output = Verdict> + Send>>),
    }

    impl core::fmt::Debug for Outcome {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            match self {
                Outcome::Now(verdict) => f.debug_tuple("Now").field(verdict).finish(),
                Outcome::Later(_) => f.write_str("Later"),
            }
        }
    }

    /// A limit's steps: its name and policy, a request's key, and the key's layer.
    pub trait Limit: Send + Sync + 'static {
        /// A request's key, owned (`()` for a direct limiter).
        type Key;
        /// The layer of one key.
        type Layer<'a>: Step
        where
            Self: 'a;
        /// Whether its key is found from the peer's address.
        const NEEDS_PEER: bool;
        /// The policy's name.
        fn name(&self) -> &str;
        /// The capacity and the time it comes back in full over.
        fn policy(&self) -> (u64, Duration);
        /// The request's key (`None`: the limit is skipped); `Err` with the verdict if its key
        /// is missing and that settles the request.
        fn key(&self, parts: &Parts, peer: Option<IpAddr>) -> Result<Option<Self::Key>, Verdict>;
        /// The layer of `key`.
        fn layer<'a>(&'a self, key: &'a Self::Key) -> Self::Layer<'a>;
    }

    /// The limits of a layer: a tuple of [`Limit`]s, or Redis limits.
    pub trait Limits: Send + Sync + 'static {
        /// The request's verdict, all limits together.
        fn decide(this: &Arc<Self>, parts: &Parts, peer: Option<IpAddr>, cost: u64) -> Outcome;
        /// Each limit's name, capacity and window, in order.
        fn policies(&self, each: &mut dyn FnMut(&str, u64, Duration));
        /// The name of the limit at `index`.
        fn name(&self, index: usize) -> &str;
        /// Whether a limit's key is found from the peer's address.
        fn needs_peer(&self) -> bool;
    }
}

impl<K, E, A, C, S> sealed::Limit for Keyed<K, E, A, C, S>
where
    K: Hash + ?Sized + Send + Sync + 'static,
    E: KeyExtractor,
    E::Key: Borrow<K>,
    A: Algorithm + 'static,
    C: Clock + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    type Key = E::Key;
    type Layer<'a> = crate::layers::KeyedLayer<'a, K, A, C, S>;
    const NEEDS_PEER: bool = E::NEEDS_PEER;

    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn policy(&self) -> (u64, Duration) {
        let algorithm = self.limiter.algorithm();
        (algorithm.capacity(), algorithm.window())
    }

    fn key(&self, parts: &Parts, peer: Option<IpAddr>) -> Result<Option<E::Key>, Verdict> {
        match self.key.extract(parts, peer) {
            Some(key) => Ok(Some(key)),
            None => self.missing.settle().map(|()| None),
        }
    }

    fn layer<'a>(&'a self, key: &'a E::Key) -> Self::Layer<'a> {
        self.limiter.layer::<K>(key.borrow())
    }
}

impl<A, C> sealed::Limit for Direct<A, C>
where
    A: Algorithm + 'static,
    C: Clock + 'static,
{
    type Key = ();
    type Layer<'a> = &'a RateLimiter<A, C>;
    const NEEDS_PEER: bool = false;

    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn policy(&self) -> (u64, Duration) {
        let algorithm = self.limiter.algorithm();
        (algorithm.capacity(), algorithm.window())
    }

    fn key(&self, _: &Parts, _: Option<IpAddr>) -> Result<Option<()>, Verdict> {
        Ok(Some(()))
    }

    fn layer<'a>(&'a self, (): &'a ()) -> Self::Layer<'a> {
        &self.limiter
    }
}

/// The verdict of an all-or-nothing decision.
pub(super) fn verdict(decided: Result<crate::layers::LayeredDecision, LayerError>) -> Verdict {
    match decided {
        Ok(decided) => Verdict::Decided(decided.layer(), *decided.decision()),
        Err(_) => Verdict::TooLarge,
    }
}

/// The layers of a tuple of limits for a request's keys: each key's, or a skipped layer.
macro_rules! layers {
    ($this:ident, $keys:ident, $($i:tt)+) => {
        ($(Skippable::from($keys.$i.as_ref().map(|key| $this.$i.layer(key))),)+)
    };
}
#[cfg(feature = "tokio")]
pub(super) use layers;

macro_rules! limits {
    ($($limit:ident $i:tt),+) => {
        impl<$($limit: sealed::Limit),+> sealed::Limits for ($($limit,)+) {
            fn decide(
                this: &Arc<Self>,
                parts: &Parts,
                peer: Option<IpAddr>,
                cost: u64,
            ) -> sealed::Outcome {
                let keys = ($(match this.$i.key(parts, peer) {
                    Ok(key) => key,
                    Err(verdict) => return sealed::Outcome::Now(verdict),
                },)+);
                let layers = layers!(this, keys, $($i)+);
                sealed::Outcome::Now(verdict(layers.decide_all(cost)))
            }

            fn name(&self, index: usize) -> &str {
                [$(self.$i.name()),+][index]
            }

            fn needs_peer(&self) -> bool {
                $($limit::NEEDS_PEER)||+
            }

            fn policies(&self, each: &mut dyn FnMut(&str, u64, Duration)) {
                $(
                    let (capacity, window) = self.$i.policy();
                    each(self.$i.name(), capacity, window);
                )+
            }
        }
    };
}

limits!(A 0);
limits!(A 0, B 1);
limits!(A 0, B 1, C 2);
limits!(A 0, B 1, C 2, D 3);
limits!(A 0, B 1, C 2, D 3, E 4);
limits!(A 0, B 1, C 2, D 3, E 4, F 5);
limits!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
limits!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

#[cfg(test)]
mod tests {
    use super::sealed::Limits;
    use super::*;
    use crate::middleware::{from_fn, ClientIp, Header, PeerIp};
    use crate::Quota;

    #[test]
    fn the_peer_is_looked_up_only_for_keys_that_need_it() {
        let quota = Quota::per_second(1).unwrap();
        let per_key = Arc::new(KeyedRateLimiter::<[u8]>::gcra(quota, 10).unwrap());
        let per_ip = Arc::new(KeyedRateLimiter::<IpAddr>::gcra(quota, 10).unwrap());
        let global = Direct::new("global", Arc::new(RateLimiter::gcra(quota))).unwrap();
        let api_key = Header::new(http::HeaderName::from_static("x-api-key"));
        let by_header = Keyed::new("key", Arc::clone(&per_key), api_key).unwrap();
        let by_closure = Keyed::new(
            "path",
            per_key,
            from_fn(|p: &Parts| Some(p.uri.path().as_bytes().to_vec().into_boxed_slice())),
        )
        .unwrap();
        assert!(!(by_header, by_closure, global).needs_peer());
        let by_peer = Keyed::new("ip", Arc::clone(&per_ip), PeerIp).unwrap();
        assert!((by_peer,).needs_peer());
        let by_client = Keyed::new("client", per_ip, ClientIp::default()).unwrap();
        assert!((by_client,).needs_peer());
    }
}
