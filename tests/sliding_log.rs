//! The keyed exact sliding log against the reference model, and its bounded memory.

use std::collections::HashMap;
use std::sync::Barrier;
use std::time::Duration;

mod common;

use proptest::prelude::*;
use tollgate::reference::{Model, SlidingWindowLog};
use tollgate::{BuildError, Clock, KeyedSlidingLog, ManualClock, Nanos, Overflow, Quota};

/// The keyed log of one shard, as its documentation describes it, written the obvious way: the
/// logs in a `Vec` from the least to the most recently written, each a reference log with the
/// stamp of its newest entry.
struct FullLog {
    quota: Quota,
    capacity: usize,
    policy: Overflow,
    /// `(key, log, newest stamp)`.
    logs: Vec<(u8, SlidingWindowLog, u64)>,
    reuses: u64,
    evictions: u64,
    overflows: u64,
}

impl FullLog {
    /// How many logs an overflow under `EvictLeastConstrained` looks at.
    const SCAN: usize = 16;

    fn idle(&self, i: usize, now: u64) -> bool {
        self.logs[i].2 + self.quota.period().as_nanos() as u64 <= now
    }

    /// Whether the `i`th log could admit one more unit (at the time a request would be decided).
    fn under_limit(&self, i: usize, now: u64) -> bool {
        self.logs[i]
            .1
            .clone()
            .decide(Nanos::from_nanos(now), 0)
            .remaining
            > 0
    }

    /// `(allowed, remaining)`.
    fn decide(&mut self, key: u8, cost: u64, now: u64) -> (bool, u64) {
        let at = Nanos::from_nanos(now);
        if let Some(i) = self.logs.iter().position(|entry| entry.0 == key) {
            let verdict = self.logs[i].1.decide(at, cost);
            if verdict.allowed && cost > 0 {
                let stamp = now.max(self.logs[i].2);
                if stamp != self.logs[i].2 {
                    // Written at a new stamp: now the most recently written.
                    let mut entry = self.logs.remove(i);
                    entry.2 = stamp;
                    self.logs.push(entry);
                }
            }
            return (verdict.allowed, verdict.remaining);
        }
        let mut log = SlidingWindowLog::new(&self.quota);
        let verdict = log.decide(at, cost);
        if !verdict.allowed || cost == 0 {
            return (verdict.allowed, verdict.remaining);
        }
        if self.logs.len() == self.capacity {
            if self.idle(0, now) {
                self.logs.remove(0);
                self.reuses += 1;
            } else if self.policy == Overflow::EvictLeastConstrained {
                let looked = Self::SCAN.min(self.logs.len());
                match (0..looked).find(|&i| self.under_limit(i, now)) {
                    Some(i) => {
                        if self.idle(i, now) {
                            self.reuses += 1;
                        } else {
                            self.evictions += 1;
                        }
                        self.logs.remove(i);
                        // The limited logs passed over go to the back, in their order.
                        self.logs.rotate_left(i);
                    }
                    None => {
                        self.logs.rotate_left(looked);
                        self.overflows += 1;
                        return (false, 0);
                    }
                }
            } else {
                self.overflows += 1;
                return if self.policy == Overflow::Allow {
                    (verdict.allowed, verdict.remaining)
                } else {
                    (false, 0)
                };
            }
        }
        self.logs.push((key, log, now));
        (verdict.allowed, verdict.remaining)
    }
}

