#!/usr/bin/env node
// The adapter of Claude Code itself: plays a hook-vectors job through the real `claude`
// program, headless. The vectors are recorded through it; it is also the worked example of an
// adapter (the contract: hook-vectors' crate docs, and tower-agent's guide page "Checking a hook
// host against Claude Code").
//
//   node claude-code.mjs JOB.json        (the program: $CLAUDE_CODE, else `claude` on PATH)
//
// One `claude -p --input-format stream-json --output-format stream-json` process per run of
// steps: a `prompt` step is a user message, a `set_model` step the SDK's `set_model` control
// request, a `compact` step the `/compact [instructions]` command as a user message, each
// written once the previous one is answered (a `result`, a `control_response`);
// a `resume` step starts the next process with `--resume <session id>`. The environment is the
// job's alone: HOME its home, ANTHROPIC_BASE_URL its model server, no telemetry, no update.
// Exit 0 once every process has ended (Claude Code runs SessionEnd hooks before it exits);
// 1 if a process ended before a step was answered.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
const program = process.env.CLAUDE_CODE || "claude";
const scenario = job.scenario;

// The steps split into processes: a `resume` step begins the next one.
function processes(steps) {
  const out = [];
  for (const step of steps) {
    if (out.length === 0 || "resume" in step) out.push([]);
    out[out.length - 1].push(step);
  }
  return out;
}

// One process playing `steps`, resuming `session` if given; its session id.
async function play(steps, session) {
  const args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json",
    "--verbose", "--model", scenario.model, "--allowedTools", scenario.allowed_tools.join(",")];
  if (job.plugin) args.push("--plugin-dir", job.plugin);
  if (session) args.push("--resume", session);
  else if (scenario.init) args.push("--init");
  else if (scenario.maintenance) args.push("--maintenance");
  const child = spawn(program, args, {
    cwd: job.cwd,
    stdio: ["pipe", "pipe", "inherit"],
    env: {
      PATH: process.env.PATH,
      HOME: job.home,
      ANTHROPIC_BASE_URL: job.model_server,
      ANTHROPIC_API_KEY: job.api_key,
      DISABLE_TELEMETRY: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
    },
  });
  const exited = new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  let id = session;
  for (const [i, step] of steps.entries()) {
    let line, done;
    if ("set_model" in step) {
      line = { type: "control_request", request_id: `r${i}`,
        request: { subtype: "set_model", model: step.set_model } };
      done = (v) => v.type === "control_response";
    } else {
      const text = "compact" in step
        ? `/compact ${step.compact}`.trimEnd()
        : step.prompt ?? step.resume;
      line = { type: "user", message: { role: "user", content: text } };
      done = (v) => v.type === "result";
    }
    child.stdin.write(JSON.stringify(line) + "\n");
    for (;;) {
      const { value, done: ended } = await lines.next();
      if (ended) throw new Error(`claude ended before step ${i} was answered`);
      let v;
      try { v = JSON.parse(value); } catch { continue; }
      if (typeof v.session_id === "string") id = v.session_id;
      if (done(v)) break;
    }
  }
  await quiet(job.hooks_log);
  child.stdin.end();
  for (;;) {
    const { done } = await lines.next();
    if (done) break;
  }
  // Every step was answered: the session was played. Claude Code exits 1 after a turn that
  // ended in an API error (StopFailure's scenarios): that is what was played, not a failure.
  const { code, signal } = await exited;
  if (code !== 0) console.error(`claude exited with ${code ?? signal} after its last step`);
  return id;
}

// Claude Code, headless, kills the hooks still running when its input ends (a StopFailure
// hook, started as the turn fails, may not have run yet): the session stays open until the
// hooks' log has been quiet for 300 ms — nothing new, nothing half-recorded — or 5 s passed.
async function quiet(log) {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const state = () => {
    const names = readdirSync(log);
    const busy = names.some((n) => n.endsWith(".in") && !names.includes(n.slice(0, -3) + ".meta"));
    return { count: names.length, busy };
  };
  let last = state(), calm = 0;
  for (let waited = 0; waited < 5000 && calm < 3; waited += 100) {
    await sleep(100);
    const now = state();
    calm = !now.busy && now.count === last.count ? calm + 1 : 0;
    last = now;
  }
}

let session;
for (const steps of processes(scenario.steps)) {
  session = await play(steps, session);
}
