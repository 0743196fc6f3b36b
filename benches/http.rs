//! The middleware's cost over real HTTP: the same axum app with no limiter, behind tollgate's
//! `RateLimitLayer`, and behind tower_governor's `GovernorLayer`, each keyed by the peer's IP
//! address with a quota that never refuses (the admitting path, which every request takes), and
//! each stating the limit's state in its response headers (tower_governor's `x-ratelimit-*` with
//! `use_headers`).
//!
//!     cargo bench --features axum --bench http
//!
//! An in-process load generator keeps `TOLLGATE_HTTP_CONNECTIONS` (default 64) HTTP/1.1
//! connections busy over loopback, each sending its next request as soon as the last response
//! arrives, for `TOLLGATE_HTTP_SECS` seconds (default 1) per app, in `TOLLGATE_HTTP_ROUNDS`
//! rounds (default 7) that alternate the apps' order. Each round gives every app's requests per
//! second and the mean latency (connections / throughput); the figures printed are the medians
//! over the rounds of:
//!
//! - the latency each layer adds to the bare app's, and tollgate's added latency over
//!   tower_governor's (target: 0.5 or less);
//! - tollgate's requests per second over tower_governor's (target: 1.0 or more).
//!
//! The server and the load generator share the machine's cores, as they would not in
//! production: the ratios, taken from one round at a time, are what to compare.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tollgate::middleware::{Keyed, PeerIp, RateLimitLayer};
use tollgate::{KeyedRateLimiter, Quota};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;

#[path = "../tests/http_server/mod.rs"]
mod http_server;
use http_server::serve_app;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

/// `connections` clients of `addr`, each with one connection of its own, opened.
async fn clients(
    addr: SocketAddr,
    connections: u64,
) -> Vec<(Client<HttpConnector, Empty<Bytes>>, hyper::Uri)> {
    let uri: hyper::Uri = format!("http://{addr}/").parse().unwrap();
    let mut clients = Vec::new();
    for _ in 0..connections {
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1)
            .build_http::<Empty<Bytes>>();
        client.get(uri.clone()).await.unwrap();
        clients.push((client, uri.clone()));
    }
    clients
}

/// Requests per second over the clients' connections, each kept busy for `secs`.
async fn load(clients: &[(Client<HttpConnector, Empty<Bytes>>, hyper::Uri)], secs: u64) -> f64 {
    let done = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (client, uri) in clients {
        let (client, uri) = (client.clone(), uri.clone());
        let (done, count) = (Arc::clone(&done), Arc::clone(&count));
        tasks.push(tokio::spawn(async move {
            while !done.load(Relaxed) {
                let response = client.get(uri.clone()).await.unwrap();
                assert!(response.status().is_success(), "{}", response.status());
                count.fetch_add(1, Relaxed);
            }
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    done.store(true, Relaxed);
    let served = count.load(Relaxed);
    let elapsed = start.elapsed();
    for task in tasks {
        task.await.unwrap();
    }
    served as f64 / elapsed.as_secs_f64()
}

/// The inner service of the direct calls: a response at once.
#[derive(Clone)]
struct Ready;

impl tower_service::Service<http::Request<axum::body::Body>> for Ready {
    type Response = http::Response<axum::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<axum::body::Body>) -> Self::Future {
        std::future::ready(Ok(http::Response::new(axum::body::Body::empty())))
    }
}

/// Nanoseconds per call of `service` on a request from a loopback peer, over `calls` calls.
async fn per_call<S>(mut service: S, calls: u64) -> f64
where
    S: tower_service::Service<
        http::Request<axum::body::Body>,
        Response = http::Response<axum::body::Body>,
    >,
    S::Error: std::fmt::Debug,
{
    let peer = axum::extract::ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000)));
    let start = Instant::now();
    for _ in 0..calls {
        let mut request = http::Request::new(axum::body::Body::empty());
        request.extensions_mut().insert(peer);
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .unwrap();
        let response = service.call(request).await.unwrap();
        std::hint::black_box(response);
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let connections = env("TOLLGATE_HTTP_CONNECTIONS", 64);
    let secs = env("TOLLGATE_HTTP_SECS", 1);
    let rounds = env("TOLLGATE_HTTP_ROUNDS", 7);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let bare = serve_app(app()).await;
        let per_ip = KeyedRateLimiter::<IpAddr>::gcra(Quota::per_second(1_000_000_000).unwrap(), 1_000)
            .unwrap();
        let ours_layer = RateLimitLayer::new((Keyed::new("per-ip", Arc::new(per_ip), PeerIp).unwrap(),));
        let tollgate = serve_app(app().layer(ours_layer.clone())).await;
        let config = GovernorConfigBuilder::default()
            .per_nanosecond(1)
            .burst_size(NonZeroU32::MAX.get())
            .use_headers()
            .finish()
            .unwrap();
        let theirs_layer = GovernorLayer::new(Arc::new(config));
        let governor = serve_app(app().layer(theirs_layer.clone())).await;
        // Each app's connections, opened once and warmed up.
        let mut apps = Vec::new();
        for addr in [bare, tollgate, governor] {
            let clients = clients(addr, connections).await;
            load(&clients, 1).await;
            apps.push(clients);
        }
        println!("{connections} connections, {secs} s per app, {rounds} rounds");
        let (mut added_ratio, mut rps_ratio) = (Vec::new(), Vec::new());
        let (mut added_ours, mut added_theirs) = (Vec::new(), Vec::new());
        let mut throughput = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..rounds {
            let mut order = [0, 1, 2];
            if round % 2 == 1 {
                order.reverse();
            }
            let mut rps = [0.0; 3];
            for i in order {
                rps[i] = load(&apps[i], secs).await;
                throughput[i].push(rps[i]);
            }
            // Mean latency: every connection always has one request in flight.
            let latency = rps.map(|r| connections as f64 / r);
            let (ours, theirs) = (latency[1] - latency[0], latency[2] - latency[0]);
            added_ours.push(ours * 1e6);
            added_theirs.push(theirs * 1e6);
            added_ratio.push(ours / theirs);
            rps_ratio.push(rps[1] / rps[2]);
        }
        let [bare_rps, ours_rps, theirs_rps] = throughput.map(median);
        println!("requests per second: bare {bare_rps:.0}, tollgate {ours_rps:.0}, tower_governor {theirs_rps:.0}");
        println!(
            "latency added to the bare app's: tollgate {:.1} us, tower_governor {:.1} us",
            median(added_ours),
            median(added_theirs)
        );
        println!(
            "tollgate / tower_governor: added latency {:.2} (target <= 0.5), requests per second {:.2} (target >= 1.0)",
            median(added_ratio),
            median(rps_ratio)
        );

        // The layers called directly, without the network: what each adds to a call.
        use tower_layer::Layer;
        let (mut ours, mut theirs, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let bare = per_call(Ready, 200_000).await;
            let with_ours = per_call(ours_layer.layer(Ready), 200_000).await - bare;
            let with_theirs = per_call(theirs_layer.layer(Ready), 200_000).await - bare;
            ours.push(with_ours);
            theirs.push(with_theirs);
            ratio.push(with_ours / with_theirs);
        }
        println!(
            "a call, without the network: tollgate adds {:.0} ns, tower_governor {:.0} ns; ratio {:.2} (target <= 0.5)",
            median(ours),
            median(theirs),
            median(ratio)
        );
    });
}
