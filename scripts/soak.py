"""Soak the watcher and the store under faults, and print what held (issue 10's acceptance).

    .venv/bin/python -m scripts.soak                    # 20 panes, 20 SIGKILLs, ~2-3 minutes
    .venv/bin/python -m scripts.soak --panes 6 --kills 3 --no-disk

On its own tmux server (``-L conductor-soak-<pid>``) and its own store folder, it runs:

1. ``--panes`` panes, most printing constantly, a few idle shells; hook writers and status
   readers hammering the store from threads (the real ``conductor pty hook`` and reader code);
   the real watcher process SIGKILLed at random moments ``--kills`` times and restarted. Then
   ``PRAGMA integrity_check``, a status row for every live pane, every hook event recorded, and
   no reader error.
2. The tmux server killed under the running watcher: readers must say the states are stale
   instead of showing them, and a new server's panes must be picked up.
3. The store on a small tmpfs (root only) filled up: the watcher must survive, and once space
   is back the store must agree with tmux again. Where mounting is not allowed this is skipped
   with the reason.

Bounded in time (``--seconds`` per phase deadline) and count; exit 0 when everything held.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.adapters.status import STALE_MIN_S, short_line, snapshot
from app.front.hook import main as hook_main

REPO = Path(__file__).resolve().parent.parent

PRINTER = "sh -c 'i=0; while :; do i=$((i+1)); echo soak line $i; sleep 0.{n}; done'"
IDLE = "env -i HOME={home} TERM=screen PS1='soak$ ' bash --norc --noprofile"


@dataclass
class Figures:
    phase_s: dict[str, float] = field(default_factory=dict)
    kills: int = 0
    restart_to_cycle_s: list[float] = field(default_factory=list)
    hook_calls: int = 0
    hook_failures: int = 0
    reads: int = 0
    read_errors: list[str] = field(default_factory=list)
    integrity: str = ""
    live_panes: int = 0
    rows_for_live_panes: int = 0
    idle_ready: str = ""
    events_recorded: int = 0
    stale_seen_after_server_kill: str = ""
    new_server_picked_up_s: float | None = None
    disk_full: str = ""
    problems: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, panes: int, kills: int, seconds: float, interval: float,
                 work: Path) -> None:
        self.panes, self.kills, self.seconds, self.interval = panes, kills, seconds, interval
        self.work = work
        self.socket = f"conductor-soak-{os.getpid()}"
        self.workers = work / "workers"
        self.env = {**os.environ, "CONDUCTOR_WORKERS_DIR": str(self.workers),
                    "CONDUCTOR_CONFIG": str(work / "config.toml"), "SHELL": "/bin/sh"}
        for name in ("TMUX", "TMUX_PANE", "OPENROUTER_API_KEY", "CONDUCTOR_PACKS_DIR"):
            self.env.pop(name, None)
        self.figures = Figures()
        self.watcher: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    # --- tmux --------------------------------------------------------------------------------

    def tmux(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, env=self.env, timeout=20, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def start_server(self) -> None:
        home = self.work / "home"
        home.mkdir(exist_ok=True)
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "soak", "-x", "120", "-y", "30",
                  IDLE.format(home=home))
        for index in range(1, self.panes):
            command = IDLE.format(home=home) if index % 5 == 0 else PRINTER.format(n=index % 9 + 1)
            self.tmux("new-window", "-d", "-t", "soak", command)

    def live_panes(self) -> list[str]:
        out = self.tmux("list-panes", "-a", "-F", "#{pane_id}", check=False)
        return [line for line in out.splitlines() if line.startswith("%")]

    def server_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "#{pid}").strip())

    # --- the watcher -------------------------------------------------------------------------

    def start_watcher(self) -> subprocess.Popen[bytes]:
        log = (self.work / "watch.log").open("ab")
        self.watcher = subprocess.Popen(
            [sys.executable, "-m", "app", "-L", self.socket, "pty", "watch", "--interval",
             str(self.interval), "--no-notify", "-q"], cwd=REPO, env=self.env, stdout=log,
            stderr=log)
        log.close()
        return self.watcher

    def last_cycle(self, path: Path | None = None) -> float:
        try:
            conn = sqlite3.connect(f"file:{path or self.workers / 'status.db'}?mode=ro",
                                   uri=True, timeout=5)
            try:
                row = conn.execute("SELECT last_cycle_ts FROM daemon").fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            return 0.0
        return float(row[0] or 0.0) if row else 0.0

    def wait_for(self, what: str, check: Callable[[], bool], seconds: float) -> float | None:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            if check():
                return time.monotonic() - started
            time.sleep(0.05)
        self.figures.problems.append(f"{what}: not within {seconds:g} s")
        return None

    def _cycled_since(self, since: float) -> Callable[[], bool]:
        return lambda: self.last_cycle() > since

    def stop_watcher(self) -> None:
        if self.watcher is not None and self.watcher.poll() is None:
            self.watcher.send_signal(signal.SIGTERM)
            try:
                self.watcher.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.figures.problems.append("watcher ignored SIGTERM for 15 s")
                self.watcher.kill()
                self.watcher.wait()

    # --- load ----------------------------------------------------------------------------------

    def hook_writer(self, pane_ids: list[str], server_pid: int) -> None:
        socket_path = str(self.socket_path())
        rng = random.Random(1)
        while not self._stop.is_set():
            pane = rng.choice(pane_ids)
            payload = json.dumps({"session_id": "soak", "transcript_path": "/tmp/t.jsonl",
                                  "cwd": "/tmp", "hook_event_name": "Notification",
                                  "message": "soak"})
            env = {"CONDUCTOR_WORKERS_DIR": str(self.workers), "TMUX_PANE": pane,
                   "TMUX": f"{socket_path},{server_pid},0"}
            hook_main(["--cli", "claude", payload], env=env)
            with self._lock:
                self.figures.hook_calls += 1
            time.sleep(0.02)

    def reader(self) -> None:
        while not self._stop.is_set():
            try:
                snap = snapshot(self.workers)
                line = short_line(self.workers)
                if line.startswith("[conductor: no store") or "unreadable" in line:
                    raise RuntimeError(line)
                del snap
            except Exception as exc:  # what a reader would have shown a person
                with self._lock:
                    self.figures.read_errors.append(f"{type(exc).__name__}: {exc}"[:200])
            with self._lock:
                self.figures.reads += 1
            time.sleep(0.01)

    # --- phases --------------------------------------------------------------------------------

    def phase_kills(self) -> None:
        started = time.monotonic()
        self.start_server()
        panes, server_pid = self.live_panes(), self.server_pid()
        self.start_watcher()
        self.wait_for("first cycle", lambda: self.last_cycle() > 0, 30)
        threads = [threading.Thread(target=self.hook_writer, args=(panes, server_pid),
                                    daemon=True)]
        threads += [threading.Thread(target=self.reader, daemon=True) for _ in range(2)]
        for thread in threads:
            thread.start()
        rng = random.Random(42)
        deadline = time.monotonic() + self.seconds
        for _ in range(self.kills):
            if time.monotonic() > deadline:
                self.figures.problems.append(f"only {self.figures.kills} kills within "
                                             f"{self.seconds:g} s")
                break
            time.sleep(rng.uniform(0.1, 2.5 * self.interval))
            assert self.watcher is not None
            self.watcher.send_signal(signal.SIGKILL)
            self.watcher.wait()
            self.figures.kills += 1
            self.start_watcher()
            took = self.wait_for("a cycle after restart", self._cycled_since(time.time()), 30)
            if took is not None:
                self.figures.restart_to_cycle_s.append(took)
        # Let the last watcher settle with the load still on, then stop the load.
        time.sleep(3 * self.interval + 2)
        self._stop.set()
        for thread in threads:
            thread.join(timeout=10)
        self.check_store(panes)
        self.figures.phase_s["kills"] = time.monotonic() - started

    def check_store(self, panes: list[str]) -> None:
        conn = sqlite3.connect(self.workers / "status.db", timeout=10)
        try:
            self.figures.integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
            # One more cycle after the load stopped, so rows reflect the panes as they are.
            since = time.time()
            self.wait_for("a final cycle", lambda: self.last_cycle() > since, 20)
            rows = dict(conn.execute(
                "SELECT p.pane_id, s.state FROM ptys p JOIN status s ON s.id = p.id"))
            self.figures.live_panes = len(panes)
            self.figures.rows_for_live_panes = sum(1 for p in panes if p in rows)
            idle = [p for i, p in enumerate(panes) if i % 5 == 0]
            ready = sum(1 for p in idle if rows.get(p) == "READY")
            self.figures.idle_ready = f"{ready}/{len(idle)}"
            self.figures.events_recorded = conn.execute(
                "SELECT COUNT(*) FROM events WHERE kind = 'hook'").fetchone()[0]
        finally:
            conn.close()
        if self.figures.integrity != "ok":
            self.figures.problems.append(f"integrity_check: {self.figures.integrity}")
        if self.figures.rows_for_live_panes != len(panes):
            self.figures.problems.append("a live pane has no status row")
        if self.figures.events_recorded < self.figures.hook_calls:
            self.figures.problems.append(f"hook events lost: {self.figures.hook_calls} calls, "
                                         f"{self.figures.events_recorded} recorded")
        log = self.workers / "hook.log"
        if log.exists():
            self.figures.hook_failures = log.read_text().count("could not record")
            if self.figures.hook_failures:
                self.figures.problems.append(f"{self.figures.hook_failures} hook calls failed")
        if self.figures.read_errors:
            self.figures.problems.append(f"{len(self.figures.read_errors)} reader errors, "
                                         f"first: {self.figures.read_errors[0]}")

    def phase_server_restart(self) -> None:
        started = time.monotonic()
        if self.watcher is None or self.watcher.poll() is not None:
            self.start_watcher()
        self.tmux("kill-server", check=False)
        limit = max(10.0, 4 * self.interval) + 10
        took = self.wait_for("readers say stale after the tmux server died",
                             lambda: "stale" in short_line(self.workers), limit + 5)
        self.figures.stale_seen_after_server_kill = (
            f"after {took:.1f} s" if took is not None else "never")
        self.start_server()
        new_panes = set(self.live_panes())

        def picked_up() -> bool:
            try:
                snap = snapshot(self.workers)
            except Exception:
                return False
            seen = {w["pane_id"] for w in snap.workers if w.get("state")}
            return new_panes <= seen and "stale" not in short_line(self.workers)

        self.figures.new_server_picked_up_s = self.wait_for(
            "the new server's panes in the store", picked_up, 30)
        if self.watcher is None or self.watcher.poll() is not None:
            self.figures.problems.append("the watcher died when the tmux server went away")
        self.figures.phase_s["server_restart"] = time.monotonic() - started

    def phase_disk_full(self) -> None:
        started = time.monotonic()
        self.stop_watcher()
        mount = self.work / "small"
        mount.mkdir()
        if os.geteuid() != 0 or shutil.which("mount") is None:
            self.figures.disk_full = "skipped: needs root to mount a small tmpfs"
            return
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            self.figures.disk_full = f"skipped: tmpfs mount refused ({done.stderr.strip()})"
            return
        try:
            self._disk_full(mount)
        finally:
            self.stop_watcher()
            subprocess.run(["umount", "-l", str(mount)], check=False)
        self.figures.phase_s["disk_full"] = time.monotonic() - started

    def _disk_full(self, mount: Path) -> None:
        self.workers = mount / "workers"
        self.env["CONDUCTOR_WORKERS_DIR"] = str(self.workers)
        self.start_watcher()
        self.wait_for("first cycle on tmpfs", lambda: self.last_cycle() > 0, 30)
        filler = mount / "filler"
        # Unbuffered: with a buffer, close() would retry the unwritten part and raise ENOSPC
        # again on the way out of the block.
        with filler.open("wb", buffering=0) as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
            except OSError:
                pass
        # Change what a pane shows while the disk is full: an idle shell starts printing.
        panes = self.live_panes()
        self.tmux("send-keys", "-t", panes[0],
                  "i=0; while :; do i=$((i+1)); echo busy $i; sleep 0.2; done", "Enter")
        time.sleep(max(STALE_MIN_S, 4 * self.interval) + 3)
        alive_while_full = self.watcher is not None and self.watcher.poll() is None
        stale_while_full = "stale" in short_line(self.workers) or not alive_while_full
        filler.unlink()
        after = time.time()

        def caught_up() -> bool:
            conn = sqlite3.connect(f"file:{self.workers / 'status.db'}?mode=ro", uri=True)
            try:
                row = conn.execute("SELECT s.state FROM status s JOIN ptys p ON p.id = s.id "
                                   "WHERE p.pane_id = ?", (panes[0],)).fetchone()
                ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            finally:
                conn.close()
            return ok and row is not None and row[0] == "BUSY" and self.last_cycle() > after

        took = self.wait_for("the store catching up once space returned", caught_up, 30)
        self.figures.disk_full = (
            f"watcher alive while full: {alive_while_full}; readers said stale while full: "
            f"{stale_while_full}; caught up {f'{took:.1f} s' if took is not None else 'never'}"
            " after space returned")
        if not alive_while_full:
            self.figures.problems.append("the watcher died when the disk filled up")

    def socket_path(self) -> Path:
        """Where tmux puts our socket (it never removes the file itself)."""
        return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / self.socket

    def close(self) -> None:
        self._stop.set()
        self.stop_watcher()
        self.tmux("kill-server", check=False)
        self.socket_path().unlink(missing_ok=True)


def run(panes: int = 20, kills: int = 20, seconds: float = 240.0, interval: float = 0.5,
        disk: bool = True) -> Figures:
    with tempfile.TemporaryDirectory(prefix="conductor-soak-") as tmp:
        soak = Soak(panes, kills, seconds, interval, Path(tmp))
        try:
            soak.phase_kills()
            soak.phase_server_restart()
            if disk:
                soak.phase_disk_full()
            else:
                soak.figures.disk_full = "not run (--no-disk)"
        finally:
            soak.close()
        return soak.figures


def report(figures: Figures) -> str:
    restarts = figures.restart_to_cycle_s
    lines = [
        f"watcher SIGKILLs: {figures.kills}; restart to first cycle: "
        + (f"median {sorted(restarts)[len(restarts) // 2]:.2f} s, max {max(restarts):.2f} s"
           if restarts else "-"),
        f"hook calls: {figures.hook_calls}, recorded: {figures.events_recorded}, failed: "
        f"{figures.hook_failures}",
        f"reader calls: {figures.reads}, errors: {len(figures.read_errors)}",
        f"integrity_check: {figures.integrity}",
        f"live panes with a status row: {figures.rows_for_live_panes}/{figures.live_panes}; "
        f"idle shells READY: {figures.idle_ready}",
        f"tmux server killed: readers said stale {figures.stale_seen_after_server_kill}; new "
        f"server picked up in "
        + (f"{figures.new_server_picked_up_s:.1f} s" if figures.new_server_picked_up_s
           is not None else "never"),
        f"disk full: {figures.disk_full}",
        "phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in figures.phase_s.items()),
        "RESULT: " + ("ok" if not figures.problems else "PROBLEMS: " + "; ".join(
            figures.problems)),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panes", type=int, default=20)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=240.0,
                        help="deadline for the kill phase (default 240)")
    parser.add_argument("--interval", type=float, default=0.5, help="the watcher's --interval")
    parser.add_argument("--no-disk", action="store_true", help="skip the disk-full phase")
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        print("soak: tmux is not installed", file=sys.stderr)
        return 1
    figures = run(args.panes, args.kills, args.seconds, args.interval, not args.no_disk)
    print(report(figures))
    return 0 if not figures.problems else 1


if __name__ == "__main__":
    sys.exit(main())
