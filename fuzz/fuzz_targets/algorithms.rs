//! Differential fuzzing: arbitrary quotas and arbitrary request sequences, replayed through each
//! packed algorithm and its reference model, checked after every step by
//! `tollgate::reference::Differential` (verdicts, remaining, exact retry and reset times and
//! their whole seconds, the check path against the full decision, no stored reserved word).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::reference::{
    Differential, FixedWindowCounter, Model, SlidingWindowCounter, TokenBucket, VirtualScheduling,
};
use tollgate::{Algorithm, FixedWindow, Gcra, Nanos, Quota, SlidingWindow};

#[derive(Arbitrary, Debug)]
struct Input {
    limit: u64,
    period_nanos: u64,
    burst: Option<u64>,
    ops: Vec<(Step, u64)>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Step {
    /// Forwards by a fraction (1/1024) of the period, times n.
    Forward(u16),
    /// Backwards by a fraction of the period, times n.
    Back(u16),
    /// Anywhere.
    To(u64),
}

fn replay<A: Algorithm, M: Model + Clone>(
    algorithm: A,
    model: M,
    period: u64,
    ops: &[(Step, u64)],
) {
    let capacity = algorithm.capacity();
    let unit = (period / 1024).max(1);
    let mut diff = Differential::new(algorithm, model);
    let mut now = 0u64;
    for &(step, cost) in ops {
        now = match step {
            Step::Forward(n) => now.saturating_add(unit.saturating_mul(n as u64)),
            Step::Back(n) => now.saturating_sub(unit.saturating_mul(n as u64)),
            Step::To(t) => t,
        }
        .min(Nanos::MAX.as_nanos());
        // Mostly costs the algorithm can admit, sometimes anything at all.
        let cost = if cost >> 60 == 0xF {
            cost
        } else {
            cost % (capacity.saturating_add(2))
        };
        if let Err(mismatch) = diff.step(Nanos::from_nanos(now), cost) {
            panic!("{mismatch}");
        }
    }
}

fuzz_target!(|input: Input| {
    // Keep limits small enough that the models' per-unit logs stay cheap.
    let limit = input.limit % 100_000 + 1;
    let Ok(quota) = Quota::new(limit, Duration::from_nanos(input.period_nanos)) else {
        return;
    };
    let quota = match input.burst {
        Some(burst) => match quota.with_burst(burst % 200_000 + 1) {
            Ok(q) => q,
            Err(_) => return,
        },
        None => quota,
    };
    let period = input.period_nanos;
    let ops = &input.ops[..input.ops.len().min(256)];
    replay(
        Gcra::from(quota),
        VirtualScheduling::new(&quota),
        period,
        ops,
    );
    replay(Gcra::from(quota), TokenBucket::new(&quota), period, ops);
    if let Ok(sw) = SlidingWindow::new(&quota) {
        replay(sw, SlidingWindowCounter::new(&quota), period, ops);
    }
    if let Ok(fw) = FixedWindow::new(&quota) {
        replay(fw, FixedWindowCounter::new(&quota), period, ops);
    }
});
