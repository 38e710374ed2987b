//! Hosts: what plays a scenario — a [`Host`] implemented in Rust, or an [`Adapter`], a
//! program of any language given the [`Job`] as a file.

use std::{
    ffi::OsString,
    future::Future,
    path::PathBuf,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{
    Error, FORMAT,
    observe::{self, Normaliser},
    play::Play,
    server::ModelServer,
    vector::{Observed, Scenario},
};

/// How long one play may take, from the host's start to its end (180 s); past it the play
/// fails and an adapter's processes are killed.
pub const PLAY_TIMEOUT: Duration = Duration::from_secs(180);

/// The most of an adapter's stdout and of its stderr kept for an error message (16 KiB each,
/// the end).
pub const MAX_ADAPTER_OUTPUT: usize = 16 << 10;

/// How long a play waits, after its host returned, for hooks still running to finish
/// recording (10 s): a host may end before a hook it started in the background has (Claude
/// Code does not wait for its StopFailure hooks).
pub const SETTLE: Duration = Duration::from_secs(10);

/// The largest `ran.log` read, in bytes (1 MiB).
pub const MAX_RAN: u64 = 1 << 20;

/// What a host is given to play one scenario. An [`Adapter`] gets it as a JSON file, its path
/// the last argument.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// [`FORMAT`].
    pub format: String,
    /// The play's directory (temporary).
    pub root: PathBuf,
    /// The project: `.claude/settings.json` or `.claude/settings.local.json` (the hooks:
    /// [`Job::settings`]), `.claude/hooks/record.sh`, the scenario's files. Hooks run with
    /// `$CLAUDE_PROJECT_DIR` set to it.
    pub project: PathBuf,
    /// The directory the agent runs in (the project, or a directory in it).
    pub cwd: PathBuf,
    /// A home directory of the play's own, for the agent's user settings and state.
    pub home: PathBuf,
    /// Where the recorder writes, a pair of files per hook run (`<start>.in`: its input,
    /// then `<start>.meta`: what it saw); an adapter may watch it, as Claude Code's does to
    /// keep a session open until its last hooks have recorded.
    pub hooks_log: PathBuf,
    /// The settings file to read the hooks from (Claude Code's format).
    pub settings: PathBuf,
    /// The model server's base URL: the Anthropic Messages API on 127.0.0.1.
    pub model_server: String,
    /// An API key to send it (any key is taken).
    pub api_key: String,
    /// The folder of the plugin the session loads (Claude Code: `--plugin-dir`), when the
    /// scenario has one ([`Scenario::plugin`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PathBuf>,
    /// The scenario: its model, steps, allowed tools, `init`, `maintenance`.
    pub scenario: Scenario,
}

impl Job {
    /// What the hooks have recorded so far, in the order they started: a host that ends a
    /// session before its last hooks are done (SessionEnd hooks in the background) can wait
    /// for them.
    pub fn hooks(&self) -> Vec<crate::Recorded> {
        crate::play::read_log(&self.hooks_log)
    }

