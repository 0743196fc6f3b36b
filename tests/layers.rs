//! Layered limits against their definition, `reference::all_or_nothing`: four layers (per user
//! GCRA and sliding window, per tenant fixed window, global GCRA: keyed and direct, three
//! algorithms) on one clock, driven by random requests through `check_all` and `decide_all`,
//! beside a model per layer and key. Every request is admitted exactly when the model admits
//! it; a refusal names a layer that refuses, with the longest wait among them; nothing refused
//! is recorded anywhere; and every layer's state matches its model after every step.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::layers::{LayerError, Layers, ReserveAll};
use tollgate::reference::{
    all_or_nothing, Booking, FixedWindowCounter, LendingBucket, Look, Model, SlidingWindowCounter,
    VirtualScheduling,
};
use tollgate::{
    CheckError, Decision, FixedWindow, Gcra, KeyedRateLimiter, ManualClock, Nanos, Quota,
    RateLimiter, SlidingWindow,
};

/// A request: milliseconds since the last one, its user, its cost, and whether it is decided
/// (`decide_all`) or checked (`check_all`).
fn requests() -> impl Strategy<Value = Vec<(u16, u8, u64, bool)>> {
    prop::collection::vec((0u16..400, 0u8..4, 0u64..7, any::<bool>()), 1..300)
}

