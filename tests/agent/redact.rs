//! `layers::redact`: values found and replaced in the prompt, the streamed answer (before any
//! event shows it, a value split across pieces included) and tool outputs.

use futures_util::StreamExt;
use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError,
    agent::{AgentEvent, Outcome},
    event::ModelDelta,
    layers::redact::{Detector, Redaction, Strategy},
    message::Role,
    model::{ModelBody, ModelChunk, ModelResponse, ScriptedModel},
    tool::tool_fn,
};

fn all(strategy: Strategy) -> Redaction {
    Redaction::new()
        .email(strategy)
        .credit_card(strategy)
        .ip(strategy)
        .api_keys(strategy)
}

/// The text the run's events showed, pieces joined.
async fn streamed(agent: &Agent, prompt: &str) -> (String, tower_agent::AgentResponse) {
    let mut stream = agent.stream(prompt);
    let mut text = String::new();
    while let Some(e) = stream.next().await {
        if let AgentEvent::ModelDelta {
            delta: ModelDelta::Text { text: t },
            ..
        } = e
        {
            text.push_str(&t);
        }
    }
    (text, stream.take_response().unwrap().unwrap())
}

/// A scripted streamed answer of these text pieces.
fn pieces(parts: &'static [&'static str]) -> ScriptedModel {
    ScriptedModel::from_fn(move |_| {
        let whole = ModelResponse::text(parts.concat());
        let items = parts
            .iter()
            .map(|p| Ok(ModelChunk::Delta(ModelDelta::Text { text: (*p).into() })))
            .chain([Ok(ModelChunk::Done(Box::new(whole)))]);
        Ok(ModelResponse::streaming(ModelBody::new(
            futures_util::stream::iter(items.collect::<Vec<Result<_, BoxError>>>()),
        )))
    })
}

/// Each detector and strategy on plain text: what is found, what is not (a card number that
/// fails the Luhn check, an address-like string that is not one).
#[test]
fn detectors_and_strategies() {
    let text = "mail ada@example.com, card 4111-1111-1111-1111, not 1234 5678 9012 3456, \
                ip 192.168.0.17 not 999.1.1.1, key sk-proj-abcdefghijklmnopqrstuvwx1234";
    let redacted = all(Strategy::Redact).redact(text).unwrap();
    assert_eq!(
        redacted,
        "mail [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD], not 1234 5678 9012 3456, \
         ip [REDACTED_IP] not 999.1.1.1, key [REDACTED_API_KEY]"
    );
    let masked = all(Strategy::Mask)
        .redact("card 4111 1111 1111 1111")
        .unwrap();
    assert_eq!(masked, "card **** **** **** 1111");
    let hashed = all(Strategy::Hash)
        .redact("a ada@example.com b ada@example.com")
        .unwrap();
    let tags: Vec<&str> = hashed
        .split(' ')
        .filter(|w| w.starts_with("<email:"))
        .collect();
    assert_eq!(tags.len(), 2);
    assert_eq!(tags[0], tags[1], "the same value hashes the same");
    assert!(!hashed.contains("ada@"));
    let blocked = all(Strategy::Block)
        .redact("write to ada@example.com")
        .unwrap_err();
    assert_eq!(blocked.detector(), "email");
    assert!(
        !blocked.to_string().contains("ada@"),
        "the error never shows the value"
    );
    let own = Redaction::new()
        .detector(Detector::regex("employee_id", r"\bEMP-\d{6}\b", Strategy::Redact).unwrap());
    assert_eq!(
        own.redact("EMP-123456 here").unwrap(),
        "[REDACTED_EMPLOYEE_ID] here"
    );
    assert!(Detector::regex("bad", "(", Strategy::Redact).is_err());
}

/// A value split across three pieces is caught: no event shows any part of it; the answer and
/// the thread have it redacted.
#[tokio::test]
async fn a_value_split_across_three_pieces_never_shows() {
    let model = ServiceBuilder::new()
        .layer(all(Strategy::Redact).model_layer())
        .service(pieces(&["Contact: john.d", "oe@examp", "le.com, thanks."]));
    let agent = Agent::builder().model(model).build();
    let (shown, resp) = streamed(&agent, "go").await;
    assert_eq!(shown, "Contact: [REDACTED_EMAIL], thanks.");
    assert_eq!(resp.text, "Contact: [REDACTED_EMAIL], thanks.");
    for part in ["john", "doe", "examp", "le.com"] {
        assert!(!shown.contains(part), "{shown}");
    }
}

