#!/bin/sh
# The task text arrives on stdin; what this prints is the answer; a non-zero exit fails the task.
read -r line || true
case "$line" in
  '')
    echo "worker got an empty task" >&2
    exit 3 ;;
  'slow '[0-9]*)
    # "slow N" takes N seconds: time to see what a caller gets when worker stops answering
    n=${line#slow }; n=${n%%[!0-9]*}
    sleep "$n"
    echo "worker waited ${n}s" ;;
  'report '*)
    # A file answer: what a task writes under out/artifacts/ in the workdir comes back as artifacts
    # of the task (docs/conversations.md), beside the printed answer.
    mkdir -p out/artifacts
    printf '# Report\n\n%s\n' "${line#report }" > out/artifacts/report.md
    echo "worker wrote report.md" ;;
  *[!0-9\ +]*)
    echo "worker got: $line" ;;
  *[0-9]' + '[0-9]*)
    a=${line%% + *}; b=${line##* + }
    echo "$((a + b))" ;;
  *)
    echo "worker got: $line" ;;
esac
