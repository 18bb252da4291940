//! Refusals outside the filter, named from what the program printed.
//!
//! The view, Landlock and the network mode refuse without a word of their own: the program
//! gets `EROFS`, `EACCES`, `ECONNREFUSED` or a failed name lookup and prints it in its own
//! words. After a job ends, its standard error is searched for those words (the `strerror`
//! texts and the forms Python, node, git, cargo, pip and curl print), the absolute paths on
//! each such line are taken out, and each path is classified against the job's actual policy:
//! a credential of the deny list, a protected repository file, a host socket the view hid, or
//! a place outside the writable ones that the caller itself could write. Anything else (a
//! genuine permission problem on the host) is left alone, and so is every text from a job
//! whose policy could not have refused it (no view and no Landlock: no read-only entry).
//!
//! What the program prints is untrusted: it may name any path. The result is advice only (an
//! entry and a warning line); nothing here changes a policy, and every path is printed
//! escaped. The work is bounded: one automaton pass over the text, at most [`MAX_LINES`]
//! matching lines and [`MAX_PATHS`] distinct paths looked at on the file system.

use super::request::Audience;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// Most entries in `refusals`; the rest are counted in `refusals_omitted`.
pub const MAX_ENTRIES: usize = 32;
/// Most matching lines read from one job's output (a program that prints the same error a
/// million times costs no more than this).
const MAX_LINES: usize = 4096;
/// Most distinct paths classified (each costs a few `lstat`s and an `access`).
const MAX_PATHS: usize = 256;
/// Longest path taken from the text.
const MAX_PATH_BYTES: usize = 4096;
/// Most bytes of candidate lines a tee keeps (`sandbox run`, module `tee`).
pub(crate) const MAX_KEPT: usize = 256 * 1024;

/// One refusal of the view, Landlock or the network mode, named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// The file or socket refused, as the program printed it (normalized).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The host name a lookup failed for (no network), when the text names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// What the program was doing (`touch`, `mkdir`, `open`, `connect`, `resolve`), when the
    /// text says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Which rule refused it, in words.
    pub rule: String,
    /// The narrowest change that allows it, in the caller's terms; `null` when none is
    /// offered (credentials, protected files).
    pub allow: Option<String>,
}

/// What the refusals found in one job's output.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// At most [`MAX_ENTRIES`], in order of first appearance.
    pub entries: Vec<Refused>,
    /// Distinct refusals beyond them.
    pub omitted: u64,
}

/// The job's policy as it ran: what the classification compares each path with.
pub(crate) struct Policy<'a> {
    /// The places the job could write (workspace, writable paths).
    pub writable: Vec<PathBuf>,
    /// The workspace, for the wording.
    pub workspace: Option<&'a Path>,
    /// Writes outside `writable` were refused (the view's read-only tree, or Landlock's
    /// write rule).
    pub writes_confined: bool,
    /// The deny list Landlock enforced (empty when it did not).
    pub deny_read: Vec<PathBuf>,
    /// Paths mounted read-only over themselves (the repository's hooks and config).
    pub protected: &'a [PathBuf],
    /// Host sockets covered in the view.
    pub hidden_sockets: &'a [PathBuf],
    /// Why the job had no network (`profile shell has none`), when it had none.
    pub no_network: Option<String>,
    /// The caller asked for the network mode (a domain then needs the proxy mode too).
    pub explicit_network: bool,
    /// The caller's home directories (never offered as a writable path).
    pub homes: Vec<PathBuf>,
    /// Whom the changes are written for.
    pub audience: Audience,
    /// The job's working directory: a relative path in a message is taken from it.
    pub cwd: Option<&'a Path>,
    /// The profile's name when its filter itself refuses file changes (`minimal`, `network`:
    /// EROFS): a writable place does not help then, a profile that writes does.
    pub profile_refuses_writes: Option<String>,
    /// The user's other terminals (`/dev/pts`) were out of reach (Landlock's layer of the
    /// engine carves them out; docs/isolation.md).
    pub other_terminals: bool,
}

/// The kind of error a line reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `EROFS`.
    ReadOnly,
    /// `EACCES`.
    Denied,
    /// `EBUSY` (renaming over a file mounted over itself, as git does with its config).
    Busy,
    /// `ECONNREFUSED`.
    ConnRefused,
    /// A failed name lookup.
    Dns,
    /// A refusal a sandbox run inside the job named itself (`sandbox: refused ...`).
    Nested,
}

/// The texts searched for, as programs spell them, and what each means. Case-sensitive on
/// purpose: with fewer than 64 literal patterns the automaton's SIMD prefilter finds them at
/// memory speed, where a case-insensitive search was several times slower (docs/benchmarks.md).
const NEEDLES: &[(&str, Kind)] = &[
    ("Read-only file system", Kind::ReadOnly),
    ("read-only file system", Kind::ReadOnly),
    ("os error 30", Kind::ReadOnly),
    ("EROFS", Kind::ReadOnly),
    ("Permission denied", Kind::Denied),
    ("permission denied", Kind::Denied),
    ("os error 13", Kind::Denied),
    ("EACCES", Kind::Denied),
    ("Device or resource busy", Kind::Busy),
    ("Connection refused", Kind::ConnRefused),
    ("connection refused", Kind::ConnRefused),
    ("ECONNREFUSED", Kind::ConnRefused),
    ("Temporary failure in name resolution", Kind::Dns),
    ("Could not resolve host", Kind::Dns),
    ("could not resolve host", Kind::Dns),
    ("ENOTFOUND", Kind::Dns),
    ("EAI_AGAIN", Kind::Dns),
    ("Name or service not known", Kind::Dns),
    ("No address associated with hostname", Kind::Dns),
    ("failed to lookup address information", Kind::Dns),
    ("sandbox: refused", Kind::Nested),
];

/// The shortest needle's length: a shorter text holds none, and is answered without building
/// the automaton. Most runs print nothing on stderr, and building the DFA for the empty text
/// (in the tee's thread and again after the job) was a tenth of a one-shot run's host-side work
/// (docs/benchmarks.md).
const SHORTEST: usize = {
    let mut min = usize::MAX;
    let mut i = 0;
    while i < NEEDLES.len() {
        if NEEDLES[i].0.len() < min {
            min = NEEDLES[i].0.len();
        }
        i += 1;
    }
    min
};