/// The cost that stands for a reset of the key in the property tests' ops, instead of a request.
const RESET: u64 = u64::MAX;
/// The cost that stands for a reset of every key (`KeyedSlidingLog::reset`).
const RESET_ALL: u64 = u64::MAX - 1;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With room for every key, the keyed log decides exactly as one reference log per key:
    /// verdicts and remaining, also when the clock runs backwards; retry and reset times are
    /// exact against the model. One op in 15 is a reset ([`RESET`]): a new reference log stands
    /// for the key from then on; one in 15 a reset of every key ([`RESET_ALL`]), after which
    /// every key has its whole limit and none holds a log.
    #[test]
    fn keyed_log_is_a_map_of_reference_logs(
        limit in 1u64..12,
        period_ms in 1u64..5_000,
        keys in 1u8..=12,
        ops in prop::collection::vec((0u8..12, -300i32..1_500, prop_oneof![13 => 0u64..13, 1 => Just(RESET), 1 => Just(RESET_ALL)]), 1..400),
    ) {
        // Few keys keep several entries of a log in its window (the clock moves 600 ms an op on
        // average), where a denial's retry time depends on how many of them must leave.
        let ops = ops.into_iter().map(|(key, step_ms, cost)| (key % keys, step_ms, cost));
        let quota = Quota::new(limit, Duration::from_millis(period_ms)).unwrap();
        let clock = ManualClock::new();
        let keyed = KeyedSlidingLog::<u8>::builder(&quota)
            .capacity(1_000)
            .clock(&clock)
            .build()
            .unwrap();
        let mut models: HashMap<u8, SlidingWindowLog> = HashMap::new();
        for (i, (key, step_ms, cost)) in ops.enumerate() {
            let now = clock.now().as_nanos() as i128 + step_ms as i128 * 1_000_000;
            clock.set(Duration::from_nanos(now.max(0) as u64));
            let now = clock.now();
            if cost == RESET {
                keyed.reset_key(&key);
                models.insert(key, SlidingWindowLog::new(&quota));
                prop_assert_eq!(keyed.peek_key(&key).remaining(), limit, "op {}: reset", i);
                continue;
            }
            if cost == RESET_ALL {
                keyed.reset();
                models.clear();
                for k in 0..keys {
                    prop_assert_eq!(keyed.peek_key(&k).remaining(), limit, "op {}: reset of all", i);
                }
                prop_assert_eq!(keyed.stats().occupied, 0, "op {}: reset of all", i);
                continue;
            }
            let model = models.entry(key).or_insert_with(|| SlidingWindowLog::new(&quota));
            let before = model.clone();
            let verdict = model.decide(now, cost);
            let decision = match keyed.decide_key(&key, cost) {
                Ok(d) => d,
                Err(err) => {
                    prop_assert!(cost > limit, "op {}: {:?}", i, err);
                    prop_assert!(!verdict.allowed);
                    continue;
                }
            };
            prop_assert_eq!((decision.is_allowed(), decision.remaining()), (verdict.allowed, verdict.remaining), "op {}", i);
            if !decision.is_allowed() {
                // Exact retry_after: the model admits the same request then, not a nanosecond
                // sooner.
                let r = decision.retry_after().as_nanos() as u64;
                let at = now.as_nanos() + r;
                prop_assert!(before.clone().decide(Nanos::from_nanos(at), cost).allowed, "op {}", i);
                prop_assert!(!before.clone().decide(Nanos::from_nanos(at - 1), cost).allowed, "op {}", i);
            }
            // Exact reset_after: the whole limit is back then, not before.
            let z = decision.reset_after().as_nanos() as u64;
            let full = model.clone().decide(Nanos::from_nanos(now.as_nanos() + z), 0);
            prop_assert_eq!(full.remaining, limit, "op {}", i);
            if z > 0 {
                let early = model.clone().decide(Nanos::from_nanos(now.as_nanos() + z - 1), 0);
                prop_assert!(early.remaining < limit, "op {}", i);
            }
        }
        let stats = keyed.stats();
        prop_assert_eq!((stats.overflows, stats.reuses, stats.evictions), (0, 0, 0));
    }

    /// A full shard under every overflow policy decides, reuses, evicts and overflows exactly as
    /// the documented policy written the obvious way ([`FullLog`]), with more keys than room,
    /// limits small enough that logs fill, and a clock that also goes backwards. One op in 6 is a
    /// reset ([`RESET`]): the key's log leaves the shard, the others keep their order; one in 60 a
    /// reset of every key ([`RESET_ALL`]): the shard is empty, and its counters keep counting.
    #[test]
    fn a_full_shard_follows_its_documented_policy(
        capacity in 1usize..24,
        limit in 1u64..4,
        policy in prop::sample::select(vec![Overflow::Deny, Overflow::Allow, Overflow::EvictLeastConstrained]),
        ops in prop::collection::vec((0u8..40, prop_oneof![49 => 0u64..4, 10 => Just(RESET), 1 => Just(RESET_ALL)], 0usize..6), 1..400),
    ) {
        let quota = Quota::per_minute(limit).unwrap();
        let clock = ManualClock::new();
        // Under 32 keys, one shard: the order is the whole log's.
        let keyed = KeyedSlidingLog::<u8>::builder(&quota)
            .capacity(capacity)
            .threads(1)
            .overflow(policy)
            .clock(&clock)
            .build()
            .unwrap();
        prop_assert_eq!(keyed.stats().slots, capacity);
        let mut model = FullLog {
            quota,
            capacity,
            policy,
            logs: Vec::new(),
            reuses: 0,
            evictions: 0,
            overflows: 0,
        };
        let steps_ms = [0i64, 1, 1_000, 15_000, 61_000, -20_000];
        for (i, &(key, cost, step)) in ops.iter().enumerate() {
            let now = (clock.now().as_nanos() as i64 + steps_ms[step] * 1_000_000).max(0);
            clock.set(Duration::from_nanos(now as u64));
            let now = now as u64;
            if cost == RESET {
                keyed.reset_key(&key);
                model.logs.retain(|entry| entry.0 != key);
            } else if cost == RESET_ALL {
                keyed.reset();
                model.logs.clear();
            } else {
                let cost = cost.min(limit);
                let decision = keyed.decide_key(&key, cost).unwrap();
                let expected = model.decide(key, cost, now);
                prop_assert_eq!((decision.is_allowed(), decision.remaining()), expected, "op {}", i);
            }
            let stats = keyed.stats();
            prop_assert_eq!(
                (stats.occupied, stats.reuses, stats.evictions, stats.overflows),
                (model.logs.len(), model.reuses, model.evictions, model.overflows),
                "op {}", i
            );
        }
    }
}

