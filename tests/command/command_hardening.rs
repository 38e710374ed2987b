//! Command hooks under hostile output (issue 10): persistent hooks printing bytes that are
//! not UTF-8 or lines without end, a hook's bad `updatedInput`, transcript file names, and
//! property tests over settings and matchers. Real processes (bash and python3 scripts), real
//! files.

use crate::support;

use std::{
    path::PathBuf,
    process::Command,
    sync::{Arc, Mutex},
    time::Instant,
};

use serde_json::{Value, json};
use support::{
    command::{Scripts, agent, tool_texts, warnings},
    passed, peak_rss_kib, reported_number, rerun,
};
use tower_agent::{
    Agent, AgentRequest, BoxError, command::CommandHooks, model::ScriptedModel, tool::tool_fn,
};

// ===== helpers =====

/// Writes `persistent.sh`, a persistent bash hook that runs `each` for each event line it
/// reads, with `$id` the event's id and `$n` how many events it has read; returns its path.
fn persistent_hook(s: &Scripts, each: &str) -> String {
    let serve = r#"n=0
while IFS= read -r line; do
  n=$((n+1))
  id=$(printf '%s' "$line" | sed -E 's/^\{"id":([0-9]+),.*/\1/')"#;
    s.bash("persistent.sh", &format!("{serve}\n{each}\ndone"))
}

/// The model calls `bash` once per command (one step each), then answers "done".
fn calls_bash(commands: &[&str]) -> ScriptedModel {
    let mut model = ScriptedModel::new();
    for command in commands {
        model = model.tool_call("bash", json!({ "command": command }));
    }
    model.text("done")
}

// ===== 1(a), 1(b): bytes that are not UTF-8 are data =====

