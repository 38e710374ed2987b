//! Databases the previous release wrote (SQLite schema 4, PostgreSQL schema 3: the todo list
//! in a column of the thread row, the files in a table of their own) open with this one and
//! migrate to the generic thread data (`store::data`) with nothing lost: messages, todos,
//! files (NUL, quotes, newlines and non-ASCII text included), pending and approved calls,
//! journal entries. The fixtures are the exact DDL of that release (`MIGRATIONS` of
//! src/store/sqlite.rs and src/store/postgres.rs at commit cb38763), filled with rows as it
//! wrote them. Then what the generic data keeps of the old economy: a save that changes no
//! data writes no data row, a step that edits one file of fifty writes one.

use crate::support;

use std::collections::BTreeMap;

use serde_json::json;
use tower_agent::{
    builtins::{
        filesystem::FilesWritten,
        todo::{Todo, TodoStatus, Todos},
    },
    event::PendingCall,
    message::{Message, ToolCall},
    store::{Persisted, Thread, ThreadStore},
};

/// The SQLite schema of the previous release (`user_version` 4), its four migrations as they
/// were.
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE_V4: &str = "CREATE TABLE threads (
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
    CREATE TABLE revisions (
        id INTEGER PRIMARY KEY NOT NULL CHECK (id = 0),
        last INTEGER NOT NULL
    );
    INSERT INTO revisions (id, last) SELECT 0, coalesce(max(revision), 0) FROM threads;
    ALTER TABLE threads ADD COLUMN pending TEXT NOT NULL DEFAULT '[]';
    CREATE TABLE journal (
        thread_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        output TEXT,
        PRIMARY KEY (thread_id, call_id)
    );
    PRAGMA application_id = 1952540532;
    PRAGMA user_version = 4;";

/// The PostgreSQL schema of the previous release at version 1 and 2 (the table of the schema
/// version as `connect` created it, then migrations 1 and 2 as they were).
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES_V2: &str = "CREATE TABLE tower_agent_schema (
        id int PRIMARY KEY CHECK (id = 0),
        version int NOT NULL
    );
    CREATE TABLE tower_agent_threads (
        id text PRIMARY KEY,
        revision bigint NOT NULL,
        message_count bigint NOT NULL,
        todos text NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
    );
    CREATE INDEX tower_agent_threads_updated_at ON tower_agent_threads (updated_at);
    CREATE TABLE tower_agent_messages (
        thread_id text NOT NULL,
        seq bigint NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE TABLE tower_agent_files (
        thread_id text NOT NULL,
        path text NOT NULL,
        content bytea NOT NULL,
        PRIMARY KEY (thread_id, path)
    );
    CREATE SEQUENCE tower_agent_revisions;
    ALTER TABLE tower_agent_threads ADD COLUMN pending text NOT NULL DEFAULT '[]';
    INSERT INTO tower_agent_schema (id, version) VALUES (0, 2);";

/// Migration 3 of the previous release (the journal), to go from [`POSTGRES_V2`] to its
/// schema 3.
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES_V3: &str = "CREATE TABLE tower_agent_journal (
        thread_id text NOT NULL,
        call_id text NOT NULL,
        tool text NOT NULL,
        arguments text NOT NULL,
        output text,
        PRIMARY KEY (thread_id, call_id)
    );
    UPDATE tower_agent_schema SET version = 3;";

/// The thread the old databases hold: a call waiting for approval and one approved, a todo
/// list, files.
struct Old {
    messages: Vec<Message>,
    todos: Vec<Todo>,
    files: BTreeMap<&'static str, &'static str>,
    pending: Vec<PendingCall>,
    approved: Vec<PendingCall>,
}

fn old() -> Old {
    let mut call = Message::assistant("Deploying.");
    for id in ["c1", "c2"] {
        call.tool_calls.push(ToolCall {
            id: id.into(),
            name: "deploy".into(),
            arguments: json!({"env": id}),
        });
    }
    let waiting = |id: &str| -> PendingCall {
        serde_json::from_value(json!({
            "id": id,
            "name": "deploy",
            "arguments": {"env": id},
            "reason": "a person decides",
        }))
        .unwrap()
    };
    let mut shipped = Todo::new("2", "Ship");
    shipped.status = TodoStatus::InProgress;
    Old {
        messages: vec![Message::user("Plan it, then deploy."), call],
        todos: vec![Todo::new("1", "Write \"the\" plan"), shipped],
        files: [
            (
                "notes/plan.md",
                "line 1\nline \"2\"\ttab, ünïcode ✓, \\ and '",
            ),
            ("bin/nul.txt", "before \0 after"),
            ("empty", ""),
        ]
        .into_iter()
        .collect(),
        pending: vec![waiting("c1")],
        approved: vec![waiting("c2")],
    }
}

