//! `CLAUDE_ENV_FILE`: the file SessionStart hooks write `export` lines to, and how those lines
//! are read (never run: no shell sources this file).
//!
//! The file is read once the SessionStart hooks have answered, at most [`MAX_ENV_FILE`] bytes
//! and [`MAX_ENV_VARS`] variables; a larger file is ignored whole, with a warning. Each line
//! is one of:
//!
//! - blank, or a `#` comment: skipped;
//! - `export NAME=value`, `declare -x NAME=value` (what `export -p` prints) or `NAME=value`;
//! - `export NAME` with no value: skipped (it sets nothing).
//!
//! A value is made of unquoted text (a backslash escapes the next character), `'single
//! quoted'` text (literal) and `"double quoted"` text (`\"`, `\\`, `` \` ``, `\$` escaped). `$NAME`
//! and `${NAME}` outside single quotes expand to the value set by an earlier line of the
//! file, else to the session's earlier value, else to this process's environment variable,
//! else to nothing (`export PATH="$PATH:./node_modules/.bin"` works). A line with a command
//! substitution (`$(…)`, backticks), another `${…}` form, an unterminated quote, a bad name
//! or text after the value is skipped with a warning naming its line.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

/// The largest `CLAUDE_ENV_FILE` read: 256 KiB.
pub(crate) const MAX_ENV_FILE: u64 = 256 * 1024;
/// The most variables taken from one `CLAUDE_ENV_FILE`: 1,000.
pub(crate) const MAX_ENV_VARS: usize = 1_000;

/// A fresh, empty env file in a private directory (mode 0700 on Unix) of its own, removed
/// with the directory when dropped.
#[derive(Debug)]
pub(crate) struct EnvFile {
    dir: PathBuf,
    path: PathBuf,
}

impl EnvFile {
    /// Creates the directory and the empty file.
    pub(crate) fn create() -> std::io::Result<EnvFile> {
        let dir = std::env::temp_dir().join(tower_agent_core::context::new_id("tower-agent-env"));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        // Fails if the path exists: nothing another user prepared is followed.
        builder.create(&dir)?;
        let path = dir.join("env.sh");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        let env = EnvFile { dir, path };
        file?;
        Ok(env)
    }

    /// Its path (the value of `CLAUDE_ENV_FILE`).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The variables the hooks wrote, parsed over `earlier` (the session's variables so
    /// far), and the warnings.
    pub(crate) async fn read(
        &self,
        earlier: &[(String, String)],
    ) -> (Vec<(String, String)>, Vec<String>) {
        match tower_agent_os::bounded::read_regular_async(&self.path, MAX_ENV_FILE).await {
            Ok(bytes) => parse(&String::from_utf8_lossy(&bytes), earlier),
            Err(tower_agent_os::bounded::ReadError::NotFound) => (Vec::new(), Vec::new()),
            Err(err) => (
                Vec::new(),
                vec![format!(
                    "CLAUDE_ENV_FILE ignored: {err} (at most {MAX_ENV_FILE} bytes are read)"
                )],
            ),
        }
    }
}

impl Drop for EnvFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The variables of `text` (in order) and a warning per skipped line.
pub(crate) fn parse(
    text: &str,
    earlier: &[(String, String)],
) -> (Vec<(String, String)>, Vec<String>) {
    let known: HashMap<&str, String> = earlier
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut warnings = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let parsed = parse_line(line, &|name| {
            vars.iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| known.get(name).cloned())
                .or_else(|| std::env::var(name).ok())
        });
        match parsed {
            Ok(None) => {}
            Ok(Some((name, value))) => {
                if vars.len() >= MAX_ENV_VARS {
                    warnings.push(format!(
                        "CLAUDE_ENV_FILE: more than {MAX_ENV_VARS} variables; the rest are ignored"
                    ));
                    break;
                }
                vars.push((name, value));
            }
            Err(why) => warnings.push(format!("CLAUDE_ENV_FILE line {}: {why}; skipped", n + 1)),
        }
    }
    (vars, warnings)
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// One line: `Ok(None)` for nothing to set.
fn parse_line(
    line: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(String, String)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let rest = if let Some(r) = line.strip_prefix("export ") {
        r.trim_start()
    } else if let Some(r) = line.strip_prefix("declare -x ") {
        r.trim_start()
    } else {
        line
    };
    let Some((name, value)) = rest.split_once('=') else {
        return if is_name(rest) {
            Ok(None)
        } else {
            Err("not an assignment".into())
        };
    };
    if !is_name(name) {
        return Err(format!("`{name}` is not a variable name"));
    }
    let value = parse_value(value, lookup)?;
    Ok(Some((name.to_owned(), value)))
}

