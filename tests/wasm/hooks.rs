//! A WebAssembly hook where a command hook would be: from a settings file (`"type":
//! "wasm"`), a hooks directory (a `.wasm` file describing itself) and the Rust builder; its
//! decisions are a command hook's, in the same chain.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tower_agent::{
    AgentRequest,
    command::CommandHooks,
    layers::hooks::PreToolUse,
    model::ScriptedModel,
    wasm::{WasmAnswer, WasmHook},
};

use crate::{
    guests::{self, Guest},
    support::command::{Scripts, agent, tool_text},
};

/// Two runs through `hooks`: `rm -rf /tmp/x` (denied by the guard) and `ls` (let through).
async fn guard_runs(hooks: CommandHooks) {
    let model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "rm -rf /tmp/x"}))
        .text("done")
        .tool_call("bash", json!({"command": "ls"}))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let agent = builder.build();
    let denied = agent.run(AgentRequest::new("clean up")).await.unwrap();
    assert!(
        tool_text(&denied).contains("rm -rf is not allowed (wasm guard)"),
        "{}",
        tool_text(&denied)
    );
    let allowed = agent.run(AgentRequest::new("list")).await.unwrap();
    assert_eq!(tool_text(&allowed), "ran: ls");
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        [json!({"command": "ls"})],
        "the denied call never ran"
    );
}

#[tokio::test]
async fn a_wasm_handler_in_a_settings_file_denies_as_a_command_hook_would() {
    let s = Scripts::new();
    std::fs::write(s.path("guard.wasm"), guests::rm_rf_guard()).unwrap();
    let hooks = s.hooks(json!({
        "PreToolUse": [{ "matcher": "bash", "hooks": [
            { "type": "wasm", "path": "guard.wasm" }
        ] }],
    }));
    guard_runs(hooks).await;
}

#[tokio::test]
async fn a_wasm_file_in_a_hooks_directory_describes_its_events_and_matcher() {
    let s = Scripts::new();
    let dir = s.path("hooks.d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("guard.wasm"), guests::rm_rf_guard()).unwrap();
    let hooks = CommandHooks::builder()
        .hooks_dir(&dir)
        .project_dir(s.dir.path())
        .without_transcripts()
        .build()
        .unwrap();
    assert_eq!(
        hooks
            .commands(tower_agent::command::HookEvent::PreToolUse)
            .len(),
        1
    );
    guard_runs(hooks).await;
}

#[tokio::test]
async fn a_wasm_hook_given_in_rust_joins_the_chain_after_a_closure_hook() {
    let s = Scripts::new();
    let hook = WasmHook::builder()
        .bytes("guard", guests::rm_rf_guard())
        .build()
        .unwrap();
    assert!(hook.is_stateless());
    let hooks = crate::guests::command_hooks(hook, s.dir.path());
    // A closure hook that records each call it sees first, then the wasm guard.
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&order);
    let closure =
        tower_agent::layers::hooks::Hooks::new().before_tool_use("bash", move |call, _| {
            log.lock()
                .unwrap()
                .push(call.arguments["command"].to_string());
            PreToolUse::Continue
        });
    let combined = hooks.register(closure);
    let model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "rm -rf /"}))
        .text("done");
    let (builder, seen) = agent(&model, combined);
    let resp = builder.build().run(AgentRequest::new("go")).await.unwrap();
    assert!(
        tool_text(&resp).contains("wasm guard"),
        "{}",
        tool_text(&resp)
    );
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(*order.lock().unwrap(), ["\"rm -rf /\""]);
}

/// `ok(json)`, `ok("")` and `err(reason)` are a command hook's exit 0 with JSON, exit 0 with
/// nothing, and exit 2 with its stderr; `err` blocks a PreToolUse call with the reason.
#[tokio::test]
async fn answers_are_a_command_hooks_exits() {
    let mut g = Guest::new(r#"{"events": ["PreToolUse"]}"#);
    let (reason, len) = g.string("blocked by the guest");
    let blocking = g.handle(&format!("(call $err {reason} {len})")).build();
    let hook = WasmHook::builder()
        .bytes("blocking", blocking)
        .build()
        .unwrap();
    assert_eq!(
        hook.call("{}").await.unwrap(),
        WasmAnswer::Block("blocked by the guest".into())
    );
    let silent = WasmHook::builder()
        .bytes(
            "silent",
            guests::answering(r#"{"events": ["PreToolUse"]}"#, " "),
        )
        .build()
        .unwrap();
    assert_eq!(silent.call("{}").await.unwrap(), WasmAnswer::Nothing);

    let s = Scripts::new();
    let hooks = crate::guests::command_hooks(hook, s.dir.path());
    let model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "ls"}))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run(AgentRequest::new("go")).await.unwrap();
    assert!(
        tool_text(&resp).contains("blocked by the guest"),
        "{}",
        tool_text(&resp)
    );
    assert!(seen.lock().unwrap().is_empty());
}

