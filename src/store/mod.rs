//! Stores: where the packed words live, and the one compare-and-swap loop that applies an
//! algorithm's transition to them. This is the only code in the crate that touches atomics, and it
//! takes them from [`crate::sync`] alone.
//!
//! - [`StateCell`]: one cache-padded `AtomicU64`, the state of a direct limiter.
//!
//! # Orderings
//!
//! Every access to a state word is `Relaxed`. The argument:
//!
//! 1. **The word is the whole state.** A decision is a pure function of the word, the time stamp
//!    and the cost; no other memory is read because of a word's value, and no other memory is
//!    published through it. There is nothing for an acquire to make visible.
//! 2. **Read-modify-writes on one location are totally ordered**, whatever their ordering (the
//!    location's modification order), and a compare-and-swap succeeds only if the word it replaces
//!    is the latest in that order. So every admission is computed from the word that every
//!    earlier admission left, exactly as if the decisions ran one after another in that order:
//!    that is the linearization, and the single-threaded reference models define what each
//!    decision in it must be.
//! 3. **A stale load costs a retry, never a wrong answer.** The first load of the loop may return
//!    an old word; then the compare-and-swap fails, returns the current word, and the transition is
//!    recomputed from it. A denial (or a peek) is decided from a word that was current at its
//!    load, which places it in the order at that point: it writes nothing, so no one depends on it.
//! 4. **Callers that synchronise among themselves see each other's decisions.** If one thread's
//!    admission happens-before another thread's check (through a channel, a lock, a join), the
//!    later load reads that admission's word or a later one (write-read coherence), with no
//!    ordering needed on the word itself.
//!
//! A weaker ordering than `Relaxed` does not exist, and a stronger one would add fences on ARM for
//! nothing; x86 makes every read-modify-write a full barrier anyway.
//!
//! The loom models in `loom-tests/` check these claims under every interleaving loom can reach:
//! exact admission counts from racing threads and no lost update.

mod cell;

pub(crate) use cell::StateCell;
