#!/usr/bin/env python3
"""Claude Code as people run it: a custom status line, task lists, plan / accept-edits / vim
mode, another theme, replies in another language, panes from 80x24 to 250x80, any release.

    claude_variants_lab.py CLAUDE_BIN OUT_DIR --run NAME [--run NAME ...] [--size 200x50]
                           [--port 18131] [--cases core,tasks,...]

Real Claude Code runs in tmux (socket ``labc-<port>``) against ``fake_model_server.py`` on
loopback with ``scenario_claude_variants.json``; every screen is labelled by construction from
what the driver did and what the fake server logged (a BUSY screen is taken while the server
still streams or a tool still sleeps, and checked afterwards that the turn had not ended; a READY
screen after the server's last ``end_turn`` and three identical captures). Output is the layout
``import_capture.py`` takes: ``OUT_DIR/claude-code/<case>-<run>-<size>.txt`` (and ``ansi/``),
``OUT_DIR/labels.tsv``, ``OUT_DIR/capture-log.tsv``.

A run is a named set of settings (RUNS below): which status line, mode, theme, editor mode. The
cases run in one session, in order. Stdlib only; kills only what it started.
"""
import argparse
import glob
import json
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
import labb_tmux as L  # noqa: E402  (titles.tsv: one writer for every lab driver)

SERVER = os.path.join(HERE, "fake_model_server.py")
SCENARIO = os.path.join(HERE, "scenario_claude_variants.json")
STATUSLINE = os.path.join(HERE, "claude_statusline.py")
CLI = "claude-code"
KEY = "sk-ant-fake-lab-key-0000000000"

# name: status line style (None: none), theme, editor mode, start mode, what the run is for
RUNS = {
    "sl1": dict(statusline="one", theme="dark", editor="normal", mode="default"),
    "sl2c": dict(statusline="two", theme="dark", editor="normal", mode="default"),
    "sl3": dict(statusline="three", theme="light", editor="normal", mode="default"),
    "vim": dict(statusline="three", theme="dark-ansi", editor="vim", mode="default"),
    "plain": dict(statusline=None, theme="light-ansi", editor="normal", mode="default"),
    "accept": dict(statusline="one", theme="dark", editor="normal", mode="acceptEdits"),
}
DEFAULT_CASES = "core,tasks,language,prose,ask,modes,draft,restart"


def log(*a):
    print(f"[claude-lab {time.strftime('%H:%M:%S')}]", *a, flush=True)


