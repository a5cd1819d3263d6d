"""scripts/probe.py --quick end to end: the subset of issue 19's cases that finishes in under a
minute, on its own tmux server, store, daemon and agent panes, holds."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_the_quick_probe_passes_every_case() -> None:
    done = subprocess.run([sys.executable, "-m", "scripts.probe", "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    table = done.stdout.splitlines()
    assert table[0].startswith("case") and "FAIL" not in done.stdout
    assert any(line.startswith("1 dead pane: send ") and line.endswith("ok") for line in table)
    assert re.match(r"\d+ cases, 0 failed, \d+ s$", table[-1]), table[-1]
