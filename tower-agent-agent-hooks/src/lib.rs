//! An [AGENT-HOOKS 0.1](https://github.com/responsibleai/agent-hooks) host for
//! [tower-agent](https://docs.rs/tower-agent) (its feature `agent-hooks`, where this crate is
//! `tower_agent::agent_hooks`): interceptors written against the framework-neutral contract
//! guard a tower-agent run at the eight interception points.
//!
//! [`AgentHooks`] is a hook set ([`HookLayers`]): given to
//! [`AgentBuilder::hooks`](tower_agent_core::agent::AgentBuilder::hooks), it places one layer
//! in each of the agent's stacks, outermost of its stack as every hook set, and the loop calls
//! it as the run ends:
//!
//! | Point | Where | A deny | A transform |
//! |---|---|---|---|
//! | `agent_startup` | start stack, as the run starts (`tools_registered`: the agent's tools) | the run ends [`Blocked`](tower_agent_core::agent::Outcome::Blocked), nothing enters the thread | refused by the SDK (`host_error:transform_target_invalid`) |
//! | `input` | start stack, the prompt (role `user`); a run without a prompt (an answer to approvals, a recovery) has none | the run ends `Blocked` before the prompt enters the thread | rewrites the prompt |
//! | `pre_model_call` | model stack, before each model call (`messages`: role and text of each message) | the run ends `Blocked` ([`Block`](tower_agent_core::error::Block)) | rewrites the messages' texts |
//! | `post_model_call` | model stack, on each answer (`response`: text, tool calls, finish reason) | the run ends `Blocked`; the answer does not enter the thread and none of its tool calls runs | rewrites the answer's text and its tool calls' arguments |
//! | `output` | model stack, on an answer without tool calls (the run's answer to its caller) | the run ends `Blocked`; the answer does not enter the thread | rewrites the answer's text |
//! | `pre_tool_call` | tool stack, before each tool call | the tool does not run; the model gets an error output naming the reason; the run goes on (posture `tool_seam_host_error: continue`) | rewrites the arguments the tool gets |
//! | `post_tool_call` | tool stack, on each tool output (`tool_result.value`: the output's [`TOOL_RESPONSE`](tower_agent_core::message::TOOL_RESPONSE) metadata, else its text) | the output is discarded: the model gets an error output naming the reason | replaces the output |
//! | `agent_shutdown` | the run's end ([`LoopHooks::run_end`]), `completed` or `error` | recorded only | — |
//!
//! Everything else — composition profiles, the §5 verdict gate, fail-closed synthesized
//! denies (`host_error:*`), the approval seam, identities, interception records — is the
//! SDK's [`InterceptionEmitter`](agent_hooks::InterceptionEmitter), one per run, built from
//! [`AgentHooks::builder`] (configuration in code) or from a host declaration document
//! ([`AgentHooks::from_declaration`]). Records go to [`AgentHooks::on_record`].
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use tower_agent_core::{Agent, agent::Outcome, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_agent_hooks::{AgentHooks, sdk::{self, AgentContext, Interceptor, Verdict}};
//!
//! /// A policy written against AGENT-HOOKS: no tool call may touch `/etc`.
//! struct NoEtc;
//!
//! #[tower_agent_agent_hooks::async_trait]
//! impl Interceptor for NoEtc {
//!     async fn intercept(&self, ctx: &AgentContext) -> Verdict {
//!         let path = ctx.get("tool_call").and_then(|c| c["args"]["path"].as_str());
//!         match path {
//!             Some(p) if p.starts_with("/etc") => Verdict::deny(Some("policy:etc".into()), None),
//!             _ => Verdict::allow(),
//!         }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let records = Arc::new(std::sync::Mutex::new(Vec::new()));
//! let sink = Arc::clone(&records);
//! let hooks = AgentHooks::builder()
//!     .interceptor(NoEtc)
//!     .build()
//!     .on_record(move |record| sink.lock().unwrap().push(record.clone()));
//! let read = tool_fn("read", "Reads a file", json!({"type": "object"}), |_args, _ctx| async move {
//!     Ok::<_, tower_agent_core::BoxError>("secret".to_owned())
//! });
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("read", json!({"path": "/etc/shadow"})).text("I could not."))
//!     .tool(read)
//!     .hooks(hooks)
//!     .build();
//! let resp = agent.run("Read /etc/shadow").await?;
//! assert_eq!(resp.outcome, Outcome::Finished);
//! let tool_result = resp.messages.iter().find(|m| m.tool_call_id.is_some()).unwrap();
//! assert!(tool_result.text().contains("policy:etc"));
//! // One record per emission: startup, input, two model calls, one tool call, output, shutdown.
//! let points: Vec<&str> = records.lock().unwrap().iter().map(|r| r.interception_point.as_str()).collect();
//! assert_eq!(points, ["agent_startup", "input", "pre_model_call", "post_model_call",
//!     "pre_tool_call", "pre_model_call", "post_model_call", "output", "agent_shutdown"]);
//! # Ok(())
//! # }
//! ```
//!
//! # Escalations
//!
//! A liftable deny (`deny` with an `approval` member, spec §9) consults the approval resolver
//! ([`AgentHooksBuilder::approval_resolver`]); without one it stands as a plain deny. With
//! [`AgentHooksBuilder::park_escalations`] ([`ParkResolver`]), an escalation at
//! `pre_tool_call` parks the call as the crate's own pending approval: the run ends
//! [`Interrupted`](tower_agent_core::agent::Outcome::Interrupted), the call saved with its
//! thread, and a person's answer ([`Approvals`](tower_agent_core::agent::interrupt::Approvals),
//! from any process sharing the store) lifts it (the call runs, recorded `resolved_by:
//! "approval"`) or denies it (it never runs).
//!
//! # Streaming
//!
//! By default the host buffers (`buffered_output: true`, spec §12.1a): a streaming answer is
//! collected whole before `post_model_call`, so nothing of it reaches the run's events before
//! its verdict. [`AgentHooks::incremental_output`] mediates incrementally instead (the §12.1
//! exception, exposure bound `none`): each text piece of the stream closes a segment, one
//! `post_model_call` (finish reason `incremental`) over the text so far decides it, and a
//! segment is released to the caller only on a permit; a deny withholds the rest and ends the
//! run; a stream that dies with text no emission covered fails closed
//! (`host_error:streaming_unsupported`, finish reason `stream_incomplete`).
//!
//! Eager tool dispatch ([`AgentBuilder::eager_tools`](tower_agent_core::agent::AgentBuilder::eager_tools))
//! is off while an `AgentHooks` set guards the model stack: its layer holds back the tool-call
//! pieces of a stream, so no tool starts before the `post_model_call` of the answer that makes
//! the call has permitted it (the spec's ordering: a tool runs after its `pre_tool_call`
//! composition, which comes after the answer's `post_model_call`).
//!
//! # With Claude Code hooks
//!
//! Hook sets run in the order they are given to the builder, the first outermost: with
//! `.hooks(agent_hooks).hooks(command_hooks)` a tool call meets the AGENT-HOOKS
//! `pre_tool_call` first, then the settings' PreToolUse hooks; a deny of either ends the call
//! (the inner set never sees a call the outer denied), and `post_tool_call` sees the output
//! after the PostToolUse hooks. Give the sets the other way round to let the settings' hooks
//! decide first.
//!
//! It depends on [tower-agent-core](https://docs.rs/tower-agent-core) through its public API
//! only, as an integration of yours would.
// No function of the library over 100 lines (the threshold in clippy.toml; the lint is
// pedantic, so it is turned on here, for the library only; CI denies warnings).
#![warn(clippy::too_many_lines)]

