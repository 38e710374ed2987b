//! Child-process supervision shared by the filesystem's `execute` and the command hooks:
//! [`ProcessTree`] finds and kills everything a command started.
//!
//! ```
//! # #[cfg(target_os = "linux")] {
//! use std::{io::{BufRead, BufReader}, process::{Command, Stdio}};
//! use tower_agent_os::process::ProcessTree;
//!
//! // A command that leaves a process behind in a session of its own, then exits.
//! let mut cmd = Command::new("sh");
//! cmd.args(["-c", "setsid sleep 1000 > /dev/null 2>&1 & echo $!"]).stdout(Stdio::piped());
//! let mut tree = ProcessTree::prepare(&mut cmd);
//! let mut child = cmd.spawn()?;
//! let stdout = child.stdout.take().unwrap();
//! tree.started(Some(child.id()), &[&stdout]);
//! let mut line = String::new();
//! BufReader::new(stdout).read_line(&mut line)?;
//! let left_behind: u32 = line.trim().parse()?;
//! child.wait()?;
//!
//! // The command is gone, what it left is not; the sweep finds it (its scope variable)
//! // and kills it.
//! let alive = |pid: u32| {
//!     std::fs::read_to_string(format!("/proc/{pid}/stat"))
//!         .is_ok_and(|stat| !stat.rsplit(") ").next().unwrap_or("").starts_with('Z'))
//! };
//! assert!(alive(left_behind));
//! tree.kill();
//! assert!(!alive(left_behind));
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What "no orphan processes" covers
//!
//! Every supervised command (an `execute` call, a one-shot hook run, a hooks-directory
//! `describe` step, a persistent hook process) is started in a new process group, with
//! `TOWER_AGENT_SCOPE=<id unique to this command>` in its environment. When the command's call
//! ends (it exited, timed out or its future was dropped) — or, for a persistent hook, when its
//! process is stopped — its tree is swept: every process found to belong to it is killed
//! (`SIGKILL`).
//!
//! **On Linux**, on the first supervised spawn this process makes itself a *child subreaper*
//! (`PR_SET_CHILD_SUBREAPER`): a process a command orphans (`setsid -f`, `nohup … &`, a double
//! fork) is then re-parented to this process instead of `init`, so it stays among this process's
//! descendants. A process belongs to a command's tree when it is, by `/proc`:
//!
//! - the command itself, or a descendant of a process that belongs to it;
//! - in its process group, or in a process group or session led by a process that belongs to it;
//! - a descendant of this process carrying the command's `TOWER_AGENT_SCOPE` value in its
//!   environment (`/proc/<pid>/environ`): `setsid sh -c '…' &` and `setsid -f sleep 1000`;
//! - a descendant of this process holding the command's end of one of its stdio pipes
//!   (`/proc/<pid>/fd` and `fdinfo`): this also finds `env -i setsid -f sleep 1000`, which clears the
//!   environment, as long as it keeps an inherited stdin, stdout or stderr.
//!
//! The sweep repeats (a process may fork while it is being killed) until nothing of the tree is
//! alive, at most [`MAX_ROUNDS`] rounds of one `/proc` scan each. The orphans this process
//! adopted and then killed are reaped (`waitpid` on their pid only): no zombies accumulate. A pid
//! this process spawned itself (the command, or any child the application spawned) is never
//! waited for here — tokio or its owner reaps it. Process identity is the pid *and* its start
//! time, re-checked right before each signal, so a reused pid is not killed.
//!
//! A scan reads only this process's descendants (the `children` list of each of its threads,
//! then of each descendant, and one `stat` per descendant): everything a command starts stays
//! among them while this process is a subreaper. A sweep after a hook that left nothing behind
//! costs about 40 µs here (a full scan of `/proc` cost about 750 µs with 74 processes on the
//! machine); see `BENCHMARKS.md`.
//!
//! Caps: at most [`MAX_ROUNDS`] (50) scans per sweep, 2 ms apart; at most 1 MiB of a
//! process's environment is read when looking for the scope id. A child this process is
//! spawning (still running this process's executable) is never taken for a pipe holder.
//!
//! Not covered, by design: a process that drops every mark — clears or overwrites its
//! environment, leaves the process group and session, and closes or redirects every inherited
//! pipe (`env -i setsid -f cmd </dev/null >/dev/null 2>&1`) — is not attributed to the command
//! once its parent has exited; while it is orphaned it is a child of this process, and if it
//! exits before this process does it stays a zombie until this process exits. Being a
//! subreaper also means that processes *the application* starts and orphans (daemons spawned
//! through a double fork) are re-parented to this process rather than `init`; they are not
//! touched by the sweep. Setting the subreaper attribute can fail (it does not in practice); the
//! sweep then scans every process instead of this process's descendants, and orphans are reaped
//! by `init`.
//!
//! **On other Unix systems** only the command's process group is killed: a process that leaves
//! it (`setsid`) is not tracked. **Elsewhere** the command itself is killed (tokio's
//! `kill_on_drop`).

