"""design/release_sweep.md: its table is what ``scripts/release_sweep.py`` makes from the corpus
now, so a pack change or a new capture that moves a figure fails here until the page is rewritten
(``python -m scripts.release_sweep``); and the sweep's own sets meet the issue's bar."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from app.base.model import State
from app.observe.pack_loading import load_packs
from scripts.corpus import ScreenCase, classify_cases, load_cases
from scripts.release_sweep import (
    BAR_END,
    BAR_START,
    END,
    PAGE,
    START,
    SWEEP_SUFFIX,
    bar_table,
    meets_the_bar,
    render,
    table,
)

SWEPT = [c for c in load_cases() if c.set_name.endswith(SWEEP_SUFFIX)]


def test_the_page_is_current() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert render(page, load_packs()) == page, "stale: run python -m scripts.release_sweep"


def test_the_table_has_one_row_per_release_of_each_set(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for name, version in (("x-1.2.0-sweep", "1.2.0"), ("heldout-x-1.2.0-sweep", "1.2.0"),
                          ("x-1.10.0-sweep", "1.10.0")):
        folder = corpus / name / "claude-code"
        folder.mkdir(parents=True)
        (folder / "idle.txt").write_text("─" * 40 + "\n❯ \n" + "─" * 40 + "\n  ? for shortcuts\n",
                                         encoding="utf-8")
        (corpus / name / "labels.tsv").write_text(
            "path\tcli\tstate\tsize\tnote\nclaude-code/idle.txt\tclaude-code\tREADY\t40x4\tidle\n",
            encoding="utf-8")
        (corpus / name / "versions.tsv").write_text(f"cli\tversion\nclaude-code\t{version}\n",
                                                    encoding="utf-8")
    (corpus / "x-1.3.0").mkdir()  # an older capture, not the sweep's
    (corpus / "x-1.2.0-sweep" / "versions.tsv").rename(corpus / "x-1.3.0" / "versions.tsv")
    (corpus / "x-1.2.0-sweep" / "labels.tsv").rename(corpus / "x-1.3.0" / "labels.tsv")
    (corpus / "x-1.2.0-sweep" / "claude-code").rename(corpus / "x-1.3.0" / "claude-code")
    (corpus / "x-1.3.0" / "versions.tsv").write_text("cli\tversion\nclaude-code\t1.3.0\n",
                                                    encoding="utf-8")
    results = classify_cases(load_packs(), load_cases(corpus))
    rows = table(results)
    # releases in numeric order, the held-out set counted in its release's row
    assert [r.split(" | ")[1:5] for r in rows[2:]] == [["1.2.0", "1", "1", "1"],
                                                       ["1.3.0", "1", "0", "1"],
                                                       ["1.10.0", "1", "1", "1"]]
    # the bar's table has the sweep's screens only
    bar = bar_table(results)
    assert [r.split(" | ")[1:3] for r in bar[2:]] == [["1.2.0", "1"], ["1.10.0", "1"]]
    page = f"head\n{BAR_START}\nold\n{BAR_END}\nmiddle\n{START}\nold\n{END}\ntail\n"
    rendered = render(page, load_packs(), corpus).splitlines()
    assert rendered[2:4] == bar[:2] and rendered[-7:-5] == rows[:2]


def test_a_page_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match=r"sweep-(bar|table)"):
        render("no table here\n", load_packs())


@pytest.mark.skipif(not SWEPT, reason="no sweep sets imported")
@pytest.mark.parametrize("version", sorted({c.version for c in SWEPT}))
def test_swept_release_meets_the_bar(version: str) -> None:
    """Held-out third of each swept release: >= 97 % right; on every swept screen, no READY on
    a busy, background or dialog screen and every question found (``meets_the_bar``)."""
    cases: list[ScreenCase] = [c for c in SWEPT if c.version == version]
    results = classify_cases(load_packs(), cases)
    wrong = [f"{r.case.id}: {r.case.state.short} said {r.predicted.short} ({r.rule})"
             for r in results if not r.right]
    assert meets_the_bar(results), "\n".join(wrong)
    assert any(r.case.state is State.BUSY for r in results)


def _lab_module(name: str) -> ModuleType:
    """The lab's script loaded from its file: the lab puts its own folder on the path for the
    scripts it imports by file name, so the test adds nothing to it."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "lab" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lab_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sweep_takes_every_tenth_release_and_the_newest() -> None:
    sweep = _lab_module("sweep")
    versions = [f"2.1.{n}" for n in range(25)] + ["2.1.3-beta", "2.0.9"]
    assert sweep.every_tenth(versions, "2.1.0") == ["2.1.0", "2.1.10", "2.1.20", "2.1.24"]
    assert sweep.every_tenth(versions, "2.1.5") == ["2.1.5", "2.1.15", "2.1.24"]


def test_every_session_kind_of_the_claude_driver_is_a_kind() -> None:
    driver = _lab_module("sweep_claude_code")
    in_sessions = {kind for _, kinds in driver.SESSIONS for kind in kinds}
    assert in_sessions | {"first_run"} == set(driver.KINDS)
    assert all(callable(driver.KINDS[kind]) for kind in in_sessions)


def test_the_aider_driver_takes_the_newest_and_three_earlier_minors() -> None:
    driver = _lab_module("sweep_aider")
    versions = ["0.86.2", "0.86.1", "0.85.5", "0.85.0", "0.84.0", "0.83.2", "0.82.3", "0.81.3",
                "0.80.4", "0.79.2"]
    assert driver.releases(versions) == ["0.81.3", "0.83.2", "0.85.5", "0.86.2"]
    in_sessions = {kind for _, _, kinds in driver.SESSIONS for kind in kinds}
    assert in_sessions | {"first_run"} == set(driver.KINDS)


def test_aider_screens_are_told_by_their_last_line() -> None:
    driver = _lab_module("sweep_aider")
    idle = "aider v0.86.2\n\ndiff> \n\n"
    assert driver.at_prompt(idle) and not driver.asking(idle)
    assert driver.at_prompt("banner\ndiff> fix it\n", "fix it")
    asked = "ls\nRun shell command? (Y)es/(N)o/(D)on't ask again [Yes]: \n"
    assert driver.asking(asked) and not driver.at_prompt(asked)
