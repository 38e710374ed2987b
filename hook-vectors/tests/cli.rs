//! The `hook-vectors` runner as another host's author uses it: real adapters (the Claude Code
//! one the crate ships, driving the real program; shell scripts that fail in each way an
//! adapter can), real processes, the report and the exit code.
#![cfg(unix)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::OnceLock,
};

use hook_vectors::{Vector, read_dir, shipped_dir};

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hook-vectors"))
        .args(args)
        .env("HOOK_VECTORS_MCP_SERVERS", mcp_servers())
        .output()
        .expect("run hook-vectors")
}

/// The MCP reference servers of the vectors' `mcp_servers`, which the workspace's
/// `.ci/mcp-servers` installs, pinned, on first use: their directory.
fn mcp_servers() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/mcp-servers");
        let out = Command::new("bash")
            .arg(script)
            .stderr(Stdio::inherit())
            .output()
            .expect("run .ci/mcp-servers");
        assert!(out.status.success(), ".ci/mcp-servers failed");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
    .clone()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An agent the workspace's `.ci/reference-agents` installs, pinned, on first use (`args`: none
/// for Claude Code, `codex` for Codex, `gemini` for Gemini CLI): its program.
fn reference_agent(args: &[&str]) -> PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/reference-agents");
    let out = Command::new("bash")
        .arg(script)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run .ci/reference-agents");
    assert!(out.status.success(), ".ci/reference-agents {args:?} failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The pinned Claude Code.
fn claude() -> PathBuf {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| reference_agent(&[])).clone()
}

/// The pinned Codex.
fn codex() -> PathBuf {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| reference_agent(&["codex"])).clone()
}

/// The pinned Gemini CLI (its bundle, `gemini.js`).
fn gemini() -> PathBuf {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| reference_agent(&["gemini"])).clone()
}

fn gemini_adapter() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/adapters/gemini.mjs").to_owned()
}

fn gemini_vectors() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/vectors-gemini").to_owned()
}

fn codex_adapter() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/adapters/codex.mjs").to_owned()
}

fn codex_vectors() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/vectors-codex").to_owned()
}

fn adapter() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/adapters/claude-code.mjs").to_owned()
}

/// A shell script adapter in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn list_names_every_vector_shipped() {
    let out = runner(&["list"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout);
    let all = read_dir(&shipped_dir()).unwrap();
    assert!(all.len() >= 20, "{} vectors", all.len());
    for (name, v) in &all {
        assert!(
            listed.contains(&format!("{name}: {}", v.scenario.about)),
            "{name}"
        );
        assert!(v.expected.is_some(), "{name}: not recorded");
    }
}

/// Claude Code, through the adapter the crate ships, passes the vectors recorded from it:
/// the whole contract (job file, model server, recorder, comparison) end to end.
#[test]
fn claude_code_passes_through_its_adapter() {
    let program = claude();
    let out = Command::new(env!("CARGO_BIN_EXE_hook-vectors"))
        .args([
            "run",
            "--only",
            "one_tool_call",
            "--only",
            "pre_tool_use_deny_json",
        ])
        .args(["--", "node", &adapter()])
        .env("CLAUDE_CODE", &program)
        .output()
        .unwrap();
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("2 vectors") && report.contains("0 unexplained"),
        "{report}"
    );
}

/// `record` writes what the host does as the expectation; played again, it passes.
#[test]
fn record_then_run_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = shipped_dir().join("exit_1_is_not_blocking.json");
    let mut vector = Vector::read(&shipped).unwrap();
    vector.expected = None;
    vector.recorded_from = None;
    vector.write(&dir.path().join("mine.json")).unwrap();
    let vectors = dir.path().to_str().unwrap();
    let program = claude();
    let record = Command::new(env!("CARGO_BIN_EXE_hook-vectors"))
        .args(["record", "--program", "Claude Code", "--version", "test"])
        .args(["--vectors", vectors, "--", "node", &adapter()])
        .env("CLAUDE_CODE", &program)
        .output()
        .unwrap();
    assert!(record.status.success(), "{}", text(&record));
    let recorded = Vector::read(&dir.path().join("mine.json")).unwrap();
    assert_eq!(recorded.recorded_from.unwrap()["version"], "test");
    let shipped = Vector::read(&shipped).unwrap();
    assert_eq!(
        recorded.expected, shipped.expected,
        "recorded again, the same"
    );
}

