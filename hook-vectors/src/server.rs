//! The model server a host talks to: the Anthropic Messages API (`POST /v1/messages`) on
//! 127.0.0.1, answering each request with the scenario's answer for the turn it is at (the
//! number of assistant messages the request carries), streamed (SSE) when the request asks for
//! a stream, and recording every request. A request whose first user message holds one of the
//! scenario's subagent markers ([`Scenario::agents`](crate::Scenario::agents)) is that
//! subagent's, answered from its own list by its own turn count. An answer holding an `error` block is an API error
//! instead (`{"type": "error", "status": 400, "error": {"type": "invalid_request_error",
//! "message": "…"}}`: that status, with Anthropic's error body). `POST /v1/messages/count_tokens` answers 10 tokens;
//! any other path 404.
//!
//! Caps: a request body over [`MAX_BODY`] bytes is refused (413); past [`MAX_REQUESTS`]
//! requests in one play, every request is refused (429) and not recorded.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderValue, StatusCode, header::CONTENT_TYPE},
    response::Response,
};
use serde_json::{Value, json};

/// The largest request body taken, in bytes (64 MiB).
pub const MAX_BODY: usize = 64 << 20;

/// The most requests recorded in one play (1,000).
pub const MAX_REQUESTS: usize = 1_000;

/// One request the server received: its path and JSON body.
#[derive(Debug, Clone)]
pub struct Request {
    /// The path and query (`/v1/messages?beta=true`).
    pub path: String,
    /// The body (`null` if it was not JSON).
    pub body: Value,
}

#[derive(Clone)]
struct Shared {
    answers: Arc<Vec<Vec<Value>>>,
    agents: Arc<BTreeMap<String, Vec<Vec<Value>>>>,
    seen: Arc<Mutex<Vec<Request>>>,
}

fn lock(seen: &Mutex<Vec<Request>>) -> std::sync::MutexGuard<'_, Vec<Request>> {
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A message id of its own for each answer (`msg_ref_<n>`): Claude Code keeps one message per
/// id, so two answers with one id would be one.
fn message_id(shared: &Shared) -> String {
    format!("msg_ref_{}", lock(&shared.seen).len())
}

/// A running server; it stops when dropped.
#[derive(Debug)]
pub struct ModelServer {
    url: String,
    seen: Arc<Mutex<Vec<Request>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelServer {
    /// Serves `answers`: answer `i` (a list of content blocks, `text` or `tool_use`) goes to a
    /// request with `i` assistant messages; past the last, the last again.
    pub async fn start(answers: Vec<Vec<Value>>) -> Result<Self, crate::Error> {
        Self::with_agents(answers, BTreeMap::new()).await
    }

    /// Serves `answers` as [`start`](Self::start) does, and each subagent's own: a request
    /// whose first user message holds a key of `agents` (a marker in the subagent's prompt)
    /// is answered from that key's list, answer `i` to the request holding `i` assistant
    /// messages; past the last, the last again.
    pub async fn with_agents(
        answers: Vec<Vec<Value>>,
        agents: BTreeMap<String, Vec<Vec<Value>>>,
    ) -> Result<Self, crate::Error> {
        if answers.is_empty() || agents.values().any(Vec::is_empty) {
            return Err(crate::Error::new("a model server needs an answer"));
        }
        let shared = Shared {
            answers: Arc::new(answers),
            agents: Arc::new(agents),
            seen: Arc::default(),
        };
        let seen = Arc::clone(&shared.seen);
        let app = Router::new().fallback(answer).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| crate::Error::new(format!("model server: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| crate::Error::new(format!("model server: {e}")))?;
        let task = tokio::spawn(async move {
            // Serving ends only when the task is aborted; an accept error is retried by axum.
            let _ = axum::serve(listener, app).await;
        });
        Ok(ModelServer {
            url: format!("http://{addr}"),
            seen,
            task,
        })
    }

    /// Its base URL (`http://127.0.0.1:<port>`), what a host takes as `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The requests for a model answer (`/v1/messages`), in the order they came.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.seen)
            .iter()
            .filter(|r| r.path.starts_with("/v1/messages") && !r.path.contains("count_tokens"))
            .cloned()
            .collect()
    }
}

fn status(code: StatusCode) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = code;
    resp
}

async fn answer(State(shared): State<Shared>, req: axum::extract::Request) -> Response {
    let path = req.uri().to_string();
    let Ok(bytes) = axum::body::to_bytes(req.into_body(), MAX_BODY).await else {
        return status(StatusCode::PAYLOAD_TOO_LARGE);
    };
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    {
        let mut seen = lock(&shared.seen);
        if seen.len() >= MAX_REQUESTS {
            return status(StatusCode::TOO_MANY_REQUESTS);
        }
        seen.push(Request {
            path: path.clone(),
            body: body.clone(),
        });
    }
    if path.contains("count_tokens") {
        return json_response(json!({ "input_tokens": 10 }));
    }
    if !path.starts_with("/v1/messages") {
        return status(StatusCode::NOT_FOUND);
    }
    let turn = body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
        .unwrap_or(0);
    let answers = whose(&shared, &body);
    let blocks = answers[turn.min(answers.len() - 1)].clone();
    if let Some(error) = blocks.iter().find(|b| b["type"] == "error") {
        return api_error(error);
    }
    let model = body["model"].as_str().unwrap_or("model").to_owned();
    let id = message_id(&shared);
    let stop = if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    if body["stream"] == true {
        sse(&id, &model, &blocks, stop)
    } else {
        json_response(json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": null,
            "usage": { "input_tokens": 10, "output_tokens": 5 },
        }))
    }
}

