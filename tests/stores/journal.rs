//! The tool-call journal (`store::journal`) and crash recovery (`AgentRequest::recover`),
//! with one generic body per scenario run against every store: `MemoryStore`, `Sqlite` (a
//! file) and `Postgres` (a real server, `support::postgres`).
//!
//! A crash is a run whose future is dropped in the middle of a tool call (its task aborted);
//! the recovery runs on another store opened on the same database (another replica). The
//! tools append a line to a counter file each time they run: what the counter holds is how
//! many times the side effect happened. `tests/resume.rs` does the same across processes,
//! with `kill -9`.

use crate::support;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures_util::future::BoxFuture;
use serde_json::json;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    message::{Message, Role, ToolCall},
    model::ScriptedModel,
    store::{JournalEntry, MemoryStore, Thread, ThreadStore, ToolJournal},
    tool::{Tool, tool_fn},
};

use support::{any_object, assert_history_valid};

/// Opens another store on the same database (another replica).
type Open<S> = Arc<dyn Fn() -> BoxFuture<'static, S> + Send + Sync>;

/// Runs every scenario against a store, in a module `$module`; `$setup` gives
/// `(Open<S>, guard)`.
macro_rules! journal_scenarios {
    ($module:ident, $setup:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            journal_scenarios!(@tests $setup,
                records_started_then_finished,
                a_save_keeps_only_the_entries_a_resume_can_read,
                an_unfinished_call_of_a_tool_that_is_not_idempotent_is_not_run_again,
                an_unfinished_call_of_an_idempotent_tool_is_run_again_once,
                a_finished_call_is_replayed_and_not_run_again,
                a_call_that_never_started_is_run,
                a_thread_with_nothing_in_flight_is_left_as_it_is,
                approved_calls_stopped_at_each_write_are_finished_by_the_journal,
                a_late_finished_record_leaves_no_entry_on_a_thread_at_rest,
            );
        }
    };
    (@tests $setup:expr, $($scenario:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                let (open, _guard) = $setup.await;
                super::$scenario(open).await;
            }
        )*
    };
}

async fn memory() -> (Open<MemoryStore>, ()) {
    let store = MemoryStore::new();
    let open: Open<MemoryStore> = Arc::new(move || {
        let store = store.clone();
        Box::pin(async move { store })
    });
    (open, ())
}

journal_scenarios!(memory_store, memory());

#[cfg(feature = "sqlite")]
async fn sqlite() -> (Open<tower_agent::store::Sqlite>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let open: Open<tower_agent::store::Sqlite> = Arc::new(move || {
        let path = path.clone();
        Box::pin(async move { tower_agent::store::Sqlite::open(&path).unwrap() })
    });
    (open, dir)
}

#[cfg(feature = "sqlite")]
journal_scenarios!(sqlite_store, sqlite());

#[cfg(all(unix, feature = "postgres"))]
async fn postgres() -> (Open<tower_agent::store::Postgres>, ()) {
    let url = support::postgres::database().await;
    let open: Open<tower_agent::store::Postgres> = Arc::new(move || {
        let url = url.clone();
        Box::pin(async move { tower_agent::store::Postgres::connect(&url).await.unwrap() })
    });
    (open, ())
}

#[cfg(all(unix, feature = "postgres"))]
journal_scenarios!(postgres_store, postgres());

// ===== helpers =====

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Waits (at most [`PATIENCE`](support::PATIENCE)) until `done`.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A tool `name` that appends a line to `counter` each time it runs; then blocks forever if
/// `block`, else answers `"{name} done"`.
fn counting(name: &'static str, counter: PathBuf, block: bool, idempotent: bool) -> impl Tool {
    tool_fn(name, "counts its runs", any_object(), move |_, _| {
        let counter = counter.clone();
        async move {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&counter)?;
            writeln!(file, "ran")?;
            drop(file);
            if block {
                std::future::pending::<()>().await;
            }
            Ok::<_, BoxError>(format!("{name} done"))
        }
    })
    .idempotent(idempotent)
}