/// A host that plays nothing differs everywhere: the report says so and the exit code is 1;
/// a known-differences file that names each kind of difference makes it pass, and says which
/// entries no vector needed.
#[test]
fn differences_fail_unless_known() {
    let dir = tempfile::tempdir().unwrap();
    let idle = script(dir.path(), "idle", "exit 0");
    let out = runner(&["run", "--only", "one_tool_call", "--", &idle]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("UNEXPLAINED: one_tool_call: SessionStart (observe #0): fired in the reference, not here"), "{report}");
    let known = dir.path().join("known.json");
    std::fs::write(
        &known,
        r#"{"kept": [
            {"scenario": "*", "event": "*", "field": "<fired>", "reason": "it fires no hook"},
            {"scenario": "*", "event": "*", "field": "<requests>", "reason": "it calls no model"},
            {"scenario": "*", "event": "*", "field": "<ran>", "reason": "it runs no tool"}],
          "open": [
            {"scenario": "*", "event": "*", "field": "<order>", "reason": "never seen"}]}"#,
    )
    .unwrap();
    let known = known.to_str().unwrap();
    let out = runner(&["run", "--known", known, "--", &idle]);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("0 unexplained"), "{report}");
    assert!(
        report.contains("known but not seen (its entry can go)") && report.contains("<order>"),
        "{report}"
    );
}

