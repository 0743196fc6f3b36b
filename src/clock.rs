//! Clocks: where a limiter's idea of "now" comes from.
//!
//! A limiter reads its clock once per decision, before its compare-and-swap loop, and works in
//! [`Nanos`]: whole nanoseconds since the clock's epoch (the moment the clock was created).
//!
//! | clock | read cost | precision | for |
//! |---|---|---|---|
//! | [`TscClock`] (default) | one `rdtsc` plus a multiply and a shift | about a nanosecond | everything |
//! | [`CoarseClock`] | one relaxed load of a shared word | the upkeep interval (1 ms by default) | limits of seconds and more, at the highest rates |
//! | [`ManualClock`] | one relaxed load | exact: time moves only when told | tests, simulations, loom models |
//!
//! What `rdtsc` costs depends on the CPU, and with it what [`CoarseClock`] saves: from a tenth of
//! a keyed check's time on some CPUs to a third on others, where reading the counter is slow
//! (in virtual machines, notably). Measure it on your own hardware with
//! `cargo bench --bench paired -- "keyed 100k uniform: coarse clock"` in the repository.
//!
//! # Time that goes backwards
//!
//! Time stamps taken on different cores need not be ordered (unsynchronised TSCs, or simply a
//! thread that read the clock and was preempted before deciding), and a [`ManualClock`] may be set
//! back on purpose. Every algorithm in this crate accepts a `now` earlier than the time its state
//! was last written: it never panics, never underflows and never admits more than the quota allows
//! at the later of the two times. Each algorithm's docs say exactly how it treats such a request.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::{Gcra, ManualClock, Quota, RateLimiter};
//!
//! // One per second: admitted at 10 s, then asked again by a caller whose stamp reads 9 s.
//! let clock = ManualClock::starting_at(Duration::from_secs(10));
//! let limiter = RateLimiter::with_clock(Gcra::from(Quota::per_second(1).unwrap()), &clock);
//! assert!(limiter.check().is_ok());
//! clock.rewind(Duration::from_secs(1));
//! // Denied, as it would be at 10 s. The next admission is at 11 s: 2 s after this caller's 9 s.
//! assert_eq!(limiter.check().unwrap_err().retry_after(), Duration::from_secs(2));
//! ```

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::sync::{AtomicU64, Ordering};

#[cfg(not(miri))]
use quanta as counter;

/// Under Miri, which cannot run inline assembly (quanta's `cpuid` and `rdtsc`), [`TscClock`]
/// counts the standard library's monotonic clock instead, through the three calls it makes of
/// quanta's, so that code using the default clock can be checked by Miri too.
#[cfg(miri)]
mod counter {
    use std::sync::OnceLock;
    use std::time::Instant;

    #[derive(Clone)]
    pub(super) struct Clock;

    impl Clock {
        pub(super) fn new() -> Clock {
            Clock
        }

        /// Nanoseconds since the first reading in the process.
        pub(super) fn raw(&self) -> u64 {
            static START: OnceLock<Instant> = OnceLock::new();
            let nanos = START.get_or_init(Instant::now).elapsed().as_nanos();
            u64::try_from(nanos).unwrap_or(u64::MAX)
        }

        pub(super) fn delta_as_nanos(&self, start: u64, end: u64) -> u64 {
            end.saturating_sub(start)
        }
    }
}

/// A point in time in whole nanoseconds since a clock's epoch, at most [`Nanos::MAX`] (292 years).
///
/// Constructors saturate at `Nanos::MAX` instead of wrapping, and so every sum of a time and a
/// tolerance in this crate stays below `u64::MAX`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::Nanos;
///
/// let t = Nanos::from(Duration::from_millis(3));
/// assert_eq!(t.as_nanos(), 3_000_000);
/// assert_eq!(Duration::from(t), Duration::from_millis(3));
/// assert_eq!(Nanos::from_nanos(u64::MAX), Nanos::MAX);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(u64);

