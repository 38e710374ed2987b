//! [`Postgres`]: a [`ThreadStore`] of [tower-agent](https://docs.rs/tower-agent) in a PostgreSQL
//! database (tower-agent's feature `postgres`, where this crate is `tower_agent::store::postgres`),
//! shared by the replicas of a server.
//!
//! It keeps the semantics of [`Sqlite`](https://docs.rs/tower-agent-sqlite) (a save is written whole or not
//! at all, incremental appends, migrations, errors that say what is wrong) in a database that any
//! number of processes on any number of machines use at once, and adds one rule they need:
//! **a save never overwrites a thread another writer changed since this store read it**.
//!
//! # Example
//!
//! ```no_run
//! use tower_agent_core::{Agent, AgentRequest, model::ScriptedModel};
//! use tower_agent_postgres::Postgres;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let store = Postgres::connect("postgresql://agent:secret@db.internal/agents").await?;
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().text("Nice to meet you, Ada."))
//!     .store(store.clone())
//!     .build();
//! agent.run(AgentRequest::new("I am Ada.").thread("t1")).await?;
//! assert_eq!(store.list_threads().await?[0].messages, 2); // user, assistant
//! # Ok(())
//! # }
//! ```
//!
//! # What is stored
//!
//! | table | one row per | columns |
//! |---|---|---|
//! | `tower_agent_threads` | thread | id, revision, message count, pending calls (JSON), created/updated (Unix ms) |
//! | `tower_agent_messages` | message | thread id, position, the [`Message`](tower_agent_core::message::Message) as JSON |
//! | `tower_agent_data` | key of the thread's [data](tower_agent_core::store::data) | thread id, key, value (JSON text): the todo list (`tower_agent.todos`), one row per file written (`tower_agent.files/` and its path), your [`Persisted`](tower_agent_core::store::Persisted) types |
//! | `tower_agent_journal` | tool call of a thread | thread id, call id, tool, arguments (JSON), output (JSON, `NULL` until it finished): the [tool-call journal](tower_agent_core::store::journal), deleted with the thread |
//! | `tower_agent_schema` | (one row) | the schema version |
//!
//! and the sequence `tower_agent_revisions`. Every name starts with `tower_agent_`, so the
//! store can share a database (or a schema, chosen with the URL's `options=-c search_path=…`)
//! with an application's own tables.
//!
//! The schema knows nothing of the built-ins: whatever a tool or layer keeps in the thread's
//! data is a row of `tower_agent_data`, and a save writes only the keys whose value changed
//! since the store's last load or save of the thread (a step that edits one file of fifty
//! writes one row; a step that changes no data writes none). A save of a thread the store
//! does not remember rewrites its data rows.
//!
//! # Migrations
//!
//! [`connect`](Postgres::connect) creates the schema in a database that has none and migrates
//! an older one (the version is in `tower_agent_schema`; this version writes version
//! [`SCHEMA_VERSION`]), in one transaction under an advisory lock, so replicas that start
//! together migrate once. Version 4 moved the todo list (column `todos` of
//! `tower_agent_threads`) and the files (table `tower_agent_files`) of version 3 into
//! `tower_agent_data`. A database whose schema version is newer than this crate knows is
//! refused ([`ConnectError::is_too_new`]) and left untouched.
//!
//! # Several writers: compare-and-swap on a revision
//!
//! Every save gives the thread a new revision from the sequence (never given twice, not even
//! to a thread deleted and created again). The store remembers, per thread, the revision it
//! last loaded or saved. A save takes a per-thread advisory lock for its transaction (see
//! [group commit](#group-commit-many-saves-one-transaction)), reads
//! the thread's revision and:
//!
//! - if the store remembers the thread and the database still holds that revision, it
//!   appends the new messages (when the stored ones are a prefix of the new history, the usual
//!   step) or rewrites from the first difference, and writes only the data keys that changed;
//! - if the store remembers the thread but the database holds **another revision, or no
//!   thread** (another store saved or deleted it since), nothing is written and the save fails
//!   with a [`Conflict`] naming the thread (find it with [`Conflict::find`]). The store keeps
//!   its memory, so later saves of the same stale history fail too until the thread is loaded
//!   again: two replicas never interleave a thread's history, the loser is told. A store that
//!   loaded a thread and found none remembers that too: if another store created the thread
//!   meanwhile, the save is a conflict as well (two replicas starting the same new thread);
//! - if the store does not remember the thread (it never loaded it, or forgot it, see below),
//!   the save creates it or replaces it, comparing the stored rows with the new history.
//!
//! The store remembers up to 1,024 threads (the least recently used is forgotten first): a
//! thread forgotten between the load and a save of a run loses the conflict check for that
//! save (it is replaced, as a `Sqlite` save would). Two runs on one thread through the *same*
//! store are not told apart (the store does not know runs): serialize them as before.
//!
//! # Run leases across replicas
//!
//! [`lease`](ThreadStore::lease) (which the HTTP server takes for every run) holds a session
//! advisory lock on the thread (64 bits of the SHA-256 of its id) on a connection of its own,
//! out of the pool, for as long as the [`Lease`] lives: a second run on the thread, through
//! any replica, gets a [`ThreadBusy`] error (`409` from the server) after waiting 250 ms for
//! the thread to become free. Dropping the lease unlocks it (at once, in a task of its own).
//! A lock of a session is released by the server when the session ends, so a replica that
//! dies — `kill -9`, a crash — releases its runs' threads as soon as the server
//! sees its connections close (at once when the process dies and its kernel closes the
//! sockets; a vanished host is detected by TCP keepalives, set to about a minute on lease
//! connections). There is no expiry to tune and no clock to trust. A run whose lease
//! connection broke (a restarted server) may go on without it: the compare-and-swap of its
//! saves still keeps it from overwriting a newer run's thread. Each running run uses one
//! server connection besides the pool.
//!
//! # Group commit: many saves, one transaction
//!
//! Saves (and the records of the [tool-call journal](tower_agent_core::store::journal)) do not each take
//! a connection and a transaction: they queue for one of the store's [`WRITERS`] (4) writer
//! tasks (shared by the store's clones; a thread's writes always go to the same one, chosen
//! by a hash of its id), which takes every write waiting (up to [`MAX_BATCH`], 512, of
//! distinct threads and calls; a second save of a thread waits for the next batch, so a
//! thread's saves are written in order) and writes them in **one transaction**: the
//! per-thread locks in key order, one read of the thread rows, then one multi-row statement
//! per kind of row (messages deleted, messages inserted, data rows, thread rows with their new
//! revisions, journal records), pipelined. While a batch is written the next one gathers, so
//! the more saves are in flight, the fewer transactions per save; the writers' batches go in
//! parallel, each on its own connection. Every rule above holds per save, and each caller
//! gets its own result:
//!
//! - a save that loses its compare-and-swap fails with its [`Conflict`] and the others of its
//!   batch are written;
//! - a batch the server refuses (a constraint, a deadlock, a serialization failure) is
//!   written again one save per transaction, so that only the save at fault fails;
//! - a connection that breaks (a restarted server, a terminated backend) or a batch past the
//!   operation timeout of one of its saves fails every save of the batch with an error
//!   naming the server, never a hang: the connection is closed (the server rolls the batch
//!   back) and the next batch connects again. As with any lost connection, a save whose
//!   commit was cut off may or may not have been committed: the store compares the rows at
//!   its next save of the thread.
//!
//! The queues hold at most [`SAVE_QUEUE`] (4,096) writes in all: past that a save or record
//! waits for room (within its operation timeout), so memory stays bounded whatever the load.
//! A save whose caller gave up (its future dropped) before its batch was formed is not
//! written.
//!
//! # Connections, timeouts and errors
//!
//! The store holds a pool of at most [`DEFAULT_MAX_CONNECTIONS`] (16) connections for loads,
//! lists, deletes and journal reads, in parallel ([`connect_with`](Postgres::connect_with)
//! sets another size), and each writer's connection besides it (taken at its first batch,
//! connected again after it broke), so that reads never wait behind saves. Reaching the
//! server times out after 10 seconds (unless the URL sets `connect_timeout`), logging in after twice that,
//! waiting for a free connection after 30, and every operation (load, save, delete, list,
//! lease; for a save, from the moment it is queued until its batch is committed) after
//! [`OPERATION_TIMEOUT`] (60 seconds,
//! [`with_operation_timeout`](Postgres::with_operation_timeout) sets another); a connection
//! whose operation timed out is closed, never reused (the server ends its transaction).
//! Errors name the server and the database (``postgres thread store `agents` on
//! db.internal:5432 as agent: …``), never the password: [`ConnectError`] for [`connect`](Postgres::connect) (a bad URL, an unreachable
//! server, a refused login, a schema too new), a [`Conflict`] for a lost compare-and-swap.
//! Thread ids and data keys (file paths among them) are PostgreSQL `text`, which cannot hold
//! the NUL character: a save of such an id or key fails with an error saying so, and nothing
//! is written. Data values are JSON text, which escapes it, so any value is kept.
//!
//! TLS is not built in: connect over a private network, a unix socket
//! (`postgresql:///agents?host=/run/postgresql`) or a TLS tunnel (a URL with
//! `sslmode=require` fails to connect with an error saying no TLS is configured).
//!
//! # Why tokio-postgres and deadpool
//!
//! `tokio-postgres` (rust-postgres) and `deadpool-postgres` are the most used asynchronous
//! PostgreSQL client and pool, both actively released; they are a fraction of `sqlx`'s build
//! (no query macros, no `any` driver, no second runtime abstraction), and this store needs only
//! plain parameterised statements.
// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

