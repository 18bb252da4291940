//! The mount table (`/proc/self/mountinfo`), parsed in one place for everything that looks
//! up a mount: the cgroup hierarchies, the platform check, the file-size search.

use std::path::PathBuf;

/// One line of the table.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Mount<'a> {
    /// The directory of the file system mounted here (field 4, as written: `/` for a whole
    /// file system).
    pub root: &'a str,
    /// Where it is mounted (field 5), its `\ooo` escapes decoded.
    pub point: PathBuf,
    /// The file system type (`ext4`, `cgroup2`, ...).
    pub fs: &'a str,
    /// The super block's options (`rw,dax=always`, a v1 cgroup's controllers).
    pub super_options: &'a str,
}

/// `/proc/self/mountinfo`'s text (`None` when it cannot be read).
pub(crate) fn read() -> Option<String> {
    std::fs::read_to_string("/proc/self/mountinfo").ok()
}

/// The mounts of `text` (the table's format), in mount order; lines that are not one are left
/// out.
pub(crate) fn parse(text: &str) -> impl Iterator<Item = Mount<'_>> {
    text.lines().filter_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut pre = pre.split(' ').skip(3);
        let (root, point) = (pre.next()?, pre.next()?);
        let mut post = post.split(' ');
        let fs = post.next()?;
        let super_options = post.nth(1)?;
        Some(Mount {
            root,
            point: unescape(point),
            fs,
            super_options,
        })
    })
}

/// Where the cgroup v2 hierarchy is mounted whole (its root at the mount point), by `text`.
pub(crate) fn cgroup2(text: &str) -> Option<PathBuf> {
    parse(text)
        .find(|m| m.fs == "cgroup2" && m.root == "/")
        .map(|m| m.point)
}

/// A path as the table writes it, with its `\ooo` escapes (space, tab, newline, backslash)
/// decoded.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| {
                u8::try_from(d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0'))).ok()
            });
        match (b[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::{parse, unescape, Mount};
    use std::path::PathBuf;

    #[test]
    fn lines_are_read_field_by_field_and_others_left_out() {
        let text = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw,discard
34 22 0:41 /sub /work/my\\040dir rw shared:9 master:2 - tmpfs tmpfs rw,size=8k
garbage
35 22 0:42 / /x rw - cgroup cgroup
";
        let mounts: Vec<Mount> = parse(text).collect();
        assert_eq!(
            mounts,
            [
                Mount {
                    root: "/",
                    point: PathBuf::from("/"),
                    fs: "ext4",
                    super_options: "rw,discard",
                },
                Mount {
                    root: "/sub",
                    point: PathBuf::from("/work/my dir"),
                    fs: "tmpfs",
                    super_options: "rw,size=8k",
                },
            ]
        );
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(
            unescape(r"/a\040b\011c\012d\134e"),
            PathBuf::from("/a b\tc\nd\\e")
        );
        // Not an escape: left as written (a lone backslash, digits out of range, too short).
        assert_eq!(unescape(r"/a\b\777\04"), PathBuf::from(r"/a\b\777\04"));
    }
}
