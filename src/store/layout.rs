//! How a keyed table is cut up, and where a key lives in it: the sizes that follow from a
//! capacity ([`Layout`]: shards, groups, bytes) and the slots a key's hash points to ([`Probe`]).
//! Pure arithmetic on sizes and hashes; the slots themselves and the protocol that runs on them
//! are in the `table` module.

use crossbeam_utils::CachePadded;

use crate::error::BuildError;

use super::table::{Group, ShardStats, Table};
use crate::sync::AtomicU128;

/// Slots per probe group: 8 × 16 bytes, one 128-byte-aligned pair of cache lines (the adjacent
/// lines that x86's spatial prefetcher fetches together). Loom models use 2, to keep tiny tables
/// full and the state space small.
#[cfg(not(tollgate_loom))]
pub(crate) const GROUP: usize = 8;
#[cfg(tollgate_loom)]
pub(crate) const GROUP: usize = 2;

/// How full the table is at its configured capacity: `capacity / slots` = 0.68, or 23.5 bytes
/// per key of capacity.
///
/// Two 8-slot groups per key with insertion into the less loaded one keep overflows rare when a
/// table *fills*, but a table that stays full while keys come and go (`capacity` keys live at
/// every moment, the old ones going idle as new ones arrive) balances worse: at a load of 0.8
/// about 2% of insertions overflow, at 0.68 under 0.1%, which the flood test (`tests/flood.rs`)
/// asserts and `benches/placement.py` simulates, with the alternatives the implementation notes
/// list.
const LOAD_NUM: usize = 17;
const LOAD_DEN: usize = 25;

/// Groups per shard, at least, before a table is split into more shards.
///
/// Two reasons. A key's two probe groups are in its shard, so a shard needs many groups for the
/// two choices to balance. And each shard costs memory: a header of counters, cache-padded to
/// 128 bytes on x86-64 and AArch64, and, from rounding the groups up to a multiple of the shard
/// count, up to one more group. With at least 128 groups (16 KiB) per shard that is at most 1.6%,
/// which keeps a limiter of 2 000 keys or more within 24 bytes per key of capacity (the slots
/// alone take 23.53) however many threads it is built for; with 16 groups per shard, a table of
/// 10 000 keys built for 16 threads would take over 24.5.
///
/// Where the header is larger (`CachePadded` pads to 256 bytes on s390x, whose cache lines are
/// that long), the minimum grows with it, 128 groups per 128 bytes of header, so that the bound
/// holds there too; where it is smaller, 128 groups still.
const MIN_GROUPS_PER_SHARD: usize =
    128 * core::mem::size_of::<CachePadded<ShardStats>>().div_ceil(128);

/// The classes a slot's tag can name, in its top three bits: which quota judges whether its
/// entry is being limited (0, the table's own; a tier's; or none that the table knows). The
/// next two bits are the entry's generation (see [`GENERATION`]), the other 59 the key's
/// identity.
pub(crate) const CLASSES: usize = 8;
const CLASS_SHIFT: u32 = 61;
const GENERATION_SHIFT: u32 = 59;
/// The bits of a tag that hold the generation of the table's algorithm its entry is of, modulo
/// four: the table's own quota changes generation by generation (a reconfiguration), and an
/// entry's state means something only beside the algorithm of its generation.
pub(crate) const GENERATION: u64 = 3 << GENERATION_SHIFT;
/// The bits of a tag that name its key.
pub(crate) const IDENTITY: u64 = (1 << GENERATION_SHIFT) - 1;

/// The class of the entry whose tag is `tag`.
#[inline]
pub(crate) const fn class_of(tag: u64) -> usize {
    (tag >> CLASS_SHIFT) as usize
}

/// `tag` for an entry of `generation`.
#[inline]
pub(crate) const fn in_generation(tag: u64, generation: u64) -> u64 {
    tag & !GENERATION | (generation << GENERATION_SHIFT) & GENERATION
}

/// Where a key lives: its tag, its shard, its two probe groups, and in each group the slot it
/// looks at first.
///
/// A key is inserted at the first free slot of its group counting from its starting slot, and
/// looked up in the same order, so it is usually found within the first loads rather than half a
/// group in.
///
/// Computed once per key and call ([`Table::probe`]); a batch keeps each key's probe from its
/// prefetch to its decision.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Probe {
    /// The key's identity (its hash but for the top five bits; 0 marks an empty slot, so an
    /// identity of 0 becomes 1), the class of the request and the generation it is decided in,
    /// stored in its slot. A key's top bits are its shard's in a table of 32 shards or more, so
    /// there the identity is the whole hash in effect: keys of other shards never meet in a
    /// slot.
    pub(super) tag: u64,
    /// Indices kept in 32 bits (a table has at most 2^32 groups, see [`Layout::new`]) so that a
    /// probe is 24 bytes: a batch keeps 32 of them.
    shard: u32,
    groups: [u32; 2],
    /// 16 bits each where 8 would do: with `u8`s the probe would end in two bytes of padding,
    /// and copies of it (filling a batch's buffers, passing it to the lookup) would move its
    /// last bytes with overlapping stores and loads, which stall store-to-load forwarding.
    start: [u16; 2],
}

