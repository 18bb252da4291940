//! Which calls the contained tier's filter sends to the supervisor, and the rules that send
//! them.

// Making a job's `connect` and sends, setting its files' flags and opening its new terminal's
// peer need the job's descriptors: where the host may not take them (Docker's default seccomp
// profile without `CAP_SYS_PTRACE`) none of those is claimed (each would be refused wherever it
// pointed), the host's `/dev/pts` stays granted, and the run says what is unguarded
// (`report::undelegable`).
use crate::platform::can_take_descriptors;
use crate::policy::{Action, Policy, NATIVE};

/// The calls that change a file's mode, owner, times or extended attributes (by path or by
/// descriptor); the filter of the contained tier sends those its profile allows to the host.
pub(crate) const CALLS: &[&str] = &[
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "file_setattr",
];

/// The numbers of the [`CALLS`] that `policy` allows whatever their arguments: those are the
/// ones to emulate. A call the profile refuses stays refused by the filter; one it allows
/// only for some arguments is left to the filter (no built-in profile has such a rule).
pub(crate) fn numbers(policy: &Policy) -> Vec<u32> {
    CALLS
        .iter()
        .filter_map(|name| NATIVE.syscall_number(name))
        .filter(|nr| policy.constant_decision(*nr) == Some(Action::Allow))
        .collect()
}

/// What the contained tier's filter sends to the supervisor: the metadata calls and `connect`
/// where the profile allows them outright, `sendto` with an address, `sendmsg` and `sendmmsg`
/// where it also lets the job make unix sockets, `ioctl(TIOCGPTPEER)` where the profile allows it
/// (the terminal a job creates through `/dev/ptmx`: Landlock no longer grants the host's
/// `/dev/pts`, where the user's other terminals are, so the supervisor opens the peer for
/// it), and the `ioctl`s that set a file's flags where the profile allows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Claims {
    metadata: Vec<u32>,
    peer: Option<u32>,
    connect: Option<u32>,
    /// `sendto` (with an address), `sendmsg` and `sendmmsg`, where the profile allows them and
    /// lets the job make unix sockets.
    send: Vec<u32>,
    /// `ioctl`'s number and the file-flag commands ([`FLAG_COMMANDS`]) the profile allows.
    flags: Option<(u32, Vec<u32>)>,
    /// The opens that may write, `truncate` and `openat2` (module `opens`), where the
    /// profile allows them outright.
    opens: Vec<u32>,
}

/// The `ioctl` commands that change an inode through a descriptor of it, as 32-bit commands
/// (the kernel reads an `unsigned int`): a file's flags (`chattr`: append-only, immutable,
/// ...), `FS_IOC_SETFLAGS` and `FS_IOC_FSSETXATTR`; its generation number,
/// `FS_IOC_SETVERSION` and ext4's own `EXT4_IOC_SETVERSION` (the owner may set it where the
/// file system keeps no metadata checksums); and `FS_IOC_ENABLE_VERITY`, which makes a file
/// read-only for good (it asks for write permission on the file, not on the descriptor).
/// Landlock's `IOCTL_DEV` right covers devices only, so the supervisor makes them within the
/// writable places (module `flags`). The 32-bit variants (`FS_IOC32_SETFLAGS`,
/// `FS_IOC32_SETVERSION`, `EXT4_IOC32_SETVERSION`) answer ENOTTY to a native caller and need
/// nothing.
pub(crate) const FLAG_COMMANDS: [u32; 5] = [
    FS_IOC_SETFLAGS,
    FS_IOC_FSSETXATTR,
    FS_IOC_SETVERSION,
    EXT4_IOC_SETVERSION,
    FS_IOC_ENABLE_VERITY,
];

