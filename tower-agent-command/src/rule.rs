//! `if` conditions: one permission rule (`Bash(git *)`, `Edit(*.ts)`, `Read(./secrets/**)`,
//! `mcp__server__tool` …) tested on a tool call before any hook process is started.
//!
//! Parsing happens once, at load time; matching is done on the call's name and arguments,
//! without serializing anything. Every bound is a constant here and in the module docs of
//! [`crate`]:
//!
//! - a rule is at most [`MAX_RULE`] characters (longer: a configuration error);
//! - a Bash command is analysed up to [`MAX_COMMAND`] bytes and [`MAX_DEPTH`] levels of
//!   nesting (`$(…)`, backticks, subshells); beyond either, or when it cannot be parsed, the
//!   filter **fails open** (the hook runs), as the reference says;
//! - a file path longer than [`MAX_PATH`] bytes fails open too.

use std::{
    fmt,
    path::{Component, Path, PathBuf},
};

use regex::Regex;
use serde_json::Value;

/// The longest `if` rule, in bytes.
pub(crate) const MAX_RULE: usize = 1_000;
/// The longest Bash command analysed, in bytes (Claude Code's own analysis stops at 10,000
/// characters too); longer commands fail open.
pub(crate) const MAX_COMMAND: usize = 10_000;
/// The deepest nesting of `$(…)`, backticks and subshells analysed; deeper fails open.
pub(crate) const MAX_DEPTH: usize = 32;
/// The longest file path matched against a path rule, in bytes; longer fails open.
pub(crate) const MAX_PATH: usize = 4_096;

/// Tools whose `command` a `Bash(…)` rule reads: Claude Code's `Bash`, and `bash` and
/// `execute` (this crate's shell tool).
const BASH_TOOLS: &[&str] = &["Bash", "bash", "execute"];
/// Tools a `Read(…)` rule covers.
const READ_TOOLS: &[&str] = &["Read", "Grep", "Glob", "read_file", "grep", "glob", "ls"];
/// Tools an `Edit(…)` rule covers.
const EDIT_TOOLS: &[&str] = &[
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "write_file",
    "edit_file",
];
/// Input fields holding a file tool's path, in the order they are looked for.
const PATH_FIELDS: &[&str] = &["file_path", "notebook_path", "path"];
/// Tools whose path defaults to the working directory when the input has none.
const DIR_TOOLS: &[&str] = &["Grep", "Glob", "grep", "glob", "ls"];

/// One parsed `if` rule.
pub(crate) struct Rule {
    text: String,
    tool: ToolPattern,
    spec: Spec,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

enum ToolPattern {
    /// `Bash` (and `execute`).
    Bash,
    /// `PowerShell`: analysed like Bash.
    PowerShell,
    /// `Read`: the file-reading tools.
    Read,
    /// `Edit`: the file-editing tools.
    Edit,
    /// One name, exactly.
    Exact(String),
    /// `mcp__server`: every tool of that server (`mcp__server__…`).
    McpServer(String),
    /// A name with `*` wildcards (`mcp__*`, `mcp__github__get_*`), matched whole.
    Glob(Regex),
}

enum Spec {
    /// No specifier, `(*)` or an empty one: every call of the tool.
    Any,
    /// A Bash command pattern; for a specifier that looks like `name:value`, also the
    /// parameter test, chosen per call (a parameter the input has).
    Bash(BashPattern, Option<Param>),
    /// A gitignore-style path pattern, anchored.
    Path(PathPattern),
    /// `domain:host` for WebFetch.
    Domain(Regex),
    /// `param:value` on any tool.
    Param(Param),
    /// `Agent(name)`: the `subagent_type` (or `agent_type`) field.
    Agent(Regex),
    /// A specifier this crate does not understand: matches on the tool alone (fail-open).
    Unknown,
}

struct Param {
    name: String,
    value: Regex,
}

struct BashPattern {
    re: Regex,
    /// The pattern names only a command (`rm *`, `rm`): expansions elsewhere in the command
    /// do not make it run.
    name_only: bool,
}

struct PathPattern {
    anchor: Option<PathBuf>,
    glob: globset::GlobMatcher,
    /// The working directory relative paths of the input resolve against.
    cwd: PathBuf,
    home: Option<PathBuf>,
}

/// A wildcard text (`*` = any sequence) as an anchored regex.
fn wildcard(pattern: &str, case_insensitive: bool) -> Result<Regex, String> {
    let mut re = String::with_capacity(pattern.len() + 8);
    re.push_str(if case_insensitive { "(?is)^" } else { "(?s)^" });
    for (i, part) in pattern.split('*').enumerate() {
        if i > 0 {
            re.push_str(".*");
        }
        re.push_str(&regex::escape(part));
    }
    re.push('$');
    regex::RegexBuilder::new(&re)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("cannot compile `{pattern}`: {e}"))
}

fn param_spec(spec: &str) -> Option<(&str, &str)> {
    let (name, value) = spec.split_once(':')?;
    let name = name.trim();
    let mut chars = name.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() || first == '_')
        .then_some(())
        .filter(|()| chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))?;
    Some((name, value.trim()))
}

