//! The callback hook registry (`layers::hooks`): every decision of every event, the merge
//! rules, the order (priorities, `before`/`after`, cycles), matchers, approval, the stop cap,
//! SubagentStop, sync and async callbacks, and the tool layer used on its own.

use crate::support;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_agent::{
    Abort, Agent, AgentRequest, AgentResponse, BoxError,
    agent::{AgentEvent, Outcome},
    context::RunContext,
    layers::{
        hooks::{
            ApprovalDecision, ApprovalRequest, BeforeModel, HookSet, Hooks, Permission,
            PermissionRequest, PostToolUse, PostToolUseFailure, PreToolUse, SessionStart, Stop,
            StopInput, SubagentStart, ToolFailure, UserPrompt,
        },
        matcher::ToolMatcher,
    },
    message::{Message, Role, ToolCall, ToolOutput},
    model::{ModelRequest, ModelResponse, ScriptedModel},
    store::MemoryStore,
    tool::{Tool, ToolRequest, ToolRouter, tool_fn},
};

use support::{
    Log, any_object, assert_history_valid, context_after_results, last_tool_message, tool_messages,
};

// ===== helpers =====

/// A tool that answers its arguments as JSON text and logs `"<name> ran <args>"`.
fn echo(name: &'static str, log: &Log) -> impl Tool {
    let log = log.clone();
    tool_fn(
        name,
        "echoes its arguments",
        any_object(),
        move |args, _| {
            log.push(format!("{name} ran {args}"));
            async move { Ok::<_, BoxError>(args) }
        },
    )
}

/// A PreToolUse hook that logs `"<tag> <tool> <args>"` and answers `decision`.
fn pre(
    log: &Log,
    tag: &'static str,
    decision: PreToolUse,
) -> impl Fn(Arc<ToolCall>, RunContext) -> PreToolUse + Send + Sync + 'static {
    let log = log.clone();
    move |call, _| {
        log.push(format!("{tag} {} {}", call.name, call.arguments));
        decision.clone()
    }
}

/// A counter shared with a hook.
#[derive(Clone, Default)]
struct Count(Arc<AtomicUsize>);

impl Count {
    fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// The texts of the user messages of `resp`.
fn user_texts(resp: &AgentResponse) -> Vec<String> {
    resp.messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.text().into_owned())
        .collect()
}

fn system_text(req: &ModelRequest) -> String {
    req.system()
        .map(|m| m.text().into_owned())
        .unwrap_or_default()
}

/// An agent over `model` with the tools `bash`, `write` and `ls` (all echo) and `hooks`.
fn agent_with(model: &ScriptedModel, log: &Log, hooks: HookSet) -> Agent {
    Agent::builder()
        .model(model.clone())
        .tool(echo("bash", log))
        .tool(echo("write", log))
        .tool(echo("ls", log))
        .hooks(hooks)
        .build()
}

fn one_call(name: &str, args: Value) -> ScriptedModel {
    ScriptedModel::new()
        .tool_call(name, args)
        .text("done")
        .recording()
}

// ===== PreToolUse =====

#[tokio::test(flavor = "current_thread")]
async fn pre_tool_use_continue_and_allow_let_the_call_run() {
    for decision in [PreToolUse::Continue, PreToolUse::Allow] {
        let log = Log::new();
        let hooks = Hooks::new()
            .before_tool_use("bash", pre(&log, "hook", decision.clone()))
            .compile()
            .unwrap();
        let model = one_call("bash", json!({ "command": "ls" }));
        let resp = agent_with(&model, &log, hooks).run("go").await.unwrap();

        assert_eq!(resp.outcome, Outcome::Finished, "{decision:?}");
        assert_eq!(
            log.entries(),
            [
                r#"hook bash {"command":"ls"}"#,
                r#"bash ran {"command":"ls"}"#
            ],
            "{decision:?}"
        );
        let seen = last_tool_message(&model.requests()[1]);
        assert_eq!(seen.text(), r#"{"command":"ls"}"#);
        assert!(!seen.is_error);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn pre_tool_use_deny_is_an_error_output_the_model_sees() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "deny", PreToolUse::Deny("no rm".into())))
        .before_tool_use("bash", pre(&log, "later", PreToolUse::Continue))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "command": "rm -rf /" }));
    let resp = agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    // The tool did not run, and the first Deny stopped the chain.
    assert_eq!(log.entries(), [r#"deny bash {"command":"rm -rf /"}"#]);
    let seen = last_tool_message(&model.requests()[1]);
    assert_eq!(seen.text(), "PreToolUse:bash hook error: no rm");
    assert!(seen.is_error);
    assert_eq!(
        seen.tool_call_id.as_deref(),
        Some(resp.messages[1].tool_calls[0].id.as_str())
    );
    assert_history_valid(&resp.messages);
}

/// `Refuse` denies as `Deny` does (the chain ends, an earlier ask counts for nothing, the
/// tool and the after-hooks do not run), but the model sees the hook's own output — its text
/// and error flag, the call's id whatever the output said — and contexts added before it.
#[tokio::test(flavor = "current_thread")]
async fn pre_tool_use_refuse_answers_the_call_with_the_hooks_output() {
    for is_error in [false, true] {
        let log = Log::new();
        let worded = ToolOutput {
            is_error,
            ..ToolOutput::text("not-the-call", "Command blocked: policy")
        };
        let after = Count::default();
        let (post, failure) = (after.clone(), after.clone());
        let hooks = Hooks::new()
            .before_tool_use("bash", pre(&log, "ctx", PreToolUse::AddContext("c".into())))
            .before_tool_use("bash", pre(&log, "ask", PreToolUse::Ask("unsure".into())))
            .before_tool_use("bash", pre(&log, "refuse", PreToolUse::Refuse(worded)))
            .before_tool_use("bash", pre(&log, "later", PreToolUse::Deny("no".into())))
            .after_tool_use("bash", move |_, _, _| {
                post.hit();
                PostToolUse::Keep
            })
            .on_tool_failure("bash", move |_, _, _| {
                failure.hit();
                PostToolUseFailure::Keep
            })
            .compile()
            .unwrap();
        let model = one_call("bash", json!({ "command": "rm" }));
        let resp = agent_with(&model, &log, hooks).run("go").await.unwrap();

        assert_eq!(resp.outcome, Outcome::Finished);
        assert_eq!(
            log.entries(),
            [
                r#"ctx bash {"command":"rm"}"#,
                r#"ask bash {"command":"rm"}"#,
                r#"refuse bash {"command":"rm"}"#
            ]
        );
        assert_eq!(after.get(), 0, "an after-hook ran");
        let seen = last_tool_message(&model.requests()[1]);
        assert_eq!(seen.text(), "Command blocked: policy");
        assert_eq!(seen.is_error, is_error);
        assert_eq!(
            seen.tool_call_id.as_deref(),
            Some(resp.messages[1].tool_calls[0].id.as_str())
        );
        assert_eq!(
            context_after_results(&model.requests()[1]).as_deref(),
            Some("c")
        );
        assert_history_valid(&resp.messages);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn pre_tool_use_ask_without_approval_service_denies_with_the_ask_reason() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use(
            "bash",
            pre(&log, "ask", PreToolUse::Ask("needs review".into())),
        )
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "command": "ls" }));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(log.entries(), [r#"ask bash {"command":"ls"}"#]);
    let seen = last_tool_message(&model.requests()[1]);
    // Nobody to ask: the reason alone, as Claude Code `-p` (vector `permission_ask_headless`).
    assert_eq!(seen.text(), "needs review");
    assert!(seen.is_error);
}

/// Runs one `bash` call under `hooks`: what the tool layer logged and what the model saw.
async fn rules_play(hooks: Hooks) -> (Vec<String>, String) {
    let log = Log::new();
    let model = one_call("bash", json!({ "command": "ls" }));
    agent_with(&model, &log, hooks.compile().unwrap())
        .run("go")
        .await
        .unwrap();
    let seen = last_tool_message(&model.requests()[1]).text().into_owned();
    (log.entries(), seen)
}

#[tokio::test(flavor = "current_thread")]
async fn permission_rules_act_after_the_pre_tool_use_hooks() {
    let rule = |p: Permission| move |_: &ToolCall, _: &RunContext| p.clone();
    let asked = Log::new();
    let request = {
        let asked = asked.clone();
        move |call: Arc<ToolCall>, _| {
            asked.push(format!("asked {}", call.name));
            PermissionRequest::NoDecision
        }
    };
    // No hook at all: a deny rule refuses, with its text alone; nothing is asked.
    let hooks = Hooks::new()
        .permission_rules(rule(Permission::Allow))
        .permission_rules(rule(Permission::Deny("no".into())))
        .on_permission_request("*", request.clone())
        .into();
    let (ran, seen) = rules_play(hooks).await;
    assert!(ran.is_empty(), "{ran:?}");
    assert_eq!(seen, "no");
    assert!(asked.entries().is_empty());

    // Not allowed: asked (PermissionRequest), refused with the text when nobody approves…
    let hooks = Hooks::new()
        .permission_rules(rule(Permission::NotAllowed("not granted".into())))
        .on_permission_request("*", request.clone())
        .into();
    assert_eq!(rules_play(hooks).await.1, "not granted");
    assert_eq!(asked.entries(), ["asked bash"]);
    // … unless a hook allows it, or another check's allow rule covers it.
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "allow", PreToolUse::Allow))
        .permission_rules(rule(Permission::NotAllowed("not granted".into())));
    assert_eq!(rules_play(hooks).await.0.len(), 1, "ran");
    let hooks = Hooks::new()
        .permission_rules(rule(Permission::NotAllowed("not granted".into())))
        .permission_rules(rule(Permission::Allow));
    assert_eq!(rules_play(hooks).await.0.len(), 1, "ran");

    // An ask rule is not overridden by a hook's allow; the approval service decides.
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "allow", PreToolUse::Allow))
        .permission_rules(rule(Permission::Ask("ask me".into())))
        .approval(tower::service_fn(|req: ApprovalRequest| async move {
            assert_eq!(req.reason, "ask me");
            Ok::<_, BoxError>(ApprovalDecision::Deny("no way".into()))
        }));
    let (ran, seen) = rules_play(hooks).await;
    assert!(ran.is_empty(), "{ran:?}");
    assert_eq!(seen, "denied: no way");
}

