//! A reader of git's configuration syntax, enough to find the keys that make git run a
//! command, and to remove them from a file without touching the rest. Used by `git_guard`
//! on the repository's control files after a job.
//!
//! It follows git's own parser (`config.c`): an optional UTF-8 byte-order mark; `#` and `;`
//! comments; `[section]`, `[section "subsection"]` (backslash escapes the next character) and
//! the old `[section.subsection]`; a key may follow a header on the same line; `key` alone
//! (a boolean), `key = value` with double quotes, the escapes `\\ \" \n \t \b`, comments after
//! the value and a backslash before the newline to continue it. What git refuses is refused
//! here too (an error with its line): the caller then treats the file as unreadable rather
//! than guess which keys git would have seen.

use std::ops::Range;

/// One `key = value` of a configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The section, lower case (`core`, `includeif`).
    pub section: String,
    /// The subsection as written (`"sub"`), or lower case for the old `[a.b]` form.
    pub subsection: Option<String>,
    /// The key's name, lower case.
    pub name: String,
    /// The value; `None` for a key written alone (a boolean true).
    pub value: Option<String>,
    /// The bytes of the entry in the file: from the key's first character to the end of its
    /// value (the newline excluded), continuation lines and trailing comments included.
    pub span: Range<usize>,
}

impl Entry {
    /// `section.subsection.name` as `git config` prints it (section and name lower case).
    pub fn key(&self) -> String {
        match &self.subsection {
            Some(s) => format!("{}.{}.{}", self.section, s, self.name),
            None => format!("{}.{}", self.section, self.name),
        }
    }
}

/// Why a file could not be read as configuration: git would refuse it too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Malformed {
    /// The line (from 1) where reading stopped.
    pub line: usize,
}

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    /// The next character, with `\r\n` read as `\n` (as git does).
    fn next(&mut self) -> Option<u8> {
        let c = *self.text.get(self.pos)?;
        self.pos += 1;
        if c == b'\r' && self.text.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            return Some(b'\n');
        }
        Some(c)
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn line(&self) -> usize {
        1 + self.text[..self.pos.min(self.text.len())]
            .iter()
            .filter(|c| **c == b'\n')
            .count()
    }

    fn malformed(&self) -> Malformed {
        Malformed { line: self.line() }
    }
}

/// Reads every entry of `text`, in order.
pub(crate) fn parse(text: &[u8]) -> Result<Vec<Entry>, Malformed> {
    let mut r = Reader {
        text,
        pos: if text.starts_with(b"\xef\xbb\xbf") {
            3
        } else {
            0
        },
    };
    let mut entries = Vec::new();
    let mut section: Option<(String, Option<String>)> = None;
    let mut comment = false;
    while let Some(c) = r.next() {
        if c == b'\n' {
            comment = false;
            continue;
        }
        if comment || c.is_ascii_whitespace() {
            continue;
        }
        if c == b'#' || c == b';' {
            comment = true;
            continue;
        }
        if c == b'[' {
            section = Some(header(&mut r)?);
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(r.malformed());
        }
        let start = r.pos - 1;
        let Some((sec, sub)) = section.clone() else {
            // A key before any section: git refuses the file.
            return Err(r.malformed());
        };
        let mut name = String::from(c.to_ascii_lowercase() as char);
        while let Some(c) = r.peek() {
            if c.is_ascii_alphanumeric() || c == b'-' {
                name.push(c.to_ascii_lowercase() as char);
                r.pos += 1;
            } else {
                break;
            }
        }
        while matches!(r.peek(), Some(b' ' | b'\t')) {
            r.pos += 1;
        }
        let value = match r.peek() {
            None => None,
            Some(b'\n') => None,
            Some(b'\r') if r.text.get(r.pos + 1) == Some(&b'\n') => None,
            Some(b'=') => {
                r.pos += 1;
                Some(value(&mut r)?)
            }
            Some(_) => return Err(r.malformed()),
        };
        // The value reader stops before the newline; a bare key's comment runs to it.
        while let Some(c) = r.peek() {
            if c == b'\n' || (c == b'\r' && r.text.get(r.pos + 1) == Some(&b'\n')) {
                break;
            }
            r.pos += 1;
        }
        entries.push(Entry {
            section: sec,
            subsection: sub,
            name,
            value,
            span: start..r.pos,
        });
    }
    Ok(entries)
}

