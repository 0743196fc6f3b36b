//! The keyed table's 128-bit slot operations as the CPU's own instructions, inline.
//!
//! portable-atomic serves the same operations with the same instructions, but in a default x86-64
//! build (no `-C target-cpu`) it cannot assume them, so it checks the CPU once and then reaches each
//! operation through a function pointer: five calls in a typical keyed check (four loads and a
//! compare-and-swap), each an opaque call that the compiler cannot schedule around. Here the table
//! checks the CPU once, when it is built, and keeps a [`Native`] token; a check then runs the
//! instructions in line: `check_key` takes about a sixth less time over small tables, and about
//! a quarter less over a million keys (`benches/ab.sh` against a build that uses portable-atomic's
//! operations).
//!
//! A table uses one implementation for its whole life, so its slots are never touched by both
//! this code and portable-atomic's while it is shared (only `AtomicU128::new` writes them before).

use core::arch::asm;

use super::{AtomicU128, Wide};

/// Proof that this CPU has `cmpxchg16b` and AVX (and that the OS saves AVX state): the only way to
/// get one is [`Native::detect`], and its operations rely on it.
///
/// - `lock cmpxchg16b` is the 128-bit compare-and-swap.
/// - `vmovdqa` is the 128-bit load. On CPUs with AVX, Intel and AMD guarantee that a 16-byte
///   aligned `vmovdqa` (VEX.128) is a single atomic access (Intel SDM vol. 3A, 9.1.1; AMD APM
///   vol. 2, 7.3.2); portable-atomic relies on the same guarantee for the same condition.
///   Without AVX, a 128-bit load needs `lock cmpxchg16b`, which writes the line: such CPUs get
///   [`Portable`](super::Portable).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Native(());

impl Native {
    /// A token if this CPU has both instructions; checked once per table.
    pub(crate) fn detect() -> Option<Native> {
        // `is_x86_feature_detected!("avx")` also checks that the OS enabled AVX state (XCR0).
        let usable = std::arch::is_x86_feature_detected!("cmpxchg16b")
            && std::arch::is_x86_feature_detected!("avx");
        usable.then_some(Native(()))
    }
}

impl Wide for Native {
    /// `vmovdqa`, then both halves into general registers.
    ///
    /// An x86 load is an acquire, more than the `Relaxed` the table needs.
    #[inline(always)]
    fn load(self, slot: &AtomicU128) -> u128 {
        let (lo, hi): (u64, u64);
        #[allow(unsafe_code)]
        // SAFETY: `self` proves the CPU has AVX, so the VEX instructions exist and the 16-byte
        // load is atomic (see `Native`). `slot.as_ptr()` points to the slot's 16 bytes, valid for
        // reads for the borrow, and 16-byte aligned (`AtomicU128` is), as `vmovdqa` requires. The
        // block only reads that memory (`readonly`), uses no stack and leaves the flags alone.
        unsafe {
            asm!(
                "vmovdqa {word}, xmmword ptr [{slot}]",
                "vmovq {lo}, {word}",
                "vpextrq {hi}, {word}, 1",
                slot = in(reg) slot.as_ptr(),
                word = out(xmm_reg) _,
                lo = lateout(reg) lo,
                hi = lateout(reg) hi,
                options(nostack, preserves_flags, readonly),
            );
        }
        u128::from(hi) << 64 | u128::from(lo)
    }

