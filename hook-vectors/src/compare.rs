//! The comparison of two plays of a scenario, and the differences a host knows of.
//!
//! A difference is named by its event and its field: a field of the hook input, or one of
//! `$cwd`, `$project_dir`, `$env_file` (what the hook saw of its environment), `<order>` (the
//! order of the events both fired), `<fired>` (a hook run one side has and the other not),
//! `<input>` (an input that is not an object), `<requests>` (what the hooks put in the
//! model's requests), `<ran>` (what the tools ran).
//!
//! ```
//! use hook_vectors::{compare::compare, read_dir, shipped_dir};
//!
//! // A vector shipped with the crate: what Claude Code did with its scenario.
//! let vectors = read_dir(&shipped_dir())?;
//! let (_, vector) = vectors.iter().find(|(name, _)| name == "additional_context").unwrap();
//! let expected = vector.expected.as_ref().unwrap();
//! assert!(compare(&vector.scenario, expected, expected).is_empty());
//!
//! // A host whose SessionStart input says `resume` where Claude Code says `startup`.
//! let mut seen = expected.clone();
//! seen.hooks[0]["input"]["source"] = "resume".into();
//! let diffs = compare(&vector.scenario, expected, &seen);
//! assert_eq!(diffs.len(), 1);
//! assert_eq!((diffs[0].event.as_str(), diffs[0].field.as_str()), ("SessionStart", "source"));
//! # Ok::<(), hook_vectors::Error>(())
//! ```

use std::{borrow::Cow, collections::BTreeMap, fmt};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vector::{Observed, Scenario};

/// A known difference: in `scenario` (`*`: any), `event` (`*`: any), `field` (as the
/// [module](self) names them), and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Known {
    /// The vector's name (its file stem), or `*`.
    pub scenario: Cow<'static, str>,
    /// The event, or `*`.
    pub event: Cow<'static, str>,
    /// The field.
    pub field: Cow<'static, str>,
    /// Why the difference is there (kept: why on purpose; open: what has to change).
    pub reason: Cow<'static, str>,
}

/// A [`Known`] difference, in a `const` list.
pub const fn known(
    scenario: &'static str,
    event: &'static str,
    field: &'static str,
    reason: &'static str,
) -> Known {
    Known {
        scenario: Cow::Borrowed(scenario),
        event: Cow::Borrowed(event),
        field: Cow::Borrowed(field),
        reason: Cow::Borrowed(reason),
    }
}

/// The differences a host knows of: those it keeps on purpose, and those it has yet to fix.
/// In JSON (`hook-vectors run --known FILE`): `{"kept": [Known…], "open": [Known…]}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KnownDifferences {
    /// Kept on purpose.
    #[serde(default)]
    pub kept: Vec<Known>,
    /// Not fixed yet.
    #[serde(default)]
    pub open: Vec<Known>,
}

/// One difference found.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The event (`*` for the whole play).
    pub event: String,
    /// The field.
    pub field: String,
    /// What differs, for a person.
    pub text: String,
}

impl Diff {
    fn new(event: &str, field: &str, text: String) -> Self {
        Diff {
            event: event.to_owned(),
            field: field.to_owned(),
            text,
        }
    }

    /// Whether `k` covers this difference in `scenario`.
    pub fn covered_by(&self, scenario: &str, k: &Known) -> bool {
        (k.scenario == "*" || k.scenario == scenario)
            && (k.event == "*" || k.event == self.event)
            && k.field == self.field
    }
}

/// The key a hook run is paired by: its event, its answer (and the tool call it is about),
/// and which of those it is.
fn keys(hooks: &[Value]) -> BTreeMap<(String, String, usize), &Value> {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for h in hooks {
        let event = h["event"].as_str().unwrap_or("?").to_owned();
        let mut answer = h["answer"].as_str().unwrap_or("?").to_owned();
        if let Some(id) = h["input"]["tool_use_id"].as_str() {
            answer = format!("{answer} {id}");
        }
        let n = seen.entry((event.clone(), answer.clone())).or_default();
        out.insert((event, answer, *n), h);
        *n += 1;
    }
    out
}

/// The events in the order they fired, a run of one event once (its hooks run in parallel).
/// Events the reference fires concurrently (`unordered`, each a set of event names) are put in
/// one order where they follow each other, so their chance order is no difference.
fn order<'a>(hooks: &'a [Value], unordered: &[Vec<String>]) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for h in hooks {
        let e = h["event"].as_str().unwrap_or("?");
        if out.last() != Some(&e) {
            out.push(e);
        }
    }
    let together = |a: &str, b: &str| {
        unordered
            .iter()
            .any(|set| set.iter().any(|x| x == a) && set.iter().any(|x| x == b))
    };
    // A bubble sort of the neighbours that may come in either order: few events, and it
    // never moves an event past one it is ordered with.
    let mut changed = true;
    while changed {
        changed = false;
        for i in 1..out.len() {
            if together(out[i - 1], out[i]) && out[i - 1] > out[i] {
                out.swap(i - 1, i);
                changed = true;
            }
        }
    }
    // Sorting may bring two runs of one event together: they are one run.
    out.dedup();
    out
}

