//! One handler run, whatever its kind, and what its answer means ([`Verdict`]).
//!
//! - [`call`] (here) runs a handler of any type once, within its timeout (a process handler
//!   with `crate::spawn`, the other kinds with their own modules);
//! - `verdict`: what an answer means for an event ([`interpret`] into a [`Verdict`]);
//! - `answer`: the protocol's JSON fields of an answer, read into the verdict;
//! - `words`: what the model is told of an answer, in Claude Code's words.

mod answer;
mod verdict;
mod words;

#[cfg(feature = "http-hooks")]
use std::path::Path;

#[cfg(feature = "mcp")]
pub(crate) use self::verdict::Elicit;
pub(crate) use self::{
    verdict::{Permission, Refusal, Verdict, background_done, interpret},
    words::claude_words,
};
use crate::{
    exec::Exec,
    handler::Handler,
    reply::{Failure, Reply, Report},
    spawn::{Dirs, run},
};
use tower_agent_layers::hooks::HookEvent;

/// Runs `handler` once for `event` with `input` (its JSON text), within its timeout: the
/// handler's `timeout`, else the default of its type (`prompt` 30 s, `agent` 60 s) or of the
/// event (600 s; 30 s for UserPromptSubmit).
pub(crate) async fn call(
    event: HookEvent,
    handler: &Handler,
    dirs: Dirs<'_>,
    input: &str,
    report: Report<'_>,
    env: &[(String, String)],
) -> Result<Reply, Failure> {
    let timeout = handler.timeout.unwrap_or_else(|| match &handler.exec {
        Exec::Model(hook) => crate::prompt::default_timeout(hook.kind),
        _ => event.default_timeout(),
    });
    match (&handler.exec, &handler.persistent) {
        (_, Some(process)) => process.call(input, timeout, report).await,
        #[cfg(feature = "http-hooks")]
        (Exec::Http(hook), None) => {
            let var = |name: &str| variable(name, dirs.project, env);
            crate::http::post(hook, input, timeout, var).await
        }
        #[cfg(feature = "mcp")]
        (Exec::Mcp(hook), None) => match tokio::time::timeout(timeout, hook.call(input)).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Cancelled(timeout)),
        },
        #[cfg(feature = "wasm")]
        (Exec::Wasm(hook), None) => crate::wasm::call(hook, input, timeout).await,
        (Exec::Model(hook), None) => {
            let verdict = hook.evaluate(event, input, dirs.project, report.ctx());
            match tokio::time::timeout(timeout, verdict).await {
                Ok(result) => result,
                Err(_) => Err(Failure::Cancelled(timeout)),
            }
        }
        (exec, None) => run(exec, dirs, input.as_bytes(), timeout, env).await,
    }
}

/// The value of the variable `name` as a process handler would see it: its environment
/// (`env`: the session's, then the handler's own; the last definition wins, and it is set
/// after the project-dir variables, as in [`run`]), else the project-dir variables, else this
/// process's environment.
#[cfg(feature = "http-hooks")]
fn variable(name: &str, project: &Path, env: &[(String, String)]) -> Option<String> {
    if let Some((_, value)) = env.iter().rev().find(|(k, _)| k == name) {
        return Some(value.clone());
    }
    if matches!(name, "CLAUDE_PROJECT_DIR" | "TOWER_AGENT_PROJECT_DIR") {
        return Some(project.to_string_lossy().into_owned());
    }
    std::env::var(name).ok()
}
