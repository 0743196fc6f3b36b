//! One cache-padded atomic word: the state of a direct limiter.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering::Relaxed};

/// A state word on a cache line of its own, so that the hot word of one limiter never shares a
/// line with anything else (false sharing would turn every admission into a cache-line transfer).
pub(crate) struct StateCell {
    word: CachePadded<AtomicU64>,
}

impl StateCell {
    /// A cell holding the fresh state (the all-zero word).
    pub(crate) fn new() -> StateCell {
        StateCell {
            word: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// The current word (see the orderings argument in [the module docs](super)).
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.word.load(Relaxed)
    }

    /// Replaces the word with the fresh state. A swap, not a loop: it takes its place in the
    /// word's modification order like an admission, and every compare-and-swap computed from an
    /// earlier word fails on it and is decided again from the fresh one.
    ///
    /// A plain store would do as much in the memory model, but loom cannot check a store racing
    /// read-modify-writes on the same word: a load after both can be served the overwritten
    /// value (tokio-rs/loom#282, #389), and the model `reset_races_a_decision` fails on that.
    /// With every write a read-modify-write, loom checks the reset like the rest; a reset is
    /// rare, so its locked instruction costs nothing that matters.
    #[inline]
    pub(crate) fn reset(&self) {
        self.word.swap(0, Relaxed);
    }

    /// Applies `step` to the current word until its result sticks.
    ///
    /// `step` returns the caller's outcome and the word to store; it is called again with the
    /// newer word whenever another thread wrote in between. When it returns the word it was given
    /// (a denial, a peek) nothing is written: a denial costs a load, not a cache-line transfer.
    #[inline]
    pub(crate) fn update<T>(&self, step: impl FnMut(u64) -> (T, u64)) -> T {
        self.update_from(self.word.load(Relaxed), step)
    }

    /// [`update`](StateCell::update) from a word loaded earlier: the first compare-and-swap
    /// expects it, and fails over to the current word if it has changed since.
    #[inline]
    pub(crate) fn update_from<T>(
        &self,
        mut current: u64,
        mut step: impl FnMut(u64) -> (T, u64),
    ) -> T {
        loop {
            let (outcome, next) = step(current);
            if next == current {
                return outcome;
            }
            match self
                .word
                .compare_exchange_weak(current, next, Relaxed, Relaxed)
            {
                Ok(_) => return outcome,
                Err(actual) => current = actual,
            }
        }
    }
}
