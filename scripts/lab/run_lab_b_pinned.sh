#!/bin/bash
# Lab B (../shared/lab) against CLIs installed beforehand, so that older releases can be captured:
#   scripts/lab/run_lab_b_pinned.sh GROUP NPM_PREFIX_OR_VENV SCREENS_DIR [PORT]
# GROUP is gemini | opencode | aider | qwen; NPM_PREFIX_OR_VENV is an `npm install --prefix` folder
# (gemini, opencode) or a venv with aider-chat (aider). LAB_B_DIR points at the lab's scripts
# (default: this folder, copies of ../shared/lab plus Qwen Code). Uses its own tmux socket (labB-pinned).
set -euo pipefail
GROUP="$1"; INSTALL="$(cd "$2" && pwd)"; SCREENS="$3"; PORT="${4:-18251}"
LAB="${LAB_B_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
SCR="$(mktemp -d -t labBp.XXXXXX)"
mkdir -p "$SCR/logs" "$SCREENS"
case "$GROUP" in aider) ln -s "$INSTALL" "$SCR/venv";; *) ln -s "$INSTALL" "$SCR/npm";; esac
PIDS=()
descendants() {  # pid...: every process below them (TUIs such as opencode outlive their pane)
  local p c
  for p in "$@"; do
    for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do echo "$c"; descendants "$c"; done
  done
}
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  local kids
  kids=$(descendants $(tmux -L "$LABB_SOCKET" list-panes -a -F '#{pane_pid}' 2>/dev/null))
  tmux -L "$LABB_SOCKET" kill-server 2>/dev/null || true
  for p in $kids; do kill "$p" 2>/dev/null || true; done
  [ "${LABB_KEEP:-0}" = 1 ] || rm -rf "$SCR"
}
export LABB_SOCKET="${LABB_SOCKET:-labB-pinned-$GROUP}" LABB_SCREENS="$SCREENS"
trap cleanup EXIT
python3 "$LAB/fake_openai_gemini_server.py" --port "$PORT" --logdir "$SCR/logs/server-$PORT" \
  > "$SCR/logs/server.out" 2>&1 &
PIDS+=($!)
sleep 0.5
# LAB_DRIVER=variations_drive.py runs users' set-ups instead (VARIATIONS="a b": some of them)
python3 "$LAB/${LAB_DRIVER:-labb_drive.py}" --scratch "$SCR" --port "$PORT" "$GROUP" ${VARIATIONS:-} 2>&1 | tee "$SCR/logs/drive.log"
case "$GROUP" in gemini) d=gemini-cli;; *) d="$GROUP";; esac
cp "$SCR/logs/server-$PORT/events.jsonl" "$SCREENS/$d/server-events.jsonl" 2>/dev/null || true
