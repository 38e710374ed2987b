#!/usr/bin/env python3
"""A persistent hook: one process answers every event (see `tower_agent::layers::command`).

Each event comes as one JSON line `{"id": n, "input": {...}}` on stdin; the answer is one
JSON line `{"id": n, "exit": 0|2, "output": {...}, "stderr": "..."}` on stdout. This one
keeps state across events (a call counter) and audits every tool call.
"""
import json
import sys

calls = 0
for line in sys.stdin:  # until tower-agent closes stdin
    event = json.loads(line)
    hook_input = event["input"]
    calls += 1
    output = {"hookSpecificOutput": {
        "hookEventName": hook_input["hook_event_name"],
        "additionalContext": f"audit: tool call #{calls} ({hook_input.get('tool_name')})",
    }}
    print(json.dumps({"id": event["id"], "exit": 0, "output": output}), flush=True)
