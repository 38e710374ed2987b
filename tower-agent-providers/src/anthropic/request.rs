//! The wire request: a [`ModelRequest`] as a Messages API body, with its cache breakpoints.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;
use tower_agent_core::{
    message::{Content, Message, Reasoning, Role},
    model::{
        ModelRequest, ModelSettings, REMINDER_OPEN, ToolChoice,
        error::{ProviderError, ProviderErrorKind},
    },
};

use super::PROVIDER;

#[derive(Serialize)]
/// The body's fields in the order of the API's prompt-cache prefix (tools, then system, then
/// messages), after the settings, which do not change within a run: a request's body is then
/// a byte-identical prefix of the next request's up to its last messages, so what serves the
/// prompt cache also serves any cache keyed on the bytes.
pub(super) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ApiTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<SystemPrompt>,
    messages: Vec<ApiMessage<'a>>,
}

/// The system prompt: a string, or one text block when it carries a cache breakpoint.
#[derive(Serialize)]
#[serde(untagged)]
enum SystemPrompt {
    Text(String),
    Blocks([SystemBlock; 1]),
}

#[derive(Serialize)]
struct SystemBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
    cache_control: CacheControl,
}

/// A prompt-caching breakpoint: `{type: "ephemeral"}`.
#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

impl MessagesRequest<'_> {
    /// Prompt-caching breakpoints
    /// ([`AnthropicBuilder::prompt_caching`](super::AnthropicBuilder::prompt_caching)): on the last
    /// tool, on the system prompt (then sent as one text block), and on the last block of the
    /// conversation that the next request repeats — the last one that is not a `<system-reminder>`
    /// text ([`ModelRequest::append_reminder`](tower_agent_core::model::ModelRequest::append_reminder)), which
    /// the next request replaces. Three breakpoints, within the API's limit of four; thinking
    /// blocks are never marked (the API does not allow it), nor the blocks kept verbatim
    /// ([`Content::Provider`]), which go back exactly as they came.
    pub(super) fn cache_breakpoints(&mut self) {
        if let Some(tool) = self.tools.last_mut() {
            tool.cache_control = Some(EPHEMERAL);
        }
        if let Some(SystemPrompt::Text(text)) = self.system.take() {
            self.system = Some(SystemPrompt::Blocks([SystemBlock {
                kind: "text",
                text,
                cache_control: EPHEMERAL,
            }]));
        }
        let is_reminder = |text: &str| text.starts_with(REMINDER_OPEN);
        for message in self.messages.iter_mut().rev() {
            match &mut message.content {
                ApiContent::Text(text) if is_reminder(text) => {}
                ApiContent::Text(text) => {
                    let text = std::mem::take(text);
                    message.content = ApiContent::Blocks(MarkedBlocks {
                        blocks: vec![Block::Text { text }],
                        mark: Some(0),
                    });
                    return;
                }
                ApiContent::Blocks(marked) => {
                    let last = marked.blocks.iter().rposition(|b| match b {
                        Block::Text { text } => !is_reminder(text),
                        Block::Image { .. }
                        | Block::Document { .. }
                        | Block::ToolUse { .. }
                        | Block::ToolResult { .. } => true,
                        Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::Raw(_) => {
                            false
                        }
                    });
                    if let Some(i) = last {
                        marked.mark = Some(i);
                        return;
                    }
                }
            }
        }
    }
}

/// A message's blocks, one of which may carry a cache breakpoint.
struct MarkedBlocks<'a> {
    blocks: Vec<Block<'a>>,
    mark: Option<usize>,
}

impl Serialize for MarkedBlocks<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;

        #[derive(Serialize)]
        struct Marked<'b, 'a> {
            #[serde(flatten)]
            block: &'b Block<'a>,
            cache_control: CacheControl,
        }

        let mut seq = serializer.serialize_seq(Some(self.blocks.len()))?;
        for (i, block) in self.blocks.iter().enumerate() {
            if self.mark == Some(i) {
                seq.serialize_element(&Marked {
                    block,
                    cache_control: EPHEMERAL,
                })?;
            } else {
                seq.serialize_element(block)?;
            }
        }
        seq.end()
    }
}

