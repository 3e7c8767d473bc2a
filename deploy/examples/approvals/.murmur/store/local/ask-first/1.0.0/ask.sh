#!/bin/sh
# The call ({"event", "tool", "input", "task", "trust"}) arrives on stdin. "ask" puts the task in
# TASK_STATE_INPUT_REQUIRED with the question until its sender approves or denies.
if grep -q '"tool":"session-status"'; then
  echo '{"decision": "ask", "question": "May clerk read its session status?", "reason": "the sender keeps status reads to themselves"}'
else
  echo '{"decision": "allow"}'
fi
