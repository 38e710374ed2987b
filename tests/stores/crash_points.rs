//! Crash points: a replica process is killed with `SIGKILL` at **every** durable write of a
//! run's life, and another process resumes the thread; the side effects happened at most
//! once, and the thread ends well formed, at rest, with every output honest.
//!
//! # The run
//!
//! One replica (a child process: this test binary re-run for [`crash_child`]) sends a prompt
//! on a thread. Its model (a script reading only the request's history, so that any process
//! continues it) calls tool `a`, then tool `b`, then answers [`FINAL_TEXT`]. Neither tool is
//! idempotent; each appends a line (`{call id} {pid}`) to its own file, then answers an output
//! naming the call and the process. A PreToolUse hook asks about `b` and the deferring
//! approval policy is on, so the prompt run ends `Interrupted` with `b` pending; the same
//! process then approves `b`, which runs, and the run finishes.
//!
//! # The crash points
//!
//! The replica's store is [`Counted`], a wrapper around `Sqlite` or `Postgres` that counts
//! every write: each save and delete, each journal record (`started`, `finished`). The tools
//! count their side effect as a write too (kind `effect`, right before the line is appended):
//! a file line is as durable as a row, and "the journal says started, the effect did not
//! happen" is a state of its own that no store write separates from "the effect happened".
//! At write number `k == KILL_AT` the replica prints `HOLD k <kind> <detail>` and never does
//! that write; the parent, reading its stdout, kills it there. Writes `1..k` are durable,
//! write `k` and all later ones never happen. Since nothing durable happens between two
//! writes, "after write `k`" is "before write `k + 1`": holding before each write `1..=N`,
//! plus the run with no kill (after write `N`), covers every point.
//!
//! The parent first runs the scenario with no kill to count `N` (and prints the sequence),
//! asserts `N` is at least what reading the agent loop gives ([`MIN_WRITES`]), then for each
//! `k` kills a replica at `k` and runs a resumer (another child process, no kill): it loads
//! the thread and sends the prompt again (no thread), approves pending calls, or recovers
//! (`AgentRequest::recover`), until the thread is at rest (at most [`MAX_ROUNDS`] rounds).
//! The parent then opens the store itself and checks the point ([`check_point`]). Every point
//! runs; the failures are listed together at the end.
//!
//! Each point has its own thread id and side-effect directory (and, for SQLite, its own
//! database file); PostgreSQL is the project's throwaway server (`support::postgres`).

use crate::support;

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write as _},
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::{Child, ExitStatus, Stdio},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use futures_util::future::BoxFuture;
use serde_json::json;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{Approvals, Outcome},
    layers::hooks::{Hooks, PreToolUse},
    message::{Message, Messages, Role, ToolCall, ToolOutput},
    model::{ModelRequest, ModelResponse},
    store::{
        JournalEntry, Lease, Postgres, Sqlite, Thread, ThreadStore, ToolJournal,
        journal::in_doubt_output,
    },
    tool::{Tool, tool_fn},
};

/// The child's role: `run` (the replica, killed at `KILL_AT`) or `resume`.
const ENV_MODE: &str = "TOWER_AGENT_CRASH_MODE";
/// The store: `sqlite:<file>` or `postgres:<connection string>`.
const ENV_STORE: &str = "TOWER_AGENT_CRASH_STORE";
/// The thread id.
const ENV_THREAD: &str = "TOWER_AGENT_CRASH_THREAD";
/// The directory of the tools' side-effect files.
const ENV_DIR: &str = "TOWER_AGENT_CRASH_DIR";
/// The write to hold (1-based); absent: no kill.
const ENV_KILL_AT: &str = "TOWER_AGENT_CRASH_KILL_AT";

/// What starts every line a child says to its parent (libtest may print before it).
const PREFIX: &str = "@crash-point@ ";