#[test]
fn capacity_holds_its_keys() {
    // n live keys with uniformly random hashes (seeded ahash over distinct integers), at frozen
    // time with a quota that keeps every key live, over as many shards as 1, 2 and 16 threads
    // get: fewer than 0.1% of insertions may overflow, as for a `KeyedRateLimiter`, though keys
    // spread over the shards unevenly. Each shard has room for its share `s` of n and
    // ⌈3√s⌉ + 2 more: 4 shards of 250 + 48 + 2; 32 of 32 + 17 + 2; 64 of 157 + 38 + 2; 8 of
    // 12 500 + 336 + 2; 64 of 1 563 + 119 + 2.
    for (n, threads, seed, slots) in [
        (1_000usize, 1usize, 1u64, 4 * 300),
        (1_000, 16, 2, 32 * 51),
        (10_000, 16, 3, 64 * 197),
        (100_000, 2, 4, 8 * 12_838),
        (100_000, 16, 5, 64 * 1_684),
    ] {
        let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap())
            .capacity(n)
            .threads(threads)
            .clock(ManualClock::new())
            .hasher(ahash::RandomState::with_seeds(seed, 2, 3, 4))
            .build()
            .unwrap();
        let admitted = (0..n as u64).filter(|k| log.check_key(k).is_ok()).count();
        let stats = log.stats();
        assert_eq!((stats.capacity, stats.slots), (n, slots));
        assert_eq!(admitted + stats.overflows as usize, n);
        assert_eq!(stats.occupied, admitted);
        assert!(
            (stats.overflows as usize) * 1_000 < n,
            "{} of {n} insertions overflowed over {threads} threads' shards",
            stats.overflows
        );
    }
}

#[test]
fn a_log_of_one_shard_holds_its_capacity_exactly() {
    // Under 32 keys a log has one shard, whatever the thread count, and no room beyond its
    // capacity (no spread to allow for); at 32 it has two shards of 16 keys and ⌈3√16⌉ + 2 = 14
    // more each.
    for (capacity, slots) in [(1, 1), (31, 31), (32, 2 * 30)] {
        let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(1).unwrap())
            .capacity(capacity)
            .threads(16)
            .build()
            .unwrap();
        assert_eq!(log.stats().slots, slots, "capacity {capacity}");
    }
}

