//! Batches: [`KeyedRateLimiter::check_keys`], [`KeyedRateLimiter::decide_keys`] and, for tiers,
//! [`KeyedRateLimiter::decide_keys_with`], whose iterators overlap the table lookups of many keys.
//!
//! The three iterators are the same [`Pipeline`] with a different request and a different
//! decision.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::iter::FusedIterator;

use super::{own, KeyedRateLimiter};
use crate::algorithm::{Algorithm, Gcra};
use crate::clock::{Clock, Nanos};
use crate::decision::{Decision, Denied, InsufficientCapacity};
use crate::quota::Quota;
use crate::store::{Current, Probe};

impl<K: ?Sized, A: Algorithm, C: Clock, S: BuildHasher> KeyedRateLimiter<K, A, C, S> {
    /// Admits one request for each key of `keys`, in order, with the keys' table lookups
    /// overlapped: for a server that receives requests in batches (a read of many packets, a queue
    /// drained at once), over a table larger than the CPU caches.
    ///
    /// The iterator yields, key by key, the decision [`check_key`](Self::check_key) would give.
    /// It works in chunks of up to 8 keys: a chunk's keys are hashed and their table lines
    /// requested together, and the chunk is decided in order while the next chunk's lines are on
    /// their way, so cache misses overlap instead of following one another. Two chunks in a row,
    /// 16 decisions, share one clock reading. A key repeated in a batch is decided twice, the
    /// second time on the state the first decision left, exactly as with two calls. A key is
    /// checked only when its decision is asked for (an iterator dropped half way has checked only
    /// the keys it yielded), at the clock reading taken when the first decision of its pair of
    /// chunks was asked for; the keys themselves are read (and hashed) up to two chunks, 16 keys,
    /// ahead of the decisions yielded. The decisions end at the first `None` of `keys`, which is
    /// not asked again.
    ///
    /// A key is decided as if its request had come at that reading. So take a batch's decisions
    /// before doing slow work on them (an `.await`, a write to a socket): advanced across such
    /// work, the iterator decides the 15 keys after each reading at that reading, however long
    /// the work between them took.
    ///
    /// A check over a table in main memory costs about one memory latency; a batch costs a fraction
    /// of one per key: over a million keys, a few times governor's throughput
    /// (`cargo bench --bench paired -- "keyed 1M uniform"`). That is on x86-64 and AArch64, whose
    /// prefetch instructions start a chunk's fetches together; other targets have none that stable
    /// Rust can call, and there a batch waits for each key's lines in turn. A call has a fixed cost
    /// (its buffers, a clock reading): a batch of one key costs more than a `check_key`, and from
    /// about four keys a batch is cheaper per key (`cargo bench --bench paired -- "keyed 100k
    /// uniform"`).
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
            pipeline: Pipeline::new(self, keys.into_iter(), ()),
        }
    }

    /// Decides a request of its cost for each `(key, cost)` of `requests`, in order, with the
    /// keys' table lookups overlapped as in [`check_keys`](Self::check_keys), and reports
    /// everything about each: for a batch of requests of different sizes (bytes of packets,
    /// tokens of API calls), or whose answers need `remaining` and `reset_after` (the
    /// `RateLimit-*` headers).
    ///
    /// The iterator yields, request by request, what [`decide_key`](Self::decide_key) would give:
    /// a cost above the capacity is an [`InsufficientCapacity`] error and leaves the key alone; a
    /// cost of 0 is admitted without changing anything or inserting the key. Chunks, read-ahead and the clock reading
    /// per 16 decisions are those of `check_keys`.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// // 1500 bytes per second per client, bursts of one 9000-byte jumbo frame.
    /// let bytes = Quota::per_second(1_500).unwrap().with_burst(9_000).unwrap();
    /// let limiter = KeyedRateLimiter::<str>::gcra(bytes, 1_000).unwrap();
    /// let packets = [("alice", 6_000), ("bob", 1_500), ("alice", 4_000), ("bob", 9_001)];
    /// let decisions: Vec<_> = limiter.decide_keys(packets).collect();
    /// assert_eq!(decisions[0].unwrap().remaining(), 3_000);
    /// assert_eq!(decisions[1].unwrap().remaining(), 7_500);
    /// assert!(!decisions[2].unwrap().is_allowed()); // 1000 bytes too many for now
    /// assert!(decisions[3].is_err()); // more than the burst: never fits
    /// ```
    #[inline]
    pub fn decide_keys<'k, Q, I>(&self, requests: I) -> DecideKeys<'_, K, A, C, S, I::IntoIter>
    where
        I: IntoIterator<Item = (&'k Q, u64)>,
        K: Borrow<Q>,
        Q: Hash + ?Sized + 'k,
    {
        DecideKeys {
            pipeline: Pipeline::new(self, requests.into_iter(), 0),
        }
    }
}