impl Old {
    /// The `todos` column as the previous release wrote it.
    fn todos_json(&self) -> String {
        serde_json::to_string(&self.todos).unwrap()
    }

    /// The `pending` column as the previous release wrote it (approved calls marked).
    fn pending_json(&self) -> String {
        let mut calls: Vec<serde_json::Value> = self
            .pending
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .collect();
        for call in &self.approved {
            let mut value = serde_json::to_value(call).unwrap();
            value["approved"] = json!(true);
            calls.push(value);
        }
        serde_json::to_string(&calls).unwrap()
    }

    /// Checks `thread` holds all of it.
    fn check(&self, thread: &Thread) {
        assert_eq!(thread.messages.to_vec(), self.messages);
        assert_eq!(Todos::of(&thread.data), self.todos);
        let files: BTreeMap<String, String> = FilesWritten::of(&thread.data)
            .into_iter()
            .map(|(p, c)| (p, c.to_string()))
            .collect();
        let expected: BTreeMap<String, String> = self
            .files
            .iter()
            .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
            .collect();
        assert_eq!(files, expected);
        assert_eq!(thread.pending, self.pending);
        assert_eq!(thread.approved, self.approved);
    }
}

/// What a save after the migration changes, checked after a reload: one more message, one
/// file edited, one removed, the todo list changed, and a data key of a type of the
/// application's own.
#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Mine {
    n: u32,
}

impl Persisted for Mine {
    const KEY: &'static str = "tests.mine";
}

fn changed(mut thread: Thread) -> Thread {
    thread.messages.push(Message::user("later"));
    FilesWritten::set(&mut thread.data, "notes/plan.md", "edited");
    assert!(FilesWritten::remove(&mut thread.data, "empty"));
    let mut todos = Todos::of(&thread.data);
    todos[1].status = TodoStatus::Done;
    Todos::set(&mut thread.data, todos);
    thread.data.set(&Mine { n: 7 }).unwrap();
    thread
}

