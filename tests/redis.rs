//! The Redis limiters against a real `redis-server`, which each test starts on a free loopback
//! port in a temporary directory and stops by its process id.
//!
//! The scripts are replayed against the crate's own transitions in the scripts' units
//! ([`RedisGcra::decide`], [`RedisSlidingWindow::decide`], [`RedisFixedWindow::decide`]): random
//! quotas, costs and times (forwards and backwards, up to the end of the exact range), the same
//! decision and the same stored state after every step.

mod server;

use std::cell::Cell;
use std::time::Duration;

use proptest::prelude::*;
use server::{decide, fresh, fresh_key, params, runtime, stored, Cluster, Server};
use tollgate::redis::{
    Error, Fallback, RedisAlgorithm, RedisFixedWindow, RedisGcra, RedisKeyedRateLimiter,
    RedisRateLimiter, RedisSlidingWindow,
};
use tollgate::{BuildError, Decision, Quota};

/// A time in microseconds since the Unix epoch: the start of a replay. Around now, or near the
/// end of the range the scripts compute exactly in (2^52 µs), less the quota's tolerance and the
/// replay's steps.
fn start_time() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 1_700_000_000_000_000u64..1_900_000_000_000_000,
        1 => (1u64 << 52) - (1 << 40)..(1u64 << 52) - (1 << 36),
        1 => 0u64..1_000_000,
    ]
}

/// GCRA for any limit, period and burst whose tolerance a Redis limiter takes, the longest (up
/// to 2^52 µs, 142 years) included.
fn gcra() -> impl Strategy<Value = RedisAlgorithm> {
    let period = prop_oneof![
        Just(Duration::from_micros(1)),
        (1u64..2_000_000).prop_map(Duration::from_micros),
        (1u64..100_000).prop_map(Duration::from_secs),
    ];
    let common = (1u64..5_000, period, 1u64..5_000);
    let longest = (
        1u64..3,
        (1u64 << 49..1 << 51).prop_map(Duration::from_micros),
        1u64..3,
    );
    prop_oneof![4 => common, 1 => longest].prop_filter_map(
        "representable",
        |(limit, period, burst)| {
            let quota = Quota::new(limit, period).ok()?.with_burst(burst).ok()?;
            RedisGcra::new(&quota).ok().map(RedisAlgorithm::from)
        },
    )
}

/// A window counter (sliding or fixed) for any limit and window a Redis limiter takes: windows
/// from a fraction of a millisecond (rounded up to one) to days, limits up to the largest,
/// `2^52 / window`.
fn window() -> impl Strategy<Value = RedisAlgorithm> {
    let period = prop_oneof![
        (1u64..5_000_000).prop_map(Duration::from_micros),
        (1u64..200_000).prop_map(Duration::from_secs),
    ];
    let limit = prop_oneof![3 => 1u64..20, 2 => 1u64..5_000, 1 => Just(u64::MAX)];
    (prop::bool::ANY, limit, period).prop_filter_map("representable", |(sliding, limit, period)| {
        let millis = period.as_nanos().div_ceil(1_000_000) as u64;
        // The largest limit for the window, or one just below it.
        let limit = limit.min((1 << 52) / millis);
        let quota = Quota::new(limit, period).ok()?;
        if sliding {
            RedisSlidingWindow::new(&quota)
                .ok()
                .map(RedisAlgorithm::from)
        } else {
            RedisFixedWindow::new(&quota).ok().map(RedisAlgorithm::from)
        }
    })
}

/// The time a replay's steps are counted in: a third of the interval (GCRA) or of the window,
/// so that keys fill up, go idle, and windows roll over.
fn step_unit(algorithm: &RedisAlgorithm) -> i64 {
    let span = match algorithm {
        RedisAlgorithm::Gcra(gcra) => gcra.emission_interval(),
        RedisAlgorithm::SlidingWindow(window) => window.window(),
        RedisAlgorithm::FixedWindow(window) => window.window(),
        other => unreachable!("{other:?}"),
    };
    span.as_micros() as i64 / 3 + 1
}