/// The variable holding a supervised command's unique id (inherited by what it starts).
pub const SCOPE_ENV: &str = "TOWER_AGENT_SCOPE";

/// The most `/proc` scans one sweep makes before giving up on processes that will not die
/// (each round waits 2 ms, so a sweep takes at most about 0.1 s plus its scans).
pub const MAX_ROUNDS: u32 = 50;

/// Something whose file descriptor a tree may hold (a child's stdio pipe).
#[cfg(unix)]
pub trait Pipe: std::os::fd::AsFd {}
#[cfg(unix)]
impl<T: std::os::fd::AsFd> Pipe for T {}
/// Something whose file descriptor a tree may hold (a child's stdio pipe).
#[cfg(not(unix))]
pub trait Pipe {}
#[cfg(not(unix))]
impl<T> Pipe for T {}

/// The processes of one supervised command: killed (all of them, see the
/// [module docs](self)) when asked or dropped.
pub struct ProcessTree {
    cookie: String,
    /// The command's pid (also its process group id).
    leader: Option<u32>,
    #[cfg(target_os = "linux")]
    linux: linux::Tree,
    done: bool,
}

impl std::fmt::Debug for ProcessTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessTree")
            .field("scope", &self.cookie)
            .field("leader", &self.leader)
            .finish_non_exhaustive()
    }
}

impl ProcessTree {
    /// Prepares `cmd` to be supervised: a new process group and a unique
    /// [`TOWER_AGENT_SCOPE`](SCOPE_ENV). On Linux, makes this process a child subreaper (once).
    pub fn prepare(cmd: &mut std::process::Command) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let cookie = format!(
            "{}-{}-{nanos:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        cmd.env(SCOPE_ENV, &cookie);
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(cmd, 0);
        #[cfg(target_os = "linux")]
        linux::subreaper();
        ProcessTree {
            cookie,
            leader: None,
            #[cfg(target_os = "linux")]
            linux: linux::Tree::default(),
            done: false,
        }
    }

    /// Records the spawned command (`pid`, `None` if it is gone already) and the pipes it was
    /// given (their other ends, held by this process).
    pub fn started(&mut self, pid: Option<u32>, pipes: &[&dyn Pipe]) {
        self.leader = pid;
        #[cfg(target_os = "linux")]
        self.linux.started(pid, pipes);
        #[cfg(not(target_os = "linux"))]
        let _ = pipes;
    }

