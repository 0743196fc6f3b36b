//! Limits shared by many servers through Redis (the `redis` feature).
//!
//! A local limiter keeps its state in the process: ten servers, each with its own limiter, admit
//! ten times the quota. A Redis limiter keeps each key's state in Redis, where every server reads
//! and writes it, so the quota holds across all of them.
//!
//! - **One round trip per decision.** A decision is one `EVALSHA` of a script that reads the
//!   key's state, applies the algorithm's transition and writes the new state, atomically:
//!   Redis runs a script alone, so there is no read-then-write race between servers, and
//!   decisions on a key are linearizable.
//! - **One clock.** The script reads the server's `TIME`, so every server's requests are judged
//!   on the same clock, whatever the skew between the servers' own.
//! - **The same transitions as the local code.** GCRA, the sliding-window counter and the fixed
//!   window ([`RedisAlgorithm`]). Each script is the crate's own algorithm computed in a coarser
//!   unit: [`RedisGcra::decide`] is [`Gcra`](crate::Gcra) in microseconds (the unit of `TIME`),
//!   [`RedisSlidingWindow::decide`] and [`RedisFixedWindow::decide`] count whole milliseconds.
//!   Lua's numbers are doubles, exact up to 2^53, and nanoseconds since 1970 are not; each unit
//!   keeps every value the script computes exact. A property test replays random requests,
//!   costs and times through both, against a real `redis-server`, and requires the same decision
//!   and the same stored state after every step.
//! - **Redis holds live keys only.** A key is written to expire at the moment its state is fresh
//!   again (`SET` with `PXAT`: Redis 6.2 or later), so an idle key costs nothing, and a live one
//!   about 120 bytes for GCRA with a 20-byte name, 105 for the windows with a 30-byte one: the
//!   state and the parameters it was written under (`MEMORY USAGE`; `cargo bench --features
//!   redis --bench redis` measures it).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tollgate::redis::RedisKeyedRateLimiter;
//! use tollgate::Quota;
//!
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let conn = redis::aio::ConnectionManager::new(client).await?;
//! // 10 per second per API key, in bursts of 20, across every server.
//! let per_key = RedisKeyedRateLimiter::gcra(conn, "rl:", Quota::per_second(10)?.with_burst(20)?)?;
//! match per_key.check_key("key-123").await {
//!     Ok(()) => { /* serve */ }
//!     Err(tollgate::redis::Error::Denied(denied)) => {
//!         let _retry_after = denied.retry_after_secs(); // 429
//!     }
//!     Err(other) => return Err(other.into()), // Redis could not be asked
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The connection is any of the `redis` crate's async connections that can be cloned: a
//! `ConnectionManager` (which reconnects after a failure, with exponential backoff) for one
//! server, a cluster connection for a Redis Cluster.
//!
//! # Leases: a shared limit at a local limiter's speed
//!
//! A round trip per decision caps a key at what Redis can answer, tens of thousands a second
//! from one client. A [`LeasedKeyedRateLimiter`] takes a key's budget a [`Lease`] at a time in
//! one round trip (a GCRA decision of the lease's size, on the same state) and spends it in a
//! local lock-free table, renewing in the background before it runs out. The price is a bounded
//! overshoot: budget granted before an interval can be spent in it, so `N` processes admit at
//! most `N × 1.5 × size` more than the quota in any interval. What a lease leaves unused goes
//! back to Redis when it ends, exactly, if nothing was granted on the key since.
//!
//! # Reservations and layered limits
//!
//! [`RedisKeyedRateLimiter::reserve_key`] and [`RedisRateLimiter::reserve`] take a turn in a
//! key's shared GCRA schedule in one round trip (the local [`Reservation`](crate::Reservation)'s
//! transition, on the server's clock), and [`RedisReservation::ready`] waits for it on tokio's
//! timer; a cancel gives it back while nothing was admitted for the key since, and a dropped
//! wait cancels. [`decide_all`] checks keys of several Redis limiters (any algorithms) all or
//! nothing in one script, and [`reserve_all`] takes a turn in several GCRA limiters' keys: Redis
//! runs each script alone, so no other request ever sees a layer held.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use tollgate::redis::{decide_all, RedisKeyedRateLimiter, RedisRateLimiter};
//! use tollgate::Quota;
//!
//! let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
//! let upstream = RedisRateLimiter::gcra(conn.clone(), "rl:upstream", Quota::per_second(100)?)?;
//! upstream.until_ready(1, Duration::from_secs(2)).await?; // shaped across every server
//!
//! let per_user = RedisKeyedRateLimiter::gcra(conn, "rl:user:", Quota::per_second(5)?)?;
//! let both = decide_all(&[per_user.layer("alice"), upstream.layer()], 1).await?;
//! # let _ = both;
//! # Ok(())
//! # }
//! ```
//!
//! # Changing a quota
//!
//! [`RedisKeyedRateLimiter::set_quota`] and [`RedisRateLimiter::set_quota`] change a running
//! limiter's quota (for all its clones) without losing what the keys hold. Each key's value
//! names the parameters it was written under, so a server with the new quota converts a key the
//! first time it reads it, as [`Algorithm::carry_over`](crate::Algorithm::carry_over) does
//! locally: the room carries over, capped at the new capacity. Servers that change their quota
//! at different moments convert the keys they read to their own; no conversion leaves more
//! room than there was.
//!
//! # When Redis cannot be asked
//!
//! A decision waits for Redis at most the limiter's timeout (100 ms unless
//! [`RedisBuilder::timeout`] says otherwise). If Redis is down or unreachable, the connection
//! broke, or the reply is late, the limiter's [`Fallback`] decides: deny (the default), allow,
//! or a local limiter with this process's share of the quota. Every such decision is counted in
//! [`RedisStats`]. Errors that Redis replies (a key that holds something else than a state) are
//! returned, not covered up.
//!
//! # Durability
//!
//! A limit is as durable as the Redis that holds it. Without persistence a restarted Redis has
//! forgotten every key, and each starts afresh. With the append-only file and
//! `appendfsync always`, a Redis that crashes and restarts has lost no admission (a test kills
//! one in the middle of a run). With `appendfsync everysec`, Redis's default for the append-only
//! file, a crash can lose the last second of writes, and the admissions they recorded can be
//! granted again: at most one second of each key's traffic.

