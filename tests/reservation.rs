//! Reservations against their definition, `reference::LendingBucket`: random sequences of
//! reservations (costs from 0 to past the burst, waits from none to unbounded), cancels of any
//! live reservation in any order, and a clock that moves both ways, through the direct limiter
//! and through a keyed one (a model per key): the same turns, the same denials and waits, the
//! same cancels given back, and the same tokens left after every step. Then the schedule under
//! threads at frozen time (exact turns, none shared, none lost), arrival order, and the edges.

use std::collections::HashMap;
use std::sync::Barrier;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::reference::{Booking, LendingBucket};
use tollgate::{
    CheckError, Gcra, KeyedRateLimiter, ManualClock, Nanos, Overflow, Quota, RateLimiter,
    Reservation,
};

#[derive(Clone, Debug)]
enum Op {
    /// Reserve for key `key` at `cost`, waiting at most `max_wait`, or, with `edge`, at most
    /// the wait the request needs plus `edge` nanoseconds (-1, 0 or 1).
    Reserve {
        key: u8,
        cost: u64,
        max_wait: Duration,
        edge: Option<i64>,
    },
    /// Cancel the live reservation at this index (modulo their number).
    Cancel(usize),
    /// Move the clock by this many microseconds (backwards if negative).
    Clock(i64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0u8..3, 0u64..12, 0u8..5, 0u64..3_000_000).prop_map(|(key, cost, kind, us)| Op::Reserve {
            key,
            cost,
            max_wait: match kind {
                0 => Duration::ZERO,
                1 => Duration::MAX,
                _ => Duration::from_micros(us),
            },
            edge: (kind == 4).then_some(us as i64 % 3 - 1),
        }),
        2 => (0usize..64).prop_map(Op::Cancel),
        2 => (-200_000i64..800_000).prop_map(Op::Clock),
    ];
    prop::collection::vec(op, 1..200)
}

fn quota() -> impl Strategy<Value = Quota> {
    (1u64..20, 1u64..2_000, 1u64..10).prop_map(|(limit, ms, burst)| {
        Quota::new(limit, Duration::from_millis(ms))
            .unwrap()
            .with_burst(burst)
            .unwrap()
    })
}

fn move_clock(clock: &ManualClock, us: i64) {
    let d = Duration::from_micros(us.unsigned_abs());
    if us >= 0 {
        clock.advance(d);
    } else {
        clock.rewind(d);
    }
}

/// The wait to allow: `max_wait`, or the one the model needs plus `edge` nanoseconds.
fn max_wait(
    model: &LendingBucket,
    now: Nanos,
    cost: u64,
    max_wait: Duration,
    edge: Option<i64>,
) -> Duration {
    let Some(edge) = edge else { return max_wait };
    let need = match model.clone().reserve(now, cost, Nanos::ZERO) {
        Booking::Denied { retry_after } => retry_after.as_nanos(),
        _ => 0,
    };
    Duration::from_nanos(need.saturating_add_signed(edge))
}

