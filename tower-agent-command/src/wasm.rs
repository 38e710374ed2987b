//! A `wasm` handler's call: the component's answer as a command hook's reply.

use std::time::Duration;

use serde_json::Value;

use crate::reply::{Failure, Reply, Stdout};
use tower_agent_wasm::{WasmAnswer, WasmHook};

/// Calls `hook` with `input` within `timeout`: `ok` is exit 0 (its JSON the stdout), `err`
/// exit 2 (its text the stderr); a trap, a limit reached, garbage or the timeout is a failure.
pub(crate) async fn call(
    hook: &WasmHook,
    input: &str,
    timeout: Duration,
) -> Result<Reply, Failure> {
    let reply = |code, stdout, stderr| Reply {
        code: Some(code),
        stdout,
        stderr,
    };
    match tokio::time::timeout(timeout, hook.call(input)).await {
        Err(_) => Err(Failure::Cancelled(timeout)),
        Ok(Err(e)) => Err(Failure::Guest(e.to_string())),
        Ok(Ok(WasmAnswer::Nothing)) => Ok(reply(0, Stdout::Text(String::new()), String::new())),
        Ok(Ok(WasmAnswer::Json(map))) => {
            Ok(reply(0, Stdout::Json(Value::Object(map)), String::new()))
        }
        Ok(Ok(WasmAnswer::Block(reason))) => Ok(reply(2, Stdout::Text(String::new()), reason)),
        // `WasmAnswer` is `#[non_exhaustive]`: an answer of a later tower-agent-wasm that
        // this version cannot read is a failure, never a silent allow.
        Ok(Ok(other)) => Err(Failure::Guest(format!(
            "an answer not understood: {other:?}"
        ))),
    }
}
