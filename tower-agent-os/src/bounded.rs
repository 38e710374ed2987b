//! Reading a small file that an outside party may have put in place (a settings file, a
//! `SKILL.md`, an `AGENTS.md`): never blocks on a FIFO and never reads more than a cap.
//!
//! ```
//! use tower_agent_os::bounded::{FileCache, ReadError, read_regular};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let settings = dir.path().join("settings.json");
//! std::fs::write(&settings, r#"{"hooks": {}}"#)?;
//!
//! // Within the cap: the bytes; past it: refused, with the cap it broke.
//! assert_eq!(read_regular(&settings, 1024).unwrap(), br#"{"hooks": {}}"#);
//! assert!(matches!(read_regular(&settings, 4), Err(ReadError::TooLarge(4))));
//! // A directory (or a FIFO, a socket, a device) is refused without blocking.
//! assert!(matches!(read_regular(dir.path(), 1024), Err(ReadError::NotRegular)));
//!
//! // A cache: a file read again is served as it was while its stamp is unchanged.
//! let cache = FileCache::default();
//! let bytes = cache.read(&settings, 1024).await.unwrap();
//! assert_eq!(&bytes[..], br#"{"hooks": {}}"#);
//! std::fs::write(&settings, "{}")?;
//! assert_eq!(&cache.read(&settings, 1024).await.unwrap()[..], b"{}");
//! # Ok(())
//! # }
//! ```

use std::{fmt, io, path::Path, sync::Arc};

/// Why [`read_regular`] gave no bytes.
#[derive(Debug)]
pub enum ReadError {
    /// There is no such file.
    NotFound,
    /// A FIFO, socket, device or directory: refused without blocking.
    NotRegular,
    /// Larger than the cap (in bytes).
    TooLarge(u64),
    /// Any other failure.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("it does not exist"),
            ReadError::NotRegular => f.write_str("not a regular file"),
            ReadError::TooLarge(cap) if cap % (1 << 20) == 0 => {
                write!(f, "larger than {} MiB", cap >> 20)
            }
            ReadError::TooLarge(cap) => write!(f, "larger than {} KiB", cap.div_ceil(1024)),
            ReadError::Io(e) => write!(f, "cannot read it: {e}"),
        }
    }
}

/// The bytes of the regular file at `path` (symbolic links followed), at most `cap` of them.
///
/// The file is opened non-blocking and its type checked on the open descriptor, so there is
/// no gap between the check and the read: a FIFO (or a file swapped for one) is refused at
/// once instead of blocking the thread forever. At most `cap + 1` bytes are read.
pub fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    use io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    }
    let file = options.open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ReadError::NotFound,
        _ => ReadError::Io(e),
    })?;
    if !file.metadata().map_err(ReadError::Io)?.is_file() {
        return Err(ReadError::NotRegular);
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge(cap));
    }
    Ok(bytes)
}

/// [`read_regular`] on the blocking pool.
pub async fn read_regular_async(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || read_regular(&path, cap))
        .await
        .unwrap_or_else(|e| Err(ReadError::Io(io::Error::other(e))))
}

/// Files that have not changed since they were last read within this long are served from
/// a [`FileCache`]; one changed more recently is read again (an edit in the same timestamp
/// tick could leave its stamp as it was; 2 s covers the coarsest file system clocks).
pub const RACY_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// The most files a [`FileCache`] keeps (beyond it, the cache is emptied and refilled).
pub const MAX_CACHED_FILES: usize = 256;

