//! Snapshots: a keyed limiter's state saved to bytes and restored in another process, so that
//! long-lived limits ("3 per day") survive a restart without an external store.
//!
//! [`KeyedRateLimiter::snapshot`](crate::KeyedRateLimiter::snapshot) and
//! [`KeyedSlidingLog::snapshot`](crate::KeyedSlidingLog::snapshot) save; the builders'
//! `restore` builds a limiter from a snapshot. Restoring needs the same configuration: the same
//! algorithm and quota (and tiers), the same hasher (a key is stored as its hash, never itself,
//! so the hasher must be seeded the same: build limiters you persist with
//! `.hasher(ahash::RandomState::with_seeds(..))` and keep the seeds with your configuration),
//! and, for a keyed table, the same shape (capacity and threads). Anything else is an error that
//! names what differs.
//!
//! # Time
//!
//! A state's times are the saving limiter's clock readings. The snapshot records that clock and
//! the wall clock (the system's, since the Unix epoch) at the moment it was taken; a restore
//! moves every time by the wall-clock time that passed in between, so that a key limited for
//! six more hours at the save is limited for six hours less the downtime. GCRA's states and the
//! sliding log's timestamps move exactly. A window counter's windows are aligned on its
//! limiter's own clock, so they seldom line up after a restart: each count is put in every new
//! window its old window overlaps, which may deny more than the original would have, never
//! less. A wall clock stepped backwards between the save and the restore keeps keys limited
//! for longer; one stepped forwards frees them early, as the time passing would.
//!
//! # Format
//!
//! Little-endian throughout:
//!
//! ```text
//! magic "tollgate" (8) | version u16 | kind u8 | algorithm u8 | parameters 3 × u64
//! | hasher fingerprint u64 | tiers 8 × u64 | shape 2 × u32 | wall clock u64 | clock u64
//! | entries u64 | the entries | CRC-64 (ECMA-182, as xz uses) of everything before it, u64
//! ```
//!
//! A table's entry is its slot's position, tag and state (3 × u64); a sliding log's is the
//! key's hash, its count (u32) and its timestamps (u64 each). Input that is truncated,
//! corrupted, of another version or of another limiter is a [`SnapshotError`], never a panic
//! (a fuzz target feeds restores arbitrary bytes).

use core::fmt;

use crate::clock::Nanos;

/// Why a snapshot could not be restored.
///
/// ```
/// use tollgate::{Gcra, KeyedRateLimiter, Quota, SnapshotError};
/// let builder = KeyedRateLimiter::<str>::builder(Gcra::from(Quota::per_day(3).unwrap()));
/// assert_eq!(builder.restore(b"not a snapshot").unwrap_err(), SnapshotError::NotASnapshot);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The bytes do not start as a snapshot does.
    NotASnapshot,
    /// A snapshot of a version this build does not read.
    Version {
        /// The version found.
        found: u16,
    },
    /// The bytes end before the snapshot does.
    Truncated,
    /// The checksum does not match: the bytes were changed after the snapshot was taken.
    Checksum,
    /// A snapshot of a limiter configured differently: the part of the configuration named.
    Mismatch {
        /// What differs: `"kind"`, `"algorithm"`, `"quota"`, `"hasher"`, `"tiers"`, `"shape"`.
        what: &'static str,
    },
    /// A snapshot whose checksum matches but whose contents cannot be a limiter's (written by
    /// something else): the part named.
    Corrupt {
        /// What is wrong.
        what: &'static str,
    },
    /// The configuration cannot be built (a capacity that cannot be allocated, say).
    Build(crate::BuildError),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::NotASnapshot => f.write_str("not a tollgate snapshot"),
            SnapshotError::Version { found } => write!(
                f,
                "a snapshot of version {found}; this build reads version {VERSION}"
            ),
            SnapshotError::Truncated => f.write_str("the snapshot is truncated"),
            SnapshotError::Checksum => {
                f.write_str("the snapshot's checksum does not match its contents")
            }
            SnapshotError::Mismatch { what } => write!(
                f,
                "the snapshot is of a limiter with another {what}; restore it with the same"
            ),
            SnapshotError::Corrupt { what } => write!(f, "the snapshot holds an invalid {what}"),
            SnapshotError::Build(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for SnapshotError {}

impl From<crate::BuildError> for SnapshotError {
    fn from(err: crate::BuildError) -> SnapshotError {
        SnapshotError::Build(err)
    }
}

const MAGIC: &[u8; 8] = b"tollgate";
const VERSION: u16 = 1;

/// What a snapshot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Table = 1,
    SlidingLog = 2,
}

