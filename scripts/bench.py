#!/usr/bin/env python3
"""Benchmarks for conductor pty; prints figures, asserts nothing.

    .venv/bin/python scripts/bench.py            # everything
    .venv/bin/python scripts/bench.py --quick    # fewer repetitions

Figures:
- CPU per poll cycle for 10, 50 and 200 idle panes: our process plus its tmux client
  subprocesses, and the tmux server's share, for unchanged screens (the steady state) and for a
  cycle that recaptures every pane.
- Detection latency: from a y/N question appearing in a pane to NEEDS_CONFIRMATION in status.db,
  for a real `conductor pty watch` at --interval 1 and at the default 5 s.
- `conductor pty status --short` wall time against `python3 -c pass`, same run.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app.classify.packs import load_packs  # noqa: E402
from app.config import WatchSettings  # noqa: E402
from app.store import StoreWriter  # noqa: E402
from app.tmux import Tmux  # noqa: E402
from app.watch import Watcher  # noqa: E402


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                          check=True).stdout


_servers = itertools.count()


@contextmanager
def tmux_server(panes: int) -> Iterator[str]:
    socket = f"bench-{os.getpid()}-{panes}-{next(_servers)}"
    env_shell = ["env", "PS1=$ ", "sh"]
    tmux(socket, "-f", "/dev/null", "new-session", "-d", "-s", "bench", "-x", "200", "-y", "50",
         *env_shell)
    for _ in range(panes - 1):
        tmux(socket, "new-window", "-d", *env_shell)
    time.sleep(1.0)  # let every shell draw its prompt
    try:
        yield socket
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], check=False)


def server_cpu(socket: str) -> float:
    pid = tmux(socket, "display-message", "-p", "#{pid}").strip()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def own_cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def cycle_cpu(panes: int, cycles: int) -> tuple[float, float, float, float]:
    """(ms ours unchanged, ms server unchanged, ms ours full recapture, ms server full)."""
    with tmux_server(panes) as socket, tempfile.TemporaryDirectory() as folder:
        store = StoreWriter(Path(folder))
        packs = load_packs()
        watcher = Watcher(Tmux(socket_name=socket), store, packs, WatchSettings())
        for _ in range(4):  # first sight, settle to READY, write the files once
            watcher.tick(time.time())
            time.sleep(1.1)  # past tmux's one-second activity clock
        results = []
        for force in (False, True):
            watcher.settings = WatchSettings(force_capture_s=1e-6 if force else 3600.0)
            ours, server = own_cpu(), server_cpu(socket)
            for _ in range(cycles):
                watcher.tick(time.time())
            results.append((own_cpu() - ours) / cycles * 1000)
            results.append((server_cpu(socket) - server) / cycles * 1000)
        store.close()
        return results[0], results[1], results[2], results[3]


def conductor_argv() -> list[str]:
    found = shutil.which("conductor", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "app"]


def question_latency(interval: float, trials: int, env: dict[str, str],
                     arrived: Callable[[Path, int], bool]) -> list[float]:
    """Seconds from a y/N question appearing in a pane until ``arrived(db, trial)`` holds,
    starting at a different phase of the poll cycle each time."""
    latencies = []
    with tmux_server(1) as socket:
        daemon = subprocess.Popen(
            [*conductor_argv(), "-L", socket, "pty", "watch", "--interval", str(interval), "-q"],
            env=env, cwd=REPO,
        )
        db = Path(env["CONDUCTOR_WORKERS_DIR"]) / "status.db"
        try:
            wait_for(lambda: db.exists() and state(db) == "READY", 10 * interval + 10)
            for trial in range(trials):
                time.sleep(interval * ((trial * 0.37) % 1.0))
                started = time.monotonic()
                tmux(socket, "send-keys", "-t", "bench:0", "read -p 'Go on? (y/N) ' x", "Enter")
                wait_for(functools.partial(arrived, db, trial), 3 * interval + 10)
                latencies.append(time.monotonic() - started)
                tmux(socket, "send-keys", "-t", "bench:0", "n", "Enter")
                tmux(socket, "send-keys", "-t", "bench:0", "clear", "Enter")
                wait_for(lambda: state(db) == "READY", 10 * interval + 10)
        finally:
            daemon.terminate()
            daemon.wait(timeout=15)
    return latencies


def detection_latency(interval: float, trials: int) -> list[float]:
    """y/N question on screen -> NEEDS_CONFIRMATION in the store."""
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": folder,
               "CONDUCTOR_CONFIG": str(Path(folder) / "config.toml")}
        return question_latency(interval, trials, env,
                                lambda db, _: state(db) == "NEEDS_CONFIRMATION")


def notification_delay(interval: float, trials: int) -> list[float]:
    """y/N question on screen -> the desktop notification received on a private D-Bus session
    bus by a recording org.freedesktop.Notifications server (through the real notify-send)."""
    from tests.dbus_notifications import NotificationBus

    with tempfile.TemporaryDirectory() as folder:
        bus = NotificationBus(Path(folder)).start()
        config = Path(folder) / "config.toml"
        config.write_text("[notify]\nmin_interval = 0\n[notify.tmux]\nenabled = false\n")
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": folder, "CONDUCTOR_CONFIG": str(config),
               "DBUS_SESSION_BUS_ADDRESS": bus.address}

        def received(_: Path, trial: int) -> bool:
            lines = bus.record_file.read_text().splitlines() if bus.record_file.exists() else []
            return sum("NEEDS_CONFIRMATION" in line for line in lines) > trial

        try:
            return question_latency(interval, trials, env, received)
        finally:
            bus.stop()


def state(db: Path) -> str | None:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute("SELECT state FROM status").fetchone()
    return row[0] if row else None


def wait_for(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except sqlite3.Error:
            pass
        time.sleep(0.02)
    raise TimeoutError(f"no result within {seconds} s")


def wall_times(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - started) * 1000)
    return times


def startup(runs: int) -> tuple[float, float]:
    with tmux_server(3) as socket, tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": folder,
               "CONDUCTOR_CONFIG": str(Path(folder) / "config.toml")}
        daemon = subprocess.Popen([*conductor_argv(), "-L", socket, "pty", "watch", "-q",
                                   "--interval", "1"], env=env, cwd=REPO)
        try:
            wait_for(lambda: (Path(folder) / "status.db").exists(), 20)
            time.sleep(2)
            short = wall_times([*conductor_argv(), "pty", "status", "--short"], runs, env)
            bare = wall_times([sys.executable, "-c", "pass"], runs, env)
        finally:
            daemon.terminate()
            daemon.wait(timeout=15)
    return statistics.median(short), statistics.median(bare)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    cycles, trials, runs = (5, 3, 10) if args.quick else (20, 6, 30)

    print(f"# conductor pty benchmarks ({os.cpu_count()} cores, tmux "
          f"{subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()})")
    print("\nCPU per poll cycle (ms): ours = this process + its tmux clients; server = tmux server")
    print(f"{'panes':>6} {'unchanged ours':>15} {'server':>8} {'all recaptured ours':>20} "
          f"{'server':>8}")
    for panes in (10, 50, 200):
        ours, server, full, full_server = cycle_cpu(panes, cycles)
        print(f"{panes:>6} {ours:>15.1f} {server:>8.1f} {full:>20.1f} {full_server:>8.1f}")

    print("\nDetection latency, y/N question on screen -> NEEDS_CONFIRMATION in status.db (s)")
    for interval in (1.0, 5.0):
        lat = detection_latency(interval, trials)
        print(f"  --interval {interval:g}: median {statistics.median(lat):.2f}, "
              f"max {max(lat):.2f} over {len(lat)} trials")

    print("\nNotification delay, y/N question on screen -> desktop notification on D-Bus (s)")
    for interval in (1.0, 5.0):
        delay = notification_delay(interval, trials)
        print(f"  --interval {interval:g}: median {statistics.median(delay):.2f}, "
              f"max {max(delay):.2f} over {len(delay)} trials")

    short, bare = startup(runs)
    print(f"\n`conductor pty status --short`: median {short:.1f} ms; `python3 -c pass`: "
          f"{bare:.1f} ms; ratio {short / bare:.2f}x ({runs} runs each)")


if __name__ == "__main__":
    main()