const PROMPT: &str = "run a, then b";
const A_ID: &str = "call_a";
const B_ID: &str = "call_b";
const FINAL_TEXT: &str = "a and b are done";
/// What says that a call may or may not have happened: the journal's in-doubt output and the
/// placeholder of an approved call (`agent::interrupt`) both do.
const DOUBT: &str = "may or may not have happened";
/// The start of the placeholder an approved call has until its output is saved: never a
/// final answer (a recovery replaces it by the journal's rules).
const PLACEHOLDER: &str = "approved, but the run that was to make the call";

/// The writes of the scenario, by reading the agent loop (`agent/run.rs`): prompt saved;
/// step 0 saved with the call of `a`, `a` started, its effect, finished, the step saved; step
/// 1 saved with the call of `b`; the interrupted run's save with `b` pending; the approval's
/// save (placeholder for `b`), `b` started, its effect, finished, saved; the final save.
const MIN_WRITES: usize = 14;
/// How many requests the resumer may send before the thread must be at rest.
const MAX_ROUNDS: usize = 6;
/// How long a child may take to say what the parent waits for.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

// ===== the child processes =====

/// Prints `line` for the parent, flushed at once (the process may be killed right after).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{PREFIX}{line}");
    let _ = out.flush();
}

/// `text` on one line (for a line said to the parent).
fn one_line(text: &str) -> String {
    text.replace('\n', " ⏎ ")
}

/// The writes of a child process, counted; the one numbered `kill_at` is held forever.
#[derive(Debug)]
struct Writes {
    count: AtomicUsize,
    kill_at: Option<usize>,
}

impl Writes {
    /// Counts a write about to happen: says `WRITE k kind detail`, or, if it is the one to
    /// hold, says `HOLD k kind detail` and never returns.
    async fn point(&self, kind: &str, detail: &str) {
        let k = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if self.kill_at == Some(k) {
            say(&format!("HOLD {k} {kind} {detail}"));
            std::future::pending::<()>().await;
        }
        say(&format!("WRITE {k} {kind} {detail}"));
    }
}

/// A thread store counting its writes (see [`Writes`]); reads go straight through.
#[derive(Clone)]
struct Counted {
    inner: Arc<dyn ThreadStore>,
    writes: Arc<Writes>,
}

impl Counted {
    fn inner_journal(&self) -> &dyn ToolJournal {
        self.inner.journal().expect("the SQL stores keep a journal")
    }
}

impl ThreadStore for Counted {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        self.inner.load(id)
    }

    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.writes.point("save", &describe(thread)).await;
            self.inner.save(thread).await
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.writes.point("delete", id).await;
            self.inner.delete(id).await
        })
    }

    fn lease<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Lease, BoxError>> {
        self.inner.lease(id)
    }

    fn journal(&self) -> Option<&dyn ToolJournal> {
        self.inner.journal().map(|_| self as &dyn ToolJournal)
    }
}

impl ToolJournal for Counted {
    fn started<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let detail = format!("{} ({})", call.id, call.name);
            self.writes.point("started", &detail).await;
            self.inner_journal().started(thread, call).await
        })
    }

    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let detail = format!("{} ({})", call.id, call.name);
            self.writes.point("finished", &detail).await;
            self.inner_journal().finished(thread, call, output).await
        })
    }

    fn entries<'a>(
        &'a self,
        thread: &'a str,
        call_ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>> {
        self.inner_journal().entries(thread, call_ids)
    }
}

/// A thread in a few words: its messages (`assistant[call_a]`, `tool[call_b!]` for an error
/// output) and its pending calls.
fn describe(thread: &Thread) -> String {
    let messages: Vec<String> = thread.messages.iter().map(describe_message).collect();
    let pending: Vec<&str> = thread.pending.iter().map(|p| p.id.as_str()).collect();
    format!("[{}] pending={pending:?}", messages.join(", "))
}

