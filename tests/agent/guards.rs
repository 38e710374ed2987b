//! SchemaGuardLayer and CallLimitsLayer, on their own and in full agent runs.

use crate::support;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use crate::limit::{CallLimitsLayer, OnLimit};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_agent::{
    Agent, AgentRequest, BoxError, Outcome,
    agent::SetupContext,
    context::RunContext,
    layers::{
        evict::EvictLayer,
        schema::{SchemaGuardLayer, ToolSpecs, example_for_schema},
    },
    message::{Message, Role, ToolCall, ToolOutput, ToolSpec},
    model::ScriptedModel,
    tool::{Tool, ToolRequest, ToolRouter, tool_fn, typed_tool},
};

use support::{assert_history_valid, last_tool_message, tool_messages};

// ===== schema guard =====

fn search_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": { "type": "string", "minLength": 1 },
            "limit": { "type": "integer", "minimum": 1, "maximum": 50 },
            "sort": { "enum": ["relevance", "date"] }
        },
        "required": ["query", "limit"],
        "additionalProperties": false
    })
}

/// A `search` tool that counts its calls and echoes its arguments.
fn search(calls: &Arc<AtomicUsize>) -> impl Tool {
    let calls = Arc::clone(calls);
    tool_fn("search", "Searches", search_schema(), move |args, _| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, BoxError>(format!("searched {args}")) }
    })
}

fn req(name: &str, args: Value) -> ToolRequest {
    ToolRequest::new(ToolCall::new("c1", name, args), RunContext::new())
}

#[tokio::test]
async fn invalid_arguments_are_denied_with_every_error_and_an_example() {
    let calls = Arc::new(AtomicUsize::new(0));
    let router = ToolRouter::new().tool(search(&calls));
    let svc = SchemaGuardLayer::from_router(&router).layer(router);
    let out = svc
        .oneshot(req("search", json!({"limit": "ten", "extra": true})))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the tool was not called");
    assert!(out.is_error);
    assert_eq!(out.call_id, "c1");
    assert_eq!(out.metadata["schema_denied"], json!(true));
    let text = &out.content;
    assert!(
        text.starts_with("invalid arguments for tool `search`; the call was not run:"),
        "{text}"
    );
    assert!(
        text.contains("- at /: \"query\" is a required property"),
        "{text}"
    );
    assert!(
        text.contains("- at /limit: \"ten\" is not of type \"integer\""),
        "{text}"
    );
    assert!(text.contains("extra"), "additionalProperties: {text}");
    let example = text.lines().last().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(example).unwrap(),
        json!({"query": "example", "limit": 1})
    );
    assert!(jsonschema::is_valid(
        &search_schema(),
        &json!({"query": "example", "limit": 1})
    ));
}

