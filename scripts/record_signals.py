"""Record what a real agent CLI tells the terminal besides its screen (issue 22, design/signals.md).

Runs one CLI against a fake model server in a tmux server of its own, follows its session with a
plain ``tmux -C`` client (no pausing), and drives one scripted session: idle, a streamed reply, a
shell command that needs approval, the approval, the end of the turn. Every title (OSC 0/2),
progress (OSC 9;4), notification (OSC 9, OSC 777) and bell the CLI wrote is printed with the
phase it came in and the time since that phase began; ``--out FILE`` also writes them as
tab-separated rows (phase, seconds, kind, text), the form the tests replay.

Claude Code and Codex come from the test cache and talk to ``tests/support/agents.py``'s fakes:

    .venv/bin/python -m scripts.record_signals claude 2.1.197
    .venv/bin/python -m scripts.record_signals codex 0.169.0

Gemini CLI, Qwen Code, opencode and aider run as the capture lab runs them (``scripts/lab``:
``labb_drive.py``'s settings, ``fake_openai_gemini_server.py`` on loopback), from a folder
installed beforehand (``npm install --prefix DIR PKG@VERSION``; aider: a venv with
``aider-chat==VERSION``):

    .venv/bin/python -m scripts.record_signals gemini 0.61.0 --install /tmp/gem-0.61.0
    .venv/bin/python -m scripts.record_signals aider 0.86.2 --install /tmp/aider-0.86.2

``--turn-ends N`` records nothing: it runs N plain turns and N/3 approval turns beside a real
``conductor pty watch`` and prints how soon each turn end read READY, and whether READY ever came
before it (Gemini CLI and Qwen Code; aider asks after its reply ends and is not measured so).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.adapters.control import decode_output, parse_notification
from app.base.model import State
from app.base.termsignals import SignalScanner
from app.install.hooks import hook_words
from app.observe.pack_loading import load_packs
from tests.support import agents
from tests.support.scripted_model import RunBash, Say
from tests.support.tmux_sockets import socket_path
from tests.support.waiting import retry_until

LAB = Path(__file__).resolve().parent / "lab"


class Recorder:
    def __init__(self, socket_name: str, env: dict[str, str], raw: Path | None = None) -> None:
        # Every byte the pane wrote, one line per chunk (phase, seconds, repr), for checking
        # what surrounds a signal (is that BEL a bell, or the end of some other sequence?).
        self.raw = raw.open("w", encoding="utf-8") if raw is not None else None
        self.phase = "start"
        self.phase_at = time.monotonic()
        self.seen: list[tuple[str, float, str, str]] = []
        # One scanner for the whole stream: tmux splits a long OSC (Gemini CLI pads its titles
        # with spaces) between two %output lines, and scanning each line alone would lose the
        # title and count its closing BEL as a bell.
        self.scanner = SignalScanner()
        self.proc = subprocess.Popen(
            ["tmux", "-L", socket_name, "-C", "attach-session", "-t", "agent"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def mark(self, phase: str) -> None:
        self.phase, self.phase_at = phase, time.monotonic()
        print(f"--- {phase}", flush=True)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            note = parse_notification(line)
            if note is None or note.name != "output":
                continue
            data = decode_output(note.value)
            if self.raw is not None:
                self.raw.write(f"{self.phase}\t{time.monotonic() - self.phase_at:.3f}\t{data!r}\n")
            for signal in self.scanner.feed(data):
                at = time.monotonic() - self.phase_at
                self.seen.append((self.phase, at, signal.kind, signal.text))
                print(f"{self.phase:10} +{at:6.2f}s {signal!r}", flush=True)

    def write(self, out: Path) -> None:
        """The signals as rows: phase, seconds into it, kind, text (tests replay the titles)."""
        rows = ["phase\tseconds\tkind\ttext"]
        rows += [f"{phase}\t{at:.2f}\t{kind}\t{text}" for phase, at, kind, text in self.seen]
        out.write_text("\n".join(rows) + "\n", encoding="utf-8")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=5)
        if self.raw is not None:
            self.raw.close()



# --- Gemini CLI, Qwen Code, opencode and aider, as scripts/lab runs them -------------------------

# Needs approval in every CLI's default mode (Qwen runs a read-only `ls` without asking, and
# refuses `sleep N;`).
LAB_COMMAND = "touch signals-lab.txt && echo lab-done"


@dataclass(frozen=True)
class LabCli:
    """How to drive one CLI through the session, in the capture lab's terms."""

    start_script: str  # labb_drive's function that writes the start script
    idle: str  # the idle screen
    asks: tuple[tuple[str, tuple[str, ...]], ...]  # each question of the approval turn, its keys
    answers: int  # model requests in the approval turn (the tool call, the answer after it)