class Lab:
    def __init__(self, args, scratch):
        self.a = args
        self.w = scratch
        self.sock = f"labc-{args.port}"
        self.events = os.path.join(scratch, "logs", "events.jsonl")
        self.proj = os.path.join(scratch, "proj")
        self.home = os.path.join(scratch, "home")
        self.out = args.out
        self.procs = []
        self.version = subprocess.run([args.claude, "--version"], capture_output=True, text=True,
                                      env={"HOME": scratch, "PATH": os.environ["PATH"]}).stdout.split()[0]
        self.tools = set()

    # ---- processes -----------------------------------------------------------------------
    def start_server(self):
        os.makedirs(os.path.dirname(self.events), exist_ok=True)
        p = subprocess.Popen([sys.executable, SERVER, "--port", str(self.a.port), "--logdir",
                              os.path.dirname(self.events), "--scenario", SCENARIO,
                              "--workdir", self.proj],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.a.port}/_control/health", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("fake server did not start")

    def queue(self, actions):
        req = urllib.request.Request(f"http://127.0.0.1:{self.a.port}/_control/queue",
                                     data=json.dumps(actions).encode(), method="POST",
                                     headers={"content-type": "application/json"})
        urllib.request.urlopen(req, timeout=5).read()

    def tm(self, *args, check=False):
        return subprocess.run(["tmux", "-L", self.sock, "-f", os.path.join(self.w, "tmux.conf"),
                               *args], capture_output=True, text=True, check=check)

    def stop(self):
        self.tm("kill-server")
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()

    # ---- screen --------------------------------------------------------------------------
    def pane(self):
        return self.tm("capture-pane", "-p", "-t", "lab").stdout

    def wait_screen(self, needle, timeout=30, gone=False):
        end = time.time() + timeout
        while time.time() < end:
            found = re.search(needle, self.pane()) is not None
            if found != gone:
                return True
            time.sleep(0.25)
        log(f"WARN: timeout waiting for /{needle}/{' to go' if gone else ''}")
        return False

    def settle(self, polls=3, every=0.7, timeout=40):
        """Three identical captures in a row: the screen stopped changing."""
        end = time.time() + timeout
        last, same = None, 0
        while time.time() < end:
            now = self.pane()
            same = same + 1 if now == last else 1
            last = now
            if same >= polls:
                return True
            time.sleep(every)
        log("WARN: screen did not settle")
        return False

    def send(self, text):
        self.tm("send-keys", "-t", "lab", "-l", text)
        time.sleep(0.5)
        self.tm("send-keys", "-t", "lab", "Enter")

    def keys(self, *keys):
        for k in keys:
            self.tm("send-keys", "-t", "lab", k)
            time.sleep(0.4)

    # ---- server events -------------------------------------------------------------------
    def ev(self):
        try:
            with open(self.events) as f:
                found = [json.loads(line) for line in f if line.strip()]
            return [e for e in found if isinstance(e, dict)]
        except OSError:
            return []

    def count(self, pred):
        return sum(1 for e in self.ev() if pred(e))

    def wait_ev(self, pred, base, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            if self.count(pred) > base:
                return True
            time.sleep(0.2)
        log("WARN: timeout waiting for a server event")
        return False

    @staticmethod
    def turn_end(e):
        return e["kind"] == "response_end" and e.get("main") and e.get("stop_reason") == "end_turn"

    @staticmethod
    def text_start(e):
        return e["kind"] == "response_start" and e.get("main") and e.get("action_type") == "text"

    @staticmethod
    def main_start(e):
        return e["kind"] == "response_start" and e.get("main")

    @staticmethod
    def tool_sent(name=None):
        return lambda e: e["kind"] == "tool_call_sent" and (name is None or e.get("tool") == name)

    def learn_tools(self):
        for path in sorted(glob.glob(os.path.join(os.path.dirname(self.events), "bodies", "*.json"))):
            try:
                body = json.load(open(path))
            except (OSError, ValueError):
                continue
            if not isinstance(body, dict):  # a queue of actions posted to the control API
                continue
            self.tools |= {t.get("name") for t in body.get("tools") or [] if t.get("name")}

    # ---- capture -------------------------------------------------------------------------
    def cap(self, case, state, note):
        size = self.a.size
        name = f"{case}-{self.a.run_name}-{size}"
        os.makedirs(os.path.join(self.out, CLI), exist_ok=True)
        os.makedirs(os.path.join(self.out, "ansi"), exist_ok=True)
        text = self.pane()
        # the pane's title, folder and cursor right after the screen (one tmux command: one
        # moment), as the watcher reads them
        cwd, title, cursor_x, cursor_y = L.parse_where(
            self.tm("display-message", "-p", "-t", "lab", L.WHERE_FORMAT).stdout)
        ansi = self.tm("capture-pane", "-p", "-e", "-t", "lab").stdout
        with open(os.path.join(self.out, CLI, name + ".txt"), "w") as f:
            f.write(text)
        with open(os.path.join(self.out, "ansi", name + ".ansi"), "w") as f:
            f.write(ansi)
        labels = os.path.join(self.out, "labels.tsv")
        if not os.path.exists(labels):
            with open(labels, "w") as f:
                f.write("path\tcli\tstate\tsize\tnote\n")
        full = f"{self.version} {self.a.run_name}: {note}"
        with open(labels, "a") as f:
            f.write(f"{CLI}/{name}.txt\t{CLI}\t{state}\t{size}\t{full}\n")
        L.SCREENS = self.out
        L.save_title(f"{CLI}/{name}.txt", " ".join(title.split()), cwd, cursor_x, cursor_y)
        evs = self.ev()
        with open(os.path.join(self.out, "capture-log.tsv"), "a") as f:
            f.write(f"{CLI}/{name}.txt\t{state}\t{time.time():.3f}\t{json.dumps(evs[-1]) if evs else ''}\n")
        log(f"captured {name} ({state})")
        return name

    def drop(self, name, why):
        """A screen whose label turned out unprovable is removed, not relabelled."""
        for listing in ("labels.tsv", "titles.tsv"):
            labels = os.path.join(self.out, listing)
            if not os.path.exists(labels):
                continue
            rows = open(labels).read().splitlines(True)
            with open(labels + ".tmp", "w") as f:
                f.writelines(r for r in rows if not r.startswith(f"{CLI}/{name}.txt\t"))
            os.replace(labels + ".tmp", labels)
        for p in (os.path.join(self.out, CLI, name + ".txt"), os.path.join(self.out, "ansi", name + ".ansi")):
            if os.path.exists(p):
                os.remove(p)
        log(f"dropped {name}: {why}")

    def cap_busy(self, case, note, ended_before):
        """BUSY only if the turn still had not ended after the capture (checked at once)."""
        name = self.cap(case, "BUSY", note)
        if self.count(self.turn_end) > ended_before:
            self.drop(name, "the turn ended around the capture")

    def ready(self, case, note, ended_before, timeout=90):
        if not self.wait_ev(self.turn_end, ended_before, timeout):
            log(f"no end of turn: {case} not captured")
            return
        # a turn queued behind another ends later than the first end_turn: wait for every
        # response the server started to have ended
        end = time.time() + timeout
        while time.time() < end and self.count(self.main_start) > self.count(
                lambda x: x["kind"] in ("response_end", "client_disconnected") and x.get("main", True)):
            time.sleep(0.3)
        time.sleep(1.0)
        self.settle()
        self.cap(case, "READY", note)

    # ---- setup ---------------------------------------------------------------------------
    def setup(self):
        run = RUNS[self.a.run_name]
        for d in (self.home, self.proj, os.path.join(self.home, ".claude")):
            os.makedirs(d, exist_ok=True)
        self.make_proj()
        with open(os.path.join(self.w, "tmux.conf"), "w") as f:
            f.write('set -g status off\nset -g history-limit 10000\n'
                    'set -g default-terminal "tmux-256color"\nset -g escape-time 10\n')
        cfg = {"hasCompletedOnboarding": True, "lastOnboardingVersion": self.version,
               "theme": run["theme"], "numStartups": 5, "autoUpdates": False,
               "editorMode": run["editor"],
               "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
               "projects": {self.proj: {"hasTrustDialogAccepted": True, "allowedTools": [],
                                         "hasCompletedProjectOnboarding": True}}}
        json.dump(cfg, open(os.path.join(self.home, ".claude.json"), "w"), indent=1)
        settings = {"permissions": {"defaultMode": run["mode"],
                                    "allow": ["Bash(sleep:*)", "TaskCreate", "TaskUpdate",
                                              "TaskList", "TodoWrite"]},
                    "promptSuggestionEnabled": False}
        if run["statusline"]:
            settings["statusLine"] = {"type": "command", "padding": 0,
                                      "command": f"{sys.executable} {STATUSLINE} {run['statusline']}"}
        json.dump(settings, open(os.path.join(self.home, ".claude", "settings.json"), "w"), indent=1)
        env = os.path.join(self.w, "env.sh")
        with open(env, "w") as f:
            f.write(f"export HOME={self.home}\nexport PATH={os.path.dirname(self.a.claude)}:$PATH\n"
                    f"export ANTHROPIC_BASE_URL=http://127.0.0.1:{self.a.port}\n"
                    f"export ANTHROPIC_API_KEY={KEY}\nexport CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n"
                    "export DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1\n"
                    "export CLAUDE_CODE_MAX_RETRIES=1 CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION=false\n"
                    # task lists: newer releases offer the task tools only when asked to
                    "export CLAUDE_CODE_ENABLE_TASKS=1 CLAUDE_CODE_ENABLE_TODO_TOOLS=1\n"
                    "export TERM=tmux-256color\n")
        cols, rows = self.a.size.split("x")
        self.tm("kill-server")
        for attempt in range(10):  # an old server on the socket takes a moment to go
            time.sleep(1)
            made = self.tm("new-session", "-d", "-s", "lab", "-x", cols, "-y", rows,
                           f"env -i PATH=/usr/local/bin:/usr/bin:/bin HOME={self.w} "
                           "TERM=tmux-256color LANG=C.UTF-8 bash --noprofile --norc")
            if made.returncode == 0:
                break
        else:
            raise SystemExit(f"tmux new-session failed: {made.stderr.strip()}")
        self.tm("send-keys", "-t", "lab", f"source {env}; cd {self.proj}; PS1='lab$ '; clear", "Enter")
        time.sleep(0.8)

    def make_proj(self):
        os.makedirs(os.path.join(self.proj, "build"), exist_ok=True)
        with open(os.path.join(self.proj, "README.md"), "w") as f:
            f.write("# Demo project\n\nA tiny project used by the Claude Code lab.\n")
        with open(os.path.join(self.proj, "build", "out.o"), "w") as f:
            f.write("object\n")
        if not os.path.isdir(os.path.join(self.proj, ".git")):
            subprocess.run("git init -q . && git add -A && git -c user.email=lab@example.invalid "
                           "-c user.name=lab commit -qm init", shell=True, cwd=self.proj,
                           capture_output=True)

    def start_claude(self, fresh=True):
        self.tm("send-keys", "-t", "lab", "claude" if not fresh else "clear; claude", "Enter")
        # start-up dialogs a seeded HOME may still meet (releases differ, and some come up a
        # moment after the box): each is captured once; idle means the box, no dialog, twice
        box = re.compile(r"^─{10,}\n[❯>][ \xa0]*\n─{10,}", re.M)
        end = time.time() + 90
        idle_looks = 0
        while time.time() < end:
            screen = self.pane()
            if "Make auto mode your default" in screen:
                time.sleep(1)
                self.cap("confirm-automode-default", "NEEDS_CONFIRMATION", "start-up: make auto mode the default?")
                self.keys("Down", "Enter")
                idle_looks = 0
            elif "trust this folder" in screen or "Yes, I trust" in screen:
                time.sleep(1)
                self.cap("confirm-trust-folder", "NEEDS_CONFIRMATION", "start-up: trust this folder?")
                if "❯ No, exit" in screen:
                    self.keys("Down")
                self.keys("Enter")
                idle_looks = 0
            elif "Detected a custom API key" in screen:
                time.sleep(1)
                self.cap("confirm-custom-api-key", "NEEDS_CONFIRMATION", "start-up: use the API key?")
                self.keys("Up", "Enter")
                idle_looks = 0
            elif box.search(screen) and "esc to interrupt" not in screen:
                idle_looks += 1
                if idle_looks >= 4:
                    break
            else:
                idle_looks = 0
            time.sleep(0.7)
        self.settle()

    def quit_claude(self):
        for _ in range(6):
            if re.search(r"lab\$ *$", self.pane().rstrip("\n")):
                return
            self.keys("C-c")
            time.sleep(0.3)
            self.keys("C-c")
            time.sleep(1)

    # ---- cases ---------------------------------------------------------------------------
    def case_core(self):
        self.cap("ready-startup", "READY", "idle right after start-up")
        e = self.count(self.turn_end)
        s = self.count(self.main_start)
        self.send("Think about it first HANGFIRST")
        self.wait_ev(self.main_start, s, 30)
        time.sleep(4)
        self.cap_busy("busy-waiting-first-token", "request in flight, model silent (spinner only)", e)
        self.ready("ready-after-answer", "turn finished, short answer", e)
        self.learn_tools()
        e = self.count(self.turn_end)
        s = self.count(self.main_start)
        self.send("Please write a long paragraph SLOWTEXT")
        self.wait_ev(self.main_start, s, 30)
        time.sleep(7)
        self.cap_busy("busy-streaming", "model streaming text (0.4 s a word)", e)
        self.ready("ready-after-long-answer", "turn finished after a long streamed answer", e)
        # a shell command waiting for approval, then approved (accept-edits mode may run it
        # without asking: then there is no dialog to capture)
        e = self.count(self.turn_end)
        t = self.count(self.tool_sent())
        self.send("Clean the build directory RUNBASH")
        self.wait_ev(self.tool_sent(), t, 30)
        time.sleep(2.5)
        if "Do you want to proceed" in self.pane():
            self.cap("confirm-shell-command", "NEEDS_CONFIRMATION", "approval for 'rm -rf build'")
            self.keys("Enter")
        self.ready("ready-after-tool", "turn finished after a shell command", e)
        # a file write refused with Esc, or written without asking in accept-edits mode
        self.make_proj()
        e = self.count(self.turn_end)
        t = self.count(self.tool_sent())
        self.send("Create a notes file EDITFILE")
        self.wait_ev(self.tool_sent(), t, 30)
        time.sleep(2.5)
        if "Do you want to" in self.pane():
            self.cap("confirm-file-write", "NEEDS_CONFIRMATION", "approval for creating notes.txt")
            self.keys("Escape")
            time.sleep(2.5)
            self.settle()
            self.cap("ready-after-deny", "READY", "file write refused with Esc; prompt idle")
        else:
            self.ready("ready-after-accepted-edit", "file written without asking; turn over", e)
        # an API error it does not retry
        e = self.count(lambda x: x["kind"] == "error_sent")
        self.send("Trigger an error FAIL400")
        self.wait_ev(lambda x: x["kind"] == "error_sent", e, 30)
        time.sleep(3)
        self.settle()
        self.cap("error-400", "ERROR", "HTTP 400 shown, turn over")
        # a plain answer, so the next case starts from an idle screen with no error on it (the
        # CLI merges the failed prompt into the next one, whose keyword would fail it again)
        e = self.count(self.turn_end)
        self.queue([{"type": "text", "text": "OK. I am ready for the next instruction.",
                     "delay": 0.05}])
        self.send("Say you are ready")
        self.wait_ev(self.turn_end, e, 40)
        time.sleep(1.5)
        self.settle()

    def task_actions(self, tasks_api):
        subjects = [("Read the README", "Reading the README"),
                    ("Clean the build directory", "Cleaning the build directory"),
                    ("Write a summary", "Writing a summary")]
        slow = "I am working through the list now and will report when every item is done."
        acts = []
        if tasks_api:
            for subj, active in subjects:
                acts.append({"type": "tool", "tool": "raw", "name": "TaskCreate", "delay": 0.05,
                             "input": {"subject": subj, "description": subj + " of the demo project.",
                                       "activeForm": active}})
            def upd(i, st):
                return {"type": "tool", "tool": "raw", "name": "TaskUpdate", "delay": 0.05,
                        "input": {"taskId": str(i), "status": st}}
        else:
            def todos(states):
                return {"type": "tool", "tool": "raw", "name": "TodoWrite", "delay": 0.05,
                        "input": {"todos": [{"content": s, "activeForm": a, "status": st}
                                            for (s, a), st in zip(subjects, states)]}}
            acts.append(todos(["pending"] * 3))
            def upd(i, st):  # the whole list each time, as TodoWrite wants
                states = ["completed"] * (i - 1) + [st] + ["pending"] * (3 - i)
                return todos(states)
        acts.append(upd(1, "in_progress"))
        acts.append({"type": "tool", "tool": "bash", "command": "sleep 14", "delay": 0.3,
                     "description": "Wait for the build to settle", "pre_text": slow, "line_words": 8})
        acts.append(upd(1, "completed"))
        acts.append(upd(2, "in_progress"))
        acts.append({"type": "tool", "tool": "bash", "command": "sleep 10", "delay": 0.05,
                     "description": "Wait again"})
        acts.append(upd(2, "completed"))
        acts.append(upd(3, "in_progress"))
        acts.append({"type": "text", "tokens": 30, "delay": 0.35, "line_words": 8})
        return acts

    def warm_up(self):
        """One plain turn, so the tools the CLI offers are known (from its request body)."""
        self.learn_tools()
        if self.tools:
            return
        e = self.count(self.turn_end)
        self.send("Say hello")
        self.ready("ready-after-hello", "a short plain turn", e)
        self.learn_tools()

    def case_tasks(self):
        self.warm_up()
        tasks_api = "TaskCreate" in self.tools
        if not tasks_api and "TodoWrite" not in self.tools:
            log("no task tool offered: tasks case skipped")
            return
        kind = "TaskCreate/TaskUpdate" if tasks_api else "TodoWrite"
        self.queue(self.task_actions(tasks_api))
        e = self.count(self.turn_end)
        sleeps = self.count(self.tool_sent("Bash"))
        texts = self.count(self.text_start)
        self.send("Make a plan with tasks and work through it")
        self.wait_ev(self.tool_sent("Bash"), sleeps, 60)
        time.sleep(5)
        self.cap_busy("busy-tasks-tool-running", f"{kind} list shown, 'sleep 14' running", e)
        self.wait_ev(self.tool_sent("Bash"), sleeps + 1, 60)
        time.sleep(3)
        self.cap_busy("busy-tasks-second-step", f"{kind} list, first done, 'sleep 10' running", e)
        self.wait_ev(self.text_start, texts, 60)
        time.sleep(4)
        self.cap_busy("busy-tasks-streaming", f"{kind} list, last task's reply streaming", e)
        self.ready("ready-after-tasks", f"turn over after working through a {kind} list", e)

    def case_language(self):
        e = self.count(self.turn_end)
        s = self.count(self.main_start)
        self.send("Lies die Datei und sag mir, was du vorschlägst LANGDESLOW")
        self.wait_ev(self.main_start, s, 30)
        time.sleep(6)
        self.cap_busy("busy-streaming-german", "German reply streaming", e)
        self.ready("ready-after-german", "German reply done", e)
        e = self.count(self.turn_end)
        self.send("README を読んで LANGJA")
        self.ready("ready-after-japanese", "Japanese reply ending in a question, done", e)

    def case_background(self):
        """A background shell (`sleep 40`): the end mark counts it while it runs (BUSY by the
        promise READY makes), and the server log tells whether its end starts a turn by itself."""
        e, s = self.count(self.turn_end), self.count(self.main_start)
        self.send("Start the long job in the background BGSHELL")
        end = time.time() + 30
        while time.time() < end and self.count(self.turn_end) <= e:
            if "Do you want to proceed?" in self.pane():
                self.keys("Enter")
            time.sleep(0.5)
        time.sleep(2)
        started = time.time()
        self.cap("busy-background-shell", "BUSY", "turn ended, its background `sleep 40` runs")
        turns = self.count(self.main_start)
        self.wait_ev(self.main_start, turns, 60)
        woke = self.count(self.main_start) > turns
        log(f"background shell: a new turn {'began' if woke else 'did not begin'} "
            f"{time.time() - started:.0f} s after the capture (requests before: {turns - s})")
        self.ready("ready-after-background-shell", "the shell ended and its notice was answered",
                   self.count(self.turn_end))

    def case_agent(self):
        """A background agent (its model call hangs 25 s): the line while the main turn waits on
        it, and whether its report starts a turn by itself."""
        e = self.count(self.turn_end)
        self.send("Research it with an agent in the background BGAGENT")
        end = time.time() + 40
        while time.time() < end and self.count(self.turn_end) <= e:
            if "Do you want to proceed?" in self.pane():
                self.keys("Enter")
            time.sleep(0.5)
        time.sleep(2)
        self.cap("busy-background-agent", "BUSY", "turn ended, its background agent's model call hangs")
        time.sleep(4)
        self.cap("busy-background-agent-later", "BUSY", "the same, 4 s on")
        self.ready("ready-after-background-agent", "the agent reported and its notice was answered",
                   self.count(self.turn_end) + 1)

    def case_prose(self):
        e = self.count(self.turn_end)
        self.send("What should we do next PROSEQUESTION")
        self.ready("ready-after-prose-question", "reply asks a question in prose with a numbered list; idle prompt (not a dialog)", e)

    def case_ask(self):
        t = self.count(self.tool_sent())
        self.send("Ask me something ASKUSER")
        self.wait_ev(self.tool_sent(), t, 30)
        time.sleep(2.5)
        self.cap("confirm-ask-user-question", "NEEDS_CONFIRMATION", "AskUserQuestion menu")
        self.keys("Escape")
        time.sleep(2.5)
        self.settle()
        self.cap("ready-after-decline-question", "READY", "question declined with Esc; idle")

    def cycle_to(self, words, tries=6):
        for _ in range(tries):
            if words in self.pane():
                return True
            self.keys("BTab")
            time.sleep(0.8)
        return words in self.pane()

    def case_modes(self):
        self.warm_up()
        if self.cycle_to("accept edits on"):
            self.settle()
            self.cap("ready-acceptedits-mode", "READY", "idle in accept-edits mode")
            e = self.count(self.turn_end)
            s = self.count(self.main_start)
            self.send("Please write a long paragraph SLOWTEXT")
            self.wait_ev(self.main_start, s, 30)
            time.sleep(6)
            self.cap_busy("busy-streaming-acceptedits", "streaming in accept-edits mode", e)
            self.ready("ready-after-answer-acceptedits", "turn over in accept-edits mode", e)
        if not self.cycle_to("plan mode on"):
            log("plan mode not reached")
            return
        self.settle()
        self.cap("ready-plan-mode", "READY", "idle in plan mode")
        e = self.count(self.turn_end)
        s = self.count(self.main_start)
        self.send("Please write a long paragraph SLOWTEXT")
        self.wait_ev(self.main_start, s, 30)
        time.sleep(6)
        self.cap_busy("busy-streaming-plan-mode", "streaming in plan mode", e)
        self.ready("ready-after-answer-plan-mode", "turn over in plan mode", e)
        plan = {"type": "tool", "tool": "raw", "name": "ExitPlanMode", "delay": 0.2,
                "pre_text": "I have a plan for the readme.",
                "input": {"plan": "# Plan\n\n1. Add a usage section to README.md\n2. Add a license line\n"}}
        acts = [plan]
        if "ExitPlanMode" not in self.tools and "ToolSearch" in self.tools:
            acts = [{"type": "tool", "tool": "raw", "name": "ToolSearch", "delay": 0.2,
                     "input": {"query": "select:ExitPlanMode", "max_results": 1}}, plan]
        self.queue(acts)
        t = self.count(self.tool_sent("ExitPlanMode"))
        self.send("Finalize the plan")
        self.wait_ev(self.tool_sent("ExitPlanMode"), t, 40)
        time.sleep(3)
        self.settle()
        self.cap("confirm-plan-exit", "NEEDS_CONFIRMATION", "plan approval menu (exit plan mode?)")
        self.keys("Escape")
        time.sleep(2.5)
        self.settle()
        self.cap("ready-after-plan-reject", "READY", "plan refused with Esc; idle in plan mode")
        self.cycle_to("? for shortcuts") or self.cycle_to("manual mode") or None
        self.settle()

    def case_draft(self):
        self.tm("send-keys", "-t", "lab", "-l", "this prompt is typed but not sent yet")
        time.sleep(1.5)
        self.settle()
        self.cap("ready-draft-in-input", "READY", "idle; text typed in the box, not sent")
        if RUNS[self.a.run_name]["editor"] == "vim":
            self.keys("Escape")
            time.sleep(1)
            self.settle()
            self.cap("ready-vim-normal-mode", "READY", "idle; vim NORMAL mode with a draft")
            self.keys("i")
        self.keys("C-u")
        time.sleep(0.5)
        e = self.count(self.turn_end)
        s = self.count(self.main_start)
        self.send("Another long paragraph please SLOWTEXT")
        self.wait_ev(self.main_start, s, 30)
        time.sleep(3)
        self.tm("send-keys", "-t", "lab", "-l", "and then check the tests")
        time.sleep(2)
        self.cap_busy("busy-streaming-draft-typed", "streaming while a draft is typed in the box", e)
        self.keys("C-u")
        # in vim mode Esc leaves INSERT mode; Ctrl+C interrupts in every mode
        self.keys("C-c" if RUNS[self.a.run_name]["editor"] == "vim" else "Escape")
        time.sleep(2.5)
        self.settle()
        self.cap("ready-after-interrupt", "READY", "turn interrupted while streaming; idle")

    def kill_claude(self):
        """Claude Code killed from outside (a crash, a closed ssh link): its last frame stays."""
        shell = self.tm("display-message", "-p", "-t", "lab", "#{pane_pid}").stdout.strip()
        kids = subprocess.run(["ps", "-o", "pid=", "--ppid", shell], capture_output=True,
                              text=True).stdout.split()
        for pid in kids:
            os.kill(int(pid), 9)
        time.sleep(1)
        # the cursor was inside the dead frame: move it under the frame, so the new session
        # starts below the old dialog instead of drawing over it
        rows = int(self.a.size.split("x")[1])
        self.tm("send-keys", "-t", "lab", "-l", f"printf '\\033[{rows};1H\\n'")
        self.tm("send-keys", "-t", "lab", "Enter")
        time.sleep(1)

    def case_restart(self):
        """A dialog left on screen when Claude Code died, then a new session below it."""
        t = self.count(self.tool_sent())
        self.send("Clean the build directory RUNBASH")
        self.wait_ev(self.tool_sent(), t, 30)
        time.sleep(2.5)
        self.kill_claude()
        self.start_claude(fresh=False)
        self.cap("ready-restart-old-dialog-above", "READY",
                 "quit with a permission dialog open, started again below it; idle")

    def run(self):
        self.start_server()
        self.setup()
        self.start_claude()
        cases = self.a.cases.split(",")
        for case in cases:
            log(f"case {case}")
            try:
                getattr(self, "case_" + case)()
            except Exception as exc:  # one failed case must not lose the others
                log(f"case {case} failed: {exc!r}")
        self.quit_claude()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("claude")
    ap.add_argument("out")
    ap.add_argument("--run", dest="runs", action="append", required=True, choices=sorted(RUNS))
    ap.add_argument("--size", default="200x50")
    ap.add_argument("--port", type=int, default=18131)
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    a.claude = os.path.abspath(a.claude)
    a.out = os.path.abspath(a.out)
    for name in a.runs:
        a.run_name = name
        scratch = tempfile.mkdtemp(prefix="labc.")
        lab = Lab(a, scratch)
        log(f"Claude Code {lab.version}, run {name} at {a.size}, scratch {scratch}")
        try:
            lab.run()
        finally:
            lab.stop()
            if not a.keep:
                shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