fn describe_message(m: &Message) -> String {
    match m.role {
        Role::Assistant if m.tool_calls.is_empty() => format!("assistant{:?}", m.text()),
        Role::Assistant => {
            let ids: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            format!("assistant[{}]", ids.join(","))
        }
        Role::Tool => format!(
            "tool[{}{}]",
            m.tool_call_id.as_deref().unwrap_or("?"),
            if m.is_error { "!" } else { "" }
        ),
        Role::User => "user".into(),
        Role::System => "system".into(),
    }
}

/// The store of `spec` (`sqlite:<file>`, `postgres:<url>`).
async fn open(spec: &str) -> Arc<dyn ThreadStore> {
    match spec.split_once(':') {
        Some(("sqlite", path)) => Arc::new(Sqlite::open(path).expect("open the SQLite file")),
        Some(("postgres", url)) => Arc::new(Postgres::connect(url).await.expect("connect")),
        _ => panic!("not a store: {spec}"),
    }
}

/// The model: reads only the history, so a resumed run continues the script.
async fn script(req: ModelRequest) -> Result<ModelResponse, BoxError> {
    let answered = |id: &str| {
        req.messages
            .iter()
            .any(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
    };
    let called = |id: &str| {
        req.messages
            .iter()
            .any(|m| m.tool_calls.iter().any(|c| c.id == id))
    };
    let call = |id: &str, tool: &str| {
        ModelResponse::tool_calls([ToolCall::new(id, tool, json!({ "call": id }))])
    };
    if !answered(A_ID) {
        Ok(call(A_ID, "a"))
    } else if !called(B_ID) {
        Ok(call(B_ID, "b"))
    } else if answered(B_ID) {
        Ok(ModelResponse::text(FINAL_TEXT))
    } else {
        Err("the history calls b without answering it".into())
    }
}

/// The output of tool `tool`'s call `id` made by process `pid`.
fn real_output(tool: &str, id: &str, pid: &str) -> String {
    format!("{tool} ran for {id} in process {pid}")
}

/// Tool `name` (not idempotent): appends `{call id} {pid}` to `dir/name` (a counted write,
/// kind `effect`), then answers [`real_output`].
fn effect_tool(name: &'static str, dir: PathBuf, writes: Arc<Writes>) -> impl Tool {
    tool_fn(
        name,
        "appends a line",
        json!({"type": "object"}),
        move |args, _| {
            let (file, writes) = (dir.join(name), Arc::clone(&writes));
            async move {
                let id = args["call"].as_str().unwrap_or("?").to_owned();
                writes.point("effect", &format!("{id} ({name})")).await;
                let pid = std::process::id().to_string();
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)?;
                f.write_all(format!("{id} {pid}\n").as_bytes())?;
                f.sync_all()?;
                Ok::<_, BoxError>(real_output(name, &id, &pid))
            }
        },
    )
    .idempotent(false)
}

/// The agent every process runs: `b` is asked about, with the deferring approval policy.
fn agent(store: Counted, dir: &Path) -> Agent {
    let writes = Arc::clone(&store.writes);
    let hooks = Hooks::new()
        .before_tool_use("b", |_, _| PreToolUse::Ask("b needs a person".into()))
        .defer_approvals()
        .compile()
        .unwrap();
    Agent::builder()
        .model(tower::service_fn(script))
        .tool(effect_tool("a", dir.to_owned(), Arc::clone(&writes)))
        .tool(effect_tool("b", dir.to_owned(), writes))
        .store(store)
        .hooks(hooks)
        .build()
}

/// The replica's life: the prompt run (interrupted, `b` pending), then the approval of `b`.
async fn replica(agent: &Agent, thread: &str) -> Result<(), String> {
    let asked = agent
        .run(AgentRequest::new(PROMPT).thread(thread))
        .await
        .map_err(|e| format!("the prompt run failed: {e}"))?;
    match &asked.outcome {
        Outcome::Interrupted { pending } if pending.len() == 1 && pending[0].id == B_ID => {}
        other => return Err(format!("the prompt run ended {other:?}, not waiting on b")),
    }
    let answered = agent
        .run(AgentRequest::approvals(
            thread,
            Approvals::new().approve(B_ID),
        ))
        .await
        .map_err(|e| format!("the approval run failed: {e}"))?;
    match answered.outcome {
        Outcome::Finished => Ok(()),
        other => Err(format!("the approval run ended {other:?}")),
    }
}