/// Tiers in batches: [`decide_keys`](KeyedRateLimiter::decide_keys) with a quota per request.
impl<K: ?Sized, C: Clock, S: BuildHasher> KeyedRateLimiter<K, Gcra, C, S> {
    /// Decides a request of its cost under its quota for each `(key, quota, cost)` of
    /// `requests`, in order, with the keys' table lookups overlapped as in
    /// [`check_keys`](Self::check_keys): [`decide_keys`](Self::decide_keys) for a table of tiers,
    /// each request decided under its key's tier.
    ///
    /// The iterator yields, request by request, what
    /// [`decide_key_with`](Self::decide_key_with) would give: a cost above the request's quota's
    /// burst is an [`InsufficientCapacity`] error and leaves the key alone, and a cost of 0 is
    /// admitted without changing anything. As there, the entries of a declared tier are judged
    /// by its own quota ([`check_key_with`](Self::check_key_with) has the rule). Chunks,
    /// read-ahead and the clock reading per 16 decisions are those of `check_keys`.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    ///
    /// let free = Quota::per_minute(10).unwrap();
    /// let premium = Quota::per_minute(1_000).unwrap();
    /// let limiter = KeyedRateLimiter::<str>::builder(Gcra::from(free))
    ///     .tier(premium)
    ///     .capacity(10_000)
    ///     .build()
    ///     .unwrap();
    /// let requests = [
    ///     ("free-user", &free, 10),
    ///     ("paying-user", &premium, 500),
    ///     ("free-user", &free, 1),
    ///     ("paying-user", &premium, 1_001),
    /// ];
    /// let decisions: Vec<_> = limiter.decide_keys_with(requests).collect();
    /// assert_eq!(decisions[0].unwrap().remaining(), 0);
    /// assert_eq!(decisions[1].unwrap().remaining(), 500);
    /// assert!(!decisions[2].unwrap().is_allowed()); // the free tier's 10 are spent
    /// assert!(decisions[3].is_err()); // more than the premium burst: never fits
    /// ```
    #[inline]
    pub fn decide_keys_with<'k, 'q, Q, I>(
        &self,
        requests: I,
    ) -> DecideKeysWith<'_, K, C, S, I::IntoIter>
    where
        I: IntoIterator<Item = (&'k Q, &'q Quota, u64)>,
        K: Borrow<Q>,
        Q: Hash + ?Sized + 'k,
    {
        DecideKeysWith {
            // The filler is never decided: any quota serves.
            pipeline: Pipeline::new(self, requests.into_iter(), (self.algorithm(), 0)),
        }
    }
}

/// How many keys a batch hashes and prefetches together, a chunk ahead of the ones it decides:
/// enough that a chunk's decisions cover most of a memory latency, few enough that a chunk's line
/// requests (four per key) do not queue behind one another. Over a million keys, chunks of 8
/// took about three quarters of the time of chunks of 16, and chunks of 4 and 12 more than 8
/// (`benches/ab.sh`, after changing this constant).
const CHUNK: usize = 8;

/// Chunks decided in a row at one clock reading: 16 decisions share one. A reading for every
/// chunk of 8 made batches over a small table, where the clock read is much of a check, a few
/// percent slower.
const CHUNKS_PER_READING: u32 = 2;

/// What the three batch iterators are: requests read and hashed a chunk ahead of the decisions,
/// their cache lines requested, and each pair of chunks decided at one clock reading. `E` is what
/// a request carries besides its key (nothing for `check_keys`, the cost for `decide_keys`, the
/// quota and the cost for `decide_keys_with`).
///
/// A request is decided when its decision is asked for, not before: there is no buffer of
/// decisions to fill, copy and drop, and a batch abandoned half way has decided only what it
/// yielded.
struct Pipeline<'a, K: ?Sized, A, C, S, I, E> {
    limiter: &'a KeyedRateLimiter<K, A, C, S>,
    requests: I,
    /// Two chunks of probes (each with the rest of its request): the current one
    /// (`probes[current]`, of which `next..len` are still to be decided), and the next one
    /// (`probes[current ^ 1]`, the first `ahead_len`), whose cache lines are on their way while
    /// the current chunk is decided.
    probes: [[(Probe, E); CHUNK]; 2],
    current: usize,
    next: usize,
    len: usize,
    ahead_len: usize,
    /// The clock reading of the current pair of chunks.
    now: Nanos,
    /// The limiter's algorithm, loaded with each clock reading (a change of quota racing the
    /// batch overtakes its decisions in the table, as it would single checks').
    quota: Current<A>,
    /// Whether `requests` has ended: it is not asked again, so the decisions end at its first
    /// `None` even if it would go on after it.
    exhausted: bool,
    /// Chunks started: every `CHUNKS_PER_READING`-th, from the first, reads the clock.
    chunks: u32,
}

