//! The conversation types: [`Message`], [`ToolCall`], [`ToolOutput`], [`ToolSpec`], [`Usage`],
//! and the shared history [`Messages`].
//!
//! An assistant message may carry the model's reasoning as [`Content::Reasoning`] parts
//! ([`Reasoning`]: text, signature, redacted data, an opaque provider item), and items only
//! its provider understands (an Anthropic `server_tool_use` or `web_search_tool_result`
//! block, …) as [`Content::Provider`] parts, in the order the model produced them among its
//! text: they are saved with the thread like any content, are never part of
//! [`Message::text`], and each provider sends back, unmodified, what it requires (and never
//! what another provider produced).
//!
//! A provider item is kept whole, so it is as large as the provider sent it: it is bounded
//! by the provider's response-size cap (`max_response_bytes`, 16 MiB by default, see
//! [the limits](crate::model#limits)) like the rest of the answer.
//!
//! These are plain serde types with no tower in them. Every one is `Clone + Serialize +
//! Deserialize`, and the common cases are one line:
//!
//! # Example
//!
//! ```
//! use tower_agent::message::{Message, Messages, Role, ToolCall, ToolOutput};
//! use serde_json::json;
//!
//! let mut history = Messages::from(vec![
//!     Message::system("You are terse."),
//!     Message::user("List the files."),
//! ]);
//! let call = ToolCall::new("call_1", "ls", json!({ "path": "." }));
//! history.push(Message::assistant("").with_tool_calls(vec![call]));
//! history.push(Message::tool_result(&ToolOutput::text("call_1", "[]")));
//!
//! assert_eq!(history.len(), 4);
//! assert_eq!(history[3].role, Role::Tool);
//! assert_eq!(history[3].tool_call_id.as_deref(), Some("call_1"));
//!
//! // Cloning the history is O(1): a step shares it instead of copying it.
//! let snapshot = history.clone();
//! history.push(Message::user("thanks"));
//! assert_eq!(snapshot.len(), 4);
//! ```

use std::{borrow::Cow, fmt, ops::Index, sync::Arc};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

pub mod tokens;

/// Who wrote a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user (and hook feedback, reminders).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call.
    Tool,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        })
    }
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, by URL (`https:` or a `data:` URL).
    Image {
        /// Where the image is.
        url: String,
    },
    /// A document (a PDF), by URL: a `data:application/pdf;base64,…` URL, or an `https:` URL
    /// where the provider fetches URLs (Anthropic, the Responses API; Chat Completions takes
    /// only `data:` URLs and refuses the call otherwise).
    Document {
        /// Where the document is.
        url: String,
        /// Its file name, if known (sent as the `filename` / `title` where the API has one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// The model's reasoning (assistant messages only): kept with the message so that it can
    /// be sent back as each provider requires, and never part of [`Message::text`]. See
    /// [`Reasoning`].
    Reasoning(Reasoning),
    /// An item of an assistant message that only the provider which produced it understands
    /// (an Anthropic server-tool block such as `server_tool_use` or `web_search_tool_result`,
    /// a Responses API output item other than a message, function call or reasoning), kept at
    /// its place among the other parts and sent back unmodified to that provider only; other
    /// providers leave it out. Never part of [`Message::text`].
    Provider(ProviderItem),
}

/// A piece of a model's reasoning ("thinking"), kept on the assistant [`Message`] that it
/// preceded, in the order the model produced it.
///
/// Providers fill what they have and send back what the next request needs, unmodified:
///
/// - Anthropic: a `thinking` block is `text` + `signature`; a `redacted_thinking` block is
///   `redacted` (its encrypted `data`). Both are sent back before the `tool_use` blocks of the
///   same assistant message, as the API requires; reasoning without a signature (from another
///   provider) is not sent to Anthropic.
/// - OpenAI-compatible Chat Completions servers (DeepSeek, vLLM, Ollama, OpenRouter …):
///   `reasoning_content` (or `reasoning`) is `text`, sent back as DeepSeek's rule asks (see
///   [`ReasoningReplay`](crate::model::openai::ReasoningReplay)).
/// - OpenAI Responses API: a `reasoning` item is `text` (its summary text) + `opaque` (the
///   whole item, its `encrypted_content` included, tagged
///   [`ITEM_PROVIDER`](crate::model::responses::ITEM_PROVIDER)), sent back unmodified to that
///   API only.
/// - `opaque` holds a provider-specific item, tagged with the provider it came from, to be
///   returned to that provider as it came; every other provider leaves it out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Reasoning {
    /// The reasoning text (or its summary), as the provider sent it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The provider's signature over `text` (Anthropic `thinking.signature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Encrypted reasoning the provider did not show (Anthropic `redacted_thinking.data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<String>,
    /// A provider-specific item (e.g. a Responses API `reasoning` item with its
    /// `encrypted_content`), returned unmodified to the provider it names, and to no other.
    /// Boxed: only one API sends such items, and every [`Content`] part is as large as its
    /// largest kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Box<ProviderItem>>,
}

