#!/usr/bin/env python3
"""Variations of users' set-ups for Gemini CLI, Qwen Code, opencode and aider (issue 22): each run
starts the CLI with one variation (a size, a theme, vim mode, an approval or plan mode, custom
footer items, replies in another language, a task list) against the lab B fake server and saves a
short ground-truth sequence: start-up, streaming, a task list at work, a shell approval, the tool
running, idle after each, a question in prose above the idle prompt.

    variations_drive.py --scratch DIR --port PORT CLI [VARIATION ...]

CLI is gemini | qwen | opencode | aider. DIR must hold npm/ (gemini, qwen, opencode) or venv/
(aider), as run_variations.sh sets up. Screens go to $LABB_SCREENS/<cli>/<variation>-<case>-WxH.txt
with labels.tsv rows; a label is the driver's own action and wait, and BUSY screens are saved only
while the CLI's busy mark is on screen (checked at capture: a screen without it is not saved).
"""
import argparse
import json
import os
import re
import time
import traceback

import labb_drive as D  # run as a file: its folder is first on the import path
import labb_tmux as L

PY_SLEEP = 'python3 -c "import time; time.sleep(8)" && echo lab-shell-done'


class Cli:
    """What the driver needs to know of one CLI: its marks and how it is set up."""

    def __init__(self, name, idle, busy, confirm, approve, env, settings_file=None):
        self.name, self.idle, self.busy, self.confirm = name, idle, busy, confirm
        self.approve, self.env, self.settings_file = approve, env, settings_file


def _merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v


def patch_settings(path, patch):
    with open(path) as f:
        data = json.load(f)
    _merge(data, patch)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)


CLIS = {
    "gemini": Cli("gemini-cli", r"Type your message or @path/to/file|^ *> |^ *\* ", r"esc to cancel",
                  r"Allow execution of|Apply this change\?|Allow once|Allow for this session",
                  ["1"], lambda tag: D.gemini_env(tag), ".gemini/settings.json"),
    "qwen": Cli("qwen-code", r"Type your message or @path/to/file|^ *> ", r"esc to cancel",
                r"Allow execution of|Apply this change\?|Yes, allow once|Waiting for user confirmation",
                ["1"], lambda tag: D.qwen_env(tag), ".qwen/settings.json"),
    "opencode": Cli("opencode", r"Ask anything|ctrl\+p commands|tab agents", r"esc interrupt",
                    r"Permission required|△ ", ["Enter"], lambda tag: D.opencode_env(tag),
                    ".config/opencode/opencode.json"),
    "aider": Cli("aider", r"^(?:\w+)?> ?$", r"Waiting for|Thinking", r"\(Y\)es/\(N\)o", ["y", "Enter"],
                 lambda tag: D.aider_env(tag)),
}

# name -> (size, settings patch, extra command-line arguments, what to run)
GEM_FOOTER = {"ui": {"footer": {"items": ["workspace", "git-branch", "model-name", "context-used",
                                          "memory-usage", "session-id"], "showLabels": True,
                                "hideContextPercentage": False}}}
# A user's status-line command: three lines with colours (model, context, git branch and cost),
# or one plain line, as people write them for Claude Code and Qwen Code.
STATUS_3 = r"""#!/bin/bash
input=$(cat)
printf '\033[36mlabb-model\033[0m · ctx 12%% · \033[32m⎇ main\033[0m\n'
printf '\033[33m$0.42\033[0m session · 3 requests\n'
printf 'current: 0.24.4 · latest: 0.24.4\n'
"""
STATUS_1 = r"""#!/bin/bash
input=$(cat)
echo "labb-model | ctx 12% | main"
"""
QWEN_STATUS = {"_files": {".qwen/statusline.sh": STATUS_3},
               "ui": {"statusLine": {"type": "command", "command": "bash ~/.qwen/statusline.sh"}}}
QWEN_STATUS_1 = {"_files": {".qwen/statusline.sh": STATUS_1},
                 "ui": {"statusLine": {"type": "command", "command": "bash ~/.qwen/statusline.sh"}}}

