//! The exact sliding log, per key: for low-frequency limits ("5 logins per 15 minutes", "3 password
//! resets per day") where an approximation is not good enough and a few timestamps per key are
//! affordable.
//!
//! Each key keeps the times of its admitted requests within the last period, at most `limit`
//! units of them, run-length encoded (requests admitted at the same nanosecond share an entry).
//! A request of cost `c` at time `t` is admitted iff the units logged in `(t − P, t]` plus `c`
//! are at most the limit: exact, with no boundary effects. It is the definition of the reference
//! model `SlidingWindowLog` (the `reference` feature), which the tests replay against, including
//! its treatment of a clock that goes backwards (a request stamped before the newest logged one
//! is logged with it).
//!
//! ```
//! use std::time::Duration;
//! use tollgate::{KeyedSlidingLog, ManualClock, Quota};
//!
//! // 2 logins per minute, per account: admitted at 0 s and at 30 s.
//! let clock = ManualClock::new();
//! let logins = KeyedSlidingLog::<str>::builder(&Quota::per_minute(2).unwrap())
//!     .capacity(1_000)
//!     .clock(&clock)
//!     .build()
//!     .unwrap();
//! logins.check_key("alice").unwrap();
//! clock.set(Duration::from_secs(30));
//! logins.check_key("alice").unwrap();
//! // A nanosecond short of a minute, both still count.
//! clock.set(Duration::from_secs(60) - Duration::from_nanos(1));
//! assert!(logins.check_key("alice").is_err());
//! // At 60 s the login at 0 s has left the window (0 s, 60 s]; the next to leave is at 30 s.
//! clock.set(Duration::from_secs(60));
//! logins.check_key("alice").unwrap();
//! assert_eq!(logins.check_key("alice").unwrap_err().retry_after(), Duration::from_secs(30));
//! ```
//!
//! Unlike the packed algorithms, a log does not fit in a word: the keyed log is a table of
//! `Mutex`-guarded shards. That is the right trade for limits of a few per minute or less, where
//! contention on one shard is rare and a key's timestamps take `16 × limit` bytes at most.
//!
//! # Memory
//!
//! Keys spread over the shards by their hashes, unevenly, so each shard has room for its share
//! of the capacity and for the spread (three standard deviations of its count of keys, `3 ×
//! √share`, and two more), and a log holding `capacity` live keys turns away fewer than 0.1% of
//! new keys, as a [`KeyedRateLimiter`](crate::KeyedRateLimiter) does: the log's `slots`
//! ([`KeyedStats::slots`]) are 8% more than the capacity for 100 000 keys over 64 shards (16
//! threads), 29% for 1 000 over 8, none for a log of one shard (a capacity under 32).
//!
//! Building a log allocates each shard's map: about 75 to 150 bytes per slot on 64-bit targets
//! (the map rounds its buckets up to a power of two), which also links the logs in the order
//! they were written. A key's entries grow as it is admitted, 16 bytes per distinct timestamp,
//! and never past `limit` entries. Under churn (keys dropped and others inserted, over and
//! over) the maps never grow: the tombstones dropped keys leave in a map are cleared by copying
//! the shard's logs into a new map of the same size once they have used up its spare room (for
//! the moment of the copy, under the shard's lock, that one shard's map is allocated twice).
//! [`KeyedSlidingLog::memory`] reports the current total; it is at most
//! `slots × (300 + 16 × limit)` bytes and 512 bytes per shard (about four shards per thread).
//!
//! # Work per request
//!
//! A request locks its key's shard for one map lookup and the decision on the key's log (a
//! walk over its entries, at most `limit`). Writing a log moves it to the back of the write
//! order, a few map lookups; a new key in a full shard looks at the least recently written log,
//! and under [`Overflow::EvictLeastConstrained`] at up to 16 of them. Nothing scans or rebuilds
//! a whole shard, except under churn, once the tombstones of dropped logs have used up a map's
//! spare room: the shard then copies its logs into a new map of the same size, a pass over the
//! shard amortized over the drops that made the tombstones.

