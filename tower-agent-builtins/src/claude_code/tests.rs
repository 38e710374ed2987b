//! The tools over real files in temporary directories, and real processes.

use std::{
    path::Path,
    time::{Duration, SystemTime},
};

use serde_json::{Value, json};
use tower::{Service, ServiceExt};

use super::{ClaudeCode, TOOL_RESPONSE};
use tower_agent_core::{
    context::RunContext,
    message::{ToolCall, ToolOutput},
    tool::{Checked, ObservableInput, ToolRequest, ToolRouter},
};

struct Fixture {
    dir: tempfile::TempDir,
    router: ToolRouter,
    ctx: RunContext,
}

impl Fixture {
    fn new(stage: impl FnOnce(&Path) -> ClaudeCode) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let router = stage(&root).tools();
        let ctx = RunContext::builder().cwd(&root).build();
        Fixture { dir, router, ctx }
    }

    fn local() -> Self {
        Self::new(|root| ClaudeCode::local(root))
    }

    fn root(&self) -> std::path::PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn path(&self, rel: &str) -> String {
        self.root().join(rel).to_string_lossy().into_owned()
    }

    fn file(&self, rel: &str, content: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    /// The tool's check of `input`, through the router's checks as a layer runs it.
    async fn check(&self, tool: &str, input: Value) -> Result<ToolRequest, ToolOutput> {
        let call = ToolCall::new("c1", tool, input);
        let req = ToolRequest::new(call, self.ctx.clone());
        self.router.checks().check(req).resolve().await
    }

    async fn call(&mut self, tool: &str, input: Value) -> ToolOutput {
        let call = ToolCall::new("c1", tool, input);
        let req = ToolRequest::new(call, self.ctx.clone());
        self.router.ready().await.unwrap().call(req).await.unwrap()
    }
}

/// The key command hooks read (`command::TOOL_RESPONSE`, not named here: `builtins` does not
/// import `command`, which builds on it).
#[test]
fn the_response_key_is_the_command_hooks() {
    assert_eq!(TOOL_RESPONSE, "tool_response");
}

fn response(out: &ToolOutput) -> &Value {
    &out.metadata[TOOL_RESPONSE]
}

#[tokio::test]
async fn the_tools_have_claude_codes_names_and_schemas() {
    let f = Fixture::local();
    let names: Vec<String> = f.router.specs().iter().map(|s| s.name.clone()).collect();
    for name in ["Bash", "Read", "Write", "Edit", "Glob", "Grep"] {
        assert!(names.contains(&name.to_owned()), "{name} in {names:?}");
    }
    let spec = |name: &str| {
        f.router
            .specs()
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .parameters
            .clone()
    };
    assert_eq!(spec("Bash")["required"], json!(["command"]));
    assert_eq!(
        spec("Edit")["required"],
        json!(["file_path", "old_string", "new_string"])
    );
    assert!(spec("Grep")["properties"]["-i"].is_object());
    let without = ClaudeCode::local(f.dir.path()).without_bash().tools();
    assert!(!without.contains("Bash"));
}

#[tokio::test]
async fn bash_answers_as_claude_code() {
    let mut f = Fixture::local();
    let out = f
        .call(
            "Bash",
            json!({"command": "echo hello; echo warn >&2", "description": "Hi"}),
        )
        .await;
    assert!(!out.is_error);
    assert_eq!(out.content, "hello\nwarn");
    assert_eq!(
        *response(&out),
        json!({"stdout": "hello\nwarn", "stderr": "", "interrupted": false, "isImage": false,
            "noOutputExpected": false})
    );
    let out = f.call("Bash", json!({"command": "touch a"})).await;
    assert_eq!(out.content, "(Bash completed with no output)");
    assert_eq!(response(&out)["noOutputExpected"], true);
    let out = f
        .call("Bash", json!({"command": "echo out; echo err >&2; exit 3"}))
        .await;
    assert!(out.is_error);
    assert_eq!(out.content, "Exit code 3\nout\nerr");
    let out = f
        .call("Bash", json!({"command": "printf '\\n\\n  x  \\n\\n'"}))
        .await;
    assert_eq!(out.content, "  x");
}

