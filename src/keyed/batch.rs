//! Batches: [`KeyedRateLimiter::check_keys`] and its iterator, which overlap the table lookups of
//! many keys.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};

use super::KeyedRateLimiter;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::decision::Denied;
use crate::store::Probe;

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> KeyedRateLimiter<K, A, C, S> {
    /// Admits one request for each key of `keys`, in order, with the keys' table lookups
    /// overlapped: for a server that receives requests in batches (a read of many packets, a queue
    /// drained at once), over a table larger than the CPU caches.
    ///
    /// The iterator yields, key by key, the decision [`check_key`](Self::check_key) would give.
    /// It works in chunks of up to 16 keys: a chunk's keys are hashed and their table lines
    /// requested together, and the chunk is decided in order at one clock reading while the next
    /// chunk's lines are on their way, so cache misses overlap instead of following one another.
    /// A key repeated within a chunk is decided twice, the second time on the state the first
    /// decision left, exactly as with two calls. Nothing is checked until the iterator is
    /// advanced, and a key is checked only when its chunk's first decision is asked for; the
    /// keys themselves are read (and hashed) up to two chunks, 32 keys, ahead of the decisions
    /// yielded. The decisions end at the first `None` of `keys`, which is not asked again.
    ///
    /// A check over a table in main memory costs about one memory latency; a batch costs a
    /// fraction of one per key (measured: over a million keys, 0.12 of governor's time per
    /// check; the crate README gives the figures and the command). A call has a fixed cost (its
    /// buffers, a clock reading per chunk): over 100k keys, a batch of one key costs about 1.7
    /// `check_key`s, and a batch of four about 0.94 of `check_key` per key
    /// (`cargo bench --bench paired -- "keyed 100k uniform"`).
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<String>::gcra(Quota::per_hour(2).unwrap(), 1_000).unwrap();
    /// let batch = ["alice", "bob", "alice", "alice"];
    /// let admitted: Vec<bool> = limiter.check_keys(batch).map(|d| d.is_ok()).collect();
    /// assert_eq!(admitted, [true, true, true, false]);
    /// ```
    #[inline]
    pub fn check_keys<'k, Q, I>(&self, keys: I) -> CheckKeys<'_, K, A, C, S, I::IntoIter>
    where
        I: IntoIterator<Item = &'k Q>,
        K: Borrow<Q>,
        Q: Hash + ?Sized + 'k,
    {
        CheckKeys {
            limiter: self,
            keys: keys.into_iter(),
            results: [Ok(()); BATCH],
            next: 0,
            len: 0,
            probes: [[Probe::default(); BATCH]; 2],
            ahead: 0,
            ahead_len: 0,
            exhausted: false,
        }
    }
}

/// How many keys [`KeyedRateLimiter::check_keys`] hashes, prefetches and decides together: with
/// the next chunk read ahead, enough to cover a memory latency with a chunk's decisions, few
/// enough that two chunks' probes and one chunk's decisions stay in L1. In development runs, 8
/// and 32 did no better.
const BATCH: usize = 16;

/// The decisions of [`KeyedRateLimiter::check_keys`], one per key, in order.
///
/// ```
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// let limiter = KeyedRateLimiter::<u64>::gcra(Quota::per_hour(1).unwrap(), 100).unwrap();
/// let mut decisions = limiter.check_keys(&[1, 2, 1]);
/// assert_eq!(decisions.size_hint(), (3, Some(3)));
/// assert!(decisions.next().unwrap().is_ok());
/// assert!(decisions.next().unwrap().is_ok());
/// assert!(decisions.next().unwrap().is_err());
/// assert!(decisions.next().is_none());
/// ```
#[must_use = "iterators are lazy: no key is checked until the iterator is advanced"]
pub struct CheckKeys<'a, K: ?Sized, A, C, S, I> {
    limiter: &'a KeyedRateLimiter<K, A, C, S>,
    keys: I,
    /// The current chunk's decisions; `next..len` are still to be yielded.
    results: [Result<(), Denied>; BATCH],
    next: usize,
    len: usize,
    /// Two chunks of probes: the current chunk's, and the next one's (`probes[ahead]`, the first
    /// `ahead_len`), whose cache lines are on their way while the current chunk is decided.
    probes: [[Probe; BATCH]; 2],
    ahead: usize,
    ahead_len: usize,
    /// Whether `keys` has ended: it is not asked again, so the decisions end at its first `None`
    /// even if it would go on after it.
    exhausted: bool,
}

