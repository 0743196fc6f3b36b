//! The middleware over real HTTP: an axum server on a loopback port the system picks, with the
//! peer's address recorded, and a hyper client. Exact counts of admitted and refused requests;
//! the `RateLimit` fields parsed with a Structured Field Values parser (`sfv`) and checked
//! against the draft's grammar and the limiters' own state; forwarded addresses believed only
//! from trusted proxies; missing, oversized and non-UTF-8 keys answered as configured; bursts
//! shaped into turns.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, Response, StatusCode};
use tollgate::middleware::{
    from_fn, Cidr, ClientIp, Direct, Header, Keyed, MissingKey, PeerIp, RateLimitLayer,
};
use tollgate::{Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

mod http_server;
use http_server::{get, list, param, request, serve};

fn per_ip(quota: Quota) -> Arc<KeyedRateLimiter<IpAddr>> {
    Arc::new(KeyedRateLimiter::gcra(quota, 1_000).unwrap())
}

#[tokio::test]
async fn a_burst_gets_exactly_the_quota_then_429s_with_the_fields() {
    // 5 per minute: a token every 12 s.
    let limiter = per_ip(Quota::per_minute(5).unwrap());
    let layer = RateLimitLayer::new((Keyed::new("per-ip", Arc::clone(&limiter), PeerIp).unwrap(),));
    let addr = serve(layer).await;
    let mut statuses = Vec::new();
    for i in 0..8u64 {
        let (status, headers) = request(addr, &[]).await;
        statuses.push(status);
        assert_eq!(
            list(&headers, "ratelimit-policy"),
            vec![(
                "per-ip".to_owned(),
                vec![("q".to_owned(), 5), ("w".to_owned(), 60)]
            )]
        );
        let rate_limit = list(&headers, "ratelimit");
        assert_eq!(rate_limit.len(), 1);
        assert_eq!(rate_limit[0].0, "per-ip");
        let admitted = i.min(4) + 1;
        // What remains after the request, and the seconds until all 5 are back: 12 s for each
        // admitted, less the milliseconds the test has run, rounded up.
        assert_eq!(param(&rate_limit[0], "r"), 5 - admitted as i64);
        assert_eq!(param(&rate_limit[0], "t"), 12 * admitted as i64);
        if i < 5 {
            assert!(!headers.contains_key("retry-after"));
        } else {
            // The next token in under 12 s: 12 when rounded up.
            assert_eq!(headers["retry-after"], "12");
        }
    }
    let ok = statuses.iter().filter(|&&s| s == StatusCode::OK).count();
    let refused = statuses
        .iter()
        .filter(|&&s| s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((ok, refused), (5, 3));
    assert_eq!(&statuses[..5], &[StatusCode::OK; 5]);
    // The limiter's own state: nothing left for the client.
    assert_eq!(
        limiter.peek_key(&IpAddr::from([127, 0, 0, 1])).remaining(),
        0
    );
}

#[tokio::test]
async fn a_refused_request_takes_nothing_from_the_other_limits() {
    let ip = per_ip(Quota::per_hour(3).unwrap());
    let global = Arc::new(RateLimiter::gcra(Quota::per_hour(100).unwrap()));
    let layer = RateLimitLayer::new((
        Keyed::new("per-ip", ip, PeerIp).unwrap(),
        Direct::new("global", Arc::clone(&global)).unwrap(),
    ));
    let addr = serve(layer).await;
    for _ in 0..3 {
        let (status, headers) = request(addr, &[]).await;
        assert_eq!(status, StatusCode::OK);
        // Both policies stated; the binding one (least remaining) is per-ip.
        let policies: Vec<String> = list(&headers, "ratelimit-policy")
            .into_iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(policies, ["per-ip", "global"]);
        assert_eq!(list(&headers, "ratelimit")[0].0, "per-ip");
    }
    for _ in 0..4 {
        let (status, headers) = request(addr, &[]).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(list(&headers, "ratelimit")[0].0, "per-ip");
        assert_eq!(headers["retry-after"], "1200");
    }
    // Seven requests, three admitted: the global limit counted only those.
    assert_eq!(global.peek().remaining(), 97);
}

#[tokio::test]
async fn a_forwarded_address_is_believed_only_from_a_trusted_proxy() {
    let untrusting = per_ip(Quota::per_hour(2).unwrap());
    let layer = RateLimitLayer::new((Keyed::new(
        "client",
        Arc::clone(&untrusting),
        ClientIp::trusting(["10.0.0.0/8".parse::<Cidr>().unwrap()]),
    )
    .unwrap(),));
    let addr = serve(layer).await;
    // The test's connections come from 127.0.0.1, not a trusted proxy: each spoofed header
    // is ignored, and all count against 127.0.0.1.
    let mut statuses = Vec::new();
    for spoof in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
        statuses.push(
            request(addr, &[("x-forwarded-for", spoof.as_bytes())])
                .await
                .0,
        );
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    assert_eq!(
        untrusting
            .peek_key(&IpAddr::from([127, 0, 0, 1]))
            .remaining(),
        0
    );

    // Behind a trusted proxy (here, loopback), each forwarded client has its own key: the
    // rightmost untrusted hop, whatever the client wrote to the left of it.
    let trusting = per_ip(Quota::per_hour(1).unwrap());
    let layer = RateLimitLayer::new((Keyed::new(
        "client",
        Arc::clone(&trusting),
        ClientIp::trusting([
            "127.0.0.1".parse::<Cidr>().unwrap(),
            "10.0.0.0/8".parse().unwrap(),
        ]),
    )
    .unwrap(),));
    let addr = serve(layer).await;
    let forwarded = |list: &'static str| async move {
        request(addr, &[("x-forwarded-for", list.as_bytes())]).await
    };
    assert_eq!(forwarded("198.51.100.1, 10.1.1.1").await.0, StatusCode::OK);
    assert_eq!(forwarded("198.51.100.2").await.0, StatusCode::OK);
    // A client that claims another address to the left of its own is still itself.
    let spoofed = forwarded("192.0.2.99, 198.51.100.1, 10.2.2.2").await;
    assert_eq!(spoofed.0, StatusCode::TOO_MANY_REQUESTS);
    let rfc7239 = request(
        addr,
        &[("forwarded", b"for=\"[2001:db8::7]:4711\";proto=https")],
    )
    .await;
    assert_eq!(rfc7239.0, StatusCode::OK);
    assert_eq!(
        trusting
            .peek_key(&"2001:db8::7".parse::<IpAddr>().unwrap())
            .remaining(),
        0
    );
    // Unreadable lists leave the proxy itself as the key: one key for all of them.
    assert_eq!(forwarded("not an address").await.0, StatusCode::OK);
    assert_eq!(forwarded("unknown").await.0, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn missing_oversized_and_binary_keys() {
    let per_key =
        Arc::new(KeyedRateLimiter::<[u8]>::gcra(Quota::per_hour(1).unwrap(), 100).unwrap());
    let layer = RateLimitLayer::new((Keyed::new(
        "api-key",
        Arc::clone(&per_key),
        Header::new(HeaderName::from_static("x-api-key")).max_len(16),
    )
    .unwrap()
    .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)),));
    let addr = serve(layer).await;
    // No key, or one past the longest taken: 401, no limit checked, no fields.
    let (status, headers) = request(addr, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!headers.contains_key("ratelimit") && !headers.contains_key("ratelimit-policy"));
    assert_eq!(
        request(addr, &[("x-api-key", &[b'k'; 17])]).await.0,
        StatusCode::UNAUTHORIZED
    );
    // Bytes that are not UTF-8 are a key like any other.
    let binary: &[u8] = &[0xff, 0xfe, b'k'];
    assert_eq!(
        request(addr, &[("x-api-key", binary)]).await.0,
        StatusCode::OK
    );
    assert_eq!(
        request(addr, &[("x-api-key", binary)]).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(per_key.peek_key(binary).remaining(), 0);
    assert_eq!(
        request(addr, &[("x-api-key", &[b'k'; 16])]).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_skipped_or_allowed_missing_key() {
    let per_key =
        Arc::new(KeyedRateLimiter::<[u8]>::gcra(Quota::per_hour(1).unwrap(), 100).unwrap());
    let global = Arc::new(RateLimiter::gcra(Quota::per_hour(2).unwrap()));
    let api_key = || Header::new(HeaderName::from_static("x-api-key"));
    let skip = RateLimitLayer::new((
        Keyed::new("api-key", Arc::clone(&per_key), api_key())
            .unwrap()
            .on_missing_key(MissingKey::Skip),
        Direct::new("global", Arc::clone(&global)).unwrap(),
    ));
    let addr = serve(skip).await;
    // Without a key, only the global limit: it binds and is stated.
    let (status, headers) = request(addr, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list(&headers, "ratelimit")[0].0, "global");
    assert_eq!(global.peek().remaining(), 1);

    let allow = RateLimitLayer::new((
        Keyed::new("api-key", per_key, api_key())
            .unwrap()
            .on_missing_key(MissingKey::Allow),
        Direct::new("global", Arc::clone(&global)).unwrap(),
    ));
    let addr = serve(allow).await;
    // Without a key, no limit at all: the global one is untouched, no fields.
    for _ in 0..3 {
        let (status, headers) = request(addr, &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert!(!headers.contains_key("ratelimit"));
    }
    assert_eq!(global.peek().remaining(), 1);
}

#[tokio::test]
async fn costs_and_custom_refusals() {
    let bytes = Arc::new(RateLimiter::gcra(Quota::per_hour(100).unwrap()));
    let layer = RateLimitLayer::new((Direct::new("bytes", Arc::clone(&bytes)).unwrap(),))
        .cost(|parts| {
            let cost = parts
                .headers
                .get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok());
            cost.unwrap_or(1)
        })
        .on_denied(|refusal| {
            let mut response = Response::new(());
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            let wait = refusal.decision().retry_after_secs().to_string();
            response
                .headers_mut()
                .insert("x-wait", HeaderValue::try_from(wait).unwrap());
            response
        });
    let addr = serve(layer).await;
    assert_eq!(request(addr, &[("x-cost", b"60")]).await.0, StatusCode::OK);
    // Past the capacity: never admitted, 413, nothing taken.
    assert_eq!(
        request(addr, &[("x-cost", b"101")]).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let (status, headers) = request(addr, &[("x-cost", b"41")]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // 1 unit missing, 36 s each: the custom response and the fields agree.
    assert_eq!(headers["x-wait"], "36");
    assert_eq!(headers["retry-after"], "36");
    assert_eq!(param(&list(&headers, "ratelimit")[0], "r"), 40);
    assert_eq!(bytes.peek().remaining(), 40);
    // A cost of 0 takes nothing.
    assert_eq!(request(addr, &[("x-cost", b"0")]).await.0, StatusCode::OK);
    assert_eq!(bytes.peek().remaining(), 40);
}

#[tokio::test]
async fn a_key_from_a_closure_over_the_request() {
    let per_tenant =
        Arc::new(KeyedRateLimiter::<str>::gcra(Quota::per_hour(1).unwrap(), 100).unwrap());
    let tenant = from_fn(|parts: &http::request::Parts| {
        Some(parts.uri.query()?.strip_prefix("tenant=")?.to_owned())
    });
    let layer = RateLimitLayer::new((Keyed::new("tenant", Arc::clone(&per_tenant), tenant)
        .unwrap()
        .on_missing_key(MissingKey::Reject(StatusCode::BAD_REQUEST)),));
    let addr = serve(layer).await;
    let status = |query: &'static str| async move { get(addr, query, &[]).await.0 };
    assert_eq!(status("/?tenant=acme").await, StatusCode::OK);
    assert_eq!(status("/?tenant=acme").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(status("/?tenant=globex").await, StatusCode::OK);
    assert_eq!(status("/").await, StatusCode::BAD_REQUEST);
    assert_eq!(per_tenant.peek_key("acme").remaining(), 0);
}

/// 10 a second (a turn every 100 ms, a burst of 1) at a frozen time, waiting up to 250 ms: of 4
/// requests at once, one goes on at once, two wait for the next two turns, and the fourth,
/// whose turn is 300 ms away, is refused at once. The waiting ones go on no earlier than their
/// turns, with the fields of the state as they go on.
#[tokio::test]
async fn shaping_delays_a_burst_to_its_turns() {
    let clock = Arc::new(ManualClock::new());
    let upstream = Arc::new(RateLimiter::with_clock(
        Gcra::from(Quota::per_second(10).unwrap().with_burst(1).unwrap()),
        Arc::clone(&clock),
    ));
    let layer = RateLimitLayer::new((Direct::new("upstream", Arc::clone(&upstream)).unwrap(),))
        .max_wait(Duration::from_millis(250));
    let addr = serve(layer).await;
    let start = Instant::now();
    let requests: Vec<_> = (0..4)
        .map(|_| tokio::spawn(async move { (request(addr, &[]).await, start.elapsed()) }))
        .collect();
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for handle in requests {
        let ((status, headers), elapsed) = handle.await.unwrap();
        match status {
            StatusCode::OK => admitted.push(elapsed),
            StatusCode::TOO_MANY_REQUESTS => {
                // 300 ms away: 1 s, rounded up.
                assert_eq!(headers["retry-after"], "1");
                refused.push(elapsed);
            }
            other => panic!("{other}"),
        }
        // After all three turns are taken, nothing remains and the schedule runs 300 ms ahead.
        let rate_limit = &list(&headers, "ratelimit")[0];
        assert_eq!(param(rate_limit, "r"), 0);
        assert_eq!(param(rate_limit, "t"), 1);
    }
    assert_eq!((admitted.len(), refused.len()), (3, 1));
    admitted.sort();
    // The last admitted waited for its turn, 200 ms after the first.
    assert!(admitted[2] >= Duration::from_millis(200), "{admitted:?}");
    assert_eq!(
        upstream.reserve(1, Duration::from_secs(1)).unwrap().delay(),
        Duration::from_millis(300)
    );
}

/// A request dropped while it waits for its turn (its client went away) gives its place back.
#[tokio::test]
async fn a_request_dropped_while_it_waits_gives_its_turn_back() {
    use tower_layer::Layer;
    use tower_service::Service;

    let clock = Arc::new(ManualClock::new());
    let upstream = Arc::new(RateLimiter::with_clock(
        Gcra::from(Quota::per_second(10).unwrap().with_burst(1).unwrap()),
        Arc::clone(&clock),
    ));
    let layer = RateLimitLayer::new((Direct::new("upstream", Arc::clone(&upstream)).unwrap(),))
        .max_wait(Duration::from_secs(1));
    let inner = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    let mut service = layer.layer(inner);
    upstream.check().unwrap();
    std::future::poll_fn(|cx| {
        Service::<http::Request<axum::body::Body>>::poll_ready(&mut service, cx)
    })
    .await
    .unwrap();
    let waiting = service.call(http::Request::new(axum::body::Body::empty()));
    // Its turn is 100 ms away; it is dropped before.
    assert!(tokio::time::timeout(Duration::from_millis(20), waiting)
        .await
        .is_err());
    // Its place is free again: the next request's turn is the one it had.
    assert_eq!(
        upstream.reserve(1, Duration::from_secs(1)).unwrap().delay(),
        Duration::from_millis(100)
    );
}

/// The layer on a plain hyper server, without axum: the server puts each connection's peer
/// address in its requests' extensions, where `PeerIp` finds it.
#[tokio::test]
async fn on_a_plain_hyper_server() {
    use http_body_util::Full;
    use hyper::body::{Bytes, Incoming};
    use hyper_util::rt::TokioIo;
    use tower_layer::Layer;
    use tower_service::Service;

    /// The app: "ok" at once.
    #[derive(Clone)]
    struct Hello;

    impl Service<http::Request<Incoming>> for Hello {
        type Response = Response<Full<Bytes>>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<Incoming>) -> Self::Future {
            std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"ok")))))
        }
    }

    let limiter = per_ip(Quota::per_minute(2).unwrap());
    let layer = RateLimitLayer::new((Keyed::new("per-ip", Arc::clone(&limiter), PeerIp).unwrap(),));
    let service = layer.layer(Hello);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let service = service.clone();
            let per_request = hyper::service::service_fn(move |mut request| {
                request.extensions_mut().insert(peer);
                let mut service = service.clone();
                async move {
                    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                    service.call(request).await
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), per_request),
            );
        }
    });
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(request(addr, &[]).await.0);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    assert_eq!(limiter.peek_key(&loopback).remaining(), 0);
}

