//! The atomics the stores use, from one place, so that loom can stand in for them.
//!
//! Under `--cfg tollgate_loom` every atomic here is loom's, and loom explores the interleavings of
//! the stores' compare-and-swap loops; otherwise they are the standard library's (and
//! portable-atomic's `AtomicU128`, which is `cmpxchg16b` on x86-64). The cfg carries the crate's
//! prefix because a bare `--cfg loom` switches every crate in the tree that checks it (tokio and
//! friends) to its own loom build.
//!
//! Nothing else in the crate imports an atomic type directly (but for the coarse clock's shared
//! time stamp in `clock.rs`: a `static`, which loom's atomics cannot be, and part of no
//! compare-and-swap protocol), and the keyed table reaches its 128-bit slots only through a
//! [`Wide`] implementation: [`Portable`] (portable-atomic's, or loom's), or [`Native`], the CPU's
//! own instructions run inline where it has them.
//!
//! # Platforms
//!
//! The keyed table is lock-free where the CPU has a 128-bit compare-and-swap, which portable-atomic
//! uses natively: x86-64 (`cmpxchg16b`, detected at run time; every x86-64 CPU since about 2006 has
//! it), AArch64, s390x, and riscv64 and powerpc64 where the CPU and compiler support it. Elsewhere
//! (32-bit targets among them) portable-atomic's `fallback` feature, which this crate enables so
//! that it builds everywhere, serves each 128-bit operation under a lock (one of a global table
//! of seqlocks, picked by address): the decisions are the same, but keyed checks are no longer
//! lock-free. Direct limiters use 64-bit atomics, lock-free wherever `AtomicU64` exists, until
//! their quota is changed; a reconfigured direct limiter decides on a 128-bit word too, and is
//! lock-free where the keyed table is.
//!
//! On x86-64 CPUs with AVX (nearly all since 2011), the table runs the two instructions itself,
//! inline ([`Native`]); CPUs without AVX (some low-end Atom, Celeron and Pentium parts) get
//! portable-atomic's, which there load a slot with `lock cmpxchg16b`.
//!
//! The table's [`prefetch`] is the CPU's hint on x86-64 and AArch64, and nothing elsewhere.

#[cfg(not(tollgate_loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(tollgate_loom))]
pub(crate) use portable_atomic::AtomicU128;
#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::Mutex;

#[cfg(tollgate_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(tollgate_loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(tollgate_loom)]
pub(crate) use loom_u128::AtomicU128;

/// The keyed table's two operations on a 128-bit slot, chosen once per table: [`Native`] where
/// the CPU has the instructions for it, [`Portable`] everywhere else.
///
/// Both are at least as strong as a `Relaxed` atomic load and compare-and-swap, which is all the
/// table's protocol asks of them (see the store module's `# Orderings`).
pub(crate) trait Wide: Copy {
    /// The slot's word.
    fn load(self, slot: &AtomicU128) -> u128;

    /// Replaces the slot's word with `new` if it is `current`: `Ok` with the word replaced, or
    /// `Err` with the word found.
    fn compare_exchange(self, slot: &AtomicU128, current: u128, new: u128) -> Result<u128, u128>;
}

/// portable-atomic's 128-bit operations (loom's under `tollgate_loom`): available on every target.
///
/// On x86-64, unless the crate is built for a CPU level that includes `cmpxchg16b` and AVX,
/// portable-atomic picks its instructions at run time and each operation is a call through a
/// function pointer. The table uses this only where [`Native`] is not available.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Portable;

impl Wide for Portable {
    #[inline]
    fn load(self, slot: &AtomicU128) -> u128 {
        slot.load(Ordering::Relaxed)
    }

    #[inline]
    fn compare_exchange(self, slot: &AtomicU128, current: u128, new: u128) -> Result<u128, u128> {
        slot.compare_exchange(current, new, Ordering::Relaxed, Ordering::Relaxed)
    }
}

// The CPU's own 128-bit instructions, run inline: x86-64 only, and not under loom (which must see
// every access) or Miri (which cannot run inline assembly). Elsewhere `Native` has no values.
#[cfg_attr(
    all(target_arch = "x86_64", not(tollgate_loom), not(miri)),
    path = "x86_64.rs"
)]
#[cfg_attr(
    not(all(target_arch = "x86_64", not(tollgate_loom), not(miri))),
    path = "no_native.rs"
)]
mod native;
pub(crate) use native::Native;

/// Gives way while another thread finishes a step we are waiting on (a slot reservation).
#[inline]
pub(crate) fn backoff() {
    #[cfg(not(tollgate_loom))]
    std::thread::yield_now();
    // Loom must see the wait, or a spinning thread would never let the other one run.
    #[cfg(tollgate_loom)]
    loom::thread::yield_now();
}

