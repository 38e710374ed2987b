//! The comparison of two plays, and the differences tower-agent keeps on purpose.

use std::{collections::BTreeMap, fmt};

use serde_json::Value;

use super::Observed;

/// A known difference: in `scenario` (`*`: any), `event` (`*`: any), `field` of the hook
/// input (`$cwd`, `$project_dir`, `$env_file` for what the hook saw of its environment;
/// `<order>`, `<fired>`, `<requests>`, `<ran>` for the rest), and why.
#[derive(Debug)]
pub(crate) struct Known {
    pub(crate) scenario: &'static str,
    pub(crate) event: &'static str,
    pub(crate) field: &'static str,
    pub(crate) reason: &'static str,
}

const fn known(
    scenario: &'static str,
    event: &'static str,
    field: &'static str,
    reason: &'static str,
) -> Known {
    Known {
        scenario,
        event,
        field,
        reason,
    }
}

/// One difference found.
#[derive(Debug, Clone)]
pub(crate) struct Diff {
    pub(crate) event: String,
    pub(crate) field: String,
    pub(crate) text: String,
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
    pub(crate) fn covered_by(&self, scenario: &str, k: &Known) -> bool {
        (k.scenario == "*" || k.scenario == scenario)
            && (k.event == "*" || k.event == self.event)
            && k.field == self.field
    }
}

/// Differences tower-agent keeps on purpose, each with its reason (the Claude Code guide page
/// lists them).
pub(crate) const KEPT: &[Known] = &[
    known(
        "*",
        "SessionStart",
        "model",
        "an addition: the hooks reference lists `model` in SessionStart's input; 2.1.328 \
         headless does not send it. A script written for either reads what it expects.",
    ),
    known(
        "*",
        "SessionEnd",
        "outcome",
        "an addition: the run's outcome, which a library's caller has and a terminal does not.",
    ),
    known(
        "*",
        "*",
        "pricing",
        "the crate has no price list: `pricing` is \"default\" and the estimate 0, where \
         Claude Code prices the models it knows from its catalog.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "<order>",
        "a run is one `claude -p` on the thread: a thread's next run is a resumed session \
         (SessionEnd, then SessionStart) where the SDK's session goes on; and a switch is seen \
         at the first model call that names the other model (after UserPromptSubmit), as a \
         library has no set-model call between prompts.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "<fired>",
        "the same: the first run's SessionEnd and the second's SessionStart.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "prompt_id",
        "the same: the switch happens within the second prompt's run, so it carries that \
         prompt's id where Claude Code's set-model between prompts carries the first's.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "<requests>",
        "the same: one request fewer — Claude Code answers set_model without a model call.",
    ),
    known(
        "parallel_calls",
        "*",
        "<order>",
        "the calls of one answer run concurrently in tower-agent (their hooks too); Claude Code \
         runs Bash calls one after the other. Each call's hooks see the same inputs.",
    ),
    known(
        "*",
        "Notification",
        "<fired>",
        "a library has no screen: what Claude Code shows the user (a hook's `systemMessage`, a \
         failing hook's error) reaches Notification hooks, the crate's observers of what a \
         person would see.",
    ),
];

