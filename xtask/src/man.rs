//! The man pages of the release bundle: `sandbox.1` and one page per subcommand at every level
//! (`sandbox-profiles-show.1` too), from the command-line definition (clap_mangen), each with
//! an EXIT STATUS and an EXAMPLES section.
//!
//! clap_mangen names a page's subcommands `PARENT-SUB(1)`, so every subcommand gets a page and
//! a reference never points to a page the bundle does not ship. clap's implicit `help`
//! subcommand would be listed as `sandbox-help(1)`: the pages are built with it disabled
//! (`--help` stays). The exit statuses are read from the table in docs/reference.md ("Exit
//! statuses"), the one place they are written, so the pages cannot disagree with it; the
//! examples from docs/examples.md, whose every line a test runs (host/tests/doc_commands.rs).

use anyhow::{bail, Result};
use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};
use std::path::Path;

/// docs/reference.md, whose "Exit statuses" table the pages print.
const REFERENCE: &str = include_str!("../../docs/reference.md");

/// docs/examples.md, whose blocks are the pages' EXAMPLES sections.
const EXAMPLES: &str = include_str!("../../docs/examples.md");

/// The examples of the page of `name` (`sandbox`, `sandbox profiles show`): the lines of the
/// `sh` block under its heading in docs/examples.md, each split at its last `  # ` (two
/// spaces: a `#` inside a command has at most one before it) into the command and what it does.
pub fn examples(name: &str) -> Result<Vec<(String, String)>> {
    let heading = format!("\n## {name}\n");
    let Some((_, rest)) = EXAMPLES.split_once(&heading) else {
        bail!("docs/examples.md has no section \"## {name}\"");
    };
    let lines: Vec<(String, String)> = rest
        .lines()
        .skip_while(|l| *l != "```sh")
        .skip(1)
        .take_while(|l| *l != "```")
        .map(|l| match l.rsplit_once("  # ") {
            Some((cmd, what)) => (cmd.trim().to_string(), what.trim().to_string()),
            None => (l.trim().to_string(), String::new()),
        })
        .collect();
    if lines.is_empty() {
        bail!("docs/examples.md: \"## {name}\" has no sh block");
    }
    Ok(lines)
}

/// One row of the exit-status table: the status, when, and which commands.
#[derive(Debug, PartialEq, Eq)]
pub struct ExitRow {
    /// `0`, `N`, `128+N`...
    pub status: String,
    /// When, as written in the table (Markdown backticks removed).
    pub when: String,
    /// The commands column: `all`, or backticked command names.
    pub commands: String,
}

impl ExitRow {
    /// Whether the row is about subcommand `sub` (`""`: the top-level page, every row).
    fn applies_to(&self, sub: &str) -> bool {
        let first = sub.split('-').next().unwrap_or_default();
        sub.is_empty()
            || self.commands.starts_with("all")
            || self.commands.contains(&format!("`{first}`"))
            || self.commands.contains(&format!("`{first} "))
    }
}

/// The rows of docs/reference.md's "Exit statuses" table.
pub fn exit_rows() -> Result<Vec<ExitRow>> {
    let Some((_, section)) = REFERENCE.split_once("## 13. Exit statuses") else {
        bail!("docs/reference.md has no section \"13. Exit statuses\"");
    };
    let rows: Vec<ExitRow> = section
        .lines()
        .skip_while(|l| !l.starts_with("| status"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            match cells[..] {
                [status, when, commands] => Some(ExitRow {
                    status: status.into(),
                    when: when.replace('`', ""),
                    commands: commands.into(),
                }),
                _ => None,
            }
        })
        .collect();
    if rows.is_empty() {
        bail!("docs/reference.md's exit-status table has no rows");
    }
    Ok(rows)
}

/// Every page as (file name, roff text): `sandbox.1` first, then the subcommands depth first.
pub fn pages() -> Result<Vec<(String, String)>> {
    let mut cmd = sandbox_host::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let rows = exit_rows()?;
    let mut out = Vec::new();
    collect(&cmd, &rows, &mut out)?;
    Ok(out)
}

fn collect(cmd: &clap::Command, rows: &[ExitRow], out: &mut Vec<(String, String)>) -> Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    let mut text = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .source(format!("sandbox {}", env!("CARGO_PKG_VERSION")))
        .render(&mut text)?;
    let mut text = String::from_utf8(text)?;
    text += &extra_sections(&name, rows)?;
    out.push((format!("{name}.1"), text));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, rows, out)?;
    }
    Ok(())
}

/// EXIT STATUS and EXAMPLES for the page `name` (`sandbox`, `sandbox-profiles-show`).
fn extra_sections(name: &str, rows: &[ExitRow]) -> Result<String> {
    let key = name.strip_prefix("sandbox").unwrap_or_default();
    let key = key.strip_prefix('-').unwrap_or(key);
    let examples = examples(&name.replace('-', " "))?;
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for row in rows.iter().filter(|r| r.applies_to(key)) {
        roff.control("TP", []).text([bold(row.status.as_str())]);
        let mut when = row.when.clone();
        if key.is_empty() {
            when += &format!(" ({})", row.commands.replace('`', ""));
        }
        roff.text([roman(when)]);
    }
    roff.control("SH", ["EXAMPLES"]);
    for (line, what) in examples {
        roff.control("TP", []).text([bold(line)]);
        roff.text([roman(what)]);
    }
    let text = roff.render();
    // The same apostrophe preamble opens the page already.
    Ok(match text.split_once(".el .ds Aq '\n") {
        Some((_, rest)) => rest.to_string(),
        None => text,
    })
}

/// Writes every page into `dir`.
pub fn write_pages(dir: &Path) -> Result<()> {
    for (name, text) in pages()? {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}