VARIATIONS = {
    "gemini": {
        "base-80x24": ((80, 24), {}, "", "all"),
        "wide-250x80": ((250, 80), {}, "", "all"),
        "footer-items": ((200, 50), GEM_FOOTER, "", "all"),
        "theme-light-vim": ((120, 40), {"ui": {"theme": "GitHub Light"}, "general": {"vimMode": True}},
                            "", "all"),
        "auto-edit-lang": ((160, 45), {}, "--approval-mode auto_edit", "lang"),
        "plan-mode": ((160, 45), {"general": {"defaultApprovalMode": "plan"}}, "", "plan"),
        "yolo": ((100, 30), {}, "--approval-mode yolo", "all"),
    },
    "qwen": {
        "base-80x24": ((80, 24), {}, "", "all"),
        "wide-250x80": ((250, 80), {}, "", "all"),
        "theme-light-vim": ((120, 40), {"ui": {"theme": "GitHub Light"}, "general": {"vimMode": True}},
                            "", "all"),
        "status-line-3": ((200, 50), QWEN_STATUS, "", "all"),
        "status-line-1-vim": ((120, 40), {**QWEN_STATUS_1, "general": {"vimMode": True}}, "", "all"),
        "auto-edit-lang": ((160, 45), {}, "--approval-mode auto-edit", "lang"),
        "plan-mode": ((160, 45), {}, "--approval-mode plan", "plan"),
        "yolo": ((100, 30), {}, "--approval-mode yolo", "all"),
    },
    "opencode": {
        "base-80x24": ((80, 24), {}, "", "all"),
        "wide-250x80": ((250, 80), {}, "", "all"),
        "theme-light": ((120, 40), {"theme": "github"}, "", "all"),
        "allow-lang": ((160, 45), {"permission": {"edit": "allow", "bash": "allow"}}, "", "lang"),
        "plan-agent": ((160, 45), {}, "", "plan"),
    },
    "aider": {
        "base-80x24": ((80, 24), {}, "", "all"),
        "wide-250x80": ((250, 80), {}, "", "all"),
        "light-vim": ((120, 40), {}, "--light-mode --vim", "all"),
        "yes-always-lang": ((160, 45), {}, "--yes-always", "lang"),
        "architect": ((160, 45), {}, "--architect", "all"),
        "no-git": ((120, 40), {}, "", "nogit"),
    },
}


def busy_save(s, cli, case, note, timeout=20):
    """Save a BUSY screen only while the CLI's busy mark shows (opencode and aider stream
    without one in some releases: there the server's open stream is the truth, see labels)."""
    L.wait_for(s, cli.busy, timeout)
    L.save(s, cli.name, case, "BUSY", note)


def wait_idle(s, cli, timeout=90, v=""):
    if cli.name == "aider":
        t0 = time.time()
        while time.time() - t0 < timeout:
            lines = [l for l in L.capture(s).rstrip("\n").split("\n") if l.strip()]
            if lines and re.search(cli.confirm + r".*\]: ?$", lines[-1]):
                # architect mode asks "Edit the files?" after each answer
                last = [l for l in L.wait_stable(s, 1.0).rstrip("\n").split("\n") if l.strip()]
                if last and re.search(cli.confirm + r".*\]: ?$", last[-1]):  # still asking
                    L.save(s, cli.name, f"{v}-confirm-question-{int(time.time()) % 1000}", "NEEDS_CONFIRMATION",
                           f"{v}: aider asks a (Y)es/(N)o question after the answer")
                    L.send_keys(s, "n", "Enter")
                time.sleep(1)
            elif lines and lines[-1].rstrip() in (">", "diff>", "ask>", "architect>", "code>") and len(lines) > 1:
                break
            time.sleep(0.3)
    else:
        L.wait_for(s, cli.busy, timeout, absent=True)
    L.wait_stable(s, 2.0, 40)


def submit(s, cli, text):
    if cli.name == "opencode":
        L.send_text(s, text)
        L.wait_for(s, re.escape(text[:20]), 10)
        time.sleep(0.5)
        L.send_keys(s, "Enter")
    else:
        D.prompt(s, text)


def seq_stream(s, cli, v):
    t = time.time()
    submit(s, cli, "LAB_SLOW tell me a long story")
    D.wait_event("stream_start", t, 30)
    time.sleep(3)
    if cli.name == "aider":
        L.save(s, cli.name, f"{v}-busy-streaming", "BUSY", f"{v}: model streaming text (server stream open)")
        D.wait_event("stream_end", t, 60)
    else:
        busy_save(s, cli, f"{v}-busy-streaming", f"{v}: model streaming text slowly")
    wait_idle(s, cli, v=v)
    L.save(s, cli.name, f"{v}-ready-after-answer", "READY", f"{v}: idle after a streamed answer")


def seq_todo(s, cli, v):
    t = time.time()
    submit(s, cli, "LAB_TODO plan and do the work")
    D.wait_event("stream_start", t, 30)
    time.sleep(2)
    if cli.confirm and re.search(cli.confirm, L.capture(s)):
        L.wait_stable(s, 1.0)
        L.save(s, cli.name, f"{v}-confirm-todo", "NEEDS_CONFIRMATION", f"{v}: approval asked for the task-list tool")
        for k in cli.approve:
            L.send_keys(s, k)
        time.sleep(3)
    if cli.name == "aider":
        L.save(s, cli.name, f"{v}-busy-streaming-2", "BUSY", f"{v}: model streaming text (server stream open)")
    else:
        busy_save(s, cli, f"{v}-busy-todo", f"{v}: task list drawn, model streaming after the todo tool", 30)
    wait_idle(s, cli, v=v)
    L.save(s, cli.name, f"{v}-ready-after-todo", "READY", f"{v}: idle after the task-list turn")