#[tokio::test]
async fn valid_arguments_pass_untouched() {
    let calls = Arc::new(AtomicUsize::new(0));
    let router = ToolRouter::new().tool(search(&calls));
    let svc = SchemaGuardLayer::new(router.specs().iter().cloned()).layer(router.clone());
    let args = json!({"query": "tower", "limit": 5, "sort": "date"});
    let out = svc.oneshot(req("search", args.clone())).await.unwrap();
    let bare = router.oneshot(req("search", args)).await.unwrap();
    assert_eq!(out, bare, "same output, no metadata added");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn argument_text_is_parsed_before_it_is_checked() {
    let calls = Arc::new(AtomicUsize::new(0));
    let router = ToolRouter::new().tool(search(&calls));
    let svc = SchemaGuardLayer::from_router(&router).layer(router);
    let out = svc
        .clone()
        .oneshot(req("search", json!(r#"{"query": "x"}"#)))
        .await
        .unwrap();
    assert!(
        out.content.contains("\"limit\" is a required property"),
        "{}",
        out.content
    );
    let out = svc
        .clone()
        .oneshot(req("search", json!(r#"{"query": "x", "limit": 2}"#)))
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    // Text that is not JSON is left to the router, which reports it.
    let out = svc.oneshot(req("search", json!("{nope"))).await.unwrap();
    assert!(out.content.contains("not valid JSON"), "{}", out.content);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tools_without_a_usable_schema_are_not_checked() {
    let echo = |name: &'static str, schema: Value| {
        tool_fn(name, "echo", schema, |args, _| async move {
            Ok::<_, BoxError>(args)
        })
    };
    let router = ToolRouter::new()
        .tool(echo("none", Value::Null))
        .tool(echo("empty", json!({})))
        .tool(echo("broken", json!({"type": "no-such-type"})))
        .tool(echo(
            "remote",
            json!({"$ref": "https://example.com/schema.json"}),
        ))
        .tool(echo(
            "checked",
            json!({"type": "object", "required": ["a"]}),
        ));
    let svc = SchemaGuardLayer::from_router(&router).layer(router);
    for name in ["none", "empty", "broken", "remote"] {
        assert!(!svc.checks(name), "{name}");
        let out = svc
            .clone()
            .oneshot(req(name, json!({"b": 1})))
            .await
            .unwrap();
        assert_eq!(out.content, r#"{"b":1}"#, "{name} passes through");
    }
    assert!(svc.checks("checked"));
    let out = svc.oneshot(req("checked", json!({"b": 1}))).await.unwrap();
    assert!(out.is_error);
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Deploy {
    /// Where to deploy.
    env: Env,
    /// Services to deploy.
    services: Vec<Service>,
    /// Dry run only.
    dry_run: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Env {
    Staging,
    Production,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Service {
    name: String,
    replicas: u8,
}

#[tokio::test]
async fn the_model_sees_the_denial_in_a_full_run_and_can_correct_itself() {
    let deployed = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&deployed);
    let deploy = typed_tool("deploy", "Deploys services", move |args: Deploy, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, BoxError>(format!("deployed {} services", args.services.len())) }
    });
    let example = example_for_schema(&deploy.spec().parameters);
    assert_eq!(
        example,
        json!({"env": "staging", "services": [{"name": "example", "replicas": 0}]})
    );
    let model = ScriptedModel::new()
        .tool_call(
            "deploy",
            json!({"env": "prod", "services": [{"name": "api"}]}),
        )
        .tool_call("deploy", example.clone())
        .text("deployed")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(deploy)
        .tool_layer(SchemaGuardLayer::from_tools())
        .build();
    let resp = agent.run("deploy the api").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_history_valid(&resp.messages);
    assert_eq!(
        deployed.load(Ordering::SeqCst),
        1,
        "only the valid call ran"
    );

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let denial = last_tool_message(&requests[1]);
    assert!(denial.is_error);
    let text = denial.text();
    assert!(text.contains("- at /env: "), "{text}");
    assert!(
        text.contains("- at /services/0: \"replicas\" is a required property"),
        "{text}"
    );
    assert!(text.ends_with(&example.to_string()), "{text}");
    let ok = last_tool_message(&requests[2]);
    assert_eq!(
        (ok.text().as_ref(), ok.is_error),
        ("deployed 1 services", false)
    );
}

#[tokio::test]
async fn from_tools_checks_tools_added_by_setup_stages() {
    let calls = Arc::new(AtomicUsize::new(0));
    let tool_calls = Arc::clone(&calls);
    let model = ScriptedModel::new()
        .per_run()
        .tool_call("search", json!({"query": ""}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .setup(move |cx: SetupContext| {
            let calls = Arc::clone(&tool_calls);
            async move { cx.add_tool(search(&calls)) }
        })
        // Above a layer that forwards the specs.
        .tool_layer(SchemaGuardLayer::from_tools())
        .tool_layer(EvictLayer::new())
        .build();
    assert!(agent.tools().is_empty());
    for _ in 0..2 {
        let resp = agent.run("search").await.unwrap();
        let out = &tool_messages(&resp.messages)[0];
        assert!(out.is_error, "{}", out.text());
        assert!(
            out.text()
                .contains("- at /query: \"\" is shorter than 1 character"),
            "{}",
            out.text()
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_nudge_appends_the_example_to_outputs_that_report_validation_errors() {
    let schema = json!({
        "type": "object",
        "properties": { "env": { "enum": ["staging", "production"] } }
    });
    let router = ToolRouter::new()
        .tool(tool_fn(
            "deploy",
            "Deploys",
            schema.clone(),
            |args: Value, _| async move {
                Ok::<_, BoxError>(match args.get("env") {
                    None => ToolOutput::error("", "invalid arguments: Missing field `env`"),
                    Some(_) => ToolOutput::text("", "deployed"),
                })
            },
        ))
        .tool(tool_fn("validate", "Validates", schema, |_, _| async {
            Ok::<_, BoxError>("Validation error: the manifest has no name")
        }));
    let guard = SchemaGuardLayer::from_router(&router);
    let svc = guard.clone().layer(router.clone());

    let out = svc.clone().oneshot(req("deploy", json!({}))).await.unwrap();
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "invalid arguments: Missing field `env`\n\n<system-hook>\nThe arguments of `deploy` must match its JSON Schema. Example of valid arguments:\n{\"env\":\"staging\"}\n</system-hook>"
    );
    assert_eq!(out.metadata["schema_nudge"], json!(true));

    // Not only error outputs.
    let out = svc
        .clone()
        .oneshot(req("validate", json!({})))
        .await
        .unwrap();
    assert!(!out.is_error);
    assert!(out.content.contains("<system-hook>"), "{}", out.content);

    // No hint on other outputs, and none when turned off.
    let out = svc
        .oneshot(req("deploy", json!({"env": "staging"})))
        .await
        .unwrap();
    assert_eq!(out.content, "deployed");
    let quiet = guard.without_nudge().layer(router);
    let out = quiet.oneshot(req("deploy", json!({}))).await.unwrap();
    assert_eq!(out.content, "invalid arguments: Missing field `env`");
}

#[tokio::test]
async fn the_nudge_reaches_the_model_in_a_full_run() {
    let model = ScriptedModel::new()
        .tool_call("deploy", json!({}))
        .text("ok")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn(
            "deploy",
            "Deploys",
            json!({"type": "object", "properties": {"env": {"type": "string", "default": "staging"}}}),
            |_, _| async { Err::<String, _>("missing field `env`".into()) },
        ))
        .tool(tool_fn("check", "Checks", json!({"type": "object", "properties": {"n": {"type": "integer"}}}), |_, _| async {
            Ok::<_, BoxError>(ToolOutput::error("", "invalid type: string, expected u32"))
        }))
        .tool_layer(SchemaGuardLayer::from_tools())
        .build();
    let resp = agent.run("deploy").await.unwrap();
    // A tool's Err is left as it is: the loop makes it an error output without a hint.
    let out = &tool_messages(&resp.messages)[0];
    assert_eq!(out.text(), "tool `deploy` failed: missing field `env`");

    let model = ScriptedModel::new()
        .tool_call("check", json!({"n": 1}))
        .text("ok")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tools(agent.tools())
        .tool_layer(SchemaGuardLayer::from_tools())
        .build();
    agent.run("check").await.unwrap();
    let seen = last_tool_message(&model.requests()[1]);
    assert!(
        seen.text().ends_with("{\"n\":0}\n</system-hook>"),
        "{}",
        seen.text()
    );
}

#[test]
fn example_for_schema_table() {
    let cases: Vec<(&str, Value, Value)> = vec![
        ("string", json!({"type": "string"}), json!("example")),
        (
            "string min",
            json!({"type": "string", "minLength": 10}),
            json!("examplexxx"),
        ),
        (
            "string max",
            json!({"type": "string", "maxLength": 3}),
            json!("exa"),
        ),
        (
            "date-time",
            json!({"type": "string", "format": "date-time"}),
            json!("2024-01-01T00:00:00Z"),
        ),
        (
            "email",
            json!({"type": "string", "format": "email"}),
            json!("user@example.com"),
        ),
        ("integer", json!({"type": "integer"}), json!(0)),
        (
            "integer min",
            json!({"type": "integer", "minimum": 3}),
            json!(3),
        ),
        (
            "integer exclusive",
            json!({"type": "integer", "exclusiveMinimum": 3}),
            json!(4),
        ),
        (
            "integer max",
            json!({"type": "integer", "maximum": -2}),
            json!(-2),
        ),
        (
            "integer multiple",
            json!({"type": "integer", "minimum": 1, "multipleOf": 5}),
            json!(5),
        ),
        (
            "number",
            json!({"type": "number", "minimum": 0.5}),
            json!(0.5),
        ),
        ("boolean", json!({"type": "boolean"}), json!(false)),
        ("null", json!({"type": "null"}), json!(null)),
        (
            "nullable",
            json!({"type": ["null", "string"]}),
            json!("example"),
        ),
        ("enum", json!({"enum": ["b", "a"]}), json!("b")),
        ("const", json!({"const": 7}), json!(7)),
        (
            "default",
            json!({"type": "integer", "default": 9}),
            json!(9),
        ),
        (
            "examples",
            json!({"type": "string", "examples": ["ls -la"]}),
            json!("ls -la"),
        ),
        (
            "anyOf skips null",
            json!({"anyOf": [{"type": "null"}, {"type": "integer"}]}),
            json!(0),
        ),
        (
            "oneOf",
            json!({"oneOf": [{"type": "boolean"}, {"type": "string"}]}),
            json!(false),
        ),
        (
            "allOf merges",
            json!({"allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
            ]}),
            json!({"a": "example", "b": 0}),
        ),
        (
            "object: required only",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]}),
            json!({"b": 0}),
        ),
        (
            "object: nothing required, every property",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}),
            json!({"a": "example", "b": 0}),
        ),
        (
            "object without type",
            json!({"properties": {"x": {"type": "boolean"}}, "required": ["x"]}),
            json!({"x": false}),
        ),
        (
            "nested",
            json!({"type": "object", "properties": {
                "user": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2}
                }, "required": ["name", "tags"]}
            }, "required": ["user"]}),
            json!({"user": {"name": "example", "tags": ["example", "example"]}}),
        ),
        (
            "array",
            json!({"type": "array", "items": {"type": "integer"}}),
            json!([0]),
        ),
        ("array no items", json!({"type": "array"}), json!([])),
        (
            "tuple",
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
            json!(["example", 0]),
        ),
        (
            "local $ref",
            json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "required": ["p"],
                   "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}}),
            json!({"p": {"x": 0}}),
        ),
        ("true", json!(true), json!(null)),
        ("empty", json!({}), json!(null)),
    ];
    for (name, schema, expected) in cases {
        let example = example_for_schema(&schema);
        assert_eq!(example, expected, "{name}");
        assert!(
            jsonschema::is_valid(&schema, &example),
            "{name}: the example {example} does not validate"
        );
    }
}

#[test]
fn example_for_a_recursive_schema_stops() {
    let schema = json!({
        "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}, "required": ["next"]}},
        "$ref": "#/$defs/N"
    });
    let mut example = example_for_schema(&schema);
    let mut depth = 0;
    while let Some(next) = example.get_mut("next") {
        example = next.take();
        depth += 1;
    }
    assert!((3..=16).contains(&depth), "{depth}");
    assert_eq!(example, Value::Null);
}

#[test]
fn schemars_schemas_give_valid_examples() {
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Edit {
        path: String,
        edits: Vec<Change>,
        mode: Option<Env>,
        count: u32,
    }
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Change {
        old: String,
        new: String,
        line: Option<i64>,
    }
    let spec = typed_tool("edit", "Edits", |_: Edit, _| async {
        Ok::<_, BoxError>("ok")
    })
    .spec();
    let example = example_for_schema(&spec.parameters);
    assert!(
        jsonschema::is_valid(&spec.parameters, &example),
        "{example}"
    );
    serde_json::from_value::<Edit>(example.clone()).expect("the example deserializes");
    assert_eq!(
        example,
        json!({"path": "example", "edits": [{"old": "example", "new": "example"}], "count": 0})
    );
}

#[test]
fn tool_specs_reach_through_the_crate_layers() {
    let router = ToolRouter::new().tool(search(&Arc::new(AtomicUsize::new(0))));
    let stacked = ServiceBuilder::new()
        .layer(CallLimitsLayer::new())
        .layer(EvictLayer::new())
        .layer(SchemaGuardLayer::from_tools())
        .service(router.clone());
    assert!(Arc::ptr_eq(&stacked.tool_specs(), router.specs()));
}

// ===== call limits =====

fn counting_tool(name: &'static str, calls: &Arc<AtomicUsize>) -> impl Tool {
    let calls = Arc::clone(calls);
    tool_fn(name, "counts", json!({"type": "object"}), move |_, _| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, BoxError>(format!("{name} ran")) }
    })
}

