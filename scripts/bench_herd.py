#!/usr/bin/env python3
"""What herding costs the watcher; prints figures, asserts nothing.

    .venv/bin/python -m scripts.bench_herd [--panes 50] [--ticks 30]

For N idle shell panes on a private tmux server, the CPU time (this process) of one steady-state
poll cycle without herding, with herding on but nobody opted in, and with every pane opted in
(each pane's gates are evaluated every cycle; an idle shell stops at ``no_turn_yet``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from app.act.herd.eligibility import HerdSettings
from app.act.herd.step import HerdStep
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher
from scripts.bench import tmux_server

REPO = Path(__file__).resolve().parent.parent


def per_tick(watcher: Watcher, ticks: int) -> float:
    """Median CPU milliseconds of one cycle, after the screens settled."""
    for _ in range(5):
        watcher.tick()
    samples = []
    for _ in range(ticks):
        started = time.process_time()
        watcher.tick()
        samples.append((time.process_time() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--panes", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=30)
    args = parser.parse_args()
    packs = load_packs()
    settings = WatchSettings(interval_s=1, ready_min_s=0)
    herd = HerdSettings(stall_after_s=0, stability_s=0)
    with tmux_server(args.panes) as socket, tempfile.TemporaryDirectory() as folder:
        tmux = Tmux(socket_name=socket)
        for label, with_herd, opt_in in (("no herding", False, False),
                                         ("herding, none opted in", True, False),
                                         ("herding, all opted in", True, True)):
            store = StoreWriter(Path(folder) / label.replace(" ", "_").replace(",", ""))
            step = HerdStep(tmux, store, packs, herd, settings) if with_herd else None
            watcher = Watcher(tmux, store, packs, settings, steps=[step] if step else [])
            watcher.tick()
            if opt_in:
                with store.transaction() as conn:
                    for wid in watcher.tracked:
                        store.herd.upsert_herd(
                            conn, {"id": wid, "enabled": 1, "rules": "persistent"})
            ms = per_tick(watcher, args.ticks)
            print(f"{args.panes} idle panes, {label:<24} {ms:6.2f} ms CPU per cycle (median "
                  f"of {args.ticks})")
            store.close()


if __name__ == "__main__":
    main()
