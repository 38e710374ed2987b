//! Helpers of the session and lifecycle event tests: scripts that dump their input, and
//! waiting for hooks that run in the background.

use std::path::Path;

use serde_json::Value;

use crate::support::command::Scripts;

/// A bash hook that appends its stdin (one JSON line) to `<dir>/<name>.jsonl`, then runs
/// `then` (more bash).
pub(crate) fn dump(scripts: &Scripts, name: &str, then: &str) -> String {
    let out = scripts.path(&format!("{name}.jsonl"));
    scripts.bash(
        &format!("{name}.sh"),
        &format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> '{}'\n{then}",
            out.display()
        ),
    )
}

/// The inputs a [`dump`] hook received, in order.
pub(crate) fn inputs(scripts: &Scripts, name: &str) -> Vec<Value> {
    scripts
        .read(&format!("{name}.jsonl"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// Waits (at most [`PATIENCE`](crate::support::PATIENCE)) until the [`dump`] hook `name` has
/// received `n` inputs: for hooks that run in the background (SessionEnd, StopFailure,
/// PostCompact).
pub(crate) async fn wait_inputs(scripts: &Scripts, name: &str, n: usize) -> Vec<Value> {
    let what = format!("{n} inputs of hook `{name}`");
    crate::support::eventually(&what, || {
        let got = inputs(scripts, name);
        (got.len() >= n).then_some(got)
    })
    .await
}

/// Asserts the common input fields (`hooks.md` § "Common input fields").
pub(crate) fn assert_common(input: &Value, event: &str, cwd: &Path) {
    assert_eq!(input["hook_event_name"], event, "{input}");
    assert!(
        input["session_id"].as_str().is_some_and(|s| !s.is_empty()),
        "{input}"
    );
    assert!(input["transcript_path"].is_string(), "{input}");
    assert_eq!(input["cwd"], cwd.to_string_lossy().as_ref(), "{input}");
}
