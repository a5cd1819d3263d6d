#!/usr/bin/env python3
"""Claude Code's driver for ``sweep.py``: one function per screen kind, run in a real Claude Code
session in tmux against ``fake_model_server.py`` (the session, its waits and its capture come from
``claude_variants_lab.Lab``). Labels by construction, as there: a BUSY screen is dropped when the
server's turn ended around it; a READY screen is taken after the last ``end_turn`` and a still
screen; a dialog only once its options are on screen.

Two sessions per release: ``plain`` at 120x40 (no status line, so the footer's own hints show)
for the idle-side kinds, dialogs and background work, and ``sl1`` at 120x40 (a one-line status
line under the box) for the busy kinds; a third, ``firstrun``, starts with a HOME that has not
been through onboarding and captures the start-up screens up to the sign-in prompt.

``SWEEP_SETTINGS`` (``sweep.py --settings JSON``): a JSON object merged into each session's
``~/.claude/settings.json``, e.g. ``{"prefersReducedMotion": true}`` (2.1.30 on: a still spinner glyph).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import claude_variants_lab as lab  # noqa: E402

PACKAGE = "@anthropic-ai/claude-code"
FIRST = "2.1.0"
SIZE = "120x40"


def binary(prefix):
    return os.path.join(prefix, "node_modules", ".bin", "claude")


def releases(versions):
    import sweep
    return sweep.every_tenth([v for v in versions if v.startswith("2.")], FIRST)


class Session(lab.Lab):
    """The lab's session, stricter about READY: a screen taken after the server's turn ended
    that still says `esc to interrupt` (the CLI busy with something the server did not see end)
    proves nothing and is dropped."""

    def setup(self):
        super().setup()
        extra = json.loads(os.environ.get("SWEEP_SETTINGS") or "{}")
        if extra:
            path = os.path.join(self.home, ".claude", "settings.json")
            settings = json.load(open(path))
            settings.update(extra)
            json.dump(settings, open(path, "w"), indent=1)

    def cap(self, case, state, note):
        if os.environ.get("SWEEP_SETTINGS"):
            note += f" (settings {os.environ['SWEEP_SETTINGS']})"
        self.last = super().cap(case, state, note)
        return self.last

    def ready(self, case, note, ended_before, timeout=90):
        self.last = None
        super().ready(case, note, ended_before, timeout)
        if self.last and "esc to interrupt" in self.pane().lower():
            self.drop(self.last, "the screen still says esc to interrupt")

    def quiet(self, timeout=30):
        """Every response the server started has ended (start-up requests included)."""
        end = time.time() + timeout
        ended = lambda x: x["kind"] in ("response_end", "client_disconnected") and x.get("main", True)  # noqa: E731
        while time.time() < end and self.count(self.main_start) > self.count(ended):
            time.sleep(0.3)
        self.settle()


def _clear_box(s):
    s.keys("C-u")
    time.sleep(0.4)


# ---- screen kinds ---------------------------------------------------------------------------
def idle(s):
    s.quiet()
    s.cap("ready-startup", "READY", "idle right after start-up")
    e = s.count(s.turn_end)
    s.send("Say hello")
    s.ready("ready-after-answer", "a short plain turn, over", e)
    s.learn_tools()


def draft(s):
    s.tm("send-keys", "-t", "lab", "-l", "this prompt is typed but not sent yet")
    time.sleep(1.2)
    s.settle()
    s.cap("ready-draft", "READY", "idle; a draft typed in the box, not sent")
    _clear_box(s)


def slash_list(s):
    s.tm("send-keys", "-t", "lab", "-l", "/")
    if s.wait_screen(r"(?m)^ +(?:❯ +)?/[a-z-]+ {3,}\S", 8):
        time.sleep(0.8)
        s.settle()
        s.cap("ready-slash-list", "READY", "idle; '/' typed, the command list under the box")
    s.tm("send-keys", "-t", "lab", "-l", "mo")
    time.sleep(1.0)
    s.settle()
    if "/model" in s.pane():
        s.cap("ready-slash-list-filtered", "READY", "idle; '/mo' typed, the filtered list")
    s.keys("Escape")
    _clear_box(s)
    s.keys("BSpace", "BSpace", "BSpace")


def bash_mode(s):
    s.tm("send-keys", "-t", "lab", "-l", "!")
    time.sleep(1.0)
    s.settle()
    if re.search(r"(?m)^! *$|^!\xa0|(?:bash|shell) mode", s.pane()):
        s.cap("ready-bash-mode", "READY", "idle; '!' typed: bash mode, empty")
        s.tm("send-keys", "-t", "lab", "-l", "ls -la")
        time.sleep(0.8)
        s.settle()
        s.cap("ready-bash-mode-draft", "READY", "idle; bash mode with 'ls -la' typed, not sent")
    _clear_box(s)
    s.keys("BSpace", "BSpace")
    s.settle()


def shortcuts(s):
    s.tm("send-keys", "-t", "lab", "-l", "?")
    if s.wait_screen(r"for (?:bash|shell) mode|for commands", 6):
        time.sleep(0.6)
        s.settle()
        s.cap("confirm-shortcuts-panel", "NEEDS_CONFIRMATION", "the '?' shortcuts panel a person opened")
    s.keys("Escape")
    time.sleep(0.6)
    if re.search(r"for (?:bash|shell) mode", s.pane()):
        s.keys("BSpace")
    _clear_box(s)
    s.settle()


def exit_hints(s):
    s.keys("C-c")
    if s.wait_screen(r"(?i)ctrl-c again", 3):
        s.cap("ready-exit-hint-ctrl-c", "READY", "idle; one Ctrl-C on an empty box: 'Press Ctrl-C again to exit'")
    s.wait_screen(r"(?i)ctrl-c again", 6, gone=True)
    time.sleep(0.5)
    s.keys("C-d")
    if s.wait_screen(r"(?i)ctrl-d again", 3):
        s.cap("ready-exit-hint-ctrl-d", "READY", "idle; one Ctrl-D on an empty box: 'Press Ctrl-D again to exit'")
    s.wait_screen(r"(?i)ctrl-d again", 6, gone=True)
    time.sleep(0.5)
    s.tm("send-keys", "-t", "lab", "-l", "a draft to clear")
    time.sleep(0.8)
    s.keys("Escape")
    if s.wait_screen(r"(?i)esc again to clear|esc to clear", 3):
        s.cap("ready-exit-hint-esc-clear", "READY", "idle; a draft and one Esc: 'Esc again to clear'")
    s.wait_screen(r"(?i)esc again to clear|esc to clear", 6, gone=True)
    _clear_box(s)
    s.settle()


def busy(s):
    s.quiet()
    e = s.count(s.turn_end)
    st = s.count(s.main_start)
    s.send("Think about it first HANGFIRST")
    s.wait_ev(s.main_start, st, 30)
    time.sleep(3)
    s.cap_busy("busy-waiting-first-token", "request in flight, model silent (spinner only)", e)
    s.ready("ready-after-wait", "turn over after a silent wait", e)
    e = s.count(s.turn_end)
    st = s.count(s.main_start)
    s.send("Please write a long paragraph SLOWTEXT")
    s.wait_ev(s.main_start, st, 30)
    time.sleep(6)
    s.cap_busy("busy-streaming", "model streaming text (0.4 s a word)", e)
    s.tm("send-keys", "-t", "lab", "-l", "and then check the tests")
    time.sleep(1.5)
    s.cap_busy("busy-streaming-draft-typed", "streaming while a draft is typed in the box", e)
    _clear_box(s)
    s.ready("ready-after-long-answer", "turn over after a long streamed answer", e)


def busy_typed(s):
    """Streaming with no status line, the box as a person leaves it idle: empty, a draft, the
    `/` list, bash mode. The idle side of each is `idle`, `draft`, `slash_list` and `bash_mode`
    in the same session: the pairs say whether anything on screen tells a reply still streaming
    from a short turn's reply with no end mark (2.1.79-2.1.117 draw neither a spinner nor one)."""
    s.quiet()
    e = s.count(s.turn_end)
    st = s.count(s.main_start)
    s.send("Please write a long paragraph SLOWTEXT")
    s.wait_ev(s.main_start, st, 30)
    time.sleep(4)
    cut = lambda x: x["kind"] == "client_disconnected" and x.get("main", True)  # noqa: E731
    cut_before = s.count(cut)
    s.cap_busy("busy-streaming", "model streaming text (0.4 s a word)", e)
    for case, typed, note in (
            ("busy-streaming-draft-typed", "and then check the tests", "a draft typed in the box"),
            ("busy-streaming-slash-list", "/", "'/' typed, the command list under the box"),
            ("busy-streaming-bash-mode", "!", "'!' typed: bash mode, empty")):
        s.tm("send-keys", "-t", "lab", "-l", typed)
        time.sleep(1.2)
        s.cap_busy(case, f"streaming while {note}", e)
        if s.last and s.count(cut) > cut_before:
            s.drop(s.last, "the turn was cut around the capture")
        # never Esc here: 2.1.0 takes it as an interrupt, not as closing the `/` list
        _clear_box(s)
        s.keys("BSpace", "BSpace")
    s.ready("ready-after-long-answer", "turn over after a long streamed answer", e)


