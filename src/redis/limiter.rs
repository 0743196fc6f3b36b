//! The Redis limiters: [`RedisKeyedRateLimiter`], one state per key, and [`RedisRateLimiter`],
//! one state for everything, each decision one round trip of one script; and their
//! [`RedisBuilder`].

use core::fmt;
use core::future::Future;
use core::time::Duration;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use ::redis::aio::{ConnectionLike, ConnectionManager};
use ::redis::cluster_routing::Slot;
use ::redis::{ErrorKind, RedisError, ServerErrorKind};

use super::fallback::{Counters, Fallback, Policy, RedisStats, DEFAULT_TIMEOUT};
use super::lease::Lease;
use super::reservation::{RedisReservation, Turn};
use super::script::{decisions, CANCEL, LAYERED, LEASE, RESERVE};
use super::{Error, LeaseGrant, RedisAlgorithm, RedisFixedWindow, RedisGcra, RedisSlidingWindow};
use crate::clock::Nanos;
use crate::decision::{Decision, Denied, InsufficientCapacity};
use crate::error::BuildError;
use crate::layers::LayeredDecision;
use crate::quota::Quota;
use crate::store::Versions;

/// What the script is asked to do with its key.
#[derive(Clone, Copy)]
pub(super) enum Mode {
    Decide = 0,
    Peek = 1,
}

/// A connection and everything its decisions need: what the limiters are.
#[derive(Clone)]
pub(super) struct Remote<C> {
    conn: C,
    shared: Arc<Shared>,
}

impl<C> Remote<C> {
    /// The algorithm the scripts apply.
    pub(super) fn algorithm(&self) -> RedisAlgorithm {
        self.shared.algorithm()
    }

    /// Makes the same algorithm for `quota` the one the scripts apply from now on.
    pub(super) fn set_quota(&self, quota: &Quota) -> Result<(), BuildError> {
        let algorithm = self.algorithm().for_quota(quota)?;
        self.shared.algorithm.store(algorithm.to_words());
        Ok(())
    }
}

/// What a limiter's clones share.
struct Shared {
    /// The algorithm, which `set_quota` replaces while clones decide.
    algorithm: Versions<4>,
    timeout: Duration,
    fallback: Policy,
    counters: Counters,
}

impl Shared {
    fn algorithm(&self) -> RedisAlgorithm {
        RedisAlgorithm::from_words(self.algorithm.load())
    }
}

impl<C: ConnectionLike + Clone + Send + Sync> Remote<C> {
    /// One round trip: the script on `key` for a request of `cost`, at the server's time, or at
    /// `now` (microseconds since the Unix epoch) where given. If Redis cannot be asked, or does
    /// not reply within the timeout, the fallback decides.
    pub(super) async fn call(
        &self,
        key: &[u8],
        cost: u64,
        mode: Mode,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        InsufficientCapacity::check(cost, self.shared.algorithm().capacity())?;
        let mut decisions = self.run(&[key], &[cost], mode, now).await?;
        decisions
            .pop()
            .ok_or_else(|| Error::Reply("no decision".into()))
    }

    /// The requests `(key, cost)` of a batch, in one round trip on one Redis; on a Redis Cluster,
    /// one per slot that the keys fall in, all at once. A cost above the capacity is refused
    /// without asking Redis.
    async fn call_many<K: AsRef<[u8]>>(
        &self,
        requests: impl IntoIterator<Item = (K, u64)>,
        mode: Mode,
        now: Option<u64>,
    ) -> Result<Vec<Result<Decision, InsufficientCapacity>>, Error> {
        let capacity = self.shared.algorithm().capacity();
        let mut answers = Vec::new();
        let (mut keys, mut costs, mut asked) = (Vec::new(), Vec::new(), Vec::new());
        for (key, cost) in requests {
            match InsufficientCapacity::check(cost, capacity) {
                Ok(()) => {
                    asked.push(answers.len());
                    keys.push(key);
                    costs.push(cost);
                    answers.push(Ok(Decision::new(false, 0, Nanos::ZERO, Nanos::ZERO, 0)));
                }
                Err(err) => answers.push(Err(err)),
            }
        }
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        let decisions = match self.run(&keys, &costs, mode, now).await {
            Err(Error::Redis(err))
                if err.kind() == ErrorKind::Server(ServerErrorKind::CrossSlot) =>
            {
                self.run_per_slot(&keys, &costs, mode, now).await?
            }
            other => other?,
        };
        for (i, decision) in asked.into_iter().zip(decisions) {
            answers[i] = Ok(decision);
        }
        Ok(answers)
    }

