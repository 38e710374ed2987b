//! [`CommandHooksBuilder`]: the sources of a [`CommandHooks`] (settings files and values, hooks
//! directories, plugin folders, other tools' files) and the options they are loaded with.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::Value;
use tower::{Service, ServiceExt};

use crate::{
    CommandHooks, ConfigError,
    config::{self, Config, digest},
    events::Inner,
    formats,
    permissions::Kind,
    plugin, scripts,
};
use tower_agent_core::error::BoxError;
use tower_agent_core::model::{BoxModelService, ModelRequest, ModelResponse};

/// Builds [`CommandHooks`]. See [`CommandHooks::builder`].
#[derive(Debug, Default, Clone)]
#[must_use]
pub struct CommandHooksBuilder {
    sources: Vec<Source>,
    project_dir: Option<PathBuf>,
    permission_mode: Option<String>,
    transcripts: Transcripts,
    stop_cap: Option<u32>,
    model: Option<BoxModelService>,
    #[cfg(feature = "mcp")]
    mcp: Option<tower_agent_mcp::client::McpServers>,
    plugin_data_dir: Option<PathBuf>,
    disabled_hooks: Vec<String>,
    disabled_plugins: Vec<String>,
    trusted: Vec<(PathBuf, String)>,
    /// Rules of the builder's own: [`allowed_tools`](Self::allowed_tools),
    /// [`disallowed_tools`](Self::disallowed_tools).
    rules: Vec<(Kind, String)>,
    ask_unless_allowed: bool,
}

/// What a [`CommandHooks`] needs to [reload](CommandHooks::reload): its builder, and the digests of its settings
/// files as they were when it was built (`None`: no file).
#[derive(Debug)]
pub(crate) struct Reloader {
    pub(crate) builder: CommandHooksBuilder,
    pub(crate) files: Vec<(PathBuf, Option<[u8; 32]>)>,
}

/// The digest of each file now.
pub(crate) fn snapshot(files: &[PathBuf]) -> Vec<(PathBuf, Option<[u8; 32]>)> {
    files.iter().map(|p| (p.clone(), digest(p))).collect()
}

/// Where agents of these hooks keep transcripts.
#[derive(Debug, Default, Clone)]
enum Transcripts {
    /// Per project, under the user's state directory.
    #[default]
    Default,
    Dir(PathBuf),
    Off,
}

/// The `permission_mode` values of the reference (`manual` is an alias of `default`).
const PERMISSION_MODES: [&str; 6] = [
    "default",
    "plan",
    "acceptEdits",
    "auto",
    "dontAsk",
    "bypassPermissions",
];

#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Json(Value, String),
    Dir(PathBuf),
    Plugin(PathBuf),
    Gemini(PathBuf),
    Codex(PathBuf),
    #[cfg(feature = "wasm")]
    Wasm(tower_agent_wasm::WasmHook),
}

