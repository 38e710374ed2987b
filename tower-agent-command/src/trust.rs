//! Trusted-hash pins: a handler whose script changed since it was trusted is skipped.
//!
//! A pin is the SHA-256 of **the script file the command runs**, as lowercase or uppercase
//! hex (64 digits). The script is found without running anything:
//!
//! - exec form (`args`): the program, after `${CLAUDE_PROJECT_DIR}` / plugin substitution;
//! - shell form: the command is split into words as the shell would (quotes removed,
//!   `$CLAUDE_PROJECT_DIR` / `${CLAUDE_PROJECT_DIR}` and a leading `~/` expanded, leading
//!   `VAR=value` assignments skipped) and its first word is the program;
//! - when the program is an interpreter (`sh`, `bash`, `zsh`, `dash`, `python`, `python3`,
//!   `node`, `ruby`, `perl`, `deno`, `bun`, `env`), the script is its first argument that
//!   does not start with `-` (for `env`, the first that is neither an option nor an
//!   assignment), itself an interpreter or the script;
//! - a `wasm` handler's script is its component's file; its pin is checked on the component
//!   as it was loaded (what runs is in memory), when the hooks are built and before each call;
//! - a relative path resolves against the project directory at build time, and against the
//!   directory the handler runs in (its input's `cwd`) before each spawn, since that is the
//!   file the handler would run; a bare name (no `/`) as the program is looked up in `PATH`.
//!
//! The file is read whole, at most [`MAX_SCRIPT`] bytes (a FIFO or device is refused
//! without blocking); a larger or unreadable file counts as changed. The hash is checked
//! at build time (a mismatch is listed in [`CommandHooks::warnings`](super::CommandHooks::warnings))
//! and again **before every spawn** (a mismatch skips the handler and is reported with
//! [`RunContext::warn`](tower_agent_core::context::RunContext::warn)).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use sha2::{Digest, Sha256};

use crate::exec::Exec;

/// The largest script hashed: 16 MiB.
pub(crate) const MAX_SCRIPT: u64 = 16 << 20;

const INTERPRETERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "python", "python3", "node", "ruby", "perl", "deno", "bun", "env",
];

/// A trusted hash and the script it pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pin {
    hex: String,
    /// The script, resolved against the project directory.
    script: Option<PathBuf>,
    /// The script's path as the command names it, when that is relative: the handler runs
    /// the file it names in the directory it runs in.
    relative: Option<PathBuf>,
    /// A `wasm` handler's component, as it was loaded (its SHA-256): what runs is in memory,
    /// so the pin is checked on it, not on the file.
    loaded: Option<String>,
}

impl Pin {
    /// A pin from 64 hex digits.
    pub(crate) fn parse(hex: &str) -> Result<Pin, String> {
        let hex = hex.trim();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("must be a SHA-256 hash: 64 hex digits".into());
        }
        Ok(Pin {
            hex: hex.to_ascii_lowercase(),
            script: None,
            relative: None,
            loaded: None,
        })
    }

    pub(crate) fn hex(&self) -> &str {
        &self.hex
    }

    /// `Ok` when the script the handler would run in `cwd` (its working directory) still has
    /// the trusted hash; else why not.
    pub(crate) fn verify(&self, cwd: &Path) -> Result<(), String> {
        if let Some(loaded) = &self.loaded {
            return if *loaded == self.hex {
                Ok(())
            } else {
                Err(format!(
                    "the component loaded from `{}` is not the one trusted (sha256 {loaded}, trusted {})",
                    self.script.as_deref().unwrap_or(Path::new("")).display(),
                    self.hex
                ))
            };
        }
        let Some(project_script) = &self.script else {
            return Err("its script could not be found".into());
        };
        let in_cwd = self
            .relative
            .as_ref()
            .map(|r| std::path::absolute(cwd.join(r)).unwrap_or_else(|_| cwd.join(r)));
        let script = in_cwd.as_ref().unwrap_or(project_script);
        let actual = hash_file(script)?;
        if actual == self.hex {
            Ok(())
        } else {
            Err(format!(
                "`{}` changed since it was trusted (sha256 {actual}, trusted {})",
                script.display(),
                self.hex
            ))
        }
    }
}

