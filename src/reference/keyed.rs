//! [`KeyedDifferential`]: a keyed limiter beside one direct limiter per key it should hold.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::Mismatch;
use crate::algorithm::{Algorithm, Gcra};
use crate::clock::{Clock, Nanos};
use crate::decision::{Decision, InsufficientCapacity};
use crate::keyed::KeyedRateLimiter;
use crate::limiter::RateLimiter;
use crate::quota::Quota;
use crate::store::Overflow;

/// Replays requests through a [`KeyedRateLimiter`] and, beside it, through one direct
/// [`RateLimiter`] per key that the table should remember, and checks after every request that
/// the table forgets, mixes up and evicts nothing that it may not, under any
/// [`Overflow`] policy and however small the table:
///
/// - a decision the table records equals, field for field, that of the key's own limiter (a
///   fresh one for a key that is new, idle or was evicted);
/// - an overflow (counted in [`KeyedStats::overflows`](crate::KeyedStats)) concerns a key that
///   was absent (a key whose state is not back to fresh keeps its slot unless evicted), is
///   recorded nowhere (the table still peeks the key as fresh), and decides as its policy says,
///   marked as an overflow ([`Decision::is_overflow`]): under [`Overflow::Allow`] as for a fresh
///   key, under the others a denial with nothing remaining until the `retry_after` it gives (its
///   `reset_after` too); no other decision is so marked;
/// - every other key's peek equals its limiter's, except that each eviction changes exactly one
///   key, one that had capacity left (it was not being limited), back to fresh;
/// - a reset ([`reset`](KeyedDifferential::reset)) leaves its key fresh, every other key as it
///   was, and every counter where it was; a reset of every key
///   ([`reset_all`](KeyedDifferential::reset_all)) leaves every key fresh and every counter
///   where it was.
///
/// In a GCRA table, [`step_with`](KeyedDifferential::step_with) decides a request under a tier's
/// quota instead ([`KeyedRateLimiter::decide_key_with`]): each key is then checked, by all of
/// the above, against a limiter of its own tier.
///
/// Limiters that are back to fresh are dropped, since a fresh limiter decides as they would,
/// just as the table forgets an idle key. For every algorithm a state peeks as fresh exactly when
/// it is idle (its reset time is zero); so a slot taken from a key that was not idle shows up as
/// a changed key, not an eviction, and fails the check. That holds only while **time moves
/// forwards**: a clock set back can make an idle state live again. A step at an earlier time
/// than the step before is a [`Mismatch`].
///
/// The clock is shared, so that the direct limiters read the table's time: a reference to a
/// [`ManualClock`](crate::ManualClock) is the usual one. Which live entry an eviction picks (the
/// least constrained) is not checked here, only that it was not being limited. Each step peeks
/// every key held, so a step costs time in proportion to the keys the table holds: meant for
/// small tables.
///
/// The property tests and the fuzz targets both drive this type.
///
/// ```
/// use std::time::Duration;
/// use tollgate::reference::KeyedDifferential;
/// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Overflow, Quota};
///
/// let clock = ManualClock::new();
/// // One table group of 8 slots; 50 keys in turn, one every 7 ms. A request leaves its key live
/// // for 100 ms, and a key's turn comes again after 350 ms, idle and long forgotten.
/// let table = KeyedRateLimiter::<u32>::builder(Gcra::from(Quota::per_second(10).unwrap()))
///     .capacity(4)
///     .overflow(Overflow::EvictLeastConstrained)
///     .clock(&clock)
///     .build()
///     .unwrap();
/// let mut diff = KeyedDifferential::new(table);
/// for key in 0..1_000 {
///     clock.advance(Duration::from_millis(7));
///     diff.step(&(key % 50), 1).unwrap();
/// }
/// // The first 8 keys take empty slots. From then on the 8 slots hold the last 8 keys, requested
/// // 7 to 56 ms ago, all live: each new key evicts one (the oldest), and none is reused.
/// let stats = diff.limiter().stats();
/// assert_eq!((stats.occupied, stats.evictions, stats.reuses), (8, 1_000 - 8, 0));
/// ```
pub struct KeyedDifferential<K, A, C, S> {
    keyed: KeyedRateLimiter<K, A, C, S>,
    held: HashMap<K, RateLimiter<A, C>>,
    last: Nanos,
    steps: u64,
}

