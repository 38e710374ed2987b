//! What one handler's answer means for an event ([`interpret`] into a [`Verdict`]): exit
//! codes, plain stdout, failures and timeouts, fail-closed handlers; and the answer of a
//! handler run in the background ([`background_done`]). The JSON fields are read in
//! `answer`.

use serde_json::{Map, Value};

use super::answer::read_json;
use crate::{
    exec::Exec,
    handler::Handler,
    reply::{Failure, Reply, Report, Stdout},
};
use tower_agent_core::context::RunContext;
use tower_agent_core::message::{ToolCall, ToolOutput};
use tower_agent_layers::hooks::{HookEvent, PermissionRequest};

/// The longest string taken from a hook's answer (as in the protocol).
const MAX_CHARS: usize = 10_000;

/// A `permissionDecision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Permission {
    Allow,
    Ask,
    Defer,
    Deny,
}

/// How a dialect words a PreToolUse denial: the output answering `call` from the reason.
pub(crate) type Refusal = fn(call: &ToolCall, reason: &str) -> ToolOutput;

/// What one handler's answer means, whatever the event; the event decides what it uses.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// `continue: false`: the stop reason.
    pub(crate) stop: Option<String>,
    /// Exit 2 or `decision: "block"`: the reason.
    pub(crate) block: Option<String>,
    /// Whether [`block`](Self::block) comes from exit 2 (else from the JSON answer).
    pub(crate) exit_2: bool,
    /// What follows a block's reason for the model, as a system message (Claude Code's Stop /
    /// SubagentStop `decision: "block"`: the blocking command named).
    pub(crate) block_context: Option<String>,
    /// PostToolUse: the text that replaces the call's result, and whether it is an error (a
    /// Codex or Gemini CLI handler's block).
    pub(crate) replace_output: Option<(String, bool)>,
    /// PreToolUse: how the handler's dialect words a denial for the model — the output
    /// answering the call from the denial's reason (a Codex or Gemini CLI handler's:
    /// [`PreToolUse::Refuse`](tower_agent_layers::hooks::PreToolUse::Refuse)); `None`, Claude
    /// Code's words ([`PreToolUse::Deny`](tower_agent_layers::hooks::PreToolUse::Deny)).
    pub(crate) refusal: Option<Refusal>,
    /// PostToolUse: how the handler's dialect puts each of its contexts into the call's
    /// result (a Gemini CLI handler's: appended in `<hook_context>` tags); `None`, next to it
    /// (a hook context after the step's results, as Claude Code puts it).
    pub(crate) context_in_result: Option<fn(&mut String, &str)>,
    /// A fail-closed handler that failed (timeout, crash, garbage, missing executable): why.
    pub(crate) failed: Option<String>,
    /// `permissionDecision` (or the legacy `decision: "approve"`) and its reason.
    pub(crate) permission: Option<(Permission, String)>,
    pub(crate) updated_input: Option<Value>,
    pub(crate) updated_output: Option<Value>,
    pub(crate) llm_request: Option<Value>,
    pub(crate) llm_response: Option<Value>,
    /// MessageDisplay's `displayContent`.
    pub(crate) display: Option<String>,
    /// `additionalContext`, and plain stdout where it counts as context.
    pub(crate) contexts: Vec<String>,
    /// Whether [`contexts`](Self::contexts) is the handler's plain stdout.
    pub(crate) plain_stdout: bool,
    /// PermissionRequest: the `decision` object.
    pub(crate) request: Option<PermissionRequest>,
    /// PermissionDenied: `retry: true`.
    pub(crate) retry: bool,
    /// `systemMessage` (already reported; an async hook's is also delivered to the model).
    pub(crate) system_message: Option<String>,
    /// Elicitation / ElicitationResult: `hookSpecificOutput.action` and its `content`.
    pub(crate) elicitation: Option<(Elicit, Option<Value>)>,
    /// CwdChanged / FileChanged: `hookSpecificOutput.watchPaths`.
    pub(crate) watch_paths: Option<Vec<std::path::PathBuf>>,
}

