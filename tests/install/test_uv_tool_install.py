"""Installed for daily use, as a new user does it: `uv tool install .` from the checkout puts
`conductor` on PATH; the tmux plugin line in a tmux config then shows the panes' states on a real
client's status line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.tmux_sockets import reap
from tests.support.waiting import retry_until

UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


@pytest.fixture
def tool_bin(tmp_path: Path) -> Path:
    """`conductor` installed the way Python CLI tools are, into a scratch tool folder."""
    if UV is None:
        pytest.skip("uv is not installed (it comes with the test extras: pip install -e .[test])")
    bin_dir = tmp_path / "tool-bin"
    env = {**os.environ, "UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(bin_dir),
           "UV_NO_PROGRESS": "1"}
    done = subprocess.run([UV, "tool", "install", str(REPO)], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "Installed 1 executable: conductor" in done.stderr
    return bin_dir


def run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed command, from an unrelated folder, with only the tool folder on PATH."""
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(["conductor", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=60, check=False)


# Builds a venv: over 5 min (the suite's --timeout) on a loaded two-core machine (6 min
# measured with three suites at once); its own steps' timeouts bound it instead.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_tool_install_puts_a_working_conductor_on_path(tool_bin: Path, tmp_path: Path) -> None:
    version = run(tool_bin, "pty", "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("conductor, version ")
    short = run(tool_bin, "pty", "status", "--short", cwd=tmp_path)
    assert (short.returncode, short.stdout.strip()) == (0, "[conductor: no store]")
    # It is its own installation: the checkout's app/ is not what runs.
    where = subprocess.run([str(tool_bin / "conductor"), "pty", "classify", "--cli", "shell"],
                           input="$ ", capture_output=True, text=True, cwd=tmp_path,
                           timeout=60, check=False)
    assert where.returncode == 0 and "cli=shell" in where.stdout, where.stderr
    assert str(REPO) not in os.path.realpath(tool_bin / "conductor")


# Builds a venv: over 5 min (the suite's --timeout) on a loaded two-core machine (6 min
# measured with three suites at once); its own steps' timeouts bound it instead.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_new_user_installs_adds_the_plugin_line_and_sees_the_states(
        tool_bin: Path, tmp_path: Path, isolated_env: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    conf = home / ".tmux.conf"
    # What the README tells a new user to add (TPM would run the same file).
    conf.write_text("set -g @conductor-start-watcher on\n"
                    "set -g @conductor-status-interval 5\n"
                    f"run-shell '{REPO}/conductor-pty.tmux'\n")
    socket = f"newuser-{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env.update(HOME=str(home), PATH=f"{tool_bin}:/usr/bin:/bin", TERM="xterm-256color")
    outer = f"{socket}-terminal"

    def tmux(*args: str, sock: str = socket) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True,
                              env=env, timeout=30, check=False)

    started = time.monotonic()
    # The user's terminal (an outer tmux pane we can read back) runs `tmux` with that config.
    assert tmux("-f", "/dev/null", "new-session", "-d", "-x", "150", "-y", "10",
                f"tmux -L {socket} -f {conf} new-session -s work", sock=outer).returncode == 0
    try:
        def status_line() -> str:
            return tmux("capture-pane", "-p", sock=outer).stdout.rstrip("\n").split("\n")[-1]

        retry_until(lambda: "[bash: READY]" in status_line() or "[sh: READY]" in
                    status_line(), 90, interval=0.5,
                    message=f"status line: {status_line()!r}")
        seen_after = time.monotonic() - started
        right = tmux("show-option", "-gv", "status-right").stdout
        assert f"'{tool_bin}/conductor' -L '{socket}' pty status --short --colour --width" \
            in right
        styled = tmux("capture-pane", "-p", "-e", sock=outer).stdout.rstrip("\n").split("\n")[-1]
        print(f"\nstatus line {seen_after:.1f} s after starting tmux: {status_line().strip()!r}")
        print("with its colours:", styled.encode("unicode_escape").decode())
        assert "\x1b[44m" in styled  # READY on blue, not green on the green bar
    finally:
        stop = run(tool_bin, "pty", "stop", cwd=tmp_path)
        reap(socket, env)
        reap(outer, env)
    assert stop.returncode == 0, stop.stderr
