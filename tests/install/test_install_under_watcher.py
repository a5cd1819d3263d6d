"""The README's first screen, followed top to bottom: `scripts/install.sh` and a watcher, then
`scripts/install.sh --test` beside it (issue 28). The second install replaces the installed
package under the running watcher; the watcher goes on with the code it loaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stop_process

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"


def _copy_of_the_checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", "build", ".mypy_cache", ".ruff_cache",
        ".pytest_cache"))
    return checkout


def _install(checkout: Path, *options: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "scripts/install.sh", *options], cwd=checkout,
                          capture_output=True, text=True, timeout=800, check=False)
    assert done.returncode == 0, done.stderr
    return done


# Builds a venv twice: its own steps' timeouts bound it, not the suite's 5 minutes.
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_installing_again_beside_a_running_watcher_breaks_nothing_and_says_so(
        tmp_path: Path, server: Any, session: Any, isolated_env: Path) -> None:
    checkout = _copy_of_the_checkout(tmp_path)
    _install(checkout)
    conductor = str(checkout / ".venv" / "bin" / "conductor")
    pane = session.new_window(window_name="agent", attach=False, window_shell=AGENT).active_pane
    env = {**os.environ, "CONDUCTOR_TMUX_SOCKET": server.socket_name}
    watcher = subprocess.Popen([conductor, "pty", "watch", "--interval", "1", "--no-notify"],
                               cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        retry_until(lambda: "watching tmux server" in _log(isolated_env), STARTS_WITHIN_S)

        again = _install(checkout, "--test")

        assert f"a watcher of this checkout runs (pid {watcher.pid})" in again.stdout
        queued = subprocess.run([conductor, "pty", "send", "agent", "--queue", "say delivered"],
                                cwd=checkout, env=env, capture_output=True, text=True,
                                timeout=60, check=False)
        assert queued.returncode == 0, queued.stderr
        retry_until(lambda: any(line.strip() == "● delivered" for line in pane.capture_pane()),
                    STARTS_WITHIN_S, interval=0.3)
        assert watcher.poll() is None
        assert "ImportError" not in _log(isolated_env)
        assert "Traceback" not in _log(isolated_env)
    finally:
        stop_process(watcher, seconds=10)


def _log(workers: Path) -> str:
    try:
        return (workers / "watch.log").read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
