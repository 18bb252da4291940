//! The size limits on a filter description: what the grammar refuses, and what its errors
//! name. A leaf module, below both the grammar and the error type.

/// Longest accepted value of one variable, in bytes.
pub const MAX_VALUE_LEN: usize = 65536;
/// Most entries accepted in one variable (groups count as one).
pub const MAX_ENTRIES: usize = 1024;
