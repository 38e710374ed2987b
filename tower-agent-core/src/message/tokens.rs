//! Token estimates: [`TokenCounter`] and its usual implementation, [`BytesPerFour`]. The
//! compaction layer (`SummarizeLayer`) counts a
//! request's history with one; the history keeps a running count shared by its clones.
//!
//! ```
//! use tower_agent_core::message::{Message, Messages, tokens::{BytesPerFour, TokenCounter}};
//!
//! let mut history = Messages::new();
//! history.push(Message::user("twelve bytes"));
//! assert_eq!(BytesPerFour.count_messages(&history), 3);
//! // Any `Fn(&str) -> usize` counts too.
//! assert_eq!((|t: &str| t.split_whitespace().count()).count_messages(&history), 2);
//! ```

use serde_json::Value;

use super::{Message, Messages};

/// Estimates tokens. Implemented for closures `Fn(&str) -> usize` (over each text).
///
/// `SummarizeLayer` counts a history message by message with
/// [`count_message`](TokenCounter::count_message), once per message (see
/// [Token accounting](https://docs.rs/tower-agent/latest/tower_agent/layers/summarize/index.html#token-accounting)): a request's estimate is the sum of its
/// messages' counts, which is what [`count_messages`](TokenCounter::count_messages) gives.
pub trait TokenCounter: Send + Sync + 'static {
    /// Tokens in a text.
    fn count_text(&self, text: &str) -> usize;

    /// Tokens in messages: their texts, tool call names and arguments (the sum of
    /// [`count_message`](TokenCounter::count_message)).
    fn count_messages(&self, messages: &Messages) -> usize {
        messages.iter().map(|m| self.count_message(m)).sum()
    }

    /// Tokens in one message.
    fn count_message(&self, message: &Message) -> usize {
        let mut n: usize = message
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| self.count_text(t))
            .sum();
        for call in &message.tool_calls {
            n += self.count_text(&call.name);
            n += json_len(&call.arguments) / 4;
        }
        n
    }
}

impl<F: Fn(&str) -> usize + Send + Sync + 'static> TokenCounter for F {
    fn count_text(&self, text: &str) -> usize {
        self(text)
    }
}

/// The usual estimate: one token per four bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesPerFour;

impl TokenCounter for BytesPerFour {
    fn count_text(&self, text: &str) -> usize {
        text.len() / 4
    }
}

/// Roughly the length of a JSON value's text, without serializing it.
fn json_len(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 5,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(|x| json_len(x) + 1).sum::<usize>(),
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, x)| k.len() + 4 + json_len(x))
                .sum::<usize>()
        }
    }
}
