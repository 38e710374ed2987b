#!/usr/bin/env bash
# PostToolUse (write_file|edit_file): adds context next to the tool's result.
path=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["tool_input"].get("path", "?"))')
cat <<JSON
{"hookSpecificOutput": {"hookEventName": "PostToolUse",
  "additionalContext": "You changed $path: run the formatter and the tests before you finish."}}
JSON
