#!/usr/bin/env python3
"""Variations of users' set-ups for Codex CLI (issue 22), against fake_model_server.py on loopback:
a custom status line ([tui] status_line, with and without colours), vim mode, plan mode
(Shift+Tab), approval policy "never", a plan list (the update_plan tool), replies in German and
Japanese, a question in prose, sizes 80x24 to 250x80, and the update menu left in the scrollback.

    codex_variations.py CODEX_NPM_PREFIX SCREENS_DIR [VARIATION ...] [--port 18271] [--flags --no-daemon]

Labels are the driver's own actions and waits on the server's events; a BUSY screen is saved only
while Codex's busy line ("esc to interrupt") shows, or while the model's stream is still open.
Each screen's pane title and folder go to SCREENS_DIR/titles.tsv (labb_tmux.save): Codex titles
its pane with a spinner frame while it works and the bare project name once it stops.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("LABB_SOCKET", "labV-codex")

BUSY = r"esc to interrupt"
IDLE = r"Ask Codex to do anything|for shortcuts|^› "
CONFIRM = r"Would you like to|Yes, proceed|Allow|approve"
PLAN = [("Read the configuration", "completed"), ("Update the parser", "in_progress"),
        ("Write the tests", "pending"), ("Run the test suite", "pending")]
SCENARIO = {
    "rules": [
        {"match": "SLOWTEXT", "action": {"type": "text", "tokens": 40, "delay": 0.35}},
        {"match": "PLANLIST", "action": {
            "type": "tool", "tool": "named", "pre_text": "I will plan the work first.", "delay": 0.2,
            "args_by_name": {"update_plan": {"explanation": "Four steps", "plan": [
                {"step": s, "status": st} for s, st in PLAN]}},
            "then": [{"type": "text", "tokens": 40, "delay": 0.35}]}},
        {"match": "SLEEPBASH", "action": {"type": "tool", "tool": "bash",
                                          "command": "sleep 8 && echo cleaned",
                                          "description": "Wait, then print a marker",
                                          "pre_text": "Running the slow command.", "delay": 0.2}},
        {"match": "LANGDE", "action": {"type": "text", "delay": 0.2, "text": (
            "Gerne! Ich habe die Datei geprüft: Die Funktion läuft korrekt, aber die Fehlerbehandlung "
            "fehlt noch. Möchten Sie, dass ich sie ergänze?")}},
        {"match": "LANGJA", "action": {"type": "text", "delay": 0.2, "text": (
            "了解しました。 ファイルを確認しました。 関数は正しく動作しますが、 エラー処理が まだ ありません。 追加しますか？")}},
        {"match": "QUESTION", "action": {"type": "text", "delay": 0.05, "text": (
            "I can do that in two ways: rewrite the parser or patch the tokenizer. Which one do you prefer?")}},
    ],
    "after_tool": {"type": "text", "text": "The command finished. All done.", "delay": 0.05},
}
STATUS_ITEMS = ["model-with-reasoning", "context-remaining", "current-dir", "git-branch", "codex-version"]
# name -> (size, [tui] lines, top-level config lines, what to run)
VARIATIONS = {
    "base-80x24": ((80, 24), [], [], "all"),
    "wide-250x80": ((250, 80), [], [], "all"),
    "status-line": ((200, 50), [f"status_line = {json.dumps(STATUS_ITEMS)}"], [], "all"),
    "status-line-colour-vim": ((120, 40), [f"status_line = {json.dumps(STATUS_ITEMS)}",
                                           "status_line_use_colors = true", "vim_mode_default = true"],
                               [], "all"),
    "never-lang": ((160, 45), [], ['approval_policy = "never"'], "lang"),
    "plan-mode": ((160, 45), [], [], "plan"),
    "update-menu": ((120, 40), [], [], "update"),
}

A = None
L = None


def events(kind=None):
    fn = os.path.join(A.scr, "logs", "events.jsonl")
    out = []
    if os.path.exists(fn):
        for line in open(fn):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if kind == "turn_end" and e.get("kind") == "response_end" and e.get("main") \
                    and "end_turn" in json.dumps(e):
                out.append(e)
            elif kind is not None and e.get("kind") == kind:
                out.append(e)
    return out


def wait_count(kind, n, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if len(events(kind)) > n:
            return
        time.sleep(0.2)
    raise TimeoutError(f"no new {kind} event")


def config(v):
    size, tui, top, what = VARIATIONS[v]
    home = os.path.join(A.scr, f"home-{v}")
    os.makedirs(os.path.join(home, ".codex"), exist_ok=True)
    proj = os.path.join(A.scr, f"proj-{v}")
    os.makedirs(os.path.join(proj, "build"), exist_ok=True)
    with open(os.path.join(proj, "README.md"), "w") as f:
        f.write("# Demo project\n")
    subprocess.run(["git", "init", "-q", proj], check=False)
    policy = [] if any(t.startswith("approval_policy") for t in top) else ['approval_policy = "on-request"']
    update = "true" if what == "update" else "false"
    text = "\n".join(['model = "gpt-5-codex"', 'model_provider = "fake"', *policy, *top,
                      'sandbox_mode = "read-only"', f"check_for_update_on_startup = {update}",
                      f'[projects."{proj}"]', 'trust_level = "trusted"', "",
                      "[model_providers.fake]", 'name = "Fake lab model"',
                      f'base_url = "http://127.0.0.1:{A.port}/v1"', 'env_key = "OPENAI_API_KEY"',
                      'wire_api = "responses"', "request_max_retries = 2", "stream_max_retries = 2",
                      "supports_websockets = false", "", "[analytics]", "enabled = false", "",
                      "[tui]", *tui, ""])
    with open(os.path.join(home, ".codex", "config.toml"), "w") as f:
        f.write(text)
    if what == "update":
        with open(os.path.join(home, ".codex", "version.json"), "w") as f:
            json.dump({"latest_version": "9.0.0", "dismissed_version": None,
                       "last_checked_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}, f)
    script = os.path.join(A.scr, f"run-{v}.sh")
    with open(script, "w") as f:
        f.write(f"""#!/bin/bash
