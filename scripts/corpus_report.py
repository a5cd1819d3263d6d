"""Print how the classifier packs do on the labelled screen corpus and its timelines.

    python -m scripts.corpus_report            # all figures
    python -m scripts.corpus_report --errors   # also list every wrong screen
    python -m scripts.corpus_report --versions # only the per-CLI, per-version table
    python -m scripts.corpus_report --variations  # held-out variant captures per variation

The corpus and its scoring are in ``scripts/corpus.py``; the tests assert the same figures.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from scripts.corpus import (
    CLI_PACK,
    STATES,
    DraftFigures,
    DraftResult,
    Figures,
    ScreenCase,
    ScreenResult,
    by_cli,
    by_cli_version,
    classify_cases,
    draft_figures,
    figures,
    frame_drafts,
    load_cases,
    load_draft_cases,
    load_timelines,
    read_drafts,
    replay_all,
)

# --- printing ------------------------------------------------------------------------------------


def confusion_table(results: Sequence[ScreenResult]) -> str:
    counts = Counter((r.case.state, r.predicted) for r in results)
    head = "truth \\ said".ljust(14) + "".join(s.short.rjust(11) for s in STATES)
    rows = [head]
    for truth in STATES:
        if not any(r.case.state is truth for r in results):
            continue
        rows.append(truth.short.ljust(14)
                    + "".join(str(counts[(truth, said)] or ".").rjust(11) for said in STATES))
    return "\n".join(rows)


def figures_line(label: str, fig: Figures) -> str:
    return (f"{label:<20} {fig.right:>3}/{fig.total:<3} {100 * fig.accuracy:6.1f} %   "
            f"READY on BUSY {fig.ready_on_busy}   READY on NEEDS_CONF {fig.ready_on_confirm}   "
            f"NEEDS_CONF found {fig.confirm_found}/{fig.confirm_total}")


def version_table(results: Sequence[ScreenResult]) -> list[str]:
    """One row per CLI and release: every screen, then the held-out ones alone."""
    out = [f"{'cli':<12} {'version':<10} {'all':>9} {'%':>6}  {'held out':>9} {'%':>6}  "
           f"{'READY on BUSY/NC':>16}  {'dialogs found':>13}"]
    for (cli, version), group in by_cli_version(results).items():
        fig = figures(group)
        held = figures([r for r in group if r.case.held_out])
        held_pct = f"{100 * held.accuracy:6.1f}" if held.total else "     -"
        out.append(f"{cli:<12} {version:<10} {fig.right:>4}/{fig.total:<4} "
                   f"{100 * fig.accuracy:6.1f}  {held.right:>4}/{held.total:<4} {held_pct}  "
                   f"{fig.ready_on_busy + fig.ready_on_confirm:>16}  "
                   f"{fig.confirm_found:>6}/{fig.confirm_total:<6}")
    return out


# Captures of one release in several set-ups (scripts/lab/claude_variants_lab.py) are sets named
# `<cli>-<version>-variants`; each screen's file name ends in `-<variation>-<cols>x<rows>.txt`.
VARIANT_SET_SUFFIX = "-variants"


def variation_of(case: ScreenCase) -> str:
    stem = Path(case.path).stem
    parts = stem.rsplit("-", 2)
    return f"{parts[-2]} {parts[-1]}" if len(parts) == 3 else "?"


def variation_table(results: Sequence[ScreenResult]) -> list[str]:
    """One row per release and variation of the variant sets, held-out screens only."""
    grouped: dict[tuple[str, str, str], list[ScreenResult]] = defaultdict(list)
    for result in results:
        case = result.case
        if case.held_out and case.set_name.endswith(VARIANT_SET_SUFFIX):
            grouped[(case.cli, case.version, variation_of(case))].append(result)
    out = [f"{'cli':<12} {'version':<9} {'variation':<16} {'screens':>7} {'right':>6} "
           f"{'%':>6}  {'false READY':>11}  {'dialogs found':>13}"]
    for (cli, version, variation), group in sorted(grouped.items()):
        fig = figures(group)
        out.append(f"{cli:<12} {version:<9} {variation:<16} {fig.total:>7} {fig.right:>6} "
                   f"{100 * fig.accuracy:6.1f}  {fig.ready_on_busy + fig.ready_on_confirm:>11}  "
                   f"{fig.confirm_found:>6}/{fig.confirm_total:<6}")
    return out


def draft_line(label: str, fig: DraftFigures) -> str:
    return (f"{label:<14} screens {fig.screens:>3}   typed {fig.typed:>2}   read right "
            f"{fig.read_right:>2}   missed {fig.missed}   wrong text {fig.wrong_text}   "
            f"false drafts {fig.false_drafts}   no input rule {fig.no_rule}")


def draft_report(packs: Mapping[str, Pack]) -> list[str]:
    results = read_drafts(packs, load_draft_cases())
    grouped: dict[str, list[DraftResult]] = defaultdict(list)
    for result in results:
        grouped[result.case.cli].append(result)
    out = ["== DRAFTS (Pack.draft: text typed in the input box and not sent)"]
    out.extend(draft_line(cli, draft_figures(group)) for cli, group in sorted(grouped.items()))
    out.append(draft_line("total", draft_figures(results)))
    frames = frame_drafts(packs, load_timelines())
    total = sum(len(t.frames) for t in load_timelines())
    out.append(f"timeline frames: {total} read, {len(frames)} with a draft, "
               f"{sum(f.sent_later for f in frames)} of them the prompt the lab was sending")
    out.extend(f"   {r.case.id}: expected {r.case.expected!r}, read {r.got!r} (pack {r.pack})"
               for r in results if not r.right)
    return out


def report(packs: Mapping[str, Pack], show_errors: bool = False,
           show_held_out: bool = False) -> str:
    cases = load_cases()
    results = classify_cases(packs, cases)
    out: list[str] = []
    for cli, group in by_cli(results).items():
        out.append(f"== {cli} (pack: {', '.join(sorted({r.pack for r in group}))})")
        out.append(confusion_table(group))
        out.append("")
    for title, subset in (("ALL SCREENS", results),
                          ("HELD-OUT SCREENS", [r for r in results if r.case.held_out]),
                          ("SEEN SCREENS", [r for r in results if not r.case.held_out])):
        out.append(f"== {title}")
        for cli, group in by_cli(subset).items():
            out.append(figures_line(cli, figures(group)))
        out.append(figures_line("total", figures(subset)))
        out.append("")
    out.append("== PER CLI AND VERSION (versions.tsv of each set; ? = not recorded)")
    out.extend(version_table(results))
    out.append("")
    detected = sum(r.detected_right for r in results)
    out.append(f"== PACK DETECTION from the screen alone: {detected}/{len(results)} right")
    out.extend(f"   {r.case.id}: expected {CLI_PACK.get(r.case.cli, 'shell/generic')}, "
               f"got {r.detected}" for r in results if not r.detected_right)
    out.append("")
    out.append("== TIMELINES (one frame per poll through app.observe.assess.assess)")
    worst = 0
    for rep in replay_all(packs, load_timelines()):
        worst = max([worst, *rep.lags])
        out.append(f"{rep.timeline.id:<36} frames {len(rep.timeline.frames):>3}  "
                   f"stable_polls {rep.stable_polls}  READY while BUSY/NEEDS_CONF "
                   f"{len(rep.ready_while_busy)}  turn-end lags {list(rep.lags)}  "
                   f"missed {len(rep.missed_ready)}  not yet redrawn {len(rep.unseen)}")
    out.append(f"worst READY lag: {worst} frame(s)")
    out.append("")
    out.extend(draft_report(packs))
    if show_errors:
        out.append("")
        out.append("== WRONG SCREENS")
        out.extend(f"{r.case.id}: truth {r.case.state.short}, said {r.predicted.short} "
                   f"(pack {r.pack}, rule {r.rule or '-'})"
                   f"{'  [held out]' if r.case.held_out else ''}"
                   for r in results if not r.right and (show_held_out or not r.case.held_out))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--errors", action="store_true",
                        help="list every wrongly classified screen")
    parser.add_argument("--held-out", action="store_true",
                        help="with --errors, also list wrong held-out screens (spoils them)")
    parser.add_argument("--versions", action="store_true",
                        help="print only the per-CLI, per-version table")
    parser.add_argument("--variations", action="store_true",
                        help="print only the held-out screens of the variant sets, per release "
                             "and variation (status line, mode, size)")
    args = parser.parse_args(argv)
    if args.variations:
        print("\n".join(variation_table(classify_cases(load_packs(), load_cases()))))
        return 0
    if args.versions:
        print("\n".join(version_table(classify_cases(load_packs(), load_cases()))))
        return 0
    print(report(load_packs(), show_errors=args.errors, show_held_out=args.held_out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
