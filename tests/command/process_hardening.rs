//! Process supervision on Linux: what commands and hooks start is killed with them (even
//! through `setsid`), a hook's answer survives a child holding its stdout, and no zombies are
//! left behind. Real processes; each leftover is found by a unique `sleep` argument in
//! `/proc/*/cmdline`.

use crate::support;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use support::command::{Scripts, agent, tool_text};
use tower_agent::{
    agent::AgentBuilder,
    builtins::filesystem::{Backend, ExecOptions, LocalFs},
    command::CommandHooks,
    model::{BoxModelService, ScriptedModel},
};

/// The tests of this file look at every child of the process (zombies): each runs alone in a
/// child process of its own ([`support::alone`]), one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ===== /proc =====

/// Pids of the processes with `arg` as one of their arguments.
fn with_arg(arg: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
        })
        .collect()
}

/// Zombie children of this process.
fn zombie_children() -> Vec<i32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let rest: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap()
                .split_whitespace()
                .collect();
            rest[0] == "Z" && rest[1] == me
        })
        .collect()
}

/// Kills what is left (so that a failing run does not leave sleepers behind) and fails.
fn leftovers(markers: &[&str], when: &str) -> ! {
    panic!(
        "left running {when}: {}",
        leftovers_killed(markers).join(", ")
    );
}

