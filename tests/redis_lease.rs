//! The leased limiter against a real `redis-server`: the lease script replayed against
//! [`RedisGcra::lease`], the budget conserved across processes, the overshoot within its bound,
//! leftovers given back, and Redis going away.

mod server;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use server::{params, runtime, Server};
use tollgate::redis::{
    Error, Fallback, Lease, LeasedKeyedRateLimiter, RedisGcra, RedisKeyedRateLimiter,
};
use tollgate::{BuildError, Quota};

async fn leased(server: &Server, quota: Quota, lease: Lease) -> LeasedKeyedRateLimiter {
    let gcra = RedisGcra::new(&quota).unwrap();
    LeasedKeyedRateLimiter::builder(server.connection().await, "rl:", gcra, lease)
        .build()
        .unwrap()
}

/// The lease script and `RedisGcra::lease` grant alike, give back alike and store alike, step
/// after step: random quotas, times (forwards and backwards), wants, needs, and give-backs of
/// the last lease's rest with its schedule, or with a stale one.
#[test]
fn the_lease_script_is_the_rust_model() {
    let server = Server::start();
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    });
    let quota = (1u64..2_000, 1u64..100_000, 1u64..300).prop_filter_map(
        "representable",
        |(limit, period_ms, burst)| {
            let quota = Quota::new(limit, Duration::from_millis(period_ms)).ok()?;
            quota.with_burst(burst).ok()
        },
    );
    let steps = prop::collection::vec(
        (-50i64..300, 0u64..4, 0u64..4, 0u8..4, prop::bool::ANY),
        1..30,
    );
    let start = prop_oneof![
        1_700_000_000_000_000u64..1_900_000_000_000_000,
        (1u64 << 52) - (1 << 40)..(1u64 << 52) - (1 << 38),
    ];
    let (returned, stale) = (AtomicU64::new(0), AtomicU64::new(0));
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let result = runner.run(&(quota, start, steps), |(quota, start, steps)| {
        let limiter = rt.block_on(leased(&server, quota, Lease::new(1)));
        let gcra = *limiter.algorithm();
        let key = format!("k{}", NEXT.fetch_add(1, Relaxed));
        let unit = gcra.emission_interval().as_micros() as i64 / 2 + 1;
        let burst = gcra.burst();
        let (mut now, mut state, mut last) = (start, 0u64, (0u64, 0u64));
        for (i, &(step, want, need, back, right)) in steps.iter().enumerate() {
            now = now.saturating_add_signed(step * unit).min((1 << 52) - 1);
            let want = [0, 1, burst / 2 + 1, burst][want as usize];
            let need = [0, 1, want / 2, want][need as usize].min(want);
            let give_back = [0, 1, last.1, burst][back as usize].min(last.1.max(1));
            let schedule = if right { last.0 } else { last.0 + 1 };
            let args = [want, need, give_back, schedule];
            let got = rt
                .block_on(limiter.lease_at(&key, args, now))
                .unwrap()
                .unwrap();
            let (want_grant, next) = gcra.lease(state, now, want, need, give_back, schedule);
            prop_assert_eq!(
                got,
                want_grant,
                "step {}: {:?} at {} on {}",
                i,
                args,
                now,
                state
            );
            state = next;
            if got.granted > 0 {
                last = (got.schedule, got.granted);
            }
            returned.fetch_add(u64::from(got.returned > 0), Relaxed);
            stale.fetch_add(u64::from(give_back > 0 && got.returned == 0), Relaxed);
            let stored = server.stored(format!("rl:{key}").as_bytes());
            let expected = (state > 0).then(|| format!("{state}@{}", params(&gcra.into())));
            prop_assert_eq!(stored, expected, "step {}", i);
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // Both kinds of give-back were reached: undone, and refused as stale.
    assert!(returned.load(Relaxed) > 0 && stale.load(Relaxed) > 0);
}

/// Four processes' limiters, each on its own connection, hammer one key of 1 000 a day (no
/// budget comes back during the test): what they admitted and what they still hold add up to
/// exactly 1 000, and once they have spent what they hold, exactly 1 000 were admitted.
#[test]
fn leases_conserve_the_budget() {
    let server = Server::start();
    let rt = runtime();
    let quota = Quota::per_day(1_000).unwrap();
    let limiters: Vec<LeasedKeyedRateLimiter> = (0..4)
        .map(|_| rt.block_on(leased(&server, quota, Lease::new(25))))
        .collect();
    let admitted = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let mut tasks = Vec::new();
        for limiter in &limiters {
            for _ in 0..8 {
                let (limiter, admitted) = (limiter.clone(), Arc::clone(&admitted));
                tasks.push(tokio::spawn(async move {
                    // Until this task has been denied 50 times in a row.
                    let mut denied = 0;
                    while denied < 50 {
                        match limiter.check_key("hot").await {
                            Ok(()) => {
                                admitted.fetch_add(1, Relaxed);
                                denied = 0;
                            }
                            Err(Error::Denied(_)) => denied += 1,
                            Err(other) => panic!("{other}"),
                        }
                    }
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    let held: u64 = limiters.iter().map(|l| l.held("hot")).sum();
    assert_eq!(admitted.load(Relaxed) + held, 1_000, "held {held}");
    for limiter in &limiters {
        let stats = limiter.stats();
        assert_eq!((stats.dropped, stats.returned), (0, 0), "{stats:?}");
        // Spend what is held: then everything was admitted.
        while rt.block_on(limiter.check_key("hot")).is_ok() {
            admitted.fetch_add(1, Relaxed);
        }
    }
    assert_eq!(admitted.load(Relaxed), 1_000);
}

/// With budget coming back at 1 000 a second (bursts of 100), four processes with leases of
/// 20 admit, over any run, at most what the quota allows plus the documented overshoot:
/// `burst + rate × elapsed + N × 1.5 × size`.
#[test]
fn the_overshoot_is_within_its_bound() {
    let server = Server::start();
    let rt = runtime();
    let quota = Quota::per_second(1_000).unwrap().with_burst(100).unwrap();
    let (size, processes) = (20u64, 4u64);
    let limiters: Vec<LeasedKeyedRateLimiter> = (0..processes)
        .map(|_| rt.block_on(leased(&server, quota, Lease::new(size))))
        .collect();
    let admitted = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for limiter in &limiters {
            for _ in 0..4 {
                let (limiter, admitted) = (limiter.clone(), Arc::clone(&admitted));
                tasks.push(tokio::spawn(async move {
                    while start.elapsed() < Duration::from_millis(1_500) {
                        if limiter.check_key("hot").await.is_ok() {
                            admitted.fetch_add(1, Relaxed);
                        }
                    }
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    let elapsed = start.elapsed();
    let allowed = 100 + (elapsed.as_micros() as u64).div_ceil(1_000);
    let bound = allowed + processes * size * 3 / 2;
    let admitted = admitted.load(Relaxed);
    assert!(admitted <= bound, "{admitted} admitted, bound {bound}");
    // Every admission was paid for: by budget a lease took from Redis (less what went back), or
    // by a decision made on Redis.
    let paid: u64 = limiters
        .iter()
        .map(|l| l.stats())
        .map(|s| s.granted - s.returned + s.direct)
        .sum();
    assert!(admitted <= paid, "{admitted} admitted, {paid} paid for");
}

/// A lease whose lifetime has ended gives its rest back, exactly, when nothing was granted on
/// the key since; and `release` gives back what is held when a process stops.
#[tokio::test]
async fn leftovers_go_back_to_redis() {
    let server = Server::start();
    let quota = Quota::per_hour(100).unwrap();
    let lease = Lease::new(10).lifetime(Duration::from_millis(50));
    let limiter = leased(&server, quota, lease).await;
    let conn = server.connection().await;
    let plain = RedisKeyedRateLimiter::gcra(conn, "rl:", quota).unwrap();
    limiter.check_key("k").await.unwrap();
    assert_eq!(limiter.held("k"), 9);
    assert_eq!(plain.peek_key_n("k", 1).await.unwrap().remaining(), 90);
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(limiter.held("k"), 0, "expired");
    // The next request gives back the 9 and takes a new lease of 10: 1 + 10 taken in all.
    limiter.check_key("k").await.unwrap();
    let stats = limiter.stats();
    assert_eq!((stats.returned, stats.dropped, stats.granted), (9, 0, 20));
    assert_eq!(plain.peek_key_n("k", 1).await.unwrap().remaining(), 89);
    // Another process's decision since: this lease's rest can no longer be undone exactly.
    plain.check_key("k").await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    limiter.check_key("k").await.unwrap();
    let stats = limiter.stats();
    assert_eq!((stats.returned, stats.dropped, stats.granted), (9, 9, 30));
    // 11, the other process's 1, and a lease of 10.
    assert_eq!(plain.peek_key_n("k", 1).await.unwrap().remaining(), 78);
    // A process that stops gives back what it holds.
    assert_eq!(limiter.release().await.unwrap(), 9);
    assert_eq!(limiter.held("k"), 0);
    assert_eq!(plain.peek_key_n("k", 1).await.unwrap().remaining(), 87);
}

/// A spend that leaves less than half a lease renews it in the background: the requests after
/// it find the next lease there.
#[tokio::test]
async fn a_lease_is_renewed_ahead_of_need() {
    let server = Server::start();
    let limiter = leased(&server, Quota::per_hour(100).unwrap(), Lease::new(10)).await;
    for held in (5..10).rev() {
        limiter.check_key("k").await.unwrap();
        assert_eq!(limiter.held("k"), held);
    }
    assert_eq!(limiter.stats().leases, 1);
    // The sixth leaves 4, below half a lease: a renewal of 10 starts.
    limiter.check_key("k").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while limiter.held("k") != 14 {
        assert!(
            Instant::now() < deadline,
            "no renewal: {} held",
            limiter.held("k")
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = limiter.stats();
    assert_eq!((stats.leases, stats.granted, stats.direct), (2, 20, 0));
}

/// A key whose budget Redis has run out of is denied locally until Redis said it would have
/// more, without a round trip per request.
#[tokio::test]
async fn a_drained_key_is_denied_without_asking() {
    let server = Server::start();
    let limiter = leased(&server, Quota::per_hour(10).unwrap(), Lease::new(4)).await;
    for _ in 0..10 {
        limiter.check_key("k").await.unwrap();
    }
    // Renewals ahead of need run in the background: let them finish.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let Err(Error::Denied(denied)) = limiter.check_key("k").await else {
        panic!("the eleventh request of the hour was not denied");
    };
    // One more every 6 minutes.
    assert!(denied.retry_after() > Duration::from_secs(5 * 60));
    let leases = limiter.stats().leases;
    for _ in 0..100 {
        assert!(limiter.check_key("k").await.is_err());
    }
    assert_eq!(limiter.stats().leases, leases);
}

/// While Redis is down, what a process holds is still spent; beyond it the fallback decides.
#[tokio::test]
async fn the_fallback_decides_beyond_what_is_held() {
    let mut server = Server::start();
    let gcra = RedisGcra::new(&Quota::per_hour(100).unwrap()).unwrap();
    let limiter =
        LeasedKeyedRateLimiter::builder(server.connection().await, "rl:", gcra, Lease::new(10))
            .fallback(Fallback::Deny)
            .build()
            .unwrap();
    limiter.check_key("k").await.unwrap();
    // Let a renewal ahead of need finish, if one was started.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = limiter.held("k");
    server.stop();
    let mut admitted = 0;
    for _ in 0..30 {
        admitted += u64::from(limiter.check_key("k").await.is_ok());
    }
    assert_eq!(admitted, held);
    assert!(limiter.stats().redis.unavailable > 0);
}

/// A lease of 0, or of more than the burst, is refused when the limiter is built.
#[tokio::test]
async fn lease_sizes_are_checked() {
    let server = Server::start();
    let gcra = RedisGcra::new(&Quota::per_second(10).unwrap()).unwrap();
    for size in [0, 11] {
        let err = LeasedKeyedRateLimiter::builder(
            server.connection().await,
            "rl:",
            gcra,
            Lease::new(size),
        )
        .build()
        .unwrap_err();
        assert_eq!(err, BuildError::LeaseSize { size, max: 10 });
    }
}
