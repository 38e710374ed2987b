//! The script a command handler names, checked when the hooks are built: a handler whose
//! script does not exist (or, run directly, is not executable) cannot run, and would fail
//! open at every call unless it is fail-closed. [`report_missing`] lists each one in
//! [`CommandHooks::warnings`](super::CommandHooks::warnings) (and logs it at `WARN`),
//! naming the hook, where it is defined and the path.
//!
//! The script is found without running anything, and only when it is named beyond doubt (a
//! false alarm on an ordinary command is worse than none):
//!
//! - the words are those of [`trust`](super::trust) (shell form split as the shell would,
//!   leading `VAR=value` assignments skipped; exec form: the program and its arguments), with
//!   `$CLAUDE_PROJECT_DIR` / `${CLAUDE_PROJECT_DIR}` (and `TOWER_AGENT_PROJECT_DIR`), a
//!   plugin's `CLAUDE_PLUGIN_ROOT` / `CLAUDE_PLUGIN_DATA` and, in shell form, a leading `~/`
//!   expanded; a word still holding another variable, a glob, a quote or a shell operator is
//!   never a script;
//! - a program named by a path (a `/` in it: the shell runs that file, no `PATH` lookup) is
//!   the script; a bare name (`jq`, `echo`) is a command of the `PATH` or the shell: not
//!   checked;
//! - after an interpreter (`bash`, `python3`, `node`, `env` … as in [`trust`](super::trust)),
//!   the first argument that is not an option is the script if it is a path (starting with
//!   `/`, `./` or `../`) or ends in a script extension (`.sh`, `.py`, `.js`, `.ts`, `.rb`,
//!   `.pl` …): `python3 hooks/check.py` is checked, `python3 -m module` and `node -e '…'`
//!   are not;
//! - a relative path is taken from the project directory (where a handler runs when the
//!   agent has no working directory of its own).

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
};

use crate::{
    config::Config,
    exec::Exec,
    handler::Handler,
    trust::{basename, is_assignment, is_interpreter},
};

/// The extensions of an interpreter's argument that make it a script.
const SCRIPT_EXTENSIONS: &[&str] = &[
    "sh", "bash", "zsh", "py", "js", "mjs", "cjs", "ts", "mts", "rb", "pl",
];

/// Adds a warning to `config` for every handler whose script is missing or not executable.
pub(crate) fn report_missing(config: &mut Config) {
    if config.disabled {
        return;
    }
    let mut seen = HashSet::new();
    let mut warnings = Vec::new();
    for entry in config.events.iter().flatten() {
        let handler = &entry.handler;
        let Some((script, problem)) =
            check(&handler.exec, &config.project_dir, &handler.extras.env)
        else {
            continue;
        };
        if seen.insert((handler.label.clone(), script.clone())) {
            warnings.push(describe(handler, &script, problem));
        }
    }
    for warning in warnings {
        config.warn(warning);
    }
}

fn describe(handler: &Handler, script: &Path, problem: &str) -> String {
    let then = if handler.fail_closed {
        "blocks whatever it matches (it is fail-closed)"
    } else {
        "fails open: what it guards goes through"
    };
    format!(
        "{}: hook `{}`: its script `{}` {problem}: the hook cannot run, and at every call it {then}",
        handler.origin,
        handler.label,
        script.display()
    )
}

/// The script `exec` names and what is wrong with it, if it names one beyond doubt and it
/// is missing (or, run directly, not executable).
fn check(
    exec: &Exec,
    project_dir: &Path,
    env: &[(String, String)],
) -> Option<(PathBuf, &'static str)> {
    let (words, shell) = match exec {
        Exec::Shell { command, .. } => (shlex::split(command)?, true),
        Exec::Argv { program, args } => (
            std::iter::once(program).chain(args).cloned().collect(),
            false,
        ),
        _ => return None,
    };
    let project = project_dir.to_string_lossy();
    let mut vars: Vec<(&str, &str)> = vec![
        ("CLAUDE_PROJECT_DIR", &project),
        ("TOWER_AGENT_PROJECT_DIR", &project),
    ];
    vars.extend(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let home = std::env::var("HOME").ok();
    // A word with every known variable replaced, or `None` when anything else in it (another
    // variable, a glob, a quote, an operator) makes it more than a plain path.
    let plain = |word: &str| -> Option<String> {
        let placeholder: Vec<(&str, &str)> = vars.iter().map(|(k, _)| (*k, "x")).collect();
        let check = expand(word, &placeholder, shell, Some("x"));
        if check.is_empty() || check.starts_with('~') || check.contains(is_special) {
            return None;
        }
        Some(expand(word, &vars, shell, home.as_deref()))
    };
    let mut words = words.into_iter().skip_while(|w| shell && is_assignment(w));
    let first = words.next()?;
    if !is_interpreter(&first) {
        // Run directly: a path is that file; a bare name is a command of the PATH or the
        // shell's own.
        let program = plain(&first).filter(|p| p.contains('/'))?;
        let path = resolve(&program, project_dir);
        return problem(&path, true).map(|p| (path, p));
    }
    let mut interpreter = first;
    loop {
        let env = basename(&interpreter) == "env";
        let next = words.find(|w| !(w.starts_with('-') || (env && is_assignment(w))))?;
        if is_interpreter(&next) {
            interpreter = next;
            continue;
        }
        let script = plain(&next).filter(|s| looks_like_script(s))?;
        let path = resolve(&script, project_dir);
        return problem(&path, false).map(|p| (path, p));
    }
}

/// Characters that make a word more than a plain path.
fn is_special(c: char) -> bool {
    c.is_whitespace() || "$`*?[]{};&|<>()'\"\\!".contains(c)
}

/// An interpreter's argument that is a script: a path, or a name with a script extension.
fn looks_like_script(word: &str) -> bool {
    word.starts_with('/')
        || word.starts_with("./")
        || word.starts_with("../")
        || Path::new(word)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e))
}

