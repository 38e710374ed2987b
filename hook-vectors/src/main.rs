//! `hook-vectors`: checks a hook host against the vectors, through its adapter.
//!
//! ```text
//! hook-vectors run    [--vectors DIR] [--known FILE] [--only NAME]... [--timeout SECS] -- ADAPTER [ARG...]
//! hook-vectors record --program NAME --version VERSION [--vectors DIR] [--only NAME]... -- ADAPTER [ARG...]
//! hook-vectors list   [--vectors DIR]
//! ```
//!
//! `run` plays every vector (or those named by `--only`) through the adapter and prints the
//! report; it exits 0 when every vector played and every difference is in the `--known` file
//! (`{"kept": [...], "open": [...]}`), 1 otherwise, 2 on a usage error. `record` writes what
//! the adapter's host does into the vectors, as the reference (`--program`, `--version`).
//! `--vectors` defaults to the vectors this crate ships; `--timeout` is the time one play may
//! take (default 180 s).
#![cfg(unix)]

use std::{path::PathBuf, process::ExitCode, time::Duration};

use hook_vectors::{
    Adapter, Error, KnownDifferences, PLAY_TIMEOUT, Report, compare, play_within, read_dir,
};
use serde_json::json;

const USAGE: &str = "usage:
  hook-vectors run    [--vectors DIR] [--known FILE] [--only NAME]... [--timeout SECS] -- ADAPTER [ARG...]
  hook-vectors record --program NAME --version VERSION [--vectors DIR] [--only NAME]... -- ADAPTER [ARG...]
  hook-vectors list   [--vectors DIR]";

/// The command line, parsed.
#[derive(Debug, Default)]
struct Args {
    command: String,
    vectors: Option<PathBuf>,
    known: Option<PathBuf>,
    only: Vec<String>,
    program: Option<String>,
    version: Option<String>,
    adapter: Vec<String>,
    timeout: Option<Duration>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        command: args.next().ok_or("no command")?,
        ..Args::default()
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--vectors" => out.vectors = Some(value()?.into()),
            "--known" => out.known = Some(value()?.into()),
            "--only" => out.only.push(value()?),
            "--program" => out.program = Some(value()?),
            "--version" => out.version = Some(value()?),
            "--timeout" => {
                let secs: f64 = value()?.parse().map_err(|e| format!("--timeout: {e}"))?;
                let limit =
                    Duration::try_from_secs_f64(secs).map_err(|e| format!("--timeout: {e}"))?;
                out.timeout = Some(limit);
            }
            "--" => {
                out.adapter = args.by_ref().collect();
                break;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    match out.command.as_str() {
        "list" => {}
        "run" | "record" if out.adapter.is_empty() => return Err("no adapter after --".into()),
        "run" => {}
        "record" if out.program.is_none() || out.version.is_none() => {
            return Err("record needs --program and --version".into());
        }
        "record" => {}
        other => return Err(format!("unknown command {other:?}")),
    }
    Ok(out)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("hook-vectors: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match command(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("hook-vectors: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the command; whether it passed.
async fn command(args: &Args) -> Result<bool, Error> {
    let dir = args
        .vectors
        .clone()
        .unwrap_or_else(hook_vectors::shipped_dir);
    let mut vectors = read_dir(&dir)?;
    if !args.only.is_empty() {
        for name in &args.only {
            if !vectors.iter().any(|(n, _)| n == name) {
                return Err(Error::new(format!(
                    "no vector {name:?} in {}",
                    dir.display()
                )));
            }
        }
        vectors.retain(|(n, _)| args.only.contains(n));
    }
    if args.command == "list" {
        for (name, v) in &vectors {
            println!("{name}: {}", v.scenario.about);
        }
        return Ok(true);
    }
    let (program, rest) = args.adapter.split_first().ok_or(Error::new("no adapter"))?;
    let adapter = Adapter::new(program).args(rest);
    let limit = args.timeout.unwrap_or(PLAY_TIMEOUT);
    if args.command == "record" {
        for (name, mut vector) in vectors {
            let seen = play_within(&adapter, &vector.scenario, limit)
                .await
                .map_err(|e| Error::new(format!("{name}: {e}")))?;
            vector.recorded_from = Some(json!({"program": args.program, "version": args.version}));
            vector.expected = Some(seen);
            vector.write(&dir.join(format!("{name}.json")))?;
            println!("recorded {name}");
        }
        return Ok(true);
    }
    let known = match &args.known {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
            serde_json::from_str::<KnownDifferences>(&text)
                .map_err(|e| Error::new(format!("{}: {e}", path.display())))?
        }
        None => KnownDifferences::default(),
    };
    let mut report = Report::new(known);
    for (name, vector) in &vectors {
        let Some(expected) = &vector.expected else {
            report.fail(name, &"not recorded");
            continue;
        };
        match play_within(&adapter, &vector.scenario, limit).await {
            Ok(seen) => report.add(
                name,
                expected,
                &compare::compare(&vector.scenario, expected, &seen),
            ),
            Err(e) => report.fail(name, &e),
        }
    }
    print!("{report}");
    if args.only.is_empty() {
        for k in report.stale() {
            println!("  known but not seen (its entry can go): {k:?}");
        }
    }
    Ok(report.passed())
}
