//! What the HTTP providers share: the transport, the request's URL and headers, reading and
//! classifying responses, the SSE parser, and the response future.
//!
//! Everything read from the server is bounded here (the sizes are documented, as the public
//! constants, in the [model module docs](tower_agent_core::model#limits)):
//!
//! - [`body`] reads at most the provider's `max_response_bytes`, chunk by chunk, and fails
//!   as soon as the body (or its `Content-Length`) is over;
//! - [`check`] reads at most [`MAX_ERROR_BODY_BYTES`] of an error response and drops the rest;
//! - [`SseParser`] holds at most its `max_event` bytes of one event (line included) and fails
//!   past it; [`read_events`] gives it [`MAX_SSE_EVENT_BYTES`] or `max_response_bytes` if
//!   smaller, and the providers check what they put together against `max_response_bytes`
//!   ([`check_kept`]);
//! - [`retry_after`] never overflows and clamps to [`MAX_RETRY_AFTER`].

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, SystemTime},
};

use futures_util::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tower::{Service, ServiceExt, util::BoxCloneSyncService};
use tower_agent_core::{
    error::BoxError,
    message::Usage,
    model::{
        ExtraBody, MAX_ERROR_BODY_BYTES, MAX_RETRY_AFTER, MAX_SSE_EVENT_BYTES, ModelResponse,
        error::{ProviderError, ProviderErrorKind},
    },
};

/// The HTTP transport under a provider: a `reqwest::Client` or any service of reqwest
/// requests (so transport layers can be stacked under the provider).
pub(crate) type Transport = BoxCloneSyncService<reqwest::Request, reqwest::Response, BoxError>;

/// A transport from any service of reqwest requests.
pub(crate) fn transport<S>(service: S) -> Transport
where
    S: Service<reqwest::Request, Response = reqwest::Response> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    BoxCloneSyncService::new(service.map_err(Into::into))
}

/// The default transport: a fresh `reqwest::Client`, or a stand-in that is never called
/// (with the reason it could not be built, to fail every call with).
pub(crate) fn default_transport() -> (Transport, Option<String>) {
    match reqwest::Client::builder().build() {
        Ok(client) => (transport(client), None),
        Err(err) => {
            let unused = tower::service_fn(|_: reqwest::Request| async {
                Err::<reqwest::Response, BoxError>("no HTTP client".into())
            });
            (
                transport(unused),
                Some(format!("the HTTP client could not be built: {err}")),
            )
        }
    }
}

// ===== endpoint =====

/// Where a provider posts, with which headers: checked once, when the provider is built.
pub(crate) struct Endpoint {
    provider: &'static str,
    url: String,
    checked: Result<(reqwest::Url, HeaderMap), String>,
}

impl Endpoint {
    /// `url` with `headers` (later ones replace earlier ones of the same name) and
    /// `content-type: application/json`. An invalid URL or header, or a `config_error`, makes
    /// every call fail with [`ProviderError::is_config`].
    pub(crate) fn new(
        provider: &'static str,
        url: String,
        headers: &[(String, String)],
        config_error: Option<String>,
    ) -> Self {
        let checked = (|| {
            if let Some(err) = config_error {
                return Err(err);
            }
            let parsed = reqwest::Url::parse(&url)
                .map_err(|e| format!("the URL `{url}` is not valid: {e}"))?;
            let mut map = HeaderMap::new();
            map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            for (name, value) in headers {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("`{name}` is not a valid header name"))?;
                let mut value = HeaderValue::from_str(value)
                    .map_err(|_| format!("the value of the `{name}` header is not valid"))?;
                if is_secret(&name) {
                    value.set_sensitive(true);
                }
                map.insert(name, value);
            }
            Ok((parsed, map))
        })();
        Endpoint {
            provider,
            url,
            checked,
        }
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// A POST of `body` (JSON) to the endpoint.
    pub(crate) fn post(&self, body: Vec<u8>) -> Result<reqwest::Request, ProviderError> {
        let (url, headers) = self.checked.as_ref().map_err(|msg| {
            ProviderError::new(self.provider, ProviderErrorKind::Config).with_message(msg.clone())
        })?;
        let mut req = reqwest::Request::new(reqwest::Method::POST, url.clone());
        *req.headers_mut() = headers.clone();
        *req.body_mut() = Some(body.into());
        Ok(req)
    }
}

fn is_secret(name: &HeaderName) -> bool {
    name == reqwest::header::AUTHORIZATION || name.as_str() == "x-api-key"
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("valid", &self.checked.is_ok())
            .finish()
    }
}

