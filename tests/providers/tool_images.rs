//! Images returned by a tool ([`ToolOutput::with_image`]) reaching each provider in its
//! documented form, through whole agent runs against loopback servers: Anthropic `tool_result`
//! content blocks, and Chat Completions' user message after the tool results (a tool message
//! holds only text there). The Responses API's form is tested in `tests/responses.rs`.

use crate::loopback;

use loopback::{Reply, Server};
use serde_json::json;
use tower::ServiceExt;
use tower_agent::{
    Agent, BoxError,
    message::{Message, ToolCall, ToolOutput},
    model::{ModelRequest, anthropic::Anthropic, openai::OpenAiChat},
    tool::tool_fn,
};

/// A 1×1 PNG as a data URL.
const PNG_DATA: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn png() -> String {
    format!("data:image/png;base64,{PNG_DATA}")
}

#[tokio::test]
async fn an_image_tool_result_reaches_anthropic_as_a_tool_result_image_block() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "id": "msg_01Aq9w938a90dw8q",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Let me take a screenshot."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "screenshot", "input": {"url": "https://example.com"}}
            ],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {"input_tokens": 380, "output_tokens": 61}
        })
        .to_string(),
    ));
    server.reply(Reply::json(
        json!({
            "id": "msg_01Bq9w938a90dw8r",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "The page is a single white pixel."}],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": {"input_tokens": 520, "output_tokens": 12}
        })
        .to_string(),
    ));
    let agent = Agent::builder()
        .model(
            Anthropic::builder()
                .base_url(server.url())
                .api_key("sk-ant-test")
                .client(loopback::client())
                .prompt_caching(false) // these tests check the request shape; caching has its own tests
                .build(),
        )
        .tool(tool_fn(
            "screenshot",
            "A screenshot of a web page",
            json!({"type": "object", "properties": {"url": {"type": "string"}}}),
            |_, _| async {
                Ok::<_, BoxError>(
                    ToolOutput::text("", "Screenshot of example.com:").with_image(png()),
                )
            },
        ))
        .build();

    let resp = agent.run("What does example.com look like?").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.text, "The page is a single white pixel.");
    let messages = &server.requests()[1].body["messages"];
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [{
            "type": "tool_result",
            "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
            "content": [
                {"type": "text", "text": "Screenshot of example.com:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_DATA}}
            ]
        }]})
    );
}

#[tokio::test]
async fn an_image_by_url_is_a_url_source_and_text_only_results_stay_strings() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}).to_string(),
    ));
    Anthropic::builder()
        .base_url(server.url())
        .client(loopback::client())
        .prompt_caching(false) // these tests check the request shape; caching has its own tests
        .build()
        .oneshot(ModelRequest::new(vec![
            Message::user("Charts?"),
            Message::assistant("").with_tool_calls(vec![
                ToolCall::new("toolu_1", "chart", json!({})),
                ToolCall::new("toolu_2", "chart", json!({})),
            ]),
            Message::tool_result(
                &ToolOutput::error("toolu_1", "").with_image("https://example.com/chart.png"),
            ),
            Message::tool_result(&ToolOutput::text("toolu_2", "no chart")),
        ]))
        .await
        .unwrap();
    assert_eq!(
        server.requests()[0].body["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true, "content": [
                {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}}
            ]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no chart"}
        ])
    );
}

#[tokio::test]
async fn chat_completions_gets_tool_images_in_a_user_message_after_the_results() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}).to_string(),
    ));
    let chat = OpenAiChat::builder()
        .base_url(format!("{}/v1", server.url()))
        .client(loopback::client())
        .build();
    chat.oneshot(ModelRequest::new(vec![
        Message::user("Radar of Oslo and Bergen?"),
        Message::assistant("").with_tool_calls(vec![
            ToolCall::new("call_1", "radar", json!({"city": "Oslo"})),
            ToolCall::new("call_2", "radar", json!({"city": "Bergen"})),
        ]),
        Message::tool_result(&ToolOutput::text("call_1", "radar:").with_image(png())),
        Message::tool_result(&ToolOutput::text("call_2", "no radar")),
    ]))
    .await
    .unwrap();
    let messages = &server.requests()[0].body["messages"];
    assert_eq!(
        messages.as_array().unwrap()[2..],
        [
            json!({"role": "tool", "tool_call_id": "call_1", "content": "radar:"}),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "no radar"}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "What tool call call_1 returned:"},
                {"type": "image_url", "image_url": {"url": png()}}
            ]}),
        ]
    );
}

/// The smallest PDF header, as base64: enough to check that the bytes go through unmodified.
const PDF_DATA: &str = "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCg==";

fn pdf() -> String {
    format!("data:application/pdf;base64,{PDF_DATA}")
}

#[tokio::test]
async fn documents_reach_anthropic_and_chat_completions_and_a_remote_one_is_refused_by_chat() {
    let history = |url: String| {
        vec![
            Message::user("Summarize the report."),
            Message::assistant("").with_tool_calls(vec![ToolCall::new(
                "call_1",
                "report",
                json!({}),
            )]),
            Message::tool_result(
                &ToolOutput::text("call_1", "The report:")
                    .with_document(url, Some("q3.pdf".into())),
            ),
        ]
    };
    let ok_anthropic = json!({"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}});

    // Anthropic: a `document` block of the tool_result, base64 or by URL.
    let server = Server::start();
    server.reply(Reply::json(ok_anthropic.to_string()));
    server.reply(Reply::json(ok_anthropic.to_string()));
    let anthropic = Anthropic::builder()
        .base_url(server.url())
        .client(loopback::client())
        .prompt_caching(false) // these tests check the request shape; caching has its own tests
        .build();
    anthropic
        .clone()
        .oneshot(ModelRequest::new(history(pdf())))
        .await
        .unwrap();
    anthropic
        .oneshot(ModelRequest::new(history(
            "https://example.com/q3.pdf".into(),
        )))
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(
        requests[0].body["messages"][2]["content"][0]["content"],
        json!([
            {"type": "text", "text": "The report:"},
            {"type": "document", "title": "q3.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_DATA}}
        ])
    );
    assert_eq!(
        requests[1].body["messages"][2]["content"][0]["content"][1]["source"],
        json!({"type": "url", "url": "https://example.com/q3.pdf"})
    );

    // Chat Completions: a `file` part of the user message after the results…
    let server = Server::start();
    server.reply(Reply::json(
        json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}).to_string(),
    ));
    let chat = OpenAiChat::builder()
        .base_url(format!("{}/v1", server.url()))
        .client(loopback::client())
        .build();
    chat.clone()
        .oneshot(ModelRequest::new(history(pdf())))
        .await
        .unwrap();
    assert_eq!(
        server.requests()[0].body["messages"][3],
        json!({"role": "user", "content": [
            {"type": "text", "text": "What tool call call_1 returned:"},
            {"type": "file", "file": {"file_data": pdf(), "filename": "q3.pdf"}}
        ]})
    );
    // …and a document by URL is refused before anything is sent.
    let err = chat
        .oneshot(ModelRequest::new(history(
            "https://example.com/q3.pdf".into(),
        )))
        .await
        .unwrap_err();
    let err = tower_agent::model::ProviderError::find(&*err).expect("a ProviderError");
    assert!(err.is_invalid_request(), "{err}");
    assert!(err.to_string().contains("data:"), "{err}");
    assert_eq!(server.requests().len(), 1);
}
