//! Beyond Claude Code: a trusted-hash pin per command (as Codex reviews and trusts hooks by
//! hash). A pinned script that changed since it was trusted is skipped with a warning.

use std::{os::unix::fs::PermissionsExt, path::PathBuf, sync::Arc};

use serde_json::json;
use sha2::{Digest, Sha256};
use tower_agent::{Agent, command::CommandHooks, model::ScriptedModel};

use crate::{
    recorder, run_calls, runs,
    support::command::{Scripts, bash_tool, warnings},
};

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
            .transcripts_dir(scripts.path("transcripts"))
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

// A pinned command naming its script by a relative path runs the file of that name in the
// directory it runs in (the agent's working directory, here not the project directory): the
// pin is checked on that file, not on the project's. A different file there is skipped with
// a warning; the trusted file there runs.
#[tokio::test]
async fn a_relative_pin_is_checked_where_the_handler_runs() {
    let scripts = Scripts::new();
    let rec = recorder(&scripts);
    let trusted = std::fs::read(&rec).unwrap();
    let hash = sha256_hex(&trusted);
    let elsewhere = tempfile::tempdir().unwrap();
    let other = elsewhere.path().join("rec.sh");
    let run_in = |cwd: PathBuf| {
        let hooks = pinned(&scripts, "./rec.sh relative", &hash);
        assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());
        async move {
            let (hooks, log) = warnings(hooks.into_hooks());
            let seen = Arc::default();
            let agent = Agent::builder()
                .model(
                    ScriptedModel::new()
                        .tool_call("bash", json!({"command": "ls"}))
                        .text("done"),
                )
                .tool(bash_tool(&seen))
                .hooks(hooks.compile().unwrap())
                .cwd(cwd)
                .build();
            agent.run("go").await.unwrap();
            log.lock().unwrap().clone()
        }
    };

    // Not the trusted script: skipped, though the project's `rec.sh` is unchanged.
    let untrusted = "#!/usr/bin/env bash\necho untrusted >> \"$CLAUDE_PROJECT_DIR/runs.log\"\n";
    std::fs::write(&other, untrusted).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    let warnings = run_in(elsewhere.path().to_path_buf()).await;
    assert!(runs(&scripts).is_empty(), "{:?}", runs(&scripts));
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("changed since it was trusted")
                && w.contains(&*other.to_string_lossy())),
        "{warnings:?}"
    );

    // The trusted script there: it runs.
    std::fs::write(&other, &trusted).unwrap();
    let warnings = run_in(elsewhere.path().to_path_buf()).await;
    assert_eq!(runs(&scripts), ["relative"]);
    assert!(warnings.is_empty(), "{warnings:?}");
}