/// The time since the epoch, as a [`Duration`] prints it.
///
/// ```
/// assert_eq!(format!("{:?}", tollgate::Nanos::from_nanos(1_500_000)), "1.5ms");
/// ```
impl fmt::Debug for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_duration().fmt(f)
    }
}

impl Nanos {
    /// The epoch: the moment a clock was created (a [`ManualClock`]'s starting time).
    ///
    /// ```
    /// use tollgate::{Clock, ManualClock, Nanos};
    ///
    /// assert_eq!(Nanos::ZERO, Nanos::default());
    /// assert_eq!(ManualClock::new().now(), Nanos::ZERO);
    /// ```
    pub const ZERO: Nanos = Nanos(0);
    /// The latest representable time, 2^63 − 1 ns (about 292 years after the epoch). Every
    /// conversion into `Nanos` saturates here, and it is the `retry_after` of a cost that can
    /// never fit ([`Transition::Deny`](crate::Transition::Deny)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Nanos;
    ///
    /// assert_eq!(Nanos::MAX.as_nanos(), i64::MAX as u64);
    /// assert_eq!(Nanos::from_nanos(u64::MAX), Nanos::MAX);
    /// assert_eq!(Nanos::from_duration(Duration::from_secs(300 * 365 * 86_400)), Nanos::MAX);
    /// ```
    pub const MAX: Nanos = Nanos((1 << 63) - 1);

    /// `nanos` nanoseconds after the epoch, saturating at [`Nanos::MAX`].
    ///
    /// ```
    /// assert_eq!(tollgate::Nanos::from_nanos(42).as_nanos(), 42);
    /// ```
    #[inline]
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Nanos {
        if nanos > Nanos::MAX.0 {
            Nanos::MAX
        } else {
            Nanos(nanos)
        }
    }

    /// The number of nanoseconds since the epoch.
    ///
    /// ```
    /// assert_eq!(tollgate::Nanos::ZERO.as_nanos(), 0);
    /// ```
    #[inline]
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// A duration as `Nanos`, saturating at [`Nanos::MAX`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Nanos;
    /// assert_eq!(Nanos::from_duration(Duration::MAX), Nanos::MAX);
    /// ```
    #[inline]
    #[must_use]
    pub const fn from_duration(duration: Duration) -> Nanos {
        let nanos = duration.as_nanos();
        if nanos > Nanos::MAX.0 as u128 {
            Nanos::MAX
        } else {
            Nanos(nanos as u64)
        }
    }

    /// This time as a duration since the epoch.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(tollgate::Nanos::from_nanos(1_500).as_duration(), Duration::from_nanos(1_500));
    /// ```
    #[inline]
    #[must_use]
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }
}

impl From<Duration> for Nanos {
    #[inline]
    fn from(duration: Duration) -> Nanos {
        Nanos::from_duration(duration)
    }
}

impl From<Nanos> for Duration {
    #[inline]
    fn from(nanos: Nanos) -> Duration {
        nanos.as_duration()
    }
}

/// A source of time for limiters: [`Nanos`] since the clock's own epoch.
///
/// Implementations must be cheap (limiters read the clock on every decision) and should be
/// monotonic, but limiters stay correct when they are not (see [the module docs](self)).
///
/// ```
/// use tollgate::{Clock, Nanos};
///
/// /// A clock that stands still, for a test.
/// struct Frozen(Nanos);
///
/// impl Clock for Frozen {
///     fn now(&self) -> Nanos {
///         self.0
///     }
/// }
///
/// assert_eq!(Frozen(Nanos::from_nanos(5)).now().as_nanos(), 5);
/// ```
pub trait Clock: Send + Sync {
    /// The current time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_millis(5));
    /// assert_eq!(clock.now().as_nanos(), 5_000_000);
    /// ```
    fn now(&self) -> Nanos;
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Box<C> {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }
}

