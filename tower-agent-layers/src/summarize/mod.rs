//! [`SummarizeLayer`]: compact old messages into a summary before the context window fills.
//!
//! Before each model call the layer estimates the request's tokens (a [`TokenCounter`]; by
//! default bytes / 4). Over 85% of the context window (default 128,000 tokens) it:
//!
//! 1. keeps the system message and the last 10% of the messages (at least 2) — moving the cut
//!    back so an assistant message with tool calls is never separated from its tool results;
//! 2. asks [`on_compact`](SummarizeLayer::on_compact) (PreCompact) whether to go on;
//! 3. renders the older messages as a transcript, with `write_file`/`edit_file` arguments cut
//!    to 2,000 characters, and asks the summarizer — any model service — for a summary of
//!    under 2,000 words;
//! 4. replaces the older messages by one user message holding the summary, calls the model
//!    with that, and asks the loop to keep the compaction in the thread (so it happens once,
//!    not at every step).
//!
//! When the agent loop applies the compaction, the agent's SessionStart hooks with source
//! `compact` ([`on_session_start_for`](crate::hooks::Hooks::on_session_start_for)) run,
//! whose contexts are added to the history right after the summary, then its PostCompact hooks
//! ([`on_post_compact`](crate::hooks::Hooks::on_post_compact), trigger `auto`, with the
//! summary): Claude Code's order. To compact a thread now, see
//! [`Agent::compact`](tower_agent_core::Agent::compact).
//!
//! If the summarizer fails (or answers nothing), the request passes through unchanged and the
//! failure is logged and sent to the run's events as a warning.
//!
//! # Token accounting
//!
//! The estimate of a request is the sum of [`TokenCounter::count_message`] over its messages,
//! but the layer does not recount the whole history at every model call: a [`Messages`]
//! history keeps a running count, shared by its copy-on-write clones (the agent loop's
//! history and every step's request), so each message is counted once. At each call the
//! layer counts the system message (stages edit it per call), the last 4 messages (a request's
//! own reminders are not the history's) and the messages appended since the last call: the
//! cost of a step does not grow with the history. Without a system prompt, the system message
//! a stage inserts in front of a request does not detach it from the history's count (up to 2
//! messages inserted in front are counted at every call instead). The count is the running
//! sum of one counter, so the estimate is exactly the full recount's. Editing or removing a message
//! that was counted (a compaction, a hook rewriting an old message) drops the running
//! count of that history, and its next call counts it in full once.
//!
//! # Context length exceeded
//!
//! The estimate may be wrong. When a request the layer let through fails with a
//! context-length error ([`ProviderError::is_context_length_exceeded`](tower_agent_core::model::ProviderError::is_context_length_exceeded),
//! every provider's wording for it), the layer compacts it as above — whatever the estimate
//! said — and calls the model **once** more with the compacted request. If that call fails
//! too, its error is returned: there is no second retry. If nothing can be compacted (too
//! few messages), PreCompact vetoes, or the summarizer fails, the original error is returned.
//! A request the layer already compacted before calling is not retried. Turn this off with
//! [`retry_on_context_length(false)`](SummarizeLayer::retry_on_context_length).
//!
//! # Readiness
//!
//! `poll_ready` is the inner service's. A request that needs no compaction calls the service
//! `poll_ready` readied. A request that is compacted awaits PreCompact and the summarizer
//! first, so the readied service is dropped at once (giving back whatever it reserved, e.g. a
//! `ConcurrencyLimit` permit) and a fresh clone is readied and called after the summary. A
//! summarizer may therefore share the inner service's capacity — even a
//! `ConcurrencyLimit(1)` around both — without a deadlock.
//!
//! # Example
//!
//! ```
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent_layers::summarize::SummarizeLayer;
//! use tower_agent_core::message::Message;
//! use tower_agent_core::model::{ModelRequest, ModelResponse, ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let summarizer = ScriptedModel::new().text("The user likes tea.");
//! let model = ScriptedModel::from_fn(|req| {
//!     // The model sees: system, summary, and the last messages.
//!     Ok(ModelResponse::text(format!("{} messages; first after system: {}",
//!         req.messages.len(), req.messages[1].text())))
//! });
//! let mut model = ServiceBuilder::new()
//!     .layer(SummarizeLayer::new(summarizer).context_window(1_000))
//!     .service(model);
//!
//! let mut messages = vec![Message::system("You are kind.")];
//! for i in 0..20 {
//!     messages.push(Message::user(format!("message {i}: {}", "blah ".repeat(40))));
//! }
//! let resp = model.ready().await?.call(ModelRequest::new(messages)).await?;
//! assert!(resp.message.text().starts_with("4 messages; first after system: "));
//! assert!(resp.message.text().contains("The user likes tea."));
//! # Ok(())
//! # }
//! ```

