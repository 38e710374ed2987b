//! What one PreToolUse and one PostToolUse hook add to a tool call, in Claude Code and in
//! tower-agent, with the same hook script: the differential suite's scenario of four Bash calls
//! (`tests/reference`), played without hooks and with a PreToolUse and a PostToolUse hook on
//! `Bash` (the suite's recorder script: it saves its input and answers nothing), through the
//! real Claude Code (`.ci/reference-agents` installs it; played through the `hook-vectors`
//! crate's adapter, as the suite does) and through tower-agent, both against the suite's model
//! server on 127.0.0.1.
//!
//! `cargo bench --all-features --bench reference_hooks`. Criterion measures each of the four
//! plays; then pairs (without, with) run back to back, alternating, and the summary gives the
//! median difference per tool call, so the machine's drift cancels out.
#![cfg(all(unix, feature = "anthropic"))]
#![allow(dead_code, unreachable_pub)]

#[path = "../tests/reference/agent_run.rs"]
mod agent_run;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use criterion::Criterion;
use hook_vectors::{Adapter, Scenario};
use serde_json::{Value, json};

/// Tool calls per play.
const CALLS: usize = 4;

/// Back-to-back pairs for the summary.
const PAIRS: usize = 10;

/// The scenario: `CALLS` answers of one Bash call each, then a text; with `hooks`, a
/// PreToolUse and a PostToolUse hook on `Bash`.
fn scenario(hooks: bool) -> Scenario {
    let mut answers: Vec<Vec<Value>> = (0..CALLS)
        .map(|i| {
            vec![
                json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "Bash",
                "input": {"command": "true", "description": "Nothing"}}),
            ]
        })
        .collect();
    answers.push(vec![json!({"type": "text", "text": "Done."})]);
    let observe = if hooks {
        json!(["PreToolUse", "PostToolUse"])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "about": "bench", "model": "claude-opus-5-5", "steps": [{"prompt": "go"}],
        "answers": answers, "observe": observe,
    }))
    .unwrap()
}

#[derive(Debug, Clone, Copy)]
enum Host {
    ClaudeCode,
    TowerAgent,
}

/// Claude Code through the adapter of the `hook-vectors` crate (installed by
/// `.ci/reference-agents`).
fn claude_code() -> Adapter {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/reference-agents");
    let out = std::process::Command::new("bash")
        .arg(script)
        .output()
        .expect("run .ci/reference-agents");
    assert!(out.status.success(), ".ci/reference-agents failed");
    let program = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let adapter = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/hook-vectors/adapters/claude-code.mjs"
    );
    Adapter::new("node")
        .arg(adapter)
        .env("CLAUDE_CODE", program)
}

async fn play(host: Host, scenario: &Scenario) {
    static CLAUDE: std::sync::OnceLock<Adapter> = std::sync::OnceLock::new();
    let seen = match host {
        Host::ClaudeCode => hook_vectors::play(CLAUDE.get_or_init(claude_code), scenario).await,
        Host::TowerAgent => hook_vectors::play(&agent_run::TowerAgent, scenario).await,
    };
    let seen = seen.unwrap_or_else(|e| panic!("{host:?}: {e}"));
    let results = seen.requests.iter().skip(1).count();
    assert_eq!(results, CALLS, "{host:?}: a play went wrong");
}

async fn timed(host: Host, scenario: &Scenario) -> Duration {
    let start = Instant::now();
    play(host, scenario).await;
    start.elapsed()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (without, with) = (scenario(false), scenario(true));
    let mut c = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .configure_from_args();
    {
        let mut group = c.benchmark_group("reference_hooks");
        for (host, name) in [
            (Host::ClaudeCode, "claude_code"),
            (Host::TowerAgent, "tower_agent"),
        ] {
            for (s, hooks) in [(&without, "no_hooks"), (&with, "pre_and_post")] {
                group.bench_function(format!("{name}/{hooks}"), |b| {
                    b.to_async(&rt).iter(|| play(host, s));
                });
            }
        }
        group.finish();
    }
    c.final_summary();
    println!("\n===== reference hooks summary (medians of {PAIRS} back-to-back pairs) =====");
    for (host, name) in [
        (Host::ClaudeCode, "Claude Code"),
        (Host::TowerAgent, "tower-agent"),
    ] {
        let mut diffs = Vec::new();
        let mut bases = Vec::new();
        for i in 0..PAIRS {
            let (a, b) = rt.block_on(async {
                if i % 2 == 0 {
                    let a = timed(host, &without).await;
                    (a, timed(host, &with).await)
                } else {
                    let b = timed(host, &with).await;
                    (timed(host, &without).await, b)
                }
            });
            bases.push(a.as_secs_f64() * 1e3);
            diffs.push((b.as_secs_f64() - a.as_secs_f64()) * 1e3 / CALLS as f64);
        }
        println!(
            "{name}: a play of {CALLS} calls without hooks {:.1} ms; a PreToolUse + PostToolUse \
             hook add {:.2} ms per tool call",
            median(bases),
            median(diffs)
        );
    }
}