/// The default clock: the CPU's time-stamp counter, read through [`quanta`] and scaled to
/// nanoseconds.
///
/// A read is one `rdtsc` (or the system counter on ARM), a subtraction and a fixed-point multiply:
/// about as cheap as a clock gets, with nanosecond resolution. Creating the first `TscClock` in a
/// process asks the CPU about its counter and calibrates it against the OS clock (under a
/// millisecond, once); every later one copies that clock with an epoch of its own, in
/// nanoseconds. Where the CPU has no usable counter, quanta falls back to the OS monotonic clock.
///
/// A reading taken on a core whose counter lags the epoch's core reads as the epoch itself, never
/// as a huge value: quanta saturates such deltas at zero.
///
/// Under Miri, which cannot run the inline assembly quanta reads the counter with, a `TscClock`
/// counts the standard library's monotonic clock instead, so that code using the default clock
/// can be checked with Miri.
///
/// ```
/// use tollgate::{Clock, TscClock};
///
/// let clock = TscClock::new();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone)]
pub struct TscClock {
    clock: counter::Clock,
    epoch: u64,
}

impl TscClock {
    /// A clock whose epoch is now.
    ///
    /// ```
    /// let clock = tollgate::TscClock::new();
    /// # let _ = clock;
    /// ```
    #[must_use]
    pub fn new() -> TscClock {
        let clock = PROCESS_CLOCK.get_or_init(counter::Clock::new).clone();
        let epoch = clock.raw();
        TscClock { clock, epoch }
    }
}

/// quanta's clock, made once per process and copied into every [`TscClock`]. Making one asks the
/// CPU what its counter can do (`cpuid`, which traps to the hypervisor in a virtual machine: tens
/// of microseconds), where a copy of this one takes nanoseconds. A limiter built per connection
/// or per request stream would otherwise pay that trap each time
/// (`cargo bench --bench paired -- "build:"`).
static PROCESS_CLOCK: OnceLock<counter::Clock> = OnceLock::new();

impl Default for TscClock {
    fn default() -> TscClock {
        TscClock::new()
    }
}

impl fmt::Debug for TscClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TscClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for TscClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos::from_nanos(self.clock.delta_as_nanos(self.epoch, self.clock.raw()))
    }
}

/// The coarse clocks' shared time stamp: [`TscClock`] nanoseconds, written by tollgate's upkeep
/// thread, read by every [`CoarseClock`]. A `std` atomic, not one from `crate::sync`: it is part
/// of no compare-and-swap protocol, and loom's atomics cannot live in a `static`.
static STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The interval of tollgate's upkeep thread, once it has been started.
static UPKEEP: Mutex<Option<Duration>> = Mutex::new(None);

/// A clock that reads a time stamp refreshed by a background thread: cheaper than [`TscClock`]
/// (one relaxed load of a shared word instead of `rdtsc`), as precise as the refresh interval.
///
/// The stamp and its upkeep thread are tollgate's own and process-wide: the first `CoarseClock`
/// starts the thread with its interval, and it then runs for the rest of the process; later
/// clocks share it, whatever interval they ask for ([`CoarseClock::precision`] says which one is
/// in effect). It is not quanta's "recent" time, whose upkeep thread another part of the program
/// (governor's `QuantaUpkeepClock`, for one) may start and stop: stopped, it would freeze every
/// clock reading it, and every limiter on such a clock would deny all requests past its burst
/// for the rest of the process.
///
/// Time advances in steps of the interval, so a limiter on this clock sees a burst of requests
/// within one step as simultaneous. That is harmless for limits whose emission interval is much
/// longer than the step (say, per-second limits with a 1 ms step) and wrong for finer ones.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, CoarseClock};
///
/// let clock = CoarseClock::new()?;
/// assert_eq!(clock.precision(), Duration::from_millis(1));
/// let t = clock.now();
/// // The upkeep thread moves the stamp every millisecond, whenever the OS lets it run: on a
/// // busy machine that can take longer than any fixed sleep.
/// let moved = (0..10_000).any(|_| {
///     std::thread::sleep(Duration::from_millis(1));
///     clock.now() > t
/// });
/// assert!(moved);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct CoarseClock {
    /// The stamp when this clock was created: its time zero.
    epoch: u64,
    precision: Duration,
}

