//! The wire request: a [`ModelRequest`] as a Chat Completions body, with the reasoning
//! replayed to servers that want it back.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;
use tower_agent_core::{
    message::{Content, Message, Role},
    model::{ModelRequest, ResponseFormat, ToolChoice},
};

use super::MaxTokensParam;

#[derive(Serialize)]
/// The body's fields with what does not change within a run first (settings, then tools) and
/// the growing conversation last, so a request's body is a byte-identical prefix of the next
/// request's up to its last messages (prompt caching matches prefixes).
pub(super) struct ChatRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ChatTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    messages: Vec<ChatMessage<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum ChatMessage<'a> {
    System {
        content: Cow<'a, str>,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl<'a> },
    File { file: FileData<'a> },
}

#[derive(Serialize)]
struct FileData<'a> {
    file_data: &'a str,
    filename: &'a str,
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: &'a str,
}

#[derive(Serialize)]
struct ChatToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionCall<'a>,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    name: &'a str,
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionSpec<'a>,
}

#[derive(Serialize)]
struct FunctionSpec<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

pub(super) fn request_body<'a>(
    req: &'a ModelRequest,
    default_model: &'a str,
    param: MaxTokensParam,
) -> ChatRequest<'a> {
    let settings = &req.settings;
    let tools: Vec<ChatTool<'a>> = req
        .tools
        .iter()
        .map(|spec| ChatTool {
            kind: "function",
            function: FunctionSpec {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
            },
        })
        .collect();
    let (max_completion_tokens, max_tokens) = match param {
        MaxTokensParam::MaxCompletionTokens => (settings.max_tokens, None),
        MaxTokensParam::MaxTokens => (None, settings.max_tokens),
    };
    ChatRequest {
        model: settings.model.as_deref().unwrap_or(default_model),
        messages: chat_messages(req.messages.iter()),
        tool_choice: (!tools.is_empty()).then(|| tool_choice(settings.tool_choice.as_ref())),
        parallel_tool_calls: settings.parallel_tool_calls.filter(|_| !tools.is_empty()),
        prompt_cache_key: settings.prompt_cache_key.as_deref(),
        tools,
        temperature: settings.temperature,
        top_p: settings.top_p,
        stop: &settings.stop,
        seed: settings.seed,
        response_format: settings.response_format.as_ref().map(response_format),
        max_completion_tokens,
        max_tokens,
        reasoning_effort: settings.reasoning_effort.as_ref().map(|e| e.as_str()),
        stream: settings.stream,
        stream_options: settings.stream.then_some(StreamOptions {
            include_usage: true,
        }),
    }
}

/// `tool_choice` as Chat Completions documents it (`auto` when not set).
fn tool_choice(choice: Option<&ToolChoice>) -> Value {
    match choice {
        None | Some(ToolChoice::Auto) => Value::from("auto"),
        Some(ToolChoice::None) => Value::from("none"),
        Some(ToolChoice::Required) => Value::from("required"),
        Some(ToolChoice::Tool(name)) => {
            serde_json::json!({"type": "function", "function": {"name": &**name}})
        }
        // NOTE: a choice added to the core after this provider was written: the default.
        Some(_) => Value::from("auto"),
    }
}

/// `response_format: {type: "json_schema", json_schema: {name, schema, strict}}`.
fn response_format(format: &ResponseFormat) -> Value {
    serde_json::json!({
        "type": "json_schema",
        "json_schema": {"name": &*format.name, "schema": &*format.schema, "strict": format.strict},
    })
}

/// The conversation as Chat Completions messages. A `tool` message holds only text, so the
/// images and documents a tool returned go in one `user` message right after the run of tool
/// results, each tool's introduced by the call id it came from (the workaround OpenAI's forum and the
/// peers use; the API has no image in a tool message).
fn chat_messages<'a>(history: impl Iterator<Item = &'a Message>) -> Vec<ChatMessage<'a>> {
    let mut out = Vec::new();
    let mut images: Vec<Part<'a>> = Vec::new();
    for m in history {
        if m.role != Role::Tool && !images.is_empty() {
            out.push(ChatMessage::User {
                content: UserContent::Parts(std::mem::take(&mut images)),
            });
        }
        if m.role == Role::Tool {
            let mut media = m
                .content
                .iter()
                .filter(|c| matches!(c, Content::Image { .. } | Content::Document { .. }));
            if let Some(first) = media.next() {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                images.push(Part::Text {
                    text: Cow::Owned(format!("What tool call {id} returned:")),
                });
                images.extend(std::iter::once(first).chain(media).filter_map(part));
            }
        }
        out.push(chat_message(m));
    }
    if !images.is_empty() {
        out.push(ChatMessage::User {
            content: UserContent::Parts(images),
        });
    }
    out
}

/// A content part: `text`, `image_url`, or `file` (a document as a `data:` URL); reasoning
/// is never a part.
fn part(c: &Content) -> Option<Part<'_>> {
    Some(match c {
        Content::Text { text } => Part::Text {
            text: Cow::Borrowed(text),
        },
        Content::Image { url } => Part::ImageUrl {
            image_url: ImageUrl { url },
        },
        Content::Document { url, name } => Part::File {
            file: FileData {
                file_data: url,
                filename: name.as_deref().unwrap_or("document.pdf"),
            },
        },
        Content::Reasoning(_) | Content::Provider(_) => return None,
    })
}

