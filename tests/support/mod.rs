//! Helpers shared by the integration tests: a recording layer, sleeping tools, a drop guard,
//! checks over histories and model requests, and child processes that re-run one test of the
//! current test binary (to measure its peak memory, or to run it under limits).
//!
//! Each test binary (`tests/<group>/main.rs`) declares this module once
//! (`#[path = "../support/mod.rs"] mod support;`), its modules use it as `crate::support`; a
//! binary uses a part of it: the rest is dead code there, hence the `allow`.
#![allow(dead_code, unreachable_pub)]

#[cfg(unix)]
pub mod command;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(all(unix, feature = "postgres"))]
pub mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod stores;

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tower::{Layer, Service};
use tower_agent::{
    BoxError,
    message::{Message, Messages, Role},
    model::ModelRequest,
    tool::{Tool, tool_fn},
};

/// A shared, ordered log of what the layers and services saw.
#[derive(Clone, Debug, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }

    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A layer that logs `"<name> in"` when its service is called and `"<name> out"` when the
/// response comes back.
#[derive(Clone, Debug)]
pub struct RecordLayer {
    name: &'static str,
    log: Log,
}

impl RecordLayer {
    pub fn new(name: &'static str, log: &Log) -> Self {
        RecordLayer {
            name,
            log: log.clone(),
        }
    }
}

impl<S> Layer<S> for RecordLayer {
    type Service = Record<S>;

    fn layer(&self, inner: S) -> Record<S> {
        Record {
            inner,
            name: self.name,
            log: self.log.clone(),
        }
    }
}

/// The service of [`RecordLayer`].
#[derive(Clone, Debug)]
pub struct Record<S> {
    inner: S,
    name: &'static str,
    log: Log,
}

impl<S, R> Service<R> for Record<S>
where
    S: Service<R>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.log.push(format!("{} in", self.name));
        let fut = self.inner.call(req);
        let log = self.log.clone();
        let name = self.name;
        Box::pin(async move {
            let res = fut.await;
            log.push(format!("{name} out"));
            res
        })
    }
}

/// The JSON Schema of a tool that takes anything.
pub fn any_object() -> Value {
    json!({ "type": "object" })
}

/// A tool that sleeps `ms` milliseconds (tokio time) and answers `"<name> done"`.
pub fn sleepy(name: &'static str, ms: u64) -> impl Tool {
    tool_fn(name, "sleeps", any_object(), move |_, _| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, BoxError>(format!("{name} done"))
    })
}

/// A tool that answers `text` at once.
pub fn answers(name: &'static str, text: &'static str) -> impl Tool {
    tool_fn(name, "answers", any_object(), move |_, _| async move {
        Ok::<_, BoxError>(text)
    })
}

/// Sets its flag when dropped: proves a tool future was dropped.
#[derive(Debug)]
pub struct DropGuard(pub Arc<AtomicBool>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The tool messages of a history, in order.
pub fn tool_messages(messages: &Messages) -> Vec<Message> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .cloned()
        .collect()
}

/// The last tool message of a model request (what the model got back from its last call).
pub fn last_tool_message(req: &ModelRequest) -> Message {
    req.messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .cloned()
        .expect("the request has a tool message")
}

/// The hook context after the request's last tool message: the text of the system message
/// that follows the step's results (`None`: there is none).
pub fn context_after_results(req: &ModelRequest) -> Option<String> {
    let last = req.messages.iter().rposition(|m| m.role == Role::Tool)?;
    req.messages
        .iter()
        .skip(last + 1)
        .take_while(|m| m.role != Role::Assistant)
        .find(|m| m.role == Role::System)
        .map(|m| m.text().into_owned())
}

/// Every tool call of every assistant message has exactly one tool message answering it, and
/// it comes after the call and before the next assistant message.
pub fn assert_history_valid(messages: &Messages) {
    let mut open: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            Role::Assistant => {
                assert!(
                    open.is_empty(),
                    "message {i}: assistant message while calls {open:?} have no result"
                );
                open = m.tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().expect("tool message has a call id");
                let pos = open
                    .iter()
                    .position(|o| *o == id)
                    .unwrap_or_else(|| panic!("message {i}: result for unknown call {id}"));
                open.remove(pos);
                assert!(seen.insert(id.clone()), "two results for call {id}");
            }
            Role::System | Role::User => {}
        }
    }
    assert!(open.is_empty(), "calls {open:?} have no result");
}

/// Awaits `fut`, failing the test if it takes more than [`PATIENCE`] of tokio time. Under
/// paused time a hang fails at once instead of blocking the test run.
pub async fn within<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen"))
}

/// Whether the process `pid` is running (a zombie is not).
pub fn alive(pid: impl Into<i64>) -> bool {
    let pid = pid.into();
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        }
    }
}

