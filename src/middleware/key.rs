//! Whose request it is: the key a keyed limit counts a request against.

use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderName, FORWARDED};
use http::request::Parts;

/// How a request's key is found, for a [`Keyed`](super::Keyed) limit.
///
/// `peer` is the address of the connection's other end, if the server put it in the request's
/// extensions (see [`peer_ip`]). `None` means the request has no key: the limit's
/// [`MissingKey`](super::MissingKey) treatment applies.
///
/// Implemented by [`PeerIp`], [`ClientIp`], [`Header`], and closures wrapped in [`from_fn`].
///
/// ```
/// use tollgate::middleware::{from_fn, KeyExtractor};
/// // The tenant named in the path: `/t/acme/...`.
/// let tenant = from_fn(|parts: &http::request::Parts| {
///     let rest = parts.uri.path().strip_prefix("/t/")?;
///     Some(rest.split('/').next()?.to_owned())
/// });
/// let (parts, ()) = http::Request::get("/t/acme/orders").body(()).unwrap().into_parts();
/// assert_eq!(tenant.extract(&parts, None), Some("acme".to_owned()));
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key, owned: the keyed limiter's key type borrows it (an `IpAddr`, a `String` for a
    /// limiter of `str`, a `Box<[u8]>` for one of `[u8]`).
    type Key;

    /// Whether [`extract`](Self::extract) reads the peer's address. A layer looks the address
    /// up in a request's extensions only if one of its keys needs it; an extractor that says
    /// `false` is given `None`.
    const NEEDS_PEER: bool = true;

    /// The request's key, or `None` if it has none.
    fn extract(&self, parts: &Parts, peer: Option<IpAddr>) -> Option<Self::Key>;
}

/// The address of the connection's other end, as the server recorded it in the request's
/// extensions: a [`SocketAddr`], or, with the `axum` feature, axum's
/// `ConnectInfo<SocketAddr>` (serve the app with
/// `into_make_service_with_connect_info::<SocketAddr>()`).
///
/// ```
/// use std::net::SocketAddr;
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert("192.0.2.1:4000".parse::<SocketAddr>().unwrap());
/// let (parts, ()) = request.into_parts();
/// assert_eq!(tollgate::middleware::peer_ip(&parts), Some("192.0.2.1".parse().unwrap()));
/// ```
#[must_use]
pub fn peer_ip(parts: &Parts) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0.ip());
    }
    parts.extensions.get::<SocketAddr>().map(SocketAddr::ip)
}

/// The peer's IP address: the key for a server that clients reach directly.
///
/// ```
/// use tollgate::middleware::{KeyExtractor, PeerIp};
/// let (parts, ()) = http::Request::new(()).into_parts();
/// let peer = "198.51.100.9".parse().unwrap();
/// assert_eq!(PeerIp.extract(&parts, Some(peer)), Some(peer));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerIp;

impl KeyExtractor for PeerIp {
    type Key = IpAddr;

    fn extract(&self, _: &Parts, peer: Option<IpAddr>) -> Option<IpAddr> {
        peer
    }
}

/// The client's IP address behind trusted proxies: the peer's, unless the peer is one of the
/// trusted proxies, in which case the address the proxies forwarded.
///
/// The forwarded address is read from `Forwarded` (RFC 7239, its `for=` parameters), else from
/// `X-Forwarded-For`, walking the list from the right (the hops closest to this server) past
/// every trusted proxy: the first address that is not one is the client's. The left of the list
/// is written by whoever sent the request, so it is never believed beyond the last trusted
/// hop: a client cannot choose its key by sending the header itself. A peer that is not trusted
/// is the key whatever headers it sends. A list that names only trusted proxies, or a hop on the
/// way to the first untrusted one that names no address (malformed, obfuscated, `unknown`, a
/// `Forwarded` element without `for=`), leaves the nearest trusted proxy as the key; what lies
/// left of the first untrusted hop is never read.
///
/// ```
/// use tollgate::middleware::{Cidr, ClientIp, KeyExtractor};
/// let client = ClientIp::trusting(["10.0.0.0/8".parse::<Cidr>().unwrap()]);
/// let request = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.7, 10.1.2.3")
///     .body(())
///     .unwrap();
/// let (parts, ()) = request.into_parts();
/// // Through the trusted proxy 10.0.0.1: the forwarded client.
/// assert_eq!(client.extract(&parts, "10.0.0.1".parse().ok()), "203.0.113.7".parse().ok());
/// // Straight from the internet: the header is the sender's own, ignored.
/// assert_eq!(client.extract(&parts, "198.51.100.2".parse().ok()), "198.51.100.2".parse().ok());
/// ```
#[derive(Clone, Debug, Default)]
pub struct ClientIp {
    trusted: Vec<Cidr>,
}

