//! Saving a keyed sliding log to bytes and restoring it (see [`crate::snapshot`] for the
//! format and the rules).

use core::hash::BuildHasher;
use std::collections::HashSet;

use super::log::Log;
use super::{lock, KeyedSlidingLog, SlidingLogBuilder};
use crate::clock::Clock;
use crate::snapshot::{moved, wall_clock, Header, Kind, Reader, SnapshotError, Writer};

/// What a snapshot hashes to recognise the hasher that took it.
const PROBE: &str = "tollgate snapshot";

impl<K: ?Sized, C: Clock, S: BuildHasher> KeyedSlidingLog<K, C, S> {
    /// Saves every key's log, for [`SlidingLogBuilder::restore`] to restore after a restart, as
    /// [`KeyedRateLimiter::snapshot`](crate::KeyedRateLimiter::snapshot) does: the limiter that
    /// restores must be configured the same and hash as this one does. Each shard is saved under
    /// its lock, in one pass.
    ///
    /// ```
    /// use tollgate::{KeyedSlidingLog, Quota};
    ///
    /// let builder = || {
    ///     KeyedSlidingLog::<str>::builder(&Quota::per_day(3).unwrap())
    ///         .capacity(1_000)
    ///         .threads(1)
    ///         .hasher(ahash::RandomState::with_seeds(5, 6, 7, 8))
    /// };
    /// let resets = builder().build().unwrap();
    /// for _ in 0..3 {
    ///     resets.check_key("alice@example.com").unwrap();
    /// }
    /// let restored = builder().restore(&resets.snapshot()).unwrap();
    /// assert!(restored.check_key("alice@example.com").is_err());
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> Vec<u8> {
        self.snapshot_with(wall_clock())
    }

    /// [`snapshot`](Self::snapshot) with the wall clock reading `wall` (nanoseconds since the
    /// Unix epoch): for tests of the time a restore moves stamps by.
    #[cfg(feature = "reference")]
    #[must_use]
    pub fn snapshot_at(&self, wall: u64) -> Vec<u8> {
        self.snapshot_with(wall)
    }

    fn snapshot_with(&self, wall: u64) -> Vec<u8> {
        let clock = self.clock.now().as_nanos();
        let mut logs = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(shard);
            for (key, log) in shard.in_order() {
                logs.push((key, log.entries().collect::<Vec<_>>()));
            }
        }
        let mut writer = Writer::new(&Header {
            wall,
            clock,
            entries: logs.len() as u64,
            ..self.header()
        });
        for (key, entries) in logs {
            writer.u64(key);
            // A log holds at most `limit` entries, and a limit of more than 2^32 units in one
            // log would take 64 GiB.
            writer.u32(entries.len() as u32);
            for (stamp, units) in entries {
                writer.u64(stamp);
                writer.u64(units);
            }
        }
        writer.finish()
    }

    fn header(&self) -> Header {
        Header {
            kind: Kind::SlidingLog,
            algorithm: (4, [self.config.period, self.config.limit, 0]),
            fingerprint: self.hasher.hash_one(PROBE),
            tiers: [0; 8],
            shape: (self.shards.len() as u32, self.per_shard as u32),
            wall: 0,
            clock: 0,
            entries: 0,
        }
    }

    /// Fills this log, which no other thread uses yet, from `snapshot`, its stamps moved by the
    /// wall clock's `wall`.
    fn fill(&self, snapshot: &[u8], wall: u64) -> Result<(), SnapshotError> {
        let (header, mut reader) = Reader::open(snapshot)?;
        header.check(&self.header())?;
        // Each log takes at least 28 bytes.
        if header.entries > reader.len() as u64 / 28 {
            return Err(SnapshotError::Corrupt {
                what: "entry count",
            });
        }
        let corrupt = |what| SnapshotError::Corrupt { what };
        let now = self.clock.now();
        let shift = header.shift(now, wall);
        let (limit, period) = (self.config.limit, self.config.period);
        let mut keys = HashSet::with_capacity(header.entries as usize);
        for _ in 0..header.entries {
            let key = reader.u64()?;
            let count = reader.u32()? as u64;
            if count == 0 || count > limit || !keys.insert(key) {
                return Err(corrupt("log"));
            }
            let (mut log, mut total, mut last) = (Log::default(), 0u64, None);
            for _ in 0..count {
                let (stamp, units) = (reader.u64()?, reader.u64()?);
                total = total.saturating_add(units);
                if units == 0 || total > limit || last.is_some_and(|last| stamp <= last) {
                    return Err(corrupt("log"));
                }
                last = Some(stamp);
                // A stamp before the new clock's epoch is put at it: later, never earlier, so
                // that it weighs at least as long. One that has left the window is dropped.
                let stamp = moved(stamp, shift).unwrap_or(0);
                if stamp.saturating_add(period) > now.as_nanos() {
                    log.push(stamp, units, limit);
                }
            }
            if log.units == 0 {
                continue;
            }
            let mut shard = lock(self.shard(key));
            if !shard.make_room(&self.config, self.per_shard, now, self.overflow) {
                return Err(corrupt("log count"));
            }
            shard.insert(key, log);
        }
        if reader.len() != 0 {
            return Err(corrupt("trailing bytes"));
        }
        Ok(())
    }
}

impl<K: ?Sized, C: Clock, S: BuildHasher> SlidingLogBuilder<K, C, S> {
    /// Builds the keyed sliding log with the logs of a
    /// [`snapshot`](KeyedSlidingLog::snapshot), their stamps moved by the wall-clock time since
    /// it was taken; the configuration must be the snapshot's, as
    /// [`KeyedBuilder::restore`](crate::KeyedBuilder::restore) says.
    ///
    /// # Errors
    ///
    /// [`SnapshotError`] for bytes that are not a snapshot, or not one of this configuration.
    pub fn restore(self, snapshot: &[u8]) -> Result<KeyedSlidingLog<K, C, S>, SnapshotError> {
        self.restore_with(snapshot, wall_clock())
    }

    /// [`restore`](Self::restore) with the wall clock reading `wall` (nanoseconds since the
    /// Unix epoch).
    ///
    /// # Errors
    ///
    /// As for [`restore`](Self::restore).
    #[cfg(feature = "reference")]
    pub fn restore_at(
        self,
        snapshot: &[u8],
        wall: u64,
    ) -> Result<KeyedSlidingLog<K, C, S>, SnapshotError> {
        self.restore_with(snapshot, wall)
    }

    fn restore_with(
        self,
        snapshot: &[u8],
        wall: u64,
    ) -> Result<KeyedSlidingLog<K, C, S>, SnapshotError> {
        let log = self.build()?;
        log.fill(snapshot, wall)?;
        Ok(log)
    }
}
