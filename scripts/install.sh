#!/usr/bin/env bash
# Install conductor pty into ./.venv, with tmux if the machine lacks it.
#   scripts/install.sh          the tool
#   scripts/install.sh --mcp    the tool with its MCP extra (`conductor pty mcp`)
#   scripts/install.sh --test   the tool, its test extras (the MCP extra among them), and what the
#                               tests use (dbus, notify-send, npm to fetch the real agent CLIs the
#                               e2e tests run, sshd for the several-hosts tests, chromium and
#                               chromedriver for the answer page's browser test)
#   scripts/install.sh --restart  also restart the watchers this checkout runs (below)
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
with_mcp=0
restart=0
for arg in "$@"; do
  case "$arg" in
    --test) with_tests=1 ;;
    --mcp) with_mcp=1 ;;
    --restart) restart=1 ;;
    *) echo "install.sh: unknown option $arg (use --mcp, --test, --restart)" >&2; exit 2 ;;
  esac
done

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

need_apt=()
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
if [ "$with_tests" = 1 ]; then
  command -v dbus-daemon >/dev/null 2>&1 || need_apt+=(dbus)
  command -v notify-send >/dev/null 2>&1 || need_apt+=(libnotify-bin)
  command -v npm >/dev/null 2>&1 || need_apt+=(npm)
  # The several-hosts tests start real sshd on loopback.
  [ -x /usr/sbin/sshd ] || command -v sshd >/dev/null 2>&1 || need_apt+=(openssh-server)
  # The answer page (`conductor pty serve`) is tested in a real headless browser.
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  elif command -v brew >/dev/null 2>&1; then
    brew install tmux
  else
    echo "install.sh: please install: ${need_apt[*]}" >&2
    exit 1
  fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "$with_tests" = 1 ]; then
  .venv/bin/python -m pip install -q -e '.[test]'
elif [ "$with_mcp" = 1 ]; then
  .venv/bin/python -m pip install -q '.[mcp]'
else
  .venv/bin/python -m pip install -q .
fi
echo "installed: $(.venv/bin/conductor --version)"

# A watcher started from this checkout's venv keeps running the code it loaded at its start (it
# imports everything then), so installing under it is safe; it runs the new code once restarted.
watchers=()
if command -v pgrep >/dev/null 2>&1; then
  # The checkout's path as a literal in pgrep's regex (a folder may hold '.', '+', '(' ...).
  here=$(printf '%s' "$PWD" | sed 's/[][\.*^$+?(){}|]/\\&/g')
  while read -r pid; do
    [ -n "$pid" ] && [ "$pid" != "$$" ] && watchers+=("$pid")
  done < <(pgrep -f "^$here/\.venv/bin/python[0-9.]* .* ?pty watch( |\$)" || true)
fi
for pid in "${watchers[@]}"; do
  if [ "$restart" = 0 ]; then
    echo "install.sh: a watcher of this checkout runs (pid $pid) with the code it started with;" \
      "scripts/install.sh --restart restarts it"
    continue
  fi
  # Started again as it was: same folder, arguments and environment, detached, logging to
  # watch.log in its store.
  cwd=$(readlink "/proc/$pid/cwd") || continue
  mapfile -d '' argv < "/proc/$pid/cmdline"
  mapfile -d '' environ < "/proc/$pid/environ"
  kill -TERM "$pid" 2>/dev/null || continue
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  (cd "$cwd" && env -i "${environ[@]}" setsid "${argv[@]}" </dev/null >/dev/null 2>&1 &)
  echo "install.sh: restarted the watcher of this checkout (was pid $pid), now in the background"
done
