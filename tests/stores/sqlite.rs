//! `store::Sqlite` end to end: the scenarios every store passes (`support::stores`: threads
//! survive the store, saves are per step, concurrent runs on different threads), a file that
//! is not a database is refused and left as it was, several writers on one file.

use crate::support;

use std::{path::Path, sync::Arc, time::Duration};

use serde_json::json;
use tower_agent::{
    builtins::{
        filesystem::FilesWritten,
        todo::{Todo, Todos},
    },
    store::{Sqlite, Thread, ThreadStore},
};

use support::{
    passed, rerun, rerun_after, rerun_reachable,
    stores::{Open, user_thread},
};

/// A database file in a fresh directory, and how to open a store on it.
async fn sqlite() -> (Open<Sqlite>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let open: Open<Sqlite> = Arc::new(move || {
        let path = path.clone();
        Box::pin(async move { Sqlite::open(&path).unwrap() })
    });
    (open, dir)
}

// Threads survive the store and continue, appends and rewrites, stores on one file see each
// other's writes, concurrent runs on different threads, a dropped run keeps its finished
// steps: the scenarios `Postgres` passes too (`support::stores`).
crate::store_scenarios!(shared, sqlite());

fn siblings(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
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
    assert_eq!(version, 5);
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

// ===== two writers on one file (issue 10, item 3) =====

/// The texts of the thread `id` as a fresh store on `path` reads it (`None`: no thread).
async fn stored_texts(path: &Path, id: &str) -> Option<Vec<String>> {
    let thread = Sqlite::open(path).unwrap().load(id).await.unwrap()?;
    Some(
        thread
            .messages
            .iter()
            .map(|m| m.text().into_owned())
            .collect(),
    )
}

#[tokio::test]
async fn stale_writer_never_appends_onto_a_recreated_thread() {
    // A saves [a1, a2]; B deletes the thread and saves [b1, b2]; A saves [a1..a4]. The old
    // store took B's thread (same per-thread revision 1, same length) for the one it had
    // saved and appended: [b1, b2, a3, a4], and B's file next to A's.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let (a, b) = (Sqlite::open(&path).unwrap(), Sqlite::open(&path).unwrap());

    let mut mine = user_thread("t", &["a1", "a2"]);
    FilesWritten::set(&mut mine.data, "/a.md", "a");
    Todos::set(&mut mine.data, vec![Todo::new("1", "a's todo")]);
    a.save(&mine).await.unwrap();

    b.delete("t").await.unwrap();
    let mut theirs = user_thread("t", &["b1", "b2"]);
    FilesWritten::set(&mut theirs.data, "/b.md", "b");
    b.save(&theirs).await.unwrap();

    mine.messages.extend([
        tower_agent::message::Message::user("a3"),
        tower_agent::message::Message::user("a4"),
    ]);
    a.save(&mine).await.unwrap();

    // Save means "this is the thread now": A's thread, exactly.
    let stored = Sqlite::open(&path)
        .unwrap()
        .load("t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored_texts(&path, "t").await.unwrap(),
        ["a1", "a2", "a3", "a4"]
    );
    assert_eq!(stored, mine);
    // B, whose cache is now stale too, sees A's thread and does not append onto it either.
    theirs
        .messages
        .push(tower_agent::message::Message::user("b3"));
    b.save(&theirs).await.unwrap();
    assert_eq!(
        Sqlite::open(&path)
            .unwrap()
            .load("t")
            .await
            .unwrap()
            .unwrap(),
        theirs
    );
}

/// Environment of the child-process roles below (they do nothing without it).
const CHILD_DB: &str = "TOWER_AGENT_TEST_CHILD_DB";
const CHILD_WRITER: &str = "TOWER_AGENT_TEST_CHILD_WRITER";

/// Child role: B of the sequence above, in its own process.
#[tokio::test]
#[ignore = "a child role: run by its parent test through `rerun`"]
async fn child_deletes_and_recreates() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let b = Sqlite::open(&path).unwrap();
    b.delete("t").await.unwrap();
    b.save(&user_thread("t", &["b1", "b2"])).await.unwrap();
}

#[tokio::test]
async fn stale_writer_in_another_process_never_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let a = Sqlite::open(&path).unwrap();
    let mut mine = user_thread("t", &["a1", "a2"]);
    a.save(&mine).await.unwrap();

    let out = rerun(&support::test_name!("child_deletes_and_recreates"))
        .env(CHILD_DB, &path)
        .output()
        .unwrap();
    passed(&out, "child_deletes_and_recreates");
    assert_eq!(stored_texts(&path, "t").await.unwrap(), ["b1", "b2"]);

    mine.messages.extend([
        tower_agent::message::Message::user("a3"),
        tower_agent::message::Message::user("a4"),
    ]);
    a.save(&mine).await.unwrap();
    assert_eq!(
        stored_texts(&path, "t").await.unwrap(),
        ["a1", "a2", "a3", "a4"]
    );
}

