//! A `wasm` handler of a settings file: `{"type": "wasm", "path": "...", ...}`.

#[cfg(feature = "wasm")]
use std::{path::PathBuf, time::Duration};

use serde_json::{Map, Value};

use super::{ConfigError, parsed::Config};
use crate::exec::Exec;

/// The fields of a `wasm` handler: `path` (relative to the project directory;
/// `${CLAUDE_PROJECT_DIR}` and the source's variables, such as a plugin's
/// `${CLAUDE_PLUGIN_ROOT}`, are replaced), `memoryMiB`, `cpuMs`, `answerKiB` (the limits, see
/// [`WasmLimits`](tower_agent_wasm::WasmLimits)), `stateless`, and the grants (see
/// [`WasmGrants`](tower_agent_wasm::WasmGrants)): `readDirs` and `writeDirs` (directories, relative
/// to the project directory, which the hook opens by the same path), `env` (variable names),
/// `clocks` and `random` (`true`). `None` (with a warning) without the `wasm` feature.
// `file` and `path` name the handler in the warning of a build without the feature.
#[allow(unused_variables)]
pub(super) fn wasm_handler(
    h: &Map<String, Value>,
    file: &str,
    path: &str,
    out: &mut Config,
    err: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<Option<Exec>, ConfigError> {
    #[cfg(not(feature = "wasm"))]
    {
        out.warn(format!(
            "{file}: {path}: `wasm` hooks need the `wasm` feature of tower-agent; this handler is skipped"
        ));
        Ok(None)
    }
    #[cfg(feature = "wasm")]
    {
        let component = match h.get("path") {
            Some(Value::String(p)) if !p.trim().is_empty() => component_path(p, out),
            None => return Err(err("", "missing `path` (the component's file)")),
            Some(_) => return Err(err("path", "must be the path of a component file")),
        };
        let number = |field: &str| match h.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(n) if n > 0 => Ok(Some(n)),
                _ => Err(err(field, "must be a positive whole number")),
            },
            Some(_) => Err(err(field, "must be a positive whole number")),
        };
        let mut limits = tower_agent_wasm::WasmLimits::default();
        if let Some(mib) = number("memoryMiB")? {
            limits =
                limits.memory(usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX));
        }
        if let Some(ms) = number("cpuMs")? {
            limits = limits.cpu(Duration::from_millis(ms));
        }
        if let Some(kib) = number("answerKiB")? {
            limits =
                limits.answer(usize::try_from(kib.saturating_mul(1 << 10)).unwrap_or(usize::MAX));
        }
        let grants = grants(h, out, err)?;
        let mut builder = tower_agent_wasm::WasmHook::builder()
            .path(&component)
            .limits(limits)
            .grants(grants);
        match h.get("stateless") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => builder = builder.stateless(*b),
            Some(_) => return Err(err("stateless", "must be true or false")),
        }
        let hook = builder.build().map_err(|e| err("path", &e.to_string()))?;
        Ok(Some(Exec::Wasm(hook)))
    }
}

/// `p` with the project directory and the source's variables replaced, relative to the
/// project directory.
#[cfg(feature = "wasm")]
fn component_path(p: &str, out: &Config) -> PathBuf {
    let project = out.project_dir.to_string_lossy();
    let mut p = p
        .replace("${CLAUDE_PROJECT_DIR}", &project)
        .replace("$CLAUDE_PROJECT_DIR", &project);
    for (name, value) in out.source.env.iter() {
        p = p.replace(&format!("${{{name}}}"), value);
    }
    out.project_dir.join(p)
}

/// The grants of a `wasm` handler.
#[cfg(feature = "wasm")]
fn grants(
    h: &Map<String, Value>,
    out: &Config,
    err: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<tower_agent_wasm::WasmGrants, ConfigError> {
    let names = |field: &str| -> Result<Vec<String>, ConfigError> {
        match h.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
                    _ => Err(err(&format!("{field}[{i}]"), "must be a non-empty string")),
                })
                .collect(),
            Some(_) => Err(err(field, "must be an array of strings")),
        }
    };
    let flag = |field: &str| match h.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(err(field, "must be true or false")),
    };
    let mut grants = tower_agent_wasm::WasmGrants::default();
    for dir in names("readDirs")? {
        grants = grants.read_dir(component_path(&dir, out), dir);
    }
    for dir in names("writeDirs")? {
        grants = grants.write_dir(component_path(&dir, out), dir);
    }
    for name in names("env")? {
        grants = grants.env(name);
    }
    if flag("clocks")? {
        grants = grants.clocks();
    }
    if flag("random")? {
        grants = grants.random();
    }
    Ok(grants)
}
