//! Persistent hook processes: started once, fed one JSON line per event, answers routed back
//! by id. The line protocol is in the [module docs](super#persistent-hooks).
//!
//! What the process prints is data, never a reason to drop an answer: stdout and stderr are
//! read as bytes, one line at a time, decoded lossily (bytes that are not UTF-8 become U+FFFD),
//! and at most [`MAX_LINE`] bytes of a line are kept (the rest is read and dropped while
//! streaming, so a line without end costs no more memory than that).

use std::{
    collections::HashMap,
    fmt,
    io::Write as _,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use serde_json::Value;
use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, ChildStdout},
    sync::oneshot,
};

use super::{
    exec::Exec,
    reply::{Failure, Reply, Report, Stdout},
    spawn::{self, Dirs},
};
use tower_agent_os::process::ProcessTree;

/// How long a persistent process may take to exit once its stdin is closed, before its
/// process and everything it started are killed.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The most bytes kept of one line a persistent process prints, on stdout or stderr: 1 MiB,
/// as much as a one-shot hook's whole output. The rest of a longer line is read and dropped.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// The buffer of the stdout and stderr readers.
const READ_BUFFER: usize = 64 * 1024;

/// A persistent handler's process, started on first use and restarted when it dies.
pub(crate) struct Persistent {
    exec: Exec,
    /// The project directory: where the process runs, and what `CLAUDE_PROJECT_DIR` names.
    dir: PathBuf,
    /// The running process: looked up under a plain mutex, held for a pointer copy only, so
    /// an event takes no async lock (no task hand-off) to find its process.
    conn: Mutex<Option<Arc<Conn>>>,
    /// Taken to start a process, so concurrent events start one, not one each.
    starting: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    /// Extra environment variables (a plugin's).
    env: Arc<[(String, String)]>,
}

impl fmt::Debug for Persistent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Persistent")
            .field("exec", &self.exec)
            .finish_non_exhaustive()
    }
}

/// One running process.
struct Conn {
    stdin: tokio::sync::Mutex<ChildStdin>,
    shared: Arc<Shared>,
    /// Dropped with the connection: the reader then gives the process [`EXIT_GRACE`] to exit
    /// (its stdin is closed) and kills it with everything it started.
    _shutdown: oneshot::Sender<()>,
}

/// What the connection shares with its reader task.
struct Shared {
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Reply, String>>>>,
    dead: AtomicBool,
    tree: Mutex<ProcessTree>,
}

impl Shared {
    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Reply, String>>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Kills the process and everything it started; the reader then sees the end of stdout and
    /// fails what is pending.
    fn kill(&self) {
        self.dead.store(true, Ordering::Release);
        self.tree.lock().unwrap_or_else(|p| p.into_inner()).kill();
    }
}

/// Removes a pending answer when its waiter goes away (answered, timed out or dropped).
struct Waiting<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.shared.pending().remove(&self.id);
    }
}

impl Persistent {
    pub(crate) fn new(exec: Exec, dir: &Path) -> Self {
        Persistent {
            exec,
            dir: dir.to_path_buf(),
            conn: Mutex::new(None),
            starting: tokio::sync::Mutex::const_new(()),
            next_id: AtomicU64::new(1),
            env: Arc::default(),
        }
    }

    /// Extra environment variables for the process (a plugin's `CLAUDE_PLUGIN_ROOT` …).
    pub(crate) fn with_env(mut self, env: Arc<[(String, String)]>) -> Self {
        self.env = env;
        self
    }

