//! The crate's types as the spec's envelope members (§4.2), and transformed members back.

use serde_json::{Map, Value, json};
use tower_agent_core::{
    message::{Content, Message, Messages, Role, TOOL_RESPONSE, ToolCall, ToolOutput},
    model::ModelResponse,
};

/// A message as `messages[]` shows it: `role`, `content` (its text), and `tool_calls` or
/// `tool_call_id` when it has them.
fn message(m: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), Value::String(role(m.role).to_owned()));
    out.insert("content".into(), Value::String(m.text().into_owned()));
    if !m.tool_calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(tool_calls(&m.tool_calls)));
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), Value::String(id.clone()));
    }
    Value::Object(out)
}

fn role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// `pre_model_call`'s `messages`.
pub(crate) fn messages(messages: &Messages) -> Vec<Value> {
    messages.iter().map(message).collect()
}

/// The messages as a transform left them: each message whose envelope changed gets the new
/// text and tool-call arguments; messages a transform added (or whose role it changed) are
/// taken as they are written.
pub(crate) fn apply_messages(messages: &mut Messages, before: &[Value], after: &Value) {
    let Some(after) = after.as_array() else {
        return;
    };
    let mut out: Vec<Message> = Vec::with_capacity(after.len());
    for (i, new) in after.iter().enumerate() {
        let old = messages.iter().nth(i);
        match (old, before.get(i)) {
            (Some(old), Some(was)) if was == new => out.push(old.clone()),
            (Some(old), Some(was)) if was.get("role") == new.get("role") => {
                let mut m = old.clone();
                if new.get("content") != was.get("content") {
                    set_text(&mut m, &text_of(new.get("content")));
                }
                if new.get("tool_calls") != was.get("tool_calls") {
                    apply_calls(&mut m.tool_calls, new.get("tool_calls"));
                }
                out.push(m);
            }
            _ => out.push(Message::new(
                role_of(new.get("role")),
                text_of(new.get("content")),
            )),
        }
    }
    *messages = out.into();
}

fn role_of(role: Option<&Value>) -> Role {
    match role.and_then(Value::as_str) {
        Some("system") => Role::System,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        _ => Role::User,
    }
}

/// `tool_calls[]` of a message or response: `id`, `name`, `args`.
pub(crate) fn tool_calls(calls: &[ToolCall]) -> Vec<Value> {
    calls
        .iter()
        .map(|c| json!({ "id": c.id, "name": c.name, "args": c.arguments }))
        .collect()
}

/// Each call's name and arguments as `new` (a transformed `tool_calls`) has them, by index.
fn apply_calls(calls: &mut [ToolCall], new: Option<&Value>) {
    let Some(new) = new.and_then(Value::as_array) else {
        return;
    };
    for (call, new) in calls.iter_mut().zip(new) {
        if let Some(args) = new.get("args") {
            call.arguments = args.clone();
        }
        if let Some(name) = new.get("name").and_then(Value::as_str) {
            name.clone_into(&mut call.name);
        }
    }
}

/// Why a call's arguments are outside the identity provider's domain (§10.2), if one's are:
/// arguments a provider kept as the model's raw text because they are JSON this crate's
/// numbers cannot hold exactly (an integer beyond 64 bits) — checked on that text, before
/// any parser rounds it.
pub(crate) fn beyond_i_json(calls: &[ToolCall]) -> Option<&'static str> {
    calls.iter().find_map(|call| match &call.arguments {
        Value::String(raw) if serde_json::from_str::<Value>(raw).is_ok() => {
            agent_hooks::ffi_surface::canonical_json(raw)
                .is_err()
                .then_some("tool_calls[].args: an integer beyond 2^53 (see spec §4.4)")
        }
        _ => None,
    })
}

/// A value as text: a string as it is, anything else as JSON.
pub(crate) fn text_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

/// `message`'s text replaced by `text`, in the place of its first text part (its other
/// parts, reasoning and images, kept).
pub(crate) fn set_text(message: &mut Message, text: &str) {
    let at = message
        .content
        .iter()
        .position(|c| matches!(c, Content::Text { .. }))
        .unwrap_or(0);
    message
        .content
        .retain(|c| !matches!(c, Content::Text { .. }));
    if !text.is_empty() {
        let at = at.min(message.content.len());
        message.content.insert(
            at,
            Content::Text {
                text: text.to_owned(),
            },
        );
    }
}

