//! A flood of new keys against each overflow policy: what happens to new legitimate clients when
//! a keyed table is full.
//!
//!     cargo run --release --example flood
//!
//! A table sized for 10 000 live clients, 10 requests per second each in bursts of 10, meets a
//! flood of keys that send one request each and never come back (spoofed addresses, random API
//! keys): 200 a millisecond, so that 20 000 of them are live at any moment, twice the capacity.
//! Each millisecond a new legitimate client arrives too, and sends 5 requests a second from then
//! on, well within its quota; one abusive client sends a request every millisecond, far over
//! it. The clock is simulated (a `ManualClock`), so every run prints the same figures.
//!
//! Under `Overflow::Deny` the flood holds every slot, and new clients are turned away as long as
//! it lasts. Under `Overflow::EvictLeastConstrained` (the default) a new client takes the slot
//! of a flood key that is not being limited, so every legitimate request is admitted; the abuser,
//! who is being limited, keeps its state through the flood under both.

use std::time::Duration;

use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Overflow, Quota};

/// What one policy made of the flood.
struct Outcome {
    legit_sent: u64,
    legit_admitted: u64,
    legit_overflowed: u64,
    flood_admitted: u64,
    abuser_admitted: u64,
    overflows: u64,
    evictions: u64,
}

const SECONDS: u64 = 10;
const FLOOD_PER_MS: u64 = 200;

fn run(policy: Overflow) -> Outcome {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10)
        .and_then(|q| q.with_burst(10))
        .expect("valid quota");
    let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
        .capacity(10_000)
        .overflow(policy)
        .clock(&clock)
        // Fixed seeds, so that every run places the keys alike.
        .hasher(ahash::RandomState::with_seeds(1, 2, 3, 4))
        .build()
        .expect("allocates");
    // Keys: the abuser is 0, legitimate clients 1..., flood keys from 1 << 40 on.
    const ABUSER: u64 = 0;
    let mut flood_key = 1u64 << 40;
    let mut outcome = Outcome {
        legit_sent: 0,
        legit_admitted: 0,
        legit_overflowed: 0,
        flood_admitted: 0,
        abuser_admitted: 0,
        overflows: 0,
        evictions: 0,
    };
    for ms in 0..SECONDS * 1_000 {
        for _ in 0..FLOOD_PER_MS {
            flood_key += 1;
            outcome.flood_admitted += u64::from(limiter.check_key(&flood_key).is_ok());
        }
        // Client c arrived at millisecond c - 1 and sends every 200 ms from then on.
        for client in 1..=ms + 1 {
            if (ms + 1 - client) % 200 == 0 {
                outcome.legit_sent += 1;
                match limiter.check_key(&client) {
                    Ok(()) => outcome.legit_admitted += 1,
                    Err(denied) => outcome.legit_overflowed += u64::from(denied.is_overflow()),
                }
            }
        }
        outcome.abuser_admitted += u64::from(limiter.check_key(&ABUSER).is_ok());
        clock.advance(Duration::from_millis(1));
    }
    let stats = limiter.stats();
    outcome.overflows = stats.overflows;
    outcome.evictions = stats.evictions;
    outcome
}

fn main() {
    println!(
        "A table for 10 000 clients (10/s, bursts of 10) under a flood of {} one-request keys \
         a second, for {SECONDS} s,\nwith a new client arriving each millisecond (5 requests a \
         second each) and one abuser (1 000 a second).\n",
        FLOOD_PER_MS * 1_000
    );
    println!(
        "{:24} {:>22} {:>16} {:>16} {:>12} {:>12}",
        "policy",
        "clients' requests in",
        "flood admitted",
        "abuser admitted",
        "overflows",
        "evictions"
    );
    // The most the abuser may get: its burst, and one request per 100 ms after it.
    let abuser_most = 10 + SECONDS * 10;
    for policy in [Overflow::Deny, Overflow::EvictLeastConstrained] {
        let o = run(policy);
        let share = o.legit_admitted as f64 / o.legit_sent as f64;
        println!(
            "{:24} {:>13} ({:>5.1}%) {:>16} {:>16} {:>12} {:>12}",
            match policy {
                Overflow::Deny => "Deny",
                _ => "EvictLeastConstrained",
            },
            o.legit_admitted,
            100.0 * share,
            o.flood_admitted,
            o.abuser_admitted,
            o.overflows,
            o.evictions
        );
        assert!(
            o.abuser_admitted <= abuser_most,
            "the abuser got its quota back"
        );
        assert_eq!(
            o.legit_sent - o.legit_admitted,
            o.legit_overflowed,
            "a client within its quota was denied by its quota"
        );
    }
    println!(
        "\nclients' requests in: of the {} that new clients sent within their quota; every one \
         refused was refused for want of room.\nabuser admitted: at most {abuser_most} (its \
         burst, then one per 100 ms) under either policy.",
        run(Overflow::Deny).legit_sent
    );
}