impl ClientIp {
    /// Trusts the proxies in these networks.
    pub fn trusting(proxies: impl IntoIterator<Item = Cidr>) -> ClientIp {
        ClientIp {
            trusted: proxies.into_iter().collect(),
        }
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(ip))
    }

    /// The first untrusted hop from the right of a list of hops (`None` for a hop that names
    /// no address), or `None` if a hop on the way cannot be read or the list holds only trusted
    /// proxies. What lies left of the first untrusted hop is never read: the client wrote it.
    fn first_untrusted<'a>(
        &self,
        hops: impl DoubleEndedIterator<Item = Option<&'a str>>,
    ) -> Option<IpAddr> {
        for hop in hops.rev() {
            let ip = parse_hop(hop?.trim())?;
            if !self.is_trusted(ip) {
                return Some(ip);
            }
        }
        None
    }
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;

    fn extract(&self, parts: &Parts, peer: Option<IpAddr>) -> Option<IpAddr> {
        let peer = peer?;
        if !self.is_trusted(peer) {
            return Some(peer);
        }
        let text = |name: &HeaderName| -> Option<String> {
            // Every field line of the header, in order, as one list.
            let mut lines = parts.headers.get_all(name).iter().peekable();
            lines.peek()?;
            let mut all = Vec::new();
            for line in lines {
                all.push(line.to_str().ok()?);
            }
            Some(all.join(","))
        };
        let forwarded = if let Some(list) = text(&FORWARDED) {
            // Each element's `for=` parameter.
            self.first_untrusted(list.split(',').map(|element| {
                element.split(';').find_map(|pair| {
                    let (name, value) = pair.trim().split_once('=')?;
                    name.eq_ignore_ascii_case("for").then_some(value)
                })
            }))
        } else if let Some(list) = text(&HeaderName::from_static("x-forwarded-for")) {
            self.first_untrusted(list.split(',').map(Some))
        } else {
            None
        };
        Some(forwarded.unwrap_or(peer))
    }
}

/// An address as a hop names it: `192.0.2.1`, `2001:db8::1`, or, in `Forwarded`, quoted, with a
/// port, or in brackets (`"[2001:db8::1]:4711"`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop
        .strip_prefix('"')
        .and_then(|h| h.strip_suffix('"'))
        .unwrap_or(hop);
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    if let Ok(addr) = hop.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    let inner = hop.strip_prefix('[')?;
    inner.split_once(']')?.0.parse().ok()
}

/// A request header's value, as bytes: an API key, a tenant id. A value longer than `max_len`
/// bytes (256 unless [`max_len`](Header::max_len) says otherwise) is no key, so that a client
/// cannot make the limiter hash megabytes; an absent header is no key either. Any bytes are a
/// key, UTF-8 or not.
///
/// ```
/// use http::HeaderName;
/// use tollgate::middleware::{Header, KeyExtractor};
/// let api_key = Header::new(HeaderName::from_static("x-api-key"));
/// let request = http::Request::get("/").header("x-api-key", "k-123").body(()).unwrap();
/// let (parts, ()) = request.into_parts();
/// assert_eq!(api_key.extract(&parts, None).as_deref(), Some(&b"k-123"[..]));
/// ```
#[derive(Clone, Debug)]
pub struct Header {
    name: HeaderName,
    max_len: usize,
}

impl Header {
    /// The header `name`.
    #[must_use]
    pub fn new(name: HeaderName) -> Header {
        Header { name, max_len: 256 }
    }

    /// The longest value taken as a key, in bytes.
    #[must_use]
    pub fn max_len(self, max_len: usize) -> Header {
        Header { max_len, ..self }
    }
}