fn outputs(messages: &tower_agent::message::Messages) -> Vec<String> {
    tool_messages(messages)
        .iter()
        .map(|m| m.text().into_owned())
        .collect()
}

#[tokio::test]
async fn total_tool_limit_denies_the_calls_over_it_and_the_run_goes_on() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .tool_calls([("a", json!({})), ("b", json!({}))])
        .tool_calls([("a", json!({})), ("b", json!({}))])
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .tool(counting_tool("a", &calls))
        .tool(counting_tool("b", &calls))
        .tool_layer(CallLimitsLayer::new().max_tool_calls(3))
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let outs = outputs(&resp.messages);
    assert_eq!(&outs[..3], ["a ran", "b ran", "a ran"]);
    assert_eq!(
        outs[3],
        "tool call limit reached: at most 3 tool calls per run; do not call any more tools, answer with what you have"
    );
    assert!(tool_messages(&resp.messages)[3].is_error);
}

#[tokio::test]
async fn per_tool_limit_leaves_other_tools_alone() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .tool_calls([("a", json!({})), ("a", json!({})), ("b", json!({}))])
        .tool_calls([("a", json!({})), ("b", json!({}))])
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .tool(counting_tool("a", &calls))
        .tool(counting_tool("b", &calls))
        .tool_layer(CallLimitsLayer::new().max_calls_of("a", 1))
        .build();
    let resp = agent.run("go").await.unwrap();
    let denied =
        "tool call limit reached: `a` may be called at most 1 times per run; do not call it again";
    let outs = outputs(&resp.messages);
    assert_eq!(outs.iter().filter(|o| *o == "a ran").count(), 1);
    assert_eq!(outs.iter().filter(|o| *o == denied).count(), 2);
    assert_eq!(outs.iter().filter(|o| *o == "b ran").count(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn model_call_limit_ends_the_run() {
    let model = ScriptedModel::new()
        .per_run()
        .tool_call("a", json!({}))
        .tool_call("a", json!({}))
        .tool_call("a", json!({}))
        .text("done");
    let calls = Arc::new(AtomicUsize::new(0));
    for on_limit in [OnLimit::Deny, OnLimit::EndRun] {
        let limits = CallLimitsLayer::new().max_model_calls(2).on_limit(on_limit);
        let agent = Agent::builder()
            .model(
                ServiceBuilder::new()
                    .layer(limits.clone())
                    .service(model.clone()),
            )
            .tool(counting_tool("a", &calls))
            .tool_layer(limits)
            .build();
        let resp = agent.run("go").await.unwrap();
        assert_eq!(
            resp.outcome,
            Outcome::Aborted {
                error: "model call limit reached: at most 2 model calls per run".into()
            },
            "{on_limit:?}"
        );
        assert_eq!(resp.steps, 3);
        assert_eq!(tool_messages(&resp.messages).len(), 2);
    }
}

#[tokio::test]
async fn end_run_aborts_after_the_steps_other_calls() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .tool_calls([("a", json!({})), ("b", json!({})), ("a", json!({}))])
        .text("never reached");
    let agent = Agent::builder()
        .model(model)
        .tool(counting_tool("a", &calls))
        .tool(counting_tool("b", &calls))
        .tool_layer(
            CallLimitsLayer::new()
                .max_calls_of("a", 1)
                .on_limit(OnLimit::EndRun),
        )
        .build();
    let resp = agent.run("go").await.unwrap();
    let reason =
        "tool call limit reached: `a` may be called at most 1 times per run; do not call it again";
    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: reason.into()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2, "a once, b once");
    let outs = outputs(&resp.messages);
    assert_eq!(outs.len(), 3, "every call has a result");
    assert!(outs.contains(&format!("aborted: {reason}")), "{outs:?}");
    assert_history_valid(&resp.messages);
}

