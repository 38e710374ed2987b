//! The protocol's JSON fields of a handler's answer (`continue`, `decision`,
//! `hookSpecificOutput` and what each event reads of it), read into a [`Verdict`]; what is
//! malformed is reported and ignored, or, where ignoring it would allow what the hook meant
//! to deny, denies.

use serde_json::{Map, Value};

use super::verdict::{Elicit, Permission, Verdict, cap, text};
use crate::{handler::Handler, reply::Report};
use tower_agent_layers::hooks::{HookEvent, PermissionRequest};

/// `string`, `array` …: what a JSON value is.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The JSON fields of an answer; the reason of a `permissionDecision: "deny"` that gave one
/// (the blocking reason of an exit 2).
pub(super) fn read_json(
    event: HookEvent,
    handler: &Handler,
    json: &Map<String, Value>,
    verdict: &mut Verdict,
    report: Report<'_>,
) -> Option<String> {
    let name = &handler.label;
    read_common(event, name, json, verdict, report);
    let specific = specific_output(event, name, json, report)?;
    let mut denial = None;
    if matches!(event, HookEvent::PreToolUse | HookEvent::PreModelSwitch)
        && let Some((p, given)) = permission_decision(event, name, specific, report)
    {
        if p == Permission::Deny {
            denial.clone_from(&given);
        }
        let why = given.unwrap_or_else(|| format!("decided by hook `{name}`"));
        verdict.permission = Some((p, why));
        if p == Permission::Defer {
            // The reference: for "defer", the reason, updatedInput and
            // additionalContext are ignored.
            return None;
        }
    }
    if event == HookEvent::PermissionRequest {
        verdict.request = permission_request(event, name, specific.get("decision"), report);
    }
    if event == HookEvent::PermissionDenied {
        verdict.retry = specific.get("retry") == Some(&Value::Bool(true));
    }
    if matches!(event, HookEvent::Elicitation | HookEvent::ElicitationResult) {
        verdict.elicitation = elicitation(event, name, specific, report);
    }
    if matches!(event, HookEvent::CwdChanged | HookEvent::FileChanged) {
        verdict.watch_paths = watch_paths(event, name, specific.get("watchPaths"), report);
    }
    read_updates(event, name, specific, verdict, report);
    denial
}

/// The fields every event reads: `continue` / `stopReason`, `systemMessage`, and `decision`
/// / `reason` (`block`, or the legacy PreToolUse `approve`).
fn read_common(
    event: HookEvent,
    name: &str,
    json: &Map<String, Value>,
    verdict: &mut Verdict,
    report: Report<'_>,
) {
    if json.get("continue") == Some(&Value::Bool(false)) {
        verdict.stop = Some(
            text(json.get("stopReason"))
                .unwrap_or_else(|| format!("hook `{name}` stopped the run")),
        );
    }
    if let Some(message) = text(json.get("systemMessage")) {
        report.warn(format!("{event} hook `{name}`: {message}"));
        verdict.system_message = Some(message);
    }
    let reason = text(json.get("reason"));
    match json.get("decision").and_then(Value::as_str) {
        Some("block") => {
            verdict.block = Some(reason.unwrap_or_else(|| format!("blocked by hook `{name}`")));
        }
        // Legacy PreToolUse answer.
        Some("approve") if event == HookEvent::PreToolUse => {
            verdict.permission = Some((Permission::Allow, reason.unwrap_or_default()));
        }
        Some(other) => tracing::debug!(hook = %name, decision = other, "unknown decision ignored"),
        None => {}
    }
}

/// `hookSpecificOutput`, if the answer has one that is an object for this event (anything
/// else is reported and ignored).
fn specific_output<'j>(
    event: HookEvent,
    name: &str,
    json: &'j Map<String, Value>,
    report: Report<'_>,
) -> Option<&'j Map<String, Value>> {
    let Value::Object(specific) = json.get("hookSpecificOutput")? else {
        report.warn(format!(
            "{event} hook `{name}`: hookSpecificOutput is not an object; ignored"
        ));
        return None;
    };
    if let Some(said) = specific.get("hookEventName").and_then(Value::as_str)
        && HookEvent::parse(said) != Some(event)
    {
        report.warn(format!(
            "{event} hook `{name}` answered for event `{said}`; its hookSpecificOutput is ignored"
        ));
        return None;
    }
    Some(specific)
}

/// A PreToolUse `permissionDecision` and its `permissionDecisionReason`; an unknown decision
/// is reported and ignored.
fn permission_decision(
    event: HookEvent,
    name: &str,
    specific: &Map<String, Value>,
    report: Report<'_>,
) -> Option<(Permission, Option<String>)> {
    let permission = match specific.get("permissionDecision").and_then(Value::as_str)? {
        "allow" => Permission::Allow,
        "ask" => Permission::Ask,
        "deny" => Permission::Deny,
        "defer" => Permission::Defer,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: unknown permissionDecision `{other}`; ignored"
            ));
            return None;
        }
    };
    Some((permission, text(specific.get("permissionDecisionReason"))))
}

