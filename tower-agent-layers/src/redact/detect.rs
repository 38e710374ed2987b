//! What [`Redaction`](super::Redaction) finds: the detectors and the strategies.

use std::borrow::Cow;

use regex::Regex;
use sha2::{Digest, Sha256};

/// What to do with a value a detector found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// Refuse the text: the stream ends with an error (the run ends `Aborted`), a tool output
    /// becomes an error output, a prompt fails the model call. The value is never shown.
    Block,
    /// Replace the value by `[REDACTED_<NAME>]` (`[REDACTED_EMAIL]`).
    Redact,
    /// Keep the value's last four letters or digits, the rest `*` (`************1111`).
    Mask,
    /// Replace the value by `<name:first 12 hex digits of its SHA-256>`: the same value always
    /// gives the same text, so a conversation can still tell two values apart.
    Hash,
}

/// A kind of value to find: a name and a regex, with an optional check of each match (the
/// Luhn checksum of a credit card number).
#[derive(Debug, Clone)]
pub struct Detector {
    pub(super) name: String,
    pub(super) regex: Regex,
    pub(super) check: Option<fn(&str) -> bool>,
    pub(super) strategy: Strategy,
}

/// The longest value the built-in detectors match, and so the look-behind of a stream (see
/// [`LOOK_BEHIND`](super::LOOK_BEHIND)).
pub(super) const EMAIL: &str =
    r"[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,4}\.[A-Za-z]{2,24}";
pub(super) const CREDIT_CARD: &str = r"\b\d(?:[ \-]?\d){12,18}\b";
pub(super) const IP: &str = r"\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b|\b(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}\b";
pub(super) const API_KEY: &str = r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,100}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,80}|xox[abpr]-[A-Za-z0-9\-]{10,80}|AIza[0-9A-Za-z_\-]{35})\b";

impl Detector {
    /// A detector of `name` for matches of `pattern`.
    ///
    /// # Errors
    ///
    /// The pattern is not a valid regex (or compiles to over 256 KiB).
    pub fn regex(
        name: impl Into<String>,
        pattern: &str,
        strategy: Strategy,
    ) -> Result<Self, regex::Error> {
        Ok(Detector {
            name: name.into(),
            regex: regex::RegexBuilder::new(pattern)
                .size_limit(256 * 1024)
                .build()?,
            check: None,
            strategy,
        })
    }

    pub(super) fn builtin(
        name: &str,
        pattern: &str,
        check: Option<fn(&str) -> bool>,
        strategy: Strategy,
    ) -> Self {
        let mut d = Self::regex(name, pattern, strategy).expect("a built-in pattern compiles");
        d.check = check;
        d
    }

    /// The detector's name (`email`, `credit_card` …).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the detector does with a match.
    pub(super) fn replace(&self, value: &str) -> String {
        match self.strategy {
            Strategy::Block | Strategy::Redact => {
                format!("[REDACTED_{}]", self.name.to_uppercase())
            }
            Strategy::Mask => {
                let keep: Vec<usize> = value
                    .char_indices()
                    .filter(|(_, c)| c.is_alphanumeric())
                    .map(|(i, _)| i)
                    .collect();
                let from = keep.len().saturating_sub(4);
                let shown: std::collections::HashSet<usize> =
                    keep[from..].iter().copied().collect();
                value
                    .char_indices()
                    .map(|(i, c)| {
                        if shown.contains(&i) || !c.is_alphanumeric() {
                            c
                        } else {
                            '*'
                        }
                    })
                    .collect()
            }
            Strategy::Hash => {
                let digest = Sha256::digest(value.as_bytes());
                let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
                format!("<{}:{hex}>", self.name)
            }
        }
    }
}

/// The Luhn checksum of the digits of `value` (a credit card number's check).
pub(super) fn luhn(value: &str) -> bool {
    let digits: Vec<u32> = value.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let d = d * 2;
                if d > 9 { d - 9 } else { d }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The values found in `text`: byte ranges, each with its detector, in order, not overlapping
/// (the earlier detector wins an overlap).
pub(super) fn find(detectors: &[Detector], text: &str) -> Vec<(std::ops::Range<usize>, usize)> {
    let mut found: Vec<(std::ops::Range<usize>, usize)> = Vec::new();
    for (d, detector) in detectors.iter().enumerate() {
        for m in detector.regex.find_iter(text) {
            if detector.check.is_some_and(|check| !check(m.as_str())) {
                continue;
            }
            let range = m.range();
            if found
                .iter()
                .any(|(r, _)| r.start < range.end && range.start < r.end)
            {
                continue;
            }
            found.push((range, d));
        }
    }
    found.sort_by_key(|(r, _)| r.start);
    found
}

/// `text` with each value found replaced; `Err(detector name)` if one blocks.
pub(super) fn apply<'t>(detectors: &[Detector], text: &'t str) -> Result<Cow<'t, str>, String> {
    apply_cut(detectors, text, &mut [])
}

/// [`apply`], with `cuts` (byte offsets into `text`, in order) moved to the same places in
/// the result: a cut inside a value moves to the end of its replacement, so that the pieces
/// the cuts make hold each replacement whole, where its value started.
pub(super) fn apply_cut<'t>(
    detectors: &[Detector],
    text: &'t str,
    cuts: &mut [usize],
) -> Result<Cow<'t, str>, String> {
    let found = find(detectors, text);
    if found.is_empty() {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut next = 0;
    for (range, d) in found {
        let detector = &detectors[d];
        if detector.strategy == Strategy::Block {
            return Err(detector.name.clone());
        }
        while let Some(cut) = cuts.get_mut(next).filter(|c| **c <= range.start) {
            *cut = out.len() + (*cut - at);
            next += 1;
        }
        out.push_str(&text[at..range.start]);
        out.push_str(&detector.replace(&text[range.clone()]));
        while let Some(cut) = cuts.get_mut(next).filter(|c| **c <= range.end) {
            *cut = out.len();
            next += 1;
        }
        at = range.end;
    }
    for cut in &mut cuts[next..] {
        *cut = out.len() + (*cut - at);
    }
    out.push_str(&text[at..]);
    Ok(Cow::Owned(out))
}
