#!/usr/bin/env python3
"""Lab B driver: runs Gemini CLI, aider, opencode and plain programs in tmux against the fake
server and saves ground-truth screens.  Usage:
    labb_drive.py --scratch DIR --port 18200 [gemini|aider|opencode|plain ...]
DIR must contain npm/ (npm install --prefix DIR/npm @google/gemini-cli opencode-ai) and venv/
(python -m venv DIR/venv; pip install aider-chat).  The fake server must be running on --port
with its log dir at DIR/logs/server-PORT (run_lab_b.sh does all this).
"""
import argparse
import json
import os
import time
import traceback

try:  # imported as scripts.lab.labb_drive (scripts/record_signals.py)
    from . import labb_tmux as L
except ImportError:  # run as a file: its folder is first on the import path
    import labb_tmux as L

A = None  # args


def server_events(since=0.0):
    fn = os.path.join(A.scratch, "logs", f"server-{A.port}", "events.jsonl")
    out = []
    if os.path.exists(fn):
        for line in open(fn):
            try:
                e = json.loads(line)
            except Exception:
                continue
            if e.get("t", 0) >= since:
                out.append(e)
    return out


def wait_event(kind, since, timeout=30, pred=None):
    """Wait for a server event of `kind` after `since`, ignoring auxiliary requests
    (titles, JSON-schema helper calls)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        evs = server_events(since)
        aux = {e["rid"] for e in evs if e.get("event") == "request" and e.get("why") == "aux"}
        for e in evs:
            if e.get("event") == kind and e.get("rid") not in aux and (pred is None or pred(e)):
                return e
        time.sleep(0.2)
    raise TimeoutError(f"server event {kind} not seen")


def write_script(name, body):
    p = os.path.join(A.scratch, name)
    with open(p, "w") as f:
        f.write("#!/bin/bash\n" + body)
    os.chmod(p, 0o755)
    return p


def last_line(sess):
    lines = [l.strip() for l in L.capture(sess).split("\n") if l.strip()]
    return lines[-1] if lines else ""


def prompt(sess, text):
    L.send_text(sess, text)
    time.sleep(0.4)
    L.send_keys(sess, "Enter")


def step(fn, *a, **kw):
    """Run one capture step; log and continue on failure (so one flaky step loses nothing else)."""
    try:
        return fn(*a, **kw)
    except Exception as e:  # noqa: BLE001
        print(f"STEP FAILED {getattr(fn, '__name__', fn)}: {e}", flush=True)
        traceback.print_exc(limit=1)
        return None


# ============================================================ Gemini CLI
GEM_IDLE = r"Type your message or @path/to/file"
GEM_BUSY = r"esc to cancel"
GEM_CONFIRM = r"Allow execution of|Apply this change\?|Allow once|Allow for this session"


def gemini_env(tag, trust_settings=True):
    home = os.path.join(A.scratch, f"home-gemini-{tag}")
    work = os.path.join(A.scratch, f"work-gemini-{tag}")
    os.makedirs(os.path.join(home, ".gemini"), exist_ok=True)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "app.py"), "w") as f:
        f.write("print('v1')\n")
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    with open(os.path.join(home, ".gemini", "settings.json"), "w") as f:
        json.dump(settings, f, indent=2)
    if trust_settings:
        with open(os.path.join(home, ".gemini", "trustedFolders.json"), "w") as f:
            json.dump({work: "TRUST_FOLDER"}, f)
    script = write_script(f"run-gemini-{tag}.sh", f"""
