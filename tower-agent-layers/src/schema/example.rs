//! Example values a JSON Schema accepts ([`example_for_schema`]), to show a model what
//! valid arguments look like.

use super::*;

/// An example value that a JSON Schema accepts, for telling a model what valid arguments look
/// like.
///
/// Takes, in order: `const`; `default`; the first of `examples`; the first of `enum`; a local
/// `$ref` (`#/...`, resolved against the root); the first branch of `anyOf`/`oneOf` that is not
/// `null`; the merged objects of `allOf`; then by `type` (the first that is not `"null"`, or
/// `object` if there are `properties`, `array` if there are `items`):
///
/// | type | example |
/// |---|---|
/// | object | every `required` property, by its own schema (optional ones are left out); every property if none is required |
/// | array | `minItems` items (at least 1, at most 10) by `items` / `prefixItems` |
/// | string | by `format` (`date-time`, `date`, `time`, `email`, `uri`, `uuid`, `ipv4`, …), else `"example"`, padded to `minLength` and cut to `maxLength` |
/// | integer, number | `minimum` (or just over `exclusiveMinimum`), else 0 or `maximum` if that is below 0; a multiple of `multipleOf` |
/// | boolean | `false` |
/// | null, none | `null` |
///
/// It does not try to satisfy `pattern`, `not` or `if`/`then`. Recursion through `$ref` stops
/// at depth 16 (with `null`).
///
/// ```
/// use serde_json::json;
/// use tower_agent_layers::schema::example_for_schema;
///
/// let schema = json!({
///     "type": "object",
///     "properties": {
///         "path": { "type": "string" },
///         "mode": { "enum": ["read", "write"] },
///         "lines": { "type": "array", "items": { "type": "integer", "minimum": 1 } },
///         "verbose": { "type": "boolean" }
///     },
///     "required": ["path", "mode", "lines"]
/// });
/// assert_eq!(
///     example_for_schema(&schema),
///     json!({ "path": "example", "mode": "read", "lines": [1] })
/// );
/// ```
pub fn example_for_schema(schema: &Value) -> Value {
    example(schema, schema, 0)
}

const MAX_DEPTH: usize = 16;

fn example(schema: &Value, root: &Value, depth: usize) -> Value {
    let Some(obj) = schema.as_object() else {
        return Value::Null; // `true`, `false` or not a schema
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(v) = given_example(obj) {
        return v.clone();
    }
    if let Some(v) = composed_example(obj, root, depth) {
        return v;
    }
    match schema_type(obj) {
        Some("object") => example_object(obj, root, depth),
        Some("array") => example_array(obj, root, depth),
        Some("string") => Value::String(example_string(obj)),
        Some("integer") => example_number(obj, true),
        Some("number") => example_number(obj, false),
        Some("boolean") => Value::Bool(false),
        _ => Value::Null,
    }
}

/// The value a schema gives itself: `const`, `default`, the first of `examples` or `enum`.
fn given_example(obj: &serde_json::Map<String, Value>) -> Option<&Value> {
    if let Some(v) = obj.get("const").or_else(|| obj.get("default")) {
        return Some(v);
    }
    ["examples", "enum"].into_iter().find_map(|key| {
        obj.get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
    })
}

/// The example of a schema made of others: the `$ref` target, the first non-null branch of
/// `anyOf` / `oneOf`, or the `allOf` parts' examples merged.
fn composed_example(
    obj: &serde_json::Map<String, Value>,
    root: &Value,
    depth: usize,
) -> Option<Value> {
    if let Some(target) = obj
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(root, r))
    {
        return Some(example(target, root, depth + 1));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = obj.get(key).and_then(Value::as_array) {
            let branch = branches
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .or_else(|| branches.first());
            if let Some(branch) = branch {
                return Some(example(branch, root, depth + 1));
            }
        }
    }
    let parts = obj.get("allOf").and_then(Value::as_array)?;
    let mut merged: Option<Value> = None;
    for part in parts {
        match (merged.as_mut(), example(part, root, depth + 1)) {
            (Some(Value::Object(m)), Value::Object(more)) => m.extend(more),
            (None, v) => merged = Some(v),
            _ => {}
        }
    }
    merged
}

