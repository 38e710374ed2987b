//! [`AgentStacks`]: an agent's stacks in order, as [`Agent::describe`](super::Agent::describe)
//! prints them.
//!
//! ```
//! use tower::{ServiceBuilder, limit::ConcurrencyLimitLayer, timeout::TimeoutLayer};
//! use std::time::Duration;
//! use tower_agent_core::{Agent, model::ScriptedModel};
//!
//! let agent = Agent::builder()
//!     .name("helper")
//!     .model(ScriptedModel::new().text("hi"))
//!     .tool_layer(
//!         ServiceBuilder::new()
//!             .layer(TimeoutLayer::new(Duration::from_secs(30)))
//!             .layer(ConcurrencyLimitLayer::new(4)),
//!     )
//!     .build();
//! let stacks = agent.describe();
//! assert_eq!(stacks.tools, ["TimeoutLayer", "ConcurrencyLimitLayer"]);
//! assert_eq!(stacks.model, ["ScriptedModel"]);
//! println!("{stacks}");
//! // agent `helper`
//! //   start:   (none)
//! //   model:   ScriptedModel
//! //   tools:   TimeoutLayer → ConcurrencyLimitLayer → router [0 tools]
//! //   step:    (none)
//! //   loop:    (none)
//! //   setup:   (none)
//! //   prepare: (none)
//! ```

use std::fmt;

/// An agent's stacks, each outermost first, and its stages in the order they run: what
/// [`Agent::describe`](super::Agent::describe) returns. Its `Display` prints one line per
/// level (see the [module docs](self)).
///
/// Names are Rust type names without their paths (`TimeoutLayer`, `Retry<Attempts,
/// OpenAiChat>`): a layer's at the level where it was added — a tower
/// [`ServiceBuilder`](tower::ServiceBuilder) or [`Stack`](tower::layer::util::Stack) given as
/// one layer is listed as its layers, in order — and the whole service given to
/// [`model`](super::AgentBuilder::model) as one name, since a service's type does not say
/// which of its parameters is the inner service. A hook set's layers
/// ([`AgentBuilder::hooks`](super::AgentBuilder::hooks)) are listed where the builder placed
/// them, as `<set> (hooks)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentStacks {
    /// The agent's name ([`AgentBuilder::name`](super::AgentBuilder::name)).
    pub name: Option<String>,
    /// The [start](super::start) stack's layers, outermost first.
    pub start: Vec<String>,
    /// The model stack: hook sets' model layers, then the service given to
    /// [`model`](super::AgentBuilder::model).
    pub model: Vec<String>,
    /// The tool stack's layers, outermost first (the router under them).
    pub tools: Vec<String>,
    /// The tools the builder registered (setup stages may add more to a run).
    pub tool_names: Vec<String>,
    /// The [step](super::step) stack's layers, outermost first.
    pub step: Vec<String>,
    /// The loop hooks ([`LoopHooks`](super::LoopHooks)), in the order they are asked.
    pub loop_hooks: Vec<String>,
    /// The [`Setup`](super::Setup) stages, in order.
    pub setup: Vec<String>,
    /// The [`Prepare`](super::Prepare) stages, in order.
    pub prepare: Vec<String>,
}

impl fmt::Display for AgentStacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => writeln!(f, "agent `{name}`")?,
            None => writeln!(f, "agent")?,
        }
        let router = format!("router [{}]", router_label(&self.tool_names));
        let mut tools: Vec<&str> = self.tools.iter().map(String::as_str).collect();
        tools.push(&router);
        line(f, "start:  ", self.start.iter().map(String::as_str))?;
        line(f, "model:  ", self.model.iter().map(String::as_str))?;
        line(f, "tools:  ", tools.into_iter())?;
        line(f, "step:   ", self.step.iter().map(String::as_str))?;
        line(f, "loop:   ", self.loop_hooks.iter().map(String::as_str))?;
        line(f, "setup:  ", self.setup.iter().map(String::as_str))?;
        line(f, "prepare:", self.prepare.iter().map(String::as_str))
    }
}

