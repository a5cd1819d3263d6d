#!/bin/sh
# For tmux's status-right in a checkout:  set -g status-right '#(/path/to/scripts/tmux-status-right.sh)'
# Uses this checkout's venv; prints one line and always exits 0 so the status line stays clean.
# Options go through to `status --short`, e.g. --width 60 (at most 60 columns).
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/.venv/bin/conductor" pty status --short --colour "$@" 2>/dev/null || echo "[conductor: not installed]"
