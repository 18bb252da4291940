//! Names pinned to an address by the user (`--resolve NAME:PORT:ADDR`, JSON
//! `"resolve": {"NAME:PORT": "ADDR"}`): the proxy does not look a pinned name up, and trusts
//! its address, which may be loopback or private (pinning is how a user says so).
//!
//! A pin holds for one port, like curl's `--resolve HOST:PORT:ADDR`: a name pinned to
//! `127.0.0.1` to reach a local test server opens that server's port, not every port of the
//! host's loopback (its databases, the caller's own servers). A request for the name on another
//! port is decided as if there were no pin. The portless form (`NAME:ADDR`, `{"NAME": "ADDR"}`)
//! is kept for public addresses only, where it opens nothing an allowed name or address does
//! not already reach; for an internal address it is refused with the form to use instead.

use super::address::internal_class;
use super::domain::{Host, NameError};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Most pins one proxy holds.
pub const MAX_PINS: usize = 256;

/// The pins of one proxy: a name and port (or, for a public address, every port) to an
/// address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pins {
    /// Keyed by canonical name and port; `None`: every port (public addresses only).
    map: BTreeMap<(String, Option<u16>), IpAddr>,
}

impl Pins {
    /// Pins from `--resolve` texts: `NAME:PORT:ADDR`, or `NAME:ADDR` when ADDR is public;
    /// ADDR is dotted IPv4 or IPv6 in brackets (`[::1]`, as curl writes it: without them a
    /// colon of the address would read as the port's). The error carries the index of the
    /// first bad entry.
    pub fn parse_list<S: AsRef<str>>(entries: &[S]) -> Result<Pins, (usize, NameError)> {
        let mut pins = Pins::default();
        for (i, e) in entries.iter().enumerate() {
            pins.add_flag(e.as_ref()).map_err(|err| (i, err))?;
        }
        Ok(pins)
    }

    /// Adds one `--resolve` text.
    fn add_flag(&mut self, entry: &str) -> Result<(), NameError> {
        let bad = |reason: &str| Err(NameError::new(entry, reason));
        let Some((name, rest)) = entry.split_once(':') else {
            return bad("must be NAME:PORT:ADDR (`api.example.com:8080:127.0.0.1`)");
        };
        if entry.starts_with('[') {
            return bad("pins an address; pin a domain name");
        }
        if rest.parse::<Ipv6Addr>().is_ok() {
            return bad("has an IPv6 address without brackets; write NAME:PORT:[ADDR]");
        }
        let (port, addr) = match rest.split_once(':') {
            Some((p, a)) if !rest.starts_with('[') => (Some(p), a),
            _ => (None, rest),
        };
        let ip = match addr.strip_prefix('[').and_then(|a| a.strip_suffix(']')) {
            Some(inner) => inner.parse::<Ipv6Addr>().map(IpAddr::V6).ok(),
            None if addr.parse::<Ipv6Addr>().is_ok() => {
                return bad("has an IPv6 address without brackets; write NAME:PORT:[ADDR]")
            }
            None => addr.parse::<Ipv4Addr>().map(IpAddr::V4).ok(),
        };
        let Some(ip) = ip else {
            return Err(NameError::new(
                addr,
                "is not an IPv4 address or an IPv6 address in brackets",
            ));
        };
        self.insert(entry, name, port, ip)
    }

    /// Adds one JSON entry: `key` is `NAME:PORT` (or `NAME` when `addr` is public), `addr` an
    /// IPv4 or IPv6 address (brackets optional: a JSON value holds only the address).
    pub fn add(&mut self, key: &str, addr: &str) -> Result<(), NameError> {
        let (name, port) = match key.rsplit_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (key, None),
        };
        let unbracketed = addr
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(addr);
        let ip = unbracketed
            .parse::<IpAddr>()
            .map_err(|_| NameError::new(addr, "is not an IPv4 or IPv6 address"))?;
        self.insert(key, name, port, ip)
    }

    /// Checks and adds one pin; `shown` is the text the user gave, for errors.
    fn insert(
        &mut self,
        shown: &str,
        name: &str,
        port: Option<&str>,
        ip: IpAddr,
    ) -> Result<(), NameError> {
        let bad = |reason: String| Err(NameError::new(shown, reason));
        let Host::Name(name) = Host::parse(name)? else {
            return bad("pins an address; pin a domain name".to_string());
        };
        let port = match port.map(parse_port).transpose() {
            Ok(p) => p,
            Err(e) => return bad(e),
        };
        if port.is_none() {
            if let Some(class) = internal_class(ip) {
                return bad(format!(
                    "pins `{name}` to {ip}, a {class} address, for every port; a pin to an \
                     internal address must name the one port it opens"
                ));
            }
        }
        if self.map.len() >= MAX_PINS {
            return bad(format!("is one pin too many (at most {MAX_PINS})"));
        }
        match self.map.insert((name, port), ip) {
            Some(before) => bad(format!(
                "pins a name and port pinned already (to {before}); give each one address"
            )),
            None => Ok(()),
        }
    }

    /// The address `host` is pinned to for `port`: its pin for that port, else its
    /// every-port pin (a public address), else none.
    pub fn get(&self, host: &Host, port: u16) -> Option<IpAddr> {
        let Host::Name(n) = host else { return None };
        let at = |p: Option<u16>| self.map.get(&(n.clone(), p)).copied();
        at(Some(port)).or_else(|| at(None))
    }

    /// The ports `host` is pinned for (to say so when a request asks another).
    pub fn ports(&self, host: &Host) -> Vec<u16> {
        let Host::Name(n) = host else {
            return Vec::new();
        };
        self.map
            .keys()
            .filter(|(name, _)| name == n)
            .filter_map(|(_, p)| *p)
            .collect()
    }

    /// Whether no name is pinned.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many pins there are.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// A pin for every port of `name`, without the check that refuses one to an internal
    /// address: what the portless form meant before pins named their ports, for the tests
    /// that show what that opened.
    #[cfg(test)]
    pub(super) fn every_port_unchecked(name: &str, ip: IpAddr) -> Pins {
        let mut pins = Pins::default();
        pins.map.insert((name.to_string(), None), ip);
        pins
    }
}

