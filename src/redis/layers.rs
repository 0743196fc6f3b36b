//! All or nothing over several Redis limits, in one round trip.

use core::fmt;
use core::time::Duration;

use ::redis::aio::ConnectionLike;

use super::limiter::{layered, reserve, Remote};
use super::{Error, RedisKeyedRateLimiter, RedisRateLimiter, RedisReservation};
use crate::layers::LayeredDecision;

/// A key of a Redis limiter (or a direct Redis limiter's one state), as a layer of an
/// all-or-nothing check: see [`decide_all`].
///
/// ```no_run
/// # async fn run(per_user: tollgate::redis::RedisKeyedRateLimiter, global: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
/// let layers = [per_user.layer("alice"), global.layer()];
/// tollgate::redis::check_all(&layers, 1).await?;
/// # Ok(())
/// # }
/// ```
pub struct RedisLayer<'a, C> {
    remote: &'a Remote<C>,
    key: Vec<u8>,
}

impl<C> RedisKeyedRateLimiter<C> {
    /// `key` as a layer of an all-or-nothing check over several limits ([`decide_all`]).
    ///
    /// ```no_run
    /// # async fn run(per_user: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// tollgate::redis::check_all(&[per_user.layer("alice")], 1).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn layer(&self, key: impl AsRef<[u8]>) -> RedisLayer<'_, C> {
        RedisLayer {
            remote: self.remote(),
            key: [self.prefix(), key.as_ref()].concat(),
        }
    }
}

impl<C> RedisRateLimiter<C> {
    /// The limiter as a layer of an all-or-nothing check over several limits ([`decide_all`]).
    ///
    /// ```no_run
    /// # async fn run(global: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// tollgate::redis::check_all(&[global.layer()], 1).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn layer(&self) -> RedisLayer<'_, C> {
        RedisLayer {
            remote: self.remote(),
            key: self.key().to_vec(),
        }
    }
}