/// Every difference of `seen` from `expected`, the scenario's `unordered` events compared
/// without their order among themselves.
pub fn compare(scenario: &Scenario, expected: &Observed, seen: &Observed) -> Vec<Diff> {
    let unordered = &scenario.unordered;
    let mut diffs = Vec::new();
    let (e, s) = (keys(&expected.hooks), keys(&seen.hooks));
    // The order of the events both fired (one fired by one side only is a difference of its
    // own, below).
    let both = |hooks: &[Value], other: &BTreeMap<(String, String, usize), &Value>| {
        let mine = keys(hooks);
        let shared: Vec<Value> = mine
            .iter()
            .filter(|(k, _)| other.contains_key(*k))
            .map(|(_, h)| (*h).clone())
            .collect();
        hooks
            .iter()
            .filter(|h| shared.contains(h))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (e_both, s_both) = (both(&expected.hooks, &s), both(&seen.hooks, &e));
    let (e_order, s_order) = (order(&e_both, unordered), order(&s_both, unordered));
    if e_order != s_order {
        let text = format!("order: expected {e_order:?}, seen {s_order:?}");
        diffs.push(Diff::new("*", "<order>", text));
    }
    for (key, eh) in &e {
        let (event, answer, n) = key;
        let Some(sh) = s.get(key) else {
            let text = format!("{event} ({answer} #{n}): fired in the reference, not here");
            diffs.push(Diff::new(event, "<fired>", text));
            continue;
        };
        for f in ["cwd", "project_dir", "env_file"] {
            if eh[f] != sh[f] {
                let text = format!("{event}: ${f}: expected {}, seen {}", eh[f], sh[f]);
                diffs.push(Diff::new(event, &format!("${f}"), text));
            }
        }
        fields(event, &eh["input"], &sh["input"], &mut diffs);
    }
    for (event, answer, n) in s.keys().filter(|k| !e.contains_key(*k)) {
        let text = format!("{event} ({answer} #{n}): fired here, not in the reference");
        diffs.push(Diff::new(event, "<fired>", text));
    }
    if expected.requests != seen.requests {
        let text = format!(
            "model requests: expected {}, seen {}",
            Value::from(expected.requests.clone()),
            Value::from(seen.requests.clone())
        );
        diffs.push(Diff::new("*", "<requests>", text));
    }
    // Calls of one step may run in any order: what ran is compared as a set of lines.
    let lines = |ran: &str| {
        let mut l: Vec<String> = ran.lines().map(str::to_owned).collect();
        l.sort();
        l
    };
    if lines(&expected.ran) != lines(&seen.ran) {
        let text = format!("ran: expected {:?}, seen {:?}", expected.ran, seen.ran);
        diffs.push(Diff::new("*", "<ran>", text));
    }
    diffs
}

fn fields(event: &str, e: &Value, s: &Value, diffs: &mut Vec<Diff>) {
    let (Some(e), Some(s)) = (e.as_object(), s.as_object()) else {
        diffs.push(Diff::new(
            event,
            "<input>",
            format!("{event}: input not an object: {s}"),
        ));
        return;
    };
    for (k, ev) in e {
        match s.get(k) {
            None => {
                let text = format!("{event}: `{k}` missing (expected {ev})");
                diffs.push(Diff::new(event, k, text));
            }
            Some(sv) if sv != ev => {
                let text = format!("{event}: `{k}`: expected {ev}, seen {sv}");
                diffs.push(Diff::new(event, k, text));
            }
            _ => {}
        }
    }
    for k in s.keys().filter(|k| !e.contains_key(*k)) {
        let text = format!("{event}: `{k}` not sent by the reference (seen {})", s[k]);
        diffs.push(Diff::new(event, k, text));
    }
}

/// A run of vectors against a host: what was compared, and each difference sorted by the
/// host's [`KnownDifferences`].
#[derive(Debug)]
pub struct Report {
    known: KnownDifferences,
    used: Vec<bool>,
    /// Vectors compared.
    pub scenarios: usize,
    /// Hook inputs compared (the reference's).
    pub inputs: usize,
    /// Fields compared: each input's fields, and the three of what the hook saw.
    pub fields: usize,
    /// Differences kept on purpose, found.
    pub kept: usize,
    /// Differences found that the open list names (`<vector>: <what differs>`).
    pub open: Vec<String>,
    /// Differences found that no list names.
    pub unexplained: Vec<String>,
    /// Vectors that could not be played (`<vector>: <why>`).
    pub failed: Vec<String>,
}

impl Report {
    /// An empty report, sorting differences by `known`.
    pub fn new(known: KnownDifferences) -> Self {
        let used = vec![false; known.kept.len() + known.open.len()];
        Report {
            known,
            used,
            scenarios: 0,
            inputs: 0,
            fields: 0,
            kept: 0,
            open: Vec::new(),
            unexplained: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// Adds a vector's comparison: `diffs` of a play from `expected`.
    pub fn add(&mut self, scenario: &str, expected: &Observed, diffs: &[Diff]) {
        self.scenarios += 1;
        self.inputs += expected.hooks.len();
        self.fields += expected
            .hooks
            .iter()
            .map(|h| h["input"].as_object().map_or(0, |m| m.len()) + 3)
            .sum::<usize>();
        let kept = self.known.kept.len();
        for d in diffs {
            let mut lists = self.known.kept.iter().chain(&self.known.open).enumerate();
            match lists.find(|(_, k)| d.covered_by(scenario, k)) {
                Some((i, _)) => {
                    self.used[i] = true;
                    if i < kept {
                        self.kept += 1;
                    } else {
                        self.open.push(format!("{scenario}: {}", d.text));
                    }
                }
                None => self.unexplained.push(format!("{scenario}: {}", d.text)),
            }
        }
    }

    /// Adds a vector that could not be played.
    pub fn fail(&mut self, scenario: &str, why: &dyn fmt::Display) {
        self.failed.push(format!("{scenario}: {why}"));
    }

    /// Known differences that no vector showed: gone, so their entries can go (only
    /// meaningful after a run of every vector).
    pub fn stale(&self) -> Vec<&Known> {
        self.known
            .kept
            .iter()
            .chain(&self.known.open)
            .zip(&self.used)
            .filter(|(_, used)| !**used)
            .map(|(k, _)| k)
            .collect()
    }

    /// Whether the host passed: every vector played, every difference known.
    pub fn passed(&self) -> bool {
        self.failed.is_empty() && self.unexplained.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} vectors, {} hook inputs, {} fields compared; {} differences kept on purpose, \
             {} open, {} unexplained; {} vectors not played",
            self.scenarios,
            self.inputs,
            self.fields,
            self.kept,
            self.open.len(),
            self.unexplained.len(),
            self.failed.len()
        )?;
        for k in &self.known.kept {
            writeln!(
                f,
                "  kept: {} {} in {}: {}",
                k.event, k.field, k.scenario, k.reason
            )?;
        }
        for (label, list) in [
            ("open", &self.open),
            ("UNEXPLAINED", &self.unexplained),
            ("NOT PLAYED", &self.failed),
        ] {
            for line in list {
                writeln!(f, "  {label}: {line}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn observed(events: &[&str]) -> Observed {
        let hooks = events
            .iter()
            .map(|e| {
                json!({"event": e, "answer": "observe", "cwd": "", "project_dir": "",
                "env_file": false, "input": {"hook_event_name": e}})
            })
            .collect();
        Observed {
            hooks,
            ..Observed::default()
        }
    }

    fn scenario(unordered: Vec<Vec<String>>) -> Scenario {
        let mut s: Scenario = serde_json::from_value(json!({"about": "", "model": "m",
            "steps": [{"prompt": "p"}], "answers": [[]]}))
        .unwrap();
        s.unordered = unordered;
        s
    }

    #[test]
    fn events_named_unordered_may_come_in_either_order_and_no_others() {
        let expected = observed(&["PreToolUse", "PostToolUse", "CwdChanged", "Stop"]);
        let seen = observed(&["PreToolUse", "CwdChanged", "PostToolUse", "Stop"]);
        let strict = compare(&scenario(vec![]), &expected, &seen);
        assert_eq!(strict.len(), 1, "{strict:?}");
        assert_eq!(strict[0].field, "<order>");
        let set = vec![vec!["PostToolUse".to_owned(), "CwdChanged".to_owned()]];
        assert!(compare(&scenario(set.clone()), &expected, &seen).is_empty());
        // An event outside the set still keeps its place.
        let moved = observed(&["CwdChanged", "PreToolUse", "PostToolUse", "Stop"]);
        assert_eq!(compare(&scenario(set), &expected, &moved).len(), 1);
        // An event of the set that starts late, after the other, is the same run.
        let set = vec![vec!["PostToolUse".to_owned(), "PostToolBatch".to_owned()]];
        let expected = observed(&["PreToolUse", "PostToolUse", "PostToolUse", "PostToolBatch"]);
        let late = observed(&["PreToolUse", "PostToolUse", "PostToolBatch", "PostToolUse"]);
        let diffs = compare(&scenario(set), &expected, &late);
        assert!(diffs.is_empty(), "{diffs:?}");
    }
}