/// A port as written in a pin: decimal digits only, 1 to 65535.
fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(format!(
            "has port `{}`; a port is a number from 1 to 65535",
            text.chars().take(20).collect::<String>().escape_debug()
        )),
    }
}

/// The pin that would let `host` reach `addr` on `port`, as a `--resolve` value
/// (`api.test:8080:127.0.0.1`, IPv6 in brackets).
pub fn flag_value(host: &str, port: u16, addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => format!("{host}:{port}:{a}"),
        IpAddr::V6(a) => format!("{host}:{port}:[{a}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_pin_holds_for_its_port_only() {
        let pins =
            Pins::parse_list(&["API.example.com:8080:127.0.0.1", "v6.test:443:[::1]"]).unwrap();
        let api = host("api.example.com");
        assert_eq!(pins.get(&api, 8080), Some(ip("127.0.0.1")));
        assert_eq!(pins.get(&api, 5432), None);
        assert_eq!(pins.ports(&api), vec![8080]);
        assert_eq!(pins.get(&host("v6.test"), 443), Some(ip("::1")));
        assert_eq!(pins.get(&host("v6.test"), 80), None);
        assert_eq!(pins.get(&host("127.0.0.1"), 8080), None);
        assert_eq!(pins.len(), 2);
    }

    #[test]
    fn the_portless_form_stays_for_public_addresses_only() {
        // Public: every port, as before; a port's own pin wins over it.
        let pins =
            Pins::parse_list(&["cdn.test:203.0.113.7", "cdn.test:8443:198.51.100.1"]).unwrap();
        assert_eq!(pins.get(&host("cdn.test"), 80), Some(ip("203.0.113.7")));
        assert_eq!(pins.get(&host("cdn.test"), 8443), Some(ip("198.51.100.1")));
        let mut json = Pins::default();
        json.add("cdn.test", "2606:4700::1111").unwrap();
        assert_eq!(json.get(&host("cdn.test"), 1), Some(ip("2606:4700::1111")));
        // Internal: refused, naming the form with a port.
        for (entry, class) in [
            ("a.test:127.0.0.1", "loopback"),
            ("a.test:[::1]", "loopback"),
            ("a.test:10.0.0.5", "private"),
            ("a.test:169.254.169.254", "cloud metadata"),
            ("a.test:[fe80::1]", "link-local"),
            ("a.test:[::ffff:192.168.1.1]", "private"),
        ] {
            let e = Pins::parse_list(&[entry]).unwrap_err().1.to_string();
            assert!(
                e.contains(class) && e.contains("must name the one port"),
                "{entry}: {e}"
            );
        }
        for addr in ["127.0.0.1", "::1", "[::1]", "192.168.0.1"] {
            let e = Pins::default().add("a.test", addr).unwrap_err().to_string();
            assert!(e.contains("must name the one port"), "{addr}: {e}");
        }
        let mut ok = Pins::default();
        ok.add("a.test:8080", "127.0.0.1").unwrap();
        ok.add("a.test:8443", "[::1]").unwrap();
        assert_eq!(ok.get(&host("a.test"), 8443), Some(ip("::1")));
    }

    #[test]
    fn hostile_flag_values_are_refused() {
        for bad in [
            "",
            "noaddr",
            "a.test:",
            "a.test:80:",
            ":80:1.2.3.4",
            "a.test::1.2.3.4",
            "a.test:0:127.0.0.1",
            "a.test:65536:127.0.0.1",
            "a.test:99999999999:127.0.0.1",
            "a.test:+80:127.0.0.1",
            "a.test:-1:127.0.0.1",
            "a.test: 80:127.0.0.1",
            "a.test:80: 127.0.0.1",
            " a.test:80:127.0.0.1",
            "a.test:80:127.0.0.1 ",
            "a.test:80:127.0.0.1\n",
            "a.test\n:80:127.0.0.1",
            "a.test:80:127.0.0.1\0",
            "a\0.test:80:127.0.0.1",
            "a.test:80:1.2.3",
            "a.test:80:localhost",
            "a.test:80:127.0.0.1:90",
            "a.test:1.2.3.4:80",
            "a.test:::1",
            "a.test:80:::1",
            "a.test:443:2001:db8::1",
            "a.test:2001:db8::1",
            "a.test:80:[127.0.0.1]",
            "a.test:80:[::1",
            "a.test:[::1]:80",
            "1.2.3.4:80:1.2.3.4",
            "[::1]:80:1.2.3.4",
            "*.a.test:80:1.2.3.4",
        ] {
            assert!(Pins::parse_list(&[bad]).is_err(), "{bad:?} was accepted");
        }
        let e = Pins::parse_list(&["a.test:443:2001:db8::1"])
            .unwrap_err()
            .1
            .to_string();
        assert!(e.contains("without brackets"), "{e}");
        let e = Pins::parse_list(&["a.test:0:127.0.0.1"])
            .unwrap_err()
            .1
            .to_string();
        assert!(e.contains("1 to 65535"), "{e}");
    }

    #[test]
    fn hostile_json_entries_are_refused() {
        for (key, addr) in [
            ("a.test:0", "127.0.0.1"),
            ("a.test:65536", "127.0.0.1"),
            ("a.test:", "127.0.0.1"),
            (":80", "127.0.0.1"),
            ("", "127.0.0.1"),
            ("a.test:80", ""),
            ("a.test:80", "localhost"),
            ("a.test:80", "127.0.0.1\n"),
            ("a.test:80", "127.0.0.1\0"),
            ("a.test:80 ", "127.0.0.1"),
            ("a test:80", "127.0.0.1"),
            ("a.test:80:90", "127.0.0.1"),
            ("[::1]:80", "127.0.0.1"),
            ("127.0.0.1:80", "127.0.0.1"),
        ] {
            assert!(
                Pins::default().add(key, addr).is_err(),
                "{key:?}: {addr:?} was accepted"
            );
        }
    }

    #[test]
    fn duplicates_and_too_many_pins_are_refused() {
        let e = Pins::parse_list(&["a.test:80:127.0.0.1", "A.test.:80:127.0.0.2"]).unwrap_err();
        assert_eq!(e.0, 1);
        assert!(e.1.to_string().contains("pinned already"), "{}", e.1);
        assert!(Pins::parse_list(&["a.test:80:127.0.0.1", "a.test:80:127.0.0.1"]).is_err());
        let mut json = Pins::default();
        json.add("a.test:80", "127.0.0.1").unwrap();
        assert!(json.add("A.TEST:80", "127.0.0.1").is_err());
        assert!(Pins::parse_list(&["a.test:80:127.0.0.1", "a.test:81:127.0.0.1"]).is_ok());
        let many: Vec<String> = (1..=MAX_PINS + 1)
            .map(|p| format!("a.test:{p}:127.0.0.1"))
            .collect();
        assert!(Pins::parse_list(&many[..MAX_PINS]).is_ok());
        let e = Pins::parse_list(&many).unwrap_err();
        assert_eq!(e.0, MAX_PINS);
        assert!(e.1.to_string().contains("at most 256"), "{}", e.1);
    }

    /// The finding and its control: a portless pin to loopback (what `NAME:ADDR` meant before
    /// pins named their ports) sends the name to every port of the host's loopback; a pin for
    /// one port leaves the others to resolution, which refuses the loopback answer.
    #[test]
    fn a_port_pin_closes_what_an_every_port_pin_opened() {
        use super::super::address::{resolve, Unreachable};
        let name = host("localhost");
        let old = Pins::every_port_unchecked("localhost", ip("127.0.0.1"));
        for port in [8080, 5432, 22] {
            assert_eq!(
                resolve(&name, port, old.get(&name, port)).unwrap(),
                vec![std::net::SocketAddr::new(ip("127.0.0.1"), port)],
                "control: the old pin reaches {port}"
            );
        }
        let new = Pins::parse_list(&["localhost:8080:127.0.0.1"]).unwrap();
        assert_eq!(
            resolve(&name, 8080, new.get(&name, 8080)).unwrap(),
            vec!["127.0.0.1:8080".parse().unwrap()]
        );
        for port in [5432, 22] {
            assert!(
                matches!(
                    resolve(&name, port, new.get(&name, port)),
                    Err(Unreachable::Internal {
                        class: "loopback",
                        ..
                    })
                ),
                "{port} reached through a pin for 8080"
            );
        }
    }

    #[test]
    fn flag_values_bracket_ipv6() {
        assert_eq!(
            flag_value("a.test", 80, ip("127.0.0.1")),
            "a.test:80:127.0.0.1"
        );
        assert_eq!(flag_value("a.test", 443, ip("::1")), "a.test:443:[::1]");
        for v in [
            flag_value("a.test", 80, ip("127.0.0.1")),
            flag_value("a.test", 443, ip("::1")),
        ] {
            assert!(Pins::parse_list(&[v.as_str()]).is_ok(), "{v}");
        }
    }
}
