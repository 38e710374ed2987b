//! The `structuredPatch` of Claude Code's `Write` and `Edit` responses: the hunks of a line
//! diff, 3 lines of context, as the `diff` package's `structuredPatch` gives them.

use serde_json::{Value, json};

/// Lines of context around a change.
const CONTEXT: usize = 3;
/// The largest middle part (lines of the old times lines of the new, once the common start
/// and end are set aside) diffed line by line; a larger one is one replacement.
const MAX_CELLS: usize = 4_000_000;

/// A line and whether it ends with a newline (a line without one differs from the same line
/// with one).
type Line<'a> = (&'a str, bool);

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out: Vec<Line<'_>> = text
        .split_inclusive('\n')
        .map(|l| match l.strip_suffix('\n') {
            Some(l) => (l, true),
            None => (l, false),
        })
        .collect();
    if out.last() == Some(&("", false)) {
        out.pop();
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Same,
    Del,
    Add,
}

/// The hunks turning `old` into `new`: `[{oldStart, oldLines, newStart, newLines, lines}]`,
/// each line `" "`, `"-"` or `"+"` and its text.
pub(super) fn structured_patch(old: &str, new: &str) -> Value {
    let (a, b) = (lines(old), lines(new));
    let ops = diff(&a, &b);
    // Each op with the line it is about and its position in each file.
    let mut rows = Vec::with_capacity(ops.len());
    let (mut i, mut j) = (0usize, 0usize);
    for op in ops {
        let line = match op {
            Op::Same | Op::Del => a[i],
            Op::Add => b[j],
        };
        rows.push((op, line, i, j));
        match op {
            Op::Same => (i, j) = (i + 1, j + 1),
            Op::Del => i += 1,
            Op::Add => j += 1,
        }
    }
    let changes: Vec<usize> = (0..rows.len()).filter(|&k| rows[k].0 != Op::Same).collect();
    let mut hunks = Vec::new();
    let mut k = 0;
    while k < changes.len() {
        let start = changes[k].saturating_sub(CONTEXT);
        let mut end = changes[k];
        while k < changes.len() && changes[k] <= end + 2 * CONTEXT + 1 {
            end = changes[k];
            k += 1;
        }
        let end = (end + CONTEXT).min(rows.len() - 1);
        hunks.push(hunk(&rows[start..=end]));
    }
    Value::Array(hunks)
}

fn hunk(rows: &[(Op, Line<'_>, usize, usize)]) -> Value {
    let (_, _, i, j) = rows[0];
    let old_lines = rows.iter().filter(|r| r.0 != Op::Add).count();
    let new_lines = rows.iter().filter(|r| r.0 != Op::Del).count();
    let mut lines = Vec::with_capacity(rows.len());
    for (op, (text, newline), _, _) in rows {
        let mark = match op {
            Op::Same => ' ',
            Op::Del => '-',
            Op::Add => '+',
        };
        lines.push(format!("{mark}{text}"));
        if !newline {
            lines.push("\\ No newline at end of file".to_owned());
        }
    }
    // An empty side starts at the line before (0 for an empty file), as `diff` counts.
    let old_start = if old_lines == 0 { i } else { i + 1 };
    let new_start = if new_lines == 0 { j } else { j + 1 };
    json!({
        "oldStart": old_start, "oldLines": old_lines,
        "newStart": new_start, "newLines": new_lines,
        "lines": lines,
    })
}

/// The ops turning `a` into `b`: the common start and end, and a longest common subsequence
/// of the rest (or, past [`MAX_CELLS`], the rest replaced whole).
fn diff(a: &[Line<'_>], b: &[Line<'_>]) -> Vec<Op> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops = vec![Op::Same; prefix];
    if ma.len().saturating_mul(mb.len()) > MAX_CELLS {
        ops.extend(std::iter::repeat_n(Op::Del, ma.len()));
        ops.extend(std::iter::repeat_n(Op::Add, mb.len()));
    } else {
        ops.extend(lcs(ma, mb));
    }
    ops.extend(std::iter::repeat_n(Op::Same, suffix));
    ops
}

/// A longest common subsequence, deletions before additions in each change.
fn lcs(a: &[Line<'_>], b: &[Line<'_>]) -> Vec<Op> {
    let (n, m) = (a.len(), b.len());
    // `len[i][j]`: the LCS of `a[i..]` and `b[j..]`.
    let mut len = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[at(i, j)] = if a[i] == b[j] {
                len[at(i + 1, j + 1)] + 1
            } else {
                len[at(i + 1, j)].max(len[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j, mut ops) = (0, 0, Vec::with_capacity(n + m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push(Op::Same);
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || len[at(i + 1, j)] >= len[at(i, j + 1)]) {
            ops.push(Op::Del);
            i += 1;
        } else {
            ops.push(Op::Add);
            j += 1;
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_are_claude_codes() {
        // As measured (tests/reference/vectors/tool_edit.json, tool_write.json).
        assert_eq!(
            structured_patch("one two\nthree two\nthree\n", "ONE two\nthree two\nthree\n"),
            json!([{"oldStart": 1, "oldLines": 3, "newStart": 1, "newLines": 3,
                "lines": ["-one two", "+ONE two", " three two", " three"]}])
        );
        assert_eq!(
            structured_patch("old content\nline two\n", "replaced\n"),
            json!([{"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 1,
                "lines": ["-old content", "-line two", "+replaced"]}])
        );
        assert_eq!(structured_patch("same\n", "same\n"), json!([]));
    }

    #[test]
    fn distant_changes_are_separate_hunks() {
        let old: String = (1..=20).map(|n| format!("{n}\n")).collect();
        let new: String = (1..=20)
            .map(|n| match n {
                2 => "two\n".to_owned(),
                18 => "eighteen\n".to_owned(),
                n => format!("{n}\n"),
            })
            .collect();
        let hunks = structured_patch(&old, &new);
        let hunks = hunks.as_array().unwrap();
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0]["oldStart"], 1);
        assert_eq!(hunks[0]["oldLines"], 5);
        assert_eq!(hunks[1]["oldStart"], 15);
        assert_eq!(hunks[1]["lines"][3], "-18");
    }

    #[test]
    fn a_missing_final_newline_is_marked() {
        assert_eq!(
            structured_patch("a\nb", "a\nc"),
            json!([{"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 2,
                "lines": [" a", "-b", "\\ No newline at end of file", "+c",
                    "\\ No newline at end of file"]}])
        );
    }
}
