//! The state of a direct limiter: one cache-padded word, and the generations that
//! reconfigurations move it through.
//!
//! A limiter that is never reconfigured decides on `word` alone, with the algorithm it was built
//! with, exactly as a cell without generations would: one load and one compare-and-swap, plus a
//! comparison with [`MOVED`] that never succeeds.
//!
//! A decision must read its algorithm and its state together: a state converted for the new
//! quota but judged by the old one (or the reverse) would admit what neither allows. So the
//! first reconfiguration retires `word` for good, by swapping it for [`MOVED`], which is never a
//! state: every compare-and-swap computed from an earlier word fails on it, and no later one can
//! succeed, so no decision made with the first algorithm lands after the move. From then on the
//! state lives in `moved`, a 128-bit word holding the generation beside the state, and each
//! generation's algorithm is kept in `configs`, by the generation's parity. A decision loads
//! `moved`, reads the algorithm of the generation it holds, and swaps the whole 128-bit word:
//! a reconfiguration in between changes the generation, the swap fails, and the decision is
//! made again with the new algorithm. Generations never repeat (a `u64` that counts
//! reconfigurations), so no state seen under one generation can come back under another
//! (no ABA). A reconfigured limiter pays for the 128-bit word and the quota's slot, about half
//! again a check's time uncontended, and only it does.
//!
//! Each reconfiguration converts the state with [`Algorithm::carry_over`] at its clock read.
//! The first one must also get the last word of generation 0 into `moved` without losing an
//! admission and without making deciders wait: it publishes `(generation 1, pending, word)` in
//! `moved`, then swaps `word` for `MOVED` only if the word is still the one it published (else it
//! publishes the newer one and tries again). Whoever then finds the pending word (the
//! reconfiguration itself, or a decider that met `MOVED`) converts it, with the time the
//! reconfiguration recorded, and installs generation 1; all compute the same word, and one
//! compare-and-swap wins.
//!
//! Reconfigurations take a mutex among themselves (deciders never touch it): they are rare, and
//! one at a time keeps each generation's algorithm written once, before any decider can see the
//! generation. A reconfiguration converting the state retries while decisions keep changing it;
//! every retry means a decision was made.
//!
//! # Orderings
//!
//! Decisions in a generation follow the argument of [the module docs](super): `Relaxed` on the
//! state words. What a generation adds is the algorithm beside the state, published through the
//! state word:
//!
//! - A reconfiguration writes the next generation's algorithm (see [`Config`]), and the first
//!   one the time of its conversion, *then* publishes the generation with a release
//!   compare-and-swap (or, for the first, the release swap of `word` for `MOVED`).
//! - A decider that reads `MOVED` (a relaxed load or a failed compare-and-swap) issues an
//!   acquire fence, and loads `moved` with acquire, so it sees everything written before the
//!   generation was published: the algorithm of the generation it loaded is complete.
//! - A decider may load a generation that is already old. Its algorithm's slot may then be
//!   being overwritten for a generation two later; the read sees a stamp other than its
//!   generation, and the decision loads `moved` again. A read that passes is of the
//!   generation's own words; its compare-and-swap still fails if the generation moved on.

use crossbeam_utils::CachePadded;

use super::config::Config;
use crate::algorithm::Algorithm;
use crate::clock::Nanos;
use crate::sync::{
    fence, AtomicU128, AtomicU64, Mutex,
    Ordering::{Acquire, Relaxed, Release},
};

/// What `word` holds once the state has moved to `moved` (never a state, see
/// [`Algorithm`]'s conventions).
const MOVED: u64 = u64::MAX;
/// A generation in `moved` with this bit is pending: its word is generation 0's last, not yet
/// converted.
const PENDING: u64 = 1 << 63;

/// A generation and its state, as `moved` packs them.
const fn join(generation: u64, word: u64) -> u128 {
    (generation as u128) << 64 | word as u128
}

const fn split(packed: u128) -> (u64, u64) {
    ((packed >> 64) as u64, packed as u64)
}

/// A state as loaded, with the generation and the algorithm that judge it. Public, in a private
/// module, for the sealed steps of a layered check.
#[derive(Clone, Copy, Debug)]
pub struct Loaded<A> {
    pub(crate) generation: u64,
    pub(crate) word: u64,
    pub(crate) algorithm: A,
}

/// A direct limiter's state, on a cache line of its own (false sharing would turn every
/// admission into a cache-line transfer), and its algorithm, which
/// [`reconfigure`](StateCell::reconfigure) may change while other threads decide.
pub(crate) struct StateCell<A> {
    /// Generation 0's state, and [`MOVED`] from the first reconfiguration on.
    word: CachePadded<AtomicU64>,
    /// From generation 1: the generation and its state ([`join`]).
    moved: CachePadded<AtomicU128>,
    /// Generation 0's algorithm.
    first: A,
    /// Every later generation's algorithm, by the generation's parity.
    configs: [Config<3>; 2],
    /// The time of the first reconfiguration's conversion, for whoever completes it.
    moved_at: AtomicU64,
    /// The reconfigurations, one at a time, and the generation and algorithm in force.
    current: Mutex<(u64, A)>,
}

