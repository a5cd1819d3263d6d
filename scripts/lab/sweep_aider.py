#!/usr/bin/env python3
"""aider's driver for ``sweep.py``: one function per screen kind, run in a real aider (installed
from PyPI into a venv of its own) in tmux against ``fake_openai_gemini_server.py``, which speaks
OpenAI-compatible HTTP and writes every response's start and end to its events log.

Labels by construction: a BUSY screen is kept only when the server's stream was still open after
the capture (its ``stream_end`` came later), or, for a prompt just sent, when the server got it
and held its reply back past the capture; READY only at aider's bare input prompt on the last
line, after the server's last stream ended and the screen stood still (a draft only with the
cursor at the end of its text on the prompt line, as titles.tsv records it); a question only
while its ``(Y)es/(N)o … [Yes]:`` line is the last line, waiting for the answer.

Two sessions per release: 120x40 for every kind and 80x24 for idle, busy and dialogs; a third,
``first_run``, starts aider with no key and no model (the OpenRouter sign-in question).
aider has no shortcuts panel, task list or background work: those kinds do not exist here.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import labb_drive as D  # noqa: E402
import labb_tmux as L  # noqa: E402

PACKAGE = "aider-chat"
CLI = "aider"
QUESTION_END = re.compile(r"\(Y\)es/\(N\)o.*\]: ?$")
PROMPTS = (">", "diff>", "ask>", "architect>", "code>", "whole>")
DRAFT = "refactor the parser and keep the tests"
BASH_DRAFT = "!ls -la"
SENT = "LAB_HOLD summarise the parser"  # the fake server holds this reply's first byte 8 s


def binary(prefix):
    return os.path.join(prefix, "bin", "aider")


def install(version, cache):
    """aider is on PyPI, not npm: one venv per release under the sweep's cache."""
    prefix = os.path.join(cache, f"{PACKAGE}-{version}")
    if not os.path.exists(binary(prefix)):
        subprocess.run([sys.executable, "-m", "venv", prefix], check=True)
        subprocess.run([os.path.join(prefix, "bin", "pip"), "install", "-q", f"{PACKAGE}=={version}"],
                       check=True)
    return prefix


def registry_versions(package=PACKAGE):
    found = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package],
                           capture_output=True, text=True, check=True).stdout
    listed = re.search(r"Available versions: (.*)", found)
    return [v.strip() for v in listed.group(1).split(",")] if listed else []


def releases(versions):
    """The newest and three spread before it (aider releases less often than the others: the
    past year's are few, so the spread is over the last minor releases: every second one)."""
    def key(v):
        return tuple(int(p) for p in v.split("."))
    plain = sorted((v for v in versions if v.replace(".", "").isdigit()), key=key)
    if not plain:
        return []
    newest = plain[-1]
    minors = []
    for v in reversed(plain[:-1]):  # the last patch of each earlier minor, newest first
        if key(v)[:2] != key(newest)[:2] and all(key(v)[:2] != key(m)[:2] for m in minors):
            minors.append(v)
    return sorted(minors[0:6:2][:3], key=key) + [newest]


# ---- labelled captures ----------------------------------------------------------------------
def lines_of(screen):
    return [line.rstrip() for line in screen.rstrip("\n").split("\n") if line.strip()]


def at_prompt(screen, typed=""):
    lines = lines_of(screen)
    if len(lines) < 2:
        return False
    last = lines[-1]
    return (last in PROMPTS) if not typed else any(last == f"{p} {typed}".rstrip() for p in PROMPTS)


def asking(screen):
    lines = lines_of(screen)
    return bool(lines) and bool(QUESTION_END.search(lines[-1]))


def prompt_row(screen, typed):
    """The row (from 0 at the top of the visible screen) of the last line `<prompt> <typed>`."""
    rows = screen.split("\n")
    for i in range(len(rows) - 1, -1, -1):
        if any(rows[i].rstrip() == f"{p} {typed}".rstrip() for p in PROMPTS):
            return i
    return None


def recorded_cursor(out, rel):
    """The cursor (x, y) titles.tsv recorded with the screen `rel` (labb_tmux.save_title)."""
    found = None
    with open(os.path.join(out, "titles.tsv"), encoding="utf-8") as f:
        for row in f.read().splitlines()[1:]:
            cols = row.split("\t")
            if cols[0] == rel and len(cols) >= 5 and cols[3].isdigit() and cols[4].isdigit():
                found = (int(cols[3]), int(cols[4]))
    return found


def cursor_on_prompt(s, rel, screen, typed, line):
    """A draft's screen is kept only with the cursor where a draft leaves it: on the prompt
    line (`line`, the text typed) at the end of the text."""
    row, at = prompt_row(screen, typed), recorded_cursor(s.out, rel)
    want = None if row is None else (len(line.rstrip()), row)
    if at != want:
        drop(s.out, rel, f"cursor {at} not at the end of the prompt line {want}")
        return False
    return True


