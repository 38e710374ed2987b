//! One handler run: spawn, feed stdin, read stdout and stderr, time out, kill the process
//! group; and what its answer means ([`Verdict`]).

use std::{
    io,
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::config::{Exec, Handler, HookEvent};
use crate::{context::RunContext, layers::hooks::PermissionRequest, process::ProcessTree};

/// Where a handler runs, and the project it is told of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dirs<'a> {
    /// The working directory of a process handler (the `cwd` of its input).
    pub(crate) cwd: &'a Path,
    /// The project directory: `CLAUDE_PROJECT_DIR` / `TOWER_AGENT_PROJECT_DIR`, also
    /// substituted in exec form; the root of an `agent` handler's file tools.
    pub(crate) project: &'a Path,
}

impl<'a> Dirs<'a> {
    /// Running in the project directory itself (a persistent process, a describe step).
    pub(crate) fn project(project: &'a Path) -> Self {
        Dirs {
            cwd: project,
            project,
        }
    }
}

/// Runs `handler` once for `event` with `input` (its JSON text), within its timeout: the
/// handler's `timeout`, else the default of its type (`prompt` 30 s, `agent` 60 s) or of the
/// event (600 s; 30 s for UserPromptSubmit).
pub(crate) async fn call(
    event: HookEvent,
    handler: &Handler,
    dirs: Dirs<'_>,
    input: &str,
    report: Report<'_>,
    env: &[(String, String)],
) -> Result<Reply, Failure> {
    let timeout = handler.timeout.unwrap_or_else(|| match &handler.exec {
        Exec::Model(hook) => super::prompt::default_timeout(hook.kind),
        _ => event.default_timeout(),
    });
    match (&handler.exec, &handler.persistent) {
        (_, Some(process)) => process.call(input, timeout, report).await,
        #[cfg(feature = "http-hooks")]
        (Exec::Http(hook), None) => {
            let var = |name: &str| variable(name, dirs.project, env);
            super::http::post(hook, input, timeout, var).await
        }
        #[cfg(feature = "mcp")]
        (Exec::Mcp(hook), None) => match tokio::time::timeout(timeout, hook.call(input)).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Cancelled(timeout)),
        },
        #[cfg(feature = "wasm")]
        (Exec::Wasm(hook), None) => super::wasm::call(hook, input, timeout).await,
        (Exec::Model(hook), None) => {
            let verdict = hook.evaluate(event, input, dirs.project, report.ctx());
            match tokio::time::timeout(timeout, verdict).await {
                Ok(result) => result,
                Err(_) => Err(Failure::Cancelled(timeout)),
            }
        }
        (exec, None) => run(exec, dirs, input.as_bytes(), timeout, env).await,
    }
}

/// The value of the variable `name` as a process handler would see it: its environment
/// (`env`: the session's, then the handler's own; the last definition wins, and it is set
/// after the project-dir variables, as in [`run`]), else the project-dir variables, else this
/// process's environment.
#[cfg(feature = "http-hooks")]
fn variable(name: &str, project: &Path, env: &[(String, String)]) -> Option<String> {
    if let Some((_, value)) = env.iter().rev().find(|(k, _)| k == name) {
        return Some(value.clone());
    }
    if matches!(name, "CLAUDE_PROJECT_DIR" | "TOWER_AGENT_PROJECT_DIR") {
        return Some(project.to_string_lossy().into_owned());
    }
    std::env::var(name).ok()
}

/// The most bytes kept of a hook's stdout or stderr (the rest is read and dropped).
const MAX_CAPTURE: usize = 1 << 20;
/// How long a hook's stdout and stderr are still read once it has exited and what it left
/// running was killed: its answer is what it wrote by then.
pub(crate) const EXIT_GRACE: Duration = Duration::from_millis(100);
/// The longest string taken from a hook's answer (as in the protocol).
pub(crate) const MAX_CHARS: usize = 10_000;

/// What a handler answered.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The exit code (`None`: killed by a signal).
    pub(crate) code: Option<i32>,
    pub(crate) stdout: Stdout,
    pub(crate) stderr: String,
}

/// A handler's stdout: text from a process, or JSON from a persistent process.
#[derive(Debug)]
pub(crate) enum Stdout {
    Text(String),
    Json(Value),
}

/// Why a handler gave no answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// It ran past its timeout and was killed.
    Timeout(Duration),
    /// An `http`, `mcp_tool`, `prompt` or `agent` handler ran past its timeout and was
    /// cancelled.
    Cancelled(Duration),
    /// Its executable does not exist (or cannot be executed).
    Missing(String),
    /// It could not be started or talked to.
    Io(String),
    /// A persistent process exited (after its one restart) or answered garbage.
    Persistent(String),
    /// A WebAssembly hook trapped, reached a limit or answered garbage.
    #[cfg(feature = "wasm")]
    Guest(String),
}

