//! Saving a keyed table to bytes and restoring it (see [`crate::snapshot`] for the format
//! and the rules).

use core::hash::BuildHasher;
use std::collections::HashSet;

use super::{KeyedBuilder, KeyedRateLimiter};
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::snapshot::{wall_clock, Header, Kind, Reader, SnapshotError, Writer};
use crate::store::{GENERATION, IDENTITY};

/// What a snapshot hashes to recognise the hasher that took it: the same hasher, seeded the
/// same, hashes it to the same word.
const PROBE: &str = "tollgate snapshot";

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> KeyedRateLimiter<K, A, C, S> {
    /// Saves the state of every live key, for [`KeyedBuilder::restore`] to restore after a
    /// restart: long-lived limits ("3 per day") then survive a deploy. Keys are saved as their
    /// hashes, so the limiter that restores must hash as this one does (see
    /// [`KeyedBuilder::restore`]). Decisions may run meanwhile: each key is saved as one of its
    /// decisions left it. A limiter whose quota was changed ([`set_quota`](Self::set_quota))
    /// is saved under its current quota, which the limiter that restores must be built with; a
    /// change racing the snapshot waits for it.
    ///
    /// The snapshot takes 24 bytes a live key, and 200 more.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    ///
    /// // A fixed seed: keys are saved as their hashes.
    /// let seeded = || ahash::RandomState::with_seeds(1, 2, 3, 4);
    /// let quota = Quota::per_day(3).unwrap();
    /// let limiter = KeyedRateLimiter::<str>::builder(Gcra::from(quota))
    ///     .capacity(1_000)
    ///     .threads(1)
    ///     .hasher(seeded())
    ///     .build()
    ///     .unwrap();
    /// for _ in 0..3 {
    ///     limiter.check_key("alice").unwrap();
    /// }
    /// let saved = limiter.snapshot();
    ///
    /// // After the restart: the same configuration, and alice still has none left today.
    /// let restored = KeyedRateLimiter::<str>::builder(Gcra::from(quota))
    ///     .capacity(1_000)
    ///     .threads(1)
    ///     .hasher(seeded())
    ///     .restore(&saved)
    ///     .unwrap();
    /// assert!(restored.check_key("alice").is_err());
    /// assert!(restored.check_key("bob").is_ok());
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> Vec<u8> {
        self.snapshot_with(wall_clock())
    }

    /// [`snapshot`](Self::snapshot) with the wall clock reading `wall` (nanoseconds since the
    /// Unix epoch): for tests of the time a restore moves states by.
    #[cfg(feature = "reference")]
    #[must_use]
    pub fn snapshot_at(&self, wall: u64) -> Vec<u8> {
        self.snapshot_with(wall)
    }

    fn snapshot_with(&self, wall: u64) -> Vec<u8> {
        let clock = self.clock.now().as_nanos();
        // Every entry is of the current generation while no reconfiguration runs.
        let (entries, header) = self
            .quotas
            .steady(|current| (self.table.entries(), self.header(&current.algorithm)));
        let mut writer = Writer::new(&Header {
            wall,
            clock,
            entries: entries.len() as u64,
            ..header
        });
        for (position, tag, state) in entries {
            writer.u64(position);
            writer.u64(tag);
            writer.u64(state);
        }
        writer.finish()
    }

    /// What a snapshot of this limiter records of its configuration, running `algorithm`.
    fn header(&self, algorithm: &A) -> Header {
        let mut rooms = self.table.rooms();
        rooms[0] = algorithm.room();
        Header {
            kind: Kind::Table,
            algorithm: algorithm.snapshot_id(),
            fingerprint: self.hasher.hash_one(PROBE),
            tiers: rooms,
            shape: self.table.shape(),
            wall: 0,
            clock: 0,
            entries: 0,
        }
    }

    /// Fills this limiter, which no other thread uses yet, from `snapshot`, its times moved by
    /// the wall clock's `wall`.
    fn fill(&self, snapshot: &[u8], wall: u64) -> Result<(), SnapshotError> {
        let (header, mut entries) = Reader::open(snapshot)?;
        let algorithm = self.algorithm();
        header.check(&self.header(&algorithm))?;
        if header.algorithm.0 == 0 {
            return Err(SnapshotError::Mismatch { what: "algorithm" });
        }
        if header.entries.checked_mul(24) != Some(entries.len() as u64) {
            return Err(SnapshotError::Corrupt {
                what: "entry count",
            });
        }
        let now = self.clock.now();
        let shift = header.shift(now, wall);
        let mut keys = HashSet::with_capacity(header.entries as usize);
        for _ in 0..header.entries {
            let (position, tag, state) = (entries.u64()?, entries.u64()?, entries.u64()?);
            // A key once: two states for it would be two answers. Tags are saved without
            // their generation.
            if tag == 0
                || tag & GENERATION != 0
                || state == u64::MAX
                || !keys.insert(tag & IDENTITY)
            {
                return Err(SnapshotError::Corrupt { what: "entry" });
            }
            if let Some(state) = algorithm.rebase(state, shift, now) {
                if !self.table.place(position, tag, state) {
                    return Err(SnapshotError::Corrupt { what: "slot" });
                }
            }
        }
        Ok(())
    }
}

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> KeyedBuilder<K, A, C, S> {
    /// Builds the limiter with the states of a [`snapshot`](KeyedRateLimiter::snapshot), their
    /// times moved by the wall-clock time since it was taken: a key that had six hours to wait
    /// when it was saved, restored an hour later, has five.
    ///
    /// The configuration must be the one the snapshot was taken with: the same algorithm and
    /// quota, tiers, capacity and threads (the table's shape: set `threads` explicitly, since
    /// its default is the machine's), and a hasher seeded the same (the default hasher is
    /// seeded at random: give limiters you persist a fixed one, such as
    /// `ahash::RandomState::with_seeds`, and keep its seeds secret, since they are what keeps
    /// clients from aiming keys at each other's slots). A window counter's counts go to every
    /// window they overlap in the new clock's windows (see the [`snapshot`](crate::snapshot) module).
    ///
    /// # Errors
    ///
    /// [`SnapshotError`] for bytes that are not a snapshot, or not one of this configuration;
    /// [`SnapshotError::Build`] for a configuration that cannot be built.
    ///
    /// ```
    /// use tollgate::{FixedWindow, KeyedRateLimiter, Quota, SnapshotError};
    ///
    /// let builder = || {
    ///     KeyedRateLimiter::<u64>::builder(FixedWindow::new(&Quota::per_hour(5).unwrap()).unwrap())
    ///         .threads(1)
    ///         .hasher(ahash::RandomState::with_seeds(1, 2, 3, 4))
    /// };
    /// let saved = builder().build().unwrap().snapshot();
    /// assert!(builder().restore(&saved).is_ok());
    /// // Another capacity is another table.
    /// let err = builder().capacity(1 << 20).restore(&saved).unwrap_err();
    /// assert_eq!(err, SnapshotError::Mismatch { what: "shape" });
    /// ```
    pub fn restore(self, snapshot: &[u8]) -> Result<KeyedRateLimiter<K, A, C, S>, SnapshotError> {
        self.restore_with(snapshot, wall_clock())
    }

    /// [`restore`](Self::restore) with the wall clock reading `wall` (nanoseconds since the
    /// Unix epoch): for tests of the time it moves states by.
    ///
    /// # Errors
    ///
    /// As for [`restore`](Self::restore).
    #[cfg(feature = "reference")]
    pub fn restore_at(
        self,
        snapshot: &[u8],
        wall: u64,
    ) -> Result<KeyedRateLimiter<K, A, C, S>, SnapshotError> {
        self.restore_with(snapshot, wall)
    }

    fn restore_with(
        self,
        snapshot: &[u8],
        wall: u64,
    ) -> Result<KeyedRateLimiter<K, A, C, S>, SnapshotError> {
        let limiter = self.build()?;
        limiter.fill(snapshot, wall)?;
        Ok(limiter)
    }
}
