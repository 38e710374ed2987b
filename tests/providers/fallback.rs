//! `layers::fallback`: a real provider that fails (overloaded after its retries, or a request
//! over its context window) hands the request to the next model of the list, another real
//! provider on another loopback server; the reasons are traced and carried in the answer.

use crate::loopback;

use loopback::{Reply, Server};
use tower::{ServiceBuilder, ServiceExt};
use tower_agent::{
    Agent,
    agent::Outcome,
    layers::fallback::{FallbackLayer, FellBack},
    message::Message,
    model::{ModelRequest, ModelSettings, RetryPolicy, anthropic::Anthropic, openai::OpenAiChat},
};

fn openai(server: &Server) -> OpenAiChat {
    OpenAiChat::builder()
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test")
        .client(loopback::client())
        .build()
}

fn anthropic(server: &Server) -> Anthropic {
    Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .client(loopback::client())
        .build()
}

fn overloaded() -> Reply {
    Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    )
}

/// Overloaded on every attempt (three, with retries inside the fallback): the OpenAI model
/// answers, its request naming its own model; the reasons name the error.
#[tokio::test(start_paused = true)]
async fn an_overloaded_model_falls_back_after_its_retries() {
    let (primary, backup) = (Server::start(), Server::start());
    for _ in 0..3 {
        primary.reply(overloaded());
    }
    backup.reply(Reply::fixture("openai_text.json"));
    let retried = ServiceBuilder::new()
        .retry(RetryPolicy::new().max_attempts(3))
        .service(anthropic(&primary));
    let model = ServiceBuilder::new()
        .layer(FallbackLayer::new().then_model(openai(&backup), "gpt-4.1-mini"))
        .service(retried);
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().model("claude-sonnet-4-5");
    let resp = model.oneshot(req).await.unwrap();

    assert!(!resp.message.text().is_empty());
    assert_eq!(primary.requests().len(), 3, "the retries happen first");
    let sent = &backup.requests()[0];
    assert_eq!(sent.body["model"], "gpt-4.1-mini");
    let reasons = &resp.extensions.get::<FellBack>().unwrap().reasons;
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].starts_with("claude-sonnet-4-5: "), "{reasons:?}");
    assert!(reasons[0].contains("verloaded"), "{reasons:?}");
}

/// A request over the model's context window falls back; an authentication error does not
/// (the next model would not fix it); a run sees the fallback as a warning.
#[tokio::test]
async fn context_length_falls_back_and_authentication_does_not() {
    let (primary, backup) = (Server::start(), Server::start());
    primary.reply(Reply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    ));
    backup.reply(Reply::fixture("openai_text.json"));
    let model = ServiceBuilder::new()
        .layer(FallbackLayer::new().then_model(openai(&backup), "gpt-4.1-long"))
        .service(openai(&primary));
    let agent = Agent::builder().model(model.clone()).build();
    let mut stream = agent.stream("a long conversation");
    let mut warnings = Vec::new();
    while let Some(e) = futures_util::StreamExt::next(&mut stream).await {
        if let tower_agent::agent::AgentEvent::Warning { message } = e {
            warnings.push(message);
        }
    }
    let resp = stream.take_response().unwrap().unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("model fallback") && w.contains("context length")),
        "{warnings:?}"
    );

    primary.reply(Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    ));
    let err = model
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap_err();
    assert!(
        tower_agent::model::ProviderError::find(&*err)
            .unwrap()
            .is_authentication()
    );
    assert_eq!(
        backup.requests().len(),
        1,
        "no fallback on an authentication error"
    );
}
