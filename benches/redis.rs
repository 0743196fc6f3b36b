//! The Redis limiters' throughput, each row against its baseline in the same run, and Redis's
//! memory per live key.
//!
//!     cargo bench --features redis --bench redis
//!
//! It starts its own `redis-server` on a free loopback port (`apt-get install redis-server`).
//! Every row drives the same client (`redis` crate, one multiplexed `ConnectionManager`, on one
//! tokio thread) from 32 tasks at once, or from one (where a decision's latency, its round
//! trips, is what counts), for `TOLLGATE_REDIS_SECS` seconds (default 2) a row, in
//! `TOLLGATE_REDIS_ROUNDS` alternating rounds (default 5); it prints each row's median
//! decisions per second, the median microseconds the server spent on each script it ran (from
//! its `INFO commandstats`: the script's own cost, whatever the client's), and the ratios the
//! design is held to:
//!
//! - one decision (`check_key`) against a minimal `EVALSHA` (one `GET` and one `SET` of one
//!   key): what the script's work and its reply cost beyond a round trip, target 0.9 or more;
//! - against get-then-compare-and-set (two round trips, and a retry on conflict, as Bucket4j
//!   does): target 1.8 or more;
//! - batches of 64 (`check_keys`) against one decision per round trip (32 in flight, and 1):
//!   target 5 or more;
//! - lease mode on 16 hot keys against the local keyed limiter on the same keys (target 0.5 or
//!   more) and against one round trip per decision (target 50 or more), with the admissions it
//!   made against what the quota allowed and the documented bound;
//! - a reservation that may not wait (`reserve_key`) against `check_key`: at most 1.1 times its
//!   time (a throughput ratio of 0.91 or more);
//! - an all-or-nothing check of three layers (`decide_all`: a user, its tenant, the service) in
//!   one round trip against the three checked one after another: at most 1.2 times their time
//!   (0.83 or more).

#[path = "../tests/server/mod.rs"]
mod server;

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionManager;
use redis::Script;
use server::Server;
use tollgate::redis::{
    decide_all, Lease, LeasedKeyedRateLimiter, RedisAlgorithm, RedisFixedWindow, RedisGcra,
    RedisKeyedRateLimiter, RedisRateLimiter, RedisSlidingWindow,
};
use tollgate::{KeyedRateLimiter, Quota};

const KEYS: u64 = 10_000;
const HOT_KEYS: u64 = 16;

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One call of a row: the `i`th (a pseudo-random number), returning how many decisions it made.
type Call = Arc<dyn Fn(u64) -> Pin<Box<dyn Future<Output = u64> + Send>> + Send + Sync>;

fn call<F, Fut>(f: F) -> Call
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = u64> + Send + 'static,
{
    Arc::new(move |i| Box::pin(f(i)))
}

