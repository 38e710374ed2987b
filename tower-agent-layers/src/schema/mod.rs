//! [`SchemaGuardLayer`]: check each tool call's arguments against the tool's JSON Schema
//! before the call, and nudge the model with an example when a tool reports a validation error.
//!
//! **Before the call (guardrail).** The arguments are validated with the
//! [`jsonschema`](https://docs.rs/jsonschema) crate against the tool's
//! [`ToolSpec::parameters`]. Valid arguments go on to the tool untouched. Invalid ones are
//! *denied*: the tool is not called, and the model gets an error output listing every
//! validation error (instance path and message) and an example of valid arguments made from
//! the schema by [`example_for_schema`]:
//!
//! ```text
//! invalid arguments for tool `search`; the call was not run:
//! - at /: "query" is a required property
//! - at /limit: "ten" is not of type "integer"
//! Call it again with arguments that match its schema, for example:
//! {"limit":1,"query":"example"}
//! ```
//!
//! A tool with no schema (`null` or `{}`) or with a schema that does not compile (logged once,
//! as a warning) is not checked. Remote `$ref`s are never fetched: a schema that needs one
//! does not compile. Validators are compiled once per tool name and schema and cached by the
//! layer (clones and runs share the cache).
//!
//! **After the call (nudge).** When a tool's output — error or not — reports a validation
//! error (it contains, in any case, `validation error`, `missing field`, `invalid type` or
//! `required property`), the layer appends a hint with the schema example to the output:
//!
//! ```text
//! invalid arguments for tool `deploy`: missing field `env`
//!
//! <system-hook>
//! The arguments of `deploy` must match its JSON Schema. Example of valid arguments:
//! {"env":"production"}
//! </system-hook>
//! ```
//!
//! The hint is appended to the output rather than queued with
//! [`RunContext::remind`](tower_agent_core::context::RunContext::remind), because it is about one call:
//! next to that call's result the model reads it with the error it explains, even when several
//! calls of a step failed; it also works when the tool stack is used outside the agent loop
//! (where nobody delivers reminders), and layers outside the guard (a ledger, a trace) record
//! what the model saw. A tool's `Err` is left as it is for the outer layers. Turn the nudge off
//! with [`without_nudge`](SchemaGuardLayer::without_nudge).
//!
//! **Readiness.** `poll_ready` is the inner service's. A call that goes on calls the service
//! `poll_ready` readied, at once. A denied call does not call it: that service is dropped
//! (giving back what it reserved, e.g. a `ConcurrencyLimit` permit) and an unready clone takes
//! its place, so the inner service must be `Clone`.
//!
//! # Where the schemas come from
//!
//! - [`SchemaGuardLayer::new(specs)`](SchemaGuardLayer::new) or
//!   [`from_router(&router)`](SchemaGuardLayer::from_router): the schemas are given when the
//!   layer is built and compiled at once; the layer wraps any tool service.
//! - [`SchemaGuardLayer::from_tools()`](SchemaGuardLayer::from_tools): the schemas are read
//!   from the service it wraps, through [`ToolSpecs`], each time it is applied. The agent
//!   applies its tool stack to each run's [`ToolRouter`] after the setup stages registered
//!   their tools, so this mode also checks the tools that setup stages add. It wraps a
//!   [`ToolRouter`] or a layer of this crate over one: add it as the innermost tool layer
//!   (the last [`tool_layer`](tower_agent_core::agent::AgentBuilder::tool_layer)), or below layers that
//!   forward [`ToolSpecs`]. Applying it costs a lookup of each tool in the cache, and nothing
//!   when the run's tools are the ones of the previous run.
//!
//! # Example
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use tower_agent_core::{Agent, BoxError, model::ScriptedModel, tool::typed_tool};
//! use tower_agent_layers::schema::SchemaGuardLayer;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Search {
//!     query: String,
//!     limit: Option<u32>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let model = ScriptedModel::new()
//!     .tool_call("search", json!({"limit": "ten"})) // denied: no query, limit not a number
//!     .tool_call("search", json!({"query": "tower"}))
//!     .text("found it")
//!     .recording();
//! let agent = Agent::builder()
//!     .model(model.clone())
//!     .tool(typed_tool("search", "Searches", |args: Search, _| async move {
//!         Ok(format!("results for {}", args.query))
//!     }))
//!     .tool_layer(SchemaGuardLayer::from_tools())
//!     .build();
//!
//! let resp = agent.run("find tower").await?;
//! let denied = resp.messages[2].text();
//! assert!(denied.contains("\"query\" is a required property"));
//! assert!(denied.contains("at /limit"));
//! assert!(denied.contains(r#"{"query":"example"}"#));
//! assert_eq!(resp.messages[4].text(), "results for tower");
//! # Ok(())
//! # }
//! ```

