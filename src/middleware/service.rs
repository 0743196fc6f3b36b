//! The tower `Layer` and `Service`: decide, then answer `429` or call the inner service, and add
//! the fields to the response.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::net::IpAddr;
use std::sync::Arc;

use http::header::{HeaderName, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::key::peer_ip;
use super::limit::sealed::Outcome;
use super::limit::{Limits, Verdict};
use super::policy;
use crate::decision::Decision;

/// `RateLimit-Policy`.
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;
type DeniedFn = dyn Fn(&Refusal) -> Response<()> + Send + Sync;

/// How a request was refused: what a custom denial response ([`RateLimitLayer::on_denied`]) is
/// built from.
#[derive(Clone, Copy, Debug)]
pub struct Refusal {
    limit: usize,
    decision: Decision,
}

impl Refusal {
    /// The index of the refusing limit in the layer's tuple.
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The refusing limit's decision: its [`retry_after`](Decision::retry_after) is the
    /// longest wait of the limits that refused.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}

/// The limits and the closures, shared by a layer and the services it makes.
struct Config<L> {
    limits: Arc<L>,
    cost: Option<Arc<CostFn>>,
    denied: Option<Arc<DeniedFn>>,
    shaping: Option<Shaping<L>>,
}

/// How long a request may wait for its turn, and the limits' decision that shapes.
struct Shaping<L> {
    max_wait: Duration,
    shape: fn(&Arc<L>, &Parts, Option<IpAddr>, u64, Duration) -> Outcome,
}

impl<L> Clone for Config<L> {
    fn clone(&self) -> Self {
        Config {
            limits: Arc::clone(&self.limits),
            cost: self.cost.clone(),
            denied: self.denied.clone(),
            shaping: self.shaping.as_ref().map(|shaping| Shaping { ..*shaping }),
        }
    }
}

/// A tower [`Layer`] that checks each request against a tuple of limits, all or nothing, before
/// the inner service sees it.
///
/// A refused request gets `429 Too Many Requests` (or [`on_denied`](Self::on_denied)'s
/// response) with `Retry-After` and the `RateLimit-Policy` and `RateLimit` fields, and the inner
/// service never sees it; an admitted one goes on, and its response gets the two fields. A
/// request whose cost exceeds a limit's capacity gets `413 Content Too Large`: it could never
/// be admitted. See [the module docs](super) for keys, costs and the fields.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::middleware::{Direct, RateLimitLayer};
/// use tollgate::{Quota, RateLimiter};
///
/// let global = Arc::new(RateLimiter::gcra(Quota::per_second(1_000).unwrap()));
/// let layer = RateLimitLayer::new((Direct::new("global", global).unwrap(),));
/// # let _ = layer;
/// ```
pub struct RateLimitLayer<L> {
    config: Config<L>,
}

impl<L: Limits> RateLimitLayer<L> {
    /// A layer over `limits`: a tuple of one to eight [`Keyed`](super::Keyed) and
    /// [`Direct`](super::Direct) limits, or a `RedisLimits` (with the `redis` feature), checked
    /// all or nothing, each request at a cost of 1.
    pub fn new(limits: L) -> RateLimitLayer<L> {
        RateLimitLayer {
            config: Config {
                limits: Arc::new(limits),
                cost: None,
                denied: None,
                shaping: None,
            },
        }
    }

    /// Each request's cost, from its head: bytes, tokens, rows. A cost of 0 is always admitted
    /// and takes nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::middleware::{Direct, RateLimitLayer};
    /// use tollgate::{Quota, RateLimiter};
    /// let bytes = Arc::new(RateLimiter::gcra(Quota::per_second(1 << 20).unwrap()));
    /// let layer = RateLimitLayer::new((Direct::new("upload-bytes", bytes).unwrap(),)).cost(|parts| {
    ///     let length = parts.headers.get(http::header::CONTENT_LENGTH);
    ///     length.and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(0)
    /// });
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.config.cost = Some(Arc::new(cost));
        self
    }

    /// The response for a refused request, in place of `429`: its status and headers (its body
    /// is the body type's default). `Retry-After` and the `RateLimit` fields are added to it
    /// unless it has its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use http::{Response, StatusCode};
    /// use tollgate::middleware::{Direct, RateLimitLayer};
    /// use tollgate::{Quota, RateLimiter};
    /// let global = Arc::new(RateLimiter::gcra(Quota::per_second(1_000).unwrap()));
    /// let layer = RateLimitLayer::new((Direct::new("global", global).unwrap(),)).on_denied(|_refusal| {
    ///     let mut response = Response::new(());
    ///     *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    ///     response
    /// });
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn on_denied(
        mut self,
        denied: impl Fn(&Refusal) -> Response<()> + Send + Sync + 'static,
    ) -> Self {
        self.config.denied = Some(Arc::new(denied));
        self
    }
}

#[cfg(feature = "tokio")]
impl<L: super::ShapeLimits> RateLimitLayer<L> {
    /// Shaping: a request that the limits would refuse waits for its turn instead, if that
    /// comes within `max_wait`, and then goes on to the inner service (on tokio's timer, with
    /// the `tokio` feature). Waiting requests hold places in the limits' schedules (GCRA
    /// reservations, all or nothing), so they go on in the order they came, each at its own
    /// turn; a request whose client goes away before its turn gives its place back. A request
    /// whose turn is further away is refused as without shaping. Its response's `RateLimit`
    /// field is the state as it goes on.
    ///
    /// Tuples of GCRA limits shape; so do `RedisLimits` (a refusal there takes a second round
    /// trip to reserve, and a third for the fields; a window counter takes no reservation, so
    /// where one of them refuses, the refusal stands).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::middleware::{Direct, RateLimitLayer};
    /// use tollgate::{Quota, RateLimiter};
    ///
    /// // An upstream that takes 100 requests a second: bursts are smoothed, not refused,
    /// // unless a request would wait more than half a second.
    /// let upstream = Arc::new(RateLimiter::gcra(Quota::per_second(100).unwrap()));
    /// let layer = RateLimitLayer::new((Direct::new("upstream", upstream).unwrap(),))
    ///     .max_wait(Duration::from_millis(500));
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.config.shaping = Some(Shaping {
            max_wait,
            shape: <L as super::shape::sealed::Shape>::shape,
        });
        self
    }
}