impl Reasoning {
    /// Reasoning text with no signature.
    pub fn text(text: impl Into<String>) -> Self {
        Reasoning {
            text: text.into(),
            ..Self::default()
        }
    }

    /// Signed reasoning text (an Anthropic `thinking` block).
    pub fn signed(text: impl Into<String>, signature: impl Into<String>) -> Self {
        Reasoning {
            text: text.into(),
            signature: Some(signature.into()),
            ..Self::default()
        }
    }

    /// Redacted (encrypted) reasoning (an Anthropic `redacted_thinking` block).
    pub fn redacted(data: impl Into<String>) -> Self {
        Reasoning {
            redacted: Some(data.into()),
            ..Self::default()
        }
    }

    /// This reasoning with a provider-specific opaque item (see [`ProviderItem`]).
    #[must_use]
    pub fn with_opaque(mut self, item: ProviderItem) -> Self {
        self.opaque = Some(Box::new(item));
        self
    }

    /// The opaque item of this reasoning, if it came from `provider`.
    pub fn opaque_from(&self, provider: &str) -> Option<&Value> {
        self.opaque
            .as_ref()
            .filter(|p| p.provider == provider)
            .map(|p| &p.item)
    }
}

impl Content {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// The text of this part, if it is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text } => Some(text),
            Content::Image { .. }
            | Content::Reasoning(_)
            | Content::Document { .. }
            | Content::Provider(_) => None,
        }
    }

    /// The reasoning in this part, if it is reasoning.
    pub fn as_reasoning(&self) -> Option<&Reasoning> {
        match self {
            Content::Reasoning(r) => Some(r),
            Content::Text { .. }
            | Content::Image { .. }
            | Content::Document { .. }
            | Content::Provider(_) => None,
        }
    }

    /// The provider item in this part, if it is one from `provider`.
    pub fn provider_item(&self, provider: &str) -> Option<&Value> {
        match self {
            Content::Provider(p) if p.provider == provider => Some(&p.item),
            _ => None,
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for this call; tool results refer to it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON. A provider that could not parse the model's argument text keeps
    /// it here as a JSON string; the [`ToolRouter`](crate::tool::ToolRouter) reports that to the
    /// model.
    pub arguments: Value,
}

impl ToolCall {
    /// A tool call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// A message of the conversation.
///
/// Its serde form is the one of earlier versions: a stored message with the former
/// `provider_items` field (the Responses API's reasoning items) still reads, each item
/// becoming a [`Content::Reasoning`] (a `reasoning` item) or a [`Content::Provider`] part
/// before the message's other parts, where it was sent from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredMessage")]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its content parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Content>,
    /// Tool calls (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this message answers (tool messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Set on a tool message whose output is an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// A [`Message`] as stored, including the `provider_items` field of earlier versions.
#[derive(Deserialize)]
struct StoredMessage {
    role: Role,
    #[serde(default)]
    content: Vec<Content>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    provider_items: Vec<ProviderItem>,
}

impl From<StoredMessage> for Message {
    fn from(m: StoredMessage) -> Self {
        let mut content = m.content;
        if !m.provider_items.is_empty() {
            // Where they were sent from: before the message's text.
            let legacy = m.provider_items.into_iter().map(|p| {
                if p.item.get("type").and_then(Value::as_str) == Some("reasoning") {
                    Content::Reasoning(Reasoning::text(summary_text(&p.item)).with_opaque(p))
                } else {
                    Content::Provider(p)
                }
            });
            content.splice(0..0, legacy);
        }
        Message {
            role: m.role,
            content,
            tool_calls: m.tool_calls,
            tool_call_id: m.tool_call_id,
            is_error: m.is_error,
        }
    }
}

/// The summary text of a Responses API `reasoning` item: its `summary[].text` joined by
/// blank lines.
pub(crate) fn summary_text(item: &Value) -> String {
    let texts = item.get("summary").and_then(Value::as_array);
    let mut out = String::new();
    for text in texts
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("text").and_then(Value::as_str))
    {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(text);
    }
    out
}

/// An item of an assistant [`Message`] that only the provider which produced it understands,
/// kept so it can be sent back to that provider exactly as received: the item of a
/// [`Content::Provider`] part, or the opaque item of a [`Reasoning`].
///
/// `item` is the item as parsed JSON: every field and value is kept (the order of an
/// object's keys is serde_json's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderItem {
    /// Which provider (and API) produced it, e.g. `"anthropic"` or `"openai.responses"`.
    pub provider: String,
    /// The item, as the provider sent it.
    pub item: Value,
}

