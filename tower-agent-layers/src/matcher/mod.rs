//! [`ToolMatcher`] and [`when`]: apply any layer to some tool calls only.
//!
//! A matcher picks tool calls by name, with the syntax hook configurations use:
//!
//! | Pattern | Matches |
//! |---|---|
//! | `"*"`, `""` | every tool |
//! | `"Bash"`, `"Edit|Write"`, `"ls, glob"` | exactly these names (`|` or `,`, spaces ignored) |
//! | `"read_*"`, `"mcp__?"` | a glob over the whole name (only name characters and `*` `?`) |
//! | `"/^Edit$/"` | the regex between the slashes |
//! | `"Edit.*"`, `"mcp__memory__.*"` | any other pattern with regex characters: a regex, **unanchored** (`Edit.*` matches `NotebookEdit`, as in the Claude Code hooks protocol) |
//!
//! plus closures ([`ToolMatcher::predicate`], which see the whole call, arguments
//! included) and the combinators [`and`](ToolMatcher::and), [`or`](ToolMatcher::or) and
//! [`not`](ToolMatcher::not). [`ToolMatcher::protocol`] parses exactly as the Claude Code hooks
//! protocol does (no globs, no slashes): exact names, else an unanchored regex.
//!
//! A regex may compile to at most 256 KiB (plenty for tool names): a larger one, such as
//! `[\p{L}\d]{1,50000}`, is a [`MatcherError`] at once instead of seconds of compiling; so is
//! nesting deeper than 250 levels. Matching is linear in the name's length (the `regex`
//! crate), so no pattern can make a match slow.
//!
//! [`when(matcher, layer)`](when) applies **any** layer — ours or tower's — only to matching
//! tool calls; the others bypass it untouched.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use serde_json::json;
//! use tower::{Service, ServiceBuilder, ServiceExt, timeout::TimeoutLayer};
//! use tower_agent_core::{BoxError, context::RunContext, message::ToolCall};
//! use tower_agent_layers::matcher::{ToolMatcher, when};
//! use tower_agent_core::tool::{ToolRequest, ToolRouter, tool_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), BoxError> {
//! let slow = |name: &'static str| tool_fn(name, "sleeps", json!({"type": "object"}), |_, _| async {
//!     tokio::time::sleep(Duration::from_secs(60)).await;
//!     Ok("done")
//! });
//! let router = ToolRouter::new().tool(slow("bash")).tool(slow("read_file"));
//!
//! // Only `bash` gets a 30 s timeout.
//! let mut tools = ServiceBuilder::new()
//!     .layer(when("bash", TimeoutLayer::new(Duration::from_secs(30))))
//!     .service(router);
//!
//! let call = |name: &str| ToolRequest::new(ToolCall::new("1", name, json!({})), RunContext::new());
//! let err = tools.ready().await?.call(call("bash")).await.unwrap_err();
//! assert!(err.is::<tower::timeout::error::Elapsed>());
//! let out = tools.ready().await?.call(call("read_file")).await?;
//! assert_eq!(out.content, "done");
//!
//! let m = ToolMatcher::new("Edit.*");
//! assert!(m.matches_name("NotebookEdit"));
//! assert!(ToolMatcher::new("read_*").matches_name("read_file"));
//! assert!(!ToolMatcher::new("read_*").matches_name("bread_file"));
//! # Ok(())
//! # }
//! ```

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service, ServiceExt, util::Oneshot};

use tower_agent_core::{
    error::BoxError,
    message::{ToolCall, ToolOutput},
    tool::ToolRequest,
};

pub mod future;
mod layer;

pub use self::layer::{WhenLayer, when};

/// Picks tool calls. See the [module docs](crate::matcher) for the syntax.
///
/// Cloning is one reference count.
#[derive(Clone)]
pub struct ToolMatcher {
    kind: Arc<Kind>,
}

type Predicate = dyn Fn(&ToolCall) -> bool + Send + Sync;

enum Kind {
    All,
    Exact(Box<[String]>),
    Glob(globset::GlobMatcher),
    Regex(regex::Regex),
    Predicate(Box<Predicate>),
    And(ToolMatcher, ToolMatcher),
    Or(ToolMatcher, ToolMatcher),
    Not(ToolMatcher),
}

/// A pattern that is not a valid glob or regex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatcherError {
    pattern: String,
    message: String,
}

impl MatcherError {
    /// The pattern that failed.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }
}

impl fmt::Display for MatcherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid tool matcher `{}`: {}",
            self.pattern, self.message
        )
    }
}

impl std::error::Error for MatcherError {}

