//! Parse and compile errors. They keep the offending input (which variable, which entry, the
//! text) so one line tells the user exactly what to change; no allocation, so the preload can
//! build and print them before `main`.

use core::fmt;

/// Where the bad input came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `SECCOMP_SYSCALL_ALLOW` (or a profile's `allow` list).
    Allow,
    /// `SECCOMP_SYSCALL_DENY` (or a profile's `deny` list).
    Deny,
    /// `SECCOMP_DEFAULT_ACTION` (or a profile's `default_action`).
    DefaultAction,
}

impl Source {
    /// The environment variable this source is read from.
    pub const fn var(self) -> &'static str {
        match self {
            Source::Allow => "SECCOMP_SYSCALL_ALLOW",
            Source::Deny => "SECCOMP_SYSCALL_DENY",
            Source::DefaultAction => "SECCOMP_DEFAULT_ACTION",
        }
    }

    /// The field of a profile file this source is read from.
    pub const fn field(self) -> &'static str {
        match self {
            Source::Allow => "allow",
            Source::Deny => "deny",
            Source::DefaultAction => "default_action",
        }
    }
}

/// What is wrong with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An empty entry (`a::b`, a leading or trailing `:`).
    EmptyEntry,
    /// No syscall of this name on the target architecture.
    UnknownSyscall,
    /// No group of this name.
    UnknownGroup,
    /// Not an action (`kill`, `trap`, `log`, `allow`, `errno`, `errno:NAME`, an errno name).
    UnknownAction,
    /// No constant of this name.
    UnknownConstant,
    /// A malformed number.
    BadNumber,
    /// An argument reference other than `a0`..`a5` (optionally `.64`).
    BadArgument,
    /// A value wider than the bits of the argument the kernel reads (32 for `int`, 16 for
    /// `umode_t`).
    ValueTooWide,
    /// A syntax error; the text says what was expected.
    Syntax(&'static str),
    /// Whitespace outside parentheses.
    Whitespace,
    /// A byte that is not printable ASCII.
    NotAscii,
    /// The whole value is longer than [`crate::limits::MAX_VALUE_LEN`].
    TooLong,
    /// More than [`crate::limits::MAX_ENTRIES`] entries.
    TooManyEntries,
    /// More argument rules, alternatives or conditions than a policy holds.
    TooManyRules,
    /// Groups nested deeper than the grammar allows (or a group including itself).
    GroupTooDeep,
    /// Argument conditions on a group.
    ConditionOnGroup,
    /// The compiled program exceeds the kernel's 4096-instruction limit.
    FilterTooLarge,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::EmptyEntry => f.write_str("empty entry (two `:` in a row, or a `:` at an end)"),
            ErrorKind::UnknownSyscall => f.write_str("unknown syscall on this architecture"),
            ErrorKind::UnknownGroup => f.write_str("unknown group (`sandbox profiles groups` lists them)"),
            ErrorKind::UnknownAction => f.write_str(
                "unknown action (use kill, trap, log, allow, errno or an errno name such as EACCES)",
            ),
            ErrorKind::UnknownConstant => f.write_str("unknown constant"),
            ErrorKind::BadNumber => f.write_str("malformed number"),
            ErrorKind::BadArgument => f.write_str("argument must be a0..a5, or a0.64..a5.64 for all 64 bits"),
            ErrorKind::ValueTooWide => f.write_str("value is wider than the argument: the kernel reads only the low 32 bits of an int (16 of a umode_t); aN.64 compares the whole register"),
            ErrorKind::Syntax(what) => write!(f, "syntax error: {what}"),
            ErrorKind::Whitespace => f.write_str("whitespace is only allowed inside parentheses"),
            ErrorKind::NotAscii => f.write_str("only printable ASCII is allowed"),
            ErrorKind::TooLong => write!(f, "value longer than {} bytes", crate::limits::MAX_VALUE_LEN),
            ErrorKind::TooManyEntries => write!(f, "more than {} entries", crate::limits::MAX_ENTRIES),
            ErrorKind::TooManyRules => f.write_str("too many argument rules or conditions for one policy"),
            ErrorKind::GroupTooDeep => f.write_str("groups nested too deeply"),
            ErrorKind::ConditionOnGroup => f.write_str("a group cannot take argument conditions"),
            ErrorKind::FilterTooLarge => f.write_str("the filter exceeds the kernel's 4096-instruction limit"),
        }
    }
}

/// Up to 48 bytes of the offending text, kept inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Token {
    buf: [u8; 48],
    len: u8,
    truncated: bool,
}

impl Token {
    /// Copies (a prefix of) `text`, replacing non-printable bytes with `?`.
    pub fn new(text: &str) -> Token {
        let mut buf = [0u8; 48];
        let n = text.len().min(buf.len());
        for (dst, src) in buf.iter_mut().zip(text.bytes().take(n)) {
            *dst = if (0x20..0x7f).contains(&src) {
                src
            } else {
                b'?'
            };
        }
        Token {
            buf,
            len: n as u8,
            truncated: text.len() > n,
        }
    }

    /// The kept text.
    pub fn as_str(&self) -> &str {
        // Only printable ASCII is stored.
        core::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or("?")
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.truncated {
            f.write_str("...")?;
        }
        Ok(())
    }
}

/// A policy that cannot be built, with the variable, entry and text that caused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// Which input.
    pub source: Source,
    /// 1-based entry number within that input (0 when the error is about the whole value).
    pub entry: usize,
    /// The offending text.
    pub token: Token,
    /// What is wrong.
    pub kind: ErrorKind,
}

impl Error {
    /// An error about the whole policy rather than one entry.
    pub fn whole(source: Source, kind: ErrorKind) -> Error {
        Error {
            source,
            entry: 0,
            token: Token::new(""),
            kind,
        }
    }

    /// This error worded for a profile file: it names the file's fields (`allow entry 2`,
    /// `default_action`), not the environment variables the preload reads.
    pub fn in_profile(&self) -> InProfile<'_> {
        InProfile(self)
    }

    /// The message, naming the input `name`.
    fn write(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        if self.source == Source::DefaultAction && self.kind == ErrorKind::UnknownAction {
            // `allow` is an action for entries but not a default: say so, rather than listing it.
            return write!(
                f,
                "{} `{}`: unknown default action (use kill, trap, log, errno, errno:NAME, \
                 errno:NUMBER or an errno name such as EACCES; allow is not a default)",
                name, self.token
            );
        }
        if self.entry == 0 {
            if self.token.len == 0 {
                write!(f, "{}: {}", name, self.kind)
            } else {
                write!(f, "{} `{}`: {}", name, self.token, self.kind)
            }
        } else {
            write!(
                f,
                "{} entry {} `{}`: {}",
                name, self.entry, self.token, self.kind
            )
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, self.source.var())
    }
}

/// An [`Error`] worded for a profile file (see [`Error::in_profile`]).
pub struct InProfile<'a>(&'a Error);

impl fmt::Display for InProfile<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, self.0.source.field())
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