impl Failure {
    pub(crate) fn describe(&self) -> String {
        match self {
            Failure::Timeout(t) => format!(
                "timed out after {}; its process group was killed",
                humantime(*t)
            ),
            Failure::Cancelled(t) => format!("timed out after {}; cancelled", humantime(*t)),
            Failure::Missing(why) => format!("cannot be run: {why}"),
            Failure::Io(why) | Failure::Persistent(why) => why.clone(),
            #[cfg(feature = "wasm")]
            Failure::Guest(why) => why.clone(),
        }
    }
}

/// `2s`, `1.5s`, `300ms`.
fn humantime(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// `${CLAUDE_PROJECT_DIR}` and `${TOWER_AGENT_PROJECT_DIR}` replaced (exec form only: the
/// shell expands them itself in shell form).
fn substitute(s: &str, dir: &str) -> String {
    if !s.contains("${") {
        return s.to_owned();
    }
    s.replace("${CLAUDE_PROJECT_DIR}", dir)
        .replace("${TOWER_AGENT_PROJECT_DIR}", dir)
}

/// The command of a handler, in `dirs.cwd`, with the project-dir variables naming
/// `dirs.project` (also substituted in exec form) and `TOWER_AGENT_HOOK_ACTION=action`; an
/// error for a handler that is no process (`http`, `prompt`, `agent`).
pub(crate) fn command(
    exec: &Exec,
    dirs: Dirs<'_>,
    action: &str,
) -> io::Result<std::process::Command> {
    let dir_text = dirs.project.to_string_lossy();
    let mut cmd = match exec {
        Exec::Shell { shell, command } => {
            let mut cmd = std::process::Command::new(shell);
            cmd.arg("-c").arg(command);
            cmd
        }
        Exec::Argv { program, args } => {
            let mut cmd = std::process::Command::new(substitute(program, &dir_text));
            cmd.args(args.iter().map(|a| substitute(a, &dir_text)));
            cmd
        }
        #[cfg(feature = "http-hooks")]
        Exec::Http(_) => return Err(io::Error::other("an `http` handler is no process")),
        Exec::Model(_) => return Err(io::Error::other("a `prompt` handler is no process")),
        #[cfg(feature = "mcp")]
        Exec::Mcp(_) => return Err(io::Error::other("an `mcp_tool` handler is no process")),
        #[cfg(feature = "wasm")]
        Exec::Wasm(_) => return Err(io::Error::other("a `wasm` handler is no process")),
    };
    cmd.current_dir(dirs.cwd)
        .env("CLAUDE_PROJECT_DIR", dirs.project)
        .env("TOWER_AGENT_PROJECT_DIR", dirs.project)
        .env("TOWER_AGENT_HOOK_ACTION", action);
    Ok(cmd)
}

fn spawn_error(exec: &Exec, e: &io::Error) -> Failure {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => {
            Failure::Missing(format!("cannot start `{}`: {e}", exec.label()))
        }
        _ => Failure::Io(format!("cannot start `{}`: {e}", exec.label())),
    }
}

/// Runs a handler once: `input` on stdin, killed (with everything it started, see
/// [`crate::process`]) after `timeout` or when the returned future is dropped. When the handler
/// exits, whatever it left running is killed and its stdout and stderr are read for at most
/// [`EXIT_GRACE`] more: its answer is what it wrote before it exited, even if a process it
/// started (`setsid`) still held its stdout open.
pub(crate) async fn run(
    exec: &Exec,
    dirs: Dirs<'_>,
    input: &[u8],
    timeout: Duration,
    env: &[(String, String)],
) -> Result<Reply, Failure> {
    let mut std_cmd = command(exec, dirs, "run").map_err(|e| spawn_error(exec, &e))?;
    // The session's environment (`CLAUDE_ENV_FILE` exports, `CLAUDE_ENV_FILE` itself).
    std_cmd.envs(env.iter().map(|(k, v)| (k, v)));
    // Kills the tree when this future is dropped, however it ends.
    let mut tree = ProcessTree::prepare(&mut std_cmd);
    let mut cmd = tokio::process::Command::from(std_cmd);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| spawn_error(exec, &e))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    {
        let mut pipes: Vec<&dyn crate::process::Pipe> = Vec::new();
        if let Some(p) = &stdin {
            pipes.push(p);
        }
        if let Some(p) = &stdout {
            pipes.push(p);
        }
        if let Some(p) = &stderr {
            pipes.push(p);
        }
        tree.started(child.id(), &pipes);
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());

    let work = async {
        let write = async {
            if let Some(mut stdin) = stdin {
                // A hook that does not read its input closes the pipe: fine.
                let _ = stdin.write_all(input).await;
            }
        };
        let reads = async {
            tokio::join!(
                write,
                read_capped(stdout, &mut out),
                read_capped(stderr, &mut err)
            );
        };
        let mut reads = std::pin::pin!(reads);
        let mut read_all = false;
        let status = loop {
            tokio::select! {
                () = &mut reads, if !read_all => read_all = true,
                status = child.wait() => break status,
            }
        };
        // Whatever the hook left running would keep the pipes open.
        tree.kill();
        if !read_all {
            let _ = tokio::time::timeout(EXIT_GRACE, reads).await;
        }
        status
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(status) => {
            let status =
                status.map_err(|e| Failure::Io(format!("cannot wait for the hook: {e}")))?;
            Ok(Reply {
                code: status.code(),
                stdout: Stdout::Text(String::from_utf8_lossy(&out).into_owned()),
                stderr: String::from_utf8_lossy(&err).into_owned(),
            })
        }
        Err(_) => {
            tree.kill();
            // Kills the leader (again) and reaps it.
            let _ = child.kill().await;
            Err(Failure::Timeout(timeout))
        }
    }
}

