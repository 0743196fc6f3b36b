//! [`LeasedKeyedRateLimiter`]: a Redis GCRA limit spent locally, a lease at a time.
//!
//! A key's decision is a compare-and-swap on its lease word in the local table (see
//! `lease.rs`). Only when the lease cannot cover a request does a task go to Redis, and only
//! one per key at a time: it claims the word (the `renewing` bit), takes a lease in one round
//! trip, and adds it to the word. The others, meanwhile, are decided on Redis one at a time,
//! so no request waits for another's round trip. A spend that leaves less than half a lease
//! claims the word for a renewal in the background, so that a steady stream of requests rarely
//! meets an empty lease.

use core::fmt;
use core::time::Duration;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use ::redis::aio::{ConnectionLike, ConnectionManager};

use super::lease::{complete, millis, spend, Budget, Held, Lease, Spend};
use super::limiter::{builder, Mode, RedisBuilder, Remote};
use super::{Error, LeaseGrant, RedisGcra, RedisStats};
use crate::clock::{Clock, Nanos, TscClock};
use crate::decision::{Denied, InsufficientCapacity};
use crate::error::BuildError;
use crate::store::{Generations, Overflow, Probe, Table, CLASSES};

/// A GCRA limit per key, shared through Redis as a [`RedisKeyedRateLimiter`]'s is, but spent
/// locally: each process takes a lease of a key's budget from Redis in one round trip and
/// admits against it in its own lock-free table, at the cost of a local limiter's check.
///
/// # What it guarantees
///
/// Every admission is paid for by budget that Redis granted (a GCRA decision of the lease's
/// size, on the same state a [`RedisKeyedRateLimiter`] of the same prefix uses), so the
/// processes together never admit more than Redis grants, except for the time at which they
/// spend it: a lease granted before an interval can be spent during it. A process holds less
/// than 1.5 leases per key (the rest of one, below half a lease, and the next), so across `N`
/// processes, in any interval, at most `N × 1.5 × size` more are admitted than the quota
/// allows. What a lease leaves unused when its lifetime ends (or at [`release`](Self::release))
/// is given back to Redis, exactly, if nothing was granted on the key since; otherwise it is
/// dropped, which admits less, never more.
///
/// A request that its process's lease cannot cover waits for the lease's renewal (one round
/// trip, whichever task started it). When Redis has less than half a lease left, the key's
/// requests beyond what is held are denied locally until Redis will have that much: near its
/// limit, a key costs one round trip per half a lease, and a denial's `retry_after` may be
/// longer than a [`RedisKeyedRateLimiter`]'s by up to the time half a lease takes to earn.
/// Requests of more than a lease's size, renewals slower than the limiter's timeout, and keys
/// that find no room in the local table are decided on Redis, one round trip each. When Redis
/// cannot be asked, the [`Fallback`](super::Fallback) decides.
///
/// [`RedisKeyedRateLimiter`]: super::RedisKeyedRateLimiter
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate::redis::{Lease, LeasedKeyedRateLimiter, RedisGcra};
/// use tollgate::Quota;
///
/// let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
/// // 100 000 per second per tenant across every server, taken 500 at a time.
/// let gcra = RedisGcra::new(&Quota::per_second(100_000)?)?;
/// let limiter = LeasedKeyedRateLimiter::builder(conn, "rl:tenant:", gcra, Lease::new(500)).build()?;
/// limiter.check_key("acme").await?;
/// // On shutdown, give back what is left.
/// limiter.release().await?;
/// # Ok(())
/// # }
/// ```
pub struct LeasedKeyedRateLimiter<C = ConnectionManager> {
    inner: Arc<Inner<C>>,
}