impl ProviderItem {
    /// An item from `provider`.
    pub fn new(provider: impl Into<String>, item: Value) -> Self {
        ProviderItem {
            provider: provider.into(),
            item,
        }
    }
}

impl Message {
    /// A message of `role` with one text part (no part if `text` is empty).
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        let text = text.into();
        Message {
            role,
            content: if text.is_empty() {
                Vec::new()
            } else {
                vec![Content::Text { text }]
            },
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, text)
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, text)
    }

    /// The tool message that carries `output` back to the model.
    pub fn tool_result(output: &ToolOutput) -> Self {
        let mut msg = Self::new(Role::Tool, output.content.clone());
        msg.content.extend(output.parts.iter().cloned());
        msg.tool_call_id = Some(output.call_id.clone());
        msg.is_error = output.is_error;
        msg
    }

    /// This message with `calls` as its tool calls.
    #[must_use]
    pub fn with_tool_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.tool_calls = calls;
        self
    }

    /// The text parts joined together (borrowed when there is just one).
    pub fn text(&self) -> Cow<'_, str> {
        let mut texts = self.content.iter().filter_map(Content::as_text);
        match (texts.next(), texts.next()) {
            (None, _) => Cow::Borrowed(""),
            (Some(one), None) => Cow::Borrowed(one),
            (Some(a), Some(b)) => {
                let mut s = String::with_capacity(a.len() + b.len());
                s.push_str(a);
                s.push_str(b);
                texts.for_each(|t| s.push_str(t));
                Cow::Owned(s)
            }
        }
    }

    /// Total length in bytes of the text parts.
    pub fn content_len(&self) -> usize {
        self.content
            .iter()
            .filter_map(Content::as_text)
            .map(str::len)
            .sum()
    }

    /// The reasoning parts, in order.
    pub fn reasoning(&self) -> impl Iterator<Item = &Reasoning> + '_ {
        self.content.iter().filter_map(Content::as_reasoning)
    }

    /// This message with `reasoning` inserted before its other parts (after the reasoning it
    /// already has).
    #[must_use]
    pub fn with_reasoning(mut self, reasoning: impl IntoIterator<Item = Reasoning>) -> Self {
        let at = self
            .content
            .iter()
            .take_while(|c| c.as_reasoning().is_some())
            .count();
        self.content
            .splice(at..at, reasoning.into_iter().map(Content::Reasoning));
        self
    }

    /// Appends `text` as a new text part.
    pub fn push_text(&mut self, text: impl Into<String>) {
        self.content.push(Content::text(text));
    }
}

impl From<ToolOutput> for Message {
    /// The tool message carrying `output` (moves the content, no copy).
    fn from(output: ToolOutput) -> Self {
        let mut content = if output.content.is_empty() {
            Vec::new()
        } else {
            vec![Content::Text {
                text: output.content,
            }]
        };
        content.extend(output.parts);
        Message {
            role: Role::Tool,
            content,
            tool_calls: Vec::new(),
            tool_call_id: Some(output.call_id),
            is_error: output.is_error,
        }
    }
}

/// What a tool call produced: what the model sees.
///
/// A denied, failed, timed-out or unknown tool call is a `ToolOutput` with `is_error: true` and
/// a reason the model can act on, never a crashed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The id of the [`ToolCall`] this answers.
    pub call_id: String,
    /// The text the model sees (structured output is JSON text).
    pub content: String,
    /// Whether this is an error the model should react to.
    #[serde(default)]
    pub is_error: bool,
    /// More parts the model sees after the text: images (a tool that reads a screenshot or a
    /// picture). Providers map them to their tool-result form (see
    /// [`ToolOutput::with_image`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Content>,
    /// Data for layers and applications; not sent to the model.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl ToolOutput {
    /// A successful output.
    pub fn text(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ToolOutput {
            call_id: call_id.into(),
            content: content.into(),
            is_error: false,
            parts: Vec::new(),
            metadata: Map::new(),
        }
    }

    /// An error output: `content` should say what went wrong and what the model can do.
    pub fn error(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ToolOutput {
            is_error: true,
            ..Self::text(call_id, content)
        }
    }

    /// A successful output holding `value` as JSON text.
    pub fn json(call_id: impl Into<String>, value: &Value) -> Self {
        Self::text(call_id, value.to_string())
    }

    /// This output with an image after its text: `url` is an `https:` URL or a
    /// `data:<media type>;base64,<data>` URL. Anthropic receives it as an `image` block of the
    /// `tool_result`, the Responses API as an `input_image` part of the
    /// `function_call_output`; Chat Completions, whose tool messages hold only text, receives
    /// it in a user message right after the tool results (the documented workaround).
    #[must_use]
    pub fn with_image(mut self, url: impl Into<String>) -> Self {
        self.parts.push(Content::Image { url: url.into() });
        self
    }

    /// This output with a document (a PDF) after its text: a `data:application/pdf;base64,…`
    /// URL, or an `https:` URL for the providers that fetch URLs. Anthropic receives it as a
    /// `document` block of the `tool_result`, the Responses API as an `input_file` part, Chat
    /// Completions as a `file` part of the user message after the tool results (a `data:` URL
    /// only).
    #[must_use]
    pub fn with_document(mut self, url: impl Into<String>, name: Option<String>) -> Self {
        self.parts.push(Content::Document {
            url: url.into(),
            name,
        });
        self
    }

    /// This output with one more metadata entry.
    #[must_use]
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }
}

