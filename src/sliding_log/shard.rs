//! A shard of the keyed log: a map from key hashes to logs, linked in the order in which they
//! were last written, so that the least recently written log is at hand when room is needed.
//!
//! The order is a doubly linked list threaded through the map's entries by key: moving a log to
//! the back, or dropping it, is a few map lookups, with no queue to grow, scan or rebuild.

use core::hash::BuildHasher;
use std::collections::{HashMap, TryReserveError};

use super::log::{Log, SlidingLog};
use crate::clock::Nanos;
use crate::store::Overflow;

/// One shard: its logs, linked from the least to the most recently written.
#[derive(Debug, Default)]
pub(super) struct Shard {
    logs: HashMap<u64, Entry, BuildIdentity>,
    /// The entries the map has room for as allocated: its capacity when it was built, with no
    /// tombstones. std's `capacity` is the entries it can still take, so it also drops by one
    /// for each tombstone a dropped log leaves (see [`insert`](Shard::insert)).
    room: usize,
    /// The keys of the least and the most recently written logs (`None` when there are none).
    least_recent: Option<u64>,
    most_recent: Option<u64>,
    pub(super) reuses: u64,
    pub(super) evictions: u64,
    pub(super) overflows: u64,
}

/// A log and its place in the write order: the keys of the logs written just before and just
/// after it. A log at an end of the order names itself on that side; no other log can (keys are
/// unique in the map), so no key value has to be set aside to mean "none".
#[derive(Debug)]
struct Entry {
    log: Log,
    older: u64,
    newer: u64,
}

/// The hash of a key is already a good hash: the shard's map uses it as is.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BuildIdentity;

#[derive(Default)]
pub(super) struct Identity(u64);

impl core::hash::Hasher for Identity {
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

impl BuildHasher for BuildIdentity {
    type Hasher = Identity;
    fn build_hasher(&self) -> Identity {
        Identity(0)
    }
}

/// How many logs an overflow under [`Overflow::EvictLeastConstrained`] looks at, at most, for
/// one it may evict: as many as a key of the lock-free table can be evicted from (its two groups
/// of 8 slots). Without a bound, a flood of new keys into a shard full of logs at their limit
/// would walk the whole shard, under its lock, for every request.
const EVICTION_SCAN: usize = 16;

/// Bytes of a shard's map with `buckets` buckets, laid out as std's `HashMap` (hashbrown) lays
/// out its table, which std does not expose: each bucket an entry and a control byte, plus 16
/// control bytes more (a group, for the probes that wrap around).
fn map_bytes(buckets: u128) -> u128 {
    if buckets == 0 {
        0
    } else {
        buckets * (core::mem::size_of::<(u64, Entry)>() as u128 + 1) + 16
    }
}

impl Shard {
    /// An empty shard with room for `keys` logs, its map allocated now.
    pub(super) fn with_capacity(keys: usize) -> Result<Shard, TryReserveError> {
        let mut logs = HashMap::with_hasher(BuildIdentity);
        logs.try_reserve(keys)?;
        Ok(Shard {
            room: logs.capacity(),
            logs,
            ..Shard::default()
        })
    }

    /// The number of logs.
    pub(super) fn len(&self) -> usize {
        self.logs.len()
    }

    /// The log of `key`, if it has one.
    pub(super) fn log(&self, key: u64) -> Option<&Log> {
        self.logs.get(&key).map(|entry| &entry.log)
    }

    /// The logs, from the least to the most recently written: a snapshot's order, which a
    /// restore inserts them in.
    pub(super) fn in_order(&self) -> Vec<(u64, &Log)> {
        let mut logs = Vec::with_capacity(self.logs.len());
        let mut next = self.least_recent;
        while let Some(key) = next {
            let entry = self.entry(key);
            logs.push((key, &entry.log));
            next = (entry.newer != key).then_some(entry.newer);
        }
        logs
    }

    /// The log of `key`, if it has one, to decide on.
    pub(super) fn log_mut(&mut self, key: u64) -> Option<&mut Log> {
        self.logs.get_mut(&key).map(|entry| &mut entry.log)
    }

