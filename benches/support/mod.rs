//! Helpers shared by the benches: where criterion writes, and the estimates it wrote.

use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

use serde_json::Value;

/// Criterion's output directory, set explicitly so the summary knows where the estimates are
/// (same default as criterion: `$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`, else
/// `target/criterion` of this package).
pub(crate) fn output_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("criterion")
}

/// The median time per iteration in ns of a benchmark measured in this process (the median
/// rather than criterion's slope or mean: on a shared 2-core machine it shrugs off the bursts
/// of other processes).
pub(crate) fn estimate(dir: &Path, id: &str, since: SystemTime) -> Option<f64> {
    let path = dir.join(id).join("new/estimates.json");
    if std::fs::metadata(&path).ok()?.modified().ok()? < since {
        return None; // stale: from an earlier run, or filtered out of this one
    }
    let json: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    json["median"]["point_estimate"].as_f64()
}

/// `met` / `NOT met`, for the summaries of benches that have targets.
#[allow(dead_code)] // each bench compiles this module; not every one has targets
pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

/// A persistent command hook (python) that allows every call: the process the command-hook
/// and wasm-hook benches measure their round trips against.
#[allow(dead_code)] // not every bench runs hooks
pub(crate) const PERSISTENT_ALLOW: &str = r#"#!/usr/bin/env python3
import json, sys
allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
for line in sys.stdin:
    event = json.loads(line)
    sys.stdout.write(json.dumps({"id": event["id"], "exit": 0, "output": allow}) + "\n")
    sys.stdout.flush()
"#;
