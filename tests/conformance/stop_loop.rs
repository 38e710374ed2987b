//! hooks.md § "Stop input" and § "Stop decision control": "keep going until done" loops.
//!
//! - A promise loop: the Stop hook (python3) reads `transcript_path` with `json.loads` per
//!   line, takes the text blocks of the LAST assistant line, and blocks — sending the agent
//!   back to work — until they contain the promise `<promise>DONE</promise>`. The loop must
//!   end exactly when the model first writes the promise.
//! - A ralph loop: the Stop hook (`ralph.py --max-iterations N STATE`) keeps an iteration
//!   counter in a file and blocks until it reached N; the model does one tool call per
//!   iteration, then answers.
//!
//! The reference documents no cap: `stop_hook_active` (true once a stop hook has kept the
//! turn going) is how a hook avoids looping forever. Claude Code's client ends a turn after 8
//! *consecutive* blocks, the count reset whenever the model made a tool call: a loop whose
//! model works each iteration runs to its end, one whose model makes no progress is cut.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, AgentResponse,
    agent::{AgentEvent, Outcome},
    command::CommandHooks,
    layers::hooks::Hooks,
    message::ToolCall,
    model::{ModelResponse, ScriptedModel},
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

// The same loop over 12 iterations: 11 blocks. With a tool call each iteration no two blocks
// are consecutive, so the default cap never applies. Without tool calls the 11 blocks are
// in a row: the loop runs to its end only with the cap raised to 11 (exactly enough).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twelve_iteration_promise_loop_runs_to_its_end() {
    ends_exactly_at(12, true, None).await;
    ends_exactly_at(12, false, Some(11)).await;
}

// Claude Code's client: "the turn now ends with a warning after 8 consecutive blocks". A
// model that only answers (no tool call) makes no progress: 8 blocks are honoured, the 9th is
// overridden, and a warning says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_cap_cuts_a_loop_that_makes_no_progress_at_eight() {
    let l = run_loop(12, false, None).await;
    assert_eq!(l.outcome, Outcome::Finished);
    assert_eq!(l.stops.len(), 9, "{:?}", l.stops);
    assert!(l.stops.iter().all(|s| s["done"] == false));
    assert!(!l.text.contains(PROMISE));
    assert!(l.text.starts_with("Iteration 9:"), "{}", l.text);
    assert_eq!(l.model_calls, 9);
    assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
    assert!(
        l.warnings[0].contains("9 times in a row with no tool call in between")
            && l.warnings[0].contains("stop cap (8)"),
        "{}",
        l.warnings[0]
    );
    // The same cap of 11 that lets 12 answers run (above) cuts 13 at the 12th block.
    let l = run_loop(13, false, Some(11)).await;
    assert_eq!(l.stops.len(), 12, "{:?}", l.stops);
    assert!(l.text.starts_with("Iteration 12:"), "{}", l.text);
    assert!(
        l.warnings[0].contains("12 times in a row"),
        "{:?}",
        l.warnings
    );
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
        let hooks = tower_agent::command::CommandHooks::builder()
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
    let hooks = tower_agent::command::CommandHooks::builder()
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

// ===== a ralph loop: an iteration counter in a file =====

/// `ralph.py --max-iterations N STATE`: counts its calls in `STATE/iteration`, records each
/// (`STATE/stops.jsonl`: the iteration, `stop_hook_active`, the last answer) and blocks until
/// the count reached N.
fn ralph_hook(s: &Scripts) -> String {
    s.python(
        "ralph.py",
        r#"import json, os, sys
args = sys.argv[1:]
max_iterations = int(args[args.index("--max-iterations") + 1])
state = args[-1]
data = json.load(sys.stdin)
counter = os.path.join(state, "iteration")
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
with open(counter, "w") as f:
    f.write(str(n))
with open(os.path.join(state, "stops.jsonl"), "a") as f:
    record = {"iteration": n, "active": data["stop_hook_active"], "last": data["last_assistant_message"]}
    f.write(json.dumps(record) + "\n")
if n < max_iterations:
    print(json.dumps({"decision": "block", "reason": f"Iteration {n} of {max_iterations} done: start the next one."}))"#,
    )
}

