//! [`Skills`]: `SKILL.md` discovery, a skill catalog in the system prompt, and optional
//! just-in-time skill bodies.
//!
//! # Example
//!
//! ```
//! use tower_agent_builtins::skills::Skills;
//! use tower_agent_core::{Agent, model::{ModelResponse, ScriptedModel}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! std::fs::create_dir(dir.path().join("pdf"))?;
//! std::fs::write(
//!     dir.path().join("pdf/SKILL.md"),
//!     "---\nname: pdf\ndescription: Fill in PDF forms\n---\n\nUse `pdftk` to fill forms.\n",
//! )?;
//!
//! let agent = Agent::builder()
//!     .model(ScriptedModel::from_fn(|req| {
//!         Ok(ModelResponse::text(req.system().unwrap().text().into_owned()))
//!     }))
//!     .system_prompt("You are a helpful assistant.")
//!     .stage(Skills::new([dir.path()]))
//!     .build();
//!
//! let system = agent.run("Hello").await?.text;
//! let path = dir.path().join("pdf").join("SKILL.md");
//! assert!(system.starts_with("You are a helpful assistant.\n\n## Skills"));
//! assert!(system.ends_with(&format!(
//!     "[pdf] Fill in PDF forms → Read {} for full instructions",
//!     path.display()
//! )));
//! # Ok(())
//! # }
//! ```
//!
//! # Discovery (setup)
//!
//! At the start of every run, each configured directory (relative paths are taken from the
//! run's [`cwd`](tower_agent_core::context::RunContext::cwd)) is searched one level deep for
//! `<dir>/<skill>/SKILL.md`. A directory that does not exist is skipped silently; hidden
//! directories (`.name`) are ignored. Each `SKILL.md` starts with YAML front matter:
//!
//! ```text
//! ---
//! name: pdf
//! description: Fill in PDF forms
//! keywords: [pdf, form]        # optional, for just-in-time injection
//! ---
//!
//! The instructions (the body).
//! ```
//!
//! A file without front matter, with invalid YAML, or without a `name` or `description` is
//! skipped with a `tracing` warning and an [`AgentEvent::Warning`](tower_agent_core::agent::AgentEvent::Warning); it never fails the run
//! (nor do the [limits](#limits) below).
//! When two skills have the same name, the one found later (in a later directory) wins.
//!
//! The files are read from the local file system with `tokio::fs`, not through a
//! [filesystem backend](crate::filesystem), and only when they changed: each run
//! checks the status (`stat`: device, inode, size, modification and status-change times) of
//! each skills directory and `SKILL.md`, and reuses the listing or the bytes read before
//! when none changed, so an unchanged catalog costs a few `stat`s per run and no hand-off to
//! the blocking pool. An edit (by anyone, the agent's `write_file` included) shows at the
//! next run. A directory or file changed less than 2 s before it was read is read again at
//! the next run (an edit within its timestamp tick could leave its status as it was). A
//! skill directory that is a symbolic link is followed when the listing is made; a link
//! retargeted in place is seen once its skills directory changes. The stage keeps at most 256
//! files (each at most [`MAX_SKILL_FILE`]) and 256 listings.
//!
//! # Limits
//!
//! A `SKILL.md` may be written by anyone who can write to a skills directory, the model
//! included (through `write_file`, when the skills live under the filesystem root). What it
//! costs to read one is bounded, and a file over a limit is skipped with a warning:
//!
//! - a `SKILL.md` over [`MAX_SKILL_FILE`] (1 MiB) is not read past that size; a `SKILL.md`
//!   that is not a regular file (a FIFO, a socket, a device) is not opened;
//! - the front matter may be at most [`MAX_FRONT_MATTER`] (64 KiB);
//! - YAML anchors and aliases (`&a`, `*a`) work, but the front matter they expand to may hold
//!   at most [`MAX_FRONT_MATTER_NODES`] (10,000) nodes, [`MAX_FRONT_MATTER_TEXT`] (256 KiB) of
//!   scalar text and [`MAX_FRONT_MATTER_DEPTH`] (64) levels of nesting. The front matter is
//!   parsed event by event and the limits are checked before each node is built, so a "billion
//!   laughs" file (a few hundred bytes of nested aliases that expand to gigabytes) is refused
//!   after at most the limits' worth of work and memory (a few megabytes).
//!
//! # Catalog (prepare)
//!
//! Before every model call, the catalog is appended to the system message: a
//! [heading](Skills::heading), then one line per skill:
//!
//! ```text
//! [name] description → Read /abs/path/SKILL.md for full instructions
//! ```
//!
//! Only names and descriptions are in the prompt; the model reads a skill's file (e.g. with
//! `read_file`) when it needs it. The text is formatted once, in setup: the prepare stage does
//! no IO and no formatting.
//!
//! # Just in time
//!
//! With [`just_in_time(true)`](Skills::just_in_time), a skill whose name or one of whose
//! keywords appears in the user's prompt of the run (case-insensitive, as a whole word) also
//! has its body injected into the system message for that run:
//!
//! ```text
//! <skill name="pdf">
//! Use `pdftk` to fill forms.
//! </skill>
//! ```
//!
//! The prompt is the user's prompt of the run ([`SetupContext::prompt`]).

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

