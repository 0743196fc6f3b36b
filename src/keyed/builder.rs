//! Configuring a keyed limiter: [`KeyedBuilder`].

use core::fmt;
use core::hash::BuildHasher;
use core::marker::PhantomData;

use super::{DefaultKeyHasher, KeyedRateLimiter, UNDECLARED};
use crate::algorithm::{sealed::Sealed, Algorithm, Gcra};
use crate::clock::{Clock, TscClock};
use crate::error::BuildError;
use crate::quota::Quota;
use crate::store::{Generations, Overflow, Table, CLASSES};

/// Configures a [`KeyedRateLimiter`] for keys of type `K`: capacity, overflow policy, clock and
/// hasher. [`KeyedRateLimiter::builder`] starts one; the key type is named there, as for the
/// limiter's other constructors.
///
/// ```
/// use tollgate::{KeyedRateLimiter, ManualClock, Overflow, Quota, SlidingWindow};
///
/// let limiter = KeyedRateLimiter::<u64>::builder(SlidingWindow::new(&Quota::per_minute(100).unwrap()).unwrap())
///     .capacity(50_000)
///     .overflow(Overflow::Deny)
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// assert_eq!(limiter.stats().capacity, 50_000);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct KeyedBuilder<K: ?Sized, A, C = TscClock, S = DefaultKeyHasher> {
    algorithm: A,
    /// Declared with [`tier`](KeyedBuilder::tier), in order, each once.
    tiers: Vec<Gcra>,
    clock: ClockChoice<C>,
    hasher: S,
    capacity: usize,
    overflow: Overflow,
    parallelism: Option<usize>,
    key: PhantomData<fn(&K)>,
}

// By hand, so that a key type need not be `Debug` for its builder to be: no key is stored.
impl<K: ?Sized, A: fmt::Debug, C: fmt::Debug, S: fmt::Debug> fmt::Debug
    for KeyedBuilder<K, A, C, S>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuilder")
            .field("algorithm", &self.algorithm)
            .field("tiers", &self.tiers)
            .field("clock", &self.clock)
            .field("hasher", &self.hasher)
            .field("capacity", &self.capacity)
            .field("overflow", &self.overflow)
            .field("parallelism", &self.parallelism)
            .finish()
    }
}

/// The clock a builder hands its limiter: the default one, made only by `build`, or the one it was
/// given. A builder that is given another clock never makes a [`TscClock`], which asks the CPU
/// about its time-stamp counter (`cpuid`, and the first time in a process a calibration against
/// the system clock): where that cannot run, as under Miri, a limiter on a
/// [`ManualClock`](crate::ManualClock) still can.
enum ClockChoice<C> {
    /// The builder's default, [`TscClock::new`]: a function, since only the default builder's `C`
    /// is [`TscClock`].
    Default(fn() -> C),
    Given(C),
}

impl<C: fmt::Debug> fmt::Debug for ClockChoice<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockChoice::Default(_) => write!(f, "{} (made by build)", core::any::type_name::<C>()),
            ClockChoice::Given(clock) => clock.fmt(f),
        }
    }
}

impl<K: ?Sized, A> KeyedBuilder<K, A> {
    pub(crate) fn new(algorithm: A) -> KeyedBuilder<K, A> {
        KeyedBuilder {
            algorithm,
            tiers: Vec::new(),
            clock: ClockChoice::Default(TscClock::new),
            hasher: DefaultKeyHasher::new(),
            capacity: Self::DEFAULT_CAPACITY,
            overflow: Overflow::default(),
            parallelism: None,
            key: PhantomData,
        }
    }
}

impl<K: ?Sized, A, C, S> KeyedBuilder<K, A, C, S> {
    /// The capacity of a builder that is not given one: 10 000 keys (about 237 kB).
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedBuilder, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(limiter.stats().capacity, KeyedBuilder::<u64, Gcra>::DEFAULT_CAPACITY);
    /// assert!(limiter.memory() < 240_000);
    /// ```
    pub const DEFAULT_CAPACITY: usize = 10_000;

    /// The number of simultaneously live keys the table is sized for.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .capacity(1_000_000)
    ///     .build()
    ///     .unwrap();
    /// assert!(l.memory() < 24_000_000);
    /// ```
    pub fn capacity(mut self, keys: usize) -> Self {
        self.capacity = keys;
        self
    }

    /// What to do when a new key finds no room (default [`Overflow::EvictLeastConstrained`]).
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Overflow, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .overflow(Overflow::Allow)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(l.overflow(), Overflow::Allow);
    /// ```
    pub fn overflow(mut self, policy: Overflow) -> Self {
        self.overflow = policy;
        self
    }

    /// The clock (default [`TscClock`], made by [`build`](Self::build) only if no other clock
    /// is given).
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let l = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// # let _ = l;
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> KeyedBuilder<K, A, C2, S> {
        KeyedBuilder {
            algorithm: self.algorithm,
            tiers: self.tiers,
            clock: ClockChoice::Given(clock),
            hasher: self.hasher,
            capacity: self.capacity,
            overflow: self.overflow,
            parallelism: self.parallelism,
            key: PhantomData,
        }
    }