use std::{
    fmt,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use deadpool_postgres::{
    ClientWrapper, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime,
};
use futures_util::future::BoxFuture;
use sha2::{Digest, Sha256};
use tokio::{
    runtime::Handle,
    sync::{mpsc, oneshot},
};
use tokio_postgres::NoTls;
use tower_agent_core::{
    error::BoxError,
    message::Messages,
    store::{
        Lease, StoreTag, Thread, ThreadBusy, ThreadData, ThreadInfo, ThreadStore, ToolJournal,
        sql::{SavedThread, SavedThreads, decode_calls, decode_value, from_millis},
    },
};

use self::errors::{ConnectErrorKind, chain, describe, redact_url};
pub use self::{
    errors::{Conflict, ConnectError},
    schema::SCHEMA_VERSION,
};

mod errors;
mod journal;
mod schema;
mod writer;

/// How many connections [`Postgres::connect`] pools at most.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// How long one operation (load, save, delete, list) may take, waiting for its connection
/// and its locks included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many saves and journal records wait for the writer task at most; one that finds the
/// queue full waits for room (within its operation timeout).
pub const SAVE_QUEUE: usize = 4096;

/// How many saves (of distinct threads) and journal records the writer task writes in one
/// transaction at most.
pub const MAX_BATCH: usize = 512;

/// How many writer tasks a store runs, each with its own connection and a share of the
/// queue: the writes of a thread always go to the same one (chosen by a hash of its id), so
/// they stay in order, while the batches of the writers are written in parallel.
pub const WRITERS: usize = 4;

/// The writer task of thread `id`.
fn lane(id: &str) -> usize {
    writer::thread_key(id) as u32 as usize % WRITERS
}

/// How long a save waits for the writer's answer past its operation timeout before it gives
/// up on a writer that cannot run.
const WRITER_GRACE: Duration = Duration::from_secs(5);

/// How long an operation waits for a free connection of the pool.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The first key of this crate's two-key advisory locks (`"tagt"`); the second is a hash of
/// the thread id.
const LOCK_SPACE: i32 = i32::from_be_bytes(*b"tagt");

/// How long a lease waits for a thread that is busy before it is refused ([`ThreadBusy`]).
const LEASE_GRACE: Duration = Duration::from_millis(250);

/// The revision a store remembers for a thread it found absent (the sequence starts at 1).
const ABSENT: i64 = 0;

/// A [`ThreadStore`] in a PostgreSQL database. See the [module docs](self).
///
/// Cloning is one reference count; clones share the pool and the memory of saved threads.
#[derive(Clone)]
pub struct Postgres {
    shared: Arc<Shared>,
    timeout: Duration,
}

struct Shared {
    /// The tag under which this store marks the histories it loaded or saved
    /// ([`Messages::mark_stored`](tower_agent_core::message::Messages::mark_stored)): a save of such a
    /// history appends even when the cache no longer holds the thread.
    tag: StoreTag,
    pool: Pool,
    /// The server and database, for errors: never the password.
    target: String,
    /// Shared with the writer task, which remembers what it saved.
    cache: Arc<Mutex<SavedThreads>>,
    /// The queues of the writer tasks (group commit), [`WRITERS`] of them; a thread's writes
    /// always go to the same one. The tasks end when these are dropped.
    writers: Vec<mpsc::Sender<writer::Queued>>,
}

impl fmt::Debug for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Postgres")
            .field("target", &self.shared.target)
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// Connects to the database at `url` (a `postgresql://` URL or `key=value` pairs, as
    /// libpq takes them) with a pool of at most [`DEFAULT_MAX_CONNECTIONS`] connections (and
    /// one per writer task, see [group commit](self#group-commit-many-saves-one-transaction)),
    /// and creates or migrates the schema.
    ///
    /// # Errors
    ///
    /// A [`ConnectError`] naming the server and database (never the password) if the URL is
    /// malformed, the server cannot be reached or refuses the login, the schema is newer than
    /// this crate knows, or a migration fails.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// [`connect`](Self::connect) with a pool of at most `max_connections` (at least 1) for
    /// loads, lists, deletes and journal reads; the [`WRITERS`] writer tasks have a connection
    /// each besides.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub async fn connect_with(url: &str, max_connections: usize) -> Result<Self, ConnectError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| ConnectError {
            target: redact_url(url),
            kind: ConnectErrorKind::Url,
            source: Some(Box::new(e)),
        })?;
        let target = describe(&config);
        let fail = |kind, source: Option<BoxError>| ConnectError {
            target: target.clone(),
            kind,
            source,
        };
        // Covers reaching the server; the pool's creation timeout covers the login too (a
        // server that accepts and never answers).
        let connect_timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT);
        config.connect_timeout(connect_timeout);
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(WAIT_TIMEOUT))
            .create_timeout(Some(connect_timeout * 2))
            .build()
            .map_err(|e| fail(ConnectErrorKind::Connect, Some(e.into())))?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| fail(ConnectErrorKind::Connect, Some(e.into())))?;
        match tokio::time::timeout(OPERATION_TIMEOUT, schema::migrate(&mut client)).await {
            Ok(Ok(())) => {}
            Ok(Err((kind, source))) => return Err(fail(kind, source)),
            Err(elapsed) => {
                drop(Object::take(client));
                return Err(fail(ConnectErrorKind::Connect, Some(elapsed.into())));
            }
        }
        drop(client);
        let cache = Arc::new(Mutex::new(SavedThreads::new(
            SavedThreads::DEFAULT_CAPACITY,
        )));
        let tag = StoreTag::unique();
        let writers = (0..WRITERS)
            .map(|_| {
                let (queue, saves) = mpsc::channel(SAVE_QUEUE / WRITERS);
                let writer = writer::Writer {
                    tag,
                    pool: pool.clone(),
                    cache: cache.clone(),
                    target: target.clone(),
                    client: None,
                };
                tokio::spawn(writer.run(saves));
                queue
            })
            .collect();
        Ok(Postgres {
            shared: Arc::new(Shared {
                tag,
                pool,
                target,
                cache,
                writers,
            }),
            timeout: OPERATION_TIMEOUT,
        })
    }

    /// This store with another limit on each operation than [`OPERATION_TIMEOUT`] (clones
    /// made from it keep it; the connections and the memory of threads stay shared).
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The server and database this store uses, as errors name them (no password).
    pub fn target(&self) -> &str {
        &self.shared.target
    }

    /// The threads in the store, most recently updated first.
    ///
    /// # Errors
    ///
    /// Fails if the database cannot be read.
    pub async fn list_threads(&self) -> Result<Vec<ThreadInfo>, BoxError> {
        self.with_client(async |client| {
            let rows = client
                .query(
                    "SELECT id, message_count, created_at, updated_at FROM tower_agent_threads
                     ORDER BY updated_at DESC, id",
                    &[],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| {
                    ThreadInfo::new(
                        row.get::<_, String>(0),
                        row.get::<_, i64>(1).try_into().unwrap_or(0),
                        from_millis(row.get(2)),
                        from_millis(row.get(3)),
                    )
                })
                .collect())
        })
        .await
    }

    /// Deletes the thread `id` (its messages and data); deleting a missing thread is not
    /// an error. The same as [`ThreadStore::delete`].
    ///
    /// # Errors
    ///
    /// Fails if the database cannot be written.
    pub async fn delete_thread(&self, id: &str) -> Result<(), BoxError> {
        self.cache().remove(id);
        self.with_client(async |client| {
            let tx = client.transaction().await?;
            lock_thread(&tx, id).await?;
            for sql in [
                "DELETE FROM tower_agent_messages WHERE thread_id = $1",
                "DELETE FROM tower_agent_data WHERE thread_id = $1",
                "DELETE FROM tower_agent_threads WHERE id = $1",
                "DELETE FROM tower_agent_journal WHERE thread_id = $1",
            ] {
                tx.execute(sql, &[&id]).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Takes the lease of thread `id` (see [`ThreadStore::lease`] and the module docs):
    /// a session advisory lock held on a connection of its own until the lease drops.
    ///
    /// # Errors
    ///
    /// [`ThreadBusy`] if another run (of any replica) holds the thread; an error naming the
    /// server if it cannot be reached in time.
    pub async fn lease_thread(&self, id: &str) -> Result<Lease, BoxError> {
        let target = &self.shared.target;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let client = tokio::time::timeout_at(deadline, self.shared.pool.get())
            .await
            .map_err(|_| format!("postgres thread store {target}: no connection in time"))?
            .map_err(|e| format!("postgres thread store {target}: cannot connect: {e}"))?;
        // Out of the pool: the connection lives as long as the lease, and closes with it.
        let client = Object::take(client);
        let key = lease_key(id);
        let take = async {
            // A peer host that vanishes (no FIN) is found dead by the server in about a minute
            // (TCP connections only).
            client
                .batch_execute(
                    "SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10; \
                     SET tcp_keepalives_count = 3",
                )
                .await?;
            // A lease just dropped is unlocked by a task of its own: a moment's grace, so that
            // the next run of a conversation is not refused for it.
            let grace = tokio::time::Instant::now() + LEASE_GRACE;
            loop {
                let row = client
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                    .await?;
                let now = tokio::time::Instant::now();
                if row.get(0) || now >= grace {
                    return Ok::<bool, tokio_postgres::Error>(row.get(0));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        match tokio::time::timeout_at(deadline, take).await {
            Ok(Ok(true)) => Ok(Lease::held_by(LeaseConnection {
                client: Some(client),
                key,
            })),
            Ok(Ok(false)) => Err(Box::new(ThreadBusy::new(id))),
            Ok(Err(e)) => Err(format!(
                "postgres thread store {target}: cannot lease thread `{id}`: {}",
                chain(&e)
            )
            .into()),
            Err(_) => Err(format!(
                "postgres thread store {target}: cannot lease thread `{id}`: no answer within {:?}",
                self.timeout
            )
            .into()),
        }
    }

    /// Saves `thread` through the writer task (group commit, see the module docs).
    async fn save_thread(&self, thread: &Thread) -> Result<(), BoxError> {
        let target = &self.shared.target;
        let refuse =
            |e: BoxError| -> BoxError { format!("postgres thread store {target}: {e}").into() };
        no_nul("thread id", &thread.id).map_err(refuse)?;
        for (key, _) in thread.data.iter() {
            no_nul("data key", key).map_err(refuse)?;
        }
        // An O(1) copy of the history, and of the data (shared).
        self.queue(&thread.id, thread.clone(), writer::Queued::Save)
            .await
    }

    /// Queues `work` for the writer task (within the operation timeout) and waits for its
    /// answer.
    async fn queue<W>(
        &self,
        thread: &str,
        work: W,
        queued: impl FnOnce(writer::Job<W>) -> writer::Queued,
    ) -> Result<(), BoxError> {
        let target = &self.shared.target;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let (reply, answer) = oneshot::channel();
        let job = queued(writer::Job {
            work,
            deadline,
            timeout: self.timeout,
            reply,
        });
        let late = || -> BoxError {
            format!(
                "postgres thread store {target}: the operation took longer than {:?} (waiting \
                 for the writer)",
                self.timeout
            )
            .into()
        };
        let stopped = || -> BoxError {
            format!(
                "postgres thread store {target}: the writer task stopped (its runtime shut down)"
            )
            .into()
        };
        match tokio::time::timeout_at(deadline, self.shared.writers[lane(thread)].send(job)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(stopped()),
            Err(_) => return Err(late()),
        }
        // The writer answers by the deadline (it abandons a batch past it); the grace only
        // guards against a writer that cannot run at all.
        match tokio::time::timeout_at(deadline + WRITER_GRACE, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(stopped()),
            Err(_) => Err(late()),
        }
    }

    fn cache(&self) -> MutexGuard<'_, SavedThreads> {
        self.shared.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `op` with a pooled connection, within the operation timeout; errors name the
    /// target. A connection whose operation timed out is closed, not returned to the pool.
    async fn with_client<T>(
        &self,
        op: impl AsyncFnOnce(&mut Object) -> Result<T, BoxError>,
    ) -> Result<T, BoxError> {
        let target = &self.shared.target;
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut client = tokio::time::timeout_at(deadline, self.shared.pool.get())
            .await
            .map_err(|_| format!("postgres thread store {target}: no connection in time"))?
            .map_err(|e| format!("postgres thread store {target}: cannot connect: {e}"))?;
        match tokio::time::timeout_at(deadline, op(&mut client)).await {
            Ok(Ok(value)) => Ok(value),
            // A conflict is the caller's to find by type: not wrapped.
            Ok(Err(e)) if e.is::<Conflict>() => Err(e),
            Ok(Err(e)) => Err(format!("postgres thread store {target}: {}", chain(&*e)).into()),
            Err(_) => {
                drop(Object::take(client));
                Err(format!(
                    "postgres thread store {target}: the operation took longer than {:?} (the \
                     connection was closed)",
                    self.timeout
                )
                .into())
            }
        }
    }
}

impl ThreadStore for Postgres {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        Box::pin(async move {
            let loaded = self
                .with_client(async |client| load(client, id).await)
                .await?;
            let remembered = match &loaded {
                Some((revision, thread)) => {
                    thread.messages.mark_stored(self.shared.tag, *revision);
                    SavedThread::new(*revision, thread.messages.clone(), thread.data.clone())
                }
                // Remembered as absent: a save that finds the thread created meanwhile by
                // another store is a conflict, not a replacement.
                None => SavedThread::new(ABSENT, Messages::new(), ThreadData::new()),
            };
            self.cache().put(id.to_owned(), remembered);
            Ok(loaded.map(|(_, thread)| thread))
        })
    }

    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(self.save_thread(thread))
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(self.delete_thread(id))
    }

    fn lease<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Lease, BoxError>> {
        Box::pin(self.lease_thread(id))
    }

    fn journal(&self) -> Option<&dyn ToolJournal> {
        Some(self)
    }
}

/// The connection that holds a lease's advisory lock; it unlocks (or closes) when dropped.
struct LeaseConnection {
    client: Option<ClientWrapper>,
    key: i64,
}

impl Drop for LeaseConnection {
    fn drop(&mut self) {
        let (Some(client), Ok(runtime)) = (self.client.take(), Handle::try_current()) else {
            // No runtime: the connection closes with the client, which releases the lock.
            return;
        };
        let key = self.key;
        // Unlock first, so that the next lease of the thread is given at once, then close.
        runtime.spawn(async move {
            let _ = client
                .execute("SELECT pg_advisory_unlock($1)", &[&key])
                .await;
        });
    }
}

/// The advisory lock (one-key form) of the lease of thread `id`: 64 bits of its SHA-256, so
/// two threads practically never share one (a shared key would make a run wait for another
/// thread's).
fn lease_key(id: &str) -> i64 {
    let digest = Sha256::digest(id.as_bytes());
    let mut key = [0; 8];
    key.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(key)
}

// ===== load and save =====

/// The thread `id` and its revision, read in one snapshot.
async fn load(client: &mut Object, id: &str) -> Result<Option<(i64, Thread)>, BoxError> {
    // One statement, so one snapshot and one round trip (prepared once per connection): the
    // thread's row, its messages and its data, a row each (not gathered into arrays, which
    // PostgreSQL caps at 1 GB a value). A load holds a connection of the pool for this only,
    // so a burst of runs starting at once waits for connections the least (before: a
    // transaction of four statements, each parsed again).
    let statement = client
        .prepare_cached(
            "SELECT 0::int2, revision, pending, NULL
               FROM tower_agent_threads WHERE id = $1
             UNION ALL
             SELECT 1::int2, seq, body, NULL
               FROM tower_agent_messages WHERE thread_id = $1
             UNION ALL
             SELECT 2::int2, NULL, key, value
               FROM tower_agent_data WHERE thread_id = $1",
        )
        .await?;
    let rows = client.query(&statement, &[&id]).await?;
    let mut head = None;
    let mut bodies: Vec<(i64, &str)> = Vec::new();
    let mut data = Vec::new();
    for row in &rows {
        match row.try_get::<_, i16>(0)? {
            0 => head = Some((row.try_get::<_, i64>(1)?, row.try_get(2)?)),
            1 => bodies.push((row.try_get(1)?, row.try_get(2)?)),
            _ => {
                let key: &str = row.try_get(2)?;
                data.push((key, decode_value(id, key, row.try_get(3)?)?));
            }
        }
    }
    // Message rows without a thread row are what a half-done delete left: no thread.
    let Some((revision, pending)): Option<(i64, &str)> = head else {
        return Ok(None);
    };
    let (pending, approved) = decode_calls(id, pending)?;
    // The rows of a union come in no stated order.
    bodies.sort_unstable_by_key(|&(seq, _)| seq);
    let mut messages = Messages::new();
    for (seq, body) in bodies {
        messages.push(
            serde_json::from_str(body)
                .map_err(|e| format!("thread `{id}`: bad message {seq}: {e}"))?,
        );
    }
    let thread = Thread {
        id: id.to_owned(),
        messages,
        data: data.into_iter().collect(),
        pending,
        approved,
    };
    Ok(Some((revision, thread)))
}

/// Takes the advisory lock of thread `id` until the end of the transaction: saves and
/// deletes of one thread take turns (a hash collision only makes two threads take turns).
async fn lock_thread(tx: &deadpool_postgres::Transaction<'_>, id: &str) -> Result<(), BoxError> {
    let key = writer::thread_key(id);
    tx.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&LOCK_SPACE, &key])
        .await?;
    Ok(())
}

/// PostgreSQL `text` cannot hold NUL: refuse it with an error that says so.
fn no_nul(what: &str, text: &str) -> Result<(), BoxError> {
    if text.contains('\0') {
        Err(format!("the {what} {text:?} contains a NUL character, which PostgreSQL text cannot hold; nothing was saved").into())
    } else {
        Ok(())
    }
}