#[tokio::test(flavor = "current_thread")]
async fn pre_tool_use_rewrite_changes_the_arguments_the_tool_gets() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use(
            "bash",
            pre(
                &log,
                "rewrite",
                PreToolUse::Rewrite(json!({ "command": "ls -la" })),
            ),
        )
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "command": "ls" }));
    let resp = agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(
        log.entries(),
        [
            r#"rewrite bash {"command":"ls"}"#,
            r#"bash ran {"command":"ls -la"}"#
        ]
    );
    assert_eq!(
        last_tool_message(&model.requests()[1]).text(),
        r#"{"command":"ls -la"}"#
    );
    assert_eq!(resp.outcome, Outcome::Finished);
}

// ===== PreToolUse merge rules =====

#[tokio::test(flavor = "current_thread")]
async fn allow_then_deny_is_denied() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "allow", PreToolUse::Allow))
        .before_tool_use("bash", pre(&log, "deny", PreToolUse::Deny("policy".into())))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({}));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(log.entries(), ["allow bash {}", "deny bash {}"]);
    assert_eq!(
        last_tool_message(&model.requests()[1]).text(),
        "PreToolUse:bash hook error: policy"
    );
}

/// An approval service that logs its requests and answers `answer`.
fn approval_log(
    asked: &Arc<Mutex<Vec<ApprovalRequest>>>,
    answer: ApprovalDecision,
) -> impl tower::Service<
    ApprovalRequest,
    Response = ApprovalDecision,
    Error = BoxError,
    Future = impl Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    let asked = Arc::clone(asked);
    tower::service_fn(move |req: ApprovalRequest| {
        asked.lock().unwrap().push(req);
        let answer = answer.clone();
        async move { Ok::<_, BoxError>(answer) }
    })
}

#[tokio::test(flavor = "current_thread")]
async fn ask_then_deny_is_denied_without_asking() {
    let log = Log::new();
    let asked = Arc::default();
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "ask", PreToolUse::Ask("unsure".into())))
        .before_tool_use("bash", pre(&log, "deny", PreToolUse::Deny("policy".into())))
        .approval(approval_log(&asked, ApprovalDecision::Allow))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({}));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(log.entries(), ["ask bash {}", "deny bash {}"]);
    assert!(asked.lock().unwrap().is_empty(), "approval was asked");
    assert_eq!(
        last_tool_message(&model.requests()[1]).text(),
        "PreToolUse:bash hook error: policy"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn ask_then_allow_asks_the_approval_service() {
    let log = Log::new();
    let asked = Arc::default();
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "ask", PreToolUse::Ask("unsure".into())))
        .before_tool_use("bash", pre(&log, "allow", PreToolUse::Allow))
        .approval(approval_log(&asked, ApprovalDecision::Allow))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "command": "ls" }));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].reason, "unsure");
    assert_eq!(asked[0].call.name, "bash");
    // Approved: the tool ran.
    assert_eq!(
        log.entries(),
        [
            r#"ask bash {"command":"ls"}"#,
            r#"allow bash {"command":"ls"}"#,
            r#"bash ran {"command":"ls"}"#
        ]
    );
    assert!(!last_tool_message(&model.requests()[1]).is_error);
}

#[tokio::test(flavor = "current_thread")]
async fn rewrites_chain_in_order() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use(
            "bash",
            pre(&log, "first", PreToolUse::Rewrite(json!({"n": 1}))),
        )
        .before_tool_use("bash", |call, _| {
            let n = call.arguments["n"]
                .as_i64()
                .expect("the first rewrite is seen");
            PreToolUse::Rewrite(json!({ "n": n + 1 }))
        })
        .before_tool_use("bash", pre(&log, "third", PreToolUse::Continue))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "n": 0 }));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(
        log.entries(),
        [
            r#"first bash {"n":0}"#,
            r#"third bash {"n":2}"#,
            r#"bash ran {"n":2}"#
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn several_asks_are_one_approval_request_with_the_rewritten_call() {
    let log = Log::new();
    let asked = Arc::default();
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "a", PreToolUse::Ask("one".into())))
        .before_tool_use("bash", pre(&log, "r", PreToolUse::Rewrite(json!({"x": 1}))))
        .before_tool_use("bash", pre(&log, "b", PreToolUse::Ask("two".into())))
        .approval(approval_log(&asked, ApprovalDecision::Allow))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({}));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].reason, "one; two");
    assert_eq!(asked[0].call.arguments, json!({"x": 1}));
    assert_eq!(log.entries().last().unwrap(), r#"bash ran {"x":1}"#);
}

// ===== approval =====

#[tokio::test(flavor = "current_thread")]
async fn approval_service_allow_and_deny() {
    for (answer, expected) in [
        (ApprovalDecision::Allow, None),
        (
            ApprovalDecision::Deny("the user said no".into()),
            Some("denied: the user said no"),
        ),
    ] {
        let log = Log::new();
        let asked = Arc::default();
        let hooks = Hooks::new()
            .before_tool_use("bash", pre(&log, "ask", PreToolUse::Ask("risky".into())))
            .approval(approval_log(&asked, answer.clone()))
            .compile()
            .unwrap();
        let model = one_call("bash", json!({ "command": "make" }));
        agent_with(&model, &log, hooks).run("go").await.unwrap();

        assert_eq!(asked.lock().unwrap().len(), 1, "{answer:?}");
        assert_eq!(asked.lock().unwrap()[0].reason, "risky");
        let seen = last_tool_message(&model.requests()[1]);
        match expected {
            None => {
                assert!(!seen.is_error);
                assert_eq!(seen.text(), r#"{"command":"make"}"#);
                assert_eq!(log.entries().len(), 2, "the tool ran");
            }
            Some(text) => {
                assert!(seen.is_error);
                assert_eq!(seen.text(), text);
                assert_eq!(log.entries().len(), 1, "the tool did not run");
            }
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn failing_approval_service_denies() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("bash", pre(&log, "ask", PreToolUse::Ask("risky".into())))
        .approval(tower::service_fn(|_req: ApprovalRequest| async {
            Err::<ApprovalDecision, BoxError>("the UI is gone".into())
        }))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({}));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    let seen = last_tool_message(&model.requests()[1]);
    assert!(seen.is_error);
    assert!(
        seen.text().starts_with("denied: approval failed"),
        "{}",
        seen.text()
    );
    assert!(seen.text().contains("the UI is gone"), "{}", seen.text());
    assert_eq!(log.entries().len(), 1, "the tool did not run");
}

// ===== PostToolUse =====

#[tokio::test(flavor = "current_thread")]
async fn post_tool_use_keep_replace_and_add_context() {
    let log = Log::new();
    let seen_by_third = Arc::new(Mutex::new(String::new()));
    let third = Arc::clone(&seen_by_third);
    let hooks = Hooks::new()
        .after_tool_use("bash", |_call, _out, _ctx| PostToolUse::Keep)
        .after_tool_use("bash", |_call, out: Arc<ToolOutput>, _ctx| {
            PostToolUse::Replace(
                ToolOutput::text("ignored-id", format!("replaced({})", out.content))
                    .with_metadata("hooked", json!(true)),
            )
        })
        .after_tool_use("bash", move |_call, out: Arc<ToolOutput>, _ctx| {
            *third.lock().unwrap() = out.content.clone();
            PostToolUse::AddContext("first context".into())
        })
        .after_tool_use("*", |_call, _out, _ctx| {
            PostToolUse::AddContext("second context".into())
        })
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "c": 1 }));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    // The replacement chains: the next hook sees it.
    assert_eq!(*seen_by_third.lock().unwrap(), r#"replaced({"c":1})"#);
    let seen = last_tool_message(&model.requests()[1]);
    // The call id is kept.
    assert_eq!(
        seen.tool_call_id.as_deref(),
        Some(model.requests()[1].messages[1].tool_calls[0].id.as_str())
    );
    assert!(!seen.is_error);
    // The result is the replacement; the contexts follow the results, in order.
    assert_eq!(seen.text(), "replaced({\"c\":1})");
    assert_eq!(
        context_after_results(&model.requests()[1]).as_deref(),
        Some("first context\n\nsecond context")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn post_tool_use_keep_leaves_the_output_alone() {
    let log = Log::new();
    let calls = Count::default();
    let c = calls.clone();
    let hooks = Hooks::new()
        .after_tool_use("*", move |_call, _out, _ctx| {
            c.hit();
            PostToolUse::Keep
        })
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "c": 1 }));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(calls.get(), 1);
    assert_eq!(last_tool_message(&model.requests()[1]).text(), r#"{"c":1}"#);
}

