//! Beyond Claude Code: a trusted-hash pin per command (as Codex reviews and trusts hooks by
//! hash). A pinned script that changed since it was trusted is skipped with a warning.

use serde_json::json;
use sha2::{Digest, Sha256};
use tower_agent::layers::command::CommandHooks;

use crate::{recorder, run_calls, runs, support::command::Scripts};

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn pinned(scripts: &Scripts, command: &str, hash: &str) -> CommandHooks {
    scripts.hooks(json!({"PreToolUse": [{"hooks": [
        {"type": "command", "command": command, "sha256": hash}
    ]}]}))
}

#[tokio::test]
async fn a_pinned_script_runs_while_unchanged() {
    let scripts = Scripts::new();
    let rec = recorder(&scripts);
    let hash = sha256_hex(&std::fs::read(&rec).unwrap());
    let hooks = pinned(&scripts, &format!("{rec} pinned"), &hash);
    assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());
    let (_, warnings) = run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    assert_eq!(runs(&scripts), ["pinned"]);
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[tokio::test]
async fn an_edited_script_is_skipped_with_a_warning() {
    let scripts = Scripts::new();
    let rec = recorder(&scripts);
    let hash = sha256_hex(&std::fs::read(&rec).unwrap());

    // Changed before the hooks are built: listed in `warnings()`, and skipped.
    let edited = format!(
        "{}\necho tampered\n",
        std::fs::read_to_string(&rec).unwrap()
    );
    std::fs::write(&rec, &edited).unwrap();
    let hooks = pinned(&scripts, &format!("{rec} before"), &hash);
    assert!(
        hooks
            .warnings()
            .iter()
            .any(|w| w.contains("changed since it was trusted")),
        "{:?}",
        hooks.warnings()
    );
    let (_, warnings) = run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    assert!(runs(&scripts).is_empty());
    assert!(
        warnings.iter().any(|w| w.contains("is skipped")),
        "{warnings:?}"
    );

    // Changed after: the check before each spawn catches it.
    let hash = sha256_hex(edited.as_bytes());
    let hooks = pinned(&scripts, &format!("{rec} after"), &hash);
    assert!(hooks.warnings().is_empty());
    std::fs::write(&rec, format!("{edited}echo again\n")).unwrap();
    let (_, warnings) = run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    assert!(runs(&scripts).is_empty());
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("changed since it was trusted")),
        "{warnings:?}"
    );
}

// The builder's `trust(script, hash)` pins every handler running that script, as the
// `sha256` field does; a bad hash is an error.
#[tokio::test]
async fn builder_trust() {
    let scripts = Scripts::new();
    let rec = recorder(&scripts);
    let settings = json!({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": format!("bash {rec} via-bash")}
    ]}]}});
    let build = |hash: &str| {
        CommandHooks::builder()
            .settings_json(settings.clone(), "settings.json")
            .trust("rec.sh", hash)
            .project_dir(scripts.dir.path())
            .build()
    };
    let wrong = sha256_hex(b"something else");
    let hooks = build(&wrong).unwrap();
    assert!(
        hooks
            .warnings()
            .iter()
            .any(|w| w.contains("changed since it was trusted"))
    );
    run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    assert!(runs(&scripts).is_empty());

    let right = sha256_hex(&std::fs::read(&rec).unwrap());
    run_calls(
        build(&right).unwrap().into_hooks(),
        &[("Bash", json!({"command": "ls"}))],
    )
    .await;
    assert_eq!(runs(&scripts), ["via-bash"]);
    assert!(build("nothex").is_err());
}
