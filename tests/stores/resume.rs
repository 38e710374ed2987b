//! Crash resume across replica processes sharing one real PostgreSQL server
//! (`support::postgres`): a replica process is killed with `SIGKILL` in the middle of a tool
//! call, and `POST /threads/{id}/resume` on another replica (this test process) finishes the
//! run from the store and its tool-call journal. Every tool appends a line to a counter file
//! each time it runs: the counter is how many times the side effect happened.

use crate::support;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, BoxError,
    message::Role,
    model::ScriptedModel,
    store::{Postgres, ThreadStore},
    tool::{Tool, tool_fn},
};

use support::{any_object, assert_history_valid, postgres as pg};

/// The child replica's database URL.
const CHILD_URL: &str = "TOWER_AGENT_RESUME_DB";
/// The directory of the counter files.
const CHILD_DIR: &str = "TOWER_AGENT_RESUME_DIR";
/// The tools the child's model calls at once, comma-separated.
const CHILD_CALLS: &str = "TOWER_AGENT_RESUME_CALLS";

/// A tool `name` that appends a line to `dir/name` each time it runs, then blocks forever if
/// `block`, else answers `"{name} done"`. `send` and `fast` are not idempotent, `put` is.
fn counting(name: &'static str, dir: PathBuf, block: bool) -> impl Tool {
    tool_fn(name, "counts its runs", any_object(), move |_, _| {
        let counter = dir.join(name);
        async move {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&counter)?;
            writeln!(file, "ran")?;
            file.sync_all()?;
            drop(file);
            if block {
                std::future::pending::<()>().await;
            }
            Ok::<_, BoxError>(format!("{name} done"))
        }
    })
    .idempotent(name == "put")
}

/// An HTTP replica on 127.0.0.1 over `agent` (it serves until the process ends).
async fn replica(agent: Agent) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let serve = tower_agent::server::serve(listener, agent, std::future::pending::<()>());
    let url = format!("http://{}", serve.local_addr().unwrap());
    tokio::spawn(std::future::IntoFuture::into_future(serve));
    url
}

/// Child role: a replica whose model calls the tools of `CHILD_CALLS` at once; `send` and
/// `put` block once they counted (the replica is killed in the middle of them), `fast` ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child role: run by its parent test through `rerun`"]
async fn child_replica() {
    let (Ok(url), Ok(dir), Ok(calls)) = (
        std::env::var(CHILD_URL),
        std::env::var(CHILD_DIR),
        std::env::var(CHILD_CALLS),
    ) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let calls: Vec<(String, Value)> = calls
        .split(',')
        .map(|c| (c.to_owned(), json!({"to": "ada"})))
        .collect();
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_calls(calls).text("never reached"))
        .tool(counting("send", dir.clone(), true))
        .tool(counting("put", dir.clone(), true))
        .tool(counting("fast", dir.clone(), false))
        .store(Postgres::connect(&url).await.unwrap())
        .build();
    println!("REPLICA={}", replica(agent).await);
    std::future::pending::<()>().await;
}

/// Starts a replica process; its base URL.
async fn replica_process(db: &str, dir: &Path, calls: &str) -> (support::Killed, String) {
    let mut cmd = support::rerun(&support::test_name!("child_replica"));
    cmd.env(CHILD_URL, db)
        .env(CHILD_DIR, dir)
        .env(CHILD_CALLS, calls);
    support::spawn_reporting(cmd, "REPLICA").await
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Waits (at most [`PATIENCE`](support::PATIENCE)) until `done`.
async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a case saw: the recovery's answer, the requests of the resuming replica's model, and
/// the counters.
struct Resumed {
    body: Value,
    model: ScriptedModel,
    thread: tower_agent::store::Thread,
}

impl Resumed {
    /// The output the model of the resuming replica got for the call of `tool`.
    fn seen(&self, tool: &str) -> String {
        let id = &self.thread.messages[1]
            .tool_calls
            .iter()
            .find(|c| c.name == tool)
            .unwrap()
            .id;
        let request = &self.model.requests()[0];
        request
            .messages
            .iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_ref() == Some(id))
            .unwrap_or_else(|| panic!("no output for `{tool}`"))
            .text()
            .into_owned()
    }
}

