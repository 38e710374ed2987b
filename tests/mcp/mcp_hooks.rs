//! Command hooks and MCP, with full agent runs (scripted model) against an in-process `rmcp`
//! server over streamable HTTP on 127.0.0.1:
//! - `mcp_tool` handlers (issue 14, item 3): `${path}` substitution, the tool's text read
//!   like a command's stdout (a PreToolUse deny, UserPromptSubmit context), `isError`, a
//!   server not connected or unknown, a hanging tool cancelled at the handler's `timeout`,
//!   configuration errors;
//! - the `Elicitation` and `ElicitationResult` events around the elicitation service (item
//!   4), with real shell scripts: answer in the user's place, exit 2, override, the inputs.

use crate::support;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rmcp::{
    ErrorData, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    },
    service::{RequestContext, RoleServer},
};
use serde_json::{Value, json};
use tower::{Layer, service_fn, util::BoxCloneSyncService};
use tower_agent::{
    Agent, AgentResponse, BoxError,
    command::{CommandHooks, HookEvent},
    mcp::client::{ElicitationRequest, ElicitationResponse, HttpServer, McpServers},
    model::ScriptedModel,
    tool::tool_fn,
};

use support::{
    command::{Scripts, tool_texts, warnings},
    mcp::serve_http,
};

// ===== the test server =====

/// Records every call's arguments; `scan` answers `answer`.
#[derive(Clone, Default)]
struct HookServer {
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    answer: Arc<Mutex<String>>,
}

impl HookServer {
    fn answering(answer: &str) -> Self {
        let s = HookServer::default();
        *s.answer.lock().unwrap() = answer.to_owned();
        s
    }

    fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

impl ServerHandler for HookServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = ["scan", "fail", "hang", "ask", "ask_url"]
            .iter()
            .map(|n| json!({"name": n, "description": n, "inputSchema": {"type": "object"}}))
            .collect();
        Ok(serde_json::from_value(json!({ "tools": tools })).unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        self.calls
            .lock()
            .unwrap()
            .push((request.name.to_string(), args));
        let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
        let elicit = |params: Value| async move {
            let params: ElicitRequestParams = serde_json::from_value(params).unwrap();
            match context.peer.create_elicitation(params).await {
                Ok(r) => format!(
                    "{}:{}",
                    serde_json::to_value(r.action).unwrap().as_str().unwrap(),
                    r.content.map(|c| c.to_string()).unwrap_or_default()
                ),
                Err(e) => format!("elicitation failed: {e}"),
            }
        };
        let result = match request.name.as_ref() {
            "scan" => text(self.answer.lock().unwrap().clone()),
            "fail" => {
                json!({"content": [{"type": "text", "text": "scan failed"}], "isError": true})
            }
            "hang" => std::future::pending().await,
            "ask" => text(
                elicit(json!({"mode": "form", "message": "Your name?",
                    "requestedSchema": {"type": "object",
                        "properties": {"name": {"type": "string"}}, "required": ["name"]}}))
                .await,
            ),
            "ask_url" => text(
                elicit(json!({"mode": "url", "message": "Please sign in",
                    "url": "https://auth.example.com/login", "elicitationId": "el-7"}))
                .await,
            ),
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        let result: CallToolResult = serde_json::from_value(result).unwrap();
        Ok(result.into())
    }
}

/// A connected set with the server as `t`.
async fn connected(server: &HookServer) -> McpServers {
    let url = serve_http(server.clone()).await;
    let mcp = McpServers::builder()
        .server("t", HttpServer::new(url))
        .build();
    mcp.connect().await.unwrap();
    mcp
}

fn hooks_with(s: &Scripts, mcp: &McpServers, hooks: Value) -> CommandHooks {
    CommandHooks::builder()
        .settings_json(json!({ "hooks": hooks }), "settings.json")
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"))
        .mcp(mcp.clone())
        .build()
        .unwrap()
}

/// `{event: [{matcher, hooks: [{type: mcp_tool, server, tool, ...extra}]}]}`.
fn mcp_on(event: &str, matcher: &str, server: &str, tool: &str, extra: Value) -> Value {
    let mut handler = json!({ "type": "mcp_tool", "server": server, "tool": tool });
    if let Value::Object(extra) = extra {
        handler.as_object_mut().unwrap().extend(extra);
    }
    json!({ event: [{ "matcher": matcher, "hooks": [handler] }] })
}

/// A `Write` tool that records its arguments.
fn write_tool(seen: &Arc<Mutex<Vec<Value>>>) -> impl tower_agent::tool::Tool {
    let seen = Arc::clone(seen);
    tool_fn(
        "Write",
        "Writes a file",
        json!({"type": "object"}),
        move |args: Value, _| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(args);
                Ok::<_, BoxError>("written")
            }
        },
    )
}