    /// Sends one event (`input`: its JSON text) and waits for the answer, at most `timeout`
    /// in all. A process that dies before answering is restarted once (reported to
    /// `report`); a process that times out is killed (the next event starts a new one).
    pub(crate) async fn call(
        &self,
        input: &str,
        timeout: Duration,
        report: Report<'_>,
    ) -> Result<Reply, Failure> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut restarted = false;
        loop {
            let mut used: Option<Arc<Conn>> = None;
            let attempt = async {
                let conn = self.connection().await?;
                used = Some(Arc::clone(&conn));
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let (tx, rx) = oneshot::channel();
                conn.shared.pending().insert(id, tx);
                let _waiting = Waiting {
                    shared: &conn.shared,
                    id,
                };
                // One buffer of the line's size (one allocation), written with one `write`
                // while the pipe has room for it (64 KiB on Linux).
                let mut line = Vec::with_capacity(input.len() + 40);
                let _ = write!(line, "{{\"id\":{id},\"input\":");
                line.extend_from_slice(input.as_bytes());
                line.extend_from_slice(b"}\n");
                let sent = {
                    let mut stdin = conn.stdin.lock().await;
                    match stdin.write_all(&line).await {
                        Ok(()) => stdin.flush().await,
                        Err(e) => Err(e),
                    }
                };
                Ok::<_, Failure>(match sent {
                    Ok(()) => rx.await.ok(),
                    Err(_) => None,
                })
            };
            let result = tokio::time::timeout_at(deadline, attempt).await;
            match result {
                Err(_) => {
                    // Presumed hung: kill it; the next event starts a new one.
                    if let Some(conn) = used {
                        conn.shared.kill();
                    }
                    return Err(Failure::Timeout(timeout));
                }
                Ok(Err(failure)) => return Err(failure),
                Ok(Ok(Some(Ok(reply)))) => return Ok(reply),
                Ok(Ok(Some(Err(why)))) => {
                    return Err(Failure::Persistent(format!(
                        "answered with a bad line: {why}"
                    )));
                }
                Ok(Ok(None)) => {
                    if let Some(conn) = used {
                        conn.shared.kill();
                    }
                    if restarted {
                        return Err(Failure::Persistent(
                            "exited before answering, again after a restart".into(),
                        ));
                    }
                    restarted = true;
                    report.warn(format!(
                        "persistent hook `{}` exited before answering; restarting it",
                        self.exec.label()
                    ));
                }
            }
        }
    }

    /// The running process, started if there is none or it died.
    async fn connection(&self) -> Result<Arc<Conn>, Failure> {
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        let _starting = self.starting.lock().await;
        // Another event may have started it while this one waited.
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        let conn = Arc::new(self.start()?);
        *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// The running process, if there is one and it is alive.
    fn live(&self) -> Option<Arc<Conn>> {
        let slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .filter(|conn| !conn.shared.dead.load(Ordering::Acquire))
            .map(Arc::clone)
    }

    fn start(&self) -> Result<Conn, Failure> {
        // Shared by every run: started in the project directory, not in a run's.
        let mut std_cmd = spawn::command(&self.exec, Dirs::project(&self.dir), "serve")
            .map_err(|e| Failure::Io(format!("cannot start `{}`: {e}", self.exec.label())))?;
        std_cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut tree = ProcessTree::prepare(&mut std_cmd);
        let mut cmd = tokio::process::Command::from(std_cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            let why = format!("cannot start `{}`: {e}", self.exec.label());
            match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                    Failure::Missing(why)
                }
                _ => Failure::Io(why),
            }
        })?;
        tracing::debug!(hook = %self.exec.label(), pid = ?child.id(), "persistent hook started");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        match &child.stderr {
            Some(stderr) => tree.started(child.id(), &[&stdin, &stdout, stderr]),
            None => tree.started(child.id(), &[&stdin, &stdout]),
        }
        let shared = Arc::new(Shared {
            pending: Mutex::default(),
            dead: AtomicBool::new(false),
            tree: Mutex::new(tree),
        });
        if let Some(stderr) = child.stderr.take() {
            let label = self.exec.label();
            tokio::spawn(async move {
                // Read to the end, whatever it holds: a reader that stopped would close the
                // pipe, and the process would die of SIGPIPE on its next write.
                let mut stderr = BufReader::with_capacity(READ_BUFFER, stderr);
                let mut line = Vec::new();
                while let Ok(Some(dropped)) = read_line(&mut stderr, &mut line).await {
                    let text = String::from_utf8_lossy(&line);
                    if dropped > 0 {
                        tracing::debug!(hook = %label, "persistent hook stderr (a line of {} bytes, cut): {text}", line.len() + dropped);
                    } else {
                        tracing::debug!(hook = %label, "persistent hook stderr: {text}");
                    }
                }
            });
        }
        let (shutdown, on_shutdown) = oneshot::channel();
        tokio::spawn(read_answers(
            stdout,
            child,
            Arc::clone(&shared),
            on_shutdown,
            self.exec.label(),
        ));
        Ok(Conn {
            stdin: tokio::sync::Mutex::new(stdin),
            shared,
            _shutdown: shutdown,
        })
    }
}