use futures_util::future::BoxFuture;
use yaml_rust2::{
    Event, Yaml,
    parser::{Parser, Tag},
    scanner::TScalarStyle,
    yaml::Hash,
};

use tower_agent_core::{
    agent::{Prepare, Setup, SetupContext},
    context::InstanceId,
    context::RunContext,
    error::BoxError,
    model::ModelRequest,
};

/// The default heading of the catalog.
pub const DEFAULT_HEADING: &str = "## Skills\n\nSkills are folders of instructions for \
specialised tasks. Only their names and descriptions are listed here: before you start a task \
that a skill covers, read its SKILL.md and follow it.";

/// The heading of the skills injected just in time.
const JIT_HEADING: &str = "The following skills match this request; follow their instructions:";

/// The name of a skill's file.
pub const SKILL_FILE: &str = "SKILL.md";

/// The largest `SKILL.md` read, in bytes (1 MiB): a larger file is skipped with a warning, and
/// no more than this (plus one byte) of it is ever read.
pub const MAX_SKILL_FILE: u64 = 1024 * 1024;

/// The largest front matter (the YAML between the `---` lines), in bytes (64 KiB).
pub const MAX_FRONT_MATTER: usize = 64 * 1024;

/// The most nodes (scalars, lists, mappings) the front matter may hold once its aliases are
/// expanded, counting every copy an alias makes and every anchored node once more (10,000).
pub const MAX_FRONT_MATTER_NODES: usize = 10_000;

/// The most scalar text, in bytes, the front matter may hold once its aliases are expanded,
/// counted as [`MAX_FRONT_MATTER_NODES`] counts nodes (256 KiB).
pub const MAX_FRONT_MATTER_TEXT: usize = 256 * 1024;

/// The deepest nesting of lists and mappings in the front matter, aliases expanded (64).
pub const MAX_FRONT_MATTER_DEPTH: usize = 64;

// ===== Skills =====

/// The skills stage: a [`Setup`] that discovers `SKILL.md` files and a [`Prepare`] that puts
/// their catalog in the system prompt. Add it with
/// [`AgentBuilder::stage`](tower_agent_core::agent::AgentBuilder::stage).
///
/// See the [module docs](crate::skills).
///
/// # Clone
///
/// Clones share their per-run data (the setup of one clone feeds the prepare of another, as
/// `stage` needs); each configuration method gives the stage a new identity, so differently
/// configured stages on one agent don't see each other's skills.
#[derive(Clone)]
#[must_use]
pub struct Skills {
    id: InstanceId,
    paths: Arc<[PathBuf]>,
    heading: Arc<str>,
    just_in_time: bool,
    /// The directories and files as last read, shared by clones.
    cache: Arc<tower_agent_os::bounded::FileCache>,
}

