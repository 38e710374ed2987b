//! hooks.md § "Stop input" and § "Stop decision control": a "keep going until done" loop. The
//! Stop hook (python3) reads `transcript_path` with `json.loads` per line, takes the text
//! blocks of the LAST assistant line, and blocks — sending the agent back to work — until
//! they contain the promise `<promise>DONE</promise>`. The loop must end exactly when the
//! model first writes the promise; and Claude Code's cap (8 blocks in a row, then the hook is
//! overridden) applies unless raised.

use std::path::Path;

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest,
    agent::{AgentEvent, Outcome},
    layers::hooks::Hooks,
    model::ScriptedModel,
};

use crate::support::command::{Scripts, bash_tool, on};

const PROMISE: &str = "<promise>DONE</promise>";

/// The Stop hook: one line per call in `calls` (what it saw), then block unless the last
/// assistant message of the transcript holds the promise.
fn promise_hook(s: &Scripts, calls: &Path) -> String {
    s.python(
        "ralph.py",
        &format!(
            r#"import json, sys
data = json.load(sys.stdin)
last = None
with open(data["transcript_path"]) as f:
    for line in f:
        entry = json.loads(line)
        if entry.get("type") == "assistant":
            last = entry
text = "".join(
    block.get("text", "")
    for block in (last or {{}}).get("message", {{}}).get("content", [])
    if block.get("type") == "text"
)
done = {promise:?} in text
with open({calls:?}, "a") as f:
    f.write(json.dumps({{"active": data["stop_hook_active"], "done": done, "text": text}}) + "\n")
if not done:
    print(json.dumps({{"decision": "block", "reason": "Not done yet: keep working, then say the promise."}}))
"#,
            promise = PROMISE,
            calls = calls.to_string_lossy()
        ),
    )
}

/// A model that works for `iterations` answers and writes the promise in answer `promise_at`
/// (1-based); with `tools`, each answer is preceded by a `bash` call. Answers after the
/// promise are scripted too, so a loop that overruns shows.
fn worker(iterations: usize, promise_at: usize, tools: bool) -> ScriptedModel {
    let mut model = ScriptedModel::new();
    for i in 1..=iterations {
        if tools {
            model = model.tool_call("bash", json!({ "command": format!("step {i}") }));
        }
        let text = if i == promise_at {
            format!("Iteration {i}: all tests pass. {PROMISE}")
        } else {
            format!("Iteration {i}: still working.")
        };
        model = model.text(text);
    }
    model.recording()
}

struct Looped {
    outcome: Outcome,
    text: String,
    /// One record per Stop-hook call.
    stops: Vec<Value>,
    model_calls: usize,
    warnings: Vec<String>,
}

async fn run_loop(promise_at: usize, tools: bool, cap: Option<u32>) -> Looped {
    let s = Scripts::new();
    let calls = s.path("calls");
    let hook = promise_hook(&s, &calls);
    let mut hooks = s.hooks(on("Stop", "", &hook, json!({}))).into_hooks();
    if let Some(cap) = cap {
        hooks = hooks.stop_cap(cap);
    }
    // 15 iterations scripted: more than any case needs.
    let model = worker(15, promise_at, tools);
    let seen = Default::default();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(bash_tool(&seen))
        .hooks(hooks.compile().unwrap())
        .max_steps(100)
        .transcripts(s.path("transcripts"))
        .build();
    let mut stream = agent.stream(AgentRequest::new("Fix the tests.").thread("ralph"));
    let events: Vec<AgentEvent> = futures_util::StreamExt::collect(&mut stream).await;
    let resp = stream.take_response().unwrap().unwrap();
    let stops = std::fs::read_to_string(&calls)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let warnings = events
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::Warning { message } => Some(message),
            _ => None,
        })
        .collect();
    Looped {
        outcome: resp.outcome,
        text: resp.text,
        stops,
        model_calls: model.requests().len(),
        warnings,
    }
}

