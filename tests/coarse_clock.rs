//! `CoarseClock` against quanta's process-wide upkeep thread, which other crates start and stop:
//! this file is a test binary of its own, so that no other test's clock runs beside it.

use std::time::Duration;

use tollgate::{Clock, CoarseClock};

/// Another part of the program (here quanta itself; governor's `QuantaUpkeepClock` does the same)
/// starts quanta's upkeep thread before tollgate's first coarse clock, then stops it by dropping
/// its handle. The `CoarseClock` keeps moving, at the interval it asked for: a clock that stopped
/// would leave every limiter on it refilling nothing, denying every request past its burst for
/// the rest of the process (as tollgate's clock did while it read quanta's "recent" time).
#[test]
fn coarse_clock_keeps_moving_after_another_owner_stops_quanta_upkeep() {
    let other = quanta::Upkeep::new(Duration::from_millis(1))
        .start()
        .unwrap();
    let clock = CoarseClock::with_interval(Duration::from_millis(2)).unwrap();
    assert_eq!(clock.precision(), Duration::from_millis(2));
    drop(other);
    std::thread::sleep(Duration::from_millis(20));
    let before = clock.now();
    // A moving clock moves within a few intervals; a busy machine may hold the upkeep thread
    // back longer than any fixed sleep, so wait up to 10 s for it.
    let moved = (0..10_000).any(|_| {
        std::thread::sleep(Duration::from_millis(1));
        clock.now() > before
    });
    assert!(moved, "the clock stopped at {before:?}");
}
