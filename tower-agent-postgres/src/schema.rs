//! The schema of a [`Postgres`](super::Postgres) store: its migrations, run in one
//! transaction under an advisory lock when a store connects.

use deadpool_postgres::{Object, Transaction};

use super::errors::ConnectErrorKind;
use tower_agent_core::error::BoxError;

/// The schema migrations: `MIGRATIONS[n]` takes the schema from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: threads, their messages (one row each), the files written in them, and one revision
    // sequence for the whole database.
    "CREATE TABLE tower_agent_threads (
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
    CREATE SEQUENCE tower_agent_revisions;",
    // 2: the calls of an interrupted run that wait for approval (JSON array).
    "ALTER TABLE tower_agent_threads ADD COLUMN pending text NOT NULL DEFAULT '[]';",
    // 3: the tool-call journal (`store::journal`): one row per call of a thread, `output`
    // NULL while the call is started and not finished.
    "CREATE TABLE tower_agent_journal (
        thread_id text NOT NULL,
        call_id text NOT NULL,
        tool text NOT NULL,
        arguments text NOT NULL,
        output text,
        PRIMARY KEY (thread_id, call_id)
    );",
    // 4: the thread data (`store::data`): one row per key of a thread, its value JSON text.
    // The built-ins' column and table move into it: the todo list (column `todos`, a list
    // that is not empty) under `tower_agent.todos`, each file (table `tower_agent_files`)
    // under `tower_agent.files/` and its path, its content as a JSON string. A content that
    // holds the NUL character cannot be PostgreSQL text: `files_with_nul` moves those, then
    // `DROP_BUILTINS` drops the old column and table.
    "CREATE TABLE tower_agent_data (
        thread_id text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (thread_id, key)
    );
    INSERT INTO tower_agent_data (thread_id, key, value)
        SELECT id, 'tower_agent.todos', todos FROM tower_agent_threads WHERE todos <> '[]';
    INSERT INTO tower_agent_data (thread_id, key, value)
        SELECT thread_id, 'tower_agent.files/' || path, to_json(convert_from(content, 'UTF8'))::text
        FROM tower_agent_files WHERE position('\\x00'::bytea IN content) = 0;",
];

/// The end of migration 4, after [`files_with_nul`].
const DROP_BUILTINS: &str = "DROP TABLE tower_agent_files;
    ALTER TABLE tower_agent_threads DROP COLUMN todos;";

/// The schema version this crate writes (and the newest it accepts).
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The advisory lock (one-key form) held while the schema is created or migrated.
const MIGRATION_LOCK: i64 = i64::from_be_bytes(*b"tagtschm");

/// Creates or migrates the schema, under the migration lock.
pub(super) async fn migrate(
    client: &mut Object,
) -> Result<(), (ConnectErrorKind, Option<BoxError>)> {
    let db = |e: tokio_postgres::Error| (ConnectErrorKind::Schema, Some(e.into()));
    let tx = client.transaction().await.map_err(db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS tower_agent_schema (
            id int PRIMARY KEY CHECK (id = 0),
            version int NOT NULL
        )",
    )
    .await
    .map_err(db)?;
    let version: i32 = tx
        .query_opt("SELECT version FROM tower_agent_schema WHERE id = 0", &[])
        .await
        .map_err(db)?
        .map_or(0, |row| row.get(0));
    if version > SCHEMA_VERSION {
        // Rolled back when `tx` drops: the database is left as it was.
        return Err((
            ConnectErrorKind::TooNew {
                found: version,
                newest: SCHEMA_VERSION,
            },
            None,
        ));
    }
    if version == SCHEMA_VERSION {
        return tx.commit().await.map_err(db);
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let to = from as i32 + 1;
        let step = async {
            tx.batch_execute(migration).await?;
            if to == 4 {
                files_with_nul(&tx).await?;
                tx.batch_execute(DROP_BUILTINS).await?;
            }
            Ok::<_, BoxError>(())
        };
        step.await
            .map_err(|e| (ConnectErrorKind::Migration { to }, Some(e)))?;
    }
    tx.execute(
        "INSERT INTO tower_agent_schema (id, version) VALUES (0, $1)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        &[&SCHEMA_VERSION],
    )
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)
}

/// Moves the files of version 3 whose content holds the NUL character (which PostgreSQL text,
/// so the SQL of migration 4, cannot hold) into `tower_agent_data`, their content escaped as
/// JSON does (`\u0000`).
async fn files_with_nul(tx: &Transaction<'_>) -> Result<(), BoxError> {
    let rows = tx
        .query(
            "SELECT thread_id, path, content FROM tower_agent_files
             WHERE position('\\x00'::bytea IN content) > 0",
            &[],
        )
        .await?;
    for row in rows {
        let (thread, path): (&str, &str) = (row.try_get(0)?, row.try_get(1)?);
        // Written from Rust text: UTF-8 (any byte that is not is replaced, not lost silently:
        // the file is still there).
        let content = String::from_utf8_lossy(row.try_get(2)?).into_owned();
        tx.execute(
            "INSERT INTO tower_agent_data (thread_id, key, value) VALUES ($1, $2, $3)",
            &[
                &thread,
                &format!("tower_agent.files/{path}"),
                &serde_json::to_string(&content)?,
            ],
        )
        .await?;
    }
    Ok(())
}
