//! Leases: how much budget a process takes from Redis at a time ([`Lease`]), and the word in
//! which the local table keeps what is left of a key's lease.
//!
//! # The word
//!
//! ```text
//!  63                                   26   25         24  23                0
//! ┌───────────────────────────────────────┬─────────┬──────────┬───────────────┐
//! │ expiry (38 bits, ms of the local clock)│ drained │ renewing │ count (24 bits)│
//! └───────────────────────────────────────┴─────────┴──────────┴───────────────┘
//! ```
//!
//! `count` is the budget left to spend locally until `expiry`, in milliseconds since the
//! limiter's clock started, plus one (so that the absent word, 0, has always expired; 2^38 ms is
//! more than eight years). `renewing` says that one task is taking a lease for the key from
//! Redis: the others do not start another. `drained` says that Redis had less than a request
//! needed: until `expiry` (the time Redis said the rest would be there), requests the count
//! cannot cover are denied without asking again.

use core::time::Duration;

use super::LeaseGrant;
use crate::algorithm::{sealed, Algorithm, Transition};
use crate::clock::Nanos;
use crate::decision::Decision;
use crate::quota::{Quota, QuotaError};

/// How a [`LeasedKeyedRateLimiter`](super::LeasedKeyedRateLimiter) takes budget from Redis:
/// `size` at a time per key, spent locally for at most `lifetime`, for up to `capacity` keys
/// at once.
///
/// The size trades round trips against overshoot: a key's decisions take one round trip per
/// `size` admissions, and across `N` processes the limit can be exceeded by at most
/// `N × 1.5 × size` in any interval (see the limiter's docs). Make a lease last several round
/// trips at the key's rate (a key of 200 000 a second served by one process: a few thousand),
/// so that the renewal, started when half of it is left, is back before the rest is spent.
///
/// ```
/// use std::time::Duration;
/// use tollgate::redis::Lease;
///
/// let lease = Lease::new(100).capacity(50_000).lifetime(Duration::from_millis(250));
/// assert_eq!(lease.size(), 100);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    size: u64,
    capacity: usize,
    lifetime: Option<Duration>,
}

impl Lease {
    /// The largest lease: what a count of 24 bits holds with room for one more lease beside it.
    pub const MAX_SIZE: u64 = 1 << 22;

    /// Leases of `size` (at most the quota's burst and [`Lease::MAX_SIZE`]), for up to 10 000
    /// keys at once, each spent for at most the time it stands for at the quota's rate.
    #[must_use]
    pub const fn new(size: u64) -> Lease {
        Lease {
            size,
            capacity: 10_000,
            lifetime: None,
        }
    }

    /// The keys the local table holds at once (24 bytes each). A key that finds no room is
    /// decided on Redis, one round trip each.
    #[must_use]
    pub const fn capacity(mut self, keys: usize) -> Lease {
        self.capacity = keys;
        self
    }

    /// How long a lease may be spent (at least a millisecond): what is left of it then is given
    /// back to Redis, when the key is next asked for. By default, the time the lease stands for
    /// at the quota's rate (`size × emission interval`), by which Redis's own state would have
    /// earned it back, but at least 100 ms, so that a lease outlives the scheduling delays of a
    /// busy process.
    #[must_use]
    pub const fn lifetime(mut self, lifetime: Duration) -> Lease {
        self.lifetime = Some(lifetime);
        self
    }

    /// The budget a lease takes.
    ///
    /// ```
    /// # use tollgate::redis::Lease;
    /// assert_eq!(Lease::new(64).size(), 64);
    /// ```
    #[must_use]
    pub const fn size(&self) -> u64 {
        self.size
    }

    /// The keys the local table holds at once.
    pub(super) const fn keys(&self) -> usize {
        self.capacity
    }

    /// The lifetime, or the default for a quota whose emission interval is `interval`.
    pub(super) fn lifetime_or(&self, interval: Duration) -> Duration {
        self.lifetime.unwrap_or_else(|| {
            let earned = interval.saturating_mul(self.size.min(u32::MAX as u64) as u32);
            earned.max(Duration::from_millis(100))
        })
    }
}