impl Rule {
    /// Parses a rule. Relative path rules anchor at `project_dir` (the working directory of
    /// the hooks); `/path` anchors there too (the project settings' anchor). `Ok` carries a
    /// warning for rules that are accepted but partly ignored.
    pub(crate) fn parse(text: &str, project_dir: &Path) -> Result<(Rule, Option<String>), String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("an `if` rule must not be empty".into());
        }
        if text.len() > MAX_RULE {
            return Err(format!(
                "an `if` rule is at most {MAX_RULE} bytes (this one is {})",
                text.len()
            ));
        }
        let (name, spec) = match text.find('(') {
            Some(open) if text.ends_with(')') => {
                (text[..open].trim(), Some(&text[open + 1..text.len() - 1]))
            }
            Some(_) => return Err(format!("`{text}`: a specifier must end with `)`")),
            None => (text, None),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '.'))
        {
            return Err(format!(
                "`{text}`: expected a tool name (letters, digits, `_`, `-`, `*`) before `(`"
            ));
        }
        let tool = match name {
            "Bash" => ToolPattern::Bash,
            "PowerShell" => ToolPattern::PowerShell,
            "Read" => ToolPattern::Read,
            "Edit" => ToolPattern::Edit,
            n if n.contains('*') => ToolPattern::Glob(wildcard(n, false)?),
            n if n.starts_with("mcp__") && !n["mcp__".len()..].contains("__") => {
                ToolPattern::McpServer(format!("{n}__"))
            }
            n => ToolPattern::Exact(n.to_owned()),
        };
        let spec = spec.map(str::trim).filter(|s| !s.is_empty() && *s != "*");
        let mut warning = None;
        let spec = match (&tool, spec) {
            (_, None) => Spec::Any,
            (ToolPattern::Bash | ToolPattern::PowerShell, Some(s)) => {
                let param = match param_spec(s) {
                    Some((name, _)) if name == "command" => {
                        warning = Some(format!(
                            "`{text}`: `command` cannot be matched as a parameter; use `{name}(pattern)`"
                        ));
                        None
                    }
                    Some((name, value)) if value != "*" || !s.trim_end().ends_with(":*") => {
                        Some(Param {
                            name: name.to_owned(),
                            value: wildcard(value, false)?,
                        })
                    }
                    _ => None,
                };
                Spec::Bash(BashPattern::parse(s)?, param)
            }
            (ToolPattern::Read | ToolPattern::Edit, Some(s)) => {
                Spec::Path(PathPattern::parse(s, project_dir)?)
            }
            (ToolPattern::Exact(n), Some(s)) if n == "WebFetch" && s.starts_with("domain:") => {
                Spec::Domain(domain(s["domain:".len()..].trim())?)
            }
            (_, Some(s)) if param_spec(s).is_some() => {
                let (name, value) = param_spec(s).expect("checked");
                Spec::Param(Param {
                    name: name.to_owned(),
                    value: wildcard(value, false)?,
                })
            }
            (ToolPattern::Exact(n), Some(s)) if n == "Agent" || n == "Task" => {
                Spec::Agent(wildcard(s, false)?)
            }
            (_, Some(s)) => {
                warning = Some(format!(
                    "`{text}`: the specifier `{s}` is not understood; the hook runs on every `{name}` call"
                ));
                Spec::Unknown
            }
        };
        Ok((
            Rule {
                text: text.to_owned(),
                tool,
                spec,
            },
            warning,
        ))
    }

    /// The rule as written.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether a call of `tool` with `input` matches. Never panics; bounded work (see the
    /// module docs).
    pub(crate) fn matches(&self, tool: &str, input: &Value) -> bool {
        let tool_ok = match &self.tool {
            ToolPattern::Bash => BASH_TOOLS.contains(&tool),
            ToolPattern::PowerShell => tool == "PowerShell",
            ToolPattern::Read => READ_TOOLS.contains(&tool),
            ToolPattern::Edit => EDIT_TOOLS.contains(&tool),
            ToolPattern::Exact(n) => n == tool,
            ToolPattern::McpServer(prefix) => tool.starts_with(prefix.as_str()),
            ToolPattern::Glob(re) => re.is_match(tool),
        };
        if !tool_ok {
            return false;
        }
        match &self.spec {
            Spec::Any | Spec::Unknown => true,
            Spec::Bash(pattern, param) => {
                if let Some(p) = param
                    && input.get(&p.name).is_some()
                {
                    return p.matches(input);
                }
                match input.get("command") {
                    Some(Value::String(command)) => pattern.matches(command),
                    // No command to read: nothing to filter on, so the hook runs.
                    _ => true,
                }
            }
            Spec::Path(pattern) => {
                let path = PATH_FIELDS
                    .iter()
                    .find_map(|f| input.get(*f).and_then(Value::as_str))
                    .or_else(|| DIR_TOOLS.contains(&tool).then_some("."));
                path.is_some_and(|p| pattern.matches(p))
            }
            Spec::Domain(re) => match input.get("url").and_then(Value::as_str) {
                Some(url) => host(url).is_none_or(|h| re.is_match(&h)),
                None => false,
            },
            Spec::Param(p) => p.matches(input),
            Spec::Agent(re) => ["subagent_type", "agent_type", "name"]
                .iter()
                .find_map(|f| input.get(*f).and_then(Value::as_str))
                .is_some_and(|name| re.is_match(name)),
        }
    }
}