/// Runs a [`persistent_hook`] that runs `answer` for each event, on two `bash` calls. Checks
/// that one process denied both alike, that the tool did not run and that the hook was not
/// taken for dead; returns the denial.
async fn one_process_denies_twice(answer: &str) -> String {
    let s = Scripts::new();
    let hook = persistent_hook(&s, answer);
    let (hooks, warned) = warnings(
        s.pre_tool_use(&hook, json!({ "persistent": true, "timeout": 20 }))
            .into_hooks(),
    );
    let (builder, seen) = agent(&calls_bash(&["rm -rf /", "rm -rf ~"]), hooks);
    let resp = builder.build().run("go").await.unwrap();
    let outputs = tool_texts(&resp);
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert_eq!(outputs[0], outputs[1], "one process answered both events");
    assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
    let warned = warned.lock().unwrap().join("\n");
    assert!(!warned.contains("exited before answering"), "{warned}");
    outputs[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_hook_printing_a_non_utf8_line_on_stdout_still_denies() {
    // Each event: a garbage line (not UTF-8, not JSON), then a deny; the deny's own reason
    // holds a byte that is not UTF-8 too.
    let out = one_process_denies_twice(
        r#"  printf '\xff\xfe garbage {"id":\x80\n'
  printf '{"id":%s,"exit":2,"stderr":"denied by pid %s \xff"}\n' "$id" "$$""#,
    )
    .await;
    assert!(
        out.starts_with("PreToolUse:bash hook error: denied by pid "),
        "{out}"
    );
    assert!(
        out.ends_with(" \u{FFFD}"),
        "the byte is decoded lossily: {out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_hook_writing_a_non_utf8_line_on_stderr_survives_and_denies() {
    // A non-UTF-8 stderr line, a pause (a stopped reader would have closed the pipe by
    // then), more stderr (SIGPIPE if it had), then the deny.
    let out = one_process_denies_twice(
        r#"  printf 'bad \xff\xfe bytes\n' >&2
  sleep 0.3
  for i in 1 2 3; do echo "still here $i" >&2; done
  printf '{"id":%s,"exit":2,"stderr":"denied by pid %s"}\n' "$id" "$$""#,
    )
    .await;
    assert!(
        out.starts_with("PreToolUse:bash hook error: denied by pid "),
        "{out}"
    );
}

/// A persistent hook that surrounds each answer with seeded garbage: random bytes (not UTF-8,
/// partial JSON, answers to ids nobody waits for) on stdout and stderr.
const NOISY: &str = r#"import json, os, random, sys
out, err = sys.stdout.buffer, sys.stderr.buffer
for line in sys.stdin:
    event = json.loads(line)
    rng = random.Random(event["id"])
    for _ in range(rng.randrange(6)):
        kind = rng.randrange(5)
        if kind == 0:
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
        elif kind == 1:
            junk = b'{"id": %d, "exit": 2' % event["id"]
        elif kind == 2:
            junk = b'{"id": %d, "exit": 2, "stderr": "not for you"}' % (event["id"] + 1000000)
        elif kind == 3:
            junk = b'{"id": "%d", "exit": 2}' % event["id"]
        else:
            junk = b"\xff\xfe\x00{}[]"
        (err if rng.randrange(2) else out).write(junk.replace(b"\n", b"") + b"\n")
    command = event["input"]["tool_input"]["command"]
    if command.startswith("deny"):
        answer = {"id": event["id"], "exit": 2, "stderr": "no " + command}
    else:
        answer = {"id": event["id"], "exit": 0}
    out.write(json.dumps(answer).encode() + b"\n")
    out.flush(); err.flush()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_hook_surrounded_by_seeded_garbage_answers_every_event_right() {
    let s = Scripts::new();
    let noisy = s.python("noisy.py", NOISY);
    let hooks = s
        .pre_tool_use(
            &noisy,
            json!({ "persistent": true, "timeout": 30, "failClosed": true }),
        )
        .into_hooks();
    // 300 calls in one step (concurrent events), every third one to be denied.
    let commands: Vec<String> = (0..300)
        .map(|i| {
            if i % 3 == 0 {
                format!("deny {i}")
            } else {
                format!("ok {i}")
            }
        })
        .collect();
    let model = ScriptedModel::new()
        .tool_calls(commands.iter().map(|c| ("bash", json!({ "command": c }))))
        .text("done");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    let outputs = tool_texts(&resp);
    assert_eq!(outputs.len(), commands.len());
    for (command, out) in commands.iter().zip(&outputs) {
        if command.starts_with("deny") {
            assert_eq!(out, &format!("PreToolUse:bash hook error: no {command}"));
        } else {
            assert_eq!(out, &format!("ran: {command}"));
        }
    }
    assert_eq!(seen.lock().unwrap().len(), 200);
}

// ===== 5: a line without end costs at most MAX_LINE =====

/// Selects the memory case a re-executed test binary runs.
const MEMORY_CASE: &str = "TOWER_AGENT_HARDENING_CASE";

/// The persistent hook writes 300 MB without a newline on `stream` (`stdout` or `stderr`)
/// for the second event, then ends the line and denies. Prints the peak RSS growth.
fn memory_case(stream: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = Scripts::new();
        let redirect = if stream == "stderr" { ">&2" } else { "" };
        let hook = persistent_hook(
            &s,
            &format!(
                r#"  if [ $n -eq 3 ]; then head -c 300000000 /dev/zero {redirect}; printf '\n' {redirect}; fi
  printf '{{"id":%s,"exit":2,"stderr":"denied %s"}}\n' "$id" "$n""#
            ),
        );
        let hooks = s
            .pre_tool_use(&hook, json!({ "persistent": true, "timeout": 60 }))
            .into_hooks();
        let (builder, seen) = agent(&calls_bash(&["warm up", "rm -rf /"]).per_run(), hooks);
        let agent = builder.build();
        // The first event warms everything up (runtime, process, buffers).
        let resp = agent.run("go").await.unwrap();
        let _ = resp;
        let before = peak_rss_kib();
        let started = Instant::now();
        let resp = agent.run("go").await.unwrap();
        let growth = peak_rss_kib().saturating_sub(before);
        let outputs = tool_texts(&resp);
        assert_eq!(outputs, ["PreToolUse:bash hook error: denied 3", "PreToolUse:bash hook error: denied 4"]);
        assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
        eprintln!("300 MB on {stream} in {:?}", started.elapsed());
        println!("PEAK_GROWTH_KIB={growth}");
    });
}

/// The memory test `test`: in the parent, runs itself again in a child process for `stream`
/// and bounds how much the child's peak RSS grew; in that child, [`memory_case`].
fn costs_little_memory(test: &str, stream: &str) {
    if let Ok(case) = std::env::var(MEMORY_CASE) {
        memory_case(&case);
        return;
    }
    let out = rerun(&support::test_name!(test))
        .env(MEMORY_CASE, stream)
        .output()
        .unwrap();
    passed(&out, test);
    let mib = reported_number(&out, "PEAK_GROWTH_KIB") / 1024;
    assert!(mib < 32, "peak RSS grew by {mib} MiB for a 300 MB line");
}

#[test]
fn a_persistent_hook_printing_300_mb_without_newline_on_stdout_costs_little_memory() {
    costs_little_memory(
        "a_persistent_hook_printing_300_mb_without_newline_on_stdout_costs_little_memory",
        "stdout",
    );
}

#[test]
fn a_persistent_hook_printing_300_mb_without_newline_on_stderr_costs_little_memory() {
    costs_little_memory(
        "a_persistent_hook_printing_300_mb_without_newline_on_stderr_costs_little_memory",
        "stderr",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_longer_than_1_mib_fails_its_event_at_once() {
    let s = Scripts::new();
    // The answer of the first event is 2 MiB long; the second event gets a short deny.
    let hook = persistent_hook(
        &s,
        r#"  if [ $n -eq 1 ]; then
    printf '{"id":%s,"exit":2,"stderr":"' "$id"; head -c 2097152 /dev/zero | tr '\0' x; printf '"}\n'
  else
    printf '{"id":%s,"exit":2,"stderr":"short deny"}\n' "$id"
  fi"#,
    );
    for (fail_closed, expected) in [(true, "hook `"), (false, "ran: rm -rf /")] {
        let (hooks, warned) = warnings(
            s.pre_tool_use(
                &hook,
                json!({ "persistent": true, "timeout": 600, "failClosed": fail_closed }),
            )
            .into_hooks(),
        );
        let (builder, _) = agent(&calls_bash(&["rm -rf /", "rm -rf ~"]), hooks);
        // The event fails at once, not at its 600 s timeout.
        let resp = crate::support::within("the failed event", builder.build().run("go"))
            .await
            .unwrap();
        let outputs = tool_texts(&resp);
        assert!(outputs[0].contains(expected), "{}", outputs[0]);
        if fail_closed {
            assert!(
                outputs[0].starts_with("PreToolUse:bash hook error: "),
                "{}",
                outputs[0]
            );
            assert!(
                outputs[0].contains("(the hook is fail-closed)"),
                "{}",
                outputs[0]
            );
        }
        assert_eq!(outputs[1], "PreToolUse:bash hook error: short deny");
        let warned = warned.lock().unwrap().join("\n");
        assert!(
            warned.contains("answered with a bad line: a line of 20971")
                && warned.contains("bytes, longer than the 1048576 bytes an answer may have"),
            "{warned}"
        );
    }
}

/// A persistent hook that fills its stdout pipe with junk before it reads its first event, an
/// event larger than the stdin pipe: the event is written while its stdout is read, so
/// neither side waits for the other, and the answer comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_blocked_on_its_stdout_still_gets_a_large_event_and_answers() {
    let s = Scripts::new();
    let serve = r#"head -c 524288 /dev/zero | tr '\0' j | fold -w 99; echo
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -E 's/^\{"id":([0-9]+),.*/\1/')
  printf '{"id":%s,"exit":2,"stderr":"no: %s bytes"}\n' "$id" "${#line}"
done"#;
    let hook = s.bash("flood.sh", serve);
    let (hooks, _) = warnings(
        s.pre_tool_use(&hook, json!({ "persistent": true, "timeout": 600 }))
            .into_hooks(),
    );
    let big = "x".repeat(300_000);
    let (builder, seen) = agent(&calls_bash(&[&big, "ls"]), hooks);
    // Answered at once, not at the 600 s timeout.
    let resp = crate::support::within("the answers", builder.build().run("go"))
        .await
        .unwrap();
    let outputs = tool_texts(&resp);
    assert!(
        outputs[0].starts_with("PreToolUse:bash hook error: no: 3"),
        "{}",
        outputs[0]
    );
    assert!(
        outputs[1].starts_with("PreToolUse:bash hook error: no: "),
        "{}",
        outputs[1]
    );
    assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
}

// ===== 7: blame =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_object_updated_input_is_the_hooks_fault() {
    let s = Scripts::new();
    for (i, bad) in [
        json!("rm -rf /"),
        json!(["rm", "-rf"]),
        json!(42),
        json!(true),
    ]
    .into_iter()
    .enumerate()
    {
        let answer = json!({ "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "updatedInput": bad } });
        let hook = s.bash(
            &format!("rewrite{i}.sh"),
            &format!("cat >/dev/null; echo '{answer}'"),
        );
        let (hooks, warned) = warnings(s.pre_tool_use(&hook, json!({})).into_hooks());
        let (builder, seen) = agent(&calls_bash(&["ls"]), hooks);
        let resp = builder.build().run("go").await.unwrap();
        let out = &tool_texts(&resp)[0];
        assert!(
            out.starts_with(&format!(
                "PreToolUse:bash hook error: hook `{hook}` answered an updatedInput that is not a JSON object"
            )),
            "{out}"
        );
        assert!(
            !out.contains("argument"),
            "not the model's arguments: {out}"
        );
        assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
        let warned = warned.lock().unwrap().join("\n");
        assert!(
            warned.contains(&format!(
                "PreToolUse hook `{hook}` answered an updatedInput"
            )),
            "{warned}"
        );
    }
}

// ===== 7: transcripts =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_ids_that_differ_only_in_unsafe_characters_get_their_own_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let seen: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
    let s = Arc::clone(&seen);
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("where", json!({}))
                .text("done")
                .per_run(),
        )
        .tool(tool_fn(
            "where",
            "where",
            json!({"type": "object"}),
            move |_: Value, ctx| {
                s.lock()
                    .unwrap()
                    .push(ctx.transcript_path().unwrap().to_path_buf());
                async { Ok::<_, BoxError>("here") }
            },
        ))
        .transcripts(dir.path())
        .build();
    let long = "/".repeat(300);
    let ids = ["a/b", "a_b", "a%2Fb", "a b", "..", &long];
    for id in ids {
        agent
            .run(AgentRequest::new(format!("prompt of {id}")).thread(id))
            .await
            .unwrap();
    }
    let paths = seen.lock().unwrap().clone();
    let unique: std::collections::HashSet<_> = paths.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{paths:?}");
    for (id, path) in ids.iter().zip(&paths) {
        assert_eq!(path.parent(), Some(dir.path()), "{path:?}");
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            assert_eq!(line["sessionId"], *id, "{path:?} holds another thread");
        }
        assert!(text.contains(&format!("prompt of {id}")), "{path:?}");
    }
    assert_eq!(paths[0], dir.path().join("a%2Fb.jsonl"));
    assert_eq!(paths[1], dir.path().join("a_b.jsonl"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), ids.len());
}

