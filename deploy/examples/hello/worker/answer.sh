#!/bin/sh
# The task text arrives on stdin; what this prints is the answer; a non-zero exit fails the task.
read -r line || true
case "$line" in
  '')
    echo "worker got an empty task" >&2
    exit 3 ;;
  *[!0-9\ +]*)
    echo "worker got: $line" ;;
  *[0-9]' + '[0-9]*)
    a=${line%% + *}; b=${line##* + }
    echo "$((a + b))" ;;
  *)
    echo "worker got: $line" ;;
esac
