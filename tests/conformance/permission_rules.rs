//! permissions.md § "Permission rules" (allow, ask, deny; "deny → ask → allow, the first
//! matching rule wins") and § "Manage permissions" (`--allowedTools`, `--disallowedTools`),
//! and hooks.md § "PreToolUse decision control" ("allow" does not override deny or ask rules),
//! as command hooks enforce them; the texts are Claude Code 2.1.328's (vectors
//! `permission_rule_*`, `permission_request_*`).

use serde_json::{Value, json};
use tower_agent::command::{CommandHooks, CommandHooksBuilder};

use crate::{
    exit_codes::{calls_bash, dumped, dumping},
    support::command::{Scripts, agent, tool_text},
};

/// The builder of command hooks with `permissions` and `hooks` in their settings.
fn with_rules(s: &Scripts, permissions: Value, hooks: Value) -> CommandHooksBuilder {
    std::fs::create_dir_all(s.path("project")).unwrap();
    CommandHooks::builder()
        .settings_json(
            json!({ "hooks": hooks, "permissions": permissions }),
            "settings.json",
        )
        .project_dir(s.path("project"))
        .transcripts_dir(s.path("transcripts"))
}

/// Runs one `bash` call of `command`: whether it ran, and what the model saw.
async fn play(hooks: CommandHooks, command: &str) -> (bool, String) {
    let model = calls_bash(command);
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    let ran = !seen.lock().unwrap().is_empty();
    (ran, tool_text(&resp))
}

fn group(command: &str) -> Value {
    json!([ { "matcher": "bash", "hooks": [ { "type": "command", "command": command } ] } ])
}

const HOOK_ALLOW: &str = r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'"#;
const REQUEST_ALLOW: &str = r#"echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}'"#;

// A deny rule refuses the call after the PreToolUse hooks, in Claude Code's words, with no
// PermissionRequest; neither a hook's allow nor an allow rule overrides it (vectors
// `permission_rule_deny`, `permission_rule_deny_over_hook_allow`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_rule_refuses_whatever_the_hooks_say() {
    let s = Scripts::new();
    let pre = dumping(&s, "pre", HOOK_ALLOW);
    let req = dumping(&s, "req", REQUEST_ALLOW);
    let hooks = with_rules(
        &s,
        json!({ "deny": ["Bash(rm *)"], "allow": ["Bash(rm *)"] }),
        json!({ "PreToolUse": group(&pre), "PermissionRequest": group(&req) }),
    )
    .build()
    .unwrap();
    let (ran, text) = play(hooks.clone(), "ls && rm -rf build").await;
    assert!(!ran);
    assert_eq!(
        text,
        "Permission to use bash with command ls && rm -rf build has been denied."
    );
    assert_eq!(dumped(&s, "pre").len(), 1, "the PreToolUse hooks run first");
    assert!(dumped(&s, "req").is_empty(), "no PermissionRequest");
    let (ran, _) = play(hooks, "ls -la").await;
    assert!(ran, "what no rule denies runs");
}

// An ask rule asks: PermissionRequest hooks (no `permission_suggestions`), whose allow runs
// the call; with none deciding and nobody to ask, Claude Code's refusal. A hook's allow does
// not override it (vectors `permission_rule_ask`, `permission_rule_ask_over_hook_allow`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_rule_asks_even_when_a_hook_allows() {
    let s = Scripts::new();
    let pre = s.bash("pre.sh", HOOK_ALLOW);
    let req = dumping(&s, "req", "");
    let rules = json!({ "ask": ["Bash(git push *)"], "allow": ["Bash(git *)"] });
    let hooks = with_rules(
        &s,
        rules.clone(),
        json!({ "PreToolUse": group(&pre), "PermissionRequest": group(&req) }),
    )
    .build()
    .unwrap();
    let (ran, text) = play(hooks, "git push origin main").await;
    assert!(!ran, "ask over allow, and over the hook's allow");
    assert_eq!(
        text,
        "Claude requested permissions to use bash, but you haven't granted it yet."
    );
    let input = &dumped(&s, "req")[0];
    assert_eq!(
        input["tool_input"],
        json!({"command": "git push origin main"})
    );
    assert!(input.get("permission_suggestions").is_none(), "{input}");

    let granting = s.bash("grant.sh", &format!("cat >/dev/null; {REQUEST_ALLOW}"));
    let hooks = with_rules(&s, rules, json!({ "PermissionRequest": group(&granting) }))
        .build()
        .unwrap();
    let (ran, text) = play(hooks, "git push origin main").await;
    assert!(ran, "{text}");
}