/// The schema's `type` (the first non-null one of a list), else the type its keywords imply.
fn schema_type(obj: &serde_json::Map<String, Value>) -> Option<&str> {
    let ty = match obj.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .or(Some("null")),
        _ => None,
    };
    ty.or_else(|| {
        if obj.contains_key("properties") || obj.contains_key("required") {
            Some("object")
        } else if obj.contains_key("items") || obj.contains_key("prefixItems") {
            Some("array")
        } else {
            None
        }
    })
}

/// Every `required` property by its own schema; every property if none is required.
fn example_object(obj: &serde_json::Map<String, Value>, root: &Value, depth: usize) -> Value {
    let props = obj.get("properties").and_then(Value::as_object);
    let required = obj.get("required").and_then(Value::as_array);
    let mut out = serde_json::Map::new();
    let required: Vec<&str> = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if required.is_empty() {
        // Nothing required: show the shape rather than `{}`.
        for (name, s) in props.into_iter().flatten() {
            out.insert(name.clone(), example(s, root, depth + 1));
        }
    }
    for name in required {
        let value = props
            .and_then(|p| p.get(name))
            .map_or(Value::Null, |s| example(s, root, depth + 1));
        out.insert(name.to_owned(), value);
    }
    Value::Object(out)
}

/// `minItems` items (at least 1, at most 10) by `prefixItems` then `items`; a tuple `items`
/// (draft 4 to 2019-09) item by item.
fn example_array(obj: &serde_json::Map<String, Value>, root: &Value, depth: usize) -> Value {
    let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(1);
    let n = min.clamp(1, 10) as usize;
    let prefix = obj.get("prefixItems").and_then(Value::as_array);
    let items = match obj.get("items") {
        Some(Value::Array(tuple)) => {
            return Value::Array(tuple.iter().map(|s| example(s, root, depth + 1)).collect());
        }
        other => other,
    };
    let mut out: Vec<Value> = prefix
        .into_iter()
        .flatten()
        .map(|s| example(s, root, depth + 1))
        .collect();
    if let Some(items) = items.filter(|i| !matches!(i, Value::Bool(false))) {
        while out.len() < n {
            out.push(example(items, root, depth + 1));
        }
    }
    Value::Array(out)
}

fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    // JSON pointers in URI fragments may be percent-encoded; the common ones are not.
    root.pointer(&pointer.replace("%25", "%").replace("%22", "\""))
}

fn example_string(obj: &serde_json::Map<String, Value>) -> String {
    let format = obj.get("format").and_then(Value::as_str).unwrap_or("");
    let mut s = match format {
        "date-time" => "2024-01-01T00:00:00Z",
        "date" => "2024-01-01",
        "time" => "00:00:00Z",
        "duration" => "P1D",
        "email" | "idn-email" => "user@example.com",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "uri" | "iri" | "uri-reference" | "iri-reference" => "https://example.com",
        "uuid" => "00000000-0000-0000-0000-000000000000",
        _ => "example",
    }
    .to_owned();
    let min = obj.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let max = obj
        .get("maxLength")
        .and_then(Value::as_u64)
        .map(|m| m as usize);
    while s.chars().count() < min.min(10_000) {
        s.push('x');
    }
    if let Some(max) = max
        && s.chars().count() > max
    {
        s = s.chars().take(max).collect();
    }
    s
}

fn example_number(obj: &serde_json::Map<String, Value>, integer: bool) -> Value {
    let get = |k: &str| obj.get(k).and_then(Value::as_f64);
    let mut n = match (get("minimum"), get("exclusiveMinimum")) {
        (Some(min), _) => min,
        (None, Some(ex)) => {
            if integer {
                ex.floor() + 1.0
            } else {
                ex + 1.0
            }
        }
        (None, None) => 0.0,
    };
    if let Some(max) = get("maximum").filter(|m| *m < n) {
        n = max;
    }
    if let Some(ex) = get("exclusiveMaximum").filter(|m| *m <= n) {
        n = ex - 1.0;
    }
    if let Some(step) = get("multipleOf").filter(|s| *s > 0.0) {
        n = (n / step).ceil() * step;
    }
    if integer {
        let n = n.ceil();
        if n >= 0.0 && n <= u64::MAX as f64 {
            Value::from(n as u64)
        } else {
            Value::from(n as i64)
        }
    } else if n.fract() == 0.0 && n.abs() < 1e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}
