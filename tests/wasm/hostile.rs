//! Hostile guests: each reaches a limit of the sandbox or answers garbage. Each time the run
//! goes on (fail-open: the call runs) or the call is denied (the hook described with
//! `"onFailure": "block"`), the error names the hook and the cause, within a bounded time, and
//! no instance is left behind.

use std::time::{Duration, Instant};

use serde_json::json;
use tower_agent::{
    AgentRequest,
    model::ScriptedModel,
    wasm::{WasmHook, WasmLimits},
};

use crate::{
    guests::Guest,
    support::command::{Scripts, agent, tool_text, warnings},
};

/// A hostile guest: its `handle` body, the functions it needs, its limits, and the words the
/// error must say.
struct Case {
    name: &'static str,
    strings: &'static [&'static [u8]],
    body: &'static str,
    funcs: &'static str,
    limits: WasmLimits,
    cause: &'static str,
}

fn cases() -> Vec<Case> {
    let limits = WasmLimits::default();
    vec![
        Case {
            name: "an infinite loop",
            strings: &[],
            body: "(loop $spin (br $spin)) (i32.const 0)",
            funcs: "",
            limits: limits.cpu(Duration::from_millis(50)),
            cause: "ran past its CPU limit of 50 ms",
        },
        Case {
            name: "a loop that allocates until the cap",
            strings: &[],
            body: "(loop $more (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable",
            funcs: "",
            limits: limits.memory(8 << 20),
            cause: "bytes of memory, over its limit of 8388608 bytes",
        },
        Case {
            name: "deep recursion",
            strings: &[],
            body: "(call $deeper (i32.const 0))",
            funcs: "(func $deeper (param $n i32) (result i32) (call $deeper (i32.add (local.get $n) (i32.const 1))))",
            limits,
            cause: "call stack exhausted",
        },
        Case {
            name: "a 100 MB answer",
            strings: &[],
            // 100 MB of zeros (valid UTF-8), past what the guest has written.
            body: "(drop (memory.grow (i32.const 1600))) (call $ok (i32.const 1048576) (i32.const 100000000))",
            funcs: "",
            limits: limits.memory(256 << 20),
            cause: "answered 100000000 bytes, over its limit of 1048576 bytes",
        },
        Case {
            name: "invalid UTF-8",
            strings: &[b"{\"a\": \"\xff\xfe\"}"],
            body: "(call $ok (i32.const S0) (i32.const L0))",
            funcs: "",
            limits,
            cause: "not UTF-8",
        },
        Case {
            name: "invalid JSON",
            strings: &[b"{not json"],
            body: "(call $ok (i32.const S0) (i32.const L0))",
            funcs: "",
            limits,
            cause: "answered something that is not JSON",
        },
        Case {
            name: "JSON that is not an object",
            strings: &[b"[\"deny\"]"],
            body: "(call $ok (i32.const S0) (i32.const L0))",
            funcs: "",
            limits,
            cause: "answered JSON that is not an object",
        },
        Case {
            name: "a trap on every call",
            strings: &[],
            body: "unreachable",
            funcs: "",
            limits,
            cause: "unreachable",
        },
    ]
}

/// The guest of `case`, describing itself for PreToolUse on `bash`, fail-closed or not.
fn guest(case: &Case, fail_closed: bool) -> Vec<u8> {
    let on_failure = if fail_closed {
        r#", "onFailure": "block""#
    } else {
        ""
    };
    let mut g = Guest::new(&format!(
        r#"{{"events": ["PreToolUse"], "matcher": "bash", "stateless": true{on_failure}}}"#
    ));
    let mut body = case.body.to_owned();
    for (i, s) in case.strings.iter().enumerate() {
        let (ptr, len) = g.string(s);
        let strip = |w: &str| {
            w.trim_start_matches("(i32.const ")
                .trim_end_matches(')')
                .to_owned()
        };
        body = body
            .replace(&format!("S{i}"), &strip(&ptr))
            .replace(&format!("L{i}"), &strip(&len));
    }
    g.handle(&body).funcs(case.funcs).build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_guest_is_a_hook_failure_open_or_closed() {
    for case in cases() {
        for fail_closed in [false, true] {
            let what = format!("{} (fail_closed {fail_closed})", case.name);
            let hook = WasmHook::builder()
                .bytes(
                    format!("hostile-{}", case.name.replace(' ', "-")),
                    guest(&case, fail_closed),
                )
                .limits(case.limits)
                .build()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let s = Scripts::new();
            let hooks = crate::guests::command_hooks(hook.clone(), s.dir.path());
            let (hooks, warned) = warnings(hooks.into_hooks());
            let model = ScriptedModel::new()
                .tool_call("bash", json!({"command": "ls"}))
                .text("done")
                .per_run();
            let (builder, seen) = agent(&model, hooks);
            let agent = builder.build();
            let started = Instant::now();
            for _ in 0..2 {
                let resp = tokio::time::timeout(
                    crate::support::PATIENCE,
                    agent.run(AgentRequest::new("go")),
                )
                .await
                .unwrap_or_else(|_| panic!("{what}: the run hung"))
                .unwrap();
                let text = tool_text(&resp);
                if fail_closed {
                    assert!(
                        text.starts_with("PreToolUse:bash hook error: "),
                        "{what}: {text}"
                    );
                    assert!(text.contains(case.cause), "{what}: {text}");
                    assert!(text.contains(hook.name()), "{what}: {text}");
                } else {
                    assert_eq!(text, "ran: ls", "{what}");
                }
            }
            assert!(
                started.elapsed() < crate::support::PATIENCE,
                "{what}: {:?}",
                started.elapsed()
            );
            let ran = seen.lock().unwrap().len();
            assert_eq!(ran, if fail_closed { 0 } else { 2 }, "{what}");
            let warned = warned.lock().unwrap();
            assert!(
                warned
                    .iter()
                    .any(|w| w.contains(hook.name()) && w.contains(case.cause)),
                "{what}: {warned:?}"
            );
            assert_eq!(hook.instances(), 0, "{what}: every failed instance is gone");
        }
    }
}

/// A guest that imports what the host does not grant (here a socket and a file, in WIT
/// interfaces named as WASI's) fails to load, and the error names the import.
#[test]
fn a_guest_importing_what_is_not_granted_fails_to_load_naming_the_import() {
    for (namespace, interface, func) in [
        ("wasi:sockets", "tcp-create-socket", "create-tcp-socket"),
        ("wasi:filesystem", "preopens", "get-directories"),
    ] {
        let import = format!("{namespace}/{interface}@0.2.0");
        let wit = format!(
            "package tower-agent:hooks@0.1.0;\n\
             world hook {{\n  import {import};\n  \
             export describe: func() -> string;\n  \
             export handle: func(input: string) -> result<string, string>;\n}}\n\
             package {namespace}@0.2.0 {{\n  interface {interface} {{ {func}: func() -> u32; }}\n}}\n"
        );
        let mut g = Guest::new(r#"{"events": ["PreToolUse"]}"#);
        let (empty, _) = g.string("");
        let guest = g
            .handle(&format!(
                "(drop (call $imported)) (call $ok {empty} (i32.const 0))"
            ))
            .funcs(&format!(
                "(import \"{import}\" \"{func}\" (func $imported (result i32)))"
            ))
            .wit(&wit)
            .build();
        let err = WasmHook::builder()
            .bytes("greedy", guest)
            .build()
            .expect_err("an import the host does not grant");
        let message = err.to_string();
        assert!(message.contains("greedy"), "{message}");
        assert!(
            message.contains(&format!("{namespace}/{interface}")),
            "{message}"
        );
    }
}
