//! What a server sends back, as the crate reads it: a tool's result as a [`ToolOutput`], and
//! the numbers of a requested schema as the server wrote them.

use serde_json::Value;

use tower_agent_core::message::{TOOL_RESPONSE, ToolOutput};

/// `value` with each whole number that went through a float (`1000.0`, from the typed schema
/// rmcp reads) an integer again, as the server wrote it (`1000`; JSON has one number type).
pub(super) fn whole_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            // Within ±2^53 a float holds every integer exactly.
            Some(f) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => {
                Value::from(f as i64)
            }
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(whole_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, whole_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Maps a `CallToolResult` (as JSON) to a [`ToolOutput`] (see the module docs' table).
pub(super) fn map_result(call_id: String, result: &Value) -> ToolOutput {
    let mut blocks = Blocks::default();
    let content = result.get("content").and_then(Value::as_array);
    for block in content.into_iter().flatten() {
        blocks.push(block);
    }
    let Blocks {
        mut text,
        images,
        documents,
        has_text,
    } = blocks;
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if let Some(structured) = structured
        && !has_text
    {
        text.push(structured.to_string());
    }
    let joined = text.join("\n");
    let mut out = if result.get("isError").and_then(Value::as_bool) == Some(true) {
        ToolOutput::error(
            call_id,
            if joined.is_empty() {
                "the tool failed".to_owned()
            } else {
                joined
            },
        )
    } else {
        ToolOutput::text(call_id, joined)
    };
    for url in images {
        out = out.with_image(url);
    }
    for (url, name) in documents {
        out = out.with_document(url, Some(name));
    }
    if let Some(structured) = structured {
        out = out.with_metadata("mcp_structured_content", structured.clone());
    }
    // What hooks see as the call's `tool_response`: the content blocks, as Claude Code shows
    // an MCP tool's result to its hooks.
    if let Some(content) = content {
        out = out.with_metadata(TOOL_RESPONSE, Value::Array(content.clone()));
    }
    out
}

/// The content blocks of a tool result put together.
#[derive(Default)]
struct Blocks {
    /// One entry per block: its text, or a line saying what it is.
    text: Vec<String>,
    /// Images, as data URLs.
    images: Vec<String>,
    /// PDF documents, as data URLs, with their URIs.
    documents: Vec<(String, String)>,
    /// Whether a block was text (a text block or a text resource).
    has_text: bool,
}

impl Blocks {
    fn push(&mut self, block: &Value) {
        match block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "text" => {
                self.has_text = true;
                self.text.push(string(block, "text"));
            }
            "image" => {
                let mime = string(block, "mimeType");
                self.images
                    .push(format!("data:{mime};base64,{}", string(block, "data")));
                self.text.push(format!("[image: {mime}]"));
            }
            "audio" => self
                .text
                .push(format!("[audio: {}, not shown]", string(block, "mimeType"))),
            "resource_link" => self.text.push(resource_link(block)),
            "resource" => self.push_resource(block.get("resource").unwrap_or(&Value::Null)),
            other => self
                .text
                .push(format!("[unsupported content type `{other}`]")),
        }
    }

    /// An embedded resource: its text, or its blob as a PDF document, an image or a line
    /// saying how big it is.
    fn push_resource(&mut self, res: &Value) {
        let uri = string(res, "uri");
        let mime = string(res, "mimeType");
        if let Some(t) = res.get("text").and_then(Value::as_str) {
            self.has_text = true;
            self.text.push(format!("[resource {uri}]\n{t}"));
            return;
        }
        let Some(blob) = res.get("blob").and_then(Value::as_str) else {
            return;
        };
        if mime == "application/pdf" {
            self.documents
                .push((format!("data:{mime};base64,{blob}"), uri.clone()));
            self.text.push(format!("[resource {uri}: PDF document]"));
        } else if mime.starts_with("image/") {
            self.images.push(format!("data:{mime};base64,{blob}"));
            self.text.push(format!("[resource {uri}: image {mime}]"));
        } else {
            self.text.push(format!(
                "[resource {uri}: {} bytes of {}, not shown]",
                blob.len() / 4 * 3,
                if mime.is_empty() {
                    "binary data"
                } else {
                    &mime
                }
            ));
        }
    }
}

/// A `resource_link` block as a line: its URI, then its name and MIME type if given.
fn resource_link(block: &Value) -> String {
    let mut line = format!("[resource link: {}", string(block, "uri"));
    let extra: Vec<String> = ["name", "mimeType"]
        .iter()
        .map(|k| string(block, k))
        .filter(|v| !v.is_empty())
        .collect();
    if !extra.is_empty() {
        line.push_str(&format!(" ({})", extra.join(", ")));
    }
    line.push(']');
    line
}

/// The string `v[k]`, empty if it is none.
fn string(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A requested schema read through rmcp's typed floats gets its whole numbers back as the
    /// server wrote them (measured against Claude Code 2.1.328, which passes the server's
    /// JSON on: `"maximum": 1000`); fractions, huge floats and other values stay.
    #[test]
    fn whole_numbers_come_back_from_floats() {
        let schema = json!({"properties": {"n": {"maximum": 1000.0, "minimum": 0.0,
            "default": 0.5, "huge": 1e300, "int": 42, "list": [2.0, 2.5, "x", null]}}});
        assert_eq!(
            whole_numbers(schema),
            json!({"properties": {"n": {"maximum": 1000, "minimum": 0,
                "default": 0.5, "huge": 1e300, "int": 42, "list": [2, 2.5, "x", null]}}})
        );
    }

    /// A server's huge error message (a JSON-RPC error up to `MAX_MESSAGE`, multi-byte text)
    /// reaches the model cut to `MAX_ERROR_TEXT` bytes, at a character boundary.
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            prop::sample::select(vec![
                "text",
                "image",
                "audio",
                "resource",
                "resource_link",
                "blob",
                "uri",
                "mimeType",
                "application/pdf",
                "image/png",
                "x"
            ])
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::hash_map(
                    prop::sample::select(vec![
                        "type",
                        "text",
                        "data",
                        "mimeType",
                        "uri",
                        "name",
                        "resource",
                        "blob",
                        "content",
                        "isError",
                        "structuredContent"
                    ])
                    .prop_map(str::to_owned),
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Whatever shape a result has, mapping it does not panic, and `isError: true` is
        /// always an error output.
        #[test]
        fn mapping_never_panics(content in json_value(), is_error in proptest::prelude::any::<bool>()) {
            let out = map_result("c".into(), &json!({"content": content, "isError": is_error}));
            proptest::prop_assert_eq!(out.is_error, is_error);
            let _ = map_result("c".into(), &content);
        }
    }

    #[test]
    fn mapping() {
        let out = map_result(
            "c".into(),
            &json!({"content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///x", "name": "x", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "file:///y", "text": "body"}},
                {"type": "resource", "resource": {"uri": "file:///z.pdf", "mimeType": "application/pdf", "blob": "JVBE"}},
            ], "structuredContent": {"a": 1}}),
        );
        assert!(!out.is_error);
        assert_eq!(
            out.content,
            "hi\n[image: image/png]\n[resource link: file:///x (x, text/plain)]\n[resource file:///y]\nbody\n[resource file:///z.pdf: PDF document]"
        );
        assert_eq!(out.parts.len(), 2);
        assert_eq!(out.metadata["mcp_structured_content"], json!({"a": 1}));
        let out = map_result(
            "c".into(),
            &json!({"content": [], "structuredContent": {"a": 1}}),
        );
        assert_eq!(out.content, "{\"a\":1}");
        let out = map_result("c".into(), &json!({"content": [], "isError": true}));
        assert!(out.is_error);
        assert_eq!(out.content, "the tool failed");
    }
}
