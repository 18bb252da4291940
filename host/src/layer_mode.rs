//! How strictly a protection layer must be in force: the one choice the Landlock layer and the
//! namespace layer share (`--landlock`, `--isolation`, JSON `landlock`, `isolation`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How strictly a layer must be in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerMode {
    /// Everything the layer is asked to protect is enforced, or the program does not run.
    Required,
    /// What the machine supports is enforced; what is missing is said on every run.
    #[default]
    Preferred,
    /// No such layer.
    Off,
}

impl LayerMode {
    /// The lowercase name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            LayerMode::Required => "required",
            LayerMode::Preferred => "preferred",
            LayerMode::Off => "off",
        }
    }
}

impl fmt::Display for LayerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one of the choices.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode `{0}`: expected required, preferred or off")]
pub struct UnknownMode(pub String);

impl FromStr for LayerMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "required" => Ok(LayerMode::Required),
            "preferred" => Ok(LayerMode::Preferred),
            "off" => Ok(LayerMode::Off),
            _ => Err(UnknownMode(s.to_owned())),
        }
    }
}