use std::{
    fmt,
    fmt::Write as _,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service, ServiceExt};

use crate::hooks::{HookFuture, HookResult};
use tower_agent_core::{
    context::Compaction,
    error::BoxError,
    message::{Message, Messages, Role},
    model::{ModelRequest, ModelResponse},
};

pub mod future;
mod layer;

pub use self::layer::SummarizeLayer;

/// Default context window, in tokens.
pub const DEFAULT_CONTEXT_WINDOW: usize = 128_000;
/// Default share of the window that triggers compaction.
pub const DEFAULT_TRIGGER: f64 = 0.85;
/// Default share of the messages kept as they are.
pub const DEFAULT_KEEP: f64 = 0.10;
/// Default least number of messages kept.
pub const DEFAULT_MIN_KEEP: usize = 2;
/// Default cut of `write_file`/`edit_file` arguments in the transcript.
pub const DEFAULT_ARG_CHARS: usize = 2_000;
/// Default word limit asked of the summarizer.
pub const DEFAULT_SUMMARY_WORDS: usize = 2_000;

pub use tower_agent_core::message::tokens::{BytesPerFour, TokenCounter};

/// What [`SummarizeLayer::on_compact`] sees before a compaction.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CompactInfo {
    /// Estimated tokens of the request.
    pub tokens: usize,
    /// The token count that triggered compaction.
    pub threshold: usize,
    /// Messages about to be summarized.
    pub summarized: usize,
    /// Messages kept as they are (the system message not counted).
    pub kept: usize,
}

impl HookResult<CompactDecision> for CompactDecision {
    fn into_hook_future(self) -> HookFuture<CompactDecision> {
        HookFuture::ready(self)
    }
}

/// The answer of an [`on_compact`](SummarizeLayer::on_compact) callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactDecision {
    /// Compact.
    Proceed,
    /// Don't: pass the request through unchanged.
    Veto,
}

type OnCompact = dyn Fn(CompactInfo, ModelRequest) -> HookFuture<CompactDecision> + Send + Sync;

struct Config {
    window: usize,
    trigger: f64,
    keep: f64,
    min_keep: usize,
    arg_chars: usize,
    truncated_tools: Vec<String>,
    summary_words: usize,
    counter: Arc<dyn TokenCounter>,
    on_compact: Option<Arc<OnCompact>>,
    retry_on_context_length: bool,
}

impl Config {
    fn threshold(&self) -> usize {
        (self.window as f64 * self.trigger) as usize
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("window", &self.window)
            .field("trigger", &self.trigger)
            .field("keep", &self.keep)
            .field("min_keep", &self.min_keep)
            .field("arg_chars", &self.arg_chars)
            .field("truncated_tools", &self.truncated_tools)
            .field("summary_words", &self.summary_words)
            .field("on_compact", &self.on_compact.is_some())
            .finish_non_exhaustive()
    }
}

/// The service of [`SummarizeLayer`].
#[derive(Debug, Clone)]
pub struct Summarize<S, Z> {
    inner: S,
    summarizer: Z,
    config: Arc<Config>,
}

impl<S, Z> Summarize<S, Z> {
    inner_service_accessors!();
}

