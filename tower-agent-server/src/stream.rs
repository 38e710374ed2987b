//! A run's events as a stream ([`events`]) and as server-sent events ([`sse`]).

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_core::Stream;
use futures_util::{FutureExt, StreamExt, future::BoxFuture};
use serde::Deserialize;
use tokio::sync::mpsc;
use tower::{Service, ServiceExt};

use tower_agent_core::{
    AgentRequest, AgentResponse, BoxError, Outcome, agent::AgentEvent, message::Usage,
};

/// Calls `service` with `request` and returns the run's [`AgentEvent`]s as a stream, for a
/// handler of your own: the request's [`events`](AgentRequest::events) channel is set to the
/// stream's. The stream drives the call (no task is spawned; dropping the stream drops the
/// call, as a client going away does) and ends after the call did.
///
/// The last event is an [`AgentEvent::AgentStop`]: when the call fails before the run sent
/// one (a `Timeout` that elapsed, a failing store, a load shedder), the stream ends with an
/// `AgentStop` whose outcome is `aborted` with the error. Pass the stream to [`sse`] to
/// answer with it.
pub fn events<S>(service: S, mut request: AgentRequest) -> impl Stream<Item = AgentEvent> + Send
where
    S: Service<AgentRequest, Response = AgentResponse> + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    request.events = Some(tx);
    let call: BoxFuture<'static, Result<(), BoxError>> = Box::pin(
        service
            .oneshot(request)
            .map(|result| result.map(drop).map_err(Into::into)),
    );
    let state = EventsState {
        call: Some(call),
        rx,
        failed: None,
        stopped: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        let event = state.next().await?;
        Some((event, state))
    })
}

/// The state of [`events`].
struct EventsState {
    call: Option<BoxFuture<'static, Result<(), BoxError>>>,
    rx: mpsc::UnboundedReceiver<AgentEvent>,
    /// The call's error, once it failed.
    failed: Option<BoxError>,
    /// An `AgentStop` was sent.
    stopped: bool,
}

impl EventsState {
    async fn next(&mut self) -> Option<AgentEvent> {
        if let Some(call) = self.call.as_mut() {
            tokio::select! {
                biased;
                Some(event) = self.rx.recv() => return Some(self.seen(event)),
                result = call => {
                    self.call = None;
                    self.failed = result.err();
                }
            }
        }
        // The call is over: drain what it sent (clones of the sender may outlive it, so
        // don't wait for the channel to close), then its error if it sent no `AgentStop`.
        if let Ok(event) = self.rx.try_recv() {
            return Some(self.seen(event));
        }
        let err = self.failed.take()?;
        if self.stopped {
            return None;
        }
        self.stopped = true;
        Some(AgentEvent::AgentStop {
            outcome: Outcome::Aborted {
                error: tower_agent_core::error::chain(&*err),
            },
            text: String::new(),
            steps: 0,
            usage: Usage::default(),
        })
    }

    fn seen(&mut self, event: AgentEvent) -> AgentEvent {
        self.stopped |= matches!(event, AgentEvent::AgentStop { .. });
        event
    }
}

/// Answers with `events` as Server-Sent Events, encoded as the streamed route encodes them
/// (see the [module docs](crate#server-sent-events)): `event:` the event's `type`,
/// `data:` its JSON on one line, a keep-alive comment every 15 s. For a handler of your own,
/// with [`events`] or [`Agent::stream`](tower_agent_core::Agent::stream):
///
/// ```
/// use axum::{Router, response::IntoResponse, routing::post};
/// use tower_agent_core::{Agent, model::ScriptedModel};
/// use tower_agent_server as server;
///
/// let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
/// let app: Router = Router::new().route(
///     "/ask",
///     post(move |prompt: String| async move { server::sse(agent.stream(prompt)) }),
/// );
/// ```
pub fn sse<S>(events: S) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send>
where
    S: Stream<Item = AgentEvent> + Send + 'static,
{
    Sse::new(events.map(|event| Ok(sse_event(&event)))).keep_alive(KeepAlive::default())
}

/// One SSE event: `event:` the event's `type`, `data:` its JSON.
fn sse_event(event: &AgentEvent) -> Event {
    /// The tag of an event's JSON.
    #[derive(Deserialize)]
    struct Tag<'a> {
        #[serde(rename = "type", borrow)]
        name: std::borrow::Cow<'a, str>,
    }
    // Compact JSON is one line: no raw newline can break the SSE framing.
    let data = serde_json::to_string(event).and_then(|data| {
        let name = serde_json::from_str::<Tag<'_>>(&data)?.name.into_owned();
        Ok((name, data))
    });
    match data {
        Ok((name, data)) => Event::default().event(name).data(data),
        Err(err) => Event::default()
            .event("error")
            .data(serde_json::json!({ "type": "error", "error": err.to_string() }).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_agent_core::message::Message;

    #[test]
    fn sse_event_names_are_the_json_types() {
        let event = AgentEvent::ModelResponse {
            step: 0,
            message: Message::assistant("a\nb"),
            usage: None,
        };
        let text = format!("{:?}", sse_event(&event));
        assert!(text.contains("event: model_response"), "{text}");
        assert!(
            text.contains(r#"data: {\"type\":\"model_response\""#),
            "{text}"
        );
    }
}
