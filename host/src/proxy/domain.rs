//! Host names: the allowlist's patterns (`example.com`, `*.example.com`), the host a client
//! asked for, and the one syntax both must follow.
//!
//! Names are compared in lower case without a trailing dot. Anything that is not a plain
//! DNS name or an IP literal is refused at parse time, so a request cannot smuggle a
//! destination past the matcher in a form the resolver reads differently (`0x7f.1`,
//! `2130706433`, a name with a space or a `@`).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// The longest DNS name, in bytes (RFC 1035).
pub const MAX_NAME_LEN: usize = 253;
/// The longest DNS label, in bytes.
pub const MAX_LABEL_LEN: usize = 63;

/// A destination host: a DNS name (lower case, no trailing dot) or an IP literal.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// A DNS name.
    Name(String),
    /// An IPv4 or IPv6 literal.
    Ip(IpAddr),
}

impl Host {
    /// Parses a host as written in a request or an option: a DNS name, a dotted IPv4 address,
    /// or an IPv6 address (brackets optional).
    pub fn parse(text: &str) -> Result<Host, NameError> {
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .map(|a| Host::Ip(IpAddr::V6(a)))
                .map_err(|_| NameError::new(text, "is not an IPv6 address"));
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        check_name(text).map(Host::Name)
    }

    /// The host as it goes into a `Host` header or a URL authority (IPv6 in brackets).
    pub fn authority(&self, port: u16) -> String {
        match self {
            Host::Name(n) => format!("{n}:{port}"),
            Host::Ip(IpAddr::V4(a)) => format!("{a}:{port}"),
            Host::Ip(IpAddr::V6(a)) => format!("[{a}]:{port}"),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// One allowlist entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Exactly this host.
    Exact(Host),
    /// Every name strictly below this one (`*.example.com`: `a.example.com`,
    /// `a.b.example.com`, not `example.com`).
    Below(String),
}

impl Pattern {
    /// Parses `example.com`, `*.example.com` or an IP literal.
    pub fn parse(text: &str) -> Result<Pattern, NameError> {
        if text == "*" {
            return Err(NameError::new(
                text,
                "would allow every domain (use network host for unrestricted network)",
            ));
        }
        if let Some(base) = text.strip_prefix("*.") {
            let base = check_name(base).map_err(|e| NameError::new(text, e.reason))?;
            if !base.contains('.') {
                return Err(NameError::new(
                    text,
                    "would allow a whole top-level domain; name the domain (`*.example.com`)",
                ));
            }
            return Ok(Pattern::Below(base));
        }
        Host::parse(text).map(Pattern::Exact)
    }

    /// Whether `host` matches this entry.
    pub fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (Pattern::Exact(h), host) => h == host,
            (Pattern::Below(base), Host::Name(n)) => n
                .strip_suffix(base.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Below(_), Host::Ip(_)) => false,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(h) => write!(f, "{h}"),
            Pattern::Below(base) => write!(f, "*.{base}"),
        }
    }
}

/// The name of the first registry preset (in name order) whose domains allow `host`: a
/// refusal names it beside the host.
pub fn preset_of(host: &Host) -> Option<&'static str> {
    super::presets::all().iter().find_map(|(name, p)| {
        p.domains
            .iter()
            .filter_map(|d| Pattern::parse(d).ok())
            .any(|pat| pat.matches(host))
            .then_some(name.as_str())
    })
}

/// The domains a proxy lets through; empty allows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    patterns: Vec<Pattern>,
}

impl Allowlist {
    /// Parses every entry, a registry preset (`@pypi`, module `presets`) as its domains; the
    /// error carries the index of the first bad one.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Allowlist, (usize, NameError)> {
        let mut patterns = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let e = e.as_ref();
            match super::presets::expand(e) {
                Ok(Some(domains)) => {
                    for d in domains {
                        patterns.push(Pattern::parse(d).map_err(|err| (i, err))?);
                    }
                }
                Ok(None) => patterns.push(Pattern::parse(e).map_err(|err| (i, err))?),
                Err(why) => return Err((i, NameError::new(e, why))),
            }
        }
        Ok(Allowlist { patterns })
    }

    /// Whether any entry matches `host`.
    pub fn allows(&self, host: &Host) -> bool {
        self.patterns.iter().any(|p| p.matches(host))
    }

    /// The entries, as parsed.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }
}