LAB_CLIS = {
    "gemini": LabCli("gemini_env", r"Type your message or @path/to/file",
                     ((r"Allow execution of|Allow once", ("1",)),), 2),
    "qwen": LabCli("qwen_env", r"Type your message or @path/to/file",
                   ((r"Allow execution of|Yes, allow once", ("1",)),), 2),
    "opencode": LabCli("opencode_env", r"Ask anything",
                       ((r"Permission required", ("Enter",)),), 2),
    # aider has no tools: the command comes as a fenced block in the reply, asked about after it.
    "aider": LabCli("aider_env", r"(?m)^(diff|code|ask|architect)?> ?$",
                    ((r"Run shell command\?", ("y", "Enter")),
                     (r"Add command output to the chat\?", ("y", "Enter"))), 1),
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LabSession:
    """One lab CLI in a tmux server of its own, talking to the lab's fake server."""

    def __init__(self, cli: str, install: Path, tmux_conf: str = agents.TMUX_CONF) -> None:
        self.cli, self.spec = cli, LAB_CLIS[cli]
        self.scratch = Path(tempfile.mkdtemp(prefix="conductor-signals-"))
        (self.scratch / ("venv" if cli == "aider" else "npm")).symlink_to(install.resolve())
        self.port = _free_port()
        self.logs = self.scratch / "logs" / f"server-{self.port}"
        self.logs.mkdir(parents=True)
        self.socket_name = f"conductor-signals-{os.getpid()}"
        self.conf = self.scratch / "tmux.conf"
        self.conf.write_text(tmux_conf)
        self.server: subprocess.Popen[bytes] | None = None
        self.pane = ""
        self.extra_env: dict[str, str] = {}
        self.hooks = False
        # With hooks: every event run synchronously, as `hooks install` wrote them before it
        # detached Gemini's AfterAgent and Notification (the "before" of issue 31).
        self.sync_hooks = False

    def env(self) -> dict[str, str]:
        return {**os.environ, "LANG": "C.UTF-8", "SHELL": "/bin/bash", **self.extra_env}

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket_name, "-f", str(self.conf), *args],
                              capture_output=True, text=True, env=self.env(), timeout=10,
                              check=False)
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {done.stderr.strip()}")
        return done.stdout

    def start(self, cli_args: list[str]) -> None:
        self.server = subprocess.Popen(
            [sys.executable, str(LAB / "fake_openai_gemini_server.py"), "--port", str(self.port),
             "--logdir", str(self.logs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        retry_until(self._server_up, 15)
        drive: Any = importlib.import_module("scripts.lab.labb_drive")
        drive.A = argparse.Namespace(scratch=str(self.scratch), port=self.port)
        script, _work = getattr(drive, self.spec.start_script)("signals")
        self._install_hooks("signals")
        self.pane = self.tmux("new-session", "-d", "-s", "agent", "-x", "200", "-y", "50",
                              "-P", "-F", "#{pane_id}", "--", script, *cli_args).strip()

    def keep_streaming(self, panes: list[str]) -> None:
        """Have each of ``panes`` that sits idle stream a slow reply (28 s), then give their
        requests a moment to reach the server before anything is queued for another pane."""
        idle = re.compile(self.spec.idle)
        for pane in panes:
            screen = self.tmux("capture-pane", "-p", "-t", pane)
            if idle.search(screen) and "esc to cancel" not in screen:
                self.tmux("send-keys", "-t", pane, "-l", "LAB_SLOW keep streaming")
                time.sleep(0.3)
                self.tmux("send-keys", "-t", pane, "Enter")
        time.sleep(2.0)

    def _install_hooks(self, tag: str) -> None:
        """With ``hooks`` (Gemini CLI only), ``conductor pty hooks install`` into the settings
        the lab just wrote for session ``tag``, before the CLI reads them."""
        if not self.hooks or self.cli != "gemini":
            return
        from scripts.bench import conductor_argv

        path = self.scratch / f"home-gemini-{tag}" / ".gemini" / "settings.json"
        subprocess.run([*conductor_argv(), "pty", "hooks", "install", "--cli", "gemini",
                        "--path", str(path)], env=self.env(), check=True, capture_output=True)
        if self.sync_hooks:
            settings = json.loads(path.read_text())
            for groups in settings["hooks"].values():
                for group in groups:
                    for hook in group["hooks"]:
                        hook["command"] = shlex.join(hook_words(hook["command"]))
            path.write_text(json.dumps(settings, indent=2))

    def start_more(self, count: int, split: bool = False) -> list[str]:
        """``count`` more sessions of the same CLI (as a user runs several agents), each in a
        window of its own or (``split``) beside the first in its window, tiled, against the same
        fake server; their pane ids."""
        drive: Any = importlib.import_module("scripts.lab.labb_drive")
        panes = []
        for number in range(count):
            script, _work = getattr(drive, self.spec.start_script)(f"more{number}")
            self._install_hooks(f"more{number}")
            where = ("split-window", "-d", "-t", self.pane) if split else \
                ("new-window", "-d", "-t", "agent")
            panes.append(self.tmux(*where, "-P", "-F", "#{pane_id}", "--", script).strip())
            if split:
                self.tmux("select-layout", "-t", self.pane, "tiled")
        return panes

    def start_shells(self, count: int) -> None:
        """``count`` plain shells tiled beside the sessions, as a user keeps a few open."""
        for _ in range(count):
            self.tmux("split-window", "-d", "-t", self.pane, "--", "/bin/bash", "--norc")
            self.tmux("select-layout", "-t", self.pane, "tiled")

    def _server_up(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_control/health", timeout=1):
                return True
        except OSError:
            return False

    def queue(self, *actions: dict[str, object]) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/_control/queue",
                                         data=json.dumps(list(actions)).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=5):
            pass

    def answer_ends(self, since: float) -> list[float]:
        """When each model answer (not the CLIs' side requests: titles, next-speaker checks;
        nor the slow replies ``keep_streaming`` has the other sessions stream) sent its last
        byte, for those that ended after ``since`` (epoch seconds)."""
        path = self.logs / "events.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines()] \
            if path.exists() else []
        side = {e["rid"] for e in events if e.get("event") == "request"
                and e.get("why") in ("aux", "LAB_SLOW")}
        return [float(e["t"]) for e in events if e.get("event") in ("stream_end", "response_done")
                and e.get("rid") not in side and e.get("t", 0) >= since]

    def answers_ended(self, since: float) -> int:
        return len(self.answer_ends(since))

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.pane)

    def wait_for_screen(self, pattern: str, seconds: float = 60) -> None:
        regex = re.compile(pattern, re.MULTILINE)
        retry_until(lambda: bool(regex.search(self.screen())), seconds, interval=0.05)

    def prompt(self, text: str, recorder: Recorder | None = None, phase: str = "") -> float:
        """Type ``text``, then start ``phase`` with the Enter that sends it; when it was sent."""
        self.tmux("send-keys", "-t", self.pane, "-l", text)
        self.wait_for_screen(re.escape(text[:20]), 10)  # the TUI really took the keys
        time.sleep(0.3)
        if recorder is not None:
            recorder.mark(phase)
        sent = time.time()
        self.tmux("send-keys", "-t", self.pane, "Enter")
        return sent

    def close(self) -> None:
        try:
            pids = {int(p) for p in self.tmux("list-panes", "-a", "-F", "#{pane_pid}").split()}
        except (RuntimeError, subprocess.TimeoutExpired):
            pids = set()
        ours = agents._descendants(pids)
        subprocess.run(["tmux", "-L", self.socket_name, "kill-server"], capture_output=True,
                       check=False)
        socket_path(self.socket_name).unlink(missing_ok=True)  # kill-server leaves it behind
        agents._end_processes({**ours, **agents._running_from(self.scratch)})
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=5)
        shutil.rmtree(self.scratch, ignore_errors=True)  # the install is a link: left alone


def record_lab(cli: str, install: Path, out: Path | None, raw: Path | None,
               cli_args: list[str]) -> None:
    lab = LabSession(cli, install)
    try:
        lab.start(cli_args)
        recorder = Recorder(lab.socket_name, lab.env(), raw)
        lab.wait_for_screen(lab.spec.idle, 120)
        time.sleep(2)  # start-up settles (opencode draws its home screen in steps)
        recorder.mark("idle")
        time.sleep(3)
        lab.queue({"type": "text", "tokens": 40, "delay": 0.1})
        since = lab.prompt("say something", recorder, "turn1")
        retry_until(lambda: lab.answers_ended(since) >= 1, 60, interval=0.02)
        recorder.mark("turn1-end")
        time.sleep(4)
        lab.queue({"type": "shell", "command": LAB_COMMAND, "description": "Touch a file",
                   "pre_text": "I will run a shell command now."},
                  {"type": "text", "text": "The command ran. Done.", "delay": 0.05})
        since = lab.prompt("run the command please", recorder, "turn2")
        for number, (question, keys) in enumerate(lab.spec.asks, 1):
            lab.wait_for_screen(question, 60)
            recorder.mark("dialog" if number == 1 else f"dialog{number}")
            time.sleep(4 if number == 1 else 2)
            lab.tmux("send-keys", "-t", lab.pane, *keys)
            recorder.mark("approved" if number == 1 else f"approved{number}")
        if cli == "aider":  # its turn ends when the prompt is back, after the questions
            lab.wait_for_screen(lab.spec.idle + r"\s*\Z", 60)
        else:
            retry_until(lambda: lab.answers_ended(since) >= lab.spec.answers, 60, interval=0.02)
        recorder.mark("turn2-end")
        time.sleep(4)
        print(lab.screen())
        recorder.close()
        if out is not None:
            recorder.write(out)
    finally:
        lab.close()


@dataclass
class TurnFigures:
    """What the watcher stored over measured turns."""

    latencies: list[float]
    # From the first screen the CLI's pack reads READY (the CLI drew its idle screen) to READY
    # in status.db: what the watcher adds to the CLI's own time to redraw.
    after_drawn: list[float] = field(default_factory=list)
    # From the turn's last byte to the time its AfterAgent hook row carries (with hooks).
    hook_stamp: list[float] = field(default_factory=list)
    # The reasons the watcher stored with each turn's first READY: which signal let it say so.
    ready_by: list[str] = field(default_factory=list)
    early: int = 0  # READY seen between Enter (once it had left READY) and the model's last byte
    never_left: int = 0  # READY all through a turn: that turn measured nothing
    asked: int = 0  # approval turns that read NEEDS_CONFIRMATION while the dialog was up
    approvals: int = 0


def pane_state(db: Path, pane_id: str, column: str = "state") -> str | None:
    """The stored state (or another ``column`` of its row) of one pane of the lab's tmux server
    (it may hold several)."""
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute(f"SELECT s.{column} FROM status s JOIN ptys p ON p.id = s.id "
                           "WHERE p.pane_id = ?", (pane_id,)).fetchone()
    return row[0] if row else None


def _measured_turn(lab: LabSession, db: Path, text: str, approve: bool,
                   figures: TurnFigures) -> None:
    from scripts.bench import wait_for

    def state(db: Path) -> str | None:
        return pane_state(db, lab.pane)

    if approve:
        lab.queue({"type": "shell", "command": LAB_COMMAND, "description": "Touch a file"},
                  {"type": "text", "tokens": 12, "delay": 0.1})
    else:
        lab.queue({"type": "text", "tokens": 12, "delay": 0.1})
    since = lab.prompt(text)
    question = re.compile(lab.spec.asks[0][0]) if approve else None
    answers = lab.spec.answers if approve else 1
    seen: list[str | None] = []
    give_up = time.monotonic() + 120
    while lab.answers_ended(since) < answers:
        if time.monotonic() > give_up:
            raise TimeoutError(f"the turn never ended: {lab.screen().splitlines()[-6:]!r}")
        seen.append(state(db))
        if question is not None and len(seen) % 5 == 0 and question.search(lab.screen()):
            figures.approvals += 1
            with contextlib.suppress(TimeoutError):
                wait_for(lambda: state(db) == "NEEDS_CONFIRMATION", 3)
                figures.asked += 1
            seen.append(state(db))
            lab.tmux("send-keys", "-t", lab.pane, *lab.spec.asks[0][1])
            question = None
        time.sleep(0.02)
    left = next((i for i, now in enumerate(seen) if now != "READY"), None)
    if left is None:
        figures.never_left += 1
    elif "READY" in seen[left:]:
        figures.early += 1
    end = lab.answer_ends(since)[answers - 1]
    pack = load_packs()[lab.cli]
    drawn = stored = 0.0
    deadline = time.monotonic() + 30
    while not stored and time.monotonic() < deadline:
        if not drawn and pack.classify(lab.screen()).state is State.READY:
            drawn = time.time()
        if state(db) == "READY":
            stored = time.time()
            figures.ready_by.append(pane_state(db, lab.pane, "reasons") or "")
        time.sleep(0.01)
    if not stored:
        screen = [line for line in lab.screen().splitlines() if line.strip()]
        print(f"  missed: not READY 30 s after the turn's end; stored "
              f"{state(db)} ({pane_state(db, lab.pane, 'reasons')}), last lines "
              f"{screen[-6:]!r}", file=sys.stderr)
        figures.latencies.append(float("inf"))
        return
    figures.latencies.append(max(0.0, stored - end))
    figures.after_drawn.append(max(0.0, stored - (drawn or stored)))
    time.sleep(1.0)  # a detached hook has landed by now, or it is counted missing
    stamp = turn_end_hook(db, lab.pane, since)
    if stamp is not None:
        figures.hook_stamp.append(stamp - end)


def turn_end_hook(db: Path, pane_id: str, since: float) -> float | None:
    """The time the newest AfterAgent row of ``pane_id`` after ``since`` carries."""
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute("SELECT MAX(ts) FROM events WHERE pane_id = ? AND kind = 'hook' AND "
                           "name = 'AfterAgent' AND ts > ?", (pane_id, since)).fetchone()
    return float(row[0]) if row and row[0] is not None else None


# The new user's tmux (issue 31): a status line redrawn every second by a command.
STATUS_LINE_CONF = """\
set -g status on
set -g status-interval 1
set -g status-right '#({script})'
"""


def attached_client(lab: LabSession) -> Any:
    """A real client attached to the lab's session, in a 200x50 terminal of ours."""
    import fcntl
    import struct
    import termios

    from tests.support.tmux_client import AttachedClient

    client = AttachedClient(["-L", lab.socket_name, "-f", str(lab.conf)], "agent",
                            "xterm-256color", lab.env())
    fcntl.ioctl(client.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    return client


def measure_lab(cli: str, install: Path, turns: int, more_panes: int = 0,
                status_line: bool = False, hooks: bool = False, split: bool = False,
                busy_others: bool = False, shells: int = 0, sync_hooks: bool = False
                ) -> TurnFigures:
    """Seconds from each turn's last byte to READY in status.db, with a real ``conductor pty
    watch`` at every default beside the CLI (the figures of ``scripts/bench.py --only agents``
    for the lab CLIs): ``turns`` plain turns, then ``turns // 3`` with a command approved in its
    dialog; how often READY came before the turn ended, and whether the dialog was seen.
    ``more_panes`` more sessions of the CLI sit idle in windows of their own (``split``: tiled
    beside it), ``status_line`` turns on tmux's status line with
    ``scripts/tmux-status-right.sh`` in it (``status --short`` against the same store, once a
    second, with a client attached to show it), ``hooks`` installs our Gemini CLI hooks,
    ``busy_others`` keeps the other sessions streaming a slow reply (the lab server's
    ``LAB_SLOW``) through every measured turn, ``shells`` plain shells are tiled beside them,
    ``sync_hooks`` runs every hook synchronously (the install before issue 31's fix). The plain
    turns' figures are returned."""
    from scripts.bench import conductor_argv, figures, wait_for

    conf = agents.TMUX_CONF
    if status_line:
        script = Path(__file__).resolve().parent / "tmux-status-right.sh"
        conf += STATUS_LINE_CONF.format(script=script)
    lab = LabSession(cli, install, conf)
    lab.hooks, lab.sync_hooks = hooks, sync_hooks
    lab.extra_env = {"CONDUCTOR_WORKERS_DIR": str(lab.scratch / "workers"),
                     "CONDUCTOR_CONFIG": str(lab.scratch / "config.toml")}
    env = lab.env()
    db = lab.scratch / "workers" / "status.db"
    plain, approved = TurnFigures([]), TurnFigures([])
    client = None
    try:
        lab.start([])
        others = lab.start_more(more_panes, split)
        lab.start_shells(shells)
        if status_line:  # tmux runs a status line's commands only while a client shows it
            client = attached_client(lab)
        lab.wait_for_screen(lab.spec.idle, 120)
        daemon = subprocess.Popen([*conductor_argv(), "-L", lab.socket_name, "pty", "watch",
                                   "-q"], env=env, cwd=Path(__file__).resolve().parents[1])
        try:
            wait_for(lambda: db.exists() and pane_state(db, lab.pane) == "READY", 60)
            for turn in range(turns):
                if busy_others:
                    lab.keep_streaming(others)
                _measured_turn(lab, db, f"say something, turn {turn}", False, plain)
            for turn in range(turns // 3):
                _measured_turn(lab, db, f"run the command, turn {turn}", True, approved)
        finally:
            daemon.terminate()
            daemon.wait(timeout=15)
    finally:
        if client is not None:
            client.close()
        lab.close()
    for label, got in (("plain turns", plain), ("approval turns", approved)):
        print(f"{cli} {label}: turn end -> READY {figures(got.latencies)} (idle screen drawn -> "
              f"READY {figures(got.after_drawn)}); READY before the "
              f"end: {got.early}; READY all through a turn: {got.never_left}"
              + (f"; dialog read NEEDS_CONFIRMATION {got.asked} of {got.approvals}"
                 if got is approved else "")
              + (f"; last byte -> AfterAgent's stamp {figures(got.hook_stamp)}" if hooks else "")
              + f"; READY by {dict(collections.Counter(got.ready_by))}")
    return plain


def record_cached(cli: str, version: str, out: Path | None) -> None:
    root = Path(tempfile.mkdtemp(prefix="conductor-signals-"))
    if cli == "claude":
        lab: agents.AgentInTmux = agents.ClaudeInTmux(
            root, agents.install_claude(version=version).binary)
    elif version in ("0.142.5", "0.152.0"):
        lab = agents.OldCodexInTmux(root, agents.install_codex(version=version).binary)
    else:
        lab = agents.CodexInTmux(root, agents.install_codex(version=version).binary)
    with lab:
        recorder = Recorder(lab.socket_name, lab.pane_env())
        recorder.mark("idle")
        time.sleep(3)
        lab.server.queue(Say.words(40, delay=0.1), RunBash("rm -rf build", "Delete build"),
                         Say("Done."))
        recorder.mark("turn1")
        lab.type_text("say something")
        time.sleep(0.3)
        lab.send_keys("Enter")
        lab.server.wait_for_turn_end(1)
        recorder.mark("turn1-end")
        ends = len(lab.server.turn_ends())
        time.sleep(4)
        recorder.mark("turn2")
        lab.type_text("delete the build folder")
        time.sleep(0.3)
        lab.send_keys("Enter")
        lab.wait_for_screen(r"(?i)(do you want|allow|approve|proceed|run the following)", 60)
        recorder.mark("dialog")
        time.sleep(4)
        lab.send_keys("Enter")
        recorder.mark("approved")
        try:
            lab.server.wait_for_turn_end(ends + 1, 30)
            recorder.mark("turn2-end")
        except Exception as exc:
            print(exc)
        time.sleep(4)
        print(lab.capture())
        recorder.close()
        if out is not None:
            recorder.write(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cli", choices=["claude", "codex", *LAB_CLIS])
    parser.add_argument("version")
    parser.add_argument("--install", type=Path, help="the lab CLIs' npm prefix or aider venv")
    parser.add_argument("--out", type=Path, help="write the signals here as rows")
    parser.add_argument("--raw", type=Path, help="write every byte of output here (lab CLIs)")
    parser.add_argument("--turn-ends", type=int, metavar="N", help="instead of recording, run N "
                        "turns beside `conductor pty watch` and print turn end -> READY (lab CLIs)")
    parser.add_argument("--more-panes", type=int, default=0, metavar="N", help="with "
                        "--turn-ends: N more idle sessions of the CLI in windows of their own")
    parser.add_argument("--status-line", action="store_true", help="with --turn-ends: tmux's "
                        "status line on, redrawn every second with scripts/tmux-status-right.sh")
    parser.add_argument("--split", action="store_true", help="with --more-panes: the sessions "
                        "tiled in the first one's window, not in windows of their own")
    parser.add_argument("--busy-others", action="store_true", help="with --more-panes: the "
                        "other sessions stream a slow reply through every measured turn")
    parser.add_argument("--hooks", action="store_true", help="with --turn-ends: `conductor "
                        "pty hooks install` for each Gemini CLI session")
    parser.add_argument("--shells", type=int, default=0, metavar="N", help="with --turn-ends: "
                        "N plain shells tiled beside the sessions")
    parser.add_argument("--sync-hooks", action="store_true", help="with --hooks: every hook "
                        "run synchronously (as installed before issue 31's fix)")
    parser.add_argument("--cli-args", default="", help="more arguments for a lab CLI, one string "
                        "(aider: --notifications)")
    args = parser.parse_args()
    if args.cli in LAB_CLIS:
        if args.install is None:
            parser.error(f"{args.cli} needs --install")
        if args.turn_ends:
            measure_lab(args.cli, args.install, args.turn_ends, args.more_panes,
                        args.status_line, args.hooks, args.split, args.busy_others, args.shells,
                        args.sync_hooks)
        else:
            record_lab(args.cli, args.install, args.out, args.raw, args.cli_args.split())
    else:
        record_cached(args.cli, args.version, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
