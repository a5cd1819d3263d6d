"""The read side of the store for every command: workers, the watcher's liveness, lookup by id or
name. Stdlib only, because the status line runs through here every few seconds."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from app.adapters.store_read import StoreReader
from app.base.errors import PaneNotFound

TYPE_CHECKING = False  # typing costs ~5 ms; this is on the status-line path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


# The status is stale when the watcher's last finished cycle is older than this many intervals
# (and at least STALE_MIN_S): hung, unable to write, or without a tmux server to poll.
STALE_INTERVALS = 4
STALE_MIN_S = 10.0
# The watcher also says it is alive outside the database (see write_beat): a beat this much newer
# than the last cycle the store shows means the reader does not see what the watcher writes.
BEAT_NAME = "watch.beat"
UNSEEN_INTERVALS = 2
UNSEEN_MIN_S = 3.0


class Snapshot:
    __slots__ = ("interval", "last_cycle_ts", "other_socket", "unseen", "watcher_pid",
                 "watcher_problem", "workers")

    def __init__(self, workers: list[dict[str, Any]], watcher_pid: int | None,
                 watcher_problem: str | None, last_cycle_ts: float | None = None,
                 interval: float | None = None, other_socket: str | None = None) -> None:
        self.workers = workers
        self.watcher_pid = watcher_pid  # None: no live watcher (for the socket asked about)
        self.watcher_problem = watcher_problem
        self.last_cycle_ts = last_cycle_ts
        self.interval = interval
        # The socket the store's live watcher watches when that is not the one asked about.
        self.other_socket = other_socket
        self.unseen = False  # the watcher's newest writes are not visible here (see read_beat)

    def stale_for(self, now: float) -> float | None:
        """Seconds since the last cycle when that is too long ago for a live watcher; None while
        fresh. A stopped watcher's states are always stale (since its last cycle)."""
        if self.last_cycle_ts is None:
            return None if self.watcher_pid is not None else 0.0
        age = max(0.0, now - self.last_cycle_ts)
        if self.watcher_pid is None or self.unseen:
            return age
        limit = max(STALE_MIN_S, STALE_INTERVALS * (self.interval or 0.0))
        return age if age > limit else None


def write_beat(workers_dir: str | Path, pid: int, ts: float) -> None:
    """What the watcher writes after each full cycle it wrote to the store."""
    from pathlib import Path

    from app.base.files import write_atomic

    write_atomic(Path(workers_dir) / BEAT_NAME, f"{pid} {ts:.3f}\n", mode=0o600, sync=False)


def read_beat(workers_dir: str | Path) -> tuple[int, float] | None:
    """The watcher's pid and the time of its last full cycle, from outside the database."""
    try:
        with open(os.path.join(workers_dir, BEAT_NAME), encoding="ascii") as beat:
            pid, ts = beat.read(64).split()
        return int(pid), float(ts)
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watcher_pid(daemon: Mapping[str, Any] | None) -> int | None:
    if not daemon or daemon.get("stopped_ts") or not daemon.get("pid"):
        return None
    pid = int(daemon["pid"])
    return pid if pid_alive(pid) else None


def snapshot(workers_dir: str | Path, socket: str | None = None) -> Snapshot:
    """The panes of the store (of one tmux socket, by its label, when given) and its watcher.
    A watcher of another socket keeps none of these panes current: it counts as none."""
    import time

    reader = StoreReader(workers_dir)
    try:
        daemon = reader.daemon() or {}
        workers = reader.workers(socket)
        hosts = reader.hosts() if any(w.get("host") not in (None, "local") for w in workers) \
            else {}
    finally:
        reader.close()
    pid = watcher_pid(daemon)
    if hosts or any(w.get("host") not in (None, "local") for w in workers):
        mark_host_stale(workers, hosts, time.time(), daemon.get("interval"), pid is not None)
    watched = daemon.get("socket") or None
    if socket is not None and pid is not None and watched not in (None, socket):
        return Snapshot(workers, None, None, other_socket=watched)
    snap = Snapshot(workers, pid, daemon.get("problem") or None, daemon.get("last_cycle_ts"),
                    daemon.get("interval"))
    beat = read_beat(workers_dir) if pid is not None else None
    if beat is not None and beat[0] == pid:
        limit = max(UNSEEN_MIN_S, UNSEEN_INTERVALS * (snap.interval or 0.0))
        behind = beat[1] - (snap.last_cycle_ts or 0.0)
        if behind > limit:
            snap.unseen = True
            snap.watcher_problem = (f"the store does not show the watcher's newest writes (its "
                                    f"last cycle here is {behind:.0f} s behind its heartbeat)")
    return snap


# Why another host's pane's row is stale: its host does not answer (the state is the last one
# seen; never EXITED for that, nor typed into), or no thread of a running watcher keeps it
# current (disabled, removed from the config, stuck, or no watcher at all).
HOST_UNREACHABLE = "host_unreachable"
HOST_NOT_WATCHED = "host_not_watched"