    /// [`run`](Remote::run) for keys that span slots of a Redis Cluster, which one script cannot
    /// reach: one script per slot, all at once. A key's requests stay in their order, since a
    /// key has one slot.
    async fn run_per_slot(
        &self,
        keys: &[&[u8]],
        costs: &[u64],
        mode: Mode,
        now: Option<u64>,
    ) -> Result<Vec<Decision>, Error> {
        let mut slots: Vec<(Slot, Vec<usize>)> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let slot = Slot::for_key(key);
            match slots.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, members)) => members.push(i),
                None => slots.push((slot, vec![i])),
            }
        }
        let runs = slots.iter().map(|(_, members)| {
            let keys: Vec<&[u8]> = members.iter().map(|&i| keys[i]).collect();
            let costs: Vec<u64> = members.iter().map(|&i| costs[i]).collect();
            async move { self.run(&keys, &costs, mode, now).await }
        });
        let mut decisions = vec![Decision::new(false, 0, Nanos::ZERO, Nanos::ZERO, 0); keys.len()];
        for ((_, members), run) in slots.iter().zip(futures_util::future::join_all(runs).await) {
            for (&i, decision) in members.iter().zip(run?) {
                decisions[i] = decision;
            }
        }
        Ok(decisions)
    }

    /// The script on `keys` with `costs` (each at most the capacity), in one round trip. If
    /// Redis cannot be asked, or does not reply within the timeout, the fallback decides each.
    async fn run(
        &self,
        keys: &[&[u8]],
        costs: &[u64],
        mode: Mode,
        now: Option<u64>,
    ) -> Result<Vec<Decision>, Error> {
        let shared = &*self.shared;
        let (script, args, unit) = shared.algorithm().script();
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        invocation
            .arg(mode as u8)
            .arg(now.map_or(String::new(), |now| now.to_string()));
        for arg in args {
            invocation.arg(arg);
        }
        for cost in costs {
            invocation.arg(*cost);
        }
        let mut conn = self.conn.clone();
        let round_trip = invocation.invoke_async::<Vec<i64>>(&mut conn);
        let counters = &shared.counters;
        let failure = match tokio::time::timeout(shared.timeout, round_trip).await {
            Ok(Ok(reply)) => {
                counters.decisions.fetch_add(keys.len() as u64, Relaxed);
                return decisions(&reply, keys.len(), unit);
            }
            Ok(Err(err)) if !unavailable(&err) => return Err(Error::Redis(err)),
            Ok(Err(_)) => &counters.unavailable,
            Err(_elapsed) => {
                counters.unavailable.fetch_add(keys.len() as u64, Relaxed);
                &counters.timeouts
            }
        };
        failure.fetch_add(keys.len() as u64, Relaxed);
        let capacity = shared.algorithm().capacity();
        Ok(keys
            .iter()
            .zip(costs)
            .map(|(key, &cost)| match mode {
                Mode::Decide => shared.fallback.decide(key, cost, capacity),
                Mode::Peek => shared.fallback.peek(key, cost, capacity),
            })
            .collect())
    }

    pub(super) fn stats(&self) -> RedisStats {
        self.shared.counters.snapshot()
    }

    /// How long a round trip may take before the fallback decides.
    pub(super) fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// One round trip of the lease script on `key` ([`RedisGcra::lease`] with `gcra`, the
    /// limiter's algorithm, at the server's time or at `now`): `Ok(None)` if Redis could not be asked or
    /// did not reply within the timeout (counted as a timeout, not as a decision).
    pub(super) async fn lease(
        &self,
        gcra: &RedisGcra,
        key: &[u8],
        [want, need, give_back, schedule]: [u64; 4],
        now: Option<u64>,
    ) -> Result<Option<LeaseGrant>, Error> {
        let mut invocation = LEASE.prepare_invoke();
        invocation
            .key(key)
            .arg(0)
            .arg(now.map_or(String::new(), |now| now.to_string()));
        for arg in gcra
            .args()
            .into_iter()
            .chain([want, need, give_back, schedule])
        {
            invocation.arg(arg);
        }
        let mut conn = self.conn.clone();
        let round_trip = invocation.invoke_async::<Vec<i64>>(&mut conn);
        let reply = match tokio::time::timeout(self.shared.timeout, round_trip).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(err)) if !unavailable(&err) => return Err(Error::Redis(err)),
            Ok(Err(_)) => return Ok(None),
            Err(_elapsed) => {
                self.shared.counters.timeouts.fetch_add(1, Relaxed);
                return Ok(None);
            }
        };
        match reply[..] {
            [granted, returned, retry_after, schedule]
                if [granted, returned, retry_after, schedule]
                    .iter()
                    .all(|&f| f >= 0) =>
            {
                Ok(Some(LeaseGrant {
                    granted: granted as u64,
                    returned: returned as u64,
                    retry_after: Duration::from_micros(retry_after as u64),
                    schedule: schedule as u64,
                }))
            }
            _ => Err(Error::Reply(format!("{reply:?}"))),
        }
    }

    /// One round trip of the cancel script on `held` (each a key's name, and the TATs before and
    /// after its reservation), in that order: whether each was given back.
    pub(super) async fn cancel(
        &self,
        held: &[(&[u8], Turn)],
        now: Option<u64>,
    ) -> Result<Vec<bool>, Error> {
        let mut invocation = CANCEL.prepare_invoke();
        invocation
            .arg(0)
            .arg(now.map_or(String::new(), |now| now.to_string()));
        for (key, ([before, after], gcra)) in held {
            invocation.key(*key).arg(*before).arg(*after);
            for arg in gcra.args() {
                invocation.arg(arg);
            }
        }
        let mut conn = self.conn.clone();
        let round_trip = invocation.invoke_async::<Vec<i64>>(&mut conn);
        match tokio::time::timeout(self.shared.timeout, round_trip).await {
            Ok(Ok(given)) if given.len() == held.len() => {
                Ok(given.iter().map(|&g| g == 1).collect())
            }
            Ok(Ok(other)) => Err(Error::Reply(format!("{other:?}"))),
            Ok(Err(err)) => Err(Error::Redis(err)),
            Err(_elapsed) => {
                self.shared.counters.timeouts.fetch_add(1, Relaxed);
                Err(Error::Reply(
                    "no reply to a cancel within the timeout".into(),
                ))
            }
        }
    }

    /// What the fallback decides on a request of `cost` for `key`, counted as a decision Redis
    /// could not make.
    pub(super) fn fallback(&self, key: &[u8], cost: u64) -> Decision {
        let shared = &*self.shared;
        shared.counters.unavailable.fetch_add(1, Relaxed);
        shared
            .fallback
            .decide(key, cost, shared.algorithm().capacity())
    }
}

