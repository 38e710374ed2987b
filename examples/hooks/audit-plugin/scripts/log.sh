#!/bin/sh
# PostToolUse: appends the tool's name to calls.log in the plugin's data directory.
input=$(cat)
name=$(printf '%s' "$input" | python3 -c 'import json, sys; print(json.load(sys.stdin)["tool_name"])')
printf '%s\n' "$name" >> "$CLAUDE_PLUGIN_DATA/calls.log"
