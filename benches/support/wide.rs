//! The keyed table's 128-bit slot operations and its prefetch, for the benches' floors and
//! replica: tollgate's own code (`src/sync/`), compiled into the benches, so that a floor runs
//! exactly the instructions a check runs (inline `vmovdqa` and `lock cmpxchg16b` on x86-64 CPUs
//! with `cmpxchg16b` and AVX, portable-atomic's calls elsewhere) and cannot drift from them.
//! `benches/ab.sh` copies `src/sync/` beside its copy of this module for the same reason.

// The benches use a few of its items. Its re-exports for the direct limiter (`fence`, `AtomicU64`)
// and its unit tests' imports go unused here; its unused functions are `support`'s dead code.
#[allow(unused_imports)]
#[path = "../../src/sync/mod.rs"]
mod sync;

use portable_atomic::AtomicU128;
#[allow(unused_imports)] // paired.rs prefetches; the other benches do not
pub(crate) use sync::prefetch;
use sync::{Native, Portable, Wide as _};

/// Which instructions this machine gets, checked once, as a keyed table does.
#[derive(Clone, Copy, Debug)]
pub struct Wide(Option<Native>);

impl Wide {
    pub fn detect() -> Wide {
        Wide(Native::detect())
    }

    #[inline(always)]
    pub fn load(self, slot: &AtomicU128) -> u128 {
        match self.0 {
            Some(native) => native.load(slot),
            None => Portable.load(slot),
        }
    }

    /// Whether the swap happened.
    #[inline(always)]
    pub fn compare_exchange(self, slot: &AtomicU128, current: u128, new: u128) -> bool {
        match self.0 {
            Some(native) => native.compare_exchange(slot, current, new),
            None => Portable.compare_exchange(slot, current, new),
        }
        .is_ok()
    }
}