impl<'k, K, A, C, S, I, Q> CheckKeys<'_, K, A, C, S, I>
where
    K: ?Sized + Borrow<Q>,
    S: BuildHasher,
    I: Iterator<Item = &'k Q>,
    Q: Hash + ?Sized + 'k,
{
    /// Hashes the next chunk of keys into `probes[ahead]` and starts fetching their cache lines.
    #[inline]
    fn read_ahead(&mut self) {
        let limiter = self.limiter;
        let probes = &mut self.probes[self.ahead];
        let mut len = 0;
        if !self.exhausted {
            for key in self.keys.by_ref().take(BATCH) {
                probes[len] = limiter.probe(key);
                len += 1;
            }
            self.exhausted = len < BATCH;
        }
        self.ahead_len = len;
    }
}

impl<'k, K, A, C, S, I, Q> Iterator for CheckKeys<'_, K, A, C, S, I>
where
    K: ?Sized + Borrow<Q>,
    A: Algorithm,
    C: Clock,
    S: BuildHasher,
    I: Iterator<Item = &'k Q>,
    Q: Hash + ?Sized + 'k,
{
    type Item = Result<(), Denied>;

    #[inline]
    fn next(&mut self) -> Option<Result<(), Denied>> {
        if self.next == self.len {
            // Decide the chunk read ahead, reading the one after it first: its prefetches then
            // have a whole chunk's decisions to arrive in, where the first keys of a chunk would
            // otherwise wait out a full memory latency.
            if self.ahead_len == 0 && !self.exhausted {
                // The first call: nothing read ahead yet. (Later, an empty read-ahead means the
                // keys have ended.)
                self.read_ahead();
            }
            if self.ahead_len == 0 {
                return None;
            }
            let (current, len) = (self.ahead, self.ahead_len);
            self.ahead ^= 1;
            self.read_ahead();
            // One clock reading for the whole chunk, taken after its lines were requested.
            let limiter = self.limiter;
            let now = limiter.clock.now();
            let chunk = &self.probes[current][..len];
            for (result, probe) in self.results.iter_mut().zip(chunk) {
                *result = limiter.apply_at(&limiter.algorithm, probe, 1, now);
            }
            (self.next, self.len) = (0, len);
        }
        self.next += 1;
        Some(self.results[self.next - 1])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let buffered = self.len - self.next + self.ahead_len;
        let (low, high) = if self.exhausted {
            (0, Some(0))
        } else {
            self.keys.size_hint()
        };
        (
            low.saturating_add(buffered),
            high.and_then(|h| h.checked_add(buffered)),
        )
    }
}

/// Fused whatever `keys` is: once it has returned `None`, it is not asked again.
impl<'k, K, A, C, S, I, Q> core::iter::FusedIterator for CheckKeys<'_, K, A, C, S, I>
where
    K: ?Sized + Borrow<Q>,
    A: Algorithm,
    C: Clock,
    S: BuildHasher,
    I: Iterator<Item = &'k Q>,
    Q: Hash + ?Sized + 'k,
{
}

impl<K: ?Sized, A, C, S, I> fmt::Debug for CheckKeys<'_, K, A, C, S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckKeys")
            .field("decided", &&self.results[self.next..self.len])
            .finish_non_exhaustive()
    }
}
