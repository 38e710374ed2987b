//! The MCP reference servers this project tests against, installed by its own `.ci/mcp-servers`.

use std::path::{Path, PathBuf};

/// `<target dir>/mcp-servers`, with the pinned packages installed by the project's own
/// installer, `.ci/mcp-servers` (once: it keeps a marker of a finished install, and a lock
/// makes concurrent test binaries take turns).
pub(crate) fn servers_dir() -> PathBuf {
    // The test binary is `<target dir>/<profile>/deps/<name>`.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.ancestors().nth(3).unwrap().join("mcp-servers");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/mcp-servers");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs .ci/mcp-servers");
    assert!(
        out.status.success(),
        "{} failed ({}): the MCP reference server tests need node and npm",
        script.display(),
        out.status
    );
    dir
}
