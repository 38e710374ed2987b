// A PreToolUse guard for `bash`, in JavaScript: denies a command with `rm -rf`, lets the rest
// through. Built into a component of tower-agent's `hook` world by jco (QuickJS backend, WASI
// stubbed out: the component imports nothing) through `.ci/wasm-guests`.

export function describe() {
  return JSON.stringify({ events: ["PreToolUse"], matcher: "bash", stateless: true });
}

export function handle(input) {
  const command = JSON.parse(input).tool_input?.command ?? "";
  if (command.includes("rm -rf")) {
    return JSON.stringify({
      hookSpecificOutput: {
        hookEventName: "PreToolUse",
        permissionDecision: "deny",
        permissionDecisionReason: "rm -rf is not allowed (javascript guard)",
      },
    });
  }
  if (command.includes("sudo")) {
    throw "sudo is not allowed (javascript guard)";
  }
  return "";
}