/// One round trip of the all-or-nothing script over `layers` (each a limiter's connection and
/// algorithm, and a key's name), run on the first layer's connection, at the server's time or at
/// `now`. If Redis cannot be asked or does not reply within the first layer's timeout, each
/// layer's fallback is looked at, and decides only if every one of them admits.
pub(super) async fn layered<C: ConnectionLike + Clone + Send + Sync>(
    layers: &[(&Remote<C>, &[u8])],
    cost: u64,
    now: Option<u64>,
) -> Result<LayeredDecision, Error> {
    let Some(&(first, _)) = layers.first() else {
        return Err(Error::Unsupported("an all-or-nothing check needs a layer"));
    };
    for (remote, _) in layers {
        InsufficientCapacity::check(cost, remote.shared.algorithm().capacity())?;
    }
    let mut invocation = LAYERED.prepare_invoke();
    invocation
        .arg(0)
        .arg(now.map_or(String::new(), |now| now.to_string()));
    for (remote, key) in layers {
        let (id, args) = remote.shared.algorithm().layer_args();
        invocation.key(*key).arg(id);
        for arg in args {
            invocation.arg(arg);
        }
        invocation.arg(cost);
    }
    let mut conn = first.conn.clone();
    let round_trip = invocation.invoke_async::<Vec<i64>>(&mut conn);
    let reply = match tokio::time::timeout(first.shared.timeout, round_trip).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(err)) if !unavailable(&err) => return Err(Error::Redis(err)),
        Ok(Err(_)) => return Ok(layered_fallback(layers, cost)),
        Err(_elapsed) => {
            first.shared.counters.timeouts.fetch_add(1, Relaxed);
            return Ok(layered_fallback(layers, cost));
        }
    };
    let unexpected = || Error::Reply(format!("{reply:?}"));
    let (&refused, fields) = reply.split_first().ok_or_else(unexpected)?;
    if fields.len() != 5 * layers.len() {
        return Err(unexpected());
    }
    let mut decided = Vec::with_capacity(layers.len());
    for ((remote, _), fields) in layers.iter().zip(fields.chunks(5)) {
        remote.shared.counters.decisions.fetch_add(1, Relaxed);
        let (_, _, unit) = remote.shared.algorithm().script();
        decided.extend(decisions(fields, 1, unit)?);
    }
    let decisions = decided;
    match usize::try_from(refused) {
        Ok(0) => Ok(binding(&decisions)),
        Ok(layer) if layer <= layers.len() && !decisions[layer - 1].is_allowed() => {
            Ok(LayeredDecision::new(layer - 1, decisions[layer - 1]))
        }
        _ => Err(unexpected()),
    }
}

/// Of admitted layers' decisions, the one with the least remaining (the first on a tie).
fn binding(decisions: &[Decision]) -> LayeredDecision {
    let (layer, decision) = decisions
        .iter()
        .enumerate()
        .min_by_key(|(_, d)| d.remaining())
        .expect("a layer");
    LayeredDecision::new(layer, *decision)
}

/// The layers' fallbacks, all or nothing: each looked at, then, if all admit, each deciding.
fn layered_fallback<C>(layers: &[(&Remote<C>, &[u8])], cost: u64) -> LayeredDecision {
    let mut refused: Option<(usize, Decision)> = None;
    for (i, (remote, key)) in layers.iter().enumerate() {
        let shared = &remote.shared;
        shared.counters.unavailable.fetch_add(1, Relaxed);
        let look = shared
            .fallback
            .peek(key, cost, shared.algorithm().capacity());
        if !look.is_allowed() && refused.map_or(true, |(_, r)| look.retry_after() > r.retry_after())
        {
            refused = Some((i, look));
        }
    }
    if let Some((layer, decision)) = refused {
        return LayeredDecision::new(layer, decision);
    }
    let decisions: Vec<Decision> = layers
        .iter()
        .map(|(remote, key)| {
            let shared = &remote.shared;
            shared
                .fallback
                .decide(key, cost, shared.algorithm().capacity())
        })
        .collect();
    binding(&decisions)
}

