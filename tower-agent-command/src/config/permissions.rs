//! The `permissions` of a settings source read into the [`Config`]'s permission rules
//! ([`Rules`](crate::permissions::Rules)).

use serde_json::{Map, Value};

use super::{ConfigError, parsed::Config};
use crate::{permissions::Kind, rule::Rule};

impl Config {
    /// Adds one rule (written at `path` of `file`, for errors and warnings).
    pub(crate) fn add_rule(
        &mut self,
        kind: Kind,
        text: &str,
        file: &str,
        path: &str,
    ) -> Result<(), ConfigError> {
        let (rule, warning) =
            Rule::parse(text, &self.project_dir).map_err(|m| ConfigError::new(file, path, m))?;
        if let Some(w) = warning {
            self.warn(format!("{file}: {path}: {w}"));
        }
        self.rules.push(kind, rule);
        Ok(())
    }
}

/// Reads the `permissions` of a settings object: `allow`, `deny` and `ask`, arrays of rules
/// (other keys, such as `defaultMode`, are not read).
pub(crate) fn load(
    root: &Map<String, Value>,
    file: &str,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let permissions = match root.get("permissions") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return Err(ConfigError::new(
                file,
                "permissions",
                "must be an object of rule lists (\"deny\": [\"Bash(rm *)\"])",
            ));
        }
    };
    for (kind, key) in Kind::ALL {
        let path = format!("permissions.{key}");
        let rules = match permissions.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::Array(rules)) => rules,
            Some(_) => {
                return Err(ConfigError::new(
                    file,
                    path,
                    "must be an array of rule strings",
                ));
            }
        };
        for (i, rule) in rules.iter().enumerate() {
            let path = format!("{path}[{i}]");
            let Value::String(text) = rule else {
                return Err(ConfigError::new(
                    file,
                    path,
                    "must be a permission rule string, such as \"Bash(git *)\"",
                ));
            };
            out.add_rule(kind, text, file, &path)?;
        }
    }
    Ok(())
}