use std::{
    collections::HashMap,
    fmt,
    hash::{Hash, Hasher},
    sync::{Arc, Mutex, OnceLock},
    task::{Context, Poll},
};

use serde_json::Value;
use tower::{Layer, Service};

use tower_agent_core::{
    message::{ToolOutput, ToolSpec},
    tool::{ToolRequest, ToolRouter},
};

mod example;
pub mod future;
mod layer;

pub use self::example::example_for_schema;
pub use self::layer::{Fixed, FromTools, SchemaGuardLayer};

/// At most this many validation errors are listed in a denial (the rest are counted).
pub const MAX_LISTED_ERRORS: usize = 10;

/// A tool service that knows the specs of the tools it serves: [`ToolRouter`], and this crate's
/// tool layers over one. [`SchemaGuardLayer::from_tools`] reads the schemas through it.
pub trait ToolSpecs {
    /// The specs of the tools (shared, cheap to clone).
    fn tool_specs(&self) -> Arc<Vec<ToolSpec>>;
}

impl ToolSpecs for ToolRouter {
    fn tool_specs(&self) -> Arc<Vec<ToolSpec>> {
        Arc::clone(self.specs())
    }
}

macro_rules! forward_tool_specs {
    ($($ty:ident)::+ <S $(, $extra:ident)*>) => {
        impl<S: ToolSpecs $(, $extra)*> ToolSpecs for $($ty)::+<S $(, $extra)*> {
            fn tool_specs(&self) -> Arc<Vec<ToolSpec>> {
                self.get_ref().tool_specs()
            }
        }
    };
}

forward_tool_specs!(SchemaGuard<S>);
forward_tool_specs!(crate::evict::Evict<S>);
forward_tool_specs!(crate::reminders::Reminders<S>);
forward_tool_specs!(crate::trace::Trace<S>);
forward_tool_specs!(crate::matcher::When<S, M>);
forward_tool_specs!(crate::ledger::Ledger<S>);

// ===== compiled schemas =====

/// One tool's compiled schema.
struct Compiled {
    tool: String,
    validator: jsonschema::Validator,
    /// [`example_for_schema`] of the schema, as compact JSON text.
    example: String,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiled")
            .field("tool", &self.tool)
            .field("example", &self.example)
            .finish_non_exhaustive()
    }
}

impl Compiled {
    fn denial(&self, call_id: String, args: &Value) -> ToolOutput {
        let mut text = format!(
            "invalid arguments for tool `{}`; the call was not run:",
            self.tool
        );
        let mut errors = self.validator.iter_errors(args);
        let mut listed = 0;
        for err in errors.by_ref().take(MAX_LISTED_ERRORS) {
            let path = err.instance_path().as_str();
            let path = if path.is_empty() { "/" } else { path };
            let mut message = err.to_string();
            if message.len() > 300 {
                let cut = (0..=300)
                    .rev()
                    .find(|&i| message.is_char_boundary(i))
                    .unwrap_or(0);
                message.truncate(cut);
                message.push_str("...");
            }
            text.push_str(&format!("\n- at {path}: {message}"));
            listed += 1;
        }
        let more = errors.count();
        if more > 0 {
            text.push_str(&format!("\n- and {more} more"));
        }
        if listed == 0 {
            // NOTE: only called when `is_valid` said no, so there is at least one error.
            text.push_str("\n- the arguments do not match the schema");
        }
        text.push_str("\nCall it again with arguments that match its schema, for example:\n");
        text.push_str(&self.example);
        ToolOutput::error(call_id, text).with_metadata("schema_denied", Value::Bool(true))
    }

    fn nudge(&self, output: &mut ToolOutput) {
        if !reports_validation_error(&output.content) || output.content.contains(&self.example) {
            return;
        }
        output.content.push_str(&format!(
            "\n\n<system-hook>\nThe arguments of `{}` must match its JSON Schema. Example of valid arguments:\n{}\n</system-hook>",
            self.tool, self.example
        ));
        output
            .metadata
            .insert("schema_nudge".into(), Value::Bool(true));
    }
}