/// The `action` of an Elicitation / ElicitationResult hook's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Elicit {
    Accept,
    Decline,
    Cancel,
}

/// Cuts `s` to [`MAX_CHARS`] characters, saying how many were cut.
pub(super) fn cap(mut s: String) -> String {
    if s.len() <= MAX_CHARS {
        return s;
    }
    let Some((end, _)) = s.char_indices().nth(MAX_CHARS) else {
        return s;
    };
    let cut = s[end..].chars().count();
    s.truncate(end);
    s.push_str(&format!("\n... (truncated {cut} characters)"));
    s
}

pub(super) fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.trim().is_empty() => Some(cap(s.clone())),
        _ => None,
    }
}

/// What exit code 2 does for `event` (the reference's "Exit code 2 behavior per event").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit2 {
    /// Blocks (the event decides what a block means; the post-tool events show the reason to
    /// the model, SessionStart to the user).
    Blocks,
    /// Exit code and stderr are ignored (PermissionRequest: only the `decision` object counts;
    /// PermissionDenied, Notification: the thing already happened).
    Ignored,
}

fn exit_2(event: HookEvent) -> Exit2 {
    match event {
        HookEvent::PermissionRequest | HookEvent::PermissionDenied | HookEvent::Notification => {
            Exit2::Ignored
        }
        _ => Exit2::Blocks,
    }
}

/// What `result` of `handler` means for `event`.
///
/// As in the reference ("Exit code output"): stdout is read as JSON on **every** exit code.
/// - exit 0: the JSON (or plain stdout, context for UserPromptSubmit / SessionStart);
/// - exit 2: a block that no JSON overrides (not even `permissionDecision: "allow"`); its
///   reason is the JSON's blocking decision's (`decision: "block"` + `reason`, or
///   `permissionDecision: "deny"` + `permissionDecisionReason`) when it makes one, else
///   stderr. Events where exit 2 is ignored ([`Exit2::Ignored`]) only read the JSON;
/// - any other exit with a JSON object on stdout: the JSON alone decides, not an error;
///   without one: a non-blocking error (`failed with non-blocking status code N: <first line
///   of stderr>`), unless the handler is fail-closed.
pub(crate) fn interpret(
    event: HookEvent,
    handler: &Handler,
    result: Result<Reply, Failure>,
    report: Report<'_>,
) -> Verdict {
    let name = &handler.label;
    let mut verdict = Verdict::default();
    let fail = |verdict: &mut Verdict, why: String| {
        if handler.fail_closed {
            verdict.failed = Some(format!("hook `{name}` {why} (the hook is fail-closed)"));
        }
    };
    let reply = match result {
        Ok(reply) => reply,
        Err(failure @ (Failure::Timeout(_) | Failure::Cancelled(_))) if event.timeout_blocks() => {
            let why = failure.describe();
            report.warn(format!("{event} hook `{name}` {why}"));
            verdict.failed = Some(format!("hook `{name}` {why} (a {event} timeout blocks)"));
            return verdict;
        }
        Err(failure) => {
            let why = failure.describe();
            if let Failure::Missing(_) = failure {
                tracing::error!(hook = %name, event = %event, defined = %handler.origin, "{event} hook `{name}` {why}");
            }
            report.warn(format!("{event} hook `{name}` {why}"));
            let timed_out = matches!(failure, Failure::Timeout(_));
            fail(&mut verdict, why);
            if timed_out {
                in_claude_words(&mut verdict, handler, "timed out", "");
            }
            return verdict;
        }
    };
    let stderr = reply.stderr.trim();
    if !stderr.is_empty() && reply.code == Some(0) {
        tracing::debug!(hook = %name, event = %event, stderr = %stderr, "hook stderr");
    }
    // The JSON answer, if any: read on every exit code. Plain stdout is context only on
    // exit 0.
    let plain_ok = reply.code == Some(0);
    let json = match reply.stdout {
        Stdout::Json(Value::Object(map)) => Some(map),
        Stdout::Json(Value::Null) => None,
        Stdout::Json(Value::String(text)) => {
            plain(event, handler, text, plain_ok, &mut verdict, report)
        }
        Stdout::Json(other) => {
            report.warn(format!(
                "{event} hook `{name}` answered {other} instead of a JSON object; ignored"
            ));
            fail(&mut verdict, "answered garbage".into());
            None
        }
        Stdout::Text(text) => plain(event, handler, text, plain_ok, &mut verdict, report),
    };
    match reply.code {
        Some(0 | 2) => {}
        // Another exit with a JSON object: the JSON alone decides, and it is no error.
        _ if json.is_some() => {}
        Some(code @ (126 | 127)) if matches!(handler.exec, Exec::Shell { .. }) => {
            let first = stderr.lines().next().unwrap_or("");
            let why = format!("cannot be run (exit {code}): {first}");
            tracing::error!(hook = %name, event = %event, defined = %handler.origin, "{event} hook `{name}` {why}");
            report.warn(format!("{event} hook `{name}` {why}"));
            fail(&mut verdict, why);
            return verdict;
        }
        other => {
            let status = match other {
                Some(code) => format!("failed with non-blocking status code {code}"),
                None => "was killed by a signal".to_owned(),
            };
            let why = match stderr.lines().next() {
                Some(first) => format!("{status}: {first}"),
                None => status,
            };
            report.warn(format!("{event} hook `{name}` {why}"));
            fail(&mut verdict, why);
            in_claude_words(&mut verdict, handler, "failed", stderr);
            return verdict;
        }
    }
    let mut denial = None;
    if let Some(json) = &json {
        denial = read_json(event, handler, json, &mut verdict, report);
    }
    if reply.code == Some(2) && exit_2(event) == Exit2::Blocks {
        // Exit 2 blocks; its reason is the JSON's blocking decision's, else stderr. Nothing
        // overrides it.
        let reason = verdict
            .block
            .take()
            .or(denial)
            .or_else(|| (!stderr.is_empty()).then(|| exit_2_reason(event, handler, stderr)))
            .or_else(|| verdict.failed.take())
            .unwrap_or_else(|| format!("blocked by hook `{name}`"));
        verdict.block = Some(reason);
        verdict.exit_2 = true;
        if let Some((Permission::Allow | Permission::Ask | Permission::Defer, _)) =
            verdict.permission
        {
            verdict.permission = None;
        }
    }
    verdict
}