/// What identifies one version of a file: when none of these changed, neither did its
/// bytes (an edit changes the status-change time, which no one can set back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of the file `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Stamp {
                dev: meta.dev(),
                ino: meta.ino(),
                len: meta.len(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                ctime: (meta.ctime(), meta.ctime_nsec()),
            }
        }
        #[cfg(not(unix))]
        {
            let t = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .unwrap_or_default();
            let t = (t.as_secs() as i64, i64::from(t.subsec_nanos()));
            Stamp {
                dev: 0,
                ino: 0,
                len: meta.len(),
                mtime: t,
                ctime: t,
            }
        }
    }

    /// Whether the file changed within [`RACY_WINDOW`] of now (or in the future).
    pub fn is_recent(&self) -> bool {
        let changed = self.mtime.max(self.ctime);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let now = (now.as_secs() as i64, i64::from(now.subsec_nanos()));
        let window = RACY_WINDOW.as_secs() as i64;
        (changed.0.saturating_add(window), changed.1) >= now
    }
}

/// The bytes of files as last read, keyed by path and [`Stamp`]: a file that did not change
/// is not read again (a `stat` on the calling thread instead of a read on the blocking
/// pool). At most [`MAX_CACHED_FILES`] files, each at most the cap it was read with.
#[derive(Debug, Default)]
pub struct FileCache {
    entries: std::sync::Mutex<Files>,
    /// Directory listings (what the caller made of them), keyed the same way.
    dirs: std::sync::Mutex<Listings>,
}

type Files = std::collections::HashMap<std::path::PathBuf, (Stamp, Arc<[u8]>)>;
type Listings = std::collections::HashMap<std::path::PathBuf, (Stamp, Arc<[std::path::PathBuf]>)>;

impl FileCache {
    fn entries(&self) -> std::sync::MutexGuard<'_, Files> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The listing kept for the directory `dir` of this stamp.
    pub fn listing(&self, dir: &Path, stamp: Stamp) -> Option<Arc<[std::path::PathBuf]>> {
        let dirs = self
            .dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        dirs.get(dir)
            .filter(|(cached, _)| *cached == stamp)
            .map(|(_, list)| Arc::clone(list))
    }

    /// Keeps `list` for the directory `dir` of stamp `stamp` (taken before listing it),
    /// unless it changed too recently to trust the stamp.
    pub fn keep_listing(&self, dir: &Path, stamp: Stamp, list: Arc<[std::path::PathBuf]>) {
        if stamp.is_recent() {
            return;
        }
        let mut dirs = self
            .dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if dirs.len() >= MAX_CACHED_FILES && !dirs.contains_key(dir) {
            dirs.clear();
        }
        dirs.insert(dir.to_owned(), (stamp, list));
    }

    /// [`read_regular`], from the cache when the file's stamp is the one it was read with.
    pub async fn read(&self, path: &Path, cap: u64) -> Result<Arc<[u8]>, ReadError> {
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::NotFound),
            Err(e) => return Err(ReadError::Io(e)),
        };
        if !meta.is_file() {
            return Err(ReadError::NotRegular);
        }
        let stamp = Stamp::of(&meta);
        if let Some((cached, bytes)) = self.entries().get(path)
            && *cached == stamp
        {
            return Ok(Arc::clone(bytes));
        }
        if meta.len() > cap {
            return Err(ReadError::TooLarge(cap));
        }
        let bytes: Arc<[u8]> = read_regular_async(path, cap).await?.into();
        // A file changed just now may change again within its timestamp tick unseen.
        if !stamp.is_recent() {
            let mut entries = self.entries();
            if entries.len() >= MAX_CACHED_FILES && !entries.contains_key(path) {
                entries.clear();
            }
            entries.insert(path.to_owned(), (stamp, Arc::clone(&bytes)));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_kinds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"12345");
        assert!(matches!(
            read_regular(&file, 4),
            Err(ReadError::TooLarge(4))
        ));
        assert!(matches!(
            read_regular(&dir.path().join("none"), 5),
            Err(ReadError::NotFound)
        ));
        assert_eq!(
            ReadError::TooLarge(1 << 20).to_string(),
            "larger than 1 MiB"
        );
        assert_eq!(
            ReadError::TooLarge(65_536).to_string(),
            "larger than 64 KiB"
        );
    }
}
