//! The differential suite: Claude Code's hooks measured against Claude Code itself.
//!
//! A scenario (settings, hook answers, prompts, the model's scripted answers) is played
//! through the real Claude Code — the version `.ci/reference-agents` pins, installed on first
//! use — and through tower-agent, both against one model server on 127.0.0.1 that records
//! every request. What each hook was given, in order, and what the hooks changed in the
//! model's next requests are compared field by field, with session ids, paths, times and
//! durations normalised and nothing else.
//!
//! Each scenario's reference results are checked in as a vector (the `hook-vectors` crate of
//! this workspace: its `vectors/*.json` hold the scenario and what Claude Code did, with its
//! version; the crate plays them), so tower-agent is checked against them wherever Claude Code
//! is not installed. Claude Code plays through the crate's own adapter
//! (`hook-vectors/adapters/claude-code.mjs`), as any other host would. The suite also plays every vector through
//! Claude Code again and fails if Claude Code no longer does what the vector says. To record
//! the vectors again (after a new scenario, or for a new pinned version):
//!
//! ```text
//! TOWER_AGENT_RECORD=1 cargo test --all-features --test reference
//! ```
//!
//! `TOWER_AGENT_VECTORS=name,name` plays only those vectors (the check for listed differences
//! no vector showed is then skipped).
//!
//! Differences tower-agent keeps on purpose are listed in [`compare::KEPT`], each with its
//! reason, those not fixed yet in [`compare::OPEN`]; any other difference fails.
#![cfg(all(unix, feature = "anthropic"))]

mod agent_run;
mod codex;
mod compare;
mod coverage;
mod gemini;
#[path = "../support/mcp_servers.rs"]
mod mcp_servers;

use std::{path::PathBuf, process::Stdio, sync::OnceLock};

use hook_vectors::{
    Adapter, Host, KnownDifferences, Report, Vector, compare::compare, play, read_dir, shipped_dir,
};
use serde_json::{Map, Value, json};

/// The Claude Code version the vectors are recorded from (`.ci/reference-agents` pins it).
const VERSION: &str = "2.1.332";

/// The `claude` program, installed on first use by `.ci/reference-agents`.
fn claude_program() -> PathBuf {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/reference-agents");
            let out = std::process::Command::new("bash")
                .arg(script)
                .stderr(Stdio::inherit())
                .output()
                .expect("run .ci/reference-agents");
            assert!(out.status.success(), ".ci/reference-agents failed");
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        })
        .clone()
}

/// Claude Code, through the adapter the `hook-vectors` crate ships.
fn claude_code() -> Adapter {
    let adapter = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/hook-vectors/adapters/claude-code.mjs"
    );
    Adapter::new("node")
        .arg(adapter)
        .env("CLAUDE_CODE", claude_program())
}

/// Every vector, by name.
fn vectors() -> Vec<(String, Vector)> {
    read_dir(&shipped_dir()).unwrap()
}

/// The vectors to play: those `TOWER_AGENT_VECTORS` names (comma-separated), else all.
fn played() -> Vec<(String, Vector)> {
    played_from(&shipped_dir())
}

/// The vectors of `dir` to play: those `TOWER_AGENT_VECTORS` names, else all. When one has
/// MCP servers, the project's reference servers are installed for them.
pub(crate) fn played_from(dir: &std::path::Path) -> Vec<(String, Vector)> {
    let mut all = read_dir(dir).unwrap();
    if let Some(names) = only() {
        all.retain(|(n, _)| names.contains(n));
    }
    if all.iter().any(|(_, v)| !v.scenario.mcp_servers.is_empty()) {
        hook_vectors::use_mcp_servers(mcp_servers::servers_dir());
    }
    all
}

/// Plays `vectors` (recorded from `program`) through `host`, each play and its expectation
/// first made comparable by `normalise`; fails on a difference `known` does not explain, and,
/// when every vector played, on a listed difference that no longer shows.
pub(crate) async fn differential<H: Host>(
    program: &str,
    vectors: Vec<(String, Vector)>,
    host: &H,
    known: KnownDifferences,
    normalise: fn(&mut hook_vectors::Observed),
) {
    let mut report = Report::new(known);
    for (name, vector) in vectors {
        let Some(mut expected) = vector.expected.clone() else {
            panic!("{name}: not recorded");
        };
        let mut seen = play(host, &vector.scenario)
            .await
            .unwrap_or_else(|e| panic!("{name}: tower-agent: {e}"));
        normalise(&mut expected);
        normalise(&mut seen);
        report.add(
            &name,
            &expected,
            &compare(&vector.scenario, &expected, &seen),
        );
    }
    eprintln!("{report}");
    assert!(
        report.passed(),
        "differences from {program} that no list explains:\n{}",
        report.unexplained.join("\n")
    );
    if only().is_some() {
        return;
    }
    // A listed difference that no longer shows is gone: its entry goes too.
    let stale: Vec<_> = report.stale().iter().map(|k| format!("{k:?}")).collect();
    assert!(
        stale.is_empty(),
        "listed differences that no longer show:\n{}",
        stale.join("\n")
    );
}