/// Reads a pipe to its end into `kept`, keeping at most [`MAX_CAPTURE`] bytes.
async fn read_capped<R: AsyncRead + Unpin>(pipe: Option<R>, kept: &mut Vec<u8>) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_CAPTURE.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// The output of a synchronous run (describe).
pub(crate) struct SyncOutput {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `exec` with no input and waits (blocking) at most `timeout`, then at most
/// [`EXIT_GRACE`] for its output once it has exited (and what it left running was killed).
pub(crate) fn run_sync(
    exec: &Exec,
    dirs: Dirs<'_>,
    action: &str,
    timeout: Duration,
) -> Result<SyncOutput, String> {
    use std::{
        io::Read,
        sync::{Arc, Mutex},
    };
    let mut cmd =
        command(exec, dirs, action).map_err(|e| format!("cannot run `{}`: {e}", exec.label()))?;
    let mut tree = ProcessTree::prepare(&mut cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `{}`: {e}", exec.label()))?;
    {
        let mut pipes: Vec<&dyn crate::process::Pipe> = Vec::new();
        if let Some(p) = &child.stdout {
            pipes.push(p);
        }
        if let Some(p) = &child.stderr {
            pipes.push(p);
        }
        tree.started(Some(child.id()), &pipes);
    }
    // A reader keeps what it read in a shared buffer, so that it can be given up on.
    type Kept = Arc<Mutex<Vec<u8>>>;
    let reader = |pipe: Option<Box<dyn Read + Send>>, done: std::sync::mpsc::Sender<()>| {
        let kept: Kept = Arc::default();
        let k = Arc::clone(&kept);
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut buf = [0u8; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut buf) {
                    let mut kept = k.lock().unwrap_or_else(|p| p.into_inner());
                    let room = MAX_CAPTURE.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
            let _ = done.send(());
        });
        kept
    };
    let (done, finished) = std::sync::mpsc::channel();
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        done.clone(),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        done,
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(None) => {
                tree.kill();
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "did not answer within {}; killed",
                    humantime(timeout)
                ));
            }
            Err(e) => return Err(format!("cannot wait for `{}`: {e}", exec.label())),
        }
    };
    tree.kill();
    // Both readers end at the end of their pipe; give up on them after the grace.
    let grace = Instant::now() + EXIT_GRACE;
    for _ in 0..2 {
        let left = grace.saturating_duration_since(Instant::now());
        if finished.recv_timeout(left).is_err() {
            break;
        }
    }
    let text = |kept: &Kept| {
        String::from_utf8_lossy(&kept.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    };
    Ok(SyncOutput {
        code: status.code(),
        stdout: text(&out),
        stderr: text(&err),
    })
}

// ===== what an answer means =====

/// A `permissionDecision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Permission {
    Allow,
    Ask,
    Defer,
    Deny,
}

/// What one handler's answer means, whatever the event; the event decides what it uses.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// `continue: false`: the stop reason.
    pub(crate) stop: Option<String>,
    /// Exit 2 or `decision: "block"`: the reason.
    pub(crate) block: Option<String>,
    /// A fail-closed handler that failed (timeout, crash, garbage, missing executable): why.
    pub(crate) failed: Option<String>,
    /// `permissionDecision` (or the legacy `decision: "approve"`) and its reason.
    pub(crate) permission: Option<(Permission, String)>,
    pub(crate) updated_input: Option<Value>,
    pub(crate) updated_output: Option<Value>,
    pub(crate) llm_request: Option<Value>,
    pub(crate) llm_response: Option<Value>,
    /// MessageDisplay's `displayContent`.
    pub(crate) display: Option<String>,
    /// `additionalContext`, and plain stdout where it counts as context.
    pub(crate) contexts: Vec<String>,
    /// PermissionRequest: the `decision` object.
    pub(crate) request: Option<PermissionRequest>,
    /// PermissionDenied: `retry: true`.
    pub(crate) retry: bool,
    /// `systemMessage` (already reported; an async hook's is also delivered to the model).
    pub(crate) system_message: Option<String>,
    /// Elicitation / ElicitationResult: `hookSpecificOutput.action` and its `content`.
    pub(crate) elicitation: Option<(Elicit, Option<Value>)>,
    /// CwdChanged / FileChanged: `hookSpecificOutput.watchPaths`.
    pub(crate) watch_paths: Option<Vec<std::path::PathBuf>>,
}

