//! Grants: a hook reaches a directory, a variable, a clock or random numbers only when granted
//! (WASI 0.2, linked per grant). Hand-written guests call the real WASI imports: they open
//! files through `wasi:filesystem` and read the environment through `wasi:cli`.

use tower_agent::wasm::{WasmAnswer, WasmGrants, WasmHook};

use crate::guests::Guest;

/// The part of WASI 0.2's `wasi:filesystem` and `wasi:cli/environment` these guests import
/// (the types exactly as WASI defines them, so the host's implementation matches).
const WASI_SUBSET: &str = r#"
package wasi:filesystem@0.2.0 {
  interface types {
    flags descriptor-flags { read, write, file-integrity-sync, data-integrity-sync, requested-write-sync, mutate-directory }
    flags path-flags { symlink-follow }
    flags open-flags { create, directory, exclusive, truncate }
    enum error-code { access, would-block, already, bad-descriptor, busy, deadlock, quota, exist, file-too-large, illegal-byte-sequence, in-progress, interrupted, invalid, io, is-directory, loop, too-many-links, message-size, name-too-long, no-device, no-entry, no-lock, insufficient-memory, insufficient-space, not-directory, not-empty, not-recoverable, unsupported, no-tty, no-such-device, overflow, not-permitted, pipe, read-only, invalid-seek, text-file-busy, cross-device }
    resource descriptor {
      open-at: func(path-flags: path-flags, path: string, open-flags: open-flags, %flags: descriptor-flags) -> result<descriptor, error-code>;
    }
  }
  interface preopens {
    use types.{descriptor};
    get-directories: func() -> list<tuple<descriptor, string>>;
  }
}
package wasi:cli@0.2.0 {
  interface environment {
    get-environment: func() -> list<tuple<string, string>>;
  }
}
"#;

fn world(imports: &str) -> String {
    format!(
        "package tower-agent:hooks@0.1.0;\nworld hook {{\n{imports}\n  export describe: func() -> string;\n  \
         export handle: func(input: string) -> result<string, string>;\n}}\n{WASI_SUBSET}"
    )
}

