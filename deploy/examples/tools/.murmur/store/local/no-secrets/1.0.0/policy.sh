#!/bin/sh
# The example policy hook: the call ({"event", "tool", "input", "task", "trust"}) arrives on stdin; the
# answer is {"decision": "allow" | "deny", "reason": "…"} on stdout.
if grep -q secret; then
  echo '{"decision": "deny", "reason": "this formation does not handle secrets"}'
else
  echo '{"decision": "allow"}'
fi