    /// Kills the command and everything it started (`SIGKILL`), once.
    pub fn kill(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        #[cfg(target_os = "linux")]
        self.linux.sweep(&self.cookie);
        #[cfg(all(unix, not(target_os = "linux")))]
        if let Some(pgid) = self.leader.and_then(|p| i32::try_from(p).ok()) {
            use nix::{sys::signal, unistd::Pid};
            // ESRCH (the group is gone already) is fine.
            let _ = signal::killpg(Pid::from_raw(pgid), signal::Signal::SIGKILL);
        }
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        self.kill();
        #[cfg(target_os = "linux")]
        self.linux.forget();
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::{
        collections::{HashMap, HashSet},
        ffi::OsString,
        io::Read,
        os::fd::AsRawFd,
        sync::{Mutex, OnceLock},
        time::Duration,
    };

    use nix::{
        sys::{
            signal::{self, Signal},
            wait::{WaitPidFlag, WaitStatus, waitpid},
        },
        unistd::Pid,
    };

    use super::{MAX_ROUNDS, SCOPE_ENV};

    /// The most bytes of a process's environment read when looking for the scope id.
    const MAX_ENVIRON: u64 = 1 << 20;

    /// Whether this process is a child subreaper (set on first use).
    pub(super) fn subreaper() -> bool {
        static ON: OnceLock<bool> = OnceLock::new();
        *ON.get_or_init(|| match nix::sys::prctl::set_child_subreaper(true) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("cannot become a child subreaper ({e}); orphans go to init");
                false
            }
        })
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pids spawned by a live tree (tokio or std owns them: never waited for here).
    static LEADERS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
    /// Adopted orphans that were killed but had not died yet when their sweep ended:
    /// (pid, start time), reaped by a later sweep.
    static REAP_LATER: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

    /// One line of `/proc/<pid>/stat`.
    #[derive(Debug, Clone, Copy)]
    struct Stat {
        pid: i32,
        state: u8,
        ppid: i32,
        pgrp: i32,
        sid: i32,
        start: u64,
    }

    impl Stat {
        fn dead(&self) -> bool {
            matches!(self.state, b'Z' | b'X' | b'x')
        }
    }

