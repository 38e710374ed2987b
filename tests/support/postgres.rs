//! A real, throwaway PostgreSQL server for the tests, one per test binary, a database per test.
//!
//! [`database`] starts the server on first use: it finds `initdb` and `pg_ctl` (the directory
//! in `TOWER_AGENT_PG_BIN`, else on `PATH`, else the newest of `/usr/lib/postgresql/*/bin`,
//! `/usr/pgsql-*/bin`, `/usr/local/pgsql/bin`); when there are none it runs the project's
//! `.ci/install-postgres` once (the script takes a lock, so parallel test binaries install
//! once) and fails the test with the script's output if that does not help — it never skips.
//!
//! The server lives in a fresh directory `$TMPDIR/tower-agent-pg-*` (data, log, and the unix
//! socket: `listen_addresses = ''`, so no TCP port is taken and parallel test binaries never
//! collide), with trust authentication, `fsync = off` (test data). PostgreSQL refuses to run
//! as root: as root, `initdb` and the server run as the `postgres` user (else `nobody`) through
//! `setpriv`, and the directory is given to that user. That user needs nothing of the
//! checkout or the build (which may be in root's private home, mode 700): the binaries are the
//! system's (or in `TOWER_AGENT_PG_BIN`, which that user must reach), and every command runs
//! from the server's directory.
//!
//! # Nothing is left behind
//!
//! A watchdog shell started with the server holds the read end of a pipe whose write end only
//! this test process holds (close-on-exec: children of the tests do not inherit it). When the
//! test process ends in any way — all tests done, a panic, `kill -9` — the pipe closes, and the
//! watchdog stops the server (`pg_ctl stop -m immediate`) and removes the directory. The
//! watchdog runs in its own process group, so a Ctrl-C on the test run does not kill it before
//! it cleans up. Should the watchdog itself be killed, the next test binary that starts a
//! server removes directories whose owner (the pid in their `owner` file) is no longer alive,
//! stopping their server first.
#![allow(dead_code, unreachable_pub)]

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{ChildStdin, Command, Stdio},
    sync::{
        Mutex, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
};

/// Where a directory of the server starts.
const PREFIX: &str = "tower-agent-pg-";

/// The watchdog: starts the server, says `ready`, waits for its stdin to close, stops the
/// server and removes its directory. `$1`: the binaries, `$2`: the directory, the rest: the
/// command prefix that runs a program as the server's user (empty when not root).
const WATCHDOG: &str = r#"
set -u
bin=$1; root=$2; shift 2
if ! "$@" "$bin/initdb" -D "$root/data" -U postgres --auth=trust --no-sync -E UTF8 \
        >"$root/initdb.log" 2>&1; then
    cat "$root/initdb.log" >&2; rm -rf "$root"; exit 1
fi
if ! "$@" "$bin/pg_ctl" -D "$root/data" -l "$root/server.log" -w -t 60 \
        -o "-k $root -p 5432 -c listen_addresses='' -c fsync=off -c max_connections=400" \
        start >/dev/null 2>&1; then
    cat "$root/server.log" >&2; rm -rf "$root"; exit 1
fi
echo ready
cat >/dev/null
"$@" "$bin/pg_ctl" -D "$root/data" -m immediate -w stop >/dev/null 2>&1
rm -rf "$root"
"#;

/// The running server of this test binary.
pub struct Server {
    /// Its directory: the unix socket is here.
    pub root: PathBuf,
    /// Held, never written: closed when this process ends, which stops the server.
    _watchdog: Mutex<ChildStdin>,
}

impl Server {
    /// A connection string for the database `db`.
    pub fn url(&self, db: &str) -> String {
        format!(
            "host={} port=5432 user=postgres dbname={db}",
            self.root.display()
        )
    }
}

/// The server of this test binary, started on first use.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}")))
}

/// A fresh, empty database on the server; its connection string.
pub async fn database() -> String {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let server = tokio::task::spawn_blocking(server).await.unwrap();
    let name = format!(
        "test_{}_{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) =
        tokio_postgres::connect(&server.url("postgres"), tokio_postgres::NoTls)
            .await
            .expect("connect to the test server");
    let connection = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a test database");
    drop(client);
    let _ = connection.await;
    server.url(&name)
}

/// Runs SQL on the database of `url` (for checks and for setting up odd states).
pub async fn sql(url: &str, statements: &str) -> Vec<tokio_postgres::SimpleQueryMessage> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    let connection = tokio::spawn(connection);
    let out = client
        .simple_query(statements)
        .await
        .unwrap_or_else(|e| panic!("{statements}: {e}"));
    drop(client);
    let _ = connection.await;
    out
}

/// The first column of the rows `query` returns, as text.
pub async fn column(url: &str, query: &str) -> Vec<Option<String>> {
    sql(url, query)
        .await
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_owned)),
            _ => None,
        })
        .collect()
}