/// The `action` of an Elicitation / ElicitationResult hook's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Elicit {
    Accept,
    Decline,
    Cancel,
}

/// Where a handler's problems are reported: the run (`ctx.warn`, which also logs), or only
/// the log (observe-only events, whose warnings would fire Notification hooks again).
#[derive(Clone, Copy)]
pub(crate) enum Report<'a> {
    Run(&'a RunContext),
    Log,
}

impl<'a> Report<'a> {
    /// The run, if reports go to one.
    pub(crate) fn ctx(self) -> Option<&'a RunContext> {
        match self {
            Report::Run(ctx) => Some(ctx),
            Report::Log => None,
        }
    }

    pub(crate) fn warn(self, message: String) {
        match self {
            Report::Run(ctx) => ctx.warn(message),
            Report::Log => tracing::warn!("{message}"),
        }
    }
}

/// Cuts `s` to [`MAX_CHARS`] characters, saying how many were cut.
pub(crate) fn cap(mut s: String) -> String {
    if s.len() <= MAX_CHARS {
        return s;
    }
    let Some((end, _)) = s.char_indices().nth(MAX_CHARS) else {
        return s;
    };
    let cut = s[end..].chars().count();
    s.truncate(end);
    s.push_str(&format!("\n... (truncated {cut} characters)"));
    s
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.trim().is_empty() => Some(cap(s.clone())),
        _ => None,
    }
}

/// What exit code 2 does for `event` (the reference's "Exit code 2 behavior per event").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit2 {
    /// Blocks (the event decides what a block means; the post-tool events show the reason to
    /// the model, SessionStart to the user).
    Blocks,
    /// Exit code and stderr are ignored (PermissionRequest: only the `decision` object counts;
    /// PermissionDenied, Notification: the thing already happened).
    Ignored,
}

fn exit_2(event: HookEvent) -> Exit2 {
    match event {
        HookEvent::PermissionRequest | HookEvent::PermissionDenied | HookEvent::Notification => {
            Exit2::Ignored
        }
        _ => Exit2::Blocks,
    }
}

/// What `result` of `handler` means for `event`.
///
/// As in the reference ("Exit code output"): stdout is read as JSON on **every** exit code.
/// - exit 0: the JSON (or plain stdout, context for UserPromptSubmit / SessionStart);
/// - exit 2: a block that no JSON overrides (not even `permissionDecision: "allow"`); its
///   reason is the JSON's blocking decision's (`decision: "block"` + `reason`, or
///   `permissionDecision: "deny"` + `permissionDecisionReason`) when it makes one, else
///   stderr. Events where exit 2 is ignored ([`Exit2::Ignored`]) only read the JSON;
/// - any other exit with a JSON object on stdout: the JSON alone decides, not an error;
///   without one: a non-blocking error (`failed with non-blocking status code N: <first line
///   of stderr>`), unless the handler is fail-closed.
pub(crate) fn interpret(
    event: HookEvent,
    handler: &Handler,
    result: Result<Reply, Failure>,
    report: Report<'_>,
) -> Verdict {
    let name = &handler.label;
    let mut verdict = Verdict::default();
    let fail = |verdict: &mut Verdict, why: String| {
        if handler.fail_closed {
            verdict.failed = Some(format!("hook `{name}` {why} (the hook is fail-closed)"));
        }
    };
    let reply = match result {
        Ok(reply) => reply,
        Err(failure @ (Failure::Timeout(_) | Failure::Cancelled(_))) if event.timeout_blocks() => {
            let why = failure.describe();
            report.warn(format!("{event} hook `{name}` {why}"));
            verdict.failed = Some(format!("hook `{name}` {why} (a {event} timeout blocks)"));
            return verdict;
        }
        Err(failure) => {
            let why = failure.describe();
            if let Failure::Missing(_) = failure {
                tracing::error!(hook = %name, event = %event, defined = %handler.origin, "{event} hook `{name}` {why}");
            }
            report.warn(format!("{event} hook `{name}` {why}"));
            fail(&mut verdict, why);
            return verdict;
        }
    };
    let stderr = reply.stderr.trim();
    if !stderr.is_empty() && reply.code == Some(0) {
        tracing::debug!(hook = %name, event = %event, stderr = %stderr, "hook stderr");
    }
    // The JSON answer, if any: read on every exit code. Plain stdout is context only on
    // exit 0.
    let plain_ok = reply.code == Some(0);
    let json = match reply.stdout {
        Stdout::Json(Value::Object(map)) => Some(map),
        Stdout::Json(Value::Null) => None,
        Stdout::Json(Value::String(text)) => {
            plain(event, handler, text, plain_ok, &mut verdict, report)
        }
        Stdout::Json(other) => {
            report.warn(format!(
                "{event} hook `{name}` answered {other} instead of a JSON object; ignored"
            ));
            fail(&mut verdict, "answered garbage".into());
            None
        }
        Stdout::Text(text) => plain(event, handler, text, plain_ok, &mut verdict, report),
    };
    match reply.code {
        Some(0 | 2) => {}
        // Another exit with a JSON object: the JSON alone decides, and it is no error.
        _ if json.is_some() => {}
        Some(code @ (126 | 127)) if matches!(handler.exec, Exec::Shell { .. }) => {
            let first = stderr.lines().next().unwrap_or("");
            let why = format!("cannot be run (exit {code}): {first}");
            tracing::error!(hook = %name, event = %event, defined = %handler.origin, "{event} hook `{name}` {why}");
            report.warn(format!("{event} hook `{name}` {why}"));
            fail(&mut verdict, why);
            return verdict;
        }
        other => {
            let status = match other {
                Some(code) => format!("failed with non-blocking status code {code}"),
                None => "was killed by a signal".to_owned(),
            };
            let why = match stderr.lines().next() {
                Some(first) => format!("{status}: {first}"),
                None => status,
            };
            report.warn(format!("{event} hook `{name}` {why}"));
            fail(&mut verdict, why);
            return verdict;
        }
    }
    let mut denial = None;
    if let Some(json) = &json {
        denial = read_json(event, handler, json, &mut verdict, report);
    }
    if reply.code == Some(2) && exit_2(event) == Exit2::Blocks {
        // Exit 2 blocks; its reason is the JSON's blocking decision's, else stderr. Nothing
        // overrides it.
        let reason = verdict
            .block
            .take()
            .or(denial)
            .or_else(|| (!stderr.is_empty()).then(|| cap(stderr.to_owned())))
            .or_else(|| verdict.failed.take())
            .unwrap_or_else(|| format!("blocked by hook `{name}`"));
        verdict.block = Some(reason);
        if let Some((Permission::Allow | Permission::Ask | Permission::Defer, _)) =
            verdict.permission
        {
            verdict.permission = None;
        }
    }
    verdict
}