def tasks(s):
    s.case_tasks()


def dialogs(s):
    e = s.count(s.turn_end)
    t = s.count(s.tool_sent())
    s.send("Clean the build directory RUNBASH")
    s.wait_ev(s.tool_sent(), t, 30)
    if s.wait_screen(r"Do you want to proceed\?", 15) and s.wait_screen(r"1\. Yes", 5):
        time.sleep(0.8)
        s.cap("confirm-shell-command", "NEEDS_CONFIRMATION", "approval for 'rm -rf build'")
        s.keys("Enter")
    s.ready("ready-after-tool", "turn over after a shell command", e)
    s.make_proj()
    e = s.count(s.turn_end)
    t = s.count(s.tool_sent())
    s.send("Create a notes file EDITFILE")
    s.wait_ev(s.tool_sent(), t, 30)
    if s.wait_screen(r"Do you want to (?:create|make)", 15) and s.wait_screen(r"1\. Yes", 5):
        time.sleep(0.8)
        s.cap("confirm-file-write", "NEEDS_CONFIRMATION", "approval for creating notes.txt")
        s.keys("Escape")
        time.sleep(2.0)
        s.settle()
        s.cap("ready-after-deny", "READY", "file write refused with Esc; idle")
    else:
        s.ready("ready-after-edit", "file written; turn over", e)


