//! Streaming: the server-sent events of a streamed answer put together as one
//! [`ModelResponse`], each piece sent to the run's events as it arrives.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use tower_agent_core::{
    event::ModelDelta,
    message::{Content, ProviderItem, Reasoning, ToolCall},
    model::{ModelResponse, body::DeltaSink, error::ProviderError},
};

use super::{
    PROVIDER,
    response::{ApiUsage, Parts, is_known, meta, response},
};
use crate::http;

/// The cache reads and writes among a usage's input tokens (0 for a count left out).
fn cache_tokens(usage: &ApiUsage) -> (u64, u64) {
    (
        usage.cache_read_input_tokens.unwrap_or_default(),
        usage.cache_creation_input_tokens.unwrap_or_default(),
    )
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        usage: Option<ApiUsage>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping` and any event added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<ApiUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

enum Part {
    Text(String),
    Tool {
        call: usize,
        id: String,
        name: String,
        input: Value,
        json: String,
    },
    Reasoning(Reasoning),
    /// A block this crate does not model, kept whole; its `input_json_delta`s (a
    /// `server_tool_use`'s input) put together in `json`.
    Provider {
        block: Value,
        json: String,
    },
}

/// A streamed answer being put together.
#[derive(Default)]
pub(super) struct Assembly {
    /// Bytes put together so far (each started block counts its whole event), checked
    /// against `max_response_bytes`.
    kept: usize,
    parts: BTreeMap<usize, Part>,
    calls: usize,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// Cache reads and writes among the input tokens.
    cache_tokens: (u64, u64),
    /// The message's id and model, from `message_start`.
    id: Option<String>,
    model: Option<String>,
}

impl Assembly {
    /// Takes one event; `Ok(true)` at `message_stop`.
    pub(super) fn push(&mut self, data: &str, sink: &DeltaSink) -> Result<bool, ProviderError> {
        let event: StreamEvent = serde_json::from_str(data).map_err(|e| {
            http::malformed(
                PROVIDER,
                format!("a streamed event is not valid: {e}"),
                data.as_bytes(),
            )
        })?;
        match event {
            StreamEvent::MessageStart { message } => self.start_message(message),
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, data, sink)?,
            StreamEvent::ContentBlockDelta { index, delta } => {
                self.add_delta(index, delta, data, sink)?;
            }
            StreamEvent::ContentBlockStop { index } => {
                if let Some(Part::Tool { call, .. }) = self.parts.get(&index) {
                    sink.push(ModelDelta::ToolCallEnd { index: *call });
                }
            }
            StreamEvent::MessageDelta { delta, usage } => self.update_message(delta, usage),
            StreamEvent::MessageStop => return Ok(true),
            StreamEvent::Error { error } => return Err(http::error_object(PROVIDER, &error)),
            StreamEvent::Other => {}
        }
        Ok(false)
    }

    /// `message_start`: the message's id, model and first usage.
    fn start_message(&mut self, message: StartMessage) {
        self.id = message.id;
        self.model = message.model;
        if let Some(usage) = message.usage {
            self.input_tokens = usage.input();
            self.output_tokens = usage.output_tokens;
            self.cache_tokens = cache_tokens(&usage);
        }
    }

    /// `content_block_start`: a new part at `index`, kept whole if this crate does not
    /// model its type. `data` is the whole event, counted and quoted in errors.
    fn start_block(
        &mut self,
        index: usize,
        content_block: Value,
        data: &str,
        sink: &DeltaSink,
    ) -> Result<(), ProviderError> {
        self.kept = self.kept.saturating_add(data.len());
        let Some(known) = is_known(&content_block) else {
            return Err(http::malformed(
                PROVIDER,
                "a started content block has no `type`",
                data.as_bytes(),
            ));
        };
        if !known {
            self.parts.insert(
                index,
                Part::Provider {
                    block: content_block,
                    json: String::new(),
                },
            );
            return Ok(());
        }
        let content_block = StartBlock::deserialize(&content_block).map_err(|e| {
            http::malformed(
                PROVIDER,
                format!("a started content block is not valid: {e}"),
                data.as_bytes(),
            )
        })?;
        let part = self.open_part(content_block, sink);
        self.parts.insert(index, part);
        Ok(())
    }

    /// The part a known block starts, its first text or the tool call emitted as a delta.
    fn open_part(&mut self, block: StartBlock, sink: &DeltaSink) -> Part {
        match block {
            StartBlock::Text { text } => {
                if !text.is_empty() {
                    let text = text.clone();
                    sink.push(ModelDelta::Text { text });
                }
                Part::Text(text)
            }
            StartBlock::ToolUse { id, name, input } => {
                let call = self.calls;
                self.calls += 1;
                sink.push(ModelDelta::ToolCall {
                    index: call,
                    id: Some(id.clone()),
                    name: Some(name.clone()),
                    arguments: String::new(),
                });
                Part::Tool {
                    call,
                    id,
                    name,
                    input,
                    json: String::new(),
                }
            }
            StartBlock::Thinking {
                thinking,
                signature,
            } => {
                if !thinking.is_empty() {
                    let text = thinking.clone();
                    sink.push(ModelDelta::Reasoning { text });
                }
                let mut reasoning = Reasoning::text(thinking);
                reasoning.signature = (!signature.is_empty()).then_some(signature);
                Part::Reasoning(reasoning)
            }
            StartBlock::RedactedThinking { data } => Part::Reasoning(Reasoning::redacted(data)),
        }
    }

    /// `content_block_delta`: a piece added to the part at `index` (and emitted as a delta);
    /// a piece of another kind than its part is dropped.
    fn add_delta(
        &mut self,
        index: usize,
        delta: BlockDelta,
        data: &str,
        sink: &DeltaSink,
    ) -> Result<(), ProviderError> {
        match (self.parts.get_mut(&index), delta) {
            (Some(Part::Text(text)), BlockDelta::TextDelta { text: piece }) => {
                self.kept = self.kept.saturating_add(piece.len());
                text.push_str(&piece);
                sink.push(ModelDelta::Text { text: piece });
            }
            (Some(Part::Tool { call, json, .. }), BlockDelta::InputJsonDelta { partial_json }) => {
                self.kept = self.kept.saturating_add(partial_json.len());
                json.push_str(&partial_json);
                let index = *call;
                sink.push(ModelDelta::ToolCall {
                    index,
                    id: None,
                    name: None,
                    arguments: partial_json,
                });
            }
            (Some(Part::Reasoning(r)), BlockDelta::ThinkingDelta { thinking }) => {
                self.kept = self.kept.saturating_add(thinking.len());
                r.text.push_str(&thinking);
                sink.push(ModelDelta::Reasoning { text: thinking });
            }
            (Some(Part::Reasoning(r)), BlockDelta::SignatureDelta { signature }) => {
                self.kept = self.kept.saturating_add(signature.len());
                r.signature.get_or_insert_default().push_str(&signature);
            }
            (Some(Part::Provider { json, .. }), BlockDelta::InputJsonDelta { partial_json }) => {
                self.kept = self.kept.saturating_add(partial_json.len());
                json.push_str(&partial_json);
            }
            (None, _) => {
                return Err(http::malformed(
                    PROVIDER,
                    format!("a delta for content block {index}, which never started"),
                    data.as_bytes(),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// `message_delta`: the stop reason and the usage so far (a field left out keeps the
    /// value before).
    fn update_message(&mut self, delta: MessageDeltaBody, usage: Option<ApiUsage>) {
        if let Some(reason) = delta.stop_reason {
            self.stop_reason = Some(reason);
        }
        let Some(usage) = usage else { return };
        if let Some(input) = usage.input() {
            self.input_tokens = Some(input);
            self.cache_tokens = cache_tokens(&usage);
        }
        if let Some(output) = usage.output_tokens {
            self.output_tokens = Some(output);
        }
    }

    pub(super) fn finish(self) -> ModelResponse {
        let mut parts = Parts::default();
        for part in self.parts.into_values() {
            match part {
                Part::Text(t) => parts.text(t),
                Part::Reasoning(r) => parts.push(Content::Reasoning(r)),
                Part::Provider { mut block, json } => {
                    if !json.is_empty()
                        && let Some(fields) = block.as_object_mut()
                    {
                        fields.insert("input".to_owned(), http::parse_arguments(json));
                    }
                    parts.push(Content::Provider(ProviderItem::new(PROVIDER, block)));
                }
                Part::Tool {
                    id,
                    name,
                    input,
                    json,
                    ..
                } => {
                    let arguments = if json.is_empty() {
                        if input.is_null() {
                            Value::Object(Default::default())
                        } else {
                            input
                        }
                    } else {
                        http::parse_arguments(json)
                    };
                    parts.calls.push(ToolCall::new(id, name, arguments));
                }
            }
        }
        let meta = meta(self.id, self.model, self.stop_reason.as_deref());
        response(
            parts,
            self.stop_reason.as_deref(),
            http::usage(self.input_tokens, self.output_tokens).map(|mut usage| {
                (usage.cache_read_tokens, usage.cache_write_tokens) = self.cache_tokens;
                usage
            }),
            meta,
        )
    }
}

pub(super) async fn read_stream(
    resp: reqwest::Response,
    sink: &DeltaSink,
    max_bytes: usize,
) -> Result<ModelResponse, ProviderError> {
    let mut assembly = Assembly::default();
    let done = http::read_events(PROVIDER, resp, max_bytes, |event| {
        let done = assembly.push(&event.data, sink)?;
        http::check_kept(PROVIDER, assembly.kept, max_bytes)?;
        Ok(done)
    })
    .await?;
    if !done {
        return Err(http::incomplete(PROVIDER, "`message_stop`"));
    }
    Ok(assembly.finish())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::anthropic::request::messages;

    /// Event-shaped JSON: the events and block types this module reads, and blocks it does
    /// not model, with fields of any JSON type.
    fn event() -> impl Strategy<Value = String> {
        let kind = prop_oneof![
            Just("message_start"),
            Just("content_block_start"),
            Just("content_block_delta"),
            Just("message_delta"),
            Just("message_stop"),
            Just("ping"),
        ];
        let block_type = prop_oneof![
            Just(json!("text")),
            Just(json!("tool_use")),
            Just(json!("thinking")),
            Just(json!("redacted_thinking")),
            Just(json!("server_tool_use")),
            Just(json!("web_search_tool_result")),
            Just(json!(7)),
            Just(Value::Null),
        ];
        let delta_type = prop_oneof![
            Just("text_delta"),
            Just("input_json_delta"),
            Just("thinking_delta"),
            Just("signature_delta"),
            Just("citations_delta"),
        ];
        let leaf = http::fuzz::leaf();
        let value = leaf.prop_recursive(2, 12, 3, |inner| {
            proptest::collection::vec(inner, 0..3).prop_map(Value::Array)
        });
        (
            kind,
            block_type,
            delta_type,
            value.clone(),
            value,
            0usize..4,
        )
            .prop_map(|(kind, block_type, delta_type, a, b, index)| {
                json!({
                    "type": kind,
                    "index": index,
                    "message": {"id": "msg_1", "usage": {"input_tokens": 1}},
                    "content_block": {
                        "type": block_type, "text": a, "id": "x", "name": "y", "input": b,
                        "thinking": "t", "data": "d",
                    },
                    "delta": {
                        "type": delta_type, "text": a, "partial_json": "{\"q\":", "thinking": "t",
                        "signature": "s", "stop_reason": "pause_turn",
                    },
                })
                .to_string()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Whatever a server streams, known blocks or not, the assembly returns an answer or
        /// a typed error, never panics, and counts at least what it keeps.
        #[test]
        fn any_event_sequence_is_an_answer_or_an_error(
            events in proptest::collection::vec(prop_oneof![event(), ".{0,16}"], 0..12)
        ) {
            let sink = DeltaSink::default();
            let mut a = Assembly::default();
            let total = http::fuzz::feed(&events, |data| a.push(data, &sink));
            prop_assert!(a.kept <= total);
            let resp = a.finish();
            // What is kept goes back as blocks without panicking.
            let _ = serde_json::to_vec(&messages([&resp.message].into_iter(), false));
        }
    }
}
