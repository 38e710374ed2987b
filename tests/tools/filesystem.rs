//! The filesystem tools over real temporary directories and real processes.

use crate::support;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde_json::{Value, json};
use support::{alive, passed, peak_rss_kib, reported_number, rerun, wait_dead};
use tempfile::TempDir;
use tower::ServiceExt;
use tower_agent::{
    Agent, AgentRequest,
    builtins::filesystem::{
        Backend, EntryKind, ExecOptions, FilesWritten, Filesystem, FsErrorKind, GrepOptions,
        LocalFs, ReadRange,
    },
    context::RunContext,
    message::{ToolCall, ToolOutput},
    model::ScriptedModel,
    store::MemoryStore,
    tool::{ToolRequest, ToolRouter},
};

// ===== helpers =====

struct Env {
    dir: TempDir,
    tools: ToolRouter,
    ctx: RunContext,
}

impl Env {
    fn new() -> Self {
        Self::with(|fs| fs)
    }

    fn with(configure: impl FnOnce(Filesystem) -> Filesystem) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tools = configure(Filesystem::local(dir.path())).tools();
        Env {
            dir,
            tools,
            ctx: RunContext::new(),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutput {
        let call = ToolCall::new("call_1", name, args);
        self.tools
            .clone()
            .oneshot(ToolRequest::new(call, self.ctx.clone()))
            .await
            .unwrap()
    }

    async fn ok(&self, name: &str, args: Value) -> String {
        let out = self.call(name, args.clone()).await;
        assert!(!out.is_error, "{name} {args} failed: {}", out.content);
        assert_eq!(out.call_id, "call_1");
        out.content
    }

    async fn err(&self, name: &str, args: Value) -> String {
        let out = self.call(name, args.clone()).await;
        assert!(out.is_error, "{name} {args} should fail: {}", out.content);
        out.content
    }
}

/// A directory outside every test root, with a file `secret.txt`.
fn outside() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), "top secret\n").unwrap();
    dir
}

/// Waits (at most [`PATIENCE`](support::PATIENCE)) for a command to write its pid to `file`.
async fn read_pid(file: &Path) -> i32 {
    support::eventually(&format!("a pid in {}", file.display()), || {
        let text = std::fs::read_to_string(file).ok()?;
        text.ends_with('\n').then(|| text.trim().parse().unwrap())
    })
    .await
}

// ===== ls =====

#[tokio::test]
async fn ls_lists_names_types_and_sizes() {
    let env = Env::new();
    env.write("b.txt", "hello");
    env.write("sub/inner.txt", "x");
    std::os::unix::fs::symlink("b.txt", env.path("a-link")).unwrap();

    let out = env.ok("ls", json!({})).await;
    let entries: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(entries[0]["name"], "a-link");
    assert_eq!(entries[0]["type"], "symlink");
    assert_eq!(
        entries[1],
        json!({ "name": "b.txt", "type": "file", "size": 5 })
    );
    assert_eq!(entries[2]["name"], "sub");
    assert_eq!(entries[2]["type"], "dir");
    assert_eq!(entries.as_array().unwrap().len(), 3);

    let out = env.ok("ls", json!({ "path": "sub" })).await;
    assert_eq!(out, r#"[{"name":"inner.txt","size":1,"type":"file"}]"#);

    let err = env.err("ls", json!({ "path": "b.txt" })).await;
    assert!(err.contains("`b.txt` is a file, not a directory"), "{err}");
    let err = env.err("ls", json!({ "path": "nope" })).await;
    assert!(err.starts_with("`nope` does not exist"), "{err}");
}

// ===== read_file =====

#[tokio::test]
async fn read_file_numbers_lines() {
    let env = Env::new();
    env.write("a.txt", "one\ntwo\nthree");
    let out = env.ok("read_file", json!({ "path": "a.txt" })).await;
    assert_eq!(out, "     1\tone\n     2\ttwo\n     3\tthree\n");

    env.write("empty.txt", "");
    let out = env.ok("read_file", json!({ "path": "empty.txt" })).await;
    assert_eq!(out, "(`empty.txt` is empty)");
}

#[tokio::test]
async fn read_file_offset_and_limit_on_a_large_file() {
    let env = Env::new();
    let text: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
    env.write("big.txt", &text);

    // Default: the first 2,000 lines, and how to read on.
    let out = env.ok("read_file", json!({ "path": "big.txt" })).await;
    assert_eq!(out.lines().filter(|l| l.contains('\t')).count(), 2000);
    assert!(out.starts_with("     1\tline 1\n"), "{}", &out[..40]);
    assert!(out.contains("  2000\tline 2000\n"));
    assert!(!out.contains("line 2001"));
    assert!(
        out.ends_with("(lines 1-2000 of 5000; read on with offset 2001)"),
        "{}",
        &out[out.len() - 80..]
    );

    let out = env
        .ok(
            "read_file",
            json!({ "path": "big.txt", "offset": 4990, "limit": 3 }),
        )
        .await;
    assert_eq!(
        out,
        "  4990\tline 4990\n  4991\tline 4991\n  4992\tline 4992\n\n\
         (lines 4990-4992 of 5000; read on with offset 4993)"
    );

    let out = env
        .ok("read_file", json!({ "path": "big.txt", "offset": 4999 }))
        .await;
    assert_eq!(
        out,
        "  4999\tline 4999\n  5000\tline 5000\n\n(lines 4999-5000 of 5000)"
    );

    let err = env
        .err("read_file", json!({ "path": "big.txt", "offset": 6000 }))
        .await;
    assert_eq!(
        err,
        "offset 6000 is past the end of `big.txt`, which has 5000 lines"
    );

    // The backend reads ranges too.
    let fs = LocalFs::new(env.root());
    let part = fs
        .read_file("big.txt", ReadRange::lines(10, 2))
        .await
        .unwrap();
    assert_eq!(part.text, "line 11\nline 12\n");
    assert_eq!(
        (part.first_line, part.line_count, part.total_lines),
        (11, 2, 5000)
    );
    assert!(part.is_partial());
    let all = fs.read_file("big.txt", ReadRange::all()).await.unwrap();
    assert_eq!(all.text, text);
    assert!(!all.is_partial());
}

#[tokio::test]
async fn read_file_cuts_long_lines_and_honours_read_limit() {
    let env = Env::with(|fs| fs.read_limit(2));
    env.write("long.txt", format!("{}\nshort\nmore\n", "x".repeat(2500)));
    let out = env.ok("read_file", json!({ "path": "long.txt" })).await;
    let first = out.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "     1\t{} ... (500 more characters on this line)",
            "x".repeat(2000)
        )
    );
    assert!(
        out.ends_with("(lines 1-2 of 3; read on with offset 3)"),
        "{out}"
    );
}