/// What a tool looks like to the model: its name, what it does, and a JSON Schema of its
/// arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name, unique in a run.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// Whether running the call twice has the effect of running it once (a read, a write of
    /// the same content, a `PUT`). A run resumed after a crash
    /// ([`AgentRequest::recover`](crate::AgentRequest::recover)) runs again a call of an
    /// idempotent tool that had started but not finished; a call of any other tool is then
    /// *in doubt*: the model is told it may or may not have happened, and it is not run
    /// again. `false` unless set (the safe default); not sent to the model.
    #[serde(default, skip_serializing_if = "is_false")]
    pub idempotent: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl ToolSpec {
    /// A tool spec (not [`idempotent`](Self::idempotent)).
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
            idempotent: false,
        }
    }

    /// This spec with [`idempotent`](Self::idempotent) set: a call of the tool may be run
    /// again when a crashed run is resumed and the call had started but not finished.
    #[must_use]
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }
}

/// Token counts a provider reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache (OpenAI
    /// `cached_tokens`, Anthropic `cache_read_input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the provider's prompt cache (Anthropic
    /// `cache_creation_input_tokens`; OpenAI writes its cache without reporting it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Of `output_tokens`, those spent reasoning (OpenAI `reasoning_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
        self.cache_read_tokens += rhs.cache_read_tokens;
        self.cache_write_tokens += rhs.cache_write_tokens;
        self.reasoning_tokens += rhs.reasoning_tokens;
    }
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    #[default]
    EndTurn,
    /// The model asked for tool calls.
    ToolUse,
    /// The output token limit was reached.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The model refused to answer (OpenAI's `refusal`, Anthropic's `stop_reason:
    /// "refusal"`). The agent loop ends the run with
    /// [`Outcome::Refused`](crate::agent::Outcome::Refused).
    Refusal,
    /// The provider paused a long turn (Anthropic's `pause_turn`): the agent loop sends the
    /// answer back as it is and calls the model again, which continues the turn.
    PauseTurn,
    /// Something else, as the provider named it.
    Other(String),
}

// ===== Messages =====

/// The conversation history: a persistent vector of [`Message`]s.
///
/// Cloning is O(1) and editing a clone copies only the touched path (copy-on-write), so the
/// agent loop hands the same history to every step's [`ModelRequest`](crate::model::ModelRequest)
/// without deep-copying it, and a layer that edits one message (say the system prompt) pays
/// for that message, not for the whole history.
///
/// # Token accounting
///
/// A history also keeps a running token count for
/// [`SummarizeLayer`](crate::layers::summarize::SummarizeLayer), shared by its clones: each
/// message is counted once, not at every model call (see
/// [the summarize docs](crate::layers::summarize#token-accounting)). Appending keeps the
/// count, and so does inserting a message in front (a system message that a stage adds to a
/// request of a history without one): at most 2 such messages, each then counted at every
/// call. Editing or removing a message that was counted drops it, and the
/// next count is a full one.
#[derive(Clone, Default)]
pub struct Messages {
    inner: imbl::Vector<Arc<Message>>,
    /// The running token count, shared by clones (see [`memo`]).
    memo: Option<Arc<memo::Memo>>,
    /// Messages inserted in front since the running count was shared with this history: the
    /// count's message `j` is this history's message `j + shift` (see [`memo`]).
    shift: usize,
    /// What a thread store last stored of this history, shared by clones (see [`stored`]).
    stored: Option<Arc<stored::Slot>>,
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl Messages {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The message at `index`.
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.inner.get(index).map(|m| &**m)
    }

    /// A mutable reference to the message at `index` (copy-on-write).
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Message> {
        // The first messages (the system message at 0, and those inserted in front) are never
        // in the running count: editing them is free.
        if index > self.shift && index < self.len() {
            self.edited(index - self.shift, index + 1 == self.len());
        }
        self.stored = None;
        self.inner.get_mut(index).map(Arc::make_mut)
    }

    /// The first message.
    pub fn first(&self) -> Option<&Message> {
        self.get(0)
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.inner.last().map(|m| &**m)
    }

    /// The last message, shared (no copy): read while the history changes.
    pub(crate) fn last_shared(&self) -> Option<Arc<Message>> {
        self.inner.last().cloned()
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.inner.push_back(Arc::new(message));
        self.keep_memo();
        self.keep_stored();
    }

