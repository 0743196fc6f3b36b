//! Snapshots: limiters saved, restored after a simulated downtime on a fresh clock, and held
//! to what the original would have decided at the same moments; corrupted and foreign input
//! refused.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, Clock, FixedWindow, Gcra, KeyedRateLimiter, KeyedSlidingLog, ManualClock, Quota,
    SlidingWindow, SnapshotError,
};

const WALL: u64 = 1_750_000_000_000_000_000;
const KEYS: u64 = 12;

fn seeded() -> ahash::RandomState {
    ahash::RandomState::with_seeds(11, 22, 33, 44)
}

fn table<A: Algorithm>(algorithm: A) -> KeyedRateLimiter<u64, A, ManualClock> {
    KeyedRateLimiter::<u64>::builder(algorithm)
        .capacity(256)
        .threads(1)
        .hasher(seeded())
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

fn restored<A: Algorithm>(
    algorithm: A,
    snapshot: &[u8],
    clock: Duration,
    wall: u64,
) -> KeyedRateLimiter<u64, A, ManualClock> {
    KeyedRateLimiter::<u64>::builder(algorithm)
        .capacity(256)
        .threads(1)
        .hasher(seeded())
        .clock(ManualClock::starting_at(clock))
        .restore_at(snapshot, wall)
        .unwrap()
}

/// Requests: the time moved (in hundredths of the quota's period), the key, the cost.
fn requests() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
    prop::collection::vec((0u64..60, 0..KEYS, 0u64..4), 1..80)
}

fn quota() -> impl Strategy<Value = Quota> {
    let period = prop_oneof![
        (1u64..1_000).prop_map(Duration::from_millis),
        (1u64..200_000).prop_map(Duration::from_secs),
    ];
    (1u64..50, period, 1u64..20).prop_filter_map("valid", |(limit, period, burst)| {
        Quota::new(limit, period).ok()?.with_burst(burst).ok()
    })
}

/// Replays `requests` on `limiter` from its clock's time.
fn replay<A: Algorithm>(
    limiter: &KeyedRateLimiter<u64, A, ManualClock>,
    period: Duration,
    requests: &[(u64, u64, u64)],
) {
    for &(step, key, cost) in requests {
        limiter.clock().advance(period * step as u32 / 100);
        let _ = limiter.decide_key(&key, cost.min(limiter.algorithm().capacity()));
    }
}

