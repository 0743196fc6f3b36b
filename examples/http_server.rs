//! An axum app behind tollgate's middleware: per client IP, per API key and global limits,
//! checked all or nothing, with the IETF `RateLimit` fields on every response.
//!
//!     cargo run --release --features axum --example http_server             # a demo: requests, then exit
//!     cargo run --release --features axum --example http_server -- --serve  # serve on 127.0.0.1:3000
//!
//! then, while it serves:
//!
//!     curl -i -H 'x-api-key: k-1' http://127.0.0.1:3000/
//!
//! The demo sends its own requests over loopback and prints each status with its fields.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use http::{HeaderName, StatusCode};
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tollgate::middleware::{Direct, Header, Keyed, MissingKey, PeerIp, RateLimitLayer};
use tollgate::{KeyedRateLimiter, Quota, RateLimiter};

fn app() -> Result<Router, Box<dyn std::error::Error>> {
    // 5 requests per second per client IP, bursts of 3; 10 per minute per API key; 1000 per
    // second in all.
    let per_ip = KeyedRateLimiter::<IpAddr>::gcra(Quota::per_second(5)?.with_burst(3)?, 100_000)?;
    let per_key = KeyedRateLimiter::<[u8]>::gcra(Quota::per_minute(10)?, 10_000)?;
    let global = RateLimiter::gcra(Quota::per_second(1_000)?);
    let layer = RateLimitLayer::new((
        Keyed::new("per-ip", Arc::new(per_ip), PeerIp)?,
        Keyed::new(
            "per-key",
            Arc::new(per_key),
            Header::new(HeaderName::from_static("x-api-key")),
        )?
        .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)),
        Direct::new("global", Arc::new(global))?,
    ));
    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve = std::env::args().any(|arg| arg == "--serve");
    let address = if serve {
        "127.0.0.1:3000"
    } else {
        "127.0.0.1:0"
    };
    let listener = tokio::net::TcpListener::bind(address).await?;
    let local = listener.local_addr()?;
    let service = app()?.into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });
    if serve {
        println!("serving on http://{local}/ (x-api-key required)");
        server.await??;
        return Ok(());
    }
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    for (i, key) in [None, Some("k-1"), Some("k-1"), Some("k-1"), Some("k-1")]
        .into_iter()
        .enumerate()
    {
        let mut request = http::Request::get(format!("http://{local}/"));
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        let response = client.request(request.body(Empty::new())?).await?;
        println!(
            "request {i} (x-api-key: {}): {}",
            key.unwrap_or("none"),
            response.status()
        );
        for name in ["ratelimit-policy", "ratelimit", "retry-after"] {
            if let Some(value) = response.headers().get(name) {
                println!("  {name}: {}", value.to_str()?);
            }
        }
    }
    Ok(())
}