impl Skills {
    /// Skills found under each of `paths` (directories holding one directory per skill).
    pub fn new<I>(paths: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<PathBuf>,
    {
        Skills {
            id: InstanceId::new(),
            paths: paths.into_iter().map(Into::into).collect(),
            heading: DEFAULT_HEADING.into(),
            just_in_time: false,
            cache: Arc::default(),
        }
    }

    /// The text above the catalog lines; default [`DEFAULT_HEADING`].
    pub fn heading(mut self, heading: impl Into<String>) -> Self {
        self.heading = heading.into().into();
        self.id = InstanceId::new();
        self
    }

    /// Also inject the whole body of every skill whose name or a keyword appears in the
    /// user's prompt (see the [module docs](crate::skills#just-in-time)); default
    /// off.
    pub fn just_in_time(mut self, on: bool) -> Self {
        self.just_in_time = on;
        self.id = InstanceId::new();
        self
    }

    /// The configured directories.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// The skills this stage found in the run of `ctx` (empty before its setup ran).
    pub fn loaded(&self, ctx: &RunContext) -> Arc<[Skill]> {
        ctx.with_data(|data| {
            data.get_for::<SkillRun>(self.id)
                .map(|run| Arc::clone(&run.skills))
        })
        .unwrap_or_else(|| Arc::from(Vec::new()))
    }

    /// Finds and parses the skills (warnings go to `ctx`).
    async fn discover(&self, ctx: &RunContext) -> Vec<Skill> {
        let mut skills: Vec<Skill> = Vec::new();
        for path in self.paths.iter() {
            let dir = absolute(&ctx.cwd(), path);
            for skill in discover_dir(ctx, &self.cache, &dir).await {
                match skills.iter_mut().find(|s| s.name == skill.name) {
                    Some(earlier) => {
                        tracing::debug!(
                            name = %skill.name,
                            path = %skill.path.display(),
                            replaces = %earlier.path.display(),
                            "skill overrides an earlier one of the same name"
                        );
                        *earlier = skill;
                    }
                    None => skills.push(skill),
                }
            }
        }
        skills
    }

    fn catalog(&self, skills: &[Skill]) -> Option<Arc<str>> {
        if skills.is_empty() {
            return None;
        }
        let mut text = self.heading.to_string();
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        for (i, skill) in skills.iter().enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&skill.catalog_line());
        }
        Some(text.into())
    }
}

impl fmt::Debug for Skills {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Skills")
            .field("paths", &self.paths)
            .field("just_in_time", &self.just_in_time)
            .finish_non_exhaustive()
    }
}

impl Setup for Skills {
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            let ctx = cx.ctx();
            let skills = self.discover(ctx).await;
            tracing::debug!(count = skills.len(), "skills discovered");
            let jit = if self.just_in_time {
                let terms: Vec<Vec<String>> = skills.iter().map(Skill::match_terms).collect();
                jit_text(&skills, &terms, &cx.prompt().to_lowercase())
            } else {
                None
            };
            let run = SkillRun {
                catalog: self.catalog(&skills),
                jit,
                skills: skills.into(),
            };
            ctx.with_data(|data| data.insert_for(self.id, run));
            Ok(())
        })
    }
}

impl Prepare for Skills {
    /// Appends the catalog (and the skills matched just in time) to the system message.
    fn prepare(&self, req: &mut ModelRequest) -> Result<(), BoxError> {
        let run = req.ctx.with_data(|data| {
            data.get_for::<SkillRun>(self.id)
                .map(|run| (run.catalog.clone(), run.jit.clone()))
        });
        let Some((catalog, jit)) = run else {
            return Ok(());
        };
        if let Some(catalog) = catalog {
            req.append_system(&catalog);
        }
        if let Some(jit) = jit {
            req.append_system(&jit);
        }
        Ok(())
    }
}

/// The per-run data of a [`Skills`] stage.
struct SkillRun {
    skills: Arc<[Skill]>,
    /// The catalog text, `None` without skills.
    catalog: Option<Arc<str>>,
    /// The text of the skills matched just in time to the run's prompt.
    jit: Option<Arc<str>>,
}

fn jit_text(skills: &[Skill], terms: &[Vec<String>], prompt: &str) -> Option<Arc<str>> {
    let mut text = String::new();
    for (skill, terms) in skills.iter().zip(terms) {
        if !terms.iter().any(|t| contains_word(prompt, t)) {
            continue;
        }
        tracing::debug!(name = %skill.name, "skill injected just in time");
        if text.is_empty() {
            text.push_str(JIT_HEADING);
        }
        text.push_str(&format!(
            "\n\n<skill name=\"{}\">\n{}\n</skill>",
            skill.name.replace('"', "&quot;"),
            skill.body
        ));
    }
    (!text.is_empty()).then(|| text.into())
}

