//! Keyed limiters: one state per client, IP address or API key, in a table of fixed size.
//!
//! [`KeyedRateLimiter`] is the limiter, configured by a [`KeyedBuilder`]; [`CheckKeys`],
//! [`DecideKeys`] and [`DecideKeysWith`] are the iterators of its batched checks,
//! [`check_keys`](KeyedRateLimiter::check_keys), [`decide_keys`](KeyedRateLimiter::decide_keys)
//! and, for tiers, [`decide_keys_with`](KeyedRateLimiter::decide_keys_with).
//!
//! ```
//! use std::time::Duration;
//! use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Overflow, Quota};
//!
//! // 2 per second per user, for up to 1 000 users at once.
//! let clock = ManualClock::new();
//! let per_user = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(2).unwrap()))
//!     .capacity(1_000)
//!     .overflow(Overflow::EvictLeastConstrained)
//!     .clock(&clock)
//!     .build()
//!     .unwrap();
//! assert!(per_user.check_key("alice").is_ok());
//! assert_eq!(per_user.decide_key("alice", 1).unwrap().remaining(), 0);
//! assert!(per_user.check_key("alice").is_err());
//! // A peek decides without inserting: bob has no slot yet.
//! assert_eq!(per_user.peek_key("bob").remaining(), 2);
//! assert_eq!(per_user.stats().occupied, 1);
//! // A second later alice's state is back to fresh; her slot stays hers until a new key needs it.
//! clock.advance(Duration::from_secs(1));
//! assert_eq!(per_user.peek_key("alice").remaining(), 2);
//! ```

// The limiter and its checks are in this file, the builder in `builder.rs`, the batched checks in
// `batch.rs`; the table is `store::Table`.
mod batch;
mod builder;

pub use batch::{CheckKeys, DecideKeys, DecideKeysWith};
pub use builder::{KeyedBuilder, KeyedError};

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;

use crate::algorithm::{Algorithm, FixedWindow, Gcra, SlidingWindow, Transition};
use crate::clock::{Clock, Nanos, TscClock};
use crate::decision::{CheckError, Decision, Denied, InsufficientCapacity};
use crate::quota::Quota;
use crate::store::{CapacityError, KeyedStats, Overflow, Overflowed, Probe, Table};

/// The default hasher: ahash, seeded at random for each limiter, so that nobody can aim keys at
/// one probe group.
///
/// ```
/// use std::hash::BuildHasher;
/// use tollgate::{DefaultKeyHasher, Gcra, KeyedRateLimiter, Quota, TscClock};
///
/// // Each limiter draws its own seeds: one key hashes differently in each.
/// assert_ne!(DefaultKeyHasher::new().hash_one(7_u64), DefaultKeyHasher::new().hash_one(7_u64));
///
/// // It is the hasher type parameter's default, so these two types are one type.
/// let limiter: KeyedRateLimiter<u64, Gcra, TscClock, DefaultKeyHasher> =
///     KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 1_000).unwrap();
/// # let _ = limiter;
/// ```
pub type DefaultKeyHasher = ahash::RandomState;

