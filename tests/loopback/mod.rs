//! A scripted HTTP server on 127.0.0.1 for the provider tests: it records every request and
//! answers each with the next scripted reply (JSON, an error status, or server-sent events
//! cut into small chunks).
//!
//! It runs on its own thread and runtime, so tests with paused tokio time measure only the
//! client's waits.
#![allow(dead_code, unreachable_pub)]

use std::{
    collections::VecDeque,
    io,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{
        HeaderMap, HeaderValue, StatusCode,
        header::{CONTENT_LENGTH, CONTENT_TYPE},
    },
    response::Response,
};
use futures_util::StreamExt;
use serde_json::Value;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    /// The body as JSON (`Value::Null` if it was not JSON).
    pub body: Value,
    /// The body's bytes, as sent.
    pub raw: Bytes,
}

impl Recorded {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// How a reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The body ends normally.
    Clean,
    /// The connection is dropped mid-body.
    Abort,
}

/// A scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    Whole {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    Sse {
        text: String,
        chunk_bytes: usize,
        end: End,
    },
    /// A large body made while it is sent (never held whole): `prefix`, then `len` bytes of
    /// `fill` in 64 KiB chunks, then `suffix`. Chunked, unless `content_length` is set.
    Generated {
        status: u16,
        content_type: &'static str,
        content_length: bool,
        prefix: Vec<u8>,
        fill: u8,
        len: u64,
        suffix: Vec<u8>,
    },
}

impl Reply {
    /// `200 OK` with a JSON body.
    pub fn json(body: impl Into<String>) -> Self {
        Reply::status(200, body)
    }

    /// `200 OK` with the JSON of `tests/fixtures/{name}`.
    pub fn fixture(name: &str) -> Self {
        Reply::json(fixture_text(name))
    }

    /// `status` with `body` (JSON content type).
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Whole {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into().into_bytes(),
        }
    }

    /// `status` with a body of `len` bytes made while it is sent: `prefix`, `fill` bytes,
    /// `suffix` (see [`Reply::Generated`]).
    pub fn generated(
        status: u16,
        content_type: &'static str,
        prefix: &str,
        fill: u8,
        len: u64,
        suffix: &str,
    ) -> Self {
        Reply::Generated {
            status,
            content_type,
            content_length: false,
            prefix: prefix.as_bytes().to_vec(),
            fill,
            len,
            suffix: suffix.as_bytes().to_vec(),
        }
    }

    /// This generated reply announcing its length in `Content-Length`.
    pub fn with_content_length(mut self) -> Self {
        if let Reply::Generated { content_length, .. } = &mut self {
            *content_length = true;
        }
        self
    }

    /// This reply with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Reply::Whole { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// An OpenAI stream from a fixture holding the `data:` payloads in order (`"[DONE]"` as a
    /// string), cut into chunks of 7 bytes.
    pub fn openai_stream(name: &str) -> Self {
        Reply::openai_events(&fixture(name))
    }

    /// An OpenAI stream of these payloads.
    pub fn openai_events(payloads: &Value) -> Self {
        let mut text = String::new();
        for p in payloads.as_array().expect("an array of payloads") {
            let data = match p {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            text.push_str(&format!("data: {data}\n\n"));
        }
        Reply::sse(text)
    }

    /// An Anthropic stream from a fixture holding `{event, data}` objects in order, cut into
    /// chunks of 7 bytes.
    pub fn anthropic_stream(name: &str) -> Self {
        Reply::anthropic_events(&fixture(name))
    }

    /// An Anthropic stream of these `{event, data}` objects.
    pub fn anthropic_events(events: &Value) -> Self {
        let mut text = String::new();
        for e in events.as_array().expect("an array of events") {
            text.push_str(&format!(
                "event: {}\ndata: {}\n\n",
                e["event"].as_str().expect("an event name"),
                e["data"]
            ));
        }
        Reply::sse(text)
    }

    /// Server-sent events with this exact text.
    pub fn sse(text: String) -> Self {
        Reply::Sse {
            text,
            chunk_bytes: 7,
            end: End::Clean,
        }
    }

    /// This stream cut after `keep` bytes of its text, ending as `end`.
    pub fn cut(self, keep: usize, end: End) -> Self {
        match self {
            Reply::Sse {
                text, chunk_bytes, ..
            } => {
                let bytes = text.into_bytes();
                Reply::Sse {
                    text: String::from_utf8_lossy(&bytes[..keep.min(bytes.len())]).into_owned(),
                    chunk_bytes,
                    end,
                }
            }
            whole => whole,
        }
    }

    /// The text of a stream (for finding where to cut it).
    pub fn text(&self) -> &str {
        match self {
            Reply::Sse { text, .. } => text,
            Reply::Whole { .. } | Reply::Generated { .. } => "",
        }
    }
}

