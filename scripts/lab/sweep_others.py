#!/usr/bin/env python3
"""The release sweep for Codex, Gemini CLI, Qwen Code and opencode (issue 31): install one release,
drive it against the lab's fake model servers through every screen class a person meets, and
import the capture into the corpus (a third held out, its release in each set's versions.tsv, which
the release table reads).

    sweep_others.py CLI VERSION [--screens DIR] [--port N] [--no-import] [--suffix sweep]
    sweep_others.py codex VERSION --variations   # codex_variations' sessions (-variations sets)

CLI is codex | gemini | qwen | opencode. Releases are installed with `npm install --prefix` into
~/.cache/conductor-pty/sweep/<cli>-<version> (once). The classes, each labelled by the driver's
own action and the wait that followed it (a screen that does not show what the action should have
drawn is not saved):

  idle after start-up (READY); a draft typed, not sent (READY); the `/` list opened by typing `/`
  (READY: the turn has ended, the person is typing); a menu the person opened (`/model`, and for
  Codex `/new` in a git repository: `Where should the new conversation run?`) (NEEDS_CONFIRMATION);
  `!` typed: shell mode, empty and with `ls -la` typed (READY); the `?` shortcuts panel where a
  release draws one (NEEDS_CONFIRMATION); a task-list turn (BUSY, then READY);
  the exit hint after one Ctrl+C (READY); busy streaming, with and without a status line (BUSY); a
  shell approval (NEEDS_CONFIRMATION), the approved command running (BUSY), idle after it (READY);
  Codex's `request_user_input` question form (NEEDS_CONFIRMATION; feature
  `default_mode_request_user_input`); Codex's first-run sign-in screen, no key and no provider
  (NEEDS_CONFIRMATION); Gemini CLI with a GEMINI.md in the project (the `1 GEMINI.md file` line).

Codex's `notify` hook is recorded too (what ends a turn in releases that draw no end mark and set
no title): each session's config.toml runs a small recorder (`notify = [python, recorder, log]`;
Codex appends the event's JSON as one more argument) that appends the time it ran and the event
to SCREENS/hooks-raw/<session>.jsonl. Every saved screen gets one row of SCREENS/hooks.tsv
(`path\tevent\tsince_send`): the "type" of the newest event that ran after the pane's last
prompt was sent (the Enter of `codex_variations.prompt`) and not after the moment just before the
capture, and whose `input-messages` end with that prompt (so a late hook of an earlier turn, or
Codex's own thread-titling side turn, is never taken for it); "" when none did. since_send is
seconds from that Enter to the event. A screen with no prompt sent yet in its pane (start-up,
menus, the sign-in screen) gets an empty row.

Runs as a file (stdlib; imports its neighbours codex_variations, labb_drive, variations_drive).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
NPM = {"codex": "@openai/codex", "gemini": "@google/gemini-cli", "qwen": "@qwen-code/qwen-code",
       "opencode": "opencode-ai"}
CORPUS_CLI = {"codex": "codex", "gemini": "gemini-cli", "qwen": "qwen-code", "opencode": "opencode"}
DRAFT = "refactor the parser and keep the tests"


def install(cli, version):
    prefix = os.path.expanduser(f"~/.cache/conductor-pty/sweep/{cli}-{version}")
    if not os.path.isdir(os.path.join(prefix, "node_modules", ".bin")):
        subprocess.run(["npm", "install", "--prefix", prefix, f"{NPM[cli]}@{version}"], check=True)
    return prefix


def seen(L, s, rx, timeout):
    """wait_for that answers instead of raising: a class the release does not draw is skipped."""
    try:
        L.wait_for(s, rx, timeout, interval=0.1)
        return True
    except TimeoutError:
        return False


def clear_input(L, s, n):
    for _ in range(n):
        L.send_keys(s, "BSpace")
    time.sleep(0.8)


# ------------------------------------------------------------------ Codex

QUESTION_ARGS = {"questions": [
    {"header": "Database", "id": "database", "question": "Which database should the service use?",
     "options": [{"label": "PostgreSQL (Recommended)", "description": "Mature and relational."},
                 {"label": "SQLite", "description": "Embedded, zero setup."}]}]}


# Codex runs notify's argv with the event's JSON appended as the last argument; the recorder
# stamps the time first, then appends one JSON line (one write) to the log named by its argv.
NOTIFY_RECORDER = r"""import json, os, sys, time
t = time.time()
try:
    payload = json.loads(sys.argv[-1]) if len(sys.argv) > 2 else {}
