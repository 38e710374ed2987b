//! The AGENT-HOOKS 0.1 conformance kit (AH-CTK) through tower-agent's own loop: every vector
//! of the pinned kit (`agent-hooks-sdk` 0.1.0b3, 75 vectors, provisioned by
//! `.ci/agent-hooks-ctk`) run by the SDK's runner (`agent_hooks::ctk::run_vector`) against a
//! harness ([`harness::TowerAgentHarness`]) that drives [`Agent`](tower_agent::Agent) itself —
//! the production path: the vector's model is a loopback server speaking the Chat Completions
//! API to the real OpenAI provider, its tools are tool services, its interceptors an
//! [`AgentHooks`](tower_agent::agent_hooks::AgentHooks) set. The report (pass / skip with the
//! capability that gates it / fail, grouped by the kit's parts) is printed and written to
//! `<target dir>/agent-hooks-ctk/REPORT.md`.
//!
//! Run it alone with `cargo test --all-features --test agent_hooks`.
#![cfg(all(feature = "agent-hooks", feature = "openai"))]

#[path = "../loopback/mod.rs"]
mod loopback;

mod harness;
mod host;
mod host_tests;

use std::{collections::BTreeMap, path::PathBuf};

use agent_hooks::ctk::{VectorResult, run_vector};
use serde_json::Value;

/// How many vectors the pinned kit holds.
const KIT_VECTORS: usize = 75;

/// The kit's vectors directory, provisioned by the project's own `.ci/agent-hooks-ctk` into
/// the target directory (once; a lock makes concurrent test binaries take turns).
fn vectors_dir() -> PathBuf {
    // The test binary is `<target dir>/<profile>/deps/<name>`.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.ancestors().nth(3).unwrap().join("agent-hooks-ctk");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/agent-hooks-ctk");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs .ci/agent-hooks-ctk");
    assert!(
        out.status.success(),
        "{} failed ({}): the conformance kit needs python3 with pip",
        script.display(),
        out.status
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The vectors, each with its text (the harness's model answers with the vector's own
/// literals, byte for byte).
fn vectors() -> Vec<(Value, String)> {
    let dir = vectors_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (serde_json::from_str(&text).unwrap(), text)
        })
        .collect()
}

/// The report, grouped by part (spec §13.3: the per-part report is the claim).
fn report(results: &[(VectorResult, Vec<String>)]) -> String {
    let mut parts: BTreeMap<&str, Vec<&(VectorResult, Vec<String>)>> = BTreeMap::new();
    for r in results {
        let part = if r.0.part.is_empty() {
            "core"
        } else {
            &r.0.part
        };
        parts.entry(part).or_default().push(r);
    }
    let count = |s: &str| results.iter().filter(|r| r.0.status == s).count();
    let mut out = format!(
        "# AH-CTK report: tower-agent {}, agent-hooks-sdk 0.1.0-beta.3 (Rust), vectors of agent-hooks-sdk 0.1.0b3\n\n\
         {} vectors: {} pass, {} skip, {} fail\n\n| Part | Vector | Status | Detail |\n|---|---|---|---|\n",
        env!("CARGO_PKG_VERSION"),
        results.len(),
        count("pass"),
        count("skip"),
        count("fail"),
    );
    for (part, rs) in parts {
        for (r, ours) in rs {
            let mut detail = r.detail.clone();
            for f in r.failures.iter().chain(ours) {
                detail.push_str(&format!("{}; ", f.replace('\n', " ").replace('|', "\\|")));
            }
            out.push_str(&format!(
                "| {part} | {} | {} | {detail} |\n",
                r.id, r.status
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vector_of_the_kit_passes_through_the_agent_loop() {
    let vectors = vectors();
    assert_eq!(vectors.len(), KIT_VECTORS, "the pinned kit's vectors");
    let mut results = Vec::new();
    for (vector, text) in &vectors {
        let mut harness = harness::TowerAgentHarness::new(text);
        let mut result = run_vector(&mut harness, vector).await;
        // The kit's runner does not check these yet (HARNESS.md, "Incremental mediation"):
        // this suite does.
        let ours = harness.check_streaming(&vector["expect"]);
        if !ours.is_empty() && result.status == "pass" {
            result.status = "fail";
        }
        results.push((result, ours));
    }
    let report = report(&results);
    println!("{report}");
    let path = vectors_dir().join("../../REPORT.md");
    std::fs::write(&path, &report).unwrap();
    let not_passed: Vec<String> = results
        .iter()
        .filter(|r| r.0.status != "pass")
        .map(|r| {
            format!(
                "{} {}: {} {:?} {:?}",
                r.0.id, r.0.status, r.0.detail, r.0.failures, r.1
            )
        })
        .collect();
    assert!(
        not_passed.is_empty(),
        "{} of {}:\n{}",
        not_passed.len(),
        results.len(),
        not_passed.join("\n")
    );
}