// ===== SQLite =====

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;

    use rusqlite::{Connection, params};
    use tower_agent::store::Sqlite;

    /// A database of the previous release at `path`: thread `old` (everything), thread
    /// `plain` (an empty todo list, no file), a journal entry of `old`.
    fn write_v4(path: &std::path::Path, old: &Old) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(SQLITE_V4).unwrap();
        conn.execute(
            "INSERT INTO threads (id, revision, message_count, todos, created_at, updated_at, pending)
             VALUES ('old', 5, ?1, ?2, 1, 2, ?3), ('plain', 6, 1, '[]', 1, 3, '[]')",
            params![old.messages.len() as i64, old.todos_json(), old.pending_json()],
        )
        .unwrap();
        conn.execute("UPDATE revisions SET last = 6", []).unwrap();
        for (seq, message) in old.messages.iter().enumerate() {
            conn.execute(
                "INSERT INTO messages (thread_id, seq, body) VALUES ('old', ?1, ?2)",
                params![seq as i64, serde_json::to_string(message).unwrap()],
            )
            .unwrap();
        }
        let hi = serde_json::to_string(&Message::user("hi")).unwrap();
        conn.execute("INSERT INTO messages VALUES ('plain', 0, ?1)", [hi])
            .unwrap();
        for (path, content) in &old.files {
            conn.execute(
                "INSERT INTO files (thread_id, path, content) VALUES ('old', ?1, ?2)",
                params![path, content],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO journal VALUES ('old', 'c2', 'deploy', '{\"env\":\"c2\"}', NULL)",
            [],
        )
        .unwrap();
    }

    fn names(conn: &Connection, query: &str) -> Vec<String> {
        let mut stmt = conn.prepare(query).unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[tokio::test]
    async fn a_version_4_database_migrates_with_nothing_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.db");
        let old = old();
        write_v4(&path, &old);

        let store = Sqlite::open(&path).unwrap();
        {
            let conn = Connection::open(&path).unwrap();
            let version: i64 = conn
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .unwrap();
            assert_eq!(version, 5);
            let tables = names(
                &conn,
                "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name",
            );
            assert_eq!(
                tables,
                ["data", "journal", "messages", "revisions", "threads"]
            );
            let columns = names(&conn, "SELECT name FROM pragma_table_info('threads')");
            assert_eq!(
                columns,
                [
                    "id",
                    "revision",
                    "message_count",
                    "created_at",
                    "updated_at",
                    "pending"
                ]
            );
            // An empty todo list is no row.
            let keys = names(&conn, "SELECT thread_id || ' ' || key FROM data ORDER BY 1");
            assert_eq!(
                keys,
                [
                    "old tower_agent.files/bin/nul.txt",
                    "old tower_agent.files/empty",
                    "old tower_agent.files/notes/plan.md",
                    "old tower_agent.todos",
                ]
            );
        }

        let loaded = store.load("old").await.unwrap().unwrap();
        old.check(&loaded);
        let plain = store.load("plain").await.unwrap().unwrap();
        assert_eq!(plain.messages[0].text(), "hi");
        assert!(plain.data.is_empty() && Todos::of(&plain.data).is_empty());
        let ids = ["c2".to_owned()];
        let journal = store.journal().unwrap();
        assert!(journal.entries("old", &ids).await.unwrap()["c2"].in_doubt());
        let infos = store.list_threads().await.unwrap();
        assert_eq!(infos.len(), 2);

        // Saved and read back by another store (and a reopen migrates nothing again).
        let thread = changed(loaded);
        store.save(&thread).await.unwrap();
        drop(store);
        let again = Sqlite::open(&path).unwrap();
        let reloaded = again.load("old").await.unwrap().unwrap();
        assert_eq!(reloaded, thread);
        assert_eq!(reloaded.data.get::<Mine>().unwrap(), Some(Mine { n: 7 }));
        assert_eq!(
            &*FilesWritten::of(&reloaded.data)["bin/nul.txt"],
            "before \0 after"
        );
        // The revisions go on past the old ones.
        let conn = Connection::open(&path).unwrap();
        let revision: i64 = conn
            .query_row("SELECT revision FROM threads WHERE id = 'old'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(revision, 7);
    }

    /// How many data rows were inserted or updated (triggers on the file count them).
    fn data_writes(path: &std::path::Path) -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row("SELECT n FROM data_writes", [], |r| r.get(0))
            .unwrap()
    }

    #[tokio::test]
    async fn a_save_writes_only_the_data_keys_that_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.db");
        let store = Sqlite::open(&path).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE data_writes (n INTEGER NOT NULL);
                 INSERT INTO data_writes VALUES (0);
                 CREATE TRIGGER data_inserted AFTER INSERT ON data
                 BEGIN UPDATE data_writes SET n = n + 1; END;
                 CREATE TRIGGER data_updated AFTER UPDATE ON data
                 BEGIN UPDATE data_writes SET n = n + 1; END;",
            )
            .unwrap();
        let mut thread = Thread::new("t");
        thread.messages.push(Message::user("go"));
        for i in 0..50 {
            FilesWritten::set(
                &mut thread.data,
                &format!("src/{i}.rs"),
                &format!("fn f{i}() {{}}"),
            );
        }
        Todos::set(&mut thread.data, vec![Todo::new("1", "edit one file")]);
        store.save(&thread).await.unwrap();
        assert_eq!(data_writes(&path), 51);

        // A step that changes no data: no data row.
        thread.messages.push(Message::assistant("thinking"));
        store.save(&thread).await.unwrap();
        assert_eq!(data_writes(&path), 51);
        // A step that edits one file of fifty: one row.
        FilesWritten::set(&mut thread.data, "src/7.rs", "fn f7() { edited() }");
        thread.messages.push(Message::assistant("edited"));
        store.save(&thread).await.unwrap();
        assert_eq!(data_writes(&path), 52);

        // A store that never saw the thread (it compares with the stored rows): the same.
        let other = Sqlite::open(&path).unwrap();
        FilesWritten::set(&mut thread.data, "src/8.rs", "fn f8() { edited() }");
        other.save(&thread).await.unwrap();
        assert_eq!(data_writes(&path), 53);
        // After a load: nothing for an unchanged step.
        let mut loaded = other.load("t").await.unwrap().unwrap();
        assert_eq!(loaded, thread);
        loaded.messages.push(Message::user("next"));
        other.save(&loaded).await.unwrap();
        assert_eq!(data_writes(&path), 53);
    }

    #[tokio::test]
    async fn a_database_newer_than_this_release_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.db");
        drop(Sqlite::open(&path).unwrap());
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 6)
            .unwrap();
        let err = Sqlite::open(&path).unwrap_err();
        assert!(err.is_too_new(), "{err:?}");
        assert!(
            err.to_string()
                .contains("schema version is 6, newer than the 5"),
            "{err}"
        );
    }
}

// ===== PostgreSQL =====

#[cfg(all(feature = "postgres", unix))]
mod postgres {
    use super::*;

    use support::postgres as pg;
    use tower_agent::store::{Postgres, postgres::SCHEMA_VERSION};

    /// `text` as a PostgreSQL string literal.
    fn literal(text: &str) -> String {
        format!("'{}'", text.replace('\'', "''"))
    }

    /// `bytes` as a PostgreSQL `bytea` literal.
    fn bytea(bytes: &[u8]) -> String {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("'\\x{hex}'::bytea")
    }

