//! Value parsers that also declare the values a flag takes, so that shell completions (and
//! `--help`) offer them: the built-in profile names, the layer modes, the network modes, the
//! violation and static-binary actions.
//!
//! Parsing stays the types' own (`FromStr`, with their error messages); the declared values
//! are hints only, so a value outside them that the type accepts (`--on-violation
//! errno:EACCES`, a profile file's path) still parses.

use clap::builder::{PossibleValue, TypedValueParser};
use std::ffi::OsStr;

/// A parser of `T` by `parse`, offering `values` to completions and help.
#[derive(Clone)]
pub struct Choices<T> {
    values: Vec<&'static str>,
    parse: fn(&str) -> Result<T, String>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Choices<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        self.parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            self.values.iter().copied().map(PossibleValue::new),
        ))
    }
}

/// `--profile`, `--base`, `profiles show NAME`: a built-in name (offered) or a file's path.
pub fn profile() -> Choices<String> {
    Choices {
        values: sandbox_policy::profile::Profile::builtin_names().collect(),
        parse: |s| Ok(s.to_string()),
    }
}

/// `--landlock`, `--isolation`: required, preferred or off.
pub fn layer_mode() -> Choices<crate::layer_mode::LayerMode> {
    Choices {
        values: vec!["required", "preferred", "off"],
        parse: |s| {
            s.parse()
                .map_err(|e: crate::layer_mode::UnknownMode| e.to_string())
        },
    }
}

/// `--network`: host, none or proxy.
pub fn network_mode() -> Choices<crate::network::Mode> {
    Choices {
        values: vec!["host", "none", "proxy"],
        parse: str::parse,
    }
}

/// `--static-binary`: block, warn, allow or confine.
pub fn static_binary() -> Choices<crate::StaticBinaryAction> {
    Choices {
        values: vec!["block", "warn", "allow", "confine"],
        parse: str::parse,
    }
}

/// `run`'s and `env`'s `--on-violation`: report, kill, trap, log, errno (and errno:NAME, typed).
pub fn violation_action() -> Choices<sandbox_policy::Action> {
    Choices {
        values: vec!["report", "kill", "trap", "log", "errno"],
        parse: parse_violation_action,
    }
}

/// `export`'s `--on-violation`: kill, trap, log, errno (and errno:NAME, typed).
pub fn action() -> Choices<sandbox_policy::Action> {
    Choices {
        values: vec!["kill", "trap", "log", "errno"],
        parse: parse_action,
    }
}

/// [`parse_action`] plus `report`, the default of `run`: the profile's errno (else EPERM),
/// reported; stands as `errno:0`, which no real action is.
pub fn parse_violation_action(s: &str) -> Result<sandbox_policy::Action, String> {
    if s == "report" {
        return Ok(sandbox_policy::Action::Errno(0));
    }
    parse_action(s)
        .map_err(|_| format!("unknown action `{s}` (report, kill, trap, log, errno, errno:NAME)"))
}

/// Parses an action name: kill, trap, log, errno, errno:NAME.
pub fn parse_action(s: &str) -> Result<sandbox_policy::Action, String> {
    sandbox_policy::Action::parse(s)
        .ok_or_else(|| format!("unknown action `{s}` (kill, trap, log, errno, errno:NAME)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<T: Clone + Send + Sync + 'static>(c: &Choices<T>) -> Vec<String> {
        c.possible_values()
            .unwrap()
            .map(|v| v.get_name().to_string())
            .collect()
    }

    /// Every value offered parses (a completion never proposes an error), and a word outside
    /// them is refused by the type's own parser with its message (the hints do not widen it).
    #[test]
    fn every_offered_value_parses_and_others_keep_their_errors() {
        let cmd = clap::Command::new("t");
        let check = |offered: Vec<String>, parse: &dyn Fn(&str) -> Result<(), clap::Error>| {
            assert!(!offered.is_empty());
            for v in &offered {
                parse(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            }
            assert!(parse("no-such-value").is_err());
        };
        let p = layer_mode();
        check(values(&p), &|v| {
            p.parse_ref(&cmd, None, OsStr::new(v)).map(drop)
        });
        let p = network_mode();
        check(values(&p), &|v| {
            p.parse_ref(&cmd, None, OsStr::new(v)).map(drop)
        });
        let p = static_binary();
        check(values(&p), &|v| {
            p.parse_ref(&cmd, None, OsStr::new(v)).map(drop)
        });
        let p = violation_action();
        check(values(&p), &|v| {
            p.parse_ref(&cmd, None, OsStr::new(v)).map(drop)
        });
        let p = action();
        check(values(&p), &|v| {
            p.parse_ref(&cmd, None, OsStr::new(v)).map(drop)
        });
        // errno:NAME is typed, not offered, and still parses.
        assert!(action()
            .parse_ref(&cmd, None, OsStr::new("errno:EACCES"))
            .is_ok());
        // Profiles: every built-in offered; any other word is a path, checked when loaded.
        let offered = values(&profile());
        let built_in: Vec<String> = sandbox_policy::profile::Profile::builtin_names()
            .map(String::from)
            .collect();
        assert_eq!(offered, built_in);
    }
}
