//! Paired ratios: tollgate against governor, against a `Mutex<HashMap>` keyed limiter and against
//! the floor, measured in alternating rounds so that the drift of a shared, noisy machine cancels
//! out.
//!
//! Criterion (`benches/direct.rs`) measures one function after another; on a machine whose speed
//! drifts by ±10% over a minute, two medians taken a minute apart cannot settle a 5% question.
//! Here each round times A and then B (the order alternates between rounds) over the same number
//! of calls, and the figure reported is the **median of the per-round ratios**, with the spread
//! of the middle half (`support/rounds.rs`).
//!
//!     cargo bench --bench paired

mod support;
use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use portable_atomic::AtomicU128;
use support::counting::{bytes_per_key, Counting};
use support::rounds::{
    any_row_run, counted, paired, rounds, section_selected, selected, time, time_batches,
    time_keys, CALLS,
};
use support::wide::{prefetch, Wide};
use support::{contended, on_threads};
use tollgate::{
    Algorithm, Clock, CoarseClock, Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter,
    Transition, TscClock,
};

/// Counts the bytes of the memory rows; off (one relaxed load per allocation) everywhere else.
#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Memory per key held: the bytes each limiter holds after a million distinct keys, for `u64`,
/// `IpAddr` and `String` keys. Tollgate's table is sized once for a capacity of a million keys;
/// governor's map (DashMap, default features) grows with every key.
fn memory_rows() {
    const KEYS: u64 = 1_000_000;
    let quota = Quota::per_second(10).unwrap();
    let gquota = governor::Quota::per_second(NonZeroU32::new(10).unwrap());
    fn row<T, U>(kind: &str, ours: impl FnOnce() -> T, theirs: impl FnOnce() -> U) {
        let name = format!("memory per key held, 1M {kind} keys: tollgate / governor");
        if selected(&name) {
            counted(
                &name,
                bytes_per_key(KEYS, ours),
                bytes_per_key(KEYS, theirs),
            );
        }
    }
    let ip = |i: u64| std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0A00_0000 + i as u32));
    let name = |i: u64| format!("client-{i:08}");
    row(
        "u64",
        || {
            let l = KeyedRateLimiter::<u64>::gcra(quota, KEYS as usize).unwrap();
            (0..KEYS).for_each(|k| {
                let _ = l.check_key(&k);
            });
            l
        },
        || {
            let l = governor::RateLimiter::keyed(gquota);
            (0..KEYS).for_each(|k| {
                let _ = l.check_key(&k);
            });
            l
        },
    );
    row(
        "IpAddr",
        || {
            let l = KeyedRateLimiter::<std::net::IpAddr>::gcra(quota, KEYS as usize).unwrap();
            (0..KEYS).for_each(|k| {
                let _ = l.check_key(&ip(k));
            });
            l
        },
        || {
            let l = governor::RateLimiter::keyed(gquota);
            (0..KEYS).for_each(|k| {
                let _ = l.check_key(&ip(k));
            });
            l
        },
    );
    row(
        "String",
        || {
            let l = KeyedRateLimiter::<String>::gcra(quota, KEYS as usize).unwrap();
            (0..KEYS).for_each(|k| {
                let _ = l.check_key(name(k).as_str());
            });
            l
        },
        || {
            let l = governor::RateLimiter::keyed(gquota);
            (0..KEYS).for_each(|k| {
                let _ = l.check_key(&name(k));
            });
            l
        },
    );
}

/// Nanoseconds per call per thread, with `threads` threads each making `CALLS / threads` calls
/// at once (the slowest thread's time).
fn time_threads<F: Fn() -> bool + Sync>(threads: usize, f: &F) -> f64 {
    time_threads_calls(threads, CALLS, f)
}

/// [`time_threads`] over `total` calls in all.
fn time_threads_calls<F: Fn() -> bool + Sync>(threads: usize, total: u64, f: &F) -> f64 {
    let calls = total / threads as u64;
    contended(threads, calls, f).as_nanos() as f64 / calls as f64
}

/// The thread counts of the contended rows: 2 (the scaling target), then each power of
/// two up to the machine's CPU count, and that count itself.
fn thread_counts() -> Vec<usize> {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let mut counts: Vec<usize> = std::iter::successors(Some(2), |&t| Some(t * 2))
        .take_while(|&t| t <= cpus)
        .collect();
    if counts.last() != Some(&cpus) {
        counts.push(cpus);
    }
    counts
}

/// A reproducible key sequence over `0..keys`, uniform or Zipf(1.0).
fn sequence(keys: u64, len: usize, seed: u64, zipf: bool) -> Vec<u64> {
    if zipf {
        support::zipf(keys, len, seed)
    } else {
        support::uniform(keys, len, seed)
    }
}

/// A stand-in for what a server does between two checks: four independent chains of 64 shifts,
/// xors and multiplies each (about 780 instructions in this build, no memory traffic), more than
/// the out-of-order window of any CPU measured holds, so that one check's miss cannot overlap
/// the next check's.
fn other_work(key: u64, multiplier: u64) -> u64 {
    let mut lanes = [key, key ^ 1, key ^ 2, key ^ 3];
    for _ in 0..4 {
        for lane in &mut lanes {
            *lane = support::mix(*lane, multiplier);
        }
    }
    lanes.iter().fold(0, |all, lane| all ^ lane)
}

/// [`KeyedRateLimiter::check_keys`] over a batch.
fn check_batch(limiter: &KeyedRateLimiter<u64>, keys: &[u64]) {
    for decision in limiter.check_keys(keys) {
        black_box(decision.is_ok());
    }
}

/// The keyed limiter many servers start with: one `Mutex<HashMap<key, state>>` (std's hasher),
/// here with tollgate's own GCRA transition and clock, so that only where the states live, and
/// how they are reached, differs from tollgate. Memory grows with every new key.
struct LockedMap {
    gcra: Gcra,
    clock: TscClock,
    map: Mutex<HashMap<u64, u64>>,
}

impl LockedMap {
    /// A map holding keys `0..keys`, each checked once.
    fn new(quota: Quota, keys: u64) -> LockedMap {
        let map = LockedMap {
            gcra: Gcra::from(quota),
            clock: TscClock::new(),
            map: Mutex::new(HashMap::new()),
        };
        for k in 0..keys {
            map.check(k);
        }
        map
    }

