"""Shared by the answer page's tests: a real dialog in a real tmux pane that the watcher has
stored as asking, and `conductor pty serve` running against it as a person would start it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.adapters.store_read import StoreReader
from app.run.watcher import Watcher
from tests.conftest import REPO
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stop_process

FLIP = f"exec {sys.executable} {REPO / 'tests' / 'support' / 'flip_dialog.py'}"
_URL = re.compile(r"answer page: (http://\S+)")
# An option link on the list page, and the text it shows.
OPTION = re.compile(r'<a class="o (\w+)" href="(/a/[^"]+)">([^<]*)</a>')


@dataclass
class Asking:
    pane: Any
    pid: int
    log: Path

    def keys_read(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def screen(self) -> str:
        return "\n".join(self.pane.capture_pane())


def asking_pane(session: Any, watcher: Watcher, workers: Path, log: Path, *flags: str
                ) -> Asking:
    """A Claude-like permission dialog for ``ls -la`` (tests/support/flip_dialog.py), stored by the
    watcher as NEEDS_CONFIRMATION."""
    pane = session.new_window(window_name="api", attach=False,
                              window_shell=f"{FLIP} {log} {' '.join(flags)}").active_pane
    asking = Asking(pane, int(pane.pane_pid), log)
    retry_until(lambda: "Do you want to proceed?" in asking.screen(), 10)

    def stored() -> bool:
        watcher.tick()
        reader = StoreReader(workers)
        try:
            rows = reader.workers()
        finally:
            reader.close()
        return any(row["pane_id"] == pane.pane_id and row["state"] == "NEEDS_CONFIRMATION"
                   for row in rows)

    retry_until(stored, 10)
    return asking


@contextmanager
def serving(socket_name: str, *args: str) -> Iterator[str]:
    """`conductor pty serve --port 0 ARGS` on the test's tmux server; its page address (with
    the page key), as it printed it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "-L", socket_name, "pty", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = _URL.search(line)
        assert found, f"serve printed {line!r}; stderr: {_rest(proc)}"
        yield found.group(1)
    finally:
        stop_process(proc, seconds=STARTS_WITHIN_S)


def _rest(proc: subprocess.Popen[str]) -> str:
    stop_process(proc)
    return proc.stderr.read() if proc.stderr is not None else ""