fn automaton() -> &'static AhoCorasick {
    static AC: OnceLock<AhoCorasick> = OnceLock::new();
    AC.get_or_init(|| {
        AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .kind(Some(AhoCorasickKind::DFA))
            .build(NEEDLES.iter().map(|(n, _)| n))
            .expect("constant patterns")
    })
}

/// Whether `line` holds one of the texts (what a tee keeps).
pub(crate) fn is_candidate(line: &[u8]) -> bool {
    line.len() >= SHORTEST && automaton().is_match(line)
}

/// The matching lines of `text`, each once, with where it starts and the kind of its first
/// match.
fn lines(text: &str) -> Vec<(usize, &str, Kind)> {
    let mut out: Vec<(usize, &str, Kind)> = Vec::new();
    let mut last_end = 0usize;
    for m in automaton().find_iter(text) {
        if m.start() < last_end {
            continue;
        }
        let start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let end = text[m.end()..]
            .find('\n')
            .map_or(text.len(), |i| m.end() + i);
        last_end = end;
        out.push((start, &text[start..end], NEEDLES[m.pattern().as_usize()].1));
        if out.len() >= MAX_LINES {
            break;
        }
    }
    out
}

/// The paths of the error a `Caused by:` chain (cargo, and Rust programs using `anyhow`)
/// ends in: `line` (starting at `start` in `text`) names none, and is the chain's last cause,
/// so the nearest cause above that names a path is the one that failed
/// (`failed to create directory `/x``). At most a few lines are looked at.
fn chain_paths(text: &str, start: usize) -> Vec<String> {
    let above: Vec<&str> = text[..start].lines().rev().take(12).collect();
    if above.first().map(|l| l.trim()) != Some("Caused by:") {
        return Vec::new();
    }
    for l in &above[1..] {
        let t = l.trim();
        if t.is_empty() || t == "Caused by:" {
            continue;
        }
        let found = paths_in(l);
        if !found.is_empty() || !l.starts_with(' ') {
            return found;
        }
    }
    Vec::new()
}

/// The absolute paths a line names: quoted ('', "", ``, ‘’, “”) or bare (after a space, `(`
/// or `=`), normalized; URLs and relative paths are not taken.
fn paths_in(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut quoted_spans: Vec<(usize, usize)> = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('`', '`'), ('‘', '’'), ('“', '”')] {
        let mut rest = 0usize;
        while let Some(i) = line[rest..].find(open) {
            let s = rest + i + open.len_utf8();
            let Some(j) = line[s..].find(close) else {
                break;
            };
            let inner = &line[s..s + j];
            if inner.starts_with('/') {
                out.push(inner.to_string());
                quoted_spans.push((s, s + j));
            }
            rest = s + j + close.len_utf8();
        }
    }
    let bytes = line.as_bytes();
    for (i, c) in line.char_indices() {
        if c != '/' || quoted_spans.iter().any(|(a, b)| i >= *a && i < *b) {
            continue;
        }
        let before = if i == 0 { b' ' } else { bytes[i - 1] };
        if !matches!(before, b' ' | b'\t' | b'(' | b'=') {
            continue;
        }
        let end = line[i..]
            .find(|c: char| c.is_whitespace())
            .map_or(line.len(), |e| i + e);
        let raw = &line[i..end];
        let token = raw.trim_end_matches([':', ',', ';', ')', '\'', '"', '.']);
        // `PROGRAM: ...` at the start of a line names who speaks (`/bin/sh: 1: cannot create
        // /x: ...`, `/bin/sh: 1: cannot create f: ...`), not what was refused, when more of
        // the message follows than the error itself (`/etc/z: Read-only file system`).
        if i == 0 && raw.ends_with(':') && (line[end..].contains('/') || line[end..].contains(": "))
        {
            continue;
        }
        out.push(token.to_string());
    }
    let mut seen = HashSet::new();
    out.into_iter()
        .filter_map(|p| normalize(&p))
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// The relative paths a line names where it names no absolute one, taken from `cwd`, the
/// job's working directory (`sh -c 'echo x > f'` under `minimal` prints `sh: 1: cannot create
/// f: Read-only file system`). Only the forms that certainly hold a path are read, so that a
/// word of the message is never taken for a file: a quoted word ('f', "f", ‘f’, `f`), dash's
/// `cannot create f:`, and bash's `bash: [line N: ]f: <error>`.
fn relative_paths(line: &str, cwd: &Path) -> Vec<String> {
    let plausible = |w: &str| {
        !w.is_empty()
            && !w.starts_with('/')
            && !w.starts_with('-')
            && !w.contains("://")
            && !w.chars().any(|c| c.is_whitespace() || c.is_control())
    };
    let mut words: Vec<&str> = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('`', '`'), ('‘', '’'), ('“', '”')] {
        let mut rest = 0usize;
        while let Some(i) = line[rest..].find(open) {
            let s = rest + i + open.len_utf8();
            let Some(j) = line[s..].find(close) else {
                break;
            };
            words.push(&line[s..s + j]);
            rest = s + j + close.len_utf8();
        }
    }
    if let Some((_, after)) = line.split_once("cannot create ") {
        words.extend(after.split_once(": ").map(|(w, _)| w));
    }
    if let Some(rest) = line.strip_prefix("bash: ") {
        let rest = match rest.strip_prefix("line ") {
            Some(r) => r.split_once(": ").map_or("", |(_, r)| r),
            None => rest,
        };
        words.extend(rest.split_once(": ").map(|(w, _)| w));
    }
    let mut seen = HashSet::new();
    words
        .into_iter()
        .filter(|w| plausible(w))
        .filter_map(|w| normalize(&cwd.join(w).to_string_lossy()))
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// `p` with `.`, `..` and repeated slashes resolved by the text alone; `None` for what is no
/// usable path (too long, control characters, the root itself, a URL's `//`).
fn normalize(p: &str) -> Option<String> {
    if p.len() > MAX_PATH_BYTES || p.starts_with("//") || p.chars().any(char::is_control) {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(p).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| format!("/{}", parts.join("/")))
}

/// What the program was doing, when the line says: node's `EACCES: ..., mkdir '/x'`, the
/// `cannot VERB` of coreutils, git's `could not lock`.
fn operation(line: &str, kind: Kind) -> Option<String> {
    if kind == Kind::Dns {
        return Some("resolve".into());
    }
    if kind == Kind::ConnRefused {
        return Some("connect".into());
    }
    let lower = line.to_ascii_lowercase();
    for marker in [
        "read-only file system, ",
        "permission denied, ",
        "cannot ",
        "could not ",
        "failed to ",
        "unable to ",
    ] {
        if let Some(i) = lower.find(marker) {
            let word: String = lower[i + marker.len()..]
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            let word = match word.as_str() {
                "create" if lower[i..].contains("directory") => "mkdir".to_string(),
                _ => word,
            };
            if !word.is_empty() && word.len() <= 16 {
                return Some(word);
            }
        }
    }
    None
}

