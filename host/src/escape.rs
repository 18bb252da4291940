//! Escaping of the text the host prints on stderr. Much of what a line names comes from the
//! job or the caller (a program's path, argv\[0\], a path in a violation, a domain name, a file
//! name in a leak report): a newline in it would start a line of its own, which a reader (or a
//! client parsing `sandbox:` lines) takes for the host's; a carriage return or an escape
//! sequence would overwrite or hide what the host printed. Every stderr line the host makes
//! goes through [`line`] (or [`eprint_line`]), so no text of the job reaches the terminal raw.
//!
//! What is escaped: C0 controls (newline as `\n`, carriage return `\r`, tab `\t`, the others
//! `\xNN`), DEL (`\x7f`), C1 controls (`\u{80}`..`\u{9f}`), the bidirectional overrides and
//! isolates (`\u{202e}`...) and bytes that are not UTF-8 (`\xNN`, one per byte: a path is
//! shown as its bytes, not as U+FFFD). A backslash is left as
//! it is, so that escaping escaped text changes nothing (the stderr writer escapes whole lines
//! and a path may have been escaped already); a name that holds a literal `\n` therefore looks
//! like one that holds a newline, which misleads no reader into seeing a second line. JSON
//! output needs none of this: serde escapes every control character in strings.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

/// Whether `c` is shown escaped: the controls, and the bidirectional overrides and isolates,
/// which reorder what a terminal shows after them (a path could make its line read as another).
fn is_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends `c` escaped to `out`.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `bytes` with control characters and invalid UTF-8 escaped; borrowed when nothing needed
/// escaping (the common case costs one scan, no allocation).
pub fn bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return text(s);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        push_text(&mut out, chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// `s` with control characters escaped.
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    push_text(&mut out, s);
    Cow::Owned(out)
}

fn push_text(out: &mut String, s: &str) {
    for c in s.chars() {
        if is_control(c) {
            push_escaped(out, c);
        } else {
            out.push(c);
        }
    }
}

/// A path as its bytes, escaped: what lines show in place of `Path::display`, which would turn
/// invalid UTF-8 into U+FFFD and keep control characters.
pub fn path(p: &Path) -> Cow<'_, str> {
    use std::os::unix::ffi::OsStrExt;
    bytes(p.as_os_str().as_bytes())
}

/// One line of the host's: `msg` formatted, then escaped as a whole (so a line is always one
/// line, whatever its parts held).
pub fn line(msg: impl std::fmt::Display) -> String {
    let s = msg.to_string();
    match text(&s) {
        Cow::Borrowed(_) => s,
        Cow::Owned(o) => o,
    }
}

/// Writes [`line`]`(msg)` and a newline to stderr, as one write.
pub fn eprint_line(msg: impl std::fmt::Display) {
    use std::io::Write;
    let mut l = line(msg);
    l.push('\n');
    let _ = std::io::stderr().write_all(l.as_bytes());
}

/// Stderr for the log subscriber (`SANDBOX_LOG`): each write is one formatted event, ending in
/// a newline; everything before that newline is escaped, so a field cannot start a line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stderr;

impl std::io::Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        let mut l = bytes(body).into_owned();
        if body.len() < buf.len() {
            l.push('\n');
        }
        std::io::stderr().write_all(l.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_and_unchanged() {
        assert!(matches!(text("/usr/bin/git é"), Cow::Borrowed(_)));
        assert_eq!(text("a\\nb"), "a\\nb");
    }

    #[test]
    fn controls_are_escaped() {
        assert_eq!(text("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(text("\x1b[31mred\x07\x7f"), "\\x1b[31mred\\x07\\x7f");
        assert_eq!(text("x\u{85}y\u{9b}z"), "x\\u{85}y\\u{9b}z");
        assert_eq!(text("\0"), "\\x00");
        assert_eq!(text("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn invalid_utf8_is_shown_as_bytes() {
        assert_eq!(bytes(b"a\xffb\xc3"), "a\\xffb\\xc3");
        assert_eq!(bytes("é".as_bytes()), "é");
        assert_eq!(bytes(b"\xff\n"), "\\xff\\n");
    }

    #[test]
    fn json_output_is_escaped_by_serde() {
        let s = serde_json::to_string("a\nsandbox: x\r\x1b[2K\x07").unwrap();
        assert!(!s.chars().any(|c| c.is_ascii_control()), "{s}");
        assert_eq!(s, r#""a\nsandbox: x\r\u001b[2K\u0007""#);
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let once = bytes(b"/tmp/a\nsandbox: forged\x1b[2K\xfe").into_owned();
        assert_eq!(text(&once), once);
        assert!(!once.contains('\n'));
        assert_eq!(line(format_args!("x {once}")).lines().count(), 1);
    }
}