    /// Bytes the shard holds: its map and its logs' entries.
    pub(super) fn memory(&self) -> usize {
        // The map's buckets, from its usable capacity: 7/8 of them (all but one below 8), and
        // none for a map that allocated nothing.
        let usable = self.room;
        let buckets = match usable {
            1..=7 => usable + 1,
            _ => usable / 7 * 8,
        };
        // An allocated map's bytes fit the address space.
        let map = usize::try_from(map_bytes(buckets as u128)).unwrap_or(usize::MAX);
        map + self
            .logs
            .values()
            .map(|entry| entry.log.bytes())
            .sum::<usize>()
    }

    /// Bytes of the map of a shard built with room for `keys` logs, whether or not it can be
    /// allocated: what a [`BuildError::CapacityTooLarge`](crate::BuildError::CapacityTooLarge) reports.
    pub(super) fn bytes_to_build(keys: usize) -> u128 {
        // The fewest buckets whose usable 7/8 (all but one below 8) hold `keys`, as a power of
        // two, and at least 4 (std's `HashMap` allocates none for 0 keys).
        let keys = keys as u128;
        let buckets = match keys {
            0 => 0,
            1..=3 => 4,
            4..=7 => 8,
            _ => (keys * 8 / 7).next_power_of_two(),
        };
        map_bytes(buckets)
    }

    /// Adds `key`'s log as the most recently written; the caller has made room for it.
    ///
    /// Dropping a log from std's map may leave a tombstone in its place, which keeps the probes
    /// that pass it working and takes one entry of the map's spare room until the map is
    /// rehashed. Once tombstones have used up the spare room, std would double a map that is
    /// more than half full, as a full shard's is: under churn every shard would grow once. A
    /// shard copies its logs into a map of the size it has instead, which has no tombstones:
    /// a pass over its logs after as many drops as the map had spare room, and memory that
    /// never grows.
    pub(super) fn insert(&mut self, key: u64, log: Log) {
        if self.logs.len() == self.logs.capacity() {
            let mut logs = HashMap::with_hasher(BuildIdentity);
            // Without room for a copy, std's map grows instead, as it would have.
            if logs.try_reserve(self.room).is_ok() {
                logs.extend(self.logs.drain());
                self.logs = logs;
            }
        }
        let entry = Entry {
            log,
            older: key,
            newer: key,
        };
        self.logs.insert(key, entry);
        self.link_last(key);
        // A map that grew has room for more (a shard with room for no log, or a failed copy).
        self.room = self.room.max(self.logs.capacity());
    }

    /// Notes that `key`'s log was written: it becomes the most recently written.
    pub(super) fn touched(&mut self, key: u64) {
        if self.most_recent != Some(key) {
            self.unlink(key);
            self.link_last(key);
        }
    }

    /// Makes room for one more log, if the shard is full: drops the least recently written log
    /// if it is idle, or (under [`Overflow::EvictLeastConstrained`]) a log that is not at its
    /// limit among the [`EVICTION_SCAN`] least recently written. `false`: no room.
    pub(super) fn make_room(
        &mut self,
        config: &SlidingLog,
        capacity: usize,
        now: Nanos,
        policy: Overflow,
    ) -> bool {
        if self.logs.len() < capacity {
            return true;
        }
        // If the least recently written log is idle, so may be others, but one is all we need.
        if let Some(key) = self.least_recent {
            if config.is_idle(&self.entry(key).log, now) {
                self.remove(key);
                self.reuses += 1;
                return true;
            }
        }
        if policy != Overflow::EvictLeastConstrained {
            return false;
        }
        // A log that could still admit a request goes; those at their limit are being limited
        // right now and keep their state, and move (together, in their order) to the back of
        // the order, so that the next overflow looks at other logs. A bounded amount of work
        // under the lock, however full of limited logs the shard is.
        let mut at = self.least_recent;
        let mut passed = None;
        for _ in 0..EVICTION_SCAN {
            let Some(key) = at else {
                break;
            };
            let entry = self.entry(key);
            let log = &entry.log;
            if config.used(log, config.time(log, now)).0 < config.limit {
                // Moving limited logs to the back can leave an idle log behind the front, where
                // only this walk finds it: count it as what it is.
                if config.is_idle(log, now) {
                    self.reuses += 1;
                } else {
                    self.evictions += 1;
                }
                self.remove(key);
                if let Some(last) = passed {
                    self.move_to_back(last);
                }
                return true;
            }
            passed = Some(key);
            at = (entry.newer != key).then_some(entry.newer);
        }
        if let Some(last) = passed {
            self.move_to_back(last);
        }
        false
    }

