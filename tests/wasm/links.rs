//! Links in a granted directory: a guest with a write grant may create a symbolic link only
//! when its target descends from where the link is (no `..`, not absolute), so no link it
//! leaves behind leads a later program (a hook, a tool, the agent's file built-ins) out of the
//! directory; hard links and renames name paths inside its directories only, and a link already
//! there that leads out is not followed. Hand-written guests call the real
//! `wasi:filesystem/types` methods.

use std::path::Path;

use tower_agent::wasm::{WasmAnswer, WasmGrants, WasmHook};

use crate::guests::Guest;

/// The part of WASI 0.2's `wasi:filesystem` these guests import (the types exactly as WASI
/// defines them, so the host's implementation matches).
const WASI_LINKS: &str = r#"
package wasi:filesystem@0.2.0 {
  interface types {
    flags descriptor-flags { read, write, file-integrity-sync, data-integrity-sync, requested-write-sync, mutate-directory }
    flags path-flags { symlink-follow }
    flags open-flags { create, directory, exclusive, truncate }
    enum error-code { access, would-block, already, bad-descriptor, busy, deadlock, quota, exist, file-too-large, illegal-byte-sequence, in-progress, interrupted, invalid, io, is-directory, loop, too-many-links, message-size, name-too-long, no-device, no-entry, no-lock, insufficient-memory, insufficient-space, not-directory, not-empty, not-recoverable, unsupported, no-tty, no-such-device, overflow, not-permitted, pipe, read-only, invalid-seek, text-file-busy, cross-device }
    resource descriptor {
      open-at: func(path-flags: path-flags, path: string, open-flags: open-flags, %flags: descriptor-flags) -> result<descriptor, error-code>;
      link-at: func(old-path-flags: path-flags, old-path: string, new-descriptor: borrow<descriptor>, new-path: string) -> result<_, error-code>;
      rename-at: func(old-path: string, new-descriptor: borrow<descriptor>, new-path: string) -> result<_, error-code>;
      symlink-at: func(old-path: string, new-path: string) -> result<_, error-code>;
    }
  }
  interface preopens {
    use types.{descriptor};
    get-directories: func() -> list<tuple<descriptor, string>>;
  }
}
"#;

/// `error-code.not-permitted`, as the guest reports it.
const NOT_PERMITTED: &str = "131";
/// Success, as the guest reports it.
const OK: &str = "000";

