//! `type: "http"` handlers against a real HTTP server on 127.0.0.1.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tower_agent::{agent::Outcome, command::CommandHooks, model::ScriptedModel};

use crate::{
    loopback::{Reply, Server},
    support::command::{Scripts, agent, tool_text, warnings},
};

/// `{"PreToolUse": [{"matcher": "bash", "hooks": [{type: http, url, ...extra}]}]}`.
fn http_on(event: &str, url: &str, extra: Value) -> Value {
    let mut handler = json!({ "type": "http", "url": url });
    if let Value::Object(extra) = extra {
        handler.as_object_mut().unwrap().extend(extra);
    }
    json!({ event: [{ "matcher": "bash", "hooks": [handler] }] })
}

/// Runs one `bash` call (`echo hi`) under `hooks`: the run, what the tool got, the warnings.
async fn run_bash(hooks: CommandHooks) -> (tower_agent::AgentResponse, Vec<Value>, Vec<String>) {
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "echo hi" }))
        .text("done");
    let (hooks, log) = warnings(hooks.into_hooks());
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let log = log.lock().unwrap().clone();
    (resp, seen, log)
}

// hooks.md § "HTTP hook fields": the input is the POST body, `Content-Type: application/json`;
// `$VAR` / `${VAR}` in header values resolve only for `allowedEnvVars`, others become empty.
// hooks.md § "HTTP response handling": 2xx with an empty body is success (exit 0, no output).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_input_is_posted_and_only_allowed_variables_reach_the_headers() {
    let server = Server::start();
    server.reply(Reply::Whole {
        status: 200,
        headers: vec![],
        body: Vec::new(),
    });
    let s = Scripts::new();
    let url = format!("{}/hooks/pre-tool-use", server.url());
    let hooks = s.hooks(http_on(
        "PreToolUse",
        &url,
        json!({
            "timeout": 10,
            "headers": {
                "Authorization": "Bearer $HOME",
                "X-Braced": "<${HOME}>",
                "X-Not-Allowed": "[${PATH}|$PATH]",
                "X-Plain": "as is: $5",
            },
            "allowedEnvVars": ["HOME"],
        }),
    ));
    let (resp, seen, log) = run_bash(hooks).await;
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(seen.len(), 1, "2xx with an empty body decides nothing");
    assert!(log.is_empty(), "{log:?}");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/hooks/pre-tool-use");
    assert_eq!(req.header("content-type"), Some("application/json"));
    let home = std::env::var("HOME").unwrap();
    assert_eq!(
        req.header("authorization"),
        Some(&*format!("Bearer {home}"))
    );
    assert_eq!(req.header("x-braced"), Some(&*format!("<{home}>")));
    assert_eq!(req.header("x-not-allowed"), Some("[|]"));
    assert_eq!(req.header("x-plain"), Some("as is: $5"));
    // hooks.md § "Common input fields" + § "PreToolUse input".
    let body = &req.body;
    assert_eq!(body["hook_event_name"], "PreToolUse");
    assert_eq!(body["tool_name"], "bash");
    assert_eq!(body["tool_input"], json!({ "command": "echo hi" }));
    assert_eq!(body["session_id"], resp.thread_id.as_str());
    assert!(
        body["tool_use_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert_eq!(body["permission_mode"], "default");
    for field in ["cwd", "transcript_path"] {
        assert!(body[field].is_string(), "{field}: {body}");
    }
}

// hooks.md § "HTTP response handling": a 2xx JSON object body is read with the JSON output
// schema of command hooks, so a `permissionDecision: "deny"` blocks the tool call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2xx_json_deny_blocks_the_tool() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({ "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "the server says no",
        }})
        .to_string(),
    ));
    let s = Scripts::new();
    let (resp, seen, _) = run_bash(s.hooks(http_on("PreToolUse", server.url(), json!({})))).await;
    assert!(seen.is_empty(), "the tool must not run");
    assert_eq!(
        tool_text(&resp),
        "PreToolUse:bash hook error: the server says no"
    );
}

