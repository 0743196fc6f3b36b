//! The Redis limiters: [`RedisKeyedRateLimiter`], one state per key, and [`RedisRateLimiter`],
//! one state for everything, each decision one round trip of one script.

use core::fmt;

use ::redis::aio::{ConnectionLike, ConnectionManager};

use super::gcra::{in_microseconds, RedisGcra, SCRIPT};
use super::Error;
use crate::clock::Nanos;
use crate::decision::{Decision, InsufficientCapacity};
use crate::error::BuildError;
use crate::quota::Quota;

/// What the script is asked to do with its key.
#[derive(Clone, Copy)]
enum Mode {
    Decide = 0,
    Peek = 1,
}

/// A connection and the quota its script runs: what both limiters share.
#[derive(Clone)]
struct Remote<C> {
    conn: C,
    gcra: RedisGcra,
}

impl<C: ConnectionLike + Clone + Send + Sync> Remote<C> {
    /// One round trip: the script on `key` for a request of `cost`, at the server's time, or at
    /// `now` (microseconds since the Unix epoch) where given.
    async fn call(
        &self,
        key: &[u8],
        cost: u64,
        mode: Mode,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        InsufficientCapacity::check(cost, self.gcra.burst())?;
        let [interval, tolerance, burst] = self.gcra.args();
        let mut invocation = SCRIPT.key(key);
        invocation
            .arg(interval)
            .arg(tolerance)
            .arg(burst)
            .arg(cost)
            .arg(mode as u8);
        if let Some(now) = now {
            invocation.arg(now);
        }
        let reply: Vec<i64> = invocation.invoke_async(&mut self.conn.clone()).await?;
        decision_from(&reply)
    }
}

/// The script's reply, `{allowed, remaining, retry_after, reset_after, burst}` with its times in
/// microseconds, as a [`Decision`].
fn decision_from(reply: &[i64]) -> Result<Decision, Error> {
    let field = |i: usize| {
        reply
            .get(i)
            .and_then(|&n| u64::try_from(n).ok())
            .ok_or_else(|| Error::Reply(format!("{reply:?}")))
    };
    if reply.len() != 5 || field(0)? > 1 {
        return Err(Error::Reply(format!("{reply:?}")));
    }
    let decision = Decision::new(
        field(0)? == 1,
        field(1)?,
        Nanos::from_nanos(field(2)?),
        Nanos::from_nanos(field(3)?),
        field(4)?,
    );
    Ok(in_microseconds(decision))
}

/// A GCRA limiter per key, whose states live in Redis: every server that uses the same Redis
/// (or Redis Cluster) and the same key prefix shares each key's limit.
///
/// A decision is one round trip: `EVALSHA` of a script that reads the key's state, applies the
/// transition of [`RedisGcra::decide`] at the server's `TIME`, and writes the new state with an
/// expiry at the moment it is fresh again, so Redis holds live keys only. The script is loaded
/// on first use and again after a `NOSCRIPT` reply (a restarted server). Redis runs each script
/// alone, so decisions on one key are linearizable, as a local limiter's are, and all servers
/// read one clock.
///
/// Keys are stored under `prefix` followed by the key's bytes. In a Redis Cluster, a key routes
/// to the slot of its name (or of the part in `{braces}`, a hash tag).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate::redis::RedisKeyedRateLimiter;
/// use tollgate::Quota;
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let conn = redis::aio::ConnectionManager::new(client).await?;
/// // 100 per minute per user, shared by every server.
/// let per_user = RedisKeyedRateLimiter::gcra(conn, "api:user:", Quota::per_minute(100)?)?;
/// let decision = per_user.decide_key("alice", 1).await?;
/// if !decision.is_allowed() {
///     // 429, with `Retry-After: decision.retry_after_secs()`
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisKeyedRateLimiter<C = ConnectionManager> {
    remote: Remote<C>,
    prefix: Box<[u8]>,
}

impl<C: ConnectionLike + Clone + Send + Sync> RedisKeyedRateLimiter<C> {
    /// A GCRA limiter per key for `quota` on the connection `conn` (a `ConnectionManager`, which
    /// reconnects, or a cluster connection), its keys stored under `prefix`.
    ///
    /// # Errors
    ///
    /// [`BuildError::ToleranceTooLong`] for a quota whose tolerance is too long for the script's
    /// microseconds (see [`RedisGcra::new`]).
    pub fn gcra(conn: C, prefix: impl AsRef<[u8]>, quota: Quota) -> Result<Self, BuildError> {
        Ok(RedisKeyedRateLimiter {
            remote: Remote {
                conn,
                gcra: RedisGcra::new(&quota)?,
            },
            prefix: prefix.as_ref().into(),
        })
    }

    /// Admits one request for `key`, or says how long to wait.
    ///
    /// # Errors
    ///
    /// [`Error::Denied`] if the key is over its limit; [`Error::Redis`] if Redis could not be
    /// asked (or refused the script).
    pub async fn check_key(&self, key: impl AsRef<[u8]>) -> Result<(), Error> {
        self.check_key_n(key, 1).await
    }

