"""Every labelled real screen and every recorded turn, through the shipped packs.

The figures come from ``scripts/corpus.py`` (``scripts/corpus_report.py`` prints them for people):
run ``pytest tests/observe/test_corpus.py -rP`` to see the confusion matrix of each CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.base.model import State
from app.observe.assess import NO_END_MARK
from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from scripts.corpus import (
    CLI_PACK,
    CORPUS,
    DANGEROUS,
    ScreenCase,
    ScreenResult,
    Timeline,
    by_cli,
    by_cli_version,
    classify_cases,
    figures,
    load_cases,
    load_timelines,
    pack_for,
    replay,
    verdict_for,
)
from scripts.corpus_report import confusion_table, figures_line

MIN_ACCURACY = 0.97  # per CLI, from the acceptance
CASES = load_cases()
TIMELINES = load_timelines()
# Releases that draw no end mark and still have sets recorded with neither the pane's title nor a
# hook: a finished turn there reads BUSY (reason ``no_end_mark``), safe but never READY from the
# screen alone; Codex's ``notify`` hook or its pane title is what ends it (app/observe/assess.py
# rule 5, run against the real releases in tests/e2e/test_codex_old_releases.py). A screen
# captured with its title, styled copy or hook is scored with them, so the releases whose every
# set recorded them (Codex 0.116.0, Claude Code 2.1.23 and 2.1.80) are not among these.
ENDS_ONLY_BY_HOOK = {("codex", "0.142.5"), ("codex", "0.152.0")}
VERSIONS = sorted({(c.cli, c.version or "?") for c in CASES})


@pytest.fixture(scope="module")
def packs() -> dict[str, Pack]:
    return load_packs()


@pytest.fixture(scope="module")
def classified(packs: dict[str, Pack]) -> list[ScreenResult]:
    """Every case classified once per module: a case's result does not depend on the others, and
    classifying the whole corpus for each release's test was most of this module's time."""
    return classify_cases(packs, CASES)


def test_the_corpus_is_here() -> None:
    clis = {case.cli for case in CASES}
    assert {"claude-code", "codex", "gemini-cli", "aider", "opencode", "plain"} <= clis
    assert {t.cli for t in TIMELINES} >= {"claude-code", "codex", "gemini-cli", "aider",
                                          "opencode"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_screen_is_never_dangerously_wrong(case: ScreenCase, packs: dict[str, Pack]) -> None:
    """READY on a busy or asking pane is the costliest mistake; a missed question the next."""
    text = case.text()
    _, verdict = verdict_for(case, packs, text)
    if case.state in DANGEROUS:
        assert verdict.state is not State.READY, f"{case.note} -> {verdict.rule_id}"
        # nor once the screen is still, with the pane's title as the watcher reads it
        reported = classify_cases(packs, [case])[0]
        assert reported.predicted is not State.READY, f"{case.note} -> {reported.rule}"
    if case.state is State.NEEDS_CONFIRMATION:
        assert verdict.state is State.NEEDS_CONFIRMATION, f"{case.note} -> {verdict.rule_id}"
        assert verdict.summary, "a question needs a summary a person can act on"


@pytest.mark.parametrize("cli", sorted({c.cli for c in CASES}))
def test_accuracy_per_cli(cli: str, classified: list[ScreenResult]) -> None:
    results = [r for r in classified if r.case.cli == cli
               and (r.case.cli, r.case.version) not in ENDS_ONLY_BY_HOOK]
    fig = figures(results)
    held = figures([r for r in results if r.case.held_out])
    print(f"\n== {cli}\n{confusion_table(results)}\n{figures_line('all', fig)}\n"
          f"{figures_line('held out', held)}")
    wrong = [f"{r.case.id}: {r.case.state.short} said {r.predicted.short} ({r.rule})"
             for r in results if not r.right]
    assert fig.accuracy >= MIN_ACCURACY, "\n".join(wrong)


@pytest.mark.parametrize(("cli", "version"), VERSIONS,
                         ids=[f"{cli}-{version}" for cli, version in VERSIONS])
def test_accuracy_per_cli_and_version(cli: str, version: str, packs: dict[str, Pack],
                                      classified: list[ScreenResult]) -> None:
    """Each release on its own: the accuracy bar on the screens no rule was written from, every
    dialog found and no READY on a busy or asking screen on all of them."""
    results = by_cli_version(classified)[(cli, version)]
    held = [r for r in results if r.case.held_out]
    fig, held_fig = figures(results), figures(held)
    print(f"\n{figures_line('all', fig)}\n{figures_line('held out', held_fig)}")
    assert fig.ready_on_busy == fig.ready_on_confirm == 0
    assert fig.confirm_found == fig.confirm_total
    assert held, "a third of every capture is held out"
    if (cli, version) in ENDS_ONLY_BY_HOOK:
        waits_for_hook = {rule.id for rule in packs[CLI_PACK.get(cli, cli)].rules
                          if rule.reason == NO_END_MARK}
        ended = [r for r in held if r.case.state is State.READY and r.rule in waits_for_hook]
        assert ended, "these releases draw no end mark: some finished turn must wait for the hook"
        held = [r for r in held if r not in ended]  # READY once the hook reports the turn's end
    wrong = [f"{r.case.id}: {r.case.state.short} said {r.predicted.short} ({r.rule})"
             for r in held if not r.right]
    assert figures(held).accuracy >= MIN_ACCURACY, "\n".join(wrong)


def test_every_cli_has_held_out_screens(classified: list[ScreenResult]) -> None:
    held = by_cli(r for r in classified if r.case.held_out)
    assert set(held) >= {"claude-code", "codex", "gemini-cli", "aider", "opencode"}


@pytest.mark.parametrize("timeline", TIMELINES, ids=[t.id for t in TIMELINES])
def test_timeline_replay(timeline: Timeline, packs: dict[str, Pack]) -> None:
    """One frame per poll through the watcher's own stability logic."""
    first = timeline.frames[0].path.read_text(encoding="utf-8")
    result = replay(pack_for(timeline.cli, packs, first), timeline)
    print(f"\n{timeline.id}: lags {list(result.lags)} (stable_polls {result.stable_polls})")
    assert result.ready_while_busy == (), "READY reported while the agent was busy or asking"
    assert result.missed_ready == (), "a finished turn was never reported READY"
    assert result.lags, "the timeline has no end of turn to measure"
    assert max(result.lags) <= result.stable_polls


