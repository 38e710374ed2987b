//! PreModelSwitch and PostModelSwitch: a model call that names another model than the
//! thread's previous call.
//!
//! Source: issue 27 ("The reference of October–November 2026"), which names what Claude Code
//! 2.1.251+ gives these events: PreModelSwitch blocks, confirms or annotates a switch, and a
//! PreModelSwitch timeout blocks; both events' handlers default to a 30 s timeout;
//! PostModelSwitch's plain stdout is context. The reference page of that version was not
//! reachable from here (the public mirror stops at 2.1.240), so the input's field names
//! (`previous_model`, `model`) and the matcher (on the new model's name) are this crate's;
//! everything else a handler reads and answers is the common protocol (§ "Hook input", § "Exit
//! code 2", § "JSON output": `decision`, `continue`, `permissionDecision`, `additionalContext`).
//! In a library a thread's model changes between calls: another agent (or settings, or a
//! BeforeModel hook) runs the same thread with another model.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::Outcome,
    layers::hooks::{HookSet, Hooks, ModelSwitchInput, PostModelSwitch, PreModelSwitch},
    model::{ModelSettings, ScriptedModel},
    store::MemoryStore,
    tool::tool_fn,
};

use crate::support::command::Scripts;

/// Two agents on one store, `a` and `b`, whose calls name models `model-a` and `model-b`; each
/// model answers a tool call (echo), then a text.
struct Pair {
    store: MemoryStore,
    models: [ScriptedModel; 2],
    hooks: HookSet,
    names: [&'static str; 2],
}

impl Pair {
    fn new(hooks: HookSet) -> Self {
        Pair::with_models(hooks, ["model-a", "model-b"])
    }