impl Probe {
    /// Where the key with `hash` lives in a table of `shards` shards (a power of two) of
    /// `groups_per_shard` groups each.
    #[inline]
    pub(super) fn new(hash: u64, shards: usize, groups_per_shard: u32) -> Probe {
        let tag = (hash & IDENTITY).max(1);
        let gps = groups_per_shard as u64;
        // Shard from the high bits (a power of two, so this is `hash >> (64 - bits)`).
        let shard = ((hash as u128 * shards as u128) >> 64) as usize;
        // First group from the low 32 bits, second from a multiplicative remix of all 64 (the
        // shard bits among them, but the rest vary freely, so within a shard it is as evenly
        // spread as the first). "Fast range" maps them onto any number of groups.
        let first = ((hash & 0xFFFF_FFFF) * gps) >> 32;
        let mixed = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let mut second = (mixed * gps) >> 32;
        if second == first {
            second = (first + 1) % gps;
        }
        let base = shard * groups_per_shard as usize;
        // Every index is below the table's group count, at most 2^32 (`Layout::new`): no
        // truncation.
        Probe {
            tag,
            shard: shard as u32,
            groups: [
                (base + first as usize) as u32,
                (base + second as usize) as u32,
            ],
            // Bits 40-47: outside the first group's low 32 bits and, below 2^16 shards, the
            // shard's high bits. The second group's remix reads them too, but with the 56 others,
            // which vary freely whatever these are, so keys that share a group still spread
            // their starting slots over it.
            start: [
                (hash >> 40) as u16 % GROUP as u16,
                (hash >> 44) as u16 % GROUP as u16,
            ],
        }
    }

    /// The same key, for a request whose entry belongs to `class` (below [`CLASSES`]).
    #[inline]
    pub(crate) const fn with_class(mut self, class: usize) -> Probe {
        self.tag = self.tag & (IDENTITY | GENERATION) | (class as u64) << CLASS_SHIFT;
        self
    }

    /// The same key, for a request decided in `generation` of the table's algorithm.
    #[inline]
    pub(crate) const fn in_generation(mut self, generation: u64) -> Probe {
        self.tag = in_generation(self.tag, generation);
        self
    }

    /// The number of distinct groups (1 when a shard has a single group).
    #[inline]
    pub(super) fn group_count(&self) -> usize {
        if self.groups[0] == self.groups[1] {
            1
        } else {
            2
        }
    }

    /// The index of the key's first (`g = 0`) or second group in the table.
    #[inline]
    pub(super) fn group(&self, g: usize) -> usize {
        self.groups[g] as usize
    }

    /// The slot the key looks at first in its group `g`.
    #[inline]
    pub(super) fn start(&self, g: usize) -> usize {
        usize::from(self.start[g])
    }

    /// The key's shard, whose counters its insertions and overflows update.
    #[inline]
    pub(super) fn shard(&self) -> usize {
        self.shard as usize
    }
}

/// How a table for a capacity is cut up: a pure function of the capacity and the thread count, so
/// that its size can be checked without allocating it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    /// A power of two.
    pub(super) shards: usize,
    pub(super) groups_per_shard: usize,
}

impl Layout {
    pub(super) fn new(capacity: usize, parallelism: usize) -> Result<Layout, BuildError> {
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let slots = capacity
            .checked_mul(LOAD_DEN)
            .ok_or(BuildError::capacity_too_large(capacity))?
            .div_ceil(LOAD_NUM);
        let groups = slots.div_ceil(GROUP);
        // Enough shards to spread the counters over the threads, each with enough groups for
        // its keys' two choices and to pay for its header.
        let shards = shards_for(parallelism, groups / MIN_GROUPS_PER_SHARD);
        let groups_per_shard = groups.div_ceil(shards);
        // Probes keep group indices in 32 bits: 2^32 groups are 512 GiB of table. (A shard then
        // has fewer than 2^32 groups, as `Table` stores them, since such a table has 4 shards or
        // more; checked anyway.)
        if (groups_per_shard * shards) as u64 > 1 << 32 || groups_per_shard > u32::MAX as usize {
            return Err(BuildError::capacity_too_large(capacity));
        }
        Ok(Layout {
            shards,
            groups_per_shard,
        })
    }

    /// Bytes of the table this layout makes (groups, shard headers and the table's own fields).
    pub(super) fn bytes(self) -> usize {
        self.shards * self.groups_per_shard * core::mem::size_of::<Group>()
            + self.shards * core::mem::size_of::<CachePadded<ShardStats>>()
            + core::mem::size_of::<Table>()
    }
}