/// The vectors `TOWER_AGENT_VECTORS` names, if it is set.
fn only() -> Option<Vec<String>> {
    let names = std::env::var("TOWER_AGENT_VECTORS").ok()?;
    Some(names.split(',').map(|n| n.trim().to_owned()).collect())
}

/// The differences tower-agent knows of.
fn known() -> KnownDifferences {
    KnownDifferences {
        kept: compare::KEPT.to_vec(),
        open: compare::OPEN.to_vec(),
    }
}

fn recording() -> bool {
    std::env::var_os("TOWER_AGENT_RECORD").is_some_and(|v| v == "1")
}

/// Claude Code still does what each vector says (or, when recording, the vectors are written
/// from what it does now).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_does_what_the_vectors_say() {
    let mut failures = Vec::new();
    let claude = claude_code();
    for (name, mut vector) in played() {
        let seen = play(&claude, &vector.scenario)
            .await
            .unwrap_or_else(|e| panic!("{name}: Claude Code: {e}"));
        if recording() {
            vector.recorded_from = Some(json!({"program": "Claude Code", "version": VERSION}));
            vector.expected = Some(seen);
            vector
                .write(&shipped_dir().join(format!("{name}.json")))
                .unwrap();
            continue;
        }
        let expected = vector.expected.as_ref().unwrap_or_else(|| {
            panic!("{name}: not recorded (TOWER_AGENT_RECORD=1 cargo test --all-features --test reference)")
        });
        let diffs = compare(&vector.scenario, expected, &seen);
        if !diffs.is_empty() {
            let lines: Vec<_> = diffs.into_iter().map(|d| d.text).collect();
            failures.push(format!("{name}:\n  {}", lines.join("\n  ")));
        }
    }
    assert!(
        failures.is_empty(),
        "Claude Code {} no longer does what these vectors say:\n{}",
        VERSION,
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
    let program = format!("Claude Code {VERSION}");
    differential(
        &program,
        played(),
        &agent_run::TowerAgent,
        known(),
        hand_back_reports,
    )
    .await;
}

/// The `Agent` tool's results in the model's requests as the subagent's report alone: Claude
/// Code frames a subagent's report in text of its own (a `[Subagent hand-back]` warning,
/// every line of the report indented by two spaces, then the agent's id with a SendMessage
/// hint and its usage), which the crate does not add (kept: the guide's table). What the
/// hooks add is compared as it is.
fn hand_back_reports(observed: &mut hook_vectors::Observed) {
    const FRAME: &str = "[Subagent hand-back] ";
    const REPORT: &str = "The report follows:\n";
    for request in observed.requests.iter_mut() {
        for item in request.as_array_mut().into_iter().flatten() {
            let Some(Value::String(content)) = item.get_mut("content") else {
                continue;
            };
            let Some(at) = content.find(FRAME) else {
                continue;
            };
            let (note, framed) = content.split_at(at);
            let report = framed.split_once(REPORT).map_or("", |(_, r)| r);
            let report = report.split_once("\nagentId: ").map_or(report, |(r, _)| r);
            let dedent = |text: &str| -> String {
                let lines: Vec<&str> = text
                    .lines()
                    .map(|l| l.strip_prefix("  ").unwrap_or(l))
                    .collect();
                lines.join("\n")
            };
            *content = format!("{}{}", dedent(note), dedent(report));
        }
    }
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
        assert_eq!(from["version"], VERSION, "{name}");
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
        let named = [&k.field, &k.event]
            .iter()
            .filter(|n| !n.starts_with('<') && ***n != "*")
            .any(|n| section.contains(n.as_ref()));
        let scenario_named = k.scenario != "*" && k.field.starts_with('<');
        assert!(named || scenario_named, "not in the guide: {k:?}");
    }
}
