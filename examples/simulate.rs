//! A simulated gateway: every core hammers shared limiters as fast as it can, and the output says
//! how many decisions per second they made, how many were allowed and denied, and whether the
//! admissions stayed within the quota. First one global limiter per algorithm, then per-client
//! limits over a million clients whose popularity follows Zipf's law (a few clients send most
//! requests and hit their limits; the long tail passes), one request at a time (then a reset of
//! every client, timed and checked), in batches of 64, and in batches with two tiers of clients
//! in one table, then an exact per-account log.
//!
//!     cargo run --release --example simulate            # 2 s per scenario
//!     cargo run --release --example simulate -- 5       # 5 s per scenario
//!
//! The offered load is far above every limit (each thread asks again the moment it has an
//! answer), which is the worst case for a limiter: most decisions are denials, contended on one
//! word, and the admitted count must still match the quota exactly.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate::{
    Clock, FixedWindow, Gcra, KeyedRateLimiter, KeyedSlidingLog, Quota, RateLimiter, SlidingWindow,
    TscClock,
};

struct Outcome {
    decisions: u64,
    allowed: u64,
    elapsed: Duration,
}

/// Runs one thread per sequence of `clients`, each calling `check(client)` along its sequence,
/// for `duration`. A direct limiter ignores the client.
fn hammer_keys(
    check: impl Fn(u64) -> bool + Sync,
    clients: &[Vec<u64>],
    duration: Duration,
) -> Outcome {
    hammer_batches(
        |batch| batch.iter().filter(|&&client| check(client)).count() as u64,
        clients,
        duration,
    )
}

/// Runs one thread per sequence of `clients`, each handing its sequence to `decide` in batches of
/// up to 64 clients (as a server that reads many requests at once would), for `duration`.
/// `decide` returns how many of its batch it admitted.
fn hammer_batches(
    decide: impl Fn(&[u64]) -> u64 + Sync,
    clients: &[Vec<u64>],
    duration: Duration,
) -> Outcome {
    let stop = AtomicBool::new(false);
    let decisions = AtomicU64::new(0);
    let allowed = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for sequence in clients {
            let (decide, stop, decisions, allowed) = (&decide, &stop, &decisions, &allowed);
            s.spawn(move || {
                let (mut n, mut ok, mut unchecked) = (0u64, 0u64, 0usize);
                'run: loop {
                    for batch in sequence.chunks(64) {
                        ok += decide(batch);
                        n += batch.len() as u64;
                        // Look at the stop flag every thousand or so decisions.
                        unchecked += batch.len();
                        if unchecked >= 1024 {
                            unchecked = 0;
                            if stop.load(Ordering::Relaxed) {
                                break 'run;
                            }
                        }
                    }
                }
                decisions.fetch_add(n, Ordering::Relaxed);
                allowed.fetch_add(ok, Ordering::Relaxed);
            });
        }
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
    });
    Outcome {
        decisions: decisions.into_inner(),
        allowed: allowed.into_inner(),
        elapsed: start.elapsed(),
    }
}

/// `len` client ids out of `clients`, with Zipf(1.0) popularity, scattered over the id space.
fn zipf_clients(clients: u64, len: usize, seed: u64) -> Vec<u64> {
    let mut cumulative = Vec::with_capacity(clients as usize);
    let mut total = 0.0;
    for k in 0..clients {
        total += 1.0 / (k + 1) as f64;
        cumulative.push(total);
    }
    let mut state = seed;
    (0..len)
        .map(|_| {
            // SplitMix64.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            let u = ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * total;
            let rank = cumulative.partition_point(|&c| c < u) as u64;
            rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % clients
        })
        .collect()
}

/// The clients that the threads' sequences name, each once: those a quota bound counts.
fn distinct(sequences: &[Vec<u64>]) -> HashSet<u64> {
    sequences.iter().flatten().copied().collect()
}