impl KeyExtractor for Header {
    type Key = Box<[u8]>;
    const NEEDS_PEER: bool = false;

    fn extract(&self, parts: &Parts, _: Option<IpAddr>) -> Option<Box<[u8]>> {
        let value = parts.headers.get(&self.name)?.as_bytes();
        (value.len() <= self.max_len).then(|| value.into())
    }
}

/// A closure over the request's head as a [`KeyExtractor`].
///
/// ```
/// use tollgate::middleware::{from_fn, KeyExtractor};
/// let by_method = from_fn(|parts: &http::request::Parts| Some(parts.method.to_string()));
/// let (parts, ()) = http::Request::post("/").body(()).unwrap().into_parts();
/// assert_eq!(by_method.extract(&parts, None).as_deref(), Some("POST"));
/// ```
pub fn from_fn<F, T>(f: F) -> FromFn<F>
where
    F: Fn(&Parts) -> Option<T> + Send + Sync + 'static,
{
    FromFn(f)
}

/// A closure as a [`KeyExtractor`]: see [`from_fn`].
#[derive(Clone, Copy)]
pub struct FromFn<F>(F);

impl<F> fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FromFn")
    }
}

impl<F, T> KeyExtractor for FromFn<F>
where
    F: Fn(&Parts) -> Option<T> + Send + Sync + 'static,
{
    type Key = T;
    const NEEDS_PEER: bool = false;

    fn extract(&self, parts: &Parts, _: Option<IpAddr>) -> Option<T> {
        (self.0)(parts)
    }
}

/// A network, `address/prefix`: `10.0.0.0/8`, `2001:db8::/32`, or one address (`127.0.0.1`, as
/// `/32` or `/128`).
///
/// ```
/// use tollgate::middleware::Cidr;
/// let net: Cidr = "192.168.0.0/16".parse().unwrap();
/// assert!(net.contains("192.168.4.2".parse().unwrap()));
/// assert!(!net.contains("192.169.0.1".parse().unwrap()));
/// assert!("10.0.0.0/33".parse::<Cidr>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    address: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// The network, with an IPv4 network written mapped into IPv6 (`::ffff:10.0.0.0/104`) held
    /// as the IPv4 one, as addresses are matched.
    fn new(address: IpAddr, prefix: u8) -> Cidr {
        match address {
            IpAddr::V6(v6) if prefix >= 96 => match v6.to_ipv4_mapped() {
                Some(v4) => Cidr {
                    address: IpAddr::V4(v4),
                    prefix: prefix - 96,
                },
                None => Cidr { address, prefix },
            },
            _ => Cidr { address, prefix },
        }
    }

    /// Whether `ip` is in the network. An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`) is
    /// matched as the IPv4 address.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.address, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Why a [`Cidr`] could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CidrError(String);

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not an address or a network (address/prefix)",
            self.0
        )
    }
}

impl std::error::Error for CidrError {}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Cidr, CidrError> {
        let error = || CidrError(text.to_owned());
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address.parse().map_err(|_| error())?;
        let bits = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(prefix) => prefix.parse::<u8>().map_err(|_| error())?,
        };
        if prefix > bits {
            return Err(error());
        }
        Ok(Cidr::new(address, prefix))
    }
}