/// One round trip of the reservation script over `layers` (each a GCRA limiter's connection and
/// algorithm, and a key's name), run on the first layer's connection, at the server's time or at
/// `now`: a turn in every layer, all or nothing. If Redis cannot be asked or does not reply
/// within the first layer's timeout, the layers' fallbacks decide as for a check: a turn at once,
/// recorded nowhere, or a refusal.
pub(super) async fn reserve<C: ConnectionLike + Clone + Send + Sync>(
    layers: &[(&Remote<C>, &[u8])],
    cost: u64,
    max_wait: Duration,
    now: Option<u64>,
) -> Result<RedisReservation<C>, Error> {
    let Some(&(first, _)) = layers.first() else {
        return Err(Error::Unsupported("a reservation needs a layer"));
    };
    let mut invocation = RESERVE.prepare_invoke();
    // The script caps the wait further, below 2^52 µs; this keeps the argument an integer it
    // reads exactly.
    let max_wait = u64::try_from(max_wait.as_micros()).map_or(1 << 52, |us| us.min(1 << 52));
    invocation
        .arg(0)
        .arg(now.map_or(String::new(), |now| now.to_string()))
        .arg(max_wait);
    let mut reserved = Vec::with_capacity(layers.len());
    for (remote, key) in layers {
        let RedisAlgorithm::Gcra(gcra) = remote.shared.algorithm() else {
            return Err(Error::Unsupported("a reservation needs GCRA"));
        };
        InsufficientCapacity::check(cost, gcra.burst())?;
        invocation.key(*key);
        for arg in gcra.args().into_iter().chain([cost]) {
            invocation.arg(arg);
        }
        reserved.push(gcra);
    }
    let mut conn = first.conn.clone();
    let round_trip = invocation.invoke_async::<Vec<i64>>(&mut conn);
    let reply = match tokio::time::timeout(first.shared.timeout, round_trip).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(err)) if !unavailable(&err) => return Err(Error::Redis(err)),
        Ok(Err(_)) => return reserve_fallback(layers, cost),
        Err(_elapsed) => {
            first.shared.counters.timeouts.fetch_add(1, Relaxed);
            return reserve_fallback(layers, cost);
        }
    };
    for (remote, _) in layers {
        remote.shared.counters.decisions.fetch_add(1, Relaxed);
    }
    let unexpected = || Error::Reply(format!("{reply:?}"));
    let fields: Vec<u64> = reply
        .iter()
        .map(|&f| u64::try_from(f))
        .collect::<Result<_, _>>()
        .map_err(|_| unexpected())?;
    match fields[..] {
        [0, 0, ref turns @ ..] if turns.len() == 3 * layers.len() => {
            let wait = turns.chunks(3).map(|t| t[0]).max().unwrap_or(0);
            let held = layers
                .iter()
                .zip(turns.chunks(3))
                .zip(reserved)
                .map(|(((_, key), t), gcra)| {
                    (key.to_vec(), (t[1] != t[2]).then_some(([t[1], t[2]], gcra)))
                })
                .collect();
            Ok(RedisReservation::new(
                first.clone(),
                held,
                Duration::from_micros(wait),
            ))
        }
        [layer, retry_after] if layer >= 1 && layer <= layers.len() as u64 => {
            Err(Error::Denied(Denied::new(Nanos::from_nanos(
                retry_after.saturating_mul(RedisGcra::UNIT),
            ))))
        }
        _ => Err(unexpected()),
    }
}

/// A reservation decided by the layers' fallbacks, as a check: at once, or refused.
fn reserve_fallback<C: Clone>(
    layers: &[(&Remote<C>, &[u8])],
    cost: u64,
) -> Result<RedisReservation<C>, Error> {
    layered_fallback(layers, cost).decision().into_check()?;
    let held = layers.iter().map(|(_, key)| (key.to_vec(), None)).collect();
    Ok(RedisReservation::new(
        layers[0].0.clone(),
        held,
        Duration::ZERO,
    ))
}

/// Whether `err` says that Redis could not be asked (it is down or unreachable, the connection
/// broke, a cluster is reconfiguring), rather than that it refused the script: the errors the
/// fallback decides for.
fn unavailable(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_timeout()
        || err.is_cluster_error()
        || err.kind() == ErrorKind::ClusterConnectionNotFound
}

/// Configures a Redis limiter: the time a decision waits for Redis, and what decides when Redis
/// cannot be asked. [`RedisKeyedRateLimiter::builder`] and [`RedisRateLimiter::builder`] start
/// one.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use tollgate::redis::{Fallback, RedisKeyedRateLimiter, RedisSlidingWindow};
/// use tollgate::Quota;
///
/// let conn = redis::aio::ConnectionManager::new(redis::Client::open("redis://127.0.0.1/")?).await?;
/// let window = RedisSlidingWindow::new(&Quota::per_minute(1_000)?)?;
/// let limiter = RedisKeyedRateLimiter::builder(conn, "rl:", window)
///     .timeout(Duration::from_millis(20))
///     .fallback(Fallback::Local { quota: Quota::per_minute(100)?, capacity: 100_000 })
///     .build()?;
/// # let _ = limiter;
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct RedisBuilder<C, L> {
    conn: C,
    name: Box<[u8]>,
    pub(super) algorithm: RedisAlgorithm,
    timeout: Duration,
    fallback: Fallback,
    /// A leased limiter's leases (only its constructor sets them).
    pub(super) lease: Option<Lease>,
    limiter: core::marker::PhantomData<fn() -> L>,
}