/// A step: the time moved (forwards mostly, by up to a few units; sometimes backwards), the
/// cost (0, the capacity and past it included), and whether it is a peek.
fn steps() -> impl Strategy<Value = Vec<(i64, u64, bool)>> {
    prop::collection::vec((-200i64..1_000, 0u64..7, prop::bool::weighted(0.2)), 1..40)
}

/// The scripts and the crate's transitions decide alike and store alike, step after step.
#[test]
fn the_scripts_are_the_rust_transitions() {
    let server = Server::start();
    let rt = runtime();
    let config = ProptestConfig {
        cases: 400,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let algorithm = prop_oneof![gcra(), window()];
    let cases = (algorithm, start_time(), steps());
    // What the cases reached, for each of GCRA, the sliding window and the fixed window:
    // denials, peeks, times past 2^51 µs, and the largest quotas (a tolerance past 2^50 µs, or
    // a limit × window past 2^51 ms).
    let reached: [[Cell<u32>; 4]; 3] = Default::default();
    let result = runner.run(&cases, |(algorithm, start, steps)| {
        let limiter = rt.block_on(server.limiter_of("rl:", algorithm));
        let (kind, large) = match algorithm {
            RedisAlgorithm::Gcra(gcra) => (0, gcra.tolerance() > Duration::from_micros(1 << 50)),
            RedisAlgorithm::SlidingWindow(w) => {
                (1, w.limit() * w.window().as_millis() as u64 > 1 << 51)
            }
            RedisAlgorithm::FixedWindow(w) => {
                (2, w.limit() * w.window().as_millis() as u64 > 1 << 51)
            }
            other => unreachable!("{other:?}"),
        };
        let count =
            |i: usize, yes: bool| reached[kind][i].set(reached[kind][i].get() + u32::from(yes));
        count(3, large);
        let key = fresh_key();
        let capacity = algorithm.capacity();
        let unit = step_unit(&algorithm);
        let (mut now, mut state) = (start, fresh(&algorithm));
        for (i, &(step, cost, peek)) in steps.iter().enumerate() {
            now = now.saturating_add_signed(step * unit).min((1 << 52) - 1);
            let cost = match cost {
                6 => capacity + 1,
                5 => capacity,
                4 => capacity / 2 + 1,
                c => c,
            };
            let got = if peek {
                rt.block_on(limiter.peek_key_at(&key, cost, now))
            } else {
                rt.block_on(limiter.decide_key_at(&key, cost, now))
            };
            if cost > capacity {
                prop_assert!(
                    matches!(got, Err(Error::InsufficientCapacity(_))),
                    "step {}: {:?}",
                    i,
                    got
                );
                continue;
            }
            let got = got.unwrap();
            let (want, next) = decide(&algorithm, &state, now, cost);
            count(0, !want.is_allowed());
            count(1, peek);
            count(2, now > 1 << 51);
            if peek {
                let (fresh, _) = decide(&algorithm, &state, now, 0);
                let fields = |d: Decision| (d.remaining(), d.reset_after(), d.limit());
                prop_assert_eq!(
                    (got.is_allowed(), got.retry_after()),
                    (want.is_allowed(), want.retry_after()),
                    "step {}: peek of {} at {}",
                    i,
                    cost,
                    now
                );
                prop_assert_eq!(fields(got), fields(fresh), "step {}: peek at {}", i, now);
            } else {
                prop_assert_eq!(
                    got,
                    want,
                    "step {}: cost {} at {} on {:?}",
                    i,
                    cost,
                    now,
                    state
                );
                state = next;
            }
            prop_assert_eq!(
                server.stored(&limiter.key(&key)),
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
    let reached = reached.map(|counts| counts.map(Cell::into_inner));
    assert!(reached.iter().flatten().all(|&n| n > 0), "{reached:?}");
}

/// A batch decides as its requests one at a time, in order, at one time: random batches of
/// keys (repeats included) and costs (0 and past the capacity included), against the same
/// requests on single calls under another prefix, decision for decision and state for state.
#[test]
fn a_batch_decides_as_its_requests_one_at_a_time() {
    let server = Server::start();
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    });
    let batches = prop::collection::vec(
        (0u64..1_000, prop::collection::vec((0u8..6, 0u64..5), 0..40)),
        1..8,
    );
    let algorithm = prop_oneof![gcra(), window()];
    let result = runner.run(&(algorithm, batches), |(algorithm, batches)| {
        let batched = rt.block_on(server.limiter_of("rl:", algorithm));
        let single = rt.block_on(server.limiter_of("single:", algorithm));
        let capacity = algorithm.capacity();
        let unit = step_unit(&algorithm) as u64;
        let round = fresh_key();
        let mut now: u64 = 1_800_000_000_000_000;
        for (step, requests) in batches {
            now = now.saturating_add(step * unit).min((1 << 52) - 1);
            let requests: Vec<(String, u64)> = requests
                .into_iter()
                .map(|(key, cost)| {
                    (
                        format!("{round}-{key}"),
                        if cost == 4 { capacity + 1 } else { cost },
                    )
                })
                .collect();
            let got = rt
                .block_on(batched.decide_keys_at(requests.clone(), now))
                .unwrap();
            prop_assert_eq!(got.len(), requests.len());
            for ((key, cost), got) in requests.iter().zip(got) {
                let want = rt.block_on(single.decide_key_at(key, *cost, now));
                match want {
                    Err(Error::InsufficientCapacity(want)) => prop_assert_eq!(got, Err(want)),
                    want => prop_assert_eq!(Ok(got.unwrap()), want.map_err(|e| e.to_string())),
                }
            }
            for (key, _) in &requests {
                prop_assert_eq!(
                    server.stored(&batched.key(key)),
                    server.stored(&single.key(key))
                );
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// A batch of 64 is one round trip, and `check_keys` answers as `check_key` would.
#[tokio::test]
async fn check_keys_answers_as_check_key() {
    let server = Server::start();
    let limiter = server.limiter(Quota::per_hour(2).unwrap()).await;
    // The first call loads the script; count the round trips after it.
    let _ = limiter.peek_key_n("k0", 1).await.unwrap();
    server.command(&["CONFIG", "RESETSTAT"]);
    let keys: Vec<String> = (0..64).map(|i| format!("k{}", i % 32)).collect();
    let answers = limiter.check_keys(&keys).await.unwrap();
    // Each of the 32 keys twice: both admitted (a burst of 2).
    assert!(answers.iter().all(Result::is_ok));
    let answers = limiter.check_keys(&keys[..3]).await.unwrap();
    assert!(answers.iter().all(Result::is_err));
    let stats = limiter.stats();
    assert_eq!((stats.decisions, stats.unavailable), (68, 0));
    assert_eq!(server.command_count("evalsha"), 2);
}

/// The decisions of a Redis limiter are its quota's, on the server's clock: a burst, then a
/// denial that says how long to wait, and the peeks that say so without writing.
#[tokio::test]
async fn a_burst_then_a_wait() {
    let server = Server::start();
    let limiter = server.limiter(Quota::per_hour(3).unwrap()).await;
    assert_eq!(limiter.decide_key("alice", 2).await.unwrap().remaining(), 1);
    let peek = limiter.peek_key_n("alice", 2).await.unwrap();
    assert!(!peek.is_allowed());
    assert_eq!(peek.remaining(), 1);
    limiter.check_key("alice").await.unwrap();
    let Err(Error::Denied(denied)) = limiter.check_key("alice").await else {
        panic!("the fourth request of the hour was not denied");
    };
    // One more every 20 minutes: the first request's share was paid off 20 minutes after it.
    assert!(denied.retry_after() > Duration::from_secs(19 * 60));
    assert!(denied.retry_after() <= Duration::from_secs(20 * 60));
    // Another key has its own limit.
    assert!(limiter.check_key("bob").await.is_ok());
    // A cost that never fits is refused without a round trip.
    assert!(matches!(
        limiter.decide_key("alice", 4).await,
        Err(Error::InsufficientCapacity(e)) if (e.cost(), e.capacity()) == (4, 3)
    ));
}

/// A key expires when its state is fresh again: at the moment of the decision plus its reset
/// time, rounded up to Redis's millisecond, and once that has passed the key is gone and decides
/// as new.
#[tokio::test]
async fn a_key_expires_when_it_is_fresh_again() {
    let server = Server::start();
    // One request per 50 ms.
    let quota = Quota::new(1, Duration::from_millis(50)).unwrap();
    let limiter = server.limiter(quota).await;
    let before = server.time_us();
    let decision = limiter.decide_key("k", 1).await.unwrap();
    let after = server.time_us();
    assert_eq!(decision.reset_after(), Duration::from_millis(50));
    // The script decided at some microsecond between `before` and `after`.
    let expires = |now_us: i64| (now_us + 50_000 + 999) / 1000;
    let at = server.pexpiretime(&limiter.key("k"));
    assert!(
        (expires(before)..=expires(after)).contains(&at),
        "expires at {at} ms, decided between {before} and {after} us"
    );
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(server.pttl(&limiter.key("k")), -2, "gone");
    assert!(limiter.check_key("k").await.is_ok());
    // A peek writes nothing, and a denial neither: the TTL is the admission's.
    let before = server.pttl(&limiter.key("k"));
    assert!(limiter.check_key("k").await.is_err());
    assert!(limiter.peek_key_n("k", 1).await.is_ok());
    assert!(server.pttl(&limiter.key("k")) <= before);
}

/// Two servers' limiters on one Redis share each key's limit: 400 requests for one key from two
/// limiters on two connections, at once, admit exactly the burst of 100 (the hour's refill is
/// 36 s per request, far longer than the test).
#[tokio::test]
async fn two_limiters_share_one_limit() {
    let server = Server::start();
    let quota = Quota::per_hour(100).unwrap();
    let (a, b) = (server.limiter(quota).await, server.limiter(quota).await);
    let direct = RedisRateLimiter::gcra(server.connection().await, "shared", quota).unwrap();
    let mut requests = Vec::new();
    for _ in 0..200 {
        for limiter in [&a, &b] {
            let limiter = limiter.clone();
            requests.push(tokio::spawn(async move { limiter.check_key("x").await }));
        }
    }
    let mut admitted = 0;
    for request in requests {
        admitted += u32::from(request.await.expect("the task").is_ok());
    }
    assert_eq!(admitted, 100);
    // The direct limiter is its own key, with its own 100.
    let mut direct_admitted = 0;
    for _ in 0..150 {
        direct_admitted += u32::from(direct.check().await.is_ok());
    }
    assert_eq!(direct_admitted, 100);
}

/// The script is loaded again when the server has forgotten it (`SCRIPT FLUSH`, a restart).
#[tokio::test]
async fn a_flushed_script_is_loaded_again() {
    let server = Server::start();
    let limiter = server.limiter(Quota::per_second(5).unwrap()).await;
    limiter.check_key("k").await.unwrap();
    server.command(&["SCRIPT", "FLUSH"]);
    assert_eq!(limiter.decide_key("k", 1).await.unwrap().remaining(), 3);
}

/// A key that holds something other than a state of this limiter is an error, not a panic and
/// not a silent fresh start: garbage, negative or fractional numbers, fields past their range
/// (a count above the limit, a time past 2^53), another algorithm's state.
#[tokio::test]
async fn a_foreign_value_is_an_error() {
    let server = Server::start();
    let quota = Quota::per_second(5).unwrap();
    let conn = server.connection().await;
    let limiters = [
        (
            RedisKeyedRateLimiter::gcra(conn.clone(), "gcra:", quota).unwrap(),
            "GCRA",
            &["garbage", "-5", "1.5", "1e300", "9007199254740992", "1:2"][..],
        ),
        (
            RedisKeyedRateLimiter::sliding_window(conn.clone(), "sw:", quota).unwrap(),
            "sliding-window",
            &[
                "garbage",
                "1:2",
                "1:2:6",
                "1:6:0",
                "-1:0:0",
                "1:0:0:0",
                "4503599627370:0:1",
            ][..],
        ),
        (
            RedisKeyedRateLimiter::fixed_window(conn, "fw:", quota).unwrap(),
            "fixed-window",
            &["garbage", "17", "1:6", "1:2:3", "1.5:1", "4503599627370:1"][..],
        ),
    ];
    for (limiter, name, values) in limiters {
        for value in values {
            server.command(&["SET", &String::from_utf8_lossy(&limiter.key("k")), value]);
            let err = limiter.decide_key("k", 1).await.unwrap_err();
            assert!(matches!(err, Error::Redis(_)), "{value}: {err:?}");
            assert!(
                err.to_string().contains(&format!("is not a {name} state")),
                "{err}"
            );
        }
    }
}

/// The window counters on the server's clock: a window's limit, then a denial whose wait ends
/// with the window; the key expires when nothing in it weighs any more.
#[tokio::test]
async fn windows_on_the_server_clock() {
    let server = Server::start();
    let conn = server.connection().await;
    let quota = Quota::per_hour(3).unwrap();
    let sliding = RedisKeyedRateLimiter::sliding_window(conn.clone(), "sw:", quota).unwrap();
    let fixed = RedisKeyedRateLimiter::fixed_window(conn, "fw:", quota).unwrap();
    for limiter in [&sliding, &fixed] {
        let first = limiter.decide_key("k", 2).await.unwrap();
        assert_eq!(
            (first.is_allowed(), first.remaining(), first.limit()),
            (true, 1, 3)
        );
        limiter.check_key("k").await.unwrap();
        let before = server.time_us();
        let denied = limiter.decide_key("k", 1).await.unwrap();
        let after = server.time_us();
        assert!(!denied.is_allowed());
        // The wait ends within this hour's window (fixed), or the next (sliding).
        assert!(denied.retry_after() > Duration::ZERO);
        assert!(denied.retry_after() <= Duration::from_secs(2 * 3600));
        // The key lives as long as its counts weigh: it expires at a window's end (this hour's
        // for the fixed window, the next one's for the sliding), which is where the reset time
        // reported at the denial's moment ends.
        let at = server.pexpiretime(&limiter.key("k"));
        assert_eq!(at % 3_600_000, 0, "expires at {at} ms");
        let decided = at - denied.reset_after().as_millis() as i64;
        assert!(
            (before / 1000..=after / 1000).contains(&decided),
            "expires at {at} ms, denied at {decided} ms, between {before} and {after} us"
        );
        assert!(matches!(
            limiter.decide_key("k", 4).await,
            Err(Error::InsufficientCapacity(e)) if (e.cost(), e.capacity()) == (4, 3)
        ));
    }
    // A window of 50 ms: the key is gone once the next window has passed, and fresh again.
    let short = Quota::new(1, Duration::from_millis(50)).unwrap();
    let limiter = server
        .limiter_of("short:", RedisSlidingWindow::new(&short).unwrap())
        .await;
    limiter.check_key("k").await.unwrap();
    assert!(limiter.check_key("k").await.is_err());
    tokio::time::sleep(Duration::from_millis(110)).await;
    assert_eq!(server.pttl(&limiter.key("k")), -2, "gone");
    assert!(limiter.check_key("k").await.is_ok());
}

/// While Redis is down, the fallback decides, each such decision counted; a
/// `ConnectionManager` reconnects once Redis is back, and decisions are Redis's again.
#[tokio::test]
async fn the_fallback_decides_while_redis_is_down() {
    let quota = Quota::per_hour(3).unwrap();
    let local = Fallback::Local {
        quota: Quota::per_hour(2).unwrap(),
        capacity: 100,
    };
    // What each policy admits of five requests while Redis is down.
    for (fallback, admitted_while_down) in [(Fallback::Deny, 0), (Fallback::Allow, 5), (local, 2)] {
        let mut server = Server::start();
        let gcra = RedisGcra::new(&quota).unwrap();
        let limiter = RedisKeyedRateLimiter::builder(server.connection().await, "rl:", gcra)
            .fallback(fallback)
            .build()
            .unwrap();
        limiter.check_key("k").await.unwrap();
        server.stop();
        let mut admitted = 0;
        for _ in 0..5 {
            let decision = limiter.decide_key("k", 1).await.unwrap();
            admitted += u32::from(decision.is_allowed());
        }
        assert_eq!(admitted, admitted_while_down, "{fallback:?}");
        let stats = limiter.stats();
        assert_eq!((stats.decisions, stats.unavailable), (1, 5), "{fallback:?}");
        // Back (empty: nothing was saved), Redis decides again, from a fresh state.
        server.restart();
        let decision = loop {
            let decision = limiter.decide_key("k", 1).await.unwrap();
            if limiter.stats().decisions == 2 {
                break decision;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(decision.remaining(), 2, "{fallback:?}");
    }
}

/// A Redis slower than the limiter's timeout is as good as down: the fallback decides, and the
/// wait is counted as a timeout.
#[tokio::test]
async fn a_slow_redis_times_out() {
    let server = Server::start();
    let limiter = RedisKeyedRateLimiter::builder(
        server.connection().await,
        "rl:",
        RedisGcra::new(&Quota::per_second(5).unwrap()).unwrap(),
    )
    .timeout(Duration::from_millis(50))
    .fallback(Fallback::Allow)
    .build()
    .unwrap();
    limiter.check_key("k").await.unwrap();
    // Every client of the server waits half a second.
    server.command(&["CLIENT", "PAUSE", "500", "ALL"]);
    let start = std::time::Instant::now();
    assert!(limiter.decide_key("k", 1).await.unwrap().is_allowed());
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "{:?}",
        start.elapsed()
    );
    let stats = limiter.stats();
    assert_eq!(
        (stats.decisions, stats.unavailable, stats.timeouts),
        (1, 1, 1)
    );
}

/// With the append-only file written on every command (`appendfsync always`), a Redis killed in
/// the middle of a run and started again has lost no admission: 10 per hour, requested
/// continuously across the crash and the restart (denied by the fallback meanwhile), admit 10 in
/// all, exactly. With `appendfsync everysec` the last second's writes can be lost, and their
/// admissions granted again.
#[tokio::test]
async fn no_admission_is_lost_across_a_restart_with_aof_always() {
    let mut server = Server::with_args(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let limiter = server.limiter(Quota::per_hour(10).unwrap()).await;
    let mut admitted = 0;
    for _ in 0..6 {
        admitted += u32::from(limiter.check_key("k").await.is_ok());
    }
    assert_eq!(admitted, 6);
    server.kill();
    for _ in 0..3 {
        assert!(limiter.check_key("k").await.is_err(), "the fallback denies");
    }
    assert_eq!(limiter.stats().unavailable, 3);
    server.restart();
    for _ in 0..50 {
        admitted += u32::from(limiter.check_key("k").await.is_ok());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(admitted, 10);
}

/// Quotas whose tolerance the script's microseconds cannot hold exactly are refused when the
/// limiter is built.
#[test]
fn too_long_a_tolerance_is_a_build_error() {
    let quota = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1 << 62)
        .unwrap();
    let err = RedisGcra::new(&quota).unwrap_err();
    assert!(matches!(err, BuildError::ToleranceTooLong { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "a tolerance of {:?} is longer than a Redis limiter takes, {:?}",
            Duration::from_micros(1 << 62),
            RedisGcra::MAX_TOLERANCE
        )
    );
}

/// Window quotas whose `limit × window` the script cannot count exactly (past 2^52 ms) are
/// refused when the limiter is built, naming the largest limit that fits; windows are counted in
/// whole milliseconds, rounded up.
#[test]
fn too_large_a_window_limit_is_a_build_error() {
    // A day is 86 400 000 ms: at most 2^52 / 86 400 000 = 52 124 995 per day.
    let fits = Quota::per_day(52_124_995).unwrap();
    let over = Quota::per_day(52_124_996).unwrap();
    assert!(RedisSlidingWindow::new(&fits).is_ok());
    assert!(RedisFixedWindow::new(&fits).is_ok());
    let err = RedisSlidingWindow::new(&over).unwrap_err();
    assert_eq!(
        err,
        BuildError::Quota(tollgate::QuotaError::WindowLimitTooLarge {
            algorithm: "sliding-window counter on Redis",
            limit: 52_124_996,
            period: Duration::from_secs(86_400),
            max_limit: 52_124_995,
        })
    );
    assert!(RedisFixedWindow::new(&over).is_err());
    // 1.5 ms windows count as 2 ms.
    let short = Quota::new(1, Duration::from_micros(1_500)).unwrap();
    let window = RedisSlidingWindow::new(&short).unwrap();
    assert_eq!(window.window(), Duration::from_millis(2));
}

/// The decision the script's reply makes, for `Decision`'s fields: checked against a key's
/// decision made locally, so that the reply's conversion is covered where the equivalence test
/// compares two of them.
#[tokio::test]
async fn a_reply_is_the_decision_in_microseconds() {
    let server = Server::start();
    let quota = Quota::per_second(4).unwrap();
    let limiter = server.limiter(quota).await;
    let now = 1_800_000_000_000_000;
    let first = limiter.decide_key_at("k", 3, now).await.unwrap();
    assert_eq!(
        (
            first.is_allowed(),
            first.remaining(),
            first.reset_after(),
            first.limit()
        ),
        (true, 1, Duration::from_millis(750), 4)
    );
    let denied: Decision = limiter.decide_key_at("k", 2, now).await.unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.retry_after(), Duration::from_millis(250));
    assert_eq!(
        server.stored(&limiter.key("k")),
        Some(format!(
            "{}@{}",
            now + 750_000,
            params(&limiter.algorithm())
        ))
    );
}

/// On a Redis Cluster of three masters: each key is decided on the node that serves its slot; a
/// batch over keys of many slots is one script per slot; and a slot migrated to another node in
/// the middle of a run (the client's map of slots now out of date, corrected by a `MOVED`
/// reply) keeps its keys' states, so that each key still admits exactly its burst.
#[tokio::test]
async fn a_cluster_routes_keys_to_their_slots_and_follows_a_migration() {
    let cluster = Cluster::start();
    let limiter = RedisKeyedRateLimiter::gcra(
        cluster.connection().await,
        "rl:",
        Quota::per_hour(5).unwrap(),
    )
    .unwrap();
    let keys: Vec<String> = (0..50).map(|k| format!("k{k}")).collect();
    for key in &keys {
        limiter.check_key(key).await.unwrap();
    }
    // Every node holds some of the keys: they spread over the slots.
    let held: Vec<i64> = cluster
        .nodes
        .iter()
        .map(|node| match node.command(&["DBSIZE"]) {
            redis::Value::Int(n) => n,
            other => panic!("DBSIZE: {other:?}"),
        })
        .collect();
    assert_eq!(held.iter().sum::<i64>(), 50);
    assert!(held.iter().all(|&n| n > 0), "{held:?}");
    let batch = limiter
        .decide_keys(keys.iter().map(|key| (key, 1)))
        .await
        .unwrap();
    assert!(batch
        .iter()
        .all(|d| d.is_ok_and(|d| d.is_allowed() && d.remaining() == 3)));

    let slot = match cluster.nodes[0].command(&["CLUSTER", "KEYSLOT", "rl:k0"]) {
        redis::Value::Int(slot) => slot as u16,
        other => panic!("KEYSLOT: {other:?}"),
    };
    let (from, to) = cluster.migrate(slot);
    assert_ne!(from, to);
    let decision = limiter.decide_key("k0", 3).await.unwrap();
    assert_eq!((decision.is_allowed(), decision.remaining()), (true, 0));
    assert!(limiter.check_key("k0").await.is_err());
    let stats = limiter.stats();
    assert_eq!((stats.decisions, stats.unavailable), (102, 0));
}
