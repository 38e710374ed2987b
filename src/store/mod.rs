//! Thread state: [`ThreadStore`], the in-memory [`MemoryStore`] and the persistent stores:
//! `Sqlite` (feature `sqlite`, a database file) and `Postgres` (feature `postgres`, one
//! database shared by server replicas).
//!
//! A run with a thread id loads the thread (messages, and its [data]: the todo list,
//! the files written, your own [`Persisted`] types) before it starts, saves it
//! after every step and at the end, and so continues the conversation of an earlier run with
//! the same id. A run without a thread id is ephemeral: it gets a fresh id and is not saved.
//!
//! Two runs on the same thread at the same time are not merged: the last save wins (a save
//! means "this is the thread now"; the stored thread is always one save's thread, never a mix
//! of two, also with several `Sqlite` stores on one file). Serialize
//! runs per thread (e.g. one at a time per conversation in your server) if that matters.
//! `Postgres` goes further across replicas: a save over a thread that another store wrote or
//! deleted since this store last read or saved it fails with a conflict error instead.
//!
//! Each store also keeps the [tool-call journal](journal) ([`ThreadStore::journal`]): what the
//! tool calls of a run on a thread did, so that a run whose process died is resumed
//! ([`AgentRequest::recover`](crate::AgentRequest::recover), `POST /threads/{id}/resume`)
//! without running a side effect twice. A run on a thread saves the assistant message that
//! makes tool calls before any of them runs, and again after their results.
//!
//! A store of yours on a SQL database can make the decisions the SQL stores make (append or
//! rewrite the messages, which data rows to write, the columns of pending calls and journal
//! entries) with the building blocks in [`sql`].
//!
//! # Example
//!
//! ```
//! use tower_agent::{Agent, AgentRequest, model::ScriptedModel, store::MemoryStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::Error> {
//! let store = MemoryStore::new();
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().text("Nice to meet you, Ada.").text("You are Ada."))
//!     .store(store.clone())
//!     .build();
//!
//! agent.run(AgentRequest::new("I am Ada.").thread("t1")).await?;
//! let second = agent.run(AgentRequest::new("Who am I?").thread("t1")).await?;
//! assert_eq!(second.text, "You are Ada.");
//! // user, assistant, user, assistant
//! assert_eq!(store.get("t1").unwrap().messages.len(), 4);
//! # Ok(())
//! # }
//! ```

#[doc(inline)]
pub use tower_agent_core::store::*;

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc(inline)]
pub use tower_agent_sqlite as sqlite;

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc(inline)]
pub use tower_agent_sqlite::Sqlite;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc(inline)]
pub use tower_agent_postgres as postgres;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc(inline)]
pub use tower_agent_postgres::Postgres;
