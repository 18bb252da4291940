//! Secret-leak detection in a request's output.
//!
//! A request may mark some of its `env` variables as secret (`secret_env`): the program gets
//! their values, but they must not come back in what it prints. The output of every request is
//! also searched for well-known token shapes (AWS access key ids, GitHub tokens, private-key
//! blocks, `sk-` API keys), whether or not secrets were named. Each is found as written
//! (plain), URL-encoded, base64 (standard or URL-safe alphabet, in runs of at least
//! [`MIN_BASE64_CHARS`] characters, line-wrapped or not) and hex (runs of at least
//! [`MIN_HEX_CHARS`] digits). A [`Leak`] says what was found, in which stream, in which
//! encoding and where, never the value itself; [`Scanner::redact`] replaces what was found.
//!
//! The whole collected stream is scanned at once after the program ended, so a secret split
//! across two reads (or two writes of the program) is found like any other. One pass of an
//! Aho-Corasick automaton finds plain values and token prefixes; encoded text is decoded
//! only where a run of the encoding's alphabet is long enough, which ordinary text rarely has.

use aho_corasick::AhoCorasick;
use serde::Serialize;
use std::sync::OnceLock;

/// Shortest secret value accepted: shorter ones cannot be told apart from ordinary output.
pub const MIN_SECRET_BYTES: usize = 8;
/// Most variables one request may mark secret.
pub const MAX_SECRETS: usize = 64;
/// Shortest run of base64 characters that is decoded and searched.
pub const MIN_BASE64_CHARS: usize = 24;
/// Shortest run of hex digits that is decoded and searched.
pub const MIN_HEX_CHARS: usize = 40;

/// What was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakKind {
    /// The value of a variable named in `secret_env`.
    SecretEnv,
    /// An AWS access key id (`AKIA`, `ASIA`, `ABIA`, `ACCA` and 16 characters).
    AwsAccessKey,
    /// A GitHub token (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`).
    GithubToken,
    /// A PEM private-key block (`-----BEGIN ... PRIVATE KEY-----`).
    PrivateKey,
    /// An `sk-` API key (OpenAI, Anthropic and others).
    ApiKey,
}

impl LeakKind {
    fn label(self) -> &'static str {
        match self {
            LeakKind::SecretEnv => "secret_env",
            LeakKind::AwsAccessKey => "aws_access_key",
            LeakKind::GithubToken => "github_token",
            LeakKind::PrivateKey => "private_key",
            LeakKind::ApiKey => "api_key",
        }
    }
}

/// How the leaked value was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// As is.
    Plain,
    /// Percent-encoded (`%2F`), as in URLs and form bodies.
    UrlEncoded,
    /// Base64, standard or URL-safe alphabet.
    Base64,
    /// Hexadecimal, either case.
    Hex,
}

/// One finding, for one stream: what, how encoded, where first, how often. Never the value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Leak {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// What was found.
    pub kind: LeakKind,
    /// For `secret_env`: the variable's name.
    pub variable: Option<String>,
    /// How it was written.
    pub encoding: Encoding,
    /// Byte offset of the first occurrence (of the encoded run that holds it) in the stream
    /// as the program wrote it, before any redaction.
    pub offset: usize,
    /// How many times it was found in this stream and encoding.
    pub count: usize,
}

/// Token prefixes searched in every output; each is checked further by [`shape_end`].
const PREFIXES: &[(&str, LeakKind)] = &[
    ("AKIA", LeakKind::AwsAccessKey),
    ("ASIA", LeakKind::AwsAccessKey),
    ("ABIA", LeakKind::AwsAccessKey),
    ("ACCA", LeakKind::AwsAccessKey),
    ("ghp_", LeakKind::GithubToken),
    ("gho_", LeakKind::GithubToken),
    ("ghu_", LeakKind::GithubToken),
    ("ghs_", LeakKind::GithubToken),
    ("ghr_", LeakKind::GithubToken),
    ("github_pat_", LeakKind::GithubToken),
    ("-----BEGIN", LeakKind::PrivateKey),
    ("sk-", LeakKind::ApiKey),
];