// ===== settings files =====

#[test]
fn a_settings_file_that_is_a_fifo_or_too_big_is_refused_at_once() {
    let s = Scripts::new();
    let fifo = s.path("settings.json");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let big = s.path("big.json");
    let mut text = String::from("{\"hooks\": {}}");
    text.push_str(&" ".repeat(5 << 20));
    std::fs::write(&big, text).unwrap();
    let not_utf8 = s.path("latin1.json");
    std::fs::write(&not_utf8, b"{\"hooks\": {}, \"x\": \"\xe9\"}").unwrap();
    for (path, why) in [
        (fifo, "not a regular file"),
        (big, "larger than 4 MiB"),
        (not_utf8, "not UTF-8"),
    ] {
        // A FIFO with no writer would block an open() forever: bound the wait.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(CommandHooks::builder().settings_file(p).build().map(|_| ()));
        });
        let err = rx
            .recv_timeout(crate::support::PATIENCE)
            .unwrap_or_else(|_| panic!("loading {} hung", path.display()))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("{}: ", path.display())) && err.contains(why),
            "{err}"
        );
    }
}

// ===== property tests: settings and matchers =====

mod fuzz {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;
    use serde_json::{Value, json};
    use tower_agent::{command::CommandHooks, layers::matcher::ToolMatcher};