except ValueError:
    payload = {"type": "", "unparsed": sys.argv[-1][:2000]}
if not isinstance(payload, dict):
    payload = {"type": "", "unparsed": repr(payload)[:2000]}
row = {"t": t, "extra_args": len(sys.argv) - 2, "type": payload.get("type", ""), "payload": payload}
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (json.dumps(row) + "\n").encode())
os.close(fd)
"""
HOOKS_HEADER = "path\tevent\tsince_send\n"
CODEX_TITLE_PROMPT = "Generate a concise, single-line task title"  # app/observe/hookevents.py
HOOK_PANES = {}  # tmux session -> {"log": raw log, "sent": time of the last prompt's Enter, "text": it}


def hook_log(screens, v):
    d = os.path.join(screens, "hooks-raw")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, f"{v}.jsonl")


def hook_events(log):
    out = []
    if os.path.isfile(log):
        with open(log, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    return out


def turn_of(event, text):
    """Whether a notify event belongs to the turn that prompt `text` began: its input-messages
    end with that text (Codex's thread-titling side turn sends its own prompt instead)."""
    inputs = event.get("payload", {}).get("input-messages")
    if not isinstance(inputs, list) or not inputs:
        return True  # a release that sends none: the time alone decides
    if isinstance(inputs[0], str) and inputs[0].startswith(CODEX_TITLE_PROMPT):
        return False
    # vim mode's Normal mode eats a prompt's first letters: the tail Codex got still matches
    got, sent = (inputs[-1].strip(), text.strip()) if isinstance(inputs[-1], str) else ("", "")
    return bool(got) and (got == sent or sent.endswith(got))


def record_hooks(L, screens):
    """Wrap labb_tmux.save: stamp the moment just before the capture, save, then (the capture
    taken) write the screen's hooks.tsv row from the pane's notify log."""
    real_save = L.save
    path = os.path.join(screens, "hooks.tsv")

    def save(name, cli, case, state, note):
        size = L.size_of(name)
        at = time.time()  # every event counted ran before this, so before the capture
        plain = real_save(name, cli, case, state, note)
        pane = HOOK_PANES.get(name)
        event, since = "", ""
        if pane and pane.get("sent") is not None:
            time.sleep(0.3)  # a recorder that stamped its time before `at` has written its line
            hits = [e for e in hook_events(pane["log"])
                    if pane["sent"] < e.get("t", 0) <= at and turn_of(e, pane["text"])]
            if hits:
                last = max(hits, key=lambda e: e["t"])
                event, since = last.get("type", ""), f"{last['t'] - pane['sent']:.2f}"
        row = f"{cli}/{case}-{size}.txt\t{event}\t{since}\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size == 0:
                os.write(fd, HOOKS_HEADER.encode())
            os.write(fd, row.encode())
        finally:
            os.close(fd)
        return plain

    L.save = save


def record_codex_hooks(CV, screens):
    """Make codex_variations (CV) record Codex's notify hook for every screen it saves: each
    session's config.toml runs the recorder, each prompt's Enter is stamped, and labb_tmux.save
    writes the screen's hooks.tsv row. Returns the session name -> pane registration to call
    before a session starts."""
    import labb_tmux
    record_hooks(labb_tmux, screens)

    def prompt(s, text):
        """codex_variations.prompt, with the moment its Enter goes in kept for the pane's hooks."""
        CV.L.send_text(s, text)
        time.sleep(0.5)
        if s in HOOK_PANES:
            HOOK_PANES[s].update(sent=time.time(), text=text)
        CV.L.send_keys(s, "Enter")

    CV.prompt = prompt  # CV.turn and CV.shell call it through the module too
    real_config = CV.config

    def config(v):
        script, size, what = real_config(v)
        path = os.path.join(CV.A.scr, f"home-{v}", ".codex", "config.toml")
        with open(path) as f:
            text = f.read()
        # the feature flag is a [features] key, not a [tui] one
        flags = [t for t in CV.VARIATIONS[v][1] if t.startswith("default_mode")]
        for t in flags:
            text = text.replace(t + "\n", "")
        if flags:
            text = text.replace("[analytics]", "[features]\n" + "\n".join(flags) + "\n\n[analytics]")
        # notify is a top-level key: before the first table
        recorder = os.path.join(CV.A.scr, "notify_recorder.py")
        with open(recorder, "w") as f:
            f.write(NOTIFY_RECORDER)
        argv = [sys.executable, recorder, hook_log(screens, v)]
        text = f"notify = {json.dumps(argv)}\n" + text
        with open(path, "w") as f:
            f.write(text)
        return script, size, what

    CV.config = config

    def watch_pane(session, v):
        HOOK_PANES[session] = {"log": hook_log(screens, v), "sent": None, "text": None}

    return watch_pane


def codex_variations(a):
    """codex_variations.py's own sessions (every set-up variation), with the hook recorded."""
    os.environ.setdefault("LABB_SOCKET", f"variations-codex-{a.version}")
    import codex_variations as CV
    watch_pane = record_codex_hooks(CV, a.screens)
    real_run = CV.run_variation

    def run_variation(v):
        watch_pane(f"cv-{v}"[:30], v)  # codex_variations' own session name
        return real_run(v)

    CV.run_variation = run_variation
    sys.argv = [sys.argv[0], a.prefix, a.screens, "--port", str(a.port)]
    CV.main()


def codex_sweep(a):
    os.environ.setdefault("LABB_SOCKET", f"sweep-codex-{a.version}")  # not the variations' socket
    import codex_variations as CV
    watch_pane = record_codex_hooks(CV, a.screens)
    CV.SCENARIO["rules"].append({"match": "ASKFORM", "action": {
        "type": "tool", "tool": "named", "pre_text": "I need one answer first.", "delay": 0.1,
        "args_by_name": {"request_user_input": QUESTION_ARGS}}})
    CV.SCENARIO["rules"].append({"match": "LONGSLOW", "action": {"type": "text", "tokens": 60, "delay": 0.4}})
    CV.VARIATIONS.clear()
    CV.VARIATIONS.update({
        "sweep-120x40": ((120, 40), ["default_mode_request_user_input = true"], [], "sweep"),
        "sweep-status-80x24": ((80, 24), [f"status_line = {json.dumps(CV.STATUS_ITEMS)}"], [], "sweep"),
    })
    CV.run_variation = lambda v: codex_session(CV, v, watch_pane)
    sys.argv = [sys.argv[0], a.prefix, a.screens, "--port", str(a.port)]
    if not a.first_run_only:
        CV.main()
    codex_first_run(a)


def codex_session(CV, v, watch_pane):
    L = CV.L
    script, size, _ = CV.config(v)
    s = f"sw-{v}"[:30]
    L.kill_session(s)
    watch_pane(s, v)
    L.new_session(s, script, size[0], size[1])
    try:
        CV.step(startup_menu, L, s, v)
        L.wait_for(s, CV.IDLE, 60)
        L.wait_stable(s, 3.0, 40)
        if re.search(STARTUP_MENU, L.capture(s)):
            return  # a menu still up: no screen of this session can be labelled by its actions
        L.save(s, "codex", f"{v}-ready-startup", "READY", f"{v}: idle right after start-up")
        CV.step(generic_menus, L, s, "codex", v, CV.IDLE, "/model", r"Select Model|Select model|reasoning")
        CV.step(sent_turn, CV, s, v, "Please write a long paragraph LONGSLOW", "streaming",
                "idle after a streamed answer", "model streaming text")
        CV.step(codex_interrupt, CV, s, v)
        CV.step(codex_question, CV, s, v)
        CV.step(codex_new_menu, L, s, v)
        CV.step(CV.shell, s, v, True)
        # last: 0.171 quits on the first Ctrl+C at an empty composer (no hint)
        CV.step(exit_hint, L, s, "codex", v, r"(?i)again to (quit|exit)")
    finally:
        L.send_keys(s, "C-c")
        time.sleep(0.5)
        L.send_keys(s, "C-c")
        time.sleep(0.5)
        L.kill_session(s)


# 0.11x: a model-upgrade notice asks at start-up (`Choose how you'd like Codex to proceed.`,
# `› 1. Try new model`, `2. Use existing model`); its `› 1.` row looks like the composer's `› `.
STARTUP_MENU = r"(?i)press enter to (?:confirm|continue)|Choose how you'd like Codex to proceed"


def startup_menu(L, s, v):
    if not seen(L, s, STARTUP_MENU, 8):
        return
    L.wait_stable(s, 1.5)
    L.save(s, "codex", f"{v}-confirm-startup-menu", "NEEDS_CONFIRMATION", f"{v}: a menu at start-up")
    L.send_keys(s, "Down")
    time.sleep(0.5)
    L.send_keys(s, "Enter")
    L.wait_for(s, STARTUP_MENU, 10, absent=True)


def sent_turn(CV, s, v, text, case, note, busy_note):
    """CV.turn, but only once the server has the request: a prompt typed into a menu or lost
    never reaches it, and then no screen after it is BUSY."""
    requests = len(CV.events("request"))
    n = len(CV.events("turn_end"))
    CV.prompt(s, text)
    deadline = time.time() + 20
    while len(CV.events("request")) == requests:
        if time.time() > deadline:
            raise TimeoutError("the prompt never reached the server")
        time.sleep(0.2)
    time.sleep(4)
    CV.busy_save(s, v, f"busy-{case}", busy_note, n)
    CV.idle_save(s, v, f"ready-after-{case}", note, n)


def codex_interrupt(CV, s, v):
    """Esc while the reply streams: `■ Conversation interrupted - tell the model what to do
    differently…`, which wraps onto a second line in a narrow pane."""
    L = CV.L
    requests = len(CV.events("request"))
    CV.prompt(s, "Please write a long paragraph LONGSLOW")
    deadline = time.time() + 20
    while len(CV.events("request")) == requests:
        if time.time() > deadline:
            raise TimeoutError("the prompt never reached the server")
        time.sleep(0.2)
    time.sleep(3)
    L.send_keys(s, "Escape")
    if seen(L, s, r"Conversation interrupted", 10):
        L.wait_stable(s, 2.0)
        L.save(s, "codex", f"{v}-ready-interrupted", "READY", f"{v}: Esc while the reply streamed")


def codex_question(CV, s, v):
    L = CV.L
    n = len(CV.events("turn_end"))
    CV.prompt(s, "Set up the service ASKFORM")
    if not seen(L, s, r"enter to submit|Question 1/", 30):
        return
    L.wait_stable(s, 1.5)
    L.save(s, "codex", f"{v}-confirm-question-form", "NEEDS_CONFIRMATION",
           f"{v}: request_user_input form (Question 1/1, numbered answers)")
    L.send_keys(s, "Down")
    time.sleep(0.8)
    L.wait_stable(s, 1.0)
    L.save(s, "codex", f"{v}-confirm-question-form-second", "NEEDS_CONFIRMATION",
           f"{v}: request_user_input form, second answer highlighted")
    L.send_keys(s, "Enter")
    CV.idle_save(s, v, "ready-after-question", "idle after the answered question", n)


def codex_new_menu(L, s, v):
    L.send_text(s, "/new")
    time.sleep(0.6)
    L.send_keys(s, "Enter")
    if not seen(L, s, r"Where should the new conversation run", 10):
        L.send_keys(s, "Escape")
        return
    L.wait_stable(s, 1.0)
    L.save(s, "codex", f"{v}-confirm-new-worktree-menu", "NEEDS_CONFIRMATION",
           f"{v}: /new in a git repository: 'Where should the new conversation run?'")
    L.send_keys(s, "Escape")
    time.sleep(1.0)
    L.wait_stable(s, 1.5)


def codex_first_run(a):
    """No key, no provider: Codex starts at its sign-in screen."""
    import labb_tmux as L
    home = tempfile.mkdtemp(prefix="sweep-codex-login.")
    proj = os.path.join(home, "proj")
    os.makedirs(proj)
    os.makedirs(os.path.join(home, ".codex"))  # Codex refuses a CODEX_HOME that does not exist
    for size in ((120, 40), (80, 24)):
        s = f"sw-login-{size[0]}"
        cmd = (f"env -u OPENAI_API_KEY HOME={home} CODEX_HOME={home}/.codex TERM=tmux-256color "
               f"PATH={a.prefix}/node_modules/.bin:$PATH bash -c 'cd {proj} && codex'")
        L.kill_session(s)
        L.new_session(s, cmd, *size)
        try:
            if seen(L, s, r"Sign in with ChatGPT|Provide your own API key|API key", 40):
                L.wait_stable(s, 2.0)
                L.save(s, "codex", "first-run-confirm-sign-in", "NEEDS_CONFIRMATION",
                       "first run without a key: the sign-in screen")
        finally:
            L.send_keys(s, "C-c")
            time.sleep(0.5)
            L.kill_session(s)
    # without a provider Codex starts its app-server daemon from the scratch home: stop what runs
    # from there (only that folder's processes)
    for line in subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines():
        pid, _, args = line.strip().partition(" ")
        if home in args and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 15)
            except OSError:
                pass
    shutil.rmtree(home, ignore_errors=True)


