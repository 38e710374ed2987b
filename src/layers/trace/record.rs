//! What the span records of a response, per level.

use std::{borrow::Cow, fmt::Write as _};

use tracing::Span;

use super::{Capped, preview};
use crate::{
    message::{Content, Message, StopReason, ToolOutput},
    model::ModelResponse,
};

/// A response [`Trace`](super::Trace) records on its span: [`ModelResponse`] or
/// [`ToolOutput`]. Only called when the span is enabled.
///
/// Crate-private, so sealed: the future's `Future` impl names it in a bound, and no other
/// type can implement it.
pub(crate) trait Record {
    /// Records the response fields on `span`.
    fn record(&self, span: &Span, preview_chars: usize);
}

impl Record for ModelResponse {
    fn record(&self, span: &Span, preview_chars: usize) {
        let calls = &self.message.tool_calls;
        span.record(
            "gen_ai.response.finish_reasons",
            finish_reason(&self.stop_reason),
        );
        if let Some(usage) = self.usage {
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        }
        span.record("tool_calls_count", calls.len());
        if !calls.is_empty() {
            let mut names = String::new();
            for (i, call) in calls.iter().enumerate() {
                if i > 0 {
                    names.push(',');
                }
                names.push_str(&call.name);
            }
            span.record("tool_call_names", names.as_str());
        }
        span.record(
            "content_preview",
            &*text_preview(&self.message, preview_chars),
        );
    }
}

impl Record for ToolOutput {
    fn record(&self, span: &Span, preview_chars: usize) {
        span.record("output_length", self.content.len());
        span.record("output_preview", preview(&self.content, preview_chars));
        span.record("is_error", self.is_error);
    }
}

/// The stop reason as our serde name (`end_turn`, `tool_use`, …) or the provider's own.
fn finish_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Other(other) => other,
    }
}

/// The first `max_chars` characters of the message's text parts, borrowed when there is one
/// part, else copied up to the cap only.
fn text_preview(message: &Message, max_chars: usize) -> Cow<'_, str> {
    let mut texts = message.content.iter().filter_map(Content::as_text);
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    let mut rest = texts.peekable();
    if rest.peek().is_none() {
        return Cow::Borrowed(preview(first, max_chars));
    }
    let mut out = Capped::new(max_chars);
    for text in std::iter::once(first).chain(rest) {
        if out.write_str(text).is_err() {
            break;
        }
    }
    Cow::Owned(out.into_string())
}
