//! Reservations over several GCRA layers: one turn in every layer, all or nothing.

use core::fmt;
use core::time::Duration;

use super::sealed::Hold;
use super::{KeyedLayer, LayerError};
use crate::algorithm::{Gcra, Transition};
use crate::clock::{Clock, Nanos};
use crate::decision::{Denied, InsufficientCapacity};
use crate::limiter::RateLimiter;
use crate::store::{Current, Overflow, Overflowed};
use core::hash::BuildHasher;

/// A layer that can take reservations: a GCRA limiter, or a key of a keyed GCRA limiter. See
/// [`ReserveAll`].
///
/// ```
/// use tollgate::layers::Reservable;
/// use tollgate::{Quota, RateLimiter};
/// fn takes_turns<L: Reservable>(_layer: L) {}
/// takes_turns(&RateLimiter::gcra(Quota::per_second(1).unwrap()));
/// ```
pub trait Reservable: sealed::Turn {}

impl<T: sealed::Turn + ?Sized> Reservable for T {}

pub(crate) mod sealed {
    use super::Hold;
    use crate::clock::Nanos;
    use crate::decision::Denied;

    /// The steps of a reservation in one layer.
    pub trait Turn {
        /// The layer's clock.
        fn now(&self) -> Nanos;
        /// The largest cost one request can have.
        fn capacity(&self) -> u64;
        /// Whether a reservation of `cost` waiting at most `max_wait` would be admitted,
        /// writing nothing.
        fn look(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(), Denied>;
        /// The reservation, and its turn.
        fn hold(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(Hold, Nanos), Denied>;
        /// Gives it back if nothing stands behind it.
        fn cancel(&self, hold: Hold) -> bool;
    }

    /// The layers of a tuple, by index.
    pub trait Turns {
        /// How many.
        const LEN: usize;
        /// Layer `i`'s clock.
        fn now_at(&self, i: usize) -> Nanos;
        /// Layer `i`'s capacity.
        fn capacity_at(&self, i: usize) -> u64;
        /// [`Turn::look`] of layer `i`.
        fn look_at(&self, i: usize, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(), Denied>;
        /// [`Turn::hold`] of layer `i`.
        fn hold_at(
            &self,
            i: usize,
            now: Nanos,
            cost: u64,
            max_wait: Nanos,
        ) -> Result<(Hold, Nanos), Denied>;
        /// [`Turn::cancel`] of layer `i`.
        fn cancel_at(&self, i: usize, hold: Hold) -> bool;
    }
}

use sealed::{Turn, Turns};

/// The most layers one reservation spans.
const MAX_LAYERS: usize = 8;

/// A turn in every one of several GCRA layers, all or nothing: implemented for tuples of up to
/// eight [`Reservable`] layers.
///
/// ```
/// use std::time::Duration;
/// use tollgate::layers::ReserveAll;
/// use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let per_user = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(2).unwrap()))
///     .clock(&clock)
///     .build()
///     .unwrap();
/// let upstream = RateLimiter::with_clock(Gcra::from(Quota::per_second(4).unwrap()), &clock);
/// upstream.check_n(4).unwrap();
/// // The user has room; the upstream's next turn is 250 ms away: the request waits for it.
/// let turn = (per_user.layer("alice"), &upstream).reserve_all(1, Duration::from_secs(1)).unwrap();
/// assert_eq!(turn.delay(), Duration::from_millis(250));
/// // Refused in one layer, it takes nothing from the other.
/// assert!((per_user.layer("alice"), &upstream).reserve_all(1, Duration::ZERO).is_err());
/// assert_eq!(per_user.peek_key("alice").remaining(), 1);
/// ```
pub trait ReserveAll: Turns + Sized {
    /// Admits a request of `cost` into every layer's schedule (the tuple moves into the
    /// reservation, which needs its layers to cancel), to proceed when its turn has
    /// come in all of them (the latest of the layers' turns), if that is at most `max_wait` from
    /// now in each. Each layer is looked at first, writing nothing; then each takes its
    /// reservation in turn, and if one refuses (its room taken between the look and the
    /// reservation), the ones before it are cancelled in reverse order.
    ///
    /// # Errors
    ///
    /// A [`LayerError`] naming the refusing layer (of those that would, the one with the longest
    /// wait beyond `max_wait`), or the first whose capacity the cost exceeds.
    fn reserve_all(
        self,
        cost: u64,
        max_wait: Duration,
    ) -> Result<LayeredReservation<Self>, LayerError> {
        let max_wait = Nanos::from_duration(max_wait);
        let mut now = [Nanos::ZERO; MAX_LAYERS];
        for (i, now) in now.iter_mut().enumerate().take(Self::LEN) {
            let capacity = self.capacity_at(i);
            if cost > capacity {
                return Err(LayerError::new(
                    i,
                    InsufficientCapacity::new(cost, capacity).into(),
                ));
            }
            *now = self.now_at(i);
        }
        let mut refused: Option<(usize, Denied)> = None;
        for (i, &now) in now.iter().enumerate().take(Self::LEN) {
            if let Err(denied) = self.look_at(i, now, cost, max_wait) {
                if refused.map_or(true, |(_, worst)| denied.wait() > worst.wait()) {
                    refused = Some((i, denied));
                }
            }
        }
        if let Some((layer, denied)) = refused {
            return Err(LayerError::new(layer, denied.into()));
        }
        let (mut holds, mut ready_at) = ([Hold::NOTHING; MAX_LAYERS], [Nanos::ZERO; MAX_LAYERS]);
        for (i, &now) in now.iter().enumerate().take(Self::LEN) {
            match self.hold_at(i, now, cost, max_wait) {
                Ok((hold, turn)) => (holds[i], ready_at[i]) = (hold, turn),
                Err(denied) => {
                    for held in (0..i).rev() {
                        self.cancel_at(held, holds[held]);
                    }
                    return Err(LayerError::new(i, denied.into()));
                }
            }
        }
        Ok(LayeredReservation {
            layers: self,
            holds,
            ready_at,
        })
    }
}

/// A request admitted into several layers' schedules, to proceed when its turn has come in all
/// of them: made by [`ReserveAll::reserve_all`]. Dropping it keeps the places;
/// [`cancel`](LayeredReservation::cancel) gives back each that nothing depends on, as
/// [`Reservation::cancel`](crate::Reservation::cancel) does.
#[must_use = "a reservation holds a place in the schedule: wait for it, or cancel it"]
pub struct LayeredReservation<T> {
    layers: T,
    holds: [Hold; MAX_LAYERS],
    /// Each layer's turn, on its own clock.
    ready_at: [Nanos; MAX_LAYERS],
}

impl<T: Turns> LayeredReservation<T> {
    /// How long the request must still wait: until its turn has come in every layer, each on
    /// its own clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::layers::ReserveAll;
    /// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let a = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    /// let b = RateLimiter::with_clock(Gcra::from(Quota::per_second(5).unwrap()), &clock);
    /// a.check_n(10).unwrap();
    /// b.check_n(5).unwrap();
    /// let turn = (&a, &b).reserve_all(1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(turn.delay(), Duration::from_millis(200)); // b's turn, after a's 100 ms
    /// ```
    #[must_use]
    pub fn delay(&self) -> Duration {
        (0..T::LEN)
            .map(|i| {
                let now = self.layers.now_at(i).as_nanos();
                Duration::from_nanos(self.ready_at[i].as_nanos().saturating_sub(now))
            })
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Gives back each layer's place that nothing stands behind, in reverse order: `true` if
    /// every layer's was given back.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::layers::ReserveAll;
    /// use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let a = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    /// let b = RateLimiter::with_clock(Gcra::from(Quota::per_second(5).unwrap()), &clock);
    /// a.check_n(10).unwrap();
    /// b.check_n(5).unwrap();
    /// let turn = (&a, &b).reserve_all(1, Duration::from_secs(1)).unwrap();
    /// assert!(turn.cancel());
    /// assert_eq!(b.reserve(1, Duration::from_secs(1)).unwrap().delay(), Duration::from_millis(200));
    /// ```
    pub fn cancel(self) -> bool {
        (0..T::LEN)
            .rev()
            .map(|i| self.layers.cancel_at(i, self.holds[i]))
            .fold(true, |all, given| all & given)
    }

    /// Blocks the thread until the request's turn has come in every layer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::layers::ReserveAll;
    /// use tollgate::{Quota, RateLimiter};
    /// let (a, b) = (RateLimiter::gcra(Quota::per_second(500).unwrap()), RateLimiter::gcra(Quota::per_second(100).unwrap()));
    /// (&a, &b).reserve_all(1, Duration::from_secs(1)).unwrap().wait();
    /// ```
    pub fn wait(self) {
        let delay = self.delay();
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }

    /// Waits on tokio's timer until the request's turn has come in every layer. Dropped before
    /// then, the future [cancels](LayeredReservation::cancel) the reservation.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::layers::ReserveAll;
    /// use tollgate::{Quota, RateLimiter};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (a, b) = (RateLimiter::gcra(Quota::per_second(500).unwrap()), RateLimiter::gcra(Quota::per_second(100).unwrap()));
    /// (&a, &b).reserve_all(1, Duration::from_secs(1)).unwrap().ready().await;
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn ready(self) {
        let delay = self.delay();
        let mut pending = CancelOnDrop(Some(self));
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        pending.0 = None;
    }
}

#[cfg(feature = "tokio")]
struct CancelOnDrop<T: Turns>(Option<LayeredReservation<T>>);

#[cfg(feature = "tokio")]
impl<T: Turns> Drop for CancelOnDrop<T> {
    fn drop(&mut self) {
        if let Some(reservation) = self.0.take() {
            reservation.cancel();
        }
    }
}

/// The turns, on the layers' clocks.
impl<T: Turns> fmt::Debug for LayeredReservation<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LayeredReservation")
            .field("ready_at", &&self.ready_at[..T::LEN])
            .finish_non_exhaustive()
    }
}

/// A reservation's step on a word: the words before and after, or the refusal. The loop
/// carries the two words only.
#[inline]
fn step(
    gcra: &Gcra,
    word: u64,
    now: Nanos,
    cost: u64,
    max_wait: Nanos,
) -> (Result<[u64; 2], Denied>, u64) {
    match gcra.reserve(word, now, cost, max_wait) {
        Transition::Allow { state } => (Ok([word, state]), state),
        Transition::Deny { retry_after } => (Err(Denied::new(retry_after)), word),
    }
}

/// A hold's turn: at once for a cost of 0.
#[inline]
fn turn(
    gcra: &Gcra,
    [before, after]: [u64; 2],
    now: Nanos,
    recorded: bool,
    generation: u64,
) -> (Hold, Nanos) {
    let ready_at = if before == after {
        now
    } else {
        gcra.ready_at(after, now)
    };
    (
        Hold {
            before,
            after,
            recorded,
            generation,
        },
        ready_at,
    )
}

/// A cancel's step: the state before the hold, if the state is still the one it left.
pub(crate) fn give_back(hold: Hold) -> impl FnMut(u64) -> (bool, u64) {
    move |state| {
        if hold.recorded && hold.before != hold.after && state == hold.after {
            (true, hold.before)
        } else {
            (false, state)
        }
    }
}

impl<C: Clock> Turn for RateLimiter<Gcra, C> {
    fn now(&self) -> Nanos {
        self.clock().now()
    }