/// The host name a failed lookup names: curl's and git's `Could not resolve host: NAME`,
/// node's `getaddrinfo ENOTFOUND NAME`, urllib3's `host='NAME'`.
fn destination(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let after = [
        "could not resolve host: ",
        "enotfound ",
        "eai_again ",
        "host='",
    ]
    .iter()
    .find_map(|m| lower.find(m).map(|i| i + m.len()))?;
    let name: String = line[after..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    let name = name.trim_end_matches('.').to_string();
    (!name.is_empty() && name.len() <= 253 && name.contains(|c: char| c.is_ascii_alphabetic()))
        .then_some(name)
}

/// `p` with its existing part resolved (symbolic links), the rest appended.
fn resolved(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = p;
    loop {
        if let Ok(c) = std::fs::canonicalize(cur) {
            let mut out = c;
            out.extend(rest.iter().rev());
            return out;
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                cur = parent;
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// The nearest existing directory holding or being `p` (resolved).
fn nearest_dir(p: &Path) -> PathBuf {
    let mut cur = p;
    loop {
        if cur.is_dir() {
            return cur.to_path_buf();
        }
        match cur.parent() {
            Some(parent) => cur = parent,
            None => return PathBuf::from("/"),
        }
    }
}

/// Whether this process (the caller, same user as the job) may write `p` on the host: the
/// file itself when it exists, else the directory it would be created in.
fn host_may_write(p: &Path) -> bool {
    let target = if p.symlink_metadata().is_ok() {
        p.to_path_buf()
    } else {
        nearest_dir(p)
    };
    crate::sys::may_write(&target)
}

/// A path or word made safe to print on one line.
fn shown(s: &str) -> String {
    s.escape_debug().to_string()
}

/// `s` as one shell word.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `s` as a JSON string.
fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

impl<'a> Policy<'a> {
    /// The policy a job ran under: its Landlock layer (`None`: off), its namespace layer's
    /// status and the network mode it got, with the job's working directory `cwd`.
    pub(crate) fn of(
        v: &'a super::request::Validated,
        sandbox: &crate::sandbox::Sandbox,
        cwd: &'a Path,
        landlock: Option<&super::paths::Layer>,
        isolation: Option<&'a super::isolation::Status>,
        network: crate::network::Mode,
    ) -> Policy<'a> {
        let writable = match landlock {
            Some(l) => l.writable.clone(),
            None => super::paths::writable_set(&v.paths, &super::paths::allows(sandbox), cwd),
        };
        let enforced = |what: &str| {
            landlock.is_some_and(|l| l.prepared.status().enforced.iter().any(|e| e == what))
        };
        let deny_read = if enforced("fs-read-deny") {
            // The list the layer was built from (paths.rs): the credential list, then the
            // request's own.
            crate::credentials::deny_read(&crate::credentials::Context::current())
                .into_iter()
                .chain(v.paths.deny_read.iter().cloned())
                .map(|d| resolved(&d))
                .collect()
        } else {
            Vec::new()
        };
        let no_network =
            (network == crate::network::Mode::None).then(|| match (v.network.mode, v.audience) {
                (Some(_), Audience::Json) => "\"network\": \"none\"".to_string(),
                (Some(_), Audience::Cli) => "--network none".to_string(),
                (None, _) => format!("profile {} has none", v.profile),
            });
        Policy {
            writable: writable.iter().map(|w| resolved(w)).collect(),
            workspace: v
                .paths
                .workspace
                .as_deref()
                .or_else(|| super::paths::default_workspace(&v.paths, sandbox, cwd)),
            writes_confined: isolation.is_some_and(|i| i.read_only_root) || enforced("fs-write"),
            deny_read,
            protected: isolation.map_or(&[], |i| &i.read_only),
            hidden_sockets: isolation.map_or(&[], |i| &i.hidden_sockets),
            no_network,
            explicit_network: v.network.mode.is_some(),
            homes: super::workspace::homes(),
            audience: v.audience,
            cwd: Some(cwd),
            profile_refuses_writes: (!super::paths::writes_allowed(sandbox))
                .then(|| v.profile.clone()),
            other_terminals: enforced("fs-read-deny"),
        }
    }
}

impl<'a> Policy<'a> {
    /// The policy of a command whose layers are known by what they reported (a session's
    /// command: the session holds no prepared Landlock layer): the deny list and the write
    /// rule are taken as enforced when Landlock said so.
    pub(crate) fn of_reported(
        v: &'a super::request::Validated,
        sandbox: &crate::sandbox::Sandbox,
        cwd: &'a Path,
        landlock: Option<&crate::landlock::Status>,
        isolation: Option<&'a super::isolation::Status>,
        network: crate::network::Mode,
    ) -> Policy<'a> {
        let mut p = Policy::of(v, sandbox, cwd, None, isolation, network);
        let enforced = |what: &str| landlock.is_some_and(|l| l.enforced.iter().any(|e| e == what));
        if enforced("fs-read-deny") {
            p.deny_read = crate::credentials::deny_read(&crate::credentials::Context::current())
                .into_iter()
                .chain(v.paths.deny_read.iter().cloned())
                .map(|d| resolved(&d))
                .collect();
        }
        p.writes_confined |= enforced("fs-write");
        p.other_terminals |= enforced("fs-read-deny");
        p
    }
}

impl Policy<'_> {
    /// The change that lets `dir` be written, or a workspace when `dir` is too broad.
    fn allow_write(&self, dir: &Path) -> String {
        let text = dir.to_string_lossy();
        if let Some(why) = super::workspace::too_broad(dir, &self.homes) {
            let ws = match self.audience {
                Audience::Json => "\"workspace\"",
                Audience::Cli => "--workspace",
            };
            return format!(
                "{ws} naming a directory of the job's own ({} is {why}, too broad to make writable)",
                shown(&text)
            );
        }
        match self.audience {
            Audience::Json => format!("\"writable_paths\": [{}]", json_string(&text)),
            Audience::Cli => format!("--allow-write {}", shell_word(&text)),
        }
    }

    fn allow_socket(&self, p: &str) -> String {
        match self.audience {
            Audience::Json => format!("\"allow_unix_sockets\": [{}]", json_string(p)),
            Audience::Cli => format!("--allow-unix-socket {}", shell_word(p)),
        }
    }

    fn allow_domain(&self, name: Option<&str>) -> String {
        let change = self.domain(name);
        match (self.explicit_network, self.audience) {
            (false, _) => change,
            (true, Audience::Json) => format!("\"network\": \"proxy\", {change}"),
            (true, Audience::Cli) => format!("--network proxy {change}"),
        }
    }

    fn domain(&self, name: Option<&str>) -> String {
        match (self.audience, name) {
            (Audience::Json, Some(n)) => format!("\"allow_domains\": [{}]", json_string(n)),
            (Audience::Json, None) => "\"allow_domains\": [\"NAME\"] (the host it needs)".into(),
            (Audience::Cli, Some(n)) => format!("--allow-domain {}", shell_word(n)),
            (Audience::Cli, None) => "--allow-domain NAME (the host it needs)".into(),
        }
    }

    /// A profile that writes (`write`: minimal plus file changes, its workspace the working
    /// directory), with `dir` made writable too when it is outside the working directory.
    fn allow_profile_write(&self, dir: &Path) -> String {
        let profile = match self.audience {
            Audience::Json => "\"profile\": \"write\"".to_string(),
            Audience::Cli => "--profile write".to_string(),
        };
        if self.cwd.is_some_and(|c| dir.starts_with(resolved(c))) {
            return profile;
        }
        format!("{profile} and {}", self.allow_write(dir))
    }

    fn outside_writable(&self) -> String {
        match self.workspace {
            Some(w) => format!(
                "read-only in the sandbox: outside the writable places (workspace {})",
                shown(&w.to_string_lossy())
            ),
            None => "read-only in the sandbox: outside the writable places (no workspace)".into(),
        }
    }

    /// The entry for a file path printed with an error of `kind` by a line whose operation
    /// is `op` (when it says), if the sandbox refused it.
    fn file(&self, kind: Kind, p: &str, op: Option<&str>) -> Option<(String, Option<String>)> {
        let path = resolved(Path::new(p));
        let under = |list: &[PathBuf]| list.iter().any(|d| path.starts_with(d));
        if matches!(kind, Kind::ConnRefused) {
            return self
                .hidden_sockets
                .iter()
                .any(|s| path == *s || Path::new(p) == s)
                .then(|| {
                    (
                        "hidden: a host unix socket outside the workspace".to_string(),
                        Some(self.allow_socket(p)),
                    )
                });
        }
        if kind == Kind::Dns {
            return None;
        }
        if self.other_terminals
            && kind == Kind::Denied
            && path.starts_with(super::paths::OTHER_TERMINALS)
        {
            return Some((OTHER_TERMINAL.into(), None));
        }
        // A host socket outside the writable places: refused at `connect` by the contained
        // tier's supervisor, which names it itself; the socket flag is what allows it.
        if kind == Kind::Denied
            && self.writes_confined
            && !under(&self.writable)
            && std::fs::symlink_metadata(&path)
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
        {
            return Some((
                "unreachable: a unix socket outside the writable places".into(),
                Some(self.allow_socket(p)),
            ));
        }
        if under(&self.deny_read) && kind != Kind::Busy {
            return Some((CREDENTIAL.into(), None));
        }
        // git writes `config.lock` beside the config and renames it over.
        let unlocked = p.strip_suffix(".lock").map(|u| resolved(Path::new(u)));
        if self
            .protected
            .iter()
            .any(|d| path.starts_with(d) || unlocked.as_ref().is_some_and(|u| u.starts_with(d)))
        {
            return Some((
                "protected: the repository's hooks and config are read-only".into(),
                None,
            ));
        }
        // Virtual file systems are the kernel's, made fresh in the view: not a rule of ours.
        let virtual_fs = ["/proc", "/sys", "/dev"]
            .iter()
            .any(|v| path.starts_with(v));
        if kind == Kind::Busy || virtual_fs || !host_may_write(&path) {
            return None;
        }
        // EACCES on a file that exists, from a line that names no operation: bash and sh
        // print `PATH: Permission denied` for a refused exec and a refused redirection alike,
        // Python its `PermissionError` for both. An exec is refused by the file's mode or
        // mount, or by a sandbox the job runs itself, none of which a writable place changes:
        // the cause is unknown, and a wrong hint is worse than none. A named operation
        // (`touch`, node's `open`) or a file that does not exist yet is a write.
        if kind == Kind::Denied
            && op.is_none_or(|o| matches!(o, "exec" | "execute" | "spawn" | "run"))
            && path.symlink_metadata().is_ok_and(|m| !m.is_dir())
        {
            return None;
        }
        let dir = if path.is_dir() {
            path.clone()
        } else {
            nearest_dir(path.parent().unwrap_or(Path::new("/")))
        };
        // The profile's filter answers file changes with EROFS wherever they go: naming a
        // writable place alone would not let the write through.
        if let (Kind::ReadOnly, Some(name)) = (kind, &self.profile_refuses_writes) {
            return Some((
                format!("read-only: profile {} refuses file changes", shown(name)),
                Some(self.allow_profile_write(&dir)),
            ));
        }
        if !self.writes_confined || under(&self.writable) {
            return None;
        }
        Some((self.outside_writable(), Some(self.allow_write(&dir))))
    }
}

/// Names the refusals `text` (the job's standard error) reports under `policy`.
pub(crate) fn name(text: &str, policy: &Policy) -> Found {
    let mut found = Found::default();
    if text.is_empty() {
        return found;
    }
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut looked = 0usize;
    let mut classified: HashSet<String> = HashSet::new();
    let mut add = |found: &mut Found, entry: Refused| {
        let key = (
            entry
                .path
                .clone()
                .or_else(|| entry.destination.clone())
                .unwrap_or_default(),
            entry.rule.clone(),
        );
        if !seen.insert(key) {
            return;
        }
        if found.entries.len() < MAX_ENTRIES {
            found.entries.push(entry);
        } else {
            found.omitted += 1;
        }
    };
    let all = lines(text);
    // A sandbox run inside the job (a project's test suite that uses it) names the refusals
    // of its own policy, which this job's policy knows nothing of: what it named is left to
    // it, so that one refusal is not advised twice, once wrongly. Text can claim this too;
    // it then only takes advice away.
    let mut nested_names: HashSet<String> = HashSet::new();
    for (_, line, _) in all.iter().filter(|(_, _, k)| *k == Kind::Nested) {
        let rest = line.split_once("sandbox: refused").map_or("", |(_, r)| r);
        let rest = rest.trim_start_matches(':').trim_start();
        let rest = rest.strip_prefix("reading ").unwrap_or(rest);
        let word = rest
            .split([' ', ':'])
            .next()
            .unwrap_or_default()
            .to_string();
        if let Some(p) = normalize(&word).filter(|_| word.starts_with('/')) {
            classified.insert(p);
        } else if !word.is_empty() {
            nested_names.insert(word);
        }
    }
    for (start, line, kind) in all {
        if kind == Kind::Nested {
            continue;
        }
        if kind == Kind::Dns {
            let Some(why) = &policy.no_network else {
                continue;
            };
            let dest = destination(line);
            if dest.as_ref().is_some_and(|d| nested_names.contains(d)) {
                continue;
            }
            add(
                &mut found,
                Refused {
                    allow: Some(policy.allow_domain(dest.as_deref())),
                    path: None,
                    destination: dest,
                    operation: operation(line, kind),
                    rule: format!("no network: {why}"),
                },
            );
            continue;
        }
        let mut paths = paths_in(line);
        if paths.is_empty() {
            paths = chain_paths(text, start);
        }
        if paths.is_empty() && matches!(kind, Kind::ReadOnly | Kind::Denied) {
            if let Some(cwd) = policy.cwd {
                paths = relative_paths(line, cwd);
            }
        }
        for p in paths {
            // Each distinct path is classified once (a program may print one error a
            // thousand times); at most MAX_PATHS of them.
            if looked >= MAX_PATHS || !classified.insert(p.clone()) {
                continue;
            }
            looked += 1;
            let op = operation(line, kind);
            if let Some((rule, allow)) = policy.file(kind, &p, op.as_deref()) {
                add(
                    &mut found,
                    Refused {
                        path: Some(p),
                        destination: None,
                        operation: op,
                        rule,
                        allow,
                    },
                );
            }
        }
    }
    found
}

/// The start of the rule of a destination the proxy refused.
const PROXY_RULE: &str = "the proxy refused it: ";

/// Adds the destinations the proxy refused (`--network proxy`) to `found`, one entry each:
/// `destination` the host as the client named it, `operation` `connect`, the proxy's reason
/// with the port in `rule`, and the change that allows it: the domain for a name not on the
/// allowlist, a pin for a name that resolves to an internal address, none for an address.
/// They come from the proxy's own record, not from what the program printed, so they are
/// certain; their stderr line is the proxy's own (`sandbox run`, `sandbox mcp`), so
/// [`warnings`] does not repeat them. They go before the text's entries.
pub(crate) fn proxied(found: &mut Found, dests: &[crate::proxy::Destination], audience: Audience) {
    let mut entries: Vec<Refused> = Vec::new();
    for d in dests.iter().filter(|d| !d.allowed) {
        let reason = d.reason.as_deref().unwrap_or("refused");
        let allow = if let Some(rest) = reason.strip_prefix("resolves to ") {
            let addr = rest.split(' ').next().unwrap_or_default();
            match addr.parse::<std::net::IpAddr>() {
                Ok(ip) if d.host.parse::<std::net::IpAddr>().is_err() => Some(match audience {
                    Audience::Json => format!(
                        "\"resolve\": {{{}: {}}}",
                        json_string(&format!("{}:{}", d.host, d.port)),
                        json_string(&ip.to_string())
                    ),
                    Audience::Cli => format!(
                        "--resolve {}",
                        shell_word(&crate::proxy::pins::flag_value(&d.host, d.port, ip))
                    ),
                }),
                _ => None,
            }
        } else {
            Some(match audience {
                Audience::Json => format!("\"allow_domains\": [{}]", json_string(&d.host)),
                Audience::Cli => format!("--allow-domain {}", shell_word(&d.host)),
            })
        };
        entries.push(Refused {
            path: None,
            destination: Some(d.host.clone()),
            operation: Some("connect".into()),
            rule: format!("{PROXY_RULE}{reason} (port {})", d.port),
            allow,
        });
    }
    if entries.is_empty() {
        return;
    }
    let room = MAX_ENTRIES.saturating_sub(entries.len().min(MAX_ENTRIES));
    let from_text = std::mem::take(&mut found.entries);
    let over = from_text.len().saturating_sub(room) + entries.len().saturating_sub(MAX_ENTRIES);
    entries.truncate(MAX_ENTRIES);
    entries.extend(from_text.into_iter().take(room));
    found.entries = entries;
    found.omitted += over as u64;
}

/// The rule of a credential's entry.
const CREDENTIAL: &str = "unreadable: a credential (the deny list)";

/// The rule of another terminal's entry: no change lets a job reach the user's terminals.
const OTHER_TERMINAL: &str = "unreachable: another terminal of the user (a job reaches its own \
                              terminal, held as a descriptor, and those it creates through \
                              /dev/ptmx)";

/// The warning line of each entry, and one for those not itemized. A refused read of a path
/// on the credential list names its entry: which kind of store, why it is listed, and that only
/// turning Landlock off lifts it (`ctx` resolves the list as the layer did).
pub(crate) fn warnings(
    found: &Found,
    audience: Audience,
    ctx: &crate::credentials::Context,
) -> Vec<String> {
    let off = match audience {
        Audience::Json => "landlock \"off\"",
        Audience::Cli => "--landlock off",
    };
    let mut out: Vec<String> = found
        .entries
        .iter()
        .filter(|e| !e.rule.starts_with(PROXY_RULE))
        .map(|e| {
            if let Some(line) = e
                .path
                .as_deref()
                .filter(|_| e.rule == CREDENTIAL)
                .and_then(|p| credential_line(p, ctx, off))
            {
                return line;
            }
            let what = e
                .path
                .as_deref()
                .or(e.destination.as_deref())
                .map_or_else(|| "a name lookup".to_string(), shown);
            let op = e
                .operation
                .as_deref()
                .map(|o| format!(" ({o})"))
                .unwrap_or_default();
            let allow = e
                .allow
                .as_deref()
                .map(|a| format!("; to allow: {a}"))
                .unwrap_or_else(|| "; no change offered".into());
            format!("sandbox: refused {what}{op}: {}{allow}", e.rule)
        })
        .collect();
    if found.omitted > 0 {
        out.push(format!(
            "sandbox: {} more refusals not itemized (at most {MAX_ENTRIES})",
            found.omitted
        ));
    }
    out
}

/// The line for a refused read of `path` when it lies beneath an entry of the credential list
/// (`None` for a path only the request's own `deny_read` names).
fn credential_line(path: &str, ctx: &crate::credentials::Context, off: &str) -> Option<String> {
    crate::credentials::list().iter().find_map(|entry| {
        let listed = crate::credentials::resolve(entry, ctx)
            .into_iter()
            .find(|l| Path::new(path).starts_with(l))?;
        Some(format!(
            "sandbox: refused: reading {}: {} is on the credential list ({}: {}; `sandbox \
             profiles credentials` lists them); only {off} lifts the list, with the whole \
             Landlock layer",
            shown(path),
            shown(&listed.to_string_lossy()),
            entry.kind,
            entry.reason
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text shorter than the shortest needle is answered without the automaton, and the
    /// answer is the automaton's: every needle, alone or inside a line, is a candidate, and
    /// the same text one byte shorter is not.
    #[test]
    fn short_texts_are_no_candidates_and_every_needle_is() {
        assert_eq!(SHORTEST, "EROFS".len());
        assert!(!is_candidate(b""));
        assert!(!is_candidate(b"EROF"));
        for (n, _) in NEEDLES {
            assert!(is_candidate(n.as_bytes()), "{n}");
            assert!(is_candidate(format!("x: {n} '/p'").as_bytes()), "{n}");
            assert!(!is_candidate(&n.as_bytes()[1..]), "{n}");
        }
    }

    fn policy<'a>(protected: &'a [PathBuf], hidden: &'a [PathBuf]) -> Policy<'a> {
        Policy {
            writable: vec![PathBuf::from("/nonexistent-ws")],
            workspace: Some(Path::new("/nonexistent-ws")),
            writes_confined: true,
            deny_read: vec![PathBuf::from("/nonexistent-home/.ssh")],
            protected,
            hidden_sockets: hidden,
            no_network: Some("profile shell has none".into()),
            explicit_network: false,
            homes: vec![PathBuf::from("/nonexistent-home")],
            audience: Audience::Cli,
            cwd: None,
            profile_refuses_writes: None,
            other_terminals: true,
        }
    }

    /// Relative paths are read only in the forms that certainly hold one, and taken from the
    /// job's working directory; a line naming an absolute path keeps it alone (control).
    #[test]
    fn relative_paths_are_taken_from_the_working_directory() {
        let cwd = Path::new("/w/p");
        // exec --json runs `/bin/sh` by its path, which then speaks first: not the file.
        assert!(paths_in("/bin/sh: 1: cannot create f: Read-only file system").is_empty());
        for (line, want) in [
            ("sh: 1: cannot create f: Read-only file system", "/w/p/f"),
            (
                "/bin/sh: 1: cannot create f: Read-only file system",
                "/w/p/f",
            ),
            ("touch: cannot touch 'g': Read-only file system", "/w/p/g"),
            ("bash: h: Read-only file system", "/w/p/h"),
            ("bash: line 1: sub/i: Read-only file system", "/w/p/sub/i"),
            (
                "PermissionError: [Errno 13] Permission denied: '../x/.ssh/id'",
                "/w/x/.ssh/id",
            ),
            (
                "mkdir: cannot create directory ‘d’: Read-only file system",
                "/w/p/d",
            ),
        ] {
            assert_eq!(relative_paths(line, cwd), [want], "{line}");
        }
        // Words of a message are not files; neither are flags, URLs, blanks or escapes.
        for line in [
            "git: error: Read-only file system",
            "cp: 'a b': Read-only file system",
            "x: '-rf': Read-only file system",
            "x: 'http://a/b': Read-only file system",
            "x: '': Read-only file system",
            "x: 'a\u{1b}[2J': Read-only file system",
            "Read-only file system",
        ] {
            assert!(relative_paths(line, cwd).is_empty(), "{line}");
        }
        // Named through `name`: under a policy with the working directory, not without it.
        let mut p = policy(&[], &[]);
        let text = "sh: 1: cannot create f: Read-only file system\n";
        assert!(name(text, &p).entries.is_empty());
        let tmp = std::env::temp_dir();
        p.cwd = Some(&tmp);
        let found = name(text, &p);
        let want = tmp.join("f");
        assert_eq!(
            found.entries.first().and_then(|e| e.path.as_deref()),
            Some(want.to_str().unwrap()),
            "{found:?}"
        );
    }

    /// Another terminal of the user is named as such, with no change offered; control:
    /// without the carve-out (no Landlock) the same text names nothing.
    #[test]
    fn another_terminal_is_named_without_a_change() {
        let text = "dd: failed to open '/dev/pts/3': Permission denied\n";
        let e = name(text, &policy(&[], &[])).entries;
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].rule, OTHER_TERMINAL);
        assert_eq!(e[0].allow, None);
        let p = Policy {
            other_terminals: false,
            writes_confined: false,
            ..policy(&[], &[])
        };
        assert!(name(text, &p).entries.is_empty());
    }

    /// A profile whose filter refuses file changes (minimal) is named as the rule, and the
    /// change offered is a profile that writes, with the directory when it is outside the
    /// working directory; a writable place alone would not let the write through.
    #[test]
    fn a_profile_that_refuses_file_changes_is_named_with_one_that_writes() {
        let tmp = std::env::temp_dir();
        let p = Policy {
            cwd: Some(&tmp),
            profile_refuses_writes: Some("minimal".into()),
            // Inside a writable place too: the filter refuses it all the same.
            writable: vec![tmp.clone()],
            ..policy(&[], &[])
        };
        let e = name("sh: 1: cannot create f: Read-only file system\n", &p).entries;
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].rule, "read-only: profile minimal refuses file changes");
        assert_eq!(e[0].allow.as_deref(), Some("--profile write"));
        let cwd = tmp.join("no-such-project-dir");
        let p = Policy {
            cwd: Some(&cwd),
            ..p
        };
        let e = name("touch: cannot touch '/tmp/x': Read-only file system\n", &p).entries;
        assert_eq!(
            e[0].allow.as_deref(),
            Some("--profile write and --allow-write /tmp"),
            "{e:?}"
        );
        // Control: a profile that writes gets the writable place only.
        let p = Policy {
            profile_refuses_writes: None,
            writable: vec![],
            ..p
        };
        let e = name("touch: cannot touch '/tmp/x': Read-only file system\n", &p).entries;
        assert_eq!(e[0].allow.as_deref(), Some("--allow-write /tmp"), "{e:?}");
    }

    /// What a sandbox run inside the job named itself is left to it (its policy refused
    /// it, which the outer job's knows nothing of); control: the same program's line alone is
    /// named by the outer job.
    #[test]
    fn a_refusal_a_nested_run_named_is_left_to_it() {
        let tmp = std::env::temp_dir();
        let target = tmp.join("sandbox-refusals-nested-x");
        let p = Policy {
            writable: vec![],
            ..policy(&[], &[])
        };
        let t = target.display();
        let program = format!(
            "bash: line 1: {t}: Read-only file system
"
        );
        let named = name(&program, &p).entries;
        assert_eq!(named.len(), 1, "{named:?}");
        let nested = format!(
            "{program}sandbox: refused {t}: read-only in the sandbox: outside the writable \
             places (workspace /w); to allow: --allow-write {}\n\
             curl: (6) Could not resolve host: a.example\n\
             sandbox: refused a.example (resolve): no network: profile shell has none; to \
             allow: --allow-domain a.example\n",
            tmp.display()
        );
        assert!(
            name(&nested, &p).entries.is_empty(),
            "{:?}",
            name(&nested, &p)
        );
    }

    /// The proxy's refused destinations come first, each with its change, within the bound;
    /// allowed ones are not refusals (control).
    #[test]
    fn proxy_refusals_come_first_and_are_bounded() {
        let dest = |host: &str, allowed: bool, reason: Option<&str>| crate::proxy::Destination {
            host: host.into(),
            port: 443,
            allowed,
            reason: reason.map(str::to_string),
            error: None,
            attempts: 1,
        };
        let mut f = name(
            "curl: (6) Could not resolve host: a.example\n",
            &policy(&[], &[]),
        );
        let dests = [
            dest("ok.example", true, None),
            dest("b.example", false, Some("not in the allowed domains")),
            dest(
                "local.example",
                false,
                Some("resolves to 127.0.0.1 (loopback)"),
            ),
            dest("10.0.0.1", false, Some("resolves to 10.0.0.1 (private)")),
        ];
        proxied(&mut f, &dests, Audience::Cli);
        let got: Vec<(Option<&str>, Option<&str>)> = f
            .entries
            .iter()
            .map(|e| (e.destination.as_deref(), e.allow.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("b.example"), Some("--allow-domain b.example")),
                (
                    Some("local.example"),
                    Some("--resolve local.example:443:127.0.0.1")
                ),
                (Some("10.0.0.1"), None),
                (Some("a.example"), Some("--allow-domain a.example")),
            ]
        );
        assert_eq!(
            f.entries[0].rule,
            "the proxy refused it: not in the allowed domains (port 443)"
        );
        // Their line is the proxy's own: not repeated in warnings.
        assert_eq!(warnings(&f, Audience::Cli, &ctx()).len(), 1);
        let mut f = Found::default();
        let many: Vec<_> = (0..40)
            .map(|i| {
                dest(
                    &format!("h{i}.example"),
                    false,
                    Some("not in the allowed domains"),
                )
            })
            .collect();
        proxied(&mut f, &many, Audience::Json);
        assert_eq!((f.entries.len(), f.omitted), (MAX_ENTRIES, 8));
        assert_eq!(
            f.entries[0].allow.as_deref(),
            Some("\"allow_domains\": [\"h0.example\"]")
        );
    }

    #[test]
    fn paths_are_taken_from_every_quoting() {
        assert_eq!(
            paths_in("touch: cannot touch '/etc/x': Read-only file system"),
            ["/etc/x"]
        );
        assert_eq!(
            paths_in("mkdir: cannot create directory ‘/opt/zz’: Read-only file system"),
            ["/opt/zz"]
        );
        assert_eq!(paths_in("bash: /etc/z: Read-only file system"), ["/etc/z"]);
        assert_eq!(
            paths_in("/bin/sh: 1: cannot create /etc/z: Read-only file system"),
            ["/etc/z"]
        );
        assert_eq!(paths_in("/etc/z: Read-only file system"), ["/etc/z"]);
        assert_eq!(
            paths_in("error: could not lock config file /w/.git/config: Read-only"),
            ["/w/.git/config"]
        );
        assert_eq!(
            paths_in("Error: EACCES: permission denied, mkdir \"/a/b/../c\""),
            ["/a/c"]
        );
        assert!(paths_in("see http://x/y: Permission denied").is_empty());
        assert!(paths_in("open 'rel/x': Permission denied").is_empty());
        assert!(paths_in("'/': Permission denied").is_empty());
        // Hostile text: NUL, escapes, a path beyond PATH_MAX, an empty quote.
        assert!(paths_in("'/a\0b': Permission denied").is_empty());
        assert!(paths_in("'/a\u{1b}[2J': Permission denied").is_empty());
        let huge = format!("'/{}': Permission denied", "a".repeat(MAX_PATH_BYTES));
        assert!(paths_in(&huge).is_empty());
        assert!(paths_in("'': Permission denied \"\"").is_empty());
        assert_eq!(
            paths_in("'/a\tb': Read-only file system"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_cause_chain_names_the_path_above() {
        let text = "error: failed to create package `n` at `/opt/n`\n\nCaused by:\n  \
                    failed to create directory `/opt/n`\n\nCaused by:\n  \
                    Read-only file system (os error 30)\n";
        let (start, _, kind) = lines(text)[0];
        assert_eq!(kind, Kind::ReadOnly);
        assert_eq!(chain_paths(text, start), ["/opt/n"]);
        // Not a chain: nothing is borrowed from another line.
        let text = "wrote '/opt/a'\nRead-only file system (os error 30)\n";
        let (start, _, _) = lines(text)[0];
        assert!(chain_paths(text, start).is_empty());
    }

    #[test]
    fn operations_and_destinations() {
        let l = "Error: EROFS: read-only file system, open '/x'";
        assert_eq!(operation(l, Kind::ReadOnly).as_deref(), Some("open"));
        let l = "mkdir: cannot create directory '/x': Read-only file system";
        assert_eq!(operation(l, Kind::ReadOnly).as_deref(), Some("mkdir"));
        assert_eq!(
            destination("curl: (6) Could not resolve host: example.invalid").as_deref(),
            Some("example.invalid")
        );
        assert_eq!(
            destination("npm error getaddrinfo ENOTFOUND registry.npmjs.org").as_deref(),
            Some("registry.npmjs.org")
        );
        assert_eq!(destination("Temporary failure in name resolution"), None);
    }

    #[test]
    fn credentials_protected_sockets_and_network_are_named() {
        let protected = [PathBuf::from("/nonexistent-ws/.git/config")];
        let hidden = [PathBuf::from("/nonexistent-run/agent.sock")];
        let p = policy(&protected, &hidden);
        let text = "PermissionError: [Errno 13] Permission denied: '/nonexistent-home/.ssh/id_rsa'\n\
                    error: could not lock config file /nonexistent-ws/.git/config.lock: Read-only file system\n\
                    connect /nonexistent-run/agent.sock: Connection refused\n\
                    curl: (6) Could not resolve host: example.invalid\n";
        let f = name(text, &p);
        let rules: Vec<&str> = f.entries.iter().map(|e| e.rule.as_str()).collect();
        assert_eq!(
            rules,
            [
                "unreadable: a credential (the deny list)",
                "protected: the repository's hooks and config are read-only",
                "hidden: a host unix socket outside the workspace",
                "no network: profile shell has none",
            ]
        );
        assert_eq!(
            f.entries[2].allow.as_deref(),
            Some("--allow-unix-socket /nonexistent-run/agent.sock")
        );
        assert_eq!(
            f.entries[3].allow.as_deref(),
            Some("--allow-domain example.invalid")
        );
    }

    #[test]
    fn nothing_is_named_without_the_rule() {
        let p = Policy {
            no_network: None,
            writes_confined: false,
            ..policy(&[], &[])
        };
        let text = "curl: (6) Could not resolve host: example.invalid\n\
                    touch: cannot touch '/tmp/x': Read-only file system\n";
        assert!(name(text, &p).entries.is_empty());
        assert!(name("", &p).entries.is_empty());
        assert!(name("all is well\n", &policy(&[], &[])).entries.is_empty());
    }

    /// The credential list resolved for a home at `/h`.
    fn ctx() -> crate::credentials::Context {
        crate::credentials::Context {
            home: Some("/h".into()),
            runtime_dir: None,
            root: false,
        }
    }

    #[test]
    fn a_refused_credential_read_names_its_entry_and_only_a_listed_one_does() {
        let refused = |path: &str| Refused {
            path: Some(path.into()),
            destination: None,
            operation: None,
            rule: CREDENTIAL.into(),
            allow: None,
        };
        let f = Found {
            entries: vec![refused("/h/.aws/credentials"), refused("/h/own-secret")],
            omitted: 0,
        };
        let lines = warnings(&f, Audience::Cli, &ctx());
        assert!(
            lines[0].starts_with(
                "sandbox: refused: reading /h/.aws/credentials: /h/.aws is on the credential list (cloud: "
            ) && lines[0].ends_with("only --landlock off lifts the list, with the whole Landlock layer"),
            "{}",
            lines[0]
        );
        // A path only the request's own deny_read names: the generic line, no entry invented.
        assert_eq!(
            lines[1],
            format!("sandbox: refused /h/own-secret: {CREDENTIAL}; no change offered")
        );
        // A whole component: `/h/.awsx` is not under `/h/.aws`.
        assert_eq!(credential_line("/h/.awsx", &ctx(), "x"), None);
    }

    #[test]
    fn entries_are_bounded_and_counted() {
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("curl: (6) Could not resolve host: h{i}.example\n"));
        }
        let f = name(&text, &policy(&[], &[]));
        assert_eq!(f.entries.len(), MAX_ENTRIES);
        assert_eq!(f.omitted, 100 - MAX_ENTRIES as u64);
        assert!(warnings(&f, Audience::Json, &ctx())
            .last()
            .unwrap()
            .contains("68 more refusals"));
    }

    /// The figures of docs/benchmarks.md ("Refusals named from stderr"): `cargo test
    /// --release -p sandbox-host --lib -- --ignored refusal_cost --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn refusal_cost() {
        let mib = 1 << 20;
        let fill = |line: &dyn Fn(usize) -> String| {
            let mut t = String::with_capacity(mib + 200);
            let mut i = 0;
            while t.len() < mib {
                t.push_str(&line(i));
                t.push('\n');
                i += 1;
            }
            t
        };
        let cases = [
            (
                "1 MiB of ordinary output",
                fill(&|i| format!("   Compiling crate-{i} v0.1.{i} (/work/src/crate-{i})")),
            ),
            (
                "1 MiB of one refusal repeated",
                fill(&|_| "touch: cannot touch '/etc/x': Read-only file system".into()),
            ),
            (
                "1 MiB of refusals, every path different",
                fill(&|i| format!("touch: cannot touch '/etc/d{i}/x': Read-only file system")),
            ),
        ];
        let p = policy(&[], &[]);
        for (what, text) in &cases {
            let _ = name(text, &p);
            let rounds = 50;
            let start = std::time::Instant::now();
            for _ in 0..rounds {
                std::hint::black_box(name(std::hint::black_box(text), &p));
            }
            let per = start.elapsed() / rounds;
            let mut line = Vec::new();
            let mut kept = super::super::tee::Kept::default();
            let start = std::time::Instant::now();
            for _ in 0..rounds {
                // In the pipe's reads of 64 KiB, as the tee gets them.
                for chunk in text.as_bytes().chunks(64 * 1024) {
                    super::super::tee::collect(chunk, &mut line, &mut kept);
                }
                kept.text.clear();
            }
            let tee = start.elapsed() / rounds;
            let start = std::time::Instant::now();
            for _ in 0..rounds {
                std::hint::black_box(memchr::memchr_iter(b'\n', text.as_bytes()).count());
            }
            let newlines = start.elapsed() / rounds;
            println!(
                "{what}: name {per:?}, tee's line filter {tee:?} (counting its newlines: \
                 {newlines:?})"
            );
        }
    }

    #[test]
    fn hostile_paths_are_printed_escaped() {
        let f = Found {
            entries: vec![Refused {
                path: Some("/a\u{1b}[31m".into()),
                destination: None,
                operation: None,
                rule: "r".into(),
                allow: None,
            }],
            omitted: 0,
        };
        assert!(!warnings(&f, Audience::Json, &ctx())[0].contains('\u{1b}'));
        assert_eq!(shell_word("/a b'c"), r"'/a b'\''c'");
    }
}
