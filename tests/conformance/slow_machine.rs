//! On a machine busy compiling, a hook starts late. The tests that wait for a hook (for a
//! background hook's input, or for a file it writes) wait for the hook itself, however late
//! it is, and not for a few seconds of wall clock. Here some of them run again, in child
//! processes in which every `bash` starts 11 s late. That is past the 5 to 10 s these tests
//! used to allow, and well within the hooks' own timeouts.

use std::path::{Path, PathBuf};

use crate::support::{passed, rerun};

/// How late every `bash` starts in the children.
const LATE: &str = "11";

/// The first `bash` on `PATH`.
fn real_bash() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("bash"))
        .find(|bash| bash.is_file())
        .expect("bash on PATH")
}

/// `PATH` with `dir` first, where `dir` holds a `bash` that sleeps [`LATE`] seconds before
/// it runs the real one (hook scripts start with `#!/usr/bin/env bash`).
fn late_path(dir: &Path) -> std::ffi::OsString {
    use std::os::unix::fs::PermissionsExt;
    let bash = dir.join("bash");
    std::fs::write(
        &bash,
        format!(
            "#!/bin/sh\nsleep {LATE}\nexec '{}' \"$@\"\n",
            real_bash().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bash, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path)))
        .unwrap()
}

#[test]
fn tests_that_wait_for_a_hook_pass_when_every_hook_starts_late() {
    let dir = tempfile::tempdir().unwrap();
    let path = late_path(dir.path());
    let tests = [
        // A background StopFailure hook's input (it waited 10 s).
        "stop_failure::a_model_error_fires_stop_failure_with_its_type",
        // A background InstructionsLoaded hook's input (10 s).
        "instructions_loaded::each_memory_file_loaded_fires_it",
        // An async hook's end, after the run (5 s).
        "handlers_async::an_async_hook_neither_delays_nor_blocks",
    ];
    let children: Vec<_> = tests
        .iter()
        .map(|test| {
            let child = rerun(test)
                .env("PATH", &path)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (test, child)
        })
        .collect();
    for (test, child) in children {
        passed(&child.wait_with_output().unwrap(), test);
    }
}