/// Whether `needle` occurs in `hay` as a whole word: not preceded or followed by a letter or
/// digit where its own first or last character is one.
fn contains_word(hay: &str, needle: &str) -> bool {
    let Some(first) = needle.chars().next() else {
        return false;
    };
    let last = needle.chars().next_back().unwrap_or(first);
    hay.match_indices(needle).any(|(i, _)| {
        let before_ok = !first.is_alphanumeric()
            || !hay[..i]
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric);
        let after_ok = !last.is_alphanumeric()
            || !hay[i + needle.len()..]
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric);
        before_ok && after_ok
    })
}

fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    std::path::absolute(&path).unwrap_or(path)
}

/// The skills of one directory, sorted by their directory's name.
async fn discover_dir(
    ctx: &RunContext,
    cache: &tower_agent_os::bounded::FileCache,
    dir: &Path,
) -> Vec<Skill> {
    let stamp = match std::fs::metadata(dir) {
        Ok(meta) => Some(tower_agent_os::bounded::Stamp::of(&meta)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(dir = %dir.display(), "skills directory does not exist");
            return Vec::new();
        }
        Err(_) => None,
    };
    let dirs = match stamp.and_then(|stamp| cache.listing(dir, stamp)) {
        Some(dirs) => dirs,
        None => {
            let dirs: Arc<[PathBuf]> = list_skill_dirs(ctx, dir).await.into();
            if let Some(stamp) = stamp {
                cache.keep_listing(dir, stamp, Arc::clone(&dirs));
            }
            dirs
        }
    };
    let mut skills = Vec::new();
    for skill_dir in dirs.iter() {
        let path = skill_dir.join(SKILL_FILE);
        let bytes = match cache.read(&path, MAX_SKILL_FILE).await {
            Ok(bytes) => bytes,
            Err(tower_agent_os::bounded::ReadError::NotFound) => continue,
            Err(err) => {
                ctx.warn(format!("skills: skipped {}: {err}", path.display()));
                continue;
            }
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            ctx.warn(format!(
                "skills: skipped {}: not valid UTF-8",
                path.display()
            ));
            continue;
        };
        match Skill::parse(&path, text) {
            Ok(skill) => skills.push(skill),
            Err(err) => ctx.warn(format!("skills: skipped {}: {err}", path.display())),
        }
    }
    skills
}

/// The skill directories of `dir` (hidden ones left out, symbolic links followed), sorted.
async fn list_skill_dirs(ctx: &RunContext, dir: &Path) -> Vec<PathBuf> {
    let mut entries = match tokio::fs::read_dir(dir).await {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(dir = %dir.display(), "skills directory does not exist");
            return Vec::new();
        }
        Err(err) => {
            ctx.warn(format!(
                "skills: cannot read the directory {}: {err}",
                dir.display()
            ));
            return Vec::new();
        }
    };
    let mut dirs = Vec::new();
    loop {
        match entries.next_entry().await {
            Ok(Some(entry)) => {
                if entry.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                // Follows symbolic links.
                if tokio::fs::metadata(entry.path())
                    .await
                    .is_ok_and(|m| m.is_dir())
                {
                    dirs.push(entry.path());
                }
            }
            Ok(None) => break,
            Err(err) => {
                ctx.warn(format!(
                    "skills: cannot read the directory {}: {err}",
                    dir.display()
                ));
                break;
            }
        }
    }
    dirs.sort();
    dirs
}

// ===== Skill =====

/// One skill: the front matter and body of a `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skill {
    /// Its name (front matter `name`).
    pub name: String,
    /// What it is for (front matter `description`, on one line).
    pub description: String,
    /// Words that trigger its just-in-time injection (front matter `keywords`, a list or a
    /// comma-separated string).
    pub keywords: Vec<String>,
    /// The path of its `SKILL.md`.
    pub path: PathBuf,
    /// The instructions: the text after the front matter, trimmed.
    pub body: String,
}