/// Where to cut: `(start, cut)` — messages `start..cut` are summarized.
fn plan(config: &Config, messages: &Messages) -> Option<(usize, usize)> {
    let n = messages.len();
    let start = usize::from(messages.first().is_some_and(|m| m.role == Role::System));
    let keep = ((n as f64 * config.keep) as usize).max(config.min_keep);
    let mut cut = n.saturating_sub(keep);
    // Never separate tool results from the assistant message that called the tools: move the
    // cut back onto that assistant message, so it stays with its results.
    while cut > start && messages[cut].role == Role::Tool {
        cut -= 1;
    }
    (cut > start).then_some((start, cut))
}

fn cut_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The transcript of `messages` for the summarizer.
fn transcript(config: &Config, messages: impl Iterator<Item = Message>) -> String {
    let mut out = String::new();
    for m in messages {
        let text = m.text();
        match m.role {
            Role::Tool => {
                let _ = write!(
                    out,
                    "[tool result{}] {text}\n\n",
                    if m.is_error { ", error" } else { "" }
                );
            }
            role => {
                if !text.is_empty() {
                    let _ = write!(out, "[{role}] {text}\n\n");
                }
                for call in &m.tool_calls {
                    let args = call.arguments.to_string();
                    let args = if config.truncated_tools.contains(&call.name) {
                        let cut = cut_chars(&args, config.arg_chars);
                        if cut.len() < args.len() {
                            format!("{cut}… (truncated)")
                        } else {
                            args
                        }
                    } else {
                        args
                    };
                    let _ = write!(out, "[{role} calls {}] {args}\n\n", call.name);
                }
            }
        }
    }
    out
}

fn summary_prompt(words: usize) -> String {
    format!(
        "You compact the history of a conversation between a user and an AI agent that uses \
         tools, so the agent can go on with less context. Write a summary of under {words} \
         words of the transcript you are given. Keep what the agent needs to continue: the \
         user's goals and constraints, decisions made and why, files created or changed, tool \
         results that still matter, errors met, and the open tasks and next steps. Output only \
         the summary."
    )
}

impl<S, Z> Service<ModelRequest> for Summarize<S, Z>
where
    S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    Z: Service<ModelRequest, Response = ModelResponse> + Clone + Send + 'static,
    Z::Error: Into<BoxError>,
    Z::Future: Send + 'static,
{
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let config = &self.config;
        let tokens = req.messages.count_tokens(&config.counter);
        let threshold = config.threshold();
        if tokens <= threshold {
            let recover = self.recovery(&req, tokens);
            return future::ResponseFuture::passthrough(self.inner.call(req), recover);
        }
        let Some((start, cut)) = plan(config, &req.messages) else {
            let recover = self.recovery(&req, tokens);
            return future::ResponseFuture::passthrough(self.inner.call(req), recover);
        };
        let info = CompactInfo {
            tokens,
            threshold,
            summarized: cut - start,
            kept: req.messages.len() - cut,
        };
        // NOTE: the inner call comes after awaits (PreCompact, the summarizer), so the service
        // `poll_ready` readied must not wait with them: a summarizer sharing its capacity (a
        // `ConcurrencyLimit(1)` around both) would wait for it forever. Replacing it drops it,
        // which gives back what it reserved; a fresh clone is readied after the summary.
        let inner = self.inner.clone();
        self.inner = inner.clone();
        let summarizer = self.summarizer.clone();
        let config = Arc::clone(&self.config);
        future::ResponseFuture::compacting(Box::pin(compact_then_call(
            inner,
            summarizer,
            config,
            req,
            (start, cut),
            info,
            None,
        )))
    }
}