/// `0 tools`, or the names separated by commas.
fn router_label(names: &[String]) -> String {
    if names.is_empty() {
        "0 tools".to_owned()
    } else {
        names.join(", ")
    }
}

/// One level: its names joined by arrows (outermost first), or `(none)`.
fn line<'a>(
    f: &mut fmt::Formatter<'_>,
    label: &str,
    mut names: impl Iterator<Item = &'a str>,
) -> fmt::Result {
    write!(f, "  {label} ")?;
    match names.next() {
        None => f.write_str("(none)")?,
        Some(first) => {
            f.write_str(first)?;
            for name in names {
                write!(f, " → {name}")?;
            }
        }
    }
    writeln!(f)
}

/// The layers of the layer type `T`, outermost first: a tower `ServiceBuilder` or `Stack` as
/// its layers, `Identity` as none, any other layer as its short name.
pub(crate) fn layers_of<T>() -> Vec<String> {
    let mut out = Vec::new();
    flatten(std::any::type_name::<T>(), &mut out);
    out
}

/// The short name of the type `T` (paths removed from it and its parameters).
pub(crate) fn name_of<T: ?Sized>() -> String {
    short(std::any::type_name::<T>())
}

/// Pushes the layers named by the type name `ty` onto `out`, outermost first.
fn flatten(ty: &str, out: &mut Vec<String>) {
    let (head, args) = split_generic(ty);
    match (last_segment(head), args.as_slice()) {
        ("Identity", []) => {}
        ("ServiceBuilder", [inner]) => flatten(inner, out),
        // `Stack<Inner, Outer>` applies `Outer` around `Inner`.
        ("Stack", [inner, outer]) => {
            flatten(outer, out);
            flatten(inner, out);
        }
        _ => out.push(short(ty)),
    }
}

/// `ty`'s path and its top-level generic arguments (`a::B<C, D<E>>` → `a::B`, `[C, D<E>]`).
fn split_generic(ty: &str) -> (&str, Vec<&str>) {
    let ty = ty.trim();
    let Some(open) = ty.find('<') else {
        return (ty, Vec::new());
    };
    if !ty.ends_with('>') {
        return (ty, Vec::new());
    }
    let inner = &ty[open + 1..ty.len() - 1];
    let (mut args, mut depth, mut from) = (Vec::new(), 0usize, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                args.push(inner[from..i].trim());
                from = i + 1;
            }
            _ => {}
        }
    }
    args.push(inner[from..].trim());
    (&ty[..open], args)
}

/// The last segment of a path (`tower::timeout::TimeoutLayer` → `TimeoutLayer`).
fn last_segment(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path)
}

/// `ty` with every path shortened to its last segment, parameters included.
fn short(ty: &str) -> String {
    let mut out = String::with_capacity(ty.len());
    let mut word = String::new();
    for c in ty.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(last_segment(&word));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(last_segment(&word));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_builder_is_listed_as_its_layers_outermost_first() {
        let ty = "tower::builder::ServiceBuilder<tower_layer::stack::Stack<b::B, \
                  tower_layer::stack::Stack<a::A<x::X, y::Y<z::Z>>, tower_layer::identity::Identity>>>";
        let mut out = Vec::new();
        flatten(ty, &mut out);
        assert_eq!(out, ["A<X, Y<Z>>", "B"]);
    }

    #[test]
    fn names_lose_their_paths_and_keep_their_shape() {
        assert_eq!(
            short("tower::retry::Retry<my::Policy, &dyn core::any::Any, (u8, [m::T; 2])>"),
            "Retry<Policy, &dyn Any, (u8, [T; 2])>"
        );
        assert_eq!(short("Plain"), "Plain");
    }

    #[test]
    fn identity_is_no_layer() {
        assert!(layers_of::<tower::layer::util::Identity>().is_empty());
    }
}
