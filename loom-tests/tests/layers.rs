//! Loom models of the all-or-nothing check over layers: a check whose later layer loses its
//! room to a racing request between the look and the hold must release what it held, exactly,
//! also when another request was admitted in the held layer in between.
//!
//! Each model runs a layered check against plain checks of its layers on other threads, on a
//! frozen `ManualClock`, and asserts the exact state every interleaving must leave: the check
//! admitted in every layer or in none.
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use tollgate::layers::{Layers, ReserveAll};
use tollgate::{Algorithm, Gcra, ManualClock, Quota, RateLimiter, SlidingWindow};

type Limiter<A> = Arc<RateLimiter<A, ManualClock>>;

/// A limiter on a clock of its own, frozen at 0 like every other.
fn limiter<A: Algorithm>(algorithm: A) -> Limiter<A> {
    Arc::new(RateLimiter::with_clock(algorithm, ManualClock::new()))
}

fn spawn_check<A: Algorithm + 'static>(limiter: &Limiter<A>) -> thread::JoinHandle<bool> {
    let limiter = Arc::clone(limiter);
    thread::spawn(move || limiter.check().is_ok())
}

/// `first` (room for 2) and `last` (room for 1) checked together, racing a check of `last`
/// alone and, with `busy`, a check of `first` alone: exactly one of the two gets `last`'s room,
/// and `first` holds exactly the checks it admitted.
fn release_races<A: Algorithm + Copy + 'static>(first: A, busy: bool) {
    loom::model(move || {
        let (first, last) = (
            limiter(first),
            limiter(Gcra::from(Quota::per_hour(1).unwrap())),
        );
        let layered = {
            let (first, last) = (Arc::clone(&first), Arc::clone(&last));
            thread::spawn(move || (&*first, &*last).check_all(1).is_ok())
        };
        let alone = spawn_check(&last);
        let other = busy.then(|| spawn_check(&first));
        let layered = layered.join().unwrap();
        let alone = alone.join().unwrap();
        let other = other.is_some_and(|h| h.join().unwrap());
        assert!(layered ^ alone, "layered {layered}, alone {alone}");
        assert!(!busy || other);
        let held = u64::from(layered) + u64::from(other);
        assert_eq!(first.peek().remaining(), 2 - held);
        assert_eq!(last.peek().remaining(), 0);
    });
}

#[test]
fn a_refused_check_releases_its_hold() {
    release_races(Gcra::from(Quota::per_hour(2).unwrap()), false);
}

#[test]
fn a_release_races_an_admission_in_its_gcra_layer() {
    release_races(Gcra::from(Quota::per_hour(2).unwrap()), true);
}

#[test]
fn a_release_races_an_admission_in_its_window_layer() {
    release_races(
        SlidingWindow::new(&Quota::per_hour(2).unwrap()).unwrap(),
        true,
    );
}

#[test]
fn a_refused_reservation_over_layers_cancels_its_turns() {
    loom::model(|| {
        // Reservations over two layers with a turn each, racing a check of the last layer
        // alone: exactly one gets the last layer's turn, and the first layer keeps a turn only
        // for a reservation that was admitted.
        let (first, last) = (
            limiter(Gcra::from(Quota::per_hour(2).unwrap())),
            limiter(Gcra::from(Quota::per_hour(1).unwrap())),
        );
        let reserved = {
            let (first, last) = (Arc::clone(&first), Arc::clone(&last));
            thread::spawn(move || (&*first, &*last).reserve_all(1, Duration::ZERO).is_ok())
        };
        let alone = spawn_check(&last);
        let (reserved, alone) = (reserved.join().unwrap(), alone.join().unwrap());
        assert!(reserved ^ alone, "reserved {reserved}, alone {alone}");
        assert_eq!(first.peek().remaining(), 2 - u64::from(reserved));
    });
}