/// The lease word, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Held {
    /// Milliseconds of the local clock, plus one.
    pub(super) expiry: u64,
    pub(super) renewing: bool,
    pub(super) drained: bool,
    pub(super) count: u64,
}

const COUNT_BITS: u32 = 24;
const RENEWING: u64 = 1 << COUNT_BITS;
const DRAINED: u64 = 1 << (COUNT_BITS + 1);
const EXPIRY_SHIFT: u32 = COUNT_BITS + 2;
/// The latest expiry: one below the all-ones field, so that the word is never `u64::MAX` (the
/// table's reserved word).
const LAST_EXPIRY: u64 = (1 << (64 - EXPIRY_SHIFT)) - 2;

impl Held {
    pub(super) const fn unpack(word: u64) -> Held {
        Held {
            expiry: word >> EXPIRY_SHIFT,
            renewing: word & RENEWING != 0,
            drained: word & DRAINED != 0,
            count: word & (RENEWING - 1),
        }
    }

    /// The word; `count` is below 2^24 (a lease is at most [`Lease::MAX_SIZE`], and a key holds
    /// less than two).
    pub(super) const fn pack(&self) -> u64 {
        let expiry = if self.expiry < LAST_EXPIRY {
            self.expiry
        } else {
            LAST_EXPIRY
        };
        (expiry << EXPIRY_SHIFT)
            | ((self.drained as u64) * DRAINED)
            | ((self.renewing as u64) * RENEWING)
            | self.count
    }

    /// Whether the lease can still be spent at `now` (see [`millis`]).
    pub(super) const fn is_live(&self, now: u64) -> bool {
        self.expiry > now
    }
}

/// The local clock's `now` in the word's unit: milliseconds, plus one.
pub(super) const fn millis(now: Nanos) -> u64 {
    now.as_nanos() / 1_000_000 + 1
}

/// What a spend found in the key's lease word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Spend {
    /// Admitted; and whether this task claimed a renewal ahead of need.
    Spent { renew: bool },
    /// Redis had too little; denied for `wait` more milliseconds.
    Drained { wait: u64 },
    /// Another task is renewing the lease.
    Busy,
    /// This task claimed the word: it takes a lease, giving back `give_back` (an expired
    /// lease's rest); `kept` is what the word still holds.
    Claimed { give_back: u64, kept: u64 },
}

/// A request of `cost` on the lease word `word` at `now` (see [`millis`]), in a limiter that
/// renews ahead of need below `low_water`: the outcome, and the word to store.
pub(super) fn spend(word: u64, cost: u64, now: u64, low_water: u64) -> (Spend, u64) {
    let held = Held::unpack(word);
    let live = held.is_live(now);
    if live && held.count >= cost {
        let count = held.count - cost;
        let renew = !held.renewing && !held.drained && count < low_water;
        let next = Held {
            count,
            renewing: held.renewing || renew,
            ..held
        };
        (Spend::Spent { renew }, next.pack())
    } else if live && held.drained {
        let wait = held.expiry - now;
        (Spend::Drained { wait }, word)
    } else if held.renewing {
        (Spend::Busy, word)
    } else {
        // An expired lease's rest is given back; a live one's is kept, and spent meanwhile.
        let (give_back, kept) = if live {
            (0, held.count)
        } else {
            (held.count, 0)
        };
        let claimed = Held {
            renewing: true,
            drained: false,
            count: kept,
            ..held
        };
        (Spend::Claimed { give_back, kept }, claimed.pack())
    }
}

