//! The algorithm of a keyed table's entries, generation by generation: what a keyed limiter's
//! reconfiguration changes while other threads decide.
//!
//! Generation 0 is the algorithm the limiter was built with, kept as a plain field: a table that
//! is never reconfigured pays one load of the generation number per decision, and no more, and
//! holds no room for later generations (80 bytes, allocated by the first reconfiguration).
//! Each reconfiguration writes the next generation's algorithm and the clock reading its
//! conversion uses (a [`Config`] at the generation's parity), then publishes the number with a
//! release store; the table then converts every entry of the previous generation (the walk in
//! `table.rs`). Reconfigurations take a mutex among themselves and hold it through the walk, so
//! that at any moment the table's entries are of the current generation or, while a walk runs,
//! of the one before it, whose algorithm is still in its slot: the next reconfiguration, which
//! would overwrite that slot, waits for the walk.

use std::sync::OnceLock;

use super::config::Config;
use crate::algorithm::Algorithm;
use crate::clock::Nanos;
use crate::sync::{
    fence, AtomicU64, Mutex,
    Ordering::{Acquire, Relaxed, Release},
};

/// A generation's number and its algorithm, as a decision loaded them. Public, in a private
/// module, for the sealed steps of a layered check.
#[derive(Clone, Copy, Debug)]
pub struct Current<A> {
    pub(crate) generation: u64,
    pub(crate) algorithm: A,
}

/// The generations of a keyed table's algorithm.
pub(crate) struct Generations<A> {
    generation: AtomicU64,
    /// Generation 0's algorithm.
    first: A,
    /// Each later generation's algorithm (three words) and its conversion time, by parity;
    /// set before generation 1 is published.
    configs: OnceLock<Box<[Config<4>; 2]>>,
    /// One reconfiguration at a time, from its publication to the end of its walk.
    writer: Mutex<()>,
}

impl<A: Algorithm> Generations<A> {
    /// Generation 0, running `first`.
    pub(crate) fn new(first: A) -> Generations<A> {
        Generations {
            generation: AtomicU64::new(0),
            first,
            configs: OnceLock::new(),
            writer: Mutex::new(()),
        }
    }

    /// The current generation and its algorithm.
    #[inline]
    pub(crate) fn load(&self) -> Current<A> {
        // Generation 0's algorithm is a field written before the limiter was shared: only a
        // later one's words need the acquire, which `load_later` issues.
        let generation = self.generation.load(Relaxed);
        if generation == 0 {
            return Current {
                generation,
                algorithm: self.first,
            };
        }
        self.load_later(generation)
    }

    #[cold]
    fn load_later(&self, mut generation: u64) -> Current<A> {
        // Pairs with the release store that published `generation`: its words are written.
        fence(Acquire);
        loop {
            if let Some(algorithm) = self.of(generation) {
                return Current {
                    generation,
                    algorithm,
                };
            }
            // Its slot is being rewritten for a generation two later: this one is over.
            generation = self.generation.load(Acquire);
        }
    }

    /// The current generation's number, for an inserter checking that the generation it
    /// inserts in is still the current one (after its `SeqCst` fence, see `table.rs`).
    #[inline]
    pub(crate) fn number(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// The current generation's number, where a reservation can find it without knowing the
    /// algorithm's type.
    pub(crate) fn counter(&self) -> &AtomicU64 {
        &self.generation
    }

    /// The algorithm of `generation`, if it is still known: generation 0's always, a later
    /// one's until the generation two after it is configured.
    pub(crate) fn of(&self, generation: u64) -> Option<A> {
        if generation == 0 {
            return Some(self.first);
        }
        let [a, b, c, _] = self.configs.get()?[(generation & 1) as usize].read(generation)?;
        Some(A::from_words([a, b, c]))
    }

    /// How entries of the generation before `generation` are converted into it: that
    /// generation's algorithm and the clock reading of the conversion. `None` for generation 0,
    /// or once either slot has been rewritten (the caller's generation is over).
    pub(crate) fn conversion(&self, generation: u64) -> Option<(A, Nanos)> {
        let previous = self.of(generation.checked_sub(1)?)?;
        let [.., at] = self.configs.get()?[(generation & 1) as usize].read(generation)?;
        Some((previous, Nanos::from_nanos(at)))
    }

    /// Makes `to` the algorithm, as generation `n + 1`, with `at` as its conversion time, and
    /// calls `convert` with it (the walk that converts the entries of generation `n`) before
    /// any later reconfiguration may begin. Returns `false`, and changes nothing, if `to` is
    /// the algorithm in force.
    pub(crate) fn reconfigure(
        &self,
        to: A,
        at: impl FnOnce() -> Nanos,
        convert: impl FnOnce(Current<A>),
    ) -> bool {
        let _one_writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.load();
        if current.algorithm.to_words() == to.to_words() {
            return false;
        }
        let next = current.generation + 1;
        let [a, b, c] = to.to_words();
        let configs = self
            .configs
            .get_or_init(|| Box::new([Config::new(), Config::new()]));
        configs[(next & 1) as usize].write(next, [a, b, c, at().as_nanos()]);
        self.generation.store(next, Release);
        convert(Current {
            generation: next,
            algorithm: to,
        });
        true
    }

    /// Bytes allocated for later generations: none until the first reconfiguration.
    pub(crate) fn memory(&self) -> usize {
        self.configs
            .get()
            .map_or(0, |_| core::mem::size_of::<[Config<4>; 2]>())
    }

    /// Calls `f` with the current generation while no reconfiguration runs: every entry of the
    /// table is of that generation for the whole call (a snapshot's view).
    pub(crate) fn steady<T>(&self, f: impl FnOnce(Current<A>) -> T) -> T {
        let _no_writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(self.load())
    }
}