/// The model of a crashing run: it calls `calls` at once (arguments `{"n": 1}`).
fn calling(calls: &[&str]) -> ScriptedModel {
    ScriptedModel::new()
        .tool_calls(calls.iter().map(|c| (c.to_string(), json!({"n": 1}))))
        .text("never reached")
}

/// Starts a run of `agent` on thread `t`, waits until every counter of `wait_for` has a
/// line, then drops the run: the crash.
async fn crash(agent: Agent, wait_for: &[&Path]) {
    let run = tokio::spawn(async move { agent.run(AgentRequest::new("go").thread("t")).await });
    for counter in wait_for {
        until("the tool ran", || lines(counter) == 1).await;
    }
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
}

/// The tool message the model got for the call `name` in its first request of the recovery.
fn seen(model: &ScriptedModel, thread: &Thread, name: &str) -> Message {
    let call = thread
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter())
        .find(|c| c.name == name)
        .unwrap()
        .id
        .clone();
    model.requests()[0]
        .messages
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call))
        .cloned()
        .unwrap_or_else(|| panic!("no output for `{name}` in {:?}", model.requests()[0]))
}

// ===== scenarios =====

async fn records_started_then_finished<S: ThreadStore + Clone>(open: Open<S>) {
    let (one, two) = (open().await, open().await);
    let call = ToolCall {
        id: "c1".into(),
        name: "send".into(),
        arguments: json!({"to": "ada", "text": "héllo \u{0} ✓"}),
    };
    let journal = one.journal().expect("the store keeps a journal");
    journal.started("t", &call).await.unwrap();
    let ids = ["c1".to_owned(), "c2".to_owned()];
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries["c1"].in_doubt());
    assert_eq!(entries["c1"].arguments, call.arguments);
    assert_eq!(entries["c1"].tool, "send");

    let output = tower_agent::message::ToolOutput::text("c1", "sent \u{0}");
    journal.finished("t", &call, &output).await.unwrap();
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert_eq!(entries["c1"].output.as_ref(), Some(&output));
    // Another thread's calls are not this one's.
    let other = two.journal().unwrap().entries("u", &ids).await.unwrap();
    assert!(other.is_empty());

    // Kept by a save of the thread mid-step (its last message makes the call), deleted with
    // the thread.
    let mut thread = Thread::new("t");
    thread.messages.push(Message::user("go"));
    thread
        .messages
        .push(Message::assistant("").with_tool_calls(vec![call.clone()]));
    one.save(&thread).await.unwrap();
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    one.delete("t").await.unwrap();
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert!(entries.is_empty(), "{entries:?}");
}

/// A save keeps only the entries a resume can read: those of the calls of the thread's last
/// message (none once they are answered), as another replica sees them.
async fn a_save_keeps_only_the_entries_a_resume_can_read<S: ThreadStore + Clone>(open: Open<S>) {
    let (one, two) = (open().await, open().await);
    let call = |i: usize| ToolCall {
        id: format!("c{i}"),
        name: "send".into(),
        arguments: json!({ "n": i }),
    };
    let ids: Vec<String> = (0..4).map(|i| format!("c{i}")).collect();
    let kept = |entries: HashMap<String, JournalEntry>| {
        let mut ids: Vec<String> = entries.into_keys().collect();
        ids.sort_unstable();
        ids
    };
    let journal = one.journal().unwrap();
    let mut thread = Thread::new("t");
    thread.messages.push(Message::user("go"));
    // A step of two calls, run and answered: its save leaves no entry.
    thread
        .messages
        .push(Message::assistant("").with_tool_calls(vec![call(0), call(1)]));
    one.save(&thread).await.unwrap();
    for i in 0..2 {
        journal.started("t", &call(i)).await.unwrap();
        let output = tower_agent::message::ToolOutput::text(format!("c{i}"), "done");
        journal.finished("t", &call(i), &output).await.unwrap();
        thread.messages.push(Message::tool_result(&output));
    }
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert_eq!(kept(entries), ["c0", "c1"], "kept until the step is saved");
    one.save(&thread).await.unwrap();
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert!(entries.is_empty(), "{entries:?}");

    // A step in flight: the entries of its calls stay; one of an id of an earlier step used
    // again (`c0`) and one of no call of the last message (`c3`) go.
    journal.started("t", &call(0)).await.unwrap();
    journal.started("t", &call(3)).await.unwrap();
    thread
        .messages
        .push(Message::assistant("").with_tool_calls(vec![call(1), call(2)]));
    journal.started("t", &call(1)).await.unwrap();
    one.save(&thread).await.unwrap();
    journal.started("t", &call(2)).await.unwrap();
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert_eq!(kept(entries), ["c1", "c2"]);
    // Another thread's entries are not touched by this one's saves.
    journal.started("u", &call(3)).await.unwrap();
    one.save(&thread).await.unwrap();
    let entries = two.journal().unwrap().entries("u", &ids).await.unwrap();
    assert_eq!(kept(entries), ["c3"]);

    // A call id a provider sent with a NUL byte in it does not fail the save.
    let odd = ToolCall {
        id: "c\u{0}x".into(),
        name: "send".into(),
        arguments: json!({}),
    };
    thread
        .messages
        .push(Message::assistant("").with_tool_calls(vec![call(2), odd]));
    one.save(&thread).await.unwrap();
    let entries = two.journal().unwrap().entries("t", &ids).await.unwrap();
    assert_eq!(kept(entries), ["c2"]);
}

