//! Durable state and the HTTP server: the tool-call journal, SQLite and PostgreSQL stores (a
//! real throwaway PostgreSQL server, one per test process: `tests/support/postgres.rs`), crash
//! resume across replica processes, crash points, durable approvals, the server end to end
//! and embedded in an axum app. One test binary, a module per area (a file of its own
//! before). Run this group alone with `cargo test --all-features --test stores`, one module
//! of it with `cargo test --all-features --test stores -- sqlite::`.

#[path = "../support/mod.rs"]
mod support;

#[cfg(all(feature = "axum", feature = "sqlite", unix))]
mod approvals;
#[cfg(all(feature = "sqlite", feature = "postgres", unix))]
mod crash_points;
#[cfg(feature = "axum")]
mod embed;
mod journal;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod migrations;
#[cfg(all(feature = "postgres", feature = "axum", unix))]
mod postgres;
#[cfg(all(feature = "postgres", feature = "axum", unix))]
mod resume;
#[cfg(all(feature = "axum", feature = "sqlite"))]
mod server;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_threads;
