//! File names as shown to the model: non-UTF-8 bytes escaped as `\xHH`, and read back.

use std::{
    ffi::{OsStr, OsString},
    fmt::Write as _,
};

/// The name shown for a file name `name`: itself when it is UTF-8 and reads back as itself
/// ([`decode_name`]); otherwise each byte that is not UTF-8 as `\xHH` and each `\` as `\\`.
pub(super) fn encode_name(name: &OsStr) -> String {
    let bytes = name.as_encoded_bytes();
    if let Ok(s) = std::str::from_utf8(bytes)
        && decode_name(s).is_none()
    {
        return s.to_owned();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    out
}

/// The bytes a path component written escaped names: `Some` if it holds `\\` or `\xHH` with
/// `HH` from `80` to `FF` (`\\` → `\`, `\xHH` → the byte, any other `\` kept), `None` if it is
/// to be taken literally.
pub(super) fn decode_name(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let (mut escaped, mut i) = (false, 0);
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                escaped = true;
                i += 2;
                continue;
            }
            if b.get(i + 1) == Some(&b'x')
                && let Some(&[hi, lo]) = b.get(i + 2..i + 4)
                && let (Some(hi), Some(lo)) = (hex_digit(hi), hex_digit(lo))
                && hi >= 8
            {
                out.push(hi << 4 | lo);
                escaped = true;
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    escaped.then_some(out)
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(unix)]
pub(super) fn name_from_bytes(bytes: Vec<u8>) -> OsString {
    std::os::unix::ffi::OsStringExt::from_vec(bytes)
}

#[cfg(not(unix))]
pub(super) fn name_from_bytes(bytes: Vec<u8>) -> OsString {
    String::from_utf8_lossy(&bytes).into_owned().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small seeded generator (xorshift), so failures replay.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// A random file name, rich in the bytes the escape is about.
    fn name(rng: &mut Rng) -> Vec<u8> {
        const PIECES: &[&[u8]] = &[
            b"\\",
            b"\\\\",
            b"x",
            b"\\x",
            b"\\xE9",
            b"\\xe9",
            b"\\x41",
            b"E9",
            b"a",
            b".",
            b"\xe9",
            b"\xff",
            b"\xc3",
            b"\xa9",
            b"\xc3\xa9",
            b"\xe2\x82\xac",
            b"\xf0\x9f\x98",
            b"\x80",
            b"\\x8",
            b"F",
            b" ",
        ];
        let len = 1 + rng.below(8);
        let mut out: Vec<u8> = (0..len)
            .flat_map(|_| PIECES[rng.below(PIECES.len())].iter().copied())
            .collect();
        if rng.below(4) == 0 {
            out.push(1 + rng.below(254) as u8);
        }
        out.retain(|&b| b != b'/' && b != 0);
        if out.is_empty() { b"n".to_vec() } else { out }
    }

    #[cfg(unix)]
    #[test]
    fn every_name_shown_reads_back_as_itself() {
        use std::os::unix::ffi::OsStrExt;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let bytes = name(&mut rng);
            let shown = encode_name(OsStr::from_bytes(&bytes));
            let back = decode_name(&shown).unwrap_or_else(|| shown.as_bytes().to_vec());
            assert_eq!(back, bytes, "{bytes:?} shown as {shown:?}");
            if let Ok(s) = std::str::from_utf8(&bytes)
                && !s.contains('\\')
            {
                assert_eq!(shown, s, "a plain UTF-8 name is shown as it is");
            }
        }
        assert_eq!(
            encode_name(OsStr::from_bytes(b"caf\xe9.txt")),
            "caf\\xE9.txt"
        );
        assert_eq!(encode_name(OsStr::from_bytes(b"a\\b")), "a\\b");
        assert_eq!(encode_name(OsStr::from_bytes(b"caf\\xE9")), "caf\\\\xE9");
        assert_eq!(decode_name("caf\\xe9.txt"), Some(b"caf\xe9.txt".to_vec()));
        assert_eq!(decode_name("a\\x41"), None, "ASCII bytes are never escaped");
    }
}