/// A finding with its place in the scanned text.
#[derive(Clone, Debug)]
struct Hit {
    kind: LeakKind,
    secret: Option<usize>,
    encoding: Encoding,
    start: usize,
    end: usize,
}

/// What one search pattern stands for: a token prefix or a secret value, written in one
/// encoding.
#[derive(Clone, Copy, Debug)]
struct Pattern {
    kind: LeakKind,
    secret: Option<usize>,
    encoding: Encoding,
}

/// The searcher for one request: token prefixes plus the request's secret values.
///
/// One automaton holds each prefix and value as written, its hex forms (both cases) and its
/// base64 forms (the characters that do not depend on the neighbouring bytes, at each of the
/// three byte offsets, in both alphabets), so one pass over the output finds every candidate;
/// only around a candidate in an encoding is the text decoded and checked.
pub struct Scanner {
    names: Vec<String>,
    values: Vec<Vec<u8>>,
    /// Every pattern in every encoding.
    all: AhoCorasick,
    patterns: Vec<Pattern>,
    /// The plain patterns only, for decoded text (their ids are the first ones of `all`).
    plain: AhoCorasick,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values.
        f.debug_struct("Scanner")
            .field("secret_env", &self.names)
            .finish()
    }
}

impl Scanner {
    /// A scanner for these `(name, value)` secrets (values validated by the request) and the
    /// token shapes.
    pub fn new(secrets: &[(String, String)]) -> Scanner {
        let names = secrets.iter().map(|(n, _)| n.clone()).collect();
        let values: Vec<Vec<u8>> = secrets.iter().map(|(_, v)| v.as_bytes().to_vec()).collect();
        let plain: Vec<(Vec<u8>, LeakKind, Option<usize>)> = PREFIXES
            .iter()
            .map(|(p, k)| (p.as_bytes().to_vec(), *k, None))
            .chain(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.clone(), LeakKind::SecretEnv, Some(i))),
            )
            .collect();
        let mut texts: Vec<Vec<u8>> = Vec::new();
        let mut patterns = Vec::new();
        let mut add = |t: Vec<u8>, kind, secret, encoding| {
            patterns.push(Pattern {
                kind,
                secret,
                encoding,
            });
            texts.push(t);
        };
        for (t, kind, secret) in &plain {
            add(t.clone(), *kind, *secret, Encoding::Plain);
        }
        for (t, kind, secret) in &plain {
            let hex: String = t.iter().map(|b| format!("{b:02x}")).collect();
            add(
                hex.to_uppercase().into_bytes(),
                *kind,
                *secret,
                Encoding::Hex,
            );
            add(hex.into_bytes(), *kind, *secret, Encoding::Hex);
            let mut forms: Vec<Vec<u8>> = Vec::new();
            for offset in 0..3 {
                for url_safe in [false, true] {
                    let f = base64_inner(t, offset, url_safe);
                    if f.len() >= 3 && !forms.contains(&f) {
                        forms.push(f);
                    }
                }
            }
            for f in forms {
                add(f, *kind, *secret, Encoding::Base64);
            }
        }
        let build = |t: &[Vec<u8>]| {
            AhoCorasick::builder()
                .kind(Some(aho_corasick::AhoCorasickKind::DFA))
                .build(t)
                .expect("short literal patterns always build")
        };
        let plain_ac = build(&texts[..plain.len()]);
        let all = build(&texts);
        Scanner {
            names,
            values,
            all,
            patterns,
            plain: plain_ac,
        }
    }

    /// The scanner for requests without secrets, built once.
    pub fn shapes_only() -> &'static Scanner {
        static S: OnceLock<Scanner> = OnceLock::new();
        S.get_or_init(|| Scanner::new(&[]))
    }

    /// The findings in `text`, one per kind, variable and encoding, labelled with `stream`.
    pub fn scan(&self, stream: &'static str, text: &str) -> Vec<Leak> {
        summarize(stream, &self.hits(text.as_bytes()), &self.names)
    }

    /// `text` with every finding replaced by `[REDACTED:<variable or kind>]`.
    pub fn redact(&self, text: &str) -> String {
        self.apply(text, self.hits(text.as_bytes()))
    }

    fn apply(&self, text: &str, mut hits: Vec<Hit>) -> String {
        if hits.is_empty() {
            return text.to_string();
        }
        hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end)));
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for h in &hits {
            let mut start = h.start.max(at);
            let mut end = h.end.min(text.len());
            if end <= start {
                continue;
            }
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            while !text.is_char_boundary(end) {
                end += 1;
            }
            out.push_str(&text[at..start]);
            let label = match h.secret {
                Some(i) => self.names[i].as_str(),
                None => h.kind.label(),
            };
            out.push_str("[REDACTED:");
            out.push_str(label);
            out.push(']');
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }

    fn hits(&self, text: &[u8]) -> Vec<Hit> {
        let mut hits = Vec::new();
        let mut decoded = Vec::new();
        let mut chars = Vec::new();
        // The last encoded run checked, so a long run with many candidates is measured once.
        let mut b64_run: Option<(usize, usize, usize)> = None;
        let mut hex_run: Option<(usize, usize)> = None;
        for m in self.all.find_overlapping_iter(text) {
            let p = self.patterns[m.pattern().as_usize()];
            match p.encoding {
                Encoding::Plain => {
                    let end = match p.kind {
                        LeakKind::SecretEnv => Some(m.end()),
                        kind => shape_end(kind, text, m.start(), m.end()),
                    };
                    if let Some(end) = end {
                        hits.push(Hit {
                            kind: p.kind,
                            secret: p.secret,
                            encoding: Encoding::Plain,
                            start: m.start(),
                            end,
                        });
                    }
                }
                Encoding::Base64 => {
                    let (start, end, n) = match b64_run {
                        Some(r) if r.0 <= m.start() && m.end() <= r.1 => r,
                        _ => {
                            let r = base64_run_around(text, m.start());
                            b64_run = Some(r);
                            r
                        }
                    };
                    if n < MIN_BASE64_CHARS {
                        continue;
                    }
                    // Decode a window around the candidate at each alignment.
                    let from = m.start().saturating_sub(8).max(start);
                    let to = (m.end() + 256).min(end);
                    chars.clear();
                    chars.extend(
                        text[from..to]
                            .iter()
                            .copied()
                            .filter(|&c| c != b'\n' && c != b'\r'),
                    );
                    for align in 0..4.min(chars.len()) {
                        decode_base64(&chars[align..], &mut decoded);
                        self.decoded_hits(&decoded, Encoding::Base64, start, end, &mut hits);
                    }
                }
                Encoding::Hex | Encoding::UrlEncoded => {
                    let (start, end) = match hex_run {
                        Some(r) if r.0 <= m.start() && m.end() <= r.1 => r,
                        _ => {
                            let r = hex_run_around(text, m.start());
                            hex_run = Some(r);
                            r
                        }
                    };
                    if end - start < MIN_HEX_CHARS {
                        continue;
                    }
                    let from = m.start().saturating_sub(2).max(start);
                    let to = (m.end() + 256).min(end);
                    for align in 0..2 {
                        decode_hex(&text[from + align..to], &mut decoded);
                        self.decoded_hits(&decoded, Encoding::Hex, start, end, &mut hits);
                    }
                }
            }
        }
        self.wrapped_base64(text, &mut hits);
        self.truncated_tail(text, &mut hits);
        self.url_encoded(text, &mut hits);
        hits
    }

    /// Line-wrapped base64 (`base64` wraps at 76 characters, PEM at 64) may split a value's
    /// encoding over a line break, which the single pass cannot match: each wrapped run is
    /// searched again with its line breaks removed.
    fn wrapped_base64(&self, text: &[u8], hits: &mut Vec<Hit>) {
        let mut joined = Vec::new();
        let mut decoded = Vec::new();
        let mut done = 0;
        for nl in memchr::memchr_iter(b'\n', text) {
            if nl < done || !text.get(nl + 1).is_some_and(|&c| is_b64(c)) {
                continue;
            }
            let line_end = if nl > 0 && text[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            };
            let len = text[..line_end]
                .iter()
                .rev()
                .take_while(|&&c| is_b64(c))
                .count();
            if len < 40 || len % 4 != 0 {
                continue;
            }
            let (start, end, _) = base64_run_around(text, line_end - 1);
            done = end;
            joined.clear();
            joined.extend(
                text[start..end]
                    .iter()
                    .copied()
                    .filter(|&c| c != b'\n' && c != b'\r'),
            );
            for m in self.all.find_overlapping_iter(&joined) {
                if self.patterns[m.pattern().as_usize()].encoding != Encoding::Base64 {
                    continue;
                }
                let from = m.start().saturating_sub(8);
                let to = (m.end() + 256).min(joined.len());
                for align in 0..4.min(to - from) {
                    decode_base64(&joined[from + align..to], &mut decoded);
                    self.decoded_hits(&decoded, Encoding::Base64, start, end, hits);
                }
            }
        }
    }

    /// Scans `text` and, when `redact`, returns it with every finding replaced.
    pub fn scan_and_redact(
        &self,
        stream: &'static str,
        text: &str,
        redact: bool,
    ) -> (Vec<Leak>, Option<String>) {
        let hits = self.hits(text.as_bytes());
        let leaks = summarize(stream, &hits, &self.names);
        let redacted = (redact && !hits.is_empty()).then(|| self.apply(text, hits));
        (leaks, redacted)
    }

    /// Findings in decoded bytes; each covers the whole encoded run `start..end`, once.
    fn decoded_hits(
        &self,
        buf: &[u8],
        encoding: Encoding,
        start: usize,
        end: usize,
        hits: &mut Vec<Hit>,
    ) {
        self.search(buf, &mut |kind, secret, _, _| {
            let seen = hits.iter().any(|h| {
                h.start == start
                    && h.end == end
                    && h.kind == kind
                    && h.secret == secret
                    && h.encoding == encoding
            });
            if !seen {
                hits.push(Hit {
                    kind,
                    secret,
                    encoding,
                    start,
                    end,
                });
            }
        });
    }

    /// Calls `found(kind, secret index, start, end)` for each finding in plain `buf`.
    fn search(&self, buf: &[u8], found: &mut dyn FnMut(LeakKind, Option<usize>, usize, usize)) {
        for m in self.plain.find_overlapping_iter(buf) {
            let p = self.patterns[m.pattern().as_usize()];
            match p.kind {
                LeakKind::SecretEnv => found(p.kind, p.secret, m.start(), m.end()),
                kind => {
                    if let Some(end) = shape_end(kind, buf, m.start(), m.end()) {
                        found(kind, None, m.start(), end);
                    }
                }
            }
        }
    }

    /// A stream cut by its output cap may end with the first part of a secret.
    fn truncated_tail(&self, text: &[u8], hits: &mut Vec<Hit>) {
        for (i, v) in self.values.iter().enumerate() {
            let longest = (v.len() - 1).min(text.len());
            for k in (MIN_SECRET_BYTES / 2..=longest).rev() {
                if text.ends_with(&v[..k]) {
                    if !hits
                        .iter()
                        .any(|h| h.end == text.len() && h.secret == Some(i))
                    {
                        hits.push(Hit {
                            kind: LeakKind::SecretEnv,
                            secret: Some(i),
                            encoding: Encoding::Plain,
                            start: text.len() - k,
                            end: text.len(),
                        });
                    }
                    break;
                }
            }
        }
    }

    /// Decodes each token (between whitespace or quotes) that holds a `%XX` escape and searches
    /// it; only findings that include an escaped byte count (the rest is plain, found above).
    fn url_encoded(&self, text: &[u8], hits: &mut Vec<Hit>) {
        let mut decoded = Vec::new();
        let mut origin: Vec<(usize, usize)> = Vec::new();
        let mut after = 0;
        for pct in memchr::memchr_iter(b'%', text) {
            if pct < after || !is_escape(text, pct) {
                continue;
            }
            let start = text[..pct]
                .iter()
                .rposition(|&c| is_token_end(c))
                .map_or(0, |i| i + 1);
            let end = text[pct..]
                .iter()
                .position(|&c| is_token_end(c))
                .map_or(text.len(), |i| pct + i);
            after = end;
            decoded.clear();
            origin.clear();
            let mut i = start;
            while i < end {
                if text[i] == b'%' && is_escape(text, i) {
                    decoded.push(hex_val(text[i + 1]) << 4 | hex_val(text[i + 2]));
                    origin.push((i, i + 3));
                    i += 3;
                } else {
                    decoded.push(text[i]);
                    origin.push((i, i + 1));
                    i += 1;
                }
            }
            self.search(&decoded, &mut |kind, secret, s, e| {
                let e = e.min(origin.len());
                if origin[s..e].iter().any(|(a, b)| b - a == 3) {
                    hits.push(Hit {
                        kind,
                        secret,
                        encoding: Encoding::UrlEncoded,
                        start: origin[s].0,
                        end: origin[e - 1].1,
                    });
                }
            });
        }
    }
}

