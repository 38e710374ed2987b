#!/usr/bin/env node
// The adapter of Gemini CLI (Google's): plays a hook-vectors job through the real `gemini -p`,
// headless, so Gemini CLI is measured the way Claude Code is (the contract: hook-vectors' crate
// docs, and tower-agent's guide page "Checking a hook host against Claude Code", section
// "Gemini CLI").
//
//   node gemini.mjs JOB.json      (the program: $GEMINI — its bundle `gemini.js`, run with this
//                                  node, or a program — else `gemini` on PATH)
//
// $GEMINI_ADAPTER_LOG, a directory: each model request is written there as Gemini sent it and
// as translated, and each call answered here as Gemini sent it (for debugging the translation),
// and Gemini's output goes to stderr.
//
// Settings: written to the user settings, `$HOME/.gemini/settings.json` (HOME is the job's
// home): the file that takes the API key auth too (`security.auth.selectedType:
// "gemini-api-key"`). The project's `.gemini/settings.json` is not written: the project keeps
// only what the scenario puts there (the workspace is trusted: GEMINI_CLI_TRUST_WORKSPACE=true).
// Usage statistics and telemetry are off (they would call Google).
//
// Hooks: the job's settings are in Claude Code's format; Gemini CLI's are close but not the
// same, and a user porting hooks to it translates them as this does:
//   - events, where Gemini has one: SessionStart → SessionStart, UserPromptSubmit →
//     BeforeAgent, PreToolUse → BeforeTool, PostToolUse → AfterTool, Stop → AfterAgent,
//     SessionEnd → SessionEnd, PreCompact → PreCompress, Notification → Notification. The
//     others (PostToolUseFailure, PermissionRequest, …) have none: their hooks are left out.
//   - matchers of the tool events: the name `Bash` (a whole word of the matcher) becomes
//     `run_shell_command`, Gemini's shell tool (`Bash|Write` → `run_shell_command|Write`);
//     anything else of a matcher (`B.*h`, `as`, `mcp__.*`) is left as written, so what it
//     matches of Gemini's tool names is measured.
//   - `timeout`: Claude Code's seconds → Gemini's milliseconds. Other handler fields (`async`,
//     `if`, `onFailure`, …) are passed as they are.
//   - commands as they are: Gemini CLI sets `$CLAUDE_PROJECT_DIR` for its hooks itself (with
//     `$GEMINI_PROJECT_DIR`, both the directory it runs in: the vectors show it), so nothing is
//     replaced or added. (It also replaces `$CLAUDE_PROJECT_DIR` in the command's text by that
//     directory, shell-quoted when it needs quoting — read from its source: inside the double
//     quotes of the recorder's command, a path needing quotes would break; the plays' need none.)
// The hooks' answers are the scenario's, in Claude Code's format, untouched: what Gemini does
// with them is what the vectors record.
//
// The model: Gemini CLI speaks Google's Gemini API (`GOOGLE_GEMINI_BASE_URL` points it at a
// proxy here), the job's model server Anthropic's Messages API. Gemini is given the scenario's
// model (`-m`), so it routes nothing: its turns are `streamGenerateContent` calls of that model
// and no `generateContent` call was seen in the plays. Should it make one (its routing of a
// prompt without `-m`, its checks of who speaks next or of loops), it is answered here, never
// forwarded, so the requests recorded stay the agent's own turns: a JSON text that keeps the
// request on its model, lets the user speak next and sees no loop. Each
// `streamGenerateContent` is translated into an Anthropic request: `systemInstruction` → the
// system text; user text parts → user text (what hooks add, as Gemini puts it there); model
// text → assistant text; a `functionCall` of `run_shell_command` → a `Bash` tool_use (the
// scenario's input, found by the call's id); a `functionResponse` → a tool_result (its
// `output`, or its `error` as an error; the shell's process group id in it is left to the
// runner's normaliser, which makes it `<pid>` there as in the hooks' inputs). The answer goes back as one streamed chunk: text → a text part, a `Bash` tool_use → a
// `functionCall` of `run_shell_command` with `{command, description}` and the tool_use's id.
// Text and Bash calls only: another tool fails the play. An API error passes through with its
// status, in Gemini's error shape.
//
// Steps: a `prompt` is one `gemini -p PROMPT`, a `resume` one `gemini --resume latest -p
// PROMPT` (the project's latest session, the one before); `--approval-mode yolo` (the scenarios'
// commands run without asking: headless Gemini cannot ask). A `set_model` is not supported
// (Gemini headless has no model switch between prompts), nor a `compact` (no compaction
// between prompts), nor a scenario's plugin (Gemini
// CLI's extensions are another format): the adapter exits 3 saying so, before anything runs.
// Exit 0 once every process has ended (Gemini runs its SessionEnd hooks before it exits; a
// run that exits non-zero is reported on stderr: what it did was played);
// 1 if a tool could not be translated or the adapter failed.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";