#[tokio::test]
async fn a_cd_moves_the_session() {
    let mut f = Fixture::local();
    let root = f.root();
    let out = f
        .call("Bash", json!({"command": "mkdir -p sub && cd sub"}))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(f.ctx.cwd(), root.join("sub"));
    let out = f.call("Bash", json!({"command": "pwd"})).await;
    assert_eq!(out.content, root.join("sub").to_string_lossy());
    // Relative paths of the other tools follow.
    f.file("sub/x.txt", "in sub\n");
    let out = f.call("Read", json!({"file_path": "x.txt"})).await;
    assert_eq!(out.content, "1\tin sub\n2\t");
    // A command that fails keeps the directory it ended in; one that exits early, the old.
    f.call("Bash", json!({"command": "cd .. && false"})).await;
    assert_eq!(f.ctx.cwd(), root);
    f.call("Bash", json!({"command": "cd sub; exit 0"})).await;
    assert_eq!(f.ctx.cwd(), root);
}

#[tokio::test]
async fn bash_times_out_and_caps_its_output() {
    let mut f = Fixture::new(|root| ClaudeCode::local(root).max_output(100));
    let out = f
        .call("Bash", json!({"command": "sleep 5", "timeout": 200}))
        .await;
    assert!(out.is_error);
    assert_eq!(out.content, "Command timed out after 200 ms");
    let out = f.call("Bash", json!({"command": "seq 1 10000"})).await;
    assert!(out.content.len() < 200, "{}", out.content);
    assert!(out.content.contains("truncated"));
    let out = f
        .call("Bash", json!({"command": "true", "timeout": 0}))
        .await;
    assert!(out.is_error);
}

