//! `store::Postgres` against a real PostgreSQL server the tests start themselves
//! (`support::postgres`): the scenarios every store passes (`support::stores`, run against
//! `Sqlite` by `tests/sqlite.rs`): threads survive the store and continue, appends and
//! rewrites, stores that see each other's writes, concurrent runs, a dropped run. Then what only
//! Postgres does: compare-and-swap between replicas (a conflict error, never a lost update),
//! migrations, a newer schema refused, connection errors that name the server and hide the
//! password.

use crate::support;

use std::{sync::Arc, time::Duration};

use serde_json::json;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    builtins::{filesystem::FilesWritten, todo::Todos},
    message::Message,
    model::{ModelResponse, ScriptedModel},
    store::{
        Postgres, Thread, ThreadBusy, ThreadStore,
        postgres::{Conflict, ConnectError, WRITERS},
    },
    tool::tool_fn,
};

use support::{
    any_object, assert_history_valid, postgres as pg,
    stores::{Open, Store, texts, user_thread},
};

/// A fresh database, and how to open a store on it.
async fn postgres() -> (Open<Postgres>, String) {
    let url = pg::database().await;
    let open_url = url.clone();
    let open: Open<Postgres> = Arc::new(move || {
        let url = open_url.clone();
        Box::pin(async move { Postgres::connect(&url).await.unwrap() })
    });
    (open, url)
}

crate::store_scenarios!(shared, postgres());

// ===== Postgres only: incremental appends, compare-and-swap =====

/// The transaction that last wrote each message row of thread `id` (`xmin`), by position.
async fn row_versions(url: &str, id: &str) -> Vec<Option<String>> {
    pg::column(
        url,
        &format!(
            "SELECT xmin::text FROM tower_agent_messages WHERE thread_id = '{id}' ORDER BY seq"
        ),
    )
    .await
}

#[tokio::test]
async fn a_step_appends_rows_and_leaves_the_stored_ones() {
    let (open, url) = postgres().await;
    let store = open().await;
    let mut t = user_thread("t", &["a", "b", "c"]);
    for i in 0..50 {
        FilesWritten::set(&mut t.data, &format!("/kept/{i:02}"), "same");
    }
    store.save(&t).await.unwrap();
    let before = row_versions(&url, "t").await;
    let data_rows = "SELECT xmin::text FROM tower_agent_data ORDER BY key";
    let files_before = pg::column(&url, data_rows).await;
    assert_eq!(files_before.len(), 50);

    t.messages.push(Message::assistant("d"));
    store.save(&t).await.unwrap();
    let after = row_versions(&url, "t").await;
    assert_eq!(after.len(), 4);
    assert_eq!(after[..3], before[..], "the stored rows were rewritten");
    assert_ne!(after[3], after[0]);
    let files_after = pg::column(&url, data_rows).await;
    assert_eq!(files_after, files_before, "an unchanged file was rewritten");

    // One file of fifty edited: its row only.
    FilesWritten::set(&mut t.data, "/kept/07", "edited");
    store.save(&t).await.unwrap();
    let edited = pg::column(&url, data_rows).await;
    let rewritten: Vec<usize> = (0..50).filter(|&i| edited[i] != files_before[i]).collect();
    assert_eq!(rewritten, [7], "only the edited file's row is written");

    // A compaction rewrites from the first difference only.
    t.messages.get_mut(2).unwrap().push_text("!");
    store.save(&t).await.unwrap();
    let rewritten = row_versions(&url, "t").await;
    assert_eq!(rewritten[..2], before[..2]);
    assert_ne!(rewritten[2], before[2]);
}