/// Why a name was refused: the text as given and the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` {reason}")]
pub struct NameError {
    /// The offending text (truncated to 80 characters).
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl NameError {
    pub(super) fn new(text: &str, reason: impl Into<String>) -> NameError {
        let mut shown: String = text.chars().take(80).collect();
        if shown.len() < text.len() {
            shown.push_str("...");
        }
        NameError {
            text: shown.escape_debug().to_string(),
            reason: reason.into(),
        }
    }
}

/// Checks a DNS name and returns it in canonical form (lower case, no trailing dot).
fn check_name(text: &str) -> Result<String, NameError> {
    let bad = |reason: &str| Err(NameError::new(text, reason));
    if text.is_empty() {
        return bad("is empty; a domain name is expected");
    }
    if !text.is_ascii() {
        return bad("is not ASCII; write the name in its punycode (xn--) form");
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.len() > MAX_NAME_LEN {
        return bad("is longer than 253 bytes");
    }
    if name.contains('*') {
        return bad("has a `*` that is not the whole first label (`*.example.com`)");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return bad("has an empty label");
        }
        if label.len() > MAX_LABEL_LEN {
            return bad("has a label longer than 63 bytes");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return bad("may hold only letters, digits, `-`, `_` and dots");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return bad("has a label that starts or ends with `-`");
        }
    }
    // A numeric last label is how resolvers spell addresses (`127.1`, `0x7f.1`, `2130706433`):
    // refused, so an address cannot pass as a name.
    let last = name.rsplit('.').next().unwrap_or_default();
    if last.bytes().all(|b| b.is_ascii_digit())
        || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return bad("ends in a numeric label: neither a domain name nor a dotted IPv4 address");
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    #[test]
    fn names_are_canonical() {
        assert_eq!(host("Example.COM."), Host::Name("example.com".into()));
        assert_eq!(host("127.0.0.1"), Host::Ip("127.0.0.1".parse().unwrap()));
        assert_eq!(host("[::1]"), Host::Ip("::1".parse().unwrap()));
        assert_eq!(host("::1"), Host::Ip("::1".parse().unwrap()));
        assert_eq!(host("my_host.local"), Host::Name("my_host.local".into()));
        assert_eq!(host("[::1]").authority(443), "[::1]:443");
    }

    #[test]
    fn hostile_names_are_refused() {
        for bad in [
            "",
            ".",
            "a..b",
            "-a.com",
            "a-.com",
            "a b.com",
            "a@b.com",
            "a/b",
            "a:80",
            "ex\u{e4}mple.com",
            "127.1",
            "0x7f.1",
            "2130706433",
            "1.2.3.4.5",
            "[127.0.0.1]",
            "a\0.com",
            "*",
            "a.*.com",
            "*a.com",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(Host::parse(&format!("{}.com", "a".repeat(64))).is_err());
        assert!(Host::parse(&"a.".repeat(130)).is_err());
    }

    #[test]
    fn wildcards_match_below_only() {
        let p = Pattern::parse("*.Example.com").unwrap();
        assert!(p.matches(&host("a.example.com")));
        assert!(p.matches(&host("a.b.example.com")));
        assert!(!p.matches(&host("example.com")));
        assert!(!p.matches(&host("badexample.com")));
        assert!(!p.matches(&host("example.com.evil.net")));
        assert!(!p.matches(&host(".example.com".trim_start_matches('.'))));
        let exact = Pattern::parse("example.com").unwrap();
        assert!(exact.matches(&host("EXAMPLE.com.")));
        assert!(!exact.matches(&host("a.example.com")));
    }

    #[test]
    fn patterns_refuse_too_wide_or_malformed() {
        for bad in [
            "*",
            "*.com",
            "*.",
            "**.a.com",
            "*.*.a.com",
            "a.*",
            "*.a..com",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let e = Allowlist::parse(&["ok.com", "bad..com"]).unwrap_err();
        assert_eq!(e.0, 1);
        assert!(e.1.to_string().contains("bad..com"), "{}", e.1);
    }

    #[test]
    fn ip_literals_match_exactly() {
        let list = Allowlist::parse(&["203.0.113.7", "*.example.com"]).unwrap();
        assert!(list.allows(&host("203.0.113.7")));
        assert!(!list.allows(&host("203.0.113.8")));
        assert!(!Allowlist::default().allows(&host("example.com")));
    }
}
