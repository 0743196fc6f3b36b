//! Layered limits: one request checked against several limiters, all or nothing.
//!
//! "10 per second and 1 000 per hour per user, 1M per hour per tenant, 5M per second in all":
//! each is a limiter of its own (direct or keyed, any algorithm, any clock), and a request must
//! pass every one of them. Checking them one after the other spends the first when the second
//! refuses. A tuple of [`Layer`]s checks them together: admitted only if every layer admits, and
//! a refused request consumes nothing in any layer.
//!
//! ```
//! use tollgate::layers::Layers;
//! use tollgate::{KeyedRateLimiter, Quota, RateLimiter};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let per_user = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10)?, 10_000)?;
//! let per_user_hourly = KeyedRateLimiter::<u64>::sliding_window(Quota::per_hour(1_000)?, 10_000)?;
//! let per_tenant = KeyedRateLimiter::<str>::gcra(Quota::per_hour(1_000_000)?, 1_000)?;
//! let global = RateLimiter::gcra(Quota::per_second(5_000_000)?);
//!
//! let (user, tenant) = (42, "acme");
//! let layers = (per_user.layer(&user), per_user_hourly.layer(&user), per_tenant.layer(tenant), &global);
//! match layers.check_all(1) {
//!     Ok(()) => { /* serve */ }
//!     Err(refused) => println!("refused by layer {}: {}", refused.layer(), refused.error()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # The protocol, and what a concurrent observer sees
//!
//! Lock-free, in two passes over the layers, each at its own clock's time (read once per
//! layer):
//!
//! 1. **Look.** Each layer's state is read and the request decided against it, writing nothing.
//!    If any layer would refuse, the request is refused here: nothing was written anywhere, and
//!    the refusal names the layer with the longest wait.
//! 2. **Hold.** Each layer in turn admits the request with its own compare-and-swap loop. A layer
//!    that refuses now (another request took its room between the two passes) ends the check:
//!    the layers already held are **released** in reverse order, each by a compare-and-swap that
//!    gives the hold back, and the refusal names that layer.
//!
//! Between a hold and its release, other requests see the hold: a request that finds a layer
//! full only because of it is refused, although the check that made it is refused too. That is
//! the only trace a refused check leaves, for the nanoseconds it runs, and only when it races
//! another request for the room of a later layer. A release is exact when nothing was admitted
//! in the layer since the hold, and for the window counters always (their counts add up); for
//! GCRA after other admissions it gives back the hold less the time the clock ran into it since,
//! never more than was taken, and nothing while a [reservation](crate::reservation) queued
//! behind the hold still waits for its turn (the turn the hold gave it could otherwise be handed
//! out twice). An admitted check holds every layer, as if each had been checked alone.
//!
//! Each step is one layer's own compare-and-swap, with the orderings of any other decision:
//! nothing is published from one layer to another, so the layers need no ordering between them.
//! The loom models in `loom-tests/tests/layers.rs` check the release against racing requests.
//!
//! List the layers with the most contended one (a global limit) last: a layer that is held is
//! released only when a later layer refuses, so the last layer is never released, and the
//! others are per-key layers that other requests rarely touch in the meantime.
//!
//! A key whose entry a keyed layer evicts between the hold and its release (under
//! [`Overflow::EvictLeastConstrained`](crate::Overflow), for a key that another request then
//! inserts again) may get back a hold it no longer carries: at most the request's cost, once.

mod all;
mod reserve;

pub use all::{LayerError, LayeredDecision, Layers};
pub(crate) use reserve::{give_back, sealed::Turn};
pub use reserve::{LayeredReservation, Reservable, ReserveAll};
pub(crate) use sealed::Hold;

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};

use crate::algorithm::{Algorithm, Transition};
use crate::clock::{Clock, Nanos};
use crate::decision::{Decision, Denied};
use crate::keyed::KeyedRateLimiter;
use crate::limiter::RateLimiter;
use crate::store::{Current, Loaded, Overflow, Overflowed, Probe, Seen};