    /// Admits one request for `key`: the clock read outside the lock, the decision inside.
    fn check(&self, key: u64) -> bool {
        let now = self.clock.now();
        let mut map = self.map.lock().unwrap();
        let state = map.entry(key).or_insert(0);
        match self.gcra.transition(*state, now, 1) {
            Transition::Allow { state: next } => {
                *state = next;
                true
            }
            Transition::Deny { .. } => false,
        }
    }
}

/// The floor of a keyed check: a prefetch of the slot a key picks in a table of as many slots
/// as tollgate's for the same keys, one clock read, then a load and a 128-bit compare-and-swap
/// of the slot, with none of a check's hashing, probing, scanning or deciding.
struct Floor {
    clock: TscClock,
    table: Vec<AtomicU128>,
    wide: Wide,
}

impl Floor {
    fn new(slots: usize) -> Floor {
        Floor {
            clock: TscClock::new(),
            table: (0..slots).map(|_| AtomicU128::new(0)).collect(),
            wide: Wide::detect(),
        }
    }

    /// The index of the slot `key` picks with the multiplicative hash `multiplier` ("fast
    /// range" onto the table): keys scatter as tollgate's do.
    fn slot(&self, key: u64, multiplier: u64) -> usize {
        let n = self.table.len() as u128;
        ((u128::from(key.wrapping_mul(multiplier)) * n) >> 64) as usize
    }

    /// The floor of one check of `key`: its slot's line is prefetched before the clock read, as
    /// tollgate prefetches a key's lines, so that the miss overlaps the clock read and the
    /// compare-and-swap of the check before.
    fn touch(&self, key: u64) -> bool {
        self.check(key, false, false)
    }

    /// [`touch`](Floor::touch) with a load of a second slot, picked by the key independently of
    /// the first (both prefetched, the two loads overlapping): the reads and write of a check of
    /// tollgate's table, whose probe reads one line in each of two groups before it writes one
    /// (it prefetches four lines: [`touch_four`](Floor::touch_four)).
    fn touch_two(&self, key: u64) -> bool {
        self.check(key, true, false)
    }

    /// [`touch_two`](Floor::touch_two) with the next cache line after each slot's prefetched
    /// too: as many lines as a check of tollgate's fetches, which prefetches both lines of both
    /// of its key's 8-slot groups though its first step most often reads one line of each. On
    /// one thread the extra fetches overlap and cost nothing; from many threads they do.
    fn touch_four(&self, key: u64) -> bool {
        self.check(key, true, true)
    }

    /// The floors; `two_lines` and `next_lines` are constants at each call, so each floor
    /// compiles to its own code.
    #[inline(always)]
    fn check(&self, key: u64, two_lines: bool, next_lines: bool) -> bool {
        let at = self.slot(key, 0x9E37_79B9_7F4A_7C15);
        let other_at = two_lines.then(|| self.slot(key, 0xD6E8_FEB8_6659_FD93));
        let slot = &self.table[at];
        let other = other_at.map(|other_at| &self.table[other_at]);
        prefetch(slot);
        if let Some(other) = other {
            prefetch(other);
        }
        if next_lines {
            // A line further on: 4 slots of 16 bytes (or the table's last slot).
            for first in [Some(at), other_at].into_iter().flatten() {
                prefetch(&self.table[(first + 4).min(self.table.len() - 1)]);
            }
        }
        let now = self.clock.now().as_nanos();
        let extra = other.map_or(0, |other| self.wide.load(other) & 1);
        let current = self.wide.load(slot);
        let next = current ^ u128::from(now) ^ extra;
        self.wide.compare_exchange(slot, current, next)
    }
}

/// A minimal replica of tollgate's keyed check, for the bound of the design itself: the same
/// table layout (two 8-slot groups of 16-byte `(tag, state)` slots per key, filled the same way),
/// the same hash, probe, prefetch, clock read, four-slot first step and GCRA compare-and-swap,
/// and nothing else: no shards, no reservations or overflow policy, no generic algorithm or
/// result types. What tollgate's check costs beyond this is the price of its generality; what
/// this costs beyond the two-line floor is the work any check of this design does.
struct Replica {
    groups: Vec<ReplicaGroup>,
    hasher: ahash::RandomState,
    clock: TscClock,
    wide: Wide,
    /// GCRA's emission interval and tolerance, in nanoseconds.
    interval: u64,
    tolerance: u64,
}

/// Eight slots on one 128-byte-aligned pair of cache lines, as tollgate's groups.
#[repr(align(128))]
struct ReplicaGroup([AtomicU128; 8]);

impl Replica {
    /// A table of as many slots as `limiter`'s (rounded up to whole groups), holding `keys`
    /// under the same quota (the bench's limiters admit every check). A key whose group is full
    /// is left out, as tollgate's few overflows are (`report_overflows`); its checks scan both
    /// groups and find nothing.
    fn new(limiter: &KeyedRateLimiter<u64>, keys: u64) -> Replica {
        let gcra = limiter.algorithm();
        let replica = Replica {
            groups: (0..limiter.stats().slots.div_ceil(8))
                .map(|_| ReplicaGroup(std::array::from_fn(|_| AtomicU128::new(0))))
                .collect(),
            hasher: ahash::RandomState::new(),
            clock: TscClock::new(),
            wide: Wide::detect(),
            interval: gcra.emission_interval().as_nanos() as u64,
            tolerance: gcra.tolerance().as_nanos() as u64,
        };
        for key in 0..keys {
            replica.insert(key);
        }
        replica
    }

    /// Tag, the two groups and each group's starting slot, as `Table::probe` computes them for a
    /// table of one shard.
    #[inline(always)]
    fn probe(&self, key: u64) -> (u64, [&[AtomicU128; 8]; 2], [usize; 2]) {
        let hash = self.hasher.hash_one(key);
        let n = self.groups.len() as u64;
        let first = ((hash & 0xFFFF_FFFF) * n) >> 32;
        let mut second = ((hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) * n) >> 32;
        if second == first {
            second = (first + 1) % n;
        }
        let groups = [first, second].map(|g| &self.groups[g as usize].0);
        (
            hash.max(1),
            groups,
            [(hash >> 40) as usize % 8, (hash >> 44) as usize % 8],
        )
    }