/// The loop ends exactly at the answer that holds the promise.
async fn ends_exactly_at(promise_at: usize, tools: bool, cap: Option<u32>) {
    let what = format!("promise at {promise_at}, tools: {tools}");
    let l = run_loop(promise_at, tools, cap).await;
    assert_eq!(l.outcome, Outcome::Finished, "{what}");
    assert!(l.text.contains(PROMISE), "{what}: {}", l.text);
    // One Stop call per answer; each saw the answer being stopped on.
    assert_eq!(l.stops.len(), promise_at, "{what}: {:?}", l.stops);
    for (i, stop) in l.stops.iter().enumerate() {
        let n = i + 1;
        assert!(
            stop["text"]
                .as_str()
                .unwrap()
                .starts_with(&format!("Iteration {n}:")),
            "{what}: stop {n} saw {stop}"
        );
        assert_eq!(stop["done"], n == promise_at, "{what}: {stop}");
        assert_eq!(stop["active"], n > 1, "{what}: {stop}");
    }
    let per_iteration = if tools { 2 } else { 1 };
    assert_eq!(l.model_calls, promise_at * per_iteration, "{what}");
    assert!(l.warnings.is_empty(), "{what}: {:?}", l.warnings);
}

// hooks.md § "Stop decision control": `decision: "block"` keeps the agent going; the hook
// lets it stop once the transcript's last assistant message has the promise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_loop_ends_when_the_promise_appears() {
    for tools in [false, true] {
        ends_exactly_at(1, tools, None).await;
        ends_exactly_at(5, tools, None).await;
    }
}

// The same loop over 12 iterations (11 blocks in a row). Claude Code ends a turn after 8
// consecutive blocks (hooks.md § "Stop input"), so this loop needs the cap raised: it is set
// explicitly to 12 here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twelve_iteration_promise_loop_with_a_raised_cap() {
    for tools in [false, true] {
        ends_exactly_at(12, tools, Some(12)).await;
    }
}

// hooks.md § "Stop input": "Claude Code overrides the hook and ends the turn after 8
// consecutive blocks". With the default cap the 12-iteration loop is cut: 8 blocks are
// honoured, the 9th is overridden, and a warning says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_cap_cuts_the_twelve_iteration_loop_at_eight() {
    for tools in [false, true] {
        let l = run_loop(12, tools, None).await;
        assert_eq!(l.outcome, Outcome::Finished);
        assert_eq!(l.stops.len(), 9, "{:?}", l.stops);
        assert!(l.stops.iter().all(|s| s["done"] == false));
        assert!(!l.text.contains(PROMISE));
        assert!(l.text.starts_with("Iteration 9:"), "{}", l.text);
        assert_eq!(l.model_calls, 9 * if tools { 2 } else { 1 });
        assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
        assert!(
            l.warnings[0].contains("9 times in a row") && l.warnings[0].contains("stop cap (8)"),
            "{}",
            l.warnings[0]
        );
    }
}

// hooks.md § "Stop decision control": exit 2 and `additionalContext` continuations count
// toward the same cap as `decision: "block"`; the cap is set on `CommandHooksBuilder` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_continuation_counts_toward_the_cap() {
    for (name, body) in [
        ("exit2.sh", "cat > /dev/null; echo 'keep going' >&2; exit 2"),
        (
            "context.sh",
            r#"cat > /dev/null; echo '{"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "keep going"}}'"#,
        ),
    ] {
        let s = Scripts::new();
        let script = s.bash(name, body);
        let hooks = tower_agent::layers::command::CommandHooks::builder()
            .settings_json(
                json!({ "hooks": on("Stop", "", &script, json!({})) }),
                "settings.json",
            )
            .project_dir(s.dir.path())
            .transcripts_dir(s.path("transcripts"))
            .stop_cap(3)
            .build()
            .unwrap();
        let model = worker(15, 15, false);
        let agent = Agent::builder()
            .model(model.clone())
            .hooks(hooks.into_hooks().compile().unwrap())
            .build();
        let resp = agent.run("go").await.unwrap();
        assert_eq!(resp.outcome, Outcome::Finished, "{name}");
        assert_eq!(
            model.requests().len(),
            4,
            "{name}: 3 blocks, the 4th overridden"
        );
    }
    // A cap on the registry itself wins over the builder's.
    let s = Scripts::new();
    let script = s.bash("exit2.sh", "cat > /dev/null; echo 'again' >&2; exit 2");
    let hooks = tower_agent::layers::command::CommandHooks::builder()
        .settings_json(
            json!({ "hooks": on("Stop", "", &script, json!({})) }),
            "settings.json",
        )
        .transcripts_dir(s.path("transcripts"))
        .stop_cap(3)
        .build()
        .unwrap();
    let model = worker(15, 15, false);
    let agent = Agent::builder()
        .model(model.clone())
        .hooks(hooks.register(Hooks::new().stop_cap(1)).compile().unwrap())
        .build();
    agent.run("go").await.unwrap();
    assert_eq!(model.requests().len(), 2);
}