    /// A pair whose calls name `names`.
    fn with_models(hooks: HookSet, names: [&'static str; 2]) -> Self {
        let model = || {
            ScriptedModel::new()
                .tool_call("echo", json!({}))
                .text("ok")
                .per_run()
                .recording()
        };
        Pair {
            store: MemoryStore::new(),
            models: [model(), model()],
            hooks,
            names,
        }
    }

    fn agent(&self, i: usize) -> Agent {
        let name = self.names[i];
        Agent::builder()
            .model(self.models[i].clone())
            .tool(tool_fn(
                "echo",
                "Echoes",
                json!({"type": "object"}),
                |args, _| async move { Ok::<_, BoxError>(args) },
            ))
            .settings(ModelSettings::default().model(name))
            .store(self.store.clone())
            .hooks(self.hooks.clone())
            .build()
    }

    async fn run(&self, i: usize) -> tower_agent::AgentResponse {
        self.agent(i)
            .run(AgentRequest::new("go").thread("t"))
            .await
            .unwrap()
    }

    /// The models the requests of model service `i` named.
    fn named(&self, i: usize) -> Vec<Option<String>> {
        self.models[i]
            .requests()
            .iter()
            .map(|r| r.settings.model.as_deref().map(str::to_owned))
            .collect()
    }
}

fn warnings_into(
    hooks: Hooks<tower_agent::layers::hooks::state::Added>,
    log: &Arc<Mutex<Vec<String>>>,
) -> HookSet {
    let log = Arc::clone(log);
    hooks
        .on_notification(move |message, _ctx| log.lock().unwrap().push(message.to_owned()))
        .compile()
        .unwrap()
}

/// A Rust hook sees each switch once: not on a thread's first call, not while the model stays;
/// PostModelSwitch follows the switched call, and the thread keeps the new model (key
/// `tower_agent.model`).
#[tokio::test]
async fn rust_hooks_see_each_switch_once_and_the_thread_keeps_its_model() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (pre, post) = (Arc::clone(&seen), Arc::clone(&seen));
    let hooks = Hooks::new()
        .on_pre_model_switch("*", move |s: ModelSwitchInput, _ctx| {
            pre.lock()
                .unwrap()
                .push(format!("pre {} -> {}", s.from_model, s.to_model));
            PreModelSwitch::Allow
        })
        .on_post_model_switch("*", move |s: ModelSwitchInput, _ctx| {
            post.lock()
                .unwrap()
                .push(format!("post {} -> {}", s.from_model, s.to_model));
            PostModelSwitch::Continue
        })
        .compile()
        .unwrap();
    let pair = Pair::new(hooks);
    pair.run(0).await;
    pair.run(0).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    pair.run(1).await;
    assert_eq!(
        *seen.lock().unwrap(),
        ["pre model-a -> model-b", "post model-a -> model-b"],
        "once, on the switched run's first call (its second call stays on model-b)"
    );
    let thread = pair.store.get("t").unwrap();
    assert_eq!(
        thread.data.value("tower_agent.model").map(|m| &m["model"]),
        Some(&json!("model-b"))
    );
    pair.run(0).await;
    assert_eq!(seen.lock().unwrap().len(), 4, "and back");
    assert_eq!(
        pair.named(1),
        [Some("model-b".into()), Some("model-b".into())]
    );
}

/// A block keeps the previous model for the call (the request goes out naming it), the run
/// goes on, the reason is a warning, and the thread keeps its model: the next call is a switch
/// again. No PostModelSwitch fires.
/// `prompt_cache_warm` says whether the thread's last answer (key
/// `tower_agent.last_response`) is younger than the cache's 5 minutes — the answer, not the
/// model's first call: a thread that stayed on its model for long is warm if it answered
/// just now. Times are stored in the past, not waited for.
#[tokio::test]
async fn the_cache_is_warm_after_a_recent_answer_whenever_the_model_came() {
    use tower_agent::store::ThreadStore;
    let warm: Arc<Mutex<Vec<bool>>> = Arc::default();
    let log = Arc::clone(&warm);
    let hooks = Hooks::new()
        .on_pre_model_switch("*", move |s: ModelSwitchInput, _ctx| {
            log.lock().unwrap().push(s.prompt_cache_warm);
            PreModelSwitch::Allow
        })
        .compile()
        .unwrap();
    let pair = Pair::new(hooks);
    let ten_minutes_ago = {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        u64::try_from(now.unwrap().as_millis()).unwrap() - 10 * 60 * 1000
    };
    let back_date = |key: &str, at_ms_of: fn(&Value, u64) -> Value| {
        let mut thread = pair.store.get("t").unwrap();
        let old = thread.data.value(key).cloned().unwrap();
        thread.data.set_value(key, at_ms_of(&old, ten_minutes_ago));
        let store = pair.store.clone();
        async move { store.save(&thread).await.unwrap() }
    };
    pair.run(0).await;
    // The model came ten minutes ago; the thread answered just now.
    back_date(
        "tower_agent.model",
        |old, at_ms| json!({ "model": old["model"], "at_ms": at_ms }),
    )
    .await;
    pair.run(1).await;
    // The thread's last answer ten minutes ago.
    back_date(
        "tower_agent.last_response",
        |_, at_ms| json!({ "at_ms": at_ms }),
    )
    .await;
    pair.run(0).await;
    assert_eq!(*warm.lock().unwrap(), [true, false]);
}

#[tokio::test]
async fn a_rust_block_keeps_the_previous_model() {
    let posts = Arc::new(Mutex::new(0));
    let count = Arc::clone(&posts);
    let warnings: Arc<Mutex<Vec<String>>> = Arc::default();
    let hooks = Hooks::new()
        .on_pre_model_switch("model-b", |_, _| {
            PreModelSwitch::Block("cache is warm".into())
        })
        .on_post_model_switch("*", move |_, _| {
            *count.lock().unwrap() += 1;
            PostModelSwitch::Continue
        });
    let pair = Pair::new(warnings_into(hooks, &warnings));
    pair.run(0).await;
    let run = pair.run(1).await;
    assert_eq!(run.outcome, Outcome::Finished);
    assert_eq!(
        pair.named(1),
        [Some("model-a".into()), Some("model-a".into())],
        "both calls of the blocked run keep model-a"
    );
    assert_eq!(*posts.lock().unwrap(), 0);
    let warnings = warnings.lock().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("cache is warm") && w.contains("`model-a` to `model-b`")),
        "{warnings:?}"
    );
    let thread = pair.store.get("t").unwrap();
    assert_eq!(
        thread.data.value("tower_agent.model").map(|m| &m["model"]),
        Some(&json!("model-a"))
    );
}