/// Routes the answers of a process to their waiters until its stdout ends (it exited or was
/// killed) or its connection is dropped; then fails what is pending, kills the process group
/// and reaps the process.
async fn read_answers(
    stdout: ChildStdout,
    mut child: Child,
    shared: Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
    label: String,
) {
    let mut stdout = BufReader::with_capacity(READ_BUFFER, stdout);
    let mut line = Vec::new();
    loop {
        tokio::select! {
            read = read_line(&mut stdout, &mut line) => match read {
                Ok(Some(0)) => route(&shared, &String::from_utf8_lossy(&line), &label),
                Ok(Some(dropped)) => too_long(&shared, &line, line.len() + dropped, &label),
                Ok(None) | Err(_) => break,
            },
            _ = &mut shutdown => {
                // Stdin was closed with the connection: let the process finish.
                let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
                break;
            }
        }
    }
    shared.dead.store(true, Ordering::Release);
    // Dropping the senders tells the waiters the process is gone.
    shared.pending().clear();
    shared.kill();
    let _ = child.start_kill();
    let _ = child.wait().await;
    tracing::debug!(hook = %label, "persistent hook ended");
}

/// Reads one line into `line` (without its `\n`), keeping at most [`MAX_LINE`] bytes; the
/// rest of a longer line is read and dropped. `Some(n)`: a line, `n` bytes of it dropped;
/// `None`: the end of the stream.
///
/// Not cancel-safe: a line being read is lost if the future is dropped.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    line.clear();
    let read = (&mut *reader)
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', line)
        .await?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        return Ok(Some(0));
    }
    if line.len() <= MAX_LINE {
        // The last line, without a newline.
        return Ok(Some(0));
    }
    // Too long: keep the first MAX_LINE bytes, drop the rest up to the newline in slices.
    let mut dropped = line.len() - MAX_LINE;
    line.truncate(MAX_LINE);
    let mut rest = Vec::with_capacity(READ_BUFFER);
    loop {
        rest.clear();
        let read = (&mut *reader)
            .take(READ_BUFFER as u64)
            .read_until(b'\n', &mut rest)
            .await?;
        if read == 0 {
            return Ok(Some(dropped));
        }
        if rest.last() == Some(&b'\n') {
            return Ok(Some(dropped + read - 1));
        }
        dropped += read;
    }
}

/// A stdout line longer than [`MAX_LINE`]: dropped. If it starts like an answer
/// (`{"id": N`), event `N` fails (a fail-closed hook then denies); else it is ignored.
fn too_long(shared: &Shared, kept: &[u8], len: usize, label: &str) {
    let why = format!("a line of {len} bytes, longer than the {MAX_LINE} bytes an answer may have");
    match answer_id(kept).and_then(|id| shared.pending().remove(&id).map(|tx| (id, tx))) {
        Some((id, tx)) => {
            tracing::warn!(hook = %label, id, "persistent hook answered with {why}");
            let _ = tx.send(Err(why));
        }
        None => tracing::warn!(hook = %label, "persistent hook printed {why}; ignored"),
    }
}