/// `thinking: {type: "enabled", budget_tokens}`.
#[derive(Serialize)]
struct ThinkingConfig {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

#[derive(Serialize)]
pub(super) struct ApiMessage<'a> {
    role: &'static str,
    content: ApiContent<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ApiContent<'a> {
    Text(Cow<'a, str>),
    Blocks(MarkedBlocks<'a>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: Cow<'a, str>,
    },
    Image {
        source: ImageSource<'a>,
    },
    Document {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Cow<'a, Value>,
    },
    /// Signed reasoning, sent back as it came.
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    /// Encrypted reasoning, sent back as it came.
    RedactedThinking {
        data: &'a str,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "ToolResultContent::is_empty")]
        content: ToolResultContent<'a>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// A block of the API's that this crate does not model (a server tool's call or result),
    /// sent back as it came.
    #[serde(untagged)]
    Raw(&'a Value),
}

/// A `tool_result`'s content: its text, or text and image blocks when the tool returned
/// images.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

impl ToolResultContent<'_> {
    fn is_empty(&self) -> bool {
        match self {
            ToolResultContent::Text(text) => text.is_empty(),
            ToolResultContent::Blocks(blocks) => blocks.is_empty(),
        }
    }
}

/// A tool message's content: plain text when it has only text (the form the API documents
/// first), else `text` and `image` blocks in order.
fn tool_result_content(m: &Message) -> ToolResultContent<'_> {
    if m.content.iter().all(|c| c.as_text().is_some()) {
        ToolResultContent::Text(m.text())
    } else {
        ToolResultContent::Blocks(content_blocks(m))
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ImageSource<'a> {
    Url { url: &'a str },
    Base64 { media_type: &'a str, data: &'a str },
}

#[derive(Serialize)]
struct ApiTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// The request body. The system messages that open the conversation are the `system`
/// prompt; a system message later in it (a hook's context, placed where it arose) goes where
/// it is — as a message of role `system` when `in_place` (the API takes them after a user
/// turn for the models that have mid-conversation system messages), else as a user text in
/// a `<system-hook>` block.
pub(super) fn request_body<'a>(
    req: &'a ModelRequest,
    default_model: &'a str,
    default_max: u32,
    in_place: bool,
) -> MessagesRequest<'a> {
    let settings = &req.settings;
    let lead = req
        .messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let system: Vec<Cow<'_, str>> = req
        .messages
        .iter()
        .take(lead)
        .map(Message::text)
        .filter(|t| !t.is_empty())
        .collect();
    MessagesRequest {
        model: settings.model.as_deref().unwrap_or(default_model),
        max_tokens: settings.max_tokens.unwrap_or(default_max),
        system: (!system.is_empty()).then(|| SystemPrompt::Text(system.join("\n\n"))),
        messages: messages(req.messages.iter().skip(lead), in_place),
        tools: req
            .tools
            .iter()
            .map(|spec| ApiTool {
                name: &spec.name,
                description: &spec.description,
                input_schema: &spec.parameters,
                cache_control: None,
            })
            .collect(),
        tool_choice: (!req.tools.is_empty())
            .then(|| tool_choice(settings.tool_choice.as_ref(), settings.parallel_tool_calls))
            .flatten(),
        temperature: settings.temperature,
        top_p: settings.top_p,
        stop_sequences: &settings.stop,
        output_config: output_config(settings),
        thinking: settings
            .thinking_budget
            .map(|budget_tokens| ThinkingConfig {
                kind: "enabled",
                budget_tokens,
            }),
        stream: settings.stream,
    }
}

/// `tool_choice` as the Messages API documents it: `{type: auto | any | tool | none}`, with
/// `disable_parallel_tool_use` when parallel calls are turned off. `None` (the API's default,
/// `auto`) when nothing is set.
fn tool_choice(choice: Option<&ToolChoice>, parallel: Option<bool>) -> Option<Value> {
    let mut value = match choice {
        None if parallel.is_none() => return None,
        None | Some(ToolChoice::Auto) => serde_json::json!({"type": "auto"}),
        Some(ToolChoice::None) => return Some(serde_json::json!({"type": "none"})),
        Some(ToolChoice::Required) => serde_json::json!({"type": "any"}),
        Some(ToolChoice::Tool(name)) => serde_json::json!({"type": "tool", "name": &**name}),
        // NOTE: a choice added to the core after this provider was written: the default.
        Some(_) => serde_json::json!({"type": "auto"}),
    };
    if let Some(parallel) = parallel {
        value["disable_parallel_tool_use"] = Value::Bool(!parallel);
    }
    Some(value)
}

/// Settings the Messages API cannot honour: an error rather than a silently different call.
pub(super) fn unsupported(settings: &ModelSettings) -> Option<ProviderError> {
    settings.seed.is_some().then(|| {
        ProviderError::new(PROVIDER, ProviderErrorKind::InvalidRequest).with_message(
            "the Anthropic Messages API has no `seed`: unset ModelSettings::seed for this provider",
        )
    })
}

/// The conversation after its opening system messages, one API message per run of messages
/// of the same API role; a system message in it as [`request_body`] says.
pub(super) fn messages<'a>(
    history: impl Iterator<Item = &'a Message>,
    in_place: bool,
) -> Vec<ApiMessage<'a>> {
    let mut out: Vec<(&'static str, Vec<Block<'a>>)> = Vec::new();
    for m in history {
        let (role, blocks) = match m.role {
            Role::System if in_place => ("system", content_blocks(m)),
            Role::System => match m.text() {
                text if text.is_empty() => continue,
                text => {
                    let text = format!("<system-hook>\n{text}\n</system-hook>");
                    ("user", vec![Block::Text { text: text.into() }])
                }
            },
            Role::User => ("user", content_blocks(m)),
            Role::Assistant => {
                let mut blocks = content_blocks(m);
                blocks.extend(m.tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: if call.arguments.is_object() {
                        Cow::Borrowed(&call.arguments)
                    } else {
                        Cow::Owned(Value::Object(Default::default()))
                    },
                }));
                ("assistant", blocks)
            }
            Role::Tool => (
                "user",
                vec![Block::ToolResult {
                    tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
                    content: tool_result_content(m),
                    is_error: m.is_error,
                }],
            ),
        };
        if blocks.is_empty() {
            // The API rejects empty messages.
            continue;
        }
        match out.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, blocks)| {
            let content = match <[Block<'a>; 1]>::try_from(blocks) {
                Ok([Block::Text { text }]) => ApiContent::Text(text),
                Ok([other]) => ApiContent::Blocks(MarkedBlocks {
                    blocks: vec![other],
                    mark: None,
                }),
                Err(blocks) => ApiContent::Blocks(MarkedBlocks { blocks, mark: None }),
            };
            ApiMessage { role, content }
        })
        .collect()
}

