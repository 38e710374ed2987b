#!/usr/bin/env python3
"""PreToolUse (bash): turns `git push` into a dry run.

updatedInput REPLACES the whole input, so the hook copies it and changes one field.
"""
import json
import sys

data = json.load(sys.stdin)
tool_input = dict(data["tool_input"])
command = tool_input.get("command", "")
if command.startswith("git push") and "--dry-run" not in command:
    tool_input["command"] = command.replace("git push", "git push --dry-run", 1)
    print(json.dumps({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "pushes are dry runs in this project",
            "updatedInput": tool_input,
        }
    }))