impl<A: Algorithm> StateCell<A> {
    /// A cell holding the fresh state (the all-zero word), judged by `algorithm`.
    pub(crate) fn new(algorithm: A) -> StateCell<A> {
        StateCell {
            word: CachePadded::new(AtomicU64::new(0)),
            moved: CachePadded::new(AtomicU128::new(0)),
            first: algorithm,
            configs: [Config::new(), Config::new()],
            moved_at: AtomicU64::new(0),
            current: Mutex::new((0, algorithm)),
        }
    }

    /// The current state, with its generation and algorithm (see the orderings argument in
    /// [the module docs](super)).
    #[inline]
    pub(crate) fn load(&self) -> Loaded<A> {
        let word = self.word.load(Relaxed);
        if word != MOVED {
            return Loaded {
                generation: 0,
                word,
                algorithm: self.first,
            };
        }
        fence(Acquire);
        let mut packed = self.moved.load(Acquire);
        loop {
            match self.loaded(packed) {
                Ok(loaded) => return loaded,
                Err(newer) => packed = newer,
            }
        }
    }

    /// The algorithm in force.
    pub(crate) fn algorithm(&self) -> A {
        self.load().algorithm
    }

    /// Replaces the state with the fresh one, in whatever generation the cell is: it takes its
    /// place in the state's modification order like an admission, and every compare-and-swap
    /// computed from an earlier word fails on it and is decided again from the fresh one.
    pub(crate) fn reset(&self) {
        self.update(|_, _| ((), 0));
    }

    /// Applies `step` to the current state and its algorithm until its result sticks.
    ///
    /// `step` returns the caller's outcome and the word to store; it is called again with the
    /// newer word (and the newer algorithm, after a reconfiguration) whenever another thread
    /// wrote in between. When it returns the word it was given (a denial, a peek) nothing is
    /// written: a denial costs a load, not a cache-line transfer.
    #[inline]
    pub(crate) fn update<T>(&self, step: impl FnMut(u64, &A) -> (T, u64)) -> T {
        self.update_from(self.word.load(Relaxed), step).0
    }

    /// [`update`](StateCell::update), returning with the outcome the generation it was decided
    /// in and that generation's algorithm.
    #[inline]
    pub(crate) fn update_full<T>(&self, step: impl FnMut(u64, &A) -> (T, u64)) -> (T, u64, A) {
        self.update_from(self.word.load(Relaxed), step)
    }

    /// [`update_full`](StateCell::update_full) from a state loaded earlier: the first
    /// compare-and-swap expects it, and fails over to the current state if it has changed
    /// since.
    #[inline]
    pub(crate) fn update_loaded<T>(
        &self,
        loaded: Loaded<A>,
        step: impl FnMut(u64, &A) -> (T, u64),
    ) -> (T, u64, A) {
        if loaded.generation == 0 {
            self.update_from(loaded.word, step)
        } else {
            self.update_moved(join(loaded.generation, loaded.word), step)
        }
    }

    /// The algorithm of `generation`, if it is still known: generation 0's always, a later
    /// one's until the generation two after it is configured.
    pub(crate) fn algorithm_of(&self, generation: u64) -> Option<A> {
        if generation == 0 {
            return Some(self.first);
        }
        self.configs[(generation & 1) as usize]
            .read(generation)
            .map(A::from_words)
    }

    /// [`update`](StateCell::update) for as long as the cell is in `generation`: `None`, and
    /// nothing written, once a reconfiguration has moved it on. What a cancel does: a hold
    /// taken in one generation means nothing in the next, whose state was converted with it.
    pub(crate) fn update_in<T>(
        &self,
        generation: u64,
        mut step: impl FnMut(u64, &A) -> (T, u64),
    ) -> Option<T> {
        if generation == 0 {
            let mut current = self.word.load(Relaxed);
            loop {
                if current == MOVED {
                    return None;
                }
                let (outcome, next) = step(current, &self.first);
                if next == current {
                    return Some(outcome);
                }
                match self
                    .word
                    .compare_exchange_weak(current, next, Relaxed, Relaxed)
                {
                    Ok(_) => return Some(outcome),
                    Err(actual) => current = actual,
                }
            }
        }
        let mut packed = self.moved.load(Acquire);
        loop {
            let loaded = match self.loaded(packed) {
                Ok(loaded) => loaded,
                Err(newer) => {
                    packed = newer;
                    continue;
                }
            };
            if loaded.generation != generation {
                return None;
            }
            let (outcome, next) = step(loaded.word, &loaded.algorithm);
            if next == loaded.word {
                return Some(outcome);
            }
            match self
                .moved
                .compare_exchange(packed, join(generation, next), Relaxed, Acquire)
            {
                Ok(_) => return Some(outcome),
                Err(actual) => packed = actual,
            }
        }
    }