/// What an `async` / `asyncRewake` handler answered, once it is done: its decision is
/// ignored (the action it would have controlled is done); its `additionalContext` and
/// `systemMessage` reach the model as reminders of the run (`ctx`), and for `asyncRewake` an
/// exit 2 does too: its stderr, or its stdout if stderr is empty. Without a run (SessionEnd,
/// Notification) everything is only logged.
pub(crate) fn background_done(
    event: HookEvent,
    handler: &Handler,
    result: Result<Reply, Failure>,
    ctx: Option<&RunContext>,
) {
    let name = &handler.label;
    let wake = match &result {
        Ok(reply) if handler.rewake && reply.code == Some(2) => {
            let stderr = reply.stderr.trim();
            let said = if stderr.is_empty() {
                match &reply.stdout {
                    Stdout::Text(text) => text.trim().to_owned(),
                    Stdout::Json(value) => value.to_string(),
                }
            } else {
                stderr.to_owned()
            };
            Some(if said.is_empty() {
                format!("The background {event} hook `{name}` exited with status 2.")
            } else {
                cap(said)
            })
        }
        _ => None,
    };
    let verdict = interpret(event, handler, result, Report::Log);
    tracing::debug!(hook = %name, event = %event, ?verdict, "async hook done");
    let Some(ctx) = ctx else {
        return;
    };
    if let Some(text) = wake {
        ctx.remind(text);
    }
    for text in verdict.contexts.into_iter().chain(verdict.system_message) {
        ctx.remind(text);
    }
}

/// Plain stdout: JSON if it starts with `{`, else (`context`: on exit 0) context for
/// UserPromptSubmit and SessionStart (ignored elsewhere).
fn plain(
    event: HookEvent,
    handler: &Handler,
    text: String,
    context: bool,
    verdict: &mut Verdict,
    report: Report<'_>,
) -> Option<Map<String, Value>> {
    let name = &handler.label;
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return match serde_json::from_str::<Map<String, Value>>(trimmed) {
            Ok(map) => Some(map),
            Err(e) => {
                report.warn(format!(
                    "{event} hook `{name}` printed invalid JSON ({e}); its output is ignored"
                ));
                if handler.fail_closed {
                    verdict.failed = Some(format!(
                        "hook `{name}` printed invalid JSON (the hook is fail-closed)"
                    ));
                }
                None
            }
        };
    }
    if trimmed.is_empty() {
        return None;
    }
    if context && event.stdout_is_context() {
        verdict.contexts.push(cap(trimmed.to_owned()));
    } else {
        tracing::debug!(hook = %name, event = %event, stdout = %trimmed, "hook stdout ignored");
    }
    None
}

