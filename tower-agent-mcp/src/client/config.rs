//! Server configuration: Claude Code's `.mcp.json` format and the builder's types.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use serde_json::{Map, Value};

/// The most bytes of a configuration file read by [`McpServers::from_file`](super::McpServers::from_file).
pub const MAX_CONFIG_FILE: u64 = 4 << 20;

/// How to reach one MCP server.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerConfig {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio(StdioServer),
    /// A server over streamable HTTP.
    Http(HttpServer),
}

/// A server run as a child process (`"type": "stdio"`, the default in `.mcp.json`).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioServer {
    /// The program (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the environment it inherits from this process.
    pub env: BTreeMap<String, String>,
    /// Its working directory (this process's when `None`).
    pub cwd: Option<PathBuf>,
}

impl StdioServer {
    /// A server started as `command`.
    pub fn new(command: impl Into<String>) -> Self {
        StdioServer {
            command: command.into(),
            ..Self::default()
        }
    }

    /// With one more argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// With more arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// With one more environment variable.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// In that working directory.
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
}

/// A server over streamable HTTP (`"type": "http"`).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpServer {
    /// The MCP endpoint.
    pub url: String,
    /// Headers sent with every request (an `Authorization` header included).
    pub headers: BTreeMap<String, String>,
}

impl HttpServer {
    /// A server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        HttpServer {
            url: url.into(),
            headers: BTreeMap::new(),
        }
    }

    /// With one more header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// With `Authorization: Bearer <token>`.
    #[must_use]
    pub fn bearer(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.header("Authorization", value)
    }
}

// Debug without header or environment values: they often hold secrets.
impl fmt::Debug for StdioServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioServer")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .finish()
    }
}

impl fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpServer")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerConfig::Stdio(s) => s.fmt(f),
            ServerConfig::Http(h) => h.fmt(f),
        }
    }
}

impl From<StdioServer> for ServerConfig {
    fn from(s: StdioServer) -> Self {
        ServerConfig::Stdio(s)
    }
}

impl From<HttpServer> for ServerConfig {
    fn from(h: HttpServer) -> Self {
        ServerConfig::Http(h)
    }
}

