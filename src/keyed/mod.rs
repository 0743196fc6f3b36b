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
// `batch.rs`, reservations in `reserve.rs`; the table is `store::Table`.
mod batch;
mod builder;
mod reserve;
mod snapshot;

pub use batch::{CheckKeys, DecideKeys, DecideKeysWith};
pub use builder::KeyedBuilder;

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;

use crate::algorithm::{Algorithm, FixedWindow, Gcra, SlidingWindow, Transition};
use crate::clock::{Clock, Nanos, TscClock};
use crate::decision::{CheckError, Decision, Denied, InsufficientCapacity};
use crate::error::BuildError;
use crate::quota::Quota;
use crate::store::{Current, Generations, KeyedStats, Overflow, Overflowed, Probe, Table, CLASSES};

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
/// Keys are hashed once (ahash, seeded at random per limiter); the hash is the key's identity,
/// and the key itself is never stored, so every key type costs the same 16-byte slot.
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
/// level (`tests/flood.rs`); when a key's two probe groups are full of live keys, its
/// [`Overflow`] policy applies.
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
/// Keys beyond it meet the [`Overflow`] policy, counted in [`stats`](Self::stats) and marked in
/// their decisions ([`Decision::is_overflow`], [`Denied::is_overflow`]): a server that sees them
/// under normal traffic needs a larger table; a burst of them is a flood of new keys, which the
/// default policy, [`Overflow::EvictLeastConstrained`], absorbs by evicting keys that still
/// have room, never one that is being limited.
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
/// Two keys whose hashes are equal share one state. Among `n` live keys the chance that any two
/// collide is about `n² / 2^65`: one in 37 million for a million keys, one in 370 000 for ten
/// million. (A slot keeps five bits of the hash for the entry's tier and generation; they are
/// the shard's own bits in a table of 32 shards or more, which a table of about 22 000 keys or
/// more has when built for eight threads or more. A table of fewer shards tells keys apart by 59
/// to 63 bits: at most `n² / 2^60`, one in 1.2 million for a million keys; built for two
/// threads, with 8 shards, `n² / 2^63`.) Hashes are seeded at random per limiter, so collisions cannot be
/// aimed, and a collision only merges two keys' limits (each sees the other's requests), it
/// never frees one.
///
/// # Consistency
///
/// Each key's decisions are linearizable, exactly as for a [`RateLimiter`](crate::RateLimiter):
/// one slot per key at any time, updated by compare-and-swap of the whole `(tag, state)` word.
/// When a key's slot is reused by another key, the key's state was equivalent to fresh at the
/// reusing thread's clock reading; a request for the key whose own reading is older than that
/// (a thread preempted between its clock read and its lookup) is then decided as for a fresh key.
/// A change of quota ([`set_quota`](Self::set_quota)) takes a place in each key's order as one
/// more decision: the key's conversion.
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
    /// The algorithm every key runs, generation by generation (see
    /// [`set_quota`](KeyedRateLimiter::set_quota)).
    quotas: Generations<A>,
    /// The tiers declared with [`KeyedBuilder::tier`]: the entries of tier `i` are of class
    /// `i + 1` in the table (class 0 is the limiter's own quota, [`UNDECLARED`] any other).
    tiers: Box<[Gcra]>,
    clock: C,
    hasher: S,
    overflow: Overflow,
    key: PhantomData<fn(&K)>,
}

/// The class of an entry last admitted under a quota that is neither the limiter's own nor a
/// declared tier: the table knows no room for it, and spares it from eviction while it is live.
const UNDECLARED: usize = CLASSES - 1;