/// Everything before the entries: what a restore checks against its own configuration, and
/// the two clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: Kind,
    /// The algorithm's name and parameters ([`Sealed::snapshot_id`](crate::algorithm)).
    pub(crate) algorithm: (u8, [u64; 3]),
    pub(crate) fingerprint: u64,
    pub(crate) tiers: [u64; 8],
    pub(crate) shape: (u32, u32),
    /// The wall clock at the save, nanoseconds since the Unix epoch.
    pub(crate) wall: u64,
    /// The limiter's clock at the save.
    pub(crate) clock: u64,
    pub(crate) entries: u64,
}

impl Header {
    /// Whether `self`, read from a snapshot, was taken from a limiter configured as `ours` is;
    /// the first difference otherwise.
    pub(crate) fn check(&self, ours: &Header) -> Result<(), SnapshotError> {
        let differs = |what| Err(SnapshotError::Mismatch { what });
        if self.kind != ours.kind {
            differs("kind")
        } else if self.algorithm.0 != ours.algorithm.0 {
            differs("algorithm")
        } else if self.algorithm.1 != ours.algorithm.1 {
            differs("quota")
        } else if self.fingerprint != ours.fingerprint {
            differs("hasher")
        } else if self.tiers != ours.tiers {
            differs("tiers")
        } else if self.shape != ours.shape {
            differs("shape")
        } else {
            Ok(())
        }
    }

    /// The time to add to a time of the saving limiter's clock to have the same moment on a
    /// clock that reads `now` when the wall clock reads `wall`.
    pub(crate) fn shift(&self, now: Nanos, wall: u64) -> i128 {
        (now.as_nanos() as i128 - self.clock as i128) - (wall as i128 - self.wall as i128)
    }
}

/// The wall clock: nanoseconds since the Unix epoch (0 before it).
pub(crate) fn wall_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}

/// A time of the saving clock moved by `shift` onto the restoring one: `None` if that is before
/// its epoch; at most [`Nanos::MAX`].
pub(crate) fn moved(time: u64, shift: i128) -> Option<u64> {
    let moved = time as i128 + shift;
    (moved >= 0).then(|| moved.min(Nanos::MAX.as_nanos() as i128) as u64)
}

/// Writes a snapshot.
pub(crate) struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    pub(crate) fn new(header: &Header) -> Writer {
        let mut writer = Writer {
            bytes: Vec::with_capacity(160 + header.entries as usize * 24),
        };
        writer.bytes.extend_from_slice(MAGIC);
        writer.bytes.extend_from_slice(&VERSION.to_le_bytes());
        writer.bytes.push(header.kind as u8);
        writer.bytes.push(header.algorithm.0);
        for word in header.algorithm.1 {
            writer.u64(word);
        }
        writer.u64(header.fingerprint);
        for room in header.tiers {
            writer.u64(room);
        }
        writer.u32(header.shape.0);
        writer.u32(header.shape.1);
        writer.u64(header.wall);
        writer.u64(header.clock);
        writer.u64(header.entries);
        writer
    }

    pub(crate) fn u64(&mut self, word: u64) {
        self.bytes.extend_from_slice(&word.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, word: u32) {
        self.bytes.extend_from_slice(&word.to_le_bytes());
    }

    /// The snapshot, its checksum appended.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let crc = crc64(&self.bytes);
        self.u64(crc);
        self.bytes
    }
}