/// The word after a lease of `grant`, for the task that claimed it: the grant added, the
/// request of `cost` (0 for none) admitted from it if it covers it, the claim let go; granted
/// budget lives `lifetime` milliseconds. Whether the request was admitted.
pub(super) fn complete(
    word: u64,
    grant: &LeaseGrant,
    cost: u64,
    now: u64,
    lifetime: u64,
) -> (bool, u64) {
    let held = Held::unpack(word);
    let count = held.count + grant.granted;
    let admitted = cost > 0 && count >= cost;
    let count = if admitted { count - cost } else { count };
    // Redis had less than half a lease (or than the request needed): what the word cannot
    // cover is denied here, without asking again, until Redis has that much. Near its limit,
    // a key is then asked for budget once per half a lease's worth of time, not once per
    // request.
    let short = !grant.retry_after.is_zero();
    let expiry = if short {
        now + (grant.retry_after.as_micros() as u64)
            .div_ceil(1_000)
            .max(1)
    } else if grant.granted > 0 {
        now + lifetime
    } else {
        held.expiry
    };
    let next = Held {
        expiry,
        renewing: false,
        drained: short,
        count,
    };
    (admitted, next.pack())
}

/// The lease words as the table's algorithm: what it asks to choose a slot for a new key. An
/// entry is idle when nothing can be spent from it and no task is renewing it; one that is
/// being renewed is never evicted.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget;

impl sealed::Sealed for Budget {
    fn is_limited(&self, state: u64, _now: Nanos, _room: u64) -> bool {
        Held::unpack(state).renewing
    }

    // The lease table's words are not a quota's: it is never reconfigured.
    fn for_quota(_: &Quota) -> Result<Budget, QuotaError> {
        Ok(Budget)
    }

    fn to_words(&self) -> [u64; 3] {
        [0; 3]
    }

    fn from_words(_: [u64; 3]) -> Budget {
        Budget
    }
}

impl Algorithm for Budget {
    fn capacity(&self) -> u64 {
        Lease::MAX_SIZE
    }

    fn transition(&self, state: u64, now: Nanos, cost: u64) -> Transition {
        let held = Held::unpack(state);
        if held.is_live(millis(now)) && held.count >= cost {
            let left = Held {
                count: held.count - cost,
                ..held
            };
            Transition::Allow { state: left.pack() }
        } else {
            Transition::Deny {
                retry_after: Nanos::ZERO,
            }
        }
    }

    fn carry_over(&self, state: u64, _now: Nanos, _to: &Budget) -> u64 {
        state
    }

    fn decide(&self, state: u64, now: Nanos, cost: u64) -> (Decision, u64) {
        let held = Held::unpack(state);
        let now_ms = millis(now);
        let until_idle = if held.renewing {
            Nanos::MAX
        } else if held.is_live(now_ms) && held.count > 0 {
            Nanos::from_nanos((held.expiry - now_ms).saturating_mul(1_000_000))
        } else {
            Nanos::ZERO
        };
        let (allowed, next) = match self.transition(state, now, cost) {
            Transition::Allow { state } => (true, state),
            Transition::Deny { .. } => (false, state),
        };
        let decision = Decision::new(
            allowed,
            held.count,
            Nanos::ZERO,
            until_idle,
            Lease::MAX_SIZE,
        );
        (decision, next)
    }

    fn is_idle(&self, state: u64, now: Nanos) -> bool {
        let held = Held::unpack(state);
        !held.renewing && (held.count == 0 || !held.is_live(millis(now)))
    }
}

/// A loom model of the lease word's protocol: spends, a claim and its completion, each a
/// compare-and-swap step of the table's (run by `loom-tests/run.sh`).
#[cfg(all(test, tollgate_loom))]
mod loom_models {
    use super::*;
    use crate::store::{Generations, Overflow, Table, CLASSES};
    use loom::sync::Arc;
    use loom::thread;