/// One reservation's outcome against the model's.
fn same_booking<'a>(
    got: Result<Reservation<'a, &'a ManualClock>, CheckError>,
    booking: Booking,
    live: &mut Vec<(u8, u64, Reservation<'a, &'a ManualClock>)>,
    key: u8,
) -> Result<(), TestCaseError> {
    match (got, booking) {
        (Ok(reservation), Booking::Ready { at, id }) => {
            prop_assert_eq!(reservation.ready_at(), at);
            if id != 0 {
                live.push((key, id, reservation));
            }
        }
        (Err(CheckError::Denied(denied)), Booking::Denied { retry_after }) => {
            prop_assert!(!denied.is_overflow());
            prop_assert_eq!(denied.retry_after(), retry_after.as_duration());
        }
        (Err(CheckError::InsufficientCapacity(_)), Booking::TooLarge) => {}
        (got, booking) => prop_assert!(false, "{:?} where the model says {:?}", got, booking),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn direct_reservations_are_the_lending_bucket(quota in quota(), ops in ops()) {
        let clock = ManualClock::starting_at(Duration::from_secs(10));
        let limiter = RateLimiter::with_clock(Gcra::from(quota), &clock);
        let mut model = LendingBucket::new(&quota);
        let mut live = Vec::new();
        for op in ops {
            match op {
                Op::Reserve { cost, max_wait: wait, edge, .. } => {
                    let max_wait = max_wait(&model, clock.now_nanos(), cost, wait, edge);
                    let booking = model.reserve(clock.now_nanos(), cost, Nanos::from_duration(max_wait));
                    same_booking(limiter.reserve(cost, max_wait), booking, &mut live, 0)?;
                }
                Op::Cancel(i) if !live.is_empty() => {
                    let (_, id, reservation) = live.remove(i % live.len());
                    prop_assert_eq!(reservation.cancel(), model.cancel(id), "cancel of {}", id);
                }
                Op::Cancel(_) => {}
                Op::Clock(us) => move_clock(&clock, us),
            }
            prop_assert_eq!(limiter.peek().remaining(), model.available(clock.now_nanos()));
        }
    }

    #[test]
    fn keyed_reservations_are_a_lending_bucket_per_key(quota in quota(), ops in ops()) {
        let clock = ManualClock::starting_at(Duration::from_secs(10));
        let limiter = KeyedRateLimiter::<u8>::builder(Gcra::from(quota))
            .capacity(64)
            .clock(&clock)
            .build()
            .unwrap();
        let mut models: HashMap<u8, LendingBucket> = HashMap::new();
        let mut live = Vec::new();
        for op in ops {
            match op {
                Op::Reserve { key, cost, max_wait: wait, edge } => {
                    let model = models.entry(key).or_insert_with(|| LendingBucket::new(&quota));
                    let max_wait = max_wait(model, clock.now_nanos(), cost, wait, edge);
                    let booking = model.reserve(clock.now_nanos(), cost, Nanos::from_duration(max_wait));
                    same_booking(limiter.reserve_key(&key, cost, max_wait), booking, &mut live, key)?;
                }
                Op::Cancel(i) if !live.is_empty() => {
                    let (key, id, reservation) = live.remove(i % live.len());
                    let model = models.get_mut(&key).unwrap();
                    prop_assert_eq!(reservation.cancel(), model.cancel(id), "cancel of {} for key {}", id, key);
                }
                Op::Cancel(_) => {}
                Op::Clock(us) => move_clock(&clock, us),
            }
            for key in 0..3u8 {
                let tokens = models.get(&key).map_or(quota.burst(), |m| m.available(clock.now_nanos()));
                prop_assert_eq!(limiter.peek_key(&key).remaining(), tokens, "key {}", key);
            }
        }
    }
}

/// The clock's reading as the limiters see it.
trait NowNanos {
    fn now_nanos(&self) -> Nanos;
}

impl NowNanos for ManualClock {
    fn now_nanos(&self) -> Nanos {
        tollgate::Clock::now(self)
    }
}

const MS: u64 = 1_000_000;

#[test]
fn a_large_request_keeps_its_place_in_a_stream_of_small_ones() {
    // 10 per second, bursts of 10: after the burst, a request of 10 reserved between small ones
    // goes after the small ones before it and before every small one after it.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(10).unwrap()), &clock);
    limiter.check_n(10).unwrap();
    let wait = Duration::from_secs(10);
    let turns: Vec<u64> = [1, 1, 10, 1, 1]
        .iter()
        .map(|&cost| limiter.reserve(cost, wait).unwrap().ready_at().as_nanos() / MS)
        .collect();
    // Each waits for its own cost to be refilled after those before it: 100 ms per unit.
    assert_eq!(turns, [100, 200, 1200, 1300, 1400]);
    // A plain check is not a reservation: it is refused while the queue is ahead of the clock.
    assert_eq!(
        limiter.check().unwrap_err().retry_after(),
        Duration::from_millis(1500)
    );
}

#[test]
fn cancels_in_reverse_order_give_everything_back() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(4).unwrap()), &clock);
    let wait = Duration::from_secs(60);
    let turns: Vec<_> = (0..8).map(|_| limiter.reserve(1, wait).unwrap()).collect();
    assert_eq!(turns[7].delay(), Duration::from_secs(1));
    for turn in turns.into_iter().rev() {
        assert!(turn.cancel());
    }
    assert_eq!(limiter.peek().remaining(), 4);
    // In arrival order only the last is given back: each had another behind it.
    let turns: Vec<_> = (0..8).map(|_| limiter.reserve(1, wait).unwrap()).collect();
    let given: Vec<bool> = turns.into_iter().map(Reservation::cancel).collect();
    assert_eq!(
        given,
        [false, false, false, false, false, false, false, true]
    );
    assert_eq!(
        limiter.reserve(1, wait).unwrap().delay(),
        Duration::from_millis(1000)
    );
}

