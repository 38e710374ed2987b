#!/usr/bin/env node
// The adapter of Codex (OpenAI's Codex CLI): plays a hook-vectors job through the real
// `codex exec`, headless, so Codex is measured the way Claude Code is (the contract:
// hook-vectors' crate docs, and tower-agent's guide page "Checking a hook host against Claude
// Code", section "Codex").
//
//   node codex.mjs JOB.json        (the program: $CODEX, else `codex` on PATH)
//
// $CODEX_ADAPTER_LOG, a directory: each model request is written there as Codex sent it and as
// translated (for debugging the translation).
//
// Hooks: Codex reads Claude Code's hooks format from `$HOME/.codex/hooks.json`; the job's
// settings' `hooks` are written there, each command's `$CLAUDE_PROJECT_DIR` replaced by the
// project's path (the command quotes it: a path without `"`, `$` or a backquote) — Codex does
// not set that variable for its hooks (the vectors show it: their `project_dir` is `-`), and the
// recorder lives in the project. Putting the variable in Codex's environment instead would make
// every hook (and command) see it as if Codex set it: nothing is added, so what a hook sees is
// Codex's own. Hooks run only with `--dangerously-bypass-hook-trust`; commands run unsandboxed
// (`--dangerously-bypass-approvals-and-sandbox`: the scenarios' commands write the project;
// `codex exec` never asks for approval anyway — its approval policy is Never).
//
// The model: Codex speaks OpenAI's Responses API, the job's model server Anthropic's Messages
// API. A proxy here translates each request's input items into Anthropic messages (user text →
// user text, developer text → a message of role `system` — as Claude Code sends what its
// hooks add —, assistant text → assistant text, Codex's call of `exec_command` → a `Bash`
// tool_use with the scenario's input, its output → a tool_result, the output's random chunk id
// and wall time as `<id>` and `<n>`), so the runner's recorded requests stay Anthropic-shaped;
// the answer goes back as Responses output items: text → a `message`, a `Bash` tool_use → a
// function call of `exec_command` (the tool Codex offers a model it does not know, as the
// scenarios' models are), or, when Codex offers its code-mode `exec` instead (a model it
// knows), a `custom_tool_call` of `exec` whose script runs `tools.exec_command` and prints its
// result. Text and Bash calls only: another tool fails the play.
//
// Steps: a `prompt` is one `codex exec`, a `resume` one `codex exec resume <thread id>` (the id
// from the previous run's `--json` events); a `set_model` is not supported (Codex headless has
// no model switch between prompts), nor a `compact` (no compaction between prompts), nor a scenario's plugin (Codex's plugins are another
// format): the adapter exits 3 saying so, before anything runs. Exit 0
// once every process has ended (Codex runs its SessionEnd hooks before it exits; one that exits
// non-zero is reported on stderr: what it did was played); 1 if a tool could not be translated
// or the adapter failed.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";

const job = JSON.parse(readFileSync(process.argv[process.argv.length - 1], "utf8"));
const program = process.env.CODEX || "codex";
const scenario = job.scenario;

/** The first error that makes the play fail: a tool the adapter cannot translate. */
let fatal = null;

/** The Bash calls the proxy gave Codex, by call id: their tool_use as the model sent it. */
const calls = new Map();

// ---- the hooks -------------------------------------------------------------------------

function writeHooks() {
  const settings = JSON.parse(readFileSync(job.settings, "utf8"));
  const hooks = settings.hooks ?? {};
  for (const entries of Object.values(hooks)) {
    for (const entry of entries) {
      for (const handler of entry.hooks ?? []) {
        if (typeof handler.command === "string") {
          handler.command = handler.command.replaceAll("$CLAUDE_PROJECT_DIR", job.project);
        }
      }
    }
  }
  mkdirSync(join(job.home, ".codex"), { recursive: true });
  writeFileSync(join(job.home, ".codex", "hooks.json"), JSON.stringify({ hooks }, null, 2));
}

// ---- Responses request → Anthropic request ---------------------------------------------

/** The text of a message's content parts. */
function partsText(content) {
  if (typeof content === "string") return [content];
  return (content ?? []).filter((p) => typeof p.text === "string").map((p) => p.text);
}

