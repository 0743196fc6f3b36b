//! Differential fuzzing of live reconfiguration: an arbitrary direct limiter (GCRA, sliding or
//! fixed window) whose quota changes among arbitrary checks, decisions, resets and clock moves
//! both ways, against a plain word on which each change applies `Algorithm::carry_over`: the
//! same decisions in every generation, whichever word (64-bit or 128-bit) holds the state. Each
//! change also keeps its promise: the room after it is the room before it, capped at the new
//! capacity. Then the same for a keyed limiter of four keys (the top bits of a cost pick the
//! key), against a word per key converted as a keyed change documents (an idle key to fresh),
//! with the clock moving forward only (a table may reuse an idle key's slot, which is exact only
//! for a clock that does not go back).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::{
    Algorithm, Clock, FixedWindow, Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter,
    SlidingWindow, Transition,
};

#[derive(Arbitrary, Debug)]
struct Input {
    kind: u8,
    first: (u64, u64, u64),
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Check(u64),
    Decide(u64),
    Reset,
    SetQuota(u64, u64, u64),
    Forward(u32),
    Back(u32),
}

fn quota((limit, period_nanos, burst): (u64, u64, u64)) -> Option<Quota> {
    Quota::new(
        limit % 10_000 + 1,
        Duration::from_nanos(period_nanos % 10_000_000_000 + 1),
    )
    .ok()?
    .with_burst(burst % 1_000 + 1)
    .ok()
}

fn replay<A: Algorithm + PartialEq>(first: A, ops: &[Op], make: impl Fn(&Quota) -> Option<A>) {
    let clock = ManualClock::starting_at(Duration::from_secs(1_000));
    let limiter = RateLimiter::with_clock(first, &clock);
    let (mut algorithm, mut word) = (first, 0u64);
    for &op in ops.iter().take(512) {
        let now = clock.now();
        match op {
            Op::Check(cost) => {
                let cost = cost % (algorithm.capacity() + 2);
                let got = limiter.check_n(cost).is_ok();
                match algorithm.transition(word, now, cost) {
                    Transition::Allow { state } if cost <= algorithm.capacity() => {
                        assert!(got);
                        word = state;
                    }
                    _ => assert!(!got),
                }
            }
            Op::Decide(cost) => {
                let cost = cost % (algorithm.capacity() + 1);
                let got = limiter.decide(cost).unwrap();
                let (want, next) = algorithm.decide(word, now, cost);
                assert_eq!(got, want);
                word = next;
            }
            Op::Reset => {
                limiter.reset();
                word = 0;
            }
            Op::SetQuota(limit, period, burst) => {
                let Some(to) = quota((limit, period, burst)).and_then(|q| make(&q)) else {
                    continue;
                };
                limiter.reconfigure(to);
                if to != algorithm {
                    let carried = algorithm.carry_over(word, now, &to);
                    let left = algorithm.decide(word, now, 0).0.remaining();
                    assert_eq!(
                        to.decide(carried, now, 0).0.remaining(),
                        left.min(to.capacity())
                    );
                    (algorithm, word) = (to, carried);
                }
                assert!(limiter.algorithm() == algorithm);
            }
            Op::Forward(us) => clock.advance(Duration::from_micros(u64::from(us))),
            Op::Back(us) => clock.rewind(Duration::from_micros(u64::from(us) % 1_000_000)),
        }
        let (peek, want) = (limiter.peek(), algorithm.decide(word, clock.now(), 0).0);
        assert_eq!(peek.remaining(), want.remaining());
        assert_eq!(peek.reset_after(), want.reset_after());
    }
}

const KEYS: u64 = 4;

fn replay_keyed<A: Algorithm + PartialEq>(
    first: A,
    ops: &[Op],
    make: impl Fn(&Quota) -> Option<A>,
) {
    let clock = ManualClock::starting_at(Duration::from_secs(1_000));
    let limiter: KeyedRateLimiter<u64, A, _> = KeyedRateLimiter::builder(first)
        .capacity(64)
        .clock(&clock)
        .build()
        .unwrap();
    let (mut algorithm, mut words) = (first, [0u64; KEYS as usize]);
    for &op in ops.iter().take(512) {
        let now = clock.now();
        match op {
            Op::Check(cost) | Op::Decide(cost) => {
                let key = (cost >> 56) % KEYS;
                let cost = cost % (algorithm.capacity() + 1);
                let got = limiter.decide_key(&key, cost).unwrap();
                let (want, next) = algorithm.decide(words[key as usize], now, cost);
                assert_eq!(got, want);
                words[key as usize] = next;
            }
            Op::Reset => {
                limiter.reset();
                words = [0; KEYS as usize];
            }
            Op::SetQuota(limit, period, burst) => {
                let Some(to) = quota((limit, period, burst)).and_then(|q| make(&q)) else {
                    continue;
                };
                limiter.reconfigure(to);
                if to != algorithm {
                    for word in &mut words {
                        *word = if algorithm.is_idle(*word, now) {
                            0
                        } else {
                            algorithm.carry_over(*word, now, &to)
                        };
                    }
                    algorithm = to;
                }
                assert!(limiter.algorithm() == algorithm);
            }
            Op::Forward(us) | Op::Back(us) => clock.advance(Duration::from_micros(u64::from(us))),
        }
        for key in 0..KEYS {
            let peek = limiter.peek_key(&key);
            let want = algorithm.decide(words[key as usize], clock.now(), 0).0;
            assert_eq!(peek.remaining(), want.remaining());
            assert_eq!(peek.reset_after(), want.reset_after());
        }
    }
}

fn replay_either<A: Algorithm + PartialEq>(
    keyed: bool,
    first: A,
    ops: &[Op],
    make: impl Fn(&Quota) -> Option<A>,
) {
    if keyed {
        replay_keyed(first, ops, make);
    } else {
        replay(first, ops, make);
    }
}

fuzz_target!(|input: Input| {
    let Some(first) = quota(input.first) else {
        return;
    };
    let keyed = input.kind & 4 != 0;
    match input.kind % 3 {
        0 => replay_either(keyed, Gcra::from(first), &input.ops, |q| {
            Some(Gcra::from(q))
        }),
        1 => {
            let Ok(window) = SlidingWindow::new(&first) else {
                return;
            };
            replay_either(keyed, window, &input.ops, |q| SlidingWindow::new(q).ok());
        }
        _ => {
            let Ok(window) = FixedWindow::new(&first) else {
                return;
            };
            replay_either(keyed, window, &input.ops, |q| FixedWindow::new(q).ok());
        }
    }
});