/// Differences found and not fixed yet: each says what has to change. The list only shrinks.
pub(crate) const OPEN: &[Known] = &[
    known(
        "*",
        "PostToolBatch",
        "tool_calls",
        "each call's `tool_response` is the text the model sees: Claude Code's holds the result \
         alone (its hook contexts go in messages of their own); the crate appends the contexts \
         to the result.",
    ),
    known(
        "*",
        "*",
        "<requests>",
        "the same in the model's requests: Claude Code puts hook contexts in `system` messages \
         after the tool result (`PreToolUse:Bash hook additional context: …`, `PostToolUse:Bash \
         hook blocking error from command: \"…\": …`) and the prompt's in the environment \
         message (`UserPromptSubmit hook additional context: …`, `SessionStart:startup hook \
         success: …`); the crate wraps them in `<system-hook>` inside the result or the prompt.",
    ),
    known(
        "tool_edit",
        "*",
        "<fired>",
        "Claude Code checks Edit's input before the PreToolUse hooks (`old_string` found, and \
         once unless `replace_all`; different from `new_string`; the file there): a refused \
         edit fires neither PreToolUse nor PostToolUseFailure. The crate's Edit finds those \
         while it runs, after PreToolUse, so both fire. Needs a check a tool offers the hook \
         layer to run before the hooks (a `Tool` method the router exposes).",
    ),
    known(
        "tool_edit",
        "*",
        "tool_input",
        "Claude Code gives hooks the input as the tool's schema parsed it: Edit's \
         `replace_all: false` filled in when the model left it out, a relative `file_path` \
         made absolute. The crate's hooks see the model's input. Needs the tool's normalised \
         input before the hook layer (the same `Tool` method).",
    ),
    known(
        "tool_read",
        "*",
        "tool_input",
        "the same: a relative `file_path`",
    ),
    known(
        "instructions_loaded",
        "*",
        "<order>",
        "InstructionsLoaded hooks run in the background in tower-agent (the Memory stage does \
         not wait for them); Claude Code runs them as the session starts, before \
         UserPromptSubmit.",
    ),
    known(
        "resumed_session",
        "SessionStart",
        "seconds_since_last_response",
        "a resumed SessionStart's cache fields (`seconds_since_last_response`, `context_tokens`, \
         `prompt_cache_likely_expired`, `estimated_cache_write_usd`): the thread's last answer \
         time is not kept yet.",
    ),
    known(
        "resumed_session",
        "SessionStart",
        "context_tokens",
        "the same",
    ),
    known(
        "resumed_session",
        "SessionStart",
        "prompt_cache_likely_expired",
        "the same",
    ),
    known(
        "resumed_session",
        "SessionStart",
        "estimated_cache_write_usd",
        "the same",
    ),
];

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

/// Events whose hooks Claude Code starts at once, so which starts first is chance: the
/// CwdChanged hooks of a Bash `cd` start as the call ends, beside its PostToolUse hooks (both
/// orders seen in 2.1.328). Their order is compared as the first one's.
const SIMULTANEOUS: &[(&str, &str)] = &[("PostToolUse", "CwdChanged")];

/// The events in the order they fired, a run of one event once (its hooks run in parallel).
fn order(hooks: &[Value]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for h in hooks {
        let e = h["event"].as_str().unwrap_or("?");
        if out.last() != Some(&e) {
            out.push(e);
        }
    }
    for i in 1..out.len() {
        if SIMULTANEOUS.contains(&(out[i], out[i - 1])) {
            out.swap(i - 1, i);
        }
    }
    out
}

/// Every difference of `seen` from `expected`.
pub(crate) fn compare(expected: &Observed, seen: &Observed) -> Vec<Diff> {
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
    let (e_order, s_order) = (order(&e_both), order(&s_both));
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

/// Counts for the note: hook inputs and fields compared, and the differences by kind.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) scenarios: usize,
    pub(crate) inputs: usize,
    pub(crate) fields: usize,
    pub(crate) kept: usize,
    pub(crate) open: Vec<String>,
    pub(crate) unexplained: Vec<String>,
}

impl Report {
    /// Adds a scenario's comparison.
    pub(crate) fn add(
        &mut self,
        scenario: &str,
        expected: &Observed,
        diffs: &[Diff],
        used: &mut [bool],
    ) {
        self.scenarios += 1;
        self.inputs += expected.hooks.len();
        self.fields += expected
            .hooks
            .iter()
            .map(|h| h["input"].as_object().map_or(0, |m| m.len()) + 3)
            .sum::<usize>();
        for d in diffs {
            let mut lists = KEPT.iter().chain(OPEN).enumerate();
            match lists.find(|(_, k)| d.covered_by(scenario, k)) {
                Some((i, _)) => {
                    used[i] = true;
                    if i < KEPT.len() {
                        self.kept += 1;
                    } else {
                        self.open.push(format!("{scenario}: {}", d.text));
                    }
                }
                None => self.unexplained.push(format!("{scenario}: {}", d.text)),
            }
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "differential suite: {} scenarios, {} hook inputs, {} fields compared; {} \
             differences kept on purpose, {} open, {} unexplained",
            self.scenarios,
            self.inputs,
            self.fields,
            self.kept,
            self.open.len(),
            self.unexplained.len()
        )?;
        for k in KEPT {
            writeln!(
                f,
                "  kept: {} {} in {}: {}",
                k.event, k.field, k.scenario, k.reason
            )?;
        }
        for o in &self.open {
            writeln!(f, "  open: {o}")?;
        }
        Ok(())
    }
}
