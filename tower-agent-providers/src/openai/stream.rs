//! Streaming: the chunks of a streamed answer put together as one [`ModelResponse`], each
//! piece sent to the run's events as it arrives.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use tower_agent_core::{
    event::ModelDelta,
    message::{Reasoning, ToolCall},
    model::{ModelResponse, body::DeltaSink, error::ProviderError},
};

use super::{
    PROVIDER,
    response::{ChatUsage, meta, reasoning_text, refused, response},
};
use crate::http;

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

/// What a tool call being put together costs besides its text, counted in
/// `Assembly::kept` (so a stream of empty calls is bounded too).
const CALL_OVERHEAD: usize = 128;

/// A streamed answer being put together.
#[derive(Default)]
pub(super) struct Assembly {
    /// Bytes put together so far (text, and the calls with an overhead each), checked
    /// against `max_response_bytes`.
    kept: usize,
    text: String,
    /// The refusal, streamed apart from the text.
    refusal: String,
    reasoning: String,
    /// The calls (id, name, argument text), in the order they started.
    calls: Vec<(String, String, String)>,
    /// The server's `index` of a call → its place in `calls` (the latest call at that index).
    slots: BTreeMap<usize, usize>,
    last_slot: Option<usize>,
    /// How many calls are complete (their [`ModelDelta::ToolCallEnd`] sent), in order.
    ended: usize,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
    /// The response id and model, from the first chunk that names them.
    id: Option<String>,
    model: Option<String>,
}