/// A configuration that cannot be used: what is wrong, naming the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    server: Option<String>,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(server: Option<&str>, message: impl Into<String>) -> Self {
        ConfigError {
            server: server.map(str::to_owned),
            message: message.into(),
        }
    }

    /// The server whose entry is wrong (`None`: the file or document as a whole).
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.server {
            Some(name) => write!(f, "MCP server `{name}`: {}", self.message),
            None => write!(f, "MCP configuration: {}", self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Expands `${VAR}` and `${VAR:-default}` in `text` with `lookup`, as Claude Code does in
/// `.mcp.json`: an unset variable without a default is an error naming it. `$` not followed
/// by `{` is kept as it is.
pub(crate) fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated `${{` in `{text}`"));
        };
        let inner = &after[..end];
        let (name, default) = match inner.find(":-") {
            Some(i) => (&inner[..i], Some(&inner[i + 2..])),
            None => (inner, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`${{{inner}}}` is not a variable reference"));
        }
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "environment variable `{name}` is not set and has no default (`${{{name}:-default}}`)"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Parses the servers of a `.mcp.json` document or a settings `mcpServers` value: either
/// `{"mcpServers": {name: entry}}` or the `{name: entry}` map itself.
pub(crate) fn parse(
    value: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, ServerConfig)>, ConfigError> {
    let Some(obj) = value.as_object() else {
        return Err(ConfigError::new(None, "expected a JSON object"));
    };
    let servers = match obj.get("mcpServers") {
        Some(Value::Object(map)) => map,
        Some(_) => return Err(ConfigError::new(None, "`mcpServers` is not an object")),
        None => obj,
    };
    let mut out = Vec::with_capacity(servers.len());
    for (name, entry) in servers {
        out.push((name.clone(), parse_entry(name, entry, lookup)?));
    }
    Ok(out)
}

fn parse_entry(
    name: &str,
    entry: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ConfigError> {
    let err = |m: String| ConfigError::new(Some(name), m);
    let Some(entry) = entry.as_object() else {
        return Err(err("the entry is not an object".into()));
    };
    let string = |key: &str| -> Result<Option<String>, ConfigError> {
        match entry.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => expand(s, lookup)
                .map(Some)
                .map_err(|m| err(format!("`{key}`: {m}"))),
            Some(_) => Err(err(format!("`{key}` is not a string"))),
        }
    };
    let map = |key: &str| -> Result<BTreeMap<String, String>, ConfigError> {
        match entry.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => string_map(m)
                .map_err(|m| err(format!("`{key}`: {m}")))?
                .into_iter()
                .map(|(k, v)| {
                    expand(&v, lookup)
                        .map(|v| (k.clone(), v))
                        .map_err(|m| err(format!("`{key}.{k}`: {m}")))
                })
                .collect(),
            Some(_) => Err(err(format!("`{key}` is not an object"))),
        }
    };
    let kind = match entry.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.as_str()),
        Some(_) => return Err(err("`type` is not a string".into())),
    };
    match kind {
        None | Some("stdio") => {
            let Some(command) = string("command")? else {
                return Err(err(match entry.get("url") {
                    Some(_) => "has a `url` but no `\"type\": \"http\"`".into(),
                    None => "a stdio server needs a `command`".into(),
                }));
            };
            let args = match entry.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, a)| match a {
                        Value::String(s) => {
                            expand(s, lookup).map_err(|m| err(format!("`args[{i}]`: {m}")))
                        }
                        _ => Err(err(format!("`args[{i}]` is not a string"))),
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(err("`args` is not an array".into())),
            };
            Ok(ServerConfig::Stdio(StdioServer {
                command,
                args,
                env: map("env")?,
                cwd: string("cwd")?.map(PathBuf::from),
            }))
        }
        Some("http") | Some("streamable-http") | Some("streamableHttp") => {
            let Some(url) = string("url")? else {
                return Err(err("an http server needs a `url`".into()));
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(err(format!("`url` `{url}` is not an http(s) URL")));
            }
            Ok(ServerConfig::Http(HttpServer {
                url,
                headers: map("headers")?,
            }))
        }
        Some("sse") => Err(err(
            "`\"type\": \"sse\"` (the deprecated HTTP+SSE transport) is not supported; use `\"type\": \"http\"` (streamable HTTP)".into(),
        )),
        Some(other) => Err(err(format!(
            "unknown server type `{other}` (expected `stdio` or `http`)"
        ))),
    }
}

fn string_map(m: &Map<String, Value>) -> Result<BTreeMap<String, String>, String> {
    m.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            _ => Err(format!("`{k}` is not a string")),
        })
        .collect()
}

/// Parses with this process's environment.
pub(crate) fn parse_env(value: &Value) -> Result<Vec<(String, ServerConfig)>, ConfigError> {
    parse(value, &env_lookup)
}

