//! Streamed lines: a file read line by line in a fixed buffer, long lines cut and UTF-8
//! checked across reads.

use std::{
    io::{self, BufRead, Read},
    str::Utf8Error,
};

use super::READ_BUFFER;

/// Why [`next_line`] failed.
pub(super) enum LineError {
    Io(io::Error),
    /// The bytes are not UTF-8 (only when asked to check).
    Utf8(Utf8Error),
}

/// Whether `b` starts a character (does not continue a UTF-8 sequence).
fn starts_char(b: u8) -> bool {
    (b & 0xC0) != 0x80
}

/// How many characters `bytes` holds, counted as the bytes that do not continue a UTF-8
/// sequence (valid runs are counted by `str::chars`, which is fast).
fn count_chars(bytes: &[u8]) -> usize {
    bytes
        .utf8_chunks()
        .map(|c| {
            c.valid().chars().count() + c.invalid().iter().filter(|&&b| starts_char(b)).count()
        })
        .sum()
}

/// Reads the next line of `reader` into `keep`: at most its first `max_chars` characters (and
/// at most 4 bytes a character), then its `\n` if it has one. The rest of a longer line is
/// read in pieces of at most [`READ_BUFFER`] bytes and dropped, so memory stays bounded
/// whatever the line's length. Characters are counted as the bytes that do not continue a
/// UTF-8 sequence.
///
/// Returns `None` at the end of the input, else how many characters were dropped (a `\r`
/// before the `\n` not counted). With `utf8`, the line is checked to be UTF-8 as it is read.
pub(super) fn next_line(
    reader: &mut impl BufRead,
    keep: &mut Vec<u8>,
    max_chars: usize,
    mut utf8: Option<&mut Utf8Check>,
) -> Result<Option<usize>, LineError> {
    keep.clear();
    let max_bytes = max_chars.saturating_mul(4);
    let (mut any, mut newline, mut eof, mut omitted) = (false, false, false, 0usize);
    let mut last = None;
    // What fits, read at once (`read_until` finds the newline fast).
    if max_bytes > 0 {
        let n = (&mut *reader)
            .take(max_bytes as u64)
            .read_until(b'\n', keep)
            .map_err(LineError::Io)?;
        any = n > 0;
        newline = keep.last() == Some(&b'\n');
        if newline {
            keep.pop();
        } else {
            eof = n < max_bytes;
        }
        if let Some(check) = utf8.as_deref_mut() {
            check.feed(keep).map_err(LineError::Utf8)?;
        }
        last = keep.last().copied();
        // Cut at `max_chars` characters.
        if keep.len() > max_chars {
            let mut chars = 0;
            let cut = keep
                .iter()
                .position(|&b| {
                    let start = starts_char(b);
                    if start {
                        chars += 1;
                    }
                    start && chars > max_chars
                })
                .unwrap_or(keep.len());
            omitted += count_chars(&keep[cut..]);
            keep.truncate(cut);
        }
    }
    // The rest of a longer line, dropped.
    if !newline && !eof {
        let mut rest = Vec::new();
        loop {
            rest.clear();
            let n = (&mut *reader)
                .take(READ_BUFFER as u64)
                .read_until(b'\n', &mut rest)
                .map_err(LineError::Io)?;
            if n == 0 {
                break;
            }
            any = true;
            newline = rest.last() == Some(&b'\n');
            let body = if newline { &rest[..n - 1] } else { &rest[..] };
            if let Some(check) = utf8.as_deref_mut() {
                check.feed(body).map_err(LineError::Utf8)?;
            }
            omitted += count_chars(body);
            if let Some(&b) = body.last() {
                last = Some(b);
            }
            if newline {
                break;
            }
        }
    }
    if !any {
        return Ok(None);
    }
    if let Some(check) = utf8 {
        check.finish().map_err(LineError::Utf8)?;
    }
    if newline {
        if omitted > 0 && last == Some(b'\r') {
            omitted -= 1;
        }
        keep.push(b'\n');
    }
    Ok(Some(omitted))
}

/// Checks that bytes fed piece by piece are UTF-8 (a character may be split between pieces).
#[derive(Debug, Default)]
pub(super) struct Utf8Check {
    pending: [u8; 4],
    len: usize,
}

impl Utf8Check {
    pub(super) fn feed(&mut self, mut bytes: &[u8]) -> Result<(), Utf8Error> {
        while self.len > 0 {
            let Some((&b, rest)) = bytes.split_first() else {
                return Ok(());
            };
            self.pending[self.len] = b;
            self.len += 1;
            bytes = rest;
            match std::str::from_utf8(&self.pending[..self.len]) {
                Ok(_) => self.len = 0,
                // Still incomplete (at most 3 bytes: a 4-byte sequence is complete or wrong).
                Err(e) if e.error_len().is_none() => {}
                Err(e) => return Err(e),
            }
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_none() => {
                let tail = &bytes[e.valid_up_to()..];
                self.pending[..tail.len()].copy_from_slice(tail);
                self.len = tail.len();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Checks that no character was left incomplete (at the end of a line or of the input).
    pub(super) fn finish(&mut self) -> Result<(), Utf8Error> {
        let pending = &self.pending[..std::mem::take(&mut self.len)];
        std::str::from_utf8(pending).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;

    /// The lines of `input` read by [`next_line`] in pieces of `piece` bytes.
    fn lines(input: &[u8], piece: usize, max_chars: usize) -> Vec<(Vec<u8>, usize)> {
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.1.min(buf.len()).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut reader = BufReader::with_capacity(piece, Pieces(input, piece));
        let mut out = Vec::new();
        let mut line = Vec::new();
        while let Ok(Some(omitted)) = next_line(&mut reader, &mut line, max_chars, None) {
            out.push((line.clone(), omitted));
        }
        out
    }

    #[test]
    fn lines_are_cut_while_reading_in_any_pieces() {
        let input = "héllo wörld\r\nab\n\nlast €€€".as_bytes();
        for piece in 1..8 {
            assert_eq!(
                lines(input, piece, 5),
                vec![
                    ("héllo\n".as_bytes().to_vec(), 6),
                    (b"ab\n".to_vec(), 0),
                    (b"\n".to_vec(), 0),
                    (b"last ".to_vec(), 3),
                ],
                "pieces of {piece}"
            );
            assert_eq!(
                lines(input, piece, usize::MAX)[0].0,
                "héllo wörld\r\n".as_bytes()
            );
        }
        // Bytes that are not UTF-8 are bounded too (at most 4 bytes a character).
        let junk = vec![0x80u8; 10_000];
        assert_eq!(lines(&junk, 100, 10)[0].0.len(), 40);
    }

    #[test]
    fn utf8_is_checked_across_pieces() {
        let text = "aé€😀\n".repeat(3);
        for piece in 1..6 {
            let mut check = Utf8Check::default();
            for chunk in text.as_bytes().chunks(piece) {
                check.feed(chunk).unwrap();
            }
            check.finish().unwrap();
        }
        let mut check = Utf8Check::default();
        check.feed(b"ok \xe2\x82").unwrap();
        assert!(check.finish().is_err(), "a cut character is an error");
        let mut check = Utf8Check::default();
        check.feed(b"\xe2").unwrap();
        assert!(check.feed(b"A").is_err());
    }
}
