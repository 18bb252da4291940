//! The server's fixed policy: `sandbox mcp`'s flags turned, once at start, into the exec
//! [`Request`] every tool call is a copy of.
//!
//! The flags are `sandbox run`'s (the same clap structs), so a command line moves between the
//! two. They are checked where they are read (paths, network, environment: the same checks
//! and messages as `run`) and then as a whole, by validating the template itself: a policy
//! that could not run refuses to start the server, naming the flag, instead of failing on
//! every call.

pub use crate::cli::McpArgs;
use crate::cli::{EnvArgs, NetArgs, PathArgs, PolicyArgs};
use crate::exec::{OnViolation, Request};
use crate::policy::Action;

/// The policy every tool call runs under.
#[derive(Clone, Debug)]
pub struct Policy {
    /// A request with every field but `argv`, `stdin` and `timeout_s` final.
    pub template: Request,
}

impl Policy {
    /// The policy these flags ask for, checked as a whole; `Err`: one line naming the flag.
    pub fn from_args(args: &McpArgs) -> Result<Policy, String> {
        // Checked first with `run`'s own wording (the flag and the reason).
        args.paths.rules()?;
        args.net.network()?;
        let mut req = Request::new(["/bin/true"]);
        policy_flags(&args.policy, &mut req)?;
        path_flags(&args.paths, &mut req);
        net_flags(&args.net, &mut req);
        env_flags(&args.env, &mut req)?;
        if let Some(t) = args.timeout {
            req.timeout_s = t as f64;
        }
        if let Some(m) = args.memory {
            req.limits.memory_bytes = Some(m);
        }
        // The working directory (and with it the default workspace of the profiles that
        // write) is the server's, fixed now: no call can move it.
        let cwd = std::env::current_dir()
            .map_err(|e| format!("the working directory: {e}"))?
            .into_os_string()
            .into_string()
            .map_err(|d| format!("the working directory {d:?} is not UTF-8"))?;
        req.cwd = Some(cwd);
        req.validate()
            .map_err(|r| format!("{}: {}", flag_of(&r.field), r.reason))?;
        // Some checks need the job planned (a broad workspace, a layer that is required but
        // missing here): one trial run of `/bin/true`, as `sandbox check` does, refuses such a
        // policy now rather than on every call.
        crate::exec::exec_for(
            &req,
            &crate::exec::RunOptions::default(),
            crate::exec::Audience::Cli,
        )
        .map_err(|e| format!("{}: {}", flag_of(e.field()), e.reason()))?;
        Ok(Policy { template: req })
    }

    /// One line on what every call gets, for the `initialize` result's instructions.
    pub fn summary(&self) -> String {
        let t = &self.template;
        format!(
            "Commands run under the sandbox's fixed policy: profile {}, workspace {}, network {}, \
             timeout {} s; a call cannot change it.",
            t.profile_file.as_deref().unwrap_or(&t.profile),
            t.workspace
                .as_deref()
                .unwrap_or("by profile (the working directory for profiles that write)"),
            t.network
                .map(|n| n.to_string())
                .unwrap_or_else(|| "by profile".to_string()),
            t.timeout_s
        )
    }
}

/// `--profile`, `--allow`, `--deny`, `--on-violation` and the rest of [`PolicyArgs`].
fn policy_flags(p: &PolicyArgs, req: &mut Request) -> Result<(), String> {
    if p.config.is_some() {
        return Err(
            "--config: sandbox mcp takes its policy from flags alone; give the \
                    file's settings as flags"
                .to_string(),
        );
    }
    if let Some(name) = &p.profile {
        if crate::policy::profile::Profile::builtin_names().any(|b| b == name) {
            req.profile = name.clone();
        } else {
            // A file; the request refuses a relative path, as `run`'s path flags do.
            req.profile_file = Some(name.clone());
        }
    }
    let entries = |list: &Option<String>| -> Vec<String> {
        list.iter()
            .flat_map(|l| l.split(':'))
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect()
    };
    req.allow = entries(&p.allow);
    req.deny = entries(&p.deny);
    req.on_violation = match p.on_violation {
        None | Some(Action::Errno(0)) => OnViolation::Report,
        Some(Action::Kill) | Some(Action::Trap) => OnViolation::Kill,
        Some(other) => {
            return Err(format!(
                "--on-violation {other}: sandbox mcp takes report or kill (each tool result \
                 names every refused call)"
            ))
        }
    };
    if let Some(s) = p.static_binary {
        req.static_binary = s;
    }
    req.require_sandbox = p.require_sandbox;
    req.allow_root = p.allow_root;
    Ok(())
}

/// The Landlock and namespace flags ([`PathArgs`]), already checked by `PathArgs::rules`.
fn path_flags(p: &PathArgs, req: &mut Request) {
    req.workspace = p.workspace.clone();
    req.allow_broad_workspace = p.allow_broad_workspace;
    req.writable_paths = p.allow_write.clone();
    req.deny_read = p.deny_read.clone();
    req.connect_ports = p.connect_ports.clone();
    req.landlock = p.landlock.unwrap_or_default();
    req.isolation = p.isolation.unwrap_or_default();
    req.read_only_paths = p.read_only.clone();
    req.allow_unix_sockets = p.allow_unix_socket.clone();
}

