//! `store::Sqlite` end to end: threads survive the store, saves are per step, a file that is
//! not a database is refused and left as it was, concurrent runs on different threads.
#![cfg(feature = "sqlite")]

mod support;

use std::{path::Path, sync::Arc, time::Duration};

use serde_json::json;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    context::{Todo, TodoStatus},
    message::Role,
    model::{ModelResponse, ScriptedModel},
    store::{Sqlite, Thread, ThreadStore},
    tool::tool_fn,
};

use support::{any_object, assert_history_valid};

/// A tool that adds a todo and writes a file in the run state.
fn planner() -> impl tower_agent::tool::Tool {
    tool_fn(
        "plan",
        "adds a todo",
        any_object(),
        |args, ctx| async move {
            let title = args["title"].as_str().unwrap_or("untitled").to_owned();
            let mut state = ctx.state();
            let id = (state.todos.len() + 1).to_string();
            state.todos.push(Todo::new(id.clone(), title.clone()));
            state
                .files
                .insert(format!("/notes/{id}.md"), Arc::from(title));
            Ok::<_, BoxError>("planned")
        },
    )
}

fn siblings(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn thread_survives_the_store_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");

    // First process: one tool step (a todo and a file), then the answer.
    {
        let agent = Agent::builder()
            .model(
                ScriptedModel::new()
                    .tool_call("plan", json!({"title": "write the tests"}))
                    .text("Planned."),
            )
            .tool(planner())
            .system_prompt("You plan.")
            .store(Sqlite::open(&path).unwrap())
            .build();
        let resp = agent
            .run(AgentRequest::new("Plan the work.").thread("t1"))
            .await
            .unwrap();
        assert!(resp.outcome.is_finished());
        // agent and store dropped here
    }

    // Second process: the model sees the first run's messages; the todos are still there.
    let store = Sqlite::open(&path).unwrap();
    let loaded = store.load("t1").await.unwrap().expect("thread saved");
    assert_eq!(loaded.messages.len(), 5); // system, user, assistant (call), tool, assistant
    assert_eq!(loaded.todos, vec![Todo::new("1", "write the tests")]);
    assert_eq!(loaded.files["/notes/1.md"].as_ref(), "write the tests");

    let model = ScriptedModel::from_fn(|req| {
        let users: Vec<String> = req
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.text().into_owned())
            .collect();
        Ok(ModelResponse::text(format!(
            "I have seen: {}",
            users.join(" | ")
        )))
    });
    let agent = Agent::builder()
        .model(model)
        .tool(planner())
        .store(store.clone())
        .build();
    let resp = agent
        .run(AgentRequest::new("What did I ask?").thread("t1"))
        .await
        .unwrap();
    assert_eq!(resp.text, "I have seen: Plan the work. | What did I ask?");

    let thread = store.load("t1").await.unwrap().unwrap();
    assert_eq!(thread.messages.len(), 7);
    assert_eq!(thread.messages[0].role, Role::System);
    assert_eq!(
        thread.todos.len(),
        1,
        "todos survive a run that does not touch them"
    );
    assert_history_valid(&thread.messages);

    let threads = store.list_threads().await.unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!((threads[0].id.as_str(), threads[0].messages), ("t1", 7));
    assert!(threads[0].updated_at >= threads[0].created_at);

    store.delete_thread("t1").await.unwrap();
    assert!(store.load("t1").await.unwrap().is_none());
    assert!(store.list_threads().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_dropped_run_keeps_its_finished_steps() {
    // A process that dies mid-step loses only that step: the steps before it were committed.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let hang = tool_fn("hang", "never ends", any_object(), |_, _| async {
        std::future::pending::<()>().await;
        Ok::<_, BoxError>("unreachable")
    });
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("plan", json!({"title": "a"}))
                .tool_call("hang", json!({}))
                .text("never"),
        )
        .tool(planner())
        .tool(hang)
        .store(Sqlite::open(&path).unwrap())
        .build();
    let run = agent.run(AgentRequest::new("go").thread("t"));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), run)
            .await
            .is_err()
    );
    drop(agent);

    let thread = Sqlite::open(&path)
        .unwrap()
        .load("t")
        .await
        .unwrap()
        .unwrap();
    // user, assistant (plan), tool (planned): the hanging step is not there.
    assert_eq!(thread.messages.len(), 3);
    assert_eq!(thread.messages[2].text(), "planned");
    assert_eq!(thread.todos.len(), 1);
}

