//! What the model is told of a Claude Code hook's answer, in Claude Code's words (measured
//! against 2.1.328: `tests/reference`, the vectors' model requests): each context says the
//! event — and the tool, for a tool's events — it came from.
//!
//! | answer | the model's text |
//! |---|---|
//! | `additionalContext` | `<Event>[:<tool>] hook additional context: <text>` |
//! | plain stdout (UserPromptSubmit, SessionStart) | `UserPromptSubmit hook success: <text>`, `SessionStart:<source> hook success: <text>` |
//! | a PostToolUse block (exit 2, `decision: "block"`) | `PostToolUse:<tool> hook blocking error from command: "<command>": <reason>` |
//! | a Stop / SubagentStop `decision: "block"` | the reason as a user message, then a system message `Stop hook blocking error from command: "<command>": <reason>` (exit 2: the reason alone) |

use super::Verdict;
use crate::handler::Handler;
use tower_agent_layers::hooks::HookEvent;

/// Rewrites `verdict`'s contexts (and a PostToolUse block) in Claude Code's words, for the
/// events whose wording is measured; `subject` is the tool's name or SessionStart's source.
pub(crate) fn claude_words(
    event: HookEvent,
    subject: Option<&str>,
    handler: &Handler,
    verdict: &mut Verdict,
) {
    if matches!(event, HookEvent::Stop | HookEvent::SubagentStop)
        && !verdict.exit_2
        && let Some(reason) = &verdict.block
    {
        let command = &handler.label;
        verdict.block_context = Some(format!(
            "{event} hook blocking error from command: \"{command}\": {reason}"
        ));
    }
    let subject = subject.unwrap_or_default();
    let (label, success) = match event {
        HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::PostToolUseFailure => {
            let label = format!("{event}:{subject}");
            (label.clone(), label)
        }
        HookEvent::SessionStart => (event.to_string(), format!("{event}:{subject}")),
        HookEvent::UserPromptSubmit | HookEvent::Stop | HookEvent::SubagentStart => {
            (event.to_string(), event.to_string())
        }
        _ => return,
    };
    for context in &mut verdict.contexts {
        *context = if verdict.plain_stdout {
            format!("{success} hook success: {context}")
        } else {
            format!("{label} hook additional context: {context}")
        };
    }
    if event == HookEvent::PostToolUse
        && let Some(reason) = &mut verdict.block
    {
        let command = &handler.label;
        *reason = format!("{label} hook blocking error from command: \"{command}\": {reason}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(command: &str) -> Handler {
        Handler::shell_for_test(command)
    }

    fn verdict(contexts: &[&str], plain: bool) -> Verdict {
        Verdict {
            contexts: contexts.iter().map(|c| (*c).to_owned()).collect(),
            plain_stdout: plain,
            ..Verdict::default()
        }
    }

    /// Each measured wording (`tests/reference`: additional_context, plain_stdout,
    /// additional_context_more_events, additional_context_stop, post_tool_use_block,
    /// subagent_stop_block).
    #[test]
    fn contexts_say_where_they_came_from() {
        let handler = shell("sh \"$CLAUDE_PROJECT_DIR/hook.sh\" block");
        let cases = [
            (
                HookEvent::UserPromptSubmit,
                None,
                false,
                "UserPromptSubmit hook additional context: c",
            ),
            (
                HookEvent::UserPromptSubmit,
                None,
                true,
                "UserPromptSubmit hook success: c",
            ),
            (
                HookEvent::SessionStart,
                Some("startup"),
                false,
                "SessionStart hook additional context: c",
            ),
            (
                HookEvent::SessionStart,
                Some("startup"),
                true,
                "SessionStart:startup hook success: c",
            ),
            (
                HookEvent::PreToolUse,
                Some("Bash"),
                false,
                "PreToolUse:Bash hook additional context: c",
            ),
            (
                HookEvent::PostToolUse,
                Some("Bash"),
                false,
                "PostToolUse:Bash hook additional context: c",
            ),
            (
                HookEvent::PostToolUseFailure,
                Some("Bash"),
                false,
                "PostToolUseFailure:Bash hook additional context: c",
            ),
            (
                HookEvent::Stop,
                None,
                false,
                "Stop hook additional context: c",
            ),
            (
                HookEvent::SubagentStart,
                Some("general-purpose"),
                false,
                "SubagentStart hook additional context: c",
            ),
            // Not measured: as the hook gave it.
            (HookEvent::PostToolBatch, None, false, "c"),
        ];
        for (event, subject, plain, want) in cases {
            let mut v = verdict(&["c"], plain);
            claude_words(event, subject, &handler, &mut v);
            assert_eq!(v.contexts, [want], "{event}");
        }
        let mut v = Verdict {
            block: Some("no".into()),
            ..Verdict::default()
        };
        claude_words(HookEvent::PostToolUse, Some("Bash"), &handler, &mut v);
        assert_eq!(
            v.block.as_deref(),
            Some(
                "PostToolUse:Bash hook blocking error from command: \"sh \"$CLAUDE_PROJECT_DIR/hook.sh\" block\": no"
            )
        );
    }

    /// A Stop / SubagentStop `decision: "block"`: the reason stays the user's text, and a
    /// system message names the command (stop_continues_once, subagent_stop_block); an exit 2
    /// gives none (exit_2_stop); other events' blocks none.
    #[test]
    fn a_json_stop_block_names_its_command() {
        let handler = shell("sh \"$CLAUDE_PROJECT_DIR/hook.sh\" again");
        for event in HookEvent::ALL {
            for exit_2 in [false, true] {
                let mut v = Verdict {
                    block: Some("go on".into()),
                    exit_2,
                    ..Verdict::default()
                };
                claude_words(event, None, &handler, &mut v);
                let stop = matches!(event, HookEvent::Stop | HookEvent::SubagentStop);
                let want = (stop && !exit_2).then(|| {
                    format!(
                        "{event} hook blocking error from command: \"sh \"$CLAUDE_PROJECT_DIR/hook.sh\" again\": go on"
                    )
                });
                assert_eq!(v.block_context, want, "{event}, exit 2: {exit_2}");
                if stop {
                    assert_eq!(v.block.as_deref(), Some("go on"));
                }
            }
        }
    }
}