#[tokio::test]
async fn the_loser_of_two_replicas_gets_a_conflict_and_nothing_is_mixed() {
    let (open, _url) = postgres().await;
    let (a, b) = (open().await, open().await);

    let mut mine = user_thread("t", &["a1", "a2"]);
    a.save(&mine).await.unwrap();
    let mut theirs = b.load("t").await.unwrap().unwrap();
    theirs.messages.push(Message::user("b3"));
    b.save(&theirs).await.unwrap();

    // A's history is stale: refused, nothing written, and it stays refused.
    mine.messages.push(Message::user("a3"));
    let err = a.save(&mine).await.unwrap_err();
    let conflict = Conflict::find(&*err).expect("a conflict error");
    assert_eq!(conflict.thread(), "t");
    assert!(err.to_string().contains("another writer"), "{err}");
    assert_eq!(
        texts(&open().await.load("t").await.unwrap().unwrap()),
        ["a1", "a2", "b3"]
    );
    mine.messages.push(Message::user("a4"));
    assert!(Conflict::find(&*a.save(&mine).await.unwrap_err()).is_some());

    // Loaded again: A continues from B's thread.
    let mut mine = a.load("t").await.unwrap().unwrap();
    mine.messages.push(Message::user("a5"));
    a.save(&mine).await.unwrap();
    assert_eq!(
        texts(&open().await.load("t").await.unwrap().unwrap()),
        ["a1", "a2", "b3", "a5"]
    );

    // Two replicas starting the same new thread: both found none, the second save loses.
    assert!(a.load("new").await.unwrap().is_none());
    assert!(b.load("new").await.unwrap().is_none());
    b.save(&user_thread("new", &["b"])).await.unwrap();
    let err = a.save(&user_thread("new", &["a"])).await.unwrap_err();
    assert!(err.to_string().contains("no thread expected"), "{err}");
    assert_eq!(
        texts(&open().await.load("new").await.unwrap().unwrap()),
        ["b"]
    );

    // Deleted by B: A's next save is refused too (the thread stays deleted).
    b.delete("t").await.unwrap();
    mine.messages.push(Message::user("a6"));
    let err = a.save(&mine).await.unwrap_err();
    assert!(err.to_string().contains("deleted"), "{err}");
    assert!(open().await.load("t").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_appending_to_one_thread_lose_no_update() {
    // Each writer loads, appends one message, saves, and retries on a conflict. Without the
    // compare-and-swap one writer's save replaces the other's: updates are lost.
    const EACH: usize = 40;
    let (open, _url) = postgres().await;
    let writers = ["x", "y"].map(|w| {
        let open = open.clone();
        tokio::spawn(async move {
            let store = open().await;
            let mut conflicts = 0;
            for i in 0..EACH {
                loop {
                    let mut t = store
                        .load("t")
                        .await
                        .unwrap()
                        .unwrap_or_else(|| Thread::new("t"));
                    t.messages.push(Message::user(format!("{w}-{i}")));
                    match store.save(&t).await {
                        Ok(()) => break,
                        Err(e) if Conflict::find(&*e).is_some() => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            conflicts
        })
    });
    let mut conflicts = 0;
    for w in writers {
        conflicts += w.await.unwrap();
    }
    let stored = texts(&open().await.load("t").await.unwrap().unwrap());
    assert_eq!(
        stored.len(),
        2 * EACH,
        "lost updates ({conflicts} conflicts)"
    );
    for w in ["x", "y"] {
        let mine: Vec<&String> = stored.iter().filter(|t| t.starts_with(w)).collect();
        let expected: Vec<String> = (0..EACH).map(|i| format!("{w}-{i}")).collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_thread_another_replica_wrote_fails_with_a_conflict() {
    // Replica A's run is in a tool call while replica B runs the same thread to the end.
    let (open, _url) = postgres().await;
    let (a, b) = (open().await, open().await);
    let agent_b = Agent::builder()
        .model(ScriptedModel::new().text("B answered."))
        .store(b.clone())
        .build();
    let meanwhile = tool_fn("wait", "meanwhile", any_object(), move |_, _| {
        let agent_b = agent_b.clone();
        async move {
            agent_b
                .run(AgentRequest::new("B asks.").thread("t"))
                .await
                .unwrap();
            Ok::<_, BoxError>("waited")
        }
    });
    let agent_a = Agent::builder()
        .model(
            ScriptedModel::new()
                .text("A's first run.")
                .tool_call("wait", json!({}))
                .text("A answered."),
        )
        .tool(meanwhile)
        .store(a.clone())
        .build();
    agent_a
        .run(AgentRequest::new("A starts.").thread("t"))
        .await
        .unwrap();
    let err = agent_a
        .run(AgentRequest::new("A asks.").thread("t"))
        .await
        .unwrap_err();
    assert!(Conflict::find(&err).is_some(), "{err}");

    // The thread is A's first run, A's question and its call (saved before the call ran),
    // and B's run (which loaded it, and answered A's unfinished call as interrupted); nothing
    // of A's refused step. A resumes from there.
    let thread = open().await.load("t").await.unwrap().unwrap();
    assert!(thread.messages[4].text().starts_with("interrupted"));
    assert_eq!(
        texts(&thread)[..3],
        ["A starts.", "A's first run.", "A asks."]
    );
    assert_eq!(texts(&thread)[5..], ["B asks.", "B answered."]);
    let agent_a2 = Agent::builder()
        .model(ScriptedModel::from_fn(|req| {
            Ok(ModelResponse::text(format!(
                "{} messages",
                req.messages.len()
            )))
        }))
        .store(open().await)
        .build();
    let resp = agent_a2
        .run(AgentRequest::new("Again.").thread("t"))
        .await
        .unwrap();
    assert_eq!(resp.text, "8 messages");
    assert_history_valid(&open().await.load("t").await.unwrap().unwrap().messages);
}

#[tokio::test]
async fn text_postgres_cannot_hold_is_refused_and_file_bytes_are_kept() {
    let (open, _url) = postgres().await;
    let store = open().await;
    let err = store.save(&user_thread("a\0b", &["x"])).await.unwrap_err();
    assert!(err.to_string().contains("NUL"), "{err}");
    let mut t = user_thread("t", &["with \0 inside"]);
    FilesWritten::set(&mut t.data, "/bin", "nul \0 and ünïcode");
    let err = {
        let mut bad = t.clone();
        FilesWritten::set(&mut bad.data, "/a\0b", "x");
        store.save(&bad).await.unwrap_err()
    };
    assert!(err.to_string().contains("data key"), "{err}");
    assert!(store.list().await.is_empty(), "nothing was saved");
    store.save(&t).await.unwrap();
    assert_eq!(open().await.load("t").await.unwrap().unwrap(), t);
}

#[tokio::test]
async fn an_operation_blocked_in_the_database_times_out_and_the_store_recovers() {
    let (open, url) = postgres().await;
    let store = open()
        .await
        .with_operation_timeout(Duration::from_millis(500));
    store.save(&user_thread("t", &["a"])).await.unwrap();

    // Another session locks the threads table: every operation of the store waits on it.
    let (blocker, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    blocker
        .batch_execute("BEGIN; LOCK TABLE tower_agent_threads IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    // The lock is held until the test lets it go: the load ends at its timeout or never.
    let err = support::within("the blocked load", store.load("t"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("took longer than"), "{err}");
    let err = store
        .save(&user_thread("t", &["a", "b"]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("took longer than"), "{err}");

    // Released: the store works again, on fresh connections, and nothing was half written.
    blocker.batch_execute("ROLLBACK").await.unwrap();
    drop(blocker);
    let _ = connection.await;
    assert_eq!(texts(&store.load("t").await.unwrap().unwrap()), ["a"]);
    store.save(&user_thread("t", &["c"])).await.unwrap();
    assert_eq!(
        texts(&open().await.load("t").await.unwrap().unwrap()),
        ["c"]
    );
}

// ===== group commit (issue 16, target 3) =====

/// Another session that holds a table (`ACCESS EXCLUSIVE`) until released: every
/// transaction that writes it waits.
struct TableLock {
    client: tokio_postgres::Client,
    connection: tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
}

impl TableLock {
    async fn take(url: &str, table: &str) -> Self {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let connection = tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
            ))
            .await
            .unwrap();
        TableLock { client, connection }
    }

    async fn release(self) {
        self.client.batch_execute("ROLLBACK").await.unwrap();
        drop(self.client);
        let _ = self.connection.await;
    }
}

/// Waits (at most [`PATIENCE`](support::PATIENCE)) until a session of the database of `url`
/// waits for a lock: the
/// store's transaction is blocked on a [`TableLock`].
async fn a_save_waits_for_the_lock(url: &str) {
    let started = std::time::Instant::now();
    loop {
        let waiting = pg::column(
            url,
            "SELECT count(*)::text FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .await;
        if waiting[0].as_deref() != Some("0") {
            return;
        }
        assert!(
            started.elapsed() < support::PATIENCE,
            "no save ever waited for the table lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many transactions wrote the thread rows (their distinct `xmin`).
async fn transactions_that_wrote_threads(url: &str) -> usize {
    pg::column(
        url,
        "SELECT count(DISTINCT xmin::text)::text FROM tower_agent_threads",
    )
    .await[0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saves_in_flight_together_are_committed_in_few_transactions() {
    // 200 saves of distinct threads at once, while the first transaction of each writer task
    // waits on a lock: all the others queue meanwhile, and go in one transaction per writer
    // once it is released. One transaction per save (200) without the group commit.
    const SAVES: usize = 200;
    let (open, url) = postgres().await;
    let store = open().await;
    let lock = TableLock::take(&url, "tower_agent_threads").await;
    let threads: Vec<Thread> = (0..SAVES)
        .map(|i| user_thread(&format!("t{i}"), &["question", &format!("answer {i}")]))
        .collect();
    // Every save is polled (queued) at once; the lock is released once one waits on it.
    let saves = futures_util::future::join_all(threads.iter().map(|t| store.save(t)));
    let (results, ()) = tokio::join!(saves, async {
        a_save_waits_for_the_lock(&url).await;
        lock.release().await;
    });
    for result in results {
        result.unwrap();
    }
    let transactions = transactions_that_wrote_threads(&url).await;
    assert!(
        transactions <= 2 * WRITERS,
        "{SAVES} saves in flight took {transactions} transactions"
    );
    // Each save is whole, with its own revision, and the store goes on appending.
    let other = open().await;
    for (i, thread) in threads.iter().enumerate() {
        assert_eq!(
            &other.load(&thread.id).await.unwrap().unwrap(),
            thread,
            "t{i}"
        );
    }
    let revisions = pg::column(
        &url,
        "SELECT count(DISTINCT revision)::text FROM tower_agent_threads",
    )
    .await;
    assert_eq!(revisions, [Some(SAVES.to_string())]);
    let mut grown = threads[7].clone();
    grown.messages.push(Message::user("more"));
    store.save(&grown).await.unwrap();
    assert_eq!(other.load("t7").await.unwrap().unwrap(), grown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_records_in_flight_together_are_committed_in_few_transactions() {
    // The same for the tool-call journal: 200 calls started at once (then finished), while
    // the first transaction waits on a lock of the journal table.
    const CALLS: usize = 200;
    let (open, url) = postgres().await;
    let store = open().await;
    let journal = store.journal().unwrap();
    let calls: Vec<tower_agent::message::ToolCall> = (0..CALLS)
        .map(|i| tower_agent::message::ToolCall {
            id: format!("call_{i}"),
            name: "echo".into(),
            arguments: json!({ "i": i }),
        })
        .collect();
    let lock = TableLock::take(&url, "tower_agent_journal").await;
    let started = futures_util::future::join_all(calls.iter().map(|c| journal.started("t", c)));
    let (results, ()) = tokio::join!(started, async {
        a_save_waits_for_the_lock(&url).await;
        lock.release().await;
    });
    for result in results {
        result.unwrap();
    }
    let transactions: usize = pg::column(
        &url,
        "SELECT count(DISTINCT xmin::text)::text FROM tower_agent_journal",
    )
    .await[0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        transactions <= 2 * WRITERS,
        "{CALLS} records took {transactions} transactions"
    );
    let outputs: Vec<_> = calls
        .iter()
        .map(|c| tower_agent::message::ToolOutput::text(c.id.clone(), "done"))
        .collect();
    let finished = calls
        .iter()
        .zip(&outputs)
        .map(|(c, o)| journal.finished("t", c, o));
    for result in futures_util::future::join_all(finished).await {
        result.unwrap();
    }
    let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
    let entries = open()
        .await
        .journal()
        .unwrap()
        .entries("t", &ids)
        .await
        .unwrap();
    assert_eq!(entries.len(), CALLS);
    assert_eq!(
        pg::column(
            &url,
            "SELECT count(*)::text FROM tower_agent_journal WHERE output IS NOT NULL"
        )
        .await,
        [Some(CALLS.to_string())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saves_past_the_queue_wait_for_room_and_time_out_without_writing() {
    // The writers are stuck on a lock; 5,000 saves (more than the 4,096 the queues hold)
    // with a 2 s timeout. Each answers with a timeout error (queued, or waiting for room in
    // a full queue), none hangs, and nothing of them is written once the lock is released.
    let (open, url) = postgres().await;
    let store = open().await.with_operation_timeout(Duration::from_secs(2));
    let lock = TableLock::take(&url, "tower_agent_threads").await;
    let threads: Vec<Thread> = (0..tower_agent::store::postgres::SAVE_QUEUE + 904)
        .map(|i| user_thread(&format!("t{i}"), &["q"]))
        .collect();
    let results = tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(threads.iter().map(|t| store.save(t))),
    )
    .await
    .expect("every save answered");
    for result in results {
        let err = result.unwrap_err().to_string();
        // Timed out in the queue or in the database; or, on a loaded machine, before the
        // writer's connection was even made.
        assert!(
            err.contains("took longer than 2s") || err.contains("no connection in time"),
            "{err}"
        );
    }
    lock.release().await;
    assert!(open().await.list_threads().await.unwrap().is_empty());
    store.save(&threads[0]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_save_fails_alone_and_the_rest_of_its_batch_is_written() {
    // One batch: 50 good saves, one the server refuses (a CHECK constraint the test adds),
    // one that lost its compare-and-swap. Each caller gets its own result.
    let (open, url) = postgres().await;
    let (store, other) = (open().await, open().await);
    store.save(&user_thread("stale", &["a"])).await.unwrap();
    let mut theirs = other.load("stale").await.unwrap().unwrap();
    theirs.messages.push(Message::user("theirs"));
    other.save(&theirs).await.unwrap();
    pg::sql(
        &url,
        "ALTER TABLE tower_agent_messages ADD CONSTRAINT no_poison CHECK (body NOT LIKE '%poison%')",
    )
    .await;

    let mut threads: Vec<Thread> = (0..50)
        .map(|i| user_thread(&format!("good{i}"), &["fine"]))
        .collect();
    threads.push(user_thread("poisoned", &["poison"]));
    threads.push(user_thread("stale", &["a", "mine"]));
    let lock = TableLock::take(&url, "tower_agent_threads").await;
    let saves = futures_util::future::join_all(threads.iter().map(|t| store.save(t)));
    let (results, ()) = tokio::join!(saves, async {
        a_save_waits_for_the_lock(&url).await;
        lock.release().await;
    });
    let fresh = open().await;
    for (thread, result) in threads.iter().zip(&results) {
        match thread.id.as_str() {
            "poisoned" => {
                let err = result.as_ref().unwrap_err().to_string();
                assert!(err.contains("no_poison"), "{err}");
                assert!(fresh.load("poisoned").await.unwrap().is_none());
            }
            "stale" => {
                let err = result.as_ref().unwrap_err();
                assert!(Conflict::find(&**err).is_some(), "{err}");
                assert_eq!(fresh.load("stale").await.unwrap().unwrap(), theirs);
            }
            id => {
                result.as_ref().unwrap();
                assert_eq!(&fresh.load(id).await.unwrap().unwrap(), thread);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_mid_batch_fails_its_saves_and_the_store_goes_on() {
    // The writer's transaction waits on a lock with saves in it; its backend is terminated
    // (`pg_terminate_backend`, as a restarted server or a network cut does). Those saves fail
    // with an error naming the server, none hangs, none is half written, and the saves
    // queued behind them are written on a new connection.
    const SAVES: usize = 100;
    let (open, url) = postgres().await;
    let store = open().await;
    let lock = TableLock::take(&url, "tower_agent_threads").await;
    let threads: Vec<Thread> = (0..SAVES)
        .map(|i| user_thread(&format!("t{i}"), &["q", "a"]))
        .collect();
    let saves = futures_util::future::join_all(threads.iter().map(|t| store.save(t)));
    let (results, ()) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(saves, async {
            a_save_waits_for_the_lock(&url).await;
            pg::sql(
                &url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .await;
            lock.release().await;
        })
    })
    .await
    .expect("every save answered");
    let fresh = open().await;
    let mut failed = 0;
    for (thread, result) in threads.iter().zip(&results) {
        let stored = fresh.load(&thread.id).await.unwrap();
        match result {
            Ok(()) => assert_eq!(stored.as_ref(), Some(thread)),
            Err(e) => {
                failed += 1;
                assert!(e.to_string().contains("postgres thread store"), "{e}");
                assert!(stored.is_none(), "{}: half written", thread.id);
            }
        }
    }
    assert!(failed >= 1, "the terminated transaction failed no save");
    // The store goes on: the failed threads are saved now.
    for thread in &threads {
        store.save(thread).await.unwrap();
    }
    assert_eq!(fresh.list_threads().await.unwrap().len(), SAVES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saves_to_a_database_that_went_away_fail_every_caller_and_recover() {
    // The database stops taking connections and its sessions are terminated (what callers
    // see of a dead server): 200 saves in flight all fail with an error, none hangs; once it
    // is back, the store saves again.
    let (open, url) = postgres().await;
    let store = open().await;
    store.save(&user_thread("before", &["a"])).await.unwrap();
    let db = url.rsplit("dbname=").next().unwrap().to_owned();
    let server = tokio::task::spawn_blocking(pg::server).await.unwrap();
    let admin = server.url("postgres");
    pg::sql(
        &admin,
        &format!(
            "ALTER DATABASE {db} ALLOW_CONNECTIONS false;
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'"
        ),
    )
    .await;

    let threads: Vec<Thread> = (0..200)
        .map(|i| user_thread(&format!("t{i}"), &["q"]))
        .collect();
    let results = tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(threads.iter().map(|t| store.save(t))),
    )
    .await
    .expect("every save answered");
    for result in results {
        let err = result.unwrap_err().to_string();
        assert!(err.contains("postgres thread store"), "{err}");
    }

    pg::sql(
        &admin,
        &format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"),
    )
    .await;
    for thread in &threads {
        store.save(thread).await.unwrap();
    }
    assert_eq!(open().await.list_threads().await.unwrap().len(), 201);
}

// ===== migrations and errors =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_create_the_schema_once() {
    let url = pg::database().await;
    let connects = (0..8).map(|_| {
        let url = url.clone();
        tokio::spawn(async move { Postgres::connect(&url).await })
    });
    for store in futures_util::future::join_all(connects).await {
        store.unwrap().unwrap();
    }
    assert_eq!(
        pg::column(&url, "SELECT version::text FROM tower_agent_schema").await,
        [Some(
            tower_agent::store::postgres::SCHEMA_VERSION.to_string()
        )]
    );
    let tables = pg::column(
        &url,
        "SELECT tablename::text FROM pg_tables WHERE tablename LIKE 'tower_agent_%' ORDER BY 1",
    )
    .await;
    assert_eq!(
        tables,
        [
            "tower_agent_data",
            "tower_agent_journal",
            "tower_agent_messages",
            "tower_agent_schema",
            "tower_agent_threads"
        ]
        .map(|t| Some(t.to_owned()))
    );
}

#[tokio::test]
async fn a_newer_schema_is_refused_and_left_untouched() {
    let url = pg::database().await;
    let store = Postgres::connect(&url).await.unwrap();
    store.save(&user_thread("t", &["kept"])).await.unwrap();
    let newer = tower_agent::store::postgres::SCHEMA_VERSION + 1;
    pg::sql(
        &url,
        &format!("UPDATE tower_agent_schema SET version = {newer}"),
    )
    .await;

    let err = Postgres::connect(&url).await.unwrap_err();
    assert!(err.is_too_new(), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("schema version is {newer}")),
        "{text}"
    );
    assert!(text.contains("upgrade tower-agent"), "{text}");
    assert_eq!(
        pg::column(&url, "SELECT version::text FROM tower_agent_schema").await,
        [Some(newer.to_string())]
    );
    assert_eq!(
        pg::column(&url, "SELECT body FROM tower_agent_messages")
            .await
            .len(),
        1
    );
}

fn assert_names(err: &ConnectError, host: &str, db: &str) {
    let text = err.to_string();
    assert!(text.contains(host), "no host in: {text}");
    assert!(text.contains(db), "no database in: {text}");
    assert!(!text.contains("s3cr3t"), "the password in: {text}");
    assert!(
        !format!("{err:?}").contains("s3cr3t"),
        "the password in: {err:?}"
    );
}

#[tokio::test]
async fn connect_errors_name_the_server_and_hide_the_password() {
    // A bad URL.
    let err = Postgres::connect("postgresql://ada:s3cr3t@db.internal:notaport/agents")
        .await
        .unwrap_err();
    assert!(err.is_bad_url(), "{err:?}");
    assert_names(&err, "db.internal", "agents");

    // Nobody listening.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("postgresql://ada:s3cr3t@127.0.0.1:{port}/agents");
    let err = Postgres::connect(&url).await.unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert_names(&err, &format!("127.0.0.1:{port}"), "`agents`");
    assert!(err.to_string().contains("refused"), "{err}");

    // A server that accepts and never answers: the connect timeout of the URL.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("postgresql://ada:s3cr3t@127.0.0.1:{port}/agents?connect_timeout=1");
    let started = std::time::Instant::now();
    let err = Postgres::connect(&url).await.unwrap_err();
    // The URL's 1 s, not the default 10 s (a wide margin: a busy machine is slow).
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    assert!(err.is_connect(), "{err:?}");
    assert_names(&err, &format!("127.0.0.1:{port}"), "`agents`");

    // The real server, a database that does not exist.
    let server = tokio::task::spawn_blocking(pg::server).await.unwrap();
    let err = Postgres::connect(&format!("{} password=s3cr3t", server.url("nope")))
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert_names(&err, &server.root.display().to_string(), "`nope`");
    assert!(err.to_string().contains("does not exist"), "{err}");
}

// ===== run leases across replicas (issue 15, item 2) =====

/// Takes the lease of `id` through `store`, retrying while it is busy (at most
/// [`PATIENCE`](support::PATIENCE)).
async fn lease_when_free(store: &Postgres, id: &str) -> tower_agent::store::Lease {
    let started = std::time::Instant::now();
    loop {
        match store.lease(id).await {
            Ok(lease) => return lease,
            Err(e) if e.is::<ThreadBusy>() && started.elapsed() < support::PATIENCE => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no lease within {:?}: {e}", support::PATIENCE),
        }
    }
}

#[tokio::test]
async fn a_thread_leased_by_one_replica_is_busy_for_another_until_released() {
    let (open, _url) = postgres().await;
    let (a, b) = (open().await, open().await);
    let lease = a.lease("t").await.unwrap();
    let err = b.lease("t").await.unwrap_err();
    let busy = err.downcast_ref::<ThreadBusy>().expect("ThreadBusy");
    assert_eq!(busy.thread(), "t");
    assert!(
        err.to_string().contains("already going on thread `t`"),
        "{err}"
    );
    // Same store, same thread: busy too; other threads are free.
    assert!(a.lease("t").await.unwrap_err().is::<ThreadBusy>());
    let other = b.lease("u").await.unwrap();

    // Released by dropping: the next lease is given without waiting for the holder's
    // connection to close.
    drop(lease);
    let again = b.lease("t").await.expect("free once released");
    assert!(a.lease("t").await.unwrap_err().is::<ThreadBusy>());
    drop((again, other));
}

/// Environment of the child role below.
const CHILD_URL: &str = "TOWER_AGENT_TEST_CHILD_PG_URL";

/// Child role: takes the lease of thread `t`, says so, and sleeps until killed.
#[tokio::test]
#[ignore = "a child role: run by its parent test through `rerun`"]
async fn child_holds_a_lease() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let store = Postgres::connect(&url).await.unwrap();
    let _lease = store.lease("t").await.unwrap();
    println!("LEASED=1");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_with_sigkill_releases_its_lease() {
    let (open, url) = postgres().await;
    let mut cmd = support::rerun(&support::test_name!("child_holds_a_lease"));
    cmd.env(CHILD_URL, &url);
    let (mut child, _) = support::spawn_reporting(cmd, "LEASED").await;
    let store = open().await;
    assert!(store.lease("t").await.unwrap_err().is::<ThreadBusy>());

    child.0.kill().unwrap(); // SIGKILL: no destructor runs, no unlock is sent
    child.0.wait().unwrap();
    let started = std::time::Instant::now();
    let _lease = lease_when_free(&store, "t").await;
    println!("released {:?} after the kill", started.elapsed());
}

/// An HTTP replica on 127.0.0.1 over `agent` (it runs until the test ends).
async fn replica(agent: Agent) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let serve = tower_agent::server::serve(listener, agent, std::future::pending::<()>());
    let url = format!("http://{}", serve.local_addr().unwrap());
    tokio::spawn(std::future::IntoFuture::into_future(serve));
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_http_replicas_run_one_thread_one_at_a_time() {
    let (open, _url) = postgres().await;
    let started = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let held = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let agent = |store: Postgres| {
        let (started, release, held) = (started.clone(), release.clone(), held.clone());
        let hold = tool_fn("hold", "holds the first run", any_object(), move |_, _| {
            let (started, release, held) = (started.clone(), release.clone(), held.clone());
            async move {
                if !held.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    started.notify_one();
                    release.notified().await;
                }
                Ok::<_, BoxError>("held")
            }
        });
        Agent::builder()
            .model(
                ScriptedModel::new()
                    .tool_call("hold", json!({}))
                    .text("done")
                    .per_run(),
            )
            .tool(hold)
            .store(store)
            .build()
    };
    let one = replica(agent(open().await)).await;
    let two = replica(agent(open().await)).await;
    let http = reqwest::Client::new();
    let post = |base: &str| {
        http.post(format!("{base}/threads/t/runs"))
            .json(&json!({"prompt": "go"}))
            .send()
    };

    let first = tokio::spawn(post(&one));
    support::within("the first run's start", started.notified()).await;
    // The other replica refuses the thread while the first run goes on; so does the first.
    for base in [&two, &one] {
        let refused = post(base).await.unwrap();
        assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);
        let body: serde_json::Value = refused.json().await.unwrap();
        assert!(
            body["error"].as_str().unwrap().contains("already going"),
            "{body}"
        );
    }
    release.notify_one();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), reqwest::StatusCode::OK);

    // Once it ended, the other replica runs the thread, continuing it.
    let second = post(&two).await.unwrap();
    assert_eq!(second.status(), reqwest::StatusCode::OK);
    let thread = open().await.load("t").await.unwrap().unwrap();
    assert_eq!(thread.messages.len(), 8); // (user, call, result, answer) × 2
    assert_history_valid(&thread.messages);
}

// ===== two server processes on one database =====

/// How long the child replicas' tool takes: long enough that a run on a thread is still going
/// when the other replica is asked for one (which waits 250 ms for a busy thread).
const NAP_MS: u64 = 1000;

/// Child role: an HTTP replica on 127.0.0.1 over the database of `CHILD_URL` (a run: one call
/// of the tool `nap`, then an answer), printing its address; it serves until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child role: run by its parent test through `rerun`"]
async fn child_replica() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let nap = tool_fn("nap", "takes a while", any_object(), |_, _| async {
        tokio::time::sleep(Duration::from_millis(NAP_MS)).await;
        Ok::<_, BoxError>("rested")
    });
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("nap", json!({}))
                .text("done")
                .per_run(),
        )
        .tool(nap)
        .store(Postgres::connect(&url).await.unwrap())
        .build();
    println!("REPLICA={}", replica(agent).await);
    std::future::pending::<()>().await;
}

/// Starts a replica process; its base URL.
async fn replica_process(db: &str) -> (support::Killed, String) {
    let mut cmd = support::rerun(&support::test_name!("child_replica"));
    cmd.env(CHILD_URL, db);
    support::spawn_reporting(cmd, "REPLICA").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_run_each_thread_one_at_a_time() {
    // 50 threads; for each, 4 rounds of two requests at once, one per replica process: in
    // each round exactly one runs and the other is refused with 409. 200 runs in all.
    const THREADS: usize = 50;
    const ROUNDS: usize = 4;
    let (open, db) = postgres().await;
    let ((_a, a), (_b, b)) = tokio::join!(replica_process(&db), replica_process(&db));
    let http = reqwest::Client::new();
    let threads = (0..THREADS).map(|t| {
        let (http, a, b) = (http.clone(), a.clone(), b.clone());
        tokio::spawn(async move {
            for round in 0..ROUNDS {
                let post = |base: &str| {
                    http.post(format!("{base}/threads/t{t}/runs"))
                        .json(&json!({"prompt": format!("round {round}")}))
                        .send()
                };
                let (x, y) = tokio::join!(post(&a), post(&b));
                let mut statuses = [x.unwrap().status(), y.unwrap().status()];
                statuses.sort();
                assert_eq!(
                    statuses,
                    [reqwest::StatusCode::OK, reqwest::StatusCode::CONFLICT],
                    "thread t{t}, round {round}"
                );
            }
        })
    });
    for thread in futures_util::future::join_all(threads).await {
        thread.unwrap();
    }
    let store = open().await;
    assert_eq!(store.list_threads().await.unwrap().len(), THREADS);
    for t in 0..THREADS {
        let thread = store.load(&format!("t{t}")).await.unwrap().unwrap();
        assert_history_valid(&thread.messages);
        let prompts: Vec<String> = thread
            .messages
            .iter()
            .filter(|m| m.role == tower_agent::message::Role::User)
            .map(|m| m.text().into_owned())
            .collect();
        let expected: Vec<String> = (0..ROUNDS).map(|r| format!("round {r}")).collect();
        assert_eq!(prompts, expected, "thread t{t}");
        assert_eq!(thread.messages.len(), 4 * ROUNDS, "thread t{t}");
    }
}

/// A save past the store's cache (more threads saved since than it remembers) appends the
/// new messages like any step: the history carries the store's mark of what it stored, so
/// the stored rows are not read back and compared. Shown with a stored row changed behind
/// the store's back without a new revision: a save that read the rows would rewrite it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_past_the_cache_appends_without_reading_the_stored_rows() {
    let (open, url) = postgres().await;
    let store = open().await;
    let texts: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut big = user_thread("big", &refs);
    store.save(&big).await.unwrap();
    pg::sql(
        &url,
        "UPDATE tower_agent_messages SET body = (SELECT body FROM tower_agent_messages
           WHERE thread_id = 'big' AND seq = 1) WHERE thread_id = 'big' AND seq = 0",
    )
    .await;
    let before = row_versions(&url, "big").await;

    // More threads saved since than the cache remembers (1,024).
    let saves = (0..1100).map(|i| {
        let store = store.clone();
        async move { store.save(&user_thread(&format!("small{i}"), &["x"])).await }
    });
    for result in futures_util::future::join_all(saves).await {
        result.unwrap();
    }

    big.messages.push(Message::assistant("step"));
    store.save(&big).await.unwrap();
    let after = row_versions(&url, "big").await;
    assert_eq!(after.len(), 1001);
    assert_eq!(
        after[..1000],
        before[..],
        "the stored rows were read and rewritten"
    );

    // A history the store did not mark (built anew, same messages): compared, so the
    // changed row is found and rewritten.
    let mut fresh = user_thread("big", &refs);
    fresh.messages.push(Message::assistant("step"));
    fresh.messages.push(Message::user("next"));
    let other = open().await;
    other.save(&fresh).await.unwrap();
    let compared = row_versions(&url, "big").await;
    assert_eq!(compared.len(), 1002);
    assert_ne!(
        compared[0], before[0],
        "an unmarked history was not compared"
    );
    assert_eq!(other.load("big").await.unwrap().unwrap(), fresh);
}

/// A load is one statement: a thread with more than ten messages comes back in their order
/// (positions compared as numbers), with its files and todos, in a store that never saw it;
/// a stored row that does not parse fails the load with an error naming the thread and the
/// row, and a thread that does not exist (or only its message rows do) loads as none.
#[tokio::test]
async fn a_load_reads_the_whole_thread_in_order_and_names_a_bad_row() {
    let (open, url) = postgres().await;
    let wanted: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let mut thread = user_thread("whole", &refs);
    FilesWritten::set(&mut thread.data, "/z", "last");
    FilesWritten::set(&mut thread.data, "/a", "first");
    FilesWritten::set(&mut thread.data, "/m/é", "ünïcode");
    Todos::set(
        &mut thread.data,
        vec![tower_agent::builtins::todo::Todo::new("1", "ordered")],
    );
    open().await.save(&thread).await.unwrap();

    let fresh = open().await;
    let loaded = fresh.load("whole").await.unwrap().expect("the thread");
    assert_eq!(texts(&loaded), wanted);
    assert_eq!(loaded.messages, thread.messages);
    assert_eq!(
        FilesWritten::of(&loaded.data),
        FilesWritten::of(&thread.data)
    );
    assert_eq!(Todos::of(&loaded.data), Todos::of(&thread.data));
    assert_eq!(loaded.data, thread.data);
    assert!(fresh.load("absent").await.unwrap().is_none());
    // Rows of messages without their thread's row (a delete left half done): no thread.
    pg::sql(
        &url,
        "INSERT INTO tower_agent_messages (thread_id, seq, body)
           SELECT 'orphan', seq, body FROM tower_agent_messages WHERE thread_id = 'whole'",
    )
    .await;
    assert!(fresh.load("orphan").await.unwrap().is_none());

    pg::sql(
        &url,
        "UPDATE tower_agent_messages SET body = '{not json' WHERE thread_id = 'whole' AND seq = 11",
    )
    .await;
    let err = open().await.load("whole").await.unwrap_err().to_string();
    assert!(
        err.contains("thread `whole`: bad message 11"),
        "the error names the thread and the row: {err}"
    );

    pg::sql(
        &url,
        "UPDATE tower_agent_messages SET body = (SELECT body FROM tower_agent_messages
           WHERE thread_id = 'whole' AND seq = 10) WHERE thread_id = 'whole' AND seq = 11;
         UPDATE tower_agent_data SET value = '\"cut'
           WHERE thread_id = 'whole' AND key = 'tower_agent.files//m/é'",
    )
    .await;
    let err = open().await.load("whole").await.unwrap_err().to_string();
    assert!(
        err.contains("thread `whole`: bad data `tower_agent.files//m/é`"),
        "the error names the thread and the key: {err}"
    );
}
