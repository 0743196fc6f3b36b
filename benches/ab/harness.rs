//! The harness of `benches/ab.sh`: this working tree's keyed checks (`tollgate_head`) against
//! another commit's (`tollgate_base`), both in this one process, in alternating rounds, with
//! governor's beside them for scale. A change is then measured without the drift between runs
//! of a shared machine, which moves single-run ratios against governor by tens of percent.
//!
//! Rows: `check_key`, `check_keys` (batches of 64) and `decide_key` over 1k, 100k and 1M uniform
//! keys, each limiter holding every key. A filter argument selects rows by name, as in
//! `paired.rs`.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Instant;

const ROUNDS: usize = 41;
/// The rows of each table size, after its label.
const ROWS: [&str; 5] = [
    "check_key: head / base",
    "check_keys: head / base",
    "decide_key: head / base",
    "check_key: head / governor",
    "check_key: base / governor",
];
const CALLS: u64 = 2_000_000;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn selected(name: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
}

/// As `paired.rs`: the median of per-round ratios A / B, A and B alternating in order.
fn paired(name: &str, mut a: impl FnMut() -> f64, mut b: impl FnMut() -> f64) {
    if !selected(name) {
        return;
    }
    a();
    b();
    let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = a();
            (x, b())
        } else {
            let y = b();
            (a(), y)
        };
        ta.push(x);
        tb.push(y);
        ratios.push(x / y);
    }
    let (ma, mb) = (median(&mut ta), median(&mut tb));
    let r = median(&mut ratios);
    let (q1, q3) = (ratios[ROUNDS / 4], ratios[3 * ROUNDS / 4]);
    println!("{name:40} {ma:7.2} ns vs {mb:7.2} ns   ratio {r:5.3}  (IQR {q1:5.3} .. {q3:5.3})");
}

/// SplitMix64 draws, uniform in `0..keys`.
fn uniform(keys: u64, len: usize, mut state: u64) -> Vec<u64> {
    (0..len)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (((z ^ (z >> 31)) as u128 * keys as u128) >> 64) as u64
        })
        .collect()
}

/// Nanoseconds per check over `CALLS` checks, one key at a time, continuing at `*at`.
fn one_at_a_time(keys: &[u64], at: &mut usize, mut check: impl FnMut(u64) -> bool) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(check(keys[*at]));
        *at = (*at + 1) % keys.len();
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

/// Nanoseconds per check over `CALLS` checks in batches of 64, continuing at `*at`.
fn batched(keys: &[u64], at: &mut usize, mut batch: impl FnMut(&[u64])) -> f64 {
    let start = Instant::now();
    let mut done = 0;
    while done < CALLS {
        if *at + 64 > keys.len() {
            *at = 0;
        }
        batch(&keys[*at..*at + 64]);
        *at += 64;
        done += 64;
    }
    start.elapsed().as_nanos() as f64 / done as f64
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
            // A full table may overflow on a few keys (under 0.1%); they stay absent in both.
            let _ = limiter.check_key(&k);
        }
        limiter
    }};
}

fn main() {
    println!("ab rounds: {ROUNDS} x {CALLS} calls each");
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
            || one_at_a_time(&seq, &mut a, |k| head.check_key(&k).is_ok()),
            || one_at_a_time(&seq, &mut b, |k| base.check_key(&k).is_ok()),
        );
        paired(
            &format!("{label} {}", ROWS[1]),
            || {
                batched(&seq, &mut a, |keys| {
                    head.check_keys(keys).for_each(|d| {
                        black_box(d.is_ok());
                    })
                })
            },
            || {
                batched(&seq, &mut b, |keys| {
                    base.check_keys(keys).for_each(|d| {
                        black_box(d.is_ok());
                    })
                })
            },
        );
        paired(
            &format!("{label} {}", ROWS[2]),
            || {
                one_at_a_time(&seq, &mut a, |k| {
                    head.decide_key(&k, 1).is_ok_and(|d| d.is_allowed())
                })
            },
            || {
                one_at_a_time(&seq, &mut b, |k| {
                    base.decide_key(&k, 1).is_ok_and(|d| d.is_allowed())
                })
            },
        );
        paired(
            &format!("{label} {}", ROWS[3]),
            || one_at_a_time(&seq, &mut a, |k| head.check_key(&k).is_ok()),
            || one_at_a_time(&seq, &mut b, |k| governor.check_key(&k).is_ok()),
        );
        paired(
            &format!("{label} {}", ROWS[4]),
            || one_at_a_time(&seq, &mut a, |k| base.check_key(&k).is_ok()),
            || one_at_a_time(&seq, &mut b, |k| governor.check_key(&k).is_ok()),
        );
    }
}