/// Text far from any value is let out as it streams (held back at most `LOOK_BEHIND` bytes),
/// and a tool call piece lets out what was held first.
#[tokio::test]
async fn text_is_let_out_as_it_streams() {
    let long = "word ".repeat(200);
    let model = ServiceBuilder::new()
        .layer(all(Strategy::Redact).model_layer())
        .service(ScriptedModel::new().text(long.clone()).streaming(50));
    let agent = Agent::builder().model(model).build();
    let mut stream = agent.stream("go");
    let mut pieces = Vec::new();
    while let Some(e) = stream.next().await {
        if let AgentEvent::ModelDelta {
            delta: ModelDelta::Text { text },
            ..
        } = e
        {
            pieces.push(text);
        }
    }
    assert!(pieces.len() > 10, "{} pieces", pieces.len());
    assert_eq!(pieces.concat(), long);
}

/// A block ends the stream: the run ends `Aborted` naming the detector; the held text (the
/// value) never shows.
#[tokio::test]
async fn a_block_ends_the_run_and_the_value_never_shows() {
    let model = ServiceBuilder::new()
        .layer(Redaction::new().api_keys(Strategy::Block).model_layer())
        .service(pieces(&[
            "Your key is sk-ant-",
            "abcdefghijklmnopqrstuvwxyz",
            " ok",
        ]));
    let agent = Agent::builder().model(model).build();
    let (shown, resp) = streamed(&agent, "go").await;
    match &resp.outcome {
        Outcome::Aborted { error } => assert!(error.contains("api_key"), "{error}"),
        other => panic!("aborted, not {other:?}"),
    }
    assert!(!shown.contains("sk-ant"), "{shown}");
}

/// The prompt is redacted before the model sees it; tool outputs before the model sees them.
#[tokio::test]
async fn the_prompt_and_tool_outputs_are_redacted() {
    let redaction = all(Strategy::Redact);
    let lookup = tool_fn(
        "lookup",
        "Looks up",
        json!({"type": "object"}),
        |_, _| async { Ok::<_, BoxError>("owner: bob@example.org from 10.0.0.5".to_owned()) },
    );
    let scripted = ScriptedModel::new()
        .tool_call("lookup", json!({}))
        .text("done")
        .recording();
    let model = ServiceBuilder::new()
        .layer(redaction.model_layer())
        .service(scripted.clone());
    let agent = Agent::builder()
        .model(model)
        .tool(lookup)
        .tool_layer(redaction.tool_layer())
        .build();
    agent.run("I am ada@example.com").await.unwrap();
    let requests = scripted.requests();
    let user = requests[0]
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .unwrap();
    assert_eq!(user.text(), "I am [REDACTED_EMAIL]");
    let tool = requests[1]
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert_eq!(tool.text(), "owner: [REDACTED_EMAIL] from [REDACTED_IP]");
}

/// A pattern of your own that matches without end (`\d+`) over a long stream of digits: the
/// stream is not held back whole (pieces keep coming out), and every part is still redacted.
#[tokio::test]
async fn an_endless_match_does_not_hold_the_stream_back() {
    let own =
        Redaction::new().detector(Detector::regex("number", r"\d+", Strategy::Redact).unwrap());
    let model = ServiceBuilder::new()
        .layer(own.model_layer())
        .service(ScriptedModel::new().text("7".repeat(20_000)).streaming(100));
    let agent = Agent::builder().model(model).build();
    let mut stream = agent.stream("go");
    let mut pieces = Vec::new();
    while let Some(e) = stream.next().await {
        if let AgentEvent::ModelDelta {
            delta: ModelDelta::Text { text },
            ..
        } = e
        {
            pieces.push(text);
        }
    }
    assert!(
        pieces.len() > 30,
        "let out as it streams: {} pieces",
        pieces.len()
    );
    assert!(pieces.iter().all(|p| !p.contains('7')), "{pieces:?}");
}

