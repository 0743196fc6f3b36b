//! Differential fuzzing of the keyed stores against one reference per key, for each packed
//! algorithm (GCRA, the sliding-window counter, the fixed window), chosen by the input.
//!
//! Five regimes, also chosen by the input:
//! - **few keys, any clock**: at most 8 distinct keys (a probe group holds 8, so no key ever
//!   needs another's slot), time steps forwards and backwards. Every decision of the keyed
//!   limiter must equal, field for field, that of a direct limiter per key; the keyed sliding log
//!   must equal a reference log per key, and so must a peek of each request's cost before it
//!   is decided. A cost byte of 255 resets the key instead, in both
//!   limiters: from then on it must decide as a new key, against a new reference; 254 resets
//!   every key, in both: from then on every key decides as a new one.
//! - **many keys, a tiny table, time that only moves forwards**, under the overflow policy the
//!   input picks: slots are reused, keys overflow, and (under eviction) entries are evicted.
//!   `tollgate::reference::KeyedDifferential` checks every request against one direct limiter
//!   per key: every recorded decision field for field; an overflow concerns a key that was
//!   absent and is recorded nowhere; every other key keeps its state, except that each eviction
//!   changes exactly one key, one that was not being limited, back to fresh. A cost byte of 255
//!   resets the key instead: it must peek as fresh after it, and no other key or counter move;
//!   254 resets every key: each must peek as fresh after it, and no counter move (also in the
//!   tiers regime). A negative time step first asks the table to prefetch another key
//!   (`prefetch_key`, a hint): no counter may move, and the next step finds every key as it
//!   was.
//! - **tiers** (GCRA): as many keys, a third of them under the table's own quota (the input's)
//!   and a third under each of two more quotas from the input, decided with `decide_key_with`:
//!   the first declared as a tier of the table, the second not; `KeyedDifferential` checks each
//!   key against a limiter of its own quota, evictions included (never a key that its own quota
//!   is limiting).
//! - **batches**: many keys, a tiny table under the overflow policy the input picks, time
//!   forwards and backwards between batches. `check_keys` (or `decide_keys`, with costs) over
//!   each batch must give exactly the decisions, and leave exactly the statistics, of
//!   `check_key` (or `decide_key`) on each request in turn on a twin limiter.
//! - **tiered batches** (GCRA): as batches, with the keys in three tiers as in the tiers regime:
//!   `decide_keys_with` against `decide_key_with` on each request in turn.
#![no_main]

use std::collections::HashMap;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tollgate::reference::{KeyedDifferential, Model, SlidingWindowLog};
use tollgate::{
    Algorithm, Clock, FixedWindow, Gcra, KeyedRateLimiter, KeyedSlidingLog, ManualClock, Overflow,
    Quota, RateLimiter, SlidingWindow,
};

