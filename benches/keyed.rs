//! Keyed limiters, side by side in one run: tollgate, governor's keyed limiter (DashMap, default
//! features) and the hardware floor.
//!
//! - `floor/dram`: one dependent random 16-byte read in a table as large as tollgate's for 1M
//!   keys (pointer chasing, so the latency is exposed): what one cache miss costs here.
//! - `floor/clock+miss+cas`: one clock read, one random 16-byte read and a compare-and-swap on it:
//!   the least a keyed check can do.
//! - `{tollgate,governor}/{1M,100k}/{uniform,zipf}`: `check_key` over pre-populated keys, in a
//!   pre-generated random order (uniform, or Zipf with exponent 1.0), allow path.
//! - `tollgate-batch/{1M,100k}/{uniform,zipf}`: the same checks through `check_keys`, 64 keys a
//!   call; time per check.
//! - `tollgate-reconfigured/{1M,100k}/{uniform,zipf}`: `check_key` on a limiter whose quota has
//!   been changed once (its algorithm read from a generation's slot, not a field), beside the
//!   never-changed `tollgate/...` row.
//! - `set_quota/{1M,100k}`: one change of quota, the walk that converts every key included.
//! - `threads/...`: distinct keys from 1 and from every core; time per check per thread.
//!
//! Compare ratios from one run: `python3 benches/report.py`.

mod support;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use portable_atomic::AtomicU128;
use support::wide::Wide;
use support::{on_threads, uniform, zipf, SplitMix};
use tollgate::{Clock, KeyedRateLimiter, Quota, TscClock};

/// A quota that every key's benchmark traffic stays under: each key is checked about once per
/// million checks.
fn quota() -> Quota {
    Quota::per_second(1_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap()
}

fn governor_quota() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::new(1_000).unwrap())
        .allow_burst(NonZeroU32::new(1_000_000).unwrap())
}

const SEQUENCE: usize = 1 << 22;