async fn an_unfinished_call_of_a_tool_that_is_not_idempotent_is_not_run_again<
    S: ThreadStore + Clone,
>(
    open: Open<S>,
) {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("send");
    let first = Agent::builder()
        .model(calling(&["send"]))
        .tool(counting("send", counter.clone(), true, false))
        .store(open().await)
        .build();
    crash(first, &[&counter]).await;

    let store = open().await;
    let model = ScriptedModel::new().text("recovered").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("send", counter.clone(), false, false))
        .store(store.clone())
        .build();
    let resumed = agent.run(AgentRequest::recover("t")).await.unwrap();
    assert!(resumed.outcome.is_finished(), "{:?}", resumed.outcome);
    assert_eq!(resumed.text, "recovered");
    assert_eq!(lines(&counter), 1, "the call was run again");
    let thread = store.load("t").await.unwrap().unwrap();
    let output = seen(&model, &thread, "send");
    assert!(output.text().starts_with("in doubt"), "{}", output.text());
    assert!(output.text().contains("may or may not have happened"));
    assert_history_valid(&thread.messages);
    let roles: Vec<Role> = thread.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    // A second recovery has nothing left to do: nothing runs, the model is not called.
    let again = agent.run(AgentRequest::recover("t")).await.unwrap();
    assert_eq!((again.steps, model.calls()), (0, 1));
    assert_eq!(lines(&counter), 1);
}

async fn an_unfinished_call_of_an_idempotent_tool_is_run_again_once<S: ThreadStore + Clone>(
    open: Open<S>,
) {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("put");
    let first = Agent::builder()
        .model(calling(&["put"]))
        .tool(counting("put", counter.clone(), true, true))
        .store(open().await)
        .build();
    crash(first, &[&counter]).await;

    let store = open().await;
    let model = ScriptedModel::new().text("recovered").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("put", counter.clone(), false, true))
        .store(store.clone())
        .build();
    let resumed = agent.run(AgentRequest::recover("t")).await.unwrap();
    assert!(resumed.outcome.is_finished(), "{:?}", resumed.outcome);
    assert_eq!(lines(&counter), 2, "run again exactly once");
    let thread = store.load("t").await.unwrap().unwrap();
    let output = seen(&model, &thread, "put");
    assert_eq!(output.text(), "put done");
    assert_history_valid(&thread.messages);
}