fn resolve(path: &str, project_dir: &Path) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        project_dir.join(path.strip_prefix(".").unwrap_or(path))
    }
}

/// What is wrong with the script at `path`: missing, or (run directly) not executable.
fn problem(path: &Path, run_directly: bool) -> Option<&'static str> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("does not exist"),
        Ok(meta) if run_directly && meta.is_file() && !executable(&meta) => {
            Some("is not executable")
        }
        _ => None,
    }
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    true
}

/// `word` with `$NAME` (shell form only; not when a name character follows) and `${NAME}`
/// replaced for each of `vars`, and in shell form a leading `~/` by `home`.
fn expand(word: &str, vars: &[(&str, &str)], shell: bool, home: Option<&str>) -> String {
    let mut word = word.to_owned();
    for (name, value) in vars {
        word = word.replace(&format!("${{{name}}}"), value);
        if shell {
            word = replace_bare(&word, &format!("${name}"), value);
        }
    }
    match (shell, word.strip_prefix("~/"), home) {
        (true, Some(rest), Some(home)) => format!("{}/{rest}", home.trim_end_matches('/')),
        _ => word,
    }
}

/// `word` with each `var` (`$NAME`) that no name character follows replaced by `value`.
fn replace_bare(word: &str, var: &str, value: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find(var) {
        out.push_str(&rest[..at]);
        let after = &rest[at + var.len()..];
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            out.push_str(var);
        } else {
            out.push_str(value);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(c: &str) -> Exec {
        Exec::Shell {
            shell: "sh",
            command: c.into(),
        }
    }

    /// The script `command` is checked as, in a project that has nothing.
    fn missing(command: &str) -> Option<PathBuf> {
        let env = [("CLAUDE_PLUGIN_ROOT".to_owned(), "/plug".to_owned())];
        check(&shell(command), Path::new("/nonexistent-project"), &env).map(|(p, _)| p)
    }

    #[test]
    fn names_the_scripts_of_ordinary_commands() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(
            missing("\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh"),
            p("/nonexistent-project/.claude/hooks/guard.sh")
        );
        assert_eq!(
            missing("bash \"${CLAUDE_PROJECT_DIR}/x.sh\" --flag"),
            p("/nonexistent-project/x.sh")
        );
        assert_eq!(
            missing("FOO=1 python3 -u hooks/check.py arg"),
            p("/nonexistent-project/hooks/check.py")
        );
        assert_eq!(
            missing("/usr/bin/env bash ./d.sh"),
            p("/nonexistent-project/d.sh")
        );
        assert_eq!(
            missing("\"${CLAUDE_PLUGIN_ROOT}\"/s/c.sh"),
            p("/plug/s/c.sh")
        );
        assert_eq!(missing("./run"), p("/nonexistent-project/run"));
    }

    #[test]
    fn no_false_alarms() {
        for command in [
            "echo hi",
            "jq -r .tool_name",
            "true",
            "python3 -c 'print(1)'",
            "python3 -m some.module",
            "node -e \"require('./a.js')\"",
            "bash -c 'echo hi > /tmp/x.sh'",
            "cd \"$CLAUDE_PROJECT_DIR\" && ./x.sh",
            "$HOME/bin/x.sh",
            "\"$OTHER_DIR\"/x.sh",
            "$CLAUDE_PROJECT_DIRX/x.sh",
            "~someone/x.sh",
            "./*.sh",
            "deno run x.ts",
            "'unterminated",
            "sh",
        ] {
            assert_eq!(missing(command), None, "{command}");
        }
        // Exec form: only the braced project variable is substituted.
        let argv = Exec::Argv {
            program: "$CLAUDE_PROJECT_DIR/x.sh".into(),
            args: vec![],
        };
        assert_eq!(check(&argv, Path::new("/nonexistent-project"), &[]), None);
    }

    #[test]
    fn files_that_exist_are_fine() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("ok.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        let in_dir = |c: &str| check(&shell(c), dir.path(), &[]).map(|(_, why)| why);
        assert_eq!(in_dir("bash ok.sh"), None);
        assert_eq!(
            in_dir("\"$CLAUDE_PROJECT_DIR\"/ok.sh"),
            Some("is not executable")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(in_dir("\"$CLAUDE_PROJECT_DIR\"/ok.sh"), None);
        assert_eq!(in_dir("./gone.sh"), Some("does not exist"));
    }
}
