//! `exec`: a shell command run in the root, its process tree killed at the timeout, its
//! output captured up to a limit.

use std::{collections::VecDeque, io, path::Path, process::Stdio, time::Duration};

use super::{EXIT_GRACE, resolve::root_error};
use crate::filesystem::backend::{ExecOptions, ExecOutput, FsError, FsErrorKind};
use tower_agent_os::process::ProcessTree;

pub(super) async fn exec(
    root: &Path,
    command: &str,
    options: ExecOptions,
) -> Result<ExecOutput, FsError> {
    use tokio::io::AsyncReadExt;

    if command.trim().is_empty() {
        return Err(FsError::new(
            FsErrorKind::InvalidInput,
            "the command is empty",
        ));
    }
    let root = tokio::fs::canonicalize(root)
        .await
        .map_err(|e| root_error(root, e))?;
    let mut cmd = tokio::process::Command::new("sh");
    // NOTE: the redirection is on a line of its own so that sh reports syntax errors of the
    // command (parsed line by line) on the merged output too.
    cmd.arg("-c")
        .arg(format!("exec 2>&1\n{command}"))
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true);
    // Kills the tree when this future is dropped, however it ends.
    let mut tree = ProcessTree::prepare(cmd.as_std_mut());
    let mut child = cmd.spawn().map_err(|e| {
        FsError::new(FsErrorKind::Io, format!("cannot run `sh`: {e}")).with_source(e)
    })?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    tree.started(child.id(), &[&stdout]);
    let mut capture = Capture::new(options.max_output);

    let run = async {
        let mut buf = vec![0u8; 8192];
        let mut eof = false;
        let status = loop {
            tokio::select! {
                read = stdout.read(&mut buf), if !eof => match read {
                    Ok(0) => eof = true,
                    Ok(n) => capture.push(&buf[..n]),
                    Err(e) => return Err(exec_io_error(e)),
                },
                status = child.wait() => break status.map_err(exec_io_error)?,
            }
        };
        // Whatever the shell left running would keep the output open.
        tree.kill();
        if !eof {
            let _ = tokio::time::timeout(EXIT_GRACE, async {
                while let Ok(n) = stdout.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    capture.push(&buf[..n]);
                }
            })
            .await;
        }
        Ok(status)
    };
    let status = match tokio::time::timeout(options.timeout, run).await {
        Ok(status) => status?,
        Err(_) => {
            tree.kill();
            // Kills the shell (again) and reaps it.
            let _ = child.kill().await;
            return Err(FsError::new(
                FsErrorKind::Timeout,
                format!(
                    "command timed out after {}; it and the processes it started were killed",
                    format_duration(options.timeout)
                ),
            ));
        }
    };
    let (output, truncated) = capture.finish();
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    Ok(ExecOutput::new(output, status.code())
        .with_signal(signal)
        .with_truncated(truncated))
}

fn exec_io_error(e: io::Error) -> FsError {
    FsError::new(FsErrorKind::Io, format!("cannot run the command: {e}")).with_source(e)
}

/// `2s`, `1.5s` or `300ms`.
pub(in crate::filesystem) fn format_duration(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The output of a command, capped: the first and the last bytes, and how many characters
/// there were.
struct Capture {
    max_chars: usize,
    /// Bytes kept at each end: enough for `max_chars` characters of up to 4 bytes.
    keep: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    chars: usize,
}

impl Capture {
    fn new(max_chars: usize) -> Self {
        Capture {
            max_chars,
            keep: max_chars.saturating_mul(4).max(4),
            head: Vec::new(),
            tail: VecDeque::new(),
            chars: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        // Count characters as the bytes that do not continue a UTF-8 sequence.
        self.chars += bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
        let room = self.keep - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= self.keep {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.keep..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.keep);
        self.tail.drain(..excess);
    }

    /// The output, and whether some was left out.
    fn finish(self) -> (String, bool) {
        let head = String::from_utf8_lossy(&self.head).into_owned();
        if self.tail.is_empty() && head.chars().count() <= self.max_chars {
            return (head, false);
        }
        let tail = if self.tail.is_empty() {
            head.clone()
        } else {
            let tail: Vec<u8> = self.tail.into_iter().collect();
            // Drop a character cut in half at the start.
            let start = tail
                .iter()
                .position(|&b| (b & 0xC0) != 0x80)
                .unwrap_or(tail.len());
            String::from_utf8_lossy(&tail[start..]).into_owned()
        };
        let first_n = self.max_chars / 2;
        let last_n = self.max_chars - first_n;
        let first: String = head.chars().take(first_n).collect();
        let tail_chars = tail.chars().count();
        let last: String = tail
            .chars()
            .skip(tail_chars.saturating_sub(last_n))
            .collect();
        let omitted = self
            .chars
            .saturating_sub(first.chars().count() + last.chars().count());
        (
            format!("{first}\n\n... (truncated {omitted} characters) ...\n\n{last}"),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_short_output() {
        let mut c = Capture::new(10);
        c.push(b"hello");
        assert_eq!(c.finish(), ("hello".to_owned(), false));
    }

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut c = Capture::new(10);
        for chunk in "abcdefghijklmnopqrstuvwxyz".as_bytes().chunks(3) {
            c.push(chunk);
        }
        let (out, truncated) = c.finish();
        assert!(truncated);
        assert_eq!(out, "abcde\n\n... (truncated 16 characters) ...\n\nvwxyz");
    }

    #[test]
    fn capture_overflowing_keeps_the_true_tail() {
        let mut c = Capture::new(4);
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        c.push(text.as_bytes());
        let (out, truncated) = c.finish();
        assert!(truncated);
        assert!(out.starts_with("ab\n"), "{out}");
        assert!(out.ends_with(&text[998..]), "{out}");
        assert!(out.contains("truncated 996 characters"), "{out}");
    }

    #[test]
    fn capture_counts_multibyte_characters() {
        let mut c = Capture::new(4);
        c.push("ééééé€€€€€".as_bytes());
        let (out, _) = c.finish();
        assert_eq!(out, "éé\n\n... (truncated 6 characters) ...\n\n€€");
    }

    #[test]
    fn durations() {
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }
}