impl<S, Z> Summarize<S, Z>
where
    S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    Z: Service<ModelRequest, Response = ModelResponse> + Clone + Send + 'static,
    Z::Error: Into<BoxError>,
    Z::Future: Send + 'static,
{
    /// The recovery of a passed-through call that fails with a context-length error: compact
    /// (whatever the estimate said) and call once more. `None` when turned off.
    fn recovery(&self, req: &ModelRequest, tokens: usize) -> Option<future::Recover> {
        if !self.config.retry_on_context_length {
            return None;
        }
        // Nothing to compact, nothing to retry: no clones for a short conversation.
        let (start, cut) = plan(&self.config, &req.messages)?;
        let inner = self.inner.clone();
        let summarizer = self.summarizer.clone();
        let config = Arc::clone(&self.config);
        let req = req.clone();
        Some(Box::new(move |err: BoxError| {
            let info = CompactInfo {
                tokens,
                threshold: config.threshold(),
                summarized: cut - start,
                kept: req.messages.len() - cut,
            };
            Box::pin(compact_then_call(
                inner,
                summarizer,
                config,
                req,
                (start, cut),
                info,
                Some(err),
            ))
        }))
    }
}

/// PreCompact, the summary of `start..cut`, then one call of `inner` with the compacted
/// request. `overflow` is the context-length error that made a passed-through call compact:
/// if the compaction is vetoed or fails, that error is returned (the same request would fail
/// the same way); if the retried call fails too, its error is returned (no second retry).
async fn compact_then_call<S, Z>(
    inner: S,
    summarizer: Z,
    config: Arc<Config>,
    req: ModelRequest,
    (start, cut): (usize, usize),
    info: CompactInfo,
    overflow: Option<BoxError>,
) -> Result<ModelResponse, BoxError>
where
    S: Service<ModelRequest, Response = ModelResponse> + Send,
    S::Error: Into<BoxError>,
    S::Future: Send,
    Z: Service<ModelRequest, Response = ModelResponse> + Send,
    Z::Error: Into<BoxError>,
    Z::Future: Send,
{
    if let Some(f) = &config.on_compact
        && f(info, req.clone()).await == CompactDecision::Veto
    {
        return match overflow {
            Some(err) => Err(err),
            None => inner.oneshot(req).await.map_err(Into::into),
        };
    }
    let old = (start..cut).map(|i| req.messages[i].clone());
    let summary_req = ModelRequest {
        messages: Messages::from(vec![
            Message::system(summary_prompt(config.summary_words)),
            Message::user(transcript(&config, old)),
        ]),
        tools: Arc::default(),
        settings: req.settings.free_text(),
        ctx: req.ctx.clone(),
        extensions: http::Extensions::new(),
    };
    let answer = summarizer.oneshot(summary_req).await.map_err(Into::into);
    let answer = match answer {
        Ok(resp) => resp.collect().await,
        Err(err) => Err(err),
    };
    let summary = match answer {
        Ok(resp) if !resp.message.text().trim().is_empty() => Ok(resp.message.text().into_owned()),
        Ok(_) => Err("the summarizer answered with no text".to_owned()),
        Err(err) => Err(tower_agent_core::error::chain(&*err)),
    };
    let (req, compaction) = match summary {
        Ok(summary) => {
            let replacement = vec![Message::user(format!(
                "<summary>\nSummary of the {} earlier messages of this conversation:\n\n{summary}\n</summary>",
                cut - start
            ))];
            let compaction = Compaction::new(
                req.messages.clone(),
                start..cut,
                replacement.clone(),
                summary,
            );
            let mut req = req;
            req.messages.splice(start..cut, replacement);
            (req, Some(compaction))
        }
        Err(why) => {
            if let Some(err) = overflow {
                req.ctx.warn(format!(
                    "summarization failed, the context-length error stands: {why}"
                ));
                return Err(err);
            }
            req.ctx.warn(format!(
                "summarization failed, the request went on uncompacted: {why}"
            ));
            (req, None)
        }
    };
    let mut resp = inner.oneshot(req).await.map_err(Into::into)?;
    if let Some(compaction) = compaction {
        // Reported with the answer: the loop makes the thread keep it.
        resp.extensions.insert(compaction);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tower_agent_core::message::{ToolCall, ToolOutput};

    fn config() -> Config {
        let SummarizeLayer { config, .. } = SummarizeLayer::new(());
        Arc::into_inner(config).unwrap()
    }

    #[test]
    fn plan_keeps_ten_percent_min_two() {
        let c = config();
        let msgs: Messages = (0..30).map(|i| Message::user(i.to_string())).collect();
        assert_eq!(plan(&c, &msgs), Some((0, 27)));
        let mut with_sys = msgs.clone();
        with_sys.insert(0, Message::system("s"));
        assert_eq!(plan(&c, &with_sys), Some((1, 28)));
        let few: Messages = (0..5).map(|i| Message::user(i.to_string())).collect();
        assert_eq!(plan(&c, &few), Some((0, 3)));
        let two: Messages = vec![Message::system("s"), Message::user("u")].into();
        assert_eq!(plan(&c, &two), None);
    }

    #[test]
    fn plan_moves_cut_before_tool_results() {
        let c = config();
        let mut msgs = vec![Message::system("s")];
        for i in 0..6 {
            msgs.push(Message::user(format!("u{i}")));
        }
        let calls = (0..3)
            .map(|i| ToolCall::new(format!("c{i}"), "t", json!({})))
            .collect();
        msgs.push(Message::assistant("").with_tool_calls(calls)); // index 7
        for i in 0..3 {
            msgs.push(Message::tool_result(&ToolOutput::text(
                format!("c{i}"),
                "r",
            )));
        } // 8, 9, 10
        let msgs = Messages::from(msgs);
        // 11 messages: keep 2 → cut at 9 (a tool result); moved back to 7, the assistant.
        assert_eq!(plan(&c, &msgs), Some((1, 7)));
    }

    #[test]
    fn transcript_truncates_file_tool_args() {
        let c = config();
        let big = "z".repeat(5_000);
        let msgs = vec![
            Message::assistant("writing").with_tool_calls(vec![
                ToolCall::new("1", "write_file", json!({ "path": "a", "content": big })),
                ToolCall::new("2", "execute", json!({ "command": big })),
            ]),
            Message::tool_result(&ToolOutput::error("1", "disk full")),
        ];
        let t = transcript(&c, msgs.into_iter());
        let lines: Vec<&str> = t.split("\n\n").collect();
        assert_eq!(lines[0], "[assistant] writing");
        assert!(lines[1].starts_with("[assistant calls write_file] "));
        assert!(lines[1].ends_with("… (truncated)"));
        assert_eq!(
            lines[1].chars().count(),
            "[assistant calls write_file] ".len() + 2_000 + "… (truncated)".chars().count()
        );
        assert!(lines[2].len() > 5_000, "other tools are not truncated");
        assert_eq!(lines[3], "[tool result, error] disk full");
    }

    /// One step of the running-count property test.
    #[derive(Debug, Clone)]
    enum Op {
        /// Append a message of this kind and size to history `h`.
        Push(usize, u8, usize),
        /// Clone history `h` (copy-on-write) as a new one.
        Clone(usize),
        /// Edit the message at `i` (mod len) through `get_mut` (copy-on-write).
        Edit(usize, usize, usize),
        /// Append to the system message, as the Skills and Memory stages do per call.
        EditSystem(usize, usize),
        /// What those stages do to a history without a system message: insert one in front.
        InsertSystem(usize),
        Insert(usize, usize, usize),
        Remove(usize, usize),
        Truncate(usize, usize),
        /// Replace `start..start + len` (mod) by one summary: a compaction.
        Compact(usize, usize, usize),
        /// Edit every message through `iter_mut`.
        IterMut(usize),
        /// Count history `h` with the first or the second counter.
        Count(usize, bool),
    }

    fn message(kind: u8, size: usize) -> Message {
        let text = "x".repeat(size);
        match kind % 5 {
            0 => Message::user(text),
            1 => Message::assistant(text).with_tool_calls(vec![ToolCall::new(
                "c",
                "write_file",
                json!({ "path": "a.rs", "content": "y".repeat(size), "n": [1, true, null] }),
            )]),
            2 => Message::from(ToolOutput::text("c", text).with_image("data:image/png;base64,AA")),
            3 => Message::from(ToolOutput::error("c", text)),
            _ => Message::assistant(text),
        }
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let h = 0..6usize;
        prop_oneof![
            6 => (h.clone(), any::<u8>(), 0..300usize).prop_map(|(h, k, n)| Op::Push(h, k, n)),
            2 => h.clone().prop_map(Op::Clone),
            1 => (h.clone(), any::<usize>(), 0..300usize).prop_map(|(h, i, n)| Op::Edit(h, i, n)),
            2 => (h.clone(), 0..100usize).prop_map(|(h, n)| Op::EditSystem(h, n)),
            2 => h.clone().prop_map(Op::InsertSystem),
            1 => (h.clone(), any::<usize>(), 0..50usize).prop_map(|(h, i, n)| Op::Insert(h, i, n)),
            1 => (h.clone(), any::<usize>()).prop_map(|(h, i)| Op::Remove(h, i)),
            1 => (h.clone(), any::<usize>()).prop_map(|(h, n)| Op::Truncate(h, n)),
            1 => (h.clone(), any::<usize>(), 0..20usize).prop_map(|(h, a, n)| Op::Compact(h, a, n)),
            1 => h.clone().prop_map(Op::IterMut),
            5 => (h, any::<bool>()).prop_map(|(h, c)| Op::Count(h, c)),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2000, failure_persistence: None, ..Default::default()
        })]

        /// The running count always equals the full recount, whatever the clones do.
        #[test]
        fn running_count_equals_full_recount(ops in proptest::collection::vec(op(), 1..80)) {
            let first: Arc<dyn TokenCounter> = Arc::new(BytesPerFour);
            let second: Arc<dyn TokenCounter> = Arc::new(|t: &str| t.len() / 3 + 1);
            // With and without a system message.
            let mut hs = vec![Messages::from(vec![Message::system("s")]), Messages::new()];
            for op in ops {
                let pick = |h: usize, hs: &Vec<Messages>| h % hs.len();
                match op {
                    Op::Push(h, k, n) => { let h = pick(h, &hs); hs[h].push(message(k, n)) }
                    Op::Clone(h) => { let h = pick(h, &hs); let c = hs[h].clone(); hs.push(c) }
                    Op::Edit(h, i, n) => {
                        let h = pick(h, &hs);
                        let len = hs[h].len();
                        if len > 0 { hs[h].get_mut(i % len).unwrap().push_text("z".repeat(n)) }
                    }
                    Op::EditSystem(h, n) => {
                        let h = pick(h, &hs);
                        if let Some(m) = hs[h].get_mut(0) { m.push_text("s".repeat(n)) }
                    }
                    Op::InsertSystem(h) => {
                        let h = pick(h, &hs);
                        let mut req = ModelRequest::new(hs[h].clone());
                        req.append_system("## Skills");
                        hs.push(req.messages);
                    }
                    Op::Insert(h, i, n) => {
                        let h = pick(h, &hs);
                        let at = i % (hs[h].len() + 1);
                        hs[h].insert(at, message(n as u8, n));
                    }
                    Op::Remove(h, i) => {
                        let h = pick(h, &hs);
                        let len = hs[h].len();
                        if len > 0 { hs[h].remove(i % len); }
                    }
                    Op::Truncate(h, n) => { let h = pick(h, &hs); let len = hs[h].len(); hs[h].truncate(n % (len + 1)) }
                    Op::Compact(h, a, n) => {
                        let h = pick(h, &hs);
                        let len = hs[h].len();
                        let start = a % (len + 1);
                        let end = (start + n).min(len);
                        hs[h].splice(start..end, [Message::user("summary")]);
                    }
                    Op::IterMut(h) => {
                        let h = pick(h, &hs);
                        for m in hs[h].iter_mut() { m.push_text("i") }
                    }
                    Op::Count(h, second_counter) => {
                        let h = pick(h, &hs);
                        let counter = if second_counter { &second } else { &first };
                        let full = counter.count_messages(&hs[h]);
                        proptest::prop_assert_eq!(hs[h].count_tokens(counter), full);
                    }
                }
            }
            // Every history, at the end, with both counters.
            for h in &hs {
                for counter in [&first, &second] {
                    proptest::prop_assert_eq!(h.count_tokens(counter), counter.count_messages(h));
                }
            }
        }
    }

    /// The agent loop's pattern through the layer (a request cloned from the history, the
    /// system message edited per call, a reminder appended, the model's answer and a tool
    /// result appended to the history): after the first call, a model call counts a bounded
    /// number of texts, not the history; the estimate PreCompact sees is the full recount,
    /// and compaction triggers at the very call where the full recount passes the threshold.
    #[test]
    fn a_step_counts_only_new_messages_and_triggers_where_it_did() {
        step_counts_only_new_messages(true);
    }

    /// The same without a system prompt: the stages insert a system message in front of every
    /// request, which must not detach the request from the history's running count.
    #[test]
    fn without_a_system_prompt_a_step_counts_only_new_messages() {
        step_counts_only_new_messages(false);
    }

    fn step_counts_only_new_messages(system_prompt: bool) {
        use futures_util::FutureExt;
        use std::sync::{
            Mutex,
            atomic::{AtomicUsize, Ordering},
        };
        use tower_agent_core::model::ScriptedModel;
        // One counter per test (they run in parallel), chosen by the case.
        static CALLS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let calls = &CALLS[usize::from(system_prompt)];
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = Arc::clone(&seen);
        let mut history = if system_prompt {
            Messages::from(vec![Message::system("s")])
        } else {
            Messages::new()
        };
        for i in 0..10_000 {
            history.push(message(i as u8, 10));
        }
        // The threshold is crossed about 30 steps in.
        let window = ((BytesPerFour.count_messages(&history) + 30_000) as f64 / 0.85) as usize;
        let mut layer = SummarizeLayer::new(ScriptedModel::new().text("summary"))
            .context_window(window)
            .token_counter(move |t: &str| {
                calls.fetch_add(1, Ordering::Relaxed);
                t.len() / 4
            })
            .on_compact(move |info: CompactInfo, _| {
                seen2.lock().unwrap().push(info.tokens);
                CompactDecision::Veto
            });
        let threshold = layer.config_mut().threshold();
        let mut svc = layer.layer(ScriptedModel::from_fn(|_| Ok(ModelResponse::text("ok"))));
        let mut per_call = Vec::new();
        let mut expected = Vec::new();
        for step in 0..60 {
            let mut req = ModelRequest::new(history.clone());
            req.append_system("## Skills\n- notes: take notes");
            req.append_reminder("todo: none");
            let full = BytesPerFour.count_messages(&req.messages);
            if full > threshold {
                expected.push(full);
            }
            calls.store(0, Ordering::Relaxed);
            svc.ready().now_or_never().unwrap().unwrap();
            svc.call(req).now_or_never().unwrap().unwrap();
            per_call.push(calls.load(Ordering::Relaxed));
            history.push(Message::assistant("").with_tool_calls(vec![ToolCall::new(
                format!("c{step}"),
                "echo",
                json!({}),
            )]));
            history.push(Message::from(ToolOutput::text(
                format!("c{step}"),
                "r".repeat(4_000),
            )));
        }
        assert!(
            per_call[0] > 10_000,
            "the first call counts everything: {per_call:?}"
        );
        assert!(
            per_call[1..].iter().all(|&n| n <= 12),
            "later calls count only what is new: {per_call:?}"
        );
        assert!(
            !expected.is_empty() && expected.len() < 60,
            "the threshold is crossed mid-way"
        );
        assert_eq!(*seen.lock().unwrap(), expected);
    }

    #[test]
    fn bytes_per_four_counts_text_and_calls() {
        let msgs = Messages::from(vec![
            Message::user("a".repeat(400)),
            Message::assistant("").with_tool_calls(vec![ToolCall::new(
                "1",
                "t",
                json!({ "k": "v".repeat(396) }),
            )]),
        ]);
        let n = BytesPerFour.count_messages(&msgs);
        // "a"×400 → 100; the call: name "t" → 0, args {"k": "v"×396} → (2 + 1 + 4 + 398) / 4
        assert_eq!(n, 100 + (2 + 1 + 4 + 398) / 4);
    }
}