/// A run where the model calls `Write` once, with `hooks`; the tool's calls and the run's
/// warnings.
async fn write_run(
    mcp: &McpServers,
    hooks: CommandHooks,
) -> (AgentResponse, Vec<Value>, Vec<String>, ScriptedModel) {
    let model = ScriptedModel::new()
        .tool_call(
            "Write",
            json!({"file_path": "/srv/app/main.rs", "content": "fn main() {}",
                   "nested": {"key": "deep"}}),
        )
        .text("done")
        .recording();
    let seen = Arc::default();
    let (hooks, warned) = warnings(hooks.into_hooks());
    let agent = Agent::builder()
        .model(model.clone())
        .stage(mcp.clone())
        .tool(write_tool(&seen))
        .hooks(hooks.compile().unwrap())
        .build();
    let resp = agent.run("write main.rs").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let warned = warned.lock().unwrap().clone();
    (resp, seen, warned, model)
}

// ===== mcp_tool handlers =====

// hooks.md § "MCP tool hook fields": the example, `security_scan` after each Write or Edit
// with `${tool_input.file_path}`; nested strings and the common fields substituted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_mcp_tool_gets_substituted_input() {
    let s = Scripts::new();
    let server = HookServer::answering("no findings");
    let mcp = connected(&server).await;
    let hooks = hooks_with(
        &s,
        &mcp,
        mcp_on(
            "PostToolUse",
            "Write|Edit",
            "t",
            "scan",
            json!({"input": {"file_path": "${tool_input.file_path}",
                "meta": {"session": "${session_id}", "list": ["${tool_input.nested.key}", 3]},
                "missing": "[${tool_input.nope}]", "event": "${hook_event_name}"}}),
        ),
    );
    let (resp, seen, warned, _) = write_run(&mcp, hooks).await;
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(seen.len(), 1, "the tool ran");
    let calls = server.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let (tool, args) = &calls[0];
    assert_eq!(tool, "scan", "called by the server's own name");
    assert_eq!(args["file_path"], "/srv/app/main.rs");
    assert_eq!(args["meta"]["list"], json!(["deep", 3]));
    assert_eq!(args["missing"], "[]", "a missing path is the empty string");
    assert_eq!(args["event"], "PostToolUse");
    assert!(
        !args["meta"]["session"].as_str().unwrap().is_empty(),
        "{args}"
    );
    assert!(warned.is_empty(), "{warned:?}");
}

// The tool's text is read like command stdout on exit 0: a PreToolUse deny JSON denies
// the call and the model sees the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_mcp_tool_json_denies_the_call() {
    let s = Scripts::new();
    let server = HookServer::answering(
        &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "scanner: writes to /srv are forbidden"}})
        .to_string(),
    );
    let mcp = connected(&server).await;
    let hooks = hooks_with(
        &s,
        &mcp,
        mcp_on(
            "PreToolUse",
            "Write",
            "t",
            "scan",
            json!({"input": {"path": "${tool_input.file_path}"}}),
        ),
    );
    let (resp, seen, _, model) = write_run(&mcp, hooks).await;
    assert!(seen.is_empty(), "the call was denied: {seen:?}");
    assert_eq!(server.calls()[0].1["path"], "/srv/app/main.rs");
    let texts = tool_texts(&resp);
    assert!(
        texts[0].contains("scanner: writes to /srv are forbidden"),
        "{texts:?}"
    );
    // The model's next request carries the reason.
    let last = &model.requests()[1];
    assert!(
        last.messages
            .iter()
            .any(|m| m.text().contains("writes to /srv are forbidden"))
    );
}