impl<'a, K, A, C, S, I, E> Pipeline<'a, K, A, C, S, I, E>
where
    K: ?Sized,
    A: Algorithm,
    S: BuildHasher,
    I: Iterator,
    E: Copy,
{
    /// A pipeline that has read nothing yet. `filler` fills the buffers until requests are read
    /// into them; it is never decided.
    #[inline]
    fn new(limiter: &'a KeyedRateLimiter<K, A, C, S>, requests: I, filler: E) -> Self {
        Pipeline {
            limiter,
            requests,
            probes: [[(Probe::default(), filler); CHUNK]; 2],
            current: 1,
            next: 0,
            len: 0,
            ahead_len: 0,
            now: Nanos::ZERO,
            quota: limiter.quotas.load(),
            exhausted: false,
            chunks: 0,
        }
    }

    /// Hashes the next chunk of requests into `probes[current ^ 1]` and starts fetching their
    /// cache lines. `split` takes a request apart into its key and the rest.
    #[inline]
    fn read_ahead<'k, Q>(&mut self, split: impl Fn(I::Item) -> (&'k Q, E))
    where
        K: Borrow<Q>,
        Q: Hash + ?Sized + 'k,
    {
        let limiter = self.limiter;
        let probes = &mut self.probes[self.current ^ 1];
        let mut len = 0;
        if !self.exhausted {
            for request in self.requests.by_ref().take(CHUNK) {
                let (key, extra) = split(request);
                probes[len] = (limiter.probe(key), extra);
                len += 1;
            }
            self.exhausted = len < CHUNK;
        }
        self.ahead_len = len;
    }

    /// The next decision; `decide` makes it, at the chunk's clock reading.
    #[inline(always)]
    fn next<'k, Q, T>(
        &mut self,
        split: impl Fn(I::Item) -> (&'k Q, E) + Copy,
        decide: impl FnOnce(&KeyedRateLimiter<K, A, C, S>, &Probe, E, Nanos, &Current<A>) -> T,
    ) -> Option<T>
    where
        K: Borrow<Q>,
        C: Clock,
        Q: Hash + ?Sized + 'k,
    {
        if self.next == self.len {
            // Move on to the chunk read ahead, reading the one after it first: its prefetches
            // then have a whole chunk's decisions to arrive in, where the first keys of a chunk
            // would otherwise wait out a full memory latency.
            if self.ahead_len == 0 && !self.exhausted {
                // The first call: nothing read ahead yet. (Later, an empty read-ahead means the
                // requests have ended.)
                self.read_ahead(split);
            }
            if self.ahead_len == 0 {
                return None;
            }
            (self.current, self.next, self.len) = (self.current ^ 1, 0, self.ahead_len);
            self.read_ahead(split);
            // One clock reading for a pair of chunks, taken after the first one's lines, and the
            // second one's, were requested.
            if self.chunks % CHUNKS_PER_READING == 0 {
                self.now = self.limiter.clock.now();
                self.quota = self.limiter.quotas.load();
            }
            self.chunks = self.chunks.wrapping_add(1);
        }
        let (probe, extra) = &self.probes[self.current][self.next];
        self.next += 1;
        Some(decide(self.limiter, probe, *extra, self.now, &self.quota))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let buffered = self.pending();
        let (low, high) = if self.exhausted {
            (0, Some(0))
        } else {
            self.requests.size_hint()
        };
        (
            low.saturating_add(buffered),
            high.and_then(|h| h.checked_add(buffered)),
        )
    }
}

impl<K: ?Sized, A, C, S, I, E> Pipeline<'_, K, A, C, S, I, E> {
    /// Requests read (and hashed) but not yet decided.
    fn pending(&self) -> usize {
        self.len - self.next + self.ahead_len
    }
}

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
    pipeline: Pipeline<'a, K, A, C, S, I, ()>,
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

    #[inline(always)]
    fn next(&mut self) -> Option<Result<(), Denied>> {
        self.pipeline.next(
            |key| (key, ()),
            |limiter, probe, (), now, quota| limiter.apply_at(quota, own, probe, 1, now),
        )
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.pipeline.size_hint()
    }
}

/// Fused whatever `keys` is: once it has returned `None`, it is not asked again.
impl<'k, K, A, C, S, I, Q> FusedIterator for CheckKeys<'_, K, A, C, S, I>
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
            .field("pending", &self.pipeline.pending())
            .finish_non_exhaustive()
    }
}