/// Reads a section header after its `[`.
fn header(r: &mut Reader) -> Result<(String, Option<String>), Malformed> {
    let mut name = String::new();
    loop {
        let c = r.next().ok_or_else(|| r.malformed())?;
        if c == b']' {
            break;
        }
        if c.is_ascii_whitespace() {
            // `[section "subsection"]`
            let mut c = c;
            while c.is_ascii_whitespace() && c != b'\n' {
                c = r.next().ok_or_else(|| r.malformed())?;
            }
            if c != b'"' || name.is_empty() {
                return Err(r.malformed());
            }
            let mut sub = Vec::new();
            loop {
                let c = r.next().ok_or_else(|| r.malformed())?;
                match c {
                    b'\n' => return Err(r.malformed()),
                    b'"' => break,
                    b'\\' => match r.next() {
                        None | Some(b'\n') => return Err(r.malformed()),
                        Some(c) => sub.push(c),
                    },
                    c => sub.push(c),
                }
            }
            if r.next() != Some(b']') {
                return Err(r.malformed());
            }
            return Ok((name, Some(String::from_utf8_lossy(&sub).into_owned())));
        }
        if !(c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
            return Err(r.malformed());
        }
        name.push(c.to_ascii_lowercase() as char);
    }
    if name.is_empty() {
        return Err(r.malformed());
    }
    // The old `[section.subsection]` form: git lower-cases the whole of it.
    Ok(match name.split_once('.') {
        Some((s, sub)) => (s.to_string(), Some(sub.to_string())),
        None => (name, None),
    })
}