/// How many saves each process makes in the concurrent test.
const HAMMER_SAVES: usize = 150;

/// Child role: grows its own thread `t` ("w-0", "w-1", …) one message per save, deleting it
/// and starting over every third save (so that the old per-thread revisions collide).
#[tokio::test]
#[ignore = "a child role: run by its parent test through `rerun`"]
async fn child_hammers() {
    let (Ok(path), Ok(writer)) = (std::env::var(CHILD_DB), std::env::var(CHILD_WRITER)) else {
        return;
    };
    let store = Sqlite::open(&path).unwrap();
    let mut thread = Thread::new("t");
    for i in 0..HAMMER_SAVES {
        if i % 3 == 2 {
            store.delete("t").await.unwrap();
            thread = Thread::new("t");
        }
        let n = thread.messages.len();
        thread
            .messages
            .push(tower_agent::message::Message::user(format!("{writer}-{n}")));
        FilesWritten::set(&mut thread.data, "/writer", &writer);
        store.save(&thread).await.unwrap();
    }
}

/// A thread as one writer saved it: `w-0 … w-(n-1)` of a single writer, and its file.
fn assert_one_writer(thread: &Thread) {
    let texts: Vec<String> = thread
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    let Some(first) = texts.first() else {
        return;
    };
    let writer = first.split('-').next().unwrap();
    let expected: Vec<String> = (0..texts.len()).map(|i| format!("{writer}-{i}")).collect();
    assert_eq!(texts, expected, "a mix of two writers' threads");
    assert_eq!(
        FilesWritten::of(&thread.data).len(),
        1,
        "{:?}",
        FilesWritten::of(&thread.data)
    );
    assert_eq!(FilesWritten::of(&thread.data)["/writer"].as_ref(), writer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_saving_one_thread_never_mix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let reader = Sqlite::open(&path).unwrap();
    let db = path.to_str().unwrap().to_owned();
    let writers: Vec<_> = ["x", "y"]
        .into_iter()
        .map(|w| {
            rerun(&support::test_name!("child_hammers"))
                .env(CHILD_DB, &db)
                .env(CHILD_WRITER, w)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let done = tokio::task::spawn_blocking(move || {
        writers
            .into_iter()
            .map(|w| w.wait_with_output().unwrap())
            .collect::<Vec<_>>()
    });
    // Every committed state a third connection sees is one writer's thread.
    let mut seen = 0;
    while !done.is_finished() {
        if let Some(thread) = reader.load("t").await.unwrap() {
            assert_one_writer(&thread);
            seen += 1;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for out in done.await.unwrap() {
        passed(&out, "child_hammers");
    }
    let last = reader.load("t").await.unwrap().unwrap();
    assert_one_writer(&last);
    assert!(seen > 0);
}

#[tokio::test]
async fn version_1_database_is_upgraded() {
    // A database as version 1 of the schema wrote it: per-thread revisions.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE threads (
                id TEXT PRIMARY KEY NOT NULL,
                revision INTEGER NOT NULL,
                message_count INTEGER NOT NULL,
                todos TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL
            );
            CREATE INDEX threads_updated_at ON threads (updated_at);
            CREATE TABLE messages (
                thread_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (thread_id, seq)
            );
            CREATE TABLE files (
                thread_id TEXT NOT NULL,
                path TEXT NOT NULL,
                content TEXT NOT NULL,
                PRIMARY KEY (thread_id, path)
            );
            INSERT INTO threads VALUES ('old', 7, 1, '[]', 1, 1);
            INSERT INTO messages VALUES
                ('old', 0, '{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}');
            PRAGMA application_id = 1952540532;
            PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let a = Sqlite::open(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 5);
    // The counter starts past every revision the old schema gave.
    let last: i64 = conn
        .query_row("SELECT last FROM revisions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(last, 7);
    assert_eq!(stored_texts(&path, "old").await.unwrap(), ["hi"]);

    // The sequence of the first test, on the upgraded file.
    let b = Sqlite::open(&path).unwrap();
    let mut mine = a.load("old").await.unwrap().unwrap();
    mine.messages.push(tower_agent::message::Message::user("a"));
    a.save(&mine).await.unwrap();
    b.delete("old").await.unwrap();
    b.save(&user_thread("old", &["b1", "b2"])).await.unwrap();
    mine.messages
        .push(tower_agent::message::Message::user("a2"));
    a.save(&mine).await.unwrap();
    assert_eq!(stored_texts(&path, "old").await.unwrap(), ["hi", "a", "a2"]);
    let revision: i64 = conn
        .query_row("SELECT revision FROM threads WHERE id = 'old'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(revision, 10);
}

// ===== open errors name the file and the cause (issue 10, item 7) =====

#[tokio::test]
async fn truncated_database_is_named_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    {
        let store = Sqlite::open(&path).unwrap();
        for i in 0..20 {
            let text = format!("{i}").repeat(2000);
            store
                .save(&user_thread(&format!("t{i}"), &[&text]))
                .await
                .unwrap();
        }
    } // the last connection checkpoints the WAL into the file
    let full = std::fs::read(&path).unwrap();
    assert!(full.len() > 16 * 4096, "{}", full.len());
    for keep in [50, 4096, full.len() / 2] {
        let name = format!("truncated-{keep}.db");
        let truncated = dir.path().join(&name);
        std::fs::write(&truncated, &full[..keep]).unwrap();
        let before = siblings(&truncated);

        let err = Sqlite::open(&truncated).expect_err(&name);
        let text = err.to_string();
        assert!(err.is_damaged(), "{name}: {err:?}");
        assert!(text.contains(&*truncated.to_string_lossy()), "{text}");
        assert!(text.contains("damaged SQLite database"), "{text}");
        assert!(text.contains("malformed"), "the cause: {text}");
        assert_eq!(std::fs::read(&truncated).unwrap(), full[..keep], "{name}");
        assert_eq!(siblings(&truncated), before, "{name}: nothing left behind");
    }
}

#[test]
fn missing_directory_or_file_as_parent_names_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("threads.db");
    let text = Sqlite::open(&missing).unwrap_err().to_string();
    assert!(text.contains(&*missing.to_string_lossy()), "{text}");
    assert!(text.contains("cannot create the file"), "{text}");
    assert!(text.contains("No such file or directory"), "{text}");

    // Fails for root too: the parent is a regular file.
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "notes").unwrap();
    let under_file = file.join("threads.db");
    let text = Sqlite::open(&under_file).unwrap_err().to_string();
    assert!(text.contains(&*under_file.to_string_lossy()), "{text}");
    assert!(text.contains("Not a directory"), "{text}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "notes");
}

/// A database file with one thread, made read-only (0444) in a read-only (0555) directory
/// that anybody may enter.
async fn read_only_database(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    let path = ro.join("threads.db");
    Sqlite::open(&path)
        .unwrap()
        .save(&user_thread("t", &["hi"]))
        .await
        .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Child role: prints the error of opening the database, or fails.
#[test]
#[ignore = "a child role: run by its parent test through `rerun`"]
fn child_opens() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let err = Sqlite::open(&path).expect_err("the file is read-only");
    println!("read_only={} error={err}", err.is_read_only());
}

#[tokio::test]
async fn read_only_file_names_the_file_and_the_cause() {
    // Root writes through permission bits, so as root the case runs in a child process of
    // an unprivileged user (nobody), for whom they hold. It runs this test binary from the
    // temp dir (nobody may not reach the build: the checkout may be in root's private home).
    let dir = tempfile::tempdir().unwrap();
    let path = read_only_database(dir.path()).await;
    let bytes = std::fs::read(&path).unwrap();
    let root = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&path).unwrap().uid() == 0
    };
    let text = if root {
        use std::os::unix::process::CommandExt;
        let out = rerun_reachable(dir.path(), &support::test_name!("child_opens"))
            .env(CHILD_DB, &path)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        passed(&out, "child_opens")
    } else {
        let err = Sqlite::open(&path).unwrap_err();
        format!("read_only={} error={err}", err.is_read_only())
    };
    assert!(text.contains("read_only=true"), "{text}");
    assert!(text.contains(&*path.to_string_lossy()), "{text}");
    assert!(text.contains("cannot be written (read-only)"), "{text}");
    assert!(text.contains("Permission denied"), "the cause: {text}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[tokio::test]
async fn read_only_file_system_names_the_file_and_the_cause() {
    // A read-only bind mount of the directory, in a private mount namespace of a child
    // process (`unshare`: a user namespace, so it needs no privilege): EROFS binds root too.
    let dir = tempfile::tempdir().unwrap();
    let path = read_only_database(dir.path()).await;
    let ro = path.parent().unwrap();
    let out = rerun_after(
        &["unshare", "--map-root-user", "--mount"],
        r#"mount --bind -o ro "$TOWER_AGENT_TEST_RO_DIR" "$TOWER_AGENT_TEST_RO_DIR""#,
        &support::test_name!("child_opens"),
    )
    .env("TOWER_AGENT_TEST_RO_DIR", ro)
    .env(CHILD_DB, &path)
    .output()
    .expect("unshare (util-linux) must be installed");
    let text = passed(&out, "child_opens");
    assert!(text.contains("read_only=true"), "{text}");
    assert!(text.contains(&*path.to_string_lossy()), "{text}");
    assert!(text.contains("Read-only file system"), "the cause: {text}");
}

// ===== run leases across processes =====

#[tokio::test]
async fn a_leased_thread_is_busy_for_every_store_on_the_file_until_released() {
    use tower_agent::store::ThreadBusy;
    let (open, _dir) = sqlite().await;
    let (a, b) = (open().await, open().await);
    let lease = a.lease("t").await.unwrap();
    let err = b.lease("t").await.unwrap_err();
    assert_eq!(
        err.downcast_ref::<ThreadBusy>()
            .expect("ThreadBusy")
            .thread(),
        "t"
    );
    // The same store, the same thread: busy too; another thread (any id) is free.
    assert!(a.lease("t").await.unwrap_err().is::<ThreadBusy>());
    let long = "x/".repeat(5_000);
    let other = b.lease(&long).await.unwrap();
    assert!(a.lease(&long).await.unwrap_err().is::<ThreadBusy>());
    drop(lease);
    let again = b.lease("t").await.expect("free once released");
    drop((again, other));
    // An in-memory database is one process's: every lease is given.
    let memory = Sqlite::memory().unwrap();
    let (_x, _y) = (
        memory.lease("t").await.unwrap(),
        memory.lease("t").await.unwrap(),
    );
}

/// Child role: takes the lease of thread `t` of the database `CHILD_DB`, says so, and sleeps
/// until killed.
#[tokio::test]
#[ignore = "a child role: run by its parent test through `rerun`"]
async fn child_holds_a_lease() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let store = Sqlite::open(&path).unwrap();
    let _lease = store.lease("t").await.unwrap();
    println!("LEASED=1");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_with_sigkill_releases_its_lease() {
    use tower_agent::store::ThreadBusy;
    let (open, dir) = sqlite().await;
    let mut cmd = rerun(&support::test_name!("child_holds_a_lease"));
    cmd.env(CHILD_DB, dir.path().join("threads.db"));
    let (mut child, _) = support::spawn_reporting(cmd, "LEASED").await;
    // Another process holds it: busy here.
    let store = open().await;
    assert!(store.lease("t").await.unwrap_err().is::<ThreadBusy>());
    // SIGKILL: no destructor runs; the kernel closes the file and drops the lock.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let lease = store.lease("t").await.expect("free once its holder died");
    drop(lease);
}

// ===== the thread data of a tool of the application's own =====

#[derive(serde::Serialize, serde::Deserialize, Default, Debug, PartialEq)]
struct Visits {
    count: u32,
    last: String,
}

impl tower_agent::store::Persisted for Visits {
    const KEY: &'static str = "tests.visits";
}

/// A tool that keeps a type of its own in the thread data, through the public API only.
fn visit_tool() -> impl tower_agent::tool::Tool {
    tower_agent::tool::tool_fn(
        "visit",
        "records a visit",
        support::any_object(),
        |args, ctx| async move {
            let mut visits = ctx.persisted::<Visits>()?.unwrap_or_default();
            visits.count += 1;
            visits.last = args["who"].as_str().unwrap_or_default().to_owned();
            ctx.persist(&visits)?;
            Ok(format!("visit {}", visits.count))
        },
    )
}

/// A tool's own type is restored from the thread when a run starts and saved with it: two
/// runs, each through a store opened again (another process), count two visits; the
/// database holds it as one row of `data`, under its key.
#[tokio::test]
async fn a_tools_own_persisted_type_is_kept_with_the_thread() {
    use tower_agent::{Agent, AgentRequest, model::ScriptedModel};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    for (who, said) in [("ada", "visit 1"), ("grace", "visit 2")] {
        let agent = Agent::builder()
            .model(
                ScriptedModel::new()
                    .tool_call("visit", json!({ "who": who }))
                    .text("ok"),
            )
            .tool(visit_tool())
            .store(Sqlite::open(&path).unwrap())
            .build();
        agent
            .run(AgentRequest::new("visit").thread("t"))
            .await
            .unwrap();
        let thread = Sqlite::open(&path)
            .unwrap()
            .load("t")
            .await
            .unwrap()
            .unwrap();
        assert!(thread.messages.iter().any(|m| m.text() == said), "{said}");
    }
    let thread = Sqlite::open(&path)
        .unwrap()
        .load("t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        thread.data.get::<Visits>().unwrap(),
        Some(Visits {
            count: 2,
            last: "grace".into()
        })
    );
    let value: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT value FROM data WHERE thread_id = 't' AND key = 'tests.visits'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&value).unwrap(),
        json!({"count": 2, "last": "grace"})
    );
}