/// The text of `tests/fixtures/{name}`.
pub fn fixture_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The JSON of `tests/fixtures/{name}`.
pub fn fixture(name: &str) -> Value {
    serde_json::from_str(&fixture_text(name)).expect("a JSON fixture")
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    /// Bytes of generated bodies handed to the connection so far.
    generated: AtomicU64,
}

/// The server. Dropping it stops it.
pub struct Server {
    url: String,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Server {
    /// A server on `127.0.0.1:0`, on its own thread.
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = Arc::clone(&shared);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new().fallback(handle).with_state(state);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Server {
            url,
            shared,
            stop: Some(stop),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Queues the next reply.
    pub fn reply(&self, reply: Reply) -> &Self {
        self.shared.replies.lock().unwrap().push_back(reply);
        self
    }

    /// How many bytes of generated bodies the server has handed to its connections: what a
    /// client read, plus what fits in the socket buffers.
    pub fn generated_bytes(&self) -> u64 {
        self.shared.generated.load(Ordering::SeqCst)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A reqwest client for tests: no idle-connection timer, so paused tokio time only advances
/// for the waits under test.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(None)
        .build()
        .unwrap()
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    shared.requests.lock().unwrap().push(Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        raw: bytes.clone(),
    });
    let reply = shared.replies.lock().unwrap().pop_front();
    match reply {
        None => Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from(r#"{"error":{"message":"no reply scripted"}}"#))
            .unwrap(),
        Some(Reply::Whole {
            status,
            headers,
            body,
        }) => {
            let mut resp = Response::builder().status(status);
            for (name, value) in headers {
                resp = resp.header(name, value);
            }
            resp.body(Body::from(body)).unwrap()
        }
        Some(Reply::Generated {
            status,
            content_type,
            content_length,
            prefix,
            fill,
            len,
            suffix,
        }) => {
            const CHUNK: u64 = 64 << 10;
            let total = prefix.len() as u64 + len + suffix.len() as u64;
            let block = Bytes::from(vec![fill; CHUNK as usize]);
            let counted = Arc::clone(&shared);
            let middle = futures_util::stream::unfold(len, move |left| {
                let block = block.clone();
                async move {
                    (left > 0).then(|| {
                        let n = left.min(CHUNK);
                        (block.slice(..n as usize), left - n)
                    })
                }
            });
            let parts = futures_util::stream::iter([Bytes::from(prefix)])
                .chain(middle)
                .chain(futures_util::stream::iter([Bytes::from(suffix)]))
                .map(move |b| {
                    counted
                        .generated
                        .fetch_add(b.len() as u64, Ordering::SeqCst);
                    Ok::<_, io::Error>(b)
                });
            let mut resp = Response::builder()
                .status(status)
                .header(CONTENT_TYPE, content_type);
            if content_length {
                resp = resp.header(CONTENT_LENGTH, total);
            }
            resp.body(Body::from_stream(parts)).unwrap()
        }
        Some(Reply::Sse {
            text,
            chunk_bytes,
            end,
        }) => {
            let chunks: Vec<Bytes> = text
                .into_bytes()
                .chunks(chunk_bytes.max(1))
                .map(Bytes::copy_from_slice)
                .collect();
            let stream = futures_util::stream::unfold(
                (chunks.into_iter(), end, false),
                |(mut chunks, end, done)| async move {
                    if done {
                        return None;
                    }
                    match chunks.next() {
                        // Each piece is one chunk of the chunked transfer encoding, and
                        // the client's decoder hands them over one by one.
                        Some(chunk) => Some((Ok::<_, io::Error>(chunk), (chunks, end, false))),
                        None if end == End::Abort => {
                            // The bytes sent so far reach the client before the connection
                            // is dropped (hyper would otherwise reset it with the last chunk
                            // still unwritten).
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            Some((
                                Err(io::Error::new(io::ErrorKind::ConnectionReset, "cut")),
                                (chunks, end, true),
                            ))
                        }
                        None => None,
                    }
                },
            );
            let mut resp = Response::new(Body::from_stream(stream));
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            resp
        }
    }
}