/// An adapter that fails is named with its exit status and the end of its output; one past
/// the time limit is stopped, and what it started dies with it.
#[test]
fn failing_and_hanging_adapters_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let failing = script(dir.path(), "failing", "echo 'no model here' >&2; exit 3");
    let out = runner(&["run", "--only", "one_tool_call", "--", &failing]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("NOT PLAYED: one_tool_call: adapter exited with exit status: 3")
            && report.contains("no model here"),
        "{report}"
    );
    let pid_file = dir.path().join("pid");
    let hanging = script(
        dir.path(),
        "hanging",
        &format!("sleep 600 & echo $! > {}; wait", pid_file.display()),
    );
    let out = runner(&[
        "run",
        "--only",
        "one_tool_call",
        "--timeout",
        "2",
        "--",
        &hanging,
    ]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("not finished in 2 s"), "{report}");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let proc = PathBuf::from(format!("/proc/{}", pid.trim()));
    // The group was killed when the play ended; the zombie, if any, is reaped by init.
    let alive = std::fs::read_to_string(proc.join("stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false);
    assert!(!alive, "the adapter's child outlived its play");
}

/// Bad input gets a clear error and exit code 2: an unknown vector, a vector that does not
/// read, a usage error.
#[test]
fn bad_input_is_named() {
    let out = runner(&["run", "--only", "no_such", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("no vector \"no_such\""),
        "{}",
        text(&out)
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.json"),
        "{\"format\": \"hook-vectors/0.1\"",
    )
    .unwrap();
    let out = runner(&["list", "--vectors", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("broken.json"), "{}", text(&out));
    std::fs::write(
        dir.path().join("broken.json"),
        r#"{"format": "hook-vectors/0.1", "scenario": {"about": "", "model": "m",
            "steps": [{"prompt": "p"}], "answers": [[]],
            "hooks": {"Stop": [{"hooks": [{"answer": "../../etc/passwd"}]}]}}}"#,
    )
    .unwrap();
    let out = runner(&["list", "--vectors", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("letters, digits, `_` and `-` only"),
        "{}",
        text(&out)
    );
    let out = runner(&["run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("usage:"), "{}", text(&out));
}

/// An agent's program and adapter, and the vectors recorded from it.
struct Recorded<'a> {
    /// As the vectors' `recorded_from.program` names it.
    program: &'a str,
    version: &'a str,
    vectors: String,
    adapter: String,
    /// The variable the adapter reads the program from, and the program.
    env: (&'a str, PathBuf),
}

impl Recorded<'_> {
    /// The program, through its adapter, agrees with every vector recorded from it (at least
    /// `min` of them): the adapter's translation and the program's hooks are deterministic,
    /// and the pinned version still does what the vectors say.
    fn passes(&self, min: usize) {
        let all = read_dir(Path::new(&self.vectors)).unwrap();
        assert!(all.len() >= min, "{} {} vectors", all.len(), self.program);
        for (name, v) in &all {
            let from = v.recorded_from.as_ref().expect(name);
            assert_eq!(from["program"], self.program, "{name}");
            assert_eq!(from["version"], self.version, "{name}");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_hook-vectors"))
            .args(["run", "--vectors", &self.vectors])
            .args(["--", "node", &self.adapter])
            .env(self.env.0, &self.env.1)
            .output()
            .unwrap();
        let report = text(&out);
        assert!(out.status.success(), "{report}");
        assert!(
            report.contains(&format!("{} vectors", all.len()))
                && report.contains("0 unexplained")
                && report.contains("0 vectors not played"),
            "{report}"
        );
    }
}

/// Codex, through its adapter, agrees with every vector recorded from it.
#[test]
fn codex_passes_the_vectors_recorded_from_it() {
    Recorded {
        program: "Codex",
        version: "0.169.0",
        vectors: codex_vectors(),
        adapter: codex_adapter(),
        env: ("CODEX", codex()),
    }
    .passes(40);
}

/// What an adapter cannot play is reported as not played, with its reason, before anything
/// of the program runs (its path is one that does not exist): a model switch, a compaction, a
/// plugin — through Codex's adapter and Gemini CLI's.
#[test]
fn adapters_do_not_play_what_their_program_cannot() {
    let cases = [
        ("model_switch_sdk", "set_model is not supported"),
        ("compact_manual", "compact is not supported"),
        (
            "plugin_hooks",
            "a Claude Code plugin (`--plugin-dir`) is not supported",
        ),
    ];
    let adapters = [
        (codex_adapter(), "CODEX", "/nonexistent/codex"),
        (gemini_adapter(), "GEMINI", "/nonexistent/gemini.js"),
    ];
    for (adapter, var, program) in &adapters {
        for (name, why) in cases {
            let dir = tempfile::tempdir().unwrap();
            let file = format!("{name}.json");
            let vector = Vector::read(&shipped_dir().join(&file)).unwrap();
            vector.write(&dir.path().join(&file)).unwrap();
            let out = Command::new(env!("CARGO_BIN_EXE_hook-vectors"))
                .args(["run", "--vectors", dir.path().to_str().unwrap()])
                .args(["--", "node", adapter])
                .env(var, program)
                .output()
                .unwrap();
            let report = text(&out);
            assert_eq!(out.status.code(), Some(1), "{adapter}: {report}");
            let not_played = format!("NOT PLAYED: {name}: adapter exited with exit status: 3");
            assert!(
                report.contains(&not_played) && report.contains(why),
                "{adapter}: {report}"
            );
        }
    }
}

/// For a model Codex knows, its tools are its code mode's `exec` (a script calling
/// `tools.exec_command`), and a call's id is Codex's own `exec-<uuid>`: the adapter translates
/// that too, and the normaliser numbers the id, so a recording plays again the same.
#[test]
fn codex_code_mode_records_and_plays_again() {
    let program = codex();
    let dir = tempfile::tempdir().unwrap();
    let mut vector = Vector::read(&Path::new(&codex_vectors()).join("one_tool_call.json")).unwrap();
    vector.scenario.model = "gpt-6.1-sol".into();
    vector.expected = None;
    vector.recorded_from = None;
    let path = dir.path().join("code_mode.json");
    vector.write(&path).unwrap();
    let vectors = dir.path().to_str().unwrap();
    let record: &[&str] = &["record", "--program", "Codex", "--version", "test"];
    for command in [record, &["run"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_hook-vectors"))
            .args(command)
            .args(["--vectors", vectors, "--", "node", &codex_adapter()])
            .env("CODEX", &program)
            .output()
            .unwrap();
        assert!(out.status.success(), "{command:?}: {}", text(&out));
    }
    let recorded = Vector::read(&path).unwrap().expected.unwrap();
    let pre = recorded
        .hooks
        .iter()
        .find(|h| h["event"] == "PreToolUse")
        .unwrap();
    assert_eq!(pre["input"]["tool_use_id"], "<tool_use-1>", "{pre}");
    assert_eq!(
        pre["input"]["tool_input"]["command"],
        "echo hk-ran >> ran.log; echo hello-from-bash"
    );
    assert_eq!(recorded.ran, "hk-ran\n");
    assert_eq!(
        recorded.requests[1][0]["content"], "hello-from-bash\n",
        "{:?}",
        recorded.requests
    );
}

/// Gemini CLI, through its adapter (Gemini API to Messages API and back, Claude Code's hooks
/// to Gemini's settings), agrees with every vector recorded from it.
#[test]
fn gemini_passes_the_vectors_recorded_from_it() {
    Recorded {
        program: "Gemini CLI",
        version: "0.61.0",
        vectors: gemini_vectors(),
        adapter: gemini_adapter(),
        env: ("GEMINI", gemini()),
    }
    .passes(50);
}

/// A tool other than Bash fails the play through Gemini CLI with the adapter's reason (its
/// tools are not Claude Code's): the play is reported, not recorded as if Gemini had answered.
#[test]
fn gemini_fails_a_tool_it_cannot_translate() {
    let program = gemini();
    let dir = tempfile::tempdir().unwrap();
    let vector = Vector::read(&shipped_dir().join("tool_read.json")).unwrap();
    vector.write(&dir.path().join("tool_read.json")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hook-vectors"))
        .args(["run", "--vectors", dir.path().to_str().unwrap()])
        .args(["--", "node", &gemini_adapter()])
        .env("GEMINI", &program)
        .output()
        .unwrap();
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("NOT PLAYED: tool_read: adapter exited with exit status: 1")
            && report.contains("the Gemini adapter translates text and Bash calls only"),
        "{report}"
    );
}