/// Starts bringing the cache line holding `slot` towards this core, without waiting for it.
///
/// Two of the crate's four `unsafe` blocks, one per architecture (the other two are [`Native`]'s
/// instructions). A safe relaxed load of the slot would also start the fetch, but a load that
/// misses holds up retirement where a prefetch retires at once: with such a load, `check_keys`
/// over a million keys took about twice as long per key. Without any prefetch, it takes about
/// three times as long, and `check_key` a fifth longer (`benches/ab.sh` against a build with this
/// function made empty).
///
/// Elsewhere (s390x, riscv64, powerpc64, 32-bit targets) stable Rust has no prefetch to call, and
/// this does nothing: the checks are as correct, but `check_keys` overlaps no misses and
/// `prefetch_key` saves nothing.
#[inline]
pub(crate) fn prefetch(slot: &AtomicU128) {
    #[cfg(all(target_arch = "x86_64", not(tollgate_loom)))]
    #[allow(unsafe_code)]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in the target's
    // baseline). A prefetch is a hint: it never faults and has no effect visible to the program,
    // whatever the address; this one is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (slot as *const AtomicU128).cast(),
        )
    }
    // `core::arch::aarch64::_prefetch` is not stable; the instruction is, in every AArch64 CPU.
    // Not under Miri, which runs no inline assembly.
    #[cfg(all(target_arch = "aarch64", not(tollgate_loom), not(miri)))]
    #[allow(unsafe_code)]
    // SAFETY: `prfm` is a hint in the base AArch64 instruction set: it never faults, whatever the
    // address (and this one is a valid reference), writes no register, memory or flag, and
    // touches no stack, as the options tell the compiler. `pldl1keep`, into L1 for a load, as
    // `_MM_HINT_T0` above: a denial only reads its slot, and a line fetched for a store would be
    // taken from every other core that reads it (a hot key's).
    unsafe {
        core::arch::asm!(
            "prfm pldl1keep, [{slot}]",
            slot = in(reg) slot as *const AtomicU128,
            options(nostack, preserves_flags, readonly),
        )
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", not(tollgate_loom)),
        all(target_arch = "aarch64", not(tollgate_loom), not(miri)),
    )))]
    let _ = slot;
}

/// A 128-bit atomic for loom, which has none: a loom `AtomicU64` holding a handle to an interned
/// 128-bit value.
///
/// Every value ever stored is interned once (in a process-wide table, outside loom's view), so
/// equal values have equal handles and a compare-and-swap on handles is exactly a
/// compare-and-swap on values. Each operation is one loom atomic operation with the caller's
/// ordering, so loom explores the same interleavings and the same memory-model behaviour
/// (relaxed loads that see stale values, fences) as for a hardware 128-bit atomic.
#[cfg(tollgate_loom)]
mod loom_u128 {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock, PoisonError};

    use loom::sync::atomic::{AtomicU64, Ordering};

    #[derive(Default)]
    struct Interner {
        handles: HashMap<u128, u64>,
        values: Vec<u128>,
    }

    fn interner() -> std::sync::MutexGuard<'static, Interner> {
        static INTERNER: OnceLock<Mutex<Interner>> = OnceLock::new();
        INTERNER
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn handle(value: u128) -> u64 {
        let mut table = interner();
        if let Some(&h) = table.handles.get(&value) {
            return h;
        }
        let h = table.values.len() as u64;
        table.values.push(value);
        table.handles.insert(value, h);
        h
    }

    fn value(handle: u64) -> u128 {
        interner().values[handle as usize]
    }

    pub(crate) struct AtomicU128(AtomicU64);

    impl AtomicU128 {
        pub(crate) fn new(v: u128) -> AtomicU128 {
            AtomicU128(AtomicU64::new(handle(v)))
        }

        pub(crate) fn load(&self, order: Ordering) -> u128 {
            value(self.0.load(order))
        }

        pub(crate) fn swap(&self, new: u128, order: Ordering) -> u128 {
            value(self.0.swap(handle(new), order))
        }

        pub(crate) fn compare_exchange(
            &self,
            current: u128,
            new: u128,
            success: Ordering,
            failure: Ordering,
        ) -> Result<u128, u128> {
            self.0
                .compare_exchange(handle(current), handle(new), success, failure)
                .map(value)
                .map_err(value)
        }
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    /// The platforms the crate is benchmarked and deployed on serve the keyed table's 128-bit
    /// words with native instructions, not portable-atomic's lock-based fallback (see
    /// [Platforms](super#platforms)).
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "s390x"))]
    fn slots_are_lock_free() {
        assert!(super::AtomicU128::is_lock_free());
    }

    /// And CI's 32-bit leg (`.ci/run` tests on i686) does run the lock-based fallback.
    #[test]
    #[cfg(target_arch = "x86")]
    fn i686_takes_the_fallback() {
        assert!(!super::AtomicU128::is_lock_free());
    }
}