impl Skill {
    /// Parses the text of the `SKILL.md` at `path`.
    ///
    /// ```
    /// use tower_agent_builtins::skills::Skill;
    ///
    /// let skill = Skill::parse(
    ///     "/skills/csv/SKILL.md",
    ///     "---\nname: csv\ndescription: >\n  Clean up\n  CSV files\nkeywords: spreadsheet, table\n---\nSteps…",
    /// )
    /// .unwrap();
    /// assert_eq!(skill.description, "Clean up CSV files");
    /// assert_eq!(skill.keywords, ["spreadsheet", "table"]);
    /// assert_eq!(skill.body, "Steps…");
    ///
    /// let err = Skill::parse("/skills/x/SKILL.md", "# No front matter").unwrap_err();
    /// assert!(err.to_string().contains("front matter"));
    /// ```
    ///
    /// # Errors
    ///
    /// If the text does not start with a `---` line, the front matter is not closed by a
    /// `---` line, is not valid YAML or not a mapping, is over one of the
    /// [limits](crate::skills#limits), or lacks a non-empty `name` or `description`.
    pub fn parse(path: impl Into<PathBuf>, text: &str) -> Result<Skill, SkillError> {
        let (yaml, body) = split_front_matter(text)?;
        let doc = load_front_matter(yaml)?;
        if !doc.is_hash() {
            return Err(SkillError::new(
                "the front matter is not a mapping of `name`, `description` …",
            ));
        }
        let field = |key: &str| -> Result<String, SkillError> {
            let value = scalar(&doc[key]).map(|s| one_line(&s)).unwrap_or_default();
            if value.is_empty() {
                Err(SkillError::new(format!(
                    "the front matter has no `{key}` (a non-empty string)"
                )))
            } else {
                Ok(value)
            }
        };
        let name = field("name")?;
        let description = field("description")?;
        let keywords = match &doc["keywords"] {
            Yaml::Array(items) => items.iter().filter_map(scalar).collect(),
            Yaml::BadValue | Yaml::Null => Vec::new(),
            other => match scalar(other) {
                Some(s) => s.split(',').map(str::to_owned).collect(),
                None => {
                    return Err(SkillError::new(
                        "`keywords` must be a list of words or a comma-separated string",
                    ));
                }
            },
        };
        let keywords = keywords
            .iter()
            .map(|k| one_line(k))
            .filter(|k| !k.is_empty())
            .collect();
        Ok(Skill {
            name,
            description,
            keywords,
            path: path.into(),
            body: body.trim().to_owned(),
        })
    }

    /// The skill's catalog line: `[name] description → Read <path> for full instructions`.
    pub fn catalog_line(&self) -> String {
        format!(
            "[{}] {} → Read {} for full instructions",
            self.name,
            self.description,
            self.path.display()
        )
    }

    /// Lower-cased name (also with `-`/`_` as spaces) and keywords.
    fn match_terms(&self) -> Vec<String> {
        let name = self.name.to_lowercase();
        let spaced = name.replace(['-', '_'], " ");
        let mut terms = vec![name];
        if spaced != terms[0] {
            terms.push(spaced);
        }
        terms.extend(self.keywords.iter().map(|k| k.to_lowercase()));
        terms
    }
}

/// A scalar as a string.
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

// ===== front matter =====

