//! Network modes: what a sandboxed program may reach, as asked by `--network` / JSON
//! `network` and the proxy's options, validated into one value the engine carries out.
//!
//! - `host`: the host's network, as the profile's filter and Landlock allow.
//! - `none`: a new network namespace with loopback only.
//! - `proxy`: a new network namespace whose only way out is the host's allowlist proxy,
//!   reached inside at `127.0.0.1:PROXY_PORT` (the variables in [`proxy_env`] point there).
//!
//! In `none` and `proxy`, `host_ports` makes ports of the host's own loopback reachable at the
//! same address inside. When `network` is absent, `allow_domains` implies `proxy` and
//! `host_ports` alone implies `none`; otherwise the engine picks `none` for profiles that
//! refuse sockets (when namespaces are available) and `host` for the others.

use crate::proxy::{Allowlist, Naming, Pins};
use crate::refusal::Refusal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The port the proxy listens on inside a sandbox's network namespace (the namespace is new,
/// so the port is always free); the next free one when a host port takes it.
pub const PROXY_PORT: u16 = 3128;
/// Most entries in `allow_domains`.
pub const MAX_DOMAINS: usize = 256;
/// Most entries in `resolve` (the proxy's own limit on pins).
pub const MAX_PINS: usize = crate::proxy::MAX_PINS;
/// Most entries in `host_ports`.
pub const MAX_HOST_PORTS: usize = 32;

/// What the program's network is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The host's network.
    Host,
    /// Loopback only, in a network namespace of its own.
    None,
    /// Only the allowlist proxy, from a network namespace of its own.
    Proxy,
}

impl Mode {
    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Host => "host",
            Mode::None => "none",
            Mode::Proxy => "proxy",
        }
    }

    /// Whether the mode needs a network namespace.
    pub fn isolates(self) -> bool {
        self != Mode::Host
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "host" => Ok(Mode::Host),
            "none" => Ok(Mode::None),
            "proxy" => Ok(Mode::Proxy),
            _ => Err(format!(
                "unknown network mode `{}` (host, none or proxy)",
                s.escape_debug()
            )),
        }
    }
}

/// The validated network request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Network {
    /// The mode asked for, or implied by the other options; `None`: the engine decides from
    /// the profile and the machine.
    pub mode: Option<Mode>,
    /// Domains the proxy lets through.
    pub allow: Allowlist,
    /// Names pinned to addresses for the proxy, each for one port.
    pub pins: Pins,
    /// Ports of the host's loopback reachable inside (sorted, no duplicates).
    pub host_ports: Vec<u16>,
    /// How the proxy's refusals name options.
    pub naming: Naming,
}

impl Default for Network {
    fn default() -> Network {
        Network {
            mode: None,
            allow: Allowlist::default(),
            pins: Pins::default(),
            host_ports: Vec::new(),
            naming: Naming::Fields,
        }
    }
}

impl Network {
    /// Validates the request fields (`network`, `allow_domains`, `resolve`, `host_ports`);
    /// refusals name the field (`allow_domains[2]`, `resolve.NAME:PORT`).
    pub fn from_fields(
        mode: Option<Mode>,
        allow_domains: &[String],
        resolve: &BTreeMap<String, String>,
        host_ports: &[u16],
    ) -> Result<Network, Refusal> {
        if resolve.len() > MAX_PINS {
            return Err(Refusal::new("resolve", format!("at most {MAX_PINS} pins")));
        }
        let mut pins = Pins::default();
        for (key, addr) in resolve {
            pins.add(key, addr).map_err(|e| {
                Refusal::new(
                    format!("resolve.{}", key.escape_debug()),
                    format!(
                        "{e}; expected \"NAME:PORT\": \"ADDRESS\" (\"api.example.com:8080\": \"127.0.0.1\")"
                    ),
                )
            })?;
        }
        Network::new(mode, allow_domains, pins, host_ports, Naming::Fields)
    }

