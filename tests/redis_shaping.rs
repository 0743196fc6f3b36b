//! Reservations on Redis against a real `redis-server`, which each test starts on a free
//! loopback port in a temporary directory and stops by its process id.
//!
//! The reservation and cancel scripts are replayed against their models
//! ([`RedisGcra::reserve`], [`RedisGcra::cancel`]) with injected times: random quotas, costs,
//! waits (none, unbounded, and within a microsecond of the need) and cancels of any live
//! reservation, the same outcome and the same stored state after every step; reservations over
//! two layers (one listed twice at times), all or nothing. Then turns on the server's clock, a
//! dropped `until_key_ready`, and the edges.

mod server;

use std::time::Duration;

use proptest::prelude::*;
use server::{fresh_key, params, runtime, Server};
use tollgate::redis::{
    Error, Fallback, RedisGcra, RedisKeyedRateLimiter, RedisRateLimiter, RedisReservation,
    RedisSlidingWindow,
};
use tollgate::Quota;

#[derive(Clone, Debug)]
enum Op {
    /// Reserve `cost` (an index into 0, 1, burst / 2 + 1, burst, burst + 1), waiting at most
    /// the given microseconds, or (`None`) the need plus `edge` microseconds.
    Reserve {
        cost: u8,
        max_wait: Option<u64>,
        edge: i64,
    },
    Cancel(usize),
    /// Microseconds forwards (or backwards).
    Clock(i64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let wait = prop_oneof![
        Just(Some(0u64)),
        Just(Some(u64::MAX)),
        (0u64..5_000_000).prop_map(Some),
        Just(None)
    ];
    let op = prop_oneof![
        4 => (0u8..5, wait, -1i64..=1).prop_map(|(cost, max_wait, edge)| Op::Reserve { cost, max_wait, edge }),
        2 => (0usize..64).prop_map(Op::Cancel),
        2 => (-300_000i64..1_000_000).prop_map(Op::Clock),
    ];
    prop::collection::vec(op, 1..60)
}

fn gcra() -> impl Strategy<Value = RedisGcra> {
    (1u64..50, 1u64..3_000_000, 1u64..20).prop_map(|(limit, us, burst)| {
        let quota = Quota::new(limit, Duration::from_micros(us))
            .unwrap()
            .with_burst(burst)
            .unwrap();
        RedisGcra::new(&quota).unwrap()
    })
}

#[test]
fn the_reservation_scripts_are_gcra_reserve_and_cancel() {
    let server = Server::start();
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 150,
        ..ProptestConfig::default()
    });
    let start = 1_700_000_000_000_000u64..1_900_000_000_000_000;
    let result = runner.run(&(gcra(), start, ops()), |(gcra, start, ops)| {
        let limiter = rt.block_on(server.limiter_of("rl:", gcra));
        let key = fresh_key();
        let (mut now, mut state) = (start, 0u64);
        let mut live: Vec<RedisReservation<_>> = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Reserve {
                    cost,
                    max_wait,
                    edge,
                } => {
                    let burst = gcra.burst();
                    let cost = [0, 1, burst / 2 + 1, burst, burst + 1][usize::from(cost)];
                    let max_wait = max_wait.unwrap_or_else(|| {
                        let need = match gcra.reserve(state, now, cost, 0).0 {
                            Err(retry_after) => retry_after,
                            Ok(_) => 0,
                        };
                        need.saturating_add_signed(edge)
                    });
                    let wait = Duration::from_micros(max_wait);
                    let got = rt.block_on(limiter.reserve_key_at(&key, cost, wait, now));
                    if cost > burst {
                        prop_assert!(matches!(got, Err(Error::InsufficientCapacity(_))));
                        continue;
                    }
                    let max_wait = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
                    let (want, next) = gcra.reserve(state, now, cost, max_wait);
                    match (got, want) {
                        (Ok(turn), Ok(_)) => {
                            let held = (next != state).then_some([state, next]);
                            prop_assert_eq!(turn.held(), vec![held], "step {}", i);
                            if held.is_some() {
                                live.push(turn);
                            }
                        }
                        (Err(Error::Denied(denied)), Err(retry_after)) => {
                            prop_assert_eq!(
                                denied.retry_after(),
                                Duration::from_micros(retry_after)
                            );
                        }
                        (got, want) => prop_assert!(
                            false,
                            "step {}: {:?} where the model says {:?}",
                            i,
                            got,
                            want
                        ),
                    }
                    state = next;
                }
                Op::Cancel(j) if !live.is_empty() => {
                    let turn = live.remove(j % live.len());
                    let held = turn.held()[0].unwrap();
                    let (given, next) = gcra.cancel(state, held);
                    prop_assert_eq!(
                        rt.block_on(turn.cancel_at(now)).unwrap(),
                        given,
                        "step {}",
                        i
                    );
                    state = next;
                }
                Op::Cancel(_) => {}
                Op::Clock(us) => now = now.saturating_add_signed(us),
            }
            let stored = (state != 0).then(|| format!("{state}@{}", params(&gcra.into())));
            prop_assert_eq!(server.stored(&limiter.key(&key)), stored, "step {}", i);
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[tokio::test]
async fn turns_on_the_server_clock_queue_and_cancel_in_reverse() {
    let server = Server::start();
    // 10 per second, bursts of 1: turns 100 ms apart.
    let limiter = server
        .limiter(Quota::per_second(10).unwrap().with_burst(1).unwrap())
        .await;
    let wait = Duration::from_secs(10);
    let first = limiter.reserve_key("k", 1, wait).await.unwrap();
    let [start, end] = first.held()[0].unwrap();
    assert_eq!(end - start.max(end - 100_000), 100_000);
    let second = limiter.reserve_key("k", 1, wait).await.unwrap();
    let third = limiter.reserve_key("k", 1, wait).await.unwrap();
    assert_eq!(second.held(), [Some([end, end + 100_000])]);
    assert_eq!(third.held(), [Some([end + 100_000, end + 200_000])]);
    assert!(
        third.delay() > Duration::from_millis(100) && third.delay() <= Duration::from_millis(200)
    );
    // A check waits behind the queue: refused.
    assert!(matches!(
        limiter.check_key("k").await,
        Err(Error::Denied(_))
    ));
    // The first has others behind it; the last two go back in reverse order.
    assert!(!first.cancel().await.unwrap());
    assert!(third.cancel().await.unwrap());
    assert!(second.cancel().await.unwrap());
    assert_eq!(
        server.stored(&limiter.key("k")),
        Some(format!("{end}@{}", params(&limiter.algorithm())))
    );
    // A wait of zero is a check; too short a wait is refused with the time beyond it.
    let refused = limiter
        .reserve_key("k", 1, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::Denied(d) if d.retry_after() <= Duration::from_millis(100)));
}