impl<K, A, C, S> KeyedDifferential<K, A, C, S>
where
    K: Hash + Eq + Clone + fmt::Debug,
    A: Algorithm + Clone,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// Starts beside `keyed`, which must not have decided anything yet: every key is fresh.
    ///
    /// ```
    /// use tollgate::reference::KeyedDifferential;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let table = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(5).unwrap()))
    ///     .capacity(10)
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// let diff = KeyedDifferential::new(table);
    /// assert_eq!(diff.limiter().stats().occupied, 0);
    /// ```
    pub fn new(keyed: KeyedRateLimiter<K, A, C, S>) -> KeyedDifferential<K, A, C, S> {
        let last = keyed.clock().now();
        KeyedDifferential {
            keyed,
            held: HashMap::new(),
            last,
            steps: 0,
        }
    }

    /// The keyed limiter under test.
    ///
    /// ```
    /// use tollgate::reference::KeyedDifferential;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let table = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(5).unwrap()))
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// let mut diff = KeyedDifferential::new(table);
    /// diff.step(&7, 2).unwrap();
    /// assert_eq!(diff.limiter().peek_key(&7).remaining(), 3);
    /// ```
    pub fn limiter(&self) -> &KeyedRateLimiter<K, A, C, S> {
        &self.keyed
    }

    /// Decides a request of `cost` for `key` on the table, at the clock's time, and checks it
    /// and every other key held against the direct limiters (see the type's docs). Returns the
    /// table's answer.
    ///
    /// # Errors
    ///
    /// The first disagreement, described with the step number, key, cost and time; or a clock
    /// that went back since the last step.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::reference::KeyedDifferential;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let table = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(5).unwrap()))
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// let mut diff = KeyedDifferential::new(table);
    /// assert!(diff.step(&1, 5).unwrap().unwrap().is_allowed());
    /// assert!(!diff.step(&1, 1).unwrap().unwrap().is_allowed());
    /// assert!(diff.step(&1, 6).unwrap().is_err()); // more than the capacity, for both
    ///
    /// // A clock that goes back is refused: an idle key could come back to life.
    /// clock.advance(Duration::from_secs(1));
    /// diff.step(&1, 1).unwrap();
    /// clock.rewind(Duration::from_millis(1));
    /// assert!(diff.step(&1, 1).unwrap_err().to_string().contains("the clock went back"));
    /// ```
    pub fn step(
        &mut self,
        key: &K,
        cost: u64,
    ) -> Result<Result<Decision, InsufficientCapacity>, Mismatch> {
        let own = self.keyed.algorithm();
        self.step_as(key, own, cost, |keyed| keyed.decide_key(key, cost))
    }

    /// [`step`](KeyedDifferential::step) for a request that `decide` makes on the table, decided
    /// by `algorithm`, the key's own (a tier's, or the table's), beside a direct limiter of that
    /// algorithm.
    fn step_as(
        &mut self,
        key: &K,
        algorithm: A,
        cost: u64,
        decide: impl FnOnce(&KeyedRateLimiter<K, A, C, S>) -> Result<Decision, InsufficientCapacity>,
    ) -> Result<Result<Decision, InsufficientCapacity>, Mismatch> {
        let at = self.begin(format!("key {key:?}, cost {cost}"))?;
        let fresh = self.fresh(algorithm);
        let fresh_peek = fresh.peek();
        let before = self.keyed.stats();
        let got = decide(&self.keyed);
        let after = self.keyed.stats();
        if after.overflows > before.overflows {
            if self.held.contains_key(key) {
                return at
                    .fail("a key the table holds (its state not back to fresh) overflowed".into());
            }
            if self.peek(key, &fresh.algorithm()) != fresh_peek {
                return at.fail("an overflow was recorded".into());
            }
            let policy = self.keyed.overflow();
            // Denied with nothing remaining until a slot frees up, when all of it does; either
            // way marked as the policy's decision.
            let denied = got.is_ok_and(|d| {
                !d.is_allowed()
                    && d.is_overflow()
                    && d.remaining() == 0
                    && d.reset_after() == d.retry_after()
            });
            let right = match policy {
                Overflow::Allow => got == fresh.decide(cost).map(Decision::overflowed),
                _ => denied,
            };
            if !right {
                return at.fail(format!("{policy:?} overflowed with {got:?}"));
            }
        } else {
            let want = self.held.entry(key.clone()).or_insert(fresh).decide(cost);
            if got != want {
                return at.fail(format!("decided {got:?}, its own limiter {want:?}"));
            }
        }
        let changed = self.changed(key);
        let evictions = after.evictions - before.evictions;
        if changed.len() as u64 != evictions {
            let keys: Vec<&K> = changed.iter().map(|(k, _, _)| k).collect();
            return at.fail(format!("keys {keys:?} changed, with {evictions} evictions"));
        }
        for (evicted, own, algorithm) in changed {
            // Evicted: the key is fresh in the table now, and so is its limiter from here on.
            self.held.remove(&evicted);
            if own.remaining() == 0 {
                return at.fail(format!("key {evicted:?} was evicted while limited"));
            }
            let fresh_peek = self.fresh(algorithm).peek();
            if self.peek(&evicted, &algorithm) != fresh_peek {
                return at.fail(format!("evicted key {evicted:?} is not fresh"));
            }
        }
        Ok(got)
    }

    /// Resets `key` on the table ([`KeyedRateLimiter::reset_key`]), and checks that the key
    /// peeks as fresh afterwards, that no other key changed, and that no counter moved (a reset
    /// inserts, reuses, evicts and overflows nothing). The key's own limiter is dropped: it is
    /// fresh from here on, in the table as in the reference.
    ///
    /// # Errors
    ///
    /// The first disagreement, described with the step number, key and time; or a clock that
    /// went back since the last step.
    ///
    /// ```
    /// use tollgate::reference::KeyedDifferential;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let table = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(5).unwrap()))
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// let mut diff = KeyedDifferential::new(table);
    /// diff.step(&1, 5).unwrap();
    /// diff.step(&2, 3).unwrap();
    /// diff.reset(&1).unwrap();
    /// assert_eq!(diff.limiter().peek_key(&1).remaining(), 5);
    /// assert_eq!(diff.limiter().peek_key(&2).remaining(), 2);
    /// ```
    pub fn reset(&mut self, key: &K) -> Result<(), Mismatch> {
        self.reset_as(key, |keyed| keyed.reset_key(key))
    }

    /// [`reset`](KeyedDifferential::reset) of `key`, which `reset` makes on the table.
    fn reset_as(
        &mut self,
        key: &K,
        reset: impl FnOnce(&KeyedRateLimiter<K, A, C, S>),
    ) -> Result<(), Mismatch> {
        let at = self.begin(format!("reset of key {key:?}"))?;
        let before = self.keyed.stats();
        reset(&self.keyed);
        let after = self.keyed.stats();
        let algorithm = match self.held.remove(key) {
            Some(limiter) => limiter.algorithm(),
            None => self.keyed.algorithm(),
        };
        if after != before {
            return at.fail(format!("the counters moved from {before:?} to {after:?}"));
        }
        let fresh_peek = self.fresh(algorithm).peek();
        let peek = self.peek(key, &algorithm);
        if peek != fresh_peek {
            return at.fail(format!(
                "the key peeks as {peek:?} after its reset, not fresh"
            ));
        }
        let changed = self.changed(key);
        if !changed.is_empty() {
            let keys: Vec<&K> = changed.iter().map(|(k, _, _)| k).collect();
            return at.fail(format!("keys {keys:?} changed"));
        }
        Ok(())
    }

    /// Resets every key on the table ([`KeyedRateLimiter::reset`]), and checks that every key
    /// peeks as fresh afterwards (each under its own algorithm, a tier's or the table's) and
    /// that no counter moved (a reset inserts, reuses, evicts and overflows nothing). Every
    /// limiter is dropped: every key is fresh from here on, in the table as in the reference.
    ///
    /// # Errors
    ///
    /// The first key that does not peek as fresh, described with the step number and time; a
    /// counter that moved; or a clock that went back since the last step.
    ///
    /// ```
    /// use tollgate::reference::KeyedDifferential;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let table = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(5).unwrap()))
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// let mut diff = KeyedDifferential::new(table);
    /// diff.step(&1, 5).unwrap();
    /// diff.step(&2, 3).unwrap();
    /// diff.reset_all().unwrap();
    /// assert_eq!(diff.limiter().peek_key(&1).remaining(), 5);
    /// assert_eq!(diff.limiter().peek_key(&2).remaining(), 5);
    /// ```
    pub fn reset_all(&mut self) -> Result<(), Mismatch> {
        self.reset_all_as(KeyedRateLimiter::reset)
    }

    /// [`reset_all`](KeyedDifferential::reset_all), which `reset` makes on the table.
    fn reset_all_as(
        &mut self,
        reset: impl FnOnce(&KeyedRateLimiter<K, A, C, S>),
    ) -> Result<(), Mismatch> {
        let at = self.begin("reset of every key".into())?;
        let before = self.keyed.stats();
        reset(&self.keyed);
        let after = self.keyed.stats();
        if after != before {
            return at.fail(format!("the counters moved from {before:?} to {after:?}"));
        }
        // Keys not held are fresh in the reference already; a later step on one checks the
        // table's state of it.
        let held: Vec<(K, A)> = self
            .held
            .drain()
            .map(|(key, limiter)| (key, limiter.algorithm()))
            .collect();
        for (key, algorithm) in held {
            let fresh_peek = self.fresh(algorithm).peek();
            let peek = self.peek(&key, &algorithm);
            if peek != fresh_peek {
                return at.fail(format!(
                    "key {key:?} peeks as {peek:?} after the reset of every key, not fresh"
                ));
            }
        }
        Ok(())
    }

    /// Starts a step on `request` (for its mismatch messages): numbers it and reads the clock.
    /// Refuses a clock that went back since the last step; otherwise drops the limiters that are
    /// back to fresh, as the table may forget their keys.
    fn begin(&mut self, request: String) -> Result<At, Mismatch> {
        let at = At {
            step: self.steps,
            now: self.keyed.clock().now(),
            request,
        };
        self.steps += 1;
        if at.now < self.last {
            return at.fail(format!(
                "the clock went back from {} ns; idle keys need time that moves forwards",
                self.last.as_nanos()
            ));
        }
        self.last = at.now;
        self.held.retain(|_, limiter| is_live(limiter));
        Ok(at)
    }

    /// The keys held, other than `key`, whose peek in the table (under their own algorithm) is
    /// not their limiter's, with their limiter's peek and algorithm.
    fn changed(&self, key: &K) -> Vec<(K, Decision, A)> {
        self.held
            .iter()
            .filter(|&(other, _)| other != key)
            .map(|(other, limiter)| (other, limiter.peek(), limiter.algorithm()))
            .filter(|(other, own, algorithm)| self.peek(other, algorithm) != *own)
            .map(|(other, own, algorithm)| (other.clone(), own, algorithm))
            .collect()
    }

    /// The table's peek of `key` under `algorithm`, the key's own.
    fn peek(&self, key: &K, algorithm: &A) -> Decision {
        let algorithm = *algorithm;
        self.keyed.peek_key_as(key, move |_| algorithm, 1)
    }

    /// A direct limiter of `algorithm` on the table's clock, in the fresh state.
    fn fresh(&self, algorithm: A) -> RateLimiter<A, C> {
        RateLimiter::with_clock(algorithm, self.keyed.clock().clone())
    }
}

