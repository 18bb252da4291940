//! OCI runtime-spec / Docker seccomp JSON (`linux.seccomp` of a runtime bundle, the file of
//! `docker run --security-opt seccomp=FILE`): writing a profile as one ([`export`]) and reading
//! one into a profile ([`import`]). Pure translation: no kernel, no files.
//!
//! Both directions follow what runc with libseccomp does with the JSON, measured rather than
//! read from the specification (docs/containers.md): an entry without `args` for a call
//! overrides every entry with `args` for it, whatever their order; one entry compares each
//! argument at most once (runc splits repeated comparisons into separate rules, which then
//! mean "or"); an entry whose action is the default action is skipped; all comparisons are on
//! 64 bits. The export therefore writes entries that never overlap, and the import refuses
//! what has no single meaning.

mod eval;
mod export;
mod import;
mod names;

pub use eval::{Arg, Decision, Entry, Filter, Op};
pub use export::{export, Export};
pub use import::{
    import, parse_kernel, DockerEnv, ImportError, Imported, DOCKER_DEFAULT_CAPS, MAX_IMPORT_BYTES,
};
pub use names::{scmp_arch, SCMP_ARCHES};