def seq_shell(s, cli, v, expect_confirm=True):
    submit(s, cli, "LAB_PYSHELL run the command")  # python's sleep: Qwen refuses `sleep N;`
    if expect_confirm:
        L.wait_for(s, cli.confirm, 40)
        L.wait_stable(s, 1.0)
        L.save(s, cli.name, f"{v}-confirm-shell", "NEEDS_CONFIRMATION", f"{v}: shell command approval")
        for k in cli.approve:
            L.send_keys(s, k)
    if cli.name == "aider":
        time.sleep(3)
        if not re.search(r"\]: ?$", L.capture(s).rstrip()):  # no question on the last line
            L.save(s, cli.name, f"{v}-busy-tool-running", "BUSY", f"{v}: shell command running")
        time.sleep(7)
        if re.search(cli.confirm, "\n".join(L.capture(s).rstrip().split("\n")[-3:])):
            L.wait_stable(s, 1.0)
            L.save(s, cli.name, f"{v}-confirm-add-output", "NEEDS_CONFIRMATION", f"{v}: add the output to the chat?")
            L.send_keys(s, "n", "Enter")
    else:
        time.sleep(3)
        busy_save(s, cli, f"{v}-busy-tool-running", f"{v}: approved shell command running")
    wait_idle(s, cli, v=v)
    L.save(s, cli.name, f"{v}-ready-after-tool", "READY", f"{v}: idle after the shell tool")


def seq_lang(s, cli, v):
    for tag in ("DE", "JA"):
        submit(s, cli, f"LAB_LANG_{tag} bitte / お願いします")
        time.sleep(2)
        wait_idle(s, cli, v=v)
        L.save(s, cli.name, f"{v}-ready-lang-{tag.lower()}", "READY", f"{v}: idle after a reply in {tag}")
    submit(s, cli, "LAB_QUESTION which way?")
    time.sleep(2)
    wait_idle(s, cli, v=v)
    L.save(s, cli.name, f"{v}-ready-question", "READY", f"{v}: idle after a reply that ends in a question (not a dialog)")


def enter_plan(s, cli, v):
    """opencode: Tab switches to the plan agent; Gemini/Qwen start in plan mode by setting/flag."""
    if cli.name == "opencode":
        L.send_keys(s, "Tab")
        time.sleep(1.5)
        L.wait_stable(s, 1.5)
        L.save(s, cli.name, f"{v}-ready-plan-agent", "READY", f"{v}: idle with the plan agent selected")


def run_variation(key, v):
    cli = CLIS[key]
    size, patch, args, what = VARIATIONS[key][v]
    script, work = cli.env(v)
    home = os.path.join(A.scratch, f"home-{'aider' if key == 'aider' else {'gemini': 'gemini', 'qwen': 'qwen', 'opencode': 'opencode'}[key]}-{v}")
    if key == "qwen" and "--approval-mode" in args:  # qwen_env's script sets the default mode
        with open(script) as f:
            body = f.read()
        with open(script, "w") as f:
            f.write(body.replace("--approval-mode default ", ""))
    patch = dict(patch)
    for rel, text in patch.pop("_files", {}).items():  # e.g. a status-line script in the home
        with open(os.path.join(home, rel), "w") as f:
            f.write(text.replace("$HOME_DIR", home))
    if cli.settings_file and patch:
        patch_settings(os.path.join(home, cli.settings_file), patch)
    if what == "nogit":
        os.system(f"rm -rf '{work}/.git'")
    s = f"v-{key}-{v}"[:30]
    L.kill_session(s)
    for attempt in range(3):  # the tmux server may be exiting after the last session closed
        try:
            L.new_session(s, f"{script} {args}", size[0], size[1])
            break
        except RuntimeError:
            if attempt == 2:
                raise
            time.sleep(1.5)
    try:
        if what == "nogit":
            L.wait_for(s, r"No git repo found", 60)
            L.wait_stable(s, 1.0)
            L.save(s, cli.name, f"{v}-confirm-create-repo", "NEEDS_CONFIRMATION",
                   f"{v}: start-up question 'No git repo found, create one ...? (Y)es/(N)o'")
            L.send_keys(s, "n", "Enter")
        if key == "aider":
            D.aider_idle(s, 90)
        else:
            L.wait_for(s, cli.idle, 90)
        L.wait_stable(s, 2.5, 40)
        L.save(s, cli.name, f"{v}-ready-startup", "READY", f"{v}: idle right after start-up")
        if what == "plan":
            enter_plan(s, cli, v)
        D.step(seq_stream, s, cli, v)
        if key != "aider":
            D.step(seq_todo, s, cli, v)
        if what == "lang":
            D.step(seq_lang, s, cli, v)
        elif what != "plan":
            confirm = not (v.startswith("yolo") or v.startswith("allow") or "yes-always" in v)
            D.step(seq_shell, s, cli, v, confirm)
        elif what == "plan":
            D.step(seq_lang, s, cli, v)
    finally:
        L.kill_session(s)


A = None


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--port", type=int, default=18251)
    ap.add_argument("cli", choices=sorted(CLIS))
    ap.add_argument("variations", nargs="*")
    A = ap.parse_args()
    A.scratch = os.path.abspath(A.scratch)
    D.A = A
    L.ensure_labels()
    for v in A.variations or list(VARIATIONS[A.cli]):
        print(f"=== {A.cli} {v}", flush=True)
        try:
            run_variation(A.cli, v)
        except Exception:  # noqa: BLE001
            traceback.print_exc()


if __name__ == "__main__":
    main()