#[tokio::test]
async fn read_file_errors_say_what_went_wrong() {
    let env = Env::new();
    let err = env.err("read_file", json!({ "path": "missing.txt" })).await;
    assert_eq!(
        err,
        "`missing.txt` does not exist; use `ls` or `glob` to find the right path"
    );

    std::fs::create_dir(env.path("dir")).unwrap();
    let err = env.err("read_file", json!({ "path": "dir" })).await;
    assert!(err.starts_with("`dir` is a directory, not a file"), "{err}");

    let err = env.err("read_file", json!({ "path": 3 })).await;
    assert!(
        err.contains("invalid arguments for tool `read_file`"),
        "{err}"
    );
}

#[tokio::test]
async fn read_file_refuses_non_utf8() {
    let env = Env::new();
    env.write("data.bin", b"ok line\n\xff\xfe\x00binary\n");
    let err = env.err("read_file", json!({ "path": "data.bin" })).await;
    assert_eq!(
        err,
        "`data.bin` is not valid UTF-8 text (line 2); read_file and edit_file handle UTF-8 \
         text files only"
    );
    // Also when the bad bytes are outside the range asked for.
    let err = env
        .err("read_file", json!({ "path": "data.bin", "limit": 1 }))
        .await;
    assert!(err.contains("not valid UTF-8"), "{err}");

    let fs = LocalFs::new(env.root());
    let e = fs
        .read_file("data.bin", ReadRange::all())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), FsErrorKind::NotUtf8);
    assert!(std::error::Error::source(&e).is_some());
}

// ===== write_file and edit_file =====

#[tokio::test]
async fn write_file_creates_parent_directories_and_records_the_file() {
    let env = Env::new();
    let out = env
        .ok(
            "write_file",
            json!({ "path": "./deep/er/notes.md", "content": "# Notes\nfirst\n" }),
        )
        .await;
    assert_eq!(out, "wrote 14 bytes (2 lines) to `deep/er/notes.md`");
    assert_eq!(env.read("deep/er/notes.md"), "# Notes\nfirst\n");
    assert_eq!(
        &*tower_agent::builtins::filesystem::files_written(&env.ctx)["deep/er/notes.md"],
        "# Notes\nfirst\n"
    );

    // Replaces the whole file.
    env.ok(
        "write_file",
        json!({ "path": "deep/er/notes.md", "content": "new" }),
    )
    .await;
    assert_eq!(env.read("deep/er/notes.md"), "new");
    assert_eq!(
        &*tower_agent::builtins::filesystem::files_written(&env.ctx)["deep/er/notes.md"],
        "new"
    );

    // An absolute path inside the root is fine, and recorded relative to it.
    let abs = env.path("abs.txt");
    env.ok(
        "write_file",
        json!({ "path": abs.to_str().unwrap(), "content": "a" }),
    )
    .await;
    assert_eq!(env.read("abs.txt"), "a");
    assert!(tower_agent::builtins::filesystem::files_written(&env.ctx).contains_key("abs.txt"));

    std::fs::create_dir(env.path("dir")).unwrap();
    let err = env
        .err("write_file", json!({ "path": "dir", "content": "x" }))
        .await;
    assert!(err.starts_with("`dir` is a directory, not a file"), "{err}");
}

#[tokio::test]
async fn edit_file_replaces_the_first_occurrence() {
    let env = Env::new();
    env.write("src/main.rs", "let a = 1;\nlet b = 1;\nlet a = 1;\n");
    let out = env
        .ok(
            "edit_file",
            json!({ "path": "src/main.rs", "old_text": "let a = 1;", "new_text": "let a = 2;" }),
        )
        .await;
    assert!(
        out.starts_with("edited `src/main.rs`: replaced the first of 2 occurrences"),
        "{out}"
    );
    let expected = "let a = 2;\nlet b = 1;\nlet a = 1;\n";
    assert_eq!(env.read("src/main.rs"), expected);
    assert_eq!(
        &*tower_agent::builtins::filesystem::files_written(&env.ctx)["src/main.rs"],
        expected
    );

    let out = env
        .ok(
            "edit_file",
            json!({ "path": "src/main.rs", "old_text": "b = 1", "new_text": "b = 3" }),
        )
        .await;
    assert_eq!(out, "edited `src/main.rs`");
    assert_eq!(
        env.read("src/main.rs"),
        "let a = 2;\nlet b = 3;\nlet a = 1;\n"
    );
}