/// Whether `text` reports a validation error: it contains, in any case, `validation error`,
/// `missing field`, `invalid type` or `required property`.
///
/// ```
/// use tower_agent_layers::schema::reports_validation_error;
///
/// assert!(reports_validation_error("invalid arguments: Missing field `env`"));
/// assert!(!reports_validation_error("deployed"));
/// ```
pub fn reports_validation_error(text: &str) -> bool {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new("(?i)validation error|missing field|invalid type|required property")
            .expect("valid regex")
    })
    .is_match(text)
}

/// The compiled schemas of one set of tools, by name.
type Table = HashMap<String, Arc<Compiled>>;

/// The most compiled schemas a layer keeps; past that the cache starts over.
const MAX_CACHED: usize = 1024;

/// A list of specs and its table.
type LastTable = (Arc<Vec<ToolSpec>>, Arc<Table>);

/// A schema compiled before (or found not to need a validator), by tool name and schema hash.
struct CacheEntry {
    schema: Value,
    compiled: Option<Arc<Compiled>>,
}

/// What clones of a layer share: the compile cache and the last table built.
#[derive(Default)]
struct Shared {
    cache: Mutex<HashMap<(String, u64), CacheEntry>>,
    last: Mutex<Option<LastTable>>,
}

impl Shared {
    /// The compiled schema of one spec, from the cache or compiled now (and cached).
    fn compile(&self, spec: &ToolSpec) -> Option<Arc<Compiled>> {
        let mut hasher = std::hash::DefaultHasher::new();
        hash_value(&spec.parameters, &mut hasher);
        let key = (spec.name.clone(), hasher.finish());
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = cache.get(&key).filter(|e| e.schema == spec.parameters) {
            return hit.compiled.clone();
        }
        let compiled = compile(spec).map(Arc::new);
        if cache.len() >= MAX_CACHED {
            // Schemas that change from run to run would grow the cache without end.
            cache.clear();
        }
        cache.insert(
            key,
            CacheEntry {
                schema: spec.parameters.clone(),
                compiled: compiled.clone(),
            },
        );
        compiled
    }

    fn table(&self, specs: &[ToolSpec]) -> Arc<Table> {
        Arc::new(
            specs
                .iter()
                .filter_map(|spec| Some((spec.name.clone(), self.compile(spec)?)))
                .collect(),
        )
    }

    /// The table of `specs`, reusing the last one when `specs` is the same list.
    fn table_for(&self, specs: Arc<Vec<ToolSpec>>) -> Arc<Table> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((prev, table)) = &*last {
            // NOTE: `last` keeps `prev` alive, so its address can't be reused by another list.
            if Arc::ptr_eq(prev, &specs) {
                return Arc::clone(table);
            }
        }
        let table = self.table(&specs);
        *last = Some((specs, Arc::clone(&table)));
        table
    }
}

/// Compiles one tool's schema; `None` (logged) if it has none or it does not compile.
fn compile(spec: &ToolSpec) -> Option<Compiled> {
    let schema = &spec.parameters;
    if schema.is_null() || schema.as_object().is_some_and(|o| o.is_empty()) {
        tracing::debug!(tool = %spec.name, "tool has no argument schema; its calls are not checked");
        return None;
    }
    match jsonschema::validator_for(schema) {
        Ok(validator) => Some(Compiled {
            tool: spec.name.clone(),
            validator,
            example: example_for_schema(schema).to_string(),
        }),
        Err(err) => {
            tracing::warn!(
                tool = %spec.name,
                error = %err,
                "tool argument schema does not compile; its calls are not checked"
            );
            None
        }
    }
}

/// Hashes a JSON value (serde_json's `Value` is not `Hash`).
fn hash_value<H: Hasher>(value: &Value, h: &mut H) {
    match value {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            b.hash(h);
        }
        Value::Number(n) => {
            h.write_u8(2);
            n.hash(h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(h);
        }
        Value::Array(items) => {
            h.write_u8(4);
            h.write_usize(items.len());
            items.iter().for_each(|v| hash_value(v, h));
        }
        Value::Object(map) => {
            h.write_u8(5);
            h.write_usize(map.len());
            for (k, v) in map {
                k.hash(h);
                hash_value(v, h);
            }
        }
    }
}

