#!/usr/bin/env python3
"""Benchmarks for conductor pty; prints figures, asserts nothing.

    .venv/bin/python -m scripts.bench            # everything
    .venv/bin/python -m scripts.bench --quick    # fewer repetitions

Figures:
- CPU per poll cycle for 10, 50 and 200 idle panes: our process plus its tmux client
  subprocesses, and the tmux server's share, for unchanged screens (the steady state) and for a
  cycle that recaptures every pane.
- Detection latency: from a y/N question appearing in a pane to NEEDS_CONFIRMATION in status.db,
  and to the desktop notification, for a real `conductor pty watch` with every default (control
  mode, --interval 5) and polling only (`[watch] events = false`) at --interval 1 and 5.
- Replayed turns: the shared timelines (tests/corpus/shared/*/timeline-*) shown in tmux panes with
  their timing; from each turn's end (the first idle frame) to READY in status.db, from each
  dialog to NEEDS_CONFIRMATION, and every READY reported while the screen was not idle.
- CPU per minute of a running watcher (its process, its tmux clients, control clients included)
  and of the tmux server, control mode against polling only, in one run: 50 idle panes, 10 panes
  printing nonstop plus 40 idle, 200 idle.
- Handing over at every default: `conductor pty wait` on a pane the watcher has seen READY for
  a while (wall time of the command), and a report whose check is `true` to its cycle's decision.
- `conductor pty status --short` wall time against `python3 -c pass`, same run.
- Usage reading (`--only usage`): ms per pane per tick of reading the agents' transcripts for
  tokens (app.observe.usage), first read, caught up, and with one new line each.
- Several hosts (`--only hosts`, scripts/bench_hosts.py): remote question and turn end against
  local ones over real sshd on loopback, CPU of 3 hosts x 20 idle panes and of 5 remote panes
  streaming (ours, sshd's, the remote tmux servers'), ssh processes per host; and the usage
  files of one host's 20 panes read over ssh (app.adapters.remote_tails): per tick once caught
  up and with a new line in each, ssh calls, wall and CPU here and in sshd.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import functools
import itertools
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.watcher import Watcher

REPO = Path(__file__).resolve().parent.parent


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


def watch_config(events: bool, extra: str = "") -> str:
    return f"[watch]\nevents = {'true' if events else 'false'}\n{extra}"


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


def detection_latency(interval: float, trials: int, events: bool) -> list[float]:
    """y/N question on screen -> NEEDS_CONFIRMATION in the store."""
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config.toml"
        config.write_text(watch_config(events))
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": folder, "CONDUCTOR_CONFIG": str(config)}
        return question_latency(interval, trials, env,
                                lambda db, _: state(db) == "NEEDS_CONFIRMATION")


def notification_delay(interval: float, trials: int, events: bool) -> list[float]:
    """y/N question on screen -> the desktop notification received on a private D-Bus session
    bus by a recording org.freedesktop.Notifications server (through the real notify-send)."""
    from tests.support.dbus_notifications import NotificationBus

    with tempfile.TemporaryDirectory() as folder:
        bus = NotificationBus(Path(folder)).start()
        config = Path(folder) / "config.toml"
        config.write_text(watch_config(events, "[notify]\nmin_interval = 0\n"
                                                   "[notify.tmux]\nenabled = false\n"))
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


def compile_app() -> None:
    """Write the bytecode of the code the start-up figure runs. An installed copy has it (pip
    compiles at install, a checkout at its first run), but under PYTHONDONTWRITEBYTECODE a
    checkout never writes it and every start recompiles each module it imports: that measures the
    compiler (more than the rest of the start-up together), not what a status line pays."""
    import app

    compileall.compile_dir(Path(app.__file__).parent, quiet=1)


def startup(runs: int) -> tuple[float, float]:
    compile_app()
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


# --- a running watcher's CPU ---------------------------------------------------------------------

PRINTER = "sh -c 'i=0; while :; do i=$((i+1)); echo line $i; sleep 0.05; done'"


def proc_cpu(pid: int) -> float:
    """CPU seconds of a process and its reaped children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and every descendant, live (control clients) or reaped."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += proc_cpu(current)
        todo += parents.get(current, [])
    return total


def rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        return int(conn.execute("SELECT count(*) FROM status").fetchone()[0])


def watcher_cost(panes: int, streaming: int, seconds: float, events: bool
                 ) -> tuple[float, float]:
    """(watcher CPU s/min, tmux server CPU s/min) with every other setting at its default."""
    with tmux_server(panes) as socket, tempfile.TemporaryDirectory() as folder:
        for index in range(streaming):
            tmux(socket, "respawn-window", "-k", "-t", f"bench:{index}", PRINTER)
        config = Path(folder) / "config.toml"
        config.write_text(watch_config(events, "[notify]\nstates = []\n"))
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": folder, "CONDUCTOR_CONFIG": str(config)}
        daemon = subprocess.Popen([*conductor_argv(), "-L", socket, "pty", "watch", "-q"],
                                  env=env, cwd=REPO)
        try:
            db = Path(folder) / "status.db"
            wait_for(lambda: db.exists() and rows(db) >= panes, 60)
            time.sleep(6)  # past the first polls and the settling
            ours, server, started = tree_cpu(daemon.pid), server_cpu(socket), time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - started
            return ((tree_cpu(daemon.pid) - ours) / elapsed * 60,
                    (server_cpu(socket) - server) / elapsed * 60)
        finally:
            daemon.terminate()
            daemon.wait(timeout=15)


# --- recorded turns replayed into tmux -----------------------------------------------------------