/// The first document of the history given by an `https:` (not a `data:`) URL: Chat
/// Completions takes a file only as data or as an uploaded file's id.
pub(super) fn remote_document(req: &ModelRequest) -> Option<&str> {
    req.messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|c| match c {
            Content::Document { url, .. } if !url.starts_with("data:") => Some(url.as_str()),
            _ => None,
        })
}

fn chat_message(m: &Message) -> ChatMessage<'_> {
    match m.role {
        Role::System => ChatMessage::System { content: m.text() },
        Role::User => {
            let content = if m
                .content
                .iter()
                .all(|c| !matches!(c, Content::Image { .. }))
            {
                UserContent::Text(m.text())
            } else {
                UserContent::Parts(m.content.iter().filter_map(part).collect())
            };
            ChatMessage::User { content }
        }
        Role::Assistant => {
            let text = m.text();
            ChatMessage::Assistant {
                content: (!text.is_empty() || m.tool_calls.is_empty()).then_some(text),
                reasoning_content: None,
                tool_calls: m
                    .tool_calls
                    .iter()
                    .map(|call| ChatToolCall {
                        id: &call.id,
                        kind: "function",
                        function: FunctionCall {
                            name: &call.name,
                            arguments: match &call.arguments {
                                // Arguments the model wrote that were not JSON go back as
                                // they were.
                                Value::String(raw) => Cow::Borrowed(raw),
                                other => Cow::Owned(other.to_string()),
                            },
                        },
                    })
                    .collect(),
            }
        }
        Role::Tool => ChatMessage::Tool {
            tool_call_id: m.tool_call_id.as_deref().unwrap_or_default(),
            content: m.text(),
        },
    }
}

impl ChatRequest<'_> {
    /// The reasoning of the turns that made tool calls sent back: [`replay_reasoning`] on
    /// this body's messages.
    pub(super) fn replay_reasoning(&mut self, req: &ModelRequest) {
        replay_reasoning(&mut self.messages, req);
    }
}

/// Sets `reasoning_content` on the assistant messages of the turns that made tool calls
/// ([`ReasoningReplay::ToolTurns`](super::ReasoningReplay::ToolTurns)): a turn is the messages
/// between two user messages, as the server sees them (`out`, the messages as sent).
/// `chat_messages` keeps the assistant messages one to one and in order (it only adds user messages
/// for tools' images), so the n-th assistant message of `out` is the n-th of the history.
fn replay_reasoning(out: &mut [ChatMessage<'_>], req: &ModelRequest) {
    // The common case (a model that does not reason): nothing to send back, nothing built.
    if !req.messages.iter().any(|m| m.reasoning().next().is_some()) {
        return;
    }
    let mut assistants = req.messages.iter().filter(|m| m.role == Role::Assistant);
    let mut start = 0;
    while start < out.len() {
        let end = out[start + 1..]
            .iter()
            .position(|m| matches!(m, ChatMessage::User { .. }))
            .map_or(out.len(), |i| start + 1 + i);
        let turn = &mut out[start..end];
        // Each assistant message's reasoning text, and whether it made tool calls.
        let replies: Vec<(String, bool)> = turn
            .iter()
            .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
            .map_while(|_| assistants.next())
            .map(|m| {
                let text = m.reasoning().map(|r| r.text.as_str()).collect();
                (text, !m.tool_calls.is_empty())
            })
            .collect();
        if replies.iter().any(|(_, calls)| *calls) {
            let mut replies = replies.into_iter();
            for chat in turn.iter_mut() {
                if let ChatMessage::Assistant {
                    reasoning_content, ..
                } = chat
                    && let Some((text, _)) = replies.next()
                {
                    *reasoning_content = (!text.is_empty()).then_some(text);
                }
            }
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use tower_agent_core::message::{ToolCall, ToolOutput, ToolSpec};

    #[test]
    fn body_maps_messages_tools_and_settings() {
        let mut req = ModelRequest::new(vec![
            Message::system("Be brief."),
            Message::user("Weather?"),
            Message::assistant("").with_tool_calls(vec![
                ToolCall::new("call_1", "weather", json!({"city": "Oslo"})),
                ToolCall::new("call_2", "weather", Value::String("{bad".into())),
            ]),
            Message::tool_result(&ToolOutput::text("call_1", "rain")),
            Message::tool_result(&ToolOutput::error("call_2", "not JSON")),
        ]);
        req.tools = Arc::new(vec![ToolSpec::new(
            "weather",
            "Weather",
            json!({"type": "object"}),
        )]);
        req.settings = tower_agent_core::model::ModelSettings::default()
            .temperature(0.5)
            .max_tokens(100);
        let body =
            serde_json::to_value(request_body(&req, "m", MaxTokensParam::default())).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                        {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{bad"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
                    {"role": "tool", "tool_call_id": "call_2", "content": "not JSON"},
                ],
                "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather", "parameters": {"type": "object"}}}],
                "tool_choice": "auto",
                "temperature": 0.5,
                "max_completion_tokens": 100,
            })
        );
        let legacy =
            serde_json::to_value(request_body(&req, "m", MaxTokensParam::MaxTokens)).unwrap();
        assert_eq!(legacy["max_tokens"], 100);
        assert!(legacy.get("max_completion_tokens").is_none());
    }

    #[test]
    fn user_images_become_parts() {
        let mut m = Message::user("What is this?");
        m.content.push(Content::Image {
            url: "https://example.com/a.png".into(),
        });
        let v = serde_json::to_value(chat_message(&m)).unwrap();
        assert_eq!(
            v,
            json!({"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ]})
        );
    }
}