/// What `hookSpecificOutput` replaces or adds: `updatedInput` (an object; anything else
/// denies a PreToolUse call), `updatedToolOutput`, `additionalContext`, `displayContent`,
/// `llm_request` and `llm_response`.
fn read_updates(
    event: HookEvent,
    name: &str,
    specific: &Map<String, Value>,
    verdict: &mut Verdict,
    report: Report<'_>,
) {
    match specific.get("updatedInput") {
        None | Some(Value::Null) => {}
        Some(input @ Value::Object(_)) => verdict.updated_input = Some(input.clone()),
        // The hook's fault, not the model's: the call it meant to rewrite is denied.
        Some(other) if event == HookEvent::PreToolUse => {
            let why = format!(
                "answered an updatedInput that is not a JSON object (a {})",
                json_kind(other)
            );
            report.warn(format!("{event} hook `{name}` {why}; the call is denied"));
            verdict.failed = Some(format!("hook `{name}` {why}"));
        }
        Some(_) => {}
    }
    if let Some(output) = specific
        .get("updatedToolOutput")
        .or_else(|| specific.get("updatedMCPToolOutput"))
        .filter(|v| !v.is_null())
    {
        verdict.updated_output = Some(output.clone());
    }
    if let Some(context) = text(specific.get("additionalContext")) {
        verdict.contexts.push(context);
    }
    if let Some(Value::String(display)) = specific.get("displayContent") {
        verdict.display = Some(cap(display.clone()));
    }
    if let Some(request) = specific.get("llm_request").filter(|v| !v.is_null()) {
        verdict.llm_request = Some(request.clone());
    }
    if let Some(response) = specific.get("llm_response").filter(|v| !v.is_null()) {
        verdict.llm_response = Some(response.clone());
    }
}

/// `watchPaths`: an array of path strings (at most
/// [`MAX_WATCHED`](tower_agent_layers::hooks::MAX_WATCHED) are kept); anything else is ignored,
/// with a warning.
fn watch_paths(
    event: HookEvent,
    name: &str,
    value: Option<&Value>,
    report: Report<'_>,
) -> Option<Vec<std::path::PathBuf>> {
    let items = match value? {
        Value::Null => return None,
        Value::Array(items) => items,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: watchPaths is not an array (a {}); ignored",
                json_kind(other)
            ));
            return None;
        }
    };
    let mut paths = Vec::new();
    for item in items.iter().take(tower_agent_layers::hooks::MAX_WATCHED) {
        match item {
            Value::String(p) if !p.is_empty() => paths.push(p.into()),
            other => {
                report.warn(format!(
                    "{event} hook `{name}`: watchPaths holds a {}, not a path; ignored",
                    json_kind(other)
                ));
                return None;
            }
        }
    }
    Some(paths)
}

/// An Elicitation / ElicitationResult answer: `action` (`accept`, `decline`, `cancel`) and,
/// for `accept`, `content` (an object); anything else is no answer (reported).
fn elicitation(
    event: HookEvent,
    name: &str,
    specific: &Map<String, Value>,
    report: Report<'_>,
) -> Option<(Elicit, Option<Value>)> {
    let action = match specific.get("action")? {
        Value::Null => return None,
        Value::String(a) if a == "accept" => Elicit::Accept,
        Value::String(a) if a == "decline" => Elicit::Decline,
        Value::String(a) if a == "cancel" => Elicit::Cancel,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: action {other} is not \"accept\", \"decline\" or \"cancel\"; ignored"
            ));
            return None;
        }
    };
    let content = match specific.get("content") {
        None | Some(Value::Null) => None,
        Some(c @ Value::Object(_)) => Some(c.clone()),
        Some(other) => {
            // An accept of content nobody can read is no accept.
            report.warn(format!(
                "{event} hook `{name}`: content is a {}, not an object; the elicitation is declined",
                json_kind(other)
            ));
            return Some((Elicit::Decline, None));
        }
    };
    Some((action, content.filter(|_| action == Elicit::Accept)))
}

/// A PermissionRequest `decision` object: `behavior` `allow` (with `updatedInput`, an object)
/// or `deny` (with `message` and `interrupt`); anything else is no decision (reported).
fn permission_request(
    event: HookEvent,
    name: &str,
    decision: Option<&Value>,
    report: Report<'_>,
) -> Option<PermissionRequest> {
    let decision = match decision? {
        Value::Null => return None,
        Value::Object(d) => d,
        other => {
            report.warn(format!(
                "{event} hook `{name}`: decision is a {}, not an object; ignored",
                json_kind(other)
            ));
            return None;
        }
    };
    match decision.get("behavior").and_then(Value::as_str) {
        Some("allow") => match decision.get("updatedInput") {
            None | Some(Value::Null) => Some(PermissionRequest::Allow {
                updated_input: None,
            }),
            Some(input @ Value::Object(_)) => Some(PermissionRequest::Allow {
                updated_input: Some(input.clone()),
            }),
            // The hook's fault: an allow of arguments nobody can run is no allow.
            Some(other) => {
                let message = format!(
                    "hook `{name}` allowed with an updatedInput that is not a JSON object (a {})",
                    json_kind(other)
                );
                report.warn(format!("{event} {message}; the call is denied"));
                Some(PermissionRequest::Deny {
                    message,
                    interrupt: false,
                })
            }
        },
        Some("deny") => Some(PermissionRequest::Deny {
            message: text(decision.get("message"))
                .unwrap_or_else(|| format!("denied by hook `{name}`")),
            interrupt: decision.get("interrupt") == Some(&Value::Bool(true)),
        }),
        other => {
            report.warn(format!(
                "{event} hook `{name}`: decision.behavior {} is neither \"allow\" nor \"deny\"; ignored",
                other.map_or_else(|| "missing".to_owned(), |b| format!("`{b}`"))
            ));
            None
        }
    }
}
