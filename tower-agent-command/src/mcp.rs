//! `mcp_tool` handlers: call a tool of an already-connected MCP server with the hook's input
//! substituted into the handler's `input`, and read its text like a command's stdout.

use std::hash::{Hash, Hasher};

use serde_json::{Map, Value};

use crate::reply::{Failure, Reply, Stdout};
use tower_agent_mcp::client::McpServers;

/// The most bytes of text `${path}` substitution may produce for one call's arguments
/// (1 MiB): past it the handler is a non-blocking error, not a huge request.
pub(crate) const MAX_SUBSTITUTED: usize = 1 << 20;

/// One `mcp_tool` handler.
pub(crate) struct McpHook {
    pub(crate) server: String,
    pub(crate) tool: String,
    /// The `input` template (an object; empty when absent).
    pub(crate) input: Map<String, Value>,
    pub(crate) servers: McpServers,
}

impl McpHook {
    pub(crate) fn label(&self) -> String {
        format!("mcp_tool {}/{}", self.server, self.tool)
    }

    /// Calls the tool with `input` (the hook's JSON input, as text) substituted into the
    /// template. The caller bounds the time.
    pub(crate) async fn call(&self, input: &str) -> Result<Reply, Failure> {
        let hook_input: Value = serde_json::from_str(input).unwrap_or(Value::Null);
        let mut budget = MAX_SUBSTITUTED;
        let mut args = Map::with_capacity(self.input.len());
        for (k, v) in &self.input {
            let v = substitute(v, &hook_input, &mut budget).ok_or_else(|| {
                Failure::Io(format!(
                    "its `input` grew past {MAX_SUBSTITUTED} bytes once substituted; not called"
                ))
            })?;
            args.insert(k.clone(), v);
        }
        match self
            .servers
            .call_connected(&self.server, &self.tool, Value::Object(args))
            .await
        {
            Ok(text) => Ok(Reply {
                code: Some(0),
                stdout: Stdout::Text(text),
                stderr: String::new(),
            }),
            Err(why) => Err(Failure::Io(why.to_string())),
        }
    }
}

/// `value` with `${path}` in its strings (in nested objects and arrays too) replaced by what
/// `input` holds at `path` (dot-separated keys, array indexes as numbers): a string as is,
/// another value as its JSON text, a missing one (or an unclosed `${`) as the empty string.
/// `None` when the strings would take more than `budget` bytes.
fn substitute(value: &Value, input: &Value, budget: &mut usize) -> Option<Value> {
    Some(match value {
        Value::String(s) => Value::String(substitute_str(s, input, budget)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| substitute(v, input, budget))
                .collect::<Option<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Some((k.clone(), substitute(v, input, budget)?)))
                .collect::<Option<_>>()?,
        ),
        other => other.clone(),
    })
}

fn substitute_str(s: &str, input: &Value, budget: &mut usize) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        push(&mut out, &rest[..start], budget)?;
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            rest = "";
            break;
        };
        match lookup(input, &after[..end]) {
            Some(Value::String(text)) => push(&mut out, text, budget)?,
            Some(Value::Null) | None => {}
            Some(other) => push(&mut out, &other.to_string(), budget)?,
        }
        rest = &after[end + 1..];
    }
    push(&mut out, rest, budget)?;
    Some(out)
}

fn push(out: &mut String, text: &str, budget: &mut usize) -> Option<()> {
    *budget = budget.checked_sub(text.len())?;
    out.push_str(text);
    Some(())
}

fn lookup<'a>(input: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim();
    if path.is_empty() {
        return None;
    }
    path.split('.').try_fold(input, |v, key| match v {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

// What makes two handlers the same (dedup): the server, the tool and the template.
impl PartialEq for McpHook {
    fn eq(&self, other: &Self) -> bool {
        self.server == other.server && self.tool == other.tool && self.input == other.input
    }
}

impl Eq for McpHook {}

impl Hash for McpHook {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.server.hash(state);
        self.tool.hash(state);
        Value::Object(self.input.clone()).to_string().hash(state);
    }
}

impl std::fmt::Debug for McpHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHook")
            .field("server", &self.server)
            .field("tool", &self.tool)
            .field("input", &self.input)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn substitution() {
        let input = json!({"session_id": "s1", "tool_input": {"file_path": "/a b", "n": 3,
            "nested": {"key": "k"}, "list": ["x", "y"]}});
        let template = json!({"p": "${tool_input.file_path}", "deep": {"l": ["${session_id}!",
            "${tool_input.nested.key}${tool_input.list.1}"]}, "n": "${tool_input.n}",
            "missing": "[${tool_input.nope}]", "open": "a${b", "num": 7,
            "obj": "${tool_input.nested}"});
        let mut budget = MAX_SUBSTITUTED;
        let out = substitute(&template, &input, &mut budget).unwrap();
        assert_eq!(
            out,
            json!({"p": "/a b", "deep": {"l": ["s1!", "ky"]}, "n": "3", "missing": "[]",
                "open": "a", "num": 7, "obj": "{\"key\":\"k\"}"})
        );
        // The budget bounds what repeated substitution of a large value makes.
        let big = json!({"x": "a".repeat(1000)});
        let many = Value::String("${x}".repeat(2000));
        let mut budget = MAX_SUBSTITUTED;
        assert!(substitute(&many, &big, &mut budget).is_none());
    }

    mod fuzz {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

            // Any template over any input: no panic, and the strings made stay within the
            // budget (a small one here, to reach it).
            #[test]
            fn substitution_is_total_and_bounded(
                template in "[a-z.${}0-9é]{0,40}",
                key in "[a-z0-9.]{0,8}",
                value in "[a-z${}é]{0,30}",
                budget in 0usize..64,
            ) {
                let input = json!({"a": {"b": value.clone(), "0": [value.clone()]}, key.clone(): value});
                let template = json!({"x": template.clone(), "y": [template.clone(), {"z": template}]});
                let mut left = budget;
                if let Some(out) = substitute(&template, &input, &mut left) {
                    let total: usize = [&out["x"], &out["y"][0], &out["y"][1]["z"]]
                        .iter()
                        .map(|v| v.as_str().unwrap().len())
                        .sum();
                    prop_assert!(total <= budget);
                    prop_assert_eq!(total, budget - left);
                }
            }
        }
    }
}