/// A limiter, or a keyed limiter's key, that can take part in an all-or-nothing check
/// ([`Layers`]): `&RateLimiter` and [`KeyedLayer`] (from [`KeyedRateLimiter::layer`]).
///
/// The trait is sealed: its methods are the protocol's steps, for this crate's limiters only.
///
/// ```
/// use tollgate::layers::{Layer, Layers};
/// use tollgate::{Quota, RateLimiter};
/// fn admit<L: Layer, M: Layer>(a: L, b: M) -> bool {
///     (a, b).check_all(1).is_ok()
/// }
/// let (a, b) = (RateLimiter::gcra(Quota::per_second(1).unwrap()), RateLimiter::gcra(Quota::per_second(2).unwrap()));
/// assert!(admit(&a, &b));
/// assert!(!admit(&a, &b));
/// assert_eq!(b.peek().remaining(), 1); // the refused check took nothing from `b`
/// ```
pub trait Layer: sealed::Step {}

impl<T: sealed::Step + ?Sized> Layer for T {}

pub(crate) mod sealed {
    use crate::clock::Nanos;
    use crate::decision::{Decision, Denied};

    /// What a layer held for an admitted request: its state before and after, to release it.
    #[derive(Clone, Copy, Debug)]
    pub struct Hold {
        pub(crate) before: u64,
        pub(crate) after: u64,
        /// False when nothing was stored (a cost of 0; a full table under `Overflow::Allow`).
        pub(crate) recorded: bool,
        /// The direct limiter's generation the words belong to (0 for a keyed layer's).
        pub(crate) generation: u64,
    }

    impl Hold {
        /// No hold yet.
        pub(crate) const NOTHING: Hold = Hold {
            before: 0,
            after: 0,
            recorded: false,
            generation: 0,
        };
    }

    /// The steps of the all-or-nothing protocol on one layer.
    pub trait Step {
        /// The layer's clock.
        fn now(&self) -> Nanos;
        /// The largest cost one request can have.
        fn capacity(&self) -> u64;
        /// What a look saw, for the hold to start from.
        type Seen: Copy;
        /// Whether a request of `cost` would be admitted at `now`, writing nothing, and what
        /// the look saw.
        fn look(&self, now: Nanos, cost: u64) -> (Self::Seen, Result<(), Denied>);
        /// Admits a request of `cost` at `now`, or refuses it writing nothing, starting from
        /// what the look saw.
        fn hold(&self, seen: Self::Seen, now: Nanos, cost: u64) -> Result<Hold, Denied>;
        /// Gives back what `hold` took.
        fn release(&self, hold: Hold, cost: u64);
        /// The full decision: for an admission, from the state before its hold; else for the
        /// state as it stands (a peek).
        fn decision(&self, hold: Option<Hold>, now: Nanos, cost: u64) -> Decision;
    }
}

/// The cheap transition as a step's outcome: the words before and after, or the denial.
#[inline]
fn step<A: Algorithm>(
    algorithm: &A,
    word: u64,
    now: Nanos,
    cost: u64,
) -> (Result<[u64; 2], Denied>, u64) {
    match algorithm.transition(word, now, cost) {
        Transition::Allow { state } => (Ok([word, state]), state),
        Transition::Deny { retry_after } => (Err(Denied::new(retry_after)), word),
    }
}

#[inline]
fn look<A: Algorithm>(algorithm: &A, word: u64, now: Nanos, cost: u64) -> Result<(), Denied> {
    match algorithm.transition(word, now, cost) {
        Transition::Allow { .. } => Ok(()),
        Transition::Deny { retry_after } => Err(Denied::new(retry_after)),
    }
}

impl<A: Algorithm, C: Clock> sealed::Step for RateLimiter<A, C> {
    #[inline]
    fn now(&self) -> Nanos {
        self.clock().now()
    }

    #[inline]
    fn capacity(&self) -> u64 {
        self.algorithm().capacity()
    }

    /// The state as loaded, with its generation and algorithm.
    type Seen = Loaded<A>;

    #[inline]
    fn look(&self, now: Nanos, cost: u64) -> (Loaded<A>, Result<(), Denied>) {
        let loaded = self.cell().load();
        (loaded, look(&loaded.algorithm, loaded.word, now, cost))
    }

