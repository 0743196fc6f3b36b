//! Lock-free rate limiting for the hot path of high-throughput servers.
//!
//! tollgate decides whether a request may pass in a few nanoseconds, from any number of threads,
//! without a lock: each limiter's state is one packed 64-bit word updated by compare-and-swap,
//! the decision is a pure function of that word, and the clock is the CPU's time-stamp counter.
//! Keyed limiters hold one such word per client in a table whose memory is fixed when it is
//! built.
//!
//! # Quick start
//!
//! ```
//! use tollgate::{Quota, RateLimiter};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 100 requests per second, bursts of up to 20.
//! let limiter = RateLimiter::gcra(Quota::per_second(100)?.with_burst(20)?);
//!
//! match limiter.check() {
//!     Ok(()) => { /* serve the request */ }
//!     Err(denied) => {
//!         // Reply 429 with `Retry-After: {secs}` (rounded up: waiting this long is enough).
//!         let _secs = denied.retry_after_secs();
//!     }
//! }
//!
//! // Variable cost (bytes, tokens), with everything a response header needs.
//! let decision = limiter.decide(5)?;
//! println!("{decision}"); // allowed: 14 of 20 remaining, full in 60ms
//!
//! // Would 20 more pass now? A peek changes nothing.
//! let peek = limiter.peek_n(20)?;
//! assert!(!peek.is_allowed());
//! # Ok(())
//! # }
//! ```
//!
//! # Keyed limiting
//!
//! One state per client, IP address or API key, in a table sized once:
//!
//! ```
//! use std::net::IpAddr;
//! use tollgate::{KeyedRateLimiter, Quota};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 10 per second per client IP, bursts of 20, for up to a million clients at once.
//! let per_ip = KeyedRateLimiter::<IpAddr>::gcra(Quota::per_second(10)?.with_burst(20)?, 1_000_000)?;
//! let client: IpAddr = "198.51.100.23".parse()?;
//! match per_ip.check_key(&client) {
//!     Ok(()) => { /* serve */ }
//!     Err(denied) if denied.is_overflow() => { /* 503: the table is full; alert */ }
//!     Err(_) => { /* 429 */ }
//! }
//! assert!(per_ip.memory() <= 24 * 1_000_000);
//! # Ok(())
//! # }
//! ```
//!
//! [`KeyedRateLimiter`] keeps each key's packed state in a lock-free table of 16-byte slots:
//! **23.5 bytes per key of capacity for any key type** (the key itself is never stored, only its
//! hash), allocated once; a key whose state is back to fresh is reused in place, so memory never
//! grows and there is nothing to clean up. How to size the capacity, what happens when the table
//! is full ([`Overflow`]), tiers of quotas in one table ([`KeyedRateLimiter::check_key_with`]),
//! resets and batches ([`KeyedRateLimiter::check_keys`]) are in [`KeyedRateLimiter`]'s docs.
//!
//! [`KeyedSlidingLog`] is the exact sliding log per key, for low-frequency limits ("3 per day"):
//! locked shards, at most `limit` timestamps per key, a bounded number of keys.
//!
//! # Shaping and layered limits
//!
//! [`RateLimiter::reserve`] and [`KeyedRateLimiter::reserve_key`] admit a GCRA request now into
//! the schedule, to proceed at its turn instead of being refused: see the [`reservation`]
//! module, [`RateLimiter::wait`], and `until_ready` with the `tokio` feature. A tuple of
//! limiters, and keys of keyed ones, is checked all or nothing with
//! [`check_all`](layers::Layers::check_all): see the [`layers`] module.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::layers::Layers;
//! use tollgate::{KeyedRateLimiter, Quota, RateLimiter};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let upstream = RateLimiter::gcra(Quota::per_second(1_000)?.with_burst(1)?);
//! upstream.wait(1, Duration::from_millis(100))?; // at once
//! upstream.wait(1, Duration::from_millis(100))?; // a millisecond later
//!
//! let per_user = KeyedRateLimiter::<str>::gcra(Quota::per_second(5)?, 1_000)?;
//! (per_user.layer("alice"), &upstream).check_all(1).unwrap_err(); // upstream: not yet
//! assert_eq!(per_user.peek_key("alice").remaining(), 5); // and nothing taken from alice
//! # Ok(())
//! # }
//! ```
//!
//! # Changing a quota while the limiter runs
//!
//! [`RateLimiter::set_quota`] changes a running direct limiter's quota without a lock on the
//! decision path and without losing what has been admitted: the room left carries over, capped
//! at the new burst, and the new rate refills it ([`Algorithm::carry_over`]).
//! [`KeyedRateLimiter::set_quota`] does the same for every key of a keyed limiter (a key with
//! nothing used is a new key under the new quota), and the Redis limiters have `set_quota` too.
//!
//! ```
//! use tollgate::{Quota, RateLimiter};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = RateLimiter::gcra(Quota::per_second(100)?);
//! limiter.check_n(95)?;
//! limiter.set_quota(Quota::per_second(1_000)?)?; // a larger plan: no new burst by itself
//! assert!(limiter.peek().remaining() <= 6);
//! # Ok(())
//! # }
//! ```
//!
//! # Which algorithm
//!
//! | you want | use |
//! |---|---|
//! | a rate with bursts: almost always | [`Gcra`] ([`RateLimiter::gcra`]): exact, smooth, cheapest. It *is* the token bucket and the leaky bucket as a meter. |
//! | "N per minute" as clients count it, without boundary bursts | [`SlidingWindow`] ([`RateLimiter::sliding_window`]): never above the limit on evenly spaced traffic; an estimate on bursty traffic (`cargo run --release --example accuracy` measures it against the exact log) |
//! | the classic fixed window, for comparison or compatibility | [`FixedWindow`] ([`RateLimiter::fixed_window`]): admits up to twice the limit across a boundary |
//! | an exact "N per day" on a low-frequency action | [`KeyedSlidingLog`]: exact, a few timestamps per key, behind a lock per shard |
//!
//! The [`algorithm`] module documents each packed word bit by bit, and its transition.
//!
//! # Errors
//!
//! Nothing panics on any input. Each concept has its error, and each message names the bad value:
//!
//! - [`QuotaError`]: a [`Quota`] that cannot be represented (a limit of 0, more than one request
//!   per nanosecond, a burst too long).
//! - [`BuildError`]: a limiter that cannot be built: a quota its algorithm's word cannot pack, a
//!   capacity of 0 or too large to allocate, too many tiers. Every fallible limiter constructor
//!   and builder returns it.
//! - [`Denied`] (from `check`): not now, retry after a wait; [`Denied::is_overflow`] tells a
//!   key that found no room in a full table from one over its limit.
//! - [`InsufficientCapacity`]: a cost that can never fit; [`CheckError`] is either of the two.
//!
//! Clocks that jump backwards are decided conservatively (see [`clock`]), and a cost of 0 is
//! admitted without changing anything.
//!
//! # Layers
//!
//! ```text
//! Quota  ->  Clock::now()  ->  Algorithm::transition(word, now, cost)  ->  CAS loop  ->  Decision
//! (validated  (read once)       (pure: no atomics, no clock)               (the only      (to the
//!  once)                                                                    atomics)       caller)
//! ```
//!
//! - [`quota`]: [`Quota`], validated once; integer nanoseconds, rounding that never over-admits.
//! - [`clock`]: [`Clock`], with [`TscClock`] (default), [`CoarseClock`] and [`ManualClock`].
//! - [`algorithm`]: [`Gcra`], [`SlidingWindow`], [`FixedWindow`]: pure transitions over a `u64`.
//! - the stores (private): the cache-padded atomic word and its compare-and-swap loop, and the
//!   keyed slot table of 128-bit `(tag, state)` slots; their `# Orderings` section argues every
//!   memory ordering, and the [implementation notes](implementation) the table's protocol.
//! - [`RateLimiter`] and [`KeyedRateLimiter`]: the public types joining them; [`KeyedSlidingLog`]
//!   for the exact log; [`reservation`]: GCRA requests admitted for a later turn.
//! - [`layers`]: several limiters checked all or nothing.
//! - `reference` (with the `reference` feature): obviously-correct models of every algorithm,
//!   and harnesses that replay a limiter against them, for tests of this crate and of other
//!   backends.
//!
//! # Consistency
//!
//! What concurrent callers of one limiter can observe:
//!
//! - **Linearizable decisions.** Every admission is computed from the state left by all the
//!   admissions before it, in the order their compare-and-swaps took effect. The outcome of any
//!   run is the outcome of the reference model fed the same requests, one at a time, in that
//!   order, each with the time stamp its caller read. No admission is ever lost or
//!   double-counted: the stress tests assert exact counts from many threads at frozen time, and
//!   loom checks every interleaving of small cases.
//! - **Time stamps are read before the loop.** A request's time is its caller's clock reading,
//!   taken once, before it competes for the word. Requests that lose a race are retried with the
//!   same time stamp, so under contention a decision may be applied after one with a later time
//!   stamp. Every algorithm treats such an earlier time conservatively: it is never admitted
//!   where the same request at the later time would be denied.
//! - **Denials and peeks write nothing.** They are decided from the state as loaded; a denial
//!   under contention may be based on a state a few nanoseconds old, which is the same as
//!   having arrived a few nanoseconds earlier. (A [layered](layers) check that loses a race for
//!   a later layer's room releases the holds it took in the earlier ones.)
//! - **No starvation guarantees.** A thread whose compare-and-swap keeps losing retries; the loop
//!   is lock-free (some thread always succeeds), not wait-free.

#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod algorithm;
pub mod clock;
mod decision;
mod error;
#[doc = include_str!("implementation.md")]
pub mod implementation {}
pub mod keyed;
pub mod layers;
mod limiter;
#[cfg(feature = "tower")]
pub mod middleware;
pub mod quota;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "reference")]
pub mod reference;
pub mod reservation;
pub mod sliding_log;
pub mod snapshot;
mod store;
mod sync;

pub use algorithm::{Algorithm, FixedWindow, Gcra, SlidingWindow, Transition};
pub use clock::{Clock, CoarseClock, ManualClock, Nanos, TscClock};
pub use decision::{CheckError, Decision, Denied, InsufficientCapacity};
pub use error::BuildError;
pub use keyed::{
    CheckKeys, DecideKeys, DecideKeysWith, DefaultKeyHasher, KeyedBuilder, KeyedRateLimiter,
};
pub use limiter::RateLimiter;
pub use quota::{Quota, QuotaError};
pub use reservation::Reservation;
pub use sliding_log::{KeyedSlidingLog, SlidingLog, SlidingLogBuilder};
pub use snapshot::SnapshotError;
pub use store::{KeyedStats, Overflow};

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
