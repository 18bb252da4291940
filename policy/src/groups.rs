//! Named syscall groups (`@base`, `@fs-read` ...), defined as data in `profiles/groups.toml`
//! and embedded at build time.

/// A named set of entries usable as `@name` in any list.
#[derive(Debug)]
pub struct Group {
    /// Name without the `@`.
    pub name: &'static str,
    /// One line saying what the group is for.
    pub doc: &'static str,
    /// Entries in the list grammar (syscall names, rules, other groups).
    pub entries: &'static [&'static str],
}

include!(concat!(env!("OUT_DIR"), "/groups.rs"));

/// The group called `name` (without `@`).
pub fn find(name: &str) -> Option<&'static Group> {
    GROUPS.iter().find(|g| g.name == name)
}

/// Every group, in the order of the data file.
pub fn all() -> &'static [Group] {
    GROUPS
}
