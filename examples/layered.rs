//! Layered limits: per user, per tenant and global, checked all or nothing.
//!
//!     cargo run --release --example layered
//!
//! Three tenants of ten users each send requests on a simulated clock for ten seconds. Every
//! request passes four layers in one `check_all`: its user's 10 per second (bursts of 10) and 60
//! per minute (sliding window), its tenant's 50 per second, and 110 per second in all. One user
//! of tenant 0 sends 30 per second, the other users of tenant 0 2 each, tenant 1's users 9 each,
//! tenant 2's 6 each: 198 per second offered in all. Each second the example prints what
//! was admitted and which layer refused the rest:
//!
//! - **admitted**: requests that passed every layer;
//! - **user/s, user/min, tenant, global**: requests refused, by the layer the refusal named (the
//!   one with the longest wait).
//!
//! Then it checks the all-or-nothing property: every layer's state equals that of a twin layer
//! fed only the admitted requests, so a refused request consumed nothing anywhere.

use std::time::Duration;

use tollgate::layers::Layers;
use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter, SlidingWindow};

const SECONDS: u64 = 10;
const TENANTS: u64 = 3;
const USERS: u64 = 10;
/// Requests per second of each user: the abuser (user 0 of tenant 0), then by tenant.
fn rate(tenant: u64, user: u64) -> u64 {
    match (tenant, user) {
        (0, 0) => 30,
        (0, _) => 2,
        (1, _) => 9,
        _ => 6,
    }
}

struct Limits<'c> {
    per_user: KeyedRateLimiter<u64, Gcra, &'c ManualClock>,
    per_user_minute: KeyedRateLimiter<u64, SlidingWindow, &'c ManualClock>,
    per_tenant: KeyedRateLimiter<u64, Gcra, &'c ManualClock>,
    global: RateLimiter<Gcra, &'c ManualClock>,
}

impl<'c> Limits<'c> {
    fn new(clock: &'c ManualClock) -> Result<Limits<'c>, Box<dyn std::error::Error>> {
        Ok(Limits {
            per_user: KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(10)?))
                .capacity(1_000)
                .clock(clock)
                .build()?,
            per_user_minute: KeyedRateLimiter::<u64>::builder(SlidingWindow::new(
                &Quota::per_minute(60)?,
            )?)
            .capacity(1_000)
            .clock(clock)
            .build()?,
            per_tenant: KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(50)?))
                .capacity(100)
                .clock(clock)
                .build()?,
            global: RateLimiter::with_clock(Gcra::from(Quota::per_second(110)?), clock),
        })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::new();
    let limits = Limits::new(&clock)?;
    // The twins see only what the layered check admitted, one layer at a time.
    let twins = Limits::new(&clock)?;

    println!("second  admitted  user/s  user/min  tenant  global");
    let mut totals = [0u64; 5];
    for second in 0..SECONDS {
        let mut row = [0u64; 5];
        // Each millisecond, every user whose rate says so sends one request.
        for ms in 0..1_000u64 {
            clock.set(Duration::from_millis(second * 1_000 + ms));
            for tenant in 0..TENANTS {
                for user in 0..USERS {
                    let r = rate(tenant, user);
                    // Evenly spaced: a request when the count of the rate crosses an integer.
                    if (ms + 1) * r / 1_000 == ms * r / 1_000 {
                        continue;
                    }
                    let id = tenant * USERS + user;
                    let layers = (
                        limits.per_user.layer(&id),
                        limits.per_user_minute.layer(&id),
                        limits.per_tenant.layer(&tenant),
                        &limits.global,
                    );
                    match layers.check_all(1) {
                        Ok(()) => {
                            row[0] += 1;
                            twins.per_user.check_key(&id)?;
                            twins.per_user_minute.check_key(&id)?;
                            twins.per_tenant.check_key(&tenant)?;
                            twins.global.check()?;
                        }
                        Err(refused) => row[1 + refused.layer()] += 1,
                    }
                }
            }
        }
        println!(
            "{second:>6}  {:>8}  {:>6}  {:>8}  {:>6}  {:>6}",
            row[0], row[1], row[2], row[3], row[4]
        );
        for (total, n) in totals.iter_mut().zip(row) {
            *total += n;
        }
    }

    // All or nothing: each layer holds exactly what its twin, fed only admissions, holds.
    let mut same = limits.global.peek() == twins.global.peek();
    for id in 0..TENANTS * USERS {
        same &= limits.per_user.peek_key(&id) == twins.per_user.peek_key(&id);
        same &= limits.per_user_minute.peek_key(&id) == twins.per_user_minute.peek_key(&id);
    }
    for tenant in 0..TENANTS {
        same &= limits.per_tenant.peek_key(&tenant) == twins.per_tenant.peek_key(&tenant);
    }
    println!(
        "\n{} admitted, {} refused ({} by users' per-second limits, {} per-minute, {} by \
         tenants, {} globally)",
        totals[0],
        totals[1..].iter().sum::<u64>(),
        totals[1],
        totals[2],
        totals[3],
        totals[4]
    );
    if !same {
        return Err("a refused request consumed something in a layer".into());
    }
    println!("Every layer holds exactly the admitted requests: refused ones consumed nothing.");
    Ok(())
}