/** The command an `exec` script runs: ours (by call id), or read from its `exec_command`. */
function commandOf(item) {
  const known = calls.get(item.call_id);
  if (known) return known.input;
  const m = /tools\.exec_command\(\{\s*cmd:\s*("(?:[^"\\]|\\.)*")/.exec(item.input ?? "");
  if (!m) throw new Error(`an exec script the adapter did not write: ${item.input}`);
  return { command: JSON.parse(m[1]) };
}

/** A `custom_tool_call_output`'s parts as a tool_result: the command's output, its error. */
function toolResult(item) {
  const parts = partsText(item.output);
  // The first part is exec's own summary ("Script completed\nWall time 0.1 seconds\nOutput:\n"):
  // its time varies by run, so it is left out; anything else of it stays.
  const header = /^Script (\w+)\nWall time [\d.]+ seconds\nOutput:\n?$/;
  let failed = false;
  const kept = [];
  for (const part of parts) {
    const h = header.exec(part);
    if (h) {
      failed = h[1] !== "completed";
      continue;
    }
    kept.push(resultText(part));
  }
  const text = kept.map((k) => k.text).join("\n");
  const isError = failed || kept.some((k) => k.error);
  return { type: "tool_result", tool_use_id: item.call_id, content: text, is_error: isError };
}

/** A `function_call_output` of `exec_command` as a tool_result: its text, the chunk's random
 * id and the time waited as placeholders (`Chunk ID: <id>`, `Wall time: <n> seconds`): they
 * differ by run. (The Responses API has no error flag: never `is_error`.) */
function functionResult(item) {
  const text = (typeof item.output === "string" ? item.output : partsText(item.output).join("\n"))
    .replace(/^Chunk ID: \S+$/m, "Chunk ID: <id>")
    .replace(/^Wall time: [\d.]+ seconds$/m, "Wall time: <n> seconds");
  return { type: "tool_result", tool_use_id: item.call_id, content: text, is_error: false };
}

/** One part a script of ours printed: `exec_command`'s result (its output, an exit code not
 * 0 an error) or the error it threw; any other text as it is. */
function resultText(part) {
  let v;
  try {
    v = JSON.parse(part);
  } catch {
    return { text: part.replace(/Wall time [\d.]+ seconds/g, "Wall time <n> seconds"), error: false };
  }
  if (v && typeof v.thrown === "string") return { text: v.thrown, error: true };
  if (v && typeof v.output === "string") {
    const code = v.exit_code;
    return { text: v.output, error: typeof code === "number" && code !== 0 };
  }
  return { text: part, error: false };
}

/** The Anthropic request of a Responses request. */
function toAnthropic(body) {
  const messages = [];
  const push = (role, block) => {
    const last = messages[messages.length - 1];
    if (last && last.role === role) last.content.push(block);
    else messages.push({ role, content: [block] });
  };
  for (const item of body.input ?? []) {
    if (item.type === "message") {
      // Codex's developer messages (its instructions, and what hooks add) go as messages of
      // role `system`, as Claude Code sends what its hooks add.
      const role = { assistant: "assistant", developer: "system", system: "system" }[item.role] ?? "user";
      for (const text of partsText(item.content)) push(role, { type: "text", text });
    } else if (item.type === "custom_tool_call" && item.name === "exec") {
      const known = calls.get(item.call_id);
      push("assistant", {
        type: "tool_use", id: item.call_id, name: known?.name ?? "Bash", input: commandOf(item),
      });
    } else if (item.type === "function_call" && item.name === "exec_command") {
      const known = calls.get(item.call_id);
      const input = known?.input ?? { command: JSON.parse(item.arguments).cmd };
      push("assistant", { type: "tool_use", id: item.call_id, name: "Bash", input });
    } else if (item.type === "custom_tool_call_output") {
      push("user", toolResult(item));
    } else if (item.type === "function_call_output") {
      push("user", functionResult(item));
    } else if (item.type === "function_call" || item.type === "custom_tool_call") {
      throw new Error(`Codex called ${item.name}, which the adapter does not translate`);
    }
    // Other items (Codex's `additional_tools`, reasoning) are Codex's own: not the model's.
  }
  const system = typeof body.instructions === "string" && body.instructions ? body.instructions : undefined;
  return {
    model: body.model, max_tokens: 32000, stream: false,
    ...(system ? { system } : {}), messages,
  };
}

// ---- Anthropic answer → Responses output items -----------------------------------------

/** The `exec` script that runs `command` and prints `exec_command`'s result (or its error). */
function script(command) {
  return [
    "try {",
    `  const r = await tools.exec_command({cmd: ${JSON.stringify(command)}, yield_time_ms: 30000});`,
    "  text(JSON.stringify({exit_code: r.exit_code, output: r.output}));",
    "} catch (e) {",
    "  text(JSON.stringify({thrown: String(e && e.message || e)}));",
    "}",
  ].join("\n");
}

/** The Responses output items of an Anthropic answer's content blocks: a Bash call goes as
 * the tool Codex offered — `exec_command` (a function: Codex's tools for a model it does not
 * know, as the scenarios' are), else its code-mode `exec` (a script running
 * `tools.exec_command`). */
function toItems(blocks, n, codeMode) {
  return blocks.map((b, j) => {
    if (b.type === "text") {
      return {
        type: "message", id: `msg_${n}_${j}`, role: "assistant", status: "completed",
        content: [{ type: "output_text", text: b.text, annotations: [] }],
      };
    }
    if (b.type === "tool_use" && b.name === "Bash" && typeof b.input?.command === "string") {
      calls.set(b.id, { name: b.name, input: b.input });
      if (codeMode) {
        return {
          type: "custom_tool_call", id: `ctc_${n}_${j}`, call_id: b.id, name: "exec",
          input: script(b.input.command), status: "completed",
        };
      }
      return {
        type: "function_call", id: `fc_${n}_${j}`, call_id: b.id, name: "exec_command",
        arguments: JSON.stringify({ cmd: b.input.command, yield_time_ms: 30000 }), status: "completed",
      };
    }
    throw new Error(`the model called ${b.name ?? b.type}: the Codex adapter translates text and Bash calls only`);
  });
}

/** Whether Codex offered its code-mode `exec` rather than `exec_command`. */
function codeMode(body) {
  return !(body.tools ?? []).some((t) => t.name === "exec_command");
}

/** The items as a Responses event stream. */
function stream(res, items, n) {
  res.writeHead(200, { "content-type": "text/event-stream", connection: "close" });
  const ev = (d) => res.write(`event: ${d.type}\ndata: ${JSON.stringify(d)}\n\n`);
  const id = `resp_${n}`;
  ev({ type: "response.created", response: { id, status: "in_progress", output: [] } });
  items.forEach((item, i) => {
    if (item.type === "message") {
      ev({ type: "response.output_item.added", output_index: i, item: { ...item, content: [], status: "in_progress" } });
      ev({ type: "response.output_text.delta", output_index: i, item_id: item.id, content_index: 0, delta: item.content[0].text });
    } else if (item.type === "custom_tool_call") {
      ev({ type: "response.output_item.added", output_index: i, item: { ...item, input: "" } });
      ev({ type: "response.custom_tool_call_input.delta", output_index: i, item_id: item.id, delta: item.input });
    } else {
      ev({ type: "response.output_item.added", output_index: i, item: { ...item, arguments: "" } });
      ev({ type: "response.function_call_arguments.delta", output_index: i, item_id: item.id, delta: item.arguments });
    }
    ev({ type: "response.output_item.done", output_index: i, item });
  });
  const usage = {
    input_tokens: 10, output_tokens: 5, total_tokens: 15,
    input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 },
  };
  ev({ type: "response.completed", response: { id, status: "completed", output: items, usage } });
  res.end();
}