/// A lock-free rate limiter with one state per key, in a table whose size is fixed when it is
/// built.
///
/// Keys are hashed once (ahash, seeded at random per limiter); the 64-bit hash is the key's
/// identity, and the key itself is never stored, so every key type costs the same 16-byte slot.
/// Lookups take any borrowed form of the key that hashes like it (`&str` for `String` keys), as
/// `HashMap` does.
///
/// # Memory
///
/// The table has one 16-byte slot per 0.68 keys of capacity (rounded up to whole 128-byte probe
/// groups): **23.5 bytes per key of capacity**, for any key type (`u64`, `IpAddr`, `String`:
/// the key is never stored), allocated once at construction. With its shard headers and its own
/// fields, a limiter of 2 000 keys or more takes at most 24 bytes per key of capacity
/// ([`memory`](KeyedRateLimiter::memory)) whatever the thread count it is built for; a smaller
/// one pays a few hundred bytes of fixed cost on top of its slots.
/// Nothing is allocated afterwards: a slot whose state is back to fresh (an *idle* key) is reused
/// in place by the next new key that needs room, with no background thread and nothing to call.
/// A new key takes an empty slot before an idle one where its two groups hold as many live keys,
/// so at capacity an idle key keeps its slot, and its next request finds it, until room runs short.
/// A table built for `capacity(n)` holds `n` simultaneously live keys with uniformly random hashes
/// with fewer than 0.1% of insertions overflowing, also while keys keep coming and going at that
/// level (measured: 0.06% with a million live keys replaced ten times over); when a key's two
/// probe groups are full of live keys, its [`Overflow`] policy applies.
///
/// # Choosing the capacity
///
/// Capacity counts *live* keys. A key holds its slot from its first admitted request until its
/// state is back to fresh, which is when the [`reset_after`](crate::Decision::reset_after) of its
/// last decision runs out; denials write nothing, so they keep no key longer. After an admission
/// that is at most the quota's [`tolerance`](crate::Quota::tolerance) for GCRA (`burst × period
/// / limit`: one period when the burst is the limit), two periods for the sliding window (the
/// request's window, and the next, over which it still weighs) and one for the fixed window. So
/// size a table for the most distinct keys that can be admitted within that span at the peak:
/// for 10 requests per second in bursts of 20 and at most 30 000 new clients a second, 60 000.
/// Keys beyond it meet the [`Overflow`] policy, counted in [`stats`](Self::stats).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let quota = Quota::per_second(10)?.with_burst(20)?;
/// let per_client = KeyedRateLimiter::<u64>::gcra(quota, 60_000)?;
/// // A whole burst at once keeps a client live for the longest: its tolerance, 2 s.
/// let decision = per_client.decide_key(&7, 20)?;
/// assert_eq!(decision.reset_after(), quota.tolerance());
/// assert_eq!(quota.tolerance(), Duration::from_secs(2));
/// # Ok(())
/// # }
/// ```
///
/// # Hash collisions
///
/// Two keys whose 64-bit hashes are equal share one state. Among `n` live keys the chance that any
/// two collide is about `n² / 2^65`: one in 37 million for a million keys, one in 370 000 for ten
/// million. Hashes are seeded at random per limiter, so collisions cannot be aimed, and a
/// collision only merges two keys' limits (each sees the other's requests), it never frees one.
///
/// # Consistency
///
/// Each key's decisions are linearizable, exactly as for a [`RateLimiter`](crate::RateLimiter):
/// one slot per key at any time, updated by compare-and-swap of the whole `(tag, state)` word.
/// When a key's slot is reused by another key, the key's state was equivalent to fresh at the
/// reusing thread's clock reading; a request for the key whose own reading is older than that
/// (a thread preempted between its clock read and its lookup) is then decided as for a fresh key.
///
/// Checks of a key that has a slot are lock-free, as a [`RateLimiter`](crate::RateLimiter)'s are.
/// The first requests of a new key, racing each other to insert it, are non-blocking but not
/// lock-free: a thread stalled in the middle of inserting a key is overtaken by the key's other
/// inserters after a bounded wait, and other keys never wait for it, but two inserters of one key
/// that a scheduler kept in lockstep could keep undoing each other's claims.
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Per client IP: 20 per second, bursts of 40, for up to 100 000 clients at once (2.4 MB).
/// let per_ip = KeyedRateLimiter::<IpAddr>::gcra(Quota::per_second(20)?.with_burst(40)?, 100_000)?;
/// let client: IpAddr = "203.0.113.7".parse()?;
/// assert!(per_ip.check_key(&client).is_ok());
///
/// // Per API key, looked up by `&str`.
/// let per_api_key = KeyedRateLimiter::<String>::gcra(Quota::per_minute(600)?, 10_000)?;
/// let decision = per_api_key.decide_key("key-123", 1)?;
/// assert_eq!(decision.remaining(), 599);
/// # Ok(())
/// # }
/// ```
pub struct KeyedRateLimiter<K: ?Sized, A = Gcra, C = TscClock, S = DefaultKeyHasher> {
    table: Table,
    algorithm: A,
    clock: C,
    hasher: S,
    overflow: Overflow,
    key: PhantomData<fn(&K)>,
}