#[tokio::test]
async fn edit_file_errors_are_clear() {
    let env = Env::new();
    env.write("a.txt", "hello world\n");
    let err = env
        .err(
            "edit_file",
            json!({ "path": "a.txt", "old_text": "goodbye", "new_text": "x" }),
        )
        .await;
    assert!(
        err.starts_with("old_text not found in `a.txt`; read the file again"),
        "{err}"
    );
    assert_eq!(env.read("a.txt"), "hello world\n");
    assert!(tower_agent::builtins::filesystem::files_written(&env.ctx).is_empty());

    let err = env
        .err(
            "edit_file",
            json!({ "path": "a.txt", "old_text": "", "new_text": "x" }),
        )
        .await;
    assert!(err.starts_with("old_text is empty"), "{err}");

    let err = env
        .err(
            "edit_file",
            json!({ "path": "b.txt", "old_text": "a", "new_text": "x" }),
        )
        .await;
    assert!(err.starts_with("`b.txt` does not exist"), "{err}");

    env.write("bin", b"\xff\xff");
    let err = env
        .err(
            "edit_file",
            json!({ "path": "bin", "old_text": "a", "new_text": "x" }),
        )
        .await;
    assert!(err.starts_with("`bin` is not valid UTF-8 text"), "{err}");

    let fs = LocalFs::new(env.root());
    let e = fs.edit_file("a.txt", "nope", "x").await.unwrap_err();
    assert_eq!(e.kind(), FsErrorKind::OldTextNotFound);
    assert_eq!(e.to_string(), "old_text not found in `a.txt`");
}

// ===== confinement =====