# ------------------------------------------------------------------ shared classes


def generic_menus(L, s, cli, v, idle_rx, menu_cmd, menu_rx):
    """A draft, the `/` list, then a menu the person opens (and closes with Escape)."""
    L.send_text(s, DRAFT)
    L.wait_for(s, re.escape(DRAFT[:20]), 10)
    L.wait_stable(s, 1.5)
    L.save(s, cli, f"{v}-ready-draft", "READY", f"{v}: idle with a draft typed, not sent")
    clear_input(L, s, len(DRAFT) + 2)
    L.send_text(s, "/")
    time.sleep(1.0)
    L.wait_stable(s, 1.5)
    L.save(s, cli, f"{v}-ready-slash-list", "READY", f"{v}: the / list opened by typing '/' at the idle prompt")
    clear_input(L, s, 3)
    L.send_text(s, menu_cmd)
    time.sleep(0.6)
    L.send_keys(s, "Enter")
    if seen(L, s, menu_rx, 10):
        L.wait_stable(s, 1.5)
        L.save(s, cli, f"{v}-confirm-menu-{menu_cmd.strip('/')}", "NEEDS_CONFIRMATION",
               f"{v}: {menu_cmd} menu the person opened")
    L.send_keys(s, "Escape")
    time.sleep(1.0)
    L.wait_for(s, idle_rx, 10)
    L.wait_stable(s, 1.5)


