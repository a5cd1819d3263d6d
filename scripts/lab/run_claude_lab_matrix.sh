#!/usr/bin/env bash
# The Claude Code variation matrix of issue 22, one release at a time:
#
#   scripts/lab/run_claude_lab_matrix.sh CLAUDE_BIN OUT_DIR [PORT] [BATCH]
#
# BATCH 1: status lines and task lists (what users' screens have most); 2: plan / accept-edits /
# vim modes and the other sizes; all (default): both. Each line is one Claude Code session
# (claude_variants_lab.py RUN SIZE CASES); screens land in OUT_DIR, ready for
# import_capture.py OUT_DIR claude-code VERSION.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="$1"; OUT="$2"; PORT="${3:-18131}"; BATCH="${4:-all}"
one() {  # run size cases
  python3 "$HERE/claude_variants_lab.py" "$BIN" "$OUT" --run "$1" --size "$2" --cases "$3" --port "$PORT"
}
if [ "$BATCH" = 1 ] || [ "$BATCH" = all ]; then
  one sl2c 200x50 core,tasks,language,prose,ask,restart
  one sl3 80x24 core,tasks,prose
  one sl1 250x80 core,tasks,restart
  one sl3 213x245 core,tasks,restart  # tall: an old dialog above the new banner stays in view
fi
if [ "$BATCH" = 2 ] || [ "$BATCH" = all ]; then
  one accept 120x40 core,modes,tasks
  one vim 100x30 core,draft,tasks
  one plain 213x60 core,tasks,modes,language
  one plain 80x24 core,prose,ask,language
fi