impl<C, L> RedisBuilder<C, L> {
    /// How long a decision waits for Redis's reply before the [`Fallback`] decides (default
    /// 100 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What decides when Redis cannot be asked (default [`Fallback::Deny`]).
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    pub(super) fn remote(self) -> Result<(Remote<C>, Box<[u8]>), BuildError> {
        let shared = Shared {
            algorithm: Versions::new(self.algorithm.to_words()),
            timeout: self.timeout,
            fallback: Policy::new(self.fallback)?,
            counters: Counters::default(),
        };
        let remote = Remote {
            conn: self.conn,
            shared: Arc::new(shared),
        };
        Ok((remote, self.name))
    }
}

impl<C> RedisBuilder<C, RedisKeyedRateLimiter<C>> {
    /// Builds the limiter (and the local table of a [`Fallback::Local`]).
    ///
    /// # Errors
    ///
    /// The errors of a [`Fallback::Local`] table's quota and capacity.
    pub fn build(self) -> Result<RedisKeyedRateLimiter<C>, BuildError> {
        let (remote, prefix) = self.remote()?;
        Ok(RedisKeyedRateLimiter { remote, prefix })
    }
}

impl<C> RedisBuilder<C, RedisRateLimiter<C>> {
    /// Builds the limiter (and the local limiter of a [`Fallback::Local`]).
    ///
    /// # Errors
    ///
    /// As for the keyed limiter's builder.
    pub fn build(self) -> Result<RedisRateLimiter<C>, BuildError> {
        let (remote, key) = self.remote()?;
        Ok(RedisRateLimiter { remote, key })
    }
}

impl<C, L> fmt::Debug for RedisBuilder<C, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBuilder")
            .field("name", &String::from_utf8_lossy(&self.name))
            .field("algorithm", &self.algorithm)
            .field("timeout", &self.timeout)
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

pub(super) fn builder<C, L>(conn: C, name: &[u8], algorithm: RedisAlgorithm) -> RedisBuilder<C, L> {
    RedisBuilder {
        conn,
        name: name.into(),
        algorithm,
        timeout: DEFAULT_TIMEOUT,
        fallback: Fallback::default(),
        lease: None,
        limiter: core::marker::PhantomData,
    }
}

/// A limiter per key, whose states live in Redis: every server that uses the same Redis
/// (or Redis Cluster) and the same key prefix shares each key's limit.
///
/// A decision is one round trip: `EVALSHA` of a script that reads the key's state, applies the
/// algorithm's transition ([`RedisAlgorithm`]) at the server's `TIME`, and writes the new state
/// with an expiry at the moment it is fresh again, so Redis holds live keys only. The script is
/// loaded on first use and again after a `NOSCRIPT` reply (a restarted server). Redis runs each
/// script alone, so decisions on one key are linearizable, as a local limiter's are, and all
/// servers read one clock.
///
/// When Redis cannot be asked (down, unreachable, or slower than the limiter's timeout), the
/// limiter's [`Fallback`] decides, counted in [`stats`](Self::stats). A `ConnectionManager`
/// reconnects on its own, with exponential backoff, and decisions are Redis's again as soon as
/// it answers.
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

impl<C> RedisKeyedRateLimiter<C> {
    /// The connection and what its decisions need.
    pub(super) fn remote(&self) -> &Remote<C> {
        &self.remote
    }

    /// The prefix of its keys' names.
    pub(super) fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Starts configuring a limiter per key that applies `algorithm` on the connection `conn`
    /// (a `ConnectionManager`, which reconnects, or a cluster connection), its keys stored under
    /// `prefix`.
    pub fn builder(
        conn: C,
        prefix: impl AsRef<[u8]>,
        algorithm: impl Into<RedisAlgorithm>,
    ) -> RedisBuilder<C, RedisKeyedRateLimiter<C>> {
        builder(conn, prefix.as_ref(), algorithm.into())
    }

    /// A GCRA limiter per key for `quota` on the connection `conn`, its keys stored under
    /// `prefix`, with the defaults: a timeout of 100 ms, and [`Fallback::Deny`].
    ///
    /// # Errors
    ///
    /// [`BuildError::ToleranceTooLong`] for a quota whose tolerance is too long for the script's
    /// microseconds (see [`RedisGcra::new`]).
    pub fn gcra(conn: C, prefix: impl AsRef<[u8]>, quota: Quota) -> Result<Self, BuildError> {
        RedisKeyedRateLimiter::builder(conn, prefix, RedisGcra::new(&quota)?).build()
    }