    /// Three requests of cost 1 for a key whose lease holds 1: one spends it; the next to find
    /// the word empty claims it and completes a lease of 5, admitting itself; the third spends
    /// from that lease, or finds the claim (and is decided elsewhere). Under every
    /// interleaving: exactly one claim, the claim let go, and no budget made or lost.
    #[test]
    fn a_claim_races_spends() {
        loom::model(|| {
            let table = Arc::new(Table::new(2, 1, [0; CLASSES]).unwrap());
            let budget = Arc::new(Generations::new(Budget));
            let (now, key) = (Nanos::ZERO, 42);
            let ms = millis(now);
            let held = Held {
                expiry: ms + 1_000,
                renewing: false,
                drained: false,
                count: 1,
            };
            let probe = table.probe(key);
            let inserted = table.update(
                &probe,
                &budget,
                budget.load(),
                now,
                Overflow::Deny,
                |_, _| ((), held.pack()),
            );
            assert!(inserted.is_ok());
            let requests: Vec<_> = (0..3)
                .map(|_| {
                    let (table, budget) = (Arc::clone(&table), Arc::clone(&budget));
                    thread::spawn(move || {
                        let probe = table.probe(key);
                        let step = |w, _: &_| spend(w, 1, ms, 0);
                        let current = budget.load();
                        match table
                            .update(&probe, &budget, current, now, Overflow::Deny, step)
                            .ok()
                        {
                            Some(Spend::Spent { renew: false }) => (0, 1, 0),
                            Some(Spend::Busy) => (0, 0, 0),
                            Some(Spend::Claimed {
                                give_back: 0,
                                kept: 0,
                            }) => {
                                let grant = LeaseGrant {
                                    granted: 5,
                                    returned: 0,
                                    retry_after: Duration::ZERO,
                                    schedule: 0,
                                };
                                let done = |w, _: &_| complete(w, &grant, 1, ms, 1_000);
                                let current = budget.load();
                                let admitted = table.update(
                                    &probe,
                                    &budget,
                                    current,
                                    now,
                                    Overflow::Deny,
                                    done,
                                );
                                assert_eq!(admitted.ok(), Some(true));
                                (1, 1, 5)
                            }
                            other => panic!("{:?}", other),
                        }
                    })
                })
                .collect();
            let (mut claims, mut admitted, mut granted) = (0, 0, 0);
            for request in requests {
                let (c, a, g) = request.join().unwrap();
                (claims, admitted, granted) = (claims + c, admitted + a, granted + g);
            }
            let held = Held::unpack(table.state(&probe, &budget).0);
            assert_eq!(claims, 1);
            assert!(!held.renewing);
            assert_eq!(held.count + admitted, 1 + granted);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing held: what an absent key reads as.
    const NONE: Held = Held {
        expiry: 0,
        renewing: false,
        drained: false,
        count: 0,
    };

    #[test]
    fn words_round_trip() {
        for held in [
            NONE,
            Held {
                expiry: 12_345,
                renewing: true,
                drained: false,
                count: (1 << 24) - 1,
            },
            Held {
                expiry: LAST_EXPIRY,
                renewing: true,
                drained: true,
                count: 7,
            },
        ] {
            assert_eq!(Held::unpack(held.pack()), held);
        }
        assert_eq!(NONE.pack(), 0);
        // An expiry past the field's range is the last one, and the word is never all ones.
        let late = Held {
            expiry: u64::MAX,
            renewing: true,
            drained: true,
            count: (1 << 24) - 1,
        };
        assert_eq!(Held::unpack(late.pack()).expiry, LAST_EXPIRY);
        assert_ne!(late.pack(), u64::MAX);
    }

    #[test]
    fn an_entry_is_idle_when_nothing_can_be_spent_and_nobody_renews_it() {
        let at = |ms: u64| Nanos::from_nanos(ms * 1_000_000);
        let held = Held {
            expiry: millis(at(100)),
            renewing: false,
            drained: false,
            count: 3,
        };
        assert!(!Budget.is_idle(held.pack(), at(99)));
        assert!(Budget.is_idle(held.pack(), at(100)));
        let empty = Held { count: 0, ..held };
        assert!(Budget.is_idle(empty.pack(), at(0)));
        let renewing = Held {
            renewing: true,
            ..empty
        };
        assert!(!Budget.is_idle(renewing.pack(), at(1_000)));
        assert!(sealed::Sealed::is_limited(
            &Budget,
            renewing.pack(),
            at(0),
            0
        ));
        assert!(Budget.is_idle(0, at(0)));
    }
}