    /// Puts `key` in the first empty slot, from its start, of the less loaded of its groups.
    fn insert(&self, key: u64) {
        let (tag, groups, starts) = self.probe(key);
        let load = |g: usize| {
            groups[g]
                .iter()
                .filter(|s| s.load(Ordering::Relaxed) != 0)
                .count()
        };
        let g = usize::from(load(1) < load(0));
        if let Some(slot) = (0..8)
            .map(|j| &groups[g][(starts[g] + j) % 8])
            .find(|s| s.load(Ordering::Relaxed) == 0)
        {
            slot.store(u128::from(tag), Ordering::Relaxed);
        }
    }

    /// One check of `key`, as `check_key` makes it.
    fn check(&self, key: u64) -> bool {
        let (tag, [first, second], [a, b]) = self.probe(key);
        for group in [first, second] {
            prefetch(&group[0]);
            prefetch(&group[4]);
        }
        let now = self.clock.now().as_nanos();
        let slots = [
            &first[a],
            &second[b],
            &first[(a + 1) % 8],
            &second[(b + 1) % 8],
        ];
        // Written out, as in tollgate: `slots.map(..)` compiles to an out-of-line call.
        let words = [
            self.wide.load(slots[0]),
            self.wide.load(slots[1]),
            self.wide.load(slots[2]),
            self.wide.load(slots[3]),
        ];
        let hits = (0..4).fold(0u32, |hits, i| {
            hits | u32::from(words[i] as u64 == tag) << i
        });
        if hits == 0 {
            return self.check_rest(tag, [first, second], [a, b], now);
        }
        let i = hits.trailing_zeros() as usize;
        self.decide(slots[i], words[i], tag, now)
    }

    /// The rest of the scan (after the first step's four slots), out of line as in tollgate.
    #[inline(never)]
    fn check_rest(
        &self,
        tag: u64,
        groups: [&[AtomicU128; 8]; 2],
        starts: [usize; 2],
        now: u64,
    ) -> bool {
        (4..16)
            .map(|i| &groups[i % 2][(starts[i % 2] + i / 2) % 8])
            .map(|slot| (slot, self.wide.load(slot)))
            .find(|&(_, word)| word as u64 == tag)
            .is_some_and(|(slot, word)| self.decide(slot, word, tag, now))
    }

    /// GCRA's admission on the slot's state.
    #[inline(always)]
    fn decide(&self, slot: &AtomicU128, word: u128, tag: u64, now: u64) -> bool {
        let tat = ((word >> 64) as u64).max(now).saturating_add(self.interval);
        tat <= now + self.tolerance
            && self
                .wide
                .compare_exchange(slot, word, u128::from(tat) << 64 | u128::from(tag))
    }
}

/// Says how many keys of a filled table overflowed (and so are absent), if any did.
fn report_overflows<K: ?Sized>(label: &str, limiter: &KeyedRateLimiter<K>) {
    let overflows = limiter.stats().overflows;
    if overflows > 0 {
        println!("({label}: {overflows} of the keys overflowed when the table was filled)");
    }
}

/// The quota of the keyed rows, for tollgate and the same for governor: a burst so large that
/// every check of the rows is admitted.
fn keyed_quotas() -> (Quota, governor::Quota) {
    let quota = Quota::per_second(1_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap();
    let governor_quota = governor::Quota::per_second(NonZeroU32::new(1_000).unwrap())
        .allow_burst(NonZeroU32::new(1_000_000).unwrap());
    (quota, governor_quota)
}

/// Writes the API key numbered `key` (`key_` and 16 hex digits) into `buf`, replacing what it
/// held.
fn api_key(buf: &mut String, key: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.clear();
    buf.push_str("key_");
    for shift in (0..16).rev() {
        buf.push(char::from(HEX[(key >> (4 * shift)) as usize & 15]));
    }
}

/// API keys from a key sequence, written one call ahead of their checks: each call writes the
/// next call's keys into one buffer, then decides the keys that the call before wrote into the
/// other.
///
/// A key written just before its own check costs tollgate about a third more over a million keys
/// (governor's check takes the same either way). The likely reason: the key is written a byte at a time, too narrow for the
/// hash's wide loads to take the bytes from the pending writes, so the hash waits for the
/// writes to reach the cache; writes reach it in order, after the check before, whose locked
/// compare-and-swap waits for its memory access; and so no two checks overlap. A server's key
/// was written when its request was read, well before the check.
struct ApiKeys<'s> {
    seq: &'s [u64],
    /// Where the next keys come from in the sequence.
    at: usize,
    buffers: [Vec<String>; 2],
    /// The buffer that holds the keys of the next call.
    ready: usize,
}