SWEEP_0116 = CORPUS / "codex-0.116.0-sweep" / "codex"


def _one_screen_set(corpus: Path, screen: Path, state: str, hook: str | None) -> None:
    folder = corpus / "codex-0.116.0-x" / "codex"
    folder.mkdir(parents=True)
    (folder / screen.name).write_text(screen.read_text(encoding="utf-8"), encoding="utf-8")
    root = folder.parent
    (root / "labels.tsv").write_text(f"path\tcli\tstate\tsize\tnote\ncodex/{screen.name}\tcodex"
                                     f"\t{state}\t80x24\tx\n", encoding="utf-8")
    if hook is not None:
        (root / "hooks.tsv").write_text(f"path\tevent\tsince_send\ncodex/{screen.name}\t{hook}"
                                        "\t2.1\n", encoding="utf-8")


@pytest.mark.parametrize(("hook", "reads", "by"), [
    ("agent-turn-complete", State.READY, "+hook"),  # Codex's notify ended the turn
    ("", State.BUSY, ""),  # recorded, but no hook fired since the prompt: a paused reply
    (None, State.BUSY, ""),  # the set recorded no hooks: the screen alone
])
def test_a_screen_is_scored_with_the_hook_that_fired_before_it(
        tmp_path: Path, packs: dict[str, Pack], hook: str | None, reads: State, by: str) -> None:
    """Codex 0.116.0 draws no end mark: the finished turn's screen is a paused reply's text, and
    the watcher ends it with the notify hook (assess rule 5); the corpus scores it so."""
    finished = SWEEP_0116 / "sweep-status-80x24-ready-after-tool-80x24.txt"
    _one_screen_set(tmp_path, finished, "READY", hook)
    (case,) = load_cases(tmp_path)
    assert case.hook == hook
    (result,) = classify_cases(packs, [case])
    assert result.predicted is reads
    assert (result.rule or "").endswith(by)


def test_a_hook_does_not_end_a_turn_the_screen_shows_working(tmp_path: Path,
                                                             packs: dict[str, Pack]) -> None:
    """The screen vetoes a turn end (assess rule 1): a `Working` line stays BUSY."""
    working = SWEEP_0116 / "sweep-120x40-busy-tool-running-120x40.txt"
    _one_screen_set(tmp_path, working, "BUSY", "agent-turn-complete")
    (result,) = classify_cases(packs, load_cases(tmp_path))
    assert result.predicted is State.BUSY