// Plain text on UserPromptSubmit (exit-0 stdout) becomes context after the prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_prompt_submit_mcp_tool_text_is_context() {
    let s = Scripts::new();
    let server = HookServer::answering("The deploy target is staging.");
    let mcp = connected(&server).await;
    let hooks = hooks_with(
        &s,
        &mcp,
        json!({"UserPromptSubmit": [{"hooks": [{"type": "mcp_tool", "server": "t",
            "tool": "scan", "input": {"prompt": "${prompt}"}}]}]}),
    );
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .stage(mcp.clone())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("deploy it").await.unwrap();
    assert!(resp.outcome.is_finished());
    assert_eq!(server.calls()[0].1["prompt"], "deploy it");
    let texts: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    let at = texts.iter().position(|t| t == "deploy it").expect("prompt");
    assert!(
        texts[at + 1..]
            .iter()
            .any(|t| t.contains("The deploy target is staging.")),
        "{texts:?}"
    );
}

// `isError: true` is a non-blocking error: the call proceeds, with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_error_is_a_non_blocking_error() {
    let s = Scripts::new();
    let server = HookServer::default();
    let mcp = connected(&server).await;
    let hooks = hooks_with(
        &s,
        &mcp,
        mcp_on("PreToolUse", "Write", "t", "fail", json!({})),
    );
    let (resp, seen, warned, _) = write_run(&mcp, hooks).await;
    assert!(resp.outcome.is_finished());
    assert_eq!(seen.len(), 1, "the call proceeded");
    assert_eq!(tool_texts(&resp), ["written"]);
    assert!(
        warned
            .iter()
            .any(|w| w.contains("returned an error: scan failed")),
        "{warned:?}"
    );
}

// A server configured but never connected, and an unknown server: non-blocking errors; the
// hook does not connect the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_connected_or_unknown_server_is_a_non_blocking_error() {
    let s = Scripts::new();
    let server = HookServer::answering(
        &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny"}})
        .to_string(),
    );
    let url = serve_http(server.clone()).await;
    // Configured, never connected (not staged, `connect` never called).
    let idle = McpServers::builder()
        .server("t", HttpServer::new(url))
        .build();
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [
                {"type": "mcp_tool", "server": "t", "tool": "scan"},
                {"type": "mcp_tool", "server": "nope", "tool": "scan"},
            ]}]}}),
            "settings.json",
        )
        .project_dir(s.dir.path())
        .without_transcripts()
        .mcp(idle.clone())
        .build()
        .unwrap();
    let (resp, seen, warned, _) = write_run(&McpServers::builder().build(), hooks).await;
    assert!(resp.outcome.is_finished());
    assert_eq!(seen.len(), 1, "the call proceeded: {warned:?}");
    assert!(server.calls().is_empty(), "nothing reached the server");
    assert!(idle.tool_specs().is_empty(), "the hook connected nothing");
    assert!(
        warned
            .iter()
            .any(|w| w.contains("the MCP server `t` is not connected")),
        "{warned:?}"
    );
    assert!(
        warned
            .iter()
            .any(|w| w.contains("no MCP server named `nope` is configured")),
        "{warned:?}"
    );
}

// A tool that never answers is cancelled at the handler's `timeout`; the call proceeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_tool_is_cancelled_at_the_timeout() {
    let s = Scripts::new();
    let server = HookServer::default();
    let mcp = connected(&server).await;
    let hooks = hooks_with(
        &s,
        &mcp,
        mcp_on("PreToolUse", "Write", "t", "hang", json!({"timeout": 0.5})),
    );
    let started = Instant::now();
    // `hang` never answers: the call ends at the 0.5 s timeout or not at all.
    let (resp, seen, warned, _) = crate::support::within("the run", write_run(&mcp, hooks)).await;
    let took = started.elapsed();
    assert!(resp.outcome.is_finished());
    assert_eq!(seen.len(), 1, "the call proceeded");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(
        warned
            .iter()
            .any(|w| w.contains("timed out after 500ms; cancelled")),
        "{warned:?}"
    );
}

