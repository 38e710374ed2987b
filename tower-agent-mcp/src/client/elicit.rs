//! Elicitation: a server asks the user for input during a tool call.

use serde_json::Value;
use tower::util::BoxCloneSyncService;

use tower_agent_core::{context::RunContext, error::BoxError};

/// What a server asked for, given to the [`Elicitation`] service. Equality compares the
/// server, message and mode (not [`ctx`](Self::ctx)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// The server's name (as configured).
    pub server: String,
    /// The server's message for the user.
    pub message: String,
    /// What is asked: a form to fill in, or a URL to visit.
    pub mode: ElicitationMode,
    /// The run of the server's tool call in flight (the one that started last if several
    /// are); `None` when no call of that server is in flight.
    pub ctx: Option<RunContext>,
}

impl PartialEq for ElicitationRequest {
    fn eq(&self, other: &Self) -> bool {
        self.server == other.server && self.message == other.message && self.mode == other.mode
    }
}

impl ElicitationRequest {
    /// A request (for tests and layers that make their own).
    pub fn new(
        server: impl Into<String>,
        message: impl Into<String>,
        mode: ElicitationMode,
    ) -> Self {
        ElicitationRequest {
            server: server.into(),
            message: message.into(),
            mode,
            ctx: None,
        }
    }
}

/// The kind of an [`ElicitationRequest`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElicitationMode {
    /// Form mode: the answer is an object matching `requested_schema` (a flat JSON Schema
    /// object of primitive properties, as MCP restricts it).
    Form {
        /// The JSON Schema of the expected answer.
        requested_schema: Value,
    },
    /// URL mode: the user is sent to `url` (out of band); the answer carries no content.
    Url {
        /// Where the user should go.
        url: String,
        /// The server's id of this elicitation (empty when the protocol version has none).
        elicitation_id: String,
    },
}

/// What the [`Elicitation`] service answers.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationResponse {
    /// The user accepted: the form's content (`None` for URL mode).
    Accept(Option<Value>),
    /// The user declined to answer; the server may go on without the information.
    Decline,
    /// The user dismissed the request; the server should stop the operation.
    Cancel,
}

/// The service that answers servers' elicitation requests: any tower service (a channel to a
/// UI, a policy …), type-erased, like tower-agent's `tower_agent::layers::hooks::Approval`. Without
/// one, every request is declined. An `Err` from it is sent to the server as an internal
/// error of the elicitation request.
pub type Elicitation = BoxCloneSyncService<ElicitationRequest, ElicitationResponse, BoxError>;
