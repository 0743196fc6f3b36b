//! Stores: where the packed words live, and the one compare-and-swap loop that applies an
//! algorithm's transition to them. This is the only code in the crate that touches atomics, and it
//! takes them from [`crate::sync`] alone.
//!
//! - [`StateCell`]: one cache-padded `AtomicU64`, the state of a direct limiter, and the
//!   generations that reconfigurations move it through (its protocol is in the `cell` module).
//! - [`Table`]: fixed-size groups of 128-bit `(tag, state)` slots, the states of a keyed limiter
//!   (its protocol is described in the `table` module; how a capacity is cut into shards and
//!   groups, and which slots a key's hash points to, in the `layout` module). What happens when a
//!   new key finds no room ([`Overflow`]) and the table's counters ([`KeyedStats`]) are in the
//!   `overflow` module; the table's algorithm, generation by generation as reconfigurations
//!   change it, in the `generations` module.
//!
//! # Orderings
//!
//! Every access to a state word or a slot is `Relaxed`, and there is one fence on the protocol's
//! path: `SeqCst`, between a slot reservation and the scan that validates it. The argument,
//! first for one word:
//!
//! 1. **The word is the whole state.** A decision is a pure function of the word, the time stamp
//!    and the cost; no other memory is published through it, and the only memory read because of
//!    a word's value is fixed when the table is built (the room of each tier a slot's tag can
//!    name). There is nothing for an acquire to make visible.
//! 2. **Read-modify-writes on one location are totally ordered**, whatever their ordering (the
//!    location's modification order), and a compare-and-swap succeeds only if the word it replaces
//!    is the latest in that order. So every admission is computed from the word that every
//!    earlier admission left, exactly as if the decisions ran one after another in that order:
//!    that is the linearization, and the single-threaded reference models define what each
//!    decision in it must be. A direct limiter's reset, a swap to the fresh word, takes a place in
//!    the same order: a compare-and-swap computed from a word before it fails, and the decision
//!    is made again from the fresh word.
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
//! On x86-64 CPUs with AVX the keyed table's slots are loaded and swapped by the crate's own
//! instructions (`crate::sync::Native`: `vmovdqa`, `lock cmpxchg16b`) rather than portable-atomic's
//! calls to the same instructions. They are stronger than `Relaxed`, not weaker: an x86 load is an
//! acquire and a locked instruction a full barrier; and each is an `asm!` block (not `pure`), which
//! the compiler never removes, duplicates or merges with another access, as it would not a
//! `Relaxed` atomic access. The argument below holds for them unchanged.
//!
//! A slot of the keyed table is a single 128-bit word holding both the key's tag and its state, so
//! points 1-4 apply to it unchanged: a decision is a compare-and-swap of the whole word, the tag
//! included. What the table adds is a property across slots: **at most one live slot per key**. Two
//! threads inserting the same key each reserve a slot (a compare-and-swap), then scan the other
//! slots of the key's groups for a second reservation. That is the store-buffering pattern: without
//! more, both scans could miss the other's reservation (each write still in its core's store
//! buffer, each read served from cache) and both would publish. A `SeqCst` fence after each
//! reservation and before each scan forbids it: the two fences are ordered in the single total
//! order of `SeqCst` operations, and the scan that follows the later fence must see the reservation
//! that preceded the earlier one (or a later value of that slot). So at least one of the two
//! inserters sees the other, and the tie-breaking rules (lower slot wins; a higher reservation is
//! killed) leave one live slot. A killed reservation becomes a tombstone that only its owner
//! clears, so the owner's publish (a compare-and-swap from the reserved word) fails for good once
//! it is killed: a single-slot argument, in that slot's modification order, which needs no
//! ordering. The scan that finds an existing key needs no fence: it uses a published slot, and if
//! that slot was reused meanwhile its compare-and-swap fails on the tag. The fence costs a few
//! dozen cycles on the insert path only. Weakened to `Release`, it fails the loom models
//! `inserts_of_one_key_into_different_slots` (both inserters of one key admitted, each in a slot
//! of its own) and `three_inserts_of_one_key`.
//!
//! A keyed table's reconfiguration adds a generation beside each state (two bits of the tag) and
//! a number that says which generation is current. The same fence orders an inserter against a
//! reconfiguration's walk: the walk stores the new number, fences (`SeqCst`), and loads every
//! slot; the inserter reserves, fences, and loads the number. So either the walk sees the
//! reservation (and kills it) or the inserter sees the number (and starts again): no entry of a
//! generation that is over is published after the walk. A decision that meets a word of a later
//! generation than the number it loaded issues an acquire fence before loading the number
//! again; every word of a new generation was written after a release (the walk's `SeqCst`
//! fence, the release fence of a decision converting an entry itself, an inserter's `SeqCst`
//! fence) that followed the new number's store or load, so the second load sees it. Without
//! that, a decider could keep reloading the old number and go round the slow path until the
//! store reached it. Words within a generation follow points 1-4 unchanged.
//!
//! The statistics counters are `Relaxed` read-modify-writes: they count, they publish nothing.
//!
//! The loom models in `loom-tests/` check these claims under every interleaving loom can reach:
//! exact admission counts from racing threads, no lost update, one slot per key under racing
//! inserts, and no decision about one key landing on another's state while a slot is reused or
//! evicted. `loom-tests/mutants.sh`, run by CI, checks that they would notice: with the fence
//! above weakened, a rule of the insert's validation skipped, or a decision's compare-and-swap
//! retried on a word that holds no state of its key (another key's, or a reservation of its
//! own), the models that the script names for that break fail.
//! Loom has no 128-bit atomic; `src/sync/` gives it one made of a loom `AtomicU64` holding a handle
//! to an interned value, so the same orderings and the same fence are what loom checks.

mod cell;
mod config;
mod generations;
mod layout;
mod overflow;
mod table;

pub(crate) use cell::{Loaded, StateCell};
#[cfg(feature = "redis")]
pub(crate) use config::Versions;
pub use generations::Current;
pub(crate) use generations::Generations;
pub(crate) use layout::{shards_for, table_bytes, Probe, CLASSES, GENERATION, IDENTITY};
pub(crate) use overflow::Overflowed;
pub use overflow::{KeyedStats, Overflow};
pub(crate) use table::{Seen, Table};