    /// JSON shaped like settings: the keys settings have, with values of any type.
    fn settings() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| json!(f)),
            prop::sample::select(vec![
                "command",
                "http",
                "prompt",
                "bash",
                "sh",
                "zsh",
                "*",
                "",
                "PreToolUse",
                "Bash|Write",
                "/x/",
                "Edit.*",
                "(",
                "a{99999}",
                "echo hi",
                "Stop",
            ])
            .prop_map(Value::from),
            ".{0,20}".prop_map(Value::from),
        ];
        let keys = prop::sample::select(vec![
            "hooks",
            "disableAllHooks",
            "PreToolUse",
            "PostToolUse",
            "Stop",
            "SessionStart",
            "PermissionRequest",
            "tool-call-start",
            "Nope",
            "matcher",
            "type",
            "command",
            "args",
            "shell",
            "timeout",
            "failClosed",
            "persistent",
            "async",
            "asyncRewake",
            "if",
        ]);
        leaf.prop_recursive(5, 96, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| {
                    Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }

    fn load(value: Value) -> Result<CommandHooks, String> {
        CommandHooks::builder()
            .settings_json(value, "settings.json")
            .project_dir("/nonexistent")
            .build()
            .map_err(|e| e.to_string())
    }

    /// Patterns that stress the regex compiler: huge repetitions, deep nesting.
    fn hostile_pattern() -> impl Strategy<Value = String> {
        prop_oneof![
            (1u32..200_000).prop_map(|n| format!("a{{{n}}}")),
            (1u32..5_000, 1u32..5_000).prop_map(|(a, b)| format!("(x{{{a}}}){{{b}}}")),
            (1u32..100_000).prop_map(|n| format!("\\w{{{n}}}")),
            (1u32..100_000).prop_map(|n| format!("/[\\p{{L}}\\d]{{1,{n}}}/")),
            (1usize..3_000).prop_map(|n| format!("{}x{}", "(".repeat(n), ")".repeat(n))),
            (1usize..3_000).prop_map(|n| "(".repeat(n)),
            (1usize..2_000).prop_map(|n| "*?".repeat(n)),
            (1usize..2_000).prop_map(|n| format!("/{}/", "a|".repeat(n))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any settings value: loaded or a clear error naming the origin; never a panic.
        #[test]
        fn settings_values_load_or_fail_clearly(value in settings()) {
            if let Err(e) = load(value) {
                prop_assert!(e.starts_with("settings.json: "), "{}", e);
            }
        }

        /// Any pattern, in both syntaxes: a matcher or a clear error naming it; never a panic.
        #[test]
        fn matchers_parse_or_fail_clearly(pattern in "\\PC{0,40}", name in "[a-zA-Z_*?]{0,12}") {
            for parsed in [ToolMatcher::parse(&pattern), ToolMatcher::protocol(&pattern)] {
                match parsed {
                    Ok(m) => { let _ = m.matches_name(&name); }
                    Err(e) => prop_assert!(e.to_string().starts_with("invalid tool matcher `")),
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any bytes as a settings file: a clear error naming the file (or settings), never a
        /// panic.
        #[test]
        fn settings_files_of_any_bytes_load_or_fail_clearly(
            bytes in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..400),
                settings().prop_map(|v| v.to_string().into_bytes()),
            ],
        ) {
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), &bytes).unwrap();
            let loaded = CommandHooks::builder()
                .settings_file(file.path())
                .project_dir("/nonexistent")
                .build();
            if let Err(e) = loaded {
                let name = file.path().display().to_string();
                prop_assert!(e.to_string().starts_with(&format!("{name}: ")), "{}", e);
            }
        }

        /// Huge repetitions and deep nesting: compiled or refused quickly, with a clear
        /// error, in the matcher syntax and in a settings file.
        #[test]
        fn hostile_regexes_are_bounded(pattern in hostile_pattern()) {
            let started = Instant::now();
            let results = [ToolMatcher::parse(&pattern), ToolMatcher::protocol(&pattern)];
            for r in &results {
                if let Err(e) = r {
                    prop_assert!(e.to_string().starts_with("invalid tool matcher `"));
                }
            }
            let settings = json!({ "hooks": { "PreToolUse": [{ "matcher": pattern, "hooks": [{ "type": "command", "command": "x" }] }] } });
            if let Err(e) = load(settings) {
                prop_assert!(e.starts_with("settings.json: hooks.PreToolUse[0].matcher: invalid tool matcher"), "{}", e);
            }
            let took = started.elapsed();
            if took > Duration::from_millis(300) { eprintln!("{took:?} for {pattern}"); }
            prop_assert!(took < Duration::from_secs(2), "{:?} for {}", took, pattern);
        }
    }
}