#[tokio::test]
async fn a_dropped_wait_gives_its_place_back() {
    let server = Server::start();
    let limiter = server.limiter(Quota::per_second(1).unwrap()).await;
    limiter.check_key("k").await.unwrap();
    let after_check = server.stored(&limiter.key("k")).unwrap();
    // The turn is a second away: give up after 20 ms.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(20),
        limiter.until_key_ready("k", 1, Duration::from_secs(5)),
    )
    .await;
    assert!(gave_up.is_err());
    // The cancel runs on a task of its own: wait for the key to be as the check left it.
    for _ in 0..100 {
        if server.stored(&limiter.key("k")).as_ref() == Some(&after_check) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the dropped wait's place was not given back");
}

#[tokio::test]
async fn reservations_need_gcra_and_a_redis_that_answers() {
    let mut server = Server::start();
    let window = RedisSlidingWindow::new(&Quota::per_minute(10).unwrap()).unwrap();
    let windows = server.limiter_of("w:", window).await;
    assert!(matches!(
        windows.reserve_key("k", 1, Duration::ZERO).await,
        Err(Error::Unsupported(_))
    ));
    let gcra = RedisGcra::new(&Quota::per_second(1).unwrap()).unwrap();
    let direct = RedisRateLimiter::builder(server.connection().await, "one", gcra)
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let allowing = RedisKeyedRateLimiter::builder(server.connection().await, "a:", gcra)
        .fallback(Fallback::Allow)
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    direct.until_ready(1, Duration::from_secs(2)).await.unwrap();
    // Redis down: the fallback decides as for a check: Deny (the default) refuses, Allow
    // admits at once, recorded nowhere.
    server.stop();
    assert!(matches!(
        direct.reserve(1, Duration::from_secs(1)).await,
        Err(Error::Denied(_))
    ));
    let turn = allowing.reserve_key("k", 1, Duration::ZERO).await.unwrap();
    assert_eq!(turn.delay(), Duration::ZERO);
    assert!(
        !turn.cancel().await.unwrap(),
        "decided by the fallback: nothing to give back"
    );
    assert_eq!(direct.stats().unavailable, 1);
    assert_eq!(allowing.stats().unavailable, 1);
}

