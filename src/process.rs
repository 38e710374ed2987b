//! Child-process helpers shared by the filesystem's `execute` and the command hooks.

/// Kills a process group (`SIGKILL`) when asked or dropped, once.
pub(crate) struct ProcessGroup {
    pgid: Option<u32>,
}

impl ProcessGroup {
    pub(crate) fn new(pgid: Option<u32>) -> Self {
        ProcessGroup { pgid }
    }

    pub(crate) fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            #[cfg(unix)]
            if let Ok(pgid) = i32::try_from(pgid) {
                use nix::{sys::signal, unistd::Pid};
                // ESRCH (the group is gone already) is fine.
                let _ = signal::killpg(Pid::from_raw(pgid), signal::Signal::SIGKILL);
            }
            #[cfg(not(unix))]
            let _ = pgid;
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}
