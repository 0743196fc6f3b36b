//! Words that one writer replaces while other threads read them, without a lock on the read:
//! a reconfigurable limiter's algorithm, generation by generation.
//!
//! A [`Config`] holds one generation's words behind a stamp, the generation's number: the writer
//! sets the stamp to [`WRITING`], issues a release fence, stores the words, and sets the stamp to
//! the generation with a release store; a reader of generation `g` loads the stamp (acquire),
//! the words, issues an acquire fence, and loads the stamp again: the words are `g`'s if both
//! loads saw `g` (a seqlock whose readers never wait: they ask for one generation, and a slot
//! that holds another, or is being written, sends them back to find the current one).
//!
//! [`Versions`] keeps the current generation beside two slots, by parity: a writer fills the
//! slot of the next generation, which no reader of the current one reads, and then publishes
//! it. A reader that loaded a generation two behind finds its slot rewritten and loads the
//! generation again. Generations count writes in a `u64` and never repeat.

#[cfg(feature = "redis")]
use crate::sync::Mutex;
use crate::sync::{
    fence, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

/// A slot's stamp while its words are being written.
const WRITING: u64 = u64::MAX;

/// One generation's words, behind a stamp (the generation).
pub(crate) struct Config<const N: usize> {
    stamp: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> Config<N> {
    pub(crate) fn new() -> Config<N> {
        Config {
            stamp: AtomicU64::new(WRITING),
            words: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Writes `generation`'s words; one writer at a time.
    pub(crate) fn write(&self, generation: u64, words: [u64; N]) {
        self.stamp.store(WRITING, Relaxed);
        fence(Release);
        for (slot, word) in self.words.iter().zip(words) {
            slot.store(word, Relaxed);
        }
        self.stamp.store(generation, Release);
    }

    /// `generation`'s words, or `None` if the slot holds, or is being written with, another's.
    #[inline]
    pub(crate) fn read(&self, generation: u64) -> Option<[u64; N]> {
        if self.stamp.load(Acquire) != generation {
            return None;
        }
        let words = core::array::from_fn(|i| self.words[i].load(Relaxed));
        fence(Acquire);
        (self.stamp.load(Relaxed) == generation).then_some(words)
    }
}

/// The current generation's words, replaced by [`store`](Versions::store) and read without a
/// lock by [`load`](Versions::load).
#[cfg(feature = "redis")]
pub(crate) struct Versions<const N: usize> {
    generation: AtomicU64,
    slots: [Config<N>; 2],
    writer: Mutex<()>,
}

#[cfg(feature = "redis")]
impl<const N: usize> Versions<N> {
    /// Generation 0, holding `words`.
    pub(crate) fn new(words: [u64; N]) -> Versions<N> {
        let versions = Versions {
            generation: AtomicU64::new(0),
            slots: [Config::new(), Config::new()],
            writer: Mutex::new(()),
        };
        versions.slots[0].write(0, words);
        versions
    }

    /// The current words.
    pub(crate) fn load(&self) -> [u64; N] {
        loop {
            let generation = self.generation.load(Acquire);
            if let Some(words) = self.slots[(generation & 1) as usize].read(generation) {
                return words;
            }
        }
    }

    /// Makes `words` the current words, for every load that starts after this returns.
    pub(crate) fn store(&self, words: [u64; N]) {
        let _one_writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let next = self.generation.load(Relaxed) + 1;
        self.slots[(next & 1) as usize].write(next, words);
        self.generation.store(next, Release);
    }
}
