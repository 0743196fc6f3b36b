//! Differential fuzzing of the keyed stores against one reference per key.
//!
//! Three regimes, chosen by the input:
//! - **few keys, any clock**: at most 8 distinct keys (a probe group holds 8, so no key ever
//!   needs another's slot), time steps forwards and backwards. Every decision of the keyed
//!   limiter must equal, field for field, that of a direct limiter per key; the keyed sliding log
//!   must equal a reference log per key.
//! - **many keys, a tiny table, time that only moves forwards**: slots are reused and keys
//!   overflow (policy `Allow`). Every recorded decision must equal the reference model's for its
//!   key; an overflowed request is admitted unrecorded and must not be recorded by anyone.
//! - **batches**: many keys, a tiny table (policy `Deny`), time forwards and backwards between
//!   batches. `check_keys` (or `decide_keys`, with costs) over each batch must give exactly the
//!   decisions, and leave exactly the statistics, of `check_key` (or `decide_key`) on each
//!   request in turn on a twin limiter.
#![no_main]

use std::collections::HashMap;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tollgate::reference::{Model, SlidingLog, VirtualScheduling};
use tollgate::{
    Clock, Gcra, KeyedRateLimiter, KeyedSlidingLog, ManualClock, Overflow, Quota, RateLimiter,
};

#[derive(Arbitrary, Debug)]
struct Input {
    batches: bool,
    many_keys: bool,
    limit: u8,
    burst: u8,
    period_ms: u16,
    seed: u64,
    ops: Vec<(u16, i16, u8)>,
}

fuzz_target!(|input: Input| {
    let limit = input.limit as u64 % 20 + 1;
    let Ok(quota) = Quota::new(
        limit,
        Duration::from_millis(input.period_ms as u64 % 5_000 + 1),
    )
    .and_then(|q| q.with_burst(input.burst as u64 % 30 + 1)) else {
        return;
    };
    let hasher = ahash::RandomState::with_seeds(input.seed, 1, 2, 3);
    let clock = ManualClock::new();
    let ops = &input.ops[..input.ops.len().min(400)];
    if input.batches {
        let build = || {
            KeyedRateLimiter::builder(Gcra::from(quota))
                .capacity(8)
                .overflow(Overflow::Deny)
                .clock(&clock)
                .hasher(hasher.clone())
                .build::<u16>()
                .unwrap()
        };
        let (batched, single) = (build(), build());
        let mut batch = Vec::new();
        for (i, &(key, step, end)) in ops.iter().enumerate() {
            // Costs from 0 (a peek) to one past the burst (an error), for `decide_keys`.
            batch.push((key % 64, (end >> 3) as u64 % (quota.burst() + 2)));
            // A batch ends where the input says so, and at the last operation.
            if end % 8 != 0 && i + 1 < ops.len() {
                continue;
            }
            if step % 2 == 0 {
                let got: Vec<_> = batched.check_keys(batch.iter().map(|(k, _)| k)).collect();
                let want: Vec<_> = batch.iter().map(|(k, _)| single.check_key(k)).collect();
                assert_eq!(got, want);
            } else {
                let requests = batch.iter().map(|(k, cost)| (k, *cost));
                let got: Vec<_> = batched.decide_keys(requests).collect();
                let want: Vec<_> = batch
                    .iter()
                    .map(|(k, c)| single.decide_key(k, *c))
                    .collect();
                assert_eq!(got, want);
            }
            assert_eq!(batched.stats(), single.stats());
            batch.clear();
            let now = clock.now().as_nanos() as i64 + step as i64 * 100_000;
            clock.set(Duration::from_nanos(now.max(0) as u64));
        }
        return;
    }
    if input.many_keys {
        let keyed = KeyedRateLimiter::builder(Gcra::from(quota))
            .capacity(8)
            .overflow(Overflow::Allow)
            .clock(&clock)
            .hasher(hasher)
            .build::<u16>()
            .unwrap();
        let mut models: HashMap<u16, VirtualScheduling> = HashMap::new();
        for &(key, step, cost) in ops {
            clock.advance(Duration::from_millis(step.unsigned_abs() as u64 % 200));
            let cost = cost as u64 % (quota.burst() + 2);
            let overflows = keyed.stats().overflows;
            let got = keyed.check_key_n(&(key % 64), cost).is_ok();
            if keyed.stats().overflows > overflows {
                assert!(got, "an overflow under Allow admits");
                continue;
            }
            let model = models
                .entry(key % 64)
                .or_insert_with(|| VirtualScheduling::new(&quota));
            assert_eq!(got, model.decide(clock.now(), cost).allowed);
        }
        return;
    }
    let keyed = KeyedRateLimiter::builder(Gcra::from(quota))
        .capacity(64)
        .clock(&clock)
        .hasher(hasher.clone())
        .build::<u16>()
        .unwrap();
    let logs = KeyedSlidingLog::builder(&quota)
        .capacity(64)
        .clock(&clock)
        .hasher(hasher)
        .build::<u16>()
        .unwrap();
    let mut direct: HashMap<u16, RateLimiter<Gcra, &ManualClock>> = HashMap::new();
    let mut references: HashMap<u16, SlidingLog> = HashMap::new();
    for &(key, step, cost) in ops {
        let key = key % 8;
        let now = clock.now().as_nanos() as i64 + step as i64 * 100_000;
        clock.set(Duration::from_nanos(now.max(0) as u64));
        let cost = cost as u64 % (limit.max(quota.burst()) + 2);
        let expected = direct
            .entry(key)
            .or_insert_with(|| RateLimiter::with_clock(Gcra::from(quota), &clock))
            .decide(cost);
        assert_eq!(keyed.decide_key(&key, cost), expected);
        let reference = references
            .entry(key)
            .or_insert_with(|| SlidingLog::new(&quota));
        let verdict = reference.decide(clock.now(), cost);
        match logs.decide_key(&key, cost) {
            Ok(d) => assert_eq!(
                (d.is_allowed(), d.remaining()),
                (verdict.allowed, verdict.remaining)
            ),
            Err(_) => assert!(cost > limit && !verdict.allowed),
        }
    }
});
