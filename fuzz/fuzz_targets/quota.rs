//! Arbitrary configuration input: any limit, period and burst either builds a quota that keeps
//! its documented invariants or gives an error whose message names the bad value; never a panic.
//! Every algorithm built from a valid quota then decides arbitrary words at arbitrary times and
//! costs without panicking, and its check path agrees with its full decision (the verdict, the
//! word stored, a denial's wait).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::{Algorithm, FixedWindow, Gcra, Nanos, Quota, QuotaError, SlidingWindow, Transition};

#[derive(Arbitrary, Debug)]
struct Input {
    limit: u64,
    period_secs: u64,
    period_subsec_nanos: u32,
    burst: Option<u64>,
    probes: Vec<(u64, u64, u64)>,
}

fn probe<A: Algorithm>(algorithm: &A, probes: &[(u64, u64, u64)]) {
    for &(word, now, cost) in probes {
        let now = Nanos::from_nanos(now);
        let (decision, next) = algorithm.decide(word, now, cost);
        match algorithm.transition(word, now, cost) {
            Transition::Allow { state } => assert!(decision.is_allowed() && state == next),
            Transition::Deny { retry_after } => assert!(
                !decision.is_allowed()
                    && next == word
                    && retry_after.as_duration() == decision.retry_after()
            ),
        }
        if cost > algorithm.capacity() {
            assert!(!decision.is_allowed());
        }
        let _ = algorithm.is_idle(word, now);
    }
}

fn check_error(err: QuotaError) {
    // Every message says what is wrong, in words.
    let message = err.to_string();
    assert!(message.starts_with("invalid quota: "), "{message}");
    assert!(message.len() > "invalid quota: ".len() + 10, "{message}");
}

fuzz_target!(|input: Input| {
    let period = Duration::new(input.period_secs, input.period_subsec_nanos % 1_000_000_000);
    let quota = match Quota::new(input.limit, period) {
        Ok(q) => q,
        Err(err) => return check_error(err),
    };
    let quota = match input.burst.map(|b| quota.with_burst(b)) {
        None => quota,
        Some(Ok(q)) => q,
        Some(Err(err)) => return check_error(err),
    };
    // The documented invariants: rounding never admits more than configured, and the tolerance
    // is within its bound.
    let t = quota.emission_interval().as_nanos();
    assert!(t >= 1);
    assert!(t * quota.limit() as u128 >= quota.period().as_nanos());
    assert!(t * quota.limit() as u128 - quota.period().as_nanos() < quota.limit() as u128);
    assert!(quota.tolerance() <= Quota::MAX_TOLERANCE);
    let probes = &input.probes[..input.probes.len().min(64)];
    probe(&Gcra::from(quota), probes);
    match SlidingWindow::new(&quota) {
        Ok(sw) => probe(&sw, probes),
        Err(err) => check_error(err),
    }
    match FixedWindow::new(&quota) {
        Ok(fw) => probe(&fw, probes),
        Err(err) => check_error(err),
    }
});