/// How long a test waits, in real time, for what it expects to happen (a file a hook
/// writes, a process ending, a background hook's answer) before it fails. Generous on
/// purpose: a test on a machine busy compiling is slow, not wrong. The wait ends as soon as
/// the thing happens, so a passing test never waits this long.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Polls `check` every 20 ms until it gives a value, and returns it; fails, naming `what`,
/// after [`PATIENCE`] of real time (for tests on tokio's real clock: under paused time the
/// polls would spin).
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`eventually`] for a test that is no async function: blocks the thread between polls.
pub fn eventually_blocking<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (at most [`PATIENCE`]) for the process `pid` to end; whether it did.
pub async fn wait_dead(pid: impl Into<i64>) -> bool {
    let pid = pid.into();
    let deadline = std::time::Instant::now() + PATIENCE;
    while std::time::Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !alive(pid)
}

/// Writes `text` as the skill file `<root>/<dir>/SKILL.md`, making `dir`; returns its path.
pub fn write_skill(root: &Path, dir: &str, text: &str) -> PathBuf {
    let dir = root.join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("SKILL.md");
    std::fs::write(&path, text).unwrap();
    path
}

// ===== tracing =====

/// Call before `tracing::subscriber::set_default` in a test binary where other tests run
/// without a subscriber, beside this one. `tracing` caches per call site whether a span or
/// event is wanted, for every thread, when a thread first reaches it; while a single scoped
/// subscriber is registered, it asks only the subscriber of the thread that reaches it. A test
/// without a subscriber that reaches (say) the `invoke_agent` span first, while another test's
/// subscriber lives, then marks it unwanted for good, and that test's subscriber never sees
/// it. This registers once, for the life of the process, a subscriber that wants nothing but
/// has every call site asked again at each span and event: each thread's own subscriber then
/// decides, whoever came first.
pub fn scoped_subscribers() {
    static ASK_EACH_TIME: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    ASK_EACH_TIME.get_or_init(|| tracing::Dispatch::new(AskEachTime));
}

/// The subscriber of [`scoped_subscribers`]: every call site is of interest "sometimes", no
/// span or event is enabled.
struct AskEachTime;

impl tracing::Subscriber for AskEachTime {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, _: &tracing::Event<'_>) {}

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// One event a [`capture_events`] subscriber saw: its level and its fields (`message` is the
/// text), each as text.
#[derive(Debug, Clone)]
pub struct CapturedEvent {
    pub level: tracing::Level,
    pub fields: std::collections::BTreeMap<String, String>,
}

impl CapturedEvent {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// The events captured by [`capture_events`].
#[derive(Debug, Clone, Default)]
pub struct EventLog(Arc<Mutex<Vec<CapturedEvent>>>);

impl EventLog {
    pub fn events(&self) -> Vec<CapturedEvent> {
        self.0.lock().unwrap().clone()
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for EventLog {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Fields<'a>(&'a mut std::collections::BTreeMap<String, String>);
        impl tracing::field::Visit for Fields<'_> {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.insert(field.name().to_owned(), value.to_owned());
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.insert(field.name().to_owned(), format!("{value:?}"));
            }
        }
        let mut fields = std::collections::BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(CapturedEvent {
            level: *event.metadata().level(),
            fields,
        });
    }
}

/// A subscriber that captures every event, the default on this thread until the guard drops
/// (run the test on a current-thread runtime, so every task of it logs here).
pub fn capture_events() -> (EventLog, tracing::subscriber::DefaultGuard) {
    use tracing_subscriber::layer::SubscriberExt;
    let log = EventLog::default();
    scoped_subscribers();
    let subscriber = tracing_subscriber::registry().with(log.clone());
    (log, tracing::subscriber::set_default(subscriber))
}

// ===== child processes =====

/// The peak resident memory of this process (`VmHWM` in `/proc/self/status`), in KiB.
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/self/status")
}

/// The arguments that make a test binary run exactly the test `test`, its output not
/// captured, on one thread.
fn exactly(test: &str) -> [&str; 5] {
    [
        test,
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ]
}

/// The full name of the test `$name` of the calling module (a test function there, or a path
/// from there such as `memory::child`), as the test binary names it and `--exact` wants it:
/// the caller's module path without the crate (the binary), then `$name` — say
/// `sqlite::child_opens` for `test_name!("child_opens")` in `tests/stores/sqlite.rs`. Name the
/// test a child runs ([`rerun`] and its kin) with it, never with a literal path: the name then
/// follows the test wherever its file moves.
#[allow(unused_macros)]
macro_rules! test_name {
    ($name:expr) => {
        $crate::support::full_test_name(module_path!(), $name)
    };
}
#[allow(unused_imports)]
pub(crate) use test_name;

/// The name of the test `name` of the module `module` (a `module_path!()` of this test
/// binary): see [`test_name!`].
pub fn full_test_name(module: &str, name: &str) -> String {
    let krate = env!("CARGO_CRATE_NAME");
    let within = module
        .strip_prefix(krate)
        .unwrap_or_else(|| panic!("{module} is not a module of the test binary {krate}"));
    match within.strip_prefix("::") {
        Some(path) => format!("{path}::{name}"),
        None if within.is_empty() => name.to_owned(),
        None => panic!("{module} is not a module of the test binary {krate}"),
    }
}