    /// A sliding-window counter per key for `quota`, with the defaults.
    ///
    /// # Errors
    ///
    /// [`BuildError::Quota`] for a quota whose `limit × window` is too large for the script's
    /// exact arithmetic (see [`RedisSlidingWindow::new`]).
    pub fn sliding_window(
        conn: C,
        prefix: impl AsRef<[u8]>,
        quota: Quota,
    ) -> Result<Self, BuildError> {
        RedisKeyedRateLimiter::builder(conn, prefix, RedisSlidingWindow::new(&quota)?).build()
    }

    /// A fixed-window counter per key for `quota`, with the defaults.
    ///
    /// # Errors
    ///
    /// As for [`sliding_window`](Self::sliding_window).
    pub fn fixed_window(
        conn: C,
        prefix: impl AsRef<[u8]>,
        quota: Quota,
    ) -> Result<Self, BuildError> {
        RedisKeyedRateLimiter::builder(conn, prefix, RedisFixedWindow::new(&quota)?).build()
    }
}

impl<C: ConnectionLike + Clone + Send + Sync> RedisKeyedRateLimiter<C> {
    /// Admits one request for `key`, or says how long to wait.
    ///
    /// # Errors
    ///
    /// [`Error::Denied`] if the key is over its limit (or the fallback denied it);
    /// [`Error::Redis`] if Redis refused the script.
    pub async fn check_key(&self, key: impl AsRef<[u8]>) -> Result<(), Error> {
        self.check_key_n(key, 1).await
    }

    /// Admits a request of `cost` for `key`, all or nothing.
    ///
    /// # Errors
    ///
    /// As for [`check_key`](Self::check_key), and [`Error::InsufficientCapacity`] for a cost
    /// above the algorithm's capacity (the burst, or the limit per window), which is refused
    /// without asking Redis.
    pub async fn check_key_n(&self, key: impl AsRef<[u8]>, cost: u64) -> Result<(), Error> {
        Ok(self.decide_key(key, cost).await?.into_check()?)
    }

    /// Decides a request of `cost` for `key` and reports everything about it, as
    /// [`KeyedRateLimiter::decide_key`](crate::KeyedRateLimiter::decide_key) does.
    ///
    /// # Errors
    ///
    /// [`Error::InsufficientCapacity`] for a cost above the capacity, refused without asking Redis;
    /// [`Error::Redis`] if Redis refused the script (a key that holds something else, say).
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