#[test]
fn idle_logs_make_room_and_full_shards_overflow() {
    let clock = ManualClock::new();
    // Capacity 4: one shard. 2 per minute each.
    let log = KeyedSlidingLog::<u32>::builder(&Quota::per_minute(2).unwrap())
        .capacity(4)
        .overflow(Overflow::Deny)
        .clock(&clock)
        .build()
        .unwrap();
    assert_eq!(log.stats().slots, 4);
    for key in 0..4 {
        log.check_key(&key).unwrap();
        clock.advance(Duration::from_secs(10));
    }
    // At 40 s all four logs still count: a fifth key is denied until key 0's entry leaves the
    // window at 60 s.
    let denied = log.check_key(&4).unwrap_err();
    assert_eq!(denied.retry_after(), Duration::from_secs(20));
    assert!(denied.is_overflow());
    // Nothing remains until then, and then everything does: both times are the 20 s.
    let d = log.decide_key(&4, 1).unwrap();
    assert_eq!(
        (
            d.is_allowed(),
            d.remaining(),
            d.retry_after(),
            d.reset_after()
        ),
        (false, 0, Duration::from_secs(20), Duration::from_secs(20))
    );
    assert_eq!(log.stats().overflows, 2);
    // A peek of the new key needs no room.
    assert_eq!(log.peek_key(&4).remaining(), 2);
    // At 60 s key 0's log is idle: its room goes to key 4.
    clock.set(Duration::from_secs(60));
    log.check_key(&4).unwrap();
    let stats = log.stats();
    assert_eq!((stats.occupied, stats.reuses), (4, 1));
    // Key 0 comes back fresh (and, the shard being full of live logs again, is denied).
    assert_eq!(log.peek_key(&0).remaining(), 2);
    assert!(log.check_key(&0).is_err());
}

#[test]
fn eviction_spares_logs_at_their_limit() {
    let clock = ManualClock::new();
    let log = KeyedSlidingLog::<u32>::builder(&Quota::per_minute(2).unwrap())
        .capacity(2)
        .overflow(Overflow::EvictLeastConstrained)
        .clock(&clock)
        .build()
        .unwrap();
    log.check_key_n(&1, 2).unwrap(); // at its limit
    clock.advance(Duration::from_secs(1));
    log.check_key(&2).unwrap(); // 1 of 2
    clock.advance(Duration::from_secs(1));
    // Key 1 is the least recently admitted, but at its limit: it is spared. Key 2 could still
    // admit: it goes, and comes back fresh.
    log.check_key(&3).unwrap();
    assert_eq!(log.stats().evictions, 1);
    assert!(log.check_key(&1).is_err(), "key 1 kept its log");
    assert_eq!(log.peek_key(&2).remaining(), 2, "evicted: fresh");
    // Key 3 takes its second unit: both logs are at their limit, so a new key is denied.
    log.check_key(&3).unwrap();
    assert!(log.check_key(&4).is_err());
    let stats = log.stats();
    assert_eq!(
        (stats.evictions, stats.overflows, stats.occupied),
        (1, 1, 2)
    );
}

#[test]
fn eviction_looks_at_a_bounded_number_of_logs() {
    // Capacity 31: one shard. 2 per minute; the clock stands still, so no log goes idle.
    let clock = ManualClock::new();
    let log = KeyedSlidingLog::<u32>::builder(&Quota::per_minute(2).unwrap())
        .capacity(31)
        .threads(1)
        .overflow(Overflow::EvictLeastConstrained)
        .clock(&clock)
        .build()
        .unwrap();
    assert_eq!(log.stats().slots, 31);
    for key in 0..30 {
        log.check_key_n(&key, 2).unwrap(); // at its limit
    }
    // 1 of 2: the only log that may be evicted, written last.
    log.check_key(&30).unwrap();
    // The first new key looks at the 16 oldest logs, all at their limit, and is denied; they
    // move to the back of the line.
    assert!(log.check_key(&100).is_err());
    assert_eq!((log.stats().overflows, log.stats().evictions), (1, 0));
    // The second looks at the next 16: logs 16 to 29, then 30, which goes.
    log.check_key(&101).unwrap();
    assert_eq!((log.stats().overflows, log.stats().evictions), (1, 1));
    assert_eq!(log.peek_key(&30).remaining(), 2, "evicted: fresh");
    // Key 101 (1 of 2) is now the only candidate, behind the 30 limited logs: again one denial,
    // then an eviction.
    assert!(log.check_key(&102).is_err());
    log.check_key(&103).unwrap();
    assert_eq!(log.peek_key(&101).remaining(), 2, "evicted: fresh");
    let stats = log.stats();
    assert_eq!(
        (
            stats.overflows,
            stats.evictions,
            stats.reuses,
            stats.occupied
        ),
        (2, 2, 0, 31)
    );
    // No log at its limit lost its state on the way.
    for key in 0..30 {
        assert!(log.check_key(&key).is_err(), "key {key}");
    }
}