    /// The rows of the previous release: thread `old` (everything), thread `plain` (an empty
    /// todo list, no file), a journal entry of `old`.
    fn rows_v3(old: &Old) -> String {
        let mut sql = format!(
            "INSERT INTO tower_agent_threads
                (id, revision, message_count, todos, created_at, updated_at, pending)
             VALUES ('old', nextval('tower_agent_revisions'), {}, {}, 1, 2, {}),
                    ('plain', nextval('tower_agent_revisions'), 1, '[]', 1, 3, '[]');",
            old.messages.len(),
            literal(&old.todos_json()),
            literal(&old.pending_json()),
        );
        for (seq, message) in old.messages.iter().enumerate() {
            sql += &format!(
                "INSERT INTO tower_agent_messages VALUES ('old', {seq}, {});",
                literal(&serde_json::to_string(message).unwrap())
            );
        }
        sql += &format!(
            "INSERT INTO tower_agent_messages VALUES ('plain', 0, {});",
            literal(&serde_json::to_string(&Message::user("hi")).unwrap())
        );
        for (path, content) in &old.files {
            sql += &format!(
                "INSERT INTO tower_agent_files VALUES ('old', {}, {});",
                literal(path),
                bytea(content.as_bytes())
            );
        }
        sql + "INSERT INTO tower_agent_journal VALUES ('old', 'c2', 'deploy', '{\"env\":\"c2\"}', NULL);"
    }

    #[tokio::test]
    async fn a_schema_3_database_migrates_with_nothing_lost() {
        let url = pg::database().await;
        let old = old();
        pg::sql(
            &url,
            &format!("{POSTGRES_V2}; {POSTGRES_V3}; {}", rows_v3(&old)),
        )
        .await;

        let store = Postgres::connect(&url).await.unwrap();
        assert_eq!(SCHEMA_VERSION, 4);
        assert_eq!(
            pg::column(&url, "SELECT version::text FROM tower_agent_schema").await,
            [Some("4".to_owned())]
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
        let todos_column = pg::column(
            &url,
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_name = 'tower_agent_threads' AND column_name = 'todos'",
        )
        .await;
        assert!(todos_column.is_empty(), "{todos_column:?}");
        assert_eq!(
            pg::column(
                &url,
                "SELECT thread_id || ' ' || key FROM tower_agent_data ORDER BY 1"
            )
            .await,
            [
                "old tower_agent.files/bin/nul.txt",
                "old tower_agent.files/empty",
                "old tower_agent.files/notes/plan.md",
                "old tower_agent.todos",
            ]
            .map(|t| Some(t.to_owned()))
        );

        let loaded = store.load("old").await.unwrap().unwrap();
        old.check(&loaded);
        let plain = store.load("plain").await.unwrap().unwrap();
        assert_eq!(plain.messages[0].text(), "hi");
        assert!(plain.data.is_empty());
        let ids = ["c2".to_owned()];
        let journal = store.journal().unwrap();
        assert!(journal.entries("old", &ids).await.unwrap()["c2"].in_doubt());

        let thread = changed(loaded);
        store.save(&thread).await.unwrap();
        drop(store);
        let again = Postgres::connect(&url).await.unwrap();
        let reloaded = again.load("old").await.unwrap().unwrap();
        assert_eq!(reloaded, thread);
        assert_eq!(reloaded.data.get::<Mine>().unwrap(), Some(Mine { n: 7 }));
        assert_eq!(
            &*FilesWritten::of(&reloaded.data)["bin/nul.txt"],
            "before \0 after"
        );
        assert_eq!(again.list_threads().await.unwrap().len(), 2);
    }

    /// A failing migration leaves the database as it was: a file of the old schema that is
    /// not UTF-8 (never written by this crate, here to fail the migration) rolls it back.
    #[tokio::test]
    async fn a_failed_migration_leaves_the_database_as_it_was() {
        let url = pg::database().await;
        let old = old();
        pg::sql(
            &url,
            &format!(
                "{POSTGRES_V2}; {POSTGRES_V3}; {}
                 INSERT INTO tower_agent_files VALUES ('old', 'bad', '\\xff'::bytea);",
                rows_v3(&old)
            ),
        )
        .await;
        let err = Postgres::connect(&url).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot migrate its schema to version 4"),
            "{err}"
        );
        assert_eq!(
            pg::column(&url, "SELECT version::text FROM tower_agent_schema").await,
            [Some("3".to_owned())]
        );
        assert_eq!(
            pg::column(&url, "SELECT count(*)::text FROM tower_agent_files").await,
            [Some("4".to_owned())]
        );
        assert!(
            pg::column(
                &url,
                "SELECT tablename::text FROM pg_tables WHERE tablename = 'tower_agent_data'"
            )
            .await
            .is_empty()
        );
    }
}