    /// Waits until no hook is halfway through recording (its input saved, not yet what it
    /// saw), for at most `limit`.
    pub async fn settle(&self, limit: Duration) {
        let log = &self.hooks_log;
        let deadline = tokio::time::Instant::now() + limit;
        while crate::play::in_flight(log) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn new(play: &Play, scenario: &Scenario, server: &ModelServer) -> Job {
        Job {
            format: FORMAT.to_owned(),
            root: play.root().to_path_buf(),
            project: play.project(),
            cwd: play.cwd(scenario),
            home: play.home(),
            hooks_log: play.path("log"),
            settings: play.project().join(scenario.settings_file()),
            model_server: server.url().to_owned(),
            api_key: "sk-ant-hook-vectors".to_owned(),
            plugin: (!scenario.plugin.is_empty()).then(|| play.plugin()),
            scenario: scenario.clone(),
        }
    }
}

/// An agent that plays scenarios: it runs the job's steps as one session against the model
/// server, with the hooks of the job's settings, and returns once the session has ended (its
/// SessionEnd hooks done).
pub trait Host {
    /// Plays `job`'s session.
    fn play(&self, job: &Job) -> impl Future<Output = Result<(), Error>>;
}

/// Plays `scenario` through `host` within [`PLAY_TIMEOUT`], and what it did, normalised.
pub async fn play<H: Host + ?Sized>(host: &H, scenario: &Scenario) -> Result<Observed, Error> {
    play_within(host, scenario, PLAY_TIMEOUT).await
}

/// [`play`] with a time limit of its own: past it the play fails (and an adapter's processes
/// are killed).
pub async fn play_within<H: Host + ?Sized>(
    host: &H,
    scenario: &Scenario,
    limit: Duration,
) -> Result<Observed, Error> {
    let play = Play::new(scenario)?;
    let server =
        ModelServer::with_agents(play.answers(scenario), play.agent_answers(scenario)).await?;
    let job = Job::new(&play, scenario, &server);
    match tokio::time::timeout(limit, host.play(&job)).await {
        Ok(Ok(())) => job.settle(SETTLE).await,
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            let mut events: Vec<String> = play
                .hooks()
                .iter()
                .map(|h| {
                    h.input["hook_event_name"]
                        .as_str()
                        .unwrap_or("?")
                        .to_owned()
                })
                .collect();
            events.truncate(40);
            return Err(Error::new(format!(
                "not finished in {} s; {} model requests; hooks fired: {events:?}",
                limit.as_secs_f64(),
                server.requests().len()
            )));
        }
    }
    let mut norm = Normaliser::new(&play);
    let hooks = observe::hooks(&play, &mut norm);
    let requests = observe::effects(&server.requests(), &norm);
    let log = play.project().join("ran.log");
    let ran = match std::fs::metadata(&log) {
        Ok(m) if m.len() > MAX_RAN => {
            return Err(Error::new(format!("ran.log: over {MAX_RAN} bytes")));
        }
        Ok(_) => norm.text(&std::fs::read_to_string(&log).map_err(Error::new)?),
        Err(_) => String::new(),
    };
    Ok(Observed {
        hooks,
        requests,
        ran,
    })
}

/// A host in another program: `program args… <job.json>`, run in this process's working
/// directory (so relative paths in its command line hold; the job's paths are absolute) with
/// stdin closed; exit status 0 says the session was played. Its process group is killed when
/// the play ends or times out, so nothing it started outlives the play.
#[derive(Debug, Clone)]
pub struct Adapter {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Adapter {
    /// An adapter run as `program`.
    pub fn new(program: impl Into<OsString>) -> Self {
        Adapter {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// An argument, before the job's path.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Arguments, before the job's path.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// A variable of its environment (it inherits the rest from this process).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// Kills a process group when dropped: what an adapter started ends with its play.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            let group = nix::unistd::Pid::from_raw(pid);
            // Already gone (ESRCH) is the usual case: nothing to do.
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// The end of what `from` writes, at most [`MAX_ADAPTER_OUTPUT`] bytes.
async fn tail(from: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut from) = from else {
        return String::new();
    };
    let mut kept: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > MAX_ADAPTER_OUTPUT {
            kept.drain(..kept.len() - MAX_ADAPTER_OUTPUT);
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

impl Host for Adapter {
    async fn play(&self, job: &Job) -> Result<(), Error> {
        let path = job.root.join("job.json");
        let text = serde_json::to_string_pretty(job).map_err(Error::new)?;
        std::fs::write(&path, text).map_err(Error::new)?;
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args)
            .arg(&path)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            Error::new(format!(
                "adapter {}: {e}",
                PathBuf::from(&self.program).display()
            ))
        })?;
        let _group = Group(child.id());
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let (status, out, err) = tokio::join!(child.wait(), tail(out), tail(err));
        let status: ExitStatus = status.map_err(Error::new)?;
        // Hooks the adapter's host left running finish recording before its group is killed.
        job.settle(SETTLE).await;
        if status.success() {
            return Ok(());
        }
        Err(Error::new(format!(
            "adapter exited with {status}\n--- its stdout (end) ---\n{out}\n--- its stderr (end) ---\n{err}"
        )))
    }
}