# `!` at an empty prompt: Gemini CLI and Qwen Code switch to shell mode, opencode to its shell
SHELL_MODE = r"(?i)shell mode|^ *! +|^ *!\xa0|^ *\$ "
# `?` at an empty prompt: the shortcuts panel in the releases that have one (else a plain `?`)
SHORTCUTS = r"(?i)keyboard shortcuts|for shell mode|shift\+tab|ctrl\+[a-z] +\w+.*\n.*ctrl\+[a-z]"


def shell_mode(L, s, cli, v, idle_rx):
    """`!` typed at the idle prompt, then `ls -la` after it: the person is typing (READY)."""
    L.send_text(s, "!")
    time.sleep(1.0)
    screen = L.wait_stable(s, 1.0)
    if re.search(SHELL_MODE, screen, re.M):
        L.save(s, cli, f"{v}-ready-shell-mode", "READY", f"{v}: '!' typed at the idle prompt: shell mode, empty")
        L.send_text(s, "ls -la")
        time.sleep(0.8)
        L.wait_stable(s, 1.0)
        L.save(s, cli, f"{v}-ready-shell-mode-draft", "READY", f"{v}: shell mode with 'ls -la' typed, not sent")
        clear_input(L, s, 7)
    L.send_keys(s, "BSpace")  # the `!` (or shell mode itself, which a backspace on empty leaves)
    time.sleep(0.5)
    if re.search(SHELL_MODE, L.capture(s), re.M):
        L.send_keys(s, "Escape")
    L.wait_for(s, idle_rx, 10)
    L.wait_stable(s, 1.5)


