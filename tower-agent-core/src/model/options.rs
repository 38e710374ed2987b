//! Request options beyond the basics of [`ModelSettings`](crate::model::ModelSettings):
//! [`ToolChoice`], [`ResponseFormat`] (structured output) and the provider-specific extra
//! JSON merged into a request body.
//!
//! # Structured output into a Rust type
//!
//! Ask for a JSON answer of a type's schema with [`ResponseFormat::of`] (the schema is derived
//! with `schemars`), then parse the run's final answer with
//! [`AgentResponse::parse`](crate::AgentResponse::parse) (or a model answer with
//! [`ResponseFormat::parse`]):
//!
//! ```
//! use tower_agent_core::{Agent, model::{ModelSettings, ResponseFormat, ScriptedModel}};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema, Debug, PartialEq)]
//! struct City { name: String, population: u64 }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().text(r#"{"name":"Oslo","population":709037}"#))
//!     .settings(ModelSettings::default().response_format(ResponseFormat::of::<City>()))
//!     .build();
//! let city: City = agent.run("The capital of Norway?").await?.parse()?;
//! assert_eq!(city, City { name: "Oslo".into(), population: 709037 });
//! # Ok(())
//! # }
//! ```
//!
//! How each provider sends it: OpenAI Chat Completions as `response_format: {type:
//! "json_schema", json_schema: {name, schema, strict}}`; Anthropic as its native structured
//! output, `output_config: {format: {type: "json_schema", schema}}`.
//!
//! # Limits
//!
//! A final answer parsed by [`ResponseFormat::parse`] is the model's answer, already bounded by
//! the provider's `max_response_bytes` (16 MiB by default); parsing never panics, a mismatch is
//! an [`OutputError`] holding serde's message.

use std::{fmt, sync::Arc};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Which tools the model may or must call ([`ModelSettings::tool_choice`](crate::model::ModelSettings::tool_choice)).
///
/// | | OpenAI Chat Completions `tool_choice` | Anthropic `tool_choice` |
/// |---|---|---|
/// | [`Auto`](Self::Auto) | `"auto"` | `{type: "auto"}` |
/// | [`None`](Self::None) | `"none"` | `{type: "none"}` |
/// | [`Required`](Self::Required) | `"required"` | `{type: "any"}` |
/// | [`Tool`](Self::Tool) | `{type: "function", function: {name}}` | `{type: "tool", name}` |
///
/// A request without tools sends no `tool_choice` (both APIs reject one).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the default when tools are given).
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(Arc<str>),
}

impl ToolChoice {
    /// The model must call the tool `name`.
    pub fn tool(name: impl Into<Arc<str>>) -> Self {
        ToolChoice::Tool(name.into())
    }
}

/// A JSON schema the model's answer must follow ([`ModelSettings::response_format`](crate::model::ModelSettings::response_format)).
/// See the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseFormat {
    /// The schema's name (OpenAI's `json_schema.name`: letters, digits, `_` and `-`, at most
    /// 64 characters).
    pub name: Arc<str>,
    /// The JSON schema.
    pub schema: Arc<Value>,
    /// Whether the provider must follow the schema exactly (OpenAI's `strict`, which requires
    /// every property to be listed in `required` and `additionalProperties: false`).
    pub strict: bool,
}

impl ResponseFormat {
    /// A format of `schema` named `name`, not strict.
    pub fn json_schema(name: impl Into<Arc<str>>, schema: Value) -> Self {
        ResponseFormat {
            name: name.into(),
            schema: Arc::new(schema),
            strict: false,
        }
    }

    /// The format of `T`'s JSON schema, derived with `schemars` and named after the type
    /// (its characters other than letters, digits, `_` and `-` replaced by `_`, cut to 64).
    /// The `$schema` key is left out (neither API wants it).
    pub fn of<T: schemars::JsonSchema>() -> Self {
        let schema = schemars::schema_for!(T);
        let mut value = schema.to_value();
        if let Some(map) = value.as_object_mut() {
            map.remove("$schema");
        }
        let name: String = T::schema_name()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        Self::json_schema(name, value)
    }

    /// This format, strict or not.
    #[must_use]
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// `text` (a model's final answer) parsed as a `T`. Surrounding white space and a
    /// Markdown code fence (```` ```json … ``` ````) around the JSON are tolerated.
    pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, OutputError> {
        let trimmed = text.trim();
        let inner = trimmed
            .strip_prefix("```")
            .and_then(|rest| rest.strip_suffix("```"))
            .map(|rest| {
                rest.trim_start_matches(|c: char| c.is_ascii_alphabetic())
                    .trim()
            })
            .unwrap_or(trimmed);
        serde_json::from_str(inner).map_err(|e| OutputError {
            message: e.to_string(),
            empty: inner.is_empty(),
        })
    }
}

/// A final answer that is not JSON of the asked type. From [`ResponseFormat::parse`] and
/// [`AgentResponse::parse`](crate::AgentResponse::parse).
#[derive(Debug, Clone)]
pub struct OutputError {
    message: String,
    empty: bool,
}

impl OutputError {
    pub(crate) fn not_finished(outcome: &crate::event::Outcome) -> Self {
        OutputError {
            message: format!("the run did not finish: {outcome:?}"),
            empty: true,
        }
    }

    /// Whether the answer was empty (e.g. the run did not finish, or the model refused).
    pub fn is_empty_answer(&self) -> bool {
        self.empty
    }
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.empty {
            write!(f, "the final answer is empty: {}", self.message)
        } else {
            write!(
                f,
                "the final answer is not JSON of the asked type: {}",
                self.message
            )
        }
    }
}

impl std::error::Error for OutputError {}

/// Extra top-level fields for a provider's request body
/// ([`ModelSettings::extra_body`](crate::model::ModelSettings::extra_body)): for anything a
/// provider documents that the settings do not name. Each key replaces the body's field of
/// the same name (a shallow merge), so it may also override what the provider built.
pub type ExtraBody = Arc<Map<String, Value>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, schemars::JsonSchema, Debug, PartialEq)]
    struct Point {
        x: i32,
        y: i32,
    }

    #[test]
    fn schema_of_a_type_and_parse() {
        let f = ResponseFormat::of::<Point>();
        assert_eq!(&*f.name, "Point");
        assert!(f.schema.get("$schema").is_none());
        assert_eq!(f.schema["properties"]["x"]["type"], "integer");
        let p: Point = ResponseFormat::parse("```json\n{\"x\":1,\"y\":2}\n```").unwrap();
        assert_eq!(p, Point { x: 1, y: 2 });
        let err = ResponseFormat::parse::<Point>("{\"x\":1}").unwrap_err();
        assert!(err.to_string().contains("missing field `y`"), "{err}");
        assert!(
            ResponseFormat::parse::<Point>("  ")
                .unwrap_err()
                .is_empty_answer()
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Whatever a model answers, parsing it is an answer or an error, never a panic.
        #[test]
        fn parsing_any_answer_never_panics(pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "```", "```json\n", "{", "}", "[", "]", "\"x\"", "\"y\"", ":", ",", "1",
                "-9999999999999999999999", "1e999", "null", " ", "\n", "é", "`", "\\u12",
            ]),
            0..40,
        )) {
            let text = pieces.concat();
            let _ = ResponseFormat::parse::<Point>(&text);
            let _ = ResponseFormat::parse::<Value>(&text);
        }
    }
}