/// Tiers: requests decided with a per-call quota, as [`KeyedRateLimiter::decide_key_with`] does.
impl<K, C, S> KeyedDifferential<K, Gcra, C, S>
where
    K: Hash + Eq + Clone + fmt::Debug,
    C: Clock + Clone,
    S: BuildHasher,
{
    /// [`step`](KeyedDifferential::step) for a request of `key` under `tier`
    /// ([`KeyedRateLimiter::decide_key_with`]), beside a direct GCRA limiter of `tier` for the
    /// key.
    /// A key keeps its tier while it is held (while its state is not back to fresh): a request
    /// under another is a [`Mismatch`], since no single direct limiter stands for such a key.
    ///
    /// Everything [`step`](KeyedDifferential::step) checks is checked under each key's own
    /// tier, the sparing of limited keys by evictions included: a table that judged its entries
    /// by a quota more lenient than some key's tier would fail here once it evicted a key that
    /// its tier is limiting.
    ///
    /// # Errors
    ///
    /// As for [`step`](KeyedDifferential::step).
    ///
    /// ```
    /// use tollgate::reference::KeyedDifferential;
    /// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Overflow, Quota};
    ///
    /// let free = Quota::per_minute(10).unwrap();
    /// let premium = Quota::per_minute(1_000).unwrap().with_burst(100).unwrap();
    /// let clock = ManualClock::new();
    /// // A table for free keys, in which premium keys spend their whole burst.
    /// let table = KeyedRateLimiter::<u32>::builder(Gcra::from(free))
    ///     .tier(premium)
    ///     .capacity(4) // one group of 8 slots
    ///     .overflow(Overflow::EvictLeastConstrained)
    ///     .clock(&clock)
    ///     .build()
    ///     .unwrap();
    /// let mut diff = KeyedDifferential::new(table);
    /// for key in 0..8 {
    ///     diff.step_with(&key, &premium, 100).unwrap();
    /// }
    /// // Each would have 9 requests left under the free quota, but has none under its own: no
    /// // entry may be evicted, and a new key overflows.
    /// assert!(!diff.step(&8, 1).unwrap().unwrap().is_allowed());
    /// assert_eq!(diff.limiter().stats().evictions, 0);
    /// ```
    pub fn step_with(
        &mut self,
        key: &K,
        tier: &Quota,
        cost: u64,
    ) -> Result<Result<Decision, InsufficientCapacity>, Mismatch> {
        let gcra = Gcra::new(tier);
        if let Some(held) = self.held.get(key) {
            if is_live(held) && held.algorithm() != gcra {
                return Err(Mismatch(format!(
                    "step {}: key {key:?} is held under {:?}, asked under {gcra:?}",
                    self.steps,
                    held.algorithm()
                )));
            }
        }
        self.step_as(key, gcra, cost, |keyed| {
            keyed.decide_key_with(key, tier, cost)
        })
    }
}