export HOME='{home}' GEMINI_API_KEY=labb-fake-key GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:{A.port}
export COLORTERM=truecolor LABB_WORKDIR='{work}'
export PATH='{A.scratch}/npm/node_modules/.bin':"$PATH"
cd '{work}'
gemini "$@"
echo "[gemini exited rc=$?]"
exec bash --norc -i
""")
    return script, work


def run_gemini():
    cli = "gemini-cli"
    # --- fresh folder: trust dialog
    script, work = gemini_env("trust", trust_settings=False)
    s = "gem-trust"
    L.kill_session(s)
    L.new_session(s, script, 200, 50)
    step(lambda: (L.wait_for(s, r"Do you trust the files in this folder", 40),
                  L.save(s, cli, "confirm-trust-folder", "NEEDS_CONFIRMATION",
                         "start-up dialog 'Do you trust the files in this folder?' 1/2/3, Enter = trust")))
    L.kill_session(s)

    script, work = gemini_env("main")
    s = "gem"
    L.kill_session(s)
    L.new_session(s, script, 200, 50)
    step(lambda: (L.wait_for(s, GEM_IDLE, 40), L.wait_stable(s, 1.5),
                  L.save(s, cli, "ready-startup", "READY", "idle input box right after start-up")))
    # typed but not sent
    def typed():
        L.send_text(s, "draft text not yet sent")
        time.sleep(1)
        L.save(s, cli, "ready-typed-draft", "READY", "idle, user has typed a draft in the input box (not sent)")
        L.send_keys(s, "C-u")
        time.sleep(0.5)
        L.send_keys(s, "C-a", "C-k")
        time.sleep(0.5)
    step(typed)

    def slow():
        t = time.time()
        prompt(s, "LAB_SLOW tell me a long story")
        wait_event("stream_start", t, 20)
        time.sleep(4)
        L.save(s, cli, "busy-streaming", "BUSY", "model streaming text slowly; spinner + '(esc to cancel, Ns)'")
        L.wait_for(s, GEM_BUSY, 60, absent=True)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-answer", "READY", "idle after a finished streamed answer")
    step(slow)

    def shell():
        t = time.time()
        prompt(s, "LAB_SHELL run the command")
        L.wait_for(s, GEM_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION",
               "shell tool approval: 'Allow execution of [Shell]?' 1 allow once / 2 session / 3 no (esc)")
        L.send_keys(s, "1")
        time.sleep(3)
        L.save(s, cli, "busy-tool-running", "BUSY", "approved shell command (sleep 8) running")
        L.wait_for(s, GEM_BUSY, 40, absent=True)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-tool", "READY", "idle after the shell tool finished and final answer")
    step(shell)

    def edit_new():
        prompt(s, "LAB_EDIT create a file")
        L.wait_for(s, GEM_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-newfile", "NEEDS_CONFIRMATION",
               "write_file approval with diff: 'Apply this change?' 1 allow once / 2 allow for session / 3 modify with editor / no (esc)")
        L.send_keys(s, "Escape")
        time.sleep(2)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "after-deny-edit", "READY",
               "after Esc denied the edit: cancelled tool, back at input (ready)")
    step(edit_new)

    def edit_change():
        prompt(s, "LAB_CHANGE edit app.py")
        L.wait_for(s, GEM_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-replace", "NEEDS_CONFIRMATION",
               "replace (edit) approval with diff of app.py: 'Apply this change?'")
        L.send_keys(s, "1")
        L.wait_for(s, GEM_BUSY, 30, absent=True)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-edit", "READY", "idle after approved edit finished")
    step(edit_change)

    def err(tag, kw, note, wait=20):
        t = time.time()
        prompt(s, f"{kw} please")
        wait_event("request", t, 20, pred=lambda e: e.get("why") == kw)
        time.sleep(3)
        L.save(s, cli, f"{tag}-early", "BUSY" if L.capture(s).find("esc to cancel") >= 0 else "ERROR",
               note + " (3 s after the first failing request)")
        try:
            L.wait_for(s, GEM_BUSY, wait, absent=True)
        except TimeoutError:
            L.save(s, cli, f"{tag}-retrying", "BUSY", note + f" (still silently retrying after {wait}s)")
            L.send_keys(s, "Escape")
            time.sleep(2)
            L.wait_stable(s, 1.5)
            L.save(s, cli, f"{tag}-cancelled", "READY", note + ": user pressed Esc during retries -> "
                   "'Request cancelled.' and idle input (no error text shown)")
            return
        L.wait_stable(s, 1.5)
        L.save(s, cli, tag, "ERROR", note + " (final screen)")
    step(err, "error-500", "LAB_E500", "server returns HTTP 500 to every request; Gemini CLI retries "
         "silently (10 attempts, 5-30 s backoff) before showing an error", 300)
    step(err, "error-429", "LAB_E429", "server returns HTTP 429 RESOURCE_EXHAUSTED to every request", 40)
    step(err, "error-badjson", "LAB_BADJSON", "server streams invalid JSON", 60)
    step(err, "error-401", "LAB_E401", "server returns HTTP 401 UNAUTHENTICATED (not retried)", 40)
    step(err, "error-400", "LAB_E400", "server returns HTTP 400 INVALID_ARGUMENT (not retried)", 40)

    # second size (first a normal answer, so that the last thing on screen is not an error)
    step(lambda: (prompt(s, "hello"), time.sleep(3), L.wait_for(s, GEM_BUSY, 30, absent=True)))
    L.resize(s, 100, 30)
    time.sleep(1.5)
    step(lambda: (L.wait_stable(s, 1.0), L.save(s, cli, "ready-idle", "READY", "idle input at 100x30 after a normal answer")))

    def small_shell():
        prompt(s, "LAB_SHELL again")
        L.wait_for(s, GEM_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION", "shell approval at 100x30")
        L.send_keys(s, "Escape")
        time.sleep(1)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "after-deny-shell", "READY", "after Esc denied the shell command (100x30)")
    step(small_shell)

    def small_slow():
        t = time.time()
        prompt(s, "LAB_SLOW again")
        wait_event("stream_start", t, 20)
        time.sleep(3)
        L.save(s, cli, "busy-streaming", "BUSY", "streaming at 100x30")
        L.wait_for(s, GEM_BUSY, 60, absent=True)
    step(small_slow)
    L.resize(s, 200, 50)
    time.sleep(1)

    step(timeline, s, cli, 1, "LAB_FLOW run the flow", GEM_CONFIRM, ["1"], GEM_BUSY)
    step(timeline, s, cli, 2, "LAB_NEWFILE2 write the notes file", GEM_CONFIRM, ["1"], GEM_BUSY)
    L.kill_session(s)



# ============================================================ Qwen Code (a Gemini CLI fork on OpenAI-compatible APIs)
QWEN_IDLE = r"Type your message or @path/to/file"
QWEN_BUSY = r"esc to cancel"
QWEN_CONFIRM = r"Allow execution of|Apply this change\?|Yes, allow once|Waiting for user confirmation"
# Qwen Code refuses `sleep N; cmd` ("Run blocking commands in the background"): a python sleep it runs.
QWEN_SHELL = 'python3 -c "import time; time.sleep(8)" && echo lab-shell-done'
QWEN_FLOW = 'python3 -c "import time; time.sleep(4)" && echo flow-done'


def queue(action):
    import urllib.request
    req = urllib.request.Request(f"http://127.0.0.1:{A.port}/_control/queue",
                                 data=json.dumps(action).encode(), method="POST")
    urllib.request.urlopen(req, timeout=5).read()


def qwen_env(tag):
    home = os.path.join(A.scratch, f"home-qwen-{tag}")
    work = os.path.join(A.scratch, f"work-qwen-{tag}")
    os.makedirs(os.path.join(home, ".qwen"), exist_ok=True)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "app.py"), "w") as f:
        f.write("print('v1')\n")
    settings = {"security": {"auth": {"selectedType": "openai"}},
                "general": {"enableAutoUpdate": False, "disableAutoUpdate": True,
                            "disableUpdateNag": True},
                "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}
    with open(os.path.join(home, ".qwen", "settings.json"), "w") as f:
        json.dump(settings, f, indent=2)
    script = write_script(f"run-qwen-{tag}.sh", f"""