/// Decisions per second: `tasks` tasks each making calls until `secs` have passed.
async fn throughput(tasks: usize, secs: f64, call: &Call) -> f64 {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for task in 0..tasks as u64 {
        let (call, done) = (Arc::clone(call), Arc::clone(&done));
        handles.push(tokio::spawn(async move {
            let mut i = task.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            while Instant::now() < deadline {
                i = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
                done.fetch_add(call(i).await, Relaxed);
            }
        }));
    }
    for handle in handles {
        handle.await.expect("a task");
    }
    done.load(Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A minimal script: one `GET` and one `SET` of one key.
const MINIMAL: &str = "local v = redis.call('GET', KEYS[1]) \
     redis.call('SET', KEYS[1], ARGV[1]) return 1";

/// The compare-and-set half of get-then-compare-and-set: store the new state only if the key
/// still holds the state read.
const COMPARE_AND_SET: &str = "local v = redis.call('GET', KEYS[1]) or '0' \
     if v ~= ARGV[1] then return 0 end \
     redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1";

fn main() {
    let secs = env("TOLLGATE_REDIS_SECS", 2.0);
    let rounds = env("TOLLGATE_REDIS_ROUNDS", 5.0) as usize;
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(&server, secs, rounds));
}

async fn run(server: &Server, secs: f64, rounds: usize) {
    let conn = server.connection().await;
    // A quota no row's traffic reaches: every decision is a full one (an admission, written).
    let roomy = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1 << 30)
        .unwrap();
    let gcra = RedisGcra::new(&roomy).unwrap();
    let single = RedisKeyedRateLimiter::gcra(conn.clone(), "bench:one:", roomy).unwrap();
    let batched = RedisKeyedRateLimiter::gcra(conn.clone(), "bench:batch:", roomy).unwrap();
    // The hot keys: 200 000 a second each, in bursts of 10 000, below what one process asks
    // for, so that the leases' admissions can be held to the quota.
    let (hot_rate, hot_burst, lease_size) = (200_000u64, 10_000u64, 5_000u64);
    let hot = Quota::per_second(hot_rate)
        .unwrap()
        .with_burst(hot_burst)
        .unwrap();
    let leased = LeasedKeyedRateLimiter::builder(
        conn.clone(),
        "bench:lease:",
        RedisGcra::new(&hot).unwrap(),
        Lease::new(lease_size).capacity(1_000),
    )
    .build()
    .unwrap();
    let local = Arc::new(KeyedRateLimiter::<[u8]>::gcra(hot, 1_000).unwrap());
    let lease_admitted = Arc::new(AtomicU64::new(0));

    let key = |i: u64| format!("{}", i % KEYS);
    let hot_key = |i: u64| format!("hot{}", i % HOT_KEYS);
    let minimal = {
        let (script, conn) = (Arc::new(Script::new(MINIMAL)), conn.clone());
        call(move |i| {
            let (script, mut conn) = (Arc::clone(&script), conn.clone());
            async move {
                let reply: redis::RedisResult<i64> = script
                    .key(format!("bench:min:{}", i % KEYS))
                    .arg(i)
                    .invoke_async(&mut conn)
                    .await;
                black_box(reply.expect("the minimal script"));
                1
            }
        })
    };
    let check_key = call(move |i| {
        let limiter = single.clone();
        async move {
            black_box(limiter.check_key(key(i)).await.is_ok());
            1
        }
    });
    let cas = {
        let (script, conn) = (Arc::new(Script::new(COMPARE_AND_SET)), conn.clone());
        call(move |i| {
            let (script, conn) = (Arc::clone(&script), conn.clone());
            async move {
                black_box(get_then_cas(&script, conn, &gcra, i % KEYS).await);
                1
            }
        })
    };
    let check_keys = call(move |i| {
        let limiter = batched.clone();
        async move {
            let keys: Vec<String> = (0..64).map(|j| key(i.wrapping_add(j * 7919))).collect();
            let answers = limiter.check_keys(keys).await.expect("a batch");
            answers.len() as u64
        }
    });
    // 64 checks a call, as a server's worker decides the requests it has read.
    let lease = {
        let (limiter, admitted) = (leased.clone(), Arc::clone(&lease_admitted));
        call(move |i| {
            let (limiter, admitted) = (limiter.clone(), Arc::clone(&admitted));
            async move {
                for j in 0..64 {
                    if limiter.check_key(hot_key(i.wrapping_add(j))).await.is_ok() {
                        admitted.fetch_add(1, Relaxed);
                    }
                }
                64
            }
        })
    };
    let local_keyed = call(move |i| {
        let limiter = Arc::clone(&local);
        async move {
            for j in 0..64 {
                black_box(
                    limiter
                        .check_key(hot_key(i.wrapping_add(j)).as_bytes())
                        .is_ok(),
                );
            }
            64
        }
    });

    // A reservation with no wait allowed, against a check: the same script's work and one
    // more reply field.
    let reserve_key = {
        let limiter = RedisKeyedRateLimiter::gcra(conn.clone(), "bench:reserve:", roomy).unwrap();
        call(move |i| {
            let limiter = limiter.clone();
            async move {
                let turn = limiter.reserve_key(key(i), 1, Duration::ZERO).await;
                black_box(turn.is_ok());
                1
            }
        })
    };
    // Three layers (a user, its tenant, the whole service), all or nothing in one script,
    // against the three checked one after another.
    let three = |tag: &str| {
        let prefix = |layer: &str| format!("bench:{{{tag}}}:{layer}:");
        (
            RedisKeyedRateLimiter::gcra(conn.clone(), prefix("user"), roomy).unwrap(),
            RedisKeyedRateLimiter::gcra(conn.clone(), prefix("tenant"), roomy).unwrap(),
            RedisRateLimiter::gcra(conn.clone(), prefix("global"), roomy).unwrap(),
        )
    };
    let layered = {
        let (user, tenant, global) = three("all");
        call(move |i| {
            let (user, tenant, global) = (user.clone(), tenant.clone(), global.clone());
            async move {
                let layers = [
                    user.layer(key(i)),
                    tenant.layer(format!("{}", i % 100)),
                    global.layer(),
                ];
                black_box(
                    decide_all(&layers, 1)
                        .await
                        .expect("a decision")
                        .is_allowed(),
                );
                1
            }
        })
    };
    let three_checks = {
        let (user, tenant, global) = three("each");
        call(move |i| {
            let (user, tenant, global) = (user.clone(), tenant.clone(), global.clone());
            async move {
                black_box(user.check_key(key(i)).await.is_ok());
                black_box(tenant.check_key(format!("{}", i % 100)).await.is_ok());
                black_box(global.check().await.is_ok());
                1
            }
        })
    };

    let rows: Vec<(&str, usize, Call)> = vec![
        (
            "minimal EVALSHA (GET + SET), 32 in flight",
            32,
            minimal.clone(),
        ),
        ("check_key, 32 in flight", 32, check_key.clone()),
        ("get, then compare-and-set, 32 in flight", 32, cas.clone()),
        ("minimal EVALSHA (GET + SET), 1 in flight", 1, minimal),
        ("check_key, 1 in flight", 1, check_key.clone()),
        ("get, then compare-and-set, 1 in flight", 1, cas),
        (
            "check_keys (batches of 64), 32 in flight",
            32,
            check_keys.clone(),
        ),
        ("check_keys (batches of 64), 1 in flight", 1, check_keys),
        ("leased check_key, 16 hot keys, 32 tasks", 32, lease),
        (
            "local KeyedRateLimiter, 16 hot keys, 32 tasks",
            32,
            local_keyed,
        ),
        ("reserve_key (no wait), 1 in flight", 1, reserve_key),
        ("decide_all over 3 layers, 1 in flight", 1, layered),
        ("3 checks one after another, 1 in flight", 1, three_checks),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    // The server's time per script run in each row, from its statistics.
    let mut server_micros: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    // The lease row's admissions in its worst round, against what the quota allowed then.
    let mut worst = (0u64, 1u64);
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        for (r, (name, tasks, call)) in rows.iter().enumerate() {
            lease_admitted.store(0, Relaxed);
            server.command(&["CONFIG", "RESETSTAT"]);
            let start = Instant::now();
            results[r].push(throughput(*tasks, secs, call).await);
            server_micros[r].push(server.command_micros("evalsha"));
            if name.starts_with("leased") {
                // Each round starts with a full burst (the other rows leave the keys idle for
                // longer than it takes to refill).
                let micros = start.elapsed().as_micros() as u64;
                let allowed = HOT_KEYS * (hot_burst + (hot_rate * micros).div_ceil(1_000_000));
                let admitted = lease_admitted.load(Relaxed);
                if admitted as f64 / allowed as f64 > worst.0 as f64 / worst.1 as f64 {
                    worst = (admitted, allowed);
                }
            }
        }
    }

    println!(
        "\n{:<52} {:>14} {:>18}",
        "row (median of rounds)", "decisions/s", "server us/script"
    );
    let medians: Vec<f64> = results.into_iter().map(median).collect();
    let script_micros: Vec<f64> = server_micros.into_iter().map(median).collect();
    for (((name, _, _), m), us) in rows.iter().zip(&medians).zip(&script_micros) {
        println!("{name:<52} {m:>14.0} {us:>18.2}");
    }
    let ratio = |a: usize, b: usize| medians[a] / medians[b];
    println!("\n{:<62} {:>7} {:>7}", "ratio", "value", "target");
    for (name, value, target) in [
        (
            "check_key / minimal EVALSHA, 32 in flight",
            ratio(1, 0),
            0.9,
        ),
        ("check_key / minimal EVALSHA, 1 in flight", ratio(4, 3), 0.9),
        (
            "check_key / get-then-compare-and-set, 32 in flight",
            ratio(1, 2),
            1.8,
        ),
        (
            "check_key / get-then-compare-and-set, 1 in flight",
            ratio(4, 5),
            1.8,
        ),
        (
            "check_keys (64) / check_key, 32 in flight",
            ratio(6, 1),
            5.0,
        ),
        ("check_keys (64) / check_key, 1 in flight", ratio(7, 4), 5.0),
        ("leased / local keyed", ratio(8, 9), 0.5),
        ("leased / check_key (32 in flight)", ratio(8, 1), 50.0),
        // A reservation takes at most 1.1 times a check's time, an all-or-nothing check of
        // three layers at most 1.2 times three checks'.
        (
            "reserve_key / check_key, 1 in flight",
            ratio(10, 4),
            1.0 / 1.1,
        ),
        (
            "decide_all (3 layers) / 3 checks, 1 in flight",
            ratio(11, 12),
            1.0 / 1.2,
        ),
    ] {
        let verdict = if value >= target { "met" } else { "MISSED" };
        println!("{name:<62} {value:>7.2} {target:>7.2} {verdict}");
    }
    let bound = worst.1 + HOT_KEYS * lease_size * 3 / 2;
    let stats = leased.stats();
    println!(
        "\nleased, worst round: {} admitted where the quota allowed {} ({:.4}); the bound (one \
         process, 1.5 leases a key) is {bound}: {}. {} leases, {} decisions on Redis alone.",
        worst.0,
        worst.1,
        worst.0 as f64 / worst.1 as f64,
        if worst.0 <= bound {
            "within"
        } else {
            "EXCEEDED"
        },
        stats.leases,
        stats.direct,
    );
    memory(server, conn).await;
}

