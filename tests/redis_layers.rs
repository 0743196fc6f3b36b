//! All-or-nothing checks on Redis against a real `redis-server`, which each test starts on a
//! free loopback port in a temporary directory and stops by its process id.
//!
//! The script is replayed with injected times against the same protocol computed from the
//! crate's transitions in the scripts' units (`RedisGcra::decide`, `RedisSlidingWindow::decide`,
//! `RedisFixedWindow::decide`): three layers of the three algorithms (a user's key, a tenant's,
//! and a direct limiter's one state), sometimes with the user's layer listed twice; the same
//! decision, the same layer named, and the same stored states after every step. Then the server's
//! own clock, and the edges.

mod server;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use proptest::prelude::*;
use server::{decide, fresh, runtime, stored, Server};
use tollgate::redis::{
    check_all, decide_all, decide_all_at, Error, RedisAlgorithm, RedisFixedWindow, RedisGcra,
    RedisKeyedRateLimiter, RedisRateLimiter, RedisSlidingWindow,
};
use tollgate::{Decision, Quota};

fn fresh_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("p{}:", NEXT.fetch_add(1, Relaxed))
}

/// A decision's fields: allowed, remaining, retry after, reset after, limit.
type Fields = (bool, u64, Duration, Duration, u64);

fn fields(d: &Decision) -> Fields {
    (
        d.is_allowed(),
        d.remaining(),
        d.retry_after(),
        d.reset_after(),
        d.limit(),
    )
}

/// The protocol the script runs, on model states: each layer alone (the refusal with the longest
/// wait, the first on a tie, reported beside its state as it stands), then each in order on the
/// states the ones before it leave; the layer that decided and its decision, and the new states
/// if admitted.
fn model(
    layers: &[(&RedisAlgorithm, &str)],
    states: &HashMap<String, Vec<u64>>,
    now: u64,
    cost: u64,
) -> (usize, Fields, Option<HashMap<String, Vec<u64>>>) {
    let mut refused: Option<(usize, Fields)> = None;
    for (i, &(algorithm, key)) in layers.iter().enumerate() {
        let s = states.get(key).cloned().unwrap_or_else(|| fresh(algorithm));
        let (request, _) = decide(algorithm, &s, now, cost);
        let (stands, _) = decide(algorithm, &s, now, 0);
        if !request.is_allowed() && refused.map_or(true, |(_, r)| request.retry_after() > r.2) {
            let reported = (
                false,
                stands.remaining(),
                request.retry_after(),
                stands.reset_after(),
                stands.limit(),
            );
            refused = Some((i, reported));
        }
    }
    if let Some((layer, decision)) = refused {
        return (layer, decision, None);
    }
    let mut next = states.clone();
    let mut decisions = Vec::new();
    for (i, &(algorithm, key)) in layers.iter().enumerate() {
        let s = next.get(key).cloned().unwrap_or_else(|| fresh(algorithm));
        let (decision, after) = decide(algorithm, &s, now, cost);
        if !decision.is_allowed() {
            return (i, fields(&decision), None);
        }
        next.insert(key.to_string(), after);
        decisions.push(decision);
    }
    let (layer, decision) = decisions
        .iter()
        .enumerate()
        .min_by_key(|(_, d)| d.remaining())
        .unwrap();
    (layer, fields(decision), Some(next))
}

