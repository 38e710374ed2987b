//! Hooks directories: each executable asked once what it handles.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::Value;

use super::{
    ConfigError, HookEvent,
    parsed::{Config, Definition},
    settings::{compile_matcher, fails_closed, flag, not_fired, timeout},
};
use crate::{exec::Exec, handler::Extras, spawn};

/// How long a hooks-directory executable may take to describe itself.
pub(crate) const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Asks each executable of `dir` (sorted by name; hidden and non-executable files skipped)
/// what it handles.
pub(crate) fn load_dir(
    dir: &Path,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let dir_name = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|e| {
        ConfigError::new(
            &dir_name,
            "",
            format!("cannot read the hooks directory: {e}"),
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.'));
            !hidden && (is_wasm(p) || is_executable(p))
        })
        .collect();
    files.sort();
    for file in files {
        if is_wasm(&file) {
            wasm(&file, project_dir, out)?;
        } else {
            describe(&file, project_dir, out)?;
        }
    }
    Ok(())
}

/// A `.wasm` file: a WebAssembly hook, which describes itself through its `describe` export.
fn is_wasm(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm") && path.is_file()
}

/// Loads the WebAssembly hook `file` (default limits) and adds what it describes.
#[cfg(feature = "wasm")]
fn wasm(file: &Path, project_dir: &Path, out: &mut Config) -> Result<(), ConfigError> {
    let name = file.display().to_string();
    let hook = tower_agent_wasm::WasmHook::load(file)
        .map_err(|e| ConfigError::new(&name, "", e.to_string()))?;
    let description = hook.description().clone();
    add_described(&description, &Exec::Wasm(hook), &name, project_dir, out)
}

#[cfg(not(feature = "wasm"))]
fn wasm(file: &Path, _: &Path, out: &mut Config) -> Result<(), ConfigError> {
    out.warn(format!(
        "{}: WebAssembly hooks need the `wasm` feature of tower-agent; this hook is skipped",
        file.display()
    ));
    Ok(())
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Runs `file` with `TOWER_AGENT_HOOK_ACTION=describe` and adds what it handles.
fn describe(file: &Path, project_dir: &Path, out: &mut Config) -> Result<(), ConfigError> {
    let name = file.display().to_string();
    let err = |path: &str, message: String| ConfigError::new(&name, path, message);
    let program = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let program = program.to_string_lossy().into_owned();
    let exec = Exec::Argv {
        program,
        args: Vec::new(),
    };
    let output = spawn::run_sync(
        &exec,
        spawn::Dirs::project(project_dir),
        "describe",
        DESCRIBE_TIMEOUT,
    )
    .map_err(|e| err("describe", e))?;
    if output.code != Some(0) {
        let status = match output.code {
            Some(code) => format!("exited with status {code}"),
            None => "was killed by a signal".to_owned(),
        };
        let detail = output.stderr.lines().next().unwrap_or("").trim().to_owned();
        return Err(err(
            "describe",
            if detail.is_empty() {
                status
            } else {
                format!("{status}: {detail}")
            },
        ));
    }
    let value: Value = serde_json::from_str(output.stdout.trim()).map_err(|e| {
        err(
            "describe",
            format!("expected `{{\"events\": [...], \"matcher\": \"...\"}}` on stdout: {e}"),
        )
    })?;
    let Value::Object(d) = value else {
        return Err(err("describe", "must print a JSON object".into()));
    };
    add_described(&d, &exec, &name, project_dir, out)
}

/// Adds what a self-described hook (`d`: its `events`, `matcher`, `timeout`, `failClosed` /
/// `onFailure`, `persistent`) handles, run by `exec`.
pub(crate) fn add_described(
    d: &serde_json::Map<String, Value>,
    exec: &Exec,
    name: &str,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let err = |path: &str, message: String| ConfigError::new(name, path, message);
    let events = match d.get("events") {
        Some(Value::Array(events)) if !events.is_empty() => events,
        Some(Value::String(one)) => &vec![Value::String(one.clone())],
        None => return Err(err("describe", "missing `events`".into())),
        Some(_) => {
            return Err(err(
                "describe.events",
                "must be a non-empty array of event names".into(),
            ));
        }
    };
    let matcher = match d.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => {
            let literal = events.iter().any(|e| e.as_str() == Some("FileChanged"));
            compile_matcher(p, literal).map_err(|m| err("describe.matcher", m))?
        }
        Some(_) => return Err(err("describe.matcher", "must be a string".into())),
    };
    let timeout = timeout(d, "timeout").map_err(|m| err("describe.timeout", m.into()))?;
    let flag = |key: &str| flag(d, key).map_err(|m| err(&format!("describe.{key}"), m.into()));
    let fail_closed = fails_closed(d, out, &format!("{name}: describe"))
        .map_err(|m| err("describe.failClosed", m.into()))?;
    let persistent = flag("persistent")?;
    if persistent && !matches!(exec, Exec::Shell { .. } | Exec::Argv { .. }) {
        return Err(err(
            "describe.persistent",
            "only a process can be persistent".into(),
        ));
    }
    for (i, e) in events.iter().enumerate() {
        let path = format!("describe.events[{i}]");
        let Value::String(e) = e else {
            return Err(err(&path, "must be an event name".into()));
        };
        let Some(event) = HookEvent::parse(e) else {
            if let Some(reason) = not_fired(e) {
                out.warn(format!(
                    "{name}: {path}: the {e} event is not fired by tower-agent ({reason}); skipped"
                ));
                continue;
            }
            return Err(err(&path, format!("unknown hook event `{e}`")));
        };
        let def = Definition {
            exec: exec.clone(),
            timeout,
            fail_closed,
            persistent,
            background: false,
            rewake: false,
            origin: name.to_owned(),
            extras: Extras::default(),
        };
        out.add(event, matcher.clone(), def, project_dir);
    }
    Ok(())
}
