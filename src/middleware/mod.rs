//! HTTP middleware: a tower layer that checks each request against limits, all or nothing, and
//! speaks the IETF `RateLimit` fields. Behind the `tower` feature (and `axum`, for the peer
//! address axum records).
//!
//! It works with anything built on tower: axum, hyper (through `hyper-util`'s tower adapter),
//! tonic. A [`RateLimitLayer`] holds a tuple of one to eight limits, each a named limiter:
//!
//! - [`Keyed`]: a [`KeyedRateLimiter`](crate::KeyedRateLimiter), with a [`KeyExtractor`] that
//!   finds each request's key: the peer's address ([`PeerIp`]), the client's behind trusted
//!   proxies ([`ClientIp`]), a header such as an API key ([`Header`]), or a closure
//!   ([`from_fn`]). A request whose key cannot be found is answered as the limit's
//!   [`MissingKey`] says (by default `500`: the server does not record peers).
//! - [`Direct`]: a [`RateLimiter`](crate::RateLimiter), one state for every request.
//!
//! A request is admitted only if every limit admits it, and a refused request takes nothing from
//! any limit ([`Layers::decide_all`](crate::layers::Layers::decide_all)). Its cost is 1, or what
//! [`RateLimitLayer::cost`] computes from its head.
//!
//! With the `redis` feature, the limits can be kept in Redis instead, shared by every server:
//! [`RedisLimits`] of [`RedisKeyed`] and [`RedisDirect`] limits, decided all or nothing in one
//! round trip before the inner service is called.
//!
//! With the `tokio` feature, a layer can shape instead of refusing
//! ([`RateLimitLayer::max_wait`]): a request whose turn comes soon enough waits for it, holding
//! its place in every limit's schedule, and goes on then.
//!
//! # The response
//!
//! A refused request is answered `429 Too Many Requests` (or what
//! [`on_denied`](RateLimitLayer::on_denied) makes) without reaching the inner service, with
//! `Retry-After` in whole seconds (rounded up: a client that waits that long is admitted, if
//! nothing else took the room). Every response to a checked request, refused or admitted,
//! carries the fields of draft-ietf-httpapi-ratelimit-headers, as Structured Field lists:
//!
//! ```text
//! RateLimit-Policy: "per-ip";q=10;w=1, "global";q=5000;w=1
//! RateLimit: "per-ip";r=7;t=1
//! ```
//!
//! `RateLimit-Policy` names each limit with its capacity `q` and the seconds `w` over which it
//! refills in full; `RateLimit` gives the binding limit (the one with the least remaining, or the
//! refusing one with the longest wait) with what remains, `r`, and the seconds until it is full
//! again, `t`. A response that already has one of these fields keeps its own.
//!
//! # Example
//!
//! ```no_run
//! # #[cfg(feature = "axum")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::net::{IpAddr, SocketAddr};
//! use std::sync::Arc;
//! use axum::{routing::get, Router};
//! use tollgate::middleware::{Direct, Keyed, PeerIp, RateLimitLayer};
//! use tollgate::{KeyedRateLimiter, Quota, RateLimiter};
//!
//! let per_ip = Arc::new(KeyedRateLimiter::<IpAddr>::gcra(Quota::per_second(10)?, 100_000)?);
//! let global = Arc::new(RateLimiter::gcra(Quota::per_second(5_000)?));
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new((
//!         Keyed::new("per-ip", per_ip, PeerIp)?,
//!         Direct::new("global", global)?,
//!     )));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // The peer's address is recorded for `PeerIp` with `into_make_service_with_connect_info`.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(())
//! # }
//! ```

mod key;
mod limit;
mod policy;
#[cfg(feature = "redis")]
mod redis;
mod service;
#[cfg(feature = "tokio")]
mod shape;

pub use key::{from_fn, peer_ip, Cidr, CidrError, ClientIp, FromFn, Header, KeyExtractor, PeerIp};
pub use limit::{Direct, Keyed, Limit, Limits, MissingKey};
pub use policy::PolicyNameError;
#[cfg(feature = "redis")]
pub use redis::{RedisDirect, RedisKey, RedisKeyed, RedisLimit, RedisLimits};
pub use service::{RateLimit, RateLimitLayer, Refusal, ResponseFuture};
#[cfg(feature = "tokio")]
pub use shape::ShapeLimits;