/// The bytes of the slots alone for `capacity` keys, in 128 bits: what a capacity too large to
/// allocate reports.
pub(crate) const fn table_bytes(capacity: usize) -> u128 {
    (capacity as u128 * LOAD_DEN as u128).div_ceil(LOAD_NUM as u128)
        * core::mem::size_of::<AtomicU128>() as u128
}

/// About four shards per thread, as a power of two, but no more than `most` (nor fewer than one).
/// Any thread count is accepted: past `usize::MAX / 4` threads the count saturates instead of
/// overflowing.
pub(crate) fn shards_for(parallelism: usize, most: usize) -> usize {
    let most = prev_power_of_two(most.max(1));
    parallelism
        .max(1)
        .saturating_mul(4)
        .checked_next_power_of_two()
        .map_or(most, |wanted| wanted.min(most))
}

/// The largest power of two not above `n` (for `n >= 1`).
const fn prev_power_of_two(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.leading_zeros())
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::*;

    /// Bytes a keyed limiter holds beside its table (clock, hasher, algorithm, policy), with
    /// the default clock and hasher: the most of any algorithm's, for any key type. What
    /// [`KeyedRateLimiter::memory`](crate::KeyedRateLimiter::memory) adds to the table's bytes.
    fn limiter_fields() -> usize {
        use crate::algorithm::{FixedWindow, Gcra, SlidingWindow};
        use crate::keyed::KeyedRateLimiter;
        use core::mem::size_of;
        let fields = [
            size_of::<KeyedRateLimiter<u64, Gcra>>(),
            size_of::<KeyedRateLimiter<str, SlidingWindow>>(),
            size_of::<KeyedRateLimiter<String, FixedWindow>>(),
        ]
        .map(|limiter| limiter - size_of::<Table>());
        fields.into_iter().max().unwrap()
    }

    /// The arithmetic of the next test is what `memory` reports, checked on real limiters built
    /// for one thread (at most 4 shards, and at least 128 groups in each), one of them at a
    /// capacity where rounding costs the most: 2 786 keys need 4 098 slots, one group past 512,
    /// rounded up to 129 groups in each of 4 shards. (Where headers take 256 bytes, at least
    /// 256 groups in each: 2 shards of 257.)
    #[test]
    fn memory_is_the_layout_and_the_limiter_fields() {
        use crate::keyed::KeyedRateLimiter;
        use crate::quota::Quota;
        use core::mem::size_of;
        let quota = Quota::per_second(1).unwrap();
        // Capacity, then shards and groups per shard: 2 000 / 0.68 = 2 942 slots, 368 groups,
        // too few for 4 shards of 128; 10 000 keys, 1 839 groups, rounded up to 4 × 460. With
        // 256-byte headers, 368 groups are too few for 2 shards of 256, and 513 for 4.
        let expected = match size_of::<CachePadded<ShardStats>>() {
            ..=128 => [(2_000, 2, 184), (2_786, 4, 129), (10_000, 4, 460)],
            256 => [(2_000, 1, 368), (2_786, 2, 257), (10_000, 4, 460)],
            other => panic!("no layouts worked out for {other}-byte shard headers"),
        };
        for (n, shards, groups) in expected {
            let layout = Layout::new(n, 1).unwrap();
            assert_eq!((layout.shards, layout.groups_per_shard), (shards, groups));
            // Groups of 8 slots of 16 bytes, a cache-padded header of counters per shard, and
            // the table's own fields.
            let table = shards * groups * 128
                + shards * size_of::<CachePadded<ShardStats>>()
                + size_of::<Table>();
            assert_eq!(layout.bytes(), table);
            let limiter = KeyedRateLimiter::<u64>::builder(crate::Gcra::from(quota))
                .capacity(n)
                .threads(1)
                .build()
                .unwrap();
            let fields = core::mem::size_of_val(&limiter) - size_of::<Table>();
            assert!(fields <= limiter_fields());
            let bytes = table + fields;
            assert_eq!(limiter.memory(), bytes);
            assert!(bytes <= 24 * n, "{n} keys: {bytes} bytes");
        }
    }

    #[test]
    fn tables_of_2000_keys_or_more_take_at_most_24_bytes_per_key_for_any_thread_count() {
        let threads = [1, 2, 3, 16, 64, 1 << 10, 1 << 20, usize::MAX];
        let bounded = |n: usize, t: usize| {
            let bytes = Layout::new(n, t).unwrap().bytes();
            bytes + limiter_fields() <= 24 * n
        };
        for &t in &threads {
            // Every capacity up to 300 000 (55 000 groups: past the 8 192 at which a table
            // built for 16 threads reaches its 64 shards), then every power of two and its
            // neighbours up to 2^34 keys (near the 2^32-group limit; 2^25 on 32-bit targets,
            // where capacity × 25 must fit a usize).
            assert!((2_000..=300_000).all(|n| bounded(n, t)), "{t} threads");
            for n in (12..35.min(usize::BITS - 6)).map(|b| 1usize << b) {
                assert!(
                    (n - 2..n + 2).all(|n| bounded(n, t)),
                    "{n} keys, {t} threads"
                );
            }
        }
        // Small tables are dominated by fixed costs (whole groups, a shard header, the limiter's
        // fields) that the 0.47 bytes per key of room cannot pay for: 100 keys take 19 groups,
        // 2 432 bytes. (On x86-64, where the fields take 160 bytes, the bound first holds for
        // every thread count at 1 644 keys; the crate promises it from 2 000, which leaves room
        // for other targets' sizes.)
        assert!(!bounded(100, 1));
    }

    #[test]
    fn about_four_shards_per_thread_within_the_room() {
        let room = 1 << 20;
        assert_eq!(shards_for(0, room), 4);
        assert_eq!(shards_for(1, room), 4);
        assert_eq!(shards_for(3, room), 16);
        assert_eq!(shards_for(16, room), 64);
        assert_eq!(shards_for(16, 40), 32);
        assert_eq!(shards_for(16, 0), 1);
        assert_eq!(shards_for(usize::MAX / 4, room), room);
        assert_eq!(shards_for(usize::MAX, room), room);
        assert_eq!(shards_for(usize::MAX, usize::MAX), 1 << (usize::BITS - 1));
    }

    #[test]
    fn probes_stay_in_their_shard_and_use_two_groups() {
        let layout = Layout::new(100_000, 8).unwrap();
        let gps = layout.groups_per_shard;
        let mut same = 0;
        for k in 0..10_000u64 {
            let h = k.wrapping_mul(0x2545_F491_4F6C_DD1D);
            let p = Probe::new(h, layout.shards, gps as u32);
            for g in [p.group(0), p.group(1)] {
                assert_eq!(g / gps, p.shard());
            }
            same += (p.groups[0] == p.groups[1]) as u32;
            assert_eq!(
                p.shard(),
                (h >> (64 - layout.shards.trailing_zeros())) as usize
            );
        }
        assert_eq!(same, 0);
    }

    /// Keys spread evenly over their shard's groups, in the first group and in the second
    /// (whose remix reads the shard's bits too), and keys that share a group spread their starting
    /// slots evenly over it (the second group's remix reads the start's bits too).
    ///
    /// Each is a chi-square of counts against an even spread within each shard or group:
    /// independent draws score about their degrees of freedom, with a standard deviation of the
    /// square root of twice that, and the bound is six of those above (387 for the groups' 252
    /// degrees of freedom, 2 151 for the starts' 1 792), which independent draws exceed about
    /// once in ten million tries and once in a hundred million. Hashes from the crate's own
    /// hasher, with fixed seeds.
    ///
    /// Placing a start by the bits that choose its group (the mixed hash's top bits for the
    /// second) scores about 700 000; a second group taken from the mixed hash shifted 4 bits
    /// down, so that it only reaches the first 16th of the shard, about 1.5 million.
    #[test]
    fn groups_and_starting_slots_spread_evenly() {
        let (shards, gps) = (4, 64);
        let groups = shards * gps;
        let hasher = ahash::RandomState::with_seeds(1, 2, 3, 4);
        let per_cell = 50;
        // The statistic over `counts` cut into runs of `len`, each against its own even
        // spread, and the bound for its degrees of freedom.
        let chi_square = |counts: &[u32], len: usize| {
            let mut statistic = 0.0;
            for run in counts.chunks(len) {
                let expected = f64::from(run.iter().sum::<u32>()) / len as f64;
                for &n in run {
                    statistic += (f64::from(n) - expected).powi(2) / expected;
                }
            }
            let freedom = (counts.len() - counts.len() / len) as f64;
            (statistic, freedom + 6.0 * (2.0 * freedom).sqrt())
        };
        for g in 0..2 {
            let mut cells = vec![0u32; groups * GROUP];
            for key in 0..(groups * GROUP * per_cell) as u64 {
                let p = Probe::new(hasher.hash_one(key), shards, gps as u32);
                cells[p.group(g) * GROUP + p.start(g)] += 1;
            }
            let per_group: Vec<u32> = cells.chunks(GROUP).map(|c| c.iter().sum()).collect();
            let (score, bound) = chi_square(&per_group, gps);
            assert!(score < bound, "groups {g}: {score:.0} >= {bound:.0}");
            let (score, bound) = chi_square(&cells, GROUP);
            assert!(
                score < bound,
                "starts in groups {g}: {score:.0} >= {bound:.0}"
            );
        }
    }
}
