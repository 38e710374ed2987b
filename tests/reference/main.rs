//! The differential suite: Claude Code's hooks measured against Claude Code itself.
//!
//! A scenario (settings, hook answers, prompts, the model's scripted answers) is played
//! through the real Claude Code — the version `.ci/reference-agents` pins, installed on first
//! use — and through tower-agent, both against one model server on 127.0.0.1 that records
//! every request. What each hook was given, in order, and what the hooks changed in the
//! model's next requests are compared field by field, with session ids, paths, times and
//! durations normalised and nothing else.
//!
//! Each scenario's reference results are checked in as a vector (`vectors/*.json`: the
//! scenario and what Claude Code did, with its version), so tower-agent is checked against
//! them wherever Claude Code is not installed. The suite also plays every vector through
//! Claude Code again and fails if Claude Code no longer does what the vector says. To record
//! the vectors again (after a new scenario, or for a new pinned version):
//!
//! ```text
//! TOWER_AGENT_RECORD=1 cargo test --all-features --test reference
//! ```
//!
//! Differences tower-agent keeps on purpose are listed in [`compare::KEPT`], each with its
//! reason; any other difference fails.
#![cfg(all(unix, feature = "anthropic"))]

mod agent_run;
mod claude;
mod compare;
mod observe;
mod scenario;
mod server;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use self::{
    observe::Normaliser,
    scenario::{Play, Scenario},
    server::ModelServer,
};

/// The version of the vectors' format.
pub(crate) const FORMAT: &str = "hook-vectors/0.1";

/// What a play of a scenario gave to compare.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Observed {
    /// Each hook run, in the order they started: its event, the answer it gave, the working
    /// directory, `$CLAUDE_PROJECT_DIR`, whether `$CLAUDE_ENV_FILE` was set, and its input.
    pub(crate) hooks: Vec<Value>,
    /// Per model request, what the hooks put in it ([`observe::effects`]).
    pub(crate) requests: Vec<Value>,
    /// `ran.log` in the project (the scenarios' commands append to it): what the tools ran.
    pub(crate) ran: String,
}

/// A vector file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Vector {
    pub(crate) format: String,
    pub(crate) scenario: Scenario,
    /// Absent in a scenario not yet recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) recorded_from: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expected: Option<Observed>,
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/vectors")
}

/// Every vector, by file name, in name order.
fn vectors() -> Vec<(String, Vector)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let v: Vector =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(v.format, FORMAT, "{}", p.display());
            (p.file_stem().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// Which agent plays.
#[derive(Debug, Clone, Copy)]
enum Host {
    ClaudeCode,
    TowerAgent,
}

async fn observe(scenario: &Scenario, host: Host) -> Observed {
    let play = Play::new(scenario);
    let server = ModelServer::start(play.answers(scenario)).await;
    match host {
        Host::ClaudeCode => {
            claude::play(scenario, &play, &server).await;
        }
        Host::TowerAgent => {
            agent_run::play(scenario, &play, &server).await;
        }
    }
    let mut norm = Normaliser::new(&play);
    let hooks = play
        .hooks()
        .into_iter()
        .map(|h| {
            json!({
                "event": h.input["hook_event_name"],
                "answer": h.answer,
                "cwd": norm.text(&h.cwd),
                "project_dir": norm.text(&h.project_dir),
                "env_file": h.env_file,
                "input": norm.input(&h.input),
            })
        })
        .collect();
    let hooks = in_start_order(hooks);
    let requests = observe::effects(&server.requests(), &norm);
    let ran = std::fs::read_to_string(play.project().join("ran.log")).unwrap_or_default();
    Observed {
        hooks,
        requests,
        ran,
    }
}

/// `hooks` with each run of one event (hooks that run in parallel, whose start order is
/// chance) sorted by answer and tool call, so a vector recorded again differs only where
/// something did.
fn in_start_order(mut hooks: Vec<Value>) -> Vec<Value> {
    let key = |h: &Value| {
        format!(
            "{} {}",
            h["answer"].as_str().unwrap_or(""),
            h["input"]["tool_use_id"].as_str().unwrap_or("")
        )
    };
    let mut start = 0;
    while start < hooks.len() {
        let event = hooks[start]["event"].clone();
        let end = hooks[start..]
            .iter()
            .position(|h| h["event"] != event)
            .map_or(hooks.len(), |n| start + n);
        hooks[start..end].sort_by_key(key);
        start = end;
    }
    hooks
}

fn recording() -> bool {
    std::env::var_os("TOWER_AGENT_RECORD").is_some_and(|v| v == "1")
}

/// Claude Code still does what each vector says (or, when recording, the vectors are written
/// from what it does now).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_does_what_the_vectors_say() {
    let mut failures = Vec::new();
    for (name, mut vector) in vectors() {
        let seen = observe(&vector.scenario, Host::ClaudeCode).await;
        if recording() {
            vector.recorded_from =
                Some(json!({"program": "Claude Code", "version": claude::VERSION}));
            vector.expected = Some(seen);
            let text = serde_json::to_string_pretty(&vector).unwrap() + "\n";
            std::fs::write(vectors_dir().join(format!("{name}.json")), text).unwrap();
            continue;
        }
        let expected = vector.expected.as_ref().unwrap_or_else(|| {
            panic!("{name}: not recorded (TOWER_AGENT_RECORD=1 cargo test --all-features --test reference)")
        });
        let diffs = compare::compare(expected, &seen);
        if !diffs.is_empty() {
            let lines: Vec<_> = diffs.into_iter().map(|d| d.text).collect();
            failures.push(format!("{name}:\n  {}", lines.join("\n  ")));
        }
    }
    assert!(
        failures.is_empty(),
        "Claude Code {} no longer does what these vectors say:\n{}",
        claude::VERSION,
        failures.join("\n")
    );
}

