//! Claude Code plugin folders: `.claude-plugin/plugin.json` and `hooks/hooks.json`.

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    config::{self, Config, ConfigError, SourceContext},
    dialect::Dialect,
    formats,
};

/// The default root of plugins' data directories: `$XDG_STATE_HOME/tower-agent/plugins/data`,
/// else `~/.local/state/tower-agent/plugins/data`, else `.tower-agent/plugins/data` in the
/// project directory.
pub(crate) fn default_data_root(project_dir: &Path) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        });
    match base {
        Some(base) => base.join("tower-agent/plugins/data"),
        None => project_dir.join(".tower-agent/plugins/data"),
    }
}

/// The plugin's data-directory name: characters outside `a-z A-Z 0-9 _ -` become `-`.
pub(crate) fn plugin_id(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Loads a plugin folder's hooks: `hooks/hooks.json` and what `plugin.json`'s `hooks` field
/// names (paths starting with `./`, inside the plugin, or inline configuration).
pub(crate) fn load_plugin(
    dir: &Path,
    data_root: &Path,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let root = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let label = root.display().to_string();
    if !root.is_dir() {
        return Err(ConfigError::new(&label, "", "not a plugin directory"));
    }
    let manifest_path = root.join(".claude-plugin/plugin.json");
    let manifest = if manifest_path.exists() {
        Some(config::read_json(&manifest_path)?)
    } else {
        None
    };
    let manifest_file = manifest_path.display().to_string();
    let name = plugin_name(&root, manifest.as_ref(), &manifest_file)?;
    let sources = hook_sources(&root, manifest.as_ref(), &manifest_file)?;
    if sources.is_empty() {
        return Ok(());
    }
    let data = data_root.join(plugin_id(&name));
    std::fs::create_dir_all(&data).map_err(|e| {
        ConfigError::new(
            &label,
            "",
            format!(
                "cannot create the plugin data directory {}: {e}",
                data.display()
            ),
        )
    })?;
    let context = SourceContext {
        plugin: Some(name.into()),
        env: vec![
            (
                "CLAUDE_PLUGIN_ROOT".to_owned(),
                root.to_string_lossy().into_owned(),
            ),
            (
                "CLAUDE_PLUGIN_DATA".to_owned(),
                data.to_string_lossy().into_owned(),
            ),
            (
                "CLAUDE_PROJECT_DIR".to_owned(),
                project_dir.to_string_lossy().into_owned(),
            ),
        ]
        .into(),
        dialect: Dialect::Claude,
    };
    let saved = std::mem::replace(&mut out.source, context);
    let result = sources.iter().try_for_each(|(value, file)| {
        let value = formats::only_known_events(value, file, out);
        config::load_settings(&value, file, project_dir, out)
    });
    out.source = saved;
    result
}

/// The plugin's name: the manifest's `name`, or the folder's without a manifest.
fn plugin_name(
    root: &Path,
    manifest: Option<&Value>,
    manifest_file: &str,
) -> Result<String, ConfigError> {
    match manifest {
        None => Ok(root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plugin".into())),
        Some(Value::Object(m)) => match m.get("name") {
            Some(Value::String(n)) if !n.trim().is_empty() => Ok(n.trim().to_owned()),
            Some(_) => Err(ConfigError::new(
                manifest_file,
                "name",
                "must be a non-empty string",
            )),
            None => Err(ConfigError::new(manifest_file, "", "missing `name`")),
        },
        Some(_) => Err(ConfigError::new(
            manifest_file,
            "",
            "plugin.json must be a JSON object",
        )),
    }
}

/// The hook configurations to load, each with the file it names in errors:
/// `hooks/hooks.json`, then what the manifest's `hooks` names (a path, paths, or inline).
fn hook_sources(
    root: &Path,
    manifest: Option<&Value>,
    manifest_file: &str,
) -> Result<Vec<(Value, String)>, ConfigError> {
    let mut sources: Vec<(Value, String)> = Vec::new();
    let default = root.join("hooks/hooks.json");
    if default.is_file() {
        sources.push((config::read_json(&default)?, default.display().to_string()));
    }
    let extra = manifest
        .and_then(|m| m.get("hooks"))
        .filter(|v| !v.is_null());
    let add_path = |p: &str, at: &str, sources: &mut Vec<(Value, String)>| {
        let file = inside(root, p).ok_or_else(|| {
            ConfigError::new(
                manifest_file,
                at,
                format!("`{p}`: a path must start with `./` and stay inside the plugin"),
            )
        })?;
        if file != default {
            sources.push((config::read_json(&file)?, file.display().to_string()));
        }
        Ok::<_, ConfigError>(())
    };
    match extra {
        None => {}
        Some(Value::String(p)) => add_path(p, "hooks", &mut sources)?,
        Some(Value::Array(paths)) => {
            for (i, p) in paths.iter().enumerate() {
                let at = format!("hooks[{i}]");
                let Value::String(p) = p else {
                    return Err(ConfigError::new(manifest_file, at, "must be a path"));
                };
                add_path(p, &at, &mut sources)?;
            }
        }
        Some(Value::Object(inline)) => {
            let value = if inline.contains_key("hooks") {
                Value::Object(inline.clone())
            } else {
                json!({ "hooks": inline })
            };
            sources.push((value, format!("{manifest_file}: hooks")));
        }
        Some(_) => {
            return Err(ConfigError::new(
                manifest_file,
                "hooks",
                "must be a path, an array of paths or an object",
            ));
        }
    }
    Ok(sources)
}

/// `./path` inside `root` (lexically: no `..` out of it).
fn inside(root: &Path, p: &str) -> Option<PathBuf> {
    let rel = p.strip_prefix("./")?;
    let mut out = root.to_path_buf();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_paths() {
        assert_eq!(
            plugin_id("formatter@my-marketplace"),
            "formatter-my-marketplace"
        );
        assert_eq!(
            inside(Path::new("/p"), "./a/b.json"),
            Some("/p/a/b.json".into())
        );
        assert_eq!(inside(Path::new("/p"), "./../x.json"), None);
        assert_eq!(inside(Path::new("/p"), "a.json"), None);
        assert_eq!(inside(Path::new("/p"), ".//etc/x"), None);
    }
}
