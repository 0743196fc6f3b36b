//! Limits kept in Redis, shared by every server: checked all or nothing in one round trip
//! (with the `redis` feature).

use core::fmt;
use core::time::Duration;
use std::net::IpAddr;
use std::sync::Arc;

use ::redis::aio::ConnectionLike;
use http::request::Parts;

use super::key::KeyExtractor;
use super::limit::sealed::{self, Outcome};
use super::limit::{MissingKey, Verdict};
use super::policy::PolicyName;
use super::shape;
use crate::layers::LayeredDecision;
use crate::redis::{
    decide_all, reserve_all, Error, RedisKeyedRateLimiter, RedisLayer, RedisRateLimiter,
};

/// A request's key as it goes into a Redis key, after the limiter's prefix: an address in its
/// text form (`rl:ip:198.51.100.9`, readable in `redis-cli`), bytes and strings as they are,
/// integers in decimal.
///
/// ```
/// use tollgate::middleware::RedisKey;
/// let mut key = b"rl:ip:".to_vec();
/// "198.51.100.9".parse::<std::net::IpAddr>().unwrap().append_to(&mut key);
/// assert_eq!(key, b"rl:ip:198.51.100.9");
/// ```
pub trait RedisKey {
    /// Appends the key's bytes to `key`.
    fn append_to(&self, key: &mut Vec<u8>);
}

impl RedisKey for IpAddr {
    fn append_to(&self, key: &mut Vec<u8>) {
        use std::io::Write;
        // Writing to a `Vec` never fails.
        let _ = write!(key, "{self}");
    }
}

impl RedisKey for u64 {
    fn append_to(&self, key: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(key, "{self}");
    }
}

macro_rules! bytes_key {
    ($($t:ty),*) => {$(
        impl RedisKey for $t {
            fn append_to(&self, key: &mut Vec<u8>) {
                key.extend_from_slice(AsRef::<[u8]>::as_ref(self));
            }
        }
    )*};
}

bytes_key!(Box<[u8]>, Vec<u8>, String, &'static str, &'static [u8]);

impl RedisKey for Box<str> {
    fn append_to(&self, key: &mut Vec<u8>) {
        key.extend_from_slice(self.as_bytes());
    }
}

/// A Redis keyed limiter as a limit of a [`RedisLimits`]: each request counted against its
/// key's state in Redis.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use tollgate::middleware::{PeerIp, RedisKeyed};
/// use tollgate::redis::RedisKeyedRateLimiter;
/// use tollgate::Quota;
/// let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
/// let per_ip = Arc::new(RedisKeyedRateLimiter::gcra(conn, "rl:ip:", Quota::per_second(10)?)?);
/// let limit = RedisKeyed::new("per-ip", per_ip, PeerIp)?;
/// # let _ = limit;
/// # Ok(())
/// # }
/// ```
pub struct RedisKeyed<E, C> {
    name: PolicyName,
    limiter: Arc<RedisKeyedRateLimiter<C>>,
    key: E,
    missing: MissingKey,
}

impl<E, C> RedisKeyed<E, C> {
    /// The limit `name` over `limiter`, with the key that `key` finds in each request.
    ///
    /// # Errors
    ///
    /// As [`Keyed::new`](super::Keyed::new).
    pub fn new(
        name: &str,
        limiter: Arc<RedisKeyedRateLimiter<C>>,
        key: E,
    ) -> Result<RedisKeyed<E, C>, super::PolicyNameError> {
        Ok(RedisKeyed {
            name: PolicyName::new(name)?,
            limiter,
            key,
            missing: MissingKey::default(),
        })
    }

    /// What to do with a request whose key cannot be found, as
    /// [`Keyed::on_missing_key`](super::Keyed::on_missing_key).
    #[must_use]
    pub fn on_missing_key(self, missing: MissingKey) -> Self {
        RedisKeyed { missing, ..self }
    }
}

impl<E, C> fmt::Debug for RedisKeyed<E, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisKeyed")
            .field("name", &self.name.as_str())
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

/// A direct Redis limiter as a limit of a [`RedisLimits`]: every request counted against one
/// state in Redis, shared by every server.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use tollgate::middleware::RedisDirect;
/// use tollgate::redis::RedisRateLimiter;
/// use tollgate::Quota;
/// let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
/// let global = Arc::new(RedisRateLimiter::gcra(conn, "rl:global", Quota::per_second(5_000)?)?);
/// let limit = RedisDirect::new("global", global)?;
/// # let _ = limit;
/// # Ok(())
/// # }
/// ```
pub struct RedisDirect<C> {
    name: PolicyName,
    limiter: Arc<RedisRateLimiter<C>>,
}