// The three constructors with the defaults, and `builder`, all live on the defaults' type, so
// that each call names the key type alone: `KeyedRateLimiter::<str>::sliding_window(..)`,
// `KeyedRateLimiter::<u64>::builder(..)`, and the builder carries it to `build`. On
// `KeyedRateLimiter<K, SlidingWindow>` that call would not compile (a path that names only `K`
// takes the default algorithm, GCRA) and would need `KeyedRateLimiter::<str, _>`.
impl<K: ?Sized> KeyedRateLimiter<K> {
    /// A GCRA limiter per key for `quota`, sized for `capacity` live keys, with the defaults
    /// (random ahash, [`TscClock`], [`Overflow::EvictLeastConstrained`]).
    ///
    /// # Errors
    ///
    /// [`BuildError`] for a capacity of 0 or one whose table cannot be allocated.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 1_000).unwrap();
    /// assert!(l.check_key(&1).is_ok());
    /// ```
    pub fn gcra(quota: Quota, capacity: usize) -> Result<KeyedRateLimiter<K>, BuildError> {
        KeyedRateLimiter::builder(Gcra::new(&quota))
            .capacity(capacity)
            .build()
    }

    /// A sliding-window counter per key; see [`KeyedRateLimiter::gcra`].
    ///
    /// # Errors
    ///
    /// [`BuildError`]: the quota does not fit the sliding window's word, or the capacity cannot
    /// be allocated.
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
    ) -> Result<KeyedRateLimiter<K, SlidingWindow>, BuildError> {
        KeyedRateLimiter::builder(SlidingWindow::new(&quota)?)
            .capacity(capacity)
            .build()
    }

    /// A fixed-window counter per key; see [`KeyedRateLimiter::gcra`].
    ///
    /// # Errors
    ///
    /// [`BuildError`]: the quota does not fit the fixed window's word, or the capacity cannot be
    /// allocated.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u32>::fixed_window(Quota::per_second(2).unwrap(), 100).unwrap();
    /// assert!(l.check_key_n(&9, 2).is_ok());
    /// ```
    pub fn fixed_window(
        quota: Quota,
        capacity: usize,
    ) -> Result<KeyedRateLimiter<K, FixedWindow>, BuildError> {
        KeyedRateLimiter::builder(FixedWindow::new(&quota)?)
            .capacity(capacity)
            .build()
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
    /// [`Denied`] if the key is over its limit, or if it is new and found no room (nothing could
    /// be evicted, or the policy is [`Overflow::Deny`]): then [`Denied::is_overflow`] says so.
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
        let probe = self.probe(key);
        self.apply_at(&self.quotas.load(), own, &probe, 1, self.clock.now())
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
        let probe = self.probe(key);
        let current = self.quotas.load();
        InsufficientCapacity::check(cost, current.algorithm.capacity())?;
        Ok(self.apply_at(&current, own, &probe, cost, self.clock.now())?)
    }

    /// Decides a request of `cost` for `key` and reports everything about it. A cost of 0 is
    /// always admitted, changes nothing and never inserts the key.
    ///
    /// A new key that finds no room (nothing could be evicted, or the policy is
    /// [`Overflow::Deny`]) is denied with `remaining` 0, and a `retry_after` and a `reset_after`
    /// of the time until a slot of its groups becomes idle (when it can have its whole
    /// capacity); under [`Overflow::Allow`] it gets the decision a fresh key would get,
    /// unrecorded. Either way the decision [`is_overflow`](Decision::is_overflow).
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
        let probe = self.probe(key);
        self.decide_at(&self.quotas.load(), own, &probe, cost, self.clock.now())
    }

    /// Whether one request for `key` would be admitted now, and if not, when it would be,
    /// without changing anything or inserting the key: [`peek_key_n`](Self::peek_key_n) for a
    /// cost of 1.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(10).unwrap()))
    ///     .clock(ManualClock::new())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(l.peek_key(&1).remaining(), 10);
    /// assert_eq!(l.stats().occupied, 0); // a peek never inserts
    /// l.check_key_n(&1, 10).unwrap();
    /// let peek = l.peek_key(&1);
    /// assert!(!peek.is_allowed());
    /// assert_eq!(peek.retry_after(), Duration::from_millis(100));
    /// ```
    pub fn peek_key<Q>(&self, key: &Q) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        self.peek_key_as(key, own, 1)
    }

    /// Whether a request of `cost` for `key` would be admitted now, and if not, when it would
    /// be, without changing anything or inserting the key. The decision's
    /// [`is_allowed`](Decision::is_allowed) and [`retry_after`](Decision::retry_after) are the
    /// request's; [`remaining`](Decision::remaining) and [`reset_after`](Decision::reset_after)
    /// describe the key's state as it stands, since nothing is consumed. A key that is not in
    /// the table is peeked at as a new key (whether it would find room is not checked).
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] if the cost exceeds the capacity and can never fit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_minute(6).unwrap()))
    ///     .clock(ManualClock::new())
    ///     .build()
    ///     .unwrap();
    /// l.check_key_n("alice", 4).unwrap();
    /// assert!(l.peek_key_n("alice", 2).unwrap().is_allowed());
    /// let peek = l.peek_key_n("alice", 3).unwrap();
    /// assert!(!peek.is_allowed());
    /// assert_eq!(peek.remaining(), 2);
    /// assert_eq!(peek.retry_after(), Duration::from_secs(10)); // one more every 10 s
    /// assert!(l.peek_key_n("alice", 7).is_err());
    /// ```
    pub fn peek_key_n<Q>(&self, key: &Q, cost: u64) -> Result<Decision, InsufficientCapacity>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        InsufficientCapacity::check(cost, self.algorithm().capacity())?;
        Ok(self.peek_key_as(key, own, cost))
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

    /// Changes every key's quota while the limiter runs, without a lock on the decision path
    /// and without losing what the keys have been admitted.
    ///
    /// Each key carries over its room as a [`RateLimiter`](crate::RateLimiter) does
    /// ([`RateLimiter::set_quota`](crate::RateLimiter::set_quota); the exact rules are
    /// [`Algorithm::carry_over`]'s): the requests it would still admit, capped at the new burst
    /// (or limit). So tightening takes effect at once for every key, and loosening grants no
    /// key a burst by itself: a key that has used some of its room refills it at the new rate
    /// from where it was. A key with nothing used (idle: fresh, or back to fresh) is a new
    /// key under the new quota, exactly as a key the table does not hold is. Entries of a
    /// tier ([`check_key_with`](Self::check_key_with)) keep their schedules, since their
    /// quota has not changed.
    ///
    /// The call converts every entry of the table (a walk over its slots, about 10 ms for a
    /// million keys: `cargo bench --bench keyed -- set_quota`) and returns when all are
    /// converted. Decisions keep running
    /// meanwhile: each key's decisions racing the change are made either before its
    /// conversion, with the old quota, or after it, with the new one, never with one quota on
    /// the other's state (a decision that meets a key not yet converted converts it itself).
    /// Changes are made one at a time: a second waits for the first's walk. A
    /// [`Reservation`](crate::Reservation) made before the change still proceeds at its time,
    /// but its cancel gives nothing back (its hold was converted with the rest). Setting the
    /// quota in force changes nothing.
    ///
    /// An entry's slot remembers its generation in two bits, so the guarantee above holds for
    /// any decision that does not stall, mid-way, across four changes of the quota.
    ///
    /// # Errors
    ///
    /// [`BuildError::Quota`] if the algorithm cannot take `quota` (a window's limit that does
    /// not fit its packed word); the limiter is unchanged.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let per_user = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(100).unwrap()))
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// per_user.check_key_n("alice", 40).unwrap(); // 60 left
    /// per_user.check_key_n("bob", 95).unwrap(); // 5 left
    ///
    /// // Tightening: at most the new burst is left.
    /// per_user.set_quota(Quota::per_second(10).unwrap()).unwrap();
    /// assert_eq!(per_user.peek_key("alice").remaining(), 10);
    /// assert_eq!(per_user.peek_key("bob").remaining(), 5);
    ///
    /// // Loosening: what was left stays, the new rate refills it; a new key has the new burst.
    /// per_user.set_quota(Quota::per_second(1_000).unwrap()).unwrap();
    /// assert_eq!(per_user.peek_key("bob").remaining(), 5);
    /// clock.advance(Duration::from_millis(10));
    /// assert_eq!(per_user.peek_key("bob").remaining(), 15);
    /// assert_eq!(per_user.peek_key("carol").remaining(), 1_000);
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), BuildError> {
        self.reconfigure(A::for_quota(&quota)?);
        Ok(())
    }

    /// Changes the algorithm's parameters while the limiter runs: [`set_quota`] with an
    /// algorithm built already.
    ///
    /// [`set_quota`]: KeyedRateLimiter::set_quota
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota, SlidingWindow};
    ///
    /// let per_user = KeyedRateLimiter::<u64>::sliding_window(Quota::per_minute(60).unwrap(), 100)
    ///     .unwrap();
    /// per_user.reconfigure(SlidingWindow::new(&Quota::per_minute(600).unwrap()).unwrap());
    /// assert_eq!(per_user.algorithm().capacity(), 600);
    /// ```
    pub fn reconfigure(&self, algorithm: A) {
        let convert = |current| self.table.convert_all(&self.quotas, &current);
        self.quotas
            .reconfigure(algorithm, || self.clock.now(), convert);
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

    /// Bytes of memory the limiter holds (the table, its headers and its tiers): fixed at
    /// construction, but for the 80 bytes that the first [`set_quota`](Self::set_quota)
    /// allocates.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<String>::gcra(Quota::per_second(10).unwrap(), 1_000_000).unwrap();
    /// assert!(l.memory() <= 24 * 1_000_000);
    /// ```
    #[must_use]
    pub fn memory(&self) -> usize {
        self.table.memory() + core::mem::size_of::<Self>() - core::mem::size_of::<Table>()
            + core::mem::size_of_val(&*self.tiers)
            + self.quotas.memory()
    }

    /// The overflow policy.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Overflow, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
    /// assert_eq!(l.overflow(), Overflow::EvictLeastConstrained);
    /// ```
    #[must_use]
    pub fn overflow(&self) -> Overflow {
        self.overflow
    }

    /// The algorithm every key runs (unless overridden per call, see
    /// [`check_key_with`](KeyedRateLimiter::check_key_with)): the one the limiter was built
    /// with, or the last [`set_quota`](Self::set_quota) gave it.
    ///
    /// ```
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
    /// assert_eq!(l.algorithm().capacity(), 10);
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> A {
        self.quotas.load().algorithm
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

    /// [`peek_key_n`](Self::peek_key_n) under the algorithm `pick` makes of the limiter's own
    /// (its own, or a tier's).
    pub(crate) fn peek_key_as<Q, B>(&self, key: &Q, pick: impl Fn(&A) -> B, cost: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
        B: Algorithm,
    {
        let probe = self.probe(key);
        let now = self.clock.now();
        let (state, current) = self.table.state(&probe, &self.quotas);
        crate::algorithm::peek(&pick(&current.algorithm), state, now, cost)
    }

    /// The cheap path: one lookup, one compare-and-swap loop, deciding with the algorithm `pick`
    /// makes of the limiter's own in `current` (or in a later generation, if a reconfiguration
    /// overtakes the decision).
    #[inline]
    fn apply_at<B: Algorithm>(
        &self,
        current: &Current<A>,
        pick: impl Fn(&A) -> B,
        probe: &Probe,
        cost: u64,
        now: Nanos,
    ) -> Result<(), Denied> {
        let step = |state, current: &Current<A>| match pick(&current.algorithm)
            .transition(state, now, cost)
        {
            Transition::Allow { state } => (Ok(()), state),
            Transition::Deny { retry_after } => (Err(Denied::new(retry_after)), state),
        };
        // The request is decided by `pick`'s algorithm (a tier's quota, for `check_key_with`),
        // but the entries a new key may displace are judged by the limiter's own: for GCRA,
        // each by the room of its own class.
        match self
            .table
            .update(probe, &self.quotas, *current, now, self.overflow, step)
        {
            Ok(outcome) => outcome,
            Err(Overflowed { fresh, .. }) if self.overflow == Overflow::Allow => fresh,
            Err(Overflowed { retry_after, .. }) => Err(Denied::no_room(retry_after)),
        }
    }

    #[inline]
    fn decide_at<B: Algorithm>(
        &self,
        current: &Current<A>,
        pick: impl Fn(&A) -> B,
        probe: &Probe,
        cost: u64,
        now: Nanos,
    ) -> Result<Decision, InsufficientCapacity> {
        let capacity = pick(&current.algorithm).capacity();
        InsufficientCapacity::check(cost, capacity)?;
        let step = |state, current: &Current<A>| pick(&current.algorithm).decide(state, now, cost);
        // Entries are judged by the limiter's own algorithm, as in `apply_at`.
        Ok(
            match self
                .table
                .update(probe, &self.quotas, *current, now, self.overflow, step)
            {
                Ok(decision) => decision,
                Err(Overflowed { fresh, .. }) if self.overflow == Overflow::Allow => {
                    fresh.overflowed()
                }
                Err(Overflowed { retry_after, .. }) => Decision::no_room(retry_after, capacity),
            },
        )
    }

    /// The generations of the algorithm, for the layers of an all-or-nothing check.
    #[inline]
    pub(crate) fn quotas(&self) -> &Generations<A> {
        &self.quotas
    }
}

/// The limiter's own algorithm, as a request under it decides with it.
#[inline]
fn own<A: Copy>(algorithm: &A) -> A {
    *algorithm
}

impl<K: ?Sized, A, C, S> KeyedRateLimiter<K, A, C, S> {
    /// The table, for the layers of an all-or-nothing check.
    #[inline]
    pub(crate) fn table(&self) -> &Table {
        &self.table
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
    /// the set-up instead of following them: over a million keys, a check takes about two
    /// thirds of the time it took when the lines were requested after the clock read.
    #[inline]
    pub(crate) fn probe<Q>(&self, key: &Q) -> Probe
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
    /// Admits a request of `cost` for `key` under `quota` instead of the limiter's own: for a
    /// table of tiers, free and premium keys side by side.
    ///
    /// Declare the tiers when building the limiter ([`KeyedBuilder::tier`]). Each entry then
    /// carries its tier in its slot (in the top bits of its tag), and
    /// [`Overflow::EvictLeastConstrained`] judges it by its own tier's quota: an entry that its
    /// tier is limiting is never evicted, and one that still has room under its tier may be.
    /// A quota that is not declared decides just as exactly, but the table does not know its
    /// room, so its entries are never evicted while they are live. Neither changes how any other
    /// key is judged.
    ///
    /// Use one quota per key consistently: switching a key between quotas is well defined (its
    /// schedule is judged by the new quota's interval and burst from then on, and its entry by
    /// the tier of its latest admission) but is not the same as a key that always had the new
    /// quota.
    ///
    /// Requests that come in batches, each with its key's tier, go through
    /// [`decide_keys_with`](Self::decide_keys_with).
    ///
    /// # Errors
    ///
    /// As for [`check_key_n`](KeyedRateLimiter::check_key_n), against `quota`'s burst.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    ///
    /// // Free keys under the limiter's own quota, premium keys with `check_key_with`.
    /// let free = Quota::per_minute(10).unwrap();
    /// let premium = Quota::per_minute(1_000).unwrap();
    /// let limiter = KeyedRateLimiter::<str>::builder(Gcra::from(free))
    ///     .tier(premium)
    ///     .capacity(10_000)
    ///     .build()
    ///     .unwrap();
    ///
    /// assert!(limiter.check_key_n("free-user", 10).is_ok());
    /// assert!(limiter.check_key("free-user").is_err());
    /// assert!(limiter.check_key_with("paying-user", &premium, 500).is_ok());
    /// ```
    #[inline]
    pub fn check_key_with<Q>(&self, key: &Q, quota: &Quota, cost: u64) -> Result<(), CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        let probe = self.probe(key);
        let current = self.quotas.load();
        let (tier, class) = self.tier(quota, &current);
        InsufficientCapacity::check(cost, tier.capacity())?;
        let probe = probe.with_class(class);
        Ok(self.apply_at(&current, move |_| tier, &probe, cost, self.clock.now())?)
    }

    /// Decides a request of `cost` for `key` under `quota` instead of the limiter's own, with
    /// everything about it: [`decide_key`](Self::decide_key) for a table of tiers (see
    /// [`check_key_with`](Self::check_key_with) for how tiers are judged).
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] if the cost exceeds `quota`'s burst.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    /// let gold = Quota::per_second(100).unwrap();
    /// let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .tier(gold)
    ///     .capacity(100)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(limiter.decide_key_with(&7, &gold, 10).unwrap().remaining(), 90);
    /// ```
    pub fn decide_key_with<Q>(
        &self,
        key: &Q,
        quota: &Quota,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        let probe = self.probe(key);
        let current = self.quotas.load();
        let (tier, class) = self.tier(quota, &current);
        let probe = probe.with_class(class);
        self.decide_at(&current, move |_| tier, &probe, cost, self.clock.now())
    }

    /// [`peek_key_n`](Self::peek_key_n) under `quota` instead of the limiter's own.
    ///
    /// # Errors
    ///
    /// [`InsufficientCapacity`] if the cost exceeds `quota`'s burst.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let limiter = KeyedRateLimiter::<u64>::gcra(Quota::per_second(1).unwrap(), 100).unwrap();
    /// let gold = Quota::per_second(100).unwrap();
    /// limiter.check_key_with(&7, &gold, 60).unwrap();
    /// assert_eq!(limiter.peek_key_with(&7, &gold, 40).unwrap().remaining(), 40);
    /// assert!(!limiter.peek_key_with(&7, &gold, 41).unwrap().is_allowed());
    /// ```
    pub fn peek_key_with<Q>(
        &self,
        key: &Q,
        quota: &Quota,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        let tier = Gcra::new(quota);
        InsufficientCapacity::check(cost, tier.capacity())?;
        Ok(self.peek_key_as(key, move |_| tier, cost))
    }

    /// The algorithm for requests under `quota`, and the class of the entries they admit,
    /// beside the limiter's own quota in `current`.
    #[inline]
    fn tier(&self, quota: &Quota, current: &Current<Gcra>) -> (Gcra, usize) {
        let tier = Gcra::new(quota);
        (tier, self.class_of(&tier, current))
    }

    /// The class of the entries that requests under `tier` admit: 0 for the limiter's own
    /// quota, `i + 1` for its tier `i`, [`UNDECLARED`] for any other.
    #[inline]
    fn class_of(&self, tier: &Gcra, current: &Current<Gcra>) -> usize {
        if *tier == current.algorithm {
            return 0;
        }
        match self.tiers.iter().position(|declared| declared == tier) {
            Some(i) => i + 1,
            None => UNDECLARED,
        }
    }

    /// [`decide_key_with`](Self::decide_key_with) for a request already hashed (`probe`, of
    /// class 0), at a given time and in the generation `current`: for the batches of
    /// `decide_keys_with`.
    #[inline]
    fn decide_as_tier_at(
        &self,
        current: Current<Gcra>,
        tier: Gcra,
        probe: &Probe,
        cost: u64,
        now: Nanos,
    ) -> Result<Decision, InsufficientCapacity> {
        let probe = probe.with_class(self.class_of(&tier, &current));
        self.decide_at(&current, move |_| tier, &probe, cost, now)
    }
}

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> fmt::Debug
    for KeyedRateLimiter<K, A, C, S>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("algorithm", &self.algorithm())
            .field("overflow", &self.overflow)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