    /// Decides a request of its cost for each `(key, cost)` of `requests`, in order, in one
    /// round trip: one script over all the keys, at one reading of the server's clock, as
    /// [`KeyedRateLimiter::decide_keys`](crate::KeyedRateLimiter::decide_keys) does locally. A
    /// key asked twice is decided twice, the second time on the state the first left. On a
    /// Redis Cluster, keys in different slots cannot share a script: the batch is then one
    /// script per slot, all sent at once (give related keys one `{hash tag}` to keep a batch in
    /// one round trip).
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] if Redis refused the script (a key that holds something else fails the
    /// whole batch). A cost above the capacity is that request's [`InsufficientCapacity`], and it
    /// is not sent.
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let decisions = limiter.decide_keys([("alice", 1), ("bob", 5), ("alice", 1)]).await?;
    /// for decision in decisions {
    ///     let allowed = decision.is_ok_and(|d| d.is_allowed());
    /// #   let _ = allowed;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    // Not `async fn`: the requests are read before the future is made, so that it holds none
    // of their iterator's types (which would keep it from being sent to another task).
    pub fn decide_keys<K: AsRef<[u8]>>(
        &self,
        requests: impl IntoIterator<Item = (K, u64)>,
    ) -> impl Future<Output = Result<Vec<Result<Decision, InsufficientCapacity>>, Error>> + '_ {
        let requests = self.requests(requests);
        async move { self.remote.call_many(requests, Mode::Decide, None).await }
    }

    /// Admits one request for each of `keys`, in order, in one round trip: the answers
    /// [`check_key`](Self::check_key) would give (see [`decide_keys`](Self::decide_keys)).
    ///
    /// # Errors
    ///
    /// As for [`decide_keys`](Self::decide_keys).
    pub fn check_keys<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> impl Future<Output = Result<Vec<Result<(), Denied>>, Error>> + '_ {
        let decisions = self.decide_keys(keys.into_iter().map(|key| (key, 1)));
        async move {
            Ok(decisions
                .await?
                .into_iter()
                // A cost of 1 always fits a capacity, which is at least 1.
                .map(|decision| decision.map_or(Ok(()), Decision::into_check))
                .collect())
        }
    }

    /// [`decide_key`](Self::decide_key) at the time `now`, in microseconds since the Unix epoch,
    /// instead of the server's: for tests that replay the script against the algorithm's
    /// `decide` ([`RedisGcra::decide`], say).
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

    /// [`decide_keys`](Self::decide_keys) at the time `now`: see
    /// [`decide_key_at`](Self::decide_key_at).
    ///
    /// # Errors
    ///
    /// As for [`decide_key_at`](Self::decide_key_at).
    #[cfg(feature = "reference")]
    pub async fn decide_keys_at<K: AsRef<[u8]>>(
        &self,
        requests: impl IntoIterator<Item = (K, u64)>,
        now: u64,
    ) -> Result<Vec<Result<Decision, InsufficientCapacity>>, Error> {
        let requests = self.requests(requests);
        self.remote
            .call_many(requests, Mode::Decide, Some(now))
            .await
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

    /// Admits a request of `cost` for `key` now into the key's shared GCRA schedule, to proceed
    /// at its turn, if that is at most `max_wait` from now (a wait of zero is a check): the
    /// local [`reserve_key`](crate::KeyedRateLimiter::reserve_key) on Redis, one round trip.
    /// When Redis cannot be asked the fallback decides as for a check.
    ///
    /// # Errors
    ///
    /// [`Error::Denied`] if the wait would exceed `max_wait` (nothing is reserved);
    /// [`Error::InsufficientCapacity`] for a cost above the burst; [`Error::Unsupported`] if
    /// the limiter's algorithm is not GCRA; [`Error::Redis`] if Redis refused the script.
    ///
    /// ```no_run
    /// # async fn run(per_host: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// use std::time::Duration;
    /// let turn = per_host.reserve_key("example.org", 1, Duration::from_secs(2)).await?;
    /// turn.ready().await; // every server's requests to example.org, one schedule
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reserve_key(
        &self,
        key: impl AsRef<[u8]>,
        cost: u64,
        max_wait: Duration,
    ) -> Result<RedisReservation<C>, Error> {
        let key = self.key(key.as_ref());
        reserve(&[(&self.remote, &key)], cost, max_wait, None).await
    }

    /// Waits on tokio's timer until a request of `cost` for `key` may proceed, if that is at
    /// most `max_wait` from now: [`reserve_key`](Self::reserve_key), then
    /// [`RedisReservation::ready`]. Dropped before it completes, the future gives its place
    /// back.
    ///
    /// # Errors
    ///
    /// As for [`reserve_key`](Self::reserve_key), at once, without waiting.
    ///
    /// ```no_run
    /// # async fn run(per_host: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// per_host.until_key_ready("example.org", 1, std::time::Duration::from_secs(2)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn until_key_ready(
        &self,
        key: impl AsRef<[u8]>,
        cost: u64,
        max_wait: Duration,
    ) -> Result<(), Error>
    where
        C: 'static,
    {
        self.reserve_key(key, cost, max_wait).await?.ready().await;
        Ok(())
    }

    /// [`reserve_key`](Self::reserve_key) at the time `now` (microseconds since the Unix
    /// epoch), waiting at most `max_wait`: see [`decide_key_at`](Self::decide_key_at).
    ///
    /// # Errors
    ///
    /// As for [`reserve_key`](Self::reserve_key).
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let at = 1_800_000_000_000_000; // microseconds since 1970
    /// let turn = limiter.reserve_key_at("k", 1, std::time::Duration::ZERO, at).await?;
    /// # let _ = turn;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "reference")]
    pub async fn reserve_key_at(
        &self,
        key: impl AsRef<[u8]>,
        cost: u64,
        max_wait: Duration,
        now: u64,
    ) -> Result<RedisReservation<C>, Error> {
        let key = self.key(key.as_ref());
        reserve(&[(&self.remote, &key)], cost, max_wait, Some(now)).await
    }

    /// The counters of decisions Redis made and of those the fallback made, shared by the
    /// limiter's clones.
    #[must_use]
    pub fn stats(&self) -> RedisStats {
        self.remote.stats()
    }

    /// The algorithm the script applies, with the quota in the script's unit of time.
    #[must_use]
    pub fn algorithm(&self) -> RedisAlgorithm {
        self.remote.algorithm()
    }

    /// Changes the quota, for this limiter and its clones, from their next decision on, without
    /// a lock and without losing state: the same algorithm for `quota`.
    ///
    /// Each key's value names the parameters it was written under; a script that reads a key
    /// written under others converts its state first, as [`Algorithm::carry_over`] does
    /// locally, and writes the converted state back whatever it decides (a peek too). So a
    /// key's quota changes the first time it is read under the new one, and its room (what it
    /// would still admit) carries over, capped at the new burst or limit: tightening takes
    /// effect at once and loosening grants no burst by itself. Servers that share the keys and
    /// change their quotas at different moments each convert a key to their own quota when
    /// they decide on it; every conversion keeps at most the room there was, so a key never
    /// gains from being converted back and forth. A reservation made before the change gives
    /// nothing back when cancelled ([`RedisReservation::cancel`]), and the
    /// [`Fallback::Local`] table keeps the quota it was built with.
    ///
    /// [`Algorithm::carry_over`]: crate::Algorithm::carry_over
    ///
    /// # Errors
    ///
    /// The errors of the algorithm's constructor for `quota` ([`RedisGcra::new`] for GCRA); the
    /// limiter is unchanged.
    ///
    /// ```
    /// # use tollgate::Quota;
    /// # fn run(per_tenant: tollgate::redis::RedisKeyedRateLimiter) -> Result<(), tollgate::BuildError> {
    /// // The tenant moved to a larger plan: from the next decision on, on every server that
    /// // shares this limiter object.
    /// per_tenant.set_quota(Quota::per_minute(6_000)?)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), BuildError> {
        self.remote.set_quota(&quota)
    }

    /// A batch's requests, with their keys' names.
    fn requests<K: AsRef<[u8]>>(
        &self,
        requests: impl IntoIterator<Item = (K, u64)>,
    ) -> Vec<(Vec<u8>, u64)> {
        requests
            .into_iter()
            .map(|(key, cost)| (self.key(key), cost))
            .collect()
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
            .field("algorithm", &self.remote.algorithm())
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .field("stats", &self.remote.shared.counters.snapshot())
            .finish_non_exhaustive()
    }
}