export HOME='{home}' OPENAI_API_KEY=labb-fake-key OPENAI_BASE_URL=http://127.0.0.1:{A.port}/v1
export OPENAI_MODEL=labb-model COLORTERM=truecolor
export PATH='{A.scratch}/npm/node_modules/.bin':"$PATH"
cd '{work}'
qwen --approval-mode default "$@"
echo "[qwen exited rc=$?]"
exec bash --norc -i
""")
    return script, work


def run_qwen():
    cli = "qwen-code"
    script, work = qwen_env("main")
    s = "qwen"
    L.kill_session(s)
    L.new_session(s, script, 200, 50)
    step(lambda: (L.wait_for(s, QWEN_IDLE, 60), L.wait_stable(s, 2.0),
                  L.save(s, cli, "ready-startup", "READY", "idle input box right after start-up")))

    def typed():
        L.send_text(s, "draft text not yet sent")
        time.sleep(1)
        L.save(s, cli, "ready-typed-draft", "READY", "idle, user has typed a draft in the input box (not sent)")
        L.send_keys(s, "C-u")
        time.sleep(0.5)
        L.send_keys(s, "C-a", "C-k")
        time.sleep(0.5)
    step(typed)

    def slow():
        t = time.time()
        prompt(s, "LAB_SLOW tell me a long story")
        wait_event("stream_start", t, 20)
        time.sleep(4)
        L.save(s, cli, "busy-streaming", "BUSY", "model streaming text slowly; spinner + '(Ns · esc to cancel)'")
        L.wait_for(s, QWEN_BUSY, 60, absent=True)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-answer", "READY", "idle after a finished streamed answer")
    step(slow)

    def shell(size=""):
        queue({"type": "shell", "command": QWEN_SHELL, "description": "Wait 8 seconds then print a marker",
               "pre_text": "I will run a shell command now."})
        prompt(s, "LAB_SHELL run the command")
        L.wait_for(s, QWEN_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION",
               "shell tool approval: 'Allow execution of: python3?' 1 allow once / 2-3 always / 4 no (esc)")
        L.send_keys(s, "1")
        time.sleep(3)
        L.save(s, cli, "busy-tool-running", "BUSY", "approved shell command (python sleep 8) running")
        L.wait_for(s, QWEN_BUSY, 40, absent=True)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-tool", "READY", "idle after the shell tool finished and final answer")
    step(shell)

    def edit_new():
        queue({"type": "write", "path": os.path.join(work, "hello_lab.py"),
               "content": "print('hello from lab B')\n", "pre_text": "I will create hello_lab.py."})
        prompt(s, "LAB_EDIT create a file")
        L.wait_for(s, QWEN_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-newfile", "NEEDS_CONFIRMATION", "write_file approval with diff")
        L.send_keys(s, "Escape")
        time.sleep(2)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "after-deny-edit", "READY", "after Esc denied the edit: back at input (ready)")
    step(edit_new)

    def edit_change():
        queue({"type": "edit", "path": os.path.join(work, "app.py"), "old": "print('v1')",
               "new": "print('v2')", "pre_text": "I will change app.py."})
        prompt(s, "LAB_CHANGE edit app.py")
        L.wait_for(s, QWEN_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-replace", "NEEDS_CONFIRMATION", "edit approval with diff of app.py")
        L.send_keys(s, "1")
        L.wait_for(s, QWEN_BUSY, 30, absent=True)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-edit", "READY", "idle after approved edit finished")

    step(lambda: (prompt(s, "hello"), time.sleep(3), L.wait_for(s, QWEN_BUSY, 30, absent=True)))
    L.resize(s, 100, 30)
    time.sleep(1.5)
    step(lambda: (L.wait_stable(s, 1.0), L.save(s, cli, "ready-idle", "READY", "idle input at 100x30 after a normal answer")))

    def small_shell():
        queue({"type": "shell", "command": QWEN_SHELL, "description": "Wait 8 seconds then print a marker",
               "pre_text": "I will run a shell command now."})
        prompt(s, "LAB_SHELL again")
        L.wait_for(s, QWEN_CONFIRM, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION", "shell approval at 100x30")
        L.send_keys(s, "Escape")
        time.sleep(1)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "after-deny-shell", "READY", "after Esc denied the shell command (100x30)")
    step(small_shell)

    def small_slow():
        t = time.time()
        prompt(s, "LAB_SLOW again")
        wait_event("stream_start", t, 20)
        time.sleep(3)
        L.save(s, cli, "busy-streaming", "BUSY", "streaming at 100x30")
        L.wait_for(s, QWEN_BUSY, 60, absent=True)
    step(small_slow)
    L.resize(s, 200, 50)
    time.sleep(1)
    queue({"type": "shell", "command": QWEN_FLOW, "description": "Wait 4 seconds then print a marker",
           "pre_tokens": 16, "delay": 0.3})
    step(timeline, s, cli, 1, "LAB_FLOW run the flow", QWEN_CONFIRM, ["1"], QWEN_BUSY)
    queue({"type": "write", "path": os.path.join(work, "notes_lab.md"),
           "content": "# Notes\n\nwritten by the lab B fake model\n", "pre_tokens": 12, "delay": 0.3})
    step(timeline, s, cli, 2, "LAB_NEWFILE2 write the notes file", QWEN_CONFIRM, ["1"], QWEN_BUSY)
    def err(tag, kw, note, wait=20):
        t = time.time()
        prompt(s, f"{kw} please")
        wait_event("request", t, 20, pred=lambda e: e.get("why") == kw)
        time.sleep(3)
        L.save(s, cli, f"{tag}-early", "BUSY" if L.capture(s).find("esc to cancel") >= 0 else "ERROR",
               note + " (3 s after the first failing request)")
        try:
            L.wait_for(s, QWEN_BUSY, wait, absent=True)
        except TimeoutError:
            L.save(s, cli, f"{tag}-retrying", "BUSY", note + f" (still retrying after {wait}s)")
            L.send_keys(s, "Escape")
            time.sleep(2)
            L.wait_stable(s, 1.5)
            L.save(s, cli, f"{tag}-cancelled", "READY", note + ": user pressed Esc during retries")
            return
        L.wait_stable(s, 3.0)
        # the spinner blinks off between retries: only a screen without it is the final error
        L.save(s, cli, tag, "BUSY" if "esc to cancel" in L.capture(s) else "ERROR",
               note + " (final screen)")
        L.wait_for(s, QWEN_BUSY, 120, absent=True)
    # After a 401 Qwen Code answers every later prompt with the same 401 without asking the
    # server, so the 401 comes last.
    step(err, "error-500", "LAB_E500", "server returns HTTP 500 to every request (retried)", 90)
    step(err, "error-badjson", "LAB_BADJSON", "server streams invalid JSON", 40)
    step(err, "error-400", "LAB_E400", "server returns HTTP 400", 40)
    step(err, "error-401", "LAB_E401", "server returns HTTP 401", 40)

    L.kill_session(s)

# ============================================================ timelines
def timeline(s, cli, n, text, confirm_rx, approve_keys, busy_rx, idle_rx=None, extra_confirms=0):
    """prompt -> streaming -> approval -> approve -> tool+streaming -> idle, frame every 0.5 s.
    Ground truth: BUSY from Enter until the server has sent the tool call AND the approval
    prompt is on screen; NEEDS_CONFIRMATION until the approve key; BUSY until the server has
    finished the final stream AND the busy marker is gone; then READY."""
    L.wait_stable(s, 1.0)
    tl = L.Timeline(s, cli, n)
    tl.start()
    time.sleep(2)
    t = time.time()
    L.send_text(s, text)
    time.sleep(0.4)
    tl.state = "BUSY"
    L.send_keys(s, "Enter")
    wait_event("tool_call", t, 40)
    for i in range(1 + extra_confirms):
        L.wait_for(s, confirm_rx, 40)
        tl.state = "NEEDS_CONFIRMATION"
        time.sleep(3)
        tl.state = "BUSY"
        L.send_keys(s, *approve_keys)
        time.sleep(1.0)
    wait_event("stream_end", t, 60, pred=lambda e: True and _after_tool_done(t))
    if busy_rx:
        L.wait_for(s, busy_rx, 60, absent=True)
    if idle_rx:
        L.wait_for(s, idle_rx, 60)
    tl.state = "READY"
    time.sleep(3)
    tl.stop(f"{cli} timeline {n}: prompt {text!r}; approve keys {approve_keys}; states from driver actions "
            "+ server events (events.jsonl)")
    fix_onset(tl.dir, confirm_rx)
    print(f"timeline {cli}/{n}: {len(tl.rows)} frames", flush=True)


def fix_onset(tl_dir, confirm_rx, last_line_only=False):
    """A frame captured after the approval prompt was drawn but before the driver's poll noticed
    it is labelled BUSY; relabel such frames (BUSY, showing the prompt, right before a
    NEEDS_CONFIRMATION run, i.e. after the server sent the tool call and before any key) as
    NEEDS_CONFIRMATION.  Frames after the approve key that still show the old dialog stay BUSY."""
    import re
    rx = re.compile(confirm_rx, re.M)
    fn = os.path.join(tl_dir, "frames.tsv")
    rows = [l.rstrip("\n").split("\t") for l in open(fn)]
    head, rows = rows[0], rows[1:]
    changed = 0
    for i in range(len(rows) - 2, -1, -1):
        if rows[i][2] == "BUSY" and rows[i + 1][2] == "NEEDS_CONFIRMATION":
            text = open(os.path.join(tl_dir, rows[i][1])).read()
            if last_line_only:
                lines = [l for l in text.split("\n") if l.strip()]
                text = lines[-1] if lines else ""
            if rx.search(text):
                rows[i][2] = "NEEDS_CONFIRMATION"
                changed += 1
    with open(fn, "w") as f:
        f.write("\t".join(head) + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    return changed


def _after_tool_done(since):
    evs = server_events(since)
    after = [e for e in evs if e.get("event") == "request" and str(e.get("why", "")).startswith("after_tool")]
    if not after:
        return False
    rids = {e["rid"] for e in after}
    return any(e.get("event") == "stream_end" and e["rid"] in rids for e in evs)


# ============================================================ aider
AID_IDLE = r"^> ?$|^(diff|whole|architect|ask|code)?> ?$"
AID_CONFIRM = r"\(Y\)es/\(N\)o"


def aider_env(tag):
    home = os.path.join(A.scratch, f"home-aider-{tag}")
    work = os.path.join(A.scratch, f"work-aider-{tag}")
    os.makedirs(home, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "app.py"), "w") as f:
        f.write("print('v1')\n")
    os.system(f"cd '{work}' && git init -q && git -c user.email=lab@b -c user.name=labB add app.py "
              f"&& git -c user.email=lab@b -c user.name=labB commit -qm init")
    script = write_script(f"run-aider-{tag}.sh", f"""
