//! Run leases of a store kept in one database file ([`Sqlite`](super::Sqlite)), across the
//! processes that open it: an exclusive OS file lock ([`File::try_lock`], `flock` on Unix,
//! `LockFileEx` on Windows) on a lock file of the thread, held by an open file for as long as
//! the [`Lease`] lives.
//!
//! The kernel releases the lock when the file is closed — when the lease is dropped, and also
//! when the holding process dies, however it dies (`kill -9` included): there is no expiry to
//! wait for and no clock involved. Two leases of one thread conflict whether they are taken in
//! two processes or in one (the lock belongs to the open file, not to the process). The lock
//! file is opened close-on-exec, so processes a run starts (tools, hooks) do not inherit it.
//!
//! On Linux (x86-64 and AArch64), one lock file holds every thread's lease: `<database
//! file>.leases/threads`, empty, where a lease is an exclusive open-file-description record lock
//! (`fcntl(F_OFD_SETLK)`: the lock belongs to the open file, like `flock`, and is released when
//! it is closed or its process dies) on one byte of it, at an offset taken from the SHA-256 of
//! the thread id (63 bits: two ids share a byte with a probability of about 2^-63). Taking a
//! lease opens an existing file; it creates nothing, so it costs the same however many threads
//! were ever leased. Elsewhere the lock files are one empty file per thread ever leased, named
//! by the SHA-256 of the thread id (64 hex digits: any id, any length, is a valid file name).
//! Lock files are not removed (removing a lock file another process is about to lock would let
//! two processes lock two different files of one thread); they hold no data. (Processes of a
//! version of this crate before the shared lock file do not see the leases of a newer one: run
//! one version per database file.)

use std::{
    fs::{File, OpenOptions, TryLockError},
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

use tower_agent_core::{
    error::BoxError,
    store::{Lease, ThreadBusy},
};

/// The directory of the lock files of the database `db`.
pub(crate) fn dir(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".leases");
    PathBuf::from(name)
}

/// The lease of thread `id` of the database `db`: a [`ThreadBusy`] error when another lease of
/// it is held (in this process or another).
pub(crate) fn take(db: &Path, id: &str) -> Result<Lease, BoxError> {
    let dir = dir(db);
    let digest = Sha256::digest(id.as_bytes());
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    {
        let path = dir.join("threads");
        let open = || {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
        };
        let file = match open() {
            Ok(file) => Ok(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir).map_err(|e| {
                    format!("cannot make the lease directory `{}`: {e}", dir.display())
                })?;
                open()
            }
            Err(e) => Err(e),
        }
        .map_err(|e| format!("cannot open the lease file `{}`: {e}", path.display()))?;
        let mut offset = [0; 8];
        offset.copy_from_slice(&digest[..8]);
        let lock = nix::libc::flock {
            l_type: nix::libc::F_WRLCK as i16,
            l_whence: nix::libc::SEEK_SET as i16,
            l_start: (u64::from_be_bytes(offset) >> 1) as i64,
            l_len: 1,
            l_pid: 0,
        };
        return match nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_OFD_SETLK(&lock)) {
            Ok(_) => Ok(Lease::held_by(Held(file))),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {
                Err(Box::new(ThreadBusy::new(id)))
            }
            Err(e) => Err(format!("cannot lock the lease file `{}`: {e}", path.display()).into()),
        };
    }
    #[allow(unreachable_code)]
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot make the lease directory `{}`: {e}", dir.display()))?;
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join(name);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open the lease file `{}`: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Lease::held_by(Held(file))),
        Err(TryLockError::WouldBlock) => Err(Box::new(ThreadBusy::new(id))),
        Err(TryLockError::Error(e)) => {
            Err(format!("cannot lock the lease file `{}`: {e}", path.display()).into())
        }
    }
}

/// The locked file: closing it (on drop) releases the lock.
struct Held(#[allow(dead_code)] File);

#[cfg(test)]
mod tests {
    use super::*;

    /// Leasing many threads creates no file per thread (one shared lock file), and a leased
    /// thread is busy until its lease is dropped, whatever the others do.
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    #[test]
    fn one_lock_file_for_every_thread() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let leases: Vec<Lease> = (0..100)
            .map(|i| take(&db, &format!("thread {i}")).unwrap())
            .collect();
        assert_eq!(std::fs::read_dir(super::dir(&db)).unwrap().count(), 1);
        let busy = take(&db, "thread 7").err().unwrap();
        assert!(busy.downcast_ref::<ThreadBusy>().is_some(), "{busy}");
        drop(leases);
        let again = take(&db, "thread 7").unwrap();
        assert!(take(&db, "thread 7").is_err());
        drop(again);
        take(&db, "thread 7").unwrap();
    }
}