// The decision on one key's log is in `log.rs`, the locked shards that hold the logs in
// `shard.rs`, the keyed limiter over them here.
mod log;
mod shard;
mod snapshot;

pub use log::SlidingLog;

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, TscClock};
use crate::decision::{CheckError, Decision, Denied, InsufficientCapacity};
use crate::error::BuildError;
use crate::keyed::{DefaultKeyHasher, KeyedBuilder};
use crate::quota::Quota;
use crate::store::{shards_for, KeyedStats, Overflow};
use log::Log;
use shard::Shard;

/// An exact sliding log per key, for low-frequency limits. See [the module docs](self).
///
/// Holds `capacity` live keys with fewer than 0.1% of new keys finding no room (its shards have
/// room for the uneven spread of keys over them: see [Memory](self#memory)), each with at most
/// `limit` units logged. A key is live until its log has emptied, one period after its last
/// admission, and is dropped when room is needed; a new key that finds its shard full of keys
/// that still count gets the [`Overflow`] policy (default: evict the least-constrained log).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{KeyedSlidingLog, ManualClock, Quota};
///
/// // 3 password resets per day, per account.
/// let clock = ManualClock::new();
/// let resets = KeyedSlidingLog::<str>::builder(&Quota::per_day(3).unwrap())
///     .capacity(100_000)
///     .clock(&clock)
///     .build()
///     .unwrap();
/// for _ in 0..3 {
///     resets.check_key("alice@example.com").unwrap();
/// }
/// let denied = resets.check_key("alice@example.com").unwrap_err();
/// assert_eq!(denied.retry_after(), Duration::from_secs(86_400));
/// assert!(resets.check_key("bob@example.com").is_ok());
/// ```
pub struct KeyedSlidingLog<K: ?Sized, C = TscClock, S = DefaultKeyHasher> {
    config: SlidingLog,
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    per_shard: usize,
    capacity: usize,
    overflow: Overflow,
    clock: C,
    hasher: S,
    key: PhantomData<fn(&K)>,
}

impl<K: ?Sized> KeyedSlidingLog<K> {
    /// An exact sliding log per key for `quota` (its limit and period), for up to `capacity`
    /// keys, with the defaults (random ahash, [`TscClock`], [`Overflow::EvictLeastConstrained`]), as
    /// [`KeyedRateLimiter::gcra`](crate::KeyedRateLimiter::gcra) builds a GCRA table. The
    /// [`builder`](KeyedSlidingLog::builder) sets the rest.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for a capacity of 0 or one whose maps cannot be allocated.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedSlidingLog, Quota};
    ///
    /// // 5 failed logins per 15 minutes, per account, for up to 100 000 accounts at once.
    /// let quota = Quota::new(5, Duration::from_secs(15 * 60))?;
    /// let logins = KeyedSlidingLog::<str>::new(quota, 100_000)?;
    /// assert_eq!(logins.decide_key("alice", 1)?.remaining(), 4);
    /// assert_eq!(logins.stats().capacity, 100_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota, capacity: usize) -> Result<KeyedSlidingLog<K>, BuildError> {
        KeyedSlidingLog::builder(&quota).capacity(capacity).build()
    }

    /// Starts configuring a keyed sliding log for keys of type `K` and `quota` (its limit and
    /// period).
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap())
    ///     .capacity(1_000)
    ///     .build()
    ///     .unwrap();
    /// assert!(log.check_key(&1).is_ok());
    /// ```
    pub fn builder(quota: &Quota) -> SlidingLogBuilder<K> {
        SlidingLogBuilder(KeyedBuilder::new(SlidingLog::new(quota)))
    }
}

/// Configures a [`KeyedSlidingLog`]: capacity, overflow policy, clock and hasher, as
/// [`KeyedBuilder`] does for the packed algorithms.
///
/// ```
/// use tollgate::{KeyedSlidingLog, ManualClock, Overflow, Quota};
/// let log = KeyedSlidingLog::<str>::builder(&Quota::per_minute(3).unwrap())
///     .capacity(10_000)
///     .overflow(Overflow::Deny)
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// assert_eq!(log.stats().capacity, 10_000);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct SlidingLogBuilder<K: ?Sized, C = TscClock, S = DefaultKeyHasher>(
    KeyedBuilder<K, SlidingLog, C, S>,
);