/// The decisions a peek reports for every key and cost, now.
fn peeks<A: Algorithm>(limiter: &KeyedRateLimiter<u64, A, ManualClock>) -> Vec<tollgate::Decision> {
    let capacity = limiter.algorithm().capacity();
    (0..KEYS)
        .flat_map(|key| [1, capacity].map(move |cost| (key, cost)))
        .map(|(key, cost)| limiter.peek_key_n(&key, cost).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// GCRA's schedules move exactly: restored after a downtime `down` on a clock that reads
    /// anything, a limiter decides at every later moment as the original does at the same one.
    #[test]
    fn gcra_states_move_exactly(
        quota in quota(),
        requests in requests(),
        down in 0u64..3_000,
        clock in 0u64..1_000_000_000_000,
    ) {
        let gcra = Gcra::from(quota);
        let original = table(gcra);
        replay(&original, quota.period(), &requests);
        let saved = original.snapshot_at(WALL);
        let down = quota.period() * down as u32 / 1_000;
        let copy = restored(gcra, &saved, Duration::from_nanos(clock), WALL + down.as_nanos() as u64);
        original.clock().advance(down);
        for step in [0, 1, 30, 100, 250] {
            let later = quota.period() * step / 100;
            prop_assert_eq!(peeks(&copy), peeks(&original), "{:?} later", later);
            copy.clock().advance(later);
            original.clock().advance(later);
        }
    }

    /// A window counter's counts go to the new clock's windows they overlap: the restored
    /// limiter admits nothing the original would not, at any later moment; and when the clocks'
    /// windows line up (the shift a whole number of windows), it decides exactly as the
    /// original does.
    #[test]
    fn window_counts_move_conservatively(
        quota in quota(),
        requests in requests(),
        down in 0u64..3_000,
        offset in 0u64..1_000,
        sliding in any::<bool>(),
    ) {
        let period = quota.period();
        let save_and_compare = |aligned: bool| -> Result<(), TestCaseError> {
            macro_rules! check {
                ($algorithm:expr) => {{
                    let algorithm = $algorithm;
                    let original = table(algorithm);
                    replay(&original, period, &requests);
                    let saved = original.snapshot_at(WALL);
                    let down = period * down as u32 / 1_000;
                    // The new clock a whole number of windows ahead of the old one at the same
                    // moment (aligned), or anywhere (not).
                    let at_save = Duration::from_nanos(original.clock().now().as_nanos());
                    let clock = if aligned {
                        period * 7 + at_save + down
                    } else {
                        period * offset as u32 / 100 + Duration::from_nanos(offset)
                    };
                    let copy = restored(algorithm, &saved, clock, WALL + down.as_nanos() as u64);
                    original.clock().advance(down);
                    for step in [0, 1, 30, 99, 100, 150, 210] {
                        let (got, want) = (peeks(&copy), peeks(&original));
                        if aligned {
                            prop_assert_eq!(&got, &want, "step {}", step);
                        }
                        for (got, want) in got.iter().zip(&want) {
                            prop_assert!(
                                !got.is_allowed() || want.is_allowed(),
                                "step {}: restored {:?}, original {:?}", step, got, want
                            );
                            prop_assert!(got.remaining() <= want.remaining());
                        }
                        let later = period * step / 100;
                        copy.clock().advance(later);
                        original.clock().advance(later);
                    }
                }};
            }
            if sliding {
                let Ok(window) = SlidingWindow::new(&quota) else { return Ok(()) };
                check!(window)
            } else {
                check!(FixedWindow::new(&quota).unwrap())
            }
            Ok(())
        };
        save_and_compare(true)?;
        save_and_compare(false)?;
    }

    /// A sliding log's stamps move exactly.
    #[test]
    fn log_stamps_move_exactly(
        quota in quota(),
        requests in requests(),
        down in 0u64..3_000,
        extra in 0u64..1_000_000_000,
    ) {
        let period = quota.period();
        let build = |clock: Duration| {
            KeyedSlidingLog::<u64>::builder(&quota)
                .capacity(256)
                .threads(1)
                .hasher(seeded())
                .clock(ManualClock::starting_at(clock))
        };
        let original = build(Duration::ZERO).build().unwrap();
        for &(step, key, cost) in &requests {
            original.clock().advance(period * step as u32 / 100);
            let _ = original.decide_key(&key, cost.min(quota.limit()));
        }
        let saved = original.snapshot_at(WALL);
        let down = period * down as u32 / 1_000;
        // A new clock past a period, so that no stamp moves before its epoch.
        let copy = build(period * 2 + Duration::from_nanos(extra))
            .restore_at(&saved, WALL + down.as_nanos() as u64)
            .unwrap();
        original.clock().advance(down);
        for step in [0, 1, 30, 100, 250] {
            for key in 0..KEYS {
                for cost in [1, quota.limit()] {
                    prop_assert_eq!(
                        copy.peek_key_n(&key, cost).unwrap(),
                        original.peek_key_n(&key, cost).unwrap()
                    );
                }
            }
            let later = period * step / 100;
            copy.clock().advance(later);
            original.clock().advance(later);
        }
    }
}

/// A snapshot cut short anywhere, or with any one bit flipped, is refused with an error.
#[test]
fn every_truncation_and_flipped_bit_is_refused() {
    let quota = Quota::per_hour(5).unwrap();
    let original = table(Gcra::from(quota));
    for key in 0..20 {
        original.check_key_n(&key, 1 + key % 5).unwrap();
    }
    let saved = original.snapshot();
    assert!(saved.len() > 20 * 24);
    for len in 0..saved.len() {
        let err = restored_err(Gcra::from(quota), &saved[..len]);
        assert!(
            matches!(
                err,
                SnapshotError::NotASnapshot | SnapshotError::Truncated | SnapshotError::Checksum
            ),
            "{len}: {err}"
        );
    }
    for bit in 0..saved.len() * 8 {
        let mut flipped = saved.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        restored_err(Gcra::from(quota), &flipped);
    }
}

fn restored_err<A: Algorithm>(algorithm: A, snapshot: &[u8]) -> SnapshotError {
    KeyedRateLimiter::<u64>::builder(algorithm)
        .capacity(256)
        .threads(1)
        .hasher(seeded())
        .clock(ManualClock::new())
        .restore(snapshot)
        .map(|_| ())
        .unwrap_err()
}

/// A snapshot restored into a limiter configured otherwise is refused, naming the difference.
#[test]
fn another_configuration_is_refused() {
    let quota = Quota::per_hour(5).unwrap();
    let original = table(Gcra::from(quota));
    original.check_key(&1).unwrap();
    let saved = original.snapshot();
    let mismatch = |what| SnapshotError::Mismatch { what };
    assert_eq!(
        restored_err(Gcra::from(Quota::per_hour(6).unwrap()), &saved),
        mismatch("quota")
    );
    assert_eq!(
        restored_err(FixedWindow::new(&quota).unwrap(), &saved),
        mismatch("algorithm")
    );
    let other_hasher = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
        .capacity(256)
        .threads(1)
        .restore(&saved);
    assert_eq!(other_hasher.map(|_| ()).unwrap_err(), mismatch("hasher"));
    let other_shape = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
        .capacity(100_000)
        .threads(1)
        .hasher(seeded())
        .restore(&saved);
    assert_eq!(other_shape.map(|_| ()).unwrap_err(), mismatch("shape"));
    let tiered = KeyedRateLimiter::<u64>::builder(Gcra::from(quota))
        .capacity(256)
        .threads(1)
        .hasher(seeded())
        .tier(Quota::per_hour(50).unwrap())
        .restore(&saved);
    assert_eq!(tiered.map(|_| ()).unwrap_err(), mismatch("tiers"));
    let log = KeyedSlidingLog::<u64>::builder(&quota)
        .capacity(256)
        .threads(1)
        .hasher(seeded())
        .restore(&saved);
    assert_eq!(log.map(|_| ()).unwrap_err(), mismatch("kind"));
    assert_eq!(
        restored_err(Gcra::from(quota), b"tollgate\x07\x00"),
        SnapshotError::Version { found: 7 }
    );
}

/// A restored limiter is a limiter like any other: its keys are where lookups find them, new
/// keys go in beside them, and its statistics count them.
#[test]
fn a_restored_table_works_on() {
    let quota = Quota::per_day(3).unwrap();
    let original = table(Gcra::from(quota));
    for key in 0..100 {
        original.check_key_n(&key, 3).unwrap();
    }
    let copy = restored(
        Gcra::from(quota),
        &original.snapshot_at(WALL),
        Duration::ZERO,
        WALL,
    );
    assert_eq!(copy.stats().occupied, 100);
    for key in 0..100 {
        assert!(copy.check_key(&key).is_err(), "{key}");
    }
    for key in 100..150 {
        copy.check_key(&key).unwrap();
    }
    assert_eq!(copy.stats().occupied, 150);
    // A day later, nothing is left to restore.
    let later = restored(
        Gcra::from(quota),
        &copy.snapshot_at(WALL),
        Duration::ZERO,
        WALL + 86_400_000_000_000,
    );
    assert_eq!(later.stats().occupied, 0);
}
