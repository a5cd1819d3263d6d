#!/usr/bin/env python3
"""The corpus figures per CLI, release and lab variation (issue 22): a screen's variation is the
first part of its file name (`footer-items-busy-streaming-200x50.txt` -> `footer-items`), as
variations_drive.py and codex_variations.py name them; older captures count as `base-lab`.

    python -m scripts.lab.variation_table [--held-out-only] [SET_SUBSTRING ...]

Columns: screens, right, false READY (READY on a BUSY or dialog screen), dialogs found / dialogs,
and "hook": finished turns read BUSY by a rule with reason no_end_mark (Codex before 0.16x draws
no end mark; its notify hook ends the turn), wrong from the screen alone but not wrong in use.
"""
import argparse
import re
from collections import defaultdict
from pathlib import Path

from app.base.model import State
from app.observe.pack_loading import load_packs
from scripts import corpus as R

CASE = re.compile(r"-(?:ready|busy|confirm|error)-")


def variation(path):
    name = Path(path).name
    m = CASE.search("-" + name)
    return name[:m.start() - 1] if m and m.start() > 1 else "base-lab"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--held-out-only", action="store_true")
    ap.add_argument("sets", nargs="*")
    a = ap.parse_args()
    cases = [c for c in R.load_cases() if (not a.sets or any(s in c.set_name for s in a.sets))
             and (c.held_out or not a.held_out_only)]
    packs = load_packs()
    no_end = {(name, rule.id) for name, pack in packs.items() for rule in pack.rules
              if rule.reason == "no_end_mark"}
    groups = defaultdict(list)
    for r in R.classify_cases(packs, cases):
        groups[(r.case.cli, r.case.version or "?", variation(r.case.path))].append(r)
    print(f"{'cli':<12} {'release':<9} {'variation':<24} screens right false_READY dialogs hook")
    for (cli, ver, var), rs in sorted(groups.items()):
        right = sum(r.right for r in rs)
        false_ready = sum(r.predicted is State.READY and r.case.state in R.DANGEROUS for r in rs)
        dialogs = [r for r in rs if r.case.state is State.NEEDS_CONFIRMATION]
        found = sum(r.predicted is State.NEEDS_CONFIRMATION for r in dialogs)
        hook = sum(r.case.state is State.READY and (r.pack, r.rule) in no_end for r in rs)
        print(f"{cli:<12} {ver:<9} {var:<24} {len(rs):>7} {right:>5} {false_ready:>11} "
              f"{found:>3}/{len(dialogs):<3} {hook:>4}")


if __name__ == "__main__":
    main()