/// A model that works: after a prompt or a Stop hook's feedback it calls `bash` once, after
/// the tool's result it answers `Iteration K: …` (K: the tool results so far). One that does
/// not work only answers.
fn ralph_model(works: bool) -> ScriptedModel {
    ScriptedModel::from_fn(move |req| {
        let done = req
            .messages
            .iter()
            .filter(|m| m.tool_call_id.is_some())
            .count();
        let after_tool = req
            .messages
            .iter()
            .last()
            .is_some_and(|m| m.tool_call_id.is_some());
        Ok(if works && !after_tool {
            let command = format!("make step-{}", done + 1);
            let call = ToolCall::new("", "bash", json!({ "command": command }));
            ModelResponse::tool_calls([call])
        } else {
            ModelResponse::text(format!("Iteration {done}: answered."))
        })
    })
    .recording()
}

struct Ralph {
    resp: AgentResponse,
    /// One record per Stop-hook call.
    stops: Vec<Value>,
    /// The hook's counter file.
    iteration: String,
    model_calls: usize,
    tool_calls: usize,
    warnings: Vec<String>,
}

/// A whole run: the ralph hook from a settings file (`--max-iterations max`), the model
/// working or not, the builder's stop cap if any.
async fn ralph(max: u32, works: bool, cap: Option<u32>) -> Ralph {
    let s = Scripts::new();
    let hook = ralph_hook(&s);
    let state = s.path("state");
    std::fs::create_dir(&state).unwrap();
    let command = format!("'{hook}' --max-iterations {max} '{}'", state.display());
    let settings = s.path("settings.json");
    std::fs::write(
        &settings,
        json!({ "hooks": on("Stop", "", &command, json!({ "timeout": 30 })) }).to_string(),
    )
    .unwrap();
    let mut builder = CommandHooks::builder()
        .settings_file(&settings)
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"));
    if let Some(cap) = cap {
        builder = builder.stop_cap(cap);
    }
    let model = ralph_model(works);
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(bash_tool(&seen))
        .hooks(builder.build().unwrap().into_hooks().compile().unwrap())
        .max_steps(100)
        .build();
    let mut stream = agent.stream("Make the tests pass, one step at a time.");
    let events: Vec<AgentEvent> = futures_util::StreamExt::collect(&mut stream).await;
    let resp = stream.take_response().unwrap().unwrap();
    let stops = std::fs::read_to_string(state.join("stops.jsonl"))
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
    let tool_calls = seen.lock().unwrap().len();
    Ralph {
        resp,
        stops,
        iteration: std::fs::read_to_string(state.join("iteration")).unwrap_or_default(),
        model_calls: model.requests().len(),
        tool_calls,
        warnings,
    }
}

/// The loop ran all `max` iterations, each a tool call then an answer, and the hook let the
/// agent stop at the last; `stop_hook_active` is false on the first Stop call only.
fn assert_ran_to_the_end(r: &Ralph, max: usize, what: &str) {
    assert_eq!(r.resp.outcome, Outcome::Finished, "{what}");
    assert_eq!(r.iteration, max.to_string(), "{what}");
    assert_eq!(r.stops.len(), max, "{what}: {:?}", r.stops);
    for (i, stop) in r.stops.iter().enumerate() {
        let n = i + 1;
        assert_eq!(stop["iteration"], n, "{what}: {stop}");
        assert_eq!(stop["active"], n > 1, "{what}: {stop}");
        assert_eq!(stop["last"], format!("Iteration {n}: answered."), "{what}");
    }
    assert_eq!(r.tool_calls, max, "{what}");
    assert_eq!(r.model_calls, 2 * max, "{what}");
    assert_eq!(r.resp.text, format!("Iteration {max}: answered."), "{what}");
    assert!(r.warnings.is_empty(), "{what}: {:?}", r.warnings);
}