/// `FS_IOC_SETFLAGS`: `_IOW('f', 2, long)`.
pub(crate) const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
/// `FS_IOC_FSSETXATTR`: `_IOW('X', 32, struct fsxattr)`.
pub(crate) const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// `FS_IOC_SETVERSION`: `_IOW('v', 2, long)`.
pub(crate) const FS_IOC_SETVERSION: u32 = 0x4008_7602;
/// `EXT4_IOC_SETVERSION`: `_IOW('f', 4, long)`.
pub(crate) const EXT4_IOC_SETVERSION: u32 = 0x4008_6604;
/// `FS_IOC_ENABLE_VERITY`: `_IOW('f', 133, struct fsverity_enable_arg)`.
pub(crate) const FS_IOC_ENABLE_VERITY: u32 = 0x4080_6685;

/// Which calls a job's filter sends to the supervisor, named for the tier they serve (module
/// [`crate::exec::tier`] chooses it with the tier).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ClaimSet {
    /// No claims (the filter of a run without Landlock and without namespaces, or a
    /// recording).
    None,
    /// The contained tier (Landlock without namespaces): every claim ([`Claims::of`]).
    Contained,
    /// The isolated tier: `connect` and the addressed sends, where the profile lets the job
    /// make unix sockets, and the file claims ([`Claims::isolated`]); its constructed view
    /// keeps the rest.
    Isolated,
    /// The isolated tier where Landlock keeps the job's unix sockets itself (ABI 9): the file
    /// claims only.
    IsolatedFiles,
}

impl Claims {
    /// The claims of `set` for a profile whose outer policy is `policy`.
    pub(crate) fn for_set(policy: &Policy, set: ClaimSet) -> Claims {
        match set {
            ClaimSet::None => Claims::default(),
            ClaimSet::Contained => Claims::of(policy),
            ClaimSet::Isolated => Claims::isolated(policy),
            ClaimSet::IsolatedFiles => Claims {
                connect: None,
                send: Vec::new(),
                ..Claims::isolated(policy)
            },
        }
    }

    /// The isolated tier's claims: `connect`, `sendto` with an address, `sendmsg` and
    /// `sendmmsg`, where the profile lets the job make unix sockets and the host may take its
    /// descriptors. The view covers the host's sockets bound before the job started, but not
    /// one bound later, which a read-only mount does not keep from `connect` (module
    /// `inview`). And the opens that may write, `truncate` and the metadata calls, wherever
    /// the profile allows them (the view's writable mounts hold files that may have other
    /// names: module `opens`); those need no descriptor taken.
    pub(crate) fn isolated(policy: &Policy) -> Claims {
        let writes = !opens(policy).is_empty();
        // The profile first: a profile without unix sockets needs no probe.
        let (connect, send) = if makes_unix_sockets(policy) && can_take_descriptors() {
            let connect = NATIVE
                .syscall_number("connect")
                .filter(|nr| policy.constant_decision(*nr) == Some(Action::Allow));
            (connect, sends(policy))
        } else {
            (None, Vec::new())
        };
        Claims {
            connect,
            send,
            metadata: if writes { numbers(policy) } else { Vec::new() },
            opens: opens(policy),
            ..Claims::default()
        }
    }

    /// The claims for a profile whose outer policy is `policy`.
    pub(crate) fn of(policy: &Policy) -> Claims {
        let take = can_take_descriptors();
        let peer = NATIVE.syscall_number("ioctl").filter(|nr| {
            take && policy.decide(*nr, &[0, u64::from(TIOCGPTPEER), 0, 0, 0, 0]) == Action::Allow
        });
        let connect = NATIVE
            .syscall_number("connect")
            .filter(|nr| take && policy.constant_decision(*nr) == Some(Action::Allow));
        let flags = NATIVE.syscall_number("ioctl").and_then(|nr| {
            let allowed: Vec<u32> = FLAG_COMMANDS
                .into_iter()
                .filter(|cmd| {
                    take && policy.decide(nr, &[0, u64::from(*cmd), 0, 0, 0, 0]) == Action::Allow
                })
                .collect();
            (!allowed.is_empty()).then_some((nr, allowed))
        });
        let send = if take && makes_unix_sockets(policy) {
            sends(policy)
        } else {
            Vec::new()
        };
        Claims {
            metadata: numbers(policy),
            peer,
            connect,
            send,
            flags,
            // No descriptor is taken for them (the host opens through `/proc/TID` and hands
            // the result over with the listener's ADDFD): claimed wherever a listener is.
            opens: opens(policy),
        }
    }