#[tokio::test]
async fn paths_outside_the_root_are_refused() {
    let env = Env::new();
    let outside = outside();
    std::fs::create_dir(env.path("sub")).unwrap();
    let secret = outside.path().join("secret.txt");
    let root = std::fs::canonicalize(env.root()).unwrap();

    for path in [
        "../x".to_owned(),
        "sub/../../x".to_owned(),
        "/etc/passwd".to_owned(),
        secret.to_str().unwrap().to_owned(),
    ] {
        let expected = format!("path `{path}` escapes the root {}", root.display());
        let err = env.err("read_file", json!({ "path": path })).await;
        assert!(err.starts_with(&expected), "{err}");
        let err = env
            .err("write_file", json!({ "path": path, "content": "pwned" }))
            .await;
        assert!(err.starts_with(&expected), "{err}");
        let err = env
            .err(
                "edit_file",
                json!({ "path": path, "old_text": "top", "new_text": "no" }),
            )
            .await;
        assert!(err.starts_with(&expected), "{err}");
        let err = env.err("ls", json!({ "path": path })).await;
        assert!(err.starts_with(&expected), "{err}");
        let err = env
            .err("grep", json!({ "pattern": "x", "path": path }))
            .await;
        assert!(err.starts_with(&expected), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret\n");
    assert!(!env.root().parent().unwrap().join("x").exists());

    // `..` that stays inside is fine.
    env.ok(
        "write_file",
        json!({ "path": "sub/../inside.txt", "content": "ok" }),
    )
    .await;
    assert_eq!(env.read("inside.txt"), "ok");

    let fs = LocalFs::new(env.root());
    let e = fs.read_file("../x", ReadRange::all()).await.unwrap_err();
    assert_eq!(e.kind(), FsErrorKind::EscapesRoot);
}

#[tokio::test]
async fn symlinks_out_of_the_root_are_refused() {
    let env = Env::new();
    let outside = outside();
    let secret = outside.path().join("secret.txt");
    std::os::unix::fs::symlink(&secret, env.path("link.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), env.path("linkdir")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("new.txt"), env.path("dangling")).unwrap();

    for path in ["link.txt", "linkdir/secret.txt"] {
        let err = env.err("read_file", json!({ "path": path })).await;
        assert!(err.contains("escapes the root"), "{err}");
        assert!(err.contains("through a symlink"), "{err}");
        let err = env
            .err("write_file", json!({ "path": path, "content": "pwned" }))
            .await;
        assert!(err.contains("escapes the root"), "{err}");
        let err = env
            .err(
                "edit_file",
                json!({ "path": path, "old_text": "top", "new_text": "no" }),
            )
            .await;
        assert!(err.contains("escapes the root"), "{err}");
    }
    // New files through a symlinked directory or a dangling symlink.
    for path in ["linkdir/new.txt", "linkdir/a/b/new.txt", "dangling"] {
        let err = env
            .err("write_file", json!({ "path": path, "content": "pwned" }))
            .await;
        assert!(err.contains("escapes the root"), "{path}: {err}");
    }
    let err = env.err("ls", json!({ "path": "linkdir" })).await;
    assert!(err.contains("escapes the root"), "{err}");

    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret\n");
    assert!(!outside.path().join("new.txt").exists());
    assert!(!outside.path().join("a").exists());

    // grep and glob do not follow symlinks while walking.
    let out = env.ok("grep", json!({ "pattern": "secret" })).await;
    assert_eq!(out, "no matches for `secret`");
    let out = env.ok("glob", json!({ "pattern": "**/*.txt" })).await;
    assert_eq!(out, "link.txt");
}

#[tokio::test]
async fn symlinks_inside_the_root_are_followed() {
    let env = Env::new();
    env.write("real/file.txt", "content\n");
    std::os::unix::fs::symlink("real/file.txt", env.path("alias.txt")).unwrap();
    std::os::unix::fs::symlink("real", env.path("aliasdir")).unwrap();
    std::os::unix::fs::symlink("real/created.txt", env.path("dangling")).unwrap();

    let out = env.ok("read_file", json!({ "path": "alias.txt" })).await;
    assert_eq!(out, "     1\tcontent\n");
    env.ok(
        "write_file",
        json!({ "path": "aliasdir/new.txt", "content": "n" }),
    )
    .await;
    assert_eq!(env.read("real/new.txt"), "n");
    env.ok("write_file", json!({ "path": "dangling", "content": "d" }))
        .await;
    assert_eq!(env.read("real/created.txt"), "d");
}

#[tokio::test]
async fn a_missing_root_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let fs = LocalFs::new(dir.path().join("nope"));
    let e = fs.ls(".").await.unwrap_err();
    assert_eq!(e.kind(), FsErrorKind::NotFound);
    assert!(
        e.to_string().starts_with("the filesystem root ") && e.to_string().contains("nope"),
        "{e}"
    );
}

// ===== glob =====

#[tokio::test]
async fn glob_matches_paths_relative_to_the_root() {
    let env = Env::new();
    for f in ["a.txt", "b.md", "src/lib.rs", "src/x/y.rs", "docs/c.txt"] {
        env.write(f, "");
    }
    assert_eq!(env.ok("glob", json!({ "pattern": "*.txt" })).await, "a.txt");
    assert_eq!(
        env.ok("glob", json!({ "pattern": "**/*.rs" })).await,
        "src/lib.rs\nsrc/x/y.rs"
    );
    assert_eq!(
        env.ok("glob", json!({ "pattern": "src/*.rs" })).await,
        "src/lib.rs"
    );
    assert_eq!(
        env.ok("glob", json!({ "pattern": "*.{md,txt}" })).await,
        "a.txt\nb.md"
    );
    assert_eq!(
        env.ok("glob", json!({ "pattern": "src/*" })).await,
        "src/lib.rs\nsrc/x"
    );
    assert_eq!(
        env.ok("glob", json!({ "pattern": "**/*.txt" })).await,
        "a.txt\ndocs/c.txt"
    );
    let abs = format!("{}/docs/*.txt", env.root().display());
    assert_eq!(
        env.ok("glob", json!({ "pattern": abs })).await,
        "docs/c.txt"
    );

    assert_eq!(
        env.ok("glob", json!({ "pattern": "*.py" })).await,
        "no paths match `*.py`"
    );
    assert_eq!(
        env.ok("glob", json!({ "pattern": "nodir/*.py" })).await,
        "no paths match `nodir/*.py`"
    );
    let err = env.err("glob", json!({ "pattern": "[a" })).await;
    assert!(err.starts_with("invalid glob pattern `[a`"), "{err}");
    let err = env.err("glob", json!({ "pattern": "../*" })).await;
    assert!(err.starts_with("path `../*` escapes the root"), "{err}");
    let err = env.err("glob", json!({ "pattern": "/etc/*" })).await;
    assert!(err.starts_with("path `/etc/*` escapes the root"), "{err}");
}

#[tokio::test]
async fn glob_caps_its_results() {
    let env = Env::with(|fs| fs.glob_limit(3));
    for i in 0..5 {
        env.write(&format!("f{i}.txt"), "");
    }
    let out = env.ok("glob", json!({ "pattern": "*" })).await;
    assert_eq!(
        out,
        "f0.txt\nf1.txt\nf2.txt\n\n(showing the first 3 of 5 paths; use a narrower pattern)"
    );
}

// ===== grep =====

#[tokio::test]
async fn grep_finds_matching_lines() {
    let env = Env::new();
    env.write(
        "src/lib.rs",
        "fn main() {}\n// TODO: more\nfn helper() {}\n",
    );
    env.write("notes.md", "todo: write docs\nnothing\n");
    env.write("bin.dat", b"fn main\x00\x01\x02");
    env.write(".git/config", "fn in git\n");

    let out = env.ok("grep", json!({ "pattern": r"fn \w+\(" })).await;
    assert_eq!(
        out,
        "src/lib.rs:1: fn main() {}\nsrc/lib.rs:3: fn helper() {}"
    );

    let out = env
        .ok(
            "grep",
            json!({ "pattern": "todo", "case_insensitive": true }),
        )
        .await;
    assert_eq!(
        out,
        "notes.md:1: todo: write docs\nsrc/lib.rs:2: // TODO: more"
    );

    let out = env
        .ok(
            "grep",
            json!({ "pattern": "todo", "case_insensitive": true, "include": "*.rs" }),
        )
        .await;
    assert_eq!(out, "src/lib.rs:2: // TODO: more");

    let out = env
        .ok("grep", json!({ "pattern": "TODO", "path": "src/lib.rs" }))
        .await;
    assert_eq!(out, "src/lib.rs:2: // TODO: more");
    let out = env
        .ok("grep", json!({ "pattern": "TODO", "path": "src" }))
        .await;
    assert_eq!(out, "src/lib.rs:2: // TODO: more");

    let out = env.ok("grep", json!({ "pattern": "zebra" })).await;
    assert_eq!(out, "no matches for `zebra`");

    let err = env.err("grep", json!({ "pattern": "fn (" })).await;
    assert!(err.starts_with("invalid regex `fn (`"), "{err}");
    let err = env
        .err("grep", json!({ "pattern": "x", "include": "[" }))
        .await;
    assert!(err.starts_with("invalid glob pattern `[`"), "{err}");
    let err = env
        .err("grep", json!({ "pattern": "x", "path": "nope" }))
        .await;
    assert!(err.starts_with("`nope` does not exist"), "{err}");

    let fs = LocalFs::new(env.root());
    let e = fs.grep("(", GrepOptions::default()).await.unwrap_err();
    assert_eq!(e.kind(), FsErrorKind::InvalidPattern);
    let found = fs
        .grep("fn", GrepOptions::default().path("src").max_matches(1))
        .await
        .unwrap();
    assert!(found.truncated);
    assert_eq!(found.matches[0].to_string(), "src/lib.rs:1: fn main() {}");
}

#[tokio::test]
async fn grep_caps_its_results() {
    let env = Env::with(|fs| fs.grep_limit(3));
    env.write("many.txt", "hit\n".repeat(10));
    let out = env.ok("grep", json!({ "pattern": "hit" })).await;
    assert_eq!(
        out,
        "many.txt:1: hit\nmany.txt:2: hit\nmany.txt:3: hit\n\n(stopped at 3 matches; narrow \
         the search with `path` or `include`, or a more precise pattern)"
    );
}

// ===== execute =====

#[tokio::test]
async fn execute_returns_output_and_exit_code() {
    let env = Env::new();
    env.write("a.txt", "from a file\n");
    let out = env
        .call(
            "execute",
            json!({ "command": "echo out; echo err >&2; cat a.txt; exit 3" }),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.content, "out\nerr\nfrom a file\n[exit code: 3]");
    assert_eq!(out.metadata["exit_code"], 3);

    // It runs in the root.
    let out = env.ok("execute", json!({ "command": "pwd" })).await;
    let root = std::fs::canonicalize(env.root()).unwrap();
    assert_eq!(out, format!("{}\n[exit code: 0]", root.display()));

    let out = env.ok("execute", json!({ "command": "true" })).await;
    assert_eq!(out, "(no output)\n[exit code: 0]");

    // Syntax errors reach the output too.
    let out = env.ok("execute", json!({ "command": "if then fi" })).await;
    assert!(
        out.contains("Syntax error") || out.contains("syntax error"),
        "{out}"
    );
    assert!(!out.ends_with("[exit code: 0]"), "{out}");

    let out = env.ok("execute", json!({ "command": "kill -9 $$" })).await;
    assert_eq!(out, "(no output)\n[killed by signal 9]");

    let err = env.err("execute", json!({ "command": "  " })).await;
    assert_eq!(err, "the command is empty");
}

#[tokio::test]
async fn execute_truncates_long_output() {
    let env = Env::with(|fs| fs.max_output(100));
    let out = env.ok("execute", json!({ "command": "seq 1 10000" })).await;
    assert!(out.starts_with("1\n2\n3\n"), "{out}");
    assert!(out.ends_with("9999\n10000\n[exit code: 0]"), "{out}");
    // 48,894 characters in all, 100 kept.
    assert!(
        out.contains("\n\n... (truncated 48794 characters) ...\n\n"),
        "{out}"
    );

    let fs = LocalFs::new(env.root());
    let run = fs
        .exec("seq 1 10000", ExecOptions::default().max_output(10))
        .await
        .unwrap();
    assert!(run.truncated && run.success());
    let run = fs.exec("echo hi", ExecOptions::default()).await.unwrap();
    assert!(!run.truncated);
    assert_eq!(run.output, "hi\n");
}

#[tokio::test]
async fn execute_timeout_kills_the_process_group() {
    let env = Env::new();
    // Not killed at its timeout, the command would run for ten minutes.
    let err = support::within(
        "the timed-out command",
        env.err(
            "execute",
            json!({
                "command": "echo $$ > shell.pid; sleep 600 & echo $! > child.pid; sleep 600; echo done",
                "timeout": 1,
            }),
        ),
    )
    .await;
    assert!(
        err.starts_with(
            "command timed out after 1s; it and the processes it started were killed; if it \
             needs longer, pass a larger `timeout` (at most 600s)"
        ),
        "{err}"
    );
    let shell = read_pid(&env.path("shell.pid")).await;
    let child = read_pid(&env.path("child.pid")).await;
    assert!(wait_dead(shell).await, "the shell {shell} is still running");
    assert!(
        wait_dead(child).await,
        "the background child {child} is still running"
    );
}

#[tokio::test]
async fn execute_timeout_is_capped() {
    let env = Env::with(|fs| {
        fs.exec_timeout(Duration::from_millis(300))
            .max_exec_timeout(Duration::from_secs(1))
    });
    let err = support::within(
        "the capped command",
        env.err(
            "execute",
            json!({ "command": "sleep 600", "timeout": 1000 }),
        ),
    )
    .await;
    assert!(err.starts_with("command timed out after 1s"), "{err}");

    let err = env.err("execute", json!({ "command": "sleep 30" })).await;
    assert!(err.starts_with("command timed out after 300ms"), "{err}");
    let err = env
        .err("execute", json!({ "command": "true", "timeout": 0 }))
        .await;
    assert_eq!(err, "timeout must be at least 1 second");

    let fs = LocalFs::new(env.root());
    let e = fs
        .exec(
            "sleep 30",
            ExecOptions::default().timeout(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), FsErrorKind::Timeout);
}

#[tokio::test]
async fn dropping_the_call_kills_the_process_group() {
    let env = Env::new();
    let tools = env.tools.clone();
    let ctx = env.ctx.clone();
    let call = tokio::spawn(async move {
        let call = ToolCall::new(
            "c",
            "execute",
            json!({ "command": "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait" }),
        );
        tools.oneshot(ToolRequest::new(call, ctx)).await
    });
    let shell = read_pid(&env.path("shell.pid")).await;
    let child = read_pid(&env.path("child.pid")).await;
    assert!(alive(shell) && alive(child));
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(wait_dead(shell).await, "the shell {shell} is still running");
    assert!(
        wait_dead(child).await,
        "the background child {child} is still running"
    );
}

#[tokio::test]
async fn processes_left_running_are_killed_when_the_shell_exits() {
    let env = Env::new();
    // The child holds the output pipe for ten minutes: the call must not wait for it.
    let out = support::within(
        "the command",
        env.ok(
            "execute",
            json!({ "command": "sleep 600 & echo $! > child.pid; echo started" }),
        ),
    )
    .await;
    assert_eq!(out, "started\n[exit code: 0]");
    let child = read_pid(&env.path("child.pid")).await;
    assert!(
        wait_dead(child).await,
        "the background child {child} is still running"
    );
}

// ===== the stage =====

#[tokio::test]
async fn the_stage_registers_seven_tools_or_six() {
    let dir = tempfile::tempdir().unwrap();
    let names = |router: &ToolRouter| {
        router
            .specs()
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    };
    let all = names(&Filesystem::local(dir.path()).tools());
    assert_eq!(all.len(), 7, "{all:?}");
    for name in [
        "ls",
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "grep",
        "execute",
    ] {
        assert!(all.iter().any(|n| n == name), "{name} missing from {all:?}");
    }
    let without = names(&Filesystem::local(dir.path()).without_execute().tools());
    assert_eq!(without.len(), 6);
    assert!(!without.iter().any(|n| n == "execute"));

    // The schemas come from the argument structs, doc comments included.
    let tools = Filesystem::local(dir.path()).tools();
    let read = tools
        .specs()
        .iter()
        .find(|s| s.name == "read_file")
        .unwrap()
        .clone();
    assert_eq!(read.parameters["required"], json!(["path"]));
    let offset = read.parameters["properties"]["offset"]["description"]
        .as_str()
        .unwrap();
    assert!(
        offset.starts_with("The line number to start reading at"),
        "{offset}"
    );

    // Through the setup stage, the model sees them.
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .setup(Filesystem::local(dir.path()).without_execute())
        .build();
    agent.run("hi").await.unwrap();
    let seen: Vec<_> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(seen.len(), 6, "{seen:?}");
}

#[tokio::test]
async fn files_written_and_edited_are_saved_with_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call(
            "write_file",
            json!({ "path": "notes.txt", "content": "milk\neggs\n" }),
        )
        .tool_call(
            "edit_file",
            json!({ "path": "notes.txt", "old_text": "eggs", "new_text": "bread" }),
        )
        .tool_call(
            "write_file",
            json!({ "path": "../escape.txt", "content": "x" }),
        )
        .text("Done.");
    let agent = Agent::builder()
        .model(model)
        .setup(Filesystem::local(dir.path()))
        .store(store.clone())
        .build();
    let resp = agent
        .run(AgentRequest::new("Write my list").thread("t"))
        .await
        .unwrap();
    assert!(resp.outcome.is_finished());
    assert_eq!(resp.text, "Done.");

    let thread = store.get("t").unwrap();
    assert_eq!(
        FilesWritten::of(&thread.data).len(),
        1,
        "{:?}",
        FilesWritten::of(&thread.data)
    );
    assert_eq!(
        &*FilesWritten::of(&thread.data)["notes.txt"],
        "milk\nbread\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "milk\nbread\n"
    );
    // The refused write reached the model as an error result.
    let refused = resp
        .messages
        .iter()
        .find(|m| m.text().contains("escapes the root"))
        .expect("an error result for ../escape.txt");
    assert!(refused.is_error);
}

#[tokio::test]
async fn any_backend_behind_an_arc() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = Arc::new(LocalFs::new(dir.path()));
    let fs = Filesystem::new(Arc::clone(&backend));
    assert_eq!(fs.tools().len(), 7);
    backend.write_file("x/y.txt", "1").await.unwrap();
    let entries = backend.ls("x").await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].name.as_str(), entries[0].kind),
        ("y.txt", EntryKind::File)
    );
    assert!(format!("{fs:?}").contains("LocalFs"));
}