def shortcuts_panel(L, s, cli, v, idle_rx):
    """`?` at the idle prompt: a shortcuts panel the person opened (NEEDS_CONFIRMATION, as for
    Claude Code), kept only when the panel is drawn."""
    before = L.capture(s)
    L.send_text(s, "?")
    time.sleep(1.0)
    screen = L.wait_stable(s, 1.0)
    # only lines the `?` drew count: Gemini CLI's idle screen already says `Shift+Tab to accept
    # edits`, which would otherwise hide its panel (`Shortcuts See /help for more`)
    old = set(before.split("\n"))
    drawn = "\n".join(line for line in screen.split("\n") if line not in old)
    if re.search(SHORTCUTS, drawn):
        L.save(s, cli, f"{v}-confirm-shortcuts-panel", "NEEDS_CONFIRMATION", f"{v}: the '?' shortcuts panel a person opened")
        L.send_keys(s, "Escape")
        time.sleep(0.6)
    clear_input(L, s, 2)
    L.wait_for(s, idle_rx, 10)
    L.wait_stable(s, 1.5)


def exit_hint(L, s, cli, v, hint_rx):
    L.send_keys(s, "C-c")
    if seen(L, s, hint_rx, 3):
        L.save(s, cli, f"{v}-ready-exit-hint", "READY", f"{v}: one Ctrl+C at the idle prompt: the exit hint")
    L.wait_for(s, hint_rx, 10, absent=True)
    L.wait_stable(s, 1.5)


# ------------------------------------------------------------------ Gemini CLI, Qwen Code, opencode

