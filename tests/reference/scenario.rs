//! A scenario — settings, hook answers, prompts, the model's scripted answers — and the project
//! directory it is played in.
//!
//! Every hook of a scenario is the one recorder script (`record.sh`), run as
//! `sh "$CLAUDE_PROJECT_DIR/.claude/hooks/record.sh" <answer>`: it saves its stdin (the hook's
//! input) and what it sees of its environment in the run's log directory, then answers with
//! the named answer's stdout, stderr and exit code. So both agents run the same hooks, and
//! what each hook was given is on disk in the order the hooks ran.

use std::{
    collections::BTreeMap,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// One step of a session: a prompt, a model switch asked for (the SDK's `set_model`), or a
/// prompt in a new process resuming the session (`claude -p --resume <id>`; in tower-agent a
/// run is always that: the thread's next run).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Step {
    Prompt(String),
    SetModel(String),
    Resume(String),
}

/// What a hook answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Answer {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) exit: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) stdout: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) stderr: String,
    /// Seconds the hook waits before it answers (a hook past its timeout).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub(crate) sleep: u32,
    /// Given this many times, then the hook answers nothing (exit 0); `0`: always.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub(crate) times: u32,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A scenario, as a vector file holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Scenario {
    /// What the scenario checks, and the reference section it comes from.
    pub(crate) about: String,
    /// The session's model.
    pub(crate) model: String,
    pub(crate) steps: Vec<Step>,
    /// Answer `i` goes to the model request with `i` assistant messages; `<project>` in a
    /// string of it stands for the project's path (the absolute paths the file tools take).
    pub(crate) answers: Vec<Vec<Value>>,
    /// Events observed by a hook answering nothing (matcher `*`), before `hooks`' own.
    #[serde(default)]
    pub(crate) observe: Vec<String>,
    /// More hooks: event → settings entries whose handlers name an `answer` instead of a
    /// command (`{"matcher": "Bash", "hooks": [{"answer": "deny", "timeout": 5}]}`).
    #[serde(default)]
    pub(crate) hooks: Map<String, Value>,
    /// The hooks' answers by name (`observe` answers nothing).
    #[serde(default)]
    pub(crate) hook_answers: BTreeMap<String, Answer>,
    /// Files written into the project before the play (path relative to the project →
    /// content): `CLAUDE.md` (instructions), `.claude/commands/<name>.md` (slash commands).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) files: BTreeMap<String, String>,
    /// The directory the agent runs in, relative to the project (`""`: the project itself).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) cwd: String,
    /// The session starts with the Setup hooks of `--init` (tower-agent:
    /// `AgentRequest::setup(SetupTrigger::Init)` on its first run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) init: bool,
    /// The project is a git repository (`git init`): Claude Code takes a repository's root as
    /// the project of a session started in a directory under it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) git: bool,
    /// Tools Claude Code may use without asking (`--allowedTools`).
    #[serde(default = "default_tools")]
    pub(crate) allowed_tools: Vec<String>,
}

fn default_tools() -> Vec<String> {
    vec!["Bash".into()]
}

/// The hook command of an answer.
fn command(answer: &str) -> String {
    format!("sh \"$CLAUDE_PROJECT_DIR/.claude/hooks/record.sh\" {answer}")
}

impl Scenario {
    /// The `hooks` section of the settings both agents read.
    pub(crate) fn settings(&self) -> Value {
        let mut hooks = Map::new();
        for event in &self.observe {
            let entry = json!({"matcher": "*", "hooks": [{"type": "command", "command": command("observe")}]});
            hooks.insert(event.clone(), json!([entry]));
        }
        for (event, entries) in &self.hooks {
            let list = hooks
                .entry(event.clone())
                .or_insert_with(|| json!([]))
                .as_array_mut()
                .unwrap();
            for entry in entries.as_array().into_iter().flatten() {
                let mut entry = entry.clone();
                for h in entry["hooks"].as_array_mut().into_iter().flatten() {
                    let h = h.as_object_mut().unwrap();
                    let answer = h
                        .remove("answer")
                        .and_then(|a| a.as_str().map(str::to_owned));
                    h.insert("type".into(), "command".into());
                    h.insert(
                        "command".into(),
                        command(answer.as_deref().unwrap_or("observe")).into(),
                    );
                }
                list.push(entry);
            }
        }
        json!({ "hooks": hooks })
    }
}