def questions(s):
    if "AskUserQuestion" not in s.tools:
        lab.log("no AskUserQuestion tool: questions skipped")
        return
    t = s.count(s.tool_sent())
    s.send("Ask me something ASKUSER")
    s.wait_ev(s.tool_sent(), t, 30)
    if s.wait_screen(r"README\.md", 10) and s.wait_screen(r"1\. README", 5):
        time.sleep(0.8)
        s.cap("confirm-ask-user-question", "NEEDS_CONFIRMATION", "AskUserQuestion menu")
    s.keys("Escape")
    time.sleep(2.0)
    s.settle()
    s.cap("ready-after-decline-question", "READY", "question declined with Esc; idle")


def error(s):
    e = s.count(lambda x: x["kind"] == "error_sent")
    s.send("Trigger an error FAIL400")
    s.wait_ev(lambda x: x["kind"] == "error_sent", e, 30)
    time.sleep(2.5)
    s.settle()
    s.cap("error-400", "ERROR", "HTTP 400 shown, turn over")
    e = s.count(s.turn_end)
    s.queue([{"type": "text", "text": "OK. I am ready for the next instruction.", "delay": 0.05}])
    s.send("Say you are ready")
    s.wait_ev(s.turn_end, e, 40)
    time.sleep(1.0)
    s.settle()


def background(s):
    """A background shell, then a background agent: while either runs the turn is not over
    (each notifies the session when it ends); captured BUSY only while the server shows the
    shell's `sleep 40` or the agent's hanging model call is not over."""
    if "run_in_background" in open_bodies(s):
        e = s.count(s.turn_end)
        s.send("Start the long job in the background BGSHELL")
        end = time.time() + 30
        while time.time() < end and s.count(s.turn_end) <= e:
            if "Do you want to proceed?" in s.pane():
                s.keys("Enter")
            time.sleep(0.5)
        started = time.time()
        time.sleep(2)
        if time.time() - started < 30:
            s.cap("busy-background-shell", "BUSY", "turn ended, its background `sleep 40` runs")
    agent_tool = "Agent" if "Agent" in s.tools else ""
    if agent_tool:
        e = s.count(s.turn_end)
        s.send("Research it with an agent in the background BGAGENT")
        end = time.time() + 20
        while time.time() < end and s.count(s.turn_end) <= e:
            if "Do you want to proceed?" in s.pane():
                s.keys("Enter")
            time.sleep(0.5)
        hang = s.count(lambda x: x["kind"] == "response_end" and not x.get("main", True))
        time.sleep(2)
        if s.count(lambda x: x["kind"] == "response_end" and not x.get("main", True)) == hang:
            s.cap("busy-background-agent", "BUSY", "turn ended, its background agent's model call hangs")


def open_bodies(s):
    """The request bodies' text (the tools' schemas say whether `run_in_background` exists)."""
    import glob
    text = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(s.events), "bodies", "*.json")))[-3:]:
        with open(path, encoding="utf-8", errors="replace") as f:
            text.append(f.read())
    return "\n".join(text)


