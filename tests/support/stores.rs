//! Scenarios every SQL thread store must pass, written once over the [`Store`] trait and run
//! against each store by [`store_scenarios!`]: `tests/sqlite.rs` for `Sqlite`,
//! `tests/postgres.rs` for `Postgres` (a real server).
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::json;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    builtins::{
        filesystem::FilesWritten,
        todo::{Todo, TodoStatus, Todos},
    },
    message::{Message, Role},
    model::{ModelResponse, ScriptedModel},
    store::{Thread, ThreadInfo, ThreadStore},
    tool::tool_fn,
};

use super::{any_object, assert_history_valid, within};

/// What the scenarios need of a store besides [`ThreadStore`].
pub trait Store: ThreadStore + Clone {
    fn list(&self) -> BoxFuture<'_, Vec<ThreadInfo>>;
    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()>;
}

#[cfg(feature = "sqlite")]
impl Store for tower_agent::store::Sqlite {
    fn list(&self) -> BoxFuture<'_, Vec<ThreadInfo>> {
        Box::pin(async { self.list_threads().await.unwrap() })
    }
    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async { self.delete_thread(id).await.unwrap() })
    }
}

#[cfg(feature = "postgres")]
impl Store for tower_agent::store::Postgres {
    fn list(&self) -> BoxFuture<'_, Vec<ThreadInfo>> {
        Box::pin(async { self.list_threads().await.unwrap() })
    }
    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async { self.delete_thread(id).await.unwrap() })
    }
}

/// Opens another store on the same database (another process, another replica).
pub type Open<S> = Arc<dyn Fn() -> BoxFuture<'static, S> + Send + Sync>;

/// Runs every shared scenario as a test of its own, in a module `$module`; `$setup` is an
/// async expression giving `(Open<S>, guard)` (the guard lives as long as the test).
#[macro_export]
macro_rules! store_scenarios {
    ($module:ident, $setup:expr) => {
        $crate::store_scenarios!(
            @tests $module, $setup,
            thread_survives_the_store_and_continues,
            appends_and_rewrites,
            stores_see_each_others_writes,
            concurrent_runs_on_different_threads,
            a_dropped_run_keeps_its_finished_steps,
        );
    };
    (@tests $module:ident, $setup:expr, $($scenario:ident),* $(,)?) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    #[allow(unused_imports)]
                    use super::*;
                    let (open, _guard) = $setup.await;
                    $crate::support::stores::$scenario(open).await;
                }
            )*
        }
    };
}

/// A tool that adds a todo and writes a file in the run state.
pub fn planner() -> impl tower_agent::tool::Tool {
    tool_fn(
        "plan",
        "adds a todo",
        any_object(),
        |args, ctx| async move {
            let title = args["title"].as_str().unwrap_or("untitled").to_owned();
            let mut todos = tower_agent::builtins::todo::todos(&ctx);
            let id = (todos.len() + 1).to_string();
            todos.push(Todo::new(id.clone(), title.clone()));
            tower_agent::builtins::todo::set_todos(&ctx, todos);
            let path = format!("/notes/{id}.md");
            tower_agent::builtins::filesystem::record_file(&ctx, path, Arc::from(title));
            Ok::<_, BoxError>("planned")
        },
    )
}

pub fn texts(thread: &Thread) -> Vec<String> {
    thread
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect()
}

pub fn user_thread(id: &str, texts: &[&str]) -> Thread {
    let mut t = Thread::new(id);
    t.messages = texts.iter().map(|t| Message::user(*t)).collect();
    t
}

pub async fn thread_survives_the_store_and_continues<S: Store>(open: Open<S>) {
    // First agent (process, replica): one tool step (a todo and a file), then the answer.
    {
        let agent = Agent::builder()
            .model(
                ScriptedModel::new()
                    .tool_call("plan", json!({"title": "write the tests"}))
                    .text("Planned."),
            )
            .tool(planner())
            .system_prompt("You plan.")
            .store(open().await)
            .build();
        let resp = agent
            .run(AgentRequest::new("Plan the work.").thread("t1"))
            .await
            .unwrap();
        assert!(resp.outcome.is_finished());
    }

    // Second agent on a new store: the model sees the first run's messages.
    let store = open().await;
    let loaded = store.load("t1").await.unwrap().expect("thread saved");
    assert_eq!(loaded.messages.len(), 5); // system, user, assistant (call), tool, assistant
    assert_eq!(
        Todos::of(&loaded.data),
        vec![Todo::new("1", "write the tests")]
    );
    assert_eq!(
        FilesWritten::of(&loaded.data)["/notes/1.md"].as_ref(),
        "write the tests"
    );

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

    let thread = open().await.load("t1").await.unwrap().unwrap();
    assert_eq!(thread.messages.len(), 7);
    assert_eq!(thread.messages[0].role, Role::System);
    assert_eq!(
        Todos::of(&thread.data).len(),
        1,
        "todos survive a run that does not touch them"
    );
    assert_history_valid(&thread.messages);

    let threads = store.list().await;
    assert_eq!(threads.len(), 1);
    assert_eq!((threads[0].id.as_str(), threads[0].messages), ("t1", 7));
    assert!(threads[0].updated_at >= threads[0].created_at);

    store.remove("t1").await;
    assert!(store.load("t1").await.unwrap().is_none());
    assert!(open().await.list().await.is_empty());
}