/// A scripted stream: each item after its delay in ms (from the previous one).
fn timed(items: Vec<(u64, ModelChunk)>) -> ModelResponse {
    let stream = futures_util::stream::iter(items).then(|(ms, item)| async move {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        Ok::<_, BoxError>(item)
    });
    ModelResponse::streaming(ModelBody::new(stream))
}

/// Reasoning, text, a tool call, then `after` bytes of text, then the answer 1 s later.
fn text_call_text(after: usize) -> ModelResponse {
    let delta = ModelChunk::Delta;
    let tail = "x".repeat(after);
    let mut done = ModelResponse::new(
        tower_agent::message::Message::assistant(format!("Checking: {tail}")).with_tool_calls(
            vec![tower_agent::message::ToolCall::new("c1", "work", json!({}))],
        ),
    );
    done.stop_reason = tower_agent::message::StopReason::ToolUse;
    let mut items = vec![
        (
            0,
            delta(ModelDelta::Reasoning {
                text: "Thinking it over.".into(),
            }),
        ),
        (
            100,
            delta(ModelDelta::Text {
                text: "Checking: ".into(),
            }),
        ),
        (
            100,
            delta(ModelDelta::ToolCall {
                index: 0,
                id: Some("c1".into()),
                name: Some("work".into()),
                arguments: "{}".into(),
            }),
        ),
        (0, delta(ModelDelta::ToolCallEnd { index: 0 })),
    ];
    if after > 0 {
        items.push((1000, delta(ModelDelta::Text { text: tail })));
    }
    items.push((1000, ModelChunk::Done(Box::new(done))));
    timed(items)
}

/// When each piece and the eager call showed (ms since the start), in order.
async fn timeline(after: usize) -> (Vec<(u128, String)>, tower_agent::AgentResponse) {
    let t0 = tokio::time::Instant::now();
    let first = std::sync::atomic::AtomicBool::new(true);
    let model = ScriptedModel::from_fn(move |_| {
        if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            Ok(text_call_text(after))
        } else {
            Ok(ModelResponse::text("done"))
        }
    });
    let model = ServiceBuilder::new()
        .layer(all(Strategy::Redact).model_layer())
        .service(model);
    let work = tool_fn("work", "Works", json!({"type": "object"}), |_, _| async {
        Ok::<_, BoxError>("worked".to_owned())
    });
    let agent = Agent::builder()
        .model(model)
        .tool(work)
        .eager_tools()
        .build();
    let mut stream = agent.stream("go");
    let mut seen = Vec::new();
    while let Some(e) = stream.next().await {
        let what = match e {
            AgentEvent::ModelDelta { step: 0, delta } => match delta {
                ModelDelta::Text { text } => format!("text {}", text.len()),
                ModelDelta::Reasoning { .. } => "reasoning".to_owned(),
                ModelDelta::ToolCall { .. } => "call".to_owned(),
                ModelDelta::ToolCallEnd { .. } => "end".to_owned(),
                other => format!("{other:?}"),
            },
            AgentEvent::ToolCallStart { .. } => "start".to_owned(),
            AgentEvent::ModelResponse { step: 0, .. } => "answer".to_owned(),
            _ => continue,
        };
        seen.push((t0.elapsed().as_millis(), what));
    }
    (seen, stream.take_response().unwrap().unwrap())
}

/// Issue 35: a tool call that comes while text is held waits behind it (the pieces keep their
/// order, and a value split around the call is found), but only until `LOOK_BEHIND` bytes of
/// text follow it — an eager call then starts, before the answer ends; reasoning goes out as
/// soon as text ends its run.
#[tokio::test(start_paused = true)]
async fn a_tool_call_waits_behind_held_text_until_the_look_behind_passes() {
    let (seen, resp) = timeline(300).await;
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    let at = |what: &str| seen.iter().find(|(_, w)| w == what).unwrap().0;
    assert_eq!(at("reasoning"), 100, "{seen:?}");
    // "Checking: " (10 bytes) and the call wait for the text after it: 300 bytes, of which
    // 256 are held back.
    let order: Vec<&str> = seen.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(
        &order[..4],
        ["reasoning", "text 10", "call", "end"],
        "{seen:?}"
    );
    assert_eq!(at("call"), 1200, "{seen:?}");
    assert_eq!(at("text 44"), 1200, "{seen:?}");
    assert_eq!(
        at("start"),
        1200,
        "the eager call starts before the answer: {seen:?}"
    );
    assert_eq!(at("answer"), 2200, "{seen:?}");
}