// By hand, so that a key type need not be `Debug` for its builder to be: no key is stored.
impl<K: ?Sized, C: fmt::Debug, S: fmt::Debug> fmt::Debug for SlidingLogBuilder<K, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SlidingLogBuilder").field(&self.0).finish()
    }
}

impl<K: ?Sized, C, S> SlidingLogBuilder<K, C, S> {
    /// The number of keys held at most (default 10 000).
    ///
    /// ```
    /// # use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap()).capacity(5).build().unwrap();
    /// assert_eq!(log.stats().capacity, 5);
    /// ```
    pub fn capacity(self, keys: usize) -> Self {
        SlidingLogBuilder(self.0.capacity(keys))
    }

    /// What to do when a new key finds its shard full of logs that still count (default
    /// [`Overflow::EvictLeastConstrained`]).
    ///
    /// [`Overflow::EvictLeastConstrained`] drops a log that is not at its limit, looking at the
    /// 16 least recently written logs of the shard, oldest first. The logs it passes over (at
    /// their limit: being limited right now, so they keep their state) move to the back of the
    /// line, and the next overflow looks at the next 16: a flood of new keys costs a bounded
    /// amount of work under the shard's lock per request, however many limited logs it holds.
    ///
    /// ```
    /// # use tollgate::{KeyedSlidingLog, Overflow, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap())
    ///     .overflow(Overflow::Allow)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(log.overflow(), Overflow::Allow);
    /// ```
    pub fn overflow(self, policy: Overflow) -> Self {
        SlidingLogBuilder(self.0.overflow(policy))
    }

    /// The clock (default [`TscClock`], made by [`build`](Self::build) only if no other clock is
    /// given).
    ///
    /// ```
    /// # use tollgate::{KeyedSlidingLog, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap()).clock(&clock).build().unwrap();
    /// # let _ = log;
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> SlidingLogBuilder<K, C2, S> {
        SlidingLogBuilder(self.0.clock(clock))
    }

    /// The hasher (default: ahash seeded at random).
    ///
    /// ```
    /// # use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap())
    ///     .hasher(ahash::RandomState::with_seeds(1, 2, 3, 4))
    ///     .build()
    ///     .unwrap();
    /// # let _ = log;
    /// ```
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> SlidingLogBuilder<K, C, S2> {
        SlidingLogBuilder(self.0.hasher(hasher))
    }

    /// How many threads will use it (default: the machine's parallelism): about four locked
    /// shards per thread, each with room for at least 16 keys. Any count is accepted; 0 counts
    /// as 1.
    ///
    /// ```
    /// # use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap()).threads(1).build().unwrap();
    /// # let _ = log;
    /// ```
    pub fn threads(self, threads: usize) -> Self {
        SlidingLogBuilder(self.0.threads(threads))
    }
}

impl<K: ?Sized, C: Clock, S: BuildHasher> SlidingLogBuilder<K, C, S> {
    /// Builds the keyed sliding log.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for a capacity of 0 or one whose maps cannot be allocated.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// assert!(KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap()).capacity(0).build().is_err());
    /// ```
    pub fn build(self) -> Result<KeyedSlidingLog<K, C, S>, BuildError> {
        let (config, clock, hasher, capacity, overflow, parallelism) = self.0.into_parts();
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        // About four shards per thread, but at least 16 keys in each.
        let shard_count = shards_for(parallelism, capacity / 16);
        let per_shard = keys_per_shard(capacity, shard_count);
        let too_large = || BuildError::CapacityTooLarge {
            capacity,
            bytes: shard_count as u128 * Shard::bytes_to_build(per_shard),
        };
        let mut shards = Vec::new();
        shards
            .try_reserve_exact(shard_count)
            .map_err(|_| too_large())?;
        for _ in 0..shard_count {
            let shard = Shard::with_capacity(per_shard).map_err(|_| too_large())?;
            shards.push(CachePadded::new(Mutex::new(shard)));
        }
        Ok(KeyedSlidingLog {
            config,
            shards: shards.into_boxed_slice(),
            per_shard,
            capacity,
            overflow,
            clock,
            hasher,
            key: PhantomData,
        })
    }
}