/// An answer's `content`: its text, `null` for an answer that only calls tools.
pub(crate) fn content(message: &Message) -> Value {
    let text = message.text();
    if text.is_empty() && !message.tool_calls.is_empty() {
        Value::Null
    } else {
        Value::String(text.into_owned())
    }
}

/// An answer's `finish_reason`: the provider's own word, else the stop reason's.
pub(crate) fn finish_reason(response: &ModelResponse) -> String {
    if let Some(reason) = response.meta.finish_reasons.first() {
        return reason.clone();
    }
    use tower_agent_core::message::StopReason;
    match &response.stop_reason {
        StopReason::EndTurn | StopReason::StopSequence => "stop".into(),
        StopReason::ToolUse => "tool_calls".into(),
        StopReason::MaxTokens => "length".into(),
        StopReason::Refusal => "content_filter".into(),
        StopReason::PauseTurn => "pause_turn".into(),
        StopReason::Other(other) => other.clone(),
    }
}

/// The answer as a transformed `response` left it: its text and its calls' arguments.
pub(crate) fn apply_response(message: &mut Message, before: &Value, after: &Value) {
    if after.get("content") != before.get("content") {
        set_text(message, &text_of(after.get("content")));
    }
    if after.get("tool_calls") != before.get("tool_calls") {
        apply_calls(&mut message.tool_calls, after.get("tool_calls"));
    }
}

/// `tool_result.value`: the structured response the tool put in its output's metadata
/// ([`TOOL_RESPONSE`]), else the output's text.
pub(crate) fn tool_value(output: &ToolOutput) -> Value {
    output
        .metadata
        .get(TOOL_RESPONSE)
        .cloned()
        .unwrap_or_else(|| Value::String(output.content.clone()))
}

/// The output replaced by a transformed `tool_result.value`: its text (a string as it is,
/// anything else as JSON text) and, for a structured value, its [`TOOL_RESPONSE`].
pub(crate) fn apply_tool_value(output: &mut ToolOutput, value: Value) {
    output.content = text_of(Some(&value));
    if value.is_string() {
        output.metadata.remove(TOOL_RESPONSE);
    } else {
        output.metadata.insert(TOOL_RESPONSE.into(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transformed_message_keeps_its_other_parts() {
        let mut m = Message::new(Role::Assistant, "old");
        m.content.push(Content::Image {
            url: "data:x".into(),
        });
        set_text(&mut m, "new");
        assert_eq!(m.text(), "new");
        assert_eq!(m.content.len(), 2);
        set_text(&mut m, "");
        assert_eq!(m.content.len(), 1, "an empty text leaves no text part");
    }

    #[test]
    fn messages_round_trip_and_apply_changes_by_index() {
        let mut msgs: Messages = vec![
            Message::new(Role::System, "sys"),
            Message::new(Role::User, "hello"),
        ]
        .into();
        let before = messages(&msgs);
        assert_eq!(before[1], json!({"role": "user", "content": "hello"}));
        let mut after = before.clone();
        after[1]["content"] = json!("[redacted]");
        after.push(json!({"role": "user", "content": "added"}));
        apply_messages(&mut msgs, &before, &Value::Array(after));
        let texts: Vec<String> = msgs.iter().map(|m| m.text().into_owned()).collect();
        assert_eq!(texts, ["sys", "[redacted]", "added"]);
    }

    #[test]
    fn tool_values_are_text_unless_structured() {
        let mut out = ToolOutput::text("c", "4");
        assert_eq!(tool_value(&out), json!("4"));
        apply_tool_value(&mut out, json!({"status": 200}));
        assert_eq!(out.content, r#"{"status":200}"#);
        assert_eq!(tool_value(&out), json!({"status": 200}));
        apply_tool_value(&mut out, json!("plain"));
        assert_eq!(tool_value(&out), json!("plain"));
    }
}
