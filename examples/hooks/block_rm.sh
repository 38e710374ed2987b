#!/usr/bin/env bash
# PreToolUse (bash): blocks `rm -rf` with exit code 2; the model sees stderr.
input=$(cat)
command=$(printf '%s' "$input" | python3 -c 'import json, sys; print(json.load(sys.stdin)["tool_input"].get("command", ""))')
if [[ "$command" =~ rm[[:space:]]+-[a-zA-Z]*r[a-zA-Z]*f|rm[[:space:]]+-[a-zA-Z]*f[a-zA-Z]*r ]]; then
  echo "Blocked: \`$command\` deletes recursively. Delete the files one by one, or ask the user." >&2
  exit 2
fi
exit 0