/// A stateless hook keeps its instance (its state lives on: a counter in its memory counts
/// every call); any other gets a fresh instance per call (the counter is always 1).
#[tokio::test]
async fn a_stateless_hook_reuses_its_instance_and_another_gets_a_fresh_one() {
    let counter = |stateless: bool| {
        let mut g = Guest::new(&format!(
            r#"{{"events": ["PreToolUse"], "stateless": {stateless}}}"#
        ));
        let (digit, _) = g.string("{\"n\": 0}");
        // The answer's digit (offset 6 of the string) is the guest's count of calls.
        g.handle(&format!(
            "(i32.store8 (i32.add {digit} (i32.const 6))
               (i32.add (i32.load8_u (i32.add {digit} (i32.const 6))) (i32.const 1)))
             (call $ok {digit} (i32.const 8))"
        ))
        .build()
    };
    let count = |answer: WasmAnswer| match answer {
        WasmAnswer::Json(map) => map["n"].as_u64().unwrap(),
        other => panic!("{other:?}"),
    };
    let reused = WasmHook::builder()
        .bytes("counter", counter(true))
        .build()
        .unwrap();
    for n in 1..=3 {
        assert_eq!(count(reused.call("{}").await.unwrap()), n);
    }
    assert_eq!(reused.instances(), 1, "one idle instance kept");
    let fresh = WasmHook::builder()
        .bytes("counter", counter(false))
        .build()
        .unwrap();
    for _ in 1..=3 {
        assert_eq!(count(fresh.call("{}").await.unwrap()), 1);
    }
    assert_eq!(fresh.instances(), 0, "nothing kept");
    // The builder overrides the description.
    let forced = WasmHook::builder()
        .bytes("counter", counter(true))
        .stateless(false)
        .build()
        .unwrap();
    assert_eq!(count(forced.call("{}").await.unwrap()), 1);
    assert_eq!(count(forced.call("{}").await.unwrap()), 1);
}

#[test]
fn the_description_is_the_components() {
    let hook = WasmHook::builder()
        .bytes("guard", guests::rm_rf_guard())
        .build()
        .unwrap();
    assert_eq!(hook.description()["events"], json!(["PreToolUse"]));
    assert_eq!(hook.description()["matcher"], Value::from("bash"));
    assert_eq!(hook.name(), "guard");
}

