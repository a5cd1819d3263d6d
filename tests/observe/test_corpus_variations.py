"""The held-out screens of every variation of users' set-ups the lab captures (issue 22).

A variation is the first part of a screen's file name as ``scripts/lab/variations_drive.py`` and
``scripts/lab/codex_variations.py`` write it (``status-line-3-busy-streaming-200x50.txt``: Qwen
Code with a three-line status-line command). Per CLI and release the figures can hide one
variation the packs cannot read at all (a status line that pushes the footer out of place, a
wrapped spinner line at 80 columns); here each must be ≥ 97 % right on its held-out screens, never
READY on a BUSY or dialog screen, and find every dialog. ``scripts/lab/variation_table.py`` prints
the same figures.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import PurePosixPath

import pytest

from app.base.model import State
from app.observe.assess import NO_END_MARK
from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from scripts.corpus import DANGEROUS, ScreenCase, classify_cases, load_cases
from tests.observe.test_corpus import ENDS_ONLY_BY_HOOK

MIN_ACCURACY = 0.97
_CASE_WORD = re.compile(r"-(?:ready|busy|confirm|error)-")
# the lab's variation names (a screen of an older capture has none of them); "-titled": a capture
# that recorded the pane's title with each screen
VARIATION_SETS = re.compile(r"^heldout-.*-(?:\d[\w.]*)(?:-variations|-titled)?$")


def variation_of(case: ScreenCase) -> str | None:
    name = PurePosixPath(case.path).name
    hit = _CASE_WORD.search("-" + name)
    return name[:hit.start() - 1] if hit and hit.start() > 1 else None


def _groups() -> dict[tuple[str, str, str], list[ScreenCase]]:
    groups: dict[tuple[str, str, str], list[ScreenCase]] = defaultdict(list)
    for case in load_cases():
        variation = variation_of(case)
        if case.held_out and variation and VARIATION_SETS.match(case.set_name):
            groups[(case.cli, case.version or "?", variation)].append(case)
    return dict(groups)


GROUPS = _groups()


@pytest.fixture(scope="module")
def packs() -> dict[str, Pack]:
    return load_packs()


def test_the_variations_are_captured() -> None:
    clis = {cli for cli, _, _ in GROUPS}
    assert {"codex", "gemini-cli", "qwen-code", "opencode", "aider"} <= clis
    variations = {variation for _, _, variation in GROUPS}
    assert {"base-80x24", "wide-250x80", "status-line", "status-line-3", "footer-items",
            "no-git", "plan-mode", "yolo"} <= variations


@pytest.mark.parametrize("key", sorted(GROUPS), ids="/".join)
def test_each_variation_reads_right(key: tuple[str, str, str], packs: dict[str, Pack]) -> None:
    results = classify_cases(packs, GROUPS[key])
    if key[:2] in ENDS_ONLY_BY_HOOK:  # READY once the hook reports the turn's end
        waits_for_hook = {rule.id for rule in packs["codex"].rules if rule.reason == NO_END_MARK}
        results = [r for r in results
                   if not (r.case.state is State.READY and r.rule in waits_for_hook)]
    wrong = [f"{r.case.id}: truth {r.case.state.value}, said {r.predicted.value} ({r.rule})"
             for r in results if not r.right]
    false_ready = [r for r in results if r.predicted is State.READY and r.case.state in DANGEROUS]
    assert not false_ready, wrong
    dialogs = [r for r in results if r.case.state is State.NEEDS_CONFIRMATION]
    assert all(r.predicted is State.NEEDS_CONFIRMATION for r in dialogs), wrong
    assert sum(r.right for r in results) >= MIN_ACCURACY * len(results), wrong