impl CoarseClock {
    /// The refresh interval of [`CoarseClock::new`].
    ///
    /// ```
    /// use tollgate::CoarseClock;
    ///
    /// // The first coarse clock of a process starts the upkeep thread, at this interval.
    /// let clock = CoarseClock::new()?;
    /// assert_eq!(clock.precision(), CoarseClock::DEFAULT_INTERVAL);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1);

    /// A coarse clock refreshed every millisecond (starting the upkeep thread if needed).
    ///
    /// # Errors
    ///
    /// The upkeep thread could not be spawned.
    ///
    /// ```
    /// let clock = tollgate::CoarseClock::new()?;
    /// # let _ = clock;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> std::io::Result<CoarseClock> {
        CoarseClock::with_interval(CoarseClock::DEFAULT_INTERVAL)
    }

    /// A coarse clock refreshed every `interval`, if this call starts the upkeep thread.
    ///
    /// # Errors
    ///
    /// A zero interval (`InvalidInput`), or the upkeep thread could not be spawned.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(tollgate::CoarseClock::with_interval(Duration::ZERO).is_err());
    /// ```
    pub fn with_interval(interval: Duration) -> std::io::Result<CoarseClock> {
        if interval.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the upkeep interval of a CoarseClock must be longer than zero",
            ));
        }
        let mut upkeep = UPKEEP.lock().unwrap_or_else(PoisonError::into_inner);
        let precision = match *upkeep {
            Some(running) => running,
            None => {
                // The stamp counts from this `TscClock`'s creation, as the 0 it starts at does.
                let source = TscClock::new();
                std::thread::Builder::new()
                    .name("tollgate-coarse-clock".into())
                    .spawn(move || loop {
                        std::thread::sleep(interval);
                        STAMP.store(source.now().as_nanos(), Ordering::Relaxed);
                    })?;
                *upkeep = Some(interval);
                interval
            }
        };
        Ok(CoarseClock {
            epoch: STAMP.load(Ordering::Relaxed),
            precision,
        })
    }

    /// The refresh interval in effect: the step in which this clock's time advances.
    ///
    /// ```
    /// use std::time::Duration;
    /// let clock = tollgate::CoarseClock::with_interval(Duration::from_millis(2))?;
    /// // The first coarse clock of the process set the interval; later ones share it.
    /// assert_eq!(clock.precision(), Duration::from_millis(2));
    /// assert_eq!(tollgate::CoarseClock::new()?.precision(), Duration::from_millis(2));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn precision(&self) -> Duration {
        self.precision
    }
}

impl fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoarseClock")
            .field("now", &self.now())
            .field("precision", &self.precision)
            .finish()
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> Nanos {
        // A reading is never older than the epoch this clock loaded (coherence: a later load, or
        // one in a thread that the clock was sent to, sees that stamp or a newer one). But the
        // stamp itself can step back: the upkeep thread may move to a core whose counter lags,
        // and its `TscClock` readings move back with it. Saturate rather than wrap.
        Nanos::from_nanos(STAMP.load(Ordering::Relaxed).saturating_sub(self.epoch))
    }
}