/// One [`Leak`] per (kind, variable, encoding), in order of first appearance.
fn summarize(stream: &'static str, hits: &[Hit], names: &[String]) -> Vec<Leak> {
    let mut out: Vec<(Option<usize>, Leak)> = Vec::new();
    for h in hits {
        match out
            .iter_mut()
            .find(|(s, l)| *s == h.secret && l.kind == h.kind && l.encoding == h.encoding)
        {
            Some((_, l)) => {
                l.count += 1;
                l.offset = l.offset.min(h.start);
            }
            None => out.push((
                h.secret,
                Leak {
                    stream,
                    kind: h.kind,
                    variable: h.secret.map(|i| names[i].clone()),
                    encoding: h.encoding,
                    offset: h.start,
                    count: 1,
                },
            )),
        }
    }
    let mut leaks: Vec<Leak> = out.into_iter().map(|(_, l)| l).collect();
    leaks.sort_by_key(|l| l.offset);
    leaks
}

/// Where the token that starts with a prefix of `kind` at `start..pend` ends, or `None` when
/// the text there does not have the token's shape.
fn shape_end(kind: LeakKind, buf: &[u8], start: usize, pend: usize) -> Option<usize> {
    let before = start.checked_sub(1).map(|i| buf[i]);
    let run = |from: usize, ok: &dyn Fn(u8) -> bool| {
        from + buf[from..].iter().take_while(|&&c| ok(c)).count()
    };
    let upper_digit = |c: u8| c.is_ascii_uppercase() || c.is_ascii_digit();
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    let key_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    match kind {
        LeakKind::AwsAccessKey => {
            if before.is_some_and(upper_digit) {
                return None;
            }
            let end = run(pend, &upper_digit);
            (end - pend == 16).then_some(end)
        }
        LeakKind::GithubToken => {
            if before.is_some_and(|c| alnum(c) || c == b'_') {
                return None;
            }
            if buf[start..pend].starts_with(b"github_pat_") {
                let end = run(pend, &|c| alnum(c) || c == b'_');
                (end - pend >= 22).then_some(end)
            } else {
                let end = run(pend, &alnum);
                (end - pend >= 36).then_some(end)
            }
        }
        LeakKind::PrivateKey => {
            let line_end = run(pend, &|c| c != b'\n').min(pend + 64);
            let header = &buf[pend..line_end];
            let marker = b"PRIVATE KEY-----";
            let at = memchr::memmem::find(header, marker)?;
            let header_end = pend + at + marker.len();
            // The key material follows: up to the END line, or to the end of the text.
            let rest = &buf[header_end..];
            Some(match memchr::memmem::find(rest, b"-----END") {
                Some(e) => {
                    let tail = &rest[e..];
                    match memchr::memmem::find(&tail[..tail.len().min(64)], marker) {
                        Some(m) => header_end + e + m + marker.len(),
                        None => header_end + e + 8,
                    }
                }
                None => buf.len(),
            })
        }
        LeakKind::ApiKey => {
            if before.is_some_and(key_char) {
                return None;
            }
            let end = run(pend, &key_char);
            let body = &buf[pend..end];
            let ok = body.len() >= 20
                && body.iter().any(u8::is_ascii_digit)
                && body.iter().any(u8::is_ascii_alphabetic);
            ok.then_some(end)
        }
        LeakKind::SecretEnv => None,
    }
}