/// The most memory a compiled matcher regex may take (see the module docs).
const MAX_REGEX_SIZE: usize = 256 * 1024;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

impl ToolMatcher {
    fn from_kind(kind: Kind) -> Self {
        ToolMatcher {
            kind: Arc::new(kind),
        }
    }

    /// Matches every tool.
    pub fn all() -> Self {
        Self::from_kind(Kind::All)
    }

    /// Matches exactly these names.
    pub fn exact<N: Into<String>>(names: impl IntoIterator<Item = N>) -> Self {
        Self::from_kind(Kind::Exact(names.into_iter().map(Into::into).collect()))
    }

    /// Matches names by a glob over the whole name (`read_*`).
    ///
    /// # Errors
    ///
    /// Fails if the glob is invalid.
    pub fn glob(pattern: &str) -> Result<Self, MatcherError> {
        globset::Glob::new(pattern)
            .map(|g| Self::from_kind(Kind::Glob(g.compile_matcher())))
            .map_err(|e| MatcherError {
                pattern: pattern.to_owned(),
                message: e.kind().to_string(),
            })
    }

    /// Matches names by an unanchored regex (`Edit.*` matches `NotebookEdit`; use `^…$` for
    /// the whole name).
    ///
    /// # Errors
    ///
    /// Fails if the regex is invalid.
    pub fn regex(pattern: &str) -> Result<Self, MatcherError> {
        regex::RegexBuilder::new(pattern)
            .size_limit(MAX_REGEX_SIZE)
            .build()
            .map(|r| Self::from_kind(Kind::Regex(r)))
            .map_err(|e| MatcherError {
                pattern: pattern.to_owned(),
                message: e.to_string(),
            })
    }

    /// Matches the calls for which `f` returns true (it sees the arguments too).
    pub fn predicate<F>(f: F) -> Self
    where
        F: Fn(&ToolCall) -> bool + Send + Sync + 'static,
    {
        Self::from_kind(Kind::Predicate(Box::new(f)))
    }

    /// Parses our syntax (see the [module docs](crate::matcher)).
    ///
    /// # Errors
    ///
    /// Fails if the pattern is an invalid glob or regex.
    pub fn parse(pattern: &str) -> Result<Self, MatcherError> {
        let p = pattern.trim();
        if p.is_empty() || p == "*" {
            return Ok(Self::all());
        }
        if p.len() >= 2 && p.starts_with('/') && p.ends_with('/') {
            return Self::regex(&p[1..p.len() - 1]);
        }
        if let Some(exact) = Self::parse_exact(p) {
            return Ok(exact);
        }
        if p.chars().all(|c| is_name_char(c) || c == '*' || c == '?') {
            return Self::glob(p);
        }
        Self::regex(p)
    }

    /// Parses as the Claude Code hooks protocol does: `*`, empty or omitted match all; only
    /// letters, digits, `_`, `-`, spaces, `,` and `|` are exact names; anything else is an
    /// unanchored regex.
    ///
    /// # Errors
    ///
    /// Fails if the pattern is an invalid regex.
    pub fn protocol(pattern: &str) -> Result<Self, MatcherError> {
        let p = pattern.trim();
        if p.is_empty() || p == "*" {
            return Ok(Self::all());
        }
        match Self::parse_exact(p) {
            Some(exact) => Ok(exact),
            None => Self::regex(pattern),
        }
    }

    fn parse_exact(p: &str) -> Option<Self> {
        p.chars()
            .all(|c| is_name_char(c) || c == ' ' || c == ',' || c == '|')
            .then(|| Self::exact(p.split(['|', ',']).map(str::trim).filter(|s| !s.is_empty())))
    }

    /// Parses our syntax.
    ///
    /// # Panics
    ///
    /// Panics if the pattern is invalid; use [`parse`](Self::parse) for patterns that come
    /// from configuration.
    pub fn new(pattern: &str) -> Self {
        Self::parse(pattern).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Matches what both match.
    #[must_use]
    pub fn and(self, other: impl Into<ToolMatcher>) -> Self {
        Self::from_kind(Kind::And(self, other.into()))
    }

    /// Matches what either matches.
    #[must_use]
    pub fn or(self, other: impl Into<ToolMatcher>) -> Self {
        Self::from_kind(Kind::Or(self, other.into()))
    }

    /// Matches what this does not.
    #[must_use]
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        Self::from_kind(Kind::Not(self))
    }

    /// Whether the call matches.
    pub fn matches(&self, call: &ToolCall) -> bool {
        match &*self.kind {
            Kind::Predicate(f) => f(call),
            Kind::And(a, b) => a.matches(call) && b.matches(call),
            Kind::Or(a, b) => a.matches(call) || b.matches(call),
            Kind::Not(a) => !a.matches(call),
            _ => self.matches_name(&call.name),
        }
    }