/// Whether a thread is at rest: its last message is a final text, nothing pending.
fn at_rest(thread: &Thread) -> bool {
    thread.pending.is_empty()
        && thread
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
}

/// The resumer: until the thread is at rest, sends the prompt again (no thread), approves
/// the pending calls, or recovers; says each round.
async fn resumer(agent: &Agent, store: &Counted, thread: &str) -> Result<(), String> {
    for round in 0..=MAX_ROUNDS {
        let loaded = store.load(thread).await.map_err(|e| format!("load: {e}"))?;
        let (action, request) = match &loaded {
            None => ("prompt", AgentRequest::new(PROMPT).thread(thread)),
            Some(t) if !t.pending.is_empty() => {
                let approvals = t
                    .pending
                    .iter()
                    .fold(Approvals::new(), |a, p| a.approve(p.id.clone()));
                ("approve", AgentRequest::approvals(thread, approvals))
            }
            Some(t) if at_rest(t) => {
                say(&format!("AT-REST after {round} rounds"));
                return Ok(());
            }
            Some(_) => ("recover", AgentRequest::recover(thread)),
        };
        if round == MAX_ROUNDS {
            break;
        }
        let outcome = match agent.run(request).await {
            Ok(response) => match response.outcome {
                Outcome::Interrupted { pending } => {
                    let ids: Vec<String> = pending.into_iter().map(|p| p.id).collect();
                    format!("interrupted, pending {ids:?}")
                }
                outcome => format!("{outcome:?}"),
            },
            Err(e) => format!("error: {e}"),
        };
        say(&format!(
            "ROUND {} {action} -> {}",
            round + 1,
            one_line(&outcome)
        ));
    }
    Err(format!("not at rest after {MAX_ROUNDS} rounds"))
}

/// Child role: the replica (`run`, killed at `KILL_AT`) or the resumer (`resume`), as the
/// environment says; nothing without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child role: run by the crash-point tests through `support::rerun`"]
async fn crash_child() {
    let Ok(mode) = std::env::var(ENV_MODE) else {
        return;
    };
    let var = |key: &str| std::env::var(key).unwrap_or_else(|_| panic!("{key} is not set"));
    let writes = Arc::new(Writes {
        count: AtomicUsize::new(0),
        kill_at: std::env::var(ENV_KILL_AT).ok().map(|k| k.parse().unwrap()),
    });
    let store = Counted {
        inner: open(&var(ENV_STORE)).await,
        writes,
    };
    let agent = agent(store.clone(), Path::new(&var(ENV_DIR)));
    let thread = var(ENV_THREAD);
    let result = match mode.as_str() {
        "run" => replica(&agent, &thread).await,
        "resume" => resumer(&agent, &store, &thread).await,
        other => Err(format!("unknown mode `{other}`")),
    };
    match result {
        Ok(()) => say("DONE"),
        Err(e) => {
            say(&format!("FAILED {}", one_line(&e)));
            panic!("{e}");
        }
    }
}

// ===== the parent: every crash point =====

/// Where a store test keeps its data: SQLite files under the point directories, or one
/// PostgreSQL database.
enum Backend {
    Sqlite,
    Postgres(String),
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }
}

/// One crash point: its own thread, side-effect directory and (SQLite) database file.
struct Point {
    /// The write the replica is killed before; `None`: the run with no kill.
    k: Option<usize>,
    thread: String,
    dir: PathBuf,
    effects: PathBuf,
    /// The store, as the children get it (`ENV_STORE`).
    spec: String,
}