impl Rule {
    /// Whether this rule, as an allow rule, covers a call: as [`matches`](Self::matches)
    /// but failing closed. A Bash command must be analysed, hold no expansion and no output
    /// redirection but to `/dev/null`, and each of its subcommands must match; a path or a
    /// URL must be read; a specifier this crate does not understand allows nothing.
    pub(crate) fn allows(&self, tool: &str, input: &Value) -> bool {
        match &self.spec {
            Spec::Unknown => false,
            Spec::Bash(pattern, param)
                if param.as_ref().is_none_or(|p| input.get(&p.name).is_none()) =>
            {
                let Some(Value::String(command)) = input.get("command") else {
                    return false;
                };
                let Ok(parsed) = parse_command(command) else {
                    return false;
                };
                let quiet = parsed
                    .outputs
                    .iter()
                    .all(|&(a, b)| &command[a..b] == "/dev/null");
                self.matches(tool, &Value::Null)
                    && quiet
                    && !parsed.expansion
                    && !parsed.subs.is_empty()
                    && parsed.subs.iter().all(|sub| {
                        !sub.head_dynamic && pattern.re.is_match(&command[sub.start..sub.end])
                    })
            }
            Spec::Path(_) => {
                let long = PATH_FIELDS
                    .iter()
                    .filter_map(|f| input.get(*f).and_then(Value::as_str))
                    .any(|p| p.len() > MAX_PATH);
                !long && self.matches(tool, input)
            }
            Spec::Domain(_) => {
                let url = input.get("url").and_then(Value::as_str);
                url.and_then(host).is_some() && self.matches(tool, input)
            }
            _ => self.matches(tool, input),
        }
    }
}

impl Param {
    /// A top-level scalar field equal to the value (with `*` wildcards); an absent field
    /// never matches.
    fn matches(&self, input: &Value) -> bool {
        let text = match input.get(&self.name) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ (Value::Bool(_) | Value::Number(_))) => v.to_string(),
            _ => return false,
        };
        self.value.is_match(&text)
    }
}

/// A `domain:` pattern: case-insensitive, a trailing `.` ignored; a leading `*.` is any
/// subdomain at any depth (not the domain itself), any other `*` stays within one label.
fn domain(pattern: &str) -> Result<Regex, String> {
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    if pattern == "*" || pattern.is_empty() {
        return Regex::new("^").map_err(|e| e.to_string());
    }
    let mut re = String::from("^");
    let rest = match pattern.strip_prefix("*.") {
        Some(rest) => {
            re.push_str(r"(?:[^.]+\.)+");
            rest
        }
        None => &pattern,
    };
    for (i, part) in rest.split('*').enumerate() {
        if i > 0 {
            re.push_str("[^.]*");
        }
        re.push_str(&regex::escape(part));
    }
    re.push('$');
    regex::RegexBuilder::new(&re)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("cannot compile `domain:{pattern}`: {e}"))
}

/// The lower-cased host of a URL, without a trailing `.`; `None` when the URL is too long
/// or has no host (the rule then fails open).
fn host(url: &str) -> Option<String> {
    if url.len() > MAX_PATH {
        return None;
    }
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

// ===== Bash =====

impl BashPattern {
    fn parse(spec: &str) -> Result<BashPattern, String> {
        // `ls:*` is `ls *`; a trailing ` *` is a word boundary: `ls` or `ls …`, not `lsof`.
        let (prefix, boundary) = if let Some(p) = spec.strip_suffix(":*") {
            (p, true)
        } else if let Some(p) = spec.strip_suffix(" *") {
            (p, true)
        } else {
            (spec, false)
        };
        let mut re = String::from("(?s)^");
        for (i, part) in prefix.split('*').enumerate() {
            if i > 0 {
                re.push_str(".*");
            }
            re.push_str(&regex::escape(part));
        }
        if boundary {
            re.push_str("(?: .*)?");
        }
        re.push('$');
        let re = regex::RegexBuilder::new(&re)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("cannot compile `{spec}`: {e}"))?;
        let name_only = !prefix.trim().contains([' ', '*', '\t']);
        Ok(BashPattern { re, name_only })
    }

    /// Any subcommand matches; fails open when the command cannot be analysed, when a
    /// command name is itself an expansion, and — for patterns naming more than a command —
    /// when the command holds `$(…)`, backticks or `$VAR`.
    fn matches(&self, command: &str) -> bool {
        let Ok(parsed) = parse_command(command) else {
            return true;
        };
        for sub in &parsed.subs {
            if sub.head_dynamic || self.re.is_match(&command[sub.start..sub.end]) {
                return true;
            }
        }
        parsed.expansion && !self.name_only
    }
}

/// A simple command of a Bash command line: the span from its command word (after
/// assignments and wrappers) to its last word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sub {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// The command word holds an expansion (`$CMD args`): what runs is unknown.
    pub(crate) head_dynamic: bool,
}

/// The simple commands of a command line, and whether it holds any expansion.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub(crate) subs: Vec<Sub>,
    pub(crate) expansion: bool,
    /// The target words of output redirections (`>`, `>>`, `&>` …; not `>&2`), in order.
    pub(crate) outputs: Vec<(usize, usize)>,
}

/// Why a command cannot be analysed (the filter then fails open).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unparseable;

/// Splits a Bash command line into simple commands: on `&&`, `||`, `;`, `|`, `|&`, `&` and
/// newlines, inside subshells, `$(…)`, `<(…)` and backticks. Leading `VAR=value`
/// assignments and the wrappers Claude Code strips (`timeout`, `time`, `nice`, `nohup`,
/// `stdbuf`, `command`, `builtin`, `noglob`, bare `xargs`) are skipped; redirections are
/// not words. Unbalanced quotes or parentheses, here-documents, a trailing backslash, a
/// command over [`MAX_COMMAND`] bytes or nesting over [`MAX_DEPTH`] levels: [`Unparseable`].
pub(crate) fn parse_command(command: &str) -> Result<Parsed, Unparseable> {
    if command.len() > MAX_COMMAND {
        return Err(Unparseable);
    }
    let mut scanner = Scanner {
        s: command.as_bytes(),
        i: 0,
        out: Parsed::default(),
    };
    let end = command.len();
    scanner.list(0, None, end)?;
    Ok(scanner.out)
}

struct Scanner<'a> {
    s: &'a [u8],
    i: usize,
    out: Parsed,
}