// The three constructors with the defaults, and `builder`, all live on the defaults' type, so
// that each call names the key type alone: `KeyedRateLimiter::<str>::sliding_window(..)`,
// `KeyedRateLimiter::<u64>::builder(..)`, and the builder carries it to `build`. On
// `KeyedRateLimiter<K, SlidingWindow>` that call would not compile (a path that names only `K`
// takes the default algorithm, GCRA) and would need `KeyedRateLimiter::<str, _>`.
impl<K: ?Sized> KeyedRateLimiter<K> {
    /// A GCRA limiter per key for `quota`, sized for `capacity` live keys, with the defaults
    /// (random ahash, [`TscClock`], [`Overflow::Deny`]).
    ///
    /// # Errors
    ///
    /// [`CapacityError`] for a capacity of 0 or one whose table cannot be allocated.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 1_000).unwrap();
    /// assert!(l.check_key(&1).is_ok());
    /// ```
    pub fn gcra(quota: Quota, capacity: usize) -> Result<KeyedRateLimiter<K>, CapacityError> {
        KeyedRateLimiter::builder(Gcra::new(&quota))
            .capacity(capacity)
            .build()
    }

    /// A sliding-window counter per key; see [`KeyedRateLimiter::gcra`].
    ///
    /// # Errors
    ///
    /// The quota does not fit the sliding window's word, or the capacity cannot be allocated.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::sliding_window(Quota::per_minute(60).unwrap(), 1_000).unwrap();
    /// assert!(l.check_key_n("tenant-a", 60).is_ok());
    /// assert!(l.check_key("tenant-a").is_err());
    /// ```
    pub fn sliding_window(
        quota: Quota,
        capacity: usize,
    ) -> Result<KeyedRateLimiter<K, SlidingWindow>, KeyedError> {
        Ok(KeyedRateLimiter::builder(SlidingWindow::new(&quota)?)
            .capacity(capacity)
            .build()?)
    }

    /// A fixed-window counter per key; see [`KeyedRateLimiter::gcra`].
    ///
    /// # Errors
    ///
    /// The quota does not fit the fixed window's word, or the capacity cannot be allocated.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u32>::fixed_window(Quota::per_second(2).unwrap(), 100).unwrap();
    /// assert!(l.check_key_n(&9, 2).is_ok());
    /// ```
    pub fn fixed_window(
        quota: Quota,
        capacity: usize,
    ) -> Result<KeyedRateLimiter<K, FixedWindow>, KeyedError> {
        Ok(KeyedRateLimiter::builder(FixedWindow::new(&quota)?)
            .capacity(capacity)
            .build()?)
    }