/// A non-empty environment variable.
pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

// ===== the response future =====

/// The response future of the HTTP providers: the HTTP call and the reading of its answer
/// (streamed or not), boxed — one allocation per call, nothing next to a network round trip.
#[must_use = "futures do nothing unless polled"]
pub struct ResponseFuture(BoxFuture<'static, Result<ModelResponse, BoxError>>);

impl ResponseFuture {
    pub(crate) fn new<E: Into<BoxError>>(
        future: impl Future<Output = Result<ModelResponse, E>> + Send + 'static,
    ) -> Self {
        ResponseFuture(Box::pin(async move { future.await.map_err(Into::into) }))
    }

    pub(crate) fn failed(err: ProviderError) -> Self {
        ResponseFuture(Box::pin(std::future::ready(Err(err.into()))))
    }
}

impl Future for ResponseFuture {
    type Output = Result<ModelResponse, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

// ===== responses =====

/// The transport's error as a [`ProviderError`]: a timeout, a bad request, or a connection
/// that failed or broke.
pub(crate) fn transport_error(provider: &'static str, err: BoxError) -> ProviderError {
    let err = match err.downcast::<ProviderError>() {
        Ok(found) => return *found,
        Err(err) => err,
    };
    let mut kind = ProviderErrorKind::Transport;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(&*err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            // NOTE: reqwest reports a body cut while being read as a "decode" error; we
            // decode JSON ourselves, so that is a broken connection here.
            if r.is_timeout() {
                kind = ProviderErrorKind::Timeout;
            } else if r.is_builder() {
                kind = ProviderErrorKind::Config;
            }
            break;
        }
        if e.to_string().contains("timed out") {
            kind = ProviderErrorKind::Timeout;
            break;
        }
        cur = e.source();
    }
    ProviderError::new(provider, kind).with_cause(err)
}

/// Sends through `sent` and checks the status: an error status becomes a classified
/// [`ProviderError`] with the provider's code and message.
pub(crate) async fn check(
    provider: &'static str,
    sent: impl Future<Output = Result<reqwest::Response, BoxError>>,
) -> Result<reqwest::Response, ProviderError> {
    let resp = sent.await.map_err(|e| transport_error(provider, e))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let retry_after = retry_after(resp.headers());
    let body = error_body(resp).await;
    let err = status_error(provider, status.as_u16(), &body);
    Err(match retry_after {
        Some(delay) => err.with_retry_after(delay),
        None => err,
    })
}

/// The first [`MAX_ERROR_BODY_BYTES`] of an error response's body (less if it broke off);
/// the rest is not read: dropping the response closes its connection.
async fn error_body(mut resp: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY_BYTES {
        let Ok(Some(chunk)) = resp.chunk().await else {
            break;
        };
        let room = MAX_ERROR_BODY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    body
}

/// The whole body of `resp`, if it is at most `limit` bytes; past that a malformed-response
/// error, found from the `Content-Length` before reading or else as soon as a chunk passes
/// the limit (so at most `limit` bytes are ever held).
pub(crate) async fn body(
    provider: &'static str,
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ProviderError> {
    let status = resp.status().as_u16();
    let announced = resp.content_length().unwrap_or(0);
    if announced > limit as u64 {
        return Err(too_large(provider, "response body", limit, &[]).with_status(status));
    }
    // NOTE: `announced` is at most `limit` here.
    let mut body = Vec::with_capacity(announced as usize);
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| transport_error(provider, e.into()))?
    {
        if chunk.len() > limit - body.len() {
            return Err(too_large(provider, "response body", limit, &body).with_status(status));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error for a response (or a part of it, `what`) over its `limit`, with the start of
/// what was read.
pub(crate) fn too_large(
    provider: &'static str,
    what: &str,
    limit: usize,
    start: &[u8],
) -> ProviderError {
    let message = format!("the {what} is larger than the limit of {}", size(limit));
    let err =
        ProviderError::new(provider, ProviderErrorKind::MalformedResponse).with_message(message);
    if start.is_empty() {
        return err;
    }
    err.with_body(start)
}

/// Fails once what a streamed answer has put together (`kept` bytes of text and tool-call
/// arguments) is over `limit` (the provider's `max_response_bytes`).
pub(crate) fn check_kept(
    provider: &'static str,
    kept: usize,
    limit: usize,
) -> Result<(), ProviderError> {
    if kept > limit {
        return Err(too_large(provider, "streamed answer", limit, &[]));
    }
    Ok(())
}

/// `n` bytes for people: `16 MiB`, `8 KiB` or `1000 bytes`.
fn size(n: usize) -> String {
    match n {
        0 => "0 bytes".to_owned(),
        n if n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// Whether `resp` is JSON (a server may answer a streaming request with one whole response).
pub(crate) fn is_json(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// `body` as JSON of type `T`, or a malformed-response error with an excerpt.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    provider: &'static str,
    status: u16,
    body: &[u8],
) -> Result<T, ProviderError> {
    serde_json::from_slice(body)
        .map_err(|e| malformed(provider, e.to_string(), body).with_status(status))
}

/// A malformed-response error saying `what`, with an excerpt of `body`.
pub(crate) fn malformed(
    provider: &'static str,
    what: impl Into<String>,
    body: &[u8],
) -> ProviderError {
    ProviderError::new(provider, ProviderErrorKind::MalformedResponse)
        .with_message(what)
        .with_body(body)
}

/// The error for an HTTP error `status` with `body`.
pub(crate) fn status_error(provider: &'static str, status: u16, body: &[u8]) -> ProviderError {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let (code, message) = parsed.as_ref().map(error_fields).unwrap_or_default();
    let context_length = is_context_length(code.as_deref(), message.as_deref());
    let kind = match status {
        429 if code.as_deref() == Some("insufficient_quota") => ProviderErrorKind::QuotaExceeded,
        429 => ProviderErrorKind::RateLimited,
        401 | 403 => ProviderErrorKind::Authentication,
        408 => ProviderErrorKind::Timeout,
        400 | 413 | 422 if context_length => ProviderErrorKind::ContextLengthExceeded,
        400..=499 => ProviderErrorKind::InvalidRequest,
        500..=599 => ProviderErrorKind::ServerError,
        _ => ProviderErrorKind::MalformedResponse,
    };
    let mut err = ProviderError::new(provider, kind)
        .with_status(status)
        .with_body(body);
    if let Some(code) = code {
        err = err.with_code(code);
    }
    let message = match message {
        Some(m) => m,
        None if kind == ProviderErrorKind::MalformedResponse => {
            format!("unexpected status {status}")
        }
        // The body's excerpt, as kept.
        None => err.body_excerpt().unwrap_or_default().to_owned(),
    };
    if !message.is_empty() {
        err = err.with_message(message);
    }
    err
}

/// The error for an error object sent in place of a response or inside a stream:
/// `{"error": {"type"/"code", "message"}}` (or the error object itself).
pub(crate) fn error_object(provider: &'static str, value: &Value) -> ProviderError {
    let (code, message) = error_fields(value);
    let kind = match code.as_deref().unwrap_or_default() {
        "rate_limit_error" | "rate_limit_exceeded" | "requests" | "tokens" => {
            ProviderErrorKind::RateLimited
        }
        "insufficient_quota" => ProviderErrorKind::QuotaExceeded,
        "authentication_error" | "permission_error" | "invalid_api_key" => {
            ProviderErrorKind::Authentication
        }
        "timeout_error" => ProviderErrorKind::Timeout,
        _ if is_context_length(code.as_deref(), message.as_deref()) => {
            ProviderErrorKind::ContextLengthExceeded
        }
        "invalid_request_error" | "not_found_error" | "request_too_large" => {
            ProviderErrorKind::InvalidRequest
        }
        _ => ProviderErrorKind::ServerError,
    };
    let mut err = ProviderError::new(provider, kind);
    if let Some(code) = code {
        err = err.with_code(code);
    }
    if let Some(message) = message {
        err = err.with_message(message);
    }
    err
}

/// The provider's error code (or type) and message, from the error shapes of OpenAI,
/// Anthropic and the compatible servers.
fn error_fields(value: &Value) -> (Option<String>, Option<String>) {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let error = value.get("error").unwrap_or(value);
    if let Some(message) = error.as_str() {
        return (None, Some(message.to_owned()));
    }
    let code = error
        .get("code")
        .and_then(text)
        .or_else(|| error.get("type").and_then(text))
        .filter(|c| c != "error");
    let message = error
        .get("message")
        .and_then(text)
        .or_else(|| value.get("message").and_then(text))
        .or_else(|| value.get("detail").and_then(text));
    (code, message)
}

/// Whether an error says the conversation does not fit the context window, in any provider's
/// words: OpenAI's and DeepSeek's code `context_length_exceeded` / "This model's maximum
/// context length is …", Anthropic's "prompt is too long: … tokens > … maximum" and "input
/// length and `max_tokens` exceed context limit", vLLM's "maximum context length", llama.cpp's
/// type `exceed_context_size_error` / "the request exceeds the available context size",
/// Ollama's "input length exceeds the context length", OpenAI Responses' "exceeds the context
/// window".
pub(crate) fn is_context_length(code: Option<&str>, message: Option<&str>) -> bool {
    if matches!(
        code,
        Some("context_length_exceeded" | "exceed_context_size_error")
    ) {
        return true;
    }
    let Some(message) = message else {
        return false;
    };
    let m = message.to_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "prompt is too long",
        "context limit",
        "context size",
        "exceeds the context",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// How long the response asks to wait: `retry-after-ms`, or `retry-after` in seconds or as
/// an HTTP date (any of the three forms of RFC 9110, through `httpdate`).
///
/// A number may have a fraction or an exponent (`1.5`, `1e3`); a negative number, `NaN`, or
/// anything unparsable is ignored (`retry-after-ms` then falls back to `retry-after`). A
/// delay past [`MAX_RETRY_AFTER`] — `1e300`, `inf`, an integer past `u64`, a date in the year
/// 9999 — is clamped to it; a date in the past is no wait. Never panics.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// [`retry_after`] as seen at `now`.
fn retry_after_at(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(wait) = header("retry-after-ms").and_then(|v| delay(v, 1000.0)) {
        return Some(wait);
    }
    let value = header("retry-after")?;
    if let Some(wait) = delay(value, 1.0) {
        return Some(wait);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
    Some(wait.min(MAX_RETRY_AFTER))
}

/// A delay written as a number of units, `per_second` of them to a second, clamped to
/// [`MAX_RETRY_AFTER`]; `None` if it is not a number, negative or `NaN`.
fn delay(value: &str, per_second: f64) -> Option<Duration> {
    let n = value.parse::<f64>().ok()?;
    if n.is_nan() || n < 0.0 {
        return None;
    }
    // NOTE: the only failure left is overflow (a huge number, or +inf): the longest wait.
    let wait = Duration::try_from_secs_f64(n / per_second).unwrap_or(MAX_RETRY_AFTER);
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Token counts, `None` when both are absent.
pub(crate) fn usage(input: Option<u64>, output: Option<u64>) -> Option<Usage> {
    (input.is_some() || output.is_some()).then(|| Usage {
        input_tokens: input.unwrap_or_default(),
        output_tokens: output.unwrap_or_default(),
        ..Usage::default()
    })
}

/// The JSON arguments of a tool call as the model wrote them: parsed, `{}` when empty, or
/// kept as a string when they are not JSON (the tool router reports that to the model) or
/// when parsing would change them: an integer beyond 64 bits, which `serde_json` turns into
/// a rounded float (an AGENT-HOOKS host refuses such text, spec §4.4).
pub(crate) fn parse_arguments(raw: String) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str(&raw) {
        Ok(value) if !rounds_an_integer(&raw) => value,
        _ => Value::String(raw),
    }
}

/// Whether JSON `text` has an integer literal (no fraction, no exponent) outside `i64` and
/// `u64`, outside its strings.
fn rounds_an_integer(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &text[start..i];
                let integer = !token.contains(['.', 'e', 'E']);
                if integer && token.parse::<i64>().is_err() && token.parse::<u64>().is_err() {
                    return true;
                }
            }
            _ => i += 1,
        }
    }
    false
}

// ===== server-sent events =====

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any.
    pub(crate) event: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub(crate) data: String,
}

/// An incremental parser of `text/event-stream` bodies (the WHATWG rules: lines end with
/// `\n`, `\r\n` or `\r`; a blank line ends an event; `:` starts a comment; one space after
/// the field's colon is dropped). Chunks may be cut anywhere, even inside a character.
///
/// It holds at most `max_event` bytes of the event being read (its `event:` name, its `data:`
/// so far and the line not yet ended, comments included); one byte more and
/// [`push`](Self::push) fails with [`EventTooLarge`] — whichever way the body is cut into
/// chunks. After that error the parser must not be used again.
#[derive(Debug)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    max_event: usize,
}

/// A server-sent event (or one of its lines) longer than the parser's `max_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventTooLarge;

impl SseParser {
    /// A parser holding at most `max_event` bytes of one event.
    pub(crate) fn new(max_event: usize) -> Self {
        SseParser {
            line: Vec::new(),
            skip_lf: false,
            event: None,
            data: String::new(),
            has_data: false,
            max_event,
        }
    }

    /// The bytes of the current event held so far, `extra` more bytes of line included.
    fn held(&self, extra: usize) -> usize {
        let event = self.event.as_ref().map_or(0, String::len);
        self.data.len() + event + self.line.len() + extra
    }

    fn check(&self, extra: usize) -> Result<(), EventTooLarge> {
        if self.held(extra) > self.max_event {
            return Err(EventTooLarge);
        }
        Ok(())
    }

    /// Parses `chunk`, pushing the events it completes onto `out`.
    pub(crate) fn push(
        &mut self,
        mut chunk: &[u8],
        out: &mut Vec<SseEvent>,
    ) -> Result<(), EventTooLarge> {
        if self.skip_lf && !chunk.is_empty() {
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
            self.skip_lf = false;
        }
        while let Some(pos) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.check(pos)?;
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(&chunk[..pos]);
            let processed = self.process_line(&line, out);
            line.clear();
            self.line = line;
            processed?;
            let cr = chunk[pos] == b'\r';
            chunk = &chunk[pos + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
        }
        self.check(chunk.len())?;
        self.line.extend_from_slice(chunk);
        Ok(())
    }

    /// The body ended: an event whose lines all ended is pushed even without its blank line;
    /// a line cut mid-way is dropped (the caller sees no end marker and reports the stream
    /// as incomplete).
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        self.line.clear();
        // NOTE: an empty line adds nothing, so it cannot pass the limit.
        let _ = self.process_line(&[], out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), EventTooLarge> {
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                data.pop(); // the last '\n'
                out.push(SseEvent {
                    event: self.event.take(),
                    data,
                });
            } else {
                self.event = None;
            }
            self.has_data = false;
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"data" => {
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
                self.has_data = true;
            }
            _ => {}
        }
        // NOTE: the line was checked before; counted again here because replacing bytes that
        // are not UTF-8 may have made the text longer than the line.
        self.check(0)
    }
}

/// Reads the SSE body of `resp`, handing each event to `on_event` until it says the stream
/// is done (`Ok(true)`). Returns whether it did; `false` means the body ended first. An event
/// longer than [`MAX_SSE_EVENT_BYTES`] (or `max_response_bytes` if smaller) fails it as a
/// malformed response.
pub(crate) async fn read_events(
    provider: &'static str,
    mut resp: reqwest::Response,
    max_response_bytes: usize,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, ProviderError>,
) -> Result<bool, ProviderError> {
    let status = resp.status().as_u16();
    let max_event = MAX_SSE_EVENT_BYTES.min(max_response_bytes);
    let mut parser = SseParser::new(max_event);
    let mut events = Vec::new();
    loop {
        let chunk = resp
            .chunk()
            .await
            .map_err(|e| transport_error(provider, e.into()))?;
        let parsed = match &chunk {
            Some(bytes) => parser.push(bytes, &mut events),
            None => {
                parser.finish(&mut events);
                Ok(())
            }
        };
        // The events completed before a line too long still count (one may be an error).
        for event in events.drain(..) {
            if on_event(event)? {
                return Ok(true);
            }
        }
        if parsed.is_err() {
            return Err(
                too_large(provider, "server-sent event", max_event, &[]).with_status(status)
            );
        }
        if chunk.is_none() {
            return Ok(false);
        }
    }
}

/// `body` as JSON bytes, with `extra`'s fields merged in at the top level (each replacing
/// the body's field of the same name).
pub(crate) fn encode<B: serde::Serialize>(
    body: &B,
    extra: Option<&ExtraBody>,
) -> Result<Vec<u8>, serde_json::Error> {
    match extra.filter(|e| !e.is_empty()) {
        None => serde_json::to_vec(body),
        Some(extra) => {
            let mut value = serde_json::to_value(body)?;
            if let Some(map) = value.as_object_mut() {
                for (k, v) in extra.iter() {
                    map.insert(k.clone(), v.clone());
                }
            }
            serde_json::to_vec(&value)
        }
    }
}

/// The error for a stream that ended before its end marker.
pub(crate) fn incomplete(provider: &'static str, marker: &str) -> ProviderError {
    ProviderError::new(provider, ProviderErrorKind::Incomplete).with_message(format!(
        "the stream ended before {marker}; the answer is incomplete"
    ))
}

/// Helpers for the providers' property tests of their stream assemblies.
#[cfg(test)]
pub(crate) mod fuzz {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::ProviderError;

    /// A JSON leaf of any type.
    pub(crate) fn leaf() -> impl Strategy<Value = Value> + Clone {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ]
    }

    /// Feeds `events` to `push` until it says the stream ended or fails; the bytes fed.
    pub(crate) fn feed(
        events: &[String],
        mut push: impl FnMut(&str) -> Result<bool, ProviderError>,
    ) -> usize {
        let mut total = 0;
        for data in events {
            total += data.len();
            match push(data) {
                Ok(true) | Err(_) => break,
                Ok(false) => {}
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use proptest::prelude::*;

    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new(usize::MAX);
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out).unwrap();
        }
        p.finish(&mut out);
        out
    }

    #[test]
    fn extra_fields_merge_at_the_top() {
        let extra: ExtraBody = std::sync::Arc::new(
            serde_json::json!({"b": 3, "c": {"d": 1}})
                .as_object()
                .unwrap()
                .clone(),
        );
        let bytes = encode(&serde_json::json!({"a": 1, "b": 2}), Some(&extra)).unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v, serde_json::json!({"a": 1, "b": 3, "c": {"d": 1}}));
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn sse_events_fields_and_comments() {
        let body = b": keep-alive\nevent: message_start\ndata: {\"a\":1}\n\ndata:x\ndata:  y\nid: 7\nretry: 10\n\nevent: lone\n\ndata\n\n";
        assert_eq!(
            parse_all(&[body]),
            vec![
                ev(Some("message_start"), "{\"a\":1}"),
                ev(None, "x\n y"),
                ev(None, ""),
            ]
        );
    }

    #[test]
    fn sse_split_at_every_byte_and_any_line_ending() {
        let body = "event: a\r\ndata: héllo\r\n\r\ndata: [DONE]\r\rdata: z\n\n";
        let whole = parse_all(&[body.as_bytes()]);
        assert_eq!(
            whole,
            vec![ev(Some("a"), "héllo"), ev(None, "[DONE]"), ev(None, "z")]
        );
        let bytes = body.as_bytes();
        for cut in 0..=bytes.len() {
            assert_eq!(
                parse_all(&[&bytes[..cut], &bytes[cut..]]),
                whole,
                "cut at {cut}"
            );
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(parse_all(&singles), whole);
    }

    #[test]
    fn sse_end_of_body() {
        // Complete lines without the final blank line still count…
        assert_eq!(parse_all(&[b"data: [DONE]\n"]), vec![ev(None, "[DONE]")]);
        // …a line cut mid-way does not.
        assert_eq!(
            parse_all(&[b"data: {\"a\":1}\n\ndata: {\"b\""]),
            vec![ev(None, "{\"a\":1}")]
        );
    }

    /// What parsing `chunks` with a limit of `max_event` gives: the events, and whether it
    /// failed (after them).
    fn parse_limited(max_event: usize, chunks: &[&[u8]]) -> (Vec<SseEvent>, bool) {
        let mut p = SseParser::new(max_event);
        let mut out = Vec::new();
        for c in chunks {
            if p.push(c, &mut out).is_err() {
                return (out, true);
            }
        }
        p.finish(&mut out);
        (out, false)
    }

    #[test]
    fn sse_event_limit_counts_lines_data_and_name() {
        // `data: 12345` is 11 bytes; the event holds `12345\n` (6).
        assert_eq!(
            parse_limited(11, &[b"data: 12345\n\n"]),
            (vec![ev(None, "12345")], false)
        );
        assert_eq!(parse_limited(10, &[b"data: 12345\n\n"]), (vec![], true));
        // A line with no end is refused once it passes the limit, chunk by chunk.
        let mut p = SseParser::new(1024);
        let mut out = Vec::new();
        for _ in 0..16 {
            p.push(&[b'x'; 64], &mut out).unwrap();
        }
        assert_eq!(p.push(b"x", &mut out), Err(EventTooLarge));
        assert!(p.line.capacity() <= 2048, "{}", p.line.capacity());
        // Many data lines add up, and the event name counts.
        let many = "data: 0123456789\n".repeat(20);
        assert!(parse_limited(200, &[many.as_bytes()]).1);
        assert!(!parse_limited(240, &[many.as_bytes()]).1);
        assert!(parse_limited(10, &[b"event: eleven-long\ndata: x\n\n"]).1);
        // Comments count while they are read.
        assert!(parse_limited(100, &[&[b':'; 200][..], b"\n"]).1);
        // Events before the long one are kept; the limit is per event.
        let body = b"data: a\n\ndata: b\n\ndata: 0123456789012345678901234567890\n\n";
        assert_eq!(
            parse_limited(16, &[body]),
            (vec![ev(None, "a"), ev(None, "b")], true)
        );
        let small = "data: 0123456789\n\n".repeat(100);
        assert_eq!(parse_limited(16, &[small.as_bytes()]).0.len(), 100);
        // Replacement characters count for what they cost.
        let bad = [&b"data: "[..], &[0xff; 8][..], b"\n\n"].concat();
        assert!(parse_limited(20, &[&bad]).1);
        assert!(!parse_limited(30, &[&bad]).1);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after", HeaderValue::from_static("1.5"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    #[test]
    fn retry_after_dates_through_httpdate() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37
        let at = |value: &str| retry_after_at(&headers(&[("retry-after", value)]), now);
        // The three forms of RFC 9110, all the same instant 30 s later.
        for date in [
            "Sun, 06 Nov 1994 08:50:07 GMT",
            "Sunday, 06-Nov-94 08:50:07 GMT",
            "Sun Nov  6 08:50:07 1994",
        ] {
            assert_eq!(at(date), Some(Duration::from_secs(30)), "{date}");
        }
        assert_eq!(at("Sat, 05 Nov 1994 08:49:37 GMT"), Some(Duration::ZERO));
        assert_eq!(at("Fri, 31 Dec 9999 23:59:59 GMT"), Some(MAX_RETRY_AFTER));
        assert_eq!(at("Fri, 31 Dec 99999999999 23:59:59 GMT"), None);
        assert_eq!(at("Sun, 06 Nov 1994 99:50:07 GMT"), None);
        assert_eq!(at("yesterday"), None);
    }

    #[test]
    fn retry_after_huge_or_invalid_numbers_never_panic() {
        let now = SystemTime::now();
        let secs = |value: &str| retry_after_at(&headers(&[("retry-after", value)]), now);
        let ms = |value: &str| retry_after_at(&headers(&[("retry-after-ms", value)]), now);
        for huge in [
            "1e20",
            "1e300",
            "1e400",
            "inf",
            "+Infinity",
            "18446744073709551616",
            "99999999999999999999999999999999999999",
            "86401",
        ] {
            assert_eq!(secs(huge), Some(MAX_RETRY_AFTER), "retry-after: {huge}");
        }
        for huge in ["1e300", "inf", "18446744073709551616000", "86400001"] {
            assert_eq!(ms(huge), Some(MAX_RETRY_AFTER), "retry-after-ms: {huge}");
        }
        for ignored in [
            "-1", "-1e300", "-inf", "NaN", "nan", "", "soon", "0x10", "1,5",
        ] {
            assert_eq!(secs(ignored), None, "retry-after: {ignored:?}");
            assert_eq!(ms(ignored), None, "retry-after-ms: {ignored:?}");
        }
        assert_eq!(secs("-0"), Some(Duration::ZERO));
        assert_eq!(ms("1500"), Some(Duration::from_millis(1500)));
        assert_eq!(ms("0.5"), Some(Duration::from_micros(500)));
        // An invalid `retry-after-ms` falls back to `retry-after`.
        let both = headers(&[("retry-after-ms", "NaN"), ("retry-after", "3")]);
        assert_eq!(retry_after_at(&both, now), Some(Duration::from_secs(3)));
    }

    #[test]
    fn sizes_for_people() {
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(8 << 10), "8 KiB");
        assert_eq!(size(1000), "1000 bytes");
        assert_eq!(size(0), "0 bytes");
    }

    #[test]
    fn status_classification() {
        let openai_ctx = br#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let e = status_error("openai", 400, openai_ctx);
        assert!(e.is_context_length_exceeded() && e.is_invalid_request());
        assert_eq!(e.code(), Some("context_length_exceeded"));

        let anthropic_ctx = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        assert!(status_error("anthropic", 400, anthropic_ctx).is_context_length_exceeded());

        let quota = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let e = status_error("openai", 429, quota);
        assert!(e.is_quota_exceeded() && !e.is_rate_limited());

        let overloaded =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let e = status_error("anthropic", 529, overloaded);
        assert!(e.is_server_error());
        assert_eq!(e.code(), Some("overloaded_error"));
        assert_eq!(e.message(), Some("Overloaded"));

        let e = status_error("openai", 502, b"<html>Bad Gateway</html>");
        assert!(e.is_server_error());
        assert_eq!(
            e.to_string(),
            "openai: server error (http 502): <html>Bad Gateway</html>"
        );

        assert!(status_error("openai", 401, b"{}").is_authentication());
        assert!(status_error("openai", 403, b"").is_authentication());
        assert!(status_error("openai", 404, br#"{"detail":"Not Found"}"#).is_invalid_request());
        assert!(status_error("openai", 408, b"").is_timeout());
    }

    #[test]
    fn stream_error_objects() {
        let v: Value = serde_json::from_str(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap();
        assert!(error_object("anthropic", &v).is_server_error());
        let v: Value = serde_json::from_str(
            r#"{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}"#,
        )
        .unwrap();
        assert!(error_object("openai", &v).is_rate_limited());
    }

    #[test]
    fn arguments_kept_when_not_json() {
        assert_eq!(parse_arguments(String::new()), serde_json::json!({}));
        assert_eq!(
            parse_arguments("{\"a\":1}".into()),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            parse_arguments("{\"a\":".into()),
            Value::String("{\"a\":".into())
        );
    }

    #[test]
    fn arguments_kept_when_parsing_would_round_an_integer() {
        for raw in [
            r#"{"id": 18446744073709551616}"#,
            r#"{"id": -9223372036854775809}"#,
            r#"[1, {"n": 100000000000000000000000}]"#,
        ] {
            assert_eq!(
                parse_arguments(raw.into()),
                Value::String(raw.into()),
                "{raw}"
            );
        }
        for raw in [
            r#"{"id": 18446744073709551615, "s": "18446744073709551616"}"#,
            r#"{"id": -9223372036854775808, "f": 1e300, "g": 1.5}"#,
            r#"{"escaped": "a\"18446744073709551616"}"#,
        ] {
            assert!(!parse_arguments(raw.into()).is_string(), "{raw}");
        }
    }

    // ===== property tests: no panic, the same result however the body is cut =====

    /// SSE-shaped bytes: field names, separators, line endings and noise, so the parser's
    /// paths are all taken (plain random bytes rarely form a field).
    fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"data: ".to_vec()),
            Just(b"data:".to_vec()),
            Just(b"event: ".to_vec()),
            Just(b":".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n\n".to_vec()),
            Just("é".as_bytes().to_vec()),
            Just(vec![0xff]),
            Just(vec![0xc3]),
            proptest::collection::vec(any::<u8>(), 0..8),
            "[a-z{}\":\\[\\] ]{0,12}".prop_map(String::into_bytes),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|p| p.concat())
    }

    /// Cut points into `len` bytes, from arbitrary numbers.
    fn cuts(len: usize, raw: &[usize]) -> Vec<usize> {
        let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
        cuts.sort_unstable();
        cuts
    }

    fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut chunks = Vec::new();
        let mut from = 0;
        for &cut in cuts {
            chunks.push(&bytes[from..cut]);
            from = cut;
        }
        chunks.push(&bytes[from..]);
        chunks
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 3000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn sse_any_bytes_any_cuts_same_events(
            bytes in prop_oneof![sse_bytes(), proptest::collection::vec(any::<u8>(), 0..300)],
            raw_cuts in proptest::collection::vec(any::<usize>(), 0..8),
            max_event in prop_oneof![Just(usize::MAX), 0usize..64],
        ) {
            let whole = parse_limited(max_event, &[&bytes]);
            let chunks = split(&bytes, &cuts(bytes.len(), &raw_cuts));
            prop_assert_eq!(&parse_limited(max_event, &chunks), &whole);
            let singles: Vec<&[u8]> = bytes.chunks(1).collect();
            prop_assert_eq!(&parse_limited(max_event, &singles), &whole);
            for event in &whole.0 {
                let held = event.data.len() + event.event.as_ref().map_or(0, String::len);
                prop_assert!(held <= max_event, "{} > {}", held, max_event);
            }
        }

        #[test]
        fn retry_after_any_header_text(
            secs in prop_oneof![
                any::<String>(),
                "[-+]?[0-9]{0,40}(\\.[0-9]{0,10})?([eE][-+]?[0-9]{1,4})?",
                "(?i)[-+]?(inf|infinity|nan)",
                "(Mon|Sun), [0-9]{2} (Jan|Nov|Dec) [0-9]{1,12} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT",
            ],
            ms in prop_oneof![
                any::<String>(),
                "[-+]?[0-9]{0,40}(\\.[0-9]{0,10})?([eE][-+]?[0-9]{1,4})?",
            ],
            which in 0u8..3,
        ) {
            let mut h = HeaderMap::new();
            if which != 1 && let Ok(v) = HeaderValue::from_str(&secs) {
                h.insert("retry-after", v);
            }
            if which != 0 && let Ok(v) = HeaderValue::from_str(&ms) {
                h.insert("retry-after-ms", v);
            }
            if let Some(wait) = retry_after(&h) {
                prop_assert!(wait <= MAX_RETRY_AFTER, "{:?}", wait);
            }
        }
    }
}