async fn a_finished_call_is_replayed_and_not_run_again<S: ThreadStore + Clone>(open: Open<S>) {
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (dir.path().join("fast"), dir.path().join("slow"));
    let store = open().await;
    let first = Agent::builder()
        .model(calling(&["fast", "slow"]))
        .tool(counting("fast", fast.clone(), false, false))
        .tool(counting("slow", slow.clone(), true, false))
        .store(store.clone())
        .build();
    crash(first, &[&fast, &slow]).await;
    // The fast call's output is recorded as soon as it settled (it may trail its counter).
    let thread = store.load("t").await.unwrap().unwrap();
    let fast_id = thread.messages[1].tool_calls[0].id.clone();
    let journal = store.journal().unwrap();
    let ids = [fast_id.clone()];
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while journal.entries("t", &ids).await.unwrap()[&fast_id].in_doubt() {
        assert!(std::time::Instant::now() < deadline, "fast never finished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let other = open().await;
    let model = ScriptedModel::new().text("recovered").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("fast", fast.clone(), false, false))
        .tool(counting("slow", slow.clone(), false, false))
        .store(other.clone())
        .build();
    let resumed = agent.run(AgentRequest::recover("t")).await.unwrap();
    assert!(resumed.outcome.is_finished(), "{:?}", resumed.outcome);
    assert_eq!((lines(&fast), lines(&slow)), (1, 1), "a call was run again");
    let thread = other.load("t").await.unwrap().unwrap();
    assert_eq!(seen(&model, &thread, "fast").text(), "fast done");
    assert!(seen(&model, &thread, "slow").text().starts_with("in doubt"));
    assert_history_valid(&thread.messages);
}

async fn a_call_that_never_started_is_run<S: ThreadStore + Clone>(open: Open<S>) {
    // Saved with its calls, then the process died before any reached its tool.
    let store = open().await;
    let mut thread = Thread::new("t");
    let mut call = Message::assistant("");
    call.tool_calls.push(ToolCall {
        id: "c1".into(),
        name: "send".into(),
        arguments: json!({}),
    });
    thread.messages = vec![Message::user("go"), call].into_iter().collect();
    store.save(&thread).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("send");
    let model = ScriptedModel::new().text("recovered").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("send", counter.clone(), false, false))
        .store(open().await)
        .build();
    let resumed = agent.run(AgentRequest::recover("t")).await.unwrap();
    assert!(resumed.outcome.is_finished());
    assert_eq!(lines(&counter), 1);
    let thread = store.load("t").await.unwrap().unwrap();
    assert_eq!(seen(&model, &thread, "send").text(), "send done");
}

async fn a_thread_with_nothing_in_flight_is_left_as_it_is<S: ThreadStore + Clone>(open: Open<S>) {
    let store = open().await;
    let model = ScriptedModel::new().text("hello").text("again").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .store(store.clone())
        .build();
    agent
        .run(AgentRequest::new("hi").thread("t"))
        .await
        .unwrap();
    let resumed = agent.run(AgentRequest::recover("t")).await.unwrap();
    assert_eq!((resumed.steps, model.calls()), (0, 1));
    assert_eq!(resumed.text, "hello");
    assert_eq!(store.load("t").await.unwrap().unwrap().messages.len(), 2);
    // A thread the store does not have is an error, not an empty run.
    let err = agent.run(AgentRequest::recover("nope")).await.unwrap_err();
    assert!(err.is_store(), "{err}");
    assert!(err.to_string().contains("nope") || format!("{err:?}").contains("nope"));
}

// ===== a journal that cannot write; the flag on the tool =====

/// A store whose journal cannot record a start (a full disk, a lost connection).
#[derive(Clone, Default)]
struct BrokenJournal(MemoryStore);

impl ThreadStore for BrokenJournal {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        self.0.load(id)
    }
    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        self.0.save(thread)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        self.0.delete(id)
    }
    fn journal(&self) -> Option<&dyn ToolJournal> {
        Some(self)
    }
}

impl ToolJournal for BrokenJournal {
    fn started<'a>(&'a self, _: &'a str, _: &'a ToolCall) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Err("disk full".into()) })
    }
    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a tower_agent::message::ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        self.0.finished(thread, call, output)
    }
    fn entries<'a>(
        &'a self,
        thread: &'a str,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>> {
        self.0.entries(thread, ids)
    }
}