#[tokio::test(flavor = "current_thread")]
async fn post_tool_use_replace_takes_a_whole_output() {
    let set = Hooks::new()
        .after_tool_use("bash", |_c, _o, _x| {
            PostToolUse::Replace(
                ToolOutput::error("other-id", "secret leaked; refusing")
                    .with_metadata("redacted", json!(true)),
            )
        })
        .compile()
        .unwrap();
    let log = Log::new();
    let svc = ServiceBuilder::new()
        .layer(set.tool_layer())
        .service(ToolRouter::new().tool(echo("bash", &log)));
    let out = svc.oneshot(request("bash", json!({}))).await.unwrap();

    assert_eq!(
        out,
        ToolOutput::error("id-1", "secret leaked; refusing").with_metadata("redacted", json!(true))
    );
}

// ===== PostToolUseFailure =====

/// Hooks logging PostToolUse and PostToolUseFailure, the failure hook adding context.
fn failure_hooks(failures: &Arc<Mutex<Vec<ToolFailure>>>, post: &Count) -> HookSet {
    let failures = Arc::clone(failures);
    let post = post.clone();
    Hooks::new()
        .after_tool_use("*", move |_c, _o, _x| {
            post.hit();
            PostToolUse::AddContext("must not appear".into())
        })
        .on_tool_failure("*", move |_c, f: Arc<ToolFailure>, _x| {
            failures.lock().unwrap().push((*f).clone());
            PostToolUseFailure::AddContext("try --force".into())
        })
        .on_tool_failure("*", |_c, _f, _x| PostToolUseFailure::Keep)
        .compile()
        .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn failure_hook_adds_context_to_an_error_output() {
    let failures = Arc::default();
    let post = Count::default();
    let model = one_call("flaky", json!({}));
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn("flaky", "fails", any_object(), |_, _| async {
            Ok::<_, BoxError>(ToolOutput::error("", "bad input"))
        }))
        .hooks(failure_hooks(&failures, &post))
        .build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(
        post.get(),
        0,
        "PostToolUse runs only for successful outputs"
    );
    let failures = failures.lock().unwrap().clone();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].error, "bad input");
    assert_eq!(
        failures[0].output.as_ref().map(|o| o.content.as_str()),
        Some("bad input")
    );
    let seen = last_tool_message(&model.requests()[1]);
    assert!(seen.is_error);
    assert_eq!(seen.text(), "bad input");
    assert_eq!(
        context_after_results(&model.requests()[1]).as_deref(),
        Some("try --force")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn failure_hook_adds_context_to_a_tool_error() {
    let failures = Arc::default();
    let post = Count::default();
    let model = one_call("flaky", json!({}));
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn("flaky", "fails", any_object(), |_, _| async {
            Err::<String, BoxError>("disk full".into())
        }))
        .hooks(failure_hooks(&failures, &post))
        .build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(post.get(), 0);
    let failures = failures.lock().unwrap().clone();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].error, "tool `flaky` failed: disk full");
    assert_eq!(failures[0].output, None);
    let seen = last_tool_message(&model.requests()[1]);
    assert!(seen.is_error);
    assert_eq!(seen.text(), "tool `flaky` failed: disk full");
    assert_eq!(
        context_after_results(&model.requests()[1]).as_deref(),
        Some("try --force")
    );
    assert_history_valid(&resp.messages);
}

#[tokio::test(flavor = "current_thread")]
async fn an_abort_from_the_tool_still_aborts_the_run() {
    let failures = Arc::default();
    let post = Count::default();
    let model = one_call("fatal", json!({}));
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn("fatal", "aborts", any_object(), |_, _| async {
            Err::<String, BoxError>(Abort::new("the disk is on fire").into())
        }))
        .hooks(failure_hooks(&failures, &post))
        .build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: "the disk is on fire".into()
        }
    );
    assert_eq!(model.requests().len(), 1, "no model call after the abort");
    assert_history_valid(&resp.messages);
}

// ===== UserPromptSubmit =====

#[tokio::test(flavor = "current_thread")]
async fn user_prompt_continue_changes_nothing() {
    let hooks = Hooks::new()
        .on_user_prompt(|_p, _x| UserPrompt::Continue)
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("hi").recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();
    let resp = agent.run("hello").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(user_texts(&resp), ["hello"]);
    assert_eq!(model.requests()[0].messages.len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn user_prompt_block_ends_the_run_before_the_prompt_enters_the_thread() {
    let later = Count::default();
    let l = later.clone();
    let store = MemoryStore::new();
    let hooks = Hooks::new()
        .on_user_prompt(|p: Arc<str>, _x| {
            if p.contains("password") {
                UserPrompt::Block("no secrets".into())
            } else {
                UserPrompt::Continue
            }
        })
        .on_user_prompt(move |_p, _x| {
            l.hit();
            UserPrompt::Continue
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("never").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .store(store.clone())
        .hooks(hooks)
        .build();

    let resp = agent
        .run(AgentRequest::new("my password is hunter2").thread("t1"))
        .await
        .unwrap();

    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "no secrets".into()
        }
    );
    assert_eq!(
        later.get(),
        0,
        "the hooks after the first Block are not called"
    );
    assert!(model.requests().is_empty(), "the model was called");
    assert!(resp.messages.is_empty(), "{:?}", resp.messages);
    assert!(store.is_empty(), "something was saved");
}

#[tokio::test(flavor = "current_thread")]
async fn user_prompt_block_leaves_an_existing_thread_as_it_was() {
    let store = MemoryStore::new();
    let hooks = Hooks::new()
        .on_user_prompt(|p: Arc<str>, _x| {
            if p.contains("password") {
                UserPrompt::Block("no secrets".into())
            } else {
                UserPrompt::Continue
            }
        })
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("first answer").text("never"))
        .store(store.clone())
        .hooks(hooks)
        .build();
    agent
        .run(AgentRequest::new("hello").thread("t1"))
        .await
        .unwrap();
    let before = store.get("t1").unwrap();

    let resp = agent
        .run(AgentRequest::new("my password is x").thread("t1"))
        .await
        .unwrap();

    assert!(matches!(resp.outcome, Outcome::Blocked { .. }));
    assert_eq!(store.get("t1").unwrap(), before);
    assert!(resp.messages.iter().all(|m| !m.text().contains("password")));
}

#[tokio::test(flavor = "current_thread")]
async fn user_prompt_add_context_is_a_system_message_after_the_prompt() {
    let hooks = Hooks::new()
        .on_user_prompt(|_p, _x| UserPrompt::AddContext("today is Monday".into()))
        .on_user_prompt(|_p, _x| UserPrompt::Continue)
        .on_user_prompt(|_p, _x| UserPrompt::AddContext("the repo is clean".into()))
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .system_prompt("sys")
        .hooks(hooks)
        .build();
    let resp = agent.run("what day is it?").await.unwrap();

    let req = &model.requests()[0];
    let texts: Vec<(Role, String)> = req
        .messages
        .iter()
        .map(|m| (m.role, m.text().into_owned()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::System, "sys".to_owned()),
            (Role::User, "what day is it?".to_owned()),
            (
                Role::System,
                "today is Monday\n\nthe repo is clean".to_owned()
            ),
        ]
    );
    assert_eq!(resp.outcome, Outcome::Finished);
}