    /// Inserts a message at `index`, shifting the rest.
    ///
    /// # Panics
    ///
    /// Panics if `index > len`.
    pub fn insert(&mut self, index: usize, message: Message) {
        if index < self.len() {
            if index <= self.shift && self.memo.is_some() && self.shift < memo::MAX_SHIFT {
                // In front of every counted message: they all move up by one.
                self.shift += 1;
            } else {
                self.edited_at(index, false);
            }
            self.stored = None;
        }
        self.inner.insert(index, Arc::new(message));
        self.keep_memo();
    }

    /// Removes and returns the message at `index`.
    ///
    /// # Panics
    ///
    /// Panics if `index >= len`.
    pub fn remove(&mut self, index: usize) -> Message {
        if index < self.len() {
            if self.shift > 0 && index <= self.shift {
                // One of the messages in front of the counted ones: they all move down by one.
                self.shift -= 1;
            } else {
                self.edited(index - self.shift, index + 1 == self.len());
            }
        }
        self.stored = None;
        Arc::unwrap_or_clone(self.inner.remove(index))
    }

    /// Keeps the first `len` messages.
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.edited_at(len, true);
            self.stored = None;
        }
        self.inner.truncate(len);
    }

    /// Replaces the messages in `range` by `with` (used by compaction).
    pub fn splice(
        &mut self,
        range: std::ops::Range<usize>,
        with: impl IntoIterator<Item = Message>,
    ) {
        if range.start < self.len() {
            // Replacing everything from `range.start` on leaves no old message behind it.
            self.edited_at(range.start, range.end >= self.len());
            self.stored = None;
        }
        let tail = self.inner.split_off(range.end);
        self.inner.truncate(range.start);
        self.inner.extend(with.into_iter().map(Arc::new));
        self.inner.append(tail);
        self.keep_memo();
    }

    /// Iterates over the messages.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Message> + ExactSizeIterator + '_ {
        self.inner.iter().map(|m| &**m)
    }

    /// Iterates mutably over the messages (each touched one is copied if shared).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Message> + '_ {
        if self.len() > 1 {
            self.edited_at(1, false);
        }
        self.stored = None;
        self.inner.iter_mut().map(Arc::make_mut)
    }

    /// Whether `self[range]` and `other[range]` are the very same shared messages (not just
    /// equal): true when neither side edited them since one was cloned from the other.
    pub fn shares_range(&self, other: &Messages, range: std::ops::Range<usize>) -> bool {
        range.end <= self.len()
            && range.end <= other.len()
            && self
                .inner
                .focus()
                .narrow(range.clone())
                .into_iter()
                .zip(other.inner.focus().narrow(range))
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// Copies the messages into a `Vec`.
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Gives the history a running count if it has none (an allocation once per history,
    /// not per append).
    fn keep_memo(&mut self) {
        if self.memo.is_none() {
            self.memo = Some(Arc::default());
            self.shift = 0;
        }
    }

    /// Gives the history a slot for what a store stores of it if it has none (an allocation
    /// once per history, not per append).
    fn keep_stored(&mut self) {
        if self.stored.is_none() {
            self.stored = Some(Arc::default());
        }
    }

    /// Whether the first `len` messages are the very ones store `store` stored at `revision`
    /// (see [`stored`]): a save may then append the rest without reading what is stored.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn stored_as(&self, store: u64, revision: i64, len: usize) -> bool {
        let Some(slot) = &self.stored else {
            return false;
        };
        let mark = slot
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        mark.as_ref().is_some_and(|m| {
            m.store == store
                && m.revision == revision
                && m.len == len
                && len <= self.len()
                && match (&m.last, len.checked_sub(1)) {
                    (Some(last), Some(i)) => Arc::ptr_eq(last, &self.inner[i]),
                    (None, None) => true,
                    _ => false,
                }
        })
    }

    /// Records that store `store` stored this whole history at `revision` (see [`stored`]),
    /// for this history and the clones that share its slot.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn mark_stored(&self, store: u64, revision: i64) {
        if let Some(slot) = &self.stored {
            *slot
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(stored::Mark {
                store,
                revision,
                len: self.len(),
                last: self.inner.last().cloned(),
            });
        }
    }

    /// The messages from this history's `index` on are about to change (see [`edited`]).
    /// Changing one of the messages in front of the counted ones (`index <= shift`, when some
    /// were inserted) drops the count.
    ///
    /// [`edited`]: Self::edited
    fn edited_at(&mut self, index: usize, replaced_to_end: bool) {
        if self.shift > 0 && index <= self.shift {
            self.memo = None;
            self.shift = 0;
        } else {
            self.edited(index - self.shift, replaced_to_end);
        }
    }

    /// The count's messages from `index` on (the running count's own indices) are about to
    /// change. `replaced_to_end`: every message from `index` on is replaced or removed (none
    /// of the old ones stays behind it).
    fn edited(&mut self, index: usize, replaced_to_end: bool) {
        let Some(memo) = &self.memo else { return };
        match memo.on_edit(index, replaced_to_end, Arc::strong_count(memo) == 1) {
            memo::OnEdit::Keep => {}
            memo::OnEdit::Drop => {
                self.memo = None;
                self.shift = 0;
            }
            memo::OnEdit::Fork(copy) => self.memo = Some(Arc::new(copy)),
        }
    }

    /// Tokens of the messages by `counter` (the sum of
    /// [`count_message`](tokens::TokenCounter::count_message) over them),
    /// counting only what the running count shared with this history's clones has not
    /// counted yet (see [`memo`]).
    pub(crate) fn count_tokens(&self, counter: &Arc<dyn tokens::TokenCounter>) -> usize {
        let n = self.inner.len();
        // The messages in front of the counted ones: the system message (or the first one),
        // and those inserted in front since the count was shared.
        let shift = self.shift;
        let heads = (shift + 1).min(n);
        let head: usize = self
            .inner
            .focus()
            .narrow(0..heads)
            .into_iter()
            .map(|m| counter.count_message(m))
            .sum();
        // `from` and `upto` are this history's indices; the running count's are `shift` less.
        let (from, base) = match &self.memo {
            Some(memo) => memo.lookup(counter, &self.inner, shift),
            None => (1, 0),
        };
        let from = (from + shift).min(n.max(heads));
        let mut tail = 0;
        // The last `memo::SLACK` messages are counted at every call and left out of the
        // running count: a request's own last messages (a reminder) are not the history's.
        let upto = n.saturating_sub(memo::SLACK).max(from);
        for (i, m) in self
            .inner
            .focus()
            .narrow(from.min(n)..n)
            .into_iter()
            .enumerate()
        {
            let tokens = counter.count_message(m);
            tail += tokens;
            if from + i + 1 == upto
                && let Some(memo) = &self.memo
            {
                memo.advance(counter, upto - shift, base + tail, m);
            }
        }
        head + base + tail
    }
}

