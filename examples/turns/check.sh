#!/bin/sh
# The independent check `loopx run --validate` runs after each turn: the project's tests at the
# committed head; exit zero passes. It must leave the tree as it found it: a file it left
# behind (a build directory, an untracked lock file) binds its evidence to a `+dirty` revision
# that meets no criterion, and `loopx run` names such files when it stops.
set -eu
sh tests/output.sh