const B64_INVALID: u8 = 0xff;

/// Both alphabets at once: `+` and `-` are 62, `/` and `_` are 63.
static B64: [u8; 256] = {
    let mut t = [B64_INVALID; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'-' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'_' as usize] = 63;
    t
};

fn is_b64(c: u8) -> bool {
    B64[c as usize] != B64_INVALID
}

/// The base64 run around `pos`: start, end and number of base64 characters. A line break
/// continues a run when the line before it is a whole number of 4-character groups of at
/// least 40 characters (`base64` wraps at 76, PEM at 64).
fn base64_run_around(text: &[u8], pos: usize) -> (usize, usize, usize) {
    let line_start = |i: usize| i - text[..i].iter().rev().take_while(|&&c| is_b64(c)).count();
    let line_end = |i: usize| i + text[i..].iter().take_while(|&&c| is_b64(c)).count();
    let joins = |len: usize| len % 4 == 0 && len >= 40;
    let (mut start, mut end) = (line_start(pos), line_end(pos));
    let mut n = end - start;
    // Backwards: over a line break whose previous line qualifies.
    loop {
        let brk = match text[..start] {
            [.., b'\r', b'\n'] => 2,
            [.., b'\n'] => 1,
            _ => 0,
        };
        if brk == 0 {
            break;
        }
        let prev_end = start - brk;
        let prev_start = line_start(prev_end);
        let len = prev_end - prev_start;
        if len == 0 || !joins(len) {
            break;
        }
        start = prev_start;
        n += len;
    }
    // Forwards: over a line break when the line before it qualifies.
    let mut last = end - line_start(end.min(text.len()).max(start));
    loop {
        let pad = text[end..]
            .iter()
            .take(2)
            .take_while(|&&c| c == b'=')
            .count();
        if pad > 0 {
            end += pad;
            break;
        }
        let brk = match text.get(end..) {
            Some([b'\n', c, ..]) if is_b64(*c) => 1,
            Some([b'\r', b'\n', c, ..]) if is_b64(*c) => 2,
            _ => 0,
        };
        if brk == 0 || !joins(last) {
            break;
        }
        let next = end + brk;
        end = line_end(next);
        last = end - next;
        n += last;
    }
    (start, end, n)
}

