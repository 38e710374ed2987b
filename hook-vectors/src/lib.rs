//! Claude Code's hooks recorded from Claude Code itself, as vectors any hook host can be
//! checked against, and the runner that checks it.
//!
//! A **vector** ([`Vector`], format [`FORMAT`]) is a scenario — the hooks of a
//! `.claude/settings.json`, what each hook answers, the project's files, the prompts, the
//! model's scripted answers — and what the reference (Claude Code, at the version the vector
//! names) did with it: every hook's input, in order, with what the hook saw of its environment;
//! what the hooks put in the model's requests; what the tools ran. The vectors recorded from
//! Claude Code ship in this crate's `vectors/` ([`shipped_dir`]).
//!
//! A **host** is the agent under test. The runner lays out a project for each vector
//! ([`Play`]): the settings name one hook script, a recorder that saves each hook's input and
//! answers as the scenario says; it starts a model server on 127.0.0.1 ([`ModelServer`], the
//! Anthropic Messages API) that answers with the scenario's answers and records every
//! request; the host plays the scenario's steps against it; the runner then compares what the
//! hooks were given and what they changed with the vector, field by field, with session ids,
//! paths, times and durations normalised and nothing else ([`compare`]). Differences a host
//! knows of are listed in [`KnownDifferences`], each with its reason; any other fails.
//!
//! A host written in Rust implements [`Host`]; any other is driven through an [`Adapter`], a
//! program given the [`Job`] as a JSON file — the `hook-vectors` binary runs one:
//!
//! ```text
//! hook-vectors run [--vectors DIR] [--known FILE] [--only NAME]... [--timeout SECS] -- ADAPTER [ARG...]
//! ```
//!
//! `adapters/claude-code.mjs` in this crate is the adapter of Claude Code itself (the vectors
//! are recorded through it), a worked example of one. The guide page of tower-agent, "Checking
//! a hook host against Claude Code", documents the format and the adapter's contract.
//!
//! `adapters/codex.mjs` is the adapter of Codex (OpenAI's Codex CLI, which reads Claude Code's
//! hooks format from `~/.codex/hooks.json`): it plays a job through `codex exec`, translating
//! between Codex's Responses API and the model server's Messages API, text and Bash calls
//! only. `vectors-codex/` holds the scenarios Codex can play, recorded from Codex 0.169.0 (its
//! `README.md` says which are left out and why); the guide page's section "Codex" tells more.
//!
//! `adapters/gemini.mjs` is the adapter of Gemini CLI (Google's, whose hooks are close to
//! Claude Code's under other event names): it writes the job's hooks into Gemini's user
//! settings, ported as a user would (events renamed, `Bash` in matchers `run_shell_command`,
//! timeouts in milliseconds), and plays the job through `gemini -p`, translating between the
//! Gemini API and the model server's Messages API, text and Bash calls only.
//! `vectors-gemini/` holds the scenarios Gemini CLI can play, recorded from Gemini CLI 0.61.0
//! (its `README.md` says which are left out and why); the guide page's section "Gemini CLI"
//! tells more.
//!
//! # Example
//!
//! A host in Rust that fires SessionStart only — not enough to pass a vector, but the whole
//! round: the hooks of the job's settings run with the project's directory, the input on
//! stdin; the report lists what differs.
//!
//! ```
//! use hook_vectors::{Error, Host, Job, KnownDifferences, Report, compare, play, read_dir, shipped_dir};
//!
//! struct StartsOnly;
//!
//! impl Host for StartsOnly {
//!     async fn play(&self, job: &Job) -> Result<(), Error> {
//!         let settings: serde_json::Value =
//!             serde_json::from_slice(&std::fs::read(&job.settings).map_err(Error::new)?)
//!                 .map_err(Error::new)?;
//!         let entries = settings["hooks"]["SessionStart"].as_array().cloned().unwrap_or_default();
//!         for handler in entries.iter().flat_map(|e| e["hooks"].as_array().cloned().unwrap_or_default()) {
//!             let input = serde_json::json!({
//!                 "session_id": "s1", "transcript_path": job.home.join("s1.jsonl"),
//!                 "cwd": job.cwd, "hook_event_name": "SessionStart", "source": "startup",
//!             });
//!             let mut child = std::process::Command::new("sh")
//!                 .args(["-c", handler["command"].as_str().unwrap_or_default()])
//!                 .current_dir(&job.cwd)
//!                 .env("CLAUDE_PROJECT_DIR", &job.project)
//!                 .stdin(std::process::Stdio::piped())
//!                 .stdout(std::process::Stdio::null())
//!                 .spawn()
//!                 .map_err(Error::new)?;
//!             use std::io::Write;
//!             child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).map_err(Error::new)?;
//!             child.wait().map_err(Error::new)?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! let mut report = Report::new(KnownDifferences::default());
//! let (name, vector) = read_dir(&shipped_dir())?.into_iter().next().unwrap();
//! let seen = play(&StartsOnly, &vector.scenario).await?;
//! let expected = vector.expected.as_ref().unwrap();
//! report.add(&name, expected, &compare::compare(&vector.scenario, expected, &seen));
//! assert!(!report.passed()); // SessionStart alone is far from Claude Code
//! println!("{report}");
//! # Ok(())
//! # }
//! ```
//!
//! Unix only: the hooks are `sh` scripts.
#![cfg(unix)]
// No function of the library over 100 lines (the threshold in clippy.toml; the lint is
// pedantic, so it is turned on here, for the library only; CI denies warnings).
#![warn(clippy::too_many_lines)]

pub mod compare;
mod host;
pub mod observe;
mod play;
mod server;
mod vector;

use std::fmt;

pub use crate::{
    compare::{Known, KnownDifferences, Report},
    host::{
        Adapter, Host, Job, MAX_ADAPTER_OUTPUT, MAX_RAN, PLAY_TIMEOUT, SETTLE, play, play_within,
    },
    play::{MAX_HOOKS, MAX_INPUT, Play, Recorded, use_mcp_servers},
    server::{MAX_BODY, MAX_REQUESTS, ModelServer, Request},
    vector::{Answer, FORMAT, MAX_VECTOR, Observed, Scenario, Step, Vector, read_dir, shipped_dir},
};

/// What went wrong, for a person: a vector that does not read, a play that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error saying `what`.
    pub fn new(what: impl fmt::Display) -> Self {
        Error(what.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}