/// Decides a request of `cost` in every layer, all or nothing, in one round trip: one script
/// over the layers' keys, each with its own limiter's algorithm, as
/// [`Layers::decide_all`](crate::layers::Layers::decide_all) does locally. It is admitted only
/// if every layer admits it, a refused request writes nothing in any layer, and the decision
/// names the layer that decided (the one that refused, with the longest wait; or, admitted, the
/// one with the least remaining). Redis runs the script alone, so no other request sees a
/// layer held.
///
/// The script runs on the first layer's connection: every layer's keys must live on that Redis,
/// and in a Redis Cluster in one slot (give them one `{hash tag}` in their prefixes, as
/// `rl:{tenant-7}:user:` and `rl:{tenant-7}:tenant`). When Redis cannot be asked, each layer's
/// [`Fallback`](super::Fallback) is looked at, and decides only if every one admits.
///
/// # Errors
///
/// [`Error::InsufficientCapacity`] for a cost above a layer's capacity; [`Error::Redis`] if
/// Redis refused the script (keys in different slots of a cluster, a key holding something
/// else); [`Error::Unsupported`] for no layer at all.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate::redis::{decide_all, RedisKeyedRateLimiter, RedisRateLimiter};
/// use tollgate::Quota;
///
/// let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
/// let per_user = RedisKeyedRateLimiter::gcra(conn.clone(), "rl:user:", Quota::per_second(10)?)?;
/// let per_tenant = RedisKeyedRateLimiter::sliding_window(conn.clone(), "rl:tenant:", Quota::per_hour(1_000_000)?)?;
/// let global = RedisRateLimiter::gcra(conn, "rl:global", Quota::per_second(5_000_000)?)?;
/// let decision = decide_all(&[per_user.layer("alice"), per_tenant.layer("acme"), global.layer()], 1).await?;
/// if !decision.is_allowed() {
///     println!("refused by layer {}", decision.layer());
/// }
/// # Ok(())
/// # }
/// ```
pub async fn decide_all<C: ConnectionLike + Clone + Send + Sync>(
    layers: &[RedisLayer<'_, C>],
    cost: u64,
) -> Result<LayeredDecision, Error> {
    layered(&parts(layers), cost, None).await
}

/// [`decide_all`] as a check: `Ok(())` if every layer admitted the request.
///
/// # Errors
///
/// [`Error::Denied`] with the refusing layer's wait (use [`decide_all`] to learn which layer);
/// otherwise as for [`decide_all`].
///
/// ```no_run
/// # async fn run(per_user: tollgate::redis::RedisKeyedRateLimiter, global: tollgate::redis::RedisRateLimiter) {
/// use tollgate::redis::{check_all, Error};
/// match check_all(&[per_user.layer("alice"), global.layer()], 1).await {
///     Ok(()) => { /* serve */ }
///     Err(Error::Denied(denied)) => { let _ = denied.retry_after_secs(); /* 429 */ }
///     Err(_) => { /* Redis could not decide */ }
/// }
/// # }
/// ```
pub async fn check_all<C: ConnectionLike + Clone + Send + Sync>(
    layers: &[RedisLayer<'_, C>],
    cost: u64,
) -> Result<(), Error> {
    Ok(decide_all(layers, cost).await?.decision().into_check()?)
}

/// Admits a request of `cost` into the GCRA schedule of every layer, to proceed when its turn
/// has come in all of them (the latest of their turns), if that is at most `max_wait` from now
/// in each: the local [`ReserveAll::reserve_all`](crate::layers::ReserveAll::reserve_all), in
/// one script. Each layer is looked at alone, then each reserves in order on what the ones
/// before it would write; a refused request writes nothing. The layers' keys must live on the
/// first layer's Redis (in one slot of a cluster), as for [`decide_all`]; when Redis cannot be
/// asked, the layers' fallbacks decide as for a check.
///
/// # Errors
///
/// [`Error::Denied`] with the longest wait beyond `max_wait` of the refusing layers;
/// [`Error::Unsupported`] if a layer's algorithm is not GCRA (or there is no layer);
/// [`Error::InsufficientCapacity`] for a cost above a layer's burst; [`Error::Redis`] if Redis
/// refused the script.
///
/// ```no_run
/// # async fn run(per_user: tollgate::redis::RedisKeyedRateLimiter, upstream: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
/// use std::time::Duration;
/// let turn = tollgate::redis::reserve_all(&[per_user.layer("alice"), upstream.layer()], 1, Duration::from_secs(2)).await?;
/// turn.ready().await;
/// # Ok(())
/// # }
/// ```
pub async fn reserve_all<C: ConnectionLike + Clone + Send + Sync>(
    layers: &[RedisLayer<'_, C>],
    cost: u64,
    max_wait: Duration,
) -> Result<RedisReservation<C>, Error> {
    reserve(&parts(layers), cost, max_wait, None).await
}

/// [`reserve_all`] at the time `now`, in microseconds since the Unix epoch: for tests.
///
/// # Errors
///
/// As for [`reserve_all`].
///
/// ```no_run
/// # async fn run(per_user: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
/// let at = 1_800_000_000_000_000;
/// let turn = tollgate::redis::reserve_all_at(&[per_user.layer("alice")], 1, std::time::Duration::ZERO, at).await?;
/// # let _ = turn;
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "reference")]
pub async fn reserve_all_at<C: ConnectionLike + Clone + Send + Sync>(
    layers: &[RedisLayer<'_, C>],
    cost: u64,
    max_wait: Duration,
    now: u64,
) -> Result<RedisReservation<C>, Error> {
    reserve(&parts(layers), cost, max_wait, Some(now)).await
}

/// [`decide_all`] at the time `now`, in microseconds since the Unix epoch, instead of the
/// server's: for tests that replay the script against the algorithms' transitions.
///
/// # Errors
///
/// As for [`decide_all`].
///
/// ```no_run
/// # async fn run(per_user: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
/// let at = 1_800_000_000_000_000; // microseconds since 1970
/// let decision = tollgate::redis::decide_all_at(&[per_user.layer("alice")], 1, at).await?;
/// # let _ = decision;
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "reference")]
pub async fn decide_all_at<C: ConnectionLike + Clone + Send + Sync>(
    layers: &[RedisLayer<'_, C>],
    cost: u64,
    now: u64,
) -> Result<LayeredDecision, Error> {
    layered(&parts(layers), cost, Some(now)).await
}

fn parts<'a, C>(layers: &'a [RedisLayer<'a, C>]) -> Vec<(&'a Remote<C>, &'a [u8])> {
    layers
        .iter()
        .map(|layer| (layer.remote, &layer.key[..]))
        .collect()
}

/// The key and its algorithm.
impl<C> fmt::Debug for RedisLayer<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLayer")
            .field("key", &String::from_utf8_lossy(&self.key))
            .field("algorithm", &self.remote.algorithm())
            .finish()
    }
}