impl CommandHooksBuilder {
    /// Loads the `hooks` (and `disableAllHooks`) of a settings file. Repeatable: files merge
    /// in the order given.
    pub fn settings_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::File(path.into()));
        self
    }

    /// Loads a settings value; `origin` names it in errors and warnings.
    pub fn settings_json(mut self, settings: Value, origin: impl Into<String>) -> Self {
        self.sources.push(Source::Json(settings, origin.into()));
        self
    }

    /// Adds the executables of a hooks directory, each asked once what it handles (see the
    /// [module docs](crate#configuration)).
    pub fn hooks_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::Dir(dir.into()));
        self
    }

    /// Adds a WebAssembly hook, for the events (and the matcher) its `describe` names, as a
    /// `.wasm` file of a hooks directory would be (see [`wasm`](tower_agent_wasm)). Repeatable; it
    /// takes its place in the order of the sources given.
    #[cfg(feature = "wasm")]
    pub fn wasm_hook(mut self, hook: tower_agent_wasm::WasmHook) -> Self {
        self.sources.push(Source::Wasm(hook));
        self
    }

    /// Loads a Claude Code plugin folder's hooks: `hooks/hooks.json` and the `hooks` of
    /// `.claude-plugin/plugin.json` (see the [module docs](crate#plugins)).
    /// Its handlers get `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA`.
    pub fn plugin_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::Plugin(dir.into()));
        self
    }

    /// Where plugins' data directories (`CLAUDE_PLUGIN_DATA`) are made, one per plugin
    /// (default: `$XDG_STATE_HOME/tower-agent/plugins/data`, else
    /// `~/.local/state/tower-agent/plugins/data`).
    pub fn plugin_data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.plugin_data_dir = Some(dir.into());
        self
    }

    /// Loads the `hooks` of a Gemini CLI settings file (`.gemini/settings.json`), its
    /// events mapped to ours (see the [module docs](crate#other-formats)).
    pub fn gemini_settings_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::Gemini(path.into()));
        self
    }

    /// Loads a Codex `hooks.json` (`~/.codex/hooks.json`, `.codex/hooks.json`), or the
    /// inline `[hooks]` tables of a Codex `config.toml` (a path ending in `.toml`).
    pub fn codex_hooks_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::Codex(path.into()));
        self
    }

    /// Disables the hook named `name`: its command as written (or as run, after
    /// substitution), or its `name` field. Same as listing it in `disabledHooks`.
    pub fn disable_hook(mut self, name: impl Into<String>) -> Self {
        self.disabled_hooks.push(name.into());
        self
    }

    /// Disables every hook of the plugin named `name` (its `plugin.json` name). Same as
    /// listing it in `disabledPlugins`.
    pub fn disable_plugin(mut self, name: impl Into<String>) -> Self {
        self.disabled_plugins.push(name.into());
        self
    }

    /// Trusts the script at `script` (relative paths: to the project directory) only with
    /// this SHA-256 (64 hex digits): every handler that runs it is pinned, as with a
    /// `sha256` field (see the [module docs](crate#trusted-hashes)).
    pub fn trust(mut self, script: impl Into<PathBuf>, sha256: impl Into<String>) -> Self {
        self.trusted.push((script.into(), sha256.into()));
        self
    }

    /// The project directory: the value of `CLAUDE_PROJECT_DIR` / `TOWER_AGENT_PROJECT_DIR`
    /// for every handler (also substituted in exec form), and where handlers run when the
    /// agent has no working directory of its own; an agent with one
    /// ([`AgentBuilder::cwd`](tower_agent_core::agent::AgentBuilder::cwd)) runs its handlers there, with
    /// `CLAUDE_PROJECT_DIR` still naming this directory (see the
    /// [module docs](crate#working-directory-and-project-directory)).
    ///
    /// Default: the project of the first project settings file given to
    /// [`settings_file`](Self::settings_file) — `<dir>` for `<dir>/.claude/settings.json`
    /// or `<dir>/.claude/settings.local.json`, as Claude Code's project is where its
    /// `.claude` is — whatever the process's current directory. The user's settings
    /// (`~/.claude/settings.json`, or under `$CLAUDE_CONFIG_DIR`) name no project, nor do
    /// other settings files, settings values, hooks directories, plugins or other tools'
    /// files: without a project settings file the default is the process's current directory
    /// when [`build`](Self::build) runs. Project settings files of two projects: the first
    /// wins, with a warning ([`CommandHooks::warnings`]).
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.project_dir = Some(dir.into());
        self
    }

    /// The `permission_mode` every hook input reports (default `"default"`): one of the
    /// reference's values `default`, `plan`, `acceptEdits`, `auto`, `dontAsk`,
    /// `bypassPermissions` (`manual` is reported as `default`). Reported only: approvals go
    /// through the hooks and the [`Approval`](tower_agent_layers::hooks::Approval) service
    /// whatever the mode. An unknown value is a [`ConfigError`] from [`build`](Self::build).
    pub fn permission_mode(mut self, mode: impl Into<String>) -> Self {
        self.permission_mode = Some(mode.into());
        self
    }

    /// Tools (or rules, as in settings: `"Bash(git *)"`, `"Read"`) used without asking, as
    /// Claude Code's `--allowedTools`: allow rules next to the settings' `permissions.allow`.
    /// They matter with [`ask_unless_allowed`](Self::ask_unless_allowed) (see the
    /// [module docs](crate#permission-rules)); a rule that cannot be parsed is a
    /// [`ConfigError`] from [`build`](Self::build). Repeatable.
    pub fn allowed_tools<I>(mut self, rules: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let rules = rules.into_iter().map(|r| (Kind::Allow, r.into()));
        self.rules.extend(rules);
        self
    }

    /// Tools (or rules) refused, as Claude Code's `--disallowedTools`: deny rules next to the
    /// settings' `permissions.deny`, which nothing overrides. Repeatable.
    pub fn disallowed_tools<I>(mut self, rules: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let rules = rules.into_iter().map(|r| (Kind::Deny, r.into()));
        self.rules.extend(rules);
        self
    }

    /// Claude Code's default permission mode: a tool call no allow rule (settings'
    /// `permissions.allow`, [`allowed_tools`](Self::allowed_tools)) covers, and no PreToolUse
    /// hook allows, is asked about — PermissionRequest hooks, then the
    /// [`Approval`](tower_agent_layers::hooks::Approval) service, else refused, as `claude -p`
    /// does. Without it (the default) such a call runs, as it did before this crate read
    /// permission rules; deny and ask rules apply either way.
    pub fn ask_unless_allowed(mut self) -> Self {
        self.ask_unless_allowed = true;
        self
    }

    /// Where agents built with these hooks keep their transcripts (the files of
    /// `transcript_path`), instead of the per-project default under the user's state
    /// directory ([module docs](crate#events)).
    /// [`AgentBuilder::transcripts`](tower_agent_core::agent::AgentBuilder::transcripts) still wins.
    pub fn transcripts_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.transcripts = Transcripts::Dir(dir.into());
        self
    }

    /// No default transcripts: agents built with these hooks keep none unless their builder
    /// asks ([`AgentBuilder::transcripts`](tower_agent_core::agent::AgentBuilder::transcripts)), and
    /// `transcript_path` is then `""`.
    pub fn without_transcripts(mut self) -> Self {
        self.transcripts = Transcripts::Off;
        self
    }

    /// How many times in a row — with no tool call in between — Stop hooks may keep a run from
    /// ending before the next block is overridden (default 8, as in Claude Code; a step with a tool
    /// call resets the count; see [`Hooks::stop_cap`](tower_agent_layers::hooks::Hooks::stop_cap)).
    pub fn stop_cap(mut self, cap: u32) -> Self {
        self.stop_cap = Some(cap);
        self
    }

    /// The model service of `prompt` and `agent` handlers: any model service, such as the
    /// agent's own (a provider, a [`ServiceBuilder`](tower::ServiceBuilder) stack over one, or
    /// a [`ScriptedModel`](tower_agent_core::model::ScriptedModel)). A handler's `model` field becomes
    /// the request's [`ModelSettings::model`](tower_agent_core::model::ModelSettings::model). Without
    /// it, `prompt` and `agent` handlers are skipped with a warning
    /// ([`CommandHooks::warnings`]).
    pub fn model<S>(mut self, model: S) -> Self
    where
        S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.model = Some(BoxModelService::new(model.map_err(Into::into)));
        self
    }

    /// The MCP servers `mcp_tool` handlers call (usually the set the agent registers, so
    /// its connections are reused: a handler never connects a server). Without it,
    /// `mcp_tool` handlers are skipped with a warning ([`CommandHooks::warnings`]).
    #[cfg(feature = "mcp")]
    pub fn mcp(mut self, servers: tower_agent_mcp::client::McpServers) -> Self {
        self.mcp = Some(servers);
        self
    }

    /// Loads every source, in order. Describing a hooks directory runs its executables: this
    /// blocks for as long as they take (at most 10 s each).
    ///
    /// # Errors
    ///
    /// A file that cannot be read or is not JSON, a bad value in it, an unknown event or
    /// handler type, a matcher that is not a valid pattern, or a hooks-directory executable
    /// that does not describe itself: a [`ConfigError`] naming the file and the JSON path.
    ///
    /// A command whose script does not exist (or, run directly, is not executable) is no
    /// error — Claude Code loads it too, and the script may appear later — but it is listed
    /// in [`CommandHooks::warnings`] and logged at `WARN`, naming the hook, where it is
    /// defined and the path (see the
    /// [module docs](crate#hooks-whose-script-is-missing)).
    pub fn build(self) -> Result<CommandHooks, ConfigError> {
        let again = self.clone();
        let files = snapshot(&self.settings_files());
        // Read once here, not at every hook call (see `Inner::hook_dir`).
        let process_dir = std::env::current_dir().ok();
        let (project_dir, conflict) = self.project(process_dir.as_deref());
        let mut config = Config::default();
        if let Some(warning) = conflict {
            config.warn(warning);
        }
        config.model = self.model;
        #[cfg(feature = "mcp")]
        {
            config.mcp = self.mcp;
        }
        config.project_dir.clone_from(&project_dir);
        let data_root = self
            .plugin_data_dir
            .clone()
            .unwrap_or_else(|| plugin::default_data_root(&project_dir));
        for source in &self.sources {
            match source {
                Source::File(path) => config::load_file(path, &project_dir, &mut config)?,
                Source::Json(value, origin) => {
                    config::load_settings(value, origin, &project_dir, &mut config)?;
                }
                Source::Dir(dir) => config::load_dir(dir, &project_dir, &mut config)?,
                Source::Plugin(dir) => {
                    plugin::load_plugin(dir, &data_root, &project_dir, &mut config)?;
                }
                Source::Gemini(path) => formats::load_gemini(path, &project_dir, &mut config)?,
                Source::Codex(path) => formats::load_codex(path, &project_dir, &mut config)?,
                #[cfg(feature = "wasm")]
                Source::Wasm(hook) => config::add_described(
                    &hook.description().clone(),
                    &crate::exec::Exec::Wasm(hook.clone()),
                    hook.name(),
                    &project_dir,
                    &mut config,
                )?,
            }
        }
        for (i, (kind, rule)) in self.rules.iter().enumerate() {
            let origin = match kind {
                Kind::Deny => "CommandHooksBuilder::disallowed_tools",
                _ => "CommandHooksBuilder::allowed_tools",
            };
            config.add_rule(*kind, rule, origin, &format!("[{i}]"))?;
        }
        config.rules.ask_unless_allowed = self.ask_unless_allowed;
        config.disabled_hooks.extend(self.disabled_hooks);
        config.disabled_plugins.extend(self.disabled_plugins);
        config.finish(&self.trusted)?;
        scripts::report_missing(&mut config);
        let permission_mode = match self.permission_mode.as_deref() {
            None | Some("manual") => "default",
            Some(mode) => PERMISSION_MODES
                .into_iter()
                .find(|m| *m == mode)
                .ok_or_else(|| {
                    ConfigError::new(
                        "CommandHooksBuilder::permission_mode",
                        "",
                        format!(
                            "unknown permission mode `{mode}` (one of {})",
                            PERMISSION_MODES.join(", ")
                        ),
                    )
                })?,
        };
        // Transcripts default on only when there is a hook to read them.
        let configured = !config.disabled && config.events.iter().any(|e| !e.is_empty());
        let transcripts = match self.transcripts {
            Transcripts::Off => None,
            Transcripts::Dir(dir) => Some(dir),
            Transcripts::Default if configured => {
                tower_agent_core::agent::transcript::default_dir(&project_dir)
            }
            Transcripts::Default => None,
        };
        Ok(CommandHooks {
            inner: Arc::new(Inner {
                config,
                project_dir,
                process_dir,
                permission_mode,
            }),
            transcripts,
            stop_cap: self.stop_cap,
            reload: Arc::new(Reloader {
                builder: again,
                files,
            }),
        })
    }

    /// The project directory: the one given, else the directory holding the `.claude` of
    /// the first project settings file ([`project_of`]), else `process_dir`; and a warning
    /// when project settings files of another project were given too.
    fn project(&self, process_dir: Option<&Path>) -> (PathBuf, Option<String>) {
        if let Some(dir) = &self.project_dir {
            return (
                std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
                None,
            );
        }
        let mut first: Option<(PathBuf, &Path)> = None;
        let mut conflict = None;
        for file in self.sources.iter().filter_map(|s| match s {
            Source::File(path) => Some(path),
            _ => None,
        }) {
            let Some(project) = project_of(file) else {
                continue;
            };
            match &first {
                None => first = Some((project, file)),
                Some((dir, from)) if *dir != project && conflict.is_none() => {
                    conflict = Some(format!(
                        "{}: the settings of the project {}, while the project directory is {} \
                         (from {}); set CommandHooksBuilder::project_dir to choose",
                        file.display(),
                        project.display(),
                        dir.display(),
                        from.display()
                    ));
                }
                Some(_) => {}
            }
        }
        let dir = match first {
            Some((dir, _)) => dir,
            None => process_dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        };
        (dir, conflict)
    }

    /// The settings files of the sources (settings, Gemini CLI and Codex files), whose
    /// changes [`CommandHooks::reload`] looks for.
    fn settings_files(&self) -> Vec<PathBuf> {
        self.sources
            .iter()
            .filter_map(|s| match s {
                Source::File(p) | Source::Gemini(p) | Source::Codex(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }
}

/// The project a settings file belongs to: `<dir>` for `<dir>/.claude/settings.json` and
/// `<dir>/.claude/settings.local.json` (as Claude Code's project is where its `.claude` is),
/// unless that `.claude` is the user's own (`~/.claude`, or `$CLAUDE_CONFIG_DIR`): user
/// settings belong to no project.
fn project_of(file: &Path) -> Option<PathBuf> {
    let file = std::path::absolute(file).ok()?;
    if !matches!(
        file.file_name()?.to_str()?,
        "settings.json" | "settings.local.json"
    ) {
        return None;
    }
    let claude = file.parent()?;
    if claude.file_name()? != ".claude" || is_user_config(claude) {
        return None;
    }
    claude.parent().map(Path::to_path_buf)
}

/// Whether `dir` is the user's Claude Code directory: `$CLAUDE_CONFIG_DIR`, or `~/.claude`.
fn is_user_config(dir: &Path) -> bool {
    let user = [
        std::env::var_os("CLAUDE_CONFIG_DIR").map(PathBuf::from),
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".claude")),
    ];
    user.into_iter()
        .flatten()
        .filter(|u| !u.as_os_str().is_empty())
        .any(|u| {
            u == dir || matches!((u.canonicalize(), dir.canonicalize()), (Ok(a), Ok(b)) if a == b)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_of_a_settings_file() {
        let of = |p: &str| project_of(Path::new(p));
        assert_eq!(
            of("/work/app/.claude/settings.json"),
            Some("/work/app".into())
        );
        assert_eq!(
            of("/work/app/.claude/settings.local.json"),
            Some("/work/app".into())
        );
        assert_eq!(of("/work/app/.claude/other.json"), None);
        assert_eq!(of("/work/app/settings.json"), None);
        assert_eq!(of("/work/app/.gemini/settings.json"), None);
        // The user's settings belong to no project.
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            let user = PathBuf::from(home).join(".claude/settings.json");
            assert_eq!(project_of(&user), None);
        }
    }
}