/// The first YAML document of `yaml` (`Null` if there is none), built from the parser's events
/// within the [limits](crate::skills#limits).
///
/// The same values as `yaml_rust2::YamlLoader` (which copies the anchored node for every
/// alias without limit: a few hundred bytes of nested aliases cost gigabytes).
fn load_front_matter(yaml: &str) -> Result<Yaml, SkillError> {
    if yaml.len() > MAX_FRONT_MATTER {
        return Err(SkillError::new(format!(
            "the front matter is larger than {} KiB",
            MAX_FRONT_MATTER / 1024
        )));
    }
    let invalid = |e: &dyn fmt::Display| SkillError::new(format!("invalid YAML front matter: {e}"));
    let mut parser = Parser::new_from_str(yaml);
    let mut builder = Builder::default();
    loop {
        let (event, mark) = parser.next_token().map_err(|e| invalid(&e))?;
        let (node, anchor) = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue;
            }
            Event::SequenceStart(anchor, _) => {
                builder.open(Open::Sequence(Vec::new()), anchor)?;
                continue;
            }
            Event::MappingStart(anchor, _) => {
                builder.open(Open::Mapping(Hash::new(), None), anchor)?;
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => builder.close(),
            Event::Scalar(value, style, anchor, tag) => {
                let cost = Cost {
                    nodes: 1,
                    text: value.len(),
                    depth: 0,
                };
                builder.spend(cost)?;
                ((scalar_value(value, style, tag.as_ref()), cost), anchor)
            }
            Event::Alias(id) => {
                let Some(&(_, cost)) = builder.anchors.get(&id) else {
                    return Err(invalid(
                        &"an alias to an anchor that is not defined before it",
                    ));
                };
                // Counted before the copy is made.
                builder.spend(cost)?;
                ((builder.anchors[&id].0.clone(), cost), 0)
            }
        };
        builder.insert(node, anchor, mark.line())?;
    }
    Ok(builder.doc.unwrap_or(Yaml::Null))
}

/// What a node costs against the limits: its nodes, its scalar bytes, its depth.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    nodes: usize,
    text: usize,
    depth: usize,
}

/// A list or mapping being built (a mapping with the key waiting for its value).
#[derive(Debug)]
enum Open {
    Sequence(Vec<Yaml>),
    Mapping(Hash, Option<Yaml>),
}

/// Builds the first document from the parser's events, counting what it builds.
#[derive(Debug, Default)]
struct Builder {
    /// The open lists and mappings: each with its anchor and the cost of what it holds.
    stack: Vec<(Open, usize, Cost)>,
    /// Anchored nodes (anchor id → node), for aliases.
    anchors: std::collections::HashMap<usize, (Yaml, Cost)>,
    /// What was built so far, aliases expanded.
    spent: Cost,
    /// The first document.
    doc: Option<Yaml>,
}

impl Builder {
    /// Counts `cost` (a node about to be built at the current depth) against the limits.
    fn spend(&mut self, cost: Cost) -> Result<(), SkillError> {
        self.spent.nodes = self.spent.nodes.saturating_add(cost.nodes);
        self.spent.text = self.spent.text.saturating_add(cost.text);
        if self.spent.nodes > MAX_FRONT_MATTER_NODES || self.spent.text > MAX_FRONT_MATTER_TEXT {
            return Err(SkillError::new(format!(
                "the front matter is too large once its aliases are expanded (over \
                 {MAX_FRONT_MATTER_NODES} nodes or {} KiB of text)",
                MAX_FRONT_MATTER_TEXT / 1024
            )));
        }
        if self.stack.len() + cost.depth > MAX_FRONT_MATTER_DEPTH {
            return Err(SkillError::new(format!(
                "the front matter is nested more than {MAX_FRONT_MATTER_DEPTH} levels deep"
            )));
        }
        Ok(())
    }

    fn open(&mut self, open: Open, anchor: usize) -> Result<(), SkillError> {
        let cost = Cost {
            nodes: 1,
            text: 0,
            depth: 1,
        };
        self.spend(cost)?;
        self.stack.push((open, anchor, cost));
        Ok(())
    }

    /// Closes the innermost list or mapping: the node to insert into its parent.
    fn close(&mut self) -> ((Yaml, Cost), usize) {
        match self.stack.pop() {
            Some((Open::Sequence(items), anchor, cost)) => ((Yaml::Array(items), cost), anchor),
            Some((Open::Mapping(map, _), anchor, cost)) => ((Yaml::Hash(map), cost), anchor),
            // The parser never ends what it did not start.
            None => ((Yaml::BadValue, Cost::default()), 0),
        }
    }