/// The run of hex digits around `pos`.
fn hex_run_around(text: &[u8], pos: usize) -> (usize, usize) {
    let start = pos
        - text[..pos]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
    let end = pos
        + text[pos..]
            .iter()
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
    (start, end)
}

/// The base64 characters of `needle` that do not depend on its neighbours when it starts
/// `offset` bytes (0 to 2) into a 3-byte group.
fn base64_inner(needle: &[u8], offset: usize, url_safe: bool) -> Vec<u8> {
    const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = vec![0u8; offset];
    bytes.extend_from_slice(needle);
    let bits = bytes.len() * 8;
    let first = (offset * 8).div_ceil(6);
    let last = bits / 6; // exclusive: characters whose 6 bits all lie inside the needle
    (first..last)
        .map(|k| {
            let bit = 6 * k;
            let (byte, shift) = (bit / 8, bit % 8);
            let hi = u16::from(bytes[byte]) << 8 | u16::from(*bytes.get(byte + 1).unwrap_or(&0));
            let v = (hi >> (10 - shift)) & 63;
            let c = STD[v as usize];
            match (url_safe, c) {
                (true, b'+') => b'-',
                (true, b'/') => b'_',
                _ => c,
            }
        })
        .collect()
}

/// Decodes base64 characters (no padding, no line breaks) into `out`; a trailing partial
/// group gives the bytes it holds.
fn decode_base64(chars: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &c in chars {
        let v = B64[c as usize];
        if v == B64_INVALID {
            break;
        }
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
}

fn hex_val(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

fn decode_hex(digits: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend(
        digits
            .chunks_exact(2)
            .map(|p| hex_val(p[0]) << 4 | hex_val(p[1])),
    );
}

fn is_escape(text: &[u8], i: usize) -> bool {
    text.len() > i + 2 && text[i + 1].is_ascii_hexdigit() && text[i + 2].is_ascii_hexdigit()
}

fn is_token_end(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`')
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t/value+with:chars";

    fn scanner() -> Scanner {
        Scanner::new(&[("API_TOKEN".to_string(), SECRET.to_string())])
    }

    fn b64(bytes: &[u8], url: bool) -> String {
        let a: &[u8; 64] = if url {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        } else {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        };
        let mut s = String::new();
        for c in bytes.chunks(3) {
            let n = c.len();
            let v = u32::from(c[0]) << 16
                | u32::from(*c.get(1).unwrap_or(&0)) << 8
                | u32::from(*c.get(2).unwrap_or(&0));
            for k in 0..4 {
                if k <= n {
                    s.push(a[(v >> (18 - 6 * k) & 63) as usize] as char);
                } else {
                    s.push('=');
                }
            }
        }
        s
    }

    fn kinds(text: &str) -> Vec<(LeakKind, Encoding)> {
        scanner()
            .scan("stdout", text)
            .iter()
            .map(|l| (l.kind, l.encoding))
            .collect()
    }

    #[test]
    fn plain_secret_is_found_and_redacted() {
        let s = scanner();
        let text = format!("token is {SECRET}.\n");
        let leaks = s.scan("stdout", &text);
        assert_eq!(leaks.len(), 1, "{leaks:?}");
        assert_eq!(leaks[0].variable.as_deref(), Some("API_TOKEN"));
        assert_eq!(leaks[0].offset, 9);
        assert_eq!(s.redact(&text), "token is [REDACTED:API_TOKEN].\n");
    }

    #[test]
    fn encodings_are_found() {
        let url = SECRET
            .replace('/', "%2F")
            .replace('+', "%2B")
            .replace(':', "%3a");
        assert_eq!(
            kinds(&format!("GET /?t={url} HTTP/1.1")),
            [(LeakKind::SecretEnv, Encoding::UrlEncoded)]
        );
        for prefix in ["", "u:", "us:"] {
            for url_safe in [false, true] {
                let enc = b64(format!("{prefix}{SECRET}").as_bytes(), url_safe);
                assert_eq!(
                    kinds(&format!("Authorization: Basic {enc}\n")),
                    [(LeakKind::SecretEnv, Encoding::Base64)],
                    "{enc}"
                );
            }
        }
        let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
        assert!(kinds(&hex).contains(&(LeakKind::SecretEnv, Encoding::Hex)));
        assert!(kinds(&hex.to_uppercase()).contains(&(LeakKind::SecretEnv, Encoding::Hex)));
    }

    #[test]
    fn wrapped_base64_is_found() {
        let long = format!("{}{SECRET}{}", "x".repeat(50), "y".repeat(50));
        let enc = b64(long.as_bytes(), false);
        let wrapped: Vec<&str> = enc
            .as_bytes()
            .chunks(76)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let text = wrapped.join("\n");
        assert_eq!(kinds(&text), [(LeakKind::SecretEnv, Encoding::Base64)]);
        assert!(!scanner().redact(&text).contains(&wrapped[1][10..30]));
    }

    #[test]
    fn short_encodings_are_below_the_thresholds() {
        let s = Scanner::new(&[("K".into(), "abcdefgh".into())]);
        // 8 bytes: 12 base64 characters, 16 hex digits: under the minimum runs.
        let enc = b64(b"abcdefgh", false);
        assert!(s.scan("stdout", &format!(" {enc} ")).is_empty());
        assert!(s.scan("stdout", " 6162636465666768 ").is_empty());
    }

    #[test]
    fn token_shapes() {
        let aws = "AKIAIOSFODNN7EXAMPLE";
        let gh = format!("ghp_{}", "a1B2".repeat(9));
        let sk = "sk-proj-abcDEF123456789012345";
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n";
        for (text, kind) in [
            (aws.to_string(), LeakKind::AwsAccessKey),
            (gh.clone(), LeakKind::GithubToken),
            (
                format!("github_pat_{}", "A1_b".repeat(6)),
                LeakKind::GithubToken,
            ),
            (sk.to_string(), LeakKind::ApiKey),
            (pem.to_string(), LeakKind::PrivateKey),
        ] {
            let s = Scanner::shapes_only();
            let found = s.scan("stderr", &format!("x {text} y"));
            assert!(
                found
                    .iter()
                    .any(|l| l.kind == kind && l.encoding == Encoding::Plain),
                "{text}: {found:?}"
            );
            let red = s.redact(&format!("x {text} y"));
            assert!(!red.contains(&text[4..]), "{red}");
            let enc = b64(text.as_bytes(), false);
            assert!(
                s.scan("stderr", &enc)
                    .iter()
                    .any(|l| l.kind == kind && l.encoding == Encoding::Base64),
                "{text} as {enc}"
            );
        }
        let red = Scanner::shapes_only().redact(pem);
        assert_eq!(red, "[REDACTED:private_key]\n");
    }

    #[test]
    fn ordinary_text_is_not_a_token() {
        let s = Scanner::shapes_only();
        for text in [
            "AKIAIOSFODNN7EXAMPL",           // 15 characters
            "XAKIAIOSFODNN7EXAMPLE",         // inside a longer word
            "ghp_short",                     // too short
            "task-management-for-everybody", // sk- inside a word
            "sk-learn-is-not-a-key-at-all-really",
            "-----BEGIN PUBLIC KEY-----",
            "d41d8cd98f00b204e9800998ecf8427ed41d8cd98f00b204e9800998ecf8427e",
            "SGVsbG8sIHdvcmxkISBUaGlzIGlzIGEgdGVzdC4K",
        ] {
            assert!(s.scan("stdout", text).is_empty(), "{text}");
            assert_eq!(s.redact(text), text);
        }
    }

    #[test]
    fn truncated_stream_ending_in_a_prefix() {
        let text = format!("abc {}", &SECRET[..10]);
        let leaks = scanner().scan("stdout", &text);
        assert_eq!(leaks.len(), 1, "{leaks:?}");
        assert_eq!(scanner().redact(&text), "abc [REDACTED:API_TOKEN]");
    }

    #[test]
    fn counts_not_lines() {
        let text = format!("{SECRET}\n").repeat(1000);
        let leaks = scanner().scan("stdout", &text);
        assert_eq!(leaks.len(), 1);
        assert_eq!(leaks[0].count, 1000);
    }
}
