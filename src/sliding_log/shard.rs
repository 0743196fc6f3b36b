//! A shard of the keyed log: a map from key hashes to logs, and the order in which they were
//! written, so that the least recently written log is found when room is needed.

use core::hash::BuildHasher;
use std::collections::{HashMap, TryReserveError, VecDeque};

use super::log::{Log, SlidingLog};
use crate::clock::Nanos;
use crate::store::Overflow;

/// One shard: its logs, and the order in which they were last written (to find idle ones).
#[derive(Debug, Default)]
pub(super) struct Shard {
    pub(super) logs: HashMap<u64, Log, BuildIdentity>,
    /// `(newest stamp when pushed, key)`, oldest first. Entries go stale when their log is written
    /// again or removed; they are skipped when met, and the queue is rebuilt when stale ones
    /// dominate, so it stays within twice the number of logs.
    order: VecDeque<(u64, u64)>,
    pub(super) reuses: u64,
    pub(super) evictions: u64,
    pub(super) overflows: u64,
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

impl Shard {
    /// An empty shard with room for `keys` logs, allocated now.
    pub(super) fn with_capacity(keys: usize) -> Result<Shard, TryReserveError> {
        let mut logs = HashMap::with_hasher(BuildIdentity);
        logs.try_reserve(keys)?;
        Ok(Shard {
            logs,
            ..Shard::default()
        })
    }

    /// Bytes the shard holds: its map (with about a byte of control data per entry), its queue,
    /// and its logs' entries.
    pub(super) fn memory(&self) -> usize {
        let per_entry = core::mem::size_of::<(u64, Log)>() + 1;
        self.logs.capacity() * per_entry
            + self.order.capacity() * core::mem::size_of::<(u64, u64)>()
            + self.logs.values().map(Log::bytes).sum::<usize>()
    }

    /// Makes room for one more log, if the shard is full: drops the least recently written log
    /// if it is idle, or (under [`Overflow::EvictLeastConstrained`]) the least recently written
    /// log that is not at its limit. `false`: no room.
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
        // Stale entries at the front go; the first current one is the least recently written
        // log. If it is idle, so may be others, but one is all we need.
        while let Some(&front) = self.order.front() {
            if !self.is_current(front) {
                self.order.pop_front();
                continue;
            }
            let key = front.1;
            if config.is_idle(&self.logs[&key], now) {
                self.order.pop_front();
                self.logs.remove(&key);
                self.reuses += 1;
                return true;
            }
            break;
        }
        if policy != Overflow::EvictLeastConstrained {
            return false;
        }
        // The least recently written log that could still admit a request (one at its limit is
        // being limited right now and keeps its state). Its queue entry goes stale.
        let victim = self.order.iter().find(|&&entry| {
            self.is_current(entry) && {
                let log = &self.logs[&entry.1];
                config.used(log, config.time(log, now)).0 < config.limit
            }
        });
        match victim {
            Some(&(_, key)) => {
                self.logs.remove(&key);
                self.evictions += 1;
                true
            }
            None => false,
        }
    }

    /// Whether a queue entry `(stamp, key)` still describes `key`'s log: written last at `stamp`.
    fn is_current(&self, (stamp, key): (u64, u64)) -> bool {
        self.logs.get(&key).and_then(Log::newest) == Some(stamp)
    }

    /// The time until the least recently written log leaves the window, if nothing changes:
    /// when a full shard will have room.
    pub(super) fn time_to_room(&self, config: &SlidingLog, now: Nanos) -> Nanos {
        let oldest = self.order.iter().find(|&&entry| self.is_current(entry));
        Nanos::from_nanos(oldest.map_or(0, |&(stamp, _)| {
            (stamp + config.period).saturating_sub(now.as_nanos())
        }))
    }

    /// Notes that `key`'s log was written, with `stamp` its newest entry.
    pub(super) fn touched(&mut self, key: u64, stamp: u64) {
        self.order.push_back((stamp, key));
        if self.order.len() > 2 * self.logs.len() + 64 {
            let mut current: Vec<(u64, u64)> = self
                .logs
                .iter()
                .filter_map(|(&k, log)| log.newest().map(|s| (s, k)))
                .collect();
            current.sort_unstable();
            self.order = current.into();
        }
    }
}
