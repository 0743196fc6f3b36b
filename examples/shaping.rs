//! Shaping: a bursty producer smoothed to a steady rate by waiting instead of rejecting.
//!
//!     cargo run --release --features tokio --example shaping
//!
//! Every two seconds a burst of 350 requests arrives at once (half way into the second); a limit of 200 per second (bursts
//! of 10) is in front of the upstream. Each request is a tokio task that waits for its turn
//! (`until_ready`, giving up after 3 s) and is then sent. The producer averages 175 per second,
//! so nothing is dropped: the bursts are spread over the gaps between them. Each second it
//! prints:
//!
//! - **arrived**: requests produced in that second;
//! - **sent**: requests whose turn came in that second (they woke then and were sent);
//! - **waiting**: requests still waiting for their turn at the end of the second;
//! - **wait p50 / max**: how long the requests sent in that second waited, median and longest.
//!
//! At the end it checks the schedule against the quota: in no one-second window did more turns
//! fall than the burst plus one second's rate.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tollgate::{Quota, RateLimiter};

const RATE: u64 = 200;
const BURST: u64 = 10;
const BURSTS: u64 = 4;
const BURST_SIZE: u64 = 350;
const EVERY: Duration = Duration::from_secs(2);
const SECONDS: u64 = BURSTS * 2 + 1;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = Arc::new(RateLimiter::gcra(
        Quota::per_second(RATE)?.with_burst(BURST)?,
    ));
    let start = Instant::now();
    // Per second: arrivals, and (wake time, wait) of every request sent; every turn's time.
    let arrived: Arc<Vec<AtomicU64>> = Arc::new((0..SECONDS).map(|_| AtomicU64::new(0)).collect());
    let sent = Arc::new(Mutex::new(Vec::<(Duration, Duration)>::new()));
    let turns = Arc::new(Mutex::new(Vec::<u64>::new()));
    let waiting = Arc::new(AtomicU64::new(0));
    let dropped = Arc::new(AtomicU64::new(0));

    let producer = {
        let (limiter, arrived, sent, turns, waiting, dropped) = (
            Arc::clone(&limiter),
            Arc::clone(&arrived),
            Arc::clone(&sent),
            Arc::clone(&turns),
            Arc::clone(&waiting),
            Arc::clone(&dropped),
        );
        tokio::spawn(async move {
            for burst in 0..BURSTS {
                // Half way into a second, so that the table's rows fall between bursts.
                let at = start + Duration::from_millis(500) + EVERY * burst as u32;
                tokio::time::sleep_until(at.into()).await;
                for _ in 0..BURST_SIZE {
                    let second = start.elapsed().as_secs().min(SECONDS - 1);
                    arrived[second as usize].fetch_add(1, Relaxed);
                    let (limiter, sent, turns, waiting, dropped) = (
                        Arc::clone(&limiter),
                        Arc::clone(&sent),
                        Arc::clone(&turns),
                        Arc::clone(&waiting),
                        Arc::clone(&dropped),
                    );
                    waiting.fetch_add(1, Relaxed);
                    tokio::spawn(async move {
                        let asked = Instant::now();
                        match limiter.reserve(1, Duration::from_secs(3)) {
                            Ok(turn) => {
                                turns.lock().unwrap().push(turn.ready_at().as_nanos());
                                turn.ready().await;
                                // ... send the request upstream here ...
                                sent.lock()
                                    .unwrap()
                                    .push((start.elapsed(), asked.elapsed()));
                            }
                            Err(_) => {
                                dropped.fetch_add(1, Relaxed);
                            }
                        }
                        waiting.fetch_sub(1, Relaxed);
                    });
                }
            }
        })
    };

    println!("{RATE} per second (bursts of {BURST}); {BURST_SIZE} requests arrive every {EVERY:?}");
    println!("second  arrived  sent  waiting  wait p50  wait max");
    for second in 0..SECONDS {
        tokio::time::sleep_until((start + Duration::from_secs(second + 1)).into()).await;
        let mut waits: Vec<Duration> = sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| at.as_secs() == second)
            .map(|&(_, wait)| wait)
            .collect();
        waits.sort_unstable();
        let p50 = waits.get(waits.len() / 2).copied().unwrap_or_default();
        let max = waits.last().copied().unwrap_or_default();
        println!(
            "{second:>6}  {:>7}  {:>4}  {:>7}  {:>6} ms  {:>6} ms",
            arrived[second as usize].load(Relaxed),
            waits.len(),
            waiting.load(Relaxed),
            p50.as_millis(),
            max.as_millis(),
        );
    }
    producer.await?;

    // The schedule itself: in any one-second window, at most BURST + RATE turns.
    let mut turns = turns.lock().unwrap().clone();
    turns.sort_unstable();
    let worst = (0..turns.len())
        .map(|i| turns[i..].partition_point(|&t| t < turns[i] + 1_000_000_000))
        .max()
        .unwrap_or(0) as u64;
    let (total, dropped) = (sent.lock().unwrap().len() as u64, dropped.load(Relaxed));
    println!(
        "\n{total} of {} requests sent, {dropped} gave up; at most {worst} turns in any one-second \
         window (the quota allows {})",
        BURSTS * BURST_SIZE,
        BURST + RATE
    );
    if worst > BURST + RATE {
        return Err("the schedule broke the quota".into());
    }
    if total != BURSTS * BURST_SIZE {
        return Err("requests were lost or gave up".into());
    }
    println!("Every request was sent, and the schedule stayed within the quota.");
    Ok(())
}