// A ralph loop of 12 iterations (`--max-iterations 12`), its model doing one tool call per
// iteration: 11 blocks, none consecutive, so the default cap does not cut it; the run reaches
// the 12th iteration and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twelve_iteration_ralph_loop_reaches_its_twelfth_iteration() {
    let r = ralph(12, true, None).await;
    assert_ran_to_the_end(&r, 12, "default cap");
}

// The same hook with no progress: the model never calls a tool. Every block is consecutive:
// 8 are honoured, the 9th is overridden with a warning, and the run finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_blocking_an_agent_that_makes_no_progress_is_cut_at_the_cap() {
    let r = ralph(12, false, None).await;
    assert_eq!(r.resp.outcome, Outcome::Finished);
    assert_eq!(r.iteration, "9");
    assert_eq!(r.stops.len(), 9, "{:?}", r.stops);
    assert_eq!(r.model_calls, 9);
    assert_eq!(r.tool_calls, 0);
    let feedback = r
        .resp
        .messages
        .iter()
        .filter(|m| m.role == tower_agent::message::Role::User)
        .filter(|m| m.text().contains("start the next one"))
        .count();
    // Each block's reason as user text (and, as Claude Code adds it, a system message naming
    // the command: not counted).
    assert_eq!(feedback, 8, "8 blocks honoured");
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("9 times in a row with no tool call in between")
            && r.warnings[0].contains("stop cap (8)"),
        "{}",
        r.warnings[0]
    );
}

// The cap is configurable (`CommandHooksBuilder::stop_cap`): with 3, an agent making no
// progress is cut at the 4th block; a working one still runs all 12 iterations, since its
// blocks are never consecutive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_of_three_cuts_no_progress_at_the_fourth_block_but_not_a_working_loop() {
    let r = ralph(12, false, Some(3)).await;
    assert_eq!(r.resp.outcome, Outcome::Finished);
    assert_eq!(r.stops.len(), 4, "{:?}", r.stops);
    assert_eq!(r.model_calls, 4);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("4 times in a row") && r.warnings[0].contains("stop cap (3)"),
        "{}",
        r.warnings[0]
    );

    let r = ralph(12, true, Some(3)).await;
    assert_ran_to_the_end(&r, 12, "cap 3");
}

// The count is of blocks with no tool call in between, exactly: with a cap of 2, two blocks
// (answers 1, 2), a tool call, two blocks again (answers 3, 4): all honoured; the third in a
// row (answer 5) is overridden. Without the reset the run would end at answer 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_resets_the_count_of_blocks_in_a_row() {
    let s = Scripts::new();
    let hook = s.bash(
        "block.sh",
        &format!(
            "cat >> '{}'; echo >> '{}'; echo 'not yet' >&2; exit 2",
            s.path("inputs").display(),
            s.path("inputs").display()
        ),
    );
    let hooks = s
        .hooks(on("Stop", "", &hook, json!({})))
        .into_hooks()
        .stop_cap(2);
    let model = ScriptedModel::new()
        .text("answer 1")
        .text("answer 2")
        .tool_call("bash", json!({ "command": "work" }))
        .text("answer 3")
        .text("answer 4")
        .text("answer 5")
        .text("answer 6")
        .recording();
    let seen = Arc::default();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(bash_tool(&seen))
        .hooks(hooks.compile().unwrap())
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "answer 5");
    assert_eq!(model.requests().len(), 6);
    let inputs: Vec<Value> = s
        .read("inputs")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen_by_hook: Vec<(&str, bool)> = inputs
        .iter()
        .map(|i| {
            (
                i["last_assistant_message"].as_str().unwrap(),
                i["stop_hook_active"].as_bool().unwrap(),
            )
        })
        .collect();
    // `stop_hook_active` stays true after the tool step: the run is still going on because
    // of a stop hook.
    assert_eq!(
        seen_by_hook,
        [
            ("answer 1", false),
            ("answer 2", true),
            ("answer 3", true),
            ("answer 4", true),
            ("answer 5", true),
        ]
    );
}