impl<C> RedisDirect<C> {
    /// The limit `name` over `limiter`.
    ///
    /// # Errors
    ///
    /// As [`Keyed::new`](super::Keyed::new).
    pub fn new(
        name: &str,
        limiter: Arc<RedisRateLimiter<C>>,
    ) -> Result<RedisDirect<C>, super::PolicyNameError> {
        Ok(RedisDirect {
            name: PolicyName::new(name)?,
            limiter,
        })
    }
}

impl<C> fmt::Debug for RedisDirect<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisDirect")
            .field("name", &self.name.as_str())
            .finish_non_exhaustive()
    }
}

/// What a limit found in a request. Public, in a private module, for the sealed trait.
#[derive(Debug)]
pub enum Found {
    /// The request's key, for a keyed limiter.
    Key(Vec<u8>),
    /// Nothing to find: a direct limiter.
    Direct,
    /// No key, and the limit is skipped.
    Skipped,
}

/// One limit of a [`RedisLimits`]: [`RedisKeyed`] or [`RedisDirect`]. The trait is sealed.
pub trait RedisLimit<C>: remote::Limit<C> {}

impl<C, T: remote::Limit<C>> RedisLimit<C> for T {}

mod remote {
    use super::{Found, IpAddr, Parts, RedisLayer, Verdict};

    /// A Redis limit's steps.
    pub trait Limit<C>: Send + Sync + 'static {
        /// Whether its key is found from the peer's address.
        fn needs_peer(&self) -> bool;
        /// The policy's name.
        fn name(&self) -> &str;
        /// The capacity and the time it comes back in full over.
        fn policy(&self) -> (u64, core::time::Duration);
        /// What the request holds for this limit; `Err` with the verdict if its key is missing
        /// and that settles the request.
        fn find(&self, parts: &Parts, peer: Option<IpAddr>) -> Result<Found, Verdict>;
        /// The layer of the state for `key` (the key found, or empty for a direct limiter).
        fn layer(&self, key: &[u8]) -> RedisLayer<'_, C>;
    }
}

impl<E, C> remote::Limit<C> for RedisKeyed<E, C>
where
    E: KeyExtractor,
    E::Key: RedisKey,
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn needs_peer(&self) -> bool {
        E::NEEDS_PEER
    }

    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn policy(&self) -> (u64, Duration) {
        let algorithm = self.limiter.algorithm();
        (algorithm.capacity(), algorithm.window())
    }

    fn find(&self, parts: &Parts, peer: Option<IpAddr>) -> Result<Found, Verdict> {
        match self.key.extract(parts, peer) {
            Some(key) => {
                let mut bytes = Vec::new();
                key.append_to(&mut bytes);
                Ok(Found::Key(bytes))
            }
            None => self.missing.settle().map(|()| Found::Skipped),
        }
    }

    fn layer(&self, key: &[u8]) -> RedisLayer<'_, C> {
        self.limiter.layer(key)
    }
}

impl<C> remote::Limit<C> for RedisDirect<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn needs_peer(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn policy(&self) -> (u64, Duration) {
        let algorithm = self.limiter.algorithm();
        (algorithm.capacity(), algorithm.window())
    }

    fn find(&self, _: &Parts, _: Option<IpAddr>) -> Result<Found, Verdict> {
        Ok(Found::Direct)
    }

    fn layer(&self, _: &[u8]) -> RedisLayer<'_, C> {
        self.limiter.layer()
    }
}

/// Limits kept in Redis, for a [`RateLimitLayer`](super::RateLimitLayer): every server's
/// requests count against the same states. A request is decided in every limit at once, all or
/// nothing, in one round trip ([`decide_all`]): a refused request writes nothing in any limit.
/// The inner service is called once the decision is back, so the service it wraps must be
/// `Clone` (as axum's, hyper's and tonic's services are).
///
/// The script runs on the first limit's connection: every limiter's keys must live on that
/// Redis, and in a Redis Cluster in one slot (give every limiter's prefix one `{hash tag}`).
/// When Redis cannot be asked (down, unreachable, slower than the limiter's timeout), each
/// limiter's [`Fallback`](crate::redis::Fallback) decides, and the request is admitted only if
/// every one admits: by default a refusal, `429` with `Retry-After: 1`. A request that Redis
/// refuses to decide (a key holding something else, keys in different slots of a cluster) is
/// answered `500 Internal Server Error`, as a misconfigured server.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use tollgate::middleware::{PeerIp, RateLimitLayer, RedisDirect, RedisKeyed, RedisLimits};
/// use tollgate::redis::{RedisKeyedRateLimiter, RedisRateLimiter};
/// use tollgate::Quota;
///
/// let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
/// let per_ip = Arc::new(RedisKeyedRateLimiter::gcra(conn.clone(), "rl:ip:", Quota::per_second(10)?)?);
/// let global = Arc::new(RedisRateLimiter::gcra(conn, "rl:global", Quota::per_second(5_000)?)?);
/// let layer = RateLimitLayer::new(
///     RedisLimits::new()
///         .with(RedisKeyed::new("per-ip", per_ip, PeerIp)?)
///         .with(RedisDirect::new("global", global)?),
/// );
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
pub struct RedisLimits<C> {
    limits: Vec<Box<dyn RedisLimit<C>>>,
}