/// A replica process runs thread `t` (its model calls `calls`); once every counter of
/// `wait_for` has a line and `ready` holds, it is killed with SIGKILL in the middle of the
/// step; then this process, a replica over the same database, is asked to resume the thread.
async fn kill_and_resume(
    calls: &str,
    wait_for: &[&str],
    dir: &Path,
    ready: impl AsyncFnMut() -> bool,
    db: &str,
) -> Resumed {
    let (mut child, one) = replica_process(db, dir, calls).await;
    let model = ScriptedModel::new().text("recovered").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("send", dir.to_owned(), false))
        .tool(counting("put", dir.to_owned(), false))
        .tool(counting("fast", dir.to_owned(), false))
        .store(Postgres::connect(db).await.unwrap())
        .build();
    let two = replica(agent).await;
    let http = reqwest::Client::new();
    let run = tokio::spawn(
        http.post(format!("{one}/threads/t/runs"))
            .json(&json!({"prompt": "go"}))
            .send(),
    );
    for name in wait_for {
        let counter = dir.join(name);
        until("the tool ran", async || lines(&counter) == 1).await;
    }
    let mut ready = ready;
    until("the replica is in the state to kill", async || {
        ready().await
    })
    .await;

    // The run goes on in the first replica: the other refuses to resume the thread.
    let resume = || http.post(format!("{two}/threads/t/resume")).send();
    let refused = resume().await.unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);

    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();
    assert!(run.await.unwrap().is_err(), "the killed replica answered");

    // Its lease dies with its session: the other replica resumes the thread.
    let deadline = std::time::Instant::now() + support::PATIENCE;
    let answer = loop {
        let answer = resume().await.unwrap();
        if answer.status() != reqwest::StatusCode::CONFLICT {
            break answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(answer.status(), reqwest::StatusCode::OK);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["text"], "recovered", "{body}");
    assert_eq!(body["outcome"], json!({"kind": "finished"}), "{body}");
    let thread = Postgres::connect(db)
        .await
        .unwrap()
        .load("t")
        .await
        .unwrap()
        .unwrap();
    assert_history_valid(&thread.messages);
    assert_eq!(thread.messages.last().unwrap().text(), "recovered");
    Resumed {
        body,
        model,
        thread,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_in_a_call_that_is_not_idempotent_is_resumed_without_running_it_again() {
    let db = pg::database().await;
    let dir = tempfile::tempdir().unwrap();
    let resumed = kill_and_resume("send", &["send"], dir.path(), async || true, &db).await;
    assert_eq!(lines(&dir.path().join("send")), 1, "the call ran again");
    let seen = resumed.seen("send");
    assert!(seen.starts_with("in doubt"), "{seen}");
    assert!(seen.contains("may or may not have happened"), "{seen}");
    assert_eq!(resumed.model.calls(), 1, "{}", resumed.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_in_a_call_of_an_idempotent_tool_is_resumed_running_it_once_more() {
    let db = pg::database().await;
    let dir = tempfile::tempdir().unwrap();
    let resumed = kill_and_resume("put", &["put"], dir.path(), async || true, &db).await;
    assert_eq!(lines(&dir.path().join("put")), 2, "run again exactly once");
    assert_eq!(resumed.seen("put"), "put done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_finished_before_the_kill_is_replayed_not_run_again() {
    let db = pg::database().await;
    let dir = tempfile::tempdir().unwrap();
    // Killed once `fast` is recorded finished while `send` is running.
    let finished = async || {
        let rows = pg::column(
            &db,
            "SELECT tool FROM tower_agent_journal WHERE output IS NOT NULL",
        )
        .await;
        rows == [Some("fast".to_owned())]
    };
    let resumed = kill_and_resume("fast,send", &["fast", "send"], dir.path(), finished, &db).await;
    assert_eq!(lines(&dir.path().join("fast")), 1, "`fast` ran again");
    assert_eq!(lines(&dir.path().join("send")), 1, "`send` ran again");
    assert_eq!(resumed.seen("fast"), "fast done");
    assert!(resumed.seen("send").starts_with("in doubt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_thread_the_store_does_not_have_is_a_404() {
    let db = pg::database().await;
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("never"))
        .store(Postgres::connect(&db).await.unwrap())
        .build();
    let base = replica(agent).await;
    let answer = reqwest::Client::new()
        .post(format!("{base}/threads/nope/resume"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), reqwest::StatusCode::NOT_FOUND);
    let body: Value = answer.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("nope"), "{body}");
}