export HOME='{home}' OPENAI_API_KEY=labb-fake-key OPENAI_API_BASE=http://127.0.0.1:{A.port}/v1
export AIDER_ANALYTICS=false AIDER_CHECK_UPDATE=false
cd '{work}'
'{A.scratch}/venv/bin/aider' --model openai/labb-model --openai-api-base http://127.0.0.1:{A.port}/v1 \\
  --no-check-update --no-show-release-notes --analytics-disable --no-gitignore \\
  --no-show-model-warnings --edit-format diff --no-auto-commits --git-commit-verify "$@"
echo "[aider exited rc=$?]"
exec bash --norc -i
""")
    return script, work


def aider_idle(s, timeout=60):
    """aider idle = last non-empty line is the input prompt '>' (after the last answer)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        lines = [l for l in L.capture(s).rstrip("\n").split("\n") if l.strip()]
        if lines and lines[-1].rstrip() in (">", "diff>", "ask>", "architect>") and len(lines) > 1:
            return True
        time.sleep(0.3)
    raise TimeoutError("aider not idle")


def run_aider():
    cli = "aider"
    script, work = aider_env("main")
    s = "aid"
    L.kill_session(s)
    L.new_session(s, script, 200, 50)
    step(lambda: (aider_idle(s, 60), L.wait_stable(s, 1.5),
                  L.save(s, cli, "ready-startup", "READY", "start-up banner then the '>' input prompt")))

    def slow():
        t = time.time()
        prompt(s, "LAB_SLOW tell me a long story")
        wait_event("stream_start", t, 30)
        time.sleep(5)
        L.save(s, cli, "busy-streaming", "BUSY", "model streaming text (markdown rendered live); no prompt")
        wait_event("stream_end", t, 60)
        aider_idle(s, 30)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-answer", "READY", "idle '>' prompt after answer + token/cost line")
    step(slow)

    def waiting():
        t = time.time()
        L.send_text(s, "LAB_SLOW second story")
        time.sleep(0.3)
        L.send_keys(s, "Enter")
        time.sleep(0.6)
        L.save(s, cli, "busy-waiting", "BUSY", "request sent, waiting spinner before/at first tokens")
        wait_event("stream_end", t, 60)
        aider_idle(s, 30)
    step(waiting)

    def shell():
        t = time.time()
        prompt(s, "LAB_SHELL run the command")
        L.wait_for(s, r"Run shell command\?", 40)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION",
               "aider suggests a shell command: 'Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]:'")
        L.send_keys(s, "y", "Enter")
        time.sleep(3)
        L.save(s, cli, "busy-tool-running", "BUSY", "approved shell command (sleep 8) running; no output yet")
        L.wait_for(s, r"Add command output to the chat\?", 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-add-output", "NEEDS_CONFIRMATION",
               "after the command: 'Add command output to the chat? (Y)es/(N)o/(D)on't ask again [Yes]:'")
        L.send_keys(s, "n", "Enter")
        aider_idle(s, 30)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-tool", "READY", "idle after the shell command finished")
    step(shell)

    def edit_new():
        prompt(s, "LAB_EDIT create a file")
        L.wait_for(s, AID_CONFIRM, 40)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-newfile", "NEEDS_CONFIRMATION",
               "SEARCH/REPLACE creating a new file: 'Create new file? (Y)es/(N)o [Yes]:'")
        L.send_keys(s, "y", "Enter")
        aider_idle(s, 30)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-edit", "READY", "idle after the new file was written ('Applied edit to')")
    step(edit_new)

    def edit_notinchat():
        prompt(s, "LAB_CHANGE edit app.py")
        L.wait_for(s, AID_CONFIRM, 40)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-notinchat", "NEEDS_CONFIRMATION",
               "reply edits app.py which is not in the chat; prompt: " + last_line(s))
        L.send_keys(s, "y", "Enter")
        time.sleep(2)
        if "(Y)es/(N)o" in last_line(s):
            L.save(s, cli, "confirm-edit-notinchat-2", "NEEDS_CONFIRMATION",
                   "second confirmation right after the first; prompt: " + last_line(s))
            L.send_keys(s, "y", "Enter")
        aider_idle(s, 30)
        L.wait_stable(s, 1.5)
        L.save(s, cli, "ready-after-edit2", "READY", "idle after edit applied to app.py")
    step(edit_notinchat)

    def err(tag, kw, note, wait=60):
        t = time.time()
        prompt(s, f"{kw} please")
        wait_event("request", t, 20, pred=lambda e: e.get("why") == kw)
        time.sleep(2.5)
        tail = L.capture(s).split(f"{kw} please")[-1]   # only what came after this prompt
        L.save(s, cli, f"{tag}-early", "BUSY" if "Retrying in" in tail else "ERROR",
               note + " (2.5 s after first failing request; 'Retrying in N seconds...' = still BUSY)")
        try:
            aider_idle(s, wait)
        except TimeoutError:
            L.save(s, cli, f"{tag}-retrying", "BUSY", note + f" (still retrying after {wait}s)")
            L.send_keys(s, "C-c")
            time.sleep(2)
            L.wait_stable(s, 1.5)
            L.save(s, cli, f"{tag}-interrupted", "READY", note + ": Ctrl-C during retries, back at prompt")
            return
        L.wait_stable(s, 1.5)
        L.save(s, cli, tag, "ERROR", note + " (final screen: error text then '>' prompt)")
    step(err, "error-500", "LAB_E500", "HTTP 500 from server", 90)
    step(err, "error-429", "LAB_E429", "HTTP 429 rate limit from server", 90)
    step(err, "error-badjson", "LAB_BADJSON", "server streams invalid JSON", 60)
    step(err, "error-401", "LAB_E401", "HTTP 401 authentication error (not retried)", 40)

    step(lambda: (prompt(s, "hello"), time.sleep(2), aider_idle(s, 30)))
    L.resize(s, 100, 30)
    time.sleep(1.5)
    step(lambda: (L.wait_stable(s, 1.0), L.save(s, cli, "ready-idle", "READY", "idle diff> prompt at 100x30 after a normal answer")))

    def small_shell():
        prompt(s, "LAB_SHELL again")
        L.wait_for(s, r"Run shell command\?", 40)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION", "Run shell command? at 100x30")
        L.send_keys(s, "n", "Enter")
        aider_idle(s, 30)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "after-deny-shell", "READY", "after 'n' denied the command (100x30)")
    step(small_shell)
    L.resize(s, 200, 50)
    time.sleep(1)
    step(lambda: (L.send_keys(s, "C-l"), time.sleep(1)))

    fix_later = []

    def tl():
        L.wait_stable(s, 1.0)
        tlo = L.Timeline(s, cli, 1)
        tlo.start()
        time.sleep(2)
        t = time.time()
        L.send_text(s, "LAB_FLOW run the flow")
        time.sleep(0.4)
        tlo.state = "BUSY"
        L.send_keys(s, "Enter")
        L.wait_for(s, r"Run shell command\?", 40)
        tlo.state = "NEEDS_CONFIRMATION"
        time.sleep(3)
        tlo.state = "BUSY"
        L.send_keys(s, "y", "Enter")
        L.wait_for(s, r"Add command output to the chat\?", 40)
        tlo.state = "NEEDS_CONFIRMATION"
        time.sleep(3)
        tlo.state = "BUSY"
        L.send_keys(s, "y", "Enter")
        time.sleep(1)
        # aider does not auto-continue after adding output: idle '>'
        aider_idle(s, 40)
        tlo.state = "READY"
        time.sleep(3)
        fix_later.append(tlo)
        tlo.stop("aider timeline 1: LAB_FLOW: streaming text + ```bash block -> 'Run shell command?' y -> "
                 "command runs (sleep 4) -> 'Add command output to the chat?' y -> idle '>'")
        print(f"timeline aider/1: {len(tlo.rows)} frames")
    step(tl)
    for tlo in fix_later:
        fix_onset(tlo.dir, AID_CONFIRM, last_line_only=True)
    L.kill_session(s)