def first_run(binary_path, out, port):
    """A HOME with no onboarding: each start-up screen until the sign-in prompt (or the box)."""
    args = types.SimpleNamespace(claude=binary_path, out=out, port=port, size=SIZE,
                                 run_name="firstrun", cases="")
    scratch = tempfile.mkdtemp(prefix="sweepc.")
    s = lab.Lab(args, scratch)
    lab.RUNS["firstrun"] = dict(statusline=None, theme="dark", editor="normal", mode="default")
    try:
        s.start_server()
        s.setup()
        os.remove(os.path.join(s.home, ".claude.json"))
        # no API key: the sign-in path
        env = os.path.join(s.w, "env.sh")
        text = open(env).read().replace(f"export ANTHROPIC_API_KEY={lab.KEY}\n", "")
        open(env, "w").write(text)
        s.tm("send-keys", "-t", "lab", f"source {env}; unset ANTHROPIC_API_KEY; clear; claude", "Enter")
        seen = set()
        end = time.time() + 60
        while time.time() < end:
            time.sleep(1.5)
            s.settle(timeout=10)
            screen = s.pane()
            if "Unable to connect to Anthropic services" in screen:
                lab.log("first run: no route to the sign-in service here; nothing to capture")
                break
            if "Paste code here" in screen:
                s.cap("confirm-login-paste-code", "NEEDS_CONFIRMATION", "first run: sign-in URL, paste the code")
                break
            m = re.search(r"(?m)^ *❯ *1\. ", screen)
            if m:
                kind = ("theme" if re.search(r"(?i)text style|theme", screen) else
                        "login-method" if re.search(r"(?i)login method|account", screen) else
                        "security" if re.search(r"(?i)security notes", screen) else "menu")
                if kind not in seen:
                    seen.add(kind)
                    s.cap(f"confirm-firstrun-{kind}", "NEEDS_CONFIRMATION", f"first run: the {kind} menu")
                s.keys("Enter")
                continue
            if re.search(r"(?i)press enter to continue", screen):
                if "security" not in seen:
                    seen.add("security")
                    s.cap("confirm-firstrun-security", "NEEDS_CONFIRMATION",
                          "first run: security notes, press Enter to continue")
                s.keys("Enter")
                continue
    finally:
        s.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def check(out):
    """A READY screen that still says `esc to interrupt` proves nothing (the CLI was busy with
    something the server did not see end): dropped, as ``Session.ready`` does while capturing."""
    labels = os.path.join(out, "labels.tsv")
    if not os.path.isfile(labels):
        return
    for line in open(labels, encoding="utf-8").read().splitlines()[1:]:
        cols = line.split("\t")
        path = os.path.join(out, cols[0])
        if cols[2] == "READY" and os.path.isfile(path) and \
                "esc to interrupt" in open(path, encoding="utf-8").read().lower():
            s = types.SimpleNamespace(out=out)
            lab.Lab.drop(s, os.path.basename(cols[0])[:-len(".txt")], "still says esc to interrupt")


# the text each kind leaves typed in the box, by the screen's name up to its session
TYPED = {
    "ready-draft": "this prompt is typed but not sent yet",
    "ready-slash-list": "/",
    "ready-slash-list-filtered": "/mo",
    "ready-bash-mode-draft": "ls -la",
    "ready-exit-hint-esc-clear": "a draft to clear",
    "busy-streaming-draft-typed": "and then check the tests",
    "busy-streaming-slash-list": "/",
}


def drafts(out):
    found = {}
    folder = os.path.join(out, lab.CLI)
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        case = re.sub(r"-(?:plain|sl1)-\d+x\d+\.txt$", "", name)
        if case in TYPED:
            found[f"{lab.CLI}/{name}"] = TYPED[case]
    return found


# ---- sessions -------------------------------------------------------------------------------
KINDS = {
    "idle": idle, "draft": draft, "slash_list": slash_list, "bash_mode": bash_mode,
    "shortcuts": shortcuts, "exit_hints": exit_hints, "dialogs": dialogs,
    "questions": questions, "error": error, "busy": busy, "busy_typed": busy_typed, "tasks": tasks,
    "background": background, "first_run": None,
}
# which session runs which kinds (background last: its work outlives the session's use)
SESSIONS = (
    ("plain", ("idle", "draft", "slash_list", "bash_mode", "shortcuts", "exit_hints",
               "busy_typed", "dialogs", "questions", "error", "background")),
    ("sl1", ("idle", "busy", "draft", "tasks")),
)


def sweep(binary_path, out, port, kinds):
    os.makedirs(out, exist_ok=True)
    for run, run_kinds in SESSIONS:
        chosen = [k for k in run_kinds if k in kinds]
        if not chosen:
            continue
        args = types.SimpleNamespace(claude=os.path.abspath(binary_path), out=out, port=port,
                                     size=SIZE, run_name=run, cases="")
        scratch = tempfile.mkdtemp(prefix="sweepc.")
        s = Session(args, scratch)
        lab.log(f"Claude Code {s.version}, session {run}: {', '.join(chosen)}")
        try:
            s.start_server()
            s.setup()
            s.start_claude()
            s.learn_tools()
            for kind in chosen:
                lab.log(f"kind {kind}")
                try:
                    KINDS[kind](s)
                except Exception as exc:  # one failed kind must not lose the others
                    lab.log(f"kind {kind} failed: {exc!r}")
            s.quit_claude()
        finally:
            s.stop()
            shutil.rmtree(scratch, ignore_errors=True)
    if "first_run" in kinds:
        first_run(os.path.abspath(binary_path), out, port)
