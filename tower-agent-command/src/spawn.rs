//! A process handler's run: its command (project-dir variables, exec or shell form), spawned
//! with its input on stdin, its stdout and stderr captured (capped), killed with everything
//! it started after its timeout or once it exits; and the blocking run of a describe step.

use std::{
    io,
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::{
    exec::Exec,
    reply::{Failure, Reply, Stdout, humantime},
};
use tower_agent_os::process::ProcessTree;

/// Where a handler runs, and the project it is told of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dirs<'a> {
    /// The working directory of a process handler (the `cwd` of its input).
    pub(crate) cwd: &'a Path,
    /// The project directory: `CLAUDE_PROJECT_DIR` / `TOWER_AGENT_PROJECT_DIR`, also
    /// substituted in exec form; the root of an `agent` handler's file tools.
    pub(crate) project: &'a Path,
    /// Whether `CLAUDE_PROJECT_DIR` is set (Codex sets no such variable for its hooks;
    /// `TOWER_AGENT_PROJECT_DIR` always is).
    pub(crate) claude_project_dir: bool,
}

impl<'a> Dirs<'a> {
    /// Running in the project directory itself (a persistent process, a describe step).
    pub(crate) fn project(project: &'a Path) -> Self {
        Dirs {
            cwd: project,
            project,
            claude_project_dir: true,
        }
    }
}

/// The most bytes kept of a hook's stdout or stderr (the rest is read and dropped).
const MAX_CAPTURE: usize = 1 << 20;
/// How long a hook's stdout and stderr are still read once it has exited and what it left
/// running was killed: its answer is what it wrote by then.
const EXIT_GRACE: Duration = Duration::from_millis(100);

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
    if dirs.claude_project_dir {
        cmd.env("CLAUDE_PROJECT_DIR", dirs.project);
    }
    cmd.current_dir(dirs.cwd)
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
/// [`tower_agent_os::process`]) after `timeout` or when the returned future is dropped. When the handler
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
        let mut pipes: Vec<&dyn tower_agent_os::process::Pipe> = Vec::new();
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
        let mut pipes: Vec<&dyn tower_agent_os::process::Pipe> = Vec::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_in_exec_form() {
        assert_eq!(
            substitute("${CLAUDE_PROJECT_DIR}/x ${TOWER_AGENT_PROJECT_DIR}", "/p"),
            "/p/x /p"
        );
    }
}
