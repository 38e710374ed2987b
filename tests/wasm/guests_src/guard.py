"""A PreToolUse guard for `bash`, in Python: denies a command with `rm -rf`, lets the rest
through. Built into a component of tower-agent's `hook` world by componentize-py
(`.ci/wasm-guests`)."""

import json

import wit_world
from componentize_py_types import Err

DESCRIPTION = {"events": ["PreToolUse"], "matcher": "bash", "stateless": True}


class WitWorld(wit_world.WitWorld):
    def describe(self) -> str:
        return json.dumps(DESCRIPTION)

    def handle(self, input: str) -> str:
        event = json.loads(input)
        command = event.get("tool_input", {}).get("command", "")
        if "rm -rf" in command:
            return json.dumps({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "rm -rf is not allowed (python guard)",
                }
            })
        if "sudo" in command:
            # A blocking error: a command hook's exit 2.
            raise Err("sudo is not allowed (python guard)")
        return ""