// Configuration errors name the JSON path; without servers the handler is skipped with a
// warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_errors_name_the_path() {
    let mcp = McpServers::builder().build();
    for (handler, path, message) in [
        (
            json!({"type": "mcp_tool", "tool": "x"}),
            "hooks.PreToolUse[0].hooks[0]",
            "missing `server`",
        ),
        (
            json!({"type": "mcp_tool", "server": "s"}),
            "hooks.PreToolUse[0].hooks[0]",
            "missing `tool`",
        ),
        (
            json!({"type": "mcp_tool", "server": 3, "tool": "x"}),
            "hooks.PreToolUse[0].hooks[0].server",
            "must be a string",
        ),
        (
            json!({"type": "mcp_tool", "server": "s", "tool": ["x"]}),
            "hooks.PreToolUse[0].hooks[0].tool",
            "must be a string",
        ),
        (
            json!({"type": "mcp_tool", "server": "s", "tool": ""}),
            "hooks.PreToolUse[0].hooks[0].tool",
            "must not be empty",
        ),
        (
            json!({"type": "mcp_tool", "server": "s", "tool": "x", "input": "a"}),
            "hooks.PreToolUse[0].hooks[0].input",
            "must be an object",
        ),
        (
            json!({"type": "mcp_tool", "server": "s", "tool": "x", "timeout": -1}),
            "hooks.PreToolUse[0].hooks[0].timeout",
            "positive number",
        ),
        (
            json!({"type": "mcp_tool", "server": "s", "tool": "x", "persistent": true}),
            "hooks.PreToolUse[0].hooks[0].persistent",
            "only `command`",
        ),
    ] {
        let err = CommandHooks::builder()
            .settings_json(
                json!({"hooks": {"PreToolUse": [{"hooks": [handler.clone()]}]}}),
                "settings.json",
            )
            .mcp(mcp.clone())
            .build()
            .unwrap_err();
        assert_eq!(err.file(), "settings.json");
        assert_eq!(err.path(), path, "{handler}: {err}");
        assert!(err.message().contains(message), "{handler}: {err}");
    }
    // Loaded, with servers; skipped with a warning without.
    let ok = json!({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "mcp_tool", "server": "s", "tool": "x"}]}]}});
    let hooks = CommandHooks::builder()
        .settings_json(ok.clone(), "settings.json")
        .mcp(mcp)
        .build()
        .unwrap();
    assert_eq!(hooks.commands(HookEvent::PreToolUse), ["mcp_tool s/x"]);
    let hooks = CommandHooks::builder()
        .settings_json(ok, "settings.json")
        .build()
        .unwrap();
    assert!(hooks.commands(HookEvent::PreToolUse).is_empty());
    assert!(
        hooks.warnings()[0].contains("`mcp_tool` hooks need MCP servers"),
        "{:?}",
        hooks.warnings()
    );
}

// ===== Elicitation / ElicitationResult =====

/// The user's service: counts its calls, answers `answer`.
fn user_service(
    answer: ElicitationResponse,
) -> (
    BoxCloneSyncService<ElicitationRequest, ElicitationResponse, BoxError>,
    Arc<AtomicUsize>,
) {
    let called = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&called);
    let svc = service_fn(move |_req: ElicitationRequest| {
        c.fetch_add(1, Ordering::SeqCst);
        let answer = answer.clone();
        async move { Ok::<_, BoxError>(answer) }
    });
    (BoxCloneSyncService::new(svc), called)
}

/// A script that saves its input to `<name>.json` in the scripts dir, then runs `then`.
fn dump(s: &Scripts, name: &str, then: &str) -> String {
    let out = s.path(&format!("{name}.json"));
    s.bash(name, &format!("cat > '{}'\n{then}", out.display()))
}

fn input(s: &Scripts, name: &str) -> Value {
    serde_json::from_str(&s.read(&format!("{name}.json"))).unwrap_or(Value::Null)
}

/// A run where the model calls `mcp__t__<tool>` once (the server elicits during it), with
/// `hooks` (the events' command handlers) around the user's service; the tool's text, and
/// the run's session id (from a UserPromptSubmit hook's input).
async fn elicit_run(
    s: &Scripts,
    tool: &str,
    hooks: Value,
    user: BoxCloneSyncService<ElicitationRequest, ElicitationResponse, BoxError>,
) -> (String, String) {
    let mut hooks = hooks;
    let prompt = dump(s, "prompt", "");
    hooks.as_object_mut().unwrap().insert(
        "UserPromptSubmit".into(),
        json!([{"hooks": [{"type": "command", "command": prompt}]}]),
    );
    let command_hooks = CommandHooks::builder()
        .settings_json(json!({ "hooks": hooks }), "settings.json")
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"))
        .build()
        .unwrap();
    let server = HookServer::default();
    let url = serve_http(server).await;
    let mcp = McpServers::builder()
        .server("t", HttpServer::new(url))
        .elicitation(BoxCloneSyncService::new(
            command_hooks.elicitation_layer().layer(user),
        ))
        .build();
    let model = ScriptedModel::new()
        .tool_call(format!("mcp__t__{tool}"), json!({}))
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .stage(mcp)
        .hooks(command_hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("sign me up").await.unwrap();
    let session = input(s, "prompt")["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (tool_texts(&resp).join("\n"), session)
}

fn handler(event: &str, matcher: &str, command: &str) -> Value {
    json!({ event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}] })
}

