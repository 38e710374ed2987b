//! The answer: a whole Messages API response body as a [`ModelResponse`], and the parts,
//! usage and metadata a streamed answer shares with it.

use serde::Deserialize;
use serde_json::Value;
use tower_agent_core::{
    message::{Content, Message, ProviderItem, Reasoning, StopReason, ToolCall, Usage},
    model::{ModelResponse, ResponseMeta, error::ProviderError},
};

use super::PROVIDER;
use crate::http;

#[derive(Deserialize)]
struct MessagesResponse {
    id: Option<String>,
    model: Option<String>,
    content: Option<Vec<Value>>,
    stop_reason: Option<String>,
    usage: Option<ApiUsage>,
    #[serde(rename = "type")]
    kind: Option<String>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseBlock {
    Text {
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
}

/// The block types this crate models; every other block is kept whole as a
/// [`Content::Provider`].
const KNOWN_BLOCKS: [&str; 4] = ["text", "thinking", "redacted_thinking", "tool_use"];

/// Whether `block` is of a type this crate models; `None` if it is not a block at all (not
/// an object with a string `type`), which is a malformed answer, not an item to send back.
pub(super) fn is_known(block: &Value) -> Option<bool> {
    let kind = block.as_object()?.get("type")?.as_str()?;
    Some(KNOWN_BLOCKS.contains(&kind))
}

/// An answer's parts put together in order: consecutive text in one part, reasoning and
/// provider blocks where they came, tool calls apart.
#[derive(Default)]
pub(super) struct Parts {
    pub(super) content: Vec<Content>,
    pub(super) calls: Vec<ToolCall>,
}

impl Parts {
    pub(super) fn text(&mut self, text: String) {
        if text.is_empty() {
            return;
        }
        match self.content.last_mut() {
            Some(Content::Text { text: last }) => last.push_str(&text),
            _ => self.content.push(Content::Text { text }),
        }
    }

    pub(super) fn push(&mut self, part: Content) {
        self.content.push(part);
    }
}

#[derive(Deserialize, Default, Clone, Copy)]
pub(super) struct ApiUsage {
    pub(super) input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    pub(super) cache_creation_input_tokens: Option<u64>,
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl ApiUsage {
    /// The usage: input tokens cached or not (as OpenTelemetry's `gen_ai.usage.input_tokens`
    /// counts them), with the cache reads and writes among them apart.
    pub(super) fn usage(&self) -> Option<Usage> {
        let mut usage = http::usage(self.input(), self.output_tokens)?;
        usage.cache_read_tokens = self.cache_read_input_tokens.unwrap_or_default();
        usage.cache_write_tokens = self.cache_creation_input_tokens.unwrap_or_default();
        Some(usage)
    }

    /// All the prompt's tokens, cached or not.
    pub(super) fn input(&self) -> Option<u64> {
        self.input_tokens.map(|n| {
            n + self.cache_creation_input_tokens.unwrap_or_default()
                + self.cache_read_input_tokens.unwrap_or_default()
        })
    }
}

pub(super) fn parse_response(status: u16, body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let resp: MessagesResponse = http::parse_json(PROVIDER, status, body)?;
    if resp.kind.as_deref() == Some("error") || resp.error.is_some() {
        let error = resp.error.unwrap_or_default();
        return Err(http::error_object(PROVIDER, &error).with_status(status));
    }
    let content = match (resp.kind.as_deref(), resp.content) {
        (Some("message") | None, Some(content)) => content,
        _ => {
            return Err(
                http::malformed(PROVIDER, "the response is not a message", body)
                    .with_status(status),
            );
        }
    };
    let mut parts = Parts::default();
    for block in content {
        let Some(known) = is_known(&block) else {
            return Err(
                http::malformed(PROVIDER, "a content block has no `type`", body)
                    .with_status(status),
            );
        };
        if !known {
            parts.push(Content::Provider(ProviderItem::new(PROVIDER, block)));
            continue;
        }
        let block: ResponseBlock = serde_json::from_value(block).map_err(|e| {
            http::malformed(PROVIDER, format!("a content block is not valid: {e}"), body)
                .with_status(status)
        })?;
        match block {
            ResponseBlock::Text { text } => parts.text(text),
            ResponseBlock::Thinking {
                thinking,
                signature,
            } => {
                let mut reasoning = Reasoning::text(thinking);
                reasoning.signature = signature;
                parts.push(Content::Reasoning(reasoning));
            }
            ResponseBlock::RedactedThinking { data } => {
                parts.push(Content::Reasoning(Reasoning::redacted(data)))
            }
            ResponseBlock::ToolUse { id, name, input } => {
                parts.calls.push(ToolCall::new(id, name, input))
            }
        }
    }
    let usage = resp.usage.unwrap_or_default();
    Ok(response(
        parts,
        resp.stop_reason.as_deref(),
        usage.usage(),
        meta(resp.id, resp.model, resp.stop_reason.as_deref()),
    ))
}

/// The response's metadata: provider `"anthropic"`, the message's id and model, and the
/// stop reason as the API said it.
pub(super) fn meta(
    id: Option<String>,
    model: Option<String>,
    stop_reason: Option<&str>,
) -> ResponseMeta {
    let mut meta = ResponseMeta::new(PROVIDER);
    meta.id = id;
    meta.model = model;
    meta.finish_reasons = stop_reason.map(str::to_owned).into_iter().collect();
    meta
}

pub(super) fn response(
    parts: Parts,
    stop_reason: Option<&str>,
    usage: Option<Usage>,
    meta: ResponseMeta,
) -> ModelResponse {
    let Parts { content, calls } = parts;
    let stop_reason = match stop_reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some("pause_turn") => StopReason::PauseTurn,
        Some(other) => StopReason::Other(other.to_owned()),
        None if calls.is_empty() => StopReason::EndTurn,
        None => StopReason::ToolUse,
    };
    let mut message = Message::assistant("").with_tool_calls(calls);
    message.content = content;
    ModelResponse {
        message,
        usage,
        stop_reason,
        meta,
        extensions: Default::default(),
        body: tower_agent_core::model::ModelBody::empty(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use tower_agent_core::model::body::DeltaSink;

    use crate::anthropic::stream::Assembly;

    #[test]
    fn unknown_blocks_are_kept_in_order_and_blocks_without_a_type_are_malformed() {
        let server_tool = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}});
        let body = json!({
            "type": "message",
            "content": [
                {"type": "text", "text": "a"},
                server_tool,
                {"type": "text", "text": "b"},
                {"type": "text", "text": "c"},
            ],
            "stop_reason": "pause_turn",
        });
        let resp = parse_response(200, body.to_string().as_bytes()).unwrap();
        assert_eq!(
            resp.message.content,
            [
                Content::text("a"),
                Content::Provider(ProviderItem::new(PROVIDER, server_tool)),
                Content::text("bc"),
            ]
        );
        assert_eq!(resp.stop_reason, StopReason::PauseTurn);
        for block in [
            json!("text"),
            json!({"text": "no type"}),
            json!({"type": 7}),
            json!({"type": "text"}),
        ] {
            let body = json!({"type": "message", "content": [block]});
            let err = parse_response(200, body.to_string().as_bytes()).unwrap_err();
            assert!(err.is_malformed_response(), "{block}: {err}");
            if block == json!({"type": "text"}) {
                continue; // a streamed text block may start without its text
            }
            let sink = DeltaSink::default();
            let start = json!({"type": "content_block_start", "index": 0, "content_block": block});
            let err = Assembly::default().push(&start.to_string(), &sink).err();
            assert!(err.is_some_and(|e| e.is_malformed_response()), "{block}");
        }
    }

    #[test]
    fn responses_report_provider_id_model_and_stop_reason() {
        let body = json!({
            "type": "message",
            "id": "msg_01",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{ "type": "text", "text": "hi" }],
            "stop_reason": "end_turn",
        });
        let resp = parse_response(200, body.to_string().as_bytes()).unwrap();
        let expected = ResponseMeta::new("anthropic")
            .id("msg_01")
            .model("claude-sonnet-4-5-20250929")
            .finish_reasons(["end_turn"]);
        assert_eq!(resp.meta, expected);

        let sink = DeltaSink::default();
        let mut a = Assembly::default();
        for data in [
            r#"{"type":"message_start","message":{"id":"msg_02","model":"claude-x","usage":{"input_tokens":3}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"a"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":1}}"#,
        ] {
            assert!(!a.push(data, &sink).unwrap());
        }
        let meta = a.finish().meta;
        assert_eq!(meta.id.as_deref(), Some("msg_02"));
        assert_eq!(meta.model.as_deref(), Some("claude-x"));
        assert_eq!(meta.finish_reasons, ["max_tokens"]);
        assert_eq!(meta.provider.as_deref(), Some("anthropic"));
    }
}