/// `string`, `array` …: what a JSON value is.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The JSON fields of an answer; the reason of a `permissionDecision: "deny"` that gave one
/// (the blocking reason of an exit 2).
fn read_json(
    event: HookEvent,
    handler: &Handler,
    json: &Map<String, Value>,
    verdict: &mut Verdict,
    report: Report<'_>,
) -> Option<String> {
    let name = &handler.label;
    read_common(event, name, json, verdict, report);
    let specific = specific_output(event, name, json, report)?;
    let mut denial = None;
    if matches!(event, HookEvent::PreToolUse | HookEvent::PreModelSwitch)
        && let Some((p, given)) = permission_decision(event, name, specific, report)
    {
        if p == Permission::Deny {
            denial.clone_from(&given);
        }
        let why = given.unwrap_or_else(|| format!("decided by hook `{name}`"));
        verdict.permission = Some((p, why));
        if p == Permission::Defer {
            // The reference: for "defer", the reason, updatedInput and
            // additionalContext are ignored.
            return None;
        }
    }
    if event == HookEvent::PermissionRequest {
        verdict.request = permission_request(event, name, specific.get("decision"), report);
    }
    if event == HookEvent::PermissionDenied {
        verdict.retry = specific.get("retry") == Some(&Value::Bool(true));
    }
    if matches!(event, HookEvent::Elicitation | HookEvent::ElicitationResult) {
        verdict.elicitation = elicitation(event, name, specific, report);
    }
    if matches!(event, HookEvent::CwdChanged | HookEvent::FileChanged) {
        verdict.watch_paths = watch_paths(event, name, specific.get("watchPaths"), report);
    }
    read_updates(event, name, specific, verdict, report);
    denial
}

/// The fields every event reads: `continue` / `stopReason`, `systemMessage`, and `decision`
/// / `reason` (`block`, or the legacy PreToolUse `approve`).
fn read_common(
    event: HookEvent,
    name: &str,
    json: &Map<String, Value>,
    verdict: &mut Verdict,
    report: Report<'_>,
) {
    if json.get("continue") == Some(&Value::Bool(false)) {
        verdict.stop = Some(
            text(json.get("stopReason"))
                .unwrap_or_else(|| format!("hook `{name}` stopped the run")),
        );
    }
    if let Some(message) = text(json.get("systemMessage")) {
        report.warn(format!("{event} hook `{name}`: {message}"));
        verdict.system_message = Some(message);
    }
    let reason = text(json.get("reason"));
    match json.get("decision").and_then(Value::as_str) {
        Some("block") => {
            verdict.block = Some(reason.unwrap_or_else(|| format!("blocked by hook `{name}`")));
        }
        // Legacy PreToolUse answer.
        Some("approve") if event == HookEvent::PreToolUse => {
            verdict.permission = Some((Permission::Allow, reason.unwrap_or_default()));
        }
        Some(other) => tracing::debug!(hook = %name, decision = other, "unknown decision ignored"),
        None => {}
    }
}

/// `hookSpecificOutput`, if the answer has one that is an object for this event (anything
/// else is reported and ignored).
fn specific_output<'j>(
    event: HookEvent,
    name: &str,
    json: &'j Map<String, Value>,
    report: Report<'_>,
) -> Option<&'j Map<String, Value>> {
    let Value::Object(specific) = json.get("hookSpecificOutput")? else {
        report.warn(format!(
            "{event} hook `{name}`: hookSpecificOutput is not an object; ignored"
        ));
        return None;
    };
    if let Some(said) = specific.get("hookEventName").and_then(Value::as_str)
        && HookEvent::parse(said) != Some(event)
    {
        report.warn(format!(
            "{event} hook `{name}` answered for event `{said}`; its hookSpecificOutput is ignored"
        ));
        return None;
    }
    Some(specific)
}

/// A PreToolUse `permissionDecision` and its `permissionDecisionReason`; an unknown decision
/// is reported and ignored.
fn permission_decision(
    event: HookEvent,
    name: &str,
    specific: &Map<String, Value>,
    report: Report<'_>,
) -> Option<(Permission, Option<String>)> {
    let permission = match specific.get("permissionDecision").and_then(Value::as_str)? {
        "allow" => Permission::Allow,
        "ask" => Permission::Ask,
        "deny" => Permission::Deny,
        "defer" => Permission::Defer,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: unknown permissionDecision `{other}`; ignored"
            ));
            return None;
        }
    };
    Some((permission, text(specific.get("permissionDecisionReason"))))
}