#[tokio::test]
async fn read_counts_lines_as_claude_code() {
    let mut f = Fixture::local();
    f.file("notes.txt", "alpha\nbeta\ngamma\ndelta\n");
    f.file("empty.txt", "");
    let path = f.path("notes.txt");
    let out = f.call("Read", json!({"file_path": path})).await;
    assert_eq!(out.content, "1\talpha\n2\tbeta\n3\tgamma\n4\tdelta\n5\t");
    assert_eq!(
        *response(&out),
        json!({"type": "text", "file": {"filePath": path, "content": "alpha\nbeta\ngamma\ndelta\n",
            "numLines": 5, "startLine": 1, "totalLines": 5}})
    );
    let out = f
        .call("Read", json!({"file_path": path, "offset": 2, "limit": 2}))
        .await;
    assert_eq!(out.content, "2\tbeta\n3\tgamma");
    assert_eq!(response(&out)["file"]["content"], "beta\ngamma");
    let out = f
        .call("Read", json!({"file_path": path, "offset": 9}))
        .await;
    assert!(
        out.content
            .contains("shorter than the provided offset (9). The file has 5 lines")
    );
    let out = f.call("Read", json!({"file_path": "empty.txt"})).await;
    assert!(
        out.content
            .contains("the file exists but the contents are empty")
    );
    assert_eq!(response(&out)["file"]["numLines"], 1);
    let out = f.call("Read", json!({"file_path": "missing.txt"})).await;
    assert!(out.is_error);
    let cwd = f.root();
    assert_eq!(
        out.content,
        format!(
            "File does not exist. Note: your current working directory is {}.",
            cwd.display()
        )
    );
    let out = f.call("Read", json!({"file_path": "/etc/hostname"})).await;
    assert!(
        out.is_error && out.content.contains("escapes the root"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn read_cuts_long_lines_and_large_reads() {
    let mut f = Fixture::new(|root| ClaudeCode::local(root).read_limit(3));
    let long = "x".repeat(2_500);
    f.file("big.txt", &format!("{long}\n2\n3\n4\n5\n"));
    let out = f
        .call("Read", json!({"file_path": "big.txt", "limit": 100}))
        .await;
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].ends_with("… (500 more characters on this line)"));
    assert_eq!(response(&out)["file"]["totalLines"], 6);
}

#[tokio::test]
async fn write_creates_and_updates_with_a_patch() {
    let mut f = Fixture::local();
    let path = f.path("new/created.txt");
    let out = f
        .call("Write", json!({"file_path": path, "content": "hello\n"}))
        .await;
    assert_eq!(
        out.content,
        format!(
            "File created successfully at: {path} (file state is current in your context — \
             no need to Read it back)"
        )
    );
    assert_eq!(response(&out)["type"], "create");
    assert_eq!(response(&out)["originalFile"], Value::Null);
    let out = f
        .call("Write", json!({"file_path": path, "content": "bye\n"}))
        .await;
    assert!(
        out.content
            .starts_with(&format!("The file {path} has been updated successfully."))
    );
    assert_eq!(response(&out)["type"], "update");
    assert_eq!(response(&out)["originalFile"], "hello\n");
    assert_eq!(
        response(&out)["structuredPatch"],
        json!([{"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1,
            "lines": ["-hello", "+bye"]}])
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "bye\n");
    let written = crate::filesystem::files_written(&f.ctx);
    assert_eq!(written["new/created.txt"].as_ref(), "bye\n");
}

#[tokio::test]
async fn edit_replaces_once_or_all_and_refuses_as_claude_code() {
    let mut f = Fixture::local();
    f.file("code.txt", "one two\nthree two\nthree\n");
    let path = f.path("code.txt");
    let edit =
        |old: &str, new: &str| json!({"file_path": path, "old_string": old, "new_string": new});
    // Not read first: said so.
    let out = f.call("Edit", edit("one", "ONE")).await;
    assert_eq!(
        out.content,
        format!("The file {path} has been updated successfully.")
    );
    assert_eq!(response(&out)["contentNotInModelContext"], true);
    f.call("Read", json!({"file_path": path})).await;
    let mut all = edit("two", "2");
    all["replace_all"] = json!(true);
    let out = f.call("Edit", all).await;
    assert!(
        out.content
            .contains("All occurrences were successfully replaced. (file state")
    );
    assert!(response(&out).get("contentNotInModelContext").is_none());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "ONE 2\nthree 2\nthree\n"
    );
    let out = f.call("Edit", edit("three", "3")).await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("<tool_use_error>Found 2 matches of the string to replace")
    );
    let out = f.call("Edit", edit("absent", "x")).await;
    assert_eq!(
        out.content,
        "<tool_use_error>String to replace not found in file.\nString: absent</tool_use_error>"
    );
    let out = f.call("Edit", edit("ONE", "ONE")).await;
    assert!(out.content.contains("No changes to make"));
    // An empty old_string creates a file, not over an existing one.
    let new = f.path("fresh.txt");
    let out = f
        .call(
            "Edit",
            json!({"file_path": new, "old_string": "", "new_string": "hi\n"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "hi\n");
    let out = f
        .call(
            "Edit",
            json!({"file_path": new, "old_string": "", "new_string": "x"}),
        )
        .await;
    assert!(
        out.content
            .contains("Cannot create new file - file already exists.")
    );
    let out = f
        .call(
            "Edit",
            json!({"file_path": f.path("nope.txt"), "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(out.content.contains("File does not exist."));
}

fn touch(path: &Path, secs: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000 + secs))
        .unwrap();
}

#[tokio::test]
async fn glob_lists_files_oldest_first() {
    let mut f = Fixture::new(|root| ClaudeCode::local(root).glob_limit(2));
    for (name, secs) in [
        ("src/b.rs", 1),
        ("README.md", 2),
        ("src/sub/c.rs", 3),
        ("src/a.rs", 4),
    ] {
        f.file(name, "x\n");
        touch(&f.root().join(name), secs);
    }
    let out = f
        .call("Glob", json!({"pattern": "*.rs", "path": f.path("src")}))
        .await;
    assert_eq!(
        out.content,
        "src/b.rs\nsrc/sub/c.rs\n(Results are truncated. Consider using a more specific path or pattern.)"
    );
    let r = response(&out);
    assert_eq!(
        (
            r["numFiles"].clone(),
            r["totalMatches"].clone(),
            r["truncated"].clone()
        ),
        (json!(2), json!(3), json!(true))
    );
    assert!(r["durationMs"].is_u64());
    let out = f.call("Glob", json!({"pattern": "*.zzz"})).await;
    assert_eq!(out.content, "No files found");
}

#[tokio::test]
async fn grep_in_its_three_modes() {
    let mut f = Fixture::local();
    f.file("README.md", "Hello readme\nhello again\n");
    f.file("src/a.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    f.file("src/b.rs", "// HELLO world\nfn helper() {}\n");
    touch(&f.root().join("src/b.rs"), 1);
    touch(&f.root().join("README.md"), 2);
    touch(&f.root().join("src/a.rs"), 3);
    let out = f
        .call("Grep", json!({"pattern": "hello", "-i": true}))
        .await;
    assert_eq!(out.content, "Found 3 files\nsrc/a.rs\nREADME.md\nsrc/b.rs");
    let out = f
        .call(
            "Grep",
            json!({"pattern": "hello", "output_mode": "content"}),
        )
        .await;
    assert_eq!(
        out.content,
        "README.md:2:hello again\nsrc/a.rs:2:    println!(\"hello\");"
    );
    assert_eq!(response(&out)["numLines"], 2);
    let out = f
        .call(
            "Grep",
            json!({"pattern": "fn", "output_mode": "count", "glob": "*.rs"}),
        )
        .await;
    assert_eq!(
        out.content,
        "src/a.rs:1\nsrc/b.rs:1\n\nFound 2 total occurrences across 2 files."
    );
    let out = f
        .call(
            "Grep",
            json!({"pattern": "l", "output_mode": "content", "head_limit": 1,
            "offset": 1, "-n": false, "path": "src"}),
        )
        .await;
    assert_eq!(
        out.content,
        "src/b.rs:// HELLO world\n\n[Showing results with pagination = limit: 1, offset: 1]"
    );
    let out = f.call("Grep", json!({"pattern": "zzz"})).await;
    assert_eq!(out.content, "No files found");
    let out = f
        .call("Grep", json!({"pattern": "(", "output_mode": "content"}))
        .await;
    assert!(out.is_error);
}

/// What a model sends cannot make a tool grow without bound or panic.
#[tokio::test]
async fn inputs_stay_bounded() {
    let mut f = Fixture::new(|root| ClaudeCode::local(root).max_edit_bytes(1_000));
    f.file("a.txt", &"a".repeat(500));
    let input = json!({"file_path": "a.txt", "old_string": "a", "new_string": "bbbb",
        "replace_all": true});
    let out = f.call("Edit", input).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("would have 2000 bytes"),
        "{}",
        out.content
    );
    let out = f
        .call("Read", json!({"file_path": "a.txt", "offset": usize::MAX}))
        .await;
    assert!(!out.is_error, "{}", out.content);
    let input = json!({"pattern": "a", "output_mode": "content", "head_limit": usize::MAX,
        "offset": usize::MAX});
    let out = f.call("Grep", input).await;
    assert!(!out.is_error);
    let out = f.call("Bash", json!({"command": "echo a\u{0}b"})).await;
    assert!(out.is_error);
}

/// Claude Code's checks before the hooks: Edit's refusals (no hook sees those calls) and the
/// input hooks see.
#[tokio::test]
async fn edit_is_checked_before_the_call_as_claude_code_checks_it() {
    let f = Fixture::local();
    f.file("code.txt", "one two\nthree two\nthree\n");
    let refused = |r: Result<ToolRequest, ToolOutput>| {
        let out = r.expect_err("refused");
        assert!(out.is_error && out.call_id == "c1", "{out:?}");
        out.content
    };
    let edit = |old: &str, new: &str| json!({"file_path": "code.txt", "old_string": old, "new_string": new});
    assert_eq!(
        refused(f.check("Edit", edit("absent", "x")).await),
        "<tool_use_error>String to replace not found in file.\nString: absent</tool_use_error>"
    );
    assert!(
        refused(f.check("Edit", edit("three", "3")).await).starts_with(
            "<tool_use_error>Found 2 matches of the string to replace, but replace_all is false."
        )
    );
    assert_eq!(
        refused(f.check("Edit", edit("one", "one")).await),
        "<tool_use_error>No changes to make: old_string and new_string are exactly the same.</tool_use_error>"
    );
    let missing = json!({"file_path": "gone.txt", "old_string": "a", "new_string": "b"});
    assert_eq!(
        refused(f.check("Edit", missing).await),
        format!(
            "<tool_use_error>File does not exist. Note: your current working directory is {}.</tool_use_error>",
            f.root().display()
        )
    );
    // Accepted: `replace_all` filled in for the tool and the hooks; the hooks see the path
    // made absolute, the tool gets it as given. Nothing was written.
    let req = f.check("Edit", edit("one", "ONE")).await.unwrap();
    assert_eq!(req.call.arguments["replace_all"], false);
    assert_eq!(req.call.arguments["file_path"], "code.txt");
    let seen = req.extensions.get::<ObservableInput>().unwrap();
    assert_eq!(seen.0["file_path"], f.path("code.txt"));
    assert_eq!(seen.0["replace_all"], false);
    assert!(req.extensions.get::<Checked>().is_some());
    let mut all = edit("three", "3");
    all["replace_all"] = json!(true);
    assert!(f.check("Edit", all).await.is_ok());
    assert_eq!(
        std::fs::read_to_string(f.path("code.txt")).unwrap(),
        "one two\nthree two\nthree\n"
    );
}

#[tokio::test]
async fn read_and_write_show_hooks_an_absolute_path() {
    let f = Fixture::local();
    f.file("notes.txt", "a\n");
    for tool in ["Read", "Write"] {
        let input = json!({"file_path": "sub/../notes.txt", "content": "b\n"});
        let req = f.check(tool, input.clone()).await.unwrap();
        assert_eq!(
            req.call.arguments, input,
            "{tool}: the tool gets the model's input"
        );
        let seen = &req.extensions.get::<ObservableInput>().unwrap().0;
        assert_eq!(seen["file_path"], f.path("notes.txt"), "{tool}");
        // An absolute path is shown as it is.
        let input = json!({"file_path": f.path("notes.txt"), "content": "b\n"});
        let req = f.check(tool, input).await.unwrap();
        assert!(req.extensions.get::<ObservableInput>().is_none(), "{tool}");
    }
    // Nothing to check in the other tools.
    let req = f.check("Glob", json!({"pattern": "*"})).await.unwrap();
    assert!(req.extensions.get::<ObservableInput>().is_none());
}

/// Called without a layer that checks first, the tool checks its input itself.
#[tokio::test]
async fn an_unchecked_call_is_checked_by_the_tool() {
    let mut f = Fixture::local();
    f.file("code.txt", "x\n");
    let out = f
        .call(
            "Edit",
            json!({"file_path": "code.txt", "old_string": "y", "new_string": "z"}),
        )
        .await;
    assert!(out.is_error && out.call_id == "c1");
    assert!(
        out.content.contains("String to replace not found"),
        "{}",
        out.content
    );
}