/// Reads and parses a file (at most [`MAX_CONFIG_FILE`] bytes).
pub(crate) fn read_file(path: &Path) -> Result<Vec<(String, ServerConfig)>, ConfigError> {
    use std::io::Read;
    let fail = |m: String| ConfigError::new(None, format!("{}: {m}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut text = Vec::new();
    file.take(MAX_CONFIG_FILE + 1)
        .read_to_end(&mut text)
        .map_err(|e| fail(e.to_string()))?;
    if text.len() as u64 > MAX_CONFIG_FILE {
        return Err(fail(format!("larger than {MAX_CONFIG_FILE} bytes")));
    }
    let value: Value = serde_json::from_slice(&text).map_err(|e| fail(e.to_string()))?;
    parse_env(&value).map_err(|e| match e.server {
        Some(_) => e,
        None => fail(e.message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "TOKEN" => Some("s3cret".into()),
            _ => None,
        }
    }

    #[test]
    fn expansion_rules() {
        assert_eq!(expand("${HOME}/x", &vars).unwrap(), "/home/u/x");
        assert_eq!(expand("a${NOPE:-dflt}b", &vars).unwrap(), "adfltb");
        assert_eq!(expand("${HOME:-x}", &vars).unwrap(), "/home/u");
        assert_eq!(expand("${NOPE:-}", &vars).unwrap(), "");
        assert_eq!(expand("$HOME ${TOKEN}", &vars).unwrap(), "$HOME s3cret");
        let e = expand("${NOPE}", &vars).unwrap_err();
        assert!(e.contains("`NOPE` is not set"), "{e}");
        assert!(
            expand("${HOME", &vars)
                .unwrap_err()
                .contains("unterminated")
        );
        assert!(expand("${}", &vars).is_err());
        assert!(expand("${A B}", &vars).is_err());
    }

    #[test]
    fn claude_code_format() {
        let doc = json!({"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "server", "${HOME}"], "env": {"K": "${TOKEN}"}},
            "typed": {"type": "stdio", "command": "x"},
            "api": {"type": "http", "url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        }});
        let servers = parse(&doc, &vars).unwrap();
        assert_eq!(servers.len(), 3);
        let get = |n: &str| servers.iter().find(|(k, _)| k == n).unwrap().1.clone();
        assert_eq!(
            get("fs"),
            ServerConfig::Stdio(
                StdioServer::new("npx")
                    .args(["-y", "server", "/home/u"])
                    .env("K", "s3cret")
            )
        );
        assert_eq!(get("typed"), ServerConfig::Stdio(StdioServer::new("x")));
        assert_eq!(
            get("api"),
            ServerConfig::Http(HttpServer::new("https://api.example/mcp").bearer("s3cret"))
        );
        // The map itself (settings' `mcpServers` value) is accepted too.
        let inner = parse(&doc["mcpServers"], &vars).unwrap();
        assert_eq!(inner.len(), 3);
    }

    #[test]
    fn errors_name_the_server() {
        let cases = [
            (
                json!({"a": {"type": "websocket", "url": "ws://x"}}),
                "unknown server type `websocket`",
            ),
            (
                json!({"a": {"type": "sse", "url": "http://x"}}),
                "not supported",
            ),
            (json!({"a": {"args": []}}), "needs a `command`"),
            (json!({"a": {"url": "http://x"}}), "no `\"type\": \"http\"`"),
            (json!({"a": {"type": "http"}}), "needs a `url`"),
            (
                json!({"a": {"type": "http", "url": "ftp://x"}}),
                "not an http(s) URL",
            ),
            (
                json!({"a": {"command": "x", "args": [1]}}),
                "`args[0]` is not a string",
            ),
            (
                json!({"a": {"command": "x", "env": {"K": "${NOPE}"}}}),
                "`env.K`: environment variable `NOPE`",
            ),
            (
                json!({"a": {"type": "http", "url": "http://x", "headers": {"H": 3}}}),
                "`headers`: `H` is not a string",
            ),
            (json!({"a": 3}), "not an object"),
        ];
        for (doc, want) in cases {
            let e = parse(&doc, &vars).unwrap_err();
            assert_eq!(e.server(), Some("a"));
            let text = e.to_string();
            assert!(text.starts_with("MCP server `a`: "), "{text}");
            assert!(text.contains(want), "{text} should contain {want}");
        }
        assert!(parse(&json!([]), &vars).is_err());
        assert!(parse(&json!({"mcpServers": []}), &vars).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any text: no panic; text without `${` is unchanged; an expansion result never
        /// holds a reference it did not resolve.
        #[test]
        fn expansion_never_panics(text in "[ -~]{0,40}", plain in "[a-zA-Z0-9 /:_.-]{0,20}") {
            let _ = expand(&text, &vars);
            proptest::prop_assert_eq!(expand(&plain, &vars).unwrap(), plain.clone());
            let wrapped = format!("{plain}${{HOME}}{plain}");
            proptest::prop_assert_eq!(expand(&wrapped, &vars).unwrap(), format!("{plain}/home/u{plain}"));
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let h = HttpServer::new("http://x").bearer("s3cret");
        assert!(!format!("{h:?}").contains("s3cret"));
        let s = StdioServer::new("x").env("K", "s3cret");
        assert!(!format!("{s:?}").contains("s3cret"));
    }
}
