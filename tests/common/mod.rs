//! What several test files share.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Barrier;

/// A reset of every key racing requests from `threads` threads, `rounds` times over, for keys
/// `0..threads * keys` that are all exhausted at the start and whose time stands still: thread
/// `t` checks its own keys (`t * keys..`) over and over while `reset` runs, then takes what is
/// left of each. Each key's request is admitted only after its key's reset, so each key must
/// admit exactly `limit` requests per round, however the requests fall around the reset; the
/// keys are exhausted again when a round ends.
pub fn reset_of_every_key_races_requests(
    threads: u64,
    keys: u64,
    limit: u64,
    rounds: usize,
    check: impl Fn(u64) -> bool + Sync,
    reset: impl Fn(),
) {
    for round in 0..rounds {
        let (done, barrier) = (AtomicBool::new(false), Barrier::new(threads as usize + 1));
        let admitted: Vec<Vec<u64>> = std::thread::scope(|s| {
            let checkers: Vec<_> = (0..threads)
                .map(|t| {
                    let (check, done, barrier) = (&check, &done, &barrier);
                    s.spawn(move || {
                        let mut admitted = vec![0; keys as usize];
                        let mut take = |i: u64| {
                            let ok = check(t * keys + i);
                            admitted[i as usize] += u64::from(ok);
                            ok
                        };
                        barrier.wait();
                        while !done.load(SeqCst) {
                            for i in 0..keys {
                                take(i);
                            }
                        }
                        // The reset is over: take what is left of every key.
                        for i in 0..keys {
                            while take(i) {}
                        }
                        admitted
                    })
                })
                .collect();
            barrier.wait();
            reset();
            done.store(true, SeqCst);
            checkers.into_iter().map(|c| c.join().unwrap()).collect()
        });
        for (t, counts) in admitted.iter().enumerate() {
            for (i, &n) in counts.iter().enumerate() {
                let key = t as u64 * keys + i as u64;
                assert_eq!(n, limit, "round {round}, key {key}");
            }
        }
    }
}
