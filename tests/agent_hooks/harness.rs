//! [`TowerAgentHarness`]: the SDK's `Harness` over tower-agent's `Agent`.

use std::sync::{Arc, Mutex};

use agent_hooks::{
    AgentContext, DeclarationError, HostRegistry, HostSurface, InterceptionRecord, Transform,
    apply_transform_to_ctx,
    ctk::{Harness, IdentityPair, RunRecord, ToolSeamPosture, VectorSetup, async_trait},
};
use serde_json::Value;
use tower_agent::agent_hooks::AgentHooks;

use crate::host::{Run, run_scenario};

/// What the kit's runner drives: one vector at a time, set up, run, torn down.
pub(crate) struct TowerAgentHarness {
    /// The vector's text: the model answers with its literals as written.
    text: String,
    scenario: Value,
    hooks: Option<AgentHooks>,
    records: Arc<Mutex<Vec<InterceptionRecord>>>,
    last: Option<Run>,
}

/// The capabilities this host declares (spec §3.2, HARNESS.md): every one the kit knows.
const CAPABILITIES: [&str; 6] = [
    "model_calls",
    "tool_calls",
    "int64_json",
    "bigint_json",
    "incremental_output",
    "host_declaration",
];

impl TowerAgentHarness {
    pub(crate) fn new(text: &str) -> Self {
        TowerAgentHarness {
            text: text.to_owned(),
            scenario: Value::Null,
            hooks: None,
            records: Arc::default(),
            last: None,
        }
    }

    /// The host for one vector, with the record sink.
    fn host(&mut self, hooks: AgentHooks, scenario: Value) {
        let records = Arc::clone(&self.records);
        let hooks = hooks
            .agent_id("ctk-agent")
            .on_record(move |r| records.lock().unwrap().push(r.clone()));
        self.hooks = Some(hooks);
        self.scenario = scenario;
    }

    /// The streaming part's expectations the kit's runner does not check yet: the text the
    /// caller got (`released_output`, exactly) and what the thread kept
    /// (`persisted_must_not_contain`). Failures, empty if none.
    pub(crate) fn check_streaming(&self, expect: &Value) -> Vec<String> {
        let mut failures = Vec::new();
        let Some(run) = &self.last else {
            return failures;
        };
        if let Some(want) = expect.get("released_output")
            && Value::String(run.released.clone()) != *want
        {
            failures.push(format!(
                "released_output == {:?}, want {want}",
                run.released
            ));
        }
        for needle in expect
            .get("persisted_must_not_contain")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if run.persisted.contains(needle) {
                failures.push(format!("the thread kept {needle:?}"));
            }
        }
        failures
    }
}

/// §9 redaction seam, as the kit's convention has it: each listed path replaced with
/// `"[redacted]"`; a path that does not resolve is left alone.
fn redactor(paths: Vec<String>) -> impl Fn(&AgentContext) -> AgentContext + Send + Sync {
    move |ctx| {
        let mut c = ctx.clone();
        for path in &paths {
            let t = Transform {
                path: path.clone(),
                value: Value::String("[redacted]".into()),
            };
            let _ = apply_transform_to_ctx(&mut c, &t);
        }
        c
    }
}

#[async_trait]
impl Harness for TowerAgentHarness {
    fn name(&self) -> &str {
        "tower-agent"
    }

    fn capabilities(&self) -> Vec<String> {
        CAPABILITIES.iter().map(|c| (*c).to_owned()).collect()
    }

    /// The surface host declarations are resolved against: the buffered host, the crate's
    /// default (a document turns incremental mediation on by stating `buffered_output:
    /// false`). Not the incremental surface: the SDK's loader (0.1.0-beta.3) fills a partly
    /// stated surface's capabilities from this one but not its `buffered_output`, so with
    /// `incremental_output` here every document that states a surface without
    /// `buffered_output` would be refused as inconsistent (AH-CTK-135).
    fn host_surface(&self) -> HostSurface {
        let buffered: Vec<String> = self
            .capabilities()
            .into_iter()
            .filter(|c| c != "incremental_output")
            .collect();
        HostSurface::from_capabilities(buffered, ToolSeamPosture::Continue)
    }

    fn setup(&mut self, setup: VectorSetup) {
        let mut builder = AgentHooks::builder()
            .mode(setup.mode)
            .composition(setup.composition)
            .identity_provider(setup.identity_provider);
        for interceptor in setup.interceptors {
            builder = builder.shared_interceptor(Arc::from(interceptor), None, None);
        }
        if let Some(resolver) = setup.resolver {
            builder = builder.approval_resolver(Arc::from(resolver));
        }
        if !setup.redact_for_approval.is_empty() {
            builder = builder.approval_redactor(redactor(setup.redact_for_approval));
        }
        // The host declares `incremental_output`: configured in code, it mediates every
        // stream incrementally (§12.1 exception, exposure bound `none`).
        self.host(builder.build().incremental_output(), setup.scenario);
    }

    fn setup_declared(
        &mut self,
        setup: VectorSetup,
        document: Value,
        registry: HostRegistry,
    ) -> Result<(), DeclarationError> {
        let hooks = AgentHooks::from_declaration(document, registry)?;
        self.host(hooks, setup.scenario);
        Ok(())
    }

    async fn run(&mut self) -> RunRecord {
        let hooks = self.hooks.clone().expect("set up");
        self.records.lock().unwrap().clear();
        let run = run_scenario(&self.scenario, &self.text, hooks).await;
        let records = self.records.lock().unwrap().clone();
        let record = RunRecord {
            outcome: run.outcome.clone(),
            final_output: run.final_output.clone(),
            tool_invocations: run.tool_invocations.clone(),
            error: None,
            identities: records
                .iter()
                .map(|r| IdentityPair {
                    input_identity: r.input_identity.clone(),
                    enforced_identity: r.enforced_identity.clone(),
                })
                .collect(),
            records: records
                .iter()
                .map(|r| serde_json::to_value(r).unwrap())
                .collect(),
            postures: Default::default(),
            load: None,
        };
        self.last = Some(run);
        record
    }

    fn teardown(&mut self) {
        self.hooks = None;
    }
}
