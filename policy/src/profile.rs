//! Profiles (std).
