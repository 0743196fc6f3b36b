//! Shaping: what a reservation costs beside a check, and how late waiters wake.
//!
//! - `reserve / check`: the allow path of `reserve` (a turn at once, dropped: kept) against
//!   `check`, for a direct limiter and for a keyed one over 1 000 keys, in alternating rounds
//!   (`support/rounds.rs`); the ratio is the median of the rounds' ratios.
//! - `layered / independent`: an all-or-nothing check of three layers (`Layers::check_all`) on
//!   the allow path against the three checks made one after the other: three direct limiters,
//!   and a key of 1 000 users, a key of 100 tenants and a global limiter.
//! - Waiting: many tokio tasks, and a few threads, reserve turns from one limiter and sleep until
//!   them (`Reservation::ready`, `Reservation::wait`); each measures how long after its reserved
//!   time it woke, on the limiter's clock. Median, 99th percentile and worst.
//!
//! `cargo bench --features tokio --bench shaping` (about a minute); a filter selects rows by any
//! part of their names (`-- reserve`, `-- layered`, `-- waiting`). `TOLLGATE_PAIRED_ROUNDS` as in `paired.rs`.

use std::sync::Arc;
use std::time::Duration;

use tollgate::layers::Layers;
use tollgate::{Clock, KeyedRateLimiter, Quota, RateLimiter};

mod support;

use support::rounds::{filters, paired, time, CALLS};

fn unlimited() -> Quota {
    Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000_000)
        .unwrap()
}

#[inline(never)]
fn check(limiter: &RateLimiter) -> bool {
    limiter.check().is_ok()
}

#[inline(never)]
fn reserve(limiter: &RateLimiter) -> bool {
    limiter.reserve(1, Duration::from_secs(1)).is_ok()
}

#[inline(never)]
fn check_key(limiter: &KeyedRateLimiter<u64>, key: u64) -> bool {
    limiter.check_key(&key).is_ok()
}

#[inline(never)]
fn reserve_key(limiter: &KeyedRateLimiter<u64>, key: u64) -> bool {
    limiter.reserve_key(&key, 1, Duration::from_secs(1)).is_ok()
}

fn reserve_rows() {
    let limiter = RateLimiter::gcra(unlimited());
    paired(
        "reserve / check, direct (allow)",
        || time(&mut || reserve(&limiter)),
        || time(&mut || check(&limiter)),
    );
    let keyed = KeyedRateLimiter::<u64>::gcra(unlimited(), 1_000).unwrap();
    let (mut a, mut b) = (0u64, 0u64);
    paired(
        "reserve_key / check_key, 1k keys (allow)",
        || time(&mut || reserve_key(&keyed, cycle(&mut a))),
        || time(&mut || check_key(&keyed, cycle(&mut b))),
    );
}

/// The next of 1 000 keys in turn.
fn cycle(k: &mut u64) -> u64 {
    *k = (*k + 1) % 1_000;
    *k
}

#[inline(never)]
fn layered_direct(layers: &[RateLimiter; 3]) -> bool {
    (&layers[0], &layers[1], &layers[2]).check_all(1).is_ok()
}

#[inline(never)]
fn independent_direct(layers: &[RateLimiter; 3]) -> bool {
    layers[0].check().is_ok() && layers[1].check().is_ok() && layers[2].check().is_ok()
}

struct Tiers {
    user: KeyedRateLimiter<u64>,
    tenant: KeyedRateLimiter<u64>,
    global: RateLimiter,
}

#[inline(never)]
fn layered_keyed(t: &Tiers, user: u64) -> bool {
    (
        t.user.layer(&user),
        t.tenant.layer(&(user % 100)),
        &t.global,
    )
        .check_all(1)
        .is_ok()
}

#[inline(never)]
fn independent_keyed(t: &Tiers, user: u64) -> bool {
    t.user.check_key(&user).is_ok()
        && t.tenant.check_key(&(user % 100)).is_ok()
        && t.global.check().is_ok()
}

fn layered_rows() {
    let direct = [(); 3].map(|()| RateLimiter::gcra(unlimited()));
    paired(
        "layered / independent, 3 direct (allow)",
        || time(&mut || layered_direct(&direct)),
        || time(&mut || independent_direct(&direct)),
    );
    let tiers = Tiers {
        user: KeyedRateLimiter::<u64>::gcra(unlimited(), 1_000).unwrap(),
        tenant: KeyedRateLimiter::<u64>::gcra(unlimited(), 100).unwrap(),
        global: RateLimiter::gcra(unlimited()),
    };
    let (mut a, mut b) = (0u64, 0u64);
    paired(
        "layered / independent, user+tenant+global (allow)",
        || time(&mut || layered_keyed(&tiers, cycle(&mut a))),
        || time(&mut || independent_keyed(&tiers, cycle(&mut b))),
    );
}

/// The median, 99th percentile and worst of `lateness` (sorted in place), in microseconds.
fn spread(lateness: &mut [u64]) -> (f64, f64, f64) {
    lateness.sort_unstable();
    let at = |q: f64| lateness[((lateness.len() - 1) as f64 * q) as usize] as f64 / 1e3;
    (at(0.5), at(0.99), at(1.0))
}

fn selected(name: &str) -> bool {
    let filters = filters();
    filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
}

/// `tasks` tokio tasks on two worker threads reserve one turn each from a limiter of `rate` per
/// second (bursts of 1), all at once, and sleep until it.
fn waiting_tokio(tasks: usize, rate: u64) {
    let name = format!("waiting, tokio: {tasks} tasks at {rate}/s");
    if !selected(&name) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let limiter = Arc::new(RateLimiter::gcra(
        Quota::per_second(rate).unwrap().with_burst(1).unwrap(),
    ));
    let mut lateness: Vec<u64> = runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                tokio::spawn(async move {
                    let turn = limiter.reserve(1, Duration::from_secs(60)).unwrap();
                    let at = turn.ready_at().as_nanos();
                    turn.ready().await;
                    limiter.clock().now().as_nanos() - at
                })
            })
            .collect();
        let mut lateness = Vec::with_capacity(tasks);
        for handle in handles {
            lateness.push(handle.await.unwrap());
        }
        lateness
    });
    let (median, p99, worst) = spread(&mut lateness);
    println!("{name:44} late by: median {median:8.1} µs, p99 {p99:8.1} µs, worst {worst:8.1} µs");
}

/// `threads` threads take `each` turns each from a limiter of `rate` per second (bursts of 1),
/// blocking in `Reservation::wait`.
fn waiting_threads(threads: usize, each: usize, rate: u64) {
    let name = format!("waiting, threads: {threads} x {each} turns at {rate}/s");
    if !selected(&name) {
        return;
    }
    let limiter = RateLimiter::gcra(Quota::per_second(rate).unwrap().with_burst(1).unwrap());
    let mut lateness: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    (0..each)
                        .map(|_| {
                            let turn = limiter.reserve(1, Duration::from_secs(60)).unwrap();
                            let at = turn.ready_at().as_nanos();
                            turn.wait();
                            limiter.clock().now().as_nanos() - at
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let (median, p99, worst) = spread(&mut lateness);
    println!("{name:44} late by: median {median:8.1} µs, p99 {p99:8.1} µs, worst {worst:8.1} µs");
}

fn main() {
    println!(
        "paired rounds: {} x {CALLS} calls each",
        support::rounds::rounds()
    );
    reserve_rows();
    layered_rows();
    waiting_tokio(10_000, 5_000);
    waiting_threads(4, 500, 1_000);
}