#[test]
fn memory_stays_within_its_documented_bound() {
    // Churn through many more keys than the log holds, most admitted up to their limit at
    // distinct times (one entry per unit, the most room a log can take), with logs going idle
    // and being evicted: the map's tombstones, the write order's moves and the logs' growth all
    // run. The shard counts follow from the capacity and threads (about four per thread, at
    // least 16 keys each).
    for (capacity, threads, shards, limit) in [(3, 1, 1, 2), (40, 1, 2, 100), (1_000, 2, 8, 5)] {
        let clock = ManualClock::new();
        let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(limit).unwrap())
            .capacity(capacity)
            .threads(threads)
            .overflow(Overflow::EvictLeastConstrained)
            .clock(&clock)
            .hasher(ahash::RandomState::with_seeds(1, 2, 3, 4))
            .build()
            .unwrap();
        let slots = log.stats().slots;
        let bound = slots * (300 + 16 * limit as usize) + shards * 512;
        // As built, the maps: 75 to 150 bytes per key of capacity on 64-bit targets (a bucket
        // of 65 bytes, 8/7 to 16/7 buckets per key), plus the shards' fixed share.
        let built = log.memory();
        if slots / shards >= 8 && cfg!(target_pointer_width = "64") {
            assert!(
                (slots * 74..slots * 150 + shards * 512).contains(&built),
                "capacity {capacity}: {built} bytes as built"
            );
        }
        let (mut most, mut given_room) = (built, 0);
        for key in 0..30 * capacity as u64 {
            // Every third key stops one short of its limit: those may be evicted.
            let mut admitted = false;
            for _ in 0..limit - u64::from(key % 3 == 0) {
                admitted |= log.check_key(&key).is_ok();
                clock.advance(Duration::from_micros(1));
            }
            // A key's first admission is the one that found it room.
            given_room += u64::from(admitted);
            // Two thirds of an hour per table's worth of keys: some logs go idle before their
            // room is wanted (reuses), others are evicted, and the rest make new keys wait.
            clock.advance(Duration::from_secs(2_400) / capacity as u32);
            most = most.max(log.memory());
        }
        let stats = log.stats();
        // Every key given room is still held, or gave its room to a later key; and both ways
        // of giving it ran.
        assert_eq!(
            stats.occupied as u64 + stats.reuses + stats.evictions,
            given_room,
            "{stats:?}"
        );
        assert!(stats.reuses > 0 && stats.evictions > 0, "{stats:?}");
        assert!(
            most <= bound,
            "capacity {capacity}, limit {limit}: {most} bytes, bound {bound}"
        );
    }
}

#[test]
fn any_thread_count_builds_a_working_log() {
    // The shard count is about four per thread: a count near usize::MAX must saturate, not
    // overflow, and 0 means one thread.
    for threads in [0, 1, 3, usize::MAX / 4, usize::MAX] {
        let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(2).unwrap())
            .capacity(100)
            .threads(threads)
            .build()
            .unwrap();
        assert!(log.check_key(&7).is_ok());
        assert!(log.check_key(&7).is_ok());
        assert!(log.check_key(&7).is_err(), "{threads} threads");
    }
}

