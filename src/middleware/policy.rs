//! The IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers),
//! and `Retry-After`: Structured Field lists whose items are the policies' names.
//!
//! `RateLimit-Policy: "per-ip";q=10;w=1, "global";q=5000;w=1` states each limit: `q` its
//! capacity (the burst, or the limit per window), `w` the seconds over which it comes back in
//! full (GCRA's burst times its emission interval; a window counter's window), rounded up.
//! `RateLimit: "per-ip";r=3;t=1` states the binding limit's state after the request: `r` what
//! remains, `t` the seconds until it is full again, rounded up. Integers above the 15 digits that
//! Structured Fields allow are written as the largest they allow.

use core::fmt::{self, Write};
use core::time::Duration;

use http::HeaderValue;

use crate::decision::Decision;

/// The largest Structured Field integer.
const MAX_INTEGER: u64 = 999_999_999_999_999;

/// A policy's name: what a limit is called in the fields.
#[derive(Clone, Debug)]
pub(crate) struct PolicyName(Box<str>);

impl PolicyName {
    pub(crate) fn new(name: &str) -> Result<PolicyName, PolicyNameError> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.:/".contains(c);
        if name.is_empty() || name.len() > 64 || !name.chars().all(allowed) {
            return Err(PolicyNameError(name.into()));
        }
        Ok(PolicyName(name.into()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// A limit's name that the `RateLimit` fields cannot carry as it is: empty, longer than 64
/// bytes, or with other characters than ASCII letters, digits and `-_.:/`.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::middleware::Direct;
/// use tollgate::{Quota, RateLimiter};
/// let limiter = Arc::new(RateLimiter::gcra(Quota::per_second(1).unwrap()));
/// let err = Direct::new("per user", limiter).unwrap_err();
/// assert_eq!(err.to_string(), "\"per user\" cannot name a rate limit policy: use 1 to 64 ASCII letters, digits and -_.:/");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyNameError(Box<str>);

impl fmt::Display for PolicyNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} cannot name a rate limit policy: use 1 to 64 ASCII letters, digits and -_.:/",
            self.0
        )
    }
}

impl std::error::Error for PolicyNameError {}

/// Whole seconds, rounded up, as a Structured Field integer.
fn seconds(duration: Duration) -> u64 {
    let whole = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    whole.min(MAX_INTEGER)
}

/// One `RateLimit-Policy` item: `"name";q=..;w=..`.
pub(crate) fn write_policy(out: &mut String, name: &str, capacity: u64, window: Duration) {
    if !out.is_empty() {
        out.push_str(", ");
    }
    // A `String` never fails to take a write.
    let _ = write!(
        out,
        "\"{name}\";q={};w={}",
        capacity.min(MAX_INTEGER),
        seconds(window).max(1)
    );
}

/// The `RateLimit` field for the binding limit's decision: `"name";r=..;t=..`, written by hand
/// (it is on every response's path).
pub(crate) fn rate_limit(name: &str, decision: &Decision) -> HeaderValue {
    // At most 64 bytes of name, 2 of quotes and 6 of parameters' names, and two integers of at
    // most 15 digits each.
    let mut out = [0u8; 64 + 8 + 30];
    let mut len = 0;
    for part in [&b"\""[..], name.as_bytes(), b"\";r="] {
        out[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    len = push_integer(&mut out, len, decision.remaining());
    out[len..len + 3].copy_from_slice(b";t=");
    len = push_integer(&mut out, len + 3, seconds(decision.reset_after()));
    // Names are checked to be Structured Field strings of visible ASCII, and the rest digits.
    HeaderValue::from_bytes(&out[..len]).expect("a RateLimit field of visible ASCII")
}

/// Writes `n`, capped at the largest Structured Field integer, in decimal at `out[at..]`, and
/// returns where it ends.
fn push_integer(out: &mut [u8], at: usize, n: u64) -> usize {
    let mut n = n.min(MAX_INTEGER);
    let mut digits = [0u8; 15];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let end = at + digits.len() - i;
    out[at..end].copy_from_slice(&digits[i..]);
    end
}

/// `Retry-After` in whole seconds, rounded up: waiting that long is enough.
pub(crate) fn retry_after(decision: &Decision) -> HeaderValue {
    HeaderValue::from(decision.retry_after_secs().min(MAX_INTEGER))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Nanos;

    #[test]
    fn names_are_structured_field_strings_without_escapes() {
        for good in ["a", "per-ip", "tenant:acme/v1_2.x", &"n".repeat(64)] {
            assert!(PolicyName::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "per ip",
            "quote\"",
            "back\\slash",
            "é",
            &"n".repeat(65),
            "semi;colon",
            "a,b",
        ] {
            assert_eq!(
                PolicyName::new(bad).unwrap_err(),
                PolicyNameError(bad.into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn fields_round_seconds_up_and_cap_integers_at_fifteen_digits() {
        let mut out = String::new();
        write_policy(&mut out, "a", 10, Duration::from_millis(1_500));
        write_policy(&mut out, "b", u64::MAX, Duration::ZERO);
        assert_eq!(out, "\"a\";q=10;w=2, \"b\";q=999999999999999;w=1");
        let decision = Decision::new(
            false,
            u64::MAX,
            Nanos::from_nanos(1),
            Nanos::from_nanos(2_000_000_001),
            7,
        );
        assert_eq!(rate_limit("a", &decision), "\"a\";r=999999999999999;t=3");
        assert_eq!(retry_after(&decision), "1");
        let long = Decision::new(false, 0, Nanos::MAX, Nanos::MAX, 7);
        assert_eq!(
            rate_limit("a", &long),
            format!(
                "\"a\";r=0;t={}",
                Nanos::MAX.as_nanos().div_ceil(1_000_000_000)
            )
        );
    }
}