impl From<IpAddr> for Cidr {
    fn from(address: IpAddr) -> Cidr {
        let prefix = if address.is_ipv4() { 32 } else { 128 };
        Cidr::new(address, prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut request = http::Request::get("/");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn networks_match_their_prefix_and_nothing_else() {
        let net: Cidr = "10.128.0.0/9".parse().unwrap();
        assert!(net.contains(ip("10.200.1.1")));
        assert!(!net.contains(ip("10.127.255.255")));
        assert!(!net.contains(ip("2001:db8::1")));
        // An IPv4 address mapped into IPv6 is matched as IPv4.
        assert!(net.contains(ip("::ffff:10.200.1.1")));
        let any: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(any.contains(ip("192.0.2.1")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:ffff::1")) && !v6.contains(ip("2001:db9::1")));
        let one: Cidr = "2001:db8::1".parse().unwrap();
        assert!(one.contains(ip("2001:db8::1")) && !one.contains(ip("2001:db8::2")));
        // An IPv4 network written mapped into IPv6 matches as the IPv4 network.
        let mapped: Cidr = "::ffff:10.0.0.0/104".parse().unwrap();
        assert_eq!(mapped, "10.0.0.0/8".parse().unwrap());
        assert!(mapped.contains(ip("10.1.2.3")) && mapped.contains(ip("::ffff:10.1.2.3")));
        assert!(!mapped.contains(ip("11.0.0.1")));
        for bad in [
            "",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "x/1",
            "10.0.0.0/-1",
        ] {
            assert_eq!(bad.parse::<Cidr>(), Err(CidrError(bad.into())), "{bad}");
        }
    }

    #[test]
    fn hops_in_every_form_a_proxy_writes_them() {
        assert_eq!(parse_hop("192.0.2.1"), Some(ip("192.0.2.1")));
        assert_eq!(parse_hop("192.0.2.1:8080"), Some(ip("192.0.2.1")));
        assert_eq!(parse_hop("\"[2001:db8::1]:443\""), Some(ip("2001:db8::1")));
        assert_eq!(parse_hop("[2001:db8::1]"), Some(ip("2001:db8::1")));
        assert_eq!(parse_hop("2001:db8::1"), Some(ip("2001:db8::1")));
        for unreadable in ["unknown", "_hidden", "\"[2001:db8::1\"", "", "999.0.0.1"] {
            assert_eq!(parse_hop(unreadable), None, "{unreadable}");
        }
    }

    #[test]
    fn the_client_is_the_first_untrusted_hop_from_the_right() {
        let client = ClientIp::trusting(["10.0.0.0/8".parse().unwrap()]);
        let proxy = Some(ip("10.0.0.1"));
        // Several field lines are one list, in order.
        let two_lines = parts(&[
            ("x-forwarded-for", "192.0.2.50, 198.51.100.1"),
            ("x-forwarded-for", "10.9.9.9"),
        ]);
        assert_eq!(client.extract(&two_lines, proxy), Some(ip("198.51.100.1")));
        // `Forwarded` first, when both are there.
        let both = parts(&[
            (
                "forwarded",
                "for=192.0.2.60;proto=http, for=\"10.1.1.1:80\"",
            ),
            ("x-forwarded-for", "198.51.100.2"),
        ]);
        assert_eq!(client.extract(&both, proxy), Some(ip("192.0.2.60")));
        // An element without `for=`, an obfuscated one, or only proxies: the proxy is the key.
        for unreadable in ["proto=https", "for=_gateway", "for=10.3.3.3"] {
            let p = parts(&[("forwarded", unreadable)]);
            assert_eq!(client.extract(&p, proxy), proxy, "{unreadable}");
        }
        // Left of the first untrusted hop is what the client wrote, never read: a client that
        // sends an element without `for=`, or junk, is still keyed by its own address.
        for spoofed in ["proto=https, for=192.0.2.70", "for=unknown, for=192.0.2.70"] {
            let p = parts(&[("forwarded", spoofed)]);
            assert_eq!(
                client.extract(&p, proxy),
                Some(ip("192.0.2.70")),
                "{spoofed}"
            );
        }
        let p = parts(&[("x-forwarded-for", "garbage, 192.0.2.71")]);
        assert_eq!(client.extract(&p, proxy), Some(ip("192.0.2.71")));
        // Nothing forwarded at all: the proxy.
        assert_eq!(client.extract(&parts(&[]), proxy), proxy);
        // No peer: no key.
        assert_eq!(
            client.extract(&parts(&[("x-forwarded-for", "192.0.2.1")]), None),
            None
        );
        // A header that is not visible ASCII cannot be read: the proxy.
        let mut binary = parts(&[]);
        let value = http::HeaderValue::from_bytes(b"192.0.2.1\xff").unwrap();
        binary.headers.insert("x-forwarded-for", value);
        assert_eq!(client.extract(&binary, proxy), proxy);
    }

    /// A hop as a proxy writes it, for the property test: an address in one of the forms
    /// proxies use, or something that names no address.
    #[derive(Clone, Debug)]
    enum Hop {
        /// The address, with a port or not; in `Forwarded`, quoted when it needs to be.
        Address(IpAddr, Option<u16>),
        /// An obfuscated identifier or `unknown`.
        Hidden(&'static str),
        /// A `Forwarded` element without `for=` (in `X-Forwarded-For`, a hidden hop).
        NoFor,
    }

    impl Hop {
        fn forwarded(&self) -> String {
            match self {
                Hop::Address(IpAddr::V4(v4), None) => format!("for={v4}"),
                Hop::Address(IpAddr::V4(v4), Some(port)) => format!("for=\"{v4}:{port}\""),
                Hop::Address(IpAddr::V6(v6), None) => format!("for=\"[{v6}]\""),
                Hop::Address(IpAddr::V6(v6), Some(port)) => format!("for=\"[{v6}]:{port}\""),
                Hop::Hidden(name) => format!("for={name}"),
                Hop::NoFor => "proto=https".to_owned(),
            }
        }

        fn x_forwarded_for(&self) -> String {
            match self {
                Hop::Address(ip, None) => ip.to_string(),
                Hop::Address(ip, Some(port)) => SocketAddr::new(*ip, *port).to_string(),
                Hop::Hidden(name) => (*name).to_owned(),
                Hop::NoFor => "unknown".to_owned(),
            }
        }
    }

    fn address() -> impl proptest::strategy::Strategy<Value = IpAddr> {
        use proptest::prelude::*;
        // Half in the trusted networks, half outside; both families.
        prop_oneof![
            (any::<u8>(), any::<u8>()).prop_map(|(a, b)| IpAddr::from([10, a, b, 1])),
            (any::<u8>(), any::<u8>()).prop_map(|(a, b)| IpAddr::from([192, 0, a, b])),
            any::<u16>().prop_map(|a| IpAddr::from([0xfd00, a, 0, 0, 0, 0, 0, 1])),
            any::<u16>().prop_map(|a| IpAddr::from([0x2001, 0xdb8, a, 0, 0, 0, 0, 1])),
        ]
    }

    fn hop() -> impl proptest::strategy::Strategy<Value = Hop> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (address(), proptest::option::of(1u16..)).prop_map(|(ip, port)| Hop::Address(ip, port)),
            1 => prop_oneof![Just("unknown"), Just("_hidden"), Just("_gw-7")].prop_map(Hop::Hidden),
            1 => Just(Hop::NoFor),
        ]
    }

    proptest::proptest! {
        /// Whatever hops a list holds, in either header, split over field lines and spaced
        /// anyhow, the key is what the documented walk gives, computed here on the hops
        /// themselves: the peer if it is not trusted; else the first hop from the right that is
        /// not a trusted proxy; else (a hop that names no address on the way, or only proxies)
        /// the peer.
        #[test]
        fn the_key_is_the_documented_walk_over_any_list(
            peer in address(),
            hops in proptest::collection::vec(hop(), 0..6),
            forwarded in proptest::bool::ANY,
            lines in 1usize..4,
            spaces in proptest::collection::vec(0usize..3, 6),
        ) {
            let client = ClientIp::trusting(["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()]);
            let trusted = |ip: IpAddr| client.is_trusted(ip);
            let expected = if !trusted(peer) {
                peer
            } else {
                let mut key = peer;
                for hop in hops.iter().rev() {
                    match hop {
                        Hop::Address(ip, _) if trusted(*ip) => {}
                        Hop::Address(ip, _) => {
                            key = *ip;
                            break;
                        }
                        _ => break,
                    }
                }
                key
            };
            let (name, items): (&str, Vec<String>) = if forwarded {
                ("forwarded", hops.iter().map(Hop::forwarded).collect())
            } else {
                ("x-forwarded-for", hops.iter().map(Hop::x_forwarded_for).collect())
            };
            let mut request = http::Request::get("/");
            // The list in `lines` field lines, each item padded by the spaces drawn for it.
            let per_line = items.len().div_ceil(lines).max(1);
            for (l, chunk) in items.chunks(per_line).enumerate() {
                let padded: Vec<String> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, item)| format!("{}{item}", " ".repeat(spaces[(i + l) % spaces.len()])))
                    .collect();
                request = request.header(name, padded.join(","));
            }
            let (parts, ()) = request.body(()).unwrap().into_parts();
            proptest::prop_assert_eq!(client.extract(&parts, Some(peer)), Some(expected));
        }
    }
}