export HOME='{home}' CODEX_HOME='{home}/.codex' OPENAI_API_KEY=sk-fake-lab-key TERM=tmux-256color
export PATH='{A.prefix}/node_modules/.bin':"$PATH"
cd '{proj}'
codex {A.flags}
echo "[codex exited rc=$?]"
exec bash --norc -i
""")
    os.chmod(script, 0o755)
    return script, size, what


def prompt(s, text):
    L.send_text(s, text)
    time.sleep(0.5)
    L.send_keys(s, "Enter")


def busy_save(s, v, case, note, n_end=None):
    """BUSY while Codex's status line says so, or (Codex draws no mark while it streams text)
    while the server's answer to this turn is still streaming."""
    if n_end is not None and len(events("turn_end")) == n_end and not __import__("re").search(BUSY, L.capture(s)):
        L.save(s, "codex", f"{v}-{case}", "BUSY", f"{v}: {note} (the model's stream is still open)")
        return
    L.wait_for(s, BUSY, 20)
    L.save(s, "codex", f"{v}-{case}", "BUSY", f"{v}: {note}")


def idle_save(s, v, case, note, n_end):
    wait_count("turn_end", n_end, 90)
    L.wait_for(s, BUSY, 60, absent=True)
    L.wait_stable(s, 2.5, 40)
    L.save(s, "codex", f"{v}-{case}", "READY", f"{v}: {note}")


def turn(s, v, text, case, note, busy_note):
    n = len(events("turn_end"))
    prompt(s, text)
    time.sleep(4)
    busy_save(s, v, f"busy-{case}", busy_note, n)
    idle_save(s, v, f"ready-after-{case}", note, n)


def shell(s, v, confirm=True):
    n = len(events("turn_end"))
    prompt(s, "Run the slow command SLEEPBASH")
    if confirm:
        L.wait_for(s, CONFIRM, 40)
        L.wait_stable(s, 1.5)
        L.save(s, "codex", f"{v}-confirm-shell", "NEEDS_CONFIRMATION", f"{v}: approval for 'sleep 8 && echo cleaned'")
        L.send_keys(s, "y")
    time.sleep(3.5)
    busy_save(s, v, "busy-tool-running", "the approved command is running (sleep 8)")
    idle_save(s, v, "ready-after-tool", "idle after the command", n)