/// The network flags ([`NetArgs`]), already checked by `NetArgs::network`.
fn net_flags(n: &NetArgs, req: &mut Request) {
    req.network = n.network;
    req.allow_domains = n.allow_domain.clone();
    req.host_ports = n.allow_host_port.clone();
    for entry in &n.resolve {
        // NAME:PORT:ADDR or NAME:ADDR (an IPv6 address in brackets) becomes the request's
        // {"NAME:PORT": ADDR} or {"NAME": ADDR}.
        let Some((name, rest)) = entry.split_once(':') else {
            continue;
        };
        let (key, addr) = match rest.split_once(':') {
            Some((port, addr)) if !rest.starts_with('[') => (format!("{name}:{port}"), addr),
            _ => (name.to_string(), rest),
        };
        req.resolve.insert(key, addr.to_string());
    }
}

/// `--env NAME=VALUE` and `--keep-env NAME`, with `run`'s checks and wording. Unlike `run`,
/// the safe list keeps the exec request's fixed values (`HOME=/tmp`...): the caller of an MCP
/// server is a client program, not a user at a terminal whose settings a command expects.
fn env_flags(e: &EnvArgs, req: &mut Request) -> Result<(), String> {
    let shown = |s: &str| {
        format!(
            "`{}`",
            s.chars().take(64).collect::<String>().escape_debug()
        )
    };
    for name in &e.keep {
        let refused = |why: String| format!("--keep-env {}: {why}", shown(name));
        crate::exec::env::check_key(name).map_err(refused)?;
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_| refused("the caller's value is not UTF-8".into()))?;
        crate::exec::env::check(name, &value).map_err(refused)?;
        req.env.insert(name.clone(), value);
    }
    for pair in &e.set {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!(
                "--env {}: expected NAME=VALUE (FOO=bar)",
                shown(pair)
            ));
        };
        crate::exec::env::check(name, value)
            .map_err(|why| format!("--env {}: {why}", shown(name)))?;
        req.env.insert(name.to_string(), value.to_string());
    }
    Ok(())
}

/// The flag that set a request field, so that a refusal at start reads in the command
/// line's terms (`limits.memory_bytes` is `--memory`).
fn flag_of(field: &str) -> &'static str {
    if let Some(flag) = crate::cli::layer_flag(field) {
        return flag;
    }
    match field.split(['[', '.']).next().unwrap_or_default() {
        "profile" | "profile_file" => "--profile",
        "allow" => "--allow",
        "deny" => "--deny",
        "timeout_s" => "--timeout",
        "limits" => "--memory",
        "env" => "--env",
        "network" => "--network",
        "allow_domains" => "--allow-domain",
        "resolve" => "--resolve",
        "host_ports" => "--allow-host-port",
        "static_binary" => "--static-binary",
        "allow_root" => "--allow-root",
        "require_sandbox" => "--require-sandbox",
        "cwd" => "the working directory",
        _ => "sandbox mcp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut McpArgs)) -> Result<Policy, String> {
        let mut a = McpArgs::default();
        f(&mut a);
        Policy::from_args(&a)
    }

    #[test]
    fn flags_become_the_template() {
        let p = args(|a| {
            a.policy.profile = Some("shell".into());
            a.policy.allow = Some("socket::@network".into());
            a.timeout = Some(7);
            a.memory = Some(64 << 20);
            a.net.allow_domain = vec!["api.example.com".into()];
            a.net.resolve = vec!["api.example.com:8080:127.0.0.1".into()];
            a.env.set = vec!["A=b=c".into()];
        })
        .unwrap();
        let t = &p.template;
        assert_eq!(t.profile, "shell");
        assert_eq!(t.allow, ["socket", "@network"]);
        assert_eq!(t.timeout_s, 7.0);
        assert_eq!(t.limits.memory_bytes, Some(64 << 20));
        assert_eq!(t.resolve["api.example.com:8080"], "127.0.0.1");
        assert_eq!(t.env["A"], "b=c");
        assert!(t.cwd.as_deref().is_some_and(|c| c.starts_with('/')));
    }

    /// A change to the default flags, and the start of the refusal it must give.
    type Case = (Box<dyn FnOnce(&mut McpArgs)>, &'static str);

    #[test]
    fn bad_flags_are_refused_naming_the_flag() {
        let cases: Vec<Case> = vec![
            (Box::new(|a| a.timeout = Some(0)), "--timeout: "),
            (Box::new(|a| a.timeout = Some(86_401)), "--timeout: "),
            (Box::new(|a| a.memory = Some(1)), "--memory: "),
            (
                Box::new(|a| a.policy.profile = Some("no-such".into())),
                "--profile: ",
            ),
            (
                Box::new(|a| a.policy.config = Some("/x.json".into())),
                "--config: ",
            ),
            (
                Box::new(|a| a.policy.on_violation = Some(Action::Log)),
                "--on-violation log: ",
            ),
            (
                Box::new(|a| a.env.set = vec!["LD_PRELOAD=/x.so".into()]),
                "--env `LD_PRELOAD`: ",
            ),
            (
                Box::new(|a| a.env.set = vec!["NOEQ".into()]),
                "--env `NOEQ`: ",
            ),
            (
                Box::new(|a| a.paths.workspace = Some("relative".into())),
                "--workspace: ",
            ),
            (
                Box::new(|a| a.paths.allow_write = vec!["/tmp/a\nb".into()]),
                "--allow-write: ",
            ),
            (
                Box::new(|a| a.net.allow_domain = vec!["".into()]),
                "--allow-domain: ",
            ),
            (
                Box::new(|a| {
                    a.policy.profile = Some("shell".into());
                    a.paths.workspace = Some("/".into());
                }),
                "--workspace: ",
            ),
        ];
        for (f, want) in cases {
            let e = args(f).unwrap_err();
            assert!(e.starts_with(want), "{want}: {e}");
            // The flag replaces the field's name, it does not precede it.
            assert!(!e.contains("workspace: workspace"), "{e}");
        }
    }
}