    /// Starts configuring a keyed limiter for keys of type `K` running `algorithm`.
    ///
    /// The key type is named here, or left to the type that `build` must return.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota, SlidingWindow};
    /// let l = KeyedRateLimiter::<&'static str>::builder(Gcra::from(Quota::per_second(3).unwrap()))
    ///     .capacity(10)
    ///     .build()
    ///     .unwrap();
    /// assert!(l.check_key(&"a").is_ok());
    ///
    /// let window = SlidingWindow::new(&Quota::per_minute(60).unwrap()).unwrap();
    /// let per_user: KeyedRateLimiter<u64, SlidingWindow> =
    ///     KeyedRateLimiter::builder(window).capacity(1_000).build().unwrap();
    /// assert_eq!(per_user.decide_key(&7, 1).unwrap().remaining(), 59);
    /// ```
    pub fn builder<A: Algorithm>(algorithm: A) -> KeyedBuilder<K, A> {
        KeyedBuilder::new(algorithm)
    }
}

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> KeyedRateLimiter<K, A, C, S> {
    /// Admits one request for `key`, or says how long to wait.
    ///
    /// # Errors
    ///
    /// [`Denied`] if the key is over its limit, or if it is new and found no room under
    /// [`Overflow::Deny`] (or nothing could be evicted).
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_hour(1).unwrap(), 100).unwrap();
    /// assert!(l.check_key(&42).is_ok());
    /// assert!(l.check_key(&42).is_err());
    /// assert!(l.check_key(&43).is_ok()); // every key has its own quota
    /// ```
    #[inline]
    pub fn check_key<Q>(&self, key: &Q) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.apply(&self.algorithm, &self.probe(key), 1)
    }

    /// Admits a request of `cost` units for `key`, all or nothing.
    ///
    /// # Errors
    ///
    /// [`CheckError::Denied`] as for [`check_key`](Self::check_key);
    /// [`CheckError::InsufficientCapacity`] if the cost exceeds the capacity and can never fit.
    ///
    /// ```
    /// use tollgate::{CheckError, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<String>::gcra(Quota::per_second(100).unwrap(), 100).unwrap();
    /// assert!(l.check_key_n("upload", 80).is_ok());
    /// assert!(matches!(l.check_key_n("upload", 80), Err(CheckError::Denied(_))));
    /// assert!(matches!(l.check_key_n("upload", 101), Err(CheckError::InsufficientCapacity(_))));
    /// ```
    #[inline]
    pub fn check_key_n<Q>(&self, key: &Q, cost: u64) -> Result<(), CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        InsufficientCapacity::check(cost, self.algorithm.capacity())?;
        Ok(self.apply(&self.algorithm, &self.probe(key), cost)?)
    }

    /// Decides a request of `cost` for `key` and reports everything about it. A cost of 0 is a
    /// pure peek, which never inserts the key.
    ///
    /// A new key that finds no room under [`Overflow::Deny`] is denied with `remaining` 0, and a
    /// `retry_after` and a `reset_after` of the time until a slot of its groups becomes idle
    /// (when it can have its whole capacity); under [`Overflow::Allow`] it gets the decision a
    /// fresh key would get, unrecorded.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] if the cost exceeds the capacity and can never fit.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
    /// let d = l.decide_key(&5, 3).unwrap();
    /// assert!(d.is_allowed());
    /// assert_eq!(d.remaining(), 7);
    /// ```
    pub fn decide_key<Q>(&self, key: &Q, cost: u64) -> Result<Decision, InsufficientCapacity>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.decide_with(&self.algorithm, &self.probe(key), cost)
    }

    /// The key's state as it stands, without changing it (and without inserting the key): the
    /// [`Decision`] for a cost of 0.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
    /// assert_eq!(l.peek_key(&1).remaining(), 10);
    /// l.check_key_n(&1, 4).unwrap();
    /// assert_eq!(l.peek_key(&1).remaining(), 6);
    /// assert_eq!(l.stats().occupied, 1);
    /// ```
    pub fn peek_key<Q>(&self, key: &Q) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.peek_key_as(key, &self.algorithm)
    }

    /// Forgets what `key` has consumed: its next request is decided as a new key's. For an
    /// operator lifting a block, or a login limit cleared by a successful login.
    ///
    /// The reset is ordered with the key's decisions as one more of them: a request racing it
    /// is decided either before it (and then forgotten) or after it (on the fresh state). It
    /// never inserts the key, and leaves the key's slot idle, free for another key: the memory is
    /// the table's, fixed, whatever is reset. Another key whose 64-bit hash equals this key's is
    /// reset with it (see the crate docs on collisions).
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let logins = KeyedRateLimiter::<str>::gcra(Quota::per_minute(3).unwrap(), 1_000).unwrap();
    /// for _ in 0..3 {
    ///     logins.check_key("alice").unwrap(); // failed attempts
    /// }
    /// assert!(logins.check_key("alice").is_err());
    /// logins.reset_key("alice"); // the password was right after all
    /// assert_eq!(logins.peek_key("alice").remaining(), 3);
    /// ```
    pub fn reset_key<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.table.reset(&self.probe(key));
    }

    /// Forgets what every key has consumed, as [`reset_key`](Self::reset_key) of each in turn:
    /// every key's next request is decided as a new key's. For a limiter that cannot be replaced
    /// (shared in an `Arc` or a `static`) when an operator lifts every block at once, or when what
    /// the keys consumed no longer counts.
    ///
    /// Not for the request path: it visits every slot of the table, a few milliseconds for a
    /// million keys (the simulated gateway, `cargo run --release --example simulate`, prints how
    /// long it takes over its table of a million clients). Other threads keep deciding while it
    /// runs; each key is put back to the fresh state at some moment during the call, and a request
    /// for it racing the call is decided either before that moment (and then forgotten) or after
    /// it. When the call returns, every key holds only what was admitted after its own reset. The
    /// table's slots stay occupied by their keys, idle, free for new keys, and the counters of
    /// [`stats`](Self::stats) keep counting.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let api = KeyedRateLimiter::<str>::gcra(Quota::per_hour(2).unwrap(), 1_000).unwrap();
    /// for key in ["alice", "bob"] {
    ///     api.check_key_n(key, 2).unwrap();
    ///     assert!(api.check_key(key).is_err());
    /// }
    /// api.reset();
    /// assert_eq!(api.peek_key("alice").remaining(), 2);
    /// assert_eq!(api.peek_key("bob").remaining(), 2);
    /// ```
    pub fn reset(&self) {
        self.table.reset_all();
    }

    /// The table's counters: capacity, slots, occupied slots, reuses, evictions, overflows.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
    /// assert_eq!(l.stats().occupied, 0);
    /// ```
    #[must_use]
    pub fn stats(&self) -> KeyedStats {
        self.table.stats_snapshot()
    }

    /// Bytes of memory the limiter holds (the table and its headers); fixed at construction.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<String>::gcra(Quota::per_second(10).unwrap(), 1_000_000).unwrap();
    /// assert!(l.memory() <= 24 * 1_000_000);
    /// ```
    #[must_use]
    pub fn memory(&self) -> usize {
        self.table.memory() + core::mem::size_of::<Self>() - core::mem::size_of::<Table>()
    }

    /// The overflow policy.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Overflow, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
    /// assert_eq!(l.overflow(), Overflow::Deny);
    /// ```
    #[must_use]
    pub fn overflow(&self) -> Overflow {
        self.overflow
    }

    /// The algorithm every key runs (unless overridden per call, see
    /// [`check_key_with`](KeyedRateLimiter::check_key_with)).
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
    /// assert_eq!(l.algorithm().capacity(), 10);
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The clock.
    ///
    /// ```
    /// use tollgate::{Clock, Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .clock(ManualClock::new())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(l.clock().now().as_nanos(), 0);
    /// ```
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// [`peek_key`](Self::peek_key) under `algorithm`: the limiter's own, or a tier's for
    /// [`KeyedDifferential`](crate::reference::KeyedDifferential), whose keys may each have their
    /// own algorithm.
    pub(crate) fn peek_key_as<Q, B>(&self, key: &Q, algorithm: &B) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
        B: Algorithm,
    {
        let probe = self.probe(key);
        let now = self.clock.now();
        algorithm.decide(self.table.state(&probe), now, 0).0
    }

    /// The cheap path: one clock read, one lookup, one compare-and-swap loop.
    #[inline]
    fn apply<B: Algorithm>(&self, algorithm: &B, probe: &Probe, cost: u64) -> Result<(), Denied> {
        self.apply_at(algorithm, probe, cost, self.clock.now())
    }

    #[inline]
    fn apply_at<B: Algorithm>(
        &self,
        algorithm: &B,
        probe: &Probe,
        cost: u64,
        now: Nanos,
    ) -> Result<(), Denied> {
        let step = |state| match algorithm.transition(state, now, cost) {
            Transition::Allow { state } => (Ok(()), state),
            Transition::Deny { retry_after } => (Err(Denied::new(retry_after)), state),
        };
        // The request is decided by `algorithm` (a tier's quota, for `check_key_with`), but the
        // entries a new key may displace are judged by the limiter's own and by the tiers the
        // table has learned (`Table::learn_tier`), as the tiers' docs promise: the request's
        // quota says nothing about the other keys' tiers.
        match self
            .table
            .update(probe, &self.algorithm, now, self.overflow, step)
        {
            Ok(outcome) => outcome,
            Err(Overflowed { fresh, .. }) if self.overflow == Overflow::Allow => fresh,
            Err(Overflowed { retry_after, .. }) => Err(Denied::new(retry_after)),
        }
    }

    #[inline]
    fn decide_with<B: Algorithm>(
        &self,
        algorithm: &B,
        probe: &Probe,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        self.decide_at(algorithm, probe, cost, self.clock.now())
    }

    #[inline]
    fn decide_at<B: Algorithm>(
        &self,
        algorithm: &B,
        probe: &Probe,
        cost: u64,
        now: Nanos,
    ) -> Result<Decision, InsufficientCapacity> {
        let capacity = algorithm.capacity();
        InsufficientCapacity::check(cost, capacity)?;
        let step = |state| algorithm.decide(state, now, cost);
        // Entries are judged by the limiter's own algorithm, as in `apply_at`.
        Ok(
            match self
                .table
                .update(probe, &self.algorithm, now, self.overflow, step)
            {
                Ok(decision) => decision,
                Err(Overflowed { fresh, .. }) if self.overflow == Overflow::Allow => fresh,
                Err(Overflowed { retry_after, .. }) => Decision::no_room(retry_after, capacity),
            },
        )
    }
}