/// `N` if `line` starts with `{"id": N` (whitespace allowed), as an answer does.
fn answer_id(line: &[u8]) -> Option<u64> {
    let rest = line.trim_ascii_start().strip_prefix(b"{")?;
    let rest = rest.trim_ascii_start().strip_prefix(b"\"id\"")?;
    let rest = rest.trim_ascii_start().strip_prefix(b":")?;
    let rest = rest.trim_ascii_start();
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Sends one answer line to its waiter.
fn route(shared: &Shared, line: &str, label: &str) {
    if line.trim().is_empty() {
        return;
    }
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!(hook = %label, "persistent hook printed a line that is not JSON ({e}); ignored");
            return;
        }
    };
    let Some(id) = value.get("id").and_then(Value::as_u64) else {
        tracing::warn!(hook = %label, "persistent hook answered without a numeric `id`; ignored");
        return;
    };
    let Some(tx) = shared.pending().remove(&id) else {
        tracing::debug!(hook = %label, id, "answer to an event nobody waits for any more");
        return;
    };
    let _ = tx.send(parse_answer(value));
}

fn parse_answer(mut value: Value) -> Result<Reply, String> {
    let code = match value.get("exit") {
        None | Some(Value::Null) => 0,
        Some(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("`exit` must be an integer, not {n}"))?,
    };
    let stderr = match value.get("stderr") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("`stderr` must be a string, not {other}")),
    };
    let output = value
        .as_object_mut()
        .and_then(|o| o.remove("output"))
        .unwrap_or(Value::Null);
    Ok(Reply {
        code: Some(code),
        stdout: Stdout::Json(output),
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        let reply = parse_answer(serde_json::json!({"id": 1, "exit": 2, "stderr": "no"})).unwrap();
        assert_eq!(reply.code, Some(2));
        assert_eq!(reply.stderr, "no");
        assert!(matches!(reply.stdout, Stdout::Json(Value::Null)));
        let reply = parse_answer(serde_json::json!({"id": 1, "output": {"a": 1}})).unwrap();
        assert_eq!(reply.code, Some(0));
        assert!(matches!(reply.stdout, Stdout::Json(Value::Object(_))));
        assert!(parse_answer(serde_json::json!({"id": 1, "exit": "x"})).is_err());
    }

    async fn lines_of(bytes: &[u8]) -> Vec<(Vec<u8>, usize)> {
        let mut reader = BufReader::with_capacity(7, bytes);
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while let Some(dropped) = read_line(&mut reader, &mut line).await.unwrap() {
            lines.push((line.clone(), dropped));
        }
        lines
    }

    #[tokio::test]
    async fn lines_are_bytes_and_capped() {
        let lines = lines_of(b"a\n\xff\xfe\n\nlast").await;
        assert_eq!(
            lines,
            [
                (b"a".to_vec(), 0),
                (b"\xff\xfe".to_vec(), 0),
                (Vec::new(), 0),
                (b"last".to_vec(), 0)
            ]
        );
        // Exactly MAX_LINE bytes: kept whole; one more: cut, the rest counted.
        let mut input = vec![b'x'; MAX_LINE];
        input.push(b'\n');
        input.extend(vec![b'y'; MAX_LINE + 3 * READ_BUFFER + 5]);
        input.extend(b"\nafter\n");
        let lines = lines_of(&input).await;
        assert_eq!(lines.len(), 3);
        assert_eq!((lines[0].0.len(), lines[0].1), (MAX_LINE, 0));
        assert_eq!(
            (lines[1].0.len(), lines[1].1),
            (MAX_LINE, 3 * READ_BUFFER + 5)
        );
        assert_eq!(lines[2], (b"after".to_vec(), 0));
        // Too long and never ended.
        let lines = lines_of(&vec![b'z'; MAX_LINE + 10]).await;
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].0.len(), lines[0].1), (MAX_LINE, 10));
    }

    #[test]
    fn answer_ids() {
        assert_eq!(answer_id(br#"{"id":7,"exit":2"#), Some(7));
        assert_eq!(answer_id(b" { \"id\" :  12 , "), Some(12));
        assert_eq!(answer_id(br#"{"exit":2,"id":7}"#), None);
        assert_eq!(answer_id(br#"{"id":"7"}"#), None);
        assert_eq!(answer_id(b"{\"id\":99999999999999999999999"), None);
        assert_eq!(answer_id(b""), None);
    }

    mod fuzz {
        use proptest::prelude::*;

        use super::super::*;

        #[derive(Debug, Clone)]
        enum Segment {
            /// Any bytes, newlines included.
            Bytes(Vec<u8>),
            /// A line that is not an answer to a pending event.
            Junk(&'static str),
            /// A well-formed answer, on its own line.
            Answer(u64, i32),
        }

        fn segment() -> impl Strategy<Value = Segment> {
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..300).prop_map(Segment::Bytes),
                prop::sample::select(vec![
                    "{\"id\":",
                    "{\"id\":100,\"exit\":2}",
                    "{\"id\":-1,\"exit\":2}",
                    "{\"id\":1.5,\"exit\":2}",
                    "{\"id\":\"1\",\"exit\":2}",
                    "{\"exit\":2}",
                    "[1,2,3]",
                    "null",
                    "\u{feff}{",
                    "{\"id\":18446744073709551616}",
                    "\u{0}\u{7f}",
                ])
                .prop_map(Segment::Junk),
                (1..=4u64, prop_oneof![Just(0), Just(2), any::<i32>()])
                    .prop_map(|(id, exit)| Segment::Answer(id, exit)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

            /// Whatever a persistent hook prints around its answers, read in any chunks: no
            /// panic, and each pending event gets the first answer for its id.
            #[test]
            fn line_protocol_routes_answers_among_garbage(
                segments in prop::collection::vec(segment(), 0..24),
                chunk in 1usize..64,
            ) {
                let mut bytes = Vec::new();
                let mut expected = HashMap::new();
                for segment in segments {
                    match segment {
                        Segment::Bytes(b) => bytes.extend(b),
                        Segment::Junk(j) => {
                            bytes.push(b'\n');
                            bytes.extend(j.as_bytes());
                            bytes.push(b'\n');
                        }
                        Segment::Answer(id, exit) => {
                            bytes.push(b'\n');
                            bytes.extend(format!("{{\"id\":{id},\"exit\":{exit},\"stderr\":\"\\u00ff\"}}\n").as_bytes());
                            expected.entry(id).or_insert(exit);
                        }
                    }
                }
                let shared = Shared {
                    pending: Mutex::default(),
                    dead: AtomicBool::new(false),
                    // Never started: dropping it sweeps nothing.
                    tree: Mutex::new(tower_agent_os::process::ProcessTree::prepare(&mut std::process::Command::new("true"))),
                };
                let mut waiting = HashMap::new();
                for id in 1..=4 {
                    let (tx, rx) = oneshot::channel();
                    shared.pending().insert(id, tx);
                    waiting.insert(id, rx);
                }
                let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                rt.block_on(async {
                    let mut reader = BufReader::with_capacity(chunk, &bytes[..]);
                    let mut line = Vec::new();
                    while let Some(dropped) = read_line(&mut reader, &mut line).await.unwrap() {
                        assert!(line.len() <= MAX_LINE);
                        match dropped {
                            0 => route(&shared, &String::from_utf8_lossy(&line), "fuzz"),
                            n => too_long(&shared, &line, line.len() + n, "fuzz"),
                        }
                    }
                });
                for (id, mut rx) in waiting {
                    match (expected.get(&id), rx.try_recv()) {
                        (Some(&exit), Ok(Ok(reply))) => {
                            prop_assert_eq!(reply.code, Some(exit));
                            prop_assert_eq!(reply.stderr, "\u{ff}");
                        }
                        (None, Err(oneshot::error::TryRecvError::Empty)) => {}
                        (want, got) => prop_assert!(false, "event {}: wanted {:?}, got {:?}", id, want, got),
                    }
                }
            }
        }
    }
}
