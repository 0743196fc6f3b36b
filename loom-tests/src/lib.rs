//! Loom models live in `tests/`; this crate exists to build tollgate with `--cfg tollgate_loom`,
//! and holds what the models of keyed tables share.

use std::hash::{BuildHasher, Hasher};

/// Hashes a `u64` key to itself, so a model chooses where keys go.
#[derive(Clone, Copy, Default)]
pub struct Identity;

/// The hasher of [`Identity`]: the last `u64` written is the hash.
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl BuildHasher for Identity {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}