/// The keys a shard has room for when `capacity` keys spread over `shards` by their hashes: its
/// share, and beside it three standard deviations of the spread (a shard's count of keys is
/// binomial, its deviation about the square root of the share) and two, so that a log holding
/// `capacity` live keys with random hashes turns away fewer than 0.1% of new keys, as a
/// [`KeyedRateLimiter`](crate::KeyedRateLimiter) built for as many does. One shard holds its
/// capacity exactly.
fn keys_per_shard(capacity: usize, shards: usize) -> usize {
    let share = capacity.div_ceil(shards);
    if shards == 1 {
        return share;
    }
    // An f64 square root is within a key of the exact one here, which the +2 covers.
    let spread = (3.0 * (share as f64).sqrt()).ceil() as usize;
    share.saturating_add(spread).saturating_add(2)
}

impl<K: ?Sized, C: Clock, S: BuildHasher> KeyedSlidingLog<K, C, S> {
    /// Admits one request for `key`, or says how long to wait.
    ///
    /// # Errors
    ///
    /// [`Denied`] if the key's log is full, or if it is new and found no room.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap()).build().unwrap();
    /// assert!(log.check_key(&7).is_ok());
    /// assert!(log.check_key(&7).is_err());
    /// ```
    pub fn check_key<Q>(&self, key: &Q) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.decide(self.hasher.hash_one(key), 1).into_check()
    }

    /// Admits a request of `cost` units for `key`, all or nothing.
    ///
    /// # Errors
    ///
    /// [`CheckError::Denied`] as for [`check_key`](Self::check_key);
    /// [`CheckError::InsufficientCapacity`] for a cost above the limit.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(10).unwrap()).build().unwrap();
    /// assert!(log.check_key_n(&1, 10).is_ok());
    /// assert!(log.check_key_n(&1, 11).is_err());
    /// ```
    pub fn check_key_n<Q>(&self, key: &Q, cost: u64) -> Result<(), CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        Ok(self.decide_key(key, cost)?.into_check()?)
    }

    /// Decides a request of `cost` for `key` and reports everything about it. A cost of 0 is a
    /// peek, which never inserts the key.
    ///
    /// A new key that finds its shard full (and nothing to evict) under [`Overflow::Deny`] or
    /// [`Overflow::EvictLeastConstrained`] is denied with `remaining` 0, and a `retry_after` and
    /// a `reset_after` of the time until its shard has room (when it can have its whole
    /// limit); under [`Overflow::Allow`] it gets the decision a new key would get, unrecorded.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] for a cost above the limit.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap()).build().unwrap();
    /// assert_eq!(log.decide_key(&1, 2).unwrap().remaining(), 3);
    /// ```
    pub fn decide_key<Q>(&self, key: &Q, cost: u64) -> Result<Decision, InsufficientCapacity>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        InsufficientCapacity::check(cost, self.config.limit)?;
        Ok(self.decide(self.hasher.hash_one(key), cost))
    }

    /// Whether one request for `key` would be admitted now, and if not, when it would be,
    /// without recording anything or inserting the key: [`peek_key_n`](Self::peek_key_n) for a
    /// cost of 1.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(2).unwrap()).build().unwrap();
    /// log.check_key(&1).unwrap();
    /// assert_eq!(log.peek_key(&1).remaining(), 1);
    /// log.check_key(&1).unwrap();
    /// let peek = log.peek_key(&1);
    /// assert!(!peek.is_allowed());
    /// assert!(peek.retry_after().as_secs() > 3_500); // an hour after the first
    /// ```
    pub fn peek_key<Q>(&self, key: &Q) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.peek(self.hasher.hash_one(key), 1)
    }

    /// Whether a request of `cost` for `key` would be admitted now, and if not, when it would
    /// be, without recording anything or inserting the key. The decision's
    /// [`is_allowed`](Decision::is_allowed) and [`retry_after`](Decision::retry_after) are the
    /// request's; [`remaining`](Decision::remaining) and [`reset_after`](Decision::reset_after)
    /// describe the log as it stands, since nothing is consumed.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] for a cost above the limit.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap()).build().unwrap();
    /// log.check_key_n(&1, 3).unwrap();
    /// assert!(log.peek_key_n(&1, 2).unwrap().is_allowed());
    /// let peek = log.peek_key_n(&1, 3).unwrap();
    /// assert!(!peek.is_allowed());
    /// assert_eq!(peek.remaining(), 2);
    /// assert!(log.peek_key_n(&1, 6).is_err());
    /// ```
    pub fn peek_key_n<Q>(&self, key: &Q, cost: u64) -> Result<Decision, InsufficientCapacity>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        InsufficientCapacity::check(cost, self.config.limit)?;
        Ok(self.peek(self.hasher.hash_one(key), cost))
    }

    /// Forgets what `key` has consumed: drops its log, so that its next request is decided as a
    /// new key's. For an operator lifting a block, or a login limit cleared by a successful login.
    ///
    /// Under the shard's lock, so a request racing it is decided either before it (and then
    /// forgotten) or after it. Another key whose 64-bit hash equals this key's is reset with it.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<str>::builder(&Quota::per_hour(2).unwrap()).build().unwrap();
    /// log.check_key("alice").unwrap();
    /// log.check_key("alice").unwrap();
    /// assert!(log.check_key("alice").is_err());
    /// log.reset_key("alice");
    /// assert_eq!(log.peek_key("alice").remaining(), 2);
    /// assert_eq!(log.stats().occupied, 0);
    /// ```
    pub fn reset_key<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        lock(self.shard(hash)).remove(hash);
    }

    /// Forgets what every key has consumed: drops every log, so that each key's next request is
    /// decided as a new key's. For a log that cannot be replaced (shared in an `Arc` or a
    /// `static`) when an operator lifts every block at once.
    ///
    /// One shard at a time, each under its lock: a request racing the call is decided either before
    /// its key's shard is cleared (and then forgotten) or after it. When the call returns, every
    /// key holds only what was admitted after its shard was cleared. The shards keep their maps'
    /// room, so no memory is allocated again; the counters of [`stats`](Self::stats) keep counting.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<str>::builder(&Quota::per_hour(1).unwrap()).build().unwrap();
    /// log.check_key("alice").unwrap();
    /// log.check_key("bob").unwrap();
    /// log.reset();
    /// assert_eq!(log.peek_key("alice").remaining(), 1);
    /// assert_eq!(log.peek_key("bob").remaining(), 1);
    /// assert_eq!(log.stats().occupied, 0);
    /// ```
    pub fn reset(&self) {
        for shard in self.shards.iter() {
            lock(shard).clear();
        }
    }

    /// Keys held, and how often room had to be made.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap()).capacity(10).build().unwrap();
    /// log.check_key(&1).unwrap();
    /// assert_eq!(log.stats().occupied, 1);
    /// ```
    #[must_use]
    pub fn stats(&self) -> KeyedStats {
        let mut stats = KeyedStats {
            capacity: self.capacity,
            slots: self.per_shard * self.shards.len(),
            ..KeyedStats::default()
        };
        for shard in self.shards.iter() {
            let shard = lock(shard);
            stats.occupied += shard.len();
            stats.reuses += shard.reuses;
            stats.evictions += shard.evictions;
            stats.overflows += shard.overflows;
        }
        stats
    }

    /// Bytes held by the shards, their maps and the logs right now: at most
    /// `slots × (300 + 16 × limit)` bytes and 512 bytes per shard (see [the module
    /// docs](self#memory)).
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap()).capacity(10).build().unwrap();
    /// let built = log.memory(); // the shards and their maps, sized at construction
    /// log.check_key(&1).unwrap();
    /// assert_eq!(log.memory(), built + 4 * 16); // key 1's log: room for 4 entries of 16 bytes
    /// log.reset();
    /// assert_eq!(log.memory(), built);
    /// ```
    #[must_use]
    pub fn memory(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).memory())
            .sum::<usize>()
            + core::mem::size_of_val(&*self.shards)
    }

    /// The log's parameters: its limit and period, from the quota it was built for.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedSlidingLog, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap()).build().unwrap();
    /// assert_eq!(log.algorithm().limit(), 5);
    /// assert_eq!(log.algorithm().period(), Duration::from_secs(3_600));
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> &SlidingLog {
        &self.config
    }

    /// The overflow policy.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Overflow, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap()).build().unwrap();
    /// assert_eq!(log.overflow(), Overflow::EvictLeastConstrained);
    /// ```
    #[must_use]
    pub fn overflow(&self) -> Overflow {
        self.overflow
    }

    /// The clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, KeyedSlidingLog, ManualClock, Quota};
    /// let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap())
    ///     .clock(ManualClock::starting_at(Duration::from_secs(9)))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(log.clock().now().as_nanos(), 9_000_000_000);
    /// ```
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The shard that holds the logs of keys with `hash`: picked by the hash's high bits.
    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        let index = ((hash as u128 * self.shards.len() as u128) >> 64) as usize;
        &self.shards[index]
    }

    fn decide(&self, hash: u64, cost: u64) -> Decision {
        let now = self.clock.now();
        let mut shard = lock(self.shard(hash));
        if let Some(log) = shard.log_mut(hash) {
            let before = log.newest();
            let decision = self.config.decide(log, now, cost);
            if log.newest() != before {
                shard.touched(hash);
            }
            return decision;
        }
        // A new key: decide on an empty log, and keep it only if something was admitted.
        let mut log = Log::default();
        let decision = self.config.decide(&mut log, now, cost);
        if log.units == 0 {
            return decision;
        }
        if !shard.make_room(&self.config, self.per_shard, now, self.overflow) {
            shard.overflows += 1;
            return match self.overflow {
                Overflow::Allow => decision.overflowed(),
                _ => Decision::no_room(shard.time_to_room(&self.config, now), self.config.limit),
            };
        }
        shard.insert(hash, log);
        decision
    }

    /// The decision for a request of `cost` on the log of keys with `hash`, applied to nothing.
    fn peek(&self, hash: u64, cost: u64) -> Decision {
        let now = self.clock.now();
        let shard = lock(self.shard(hash));
        match shard.log(hash) {
            Some(log) => self.config.peek(log, now, cost),
            None => self.config.peek(&Log::default(), now, cost),
        }
    }
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic while holding the lock cannot leave a shard inconsistent in a way that matters
    // (every mutation completes before anything that could panic), so poisoning is ignored.
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: ?Sized, C: Clock, S: BuildHasher> fmt::Debug for KeyedSlidingLog<K, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedSlidingLog")
            .field("algorithm", &self.config)
            .field("overflow", &self.overflow)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    /// A log as built holds its shards (each behind its lock, cache-padded) and their maps, and
    /// nothing else; a key's log then adds its entries' room, which a reset of every key gives
    /// back while the maps keep theirs.
    #[test]
    fn memory_is_the_shards_their_maps_and_the_entries() {
        let clock = ManualClock::new();
        let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(5).unwrap())
            .capacity(1_000)
            .threads(2)
            .clock(&clock)
            .build()
            .unwrap();
        // Two threads: eight shards of 125 keys, each with room for 36 more (3 × √125, and 2).
        assert_eq!((log.shards.len(), log.per_shard), (8, 161));
        let built = 8 * core::mem::size_of::<CachePadded<Mutex<Shard>>>()
            + 8 * usize::try_from(Shard::bytes_to_build(161)).unwrap();
        assert_eq!(log.memory(), built);
        // Two requests at one time: one entry, in room for four (of 16 bytes).
        log.check_key(&1).unwrap();
        log.check_key(&1).unwrap();
        assert_eq!(log.memory(), built + 4 * 16);
        // A reset of every key drops the logs' entries and keeps the maps as built.
        log.reset();
        assert_eq!(log.memory(), built);
    }
}
