//! Errors: the crate's opaque [`Error`], the typed [`Abort`] that ends a run, and [`BoxError`].
//!
//! Most failures in an agent run are *data*: a tool that fails, times out, is denied or does
//! not exist becomes an error [`ToolOutput`](crate::message::ToolOutput) the model sees and can
//! act on. Only an [`Abort`] from the tool stack, a failed model call (after whatever retry
//! layer you stacked) or a failed prepare stage ends a run, with
//! [`Outcome::Aborted`](crate::agent::Outcome::Aborted). [`Error`] is for what stops a run
//! from being run at all: a failing setup stage or thread store.
//!
//! # Example
//!
//! ```
//! use tower_agent_core::error::{Abort, BoxError};
//!
//! let err: BoxError = Abort::new("the user revoked access").into();
//! let abort = err.downcast_ref::<Abort>().unwrap();
//! assert_eq!(abort.reason(), "the user revoked access");
//! assert_eq!(err.to_string(), "run aborted: the user revoked access");
//! ```

use std::{error::Error as StdError, fmt};

/// A type-erased error, the error type of model and tool services (as in tower).
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// A typed error that ends the run with
/// [`Outcome::Aborted`](crate::agent::Outcome::Aborted) when it comes out of the tool stack (or
/// the model stack).
///
/// Any other error of the tool stack becomes an error output for the model. The loop finds an
/// `Abort` anywhere in the error's [`source`](StdError::source) chain, so layers that wrap
/// errors keep it working. The outcome's `error` is the abort's [`reason`](Abort::reason); the
/// abort itself, with the error of yours it carries ([`with_source`](Abort::with_source)), is
/// the response's [`error`](crate::AgentResponse::error).
#[derive(Debug, Clone)]
pub struct Abort {
    reason: String,
    source: Option<std::sync::Arc<dyn StdError + Send + Sync>>,
}

impl PartialEq for Abort {
    /// Aborts are equal when their reasons are (their sources are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.reason == other.reason
    }
}

impl Eq for Abort {}

impl Abort {
    /// An abort with a reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Abort {
            reason: reason.into(),
            source: None,
        }
    }

    /// An abort with a reason, caused by `source`: a typed error of yours, which the caller
    /// finds in [`AgentResponse::error`](crate::AgentResponse::error) (see
    /// [`find_source`](Abort::find_source)).
    pub fn with_source(
        reason: impl Into<String>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Abort {
            reason: reason.into(),
            source: Some(std::sync::Arc::new(source)),
        }
    }

    /// Why the run was aborted.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The `Abort` in `err` or its source chain.
    pub fn find<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a Abort> {
        Abort::find_source::<Abort>(err)
    }

    /// The first error of type `E` in `err` or its source chain (through an `Abort`'s
    /// source too): the typed cause of a run's end.
    pub fn find_source<'a, E: StdError + 'static>(
        err: &'a (dyn StdError + 'static),
    ) -> Option<&'a E> {
        let mut cur = Some(err);
        while let Some(e) = cur {
            if let Some(found) = e.downcast_ref::<E>() {
                return Some(found);
            }
            cur = e.source();
        }
        None
    }
}

/// A typed error that ends the run with [`Outcome::Blocked`](crate::agent::Outcome::Blocked)
/// when it comes out of the model stack: a layer's policy refused the model call or its answer
/// (an AGENT-HOOKS deny at `pre_model_call`, `post_model_call` or `output`). The answer it
/// refused does not enter the thread. The loop finds it anywhere in the error's source chain.
///
/// ```
/// use tower_agent_core::error::{Block, BoxError};
///
/// let err: BoxError = Block::new("the answer names a secret").into();
/// assert_eq!(Block::find(&*err).unwrap().reason(), "the answer names a secret");
/// assert_eq!(err.to_string(), "run blocked: the answer names a secret");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    reason: String,
}

impl Block {
    /// A block with a reason: the run's [`Outcome::Blocked`](crate::agent::Outcome::Blocked)
    /// reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Block {
            reason: reason.into(),
        }
    }

    /// Why the run was blocked.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The `Block` in `err` or its source chain.
    pub fn find<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a Block> {
        Abort::find_source::<Block>(err)
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run blocked: {}", self.reason)
    }
}

impl StdError for Block {}

impl fmt::Display for Abort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run aborted: {}", self.reason)
    }
}

impl StdError for Abort {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// The crate's error: what keeps an agent run from running.
///
/// It is opaque: ask it with the `is_*` predicates and read its cause with
/// [`source`](StdError::source). Its `Display` text is not specified and may change.
pub struct Error {
    inner: Box<ErrorImpl>,
}

struct ErrorImpl {
    kind: Kind,
    cause: Option<BoxError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Setup,
    Store,
    Approvals,
    Compact,
}

impl Error {
    fn new(kind: Kind, cause: Option<BoxError>) -> Self {
        Error {
            inner: Box::new(ErrorImpl { kind, cause }),
        }
    }