// hooks.md § "HTTP response handling": a non-2xx status, a 2xx body that is not a JSON object
// and a connection failure are non-blocking errors: execution continues (even when the body
// of the error response holds a deny).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_2xx_plain_text_and_connection_failures_do_not_block() {
    let deny = json!({ "hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "no" }})
    .to_string();
    let server = Server::start();
    server.reply(Reply::status(500, deny.clone()));
    server.reply(Reply::Whole {
        status: 200,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: b"deny please".to_vec(),
    });
    server.reply(Reply::status(302, deny).header("location", "/elsewhere"));
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/", l.local_addr().unwrap())
    };
    let s = Scripts::new();
    for (url, expect) in [
        (server.url().to_owned(), "HTTP 500"),
        (server.url().to_owned(), "not a JSON object: deny please"),
        (server.url().to_owned(), "HTTP 302"),
        (closed, "request failed"),
    ] {
        let (resp, seen, log) = run_bash(s.hooks(http_on("PreToolUse", &url, json!({})))).await;
        assert_eq!(seen.len(), 1, "{expect}: the tool runs");
        assert_eq!(tool_text(&resp), "ran: echo hi");
        assert!(log.iter().any(|w| w.contains(expect)), "{expect}: {log:?}");
    }
    // `failClosed` (this crate's extension) turns the same failure into a deny.
    server.reply(Reply::status(503, "{}"));
    let hooks = s.hooks(http_on(
        "PreToolUse",
        server.url(),
        json!({ "failClosed": true }),
    ));
    let (resp, seen, _) = run_bash(hooks).await;
    assert!(seen.is_empty());
    assert!(
        tool_text(&resp).contains("HTTP 503"),
        "{}",
        tool_text(&resp)
    );
}

// hooks.md § "Timeouts" / § "HTTP response handling": a hook that reaches its timeout is
// cancelled, renders no decision, and the tool call goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_is_cancelled_and_does_not_block() {
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    let held: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
    let h = Arc::clone(&held);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            h.lock().unwrap().push(conn);
        }
    });
    let s = Scripts::new();
    // The server never answers: the call ends at the hook's 1 s timeout or not at all.
    let (resp, seen, log) = crate::support::within(
        "the run",
        run_bash(s.hooks(http_on("PreToolUse", &url, json!({ "timeout": 1 })))),
    )
    .await;
    assert_eq!(seen.len(), 1);
    assert_eq!(resp.outcome, Outcome::Finished);
    assert!(
        log.iter().any(|w| w.contains("timed out after 1s")),
        "{log:?}"
    );
    assert!(!held.lock().unwrap().is_empty(), "the hook did connect");
}

// The response body cap (module docs, 1 MiB): a body of 400 MB is not read past the cap, is
// a non-blocking error, and the hook's answer is ignored; with a `Content-Length` over the
// cap nothing of the body is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_body_is_capped_while_it_is_read() {
    const HUGE: u64 = 400 << 20;
    let s = Scripts::new();
    for with_length in [false, true] {
        let server = Server::start();
        let reply = Reply::generated(200, "application/json", "{\"x\": \"", b'a', HUGE, "\"}");
        server.reply(if with_length {
            reply.with_content_length()
        } else {
            reply
        });
        let (resp, seen, log) = crate::support::within(
            "the run",
            run_bash(s.hooks(http_on("PreToolUse", server.url(), json!({})))),
        )
        .await;
        assert_eq!(seen.len(), 1, "the tool runs");
        assert_eq!(resp.outcome, Outcome::Finished);
        assert!(
            log.iter().any(|w| w.contains("a body over 1048576 bytes")),
            "{log:?}"
        );
        // What the server handed out: the cap, plus what sits in socket buffers.
        let sent = server.generated_bytes();
        assert!(
            sent < 32 << 20,
            "{sent} bytes were pulled from a {HUGE}-byte body"
        );
    }
}

// hooks.md § "Prompt-based hooks": SessionStart supports neither `http` nor `prompt` nor
// `agent` hooks; they load with a warning. An `http` handler without `url` is an error.
#[test]
fn where_http_hooks_do_not_apply() {
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({ "hooks": { "SessionStart": [{ "hooks": [{ "type": "http", "url": "http://127.0.0.1:9/" }] }] } }),
            "settings.json",
        )
        .build()
        .unwrap();
    assert!(
        hooks
            .commands(tower_agent::command::HookEvent::SessionStart)
            .is_empty()
    );
    assert!(
        hooks.warnings()[0].contains("do not run on SessionStart"),
        "{:?}",
        hooks.warnings()
    );
    for (handler, message) in [
        (json!({ "type": "http" }), "missing `url`"),
        (
            json!({ "type": "http", "url": "ftp://x/" }),
            "http or https",
        ),
        (
            json!({ "type": "http", "url": "http://x/", "headers": { "Bad Name": "v" } }),
            "header name",
        ),
        (
            json!({ "type": "http", "url": "http://x/", "persistent": true }),
            "only `command`",
        ),
    ] {
        let err = CommandHooks::builder()
            .settings_json(
                json!({ "hooks": { "Stop": [{ "hooks": [handler] }] } }),
                "s.json",
            )
            .build()
            .unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
    }
}