fn keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed");
    g.throughput(Throughput::Elements(1));

    // The floor: DRAM latency, and the least a keyed check can do, over a table the size of
    // tollgate's for 1M keys.
    let tollgate_1m = KeyedRateLimiter::<u64>::gcra(quota(), 1_000_000).unwrap();
    let slots = tollgate_1m.stats().slots.next_power_of_two();
    let table: Vec<AtomicU128> = {
        // A random cyclic permutation, for pointer chasing.
        let mut order: Vec<u64> = (0..slots as u64).collect();
        let mut rng = SplitMix(1);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut next = vec![0u64; slots];
        for w in order.windows(2) {
            next[w[0] as usize] = w[1];
        }
        next[*order.last().unwrap() as usize] = order[0];
        next.into_iter()
            .map(|n| AtomicU128::new(n as u128))
            .collect()
    };
    let wide = Wide::detect();
    let mut at = 0usize;
    g.bench_function("floor/dram", |b| {
        b.iter(|| {
            at = wide.load(&table[at]) as usize;
            black_box(at)
        })
    });
    let clock = TscClock::new();
    let random = uniform(slots as u64, SEQUENCE, 2);
    let mut i = 0usize;
    g.bench_function("floor/clock+miss+cas", |b| {
        b.iter(|| {
            let now = clock.now().as_nanos() as u128;
            let slot = &table[random[i] as usize];
            i = (i + 1) % SEQUENCE;
            let current = wide.load(slot);
            black_box(wide.compare_exchange(slot, current, current ^ now))
        })
    });

    for (label, keys) in [("1M", 1_000_000u64), ("100k", 100_000)] {
        let tollgate = KeyedRateLimiter::<u64>::gcra(quota(), keys as usize).unwrap();
        let governor = governor::RateLimiter::keyed(governor_quota());
        for k in 0..keys {
            // A table filled to its capacity may overflow on a few keys (fewer than 0.1%, see
            // the crate docs): they stay absent.
            let _ = tollgate.check_key(&k);
            governor.check_key(&k).unwrap();
        }
        let overflows = tollgate.stats().overflows;
        assert!(
            overflows * 1000 < keys,
            "{overflows} overflows filling {keys} keys"
        );
        // The same keys in a limiter whose quota changed once, to one their traffic stays under
        // as well: every key converted, nothing refused.
        let reconfigured = KeyedRateLimiter::<u64>::gcra(quota(), keys as usize).unwrap();
        for k in 0..keys {
            let _ = reconfigured.check_key(&k);
        }
        let other = Quota::per_second(2_000)
            .unwrap()
            .with_burst(1_000_000)
            .unwrap();
        reconfigured.set_quota(other).unwrap();
        let mut flip = 0u64;
        g.bench_function(BenchmarkId::new("set_quota", label), |b| {
            b.iter(|| {
                flip += 1;
                reconfigured
                    .set_quota(if flip % 2 == 0 { other } else { quota() })
                    .unwrap()
            })
        });
        reconfigured.set_quota(other).unwrap();
        for (dist, sequence) in [
            ("uniform", uniform(keys, SEQUENCE, 3)),
            ("zipf", zipf(keys, SEQUENCE, 4)),
        ] {
            let mut i = 0usize;
            g.bench_function(BenchmarkId::new(format!("tollgate/{label}"), dist), |b| {
                b.iter(|| {
                    let key = sequence[i];
                    i = (i + 1) % SEQUENCE;
                    black_box(tollgate.check_key(&key))
                })
            });
            // `check_keys` over consecutive runs of 64 keys of the same sequence; criterion's
            // iterations are checks, so the time is per check, as for the others.
            let mut i = 0usize;
            g.bench_function(
                BenchmarkId::new(format!("tollgate-batch/{label}"), dist),
                |b| {
                    b.iter_custom(|iters| {
                        let start = Instant::now();
                        let mut done = 0;
                        while done < iters {
                            let n = (iters - done).min(64) as usize;
                            if i + n > SEQUENCE {
                                i = 0;
                            }
                            for decision in tollgate.check_keys(&sequence[i..i + n]) {
                                black_box(decision).ok();
                            }
                            i += n;
                            done += n as u64;
                        }
                        start.elapsed()
                    })
                },
            );
            let mut i = 0usize;
            g.bench_function(
                BenchmarkId::new(format!("tollgate-reconfigured/{label}"), dist),
                |b| {
                    b.iter(|| {
                        let key = sequence[i];
                        i = (i + 1) % SEQUENCE;
                        black_box(reconfigured.check_key(&key))
                    })
                },
            );
            let mut i = 0usize;
            g.bench_function(BenchmarkId::new(format!("governor/{label}"), dist), |b| {
                b.iter(|| {
                    let key = sequence[i];
                    i = (i + 1) % SEQUENCE;
                    black_box(governor.check_key(&key))
                })
            });
        }
    }
    g.finish();
}

/// Distinct keys from as many threads as `sequences` (each its own key range and sequence);
/// returns the slowest thread's time for `iters` checks each.
fn distinct_keys(limiter: &KeyedRateLimiter<u64>, sequences: &[Vec<u64>], iters: u64) -> Duration {
    on_threads(sequences.len(), |t| {
        let sequence = &sequences[t];
        for i in 0..iters as usize {
            black_box(limiter.check_key(&sequence[i % sequence.len()]).is_ok());
        }
    })
}

fn threads(c: &mut Criterion) {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let keys = 1_000_000u64;
    let limiter = KeyedRateLimiter::<u64>::gcra(quota(), keys as usize).unwrap();
    for k in 0..keys {
        let _ = limiter.check_key(&k);
    }
    let mut g = c.benchmark_group("threads");
    for t in [1, cores] {
        // Thread j checks only keys with k % t == j: distinct keys, no shared state.
        let sequences: Vec<Vec<u64>> = (0..t as u64)
            .map(|j| {
                uniform(keys / t as u64, SEQUENCE / t, 10 + j)
                    .into_iter()
                    .map(|k| k * t as u64 + j)
                    .collect()
            })
            .collect();
        g.throughput(Throughput::Elements(t as u64));
        g.bench_function(format!("tollgate/1M/{t}t"), |b| {
            b.iter_custom(|iters| distinct_keys(&limiter, &sequences, iters))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = keyed, threads
}
criterion_main!(benches);