/// Kills the processes with one of `markers`; says which.
fn leftovers_killed(markers: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for m in markers {
        for pid in with_arg(m) {
            found.push(format!("{pid} (sleep {m})"));
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    found
}

/// Asserts that no process with one of `markers` runs, now (`within` zero) or within `within`.
async fn assert_gone(markers: &[&str], within: Duration, when: &str) {
    let deadline = Instant::now() + within;
    loop {
        if markers.iter().all(|m| with_arg(m).is_empty()) {
            return;
        }
        if Instant::now() >= deadline {
            leftovers(markers, when);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts that no zombie child of this process remains (tokio reaps its own children
/// asynchronously: it waits for that, at most [`support::PATIENCE`]).
async fn assert_no_zombies() {
    let deadline = Instant::now() + support::PATIENCE;
    while Instant::now() < deadline {
        if zombie_children().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("zombie children left: {:?}", zombie_children());
}

/// Waits (at most [`support::PATIENCE`]) until `with_arg(marker)` finds a process.
async fn started(marker: &str) {
    let what = format!("`sleep {marker}` started");
    support::eventually(&what, || (!with_arg(marker).is_empty()).then_some(())).await;
}

// ===== hooks =====

/// An agent whose model calls `bash` once; the tool records its calls.
fn calls_bash_once(hooks: CommandHooks) -> (AgentBuilder<BoxModelService>, Arc<Mutex<Vec<Value>>>) {
    // Not recording: recorded requests would keep the run's context, and the hooks, alive.
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .text("done");
    agent(&model, hooks.into_hooks())
}

const DENY: &str = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "not today"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_deny_stands_when_a_setsid_child_holds_stdout() {
    let _serial = SERIAL.lock().await;
    if !support::alone(&support::test_name!(
        "a_one_shot_deny_stands_when_a_setsid_child_holds_stdout"
    )) {
        return;
    }
    let s = Scripts::new();
    for (exit, marker) in [(0, "1000.101"), (2, "1000.102")] {
        let hook = s.script(
            &format!("deny{exit}.sh"),
            &format!("#!/usr/bin/env bash\nsetsid sleep {marker} &\necho '{DENY}'\nexit {exit}\n"),
        );
        // A timeout far past the test's patience: a call that waited for the sleeper to let
        // go of stdout would not end before it.
        let (builder, seen) = calls_bash_once(s.pre_tool_use(&hook, json!({ "timeout": 600 })));
        let resp = tokio::time::timeout(support::PATIENCE, builder.build().run("go")).await;
        let Ok(resp) = resp else {
            let _ = leftovers_killed(&[marker]);
            panic!("hook exiting {exit}: the call waited for the sleeper");
        };
        let resp = resp.unwrap();
        let mut problems = Vec::new();
        if !seen.lock().unwrap().is_empty() {
            problems.push("the tool ran".to_owned());
        }
        let text = tool_text(&resp);
        if !text.starts_with("PreToolUse:bash hook error: ")
            || (exit == 0 && !text.contains("not today"))
        {
            problems.push(format!("the tool call answered {text:?}"));
        }
        if !problems.is_empty() {
            let _ = leftovers_killed(&[marker]);
            panic!("hook exiting {exit}: {}", problems.join("; "));
        }
        // The sleeper is killed (and reaped) before the call returns.
        assert_gone(&[marker], Duration::ZERO, "after the hook call").await;
    }
    assert_no_zombies().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_step_is_bounded_when_a_setsid_child_holds_stdout() {
    let _serial = SERIAL.lock().await;
    if !support::alone(&support::test_name!(
        "a_describe_step_is_bounded_when_a_setsid_child_holds_stdout"
    )) {
        return;
    }
    let s = Scripts::new();
    let dir = s.path("hooks");
    std::fs::create_dir(&dir).unwrap();
    let marker = "1000.103";
    s.script(
        "hooks/10-guard.sh",
        &format!(
            r#"#!/usr/bin/env bash
if [ "$TOWER_AGENT_HOOK_ACTION" = describe ]; then
  setsid sleep {marker} &
  echo '{{"events": ["PreToolUse"], "matcher": "bash"}}'; exit 0
fi
exit 0"#
        ),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let project = s.dir.path().to_path_buf();
    std::thread::spawn(move || {
        let built = CommandHooks::builder()
            .hooks_dir(&dir)
            .project_dir(&project)
            .build();
        let _ = tx.send(built.map(|h| {
            h.commands(tower_agent::command::HookEvent::PreToolUse)
                .len()
        }));
    });
    // Its describe step has a 10 s timeout, the sleeper 1,000 s: a build() that waited for
    // the sleeper to let go of stdout would not end.
    let built = match rx.recv_timeout(support::PATIENCE) {
        Ok(built) => built,
        Err(_) => leftovers(&[marker], "while build() hung"),
    };
    assert_eq!(built.unwrap(), 1);
    assert_gone(&[marker], Duration::ZERO, "after build()").await;
    assert_no_zombies().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_kills_what_a_one_shot_hook_started_with_setsid() {
    let _serial = SERIAL.lock().await;
    if !support::alone(&support::test_name!(
        "a_dropped_run_kills_what_a_one_shot_hook_started_with_setsid"
    )) {
        return;
    }
    let s = Scripts::new();
    let markers = ["1000.104", "1000.105", "1000.106"];
    let hook = s.script(
        "slow.sh",
        &format!(
            "#!/usr/bin/env bash\nsetsid -f sleep {}\nsetsid sh -c 'sleep {}' &\n\
             env -i setsid -f sleep {}\nsleep 30\n",
            markers[0], markers[1], markers[2]
        ),
    );
    let (builder, seen) = calls_bash_once(s.pre_tool_use(&hook, json!({ "timeout": 60 })));
    let agent = builder.build();
    let run = tokio::spawn(async move { agent.run("go").await });
    for m in markers {
        started(m).await;
    }
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert_gone(&markers, support::PATIENCE, "after the run was dropped").await;
    assert!(seen.lock().unwrap().is_empty());
    assert_no_zombies().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_hook_takes_what_it_started_with_it() {
    let _serial = SERIAL.lock().await;
    if !support::alone(&support::test_name!(
        "a_persistent_hook_takes_what_it_started_with_it"
    )) {
        return;
    }
    let s = Scripts::new();
    let markers = ["1000.107", "1000.108", "1000.109"];
    let hook = s.script(
        "persistent.py",
        &format!(
            r#"#!/usr/bin/env python3
import json, subprocess, sys
subprocess.run(["setsid", "-f", "sleep", "{}"])
subprocess.run(["env", "-i", "setsid", "-f", "sleep", "{}"])
for line in sys.stdin:
    subprocess.run("setsid sh -c 'sleep {}' &", shell=True)
    print(json.dumps({{"id": json.loads(line)["id"]}}), flush=True)
"#,
            markers[0], markers[1], markers[2]
        ),
    );
    let (builder, seen) = calls_bash_once(s.pre_tool_use(&hook, json!({ "persistent": true })));
    let agent = builder.build();
    agent.run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
    for m in markers {
        started(m).await;
    }
    drop(agent);
    assert_gone(&markers, support::PATIENCE, "after the agent was dropped").await;
    assert_no_zombies().await;
}

// ===== execute =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_kills_what_the_command_started_with_setsid() {
    let _serial = SERIAL.lock().await;
    if !support::alone(&support::test_name!(
        "execute_kills_what_the_command_started_with_setsid"
    )) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = LocalFs::new(dir.path());
    let markers = ["1000.110", "1000.111", "1000.112"];
    // The sleepers hold the command's stdout for 1,000 s: an execute that waited for them
    // would not return.
    let out = support::within(
        "execute returning",
        fs.exec(
            &format!(
                "setsid -f sleep {}\nsetsid sh -c 'sleep {}' &\nenv -i setsid -f sleep {}\necho started",
                markers[0], markers[1], markers[2]
            ),
            ExecOptions::default(),
        ),
    )
    .await
    .unwrap();
    assert_gone(&markers, Duration::ZERO, "after execute returned").await;
    assert_eq!(out.output, "started\n");
    assert_eq!(out.exit_code, Some(0));
    assert_no_zombies().await;

    // Dropped while it runs (the run is cancelled).
    let markers = ["1000.113", "1000.114"];
    let command = format!(
        "setsid -f sleep {}\nsetsid sh -c 'sleep {}' &\nsleep 30",
        markers[0], markers[1]
    );
    let call = fs.exec(&command, ExecOptions::default());
    let wait = async {
        for m in markers {
            started(m).await;
        }
    };
    tokio::select! {
        _ = call => panic!("the command ended"),
        () = wait => {}
    }
    assert_gone(&markers, Duration::ZERO, "after execute was dropped").await;

    // Timed out.
    let err = fs
        .exec(
            "setsid -f sleep 1000.115\nsleep 30",
            ExecOptions::default().timeout(Duration::from_millis(500)),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("command timed out"), "{err}");
    assert_gone(&["1000.115"], Duration::ZERO, "after execute timed out").await;
    assert_no_zombies().await;
}

/// Commands spawned while others are swept: a child this process is still spawning holds
/// copies of the other commands' pipes, and must not be taken for one of theirs (killed, or
/// its exit status stolen).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commands_do_not_sweep_each_other() {
    let _serial = SERIAL.lock().await;
    if !support::alone(&support::test_name!(
        "concurrent_commands_do_not_sweep_each_other"
    )) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()));
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let fs = Arc::clone(&fs);
            tokio::spawn(async move {
                for i in 0..25 {
                    let out = fs
                        .exec(&format!("echo {t}.{i}"), ExecOptions::default())
                        .await
                        .unwrap_or_else(|e| panic!("command {t}.{i}: {e}"));
                    assert_eq!(
                        (out.output.as_str(), out.exit_code),
                        (format!("{t}.{i}\n").as_str(), Some(0)),
                        "command {t}.{i}: {out:?}"
                    );
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_no_zombies().await;
}
