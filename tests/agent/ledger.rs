//! LedgerLayer with its JSONL and SQLite sinks, in full agent runs.

use crate::support;

use std::{
    io::Write,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};
use tower::{Layer, ServiceExt};
use tower_agent::{
    Agent, AgentRequest, BoxError, Outcome,
    context::RunContext,
    layers::ledger::{CallStatus, JsonlLedger, LedgerEntry, LedgerLayer},
    message::{ToolCall, ToolOutput},
    model::ScriptedModel,
    tool::{Tool, ToolRequest, ToolRouter, tool_fn},
};

use support::tool_messages;

/// A tool that sleeps `ms` milliseconds (tokio time) and echoes its arguments.
fn sleepy(name: &'static str, ms: u64) -> impl Tool {
    tool_fn(
        name,
        "sleeps",
        json!({"type": "object"}),
        move |args, _| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, BoxError>(format!("{name}: {args}"))
        },
    )
}

/// Tools answering ok, with an error output, and with an `Err`.
fn mixed_tools() -> ToolRouter {
    ToolRouter::new()
        .tool(sleepy("slow", 40))
        .tool(tool_fn(
            "bad",
            "errs",
            json!({"type": "object"}),
            |_, _| async { Ok::<_, BoxError>(ToolOutput::error("", "no such file")) },
        ))
        .tool(tool_fn(
            "boom",
            "fails",
            json!({"type": "object"}),
            |_, _| async { Err::<String, _>("disk on fire".into()) },
        ))
}

fn mixed_model() -> ScriptedModel {
    ScriptedModel::new()
        .per_run()
        .tool_calls([
            ("slow", json!({"n": 1})),
            ("bad", json!({})),
            ("boom", json!({})),
        ])
        .tool_call("slow", json!({"n": 2}))
        .text("done")
}

