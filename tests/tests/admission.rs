//! Admission control on real programs built with the machine's compilers.

use sandbox_host::admission::{self, classify_with_path, ResolveError, Unconfinable, Verdict};
use sandbox_tests::{chmod, compile_hello, write_executable, Build};
use std::fs;
use std::path::{Path, PathBuf};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn classify(p: &Path) -> Verdict {
    classify_with_path(p, Some(PATH))
}

fn dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sandbox-admission-")
        .tempdir()
        .unwrap()
}

fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap()
}

#[test]
fn dynamic_glibc_program_is_confinable() {
    let d = dir();
    let prog = compile_hello(d.path(), "dynamic", Build::Dynamic);
    let v = classify(&prog);
    assert_eq!(v.preload, Ok(()), "{v:?}");
    assert_eq!(v.program, canonical(&prog));
    assert!(!v.privileged);
}

#[test]
fn static_program_is_refused() {
    let d = dir();
    let prog = compile_hello(d.path(), "static", Build::Static);
    let v = classify(&prog);
    assert_eq!(
        v.preload,
        Err(Unconfinable::Static {
            program: canonical(&prog)
        })
    );
    let msg = v.preload.unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{} is statically linked: LD_PRELOAD cannot enter it",
            canonical(&prog).display()
        )
    );
}

#[test]
fn static_pie_program_is_refused() {
    let d = dir();
    let prog = compile_hello(d.path(), "static-pie", Build::StaticPie);
    assert_eq!(
        classify(&prog).preload,
        Err(Unconfinable::StaticPie {
            program: canonical(&prog)
        })
    );
}

#[test]
fn musl_program_has_a_foreign_loader() {
    let d = dir();
    let prog = compile_hello(d.path(), "musl", Build::Musl);
    match classify(&prog).preload {
        Err(Unconfinable::ForeignLoader {
            program,
            interpreter,
        }) => {
            assert_eq!(program, canonical(&prog));
            let name = interpreter
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            assert!(name.starts_with("ld-musl-"), "{}", interpreter.display());
        }
        other => panic!("expected ForeignLoader, got {other:?}"),
    }
}

#[test]
fn musl_static_program_is_static() {
    let d = dir();
    let prog = compile_hello(d.path(), "musl-static", Build::MuslStatic);
    assert_eq!(
        classify(&prog).preload,
        Err(Unconfinable::Static {
            program: canonical(&prog)
        })
    );
}

#[test]
fn thirty_two_bit_program_is_wrong_class() {
    let d = dir();
    let prog = compile_hello(d.path(), "m32", Build::M32);
    let v = classify(&prog);
    assert_eq!(
        v.preload,
        Err(Unconfinable::WrongClass {
            program: canonical(&prog),
            bits: 32
        })
    );
    assert!(v.preload.unwrap_err().to_string().contains("32-bit"));
}

#[test]
fn script_with_static_interpreter_names_the_interpreter() {
    let d = dir();
    let interp = canonical(&compile_hello(d.path(), "static", Build::Static));
    let script = d.path().join("script");
    write_executable(&script, &format!("#!{} -x\necho hi\n", interp.display()));
    let v = classify(&script);
    let expected = Unconfinable::ScriptInterpreter {
        script: canonical(&script),
        interpreter: interp.clone(),
        reason: Box::new(Unconfinable::Static {
            program: interp.clone(),
        }),
    };
    assert_eq!(v.preload, Err(expected));
    let msg = v.preload.unwrap_err().to_string();
    assert!(
        msg.contains(&interp.display().to_string()) && msg.contains("statically linked"),
        "{msg}"
    );
}

#[test]
fn env_script_resolves_its_command_in_path() {
    let d = dir();
    let script = d.path().join("py");
    write_executable(&script, "#!/usr/bin/env python3\nprint('hi')\n");
    assert_eq!(classify(&script).preload, Ok(()));

    // The command env runs is classified too, found through the child's PATH.
    let bin = d.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let stat = canonical(&compile_hello(&bin, "mystatic", Build::Static));
    write_executable(&script, "#!/usr/bin/env -S mystatic --flag\n");
    let path = format!("{}:{PATH}", bin.display());
    match classify_with_path(&script, Some(&path)).preload {
        Err(Unconfinable::ScriptInterpreter {
            interpreter,
            reason,
            ..
        }) => {
            assert_eq!(interpreter, stat);
            assert_eq!(*reason, Unconfinable::Static { program: stat });
        }
        other => panic!("expected ScriptInterpreter, got {other:?}"),
    }
    write_executable(&script, "#!/usr/bin/env no-such-interpreter-xyz\n");
    assert!(matches!(
        classify(&script).preload,
        Err(Unconfinable::ScriptInterpreter { ref reason, .. }) if matches!(**reason, Unconfinable::NotFound { .. })
    ));
}

