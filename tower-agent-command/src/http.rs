//! `http` handlers: the hook's input JSON is POSTed to a URL; the response is read as a
//! command's answer would be ([HTTP response handling](super#http-hooks)).
//!
//! The response body is read chunk by chunk and at most [`MAX_BODY`] bytes of it are kept: a
//! longer body (or a `Content-Length` over it) is a non-blocking error and is not read on.

use std::{sync::OnceLock, time::Duration};

use serde_json::{Map, Value};

use crate::reply::{Failure, Reply, Stdout};

/// The largest response body an `http` hook may answer: 1 MiB (1,048,576 bytes), as much as
/// a command hook's stdout. A longer body is a non-blocking error; reading stops there.
pub(crate) const MAX_BODY: usize = 1 << 20;

/// What an `http` handler says: where to POST, and which headers to send.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HttpHook {
    pub(crate) url: String,
    /// Header names and values, values still holding `$VAR` / `${VAR}` references.
    pub(crate) headers: Vec<(String, String)>,
    /// The environment variables header values may name; others become empty.
    pub(crate) allowed_env: Vec<String>,
}

/// The one client of every `http` hook (its connection pool is shared). Redirects are not
/// followed: a 3xx is a non-2xx answer.
fn client() -> Result<&'static reqwest::Client, Failure> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("cannot make an HTTP client: {e}"))
        })
        .as_ref()
        .map_err(|why| Failure::Io(why.clone()))
}

/// `$NAME` and `${NAME}` in `value` replaced by the variable's value if `NAME` is in
/// `allowed` (and set), else by nothing. A `$` that starts no name stays as it is.
pub(crate) fn interpolate(
    value: &str,
    allowed: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> String {
    let is_start = |c: char| c == '_' || c.is_ascii_alphabetic();
    let is_name = |c: char| c == '_' || c.is_ascii_alphanumeric();
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, next) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end)
                    if end > 0
                        && braced[..end].starts_with(is_start)
                        && braced[..end].chars().all(is_name) =>
                {
                    (&braced[..end], &braced[end + 1..])
                }
                _ => ("", after),
            }
        } else if after.starts_with(is_start) {
            let end = after.find(|c| !is_name(c)).unwrap_or(after.len());
            (&after[..end], &after[end..])
        } else {
            ("", after)
        };
        if name.is_empty() {
            out.push('$');
        } else if allowed.iter().any(|a| a == name) {
            out.push_str(&env(name).unwrap_or_default());
        }
        rest = next;
    }
    out.push_str(rest);
    out
}

/// POSTs `input` (JSON text) to the hook's URL and reads the answer, all within `timeout`.
/// `var` gives the value of a variable a header names (the environment a command handler
/// would get: `CLAUDE_PROJECT_DIR` is the project directory, a plugin's variables are its).
pub(crate) async fn post(
    hook: &HttpHook,
    input: &str,
    timeout: Duration,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Reply, Failure> {
    let client = client()?;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        reqwest::header::HeaderValue::from_static("application/json"),
    );
    for (name, value) in &hook.headers {
        let value = interpolate(value, &hook.allowed_env, &var);
        // Checked when loaded; the value may hold what a variable brought (a newline …).
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Failure::Io(format!("header `{name}` has an invalid name")))?;
        let value = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
            Failure::Io(format!(
                "header `{name}` is not a valid header value once its variables are replaced"
            ))
        })?;
        headers.insert(name, value);
    }
    let request = client
        .post(&hook.url)
        .headers(headers)
        .body(input.to_owned());
    let exchange = async {
        let mut resp = request.send().await.map_err(|e| {
            Failure::Io(format!(
                "request failed: {}",
                tower_agent_core::error::chain(&e)
            ))
        })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(Failure::Io(format!("answered HTTP {status}")));
        }
        if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| {
            Failure::Io(format!(
                "reading the answer failed: {}",
                tower_agent_core::error::chain(&e)
            ))
        })? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        answer(&body)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(Failure::Cancelled(timeout)),
    }
}

fn too_large() -> Failure {
    Failure::Io(format!(
        "answered a body over {MAX_BODY} bytes (1 MiB); it is ignored"
    ))
}

/// A 2xx body as a command's answer: empty is exit 0 with no output; a JSON object is exit 0
/// with that output; anything else is a non-blocking error.
pub(crate) fn answer(body: &[u8]) -> Result<Reply, Failure> {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(Reply {
            code: Some(0),
            stdout: Stdout::Text(String::new()),
            stderr: String::new(),
        });
    }
    match serde_json::from_str::<Map<String, Value>>(trimmed) {
        Ok(map) => Ok(Reply {
            code: Some(0),
            stdout: Stdout::Json(Value::Object(map)),
            stderr: String::new(),
        }),
        Err(_) => {
            let first: String = trimmed
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            Err(Failure::Io(format!(
                "answered a body that is not a JSON object: {first}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "OTHER" => Some("secret".into()),
            _ => None,
        }
    }

    #[test]
    fn only_allowed_variables_are_interpolated() {
        let allowed = vec!["TOKEN".to_owned(), "UNSET".to_owned()];
        let i = |v: &str| interpolate(v, &allowed, env);
        assert_eq!(i("Bearer $TOKEN"), "Bearer t0k");
        assert_eq!(i("Bearer ${TOKEN}!"), "Bearer t0k!");
        assert_eq!(i("$OTHER|${OTHER}"), "|");
        assert_eq!(i("$UNSET"), "");
        assert_eq!(i("$TOKEN_X"), "");
        assert_eq!(i("cost: $5 ${ $ ${1A} ${"), "cost: $5 ${ $ ${1A} ${");
        assert_eq!(i("é$TOKENé"), "ét0ké");
        assert_eq!(i("$"), "$");
    }

    mod fuzz {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any header value: no panic, and a variable that is not allowed never leaks.
            #[test]
            fn interpolation_never_leaks(value in r"(\$|\{|\}|[A-Z_]{1,6}|[a-z0-9 é]{0,4}){0,12}") {
                let allowed = vec!["TOKEN".to_owned()];
                let env = |name: &str| Some(format!("<{name}>"));
                let out = interpolate(&value, &allowed, env);
                let leaked = out.matches('<').count();
                prop_assert!(leaked <= value.matches("TOKEN").count(), "{value:?} -> {out:?}");
                prop_assert!(!out.contains('<') || out.contains("<TOKEN>"));
            }

            /// Any body: an answer or an error, no panic.
            #[test]
            fn bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..300)) {
                let _ = answer(&body);
            }
        }
    }

    #[test]
    fn bodies() {
        assert!(matches!(answer(b" \n").unwrap().stdout, Stdout::Text(t) if t.is_empty()));
        assert!(matches!(
            answer(br#"{"decision":"block"}"#).unwrap().stdout,
            Stdout::Json(Value::Object(_))
        ));
        for bad in [&b"ok"[..], b"[1]", b"\"x\"", b"{oops", b"\xff"] {
            assert!(answer(bad).is_err(), "{bad:?}");
        }
    }
}