#[tokio::test]
async fn two_instances_count_independently() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .tool_calls([("a", json!({})), ("a", json!({})), ("a", json!({}))])
        .text("done");
    // If the two layers shared their counts, every call would count twice and only one would
    // run.
    let agent = Agent::builder()
        .model(model)
        .tool(counting_tool("a", &calls))
        .tool_layer(CallLimitsLayer::new().max_tool_calls(2))
        .tool_layer(CallLimitsLayer::new().max_tool_calls(2))
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let outs = outputs(&resp.messages);
    assert_eq!(outs.iter().filter(|o| *o == "a ran").count(), 2);
}

#[tokio::test]
async fn counts_are_per_run() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .per_run()
        .tool_calls([("a", json!({})), ("a", json!({}))])
        .text("done");
    let limits = CallLimitsLayer::new().max_tool_calls(1).max_model_calls(2);
    let agent = Agent::builder()
        .model(ServiceBuilder::new().layer(limits.clone()).service(model))
        .tool(counting_tool("a", &calls))
        .tool_layer(limits)
        .build();
    for run in 1..=3 {
        // A persisted thread: the counts still start from zero in every run.
        let resp = agent
            .run(AgentRequest::new("go").thread("t1"))
            .await
            .unwrap();
        assert_eq!(resp.outcome, Outcome::Finished, "run {run}");
        assert_eq!(calls.load(Ordering::SeqCst), run);
    }
}

