"""The release sweep's table: how the packs do per CLI and release, written into
design/release_sweep.md between two marker lines, from every corpus set that has a
``versions.tsv`` (the sweep's ``<cli>-<version>-sweep`` sets and every older capture alike).

    python -m scripts.release_sweep           # rewrite the table in the page
    python -m scripts.release_sweep --check   # exit 1 when the page's table is stale

tests/observe/test_release_sweep_page.py fails when the page differs from what this writes, so a
pack change or a new capture that moves a figure must come with the page rewritten
(``python -m scripts.drift_check --sweep-page`` does the same).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from scripts.corpus import (
    BY_HOOK,
    BY_PROMPT,
    BY_TITLE,
    CORPUS,
    ROOT,
    Readings,
    ScreenResult,
    classify_cases,
    figures,
    load_cases,
)

PAGE = ROOT / "design" / "release_sweep.md"
START = "<!-- sweep-table:start (python -m scripts.release_sweep writes it) -->"
END = "<!-- sweep-table:end -->"
BAR_START = "<!-- sweep-bar:start (python -m scripts.release_sweep writes it) -->"
BAR_END = "<!-- sweep-bar:end -->"
SWEEP_SUFFIX = "-sweep"  # the sets scripts/lab/sweep.py imports
MIN_HELD_OUT = 0.97  # per CLI and release, issue 31's acceptance


def release_key(version: str) -> tuple[int | str, ...]:
    return tuple(int(p) if p.isdigit() else p for p in version.split("."))


def _pct(right: int, total: int) -> str:
    return f"{100 * right / total:.1f}" if total else "-"


def _false_ready(group: Sequence[ScreenResult]) -> int:
    fig = figures(group)
    return fig.ready_on_busy + fig.ready_on_confirm


def _questions(group: Sequence[ScreenResult]) -> str:
    fig = figures(group)
    return f"{fig.confirm_found}/{fig.confirm_total}" if fig.confirm_total else "-"


def by_release(results: Iterable[ScreenResult]) -> dict[tuple[str, str], list[ScreenResult]]:
    """(cli, release) -> its results, in release order (sets without a release left out)."""
    grouped: dict[tuple[str, str], list[ScreenResult]] = defaultdict(list)
    for result in results:
        if result.case.version and result.case.version != "constructed":
            grouped[(result.case.cli, result.case.version)].append(result)
    return {key: grouped[key] for key in sorted(grouped, key=lambda k: (k[0], release_key(k[1])))}


def swept(result: ScreenResult) -> bool:
    return result.case.set_name.endswith(SWEEP_SUFFIX)


def meets_the_bar(group: Sequence[ScreenResult]) -> bool:
    """Issue 31's bar for one release's swept screens: no READY on a busy, background or dialog
    screen, every question found, and >= 97 % of the held-out third right."""
    fig = figures(group)
    held = figures([r for r in group if r.case.held_out])
    return (fig.ready_on_busy == fig.ready_on_confirm == 0
            and fig.confirm_found == fig.confirm_total
            and held.total > 0 and held.accuracy >= MIN_HELD_OUT)


def bar_table(results: Iterable[ScreenResult]) -> list[str]:
    """The sweep alone, as the issue's acceptance reads it: one row per CLI and release of the
    screens in ``-sweep`` sets."""
    rows = ["| CLI | release | screens | right | false READY | questions found | held out "
            "| held-out right | held-out % | held-out false READY | meets the bar |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for (cli, version), group in by_release(r for r in results if swept(r)).items():
        held = [r for r in group if r.case.held_out]
        fig, held_fig = figures(group), figures(held)
        cells = [cli, version, fig.total, fig.right, _false_ready(group), _questions(group),
                 held_fig.total, held_fig.right, _pct(held_fig.right, held_fig.total),
                 _false_ready(held), "yes" if meets_the_bar(group) else "**no**"]
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return rows


def table(results: Iterable[ScreenResult], alone: Mapping[str, ScreenResult] | None = None,
          untitled: Mapping[str, ScreenResult] | None = None) -> list[str]:
    """One row per CLI and release (sets without a versions.tsv are left out). ``alone``: the
    screens recorded with their pane's title, styled copy, cursor or hook, read again without them;
    ``untitled``: the screens recorded with a title, read again without it (their styled copy
    and cursor kept; both by case id)."""
    alone, untitled = alone or {}, untitled or {}
    rows = ["| CLI | release | screens | of them swept | right | % | right by title "
            "| right by prompt colour | right by hook | false READY | questions found | held out "
            "| held-out right | held-out % | held-out false READY | held-out % with no title "
            "| held-out % on the screen alone |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (cli, version), group in by_release(results).items():
        held = [r for r in group if r.case.held_out]
        fig, held_fig = figures(group), figures(held)
        # right only once the pane's title, the styled capture's prompt colour or a hook was
        # read with the screen (scripts/corpus.py)
        by_signal = [sum(r.right and (r.rule or "").endswith(by) for r in group)
                     for by in (BY_TITLE, BY_PROMPT, BY_HOOK)]
        cells = [cli, version, fig.total, sum(map(swept, group)), fig.right,
                 _pct(fig.right, fig.total), *by_signal, _false_ready(group), _questions(group),
                 held_fig.total, held_fig.right, _pct(held_fig.right, held_fig.total),
                 _false_ready(held)]
        for other in (untitled, alone):
            held_other = [other.get(r.case.id, r) for r in held]
            cells.append(_pct(figures(held_other).right, len(held_other)))
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return rows


def replace_block(page: str, start: str, end: str, rows: Sequence[str]) -> str:
    head, found_start, rest = page.partition(start)
    _, found_end, tail = rest.partition(end)
    if not found_start or not found_end:
        raise ValueError(f"the page has no {start!r} ... {end!r} block")
    return head + start + "\n" + "\n".join(rows) + "\n" + end + tail


def render(page: str, packs: Mapping[str, Pack], corpus: Path = CORPUS) -> str:
    """The page with its tables replaced by the current figures."""
    for start, end in ((BAR_START, BAR_END), (START, END)):
        replace_block(page, start, end, [])  # a page without its blocks fails before the work
    cases = load_cases(corpus)
    readings: Readings = {}  # each screen's text read once, then weighed with fewer signals
    results = classify_cases(packs, cases, readings)
    titled = [case._replace(title=None) for case in cases if case.title is not None]
    untitled = {r.case.id: r for r in classify_cases(packs, titled, readings)}
    seen_more = [case._replace(title=None, styled=False, cursor=None, hook=None)
                 for case in cases if case.title is not None or case.styled
                 or case.cursor is not None or case.hook]
    alone = {r.case.id: r for r in classify_cases(packs, seen_more, readings)}
    page = replace_block(page, BAR_START, BAR_END, bar_table(results))
    return replace_block(page, START, END, table(results, alone, untitled))


def write_page(page: Path = PAGE) -> bool:
    """Rewrite the table; True when the page changed."""
    old = page.read_text(encoding="utf-8")
    new = render(old, load_packs())
    if new != old:
        page.write_text(new, encoding="utf-8")
    return new != old


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the page's table is stale, without writing it")
    args = parser.parse_args(argv)
    if args.check:
        old = PAGE.read_text(encoding="utf-8")
        if render(old, load_packs()) != old:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python -m scripts.release_sweep")
            return 1
        return 0
    print(f"{PAGE.relative_to(ROOT)}: {'rewritten' if write_page() else 'already current'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