    fn capacity(&self) -> u64 {
        crate::algorithm::Algorithm::capacity(&self.algorithm())
    }

    fn look(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(), Denied> {
        let loaded = self.cell().load();
        step(&loaded.algorithm, loaded.word, now, cost, max_wait)
            .0
            .map(|_| ())
    }

    #[inline]
    fn hold(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(Hold, Nanos), Denied> {
        let (held, generation, gcra) = self
            .cell()
            .update_full(|word, gcra| step(gcra, word, now, cost, max_wait));
        Ok(turn(&gcra, held?, now, true, generation))
    }

    fn cancel(&self, hold: Hold) -> bool {
        let mut give_back = give_back(hold);
        let cancelled = self
            .cell()
            .update_in(hold.generation, |word, _| give_back(word));
        cancelled == Some(true)
    }
}

impl<K: ?Sized, C: Clock, S: BuildHasher> Turn for KeyedLayer<'_, K, Gcra, C, S> {
    fn now(&self) -> Nanos {
        self.limiter.clock().now()
    }

    fn capacity(&self) -> u64 {
        crate::algorithm::Algorithm::capacity(&self.limiter.algorithm())
    }

    fn look(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(), Denied> {
        let limiter = self.limiter;
        let (word, current) = limiter.table().state(&self.probe, limiter.quotas());
        step(&current.algorithm, word, now, cost, max_wait)
            .0
            .map(|_| ())
    }

    #[inline]
    fn hold(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(Hold, Nanos), Denied> {
        let limiter = self.limiter;
        let quotas = limiter.quotas();
        let overflow = limiter.overflow();
        // The outcome keeps the generation it was decided in: a hold is given back only in it.
        let step = |word, current: &Current<Gcra>| {
            let (held, next) = step(&current.algorithm, word, now, cost, max_wait);
            ((held, *current), next)
        };
        match limiter
            .table()
            .update(&self.probe, quotas, quotas.load(), now, overflow, step)
        {
            Ok((held, current)) => Ok(turn(
                &current.algorithm,
                held?,
                now,
                true,
                current.generation,
            )),
            Err(Overflowed {
                fresh: (fresh, current),
                ..
            }) if overflow == Overflow::Allow => Ok(turn(
                &current.algorithm,
                fresh?,
                now,
                false,
                current.generation,
            )),
            Err(Overflowed { retry_after, .. }) => Err(Denied::no_room(retry_after)),
        }
    }

    fn cancel(&self, hold: Hold) -> bool {
        let counter = self.limiter.quotas().counter();
        let table = self.limiter.table();
        table.update_existing(&self.probe, counter, hold.generation, give_back(hold)) == Some(true)
    }
}

impl<T: Turn + ?Sized> Turn for &T {
    fn now(&self) -> Nanos {
        (**self).now()
    }
    fn capacity(&self) -> u64 {
        (**self).capacity()
    }
    fn look(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(), Denied> {
        (**self).look(now, cost, max_wait)
    }
    fn hold(&self, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(Hold, Nanos), Denied> {
        (**self).hold(now, cost, max_wait)
    }
    fn cancel(&self, hold: Hold) -> bool {
        (**self).cancel(hold)
    }
}

macro_rules! turns {
    ($n:literal; $($layer:ident $i:tt),+) => {
        impl<$($layer: Reservable),+> ReserveAll for ($($layer,)+) {}

        impl<$($layer: Reservable),+> Turns for ($($layer,)+) {
            const LEN: usize = $n;

            fn now_at(&self, i: usize) -> Nanos {
                match i { $($i => self.$i.now(),)+ _ => unreachable!() }
            }
            fn capacity_at(&self, i: usize) -> u64 {
                match i { $($i => self.$i.capacity(),)+ _ => unreachable!() }
            }
            fn look_at(&self, i: usize, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(), Denied> {
                match i { $($i => self.$i.look(now, cost, max_wait),)+ _ => unreachable!() }
            }
            fn hold_at(&self, i: usize, now: Nanos, cost: u64, max_wait: Nanos) -> Result<(Hold, Nanos), Denied> {
                match i { $($i => self.$i.hold(now, cost, max_wait),)+ _ => unreachable!() }
            }
            fn cancel_at(&self, i: usize, hold: Hold) -> bool {
                match i { $($i => self.$i.cancel(hold),)+ _ => unreachable!() }
            }
        }
    };
}

turns!(1; A 0);
turns!(2; A 0, B 1);
turns!(3; A 0, B 1, C 2);
turns!(4; A 0, B 1, C 2, D 3);
turns!(5; A 0, B 1, C 2, D 3, E 4);
turns!(6; A 0, B 1, C 2, D 3, E 4, F 5);
turns!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
turns!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