impl<C> RedisLimits<C> {
    /// No limits yet: a layer over none admits every request unchecked.
    #[must_use]
    pub fn new() -> RedisLimits<C> {
        RedisLimits { limits: Vec::new() }
    }

    /// `limit` added after the others: the fields name the limits in this order, and a
    /// refusal's [`limit`](super::Refusal::limit) is an index in it.
    #[must_use]
    pub fn with(mut self, limit: impl RedisLimit<C>) -> Self {
        self.limits.push(Box::new(limit));
        self
    }
}

impl<C> Default for RedisLimits<C> {
    fn default() -> Self {
        RedisLimits::new()
    }
}

impl<C: 'static> fmt::Debug for RedisLimits<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.limits.iter().map(|limit| limit.name()))
            .finish()
    }
}

impl<C> sealed::Limits for RedisLimits<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn decide(this: &Arc<Self>, parts: &Parts, peer: Option<IpAddr>, cost: u64) -> Outcome {
        RedisLimits::outcome(this, parts, peer, cost, None)
    }

    fn name(&self, index: usize) -> &str {
        self.limits[index].name()
    }

    fn needs_peer(&self) -> bool {
        self.limits.iter().any(|limit| limit.needs_peer())
    }

    fn policies(&self, each: &mut dyn FnMut(&str, u64, Duration)) {
        for limit in &self.limits {
            let (capacity, window) = limit.policy();
            each(limit.name(), capacity, window);
        }
    }
}

impl<C> shape::sealed::Shape for RedisLimits<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn shape(
        this: &Arc<Self>,
        parts: &Parts,
        peer: Option<IpAddr>,
        cost: u64,
        max_wait: Duration,
    ) -> Outcome {
        RedisLimits::outcome(this, parts, peer, cost, Some(max_wait))
    }
}

impl<C> RedisLimits<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The request's verdict: its keys are found now, from the head, and the round trips run
    /// in the response future. With `max_wait`, a refusal whose wait is at most that becomes a
    /// reservation (a second round trip), and the verdict comes at its turn, with the fields of
    /// the state then (a third).
    fn outcome(
        this: &Arc<Self>,
        parts: &Parts,
        peer: Option<IpAddr>,
        cost: u64,
        max_wait: Option<Duration>,
    ) -> Outcome {
        let mut found = Vec::with_capacity(this.limits.len());
        for (i, limit) in this.limits.iter().enumerate() {
            match limit.find(parts, peer) {
                Ok(Found::Skipped) => {}
                Ok(what) => found.push((i, what)),
                Err(verdict) => return Outcome::Now(verdict),
            }
        }
        if found.is_empty() {
            return Outcome::Now(Verdict::Unchecked);
        }
        let this = Arc::clone(this);
        Outcome::Later(Box::pin(async move {
            let layers: Vec<_> = found
                .iter()
                .map(|(i, what)| match what {
                    Found::Key(key) => this.limits[*i].layer(key),
                    _ => this.limits[*i].layer(&[]),
                })
                .collect();
            let verdict = |decided: Result<LayeredDecision, Error>| match decided {
                Ok(decided) => Verdict::Decided(found[decided.layer()].0, *decided.decision()),
                // Refused before any round trip: never admitted.
                Err(Error::InsufficientCapacity(_)) => Verdict::TooLarge,
                Err(_) => Verdict::Failed,
            };
            let decided = verdict(decide_all(&layers, cost).await);
            let Some(max_wait) = max_wait else {
                return decided;
            };
            if shape::refused_for(&decided).map_or(true, |wait| wait > max_wait) {
                return decided;
            }
            match reserve_all(&layers, cost, max_wait).await {
                // At its turn, the fields: the state as the request goes on.
                Ok(reservation) => {
                    reservation.ready().await;
                    verdict(decide_all(&layers, 0).await)
                }
                // A limit other than GCRA takes no reservation: the refusal stands.
                Err(Error::Unsupported(_)) => decided,
                // Its turn was taken: decided again, refused with the wait it has now.
                Err(_) => verdict(decide_all(&layers, cost).await),
            }
        }))
    }
}