pub async fn appends_and_rewrites<S: Store>(open: Open<S>) {
    let store = open().await;
    assert!(store.load("t").await.unwrap().is_none());

    let mut t = user_thread("t", &["a", "b"]);
    Todos::set(&mut t.data, vec![Todo::new("1", "x")]);
    FilesWritten::set(&mut t.data, "/f", "one");
    store.save(&t).await.unwrap();

    // Append: the history shares its prefix with what was saved.
    t.messages.push(Message::assistant("c"));
    let mut todos = Todos::of(&t.data);
    todos[0].status = TodoStatus::Done;
    Todos::set(&mut t.data, todos);
    FilesWritten::set(&mut t.data, "/g", "two");
    store.save(&t).await.unwrap();
    assert_eq!(open().await.load("t").await.unwrap().unwrap(), t);

    // Compaction: rewrite from the first difference; a file removed.
    t.messages.splice(0..2, [Message::user("summary")]);
    assert!(FilesWritten::remove(&mut t.data, "/f"));
    store.save(&t).await.unwrap();
    assert_eq!(open().await.load("t").await.unwrap().unwrap(), t);

    // An equal but not shared copy with an edited middle message, through a store that
    // loaded it.
    let other_store = open().await;
    let mut other = other_store.load("t").await.unwrap().unwrap();
    other.messages = other.messages.iter().cloned().collect();
    other.messages.get_mut(1).unwrap().push_text("!");
    other.messages.push(Message::user("d"));
    other_store.save(&other).await.unwrap();
    assert_eq!(open().await.load("t").await.unwrap().unwrap(), other);

    // A store that never saw the thread replaces it: a shorter history.
    let fresh = open().await;
    let short = user_thread("t", &["only"]);
    fresh.save(&short).await.unwrap();
    assert_eq!(open().await.load("t").await.unwrap().unwrap(), short);

    fresh.remove("t").await;
    assert!(open().await.load("t").await.unwrap().is_none());
    fresh.remove("t").await;
    // Saved again after the delete: a new thread, nothing of the old one.
    fresh.save(&user_thread("t", &["new"])).await.unwrap();
    assert_eq!(
        texts(&open().await.load("t").await.unwrap().unwrap()),
        ["new"]
    );
}

pub async fn stores_see_each_others_writes<S: Store>(open: Open<S>) {
    let (a, b) = (open().await, open().await);
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
    let thread = b.load("t").await.unwrap().unwrap();
    assert_eq!(texts(&thread), ["1", "1", "2", "3", "3", "5"]);
}

pub async fn concurrent_runs_on_different_threads<S: Store>(open: Open<S>) {
    let store = open().await;
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
    let reader = open().await;
    let threads = reader.list().await;
    assert_eq!(threads.len(), 20);
    for info in threads {
        let thread = reader.load(&info.id).await.unwrap().unwrap();
        assert_eq!(thread.messages.len(), 6, "{}", info.id);
        assert_history_valid(&thread.messages);
        assert_eq!(Todos::of(&thread.data).len(), 2);
        assert_eq!(FilesWritten::of(&thread.data).len(), 2);
    }
}

pub async fn a_dropped_run_keeps_its_finished_steps<S: Store>(open: Open<S>) {
    // A process that dies mid-step loses only that step: the steps before it were committed.
    let entered = Arc::new(tokio::sync::Notify::new());
    let hang = {
        let entered = Arc::clone(&entered);
        tool_fn("hang", "never ends", any_object(), move |_, _| {
            entered.notify_one();
            async {
                std::future::pending::<()>().await;
                Ok::<_, BoxError>("unreachable")
            }
        })
    };
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("plan", json!({"title": "a"}))
                .tool_call("hang", json!({}))
                .text("never"),
        )
        .tool(planner())
        .tool(hang)
        .store(open().await)
        .build();
    // Dropped once the hanging call runs: in its step.
    let run = agent.run(AgentRequest::new("go").thread("t"));
    tokio::select! {
        _ = run => panic!("the run ended"),
        () = within("the hanging call", entered.notified()) => {}
    }
    drop(agent);

    let thread = open().await.load("t").await.unwrap().unwrap();
    // user, assistant (plan), tool (planned), and of the hanging step only the assistant
    // message with its call, saved before the call ran (a resume finishes it, see
    // `store::journal`).
    assert_eq!(thread.messages.len(), 4);
    assert_eq!(thread.messages[2].text(), "planned");
    assert_eq!(thread.messages[3].tool_calls[0].name, "hang");
    assert_eq!(Todos::of(&thread.data).len(), 1);
}