pub(crate) mod stored {
    //! What a thread store last stored of a history, shared by the history's clones.
    //!
    //! A [`Mark`] says: store `store` stored `len` messages at `revision`, the last of them
    //! the very `last` message (the same `Arc`). A history sharing the slot may trust it when
    //! its own message at `len - 1` is that very message: every edit other than an append
    //! (`insert` before the end, `remove`, `truncate`, `splice`, `get_mut`, `iter_mut`) drops
    //! the history's slot, so the histories that share a slot only ever appended since they
    //! were cloned from one another, and two of them that hold the same message at `len - 1`
    //! hold the same first `len` messages. The store sets the mark only once a save is
    //! committed, and checks it against the revision the database holds (revisions are never
    //! given twice), so a save of a history loaded or saved by the store appends without
    //! reading or comparing the stored rows, whatever the store's cache holds.

    use std::sync::{Arc, Mutex};

    use super::Message;

    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) struct Mark {
        pub(crate) store: u64,
        pub(crate) revision: i64,
        pub(crate) len: usize,
        pub(crate) last: Option<Arc<Message>>,
    }

    #[derive(Default)]
    pub(crate) struct Slot(pub(crate) Mutex<Option<Mark>>);
}

/// The running token count of a history, shared by its clones.
///
/// It holds the tokens of messages `1..len` (the system message, index 0, is recounted at
/// every call: stages edit it per call) and the message at `len - 1`. A history sharing it
/// may use it when its own message at `len - 1` is that very message (the same `Arc`): the
/// history it was counted on and this one then descend from the one that appended that
/// message, and neither changed the messages before it since, because
/// - editing or removing a message below `len` drops the history's count;
/// - editing a message at or above `len` while the count is shared, other than by
///   replacing everything from it to the end, forks the count (the edited history gets its
///   own copy), so that no other history can advance the shared count past the edit and
///   hand it back.
///
/// These indices are the count's own. A history that inserted messages in front of the
/// counted ones since it shared the count (a stage adding a system message to a request whose
/// history has none) keeps how many as its `shift`: the count's message `j` is its message
/// `j + shift`, and its first `shift + 1` messages are counted at every call. Inserting or
/// removing one of those moves the shift (at most [`MAX_SHIFT`]: past it the count is
/// dropped); any other change to them drops the count.
pub(crate) mod memo {
    use std::sync::{Arc, Mutex, PoisonError};

    use super::Message;
    use super::tokens::TokenCounter;

    /// Messages at the end of a counted history left out of the running count (counted at
    /// every call).
    pub(crate) const SLACK: usize = 4;

