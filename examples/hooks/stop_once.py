#!/usr/bin/env python3
"""Stop: sends the agent back once for a summary, and honours `stop_hook_active`.

Without the `stop_hook_active` check, a Stop hook that always blocks would loop until
the stop cap.
"""
import json
import sys

data = json.load(sys.stdin)
if data.get("stop_hook_active"):
    sys.exit(0)  # already continued once: let it finish
if "Summary:" not in data.get("last_assistant_message", ""):
    print(json.dumps({
        "decision": "block",
        "reason": "Before you finish, write a line starting with `Summary:` that lists what you changed.",
    }))