    #[inline]
    fn hold(&self, seen: Loaded<A>, now: Nanos, cost: u64) -> Result<Hold, Denied> {
        let (held, generation, _) = self
            .cell()
            .update_loaded(seen, |word, algorithm| step(algorithm, word, now, cost));
        let [before, after] = held?;
        Ok(Hold {
            before,
            after,
            recorded: true,
            generation,
        })
    }

    fn release(&self, hold: Hold, cost: u64) {
        use crate::algorithm::sealed::Sealed;
        if !hold.recorded || hold.before == hold.after {
            return;
        }
        let now = self.clock().now();
        let held = [hold.before, hold.after];
        // A hold from a generation since converted was converted with the rest of the state.
        self.cell().update_in(hold.generation, |state, algorithm| {
            ((), Sealed::release(algorithm, state, held, cost, now))
        });
    }

    fn decision(&self, hold: Option<Hold>, now: Nanos, cost: u64) -> Decision {
        match hold {
            Some(hold) => {
                let algorithm =
                    (self.cell().algorithm_of(hold.generation)).unwrap_or_else(|| self.algorithm());
                algorithm.decide(hold.before, now, cost).0
            }
            None => {
                let loaded = self.cell().load();
                crate::algorithm::peek(&loaded.algorithm, loaded.word, now, cost)
            }
        }
    }
}

impl<T: sealed::Step + ?Sized> sealed::Step for &T {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }
    #[inline]
    fn capacity(&self) -> u64 {
        (**self).capacity()
    }
    type Seen = T::Seen;
    #[inline]
    fn look(&self, now: Nanos, cost: u64) -> (T::Seen, Result<(), Denied>) {
        (**self).look(now, cost)
    }
    #[inline]
    fn hold(&self, seen: T::Seen, now: Nanos, cost: u64) -> Result<Hold, Denied> {
        (**self).hold(seen, now, cost)
    }
    fn release(&self, hold: Hold, cost: u64) {
        (**self).release(hold, cost);
    }
    fn decision(&self, hold: Option<Hold>, now: Nanos, cost: u64) -> Decision {
        (**self).decision(hold, now, cost)
    }
}

/// One key of a keyed limiter, as a layer of an all-or-nothing check: made by
/// [`KeyedRateLimiter::layer`], which hashes the key once.
///
/// ```
/// use tollgate::layers::Layers;
/// use tollgate::{KeyedRateLimiter, Quota};
/// let per_user = KeyedRateLimiter::<str>::gcra(Quota::per_minute(2).unwrap(), 100).unwrap();
/// let per_ip = KeyedRateLimiter::<str>::gcra(Quota::per_minute(3).unwrap(), 100).unwrap();
/// for _ in 0..2 {
///     (per_user.layer("alice"), per_ip.layer("192.0.2.1")).check_all(1).unwrap();
/// }
/// let refused = (per_user.layer("alice"), per_ip.layer("192.0.2.1")).check_all(1).unwrap_err();
/// assert_eq!(refused.layer(), 0);
/// assert_eq!(per_ip.peek_key("192.0.2.1").remaining(), 1);
/// ```
pub struct KeyedLayer<'a, K: ?Sized, A, C, S> {
    limiter: &'a KeyedRateLimiter<K, A, C, S>,
    probe: Probe,
}

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> KeyedRateLimiter<K, A, C, S> {
    /// `key` as a layer of an all-or-nothing check over several limiters: see [`Layers`].
    ///
    /// ```
    /// use tollgate::layers::Layers;
    /// use tollgate::{KeyedRateLimiter, Quota, RateLimiter};
    /// let per_user = KeyedRateLimiter::<u64>::gcra(Quota::per_second(1).unwrap(), 100).unwrap();
    /// let global = RateLimiter::gcra(Quota::per_second(100).unwrap());
    /// assert!((per_user.layer(&7), &global).check_all(1).is_ok());
    /// assert!((per_user.layer(&7), &global).check_all(1).is_err());
    /// assert_eq!(global.peek().remaining(), 99); // the refused request took nothing globally
    /// ```
    pub fn layer<Q>(&self, key: &Q) -> KeyedLayer<'_, K, A, C, S>
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized,
    {
        KeyedLayer {
            limiter: self,
            probe: self.probe(key),
        }
    }
}