fn content_blocks(m: &Message) -> Vec<Block<'_>> {
    m.content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } if text.is_empty() => None,
            Content::Text { text } => Some(Block::Text { text: text.into() }),
            Content::Image { url } => Some(Block::Image {
                source: image_source(url),
            }),
            Content::Reasoning(r) => thinking_block(r),
            Content::Document { url, name } => Some(Block::Document {
                source: image_source(url),
                title: name.as_deref(),
            }),
            Content::Provider(_) => c.provider_item(PROVIDER).map(Block::Raw),
        })
        .collect()
}

/// A reasoning part as the API wants it back: `redacted_thinking` with its data, or
/// `thinking` with its signature. Reasoning without either (from another provider) cannot be
/// verified by the API and is not sent.
fn thinking_block(r: &Reasoning) -> Option<Block<'_>> {
    match (&r.redacted, &r.signature) {
        (Some(data), _) => Some(Block::RedactedThinking { data }),
        (None, Some(signature)) => Some(Block::Thinking {
            thinking: &r.text,
            signature,
        }),
        (None, None) => None,
    }
}

/// A `data:<media type>;base64,<data>` URL as a base64 source, any other URL as a URL source.
fn image_source(url: &str) -> ImageSource<'_> {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((meta, data)) = rest.split_once(',')
        && let Some(media_type) = meta.strip_suffix(";base64")
    {
        return ImageSource::Base64 { media_type, data };
    }
    ImageSource::Url { url }
}