#[tokio::test(flavor = "current_thread")]
async fn user_prompt_rewrites_chain_and_the_model_sees_the_last_one() {
    let seen = Log::new();
    let s = seen.clone();
    let hooks = Hooks::new()
        .on_user_prompt(|p: Arc<str>, _x| UserPrompt::Rewrite(format!("{p} (be brief)")))
        .on_user_prompt(move |p: Arc<str>, _x| {
            s.push(p.to_string());
            UserPrompt::Rewrite(p.to_uppercase())
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();
    let resp = agent.run("explain tower").await.unwrap();

    assert_eq!(seen.entries(), ["explain tower (be brief)"]);
    let req = &model.requests()[0];
    assert_eq!(req.messages.len(), 1);
    assert_eq!(req.messages[0].text(), "EXPLAIN TOWER (BE BRIEF)");
    assert_eq!(user_texts(&resp), ["EXPLAIN TOWER (BE BRIEF)"]);
}

// ===== Stop =====

#[tokio::test(flavor = "current_thread")]
async fn stop_finish_lets_the_run_finish() {
    let inputs = Arc::new(Mutex::new(Vec::<StopInput>::new()));
    let i = Arc::clone(&inputs);
    let hooks = Hooks::new()
        .on_stop(move |input, _x| {
            i.lock().unwrap().push(input);
            Stop::Finish
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("all done").recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.steps, 1);
    let inputs = inputs.lock().unwrap().clone();
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].last_assistant_message, "all done");
    assert!(!inputs[0].stop_hook_active);
    assert_eq!(inputs[0].agent_name, None);
}

#[tokio::test(flavor = "current_thread")]
async fn stop_continue_sends_feedback_and_sets_stop_hook_active() {
    let inputs = Arc::new(Mutex::new(Vec::<StopInput>::new()));
    let i = Arc::clone(&inputs);
    let hooks = Hooks::new()
        .on_stop(move |input: StopInput, _x| {
            let active = input.stop_hook_active;
            i.lock().unwrap().push(input);
            if active {
                Stop::Finish
            } else {
                Stop::Continue("you forgot the tests".into())
            }
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .text("v1")
        .text("v2 with tests")
        .recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();
    let resp = agent.run("write code").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "v2 with tests");
    assert_eq!(resp.steps, 2);
    let inputs = inputs.lock().unwrap().clone();
    let got: Vec<(&str, bool)> = inputs
        .iter()
        .map(|i| (i.last_assistant_message.as_str(), i.stop_hook_active))
        .collect();
    assert_eq!(got, [("v1", false), ("v2 with tests", true)]);
    let second = &model.requests()[1];
    let last = second.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert_eq!(last.text(), "you forgot the tests");
    assert_eq!(user_texts(&resp), ["write code", "you forgot the tests"]);
}

#[tokio::test(flavor = "current_thread")]
async fn feedback_of_every_continuing_stop_hook_is_joined_in_order() {
    let hooks = Hooks::new()
        .on_stop(|i: StopInput, _x| {
            if i.stop_hook_active {
                Stop::Finish
            } else {
                Stop::Continue("first".into())
            }
        })
        .on_stop(|_i, _x| Stop::Finish)
        .on_stop(|i: StopInput, _x| {
            if i.stop_hook_active {
                Stop::Finish
            } else {
                Stop::Continue("second".into())
            }
        })
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("a").text("b"))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(user_texts(&resp), ["go", "first\n\nsecond"]);
}

/// A Stop hook's contexts follow the feedback as one system message (Claude Code's
/// `Stop hook blocking error from command: …` after a blocking command's reason), in the
/// order the hooks gave them; a context with no hook continuing keeps nothing going.
#[tokio::test(flavor = "current_thread")]
async fn stop_contexts_follow_the_feedback_in_one_system_message() {
    let hooks = Hooks::new()
        .on_stop(|i: StopInput, _x| {
            if i.stop_hook_active {
                Stop::AddContext("alone".into())
            } else {
                Stop::Many(vec![
                    Stop::AddContext("c1".into()),
                    Stop::Continue("first".into()),
                ])
            }
        })
        .on_stop(|i: StopInput, _x| {
            if i.stop_hook_active {
                Stop::Finish
            } else {
                Stop::Many(vec![
                    Stop::Continue("second".into()),
                    Stop::AddContext("c2".into()),
                ])
            }
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("a").text("b").recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(
        resp.steps, 2,
        "a context alone does not keep the agent going"
    );
    let second: Vec<_> = model.requests()[1].messages.iter().cloned().collect();
    let [.., feedback, context] = second.as_slice() else {
        panic!("{second:?}")
    };
    assert_eq!(
        (feedback.role, feedback.text().as_ref()),
        (Role::User, "first\n\nsecond")
    );
    assert_eq!(
        (context.role, context.text().as_ref()),
        (Role::System, "c1\n\nc2")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn stop_cap_finishes_after_eight_continuations_with_a_warning() {
    let calls = Count::default();
    let c = calls.clone();
    let hooks = Hooks::new()
        .on_stop(move |_i, _x| {
            c.hit();
            Stop::Continue("keep going".into())
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::from_fn(|_| Ok(ModelResponse::text("done?"))).recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();

    let mut stream = agent.stream("go");
    let events: Vec<AgentEvent> = (&mut stream).collect().await;
    let resp = stream.take_response().unwrap().unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(calls.get(), 9);
    let feedback = user_texts(&resp)
        .iter()
        .filter(|t| *t == "keep going")
        .count();
    assert_eq!(feedback, 8);
    assert_eq!(model.requests().len(), 9);
    let warnings: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Warning { .. }))
        .collect();
    assert_eq!(warnings.len(), 1, "{events:?}");
    assert!(matches!(
        events.last(),
        Some(AgentEvent::AgentStop {
            outcome: Outcome::Finished,
            ..
        })
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn stop_cap_is_configurable() {
    let calls = Count::default();
    let c = calls.clone();
    let hooks = Hooks::new()
        .on_stop(move |_i, _x| {
            c.hit();
            Stop::Continue("keep going".into())
        })
        .stop_cap(2)
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::from_fn(|_| Ok(ModelResponse::text("done?"))))
        .hooks(hooks)
        .build();

    let mut stream = agent.stream("go");
    let events: Vec<AgentEvent> = (&mut stream).collect().await;
    let resp = stream.take_response().unwrap().unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(calls.get(), 3);
    assert_eq!(user_texts(&resp).len(), 1 + 2);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Warning { .. }))
    );
}

// ===== SessionStart / SessionEnd / steps =====

#[tokio::test(flavor = "current_thread")]
async fn session_start_context_follows_the_prompt_in_every_request() {
    let starts = Count::default();
    let s = starts.clone();
    let hooks = Hooks::new()
        .on_session_start(move |_x| {
            s.hit();
            SessionStart::AddContext("branch: main".into())
        })
        .on_session_start(|_x| SessionStart::Continue)
        .on_session_start(|_x| SessionStart::AddContext("2 open issues".into()))
        .compile()
        .unwrap();
    let log = Log::new();
    let model = ScriptedModel::new()
        .tool_call("ls", json!({}))
        .tool_call("ls", json!({}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .system_prompt("You are helpful.")
        .tool(echo("ls", &log))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(starts.get(), 1, "once per run");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // After the prompt, as Claude Code places it: a hook context every request of the run
    // sees, saved in the thread; the system prompt stays the agent's.
    for req in &requests {
        assert_eq!(system_text(req), "You are helpful.");
        assert_eq!(req.messages[1].text(), "go");
        assert_eq!(req.messages[2].role, Role::System);
        assert_eq!(req.messages[2].text(), "branch: main\n\n2 open issues");
    }
    assert_eq!(resp.messages[0].text(), "You are helpful.");
    assert_eq!(resp.messages[2].text(), "branch: main\n\n2 open issues");
}

#[tokio::test(flavor = "current_thread")]
async fn session_start_context_without_a_system_prompt() {
    let hooks = Hooks::new()
        .on_session_start(|_x| SessionStart::AddContext("branch: main".into()))
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();
    agent.run("go").await.unwrap();

    let req = &model.requests()[0];
    assert_eq!(system_text(req), "");
    let texts: Vec<(Role, String)> = req
        .messages
        .iter()
        .map(|m| (m.role, m.text().into_owned()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::User, "go".to_owned()),
            (Role::System, "branch: main".to_owned())
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn session_end_before_step_and_after_step_observe() {
    let log = Log::new();
    let ends = Arc::new(Mutex::new(Vec::<(Outcome, u32)>::new()));
    let (b, a, e) = (log.clone(), log.clone(), Arc::clone(&ends));
    let hooks = Hooks::new()
        .before_step(move |step, ctx: &RunContext| {
            assert_eq!(ctx.step(), step);
            b.push(format!("before {step}"));
        })
        .after_step(move |step, _ctx: &RunContext| a.push(format!("after {step}")))
        .on_session_end(move |resp: &AgentResponse, _ctx: &RunContext| {
            e.lock().unwrap().push((resp.outcome.clone(), resp.steps));
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("ls", json!({}))
        .tool_call("ls", json!({}))
        .text("done");
    let tools = Log::new();
    let agent = Agent::builder()
        .model(model)
        .tool(echo("ls", &tools))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.steps, 3);
    let entries = log.entries();
    let befores = entries.iter().filter(|e| e.starts_with("before")).count();
    assert_eq!(befores, 3);
    assert_eq!(entries[..4], ["before 0", "after 0", "before 1", "after 1"]);
    assert_eq!(entries[4], "before 2");
    assert_eq!(*ends.lock().unwrap(), [(Outcome::Finished, 3)]);
}

#[tokio::test(flavor = "current_thread")]
async fn after_step_runs_at_the_end_of_every_step() {
    let log = Log::new();
    let (b, a) = (log.clone(), log.clone());
    let hooks = Hooks::new()
        .before_step(move |step, _ctx: &RunContext| b.push(format!("before {step}")))
        .after_step(move |step, _ctx: &RunContext| a.push(format!("after {step}")))
        .compile()
        .unwrap();
    let tools = Log::new();
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("ls", json!({})).text("done"))
        .tool(echo("ls", &tools))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.steps, 2);
    assert_eq!(
        log.entries(),
        ["before 0", "after 0", "before 1", "after 1"]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn session_end_observes_a_blocked_run_too() {
    let ends = Count::default();
    let e = ends.clone();
    let hooks = Hooks::new()
        .on_user_prompt(|_p, _x| UserPrompt::Block("no".into()))
        .on_session_end(move |resp: &AgentResponse, _x: &RunContext| {
            assert!(matches!(resp.outcome, Outcome::Blocked { .. }));
            e.hit();
        })
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new())
        .hooks(hooks)
        .build();
    agent.run("go").await.unwrap();
    assert_eq!(ends.get(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn should_continue_false_blocks_the_run_even_with_tool_calls_pending() {
    let log = Log::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a = Arc::clone(&asked);
    let hooks = Hooks::new()
        .should_continue(move |step, _ctx: &RunContext| {
            a.lock().unwrap().push(step);
            step < 1
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::from_fn(|_| {
        Ok(ModelResponse::tool_calls([ToolCall::new(
            "",
            "ls",
            json!({}),
        )]))
    })
    .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(echo("ls", &log))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();

    assert!(
        matches!(resp.outcome, Outcome::Blocked { .. }),
        "{:?}",
        resp.outcome
    );
    assert_eq!(*asked.lock().unwrap(), [0, 1]);
    assert_eq!(model.requests().len(), 2, "no model call after the block");
    assert_eq!(resp.steps, 2);
    assert_eq!(tool_messages(&resp.messages).len(), 2);
    assert_history_valid(&resp.messages);
}

// ===== model hooks =====

#[tokio::test(flavor = "current_thread")]
async fn before_model_modifies_the_request() {
    let hooks = Hooks::new()
        .before_model(|mut req: ModelRequest| {
            req.append_system("hook was here");
            req.settings = req.settings.model("hooked-model");
            BeforeModel::Continue(req)
        })
        .before_model(|mut req: ModelRequest| {
            // The second hook sees the first one's edit.
            assert!(system_text(&req).contains("hook was here"));
            req.messages.push(Message::user("and one more"));
            BeforeModel::Continue(req)
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .system_prompt("sys")
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();

    let req = &model.requests()[0];
    assert_eq!(system_text(req), "sys\n\nhook was here");
    assert_eq!(req.settings.model.as_deref(), Some("hooked-model"));
    assert_eq!(req.messages.last().unwrap().text(), "and one more");
    // The request was changed, not the thread.
    assert_eq!(user_texts(&resp), ["go"]);
}

#[tokio::test(flavor = "current_thread")]
async fn before_model_respond_skips_the_model() {
    let later = Count::default();
    let l = later.clone();
    let hooks = Hooks::new()
        .before_model(|_req| BeforeModel::Respond(ModelResponse::text("from the cache")))
        .before_model(move |req| {
            l.hit();
            BeforeModel::Continue(req)
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("from the model").recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "from the cache");
    assert!(model.requests().is_empty(), "the model got a request");
    assert_eq!(model.calls(), 0);
    assert_eq!(later.get(), 0, "hooks after a Respond are not called");
}

#[tokio::test(flavor = "current_thread")]
async fn after_model_replaces_the_response() {
    let log = Log::new();
    let hooks = Hooks::new()
        .after_model(|resp: ModelResponse, _x| {
            if resp.message.tool_calls.is_empty() {
                resp
            } else {
                ModelResponse::text("I changed my mind")
            }
        })
        .compile()
        .unwrap();
    let model = one_call("bash", json!({ "command": "rm -rf /" }));
    let resp = agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "I changed my mind");
    assert_eq!(resp.steps, 1);
    assert!(log.entries().is_empty(), "the tool ran");
}

// ===== order =====

#[tokio::test(flavor = "current_thread")]
async fn higher_priority_runs_first_then_registration_order() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("*", pre(&log, "a", PreToolUse::Continue))
        .name("a")
        .before_tool_use("*", pre(&log, "b", PreToolUse::Continue))
        .name("b")
        .priority(10)
        .before_tool_use("*", pre(&log, "c", PreToolUse::Continue))
        .name("c")
        .before_tool_use("*", pre(&log, "d", PreToolUse::Continue))
        .name("d")
        .priority(10)
        .before_tool_use("*", pre(&log, "e", PreToolUse::Continue))
        .name("e")
        .priority(-5)
        .compile()
        .unwrap();
    assert_eq!(hooks.order(), ["`b`", "`d`", "`a`", "`c`", "`e`"]);

    let model = one_call("ls", json!({}));
    agent_with(&model, &log, hooks).run("go").await.unwrap();
    assert_eq!(
        log.entries(),
        [
            "b ls {}",
            "d ls {}",
            "a ls {}",
            "c ls {}",
            "e ls {}",
            "ls ran {}"
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn before_and_after_override_priority() {
    let log = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("*", pre(&log, "x", PreToolUse::Continue))
        .name("x")
        .priority(100)
        .after("y")
        .before_tool_use("*", pre(&log, "y", PreToolUse::Continue))
        .name("y")
        .before_tool_use("*", pre(&log, "z", PreToolUse::Continue))
        .name("z")
        .priority(-100)
        .before("y")
        .compile()
        .unwrap();
    assert_eq!(hooks.order(), ["`z`", "`y`", "`x`"]);

    let model = one_call("ls", json!({}));
    agent_with(&model, &log, hooks).run("go").await.unwrap();
    assert_eq!(
        log.entries(),
        ["z ls {}", "y ls {}", "x ls {}", "ls ran {}"]
    );
}

#[test]
fn order_labels_unnamed_hooks_by_index_and_event() {
    let hooks = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .before_tool_use("*", |_c, _x| PreToolUse::Continue)
        .priority(1)
        .after_tool_use("*", |_c, _o, _x| PostToolUse::Keep)
        .name("post")
        .compile()
        .unwrap();
    assert_eq!(
        hooks.order(),
        ["#1 (before_tool_use)", "#0 (on_stop)", "`post`"]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn priorities_order_stop_hooks_too() {
    let hooks = Hooks::new()
        .on_stop(|i: StopInput, _x| {
            if i.stop_hook_active {
                Stop::Finish
            } else {
                Stop::Continue("low".into())
            }
        })
        .on_stop(|i: StopInput, _x| {
            if i.stop_hook_active {
                Stop::Finish
            } else {
                Stop::Continue("high".into())
            }
        })
        .priority(5)
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("a").text("b"))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(user_texts(&resp), ["go", "high\n\nlow"]);
}

/// Whether `message` names the cycle `names` (in this direction, from any hook of it).
fn names_cycle(message: &str, names: &[&str]) -> bool {
    (0..names.len()).any(|start| {
        let path: Vec<String> = (0..=names.len())
            .map(|k| format!("`{}`", names[(start + k) % names.len()]))
            .collect();
        message == format!("the hook order has a cycle: {}", path.join(" → "))
    })
}

#[test]
fn a_cycle_is_an_error_naming_its_hooks() {
    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .name("a")
        .before("b")
        .on_stop(|_i, _x| Stop::Finish)
        .name("b")
        .before("a")
        .compile()
        .unwrap_err();
    let msg = err.to_string();
    assert!(names_cycle(&msg, &["a", "b"]), "{msg}");
    let mut hooks = err.hooks().to_vec();
    hooks.sort();
    assert_eq!(hooks, ["`a`", "`b`"]);
}

#[test]
fn a_longer_cycle_is_named_in_its_direction_without_bystanders() {
    // d runs after a, but is not part of the cycle a → b → c → a.
    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .name("d")
        .after("a")
        .on_stop(|_i, _x| Stop::Finish)
        .name("a")
        .before("b")
        .on_stop(|_i, _x| Stop::Finish)
        .name("b")
        .before("c")
        .on_stop(|_i, _x| Stop::Finish)
        .name("c")
        .after("b")
        .before("a")
        .on_stop(|_i, _x| Stop::Finish)
        .name("free")
        .compile()
        .unwrap_err();
    let msg = err.to_string();
    assert!(names_cycle(&msg, &["a", "b", "c"]), "{msg}");
    assert_eq!(err.hooks().len(), 3, "{:?}", err.hooks());
}

#[test]
fn a_cycle_through_after_constraints_is_an_error() {
    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .name("a")
        .after("b")
        .on_stop(|_i, _x| Stop::Finish)
        .name("b")
        .after("a")
        .compile()
        .unwrap_err();
    assert!(names_cycle(&err.to_string(), &["a", "b"]), "{err}");
}

#[test]
fn a_hook_ordered_before_itself_is_a_cycle() {
    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .name("me")
        .before("me")
        .compile()
        .unwrap_err();
    assert_eq!(err.to_string(), "the hook order has a cycle: `me` → `me`");
}

#[test]
fn an_unknown_name_is_an_error_naming_it() {
    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .name("mine")
        .before("security")
        .compile()
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("`security`"), "{msg}");
    assert!(msg.contains("`mine`"), "{msg}");
    assert_eq!(err.hooks(), ["`mine`"]);

    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .after("nobody")
        .compile()
        .unwrap_err();
    assert!(err.to_string().contains("`nobody`"), "{err}");
    assert!(err.to_string().contains("#0 (on_stop)"), "{err}");
}

#[test]
fn duplicate_names_are_an_error() {
    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .name("twin")
        .before_tool_use("*", |_c, _x| PreToolUse::Continue)
        .name("twin")
        .compile()
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("two hooks are named `twin`"), "{msg}");
    assert_eq!(err.hooks().len(), 2);
}

#[test]
fn duplicate_name_error_tells_the_two_hooks_apart() {
    let err = Hooks::new()
        .on_stop(|_i, _x| Stop::Finish)
        .name("twin")
        .before_tool_use("*", |_c, _x| PreToolUse::Continue)
        .name("twin")
        .compile()
        .unwrap_err();
    assert_ne!(err.hooks()[0], err.hooks()[1], "{err}");
    let msg = err.to_string();
    assert!(msg.contains("on_stop"), "{msg}");
    assert!(msg.contains("before_tool_use"), "{msg}");
}

// ===== matchers =====

#[tokio::test(flavor = "current_thread")]
async fn exact_matcher_skips_other_tools() {
    let log = Log::new();
    let seen = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("bash|write", pre(&seen, "hook", PreToolUse::Continue))
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_calls([("ls", json!({})), ("bash", json!({})), ("write", json!({}))])
        .text("done");
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    let mut seen = seen.entries();
    seen.sort();
    assert_eq!(seen, ["hook bash {}", "hook write {}"]);
    assert_eq!(log.entries().len(), 3, "every tool ran");
}

#[tokio::test(flavor = "current_thread")]
async fn regex_matcher_is_unanchored() {
    let log = Log::new();
    let seen = Log::new();
    let hooks = Hooks::new()
        .before_tool_use("Edit.*", pre(&seen, "hook", PreToolUse::Continue))
        .after_tool_use(ToolMatcher::new("/^Edit$/"), |c: Arc<ToolCall>, _o, _x| {
            PostToolUse::AddContext(format!("anchored {}", c.name))
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_calls([
            ("Edit", json!({})),
            ("NotebookEdit", json!({})),
            ("Write", json!({})),
        ])
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(echo("Edit", &log))
        .tool(echo("NotebookEdit", &log))
        .tool(echo("Write", &log))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();

    let mut seen = seen.entries();
    seen.sort();
    assert_eq!(seen, ["hook Edit {}", "hook NotebookEdit {}"]);
    let outputs: Vec<String> = tool_messages(&resp.messages)
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(outputs, ["{}", "{}", "{}"]);
    // The anchored matcher's context, for Edit alone, follows the results.
    let req = model.requests().last().cloned().unwrap();
    assert_eq!(
        context_after_results(&req).as_deref(),
        Some("anchored Edit")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn predicate_matcher_sees_the_arguments() {
    let log = Log::new();
    let outside = ToolMatcher::predicate(|call: &ToolCall| {
        call.arguments["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/etc"))
    });
    let hooks = Hooks::new()
        .before_tool_use(outside, |call: Arc<ToolCall>, _x| {
            PreToolUse::Deny(format!("{} is off limits", call.arguments["path"]))
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_calls([
            ("write", json!({ "path": "/etc/passwd" })),
            ("write", json!({ "path": "/home/me/notes" })),
        ])
        .text("done");
    let resp = agent_with(&model, &log, hooks).run("go").await.unwrap();

    let outputs = tool_messages(&resp.messages);
    assert_eq!(
        outputs[0].text(),
        r#"PreToolUse:write hook error: "/etc/passwd" is off limits"#
    );
    assert!(outputs[0].is_error);
    assert_eq!(outputs[1].text(), r#"{"path":"/home/me/notes"}"#);
    assert_eq!(log.entries(), [r#"write ran {"path":"/home/me/notes"}"#]);
}

// ===== subagents =====

fn continue_once(
    inputs: &Arc<Mutex<Vec<StopInput>>>,
    store: &MemoryStore,
) -> impl Fn(StopInput, RunContext) -> Stop + Send + Sync + 'static {
    let inputs = Arc::clone(inputs);
    let store = store.clone();
    move |input: StopInput, _x| {
        // The subagent's conversation is in its store while the hook decides.
        assert_eq!(
            store.len(),
            1,
            "the subagent's thread is kept while it works"
        );
        let active = input.stop_hook_active;
        inputs.lock().unwrap().push(input);
        if active {
            Stop::Finish
        } else {
            Stop::Continue("cite your sources".into())
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn subagent_stop_sends_the_subagent_back_to_work() {
    let store = MemoryStore::new();
    let sub_model = ScriptedModel::new()
        .text("tower is a library")
        .text("tower is a library (source: docs.rs/tower)")
        .recording();
    let researcher = Agent::builder()
        .model(sub_model.clone())
        .store(store.clone())
        .build();
    let inputs = Arc::default();
    let hooks = Hooks::new()
        .on_subagent_stop("research", continue_once(&inputs, &store))
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("research", json!({ "prompt": "what is tower?" }))
        .text("Done.")
        .recording();
    let lead = Agent::builder()
        .model(model.clone())
        .tool(researcher.into_tool("research", "Researches a question"))
        .hooks(hooks)
        .build();
    let resp = lead.run("find out").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    // The subagent ran twice, the second time with the feedback.
    let sub_requests = sub_model.requests();
    assert_eq!(sub_requests.len(), 2);
    assert!(
        sub_requests[0]
            .messages
            .iter()
            .all(|m| m.text() != "cite your sources")
    );
    let second: Vec<(Role, String)> = sub_requests[1]
        .messages
        .iter()
        .map(|m| (m.role, m.text().into_owned()))
        .collect();
    assert_eq!(
        second,
        [
            (Role::User, "what is tower?".to_owned()),
            (Role::Assistant, "tower is a library".to_owned()),
            (Role::User, "cite your sources".to_owned()),
        ]
    );
    let inputs = inputs.lock().unwrap().clone();
    let got: Vec<(&str, bool, Option<&str>)> = inputs
        .iter()
        .map(|i| {
            (
                i.last_assistant_message.as_str(),
                i.stop_hook_active,
                i.agent_name.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("tower is a library", false, Some("research")),
            (
                "tower is a library (source: docs.rs/tower)",
                true,
                Some("research")
            ),
        ]
    );
    // The parent sees the final answer.
    let seen = last_tool_message(&model.requests()[1]);
    assert!(!seen.is_error);
    assert_eq!(seen.text(), "tower is a library (source: docs.rs/tower)");
    // The temporary thread is gone.
    assert!(store.is_empty(), "{store:?}");
}

/// Where a subagent's hook contexts reach its model, as in Claude Code: SubagentStart's
/// after its prompt (one hook context of its first request, not its system prompt), and a
/// SubagentStop block's feedback as a user message followed by its context (`Stop::AddContext`).
#[tokio::test(flavor = "current_thread")]
async fn subagent_hook_contexts_follow_the_prompt_and_the_feedback() {
    let sub_model = ScriptedModel::new()
        .text("tower is a library")
        .text("tower is a library (docs.rs/tower)")
        .recording();
    let researcher = Agent::builder()
        .model(sub_model.clone())
        .system_prompt("You research.")
        .build();
    let hooks = Hooks::new()
        .on_subagent_start("research", |_i, _x| {
            SubagentStart::AddContext("the user reads Rust".into())
        })
        .on_subagent_start("*", |_i, _x| SubagentStart::AddContext("be brief".into()))
        .on_subagent_stop("research", |input: StopInput, _x| {
            if input.stop_hook_active {
                Stop::Finish
            } else {
                Stop::Many(vec![
                    Stop::Continue("cite your sources".into()),
                    Stop::AddContext("SubagentStop hook blocking error: cite your sources".into()),
                ])
            }
        })
        .compile()
        .unwrap();
    let lead = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("research", json!({ "prompt": "what is tower?" }))
                .text("Done."),
        )
        .tool(researcher.into_tool("research", "Researches a question"))
        .hooks(hooks)
        .build();
    let resp = lead.run("find out").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);

    let requests = sub_model.requests();
    let seen = |i: usize| -> Vec<(Role, String)> {
        requests[i]
            .messages
            .iter()
            .map(|m| (m.role, m.text().into_owned()))
            .collect()
    };
    let start = [
        (Role::System, "You research.".to_owned()),
        (Role::User, "what is tower?".to_owned()),
        (Role::System, "the user reads Rust\n\nbe brief".to_owned()),
    ];
    assert_eq!(seen(0), start, "one hook context after the prompt");
    let mut second = start.to_vec();
    second.extend([
        (Role::Assistant, "tower is a library".to_owned()),
        (Role::User, "cite your sources".to_owned()),
        (
            Role::System,
            "SubagentStop hook blocking error: cite your sources".to_owned(),
        ),
    ]);
    assert_eq!(seen(1), second, "the system prompt stays as it was");
}

#[tokio::test(flavor = "current_thread")]
async fn subagent_stop_matcher_picks_subagents_by_name() {
    let calls = Count::default();
    let c = calls.clone();
    let hooks = Hooks::new()
        .on_subagent_stop("other", move |_i, _x| {
            c.hit();
            Stop::Continue("never".into())
        })
        .compile()
        .unwrap();
    let sub_model = ScriptedModel::new().text("answer").recording();
    let researcher = Agent::builder().model(sub_model.clone()).build();
    let lead = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("research", json!({ "prompt": "q" }))
                .text("Done."),
        )
        .tool(researcher.into_tool("research", "Researches"))
        .hooks(hooks)
        .build();
    let resp = lead.run("go").await.unwrap();

    assert_eq!(calls.get(), 0);
    assert_eq!(sub_model.requests().len(), 1);
    assert_eq!(tool_messages(&resp.messages)[0].text(), "answer");
}

#[tokio::test(flavor = "current_thread")]
async fn subagent_stop_cap_applies() {
    let calls = Count::default();
    let c = calls.clone();
    let hooks = Hooks::new()
        .on_subagent_stop("*", move |_i, _x| {
            c.hit();
            Stop::Continue("again".into())
        })
        .stop_cap(1)
        .compile()
        .unwrap();
    let sub_model = ScriptedModel::from_fn(|_| Ok(ModelResponse::text("answer"))).recording();
    let store = MemoryStore::new();
    let researcher = Agent::builder()
        .model(sub_model.clone())
        .store(store.clone())
        .build();
    let lead = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("research", json!({ "prompt": "q" }))
                .text("Done."),
        )
        .tool(researcher.into_tool("research", "Researches"))
        .hooks(hooks)
        .build();
    let mut stream = lead.stream("go");
    let events: Vec<AgentEvent> = (&mut stream).collect().await;
    let resp = stream.take_response().unwrap().unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(calls.get(), 2);
    assert_eq!(sub_model.requests().len(), 2);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Warning { .. }))
    );
    assert_eq!(tool_messages(&resp.messages)[0].text(), "answer");
    assert!(store.is_empty());
}

// SubagentStop blocks count as Stop blocks do: in a row only with no tool call in between.
// With a cap of 1, a subagent that makes a tool call in every pass is sent back three times
// (no two blocks are consecutive); `stop_hook_active` is true from the second call on.
#[tokio::test(flavor = "current_thread")]
async fn subagent_stop_blocks_are_in_a_row_only_without_a_tool_call_between() {
    let actives: Arc<Mutex<Vec<bool>>> = Arc::default();
    let a = Arc::clone(&actives);
    let hooks = Hooks::new()
        .on_subagent_stop("*", move |input: StopInput, _| {
            let mut actives = a.lock().unwrap();
            actives.push(input.stop_hook_active);
            if actives.len() < 4 {
                Stop::Continue("again".into())
            } else {
                Stop::Finish
            }
        })
        .stop_cap(1)
        .compile()
        .unwrap();
    let mut sub_model = ScriptedModel::new();
    for i in 1..=4 {
        sub_model = sub_model
            .tool_call("note", json!({ "n": i }))
            .text(format!("answer {i}"));
    }
    let sub_model = sub_model.recording();
    let log = Log::new();
    let store = MemoryStore::new();
    let researcher = Agent::builder()
        .model(sub_model.clone())
        .tool(echo("note", &log))
        .store(store.clone())
        .build();
    let lead = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("research", json!({ "prompt": "q" }))
                .text("Done."),
        )
        .tool(researcher.into_tool("research", "Researches"))
        .hooks(hooks)
        .build();
    let mut stream = lead.stream("go");
    let events: Vec<AgentEvent> = (&mut stream).collect().await;
    let resp = stream.take_response().unwrap().unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(*actives.lock().unwrap(), [false, true, true, true]);
    assert_eq!(sub_model.requests().len(), 8);
    assert_eq!(log.entries().len(), 4, "a note per pass");
    assert_eq!(tool_messages(&resp.messages)[0].text(), "answer 4");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::Warning { .. })),
        "{events:?}"
    );
    assert!(store.is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn a_subagent_that_does_not_finish_is_an_error_output_naming_the_outcome() {
    let store = MemoryStore::new();
    let tools = Log::new();
    let researcher = Agent::builder()
        .model(ScriptedModel::from_fn(|_| {
            Ok(ModelResponse::tool_calls([ToolCall::new(
                "",
                "ls",
                json!({}),
            )]))
        }))
        .tool(echo("ls", &tools))
        .max_steps(2)
        .store(store.clone())
        .build();
    let calls = Count::default();
    let c = calls.clone();
    let hooks = Hooks::new()
        .on_subagent_stop("research", move |_i, _x| {
            c.hit();
            Stop::Finish
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("research", json!({ "prompt": "q" }))
        .text("Done.")
        .recording();
    let lead = Agent::builder()
        .model(model.clone())
        .tool(researcher.into_tool("research", "Researches"))
        .hooks(hooks)
        .build();
    let resp = lead.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    let seen = last_tool_message(&model.requests()[1]);
    assert!(seen.is_error);
    assert!(seen.text().contains("research"), "{}", seen.text());
    assert!(seen.text().contains("did not finish"), "{}", seen.text());
    assert!(seen.text().contains("MaxSteps"), "{}", seen.text());
    assert_eq!(calls.get(), 0, "SubagentStop is for finished subagents");
    assert_eq!(tools.entries().len(), 2);
    assert!(store.is_empty());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_timed_out_subagent_call_leaves_no_thread_behind() {
    let store = MemoryStore::new();
    let tools = Log::new();
    let researcher = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("ls", json!({}))
                .tool_call("slow", json!({}))
                .text("never"),
        )
        .tool(echo("ls", &tools))
        .tool(tool_fn("slow", "sleeps", any_object(), |_, _| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, BoxError>("late")
        }))
        .store(store.clone())
        .build();
    let model = ScriptedModel::new()
        .tool_call("research", json!({ "prompt": "q" }))
        .text("Done.")
        .recording();
    let lead = Agent::builder()
        .model(model.clone())
        .tool(researcher.into_tool("research", "Researches"))
        .tool_layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(10)))
        .build();
    let resp = lead.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    let seen = last_tool_message(&model.requests()[1]);
    assert!(seen.is_error, "{}", seen.text());
    assert_eq!(
        tools.entries().len(),
        1,
        "the subagent got past its first step"
    );
    // The dropped call's thread is deleted in the background.
    tokio::task::yield_now().await;
    assert!(store.is_empty(), "left behind: {store:?}");
}

// ===== sync and async callbacks =====

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn async_callbacks_work_for_every_event() {
    let nap = || tokio::time::sleep(Duration::from_secs(1));
    let log = Log::new();
    let stops = Count::default();
    let s = stops.clone();
    let hooks = Hooks::new()
        .on_session_start(move |_x| async move {
            nap().await;
            SessionStart::AddContext("async start".into())
        })
        .on_user_prompt(move |p: Arc<str>, _x| async move {
            nap().await;
            UserPrompt::Rewrite(format!("{p}!"))
        })
        .before_model(move |mut req: ModelRequest| async move {
            nap().await;
            req.append_system("async model");
            BeforeModel::Continue(req)
        })
        .after_model(move |resp: ModelResponse, _x| async move {
            nap().await;
            resp
        })
        .before_tool_use("bash", move |call: Arc<ToolCall>, _x| async move {
            nap().await;
            let mut args = call.arguments.clone();
            args["async"] = json!(true);
            PreToolUse::Rewrite(args)
        })
        .after_tool_use("bash", move |_c, _o, _x| async move {
            nap().await;
            PostToolUse::AddContext("async post".into())
        })
        .on_tool_failure("fail", move |_c, _f, _x| async move {
            nap().await;
            PostToolUseFailure::AddContext("async failure".into())
        })
        .on_stop(move |i: StopInput, _x| {
            let s = s.clone();
            async move {
                nap().await;
                s.hit();
                if i.stop_hook_active {
                    Stop::Finish
                } else {
                    Stop::Continue("async stop".into())
                }
            }
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_calls([("bash", json!({})), ("fail", json!({}))])
        .text("first")
        .text("second")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(echo("bash", &log))
        .tool(tool_fn("fail", "fails", any_object(), |_, _| async {
            Err::<String, BoxError>("nope".into())
        }))
        .hooks(hooks)
        .build();
    let started = tokio::time::Instant::now();
    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert!(started.elapsed() >= Duration::from_secs(5), "hooks awaited");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].messages[1].text(), "go!");
    assert_eq!(requests[0].messages[2].text(), "async start");
    assert_eq!(system_text(&requests[0]), "async model");
    assert_eq!(log.entries(), [r#"bash ran {"async":true}"#]);
    let outputs = tool_messages(&resp.messages);
    assert_eq!(outputs[0].text(), "{\"async\":true}");
    assert_eq!(outputs[1].text(), "tool `fail` failed: nope");
    assert_eq!(
        context_after_results(&requests[1]).as_deref(),
        Some("async post\n\nasync failure")
    );
    assert_eq!(stops.get(), 2);
    assert_eq!(user_texts(&resp), ["go!", "async stop"]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn sync_and_async_hooks_mix_in_one_chain() {
    let log = Log::new();
    let seen = Log::new();
    let s = seen.clone();
    let hooks = Hooks::new()
        .before_tool_use("bash", |_c, _x| PreToolUse::Rewrite(json!({ "step": 1 })))
        .before_tool_use("bash", move |call: Arc<ToolCall>, _x| {
            let s = s.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                s.push(call.arguments.to_string());
                PreToolUse::Rewrite(json!({ "step": 2 }))
            }
        })
        .before_tool_use("bash", pre(&seen, "sync", PreToolUse::Allow))
        .compile()
        .unwrap();
    let model = one_call("bash", json!({}));
    agent_with(&model, &log, hooks).run("go").await.unwrap();

    assert_eq!(seen.entries(), [r#"{"step":1}"#, r#"sync bash {"step":2}"#]);
    assert_eq!(log.entries(), [r#"bash ran {"step":2}"#]);
}

// ===== the layers on their own =====

fn request(name: &str, args: Value) -> ToolRequest {
    ToolRequest::new(ToolCall::new("id-1", name, args), RunContext::new())
}

#[tokio::test(flavor = "current_thread")]
async fn tool_layer_works_in_a_service_builder_stack() {
    let log = Log::new();
    let post_calls = Count::default();
    let p = post_calls.clone();
    let set = Hooks::new()
        .before_tool_use("bash", |call: Arc<ToolCall>, _x| {
            if call.arguments["command"] == "rm" {
                PreToolUse::Deny("no rm".into())
            } else {
                PreToolUse::Rewrite(json!({ "command": "ls -la" }))
            }
        })
        .before_tool_use("write", |_c, _x| PreToolUse::Ask("check".into()))
        .after_tool_use("bash", move |_c, _o, _x| {
            p.hit();
            PostToolUse::AddContext("listed".into())
        })
        .on_tool_failure("boom", |_c, _f, _x| {
            PostToolUseFailure::AddContext("hint".into())
        })
        .compile()
        .unwrap();
    let router = ToolRouter::new()
        .tool(echo("bash", &log))
        .tool(echo("write", &log))
        .tool(echo("ls", &log))
        .tool(tool_fn("boom", "fails", any_object(), |_, _| async {
            Err::<String, BoxError>("kaput".into())
        }))
        .tool(tool_fn("silent", "fails", any_object(), |_, _| async {
            Err::<String, BoxError>("quietly".into())
        }));
    let mut svc = ServiceBuilder::new()
        .layer(set.tool_layer())
        .service(router);

    let out = svc
        .ready()
        .await
        .unwrap()
        .call(request("bash", json!({ "command": "rm" })))
        .await
        .unwrap();
    assert_eq!(
        out,
        ToolOutput::error("id-1", "PreToolUse:bash hook error: no rm")
    );

    let out = svc
        .ready()
        .await
        .unwrap()
        .call(request("bash", json!({ "command": "ls" })))
        .await
        .unwrap();
    // The result is the tool's; the hook's context travels with it, for the loop to place.
    assert_eq!(out.content, "{\"command\":\"ls -la\"}");
    assert_eq!(out.contexts().collect::<Vec<_>>(), ["listed"]);
    assert!(!out.is_error);
    assert_eq!(out.call_id, "id-1");
    assert_eq!(post_calls.get(), 1);

    let out = svc
        .ready()
        .await
        .unwrap()
        .call(request("write", json!({})))
        .await
        .unwrap();
    assert_eq!(out, ToolOutput::error("id-1", "check"));

    let out = svc
        .ready()
        .await
        .unwrap()
        .call(request("ls", json!({ "x": 1 })))
        .await
        .unwrap();
    assert_eq!(out, ToolOutput::text("id-1", r#"{"x":1}"#));

    let out = svc
        .ready()
        .await
        .unwrap()
        .call(request("boom", json!({})))
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(out.contexts().collect::<Vec<_>>(), ["hint"]);
    assert_eq!(out.content, "tool `boom` failed: kaput");

    // No hook for it: the error passes through for the caller to handle.
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(request("silent", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "quietly");

    assert_eq!(
        log.entries(),
        [r#"bash ran {"command":"ls -la"}"#, r#"ls ran {"x":1}"#]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn tool_layer_asks_its_approval_service() {
    let log = Log::new();
    let asked = Arc::default();
    let set = Hooks::new()
        .before_tool_use("write", |_c, _x| PreToolUse::Ask("check".into()))
        .approval(approval_log(&asked, ApprovalDecision::Allow))
        .compile()
        .unwrap();
    let svc = ServiceBuilder::new()
        .layer(set.tool_layer())
        .service(ToolRouter::new().tool(echo("write", &log)));

    let out = svc.oneshot(request("write", json!({}))).await.unwrap();
    assert_eq!(out, ToolOutput::text("id-1", "{}"));
    assert_eq!(asked.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn model_layer_works_in_a_service_builder_stack() {
    let set = Hooks::new()
        .before_model(|mut req: ModelRequest| {
            req.append_system("layered");
            BeforeModel::Continue(req)
        })
        .after_model(|mut resp: ModelResponse, _x| {
            resp.message.push_text(" (checked)");
            resp
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("hello").recording();
    let svc = ServiceBuilder::new()
        .layer(set.model_layer())
        .service(model.clone());

    let resp = svc
        .oneshot(ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    assert_eq!(resp.message.text(), "hello (checked)");
    assert_eq!(system_text(&model.requests()[0]), "layered");
}

/// The hook layer times a call only for hooks that read the time (command hooks'
/// `duration_ms`): a Rust PostToolUse hook's output carries no `DURATION_MS`, and pays nothing
/// for it.
#[tokio::test]
async fn a_rust_post_tool_use_hook_sees_no_timing() {
    let seen: Arc<Mutex<Vec<bool>>> = Arc::default();
    let log = Arc::clone(&seen);
    let hooks = Hooks::new().after_tool_use("*", move |_call, out, _| {
        log.lock().unwrap().push(
            out.metadata
                .contains_key(tower_agent::layers::hooks::DURATION_MS),
        );
        PostToolUse::Keep
    });
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("echo", json!({}))
                .text("done"),
        )
        .tool(tool_fn(
            "echo",
            "Echoes",
            json!({"type": "object"}),
            |a: Value, _| async move { Ok::<_, BoxError>(a) },
        ))
        .hooks(hooks.compile().unwrap())
        .build();
    agent.run("go").await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [false]);
}
