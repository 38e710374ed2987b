//! What the HTTP providers share: the transport, the request's URL and headers, reading and
//! classifying responses, the SSE parser, and the response future.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use futures_util::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tower::{Service, ServiceExt, util::BoxCloneSyncService};

use super::{
    ModelResponse,
    error::{Kind, ProviderError},
};
use crate::{error::BoxError, message::Usage};

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
            ProviderError::new(self.provider, Kind::Config).with_message(msg.clone())
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
    pub(crate) fn new(
        future: impl Future<Output = Result<ModelResponse, ProviderError>> + Send + 'static,
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
    let mut kind = Kind::Transport;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(&*err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            // NOTE: reqwest reports a body cut while being read as a "decode" error; we
            // decode JSON ourselves, so that is a broken connection here.
            if r.is_timeout() {
                kind = Kind::Timeout;
            } else if r.is_builder() {
                kind = Kind::Config;
            }
            break;
        }
        if e.to_string().contains("timed out") {
            kind = Kind::Timeout;
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
    let body = body(provider, resp).await.unwrap_or_default();
    Err(status_error(provider, status.as_u16(), &body).with_retry_after(retry_after))
}

/// The whole body of `resp`.
pub(crate) async fn body(
    provider: &'static str,
    resp: reqwest::Response,
) -> Result<Vec<u8>, ProviderError> {
    resp.bytes()
        .await
        .map(Vec::from)
        .map_err(|e| transport_error(provider, e.into()))
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
    ProviderError::new(provider, Kind::Malformed)
        .with_message(what)
        .with_body(body)
}

/// The error for an HTTP error `status` with `body`.
pub(crate) fn status_error(provider: &'static str, status: u16, body: &[u8]) -> ProviderError {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let (code, message) = parsed.as_ref().map(error_fields).unwrap_or_default();
    let context_length = is_context_length(code.as_deref(), message.as_deref());
    let kind = match status {
        429 if code.as_deref() == Some("insufficient_quota") => Kind::Quota,
        429 => Kind::RateLimited,
        401 | 403 => Kind::Authentication,
        408 => Kind::Timeout,
        400 | 413 | 422 if context_length => Kind::ContextLength,
        400..=499 => Kind::InvalidRequest,
        500..=599 => Kind::Server,
        _ => Kind::Malformed,
    };
    let message = match message {
        Some(m) => m,
        None if kind == Kind::Malformed => format!("unexpected status {status}"),
        None => super::error::excerpt(body),
    };
    let mut err = ProviderError::new(provider, kind)
        .with_status(status)
        .with_code(code)
        .with_body(body);
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
        "rate_limit_error" | "rate_limit_exceeded" | "requests" | "tokens" => Kind::RateLimited,
        "insufficient_quota" => Kind::Quota,
        "authentication_error" | "permission_error" | "invalid_api_key" => Kind::Authentication,
        "timeout_error" => Kind::Timeout,
        _ if is_context_length(code.as_deref(), message.as_deref()) => Kind::ContextLength,
        "invalid_request_error" | "not_found_error" | "request_too_large" => Kind::InvalidRequest,
        _ => Kind::Server,
    };
    let mut err = ProviderError::new(provider, kind).with_code(code);
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

fn is_context_length(code: Option<&str>, message: Option<&str>) -> bool {
    if code == Some("context_length_exceeded") {
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
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// How long the response asks to wait: `retry-after-ms`, or `retry-after` in seconds or as
/// an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = http_date(value)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date(s: &str) -> Option<u64> {
    let mut parts = s.split_whitespace();
    let _weekday = parts.next()?;
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days)
        .ok()
        .map(|d| d * 86_400 + h * 3_600 + m * 60 + sec)
}

/// Token counts, `None` when both are absent.
pub(crate) fn usage(input: Option<u64>, output: Option<u64>) -> Option<Usage> {
    (input.is_some() || output.is_some()).then(|| Usage {
        input_tokens: input.unwrap_or_default(),
        output_tokens: output.unwrap_or_default(),
    })
}

/// The JSON arguments of a tool call as the model wrote them: parsed, `{}` when empty, or
/// kept as a string when they are not JSON (the tool router reports that to the model).
pub(crate) fn parse_arguments(raw: String) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(&raw).unwrap_or(Value::String(raw))
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
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Parses `chunk`, pushing the events it completes onto `out`.
    pub(crate) fn push(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        if self.skip_lf && !chunk.is_empty() {
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
            self.skip_lf = false;
        }
        while let Some(pos) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(&chunk[..pos]);
            self.process_line(&line, out);
            line.clear();
            self.line = line;
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
        self.line.extend_from_slice(chunk);
    }

    /// The body ended: an event whose lines all ended is pushed even without its blank line;
    /// a line cut mid-way is dropped (the caller sees no end marker and reports the stream
    /// as incomplete).
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        self.line.clear();
        self.process_line(&[], out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
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
            return;
        }
        if line[0] == b':' {
            return;
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
    }
}

/// Reads the SSE body of `resp`, handing each event to `on_event` until it says the stream
/// is done (`Ok(true)`). Returns whether it did; `false` means the body ended first.
pub(crate) async fn read_events(
    provider: &'static str,
    mut resp: reqwest::Response,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, ProviderError>,
) -> Result<bool, ProviderError> {
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    loop {
        let chunk = resp
            .chunk()
            .await
            .map_err(|e| transport_error(provider, e.into()))?;
        match &chunk {
            Some(bytes) => parser.push(bytes, &mut events),
            None => parser.finish(&mut events),
        }
        for event in events.drain(..) {
            if on_event(event)? {
                return Ok(true);
            }
        }
        if chunk.is_none() {
            return Ok(false);
        }
    }
}

/// The error for a stream that ended before its end marker.
pub(crate) fn incomplete(provider: &'static str, marker: &str) -> ProviderError {
    ProviderError::new(provider, Kind::Incomplete).with_message(format!(
        "the stream ended before {marker}; the answer is incomplete"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out);
        }
        p.finish(&mut out);
        out
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
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date("Sat, 29 Feb 2020 12:00:00 GMT"),
            Some(1_582_977_600)
        );
        assert_eq!(http_date("yesterday"), None);
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
}
