//! The crate's routes embedded in an existing axum app, over real HTTP on 127.0.0.1: the app
//! keeps its own `/healthz` and fallback (merging the routes-only router neither panics nor
//! shadows them; nesting works too), tower-http's `TraceLayer`, `CorsLayer` and
//! `RequestBodyLimitLayer` and a bearer-auth layer wrap the routes, the service served is a
//! `Timeout<Agent>`, a tool reads the authenticated user from the run's extensions, and a
//! second user is refused (`403`) the first user's thread.

use std::{
    collections::HashMap,
    future::IntoFuture,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Body,
    http::{Request, Response, StatusCode, header, request::Parts},
    routing::get,
};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tower::{ServiceBuilder, timeout::Timeout};
use tower_agent::{
    Agent, AgentRequest, AgentResponse, BoxError,
    message::{Role, ToolCall},
    model::{ModelResponse, ScriptedModel},
    server::{self, AgentRoutes, ThreadAction},
    tool::tool_fn,
};
use tower_http::{
    auth::{AsyncAuthorizeRequest, AsyncRequireAuthorizationLayer},
    cors::CorsLayer,
    limit::RequestBodyLimitLayer,
    trace::TraceLayer,
};

/// The authenticated user, put in the request's extensions by the auth layer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct User(String);

/// Bearer auth: `Authorization: Bearer <name>-token` is the user `<name>`; anything else is a
/// `401`.
#[derive(Clone)]
struct BearerAuth;

impl<B: Send + 'static> AsyncAuthorizeRequest<B> for BearerAuth {
    type RequestBody = B;
    type ResponseBody = Body;
    type Future = BoxFuture<'static, Result<Request<B>, Response<Body>>>;

    fn authorize(&mut self, mut request: Request<B>) -> Self::Future {
        Box::pin(async move {
            let user = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .and_then(|token| token.strip_suffix("-token"))
                .map(|name| User(name.to_owned()));
            match user {
                Some(user) => {
                    request.extensions_mut().insert(user);
                    Ok(request)
                }
                None => Err(Response::builder()
                    .status(StatusCode::UNAUTHORIZED)
                    .body(Body::empty())
                    .unwrap()),
            }
        })
    }
}

/// Threads belong to the user who first ran on them; only they may read or continue them.
#[derive(Clone, Default)]
struct Owners(Arc<Mutex<HashMap<String, String>>>);

impl Owners {
    fn allow(&self, parts: &Parts, id: &str, action: ThreadAction) -> bool {
        let Some(User(user)) = parts.extensions.get::<User>() else {
            return false;
        };
        let mut owners = self.0.lock().unwrap();
        match (owners.get(id), action) {
            (Some(owner), _) => owner == user,
            (None, ThreadAction::Run) => {
                owners.insert(id.to_owned(), user.clone());
                true
            }
            (None, _) => false,
        }
    }
}

/// An agent whose model asks `whoami` once per prompt, then says what it answered.
fn whoami_agent() -> Agent {
    let model = ScriptedModel::from_fn(|req| {
        let last = req.messages.iter().last().expect("a message");
        Ok(if last.role == Role::Tool {
            ModelResponse::text(format!("You are {}.", last.text()))
        } else {
            ModelResponse::tool_calls([ToolCall::new("call_1", "whoami", json!({}))])
        })
    });
    let whoami = tool_fn(
        "whoami",
        "Who the user is",
        json!({"type": "object"}),
        |_, ctx| async move {
            match ctx.extensions().get::<User>() {
                Some(User(name)) => Ok(name.clone()),
                None => Err(BoxError::from("no authenticated user")),
            }
        },
    );
    Agent::builder().model(model).tool(whoami).build()
}

/// The user's app, with the agent's routes over `service` merged at `/` and nested at `/v2`.
fn app<S>(agent: &Agent, service: S, owners: Owners) -> Router
where
    S: tower::Service<AgentRequest, Response = AgentResponse> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    let agent_routes = AgentRoutes::new(service)
        .store(agent.store().clone())
        .shutdown_signal(agent.shutdown_signal().clone())
        .thread_access(move |parts: &Parts, id: &str, action| owners.allow(parts, id, action))
        .routes()
        .layer(AsyncRequireAuthorizationLayer::new(BearerAuth));
    Router::new()
        .route("/healthz", get(|| async { "the app is fine" }))
        .merge(agent_routes.clone())
        .nest("/v2", agent_routes)
        .fallback(|| async { (StatusCode::IM_A_TEAPOT, "the app's fallback") })
        .layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new_for_http())
                .layer(CorsLayer::permissive())
                .layer(RequestBodyLimitLayer::new(4 * 1024)),
        )
}

/// Serves `app` on 127.0.0.1; returns its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(axum::serve(listener, app).into_future());
    url
}

fn run_body(prompt: &str) -> Value {
    json!({ "prompt": prompt })
}

/// `(event, data)` of each Server-Sent Event in `text`.
fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(v).expect("data is JSON"));
                }
            }
            Some((name?, data?))
        })
        .collect()
}