    /// The hasher (default: ahash seeded at random). A fixed hasher makes slot placement
    /// reproducible, for tests; never use a predictable one where clients choose their keys.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    /// let seeded = ahash::RandomState::with_seeds(1, 2, 3, 4);
    /// let l = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .hasher(seeded)
    ///     .build()
    ///     .unwrap();
    /// # let _ = l;
    /// ```
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> KeyedBuilder<K, A, C, S2> {
        KeyedBuilder {
            algorithm: self.algorithm,
            tiers: self.tiers,
            clock: self.clock,
            hasher,
            capacity: self.capacity,
            overflow: self.overflow,
            parallelism: self.parallelism,
            key: PhantomData,
        }
    }

    /// How many threads will use the limiter (default: the machine's parallelism): the table's
    /// counters are split into about four shards per thread, as far as the table has room for
    /// them (a shard spans at least 16 KiB of slots, 32 KiB on s390x with its 256-byte cache
    /// lines, so that the shards' headers never take a table of 2 000 keys or more past 24 bytes
    /// per key). Any count is accepted; 0 counts as 1.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
    ///     .threads(1)
    ///     .build()
    ///     .unwrap();
    /// # let _ = l;
    /// ```
    pub fn threads(mut self, threads: usize) -> Self {
        self.parallelism = Some(threads);
        self
    }

    /// The configuration, taken apart for a store's `build` (the tiers are the keyed table's).
    pub(crate) fn into_parts(self) -> (A, C, S, usize, Overflow, usize) {
        let parallelism = self
            .parallelism
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let clock = match self.clock {
            ClockChoice::Default(make) => make(),
            ClockChoice::Given(clock) => clock,
        };
        (
            self.algorithm,
            clock,
            self.hasher,
            self.capacity,
            self.overflow,
            parallelism,
        )
    }
}

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> KeyedBuilder<K, A, C, S> {
    /// Builds the limiter, allocating its whole table.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for a capacity of 0 or one whose table cannot be allocated, or more tiers
    /// than a table can tell apart.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(1).unwrap())).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn build(mut self) -> Result<KeyedRateLimiter<K, A, C, S>, BuildError> {
        let tiers = core::mem::take(&mut self.tiers).into_boxed_slice();
        if tiers.len() > BuildError::MAX_TIERS {
            return Err(BuildError::TooManyTiers { tiers: tiers.len() });
        }
        let (algorithm, clock, hasher, capacity, overflow, parallelism) = self.into_parts();
        // Each class of entry is judged by its quota's room: the limiter's own, each tier's, and
        // for quotas the table was not told of, none (every live entry is being limited).
        let mut rooms = [0; CLASSES];
        rooms[0] = algorithm.room();
        for (room, tier) in rooms[1..].iter_mut().zip(tiers.iter()) {
            *room = Sealed::room(tier);
        }
        debug_assert_eq!(rooms[UNDECLARED], 0);
        Ok(KeyedRateLimiter {
            table: Table::new(capacity, parallelism, rooms)?,
            quotas: Generations::new(algorithm),
            tiers,
            clock,
            hasher,
            overflow,
            key: PhantomData,
        })
    }
}

/// Tiers: per-call quotas for the keys of a GCRA table.
impl<K: ?Sized, C, S> KeyedBuilder<K, Gcra, C, S> {
    /// Declares a tier: a quota that requests of some keys are decided with instead of the
    /// limiter's own ([`check_key_with`](KeyedRateLimiter::check_key_with)). A table tells up to
    /// six tiers apart besides its own quota; declaring one lets
    /// [`Overflow::EvictLeastConstrained`] judge its keys by their own quota, so that one of its
    /// keys with room left can be evicted, and one it is limiting never is. A quota declared
    /// twice, or the limiter's own, counts once.
    ///
    /// ```
    /// use tollgate::{BuildError, Gcra, KeyedRateLimiter, Quota};
    ///
    /// let free = Quota::per_minute(10).unwrap();
    /// let pro = Quota::per_minute(100).unwrap();
    /// let enterprise = Quota::per_minute(10_000).unwrap().with_burst(500).unwrap();
    /// let limiter = KeyedRateLimiter::<str>::builder(Gcra::from(free))
    ///     .tier(pro)
    ///     .tier(enterprise)
    ///     .build()
    ///     .unwrap();
    /// assert!(limiter.check_key_with("acme", &enterprise, 500).is_ok());
    ///
    /// // Seven tiers are more than a table tells apart.
    /// let seven = (2..9).fold(KeyedRateLimiter::<str>::builder(Gcra::from(free)), |b, n| {
    ///     b.tier(Quota::per_minute(n * 10).unwrap())
    /// });
    /// assert_eq!(seven.build().unwrap_err(), BuildError::TooManyTiers { tiers: 7 });
    /// ```
    pub fn tier(mut self, quota: Quota) -> Self {
        let tier = Gcra::new(&quota);
        if tier != self.algorithm && !self.tiers.contains(&tier) {
            self.tiers.push(tier);
        }
        self
    }
}