const job = JSON.parse(readFileSync(process.argv[process.argv.length - 1], "utf8"));
const program = process.env.GEMINI || "gemini";
const scenario = job.scenario;

/** Gemini CLI's shell tool. */
const SHELL = "run_shell_command";

/** Claude Code's events and Gemini CLI's. */
const EVENTS = {
  SessionStart: "SessionStart",
  UserPromptSubmit: "BeforeAgent",
  PreToolUse: "BeforeTool",
  PostToolUse: "AfterTool",
  Stop: "AfterAgent",
  SessionEnd: "SessionEnd",
  PreCompact: "PreCompress",
  Notification: "Notification",
};

/** The first error that makes the play fail: a tool the adapter cannot translate. */
let fatal = null;

/** The Bash calls the proxy gave Gemini, by call id: their tool_use as the model sent it. */
const calls = new Map();

// ---- the settings ----------------------------------------------------------------------

/** The hooks of Claude Code's settings in Gemini CLI's terms. */
function geminiHooks(hooks) {
  const out = {};
  for (const [event, entries] of Object.entries(hooks ?? {})) {
    const name = EVENTS[event];
    if (!name) continue;
    const tool = name === "BeforeTool" || name === "AfterTool";
    out[name] = entries.map((entry) => {
      const e = { ...entry };
      if (tool && typeof e.matcher === "string") {
        e.matcher = e.matcher.replace(/\bBash\b/g, SHELL);
      }
      e.hooks = (entry.hooks ?? []).map((h) => {
        const handler = { ...h };
        if (typeof handler.timeout === "number") handler.timeout *= 1000;
        return handler;
      });
      return e;
    });
  }
  return out;
}

function writeSettings() {
  const claude = JSON.parse(readFileSync(job.settings, "utf8"));
  const settings = {
    security: { auth: { selectedType: "gemini-api-key" } },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    hooks: geminiHooks(claude.hooks),
  };
  mkdirSync(join(job.home, ".gemini"), { recursive: true });
  writeFileSync(join(job.home, ".gemini", "settings.json"), JSON.stringify(settings, null, 2));
}

// ---- Gemini request → Anthropic request ------------------------------------------------

/** A `functionResponse` as a tool_result: its output, or its error (the shell's process group
 * id in it is the normaliser's to replace, as in the hooks' inputs). */
function toolResult(fr) {
  const r = fr.response ?? {};
  const error = typeof r.error === "string" ? r.error : null;
  const text = error ?? (typeof r.output === "string" ? r.output : JSON.stringify(r));
  return { type: "tool_result", tool_use_id: fr.id ?? fr.name, content: text, is_error: error !== null };
}