impl<'a, K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> sealed::Step
    for KeyedLayer<'a, K, A, C, S>
{
    /// The key's slot, if the look found it, and the generation it was found in.
    type Seen = (Option<Seen<'a>>, Current<A>);

    #[inline]
    fn now(&self) -> Nanos {
        self.limiter.clock().now()
    }

    #[inline]
    fn capacity(&self) -> u64 {
        self.limiter.algorithm().capacity()
    }

    #[inline]
    fn look(&self, now: Nanos, cost: u64) -> ((Option<Seen<'a>>, Current<A>), Result<(), Denied>) {
        let limiter = self.limiter;
        let (state, seen, current) = limiter.table().look(&self.probe, limiter.quotas());
        ((seen, current), look(&current.algorithm, state, now, cost))
    }

    #[inline]
    fn hold(
        &self,
        (seen, current): (Option<Seen<'a>>, Current<A>),
        now: Nanos,
        cost: u64,
    ) -> Result<Hold, Denied> {
        let limiter = self.limiter;
        let overflow = limiter.overflow();
        // The outcome keeps the generation it was decided in: a hold is released only in it.
        let step = |word, current: &Current<A>| {
            let (held, next) = step(&current.algorithm, word, now, cost);
            ((held, current.generation), next)
        };
        let quotas = limiter.quotas();
        let hold = |(held, generation): (Result<[u64; 2], Denied>, u64), recorded| {
            held.map(|[before, after]| Hold {
                before,
                after,
                recorded,
                generation,
            })
        };
        match limiter
            .table()
            .update_seen(seen, current, &self.probe, quotas, now, overflow, step)
        {
            Ok(outcome) => hold(outcome, true),
            Err(Overflowed { fresh, .. }) if overflow == Overflow::Allow => hold(fresh, false),
            Err(Overflowed { retry_after, .. }) => Err(Denied::no_room(retry_after)),
        }
    }

    fn release(&self, hold: Hold, cost: u64) {
        use crate::algorithm::sealed::Sealed;
        if !hold.recorded || hold.before == hold.after {
            return;
        }
        // A hold from a generation since converted was converted with the rest of the state.
        let Some(algorithm) = self.limiter.quotas().of(hold.generation) else {
            return;
        };
        let now = self.limiter.clock().now();
        let held = [hold.before, hold.after];
        let counter = self.limiter.quotas().counter();
        let release = |state| ((), Sealed::release(&algorithm, state, held, cost, now));
        let table = self.limiter.table();
        table.update_existing(&self.probe, counter, hold.generation, release);
    }

    fn decision(&self, hold: Option<Hold>, now: Nanos, cost: u64) -> Decision {
        let quotas = self.limiter.quotas();
        let of_hold = |hold: &Hold| {
            quotas
                .of(hold.generation)
                .unwrap_or_else(|| self.limiter.algorithm())
        };
        match hold {
            Some(
                hold @ Hold {
                    recorded: false, ..
                },
            ) => of_hold(&hold).decide(0, now, cost).0.overflowed(),
            Some(hold) => of_hold(&hold).decide(hold.before, now, cost).0,
            None => {
                let (state, current) = self.limiter.table().state(&self.probe, quotas);
                crate::algorithm::peek(&current.algorithm, state, now, cost)
            }
        }
    }
}

impl<K: ?Sized, A, C, S> KeyedLayer<'_, K, A, C, S> {
    /// Where the key lives in its limiter's table.
    pub(crate) fn probe(&self) -> Probe {
        self.probe
    }
}

/// The key's place in its limiter's table.
impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> fmt::Debug for KeyedLayer<'_, K, A, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLayer")
            .field("algorithm", &self.limiter.algorithm())
            .finish_non_exhaustive()
    }
}
