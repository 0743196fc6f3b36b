//! The middleware over Redis limits, over real HTTP: axum apps on loopback ports in front of a
//! real `redis-server` that the test starts, driven by a hyper client. Two apps share one limit
//! through Redis; a request is checked all or nothing in every limit; a missing key and a cost
//! that can never fit take no round trip; a Redis that is down is answered by the limiters'
//! fallbacks, and a key holding something else by a `500`; a refusal shaped into a turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderName, StatusCode};
use tollgate::middleware::{
    Header, MissingKey, PeerIp, RateLimitLayer, RedisDirect, RedisKeyed, RedisLimits,
};
use tollgate::redis::{Fallback, RedisGcra, RedisKeyedRateLimiter, RedisRateLimiter};
use tollgate::Quota;

mod http_server;
mod server;
use http_server::{list, param, request, serve};
use server::Server;

/// The `x-api-key` header as a key.
fn api_key() -> Header {
    Header::new(HeaderName::from_static("x-api-key"))
}

/// Two servers, each with its own limiter and connection, on one Redis: a burst of 8 from one
/// address, alternating between them, gets exactly the 5 of the shared quota, each response
/// with the fields of the shared state.
#[tokio::test]
async fn two_servers_share_one_limit_through_redis() {
    let redis = Server::start();
    let quota = Quota::per_minute(5).unwrap();
    let mut addrs = Vec::new();
    for _ in 0..2 {
        let per_ip = RedisKeyedRateLimiter::gcra(redis.connection().await, "rl:ip:", quota);
        let limits = RedisLimits::new()
            .with(RedisKeyed::new("per-ip", Arc::new(per_ip.unwrap()), PeerIp).unwrap());
        addrs.push(serve(RateLimitLayer::new(limits)).await);
    }
    let mut statuses = Vec::new();
    for i in 0..8u64 {
        let (status, headers) = request(addrs[i as usize % 2], &[]).await;
        statuses.push(status);
        let policy = list(&headers, "ratelimit-policy");
        assert_eq!(policy.len(), 1);
        assert_eq!(policy[0].0, "per-ip");
        assert_eq!((param(&policy[0], "q"), param(&policy[0], "w")), (5, 60));
        let rate_limit = list(&headers, "ratelimit");
        assert_eq!(rate_limit[0].0, "per-ip");
        let admitted = i.min(4) + 1;
        // What remains, and the seconds until all 5 are back: 12 s for each admitted, less the
        // microseconds the test has run, rounded up.
        assert_eq!(param(&rate_limit[0], "r"), 5 - admitted as i64);
        assert_eq!(param(&rate_limit[0], "t"), 12 * admitted as i64);
        if i < 5 {
            assert!(!headers.contains_key("retry-after"));
        } else {
            assert_eq!(headers["retry-after"], "12");
        }
    }
    let ok = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(ok, 5, "{statuses:?}");
    assert_eq!(&statuses[5..], [StatusCode::TOO_MANY_REQUESTS; 3]);
    assert!(
        redis.stored(b"rl:ip:127.0.0.1").is_some(),
        "the peer's key, as text"
    );
}

/// Per API key 1 a minute and 3 a minute in all: a request refused by one limit takes nothing
/// from the other, and the refusal names the limit that refused.
#[tokio::test]
async fn all_or_nothing_across_redis_limits() {
    let redis = Server::start();
    let conn = redis.connection().await;
    let per_key =
        RedisKeyedRateLimiter::gcra(conn.clone(), "rl:key:", Quota::per_minute(1).unwrap());
    let global =
        Arc::new(RedisRateLimiter::gcra(conn, "rl:global", Quota::per_minute(3).unwrap()).unwrap());
    let limits = RedisLimits::new()
        .with(RedisKeyed::new("per-key", Arc::new(per_key.unwrap()), api_key()).unwrap())
        .with(RedisDirect::new("global", Arc::clone(&global)).unwrap());
    let addr = serve(RateLimitLayer::new(limits)).await;
    let call = |key: &'static [u8]| async move { request(addr, &[("x-api-key", key)]).await };

    assert_eq!(call(b"a").await.0, StatusCode::OK);
    let (status, headers) = call(b"a").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(list(&headers, "ratelimit")[0].0, "per-key");
    assert_eq!(headers["retry-after"], "60");
    // The refusal took nothing from the global limit: two more keys fill it.
    assert_eq!(global.peek_n(1).await.unwrap().remaining(), 2);
    assert_eq!(call(b"b").await.0, StatusCode::OK);
    let (status, headers) = call(b"c").await;
    assert_eq!(status, StatusCode::OK);
    // Admitted, the binding limit is the one with the least left; both have none, and on a
    // tie the first binds.
    let rate_limit = list(&headers, "ratelimit");
    assert_eq!(rate_limit[0].0, "per-key");
    assert_eq!(param(&rate_limit[0], "r"), 0);
    let (status, headers) = call(b"d").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(list(&headers, "ratelimit")[0].0, "global");
    // Refused by the global limit, the new key has its minute's request still.
    assert!(redis.stored(b"rl:key:d").is_none());
    let policy = list(&headers, "ratelimit-policy");
    let names: Vec<_> = policy.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(names, ["per-key", "global"]);
}