#[test]
fn the_getters_and_debug_report_what_was_built() {
    let clock = ManualClock::starting_at(Duration::from_secs(5));
    let log = KeyedSlidingLog::<str>::builder(&Quota::new(7, Duration::from_secs(900)).unwrap())
        .overflow(Overflow::EvictLeastConstrained)
        .clock(&clock)
        .build()
        .unwrap();
    assert_eq!(log.algorithm().limit(), 7);
    assert_eq!(log.algorithm().period(), Duration::from_secs(900));
    assert_eq!(log.overflow(), Overflow::EvictLeastConstrained);
    assert_eq!(log.stats().capacity, 10_000); // the documented default
    log.check_key("a").unwrap();
    assert_eq!(
        format!("{log:?}"),
        format!(
            "KeyedSlidingLog {{ algorithm: {:?}, overflow: EvictLeastConstrained, stats: {:?}, .. }}",
            log.algorithm(),
            log.stats()
        )
    );
    assert_eq!(log.stats().occupied, 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(log.clock().now(), Nanos::from_nanos(6_000_000_000));
}

/// A denied request waits until as many of the oldest units have left as it needs: here the
/// two oldest of three, one per second, in a window of 10 s.
#[test]
fn a_denial_waits_for_as_many_old_entries_as_the_cost_needs() {
    let clock = ManualClock::new();
    let log = KeyedSlidingLog::<u64>::builder(&Quota::new(3, Duration::from_secs(10)).unwrap())
        .clock(&clock)
        .build()
        .unwrap();
    for _ in 0..3 {
        log.check_key(&1).unwrap();
        clock.advance(Duration::from_secs(1));
    }
    // At 3 s: a cost of 1 fits once the stamp of 0 s has left, at 10 s; a cost of 2 once those
    // of 0 s and 1 s have, at 11 s; a cost of 3 once all three have, at 12 s.
    for (cost, retry) in [(1, 7), (2, 8), (3, 9)] {
        let decision = log.decide_key(&1, cost).unwrap();
        assert!(!decision.is_allowed());
        assert_eq!(
            decision.retry_after(),
            Duration::from_secs(retry),
            "cost {cost}"
        );
        assert_eq!(decision.reset_after(), Duration::from_secs(9));
    }
    clock.advance(Duration::from_secs(8) - Duration::from_nanos(1));
    assert!(!log.decide_key(&1, 2).unwrap().is_allowed());
    clock.advance(Duration::from_nanos(1));
    assert_eq!(log.decide_key(&1, 2).unwrap().remaining(), 0);
}

/// A capacity that cannot be allocated is an error that says how many bytes its shards' maps
/// would take, never a panic or an abort.
#[test]
fn capacity_errors_say_what_the_maps_would_take() {
    let quota = Quota::per_hour(1).unwrap();
    let build = |capacity| {
        KeyedSlidingLog::<u64>::builder(&quota)
            .capacity(capacity)
            .threads(1)
            .build()
    };
    assert_eq!(build(0).unwrap_err(), BuildError::ZeroCapacity);
    // One thread: four shards, each a map for a quarter of the keys (2^62 on 64-bit targets,
    // 2^30 on 32-bit ones) with 2^63 (2^31) buckets, the fewest that hold them at 7/8 full, of
    // 65 (49) bytes each, and 16 control bytes more.
    let bytes = if cfg!(target_pointer_width = "64") {
        4 * ((1u128 << 63) * 65 + 16)
    } else {
        4 * ((1u128 << 31) * 49 + 16)
    };
    assert_eq!(
        build(usize::MAX).unwrap_err(),
        BuildError::CapacityTooLarge {
            capacity: usize::MAX,
            bytes
        }
    );
}

#[test]
fn memory_stays_bounded_under_a_key_flood() {
    // 5 per hour, a new key every 50 ms: logs go idle an hour (72 000 keys) after they are
    // written, so the table fills within its first minutes, denies new keys until the first
    // logs go idle, then turns over by reusing idle logs. Deterministic: a manual clock and a
    // seeded hasher.
    let clock = ManualClock::new();
    let limit = 5;
    let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(limit).unwrap())
        .capacity(1_000)
        .threads(2) // 8 shards of 125 keys and room for 36 more each (1 288), on any machine
        .overflow(Overflow::Deny)
        .clock(&clock)
        .hasher(ahash::RandomState::with_seeds(5, 6, 7, 8))
        .build()
        .unwrap();
    let (mut first_hour, mut later) = (0, 0);
    for key in 0..300_000u64 {
        let _ = log.check_key_n(&key, 1 + key % limit);
        clock.advance(Duration::from_millis(50));
        if key % 500 == 0 {
            let memory = log.memory();
            if key < 72_000 {
                first_hour = first_hour.max(memory);
            } else {
                later = later.max(memory);
            }
            let stats = log.stats();
            assert!(stats.occupied <= stats.slots);
        }
    }
    // Every log goes idle exactly an hour after it was written and its room goes to the next
    // key of its shard: the 1 288 logs written while the table filled (in its first two
    // minutes) are replaced at 1 h, their successors at 2 h, 3 h and 4 h; the run lasts
    // 300 000 × 50 ms = 4.17 h, so exactly 4 × 1 288 reuses, and every other key found no room.
    let stats = log.stats();
    assert_eq!(
        (stats.slots, stats.occupied, stats.reuses),
        (1_288, 1_288, 4 * 1_288)
    );
    assert_eq!(stats.overflows, 300_000 - 5 * 1_288);
    // Turning the table over four times allocated no more than filling it did: the maps never
    // grow (the tombstones of dropped logs are cleared by copying a shard's logs into a map of
    // its size), and each new log has the room of the one it replaced.
    assert!(
        later <= first_hour,
        "{later} bytes later, {first_hour} in the first hour"
    );
}