#[tokio::test]
async fn limits_on_a_bare_model_service() {
    use tower_agent::model::ModelRequest;
    let limits = CallLimitsLayer::new().max_model_calls(1);
    let model = limits.layer(ScriptedModel::new().text("one").text("two"));
    let ctx = RunContext::new();
    let request = || {
        let mut r = ModelRequest::new(vec![Message::user("hi")]);
        r.ctx = ctx.clone();
        r
    };
    let first = model.clone().oneshot(request()).await.unwrap();
    assert_eq!(first.message.role, Role::Assistant);
    let err = model.clone().oneshot(request()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "run aborted: model call limit reached: at most 1 model calls per run"
    );
    assert_eq!(limits.counts(&ctx).model_calls, 1);
    // Another run (context) starts from zero.
    let mut other = request();
    other.ctx = RunContext::new();
    assert!(model.oneshot(other).await.is_ok());
}

#[test]
fn layers_and_services_are_send_sync_clone() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<SchemaGuardLayer>();
    check::<SchemaGuardLayer<tower_agent::layers::schema::FromTools>>();
    check::<tower_agent::layers::schema::SchemaGuard<ToolRouter>>();
    check::<CallLimitsLayer>();
    check::<crate::limit::CallLimits<ToolRouter>>();
    fn spec_is_used(_: ToolSpec) {}
    let _ = spec_is_used;
}