/// A limiter with one state, in Redis: a limit that every server shares as a whole (the
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

impl<C> RedisRateLimiter<C> {
    /// The connection and what its decisions need.
    pub(super) fn remote(&self) -> &Remote<C> {
        &self.remote
    }

    /// The name of the limiter's one state.
    pub(super) fn key(&self) -> &[u8] {
        &self.key
    }

    /// Starts configuring a limiter that applies `algorithm` on the connection `conn`, its
    /// state stored under `key`.
    pub fn builder(
        conn: C,
        key: impl AsRef<[u8]>,
        algorithm: impl Into<RedisAlgorithm>,
    ) -> RedisBuilder<C, RedisRateLimiter<C>> {
        builder(conn, key.as_ref(), algorithm.into())
    }

    /// A GCRA limiter for `quota` on the connection `conn`, its state stored under `key`, with
    /// the defaults: a timeout of 100 ms, and [`Fallback::Deny`].
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::gcra`].
    pub fn gcra(conn: C, key: impl AsRef<[u8]>, quota: Quota) -> Result<Self, BuildError> {
        RedisRateLimiter::builder(conn, key, RedisGcra::new(&quota)?).build()
    }

    /// A sliding-window counter for `quota`, with the defaults.
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::sliding_window`].
    pub fn sliding_window(
        conn: C,
        key: impl AsRef<[u8]>,
        quota: Quota,
    ) -> Result<Self, BuildError> {
        RedisRateLimiter::builder(conn, key, RedisSlidingWindow::new(&quota)?).build()
    }

    /// A fixed-window counter for `quota`, with the defaults.
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::sliding_window`].
    pub fn fixed_window(conn: C, key: impl AsRef<[u8]>, quota: Quota) -> Result<Self, BuildError> {
        RedisRateLimiter::builder(conn, key, RedisFixedWindow::new(&quota)?).build()
    }
}

impl<C: ConnectionLike + Clone + Send + Sync> RedisRateLimiter<C> {
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

    /// Admits a request of `cost` now into the shared GCRA schedule, to proceed at its turn, if
    /// that is at most `max_wait` from now: as [`RedisKeyedRateLimiter::reserve_key`].
    ///
    /// # Errors
    ///
    /// As for [`RedisKeyedRateLimiter::reserve_key`].
    ///
    /// ```no_run
    /// # async fn run(upstream: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// let turn = upstream.reserve(1, std::time::Duration::from_secs(2)).await?;
    /// turn.ready().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reserve(
        &self,
        cost: u64,
        max_wait: Duration,
    ) -> Result<RedisReservation<C>, Error> {
        reserve(&[(&self.remote, &self.key)], cost, max_wait, None).await
    }

    /// Waits until a request of `cost` may proceed, if that is at most `max_wait` from now: as
    /// [`RedisKeyedRateLimiter::until_key_ready`].
    ///
    /// # Errors
    ///
    /// As for [`reserve`](Self::reserve), at once, without waiting.
    ///
    /// ```no_run
    /// # async fn run(upstream: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::Error> {
    /// upstream.until_ready(1, std::time::Duration::from_secs(2)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn until_ready(&self, cost: u64, max_wait: Duration) -> Result<(), Error>
    where
        C: 'static,
    {
        self.reserve(cost, max_wait).await?.ready().await;
        Ok(())
    }

    /// The counters of decisions Redis made and of those the fallback made.
    #[must_use]
    pub fn stats(&self) -> RedisStats {
        self.remote.stats()
    }

    /// The algorithm the script applies, with the quota in the script's unit of time.
    #[must_use]
    pub fn algorithm(&self) -> RedisAlgorithm {
        self.remote.algorithm()
    }

    /// Changes the quota from the next decision on, without a lock and without losing state:
    /// see [`RedisKeyedRateLimiter::set_quota`], whose rules apply to this limiter's key.
    ///
    /// # Errors
    ///
    /// The errors of the algorithm's constructor for `quota`; the limiter is unchanged.
    ///
    /// ```
    /// # use tollgate::Quota;
    /// # fn run(outbound: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::BuildError> {
    /// outbound.set_quota(Quota::per_second(500)?)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), BuildError> {
        self.remote.set_quota(&quota)
    }
}

impl<C> fmt::Debug for RedisRateLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("algorithm", &self.remote.algorithm())
            .field("key", &String::from_utf8_lossy(&self.key))
            .field("stats", &self.remote.shared.counters.snapshot())
            .finish_non_exhaustive()
    }
}