/// What `hookSpecificOutput` replaces or adds: `updatedInput` (an object; anything else
/// denies a PreToolUse call), `updatedToolOutput`, `additionalContext`, `displayContent`,
/// `llm_request` and `llm_response`.
fn read_updates(
    event: HookEvent,
    name: &str,
    specific: &Map<String, Value>,
    verdict: &mut Verdict,
    report: Report<'_>,
) {
    match specific.get("updatedInput") {
        None | Some(Value::Null) => {}
        Some(input @ Value::Object(_)) => verdict.updated_input = Some(input.clone()),
        // The hook's fault, not the model's: the call it meant to rewrite is denied.
        Some(other) if event == HookEvent::PreToolUse => {
            let why = format!(
                "answered an updatedInput that is not a JSON object (a {})",
                json_kind(other)
            );
            report.warn(format!("{event} hook `{name}` {why}; the call is denied"));
            verdict.failed = Some(format!("hook `{name}` {why}"));
        }
        Some(_) => {}
    }
    if let Some(output) = specific
        .get("updatedToolOutput")
        .or_else(|| specific.get("updatedMCPToolOutput"))
        .filter(|v| !v.is_null())
    {
        verdict.updated_output = Some(output.clone());
    }
    if let Some(context) = text(specific.get("additionalContext")) {
        verdict.contexts.push(context);
    }
    if let Some(Value::String(display)) = specific.get("displayContent") {
        verdict.display = Some(cap(display.clone()));
    }
    if let Some(request) = specific.get("llm_request").filter(|v| !v.is_null()) {
        verdict.llm_request = Some(request.clone());
    }
    if let Some(response) = specific.get("llm_response").filter(|v| !v.is_null()) {
        verdict.llm_response = Some(response.clone());
    }
}

/// `watchPaths`: an array of path strings (at most
/// [`MAX_WATCHED`](crate::layers::hooks::MAX_WATCHED) are kept); anything else is ignored,
/// with a warning.
fn watch_paths(
    event: HookEvent,
    name: &str,
    value: Option<&Value>,
    report: Report<'_>,
) -> Option<Vec<std::path::PathBuf>> {
    let items = match value? {
        Value::Null => return None,
        Value::Array(items) => items,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: watchPaths is not an array (a {}); ignored",
                json_kind(other)
            ));
            return None;
        }
    };
    let mut paths = Vec::new();
    for item in items.iter().take(crate::layers::hooks::MAX_WATCHED) {
        match item {
            Value::String(p) if !p.is_empty() => paths.push(p.into()),
            other => {
                report.warn(format!(
                    "{event} hook `{name}`: watchPaths holds a {}, not a path; ignored",
                    json_kind(other)
                ));
                return None;
            }
        }
    }
    Some(paths)
}

/// An Elicitation / ElicitationResult answer: `action` (`accept`, `decline`, `cancel`) and,
/// for `accept`, `content` (an object); anything else is no answer (reported).
fn elicitation(
    event: HookEvent,
    name: &str,
    specific: &Map<String, Value>,
    report: Report<'_>,
) -> Option<(Elicit, Option<Value>)> {
    let action = match specific.get("action")? {
        Value::Null => return None,
        Value::String(a) if a == "accept" => Elicit::Accept,
        Value::String(a) if a == "decline" => Elicit::Decline,
        Value::String(a) if a == "cancel" => Elicit::Cancel,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: action {other} is not \"accept\", \"decline\" or \"cancel\"; ignored"
            ));
            return None;
        }
    };
    let content = match specific.get("content") {
        None | Some(Value::Null) => None,
        Some(c @ Value::Object(_)) => Some(c.clone()),
        Some(other) => {
            // An accept of content nobody can read is no accept.
            report.warn(format!(
                "{event} hook `{name}`: content is a {}, not an object; the elicitation is declined",
                json_kind(other)
            ));
            return Some((Elicit::Decline, None));
        }
    };
    Some((action, content.filter(|_| action == Elicit::Accept)))
}