    /// Adds the rules that send the claimed calls to the listener (`trap`, which the
    /// spawner's filter turns into a user notification).
    pub(crate) fn add_to(&self, policy: &mut Policy) -> Result<(), crate::policy::policy::Full> {
        for nr in &self.metadata {
            policy.add_rule(*nr, Action::Trap, &[])?;
        }
        if let Some(nr) = self.peer {
            policy.add_rule(nr, Action::Trap, &[&[command(TIOCGPTPEER)]])?;
        }
        if let Some(nr) = self.connect {
            policy.add_rule(nr, Action::Trap, &[])?;
        }
        let sendto = NATIVE.syscall_number("sendto");
        for nr in &self.send {
            if Some(*nr) == sendto {
                // A NULL address (a register) is no address: `send` is `sendto` without one.
                let addressed = crate::policy::Cond {
                    arg: 4,
                    width: crate::policy::Width::W64,
                    mask: u64::MAX,
                    op: crate::policy::CmpOp::Ne,
                    value: 0,
                };
                policy.add_rule(*nr, Action::Trap, &[&[addressed]])?;
            } else {
                policy.add_rule(*nr, Action::Trap, &[])?;
            }
        }
        if let Some((nr, cmds)) = &self.flags {
            let conds: Vec<[crate::policy::Cond; 1]> = cmds.iter().map(|c| [command(*c)]).collect();
            let alts: Vec<&[crate::policy::Cond]> = conds.iter().map(|c| &c[..]).collect();
            policy.add_rule(*nr, Action::Trap, &alts)?;
        }
        for nr in &self.opens {
            match open_flags_arg(*nr) {
                Some(arg) => policy.add_rule(*nr, Action::Trap, &[&write_intent(arg)])?,
                None => policy.add_rule(*nr, Action::Trap, &[])?,
            }
        }
        Ok(())
    }

    /// Whether any call is claimed.
    pub(crate) fn any(&self) -> bool {
        self != &Claims::default()
    }

    /// The filter a job attaches itself (a request that changed its profile, a profile whose
    /// exact filter the preload stacks: no spawner thread holds one for it) with these claims:
    /// the outer `policy` with its `execve` exemption for the path string at `path_addr`, the
    /// claims, and every `trap` a user notification. `None` when the policy cannot carry the
    /// claims (its rule tables are full).
    pub(crate) fn attached_program(
        &self,
        policy: &Policy,
        path_addr: u64,
    ) -> Option<Vec<crate::policy::Insn>> {
        let mut claimed = policy.clone();
        self.add_to(&mut claimed).ok()?;
        let mut prog = crate::outer::program(&claimed, path_addr).ok()?;
        crate::policy::bpf::retarget(
            &mut prog,
            crate::policy::action::RET_TRAP,
            crate::policy::action::RET_USER_NOTIF,
        );
        Some(prog)
    }

    /// Whether a waiting call is one of the claimed ones, and which kind.
    pub(crate) fn kind(&self, nr: u32, args: &[u64; 6]) -> Option<Kind> {
        if self.metadata.contains(&nr) {
            Some(Kind::Metadata)
        } else if self.peer == Some(nr) && args[1] as u32 == TIOCGPTPEER {
            Some(Kind::Peer)
        } else if self.connect == Some(nr) {
            Some(Kind::Connect)
        } else if self.send.contains(&nr) {
            Some(Kind::Send)
        } else if self
            .flags
            .as_ref()
            .is_some_and(|(n, cmds)| *n == nr && cmds.contains(&(args[1] as u32)))
        {
            Some(Kind::Flags)
        } else if self.opens.contains(&nr)
            && open_flags_arg(nr).is_none_or(|arg| may_write(args[arg]))
        {
            Some(Kind::Open)
        } else {
            None
        }
    }
}

