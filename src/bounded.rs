//! Reading a small file that an outside party may have put in place (a settings file, a
//! `SKILL.md`, an `AGENTS.md`): never blocks on a FIFO and never reads more than a cap.

use std::{fmt, io, path::Path};

/// Why [`read_regular`] gave no bytes.
#[derive(Debug)]
pub(crate) enum ReadError {
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
pub(crate) fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
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
pub(crate) async fn read_regular_async(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || read_regular(&path, cap))
        .await
        .unwrap_or_else(|e| Err(ReadError::Io(io::Error::other(e))))
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