/// A guest that opens, in the first directory it was given: `allowed.txt` (read),
/// `../secret.txt` (read), `/etc/passwd` (read), `allowed.txt` (write); it answers
/// `{"r": "...."}`, a `1` for each open that succeeded.
fn opener() -> Vec<u8> {
    let mut g = Guest::new(r#"{"events": ["PreToolUse"]}"#);
    let (answer, answer_len) = g.string(r#"{"r": "0000"}"#);
    let mut probes = String::new();
    for (i, (path, flags)) in [
        ("allowed.txt", 1),
        ("../secret.txt", 1),
        ("/etc/passwd", 1),
        ("allowed.txt", 2),
    ]
    .into_iter()
    .enumerate()
    {
        let (p, l) = g.string(path);
        probes.push_str(&format!(
            "(call $open (local.get $dir) (i32.const 0) {p} {l} (i32.const 0) (i32.const {flags}) (i32.const 30016))
             (if (i32.eqz (i32.load8_u (i32.const 30016)))
               (then (i32.store8 (i32.add {answer} (i32.const {at})) (i32.const 49))))\n",
            at = 7 + i
        ));
    }
    g.handle(&format!(
        "(local $dir i32)
         (call $dirs (i32.const 30000))
         (local.set $dir (i32.load (i32.load (i32.const 30000))))
         {probes}
         (call $ok {answer} {answer_len})"
    ))
    .funcs(
        "(import \"wasi:filesystem/preopens@0.2.0\" \"get-directories\" (func $dirs (param i32)))
(import \"wasi:filesystem/types@0.2.0\" \"[method]descriptor.open-at\" (func $open (param i32 i32 i32 i32 i32 i32 i32)))",
    )
    .wit(&world(
        "  import wasi:filesystem/types@0.2.0;\n  import wasi:filesystem/preopens@0.2.0;",
    ))
    .build()
}

async fn answer(hook: &WasmHook) -> serde_json::Value {
    match hook.call("{}").await.unwrap() {
        WasmAnswer::Json(map) => serde_json::Value::Object(map),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_opens_files_only_inside_its_granted_directory_and_writes_only_where_allowed() {
    let root = tempfile::tempdir().unwrap();
    let granted = root.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    std::fs::write(granted.join("allowed.txt"), "fine").unwrap();
    std::fs::write(root.path().join("secret.txt"), "secret").unwrap();

    let read_only = WasmHook::builder()
        .bytes("opener", opener())
        .grants(WasmGrants::default().read_dir(&granted, "."))
        .build()
        .unwrap();
    assert_eq!(
        answer(&read_only).await["r"],
        "1000",
        "allowed.txt opens; ../secret.txt and /etc/passwd do not; no write in a read-only grant"
    );
    let writable = WasmHook::builder()
        .bytes("opener", opener())
        .grants(WasmGrants::default().write_dir(&granted, "."))
        .build()
        .unwrap();
    assert_eq!(answer(&writable).await["r"], "1001", "a read-write grant");

    // Without a directory, the file system is not linked: the guest does not load.
    let err = WasmHook::builder()
        .bytes("opener", opener())
        .grants(WasmGrants::default().clocks())
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("wasi:filesystem/"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_sees_only_the_variables_it_was_granted() {
    let mut g = Guest::new(r#"{"events": ["PreToolUse"]}"#);
    let (answer_at, answer_len) = g.string(r#"{"n": 0}"#);
    let guest = g
        .handle(&format!(
            "(call $env (i32.const 30000))
             (i32.store8 (i32.add {answer_at} (i32.const 6))
               (i32.add (i32.const 48) (i32.load (i32.const 30004))))
             (call $ok {answer_at} {answer_len})"
        ))
        .funcs(
            "(import \"wasi:cli/environment@0.2.0\" \"get-environment\" (func $env (param i32)))",
        )
        .wit(&world("  import wasi:cli/environment@0.2.0;"))
        .build();
    assert!(std::env::var_os("PATH").is_some() && std::env::var_os("HOME").is_some());
    let hook = WasmHook::builder()
        .bytes("env", guest.clone())
        .grants(
            WasmGrants::default()
                .env("HOME")
                .env("TOWER_AGENT_A_VARIABLE_NOBODY_SETS"),
        )
        .build()
        .unwrap();
    assert_eq!(
        answer(&hook).await["n"],
        1,
        "HOME only: PATH and the rest of the process's environment stay out"
    );
    let err = WasmHook::builder()
        .bytes("env", guest)
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("wasi:cli/environment"), "{err}");
}

/// Grants in a settings file: `readDirs` (relative to the project directory) reaches the hook
/// (its guest opens `allowed.txt` there: a PreToolUse hook answering `{"r": ...}`, which
/// decides nothing, so the call runs); a grant of the wrong shape or of a directory that does
/// not exist is a configuration error naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_grant_directories_and_reject_bad_grants() {
    use serde_json::json;
    use tower_agent::command::CommandHooks;
    let s = crate::support::command::Scripts::new();
    std::fs::create_dir(s.path("granted")).unwrap();
    std::fs::write(s.path("granted/allowed.txt"), "fine").unwrap();
    std::fs::write(s.path("opener.wasm"), opener()).unwrap();
    let load = |handler: serde_json::Value| {
        CommandHooks::builder()
            .settings_json(
                json!({ "hooks": { "PreToolUse": [{ "hooks": [handler] }] } }),
                "settings.json",
            )
            .project_dir(s.dir.path())
            .without_transcripts()
            .build()
    };
    let ok = load(json!({ "type": "wasm", "path": "opener.wasm", "readDirs": ["granted"] }));
    assert!(ok.is_ok(), "{:?}", ok.err());
    for (handler, field) in [
        (
            json!({ "type": "wasm", "path": "opener.wasm", "readDirs": "granted" }),
            "readDirs",
        ),
        (
            json!({ "type": "wasm", "path": "opener.wasm", "env": [1] }),
            "env[0]",
        ),
        (
            json!({ "type": "wasm", "path": "opener.wasm", "clocks": "yes" }),
            "clocks",
        ),
        (
            json!({ "type": "wasm", "path": "opener.wasm", "readDirs": ["missing"] }),
            "path",
        ),
        (json!({ "type": "wasm", "path": "opener.wasm" }), "path"),
    ] {
        let err = load(handler.clone())
            .err()
            .unwrap_or_else(|| panic!("{handler}"))
            .to_string();
        assert!(
            err.contains(&format!("hooks[0].{field}")),
            "{handler}: {err}"
        );
    }
}

/// Settings that name one component twice run it once — unless the two handlers differ in
/// what they grant (or their limits): those are two hooks.
#[test]
fn one_component_with_other_grants_is_another_hook() {
    use serde_json::json;
    use tower_agent::command::{CommandHooks, HookEvent};
    let s = crate::support::command::Scripts::new();
    std::fs::create_dir(s.path("a")).unwrap();
    std::fs::write(s.path("opener.wasm"), opener()).unwrap();
    let handlers = |second: serde_json::Value| {
        CommandHooks::builder()
            .settings_json(
                json!({ "hooks": { "PreToolUse": [{ "hooks": [
                    { "type": "wasm", "path": "opener.wasm", "readDirs": ["a"] },
                    second,
                ] }] } }),
                "settings.json",
            )
            .project_dir(s.dir.path())
            .without_transcripts()
            .build()
            .unwrap()
            .commands(HookEvent::PreToolUse)
            .len()
    };
    let same = json!({ "type": "wasm", "path": "opener.wasm", "readDirs": ["a"] });
    let writable = json!({ "type": "wasm", "path": "opener.wasm", "writeDirs": ["a"] });
    assert_eq!(handlers(same), 1);
    assert_eq!(handlers(writable), 2);
}