impl<L> Clone for RateLimitLayer<L> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            config: self.config.clone(),
        }
    }
}

impl<L> fmt::Debug for RateLimitLayer<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer").finish_non_exhaustive()
    }
}

impl<S, L> Layer<S> for RateLimitLayer<L> {
    type Service = RateLimit<S, L>;

    fn layer(&self, inner: S) -> RateLimit<S, L> {
        RateLimit {
            inner,
            config: self.config.clone(),
            policy: PolicyCache::default(),
        }
    }
}

/// The [`Service`] that [`RateLimitLayer`] wraps around an inner service.
pub struct RateLimit<S, L> {
    inner: S,
    config: Config<L>,
    policy: PolicyCache,
}

impl<S: Clone, L> Clone for RateLimit<S, L> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            config: self.config.clone(),
            policy: PolicyCache::default(),
        }
    }
}

impl<S: fmt::Debug, L> fmt::Debug for RateLimit<S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// The `RateLimit-Policy` field as a service last wrote it, with the limits it stated: written
/// again only when a limit's quota has changed ([`set_quota`](crate::RateLimiter::set_quota),
/// [`KeyedRateLimiter::set_quota`](crate::KeyedRateLimiter::set_quota)).
#[derive(Default)]
struct PolicyCache {
    limits: Vec<(u64, core::time::Duration)>,
    value: Option<HeaderValue>,
}

impl PolicyCache {
    fn get<L: Limits>(&mut self, limits: &L) -> HeaderValue {
        let mut index = 0;
        let mut same = self.value.is_some();
        limits.policies(&mut |_, capacity, window| {
            same &= self.limits.get(index) == Some(&(capacity, window));
            index += 1;
        });
        if let (true, Some(value)) = (same, &self.value) {
            return value.clone();
        }
        let mut out = String::new();
        self.limits.clear();
        limits.policies(&mut |name, capacity, window| {
            policy::write_policy(&mut out, name, capacity, window);
            self.limits.push((capacity, window));
        });
        let value = HeaderValue::try_from(out).expect("a RateLimit-Policy field of visible ASCII");
        self.value = Some(value.clone());
        value
    }
}

/// The fields a response gets.
struct Fields {
    policy: HeaderValue,
    rate_limit: Option<HeaderValue>,
    retry_after: Option<HeaderValue>,
}

impl Fields {
    /// Adds the fields the headers do not have already.
    fn add_to(self, headers: &mut http::HeaderMap) {
        let fields = [
            (RATELIMIT_POLICY, Some(self.policy)),
            (RATELIMIT, self.rate_limit),
            (RETRY_AFTER, self.retry_after),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                if let http::header::Entry::Vacant(entry) = headers.entry(name) {
                    entry.insert(value);
                }
            }
        }
    }
}

impl<S, L, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, L>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    L: Limits,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S, L, Request<ReqBody>, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        let peer = if self.config.limits.needs_peer() {
            peer_ip(&parts)
        } else {
            None
        };
        let cost = self.config.cost.as_ref().map_or(1, |cost| cost(&parts));
        let limits = &self.config.limits;
        let outcome = match &self.config.shaping {
            Some(shaping) => (shaping.shape)(limits, &parts, peer, cost, shaping.max_wait),
            None => L::decide(limits, &parts, peer, cost),
        };
        match outcome {
            Outcome::Now(verdict) => {
                let policy = &mut self.policy;
                let limits = &self.config.limits;
                let kind = answer(
                    verdict,
                    &self.config,
                    || policy.get(&**limits),
                    || self.inner.call(Request::from_parts(parts, body)),
                );
                ResponseFuture { kind }
            }
            Outcome::Later(deciding) => {
                // The inner service that `poll_ready` made ready goes with the request; this one
                // keeps a clone for the next.
                let clone = self.inner.clone();
                let inner = core::mem::replace(&mut self.inner, clone);
                ResponseFuture {
                    kind: Kind::Deciding {
                        deciding,
                        // Boxed: the future of a decision made at once stays small.
                        rest: Some(Box::new(Rest {
                            inner,
                            request: Request::from_parts(parts, body),
                            config: self.config.clone(),
                            policy: self.policy.get(&*self.config.limits),
                        })),
                    },
                }
            }
        }
    }
}

