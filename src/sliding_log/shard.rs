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
    /// again or removed; they are skipped when met, and the queue is rebuilt in place when stale
    /// ones dominate, so it never holds more than [`order_room`] entries and is allocated once.
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

/// How many logs an overflow under [`Overflow::EvictLeastConstrained`] looks at, at most, for
/// one it may evict: as many as a key of the lock-free table can be evicted from (its two groups
/// of 8 slots). Without a bound, a flood of new keys into a shard full of logs at their limit
/// would scan the whole shard, under its lock, for every request.
const EVICTION_SCAN: usize = 16;

/// The most entries the write-order queue of a shard of `keys` logs ever holds: the rebuild in
/// [`Shard::touched`] runs as soon as a push takes it past twice the logs plus 64.
fn order_room(keys: usize) -> usize {
    keys.saturating_mul(2).saturating_add(65)
}

impl Shard {
    /// An empty shard with room for `keys` logs, its map and queue allocated now.
    pub(super) fn with_capacity(keys: usize) -> Result<Shard, TryReserveError> {
        let mut logs = HashMap::with_hasher(BuildIdentity);
        logs.try_reserve(keys)?;
        let mut order = VecDeque::new();
        order.try_reserve_exact(order_room(keys))?;
        Ok(Shard {
            logs,
            order,
            ..Shard::default()
        })
    }

    /// Bytes the shard holds: its map, its queue, and its logs' entries.
    ///
    /// The map's share is computed from its capacity as std's `HashMap` (hashbrown) lays it
    /// out, which std does not expose: a power-of-two number of buckets of which 7/8 are usable
    /// (all but one below 8), each an entry and a control byte, plus 16 control bytes more.
    pub(super) fn memory(&self) -> usize {
        let usable = self.logs.capacity();
        let buckets = match usable {
            0 => 0,
            1..=7 => usable + 1,
            _ => usable / 7 * 8,
        };
        let map = if buckets == 0 {
            0
        } else {
            buckets * (core::mem::size_of::<(u64, Log)>() + 1) + 16
        };
        map + self.order.capacity() * core::mem::size_of::<(u64, u64)>()
            + self.logs.values().map(Log::bytes).sum::<usize>()
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
        // A log that could still admit a request goes; one at its limit is being limited right
        // now and keeps its state, and moves to the back of the queue, so that the next overflow
        // looks at other logs. Stale entries met on the way are dropped (each once), so this is
        // a bounded amount of work under the lock however full of limited logs the shard is.
        let mut looked = 0;
        while looked < EVICTION_SCAN {
            let Some(entry) = self.order.pop_front() else {
                break;
            };
            if !self.is_current(entry) {
                continue;
            }
            looked += 1;
            let log = &self.logs[&entry.1];
            if config.used(log, config.time(log, now)).0 < config.limit {
                // Rotated entries can leave an idle log behind the front, where only this scan
                // finds it: count it as what it is.
                if config.is_idle(log, now) {
                    self.reuses += 1;
                } else {
                    self.evictions += 1;
                }
                self.logs.remove(&entry.1);
                return true;
            }
            self.order.push_back(entry);
        }
        false
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
            // In place: the queue keeps the room it was given (one entry per log fits).
            self.order.clear();
            self.order.extend(current);
        }
    }
}