/// A service states its limits' quotas as they are: after `set_quota`, of a direct limiter or
/// a keyed one, its next response's `RateLimit-Policy` has the new capacity.
#[tokio::test]
async fn the_policy_follows_a_quota_change() {
    use tower_layer::Layer;

    let limiter = Arc::new(RateLimiter::gcra(Quota::per_minute(5).unwrap()));
    let per_user =
        Arc::new(KeyedRateLimiter::<u64>::gcra(Quota::per_minute(20).unwrap(), 100).unwrap());
    let everyone = from_fn(|_: &http::request::Parts| Some(7u64));
    let layer = RateLimitLayer::new((
        Direct::new("global", Arc::clone(&limiter)).unwrap(),
        Keyed::new("user", Arc::clone(&per_user), everyone).unwrap(),
    ));
    let mut service =
        layer.layer(axum::Router::new().route("/", axum::routing::get(|| async { "ok" })));
    let stated =
        |global: u64, user: u64| format!("\"global\";q={global};w=60, \"user\";q={user};w=60");
    assert_eq!(policy(&mut service).await, stated(5, 20));
    assert_eq!(policy(&mut service).await, stated(5, 20));
    limiter.set_quota(Quota::per_minute(10).unwrap()).unwrap();
    assert_eq!(policy(&mut service).await, stated(10, 20));
    per_user.set_quota(Quota::per_minute(30).unwrap()).unwrap();
    assert_eq!(policy(&mut service).await, stated(10, 30));
}

/// The `RateLimit-Policy` of `service`'s response to a GET.
async fn policy<S>(service: &mut S) -> HeaderValue
where
    S: tower_service::Service<
        http::Request<axum::body::Body>,
        Response = Response<axum::body::Body>,
    >,
    S::Error: std::fmt::Debug,
{
    std::future::poll_fn(|cx| service.poll_ready(cx))
        .await
        .unwrap();
    let request = http::Request::new(axum::body::Body::empty());
    service.call(request).await.unwrap().headers()["ratelimit-policy"].clone()
}
