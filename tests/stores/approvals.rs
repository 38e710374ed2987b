//! Interrupts and durable approvals (`agent::interrupt`): with the deferring policy an `Ask`
//! (and a `defer`, for any number of calls) ends the run `Interrupted` after the step's other
//! calls ran; the pending calls are saved with the thread in every store; a later request
//! answers them (approve, deny with a reason, approve with edited arguments) exactly once, and
//! a stale or forged answer is refused. Tools append to counter files (real files), so "ran
//! once" and "never ran" are counted on disk. Then the HTTP route (`403`, `409`, `422`,
//! concurrent answers) and the acceptance test: two server processes on a real PostgreSQL, the
//! one that asked restarted, the answer given through the other.

use crate::support;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{ApprovalError, Approvals, Outcome, PendingCall},
    layers::{
        hooks::{Hooks, PostToolUse, PreToolUse, SessionStart},
        matcher::ToolMatcher,
    },
    message::{Role, ToolCall},
    model::{ModelResponse, ScriptedModel},
    store::{MemoryStore, Sqlite, ThreadStore},
    tool::tool_fn,
};

use support::{Log, any_object, assert_history_valid};

/// The tools of the batch: `free` needs no approval, `ask_a`/`ask_b`/`ask_c` are asked about,
/// `later` is deferred by its hook.
const TOOLS: [&str; 5] = ["free", "ask_a", "ask_b", "ask_c", "later"];

/// The model: a user prompt `go` gets the batch (ids fixed, so every process agrees); anything
/// else an answer naming the results it saw.
fn model() -> ScriptedModel {
    ScriptedModel::new().otherwise(|req| {
        let last = req.messages.iter().rev().find(|m| m.role != Role::System);
        if last.is_some_and(|m| m.role == Role::User && m.text() == "go") {
            let calls = TOOLS
                .iter()
                .map(|t| ToolCall::new(format!("id_{t}"), *t, json!({"n": 1})));
            return Ok(ModelResponse::tool_calls(calls));
        }
        Ok(ModelResponse::text("done"))
    })
}

/// Who is asking (what an authentication middleware puts in the request's extensions).
#[derive(Clone, Debug)]
struct User(String);

/// An agent whose tools append `{arguments} {user}` to `{dir}/{tool}` (the user of the run's
/// extensions), with the deferring policy; PostToolUse arguments go to `seen`.
fn agent(store: impl ThreadStore, dir: &Path, seen: &Log, nap: Duration) -> Agent {
    agent_gated(store, dir, seen, nap, None)
}

/// [`agent`], whose runs wait at `gate` (a SessionStart hook: after the thread is loaded,
/// before anything is saved), to line up concurrent runs.
fn agent_gated(
    store: impl ThreadStore,
    dir: &Path,
    seen: &Log,
    nap: Duration,
    gate: Option<Arc<tokio::sync::Barrier>>,
) -> Agent {
    let mut builder = Agent::builder().model(model()).store(store);
    for name in TOOLS {
        let file = dir.join(name);
        builder = builder.tool(tool_fn(name, "counts", any_object(), move |args, ctx| {
            let file = file.clone();
            async move {
                tokio::time::sleep(nap).await;
                let user = ctx.extensions().get::<User>().map(|u| u.0.clone());
                let line = format!("{args} {}\n", user.unwrap_or_default());
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)?
                    .write_all(line.as_bytes())?;
                Ok::<_, BoxError>(format!("{name} ran"))
            }
        }));
    }
    let seen = seen.clone();
    let hooks = Hooks::new()
        .before_tool_use(ToolMatcher::exact(["ask_a", "ask_b", "ask_c"]), |c, _| {
            PreToolUse::Ask(format!("{} needs a person", c.name))
        })
        .before_tool_use("later", |_, _| PreToolUse::Defer)
        .after_tool_use(ToolMatcher::all(), move |c, _, _| {
            seen.push(format!("{} {}", c.name, c.arguments));
            PostToolUse::Keep
        })
        .on_session_start(move |_| {
            let gate = gate.clone();
            async move {
                if let Some(gate) = gate {
                    gate.wait().await;
                }
                SessionStart::Continue
            }
        })
        .defer_approvals()
        .compile()
        .unwrap();
    builder.hooks(hooks).build()
}