    /// The time until the log at the front of the write order leaves the window, if nothing
    /// changes: a full shard has room by then, since [`make_room`](Shard::make_room) drops an
    /// idle front log under every policy. Room may come sooner under
    /// [`Overflow::EvictLeastConstrained`], which also takes a log that drops below its limit,
    /// and whose moves of limited logs to the back leave the order no longer sorted by time.
    pub(super) fn time_to_room(&self, config: &SlidingLog, now: Nanos) -> Nanos {
        let newest = self
            .least_recent
            .and_then(|key| self.entry(key).log.newest());
        Nanos::from_nanos(newest.map_or(0, |stamp| {
            (stamp + config.period).saturating_sub(now.as_nanos())
        }))
    }

    fn entry(&self, key: u64) -> &Entry {
        &self.logs[&key]
    }

    fn entry_mut(&mut self, key: u64) -> &mut Entry {
        self.logs
            .get_mut(&key)
            .expect("the write order links only keys in the map")
    }

    /// Drops `key`'s log, if it has one.
    pub(super) fn remove(&mut self, key: u64) {
        if self.logs.contains_key(&key) {
            self.unlink(key);
            self.logs.remove(&key);
        }
    }

    /// Drops every log, keeping the map's room and the counters.
    pub(super) fn clear(&mut self) {
        self.logs.clear();
        (self.least_recent, self.most_recent) = (None, None);
    }

    /// Takes `key`'s log out of the write order (it stays in the map), joining its neighbours.
    fn unlink(&mut self, key: u64) {
        let Entry { older, newer, .. } = *self.entry(key);
        let (has_older, has_newer) = (older != key, newer != key);
        if has_older {
            // The older neighbour now ends the order if this log did.
            self.entry_mut(older).newer = if has_newer { newer } else { older };
        } else {
            self.least_recent = has_newer.then_some(newer);
        }
        if has_newer {
            self.entry_mut(newer).older = if has_older { older } else { newer };
        } else {
            self.most_recent = has_older.then_some(older);
        }
    }

    /// Moves the least recently written logs, up to and including `last`, to the most recent
    /// end of the order, in their order.
    fn move_to_back(&mut self, last: u64) {
        let (Some(first), Some(tail)) = (self.least_recent, self.most_recent) else {
            return;
        };
        if last == tail {
            // The run is the whole order: it is already where it goes.
            return;
        }
        let after = self.entry(last).newer;
        self.entry_mut(after).older = after;
        self.least_recent = Some(after);
        self.entry_mut(tail).newer = first;
        self.entry_mut(first).older = tail;
        self.entry_mut(last).newer = last;
        self.most_recent = Some(last);
    }

