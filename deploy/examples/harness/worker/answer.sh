#!/bin/sh
# The harness example's worker: the coder's harness asks it for arithmetic such as "2 + 40", which expr
# computes. The task text arrives on stdin; what this prints is the answer; a non-zero exit fails the task.
set -f # the task's words are expr's arguments, never file names
read -r line || true
# shellcheck disable=SC2086 # one argument per word of the task, as expr wants them
out=$(expr $line 2>/dev/null)
if [ $? -gt 1 ] || [ -z "$out" ]; then
  echo "worker cannot compute \"$line\": send arithmetic such as 2 + 40" >&2
  exit 3
fi
echo "$out"