    /// Messages a history may insert in front of the counted ones and keep its running
    /// count (each is then counted at every call): 2.
    pub(crate) const MAX_SHIFT: usize = 2;

    #[derive(Default)]
    pub(crate) struct Memo {
        state: Mutex<State>,
    }

    #[derive(Clone, Default)]
    struct State {
        counter: Option<Arc<dyn TokenCounter>>,
        /// Messages `1..len` are counted; 0 when nothing is.
        len: usize,
        sum: usize,
        last: Option<Arc<Message>>,
    }

    pub(crate) enum OnEdit {
        Keep,
        Drop,
        Fork(Memo),
    }

    impl Memo {
        fn state(&self) -> std::sync::MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(PoisonError::into_inner)
        }

        pub(super) fn on_edit(&self, index: usize, replaced_to_end: bool, unique: bool) -> OnEdit {
            let state = self.state();
            if index < state.len {
                OnEdit::Drop
            } else if replaced_to_end || unique {
                OnEdit::Keep
            } else {
                OnEdit::Fork(Memo {
                    state: Mutex::new(state.clone()),
                })
            }
        }

        /// Where counting starts and the tokens before it, in the count's indices (from 1
        /// when the count does not apply to `messages`, whose message `j + shift` is the
        /// count's `j`).
        pub(super) fn lookup(
            &self,
            counter: &Arc<dyn TokenCounter>,
            messages: &imbl::Vector<Arc<Message>>,
            shift: usize,
        ) -> (usize, usize) {
            let state = self.state();
            let applies = state.len >= 2
                && state.len + shift <= messages.len()
                && state
                    .counter
                    .as_ref()
                    .is_some_and(|c| std::ptr::addr_eq(Arc::as_ptr(c), Arc::as_ptr(counter)))
                && state
                    .last
                    .as_ref()
                    .is_some_and(|last| Arc::ptr_eq(last, &messages[state.len - 1 + shift]));
            if applies {
                (state.len, state.sum)
            } else {
                (1, 0)
            }
        }

        /// Messages `1..len` hold `sum` tokens; `last` is the one at `len - 1`.
        pub(super) fn advance(
            &self,
            counter: &Arc<dyn TokenCounter>,
            len: usize,
            sum: usize,
            last: &Arc<Message>,
        ) {
            let mut state = self.state();
            let counter_same = state
                .counter
                .as_ref()
                .is_some_and(|c| std::ptr::addr_eq(Arc::as_ptr(c), Arc::as_ptr(counter)));
            if counter_same
                && state.len == len
                && state.last.as_ref().is_some_and(|l| Arc::ptr_eq(l, last))
            {
                return;
            }
            if !counter_same {
                state.counter = Some(Arc::clone(counter));
            }
            state.len = len;
            state.sum = sum;
            state.last = Some(Arc::clone(last));
        }
    }
}

impl Index<usize> for Messages {
    type Output = Message;

    fn index(&self, index: usize) -> &Message {
        &self.inner[index]
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<Message>> for Messages {
    fn from(v: Vec<Message>) -> Self {
        v.into_iter().collect()
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<T: IntoIterator<Item = Message>>(iter: T) -> Self {
        Messages {
            inner: iter.into_iter().map(Arc::new).collect(),
            memo: Some(Arc::default()),
            shift: 0,
            // A slot for the store's mark, as `push` gives one: a history built at once and
            // then saved is marked by that save.
            stored: Some(Arc::default()),
        }
    }
}

impl Extend<Message> for Messages {
    fn extend<T: IntoIterator<Item = Message>>(&mut self, iter: T) {
        self.inner.extend(iter.into_iter().map(Arc::new));
        self.keep_memo();
        self.keep_stored();
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = Box<dyn Iterator<Item = &'a Message> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Messages::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reasoning_is_content_kept_apart_from_text_and_round_trips_as_json() {
        let m = Message::assistant("Answer.").with_reasoning([
            Reasoning::signed("step 1\n\"quoted\"", "sig+/=="),
            Reasoning::redacted("ENCRYPTED"),
        ]);
        assert_eq!(m.text(), "Answer.");
        assert_eq!(m.content_len(), "Answer.".len());
        assert_eq!(m.reasoning().count(), 2);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"role": "assistant", "content": [
                {"type": "reasoning", "text": "step 1\n\"quoted\"", "signature": "sig+/=="},
                {"type": "reasoning", "redacted": "ENCRYPTED"},
                {"type": "text", "text": "Answer."},
            ]})
        );
        let back: Message = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
        // More reasoning goes after the reasoning already there, before the text.
        let m = m.with_reasoning([
            Reasoning::text("more").with_opaque(ProviderItem::new("p", json!({"id": "rs_1"})))
        ]);
        assert_eq!(m.content[2].as_reasoning().unwrap().text, "more");
        assert_eq!(m.content[3].as_text(), Some("Answer."));
    }