impl<'s> ApiKeys<'s> {
    /// The keys numbered by `seq` from `at` on, `batch` to a call; the first call's keys are
    /// written here.
    fn new(seq: &'s [u64], at: usize, batch: usize) -> ApiKeys<'s> {
        let mut keys = ApiKeys {
            seq,
            at: at + batch,
            buffers: [vec![String::new(); batch], vec![String::new(); batch]],
            ready: 0,
        };
        for (key, &k) in keys.buffers[0].iter_mut().zip(&seq[at..]) {
            api_key(key, k);
        }
        keys
    }

    /// Nanoseconds per key over `CALLS` keys, handed to `decide` a batch at a time, each call's
    /// keys written during the call before.
    fn time<R>(&mut self, mut decide: impl FnMut(&[String]) -> R) -> f64 {
        let batch = self.buffers[0].len();
        let (buffers, ready) = (&mut self.buffers, &mut self.ready);
        time_batches(self.seq, &mut self.at, batch, |next| {
            let [first, second] = &mut *buffers;
            let (now, spare) = if *ready == 0 {
                (first, second)
            } else {
                (second, first)
            };
            for (key, &k) in spare.iter_mut().zip(next) {
                api_key(key, k);
            }
            black_box(decide(now));
            *ready ^= 1;
        })
    }
}

/// Tollgate's and governor's keyed limiters over `keys` `String` keys (API keys), both holding
/// every key, compared on the same sequence. Tollgate looks a key up by `&str` and hashes it
/// only, since its table holds no keys; governor's map holds every key in an allocation of its
/// own and compares the key it finds with the one asked for. Each side writes its keys into
/// buffers of its own ([`ApiKeys`]), as a server holds the key it read from a request: the
/// key's bytes are in cache on both sides, and both pay the same few nanoseconds to write them.
fn keyed_strings(label: &str, keys: u64) {
    if !section_selected(&format!("keyed {label}")) {
        return;
    }
    let (quota, governor_quota) = keyed_quotas();
    let tollgate = KeyedRateLimiter::<String>::gcra(quota, keys as usize).unwrap();
    let governor = governor::RateLimiter::keyed(governor_quota);
    let mut key = String::new();
    for k in 0..keys {
        api_key(&mut key, k);
        let _ = tollgate.check_key(key.as_str());
        governor.check_key(&key).unwrap();
    }
    report_overflows(label, &tollgate);
    let seq = sequence(keys, 1 << 22, 13, false);
    let mut ours = ApiKeys::new(&seq, 0, 1);
    let mut theirs = ApiKeys::new(&seq, 1 << 21, 1);
    let mut batches = ApiKeys::new(&seq, 0, 64);
    paired(
        &format!("keyed {label}: tollgate / governor"),
        || ours.time(|keys| tollgate.check_key(keys[0].as_str()).is_ok()),
        || theirs.time(|keys| governor.check_key(&keys[0]).is_ok()),
    );
    // What writing the keys costs each side, against tollgate's whole check.
    paired(
        &format!("keyed {label}: writing the key alone / tollgate"),
        || theirs.time(|keys| black_box(keys[0].len()) > 4),
        || ours.time(|keys| tollgate.check_key(keys[0].as_str()).is_ok()),
    );
    paired(
        &format!("keyed {label}: tollgate check_keys (batches of 64) / governor"),
        || {
            batches.time(|keys| {
                for decision in tollgate.check_keys(keys.iter().map(String::as_str)) {
                    black_box(decision.is_ok());
                }
            })
        },
        || theirs.time(|keys| governor.check_key(&keys[0]).is_ok()),
    );
}

/// A floor's two rows over `seq`, continuing at `a` and `b`: the floor against governor (where
/// it exceeds 0.5, no check that does the floor's work reaches 2x governor), and `check`,
/// tollgate's, against the floor.
fn floor_rows(
    label: &str,
    floor: &str,
    seq: &[u64],
    (a, b): (&mut usize, &mut usize),
    touch: impl Fn(u64) -> bool,
    check: impl Fn(u64) -> bool,
    governor: impl Fn(u64) -> bool,
) {
    paired(
        &format!("keyed {label}: {floor} / governor"),
        || time_keys(seq, a, &touch),
        || time_keys(seq, b, &governor),
    );
    paired(
        &format!("keyed {label}: tollgate / {floor}"),
        || time_keys(seq, a, &check),
        || time_keys(seq, b, &touch),
    );
}

/// Tollgate's and governor's keyed limiters over `keys` keys, both holding every key, compared
/// on the same sequence.
fn keyed(label: &str, keys: u64, zipf: bool) {
    if !section_selected(&format!("keyed {label}")) {
        return;
    }
    let (quota, governor_quota) = keyed_quotas();
    let tollgate = KeyedRateLimiter::<u64>::gcra(quota, keys as usize).unwrap();
    let governor = governor::RateLimiter::keyed(governor_quota);
    for k in 0..keys {
        // A table filled to its capacity may overflow on a few keys (fewer than 0.1%, see the
        // crate docs); they stay absent, and are reported.
        let _ = tollgate.check_key(&k);
        governor.check_key(&k).unwrap();
    }
    report_overflows(label, &tollgate);
    let seq = sequence(keys, 1 << 22, 7, zipf);
    let (mut a, mut b) = (0, 1 << 21);
    paired(
        &format!("keyed {label}: tollgate / governor"),
        || time_keys(&seq, &mut a, |k| tollgate.check_key(&k).is_ok()),
        || time_keys(&seq, &mut b, |k| governor.check_key(&k).is_ok()),
    );
    paired(
        &format!("keyed {label}: tollgate check_keys (batches of 64) / governor"),
        || time_batches(&seq, &mut a, 64, |keys| check_batch(&tollgate, keys)),
        || time_keys(&seq, &mut b, |k| governor.check_key(&k).is_ok()),
    );
    if label == "1M uniform" {
        // Rich decisions (and a cost per request) in batches, against the cheap check.
        paired(
            &format!("keyed {label}: decide_keys / check_keys (batches of 64)"),
            || {
                time_batches(&seq, &mut a, 64, |keys| {
                    for decision in tollgate.decide_keys(keys.iter().map(|k| (k, 1))) {
                        black_box(decision.map(|d| d.remaining()).ok());
                    }
                })
            },
            || time_batches(&seq, &mut b, 64, |keys| check_batch(&tollgate, keys)),
        );
        // A quota per request (tiers), here the table's own, against the same decisions without.
        let (quota, _) = keyed_quotas();
        paired(
            &format!("keyed {label}: decide_keys_with / decide_keys (batches of 64)"),
            || {
                time_batches(&seq, &mut a, 64, |keys| {
                    let requests = keys.iter().map(|k| (k, &quota, 1));
                    for decision in tollgate.decide_keys_with(requests) {
                        black_box(decision.map(|d| d.remaining()).ok());
                    }
                })
            },
            || {
                time_batches(&seq, &mut b, 64, |keys| {
                    for decision in tollgate.decide_keys(keys.iter().map(|k| (k, 1))) {
                        black_box(decision.map(|d| d.remaining()).ok());
                    }
                })
            },
        );
    }
    if matches!(label, "1M uniform" | "100k uniform") {
        // The rows above check keys back to back, where a check's miss overlaps the next key's
        // hashing and prefetch as far as the core's out-of-order window reaches. A server does
        // other work between two checks, more than a window holds (224 to 512 micro-operations
        // on the CPUs of benches/README.md): here about 780 instructions of arithmetic
        // (`other_work`). What a check adds to a request's time is then, in units of the work's
        // time, (limiter + work) / work - 1: each row, with its times in the record. (The two
        // limiters side by side, each with the work, would give a ratio diluted by the work's
        // own time: not what a check costs.)
        let multiplier = black_box(support::MIX_MULTIPLIER);
        let work = |k: u64| black_box(other_work(k, multiplier)) != 0;
        paired(
            &format!("keyed {label}: between other work, tollgate / the work alone"),
            || time_keys(&seq, &mut a, |k| work(k) & tollgate.check_key(&k).is_ok()),
            || time_keys(&seq, &mut b, work),
        );
        paired(
            &format!("keyed {label}: between other work, governor / the work alone"),
            || time_keys(&seq, &mut b, |k| work(k) & governor.check_key(&k).is_ok()),
            || time_keys(&seq, &mut a, work),
        );
        // A server that knows the key before its work (the client's address on accept) can ask
        // for the key's lines first, so that the fetch overlaps the work.
        paired(
            &format!("keyed {label}: between other work, prefetch_key first / the work alone"),
            || {
                time_keys(&seq, &mut a, |k| {
                    tollgate.prefetch_key(&k);
                    work(k) & tollgate.check_key(&k).is_ok()
                })
            },
            || time_keys(&seq, &mut b, work),
        );
        // The least a check can add to the work: the same table's first thousand keys, whose
        // lines stay in cache.
        paired(
            &format!("keyed {label}: between other work, keys in cache / the work alone"),
            || {
                time_keys(&seq, &mut a, |k| {
                    work(k) & tollgate.check_key(&(k % 1_000)).is_ok()
                })
            },
            || time_keys(&seq, &mut b, work),
        );
        // And the least a check of this design can add: the four-line floor's fetches, clock
        // read and compare-and-swap (`Floor`) after the same work.
        let floor = Floor::new(tollgate.stats().slots);
        paired(
            &format!("keyed {label}: between other work, four-line floor / the work alone"),
            || time_keys(&seq, &mut a, |k| work(k) & floor.touch_four(k)),
            || time_keys(&seq, &mut b, work),
        );
    }
    // The floors and the minimal replica: over 1k and 100k keys all three floors; over a million
    // keys (against one dependent memory read in `main`) the four-line floor and the replica
    // alone, which show whether back-to-back checks overlap one key's miss with the next key's
    // hashing and prefetch, as they do only where the core's out-of-order window holds both
    // (on older cores with smaller windows, neither tollgate's check nor the replica's does).
    let all_floors = label == "1k uniform" || label == "100k uniform";
    if all_floors || label == "1M uniform" {
        // The least any keyed check can cost here, against governor: where this exceeds 0.5,
        // 2x governor is out of reach of every check that reads the clock and writes a 128-bit
        // slot of a table this size.
        let floor = Floor::new(tollgate.stats().slots);
        let check = |k: u64| tollgate.check_key(&k).is_ok();
        let governor_check = |k: u64| governor.check_key(&k).is_ok();
        if all_floors {
            floor_rows(
                label,
                "floor (clock + CAS of a random slot)",
                &seq,
                (&mut a, &mut b),
                |k| floor.touch(k),
                check,
                governor_check,
            );
            // The same with a second slot's line, in the way of tollgate's check, which waits
            // for a line of each of its key's two groups: the reads and write of the design,
            // with none of a check's hashing, probing, scanning or deciding.
            floor_rows(
                label,
                "two-line floor",
                &seq,
                (&mut a, &mut b),
                |k| floor.touch_two(k),
                check,
                governor_check,
            );
        }
        // And with the line after each slot's too, as many lines as a check fetches: on one
        // thread this costs what the two-line floor does.
        floor_rows(
            label,
            "four-line floor",
            &seq,
            (&mut a, &mut b),
            |k| floor.touch_four(k),
            check,
            governor_check,
        );
        // The floor's rows are done: its table is freed before the replica's is built.
        drop(floor);
        let replica = Replica::new(&tollgate, keys);
        paired(
            &format!("keyed {label}: minimal replica / tollgate"),
            || time_keys(&seq, &mut a, |k| replica.check(k)),
            || time_keys(&seq, &mut b, |k| tollgate.check_key(&k).is_ok()),
        );
        paired(
            &format!("keyed {label}: minimal replica / governor"),
            || time_keys(&seq, &mut a, |k| replica.check(k)),
            || time_keys(&seq, &mut b, |k| governor.check_key(&k).is_ok()),
        );
    }
    if label == "100k uniform" {
        // The rich decision against the cheap check, one key at a time (the table in cache, so
        // that the difference is not buried under memory latency).
        paired(
            &format!("keyed {label}: decide_key / check_key"),
            || {
                time_keys(&seq, &mut a, |k| {
                    tollgate.decide_key(&k, 1).is_ok_and(|d| d.is_allowed())
                })
            },
            || time_keys(&seq, &mut b, |k| tollgate.check_key(&k).is_ok()),
        );
        // Both limiters on a coarse clock (a time stamp refreshed every millisecond by an upkeep
        // thread: quanta's for governor, tollgate's own for `CoarseClock`): a check without its
        // `rdtsc`, which is 17-23% of tollgate's check in cache and which governor's default
        // clock reads too.
        let coarse = format!("keyed {label}: coarse clocks, tollgate / governor");
        // And what the coarse clock buys tollgate alone, on this CPU: the `rdtsc` it sheds costs
        // a few nanoseconds on some CPUs and several times that on others.
        let coarse_own = format!("keyed {label}: coarse clock / TSC clock, tollgate");
        if selected(&coarse) || selected(&coarse_own) {
            let coarse_governor = governor::RateLimiter::dashmap_with_clock(
                governor_quota,
                governor::clock::QuantaUpkeepClock::from_interval(
                    std::time::Duration::from_millis(1),
                )
                .unwrap(),
            );
            let coarse_tollgate = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
                .capacity(keys as usize)
                .clock(CoarseClock::new().unwrap())
                .build()
                .unwrap();
            for k in 0..keys {
                let _ = coarse_tollgate.check_key(&k);
                coarse_governor.check_key(&k).unwrap();
            }
            paired(
                &coarse,
                || time_keys(&seq, &mut a, |k| coarse_tollgate.check_key(&k).is_ok()),
                || time_keys(&seq, &mut b, |k| coarse_governor.check_key(&k).is_ok()),
            );
            paired(
                &coarse_own,
                || time_keys(&seq, &mut a, |k| coarse_tollgate.check_key(&k).is_ok()),
                || time_keys(&seq, &mut b, |k| tollgate.check_key(&k).is_ok()),
            );
        }
        // What a small batch costs against the same keys checked one by one: a call's fixed
        // cost (its buffers, a clock reading) against the overlap it buys.
        for batch in [1, 4] {
            paired(
                &format!("keyed {label}: check_keys (batches of {batch}) / check_key"),
                || time_batches(&seq, &mut a, batch, |keys| check_batch(&tollgate, keys)),
                || time_keys(&seq, &mut b, |k| tollgate.check_key(&k).is_ok()),
            );
        }
    }
}

/// Lines that say which run a record is from: when, at which commit, on which CPU, and which
/// rows were asked for. The commit is `TOLLGATE_COMMIT` where set (`benches/lent.sh` sets it to
/// the commit it built the bench at, since the tree on a lent machine need not say), else what
/// `git describe` says of the tree the bench runs in.
fn run_header(unix_time: u64) -> Vec<String> {
    let commit = std::env::var("TOLLGATE_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty())
        .or_else(|| {
            std::process::Command::new("git")
                .args(["describe", "--always", "--dirty", "--abbrev=7"])
                .output()
                .ok()
                .filter(|out| out.status.success())
                .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    // The first CPU's model name, family and model numbers (which tell apart generations that
    // share a name), from Linux.
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|line| line.split(':').next().map(str::trim) == Some(name))
            .and_then(|line| line.split_once(':'))
            .map_or("unknown", |(_, value)| value.trim())
    };
    let cpu = format!(
        "{} (family {}, model {})",
        field("model name"),
        field("cpu family"),
        field("model")
    );
    vec![
        format!("unix time: {unix_time}"),
        format!("commit: {commit}"),
        format!("cpu: {cpu}"),
        format!(
            "cpus: {}",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ),
        format!("rounds: {} x {CALLS} calls", rounds()),
        format!("filters: {:?}", support::rounds::filters()),
    ]
}

/// The direct rows' checks, each called out of line from the timing loops. Inlined there, a
/// check's compare-and-swap loop was at the mercy of the inliner's view of the whole bench: in
/// one build governor's `measure_and_replace` was called out of line from the loop, in the next
/// (after a change to tollgate's clock constructor, which neither check calls) it was inlined,
/// and the ratio moved by several percent. Behind a call of its own, each check is compiled from
/// its own code alone, as a server's call of a limiter in another module would be.
#[inline(never)]
fn direct_check(limiter: &RateLimiter) -> bool {
    limiter.check().is_ok()
}

/// Governor's side of [`direct_check`].
#[inline(never)]
fn governor_check(limiter: &governor::DefaultDirectRateLimiter) -> bool {
    limiter.check().is_ok()
}

/// The floor of a direct admission, as [`direct_check`] is called: one clock read and one
/// uncontended compare-and-swap.
#[inline(never)]
fn direct_floor(clock: &TscClock, word: &AtomicU64) -> bool {
    let now = clock.now().as_nanos();
    let current = word.load(Ordering::Relaxed);
    word.compare_exchange(current, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would pass nothing: run either way.
    println!(
        "paired rounds: {} x {CALLS} calls each; {} CPUs",
        rounds(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // Every row also goes to a file of its own per run, for `benches/report.py --paired`.
    let unix_time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let record = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("paired")
        .join(format!("run-{unix_time}.tsv"));
    match support::rounds::record_to(&record, &run_header(unix_time)) {
        Ok(()) => println!("rows recorded in {}", record.display()),
        Err(error) => println!("rows not recorded ({}): {error}", record.display()),
    }
    let unlimited = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000_000)
        .unwrap();
    let gov_unlimited = governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap());

    let tollgate = RateLimiter::gcra(unlimited);
    let governor = governor::RateLimiter::direct(gov_unlimited);
    paired(
        "allow: tollgate gcra / governor",
        || time(&mut || direct_check(&tollgate)),
        || time(&mut || governor_check(&governor)),
    );

    let clock = TscClock::new();
    let word = CachePadded::new(AtomicU64::new(0));
    paired(
        "allow: tollgate gcra / floor (clock + CAS)",
        || time(&mut || direct_check(&tollgate)),
        || time(&mut || direct_floor(&clock, &word)),
    );

    // A limiter whose quota has changed decides on a 128-bit (generation, state) word.
    let reconfigured = RateLimiter::gcra(unlimited.with_burst(1).unwrap());
    reconfigured.set_quota(unlimited).unwrap();
    paired(
        "allow: tollgate gcra reconfigured / tollgate gcra",
        || time(&mut || direct_check(&reconfigured)),
        || time(&mut || direct_check(&tollgate)),
    );

    let drained = RateLimiter::gcra(Quota::per_hour(1).unwrap());
    drained.check().unwrap();
    let governor_drained =
        governor::RateLimiter::direct(governor::Quota::per_hour(NonZeroU32::new(1).unwrap()));
    let _ = governor_drained.check();
    paired(
        "deny:  tollgate gcra / governor",
        || time(&mut || direct_check(&drained)),
        || time(&mut || governor_check(&governor_drained)),
    );
    paired(
        "deny / allow: tollgate gcra",
        || time(&mut || direct_check(&drained)),
        || time(&mut || direct_check(&tollgate)),
    );

    // Building a limiter, as a server that gives each connection or stream its own would: every
    // `TscClock` copies one quanta clock made per process, where governor's default clock makes
    // quanta's anew (`cpuid`, a trap to the hypervisor in a virtual machine). Time per build.
    const BUILDS: u32 = 1_000;
    let builds = |build: &dyn Fn() -> bool| {
        let start = Instant::now();
        for _ in 0..BUILDS {
            black_box(build());
        }
        start.elapsed().as_nanos() as f64 / f64::from(BUILDS)
    };
    paired(
        "build: tollgate gcra / governor",
        || builds(&|| RateLimiter::gcra(unlimited).check().is_ok()),
        || builds(&|| governor::RateLimiter::direct(gov_unlimited).check().is_ok()),
    );

    // Under contention the deny path's missing write is what matters: a denial only reads the
    // word, so every core keeps the line shared, where every admission must own it.
    let allow = || direct_check(&tollgate);
    let deny = || direct_check(&drained);
    let gov_allow = || governor_check(&governor);
    for threads in thread_counts() {
        paired(
            &format!("deny / allow, {threads} threads: tollgate gcra"),
            || time_threads(threads, &deny),
            || time_threads(threads, &allow),
        );
        paired(
            &format!("allow, {threads} threads: tollgate / governor"),
            || time_threads(threads, &allow),
            || time_threads(threads, &gov_allow),
        );
    }

    // Keyed, one thread, every key held: uniform and Zipf(1.0) popularity.
    keyed("1M uniform", 1_000_000, false);
    keyed("1M zipf", 1_000_000, true);
    // API keys: `String`s, looked up by `&str`.
    keyed_strings("1M String keys", 1_000_000);
    keyed("100k uniform", 100_000, false);
    keyed("100k zipf", 100_000, true);
    // A table that fits in L1: what a check costs without the memory (the clock read, the hash,
    // the lookup, the 128-bit compare-and-swap).
    keyed("1k uniform", 1_000, false);

    // One cache miss, for scale: a dependent random 16-byte read in a table the size of
    // tollgate's for 1M keys, against a tollgate check over 1M uniform keys.
    let (quota, _) = keyed_quotas();
    let keyed_1m = KeyedRateLimiter::<u64>::gcra(quota, 1_000_000).unwrap();
    for k in 0..1_000_000 {
        let _ = keyed_1m.check_key(&k);
    }
    report_overflows("1M, DRAM comparison", &keyed_1m);
    let slots = keyed_1m.stats().slots.next_power_of_two();
    let chain: Vec<u64> = {
        // A random cycle through every slot, for pointer chasing.
        let mut order = sequence(u64::MAX, slots, 11, false);
        let mut index: Vec<usize> = (0..slots).collect();
        index.sort_by_key(|&i| order[i]);
        order.clear();
        let mut next = vec![0u64; slots];
        for w in index.windows(2) {
            next[w[0]] = w[1] as u64;
        }
        next[index[slots - 1]] = index[0] as u64;
        next
    };
    let table: Vec<AtomicU128> = chain
        .into_iter()
        .map(|n| AtomicU128::new(n as u128))
        .collect();
    let seq = sequence(1_000_000, 1 << 22, 9, false);
    let wide = Wide::detect();
    let (mut at, mut node) = (0usize, 0usize);
    paired(
        "keyed 1M uniform: tollgate / one DRAM access",
        || time_keys(&seq, &mut at, |k| keyed_1m.check_key(&k).is_ok()),
        || {
            time(&mut || {
                node = wide.load(&table[node]) as usize;
                node != usize::MAX
            })
        },
    );

    // Distinct keys from several threads: throughput against one thread, which checks keys from
    // the same million. With t threads, thread j checks only keys k with k % t == j. Governor's
    // keyed limiter and the two-line floor (`Floor::touch_two`) run the same keys. Tollgate /
    // floor at n threads, against the same ratio at 2, says whether anything of tollgate's stops
    // it scaling, however the machine scales. The four-line floor (`Floor::touch_four`) fetches
    // the lines that a check does, to tell its reads apart from the rest of its work.

    // Built on first use: only the governor rows need it.
    let governor_1m = LazyLock::new(|| {
        let governor = governor::RateLimiter::keyed(
            governor::Quota::per_second(NonZeroU32::new(1_000).unwrap())
                .allow_burst(NonZeroU32::new(1_000_000).unwrap()),
        );
        for k in 0..1_000_000 {
            governor.check_key(&k).unwrap();
        }
        governor
    });
    // The same keys in one `Mutex<HashMap>`, with the same quota: what a server's own keyed
    // limiter often is. Its rows make an eighth of the calls (each side), since under contention
    // its checks queue for the lock.
    let locked_1m = LazyLock::new(|| LockedMap::new(quota, 1_000_000));
    let floor_1m = Floor::new(keyed_1m.stats().slots);
    let one_thread: Vec<u64> = sequence(1_000_000, 1 << 21, 20, false);
    let tollgate = |k: u64| keyed_1m.check_key(&k).is_ok();
    let locked = |k: u64| locked_1m.check(k);
    // Nanoseconds per check of the whole group of `t` threads over `total` checks, thread j
    // checking the keys of `per_thread[j]` (one thread: those of `one_thread`): lower is more
    // throughput.
    let run_calls =
        |t: usize, per_thread: &[Vec<u64>], total: u64, check: &(dyn Fn(u64) -> bool + Sync)| {
            let calls = total / t as u64;
            let slowest = on_threads(t, |j| {
                let keys = if t == 1 { &one_thread } else { &per_thread[j] };
                for i in 0..calls as usize {
                    black_box(check(keys[i % keys.len()]));
                }
            });
            slowest.as_nanos() as f64 / (calls * t as u64) as f64
        };
    paired(
        "keyed distinct keys, 1 thread: tollgate / Mutex<HashMap>",
        || run_calls(1, &[], CALLS / 8, &tollgate),
        || run_calls(1, &[], CALLS / 8, &locked),
    );
    for threads in thread_counts() {
        let per_thread: Vec<Vec<u64>> = (0..threads as u64)
            .map(|j| {
                sequence(1_000_000 / threads as u64, 1 << 21, 20 + j, false)
                    .into_iter()
                    .map(|k| k * threads as u64 + j)
                    .collect()
            })
            .collect();
        let run = |t: usize, check: &(dyn Fn(u64) -> bool + Sync)| {
            run_calls(t, &per_thread, CALLS, check)
        };
        let governor = |k: u64| governor_1m.check_key(&k).is_ok();
        let floor = |k: u64| floor_1m.touch_two(k);
        let four_line_floor = |k: u64| floor_1m.touch_four(k);
        paired(
            &format!("keyed distinct keys: 1 thread / {threads} threads, time per check"),
            || run(1, &tollgate),
            || run(threads, &tollgate),
        );
        paired(
            &format!("keyed distinct keys: two-line floor, 1 thread / {threads} threads"),
            || run(1, &floor),
            || run(threads, &floor),
        );
        paired(
            &format!("keyed distinct keys, {threads} threads: tollgate / two-line floor"),
            || run(threads, &tollgate),
            || run(threads, &floor),
        );
        paired(
            &format!("keyed distinct keys, {threads} threads: tollgate / governor"),
            || run(threads, &tollgate),
            || run(threads, &governor),
        );
        paired(
            &format!("keyed distinct keys, {threads} threads: tollgate / Mutex<HashMap>"),
            || run_calls(threads, &per_thread, CALLS / 8, &tollgate),
            || run_calls(threads, &per_thread, CALLS / 8, &locked),
        );
        paired(
            &format!("keyed distinct keys: four-line floor, 1 thread / {threads} threads"),
            || run(1, &four_line_floor),
            || run(threads, &four_line_floor),
        );
        paired(
            &format!("keyed distinct keys, {threads} threads: tollgate / four-line floor"),
            || run(threads, &tollgate),
            || run(threads, &four_line_floor),
        );
    }

    // One hot key from every thread, in tables of 1 000 keys: a client that every core serves at
    // once, admitted (quotas too large to bind) or kept over its limit (one per hour, spent). An
    // admission must own the key's line, on either limiter. A denial of tollgate's only loads its
    // slot, so the line stays shared by every core; governor's takes its map shard's read lock, an
    // atomic write to a word that every core shares.
    let hot_tables = |quota: Quota, gov_quota: governor::Quota| {
        let tollgate = KeyedRateLimiter::<u64>::gcra(quota, 1_000).unwrap();
        let governor = governor::RateLimiter::keyed(gov_quota);
        for k in 0..1_000u64 {
            let _ = tollgate.check_key(&k);
            let _ = governor.check_key(&k);
        }
        (tollgate, governor)
    };
    let (hot_allow, gov_hot_allow) = hot_tables(unlimited, gov_unlimited);
    let (hot_deny, gov_hot_deny) = hot_tables(
        Quota::per_hour(1).unwrap(),
        governor::Quota::per_hour(NonZeroU32::new(1).unwrap()),
    );
    let locked_hot_allow = LockedMap::new(unlimited, 1_000);
    let locked_hot_deny = LockedMap::new(Quota::per_hour(1).unwrap(), 1_000);
    const HOT: u64 = 42;
    let locked_allow = || locked_hot_allow.check(HOT);
    let locked_deny = || locked_hot_deny.check(HOT);
    let allow = || hot_allow.check_key(&HOT).is_ok();
    let deny = || hot_deny.check_key(&HOT).is_ok();
    let gov_allow = || gov_hot_allow.check_key(&HOT).is_ok();
    let gov_deny = || gov_hot_deny.check_key(&HOT).is_ok();
    assert!(allow() && gov_allow() && !deny() && !gov_deny());
    assert!(locked_allow() && !locked_deny());
    // What n busy cores do to each core's speed whatever it runs: one chain of dependent shifts,
    // xors and multiplies per thread, carried from call to call (so that calls cannot overlap)
    // and touching no shared memory; the multiplier is opaque, so that the compiler cannot fold
    // the chain. Its n threads / 1 thread above 1 says that n busy threads run slower than one:
    // a lower clock with every core busy, or threads sharing a core (a host that gives a vCPU
    // less than a core, or another process), which is then in every per-thread time of these
    // rows, the denials' above all; near 2 with 2 threads, no thread row of the run means much.
    thread_local!(static CHAIN: Cell<u64> = const { Cell::new(1) });
    let multiplier = black_box(support::MIX_MULTIPLIER);
    let arithmetic = || {
        CHAIN.with(|chain| {
            let x = support::mix(chain.get(), multiplier);
            chain.set(x);
            x != 0
        })
    };
    // The clock read alone: the largest part of a denial.
    let hot_clock = TscClock::new();
    let clock_read = || black_box(hot_clock.now()).as_nanos() != 0;
    // A denial without the time-stamp counter: the same table on a clock that never moves (a
    // load of a word nothing writes, on a line of its own), so that what is left of a denial's
    // slowdown with busy cores is either in the lookup's loads or in how they run beside `rdtsc`.
    let frozen = Box::new(CachePadded::new(ManualClock::new()));
    let hot_deny_frozen = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_hour(1).unwrap()))
        .capacity(1_000)
        .clock(&**frozen)
        .build()
        .unwrap();
    for k in 0..1_000u64 {
        let _ = hot_deny_frozen.check_key(&k);
    }
    let deny_frozen = || hot_deny_frozen.check_key(&HOT).is_ok();
    assert!(!deny_frozen());
    for threads in thread_counts() {
        paired(
            &format!("keyed hot key, {threads} threads / 1 thread: deny, tollgate (per check)"),
            || time_threads(threads, &deny),
            || time_threads(1, &deny),
        );
        paired(
            &format!("keyed hot key, {threads} threads / 1 thread: deny, frozen clock (per check)"),
            || time_threads(threads, &deny_frozen),
            || time_threads(1, &deny_frozen),
        );
        paired(
            &format!("keyed hot key, {threads} threads / 1 thread: clock read alone (per call)"),
            || time_threads(threads, &clock_read),
            || time_threads(1, &clock_read),
        );
        paired(
            &format!("keyed hot key, {threads} threads / 1 thread: arithmetic alone (per call)"),
            || time_threads(threads, &arithmetic),
            || time_threads(1, &arithmetic),
        );
        paired(
            &format!("keyed hot key, {threads} threads: deny / allow, tollgate"),
            || time_threads(threads, &deny),
            || time_threads(threads, &allow),
        );
        paired(
            &format!("keyed hot key, {threads} threads: allow, tollgate / governor"),
            || time_threads(threads, &allow),
            || time_threads(threads, &gov_allow),
        );
        paired(
            &format!("keyed hot key, {threads} threads: deny, tollgate / governor"),
            || time_threads(threads, &deny),
            || time_threads(threads, &gov_deny),
        );
        // An eighth of the calls, as for distinct keys: the map's checks queue for its lock.
        paired(
            &format!("keyed hot key, {threads} threads: allow, tollgate / Mutex<HashMap>"),
            || time_threads_calls(threads, CALLS / 8, &allow),
            || time_threads_calls(threads, CALLS / 8, &locked_allow),
        );
        paired(
            &format!("keyed hot key, {threads} threads: deny, tollgate / Mutex<HashMap>"),
            || time_threads_calls(threads, CALLS / 8, &deny),
            || time_threads_calls(threads, CALLS / 8, &locked_deny),
        );
    }
    memory_rows();
    if !any_row_run() {
        println!(
            "no row's name contains a filter: filters select rows by any part of the names a \
             full run prints, but a keyed table's rows (\"keyed 100k uniform: ...\") only by a \
             part of the table's name or by the row's name from its start"
        );
    }
}