#[tokio::test]
async fn a_call_the_journal_cannot_record_is_not_run_and_the_model_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("send");
    let model = ScriptedModel::new()
        .tool_call("send", json!({}))
        .text("ok")
        .per_run()
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("send", counter.clone(), false, false))
        .store(BrokenJournal::default())
        .build();
    let run = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    assert!(run.outcome.is_finished());
    assert_eq!(lines(&counter), 0, "the tool ran without a journal record");
    let output = support::last_tool_message(&model.requests()[1]);
    assert!(output.text().contains("not run"), "{}", output.text());
    assert!(output.text().contains("disk full"), "{}", output.text());
    // A run without a thread is not journaled: the tool runs.
    agent.run("go").await.unwrap();
    assert_eq!(lines(&counter), 1);
}

#[test]
fn idempotent_is_a_flag_of_the_spec_off_unless_set_and_not_sent() {
    use tower_agent::{message::ToolSpec, tool::typed_tool};
    let spec = ToolSpec::new("t", "d", any_object());
    assert!(!spec.idempotent);
    let value = serde_json::to_value(&spec).unwrap();
    assert!(value.get("idempotent").is_none(), "{value}");
    let old: ToolSpec =
        serde_json::from_value(json!({"name": "t", "description": "d", "parameters": {}})).unwrap();
    assert!(!old.idempotent);
    let on = spec.clone().idempotent(true);
    assert_eq!(serde_json::to_value(&on).unwrap()["idempotent"], true);
    let back: ToolSpec = serde_json::from_value(serde_json::to_value(&on).unwrap()).unwrap();
    assert!(back.idempotent);

    let f = tool_fn("f", "d", any_object(), |_, _| async {
        Ok::<_, BoxError>("x")
    });
    assert!(!f.spec().idempotent);
    assert!(f.idempotent(true).spec().idempotent);
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {}
    let typed = typed_tool("g", "d", |_: Args, _| async { Ok::<_, BoxError>("x") });
    assert!(typed.idempotent(true).spec().idempotent);
}