/// The reason of an exit 2 from its stderr: for a PreToolUse, PostToolUse or Stop command run
/// by a shell, after the command in brackets, as Claude Code says it (`PreToolUse:Bash hook
/// error: [<command>]: <stderr>`; the same `[<command>]: <stderr>` for PostToolUse and Stop;
/// measured against 2.1.328: `tests/reference`). A persistent handler has no exit code of its
/// own: its stderr alone.
fn exit_2_reason(event: HookEvent, handler: &Handler, stderr: &str) -> String {
    let bracketed = matches!(
        event,
        HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::Stop
    );
    match &handler.exec {
        Exec::Shell { command, .. } if bracketed && handler.persistent.is_none() => {
            cap(format!("[{command}]: {stderr}"))
        }
        _ => cap(stderr.to_owned()),
    }
}

/// A fail-closed handler's failure (if it failed) in Claude Code's words ([`closed_reason`]).
fn in_claude_words(verdict: &mut Verdict, handler: &Handler, kind: &str, stderr: &str) {
    if verdict.failed.is_some()
        && let Some(reason) = closed_reason(handler, kind, stderr)
    {
        verdict.failed = Some(reason);
    }
}

/// Why a fail-closed shell command (`onFailure: "block"`) that exited neither 0 nor 2
/// (`kind` "failed", with its `stderr`) or timed out (`kind` "timed out") blocks, as Claude
/// Code says it: `[<command>]: failed; blocking because onFailure is "block"` and stderr on
/// the next line (measured against 2.1.328: `tests/reference`). `None` for another handler
/// (a persistent one, exec form): the crate's own words stay.
fn closed_reason(handler: &Handler, kind: &str, stderr: &str) -> Option<String> {
    match &handler.exec {
        Exec::Shell { command, .. } if handler.persistent.is_none() => {
            let mut reason =
                format!("[{command}]: {kind}; blocking because onFailure is \"block\"");
            if !stderr.is_empty() {
                reason.push('\n');
                reason.push_str(stderr);
            }
            Some(cap(reason))
        }
        _ => None,
    }
}