fn parse_value(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next() {
                    Some('\'') => break,
                    Some(c) => out.push(c),
                    None => return Err("unterminated single quote".into()),
                }
            },
            '"' => loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c @ ('"' | '\\' | '`' | '$')) => out.push(c),
                        Some('\n') => {}
                        Some(c) => {
                            out.push('\\');
                            out.push(c);
                        }
                        None => return Err("unterminated double quote".into()),
                    },
                    Some('$') => expand(&mut chars, &mut out, lookup)?,
                    Some('`') => return Err("command substitution is not run".into()),
                    Some(c) => out.push(c),
                    None => return Err("unterminated double quote".into()),
                }
            },
            '\\' => match chars.next() {
                Some(c) => out.push(c),
                None => return Err("a backslash ends the line".into()),
            },
            '$' => expand(&mut chars, &mut out, lookup)?,
            '`' => return Err("command substitution is not run".into()),
            c if c.is_whitespace() => {
                let rest: String = chars.collect();
                let rest = rest.trim_start();
                if rest.is_empty() || rest.starts_with('#') {
                    return Ok(out);
                }
                return Err("text after the value".into());
            }
            ';' | '&' | '|' | '<' | '>' | '(' | ')' => {
                return Err(format!("`{c}` outside quotes"));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// After a `$`: `NAME` or `{NAME}` expanded into `out`; a lone `$` is kept.
fn expand(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let mut name = String::new();
    match chars.peek() {
        Some('(') => return Err("command substitution is not run".into()),
        Some('{') => {
            chars.next();
            loop {
                match chars.next() {
                    Some('}') => break,
                    Some(c) if c == '_' || c.is_ascii_alphanumeric() => name.push(c),
                    _ => return Err("only ${NAME} is expanded".into()),
                }
            }
            if !is_name(&name) {
                return Err("only ${NAME} is expanded".into());
            }
        }
        _ => {
            while let Some(&c) = chars.peek() {
                if c == '_' || c.is_ascii_alphanumeric() {
                    name.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            if name.is_empty() || !is_name(&name) {
                out.push('$');
                out.push_str(&name);
                return Ok(());
            }
        }
    }
    out.push_str(&lookup(&name).unwrap_or_default());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(text: &str) -> Vec<(String, String)> {
        let (vars, warnings) = parse(text, &[("BASE".into(), "/b".into())]);
        assert!(warnings.is_empty(), "{warnings:?}");
        vars
    }

    #[test]
    fn documented_forms() {
        let v = vars(
            "export NODE_ENV=production\n\
             export DEBUG_LOG=true\n\
             export PATH2=\"$BASE:./node_modules/.bin\"\n\
             declare -x QUOTED=\"a \\\"b\\\" $NODE_ENV\"\n\
             # a comment\n\
             \n\
             PLAIN='single $NOT'  # trailing comment\n\
             export ONLY_NAME\n\
             BRACED=${DEBUG_LOG}x\n",
        );
        assert_eq!(
            v,
            vec![
                ("NODE_ENV".into(), "production".into()),
                ("DEBUG_LOG".into(), "true".into()),
                ("PATH2".into(), "/b:./node_modules/.bin".into()),
                ("QUOTED".into(), "a \"b\" production".into()),
                ("PLAIN".into(), "single $NOT".into()),
                ("BRACED".into(), "truex".into()),
            ]
        );
    }

    #[test]
    fn unsafe_lines_are_skipped_not_run() {
        let (vars, warnings) = parse(
            "export A=$(touch /tmp/x)\nexport B=`id`\nexport C=\"open\nexport 1X=2\nD=ok; rm -rf /\nE=fine\n",
            &[],
        );
        assert_eq!(vars, vec![("E".into(), "fine".into())]);
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert!(warnings[0].starts_with("CLAUDE_ENV_FILE line 1:"));
    }
}