/// The decisions of [`KeyedRateLimiter::decide_keys`], one per request, in order.
///
/// ```
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// let limiter = KeyedRateLimiter::<u64>::gcra(Quota::per_second(10).unwrap(), 100).unwrap();
/// let mut decisions = limiter.decide_keys([(&1, 4), (&1, 0), (&2, 11)]);
/// assert_eq!(decisions.size_hint(), (3, Some(3)));
/// assert_eq!(decisions.next().unwrap().unwrap().remaining(), 6);
/// assert_eq!(decisions.next().unwrap().unwrap().remaining(), 6); // a cost of 0
/// assert!(decisions.next().unwrap().is_err()); // 11 never fits a burst of 10
/// assert!(decisions.next().is_none());
/// ```
#[must_use = "iterators are lazy: no request is decided until the iterator is advanced"]
pub struct DecideKeys<'a, K: ?Sized, A, C, S, I> {
    pipeline: Pipeline<'a, K, A, C, S, I, u64>,
}

impl<'k, K, A, C, S, I, Q> Iterator for DecideKeys<'_, K, A, C, S, I>
where
    K: ?Sized + Borrow<Q>,
    A: Algorithm,
    C: Clock,
    S: BuildHasher,
    I: Iterator<Item = (&'k Q, u64)>,
    Q: Hash + ?Sized + 'k,
{
    type Item = Result<Decision, InsufficientCapacity>;

    #[inline(always)]
    fn next(&mut self) -> Option<Result<Decision, InsufficientCapacity>> {
        self.pipeline.next(
            |request| request,
            |limiter, probe, cost, now, quota| limiter.decide_at(quota, own, probe, cost, now),
        )
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.pipeline.size_hint()
    }
}

/// Fused whatever `requests` is: once it has returned `None`, it is not asked again.
impl<'k, K, A, C, S, I, Q> FusedIterator for DecideKeys<'_, K, A, C, S, I>
where
    K: ?Sized + Borrow<Q>,
    A: Algorithm,
    C: Clock,
    S: BuildHasher,
    I: Iterator<Item = (&'k Q, u64)>,
    Q: Hash + ?Sized + 'k,
{
}

impl<K: ?Sized, A, C, S, I> fmt::Debug for DecideKeys<'_, K, A, C, S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecideKeys")
            .field("pending", &self.pipeline.pending())
            .finish_non_exhaustive()
    }
}

/// The decisions of [`KeyedRateLimiter::decide_keys_with`], one per request, in order.
///
/// ```
/// use tollgate::{Gcra, KeyedRateLimiter, Quota};
///
/// let gold = Quota::per_second(100).unwrap();
/// let limiter = KeyedRateLimiter::<u64>::builder(Gcra::from(Quota::per_second(1).unwrap()))
///     .tier(gold)
///     .build()
///     .unwrap();
/// let mut decisions = limiter.decide_keys_with([(&7, &gold, 10), (&7, &gold, 0)]);
/// assert_eq!(decisions.size_hint(), (2, Some(2)));
/// assert_eq!(decisions.next().unwrap().unwrap().remaining(), 90);
/// assert_eq!(decisions.next().unwrap().unwrap().remaining(), 90); // a cost of 0
/// assert!(decisions.next().is_none());
/// ```
#[must_use = "iterators are lazy: no request is decided until the iterator is advanced"]
pub struct DecideKeysWith<'a, K: ?Sized, C, S, I> {
    /// Each request's quota is kept as its algorithm beside its probe (24 bytes): a reference
    /// would make the quotas' lifetime a parameter of this type.
    pipeline: Pipeline<'a, K, Gcra, C, S, I, (Gcra, u64)>,
}

impl<'k, 'q, K, C, S, I, Q> Iterator for DecideKeysWith<'_, K, C, S, I>
where
    K: ?Sized + Borrow<Q>,
    C: Clock,
    S: BuildHasher,
    I: Iterator<Item = (&'k Q, &'q Quota, u64)>,
    Q: Hash + ?Sized + 'k,
{
    type Item = Result<Decision, InsufficientCapacity>;

    #[inline]
    fn next(&mut self) -> Option<Result<Decision, InsufficientCapacity>> {
        self.pipeline.next(
            |(key, quota, cost)| (key, (Gcra::new(quota), cost)),
            |limiter, probe, (tier, cost), now, quota| {
                limiter.decide_as_tier_at(*quota, tier, probe, cost, now)
            },
        )
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.pipeline.size_hint()
    }
}

/// Fused whatever `requests` is: once it has returned `None`, it is not asked again.
impl<'k, 'q, K, C, S, I, Q> FusedIterator for DecideKeysWith<'_, K, C, S, I>
where
    K: ?Sized + Borrow<Q>,
    C: Clock,
    S: BuildHasher,
    I: Iterator<Item = (&'k Q, &'q Quota, u64)>,
    Q: Hash + ?Sized + 'k,
{
}

impl<K: ?Sized, C, S, I> fmt::Debug for DecideKeysWith<'_, K, C, S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecideKeysWith")
            .field("pending", &self.pipeline.pending())
            .finish_non_exhaustive()
    }
}
