//! What a play leaves to compare, normalised: each hook's input (session ids, paths, times and
//! durations replaced by placeholders — nothing else), and what the hooks changed in the
//! model's requests (tool results, and every line carrying a hook's `hk-` marker).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{scenario::Play, server::Recorded as Request};

/// Ids that are random in each play, numbered by first appearance: the same id twice stays
/// the same placeholder, so "one id per prompt" is still checked.
const NUMBERED: &[&str] = &["prompt_id", "turn_id", "message_id"];

/// Fields whose value is measured (a time, a count of tokens, a price), at any depth of an
/// input (Glob's `tool_response.durationMs`): only their type is compared.
const MEASURED: &[&str] = &[
    "duration_ms",
    "durationMs",
    "context_tokens",
    "estimated_cache_write_usd",
    "seconds_since_last_response",
];

/// Replaces what differs by play and by agent without meaning anything.
pub(crate) struct Normaliser {
    paths: Vec<(String, &'static str)>,
    ids: HashMap<String, String>,
    counts: HashMap<&'static str, usize>,
}

impl Normaliser {
    pub(crate) fn new(play: &Play) -> Self {
        let real = |p: std::path::PathBuf| {
            std::fs::canonicalize(&p)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned()
        };
        let mut paths = vec![
            (real(play.project()), "<project>"),
            (real(play.home()), "<home>"),
            (real(play.root.path().to_path_buf()), "<root>"),
        ];
        // An agent may print a path as given or canonical: both map.
        paths.push((play.project().to_string_lossy().into_owned(), "<project>"));
        paths.push((play.home().to_string_lossy().into_owned(), "<home>"));
        paths.push((play.root.path().to_string_lossy().into_owned(), "<root>"));
        Normaliser {
            paths,
            ids: HashMap::new(),
            counts: HashMap::new(),
        }
    }

    /// A hook input, normalised.
    pub(crate) fn input(&mut self, input: &Value) -> Value {
        let Value::Object(map) = input else {
            return input.clone();
        };
        let mut out = Map::new();
        for (k, v) in map {
            let v = match k.as_str() {
                "session_id" => json!("<session>"),
                "transcript_path" => match v.as_str() {
                    Some(p) if p.ends_with(".jsonl") => json!("<transcript>"),
                    _ => v.clone(),
                },
                k if NUMBERED.contains(&k) => match v.as_str() {
                    Some(id) => json!(self.numbered(k, id)),
                    None => v.clone(),
                },
                k if MEASURED.contains(&k) && v.is_number() => json!("<number>"),
                _ => self.value(v),
            };
            out.insert(k.clone(), v);
        }
        Value::Object(out)
    }

    fn numbered(&mut self, field: &str, id: &str) -> String {
        let key = format!("{field}:{id}");
        if let Some(p) = self.ids.get(&key) {
            return p.clone();
        }
        let kind = NUMBERED.iter().find(|f| **f == field).unwrap();
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        let p = format!("<{}-{n}>", field.trim_end_matches("_id"));
        self.ids.insert(key, p.clone());
        p
    }

    /// Paths under the play's directories, as placeholders.
    pub(crate) fn value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.value(v)).collect()),
            // A measured field nested in a value (a tool's `tool_response`) too.
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| match v {
                        Value::Number(_) if MEASURED.contains(&k.as_str()) => {
                            (k.clone(), json!("<number>"))
                        }
                        v => (k.clone(), self.value(v)),
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    pub(crate) fn text(&self, s: &str) -> String {
        let mut s = s.to_owned();
        for (path, placeholder) in &self.paths {
            if s.contains(path.as_str()) {
                s = s.replace(path.as_str(), placeholder);
            }
        }
        s
    }
}

/// The hooks' part of each model request: what came after the model's last answer (the whole
/// first request) — tool results whole, and the lines that carry a hook's `hk-` marker, with
/// the role of the message they are in (`system-prompt` for the request's `system`).
pub(crate) fn effects(requests: &[Request], norm: &Normaliser) -> Vec<Value> {
    requests
        .iter()
        .map(|r| {
            let mut items = Vec::new();
            for line in texts(&r.body["system"]) {
                marked(&mut items, "system-prompt", &line, norm);
            }
            let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
            let from = messages
                .iter()
                .rposition(|m| m["role"] == "assistant")
                .map_or(0, |i| i + 1);
            for m in &messages[from..] {
                let role = m["role"].as_str().unwrap_or("?");
                let blocks = match &m["content"] {
                    Value::String(s) => vec![json!({"type": "text", "text": s})],
                    Value::Array(a) => a.clone(),
                    _ => Vec::new(),
                };
                for b in blocks {
                    if b["type"] == "tool_result" {
                        items.push(json!({
                            "role": role,
                            "tool_result": b["tool_use_id"],
                            "is_error": b["is_error"].as_bool().unwrap_or(false),
                            "content": norm.text(&texts(&b["content"]).join("\n")),
                        }));
                    } else {
                        for line in texts(&b) {
                            marked(&mut items, role, &line, norm);
                        }
                    }
                }
            }
            Value::Array(items)
        })
        .collect()
}

fn marked(items: &mut Vec<Value>, role: &str, text: &str, norm: &Normaliser) {
    for line in text.lines().filter(|l| l.contains("hk-")) {
        items.push(json!({ "role": role, "text": norm.text(line) }));
    }
}

/// The text of a content value: a string, a text block, or a list of them.
fn texts(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(texts).collect(),
        Value::Object(o) => o
            .get("text")
            .and_then(Value::as_str)
            .map(|t| vec![t.to_owned()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}