#[test]
fn the_layered_script_is_the_protocol_over_the_transitions() {
    let server = Server::start();
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 150,
        ..ProptestConfig::default()
    });
    let quotas = (
        (1u64..20, 1u64..3_000, 1u64..10),
        (1u64..20, 1u64..5_000),
        (1u64..40, 1u64..5_000),
    );
    let steps = prop::collection::vec(
        (0u64..800_000, 0u8..3, 0u64..6, prop::bool::weighted(0.3)),
        1..40,
    );
    let start = 1_700_000_000_000_000u64..1_900_000_000_000_000;
    let result = runner.run(&(quotas, start, steps), |((g, s, f), start, steps)| {
        let gcra = RedisGcra::new(
            &Quota::new(g.0, Duration::from_millis(g.1))
                .unwrap()
                .with_burst(g.2)
                .unwrap(),
        )
        .unwrap();
        let sliding =
            RedisSlidingWindow::new(&Quota::new(s.0, Duration::from_millis(s.1)).unwrap()).unwrap();
        let fixed =
            RedisFixedWindow::new(&Quota::new(f.0, Duration::from_millis(f.1)).unwrap()).unwrap();
        let prefix = fresh_prefix();
        let (users, tenants, global) = rt.block_on(async {
            let conn = server.connection().await;
            (
                RedisKeyedRateLimiter::builder(conn.clone(), format!("{prefix}u:"), gcra)
                    .build()
                    .unwrap(),
                RedisKeyedRateLimiter::builder(conn.clone(), format!("{prefix}t:"), sliding)
                    .build()
                    .unwrap(),
                RedisRateLimiter::builder(conn, format!("{prefix}global"), fixed)
                    .build()
                    .unwrap(),
            )
        });
        let algorithms = [RedisAlgorithm::from(gcra), sliding.into(), fixed.into()];
        let mut states: HashMap<String, Vec<u64>> = HashMap::new();
        let mut now = start;
        for (i, (step, user, cost, twice)) in steps.into_iter().enumerate() {
            now += step;
            let (user_key, tenant_key) = (format!("{user}"), format!("{}", user % 2));
            let names = [
                String::from_utf8(users.key(&user_key)).unwrap(),
                String::from_utf8(tenants.key(&tenant_key)).unwrap(),
                format!("{prefix}global"),
            ];
            let mut layers = vec![
                users.layer(&user_key),
                tenants.layer(&tenant_key),
                global.layer(),
            ];
            let mut model_layers = vec![
                (&algorithms[0], names[0].as_str()),
                (&algorithms[1], names[1].as_str()),
                (&algorithms[2], names[2].as_str()),
            ];
            if twice {
                layers.push(users.layer(&user_key));
                model_layers.push((&algorithms[0], names[0].as_str()));
            }
            let got = rt.block_on(decide_all_at(&layers, cost, now));
            if cost > gcra.burst() || cost > sliding.limit() || cost > fixed.limit() {
                prop_assert!(
                    matches!(got, Err(Error::InsufficientCapacity(_))),
                    "step {}: {:?}",
                    i,
                    got
                );
                continue;
            }
            let got = got.unwrap();
            let (layer, want, next) = model(&model_layers, &states, now, cost);
            prop_assert_eq!(
                (got.layer(), fields(got.decision())),
                (layer, want),
                "step {} at {}",
                i,
                now
            );
            if let Some(next) = next {
                states = next;
            }
            for (name, algorithm) in names.iter().zip(&algorithms) {
                let state = states.get(name).cloned();
                prop_assert_eq!(
                    server.stored(name.as_bytes()),
                    state.and_then(|s| stored(algorithm, &s)),
                    "step {}: {}",
                    i,
                    name
                );
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[tokio::test]
async fn a_refused_request_takes_nothing_from_any_layer_on_the_server_clock() {
    let server = Server::start();
    let conn = server.connection().await;
    let per_user =
        RedisKeyedRateLimiter::gcra(conn.clone(), "u:", Quota::per_second(10).unwrap()).unwrap();
    let global =
        RedisRateLimiter::sliding_window(conn, "g", Quota::per_minute(3).unwrap()).unwrap();
    for user in ["a", "b", "c"] {
        check_all(&[per_user.layer(user), global.layer()], 1)
            .await
            .unwrap();
    }
    for user in ["a", "d"] {
        let refused = decide_all(&[per_user.layer(user), global.layer()], 1)
            .await
            .unwrap();
        assert!(!refused.is_allowed());
        assert_eq!(refused.layer(), 1);
        assert!(matches!(
            check_all(&[per_user.layer(user), global.layer()], 1).await,
            Err(Error::Denied(_))
        ));
    }
    assert_eq!(per_user.peek_key_n("a", 0).await.unwrap().remaining(), 9);
    assert_eq!(
        server.stored(b"u:d"),
        None,
        "a refused new key is not written"
    );
    // Admitted, the decision is the layer with the least remaining: the global one.
    let more = RedisKeyedRateLimiter::gcra(
        server.connection().await,
        "m:",
        Quota::per_second(2).unwrap(),
    )
    .unwrap();
    let decision = decide_all(&[more.layer("x"), per_user.layer("e")], 1)
        .await
        .unwrap();
    assert!(decision.is_allowed());
    assert_eq!((decision.layer(), decision.decision().remaining()), (0, 1));
}