/// A `wasm` handler takes the `if` rule of its settings entry as any handler does: a call the
/// rule does not match never reaches the guest.
#[tokio::test]
async fn an_if_rule_keeps_calls_away_from_a_wasm_handler() {
    let s = Scripts::new();
    let mut g = Guest::new(r#"{"events": ["PreToolUse"]}"#);
    let (reason, len) = g.string("no removals");
    std::fs::write(
        s.path("deny.wasm"),
        g.handle(&format!("(call $err {reason} {len})")).build(),
    )
    .unwrap();
    let hooks = s.hooks(json!({
        "PreToolUse": [{ "matcher": "bash", "hooks": [
            { "type": "wasm", "path": "deny.wasm", "if": "Bash(rm *)" }
        ] }],
    }));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "ls"}))
        .tool_call("bash", json!({"command": "rm notes.txt"}))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run(AgentRequest::new("go")).await.unwrap();
    let texts = crate::support::command::tool_texts(&resp);
    assert_eq!(texts[0], "ran: ls");
    assert!(texts[1].contains("no removals"), "{texts:?}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// A hook's compiled code lands in the cache directory the engine uses
/// ([`tower_agent::wasm::cache_dir`]), keyed by the component: a component never built before
/// adds a file there.
#[test]
fn a_new_component_is_compiled_into_the_cache() {
    let before = cached_files();
    let unique = format!(
        r#"{{"events": ["PreToolUse"], "unique": "{:?}"}}"#,
        std::time::SystemTime::now()
    );
    WasmHook::builder()
        .bytes("unique", guests::answering(&unique, ""))
        .build()
        .unwrap();
    let Some(dir) = tower_agent::wasm::cache_dir() else {
        panic!("the tests run with a cache directory (TOWER_AGENT_WASM_CACHE is not empty)");
    };
    // Wasmtime writes the cache file as the compile ends, from a thread of its own.
    let what = format!("a new file under {}", dir.display());
    crate::support::eventually_blocking(&what, || (cached_files() > before).then_some(()));
}

fn cached_files() -> usize {
    fn count(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| {
                        let path = e.path();
                        if path.is_dir() { count(&path) } else { 1 }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    tower_agent::wasm::cache_dir().map_or(0, |d| count(&d))
}

/// A plugin's `hooks/hooks.json` may name a `wasm` handler by `${CLAUDE_PLUGIN_ROOT}`; the
/// component loads from the plugin's folder, wherever the project is.
#[tokio::test]
async fn a_plugin_names_its_wasm_hook_by_its_root() {
    let s = Scripts::new();
    let plugin = s.path("plugins/guard");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(plugin.join("hooks")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        json!({"name": "guard", "version": "1.0.0"}).to_string(),
    )
    .unwrap();
    std::fs::write(plugin.join("guard.wasm"), guests::rm_rf_guard()).unwrap();
    std::fs::write(
        plugin.join("hooks/hooks.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [
            {"type": "wasm", "path": "${CLAUDE_PLUGIN_ROOT}/guard.wasm"}
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let project = s.path("elsewhere");
    std::fs::create_dir(&project).unwrap();
    let hooks = CommandHooks::builder()
        .plugin_dir(&plugin)
        .plugin_data_dir(s.path("data"))
        .project_dir(&project)
        .without_transcripts()
        .build()
        .unwrap();
    guard_runs(hooks).await;
}

/// A trust pin covers a `wasm` handler: its component's SHA-256 (`WasmHook::sha256`), from the
/// builder's `trust` or the handler's `sha256`. The right hash runs the guard; another one
/// skips it, with a warning, as for a changed script.
#[tokio::test]
async fn a_trust_pin_covers_the_component() {
    let s = Scripts::new();
    std::fs::write(s.path("guard.wasm"), guests::rm_rf_guard()).unwrap();
    let right = WasmHook::load(s.path("guard.wasm")).unwrap().sha256();
    assert_eq!(right.len(), 64);
    let wrong = "0".repeat(64);
    let hooks = |pin: &str, in_settings: bool| {
        let mut handler = json!({ "type": "wasm", "path": "guard.wasm" });
        if in_settings {
            handler["sha256"] = json!(pin);
        }
        let mut builder = CommandHooks::builder()
            .settings_json(
                json!({ "hooks": { "PreToolUse": [{ "matcher": "bash", "hooks": [handler] }] } }),
                "settings.json",
            )
            .project_dir(s.dir.path())
            .without_transcripts();
        if !in_settings {
            builder = builder.trust("guard.wasm", pin);
        }
        builder.build().unwrap()
    };
    for in_settings in [false, true] {
        guard_runs(hooks(&right, in_settings)).await;
        let untrusted = hooks(&wrong, in_settings);
        let model = ScriptedModel::new()
            .tool_call("bash", json!({"command": "rm -rf /tmp/x"}))
            .text("done");
        let (hooks, warned) = crate::support::command::warnings(untrusted.into_hooks());
        let (builder, seen) = agent(&model, hooks);
        let resp = builder.build().run(AgentRequest::new("go")).await.unwrap();
        assert_eq!(
            tool_text(&resp),
            "ran: rm -rf /tmp/x",
            "the untrusted guard is skipped"
        );
        assert_eq!(seen.lock().unwrap().len(), 1);
        let warned = warned.lock().unwrap();
        assert!(
            warned.iter().any(|w| w.contains("is not the one trusted")),
            "{warned:?}"
        );
    }
}
