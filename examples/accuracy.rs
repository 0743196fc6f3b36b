//! How exact the window counters are: the sliding-window and fixed-window counters against the
//! exact sliding log, on the same traffic.
//!
//!     cargo run --release --example accuracy
//!
//! A limit of 100 per second, on a simulated clock (every run prints the same figures). Traffic:
//! Poisson arrivals at 0.5, 1, 2 and 10 times the limit for 1 000 s; evenly spaced requests at 2
//! times the limit, and at 10 times the limit starting late in a second (0.95 s); and the
//! boundary burst, 2 × 100 requests in the last and first 10 ms around the edge of a second,
//! once a minute. For each algorithm, of the requests it admitted:
//!
//! - **over limit**: admissions that took the count of its own admissions in the trailing second
//!   `(t − 1 s, t]` past the limit (the exact log never does this);
//! - **false denials**: requests it refused although its own admissions in the trailing second
//!   left room for them (the exact log never does this either);
//! - **worst window**: the most it admitted in any one-second window, against the limit of 100.

use std::collections::VecDeque;
use std::time::Duration;

use tollgate::{FixedWindow, KeyedSlidingLog, ManualClock, Quota, RateLimiter, SlidingWindow};

const LIMIT: u64 = 100;
const PERIOD: u64 = 1_000_000_000;

/// What one algorithm made of one traffic pattern.
#[derive(Default)]
struct Tally {
    requests: u64,
    admitted: u64,
    over_limit: u64,
    false_denials: u64,
    worst_window: u64,
    /// The admission times in the trailing period.
    window: VecDeque<u64>,
}

impl Tally {
    fn record(&mut self, at: u64, admitted: bool) {
        self.requests += 1;
        while self.window.front().is_some_and(|&t| t + PERIOD <= at) {
            self.window.pop_front();
        }
        if admitted {
            self.admitted += 1;
            self.window.push_back(at);
            let count = self.window.len() as u64;
            self.over_limit += u64::from(count > LIMIT);
            self.worst_window = self.worst_window.max(count);
        } else if (self.window.len() as u64) < LIMIT {
            self.false_denials += 1;
        }
    }
}

/// Feeds `arrivals` (nanoseconds, ascending) to a limiter of each algorithm on its own clock.
fn run(arrivals: &[u64]) -> [Tally; 3] {
    let quota = Quota::per_second(LIMIT).expect("valid quota");
    let clocks: [ManualClock; 3] = Default::default();
    let sliding = RateLimiter::with_clock(SlidingWindow::new(&quota).expect("fits"), &clocks[0]);
    let fixed = RateLimiter::with_clock(FixedWindow::new(&quota).expect("fits"), &clocks[1]);
    let exact = KeyedSlidingLog::<()>::builder(&quota)
        .capacity(1)
        .clock(&clocks[2])
        .build()
        .expect("allocates");
    let mut tallies: [Tally; 3] = Default::default();
    for &at in arrivals {
        for clock in &clocks {
            clock.set(Duration::from_nanos(at));
        }
        tallies[0].record(at, sliding.check().is_ok());
        tallies[1].record(at, fixed.check().is_ok());
        tallies[2].record(at, exact.check_key(&()).is_ok());
    }
    tallies
}

/// Poisson arrivals at `load` times the limit, for `seconds`: exponential gaps, from a fixed seed.
fn poisson(load: f64, seconds: u64) -> Vec<u64> {
    let mean_gap = PERIOD as f64 / (load * LIMIT as f64);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut uniform = move || {
        // SplitMix64, then 53 bits in (0, 1].
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + f64::EPSILON
    };
    let mut at = 0.0;
    let mut arrivals = Vec::new();
    while at < (seconds * PERIOD) as f64 {
        at += -mean_gap * uniform().ln();
        arrivals.push(at as u64);
    }
    arrivals
}

/// Requests evenly spaced at `load` times the limit, for `seconds`, from `start`.
fn even(load: u64, seconds: u64, start: u64) -> Vec<u64> {
    let gap = PERIOD / (load * LIMIT);
    (0..seconds * load * LIMIT)
        .map(|i| start + i * gap)
        .collect()
}

/// Once a minute for `minutes`, twice the limit in the 20 ms around the edge of a second: the
/// last 10 ms before it and the first 10 ms after it.
fn boundary_bursts(minutes: u64) -> Vec<u64> {
    let step = 20_000_000 / (2 * LIMIT);
    (0..minutes)
        .flat_map(|minute| {
            let edge = (minute * 60 + 30) * PERIOD;
            (0..2 * LIMIT).map(move |i| edge - 10_000_000 + i * step)
        })
        .collect()
}

fn main() {
    println!("Window counters against the exact sliding log, {LIMIT} per second.\n");
    println!(
        "{:18} {:16} {:>10} {:>10} {:>12} {:>14} {:>13}",
        "traffic",
        "algorithm",
        "requests",
        "admitted",
        "over limit",
        "false denials",
        "worst window"
    );
    let cases: Vec<(String, Vec<u64>)> = [0.5, 1.0, 2.0, 10.0]
        .iter()
        .map(|&load| (format!("Poisson {load}x"), poisson(load, 1_000)))
        .chain([
            ("even 2x".to_string(), even(2, 1_000, 0)),
            ("even 10x, late".to_string(), even(10, 1_000, 950_000_000)),
            ("boundary burst".to_string(), boundary_bursts(60)),
        ])
        .collect();
    for (traffic, arrivals) in &cases {
        let tallies = run(arrivals);
        for (i, (name, tally)) in ["sliding window", "fixed window", "exact log"]
            .iter()
            .zip(&tallies)
            .enumerate()
        {
            println!(
                "{:18} {:16} {:>10} {:>10} {:>12} {:>14} {:>9} ({:.2}x)",
                if i == 0 { traffic.as_str() } else { "" },
                name,
                tally.requests,
                tally.admitted,
                tally.over_limit,
                tally.false_denials,
                tally.worst_window,
                tally.worst_window as f64 / LIMIT as f64
            );
        }
        let [sliding, _, exact] = &tallies;
        assert_eq!(
            (exact.over_limit, exact.false_denials),
            (0, 0),
            "the exact log is exact"
        );
        if traffic == "even 2x" {
            assert_eq!(
                sliding.over_limit, 0,
                "evenly spaced traffic stays within the limit"
            );
        }
    }
    println!(
        "\nover limit: admissions past {LIMIT} in the trailing second; false denials: refusals \
         with room left in it;\nworst window: the most admitted in any one second."
    );
}