impl<K: ?Sized, A, C, S: BuildHasher> KeyedRateLimiter<K, A, C, S> {
    /// Starts fetching the table lines that hold `key`'s state and returns at once, changing
    /// nothing: a hint, for a server that knows a request's key some time before it checks it
    /// (the client's address when the connection is accepted, an API key once the headers are
    /// read). Over a table larger than the caches, a check waits about one memory latency for
    /// its lines; called first, this lets the fetch overlap whatever the server does in between,
    /// and the check finds its lines in cache or on their way. Over a table that fits in the
    /// caches there is little to overlap, and it saves little.
    ///
    /// The check hashes the key again (a few nanoseconds for a short key). For keys that arrive
    /// together, [`check_keys`](Self::check_keys) overlaps their fetches itself.
    ///
    /// The hint is the CPU's prefetch instruction, on x86-64 and AArch64; on other targets stable
    /// Rust has none to call, and this does nothing.
    ///
    /// ```
    /// use std::net::IpAddr;
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let per_ip = KeyedRateLimiter::<IpAddr>::gcra(Quota::per_second(10).unwrap(), 100_000).unwrap();
    /// let client: IpAddr = "192.0.2.1".parse().unwrap();
    /// per_ip.prefetch_key(&client); // on accept
    /// assert_eq!(per_ip.stats().occupied, 0); // a hint: nothing is decided or inserted
    /// // ... read and parse the request ...
    /// assert!(per_ip.check_key(&client).is_ok());
    /// ```
    #[inline]
    pub fn prefetch_key<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.probe(key);
    }

    /// Where `key` lives in the table (its one hash, turned into tag, shard, groups and starts),
    /// with the table lines it can be in already requested.
    ///
    /// Every check asks for its lines before it reads the clock: the fetches (one memory latency
    /// when the table is larger than the caches) then overlap the clock read and the rest of
    /// the set-up instead of following them. In a development run, `check_key` over a million
    /// keys went from about 174 ns to 110 ns with it.
    #[inline]
    fn probe<Q>(&self, key: &Q) -> Probe
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        let probe = self.table.probe(self.hasher.hash_one(key));
        self.table.prefetch(&probe);
        probe
    }
}