/// A Rust PreModelSwitch hook that panics lets the switch through, unless it is marked
/// fail-closed: then the panic blocks it.
#[tokio::test]
async fn a_panicking_rust_hook_blocks_only_when_fail_closed() {
    for fail_closed in [false, true] {
        let mut hooks = Hooks::new().on_pre_model_switch("*", |_, _| -> PreModelSwitch {
            panic!("policy store down")
        });
        if fail_closed {
            hooks = hooks.fail_closed();
        }
        let pair = Pair::new(hooks.compile().unwrap());
        pair.run(0).await;
        pair.run(1).await;
        let want = if fail_closed { "model-a" } else { "model-b" };
        assert_eq!(
            pair.named(1)[0].as_deref(),
            Some(want),
            "fail_closed {fail_closed}"
        );
    }
}

/// A PostModelSwitch context reaches the model: queued as a reminder, it joins the history
/// after the switched step's tool results, so the run's next call sees it.
#[tokio::test]
async fn a_post_switch_context_reaches_the_next_call() {
    let hooks = Hooks::new()
        .on_post_model_switch("*", |s: ModelSwitchInput, _| {
            PostModelSwitch::AddContext(format!("now on {}", s.to_model))
        })
        .compile()
        .unwrap();
    let pair = Pair::new(hooks);
    pair.run(0).await;
    pair.run(1).await;
    let second = &pair.models[1].requests()[1];
    let text = format!("{:?}", second.messages);
    assert!(text.contains("now on model-b"), "{text}");
}

/// A command hook gets the common input (`hook_event_name`, `session_id`, `cwd`, `prompt_id`;
/// no `permission_mode`) and Claude Code's switch fields (`from_model`, `to_model`,
/// `requested_model`, `source`, `context_tokens`, `prompt_cache_warm`, `cache_ttl`,
/// `estimated_cache_write_usd`, `pricing` — measured on 2.1.328: `tests/reference`);
/// matchers match the new model's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_gets_the_switch_and_its_matcher_matches_the_new_model() {
    let s = Scripts::new();
    let input = s.path("input.json");
    let hook = s.bash("pre.sh", &format!("cat > {input:?}"));
    let other = s.bash(
        "other.sh",
        &format!("cat >/dev/null; touch {:?}", s.path("other")),
    );
    let hooks = s.hooks(json!({
        "PreModelSwitch": [
            { "matcher": "model-b", "hooks": [{ "type": "command", "command": hook }] },
            { "matcher": "opus", "hooks": [{ "type": "command", "command": other }] },
        ],
    }));
    let pair = Pair::new(hooks.into_hooks().compile().unwrap());
    pair.run(0).await;
    assert!(!input.exists(), "no switch on the thread's first call");
    pair.run(1).await;
    let got: Value = serde_json::from_str(&s.read("input.json")).unwrap();
    assert_eq!(got["hook_event_name"], "PreModelSwitch");
    assert_eq!(got["from_model"], "model-a");
    assert_eq!(got["to_model"], "model-b");
    assert_eq!(got["requested_model"], "model-b");
    assert_eq!(got["source"], "sdk");
    assert!(got["context_tokens"].is_u64(), "{got}");
    assert_eq!(
        got["prompt_cache_warm"], true,
        "the previous call was just now"
    );
    assert_eq!(got["cache_ttl"], "5m");
    assert_eq!(got["estimated_cache_write_usd"], 0.0);
    assert_eq!(got["pricing"], "default");
    assert!(got["prompt_id"].is_string(), "{got}");
    assert!(got.get("permission_mode").is_none(), "{got}");
    assert!(
        got.get("previous_model").is_none() && got.get("model").is_none(),
        "{got}"
    );
    assert!(
        got["session_id"].is_string() && got["cwd"].is_string(),
        "{got}"
    );
    assert!(!s.path("other").exists(), "a matcher of another model");
    assert_eq!(pair.named(1)[0].as_deref(), Some("model-b"));
}

