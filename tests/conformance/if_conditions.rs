//! hooks.md § "Common fields" (`if`), with permissions.md § "Permission rule syntax" and
//! § "Tool-specific permission rules": a handler with `if` runs only for tool calls its rule
//! matches, and a call it does not match starts no process.

use serde_json::{Value, json};
use tower_agent::command::{CommandHooks, HookEvent};

use crate::{recorder, run_calls, runs, support::command::Scripts};

/// One PreToolUse handler per `(tag, if)`, all recording with [`recorder`].
fn hooks(scripts: &Scripts, rules: &[(&str, &str)]) -> CommandHooks {
    let rec = recorder(scripts);
    let handlers: Vec<Value> = rules
        .iter()
        .map(
            |(tag, rule)| json!({"type": "command", "command": format!("{rec} {tag}"), "if": rule}),
        )
        .collect();
    scripts.hooks(json!({"PreToolUse": [{"matcher": "*", "hooks": handlers}]}))
}

async fn bash_runs(rule: &str, command: &str) -> Vec<String> {
    let scripts = Scripts::new();
    let hooks = hooks(&scripts, &[("hit", rule)]);
    run_calls(hooks.into_hooks(), &[("Bash", json!({"command": command}))]).await;
    runs(&scripts)
}

// hooks.md § "Common fields", the Bash matching table, row by row.
#[tokio::test]
async fn bash_table_of_the_reference() {
    let cases = [
        ("Bash(git *)", "FOO=bar git push", true),
        ("Bash(git *)", "npm test && git push", true),
        ("Bash(rm *)", "echo $(rm -rf /)", true),
        ("Bash(rm *)", "echo $(date)", false),
        ("Bash(git push *)", "echo $(date)", true),
    ];
    for (rule, command, runs) in cases {
        let got = bash_runs(rule, command).await;
        assert_eq!(
            got.len(),
            usize::from(runs),
            "{rule} on `{command}`: {got:?}"
        );
    }
}

// hooks.md § "Common fields": "The filter also fails open … when the Bash command can't be
// parsed"; permissions.md § "Compound commands": `&&`, `||`, `;`, `|`, `|&`, `&`, newlines.
#[tokio::test]
async fn bash_subcommands_assignments_backticks_and_fail_open() {
    let cases = [
        ("Bash(git *)", "FOO=1 git push", true),
        ("Bash(git *)", "ls && git push", true),
        ("Bash(git *)", "ls; git status", true),
        ("Bash(git *)", "ls | git apply", true),
        ("Bash(git *)", "ls\ngit log", true),
        ("Bash(git *)", "echo $(git push)", true),
        ("Bash(git *)", "echo `git push`", true),
        ("Bash(git *)", "timeout 30 git fetch", true),
        ("Bash(git *)", "ls -la", false),
        ("Bash(git *)", "echo 'git push'", false),
        ("Bash(git *)", "gitk", false),
        ("Bash(rm *)", "echo \"unterminated", true),
        ("Bash(rm *)", "cat <<EOF\nhi\nEOF", true),
    ];
    for (rule, command, runs) in cases {
        let got = bash_runs(rule, command).await;
        assert_eq!(
            got.len(),
            usize::from(runs),
            "{rule} on `{command}`: {got:?}"
        );
    }
}

// hooks.md § "Common fields": `"Edit(*.ts)"` runs only for TypeScript files; permissions.md
// § "Read and Edit": gitignore patterns, `./` relative to the working directory, `/` to the
// project, `//` absolute, bare names at any depth, `src/**` only at the top.
#[tokio::test]
async fn path_rules_on_file_tools() {
    let scripts = Scripts::new();
    let hooks = hooks(
        &scripts,
        &[
            ("ts", "Edit(*.ts)"),
            ("secrets", "Read(./secrets/**)"),
            ("src", "Edit(src/**)"),
            ("docs", "Edit(/docs/**)"),
            ("abs", "Edit(//tmp/cf-if-abs/*.txt)"),
        ],
    );
    let dir = scripts.dir.path().display().to_string();
    run_calls(
        hooks.into_hooks(),
        &[
            ("Edit", json!({"file_path": format!("{dir}/lib/a.ts")})),
            ("Write", json!({"file_path": "src/app.ts"})),
            (
                "Edit",
                json!({"file_path": format!("{dir}/vendor/pkg/src/lib.js")}),
            ),
            ("Read", json!({"file_path": "secrets/api/key.pem"})),
            (
                "Read",
                json!({"file_path": format!("{dir}/public/secrets.txt")}),
            ),
            ("Edit", json!({"file_path": "docs/guide.md"})),
            ("Edit", json!({"file_path": "/tmp/cf-if-abs/x.txt"})),
            ("Edit", json!({"file_path": "/tmp/cf-if-abs/sub/x.txt"})),
        ],
    )
    .await;
    // One line per spawn, in call order (the handlers of one call run in parallel, so sort
    // within a call is not needed: each call matches at most two rules, checked as a set).
    let mut got = runs(&scripts);
    got.sort();
    let mut want = vec!["ts", "ts", "src", "secrets", "docs", "abs"];
    want.sort_unstable();
    assert_eq!(got, want);
}