    #[inline]
    fn update_from<T>(
        &self,
        mut current: u64,
        mut step: impl FnMut(u64, &A) -> (T, u64),
    ) -> (T, u64, A) {
        loop {
            if current == MOVED {
                return self.update_moved(self.moved_word(), step);
            }
            let (outcome, next) = step(current, &self.first);
            if next == current {
                return (outcome, 0, self.first);
            }
            match self
                .word
                .compare_exchange_weak(current, next, Relaxed, Relaxed)
            {
                Ok(_) => return (outcome, 0, self.first),
                Err(actual) => current = actual,
            }
        }
    }

    /// `moved`, for a decider that has just read [`MOVED`] (relaxed): the fence pairs with the
    /// release swap that retired `word`.
    #[cold]
    fn moved_word(&self) -> u128 {
        fence(Acquire);
        self.moved.load(Acquire)
    }

    #[cold]
    fn update_moved<T>(
        &self,
        mut packed: u128,
        mut step: impl FnMut(u64, &A) -> (T, u64),
    ) -> (T, u64, A) {
        loop {
            let loaded = match self.loaded(packed) {
                Ok(loaded) => loaded,
                Err(newer) => {
                    packed = newer;
                    continue;
                }
            };
            let (outcome, next) = step(loaded.word, &loaded.algorithm);
            if next == loaded.word {
                return (outcome, loaded.generation, loaded.algorithm);
            }
            match self.moved.compare_exchange(
                packed,
                join(loaded.generation, next),
                Relaxed,
                Acquire,
            ) {
                Ok(_) => return (outcome, loaded.generation, loaded.algorithm),
                Err(actual) => packed = actual,
            }
        }
    }

    /// The state `packed` holds, with its algorithm; or the newer value of `moved` to try
    /// instead, when `packed` was pending (after completing it) or its generation's algorithm
    /// has since been overwritten.
    fn loaded(&self, packed: u128) -> Result<Loaded<A>, u128> {
        let (generation, word) = split(packed);
        if generation & PENDING != 0 {
            return Err(self.complete_move(packed));
        }
        match self.configs[(generation & 1) as usize].read(generation) {
            Some(words) => Ok(Loaded {
                generation,
                word,
                algorithm: A::from_words(words),
            }),
            None => Err(self.moved.load(Acquire)),
        }
    }

    /// Converts generation 0's last word, published pending in `moved`, into generation 1's:
    /// the same word whoever computes it. Returns `moved` as it is after.
    fn complete_move(&self, pending: u128) -> u128 {
        let (_, word) = split(pending);
        let at = Nanos::from_nanos(self.moved_at.load(Relaxed));
        // Generation 1's slot is not rewritten before generation 2, which this move precedes.
        let to = match self.configs[1].read(1) {
            Some(words) => A::from_words(words),
            None => return self.moved.load(Acquire),
        };
        let converted = join(1, self.first.carry_over(word, at, &to));
        match self
            .moved
            .compare_exchange(pending, converted, Release, Acquire)
        {
            Ok(_) => converted,
            Err(actual) => actual,
        }
    }

    /// Makes `to` the algorithm, converting the state with [`Algorithm::carry_over`] at
    /// `now()`. Returns `false`, and changes nothing, if `to` is the algorithm in force.
    pub(crate) fn reconfigure(&self, to: A, now: impl Fn() -> Nanos) -> bool {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (generation, from) = *current;
        if from.to_words() == to.to_words() {
            return false;
        }
        let next = generation + 1;
        self.configs[(next & 1) as usize].write(next, to.to_words());
        if generation == 0 {
            self.moved_at.store(now().as_nanos(), Relaxed);
            let mut word = self.word.load(Relaxed);
            let pending = loop {
                let pending = join(PENDING | 1, word);
                self.moved.swap(pending, Release);
                match self.word.compare_exchange(word, MOVED, Release, Relaxed) {
                    Ok(_) => break pending,
                    Err(actual) => word = actual,
                }
            };
            self.complete_move(pending);
        } else {
            let mut packed = self.moved.load(Acquire);
            loop {
                let (_, word) = split(packed);
                let converted = join(next, from.carry_over(word, now(), &to));
                match self
                    .moved
                    .compare_exchange(packed, converted, Release, Acquire)
                {
                    Ok(_) => break,
                    Err(actual) => packed = actual,
                }
            }
        }
        *current = (next, to);
        true
    }
}