class Replay:
    """One timeline's truth: (seconds, label) per frame."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = folder.parent.name
        lines = (folder / "frames.tsv").read_text(encoding="utf-8").splitlines()[1:]
        self.frames = [(float(t), label) for t, _, label in (ln.split("\t") for ln in lines if ln)]

    def truth(self, t: float) -> str:
        label = self.frames[0][1]
        for at, frame_label in self.frames:
            if at > t:
                break
            label = frame_label
        return label

    def starts_of(self, state: str) -> list[float]:
        return [at for (_, before), (at, label) in itertools.pairwise(self.frames)
                if label == state and before != state]

    def leaves_ready(self) -> list[float]:
        return [at for (_, before), (at, label) in itertools.pairwise(self.frames)
                if before == "READY" and label != "READY"]


TITLED = {"claude-code": "claude", "codex": "codex"}  # the timelines' CLIs that set titles


def replay_turns(events: bool, titles: bool = False
                 ) -> dict[str, tuple[list[float], list[float], list[float], list[float]]]:
    """Per timeline: (turn end -> READY s, dialog -> NEEDS_CONFIRMATION s, idle screen left ->
    store left READY s, times READY was reported while the screen was not idle). With
    ``titles``, only the timelines of CLIs that set titles, each frame with its title."""
    replays = [Replay(f) for f in sorted((REPO / "tests/corpus/shared").glob("*/timeline-*"))
               if not titles or f.parent.name in TITLED]
    changes: dict[str, list[tuple[float, str]]] = {r.name: [] for r in replays}
    with tmux_server(1) as socket, tempfile.TemporaryDirectory() as folder:
        start_file = Path(folder) / "start"
        for replay in replays:
            tmux(socket, "new-window", "-d", "-n", replay.name, sys.executable,
                 str(REPO / "scripts/replay_timeline.py"), str(replay.folder), str(start_file),
                 *([TITLED[replay.name]] if titles else []))
        config = Path(folder) / "config.toml"
        config.write_text(watch_config(events, "[notify]\nstates = []\n"))
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": folder, "CONDUCTOR_CONFIG": str(config)}
        daemon = subprocess.Popen([*conductor_argv(), "-L", socket, "pty", "watch", "-q"],
                                  env=env, cwd=REPO)
        db = Path(folder) / "status.db"
        try:
            wait_for(lambda: db.exists() and None not in states(db, changes).values(), 60)
            with contextlib.suppress(TimeoutError):  # past first sight; aider's frame 0 stays
                wait_for(lambda: list(states(db, changes).values()).count("UNKNOWN") <= 1, 30)
            start = time.time() + 0.5
            start_file.write_text(repr(start))
            stop = threading.Event()

            def sample() -> None:
                last: dict[str, str | None] = {}
                while not stop.is_set():
                    try:
                        now = states(db, changes)
                    except sqlite3.Error:
                        continue
                    at = time.time() - start
                    for name, value in now.items():
                        if value != last.get(name) and value is not None:
                            changes[name].append((at, value))
                            last[name] = value
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            # Long enough after the last frame for the poller's READY at --interval 5.
            time.sleep(max(r.frames[-1][0] for r in replays) + 25 + start - time.time())
            stop.set()
            sampler.join()
        finally:
            daemon.terminate()
            daemon.wait(timeout=15)
    results = {}
    for replay in replays:
        seen = changes[replay.name]

        def first(state: str, after: float, differs: bool = False,
                  seen: list[tuple[float, str]] = seen) -> float:
            before = [v for t, v in seen if t < after]
            current = before[-1] if before else None
            if (current != state) if differs else (current == state):
                return 0.0
            for t, value in seen:
                if t >= after and ((value != state) if differs else (value == state)):
                    return t - after
            return float("inf")

        results[replay.name] = (
            [first("READY", end) for end in replay.starts_of("READY")],
            [first("NEEDS_CONFIRMATION", at) for at in replay.starts_of("NEEDS_CONFIRMATION")],
            [first("READY", at, differs=True) for at in replay.leaves_ready()],
            [t for t, value in seen if value == "READY" and t > 0
             and replay.truth(t) != "READY"],
        )
    return results


def states(db: Path, names: Mapping[str, object]) -> dict[str, str | None]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        found = dict(conn.execute(
            "SELECT p.name, s.state FROM ptys p LEFT JOIN status s ON s.id = p.id").fetchall())
    return {name: found.get(name) for name in names}


# --- handing over: wait and the report cycle ------------------------------------------------------

def handoff_times(runs: int) -> tuple[list[float], list[float]]:
    """(wall seconds of `conductor pty wait` on a pane the daemon has seen READY for a while,
    seconds from a report with check `true` to its cycle's decision), with every default (control
    mode, --interval 5), the pane running tests/support/fake_agent.py (Claude Code's screens)."""
    agent = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
    with tmux_server(1) as socket, tempfile.TemporaryDirectory() as folder:
        tmux(socket, "respawn-pane", "-k", "-t", "bench:0", agent)
        db = Path(folder) / "status.db"
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": folder,
               "CONDUCTOR_CONFIG": str(Path(folder) / "config.toml")}
        daemon = subprocess.Popen([*conductor_argv(), "-L", socket, "pty", "watch", "-q"],
                                  env=env, cwd=REPO)
        pane = tmux(socket, "display-message", "-p", "-t", "bench:0", "#{pane_id}").strip()
        try:
            wait_for(lambda: state(db) == "READY", 30)
            time.sleep(5)  # READY for a while: what the user had open for minutes
            waits = [ms / 1000 for ms in wall_times(
                [*conductor_argv(), "-L", socket, "pty", "wait", pane, "--timeout", "30"], runs,
                env)]
            decisions = []
            for _ in range(max(3, runs // 2)):
                done = subprocess.run([*conductor_argv(), "-L", socket, "pty", "report", pane,
                                       "done", "--wait-cmd", "true"], env=env, cwd=REPO,
                                      capture_output=True, text=True, check=True)
                words = done.stdout.split()
                seq = int(words[words.index("job") + 1].rstrip(";"))
                decisions.append(job_decided(db, seq))
                wait_for(lambda: state(db) == "READY", 30)
        finally:
            daemon.terminate()
            daemon.wait(timeout=15)
    return waits, decisions


def job_decided(db: Path, seq: int) -> float:
    """Seconds from the cycle job's creation to its decision, both as the store has them."""
    found: list[tuple[float, float]] = []

    def decided() -> bool:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            found[:] = conn.execute("SELECT created_ts, done_ts FROM jobs WHERE seq = ? AND "
                                    "done_ts IS NOT NULL", (seq,)).fetchall()
        return bool(found)

    wait_for(decided, 60)
    return found[0][1] - found[0][0]


# --- real agents: the turn's end, as the terminal's signals and the hooks tell it ----------------

def agent_turn_ends(cli: str, version: str, hooks: bool, turns: int
                    ) -> tuple[list[float], int, list[float]]:
    """(seconds from the fake model's last byte of each turn to READY in status.db, how many
    times READY was stored between a prompt's Enter and its turn's end, seconds from the turn's
    turn-end hook event (its time in the events table) to READY) for the real CLI against
    the fake model server, with a real `conductor pty watch` at every default; with ``hooks``
    the CLI's hooks (Codex: notify) are installed, without them only the screen and the
    terminal's signals tell."""
    from tests.support import agents
    from tests.support.scripted_model import Say

    with tempfile.TemporaryDirectory() as folder:
        root, workers = Path(folder) / "lab", Path(folder) / "workers"
        root.mkdir()
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": str(workers),
               "CONDUCTOR_CONFIG": str(Path(folder) / "config.toml")}
        if cli == "claude":
            lab: agents.AgentInTmux = agents.ClaudeInTmux(
                root, agents.install_claude(version=version).binary,
                env={"CONDUCTOR_WORKERS_DIR": str(workers)})
        else:
            kind = agents.OldCodexInTmux if version in ("0.142.5", "0.152.0") \
                else agents.CodexInTmux
            lab = kind(root, agents.install_codex(version=version).binary,
                       env={"CONDUCTOR_WORKERS_DIR": str(workers)})
        if hooks:
            subprocess.run([*conductor_argv(), "pty", "hooks", "install", "--cli", lab.cli,
                            "--path", str(lab.hooks_path)], env=env, check=True,
                           capture_output=True)
        with lab:
            daemon = subprocess.Popen([*conductor_argv(), "-L", lab.socket_name, "pty", "watch",
                                       "-q"], env=env, cwd=REPO)
            db = workers / "status.db"
            latencies, early, after_hook = [], 0, []
            try:
                wait_for(lambda: db.exists() and state(db) == "READY", 60)
                for turn in range(turns):
                    lab.server.queue(Say.words(12, delay=0.1))
                    lab.type_text(f"say something, turn {turn}")
                    time.sleep(0.3)
                    ends = len(lab.server.turn_ends())
                    lab.send_keys("Enter")
                    left = [False]

                    def turn_over(ends: int = ends, left: list[bool] = left) -> bool:
                        nonlocal early
                        now_state = state(db)
                        if len(lab.server.turn_ends()) > ends:
                            return True
                        if now_state != "READY":
                            left[0] = True
                        elif left[0]:
                            early += 1  # READY again before the turn ended
                            left[0] = False
                        return False

                    wait_for(turn_over, 60)
                    end = lab.server.turn_ends()[ends]
                    wait_for(lambda: state(db) == "READY", 30)
                    ready = time.time()
                    latencies.append(max(0.0, ready - end))
                    if hooks:
                        with contextlib.suppress(TimeoutError):
                            wait_for(functools.partial(hook_heard, db, end), 10)
                            after_hook.append(max(0.0, ready - (hook_end(db, end) or ready)))
                    time.sleep(1.0)
            finally:
                daemon.terminate()
                daemon.wait(timeout=15)
    return latencies, early, after_hook


def hook_heard(db: Path, after: float) -> bool:
    return hook_end(db, after) is not None


def hook_end(db: Path, after: float) -> float | None:
    """The time of the first turn-end hook event recorded after ``after`` (epoch s)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute("SELECT min(ts) FROM events WHERE kind = 'hook' AND "
                           "event IN ('turn_end', 'idle') AND ts > ?", (after - 1,)).fetchone()
    return float(row[0]) if row and row[0] is not None else None


def figures(values: list[float]) -> str:
    """Median, p90 (from 10 values on) and max; a value never reached (inf: the watcher missed
    it) is counted apart."""
    seen = [v for v in values if v != float("inf")]
    missed = f", missed {len(values) - len(seen)}" if len(seen) < len(values) else ""
    if not seen:
        return f"none seen (n={len(values)}{missed})"
    p90 = f", p90 {statistics.quantiles(seen, n=10)[-1]:.2f}" if len(seen) >= 10 else ""
    return (f"median {statistics.median(seen):.2f}{p90}, max {max(seen):.2f} "
            f"(n={len(values)}{missed})")


SECTIONS = ("cycles", "latency", "replay", "cost", "handoff", "startup", "agents", "hosts",
            "usage", "gemini")


GEMINI_INSTALL_ENV = "CONDUCTOR_BENCH_GEMINI"  # an npm prefix holding @google/gemini-cli@0.61.0


def gemini_section(turns: int) -> None:
    """Gemini CLI 0.61.0 turn end -> READY as the lab runs it and as a user does (issue 31: a
    user measured 3.3 s where the lab measured 0.05-0.08 s)."""
    from scripts import record_signals

    install = Path(os.environ.get(GEMINI_INSTALL_ENV) or
                   Path.home() / ".cache" / "conductor-pty" / "agents" / "gemini-cli-0.61.0")
    print("\nGemini CLI 0.61.0 against scripts/lab's fake server, every default (s): the model's "
          "last byte -> READY; the CLI's idle screen drawn -> READY")
    if not install.is_dir():
        print(f"  not measured: no {install} (npm install --prefix {install} "
              f"@google/gemini-cli@0.61.0, or name such a prefix in ${GEMINI_INSTALL_ENV})")
        return
    user = {"more_panes": 3, "split": True, "shells": 2, "status_line": True}
    for label, options in (("the lab: one pane, no status line, no hooks", {}),
                           ("the user's: 4 Gemini + 2 shells tiled, a client, status line "
                            "every 1 s, hooks as installed", {**user, "hooks": True}),
                           ("the same, every hook synchronous (the install before issue 31)",
                            {**user, "hooks": True, "sync_hooks": True}),
                           ("the same as installed, the 3 other sessions streaming all along",
                            {**user, "hooks": True, "busy_others": True})):
        got = record_signals.measure_lab("gemini", install, turns, **options)  # type: ignore[arg-type]
        print(f"  {label}:\n    end->READY {figures(got.latencies)}; drawn->READY "
              f"{figures(got.after_drawn)}; READY before the end {got.early} "
              f"(load {os.getloadavg()[0]:.1f})")


def hosts_section(trials: int, seconds: float) -> None:
    """Several hosts over real sshd on loopback (scripts/bench_hosts.py)."""
    from scripts import bench_hosts

    print("\nSeveral hosts over ssh on loopback, every default (control mode over ssh) (s):")
    for what, values in sorted(bench_hosts.latencies(trials).items()):
        print(f"  {what:22} {figures(values)}")
    print(f"CPU per minute over ssh (s/min; {seconds:g} s each; ours = watcher tree, its ssh "
          "clients and masters included; sshd = the sshd serving it; tmux = the remote tmux "
          "servers):")
    for hosts, panes, streaming in ((3, 20, 0), (1, 5, 5)):
        ours, sshd, servers, ssh = bench_hosts.cost(hosts, panes, streaming, seconds)
        what = f"{hosts} hosts x {panes} panes" + (f", {streaming} printing" if streaming
                                                   else ", idle")
        per_host = ", ".join(f"{m} master + {c} clients" for m, c in ssh)
        print(f"  {what:28} ours {ours:6.2f}  sshd {sshd:6.2f}  tmux {servers:6.2f}; ssh "
              f"processes per host: {per_host}")
    scale_section(trials, seconds)


def remote_usage_section(ticks: int, files: int = 20, lines: int = 2000) -> None:
    """A host's usage files read over ssh as its watcher does, all in one call per tick."""
    from scripts import bench_hosts

    f = bench_hosts.remote_usage(files, lines, ticks)
    print(f"\nUsage of one host's panes over ssh on loopback ({files} Claude transcripts of "
          f"{lines} lines there): first read {f['first_ms']:.0f} ms in {f['first_calls']:.0f} "
          "ssh calls")
    for label, what in (("caught_up", "caught up"), ("one_line", "one new line in each")):
        print(f"  per tick, {what:21} ssh calls {f[label + '_calls']:.1f}  wall "
              f"{f[label + '_wall_ms']:5.1f} ms  CPU ours {f[label + '_ours_ms']:5.1f} ms "
              f"(ssh client and master included)  sshd {f[label + '_sshd_ms']:5.1f} ms "
              f"(load {os.getloadavg()[0]:.1f})")


def scale_section(trials: int, seconds: float, hosts: int = 10, panes: int = 50) -> None:
    """Many hosts at once: a remote question beside a local one, and what it all costs."""
    from scripts import bench_hosts

    found, cpu, listing = bench_hosts.scale(hosts, panes, trials, seconds)
    own, children, masters, sshd, servers = cpu
    print(f"\n{hosts} hosts x {panes} idle panes over ssh on loopback, every default "
          f"(all listed {listing:.1f} s after the start):")
    for what, values in sorted(found.items()):
        print(f"  {what:22} -> NEEDS_CONFIRMATION {figures(values)}")
    print(f"  CPU s/min over {seconds:g} s: ours {own + children + masters:6.2f} (watcher "
          f"{own:.2f}, its ssh calls and control clients {children:.2f}, ssh masters "
          f"{masters:.2f})  sshd {sshd:6.2f}  tmux {servers:6.2f}  "
          f"(load {os.getloadavg()[0]:.1f})")


def usage_reading(panes: int, lines: int, ticks: int) -> tuple[float, float, float]:
    """Ms per pane per tick of the watcher's usage reading (app.observe.usage): the first read
    of ``panes`` Claude transcripts of ``lines`` assistant lines each, then caught up (nothing
    new: one stat each), then with one new line per pane per tick."""
    def line(no: int) -> str:
        return json.dumps({"type": "assistant", "timestamp": "2026-11-28T02:31:00.000Z",
                           "message": {"id": f"msg_{no}", "model": "claude-opus-4-5",
                                       "content": [{"type": "text", "text": "x" * 400}],
                                       "usage": {"input_tokens": 100, "output_tokens": 40}}})

    with tempfile.TemporaryDirectory() as tmp, tmux_server(panes) as socket:
        store = StoreWriter(Path(tmp) / "workers")
        watcher = Watcher(Tmux(socket_name=socket), store, load_packs(), WatchSettings())
        watcher.tick()
        files = {}
        with store.transaction() as conn:
            for wid, tracked in watcher.tracked.items():
                # The pane runs a shell here: it stands for a Claude Code pane.
                tracked.stored.pty_row = {**(tracked.pty_row or {}), "cli_type": "claude"}
                path = Path(tmp) / f"{wid}.jsonl"
                path.write_text("".join(line(n) + "\n" for n in range(lines)))
                files[wid] = path
                store.events.add_event(conn, {
                    "ts": time.time(), "kind": "hook", "event": "session_start", "cli": "claude",
                    "pane_id": tracked.pane.pane_id,
                    "server_pid": (tracked.pty_row or {}).get("server_pid"),
                    "session_id": f"s-{wid}", "transcript": str(path)})
        reader = watcher.usage
        started = time.perf_counter()
        reader.read(watcher.tracked, time.time())
        first = (time.perf_counter() - started) * 1000 / panes
        started = time.perf_counter()
        for _ in range(ticks):
            reader.read(watcher.tracked, time.time())
        caught_up = (time.perf_counter() - started) * 1000 / panes / ticks
        spent = 0.0
        for tick in range(ticks):
            for path in files.values():
                with path.open("a") as f:
                    f.write(line(lines + tick) + "\n")
            started = time.perf_counter()
            reader.read(watcher.tracked, time.time())
            spent += time.perf_counter() - started
        store.close()
    return first, caught_up, spent * 1000 / panes / ticks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", action="append", choices=SECTIONS,
                        help="run only this part (repeatable)")
    args = parser.parse_args()
    only = set(args.only or SECTIONS)
    cycles, trials, runs, cost_s = (5, 3, 10, 15.0) if args.quick else (20, 6, 30, 40.0)

    print(f"# conductor pty benchmarks ({os.cpu_count()} cores, tmux "
          f"{subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()})")
    print("\nCPU per poll cycle (ms): ours = this process + its tmux clients; server = tmux server")
    print(f"{'panes':>6} {'unchanged ours':>15} {'server':>8} {'all recaptured ours':>20} "
          f"{'server':>8}")
    for panes in (10, 50, 200) if "cycles" in only else ():
        ours, server, full, full_server = cycle_cpu(panes, cycles)
        print(f"{panes:>6} {ours:>15.1f} {server:>8.1f} {full:>20.1f} {full_server:>8.1f}")

    modes = [("control mode (default), --interval 5", 5.0, True),
             ("polling only, --interval 1", 1.0, False),
             ("polling only, --interval 5", 5.0, False)]
    print("\nDetection latency, y/N question on screen -> NEEDS_CONFIRMATION in status.db (s)")
    for label, interval, events in modes if "latency" in only else []:
        print(f"  {label}: {figures(detection_latency(interval, trials, events))}")

    print("\nNotification delay, y/N question on screen -> desktop notification on D-Bus (s)")
    for label, interval, events in modes if "latency" in only else []:
        print(f"  {label}: {figures(notification_delay(interval, trials, events))}")

    print("\nReplayed turns (tests/corpus/shared/*/timeline-*), every default but the mode (s)")
    for label, events, titles in (("control mode (default)", True, False),
                                  ("polling only", False, False),
                                  ("control mode, each frame with its CLI's title", True, True)) \
            if "replay" in only else ():
        results = replay_turns(events, titles)
        print(f"  {label}:")
        for name, (ends, dialogs, leaves, early) in results.items():
            print(f"    {name:12} end->READY {figures(ends)}; dialog->NEEDS_CONFIRMATION "
                  f"{figures(dialogs)}; idle screen left->not READY {figures(leaves)}; "
                  f"READY while not idle: {len(early)}")
        every = [list(itertools.chain.from_iterable(r[i] for r in results.values()))
                 for i in range(4)]
        print(f"    all: end->READY {figures(every[0])}; dialog->NEEDS_CONFIRMATION "
              f"{figures(every[1])}; READY while not idle: {len(every[3])}")

    print(f"\nCPU per minute of a running watcher (s/min; {cost_s:g} s each; ours = watcher, "
          "its tmux calls and control clients; server = tmux server)")
    for panes, streaming in ((50, 0), (50, 10), (200, 0)) if "cost" in only else ():
        what = f"{panes} panes" + (f", {streaming} printing nonstop" if streaming else ", idle")
        for label, events in (("control mode", True), ("polling only", False)):
            ours, server = watcher_cost(panes, streaming, cost_s, events)
            # CPU seconds hold up fairly well under load, but not entirely: say what it was.
            print(f"  {what:32} {label:13} ours {ours:6.2f}  server {server:6.2f}  "
                  f"(load {os.getloadavg()[0]:.1f})")

    if "agents" in only:
        print("\nReal agents against the fake model, every default (s): the model's last byte of "
              "a turn -> READY in status.db; READY stored before a turn ended")
        for cli, version in (("claude", "2.1.197"), ("codex", "0.169.0"), ("codex", "0.142.5")):
            for hooks in (False, True):
                try:
                    latencies, early_count, after_hook = agent_turn_ends(cli, version, hooks,
                                                                   max(4, trials))
                except Exception as exc:  # an agent that cannot run here is a line, not a stop
                    print(f"  {cli} {version}: not measured ({type(exc).__name__}: {exc})")
                    continue
                how = "hooks + terminal signals" if hooks else "terminal signals, no hooks"
                hooked = f"; the hook's event->READY {figures(after_hook)}" if hooks else ""
                print(f"  {cli} {version:8} {how:26} end->READY {figures(latencies)}{hooked}; "
                      f"READY before the end: {early_count}")

    if "handoff" in only:
        waits, decisions = handoff_times(runs)
        print("\nHanding over, every default (s): `conductor pty wait` on a pane READY for a "
              f"while (wall, the CLI's start included): {figures(waits)}; a report with check "
              f"`true` -> its cycle's decision: {figures(decisions)}")

    if "usage" in only:
        panes, lines = 50, 2000
        first, caught_up, one_line = usage_reading(panes, lines, cycles)
        print(f"\nUsage reading per pane per tick (ms; {panes} Claude transcripts of {lines} "
              f"lines): first read {first:.2f}; caught up {caught_up:.3f}; one new line "
              f"{one_line:.3f} (store write included)")

    if "hosts" in only:
        hosts_section(trials, cost_s)
        remote_usage_section(cycles)
    if "gemini" in only:
        gemini_section(max(10, trials))
    if "startup" not in only:
        return
    short, bare = startup(runs)
    print(f"\n`conductor pty status --short`: median {short:.1f} ms; `python3 -c pass`: "
          f"{bare:.1f} ms; ratio {short / bare:.2f}x ({runs} runs each)")


if __name__ == "__main__":
    main()