/// The lowercase hex SHA-256 of a file (at most [`MAX_SCRIPT`] bytes).
pub(crate) fn hash_file(path: &Path) -> Result<String, String> {
    let bytes = tower_agent_os::bounded::read_regular(path, MAX_SCRIPT)
        .map_err(|e| format!("cannot hash `{}`: {e}", path.display()))?;
    Ok(hex(&Sha256::digest(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Finds the script of a pinned handler (see the module docs) and records it in its pin:
/// `pin` and `env` are the handler's (its `Extras::pin` and `Extras::env`).
pub(crate) fn resolve(
    exec: &Exec,
    project_dir: &Path,
    pin: &mut Option<Arc<Pin>>,
    env: &[(String, String)],
) -> Result<(), String> {
    let Some(old) = pin.as_deref() else {
        return Ok(());
    };
    let (script, relative) = locate(exec, project_dir, env)
        .ok_or_else(|| "cannot find the script of a command pinned with `sha256`".to_owned())?;
    *pin = Some(Arc::new(Pin {
        hex: old.hex.clone(),
        script: Some(script),
        relative,
        loaded: loaded(exec),
    }));
    Ok(())
}

/// Pins a handler whose script is `script` (a builder `trust` entry): sets `pin`, the
/// handler's `Extras::pin`, if it has none (`env`: its `Extras::env`).
pub(crate) fn pin_if_script(
    exec: &Exec,
    project_dir: &Path,
    pin: &mut Option<Arc<Pin>>,
    env: &[(String, String)],
    script: &Path,
    hex: &str,
) -> Result<bool, String> {
    if pin.is_some() {
        return Ok(false);
    }
    let Some((found, relative)) = locate(exec, project_dir, env) else {
        return Ok(false);
    };
    let wanted = std::path::absolute(project_dir.join(script)).unwrap_or_default();
    let same = found == wanted
        || matches!((found.canonicalize(), wanted.canonicalize()), (Ok(a), Ok(b)) if a == b);
    if !same {
        return Ok(false);
    }
    let mut pinned = Pin::parse(hex)?;
    pinned.script = Some(found);
    pinned.relative = relative;
    pinned.loaded = loaded(exec);
    *pin = Some(Arc::new(pinned));
    Ok(true)
}

/// The SHA-256 of a `wasm` handler's component as loaded; `None` for other handlers.
#[cfg_attr(not(feature = "wasm"), allow(unused_variables))]
fn loaded(exec: &Exec) -> Option<String> {
    match exec {
        #[cfg(feature = "wasm")]
        Exec::Wasm(hook) => Some(hook.sha256()),
        _ => None,
    }
}

/// The script a handler runs (see the module docs), as an absolute path.
#[cfg(test)]
fn script_of(exec: &Exec, project_dir: &Path, env: &[(String, String)]) -> Option<PathBuf> {
    locate(exec, project_dir, env).map(|(script, _)| script)
}

/// The script a handler runs (see the module docs), as an absolute path resolved against
/// the project directory; and, when the command names it by a relative path, that path.
fn locate(
    exec: &Exec,
    project_dir: &Path,
    env: &[(String, String)],
) -> Option<(PathBuf, Option<PathBuf>)> {
    let dir = project_dir.to_string_lossy();
    let expand = |w: &str| -> String {
        let mut w = w
            .replace("${CLAUDE_PROJECT_DIR}", &dir)
            .replace("$CLAUDE_PROJECT_DIR", &dir);
        for (name, value) in env {
            w = w
                .replace(&format!("${{{name}}}"), value)
                .replace(&format!("${name}"), value);
        }
        match (w.strip_prefix("~/"), std::env::var_os("HOME")) {
            (Some(rest), Some(home)) => Path::new(&home).join(rest).to_string_lossy().into_owned(),
            _ => w,
        }
    };
    let words: Vec<String> = match exec {
        Exec::Argv { program, args } => std::iter::once(program)
            .chain(args)
            .map(|w| expand(w))
            .collect(),
        Exec::Shell { command, .. } => shlex::split(command)?
            .iter()
            .map(|w| expand(w))
            .skip_while(|w| is_assignment(w))
            .collect(),
        // No script: an `http`, `prompt` or `agent` handler runs no file of its own.
        #[cfg(feature = "http-hooks")]
        Exec::Http(_) => return None,
        Exec::Model(_) => return None,
        #[cfg(feature = "mcp")]
        Exec::Mcp(_) => return None,
        // A `wasm` handler's script is its component's file.
        #[cfg(feature = "wasm")]
        Exec::Wasm(hook) => {
            return hook
                .path()
                .and_then(|p| std::path::absolute(p).ok())
                .map(|p| (p, None));
        }
    };
    let mut words = words.into_iter();
    let mut program = words.next()?;
    let mut is_program = true;
    while is_interpreter(&program) {
        let env = basename(&program) == "env";
        program = words.find(|w| !(w.starts_with('-') || (env && is_assignment(w))))?;
        is_program = false;
    }
    let path = Path::new(&program);
    let (path, relative) = if path.is_absolute() {
        (path.to_path_buf(), None)
    } else if is_program && !program.contains('/') {
        (which(&program)?, None)
    } else {
        (project_dir.join(path), Some(path.to_path_buf()))
    };
    Some((std::path::absolute(path).ok()?, relative))
}

pub(super) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

pub(super) fn is_interpreter(program: &str) -> bool {
    INTERPRETERS.contains(&basename(program))
}

pub(super) fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
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

    #[test]
    fn finds_the_script() {
        let p = Path::new("/proj");
        let env = [("CLAUDE_PLUGIN_ROOT".to_owned(), "/plug".to_owned())];
        assert_eq!(
            script_of(&shell("\"$CLAUDE_PROJECT_DIR\"/hooks/a.sh --x"), p, &[]),
            Some("/proj/hooks/a.sh".into())
        );
        assert_eq!(
            script_of(&shell("FOO=1 python3 -u hooks/b.py arg"), p, &[]),
            Some("/proj/hooks/b.py".into())
        );
        assert_eq!(
            script_of(&shell("\"${CLAUDE_PLUGIN_ROOT}\"/s/c.sh"), p, &env),
            Some("/plug/s/c.sh".into())
        );
        assert_eq!(
            script_of(&shell("/usr/bin/env bash ./d.sh"), p, &[]),
            Some("/proj/d.sh".into())
        );
        let argv = Exec::Argv {
            program: "${CLAUDE_PROJECT_DIR}/e.sh".into(),
            args: vec!["x".into()],
        };
        assert_eq!(script_of(&argv, p, &[]), Some("/proj/e.sh".into()));
        assert_eq!(script_of(&shell("'unterminated"), p, &[]), None);
        // A relative script is also kept as written: it is checked where the handler runs.
        assert_eq!(
            locate(&shell("bash ./d.sh"), p, &[]),
            Some(("/proj/d.sh".into(), Some("./d.sh".into())))
        );
        assert_eq!(
            locate(&shell("\"$CLAUDE_PROJECT_DIR\"/a.sh"), p, &[]),
            Some(("/proj/a.sh".into(), None))
        );
    }

    #[test]
    fn pins_are_hex() {
        assert!(Pin::parse(&"a".repeat(64)).is_ok());
        assert!(Pin::parse("abc").is_err());
        assert!(Pin::parse(&"g".repeat(64)).is_err());
    }
}
