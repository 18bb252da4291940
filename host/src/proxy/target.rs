//! Where a proxy request wants to go: the authority of `CONNECT host:port`, or the host, port
//! and path of an absolute `http://` URI.

use super::domain::Host;

/// A parsed destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The host.
    pub host: Host,
    /// The TCP port.
    pub port: u16,
    /// The origin-form path and query sent upstream (`/` when the URI has none); empty for
    /// `CONNECT`.
    pub path: String,
}

impl Target {
    /// The `Host` header value for this target (the port only when it is not 80).
    pub fn host_header(&self) -> String {
        let a = self.host.authority(self.port);
        if self.port == 80 {
            a.strip_suffix(":80").unwrap_or(&a).to_string()
        } else {
            a
        }
    }
}

/// Parses the target of `CONNECT`: `host:port`, IPv6 in brackets.
pub fn connect(target: &str) -> Result<Target, String> {
    let (host, port) = split_authority(target)?;
    let Some(port) = port else {
        return Err(format!("CONNECT target `{}` has no port", shown(target)));
    };
    Ok(Target {
        host,
        port,
        path: String::new(),
    })
}

/// Parses an absolute `http://` URI. `https://` and other schemes are refused (HTTPS goes
/// through `CONNECT`), and so is an origin-form target (`/path`): this is a proxy.
pub fn absolute(target: &str) -> Result<Target, String> {
    let Some(colon) = target.find("://") else {
        return Err(format!(
            "`{}` is not an absolute URI; this is a proxy: send `GET http://host/path` or use CONNECT",
            shown(target)
        ));
    };
    let scheme = &target[..colon];
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!(
            "scheme `{}` is not forwarded; the proxy forwards http:// and tunnels anything else with CONNECT",
            shown(scheme)
        ));
    }
    let rest = &target[colon + 3..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err("credentials in the URI are not forwarded".to_string());
    }
    let (host, port) = split_authority(authority)?;
    let tail = tail.split('#').next().unwrap_or_default();
    let path = match tail.chars().next() {
        None => "/".to_string(),
        Some('?') => format!("/{tail}"),
        Some(_) => tail.to_string(),
    };
    Ok(Target {
        host,
        port: port.unwrap_or(80),
        path,
    })
}

fn split_authority(a: &str) -> Result<(Host, Option<u16>), String> {
    let (host, port) = if a.starts_with('[') {
        match a.find(']') {
            Some(i) => (&a[..=i], a[i + 1..].strip_prefix(':')),
            None => return Err(format!("`{}` has an unclosed `[`", shown(a))),
        }
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(format!("`{}` has an invalid port", shown(a))),
        },
    };
    let host = Host::parse(host).map_err(|e| format!("host {e}"))?;
    Ok((host, port))
}

fn shown(s: &str) -> String {
    let mut t: String = s.chars().take(80).collect();
    if t.len() < s.len() {
        t.push_str("...");
    }
    t.escape_debug().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_uris() {
        let t = absolute("http://Example.com/a/b?c=1#frag").unwrap();
        assert_eq!(t.host, Host::Name("example.com".into()));
        assert_eq!((t.port, t.path.as_str()), (80, "/a/b?c=1"));
        assert_eq!(t.host_header(), "example.com");
        let t = absolute("HTTP://[::1]:8080?x").unwrap();
        assert_eq!((t.port, t.path.as_str()), (8080, "/?x"));
        assert_eq!(t.host_header(), "[::1]:8080");
        assert_eq!(absolute("http://a.com").unwrap().path, "/");
        for bad in [
            "/index.html",
            "https://a.com/",
            "ftp://a.com/",
            "http://user:pw@a.com/",
            "http://a.com:0/",
            "http://a.com:99999/",
            "http://a.com:+80/",
            "http://a b.com/",
            "http:///x",
            "http://[::1/",
        ] {
            assert!(absolute(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn connect_targets() {
        let t = connect("a.example.com:443").unwrap();
        assert_eq!(
            (t.host.to_string().as_str(), t.port),
            ("a.example.com", 443)
        );
        assert_eq!(connect("[2001:db8::1]:443").unwrap().port, 443);
        for bad in [
            "a.com",
            "a.com:",
            "a.com:https",
            ":443",
            "[::1]",
            "a.com:443:1",
        ] {
            assert!(connect(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