/// Each way a command hook blocks a switch keeps the previous model: exit 2, `decision:
/// "block"`, `continue: false`, `permissionDecision: "deny"`, and `"ask"` (no one to ask at
/// a model call); `permissionDecision: "allow"` and a plain exit 0 let it through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_blocking_answer_keeps_the_previous_model() {
    let cases = [
        ("exit 2", "echo 'too costly' >&2; exit 2", true),
        (
            "decision block",
            r#"echo '{"decision":"block","reason":"no"}'"#,
            true,
        ),
        (
            "continue false",
            r#"echo '{"continue":false,"stopReason":"no"}'"#,
            true,
        ),
        (
            "deny",
            r#"echo '{"hookSpecificOutput":{"hookEventName":"PreModelSwitch","permissionDecision":"deny","permissionDecisionReason":"no"}}'"#,
            true,
        ),
        (
            "ask",
            r#"echo '{"hookSpecificOutput":{"hookEventName":"PreModelSwitch","permissionDecision":"ask"}}'"#,
            true,
        ),
        (
            "allow",
            r#"echo '{"hookSpecificOutput":{"hookEventName":"PreModelSwitch","permissionDecision":"allow"}}'"#,
            false,
        ),
        ("exit 0", "exit 0", false),
        (
            "exit 1 (a non-blocking error)",
            "echo broken >&2; exit 1",
            false,
        ),
    ];
    for (name, body, blocks) in cases {
        let s = Scripts::new();
        let hook = s.bash("pre.sh", &format!("cat >/dev/null\n{body}"));
        let hooks = s.hooks(json!({
            "PreModelSwitch": [{ "hooks": [{ "type": "command", "command": hook }] }],
        }));
        let pair = Pair::new(hooks.into_hooks().compile().unwrap());
        pair.run(0).await;
        let run = pair.run(1).await;
        assert_eq!(run.outcome, Outcome::Finished, "{name}");
        let want = if blocks { "model-a" } else { "model-b" };
        assert_eq!(pair.named(1)[0].as_deref(), Some(want), "{name}");
    }
}

/// A PreModelSwitch handler that times out blocks the switch, fail-closed or not (a command
/// handler that sets no timeout gets 30 s: see `event_table.rs`). Its process is killed at
/// its timeout, so the run does not wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_handler_blocks_the_switch() {
    let s = Scripts::new();
    let hook = s.bash("slow.sh", "cat >/dev/null; sleep 600");
    let hooks = s.hooks(json!({
        "PreModelSwitch": [{ "hooks": [{ "type": "command", "command": hook, "timeout": 1 }] }],
    }));
    let pair = Pair::new(hooks.into_hooks().compile().unwrap());
    pair.run(0).await;
    // Killed at its 1 s timeout, not waited for (ten minutes).
    crate::support::within("the run with the switch", pair.run(1)).await;
    assert_eq!(pair.named(1)[0].as_deref(), Some("model-a"));
}

/// PostModelSwitch's plain stdout is context (as the issue names it), and `additionalContext`
/// too: both reach the switched run's next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_switch_stdout_and_additional_context_reach_the_model() {
    let s = Scripts::new();
    let plain = s.bash(
        "plain.sh",
        "cat >/dev/null; echo 'switched: mind the cache'",
    );
    let json_hook = s.bash(
        "json.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PostModelSwitch","additionalContext":"json context"}}'"#,
    );
    let hooks = s.hooks(json!({
        "PostModelSwitch": [{ "hooks": [
            { "type": "command", "command": plain },
            { "type": "command", "command": json_hook },
        ] }],
    }));
    let pair = Pair::new(hooks.into_hooks().compile().unwrap());
    pair.run(0).await;
    pair.run(1).await;
    let text = format!("{:?}", pair.models[1].requests()[1].messages);
    assert!(text.contains("switched: mind the cache"), "{text}");
    assert!(text.contains("json context"), "{text}");
}

/// The matcher compares the canonical name of the model switched to: a `[1m]` suffix (the
/// long-context variant) is ignored; the input's `to_model` keeps it (reference:
/// `hook-events-late-2026.md` § PreModelSwitch, "matcher").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_matcher_ignores_a_1m_suffix() {
    let s = Scripts::new();
    let input = s.path("input.json");
    let hook = s.bash("pre.sh", &format!("cat > {input:?}"));
    let hooks = s.hooks(json!({
        "PreModelSwitch": [{ "matcher": "^model-b$", "hooks": [{ "type": "command", "command": hook }] }],
    }));
    let pair = Pair::with_models(
        hooks.into_hooks().compile().unwrap(),
        ["model-a", "model-b[1m]"],
    );
    pair.run(0).await;
    pair.run(1).await;
    let got: Value = serde_json::from_str(&s.read("input.json")).unwrap();
    assert_eq!(got["to_model"], "model-b[1m]");
    assert_eq!(got["from_model"], "model-a");
}
