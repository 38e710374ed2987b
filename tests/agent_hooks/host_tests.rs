//! What the host promises beyond the kit: escalations parked as the crate's approvals across a
//! restart, the order against Claude Code settings hooks, no eager tool dispatch before
//! `post_model_call`, failing tools and interceptors, the §10.3 record of a context the host
//! cannot build.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use agent_hooks::{AgentContext, InterceptionRecord, Interceptor, Verdict, verdict_from_wire};
use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{Outcome, interrupt::Approvals},
    agent_hooks::{AgentHooks, async_trait},
    model::ScriptedModel,
    tool::tool_fn,
};

type Records = Arc<Mutex<Vec<InterceptionRecord>>>;

/// An interceptor answering from a closure over the context.
struct Policy<F>(F);

#[async_trait]
impl<F: Fn(&AgentContext) -> Value + Send + Sync> Interceptor for Policy<F> {
    async fn intercept(&self, ctx: &AgentContext) -> Verdict {
        verdict_from_wire(&(self.0)(ctx)).expect("a verdict")
    }
}

fn point(ctx: &AgentContext) -> &str {
    ctx["interception_point"].as_str().unwrap_or_default()
}

fn recorded(hooks: AgentHooks) -> (AgentHooks, Records) {
    let records: Records = Arc::default();
    let sink = Arc::clone(&records);
    (
        hooks.on_record(move |r| sink.lock().unwrap().push(r.clone())),
        records,
    )
}

/// The record of the first emission at `at`.
fn record_at(records: &Records, at: &str) -> Value {
    let records = records.lock().unwrap();
    let r = records
        .iter()
        .find(|r| r.interception_point.as_str() == at)
        .unwrap_or_else(|| panic!("no {at} record"));
    serde_json::to_value(r).unwrap()
}

/// A tool that counts its runs.
fn counted(name: &'static str, runs: &Arc<AtomicUsize>) -> impl tower_agent::tool::Tool + use<> {
    let runs = Arc::clone(runs);
    tool_fn(
        name,
        "Counts",
        json!({"type": "object"}),
        move |args: Value, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, BoxError>(format!("{name} ran with {args}")) }
        },
    )
}