#[test]
fn nested_scripts_are_followed_to_a_limit() {
    let d = dir();
    let mut prev = PathBuf::from("/bin/sh");
    for i in 0..5 {
        let s = d.path().join(format!("s{i}"));
        write_executable(&s, &format!("#!{}\n", prev.display()));
        prev = s;
        let v = classify(&prev);
        if i < 4 {
            assert_eq!(v.preload, Ok(()), "depth {i}: {v:?}");
        } else {
            assert!(
                matches!(v.preload, Err(Unconfinable::ScriptInterpreter { .. })),
                "{v:?}"
            );
            assert!(v
                .preload
                .unwrap_err()
                .to_string()
                .contains("#! interpreters"));
        }
    }
}

#[test]
fn text_file_is_not_elf() {
    let d = dir();
    let text = d.path().join("notes.txt");
    write_executable(&text, "just text\n");
    assert_eq!(
        classify(&text).preload,
        Err(Unconfinable::NotElf {
            program: canonical(&text)
        })
    );
    let empty = d.path().join("empty");
    write_executable(&empty, "");
    assert_eq!(
        classify(&empty).preload,
        Err(Unconfinable::NotElf {
            program: canonical(&empty)
        })
    );
}

#[test]
fn setuid_copy_is_privileged() {
    let d = dir();
    let prog = compile_hello(d.path(), "suid", Build::Dynamic);
    chmod(&prog, 0o4755);
    let v = classify(&prog);
    assert!(v.privileged && v.preload.is_ok(), "{v:?}");
    chmod(&prog, 0o2755);
    assert!(classify(&prog).privileged, "setgid");
    chmod(&prog, 0o755);
    assert!(!classify(&prog).privileged);
}

#[test]
fn file_capabilities_are_privileged() {
    let d = dir();
    let prog = compile_hello(d.path(), "caps", Build::Dynamic);
    // security.capability v2 for cap_net_raw+ep (magic 0x02000001 | effective, permitted bit 13).
    let value: [u8; 20] = [
        1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let path = std::ffi::CString::new(prog.to_str().unwrap()).unwrap();
    // SAFETY: both strings are NUL-terminated and `value` is valid for its length.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            c"security.capability".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(
        rc,
        0,
        "setxattr security.capability: {}",
        std::io::Error::last_os_error()
    );
    assert!(classify(&prog).privileged);
}

#[test]
fn system_ls_is_confinable_and_unprivileged() {
    let v = classify(Path::new("/bin/ls"));
    assert_eq!(v.preload, Ok(()), "{v:?}");
    assert!(!v.privileged);
    let by_name = classify(Path::new("ls"));
    assert_eq!(by_name.program, v.program);
}

#[test]
fn missing_and_unexecutable_programs() {
    let v = classify(Path::new("no-such-command-xyz"));
    assert_eq!(
        v.preload,
        Err(Unconfinable::NotFound {
            program: "no-such-command-xyz".into()
        })
    );
    let d = dir();
    let file = d.path().join("data");
    fs::write(&file, "x").unwrap();
    chmod(&file, 0o644);
    assert!(matches!(
        classify(&file).preload,
        Err(Unconfinable::NotExecutable { .. })
    ));
}

#[test]
fn resolve_like_execvp() {
    assert_eq!(
        admission::resolve("ls", Some(PATH)).unwrap(),
        canonical(Path::new("/bin/ls"))
    );
    let err = admission::resolve("no-such-command-xyz", Some(PATH)).unwrap_err();
    assert_eq!(
        (err.exit_status(), &err),
        (127, &ResolveError::NotFound("no-such-command-xyz".into()))
    );

    let d = dir();
    let file = d.path().join("tool");
    fs::write(&file, "#!/bin/sh\n").unwrap();
    chmod(&file, 0o644);
    let path = format!("{}:{PATH}", d.path().display());
    assert_eq!(
        admission::resolve("tool", Some(&path))
            .unwrap_err()
            .exit_status(),
        126
    );
    chmod(&file, 0o755);
    assert_eq!(
        admission::resolve("tool", Some(&path)).unwrap(),
        canonical(&file)
    );
    assert_eq!(
        admission::resolve(file.to_str().unwrap(), None).unwrap(),
        canonical(&file)
    );
    assert_eq!(
        admission::resolve(d.path().to_str().unwrap(), None)
            .unwrap_err()
            .exit_status(),
        126
    );
}