/// Tiers: a per-call quota for keys of a GCRA table. GCRA's state (the theoretical arrival time)
/// means the same under any quota, so one table can hold free and premium keys side by side, each
/// decided with its own quota, and an idle key is idle under every quota.
impl<K: ?Sized, C: Clock, S: BuildHasher> KeyedRateLimiter<K, Gcra, C, S> {
    /// Admits a request of `cost` for `key` under `quota` instead of the limiter's own.
    ///
    /// Use one quota per key consistently: switching a key between quotas is well defined (its
    /// schedule is judged by the new quota's interval and burst from then on) but is not the
    /// same as a key that always had the new quota.
    ///
    /// Whether a slot is idle, and how long until it is, do not depend on the quota: reuse, and
    /// the `retry_after` of an overflow, are exact for every tier. One judgement does need a
    /// quota, which a slot cannot tell: whether an entry is being limited, which
    /// [`Overflow::EvictLeastConstrained`] must know to spare it. So the table judges every entry
    /// by the strictest quota it knows: its own and every one that a request has been decided
    /// with, from that request on. An entry is spared while its schedule runs further ahead of
    /// the clock than the least time any of them leaves after one request
    /// ([`tolerance`](Quota::tolerance) minus [`emission_interval`](Quota::emission_interval): 54 s
    /// for 10 per minute, 5.94 s for 1 000 per minute with bursts of 100). No key that its own
    /// tier is limiting is ever evicted, whichever tier the limiter itself is given; the price is
    /// that a key of a lenient tier may be spared although it still has requests left. A quota
    /// used once keeps judging for the limiter's life.
    ///
    /// Requests that come in batches, each with its key's tier, go through
    /// [`decide_keys_with`](Self::decide_keys_with).
    ///
    /// # Errors
    ///
    /// As for [`check_key_n`](KeyedRateLimiter::check_key_n), against `quota`'s burst. A request
    /// refused as [`CheckError::InsufficientCapacity`] is not decided, and the table does not
    /// learn its quota.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    ///
    /// // Free keys under the limiter's own quota, premium keys with `check_key_with`.
    /// let free = Quota::per_minute(10).unwrap();
    /// let premium = Gcra::from(Quota::per_minute(1_000).unwrap());
    /// let limiter = KeyedRateLimiter::<str>::gcra(free, 10_000).unwrap();
    ///
    /// assert!(limiter.check_key_n("free-user", 10).is_ok());
    /// assert!(limiter.check_key("free-user").is_err());
    /// assert!(limiter.check_key_with("paying-user", &premium, 500).is_ok());
    /// ```
    #[inline]
    pub fn check_key_with<Q>(&self, key: &Q, quota: &Gcra, cost: u64) -> Result<(), CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        InsufficientCapacity::check(cost, quota.capacity())?;
        self.table.learn_tier(quota.room());
        Ok(self.apply(quota, &self.probe(key), cost)?)
    }

    /// Decides a request of `cost` for `key` under `quota` instead of the limiter's own. As for
    /// [`check_key_with`](Self::check_key_with), the table judges its entries by `quota` too
    /// from now on.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] if the cost exceeds `quota`'s burst; the request is not decided,
    /// and the table does not learn its quota.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    /// let limiter = KeyedRateLimiter::<u64>::gcra(Quota::per_second(1).unwrap(), 100).unwrap();
    /// let gold = Gcra::from(Quota::per_second(100).unwrap());
    /// assert_eq!(limiter.decide_key_with(&7, &gold, 10).unwrap().remaining(), 90);
    /// ```
    pub fn decide_key_with<Q>(
        &self,
        key: &Q,
        quota: &Gcra,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.decide_as_tier_at(quota, &self.probe(key), cost, self.clock.now())
    }

    /// [`decide_at`](Self::decide_at) under a tier's quota, which the table learns first: for
    /// `decide_key_with` and the batches of `decide_keys_with`.
    #[inline]
    fn decide_as_tier_at(
        &self,
        quota: &Gcra,
        probe: &Probe,
        cost: u64,
        now: Nanos,
    ) -> Result<Decision, InsufficientCapacity> {
        // Tested before the table learns the quota: a request that its tier can never admit is
        // not decided, and teaches the table nothing (as in `check_key_with`).
        InsufficientCapacity::check(cost, quota.capacity())?;
        self.table.learn_tier(quota.room());
        self.decide_at(quota, probe, cost, now)
    }
}

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> fmt::Debug
    for KeyedRateLimiter<K, A, C, S>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("algorithm", &self.algorithm)
            .field("overflow", &self.overflow)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