def wait_screen(s, test, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if test(L.capture(s.name)):
            return True
        time.sleep(0.25)
    return False


def streams_open(since):
    """Responses started after `since` whose stream has not ended (aux requests left out)."""
    evs = D.server_events(since)
    started = {e["rid"] for e in evs if e.get("event") == "stream_start"}
    ended = {e["rid"] for e in evs if e.get("event") in ("stream_end", "client_disconnected")}
    return started - ended


def drop(out, rel, why):
    """Take a saved screen back out: its label was not proven."""
    for name in ("labels.tsv", "titles.tsv"):
        path = os.path.join(out, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                rows = [r for r in f if not r.startswith(rel + "\t")]
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(rows)
    for ext in (".txt", ".ansi"):
        base = os.path.join(out, rel[:-len(".txt")] + ext)
        if os.path.exists(base):
            os.remove(base)
    print(f"dropped {rel}: {why}", flush=True)


def save(s, case, state, note):
    screen = L.save(s.name, CLI, f"{s.run}-{case}", state, f"{s.run}: {note}")
    return f"{CLI}/{s.run}-{case}-{L.size_of(s.name)}.txt", screen


def ready(s, case, note, typed="", timeout=60):
    """READY only at the bare prompt, every stream over, the screen still."""
    if not wait_screen(s, lambda scr: at_prompt(scr, typed), timeout):
        return False
    end = time.time() + 20
    while streams_open(s.started) and time.time() < end:
        time.sleep(0.3)
    screen = L.wait_stable(s.name, 1.5, 20)
    if streams_open(s.started) or not at_prompt(screen, typed):
        return False
    rel, screen = save(s, case, "READY", note)
    if typed:
        return cursor_on_prompt(s, rel, screen, typed, lines_of(screen)[-1])
    return True


def busy(s, case, note, since):
    """BUSY only while the server's stream for this turn is still open after the capture."""
    rel, _ = save(s, case, "BUSY", note)
    if not streams_open(since):
        drop(s.out, rel, "the stream ended around the capture")


def question(s, case, note):
    if not wait_screen(s, asking, 40):
        return False
    screen = L.wait_stable(s.name, 1.0, 10)
    if not asking(screen):
        return False
    save(s, case, "NEEDS_CONFIRMATION", note)
    return True


def answer(s, key):
    L.send_keys(s.name, key, "Enter")
    time.sleep(0.8)


def clear_box(s, n):
    for _ in range(n):
        L.send_keys(s.name, "BSpace")
    time.sleep(0.6)


# ---- screen kinds ---------------------------------------------------------------------------
def idle(s):
    ready(s, "ready-startup", "idle right after start-up", timeout=90)
    t = time.time()
    D.prompt(s.name, "Say hello")
    D.wait_event("stream_end", t, 30)
    ready(s, "ready-after-answer", "a short plain turn, over")


def draft(s):
    L.send_text(s.name, DRAFT)
    if wait_screen(s, lambda scr: at_prompt(scr, DRAFT), 10):
        ready(s, "ready-draft", "idle; a draft typed, not sent", typed=DRAFT)
    clear_box(s, len(DRAFT) + 2)


def sent(s):
    """A prompt just sent: aider leaves `diff> text` as it was drawn and moves the cursor to
    column 0 two rows below; the fake server holds the reply's first byte (LAB_HOLD), so nothing
    else is drawn yet (aider 0.83 on draws `Waiting for …` half a second after the request
    starts: the screen is taken before it). BUSY only when, after the capture, the screen still
    ends with the prompt line, the cursor is below it, the server got this prompt and its reply
    had not ended when the screen was taken."""
    L.send_text(s.name, SENT)
    if not wait_screen(s, lambda scr: at_prompt(scr, SENT), 10):
        clear_box(s, len(SENT) + 2)
        return
    screen = L.wait_stable(s.name, 1.0, 10)
    row = prompt_row(screen, SENT)
    _, _, x, y = L.where_of(s.name)
    if row is None or int(y) != row:
        print(f"sent: the draft's cursor ({x}, {y}) is not on the prompt row {row}", flush=True)
        clear_box(s, len(SENT) + 2)
        return
    t = time.time()
    L.send_keys(s.name, "Enter")
    end = time.time() + 3
    while time.time() < end and int(L.where_of(s.name)[3]) == row:
        time.sleep(0.02)
    time.sleep(0.15)  # aider's empty line after the accepted prompt
    rel, screen = save(s, "busy-just-sent", "BUSY",
                       "a prompt just sent (Enter), the reply held back by the server: the prompt "
                       "line as typed, the cursor below it, nothing else drawn yet")
    taken = time.time()
    at = recorded_cursor(s.out, rel)
    req = None
    try:
        req = D.wait_event("request", t, 30, pred=lambda e: e.get("why") == "LAB_HOLD")
    except TimeoutError:
        pass
    ended = {e["rid"]: e["t"] for e in D.server_events(t)
             if e.get("event") in ("stream_end", "response_done", "error", "client_disconnected")}
    if req is None:
        drop(s.out, rel, "the server never got the prompt")
    elif req["rid"] in ended and ended[req["rid"]] <= taken:
        drop(s.out, rel, "the reply ended before the capture")
    elif not lines_of(screen) or prompt_row(screen, SENT) != row or \
            lines_of(screen)[-1] != screen.split("\n")[row].rstrip():
        drop(s.out, rel, "aider drew more than the prompt line")
    elif at is None or at[1] <= row:
        drop(s.out, rel, f"the cursor {at} had not left the prompt row {row}")
    D.wait_event("stream_end", t, 40)
    wait_screen(s, at_prompt, 30)
    L.wait_stable(s.name, 1.0, 10)


def slash_list(s):
    L.send_text(s.name, "/")
    time.sleep(1.2)  # prompt_toolkit draws the completion menu as the person types
    screen = L.wait_stable(s.name, 1.0, 10)
    if re.search(r"(?m)^\s*/(?:add|help|model)\b", screen):
        save(s, "ready-slash-list", "READY", "idle; '/' typed, the command completions under the prompt")
    L.send_text(s.name, "mo")
    time.sleep(1.0)
    screen = L.wait_stable(s.name, 1.0, 10)
    if "/model" in screen.split("\n", 1)[-1]:
        save(s, "ready-slash-list-filtered", "READY", "idle; '/mo' typed, the filtered completions")
    L.send_keys(s.name, "Escape")
    clear_box(s, 5)


def bash_mode(s):
    """aider's shell escape is `!` (`/run`): typed and not sent, the prompt is still idle."""
    L.send_text(s.name, BASH_DRAFT)
    if wait_screen(s, lambda scr: BASH_DRAFT in (lines_of(scr) or [""])[-1], 10):
        L.wait_stable(s.name, 1.0, 10)
        rel, screen = save(s, "ready-bash-mode-draft", "READY",
                           "idle; '!ls -la' typed (the shell escape), not sent")
        cursor_on_prompt(s, rel, screen, BASH_DRAFT, lines_of(screen)[-1])
    L.send_keys(s.name, "Escape")
    clear_box(s, len(BASH_DRAFT) + 4)


def exit_hints(s):
    L.send_keys(s.name, "C-c")
    if wait_screen(s, lambda scr: re.search(r"(?i)again to (?:exit|quit)", scr), 3):
        L.wait_stable(s.name, 0.8, 5)
        save(s, "ready-exit-hint", "READY", "idle; one Ctrl-C at the prompt: the exit hint")
    time.sleep(2.5)  # the hint's window closes; a second Ctrl-C now would quit
    L.send_keys(s.name, "Enter")
    wait_screen(s, at_prompt, 10)
    L.wait_stable(s.name, 1.0, 10)


def dialogs(s):
    t = time.time()
    D.prompt(s.name, "LAB_SHELL run the command")
    if question(s, "confirm-shell", "'Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]:'"):
        answer(s, "y")
        time.sleep(2)
        screen = L.capture(s.name)
        # the command's own text names the marker too: only its output line means it finished
        if not asking(screen) and not re.search(r"(?m)^lab-shell-done\s*$", screen.split("LAB_SHELL")[-1]):
            save(s, "busy-tool-running", "BUSY", "the approved command (sleep 8) running, no output yet")
        if question(s, "confirm-add-output", "'Add command output to the chat? (Y)es/(N)o … [Yes]:'"):
            answer(s, "n")
    ready(s, "ready-after-tool", "idle after the shell command", timeout=60)
    s.started = t
    D.prompt(s.name, "LAB_EDIT create a file")
    if question(s, "confirm-edit-newfile", "SEARCH/REPLACE creating a new file: 'Create new file? … [Yes]:'"):
        answer(s, "y")
    ready(s, "ready-after-edit", "idle after the new file was written")


def questions(s):
    """aider's own questions about a reply: an edit to a file not in the chat."""
    D.prompt(s.name, "LAB_CHANGE edit app.py")
    for n in range(3):
        if not question(s, f"confirm-edit-notinchat-{n}", "an edit to a file not in the chat: "
                        "'Allow edits to file that has not been added to the chat?' and the like"):
            break
        answer(s, "y")
        time.sleep(1.5)
    ready(s, "ready-after-questions", "idle after the questions were answered")


def error(s):
    t = time.time()
    D.prompt(s.name, "LAB_E401 please")
    D.wait_event("request", t, 20, pred=lambda e: e.get("why") == "LAB_E401")
    if wait_screen(s, at_prompt, 40):
        screen = L.wait_stable(s.name, 1.5, 20)
        tail = screen.split("LAB_E401 please")[-1]
        if at_prompt(screen) and re.search(r"(?i)error|invalid api key|authentication", tail):
            save(s, "error-401", "ERROR", "HTTP 401 (not retried): the error text, then the prompt")


def busy_kind(s):
    t = time.time()
    D.prompt(s.name, "LAB_SLOW tell me a long story")
    D.wait_event("stream_start", t, 30)
    time.sleep(3)
    busy(s, "busy-streaming", "the reply streaming (server stream open)", t)
    L.send_text(s.name, "and then")  # typed ahead while the reply streams
    time.sleep(1.0)
    busy(s, "busy-streaming-typed-ahead", "the reply streaming, keys typed ahead", t)
    D.wait_event("stream_end", t, 60)
    L.send_keys(s.name, "C-u")
    ready(s, "ready-after-stream", "idle after the streamed reply")


def first_run(binary_path, out, port):
    """No key and no model: aider offers to sign in with OpenRouter before anything else."""
    home = tempfile.mkdtemp(prefix="sweep-aider-first.")
    work = os.path.join(home, "proj")
    os.makedirs(work)
    subprocess.run(["git", "init", "-q", work], check=True)
    name = "sw-aider-first"
    cmd = (f"env -u OPENAI_API_KEY -u OPENAI_API_BASE -u ANTHROPIC_API_KEY -u OPENROUTER_API_KEY "
           f"-u GEMINI_API_KEY HOME={home} AIDER_ANALYTICS=false TERM=tmux-256color "
           f"bash -c 'cd {work} && {binary_path} --no-check-update --no-gitignore --analytics-disable; "
           f"exec bash --norc -i'")
    L.kill_session(name)
    L.new_session(name, cmd, 120, 40)
    s = Session(name, "first-run", out, time.time())
    try:
        question(s, "confirm-first-run", "no key and no model: aider's first question at start-up")
    finally:
        L.send_keys(name, "C-c")
        time.sleep(0.5)
        L.kill_session(name)
        shutil.rmtree(home, ignore_errors=True)


class Session:
    def __init__(self, name, run, out, started):
        self.name, self.run, self.out, self.started = name, run, out, started


KINDS = {
    "idle": idle, "draft": draft, "sent": sent, "slash_list": slash_list, "bash_mode": bash_mode,
    "exit_hints": exit_hints, "dialogs": dialogs, "questions": questions, "error": error,
    "busy": busy_kind, "first_run": None,
}
SESSIONS = (
    ("s120", (120, 40), ("idle", "draft", "sent", "slash_list", "bash_mode", "exit_hints", "busy",
                         "dialogs", "questions", "error")),
    ("s80", (80, 24), ("idle", "sent", "busy", "dialogs")),
)


def sweep(binary_path, out, port, kinds):
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    L.SCREENS = out
    L.SOCK = f"sweep-aider-{os.getpid()}"
    scratch = tempfile.mkdtemp(prefix="sweep-aider.")
    os.symlink(os.path.dirname(os.path.dirname(os.path.abspath(binary_path))), os.path.join(scratch, "venv"))
    os.makedirs(os.path.join(scratch, "logs"))
    D.A = argparse.Namespace(scratch=scratch, port=port)
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_openai_gemini_server.py"), "--port",
                            str(port), "--logdir", os.path.join(scratch, "logs", f"server-{port}")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_control/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        L.ensure_labels()
        for run, size, run_kinds in SESSIONS:
            chosen = [k for k in run_kinds if k in kinds]
            if not chosen:
                continue
            script, _ = D.aider_env(run)
            name = f"sw-aider-{run}"
            L.kill_session(name)
            L.new_session(name, script, *size)
            s = Session(name, run, out, time.time())
            try:
                for kind in chosen:
                    print(f"kind {kind}", flush=True)
                    D.step(KINDS[kind], s)
            finally:
                L.kill_session(name)
        if "first_run" in kinds:
            first_run(os.path.abspath(binary_path), out, port)
    finally:
        srv.terminate()
        srv.wait(10)
        L.tmux("kill-server", check=False)
        shutil.rmtree(scratch, ignore_errors=True)


TYPED = {"ready-draft": DRAFT, "ready-slash-list": "/", "ready-slash-list-filtered": "/mo",
         "ready-bash-mode-draft": BASH_DRAFT}


def drafts(out):
    found = {}
    folder = os.path.join(out, CLI)
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        case = re.sub(r"^(?:s120|s80)-|-\d+x\d+\.txt$", "", name)
        if case in TYPED:
            found[f"{CLI}/{name}"] = TYPED[case]
    return found