/// With no text after it, a call held behind text goes out when the answer ends — it never
/// waits for ever — and runs.
#[tokio::test(start_paused = true)]
async fn a_tool_call_held_behind_text_goes_out_at_the_end() {
    let (seen, resp) = timeline(0).await;
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.text, "done");
    let order: Vec<&str> = seen.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(
        &order[..4],
        ["reasoning", "text 10", "call", "end"],
        "{seen:?}"
    );
    assert_eq!(order.len(), 6, "{seen:?}");
    assert!(seen[1..].iter().all(|(ms, _)| *ms == 1200), "{seen:?}");
}

/// A streamed answer of these pieces through the redaction layer: the pieces let out and the
/// whole answer.
fn through_layer(items: Vec<ModelDelta>, whole: &str) -> (Vec<ModelDelta>, ModelResponse) {
    let whole = ModelResponse::text(whole);
    let model = ScriptedModel::from_fn(move |_| {
        let items = items
            .clone()
            .into_iter()
            .map(|d| Ok(ModelChunk::Delta(d)))
            .chain([Ok(ModelChunk::Done(Box::new(whole.clone())))]);
        Ok(ModelResponse::streaming(ModelBody::new(
            futures_util::stream::iter(items.collect::<Vec<Result<_, BoxError>>>()),
        )))
    });
    let layer = all(Strategy::Redact).model_layer();
    let service = ServiceBuilder::new().layer(layer).service(model);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async move {
            let mut resp = tower::ServiceExt::oneshot(
                service,
                tower_agent::model::ModelRequest::new(Vec::new()),
            )
            .await
            .unwrap();
            let mut body = std::mem::take(&mut resp.body);
            let mut out = Vec::new();
            let mut done = None;
            while let Some(item) = body.next().await {
                match item.unwrap() {
                    ModelChunk::Delta(d) => out.push(d),
                    ModelChunk::Done(d) => done = Some(*d),
                    other => panic!("{other:?}"),
                }
            }
            (out, done.expect("the answer"))
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(100))]

    /// Issue 35: however a text with values is cut into pieces, and wherever tool-call pieces
    /// come between them, the text let out joined is the whole answer's text, redacted as
    /// one; the tool-call pieces keep their order.
    #[test]
    fn pieces_and_the_whole_answer_agree_around_tool_calls(
        words in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::prelude::Just("ada@example.com".to_owned()),
                proptest::prelude::Just("4111 1111 1111 1111".to_owned()),
                proptest::prelude::Just("sk-ant-api03-abcdefghijklmnopqrstuvwxyz".to_owned()),
                proptest::prelude::Just("10.0.0.5".to_owned()),
                "[a-z]{1,12}",
                "[a-z ]{20,300}",
            ],
            1..40,
        ),
        cuts in proptest::collection::vec((0usize..2000, proptest::prelude::any::<bool>()), 0..30),
    ) {
        let text = words.join(", ");
        let mut at: Vec<(usize, bool)> = cuts
            .into_iter()
            .map(|(c, call)| (c % (text.len() + 1), call))
            .filter(|(c, _)| text.is_char_boundary(*c))
            .collect();
        at.sort_unstable();
        let (mut items, mut from, mut calls) = (Vec::new(), 0, 0);
        for (c, call) in at {
            if c > from {
                items.push(ModelDelta::Text { text: text[from..c].to_owned() });
                from = c;
            }
            if call {
                items.push(ModelDelta::ToolCallEnd { index: calls });
                calls += 1;
            }
        }
        items.push(ModelDelta::Text { text: text[from..].to_owned() });
        let (out, done) = through_layer(items, &text);
        let shown: String = out
            .iter()
            .filter_map(|d| match d {
                ModelDelta::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let expected = all(Strategy::Redact).redact(&text).unwrap();
        proptest::prop_assert_eq!(&shown, &expected);
        proptest::prop_assert_eq!(done.message.text(), expected);
        let ends: Vec<usize> = out
            .iter()
            .filter_map(|d| match d {
                ModelDelta::ToolCallEnd { index } => Some(*index),
                _ => None,
            })
            .collect();
        proptest::prop_assert_eq!(ends, (0..calls).collect::<Vec<_>>());
    }
}
