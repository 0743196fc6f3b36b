//! Live reconfiguration on Redis, against a real redis-server started by the test.
//!
//! First the scripts against the crate's conversion: keys written by one limiter and decided on
//! by another that shares them under another quota (two servers mid-rollout, or one limiter
//! before and after `set_quota`), at injected times, decide and store exactly as the crate's
//! `carry_over` then `decide` in the scripts' units, back and forth. Then `set_quota` itself:
//! tightening, loosening, a reservation made before the change, a quota the algorithm cannot
//! take, and a value written before values named their parameters.

mod server;

use std::time::Duration;

use proptest::prelude::*;
use server::{carry, decide, fresh, fresh_key, params, runtime, stored, Server};
use tollgate::redis::{
    RedisAlgorithm, RedisFixedWindow, RedisGcra, RedisRateLimiter, RedisSlidingWindow,
};
use tollgate::{BuildError, Quota, QuotaError};

/// Two quotas of one algorithm: GCRA, or a window counter, sliding or fixed.
fn pair() -> impl Strategy<Value = (RedisAlgorithm, RedisAlgorithm)> {
    let quota = (1u64..200, 1u64..5_000, 1u64..200).prop_filter_map("a quota", |(n, ms, b)| {
        Quota::new(n, Duration::from_millis(ms))
            .ok()?
            .with_burst(b)
            .ok()
    });
    (0u8..3, quota.clone(), quota).prop_map(|(kind, a, b)| {
        let make = |q: &Quota| -> RedisAlgorithm {
            match kind {
                0 => RedisGcra::new(q).unwrap().into(),
                1 => RedisSlidingWindow::new(q).unwrap().into(),
                _ => RedisFixedWindow::new(q).unwrap().into(),
            }
        };
        (make(&a), make(&b))
    })
}

/// Requests: which of the two limiters decides, the time moved (µs), the cost.
fn requests() -> impl Strategy<Value = Vec<(bool, u64, u64)>> {
    prop::collection::vec((prop::bool::ANY, 0u64..400_000, 0u64..12), 1..30)
}