/// tower-agent does what Claude Code does, in every vector, but for the differences it keeps
/// on purpose ([`compare::KEPT`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tower_agent_does_what_claude_code_does() {
    if recording() {
        return;
    }
    let mut report = compare::Report::default();
    let mut used = vec![false; compare::KEPT.len() + compare::OPEN.len()];
    for (name, vector) in vectors() {
        let Some(expected) = &vector.expected else {
            panic!("{name}: not recorded");
        };
        let seen = observe(&vector.scenario, Host::TowerAgent).await;
        let diffs = compare::compare(expected, &seen);
        report.add(&name, expected, &diffs, &mut used);
    }
    eprintln!("{report}");
    assert!(
        report.unexplained.is_empty(),
        "differences from Claude Code {} that no list explains:\n{}",
        claude::VERSION,
        report.unexplained.join("\n")
    );
    // A listed difference that no longer shows is gone: its entry goes too.
    let stale: Vec<_> = compare::KEPT
        .iter()
        .chain(compare::OPEN)
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(k, _)| format!("{k:?}"))
        .collect();
    assert!(
        stale.is_empty(),
        "listed differences that no longer show:\n{}",
        stale.join("\n")
    );
}

/// Every vector is well formed: recorded from the pinned version, its scenario's hooks all
/// answered by name.
#[test]
fn vectors_are_recorded_from_the_pinned_version() {
    let all = vectors();
    assert!(!all.is_empty());
    for (name, v) in all {
        let from = v
            .recorded_from
            .unwrap_or_else(|| panic!("{name}: not recorded"));
        assert_eq!(from["version"], claude::VERSION, "{name}");
        let settings = v.scenario.settings();
        let _: &Map<String, Value> = settings["hooks"].as_object().unwrap();
    }
}

/// The guide page lists every difference kept on purpose (by its field or event).
#[test]
fn the_guide_lists_the_differences_kept() {
    let guide = include_str!("../../src/guide/claude_code.md");
    let section = guide
        .split("## Differences kept on purpose")
        .nth(1)
        .expect("the section");
    for k in compare::KEPT {
        let named = [k.field, k.event]
            .iter()
            .filter(|n| !n.starts_with('<') && **n != "*")
            .any(|n| section.contains(n));
        let scenario_named = k.scenario != "*" && k.field.starts_with('<');
        assert!(named || scenario_named, "not in the guide: {k:?}");
    }
}