/// A request whose key is missing, or whose cost exceeds a capacity, is answered at once, with
/// no round trip to Redis.
#[tokio::test]
async fn a_missing_key_or_an_impossible_cost_takes_no_round_trip() {
    let redis = Server::start();
    let per_key = RedisKeyedRateLimiter::gcra(
        redis.connection().await,
        "rl:key:",
        Quota::per_minute(10).unwrap(),
    );
    let limits = RedisLimits::new().with(
        RedisKeyed::new("per-key", Arc::new(per_key.unwrap()), api_key())
            .unwrap()
            .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)),
    );
    let layer = RateLimitLayer::new(limits).cost(|parts| {
        let cost = parts
            .headers
            .get("x-cost")
            .and_then(|v| v.to_str().ok()?.parse().ok());
        cost.unwrap_or(1)
    });
    let addr = serve(layer).await;
    assert_eq!(request(addr, &[]).await.0, StatusCode::UNAUTHORIZED);
    let (status, headers) = request(addr, &[("x-api-key", b"a"), ("x-cost", b"11")]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(!headers.contains_key("retry-after"));
    let scripts = || redis.command_count("evalsha") + redis.command_count("eval");
    assert_eq!(scripts(), 0);
    let (status, headers) = request(addr, &[("x-api-key", b"a"), ("x-cost", b"10")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(param(&list(&headers, "ratelimit")[0], "r"), 0);
}

/// While Redis is down, each limiter's fallback decides: a local share of the limit, or by
/// default a refusal with a one-second wait.
#[tokio::test]
async fn a_redis_that_is_down_is_answered_by_the_fallbacks() {
    let mut redis = Server::start();
    let quota = Quota::per_minute(10).unwrap();
    let shared = RedisKeyedRateLimiter::builder(
        redis.connection().await,
        "rl:ip:",
        RedisGcra::new(&quota).unwrap(),
    )
    .fallback(Fallback::Local {
        quota: Quota::per_minute(2).unwrap(),
        capacity: 100,
    })
    .build()
    .unwrap();
    let strict = RedisKeyedRateLimiter::gcra(redis.connection().await, "rl:ip:", quota).unwrap();
    let limits = |limiter| {
        RedisLimits::new().with(RedisKeyed::new("per-ip", Arc::new(limiter), PeerIp).unwrap())
    };
    let with_share = serve(RateLimitLayer::new(limits(shared))).await;
    let closed = serve(RateLimitLayer::new(limits(strict))).await;
    redis.stop();
    let statuses: Vec<_> = three_statuses(with_share).await;
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let (status, headers) = request(closed, &[]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
}

/// Three requests in turn: their statuses.
async fn three_statuses(addr: std::net::SocketAddr) -> Vec<StatusCode> {
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(request(addr, &[]).await.0);
    }
    statuses
}

/// A key that holds something else than a limiter's state cannot be decided: `500`, and the
/// inner service never sees the request.
#[tokio::test]
async fn a_key_holding_something_else_is_a_server_error() {
    let redis = Server::start();
    let per_key = RedisKeyedRateLimiter::gcra(
        redis.connection().await,
        "rl:key:",
        Quota::per_minute(10).unwrap(),
    );
    let addr = serve(RateLimitLayer::new(RedisLimits::new().with(
        RedisKeyed::new("per-key", Arc::new(per_key.unwrap()), api_key()).unwrap(),
    )))
    .await;
    redis.command(&["HSET", "rl:key:a", "field", "value"]);
    assert_eq!(
        request(addr, &[("x-api-key", b"a")]).await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(
        request(addr, &[("x-api-key", b"b")]).await.0,
        StatusCode::OK
    );
}

/// One a second (a burst of 1), waiting up to 1.5 s: after one request, of two at once one waits
/// for the next turn, a second away, and the other, whose turn is two seconds away, is refused.
#[tokio::test]
async fn shaping_waits_for_a_turn_in_redis() {
    let redis = Server::start();
    let quota = Quota::per_second(1).unwrap().with_burst(1).unwrap();
    let upstream = RedisRateLimiter::gcra(redis.connection().await, "rl:upstream", quota);
    let limits =
        RedisLimits::new().with(RedisDirect::new("upstream", Arc::new(upstream.unwrap())).unwrap());
    let layer = RateLimitLayer::new(limits).max_wait(Duration::from_millis(1500));
    let addr = serve(layer).await;
    // Before the first request: its admission, and the turn a second after it, come later.
    let start = Instant::now();
    assert_eq!(request(addr, &[]).await.0, StatusCode::OK);
    let two: Vec<_> = (0..2)
        .map(|_| tokio::spawn(async move { (request(addr, &[]).await, start.elapsed()) }))
        .collect();
    let mut statuses = Vec::new();
    for handle in two {
        let ((status, headers), elapsed) = handle.await.unwrap();
        statuses.push(status);
        if status == StatusCode::OK {
            // It went on at its turn, a second after the first admission, with nothing left and
            // the schedule a second ahead.
            assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
            let rate_limit = &list(&headers, "ratelimit")[0];
            assert_eq!((param(rate_limit, "r"), param(rate_limit, "t")), (0, 1));
        } else {
            assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(headers["retry-after"], "2");
        }
    }
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
}

/// A window counter takes no reservation: shaping over one leaves its refusals as they are.
#[tokio::test]
async fn a_window_counter_refuses_as_without_shaping() {
    let redis = Server::start();
    let quota = Quota::per_minute(1).unwrap();
    let window = RedisKeyedRateLimiter::sliding_window(redis.connection().await, "rl:sw:", quota);
    let limits = RedisLimits::new()
        .with(RedisKeyed::new("per-ip", Arc::new(window.unwrap()), PeerIp).unwrap());
    let layer = RateLimitLayer::new(limits).max_wait(Duration::from_secs(3600));
    let addr = serve(layer).await;
    assert_eq!(request(addr, &[]).await.0, StatusCode::OK);
    let (status, headers) = request(addr, &[]).await;
    // Refused at once, not delayed: a reservation would have admitted it after its wait.
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    // Its wait ends within the next window.
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=120).contains(&wait), "{wait}");
}