    /// Inserts a finished node (already counted) into the open list or mapping, or makes it
    /// the document.
    fn insert(
        &mut self,
        (node, cost): (Yaml, Cost),
        anchor: usize,
        line: usize,
    ) -> Result<(), SkillError> {
        if anchor > 0 {
            // The copy kept for aliases counts too.
            self.spend(cost)?;
            self.anchors.insert(anchor, (node.clone(), cost));
        }
        let Some((open, _, parent)) = self.stack.last_mut() else {
            if self.doc.is_none() {
                self.doc = Some(node);
            }
            return Ok(());
        };
        parent.nodes = parent.nodes.saturating_add(cost.nodes);
        parent.text = parent.text.saturating_add(cost.text);
        parent.depth = parent.depth.max(cost.depth + 1);
        match open {
            Open::Sequence(items) => items.push(node),
            // As in `YamlLoader`, a bad value (e.g. `!!int x`) as a key does not count as one.
            Open::Mapping(map, key) => match key.take().filter(|k| !k.is_badvalue()) {
                None => *key = Some(node),
                Some(k) => {
                    if map.contains_key(&k) {
                        return Err(SkillError::new(format!(
                            "invalid YAML front matter: duplicated key {k:?} in a mapping at \
                             line {line}"
                        )));
                    }
                    map.insert(k, node);
                }
            },
        }
        Ok(())
    }
}

/// A scalar's value as `yaml_rust2::YamlLoader` resolves it.
fn scalar_value(value: String, style: TScalarStyle, tag: Option<&Tag>) -> Yaml {
    if style != TScalarStyle::Plain {
        return Yaml::String(value);
    }
    match tag {
        None => Yaml::from_str(&value),
        Some(tag) if tag.handle == "tag:yaml.org,2002:" => match tag.suffix.as_str() {
            "bool" => match value.as_str() {
                "true" | "True" | "TRUE" => Yaml::Boolean(true),
                "false" | "False" | "FALSE" => Yaml::Boolean(false),
                _ => Yaml::BadValue,
            },
            "int" => value.parse().map_or(Yaml::BadValue, Yaml::Integer),
            "float" => {
                let bare = value.trim_start_matches(['+', '-']);
                let special = matches!(bare, ".inf" | ".Inf" | ".INF" | ".nan" | ".NaN" | ".NAN");
                if special || value.parse::<f64>().is_ok() {
                    Yaml::Real(value)
                } else {
                    Yaml::BadValue
                }
            }
            "null" => match value.as_str() {
                "~" | "null" => Yaml::Null,
                _ => Yaml::BadValue,
            },
            _ => Yaml::String(value),
        },
        Some(_) => Yaml::String(value),
    }
}

/// `s` with every run of whitespace as one space, trimmed.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The YAML between the `---` lines, and the rest.
fn split_front_matter(text: &str) -> Result<(&str, &str), SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => {
            return Err(SkillError::new(
                "no YAML front matter (the file must start with a `---` line)",
            ));
        }
    }
    let start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut offset = start;
    for line in lines {
        let end = offset + line.len();
        if matches!(line.trim_end(), "---" | "...") {
            return Ok((&text[start..offset], &text[end..]));
        }
        offset = end;
    }
    Err(SkillError::new(
        "the front matter is not closed by a `---` line",
    ))
}

/// Why a `SKILL.md` could not be parsed. See [`Skill::parse`].
#[derive(Debug, Clone)]
pub struct SkillError {
    message: String,
}

impl SkillError {
    fn new(message: impl Into<String>) -> Self {
        SkillError {
            message: message.into(),
        }
    }
}

