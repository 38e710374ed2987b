//! What a handler answered ([`Reply`]), or why it gave no answer ([`Failure`]); and where its
//! problems are reported ([`Report`]). Plain data every handler kind shares.

use std::time::Duration;

use serde_json::Value;
use tower_agent_core::context::RunContext;

/// What a handler answered.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The exit code (`None`: killed by a signal).
    pub(crate) code: Option<i32>,
    pub(crate) stdout: Stdout,
    pub(crate) stderr: String,
}

/// A handler's stdout: text from a process, or JSON from a persistent process.
#[derive(Debug)]
pub(crate) enum Stdout {
    Text(String),
    Json(Value),
}

/// Why a handler gave no answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// It ran past its timeout and was killed.
    Timeout(Duration),
    /// An `http`, `mcp_tool`, `prompt` or `agent` handler ran past its timeout and was
    /// cancelled.
    Cancelled(Duration),
    /// Its executable does not exist (or cannot be executed).
    Missing(String),
    /// It could not be started or talked to.
    Io(String),
    /// A persistent process exited (after its one restart) or answered garbage.
    Persistent(String),
    /// A WebAssembly hook trapped, reached a limit or answered garbage.
    #[cfg(feature = "wasm")]
    Guest(String),
}

impl Failure {
    pub(crate) fn describe(&self) -> String {
        match self {
            Failure::Timeout(t) => format!(
                "timed out after {}; its process group was killed",
                humantime(*t)
            ),
            Failure::Cancelled(t) => format!("timed out after {}; cancelled", humantime(*t)),
            Failure::Missing(why) => format!("cannot be run: {why}"),
            Failure::Io(why) | Failure::Persistent(why) => why.clone(),
            #[cfg(feature = "wasm")]
            Failure::Guest(why) => why.clone(),
        }
    }
}

/// Where a handler's problems are reported: the run (`ctx.warn`, which also logs), or only
/// the log (observe-only events, whose warnings would fire Notification hooks again).
#[derive(Clone, Copy)]
pub(crate) enum Report<'a> {
    Run(&'a RunContext),
    Log,
}

impl<'a> Report<'a> {
    /// The run, if reports go to one.
    pub(crate) fn ctx(self) -> Option<&'a RunContext> {
        match self {
            Report::Run(ctx) => Some(ctx),
            Report::Log => None,
        }
    }

    pub(crate) fn warn(self, message: String) {
        match self {
            Report::Run(ctx) => ctx.warn(message),
            Report::Log => tracing::warn!("{message}"),
        }
    }
}

/// `2s`, `1.5s`, `300ms`.
pub(crate) fn humantime(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(humantime(Duration::from_millis(1500)), "1.5s");
        assert_eq!(humantime(Duration::from_secs(2)), "2s");
        assert_eq!(humantime(Duration::from_millis(300)), "300ms");
    }
}