#[test]
fn threads_get_exact_counts() {
    let clock = ManualClock::new();
    let log = KeyedSlidingLog::<u32>::builder(&Quota::per_hour(9).unwrap())
        .capacity(100)
        .clock(&clock)
        .build()
        .unwrap();
    let barrier = Barrier::new(8);
    let admitted: u32 = std::thread::scope(|s| {
        (0..8)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    (0..50u32)
                        .map(|i| log.check_key(&(i % 10)).is_ok() as u32)
                        .sum::<u32>()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum()
    });
    // 10 keys, 9 each.
    assert_eq!(admitted, 90);
}

/// A reset of every key racing requests from four threads, at frozen time, over and over: every
/// key's log is full before each round, so a request is admitted only after its key's shard is
/// cleared, and each key admits exactly its limit once more per round. (It races: on two cores,
/// about half of the admissions come while a reset is still clearing shards.)
#[test]
fn a_reset_of_every_key_racing_requests_gives_each_its_limit_once() {
    const THREADS: u64 = 4;
    // Per thread; under Miri, which interprets every instruction, a few.
    const KEYS: u64 = if cfg!(miri) { 8 } else { 5_000 };
    const LIMIT: u64 = 2;
    const ROUNDS: usize = if cfg!(miri) { 2 } else { 10 };
    let clock = ManualClock::new();
    let log = KeyedSlidingLog::<u64>::builder(&Quota::per_hour(LIMIT).unwrap())
        // Room to spare (twice the keys), where `capacity_holds_its_keys` allows 0.1% of
        // insertions to overflow: a shard fills only if it draws over twice its share of the
        // keys, and the odds of that over the limiter's random seed are at most about 1 in 10^16
        // (under Miri, 32 keys over 4 shards with room for 30 each; here thousands per shard,
        // with room for twice as many).
        .capacity((2 * THREADS * KEYS) as usize)
        .clock(&clock)
        .build()
        .unwrap();
    for key in 0..THREADS * KEYS {
        log.check_key_n(&key, LIMIT).unwrap();
    }
    common::reset_of_every_key_races_requests(
        THREADS,
        KEYS,
        LIMIT,
        ROUNDS,
        |key| log.check_key(&key).is_ok(),
        || log.reset(),
    );
    let stats = log.stats();
    assert_eq!(
        (
            stats.occupied,
            stats.reuses,
            stats.evictions,
            stats.overflows
        ),
        ((THREADS * KEYS) as usize, 0, 0, 0)
    );
}
