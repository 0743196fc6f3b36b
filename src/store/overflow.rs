//! When a new key finds no room: the overflow policy, and the counters that report how full a
//! table is and how often it had to make room.

use crate::clock::Nanos;

/// What to do when a new key finds no room: its two groups in a keyed table (its shard in a
/// keyed sliding log) hold no empty or idle slot.
///
/// Whatever the policy, a key that is being limited right now keeps its state: a flood of new
/// keys cannot give it its quota back. A request that meets the policy is counted in
/// [`KeyedStats::overflows`] and its decision says so ([`Decision::is_overflow`]).
///
/// The default is [`EvictLeastConstrained`](Overflow::EvictLeastConstrained): under a flood of
/// new keys that each send a request or two (spoofed addresses, random API keys), `Deny` lets
/// the flood hold every slot and turns new legitimate clients away for as long as it lasts,
/// while eviction gives them the slot of a flood key that is not being limited
/// (`cargo run --release --example flood` measures both).
///
/// ```
/// use tollgate::{Gcra, KeyedRateLimiter, Overflow, Quota};
///
/// let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(10).unwrap()))
///     .capacity(100_000)
///     .overflow(Overflow::Deny)
///     .build()
///     .unwrap();
/// assert_eq!(limiter.overflow(), Overflow::Deny);
/// assert_eq!(Overflow::default(), Overflow::EvictLeastConstrained);
/// ```
///
/// Non-exhaustive: other policies may come (evicting the least recently used entry, say), so a
/// `match` on it needs a `_` arm.
///
/// [`Decision::is_overflow`]: crate::Decision::is_overflow
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Overflow {
    /// Deny the new key's request, with a `retry_after` of the time until a slot of its groups
    /// frees up: nothing is ever admitted that is not accounted for, and no key already in the
    /// table loses its state. A flood of new keys that fills the table then locks new
    /// legitimate clients out while it lasts.
    Deny,
    /// Admit the new key's request as if its state were fresh, without recording it (fail open).
    /// Keys that overflow are not limited at all while the table is full.
    Allow,
    /// Evict the least-constrained entry of the key's groups: among the keys that still have
    /// capacity (none that is being limited right now), the one closest to its reset. The evicted
    /// key starts fresh if it returns, so it may get back the part of its quota it had used.
    /// If every entry is being limited, deny. A slot that another new key is claiming at that
    /// moment is not evicted either (its key has no state yet to judge): with every other entry
    /// limited, the request is denied as if that one were too. In a table of tiers, each entry
    /// is judged by its own tier's quota ([`check_key_with`](crate::KeyedRateLimiter::check_key_with)
    /// has the rule). The default.
    #[default]
    EvictLeastConstrained,
}

/// A key's groups were full: the request could not be recorded.
pub(crate) struct Overflowed<T> {
    /// The outcome on the fresh state, for [`Overflow::Allow`].
    pub(crate) fresh: T,
    /// The time until a slot of the key's groups becomes idle, if nothing changes.
    pub(crate) retry_after: Nanos,
}

/// Counters of a keyed limiter's table: how full it is and how often it had to make room.
///
/// The counters are updated without synchronisation among themselves: they are exact when no
/// insert is in progress.
///
/// ```
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// let limiter = KeyedRateLimiter::<u64>::gcra(Quota::per_second(5).unwrap(), 1_000).unwrap();
/// limiter.check_key(&7).unwrap();
/// let stats = limiter.stats();
/// assert_eq!((stats.capacity, stats.occupied, stats.overflows), (1_000, 1, 0));
/// // 1 000 keys at a load of 0.68 need 1 471 slots: 184 groups of 8.
/// assert_eq!(stats.slots, 1_472);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KeyedStats {
    /// The capacity asked for, in keys.
    pub capacity: usize,
    /// Room allocated: 16-byte slots for a [`KeyedRateLimiter`](crate::KeyedRateLimiter) (a
    /// little more than `capacity / 0.68`), keys for a
    /// [`KeyedSlidingLog`](crate::KeyedSlidingLog) (`capacity`, and room in each shard for the
    /// uneven spread of keys over the shards).
    pub slots: usize,
    /// Keys held (live, or idle and not yet reused), plus, in a
    /// [`KeyedRateLimiter`](crate::KeyedRateLimiter), the slots that inserts in progress are
    /// claiming at this moment.
    pub occupied: usize,
    /// Idle keys whose room went to a new key. Counted when the room is taken: in a
    /// [`KeyedRateLimiter`](crate::KeyedRateLimiter), an insert that then finds its key
    /// inserted by another thread gives the slot back empty, but the idle key is gone all the
    /// same.
    pub reuses: u64,
    /// Live entries evicted under [`Overflow::EvictLeastConstrained`] (counted as `reuses` are).
    pub evictions: u64,
    /// Requests whose key found no slot (denied, allowed unrecorded, or handled by eviction
    /// when nothing could be evicted).
    pub overflows: u64,
}