    /// Validates the parts; `pins` are already parsed. Refusals use the request field names.
    pub fn new(
        mode: Option<Mode>,
        allow_domains: &[String],
        pins: Pins,
        host_ports: &[u16],
        naming: Naming,
    ) -> Result<Network, Refusal> {
        if allow_domains.len() > MAX_DOMAINS {
            return Err(Refusal::new(
                "allow_domains",
                format!("at most {MAX_DOMAINS} entries"),
            ));
        }
        let allow = Allowlist::parse(allow_domains)
            .map_err(|(i, e)| Refusal::new(format!("allow_domains[{i}]"), e.to_string()))?;
        if host_ports.len() > MAX_HOST_PORTS {
            return Err(Refusal::new(
                "host_ports",
                format!("at most {MAX_HOST_PORTS} ports"),
            ));
        }
        if host_ports.contains(&0) {
            return Err(Refusal::new(
                "host_ports",
                "each port must be between 1 and 65535",
            ));
        }
        let mut ports = host_ports.to_vec();
        ports.sort_unstable();
        ports.dedup();
        let implied = if !allow_domains.is_empty() {
            Some(Mode::Proxy)
        } else if !ports.is_empty() {
            Some(Mode::None)
        } else {
            None
        };
        let mode = mode.or(implied);
        match mode {
            Some(Mode::Host) | Some(Mode::None) if !allow_domains.is_empty() => {
                return Err(Refusal::new(
                    "allow_domains",
                    format!(
                        "applies only with network proxy, not {}",
                        mode.unwrap_or(Mode::Host)
                    ),
                ))
            }
            Some(Mode::Host) | Some(Mode::None) if !pins.is_empty() => {
                return Err(Refusal::new(
                    "resolve",
                    format!(
                        "applies only with network proxy, not {}",
                        mode.unwrap_or(Mode::Host)
                    ),
                ))
            }
            None if !pins.is_empty() => {
                return Err(Refusal::new(
                    "resolve",
                    "applies only with network proxy (and allow_domains)",
                ))
            }
            Some(Mode::Host) if !ports.is_empty() => {
                return Err(Refusal::new(
                    "host_ports",
                    "applies only with network none or proxy (with host, the whole network is reachable)",
                ))
            }
            _ => {}
        }
        Ok(Network {
            mode,
            allow,
            pins,
            host_ports: ports,
            naming,
        })
    }

    /// The mode the engine carries out: the one asked for, else `none` for profiles that
    /// refuse sockets where namespaces are available, else `host`.
    pub fn effective_mode(&self, profile_allows_sockets: bool, namespaces: bool) -> Mode {
        match self.mode {
            Some(m) => m,
            None if !profile_allows_sockets && namespaces => Mode::None,
            None => Mode::Host,
        }
    }

    /// `profile`, adjusted for the mode: with `proxy`, the `@network` group joins an allow
    /// list (the program must open a TCP socket to reach the proxy; the network namespace,
    /// not the filter, is then the boundary). With `none` asked for, and with `proxy`, a
    /// profile that runs programs also loses its own socket refusals ([`own_network`]): the
    /// job's sockets reach only its own loopback (and the proxy). Other modes leave the profile as it is. `unix_guarded`: the host can check
    /// the job's unix socket connects ([`own_network`]).
    pub fn guard(
        &self,
        profile: sandbox_policy::profile::Profile,
        unix_guarded: bool,
    ) -> Result<sandbox_policy::profile::Profile, sandbox_policy::profile::ProfileError> {
        match self.mode {
            // The same namespace is the boundary under `proxy` as under `none`: a shell gets its
            // own loopback's sockets there too (a session that fetched with a registry preset
            // runs its tests in it).
            Some(Mode::Proxy) => own_network(profile, unix_guarded)?.with_allow("@network"),
            Some(Mode::None) => own_network(profile, unix_guarded),
            _ => Ok(profile),
        }
    }

    /// The proxy's port inside: [`PROXY_PORT`], or the next one no host port takes.
    pub fn proxy_port(&self) -> u16 {
        let mut p = PROXY_PORT;
        while self.host_ports.contains(&p) {
            p += 1;
        }
        p
    }
}

/// The profile of a job that runs programs (its allow list has `@exec`: a shell) in a
/// network namespace of its own with nothing but loopback (`network: none`, asked for: the
/// mode is refused where no network namespace can be made, so it never runs on the host's
/// network): the `@network` group is allowed and the profile's own refusals of socket
/// families are dropped, so local servers, `multiprocessing` managers and test fixtures work
/// as they do outside. A refusal the request added itself stays (only entries of the built-in
/// profile's own deny list are dropped). Unix sockets stay refused (named) where the
/// host cannot check their connects (`unix_guarded` false: no descriptor can be taken from the
/// job, as under Docker's default seccomp profile), since a pathname unix socket reaches the
/// host's services whatever the network namespace. Any other profile is returned unchanged.
pub fn own_network(
    profile: sandbox_policy::profile::Profile,
    unix_guarded: bool,
) -> Result<sandbox_policy::profile::Profile, sandbox_policy::profile::ProfileError> {
    let has = |entry: &str| {
        profile
            .allow()
            .is_some_and(|a| a.iter().any(|e| e == entry))
    };
    if !has("@exec") || has("@network") {
        return Ok(profile);
    }
    let call = |e: &str| e.split(['(', '=']).next().unwrap_or(e).trim().to_string();
    let network: Vec<String> = sandbox_policy::groups::find("network")
        .map(|g| g.entries.iter().map(|e| call(e)).collect())
        .unwrap_or_default();
    let defined: Vec<String> = sandbox_policy::profile::Profile::builtin(profile.name())
        .map(|b| b.deny().to_vec())
        .unwrap_or_default();
    let drop: Vec<String> = profile
        .deny()
        .iter()
        .filter(|d| defined.contains(d) && network.contains(&call(d)))
        .cloned()
        .collect();
    let p = profile.with_allow("@network")?.without_denies(&drop)?;
    if unix_guarded {
        Ok(p)
    } else {
        p.with_deny("socket(a0 == AF_UNIX)")
    }
}