// hooks.md § "Elicitation output": `action: accept` + `content` answers in the user's
// place: the server gets the content, the user's service is not called. The input carries
// the documented and the common fields (of the run whose tool call is in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_hook_accepts_in_the_users_place() {
    let s = Scripts::new();
    let hook = dump(
        &s,
        "elicit",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": {"name": "from-hook"}}}'"#,
    );
    let (user, called) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, session) = elicit_run(&s, "ask", handler("Elicitation", "t", &hook), user).await;
    assert_eq!(text, r#"accept:{"name":"from-hook"}"#);
    assert_eq!(called.load(Ordering::SeqCst), 0, "the user was not asked");
    let got = input(&s, "elicit");
    assert_eq!(got["hook_event_name"], "Elicitation");
    assert_eq!(got["mcp_server_name"], "t");
    assert_eq!(got["message"], "Your name?");
    assert_eq!(got["mode"], "form");
    assert_eq!(
        got["requested_schema"]["properties"]["name"]["type"],
        "string"
    );
    assert!(!session.is_empty());
    assert_eq!(got["session_id"], session.as_str(), "the run's session");
    assert!(
        got["transcript_path"]
            .as_str()
            .unwrap()
            .starts_with(&s.path("transcripts").to_string_lossy().into_owned()),
        "{got}"
    );
    assert_eq!(got["cwd"], s.dir.path().to_string_lossy().as_ref());
    // Measured against Claude Code 2.1.328 (tests/reference, vectors mcp_elicitation_*): an
    // Elicitation input has no `permission_mode`.
    assert!(got.get("permission_mode").is_none(), "{got}");
}

// hooks.md § "Exit code 2 behavior per event": Elicitation exit 2 denies the elicitation
// (its JSON is ignored); a matcher naming another server does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_exit_2_declines() {
    let s = Scripts::new();
    let hook = s.bash(
        "deny",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": {"name": "x"}}}'; echo 'no' >&2; exit 2"#,
    );
    let (user, called) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, _) = elicit_run(&s, "ask", handler("Elicitation", "t", &hook), user).await;
    assert_eq!(text, "decline:");
    assert_eq!(called.load(Ordering::SeqCst), 0);
    // A hook for another server: the user answers.
    let s = Scripts::new();
    let hook = s.bash("deny", "exit 2");
    let (user, called) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, _) = elicit_run(&s, "ask", handler("Elicitation", "other", &hook), user).await;
    assert_eq!(text, r#"accept:{"name":"Ada"}"#);
    assert_eq!(called.load(Ordering::SeqCst), 1);
}

// hooks.md § "ElicitationResult": after the user's answer; its `action` overrides (here
// the user's accept becomes decline); exit 2 declines. The input carries the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_result_overrides_the_users_answer() {
    let s = Scripts::new();
    let hook = dump(
        &s,
        "result",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "ElicitationResult", "action": "decline", "content": {}}}'"#,
    );
    let (user, called) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, session) =
        elicit_run(&s, "ask", handler("ElicitationResult", "t", &hook), user).await;
    assert_eq!(text, "decline:");
    assert_eq!(called.load(Ordering::SeqCst), 1, "the user answered first");
    let got = input(&s, "result");
    assert_eq!(got["hook_event_name"], "ElicitationResult");
    assert_eq!(got["mcp_server_name"], "t");
    assert_eq!(got["action"], "accept");
    assert_eq!(got["content"], json!({"name": "Ada"}));
    assert_eq!(got["mode"], "form");
    assert_eq!(got["session_id"], session.as_str());
    // An accept with other content replaces the user's content.
    let s = Scripts::new();
    let hook = s.bash(
        "result",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "ElicitationResult", "action": "accept", "content": {"name": "Grace"}}}'"#,
    );
    let (user, _) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, _) = elicit_run(&s, "ask", handler("ElicitationResult", "t", &hook), user).await;
    assert_eq!(text, r#"accept:{"name":"Grace"}"#);
    // Exit 2: decline.
    let s = Scripts::new();
    let hook = s.bash("result", "exit 2");
    let (user, _) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, _) = elicit_run(&s, "ask", handler("ElicitationResult", "t", &hook), user).await;
    assert_eq!(text, "decline:");
}