def run_variation(v):
    script, size, what = config(v)
    s = f"cv-{v}"[:30]
    L.kill_session(s)
    L.new_session(s, script, size[0], size[1])
    try:
        if what == "update":
            L.wait_for(s, r"Update available", 40)
            L.wait_stable(s, 1.5)
            L.save(s, "codex", f"{v}-confirm-update-menu", "NEEDS_CONFIRMATION", f"{v}: start-up menu 'Update available!'")
            L.send_keys(s, "Down")
            time.sleep(0.5)
            L.send_keys(s, "Enter")  # skip
        L.wait_for(s, IDLE, 60)
        L.wait_stable(s, 3.0, 40)
        L.save(s, "codex", f"{v}-ready-startup", "READY", f"{v}: idle right after start-up")
        if what == "plan":
            L.send_keys(s, "BTab")
            time.sleep(1.5)
            L.wait_stable(s, 1.5)
            L.save(s, "codex", f"{v}-ready-plan-mode", "READY", f"{v}: idle after Shift+Tab (plan / collaboration mode)")
        step(turn, s, v, "Please write a long paragraph SLOWTEXT", "streaming", "idle after a streamed answer",
             "model streaming text")
        step(turn, s, v, "Plan the work PLANLIST", "plan-list", "idle after a turn with a plan list",
             "plan list shown, model streaming after update_plan")
        if what in ("lang", "plan"):
            for key in ("LANGDE", "LANGJA", "QUESTION"):
                n = len(events("turn_end"))
                step(lambda k=key, n=n: (prompt(s, f"Reply please {k}"), time.sleep(2),
                                         idle_save(s, v, f"ready-{k.lower()}", f"idle after a reply ({k})", n)))
        if what != "plan":
            step(shell, s, v, "never" not in v)
    finally:
        L.send_keys(s, "C-c")
        time.sleep(0.5)
        L.send_keys(s, "C-c")
        time.sleep(0.5)
        L.kill_session(s)


def step(fn, *a):
    try:
        return fn(*a)
    except Exception as e:  # noqa: BLE001
        print(f"STEP FAILED {getattr(fn, '__name__', fn)}: {e}", flush=True)
        return None


def main():
    global A, L
    ap = argparse.ArgumentParser()
    ap.add_argument("prefix")
    ap.add_argument("screens")
    ap.add_argument("variations", nargs="*")
    ap.add_argument("--port", type=int, default=18271)
    ap.add_argument("--flags", default="--no-daemon")
    A = ap.parse_args()
    A.prefix = os.path.abspath(A.prefix)
    codex = os.path.join(A.prefix, "node_modules", ".bin", "codex")
    if A.flags and subprocess.run([codex, *A.flags.split(), "--version"], capture_output=True,
                                  env={**os.environ, "HOME": tempfile.gettempdir()}).returncode != 0:
        A.flags = ""  # releases before ~0.150 refuse --no-daemon
    os.environ["LABB_SCREENS"] = os.path.abspath(A.screens)
    import labb_tmux
    L = labb_tmux
    A.scr = tempfile.mkdtemp(prefix="labVcx.")
    os.makedirs(os.path.join(A.scr, "logs"))
    with open(os.path.join(A.scr, "scenario.json"), "w") as f:
        json.dump(SCENARIO, f)
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_model_server.py"), "--port", str(A.port),
                            "--logdir", os.path.join(A.scr, "logs"), "--scenario",
                            os.path.join(A.scr, "scenario.json")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{A.port}/_control/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        L.ensure_labels()
        for v in A.variations or list(VARIATIONS):
            print(f"=== codex {v}", flush=True)
            try:
                run_variation(v)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
    finally:
        srv.terminate()
        L.tmux("kill-server", check=False)
        if not os.environ.get("LABB_KEEP"):
            shutil.rmtree(A.scr, ignore_errors=True)


if __name__ == "__main__":
    main()