/// One decision the Bucket4j way: read the state, decide in the application, and store the new
/// state only if the key still holds the state read; on a conflict, again.
async fn get_then_cas(
    script: &Script,
    mut conn: ConnectionManager,
    gcra: &RedisGcra,
    k: u64,
) -> bool {
    let key = format!("bench:cas:{k}");
    loop {
        let state: Option<u64> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("GET");
        let now = unix_micros();
        let (decision, next) = gcra.decide(state.unwrap_or(0), now, 1);
        if !decision.is_allowed() {
            return false;
        }
        let ttl = (next - now).div_ceil(1_000).max(1);
        let stored: i64 = script
            .key(&key)
            .arg(state.unwrap_or(0))
            .arg(next)
            .arg(ttl)
            .invoke_async(&mut conn)
            .await
            .expect("compare-and-set");
        if stored == 1 {
            return true;
        }
    }
}

/// Redis's memory per live key, for each algorithm: `MEMORY USAGE` of the keys, and the growth
/// of `used_memory` over 10 000 keys.
async fn memory(server: &Server, conn: ConnectionManager) {
    let quota = Quota::per_hour(1_000).unwrap();
    println!(
        "\n{:<28} {:>22} {:>24}",
        "Redis memory per live key", "MEMORY USAGE (bytes)", "used_memory growth"
    );
    for (name, algorithm) in [
        (
            "GCRA",
            RedisAlgorithm::from(RedisGcra::new(&quota).unwrap()),
        ),
        (
            "sliding window",
            RedisSlidingWindow::new(&quota).unwrap().into(),
        ),
        (
            "fixed window",
            RedisFixedWindow::new(&quota).unwrap().into(),
        ),
    ] {
        server.command(&["FLUSHALL"]);
        let before = used_memory(server);
        let prefix = format!("mem:{}:", name.replace(' ', "-"));
        let limiter = RedisKeyedRateLimiter::builder(conn.clone(), &prefix, algorithm)
            .build()
            .unwrap();
        let keys: Vec<String> = (0..KEYS).map(|k| format!("user-{k:06}")).collect();
        for chunk in keys.chunks(100) {
            limiter.check_keys(chunk).await.expect("a batch");
        }
        let growth = (used_memory(server) - before) as f64 / KEYS as f64;
        let mut usage = 0;
        for key in keys.iter().take(100) {
            let full = format!("{prefix}{key}");
            usage += match server.command(&["MEMORY", "USAGE", &full]) {
                redis::Value::Int(n) => n,
                other => panic!("MEMORY USAGE: {other:?}"),
            };
        }
        println!(
            "{:<28} {:>22.1} {:>24.1}",
            format!("{name} ({}-byte key)", prefix.len() + 11),
            usage as f64 / 100.0,
            growth
        );
    }
}

fn used_memory(server: &Server) -> i64 {
    let info = match server.command(&["INFO", "memory"]) {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO: {other:?}"),
    };
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("used_memory")
}
