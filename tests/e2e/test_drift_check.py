"""scripts/drift_check.py: what counts as drift, and that every recipe drives a shipped pack.

The full run installs CLIs from the registries and takes minutes per CLI; it is run by hand
(its table is in the issue notes). Here: the verdict logic and the recipes' own screen patterns,
on real corpus screens of the releases the recipes were written for.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from app.base.model import State
from app.observe.pack_loading import load_packs
from scripts.drift_check import (
    CORPUS_NAMES,
    RECIPES,
    Row,
    _alive,
    descendants,
    end_processes,
    format_row,
    main,
)

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def test_every_recipe_has_a_shipped_pack_and_a_corpus_name() -> None:
    packs = load_packs()
    assert set(RECIPES) <= set(packs)
    assert set(CORPUS_NAMES) == set(RECIPES)


@pytest.mark.parametrize(("expected", "said", "false_ready", "missed"), [
    (State.BUSY, State.READY, True, False),
    (State.NEEDS_CONFIRMATION, State.READY, True, True),
    (State.NEEDS_CONFIRMATION, State.UNKNOWN, False, True),
    (State.NEEDS_CONFIRMATION, None, False, False),  # the lab could not produce it: not drift
    (State.ERROR, State.READY, False, False),  # wrong, but not one of the costly mistakes
    (State.READY, State.BUSY, False, False),
])
def test_only_the_costly_mistakes_fail_the_check(expected: State, said: State | None,
                                                 false_ready: bool, missed: bool) -> None:
    row = Row("codex", "9.9.9", "case", expected, said, "rule")
    assert (row.false_ready, row.missed_dialog) == (false_ready, missed)
    line = format_row(row)
    assert ("FALSE READY" in line) == false_ready
    assert ("MISSED DIALOG" in line) == (missed and not false_ready)


# (recipe, corpus screen, which of the recipe's patterns must match)
SCREENS = [
    ("opencode", "shared/opencode/confirm-shell-200x50.txt", "dialog"),
    ("opencode", "shared/opencode/busy-streaming-200x50.txt", "busy"),
    ("opencode", "shared/opencode/ready-after-answer-200x50.txt", "idle"),
    ("gemini", "shared/gemini-cli/confirm-shell-200x50.txt", "dialog"),
    ("gemini", "shared/gemini-cli/busy-streaming-200x50.txt", "busy"),
    ("qwen", "qwen-code-0.24.4/qwen-code/confirm-shell-200x50.txt", "dialog"),
    ("qwen", "qwen-code-0.24.4/qwen-code/busy-tool-running-200x50.txt", "busy"),
    ("aider", "shared/aider/confirm-shell-200x50.txt", "dialog"),
    ("codex", "shared/codex/confirm-shell-command-200x50.txt", "dialog"),
    ("codex", "codex-0.142.5/codex/confirm-update-available-200x50.txt", "startup_dialog"),
]


@pytest.mark.parametrize(("name", "path", "pattern"), SCREENS)
def test_recipe_patterns_find_what_they_wait_for(name: str, path: str, pattern: str) -> None:
    text = (CORPUS / path).read_text(encoding="utf-8")
    assert re.search(getattr(RECIPES[name], pattern), text, re.MULTILINE)


def test_an_unknown_cli_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["nosuchcli"])
    assert stopped.value.code == 2
    assert "unknown CLI nosuchcli" in capsys.readouterr().err


def test_cleanup_ends_a_process_tree_even_when_it_ignores_sigterm() -> None:
    # a shell that ignores SIGTERM (as its sleep children then do), like a TUI outliving its pane
    parent = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        below: set[int] = set()
        while time.monotonic() < deadline and len(below) < 2:
            below = descendants([parent.pid])
            time.sleep(0.05)
        assert len(below) == 2, "the two sleeps never started"
        end_processes({parent.pid, *below}, [])
        parent.wait(10)  # reap our own child; the sleeps are reaped by init
        assert not any(_alive(pid) for pid in below)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(5)


@pytest.mark.parametrize("args", [["--size", "big"], ["--release", "opencode"]])
def test_malformed_options_are_refused(args: list[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
