//! [`ServiceBuilderExt`]: this crate's layers as [`ServiceBuilder`] methods.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use serde_json::json;
//! use tower::{ServiceBuilder, timeout::TimeoutLayer};
//! use tower_agent_core::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_layers::ServiceBuilderExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let model = ServiceBuilder::new()
//!     .trace_agent()
//!     .summarize(ScriptedModel::new().text("summary"))
//!     .service(ScriptedModel::new().tool_call("bash", json!({})).text("done"));
//! let agent = Agent::builder()
//!     .model(model)
//!     .tool(tool_fn("bash", "Runs a command", json!({"type": "object"}), |_, _| async {
//!         Ok("ok")
//!     }))
//!     .tool_layer(
//!         ServiceBuilder::new()
//!             .trace_agent()
//!             .reminders()
//!             .evict_outputs()
//!             .when_tool("bash", TimeoutLayer::new(Duration::from_secs(30))),
//!     )
//!     .build();
//! assert_eq!(agent.run("go").await?.text, "done");
//! # Ok(())
//! # }
//! ```

use tower::{ServiceBuilder, layer::util::Stack};

use crate::{
    evict::EvictLayer,
    matcher::{ToolMatcher, WhenLayer, when},
    reminders::RemindersLayer,
    summarize::SummarizeLayer,
    trace::TraceLayer,
};

mod sealed {
    pub trait Sealed<L> {}
    impl<L> Sealed<L> for tower::ServiceBuilder<L> {}
}

/// This crate's layers as [`ServiceBuilder`] methods, in the builder's onion order (each
/// method adds a layer inside the ones before it). Sealed: implemented for `ServiceBuilder`
/// only.
pub trait ServiceBuilderExt<L>: sealed::Sealed<L> + Sized {
    /// Adds a [`TraceLayer`] with its defaults (spans `chat {model}` / `execute_tool {tool}`).
    fn trace_agent(self) -> ServiceBuilder<Stack<TraceLayer, L>>;

    /// Adds an [`EvictLayer`] with the default settings (80,000 characters, head and tail of
    /// 2,000).
    fn evict_outputs(self) -> ServiceBuilder<Stack<EvictLayer, L>>;

    /// Adds a [`RemindersLayer`] with the built-in triggers.
    fn reminders(self) -> ServiceBuilder<Stack<RemindersLayer, L>>;

    /// Adds `layer` for the tool calls `matcher` picks only ([`when`]).
    fn when_tool<T>(
        self,
        matcher: impl Into<ToolMatcher>,
        layer: T,
    ) -> ServiceBuilder<Stack<WhenLayer<T>, L>>;

    /// Adds a [`SummarizeLayer`] with the default settings, summarizing with `summarizer`.
    fn summarize<Z>(self, summarizer: Z) -> ServiceBuilder<Stack<SummarizeLayer<Z>, L>>;
}

impl<L> ServiceBuilderExt<L> for ServiceBuilder<L> {
    fn trace_agent(self) -> ServiceBuilder<Stack<TraceLayer, L>> {
        self.layer(TraceLayer::new())
    }

    fn evict_outputs(self) -> ServiceBuilder<Stack<EvictLayer, L>> {
        self.layer(EvictLayer::new())
    }

    fn reminders(self) -> ServiceBuilder<Stack<RemindersLayer, L>> {
        self.layer(RemindersLayer::with_defaults())
    }

    fn when_tool<T>(
        self,
        matcher: impl Into<ToolMatcher>,
        layer: T,
    ) -> ServiceBuilder<Stack<WhenLayer<T>, L>> {
        self.layer(when(matcher, layer))
    }

    fn summarize<Z>(self, summarizer: Z) -> ServiceBuilder<Stack<SummarizeLayer<Z>, L>> {
        self.layer(SummarizeLayer::new(summarizer))
    }
}
