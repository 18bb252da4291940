//! The gitlinks of a git index (`.git/index`): the paths of the work tree where git expects
//! another repository (a submodule, or a repository added with `git add`). `git status`,
//! `git diff` and `git commit` look into each of them with that repository's own
//! configuration, so `git_guard` checks theirs too. Only what finding them needs is read:
//! each entry's mode and path, for index versions 2, 3 and 4.

/// An entry's mode for a gitlink.
const GITLINK: u32 = 0o160000;

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Git's offset varint (index v4's prefix length): its value and length.
fn varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *b.first()?;
    let mut value = usize::from(c & 127);
    while c & 128 != 0 {
        i += 1;
        c = *b.get(i)?;
        value = value
            .checked_add(1)?
            .checked_mul(128)?
            .checked_add(usize::from(c & 127))?;
    }
    Some((value, i + 1))
}

/// The paths (relative to the work tree) of the index's gitlinks; `None` when the bytes are
/// not an index this reads (another version, cut short). `hash_len` is 20 (SHA-1) or 32
/// (SHA-256, `extensions.objectFormat`).
pub(crate) fn gitlinks(index: &[u8], hash_len: usize) -> Option<Vec<Vec<u8>>> {
    if index.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(index, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(index, 8)?;
    let mut pos = 12;
    let mut prev: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    for _ in 0..count {
        let start = pos;
        let mode = be32(index, pos + 24)?;
        let flags = be16(index, pos + 40 + hash_len)?;
        pos += 40 + hash_len + 2;
        if version >= 3 && flags & 0x4000 != 0 {
            pos += 2;
        }
        let name = if version == 4 {
            let (strip, n) = varint(index.get(pos..)?)?;
            pos += n;
            let len = memchr::memchr(0, index.get(pos..)?)?;
            let keep = prev.len().checked_sub(strip)?;
            let mut name = prev[..keep].to_vec();
            name.extend_from_slice(&index[pos..pos + len]);
            pos += len + 1;
            name
        } else {
            let len = memchr::memchr(0, index.get(pos..)?)?;
            let name = index[pos..pos + len].to_vec();
            // Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
            pos = start + ((pos + len - start + 8) & !7);
            name
        };
        if mode == GITLINK {
            out.push(name.clone());
        }
        prev = name;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index of `version` with the entries (mode, path), SHA-1.
    fn index(version: u32, entries: &[(u32, &str)]) -> Vec<u8> {
        let mut b = b"DIRC".to_vec();
        b.extend(version.to_be_bytes());
        b.extend((entries.len() as u32).to_be_bytes());
        let mut prev = String::new();
        for (mode, path) in entries {
            let start = b.len();
            b.extend([0u8; 24]);
            b.extend(mode.to_be_bytes());
            b.extend([0u8; 12]);
            b.extend([7u8; 20]);
            b.extend((path.len() as u16).to_be_bytes());
            if version == 4 {
                let common = prev
                    .bytes()
                    .zip(path.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                let strip = prev.len() - common;
                assert!(strip < 128);
                b.push(strip as u8);
                b.extend(&path.as_bytes()[common..]);
                b.push(0);
            } else {
                b.extend(path.as_bytes());
                let len = (b.len() - start + 8) & !7;
                b.resize(start + len, 0);
            }
            prev = path.to_string();
        }
        b
    }

    #[test]
    fn gitlinks_of_every_version() {
        let entries = [
            (0o100644, "a.txt"),
            (GITLINK, "inner"),
            (0o100755, "inner-tool"),
            (GITLINK, "lib/sub"),
            (0o120000, "link"),
        ];
        for v in [2, 3, 4] {
            assert_eq!(
                gitlinks(&index(v, &entries), 20),
                Some(vec![b"inner".to_vec(), b"lib/sub".to_vec()]),
                "version {v}"
            );
        }
    }

    #[test]
    fn what_is_not_an_index_is_none() {
        let good = index(2, &[(GITLINK, "inner")]);
        assert_eq!(gitlinks(&good[..good.len() - 8], 20), None);
        assert_eq!(gitlinks(b"DIRX\0\0\0\x02\0\0\0\0", 20), None);
        assert_eq!(gitlinks(b"DIRC\0\0\0\x05\0\0\0\0", 20), None);
        assert_eq!(gitlinks(b"", 20), None);
        assert_eq!(gitlinks(b"DIRC\0\0\0\x02\0\0\0\0", 20), Some(vec![]));
        assert_eq!(varint(&[0x80]), None);
        assert_eq!(varint(&[0x81, 0x00]), Some((256, 2)));
    }
}
