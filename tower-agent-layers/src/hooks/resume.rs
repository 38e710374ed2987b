//! The thread's last model answer: when it came. The model hook layer
//! ([`HookModel`](super::HookModel)) keeps it in the thread's data (key
//! `tower_agent.last_response`, saved with the thread) when its set has SessionStart or
//! model-switch hooks, as each answer ends; a resumed run's SessionStart hooks
//! ([`ResumedSession`]) and PreModelSwitch's `prompt_cache_warm` read it.

use std::time::Duration;

use super::{HookSetInner, ResumedSession};
use tower_agent_core::{
    context::{RunContext, data::Persisted},
    message::{
        Messages,
        tokens::{BytesPerFour, TokenCounter},
    },
    model::ModelResponse,
};

/// When the thread's last model answer ended, in milliseconds since the Unix epoch.
#[derive(serde::Serialize, serde::Deserialize)]
struct LastResponse {
    at_ms: u64,
}

impl Persisted for LastResponse {
    const KEY: &'static str = "tower_agent.last_response";
}

/// Milliseconds since the Unix epoch.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl HookSetInner {
    /// Whether the model layer keeps the time of the thread's last answer: a hook reads it
    /// (SessionStart, for a resumed run; PreModelSwitch and PostModelSwitch). A set whose
    /// SessionStart hooks never see a resumed run does not pay a write per answer.
    pub(super) fn keeps_last_response(&self) -> bool {
        self.watches_model() || self.starts_resumed()
    }

    /// Whether a SessionStart hook runs for a resumed session (source `resume`).
    pub(super) fn starts_resumed(&self) -> bool {
        let source = tower_agent_core::agent::SessionSource::Resume.as_str();
        self.on_session_start_for
            .iter()
            .any(|(m, _)| m.matches_name(source))
    }
}

/// `resp`, which keeps its time as the thread's last answer when it ends whole (a streaming
/// answer at the end of its stream), if the set keeps it.
pub(super) fn noted(set: &HookSetInner, ctx: &RunContext, resp: ModelResponse) -> ModelResponse {
    if !set.keeps_last_response() {
        return resp;
    }
    let ctx = ctx.clone();
    resp.on_end(move |end| {
        if end.is_ok() {
            record(&ctx, now_ms());
        }
    })
}

/// Keeps `at_ms` as the time of the thread's last answer.
fn record(ctx: &RunContext, at_ms: u64) {
    if let Err(err) = ctx.persist(&LastResponse { at_ms }) {
        ctx.warn(format!(
            "the time of the model's answer could not be kept in the thread: {err}"
        ));
    }
}

/// How long ago the thread's last answer came, if the thread keeps its time.
pub(super) fn since_last_response(ctx: &RunContext) -> Option<Duration> {
    let last = ctx.persisted::<LastResponse>().unwrap_or_else(|err| {
        ctx.warn(format!(
            "the thread's `{}` data is not a time: {err}",
            LastResponse::KEY
        ));
        None
    })?;
    Some(Duration::from_millis(now_ms().saturating_sub(last.at_ms)))
}

/// What the SessionStart hooks of a resumed run learn: the time since the thread's last
/// answer (`None` if the thread does not keep it) and the size of `history`, the conversation
/// resumed.
pub(super) fn resumed(ctx: &RunContext, history: &Messages) -> Option<ResumedSession> {
    let since = since_last_response(ctx)?;
    let tokens = u64::try_from(BytesPerFour.count_messages(history)).unwrap_or(u64::MAX);
    Some(ResumedSession::new(since, tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_session_is_as_old_as_its_last_answer() {
        let ctx = RunContext::new();
        assert!(since_last_response(&ctx).is_none());
        assert!(resumed(&ctx, &Messages::new()).is_none());
        // Six minutes ago: past the cache's five.
        record(&ctx, now_ms() - 6 * 60 * 1000);
        let history = Messages::from(vec![tower_agent_core::message::Message::user(
            "x".repeat(400),
        )]);
        let r = resumed(&ctx, &history).unwrap();
        assert!((360..370).contains(&r.seconds_since_last_response), "{r:?}");
        assert!(r.prompt_cache_likely_expired);
        assert_eq!(r.context_tokens, 100);
        assert_eq!(r.estimated_cache_write_usd, 0.0);
        record(&ctx, now_ms() - 60 * 1000);
        let r = resumed(&ctx, &history).unwrap();
        assert!((60..70).contains(&r.seconds_since_last_response), "{r:?}");
        assert!(!r.prompt_cache_likely_expired);
    }
}
