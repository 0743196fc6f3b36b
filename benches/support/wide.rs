//! The keyed table's 128-bit instructions for the benches' floors and replica: on x86-64 CPUs with
//! `cmpxchg16b` and AVX, the same inline `vmovdqa` and `lock cmpxchg16b` that tollgate runs
//! (`src/sync/x86_64.rs`), so that a floor costs no more than tollgate's own operations would;
//! portable-atomic's (a call through a function pointer each) elsewhere.

use portable_atomic::AtomicU128;
use std::sync::atomic::Ordering::Relaxed;

/// Which instructions this machine gets, checked once.
#[derive(Clone, Copy, Debug)]
pub enum Wide {
    Native,
    Portable,
}

impl Wide {
    pub fn detect() -> Wide {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("cmpxchg16b")
            && std::arch::is_x86_feature_detected!("avx")
        {
            return Wide::Native;
        }
        Wide::Portable
    }

    #[inline(always)]
    pub fn load(self, slot: &AtomicU128) -> u128 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Wide::Native => {
                let (lo, hi): (u64, u64);
                // SAFETY: as in tollgate's `Native::load`: the CPU has AVX (checked in `detect`),
                // and the slot is 16-byte aligned and valid for reads.
                unsafe {
                    core::arch::asm!(
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
            _ => slot.load(Relaxed),
        }
    }

    #[inline(always)]
    pub fn compare_exchange(self, slot: &AtomicU128, current: u128, new: u128) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Wide::Native => {
                let swapped: u8;
                // SAFETY: as in tollgate's `Native::compare_exchange`: the CPU has `cmpxchg16b`
                // (checked in `detect`), the slot is 16-byte aligned and valid for writes, RBX is
                // swapped in and restored, and every operand has a fixed register.
                unsafe {
                    core::arch::asm!(
                        "xchg r8, rbx",
                        "lock cmpxchg16b xmmword ptr [rdi]",
                        "sete cl",
                        "mov rbx, r8",
                        in("rdi") slot.as_ptr(),
                        inout("r8") new as u64 => _,
                        in("rcx") (new >> 64) as u64,
                        inout("rax") current as u64 => _,
                        inout("rdx") (current >> 64) as u64 => _,
                        lateout("cl") swapped,
                        options(nostack),
                    );
                }
                swapped != 0
            }
            _ => slot
                .compare_exchange(current, new, Relaxed, Relaxed)
                .is_ok(),
        }
    }
}