// ---- the proxy -------------------------------------------------------------------------

let requests = 0;

async function respond(req, res) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  if (req.method !== "POST" || !req.url.startsWith("/v1/responses")) {
    // Codex's other calls (a model list): nothing to offer.
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"data":[],"models":[]}');
    return;
  }
  const n = requests++;
  try {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const anthropic = toAnthropic(body);
    if (process.env.CODEX_ADAPTER_LOG) {
      // For a person debugging the translation: each request as Codex sent it and as sent on.
      const at = join(process.env.CODEX_ADAPTER_LOG, `${process.pid}-${n}`);
      writeFileSync(`${at}.responses.json`, JSON.stringify(body, null, 1));
      writeFileSync(`${at}.anthropic.json`, JSON.stringify(anthropic, null, 1));
    }
    const answer = await fetch(`${job.model_server}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": job.api_key, "anthropic-version": "2023-06-01" },
      body: JSON.stringify(anthropic),
    });
    const text = await answer.text();
    if (!answer.ok) {
      // An API error passes through with its status.
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(text);
      return;
    }
    stream(res, toItems(JSON.parse(text).content ?? [], n, codeMode(body)), n);
  } catch (e) {
    fatal ??= e.message;
    res.writeHead(400, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { type: "invalid_request_error", message: e.message } }));
  }
}

function startProxy() {
  const server = createServer((req, res) => {
    respond(req, res).catch((e) => {
      fatal ??= e.message;
      res.destroy();
    });
  });
  return new Promise((resolve, reject) => {
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

// ---- the steps -------------------------------------------------------------------------

/** One `codex exec` (resuming `thread` if given) with `prompt`; the thread's id. */
async function exec(port, prompt, thread) {
  const provider = `model_providers.hv={name="hook-vectors",base_url="http://127.0.0.1:${port}/v1",`
    + `wire_api="responses",env_key="HOOK_VECTORS_KEY"}`;
  const args = ["exec"];
  if (thread) args.push("resume");
  args.push("--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
    "--dangerously-bypass-approvals-and-sandbox", "-m", scenario.model,
    "-c", "model_provider=hv", "-c", provider);
  if (thread) args.push(thread);
  args.push(prompt);
  const child = spawn(program, args, {
    cwd: job.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH, HOME: job.home, HOOK_VECTORS_KEY: job.api_key },
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => { out += d; });
  child.stderr.on("data", (d) => { err = (err + d).slice(-16384); });
  const { code, signal } = await new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (c, s) => resolve({ code: c, signal: s }));
  });
  let id = thread;
  for (const line of out.split("\n")) {
    try {
      const v = JSON.parse(line);
      if (v.type === "thread.started" && typeof v.thread_id === "string") id = v.thread_id;
    } catch { /* not an event */ }
  }
  if (code !== 0) {
    process.stderr.write(err);
    console.error(`codex exited with ${code ?? signal}`);
  }
  return id;
}

async function main() {
  if (scenario.steps.some((s) => "set_model" in s)) {
    console.error("codex adapter: set_model is not supported: Codex headless (`codex exec`) has no model switch between prompts");
    process.exit(3);
  }
  if (scenario.steps.some((s) => "compact" in s)) {
    console.error("codex adapter: compact is not supported: Codex headless (`codex exec`) has no compaction between prompts");
    process.exit(3);
  }
  if (job.plugin) {
    console.error("codex adapter: a Claude Code plugin (`--plugin-dir`) is not supported: Codex's plugins are another format");
    process.exit(3);
  }
  if (Object.keys(scenario.mcp_servers ?? {}).length > 0) {
    console.error("codex adapter: a scenario's MCP servers (Claude Code's `.mcp.json`) are not supported: Codex's MCP servers are configured in its config.toml");
    process.exit(3);
  }
  writeHooks();
  const server = await startProxy();
  const { port } = server.address();
  let thread;
  for (const step of scenario.steps) {
    if (fatal) break;
    if ("resume" in step && !thread) {
      throw new Error("a resume step, and no thread id from the codex exec before it to resume");
    }
    thread = await exec(port, step.prompt ?? step.resume, "resume" in step ? thread : undefined);
  }
  server.closeAllConnections();
  server.close();
  if (fatal) {
    console.error(`codex adapter: ${fatal}`);
    process.exit(1);
  }
  process.exit(0);
}

main().catch((e) => {
  console.error(`codex adapter: ${e.stack ?? e}`);
  process.exit(1);
});