/// Escalates every `send_email` (a liftable deny, §9), allows the rest.
fn escalating() -> AgentHooks {
    AgentHooks::builder()
        .interceptor(Policy(|ctx: &AgentContext| {
            if point(ctx) == "pre_tool_call" && ctx["tool_call"]["name"] == "send_email" {
                json!({"decision": "deny", "reason": "policy:needs_a_person", "approval": {}})
            } else {
                json!({"decision": "allow"})
            }
        }))
        .park_escalations()
        .build()
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalation_waits_in_the_thread_across_a_restart_and_runs_once_approved() {
    use tower_agent::store::Sqlite;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = |model: ScriptedModel, hooks: AgentHooks| {
        Agent::builder()
            .model(model)
            .tool(counted("send_email", &runs))
            .store(Sqlite::open(&path).unwrap())
            .hooks(hooks)
            .build()
    };
    let (hooks, first_records) = recorded(escalating());
    let first = agent(
        ScriptedModel::new().tool_call("send_email", json!({"to": "ada"})),
        hooks,
    );
    let resp = first
        .run(AgentRequest::new("Email Ada.").thread("t1"))
        .await
        .unwrap();
    let Outcome::Interrupted { pending } = &resp.outcome else {
        panic!("{:?}", resp.outcome)
    };
    assert_eq!(pending.len(), 1);
    assert!(
        pending[0].reason.contains("policy:needs_a_person"),
        "{}",
        pending[0].reason
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the call waits");
    let parked = record_at(&first_records, "pre_tool_call");
    assert_eq!(parked["verdict"]["decision"], "deny");
    assert_eq!(
        parked["resolved_by"], "rejection",
        "consulted, not lifted yet"
    );
    let shutdown = record_at(&first_records, "agent_shutdown");
    assert_eq!(shutdown["verdict"]["decision"], "allow");
    drop(first);

    // Another agent on the same file: the process restarted.
    let (hooks, records) = recorded(escalating());
    let second = agent(ScriptedModel::new().text("Sent."), hooks);
    let id = pending[0].id.clone();
    let resp = second
        .run(AgentRequest::approvals("t1", Approvals::new().approve(&id)))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "Sent.");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "approved: runs once");
    let lifted = record_at(&records, "pre_tool_call");
    assert_eq!(lifted["verdict"]["decision"], "allow");
    assert_eq!(lifted["resolved_by"], "approval");

    // A person's deny: the call never runs.
    let (hooks, _) = recorded(escalating());
    let third = agent(
        ScriptedModel::new()
            .tool_call("send_email", json!({"to": "all"}))
            .text("Not sent."),
        hooks,
    );
    let resp = third
        .run(AgentRequest::new("Email everyone.").thread("t1"))
        .await
        .unwrap();
    let Outcome::Interrupted { pending } = &resp.outcome else {
        panic!("{:?}", resp.outcome)
    };
    let (hooks, _) = recorded(escalating());
    let fourth = agent(ScriptedModel::new().text("Not sent."), hooks);
    let decisions = Approvals::new().deny(&pending[0].id, "not to everyone");
    let resp = fourth
        .run(AgentRequest::approvals("t1", decisions))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "denied: never runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_deny_is_not_parked() {
    let runs = Arc::new(AtomicUsize::new(0));
    let hooks = AgentHooks::builder()
        .interceptor(Policy(|ctx: &AgentContext| match point(ctx) {
            "pre_tool_call" => json!({"decision": "deny", "reason": "policy:never"}),
            _ => json!({"decision": "allow"}),
        }))
        .park_escalations()
        .build();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("send_email", json!({}))
                .text("Could not."),
        )
        .tool(counted("send_email", &runs))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let result = resp
        .messages
        .iter()
        .find(|m| m.tool_call_id.is_some())
        .unwrap();
    assert!(
        result.is_error && result.text().contains("policy:never"),
        "{}",
        result.text()
    );
}

/// Settings whose PreToolUse hook logs the `tool_input` it sees, and denies `rm` commands.
fn settings_hook(dir: &std::path::Path) -> tower_agent::layers::hooks::HookSet {
    use tower_agent::command::CommandHooks;
    let log = dir.join("pre_tool_use.log");
    let script = dir.join("hook.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ninput=$(cat)\necho \"$input\" >> {log}\ncase \"$input\" in *'\"rm '*) echo 'no rm' >&2; exit 2;; esac\nexit 0\n",
            log = log.display()
        ),
    )
    .unwrap();
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [
        {"type": "command", "command": format!("sh {}", script.display())}
    ]}]}});
    CommandHooks::builder()
        .settings_json(settings, "inline")
        .project_dir(dir)
        .transcripts_dir(dir.join("transcripts"))
        .build()
        .unwrap()
        .into_hooks()
        .compile()
        .unwrap()
}

