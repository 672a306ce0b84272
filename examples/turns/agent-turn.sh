#!/bin/sh
# One agent turn, as `loopx run --exec` runs it: in the workspace (a git working tree), with the
# turn in LOOPX_GOAL, LOOPX_TODO, LOOPX_TODO_TITLE, LOOPX_TURN, LOOPX_EPOCH, LOOPX_AGENT and
# LOOPX_DEADLINE. A real host calls its model and tools here; this one makes the change and a
# test for it, commits both as the agent, and prints its turn report as the last line: the
# todo is complete and nothing follows, which is also the intent to close the goal. Without a
# report, exit zero proposes completing the todo with the goal still active, and `loopx next`
# then asks for `loopx goal close`.
set -eu
mkdir -p src tests
printf 'json output for %s\n' "$LOOPX_TODO" > src/output.txt
printf 'grep -q "json output" src/output.txt\n' > tests/output.sh
git add src tests
git -c user.name="$LOOPX_AGENT" -c user.email="$LOOPX_AGENT@loopx.invalid" \
    commit -q -m "$LOOPX_TODO: $LOOPX_TODO_TITLE (turn $LOOPX_TURN)"
echo '{"transition": {"kind": "complete", "continuation": {"kind": "no_follow_up"}}, "summary": "changed the output layer, with its test"}'