    /// `lock cmpxchg16b`: a full barrier, more than the `Relaxed` the table needs.
    #[inline(always)]
    fn compare_exchange(self, slot: &AtomicU128, current: u128, new: u128) -> Result<u128, u128> {
        let (lo, hi): (u64, u64);
        let swapped: u8;
        #[allow(unsafe_code)]
        // SAFETY: `self` proves the CPU has `cmpxchg16b`. `slot.as_ptr()` points to the slot's 16
        // bytes, 16-byte aligned (the instruction faults otherwise) and valid for reads and writes
        // for the borrow: the slot is an atomic, whose memory may be written through a shared
        // reference, and is only ever accessed atomically while shared. The instruction compares
        // RDX:RAX with the memory and stores RCX:RBX if equal, else loads the memory into RDX:RAX;
        // ZF says which. RBX is reserved by LLVM and cannot be named as an operand, so the low half
        // of `new` is swapped into it for the one instruction and RBX restored after. Every
        // operand has a fixed register: the allocator may pick RBX for a `reg` operand, and the
        // address in RBX would be overwritten by the swap. No stack is used; the flags are
        // clobbered (no `preserves_flags`); the block may touch any memory (the default), so the
        // compiler keeps every other memory access on its side of it.
        unsafe {
            asm!(
                "xchg r8, rbx",
                "lock cmpxchg16b xmmword ptr [rdi]",
                "sete cl",
                "mov rbx, r8",
                in("rdi") slot.as_ptr(),
                inout("r8") new as u64 => _,
                in("rcx") (new >> 64) as u64,
                inout("rax") current as u64 => lo,
                inout("rdx") (current >> 64) as u64 => hi,
                lateout("cl") swapped,
                options(nostack),
            );
        }
        let found = u128::from(hi) << 64 | u128::from(lo);
        if swapped != 0 {
            Ok(found)
        } else {
            Err(found)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Portable;
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Every x86-64 machine the crate is tested on has both instructions: without them these tests
    /// would check nothing, so say so loudly rather than pass.
    fn native() -> Native {
        Native::detect().expect("this test needs a CPU with cmpxchg16b and AVX")
    }

    const WORDS: [u128; 6] = [
        0,
        1,
        u64::MAX as u128,
        1 << 64,
        u128::MAX,
        0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210,
    ];

    #[test]
    fn agrees_with_portable_atomic_on_every_outcome() {
        let native = native();
        for &start in &WORDS {
            for &guess in &WORDS {
                for &new in &WORDS {
                    let (a, b) = (AtomicU128::new(start), AtomicU128::new(start));
                    assert_eq!(native.load(&a), Portable.load(&b));
                    let outcomes = (
                        native.compare_exchange(&a, guess, new),
                        Portable.compare_exchange(&b, guess, new),
                    );
                    assert_eq!(outcomes.0, outcomes.1, "{start:#x} {guess:#x} {new:#x}");
                    let expected = if guess == start {
                        Ok(start)
                    } else {
                        Err(start)
                    };
                    assert_eq!(outcomes.0, expected);
                    assert_eq!(native.load(&a), if guess == start { new } else { start });
                    assert_eq!(native.load(&a), Portable.load(&b));
                }
            }
        }
    }

    /// Concurrent compare-and-swap increments of both halves at once are all counted, and loads
    /// racing them never see one half of a word and the other half of another.
    #[test]
    fn racing_increments_are_exact_and_loads_never_tear() {
        const THREADS: u64 = 4;
        const INCREMENTS: u64 = 50_000;
        // Adds 1 to each half: a torn word would have unequal halves.
        const BOTH: u128 = 1 << 64 | 1;
        let native = native();
        let slot = AtomicU128::new(0);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                // At least one load, however soon the writers finish.
                let mut first = true;
                while first || !done.load(Ordering::Relaxed) {
                    let word = native.load(&slot);
                    assert_eq!(
                        word >> 64,
                        word & u128::from(u64::MAX),
                        "torn load {word:#x}"
                    );
                    first = false;
                }
            });
            let writers: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        for _ in 0..INCREMENTS {
                            let mut word = native.load(&slot);
                            while let Err(found) = native.compare_exchange(&slot, word, word + BOTH)
                            {
                                word = found;
                            }
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            reader.join().unwrap();
        });
        assert_eq!(native.load(&slot), u128::from(THREADS * INCREMENTS) * BOTH);
    }
}