// ===== hardening: special files, bounded reads, races, names =====

/// Runs `call` with a deadline; if it hangs (a thread stuck opening the FIFO `fifo`), opens
/// the FIFO both ways so that the stuck thread can finish, then fails.
async fn within_or_release(
    fifo: &Path,
    what: &str,
    call: impl Future<Output = ToolOutput>,
) -> ToolOutput {
    match tokio::time::timeout(support::PATIENCE, call).await {
        Ok(out) => out,
        Err(_) => {
            // O_RDWR on a FIFO never blocks, and unblocks a reader or a writer waiting.
            let release = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(fifo);
            drop(release);
            panic!("{what} on a FIFO hung");
        }
    }
}

/// An `Env` with `notes.txt` and a FIFO `pipe`.
fn env_with_a_fifo() -> (Env, PathBuf) {
    let env = Env::new();
    env.write("notes.txt", "needle in a file\n");
    let fifo = env.path("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    (env, fifo)
}

#[tokio::test]
async fn fifos_are_refused_without_blocking() {
    let (env, fifo) = env_with_a_fifo();
    let out = within_or_release(
        &fifo,
        "read_file",
        env.call("read_file", json!({ "path": "pipe" })),
    )
    .await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("`pipe` is a FIFO (named pipe), not a regular file"),
        "{}",
        out.content
    );
    let out = within_or_release(
        &fifo,
        "write_file",
        env.call("write_file", json!({ "path": "pipe", "content": "x" })),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{}",
        out.content
    );
    let out = within_or_release(
        &fifo,
        "edit_file",
        env.call(
            "edit_file",
            json!({ "path": "pipe", "old_text": "a", "new_text": "b" }),
        ),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{}",
        out.content
    );

    // `ls` says what it is.
    let entries: Value = serde_json::from_str(&env.ok("ls", json!({})).await).unwrap();
    assert_eq!(
        entries[1],
        json!({ "name": "pipe", "type": "other", "size": 0 })
    );
    // Still a FIFO.
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[tokio::test]
async fn grep_skips_fifos_without_blocking() {
    let (env, fifo) = env_with_a_fifo();
    let out = within_or_release(
        &fifo,
        "grep",
        env.call("grep", json!({ "pattern": "needle" })),
    )
    .await;
    assert_eq!(out.content, "notes.txt:1: needle in a file");
    let out = within_or_release(
        &fifo,
        "grep on the FIFO",
        env.call("grep", json!({ "pattern": "needle", "path": "pipe" })),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn the_backend_cuts_long_lines_while_reading_and_says_where() {
    let env = Env::new();
    env.write(
        "long.txt",
        format!("short\n{}\r\n€€€€€€\n{}", "y".repeat(50), "z".repeat(30)),
    );
    let text = LocalFs::new(env.root())
        .read_file("long.txt", ReadRange::lines(0, 10).max_line_chars(4))
        .await
        .unwrap();
    assert_eq!(text.text, "shor\nyyyy\n€€€€\nzzzz");
    assert_eq!(text.cut_lines, vec![(1, 1), (2, 46), (3, 2), (4, 26)]);
    assert_eq!((text.line_count, text.total_lines), (4, 4));
    // Lines outside the range are counted, not kept.
    let text = LocalFs::new(env.root())
        .read_file("long.txt", ReadRange::lines(3, 1).max_line_chars(100))
        .await
        .unwrap();
    assert_eq!(
        (text.text.as_str(), text.first_line, text.total_lines),
        ("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", 4, 4)
    );
    assert!(text.cut_lines.is_empty());
}

/// Runs the test `name` again in a child process with `FS_MEMORY_CASE` set, checks the peak
/// resident memory the case reported (in KiB) is under [`PEAK_BOUND_KIB`], then that the case
/// passed.
fn peak_rss_of_case(name: &str) {
    let out = rerun(&support::test_name!(name))
        .env("FS_MEMORY_CASE", "1")
        .output()
        .unwrap();
    let peak = reported_number(&out, "PEAK_RSS_KIB");
    assert!(peak < PEAK_BOUND_KIB, "peak RSS {peak} KiB");
    passed(&out, name);
}

/// A 256 MiB file that is one line: `head`, then (sparse) zero bytes, no newline.
fn huge_single_line(path: &Path, head: &str) {
    let file = std::fs::File::create(path).unwrap();
    std::io::Write::write_all(&mut &file, head.as_bytes()).unwrap();
    file.set_len(256 * 1024 * 1024).unwrap();
}

/// Peak memory bound of the cases below: the test process itself takes ~10-20 MiB; reading
/// the 256 MiB line whole (as before) takes more than 256 MiB.
const PEAK_BOUND_KIB: u64 = 96 * 1024;

#[tokio::test]
async fn read_file_with_a_limit_on_a_huge_single_line_stays_small() {
    if std::env::var_os("FS_MEMORY_CASE").is_none() {
        peak_rss_of_case("read_file_with_a_limit_on_a_huge_single_line_stays_small");
        return;
    }
    let env = Env::new();
    huge_single_line(&env.path("huge.txt"), &"start ".repeat(1000));
    let out = env
        .ok("read_file", json!({ "path": "huge.txt", "limit": 5 }))
        .await;
    println!("PEAK_RSS_KIB={}", peak_rss_kib());
    let expected_rest = 256 * 1024 * 1024 - 2000;
    assert_eq!(
        out,
        format!(
            "     1\t{} ... ({expected_rest} more characters on this line)\n",
            "start ".repeat(1000)[..2000].to_owned()
        )
    );
}

#[tokio::test]
async fn grep_over_a_huge_single_line_stays_small() {
    if std::env::var_os("FS_MEMORY_CASE").is_none() {
        peak_rss_of_case("grep_over_a_huge_single_line_stays_small");
        return;
    }
    let env = Env::new();
    // No NUL in the first 8 KiB: grep takes it for text.
    huge_single_line(
        &env.path("huge.txt"),
        &format!("needle {}", "a".repeat(9000)),
    );
    // Past the first 65,536 characters of the line: not searched.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(env.path("huge.txt"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, b"late-marker", 100_000).unwrap();
    let out = env.ok("grep", json!({ "pattern": "needle" })).await;
    println!("PEAK_RSS_KIB={}", peak_rss_kib());
    assert_eq!(out, format!("huge.txt:1: needle {} ...", "a".repeat(493)));
    let out = env.ok("grep", json!({ "pattern": "late-marker" })).await;
    assert_eq!(out, "no matches for `late-marker`");
}

#[tokio::test]
async fn edit_file_refuses_files_over_its_cap() {
    let env = Env::new();
    let file = std::fs::File::create(env.path("big.txt")).unwrap();
    file.set_len(33 * 1024 * 1024).unwrap();
    let err = env
        .err(
            "edit_file",
            json!({ "path": "big.txt", "old_text": "a", "new_text": "b" }),
        )
        .await;
    assert_eq!(
        err,
        "`big.txt` is too large to edit (34603008 bytes; edit_file edits files of at most 32 MiB)"
    );
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test]
async fn a_directory_swapped_for_a_symlink_never_lets_an_operation_out() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let env = Env::new();
    let outside = outside();
    std::fs::write(outside.path().join("only-outside.txt"), "top secret\n").unwrap();
    env.write("d/only-inside.txt", "inside\n");
    std::os::unix::fs::symlink(outside.path(), env.path("s")).unwrap();

    // A local process swaps `d` (a directory) and `s` (a symlink out of the root),
    // atomically, as fast as it can.
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let racer = {
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let root = std::fs::File::open(env.root()).unwrap();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                nix::fcntl::renameat2(
                    &root,
                    "d",
                    &root,
                    "s",
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                )
                .unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let fs = Arc::new(LocalFs::new(env.root()));
    let (mut written, mut read, mut listed) = (0, 0, 0);
    // What got out: files read, names listed and lines found outside the root.
    let mut leaks = Vec::new();
    for batch in 0..375 {
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..8 {
            let fs = Arc::clone(&fs);
            let n = batch * 8 + i;
            calls.spawn(async move {
                let wrote = fs.write_file(&format!("d/f{n}.txt"), "pwned?\n").await;
                let text = fs.read_file("d/only-inside.txt", ReadRange::all()).await;
                let text_out = fs.read_file("d/only-outside.txt", ReadRange::all()).await;
                let names = fs.ls("d").await;
                let found = fs.grep("secret", GrepOptions::default().path("d")).await;
                (wrote, text, text_out, names, found)
            });
        }
        while let Some(result) = calls.join_next().await {
            let (wrote, text, text_out, names, found) = result.unwrap();
            if wrote.is_ok() {
                written += 1;
            }
            if let Ok(text) = text {
                assert_eq!(text.text, "inside\n");
                read += 1;
            }
            if let Ok(text) = text_out {
                leaks.push(format!("read {:?}", text.text));
            }
            if let Ok(names) = names {
                if names.iter().any(|e| e.name == "only-outside.txt") {
                    leaks.push(format!("listed {names:?}"));
                }
                listed += 1;
            }
            if let Ok(found) = found
                && !found.matches.is_empty()
            {
                leaks.push(format!("found {:?}", found.matches));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();

    let escaped: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "only-outside.txt" && name != "secret.txt")
        .collect();
    assert!(
        escaped.is_empty() && leaks.is_empty(),
        "{} of 3000 writes landed outside the root; {} reads, listings or greps saw outside, \
         first: {:?}",
        escaped.len(),
        leaks.len(),
        leaks
            .first()
            .map(|l| l.chars().take(300).collect::<String>())
    );
    // The race was real, and operations did get through between the swaps.
    assert!(swaps.load(Ordering::Relaxed) > 1000);
    assert!(
        written > 0 && read > 0 && listed > 0,
        "{written} {read} {listed}"
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn non_utf8_names_are_shown_escaped_and_read_back() {
    use std::os::unix::ffi::OsStrExt;

    let env = Env::new();
    let raw = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(env.root().join(raw), "croissant\n").unwrap();

    let entries: Value = serde_json::from_str(&env.ok("ls", json!({})).await).unwrap();
    assert_eq!(entries[0]["name"], "caf\\xE9.txt");
    assert_eq!(
        env.ok("glob", json!({ "pattern": "*.txt" })).await,
        "caf\\xE9.txt"
    );
    assert_eq!(
        env.ok("grep", json!({ "pattern": "croissant" })).await,
        "caf\\xE9.txt:1: croissant"
    );

    // The name shown is the name to use.
    let out = env.ok("read_file", json!({ "path": "caf\\xE9.txt" })).await;
    assert_eq!(out, "     1\tcroissant\n");
    let out = env
        .ok(
            "edit_file",
            json!({ "path": "caf\\xE9.txt", "old_text": "croissant", "new_text": "pain" }),
        )
        .await;
    assert_eq!(out, "edited `caf\\xE9.txt`");
    assert_eq!(
        std::fs::read_to_string(env.root().join(raw)).unwrap(),
        "pain\n"
    );
    let out = env
        .ok(
            "write_file",
            json!({ "path": "dir\\xFF/na\\xefve.txt", "content": "new" }),
        )
        .await;
    assert_eq!(out, "wrote 3 bytes (1 lines) to `dir\\xFF/na\\xEFve.txt`");
    let created = env
        .root()
        .join(std::ffi::OsStr::from_bytes(b"dir\xff"))
        .join(std::ffi::OsStr::from_bytes(b"na\xefve.txt"));
    assert_eq!(std::fs::read_to_string(created).unwrap(), "new");

    // A UTF-8 name that looks escaped is shown escaped, and reads back as itself.
    env.write("caf\\xE9.txt", "literal\n");
    let out = env.ok("glob", json!({ "pattern": "caf*" })).await;
    assert_eq!(out, "caf\\\\xE9.txt\ncaf\\xE9.txt");
    let out = env
        .ok("read_file", json!({ "path": "caf\\\\xE9.txt" }))
        .await;
    assert_eq!(out, "     1\tliteral\n");
}

#[tokio::test]
async fn escape_errors_do_not_say_where_a_symlink_leads() {
    let env = Env::new();
    let outside = outside();
    std::os::unix::fs::symlink("/etc/passwd", env.path("passwd")).unwrap();
    std::os::unix::fs::symlink(outside.path(), env.path("out")).unwrap();
    let root = std::fs::canonicalize(env.root()).unwrap();

    for path in ["passwd", "out/secret.txt", "out/new.txt"] {
        for (tool, args) in [
            ("read_file", json!({ "path": path })),
            ("write_file", json!({ "path": path, "content": "x" })),
            (
                "edit_file",
                json!({ "path": path, "old_text": "a", "new_text": "b" }),
            ),
            ("grep", json!({ "pattern": "x", "path": path })),
        ] {
            let err = env.err(tool, args).await;
            assert!(
                err.starts_with(&format!(
                    "path `{path}` escapes the root {} through a symlink",
                    root.display()
                )),
                "{tool}: {err}"
            );
            assert!(!err.contains("/etc"), "{tool}: {err}");
            assert!(
                !err.contains(outside.path().to_str().unwrap()),
                "{tool}: {err}"
            );
        }
    }
}