impl Point {
    fn new(backend: &Backend, root: &Path, k: Option<usize>) -> Self {
        let name = k.map_or_else(|| "no-kill".to_owned(), |k| format!("k{k}"));
        let dir = root.join(&name);
        let effects = dir.join("effects");
        std::fs::create_dir_all(&effects).unwrap();
        let spec = match backend {
            Backend::Sqlite => format!("sqlite:{}", dir.join("threads.db").display()),
            Backend::Postgres(url) => format!("postgres:{url}"),
        };
        Point {
            k,
            thread: format!("thread-{name}"),
            dir,
            effects,
            spec,
        }
    }
}

/// A write a child said it was about to do (`WRITE k kind detail`, `HOLD k kind detail`).
#[derive(Debug, Clone, PartialEq)]
struct Write {
    k: usize,
    kind: String,
    detail: String,
}

impl Write {
    /// The write of a line said with `tag` (`WRITE`, `HOLD`).
    fn parse(line: &str, tag: &str) -> Option<Write> {
        let rest = line.strip_prefix(tag)?.strip_prefix(' ')?;
        let mut parts = rest.splitn(3, ' ');
        Some(Write {
            k: parts.next()?.parse().ok()?,
            kind: parts.next()?.to_owned(),
            detail: parts.next().unwrap_or_default().to_owned(),
        })
    }

    /// The call id of a journal record or effect.
    fn call_id(&self) -> &str {
        self.detail.split(' ').next().unwrap_or_default()
    }
}

/// What a child said, and how it ended.
struct Said {
    lines: Vec<String>,
    /// The `HOLD` line, if it said one (then it was killed).
    held: Option<String>,
    status: Option<ExitStatus>,
    timed_out: bool,
    stderr: PathBuf,
}

impl Said {
    fn said(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l == line)
    }

    /// Everything about the child, for a failure message.
    fn explain(&self) -> String {
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "status {:?}{}; said:\n      {}\n    stderr (end):\n      {}",
            self.status,
            if self.timed_out { " (timed out)" } else { "" },
            self.lines.join("\n      "),
            tail.join("\n      ")
        )
    }
}

/// Starts the child role `mode` for `point`, killed at write `kill_at` if any.
fn spawn_child(point: &Point, mode: &str, kill_at: Option<usize>) -> (Child, PathBuf) {
    let stderr = point.dir.join(format!("{mode}.stderr"));
    let mut cmd = support::rerun(&support::test_name!("crash_child"));
    cmd.env(ENV_MODE, mode)
        .env(ENV_STORE, &point.spec)
        .env(ENV_THREAD, &point.thread)
        .env(ENV_DIR, &point.effects)
        .env_remove(ENV_KILL_AT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap());
    if let Some(k) = kill_at {
        cmd.env(ENV_KILL_AT, k.to_string());
    }
    (cmd.spawn().expect("start a child process"), stderr)
}

/// Reads what `child` says until it ends, or until it says `HOLD` (then kills it with
/// `SIGKILL`: `Child::kill`) or says nothing more for [`CHILD_TIMEOUT`] (killed too).
fn converse(mut child: Child, stderr: PathBuf) -> Said {
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Some(at) = line.find(PREFIX) else {
                continue; // libtest's own lines
            };
            if tx.send(line[at + PREFIX.len()..].to_owned()).is_err() {
                break;
            }
        }
    });
    let mut said = Said {
        lines: Vec::new(),
        held: None,
        status: None,
        timed_out: false,
        stderr,
    };
    let deadline = Instant::now() + CHILD_TIMEOUT;
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.starts_with("HOLD ") => {
                said.held = Some(line);
                child.kill().expect("SIGKILL the child");
                break;
            }
            Ok(line) => said.lines.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                said.timed_out = true;
                let _ = child.kill();
                break;
            }
        }
    }
    said.status = child.wait().ok();
    said
}

