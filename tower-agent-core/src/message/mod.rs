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
//! use tower_agent_core::message::{Message, Messages, Role, ToolCall, ToolOutput};
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

use std::{borrow::Cow, fmt};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod history;
pub(crate) mod memo;
mod stored;
pub mod tokens;

pub use history::Messages;
pub use stored::StoreTag;

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
///   `ReasoningReplay`).
/// - OpenAI Responses API: a `reasoning` item is `text` (its summary text) + `opaque` (the
///   whole item, its `encrypted_content` included, tagged
///   `ITEM_PROVIDER`), sent back unmodified to that
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

    /// The arguments as `T` — the type a typed tool declares them with — read from the JSON
    /// without copying it, so that a hook checks the fields the tool will get instead of
    /// walking the JSON by hand.
    ///
    /// # Errors
    ///
    /// The arguments do not have `T`'s shape (the tool itself would refuse them too).
    ///
    /// ```
    /// use serde::Deserialize;
    /// use serde_json::json;
    /// use tower_agent_core::message::ToolCall;
    ///
    /// #[derive(Deserialize)]
    /// struct Bash {
    ///     command: String,
    /// }
    ///
    /// let call = ToolCall::new("1", "bash", json!({ "command": "rm -rf /" }));
    /// assert_eq!(call.arguments_as::<Bash>()?.command, "rm -rf /");
    /// // As a PreToolUse hook would check it:
    /// let refuse = call.arguments_as::<Bash>().is_ok_and(|args| args.command.contains("rm -rf"));
    /// assert!(refuse);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn arguments_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.arguments)
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
// NOTE: tower-agent's Responses API provider reads new items with the same rule.
fn summary_text(item: &Value) -> String {
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

    /// A system message of hook contexts, blank-line separated: how the loop adds, where they
    /// arose, what hooks say for the model — after a step's tool results (their
    /// [contexts](ToolOutput::add_context), then the run's reminders), after the prompt (the
    /// SessionStart and UserPromptSubmit hooks'), after a compaction's summary. A system
    /// message after the conversation's start goes where it is: OpenAI's APIs take it there;
    /// Anthropic's with
    /// `mid_conversation_system_messages`,
    /// else as user text in a `<system-hook>` block.
    ///
    /// ```
    /// use tower_agent_core::message::{Message, Role};
    ///
    /// let m = Message::hook_context(["a", "b"]);
    /// assert_eq!(m.role, Role::System);
    /// assert_eq!(m.text(), "a\n\nb");
    /// ```
    pub fn hook_context<S: AsRef<str>>(contexts: impl IntoIterator<Item = S>) -> Self {
        let mut text = String::new();
        for (i, context) in contexts.into_iter().enumerate() {
            if i > 0 {
                text.push_str("\n\n");
            }
            text.push_str(context.as_ref());
        }
        Self::system(text)
    }

    /// A user message of hook feedback, each piece in a `<system-hook>` block, blank-line
    /// separated: what a Stop hook that keeps the run going tells the model, and why a hook
    /// ended the run.
    ///
    /// ```
    /// use tower_agent_core::message::{Message, Role};
    ///
    /// let m = Message::hook_feedback(["a", "b"]);
    /// assert_eq!(m.role, Role::User);
    /// assert_eq!(m.text(), "<system-hook>\na\n</system-hook>\n\n<system-hook>\nb\n</system-hook>");
    /// ```
    pub fn hook_feedback<S: AsRef<str>>(feedback: impl IntoIterator<Item = S>) -> Self {
        let mut text = String::new();
        for (i, piece) in feedback.into_iter().enumerate() {
            if i > 0 {
                text.push_str("\n\n");
            }
            text.push_str("<system-hook>\n");
            text.push_str(piece.as_ref());
            text.push_str("\n</system-hook>");
        }
        Self::user(text)
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

/// The contexts hooks added to a tool's output ([`ToolOutput::add_context`]), in its
/// extensions until the loop takes them.
#[derive(Debug, Clone, Default)]
struct HookContexts(Vec<String>);

/// The [`ToolOutput::metadata`] key under which a tool puts the structured response command
/// hooks see as PostToolUse's `tool_response` (Claude Code's `Bash` answers `{stdout, stderr,
/// interrupted, isImage, noOutputExpected}` there while the model sees the output's text; an
/// MCP tool its result's content blocks, which PostToolBatch's `tool_response` shows too).
/// Without it, `tool_response` is the output's text (parsed as JSON when it is JSON).
pub const TOOL_RESPONSE: &str = "tool_response";

/// Reminders for the model that a layer or a tool attaches to the answer of its call — in the
/// [`extensions`](ToolOutput::extensions) of a tool's output
/// ([`ToolOutput::remind`]) or of a model's response
/// ([`ModelResponse::remind`](crate::model::ModelResponse::remind)) — as tower-http's layers
/// carry their data back in a response's extensions.
///
/// The loop takes them from each answer as it arrives — a model response's, each tool call's
/// as the call ends — into the run's queue, with what work outside any call queued
/// (`RunContext::remind`); once the step's calls are done, it adds the queue, in the order
/// the reminders came, after the step's tool results and their hook contexts, in the step's
/// [hook context](Message::hook_context) message, and reports them in
/// `AgentEvent::Reminders`. A step that calls no tool
/// keeps its model's reminders for the next step that does. A layer above another sees the
/// reminders of the layers under it in the answer, and may read, add or remove them.
///
/// ```
/// use tower_agent_core::message::{Reminders, ToolOutput};
///
/// let mut output = ToolOutput::text("c1", "wrote src/lib.rs");
/// output.remind("Run the tests before you answer.");
/// let reminders = output.extensions.get::<Reminders>().unwrap();
/// assert_eq!(reminders.texts(), ["Run the tests before you answer."]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reminders(Vec<String>);

impl Reminders {
    /// Adds `text` to the reminders in `extensions` (making the list if there is none).
    pub fn push(extensions: &mut http::Extensions, text: impl Into<String>) {
        extensions
            .get_or_insert_default::<Reminders>()
            .0
            .push(text.into());
    }

    /// Takes the reminders out of `extensions`, in order (none if there are none).
    pub fn take(extensions: &mut http::Extensions) -> Vec<String> {
        extensions
            .remove::<Reminders>()
            .map(|r| r.0)
            .unwrap_or_default()
    }

    /// The reminders, in the order they were added.
    pub fn texts(&self) -> &[String] {
        &self.0
    }
}

/// What a tool call produced: what the model sees.
///
/// A denied, failed, timed-out or unknown tool call is a `ToolOutput` with `is_error: true` and
/// a reason the model can act on, never a crashed run.
///
/// Equality and serialization cover what the model sees and the [`metadata`](Self::metadata),
/// not the [`extensions`](Self::extensions) (values of any type, for the layers of this call).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// Data for layers and applications; not sent to the model. JSON, so it is kept where the
    /// output is kept: in the tool-call journal (a recovered run replays it) and in events.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Typed data travelling back with this one output to the layers above the tool (as an
    /// HTTP response's extensions; the request's are
    /// [`ToolRequest::extensions`](crate::tool::ToolRequest::extensions)). Not sent to the
    /// model, not serialized, not compared, and not in the tool-call journal: a run that
    /// replays a recorded output has its [`metadata`](Self::metadata) only.
    #[serde(skip)]
    pub extensions: http::Extensions,
}

impl PartialEq for ToolOutput {
    fn eq(&self, other: &Self) -> bool {
        let ToolOutput {
            call_id,
            content,
            is_error,
            parts,
            metadata,
            extensions: _,
        } = self;
        *call_id == other.call_id
            && *content == other.content
            && *is_error == other.is_error
            && *parts == other.parts
            && *metadata == other.metadata
    }
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
            extensions: http::Extensions::new(),
        }
    }

    /// This output with `value` in its extensions (replacing a value of its type), for a
    /// layer above the tool.
    ///
    /// ```
    /// use tower_agent_core::message::ToolOutput;
    ///
    /// #[derive(Clone, Debug, PartialEq)]
    /// struct Cached(bool);
    ///
    /// let output = ToolOutput::text("c1", "42").with_extension(Cached(true));
    /// assert_eq!(output.extensions.get::<Cached>(), Some(&Cached(true)));
    /// // Not part of what the model sees, nor of equality.
    /// assert_eq!(output, ToolOutput::text("c1", "42"));
    /// ```
    #[must_use]
    pub fn with_extension<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
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

    /// Adds a context for the model from a hook of this call: the agent loop puts the
    /// contexts of a step's calls, in order, in a [hook context](Message::hook_context)
    /// message after the step's tool results — the result itself stays what the tool
    /// answered (as Claude Code does). Kept in the output's
    /// [`extensions`](Self::extensions) until the loop takes them (not in its metadata,
    /// which the model's message and the journal keep).
    pub fn add_context(&mut self, context: impl Into<String>) {
        self.extensions
            .get_or_insert_default::<HookContexts>()
            .0
            .push(context.into());
    }

    /// Takes the contexts hooks [added](Self::add_context) to this output, in order.
    pub fn take_contexts(&mut self) -> Vec<String> {
        self.extensions
            .remove::<HookContexts>()
            .map(|c| c.0)
            .unwrap_or_default()
    }

    /// The contexts hooks [added](Self::add_context) to this output, in order.
    pub fn contexts(&self) -> impl Iterator<Item = &str> {
        self.extensions
            .get::<HookContexts>()
            .into_iter()
            .flat_map(|c| c.0.iter().map(String::as_str))
    }

    /// Adds a reminder for the model to this output (see
    /// [`Reminders`]): the loop adds it after the step's tool results, as the run context's
    /// `remind` does for work
    /// outside any call; a layer above this one sees it in the output's extensions.
    pub fn remind(&mut self, text: impl Into<String>) {
        Reminders::push(&mut self.extensions, text);
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
}