def host_staleness(host: Mapping[str, Any] | None, now: float, interval: float | None,
                   watching: bool) -> tuple[str, str] | None:
    """(reason, what happened) when a host's rows are not current, None when they are. A
    host's heartbeat is its ``checked_ts``, written by each of its full ticks."""
    if not watching:
        return HOST_NOT_WATCHED, "the watcher is not running"
    if host is None:
        return HOST_NOT_WATCHED, "not in the running watcher's config"
    if host.get("removed_ts"):
        return HOST_NOT_WATCHED, "removed from the config"
    if host.get("watched") == 0:
        return HOST_NOT_WATCHED, "disabled in the config"
    if host.get("reachable") is None:
        return HOST_NOT_WATCHED, str(host.get("problem") or "not reached yet")
    if not host.get("reachable"):
        return HOST_UNREACHABLE, str(host.get("problem") or "")
    age = now - float(host.get("checked_ts") or 0.0)
    if age > max(STALE_MIN_S, STALE_INTERVALS * (interval or 0.0)):
        return HOST_NOT_WATCHED, f"its watcher thread has not reported for {int(age)} s"
    return None


def mark_host_stale(workers: list[dict[str, Any]], hosts: Mapping[str, Mapping[str, Any]],
                    now: float, interval: float | None, watching: bool) -> None:
    """Each live pane of another host whose rows are not current: ``state`` UNKNOWN (a READY
    there may be long over), the state last seen as ``last_state``, ``stale_reason`` and
    ``host_problem``, never eligible for herding; ``host_removed_ts`` when its host left the
    config (such rows leave ``status`` after ``states.exited_shown``, as exited panes do)."""
    verdicts: dict[str, tuple[str, str] | None] = {}
    for w in workers:
        host = str(w.get("host") or "local")
        if host == "local" or w.get("state") == "EXITED":
            continue
        if host not in verdicts:
            verdicts[host] = host_staleness(hosts.get(host), now, interval, watching)
        verdict = verdicts[host]
        if verdict is None:
            continue
        w["stale_reason"], w["host_problem"] = verdict
        w["last_state"] = w.get("state")
        w["state"] = "UNKNOWN"
        w["eligible_for_herd"], w["herd_reason"] = False, verdict[0]
        removed = (hosts.get(host) or {}).get("removed_ts")
        if removed:
            w["host_removed_ts"] = float(removed)


def find_worker(workers: list[dict[str, Any]], ident: str) -> dict[str, Any]:
    """A worker by id, id prefix, tmux pane id (``%3``) or name; ambiguity is an error.
    ``HOST:NAME`` names one host's pane; an unqualified name found on several hosts means this
    machine's."""
    head, sep, rest = ident.partition(":")
    if sep and rest and not any(ident in (w.get("name"), w.get("id")) for w in workers) and \
            any(w.get("host") == head for w in workers):
        workers, ident = [w for w in workers if w.get("host") == head], rest
    for key in ("id", "pane_id", "name"):
        exact = [w for w in workers if w.get(key) == ident]
        if len(exact) > 1:
            # A name reused after its first pane exited means the live one.
            exact = [w for w in exact if w.get("state") != "EXITED"] or exact
        if len(exact) > 1 and any(w.get("host") not in (None, "local") for w in exact):
            exact = [w for w in exact if w.get("host") in (None, "local")] or exact
        if len(exact) == 1:
            return exact[0]
        if len(exact) > 1:
            ids = ", ".join(w["id"] for w in exact)
            raise PaneNotFound(f"{ident!r} names several panes ({ids}); use an id")
    prefixed = [w for w in workers if str(w.get("id", "")).startswith(ident)] if ident else []
    if len(prefixed) == 1:
        return prefixed[0]
    raise PaneNotFound(f"no pane with id or name {ident!r}; see `conductor pty status`")


def short_line(workers_dir: str | Path, colour: bool = False, width: int | None = None,
               socket: str | None = None) -> str:
    """The tmux status-right line, at most ``width`` columns when given; never raises, so the
    status line stays clean."""
    from app.adapters.store_read import StoreMissing
    from app.base import render
    from app.base.errors import ConductorError

    try:
        snap = snapshot(workers_dir, socket)
    except StoreMissing:
        return render.fit("[conductor: no store]", width)
    except ConductorError:
        return render.fit("[conductor: store unreadable]", width)
    if snap.other_socket is not None:
        return render.fit(f"[conductor: watching {render.clean_text(snap.other_socket)}]"
                          .replace("#", "##"), width)
    if snap.watcher_pid is None:
        return render.fit("[conductor: watcher stopped]", width)
    import time

    stale = snap.stale_for(time.time())
    if stale is not None:
        # Old states are worse than none on a status line: a READY there may be long over.
        return render.fit(f"[conductor: stale {render.coarse(stale)}]", width)
    if all(w.get("state") == "EXITED" for w in snap.workers):
        return render.fit("[conductor: no panes]", width)
    return render.short_line(snap.workers, colour=colour,
                             style_spec=os.environ.get(render.ENV_STYLE), width=width)


