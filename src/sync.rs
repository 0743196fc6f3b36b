//! The atomics the stores use, from one place, so that loom can stand in for them.
//!
//! Under `--cfg tollgate_loom` every atomic here is loom's, and loom explores the interleavings of
//! the stores' compare-and-swap loops; otherwise they are the standard library's. The cfg carries
//! the crate's prefix because a bare `--cfg loom` switches every crate in the tree that checks it
//! (tokio and friends) to its own loom build.
//!
//! Nothing else in the crate imports an atomic type directly.

#[cfg(not(tollgate_loom))]
pub(crate) use core::sync::atomic::{AtomicU64, Ordering};

#[cfg(tollgate_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