    /// Whether a name matches. A [predicate](Self::predicate) needs a call and never
    /// matches a bare name.
    pub fn matches_name(&self, name: &str) -> bool {
        match &*self.kind {
            Kind::All => true,
            Kind::Exact(names) => names.iter().any(|n| n == name),
            Kind::Glob(g) => g.is_match(name),
            Kind::Regex(r) => r.is_match(name),
            Kind::Predicate(_) => false,
            Kind::And(a, b) => a.matches_name(name) && b.matches_name(name),
            Kind::Or(a, b) => a.matches_name(name) || b.matches_name(name),
            Kind::Not(a) => !a.matches_name(name),
        }
    }
}

impl ToolMatcher {
    /// Appends to `out` the names of the exact matchers ([`exact`](Self::exact), a bare name
    /// or `a|b` in [`parse`](Self::parse)) in this one, alone or joined by [`or`](Self::or):
    /// the names a matcher surely matches, e.g. the files a FileChanged hook watches. Any
    /// other kind (glob, regex, predicate, `and`, `not`) adds nothing, whatever it matches.
    pub fn exact_names(&self, out: &mut Vec<String>) {
        match &*self.kind {
            Kind::Exact(names) => out.extend(names.iter().cloned()),
            Kind::Or(a, b) => {
                a.exact_names(out);
                b.exact_names(out);
            }
            _ => {}
        }
    }
}

impl Default for ToolMatcher {
    fn default() -> Self {
        Self::all()
    }
}

impl From<&str> for ToolMatcher {
    /// Parses our syntax; panics on an invalid pattern (see [`ToolMatcher::new`]).
    fn from(pattern: &str) -> Self {
        Self::new(pattern)
    }
}

impl From<String> for ToolMatcher {
    /// Parses our syntax; panics on an invalid pattern (see [`ToolMatcher::new`]).
    fn from(pattern: String) -> Self {
        Self::new(&pattern)
    }
}

impl fmt::Debug for ToolMatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.kind {
            Kind::All => f.write_str("All"),
            Kind::Exact(names) => f.debug_tuple("Exact").field(names).finish(),
            Kind::Glob(g) => f.debug_tuple("Glob").field(&g.glob().glob()).finish(),
            Kind::Regex(r) => f.debug_tuple("Regex").field(&r.as_str()).finish(),
            Kind::Predicate(_) => f.write_str("Predicate"),
            Kind::And(a, b) => f.debug_tuple("And").field(a).field(b).finish(),
            Kind::Or(a, b) => f.debug_tuple("Or").field(a).field(b).finish(),
            Kind::Not(a) => f.debug_tuple("Not").field(a).finish(),
        }
    }
}

/// The service of [`when`]: `matched` is the layer over (a clone of) `inner`.
///
/// # Backpressure
///
/// Which branch a call takes is known only in `call`, so `poll_ready` reports ready at once
/// and each call drives the readiness of its own clone of the chosen branch (as
/// [`ToolRouter`](tower_agent_core::tool::ToolRouter) does): a busy layer on one branch never blocks the
/// other.
#[derive(Debug, Clone)]
pub struct When<S, M> {
    inner: S,
    matched: M,
    matcher: ToolMatcher,
}

impl<S, M> When<S, M> {
    /// The service calls bypass to.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The layered service matching calls go to.
    pub fn matched(&self) -> &M {
        &self.matched
    }
}

