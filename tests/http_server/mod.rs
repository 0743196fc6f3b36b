//! An axum app on 127.0.0.1, on a port the system picks, with the peer's address recorded; a
//! hyper client; and a parser of the `RateLimit` fields' Structured Field lists (`sfv`).

#![allow(dead_code)] // each test binary uses part of it

use std::net::SocketAddr;

use axum::routing;
use axum::Router;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sfv::{BareItem, ListEntry, Parser};

/// An app behind `layer`, served on 127.0.0.1 with the peer's address recorded; its address.
pub async fn serve(layer: impl tower_layer_for_router::Apply) -> SocketAddr {
    serve_app(layer.apply(Router::new().route("/", routing::get(|| async { "ok" })))).await
}

/// `app`, served on 127.0.0.1 with the peer's address recorded; its address.
pub async fn serve_app(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Applies a layer to a router: the test's apps are all `Router::layer` of a
/// `RateLimitLayer`, whose limit tuples differ in type.
pub mod tower_layer_for_router {
    use axum::Router;
    use tollgate::middleware::{Limits, RateLimitLayer};

    pub trait Apply {
        fn apply(self, router: Router) -> Router;
    }

    impl<L: Limits> Apply for RateLimitLayer<L> {
        fn apply(self, router: Router) -> Router {
            router.layer(self)
        }
    }
}

/// A GET of `/` with these headers: the status and the response's headers.
pub async fn request(addr: SocketAddr, headers: &[(&str, &[u8])]) -> (StatusCode, HeaderMap) {
    get(addr, "/", headers).await
}

/// A GET of `path` (with its query) with these headers: the status and the response's headers.
pub async fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &[u8])],
) -> (StatusCode, HeaderMap) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut builder = Request::get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        builder = builder.header(*name, HeaderValue::from_bytes(value).unwrap());
    }
    let response: Response<_> = client
        .request(builder.body(Empty::new()).unwrap())
        .await
        .unwrap();
    (response.status(), response.headers().clone())
}

/// A field's list, each member an Item whose bare item is a String, with Integer parameters:
/// the grammar of both `RateLimit` fields.
pub fn list(headers: &HeaderMap, name: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let value = headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {headers:?}"));
    let list = Parser::parse_list(value.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(!list.is_empty(), "{name} is empty");
    list.into_iter()
        .map(|entry| {
            let ListEntry::Item(item) = entry else {
                panic!("{name}: an inner list");
            };
            let BareItem::String(policy) = item.bare_item else {
                panic!("{name}: {:?} is not a String", item.bare_item);
            };
            let params = item
                .params
                .into_iter()
                .map(|(key, value)| match value {
                    BareItem::Integer(n) if n >= 0 => (key, n),
                    other => panic!("{name}: {key}={other:?} is not a non-negative Integer"),
                })
                .collect();
            (policy, params)
        })
        .collect()
}

pub fn param(item: &(String, Vec<(String, i64)>), key: &str) -> i64 {
    item.1
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key} in {item:?}"))
        .1
}
