//! The refusal of a request before anything runs: which field, and why. Below every module
//! that validates a part of a request (exec's request, limits and isolation, network, the
//! proxy's addresses), so none of them needs another to say no.

use serde::Serialize;

/// Why a request was refused before anything ran: the field and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{field}: {reason}")]
pub struct Refusal {
    /// The offending field, e.g. `argv[0]`, `env.LD_PRELOAD`, `timeout_s`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
    /// The shell's status for a program that cannot run: 126 (found but not executable), 127
    /// (not found); absent for every other refusal (status 125).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl Refusal {
    /// A refusal of `field` for `reason`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Refusal {
        Refusal {
            field: field.into(),
            reason: reason.into(),
            exit_code: None,
        }
    }

    /// A program that cannot be run, with the status a shell gives it (126 or 127).
    pub fn cannot_run(field: impl Into<String>, reason: impl Into<String>, code: i32) -> Refusal {
        Refusal {
            exit_code: Some(code),
            ..Refusal::new(field, reason)
        }
    }
}

/// An I/O error in words, without the `(os error N)` suffix.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}
