//! A small Rust tokenizer for the source structure checks: identifiers, `::` and single
//! punctuation characters, with comments, strings and character literals left out, so that a
//! word in a comment or a message is never taken for code.

/// One token of Rust source, as far as the structure checks need to tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword (`r#` prefix removed).
    Ident(String),
    /// The path separator `::`.
    PathSep,
    /// Any other single character outside comments and literals (digits included).
    Punct(char),
}

/// Splits `src` into tokens, dropping whitespace, comments (nested block comments included),
/// string, byte-string, raw-string and character literals. Lifetimes become their identifier.
pub fn tokenize(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            i = skip_block_comment(&c, i);
        } else if ch == '"' {
            i = skip_string(&c, i + 1);
        } else if (ch == 'r' || ch == 'b') && raw_string_start(&c, i).is_some() {
            let (hashes, body) = raw_string_start(&c, i).unwrap_or_default();
            i = skip_raw_string(&c, body, hashes);
        } else if ch == 'b' && c.get(i + 1) == Some(&'"') {
            i = skip_string(&c, i + 2);
        } else if ch == 'b' && c.get(i + 1) == Some(&'\'') {
            i = skip_char(&c, i + 1).unwrap_or(i + 2);
        } else if ch == '\'' {
            // A character literal, or a lifetime / label (whose name is read as an identifier).
            i = skip_char(&c, i).unwrap_or(i + 1);
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok::PathSep);
            i += 2;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let mut word: String = c[start..i].iter().collect();
            if word == "r" && c.get(i) == Some(&'#') {
                // A raw identifier: r#name.
                let s = i + 1;
                i = s;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                word = c[s..i].iter().collect();
            }
            out.push(Tok::Ident(word));
        } else if ch.is_ascii_digit() {
            // A number, suffix included (`1u32` must not yield an identifier `u32`).
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Punct('0'));
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

fn skip_block_comment(c: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// Skips to just past the closing quote of a string whose body starts at `i`.
fn skip_string(c: &[char], mut i: usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// At `r"`, `r#"`, `br"`, `br#"`: the number of `#` and where the body starts.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if c[j] == 'b' {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

fn skip_raw_string(c: &[char], mut i: usize, hashes: usize) -> usize {
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// At a `'`: past the character literal, or `None` when it starts a lifetime or label.
fn skip_char(c: &[char], i: usize) -> Option<usize> {
    if c.get(i + 1) == Some(&'\\') {
        let mut j = i + 2;
        while j < c.len() && c[j] != '\'' {
            j += 1;
        }
        return Some(j + 1);
    }
    (c.get(i + 2) == Some(&'\'')).then_some(i + 3)
}

#[cfg(test)]
mod tests {
    use super::{tokenize, Tok};

    fn idents(src: &str) -> Vec<String> {
        tokenize(src)
            .into_iter()
            .filter_map(|t| match t {
                Tok::Ident(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    /// Comments, strings and character literals hide their words; lifetimes and raw
    /// identifiers are read.
    #[test]
    fn literals_and_comments_are_skipped() {
        let src = r####"
            // unsafe in a comment
            /* unsafe /* nested */ still comment */
            let a = "unsafe \" quoted"; let b = r#"unsafe "x" "#; let c = b"unsafe";
            let d = '"'; let e = '\''; fn f<'a>(x: &'a u8) {} let r#type = 1u32;
        "####;
        let words = idents(src);
        assert!(!words.iter().any(|w| w == "unsafe"), "{words:?}");
        assert_eq!(words.iter().filter(|w| *w == "a").count(), 3, "{words:?}");
        assert!(words.iter().any(|w| w == "type"), "{words:?}");
        assert!(!words.iter().any(|w| w == "u32"), "{words:?}");
    }
}