/// `output_config`: the answer's JSON schema (`format`) and the effort
/// ([`ModelSettings::reasoning_effort`] as `effort`, as Claude Code sends it), if any.
fn output_config(settings: &ModelSettings) -> Option<Value> {
    let format = settings.response_format.as_ref();
    let effort = settings.reasoning_effort.as_ref();
    if format.is_none() && effort.is_none() {
        return None;
    }
    let mut config = serde_json::Map::new();
    if let Some(f) = format {
        config.insert(
            "format".into(),
            serde_json::json!({"type": "json_schema", "schema": &*f.schema}),
        );
    }
    if let Some(e) = effort {
        config.insert("effort".into(), e.as_str().into());
    }
    Some(Value::Object(config))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use tower_agent_core::message::{ToolCall, ToolOutput, ToolSpec};

    #[test]
    fn body_splits_system_and_groups_tool_results() {
        let mut req = ModelRequest::new(vec![
            Message::system("Be brief."),
            Message::user("Weather?"),
            Message::assistant("Checking.").with_tool_calls(vec![
                ToolCall::new("toolu_1", "weather", json!({"city": "Oslo"})),
                ToolCall::new("toolu_2", "weather", Value::String("{bad".into())),
            ]),
            Message::tool_result(&ToolOutput::text("toolu_1", "rain")),
            Message::tool_result(&ToolOutput::error("toolu_2", "not JSON")),
            Message::user("<system-hook>remember</system-hook>"),
        ]);
        req.tools = Arc::new(vec![ToolSpec::new(
            "weather",
            "Weather",
            json!({"type": "object"}),
        )]);
        req.settings = tower_agent_core::model::ModelSettings::default().temperature(0.0);
        let body = serde_json::to_value(request_body(&req, "claude", 1024, false)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 1024,
                "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "not JSON", "is_error": true},
                        {"type": "text", "text": "<system-hook>remember</system-hook>"},
                    ]},
                ],
                "tools": [{"name": "weather", "description": "Weather", "input_schema": {"type": "object"}}],
                "temperature": 0.0,
            })
        );
    }

    /// A system message after the conversation's start goes where it is: role `system` with
    /// mid-conversation system messages on (as Claude Code sends hooks' contexts), else user
    /// text in a `<system-hook>` block; the opening ones are the `system` prompt either way.
    #[test]
    fn system_messages_in_the_conversation_stay_in_place() {
        let req = ModelRequest::new(vec![
            Message::system("Be brief."),
            Message::system("Know this."),
            Message::user("Run it"),
            Message::system("UserPromptSubmit hook additional context: ctx"),
            Message::assistant("").with_tool_calls(vec![ToolCall::new(
                "toolu_1",
                "Bash",
                json!({"command": "true"}),
            )]),
            Message::tool_result(&ToolOutput::text("toolu_1", "ok")),
            Message::system("PreToolUse:Bash hook additional context: pre"),
            Message::system(""),
        ]);
        let body =
            |in_place| serde_json::to_value(request_body(&req, "claude", 1024, in_place)).unwrap();
        let on = body(true);
        assert_eq!(on["system"], "Be brief.\n\nKnow this.");
        assert_eq!(
            on["messages"],
            json!([
                {"role": "user", "content": "Run it"},
                {"role": "system", "content": "UserPromptSubmit hook additional context: ctx"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "true"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                ]},
                {"role": "system", "content": "PreToolUse:Bash hook additional context: pre"},
            ])
        );
        let off = body(false);
        assert_eq!(off["system"], "Be brief.\n\nKnow this.");
        assert_eq!(
            off["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "Run it"},
                    {"type": "text", "text": "<system-hook>\nUserPromptSubmit hook additional context: ctx\n</system-hook>"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "true"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                    {"type": "text", "text": "<system-hook>\nPreToolUse:Bash hook additional context: pre\n</system-hook>"},
                ]},
            ])
        );
    }

    /// The effort goes as `output_config.effort`, as Claude Code sends it, beside a format.
    #[test]
    fn effort_is_output_config_effort() {
        let mut req = ModelRequest::new(vec![Message::user("Hi")]);
        let body = |req: &ModelRequest| {
            serde_json::to_value(request_body(req, "claude", 1024, false)).unwrap()["output_config"]
                .clone()
        };
        assert_eq!(body(&req), Value::Null);
        req.settings.reasoning_effort = Some(tower_agent_core::model::ReasoningEffort::Medium);
        assert_eq!(body(&req), json!({"effort": "medium"}));
        req.settings = req.settings.clone().response_format(
            tower_agent_core::model::ResponseFormat::json_schema(
                "answer",
                json!({"type": "object"}),
            ),
        );
        let config = body(&req);
        assert_eq!(config["effort"], "medium");
        assert_eq!(config["format"]["type"], "json_schema");
    }

    #[test]
    fn images_by_url_or_data() {
        assert_eq!(
            serde_json::to_value(image_source("data:image/png;base64,AAAA")).unwrap(),
            json!({"type": "base64", "media_type": "image/png", "data": "AAAA"})
        );
        assert_eq!(
            serde_json::to_value(image_source("https://example.com/a.png")).unwrap(),
            json!({"type": "url", "url": "https://example.com/a.png"})
        );
    }
}