/// A command that runs this test binary again for exactly the test `test` (its full name, say
/// `memory::child`: build it with [`test_name!`]), `--exact --include-ignored --nocapture
/// --test-threads=1`. The child inherits the environment: set a variable with `.env(…)` to tell
/// it what to do. A test that is only a child's role is `#[ignore]`d, so the suite itself never
/// runs it as a vacuous pass.
pub fn rerun(test: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(exactly(test));
    cmd
}

/// Like [`rerun`], for a child that runs as another user (set with `CommandExt::uid`), who may
/// not reach this test binary: the checkout, and the build in it, may be in a private home
/// (mode 700, as `/root`). It runs a link to (else a copy of) the binary in `dir`, from `dir`;
/// `dir` must be reachable by that user (say a fresh temp dir made mode 755), and on the
/// binary's file system for a link.
#[cfg(unix)]
pub fn rerun_reachable(dir: &Path, test: &str) -> Command {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().unwrap();
    let reachable = dir.join(exe.file_name().unwrap());
    // A link, when it can be: a copy just written may still be open for writing in a child
    // another test forks at that moment, and then cannot run (`ETXTBSY`).
    if std::fs::hard_link(&exe, &reachable).is_err() {
        std::fs::copy(&exe, &reachable).unwrap();
    }
    std::fs::set_permissions(&reachable, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = Command::new(reachable);
    cmd.args(exactly(test)).current_dir(dir);
    cmd
}

/// Like [`rerun`], through `sh -c`: the shell runs `setup` first (say `ulimit -v 2097152`, a
/// limit on the address space) and, if it succeeds, `exec`s the test binary. `wrapper` is what
/// runs the shell (say `["unshare", "--mount"]`), empty to run it directly. Arguments added to
/// the command reach the test binary.
pub fn rerun_after(wrapper: &[&str], setup: &str, test: &str) -> Command {
    let mut cmd = match wrapper {
        [] => Command::new("sh"),
        [program, args @ ..] => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg("sh");
            cmd
        }
    };
    cmd.arg("-c")
        .arg(format!(r#"{setup} && exec "$0" "$@""#))
        .arg(std::env::current_exe().unwrap())
        .args(exactly(test));
    cmd
}

/// Set in the child of [`alone`]: the full name of the test it runs.
const ALONE: &str = "TOWER_AGENT_TEST_ALONE";

/// For a test that looks at or changes the whole process (its OS threads, its zombie
/// children, its working directory): the other tests of its binary, running beside it in the
/// same process, would disturb it or be disturbed. Call it first with the test's full name
/// ([`test_name!`]): in the test's own child process ([`rerun`], where it runs alone) it returns
/// true, and the test goes on; in the parent it runs that child, fails unless the child passed,
/// and returns false: the test then returns.
pub fn alone(test: &str) -> bool {
    if std::env::var(ALONE).is_ok_and(|t| t == test) {
        return true;
    }
    let out = rerun(test).env(ALONE, test).output().unwrap();
    passed(&out, test);
    false
}

/// The stdout of a child of [`rerun`]; fails, naming it `what`, unless the child exited
/// successfully having run exactly one test (a test name that matches nothing passes too).
pub fn passed(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: the child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed;"),
        "{what}: the child test did not run:\n{stdout}\n{stderr}"
    );
    stdout
}

/// The values a child printed in lines `KEY=value` (what follows `KEY=`: libtest may print
/// its own text before it), in order.
pub fn reported_all<'a>(stdout: &'a str, key: &'a str) -> impl Iterator<Item = &'a str> {
    stdout.lines().filter_map(move |l| {
        l.match_indices(key)
            .find_map(|(at, _)| l[at + key.len()..].strip_prefix('='))
    })
}

/// The first value a child printed in a line `KEY=value` (see [`reported_all`]).
pub fn reported<'a>(stdout: &'a str, key: &'a str) -> Option<&'a str> {
    reported_all(stdout, key).next()
}

/// A child process, killed (`SIGKILL`) and reaped when dropped — also when the test panics.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` (a [`rerun`] of a child role) with its stdout piped and waits up to 30 s for
/// the line `KEY=value` it prints once it is ready (a server's address, say); the child, killed
/// when dropped, and the value. Fails the test if the child says nothing in time.
pub async fn spawn_reporting(mut cmd: Command, key: &'static str) -> (Killed, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Killed(child);
    let value = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| reported(&l, key).map(str::to_owned))
    });
    let value = tokio::time::timeout(PATIENCE, value)
        .await
        .unwrap_or_else(|_| panic!("the child did not print {key}= within {PATIENCE:?}"))
        .unwrap()
        .unwrap_or_else(|| panic!("the child ended without printing {key}="));
    (child, value)
}

/// The number a child printed in a line `KEY=n`; fails, showing what it printed, if there is
/// none.
pub fn reported_number(out: &Output, key: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    reported(&stdout, key)
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no {key}=<number> in:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}