#[test]
fn edges_zero_costs_huge_waits_and_full_tables() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(1).unwrap()), &clock);
    limiter.check().unwrap();
    // A cost of 0 goes at once, even behind a queue, and holds nothing to give back.
    let free = limiter.reserve(0, Duration::ZERO).unwrap();
    assert_eq!(free.delay(), Duration::ZERO);
    assert!(!free.cancel());
    // A cost above the burst never fits, whatever the wait.
    assert!(matches!(
        limiter.reserve(2, Duration::MAX),
        Err(CheckError::InsufficientCapacity(_))
    ));
    // Unbounded waits are capped at Gcra::MAX_WAIT: the queue may grow to it, not past it.
    let mut last = Nanos::ZERO;
    for _ in 0..3 {
        last = limiter.reserve(1, Duration::MAX).unwrap().ready_at();
    }
    assert_eq!(last, Nanos::from_nanos(3_000_000_000));
    let edge = Gcra::from(Quota::per_second(1).unwrap());
    let deep = edge.reserve(0, Nanos::MAX, 1, Nanos::MAX);
    assert!(matches!(deep, tollgate::Transition::Allow { state } if state < u64::MAX));

    // A keyed table with no room: denied as an overflow under Deny, admitted unrecorded under
    // Allow (nothing to cancel).
    for (policy, admitted) in [(Overflow::Deny, false), (Overflow::Allow, true)] {
        let keyed = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_hour(1).unwrap()))
            .capacity(1)
            .overflow(policy)
            .clock(&clock)
            .build()
            .unwrap();
        let slots = keyed.stats().slots as u64;
        for key in 0..slots {
            keyed.check_key(&key).unwrap();
        }
        match keyed.reserve_key(&slots, 1, Duration::MAX) {
            Ok(turn) => {
                assert!(admitted);
                assert_eq!(turn.delay(), Duration::ZERO);
                assert!(!turn.cancel());
            }
            Err(CheckError::Denied(denied)) => assert!(!admitted && denied.is_overflow()),
            Err(other) => panic!("{other:?}"),
        }
    }
}

/// `threads` threads reserve `each` turns of cost 1 at once, at frozen time, from a limiter of
/// one per millisecond and bursts of 1: the turns are exactly 0, 1, 2, ... ms, each once.
fn frozen_schedule(
    threads: usize,
    each: usize,
    reserve: impl Fn(usize) -> Nanos + Sync,
) -> Vec<u64> {
    let barrier = Barrier::new(threads);
    let mut turns: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, reserve) = (&barrier, &reserve);
                s.spawn(move || {
                    barrier.wait();
                    (0..each)
                        .map(|_| reserve(t).as_nanos() / MS)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    turns.sort_unstable();
    turns
}

#[test]
fn threads_reserving_at_frozen_time_get_exactly_the_schedule() {
    let quota = Quota::new(1, Duration::from_millis(1)).unwrap();
    let clock = ManualClock::new();
    let wait = Duration::from_secs(3_600);
    let (threads, each) = (8, 5_000);
    let expected: Vec<u64> = (0..(threads * each) as u64).collect();

    let direct = RateLimiter::with_clock(Gcra::from(quota), &clock);
    let turns = frozen_schedule(threads, each, |_| {
        direct.reserve(1, wait).unwrap().ready_at()
    });
    assert_eq!(turns, expected);

    // Two keys, each reserved by half of the threads: each key's turns are its own schedule, so
    // every turn is taken exactly twice.
    let keyed = KeyedRateLimiter::<usize>::builder(Gcra::from(quota))
        .capacity(16)
        .clock(&clock)
        .build()
        .unwrap();
    let turns = frozen_schedule(threads, each, |t| {
        keyed.reserve_key(&(t % 2), 1, wait).unwrap().ready_at()
    });
    let half = (threads / 2 * each) as u64;
    let twice: Vec<u64> = (0..half).flat_map(|ms| [ms, ms]).collect();
    assert_eq!(turns, twice);
}