// Claude Code's default mode, opted into: an allow rule (or `--allowedTools`) runs what it
// covers without asking; any other call is asked about (PermissionRequest with Claude
// Code's suggestions) and refused with nobody to ask; a PreToolUse hook's allow lets it run
// (vectors `permission_rule_allow`, `permission_rule_allow_redirect`, `permission_allow`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_unless_allowed_runs_only_what_a_rule_or_a_hook_allows() {
    let s = Scripts::new();
    let req = dumping(&s, "req", "");
    let hooks = with_rules(
        &s,
        json!({ "allow": ["Bash(echo *)"] }),
        json!({ "PermissionRequest": group(&req) }),
    )
    .allowed_tools(["Bash(git status)"])
    .ask_unless_allowed()
    .build()
    .unwrap();
    assert!(play(hooks.clone(), "echo hi").await.0);
    assert!(play(hooks.clone(), "git status").await.0);
    assert!(dumped(&s, "req").is_empty(), "allowed: nothing asked");

    // Every subcommand must be allowed.
    let (ran, text) = play(hooks.clone(), "echo hi && curl example.com").await;
    assert!(!ran);
    assert_eq!(text, "This command requires approval");
    assert_eq!(
        dumped(&s, "req")[0]["permission_suggestions"],
        json!([{"type": "addRules", "rules": [{"toolName": "bash",
            "ruleContent": "echo hi && curl example.com"}], "behavior": "allow",
            "destination": "localSettings"}])
    );

    // An output redirection into the project is no `echo`.
    let (ran, text) = play(hooks, "echo hi >> notes.txt").await;
    assert!(!ran);
    let project = s.path("project");
    assert_eq!(
        text,
        format!(
            "Output redirection to '{}' needs approval. The path is inside the working \
             directories for this session ('{}'), and Claude Code asks before a shell command \
             creates, changes or removes files there.",
            project.join("notes.txt").display(),
            project.display()
        )
    );
    assert_eq!(
        dumped(&s, "req")[1]["permission_suggestions"],
        json!([{"type": "addDirectories", "directories": [project.display().to_string()],
            "destination": "session"}])
    );

    let pre = s.bash("pre.sh", HOOK_ALLOW);
    let hooks = with_rules(&s, json!({}), json!({ "PreToolUse": group(&pre) }))
        .ask_unless_allowed()
        .build()
        .unwrap();
    assert!(play(hooks, "curl example.com").await.0, "a hook's allow");
}

// Without the opt-in, a call no rule speaks of runs, as it always did; `--disallowedTools`
// is a deny rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_opt_in_unlisted_calls_run() {
    let s = Scripts::new();
    let hooks = with_rules(&s, json!({ "allow": ["Bash(echo *)"] }), json!({}))
        .disallowed_tools(["Bash(curl *)"])
        .build()
        .unwrap();
    assert!(play(hooks.clone(), "ls").await.0);
    let (ran, text) = play(hooks, "curl example.com").await;
    assert!(!ran);
    assert_eq!(
        text,
        "Permission to use bash with command curl example.com has been denied."
    );
}

// Rules of every settings source merge, and a deny of one source is not undone by another's
// allow (permissions.md § "Settings precedence": "if a permission is denied ... no other
// level can allow it").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_merge_and_deny_wins_across_sources() {
    let s = Scripts::new();
    let hooks = CommandHooks::builder()
        .settings_json(json!({ "permissions": { "deny": ["Bash(rm *)"] } }), "user")
        .settings_json(json!({ "permissions": { "allow": ["Bash"] } }), "project")
        .project_dir(s.path(""))
        .ask_unless_allowed()
        .build()
        .unwrap();
    assert!(play(hooks.clone(), "ls").await.0);
    assert!(!play(hooks, "rm -f x").await.0);
}

// A rule that cannot be read is an error naming the file and the path in it.
#[test]
fn malformed_rules_are_errors_naming_where() {
    let s = Scripts::new();
    let error = |permissions: Value| {
        with_rules(&s, permissions, json!({}))
            .build()
            .unwrap_err()
            .to_string()
    };
    let e = error(json!({ "deny": ["Bash(rm *)", "Bash(rm"] }));
    assert!(
        e.contains("settings.json") && e.contains("permissions.deny[1]"),
        "{e}"
    );
    let e = error(json!({ "allow": "Bash" }));
    assert!(e.contains("permissions.allow: must be an array"), "{e}");
    let e = error(json!({ "ask": [3] }));
    assert!(e.contains("permissions.ask[0]"), "{e}");
    let e = error(json!(["Bash"]));
    assert!(e.contains("permissions: must be an object"), "{e}");
    let e = CommandHooks::builder()
        .allowed_tools(["Read", "(nothing)"])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("CommandHooksBuilder::allowed_tools: [1]"), "{e}");
}