// hooks.md § "Match MCP tools": "Use the same scoped tool name in a handler's `if` field";
// permissions.md § "MCP": `mcp__server`, `mcp__server__*`, `mcp__server__tool`.
#[tokio::test]
async fn mcp_rules() {
    let scripts = Scripts::new();
    let hooks = hooks(
        &scripts,
        &[
            ("server", "mcp__memory"),
            ("glob", "mcp__memory__*"),
            ("tool", "mcp__github__search"),
            ("other", "mcp__slack__post"),
        ],
    );
    run_calls(
        hooks.into_hooks(),
        &[
            ("mcp__memory__create_entities", json!({})),
            ("mcp__github__search", json!({"q": "x"})),
        ],
    )
    .await;
    let mut got = runs(&scripts);
    got.sort();
    assert_eq!(got, ["glob", "server", "tool"]);
}

// hooks.md § "Common fields": "On other events, a hook with `if` set never runs."
#[tokio::test]
async fn if_on_other_events_never_runs() {
    let scripts = Scripts::new();
    let rec = recorder(&scripts);
    let hooks = scripts.hooks(json!({
        "Stop": [{"hooks": [{"type": "command", "command": format!("{rec} stop"), "if": "Bash"}]}],
        "PostToolUse": [{"hooks": [{"type": "command", "command": format!("{rec} post"), "if": "Bash(ls *)"}]}],
    }));
    assert!(hooks.commands(HookEvent::Stop).is_empty());
    assert!(
        hooks
            .warnings()
            .iter()
            .any(|w| w.contains("only evaluated on tool events"))
    );
    run_calls(
        hooks.into_hooks(),
        &[
            ("Bash", json!({"command": "ls -la"})),
            ("Bash", json!({"command": "pwd"})),
        ],
    )
    .await;
    assert_eq!(runs(&scripts), ["post"]);
}

// A matching rule's hook gets the usual input and its decision counts (a deny blocks).
#[tokio::test]
async fn a_matching_rule_keeps_the_protocol() {
    let scripts = Scripts::new();
    let deny = scripts.bash("deny.sh", r#"echo "no pushes" >&2; exit 2"#);
    let hooks = scripts.hooks(json!({"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": deny, "if": "Bash(git push *)"}
    ]}]}));
    let (resp, _) = run_calls(
        hooks.into_hooks(),
        &[
            ("Bash", json!({"command": "git status"})),
            (
                "Bash",
                json!({"command": "cd repo && git push origin main"}),
            ),
        ],
    )
    .await;
    let texts = crate::support::command::tool_texts(&resp);
    assert_eq!(texts[0], "ok Bash");
    assert!(texts[1].contains("no pushes"), "{texts:?}");
}

// A bad rule is a configuration error naming the field.
#[test]
fn a_bad_rule_is_an_error() {
    let scripts = Scripts::new();
    let err = CommandHooks::builder()
        .settings_json(
            json!({"hooks": {"PreToolUse": [{"hooks": [
                {"type": "command", "command": "true", "if": "Bash(git *"}
            ]}]}}),
            "settings.json",
        )
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap_err();
    assert_eq!(err.path(), "hooks.PreToolUse[0].hooks[0].if");
}

// The same handler under two `if` rules is two handlers (the rule is part of what a handler
// is), while the same handler and rule defined twice runs once (hooks.md § "Hook handler
// fields": "If you define the same handler in more than one settings file, it runs once").
#[tokio::test]
async fn dedup_respects_the_rule() {
    let scripts = Scripts::new();
    let rec = recorder(&scripts);
    let group = |rule: &str| {
        json!({"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": format!("{rec} x"), "if": rule}
        ]}]}})
    };
    let hooks = CommandHooks::builder()
        .settings_json(group("Bash(ls *)"), "user.json")
        .settings_json(group("Bash(ls *)"), "project.json")
        .settings_json(group("Bash(pwd)"), "local.json")
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap();
    assert_eq!(hooks.commands(HookEvent::PreToolUse).len(), 2);
    run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    assert_eq!(runs(&scripts), ["x"]);
}