/// The lines of the counter file of `tool` (none if it never ran).
fn runs(dir: &Path, tool: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(tool))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The decisions of the scenario: approve `ask_a`, deny `ask_b`, edit `ask_c`, approve `later`.
fn decisions() -> Approvals {
    Approvals::new()
        .approve("id_ask_a")
        .deny("id_ask_b", "not on a Friday")
        .edit("id_ask_c", json!({"n": 42}))
        .approve("id_later")
}

fn pending_ids(pending: &[PendingCall]) -> Vec<&str> {
    pending.iter().map(|p| p.id.as_str()).collect()
}

/// The approval error of a refused run.
fn refusal(result: Result<tower_agent::AgentResponse, tower_agent::Error>) -> ApprovalError {
    let err = result.expect_err("the approvals are refused");
    assert!(err.is_approvals(), "{err}");
    ApprovalError::find(&err).expect("an ApprovalError").clone()
}

/// The whole in-process scenario over `store` (`reopen` gives a fresh store on the same data:
/// a restarted process).
async fn scenario<S: ThreadStore + Clone>(store: S, reopen: impl Fn() -> S) {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let seen = Log::new();
    let first = agent(store.clone(), dir, &seen, Duration::ZERO);

    // 1. The ask and the defer wait; the free call of the same batch ran.
    let resp = first
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    let Outcome::Interrupted { pending } = &resp.outcome else {
        panic!("{:?}", resp.outcome);
    };
    assert_eq!(
        pending_ids(pending),
        ["id_ask_a", "id_ask_b", "id_ask_c", "id_later"]
    );
    assert_eq!(pending[0].reason, "ask_a needs a person");
    assert_eq!(pending[0].arguments, json!({"n": 1}));
    assert!(
        pending[3].reason.contains("deferred"),
        "{}",
        pending[3].reason
    );
    assert_eq!(runs(dir, "free").len(), 1);
    for t in ["ask_a", "ask_b", "ask_c", "later"] {
        assert!(runs(dir, t).is_empty(), "{t} ran before its approval");
    }

    // 2. The pending calls are in the store (another store on the same data sees them).
    let stored = reopen().load("t").await.unwrap().unwrap();
    assert_eq!(&stored.pending, pending);

    // 3. Forged, missing and duplicate decisions are refused and change nothing.
    let other = agent(reopen(), dir, &seen, Duration::ZERO);
    let forged = decisions().approve("id_free");
    assert_eq!(
        refusal(other.run(AgentRequest::approvals("t", forged)).await),
        ApprovalError::NotPending("id_free".into())
    );
    let missing = Approvals::new().approve("id_ask_a");
    assert!(matches!(
        refusal(other.run(AgentRequest::approvals("t", missing)).await),
        ApprovalError::Missing(ids) if ids == ["id_ask_b", "id_ask_c", "id_later"]
    ));
    let twice = decisions().approve("id_ask_a");
    assert_eq!(
        refusal(other.run(AgentRequest::approvals("t", twice)).await),
        ApprovalError::Duplicate("id_ask_a".into())
    );
    assert_eq!(
        refusal(
            other
                .run(AgentRequest::approvals("nope", decisions()))
                .await
        ),
        ApprovalError::NoThread
    );
    assert_eq!(reopen().load("t").await.unwrap().unwrap(), stored);

    // 4. The answer, through another store (a restarted process): approved runs once, denied
    // never (the model gets the reason), edited with the edited arguments; free not re-run.
    let answered = other
        .run(AgentRequest::approvals("t", decisions()).extension(User("ada".into())))
        .await
        .unwrap();
    assert_eq!(answered.outcome, Outcome::Finished);
    assert_eq!(runs(dir, "ask_a"), [r#"{"n":1} ada"#]);
    assert!(runs(dir, "ask_b").is_empty());
    assert_eq!(runs(dir, "ask_c"), [r#"{"n":42} ada"#]);
    assert_eq!(runs(dir, "later"), [r#"{"n":1} ada"#]);
    assert_eq!(runs(dir, "free").len(), 1);
    assert!(seen.entries().contains(&r#"ask_c {"n":42}"#.to_owned()));
    let thread = reopen().load("t").await.unwrap().unwrap();
    assert!(thread.pending.is_empty());
    assert_history_valid(&thread.messages);
    let output = |id: &str| {
        thread
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .unwrap()
            .text()
            .into_owned()
    };
    assert_eq!(output("id_ask_b"), "denied: not on a Friday");
    assert_eq!(output("id_ask_a"), "ask_a ran");
    assert_eq!(output("id_ask_c"), "ask_c ran");
    assert_eq!(thread.messages.last().unwrap().text(), "done");

    // 5. The same answer again is stale: refused, nothing runs again.
    assert_eq!(
        refusal(first.run(AgentRequest::approvals("t", decisions())).await),
        ApprovalError::NothingPending
    );
    assert_eq!(runs(dir, "ask_a").len(), 1);
    assert_eq!(runs(dir, "later").len(), 1);

    // 6. A new prompt on a thread with pending calls denies them; the thread stays valid.
    let resp = first
        .run(AgentRequest::new("go").thread("u"))
        .await
        .unwrap();
    assert!(matches!(resp.outcome, Outcome::Interrupted { .. }));
    let resp = other
        .run(AgentRequest::new("never mind").thread("u"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    let thread = reopen().load("u").await.unwrap().unwrap();
    assert!(thread.pending.is_empty());
    assert_history_valid(&thread.messages);
    assert_eq!(runs(dir, "ask_a").len(), 1, "a superseded call never runs");
    assert_eq!(runs(dir, "free").len(), 2);
}

#[tokio::test]
async fn memory_store_keeps_and_answers_pending_calls() {
    let store = MemoryStore::new();
    let reopen = store.clone();
    scenario(store, move || reopen.clone()).await;
}

#[tokio::test]
async fn sqlite_keeps_and_answers_pending_calls() {
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("threads.db");
    let open = move || Sqlite::open(&path).unwrap();
    scenario(open(), open).await;
}

/// A deny of a hook still wins over an approval given to an edited call (the hooks run again
/// on the edited arguments), and an abort is not turned into an interrupt.
#[tokio::test]
async fn an_edited_call_is_still_checked_by_the_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let seen = Log::new();
    let agent = agent(store.clone(), dir.path(), &seen, Duration::ZERO);
    let guarded = Agent::builder()
        .model(model())
        .store(store.clone())
        .tools(agent.tools())
        .hooks(
            Hooks::new()
                .before_tool_use(ToolMatcher::exact(["ask_a", "ask_b", "ask_c"]), |c, _| {
                    if c.arguments["n"] == 666 {
                        PreToolUse::Deny("666 is not allowed".into())
                    } else {
                        PreToolUse::Ask("check".into())
                    }
                })
                .before_tool_use("later", |_, _| PreToolUse::Defer)
                .defer_approvals()
                .compile()
                .unwrap(),
        )
        .build();
    let resp = guarded
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    assert!(matches!(resp.outcome, Outcome::Interrupted { .. }));
    let answer = Approvals::new()
        .edit("id_ask_a", json!({"n": 666}))
        .approve("id_ask_b")
        .approve("id_ask_c")
        .approve("id_later");
    let resp = guarded
        .run(AgentRequest::approvals("t", answer))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert!(runs(dir.path(), "ask_a").is_empty(), "the deny won");
    assert_eq!(runs(dir.path(), "ask_b").len(), 1);
    let thread = store.load("t").await.unwrap().unwrap();
    assert_history_valid(&thread.messages);
    assert!(
        thread
            .messages
            .iter()
            .any(|m| m.tool_call_id.as_deref() == Some("id_ask_a")
                && m.text() == "PreToolUse:ask_a hook error: 666 is not allowed")
    );
}

/// The event stream ends with the interrupt: `AgentStop` carries the pending calls, after the
/// free call's `ToolCallEnd`.
#[tokio::test]
async fn the_stream_ends_with_the_pending_calls() {
    use futures_util::StreamExt;
    use tower_agent::agent::AgentEvent;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(MemoryStore::new(), dir.path(), &Log::new(), Duration::ZERO);
    let events: Vec<AgentEvent> = agent
        .stream(AgentRequest::new("go").thread("t"))
        .collect()
        .await;
    let ended = events.iter().position(|e| {
        matches!(e, AgentEvent::ToolCallEnd { name, output, .. } if name == "free" && !output.is_error)
    });
    let Some(AgentEvent::AgentStop {
        outcome: Outcome::Interrupted { pending },
        ..
    }) = events.last()
    else {
        panic!("{:?}", events.last());
    };
    assert_eq!(pending.len(), 4);
    assert!(ended.is_some_and(|i| i < events.len() - 1));
}

/// Under the policy a step's only call, deferred, is an interrupt too (not `Deferred`), and
/// its answer runs it.
#[tokio::test]
async fn a_single_deferred_call_is_an_interrupt() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let tools = agent(MemoryStore::new(), dir.path(), &Log::new(), Duration::ZERO);
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("later", json!({"n": 7}))
                .text("done"),
        )
        .store(store.clone())
        .tools(tools.tools())
        .hooks(
            Hooks::new()
                .before_tool_use("later", |_, _| PreToolUse::Defer)
                .defer_approvals()
                .compile()
                .unwrap(),
        )
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    let Outcome::Interrupted { pending } = resp.outcome else {
        panic!("{:?}", resp.outcome);
    };
    assert_eq!(pending.len(), 1);
    let answer = Approvals::new().approve(pending[0].id.clone());
    let resp = agent
        .run(AgentRequest::approvals("t", answer))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(runs(dir.path(), "later"), [r#"{"n":7} "#]);
    assert_history_valid(&store.load("t").await.unwrap().unwrap().messages);
}

/// The session transcript gets each decided call's final output once: the denial, and the
/// approved call's real output (not its placeholder).
#[tokio::test]
async fn the_transcript_gets_the_final_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let tools = agent(MemoryStore::new(), dir.path(), &Log::new(), Duration::ZERO);
    let agent = Agent::builder()
        .model(model())
        .store(store)
        .tools(tools.tools())
        .transcripts(logs.path())
        .hooks(
            Hooks::new()
                .before_tool_use(ToolMatcher::exact(["ask_a", "ask_b", "ask_c"]), |_, _| {
                    PreToolUse::Ask("check".into())
                })
                .before_tool_use("later", |_, _| PreToolUse::Defer)
                .defer_approvals()
                .compile()
                .unwrap(),
        )
        .build();
    agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    agent
        .run(AgentRequest::approvals("t", decisions()))
        .await
        .unwrap();
    let text = std::fs::read_to_string(logs.path().join("t.jsonl")).unwrap();
    let count = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("denied: not on a Friday"), 1, "{text}");
    assert_eq!(count("ask_a ran"), 1, "{text}");
    assert_eq!(count("later ran"), 1, "{text}");
    assert_eq!(count("may or may not"), 0, "{text}");
    assert_eq!(count("free ran"), 1, "{text}");
}

/// Claude Code command hooks (real child processes) that answer `ask` and `defer` interrupt
/// the run under the policy, and the answer runs the calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_hooks_ask_and_defer_interrupt_the_run() {
    use tower_agent::command::CommandHooks;
    let dir = tempfile::tempdir().unwrap();
    let decide = |decision: &str| {
        let out = json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": "a person must look",
        }});
        json!({"type": "command", "command": format!("printf '%s' '{out}'"), "timeout": 10})
    };
    let settings = json!({"hooks": {"PreToolUse": [
        {"matcher": "ask_a|ask_b|ask_c", "hooks": [decide("ask")]},
        {"matcher": "later", "hooks": [decide("defer")]},
    ]}});
    let hooks = CommandHooks::builder()
        .settings_json(settings, "inline")
        .project_dir(dir.path())
        .transcripts_dir(dir.path().join("transcripts"))
        .build()
        .unwrap();
    let store = MemoryStore::new();
    let tools = agent(MemoryStore::new(), dir.path(), &Log::new(), Duration::ZERO);
    let agent = Agent::builder()
        .model(model())
        .store(store.clone())
        .tools(tools.tools())
        .hooks(hooks.into_hooks().defer_approvals().compile().unwrap())
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    let Outcome::Interrupted { pending } = &resp.outcome else {
        panic!("{:?}", resp.outcome);
    };
    assert_eq!(
        pending_ids(pending),
        ["id_ask_a", "id_ask_b", "id_ask_c", "id_later"]
    );
    assert!(
        pending[0].reason.contains("a person must look"),
        "{pending:?}"
    );
    assert_eq!(runs(dir.path(), "free").len(), 1);
    let resp = agent
        .run(AgentRequest::approvals("t", decisions()))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(runs(dir.path(), "ask_a").len(), 1);
    assert_eq!(runs(dir.path(), "ask_c"), [r#"{"n":42} "#]);
    assert_eq!(runs(dir.path(), "later").len(), 1);
    assert!(runs(dir.path(), "ask_b").is_empty());
    assert_history_valid(&store.load("t").await.unwrap().unwrap().messages);
}

/// A step that aborts keeps its pending calls: the thread waits for their answer, which
/// leaves it valid.
#[tokio::test]
async fn an_aborted_step_keeps_its_pending_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let tools = agent(MemoryStore::new(), dir.path(), &Log::new(), Duration::ZERO);
    let agent = Agent::builder()
        .model(model())
        .store(store.clone())
        .tools(tools.tools())
        .hooks(
            Hooks::new()
                .before_tool_use(
                    ToolMatcher::exact(["ask_a", "ask_b", "ask_c", "later"]),
                    |_, _| PreToolUse::Ask("check".into()),
                )
                .after_tool_use("free", |_, _, _| PostToolUse::Abort("stop here".into()))
                .defer_approvals()
                .compile()
                .unwrap(),
        )
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    assert!(
        matches!(resp.outcome, Outcome::Aborted { .. }),
        "{:?}",
        resp.outcome
    );
    assert_eq!(store.load("t").await.unwrap().unwrap().pending.len(), 4);
    let resp = agent
        .run(AgentRequest::approvals("t", decisions()))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(runs(dir.path(), "ask_a").len(), 1);
    assert_history_valid(&store.load("t").await.unwrap().unwrap().messages);
}

/// Without the deferring policy nothing changes: an ask with no approval service is denied,
/// and no call is left pending.
#[tokio::test]
async fn without_the_policy_an_ask_is_denied_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(model())
        .store(store.clone())
        .tools(agent(MemoryStore::new(), dir.path(), &Log::new(), Duration::ZERO).tools())
        .hooks(
            Hooks::new()
                .before_tool_use(ToolMatcher::exact(["ask_a"]), |_, _| {
                    PreToolUse::Ask("check".into())
                })
                .compile()
                .unwrap(),
        )
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert!(store.load("t").await.unwrap().unwrap().pending.is_empty());
    assert!(runs(dir.path(), "ask_a").is_empty());
}

// ===== HTTP: POST /threads/{id}/approvals =====

/// A real server on 127.0.0.1 over `agent`: the `x-user` header becomes a [`User`] in the
/// request's extensions (an authentication middleware); only `admin` may answer approvals.
async fn server(agent: Agent) -> String {
    use tower_agent::server::{AgentRoutes, ThreadAction};
    let routes = AgentRoutes::for_agent(&agent)
        .thread_access(|parts: &axum::http::request::Parts, _: &str, action| {
            let user = parts.extensions.get::<User>().map(|u| u.0.as_str());
            action != ThreadAction::Approve || user == Some("admin")
        })
        .router()
        .layer(axum::middleware::from_fn(
            |mut req: axum::extract::Request, next: axum::middleware::Next| async move {
                if let Some(user) = req.headers().get("x-user").and_then(|v| v.to_str().ok()) {
                    let user = User(user.to_owned());
                    req.extensions_mut().insert(user);
                }
                next.run(req).await
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, routes).await.unwrap() });
    url
}

fn decisions_json() -> Value {
    serde_json::to_value(decisions()).unwrap()
}

async fn post(http: &reqwest::Client, url: String, user: &str, body: Value) -> (u16, Value) {
    let resp = http
        .post(url)
        .header("x-user", user)
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_approvals_are_authorised_checked_and_answered_once() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Log::new();
    // The approved calls take a while: the two answers below overlap.
    let agent = agent(
        MemoryStore::new(),
        dir.path(),
        &seen,
        Duration::from_millis(300),
    );
    let base = server(agent).await;
    let http = reqwest::Client::new();
    let approvals = format!("{base}/threads/t/approvals");

    let (status, body) = post(
        &http,
        format!("{base}/threads/t/runs"),
        "bob",
        json!({"prompt": "go"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"]["kind"], "interrupted");
    assert_eq!(body["outcome"]["pending"][2]["id"], "id_ask_c");
    let thread: Value = http
        .get(format!("{base}/threads/t"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(thread["pending"].as_array().unwrap().len(), 4);

    // Not the approver: 403, nothing runs.
    let (status, body) = post(&http, approvals.clone(), "bob", decisions_json()).await;
    assert_eq!(status, 403, "{body}");
    // Forged id, missing decision, bad shape: 422 / 400 with a clear error.
    let forged = serde_json::to_value(decisions().approve("id_free")).unwrap();
    let (status, body) = post(&http, approvals.clone(), "admin", forged).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("`id_free` is not waiting"),
        "{body}"
    );
    let missing = serde_json::to_value(Approvals::new().approve("id_ask_a")).unwrap();
    let (status, body) = post(&http, approvals.clone(), "admin", missing).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("without a decision"),
        "{body}"
    );
    let (status, _) = post(
        &http,
        approvals.clone(),
        "admin",
        json!({"decisions": [{"call_id": "x", "decision": "maybe"}]}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = post(
        &http,
        format!("{base}/threads/none/approvals"),
        "admin",
        decisions_json(),
    )
    .await;
    assert_eq!(status, 404);
    for t in ["ask_a", "ask_b", "ask_c", "later"] {
        assert!(
            runs(dir.path(), t).is_empty(),
            "{t} ran on a refused answer"
        );
    }

    // Two answers at once: one runs the calls, the other is refused with 409.
    let (a, b) = tokio::join!(
        post(&http, approvals.clone(), "admin", decisions_json()),
        post(&http, approvals.clone(), "admin", decisions_json()),
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{a:?} {b:?}");
    let ok = if a.0 == 200 { &a.1 } else { &b.1 };
    assert_eq!(ok["outcome"]["kind"], "finished");
    assert_eq!(runs(dir.path(), "ask_a"), [r#"{"n":1} admin"#]);
    assert_eq!(runs(dir.path(), "ask_c"), [r#"{"n":42} admin"#]);
    assert!(runs(dir.path(), "ask_b").is_empty());
    // Stale afterwards: 409.
    let (status, body) = post(&http, approvals, "admin", decisions_json()).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("no call waiting"),
        "{body}"
    );
    assert_eq!(runs(dir.path(), "ask_a").len(), 1);
}

// ===== acceptance: two server processes on a real PostgreSQL =====

#[cfg(feature = "postgres")]
mod replicas {
    use super::*;
    use tower_agent::store::Postgres;

    const CHILD_URL: &str = "TOWER_AGENT_TEST_APPROVALS_PG_URL";
    const CHILD_DIR: &str = "TOWER_AGENT_TEST_APPROVALS_DIR";

    /// Child role: an HTTP replica over the database of `CHILD_URL`, its tools counting in
    /// `CHILD_DIR`; prints its address and serves until killed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a child role: run by its parent test through `rerun`"]
    async fn child_approval_replica() {
        let (Ok(url), Ok(dir)) = (std::env::var(CHILD_URL), std::env::var(CHILD_DIR)) else {
            return;
        };
        let store = Postgres::connect(&url).await.unwrap();
        let agent = agent(
            store,
            Path::new(&dir),
            &Log::new(),
            Duration::from_millis(300),
        );
        println!("REPLICA={}", server(agent).await);
        std::future::pending::<()>().await;
    }

    async fn replica_process(db: &str, dir: &Path) -> (support::Killed, String) {
        let mut cmd = support::rerun(&crate::support::test_name!("child_approval_replica"));
        cmd.env(CHILD_URL, db).env(CHILD_DIR, dir);
        support::spawn_reporting(cmd, "REPLICA").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_approval_asked_in_one_process_is_answered_once_through_another_after_a_restart() {
        let db = support::postgres::database().await;
        let dir = tempfile::tempdir().unwrap();
        let dir: PathBuf = dir.path().to_owned();
        let http = reqwest::Client::new();

        // Asked in process A.
        let (a, a_url) = replica_process(&db, &dir).await;
        let (status, body) = post(
            &http,
            format!("{a_url}/threads/t/runs"),
            "bob",
            json!({"prompt": "go"}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["outcome"]["kind"], "interrupted", "{body}");
        assert_eq!(runs(&dir, "free").len(), 1);

        // A is killed and started again; B is another replica.
        drop(a);
        let ((_a, a_url), (_b, b_url)) =
            tokio::join!(replica_process(&db, &dir), replica_process(&db, &dir));
        let thread: Value = http
            .get(format!("{a_url}/threads/t"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(thread["pending"].as_array().unwrap().len(), 4, "{thread}");

        // The same answer through both replicas at once: one wins.
        let (x, y) = tokio::join!(
            post(
                &http,
                format!("{a_url}/threads/t/approvals"),
                "admin",
                decisions_json()
            ),
            post(
                &http,
                format!("{b_url}/threads/t/approvals"),
                "admin",
                decisions_json()
            ),
        );
        let mut statuses = [x.0, y.0];
        statuses.sort();
        assert_eq!(statuses, [200, 409], "{x:?} {y:?}");
        let ok = if x.0 == 200 { &x.1 } else { &y.1 };
        assert_eq!(ok["outcome"]["kind"], "finished", "{ok}");

        // And again through B: stale.
        let (status, _) = post(
            &http,
            format!("{b_url}/threads/t/approvals"),
            "admin",
            decisions_json(),
        )
        .await;
        assert_eq!(status, 409);

        assert_eq!(
            runs(&dir, "ask_a"),
            [r#"{"n":1} admin"#],
            "approved: exactly once"
        );
        assert!(runs(&dir, "ask_b").is_empty(), "denied: never");
        assert_eq!(
            runs(&dir, "ask_c"),
            [r#"{"n":42} admin"#],
            "edited arguments"
        );
        assert_eq!(
            runs(&dir, "later"),
            [r#"{"n":1} admin"#],
            "deferred, approved: once"
        );
        assert_eq!(runs(&dir, "free").len(), 1, "the free call is not re-run");
        let store = Postgres::connect(&db).await.unwrap();
        let thread = store.load("t").await.unwrap().unwrap();
        assert!(thread.pending.is_empty());
        assert_history_valid(&thread.messages);
    }

    /// Two answers that both loaded the pending calls before either saved (no server lease
    /// between them: two agents on two stores, lined up by a SessionStart gate): the store's
    /// compare-and-swap lets one decide; the other fails with a conflict and runs nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_answers_that_loaded_together_run_the_calls_once() {
        let db = support::postgres::database().await;
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let seen = Log::new();
        let store = || async { Postgres::connect(&db).await.unwrap() };
        let asker = agent(store().await, dir, &seen, Duration::ZERO);
        let resp = asker
            .run(AgentRequest::new("go").thread("t"))
            .await
            .unwrap();
        assert!(matches!(resp.outcome, Outcome::Interrupted { .. }));

        let gate = Arc::new(tokio::sync::Barrier::new(2));
        let one = agent_gated(
            store().await,
            dir,
            &seen,
            Duration::ZERO,
            Some(gate.clone()),
        );
        let two = agent_gated(store().await, dir, &seen, Duration::ZERO, Some(gate));
        let (x, y) = tokio::join!(
            one.run(AgentRequest::approvals("t", decisions())),
            two.run(AgentRequest::approvals("t", decisions())),
        );
        let (won, lost) = match (x, y) {
            (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
            other => panic!("one answer must win: {other:?}"),
        };
        assert_eq!(won.outcome, Outcome::Finished);
        assert!(
            tower_agent::store::postgres::Conflict::find(&lost).is_some(),
            "{lost}"
        );
        assert_eq!(runs(dir, "ask_a").len(), 1, "approved: exactly once");
        assert_eq!(runs(dir, "ask_c"), [r#"{"n":42} "#]);
        assert_eq!(runs(dir, "later").len(), 1);
        assert!(runs(dir, "ask_b").is_empty());
    }
}
