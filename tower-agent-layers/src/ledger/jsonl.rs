//! [`JsonlLedger`]: a [`LedgerSink`] appending JSON lines to a file.

use super::*;

enum Command {
    Record(LedgerEntry),
    Flush(oneshot::Sender<()>),
}

/// A [`LedgerSink`] appending one JSON line per call to a file.
///
/// One writer task (spawned on the tokio runtime of the first call it records, and again if
/// that runtime went away) appends the entries in the order they were recorded, a batch at a
/// time, and flushes after each batch. The file is opened (created if missing, never
/// truncated) on the first write; if it can't be opened or written, the batch is dropped with
/// a warning and the next batch tries again. Recording outside a tokio runtime drops the entry
/// with a warning.
///
/// # Clone
///
/// Clones share the file and the writer.
#[derive(Clone)]
pub struct JsonlLedger {
    inner: Arc<JsonlInner>,
}

struct JsonlInner {
    path: PathBuf,
    tx: Mutex<Option<mpsc::UnboundedSender<Command>>>,
}

impl JsonlLedger {
    /// A ledger appending to the file at `path` (opened on the first write).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonlLedger {
            inner: Arc::new(JsonlInner {
                path: path.into(),
                tx: Mutex::new(None),
            }),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Sends `cmd` to the writer, starting one if there is none (or its runtime is gone).
    /// False if there is no runtime to start one on.
    fn send(&self, cmd: Command) -> bool {
        let mut tx = self.inner.tx.lock().unwrap_or_else(|p| p.into_inner());
        let cmd = match tx.as_ref() {
            Some(sender) => match sender.send(cmd) {
                Ok(()) => return true,
                // The writer's runtime went away: start another one.
                Err(mpsc::error::SendError(cmd)) => cmd,
            },
            None => cmd,
        };
        self.spawn_writer(&mut tx)
            .is_some_and(|sender| sender.send(cmd).is_ok())
    }

    fn spawn_writer<'a>(
        &self,
        tx: &'a mut Option<mpsc::UnboundedSender<Command>>,
    ) -> Option<&'a mpsc::UnboundedSender<Command>> {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            *tx = None;
            return None;
        };
        let (sender, rx) = mpsc::unbounded_channel();
        handle.spawn(jsonl_writer(self.inner.path.clone(), rx));
        Some(tx.insert(sender))
    }
}

impl fmt::Debug for JsonlLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonlLedger")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl LedgerSink for JsonlLedger {
    fn record(&self, entry: LedgerEntry) {
        if !self.send(Command::Record(entry)) {
            tracing::warn!(
                path = %self.inner.path.display(),
                "tool ledger entry dropped: no tokio runtime to write it"
            );
        }
    }

    fn flush(&self) -> BoxFuture<'static, ()> {
        let (tx, rx) = oneshot::channel();
        let sent = self.send(Command::Flush(tx));
        Box::pin(async move {
            if sent {
                let _ = rx.await;
            }
        })
    }
}

async fn jsonl_writer(path: PathBuf, mut rx: mpsc::UnboundedReceiver<Command>) {
    use tokio::io::AsyncWriteExt;

    let mut file: Option<tokio::fs::File> = None;
    let mut buf = Vec::new();
    let mut waiters = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut entries = 0usize;
        let mut next = Some(first);
        while let Some(cmd) = next {
            match cmd {
                Command::Record(entry) => match serde_json::to_writer(&mut buf, &entry) {
                    Ok(()) => {
                        buf.push(b'\n');
                        entries += 1;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "tool ledger entry could not be serialized")
                    }
                },
                Command::Flush(waiter) => waiters.push(waiter),
            }
            next = rx.try_recv().ok();
        }
        if !buf.is_empty() {
            let written = async {
                if file.is_none() {
                    let f = tokio::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                        .await?;
                    file = Some(f);
                }
                let f = file.as_mut().expect("opened above");
                f.write_all(&buf).await?;
                f.flush().await
            }
            .await;
            if let Err(err) = written {
                tracing::warn!(
                    path = %path.display(),
                    error = %err,
                    entries,
                    "could not write to the tool ledger; entries dropped"
                );
                file = None;
            }
            buf.clear();
        }
        for waiter in waiters.drain(..) {
            let _ = waiter.send(());
        }
    }
}