/// The directories of one play of a scenario: `project/` (the agent's cwd and project, with
/// `.claude/`), `home/`, `log/` (what the hooks recorded), `answers/`.
pub(crate) struct Play {
    pub(crate) root: tempfile::TempDir,
}

impl Play {
    pub(crate) fn new(scenario: &Scenario) -> Play {
        let root = tempfile::tempdir().unwrap();
        let play = Play { root };
        for dir in ["project/.claude/hooks", "home", "log", "answers"] {
            std::fs::create_dir_all(play.path(dir)).unwrap();
        }
        std::fs::write(
            play.path("project/.claude/settings.json"),
            serde_json::to_string_pretty(&scenario.settings()).unwrap(),
        )
        .unwrap();
        for (path, content) in &scenario.files {
            let path = play.project().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        std::fs::create_dir_all(play.cwd(scenario)).unwrap();
        if scenario.git {
            let status = std::process::Command::new("git")
                .args(["init", "-q"])
                .current_dir(play.project())
                .status()
                .expect("git");
            assert!(status.success(), "git init");
        }
        let mut answers = scenario.hook_answers.clone();
        answers.insert("observe".into(), Answer::default());
        for (name, answer) in &answers {
            let base = play.path("answers").join(name);
            std::fs::write(base.with_extension("out"), &answer.stdout).unwrap();
            std::fs::write(base.with_extension("err"), &answer.stderr).unwrap();
            std::fs::write(base.with_extension("exit"), answer.exit.to_string()).unwrap();
            if answer.sleep > 0 {
                std::fs::write(base.with_extension("sleep"), answer.sleep.to_string()).unwrap();
            }
            if answer.times > 0 {
                std::fs::write(base.with_extension("times"), answer.times.to_string()).unwrap();
            }
        }
        let script = RECORD
            .replace("@LOG@", &play.path("log").to_string_lossy())
            .replace("@ANSWERS@", &play.path("answers").to_string_lossy());
        let path = play.path("project/.claude/hooks/record.sh");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        play
    }

    /// The scenario's model answers, `<project>` replaced by the project's path.
    pub(crate) fn answers(&self, scenario: &Scenario) -> Vec<Vec<Value>> {
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
        let mut answers = scenario.answers.clone();
        let project = self.project().to_string_lossy().into_owned();
        answers
            .iter_mut()
            .flatten()
            .for_each(|v| replace(v, &project));
        answers
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub(crate) fn project(&self) -> PathBuf {
        self.path("project")
    }

    /// The directory the agent runs in.
    pub(crate) fn cwd(&self, scenario: &Scenario) -> PathBuf {
        match scenario.cwd.as_str() {
            "" => self.project(),
            sub => self.project().join(sub),
        }
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// What the hooks recorded, in the order they started.
    pub(crate) fn hooks(&self) -> Vec<Recorded> {
        read_log(&self.path("log"))
    }
}

/// One hook run: the answer it gave, its input, and what it saw.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) answer: String,
    pub(crate) input: Value,
    /// The working directory, `$CLAUDE_PROJECT_DIR` and whether `$CLAUDE_ENV_FILE` was set.
    pub(crate) cwd: String,
    pub(crate) project_dir: String,
    pub(crate) env_file: bool,
}

fn read_log(dir: &Path) -> Vec<Recorded> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
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
    names
        .iter()
        .map(|n| {
            let input = std::fs::read(dir.join(format!("{n}.in"))).unwrap();
            let meta = std::fs::read_to_string(dir.join(format!("{n}.meta"))).unwrap();
            let mut lines = meta.lines();
            let mut next = || lines.next().unwrap_or_default().to_owned();
            Recorded {
                answer: next(),
                cwd: next(),
                project_dir: next(),
                env_file: next() != "-",
                input: serde_json::from_slice(&input).unwrap_or(Value::Null),
            }
        })
        .collect()
}

/// The recorder: the input first, then `.meta` (its presence says the input is whole).
const RECORD: &str = r#"#!/bin/sh
t="$(date +%s%N)-$$"
cat > "@LOG@/$t.in"
printf '%s\n%s\n%s\n%s\n' "$1" "$(pwd)" "${CLAUDE_PROJECT_DIR:--}" "${CLAUDE_ENV_FILE:--}" > "@LOG@/$t.meta"
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
cat "$a.out"
cat "$a.err" >&2
exit "$(cat "$a.exit")"
"#;