#[tokio::test]
async fn routes_embed_in_an_app_with_auth_and_thread_access() {
    let agent = whoami_agent();
    let service: Timeout<Agent> = Timeout::new(agent.clone(), Duration::from_secs(30));
    let url = serve(app(&agent, service, Owners::default())).await;
    let client = reqwest::Client::new();
    let alice = "Bearer alice-token";
    let bob = "Bearer bob-token";

    // The app's own routes and fallback are untouched.
    let resp = client.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "the app is fine");
    let resp = client.get(format!("{url}/nope")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::IM_A_TEAPOT);
    assert_eq!(resp.text().await.unwrap(), "the app's fallback");

    // No token: the auth layer answers.
    let resp = client
        .post(format!("{url}/threads/t1/runs"))
        .json(&run_body("Who am I?"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);

    // Alice runs on t1: the tool reads her from the run's extensions.
    let resp = client
        .post(format!("{url}/threads/t1/runs"))
        .header(header::AUTHORIZATION, alice)
        .json(&run_body("Who am I?"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let run: Value = resp.json().await.unwrap();
    assert_eq!(run["text"], "You are alice.", "{run}");
    assert_eq!(run["outcome"]["kind"], "finished", "{run}");

    // Bob may neither read nor continue it, streamed or not, at either mount point.
    for path in ["", "/v2"] {
        let resp = client
            .get(format!("{url}{path}/threads/t1"))
            .header(header::AUTHORIZATION, bob)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{path}");
        let error: Value = resp.json().await.unwrap();
        assert!(error["error"].as_str().unwrap().contains("t1"), "{error}");
        for route in ["runs", "runs/stream"] {
            let resp = client
                .post(format!("{url}{path}/threads/t1/{route}"))
                .header(header::AUTHORIZATION, bob)
                .json(&run_body("Who am I?"))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{path} {route}");
        }
    }

    // Alice reads her thread; the refused runs left nothing in it.
    let resp = client
        .get(format!("{url}/threads/t1"))
        .header(header::AUTHORIZATION, alice)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let thread: Value = resp.json().await.unwrap();
    let messages = thread["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{thread}");
    assert_eq!(messages[2]["role"], "tool", "{thread}");
    assert!(thread.to_string().contains("alice"), "{thread}");

    // Bob streams on a thread of his own, under the nested routes: his name, then agent_stop.
    let resp = client
        .post(format!("{url}/v2/threads/t2/runs/stream"))
        .header(header::AUTHORIZATION, bob)
        .json(&run_body("Who am I?"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()[header::CONTENT_TYPE],
        "text/event-stream",
        "{:?}",
        resp.headers()
    );
    let events = sse_events(&resp.text().await.unwrap());
    let (name, last) = events.last().expect("events");
    assert_eq!(name, "agent_stop");
    assert_eq!(last["text"], "You are bob.", "{last}");
    assert!(
        events
            .iter()
            .any(|(name, data)| name == "tool_call_end" && data.to_string().contains("bob")),
        "{events:?}"
    );

    // CORS: a preflight is answered by the CorsLayer.
    let resp = client
        .request(reqwest::Method::OPTIONS, format!("{url}/threads/t1/runs"))
        .header(header::ORIGIN, "https://example.com")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .send()
        .await
        .unwrap();
    assert!(
        resp.headers()
            .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN),
        "{:?}",
        resp.headers()
    );

    // The body limit holds before the run: 413, and nothing saved.
    let resp = client
        .post(format!("{url}/threads/t3/runs"))
        .header(header::AUTHORIZATION, alice)
        .json(&run_body(&"x".repeat(8 * 1024)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(agent.store().load("t3").await.unwrap().is_none());
}

#[tokio::test]
async fn a_timeout_around_the_agent_answers_504_and_ends_the_stream() {
    let model = ScriptedModel::from_fn(|req| {
        let last = req.messages.iter().last().expect("a message");
        Ok(if last.role == Role::Tool {
            ModelResponse::text("rested")
        } else {
            ModelResponse::tool_calls([ToolCall::new("call_1", "nap", json!({}))])
        })
    });
    let nap = tool_fn("nap", "Naps", json!({"type": "object"}), |_, _| async {
        tokio::time::sleep(Duration::from_secs(600)).await;
        Ok::<_, BoxError>("awake")
    });
    let agent = Agent::builder().model(model).tool(nap).build();
    let service = ServiceBuilder::new()
        .timeout(Duration::from_millis(200))
        .service(agent.clone());
    let url = serve(app(&agent, service, Owners::default())).await;
    let client = reqwest::Client::new();

    // Cut off at 200 ms, not after the ten minutes of the nap.
    let resp = crate::support::within(
        "the answer",
        client
            .post(format!("{url}/threads/t1/runs"))
            .header(header::AUTHORIZATION, "Bearer alice-token")
            .json(&run_body("Nap."))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::GATEWAY_TIMEOUT);
    let error: Value = resp.json().await.unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("timed out"),
        "{error}"
    );

    // Streamed: the stream ends (after its events so far) with an `agent_stop`.
    let resp = client
        .post(format!("{url}/threads/t2/runs/stream"))
        .header(header::AUTHORIZATION, "Bearer alice-token")
        .json(&run_body("Nap."))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = crate::support::within("the stream's end", resp.text()).await;
    let events = sse_events(&text.unwrap());
    assert_eq!(events.first().map(|e| e.0.as_str()), Some("agent_start"));
    let (name, last) = events.last().expect("events");
    assert_eq!(name, "agent_stop", "{events:?}");
    // `aborted` with tower's error, or `cancelled` when the dropped run says so itself.
    let kind = last["outcome"]["kind"].as_str().unwrap();
    assert!(kind == "aborted" || kind == "cancelled", "{last}");
    if kind == "aborted" {
        assert!(last.to_string().contains("timed out"), "{last}");
    }
}

#[test]
fn layered_agents_are_servable() {
    let agent = whoami_agent();
    // ConcurrencyLimit, LoadShed, a user's map_request: all accepted.
    let limited = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(4)
        .map_request(|req: AgentRequest| req)
        .service(agent.clone());
    let _: Router = AgentRoutes::new(limited).router();
    let _: Router = server::router(agent);
}