/// The service of [`SchemaGuardLayer`].
#[derive(Clone)]
pub struct SchemaGuard<S> {
    inner: S,
    table: Arc<Table>,
    nudge: bool,
}

impl<S> SchemaGuard<S> {
    /// Wraps `inner`, checking the calls of the tools `specs` describe.
    pub fn new(inner: S, specs: impl IntoIterator<Item = ToolSpec>) -> Self {
        SchemaGuardLayer::new(specs).layer(inner)
    }

    inner_service_accessors!();

    /// Whether the calls of `tool` are checked (it has a schema that compiled).
    pub fn checks(&self, tool: &str) -> bool {
        self.table.contains_key(tool)
    }
}

impl<S: fmt::Debug> fmt::Debug for SchemaGuard<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tools: Vec<&String> = self.table.keys().collect();
        tools.sort_unstable();
        f.debug_struct("SchemaGuard")
            .field("inner", &self.inner)
            .field("checked", &tools)
            .field("nudge", &self.nudge)
            .finish()
    }
}

impl<S> Service<ToolRequest> for SchemaGuard<S>
where
    S: Service<ToolRequest, Response = ToolOutput> + Clone,
{
    type Response = ToolOutput;
    type Error = S::Error;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let Some(compiled) = self.table.get(&req.call.name) else {
            return future::ResponseFuture::call(self.inner.call(req), None);
        };
        let parsed;
        let args = match &req.call.arguments {
            // NOTE: the router parses argument text that is a JSON object, and reports the rest.
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(value) if value.is_object() => {
                    parsed = value;
                    &parsed
                }
                _ => return future::ResponseFuture::call(self.inner.call(req), None),
            },
            args => args,
        };
        if compiled.validator.is_valid(args) {
            let nudge = self.nudge.then(|| Arc::clone(compiled));
            future::ResponseFuture::call(self.inner.call(req), nudge)
        } else {
            let denial = compiled.denial(req.call.id.clone(), args);
            // NOTE: the inner service is not called: drop the one `poll_ready` readied, giving
            // back what it reserved (e.g. a `ConcurrencyLimit` permit), instead of keeping it.
            self.inner = self.inner.clone();
            future::ResponseFuture::denied(denial)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_is_structural() {
        let h = |v: &Value| {
            let mut hasher = std::hash::DefaultHasher::new();
            hash_value(v, &mut hasher);
            hasher.finish()
        };
        assert_eq!(h(&json!({"a": [1, "x"]})), h(&json!({"a": [1, "x"]})));
        assert_ne!(h(&json!({"a": [1, "x"]})), h(&json!({"a": ["x", 1]})));
        assert_ne!(h(&json!([[], []])), h(&json!([[[]]])));
    }

    #[test]
    fn cache_compiles_once_per_name_and_schema() {
        let shared = Shared::default();
        let spec = ToolSpec::new("a", "", json!({"type": "object", "required": ["x"]}));
        let one = shared.compile(&spec).unwrap();
        let two = shared.compile(&spec.clone()).unwrap();
        assert!(Arc::ptr_eq(&one, &two));
        let changed = ToolSpec::new("a", "", json!({"type": "object"}));
        let three = shared.compile(&changed).unwrap();
        assert!(!Arc::ptr_eq(&one, &three));
        assert!(shared.compile(&ToolSpec::new("b", "", json!({}))).is_none());
        assert!(
            shared
                .compile(&ToolSpec::new("c", "", json!({"type": 12})))
                .is_none()
        );
        assert_eq!(
            shared.cache.lock().unwrap().len(),
            4,
            "failures are cached too"
        );
    }

    #[test]
    fn table_is_reused_for_the_same_specs() {
        let shared = Shared::default();
        let specs = Arc::new(vec![ToolSpec::new("a", "", json!({"type": "object"}))]);
        let one = shared.table_for(Arc::clone(&specs));
        let two = shared.table_for(Arc::clone(&specs));
        assert!(Arc::ptr_eq(&one, &two));
        let three = shared.table_for(Arc::new((*specs).clone()));
        assert!(!Arc::ptr_eq(&one, &three));
        assert!(Arc::ptr_eq(&one["a"], &three["a"]), "compiled once");
    }
}