mod algorithm;
mod fallback;
mod fixed_window;
mod gcra;
mod layers;
mod lease;
mod leased;
mod limiter;
mod reservation;
mod script;
mod sliding_window;
mod window;

pub use algorithm::RedisAlgorithm;
pub use fallback::{Fallback, RedisStats};
pub use fixed_window::RedisFixedWindow;
pub use gcra::{LeaseGrant, RedisGcra};
pub use layers::{check_all, decide_all, reserve_all, RedisLayer};
#[cfg(feature = "reference")]
pub use layers::{decide_all_at, reserve_all_at};
pub use lease::Lease;
pub use leased::{LeaseStats, LeasedKeyedRateLimiter};
pub use limiter::{RedisBuilder, RedisKeyedRateLimiter, RedisRateLimiter};
pub use reservation::RedisReservation;
pub use sliding_window::RedisSlidingWindow;

use core::fmt;

use crate::decision::{Denied, InsufficientCapacity};

/// Why a Redis limiter did not admit a request, or could not decide it.
///
/// ```
/// use tollgate::redis::Error;
/// use tollgate::Quota;
///
/// // A cost above the burst is refused without asking Redis.
/// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) {
/// assert!(matches!(limiter.decide_key("k", 1_000_000).await, Err(Error::InsufficientCapacity(_))));
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Not now: the key is over its limit (from the `check` methods; the `decide` methods
    /// report it in their [`Decision`](crate::Decision)).
    Denied(Denied),
    /// A cost above the capacity (the burst, or the limit per window), which can never be
    /// admitted.
    InsufficientCapacity(InsufficientCapacity),
    /// Redis could not be asked, or replied with an error (a key that holds something other
    /// than a state of this limiter, for one).
    Redis(::redis::RedisError),
    /// Redis replied with something the script never returns (or nothing within the timeout,
    /// to a cancel).
    Reply(String),
    /// The limiter's algorithm cannot do this: reservations need GCRA.
    Unsupported(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Denied(denied) => denied.fmt(f),
            Error::InsufficientCapacity(err) => err.fmt(f),
            Error::Redis(err) => write!(f, "redis: {err}"),
            Error::Reply(reply) => write!(f, "redis replied {reply}, not a decision"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(err) => Some(err),
            _ => None,
        }
    }
}

impl From<Denied> for Error {
    fn from(denied: Denied) -> Error {
        Error::Denied(denied)
    }
}

impl From<InsufficientCapacity> for Error {
    fn from(err: InsufficientCapacity) -> Error {
        Error::InsufficientCapacity(err)
    }
}

impl From<::redis::RedisError> for Error {
    fn from(err: ::redis::RedisError) -> Error {
        Error::Redis(err)
    }
}