/// What the guest does in the first directory it was given.
#[derive(Clone, Copy)]
enum Op {
    /// `symlink-at(target, link)`.
    Symlink(&'static str, &'static str),
    /// `link-at({}, from, dir, to)`: a hard link.
    HardLink(&'static str, &'static str),
    /// `rename-at(from, dir, to)`.
    Rename(&'static str, &'static str),
    /// `open-at({symlink-follow}, path, {}, {read})`.
    OpenFollowing(&'static str),
}

/// The return area of every call.
const RET: u32 = 30032;

/// A guest that runs `ops` in order and answers `{"r": "ttt ccc ..."}`: for each, `0` and
/// `00` when it succeeded, else `1` and the `error-code` (two digits).
fn linker(ops: &[Op]) -> Vec<u8> {
    let mut g = Guest::new(r#"{"events": ["PreToolUse"]}"#);
    let placeholder = vec!["000"; ops.len()].join(" ");
    let (answer, answer_len) = g.string(format!(r#"{{"r": "{placeholder}"}}"#));
    let mut calls = String::new();
    for (i, op) in ops.iter().enumerate() {
        let (call, code_at) = match *op {
            Op::Symlink(target, link) => {
                let ((tp, tl), (lp, ll)) = (g.string(target), g.string(link));
                let call = format!(
                    "(call $symlink (local.get $dir) {tp} {tl} {lp} {ll} (i32.const {RET}))"
                );
                (call, RET + 1)
            }
            Op::HardLink(from, to) => {
                let ((fp, fl), (tp, tl)) = (g.string(from), g.string(to));
                let call = format!(
                    "(call $link (local.get $dir) (i32.const 0) {fp} {fl} (local.get $dir) {tp} {tl} (i32.const {RET}))"
                );
                (call, RET + 1)
            }
            Op::Rename(from, to) => {
                let ((fp, fl), (tp, tl)) = (g.string(from), g.string(to));
                let call = format!(
                    "(call $rename (local.get $dir) {fp} {fl} (local.get $dir) {tp} {tl} (i32.const {RET}))"
                );
                (call, RET + 1)
            }
            Op::OpenFollowing(path) => {
                let (p, l) = g.string(path);
                let call = format!(
                    "(call $open (local.get $dir) (i32.const 1) {p} {l} (i32.const 0) (i32.const 1) (i32.const {RET}))"
                );
                // result<descriptor, error-code>: the payload is 4-aligned.
                (call, RET + 4)
            }
        };
        let at = 7 + 4 * i;
        calls.push_str(&format!(
            "(i64.store (i32.const {RET}) (i64.const 0))
             {call}
             (i32.store8 (i32.add {answer} (i32.const {at}))
               (i32.add (i32.const 48) (i32.load8_u (i32.const {RET}))))
             (i32.store8 (i32.add {answer} (i32.const {tens}))
               (i32.add (i32.const 48) (i32.div_u (i32.load8_u (i32.const {code_at})) (i32.const 10))))
             (i32.store8 (i32.add {answer} (i32.const {units}))
               (i32.add (i32.const 48) (i32.rem_u (i32.load8_u (i32.const {code_at})) (i32.const 10))))\n",
            tens = at + 1,
            units = at + 2,
        ));
    }
    g.handle(&format!(
        "(local $dir i32)
         (call $dirs (i32.const 30000))
         (local.set $dir (i32.load (i32.load (i32.const 30000))))
         {calls}
         (call $ok {answer} {answer_len})"
    ))
    .funcs(
        "(import \"wasi:filesystem/preopens@0.2.0\" \"get-directories\" (func $dirs (param i32)))
(import \"wasi:filesystem/types@0.2.0\" \"[method]descriptor.open-at\" (func $open (param i32 i32 i32 i32 i32 i32 i32)))
(import \"wasi:filesystem/types@0.2.0\" \"[method]descriptor.link-at\" (func $link (param i32 i32 i32 i32 i32 i32 i32 i32)))
(import \"wasi:filesystem/types@0.2.0\" \"[method]descriptor.rename-at\" (func $rename (param i32 i32 i32 i32 i32 i32 i32)))
(import \"wasi:filesystem/types@0.2.0\" \"[method]descriptor.symlink-at\" (func $symlink (param i32 i32 i32 i32 i32 i32)))",
    )
    .wit(&format!(
        "package tower-agent:hooks@0.1.0;\nworld hook {{\n  import wasi:filesystem/types@0.2.0;\n  \
         import wasi:filesystem/preopens@0.2.0;\n  export describe: func() -> string;\n  \
         export handle: func(input: string) -> result<string, string>;\n}}\n{WASI_LINKS}"
    ))
    .build()
}

/// What the guest reported for each operation.
async fn results(hook: &WasmHook) -> Vec<String> {
    let WasmAnswer::Json(map) = hook.call("{}").await.unwrap() else {
        panic!("the guest answers JSON")
    };
    map["r"]
        .as_str()
        .unwrap()
        .split(' ')
        .map(str::to_owned)
        .collect()
}

/// `root/granted` (the grant: `inside.txt`, `sub/inside.txt`, and `planted`, a link the host
/// left there, to `../outside/secret.txt`) and `root/outside/secret.txt`.
fn layout(root: &Path) -> std::path::PathBuf {
    let granted = root.join("granted");
    std::fs::create_dir_all(granted.join("sub")).unwrap();
    std::fs::create_dir(root.join("outside")).unwrap();
    std::fs::write(root.join("outside/secret.txt"), "secret").unwrap();
    std::fs::write(granted.join("inside.txt"), "top").unwrap();
    std::fs::write(granted.join("sub/inside.txt"), "below").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("../outside/secret.txt", granted.join("planted")).unwrap();
    granted
}

/// Whether anything (a file or a link, dangling or not) is at `path`.
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

const OPS: [Op; 9] = [
    Op::Symlink("../outside/secret.txt", "escape"),
    Op::Symlink("/etc/passwd", "absolute"),
    Op::Symlink("sub/../../outside/secret.txt", "sneaky"),
    // Lands inside from `sub`, but a rename to the top would make it lead out.
    Op::Symlink("../inside.txt", "sub/up"),
    Op::Symlink("sub/inside.txt", "down"),
    Op::Symlink("inside.txt", "sub/near"),
    Op::HardLink("../outside/secret.txt", "hard"),
    Op::Rename("../outside/secret.txt", "moved"),
    Op::OpenFollowing("planted"),
];

/// The issue's case: a write-granted guest plants `escape` → `../outside/secret.txt`. It is
/// refused (`not-permitted`) and nothing is left on disk; so are an absolute target, a target
/// that climbs out through a subdirectory, and one that climbs at all; a link that descends is
/// made and leads where it says. Hard links and renames from outside fail, and the link the
/// host left there is not followed out.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_plant_a_symlink_that_leads_out_of_its_directory() {
    let root = tempfile::tempdir().unwrap();
    let granted = layout(root.path());
    let hook = WasmHook::builder()
        .bytes("linker", linker(&OPS))
        .grants(WasmGrants::default().write_dir(&granted, "."))
        .build()
        .unwrap();
    let r = results(&hook).await;

    for (i, name) in [(0, "escape"), (1, "absolute"), (2, "sneaky"), (3, "sub/up")] {
        assert_eq!(r[i], NOT_PERMITTED, "symlink {name}: {r:?}");
        assert!(!exists(&granted.join(name)), "{name} was left on disk");
    }
    assert_eq!(r[4], OK, "a link that descends is made: {r:?}");
    assert_eq!(
        std::fs::read_link(granted.join("down")).unwrap(),
        Path::new("sub/inside.txt")
    );
    assert_eq!(
        std::fs::read_to_string(granted.join("down")).unwrap(),
        "below"
    );
    assert_eq!(r[5], OK, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(granted.join("sub/near")).unwrap(),
        "below"
    );

    for (i, what) in [
        (6, "a hard link"),
        (7, "a rename"),
        (8, "following `planted`"),
    ] {
        assert!(
            r[i].starts_with('1'),
            "{what} from outside succeeded: {r:?}"
        );
    }
    assert!(!exists(&granted.join("hard")) && !exists(&granted.join("moved")));
    assert_eq!(
        std::fs::read_to_string(root.path().join("outside/secret.txt")).unwrap(),
        "secret"
    );
}

/// In a read-only grant no link is made, whatever its target.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_guest_makes_no_link() {
    let root = tempfile::tempdir().unwrap();
    let granted = layout(root.path());
    let hook = WasmHook::builder()
        .bytes("linker", linker(&OPS[..6]))
        .grants(WasmGrants::default().read_dir(&granted, "."))
        .build()
        .unwrap();
    let r = results(&hook).await;
    assert_eq!(r, vec![NOT_PERMITTED; 6]);
    for name in ["escape", "absolute", "sneaky", "sub/up", "down", "sub/near"] {
        assert!(!exists(&granted.join(name)), "{name}");
    }
}

/// A link the host left in the directory, whose target climbs (`sub/back` →
/// `../outside/secret.txt`, which leads to `granted/outside/secret.txt` from `sub`), moved up
/// by a rename or a hard link would lead out (to `root/outside/secret.txt`): both are refused,
/// as for the host's link that leads out already. Files, and links that descend, move as
/// before.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_move_a_climbing_link_to_where_it_leads_out() {
    let root = tempfile::tempdir().unwrap();
    let granted = layout(root.path());
    std::fs::create_dir(granted.join("outside")).unwrap();
    std::fs::write(granted.join("outside/secret.txt"), "decoy").unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", granted.join("sub/back")).unwrap();
    assert_eq!(
        std::fs::read_to_string(granted.join("sub/back")).unwrap(),
        "decoy"
    );
    let ops = [
        Op::Rename("sub/back", "back"),
        Op::HardLink("sub/back", "back2"),
        Op::Rename("planted", "sub/planted"),
        Op::HardLink("planted", "copy"),
        Op::Symlink("inside.txt", "mine"),
        Op::Rename("mine", "sub/mine"),
        Op::Rename("inside.txt", "renamed.txt"),
        Op::HardLink("renamed.txt", "hard.txt"),
    ];
    let hook = WasmHook::builder()
        .bytes("linker", linker(&ops))
        .grants(WasmGrants::default().write_dir(&granted, "."))
        .build()
        .unwrap();
    let r = results(&hook).await;

    assert_eq!(r[..4], [NOT_PERMITTED; 4], "{r:?}");
    for name in ["back", "back2", "sub/planted", "copy"] {
        assert!(!exists(&granted.join(name)), "{name} was left on disk");
    }
    assert!(exists(&granted.join("sub/back")) && exists(&granted.join("planted")));
    assert_eq!(r[4..], [OK; 4], "{r:?}");
    assert_eq!(
        std::fs::read_to_string(granted.join("sub/mine")).unwrap(),
        "below"
    );
    assert_eq!(
        std::fs::read_to_string(granted.join("hard.txt")).unwrap(),
        "top"
    );
}

/// A directory carries its links when it moves: `sub/deep/back` → `../../outside/secret.txt`
/// leads to `granted/outside/secret.txt`, but with `sub/deep` moved to the top it would lead
/// out. A directory moves only within its parent (where every link in it leads where it did);
/// files move anywhere.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_moves_a_directory_only_within_its_parent() {
    let root = tempfile::tempdir().unwrap();
    let granted = layout(root.path());
    std::fs::create_dir_all(granted.join("sub/deep")).unwrap();
    std::fs::create_dir(granted.join("outside")).unwrap();
    std::fs::write(granted.join("outside/secret.txt"), "decoy").unwrap();
    std::os::unix::fs::symlink("../../outside/secret.txt", granted.join("sub/deep/back")).unwrap();
    let ops = [
        Op::Rename("sub/deep", "deep"),
        Op::Rename("sub/deep", "sub/renamed"),
        Op::Rename("sub/renamed", "sub/../deep2"),
        Op::Rename("sub/inside.txt", "moved.txt"),
    ];
    let hook = WasmHook::builder()
        .bytes("linker", linker(&ops))
        .grants(WasmGrants::default().write_dir(&granted, "."))
        .build()
        .unwrap();
    let r = results(&hook).await;

    assert_eq!(r, [NOT_PERMITTED, OK, NOT_PERMITTED, OK]);
    assert!(!exists(&granted.join("deep")) && !exists(&granted.join("deep2")));
    assert_eq!(
        std::fs::read_to_string(granted.join("sub/renamed/back")).unwrap(),
        "decoy"
    );
    assert_eq!(
        std::fs::read_to_string(granted.join("moved.txt")).unwrap(),
        "below"
    );
}