/// The answers of the agent a request is from: the subagent whose marker its first user
/// message holds (the first marker in name order), else the main agent's.
fn whose<'a>(shared: &'a Shared, body: &Value) -> &'a [Vec<Value>] {
    let first = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    shared
        .agents
        .iter()
        .find(|(marker, _)| first.contains(marker.as_str()))
        .map_or(&shared.answers[..], |(_, answers)| &answers[..])
}

/// An answer that is an API error: `{"type": "error", "status": 400, "error": {"type":
/// "invalid_request_error", "message": "…"}}` answers that status with the Anthropic error
/// body (a status outside 400–599 is 500).
fn api_error(block: &Value) -> Response {
    let code = block["status"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(json!({"type": "error", "error": block["error"]}));
    *resp.status_mut() = code;
    resp
}

fn with_type(body: impl Into<Body>, content_type: &'static str) -> Response {
    let mut resp = Response::new(body.into());
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn json_response(v: Value) -> Response {
    with_type(v.to_string(), "application/json")
}

fn sse(id: &str, model: &str, blocks: &[Value], stop: &str) -> Response {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    for (i, b) in blocks.iter().enumerate() {
        if b["type"] == "tool_use" {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block":
                    {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta":
                    {"type": "input_json_delta", "partial_json": b["input"].to_string()}}),
            );
        } else {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block":
                    {"type": "text", "text": ""}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta":
                    {"type": "text_delta", "text": b["text"]}}),
            );
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    with_type(Bytes::from(out), "text/event-stream")
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Posts `body` to the server's `/v1/messages` (HTTP/1.1 over a plain socket); the JSON
    /// answer.
    async fn post(server: &ModelServer, body: &Value) -> Value {
        let addr = server.url().trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let body = body.to_string();
        let head = format!(
            "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body.as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        let (_, json) = out.split_once("\r\n\r\n").unwrap();
        serde_json::from_str(json).unwrap()
    }

    fn text(answer: &Value) -> &str {
        answer["content"][0]["text"].as_str().unwrap_or_default()
    }

    /// A request whose first user message holds a subagent's marker is answered from that
    /// subagent's list, by its own turn count; the others from the main list.
    #[tokio::test]
    async fn subagents_are_answered_apart_by_their_own_turn_count() {
        let answer = |t: &str| vec![json!({"type": "text", "text": t})];
        let agents = BTreeMap::from([("SUBTASK".to_owned(), vec![answer("s0"), answer("s1")])]);
        let server = ModelServer::with_agents(vec![answer("m0"), answer("m1")], agents)
            .await
            .unwrap();
        let user = |c: Value| json!({"role": "user", "content": c});
        let assistant = json!({"role": "assistant", "content": "x"});
        let main = json!({"model": "m", "messages": [user(json!("go"))]});
        assert_eq!(text(&post(&server, &main).await), "m0");
        let blocks = json!([{"type": "text", "text": "<reminder>"},
            {"type": "text", "text": "SUBTASK: say done"}]);
        let sub = json!({"model": "m", "messages": [user(blocks.clone())]});
        assert_eq!(text(&post(&server, &sub).await), "s0");
        let sub = json!({"model": "m", "messages": [user(blocks), assistant, user(json!("more"))]});
        assert_eq!(text(&post(&server, &sub).await), "s1");
        // The marker in a later message of the main agent does not make it a subagent.
        let assistant = json!({"role": "assistant", "content": "x"});
        let main = json!({"model": "m", "messages":
            [user(json!("go")), assistant, user(json!("SUBTASK done"))]});
        assert_eq!(text(&post(&server, &main).await), "m1");
        assert_eq!(server.requests().len(), 4);
        assert!(
            ModelServer::with_agents(vec![answer("m")], BTreeMap::from([("X".into(), vec![])]))
                .await
                .is_err()
        );
    }
}
