//! Persistent hook processes: started once, fed one JSON line per event, answers routed back
//! by id. The line protocol is in the [module docs](super#persistent-hooks).

use std::{
    collections::HashMap,
    fmt,
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
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, ChildStdout},
    sync::oneshot,
};

use super::{
    config::Exec,
    process::{self, Failure, Reply, Report, Stdout},
};
use crate::process::ProcessTree;

/// How long a persistent process may take to exit once its stdin is closed, before its
/// process and everything it started are killed.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// A persistent handler's process, started on first use and restarted when it dies.
pub(crate) struct Persistent {
    exec: Exec,
    dir: PathBuf,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    next_id: AtomicU64,
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
            conn: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
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
                let line = format!("{{\"id\":{id},\"input\":{input}}}\n");
                let sent = {
                    let mut stdin = conn.stdin.lock().await;
                    match stdin.write_all(line.as_bytes()).await {
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
        let mut slot = self.conn.lock().await;
        if let Some(conn) = &*slot
            && !conn.shared.dead.load(Ordering::Acquire)
        {
            return Ok(Arc::clone(conn));
        }
        let conn = Arc::new(self.start()?);
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    fn start(&self) -> Result<Conn, Failure> {
        let mut std_cmd = process::command(&self.exec, &self.dir, "serve");
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
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(hook = %label, "persistent hook stderr: {line}");
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
    let mut lines = BufReader::new(stdout).lines();
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => route(&shared, &line, &label),
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
}
