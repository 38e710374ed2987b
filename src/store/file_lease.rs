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
//! The lock files live in `<database file>.leases/`, one empty file per thread ever leased,
//! named by the SHA-256 of the thread id (64 hex digits: any id, any length, is a valid file
//! name). They are not removed (removing a lock file another process is about to lock would let
//! two processes lock two different files of one thread); they hold no data.

use std::{
    fs::{File, OpenOptions, TryLockError},
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

use super::{Lease, ThreadBusy};
use crate::error::BoxError;

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
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot make the lease directory `{}`: {e}", dir.display()))?;
    let digest = Sha256::digest(id.as_bytes());
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
