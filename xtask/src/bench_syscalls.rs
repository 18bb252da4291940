//! Per-syscall cost under each built-in profile (placeholder).

/// Runs the benchmark and returns a Markdown section.
pub fn run() -> anyhow::Result<String> {
    Ok(String::new())
}