/// Reservations over two GCRA layers (a user's key, a direct limiter) in one script, against
/// `RedisGcra::reserve` on each, all or nothing: with injected times, random costs and waits, and
/// the user's layer sometimes listed twice (two turns there); the same outcome, the same turns,
/// the same stored states; cancels give back in reverse order.
#[test]
fn reservations_over_layers_are_all_or_nothing() {
    let server = Server::start();
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 100,
        ..ProptestConfig::default()
    });
    let steps = prop::collection::vec(
        (
            0u64..800_000,
            0u8..2,
            0u64..4,
            0u64..2_000_000,
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.2),
        ),
        1..40,
    );
    let start = 1_700_000_000_000_000u64..1_900_000_000_000_000;
    let result = runner.run(
        &(gcra(), gcra(), start, steps),
        |(user_gcra, global_gcra, start, steps)| {
            let prefix = fresh_key();
            let (users, global) = rt.block_on(async {
                let conn = server.connection().await;
                (
                    RedisKeyedRateLimiter::builder(conn.clone(), format!("{prefix}:u:"), user_gcra)
                        .build()
                        .unwrap(),
                    RedisRateLimiter::builder(conn, format!("{prefix}:g"), global_gcra)
                        .build()
                        .unwrap(),
                )
            });
            let mut states: std::collections::HashMap<Vec<u8>, u64> = Default::default();
            let mut now = start;
            for (i, (step, user, cost, max_wait, twice, cancel)) in steps.into_iter().enumerate() {
                now += step;
                let user_key = users.key(user.to_string());
                let global_key = format!("{prefix}:g").into_bytes();
                let mut layers = vec![users.layer(user.to_string()), global.layer()];
                let mut model: Vec<(&RedisGcra, Vec<u8>)> = vec![
                    (&user_gcra, user_key.clone()),
                    (&global_gcra, global_key.clone()),
                ];
                if twice {
                    layers.push(users.layer(user.to_string()));
                    model.push((&user_gcra, user_key.clone()));
                }
                let got = rt.block_on(tollgate::redis::reserve_all_at(
                    &layers,
                    cost,
                    Duration::from_micros(max_wait),
                    now,
                ));
                if cost > user_gcra.burst() || cost > global_gcra.burst() {
                    prop_assert!(
                        matches!(got, Err(Error::InsufficientCapacity(_))),
                        "step {}",
                        i
                    );
                    continue;
                }
                // Each alone: the longest excess; then in order on what the ones before write.
                let excess =
                    |gcra: &RedisGcra, state: u64| gcra.reserve(state, now, cost, max_wait).0.err();
                let alone = model
                    .iter()
                    .filter_map(|(g, k)| excess(g, *states.get(k).unwrap_or(&0)))
                    .max();
                let mut next = states.clone();
                let mut turns = Vec::new();
                let mut refused = alone;
                if refused.is_none() {
                    for (g, k) in &model {
                        let state = *next.get(k).unwrap_or(&0);
                        match g.reserve(state, now, cost, max_wait) {
                            (Ok(_), after) => {
                                turns.push((after != state).then_some([state, after]));
                                next.insert(k.clone(), after);
                            }
                            (Err(retry), _) => {
                                refused = Some(retry);
                                break;
                            }
                        }
                    }
                }
                match (got, refused) {
                    (Ok(turn), None) => {
                        prop_assert_eq!(turn.held(), turns, "step {}", i);
                        states = next;
                        if cancel {
                            // In reverse order, each given back while it is its key's last.
                            let mut all = true;
                            for ((_, k), held) in model.iter().zip(turn.held()).rev() {
                                if let Some([before, after]) = held {
                                    let (given, back) =
                                        user_gcra.cancel(states[k], [before, after]);
                                    all &= given;
                                    states.insert(k.clone(), back);
                                }
                            }
                            let any = turn.held().iter().any(Option::is_some);
                            prop_assert_eq!(
                                rt.block_on(turn.cancel_at(now)).unwrap(),
                                any && all,
                                "step {}",
                                i
                            );
                        }
                    }
                    (Err(Error::Denied(denied)), Some(retry)) => {
                        prop_assert_eq!(
                            denied.retry_after(),
                            Duration::from_micros(retry),
                            "step {}",
                            i
                        );
                    }
                    (got, want) => prop_assert!(
                        false,
                        "step {}: {:?} where the model says {:?}",
                        i,
                        got,
                        want
                    ),
                }
                for (key, gcra) in [(&user_key, user_gcra), (&global_key, global_gcra)] {
                    let want = (states.get(key).filter(|&&s| s != 0))
                        .map(|s| format!("{s}@{}", params(&gcra.into())));
                    prop_assert_eq!(server.stored(key), want, "step {}", i);
                }
            }
            Ok(())
        },
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