// URL mode: the input has `mode: "url"`, `url` and `elicitation_id`; a hook accepts (no
// content).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_mode_elicitation_reaches_the_hooks() {
    let s = Scripts::new();
    let hook = dump(
        &s,
        "elicit",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept"}}'"#,
    );
    let result = dump(&s, "result", "");
    let mut hooks = handler("Elicitation", "t", &hook);
    hooks.as_object_mut().unwrap().extend(
        handler("ElicitationResult", "t", &result)
            .as_object()
            .unwrap()
            .clone(),
    );
    let (user, called) = user_service(ElicitationResponse::Decline);
    let (text, _) = elicit_run(&s, "ask_url", hooks, user).await;
    assert_eq!(text, "accept:");
    assert_eq!(called.load(Ordering::SeqCst), 0);
    let got = input(&s, "elicit");
    assert_eq!(got["mode"], "url");
    assert_eq!(got["url"], "https://auth.example.com/login");
    assert_eq!(got["elicitation_id"], "el-7");
    assert_eq!(got["message"], "Please sign in");
    assert!(got.get("requested_schema").is_none(), "{got}");
    // A hook's answer stands for the user's: ElicitationResult does not run.
    assert_eq!(input(&s, "result"), Value::Null);
}

// Without a user service of their own, the layer over a service that declines everything
// still lets hooks accept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_accept_over_a_decline_everything_service() {
    let s = Scripts::new();
    let hook = s.bash(
        "elicit",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": {"name": "bot"}}}'"#,
    );
    let (decline, _) = user_service(ElicitationResponse::Decline);
    let (text, _) = elicit_run(&s, "ask", handler("Elicitation", "t", &hook), decline).await;
    assert_eq!(text, r#"accept:{"name":"bot"}"#);
}

// Several Elicitation hooks: the most cautious answer wins (cancel over accept); an accept
// whose `content` is not an object declines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_most_cautious_elicitation_answer_wins() {
    let s = Scripts::new();
    let accept = s.bash(
        "accept",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": {"name": "x"}}}'"#,
    );
    let cancel = s.bash(
        "cancel",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "cancel"}}'"#,
    );
    let hooks = json!({"Elicitation": [{"matcher": "t", "hooks": [
        {"type": "command", "command": accept}, {"type": "command", "command": cancel}]}]});
    let (user, called) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, _) = elicit_run(&s, "ask", hooks, user).await;
    assert_eq!(text, "cancel:");
    assert_eq!(called.load(Ordering::SeqCst), 0);
    let s = Scripts::new();
    let bad = s.bash(
        "bad",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": "Ada"}}'"#,
    );
    let (user, _) = user_service(ElicitationResponse::Accept(Some(json!({"name": "Ada"}))));
    let (text, _) = elicit_run(&s, "ask", handler("Elicitation", "t", &bad), user).await;
    assert_eq!(text, "decline:");
}

// Measured against Claude Code 2.1.328 (tests/reference, vector `mcp_tools`): an MCP tool
// call's PreToolUse and PostToolUse inputs name its server (`mcp_server`), and
// `tool_response` is the result's content blocks, in PostToolBatch too. A server given in
// code is `dynamic` (one of a `.mcp.json` file `project`); another tool's inputs have none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_calls_hooks_see_its_server_and_content_blocks() {
    let s = Scripts::new();
    let mut hooks = handler("PreToolUse", "mcp__t__.*", &dump(&s, "pre", ""));
    for (event, name) in [("PostToolUse", "post"), ("PostToolBatch", "batch")] {
        let more = handler(event, "*", &dump(&s, name, ""));
        hooks
            .as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
    }
    let nobody = service_fn(|_| async { Ok(ElicitationResponse::Decline) });
    let (text, _) = elicit_run(&s, "ask", hooks, BoxCloneSyncService::new(nobody)).await;
    assert_eq!(text, "decline:");
    let server = json!({"name": "t", "source": "dynamic"});
    assert_eq!(input(&s, "pre")["mcp_server"], server);
    let post = input(&s, "post");
    assert_eq!(post["mcp_server"], server);
    let blocks = json!([{"type": "text", "text": "decline:"}]);
    assert_eq!(post["tool_response"], blocks);
    assert_eq!(input(&s, "batch")["tool_calls"][0]["tool_response"], blocks);
    assert!(input(&s, "batch").get("mcp_server").is_none());
}
