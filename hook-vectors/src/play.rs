//! The directory a scenario is played in, and the recorder every hook of it runs.
//!
//! Every hook of a scenario is the one recorder script (`record.sh`), run as
//! `sh "$CLAUDE_PROJECT_DIR/.claude/hooks/record.sh" <answer>`: it saves its stdin (the hook's
//! input) and what it sees of its environment in the play's log directory, then answers with
//! the named answer's stdout, stderr and exit code (first appending the answer's `env` lines to
//! `$CLAUDE_ENV_FILE`, when it is set). So every host runs the same hooks, and
//! what each hook was given is on disk in the order the hooks ran.

use std::{
    collections::BTreeMap,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use serde_json::Value;

use crate::{
    Error,
    vector::{Answer, Scenario},
};

/// The directories of one play of a scenario, in a temporary directory removed when the play
/// is dropped: `project/` (the project, with `.claude/settings.json` — or
/// `settings.local.json`, as the scenario says — and the recorder in
/// `.claude/hooks/`), `home/` (a home of the agent's own), `log/` (what the hooks recorded),
/// `answers/` (what they answer).
#[derive(Debug)]
pub struct Play {
    root: tempfile::TempDir,
}

fn io(what: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::new(format!("{}: {e}", what.display()))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    std::fs::write(path, text).map_err(io(path))
}

impl Play {
    /// Lays out the play of `scenario`: the directories, the settings, the project's files,
    /// the answers and the recorder (and `git init` for a scenario that asks).
    pub fn new(scenario: &Scenario) -> Result<Play, Error> {
        scenario.validate()?;
        let root = tempfile::tempdir().map_err(Error::new)?;
        let play = Play { root };
        for dir in ["project/.claude/hooks", "home", "log", "answers"] {
            let dir = play.path(dir);
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        }
        let settings = serde_json::to_string_pretty(&scenario.settings()).map_err(Error::new)?;
        write(&play.project().join(scenario.settings_file()), &settings)?;
        for (path, content) in &scenario.files {
            write(&play.project().join(path), content)?;
        }
        for (path, content) in &scenario.plugin {
            write(&play.plugin().join(path), content)?;
        }
        if !scenario.mcp_servers.is_empty() {
            let servers = mcp_servers(&scenario.mcp_servers)?;
            write(&play.project().join(".mcp.json"), &servers)?;
        }
        let cwd = play.cwd(scenario);
        std::fs::create_dir_all(&cwd).map_err(io(&cwd))?;
        if scenario.git {
            let status = std::process::Command::new("git")
                .args(["init", "-q"])
                .current_dir(play.project())
                .status()
                .map_err(|e| Error::new(format!("git init: {e}")))?;
            if !status.success() {
                return Err(Error::new(format!("git init: {status}")));
            }
        }
        let mut answers = scenario.hook_answers.clone();
        answers.insert("observe".into(), Answer::default());
        for (name, answer) in &answers {
            let base = play.path("answers").join(name);
            write(&base.with_extension("out"), &answer.stdout)?;
            write(&base.with_extension("err"), &answer.stderr)?;
            write(&base.with_extension("exit"), &answer.exit.to_string())?;
            if answer.sleep > 0 {
                write(&base.with_extension("sleep"), &answer.sleep.to_string())?;
            }
            if answer.times > 0 {
                write(&base.with_extension("times"), &answer.times.to_string())?;
            }
            if !answer.env.is_empty() {
                let lines: String = answer.env.iter().map(|l| format!("{l}\n")).collect();
                write(&base.with_extension("env"), &lines)?;
            }
        }
        let script = RECORD
            .replace("@LOG@", &play.path("log").to_string_lossy())
            .replace("@ANSWERS@", &play.path("answers").to_string_lossy());
        // A host may set `$CLAUDE_PROJECT_DIR` to the directory it runs in rather than the
        // project: a recorder there too, so its hooks still run and show what they saw.
        let mut dirs = vec![play.project()];
        if cwd != play.project() {
            dirs.push(cwd);
        }
        for dir in dirs {
            let path = dir.join(".claude/hooks/record.sh");
            write(&path, &script)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(io(&path))?;
        }
        Ok(play)
    }

    /// The scenario's model answers for this play: `<project>` in their strings is the
    /// project's path (the file tools take absolute paths).
    pub fn answers(&self, scenario: &Scenario) -> Vec<Vec<Value>> {
        self.placed(&scenario.answers)
    }

    /// The scenario's subagent answers ([`Scenario::agents`]), `<project>` replaced as in
    /// [`answers`](Self::answers).
    pub fn agent_answers(&self, scenario: &Scenario) -> BTreeMap<String, Vec<Vec<Value>>> {
        scenario
            .agents
            .iter()
            .map(|(marker, answers)| (marker.clone(), self.placed(answers)))
            .collect()
    }

    fn placed(&self, answers: &[Vec<Value>]) -> Vec<Vec<Value>> {
        fn replace(v: &mut Value, project: &str) {
            match v {
                Value::String(s) if s.contains("<project>") => {
                    *s = s.replace("<project>", project);
                }
                Value::Array(a) => a.iter_mut().for_each(|v| replace(v, project)),
                Value::Object(m) => m.values_mut().for_each(|v| replace(v, project)),
                _ => {}
            }
        }
        let mut answers = answers.to_vec();
        let project = self.project().to_string_lossy().into_owned();
        answers
            .iter_mut()
            .flatten()
            .for_each(|v| replace(v, &project));
        answers
    }

    /// The play's root directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// A path under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The folder of the scenario's plugin ([`Scenario::plugin`]).
    pub fn plugin(&self) -> PathBuf {
        self.path("plugin")
    }

    /// The project directory.
    pub fn project(&self) -> PathBuf {
        self.path("project")
    }

    /// The directory the agent runs in.
    pub fn cwd(&self, scenario: &Scenario) -> PathBuf {
        match scenario.cwd.as_str() {
            "" => self.project(),
            sub => self.project().join(sub),
        }
    }

    /// The agent's home directory.
    pub fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// What the hooks recorded, in the order they started (a hook still writing is left
    /// out).
    pub fn hooks(&self) -> Vec<Recorded> {
        read_log(&self.path("log"))
    }
}

/// One hook run: the answer it gave, its input, and what it saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The answer it gave (the recorder's argument).
    pub answer: String,
    /// Its input, as JSON (`null` if it was not JSON).
    pub input: Value,
    /// Its working directory.
    pub cwd: String,
    /// `$CLAUDE_PROJECT_DIR` as it saw it (`-`: unset).
    pub project_dir: String,
    /// Whether `$CLAUDE_ENV_FILE` was set.
    pub env_file: bool,
}