#[tokio::test]
async fn a_new_run_on_a_thread_left_mid_step_answers_its_calls_without_running_them() {
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (dir.path().join("fast"), dir.path().join("slow"));
    let store = MemoryStore::new();
    let first = Agent::builder()
        .model(calling(&["fast", "slow"]))
        .tool(counting("fast", fast.clone(), false, false))
        .tool(counting("slow", slow.clone(), true, false))
        .store(store.clone())
        .build();
    crash(first, &[&fast, &slow]).await;
    // `fast`'s output is recorded when it settles, right after its counter.
    let thread = store.load("t").await.unwrap().unwrap();
    let ids = [thread.messages[1].tool_calls[0].id.clone()];
    let journal = store.journal().unwrap();
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while journal.entries("t", &ids).await.unwrap()[&ids[0]].in_doubt() {
        assert!(std::time::Instant::now() < deadline, "fast never finished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let model = ScriptedModel::new().text("hello").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("fast", fast.clone(), false, false))
        .tool(counting("slow", slow.clone(), false, false))
        .store(store.clone())
        .build();
    let run = agent
        .run(AgentRequest::new("something else").thread("t"))
        .await
        .unwrap();
    assert!(run.outcome.is_finished());
    assert_eq!((lines(&fast), lines(&slow)), (1, 1));
    let thread = store.load("t").await.unwrap().unwrap();
    assert_history_valid(&thread.messages);
    assert_eq!(seen(&model, &thread, "fast").text(), "fast done");
    assert!(
        seen(&model, &thread, "slow")
            .text()
            .starts_with("interrupted")
    );
    assert_eq!(thread.messages[4].text(), "something else");
}

#[cfg(all(unix, feature = "postgres"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_of_schema_2_is_migrated_to_the_journal_keeping_its_threads() {
    use tower_agent::store::{Postgres, postgres::SCHEMA_VERSION};
    let url = support::postgres::database().await;
    // A database of schema 2, as that release wrote it (its exact DDL), with a thread.
    let body = serde_json::to_string(&Message::user("hi")).unwrap();
    support::postgres::sql(
        &url,
        &format!(
            "{}; INSERT INTO tower_agent_threads
                (id, revision, message_count, todos, created_at, updated_at, pending)
             VALUES ('old', nextval('tower_agent_revisions'), 1, '[]', 1, 1, '[]');
             INSERT INTO tower_agent_messages VALUES ('old', 0, '{}');",
            crate::migrations::POSTGRES_V2,
            body.replace('\'', "''")
        ),
    )
    .await;

    let store = Postgres::connect(&url).await.unwrap();
    assert_eq!(SCHEMA_VERSION, 4);
    assert_eq!(
        support::postgres::column(&url, "SELECT version::text FROM tower_agent_schema").await,
        [Some("4".to_owned())]
    );
    let old = store.load("old").await.unwrap().unwrap();
    assert_eq!(old.messages[0].text(), "hi");
    let call = ToolCall {
        id: "c".into(),
        name: "t".into(),
        arguments: json!({}),
    };
    let journal = store.journal().unwrap();
    journal.started("old", &call).await.unwrap();
    let ids = ["c".to_owned()];
    assert!(journal.entries("old", &ids).await.unwrap()["c"].in_doubt());
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_journal_row_fails_the_recovery_clearly_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let store = tower_agent::store::Sqlite::open(&path).unwrap();
    let mut thread = Thread::new("t");
    let mut call = Message::assistant("");
    call.tool_calls.push(ToolCall {
        id: "c1".into(),
        name: "send".into(),
        arguments: json!({}),
    });
    thread.messages = vec![Message::user("go"), call].into_iter().collect();
    store.save(&thread).await.unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO journal VALUES ('t', 'c1', 'send', '{}', 'not json')",
            [],
        )
        .unwrap();

    let counter = dir.path().join("send");
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("never"))
        .tool(counting("send", counter.clone(), false, false))
        .store(store.clone())
        .build();
    let err = agent.run(AgentRequest::recover("t")).await.unwrap_err();
    assert!(err.is_store(), "{err}");
    let chain = format!("{err} {:?}", std::error::Error::source(&err));
    assert!(
        chain.contains("c1") && chain.contains("bad output"),
        "{chain}"
    );
    assert_eq!(lines(&counter), 0, "a call ran");
    // The thread is left as it was, for a recovery once the row is repaired.
    assert_eq!(store.load("t").await.unwrap().unwrap().messages.len(), 2);
}

/// A thread waiting for approvals (an interrupted run, `agent::interrupt`) is not "in
/// flight": a recovery leaves its pending calls to the approvals and runs nothing; the
/// approval then runs the call once.
#[tokio::test]
async fn a_recovery_of_a_thread_waiting_for_approvals_runs_nothing() {
    use tower_agent::{
        Outcome,
        agent::Approvals,
        layers::hooks::{Hooks, PreToolUse},
    };
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("send");
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call("send", json!({}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(counting("send", counter.clone(), false, false))
        .store(store.clone())
        .hooks(
            Hooks::new()
                .before_tool_use("send", |_, _| PreToolUse::Defer)
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
    let recovered = agent.run(AgentRequest::recover("t")).await.unwrap();
    assert_eq!(
        recovered.outcome,
        Outcome::Interrupted {
            pending: pending.clone()
        }
    );
    assert_eq!((lines(&counter), model.calls()), (0, 1));

    let answer = Approvals::new().approve(pending[0].id.clone());
    let resp = agent
        .run(AgentRequest::approvals("t", answer))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(lines(&counter), 1);
    assert_history_valid(&store.load("t").await.unwrap().unwrap().messages);
}

// ===== approved calls (`agent::interrupt`) stopped at each write of the answer =====

/// A store that holds its `n`th write (save or journal record) from the moment it is armed:
/// that write never completes, so the run waiting on it stops exactly there when dropped.
#[derive(Clone)]
struct Held<S> {
    inner: S,
    state: Arc<std::sync::Mutex<(usize, Option<usize>)>>,
}

impl<S: ThreadStore> Held<S> {
    fn new(inner: S) -> Self {
        Held {
            inner,
            state: Arc::default(),
        }
    }

    /// Holds the `n`th write from now on.
    fn hold(&self, n: usize) {
        *self.state.lock().unwrap() = (0, Some(n));
    }

    fn holding(&self) -> bool {
        let (count, at) = *self.state.lock().unwrap();
        at.is_some_and(|at| count >= at)
    }

    /// Counts a write; whether it is the one to hold.
    fn write(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        state.0 += 1;
        state.1 == Some(state.0)
    }

    /// The write `write` makes, unless it is the one to hold (not even started then: a
    /// store may write when called, before its future is polled).
    fn gate<'a, T: Send + 'a>(
        &self,
        write: impl FnOnce() -> BoxFuture<'a, Result<T, BoxError>>,
    ) -> BoxFuture<'a, Result<T, BoxError>> {
        if self.write() {
            Box::pin(std::future::pending())
        } else {
            write()
        }
    }
}

impl<S: ThreadStore> ThreadStore for Held<S> {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        self.inner.load(id)
    }
    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        self.gate(|| self.inner.save(thread))
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        self.gate(|| self.inner.delete(id))
    }
    fn journal(&self) -> Option<&dyn ToolJournal> {
        Some(self)
    }
}