/// A word: its span and whether it holds an expansion.
#[derive(Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
    dynamic: bool,
}

fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
    )
}

impl Scanner<'_> {
    fn at(&self, i: usize, bound: usize) -> Option<u8> {
        (i < bound).then(|| self.s[i])
    }

    /// Commands until `term` (consumed) or `bound`.
    fn list(&mut self, depth: usize, term: Option<u8>, bound: usize) -> Result<(), Unparseable> {
        if depth > MAX_DEPTH {
            return Err(Unparseable);
        }
        let mut words: Vec<Word> = Vec::new();
        loop {
            // Blanks and line continuations.
            while let Some(c) = self.at(self.i, bound) {
                if c == b' ' || c == b'\t' || c == b'\r' {
                    self.i += 1;
                } else if c == b'\\' && self.at(self.i + 1, bound) == Some(b'\n') {
                    self.i += 2;
                } else {
                    break;
                }
            }
            let Some(c) = self.at(self.i, bound) else {
                self.finish(&mut words);
                return if term.is_some() {
                    Err(Unparseable)
                } else {
                    Ok(())
                };
            };
            match c {
                b'\n' | b';' => {
                    self.finish(&mut words);
                    self.i += 1;
                }
                b'&' if self.at(self.i + 1, bound) == Some(b'>') => self.redirect(depth, bound)?,
                b'&' | b'|' => {
                    self.finish(&mut words);
                    self.i += 1;
                    if matches!(self.at(self.i, bound), Some(b'&' | b'|')) {
                        self.i += 1;
                    }
                }
                b')' => {
                    self.finish(&mut words);
                    if term == Some(b')') {
                        self.i += 1;
                        return Ok(());
                    }
                    return Err(Unparseable);
                }
                b'(' => {
                    if !words.is_empty() {
                        // `f () { …; }` and other forms this analysis does not follow.
                        return Err(Unparseable);
                    }
                    self.i += 1;
                    self.list(depth + 1, Some(b')'), bound)?;
                }
                b'<' | b'>' => {
                    if self.at(self.i + 1, bound) == Some(b'(') {
                        // Process substitution: a word whose commands count too.
                        let start = self.i;
                        self.i += 2;
                        self.out.expansion = true;
                        self.list(depth + 1, Some(b')'), bound)?;
                        words.push(Word {
                            start,
                            end: self.i,
                            dynamic: true,
                        });
                    } else {
                        self.redirect(depth, bound)?;
                    }
                }
                b'#' => {
                    while let Some(c) = self.at(self.i, bound) {
                        if c == b'\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                _ => {
                    let word = self.word(depth, bound)?;
                    let fd = self.s[word.start..word.end].iter().all(u8::is_ascii_digit);
                    if fd && matches!(self.at(self.i, bound), Some(b'<' | b'>')) {
                        self.redirect(depth, bound)?;
                    } else {
                        words.push(word);
                    }
                }
            }
        }
    }

    /// A redirection operator and its target word (scanned, not kept).
    fn redirect(&mut self, depth: usize, bound: usize) -> Result<(), Unparseable> {
        let op_start = self.i;
        while let Some(c) = self.at(self.i, bound) {
            if matches!(c, b'<' | b'>' | b'&' | b'|') && self.i - op_start < 3 {
                self.i += 1;
            } else {
                break;
            }
        }
        let op = &self.s[op_start..self.i];
        if op.starts_with(b"<<") && op != b"<<<" {
            // Here-documents: their body follows on later lines; not analysed.
            return Err(Unparseable);
        }
        while matches!(self.at(self.i, bound), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        match self.at(self.i, bound) {
            Some(c) if !is_meta(c) => {
                let target = self.word(depth, bound)?;
                if target.dynamic {
                    self.out.expansion = true;
                }
                if op.contains(&b'>') && !op.ends_with(b"&") {
                    self.out.outputs.push((target.start, target.end));
                }
                Ok(())
            }
            // `2>&1`'s target was read with the operator; `cmd >` alone is an error.
            _ if op.ends_with(b"&") => Ok(()),
            _ => Err(Unparseable),
        }
    }

    /// One word, with its quotes and expansions.
    fn word(&mut self, depth: usize, bound: usize) -> Result<Word, Unparseable> {
        let start = self.i;
        let mut dynamic = false;
        while let Some(c) = self.at(self.i, bound) {
            if is_meta(c) {
                break;
            }
            match c {
                b'\\' => {
                    if self.i + 1 >= bound {
                        return Err(Unparseable);
                    }
                    self.i += 2;
                }
                b'\'' => {
                    self.i += 1;
                    loop {
                        match self.at(self.i, bound) {
                            None => return Err(Unparseable),
                            Some(b'\'') => break,
                            Some(_) => self.i += 1,
                        }
                    }
                    self.i += 1;
                }
                b'"' => {
                    self.i += 1;
                    loop {
                        match self.at(self.i, bound) {
                            None => return Err(Unparseable),
                            Some(b'"') => break,
                            Some(b'\\') => self.i += 2,
                            Some(b'$') => dynamic |= self.dollar(depth, bound)?,
                            Some(b'`') => {
                                self.backtick(depth, bound)?;
                                dynamic = true;
                            }
                            Some(_) => self.i += 1,
                        }
                    }
                    self.i += 1;
                }
                b'$' => dynamic |= self.dollar(depth, bound)?,
                b'`' => {
                    self.backtick(depth, bound)?;
                    dynamic = true;
                }
                _ => self.i += 1,
            }
        }
        if self.i > bound {
            return Err(Unparseable);
        }
        if dynamic {
            self.out.expansion = true;
        }
        Ok(Word {
            start,
            end: self.i,
            dynamic,
        })
    }

    /// At a `$`: an expansion (true) or a literal `$` / `$'…'` quoting (false).
    fn dollar(&mut self, depth: usize, bound: usize) -> Result<bool, Unparseable> {
        self.i += 1;
        match self.at(self.i, bound) {
            Some(b'(') if self.at(self.i + 1, bound) == Some(b'(') => {
                // Arithmetic: skip to the balancing parenthesis.
                self.skip_balanced(b'(', b')', bound)?;
                Ok(true)
            }
            Some(b'(') => {
                self.i += 1;
                self.list(depth + 1, Some(b')'), bound)?;
                Ok(true)
            }
            Some(b'{') => {
                self.skip_balanced(b'{', b'}', bound)?;
                Ok(true)
            }
            Some(b'\'') => {
                self.i += 1;
                loop {
                    match self.at(self.i, bound) {
                        None => return Err(Unparseable),
                        Some(b'\\') => self.i += 2,
                        Some(b'\'') => break,
                        Some(_) => self.i += 1,
                    }
                }
                self.i += 1;
                Ok(false)
            }
            Some(c) if c.is_ascii_alphanumeric() || c == b'_' => {
                while self
                    .at(self.i, bound)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    self.i += 1;
                }
                Ok(true)
            }
            Some(b'@' | b'*' | b'#' | b'?' | b'$' | b'!' | b'-') => {
                self.i += 1;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// From an opening `open` to its balancing `close` (quotes inside are not followed: an
    /// unbalanced count is unparseable).
    fn skip_balanced(&mut self, open: u8, close: u8, bound: usize) -> Result<(), Unparseable> {
        let mut level = 0usize;
        while let Some(c) = self.at(self.i, bound) {
            self.i += 1;
            if c == open {
                level += 1;
            } else if c == close {
                level -= 1;
                if level == 0 {
                    return Ok(());
                }
            } else if c == b'\\' {
                self.i += 1;
            }
        }
        Err(Unparseable)
    }

    /// A backtick substitution: its commands count too. Nested (escaped) backticks are not
    /// analysed.
    fn backtick(&mut self, depth: usize, bound: usize) -> Result<(), Unparseable> {
        let open = self.i;
        let mut j = open + 1;
        let close = loop {
            match self.at(j, bound) {
                None => return Err(Unparseable),
                Some(b'`') => break j,
                Some(b'\\') if self.at(j + 1, bound) == Some(b'`') => return Err(Unparseable),
                Some(b'\\') => j += 2,
                Some(_) => j += 1,
            }
        };
        self.i = open + 1;
        self.list(depth + 1, None, close)?;
        self.i = close + 1;
        self.out.expansion = true;
        Ok(())
    }

    /// Ends a simple command: strips assignments, keywords and wrappers, records the rest.
    fn finish(&mut self, words: &mut Vec<Word>) {
        let text = |w: &Word| &self.s[w.start..w.end];
        let mut k = 0;
        while let Some(w) = words.get(k) {
            let t = text(w);
            if is_assignment(t)
                || matches!(
                    t,
                    b"!" | b"{"
                        | b"}"
                        | b"if"
                        | b"then"
                        | b"else"
                        | b"elif"
                        | b"do"
                        | b"while"
                        | b"until"
                        | b"nohup"
                        | b"builtin"
                        | b"noglob"
                        | b"exec"
                )
            {
                k += 1;
                continue;
            }
            let next = words.get(k + 1).map(text);
            let is_opt = |t: Option<&[u8]>| t.is_some_and(|t| t.starts_with(b"-"));
            match t {
                b"timeout" => {
                    k += 1;
                    while let Some(o) = words.get(k).map(text).filter(|t| t.starts_with(b"-")) {
                        k += if matches!(o, b"-s" | b"-k" | b"--signal" | b"--kill-after") {
                            2
                        } else {
                            1
                        };
                    }
                    if words
                        .get(k)
                        .map(text)
                        .is_some_and(|t| t.first().is_some_and(u8::is_ascii_digit))
                    {
                        k += 1;
                    }
                }
                b"time" => {
                    k += 1;
                    if words.get(k).map(text) == Some(b"-p") {
                        k += 1;
                    }
                }
                b"nice" => {
                    k += 1;
                    match words.get(k).map(text) {
                        Some(b"-n") => k += 2,
                        t if is_opt(t) => k += 1,
                        _ => {}
                    }
                }
                b"stdbuf" => {
                    k += 1;
                    while let Some(o) = words.get(k).map(text).filter(|t| t.starts_with(b"-")) {
                        k += if matches!(o, b"-i" | b"-o" | b"-e") {
                            2
                        } else {
                            1
                        };
                    }
                }
                b"command"
                    if !next.is_some_and(|n| n.starts_with(b"-v") || n.starts_with(b"-V")) =>
                {
                    k += 1;
                    if words.get(k).map(text) == Some(b"-p") {
                        k += 1;
                    }
                }
                b"xargs" if !is_opt(next) => k += 1,
                _ => break,
            }
        }
        if let (Some(first), Some(last)) = (words.get(k), words.last())
            && k < words.len()
        {
            self.out.subs.push(Sub {
                start: first.start,
                end: last.end,
                head_dynamic: first.dynamic,
            });
        }
        words.clear();
    }
}

/// `NAME=…` or `NAME+=…` (a leading assignment).
fn is_assignment(word: &[u8]) -> bool {
    let Some(eq) = word.iter().position(|&c| c == b'=') else {
        return false;
    };
    let name = word[..eq].strip_suffix(b"+").unwrap_or(&word[..eq]);
    let mut chars = name.iter();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && chars.all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

// ===== paths =====

impl PathPattern {
    /// Gitignore-style: `//abs`, `~/home`, `/project`, `./cwd` or a relative pattern; a
    /// pattern without a `/` (other than a trailing one) matches at any depth under its
    /// anchor; `*` stays within a segment, `**` crosses them; a pattern that matches a
    /// directory matches everything under it.
    fn parse(spec: &str, project_dir: &Path) -> Result<PathPattern, String> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let (anchor, rest) = if let Some(rest) = spec.strip_prefix("//") {
            (Some(PathBuf::from("/")), rest)
        } else if let Some(rest) = spec.strip_prefix("~/") {
            (home.clone(), rest)
        } else if let Some(rest) = spec.strip_prefix('/') {
            (Some(project_dir.to_path_buf()), rest)
        } else if let Some(rest) = spec.strip_prefix("./") {
            (Some(project_dir.to_path_buf()), rest)
        } else {
            (Some(project_dir.to_path_buf()), spec)
        };
        let rest = rest.trim_end_matches('/');
        let anchored = spec.starts_with('/') || spec.starts_with("~/") || spec.starts_with("./");
        let glob = if rest.is_empty() {
            "**".to_owned()
        } else if !anchored && !rest.contains('/') {
            format!("**/{rest}")
        } else {
            rest.to_owned()
        };
        let glob = globset::GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("bad path pattern `{spec}`: {e}"))?
            .compile_matcher();
        Ok(PathPattern {
            anchor: anchor.map(|a| normalize(&a)),
            glob,
            cwd: normalize(project_dir),
            home,
        })
    }

    fn matches(&self, path: &str) -> bool {
        if path.len() > MAX_PATH {
            return true;
        }
        let Some(anchor) = &self.anchor else {
            // `~/…` without a home directory: nothing can be under it.
            return false;
        };
        let full = if let Some(rest) = path.strip_prefix("~/") {
            match &self.home {
                Some(home) => home.join(rest),
                None => return false,
            }
        } else {
            self.cwd.join(path)
        };
        let full = normalize(&full);
        let Ok(rel) = full.strip_prefix(anchor) else {
            return false;
        };
        if rel.as_os_str().is_empty() {
            return self.glob.is_match("");
        }
        // The path itself, or a directory above it.
        rel.ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| self.glob.is_match(a))
    }
}

/// `.` and `..` resolved lexically (`..` above the root stays at the root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(text: &str) -> Rule {
        Rule::parse(text, Path::new("/proj")).unwrap().0
    }

    fn bash(text: &str, command: &str) -> bool {
        rule(text).matches("Bash", &json!({ "command": command }))
    }

    fn subs(command: &str) -> Vec<&str> {
        let parsed = parse_command(command).unwrap();
        parsed
            .subs
            .iter()
            .map(|s| &command[s.start..s.end])
            .collect()
    }

    #[test]
    fn splits_compound_commands() {
        assert_eq!(subs("ls && git push"), ["ls", "git push"]);
        assert_eq!(
            subs("a || b; c | d |& e & f\ng"),
            ["a", "b", "c", "d", "e", "f", "g"]
        );
        assert_eq!(subs("echo $(git push)"), ["git push", "echo $(git push)"]);
        assert_eq!(subs("echo `rm -rf /`"), ["rm -rf /", "echo `rm -rf /`"]);
        assert_eq!(subs("FOO=1 BAR=\"a b\" git push"), ["git push"]);
        assert_eq!(subs("(cd x && make) > log 2>&1"), ["cd x", "make"]);
        assert_eq!(subs("timeout -s KILL 30 npm test"), ["npm test"]);
        assert_eq!(subs("nice -n 5 nohup git gc"), ["git gc"]);
        assert_eq!(subs("command -v git"), ["command -v git"]);
        assert_eq!(subs("xargs grep x"), ["grep x"]);
        assert_eq!(subs("xargs -n1 grep x"), ["xargs -n1 grep x"]);
        assert_eq!(subs("echo 'a && b' \"c; d\""), ["echo 'a && b' \"c; d\""]);
        assert_eq!(
            subs("diff <(ls a) <(ls b)"),
            ["ls a", "ls b", "diff <(ls a) <(ls b)"]
        );
        assert_eq!(subs("ls # && rm -rf /"), ["ls"]);
        assert_eq!(subs("echo $((1 + 2)) ${HOME}"), ["echo $((1 + 2)) ${HOME}"]);
    }

    #[test]
    fn unparseable_commands() {
        for bad in [
            "echo \"unterminated",
            "echo 'x",
            "echo $(ls",
            "ls )",
            "cat <<EOF\nhi\nEOF",
            "echo \\",
            "echo `ls",
            "case x in a) ls;; esac",
        ] {
            assert_eq!(parse_command(bad).err(), Some(Unparseable), "{bad}");
        }
        let deep = format!(
            "{}ls{}",
            "$(".repeat(MAX_DEPTH + 2),
            ")".repeat(MAX_DEPTH + 2)
        );
        assert!(parse_command(&deep).is_err());
        assert!(parse_command(&"a ".repeat(MAX_COMMAND)).is_err());
    }

    #[test]
    fn bash_rules_as_documented() {
        // hooks.md § "Common fields", the Bash matching table.
        assert!(bash("Bash(git *)", "FOO=bar git push"));
        assert!(bash("Bash(git *)", "npm test && git push"));
        assert!(bash("Bash(rm *)", "echo $(rm -rf /)"));
        assert!(!bash("Bash(rm *)", "echo $(date)"));
        assert!(bash("Bash(git push *)", "echo $(date)"));
        assert!(bash("Bash(rm *)", "echo \"unterminated"));
        // permissions.md § "Bash": word boundary, `:*`, exact, wildcards anywhere.
        assert!(bash("Bash(ls *)", "ls -la"));
        assert!(bash("Bash(ls *)", "ls"));
        assert!(!bash("Bash(ls *)", "lsof"));
        assert!(bash("Bash(ls*)", "lsof"));
        assert!(bash("Bash(ls:*)", "ls -la"));
        assert!(!bash("Bash(ls:*)", "lsof"));
        assert!(bash("Bash(npm run build)", "npm run build"));
        assert!(!bash("Bash(npm run build)", "npm run build --watch"));
        assert!(bash("Bash(git * main)", "git push origin main"));
        assert!(bash("Bash(* install)", "npm install"));
        assert!(!bash("Bash(git *)", "ls -la"));
        assert!(bash("Bash", "anything"));
        assert!(bash("Bash(*)", "anything"));
        // An unknown command name (an expansion) fails open.
        assert!(bash("Bash(rm *)", "$CMD -rf /"));
        // The crate's own `execute` tool counts as Bash; other tools do not.
        assert!(rule("Bash(git *)").matches("execute", &json!({"command": "git status"})));
        assert!(!rule("Bash(git *)").matches("Read", &json!({"command": "git status"})));
        // Parameter form.
        let bg = rule("Bash(run_in_background:true)");
        assert!(bg.matches("Bash", &json!({"command": "x", "run_in_background": true})));
        assert!(!bg.matches("Bash", &json!({"command": "x", "run_in_background": false})));
    }

    #[test]
    fn path_rules() {
        let edit_ts = rule("Edit(*.ts)");
        assert!(edit_ts.matches("Edit", &json!({"file_path": "/proj/src/a.ts"})));
        assert!(edit_ts.matches("Write", &json!({"file_path": "deep/x/b.ts"})));
        assert!(edit_ts.matches("edit_file", &json!({"path": "b.ts"})));
        assert!(!edit_ts.matches("Edit", &json!({"file_path": "/proj/a.js"})));
        assert!(!edit_ts.matches("Edit", &json!({"file_path": "/elsewhere/a.ts"})));
        assert!(!edit_ts.matches("Read", &json!({"file_path": "/proj/a.ts"})));
        let secrets = rule("Read(./secrets/**)");
        assert!(secrets.matches("Read", &json!({"file_path": "/proj/secrets/k/key.pem"})));
        assert!(secrets.matches("read_file", &json!({"path": "secrets/key"})));
        assert!(!secrets.matches("Read", &json!({"file_path": "/proj/vendor/secrets/key"})));
        assert!(!secrets.matches("Read", &json!({"file_path": "/proj/secrets/../public/x"})));
        let src = rule("Edit(src/**)");
        assert!(src.matches("Edit", &json!({"file_path": "/proj/src/app.ts"})));
        assert!(!src.matches("Edit", &json!({"file_path": "/proj/vendor/pkg/src/lib.js"})));
        let any_src = rule("Edit(**/src/**)");
        assert!(any_src.matches("Edit", &json!({"file_path": "/proj/vendor/pkg/src/lib.js"})));
        let rooted = rule("Edit(/docs/**)");
        assert!(rooted.matches("Edit", &json!({"file_path": "/proj/docs/a.md"})));
        assert!(!rooted.matches("Edit", &json!({"file_path": "/docs/a.md"})));
        let abs = rule("Edit(//tmp/scratch.txt)");
        assert!(abs.matches("Edit", &json!({"file_path": "/tmp/scratch.txt"})));
        assert!(!abs.matches("Edit", &json!({"file_path": "/proj/tmp/scratch.txt"})));
        let env = rule("Read(.env)");
        assert!(env.matches("Read", &json!({"file_path": "/proj/a/b/.env"})));
        assert!(!env.matches("Read", &json!({"file_path": "/other/.env"})));
        // A directory pattern covers what is under it.
        assert!(rule("Read(./secrets)").matches("Read", &json!({"file_path": "secrets/a"})));
        // Grep and Glob without a path search the working directory.
        assert!(rule("Read(./**)").matches("Grep", &json!({"pattern": "x"})));
    }

    #[test]
    fn tool_rules() {
        let server = rule("mcp__memory");
        assert!(server.matches("mcp__memory__create", &json!({})));
        assert!(!server.matches("mcp__memoryx__create", &json!({})));
        assert!(!server.matches("mcp__memory", &json!({})));
        let tool = rule("mcp__github__search");
        assert!(tool.matches("mcp__github__search", &json!({})));
        assert!(!tool.matches("mcp__github__search2", &json!({})));
        let glob = rule("mcp__github__get_*");
        assert!(glob.matches("mcp__github__get_issue", &json!({})));
        assert!(!glob.matches("mcp__github__list", &json!({})));
        assert!(rule("mcp__*").matches("mcp__x__y", &json!({})));
        let web = rule("WebFetch(domain:*.example.com)");
        assert!(web.matches("WebFetch", &json!({"url": "https://a.b.Example.com./x"})));
        assert!(!web.matches("WebFetch", &json!({"url": "https://example.com/x"})));
        let web = rule("WebFetch(domain:example.*)");
        assert!(web.matches("WebFetch", &json!({"url": "http://user@example.org:8080"})));
        assert!(!web.matches("WebFetch", &json!({"url": "http://example.evil.com"})));
        let agent = rule("Agent(Explore)");
        assert!(agent.matches("Agent", &json!({"subagent_type": "Explore"})));
        assert!(!agent.matches("Agent", &json!({"subagent_type": "Plan"})));
        let model = rule("Agent(model: opus)");
        assert!(model.matches("Agent", &json!({"model": "opus"})));
        assert!(!model.matches("Agent", &json!({})));
        let (_, warning) = Rule::parse("WebSearch(weird spec)", Path::new("/p")).unwrap();
        assert!(warning.is_some());
    }

    #[test]
    fn work_is_bounded_at_the_caps() {
        // The largest commands analysed, of the shapes that cost the most: many
        // subcommands, deep nesting, long words; and a long path against a `**` rule.
        let many = "a && ".repeat(MAX_COMMAND / 5);
        let nested = format!(
            "{}{}{}",
            "$(x ".repeat(MAX_DEPTH),
            "y".repeat(MAX_COMMAND - 4 * MAX_DEPTH - MAX_DEPTH - 1),
            ")".repeat(MAX_DEPTH)
        );
        let long_word = "g".repeat(MAX_COMMAND);
        let r = rule("Bash(*a*b*c*d*e*)");
        // NOTE: how long this takes is a bench's question (the project measures speed in
        // `benches/`, never in timed tests: a timed assertion here failed on a loaded machine);
        // this test checks the caps hold and the answers are right at them.
        for command in [&many, &nested, &long_word] {
            assert!(command.len() <= MAX_COMMAND);
            assert!(parse_command(command).is_ok());
            // The nested one holds `$(…)`: a pattern naming more than a command fails open.
            let expected = std::ptr::eq(command, &nested);
            assert_eq!(r.matches("Bash", &json!({ "command": command })), expected);
        }
        let path = "a/".repeat(MAX_PATH / 2 - 1) + "b";
        assert!(!rule("Read(**/z/**)").matches("Read", &json!({ "file_path": path })));
    }

    #[test]
    fn an_allow_rule_fails_closed() {
        let allows =
            |text: &str, command: &str| rule(text).allows("Bash", &json!({ "command": command }));
        assert!(allows("Bash(echo *)", "echo hi"));
        assert!(allows("Bash(echo *)", "echo a && echo b 2>&1 >/dev/null"));
        assert!(allows("Bash", "echo hi >> log"), "the whole tool");
        // Every subcommand must match (a deny or `if` rule needs one).
        assert!(!allows("Bash(echo *)", "echo hi && rm -rf x"));
        assert!(rule("Bash(rm *)").matches("Bash", &json!({"command": "echo hi && rm -rf x"})));
        for command in ["echo hi >> log", "echo $(rm x)", "$CMD x", "echo 'open", ""] {
            assert!(!allows("Bash(echo *)", command), "{command}");
        }
        let unknown = rule("WebSearch(weird spec)");
        assert!(unknown.matches("WebSearch", &json!({})));
        assert!(!unknown.allows("WebSearch", &json!({})));
        let fetch = rule("WebFetch(domain:example.com)");
        assert!(fetch.allows("WebFetch", &json!({"url": "https://example.com/x"})));
        assert!(!fetch.allows("WebFetch", &json!({"url": "https://"})));
        let long = format!("/proj/{}", "a/".repeat(MAX_PATH));
        assert!(!rule("Read(/**)").allows("Read", &json!({ "file_path": long })));
        let parsed = parse_command("echo a > out.txt 2>&1; cat x >> /dev/null").unwrap();
        let command = "echo a > out.txt 2>&1; cat x >> /dev/null";
        let outputs: Vec<&str> = parsed
            .outputs
            .iter()
            .map(|&(a, b)| &command[a..b])
            .collect();
        assert_eq!(outputs, ["out.txt", "/dev/null"]);
    }

    #[test]
    fn bad_rules_are_errors() {
        for bad in [
            "",
            "Bash(git *",
            "Ba sh(x)",
            "(x)",
            &"B".repeat(MAX_RULE + 1),
        ] {
            assert!(Rule::parse(bad, Path::new("/p")).is_err(), "{bad}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn shellish() -> impl Strategy<Value = String> {
            let atoms = prop::sample::select(vec![
                "git", "push", "rm", " ", "&&", "||", ";", "|", "&", "\n", "$(", ")", "(", "`",
                "'", "\"", "\\", "$", "{", "}", "<", ">", "2>&1", "<<", "#", "=", "FOO=1",
                "timeout", "xargs", "-n", "é", "*",
            ]);
            prop::collection::vec(atoms, 0..60).prop_map(|v| v.concat())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]

            #[test]
            fn parsing_never_panics_and_spans_are_in_bounds(command in shellish()) {
                if let Ok(parsed) = parse_command(&command) {
                    for s in parsed.subs {
                        prop_assert!(s.start <= s.end && s.end <= command.len());
                        prop_assert!(command.is_char_boundary(s.start));
                        prop_assert!(command.is_char_boundary(s.end));
                    }
                }
            }

            #[test]
            fn any_text_is_safe(command in ".{0,200}", rule_text in ".{0,60}") {
                let _ = parse_command(&command);
                if let Ok((r, _)) = Rule::parse(&rule_text, Path::new("/p")) {
                    let _ = r.matches("Bash", &json!({"command": command}));
                    let _ = r.matches("Read", &json!({"file_path": command}));
                    let _ = r.matches("WebFetch", &json!({"url": command}));
                }
            }

            #[test]
            fn a_matching_subcommand_anywhere_matches(
                before in prop::sample::select(vec!["ls", "echo hi", "FOO=1 ls", "cd x"]),
                sep in prop::sample::select(vec![" && ", " || ", "; ", " | ", "\n", " & "]),
            ) {
                let command = format!("{before}{sep}git push origin");
                prop_assert!(bash("Bash(git *)", &command));
                prop_assert!(!bash("Bash(rm *)", &command));
            }
        }
    }
}
