//! [`EvictLayer`]: cut huge tool outputs to their head and tail.
//!
//! An output over 80,000 characters becomes its first 2,000 characters, a marker
//! `\n\n... (truncated N characters) ...\n\n`, and its last 2,000 characters, cut on character
//! boundaries (N counts the characters left out). The tools `ls`, `glob`, `grep`, `read_file`,
//! `edit_file` and `write_file` are never evicted: their outputs are already bounded, or the
//! model asked for exactly that text. All of these are defaults you can change.
//!
//! With [`spill_to(dir)`](EvictLayer::spill_to), the full output is first written to a file
//! under `dir` and the marker names it, so the agent can read it back in pieces:
//! `... (truncated N characters; full output saved to /dir/call_1.txt) ...`.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent_core::{BoxError, context::RunContext, message::ToolCall};
//! use tower_agent_layers::evict::EvictLayer;
//! use tower_agent_core::tool::{ToolRequest, ToolRouter, tool_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! let router = ToolRouter::new().tool(tool_fn("dump", "A lot of output", json!({}), |_, _| async {
//!     Ok("x".repeat(100_000))
//! }));
//! let mut tools = ServiceBuilder::new().layer(EvictLayer::new()).service(router);
//!
//! let req = ToolRequest::new(ToolCall::new("c1", "dump", json!({})), RunContext::new());
//! let out = tools.ready().await?.call(req).await?;
//! assert_eq!(out.content.chars().count(), 2_000 + 2_000 + "\n\n... (truncated 96000 characters) ...\n\n".len());
//! assert!(out.content.contains("... (truncated 96000 characters) ..."));
//! # Ok(())
//! # }
//! ```

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    task::{Context, Poll},
};

use serde_json::json;
use tower::{Layer, Service};

use crate::matcher::ToolMatcher;
use tower_agent_core::{error::BoxError, message::ToolOutput, tool::ToolRequest};

pub mod future;
mod layer;

pub use self::layer::EvictLayer;

/// Default: outputs over this many characters are evicted.
pub const DEFAULT_MAX_CHARS: usize = 80_000;
/// Default: characters kept from the start and from the end.
pub const DEFAULT_HEAD_TAIL: usize = 2_000;
/// Default: tools whose outputs are never evicted.
pub const DEFAULT_EXCLUDED: [&str; 6] =
    ["ls", "glob", "grep", "read_file", "edit_file", "write_file"];

#[derive(Debug)]
struct Config {
    max_chars: usize,
    head: usize,
    tail: usize,
    excluded: ToolMatcher,
    spill_dir: Option<PathBuf>,
}

/// The service of [`EvictLayer`].
#[derive(Debug, Clone)]
pub struct Evict<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Evict<S> {
    /// Wraps `inner` with the default settings.
    pub fn new(inner: S) -> Self {
        EvictLayer::new().layer(inner)
    }

    inner_service_accessors!();
}

impl<S> Service<ToolRequest> for Evict<S>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Into<BoxError>,
{
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let config = (!self.config.excluded.matches(&req.call)).then(|| Arc::clone(&self.config));
        future::ResponseFuture::new(self.inner.call(req), config)
    }
}

/// The text cut to `head` chars + marker + `tail` chars, if it has more than `max_chars`
/// characters; `note` goes into the marker (`; {note}`).
///
/// Linear in the text's length (one pass to count characters; the cut points are found from
/// both ends).
pub fn truncate_middle(
    text: &str,
    max_chars: usize,
    head: usize,
    tail: usize,
    note: Option<&str>,
) -> Option<String> {
    if text.len() <= max_chars {
        return None; // bytes >= chars
    }
    let chars = text.chars().count();
    if chars <= max_chars {
        return None;
    }
    let head = head.min(chars);
    let tail = tail.min(chars - head);
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = if tail == 0 {
        text.len()
    } else {
        text.char_indices()
            .rev()
            .nth(tail - 1)
            .map_or(head_end, |(i, _)| i)
    };
    let cut = chars - head - tail;
    let marker = match note {
        Some(note) => format!("\n\n... (truncated {cut} characters; {note}) ...\n\n"),
        None => format!("\n\n... (truncated {cut} characters) ...\n\n"),
    };
    let mut out = String::with_capacity(head_end + marker.len() + (text.len() - tail_start));
    out.push_str(&text[..head_end]);
    out.push_str(&marker);
    out.push_str(&text[tail_start..]);
    Some(out)
}

fn spill_name(call_id: &str) -> String {
    let safe: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{}-{}.txt", safe, tower_agent_core::context::new_id("out"))
}

async fn spill(dir: &Path, output: &ToolOutput) -> std::io::Result<PathBuf> {
    tokio::fs::create_dir_all(dir).await?;
    let path = dir.join(spill_name(&output.call_id));
    tokio::fs::write(&path, output.content.as_bytes()).await?;
    Ok(path)
}