#[derive(Arbitrary, Debug)]
struct Input {
    algorithm: Kind,
    regime: Regime,
    limit: u8,
    burst: u8,
    period_ms: u16,
    seed: u64,
    ops: Vec<(u16, i16, u8)>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Kind {
    Gcra,
    SlidingWindow,
    FixedWindow,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Regime {
    FewKeys,
    ManyKeys(Policy),
    Batches(Policy),
    /// GCRA only (the other algorithms take the `ManyKeys` regime): two more quotas, tiers'.
    Tiers(Policy, TierQuota, TierQuota),
    /// GCRA only (the other algorithms take the `Batches` regime): as `Tiers`, in batches.
    TieredBatches(Policy, TierQuota, TierQuota),
}

/// A tier's quota: limit, period in ms, burst, each reduced as the input's own are.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct TierQuota(u8, u16, u8);

/// [`Overflow`], which has no `Arbitrary` implementation.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Policy {
    Deny,
    Allow,
    Evict,
}

impl From<Policy> for Overflow {
    fn from(policy: Policy) -> Overflow {
        match policy {
            Policy::Deny => Overflow::Deny,
            Policy::Allow => Overflow::Allow,
            Policy::Evict => Overflow::EvictLeastConstrained,
        }
    }
}

fuzz_target!(|input: Input| {
    let Some(quota) = quota(input.limit, input.period_ms, input.burst) else {
        return;
    };
    let ops = &input.ops[..input.ops.len().min(400)];
    let hasher = ahash::RandomState::with_seeds(input.seed, 1, 2, 3);
    let regime = input.regime;
    // Limits of at most 20 fit every window's layout.
    match input.algorithm {
        Kind::Gcra => match regime {
            Regime::Tiers(policy, first, second) => {
                tiers(quota, [first, second], policy.into(), hasher, ops)
            }
            Regime::TieredBatches(policy, first, second) => {
                tiered_batches(quota, [first, second], policy.into(), hasher, ops)
            }
            _ => run(Gcra::from(quota), &quota, regime, hasher, ops),
        },
        Kind::SlidingWindow => {
            let algorithm = SlidingWindow::new(&quota).unwrap();
            run(algorithm, &quota, regime, hasher, ops)
        }
        Kind::FixedWindow => run(
            FixedWindow::new(&quota).unwrap(),
            &quota,
            regime,
            hasher,
            ops,
        ),
    }
});

/// The quota that an input's bytes stand for: a limit of 1 to 20, a period of 1 ms to 5 s, a
/// burst of 1 to 30.
fn quota(limit: u8, period_ms: u16, burst: u8) -> Option<Quota> {
    let period = Duration::from_millis(period_ms as u64 % 5_000 + 1);
    let quota = Quota::new(limit as u64 % 20 + 1, period).ok()?;
    quota.with_burst(burst as u64 % 30 + 1).ok()
}

/// The cost byte that stands for a reset of the key instead of a request.
const RESET: u8 = u8::MAX;
/// The cost byte that stands for a reset of every key (in every regime but the batches).
const RESET_ALL: u8 = u8::MAX - 1;

fn run<A: Algorithm + Clone>(
    algorithm: A,
    quota: &Quota,
    regime: Regime,
    hasher: ahash::RandomState,
    ops: &[(u16, i16, u8)],
) {
    match regime {
        Regime::FewKeys => few_keys(algorithm, quota, hasher, ops),
        Regime::ManyKeys(policy) => many_keys(algorithm, policy.into(), hasher, ops),
        Regime::Batches(policy) => batches(algorithm, policy.into(), hasher, ops),
        // Only a GCRA table takes tiers: `tiers` and `tiered_batches` are called from the GCRA
        // arm of the target.
        Regime::Tiers(policy, ..) => many_keys(algorithm, policy.into(), hasher, ops),
        Regime::TieredBatches(policy, ..) => batches(algorithm, policy.into(), hasher, ops),
    }
}

/// Tiers in one GCRA table under the input's overflow policy: keys are asked under the table's
/// own quota (with `decide_key`) or under one of two tiers' (with `decide_key_with`), a third of
/// them each. [`KeyedDifferential`] checks every request as in [`many_keys`], each key against a
/// limiter of its own quota.
fn tiers(
    quota: Quota,
    tiers: [TierQuota; 2],
    overflow: Overflow,
    hasher: ahash::RandomState,
    ops: &[(u16, i16, u8)],
) {
    let Some(tiers) = tier_quotas(tiers) else {
        return;
    };
    let clock = ManualClock::new();
    let table = tiered_table(quota, tiers[0], overflow, &clock, hasher);
    let mut diff = KeyedDifferential::new(table);
    for &(key, step, cost) in ops {
        // Mostly under 16 ms apart, so that many keys are live at once and the groups fill with
        // keys their quotas are limiting; one step in 64 a pause of 2 s that idles most of them.
        let ms = if step % 64 == 63 {
            2_000
        } else {
            step.unsigned_abs() as u64 % 16
        };
        clock.advance(Duration::from_millis(ms));
        let key = key % 64;
        let checked = match (cost, key % 3) {
            (RESET, _) => diff.reset(&key),
            (RESET_ALL, _) => diff.reset_all(),
            (_, 2) => diff.step(&key, cost as u64 % (quota.burst() + 2)).map(drop),
            (_, tier) => {
                let tier = &tiers[tier as usize];
                diff.step_with(&key, tier, cost as u64 % (tier.burst() + 2))
                    .map(drop)
            }
        };
        if let Err(mismatch) = checked {
            panic!("{mismatch}");
        }
    }
}

/// The tiers' quotas that the input's bytes stand for, as [`quota`] reads them.
fn tier_quotas(tiers: [TierQuota; 2]) -> Option<[Quota; 2]> {
    let [Some(first), Some(second)] =
        tiers.map(|TierQuota(limit, period_ms, burst)| quota(limit, period_ms, burst))
    else {
        return None;
    };
    Some([first, second])
}

/// A GCRA table of 8 keys for `quota` with one declared tier.
fn tiered_table(
    quota: Quota,
    tier: Quota,
    overflow: Overflow,
    clock: &ManualClock,
    hasher: ahash::RandomState,
) -> KeyedRateLimiter<u16, Gcra, &ManualClock, ahash::RandomState> {
    KeyedRateLimiter::<u16>::builder(Gcra::from(quota))
        .tier(tier)
        .capacity(8)
        .overflow(overflow)
        .clock(clock)
        .hasher(hasher)
        .build()
        .unwrap()
}

/// At most 8 keys, time both ways: the table against a direct limiter per key (field for field,
/// peeks too), and the keyed sliding log against a reference log per key.
fn few_keys<A: Algorithm + Clone>(
    algorithm: A,
    quota: &Quota,
    hasher: ahash::RandomState,
    ops: &[(u16, i16, u8)],
) {
    let clock = ManualClock::new();
    let keyed = table(algorithm, 64, Overflow::default(), &clock, hasher.clone());
    let logs = KeyedSlidingLog::<u16>::builder(quota)
        .capacity(64)
        .clock(&clock)
        .hasher(hasher)
        .build()
        .unwrap();
    let mut direct: HashMap<u16, RateLimiter<A, &ManualClock>> = HashMap::new();
    let mut references: HashMap<u16, SlidingWindowLog> = HashMap::new();
    let limit = quota.limit();
    for &(key, step, cost) in ops {
        let key = key % 8;
        let now = clock.now().as_nanos() as i64 + step as i64 * 100_000;
        clock.set(Duration::from_nanos(now.max(0) as u64));
        if cost == RESET {
            // Both forget the key: from here on it decides as a new one.
            keyed.reset_key(&key);
            logs.reset_key(&key);
            direct.insert(key, RateLimiter::with_clock(algorithm, &clock));
            references.insert(key, SlidingWindowLog::new(quota));
            assert_eq!(keyed.peek_key(&key), direct[&key].peek());
            continue;
        }
        if cost == RESET_ALL {
            keyed.reset();
            logs.reset();
            direct.clear();
            references.clear();
            let fresh = RateLimiter::with_clock(algorithm, &clock).peek();
            for key in 0..8 {
                assert_eq!(keyed.peek_key(&key), fresh);
                assert_eq!(logs.peek_key(&key).remaining(), limit);
            }
            assert_eq!(logs.stats().occupied, 0);
            continue;
        }
        let cost = cost as u64 % (limit.max(quota.burst()) + 2);
        let own = direct
            .entry(key)
            .or_insert_with(|| RateLimiter::with_clock(algorithm, &clock));
        // A peek of the request's cost first: the same as the key's own limiter's, and nothing
        // written (the decision after it is still the limiter's).
        assert_eq!(keyed.peek_key_n(&key, cost), own.peek_n(cost));
        let expected = own.decide(cost);
        assert_eq!(keyed.decide_key(&key, cost), expected);
        assert_eq!(keyed.peek_key(&key), direct[&key].peek());
        let reference = references
            .entry(key)
            .or_insert_with(|| SlidingWindowLog::new(quota));
        let verdict = reference.decide(clock.now(), cost);
        match logs.decide_key(&key, cost) {
            Ok(d) => assert_eq!(
                (d.is_allowed(), d.remaining()),
                (verdict.allowed, verdict.remaining)
            ),
            Err(_) => assert!(cost > limit && !verdict.allowed),
        }
    }
    let stats = keyed.stats();
    assert_eq!((stats.reuses, stats.evictions, stats.overflows), (0, 0, 0));
}

/// [`KeyedDifferential`] checks every request: each recorded decision equals its key's own
/// limiter's, field for field; overflows are unrecorded and decided as the policy says; no other
/// key changes except by an eviction, one per eviction and never a key being limited.
fn many_keys<A: Algorithm + Clone>(
    algorithm: A,
    overflow: Overflow,
    hasher: ahash::RandomState,
    ops: &[(u16, i16, u8)],
) {
    let clock = ManualClock::new();
    let capacity = algorithm.capacity();
    let mut diff = KeyedDifferential::new(table(algorithm, 8, overflow, &clock, hasher));
    for &(key, step, cost) in ops {
        clock.advance(Duration::from_millis(step.unsigned_abs() as u64 % 200));
        if step < 0 {
            // A hint that must change nothing: no counter moves here, and the step after it
            // checks every key's state.
            let before = diff.limiter().stats();
            diff.limiter().prefetch_key(&(key.rotate_left(8) % 64));
            assert_eq!(diff.limiter().stats(), before);
        }
        let checked = match cost {
            RESET => diff.reset(&(key % 64)),
            RESET_ALL => diff.reset_all(),
            _ => diff
                .step(&(key % 64), cost as u64 % (capacity + 2))
                .map(drop),
        };
        if let Err(mismatch) = checked {
            panic!("{mismatch}");
        }
    }
}

/// `check_keys` and `decide_keys` against the same requests decided one at a time on a twin
/// table, decision for decision and counter for counter.
fn batches<A: Algorithm + Clone>(
    algorithm: A,
    overflow: Overflow,
    hasher: ahash::RandomState,
    ops: &[(u16, i16, u8)],
) {
    let clock = ManualClock::new();
    let build = || table(algorithm, 8, overflow, &clock, hasher.clone());
    let (batched, single) = (build(), build());
    let capacity = algorithm.capacity();
    let mut batch = Vec::new();
    for (i, &(key, step, end)) in ops.iter().enumerate() {
        // Costs from 0 (a peek) to one past the capacity (an error), for `decide_keys`.
        batch.push((key % 64, (end >> 3) as u64 % (capacity + 2)));
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
}

/// `decide_keys_with` against the same requests decided one at a time with `decide_key_with` on
/// a twin table, decision for decision and counter for counter: a GCRA table of the input's
/// quota, its keys in three tiers as in [`tiers`] (the table's own quota and two more).
fn tiered_batches(
    quota: Quota,
    tiers: [TierQuota; 2],
    overflow: Overflow,
    hasher: ahash::RandomState,
    ops: &[(u16, i16, u8)],
) {
    let Some([first, second]) = tier_quotas(tiers) else {
        return;
    };
    let tiers = [first, second, quota];
    let clock = ManualClock::new();
    let build = || tiered_table(quota, first, overflow, &clock, hasher.clone());
    let (batched, single) = (build(), build());
    let mut batch = Vec::new();
    for (i, &(key, step, end)) in ops.iter().enumerate() {
        let key = key % 64;
        let tier = &tiers[key as usize % 3];
        // Costs from 0 (a peek) to one past the tier's capacity (an error).
        batch.push((key, tier, (end >> 3) as u64 % (tier.burst() + 2)));
        // A batch ends where the input says so, and at the last operation.
        if end % 8 != 0 && i + 1 < ops.len() {
            continue;
        }
        let requests = batch.iter().map(|(k, tier, cost)| (k, *tier, *cost));
        let got: Vec<_> = batched.decide_keys_with(requests).collect();
        let want: Vec<_> = batch
            .iter()
            .map(|(k, tier, cost)| single.decide_key_with(k, tier, *cost))
            .collect();
        assert_eq!(got, want);
        assert_eq!(batched.stats(), single.stats());
        batch.clear();
        // Mostly under 16 ms apart (forwards or backwards), and one step in 64 a pause of 2 s,
        // as in [`tiers`].
        let ms = if step % 64 == 63 {
            2_000
        } else {
            step as i64 % 16
        };
        let now = clock.now().as_nanos() as i64 + ms * 1_000_000;
        clock.set(Duration::from_nanos(now.max(0) as u64));
    }
}

/// A keyed limiter of `algorithm` for `capacity` `u16` keys on the shared clock.
fn table<A: Algorithm>(
    algorithm: A,
    capacity: usize,
    overflow: Overflow,
    clock: &ManualClock,
    hasher: ahash::RandomState,
) -> KeyedRateLimiter<u16, A, &ManualClock, ahash::RandomState> {
    KeyedRateLimiter::<u16>::builder(algorithm)
        .capacity(capacity)
        .overflow(overflow)
        .clock(clock)
        .hasher(hasher)
        .build()
        .unwrap()
}