/// What an `async` / `asyncRewake` handler answered, once it is done: its decision is
/// ignored (the action it would have controlled is done); its `additionalContext` and
/// `systemMessage` reach the model as reminders of the run (`ctx`), and for `asyncRewake` an
/// exit 2 does too: its stderr, or its stdout if stderr is empty. Without a run (SessionEnd,
/// Notification) everything is only logged.
pub(crate) fn background_done(
    event: HookEvent,
    handler: &Handler,
    result: Result<Reply, Failure>,
    ctx: Option<&RunContext>,
) {
    let name = &handler.label;
    let wake = match &result {
        Ok(reply) if handler.rewake && reply.code == Some(2) => {
            let stderr = reply.stderr.trim();
            let said = if stderr.is_empty() {
                match &reply.stdout {
                    Stdout::Text(text) => text.trim().to_owned(),
                    Stdout::Json(value) => value.to_string(),
                }
            } else {
                stderr.to_owned()
            };
            Some(if said.is_empty() {
                format!("The background {event} hook `{name}` exited with status 2.")
            } else {
                cap(said)
            })
        }
        _ => None,
    };
    let verdict = interpret(event, handler, result, Report::Log);
    tracing::debug!(hook = %name, event = %event, ?verdict, "async hook done");
    let Some(ctx) = ctx else {
        return;
    };
    if let Some(text) = wake {
        ctx.remind(text);
    }
    for text in verdict.contexts.into_iter().chain(verdict.system_message) {
        ctx.remind(text);
    }
}

