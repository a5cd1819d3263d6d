#!/usr/bin/env bash
# Install conductor pty into ./.venv, with tmux if the machine lacks it.
#   scripts/install.sh          the tool
#   scripts/install.sh --mcp    the tool with its MCP extra (`conductor pty mcp`)
#   scripts/install.sh --test   the tool, its test extras (the MCP extra among them), and what the
#                               tests use (dbus, notify-send, npm to fetch the real agent CLIs the
#                               e2e tests run, sshd for the several-hosts tests)
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
with_mcp=0
for arg in "$@"; do
  case "$arg" in
    --test) with_tests=1 ;;
    --mcp) with_mcp=1 ;;
    *) echo "install.sh: unknown option $arg (use --mcp, --test)" >&2; exit 2 ;;
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