impl<S, M> Service<ToolRequest> for When<S, M>
where
    S: Service<ToolRequest, Response = ToolOutput> + Clone,
    S::Error: Into<BoxError>,
    M: Service<ToolRequest, Response = ToolOutput> + Clone,
    M::Error: Into<BoxError>,
{
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = future::ResponseFuture<S, M>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        if self.matcher.matches(&req.call) {
            future::ResponseFuture::matched(self.matched.clone().oneshot(req))
        } else {
            future::ResponseFuture::bypass(self.inner.clone().oneshot(req))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tower_agent_core::{context::RunContext, message::ToolCall};

    #[test]
    fn syntax_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "anything", true),
            ("", "anything", true),
            ("Bash", "Bash", true),
            ("Bash", "bash", false),
            ("Bash", "BashX", false),
            ("Edit|Write", "Write", true),
            ("Edit|Write", "NotebookEdit", false),
            ("ls, glob", "glob", true),
            ("ls , glob", "ls", true),
            ("read_*", "read_file", true),
            ("read_*", "bread_file", false),
            ("read_?ile", "read_file", true),
            ("/^Edit$/", "Edit", true),
            ("/^Edit$/", "NotebookEdit", false),
            ("Edit.*", "NotebookEdit", true),
            ("Edit.*", "Edit", true),
            ("Edit.*", "Write", false),
            ("mcp__memory__.*", "mcp__memory__create", true),
            ("mcp__memory__.*", "mcp__github__create", false),
            ("^Edit$", "NotebookEdit", false),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(
                ToolMatcher::new(pattern).matches_name(name),
                *expected,
                "{pattern:?} vs {name:?}"
            );
        }
    }

    #[test]
    fn protocol_has_no_globs() {
        // As a JS regex, `read_*` is `read` then any number of `_`: unanchored, so it matches
        // `bread_file` too.
        let m = ToolMatcher::protocol("read_*").unwrap();
        assert!(m.matches_name("read_file"));
        assert!(m.matches_name("bread_file"));
        assert!(
            ToolMatcher::protocol("Edit|Write")
                .unwrap()
                .matches_name("Edit")
        );
        assert!(
            !ToolMatcher::protocol("Edit|Write")
                .unwrap()
                .matches_name("NotebookEdit")
        );
    }

    #[test]
    fn invalid_patterns_are_errors() {
        let err = ToolMatcher::parse("Edit(").unwrap_err();
        assert_eq!(err.pattern(), "Edit(");
        assert!(err.to_string().starts_with("invalid tool matcher `Edit(`"));
        assert!(ToolMatcher::parse("/[/").is_err());
        // Too big to compile: refused, with the regex crate's reason.
        let err = ToolMatcher::parse(r"/[\p{L}\d]{1,50000}/").unwrap_err();
        assert!(err.to_string().contains("size limit"), "{err}");
        // Real matchers stay well under the limit, Unicode classes included.
        for ok in [
            r"\w+",
            r"(?i)^mcp__[\p{L}\d_]+__.*$",
            "Edit|Write|MultiEdit",
            "a{1000}",
        ] {
            ToolMatcher::parse(ok).unwrap();
        }
    }

    #[tokio::test]
    async fn when_applies_the_layer_only_to_matching_calls() {
        use tower::{ServiceBuilder, ServiceExt};
        use tower_agent_core::tool::{ToolRouter, tool_fn};

        let echo = |name: &'static str| {
            tool_fn(name, "echo", json!({}), move |args, _| async move {
                Ok::<_, BoxError>(format!("{name}: {args}"))
            })
        };
        let router = ToolRouter::new().tool(echo("bash")).tool(echo("ls"));
        // A layer that rewrites both the request and the response.
        let shout = tower::layer::layer_fn(|inner| {
            ServiceBuilder::new()
                .map_request(|mut req: ToolRequest| {
                    req.call.arguments = json!({"rewritten": true});
                    req
                })
                .map_response(|mut out: ToolOutput| {
                    out.content = out.content.to_uppercase();
                    out.metadata.insert("touched".into(), json!(true));
                    out
                })
                .service(inner)
        });
        let svc = ServiceBuilder::new()
            .layer(when("bash", shout))
            .service(router);
        let call = |name: &str| {
            ToolRequest::new(ToolCall::new("1", name, json!({"a": 1})), RunContext::new())
        };
        let out = svc.clone().oneshot(call("bash")).await.unwrap();
        assert_eq!(out.content, "BASH: {\"REWRITTEN\":TRUE}");
        assert_eq!(out.metadata["touched"], json!(true));
        let out = svc.oneshot(call("ls")).await.unwrap();
        assert_eq!(out.content, "ls: {\"a\":1}", "untouched");
        assert!(out.metadata.is_empty());
    }

    #[test]
    fn combinators_and_predicates() {
        let req = |name: &str, args| ToolCall::new("1", name, args);
        let rm = ToolMatcher::predicate(|c| {
            c.arguments["command"]
                .as_str()
                .is_some_and(|c| c.contains("rm -rf"))
        });
        let m = ToolMatcher::new("bash").and(rm.clone());
        assert!(m.matches(&req("bash", json!({"command": "rm -rf /"}))));
        assert!(!m.matches(&req("bash", json!({"command": "ls"}))));
        assert!(!m.matches(&req("sh", json!({"command": "rm -rf /"}))));
        let not_ls = ToolMatcher::new("ls").not();
        assert!(not_ls.matches_name("glob") && !not_ls.matches_name("ls"));
        let either = ToolMatcher::new("ls").or("glob");
        assert!(either.matches_name("glob") && !either.matches_name("grep"));
        assert!(!rm.matches_name("bash"), "predicates need a request");
    }
}