def watcher_warnings(snap: Snapshot, now: float) -> list[str]:
    """What ``status`` says on stderr about the watcher behind ``snap``, which the table itself
    cannot show: not running, its own last problem, or states left stale."""
    from app.base import render

    if snap.other_socket is not None:
        return [f"conductor pty: this store's watcher watches tmux server "
                f"{render.clean_text(snap.other_socket)}, not this one; these states may be "
                "stale (a watcher per server needs a store per server: --workers-dir)"]
    if snap.watcher_pid is None:
        return ["conductor pty: the watcher is not running; states may be stale "
                "(start `conductor pty watch`)"]
    lines = [f"conductor pty: {snap.watcher_problem}"] if snap.watcher_problem else []
    stale = snap.stale_for(now)
    if stale is not None:
        lines.append(f"conductor pty: stale: the watcher's last cycle was "
                     f"{render.duration(stale)} ago (hung, unable to write, or no tmux server)")
    return lines


def shown(workers: list[dict[str, Any]], now: float, exited_shown_s: float
          ) -> list[dict[str, Any]]:
    """What ``status`` lists: every pane but those EXITED, or of a host removed from the config,
    longer than ``exited_shown_s`` ago."""
    return [w for w in workers if (w.get("state") != "EXITED"
            or now - (w.get("state_entered_ts") or 0.0) < exited_shown_s)
            and (w.get("host_removed_ts") is None
                 or now - w["host_removed_ts"] < exited_shown_s)]


def next_needing_human(workers: list[dict[str, Any]], current_pane: str | None = None,
                       visited: Sequence[str] = ()) -> dict[str, Any] | None:
    """The pane to go to next: NEEDS_CONFIRMATION first, then ERROR, then READY agents, then
    READY shells (the status line's order, render.by_urgency); None when nobody waits.

    A round: ``visited`` (row ids) are the panes already gone to since the round began, and the
    pane you are on (``current_pane``, a tmux ``%N``) counts as visited; the first waiting pane
    not visited is next, so pressing the key again reaches every waiting pane in turn instead of
    going back and forth between the first two. When all were visited, a new round begins."""
    from app.base import render

    waiting = [w for w in render.by_urgency(workers)
               if w.get("state") in ("NEEDS_CONFIRMATION", "ERROR", "READY")]
    seen = set(visited)
    fresh = [w for w in waiting if w.get("id") not in seen and w.get("pane_id") != current_pane]
    others = [w for w in waiting if w.get("pane_id") != current_pane]
    chosen = (fresh or others or waiting)[:1]
    return dict(chosen[0]) if chosen else None


def round_after(visited: Sequence[str], workers: list[dict[str, Any]], chosen: Mapping[str, Any],
                current_pane: str | None = None) -> list[str]:
    """The round's visited ids once ``chosen`` is gone to: those still waiting, the pane left
    (``current_pane``) and ``chosen``. A pane chosen again begins a new round with it alone (the
    pane left is then the last of the old round, due again after the others)."""
    chosen_id = str(chosen.get("id"))
    if chosen_id in visited:
        return [chosen_id]
    waiting = {str(w.get("id")) for w in workers
               if w.get("state") in ("NEEDS_CONFIRMATION", "ERROR", "READY")}
    left = [str(w.get("id")) for w in workers if current_pane and w.get("pane_id") == current_pane]
    kept = [v for v in [*visited, *left] if v in waiting]
    return list(dict.fromkeys([*kept, chosen_id]))


# `switch --next`'s round per tmux server: the row ids gone to since it began.
_ROUND_FILE = "switch-round.json"


def load_round(workers_dir: str | Path, server: str) -> list[str]:
    """The round of ``server`` (a tmux label); [] when none was kept or the file is unreadable
    (a lost round only means the next press starts a new one)."""
    import json
    from pathlib import Path

    try:
        rounds = json.loads((Path(workers_dir) / _ROUND_FILE).read_text(encoding="utf-8"))
        kept = rounds.get(server, []) if isinstance(rounds, dict) else []
    except (OSError, ValueError):
        return []
    return [str(v) for v in kept] if isinstance(kept, list) else []


def save_round(workers_dir: str | Path, server: str, visited: Sequence[str]) -> None:
    import json
    import tempfile
    from pathlib import Path

    path = Path(workers_dir) / _ROUND_FILE
    try:
        rounds = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rounds = {}
    if not isinstance(rounds, dict):
        rounds = {}
    rounds[server] = list(visited)
    # Written whole and renamed: two presses at once leave one round, never half a file.
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8",
                                     prefix=".switch-round.") as out:
        json.dump(rounds, out)
    Path(out.name).replace(path)
