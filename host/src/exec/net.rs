//! The network layer of a job: which mode it runs in, the listeners its network namespace
//! needs (the proxy's, one per host port), the variables that point its clients at the
//! proxy, and, once it runs, the proxy and relays the host serves on those listeners. See
//! `crate::network` for the modes and docs/isolation.md for what each stops.

use crate::network::{proxy_env, proxy_env_names, Mode, Network};
use crate::proxy::{Config, Destination, Proxy};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::os::fd::OwnedFd;

/// What the job's network will be, decided before it starts.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The mode carried out.
    pub mode: Mode,
    /// Listeners to create inside the network namespace: the proxy's first (in `proxy`
    /// mode), then one per host port.
    pub listen: Vec<SocketAddrV4>,
    /// The proxy's port inside (`proxy` mode).
    pub proxy_port: Option<u16>,
}

impl Plan {
    /// Decides the mode: as asked, else from the profile and the machine. `unavailable` says
    /// why network namespaces cannot be made here, if they cannot; `isolated` whether the job
    /// runs in the namespace layer. Without it (`isolation off`, or namespaces unavailable)
    /// the default is the host's network: a network namespace alone would put the program
    /// under an init that is not PID 1 and ends nothing, so without a writable cgroup its
    /// background processes could outlive it. An explicit `none` or `proxy` still gets one.
    pub(crate) fn new(
        net: &Network,
        profile_allows_sockets: bool,
        unavailable: Option<&str>,
        isolated: bool,
    ) -> Result<Plan, crate::refusal::Refusal> {
        let mode = net.effective_mode(profile_allows_sockets, unavailable.is_none() && isolated);
        if let (true, Some(why)) = (mode.isolates(), unavailable) {
            // Asked for explicitly: the protection cannot be given, so nothing runs.
            return Err(crate::refusal::Refusal::new(
                "network",
                format!(
                    "{mode} needs a network namespace, which this machine cannot create: {why}"
                ),
            ));
        }
        let mut listen = Vec::new();
        let proxy_port = (mode == Mode::Proxy).then(|| net.proxy_port());
        if let Some(p) = proxy_port {
            listen.push(SocketAddrV4::new(Ipv4Addr::LOCALHOST, p));
        }
        if mode.isolates() {
            for p in &net.host_ports {
                listen.push(SocketAddrV4::new(Ipv4Addr::LOCALHOST, *p));
            }
        }
        Ok(Plan {
            mode,
            listen,
            proxy_port,
        })
    }

    /// The proxy's variables for the job (`proxy` mode), which replace its own.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        self.proxy_port.map(proxy_env).unwrap_or_default()
    }

    /// Whether the job's own variable `key` is passed on: proxy settings are dropped under
    /// `none` and `proxy` (what they name is not reachable from the namespace).
    pub(crate) fn keeps(&self, key: &str) -> bool {
        self.mode == Mode::Host || !proxy_env_names().contains(&key)
    }

    /// The namespaces the mode needs (a user namespace, which makes the others possible
    /// without privileges, and a network namespace with loopback up).
    pub(crate) fn namespaces(&self) -> Option<super::namespaces::Namespaces> {
        self.mode.isolates().then(|| super::namespaces::Namespaces {
            net: true,
            ..Default::default()
        })
    }
}

/// The network probe's answer, once it has run in this process.
static PROBE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// What a job plans with: a network namespace is presumed to work until the probe says
/// otherwise (see `isolation::presumed_unavailable`: the spawn's `clone3` is the test).
pub(crate) fn presumed_unavailable() -> Option<String> {
    PROBE.get().cloned().flatten()
}

/// Why this machine cannot create a network namespace in a user namespace, if it cannot
/// (probed once per process by the namespace layer's probe: a forked child tries `unshare`).
pub(crate) fn unavailable() -> Option<String> {
    PROBE
        .get_or_init(|| {
            crate::sys::unshare_probe(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)
                .err()
                .map(|e| format!("user and network namespaces: {e}"))
        })
        .clone()
}

/// The proxy and relays of a running job; dropping it stops them.
pub(crate) struct Running {
    proxy: Proxy,
    plan: Plan,
    host_ports: Vec<u16>,
}

impl Running {
    /// Serves the proxy and the host-port relays on the listeners the namespace holds
    /// (in the order of `Plan::listen`).
    pub(crate) fn start(
        plan: &Plan,
        net: &Network,
        listeners: Vec<OwnedFd>,
    ) -> std::io::Result<Option<Running>> {
        if !plan.mode.isolates() {
            return Ok(None);
        }
        let proxy = Proxy::new(Config::new(net.allow.clone(), net.pins.clone(), net.naming));
        let mut fds = listeners.into_iter();
        if plan.proxy_port.is_some() {
            let fd = fds
                .next()
                .ok_or_else(|| std::io::Error::other("the proxy's listener is missing"))?;
            proxy.serve(TcpListener::from(fd))?;
        }
        for p in &net.host_ports {
            let fd = fds
                .next()
                .ok_or_else(|| std::io::Error::other("a host port's listener is missing"))?;
            let to = SocketAddr::from((Ipv4Addr::LOCALHOST, *p));
            proxy.relay(TcpListener::from(fd), to)?;
        }
        Ok(Some(Running {
            proxy,
            plan: plan.clone(),
            host_ports: net.host_ports.clone(),
        }))
    }

    /// Has each connection's destinations recorded for whoever `owners` says made it too.
    pub(crate) fn attribute(&self, owners: std::sync::Arc<super::net_owners::Owners>) {
        self.proxy.attribute(owners);
    }

    /// Stops serving and reports what was tried.
    pub(crate) fn finish(&self) -> Report {
        self.proxy.stop();
        Report {
            mode: self.plan.mode,
            proxy: self.plan.proxy_port.map(|p| format!("127.0.0.1:{p}")),
            host_ports: self.host_ports.clone(),
            destinations: self.proxy.destinations(),
            destinations_dropped: self.proxy.destinations_dropped(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.proxy.stop();
    }
}

/// The network part of a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The mode the program ran in.
    pub mode: Mode,
    /// The proxy's address inside (`proxy` mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// Host ports reachable inside.
    pub host_ports: Vec<u16>,
    /// Every destination tried through the proxy or a host port, in the order first seen.
    pub destinations: Vec<Destination>,
    /// Attempts at new destinations beyond the record's capacity.
    pub destinations_dropped: u64,
}

impl Report {
    /// The session's mode with nothing recorded (a session command's report starts from it).
    pub(crate) fn of_mode(mode: Mode) -> Report {
        Report {
            mode,
            ..Report::host()
        }
    }

    /// The report of a job that ran with the host's network.
    pub(crate) fn host() -> Report {
        Report {
            mode: Mode::Host,
            proxy: None,
            host_ports: Vec::new(),
            destinations: Vec::new(),
            destinations_dropped: 0,
        }
    }
}
