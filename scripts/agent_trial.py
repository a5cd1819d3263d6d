#!/usr/bin/env python3
"""The real Claude Code in tmux against a fake model: how soon after a turn truly ends does
`conductor pty wait` return? Prints figures, asserts nothing.

    .venv/bin/python scripts/agent_trial.py               # 5 turns without hooks, 5 with
    .venv/bin/python scripts/agent_trial.py --screen-only # no conductor: what the screen shows

Figures, per mode (without hooks, with Claude's hooks installed):
- lag from the fake server's last byte of the turn to `wait --until READY` exiting (median,
  max) and how many times it returned before that last byte (must be 0);
- lag from that last byte to Claude's idle prompt on screen, and how long after Enter (after
  `send` started, its start-up included) the screen still looked idle (polled every ~20 ms by
  the script itself);
- the wall time of one `conductor pty hook` call fed a real Stop payload (median of 50).
Claude Code is installed into $CONDUCTOR_AGENT_CACHE on first use (see tests/agents.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from tests.agents import ClaudeInTmux, install_claude  # noqa: E402
from tests.fake_anthropic import Say  # noqa: E402

IDLE = "? for shortcuts"
BUSY = "esc to interrupt"


@dataclass
class Turn:
    sent: float  # time.time() just before Enter went out
    ended: float | None = None  # the fake server's last byte
    returned: float | None = None  # `wait` exited (None in --screen-only)
    screen_idle: float | None = None  # first capture after `ended` showing the idle prompt
    still_idle_after_send: float | None = None  # last capture after `sent` that looked idle


@dataclass
class ScreenWatch:
    """Captures the pane every ~20 ms in a thread and keeps (time, idle?, busy?) samples."""

    lab: ClaudeInTmux
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
            self.samples.append((time.time(), IDLE in screen and BUSY not in screen,
                                 BUSY in screen))

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


def pty(lab: ClaudeInTmux, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "-L", lab.socket_name, "pty", *args],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=120,
    )


def run_turns(lab: ClaudeInTmux, count: int, task: Say, screen_only: bool) -> list[Turn]:
    watch = ScreenWatch(lab)
    turns = []
    try:
        for n in range(count):
            lab.server.queue(task)
            turn = Turn(sent=time.time())
            if screen_only:
                lab.type_text(f"Task {n}: write a slow answer")
                turn.sent = time.time()
                lab.send_keys("Enter")
                turn.ended = lab.server.wait_for_turn_end(n + 1, 120)
                lab.wait_for_screen(r"\? for shortcuts", 30)
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
    return turns


def hook_call_seconds(lab: ClaudeInTmux, calls: int) -> tuple[str, list[float]]:
    """Run the hook command exactly as installed in settings.json, fed a Stop payload."""
    command = f"{shlex.quote(str(REPO / '.venv' / 'bin' / 'conductor'))} pty hook"
    if lab.settings_path.exists():
        hooks = json.loads(lab.settings_path.read_text()).get("hooks", {})
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
    where = lab.tmux("display-message", "-p", "-t", lab.pane_id,
                     "#{socket_path},#{pid},#{session_id}").strip().replace("$", "")
    env = {**lab.pane_env(), "TMUX": where, "TMUX_PANE": lab.pane_id}
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        done = subprocess.run(["/bin/sh", "-c", command], input=payload, text=True,
                              capture_output=True, env=env, cwd=lab.project, check=False)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"hook exited {done.returncode}: {done.stderr}")
    return command, times


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--hook-calls", type=int, default=50)
    parser.add_argument("--words", type=int, default=24, help="words per answer")
    parser.add_argument("--delay", type=float, default=0.25, help="seconds between words")
    parser.add_argument("--screen-only", action="store_true",
                        help="drive the pane with tmux send-keys; no conductor commands")
    args = parser.parse_args()

    install = install_claude()
    took = "cached" if install.seconds is None else f"installed in {install.seconds:.1f} s"
    print(f"Claude Code at {install.binary} ({took}, {install.size_bytes / 1e6:.0f} MB)")
    task = Say.words(args.words, args.delay)
    with tempfile.TemporaryDirectory(prefix="agent-trial-") as scratch:
        root = Path(scratch)
        os.environ["CONDUCTOR_WORKERS_DIR"] = str(root / "workers")
        env = {"CONDUCTOR_WORKERS_DIR": str(root / "workers")}
        modes = [("without hooks", False)] + ([] if args.screen_only else [("with hooks", True)])
        for label, hooks in modes:
            lab = ClaudeInTmux(root / label.replace(" ", "-"), install.binary, env=env)
            if hooks:
                done = pty(lab, "hooks", "install", "--cli", "claude",
                           "--path", str(lab.settings_path))
                if done.returncode != 0:
                    raise SystemExit(f"hooks install failed: {done.stderr}")
            with lab:
                report(label, run_turns(lab, args.turns, task, args.screen_only))
                if hooks:
                    command, times = hook_call_seconds(lab, args.hook_calls)
                    print(f"\n`{command}` x{len(times)}: median "
                          f"{statistics.median(times) * 1000:.0f} ms, "
                          f"max {max(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