/// Whether a hook in `dir` has saved its input and not yet what it saw (it is still
/// recording).
pub(crate) fn in_flight(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".in").map(str::to_owned))
        .any(|n| !dir.join(format!("{n}.meta")).exists())
}

/// The most hook runs read from a play's log (10,000; the first to start).
pub const MAX_HOOKS: usize = 10_000;

/// The largest hook input read, in bytes (1 MiB; a longer one reads as `null`).
pub const MAX_INPUT: u64 = 1 << 20;

pub(crate) fn read_log(dir: &Path) -> Vec<Recorded> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".meta").map(str::to_owned))
        .collect();
    // `<nanoseconds>-<pid>`: the order the hooks started in.
    names.sort_by_key(|n| {
        let (t, pid) = n.split_once('-').unwrap_or((n, "0"));
        (
            t.parse::<u128>().unwrap_or(0),
            pid.parse::<u32>().unwrap_or(0),
        )
    });
    names.truncate(MAX_HOOKS);
    names
        .iter()
        .filter_map(|n| {
            let path = dir.join(format!("{n}.in"));
            let input = match std::fs::metadata(&path).ok()?.len() {
                n if n > MAX_INPUT => Vec::new(),
                _ => std::fs::read(&path).ok()?,
            };
            let meta = std::fs::read_to_string(dir.join(format!("{n}.meta"))).ok()?;
            let mut lines = meta.lines();
            let mut next = || lines.next().unwrap_or_default().to_owned();
            Some(Recorded {
                answer: next(),
                cwd: next(),
                project_dir: next(),
                env_file: next() != "-",
                input: serde_json::from_slice(&input).unwrap_or(Value::Null),
            })
        })
        .collect()
}

/// The recorder: the input first, then `.meta`, renamed into place whole (its presence says
/// the input is whole and the meta too).
const RECORD: &str = r#"#!/bin/sh
t="$(date +%s%N)-$$"
cat > "@LOG@/$t.in"
printf '%s\n%s\n%s\n%s\n' "$1" "$(pwd)" "${CLAUDE_PROJECT_DIR:--}" "${CLAUDE_ENV_FILE:--}" > "@LOG@/$t.part"
mv "@LOG@/$t.part" "@LOG@/$t.meta"
a="@ANSWERS@/$1"
if [ -f "$a.times" ]; then
    # An answer given a number of times: a lock keeps parallel hooks from both taking the last.
    while ! mkdir "$a.lock" 2>/dev/null; do sleep 0.01; done
    n=$(cat "$a.times")
    if [ "$n" -gt 0 ]; then echo $((n - 1)) > "$a.times"; fi
    rmdir "$a.lock"
    [ "$n" -gt 0 ] || exit 0
fi
if [ -f "$a.sleep" ]; then sleep "$(cat "$a.sleep")"; fi
if [ -f "$a.env" ] && [ -n "${CLAUDE_ENV_FILE:-}" ]; then cat "$a.env" >> "$CLAUDE_ENV_FILE"; fi
cat "$a.out"
cat "$a.err" >&2
exit "$(cat "$a.exit")"
"#;

/// Where the MCP reference servers of the scenarios are (the directory whose `node_modules`
/// holds them, `<mcp-servers>` in a scenario's [`mcp_servers`](Scenario::mcp_servers)), for
/// the plays of this process; else `$HOOK_VECTORS_MCP_SERVERS` says.
pub fn use_mcp_servers(dir: impl Into<PathBuf>) {
    *MCP_SERVERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(dir.into());
}

static MCP_SERVERS: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// The `.mcp.json` of a scenario's MCP servers, `<mcp-servers>` replaced by the directory
/// [`use_mcp_servers`] names, else `$HOOK_VECTORS_MCP_SERVERS`.
fn mcp_servers(servers: &serde_json::Map<String, Value>) -> Result<String, Error> {
    let set = MCP_SERVERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let dir = set
        .map(|d| d.to_string_lossy().into_owned())
        .or_else(|| std::env::var("HOOK_VECTORS_MCP_SERVERS").ok())
        .ok_or_else(|| {
            Error::new(
                "the scenario has MCP servers: set HOOK_VECTORS_MCP_SERVERS to the directory \
                 whose node_modules holds them (tower-agent's `.ci/mcp-servers` prints it)",
            )
        })?;
    let text = serde_json::json!({ "mcpServers": servers }).to_string();
    // In a JSON string: the directory escaped as one.
    let escaped = serde_json::to_string(&dir).map_err(Error::new)?;
    Ok(text.replace("<mcp-servers>", &escaped[1..escaped.len() - 1]))
}