fn start() -> Result<Server, String> {
    if let Some(dir) = std::env::var_os("TOWER_AGENT_PG_BIN") {
        let dir = PathBuf::from(dir);
        if !usable(&dir) {
            return Err(format!(
                "TOWER_AGENT_PG_BIN is `{}`, which holds no `initdb` and `pg_ctl`",
                dir.display()
            ));
        }
    }
    let bin = match find_binaries() {
        Some(bin) => bin,
        None => {
            install()?;
            find_binaries().ok_or(
                "`.ci/install-postgres` succeeded but `initdb` and `pg_ctl` are still not found \
                 (set TOWER_AGENT_PG_BIN to their directory)",
            )?
        }
    };
    let run_as = run_as()?;
    sweep_orphans(&bin, &run_as);
    let root = tempfile::Builder::new()
        .prefix(PREFIX)
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?
        .keep();
    std::fs::write(root.join("owner"), std::process::id().to_string())
        .map_err(|e| format!("{}: {e}", root.display()))?;
    if let Some((uid, gid)) = run_as.as_ref().map(|r| (r.uid, r.gid)) {
        std::os::unix::fs::chown(&root, Some(uid), Some(gid))
            .map_err(|e| format!("chown {}: {e}", root.display()))?;
    }
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(WATCHDOG)
        .arg("watchdog")
        .arg(&bin)
        .arg(&root)
        .args(run_as.as_ref().map(RunAs::prefix).unwrap_or_default())
        // Not the test's working directory (the checkout), which the server's user may not
        // reach.
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run sh for the server's watchdog: {e}"))?;
    let stdin = child.stdin.take().expect("piped");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .map_err(|e| format!("watchdog: {e}"))?;
    if line.trim() != "ready" {
        let out = child
            .wait_with_output()
            .map_err(|e| format!("watchdog: {e}"))?;
        return Err(format!(
            "the server did not start (binaries in {}):\n{}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // The watchdog is reaped by init once this process is gone; its stderr is not read.
    drop(child);
    Ok(Server {
        root,
        _watchdog: Mutex::new(stdin),
    })
}

/// The directory holding `initdb` and `pg_ctl`.
fn find_binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TOWER_AGENT_PG_BIN") {
        return Some(PathBuf::from(dir)).filter(|d| usable(d));
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(dir) = on_path.into_iter().find(|d| usable(d)) {
        return Some(dir);
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    for (parent, prefix, suffix) in [
        ("/usr/lib/postgresql", "", "bin"),
        ("/usr", "pgsql-", "bin"),
        ("/usr/local", "pgsql", "bin"),
    ] {
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                candidates.push(entry.path().join(suffix));
            }
        }
    }
    // The newest version: compare the numbers in the path.
    candidates.retain(|d| usable(d));
    candidates.sort_by_key(|d| {
        d.to_string_lossy()
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse::<u32>().ok())
            .collect::<Vec<_>>()
    });
    candidates.pop()
}

/// Whether `dir` holds `initdb` and `pg_ctl`.
fn usable(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()
}

/// Runs `.ci/install-postgres` (it takes its own lock).
fn install() -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/install-postgres");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "PostgreSQL's `initdb` and `pg_ctl` are not installed, and {} failed ({}):\n{}\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The unprivileged user the server runs as when this process is root.
struct RunAs {
    uid: u32,
    gid: u32,
}

impl RunAs {
    fn prefix(&self) -> Vec<String> {
        vec![
            "setpriv".into(),
            format!("--reuid={}", self.uid),
            format!("--regid={}", self.gid),
            "--clear-groups".into(),
        ]
    }
}

fn run_as() -> Result<Option<RunAs>, String> {
    let id = |args: &[&str]| -> Option<u32> {
        let out = Command::new("id").args(args).output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id(&["-u"]) != Some(0) {
        return Ok(None);
    }
    for user in ["postgres", "nobody"] {
        if let (Some(uid), Some(gid)) = (id(&["-u", user]), id(&["-g", user])) {
            return Ok(Some(RunAs { uid, gid }));
        }
    }
    Err(
        "running as root, and there is neither a `postgres` nor a `nobody` user to run the \
         server as (PostgreSQL refuses to run as root)"
            .into(),
    )
}

/// Stops the servers and removes the directories of test processes that are gone (only
/// needed when a watchdog was killed too).
fn sweep_orphans(bin: &Path, run_as: &Option<RunAs>) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let root = entry.path();
        let Some(owner) = std::fs::read_to_string(root.join("owner"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        else {
            continue;
        };
        if super::alive(owner) {
            continue;
        }
        let mut argv = run_as.as_ref().map(RunAs::prefix).unwrap_or_default();
        argv.push(bin.join("pg_ctl").to_string_lossy().into_owned());
        argv.extend([
            "-D".into(),
            root.join("data").to_string_lossy().into_owned(),
        ]);
        argv.extend(["-m", "immediate", "-w", "stop"].map(String::from));
        let _ = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&root);
    }
}
