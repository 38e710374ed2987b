//! [`RemindersLayer`]: system hooks that remind the model of something after a tool call.
//!
//! After each tool call the layer runs its triggers — functions
//! `(tool_name, &ToolOutput) -> Option<String>` — and attaches what they return to the
//! call's output ([`ToolOutput::remind`](tower_agent_core::message::ToolOutput::remind): in its
//! extensions, where the layers above see it, as [`Reminders`](tower_agent_core::message::Reminders)).
//! The agent loop appends the reminders of a step **once**, after all of the step's tool results
//! (and the contexts hooks added to them), as one [hook
//! context](tower_agent_core::message::Message::hook_context) — a system message, the reminders
//! blank-line separated:
//!
//! ```text
//! First hook message.
//!
//! Second hook message.
//! ```
//!
//! Built-in trigger: [`plan_completion`] — when the todo tool reports every task done, remind
//! the model to update the project's documentation.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use tower_agent_core::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_layers::reminders::RemindersLayer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("deploy", json!({})).text("deployed"))
//!     .tool(tool_fn("deploy", "Deploys", json!({"type": "object"}), |_, _| async {
//!         Ok("deployed to production")
//!     }))
//!     .tool_layer(RemindersLayer::new().trigger(|tool: &str, out: &tower_agent_core::message::ToolOutput| {
//!         (tool == "deploy" && out.content.contains("production"))
//!             .then(|| "Watch the error rate for ten minutes.".to_string())
//!     }))
//!     .build();
//! let resp = agent.run("ship it").await?;
//! // user, assistant (call), tool result, reminders, assistant
//! assert_eq!(resp.messages[3].role, tower_agent_core::message::Role::System);
//! assert_eq!(resp.messages[3].text(), "Watch the error rate for ten minutes.");
//! # Ok(())
//! # }
//! ```

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use serde_json::Value;
use tower::{Layer, Service};

use tower_agent_core::{message::ToolOutput, tool::ToolRequest};

/// A reminder trigger: looks at a finished tool call, may return a reminder.
pub type Trigger = Arc<dyn Fn(&str, &ToolOutput) -> Option<String> + Send + Sync>;

/// The documentation-update reminder, sent when every task is done.
pub const PLAN_COMPLETE_REMINDER: &str = "All tasks have been completed. Consider updating the following files with any new or updated information from this session:\n- CLAUDE.md - Project conventions, commands, architecture changes\n- README.md - User-facing documentation, setup instructions, feature descriptions";

/// The plan-completion trigger: fires when the todo tool (`write_todos`, or
/// `update_plan`) succeeded and its JSON result reports `summary.total > 0` tasks, all
/// `summary.completed`.
///
/// ```
/// use tower_agent_core::message::ToolOutput;
/// use tower_agent_layers::reminders::plan_completion;
///
/// let done = ToolOutput::text("1", r#"{"success": true, "summary": {"total": 2, "completed": 2}}"#);
/// assert!(plan_completion("write_todos", &done).is_some());
/// assert!(plan_completion("bash", &done).is_none());
/// ```
pub fn plan_completion(tool_name: &str, output: &ToolOutput) -> Option<String> {
    if !matches!(tool_name, "write_todos" | "update_plan") || output.is_error {
        return None;
    }
    let result: Value = serde_json::from_str(&output.content).ok()?;
    if result.get("success").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let summary = result.get("summary")?;
    let total = summary.get("total").and_then(Value::as_u64)?;
    let completed = summary.get("completed").and_then(Value::as_u64)?;
    (total > 0 && total == completed).then(|| PLAN_COMPLETE_REMINDER.to_owned())
}

/// Runs reminder triggers after each tool call. See the [module docs](crate::reminders).
#[derive(Clone, Default)]
#[must_use]
pub struct RemindersLayer {
    triggers: Arc<Vec<Trigger>>,
}

impl RemindersLayer {
    /// No triggers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in triggers: [`plan_completion`].
    pub fn with_defaults() -> Self {
        Self::new().trigger(plan_completion)
    }

    /// Adds a trigger.
    pub fn trigger<F>(mut self, f: F) -> Self
    where
        F: Fn(&str, &ToolOutput) -> Option<String> + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.triggers).push(Arc::new(f));
        self
    }
}