/// The variables that send a program's HTTP clients to the proxy at `127.0.0.1:port`: the
/// conventional ones in both cases (curl reads only lowercase `http_proxy`), and those of
/// tools that read their own (npm, yarn, pip, cargo, Node's built-in fetch). Loopback is
/// excluded, so host ports are reached directly.
pub fn proxy_env(port: u16) -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let no = "localhost,127.0.0.1,::1".to_string();
    let mut v: Vec<(&'static str, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "PIP_PROXY",
        "CARGO_HTTP_PROXY",
    ]
    .into_iter()
    .map(|k| (k, url.clone()))
    .collect();
    v.push(("NO_PROXY", no.clone()));
    v.push(("no_proxy", no.clone()));
    v.push(("npm_config_noproxy", no));
    v.push(("NODE_USE_ENV_PROXY", "1".to_string()));
    v
}

/// Names of every variable [`proxy_env`] sets (replaced in a job's own environment under
/// `proxy` and removed under `none`, so that an inherited setting points nowhere else).
pub fn proxy_env_names() -> Vec<&'static str> {
    proxy_env(PROXY_PORT).into_iter().map(|(k, _)| k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_asked_for_lets_a_shell_use_its_own_namespaces_sockets() {
        use sandbox_policy::profile::Profile;
        use sandbox_policy::{Action, NATIVE};
        let socket = NATIVE.syscall_number("socket").unwrap();
        let decide = |p: &Profile, family: i32, kind: i32| {
            let policy = p.policy(NATIVE, None).unwrap().unwrap();
            policy.decide(socket, &[family as u64, kind as u64, 0, 0, 0, 0])
        };
        let shell = Profile::builtin("shell").unwrap();
        // Control: the profile as it is refuses unix, IPv6 and datagram sockets.
        for (family, kind) in [
            (libc::AF_UNIX, libc::SOCK_STREAM),
            (libc::AF_INET6, libc::SOCK_STREAM),
            (libc::AF_INET, libc::SOCK_DGRAM),
        ] {
            assert_eq!(
                decide(&shell, family, kind),
                Action::Errno(libc::EACCES as u16)
            );
        }
        let none = Network {
            mode: Some(Mode::None),
            ..Network::default()
        };
        let own = none.guard(shell.clone(), true).unwrap();
        for (family, kind) in [
            (libc::AF_UNIX, libc::SOCK_STREAM),
            (libc::AF_INET6, libc::SOCK_STREAM),
            (libc::AF_INET, libc::SOCK_DGRAM),
            (libc::AF_INET, libc::SOCK_STREAM),
        ] {
            assert_eq!(decide(&own, family, kind), Action::Allow, "{family}/{kind}");
        }
        // Raw and packet sockets stay out; the hardening rules stay.
        assert_ne!(decide(&own, libc::AF_PACKET, libc::SOCK_RAW), Action::Allow);
        assert!(own.deny().iter().any(|d| d == "@hardening"));
        // Unix sockets stay refused where their connects cannot be checked, by a rule of the
        // profile's default action (the supervisor names it), not a silent errno.
        let unguarded = none.guard(shell.clone(), false).unwrap();
        assert_eq!(
            decide(&unguarded, libc::AF_UNIX, libc::SOCK_STREAM),
            shell.default_action()
        );
        assert_eq!(
            decide(&unguarded, libc::AF_INET6, libc::SOCK_STREAM),
            Action::Allow
        );
        // A refusal the request added itself stays.
        let asked = shell.extended(&[], &["socket".to_string()]).unwrap();
        let kept = none.guard(asked, true).unwrap();
        assert_ne!(
            decide(&kept, libc::AF_INET, libc::SOCK_STREAM),
            Action::Allow
        );
        // Under `proxy` a shell gets the same; a profile that runs no programs gets @network.
        let proxy = Network {
            mode: Some(Mode::Proxy),
            ..Network::default()
        };
        let p = proxy.guard(shell.clone(), true).unwrap();
        assert_eq!(decide(&p, libc::AF_UNIX, libc::SOCK_STREAM), Action::Allow);
        let m = proxy
            .guard(Profile::builtin("minimal").unwrap(), true)
            .unwrap();
        assert_eq!(decide(&m, libc::AF_INET, libc::SOCK_STREAM), Action::Allow);
        // A profile that runs no programs, and the default mode, are left as they are.
        let minimal = Profile::builtin("minimal").unwrap();
        assert_eq!(none.guard(minimal.clone(), true).unwrap(), minimal);
        assert_eq!(
            Network::default().guard(shell.clone(), true).unwrap(),
            shell
        );
    }

    fn fields(
        mode: Option<Mode>,
        allow: &[&str],
        resolve: &[(&str, &str)],
        ports: &[u16],
    ) -> Result<Network, Refusal> {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        let resolve = resolve
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Network::from_fields(mode, &allow, &resolve, ports)
    }

    #[test]
    fn modes_are_implied_by_the_options() {
        assert_eq!(fields(None, &[], &[], &[]).unwrap().mode, None);
        assert_eq!(
            fields(None, &["a.com"], &[], &[]).unwrap().mode,
            Some(Mode::Proxy)
        );
        assert_eq!(
            fields(None, &[], &[], &[5432]).unwrap().mode,
            Some(Mode::None)
        );
        let n = fields(
            Some(Mode::Proxy),
            &[],
            &[("a.com:8080", "127.0.0.1")],
            &[3128, 80, 80],
        )
        .unwrap();
        assert_eq!(
            (n.host_ports.clone(), n.proxy_port()),
            (vec![80, 3128], 3129)
        );
        let d = Network::default();
        assert_eq!(d.effective_mode(false, true), Mode::None);
        assert_eq!(d.effective_mode(false, false), Mode::Host);
        assert_eq!(d.effective_mode(true, true), Mode::Host);
    }

    #[test]
    fn hostile_fields_are_refused_by_name() {
        let field = |r: Result<Network, Refusal>| r.unwrap_err().field;
        assert_eq!(
            field(fields(None, &["ok.com", "bad..com"], &[], &[])),
            "allow_domains[1]"
        );
        assert_eq!(field(fields(None, &["*"], &[], &[])), "allow_domains[0]");
        assert_eq!(
            field(fields(None, &["a.com"], &[("x.com", "nope")], &[])),
            "resolve.x.com"
        );
        assert_eq!(
            field(fields(None, &["a.com"], &[("1.2.3.4", "1.2.3.4")], &[])),
            "resolve.1.2.3.4"
        );
        // A pin to an internal address names its port; a port is 1 to 65535.
        assert_eq!(
            field(fields(None, &["a.com"], &[("x.com", "127.0.0.1")], &[])),
            "resolve.x.com"
        );
        assert_eq!(
            field(fields(None, &["a.com"], &[("x.com:0", "127.0.0.1")], &[])),
            "resolve.x.com:0"
        );
        assert_eq!(
            field(fields(
                None,
                &["a.com"],
                &[("x.com\n:80", "127.0.0.1")],
                &[]
            )),
            "resolve.x.com\\n:80"
        );
        let many: Vec<(String, String)> = (1..=MAX_PINS as u16 + 1)
            .map(|p| (format!("x.com:{p}"), "127.0.0.1".to_string()))
            .collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(field(fields(None, &["a.com"], &many, &[])), "resolve");
        assert!(fields(None, &["a.com"], &many[..MAX_PINS], &[]).is_ok());
        assert_eq!(field(fields(None, &[], &[], &[0])), "host_ports");
        assert_eq!(
            field(fields(Some(Mode::Host), &["a.com"], &[], &[])),
            "allow_domains"
        );
        assert_eq!(
            field(fields(Some(Mode::None), &["a.com"], &[], &[])),
            "allow_domains"
        );
        assert_eq!(
            field(fields(Some(Mode::Host), &[], &[], &[80])),
            "host_ports"
        );
        assert_eq!(
            field(fields(None, &[], &[("a.com", "1.2.3.4")], &[])),
            "resolve"
        );
        let many: Vec<u16> = (1..=40).collect();
        assert_eq!(
            field(fields(Some(Mode::None), &[], &[], &many)),
            "host_ports"
        );
        assert!("proxy ".parse::<Mode>().is_err());
        assert_eq!("none".parse::<Mode>(), Ok(Mode::None));
    }

    #[test]
    fn proxy_variables_cover_both_cases_and_tools() {
        let env = proxy_env(3128);
        for k in [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
            "npm_config_https_proxy",
            "PIP_PROXY",
            "YARN_HTTPS_PROXY",
        ] {
            assert!(env.iter().any(|(n, _)| *n == k), "{k} missing");
        }
        assert!(env
            .iter()
            .any(|(k, v)| *k == "https_proxy" && v == "http://127.0.0.1:3128"));
    }
}
