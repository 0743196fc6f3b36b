//! The scripts (`lua/`), and their replies read as [`Decision`]s.
//!
//! A script is three parts: `prelude.lua` (the arguments, the time, exact integer division),
//! the algorithm's `decide`, and `run.lua` (each key in turn: decide, write with an expiry,
//! reply).

use core::time::Duration;
use std::sync::LazyLock;

use ::redis::Script;

use super::Error;
use crate::clock::Nanos;
use crate::decision::Decision;

macro_rules! script {
    ($algorithm:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/prelude.lua"),
                include_str!(concat!("lua/", $algorithm, ".lua")),
                include_str!("lua/run.lua"),
            ))
        })
    };
}

/// GCRA's script: [`RedisGcra::decide`](super::RedisGcra::decide) on each key's state.
pub(super) static GCRA: LazyLock<Script> = script!("gcra");
/// The sliding window's script:
/// [`RedisSlidingWindow::decide`](super::RedisSlidingWindow::decide) on each key's state.
pub(super) static SLIDING_WINDOW: LazyLock<Script> = script!("sliding_window");
/// The fixed window's script: [`RedisFixedWindow::decide`](super::RedisFixedWindow::decide) on
/// each key's state.
pub(super) static FIXED_WINDOW: LazyLock<Script> = script!("fixed_window");

/// The lease script: [`RedisGcra::lease`](super::RedisGcra::lease) on one key's state.
pub(super) static LEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lua/prelude.lua"),
        include_str!("lua/gcra.lua"),
        include_str!("lua/lease.lua"),
    ))
});

/// The all-or-nothing script over keys of several limiters: each layer's algorithm on its key.
pub(super) static LAYERED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lua/prelude.lua"),
        include_str!("lua/gcra.lua"),
        include_str!("lua/sliding_window.lua"),
        include_str!("lua/fixed_window.lua"),
        include_str!("lua/layered.lua"),
    ))
});

/// The reservation script: [`RedisGcra::reserve`](super::RedisGcra::reserve) on one key.
pub(super) static RESERVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lua/prelude.lua"),
        include_str!("lua/gcra.lua"),
        include_str!("lua/reserve.lua"),
    ))
});

/// The cancel script: [`RedisGcra::cancel`](super::RedisGcra::cancel) on one key.
pub(super) static CANCEL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lua/prelude.lua"),
        include_str!("lua/gcra.lua"),
        include_str!("lua/cancel.lua"),
    ))
});

/// A decision whose times were computed in a unit of `unit` nanoseconds, with its times in the
/// nanoseconds that a [`Decision`] holds.
pub(super) fn in_units(decision: Decision, unit: u64) -> Decision {
    let scale = |time: Duration| Nanos::from_nanos((time.as_nanos() as u64).saturating_mul(unit));
    decision.with_times(scale(decision.retry_after()), scale(decision.reset_after()))
}

/// A script's reply for `keys` keys, `{allowed, remaining, retry_after, reset_after, capacity}`
/// for each, with its times in units of `unit` nanoseconds, as [`Decision`]s.
pub(super) fn decisions(reply: &[i64], keys: usize, unit: u64) -> Result<Vec<Decision>, Error> {
    let unexpected = || Error::Reply(format!("{reply:?}"));
    if reply.len() != 5 * keys {
        return Err(unexpected());
    }
    reply
        .chunks(5)
        .map(|fields| {
            let field = |i: usize| u64::try_from(fields[i]).map_err(|_| unexpected());
            if field(0)? > 1 {
                return Err(unexpected());
            }
            let decision = Decision::new(
                field(0)? == 1,
                field(1)?,
                Nanos::from_nanos(field(2)?),
                Nanos::from_nanos(field(3)?),
                field(4)?,
            );
            Ok(in_units(decision, unit))
        })
        .collect()
}