#[tokio::test]
async fn garbage_file_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        (
            "garbage.db",
            (0..4096u32).map(|i| (i * 7 + 3) as u8).collect::<Vec<u8>>(),
        ),
        ("notes.db", b"these are my notes, not a database\n".to_vec()),
        (
            // The right magic, then nonsense: SQLite itself must refuse it.
            "damaged.db",
            b"SQLite format 3\0"
                .iter()
                .copied()
                .chain((0..4080u32).map(|i| (i * 13 + 1) as u8))
                .collect(),
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let before = siblings(&path);

        let err = Sqlite::open(&path).expect_err(name);
        let text = err.to_string();
        assert!(text.contains(name), "{text}");
        assert!(err.is_not_a_database(), "{name}: {err:?}");
        assert!(text.contains("not a SQLite database"), "{text}");
        assert_eq!(err.path(), path);

        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} was changed");
        assert_eq!(
            siblings(&path),
            before,
            "{name}: no journal or WAL left behind"
        );
    }
}

#[tokio::test]
async fn another_applications_database_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    let before = siblings(&path);
    let err = Sqlite::open(&path).unwrap_err();
    assert!(err.is_foreign(), "{err:?}");
    assert!(err.to_string().contains("app.db"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(siblings(&path), before);

    // An empty file is a new database.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    Sqlite::open(&empty).unwrap();
}

#[tokio::test]
async fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    drop(Sqlite::open(&path).unwrap());
    // Reopening migrates nothing.
    drop(Sqlite::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = Sqlite::open(&path).unwrap_err();
    assert!(err.is_too_new(), "{err:?}");
    assert!(err.to_string().contains("99"), "{err}");
}

#[tokio::test]
async fn schema_and_pragmas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let store = Sqlite::open(&path).unwrap();
    let mut thread = Thread::new("t");
    thread
        .messages
        .push(tower_agent::message::Message::user("hi"));
    store.save(&thread).await.unwrap();

    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 1);
    let application: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .unwrap();
    assert_eq!(application.to_be_bytes()[4..], *b"tagt");
    let body: String = conn
        .query_row(
            "SELECT body FROM messages WHERE thread_id = 't' AND seq = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_on_different_threads() {
    let dir = tempfile::tempdir().unwrap();
    let store = Sqlite::open(dir.path().join("threads.db")).unwrap();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("plan", json!({"title": "x"}))
                .tool_call("plan", json!({"title": "y"}))
                .text("done")
                .per_run(),
        )
        .tool(planner())
        .store(store.clone())
        .build();
    let runs = (0..20).map(|i| {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .run(AgentRequest::new("go").thread(format!("t{i}")))
                .await
        })
    });
    for run in futures_util::future::join_all(runs).await {
        assert!(run.unwrap().unwrap().outcome.is_finished());
    }
    let threads = store.list_threads().await.unwrap();
    assert_eq!(threads.len(), 20);
    for info in threads {
        let thread = store.load(&info.id).await.unwrap().unwrap();
        assert_eq!(thread.messages.len(), 6, "{}", info.id);
        assert_history_valid(&thread.messages);
        assert_eq!(thread.todos.len(), 2);
        assert!(thread.todos.iter().all(|t| t.status == TodoStatus::Pending));
        assert_eq!(thread.files.len(), 2);
    }
}

#[tokio::test]
async fn two_stores_on_one_file_see_each_others_writes() {
    // Each store remembers what it saved; a write by the other must not be overwritten by a
    // stale append.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let (a, b) = (Sqlite::open(&path).unwrap(), Sqlite::open(&path).unwrap());
    let model =
        || ScriptedModel::from_fn(|req| Ok(ModelResponse::text(format!("{}", req.messages.len()))));
    let agent_a = Agent::builder().model(model()).store(a.clone()).build();
    let agent_b = Agent::builder().model(model()).store(b.clone()).build();

    agent_a
        .run(AgentRequest::new("1").thread("t"))
        .await
        .unwrap();
    agent_b
        .run(AgentRequest::new("2").thread("t"))
        .await
        .unwrap();
    let resp = agent_a
        .run(AgentRequest::new("3").thread("t"))
        .await
        .unwrap();
    assert_eq!(resp.text, "5", "a saw b's run");
    let texts: Vec<String> = b
        .load("t")
        .await
        .unwrap()
        .unwrap()
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(texts, ["1", "1", "2", "3", "3", "5"]);
}

#[tokio::test]
async fn stale_store_rewrites_instead_of_appending() {
    use tower_agent::message::Message;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let (a, b) = (Sqlite::open(&path).unwrap(), Sqlite::open(&path).unwrap());

    let mut mine = Thread::new("t");
    mine.messages
        .extend([Message::user("a1"), Message::assistant("a2")]);
    a.save(&mine).await.unwrap();
    let mut theirs = Thread::new("t");
    theirs.messages.extend([Message::user("b1")]);
    b.save(&theirs).await.unwrap();

    // `a` still remembers its own two messages as saved; the database holds b's one.
    mine.messages.push(Message::user("a3"));
    a.save(&mine).await.unwrap();
    assert_eq!(b.load("t").await.unwrap().unwrap(), mine);
}
