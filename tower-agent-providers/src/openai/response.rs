//! The answer: a whole Chat Completions response body as a [`ModelResponse`], and the usage,
//! metadata and refusal a streamed answer shares with it.

use serde::Deserialize;
use serde_json::Value;
use tower_agent_core::{
    message::{Message, Reasoning, StopReason, ToolCall},
    model::{ModelResponse, ResponseMeta, error::ProviderError},
};

use super::PROVIDER;
use crate::http;

/// The reasoning text of a message or delta: `reasoning_content` (DeepSeek, vLLM, llama.cpp)
/// or `reasoning` (OpenRouter, Ollama, newer vLLM), when it is a string.
pub(super) fn reasoning_text(
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
) -> Option<String> {
    [reasoning_content, reasoning]
        .into_iter()
        .flatten()
        .find_map(|v| match v {
            Value::String(s) if !s.is_empty() => Some(s),
            _ => None,
        })
}

// ===== response =====

// NOTE: `Option`s where a compatible server may send `null` rather than leave a field out.
#[derive(Deserialize)]
struct ChatResponse {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Deserialize)]
struct ResponseToolCall {
    id: Option<String>,
    function: ResponseFunction,
}

#[derive(Deserialize)]
struct ResponseFunction {
    name: String,
    arguments: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
pub(super) struct ChatUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Deserialize, Clone, Copy)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Clone, Copy)]
struct CompletionTokensDetails {
    reasoning_tokens: Option<u64>,
}

impl ChatUsage {
    /// The usage, with the cached prompt tokens and the reasoning tokens among the others.
    fn usage(self) -> Option<tower_agent_core::message::Usage> {
        let mut usage = http::usage(self.prompt_tokens, self.completion_tokens)?;
        usage.cache_read_tokens = self
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .unwrap_or_default();
        usage.reasoning_tokens = self
            .completion_tokens_details
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or_default();
        Some(usage)
    }
}

pub(super) fn parse_response(status: u16, body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let resp: ChatResponse = http::parse_json(PROVIDER, status, body)?;
    if let Some(error) = &resp.error {
        return Err(http::error_object(PROVIDER, error).with_status(status));
    }
    let Some(choice) = resp.choices.unwrap_or_default().into_iter().next() else {
        return Err(
            http::malformed(PROVIDER, "the response has no choices", body).with_status(status),
        );
    };
    let message = choice.message;
    let reasoning = reasoning_text(message.reasoning_content, message.reasoning);
    let text = message.content.unwrap_or_default();
    let calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            let arguments = http::parse_arguments(c.function.arguments.unwrap_or_default());
            ToolCall::new(c.id.unwrap_or_default(), c.function.name, arguments)
        })
        .collect();
    let mut response = refused(
        response(
            text,
            calls,
            choice.finish_reason.as_deref(),
            resp.usage,
            meta(resp.id, resp.model, choice.finish_reason.as_deref()),
        ),
        message.refusal,
    );
    response.message = response
        .message
        .with_reasoning(reasoning.map(Reasoning::text));
    Ok(response)
}

/// The response's metadata: provider `"openai"`, the id and model the server named,
/// and the finish reason as the server said it.
pub(super) fn meta(
    id: Option<String>,
    model: Option<String>,
    finish_reason: Option<&str>,
) -> ResponseMeta {
    let mut meta = ResponseMeta::new(PROVIDER);
    meta.id = id;
    meta.model = model;
    meta.finish_reasons = finish_reason.map(str::to_owned).into_iter().collect();
    meta
}

pub(super) fn response(
    text: String,
    calls: Vec<ToolCall>,
    finish_reason: Option<&str>,
    usage: Option<ChatUsage>,
    meta: ResponseMeta,
) -> ModelResponse {
    let stop_reason = match finish_reason {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        // Some compatible servers say `stop` after tool calls.
        Some("stop") | None if !calls.is_empty() => StopReason::ToolUse,
        Some("stop") | None => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    ModelResponse {
        message: Message::assistant(text).with_tool_calls(calls),
        usage: usage.and_then(ChatUsage::usage),
        stop_reason,
        meta,
        extensions: Default::default(),
        body: tower_agent_core::model::ModelBody::empty(),
    }
}

/// `resp` with the model's refusal (OpenAI's `refusal` field, kept out of the text): stop
/// reason [`StopReason::Refusal`], the message in [`ResponseMeta::refusal`].
pub(super) fn refused(mut resp: ModelResponse, refusal: Option<String>) -> ModelResponse {
    if let Some(refusal) = refusal.filter(|r| !r.is_empty()) {
        resp.stop_reason = StopReason::Refusal;
        resp.meta.refusal = Some(refusal);
    }
    resp
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use tower_agent_core::model::body::DeltaSink;

    use crate::openai::stream::Assembly;

    #[test]
    fn responses_report_provider_id_model_and_finish_reason() {
        let body = json!({
            "id": "chatcmpl-9",
            "model": "gpt-4o-2024-08-06",
            "choices": [{ "message": { "content": "hi" }, "finish_reason": "length" }],
        });
        let resp = parse_response(200, body.to_string().as_bytes()).unwrap();
        let expected = ResponseMeta::new("openai")
            .id("chatcmpl-9")
            .model("gpt-4o-2024-08-06")
            .finish_reasons(["length"]);
        assert_eq!(resp.meta, expected);

        // Streamed: the first chunk's id and model, the last finish reason.
        let sink = DeltaSink::default();
        let mut a = Assembly::default();
        for data in [
            r#"{"id":"chatcmpl-7","model":"m-1","choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"id":"chatcmpl-7","model":"m-1","choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ] {
            assert!(!a.push(data, &sink).unwrap());
        }
        let meta = a.finish().meta;
        assert_eq!(meta.id.as_deref(), Some("chatcmpl-7"));
        assert_eq!(meta.model.as_deref(), Some("m-1"));
        assert_eq!(meta.finish_reasons, ["stop"]);
        assert_eq!(meta.provider.as_deref(), Some("openai"));
    }
}