MENUS = {"gemini": ("/model", r"Select Model|Model\b.*\n.*(●|›)|Gemini 2"),
         "qwen": ("/model", r"Select Model|Select model|labb-model"),
         "opencode": ("/models", r"Select model|Search")}
# opencode quits on the first Ctrl+C (no hint): its pattern never matches, the class is skipped
EXIT_HINTS = {"gemini": r"again to exit", "qwen": r"again to exit", "opencode": r"again to exit"}


def lab_b_sweep(a):
    os.environ.setdefault("LABB_SOCKET", f"sweep-{a.cli}-{a.version}")
    os.environ["LABB_SCREENS"] = os.path.abspath(a.screens)
    import labb_drive as D
    import labb_tmux as L
    import variations_drive as VD
    scratch = tempfile.mkdtemp(prefix=f"sweep-{a.cli}.")
    os.symlink(a.prefix, os.path.join(scratch, "npm"))
    os.makedirs(os.path.join(scratch, "logs"))
    args = argparse.Namespace(scratch=scratch, port=a.port)
    D.A = VD.A = args
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_openai_gemini_server.py"), "--port",
                            str(a.port), "--logdir", os.path.join(scratch, "logs", f"server-{a.port}")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_health(a.port)
        L.ensure_labels()
        for v, size, extra in (("sweep-120x40", (120, 40), {}), ("sweep-context-80x24", (80, 24), {"context": True})):
            try:
                lab_b_session(a, D, L, VD, v, size, extra)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
    finally:
        srv.terminate()
        L.tmux("kill-server", check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def lab_b_session(a, D, L, VD, v, size, extra):
    cli = VD.CLIS[a.cli]
    script, work = cli.env(v)
    if extra.get("context"):
        name = {"gemini": "GEMINI.md", "qwen": "QWEN.md", "opencode": "AGENTS.md"}[a.cli]
        with open(os.path.join(work, name), "w") as f:
            f.write("# Project notes\nUse four spaces.\n")
    s = f"sw-{a.cli}-{v}"[:30]
    L.kill_session(s)
    L.new_session(s, script, *size)
    try:
        L.wait_for(s, cli.idle, 90)
        L.wait_stable(s, 2.5, 40)
        L.save(s, cli.name, f"{v}-ready-startup", "READY", f"{v}: idle right after start-up")
        D.step(generic_menus, L, s, cli.name, v, cli.idle, *MENUS[a.cli])
        D.step(shell_mode, L, s, cli.name, v, cli.idle)
        D.step(shortcuts_panel, L, s, cli.name, v, cli.idle)
        D.step(VD.seq_stream, s, cli, v)
        D.step(VD.seq_todo, s, cli, v)
        D.step(VD.seq_shell, s, cli, v, True)
        D.step(exit_hint, L, s, cli.name, v, EXIT_HINTS[a.cli])
    finally:
        L.kill_session(s)


def wait_health(port):
    for _ in range(50):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_control/health", timeout=1)
            return
        except OSError:
            time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli", choices=sorted(NPM))
    ap.add_argument("version")
    ap.add_argument("--screens")
    ap.add_argument("--port", type=int, default=18291)
    ap.add_argument("--suffix", help="the imported sets' suffix (default: sweep, or variations "
                                     "with --variations, so neither overwrites the other)")
    ap.add_argument("--no-import", action="store_true")
    ap.add_argument("--first-run-only", action="store_true", help="Codex: only the sign-in screen")
    ap.add_argument("--variations", action="store_true",
                    help="Codex: codex_variations.py's sessions (every set-up) instead of the sweep's, "
                         "with the notify hook recorded (imported as -variations sets)")
    a = ap.parse_args()
    a.suffix = a.suffix or ("variations" if a.variations else "sweep")
    a.prefix = install(a.cli, a.version)
    a.screens = os.path.abspath(a.screens or tempfile.mkdtemp(prefix=f"sweep-screens-{a.cli}-{a.version}."))
    os.makedirs(a.screens, exist_ok=True)
    os.environ["LABB_SCREENS"] = a.screens
    if a.cli == "codex":
        (codex_variations if a.variations else codex_sweep)(a)
    else:
        lab_b_sweep(a)
    print(f"screens: {a.screens}", flush=True)
    if not a.no_import:
        subprocess.run([sys.executable, os.path.join(HERE, "import_capture.py"), a.screens,
                        CORPUS_CLI[a.cli], a.version, "--suffix", a.suffix], check=True)


if __name__ == "__main__":
    main()