impl fmt::Display for SkillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SkillError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert!(contains_word("fill the pdf form", "pdf"));
        assert!(contains_word("pdf", "pdf"));
        assert!(contains_word("a pdf.", "pdf"));
        assert!(!contains_word("pdfs", "pdf"));
        assert!(!contains_word("mypdf", "pdf"));
        assert!(contains_word("write c++ code", "c++"));
        assert!(contains_word("an asp.net site", ".net"));
        assert!(contains_word("use data-viz here", "data-viz"));
        assert!(!contains_word("anything", ""));
    }

    #[test]
    fn front_matter_errors() {
        let err = |text| Skill::parse("/x", text).unwrap_err().to_string();
        assert!(err("no front matter").contains("no YAML front matter"));
        assert!(err("---\nname: a\n").contains("not closed"));
        assert!(err("---\nname: [a\n---\n").contains("invalid YAML"));
        assert!(err("---\n- a\n---\n").contains("not a mapping"));
        assert!(err("---\nname: a\n---\n").contains("`description`"));
        assert!(err("---\ndescription: a\n---\n").contains("`name`"));
        assert!(err("---\nname: a\ndescription: b\nkeywords: {a: 1}\n---\n").contains("keywords"));
    }

    #[test]
    fn crlf_and_bom() {
        let s = Skill::parse(
            "/x",
            "\u{feff}---\r\nname: a\r\ndescription: b\r\n---\r\nbody\r\n",
        )
        .unwrap();
        assert_eq!((s.name.as_str(), s.description.as_str()), ("a", "b"));
        assert_eq!(s.body, "body");
    }

    /// Pieces of YAML syntax that random front matter is made of.
    const YAML_TOKENS: &[&str] = &[
        "-", ":", "&", "*", "!", ",", "#", "'", "\"", "|", ">", "?", " ", "\n", "[", "]", "{", "}",
        "a", "b", "1", "0.5", "true", "~", "name: ", "&a ", "*a ", "&b ", "*b ", "!!str ",
        "!!int ", "!!float ", "!!bool ", "!!null ", "---\n", "...\n", "  ", "- ", "? ", "x: ",
    ];

    #[test]
    fn loader_cases() {
        let load = |yaml: &str| load_front_matter(yaml).map_err(|e| e.to_string());
        // A bad value as a key is no key (as in `YamlLoader`).
        assert_eq!(load("? !!int \n"), Ok(Yaml::Hash(Hash::new())));
        assert!(load("a: 1\na: 2\n").unwrap_err().contains("duplicated key"));
        assert!(load("a: *b\n").unwrap_err().contains("invalid YAML"));
        assert_eq!(load(""), Ok(Yaml::Null));
        // Only the first document is front matter: an alias in a later document to an anchor
        // of another one (an error for yaml-rust2, which reads them all) is not read.
        assert!(load("a---\n---\n&a ---\n---\n*a ").is_ok());
        assert_eq!(
            load("a: &x [1, 'two']\nb: *x\n").unwrap()["b"],
            Yaml::Array(vec![Yaml::Integer(1), Yaml::String("two".into())])
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// The bounded loader reads what `YamlLoader` reads (it only refuses more).
        #[test]
        fn loader_agrees_with_yaml_rust2(
            tokens in proptest::collection::vec(proptest::sample::select(YAML_TOKENS), 0..60)
        ) {
            let yaml = tokens.concat();
            let theirs = std::panic::catch_unwind(|| yaml_rust2::YamlLoader::load_from_str(&yaml));
            let ours = load_front_matter(&yaml);
            let top = |y: Yaml| if y.is_badvalue() { Yaml::Null } else { y };
            match (theirs, ours) {
                // yaml-rust2 itself panicked: nothing to compare.
                (Err(_), _) => {}
                (Ok(Ok(docs)), Ok(ours)) => {
                    let theirs = top(docs.into_iter().next().unwrap_or(Yaml::Null));
                    proptest::prop_assert_eq!(theirs, top(ours), "{:?}", yaml);
                }
                (Ok(Ok(_)), Err(e)) => {
                    // An alias to an unfinished node (yaml-rust2: a bad value), or a limit.
                    let e = e.to_string();
                    proptest::prop_assert!(
                        e.contains("alias") || e.contains("nested"),
                        "{:?}: {}", yaml, e
                    );
                }
                (Ok(Err(e)), ours) => {
                    // yaml-rust2 reads every document of the stream; the front matter is its
                    // first, and an error in a later one (an alias to an anchor of another
                    // document) is none of ours.
                    let later_documents = yaml
                        .match_indices("---\n")
                        .chain(yaml.match_indices("...\n"))
                        .any(|(at, _)| at > 0);
                    proptest::prop_assert!(
                        ours.is_err() || later_documents,
                        "{:?}: yaml-rust2: {}", yaml, e
                    );
                }
            }
        }
    }

    #[test]
    fn match_terms() {
        let s = Skill::parse(
            "/x",
            "---\nname: Data-Viz\ndescription: d\nkeywords: [Chart]\n---\n",
        )
        .unwrap();
        assert_eq!(s.match_terms(), ["data-viz", "data viz", "chart"]);
    }
}
