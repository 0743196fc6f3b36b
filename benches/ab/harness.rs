//! The harness of `benches/ab.sh`: this working tree's keyed checks (`tollgate_head`) against
//! another commit's (`tollgate_base`), both in this one process, in alternating rounds, with
//! governor's beside them for scale. A change is then measured without the drift between runs
//! of a shared machine, which moves single-run ratios against governor by tens of percent.
//!
//! Rows, over 1k, 100k and 1M keys, each limiter holding every key: `check_key`, `check_keys`
//! (batches of 64) and `decide_key` over uniform keys; then the batches' other shapes, for a change
//! to the pipeline: `check_keys` in batches of 1 to 4 (its fixed cost per call), `decide_keys`
//! (batches of 64), and over Zipf(1.0) keys (hot keys in cache) `check_keys` (batches of 64) and
//! `check_key`. After each table size's rows, it prints how many keys each version's table lacks
//! (forgotten to make room, or overflowed). A filter argument selects rows by name, as in
//! `paired.rs`.

mod support;

use std::hint::black_box;
use std::num::NonZeroU32;

use support::rounds::{paired, rounds, selected, time_batches, time_keys, CALLS};
use support::{uniform, zipf};

/// The rows of each table size, after its label.
const ROWS: [&str; 12] = [
    "check_key: head / base",
    "check_keys: head / base",
    "decide_key: head / base",
    "check_key: head / governor",
    "check_key: base / governor",
    "check_keys (batches of 1): head / base",
    "check_keys (batches of 2): head / base",
    "check_keys (batches of 3): head / base",
    "check_keys (batches of 4): head / base",
    "decide_keys: head / base",
    "check_keys Zipf(1.0): head / base",
    "check_key Zipf(1.0): head / base",
];

/// Times `check_keys` of one version in batches of `batch`.
macro_rules! batches {
    ($limiter:expr, $seq:expr, $at:expr, $batch:expr) => {
        time_batches($seq, $at, $batch, |keys| {
            $limiter.check_keys(keys).for_each(|d| {
                black_box(d.is_ok());
            })
        })
    };
}

/// Times `decide_keys` (cost 1 each) of one version in batches of `batch`.
macro_rules! decide_batches {
    ($limiter:expr, $seq:expr, $at:expr, $batch:expr) => {
        time_batches($seq, $at, $batch, |keys| {
            $limiter
                .decide_keys(keys.iter().map(|k| (k, 1)))
                .for_each(|d| {
                    black_box(d.is_ok_and(|d| d.is_allowed()));
                })
        })
    };
}

/// Both versions hold the same quota, generous enough that every check is admitted.
macro_rules! limiter {
    ($krate:ident, $keys:expr) => {{
        let quota = $krate::Quota::per_second(1_000)
            .unwrap()
            .with_burst(1_000_000)
            .unwrap();
        let limiter = $krate::KeyedRateLimiter::<u64>::gcra(quota, $keys as usize).unwrap();
        for k in 0..$keys {
            // A table filled to capacity may overflow on a few keys (under 0.1%), not the same
            // ones in both (each seeds its hasher at random): those keys stay absent.
            let _ = limiter.check_key(&k);
        }
        limiter
    }};
}

fn main() {
    println!("ab rounds: {} x {CALLS} calls each", rounds());
    for (label, keys) in [("1k", 1_000u64), ("100k", 100_000), ("1M", 1_000_000)] {
        if !ROWS.iter().any(|row| selected(&format!("{label} {row}"))) {
            continue;
        }
        let head = limiter!(tollgate_head, keys);
        let base = limiter!(tollgate_base, keys);
        let governor = governor::RateLimiter::keyed(
            governor::Quota::per_second(NonZeroU32::new(1_000).unwrap())
                .allow_burst(NonZeroU32::new(1_000_000).unwrap()),
        );
        for k in 0..keys {
            governor.check_key(&k).unwrap();
        }
        let seq = uniform(keys, 1 << 22, 7);
        let (mut a, mut b) = (0, 1 << 21);
        paired(
            &format!("{label} {}", ROWS[0]),
            || time_keys(&seq, &mut a, |k| head.check_key(&k).is_ok()),
            || time_keys(&seq, &mut b, |k| base.check_key(&k).is_ok()),
        );
        paired(
            &format!("{label} {}", ROWS[1]),
            || batches!(head, &seq, &mut a, 64),
            || batches!(base, &seq, &mut b, 64),
        );
        paired(
            &format!("{label} {}", ROWS[2]),
            || {
                time_keys(&seq, &mut a, |k| {
                    head.decide_key(&k, 1).is_ok_and(|d| d.is_allowed())
                })
            },
            || {
                time_keys(&seq, &mut b, |k| {
                    base.decide_key(&k, 1).is_ok_and(|d| d.is_allowed())
                })
            },
        );
        paired(
            &format!("{label} {}", ROWS[3]),
            || time_keys(&seq, &mut a, |k| head.check_key(&k).is_ok()),
            || time_keys(&seq, &mut b, |k| governor.check_key(&k).is_ok()),
        );
        paired(
            &format!("{label} {}", ROWS[4]),
            || time_keys(&seq, &mut a, |k| base.check_key(&k).is_ok()),
            || time_keys(&seq, &mut b, |k| governor.check_key(&k).is_ok()),
        );
        for (row, batch) in [(5, 1), (6, 2), (7, 3), (8, 4)] {
            paired(
                &format!("{label} {}", ROWS[row]),
                || batches!(head, &seq, &mut a, batch),
                || batches!(base, &seq, &mut b, batch),
            );
        }
        paired(
            &format!("{label} {}", ROWS[9]),
            || decide_batches!(head, &seq, &mut a, 64),
            || decide_batches!(base, &seq, &mut b, 64),
        );
        if [10, 11]
            .iter()
            .any(|&row| selected(&format!("{label} {}", ROWS[row])))
        {
            let seq = zipf(keys, 1 << 22, 7);
            paired(
                &format!("{label} {}", ROWS[10]),
                || batches!(head, &seq, &mut a, 64),
                || batches!(base, &seq, &mut b, 64),
            );
            paired(
                &format!("{label} {}", ROWS[11]),
                || time_keys(&seq, &mut a, |k| head.check_key(&k).is_ok()),
                || time_keys(&seq, &mut b, |k| base.check_key(&k).is_ok()),
            );
        }
        // Each table was filled with every key; one may since have lost some, forgotten to make
        // room for a key that came back (or never held them, having overflowed). A check of an
        // absent key is an insert, so a change to where new keys go shows here first.
        println!(
            "({label}: keys absent after the rows: head {}, base {})",
            keys - head.stats().occupied as u64,
            keys - base.stats().occupied as u64
        );
    }
}