/// Runs the child role `mode` for `point` (off the async threads).
async fn run_child(point: &Point, mode: &'static str, kill_at: Option<usize>) -> Said {
    let (child, stderr) = spawn_child(point, mode, kill_at);
    tokio::task::spawn_blocking(move || converse(child, stderr))
        .await
        .unwrap()
}

// ===== the checks =====

/// What the journal held of a call when the replica was killed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Recorded {
    /// No record: the call had not reached its tool.
    Nothing,
    /// Started, not finished: the call is in doubt.
    Started,
    /// Finished, with its output.
    Finished,
}

impl Recorded {
    /// The record of call `id` when the replica is killed before write `k` (`None`: never).
    fn at(writes: &[Write], k: Option<usize>, id: &str) -> Recorded {
        let at = |kind: &str| {
            writes
                .iter()
                .find(|w| w.kind == kind && w.call_id() == id)
                .map_or(usize::MAX, |w| w.k)
        };
        let k = k.unwrap_or(usize::MAX - 1);
        if k <= at("started") {
            Recorded::Nothing
        } else if k <= at("finished") {
            Recorded::Started
        } else {
            Recorded::Finished
        }
    }

    fn says(self) -> &'static str {
        match self {
            Recorded::Nothing => "had no journal record at the kill (it never started)",
            Recorded::Started => "was in doubt at the kill (started, not finished)",
            Recorded::Finished => "was recorded finished, with its output, at the kill",
        }
    }
}

/// Every tool call of every assistant message has exactly one result, right after it, in
/// call order; no other tool message.
fn well_formed(messages: &Messages) -> Result<(), String> {
    let all: Vec<&Message> = messages.iter().collect();
    let mut i = 0;
    while let Some(m) = all.get(i) {
        if m.role == Role::Tool {
            return Err(format!("message {i} is a tool result out of place"));
        }
        for (j, call) in m.tool_calls.iter().enumerate() {
            let answer = all.get(i + 1 + j);
            let id = Some(call.id.as_str());
            if !answer.is_some_and(|r| r.role == Role::Tool && r.tool_call_id.as_deref() == id) {
                return Err(format!(
                    "message {} is not the result of call {} of message {i}",
                    i + 1 + j,
                    call.id
                ));
            }
        }
        i += 1 + m.tool_calls.len();
    }
    Ok(())
}