/// What an admitted request needs once its verdict is back.
struct Rest<S, L, Req> {
    inner: S,
    request: Req,
    config: Config<L>,
    policy: HeaderValue,
}

/// The response to a verdict: the refusal, ready, or the inner service's future (made by `call`)
/// and the fields to add to its response.
fn answer<L: Limits, R, F, B: Default>(
    verdict: Verdict,
    config: &Config<L>,
    policy: impl FnOnce() -> HeaderValue,
    call: impl FnOnce() -> F,
) -> Kind<R, F, B> {
    let respond = |status: StatusCode| {
        let mut response = Response::new(B::default());
        *response.status_mut() = status;
        Kind::Ready {
            response: Some(response),
        }
    };
    let (limit, decision) = match verdict {
        Verdict::Unchecked => {
            return Kind::Inner {
                future: call(),
                fields: None,
            }
        }
        Verdict::Rejected(status) => return respond(status),
        Verdict::TooLarge => return respond(StatusCode::PAYLOAD_TOO_LARGE),
        Verdict::Failed => return respond(StatusCode::INTERNAL_SERVER_ERROR),
        Verdict::Decided(limit, decision) => (limit, decision),
    };
    let mut fields = Fields {
        policy: policy(),
        // A limit that binds with nothing to count (every limit skipped) states no
        // `RateLimit`.
        rate_limit: (decision.limit() != u64::MAX)
            .then(|| policy::rate_limit(config.limits.name(limit), &decision)),
        retry_after: None,
    };
    if decision.is_allowed() {
        return Kind::Inner {
            future: call(),
            fields: Some(fields),
        };
    }
    fields.retry_after = Some(policy::retry_after(&decision));
    let mut response = match &config.denied {
        Some(denied) => {
            let (head, ()) = denied(&Refusal { limit, decision }).into_parts();
            Response::from_parts(head, B::default())
        }
        None => {
            let mut response = Response::new(B::default());
            *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            response
        }
    };
    fields.add_to(response.headers_mut());
    Kind::Ready {
        response: Some(response),
    }
}

pin_project_lite::pin_project! {
    /// The response of a [`RateLimit`] service: the inner service's, with the `RateLimit`
    /// fields added, or the refusal; for Redis limits, once the decision is back.
    pub struct ResponseFuture<S, L, Req, B>
    where
        S: Service<Req>,
    {
        #[pin]
        kind: Kind<Rest<S, L, Req>, S::Future, B>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProjection]
    enum Kind<R, F, B> {
        Deciding {
            deciding: Pin<Box<dyn Future<Output = Verdict> + Send>>,
            rest: Option<Box<R>>,
        },
        Inner {
            #[pin]
            future: F,
            fields: Option<Fields>,
        },
        Ready {
            response: Option<Response<B>>,
        },
    }
}

impl<S, L, Req, B> fmt::Debug for ResponseFuture<S, L, Req, B>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, L, Req, B> Future for ResponseFuture<S, L, Req, B>
where
    S: Service<Req, Response = Response<B>>,
    L: Limits,
    B: Default,
{
    type Output = Result<Response<B>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut kind = self.as_mut().project().kind;
            match kind.as_mut().project() {
                KindProjection::Deciding { deciding, rest } => {
                    let verdict = match deciding.as_mut().poll(cx) {
                        Poll::Ready(verdict) => verdict,
                        Poll::Pending => return Poll::Pending,
                    };
                    let Some(rest) = rest.take() else {
                        return Poll::Pending;
                    };
                    let Rest {
                        mut inner,
                        request,
                        config,
                        policy,
                    } = *rest;
                    kind.set(answer(verdict, &config, || policy, || inner.call(request)));
                }
                KindProjection::Inner { future, fields } => {
                    let mut response = match future.poll(cx) {
                        Poll::Ready(Ok(response)) => response,
                        other => return other,
                    };
                    // The inner service's own fields, if it set them, are kept.
                    if let Some(fields) = fields.take() {
                        fields.add_to(response.headers_mut());
                    }
                    return Poll::Ready(Ok(response));
                }
                KindProjection::Ready { response } => {
                    return match response.take() {
                        Some(response) => Poll::Ready(Ok(response)),
                        None => Poll::Pending,
                    }
                }
            }
        }
    }
}
