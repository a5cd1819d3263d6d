"""``explain``'s live check: the pane looked at now with the watcher's own evidence and rules.

The screen is judged as the watcher judges it (the foreground program picks the judge: ``less``
in a shell's pane is read by the generic pack), the title and the hooks recorded in the store are
folded in, and the stored assessment is where the look starts, so an unchanged screen keeps the
stored state instead of "settling" anew. A pane of another host is looked at on that host; when
that host is not configured or cannot be reached, the stored evidence is all there is.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.adapters.ssh import HostConfig
from app.adapters.tmux import Tmux
from app.base.errors import ConductorError, PaneNotFound, TmuxServerNotRunning
from app.base.model import RuleTrace, Verdict
from app.base.settings import WatchSettings
from app.observe.assess import Assessment, absorb
from app.observe.one_pane import PaneWatch, Target
from app.observe.pack_detection import judge_for
from app.observe.packs import Pack
from app.run.hosts import find_host
from app.run.rows import restored_assessment


@dataclass(frozen=True)
class LiveCheck:
    """What the live look found; ``missing`` says why there was none ("" when there was)."""

    missing: str = ""
    pack: str = ""
    program: str = ""  # the foreground program that chose the judge ("" for the pack's own)
    verdict: Verdict | None = None  # the screen's alone
    assessment: Assessment | None = None  # with the title, hooks and sends, as the watcher
    traces: tuple[RuleTrace, ...] = ()


def live_check(local: Tmux, hosts: tuple[HostConfig, ...], workers_dir: Path,
               worker: Mapping[str, Any], packs: Mapping[str, Pack],
               settings: WatchSettings) -> LiveCheck:
    """The pane of ``worker`` (a stored row) looked at now; never raises for a pane that is gone
    or a host out of reach (``LiveCheck.missing`` says so)."""
    if worker.get("state") == "EXITED":
        return LiveCheck(missing="the pane is gone")
    host = str(worker.get("host") or "local")
    try:
        tmux = local if host == "local" else find_host(hosts, host).tmux()
    except ConductorError:
        return LiveCheck(missing=f"remote ({host}, not in the config): stored evidence")
    try:
        return _look(tmux, workers_dir, worker, packs, settings)
    except (PaneNotFound, TmuxServerNotRunning):
        return LiveCheck(missing="the pane is gone")
    except ConductorError as exc:
        if host == "local":
            raise
        return LiveCheck(missing=f"remote ({host} unreachable: {exc}): stored evidence")


def _look(tmux: Tmux, workers_dir: Path, worker: Mapping[str, Any],
          packs: Mapping[str, Pack], settings: WatchSettings) -> LiveCheck:
    listing = tmux.list_panes()
    pane = next((p for p in listing.panes if p.pane_id == worker.get("pane_id")), None)
    # An exited pane's %N may belong to another pane by now: a new server reuses them.
    if pane is None or (worker.get("server_pid") and
                        listing.server_pid != worker["server_pid"]):
        return LiveCheck(missing="the pane is gone")
    target = Target(pane=pane, server_pid=listing.server_pid, worker_id=str(worker["id"]),
                    name=str(worker.get("name") or worker["id"]),
                    cli_forced=worker.get("cli_forced") or None)
    watch = PaneWatch(tmux, target, packs, settings, workers_dir)
    stored = restored_assessment(worker) if worker.get("state") else None
    # The stored look is where this one starts; what the store's events said before it was
    # already in it (as for a watcher taking over its predecessor's rows).
    if stored is not None:
        watch.seed = functools.partial(absorb, stored)
    assessment = watch.poll()
    tracked = watch.tracked
    pack = tracked.pack
    if pack is None:
        return LiveCheck(pack="", verdict=tracked.verdict, assessment=assessment)
    judge, program = judge_for(packs, pack, pane.current_command)
    _, traces = judge.explain(tracked.text, program)
    return LiveCheck(pack=judge.name, program=program, verdict=tracked.verdict,
                     assessment=assessment, traces=tuple(traces))