/// The lines of tool `tool`'s side-effect file (`{call id} {pid}`, one per run).
fn runs(effects: &Path, tool: &str) -> Vec<String> {
    std::fs::read_to_string(effects.join(tool))
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The checks of one call: its tool ran at most once, and exactly once unless the model was
/// told it may or may not have happened — which it may be told only of a call in doubt (the
/// kill came between its `started` and `finished` records); the output of a call that ran
/// and was not in doubt is that of its run. "May or may not have happened" is what the
/// journal's [`in_doubt_output`] says (for a call in doubt, which may have been killed before
/// its effect — never ran — or after it — ran once), and also the placeholder of an approved
/// call (`agent::interrupt`), which a thread at rest must never keep: a recovery answers an
/// approved call by the journal's rules as any other.
fn check_call(thread: &Thread, effects: &Path, tool: &str, id: &str, rec: Recorded) -> Vec<String> {
    let runs = runs(effects, tool);
    let output = thread
        .messages
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
        .map(|m| m.text().into_owned());
    let Some(output) = output else {
        return vec![format!("`{tool}` ({id}) has no output in the thread")];
    };
    let mut problems = Vec::new();
    let ran = match runs.len() {
        0 => "never ran".to_owned(),
        1 => "ran once".to_owned(),
        n => {
            problems.push(format!("`{tool}` ran {n} times (not idempotent): {runs:?}"));
            format!("ran {n} times")
        }
    };
    if output.starts_with(PLACEHOLDER) {
        problems.push(format!(
            "`{tool}` {}, {ran}, and its output is still the approval's placeholder: {output:?}",
            rec.says()
        ));
    } else if output.contains(DOUBT) {
        if rec != Recorded::Started {
            problems.push(format!(
                "`{tool}` {}, {ran}, yet the model was told \"{DOUBT}\": {output:?}",
                rec.says()
            ));
        }
    } else if let [line] = runs.as_slice() {
        let pid = line.split(' ').nth(1).unwrap_or("?");
        if output != real_output(tool, id, pid) {
            problems.push(format!(
                "`{tool}` ran once ({line:?}) but its output is not that run's: {output:?}"
            ));
        }
    } else if runs.is_empty() {
        problems.push(format!(
            "`{tool}` never ran, yet its output does not say so: {output:?}"
        ));
    }
    problems
}

/// What a point ended with, in a line: per tool, its runs and the start of its output.
fn seen(thread: &Thread, effects: &Path) -> String {
    let seen = [("a", A_ID), ("b", B_ID)].map(|(tool, id)| {
        let output = thread
            .messages
            .iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
            .map(|m| m.text().chars().take(44).collect::<String>());
        let runs = runs(effects, tool).len();
        format!("{tool} ran {runs}x, output {output:?}")
    });
    seen.join("; ")
}

/// The checks of a point once the resumer is done, on a store this process opens; also
/// what it saw ([`seen`]).
async fn check_point(point: &Point, writes: &[Write]) -> (Vec<String>, String) {
    let store = open(&point.spec).await;
    let thread = match store.load(&point.thread).await {
        Ok(Some(thread)) => thread,
        Ok(None) => return (vec!["the thread is not in the store".into()], String::new()),
        Err(e) => {
            return (
                vec![format!("the thread cannot be loaded: {e}")],
                String::new(),
            );
        }
    };
    let mut problems = Vec::new();
    if let Err(e) = well_formed(&thread.messages) {
        problems.push(format!("ill-formed thread: {e}: {}", describe(&thread)));
    }
    if !thread.pending.is_empty() {
        problems.push(format!("calls still pending: {}", describe(&thread)));
    }
    let last = thread.messages.last();
    if !last.is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
        || last.is_some_and(|m| m.text() != FINAL_TEXT)
    {
        problems.push(format!(
            "the last message is not the final text: {}",
            describe(&thread)
        ));
    }
    for (tool, id) in [("a", A_ID), ("b", B_ID)] {
        let rec = Recorded::at(writes, point.k, id);
        problems.extend(check_call(&thread, &point.effects, tool, id, rec));
    }
    let ids: Vec<String> = thread
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let journal = store.journal().expect("the SQL stores keep a journal");
    match journal.entries(&point.thread, &ids).await {
        Ok(left) if left.is_empty() => {}
        Ok(left) => {
            let left: Vec<(&String, bool)> =
                left.iter().map(|(id, e)| (id, e.in_doubt())).collect();
            problems.push(format!(
                "a thread at rest keeps journal entries (id, in doubt): {left:?}"
            ));
        }
        Err(e) => problems.push(format!("the journal cannot be read: {e}")),
    }
    (problems, seen(&thread, &point.effects))
}

// ===== the driver =====

/// One point: the replica killed before write `k` (the run with no kill ran already), the
/// resumer, the checks. The problems, and what the resumer did and the checks saw.
async fn crash_point(point: &Point, writes: &[Write]) -> (Vec<String>, String) {
    let mut problems = Vec::new();
    if let Some(k) = point.k {
        let said = run_child(point, "run", Some(k)).await;
        let held = said.held.as_deref().and_then(|l| Write::parse(l, "HOLD"));
        match &held {
            Some(held) if *held == writes[k - 1] => {}
            Some(held) => problems.push(format!(
                "the replica held {held:?}, but write {k} of the run with no kill is {:?}",
                writes[k - 1]
            )),
            None => problems.push(format!(
                "the replica never reached write {k}: {}",
                said.explain()
            )),
        }
        if held.is_some() && said.status.and_then(|s| s.signal()) != Some(9) {
            problems.push(format!(
                "the replica did not die of SIGKILL: {:?}",
                said.status
            ));
        }
    }
    let resumed = run_child(point, "resume", None).await;
    if !resumed.said("DONE") {
        problems.push(format!(
            "the resumer did not bring the thread to rest: {}",
            resumed.explain()
        ));
    }
    let rounds: Vec<&str> = resumed
        .lines
        .iter()
        .filter_map(|l| l.strip_prefix("ROUND "))
        .collect();
    let (checked, seen) = check_point(point, writes).await;
    problems.extend(checked);
    let what = format!("resume: {}\n       seen: {seen}", rounds.join("; "));
    (problems, what)
}

/// The run with no kill: the writes it made, in order (and its point).
async fn count_writes(backend: &Backend, root: &Path) -> (Point, Vec<Write>) {
    let name = backend.name();
    let point = Point::new(backend, root, None);
    let said = run_child(&point, "run", None).await;
    assert!(
        said.said("DONE"),
        "{name}: the scenario with no kill failed: {}",
        said.explain()
    );
    let writes: Vec<Write> = said
        .lines
        .iter()
        .filter_map(|l| Write::parse(l, "WRITE"))
        .collect();
    let n = writes.len();
    println!("crash points: {n} ({name}): a kill before each of {n} writes, and no kill");
    for w in &writes {
        println!("  {name} write {:>2}: {:<8} {}", w.k, w.kind, w.detail);
    }
    assert!(
        n >= MIN_WRITES,
        "{name}: the scenario made {n} writes, fewer than the {MIN_WRITES} of the agent loop: \
         {writes:#?}"
    );
    (point, writes)
}

/// Every crash point on `backend`: all of them run, then one assertion lists every failure.
async fn every_crash_point(backend: Backend, root: &Path) {
    let started = Instant::now();
    let name = backend.name();
    // The outputs that tell the model a call is in doubt are recognised by these words.
    let documented = in_doubt_output(&ToolCall::new(A_ID, "a", json!({}))).content;
    assert!(documented.contains(DOUBT), "{documented}");
    let (no_kill, writes) = count_writes(&backend, root).await;
    let mut report = Vec::new();
    let mut failures = 0;
    let points = (1..=writes.len())
        .map(|k| Point::new(&backend, root, Some(k)))
        .chain([no_kill]);
    for point in points {
        let (tag, label) = match point.k {
            Some(k) => {
                let w = &writes[k - 1];
                let tag = match w.kind.as_str() {
                    "save" | "delete" => format!("{name} #{k} {}", w.kind),
                    _ => format!("{name} #{k} {} {}", w.kind, w.call_id()),
                };
                (
                    tag,
                    format!("killed before write {k:>2} ({} {})", w.kind, w.detail),
                )
            }
            None => (
                format!("{name} no kill"),
                format!("no kill (after write {})", writes.len()),
            ),
        };
        let (problems, what) = crash_point(&point, &writes).await;
        let verdict = if problems.is_empty() { "ok  " } else { "FAIL" };
        report.push(format!("{verdict} {name} {label}\n       {what}"));
        for p in &problems {
            report.push(format!("       - [{tag}] {p}"));
        }
        failures += usize::from(!problems.is_empty());
    }
    let report = report.join("\n");
    println!("{report}");
    println!(
        "{name}: {} crash points in {:.1?}",
        writes.len() + 1,
        started.elapsed()
    );
    assert!(
        failures == 0,
        "{failures} of {} crash points fail on {name}:\n{report}",
        writes.len() + 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_at_any_write_is_resumed_by_another_process_on_sqlite() {
    let root = tempfile::tempdir().unwrap();
    every_crash_point(Backend::Sqlite, root.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_at_any_write_is_resumed_by_another_process_on_postgres() {
    let url = support::postgres::database().await;
    let root = tempfile::tempdir().unwrap();
    every_crash_point(Backend::Postgres(url), root.path()).await;
}