impl<C> Clone for LeasedKeyedRateLimiter<C> {
    fn clone(&self) -> Self {
        LeasedKeyedRateLimiter {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<C> {
    remote: Remote<C>,
    prefix: Box<[u8]>,
    gcra: RedisGcra,
    size: u64,
    /// A spend that leaves less than this renews the lease ahead of need.
    low_water: u64,
    /// Milliseconds, at least 1.
    lifetime: u64,
    table: Table,
    /// The table's algorithm: the lease words' own, never reconfigured.
    budget: Generations<Budget>,
    /// The keys the table holds.
    capacity: usize,
    hasher: ahash::RandomState,
    clock: TscClock,
    /// For each key whose last lease granted something: what a give-back needs. At most twice
    /// the table's capacity (beyond that it is cleared, and those leases' rests are dropped).
    leases: Mutex<HashMap<u64, Granted>>,
    /// Woken whenever a task lets go of a claim: the requests that found a renewal under way
    /// wait for it.
    renewed: Notify,
    counters: Counters,
}

/// A key's last lease, for giving back what it leaves unused.
struct Granted {
    /// The key in Redis: the prefix and the key.
    key: Box<[u8]>,
    /// The state the lease left in Redis.
    schedule: u64,
    /// What it granted: the most that can be given back.
    granted: u64,
}

#[derive(Default)]
struct Counters {
    leases: AtomicU64,
    granted: AtomicU64,
    returned: AtomicU64,
    dropped: AtomicU64,
    direct: AtomicU64,
}

/// Counters of a [`LeasedKeyedRateLimiter`], shared by its clones: its round trips and the budget
/// they moved. Decisions made locally are not counted, since a counter that every decision
/// writes would be a cache line that every thread's decisions fight over.
///
/// ```no_run
/// # fn show(limiter: &tollgate::redis::LeasedKeyedRateLimiter) {
/// let stats = limiter.stats();
/// // Budget taken and not spent: what leases left unused and could not give back.
/// let wasted = stats.dropped as f64 / stats.granted.max(1) as f64;
/// # let _ = wasted;
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LeaseStats {
    /// Lease round trips (renewals, and give-backs).
    pub leases: u64,
    /// Budget that Redis granted in leases.
    pub granted: u64,
    /// Budget given back to Redis.
    pub returned: u64,
    /// Budget that leases left unused and that could not be given back (something was granted
    /// on the key since), or that found no room in the local table: admissions this process
    /// could have made and did not.
    pub dropped: u64,
    /// Decisions made on Redis one at a time (or by the fallback).
    pub direct: u64,
    /// The Redis decisions' own counters (those of the direct decisions).
    pub redis: RedisStats,
}

impl<C> LeasedKeyedRateLimiter<C> {
    /// Starts configuring a leased limiter per key for `gcra` on the connection `conn`, its
    /// keys stored under `prefix`, with `lease` (its size, lifetime and local capacity). The
    /// builder's [`timeout`](RedisBuilder::timeout) bounds each round trip, and its
    /// [`fallback`](RedisBuilder::fallback) decides when Redis cannot be asked.
    pub fn builder(
        conn: C,
        prefix: impl AsRef<[u8]>,
        gcra: RedisGcra,
        lease: Lease,
    ) -> RedisBuilder<C, LeasedKeyedRateLimiter<C>> {
        let mut builder = builder(conn, prefix.as_ref(), gcra.into());
        builder.lease = Some(lease);
        builder
    }
}

impl<C> RedisBuilder<C, LeasedKeyedRateLimiter<C>> {
    /// Builds the limiter and its local table.
    ///
    /// # Errors
    ///
    /// [`BuildError::LeaseSize`] for a lease of 0 or of more than the quota's burst (or
    /// [`Lease::MAX_SIZE`]); [`BuildError::ZeroCapacity`] or [`BuildError::CapacityTooLarge`]
    /// for the lease's capacity; the errors of a [`Fallback::Local`](super::Fallback) table.
    pub fn build(mut self) -> Result<LeasedKeyedRateLimiter<C>, BuildError> {
        let lease = self.lease.take().unwrap_or(Lease::new(1));
        let super::RedisAlgorithm::Gcra(gcra) = self.algorithm else {
            unreachable!("a leased limiter's builder takes GCRA")
        };
        let max = gcra.burst().min(Lease::MAX_SIZE);
        if lease.size() == 0 || lease.size() > max {
            return Err(BuildError::LeaseSize {
                size: lease.size(),
                max,
            });
        }
        let lifetime = lease.lifetime_or(gcra.emission_interval());
        let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
        let table = Table::new(lease.keys(), parallelism, [0; CLASSES])?;
        let (remote, prefix) = self.remote()?;
        let inner = Inner {
            remote,
            prefix,
            gcra,
            size: lease.size(),
            low_water: lease.size().div_ceil(2),
            lifetime: (lifetime.as_millis() as u64).max(1),
            table,
            budget: Generations::new(Budget),
            capacity: lease.keys(),
            hasher: ahash::RandomState::new(),
            clock: TscClock::new(),
            leases: Mutex::new(HashMap::new()),
            renewed: Notify::new(),
            counters: Counters::default(),
        };
        Ok(LeasedKeyedRateLimiter {
            inner: Arc::new(inner),
        })
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> LeasedKeyedRateLimiter<C> {
    /// Admits one request for `key`, or says how long to wait.
    ///
    /// # Errors
    ///
    /// [`Error::Denied`] if the key is over its limit; [`Error::Redis`] if Redis refused a
    /// script.
    pub async fn check_key(&self, key: impl AsRef<[u8]>) -> Result<(), Error> {
        self.check_key_n(key, 1).await
    }

    /// Admits a request of `cost` for `key`, all or nothing.
    ///
    /// # Errors
    ///
    /// As for [`check_key`](Self::check_key), and [`Error::InsufficientCapacity`] for a cost
    /// above the burst.
    pub async fn check_key_n(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<(), Error> {
        let inner = &*self.inner;
        let key = key.as_ref();
        InsufficientCapacity::check(cost, inner.gcra.burst())?;
        if cost == 0 {
            return Ok(());
        }
        if cost > inner.size {
            return inner.direct(key, cost).await;
        }
        let hash = inner.hasher.hash_one(key);
        let probe = inner.table.probe(hash);
        let mut renewed = None;
        loop {
            let now = inner.clock.now();
            let spent = inner.table.update(
                &probe,
                &inner.budget,
                inner.budget.load(),
                now,
                POLICY,
                |word, _| spend(word, cost, millis(now), inner.low_water),
            );
            return match spent {
                Ok(Spend::Spent { renew }) => {
                    if renew {
                        self.renew_ahead(key, hash, &probe);
                    }
                    Ok(())
                }
                Ok(Spend::Drained { wait }) => {
                    let wait = Nanos::from_nanos(wait.saturating_mul(1_000_000));
                    Err(Error::Denied(Denied::new(wait)))
                }
                Ok(Spend::Busy) => match renewed.take() {
                    // Another task is renewing the lease. Wait for a renewal to end, registered
                    // before looking again (so that one ending in between is not missed), then
                    // decide on the word it leaves, or on Redis if it is slower than a round
                    // trip's timeout.
                    None => {
                        renewed = Some(Box::pin(inner.renewed.notified()));
                        if let Some(notified) = renewed.as_mut() {
                            notified.as_mut().enable();
                        }
                        continue;
                    }
                    Some(notified) => {
                        let timeout = inner.remote.timeout();
                        if tokio::time::timeout(timeout, notified).await.is_ok() {
                            continue;
                        }
                        inner.direct(key, cost).await
                    }
                },
                Err(_) => inner.direct(key, cost).await,
                Ok(Spend::Claimed { give_back, kept }) => {
                    inner.lease(key, hash, &probe, cost, give_back, kept).await
                }
            };
        }
    }

    /// Gives back to Redis what this process's leases have left unused, and forgets them: for
    /// a process that stops (a deploy), so that the others can spend it. A lease is given back
    /// exactly if nothing was granted on its key since; otherwise its rest is dropped. Returns
    /// the budget given back.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] if Redis refused the script; what could not be given back then is
    /// dropped.
    pub async fn release(&self) -> Result<u64, Error> {
        let inner = &*self.inner;
        let held: Vec<(u64, Granted)> = inner.leases().drain().collect();
        let mut returned = 0;
        for (hash, lease) in held {
            let probe = inner.table.probe(hash);
            let now = inner.clock.now();
            let taken = inner.table.update(
                &probe,
                &inner.budget,
                inner.budget.load(),
                now,
                POLICY,
                |word, _| {
                    let held = Held::unpack(word);
                    if held.renewing || held.count == 0 {
                        (0, word)
                    } else {
                        (held.count, Held { count: 0, ..held }.pack())
                    }
                },
            );
            let taken = taken.unwrap_or(0);
            let give_back = taken.min(lease.granted);
            let mut back = 0;
            if give_back > 0 {
                let args = [0, 0, give_back, lease.schedule];
                if let Some(grant) = inner.round_trip(&lease.key, args).await? {
                    back = grant.returned;
                }
            }
            inner.counters.dropped.fetch_add(taken - back, Relaxed);
            returned += back;
        }
        Ok(returned)
    }

    /// The limiter's counters.
    #[must_use]
    pub fn stats(&self) -> LeaseStats {
        let counters = &self.inner.counters;
        LeaseStats {
            leases: counters.leases.load(Relaxed),
            granted: counters.granted.load(Relaxed),
            returned: counters.returned.load(Relaxed),
            dropped: counters.dropped.load(Relaxed),
            direct: counters.direct.load(Relaxed),
            redis: self.inner.remote.stats(),
        }
    }

    /// The budget this process holds for `key` now: what it can admit without asking Redis.
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::LeasedKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// limiter.check_key("k").await?;
    /// assert!(limiter.held("k") < 1_000);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn held(&self, key: impl AsRef<[u8]>) -> u64 {
        let inner = &*self.inner;
        let probe = inner.table.probe(inner.hasher.hash_one(key.as_ref()));
        let held = Held::unpack(inner.table.state(&probe, &inner.budget).0);
        if held.is_live(millis(inner.clock.now())) {
            held.count
        } else {
            0
        }
    }

    /// The quota as the scripts run it, in microseconds.
    #[must_use]
    pub fn algorithm(&self) -> &RedisGcra {
        &self.inner.gcra
    }

    /// One round trip of the lease script for `key` at the time `now` (microseconds since the
    /// Unix epoch) instead of the server's, with `[want, need, give_back, schedule]` as
    /// [`RedisGcra::lease`] takes them: for tests that replay the script against it. The local
    /// table is not touched, and the key is stored without an expiry. `None` if Redis could not
    /// be asked.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] if Redis refused the script: arguments past the burst, a time past
    /// 2^52 µs, a key that holds something else.
    #[cfg(feature = "reference")]
    pub async fn lease_at(
        &self,
        key: impl AsRef<[u8]>,
        args: [u64; 4],
        now: u64,
    ) -> Result<Option<LeaseGrant>, Error> {
        let inner = &*self.inner;
        let key = [&inner.prefix[..], key.as_ref()].concat();
        inner.remote.lease(&inner.gcra, &key, args, Some(now)).await
    }

    /// Claims a renewal in the background, on the current tokio runtime; without one, the claim
    /// is let go, and the next request the lease cannot cover renews it.
    fn renew_ahead(&self, key: &[u8], hash: u64, probe: &Probe) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let this = self.clone();
                let key = key.to_vec();
                runtime.spawn(async move {
                    let inner = &*this.inner;
                    let probe = inner.table.probe(hash);
                    // An error leaves the lease as it was; the next request that it cannot
                    // cover will see it.
                    let _ = inner.lease(&key, hash, &probe, 0, 0, 0).await;
                });
            }
            Err(_) => self.inner.let_go(probe),
        }
    }
}

/// The local table's overflow policy: a key that finds no room is decided on Redis.
const POLICY: Overflow = Overflow::EvictLeastConstrained;

impl<C: ConnectionLike + Clone + Send + Sync + 'static> Inner<C> {
    /// The lease round trip of the task that claimed `key`'s word, for a request of `cost` (0
    /// for a renewal ahead of need), then the word updated with what was granted.
    async fn lease(
        &self,
        key: &[u8],
        hash: u64,
        probe: &Probe,
        cost: u64,
        give_back: u64,
        kept: u64,
    ) -> Result<(), Error> {
        let redis_key = [&self.prefix[..], key].concat();
        // Give back only what the last lease granted, and only with the state it left.
        let rest = give_back;
        let (give_back, schedule) = match self.leases().get(&hash) {
            Some(last) if give_back > 0 => (give_back.min(last.granted), last.schedule),
            _ => (0, 0),
        };
        // At least half a lease: a Redis that has less says when it will have that much, and
        // until then what the word cannot cover is denied here (see `complete`).
        let need = cost.saturating_sub(kept).max(self.low_water);
        let args = [self.size, need, give_back, schedule];
        let grant = match self.round_trip(&redis_key, args).await {
            Ok(Some(grant)) => grant,
            Ok(None) => {
                // The rest the claim took from an expired lease is lost with the round trip.
                self.counters.dropped.fetch_add(rest, Relaxed);
                self.let_go(probe);
                if cost == 0 {
                    return Ok(());
                }
                self.counters.direct.fetch_add(1, Relaxed);
                return Ok(self.remote.fallback(&redis_key, cost).into_check()?);
            }
            Err(err) => {
                self.counters.dropped.fetch_add(rest, Relaxed);
                self.let_go(probe);
                return Err(err);
            }
        };
        self.counters
            .dropped
            .fetch_add(rest - grant.returned, Relaxed);
        {
            let mut leases = self.leases();
            if grant.granted > 0 {
                if leases.len() >= 2 * self.capacity {
                    leases.clear();
                }
                let last = Granted {
                    key: redis_key.into(),
                    schedule: grant.schedule,
                    granted: grant.granted,
                };
                leases.insert(hash, last);
            } else if grant.returned > 0 {
                leases.remove(&hash);
            }
        }
        let now = self.clock.now();
        let done = self.table.update(
            probe,
            &self.budget,
            self.budget.load(),
            now,
            POLICY,
            |word, _| complete(word, &grant, cost, millis(now), self.lifetime),
        );
        self.renewed.notify_waiters();
        // Without room to keep the lease, the request is still decided by what was granted,
        // and the rest is dropped.
        let admitted = match done {
            Ok(admitted) => admitted,
            Err(overflowed) => {
                let spent = if overflowed.fresh { cost } else { 0 };
                let lost = grant.granted.saturating_sub(spent);
                self.counters.dropped.fetch_add(lost, Relaxed);
                overflowed.fresh
            }
        };
        if cost == 0 || admitted {
            Ok(())
        } else {
            let wait = Nanos::from_duration(grant.retry_after);
            Err(Error::Denied(Denied::new(wait)))
        }
    }

    /// A request decided on Redis alone.
    async fn direct(&self, key: &[u8], cost: u64) -> Result<(), Error> {
        self.counters.direct.fetch_add(1, Relaxed);
        let redis_key = [&self.prefix[..], key].concat();
        let decision = self
            .remote
            .call(&redis_key, cost, Mode::Decide, None)
            .await?;
        Ok(decision.into_check()?)
    }

    /// One lease round trip, counted.
    async fn round_trip(&self, key: &[u8], args: [u64; 4]) -> Result<Option<LeaseGrant>, Error> {
        let grant = self.remote.lease(&self.gcra, key, args, None).await?;
        if let Some(grant) = grant {
            self.counters.leases.fetch_add(1, Relaxed);
            self.counters.granted.fetch_add(grant.granted, Relaxed);
            self.counters.returned.fetch_add(grant.returned, Relaxed);
        }
        Ok(grant)
    }

    /// Lets go of a claim on the key's word, leaving its lease as it is.
    fn let_go(&self, probe: &Probe) {
        let _ = self.table.update(
            probe,
            &self.budget,
            self.budget.load(),
            self.clock.now(),
            POLICY,
            |word, _| {
                let held = Held::unpack(word);
                let next = Held {
                    renewing: false,
                    ..held
                };
                ((), next.pack())
            },
        );
        self.renewed.notify_waiters();
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Granted>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<C> fmt::Debug for LeasedKeyedRateLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        f.debug_struct("LeasedKeyedRateLimiter")
            .field("algorithm", &inner.gcra)
            .field("prefix", &String::from_utf8_lossy(&inner.prefix))
            .field("lease", &inner.size)
            .field("lifetime", &Duration::from_millis(inner.lifetime))
            .finish_non_exhaustive()
    }
}