# ============================================================ opencode
OC_BUSY = r"esc interrupt"
OC_CONFIRM = r"Permission required"


def opencode_env(tag):
    home = os.path.join(A.scratch, f"home-opencode-{tag}")
    work = os.path.join(A.scratch, f"work-opencode-{tag}")
    os.makedirs(os.path.join(home, ".config", "opencode"), exist_ok=True)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "app.py"), "w") as f:
        f.write("print('v1')\n")
    os.system(f"cd '{work}' && git init -q")
    cfg = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": "labb/labb-model",
        "small_model": "labb/labb-model",
        "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
        "provider": {
            "labb": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Lab B fake",
                "options": {"baseURL": f"http://127.0.0.1:{A.port}/v1", "apiKey": "labb-fake-key"},
                "models": {"labb-model": {"name": "Lab B Model"}},
            }
        },
    }
    with open(os.path.join(home, ".config", "opencode", "opencode.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    script = write_script(f"run-opencode-{tag}.sh", f"""
export HOME='{home}' XDG_CONFIG_HOME='{home}/.config' XDG_DATA_HOME='{home}/.local/share'
export XDG_CACHE_HOME='{home}/.cache' XDG_STATE_HOME='{home}/.local/state'
export OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1
export OPENCODE_DISABLE_SHARE=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 COLORTERM=truecolor
export PATH='{A.scratch}/npm/node_modules/.bin':"$PATH"
cd '{work}'
opencode "$@"
echo "[opencode exited rc=$?]"
exec bash --norc -i
""")
    return script, work


def run_opencode():
    cli = "opencode"
    script, work = opencode_env("main")
    s = "oc"
    L.kill_session(s)
    L.new_session(s, script, 200, 50)
    step(lambda: (L.wait_for(s, r"Ask anything", 60), L.wait_stable(s, 2.0, 40), time.sleep(3),
                  L.save(s, cli, "ready-startup", "READY", "start-up home screen with input box")))

    def slow():
        t = time.time()
        L.send_text(s, "LAB_SLOW tell me a long story")
        L.wait_for(s, r"LAB_SLOW tell me", 10)   # the TUI really took the keystrokes
        time.sleep(0.5)
        L.send_keys(s, "Enter")
        wait_event("stream_start", t, 30, pred=lambda e: True)
        time.sleep(5)
        L.save(s, cli, "busy-streaming", "BUSY", "model streaming text slowly")
        wait_event("stream_end", t, 60, pred=lambda e: True)
        time.sleep(3)
        L.wait_stable(s, 2.0)
        L.save(s, cli, "ready-after-answer", "READY", "idle after finished answer")
    step(slow)

    def shell():
        t = time.time()
        prompt(s, "LAB_SHELL run the command")
        wait_event("tool_call", t, 30)
        L.wait_for(s, OC_CONFIRM, 20)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION", "bash tool permission request")
        L.send_keys(s, "Enter")
        time.sleep(3)
        L.save(s, cli, "busy-tool-running", "BUSY", "approved bash command (sleep 8) running")
        wait_event("stream_end", t, 40, pred=lambda e: _after_tool_done(t))
        time.sleep(3)
        L.wait_stable(s, 2.0)
        L.save(s, cli, "ready-after-tool", "READY", "idle after shell tool + final answer")
    step(shell)

    def edit_new():
        t = time.time()
        prompt(s, "LAB_EDIT create a file")
        wait_event("tool_call", t, 30)
        L.wait_for(s, OC_CONFIRM, 20)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-newfile", "NEEDS_CONFIRMATION", "write tool permission request (new file)")
        L.send_keys(s, "Enter")
        wait_event("stream_end", t, 40, pred=lambda e: _after_tool_done(t))
        time.sleep(3)
        L.wait_stable(s, 2.0)
        L.save(s, cli, "ready-after-edit", "READY", "idle after the approved write")
    step(edit_new)

    def edit_change():
        t = time.time()
        prompt(s, "LAB_CHANGE edit app.py")
        wait_event("tool_call", t, 30)
        L.wait_for(s, OC_CONFIRM, 20)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-edit-replace", "NEEDS_CONFIRMATION", "edit tool permission request with diff")
        L.send_keys(s, "Escape")
        time.sleep(3)
        L.wait_stable(s, 2.0)
        L.save(s, cli, "after-deny-edit", "READY", "after Esc rejected the edit")
    step(edit_change)

    def err(tag, kw, note, wait=60):
        t = time.time()
        prompt(s, f"{kw} please")
        wait_event("request", t, 20, pred=lambda e: e.get("why") == kw)
        time.sleep(3)
        busy = "esc interrupt" in L.capture(s)
        L.save(s, cli, f"{tag}-early", "BUSY" if busy else "ERROR",
               note + (" (3 s after first failing request: '[retrying in Ns attempt #N]' countdown while "
                       "'esc interrupt' shows = still working)" if busy else " (3 s after the failing request)"))
        try:
            L.wait_for(s, OC_BUSY, wait, absent=True)
        except TimeoutError:
            L.save(s, cli, f"{tag}-retrying", "BUSY", note + f" (still retrying after {wait}s)")
            L.send_keys(s, "Escape")
            time.sleep(0.7)
            L.save(s, cli, f"{tag}-esc-again", "BUSY", note + ": after one Esc, footer says 'esc again to interrupt' (still retrying)")
            L.send_keys(s, "Escape")
            time.sleep(2)
            L.wait_stable(s, 2.0, 30)
            L.save(s, cli, f"{tag}-interrupted", "READY", note + ": interrupted with Esc Esc during retries, idle input")
            return
        L.wait_stable(s, 2.0, 30)
        L.save(s, cli, tag, "ERROR", note + " (final screen after the agent gave up)")
    step(err, "error-500", "LAB_E500", "HTTP 500 from every request (opencode retries with backoff)", 15)
    step(err, "error-429", "LAB_E429", "HTTP 429 from every request (opencode retries with backoff)", 15)
    step(err, "error-badjson", "LAB_BADJSON", "server streams invalid JSON: 'JSON parsing failed' shown in chat", 30)
    step(err, "error-401", "LAB_E401", "HTTP 401: error text inline in chat + toast, not retried", 30)
    step(err, "error-400", "LAB_E400", "HTTP 400: error text inline in chat, not retried", 30)

    step(lambda: (prompt(s, "hello"), time.sleep(3), L.wait_for(s, OC_BUSY, 30, absent=True)))
    L.resize(s, 100, 30)
    time.sleep(2)
    step(lambda: (L.wait_stable(s, 1.0), L.save(s, cli, "ready-idle", "READY", "idle at 100x30 after a normal answer")))

    def small_shell():
        t = time.time()
        prompt(s, "LAB_SHELL again")
        wait_event("tool_call", t, 30)
        L.wait_for(s, OC_CONFIRM, 20)
        L.wait_stable(s, 1.0)
        L.save(s, cli, "confirm-shell", "NEEDS_CONFIRMATION", "bash permission at 100x30")
        L.send_keys(s, "Enter")
        wait_event("stream_end", t, 40, pred=lambda e: _after_tool_done(t))
        time.sleep(3)
    step(small_shell)
    L.resize(s, 200, 50)
    time.sleep(1)
    step(timeline, s, cli, 1, "LAB_FLOW run the flow", OC_CONFIRM, ["Enter"], OC_BUSY)
    step(timeline, s, cli, 2, "LAB_NEWFILE2 write the notes file", OC_CONFIRM, ["Enter"], OC_BUSY)
    L.kill_session(s)


# ============================================================ plain programs
def run_plain():
    cli = "plain"
    work = os.path.join(A.scratch, "work-plain")
    home = os.path.join(A.scratch, "home-plain")
    os.makedirs(work, exist_ok=True)
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, ".bashrc"), "w") as f:
        f.write("PS1='labb@host:\\w\\$ '\n")
    sh = write_script("run-plain.sh", f"export HOME='{home}'; cd '{work}'; exec bash -i\n")
    with open(os.path.join(work, "progress.py"), "w") as f:
        f.write(
            "import sys, time\n"
            "n = 60\n"
            "for i in range(n + 1):\n"
            "    pct = i * 100 // n\n"
            "    bar = '#' * (i * 40 // n) + '-' * (40 - i * 40 // n)\n"
            "    sys.stdout.write(f'\\rDownloading labb_pkg-1.0.tar.gz [{bar}] {pct:3d}% {i*0.5:.1f}/30.0 MB')\n"
            "    sys.stdout.flush(); time.sleep(0.5)\n"
            "print()\n")
    with open(os.path.join(work, "crash.py"), "w") as f:
        f.write("import json\n\ndef load(p):\n    return json.loads(open(p).read())\n\nload('missing.json')\n")
    with open(os.path.join(work, "apt_like.sh"), "w") as f:
        f.write("#!/bin/bash\necho 'Reading package lists... Done'\necho 'Building dependency tree... Done'\n"
                "echo 'Reading state information... Done'\necho 'The following NEW packages will be installed:'\n"
                "echo '  libfoo1 libbar2 foo-tools'\necho '0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.'\n"
                "echo 'Need to get 1,234 kB of archives.'\necho 'After this operation, 5,678 kB of additional disk space will be used.'\n"
                "read -p 'Do you want to continue? [Y/n] ' a\necho \"answer=$a\"\n")
    os.chmod(os.path.join(work, "apt_like.sh"), 0o755)
    for w, h in ((200, 50), (100, 30)):
        s = f"plain{w}"
        L.kill_session(s)
        L.new_session(s, sh, w, h)
        time.sleep(1)
        step(lambda: (L.send_text(s, "ls"), L.send_keys(s, "Enter"), time.sleep(1),
                      L.save(s, cli, "bash-prompt", "READY", "bash prompt 'labb@host:~...$ ' after ls")))
        step(lambda: (L.send_text(s, "python3 progress.py"), L.send_keys(s, "Enter"), time.sleep(6),
                      L.save(s, cli, "progress-bar", "BUSY", "long-running command printing a % progress bar"),
                      time.sleep(24), L.save(s, cli, "progress-bar-late", "BUSY", "progress bar ~60%")))
        step(lambda: (L.wait_for(s, r"100%", 40), time.sleep(1), L.send_keys(s, "C-l"), time.sleep(0.5)))
        step(lambda: (L.send_text(s, "read -p 'Continue? (y/N) ' ans"), L.send_keys(s, "Enter"), time.sleep(1),
                      L.save(s, cli, "read-continue-yN", "NEEDS_CONFIRMATION", "bash read -p 'Continue? (y/N) '"),
                      L.send_keys(s, "n", "Enter"), time.sleep(0.5), L.send_keys(s, "C-l"), time.sleep(0.5)))
        step(lambda: (L.send_text(s, "./apt_like.sh"), L.send_keys(s, "Enter"), time.sleep(1),
                      L.save(s, cli, "apt-continue-Yn", "NEEDS_CONFIRMATION", "apt-style 'Do you want to continue? [Y/n]'"),
                      L.send_keys(s, "n", "Enter"), time.sleep(0.5), L.send_keys(s, "C-l"), time.sleep(0.5)))
        step(lambda: (L.send_text(s, "python3 crash.py"), L.send_keys(s, "Enter"), time.sleep(1.5),
                      L.save(s, cli, "traceback-then-prompt", "ERROR",
                             "Python traceback (FileNotFoundError) followed by the shell prompt; shell itself is ready"),
                      L.send_keys(s, "C-l"), time.sleep(0.5)))
        step(lambda: (L.send_text(s, "python3 -q"), L.send_keys(s, "Enter"), time.sleep(1.5),
                      L.save(s, cli, "python-repl-idle", "READY", "python REPL idle at '>>> '"),
                      L.send_text(s, "import time; time.sleep(30)"), L.send_keys(s, "Enter"), time.sleep(1.5),
                      L.save(s, cli, "python-repl-busy", "BUSY", "python REPL running time.sleep(30) (no prompt)"),
                      L.send_keys(s, "C-c"), time.sleep(1),
                      L.save(s, cli, "python-repl-keyboardinterrupt", "ERROR",
                             "KeyboardInterrupt traceback then '>>> ' (REPL ready again; error shown)"),
                      L.send_text(s, "exit()"), L.send_keys(s, "Enter")))
        L.kill_session(s)


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--port", type=int, default=18200)
    ap.add_argument("what", nargs="*", default=["plain", "gemini", "aider", "opencode"])
    A = ap.parse_args()
    A.scratch = os.path.abspath(A.scratch)
    L.ensure_labels()
    for w in A.what:
        print(f"=== {w}", flush=True)
        try:
            {"gemini": run_gemini, "aider": run_aider, "opencode": run_opencode, "plain": run_plain,
             "qwen": run_qwen}[w]()
        except Exception:  # noqa: BLE001
            traceback.print_exc()


if __name__ == "__main__":
    main()
