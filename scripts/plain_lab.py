"""Capture real screens of plain programs in tmux for the corpus: pagers, editors, REPLs, a sudo
password prompt, spinners, a failed ``make``, silent and full-screen commands.

    python -m scripts.plain_lab OUT_DIR [--size 200x50] [--prefix plain]

Each case runs in a fresh bash (no rc files) on a private tmux socket, in a folder whose name
ends in a digit (``.../work1``: issue 10's prompt). The script waits for a mark on the screen
(never a fixed sleep alone), captures the pane (plain text, and ``-e`` into ``ansi/``), and appends
``path cli state size note command`` to ``OUT_DIR/labels.tsv``; ``command`` is tmux's
``pane_current_command`` at capture time, which the watcher also sees. The label is the truth as
the script knows it (it started the program and knows what the program waits for), not what a
classifier said.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    name: str
    state: str
    note: str
    typed: str  # what is typed at the prompt (then Enter)
    mark: str  # regex the screen must show before the capture
    settle: float = 0.6  # seconds the mark must hold (a pager redraws once more, say)
    keys: tuple[str, ...] = ()  # extra keys sent after the mark, then the mark is awaited again
    needs: str = ""  # a program that must exist, else the case is skipped


def cases(work: Path) -> list[Case]:
    long_file = work / "long.txt"
    return [
        Case("less-file", "NEEDS_CONFIRMATION", "less showing a long file, ':' prompt",
             f"less {long_file}", r"(?m)^(?::|\S*long\.txt)\s*$", needs="less"),
        Case("less-end", "NEEDS_CONFIRMATION", "less at the end of a short file, '(END)'",
             f"less {work / 'short.txt'}", r"\(END\)", needs="less"),
        Case("git-log-pager", "NEEDS_CONFIRMATION", "git log in its pager (less), ':' prompt",
             "git log", r"(?m)^:\s*$", needs="git"),
        Case("more-file", "NEEDS_CONFIRMATION", "more showing a long file, '--More--'",
             f"more {long_file}", r"--More--", needs="more"),
        Case("git-log-more", "NEEDS_CONFIRMATION",
             "git log through more (GIT_PAGER=more) at '--More--'",
             "GIT_PAGER=more git log", r"--More--", needs="more"),
        Case("man-page", "NEEDS_CONFIRMATION", "man page in its pager",
             "man ls", r"(?m)Manual page|\(END\)|^:\s*$", settle=1.0, needs="man"),
        Case("vim-normal", "NEEDS_CONFIRMATION", "vim editing a file (normal mode)",
             f"vim -u NONE {work / 'short.txt'}", r'"[^"]*short\.txt"', needs="vim"),
        Case("vim-insert", "NEEDS_CONFIRMATION", "vim in insert mode",
             f"vim -u NONE {work / 'notes.md'}", r"notes\.md", keys=("i",), needs="vim"),
        # vim with no file waits for a person as any editor does: a question to hand over, not a
        # prompt to type an agent's instruction into
        Case("vim-just-opened", "NEEDS_CONFIRMATION", "vim just opened, no file: its intro screen",
             "vim -u NONE", r"VIM - Vi IMproved", needs="vim"),
        Case("python-repl-idle", "READY", "python3 REPL at its >>> prompt",
             "python3 -q", r"(?m)^>>> ?$", needs="python3"),
        Case("python-repl-busy", "BUSY", "python3 REPL running time.sleep(30)",
             "python3 -q", r"(?m)^>>> ?$", keys=("import time; time.sleep(30)", "Enter"),
             needs="python3"),
        Case("node-repl-idle", "READY", "node REPL at its > prompt",
             "node", r"(?m)^> ?$", needs="node"),
        Case("sudo-password", "NEEDS_CONFIRMATION", "sudo asks for a password",
             "su -P -s /bin/bash nobody -c 'sudo -k true'", r"\[sudo\] password", needs="sudo"),
        Case("read-password", "NEEDS_CONFIRMATION", "a script reads a password (read -s)",
             "read -rs -p 'Password: ' pw", r"Password: ?$"),
        Case("press-enter", "NEEDS_CONFIRMATION", "a script waits: 'Press Enter to continue'",
             "read -r -p 'Press Enter to continue...' x", r"Press Enter to continue"),
        Case("make-failed", "ERROR", "make failed; the shell prompt is back below the error",
             f"make -C {work}", r"Error 1[\s\S]*\$ ?$", needs="make"),
        Case("make-ok", "READY", "make succeeded; the shell prompt is back",
             f"make -C {work} ok", r"built ok[\s\S]*\$ ?$", needs="make"),
        Case("sleep-silent", "BUSY", "sleep 30 running silently in the foreground",
             "sleep 30", r"sleep 30\s*$", settle=1.5),
        Case("spinner-script", "BUSY", "a program drawing a braille spinner (npm-style)",
             f"python3 {work / 'spin.py'}", r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] ", needs="python3"),
        Case("npm-install-spinner", "BUSY",
             "npm install retrying an unreachable registry: its spinner",
             f"cd {work / 'npmproj'} && npm install --registry http://127.0.0.1:9 "
             "--fetch-retries 4 --fetch-retry-mintimeout 4000 left-pad; cd -",
             r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]", settle=1.0, needs="npm"),
        Case("top", "BUSY", "top redrawing every second", "top -d 1", r"load average",
             settle=1.0, needs="top"),
        Case("watch-date", "BUSY", "watch -n 1 date redrawing", "watch -n 1 date",
             r"Every 1\.0s", settle=1.0, needs="watch"),
        Case("shell-prompt-digit-cwd", "READY", "bash prompt whose cwd ends in a digit",
             "true", r"work1\$ ?$"),
    ]


def prepare(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "long.txt").write_text("".join(f"line {i}: the quick brown fox\n"
                                           for i in range(1, 400)))
    (work / "short.txt").write_text("alpha\nbeta\ngamma\n")
    (work / "npmproj").mkdir(exist_ok=True)
    (work / "npmproj" / "package.json").write_text('{"name": "npmproj", "version": "1.0.0"}\n')
    (work / "Makefile").write_text(
        "all:\n\t@echo compiling\n\t@false\nok:\n\t@echo built ok\n")
    (work / "spin.py").write_text(
        "import itertools, sys, time\n"
        "for c in itertools.islice(itertools.cycle('⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'), 600):\n"
        "    sys.stdout.write('\\r' + c + ' reify:lodash: timing reifyNode Completed in 12ms')\n"
        "    sys.stdout.flush(); time.sleep(0.08)\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "lab", "GIT_AUTHOR_EMAIL": "lab@example.invalid",
           "GIT_COMMITTER_NAME": "lab", "GIT_COMMITTER_EMAIL": "lab@example.invalid"}
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(work)], check=True, env=env)
        for i in range(60):
            subprocess.run(["git", "-C", str(work), "commit", "-q", "--allow-empty", "-m",
                            f"change {i}: adjust the widget"], check=True, env=env)


class Lab:
    def __init__(self, socket: str, size: str) -> None:
        self.base = self.socket = socket
        self.cols, self.rows = size.split("x")
        self.started = 0

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=False)
        return done.stdout

    def start(self, work: Path) -> None:
        # A fresh server per case: a killed server may still answer the next new-session.
        self.tmux("kill-server")
        self.started += 1
        self.socket = f"{self.base}-{self.started}"
        shell = ("env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin HOME=/root TERM=tmux-256color "
                 "LANG=C.UTF-8 PAGER=less bash --noprofile --norc")
        self.tmux("new-session", "-d", "-s", "lab", "-x", self.cols, "-y", self.rows,
                  "-c", str(work), shell)
        self.tmux("set", "-g", "status", "off")
        self.send_line("PS1='dev@host:\\w$ '; clear")
        self.wait(r"\$ ?$", 10)

    def send_line(self, text: str) -> None:
        self.tmux("send-keys", "-t", "lab", "-l", text)
        self.tmux("send-keys", "-t", "lab", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "lab")

    def command(self) -> str:
        return self.tmux("display-message", "-p", "-t", "lab", "#{pane_current_command}").strip()

    def wait(self, mark: str, seconds: float) -> bool:
        shown = re.compile(mark, re.M)
        return wait_until(lambda: shown.search(self.screen().rstrip()) is not None, seconds)


def wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--prefix", default="plain", help="folder for the screens inside OUT")
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args(argv)
    out: Path = args.out
    (out / args.prefix).mkdir(parents=True, exist_ok=True)
    (out / "ansi").mkdir(exist_ok=True)
    labels = out / "labels.tsv"
    if not labels.exists():
        labels.write_text("path\tcli\tstate\tsize\tnote\tcommand\n")
    scratch = Path(tempfile.mkdtemp(prefix="plainlab."))
    work = scratch / "work1"
    prepare(work)
    scratch.chmod(0o755)  # `nobody` runs sudo from here
    lab = Lab(f"plainlab-{os.getpid()}", args.size)
    only = {n for n in args.only.split(",") if n}
    try:
        for case in cases(work):
            if only and case.name not in only:
                continue
            if case.needs and not shutil.which(case.needs):
                print(f"skip {case.name}: no {case.needs}")
                continue
            lab.start(work)
            lab.send_line(case.typed)
            if not lab.wait(case.mark, 15):
                print(f"FAIL {case.name}: /{case.mark}/ not on screen", file=sys.stderr)
                continue
            for key in case.keys:
                if key in ("Enter", "Escape"):
                    lab.tmux("send-keys", "-t", "lab", key)
                else:
                    lab.tmux("send-keys", "-t", "lab", "-l", key)
            time.sleep(case.settle)  # let a redraw after the mark land, then take the screen
            name = f"{case.name}-{args.size}"
            path = f"{args.prefix}/{name}.txt"
            (out / path).write_text(lab.screen())
            (out / "ansi" / f"{name}.ansi").write_text(
                lab.tmux("capture-pane", "-p", "-e", "-t", "lab"))
            command = lab.command()
            with labels.open("a") as f:
                f.write(f"{path}\tplain\t{case.state}\t{args.size}\t{case.note}\t{command}\n")
            print(f"captured {name} ({case.state}, command {command})")
    finally:
        lab.tmux("kill-server")
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
