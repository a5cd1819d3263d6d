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
    BY_PROMPT,
    BY_TITLE,
    CORPUS,
    ROOT,
    ScreenResult,
    classify_cases,
    figures,
    load_cases,
)

PAGE = ROOT / "design" / "release_sweep.md"
START = "<!-- sweep-table:start (python -m scripts.release_sweep writes it) -->"
END = "<!-- sweep-table:end -->"
SWEEP_SUFFIX = "-sweep"  # the sets scripts/lab/sweep.py imports


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


def table(results: Iterable[ScreenResult], alone: Mapping[str, ScreenResult] | None = None,
          untitled: Mapping[str, ScreenResult] | None = None) -> list[str]:
    """One row per CLI and release (sets without a versions.tsv are left out). ``alone``: the
    screens recorded with their pane's title, styled copy or cursor, read again without them;
    ``untitled``: the screens recorded with a title, read again without it (their styled copy
    and cursor kept; both by case id)."""
    alone, untitled = alone or {}, untitled or {}
    grouped: dict[tuple[str, str], list[ScreenResult]] = defaultdict(list)
    for result in results:
        if result.case.version and result.case.version != "constructed":
            grouped[(result.case.cli, result.case.version)].append(result)
    rows = ["| CLI | release | screens | of them swept | right | % | right by title "
            "| right by prompt colour | false READY | questions found | held out | held-out right "
            "| held-out % | held-out false READY | held-out % with no title "
            "| held-out % on the screen alone |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cli, version in sorted(grouped, key=lambda k: (k[0], release_key(k[1]))):
        group = grouped[(cli, version)]
        held = [r for r in group if r.case.held_out]
        swept = sum(r.case.set_name.endswith(SWEEP_SUFFIX) for r in group)
        fig, held_fig = figures(group), figures(held)
        # right only once the pane's title, or the styled capture's prompt colour, was read
        # with the screen (scripts/corpus.py)
        by_title = sum(r.right and (r.rule or "").endswith(BY_TITLE) for r in group)
        by_colour = sum(r.right and (r.rule or "").endswith(BY_PROMPT) for r in group)
        cells = [cli, version, fig.total, swept, fig.right, _pct(fig.right, fig.total), by_title,
                 by_colour, _false_ready(group), _questions(group), held_fig.total, held_fig.right,
                 _pct(held_fig.right, held_fig.total), _false_ready(held)]
        for other in (untitled, alone):
            held_other = [other.get(r.case.id, r) for r in held]
            cells.append(_pct(figures(held_other).right, len(held_other)))
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return rows


def render(page: str, packs: Mapping[str, Pack], corpus: Path = CORPUS) -> str:
    """The page with its table replaced by the current figures."""
    head, start, rest = page.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"the page has no {START!r} ... {END!r} block")
    cases = load_cases(corpus)
    titled = [case._replace(title=None) for case in cases if case.title is not None]
    untitled = {r.case.id: r for r in classify_cases(packs, titled)}
    seen_more = [case._replace(title=None, styled=False, cursor=None) for case in cases
                 if case.title is not None or case.styled or case.cursor is not None]
    alone = {r.case.id: r for r in classify_cases(packs, seen_more)}
    rows = table(classify_cases(packs, cases), alone, untitled)
    return head + START + "\n" + "\n".join(rows) + "\n" + END + tail


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
