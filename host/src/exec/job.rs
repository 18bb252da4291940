//! One job, planned and then started. Planning asks the machine's probes which tier it allows
//! and has each layer say its part (the filter and its listener, Landlock's paths, the view
//! and namespaces, the network mode, limits and cgroups, the job's streams); nothing runs
//! until [`Job::spawn`] makes the child with all of them and starts the host's side (the
//! proxy, the supervisor).

use super::contain::{Group, Mechanism};
use super::limits::MemoryBound;
use super::notify::{MainProgram, Notifier, Registration, Response};
use super::options::RunOptions;
#[cfg(target_arch = "x86_64")]
use super::options::StartFrom;
use super::record::Recorder;
use super::request::{OnViolation, Refusal, Streams, Validated};
use super::result::{ExecError, Step};
use super::spawn::{self, Init, SpawnError, Spec};
#[cfg(target_arch = "x86_64")]
use super::spawner::Spawner;
use crate::platform::delegable;
use crate::policy::Action;
use crate::report::ReportPipe;
#[cfg(target_arch = "x86_64")]
use crate::sandbox::Sandboxed;
use crate::sandbox::{Plan, Sandbox};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// A job planned for this machine: every layer's part, and what the host keeps for the run.
pub(super) struct Job {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    /// The directory the program changes to by name after the mounts, when it had none.
    here_c: Option<CString>,
    /// The working directory the job was planned from.
    pub(super) here: PathBuf,
    /// The filter's plan: which filter, whether it notifies, the preload's variables.
    pub(super) plan: Plan,
    #[cfg(target_arch = "x86_64")]
    spawner: Option<&'static Spawner>,
    /// The warning a workspace allowed although broad leaves.
    pub(super) broad: Option<String>,
    /// Landlock's paths, when the layer is on.
    pub(super) layer: Option<super::paths::Layer>,
    /// Files changed from here on are the run's (the file-size check of `hits`).
    pub(super) started_at: SystemTime,
    /// How the supervisor answers refused calls.
    pub(super) response: Response,
    /// The namespace layer, or why there is none (empty: off).
    pub(super) isolation: Result<super::isolation::Layer, String>,
    /// The repository's control files, checked after the job (module `git_guard`).
    pub(super) git_guard: Option<super::git_guard::Guard>,
    /// The warning a root job below the isolated tier carries.
    pub(super) root_warning: Vec<String>,
    /// The network mode's plan.
    pub(super) net: super::net::Plan,
    /// The namespaces the child gets, the network's included.
    pub(super) namespaces: Option<super::spawn::Namespaces>,
    /// The preload's report pipe and the child's copy of its writer.
    report: Option<(ReportPipe, OwnedFd)>,
    limits: Vec<(libc::c_int, libc::rlimit)>,
    /// `sandbox run`'s stderr, passed through the host (module `tee`).
    pub(super) tee: Option<super::tee::Tee>,
    io: Pipes,
    /// The job has an init of its own PID namespace, whose death ends the tree.
    pub(super) pid_namespace: bool,
    /// The job's processes held together (cgroups, or the chain of parents).
    pub(super) group: Group,
    /// How the job's memory is bounded.
    pub(super) memory: MemoryBound,
    /// The request's registration with the spawner's shared listener, kept until the end.
    pub(super) registration: Registration,
    /// The contained tier's claims when the job's own filter carries them (its listener's
    /// supervisor makes them; module `emulate`).
    attached_claims: Option<super::emulate::Claims>,
    /// A session's claims and places in the contained tier, handed to the session.
    session_emulation: Option<super::session_hook::Emulation>,
    join_v1: Vec<RawFd>,
}

/// A started job: the program, its streams and the host's side of it.
pub(super) struct Live {
    pub(super) pid: i32,
    pub(super) pidfd: OwnedFd,
    /// With namespaces: the init, which tells how the program itself ended.
    pub(super) init: Option<Init>,
    /// The proxy and host-port relays, when the network mode has them.
    pub(super) served: Option<super::net::Running>,
    pub(super) net_warning: Option<String>,
    /// The supervisor of the job's own listener (none: the spawner's shared one, or none).
    pub(super) notifier: Option<Notifier>,
    /// The preload's report pipe (the host's read end).
    pub(super) report: Option<ReportPipe>,
    pub(super) stdin: Option<OwnedFd>,
    pub(super) stdout: Option<OwnedFd>,
    pub(super) stderr: Option<OwnedFd>,
}