/// Plain stdout: JSON if it starts with `{` and parses, else (`context`: on exit 0) context
/// for UserPromptSubmit and SessionStart (ignored elsewhere).
fn plain(
    event: HookEvent,
    handler: &Handler,
    text: String,
    context: bool,
    verdict: &mut Verdict,
    report: Report<'_>,
) -> Option<Map<String, Value>> {
    let name = &handler.label;
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        match serde_json::from_str::<Map<String, Value>>(trimmed) {
            Ok(map) => return Some(map),
            // As Claude Code reads it (measured against 2.1.328): plain text, below.
            Err(e) => {
                report.warn(format!(
                    "{event} hook `{name}` printed invalid JSON ({e}); it is read as plain text"
                ));
                if handler.fail_closed {
                    verdict.failed = Some(format!(
                        "hook `{name}` printed invalid JSON (the hook is fail-closed)"
                    ));
                }
            }
        }
    }
    if trimmed.is_empty() {
        return None;
    }
    if context && event.stdout_is_context() {
        verdict.contexts.push(cap(trimmed.to_owned()));
        verdict.plain_stdout = true;
    } else {
        tracing::debug!(hook = %name, event = %event, stdout = %trimmed, "hook stdout ignored");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_counts_characters() {
        assert_eq!(cap("short".into()), "short");
        let long = "é".repeat(MAX_CHARS + 5);
        let capped = cap(long);
        assert!(
            capped.ends_with("\n... (truncated 5 characters)"),
            "{capped}"
        );
        assert_eq!(capped.chars().filter(|&c| c == 'é').count(), MAX_CHARS);
    }

    mod fuzz {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::*;

        fn handler(fail_closed: bool) -> Handler {
            Handler {
                exec: Exec::Shell {
                    shell: "sh",
                    command: "hook".into(),
                },
                timeout: None,
                fail_closed,
                background: false,
                rewake: false,
                persistent: None,
                origin: "fuzz".into(),
                label: "hook".into(),
                extras: Default::default(),
            }
        }

        /// JSON made of what answers hold: the protocol's keys with values of any type.
        fn answer() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(|f| json!(f)),
                prop_oneof![
                    Just("allow"),
                    Just("deny"),
                    Just("ask"),
                    Just("defer"),
                    Just("block"),
                    Just("approve"),
                    Just("PreToolUse"),
                    Just("Stop"),
                    Just(""),
                ]
                .prop_map(Value::from),
                ".{0,40}".prop_map(Value::from),
            ];
            let keys = prop_oneof![
                Just("continue"),
                Just("stopReason"),
                Just("systemMessage"),
                Just("decision"),
                Just("reason"),
                Just("hookSpecificOutput"),
                Just("hookEventName"),
                Just("permissionDecision"),
                Just("permissionDecisionReason"),
                Just("updatedInput"),
                Just("updatedToolOutput"),
                Just("updatedMCPToolOutput"),
                Just("additionalContext"),
                Just("llm_request"),
                Just("llm_response"),
                Just("messages"),
                Just("settings"),
                Just("message"),
                Just("x"),
            ];
            leaf.prop_recursive(4, 64, 8, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::vec((keys.clone(), inner), 0..8).prop_map(|kv| {
                        Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                    }),
                ]
            })
        }

        /// What a one-shot hook prints: JSON, JSON cut short, text, or any bytes (lossy).
        fn stdout() -> impl Strategy<Value = String> {
            prop_oneof![
                answer().prop_map(|v| v.to_string()),
                (answer(), any::<prop::sample::Index>()).prop_map(|(v, at)| {
                    let text = v.to_string();
                    let cut = at.index(text.len() + 1);
                    String::from_utf8_lossy(&text.as_bytes()[..cut]).into_owned()
                }),
                ".{0,200}",
                prop::collection::vec(any::<u8>(), 0..200)
                    .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            ]
        }

        fn event() -> impl Strategy<Value = HookEvent> {
            prop::sample::select(HookEvent::ALL.to_vec())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

            /// Whatever a one-shot hook prints and however it exits: a verdict, no panic; a
            /// fail-closed hook that exits neither 0 nor 2 always fails.
            #[test]
            fn one_shot_answers_never_panic(
                event in event(),
                fail_closed in any::<bool>(),
                code in prop_oneof![Just(Some(0)), Just(Some(2)), Just(None), any::<i32>().prop_map(Some)],
                out in stdout(),
                err in ".{0,100}",
            ) {
                let h = handler(fail_closed);
                // Another exit with a JSON object: the JSON decides, no failure.
                let is_json = serde_json::from_str::<Map<String, Value>>(out.trim()).is_ok();
                let reply = Reply { code, stdout: Stdout::Text(out), stderr: err };
                let verdict = interpret(event, &h, Ok(reply), Report::Log);
                if fail_closed && !matches!(code, Some(0 | 2)) && !is_json {
                    prop_assert!(verdict.failed.is_some());
                }
                if code == Some(2) && exit_2(event) == Exit2::Blocks {
                    prop_assert!(verdict.block.is_some());
                }
                for text in verdict.contexts.iter().chain(&verdict.block).chain(&verdict.stop) {
                    prop_assert!(text.chars().count() <= MAX_CHARS + 40);
                }
            }

            /// A persistent hook's `output` (any JSON): a verdict, no panic.
            #[test]
            fn persistent_outputs_never_panic(
                event in event(),
                fail_closed in any::<bool>(),
                code in prop_oneof![Just(Some(0)), Just(Some(2)), any::<i32>().prop_map(Some)],
                output in answer(),
            ) {
                let h = handler(fail_closed);
                let reply = Reply { code, stdout: Stdout::Json(output), stderr: String::new() };
                let _ = interpret(event, &h, Ok(reply), Report::Log);
            }
        }
    }
}