fn check_mixed(entries: &[LedgerEntry], session: &str) {
    assert_eq!(entries.len(), 4, "{entries:#?}");
    let by_tool = |tool: &str, step: u32| {
        entries
            .iter()
            .find(|e| e.tool == tool && e.step == step)
            .unwrap_or_else(|| panic!("no entry for {tool} at step {step}: {entries:#?}"))
    };
    let slow = by_tool("slow", 0);
    assert_eq!(slow.input, json!({"n": 1}));
    assert_eq!(slow.output, r#"slow: {"n":1}"#);
    assert_eq!((slow.status, slow.is_error), (CallStatus::Ok, false));
    assert!(slow.duration_ms >= 40.0, "{}", slow.duration_ms);
    let bad = by_tool("bad", 0);
    assert_eq!((bad.status, bad.is_error), (CallStatus::Error, true));
    assert_eq!(bad.output, "no such file");
    let boom = by_tool("boom", 0);
    assert_eq!((boom.status, boom.is_error), (CallStatus::Err, true));
    assert_eq!(boom.output, "disk on fire");
    assert_eq!(by_tool("slow", 1).input, json!({"n": 2}));
    for e in entries {
        assert_eq!(e.session_id, session);
        assert_eq!(e.run_id, entries[0].run_id);
        assert!(e.call_id.starts_with("call_"), "{}", e.call_id);
        assert!(e.timestamp_ms > 1_600_000_000_000, "{}", e.timestamp_ms);
        assert!(e.duration_ms >= 0.0);
    }
    // Within a step the ledger holds the calls in the order they ended.
    let step0: Vec<&str> = entries
        .iter()
        .filter(|e| e.step == 0)
        .map(|e| e.tool.as_str())
        .collect();
    assert_eq!(step0.last(), Some(&"slow"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn jsonl_has_one_json_line_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let ledger = LedgerLayer::new(JsonlLedger::new(&path));
    let agent = Agent::builder()
        .model(mixed_model())
        .tools(&mixed_tools())
        .tool_layer(ledger.clone())
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("s1"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    ledger.flush().await;

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let entries: Vec<LedgerEntry> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON entry"))
        .collect();
    check_mixed(&entries, "s1");
    let raw: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    for key in [
        "session_id",
        "run_id",
        "step",
        "tool",
        "call_id",
        "input",
        "output",
        "is_error",
        "status",
        "duration_ms",
        "timestamp_ms",
    ] {
        assert!(raw.get(key).is_some(), "{key} in {raw}");
    }

    // A second run appends.
    agent
        .run(AgentRequest::new("again").thread("s2"))
        .await
        .unwrap();
    ledger.flush().await;
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 8);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn concurrent_calls_are_all_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let ledger = LedgerLayer::new(JsonlLedger::new(&path));
    let calls: Vec<(String, Value)> = (0..20)
        .map(|i| ("nap".to_owned(), json!({ "i": i })))
        .collect();
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_calls(calls).text("rested"))
        .tool(tool_fn(
            "nap",
            "naps",
            json!({"type": "object"}),
            |args, _| async move {
                let i = args["i"].as_u64().unwrap();
                // Finish in a different order than the calls were made.
                tokio::time::sleep(Duration::from_millis(100 - i * 3)).await;
                Ok::<_, BoxError>(format!("nap {i}"))
            },
        ))
        .tool_layer(ledger.clone())
        .build();
    let resp = agent.run("nap").await.unwrap();
    assert_eq!(tool_messages(&resp.messages).len(), 20);
    ledger.flush().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let entries: Vec<LedgerEntry> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut seen: Vec<u64> = entries
        .iter()
        .map(|e| e.input["i"].as_u64().unwrap())
        .collect();
    assert_eq!(seen.first(), Some(&19), "recorded as they ended");
    seen.sort_unstable();
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
    for e in &entries {
        let i = e.input["i"].as_u64().unwrap();
        assert_eq!(e.output, format!("nap {i}"));
        assert!((e.duration_ms - (100 - i * 3) as f64).abs() < 1.0, "{e:?}");
    }
}

/// Collects what `tracing` logs on this thread.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_ledger_that_cannot_write_warns_and_the_call_succeeds() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    support::scoped_subscribers();
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist: the file can't be opened.
    let path = dir.path().join("missing").join("ledger.jsonl");
    let ledger = LedgerLayer::new(JsonlLedger::new(&path));
    let svc = ledger.layer(ToolRouter::new().tool(sleepy("echo", 0)));
    let out = svc
        .clone()
        .oneshot(ToolRequest::new(
            ToolCall::new("c1", "echo", json!({"x": 1})),
            RunContext::new(),
        ))
        .await
        .unwrap();
    assert_eq!(
        (out.content.as_str(), out.is_error),
        (r#"echo: {"x":1}"#, false)
    );
    ledger.flush().await;
    let text = logs.text();
    assert!(text.contains("WARN"), "{text}");
    assert!(
        text.contains("could not write to the tool ledger"),
        "{text}"
    );
    assert!(text.contains("missing/ledger.jsonl"), "{text}");
    assert!(!path.exists());

    // Once the directory exists, the next batch gets through.
    std::fs::create_dir(dir.path().join("missing")).unwrap();
    svc.oneshot(ToolRequest::new(
        ToolCall::new("c2", "echo", json!({})),
        RunContext::new(),
    ))
    .await
    .unwrap();
    ledger.flush().await;
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_cancelled_run_records_its_calls_as_cancelled() {
    let entries = Arc::new(Mutex::new(Vec::<LedgerEntry>::new()));
    let sink = {
        let entries = Arc::clone(&entries);
        move |e: LedgerEntry| entries.lock().unwrap().push(e)
    };
    let token = tokio_util::sync::CancellationToken::new();
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_calls([("quick", json!({})), ("slow", json!({}))]))
        .tool(sleepy("quick", 10))
        .tool(sleepy("slow", 10_000))
        .tool_layer(LedgerLayer::new(sink))
        .build();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let resp = agent
        .run(AgentRequest::new("go").cancellation(token))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Cancelled);
    let entries = entries.lock().unwrap();
    let status: Vec<(&str, CallStatus)> = entries
        .iter()
        .map(|e| (e.tool.as_str(), e.status))
        .collect();
    assert_eq!(
        status,
        [("quick", CallStatus::Ok), ("slow", CallStatus::Cancelled)]
    );
    assert!(
        (entries[1].duration_ms - 100.0).abs() < 1.0,
        "{}",
        entries[1].duration_ms
    );
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use tower_agent::layers::ledger::{LedgerSink, SqliteLedger};

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn every_call_of_a_run_is_in_the_sqlite_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let sink = SqliteLedger::open(&path).unwrap();
        let ledger = LedgerLayer::new(sink.clone());
        let agent = Agent::builder()
            .model(mixed_model())
            .tools(&mixed_tools())
            .tool_layer(ledger.clone())
            .build();
        let resp = agent
            .run(AgentRequest::new("go").thread("s1"))
            .await
            .unwrap();
        assert_eq!(resp.outcome, Outcome::Finished);
        ledger.flush().await;

        // Read the file with another connection.
        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT tool, call_id, status, is_error, duration_ms, input, output, step, run_id
                 FROM tool_calls WHERE session_id = 's1' ORDER BY id",
            )
            .unwrap();
        type Row = (
            String,
            String,
            String,
            bool,
            f64,
            String,
            String,
            u32,
            String,
        );
        let rows: Vec<Row> = stmt
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 4);
        // Every call the model made has its row.
        let history_calls: Vec<String> = resp
            .messages
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
            .collect();
        for id in &history_calls {
            assert!(rows.iter().any(|r| &r.1 == id), "no row for {id}");
        }
        let slow: Vec<&Row> = rows.iter().filter(|r| r.0 == "slow").collect();
        assert_eq!(slow.len(), 2);
        for r in &slow {
            assert!(r.4 >= 40.0, "duration {}", r.4);
            assert_eq!(r.2, "ok");
        }
        assert!(rows.iter().all(|r| r.4 >= 0.0 && r.8 == resp.run_id));
        let statuses: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
        assert!(statuses.contains(&"error") && statuses.contains(&"err"));
        assert_eq!(
            serde_json::from_str::<Value>(&slow[0].5).unwrap(),
            json!({"n": 1})
        );

        // The query API gives the same, as entries.
        let entries = sink.calls("s1").await.unwrap();
        check_mixed(&entries, "s1");
        assert!(sink.calls("nobody").await.unwrap().is_empty());
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn query_api_per_session_and_concurrent_calls() {
        let sink = SqliteLedger::open_in_memory().unwrap();
        let calls: Vec<(String, Value)> = (0..16)
            .map(|i| ("nap".to_owned(), json!({ "i": i })))
            .collect();
        let agent = Agent::builder()
            .model(
                ScriptedModel::new()
                    .per_run()
                    .tool_calls(calls)
                    .text("done"),
            )
            .tool(sleepy("nap", 5))
            .tool_layer(LedgerLayer::new(sink.clone()))
            .build();
        for session in ["a", "b"] {
            agent
                .run(AgentRequest::new("go").thread(session))
                .await
                .unwrap();
        }
        // `calls` writes everything recorded before it: no flush needed.
        for session in ["a", "b"] {
            let entries = sink.calls(session).await.unwrap();
            assert_eq!(entries.len(), 16, "{session}");
            let mut seen: Vec<u64> = entries
                .iter()
                .map(|e| e.input["i"].as_u64().unwrap())
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..16).collect::<Vec<_>>());
            assert!(
                entries
                    .iter()
                    .all(|e| e.session_id == session && e.duration_ms >= 5.0)
            );
        }
    }

    #[test]
    fn open_fails_on_a_path_that_is_not_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let err = SqliteLedger::open(dir.path()).unwrap_err();
        assert!(err.sqlite().is_some(), "{err:?}");
        let file = dir.path().join("not-a-db");
        std::fs::write(
            &file,
            "hello, this is not sqlite at all, just text padding it out",
        )
        .unwrap();
        assert!(SqliteLedger::open(&file).is_err());
    }

    #[tokio::test]
    async fn the_table_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let record = |sink: &SqliteLedger, id: &str| {
            let svc = LedgerLayer::new(sink.clone()).layer(ToolRouter::new().tool(sleepy("t", 1)));
            let ctx = RunContext::builder().session_id("s").build();
            let id = id.to_owned();
            async move {
                svc.oneshot(ToolRequest::new(ToolCall::new(id, "t", json!({})), ctx))
                    .await
                    .unwrap();
            }
        };
        let first = SqliteLedger::open(&path).unwrap();
        record(&first, "one").await;
        first.flush().await;
        drop(first);
        let second = SqliteLedger::open(&path).unwrap();
        record(&second, "two").await;
        let ids: Vec<String> = second
            .calls("s")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.call_id)
            .collect();
        assert_eq!(ids, ["one", "two"]);
    }
}