fn evict(config: &Config, mut output: ToolOutput, note: Option<&str>) -> ToolOutput {
    let original = output.content.len();
    if let Some(cut) = truncate_middle(
        &output.content,
        config.max_chars,
        config.head,
        config.tail,
        note,
    ) {
        output.content = cut;
        output
            .metadata
            .insert("evicted_bytes".into(), json!(original));
    }
    output
}

fn needs_eviction(config: &Config, output: &ToolOutput) -> bool {
    output.content.len() > config.max_chars && output.content.chars().count() > config.max_chars
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;
    use tower_agent_core::{
        context::RunContext, message::ToolCall, tool::ToolRouter, tool::tool_fn,
    };

    fn marker(n: usize) -> String {
        format!("\n\n... (truncated {n} characters) ...\n\n")
    }

    #[test]
    fn threshold_is_exclusive() {
        let at = "a".repeat(80_000);
        assert_eq!(truncate_middle(&at, 80_000, 2_000, 2_000, None), None);
        let over = "a".repeat(80_001);
        let cut = truncate_middle(&over, 80_000, 2_000, 2_000, None).unwrap();
        assert_eq!(
            cut,
            format!("{}{}{}", "a".repeat(2000), marker(76_001), "a".repeat(2000))
        );
    }

    #[test]
    fn multibyte_cut_on_char_boundaries() {
        // 80,001 characters, 3 bytes each: byte length is far over, char count just over.
        let text: String = (0..80_001)
            .map(|i| if i % 2 == 0 { '€' } else { 'ß' })
            .collect();
        let cut = truncate_middle(&text, 80_000, 2_000, 2_000, None).unwrap();
        let head: String = text.chars().take(2_000).collect();
        let tail: String = text.chars().skip(80_001 - 2_000).collect();
        assert_eq!(cut, format!("{head}{}{tail}", marker(76_001)));
        // Multi-byte text under the char threshold is untouched even though its bytes are over.
        let under: String = "€".repeat(80_000);
        assert!(under.len() > 80_000);
        assert_eq!(truncate_middle(&under, 80_000, 2_000, 2_000, None), None);
    }

    #[test]
    fn head_and_tail_larger_than_text() {
        let cut = truncate_middle("abcdef", 3, 10, 10, None).unwrap();
        assert_eq!(cut, format!("abcdef{}", marker(0)));
        let cut = truncate_middle("abcdef", 3, 1, 0, None).unwrap();
        assert_eq!(cut, format!("a{}", marker(5)));
    }

    fn router() -> ToolRouter {
        let big = |name: &'static str| {
            tool_fn(name, "big", json!({}), |_, _| async {
                Ok::<_, BoxError>("y".repeat(90_000))
            })
        };
        ToolRouter::new()
            .tool(big("execute"))
            .tool(big("read_file"))
    }

    async fn call(svc: Evict<ToolRouter>, name: &str) -> ToolOutput {
        svc.oneshot(ToolRequest::new(
            ToolCall::new("call/1", name, json!({})),
            RunContext::new(),
        ))
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn excluded_tools_pass_and_others_are_cut() {
        let svc = EvictLayer::new().layer(router());
        assert_eq!(call(svc.clone(), "read_file").await.content.len(), 90_000);
        let out = call(svc, "execute").await;
        assert!(out.content.contains(&marker(86_000)));
        assert_eq!(out.metadata["evicted_bytes"], json!(90_000));
        let all = EvictLayer::new()
            .exclude(ToolMatcher::all().not())
            .layer(router());
        assert!(call(all, "read_file").await.content.len() < 5_000);
    }

    #[tokio::test]
    async fn spill_writes_full_output_and_names_it() {
        let dir = std::env::temp_dir().join(tower_agent_core::context::new_id("evict-test"));
        let svc = EvictLayer::new().spill_to(&dir).layer(router());
        let out = call(svc, "execute").await;
        let path = out.metadata["spilled_to"].as_str().unwrap().to_owned();
        assert!(out.content.contains(&format!(
            "... (truncated 86000 characters; full output saved to {path}) ..."
        )));
        assert!(path.contains("call_1-"), "{path}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "y".repeat(90_000));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn spill_failure_still_truncates() {
        let file = std::env::temp_dir().join(tower_agent_core::context::new_id("evict-file"));
        std::fs::write(&file, "not a dir").unwrap();
        let svc = EvictLayer::new().spill_to(&file).layer(router());
        let out = call(svc, "execute").await;
        assert!(
            out.content.contains("could not save the full output"),
            "{}",
            &out.content[1990..2200]
        );
        assert!(out.content.len() < 5_000);
        std::fs::remove_file(file).unwrap();
    }
}
