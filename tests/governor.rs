//! tollgate's GCRA against governor's, the Rust crate most users come from: for a quota whose
//! emission interval (period / limit) is a whole number of nanoseconds, the two decide every
//! request alike, with the same remaining capacity after an admission and the same wait after a
//! denial, keyed and direct. Where it is not, governor rounds its interval down and admits a little
//! more than the quota says; tollgate rounds it up and never does. README's "Coming from governor"
//! rests on these tests.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock as _, FakeRelativeClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::state::InMemoryState;
use proptest::prelude::*;
use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

/// What one request came to, in terms both crates can state: admitted with this much left,
/// denied until this much time has passed, or a cost larger than the burst.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Admitted { remaining: u64 },
    Denied { wait: Duration },
    NeverFits,
}

fn tollgate_outcome(
    decision: Result<tollgate::Decision, tollgate::InsufficientCapacity>,
) -> Outcome {
    match decision {
        Ok(d) if d.is_allowed() => Outcome::Admitted {
            remaining: d.remaining(),
        },
        Ok(d) => Outcome::Denied {
            wait: d.retry_after(),
        },
        Err(_) => Outcome::NeverFits,
    }
}

type Snapshot = governor::middleware::StateSnapshot;
type NotUntil = governor::NotUntil<<FakeRelativeClock as governor::clock::Clock>::Instant>;

fn governor_outcome(
    decision: Result<Result<Snapshot, NotUntil>, governor::InsufficientCapacity>,
    clock: &FakeRelativeClock,
) -> Outcome {
    match decision {
        Ok(Ok(snapshot)) => Outcome::Admitted {
            remaining: u64::from(snapshot.remaining_burst_capacity()),
        },
        Ok(Err(not_until)) => Outcome::Denied {
            wait: not_until.wait_time_from(clock.now()),
        },
        Err(_) => Outcome::NeverFits,
    }
}

/// The same quota in both crates: `limit` per `limit * interval`, bursts of `burst`.
fn quotas(limit: u64, interval: u64, burst: u32) -> (Quota, governor::Quota) {
    let ours = Quota::new(limit, Duration::from_nanos(limit * interval))
        .and_then(|q| q.with_burst(u64::from(burst)))
        .unwrap();
    assert_eq!(ours.emission_interval(), Duration::from_nanos(interval));
    let theirs = governor::Quota::with_period(Duration::from_nanos(interval))
        .unwrap()
        .allow_burst(NonZeroU32::new(burst).unwrap());
    (ours, theirs)
}

/// Replays `ops` (a clock step in hundredths of the interval, a key, a cost) through a keyed
/// limiter and a direct one of each crate, on clocks that move together, demanding the same
/// outcome of every request from both crates.
fn replay(
    limit: u64,
    interval: u64,
    burst: u32,
    ops: &[(u64, u8, u32)],
) -> Result<(), TestCaseError> {
    let (ours, theirs) = quotas(limit, interval, burst);
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::<u8>::builder(Gcra::from(ours))
        .capacity(1_000)
        .clock(&clock)
        .build()
        .unwrap();
    let direct = RateLimiter::with_clock(Gcra::from(ours), &clock);

    let their_clock = FakeRelativeClock::default();
    let their_keyed = governor::RateLimiter::<_, _, _, StateInformationMiddleware>::new(
        theirs,
        DefaultKeyedStateStore::<u8>::default(),
        their_clock.clone(),
    );
    let their_direct = governor::RateLimiter::<_, _, _, StateInformationMiddleware>::new(
        theirs,
        InMemoryState::default(),
        their_clock.clone(),
    );

    for (i, &(step, key, cost)) in ops.iter().enumerate() {
        let step = Duration::from_nanos(step * interval / 100);
        clock.advance(step);
        their_clock.advance(step);
        let n = NonZeroU32::new(cost).unwrap();

        let (mine, theirs) = (
            tollgate_outcome(keyed.decide_key(&key, u64::from(cost))),
            governor_outcome(their_keyed.check_key_n(&key, n), &their_clock),
        );
        prop_assert_eq!(&mine, &theirs, "keyed, op {} ({:?})", i, (step, key, cost));

        let (mine, theirs) = (
            tollgate_outcome(direct.decide(u64::from(cost))),
            governor_outcome(their_direct.check_n(n), &their_clock),
        );
        prop_assert_eq!(&mine, &theirs, "direct, op {} ({:?})", i, (step, key, cost));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Random quotas (an interval of 1 µs to 10 ms; mostly small bursts, below, at and above the
    /// limit) and random traffic over a few keys: mostly costs of 1 and 2, some up to past the
    /// burst; steps mostly of none to half an interval, which drain the keys, some of up to 10
    /// intervals, which refill them.
    #[test]
    fn gcra_decides_as_governor_does(
        limit in 1u64..100,
        interval in 1_000u64..10_000_000,
        burst in prop_oneof![2 => 1u32..8, 1 => 8u32..120],
        ops in prop::collection::vec(
            (prop_oneof![4 => Just(0u64), 4 => 0u64..50, 1 => 0u64..1_000], 0u8..4, prop_oneof![8 => 1u32..3, 1 => 1u32..125]),
            1..400,
        ),
    ) {
        replay(limit, interval, burst, &ops)?;
    }
}

/// A quota of 3 per second has no whole-nanosecond interval. Governor rounds it down to
/// 333 333 333 ns, so it admits the request after a burst of 3 before a third of a second has
/// passed: 4 requests in 333 333 333 ns, where the quota allows 3. tollgate rounds it up to
/// 333 333 334 ns and admits that request at the first whole nanosecond after a third of a
/// second, and says so in the denial just before.
#[test]
fn where_the_interval_does_not_divide_governor_admits_early() {
    let clock = ManualClock::new();
    let ours = RateLimiter::with_clock(Gcra::from(Quota::per_second(3).unwrap()), &clock);
    let their_clock = FakeRelativeClock::default();
    let theirs = governor::RateLimiter::direct_with_clock(
        governor::Quota::per_second(NonZeroU32::new(3).unwrap()),
        their_clock.clone(),
    );
    for _ in 0..3 {
        assert!(ours.check().is_ok());
        assert!(theirs.check().is_ok());
    }
    let step = Duration::from_nanos(333_333_333);
    clock.advance(step);
    their_clock.advance(step);
    assert!(theirs.check().is_ok(), "governor admits at 333 333 333 ns");
    let denied = ours.check().unwrap_err();
    assert_eq!(denied.retry_after(), Duration::from_nanos(1));

    clock.advance(Duration::from_nanos(1));
    assert!(ours.check().is_ok(), "tollgate admits at 333 333 334 ns");
}