impl Job {
    /// Plans `v` under `sandbox` on this machine: the tier from the probes, then each layer's
    /// part. Refusals (a broad workspace, a limit that cannot be kept, root below the isolated
    /// tier) come from here, before anything runs. `mechanism` is how the job's processes are
    /// held together, known once its group is made (the audit names it, refused or not).
    pub(super) fn plan(
        v: &Validated,
        sandbox: &Sandbox,
        opts: &RunOptions,
        recorder: Option<&Recorder>,
        mechanism: &mut Option<Mechanism>,
    ) -> Result<Job, ExecError> {
        let path = c_string("argv[0]", v.program.as_os_str().as_bytes())?;
        let argv = v
            .argv
            .iter()
            .map(|a| c_string("argv", a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let cwd = v
            .cwd
            .as_ref()
            .map(|c| c_string("cwd", c.as_os_str().as_bytes()))
            .transpose()?;
        // The profile's spawner thread holds the filter already and its children inherit it;
        // otherwise the child attaches one whose execve exemption names this very buffer.
        #[cfg(target_arch = "x86_64")]
        let spawner_base = sandbox.exact_outer_policy().filter(|_| {
            opts.start == StartFrom::SpawnerThread
                && v.custom.is_none()
                && crate::platform::seccomp_listener().is_ok()
                && !matches!(v.streams, Streams::Session(_))
        });
        #[cfg(not(target_arch = "x86_64"))]
        let spawner_base: Option<&crate::policy::Policy> = None;
        let attach = spawner_base.is_none().then_some(path.as_ptr() as u64);
        let mut plan = sandbox.plan(&v.program, attach)?;
        if let Some(r) = recorder {
            // Learning is the listener: every call goes to the recorder.
            if let Err(why) = crate::platform::seccomp_listener() {
                return Err(ExecError::Refused(Refusal::new(
                    "learn",
                    format!("{why}; learning needs it: learn on a machine that has it"),
                )));
            }
            plan.filter = Some(
                r.filter(path.as_ptr() as u64)
                    .map_err(|e| Step::RecorderFilter.says(e.to_string()))?,
            );
            plan.notify = true;
        }
        let here = match &v.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir().map_err(Step::WorkingDirectory.error())?,
        };
        // A job whose mount namespace gets a /tmp of its own has TMPDIR=/tmp there: it needs
        // no directory on the host's file system, which would only be made and removed for
        // nothing.
        // The credential list resolved once for the job (a listing of `/etc/ssh` and a path
        // per entry): the private /tmp's check, Landlock's rules and the view's covers all
        // start from it.
        let credentials = crate::credentials::deny_read(&crate::credentials::Context::current());
        let private_tmp = private_tmp(v, &credentials);
        let namespaced = v.paths.isolation != super::isolation::Mode::Off
            && super::isolation::presumed_unavailable().is_none();
        let namespaced_tmp = private_tmp && namespaced;
        // A job in the constructed view has its deny paths covered there (module `conceal`):
        // Landlock then plans no carve-out around them, which was about a quarter of a
        // one-shot run's own work as root (a listing of `/etc` and ~180 rules;
        // docs/benchmarks.md).
        let covered = namespaced && super::conceal::available();
        // Before anything is made for the job: a workspace too broad to write is refused here.
        let broad = super::workspace::check(
            &v.paths,
            super::paths::default_workspace(&v.paths, sandbox, &here),
            v.audience,
        )?;
        // Without namespaces the host's /dev/pts is the job's: Landlock keeps the user's other
        // terminals out (a namespaced job gets a devpts of its own instead).
        let layer = super::paths::layer(
            &v.paths,
            sandbox,
            &here,
            !namespaced_tmp,
            !namespaced && delegable(),
            covered,
            &credentials,
        )?;
        // What an earlier job left in the shared home to run in this one is removed first.
        if let Some(h) = &v.home {
            super::home::prepare(h).map_err(|e| Refusal::new("home", e))?;
        }
        // A second's slack for file systems with coarse timestamps.
        let started_at = SystemTime::now() - Duration::from_secs(1);
        // A profile the outer filter cannot enforce exactly has the preload stack it; the
        // preload has no supervisor to report to, so in report mode its filter fails refused
        // calls with the errno itself (they are not counted) instead of trapping.
        let response = response_of(v, sandbox);
        if plan.notify {
            if let Err(why) = crate::platform::seccomp_listener() {
                super::no_listener::answer_in_filter(&mut plan, response, &why);
            }
        }
        // Whether the filter the session's commands install notifies the host (the profile
        // allows the handover calls and has `trap` rules, and a listener can be had; without
        // one the warning above is the session's): only then can it carry the contained
        // tier's claims.
        let session_notify = matches!(v.streams, Streams::Session(_)) && plan.notify;
        // A session's resident process runs no filter of its own: it installs the profile's
        // in each command it starts, between fork and exec (module `session`).
        if matches!(v.streams, Streams::Session(_)) {
            plan.filter = None;
            plan.notify = false;
            plan.preload_env.clear();
        }
        if let Response::Errno(e) = response {
            for (k, val) in plan.preload_env.iter_mut() {
                if *k == "SECCOMP_DEFAULT_ACTION" {
                    *val = Action::Errno(e).to_string();
                }
            }
        }
        let isolation =
            isolation_layer(v, sandbox, &here, layer.as_ref(), private_tmp, &credentials)?;
        // Rules without a carve-out grant no reading: only an init that mounts the covers
        // grants `/`. A job that ends up without that view (none is expected: the checks
        // above are the ones the layer makes) gets the carve-out planned after all rather
        // than a program that can read nothing.
        let layer = match layer {
            Some(l) if l.covered() && !isolation.as_ref().is_ok_and(|i| i.namespaces.read_root) => {
                super::paths::layer(
                    &v.paths,
                    sandbox,
                    &here,
                    !namespaced_tmp,
                    isolation.is_err() && delegable(),
                    false,
                    &credentials,
                )?
            }
            l => l,
        };
        let git_guard = (v.paths.isolation != super::isolation::Mode::Off).then(|| {
            super::git_guard::Guard::take(
                v.paths.workspace.as_deref().unwrap_or(&here),
                &v.paths.allowed_controls,
            )
        });
        let isolated = isolation.as_ref().ok();
        let mut root_warning = Vec::new();
        refuse_root_below_isolated(v, isolated.is_some(), layer.as_ref(), &mut root_warning)?;
        // The tier and its claims, from the layers just planned (module `tier`): the contained
        // tier's filter sends the metadata calls, connects and sends and the opens that may
        // write to the supervisor, which makes them within the writable places; the isolated
        // tier's its opens that may write and, unless Landlock keeps unix sockets itself
        // (ABI 9, no socket allowed by name), its connects and sends, checked in the job's
        // mount namespace (module `emulate`).
        let landlock = layer.as_ref().map(|l| l.prepared.status());
        let choice = super::tier::choose(super::tier::Layers {
            filter: plan.planned,
            namespaces: isolated.is_some(),
            landlock: landlock.is_some_and(|s| !s.enforced.is_empty()),
            landlock_unix: landlock.is_some_and(|s| !s.enforced.is_empty() && s.abi.used >= 9)
                && v.paths.allowed_sockets.is_empty(),
        });
        let session = matches!(v.streams, Streams::Session(_));
        let policy = sandbox.profile_policy();
        // Every carrier needs a listener; without one the claims are not worked out (their
        // rules probe `pidfd_getfd`, which a sandbox around this one refuses and names).
        let listener = crate::platform::seccomp_listener().is_ok();
        let claims = policy
            .filter(|_| listener)
            .map(|p| super::emulate::Claims::for_set(p, choice.claims));
        let any_claim = claims.as_ref().is_some_and(|c| c.any());
        #[cfg(target_arch = "x86_64")]
        let by_spawner = spawner_base.is_some() && plan.planned == Sandboxed::Exact;
        #[cfg(not(target_arch = "x86_64"))]
        let by_spawner = false;
        // A filter attached in the child (a request that changed its profile, a profile whose
        // exact filter the preload stacks) carries the claims itself where it notifies the
        // host: its listener's supervisor makes them as the spawner's does. The preload's
        // stacked filter cannot undo that: of two filters the kernel takes the stricter
        // answer, and a user notification is stricter than allowing. Compiled only where the
        // spawner does not carry them.
        let attached_program = match (policy, &claims) {
            (Some(policy), Some(c))
                if !by_spawner
                    && any_claim
                    && plan.filter.is_some()
                    && plan.notify
                    && recorder.is_none()
                    && !session =>
            {
                c.attached_program(policy, path.as_ptr() as u64)
            }
            _ => None,
        };
        // A session's commands install the filter the resident was sent: in the contained
        // and isolated tiers it carries the claims, and the host makes them within the
        // session's places (module `session`). Decided here, where the tier is known, so
        // that the session's warnings say whether they are guarded. The rule tables' room
        // does not depend on the path buffer's address, which the resident tells only once
        // it runs.
        let session_fits = session_notify
            && any_claim
            && recorder.is_none()
            && policy
                .zip(claims.as_ref())
                .is_some_and(|(p, c)| c.attached_program(p, 0).is_some());
        let carried = super::tier::carry(
            choice,
            super::tier::Routes {
                listener,
                // Probed only where something is claimed (module `emulate::claims`).
                descriptors: choice.claims != super::emulate::ClaimSet::None && delegable(),
                spawner: by_spawner,
                attached: attached_program.is_some(),
                session: session_fits,
            },
        );
        #[cfg(target_arch = "x86_64")]
        let spawner = match spawner_base {
            Some(base) if by_spawner => Some(
                Spawner::for_set(sandbox.key(), base, choice.claims)
                    .map_err(Step::Spawner.error())?,
            ),
            _ => None,
        };
        let attached_claims = match (carried.carrier, attached_program) {
            (super::tier::Carrier::Attached, Some(prog)) => {
                plan.filter = Some(prog);
                claims.clone()
            }
            _ => None,
        };
        let session_claims = match carried.carrier {
            super::tier::Carrier::Session => claims,
            _ => None,
        };
        root_warning.extend(match carried.gap {
            super::tier::Gap::None => None,
            super::tier::Gap::Unguarded { listener } => {
                super::emulate::unguarded(sandbox, v.audience, listener)
            }
            super::tier::Gap::Undelegable => super::emulate::undelegable(sandbox),
            super::tier::Gap::LateSockets => super::emulate::late_sockets_undelegable(sandbox),
        });
        // After the mounts the program changes to its directory by name: an inherited working
        // directory would still be the one beneath them.
        let here_c = match isolated {
            Some(_) if cwd.is_none() => Some(c_string("cwd", here.as_os_str().as_bytes())?),
            _ => None,
        };
        // In its own mount namespace the job's /tmp is private: TMPDIR is /tmp itself.
        let tmpdir = match isolated {
            Some(i) if i.namespaces.private_tmp => Some(("TMPDIR", "/tmp".to_string())),
            _ => layer
                .as_ref()
                .and_then(|l| l.tmp.as_ref())
                .map(|t| ("TMPDIR", t.path().display().to_string())),
        };
        let net = super::net::Plan::new(
            &v.network,
            super::paths::allows(sandbox).tcp,
            super::net::presumed_unavailable().as_deref(),
            isolated.is_some(),
        )?;
        // The isolation layer's namespaces, with a network namespace when the mode needs one.
        let namespaces = match (isolated, net.namespaces()) {
            (Some(i), n) => Some(super::spawn::Namespaces {
                net: n.is_some(),
                ..i.namespaces.clone()
            }),
            (None, n) => n,
        };
        // The preload's variables, TMPDIR and the proxy's replace any of the same name the job
        // carries.
        let own: Vec<(&str, String)> = plan
            .preload_env
            .iter()
            .cloned()
            .chain(tmpdir)
            .chain(net.env())
            .collect();
        let envp = v
            .env
            .iter()
            .filter(|(k, _)| !own.iter().any(|(p, _)| p == k) && net.keeps(k))
            .map(|(k, val)| (k.as_str(), val.as_str()))
            .chain(own.iter().map(|(k, val)| (*k, val.as_str())))
            .map(|(k, val)| c_string("env", format!("{k}={val}").as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let report = if plan.preload_env.is_empty() {
            None
        } else {
            let pipe = ReportPipe::new().map_err(Step::ReportPipe.error())?;
            // Above 3, so that the child's dup to 3 never meets its own source.
            let above = spawn::dup_above(pipe.child_fd(), 4).map_err(Step::ReportPipe.error())?;
            Some((pipe, above))
        };
        let mut limits = v.rlimits.plan().map_err(Step::Limits.error())?;
        // `sandbox run`'s stderr passes through the host when it is not a terminal (module
        // `tee`).
        let mut tee = None;
        let io = match v.streams {
            Streams::Capture => pipes(v.stdin.is_some()),
            Streams::Session(control) => pipes(false).and_then(|mut p| {
                p.child[0] = Some(spawn::dup_above(control, 3)?);
                Ok(p)
            }),
            Streams::Inherit => super::tee::inherit().map(|([i, o, e], t)| {
                tee = t;
                Pipes {
                    child: [Some(i), Some(o), Some(e)],
                    stdin: None,
                    stdout: None,
                    stderr: None,
                }
            }),
        }
        .map_err(Step::Streams.error())?;

        // Under an init of its own PID namespace the init's death ends the tree: no cgroup is
        // created only to hold it.
        let pid_namespace = namespaces.as_ref().is_some_and(|n| n.isolate);
        let mut group = Group::new(opts.containment, pid_namespace).map_err(Step::Group.error())?;
        *mechanism = Some(group.mechanism());
        // Memory of the whole job: by its cgroup where this caller has one, else by the host's
        // watchdog (module `memwatch`); never RLIMIT_AS, which node, Go and Java die under.
        let memory = group.limit_memory(v.rlimits.memory());
        limits.extend(memory.rlimit().map_err(Step::Limits.error())?);
        if group.limit_processes(v.rlimits.processes) {
        } else if isolated.is_some() && !crate::platform::running_as_root() {
            // No pids controller, but a user namespace of its own: RLIMIT_NPROC counts the
            // processes of the caller's uid in that namespace only (per-namespace accounting),
            // and the program, which holds no capability in the initial namespace, cannot
            // exceed it. The kernel exempts uid 0 from it, so as root an explicit limit is
            // refused below.
            let n = v.rlimits.processes as libc::rlim_t;
            limits.push((
                libc::RLIMIT_NPROC as libc::c_int,
                libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                },
            ));
        } else if v.rlimits.processes_required {
            return Err(ExecError::Refused(Refusal::new(
                "limits.processes",
                "this machine gives this caller no pids controller for request cgroups (cgroup \
                 v2 with the pids controller delegated, or a writable v1 pids hierarchy, is \
                 needed), so the limit cannot be enforced; omit it to run without one",
            )));
        }
        // Violations reach the spawner's shared listener, which finds the request by its
        // cgroup or its child.
        let join_v1 = group.v1_dirs();
        let mut registration = Registration::new(group.cgroup_name(), response);
        let places = match (choice.claims, carried.supervised(), &layer) {
            (super::emulate::ClaimSet::Contained, true, Some(l)) => Some(
                super::emulate::Places::new(
                    &l.writable,
                    &v.paths.allowed_sockets,
                    v.paths.connect_ports.as_deref(),
                )
                .with_denied(&denied(v, &credentials))
                // Without a terminal peer made for it, Landlock grants the host's /dev/pts.
                .with_host_terminals(!delegable()),
            ),
            _ => None,
        };
        let places = match (choice.claims, carried.supervised(), &namespaces) {
            (
                super::emulate::ClaimSet::Isolated | super::emulate::ClaimSet::IsolatedFiles,
                true,
                Some(ns),
            ) => Some(
                isolated_places(v, sandbox, &here, layer.as_ref(), ns)
                    .with_denied(&denied(v, &credentials))
                    // Without a terminal peer made for it, Landlock grants the host's /dev/pts.
                    .with_host_terminals(!delegable()),
            ),
            _ => places,
        };
        // A session's places go to the session, whose commands' calls it answers itself.
        let session_emulation = match (session_claims, places) {
            (Some(claims), Some(places)) => Some(super::session_hook::Emulation { claims, places }),
            (None, Some(places)) => {
                registration.emulate(places);
                None
            }
            _ => None,
        };
        Ok(Job {
            path,
            argv,
            envp,
            cwd,
            here_c,
            here,
            plan,
            #[cfg(target_arch = "x86_64")]
            spawner,
            broad,
            layer,
            started_at,
            response,
            isolation,
            git_guard,
            root_warning,
            net,
            namespaces,
            report,
            limits,
            tee,
            io,
            pid_namespace,
            group,
            memory,
            registration,
            attached_claims,
            session_emulation,
            join_v1,
        })
    }

    /// Makes the child with every layer of the plan, then starts the host's side: the proxy
    /// and host-port relays, and the supervisor of the child's own listener.
    pub(super) fn spawn(
        &mut self,
        v: &Validated,
        recorder: Option<&Recorder>,
    ) -> Result<Live, ExecError> {
        let isolated = self.isolation.as_ref().ok();
        // In namespaces the init builds the ruleset itself, from the raw rules with its own
        // mounts added: the host's kernel ruleset is built only for runs without an init.
        let landlock_rules = isolated
            .and(self.layer.as_ref())
            .and_then(|l| l.prepared.raw_rules());
        let landlock_fd = match (&self.layer, &landlock_rules) {
            (Some(l), None) => Some(l.prepared.raw_fd().map_err(super::paths::refusal)?),
            _ => None,
        }
        .filter(|fd| *fd >= 0);
        let spec = Spec {
            path: &self.path,
            argv: &self.argv,
            envp: &self.envp,
            cwd: self.cwd.as_ref().or(self.here_c.as_ref()),
            stdio: self.io.child_fds().map_err(Step::Streams.error())?,
            report: self.report.as_ref().map(|(_, fd)| fd.as_raw_fd()),
            cgroup: self.group.dir_fd(),
            join_v1: &self.join_v1,
            limits: &self.limits,
            landlock: landlock_fd,
            filter: self.plan.filter.as_deref(),
            listener: self.plan.notify,
            #[cfg(target_arch = "x86_64")]
            spawner: self.spawner,
            namespaces: self.namespaces.as_ref(),
            listen: &self.net.listen,
            landlock_rules,
        };
        // Only exec itself failing is the program's affair (126/127); a step of the child's
        // setup failing is the sandbox's (125), and its message names the step.
        let spawned = spawn::spawn(&spec).map_err(|e| match e {
            SpawnError::Exec(source) => ExecError::Spawn {
                program: v.argv[0].clone(),
                source,
            },
            SpawnError::Setup(e) => Step::Child.error()(e),
            SpawnError::Handover(e) => handover_refused(v, e),
            SpawnError::NamespacesRefused(e) => Step::Namespaces.error()(e),
        })?;
        self.io.child = [None, None, None];
        // The child has its own copy now (as descriptor 3): the host keeps only the read end.
        let report = self.report.take().map(|(mut pipe, _copy)| {
            pipe.close_writer();
            pipe
        });
        let pid = spawned.pid;
        self.group.started(pid);
        let main = MainProgram {
            pid,
            init: spawned.init.is_some(),
        };
        self.registration.add_child(main);

        // A session's proxied connections are told apart by command (module `net_owners`).
        let owners =
            (matches!(v.streams, Streams::Session(_)) && self.net.mode.isolates()).then(|| {
                let o = std::sync::Arc::new(super::net_owners::Owners::default());
                o.started(pid);
                o
            });
        if matches!(v.streams, Streams::Session(_)) {
            super::session_hook::started(super::session_hook::Started {
                owners: owners.clone(),
                proxy: self.net.proxy_port.map(|p| format!("127.0.0.1:{p}")),
                landlock: self.layer.as_ref().map(|l| l.prepared.status().clone()),
                isolation: isolated.map(|l| l.status.clone()),
                network: self.net.mode,
                cgroups: self.group.limit_dirs(),
                emulation: self.session_emulation.take(),
                namespaces_unavailable: self
                    .isolation
                    .as_ref()
                    .err()
                    .filter(|w| !w.is_empty())
                    .cloned(),
                warnings: self
                    .plan
                    .warnings
                    .iter()
                    .chain(&self.broad)
                    .chain(&self.root_warning)
                    .cloned()
                    .collect(),
            });
        }
        // The proxy and host-port relays serve the listeners made inside the sandbox's network
        // namespace.
        let mut net_warning = None;
        let served = super::net::Running::start(&self.net, &v.network, spawned.listeners)
            .unwrap_or_else(|e| {
                net_warning = Some(format!(
                    "sandbox: the proxy could not be started ({e}); the program had no way out"
                ));
                None
            });
        if let (Some(s), Some(o)) = (&served, owners) {
            s.attribute(o);
        }
        let notifier = match recorder {
            // The recorder's thread answers every call; the run only waits for the program.
            Some(r) => {
                if let Some(l) = spawned.listener {
                    r.attach(l);
                }
                None
            }
            None => spawned.listener.map(|l| {
                let n = Notifier::new(l, self.response, main);
                match self.attached_claims.take() {
                    Some(c) => n.emulate(c, self.registration.shared_slot()),
                    None => n,
                }
            }),
        };
        Ok(Live {
            pid,
            pidfd: spawned.pidfd,
            init: spawned.init,
            served,
            net_warning,
            notifier,
            report,
            stdin: self.io.stdin.take(),
            stdout: self.io.stdout.take(),
            stderr: self.io.stderr.take(),
        })
    }
}

/// The places an isolated-tier job's connects and sends may reach (module `emulate`): the
/// writable places its view binds (Landlock's, or the same set without it), its private
/// `/tmp` and `/dev/shm`, the sockets allowed by name; the TCP port rule only where Landlock
/// enforces one (the host's connect does not carry the job's domain); abstract names as given
/// only in a network namespace of its own.
fn isolated_places(
    v: &Validated,
    sandbox: &Sandbox,
    here: &std::path::Path,
    layer: Option<&super::paths::Layer>,
    ns: &super::spawn::Namespaces,
) -> super::emulate::Places {
    let writable = match layer {
        Some(l) => l.writable.clone(),
        None => super::paths::writable_set(&v.paths, &super::paths::allows(sandbox), here),
    };
    let ports = layer.and(v.paths.connect_ports.as_deref());
    let mut private = Vec::new();
    if ns.private_tmp {
        private.push(c"/tmp".to_owned());
    }
    if ns.fresh_dev {
        // Its own terminals too: the fresh `/dev` has a devpts instance of its own.
        private.push(c"/dev/shm".to_owned());
        private.push(c"/dev/pts".to_owned());
    }
    super::emulate::Places::new(&writable, &v.paths.allowed_sockets, ports).in_view(
        super::emulate::View {
            private,
            own_network: ns.net,
            devices: Default::default(),
        },
    )
}

/// How the supervisor answers the job's refused calls: kill, or the errno asked for, else the
/// one the profile's default action names, else EPERM.
pub(crate) fn response_of(v: &Validated, sandbox: &Sandbox) -> Response {
    match v.on_violation {
        OnViolation::Kill => Response::Kill,
        OnViolation::Report => Response::Errno(v.deny_errno.unwrap_or(
            match sandbox.options().profile.default_action() {
                Action::Errno(e) => e,
                _ => libc::EPERM as u16,
            },
        )),
    }
}

/// `text` as a C string, or a refusal naming `field`.
fn c_string(field: &str, text: &[u8]) -> Result<CString, ExecError> {
    CString::new(text)
        .map_err(|_| ExecError::Refused(Refusal::new(field, "contains a NUL byte".to_string())))
}

/// The child's stdio and the host's ends of the pipes.
struct Pipes {
    /// The child's ends (stdin is `None` when it reads the shared `/dev/null`).
    child: [Option<OwnedFd>; 3],
    stdin: Option<OwnedFd>,
    /// The host's ends of the output pipes (none when the streams are inherited).
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

impl Pipes {
    /// What becomes the child's descriptors 0, 1 and 2.
    fn child_fds(&self) -> std::io::Result<[RawFd; 3]> {
        let null = dev_null()?;
        let fd = |i: usize| self.child[i].as_ref().map_or(null, AsRawFd::as_raw_fd);
        Ok([fd(0), fd(1), fd(2)])
    }
}

/// `/dev/null`, opened once (close-on-exec, above the standard streams): the stdin of every
/// request without stdin text.
fn dev_null() -> std::io::Result<RawFd> {
    static NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let fd = spawn::above_stdio(OwnedFd::from(std::fs::File::open("/dev/null")?))?;
    Ok(NULL.get_or_init(|| fd).as_raw_fd())
}

fn pipes(with_stdin: bool) -> std::io::Result<Pipes> {
    let (stdin, child_in) = if with_stdin {
        let (r, w) = spawn::pipe()?;
        (Some(w), Some(spawn::above_stdio(r)?))
    } else {
        (None, None)
    };
    let (stdout, out_w) = spawn::pipe()?;
    let (stderr, err_w) = spawn::pipe()?;
    Ok(Pipes {
        child: [
            child_in,
            Some(spawn::above_stdio(out_w)?),
            Some(spawn::above_stdio(err_w)?),
        ],
        stdin,
        stdout: Some(stdout),
        stderr: Some(stderr),
    })
}

/// The host could not take the child's seccomp listener: without CAP_SYS_PTRACE (any caller
/// but root, and root in a container that drops it) only a dumpable child's, and a child
/// without namespaces shares the host's memory, which is non-dumpable. Only a request that
/// changed its profile (`allow`, `deny`, `profile_file`) or a recording has such a listener
/// (built-in profiles report through the spawner thread's), so the refusal names that.
fn handover_refused(v: &Validated, e: std::io::Error) -> ExecError {
    if e.raw_os_error() != Some(libc::EPERM) {
        return Step::Listener.error()(e);
    }
    let field = if v.custom.is_some() {
        "allow"
    } else {
        "profile"
    };
    ExecError::Refused(Refusal::new(
        field,
        "a profile changed by the request (allow, deny, profile_file) reports refused calls \
         through a listener this caller may take only from a program in namespaces of its \
         own (the isolated tier); this run has none (isolation off, or no user namespaces \
         here): use a built-in profile as it is, or the isolated tier",
    ))
}

/// A root request that the machine put below the isolated tier is refused unless it says
/// `allow_root`: in its own namespaces with Landlock, root's reach is the job's view (the
/// host's tree read-only, credentials unreadable); without them root passes every permission
/// check Landlock does not cover (a file's mode and owner, anywhere). A request that turned a
/// layer off itself (`isolation` or `landlock` `off`) made that choice knowingly: it runs, and
/// its result says what root keeps. `sandbox run` warns instead (its own `--allow-root`).
fn refuse_root_below_isolated(
    v: &Validated,
    isolated: bool,
    landlock: Option<&super::paths::Layer>,
    warnings: &mut Vec<String>,
) -> Result<(), ExecError> {
    let landlock_held = landlock.is_some_and(|l| !l.prepared.status().enforced.is_empty());
    if v.allow_root || crate::sys::euid() != 0 || (isolated && landlock_held) {
        return Ok(());
    }
    let missing = match (isolated, landlock_held) {
        (false, false) => "namespaces and Landlock",
        (false, true) => "namespaces",
        _ => "Landlock",
    };
    let why = format!(
        "running as root without {missing}: the program keeps root's permissions over every \
         file's mode and owner outside the workspace"
    );
    let chosen = v.paths.isolation == super::isolation::Mode::Off
        || v.paths.mode == crate::landlock::Mode::Off;
    // In the words of whoever made the request: a field, or the flag of a command line
    // (`sandbox session start`, `sandbox mcp`).
    let allow = match v.audience {
        super::request::Audience::Json => "\"allow_root\": true",
        super::request::Audience::Cli => "--allow-root",
    };
    if chosen {
        warnings.push(format!(
            "sandbox: warning: {why} (a layer this request turned off); pass {allow} to silence"
        ));
        return Ok(());
    }
    Err(Refusal::new(
        "allow_root",
        format!(
            "{why}, and this machine gives no more; pass {allow} to run anyway, or run as an \
             unprivileged user"
        ),
    )
    .into())
}

/// Whether the job's mount namespace, if it gets one, mounts a private `/tmp`. Landlock's
/// rule for a private /tmp would reach into directories bound back there: not when it must
/// keep something under /tmp unreadable.
/// The paths a job may not open: the credential list and the request's own deny list.
fn denied(v: &Validated, credentials: &[PathBuf]) -> Vec<PathBuf> {
    credentials
        .iter()
        .chain(&v.paths.deny_read)
        .cloned()
        .collect()
}

fn private_tmp(v: &Validated, credentials: &[PathBuf]) -> bool {
    v.paths.mode == crate::landlock::Mode::Off
        || !credentials
            .iter()
            .chain(&v.paths.deny_read)
            .any(|d| d.starts_with("/tmp"))
}

/// The job's namespace layer: `Ok` with it, or `Err` with why there is none (empty: off).
fn isolation_layer(
    v: &Validated,
    sandbox: &Sandbox,
    here: &std::path::Path,
    landlock: Option<&super::paths::Layer>,
    private_tmp: bool,
    credentials: &[PathBuf],
) -> Result<Result<super::isolation::Layer, String>, ExecError> {
    let workspace = v
        .paths
        .workspace
        .clone()
        .unwrap_or_else(|| here.to_path_buf());
    let mut visible: Vec<&std::path::Path> = vec![here, &workspace, &v.program];
    visible.extend(v.paths.writable.iter().map(PathBuf::as_path));
    visible.extend(v.paths.read_only.iter().map(PathBuf::as_path));
    // Absolute paths among the arguments name files the caller means (`touch /tmp/x/f`).
    let named: Vec<PathBuf> = v.argv[1..]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.starts_with("/tmp/"))
        .map(|p| {
            if p.exists() {
                p
            } else {
                p.parent().map(PathBuf::from).unwrap_or(p)
            }
        })
        .filter(|p| p.exists())
        .collect();
    visible.extend(named.iter().map(PathBuf::as_path));
    // The program's own HOME (an exec request's scrubbed `HOME=/tmp`, or one the caller set
    // below /tmp) holds its configuration, e.g. git's identity: it stays visible.
    let home: Vec<PathBuf> = v
        .env
        .iter()
        .filter(|(k, _)| k == "HOME")
        .map(|(_, h)| PathBuf::from(h))
        .filter(|h| h.starts_with("/tmp/") && h.is_dir())
        .collect();
    visible.extend(home.iter().map(PathBuf::as_path));
    // The view binds the same writable places as Landlock grants, with Landlock or without.
    let writable = match landlock {
        Some(l) => l.writable.clone(),
        None => super::paths::writable_set(&v.paths, &super::paths::allows(sandbox), here),
    };
    // The deny list Landlock carves around, for the view to cover instead; only where the
    // init rebuilds the job's Landlock rules (with its `/` rule).
    // The paths Landlock's planning just found absent are left out: the covers look up each
    // of the others (most of the list does not exist, and each lookup was a `statx`).
    let deny_read: Vec<PathBuf> = match landlock {
        Some(l) if l.prepared.raw_rules().is_some() => {
            let absent: std::collections::HashSet<&std::ffi::OsStr> = l
                .prepared
                .status()
                .deny_read_absent
                .iter()
                .map(|p| p.as_os_str())
                .collect();
            credentials
                .iter()
                .chain(&v.paths.deny_read)
                .filter(|p| !absent.contains(p.as_os_str()))
                .cloned()
                .collect()
        }
        _ => Vec::new(),
    };
    let inputs = super::isolation::Inputs {
        mode: v.paths.isolation,
        deny_read: &deny_read,
        workspace: &workspace,
        read_only: &v.paths.read_only,
        visible: &visible,
        writable: &writable,
        private_tmp,
        allowed_sockets: &v.paths.allowed_sockets,
        memory: v.rlimits.memory(),
    };
    Ok(super::isolation::layer(&inputs)?)
}