    /// Puts `key`'s log (out of the order) at the most recent end of the order.
    fn link_last(&mut self, key: u64) {
        match self.most_recent {
            Some(last) => {
                self.entry_mut(last).newer = key;
                let entry = self.entry_mut(key);
                (entry.older, entry.newer) = (last, key);
            }
            None => {
                let entry = self.entry_mut(key);
                (entry.older, entry.newer) = (key, key);
                self.least_recent = Some(key);
            }
        }
        self.most_recent = Some(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl Shard {
        /// The keys from the least to the most recently written, read both ways along the links
        /// (checking that they agree and that each end names itself).
        fn order(&self) -> Vec<u64> {
            let walk = |start: Option<u64>, step: fn(&Entry) -> u64| {
                let mut keys = Vec::new();
                let mut at = start;
                while let Some(key) = at {
                    keys.push(key);
                    let next = step(self.entry(key));
                    at = (next != key).then_some(next);
                    assert!(keys.len() <= self.logs.len(), "a cycle");
                }
                keys
            };
            let forward = walk(self.least_recent, |entry| entry.newer);
            let mut backward = walk(self.most_recent, |entry| entry.older);
            backward.reverse();
            assert_eq!(forward, backward);
            assert_eq!(forward.len(), self.logs.len());
            forward
        }
    }

    /// What a capacity error reports a shard would take is what a shard built for as many keys
    /// takes, as `memory` reads it from the map's capacity: the bucket counts, worked out one
    /// from the keys and one from what the map allocated, agree.
    #[test]
    fn the_bytes_to_build_a_shard_are_what_it_takes() {
        for keys in (0..=300).chain([1_000, 4_095, 4_096, 4_097, 70_000]) {
            let shard = Shard::with_capacity(keys).unwrap();
            assert_eq!(
                shard.memory() as u128,
                Shard::bytes_to_build(keys),
                "{keys} keys"
            );
        }
        // 100 keys: 128 buckets of an entry (the key, a log and its two links) and a control
        // byte, and 16 control bytes more.
        let bucket = if cfg!(target_pointer_width = "64") {
            8 + 32 + 8 + 16 + 1 // a `VecDeque` is four words
        } else {
            8 + 16 + 8 + 16 + 1
        };
        assert_eq!(Shard::bytes_to_build(100), 128 * bucket + 16);
    }

    /// Churn, the shard kept full while its oldest log is dropped and a new key inserted, 50
    /// times its size over, never grows its map: the tombstones that dropped logs leave are
    /// cleared by copying the logs into a map of the same size, where std's map would double.
    /// What `memory` reports stays what the shard was built with, and the write order holds.
    #[test]
    fn churn_never_grows_the_map() {
        // The map hashes nothing itself: keys are hashes already, so mix them as a hash would
        // (splitmix64's finalizer): random positions, and so full groups, where a drop leaves
        // a tombstone.
        let hash = |n: u64| {
            let z = (n ^ (n >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        for keys in [16, 125, 161, 1_000] {
            let mut shard = Shard::with_capacity(keys).unwrap();
            let (room, built) = (shard.room, shard.memory());
            for n in 0..keys as u64 {
                shard.insert(hash(n), Log::default());
            }
            for n in keys as u64..51 * keys as u64 {
                shard.remove(shard.least_recent.unwrap());
                shard.insert(hash(n), Log::default());
                assert!(shard.logs.capacity() <= room, "{keys} keys: the map grew");
            }
            assert_eq!((shard.room, shard.memory()), (room, built), "{keys} keys");
            let newest: Vec<u64> = (50 * keys as u64..51 * keys as u64).map(hash).collect();
            assert_eq!(shard.order(), newest);
        }
    }

    proptest! {
        /// Inserts, writes, removals and moves of a front run to the back keep the links in the
        /// order a plain list would, for keys that include 0 and `u64::MAX` (no key value means
        /// "none").
        #[test]
        fn write_order_is_a_list(ops in proptest::collection::vec((0..4u8, 0..6usize), 0..64)) {
            let keys = [0, 1, 2, 42, u64::MAX - 1, u64::MAX];
            let mut shard = Shard::with_capacity(keys.len()).unwrap();
            let mut model: Vec<u64> = Vec::new();
            for (op, k) in ops {
                let key = keys[k];
                let present = model.contains(&key);
                match op {
                    0 if !present => {
                        shard.insert(key, Log::default());
                        model.push(key);
                    }
                    1 if present => {
                        shard.touched(key);
                        model.retain(|&m| m != key);
                        model.push(key);
                    }
                    2 if present => {
                        shard.remove(key);
                        model.retain(|&m| m != key);
                    }
                    3 if present => {
                        // The run from the front up to `key` goes to the back.
                        shard.move_to_back(key);
                        let at = model.iter().position(|&m| m == key).unwrap();
                        model.rotate_left(at + 1);
                    }
                    _ => {}
                }
                prop_assert_eq!(shard.order(), model.clone());
            }
        }
    }
}
