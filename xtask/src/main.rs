//! `cargo xtask`: the project's build, check and measurement tasks.

mod codegen;

use anyhow::{bail, Result};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    match args.first().map(String::as_str) {
        Some("codegen") => codegen::run(&root(), rest.contains(&"--check")),
        _ => bail!("usage: cargo xtask <codegen [--check]>"),
    }
}
