#!/usr/bin/env python3
"""The real Claude Code or Codex in tmux against a fake model: how soon after a turn truly ends
does `conductor pty wait` return? Prints figures, asserts nothing.

    .venv/bin/python -m scripts.agent_trial               # Claude: 5 turns without hooks, 5 with
    .venv/bin/python -m scripts.agent_trial --cli codex   # the same for Codex (hook: `notify`)
    .venv/bin/python -m scripts.agent_trial --screen-only # no conductor: what the screen shows

Figures, per mode (without hooks, with the CLI's hooks installed):
- lag from the fake server's last byte of the turn to `wait --until READY` exiting (median,
  max) and how many times it returned before that last byte (must be 0);
- lag from that last byte to the finished-turn screen (Claude: the idle prompt; Codex: the
  `Worked for …` mark right above the composer), and how long after Enter (after `send`
  started, its start-up included) the screen still looked finished (polled every ~20 ms by the
  script itself);
- the wall time of one hook call as installed, fed a real turn-end payload (median of 50);
- with --watcher, a real `conductor pty watch` (every default: control mode) runs beside: lag
  from the turn's last byte to READY in status.db, and how many times the store said READY
  during a turn (after the pane was seen leaving READY, before the last byte; must be 0).
The CLI is installed into $CONDUCTOR_AGENT_CACHE on first use (see tests/support/agents.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.agents import (
    AgentInTmux,
    ClaudeInTmux,
    CodexInTmux,
    Install,
    install_claude,
    install_codex,
)
from tests.support.scripted_model import Say
from tests.support.waiting import retry_until

REPO = Path(__file__).resolve().parent.parent

BUSY = "esc to interrupt"  # both CLIs, while they wait for the model or run a tool


def claude_finished(screen: str) -> bool:
    return "? for shortcuts" in screen and BUSY not in screen


def codex_finished(screen: str) -> bool:
    """The composer (the last line starting with U+203A) right under a `Worked for` mark. Codex
    shows no busy marker while text streams, and its idle footer never leaves the screen."""
    lines = [line for line in screen.splitlines() if line.strip()]
    composer = max((n for n, line in enumerate(lines) if line.startswith("› ")), default=0)
    return (composer > 0 and lines[composer - 1].lstrip().startswith("Worked for ")
            and BUSY not in screen)


@dataclass(frozen=True)
class Cli:
    label: str
    install: Callable[[], Install]
    lab: Callable[..., AgentInTmux]  # (root, binary, env=...)
    finished: Callable[[str], bool]  # the screen of a finished turn
    busy: Callable[[str], bool]  # the screen has visibly left the finished one


CLIS = {
    "claude": Cli("Claude Code", install_claude, ClaudeInTmux, claude_finished,
                  lambda screen: BUSY in screen),
    # Its streaming screen has no marker: anything but the finished screen is busy.
    "codex": Cli("Codex", install_codex, CodexInTmux, codex_finished,
                 lambda screen: not codex_finished(screen)),
}


@dataclass
class Turn:
    sent: float  # time.time() just before Enter went out
    ended: float | None = None  # the fake server's last byte
    returned: float | None = None  # `wait` exited (None in --screen-only)
    screen_idle: float | None = None  # first capture after `ended` showing the idle prompt
    still_idle_after_send: float | None = None  # last capture after `sent` that looked idle
    stored_ready: float | None = None  # --watcher: READY in status.db after `ended`
    stored_early: int = 0  # --watcher: READY in status.db during the turn


@dataclass
class StoreWatch:
    """Reads the pane's state from status.db every ~20 ms in a thread; keeps the changes."""

    db: Path
    socket: str  # the lab's tmux socket: a store shared by two labs holds both their "%0"s
    pane_id: str
    changes: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = None
        while not self._stop.wait(0.02):
            try:
                with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1) as conn:
                    row = conn.execute("SELECT s.state FROM status s JOIN ptys p ON p.id = s.id "
                                       "WHERE p.pane_id = ? AND p.socket = ?",
                                       (self.pane_id, self.socket)).fetchone()
            except sqlite3.Error:
                continue
            if row and row[0] != last:
                last = row[0]
                self.changes.append((time.time(), row[0]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def judge(self, turn: Turn) -> None:
        if turn.ended is None:
            return
        left = next((t for t, state in self.changes if t >= turn.sent and state != "READY"),
                    None)
        turn.stored_early = sum(1 for t, state in self.changes
                                if state == "READY" and left is not None and left < t < turn.ended)
        turn.stored_ready = next((t for t, state in self.changes
                                  if t >= turn.ended and state == "READY"), None)


@dataclass
class ScreenWatch:
    """Captures the pane every ~20 ms in a thread and keeps (time, idle?, busy?) samples."""

    lab: AgentInTmux
    cli: Cli
    samples: list[tuple[float, bool, bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                screen = self.lab.capture()
            except RuntimeError:
                continue
            self.samples.append((time.time(), self.cli.finished(screen),
                                 self.cli.busy(screen)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def first_idle_after(self, t: float) -> float | None:
        return next((s for s, idle, _ in self.samples if s >= t and idle), None)

    def last_idle_before_busy(self, t: float) -> float | None:
        """The last idle-looking sample after ``t`` before the first busy one."""
        last = None
        for s, idle, busy in self.samples:
            if s < t:
                continue
            if busy:
                break
            if idle:
                last = s
        return last


def pty(lab: AgentInTmux, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "-L", lab.socket_name, "pty", *args],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=120,
    )


def run_turns(lab: AgentInTmux, cli: Cli, count: int, task: Say,
              screen_only: bool, store: StoreWatch | None = None) -> list[Turn]:
    watch = ScreenWatch(lab, cli)
    turns = []
    try:
        for n in range(count):
            lab.server.queue(task)
            turn = Turn(sent=time.time())
            if screen_only:
                lab.type_text(f"Task {n}: write a slow answer")
                time.sleep(0.3)  # Codex reads an Enter right after typing as part of a paste
                turn.sent = time.time()
                lab.send_keys("Enter")
                turn.ended = lab.server.wait_for_turn_end(n + 1, 120)
                retry_until(lambda: cli.finished(lab.capture()), 30, interval=0.05)
            else:
                sent = pty(lab, "send", lab.pane_id, f"Task {n}: write a slow answer")
                if sent.returncode != 0:
                    raise SystemExit(f"send failed: {sent.stderr}")
                waited = pty(lab, "wait", lab.pane_id, "--until", "READY", "--timeout", "90")
                turn.returned = time.time()
                if waited.returncode != 0:
                    raise SystemExit(f"wait exited {waited.returncode}: {waited.stderr}")
                ends = lab.server.turn_ends()
                turn.ended = ends[n] if len(ends) > n else None
                lab.server.wait_for_turn_end(n + 1, 120)  # an early return still needs the end
            time.sleep(1.0)  # the screen settles before the next task
            turns.append(turn)
    finally:
        watch.stop()
    for turn in turns:
        turn.still_idle_after_send = watch.last_idle_before_busy(turn.sent)
        if turn.ended is not None:
            turn.screen_idle = watch.first_idle_after(turn.ended)
        if store is not None:
            store.judge(turn)
    return turns


def hook_call_seconds(lab: AgentInTmux, calls: int) -> tuple[str, list[float]]:
    """Run the hook exactly as the CLI would, as installed, fed a real turn-end payload."""
    shown, argv, stdin = codex_hook(lab) if isinstance(lab, CodexInTmux) else claude_hook(lab)
    where = lab.tmux("display-message", "-p", "-t", lab.pane_id,
                     "#{socket_path},#{pid},#{session_id}").strip().replace("$", "")
    env = {**lab.pane_env(), "TMUX": where, "TMUX_PANE": lab.pane_id}
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        done = subprocess.run(argv, input=stdin, text=True, capture_output=True, env=env,
                              cwd=lab.project, check=False)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"hook exited {done.returncode}: {done.stderr}")
    return shown, times


def claude_hook(lab: AgentInTmux) -> tuple[str, list[str], str]:
    """The Stop hook's command, run by a shell, the payload on stdin."""
    command = f"{shlex.quote(str(REPO / '.venv' / 'bin' / 'conductor'))} pty hook"
    if lab.hooks_path.exists():
        hooks = json.loads(lab.hooks_path.read_text()).get("hooks", {})
        for entry in hooks.get("Stop", []):
            for hook in entry.get("hooks", []):
                command = hook.get("command", command)
    payload = json.dumps({
        "session_id": "52e4b727-7155-4bde-94da-a8b9a4460c82",
        "transcript_path": str(lab.home / ".claude" / "projects" / "p" / "s.jsonl"),
        "cwd": str(lab.project), "prompt_id": "9fcd62ff-074f-4c04-8203-b6c702a4b63e",
        "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "Stop",
        "stop_hook_active": False, "last_assistant_message": "The command finished.",
        "background_tasks": [], "session_crons": [],
    })
    return command, ["/bin/sh", "-c", command], payload


def codex_hook(lab: AgentInTmux) -> tuple[str, list[str], str]:
    """The `notify` argv, the payload appended as its last argument, nothing on stdin."""
    import tomlkit

    notify = tomlkit.parse(lab.hooks_path.read_text()).unwrap().get("notify")
    if not isinstance(notify, list):
        notify = [str(REPO / ".venv" / "bin" / "conductor"), "pty", "hook", "--cli", "codex"]
    payload = json.dumps({  # as Codex 0.169.0 sent it at the end of a turn
        "type": "agent-turn-complete", "thread-id": "01a204cf-8cf4-73e2-98c8-4c6acfbd582e",
        "turn-id": "01a204cf-8e3f-7150-8f74-e1fe781a9542", "cwd": str(lab.project),
        "client": "codex-tui", "input-messages": ["Task 0: write a slow answer"],
        "last-assistant-message": "lorem ipsum dolor sit amet",
    }, separators=(",", ":"))
    return shlex.join(notify), [*notify, payload], ""


def report(label: str, turns: list[Turn]) -> None:
    def ms(values: list[float]) -> str:
        if not values:
            return "n/a"
        return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"

    print(f"\n{label} ({len(turns)} turns)")
    if turns and turns[0].returned is not None:
        lags = [t.returned - t.ended for t in turns if t.returned and t.ended]
        early = sum(1 for t in turns if t.ended is None or (t.returned or 0) < t.ended)
        print(f"  turn end -> wait returned:  {ms(lags)}; returned early {early} times")
    idle = [t.screen_idle - t.ended for t in turns if t.screen_idle and t.ended]
    print(f"  turn end -> idle prompt:    {ms(idle)}")
    still = [t.still_idle_after_send - t.sent for t in turns if t.still_idle_after_send]
    start = "Enter" if turns and turns[0].returned is None else "`send` started"
    print(f"  {start} -> last idle screen: {ms(still)} ({len(still)}/{len(turns)} turns)")
    stored = [t.stored_ready - t.ended for t in turns if t.stored_ready and t.ended]
    if stored:
        early = sum(t.stored_early for t in turns)
        print(f"  turn end -> READY in status.db (watcher): {ms(stored)}; READY during a turn "
              f"{early} times")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", choices=sorted(CLIS), default="claude")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--hook-calls", type=int, default=50)
    parser.add_argument("--words", type=int, default=24, help="words per answer")
    parser.add_argument("--delay", type=float, default=0.25, help="seconds between words")
    parser.add_argument("--screen-only", action="store_true",
                        help="drive the pane with tmux send-keys; no conductor commands")
    parser.add_argument("--watcher", action="store_true",
                        help="run `conductor pty watch` beside and measure READY in its store")
    args = parser.parse_args()

    cli = CLIS[args.cli]
    install = cli.install()
    took = "cached" if install.seconds is None else f"installed in {install.seconds:.1f} s"
    print(f"{cli.label} at {install.binary} ({took}, {install.size_bytes / 1e6:.0f} MB)")
    task = Say.words(args.words, args.delay)
    with tempfile.TemporaryDirectory(prefix="agent-trial-") as scratch:
        root = Path(scratch)
        os.environ["CONDUCTOR_WORKERS_DIR"] = str(root / "workers")
        # Every default, and never the user's own config file.
        os.environ["CONDUCTOR_CONFIG"] = str(root / "config.toml")
        env = {"CONDUCTOR_WORKERS_DIR": str(root / "workers"),
               "CONDUCTOR_CONFIG": str(root / "config.toml")}
        modes = [("without hooks", False)] + ([] if args.screen_only else [("with hooks", True)])
        for label, hooks in modes:
            lab = cli.lab(root / label.replace(" ", "-"), install.binary, env=env)
            if hooks:
                done = pty(lab, "hooks", "install", "--cli", lab.cli,
                           "--path", str(lab.hooks_path))
                if done.returncode != 0:
                    raise SystemExit(f"hooks install failed: {done.stderr}")
            with lab:
                daemon = store = None
                if args.watcher:
                    daemon = subprocess.Popen(
                        [sys.executable, "-m", "app", "-L", lab.socket_name, "pty", "watch",
                         "-q"], cwd=REPO, env={**os.environ, **env})
                    store = StoreWatch(root / "workers" / "status.db", lab.socket_name,
                                       lab.pane_id)
                try:
                    report(label, run_turns(lab, cli, args.turns, task, args.screen_only,
                                            store))
                finally:
                    if store is not None:
                        store.stop()
                    if daemon is not None:
                        daemon.terminate()
                        daemon.wait(timeout=15)
                if hooks:
                    command, times = hook_call_seconds(lab, args.hook_calls)
                    print(f"\n`{command}` x{len(times)}: median "
                          f"{statistics.median(times) * 1000:.0f} ms, "
                          f"max {max(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
