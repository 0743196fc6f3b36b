//! Differential fuzzing of layered checks: three direct layers of arbitrary quotas (GCRA, the
//! sliding window, the fixed window) checked all or nothing, one of them listed twice so that
//! the look can pass where the holds cannot and the holds before a refusing layer are released,
//! against models that admit in every layer or record nothing: the same verdicts, and the same
//! state in every layer after every step.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tollgate::layers::Layers;
use tollgate::reference::{
    FixedWindowCounter, Look, Model, SlidingWindowCounter, VirtualScheduling,
};
use tollgate::{Clock, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingWindow};

#[derive(Arbitrary, Debug)]
struct Input {
    quotas: [(u16, u32); 3],
    ops: Vec<(u32, u8)>,
}

fuzz_target!(|input: Input| {
    let quotas: Vec<Quota> = input
        .quotas
        .iter()
        .filter_map(|&(limit, ms)| {
            Quota::new(
                u64::from(limit % 50 + 1),
                Duration::from_millis(u64::from(ms % 10_000 + 1)),
            )
            .ok()
        })
        .collect();
    let [g, s, f] = quotas[..] else { return };
    let (Ok(sliding), Ok(fixed)) = (SlidingWindow::new(&s), FixedWindow::new(&f)) else {
        return;
    };
    let clock = ManualClock::starting_at(Duration::from_secs(100));
    let gcra_layer = RateLimiter::with_clock(Gcra::from(g), &clock);
    let window_layer = RateLimiter::with_clock(sliding, &clock);
    let fixed_layer = RateLimiter::with_clock(fixed, &clock);
    let (mut gm, mut sm, mut fm) = (
        VirtualScheduling::new(&g),
        SlidingWindowCounter::new(&s),
        FixedWindowCounter::new(&f),
    );
    for &(micros, cost) in input.ops.iter().take(512) {
        clock.advance(Duration::from_micros(u64::from(micros % 2_000_000)));
        let cost = u64::from(cost % 8);
        let now = clock.now();
        // The sliding window listed twice: it must admit the request twice over.
        let layers = (&window_layer, &gcra_layer, &fixed_layer, &window_layer);
        let got = layers.check_all(cost);
        let fits = cost <= g.burst() && cost <= s.limit() && cost <= f.limit();
        let mut twice = sm.clone();
        let expected = fits
            && twice.decide(now, cost).allowed
            && twice.decide(now, cost).allowed
            && gm.look(now, cost).allowed
            && fm.look(now, cost).allowed;
        assert_eq!(got.is_ok(), expected, "{got:?}");
        if expected {
            sm = twice;
            gm.decide(now, cost);
            fm.decide(now, cost);
        }
        assert_eq!(gcra_layer.peek().remaining(), gm.look(now, 0).remaining);
        assert_eq!(window_layer.peek().remaining(), sm.look(now, 0).remaining);
        assert_eq!(fixed_layer.peek().remaining(), fm.look(now, 0).remaining);
    }
});
