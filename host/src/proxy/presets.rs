//! Registry presets: `@pypi`, `@npm`, `@crates`, `@go`, `@rubygems`, `@maven`, `@debian` in
//! an allowlist stand for the domains a package manager fetches from. The data is
//! `profiles/registries.toml`, embedded at build time and checked by the tests (every domain
//! parses as an allowlist entry); `sandbox profiles registries` lists it.
//!
//! A preset is expanded where the allowlist is parsed, so the same `@name` works in
//! `--allow-domain`, in `allow_domains` of `exec --json` and `serve` requests, and in the
//! library; the proxy's refusals name the domain that was refused, as for any other entry.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The presets' text, as shipped.
pub const TEXT: &str = include_str!("../../../profiles/registries.toml");

/// The character that marks a preset in an allowlist entry.
pub const MARK: char = '@';

/// One preset.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// What it is for.
    pub description: String,
    /// Its domains, in the allowlist's syntax.
    pub domains: Vec<String>,
}

/// Every preset by name (the embedded file parses, which a test checks).
pub fn all() -> &'static BTreeMap<String, Preset> {
    static ALL: OnceLock<BTreeMap<String, Preset>> = OnceLock::new();
    ALL.get_or_init(|| toml::from_str(TEXT).expect("profiles/registries.toml parses"))
}

/// The domains of the preset an entry names (`@pypi`), `Ok(None)` when the entry is not a
/// preset, or why it names none.
pub fn expand(entry: &str) -> Result<Option<&'static [String]>, String> {
    let Some(name) = entry.strip_prefix(MARK) else {
        return Ok(None);
    };
    match all().get(name) {
        Some(p) => Ok(Some(&p.domains)),
        None => Err(format!(
            "is not a registry preset (presets: {}; `sandbox profiles registries` lists \
             their domains)",
            all()
                .keys()
                .map(|k| format!("{MARK}{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{Allowlist, Host, Pattern};

    #[test]
    fn every_preset_parses_and_names_its_registry() {
        let want = ["crates", "debian", "go", "maven", "npm", "pypi", "rubygems"];
        assert_eq!(all().keys().map(String::as_str).collect::<Vec<_>>(), want);
        for (name, p) in all() {
            assert!(!p.domains.is_empty() && !p.description.is_empty(), "{name}");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{name}"
            );
            for d in &p.domains {
                assert!(Pattern::parse(d).is_ok(), "{name}: {d}");
            }
        }
    }

    #[test]
    fn an_allowlist_expands_presets_and_allows_only_their_domains() {
        let list = Allowlist::parse(&["@pypi", "example.com"]).unwrap();
        let host = |h: &str| Host::parse(h).unwrap();
        for ok in ["pypi.org", "files.pythonhosted.org", "example.com"] {
            assert!(list.allows(&host(ok)), "{ok}");
        }
        for no in [
            "registry.npmjs.org",
            "evil.pypi.org.example.net",
            "pypi.org.evil",
        ] {
            assert!(!list.allows(&host(no)), "{no}");
        }
        let go = Allowlist::parse(&["@go"]).unwrap();
        assert!(go.allows(&host("proxy.golang.org")) && go.allows(&host("sum.golang.org")));
        for (name, domain) in [
            ("@rubygems", "rubygems.org"),
            ("@maven", "repo.maven.apache.org"),
            ("@debian", "deb.debian.org"),
            ("@crates", "static.crates.io"),
            ("@npm", "registry.npmjs.org"),
        ] {
            assert!(
                Allowlist::parse(&[name]).unwrap().allows(&host(domain)),
                "{name}"
            );
        }
    }

    #[test]
    fn a_registry_host_is_named_with_its_preset() {
        let host = |h: &str| Host::parse(h).unwrap();
        assert_eq!(
            crate::proxy::domain::preset_of(&host("registry.npmjs.org")),
            Some("npm")
        );
        assert_eq!(
            crate::proxy::domain::preset_of(&host("files.pythonhosted.org")),
            Some("pypi")
        );
        assert_eq!(crate::proxy::domain::preset_of(&host("example.com")), None);
    }

    #[test]
    fn hostile_preset_names_are_refused_by_index() {
        for bad in [
            "@", "@PYPI", "@pypi ", "@pypi\n", "@py\0pi", "@../pypi", "@*", "@@pypi",
        ] {
            let (i, e) = Allowlist::parse(&["example.com", bad]).unwrap_err();
            assert_eq!(i, 1, "{bad:?}");
            assert!(
                e.reason.contains("not a registry preset"),
                "{bad:?}: {}",
                e.reason
            );
        }
    }
}