/// Prints one scenario's line; `most` is the most its quota allows over the run. A scenario
/// that admitted more stops the run.
fn report(name: &str, o: &Outcome, most: f64) {
    let secs = o.elapsed.as_secs_f64();
    println!(
        "{name:34} {:>14} {:>12} {:>12} {:>14} {:>14}",
        millions(o.decisions as f64 / secs),
        millions(o.allowed as f64 / secs),
        millions((o.decisions - o.allowed) as f64 / secs),
        o.allowed,
        most as u64,
    );
    assert!(
        o.allowed as f64 <= most,
        "{name}: admitted {} where its quota allows at most {}",
        o.allowed,
        most as u64
    );
}

fn millions(n: f64) -> String {
    format!("{:.2} M", n / 1e6)
}

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let duration = Duration::from_secs(seconds);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!("tollgate: {threads} threads hammering shared limiters, {seconds} s per scenario\n");
    println!(
        "{:34} {:>14} {:>12} {:>12} {:>14} {:>14}",
        "scenario", "decisions/s", "allowed/s", "denied/s", "allowed", "quota allows"
    );

    // GCRA admits at most its burst plus one request per emission interval elapsed.
    let gcra = Quota::per_second(5_000_000)
        .and_then(|q| q.with_burst(50_000))
        .expect("valid quota");
    // Direct limiters ignore the client: one dummy sequence per thread.
    let anyone = vec![vec![0u64]; threads];
    let limiter = RateLimiter::new(Gcra::from(gcra));
    let o = hammer_keys(|_| limiter.check().is_ok(), &anyone, duration);
    report(
        "GCRA 5M/s, burst 50k",
        &o,
        50_000.0 + o.elapsed.as_secs_f64() * 5e6,
    );

    // Window counters admit at most the limit in each window the run touched.
    let windows = |o: &Outcome| o.elapsed.as_secs_f64().ceil() + 1.0;
    let sliding =
        SlidingWindow::new(&Quota::per_second(30_000).expect("valid quota")).expect("fits");
    let limiter = RateLimiter::new(sliding);
    let o = hammer_keys(|_| limiter.check().is_ok(), &anyone, duration);
    report("sliding window 30k/s", &o, windows(&o) * 30_000.0);

    let fixed =
        FixedWindow::new(&Quota::per_second(5_000_000).expect("valid quota")).expect("fits");
    let limiter = RateLimiter::new(fixed);
    let o = hammer_keys(|_| limiter.check().is_ok(), &anyone, duration);
    report("fixed window 5M/s", &o, windows(&o) * 5e6);

    // Per client: a million clients, 100 per second each with bursts of 20, Zipf traffic.
    let clients = 1_000_000u64;
    let sequences: Vec<Vec<u64>> = (0..threads as u64)
        .map(|t| zipf_clients(clients, 1 << 20, 17 + t))
        .collect();
    let free = Quota::per_second(100)
        .and_then(|q| q.with_burst(20))
        .expect("valid quota");
    let per_client_table =
        || KeyedRateLimiter::<u64>::gcra(free, clients as usize).expect("allocates");
    let per_client = per_client_table();
    let o = hammer_keys(|c| per_client.check_key(&c).is_ok(), &sequences, duration);
    // Each client that sent anything admits at most its burst plus 100 per second.
    let active = distinct(&sequences);
    let bound = |o: &Outcome| active.len() as f64 * (20.0 + 100.0 * o.elapsed.as_secs_f64());
    report("per client, 1M Zipf clients", &o, bound(&o));
    let stats = per_client.stats();
    println!(
        "    table: {:.1} MB for {} clients ({:.1} bytes each), {} keys held, {} found no room",
        per_client.memory() as f64 / 1e6,
        clients,
        per_client.memory() as f64 / clients as f64,
        stats.occupied,
        stats.overflows
    );
    // An operator lifts every block at once: a walk of the whole table, off the request path.
    let start = Instant::now();
    per_client.reset();
    let took = start.elapsed();
    let fresh = per_client.peek_key(&u64::MAX).remaining();
    let left = active
        .iter()
        .filter(|&c| per_client.peek_key(c).remaining() != fresh)
        .count();
    println!(
        "    reset of every client: {:.1} ms for the table's {} slots; {left} clients not fresh after it",
        took.as_secs_f64() * 1e3,
        stats.slots
    );
    assert_eq!(
        left, 0,
        "a reset of every key left clients that are not fresh"
    );
    // The same traffic, decided 64 requests at a time with `check_keys`, whose table lookups
    // overlap (a fresh table, so the quota bound is the same).
    let per_client = per_client_table();
    let o = hammer_batches(
        |batch| per_client.check_keys(batch).filter(Result::is_ok).count() as u64,
        &sequences,
        duration,
    );
    report("  same, in batches of 64", &o, bound(&o));
    // The same traffic with two tiers in one table: every 16th client is premium (1 000 per
    // second, bursts of 200), each request decided under its client's tier with
    // `decide_keys_with`, in batches of 64.
    let premium = Quota::per_second(1_000)
        .and_then(|q| q.with_burst(200))
        .expect("valid quota");
    let tiers = [free, premium];
    let is_premium = |client: u64| client % 16 == 0;
    let tier = |client: u64| &tiers[usize::from(is_premium(client))];
    let per_client = KeyedRateLimiter::<u64>::builder(Gcra::from(free))
        .tier(premium)
        .capacity(clients as usize)
        .build()
        .expect("allocates");
    let o = hammer_batches(
        |batch| {
            let requests = batch.iter().map(|c| (c, tier(*c), 1));
            per_client
                .decide_keys_with(requests)
                .filter(|d| d.is_ok_and(|d| d.is_allowed()))
                .count() as u64
        },
        &sequences,
        duration,
    );
    let premium_active = active.iter().filter(|&&c| is_premium(c)).count() as f64;
    let free_active = active.len() as f64 - premium_active;
    let secs = o.elapsed.as_secs_f64();
    report(
        "  two tiers (1 in 16 premium)",
        &o,
        free_active * (20.0 + 100.0 * secs) + premium_active * (200.0 + 1_000.0 * secs),
    );

    // Exact per-account log: 5 login attempts per minute, 100 000 accounts.
    let accounts = 100_000u64;
    let logins = KeyedSlidingLog::<u64>::builder(&Quota::per_minute(5).expect("valid quota"))
        .capacity(accounts as usize)
        .build()
        .expect("allocates");
    let sequences: Vec<Vec<u64>> = (0..threads as u64)
        .map(|t| zipf_clients(accounts, 1 << 18, 31 + t))
        .collect();
    let o = hammer_keys(|a| logins.check_key(&a).is_ok(), &sequences, duration);
    // Each account that tried admits at most 5 in any minute: 5 for every minute, begun, of
    // the run. A run of seconds passes over each thread's sequence many times, offering every
    // account in it far more than 5 requests, so the log admits exactly that many: one
    // admission too many fails the run.
    let tried = distinct(&sequences);
    report(
        "login log, 100k accounts, 5/min",
        &o,
        tried.len() as f64 * 5.0 * (o.elapsed.as_secs_f64() / 60.0).ceil(),
    );

    // One clock read, for scale.
    let clock = TscClock::new();
    let start = Instant::now();
    for _ in 0..10_000_000 {
        std::hint::black_box(clock.now());
    }
    let per_read = start.elapsed().as_nanos() as f64 / 10_000_000.0;
    println!(
        "\ndecisions/s: requests decided per second by all threads together, in millions.\n\
         allowed/s, denied/s: of them, those admitted and those refused.\n\
         allowed: requests admitted over the whole scenario.\n\
         quota allows: the most the scenario's quotas admit over that time (a limit per window \
         for every window the run touched,\n    or a burst plus the rate for every client that \
         asked); a scenario that admits more stops the run.\n\
         \nEvery scenario admitted no more than its quota allows. One clock read takes {per_read:.1} \
         ns here."
    );
}