/// Rewrites `bash` commands to `ls` and denies `rm` at `pre_tool_call`.
fn rewriting() -> AgentHooks {
    AgentHooks::builder()
        .interceptor(Policy(|ctx: &AgentContext| {
            let command = ctx.get("tool_call").and_then(|c| c["args"]["command"].as_str()).unwrap_or_default();
            match point(ctx) {
                "pre_tool_call" if command.starts_with("rm ") => {
                    json!({"decision": "deny", "reason": "policy:no_rm"})
                }
                "pre_tool_call" if command != "ls" => json!({"decision": "transform",
                    "reason": "policy:only_ls", "transform": {"path": "$target.command", "value": "ls"}}),
                _ => json!({"decision": "allow"}),
            }
        }))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interceptor_and_a_settings_hook_compose_in_the_order_the_sets_are_given() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("pre_tool_use.log");
    let runs = Arc::new(AtomicUsize::new(0));
    let model = || {
        ScriptedModel::new()
            .tool_call("bash", json!({"command": "cat /etc/passwd"}))
            .tool_call("bash", json!({"command": "rm -rf /"}))
            .text("Done.")
    };
    // The interceptor first: the settings hook sees the rewritten call, never the denied one.
    let agent = Agent::builder()
        .model(model())
        .tool(counted("bash", &runs))
        .hooks(rewriting())
        .hooks(settings_hook(dir.path()))
        .build();
    let resp = agent.run("go").await.unwrap();
    let seen = std::fs::read_to_string(&log).unwrap();
    let inputs: Vec<Value> = seen
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["tool_input"].clone())
        .collect();
    assert_eq!(inputs, [json!({"command": "ls"})], "{seen}");
    let results: Vec<String> = resp
        .messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .map(|m| m.text().into_owned())
        .collect();
    assert!(
        results[0].contains("ran with {\"command\":\"ls\"}"),
        "{results:?}"
    );
    assert!(results[1].contains("policy:no_rm"), "{results:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The settings hook first: it sees the model's calls and denies `rm` itself, so the
    // interceptor never sees that call.
    std::fs::remove_file(&log).unwrap();
    let (hooks, records) = recorded(rewriting());
    let agent = Agent::builder()
        .model(model())
        .tool(counted("bash", &runs))
        .hooks(settings_hook(dir.path()))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();
    let seen = std::fs::read_to_string(&log).unwrap();
    let inputs: Vec<Value> = seen
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["tool_input"].clone())
        .collect();
    assert_eq!(
        inputs,
        [
            json!({"command": "cat /etc/passwd"}),
            json!({"command": "rm -rf /"})
        ]
    );
    let results: Vec<String> = resp
        .messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .map(|m| m.text().into_owned())
        .collect();
    assert!(results[1].contains("no rm"), "{results:?}");
    let pre_tool_calls = records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.interception_point.as_str() == "pre_tool_call")
        .count();
    assert_eq!(
        pre_tool_calls, 1,
        "the interceptor saw only the call the settings let through"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tool_starts_before_the_answer_that_calls_it_is_permitted() {
    for incremental in [false, true] {
        let runs = Arc::new(AtomicUsize::new(0));
        let hooks = AgentHooks::builder()
            .interceptor(Policy(|ctx: &AgentContext| match point(ctx) {
                "post_model_call"
                    if !ctx["response"]["tool_calls"].as_array().unwrap().is_empty() =>
                {
                    json!({"decision": "deny", "reason": "policy:no_tools"})
                }
                _ => json!({"decision": "allow"}),
            }))
            .build();
        let hooks = if incremental {
            hooks.incremental_output()
        } else {
            hooks
        };
        let model = ScriptedModel::new()
            .tool_call("look", json!({"at": "everything"}))
            .streaming(3);
        let agent = Agent::builder()
            .model(model)
            .tool(counted("look", &runs))
            .eager_tools()
            .hooks(hooks)
            .build();
        let resp = agent.run("go").await.unwrap();
        assert!(
            matches!(&resp.outcome, Outcome::Blocked { reason } if reason.contains("policy:no_tools")),
            "{:?}",
            resp.outcome
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0, "incremental: {incremental}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_tool_is_an_error_result_and_failing_interceptors_deny() {
    let failing = tool_fn(
        "fail",
        "Fails",
        json!({"type": "object"}),
        |_, _| async move { Err::<String, BoxError>("disk on fire".into()) },
    );
    // What `post_tool_call` saw of the failure.
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let hooks = AgentHooks::builder()
        .interceptor(Policy(move |ctx: &AgentContext| {
            if point(ctx) == "post_tool_call" {
                sink.lock().unwrap().push(ctx["tool_result"].clone());
            }
            json!({"decision": "allow"})
        }))
        .build();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("fail", json!({}))
                .text("It failed."),
        )
        .tool(failing)
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["is_error"], true);
    let value = seen[0]["value"].as_str().unwrap();
    assert!(
        value.contains("tool `fail` failed") && value.contains("disk on fire"),
        "{value}"
    );
    let result = resp
        .messages
        .iter()
        .find(|m| m.tool_call_id.is_some())
        .unwrap();
    assert!(
        result.is_error && result.text() == value,
        "{}",
        result.text()
    );

    struct Panics;
    #[async_trait]
    impl Interceptor for Panics {
        async fn intercept(&self, _: &AgentContext) -> Verdict {
            panic!("a bug in the policy")
        }
    }
    struct Sleeps;
    #[async_trait]
    impl Interceptor for Sleeps {
        async fn intercept(&self, _: &AgentContext) -> Verdict {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Verdict::allow()
        }
    }
    let cases: [(AgentHooks, &str); 2] = [
        (
            AgentHooks::builder().interceptor(Panics).build(),
            "host_error:interceptor_failed",
        ),
        (
            AgentHooks::builder()
                .interceptor(Sleeps)
                .timeout(Some(Duration::from_millis(50)))
                .build(),
            "host_error:interceptor_timeout",
        ),
    ];
    for (hooks, reason) in cases {
        let (hooks, records) = recorded(hooks);
        let agent = Agent::builder()
            .model(ScriptedModel::new().text("hi"))
            .hooks(hooks)
            .build();
        let resp = agent.run("go").await.unwrap();
        assert!(
            matches!(&resp.outcome, Outcome::Blocked { reason: r } if r.contains(reason)),
            "{:?}",
            resp.outcome
        );
        assert_eq!(
            record_at(&records, "agent_startup")["verdict"]["reason"],
            reason
        );
        assert_eq!(
            record_at(&records, "agent_shutdown")["verdict"]["reason"],
            reason
        );
    }
}

/// §10.3: arguments the identity domain refuses (an integer beyond 2^53, kept by the provider
/// as the model's text) get no context; the host's failure record still carries what the host
/// knows — the run's session, the next sequence number, the time — and the run is blocked.
#[tokio::test]
async fn a_context_the_host_cannot_build_is_recorded_with_its_session_sequence_and_time() {
    let (hooks, records) = recorded(
        AgentHooks::builder()
            .interceptor(Policy(|_: &AgentContext| json!({"decision": "allow"})))
            .build(),
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let raw = r#"{"n": 123456789012345678901234567890}"#;
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("count", json!(raw)))
        .tool(counted("count", &runs))
        .hooks(hooks)
        .build();
    let resp = agent.run("go").await.unwrap();
    assert!(
        matches!(&resp.outcome, Outcome::Blocked { reason } if reason.contains("context_invalid")),
        "{:?}",
        resp.outcome
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let all: Vec<Value> = records
        .lock()
        .unwrap()
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let at = |point: &str| {
        all.iter()
            .position(|r| r["interception_point"] == point)
            .unwrap_or_else(|| panic!("no {point} record: {all:#?}"))
    };
    let (pre, failed) = (&all[at("pre_model_call")], &all[at("post_model_call")]);
    assert_eq!(
        failed["verdict"]["reason"], "host_error:context_invalid",
        "{failed}"
    );
    let session = pre["session_id"].as_str().unwrap();
    assert!(!session.is_empty());
    assert_eq!(failed["session_id"], session, "{failed}");
    assert_eq!(
        failed["sequence"].as_i64(),
        pre["sequence"].as_i64().map(|s| s + 1),
        "{failed}"
    );
    assert!(
        failed["timestamp"].as_str().is_some_and(|t| !t.is_empty()),
        "{failed}"
    );
    // Records stay totally ordered: the run's last emission comes after it.
    let shutdown = &all[at("agent_shutdown")];
    assert_eq!(
        shutdown["sequence"].as_i64(),
        failed["sequence"].as_i64().map(|s| s + 1)
    );
}