/// A PermissionRequest `decision` object: `behavior` `allow` (with `updatedInput`, an object)
/// or `deny` (with `message` and `interrupt`); anything else is no decision (reported).
fn permission_request(
    event: HookEvent,
    name: &str,
    decision: Option<&Value>,
    report: Report<'_>,
) -> Option<PermissionRequest> {
    let decision = match decision? {
        Value::Null => return None,
        Value::Object(d) => d,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: decision is a {}, not an object; ignored",
                json_kind(other)
            ));
            return None;
        }
    };
    match decision.get("behavior").and_then(Value::as_str) {
        Some("allow") => match decision.get("updatedInput") {
            None | Some(Value::Null) => Some(PermissionRequest::Allow {
                updated_input: None,
            }),
            Some(input @ Value::Object(_)) => Some(PermissionRequest::Allow {
                updated_input: Some(input.clone()),
            }),
            // The hook's fault: an allow of arguments nobody can run is no allow.
            Some(other) => {
                let message = format!(
                    "hook `{name}` allowed with an updatedInput that is not a JSON object (a {})",
                    json_kind(other)
                );
                report.warn(format!("{event} {message}; the call is denied"));
                Some(PermissionRequest::Deny {
                    message,
                    interrupt: false,
                })
            }
        },
        Some("deny") => Some(PermissionRequest::Deny {
            message: text(decision.get("message"))
                .unwrap_or_else(|| format!("denied by hook `{name}`")),
            interrupt: decision.get("interrupt") == Some(&Value::Bool(true)),
        }),
        other => {
            report.warn(format!(
                "{event} hook `{name}`: decision.behavior {} is neither \"allow\" nor \"deny\"; ignored",
                other.map_or_else(|| "missing".to_owned(), |b| format!("`{b}`"))
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_counts_characters() {
        assert_eq!(cap("short".into()), "short");
        let long = "é".repeat(MAX_CHARS + 5);
        let capped = cap(long);
        assert!(
            capped.ends_with("\n... (truncated 5 characters)"),
            "{capped}"
        );
        assert_eq!(capped.chars().filter(|&c| c == 'é').count(), MAX_CHARS);
    }

    #[test]
    fn substitution_in_exec_form() {
        assert_eq!(
            substitute("${CLAUDE_PROJECT_DIR}/x ${TOWER_AGENT_PROJECT_DIR}", "/p"),
            "/p/x /p"
        );
        assert_eq!(humantime(Duration::from_millis(1500)), "1.5s");
        assert_eq!(humantime(Duration::from_secs(2)), "2s");
        assert_eq!(humantime(Duration::from_millis(300)), "300ms");
    }

    mod fuzz {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::*;

        fn handler(fail_closed: bool) -> Handler {
            Handler {
                exec: Exec::Shell {
                    shell: "sh",
                    command: "hook".into(),
                },
                timeout: None,
                fail_closed,
                background: false,
                rewake: false,
                persistent: None,
                origin: "fuzz".into(),
                label: "hook".into(),
                extras: Default::default(),
            }
        }

        /// JSON made of what answers hold: the protocol's keys with values of any type.
        fn answer() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(|f| json!(f)),
                prop_oneof![
                    Just("allow"),
                    Just("deny"),
                    Just("ask"),
                    Just("defer"),
                    Just("block"),
                    Just("approve"),
                    Just("PreToolUse"),
                    Just("Stop"),
                    Just(""),
                ]
                .prop_map(Value::from),
                ".{0,40}".prop_map(Value::from),
            ];
            let keys = prop_oneof![
                Just("continue"),
                Just("stopReason"),
                Just("systemMessage"),
                Just("decision"),
                Just("reason"),
                Just("hookSpecificOutput"),
                Just("hookEventName"),
                Just("permissionDecision"),
                Just("permissionDecisionReason"),
                Just("updatedInput"),
                Just("updatedToolOutput"),
                Just("updatedMCPToolOutput"),
                Just("additionalContext"),
                Just("llm_request"),
                Just("llm_response"),
                Just("messages"),
                Just("settings"),
                Just("message"),
                Just("x"),
            ];
            leaf.prop_recursive(4, 64, 8, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::vec((keys.clone(), inner), 0..8).prop_map(|kv| {
                        Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                    }),
                ]
            })
        }

        /// What a one-shot hook prints: JSON, JSON cut short, text, or any bytes (lossy).
        fn stdout() -> impl Strategy<Value = String> {
            prop_oneof![
                answer().prop_map(|v| v.to_string()),
                (answer(), any::<prop::sample::Index>()).prop_map(|(v, at)| {
                    let text = v.to_string();
                    let cut = at.index(text.len() + 1);
                    String::from_utf8_lossy(&text.as_bytes()[..cut]).into_owned()
                }),
                ".{0,200}",
                prop::collection::vec(any::<u8>(), 0..200)
                    .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            ]
        }

        fn event() -> impl Strategy<Value = HookEvent> {
            prop::sample::select(HookEvent::ALL.to_vec())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

            /// Whatever a one-shot hook prints and however it exits: a verdict, no panic; a
            /// fail-closed hook that exits neither 0 nor 2 always fails.
            #[test]
            fn one_shot_answers_never_panic(
                event in event(),
                fail_closed in any::<bool>(),
                code in prop_oneof![Just(Some(0)), Just(Some(2)), Just(None), any::<i32>().prop_map(Some)],
                out in stdout(),
                err in ".{0,100}",
            ) {
                let h = handler(fail_closed);
                // Another exit with a JSON object: the JSON decides, no failure.
                let is_json = serde_json::from_str::<Map<String, Value>>(out.trim()).is_ok();
                let reply = Reply { code, stdout: Stdout::Text(out), stderr: err };
                let verdict = interpret(event, &h, Ok(reply), Report::Log);
                if fail_closed && !matches!(code, Some(0 | 2)) && !is_json {
                    prop_assert!(verdict.failed.is_some());
                }
                if code == Some(2) && exit_2(event) == Exit2::Blocks {
                    prop_assert!(verdict.block.is_some());
                }
                for text in verdict.contexts.iter().chain(&verdict.block).chain(&verdict.stop) {
                    prop_assert!(text.chars().count() <= MAX_CHARS + 40);
                }
            }

            /// A persistent hook's `output` (any JSON): a verdict, no panic.
            #[test]
            fn persistent_outputs_never_panic(
                event in event(),
                fail_closed in any::<bool>(),
                code in prop_oneof![Just(Some(0)), Just(Some(2)), any::<i32>().prop_map(Some)],
                output in answer(),
            ) {
                let h = handler(fail_closed);
                let reply = Reply { code, stdout: Stdout::Json(output), stderr: String::new() };
                let _ = interpret(event, &h, Ok(reply), Report::Log);
            }
        }
    }
}