    fn stat(pid: i32) -> Option<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (in parentheses) may hold anything: parse after its last `)`.
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(Stat {
            pid,
            state: *fields.first()?.as_bytes().first()?,
            ppid: fields.get(1)?.parse().ok()?,
            pgrp: fields.get(2)?.parse().ok()?,
            sid: fields.get(3)?.parse().ok()?,
            start: fields.get(19)?.parse().ok()?,
        })
    }

    /// The processes a sweep looks at: this process's descendants when it is a subreaper
    /// (everything a command starts stays among them), every process otherwise.
    fn scan(host: i32, adopting: bool) -> Vec<Stat> {
        if adopting {
            return descendants(host);
        }
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(stat)
            .collect()
    }

    /// The descendants of `host`, found through the `children` list of every thread of every
    /// process from `host` down: a few reads per descendant and per thread of this process,
    /// instead of one per process of the system.
    ///
    /// A process whose parent dies while the lists are read moves to `host`'s list (this
    /// process is a subreaper): it may be in neither list as each was read. So `host`'s lists
    /// are read again after the walk, and any newcomer's subtree walked, until a reading of
    /// them brings nothing new (a parent that exits before its zombie shows has moved its
    /// children already, and every `stat` read here comes after its own list was read).
    fn descendants(host: i32) -> Vec<Stat> {
        let mut found: Vec<Stat> = Vec::new();
        let mut seen: HashSet<i32> = HashSet::new();
        let mut buf = Vec::with_capacity(4096);
        for _ in 0..MAX_ROUNDS {
            let before = found.len();
            let mut queue = vec![host];
            while let Some(parent) = queue.pop() {
                for pid in children(parent, &mut buf) {
                    if seen.insert(pid)
                        && let Some(s) = stat(pid)
                    {
                        found.push(s);
                        queue.push(pid);
                    }
                }
            }
            if found.len() == before {
                break;
            }
        }
        found
    }

    /// The children of `pid` (of each of its threads).
    fn children(pid: i32, buf: &mut Vec<u8>) -> Vec<i32> {
        let mut pids = Vec::new();
        let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return pids;
        };
        for thread in threads.filter_map(Result::ok) {
            let mut path = thread.path();
            path.push("children");
            buf.clear();
            // One read: the list is made in one go (it may be inconsistent across reads).
            let Ok(mut file) = std::fs::File::open(&path) else {
                continue;
            };
            if file.read_to_end(buf).is_err() {
                continue;
            }
            pids.extend(
                std::str::from_utf8(buf)
                    .unwrap_or("")
                    .split_ascii_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
        pids
    }

    fn has_cookie(pid: i32, cookie: &str) -> bool {
        let Ok(file) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let mut env = Vec::new();
        if file.take(MAX_ENVIRON).read_to_end(&mut env).is_err() {
            return false;
        }
        let want = format!("{SCOPE_ENV}={cookie}");
        env.split(|&b| b == 0).any(|var| var == want.as_bytes())
    }

    /// The access mode (`O_ACCMODE` bits) of a process's file descriptor.
    fn access_mode(pid: &str, fd: &str) -> Option<u32> {
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
        Some(u32::from_str_radix(flags.trim(), 8).ok()? & 0o3)
    }

    /// Whether `pid` holds the command's end of one of `pipes`, looked at twice.
    ///
    /// A child this process is spawning holds copies of every descriptor of this process until
    /// it execs (they are close-on-exec), including the command's ends of the pipes of a
    /// command spawned at the same time: a process still running this process's executable
    /// is not counted, and the second look makes it very unlikely that an `exec` closing them
    /// right then is mistaken for a holder.
    fn holds_pipe(pid: i32, pipes: &[Pipe]) -> bool {
        if pipes.is_empty() {
            return false;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if exe.is_none() || exe == std::fs::read_link("/proc/self/exe").ok() {
            return false;
        }
        holds_pipe_now(pid, pipes) && holds_pipe_now(pid, pipes)
    }

    fn holds_pipe_now(pid: i32, pipes: &[Pipe]) -> bool {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        let pid = pid.to_string();
        fds.filter_map(Result::ok).any(|fd| {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                return false;
            };
            pipes.iter().any(|p| {
                p.target == target.as_os_str()
                    && fd
                        .file_name()
                        .to_str()
                        .and_then(|fd| access_mode(&pid, fd))
                        .is_some_and(|mode| mode != p.our_mode)
            })
        })
    }

    /// A pipe given to the command.
    #[derive(Debug)]
    struct Pipe {
        /// Its `/proc/self/fd` target (`pipe:[inode]`), the same for both ends.
        target: OsString,
        /// The access mode of the end this process holds.
        our_mode: u32,
    }

    /// Sends `SIGKILL` to `p` if the pid still names the same process (and is not the
    /// command of another live tree).
    fn kill(p: &Stat, leader: Option<i32>) {
        if (Some(p.pid) == leader || !lock(&LEADERS).contains(&p.pid))
            && stat(p.pid).is_some_and(|now| now.start == p.start)
        {
            let _ = signal::kill(Pid::from_raw(p.pid), Signal::SIGKILL);
        }
    }

    /// Reaps `pid`, a child of this process that this process did not spawn. `true`: done.
    fn reap(pid: i32) -> bool {
        if lock(&LEADERS).contains(&pid) {
            return true;
        }
        !matches!(
            waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        )
    }

    /// What a tree knows of its processes.
    #[derive(Debug, Default)]
    pub(super) struct Tree {
        leader: Option<i32>,
        /// Every process found to belong to the tree: pid → start time.
        known: HashMap<i32, u64>,
        /// The pipes given to the command.
        pipes: Vec<Pipe>,
    }

    impl Tree {
        pub(super) fn started(&mut self, pid: Option<u32>, pipes: &[&dyn super::Pipe]) {
            self.leader = pid.and_then(|p| i32::try_from(p).ok());
            if let Some(pid) = self.leader {
                lock(&LEADERS).push(pid);
                if let Some(s) = stat(pid) {
                    self.known.insert(pid, s.start);
                }
            }
            for pipe in pipes {
                let fd = pipe.as_fd().as_raw_fd();
                if let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{fd}"))
                    && target.to_string_lossy().starts_with("pipe:")
                    && let Some(our_mode) = access_mode("self", &fd.to_string())
                {
                    self.pipes.push(Pipe {
                        target: target.into_os_string(),
                        our_mode,
                    });
                }
            }
        }

        /// Drops the leader from the never-wait list.
        pub(super) fn forget(&mut self) {
            if let Some(pid) = self.leader.take() {
                let mut leaders = lock(&LEADERS);
                if let Some(i) = leaders.iter().position(|&p| p == pid) {
                    leaders.swap_remove(i);
                }
            }
        }

        /// Finds, kills and (for adopted orphans) reaps every process of the tree.
        pub(super) fn sweep(&mut self, cookie: &str) {
            let host = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
            let adopting = subreaper();
            for round in 0..MAX_ROUNDS {
                let procs = scan(host, adopting);
                reap_later(&procs, host);
                let members = self.members(&procs, host, adopting, cookie);
                let mut pending = false;
                for p in procs.iter().filter(|p| members.contains(&p.pid)) {
                    if !p.dead() {
                        kill(p, self.leader);
                        pending = true;
                    } else if p.ppid == host && Some(p.pid) != self.leader && !reap(p.pid) {
                        pending = true;
                    }
                }
                if !pending {
                    return;
                }
                if round + 1 == MAX_ROUNDS {
                    // Still dying (uninterruptible sleep): reap the adopted ones later.
                    let mut later = lock(&REAP_LATER);
                    for p in procs.iter().filter(|p| members.contains(&p.pid)) {
                        if p.ppid == host && Some(p.pid) != self.leader {
                            later.push((p.pid, p.start));
                        }
                    }
                    tracing::warn!(
                        scope = cookie,
                        "processes of a command survived {MAX_ROUNDS} rounds of SIGKILL"
                    );
                    return;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }

        /// The pids of `procs` that belong to the tree (recorded in `known`).
        fn members(
            &mut self,
            procs: &[Stat],
            host: i32,
            adopting: bool,
            cookie: &str,
        ) -> HashSet<i32> {
            let by_pid: HashMap<i32, &Stat> = procs.iter().map(|p| (p.pid, p)).collect();
            let mut members: HashSet<i32> = procs
                .iter()
                .filter(|p| self.known.get(&p.pid) == Some(&p.start))
                .map(|p| p.pid)
                .collect();
            // A group or session id stays reserved while a process uses it: a member's id, or a
            // known member's that is gone, cannot name somebody else's group.
            let owns = |members: &HashSet<i32>, id: i32| {
                members.contains(&id) || (self.known.contains_key(&id) && !by_pid.contains_key(&id))
            };
            let close = |members: &mut HashSet<i32>| loop {
                let before = members.len();
                for p in procs {
                    if p.pid != host
                        && !members.contains(&p.pid)
                        && (members.contains(&p.ppid)
                            || owns(members, p.pgrp)
                            || owns(members, p.sid))
                    {
                        members.insert(p.pid);
                    }
                }
                if members.len() == before {
                    break;
                }
            };
            close(&mut members);
            // Marked processes among this process's descendants (or anywhere, without the
            // subreaper).
            let mut candidates: HashSet<i32> = HashSet::new();
            if adopting {
                candidates.insert(host);
                loop {
                    let before = candidates.len();
                    for p in procs {
                        if candidates.contains(&p.ppid) {
                            candidates.insert(p.pid);
                        }
                    }
                    if candidates.len() == before {
                        break;
                    }
                }
                candidates.remove(&host);
            } else {
                candidates.extend(procs.iter().map(|p| p.pid).filter(|&p| p != host));
            }
            let mut marked = false;
            for pid in candidates {
                if !members.contains(&pid)
                    && by_pid.get(&pid).is_some_and(|p| !p.dead())
                    && (has_cookie(pid, cookie) || holds_pipe(pid, &self.pipes))
                {
                    members.insert(pid);
                    marked = true;
                }
            }
            if marked {
                close(&mut members);
            }
            for &pid in &members {
                if let Some(p) = by_pid.get(&pid) {
                    self.known.insert(pid, p.start);
                }
            }
            members
        }
    }

    /// Reaps the adopted orphans earlier sweeps left dying.
    fn reap_later(procs: &[Stat], host: i32) {
        let mut later = lock(&REAP_LATER);
        if later.is_empty() {
            return;
        }
        later.retain(|&(pid, start)| {
            procs
                .iter()
                .any(|p| p.pid == pid && p.start == start && p.ppid == host)
                && !reap(pid)
        });
    }
}
