//! The events of a run's environment: Setup, DirectoryAdded, FileChanged, and the prompt's
//! expansion (UserPromptExpansion).

use std::sync::Arc;

use super::{Inner, Live, register::Add, session, union};
use crate::{config::HookEvent, handler::Entry, reply::Report};
use tower_agent_core::agent::start::{PromptExpansion, SetupTrigger};
use tower_agent_core::context::RunContext;
use tower_agent_layers::hooks::{
    DirectoryAdded, DirectoryAddedInput, FileChanged, FileChangedInput, Hooks, Setup, UserPrompt,
    state::Added,
};
use tower_agent_layers::matcher::ToolMatcher;

impl Inner {
    /// Setup: what its hooks export (`CLAUDE_ENV_FILE`) is the session's; nothing of their
    /// answers reaches the model — Claude Code discards Setup's JSON fields and stdout
    /// (measured against 2.1.328: vectors `setup_init_context`, `setup_maintenance`). It
    /// cannot block (as in the protocol): a block, a stop or a fail-closed failure is reported.
    async fn setup(self: &Arc<Self>, trigger: SetupTrigger, ctx: &RunContext) -> Setup {
        let event = HookEvent::Setup;
        let mut input = self.base(event, ctx);
        input.insert("trigger".into(), trigger.as_str().into());
        let verdicts = self
            .run_with_env_file(event, Some(trigger.as_str()), input, ctx)
            .await;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                ctx.warn(format!("a Setup hook: {reason} (Setup cannot block)"));
            }
            if !v.contexts.is_empty() {
                tracing::debug!("a Setup hook's additionalContext is discarded, as in Claude Code");
            }
        }
        Setup::Continue
    }

    /// DirectoryAdded: observe only; a block or a stop is reported.
    async fn directory_added(
        self: &Arc<Self>,
        added: DirectoryAddedInput,
        ctx: &RunContext,
    ) -> DirectoryAdded {
        let event = HookEvent::DirectoryAdded;
        let mut input = self.base(event, ctx);
        let directory = added.directory.to_string_lossy().into_owned();
        input.insert("directory".into(), directory.into());
        input.insert("source".into(), added.source.into());
        let verdicts = self
            .run(event, Some(added.source), input, Report::Run(ctx))
            .await;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block) {
                ctx.warn(format!("a DirectoryAdded hook: {reason} (it cannot block)"));
            }
        }
        DirectoryAdded::Continue
    }

    /// FileChanged: observe only (a block or a stop is reported); the last `watchPaths`
    /// answered replaces the watched paths.
    async fn file_changed(
        self: &Arc<Self>,
        change: FileChangedInput,
        ctx: &RunContext,
    ) -> FileChanged {
        let event = HookEvent::FileChanged;
        let mut input = self.base(event, ctx);
        let path = change.file_path.to_string_lossy().into_owned();
        input.insert("file_path".into(), path.into());
        input.insert("event".into(), change.event.as_str().into());
        let verdicts = self
            .run_with_env_file(event, Some(change.file_name()), input, ctx)
            .await;
        let mut watch = None;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block) {
                ctx.warn(format!("a FileChanged hook: {reason} (it cannot block)"));
            }
            watch = v.watch_paths.or(watch);
        }
        watch.map_or(FileChanged::Continue, FileChanged::Watch)
    }

    /// UserPromptExpansion, with UserPromptSubmit's rules: `continue: false`, exit 2,
    /// `decision: "block"` or a fail-closed failure blocks the prompt; contexts
    /// (`additionalContext`, plain stdout) follow it.
    async fn prompt_expansion(
        self: &Arc<Self>,
        expansion: &PromptExpansion,
        ctx: &RunContext,
    ) -> UserPrompt {
        let event = HookEvent::UserPromptExpansion;
        let mut input = self.base(event, ctx);
        input.insert("expansion_type".into(), expansion.kind.as_str().into());
        input.insert("command_name".into(), expansion.name.clone().into());
        input.insert("command_args".into(), expansion.args.clone().into());
        input.insert("command_source".into(), expansion.source.clone().into());
        input.insert("prompt".into(), expansion.prompt.clone().into());
        let verdicts = self
            .run(event, Some(&expansion.name), input, Report::Run(ctx))
            .await;
        session::prompt_decision(verdicts)
    }
}

/// The environment's events [`register`](super::register) adds a callback for.
pub(super) const EVENTS: &[(HookEvent, Add)] = &[
    (HookEvent::Setup, add_setup),
    (HookEvent::DirectoryAdded, add_directory_added),
    (HookEvent::FileChanged, add_file_changed),
    (HookEvent::UserPromptExpansion, add_prompt_expansion),
];

fn add_setup(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_setup(union(entries), move |trigger, ctx| {
        let i = i.current();
        async move { i.setup(trigger, &ctx).await }
    })
}

fn add_directory_added(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_directory_added(union(entries), move |input, ctx| {
        let i = i.current();
        async move { i.directory_added(input, &ctx).await }
    })
}

/// The callback's matcher names every file a handler's matcher names (the watch list), even
/// when another handler has no matcher (which matches every file).
fn add_file_changed(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let mut names = Vec::new();
    for m in entries.iter().flat_map(|e| e.matchers.iter().flatten()) {
        m.matcher.exact_names(&mut names);
    }
    let matcher = ToolMatcher::exact(names).or(union(entries));
    let i = Arc::clone(inner);
    hooks.on_file_changed(matcher, move |input, ctx| {
        let i = i.current();
        async move { i.file_changed(input, &ctx).await }
    })
}

fn add_prompt_expansion(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_prompt_expansion(union(entries), move |expansion, ctx| {
        let i = i.current();
        async move { i.prompt_expansion(&expansion, &ctx).await }
    })
}

impl Inner {
    /// ConfigChange for a changed settings file: the first block's reason. Seen during a run
    /// (`ctx`: between its steps), the input is of that run, as Claude Code's (measured:
    /// vector `config_change`); seen by [`CommandHooks::reload`](crate::CommandHooks::reload),
    /// its `session_id` is fresh and its `cwd` the project directory: a reload belongs to no
    /// run.
    pub(crate) async fn config_change(
        self: &Arc<Self>,
        file: &std::path::Path,
        source: &'static str,
        ctx: Option<&RunContext>,
    ) -> Option<String> {
        let event = HookEvent::ConfigChange;
        if self.entries(event).is_empty() {
            return None;
        }
        let own;
        let (ctx, report) = match ctx {
            Some(ctx) => (ctx, Report::Run(ctx)),
            None => {
                own = RunContext::builder().cwd(&self.project_dir).build();
                (&own, Report::Log)
            }
        };
        let mut input = self.base(event, ctx);
        input.insert("source".into(), source.into());
        input.insert(
            "file_path".into(),
            file.to_string_lossy().into_owned().into(),
        );
        let verdicts = self.run(event, Some(source), input, report).await;
        verdicts
            .into_iter()
            .find_map(|v| v.stop.or(v.block).or(v.failed))
    }
}