/** The Anthropic request of a Gemini `streamGenerateContent` request for `model`. */
function toAnthropic(body, model) {
  const messages = [];
  const push = (role, block) => {
    const last = messages[messages.length - 1];
    if (last && last.role === role) last.content.push(block);
    else messages.push({ role, content: [block] });
  };
  for (const content of body.contents ?? []) {
    const role = content.role === "model" ? "assistant" : "user";
    for (const part of content.parts ?? []) {
      if (part.thought) continue;
      if (typeof part.text === "string") {
        push(role, { type: "text", text: part.text });
      } else if (part.functionCall) {
        const fc = part.functionCall;
        if (fc.name !== SHELL) {
          throw new Error(`Gemini called ${fc.name}, which the adapter does not translate`);
        }
        const known = calls.get(fc.id);
        push("assistant", {
          type: "tool_use", id: fc.id, name: "Bash",
          input: known?.input ?? { command: fc.args?.command, description: fc.args?.description },
        });
      } else if (part.functionResponse) {
        push("user", toolResult(part.functionResponse));
      }
      // Other parts (inline data, Gemini's own) are not the model's to see here.
    }
  }
  const system = (body.systemInstruction?.parts ?? [])
    .filter((p) => typeof p.text === "string").map((p) => p.text).join("\n");
  return {
    model, max_tokens: 32000, stream: false,
    ...(system ? { system } : {}), messages,
  };
}

// ---- Anthropic answer → Gemini parts ---------------------------------------------------

/** The Gemini parts of an Anthropic answer's content blocks. */
function toParts(blocks) {
  return blocks.map((b) => {
    if (b.type === "text") return { text: b.text };
    if (b.type === "tool_use" && b.name === "Bash" && typeof b.input?.command === "string") {
      calls.set(b.id, { name: b.name, input: b.input });
      const args = { command: b.input.command, description: b.input.description ?? "" };
      return { functionCall: { id: b.id, name: SHELL, args } };
    }
    throw new Error(`the model called ${b.name ?? b.type}: the Gemini adapter translates text and Bash calls only`);
  });
}

const USAGE = { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 };

