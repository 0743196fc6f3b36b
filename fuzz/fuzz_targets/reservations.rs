//! Differential fuzzing of reservations: an arbitrary quota and an arbitrary sequence of
//! reservations (any cost, any wait), cancels of any live reservation, and clock moves both
//! ways, through a direct GCRA limiter and through `reference::LendingBucket`: the same turns,
//! denials and waits, the same cancels given back, the same tokens left after every step.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::reference::{Booking, LendingBucket};
use tollgate::{CheckError, Clock, Gcra, ManualClock, Nanos, Quota, RateLimiter};

#[derive(Arbitrary, Debug)]
struct Input {
    limit: u64,
    period_nanos: u64,
    burst: u64,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Reserve { cost: u64, max_wait_nanos: u64 },
    Cancel(u16),
    Forward(u32),
    Back(u32),
}

fuzz_target!(|input: Input| {
    let Ok(quota) = Quota::new(input.limit, Duration::from_nanos(input.period_nanos)) else {
        return;
    };
    let Ok(quota) = quota.with_burst(input.burst % 1_000 + 1) else {
        return;
    };
    let clock = ManualClock::starting_at(Duration::from_secs(1_000));
    let limiter = RateLimiter::with_clock(Gcra::from(quota), &clock);
    let mut model = LendingBucket::new(&quota);
    let mut live = Vec::new();
    for &op in input.ops.iter().take(512) {
        match op {
            Op::Reserve {
                cost,
                max_wait_nanos,
            } => {
                let cost = if cost >> 60 == 0xF {
                    cost
                } else {
                    cost % (quota.burst() + 2)
                };
                let max_wait = Duration::from_nanos(max_wait_nanos);
                let now = clock.now();
                match (
                    limiter.reserve(cost, max_wait),
                    model.reserve(now, cost, Nanos::from_duration(max_wait)),
                ) {
                    (Ok(turn), Booking::Ready { at, id }) => {
                        assert_eq!(turn.ready_at(), at);
                        if id != 0 {
                            live.push((id, turn));
                        }
                    }
                    (Err(CheckError::Denied(d)), Booking::Denied { retry_after }) => {
                        assert_eq!(d.retry_after(), retry_after.as_duration());
                    }
                    (Err(CheckError::InsufficientCapacity(_)), Booking::TooLarge) => {}
                    (got, want) => panic!("{got:?} where the model says {want:?}"),
                }
            }
            Op::Cancel(i) if !live.is_empty() => {
                let (id, turn) = live.remove(usize::from(i) % live.len());
                assert_eq!(turn.cancel(), model.cancel(id), "cancel of {id}");
            }
            Op::Cancel(_) => {}
            Op::Forward(n) => clock.advance(Duration::from_nanos(u64::from(n) * 1_000)),
            Op::Back(n) => clock.rewind(Duration::from_nanos(u64::from(n) * 1_000)),
        }
        assert_eq!(limiter.peek().remaining(), model.available(clock.now()));
    }
});
