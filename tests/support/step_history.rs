//! The thread histories of the agent-step benches (`benches/overhead.rs`) and of the
//! allocation count (`alloc_steps.rs`): one definition, so both measure the same step.

use serde_json::{Value, json};
use tower_agent::{
    message::{Message, ToolCall, ToolOutput},
    store::Thread,
};

/// The thread id the step benches run on.
pub(crate) const THREAD_ID: &str = "bench";

/// The arguments of every call of the echo tool.
pub(crate) fn echo_args() -> Value {
    json!({ "text": "hello" })
}

/// A thread of `n` messages: a system prompt, then turns of user question, assistant tool call,
/// tool result and assistant answer.
pub(crate) fn history(n: usize) -> Thread {
    let mut thread = Thread::new(THREAD_ID);
    thread.messages.push(Message::system(
        "You are a helpful assistant. Use the tools.",
    ));
    let mut i = 0;
    while thread.messages.len() < n {
        let id = format!("call_h{i}");
        let msg = match i % 4 {
            0 => Message::user(format!("Question {i}: what does the echo tool say?")),
            1 => Message::assistant("").with_tool_calls(vec![ToolCall::new(
                &id,
                "echo",
                echo_args(),
            )]),
            2 => Message::from(ToolOutput::text(&id, "hello")),
            _ => Message::assistant(format!("The echo tool says hello ({i}).")),
        };
        thread.messages.push(msg);
        i += 1;
    }
    thread
}