function json(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** The answer of Gemini's own `generateContent` calls (routing, next speaker, loop checks): a
 * JSON text that keeps the request on its model, lets the user speak next, sees no loop. */
function localAnswer() {
  const text = JSON.stringify({
    reasoning: "hook-vectors: answered by the adapter", model_choice: "pro",
    next_speaker: "user", unproductive_state_confidence: 0, unproductive_state_analysis: "",
  });
  return {
    candidates: [{ content: { role: "model", parts: [{ text }] }, finishReason: "STOP", index: 0 }],
    usageMetadata: USAGE,
  };
}

// ---- the proxy -------------------------------------------------------------------------

let requests = 0;
let locals = 0;

async function respond(req, res) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const url = req.url ?? "";
  const m = /\/models\/([^:/?]+):(\w+)/.exec(url);
  if (req.method !== "POST" || !m) {
    json(res, 200, {});
    return;
  }
  const [, model, method] = m;
  if (method === "countTokens") {
    json(res, 200, { totalTokens: 10 });
    return;
  }
  if (method !== "streamGenerateContent") {
    if (process.env.GEMINI_ADAPTER_LOG) {
      const at = join(process.env.GEMINI_ADAPTER_LOG, `${process.pid}-local-${locals++}.gemini.json`);
      writeFileSync(at, Buffer.concat(chunks));
    }
    json(res, 200, localAnswer());
    return;
  }
  const n = requests++;
  try {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const anthropic = toAnthropic(body, scenario.model ?? model);
    if (process.env.GEMINI_ADAPTER_LOG) {
      // For a person debugging the translation: each request as Gemini sent it and as sent on.
      const at = join(process.env.GEMINI_ADAPTER_LOG, `${process.pid}-${n}`);
      writeFileSync(`${at}.gemini.json`, JSON.stringify({ url, body }, null, 1));
      writeFileSync(`${at}.anthropic.json`, JSON.stringify(anthropic, null, 1));
    }
    const answer = await fetch(`${job.model_server}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": job.api_key, "anthropic-version": "2023-06-01" },
      body: JSON.stringify(anthropic),
    });
    const text = await answer.text();
    if (!answer.ok) {
      // An API error passes through with its status, in Gemini's shape.
      let message = text;
      try {
        message = JSON.parse(text).error?.message ?? text;
      } catch { /* not JSON */ }
      json(res, answer.status, { error: { code: answer.status, message, status: "INVALID_ARGUMENT" } });
      return;
    }
    const parts = toParts(JSON.parse(text).content ?? []);
    const chunk = {
      candidates: [{ content: { role: "model", parts }, finishReason: "STOP", index: 0 }],
      usageMetadata: USAGE, modelVersion: model,
    };
    res.writeHead(200, { "content-type": "text/event-stream", connection: "close" });
    res.end(`data: ${JSON.stringify(chunk)}\n\n`);
  } catch (e) {
    fatal ??= e.message;
    json(res, 400, { error: { code: 400, message: e.message, status: "INVALID_ARGUMENT" } });
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

/** One `gemini -p` with `prompt` (resuming the latest session if `resume`). */
async function run(port, prompt, resume) {
  const args = ["--approval-mode", "yolo", "-m", scenario.model];
  if (resume) args.push("--resume", "latest");
  args.push("-p", prompt);
  const [cmd, argv] = program.endsWith(".js") ? [process.execPath, [program, ...args]] : [program, args];
  const child = spawn(cmd, argv, {
    cwd: job.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      HOME: job.home,
      GEMINI_API_KEY: job.api_key,
      GOOGLE_GEMINI_BASE_URL: `http://127.0.0.1:${port}`,
      GEMINI_CLI_TRUST_WORKSPACE: "true",
      // No second node process with a larger heap: the play is small.
      GEMINI_CLI_NO_RELAUNCH: "true",
    },
  });
  let out = "";
  child.stdout.on("data", (d) => { out = (out + d).slice(-16384); });
  child.stderr.on("data", (d) => { out = (out + d).slice(-16384); });
  const { code, signal } = await new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (c, s) => resolve({ code: c, signal: s }));
  });
  if (process.env.GEMINI_ADAPTER_LOG) process.stderr.write(out);
  if (code !== 0) {
    if (!process.env.GEMINI_ADAPTER_LOG) process.stderr.write(out);
    console.error(`gemini exited with ${code ?? signal}`);
  }
}

async function main() {
  if (scenario.steps.some((s) => "set_model" in s)) {
    console.error("gemini adapter: set_model is not supported: Gemini CLI headless (`gemini -p`) has no model switch between prompts");
    process.exit(3);
  }
  if (scenario.steps.some((s) => "compact" in s)) {
    console.error("gemini adapter: compact is not supported: Gemini CLI headless (`gemini -p`) has no compaction between prompts");
    process.exit(3);
  }
  if (job.plugin) {
    console.error("gemini adapter: a Claude Code plugin (`--plugin-dir`) is not supported: Gemini CLI's extensions are another format");
    process.exit(3);
  }
  if (Object.keys(scenario.mcp_servers ?? {}).length > 0) {
    console.error("gemini adapter: a scenario's MCP servers (Claude Code's `.mcp.json`) are not supported: Gemini CLI's MCP servers are configured in its settings");
    process.exit(3);
  }
  writeSettings();
  const server = await startProxy();
  const { port } = server.address();
  for (const step of scenario.steps) {
    if (fatal) break;
    await run(port, step.prompt ?? step.resume, "resume" in step);
  }
  server.closeAllConnections();
  server.close();
  if (fatal) {
    console.error(`gemini adapter: ${fatal}`);
    process.exit(1);
  }
  process.exit(0);
}

main().catch((e) => {
  console.error(`gemini adapter: ${e.stack ?? e}`);
  process.exit(1);
});
