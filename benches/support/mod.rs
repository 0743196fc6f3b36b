//! What the benchmarks share: reproducible key sequences, a multi-thread timer, the alternating
//! rounds of the paired comparisons (`rounds`), the keyed table's 128-bit instructions for the
//! floors (`wide`), and a counting allocator for the memory rows (`counting`).
#![allow(dead_code)] // each bench uses part of it

pub mod counting;
pub mod rounds;
pub mod wide;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// SplitMix64: small, fast and reproducible.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// `len` keys drawn uniformly from `0..keys`.
pub fn uniform(keys: u64, len: usize, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix(seed);
    (0..len).map(|_| rng.below(keys)).collect()
}

/// `len` keys drawn from `0..keys` with Zipf(1.0) popularity (the key of rank k has weight
/// 1/(k+1)), scattered so that popularity does not follow the key order.
pub fn zipf(keys: u64, len: usize, seed: u64) -> Vec<u64> {
    let mut cumulative = Vec::with_capacity(keys as usize);
    let mut total = 0.0;
    for k in 0..keys {
        total += 1.0 / (k + 1) as f64;
        cumulative.push(total);
    }
    let mut rng = SplitMix(seed);
    (0..len)
        .map(|_| {
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
            let rank = cumulative.partition_point(|&c| c < u) as u64;
            rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % keys
        })
        .collect()
}

/// Runs `work(thread)` on `threads` threads released together; returns the slowest thread's
/// time.
pub fn on_threads<F: Fn(usize) + Sync>(threads: usize, work: F) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    work(t);
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    })
}

/// Every thread of `threads` calls `check` `iters` times; returns the slowest thread's time.
pub fn contended<F: Fn() -> bool + Sync>(threads: usize, iters: u64, check: F) -> Duration {
    on_threads(threads, |_| {
        for _ in 0..iters {
            black_box(check());
        }
    })
}

/// The odd multiplier that the benches give [`mix`], through `black_box`.
pub const MIX_MULTIPLIER: u64 = 0x5851_F42D_4C95_7F2D;

/// Sixteen dependent shifts, xors and multiplies of `x`: work for one core that touches no
/// memory, to tell what busy cores do to a core's own speed. `multiplier` should come through
/// `black_box` ([`MIX_MULTIPLIER`]), so that the compiler cannot fold the chain.
pub fn mix(mut x: u64, multiplier: u64) -> u64 {
    for _ in 0..16 {
        x = (x ^ (x >> 29)).wrapping_mul(multiplier);
    }
    x
}