/// Reads a value after its `=`, up to (not including) the newline that ends it. As git's
/// `parse_value`: whitespace outside quotes is dropped at the start and the end and kept as
/// that many spaces between other characters.
fn value(r: &mut Reader) -> Result<String, Malformed> {
    let mut out: Vec<u8> = Vec::new();
    let mut quoted = false;
    let mut comment = false;
    let mut spaces = 0;
    loop {
        let at = r.pos;
        let Some(c) = r.next() else {
            if quoted {
                return Err(r.malformed());
            }
            break;
        };
        if c == b'\n' {
            if quoted {
                return Err(r.malformed());
            }
            r.pos = at;
            break;
        }
        if comment {
            continue;
        }
        if c.is_ascii_whitespace() && !quoted {
            if !out.is_empty() {
                spaces += 1;
            }
            continue;
        }
        if !quoted && (c == b';' || c == b'#') {
            comment = true;
            continue;
        }
        out.extend(std::iter::repeat_n(b' ', spaces));
        spaces = 0;
        match c {
            b'\\' => match r.next() {
                // A continuation: the value goes on with the next line.
                Some(b'\n') => {}
                Some(b't') => out.push(b'\t'),
                Some(b'b') => out.push(0x08),
                Some(b'n') => out.push(b'\n'),
                Some(b'\\') => out.push(b'\\'),
                Some(b'"') => out.push(b'"'),
                _ => return Err(r.malformed()),
            },
            b'"' => quoted = !quoted,
            c => out.push(c),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Whether the key makes git run a command (or read configuration from elsewhere, or allow a
/// transport that runs one): a change to it decides what runs on the user's next git command.
///
/// Named keys first, then a rule on the name's ending for the documented families
/// (`difftool.*.cmd`, `sendemail.toCmd`, `trailer.*.command`, `gpg.program`, ...), so that a
/// key of that shape git adds later is caught too. A harmless key with such a name is caught
/// as well: removed, never run, which is the side to err on.
pub(crate) fn runs_command(e: &Entry) -> bool {
    let name = e.name.as_str();
    let sub = e.subsection.is_some();
    let bang = || {
        e.value
            .as_deref()
            .is_some_and(|v| v.trim_start().starts_with('!'))
    };
    let named = match e.section.as_str() {
        "core" => matches!(
            name,
            "fsmonitor" | "hookspath" | "pager" | "editor" | "askpass" | "gitproxy"
        ),
        "include" => name == "path",
        "includeif" => name == "path",
        "alias" => bang(),
        "pager" => true,
        "diff" => (!sub && name == "external") || (sub && name == "textconv"),
        "merge" => sub && name == "driver",
        "filter" => matches!(name, "clean" | "smudge" | "process"),
        "credential" => name == "helper",
        "submodule" => sub && name == "update" && bang(),
        "protocol" => name == "allow",
        "remote" => matches!(name, "uploadpack" | "receivepack" | "vcs"),
        "difftool" | "mergetool" | "man" | "browser" => sub && name == "path",
        "web" => name == "browser",
        "imap" => name == "tunnel",
        "sendemail" => name == "smtpserver",
        "interactive" => name == "difffilter",
        "instaweb" => name == "httpd",
        "init" => name == "templatedir",
        _ => false,
    };
    named
        || [
            "cmd", "command", "program", "hook", "editor", "pager", "helper", "driver",
        ]
        .iter()
        .any(|end| name.ends_with(end))
}

/// `text` without the entries at `spans`: a line left with nothing but whitespace goes with
/// its newline; a header before a removed key on the same line stays.
pub(crate) fn without(text: &[u8], spans: &[Range<usize>]) -> Vec<u8> {
    let mut cuts: Vec<Range<usize>> = spans
        .iter()
        .map(|s| {
            let line_start = text[..s.start]
                .iter()
                .rposition(|c| *c == b'\n')
                .map_or(0, |i| i + 1);
            let end = match text.get(s.end) {
                Some(b'\n') => s.end + 1,
                Some(b'\r') if text.get(s.end + 1) == Some(&b'\n') => s.end + 2,
                _ => s.end,
            };
            if text[line_start..s.start]
                .iter()
                .all(u8::is_ascii_whitespace)
            {
                line_start..end
            } else {
                s.clone()
            }
        })
        .collect();
    cuts.sort_by_key(|c| c.start);
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    for c in cuts {
        if c.start >= at {
            out.extend_from_slice(&text[at..c.start]);
            at = c.end;
        }
    }
    out.extend_from_slice(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<(String, Option<String>)> {
        parse(text.as_bytes())
            .unwrap()
            .into_iter()
            .map(|e| (e.key(), e.value))
            .collect()
    }

    #[test]
    fn sections_subsections_and_values() {
        let text =
            "\u{feff}# c\n[Core]\n\tFSMonitor = \"x y\" ; c\n\tbare\n[remote \"Or\\\"ig\"]\n\
                    url = a\\\n b\n[a.B] k=v\n[s]k\t=  v  w  # c\n";
        assert_eq!(
            keys(text),
            vec![
                ("core.fsmonitor".into(), Some("x y".into())),
                ("core.bare".into(), None),
                ("remote.Or\"ig.url".into(), Some("a b".into())),
                ("a.b.k".into(), Some("v".into())),
                ("s.k".into(), Some("v  w".into())),
            ]
        );
    }

    #[test]
    fn escapes_and_crlf() {
        let text = "[a]\r\n\tk = \"x\\ty\\\\\\\"\"\r\n\tj=1\r\n";
        assert_eq!(
            keys(text),
            vec![
                ("a.k".into(), Some("x\ty\\\"".into())),
                ("a.j".into(), Some("1".into()))
            ]
        );
    }

    #[test]
    fn what_git_refuses_is_refused() {
        for bad in [
            "k = v\n",
            "[a\n",
            "[a \"b]\n",
            "[a]\n1k = v\n",
            "[a]\nk v\n",
            "[a]\nk = \"open\n",
            "[a]\nk = \\q\n",
            "[]\n",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert_eq!(parse(b"[a]\n\n[b]\n!\n"), Err(Malformed { line: 4 }));
    }

    #[test]
    fn command_keys() {
        let run = |text: &str| {
            parse(text.as_bytes())
                .unwrap()
                .iter()
                .map(runs_command)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            run(
                "[core]\nfsmonitor=x\nhooksPath=h\nsshCommand=s\npager=p\neditor=e\n\
                 askPass=a\ngitProxy=g\nbare=false\nfilemode=true\nworktree=../w\n"
            ),
            [true, true, true, true, true, true, true, false, false, false]
        );
        assert_eq!(
            run("[alias]\nst=status\nx=!sh\n[submodule \"s\"]\nurl=u\nupdate=!x\npath=p\n"),
            [false, true, false, true, false]
        );
        assert_eq!(
            run(
                "[include]\npath=x\n[includeIf \"gitdir:/\"]\npath=y\n[diff \"d\"]\ntextconv=t\n\
                 [diff]\nexternal=e\n[merge \"m\"]\ndriver=d\n[filter \"f\"]\nclean=c\n\
                 smudge=s\nprocess=p\nrequired\n[credential]\nhelper=h\n[gpg]\nprogram=g\n\
                 [gpg \"ssh\"]\ndefaultKeyCommand=k\n[uploadpack]\npackObjectsHook=h\n\
                 [remote \"o\"]\nurl=u\nfetch=f\nuploadpack=u\nreceivepack=r\n[pager]\nlog=l\n\
                 [sequence]\neditor=e\n[difftool \"t\"]\ncmd=c\npath=p\n[sendemail]\n\
                 toCmd=t\n[user]\nname=n\n[branch \"b\"]\nremote=o\nmerge=refs/heads/b\n"
            ),
            [
                true, true, true, true, true, true, true, true, false, true, true, true, true,
                false, false, true, true, true, true, true, true, true, false, false, false
            ]
        );
    }

    #[test]
    fn removal_keeps_the_rest() {
        let text = b"[core]\n\tbare = false\n\tfsmonitor = \"a\\\n b\" # c\n[x] k = v\n[y]\n";
        let e = parse(text).unwrap();
        let spans: Vec<_> = e
            .iter()
            .filter(|e| e.name != "bare")
            .map(|e| e.span.clone())
            .collect();
        assert_eq!(
            String::from_utf8(without(text, &spans)).unwrap(),
            "[core]\n\tbare = false\n[x] \n[y]\n"
        );
        assert_eq!(
            keys(std::str::from_utf8(&without(text, &spans)).unwrap()),
            vec![("core.bare".into(), Some("false".into()))]
        );
    }
}