/// Reads a snapshot whose magic, version and checksum have been checked.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// The snapshot's header, and a reader of its entries.
    pub(crate) fn open(bytes: &'a [u8]) -> Result<(Header, Reader<'a>), SnapshotError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        let mut reader = Reader {
            bytes: &bytes[MAGIC.len()..],
        };
        let version = u16::from_le_bytes(reader.take::<2>()?);
        if version != VERSION {
            return Err(SnapshotError::Version { found: version });
        }
        let Some((body, crc)) = bytes.split_last_chunk::<8>() else {
            return Err(SnapshotError::Truncated);
        };
        if body.len() < HEADER_LEN {
            return Err(SnapshotError::Truncated);
        }
        if crc64(body) != u64::from_le_bytes(*crc) {
            return Err(SnapshotError::Checksum);
        }
        let mut reader = Reader {
            bytes: &body[MAGIC.len() + 2..],
        };
        let kind = match reader.take::<1>()?[0] {
            1 => Kind::Table,
            2 => Kind::SlidingLog,
            _ => return Err(SnapshotError::Corrupt { what: "kind" }),
        };
        let algorithm = (
            reader.take::<1>()?[0],
            [reader.u64()?, reader.u64()?, reader.u64()?],
        );
        let fingerprint = reader.u64()?;
        let mut tiers = [0; 8];
        for room in &mut tiers {
            *room = reader.u64()?;
        }
        let shape = (reader.u32()?, reader.u32()?);
        let (wall, clock, entries) = (reader.u64()?, reader.u64()?, reader.u64()?);
        let header = Header {
            kind,
            algorithm,
            fingerprint,
            tiers,
            shape,
            wall,
            clock,
            entries,
        };
        Ok((header, reader))
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or(SnapshotError::Truncated)?;
        self.bytes = rest;
        Ok(*head)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, SnapshotError> {
        self.take::<8>().map(u64::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, SnapshotError> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    /// The bytes left.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Replaces the last 8 bytes of `body` (appending them if it is shorter) with the checksum of
/// the rest.
#[cfg(feature = "reference")]
pub(crate) fn seal(body: &mut Vec<u8>) {
    let len = body.len().saturating_sub(8);
    body.truncate(len);
    let crc = crc64(body);
    body.extend_from_slice(&crc.to_le_bytes());
}

/// The header's length in bytes.
const HEADER_LEN: usize = 8 + 2 + 1 + 1 + 3 * 8 + 8 + 8 * 8 + 2 * 4 + 3 * 8;

/// CRC-64/XZ (ECMA-182 polynomial, reflected, initial and final value all ones).
fn crc64(bytes: &[u8]) -> u64 {
    const TABLE: [u64; 256] = {
        let mut table = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u64;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xC96C_5795_D787_0F42
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    let mut crc = u64::MAX;
    for &byte in bytes {
        crc = TABLE[((crc ^ byte as u64) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_xz_s() {
        // The check value of CRC-64/XZ.
        assert_eq!(crc64(b"123456789"), 0x995D_C9BB_DF19_39FA);
    }

    #[test]
    fn headers_round_trip_and_every_change_is_caught() {
        let header = Header {
            kind: Kind::Table,
            algorithm: (1, [10, 20, 2]),
            fingerprint: 0xABCD,
            tiers: [1, 2, 3, 4, 5, 6, 7, 0],
            shape: (8, 128),
            wall: 1_700_000_000_000_000_000,
            clock: 5_000,
            entries: 0,
        };
        let bytes = Writer::new(&header).finish();
        assert_eq!(bytes.len(), HEADER_LEN + 8);
        let (read, rest) = Reader::open(&bytes).unwrap();
        assert_eq!(read, header);
        assert_eq!(rest.len(), 0);
        // Every truncation and every flipped bit is an error, never a panic.
        for len in 0..bytes.len() {
            assert!(Reader::open(&bytes[..len]).is_err(), "{len}");
        }
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Reader::open(&flipped).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn shifts_follow_the_wall_clock() {
        let header = Header {
            kind: Kind::Table,
            algorithm: (1, [0; 3]),
            fingerprint: 0,
            tiers: [0; 8],
            shape: (0, 0),
            wall: 1_000_000,
            clock: 700,
            entries: 0,
        };
        // Ten seconds later on the wall clock, on a clock that reads 50 ns: the saving clock's
        // 700 ns (the save) is the new clock's 50 ns − 10 s, before its epoch; 20 s after the
        // save is 10 s after the new clock's now.
        let shift = header.shift(Nanos::from_nanos(50), 1_000_000 + 10_000_000_000);
        assert_eq!(shift, -650 - 10_000_000_000);
        assert_eq!(
            moved(700 + 20_000_000_000, shift),
            Some(50 + 10_000_000_000)
        );
        assert_eq!(moved(700, shift), None);
    }
}