fn quota(limit: u64, ms: u64, burst: u64) -> Quota {
    Quota::new(limit, Duration::from_millis(ms))
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

#[derive(Default)]
struct Models {
    user_gcra: HashMap<u8, VirtualScheduling>,
    user_window: HashMap<u8, SlidingWindowCounter>,
    tenant: HashMap<u8, FixedWindowCounter>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn layers_are_all_or_nothing_over_their_models(
        user in (1u64..10, 100u64..3_000, 1u64..6),
        window in (2u64..12, 500u64..5_000),
        tenant in (3u64..20, 500u64..5_000),
        global in (5u64..30, 100u64..2_000, 1u64..15),
        requests in requests(),
    ) {
        let clock = ManualClock::starting_at(Duration::from_secs(100));
        let (user_q, window_q, tenant_q, global_q) = (
            quota(user.0, user.1, user.2),
            quota(window.0, window.1, window.0),
            quota(tenant.0, tenant.1, tenant.0),
            quota(global.0, global.1, global.2),
        );
        let per_user = KeyedRateLimiter::<u8>::builder(Gcra::from(user_q)).capacity(16).clock(&clock).build().unwrap();
        let per_user_window = KeyedRateLimiter::<u8>::builder(SlidingWindow::new(&window_q).unwrap())
            .capacity(16).clock(&clock).build().unwrap();
        let per_tenant = KeyedRateLimiter::<u8>::builder(FixedWindow::new(&tenant_q).unwrap())
            .capacity(16).clock(&clock).build().unwrap();
        let all = RateLimiter::with_clock(Gcra::from(global_q), &clock);
        let mut models = Models::default();
        let mut global_model = VirtualScheduling::new(&global_q);

        for (ms, u, cost, decide) in requests {
            clock.advance(Duration::from_millis(u64::from(ms)));
            let t = u % 2;
            // Each layer alone, before: its wait for this cost if it would refuse.
            let alone: [Result<Decision, _>; 4] = [
                per_user.peek_key_n(&u, cost),
                per_user_window.peek_key_n(&u, cost),
                per_tenant.peek_key_n(&t, cost),
                all.peek_n(cost),
            ];
            let layers = (per_user.layer(&u), per_user_window.layer(&u), per_tenant.layer(&t), &all);
            let outcome: Result<Option<(usize, Decision)>, LayerError> = if decide {
                layers.decide_all(cost).map(|d| Some((d.layer(), *d.decision())))
            } else {
                layers.check_all(cost).map(|()| None)
            };

            let capacities = [user_q.burst(), window_q.limit(), tenant_q.limit(), global_q.burst()];
            if let Some(first) = capacities.iter().position(|&c| cost > c) {
                let error = outcome.unwrap_err();
                prop_assert_eq!(error.layer(), first);
                prop_assert!(matches!(error.error(), CheckError::InsufficientCapacity(_)));
                continue;
            }

            let user_gcra = models.user_gcra.entry(u).or_insert_with(|| VirtualScheduling::new(&user_q));
            let user_window = models.user_window.entry(u).or_insert_with(|| SlidingWindowCounter::new(&window_q));
            let tenant_model = models.tenant.entry(t).or_insert_with(|| FixedWindowCounter::new(&tenant_q));
            let now = tollgate::Clock::now(&clock);
            let mut model_layers: [&mut dyn Look; 4] = [user_gcra, user_window, tenant_model, &mut global_model];
            let verdict = all_or_nothing(&mut model_layers, now, cost);

            // The refusing layer, and the longest wait of those that refuse.
            let longest = verdict.refused_by.iter()
                .map(|&i| alone[i].unwrap().retry_after())
                .max();
            match outcome {
                Ok(None) => prop_assert!(verdict.allowed, "checked in, refused by {:?}", verdict.refused_by),
                Ok(Some((layer, decision))) => {
                    prop_assert_eq!(decision.is_allowed(), verdict.allowed);
                    if verdict.allowed {
                        let least = *verdict.remaining.iter().min().unwrap();
                        prop_assert_eq!(decision.remaining(), least);
                        prop_assert_eq!(verdict.remaining[layer], least);
                    } else {
                        prop_assert!(verdict.refused_by.contains(&layer));
                        prop_assert_eq!(Some(decision.retry_after()), longest);
                    }
                }
                Err(error) => {
                    prop_assert!(!verdict.allowed);
                    prop_assert!(verdict.refused_by.contains(&error.layer()), "{} not in {:?}", error, verdict.refused_by);
                    let CheckError::Denied(denied) = error.error() else { panic!("{error}") };
                    prop_assert_eq!(Some(denied.retry_after()), longest);
                }
            }
            // Every layer's state is its model's: admitted everywhere or recorded nowhere.
            let states = [
                per_user.peek_key(&u).remaining(),
                per_user_window.peek_key(&u).remaining(),
                per_tenant.peek_key(&t).remaining(),
                all.peek().remaining(),
            ];
            let after: Vec<u64> = model_layers.iter().map(|m| m.look(now, 0).remaining).collect();
            prop_assert_eq!(states.to_vec(), after);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A layer listed twice must admit the request twice over; when its second entry refuses
    /// (the look saw room for one, the holds need two), the holds before it are released: the
    /// window's, exactly, and the GCRA layer's between them. The same run drives models that
    /// admit the request twice in the window, or record nothing.
    #[test]
    fn holds_before_a_refusing_layer_are_released(
        window in (2u64..12, 500u64..5_000),
        global in (5u64..30, 100u64..2_000, 1u64..15),
        requests in requests(),
    ) {
        let clock = ManualClock::starting_at(Duration::from_secs(100));
        let (window_q, global_q) = (quota(window.0, window.1, window.0), quota(global.0, global.1, global.2));
        let per_user = KeyedRateLimiter::<u8>::builder(SlidingWindow::new(&window_q).unwrap())
            .capacity(16).clock(&clock).build().unwrap();
        let all = RateLimiter::with_clock(Gcra::from(global_q), &clock);
        let mut users: HashMap<u8, SlidingWindowCounter> = HashMap::new();
        let mut global_model = VirtualScheduling::new(&global_q);
        for (ms, u, cost, _) in requests {
            clock.advance(Duration::from_millis(u64::from(ms)));
            if cost > window_q.limit() || cost > global_q.burst() {
                continue;
            }
            let now = tollgate::Clock::now(&clock);
            let user = users.entry(u).or_insert_with(|| SlidingWindowCounter::new(&window_q));
            let mut twice = user.clone();
            let expected = twice.decide(now, cost).allowed
                && twice.decide(now, cost).allowed
                && global_model.look(now, cost).allowed;
            let got = (per_user.layer(&u), &all, per_user.layer(&u)).check_all(cost);
            prop_assert_eq!(got.is_ok(), expected, "{:?}", got);
            if expected {
                *user = twice;
                global_model.decide(now, cost);
            }
            prop_assert_eq!(per_user.peek_key(&u).remaining(), user.look(now, 0).remaining);
            prop_assert_eq!(all.peek().remaining(), global_model.look(now, 0).remaining);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Reservations over two GCRA layers (a user's key, a global limiter) against a lending
    /// bucket per layer and key: a reservation is admitted exactly when every layer's model
    /// admits it with the wait allowed, its delay is the latest of the layers' turns, a refused
    /// one takes nothing, and a cancel gives back exactly what the models give back.
    #[test]
    fn reservations_over_layers_are_all_or_nothing_lending_buckets(
        user in (1u64..10, 100u64..3_000, 1u64..6),
        global in (5u64..30, 100u64..2_000, 1u64..15),
        ops in prop::collection::vec((0u8..4, 0u16..400, 0u8..3, 0u64..6, 0u64..2_000), 1..200),
    ) {
        let clock = ManualClock::starting_at(Duration::from_secs(100));
        let (user_q, global_q) = (quota(user.0, user.1, user.2), quota(global.0, global.1, global.2));
        let per_user = KeyedRateLimiter::<u8>::builder(Gcra::from(user_q)).capacity(16).clock(&clock).build().unwrap();
        let all = RateLimiter::with_clock(Gcra::from(global_q), &clock);
        let mut users: HashMap<u8, LendingBucket> = HashMap::new();
        let mut global_model = LendingBucket::new(&global_q);
        let mut live = Vec::new();
        for (kind, ms, u, cost, wait_ms) in ops {
            match kind {
                0 | 1 => {
                    let now = tollgate::Clock::now(&clock);
                    let max_wait = Duration::from_millis(wait_ms);
                    let got = (per_user.layer(&u), &all).reserve_all(cost, max_wait);
                    if cost > user_q.burst() || cost > global_q.burst() {
                        prop_assert!(got.is_err());
                        continue;
                    }
                    let user_model = users.entry(u).or_insert_with(|| LendingBucket::new(&user_q));
                    let wait = Nanos::from_duration(max_wait);
                    let looks = [user_model.clone().reserve(now, cost, wait), global_model.clone().reserve(now, cost, wait)];
                    let admitted = looks.iter().all(|b| matches!(b, Booking::Ready { .. }));
                    prop_assert_eq!(got.is_ok(), admitted, "{:?}", looks);
                    if let Ok(turn) = got {
                        let (Booking::Ready { at: a, id: ua }, Booking::Ready { at: b, id: gb }) =
                            (user_model.reserve(now, cost, wait), global_model.reserve(now, cost, wait)) else { unreachable!() };
                        let latest = a.max(b).as_nanos() - now.as_nanos();
                        prop_assert_eq!(turn.delay(), Duration::from_nanos(latest));
                        live.push((u, ua, gb, turn));
                    }
                }
                2 if !live.is_empty() => {
                    let (u, ua, gb, turn) = live.remove(usize::from(ms) % live.len());
                    let user_model = users.get_mut(&u).unwrap();
                    let given = global_model.cancel(gb) & user_model.cancel(ua);
                    prop_assert_eq!(turn.cancel(), given);
                }
                _ => clock.advance(Duration::from_millis(u64::from(ms))),
            }
            let now = tollgate::Clock::now(&clock);
            for u in 0..3u8 {
                let tokens = users.get(&u).map_or(user_q.burst(), |m| m.available(now));
                prop_assert_eq!(per_user.peek_key(&u).remaining(), tokens);
            }
            prop_assert_eq!(all.peek().remaining(), global_model.available(now));
        }
    }
}

#[test]
fn a_refusal_by_a_later_layer_takes_nothing_from_the_earlier_ones() {
    let clock = ManualClock::new();
    let per_user = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_second(10).unwrap()))
        .clock(&clock)
        .build()
        .unwrap();
    let global = RateLimiter::with_clock(Gcra::from(Quota::per_second(3).unwrap()), &clock);
    for user in ["a", "b", "c"] {
        (per_user.layer(user), &global).check_all(1).unwrap();
    }
    for user in ["a", "b", "c", "d"] {
        let refused = (per_user.layer(user), &global).check_all(1).unwrap_err();
        assert_eq!(refused.layer(), 1);
    }
    assert_eq!(per_user.peek_key("a").remaining(), 9);
    assert_eq!(per_user.peek_key("d").remaining(), 10);
    assert_eq!(
        per_user.stats().occupied,
        3,
        "a refused new key is not inserted"
    );
    // Of two refusing layers, the one with the longer wait is named: for 5 more, the user's
    // layer (10 per second, spent) waits 500 ms, the other (20 per second, spent) 250 ms.
    let twenty = RateLimiter::with_clock(Gcra::from(Quota::per_second(20).unwrap()), &clock);
    twenty.check_n(20).unwrap();
    per_user.check_key_n("e", 10).unwrap();
    for (layers, user_layer) in [
        ((per_user.layer("e"), &twenty).check_all(5), 0),
        ((&twenty, per_user.layer("e")).check_all(5), 1),
    ] {
        let refused = layers.unwrap_err();
        assert_eq!(refused.layer(), user_layer);
        let CheckError::Denied(denied) = refused.error() else {
            panic!("{refused}")
        };
        assert_eq!(denied.retry_after(), Duration::from_millis(500));
    }
}

/// Eight threads check three layers at once, at frozen time, far more often than the global
/// layer has room for: exactly the global room is admitted, and every key of the other layers
/// holds exactly what was admitted for it, so no hold that a lost race took was left behind.
#[test]
fn threads_checking_layers_at_frozen_time_leave_exact_counts() {
    let clock = ManualClock::new();
    let per_user = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_hour(1_000).unwrap()))
        .capacity(64)
        .clock(&clock)
        .build()
        .unwrap();
    let per_tenant = KeyedRateLimiter::<u64>::builder(
        SlidingWindow::new(&Quota::per_hour(2_500).unwrap()).unwrap(),
    )
    .capacity(64)
    .clock(&clock)
    .build()
    .unwrap();
    let global = RateLimiter::with_clock(Gcra::from(Quota::per_hour(3_000).unwrap()), &clock);
    let (threads, attempts) = (8u64, 2_000u64);
    let admitted: Vec<(u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (per_user, per_tenant, global) = (&per_user, &per_tenant, &global);
                s.spawn(move || {
                    let user = t % 4;
                    let n = (0..attempts)
                        .filter(|_| {
                            (per_user.layer(&user), per_tenant.layer(&(user % 2)), global)
                                .check_all(1)
                                .is_ok()
                        })
                        .count() as u64;
                    (user, n)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: u64 = admitted.iter().map(|&(_, n)| n).sum();
    assert_eq!(total, 3_000, "the global layer's room, exactly");
    assert_eq!(global.peek().remaining(), 0);
    for user in 0..4 {
        let for_user: u64 = admitted
            .iter()
            .filter(|&&(u, _)| u == user)
            .map(|&(_, n)| n)
            .sum();
        assert_eq!(
            per_user.peek_key(&user).remaining(),
            1_000 - for_user,
            "user {user}"
        );
    }
    for tenant in 0..2 {
        let for_tenant: u64 = admitted
            .iter()
            .filter(|&&(u, _)| u % 2 == tenant)
            .map(|&(_, n)| n)
            .sum();
        assert_eq!(
            per_tenant.peek_key(&tenant).remaining(),
            2_500 - for_tenant,
            "tenant {tenant}"
        );
    }
}
