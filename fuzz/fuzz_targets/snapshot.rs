//! Snapshot input: arbitrary bytes restored as each kind of limiter give a limiter or an error,
//! never a panic; and so do arbitrary entries behind a valid header with a valid checksum
//! (`reference::seal_snapshot`), which random bytes alone almost never reach. A limiter
//! restored from entries is then used: its decisions must not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate::{FixedWindow, Gcra, KeyedRateLimiter, KeyedSlidingLog, Quota, SlidingWindow};

fn seeded() -> ahash::RandomState {
    ahash::RandomState::with_seeds(1, 2, 3, 4)
}

/// The length of a snapshot's header, up to its entry count.
const HEADER: usize = 8 + 2 + 1 + 1 + 3 * 8 + 8 + 8 * 8 + 2 * 4 + 2 * 8;

/// `data` as the entries of a snapshot of `empty` (a snapshot of no entries): the entry count
/// from its first 8 bytes, the rest as they are, the checksum made to match.
fn spliced(empty: &[u8], data: &[u8]) -> Vec<u8> {
    let mut bytes = empty[..HEADER].to_vec();
    let (count, rest) = data.split_at(data.len().min(8));
    let mut word = [0u8; 8];
    word[..count.len()].copy_from_slice(count);
    // Small counts mostly, so that the entries are read.
    bytes.extend_from_slice(&(u64::from_le_bytes(word) % 64).to_le_bytes());
    bytes.extend_from_slice(rest);
    bytes.extend_from_slice(&[0; 8]);
    tollgate::reference::seal_snapshot(&mut bytes);
    bytes
}

macro_rules! table {
    ($algorithm:expr, $data:expr) => {{
        let builder = || {
            KeyedRateLimiter::<u64>::builder($algorithm)
                .capacity(64)
                .threads(1)
                .hasher(seeded())
        };
        let _ = builder().restore($data);
        let empty = builder().build().unwrap().snapshot();
        if let Ok(limiter) = builder().restore(&spliced(&empty, $data)) {
            for key in 0..16u64 {
                let _ = limiter.decide_key(&key, 1);
                let _ = limiter.peek_key_n(&key, 2);
            }
            let _ = limiter.snapshot();
        }
    }};
}

fuzz_target!(|data: &[u8]| {
    let quota = Quota::per_minute(5).unwrap().with_burst(3).unwrap();
    table!(Gcra::from(quota), data);
    table!(SlidingWindow::new(&quota).unwrap(), data);
    table!(FixedWindow::new(&quota).unwrap(), data);
    let builder = || {
        KeyedSlidingLog::<u64>::builder(&quota)
            .capacity(64)
            .threads(1)
            .hasher(seeded())
    };
    let _ = builder().restore(data);
    let empty = builder().build().unwrap().snapshot();
    if let Ok(log) = builder().restore(&spliced(&empty, data)) {
        for key in 0..16u64 {
            let _ = log.decide_key(&key, 1);
        }
        let _ = log.snapshot();
    }
});