impl Assembly {
    /// Takes one chunk; `Ok(true)` at `[DONE]`.
    pub(super) fn push(&mut self, data: &str, sink: &DeltaSink) -> Result<bool, ProviderError> {
        if data.trim() == "[DONE]" {
            self.end_calls(self.calls.len(), sink);
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            http::malformed(
                PROVIDER,
                format!("a streamed chunk is not valid: {e}"),
                data.as_bytes(),
            )
        })?;
        if let Some(error) = &chunk.error {
            return Err(http::error_object(PROVIDER, error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        // Every chunk repeats them; the first is kept (so a long stream holds one copy).
        if self.id.is_none() {
            self.id = chunk.id;
        }
        if self.model.is_none() {
            self.model = chunk.model;
        }
        let choices = chunk.choices.unwrap_or_default();
        for choice in choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            let finished = choice.finish_reason.is_some();
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let delta = choice.delta.unwrap_or_default();
            if let Some(text) = reasoning_text(delta.reasoning_content, delta.reasoning) {
                self.kept = self.kept.saturating_add(text.len());
                self.reasoning.push_str(&text);
                sink.push(ModelDelta::Reasoning { text });
            }
            if let Some(refusal) = delta.refusal {
                self.kept = self.kept.saturating_add(refusal.len());
                self.refusal.push_str(&refusal);
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.kept = self.kept.saturating_add(text.len());
                self.text.push_str(&text);
                sink.push(ModelDelta::Text { text });
            }
            for call in delta.tool_calls.into_iter().flatten() {
                self.push_call(call, sink);
            }
            if finished {
                self.end_calls(self.calls.len(), sink);
            }
        }
        Ok(false)
    }

    /// The calls before `upto` are complete (a later call started, or the answer finished).
    fn end_calls(&mut self, upto: usize, sink: &DeltaSink) {
        while self.ended < upto {
            sink.push(ModelDelta::ToolCallEnd { index: self.ended });
            self.ended += 1;
        }
    }

    fn push_call(&mut self, call: DeltaToolCall, sink: &DeltaSink) {
        let id = call.id.filter(|id| !id.is_empty());
        let slot = match call.index {
            // A new id at an index already taken is a new call: Ollama puts every call at
            // `index: 0`, each with its own id.
            Some(index) => match self.slots.get(&index) {
                Some(&slot)
                    if id.as_ref().is_none_or(|id| {
                        self.calls[slot].0.is_empty() || self.calls[slot].0 == *id
                    }) =>
                {
                    slot
                }
                _ => {
                    self.slots.insert(index, self.calls.len());
                    self.calls.len()
                }
            },
            // Servers that leave out `index` send a new id for each new call.
            None => match (self.last_slot, &id) {
                (Some(last), Some(id)) if self.calls[last].0 == *id => last,
                (Some(last), None) => last,
                _ => self.calls.len(),
            },
        };
        self.last_slot = Some(slot);
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments.unwrap_or_default()),
            None => (None, String::new()),
        };
        let added = id.as_ref().map_or(0, String::len)
            + name.as_ref().map_or(0, String::len)
            + arguments.len();
        if slot == self.calls.len() {
            // A new call: the ones before it are complete (servers stream calls in turn).
            self.end_calls(slot, sink);
            self.kept = self.kept.saturating_add(CALL_OVERHEAD);
            self.calls.push(Default::default());
        }
        self.kept = self.kept.saturating_add(added);
        let entry = &mut self.calls[slot];
        // Some servers repeat the id on every piece: it is set once.
        if let Some(id) = &id
            && entry.0.is_empty()
        {
            entry.0.push_str(id);
        }
        if let Some(name) = &name {
            entry.1.push_str(name);
        }
        entry.2.push_str(&arguments);
        sink.push(ModelDelta::ToolCall {
            index: slot,
            id,
            name,
            arguments,
        });
    }

    pub(super) fn finish(self) -> ModelResponse {
        let calls = self
            .calls
            .into_iter()
            .map(|(id, name, args)| ToolCall::new(id, name, http::parse_arguments(args)))
            .collect();
        let meta = meta(self.id, self.model, self.finish_reason.as_deref());
        let mut response = refused(
            response(
                self.text,
                calls,
                self.finish_reason.as_deref(),
                self.usage,
                meta,
            ),
            Some(self.refusal),
        );
        if !self.reasoning.is_empty() {
            response.message = response
                .message
                .with_reasoning([Reasoning::text(self.reasoning)]);
        }
        response
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
        return Err(http::incomplete(PROVIDER, "`data: [DONE]`"));
    }
    Ok(assembly.finish())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use tower_agent_core::message::StopReason;

    #[test]
    fn stream_assembles_calls_without_index_and_tolerates_nulls() {
        let sink = DeltaSink::default();
        let mut a = Assembly::default();
        for data in [
            r#"{"choices":null,"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":null,"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{\"k\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]},"finish_reason":"stop"}]}"#,
        ] {
            assert!(!a.push(data, &sink).unwrap());
        }
        assert!(a.push("[DONE]", &sink).unwrap());
        let resp = a.finish();
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        assert_eq!(
            resp.message.tool_calls,
            vec![
                ToolCall::new("a", "x", json!({})),
                ToolCall::new("b", "y", json!({"k": 1}))
            ]
        );
    }

    /// A streamed piece of a tool call: `(index, id, name, arguments)`.
    type Piece<'a> = (Option<usize>, Option<&'a str>, Option<&'a str>, &'a str);

    /// The calls a stream of `pieces` puts together.
    fn assemble(pieces: &[Piece<'_>]) -> Vec<ToolCall> {
        let sink = DeltaSink::default();
        let mut a = Assembly::default();
        for (index, id, name, args) in pieces {
            let mut call = json!({ "function": { "arguments": args } });
            if let Some(index) = index {
                call["index"] = json!(index);
            }
            if let Some(id) = id {
                call["id"] = json!(id);
            }
            if let Some(name) = name {
                call["function"]["name"] = json!(name);
            }
            let chunk = json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [call] } }] });
            assert!(!a.push(&chunk.to_string(), &sink).unwrap());
        }
        a.finish().message.tool_calls
    }

    #[test]
    fn stream_keys_calls_by_id_when_the_index_repeats() {
        let expected = vec![
            ToolCall::new("a", "x", json!({"k": 1})),
            ToolCall::new("b", "y", json!({})),
        ];
        // Ollama: every call at index 0, each whole with its own id.
        assert_eq!(
            assemble(&[
                (Some(0), Some("a"), Some("x"), "{\"k\":1}"),
                (Some(0), Some("b"), Some("y"), "{}"),
            ]),
            expected
        );
        // The id repeated on every piece is kept once; pieces with no id go to the latest call
        // at their index.
        assert_eq!(
            assemble(&[
                (Some(0), Some("a"), Some("x"), "{\"k\""),
                (Some(0), Some("a"), None, ":1}"),
                (Some(0), Some("b"), Some("y"), ""),
                (Some(0), None, None, "{}"),
            ]),
            expected
        );
    }

    /// A seeded property: however a server numbers and cuts the pieces (OpenAI's indexes,
    /// Ollama's index 0, ids repeated on every piece, no index at all), the calls come out
    /// whole and in order.
    #[test]
    fn stream_assembles_calls_in_every_known_server_style() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % n.max(1)
        };
        for case in 0..3000 {
            let n = 1 + next(4);
            let calls: Vec<(String, String, String)> = (0..n)
                .map(|i| {
                    let args = json!({ "v": next(1000), "s": "ünï \"q\"" }).to_string();
                    (format!("call_{case}_{i}"), format!("tool{}", next(3)), args)
                })
                .collect();
            let style = case % 4;
            let mut pieces = Vec::new();
            for (i, (id, name, args)) in calls.iter().enumerate() {
                let index = match style {
                    0 | 2 => Some(i),
                    1 => Some(0),
                    _ => None,
                };
                // Cut the arguments at char boundaries.
                let cuts: Vec<usize> = {
                    let mut c: Vec<usize> = (0..next(4))
                        .map(|_| next(args.len() + 1))
                        .filter(|&k| args.is_char_boundary(k))
                        .collect();
                    c.sort_unstable();
                    c.dedup();
                    c
                };
                let mut start = 0;
                let mut first = true;
                for end in cuts.into_iter().chain([args.len()]) {
                    let piece_id = (first || style == 2).then_some(id.as_str());
                    let piece_name = first.then_some(name.as_str());
                    pieces.push((index, piece_id, piece_name, &args[start..end]));
                    start = end;
                    first = false;
                }
            }
            let got = assemble(&pieces);
            let want: Vec<ToolCall> = calls
                .iter()
                .map(|(id, name, args)| {
                    ToolCall::new(id, name, serde_json::from_str(args).unwrap())
                })
                .collect();
            assert_eq!(got, want, "case {case}, style {style}: {pieces:?}");
        }
    }
}