impl fmt::Debug for RemindersLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemindersLayer")
            .field("triggers", &self.triggers.len())
            .finish()
    }
}

impl<S> Layer<S> for RemindersLayer {
    type Service = Reminders<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Reminders {
            inner,
            triggers: Arc::clone(&self.triggers),
        }
    }
}

/// The service of [`RemindersLayer`].
#[derive(Clone)]
pub struct Reminders<S> {
    inner: S,
    triggers: Arc<Vec<Trigger>>,
}

impl<S> Reminders<S> {
    inner_service_accessors!();
}

impl<S: fmt::Debug> fmt::Debug for Reminders<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reminders")
            .field("inner", &self.inner)
            .field("triggers", &self.triggers.len())
            .finish()
    }
}

impl<S> Service<ToolRequest> for Reminders<S>
where
    S: Service<ToolRequest, Response = ToolOutput>,
{
    type Response = ToolOutput;
    type Error = S::Error;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let watch = (!self.triggers.is_empty()).then(|| future::Watch {
            tool: req.call.name.clone(),
            triggers: Arc::clone(&self.triggers),
        });
        future::ResponseFuture {
            inner: self.inner.call(req),
            watch,
        }
    }
}

/// The response future of [`Reminders`].
pub mod future {
    use std::{
        future::Future,
        pin::Pin,
        task::{Context, Poll, ready},
    };

    use pin_project_lite::pin_project;

    use super::*;

    pub(super) struct Watch {
        pub(super) tool: String,
        pub(super) triggers: Arc<Vec<Trigger>>,
    }

    pin_project! {
        /// The response future of [`Reminders`](super::Reminders).
        pub struct ResponseFuture<F> {
            #[pin]
            pub(super) inner: F,
            pub(super) watch: Option<Watch>,
        }
    }

    impl<F, E> Future for ResponseFuture<F>
    where
        F: Future<Output = Result<ToolOutput, E>>,
    {
        type Output = Result<ToolOutput, E>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.project();
            let mut result = ready!(this.inner.poll(cx));
            if let (Ok(output), Some(watch)) = (&mut result, this.watch.take()) {
                for trigger in watch.triggers.iter() {
                    if let Some(text) = trigger(&watch.tool, output) {
                        output.remind(text);
                    }
                }
            }
            Poll::Ready(result)
        }
    }

    impl<F> fmt::Debug for ResponseFuture<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn out(value: Value) -> ToolOutput {
        ToolOutput::text("1", value.to_string())
    }

    /// The test table of the plan-completion trigger.
    #[test]
    fn plan_completion_table() {
        let summary = |total: u64, completed: u64| json!({"success": true, "summary": {"total": total, "completed": completed}});
        let cases: Vec<(&str, &str, ToolOutput, bool)> = vec![
            ("all done", "write_todos", out(summary(3, 3)), true),
            (
                "all done, seed name",
                "update_plan",
                out(summary(1, 1)),
                true,
            ),
            ("some pending", "write_todos", out(summary(3, 1)), false),
            (
                "in progress",
                "write_todos",
                out(
                    json!({"success": true, "summary": {"total": 2, "completed": 1, "in_progress": 1}}),
                ),
                false,
            ),
            ("empty plan", "write_todos", out(summary(0, 0)), false),
            (
                "failed update",
                "write_todos",
                out(json!({"success": false, "summary": {"total": 2, "completed": 2}})),
                false,
            ),
            (
                "error output",
                "write_todos",
                ToolOutput::error("1", summary(2, 2).to_string()),
                false,
            ),
            (
                "malformed result",
                "write_todos",
                ToolOutput::text("1", "all done!"),
                false,
            ),
            (
                "missing summary",
                "write_todos",
                out(json!({"success": true})),
                false,
            ),
            ("wrong tool", "bash", out(summary(2, 2)), false),
        ];
        for (name, tool, output, fires) in cases {
            assert_eq!(plan_completion(tool, &output).is_some(), fires, "{name}");
        }
        assert_eq!(
            plan_completion("write_todos", &out(summary(1, 1))).as_deref(),
            Some(PLAN_COMPLETE_REMINDER)
        );
    }
}