    #[test]
    fn text_joins_parts_and_borrows_one() {
        let mut m = Message::user("a");
        assert!(matches!(m.text(), Cow::Borrowed("a")));
        m.push_text("b");
        m.push_text("c");
        assert_eq!(m.text(), "abc");
        assert_eq!(Message::assistant("").content.len(), 0);
    }

    #[test]
    fn serde_round_trip() {
        let m = Message::assistant("hi").with_tool_calls(vec![ToolCall::new(
            "1",
            "ls",
            json!({"path": "."}),
        )]);
        let s = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Message>(&s).unwrap(), m);
        let out = ToolOutput::error("1", "nope").with_metadata("k", json!(1));
        let s = serde_json::to_string(&out).unwrap();
        assert_eq!(serde_json::from_str::<ToolOutput>(&s).unwrap(), out);
        let hist = Messages::from(vec![m.clone(), Message::tool_result(&out)]);
        let s = serde_json::to_string(&hist).unwrap();
        assert_eq!(serde_json::from_str::<Messages>(&s).unwrap(), hist);
    }

    #[test]
    fn tool_output_parts_reach_the_tool_message_and_round_trip() {
        let out = ToolOutput::text("c1", "see:")
            .with_image("data:image/png;base64,AAAA")
            .with_document("https://example.com/a.pdf", Some("a.pdf".into()));
        let s = serde_json::to_string(&out).unwrap();
        assert_eq!(serde_json::from_str::<ToolOutput>(&s).unwrap(), out);
        let expected = vec![
            Content::text("see:"),
            Content::Image {
                url: "data:image/png;base64,AAAA".into(),
            },
            Content::Document {
                url: "https://example.com/a.pdf".into(),
                name: Some("a.pdf".into()),
            },
        ];
        assert_eq!(Message::tool_result(&out).content, expected);
        assert_eq!(Message::from(out).content, expected);
        // A message without the new fields reads as before, and writes as before.
        let old = json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}]});
        let m: Message = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(m.content, [Content::text("hi")]);
        assert_eq!(serde_json::to_value(&m).unwrap(), old);
        let mut m = m;
        m.content.push(Content::Provider(ProviderItem::new(
            "anthropic",
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}),
        )));
        let back: Message = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.text(), "hi");
    }

    #[test]
    fn stored_provider_items_of_earlier_versions_still_read() {
        let reasoning = json!({
            "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA",
            "summary": [{"type": "summary_text", "text": "Plan."}, {"type": "summary_text", "text": "Act."}],
        });
        let other = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
        let old = json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
        "provider_items": [
            {"provider": "openai.responses", "item": reasoning},
            {"provider": "openai.responses", "item": other},
        ]});
        let m: Message = serde_json::from_value(old).unwrap();
        assert_eq!(m.text(), "Done.");
        assert_eq!(
            m.content,
            [
                Content::Reasoning(
                    Reasoning::text("Plan.\n\nAct.")
                        .with_opaque(ProviderItem::new("openai.responses", reasoning))
                ),
                Content::Provider(ProviderItem::new("openai.responses", other)),
                Content::text("Done."),
            ]
        );
        // It is written in the current form, which reads back the same.
        let s = serde_json::to_string(&m).unwrap();
        assert!(!s.contains("provider_items"), "{s}");
        assert_eq!(serde_json::from_str::<Message>(&s).unwrap(), m);
        // An unknown field still reads, a message without a role does not.
        assert!(serde_json::from_value::<Message>(json!({"role": "user", "x": 1})).is_ok());
        assert!(serde_json::from_value::<Message>(json!({"content": []})).is_err());
    }

    #[test]
    fn messages_copy_on_write() {
        let mut a = Messages::from(vec![Message::system("s"), Message::user("u")]);
        let b = a.clone();
        a.get_mut(0).unwrap().push_text("!");
        assert_eq!(a[0].text(), "s!");
        assert_eq!(b[0].text(), "s");
        a.splice(0..1, [Message::user("summary")]);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].text(), "summary");
        assert_eq!(a[1].text(), "u");
        assert_eq!(a.remove(0).text(), "summary");
        assert_eq!(a.len(), 1);

        let base = Messages::from(vec![
            Message::user("1"),
            Message::user("2"),
            Message::user("3"),
        ]);
        let mut edited = base.clone();
        assert!(base.shares_range(&edited, 0..3));
        edited.get_mut(2).unwrap().push_text("!");
        assert!(base.shares_range(&edited, 0..2));
        assert!(!base.shares_range(&edited, 0..3));
        assert!(!base.shares_range(&edited, 0..4));
        let equal_copy = Messages::from(base.to_vec());
        assert!(
            !base.shares_range(&equal_copy, 0..1),
            "equal but not shared"
        );
    }
}