// ===== readiness, with tower-test mocks =====

#[tokio::test]
async fn readiness_passes_through_and_denied_calls_never_reach_the_inner_service() {
    use tokio_test::{assert_pending, assert_ready_ok};

    let guard = SchemaGuardLayer::new([ToolSpec::new("search", "", search_schema())]);
    let (mut svc, mut handle) = tower_test::mock::spawn_layer::<ToolRequest, ToolOutput, _>(guard);
    handle.allow(0);
    assert_pending!(svc.poll_ready());
    handle.allow(2);
    assert_ready_ok!(svc.poll_ready());
    let denied = svc.call(req("search", json!({"query": 1}))).await.unwrap();
    assert!(denied.is_error);
    assert_ready_ok!(svc.poll_ready());
    let fut = svc.call(req("search", json!({"query": "q", "limit": 1})));
    let (request, send) = handle.next_request().await.unwrap();
    assert_eq!(request.call.arguments, json!({"query": "q", "limit": 1}));
    send.send_response(ToolOutput::text("c1", "found"));
    assert_eq!(fut.await.unwrap().content, "found");

    let limits = CallLimitsLayer::new().max_tool_calls(1);
    let (mut svc, mut handle) = tower_test::mock::spawn_layer::<ToolRequest, ToolOutput, _>(limits);
    handle.allow(0);
    assert_pending!(svc.poll_ready());
    handle.allow(2);
    let ctx = RunContext::new();
    let call = || ToolRequest::new(ToolCall::new("c", "a", json!({})), ctx.clone());
    assert_ready_ok!(svc.poll_ready());
    let fut = svc.call(call());
    let (_, send) = handle.next_request().await.unwrap();
    send.send_response(ToolOutput::text("c", "ran"));
    assert_eq!(fut.await.unwrap().content, "ran");
    assert_ready_ok!(svc.poll_ready());
    let denied = svc.call(call()).await.unwrap();
    assert!(denied.content.starts_with("tool call limit reached"));
    assert!(
        tokio_test::task::spawn(handle.next_request())
            .poll()
            .is_pending()
    );
}