    /// Admits a request of `cost` for `key`, all or nothing.
    ///
    /// # Errors
    ///
    /// As for [`check_key`](Self::check_key), and [`Error::InsufficientCapacity`] for a cost
    /// above the burst, which is refused without asking Redis.
    pub async fn check_key_n(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<(), Error> {
        Ok(self.decide_key(key, cost).await?.into_check()?)
    }

    /// Decides a request of `cost` for `key` and reports everything about it, as
    /// [`KeyedRateLimiter::decide_key`](crate::KeyedRateLimiter::decide_key) does.
    ///
    /// # Errors
    ///
    /// [`Error::InsufficientCapacity`] for a cost above the burst, refused without asking Redis;
    /// [`Error::Redis`] if Redis could not be asked.
    pub async fn decide_key(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<Decision, Error> {
        let key = self.key(key.as_ref());
        self.remote.call(&key, cost, Mode::Decide, None).await
    }

    /// Whether a request of `cost` for `key` would be admitted now, and if not, when, without
    /// changing anything: as
    /// [`KeyedRateLimiter::peek_key_n`](crate::KeyedRateLimiter::peek_key_n).
    ///
    /// # Errors
    ///
    /// As for [`decide_key`](Self::decide_key).
    pub async fn peek_key_n(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<Decision, Error> {
        let key = self.key(key.as_ref());
        self.remote.call(&key, cost, Mode::Peek, None).await
    }

    /// [`decide_key`](Self::decide_key) at the time `now`, in microseconds since the Unix epoch,
    /// instead of the server's: for tests that replay the script against [`RedisGcra::decide`].
    /// The key is stored without an expiry, since only the server's own time can set one.
    ///
    /// # Errors
    ///
    /// As for [`decide_key`](Self::decide_key), and [`Error::Redis`] for a time past the range
    /// the script computes exactly in (2^52 µs).
    #[cfg(feature = "reference")]
    pub async fn decide_key_at(
        &self,
        key: impl AsRef<[u8]>,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        let key = self.key(key.as_ref());
        self.remote.call(&key, cost, Mode::Decide, Some(now)).await
    }

    /// [`peek_key_n`](Self::peek_key_n) at the time `now`: see
    /// [`decide_key_at`](Self::decide_key_at).
    ///
    /// # Errors
    ///
    /// As for [`decide_key_at`](Self::decide_key_at).
    #[cfg(feature = "reference")]
    pub async fn peek_key_at(
        &self,
        key: impl AsRef<[u8]>,
        cost: u64,
        now: u64,
    ) -> Result<Decision, Error> {
        let key = self.key(key.as_ref());
        self.remote.call(&key, cost, Mode::Peek, Some(now)).await
    }

    /// The quota as the script runs it, in microseconds.
    #[must_use]
    pub fn algorithm(&self) -> &RedisGcra {
        &self.remote.gcra
    }

    /// The name under which `key`'s state is stored: the prefix, then the key.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
    /// # use tollgate::{redis::RedisKeyedRateLimiter, Quota};
    /// let limiter = RedisKeyedRateLimiter::gcra(conn, "rl:", Quota::per_second(5)?)?;
    /// assert_eq!(limiter.key("alice"), b"rl:alice");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn key(&self, key: impl AsRef<[u8]>) -> Vec<u8> {
        [&self.prefix[..], key.as_ref()].concat()
    }
}

impl<C> fmt::Debug for RedisKeyedRateLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisKeyedRateLimiter")
            .field("algorithm", &self.remote.gcra)
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .finish_non_exhaustive()
    }
}

/// A GCRA limiter with one state, in Redis: a limit that every server shares as a whole (the
/// calls of one upstream API, say). One key of a [`RedisKeyedRateLimiter`], with its semantics.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate::redis::RedisRateLimiter;
/// use tollgate::Quota;
///
/// let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
/// let upstream = RedisRateLimiter::gcra(conn, "rl:upstream", Quota::per_second(1_000)?)?;
/// upstream.check().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisRateLimiter<C = ConnectionManager> {
    remote: Remote<C>,
    key: Box<[u8]>,
}

impl<C: ConnectionLike + Clone + Send + Sync> RedisRateLimiter<C> {
    /// A GCRA limiter for `quota` on the connection `conn`, its state stored under `key`.
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::gcra`].
    pub fn gcra(conn: C, key: impl AsRef<[u8]>, quota: Quota) -> Result<Self, BuildError> {
        Ok(RedisRateLimiter {
            remote: Remote {
                conn,
                gcra: RedisGcra::new(&quota)?,
            },
            key: key.as_ref().into(),
        })
    }

    /// Admits one request, or says how long to wait.
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::check_key`].
    pub async fn check(&self) -> Result<(), Error> {
        self.check_n(1).await
    }

    /// Admits a request of `cost`, all or nothing.
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::check_key_n`].
    pub async fn check_n(&self, cost: u64) -> Result<(), Error> {
        Ok(self.decide(cost).await?.into_check()?)
    }

    /// Decides a request of `cost` and reports everything about it.
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::decide_key`].
    pub async fn decide(&self, cost: u64) -> Result<Decision, Error> {
        self.remote.call(&self.key, cost, Mode::Decide, None).await
    }

    /// Whether a request of `cost` would be admitted now, and if not, when, without changing
    /// anything.
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::decide_key`].
    pub async fn peek_n(&self, cost: u64) -> Result<Decision, Error> {
        self.remote.call(&self.key, cost, Mode::Peek, None).await
    }

    /// The quota as the script runs it, in microseconds.
    #[must_use]
    pub fn algorithm(&self) -> &RedisGcra {
        &self.remote.gcra
    }
}

impl<C> fmt::Debug for RedisRateLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("algorithm", &self.remote.gcra)
            .field("key", &String::from_utf8_lossy(&self.key))
            .finish_non_exhaustive()
    }
}
