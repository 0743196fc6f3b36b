//! Where the crate runs no 128-bit instructions of its own (every target but x86-64, and loom and
//! Miri builds): [`Native`] has no values, so every table takes [`Portable`](super::Portable).

use super::{AtomicU128, Wide};

/// Never available here.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Native {}

impl Native {
    /// Always `None` on this target.
    pub(crate) fn detect() -> Option<Native> {
        None
    }
}

impl Wide for Native {
    fn load(self, _: &AtomicU128) -> u128 {
        match self {}
    }

    fn compare_exchange(self, _: &AtomicU128, _: u128, _: u128) -> Result<u128, u128> {
        match self {}
    }
}