/// Two limiters on the same keys with two quotas decide as the crate's transitions, each
/// converting what the other wrote, and store the converted state even when they refuse.
#[test]
fn the_scripts_convert_as_the_crate_does() {
    let server = Server::start();
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    let result = runner.run(&(pair(), requests()), |((a, b), requests)| {
        let prefix = format!("{}:", fresh_key());
        let (first, second) = rt.block_on(async {
            (
                server.limiter_of(&prefix, a).await,
                server.limiter_of(&prefix, b).await,
            )
        });
        let key = "k";
        let (mut now, mut state, mut owner) = (1_800_000_000_000_000u64, fresh(&a), a);
        for (i, &(second_decides, step, cost)) in requests.iter().enumerate() {
            now += step;
            let (limiter, algorithm) = if second_decides {
                (&second, b)
            } else {
                (&first, a)
            };
            let cost = cost.min(algorithm.capacity());
            if owner != algorithm && state != fresh(&owner) {
                state = carry(&owner, &algorithm, &state, now);
            }
            owner = algorithm;
            let got = rt.block_on(limiter.decide_key_at(key, cost, now)).unwrap();
            let (want, next) = decide(&algorithm, &state, now, cost);
            prop_assert_eq!(got, want, "step {}: cost {} at {}", i, cost, now);
            state = next;
            prop_assert_eq!(
                server.stored(&limiter.key(key)),
                stored(&algorithm, &state),
                "step {}",
                i
            );
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[test]
fn set_quota_tightens_at_once_and_loosening_grants_no_burst() {
    let server = Server::start();
    let rt = runtime();
    rt.block_on(async {
        let limiter = server.limiter(Quota::per_second(100).unwrap()).await;
        let clone = limiter.clone();
        let (key, now) = (fresh_key(), 1_800_000_000_000_000);
        assert!(limiter
            .decide_key_at(&key, 40, now)
            .await
            .unwrap()
            .is_allowed());
        limiter.set_quota(Quota::per_second(10).unwrap()).unwrap();
        // The clones share the quota; 60 left, capped at the new burst.
        assert_eq!(clone.algorithm().capacity(), 10);
        assert_eq!(
            clone.peek_key_at(&key, 0, now).await.unwrap().remaining(),
            10
        );
        assert!(clone
            .decide_key_at(&key, 10, now)
            .await
            .unwrap()
            .is_allowed());
        assert!(!clone
            .decide_key_at(&key, 1, now)
            .await
            .unwrap()
            .is_allowed());
        // Back to 100 per second: nothing left stays nothing; the new rate refills it.
        limiter.set_quota(Quota::per_second(100).unwrap()).unwrap();
        let at = |us| limiter.peek_key_at(&key, 0, now + us);
        assert_eq!(at(0).await.unwrap().remaining(), 0);
        assert_eq!(at(10_000).await.unwrap().remaining(), 1);
        assert_eq!(at(1_000_000).await.unwrap().remaining(), 100);
    });
}

#[test]
fn a_direct_limiter_changes_its_quota() {
    let server = Server::start();
    let rt = runtime();
    rt.block_on(async {
        let conn = server.connection().await;
        let limiter =
            RedisRateLimiter::gcra(conn, fresh_key(), Quota::per_hour(5).unwrap()).unwrap();
        limiter.check_n(5).await.unwrap();
        limiter.set_quota(Quota::per_hour(2).unwrap()).unwrap();
        assert_eq!(limiter.algorithm().capacity(), 2);
        let peek = limiter.peek_n(1).await.unwrap();
        assert!(!peek.is_allowed());
        assert_eq!(peek.remaining(), 0);
        // Nothing was left: the first token comes back after the new interval, 30 minutes.
        assert!(peek.retry_after() > Duration::from_secs(29 * 60));
        assert!(peek.retry_after() <= Duration::from_secs(30 * 60));
    });
}

#[test]
fn a_refusal_writes_the_converted_state() {
    // Read under the new quota and refused, the key still holds its state under the new one:
    // the new rate refills it from the first time it was read, not the old one.
    let server = Server::start();
    let rt = runtime();
    rt.block_on(async {
        let prefix = format!("{}:", fresh_key());
        let fast = RedisGcra::new(&Quota::per_second(10).unwrap()).unwrap();
        let slow = RedisGcra::new(&Quota::per_minute(10).unwrap()).unwrap();
        let (a, b) = (
            server.limiter_of(&prefix, fast).await,
            server.limiter_of(&prefix, slow).await,
        );
        let now = 1_800_000_000_000_000u64;
        assert!(a.decide_key_at("k", 10, now).await.unwrap().is_allowed());
        assert!(!b.decide_key_at("k", 1, now).await.unwrap().is_allowed());
        let converted = fast.carry_over(now + 1_000_000, now, &slow);
        assert_eq!(
            server.stored(&b.key("k")),
            Some(format!("{converted}@{}", params(&slow.into())))
        );
        // Half a second later the old rate would have refilled 5; the new one, none.
        let half = b.peek_key_at("k", 0, now + 500_000).await.unwrap();
        assert_eq!(half.remaining(), 0);
    });
}

#[test]
fn a_reservation_made_before_the_change_gives_nothing_back() {
    let server = Server::start();
    let rt = runtime();
    rt.block_on(async {
        let limiter = server.limiter(Quota::per_second(4).unwrap()).await;
        let key = fresh_key();
        let now = 1_800_000_000_000_000;
        let before = limiter
            .reserve_key_at(&key, 1, Duration::ZERO, now)
            .await
            .unwrap();
        let kept = limiter
            .reserve_key_at(&key, 1, Duration::ZERO, now)
            .await
            .unwrap();
        limiter.set_quota(Quota::per_minute(4).unwrap()).unwrap();
        assert_eq!(
            limiter.peek_key_at(&key, 0, now).await.unwrap().remaining(),
            2
        );
        assert!(!kept.cancel_at(now).await.unwrap());
        assert!(!before.cancel_at(now).await.unwrap());
        assert_eq!(
            limiter.peek_key_at(&key, 0, now).await.unwrap().remaining(),
            2
        );
        // One made after the change gives back as before.
        let after = limiter
            .reserve_key_at(&key, 1, Duration::ZERO, now)
            .await
            .unwrap();
        assert!(after.cancel_at(now).await.unwrap());
        assert_eq!(
            limiter.peek_key_at(&key, 0, now).await.unwrap().remaining(),
            2
        );
    });
}

#[test]
fn a_quota_the_algorithm_cannot_take_is_refused() {
    let server = Server::start();
    let rt = runtime();
    rt.block_on(async {
        let window = RedisSlidingWindow::new(&Quota::per_second(10).unwrap()).unwrap();
        let limiter = server.limiter_of("sw:", window).await;
        let too_many = Quota::new(1 << 30, Duration::from_secs(86_400)).unwrap();
        assert!(matches!(
            limiter.set_quota(too_many),
            Err(BuildError::Quota(QuotaError::WindowLimitTooLarge { .. }))
        ));
        assert_eq!(limiter.algorithm(), RedisAlgorithm::from(window));
    });
}

#[test]
fn a_value_without_parameters_is_read_as_the_readers() {
    // Written before values named their parameters: taken as written under the reader's quota.
    let server = Server::start();
    let rt = runtime();
    rt.block_on(async {
        let limiter = server.limiter(Quota::per_second(10).unwrap()).await;
        let now = 1_800_000_000_000_000u64;
        let key = limiter.key("old");
        server.command(&[
            "SET",
            std::str::from_utf8(&key).unwrap(),
            &(now + 500_000).to_string(),
        ]);
        assert_eq!(
            limiter
                .peek_key_at("old", 0, now)
                .await
                .unwrap()
                .remaining(),
            5
        );
    });
}