impl<S: ThreadStore> ToolJournal for Held<S> {
    fn started<'a>(&'a self, t: &'a str, c: &'a ToolCall) -> BoxFuture<'a, Result<(), BoxError>> {
        let journal = self.inner.journal().expect("the store keeps a journal");
        self.gate(|| journal.started(t, c))
    }
    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a tower_agent::message::ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        let journal = self.inner.journal().expect("the store keeps a journal");
        self.gate(|| journal.finished(thread, call, output))
    }
    fn entries<'a>(
        &'a self,
        thread: &'a str,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>> {
        self.inner.journal().unwrap().entries(thread, ids)
    }
}

/// An agent whose tool `b` (counted in `counter`, not idempotent) waits for a person's
/// approval (a PreToolUse ask, the deferring policy); the model calls it for the prompt `go`
/// (id `id_b`) and answers `done` to anything else.
fn approving(store: impl ThreadStore, counter: PathBuf) -> Agent {
    use tower_agent::{
        layers::hooks::{Hooks, PreToolUse},
        model::ModelResponse,
    };
    let model = ScriptedModel::new().otherwise(|req| {
        let last = req.messages.iter().rev().find(|m| m.role != Role::System);
        if last.is_some_and(|m| m.role == Role::User && m.text() == "go") {
            let call = ToolCall::new("id_b", "b", json!({"n": 1}));
            return Ok(ModelResponse::tool_calls([call]));
        }
        Ok(ModelResponse::text("done"))
    });
    let hooks = Hooks::new()
        .before_tool_use("b", |_, _| PreToolUse::Ask("b needs a person".into()))
        .defer_approvals()
        .compile()
        .unwrap();
    Agent::builder()
        .model(model)
        .tool(counting("b", counter, false, false))
        .store(store)
        .hooks(hooks)
        .build()
}

/// A person approves `b`, and the run that took the decision stops at the write `point` of
/// its answer (1 the decision's save, 2 `b`'s started record, 3 its finished record — `b`
/// ran —, 4 the save of its output); another replica then recovers the thread, or sends a
/// new prompt. The journal's rules hold for the approved call: not started → run once (a new
/// prompt says it did not happen); in doubt → not run again; finished → replayed. A thread at
/// rest keeps no journal entry.
async fn approved_calls_stopped_at_each_write_are_finished_by_the_journal<
    S: ThreadStore + Clone,