/// Whether a key's limiter is not back to fresh, so that the table must still hold the key: a
/// state peeks as fresh exactly when its reset time is zero (see [`KeyedDifferential`]).
fn is_live<A: Algorithm, C: Clock>(limiter: &RateLimiter<A, C>) -> bool {
    limiter.peek().reset_after() != Duration::ZERO
}

/// A step of a [`KeyedDifferential`]: its number, its time and its request, which every mismatch
/// found in it names.
struct At {
    step: u64,
    now: Nanos,
    request: String,
}

impl At {
    fn fail<T>(&self, what: String) -> Result<T, Mismatch> {
        Err(Mismatch(format!(
            "step {}: {what} ({}, now {} ns)",
            self.step,
            self.request,
            self.now.as_nanos()
        )))
    }
}

impl<K: fmt::Debug, A: fmt::Debug, C, S> fmt::Debug for KeyedDifferential<K, A, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedDifferential")
            .field("held", &self.held.len())
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::keyed::DefaultKeyHasher;
    use crate::quota::Quota;
    use core::hash::{BuildHasherDefault, Hasher};

    /// Hashes every key alike: every pair of keys collides, as no table may let them.
    #[derive(Default)]
    struct Collide;

    impl Hasher for Collide {
        fn finish(&self) -> u64 {
            0x9e37_79b9_7f4a_7c15
        }
        fn write(&mut self, _: &[u8]) {}
    }

    /// A table whose keys all share one hash mixes them up, and the checks say so: a key that
    /// finds another's state decides differently from its own limiter, and resetting a key
    /// changes the other.
    #[test]
    fn a_table_that_mixes_keys_up_is_caught() {
        let clock = ManualClock::new();
        let diff = || {
            let table = KeyedRateLimiter::<u32>::builder(Gcra::from(Quota::per_second(5).unwrap()))
                .hasher(BuildHasherDefault::<Collide>::default())
                .clock(&clock)
                .build()
                .unwrap();
            KeyedDifferential::new(table)
        };

        // Key 2 finds key 1's spent burst.
        let mut mixed = diff();
        assert_eq!(mixed.step(&1, 5).unwrap().unwrap().remaining(), 0);
        let mismatch = mixed.step(&2, 1).unwrap_err().to_string();
        let expected = "step 1: decided Ok(Decision { allowed: false, overflow: false, \
                        remaining: 0, retry_after: 200ms, reset_after: 1s, limit: 5 }), its own \
                        limiter Ok(Decision { allowed: true, overflow: false, remaining: 4, \
                        retry_after: 0ns, reset_after: 200ms, limit: 5 }) (key 2, cost 1, now 0 \
                        ns)";
        assert_eq!(mismatch, expected);

        // Resetting key 2 gives key 1 its burst back.
        let mut mixed = diff();
        assert_eq!(mixed.step(&1, 5).unwrap().unwrap().remaining(), 0);
        let mismatch = mixed.reset(&2).unwrap_err().to_string();
        assert_eq!(
            mismatch,
            "step 1: keys [1] changed (reset of key 2, now 0 ns)"
        );
        // Key 1 is held (limited); key 2 never was.
        assert_eq!(
            format!("{mixed:?}"),
            "KeyedDifferential { held: 1, steps: 2, .. }"
        );
    }

    /// A key keeps its tier while its state is live: asked under another tier then, it is a
    /// mismatch; once idle, it may come back under any tier.
    #[test]
    fn a_key_changes_tier_only_when_idle() {
        let clock = ManualClock::new();
        let free = Quota::per_second(1).unwrap();
        let premium = Quota::per_second(10).unwrap();
        let table = KeyedRateLimiter::<u32>::builder(Gcra::from(free))
            .tier(premium)
            .clock(&clock)
            .build()
            .unwrap();
        let mut diff = KeyedDifferential::new(table);
        assert!(diff.step_with(&1, &premium, 1).unwrap().is_ok());
        let mismatch = diff.step_with(&1, &free, 1).unwrap_err().to_string();
        assert_eq!(
            mismatch,
            format!(
                "step 1: key 1 is held under {:?}, asked under {:?}",
                Gcra::from(premium),
                Gcra::from(free)
            )
        );
        // Premium's one request is 100 ms: then the key is fresh, and free may take it.
        clock.advance(Duration::from_millis(100));
        assert_eq!(
            diff.step_with(&1, &free, 1).unwrap().unwrap().remaining(),
            0
        );
        assert_eq!(
            format!("{diff:?}"),
            "KeyedDifferential { held: 1, steps: 2, .. }"
        );
    }

    type Table<'c> = KeyedRateLimiter<u32, Gcra, &'c ManualClock, DefaultKeyHasher>;
    type Diff<'c> = KeyedDifferential<u32, Gcra, &'c ManualClock, DefaultKeyHasher>;

    /// A table of 5 per second under `policy`, of one group of 8 slots, beside its reference,
    /// once it has admitted `setup`'s requests (key, cost) at the clock's time.
    fn set_up<'c>(clock: &'c ManualClock, policy: Overflow, setup: &[(u32, u64)]) -> Diff<'c> {
        let table = KeyedRateLimiter::<u32>::builder(five_per_second())
            .capacity(4)
            .overflow(policy)
            .clock(clock)
            .build()
            .unwrap();
        assert_eq!(table.stats().slots, 8);
        let mut diff = KeyedDifferential::new(table);
        for &(key, cost) in setup {
            assert!(diff.step(&key, cost).unwrap().unwrap().is_allowed());
        }
        diff
    }

    fn five_per_second() -> Gcra {
        Gcra::from(Quota::per_second(5).unwrap())
    }

    /// The mismatch that a flawed table's step of `key` (cost 1) gets: `flaw` makes the request
    /// on the table, as a correct table would not, after [`set_up`] at 0 ns, the time of every
    /// step; so each key's state is live for 200 ms per request. The same step on a correct
    /// table, set up alike, passes.
    fn flawed(
        policy: Overflow,
        setup: &[(u32, u64)],
        key: u32,
        flaw: impl FnOnce(&Table<'_>) -> Result<Decision, InsufficientCapacity>,
    ) -> String {
        let clock = ManualClock::new();
        assert!(set_up(&clock, policy, setup).step(&key, 1).is_ok());
        set_up(&clock, policy, setup)
            .step_as(&key, five_per_second(), 1, flaw)
            .unwrap_err()
            .to_string()
    }

    /// Requests of `cost` for keys 0 to 7, one each: they take the table's 8 slots.
    fn fill(cost: u64) -> Vec<(u32, u64)> {
        (0..8).map(|key| (key, cost)).collect()
    }

    /// A decision with the fields of `Debug`'s order, its times in milliseconds, of a limit of 5.
    fn decision_of(allowed: bool, remaining: u64, retry_ms: u64, reset_ms: u64) -> Decision {
        let ms = |ms: u64| Nanos::from_nanos(ms * 1_000_000);
        Decision::new(allowed, remaining, ms(retry_ms), ms(reset_ms), 5)
    }

    /// The decision on a fresh key's first request of cost 1: admitted, 4 left, and full again in
    /// the 200 ms that one request's share of 5 per second takes.
    fn first_request() -> Decision {
        decision_of(true, 4, 0, 200)
    }

    /// Each check of an overflow fails a table that overflows where it may not, or decides an
    /// overflow otherwise than its policy says, with its own message.
    #[test]
    fn every_overflow_check_catches_its_flaw() {
        // A key the table holds overflows: key 0's step makes a new key overflow instead.
        let mismatch = flawed(Overflow::Deny, &fill(1), 0, |table| {
            table.decide_key(&100, 1)
        });
        assert_eq!(
            mismatch,
            "step 8: a key the table holds (its state not back to fresh) overflowed \
             (key 0, cost 1, now 0 ns)"
        );

        // A new key's request is recorded, and yet counted as an overflow: another's overflow.
        let mismatch = flawed(Overflow::Deny, &fill(1)[..7], 7, |table| {
            let decision = table.decide_key(&7, 1);
            assert_eq!(
                table.decide_key(&100, 1),
                Ok(decision_of(false, 0, 200, 200).overflowed())
            );
            decision
        });
        assert_eq!(
            mismatch,
            "step 7: an overflow was recorded (key 7, cost 1, now 0 ns)"
        );

        // Under `Deny`, an overflow is a denial, marked as one, with nothing remaining until a
        // slot frees up (200 ms), when all of it does. Each flawed decision breaks one of those.
        let slot_free = decision_of(false, 0, 200, 200).overflowed();
        let flaws = [
            decision_of(true, 0, 200, 200).overflowed(),  // admitted
            decision_of(false, 1, 200, 200).overflowed(), // with one request remaining
            decision_of(false, 0, 200, 400).overflowed(), // full later than a slot frees up
            decision_of(false, 0, 200, 200),              // not marked as an overflow
        ];
        for flaw in flaws {
            let mismatch = flawed(Overflow::Deny, &fill(1), 8, |table| {
                assert_eq!(table.decide_key(&8, 1), Ok(slot_free));
                Ok(flaw)
            });
            assert_eq!(
                mismatch,
                format!("step 8: Deny overflowed with Ok({flaw:?}) (key 8, cost 1, now 0 ns)")
            );
        }
        // So is it under `EvictLeastConstrained` when every entry is limited: here, an error.
        let mismatch = flawed(Overflow::EvictLeastConstrained, &fill(5), 8, |table| {
            assert_eq!(
                table.decide_key(&8, 1),
                Ok(decision_of(false, 0, 1_000, 1_000).overflowed())
            );
            Err(InsufficientCapacity::new(1, 5))
        });
        assert_eq!(
            mismatch,
            "step 8: EvictLeastConstrained overflowed with Err(InsufficientCapacity { cost: 1, \
             capacity: 5 }) (key 8, cost 1, now 0 ns)"
        );

        // Under `Allow`, as for a fresh key, marked: not the denial of `Deny`, nor unmarked.
        for flaw in [slot_free, first_request()] {
            let mismatch = flawed(Overflow::Allow, &fill(1), 8, |table| {
                assert_eq!(table.decide_key(&8, 1), Ok(first_request().overflowed()));
                Ok(flaw)
            });
            assert_eq!(
                mismatch,
                format!("step 8: Allow overflowed with Ok({flaw:?}) (key 8, cost 1, now 0 ns)")
            );
        }
    }

    /// Each check of the other keys fails a table that changes one where it may not, with its
    /// own message. Key 0 is limited (its burst spent), keys 1 to 6 have 2 requests left for
    /// 600 ms; the step is key 7's, new, for the table's last free slot, unless the flaw takes it
    /// first.
    #[test]
    fn every_eviction_check_catches_its_flaw() {
        let setup = [(0, 5), (1, 3), (2, 3), (3, 3), (4, 3), (5, 3), (6, 3)];
        // Key 1 loses its state with no eviction counted: the flaw resets it.
        let mismatch = flawed(Overflow::EvictLeastConstrained, &setup, 7, |table| {
            table.reset_key(&1);
            table.decide_key(&7, 1)
        });
        assert_eq!(
            mismatch,
            "step 7: keys [1] changed, with 0 evictions (key 7, cost 1, now 0 ns)"
        );

        // One eviction is counted, of a key not held: new key 100 takes the last slot and is
        // evicted, as the least constrained entry, by new key 101. So each flaw below that
        // changes one held key is taken for that eviction, and judged as one.
        let evict_a_stranger = |table: &Table<'_>| {
            assert_eq!(table.decide_key(&100, 1), Ok(first_request()));
            assert_eq!(table.decide_key(&101, 1), Ok(first_request()));
            assert_eq!(table.stats().evictions, 1);
        };
        // The limited key 0 is reset, and key 7 takes its slot.
        let mismatch = flawed(Overflow::EvictLeastConstrained, &setup, 7, |table| {
            evict_a_stranger(table);
            table.reset_key(&0);
            table.decide_key(&7, 1)
        });
        assert_eq!(
            mismatch,
            "step 7: key 0 was evicted while limited (key 7, cost 1, now 0 ns)"
        );
        // Beside key 2's step, key 1 is decided on again: changed, but not back to fresh.
        let mismatch = flawed(Overflow::EvictLeastConstrained, &setup, 2, |table| {
            evict_a_stranger(table);
            assert_eq!(table.decide_key(&1, 1), Ok(decision_of(true, 1, 0, 800)));
            table.decide_key(&2, 1)
        });
        assert_eq!(
            mismatch,
            "step 7: evicted key 1 is not fresh (key 2, cost 1, now 0 ns)"
        );
    }

    /// A correct table that evicts again passes: a step counts only the evictions it made, not
    /// the table's earlier ones. Keys 0 to 7 take the table's 8 slots with a request each; keys
    /// 8 and 9, new, each evict one of them (all equally constrained, none limited).
    #[test]
    fn each_step_counts_only_its_own_evictions() {
        let clock = ManualClock::new();
        let mut diff = set_up(&clock, Overflow::EvictLeastConstrained, &fill(1));
        assert_eq!(diff.step(&8, 1), Ok(Ok(first_request())));
        assert_eq!(diff.step(&9, 1), Ok(Ok(first_request())));
        assert_eq!(diff.limiter().stats().evictions, 2);
    }

    /// Each check of a reset, of one key or of every key, fails a table that resets otherwise,
    /// with its own message (the third, another key changed by a reset of one, is
    /// `a_table_that_mixes_keys_up_is_caught`'s). Key 1 is limited (its burst spent, full again
    /// at 1 s), key 2 has 2 requests left (full again at 600 ms).
    #[test]
    fn every_reset_check_catches_its_flaw() {
        let clock = ManualClock::new();
        let setup = [(1, 5), (2, 3)];
        let diff = || set_up(&clock, Overflow::Deny, &setup);
        // Correct resets pass, and reset the table.
        let mut reset = diff();
        assert_eq!(reset.reset(&1), Ok(()));
        let remaining = |diff: &Diff<'_>, key| diff.limiter().peek_key(&key).remaining();
        assert_eq!((remaining(&reset, 1), remaining(&reset, 2)), (5, 2));
        assert_eq!(reset.reset_all(), Ok(()));
        assert_eq!((remaining(&reset, 1), remaining(&reset, 2)), (5, 5));

        // A reset of key 1 that leaves it as it was.
        let mismatch = diff().reset_as(&1, |_| {}).unwrap_err().to_string();
        assert_eq!(
            mismatch,
            "step 2: the key peeks as Decision { allowed: false, overflow: false, remaining: 0, \
             retry_after: 200ms, reset_after: 1s, limit: 5 } after its reset, not fresh (reset \
             of key 1, now 0 ns)"
        );
        // One that records a request of a new key too.
        let mismatch = diff()
            .reset_as(&1, |table| {
                table.reset_key(&1);
                assert!(table.check_key(&3).is_ok());
            })
            .unwrap_err()
            .to_string();
        let stats = |occupied| {
            format!(
                "KeyedStats {{ capacity: 4, slots: 8, occupied: {occupied}, reuses: 0, \
                 evictions: 0, overflows: 0 }}"
            )
        };
        assert_eq!(
            mismatch,
            format!(
                "step 2: the counters moved from {} to {} (reset of key 1, now 0 ns)",
                stats(2),
                stats(3)
            )
        );

        // A reset of every key that resets key 1 only.
        let mismatch = diff()
            .reset_all_as(|table| table.reset_key(&1))
            .unwrap_err()
            .to_string();
        assert_eq!(
            mismatch,
            "step 2: key 2 peeks as Decision { allowed: true, overflow: false, remaining: 2, \
             retry_after: 0ns, reset_after: 600ms, limit: 5 } after the reset of every key, not \
             fresh (reset of every key, now 0 ns)"
        );
        // One that records a request of a new key too.
        let mismatch = diff()
            .reset_all_as(|table| {
                table.reset();
                assert!(table.check_key(&3).is_ok());
            })
            .unwrap_err()
            .to_string();
        assert_eq!(
            mismatch,
            format!(
                "step 2: the counters moved from {} to {} (reset of every key, now 0 ns)",
                stats(2),
                stats(3)
            )
        );
    }
}