/// The [`super::opens::CALLS`] `policy` allows whatever their arguments.
fn opens(policy: &Policy) -> Vec<u32> {
    super::opens::CALLS
        .iter()
        .filter_map(|name| NATIVE.syscall_number(name))
        .filter(|nr| policy.constant_decision(*nr) == Some(Action::Allow))
        .collect()
}

/// Which argument holds an open's flags (`open`: the second, `openat`: the third); `None` for
/// the calls claimed whatever their arguments (`creat`, `truncate`, `openat2`).
fn open_flags_arg(nr: u32) -> Option<usize> {
    match NATIVE.syscall_name(nr)? {
        "open" => Some(1),
        "openat" => Some(2),
        _ => None,
    }
}

/// Whether open flags `flags` make an open that may reach an existing file to write:
/// [`super::opens::WRITE_INTENT`], and neither `O_CREAT | O_EXCL` nor `O_TMPFILE` (those
/// make a new inode or fail).
fn may_write(flags: u64) -> bool {
    let f = flags as u32 as u64;
    let excl = (libc::O_CREAT | libc::O_EXCL) as u64;
    let tmp = libc::O_TMPFILE as u64;
    f & super::opens::WRITE_INTENT != 0 && f & excl != excl && f & tmp != tmp
}

/// The rule's conditions for [`may_write`] on argument `arg`, as the filter checks them.
fn write_intent(arg: usize) -> [crate::policy::Cond; 3] {
    let cond = |mask: u64, op, value| crate::policy::Cond {
        arg: arg as u8,
        width: crate::policy::Width::W32,
        mask,
        op,
        value,
    };
    let excl = (libc::O_CREAT | libc::O_EXCL) as u64;
    let tmp = libc::O_TMPFILE as u64;
    [
        cond(super::opens::WRITE_INTENT, crate::policy::CmpOp::Ne, 0),
        cond(excl, crate::policy::CmpOp::Ne, excl),
        cond(tmp, crate::policy::CmpOp::Ne, tmp),
    ]
}

/// A claimed call's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A metadata call ([`super::answer`]).
    Metadata,
    /// `ioctl(TIOCGPTPEER)` ([`super::peer`]).
    Peer,
    /// `connect` ([`super::connect`]).
    Connect,
    /// `ioctl` setting a file's flags ([`super::flags`]).
    Flags,
    /// `sendto` with an address, `sendmsg`, `sendmmsg` ([`super::send`]).
    Send,
    /// An open that may write, `truncate`, `openat2` ([`super::write_open`]).
    Open,
}

/// The calls that may carry a destination address, claimed where the job can make unix
/// sockets (module `send`).
const SEND_CALLS: &[&str] = &["sendto", "sendmsg", "sendmmsg"];

/// The [`SEND_CALLS`] `policy` allows: `sendto` with an address (the profiles allow it without
/// one by a rule of their own, so it has no constant decision), the others whatever their
/// arguments.
fn sends(policy: &Policy) -> Vec<u32> {
    SEND_CALLS
        .iter()
        .filter_map(|name| NATIVE.syscall_number(name))
        .filter(|nr| {
            policy.constant_decision(*nr) == Some(Action::Allow)
                || (Some(*nr) == NATIVE.syscall_number("sendto")
                    && policy.decide(*nr, &[0, 0, 0, 0, 1, 16]) == Action::Allow)
        })
        .collect()
}

/// Whether `policy` lets a job make unix sockets (the only way host sockets are at stake).
pub(super) fn makes_unix_sockets(policy: &Policy) -> bool {
    NATIVE.syscall_number("socket").is_some_and(|nr| {
        policy.decide(
            nr,
            &[libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
        ) == Action::Allow
    })
}

/// The rule's condition that `ioctl`'s command is `cmd`, as the kernel reads it: its low 32
/// bits.
fn command(cmd: u32) -> crate::policy::Cond {
    crate::policy::Cond {
        arg: 1,
        width: crate::policy::Width::W32,
        mask: u64::MAX,
        op: crate::policy::CmpOp::Eq,
        value: u64::from(cmd),
    }
}

/// `TIOCGPTPEER` as a 32-bit command.
const TIOCGPTPEER: u32 = libc::TIOCGPTPEER as u32;