mod config;
mod envelope;
mod model;
mod park;
mod session;
mod start;
mod tool;

pub use agent_hooks as sdk;
/// The attribute the SDK's [`Interceptor`](sdk::Interceptor) and
/// [`ApprovalResolver`](sdk::ApprovalResolver) traits are implemented with.
pub use async_trait::async_trait;
pub use config::{AgentHooks, AgentHooksBuilder, DEFAULT_AGENT_ID, DEFAULT_TIMEOUT, FRAMEWORK};
pub use park::{PARK_RESOLVER, ParkResolver};

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tower_agent_core::{
    agent::{AgentResponse, HookLayers, LoopHooks, start::BoxStartService},
    context::RunContext,
    model::BoxModelService,
    tool::BoxToolService,
};

impl HookLayers for AgentHooks {
    fn wrap_model(&self, model: BoxModelService) -> BoxModelService {
        BoxModelService::new(crate::model::ModelHooks::new(
            Arc::clone(self.config()),
            model,
        ))
    }

    fn wrap_tools(&self, tools: BoxToolService) -> BoxToolService {
        BoxToolService::new(crate::tool::ToolHooks::new(
            Arc::clone(self.config()),
            tools,
        ))
    }

    fn wrap_start(&self, start: BoxStartService) -> Option<BoxStartService> {
        Some(BoxStartService::new(crate::start::StartHooks::new(
            Arc::clone(self.config()),
            start,
        )))
    }
}

impl LoopHooks for AgentHooks {
    fn run_end<'a>(
        &'a self,
        response: &'a AgentResponse,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, ()> {
        Box::pin(session::shutdown(self.config(), response, ctx))
    }
}