/// A clock that moves only when told to: for tests, simulations and loom models.
///
/// It starts at [`Nanos::ZERO`] and may be set anywhere, backwards included. Share it between a
/// limiter and the test driving it with a reference (`&ManualClock` is a [`Clock`]) or an `Arc`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, ManualClock, Nanos};
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), Nanos::from_nanos(2_000_000_000));
/// clock.set(Duration::from_secs(1)); // backwards is allowed
/// assert_eq!(clock.now().as_duration(), Duration::from_secs(1));
/// ```
#[derive(Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock at the epoch.
    ///
    /// ```
    /// use tollgate::{Clock, ManualClock, Nanos};
    /// assert_eq!(ManualClock::new().now(), Nanos::ZERO);
    /// ```
    #[must_use]
    pub fn new() -> ManualClock {
        ManualClock {
            now: AtomicU64::new(0),
        }
    }

    /// A clock at `time` after the epoch (saturating at [`Nanos::MAX`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    /// let clock = ManualClock::starting_at(Duration::from_secs(60));
    /// assert_eq!(clock.now().as_duration(), Duration::from_secs(60));
    /// ```
    #[must_use]
    pub fn starting_at(time: Duration) -> ManualClock {
        ManualClock {
            now: AtomicU64::new(Nanos::from_duration(time).as_nanos()),
        }
    }

    /// Moves the clock to `time` after the epoch, forwards or backwards.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// clock.set(Duration::from_millis(7));
    /// assert_eq!(clock.now().as_nanos(), 7_000_000);
    /// ```
    pub fn set(&self, time: Duration) {
        self.now
            .store(Nanos::from_duration(time).as_nanos(), Ordering::Relaxed);
    }

    /// Moves the clock forwards by `duration`, saturating at [`Nanos::MAX`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_millis(3));
    /// clock.advance(Duration::from_millis(4));
    /// assert_eq!(clock.now().as_duration(), Duration::from_millis(7));
    /// ```
    pub fn advance(&self, duration: Duration) {
        let step = Nanos::from_duration(duration).as_nanos();
        // A single writer is the usual case; the loop keeps concurrent advances from losing steps.
        let mut current = self.now.load(Ordering::Relaxed);
        loop {
            let next = Nanos::from_nanos(current.saturating_add(step)).as_nanos();
            match self.now.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Moves the clock backwards by `duration`, stopping at the epoch: the skew between two cores,
    /// or a clock that was stepped back.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock, Nanos};
    /// let clock = ManualClock::starting_at(Duration::from_secs(1));
    /// clock.rewind(Duration::from_secs(5));
    /// assert_eq!(clock.now(), Nanos::ZERO);
    /// ```
    pub fn rewind(&self, duration: Duration) {
        let step = Nanos::from_duration(duration).as_nanos();
        let mut current = self.now.load(Ordering::Relaxed);
        loop {
            let next = current.saturating_sub(step);
            match self.now.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Nanos {
        // Relaxed: a clock reading synchronises nothing; limiters read it once and then work on
        // their own atomics, and they tolerate stale (earlier) readings like any other skew.
        Nanos::from_nanos(self.now.load(Ordering::Relaxed))
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn nanos_saturate() {
        assert_eq!(Nanos::from_nanos(u64::MAX), Nanos::MAX);
        assert_eq!(Nanos::from_nanos(1 << 63), Nanos::MAX);
        assert_eq!(Nanos::from_nanos((1 << 63) - 1), Nanos::MAX);
        assert_eq!(Nanos::from_duration(Duration::MAX), Nanos::MAX);
        assert_eq!(Nanos::from_duration(Duration::from_nanos(9)).as_nanos(), 9);
        assert_eq!(Nanos::MAX.as_duration().as_nanos(), (1 << 63) - 1);
    }

    #[test]
    fn manual_clock_saturates_both_ways() {
        let clock = ManualClock::new();
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), Nanos::MAX);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), Nanos::MAX);
        clock.set(Duration::from_nanos(10));
        clock.rewind(Duration::from_nanos(3));
        assert_eq!(clock.now().as_nanos(), 7);
        clock.rewind(Duration::MAX);
        assert_eq!(clock.now(), Nanos::ZERO);
    }

    #[test]
    fn tsc_clock_starts_near_zero_and_advances() {
        let clock = TscClock::new();
        let start = clock.now();
        // The epoch is the construction: the first reading is far below a second.
        assert!(start.as_nanos() < 1_000_000_000, "{start:?}");
        std::thread::sleep(Duration::from_millis(2));
        let later = clock.now();
        assert!(
            later.as_nanos() >= start.as_nanos() + 2_000_000,
            "{later:?}"
        );
        // Clones share the epoch.
        assert!(clock.clone().now() >= later);
    }

    /// Every `TscClock` copies one quanta clock made per process, but its epoch is its own: one
    /// made 2 ms after another reads at least 2 ms less than it (the later clock is read first,
    /// so that the wait between the two reads only widens the gap).
    #[test]
    fn each_tsc_clock_has_its_own_epoch() {
        let earlier = TscClock::new();
        std::thread::sleep(Duration::from_millis(2));
        let later = TscClock::new();
        let (b, a) = (later.now(), earlier.now());
        assert!(
            a.as_nanos() >= b.as_nanos() + 2_000_000,
            "earlier {a:?}, later {b:?}"
        );
    }

    /// A duration as `Debug` prints it ("15.554µs", "2s"), in nanoseconds: it prints every
    /// digit, so the value comes back exactly.
    fn parse_duration(text: &str) -> Option<u64> {
        let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, unit) = text.split_at(split);
        let scale: u32 = match unit {
            "ns" => 0,
            "µs" => 3,
            "ms" => 6,
            "s" => 9,
            _ => return None,
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let digits = format!("{whole}{fraction:0<width$}", width = scale as usize);
        (fraction.len() <= scale as usize).then(|| digits.parse().ok())?
    }

    #[test]
    fn durations_parse_back() {
        for nanos in [0, 1, 999, 15_554, 1_500_000, 2_000_000_000, 1_234_567_891] {
            let text = format!("{:?}", Duration::from_nanos(nanos));
            assert_eq!(parse_duration(&text), Some(nanos), "{text}");
        }
    }

    /// Each clock's `Debug` shows its reading as a duration since its epoch (and a coarse clock
    /// its precision): parsed back, the reading lies between those taken just before and just
    /// after.
    #[test]
    fn clocks_debug_their_reading() {
        fn reading(clock: &dyn Clock, debug: impl Fn() -> String, shape: (&str, &str)) {
            let before = clock.now().as_nanos();
            let debug = debug();
            let after = clock.now().as_nanos();
            let at: u64 = debug
                .strip_prefix(shape.0)
                .and_then(|rest| rest.strip_suffix(shape.1))
                .and_then(parse_duration)
                .unwrap_or_else(|| panic!("{debug}"));
            assert!(
                (before..=after).contains(&at),
                "{debug}: {before}..={after}"
            );
        }
        let tsc = TscClock::new();
        reading(&tsc, || format!("{tsc:?}"), ("TscClock { now: ", " }"));
        let coarse = CoarseClock::new().unwrap();
        let precision = format!(", precision: {:?} }}", coarse.precision());
        reading(
            &coarse,
            || format!("{coarse:?}"),
            ("CoarseClock { now: ", &precision),
        );
        let manual = ManualClock::starting_at(Duration::from_nanos(7));
        assert_eq!(format!("{manual:?}"), "ManualClock { now: 7ns }");
    }

    #[test]
    fn clock_impls_for_pointers() {
        let clock = ManualClock::starting_at(Duration::from_nanos(5));
        let by_ref: &dyn Clock = &clock;
        assert_eq!(by_ref.now().as_nanos(), 5);
        let shared = Arc::new(ManualClock::starting_at(Duration::from_nanos(6)));
        assert_eq!(Clock::now(&shared).as_nanos(), 6);
        let boxed: Box<dyn Clock> = Box::new(ManualClock::starting_at(Duration::from_nanos(7)));
        assert_eq!(boxed.now().as_nanos(), 7);
    }
}
