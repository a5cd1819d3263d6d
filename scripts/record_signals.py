"""Record what a real agent CLI tells the terminal besides its screen (issue 22, design/signals.md).

Runs one CLI (Claude Code or Codex, from the test cache) against the fake model server in a tmux
server of its own, follows its session with a plain ``tmux -C`` client (no pausing), and drives
one scripted session: idle, a streamed reply, a shell command that needs approval, the approval,
the end of the turn. Every title (OSC 0/2), progress (OSC 9;4), notification (OSC 9, OSC 777) and
bell the CLI wrote is printed with the phase it came in and the time since that phase began.

    .venv/bin/python scripts/record_signals.py claude 2.1.197
    .venv/bin/python scripts/record_signals.py codex 0.169.0
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.adapters.tmux import decode_output, parse_notification
from app.base.termsignals import scan
from tests import agents
from tests.scripted_model import RunBash, Say


class Recorder:
    def __init__(self, socket_name: str, env: dict[str, str]) -> None:
        self.phase = "start"
        self.phase_at = time.monotonic()
        self.seen: list[tuple[str, float, str]] = []
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
            for signal in scan(decode_output(note.value)):
                at = time.monotonic() - self.phase_at
                self.seen.append((self.phase, at, repr(signal)))
                print(f"{self.phase:10} +{at:6.2f}s {signal!r}", flush=True)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=5)


def main() -> int:
    cli, version = sys.argv[1], sys.argv[2]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