    pub(crate) fn setup(cause: BoxError) -> Self {
        Self::new(Kind::Setup, Some(cause))
    }

    pub(crate) fn store(cause: BoxError) -> Self {
        Self::new(Kind::Store, Some(cause))
    }

    pub(crate) fn approvals(cause: impl StdError + Send + Sync + 'static) -> Self {
        Self::new(Kind::Approvals, Some(Box::new(cause)))
    }

    pub(crate) fn compact(cause: impl Into<BoxError>) -> Self {
        Self::new(Kind::Compact, Some(cause.into()))
    }

    /// A compaction the caller asked for ([`Agent::compact`](crate::Agent::compact)) could
    /// not be made: the store has no such thread, it has nothing to compact or waits for
    /// decisions on its calls, or the model's summary failed (the source says which). The
    /// thread is left as it was.
    pub fn is_compact(&self) -> bool {
        self.inner.kind == Kind::Compact
    }

    /// An [`AgentRequest::approvals`](crate::agent::AgentRequest::approvals) request was
    /// refused: its source is the [`ApprovalError`](crate::agent::ApprovalError).
    pub fn is_approvals(&self) -> bool {
        self.inner.kind == Kind::Approvals
    }

    /// A setup (before-agent) stage failed.
    pub fn is_setup(&self) -> bool {
        self.inner.kind == Kind::Setup
    }

    /// The thread store failed to load or save.
    pub fn is_store(&self) -> bool {
        self.inner.kind == Kind::Store
    }

    fn description(&self) -> &'static str {
        match self.inner.kind {
            Kind::Setup => "setup stage failed",
            Kind::Store => "thread store failed",
            Kind::Approvals => "approvals refused",
            Kind::Compact => "compaction failed",
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("tower_agent::Error");
        d.field(&self.inner.kind);
        if let Some(cause) = &self.inner.cause {
            d.field(cause);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner.cause {
            Some(cause) => write!(f, "{}: {cause}", self.description()),
            None => f.write_str(self.description()),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .cause
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// An error and its [sources](StdError::source) as one line, `outer: inner: root`: what the
/// loop writes when a failure becomes text (a tool's error output, an aborted run's reason, a
/// log line), and what a layer of yours can write the same way.
///
/// A source whose text the line already holds is left out, so an error that prints its cause
/// in its own `Display` (as [`Error`] does) does not repeat it. The line is as long as the
/// errors' texts are: no cap.
///
/// # Example
///
/// ```
/// use tower_agent_core::error::{self, Abort, BoxError};
///
/// let io = std::io::Error::other("disk full");
/// let err: BoxError = Abort::with_source("could not save", io).into();
/// assert_eq!(error::chain(&*err), "run aborted: could not save: disk full");
/// ```
pub fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cur = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(BoxError);
    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("wrapped")
        }
    }
    impl StdError for Wrapper {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn chain_skips_what_the_line_holds() {
        let err: BoxError = Box::new(Wrapper(Error::store("disk full".into()).into()));
        assert_eq!(chain(&*err), "wrapped: thread store failed: disk full");
        let plain: BoxError = "plain".into();
        assert_eq!(chain(&*plain), "plain");
    }

    #[test]
    fn abort_found_in_chain() {
        let err: BoxError = Box::new(Wrapper(Abort::new("x").into()));
        assert_eq!(Abort::find(&*err).map(Abort::reason), Some("x"));
        let other: BoxError = "plain".into();
        assert!(Abort::find(&*other).is_none());
    }

    #[test]
    fn error_predicates_and_source() {
        let e = Error::store("disk full".into());
        assert!(e.is_store() && !e.is_setup());
        assert_eq!(e.to_string(), "thread store failed: disk full");
        assert_eq!(e.source().unwrap().to_string(), "disk full");
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<Error>();
    }
}

/// A deferred tool call: the error the tool path fails with when a PreToolUse hook defers the
/// only call of a step. The loop ends the run
/// [`Outcome::Deferred`](crate::agent::Outcome::Deferred) with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Deferred {
    /// The call, with the arguments the model generated.
    pub call: crate::message::ToolCall,
}

impl std::fmt::Display for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tool call `{}` ({}) deferred",
            self.call.name, self.call.id
        )
    }
}

impl std::error::Error for Deferred {}

impl Deferred {
    /// The deferral in an error's source chain, if any.
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Deferred> {
        Abort::find_source::<Deferred>(err)
    }
}