>(
    open: Open<S>,
) {
    use tower_agent::agent::{Approvals, Outcome};
    let dir = tempfile::tempdir().unwrap();
    for point in 1..=4 {
        for recover in [true, false] {
            let what = format!(
                "stopped at write {point}, then {}",
                if recover { "recovered" } else { "a new prompt" }
            );
            let thread = format!("approved-{point}-{recover}");
            let counter = dir.path().join(&thread);
            let held = Held::new(open().await);
            let agent = approving(held.clone(), counter.clone());
            let first = agent
                .run(AgentRequest::new("go").thread(&thread))
                .await
                .unwrap();
            assert!(
                matches!(first.outcome, Outcome::Interrupted { .. }),
                "{what}: {:?}",
                first.outcome
            );
            held.hold(point);
            let answer = AgentRequest::approvals(&thread, Approvals::new().approve("id_b"));
            let run = tokio::spawn(async move { agent.run(answer).await });
            until(&what, || held.holding()).await;
            run.abort();
            let _ = run.await;

            let other = approving(open().await, counter.clone());
            let request = if recover {
                // A decision that was never saved is taken again.
                if point == 1 {
                    AgentRequest::approvals(&thread, Approvals::new().approve("id_b"))
                } else {
                    AgentRequest::recover(&thread)
                }
            } else {
                // Stopped at 1, the call still waits: a new prompt denies it.
                AgentRequest::new("next").thread(&thread)
            };
            let resp = other.run(request).await.unwrap();
            assert_eq!(resp.outcome, Outcome::Finished, "{what}");
            let store = open().await;
            let saved = store.load(&thread).await.unwrap().unwrap();
            assert_history_valid(&saved.messages);
            assert!(
                saved.pending.is_empty() && saved.approved.is_empty(),
                "{what}: {saved:?}"
            );
            let output = saved
                .messages
                .iter()
                .find(|m| m.tool_call_id.as_deref() == Some("id_b"))
                .unwrap()
                .text()
                .into_owned();
            let (runs, expected) = match (point, recover) {
                (1, true) | (2, true) | (4, _) => (1, "b done"),
                (3, true) => (1, "in doubt:"),
                (1, false) => (0, "denied: a new prompt was sent"),
                (2, false) => (0, "not run:"),
                _ => (1, "interrupted:"),
            };
            assert_eq!(lines(&counter), runs, "{what}: how many times `b` ran");
            assert!(
                output.starts_with(expected),
                "{what}: `b`'s output: {output}"
            );
            let left = store
                .journal()
                .unwrap()
                .entries(&thread, &["id_b".to_owned()])
                .await
                .unwrap();
            assert!(
                left.is_empty(),
                "{what}: a thread at rest keeps journal entries: {left:?}"
            );
        }
    }
}

/// A run lost its lease (a database restart) while its tool ran; another run took the step
/// over and saved the thread at rest (dropping the step's entries); then the first run's
/// "finished" record arrives. It leaves no entry: a thread at rest keeps none. A "finished"
/// record of a call that never started (a hook denied it) is not kept either.
async fn a_late_finished_record_leaves_no_entry_on_a_thread_at_rest<S: ThreadStore + Clone>(
    open: Open<S>,
) {
    let (one, two) = (open().await, open().await);
    let call = ToolCall::new("c1", "send", json!({}));
    let mut thread = Thread::new("late");
    thread.messages.push(Message::user("go"));
    thread
        .messages
        .push(Message::assistant("").with_tool_calls(vec![call.clone()]));
    one.save(&thread).await.unwrap();
    one.journal().unwrap().started("late", &call).await.unwrap();
    // The other run answers the call and ends the run: the thread is at rest.
    let output = tower_agent::message::ToolOutput::error("c1", "in doubt");
    thread.messages.push(Message::tool_result(&output));
    thread.messages.push(Message::assistant("done"));
    two.save(&thread).await.unwrap();
    let ids = ["c1".to_owned(), "c2".to_owned()];
    assert!(
        two.journal()
            .unwrap()
            .entries("late", &ids)
            .await
            .unwrap()
            .is_empty()
    );
    // The late record of the first run, and one of a call that never started.
    let late = tower_agent::message::ToolOutput::text("c1", "sent");
    one.journal()
        .unwrap()
        .finished("late", &call, &late)
        .await
        .unwrap();
    let never = ToolCall::new("c2", "send", json!({}));
    let denied = tower_agent::message::ToolOutput::error("c2", "denied");
    one.journal()
        .unwrap()
        .finished("late", &never, &denied)
        .await
        .unwrap();
    let left = two.journal().unwrap().entries("late", &ids).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}
